//! A memcached server's answer to `get KEY`, as nginx's memcached module
//! reads it: one line, `VALUE KEY FLAGS LENGTH\r\n` (the value follows,
//! then `\r\nEND\r\n`) or `END\r\n` (not found: 404). These are origin
//! bytes: [`parse`] and [`Value::decode`] are the `memcached_response`
//! fuzz target's.

use std::borrow::Cow;

use crate::http::proxy::response_head::{Framing, HeadError, ResponseHead};

/// What follows a value: nginx's `NGX_HTTP_MEMCACHED_END`.
pub const TRAILER: &[u8; 7] = b"\r\nEND\r\n";

/// The response line, once whole: the head (200 with the value's framing,
/// or 404), `Ok(None)` while no LF has come, or nginx's reason for a
/// 502 (`invalid_response` for `memcached_next_upstream`).
///
/// `key` is the key as sent (escaped); `gzip_flag`: `memcached_gzip_flag`
/// (0: flags are not read); `head_request`: the value is not wanted, so
/// the connection is not kept (nginx closes it after the head).
pub fn parse(buf: &[u8], key: &[u8], gzip_flag: u32, head_request: bool) -> Result<Option<ResponseHead>, HeadError> {
    let Some(lf) = buf.iter().position(|&b| b == b'\n') else { return Ok(None) };
    let raw = &buf[..lf];
    let Some(line) = raw.strip_suffix(b"\r") else { return Err(invalid("invalid response", raw)) };
    let mut head = ResponseHead {
        status: 200,
        headers: Vec::new(),
        content_type: None,
        framing: Framing::None(Some(0)),
        keep_alive: true,
        head_len: lf + 1,
        accel_buffering: None,
        accel_expires: None,
        accel_limit_rate: None,
        accel_redirect: None,
        accel_charset: None,
    };
    if let Some(rest) = line.strip_prefix(b"VALUE ") {
        let bad = |what: &str| {
            HeadError::Protocol(format!(
                "memcached sent invalid {what} in response \"{}\" for key \"{}\"",
                String::from_utf8_lossy(line),
                String::from_utf8_lossy(key)
            ))
        };
        let Some(rest) = rest.strip_prefix(key) else { return Err(bad("key")) };
        let Some(rest) = rest.strip_prefix(b" ") else { return Err(invalid("invalid response", line)) };
        let Some(sp) = rest.iter().position(|&b| b == b' ') else { return Err(invalid("invalid response", line)) };
        let (flags, len) = (&rest[..sp], &rest[sp + 1..]);
        if gzip_flag != 0 {
            let flags = atoi(flags).ok_or_else(|| bad("flags"))?;
            // nginx keeps the flags in a machine word; memcached's are 32
            // bits, so the low 32 are what a flag can be in.
            if (flags as u32) & gzip_flag != 0 {
                head.headers.push((Cow::Borrowed("Content-Encoding"), b"gzip".to_vec().into()));
            }
        }
        let len = atoi(len).ok_or_else(|| bad("length"))?;
        if head_request {
            head.framing = Framing::None(Some(len));
            head.keep_alive = false;
        } else {
            head.framing = Framing::Memcached(Value::new(len));
        }
        return Ok(Some(head));
    }
    if line == b"END" {
        head.status = 404;
        return Ok(Some(head));
    }
    Err(invalid("invalid response", line))
}

fn invalid(what: &str, line: &[u8]) -> HeadError {
    HeadError::Protocol(format!("memcached sent {what}: \"{}\"", String::from_utf8_lossy(line)))
}

/// nginx's `ngx_atoi`/`ngx_atoof`: decimal digits only, at least one, no
/// overflow of a signed 64-bit number.
fn atoi(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in s {
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    (n <= i64::MAX as u64).then_some(n)
}

/// The value after the line: its length, then the trailer, which must be
/// `\r\nEND\r\n` for the connection to be kept.
#[derive(Debug)]
pub struct Value {
    pub len: u64,
    left: u64,
    /// Bytes of [`TRAILER`] seen.
    matched: usize,
    /// The trailer was not `\r\nEND\r\n`, or more bytes came after it:
    /// nginx's "memcached sent invalid trailer"; the value still goes to
    /// the client whole, the connection is closed.
    pub invalid: bool,
}

impl Value {
    pub fn new(len: u64) -> Value {
        Value { len, left: len, matched: 0, invalid: false }
    }

    /// Passes value bytes from `buf` to `sink` (at most `max`) and reads
    /// the trailer after them; returns how much of `buf` was used. A
    /// trailer byte that does not match is left unused, so the
    /// connection, with bytes left over, is not pooled.
    pub fn decode(&mut self, buf: &[u8], max: usize, sink: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.left.min(buf.len() as u64).min(max as u64) as usize;
        if n > 0 {
            sink(&buf[..n]);
            self.left -= n as u64;
        }
        let mut used = n;
        if self.left == 0 {
            while self.matched < TRAILER.len() && !self.invalid && used < buf.len() {
                if buf[used] == TRAILER[self.matched] {
                    self.matched += 1;
                    used += 1;
                } else {
                    self.invalid = true;
                }
            }
            // Bytes after the trailer: nginx's "invalid trailer" too (the
            // value stands; the connection, holding them, is not pooled).
            if self.matched == TRAILER.len() && used < buf.len() {
                self.invalid = true;
            }
        }
        used
    }

    /// The value and its trailer (or a bad trailer) have been read.
    pub fn is_done(&self) -> bool {
        self.left == 0 && (self.matched == TRAILER.len() || self.invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<Option<ResponseHead>, HeadError>) -> String {
        match r {
            Err(HeadError::Protocol(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn value_line_and_end() {
        let h = parse(b"VALUE /k 0 8\r\nSEE-THIS\r\nEND\r\n", b"/k", 0, false).unwrap().unwrap();
        assert_eq!((h.status, h.head_len, h.keep_alive), (200, 14, true));
        assert!(matches!(h.framing, Framing::Memcached(ref v) if v.len == 8));
        let h = parse(b"END\r\n", b"/k", 0, false).unwrap().unwrap();
        assert_eq!((h.status, h.head_len), (404, 5));
        assert!(parse(b"VALUE /k 0", b"/k", 0, false).unwrap().is_none());
        let h = parse(b"VALUE /k 2 3\r\n", b"/k", 2, false).unwrap().unwrap();
        assert_eq!(h.headers.len(), 1);
        let h = parse(b"VALUE /k 1 3\r\n", b"/k", 2, true).unwrap().unwrap();
        assert!(h.headers.is_empty() && !h.keep_alive);
        assert!(matches!(h.framing, Framing::None(Some(3))));
    }

    #[test]
    fn nginx_messages() {
        assert_eq!(msg(parse(b"ERROR\r\n", b"k", 0, false)), "memcached sent invalid response: \"ERROR\"");
        assert_eq!(msg(parse(b"END\n", b"k", 0, false)), "memcached sent invalid response: \"END\"");
        assert_eq!(
            msg(parse(b"VALUE x 0 1\r\n", b"k", 0, false)),
            "memcached sent invalid key in response \"VALUE x 0 1\" for key \"k\""
        );
        assert_eq!(
            msg(parse(b"VALUE k z 1\r\n", b"k", 1, false)),
            "memcached sent invalid flags in response \"VALUE k z 1\" for key \"k\""
        );
        assert!(parse(b"VALUE k z 1\r\n", b"k", 0, false).is_ok(), "flags unread without a gzip flag");
        assert_eq!(
            msg(parse(b"VALUE k 0 -1\r\n", b"k", 0, false)),
            "memcached sent invalid length in response \"VALUE k 0 -1\" for key \"k\""
        );
        assert!(parse(b"VALUE k 0\r\n", b"k", 0, false).is_err());
    }

    #[test]
    fn trailer_split_anywhere() {
        let all = b"SEE-THIS\r\nEND\r\n";
        for cut in 0..all.len() {
            let mut v = Value::new(8);
            let mut out = Vec::new();
            let mut buf = all[..cut].to_vec();
            let used = v.decode(&buf, 1 << 20, &mut |d| out.extend_from_slice(d));
            buf.drain(..used);
            buf.extend_from_slice(&all[cut..]);
            let used = v.decode(&buf, 1 << 20, &mut |d| out.extend_from_slice(d));
            assert_eq!((used, out.as_slice(), v.is_done(), v.invalid), (buf.len(), &b"SEE-THIS"[..], true, false));
        }
        let mut v = Value::new(2);
        let used = v.decode(b"ab\r\nEXD\r\n", 100, &mut |_| {});
        assert!(v.is_done() && v.invalid && used < 9);
    }
}
