//! nginx's flv module (`flv`): pseudo-streaming of Flash video. A request
//! with `?start=N` gets the file from byte N on, after the 13-byte FLV
//! header (the offset is a keyframe's, which the player took from the
//! file's metadata), so a player can seek without the whole file; without
//! `start` (or with one past the end, or not a number) the file as it is.
//! The answer is otherwise a static file's: ETag, Last-Modified, the
//! conditional and range requests, counted on what is sent (header
//! included), as nginx's range filter sees the handler's buffers.

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::Directive;
use crate::config::table::{Cmd, LOC, R, Set, cmd};
use crate::http::handler::ctx::{ReqCtx, query_arg};
use crate::http::handler::{Step, static_file};

pub static DIRECTIVES: &[Cmd] = &[cmd("flv", LOC, 0, 0, Set::Loc(flv))];

/// What a response that starts mid-file begins with: "FLV", version 1,
/// audio and video present, a 9-byte header, then the first tag's
/// "previous tag size" of 0.
const HEADER: &[u8] = b"FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00";

fn flv(c: &mut LocConf, _: &Directive, _: &mut Ctx) -> R {
    c.flv = true;
    Ok(())
}

/// The location's content handler.
pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    let (file, path) = match static_file::streamable(ctx) {
        static_file::Streamable::File(f, p) => (f, p),
        static_file::Streamable::Answered(step) => return step,
    };
    ctx.filename = Some(path);
    let start = ctx.req.args.as_deref().and_then(|a| query_arg(a, "start")).map_or(0, |v| start_of(v, file.size));
    let head: &[u8] = if start > 0 { HEADER } else { b"" };
    Step::Done(static_file::file_response(ctx, file, head, start))
}

/// `start`'s value as nginx's `ngx_atoof`: decimal digits only, else 0, as
/// is an offset at or past the end.
fn start_of(v: &[u8], size: u64) -> u64 {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    let n = v.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')));
    n.filter(|&n| n < size).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_read_as_nginx_reads_it() {
        assert_eq!(start_of(b"100", 1000), 100);
        assert_eq!(start_of(b"0", 1000), 0);
        assert_eq!(start_of(b"999", 1000), 999);
        assert_eq!(start_of(b"1000", 1000), 0);
        assert_eq!(start_of(b"", 1000), 0);
        assert_eq!(start_of(b"-5", 1000), 0);
        assert_eq!(start_of(b"12x", 1000), 0);
        assert_eq!(start_of(b"99999999999999999999999", 1000), 0);
    }
}
