//! nginx's slice module (ngx_http_slice_filter_module): `slice SIZE` and
//! `$slice_range` split a large response into pieces of SIZE bytes that
//! are fetched (and cached, with `$slice_range` in the cache key) one
//! after another, so a cache holds a large file in pieces and a range
//! request costs the pieces it touches.
//!
//! As in nginx, the module does nothing until `$slice_range` is read for
//! the client's request (`proxy_set_header Range $slice_range`): that read
//! starts the request's slicing at the piece holding the first byte the
//! client asked for. The origin must then answer 206 with that piece;
//! `filter::apply` turns it into the whole representation (a 200 of the
//! complete length, or the client's single range of it), and `fetch`
//! asks for each following piece with a subrequest through the same
//! location (the proxy and its cache), checking the status, ETag and
//! `Content-Range` of each as nginx does.

pub mod filter;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;

pub static DIRECTIVES: &[Cmd] = &[cmd("slice", HSL, 1, 1, Set::Loc(slice))];

/// `slice SIZE` (0, the default, is off).
#[derive(Clone, Copy, Debug, Default)]
pub struct SliceConf {
    pub size: u64,
}

fn slice(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.slice.size =
        crate::config::value::parse_size(&d.args[0].text).ok_or_else(|| ConfError::at("invalid value", &d.span))?;
    Ok(())
}

/// Writes `bytes=START-END` for the piece starting at `start`.
fn push_range(start: u64, size: u64, out: &mut Vec<u8>) {
    use std::io::Write;
    let _ = write!(out, "bytes={}-{}", start, start + size - 1);
}

/// `$slice_range`: the range of the piece this request fetches. Read for
/// the client's request, it starts the slicing (nginx creates the
/// module's context here); a subrequest that is no slice has none.
pub fn range_var(ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
    let size = ctx.conf.slice.size;
    if size == 0 {
        return;
    }
    let start = match ctx.slice.get() {
        Some(s) => s,
        None if ctx.subrequest => return,
        None => {
            let s = size * (first_byte(ctx) / size);
            ctx.slice.set(Some(s));
            s
        }
    };
    push_range(start, size, out);
}

/// nginx's ngx_http_slice_get_start: the first byte of the client's range
/// when there is one simple `bytes=N-` range and no `If-Range` (then the
/// whole representation may be wanted), else 0.
pub fn first_byte(ctx: &ReqCtx<'_, '_>) -> u64 {
    if ctx.req.header("if-range").is_some() {
        return 0;
    }
    let Some(h) = ctx.req.header("range") else { return 0 };
    start_of(h)
}

fn start_of(h: &[u8]) -> u64 {
    if h.len() < 7 || !h[..6].eq_ignore_ascii_case(b"bytes=") {
        return 0;
    }
    let mut p = &h[6..];
    if p.contains(&b',') {
        return 0;
    }
    while let [b' ', rest @ ..] = p {
        p = rest;
    }
    let mut start: u64 = 0;
    for &c in p.iter().take_while(|c| c.is_ascii_digit()) {
        match start.checked_mul(10).and_then(|s| s.checked_add(u64::from(c - b'0'))) {
            Some(s) if s <= i64::MAX as u64 => start = s,
            _ => return 0,
        }
    }
    start
}

/// A `Content-Range` of a piece: `[start, end)` and the complete length
/// (None for `*`).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct ContentRange {
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    pub complete: Option<u64>,
}

/// nginx's ngx_http_slice_parse_content_range: `bytes S-E/L` (or `/*`),
/// spaces allowed around the numbers and separators, nothing after.
pub fn parse_content_range(v: &[u8]) -> Option<ContentRange> {
    let mut p = v.strip_prefix(b"bytes ")?;
    let spaces = |p: &mut &[u8]| {
        while let [b' ', rest @ ..] = *p {
            *p = rest;
        }
    };
    let number = |p: &mut &[u8]| -> Option<u64> {
        let n = p.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        let mut v: u64 = 0;
        for &c in &p[..n] {
            v = v.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
            if v > i64::MAX as u64 {
                return None;
            }
        }
        *p = &p[n..];
        Some(v)
    };
    let expect = |p: &mut &[u8], c: u8| -> Option<()> {
        let (&first, rest) = p.split_first()?;
        (first == c).then(|| *p = rest)
    };
    spaces(&mut p);
    let start = number(&mut p)?;
    spaces(&mut p);
    expect(&mut p, b'-')?;
    spaces(&mut p);
    let end = number(&mut p)?.checked_add(1)?;
    spaces(&mut p);
    expect(&mut p, b'/')?;
    spaces(&mut p);
    let complete = if p.first() == Some(&b'*') {
        p = &p[1..];
        None
    } else {
        Some(number(&mut p)?)
    };
    spaces(&mut p);
    p.is_empty().then_some(ContentRange { start, end, complete })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_parse_as_nginxs() {
        let cr = |s, e, l| Some(ContentRange { start: s, end: e, complete: l });
        assert_eq!(parse_content_range(b"bytes 0-1/100"), cr(0, 2, Some(100)));
        assert_eq!(parse_content_range(b"bytes  2 - 3 / 16 "), cr(2, 4, Some(16)));
        assert_eq!(parse_content_range(b"bytes 0-1/*"), cr(0, 2, None));
        assert_eq!(parse_content_range(b"bytes"), None);
        assert_eq!(parse_content_range(b"Bytes 0-1/2"), None);
        assert_eq!(parse_content_range(b"bytes 0-1/2x"), None);
        assert_eq!(parse_content_range(b"bytes -1/2"), None);
        assert_eq!(parse_content_range(b"bytes 0-99999999999999999999/2"), None);
    }

    #[test]
    fn first_byte_is_nginxs() {
        assert_eq!(start_of(b"bytes=3-4"), 3);
        assert_eq!(start_of(b"bytes= 12-"), 12);
        assert_eq!(start_of(b"bytes=-10"), 0);
        assert_eq!(start_of(b"bytes=3-3,4-4"), 0);
        assert_eq!(start_of(b"items=3-4"), 0);
        assert_eq!(start_of(b"bytes=99999999999999999999-"), 0);
    }
}
