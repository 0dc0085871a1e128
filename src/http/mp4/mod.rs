//! nginx's mp4 module (`mp4`): pseudo-streaming of MP4 video. A request
//! with `?start=SECONDS` (and/or `?end=SECONDS`, decimals allowed) gets a
//! valid MP4 file holding only that stretch: the `moov` atom rewritten
//! with the tracks' sample tables cut (`cut`), followed by the file's bytes
//! of those samples, so a player can seek without the whole file. Without
//! `start` or `end` the file is sent as it is, as is one whose `moov`
//! comes first and that asks for no cut.
//!
//! The answer is otherwise a static file's: Last-Modified, an ETag of the
//! length sent, conditional requests, and one byte range (nginx's
//! `single_range`: several ranges get the whole cut file). A file that
//! cannot be cut is a 500 with nginx's log line.

mod atoms;
mod cut;

pub use atoms::{Fail, Params, Source};
pub use cut::{Outcome, cut};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, LOC, R, Set, cmd};
use crate::http::handler::ctx::{ReqCtx, query_arg};
use crate::http::handler::open_cache::OpenFile;
use crate::http::handler::{Step, error, static_file};
use crate::log::error::Level;
use crate::log_req;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("mp4", LOC, 0, 0, Set::Loc(mp4)),
    cmd("mp4_buffer_size", HSL, 1, 1, Set::Loc(buffer_size)),
    cmd("mp4_max_buffer_size", HSL, 1, 1, Set::Loc(max_buffer_size)),
    cmd("mp4_start_key_frame", HSL, 1, 1, Set::Loc(start_key_frame)),
];

/// The module's settings at a level.
#[derive(Clone, Debug)]
pub struct Mp4Conf {
    /// `mp4`: the location's content handler (not inherited).
    pub handler: bool,
    pub buffer_size: usize,
    pub max_buffer_size: usize,
    pub start_key_frame: bool,
}

impl Default for Mp4Conf {
    fn default() -> Self {
        Mp4Conf { handler: false, buffer_size: 512 * 1024, max_buffer_size: 10 * 1024 * 1024, start_key_frame: false }
    }
}

fn mp4(c: &mut LocConf, _: &Directive, _: &mut Ctx) -> R {
    c.mp4.handler = true;
    Ok(())
}

fn size(d: &Directive) -> Result<usize, ConfError> {
    crate::config::value::parse_size(&d.args[0].text)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span))
}

fn buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.mp4.buffer_size = size(d)?;
    Ok(())
}

fn max_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.mp4.max_buffer_size = size(d)?;
    Ok(())
}

fn start_key_frame(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.mp4.start_key_frame = crate::config::set_main::flag(d)?;
    Ok(())
}

/// The open file as a [`Source`].
struct FileSource<'a> {
    file: &'a OpenFile,
    path: &'a str,
}

impl Source for FileSource<'_> {
    fn size(&self) -> u64 {
        self.file.size
    }

    fn read_at(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Fail> {
        use std::os::unix::fs::FileExt;
        let Some(f) = self.file.file.as_ref() else {
            return Err(Fail { level: Level::Crit, msg: format!("pread() \"{}\" failed", self.path) });
        };
        let mut done = 0;
        while done < buf.len() {
            match f.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => {
                    let msg = format!("pread() read only {done} of {} from \"{}\"", buf.len(), self.path);
                    return Err(Fail { level: Level::Crit, msg });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let msg = format!("pread() \"{}\" failed ({})", self.path, crate::process::signal::os_error(&e));
                    return Err(Fail { level: Level::Crit, msg });
                }
            }
        }
        Ok(())
    }
}

/// The location's content handler.
pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    let (file, path) = match static_file::streamable(ctx) {
        static_file::Streamable::File(f, p) => (f, p),
        static_file::Streamable::Answered(step) => return step,
    };
    let (start, length) = match ctx.req.args.as_deref() {
        Some(a) if !a.is_empty() => times(a),
        _ => (None, 0),
    };
    let Some(start) = start else {
        ctx.filename = Some(path);
        return Step::Done(static_file::file_response(ctx, file, &[], 0));
    };
    let conf = &ctx.conf.mp4;
    let p = Params {
        start,
        length,
        start_key_frame: conf.start_key_frame,
        buffer_size: conf.buffer_size,
        max_buffer_size: conf.max_buffer_size,
    };
    let name = String::from_utf8_lossy(&path).into_owned();
    let outcome = cut(&mut FileSource { file: &file, path: &name }, &name, p);
    ctx.filename = Some(path);
    match outcome {
        Ok(Outcome::Whole) => {
            let len = file.size;
            Step::Done(static_file::part_response(ctx, file, &[], 0, len, true))
        }
        Ok(Outcome::Cut { head, offset, len }) => {
            Step::Done(static_file::part_response(ctx, file, &head, offset, len, true))
        }
        Err(f) => {
            log_req!(ctx, f.level, "{}", f.msg);
            Step::Done(error(ctx, 500))
        }
    }
}

/// `start` and the length (`end` - `start`) in milliseconds, as nginx
/// reads the arguments: `end` alone starts at 0; an `end` not past
/// `start` is ignored; a value that does not parse is no value.
fn times(args: &[u8]) -> (Option<u64>, u64) {
    let mut start = query_arg(args, "start").and_then(millis);
    let mut length = 0;
    if let Some(end) = query_arg(args, "end").and_then(millis)
        && end > 0
    {
        let s = *start.get_or_insert(0);
        if end > s {
            length = end - s;
        }
    }
    (start, length)
}

/// Seconds with an optional fraction as milliseconds (nginx's
/// `ngx_http_mp4_atofp` with three decimals: more digits after the dot
/// are ignored, as a Flash player may send many); None for anything else,
/// or past nginx's signed 64-bit limit.
fn millis(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let max = i64::MAX as u64;
    let mut value = 0u64;
    let mut point = 3u32;
    let mut dot = false;
    for &b in v {
        if b == b'.' {
            if dot {
                return None;
            }
            dot = true;
            continue;
        }
        if !b.is_ascii_digit() {
            return None;
        }
        if point == 0 {
            continue;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0')).filter(|&n| n <= max)?;
        if dot {
            point -= 1;
        }
    }
    for _ in 0..point {
        value = value.checked_mul(10).filter(|&n| n <= max)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_as_nginx_reads_them() {
        assert_eq!(millis(b"2"), Some(2000));
        assert_eq!(millis(b"7.1"), Some(7100));
        assert_eq!(millis(b"2.7"), Some(2700));
        assert_eq!(millis(b"0.0"), Some(0));
        assert_eq!(millis(b"1.23456789"), Some(1234));
        assert_eq!(millis(b".5"), Some(500));
        assert_eq!(millis(b"5."), Some(5000));
        assert_eq!(millis(b""), None);
        assert_eq!(millis(b"1.2.3"), None);
        assert_eq!(millis(b"-1"), None);
        assert_eq!(millis(b"1e3"), None);
        assert_eq!(millis(b"99999999999999999999"), None);
        assert_eq!(times(b"start=1&end=1"), (Some(1000), 0));
        assert_eq!(times(b"start=1&end=0"), (Some(1000), 0));
        assert_eq!(times(b"end=5.6"), (Some(0), 5600));
        assert_eq!(times(b"start=2.7&end=5.6"), (Some(2700), 2900));
        assert_eq!(times(b"start=x&end=9"), (Some(0), 9000));
        assert_eq!(times(b"foo=1"), (None, 0));
    }
}
