//! FastCGI replies (`fastcgi/record` and `fastcgi/response`): the record
//! decoder, and the CGI head reader and body framing as the upstream core
//! drives them, on whatever an application server sends.
//!
//! The input's first byte holds options (HEAD request, `fastcgi_keep_conn`,
//! a 1 KB `fastcgi_buffer_size`, a `fastcgi_catch_stderr` string, and
//! whether the rest is raw record bytes or a record list to encode); the
//! rest is the application's reply. Split points come from the input
//! ([`Picks`]), so a failure reproduces from its file alone.

use std::sync::Arc;

use super::{Picks, pieces, show};
use crate::config::proxy::UpstreamConf;
use crate::http::fastcgi::conf::FastcgiConf;
use crate::http::fastcgi::record::{self, Decoder, Event};
use crate::http::fastcgi::response::Reader;
use crate::http::proxy::body::BodyError;
use crate::http::proxy::response_head::{Framing, HeadError, ResponseHead};
use crate::log::error::ErrorLog;

const HEAD_REQUEST: u8 = 0x01;
const KEEP_CONN: u8 = 0x02;
const SMALL_BUFFER: u8 = 0x04;
const CATCH: u8 = 0x08;
const STRUCTURED: u8 = 0x10;

/// What the upstream core reads per body read (`UpstreamBody::read_more`).
const BODY_READ: usize = 64 * 1024;

/// The records, read by a straightforward model of the specification: what
/// the decoder must report whatever the split.
#[derive(Debug, Default, PartialEq)]
struct Records {
    /// STDOUT content up to END_REQUEST, an invalid header or the input's
    /// end (a cut-off record's part included: it is passed on as it comes).
    stdout: Vec<u8>,
    /// Complete, non-empty STDERR records.
    stderr: Vec<Vec<u8>>,
    ended: bool,
    error: bool,
    /// Bytes up to END_REQUEST's content (its padding and anything after
    /// is left to the caller), else all.
    used: usize,
}

fn model(data: &[u8]) -> Records {
    let mut r = Records { used: data.len(), ..Records::default() };
    let mut at = 0;
    while data.len().saturating_sub(at) >= 8 {
        let h = &data[at..at + 8];
        if h[0] != record::VERSION
            || !matches!(h[1], record::STDOUT | record::STDERR | record::END_REQUEST)
            || h[2] != 0
            || h[3] != 1
        {
            r.error = true;
            return r;
        }
        let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
        let start = at + 8;
        let have = (data.len() - start).min(len);
        let content = &data[start..start + have];
        match h[1] {
            record::STDOUT => r.stdout.extend_from_slice(content),
            record::STDERR if have == len && len > 0 => r.stderr.push(content.to_vec()),
            record::END_REQUEST if have == len => {
                r.ended = true;
                r.used = start + len;
                return r;
            }
            _ => {}
        }
        at = start + len + usize::from(h[6]);
    }
    r
}

/// The decoder fed `parts` in order, stopping at END_REQUEST or an error;
/// checks the bytes it reports used.
fn decode(parts: &[&[u8]]) -> Records {
    let mut d = Decoder::default();
    let mut r = Records::default();
    for p in parts {
        let mut on = |e: Event<'_, '_>| {
            match e {
                Event::Stdout(b) => r.stdout.extend_from_slice(b),
                Event::Stderr(b) => {
                    assert!(!b.is_empty(), "an empty STDERR record reported");
                    r.stderr.push(b.to_vec());
                }
                Event::End => r.ended = true,
            }
            true
        };
        match d.feed(p, &mut on) {
            Ok(n) => {
                assert!(n <= p.len(), "used {n} of {} bytes", p.len());
                assert_eq!(d.is_done(), r.ended, "done without END_REQUEST, or the reverse");
                r.used += n;
                if d.is_done() {
                    return r;
                }
                assert_eq!(n, p.len(), "stopped early without ending");
            }
            Err(_) => {
                r.error = true;
                // Where it stopped is no concern after an error.
                r.used = 0;
                return r;
            }
        }
    }
    r
}

/// `spec` as well-formed records (a byte stream a fuzzer seldom finds from
/// raw bytes): per record a kind byte (low three bits: STDOUT four ways in
/// eight, STDERR, an empty STDOUT, END_REQUEST, or one raw byte; the next
/// three: padding), a length byte (times 64 with the top bit), content.
fn encode(spec: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(spec.len() * 2);
    let mut at = 0;
    while at + 1 < spec.len() {
        let (k, l) = (spec[at], spec[at + 1]);
        at += 2;
        let pad = usize::from((k >> 3) & 7);
        let len = if k & 0x80 != 0 { usize::from(l & 0x7f) * 64 } else { usize::from(l) };
        let take = len.min(spec.len() - at);
        let (kind, content) = match k & 7 {
            0..=3 => (record::STDOUT, &spec[at..at + take]),
            4 => (record::STDERR, &spec[at..at + take]),
            5 => (record::STDOUT, &[][..]),
            6 => (record::END_REQUEST, &[0u8, 0, 0, l, 0, 0, 0, 0][..]),
            _ => {
                out.push(l);
                continue;
            }
        };
        if k & 7 < 5 {
            at += take;
        }
        record::header(&mut out, kind, content.len(), pad as u8);
        out.extend_from_slice(content);
        out.resize(out.len() + pad, 0);
    }
    out
}

/// The application's bytes as the origin socket gives them: up to the next
/// cut, and no more than the reader asks for.
struct Origin<'a> {
    data: &'a [u8],
    at: usize,
    cuts: Vec<usize>,
}

impl Origin<'_> {
    fn read(&mut self, buf: &mut Vec<u8>, max: usize) -> usize {
        let stop = self.cuts.iter().copied().find(|&c| c > self.at).unwrap_or(self.data.len());
        let n = (stop - self.at).min(max);
        buf.extend_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        n
    }
}

/// What reached the client side of the proxy: the head (without the
/// body's framing state, which depends on the split) or that it failed
/// (every head error is the same 502 to the client; the message only goes
/// to the log and may name whichever fault came first in the bytes read so
/// far), the body bytes, and how the body ended.
#[derive(Debug, PartialEq)]
struct Outcome {
    head: Result<String, ()>,
    status: u16,
    fields: Vec<(String, Vec<u8>)>,
    /// The body's framing: FastCGI records, or none (HEAD, 204, 304, 1xx).
    records: bool,
    declared: Option<u64>,
    body: Vec<u8>,
    end: Result<(), String>,
}

/// One response through `Reader::parse` and `Body::decode` as
/// `proxy::exchange` and `UpstreamBody` call them: reads into a buffer
/// of at most `fastcgi_buffer_size` for the head, 64 KB pieces after.
fn session(data: &[u8], cuts: Vec<usize>, flags: u8, conf: &FastcgiConf) -> Outcome {
    let up: &UpstreamConf = &conf.up;
    let log = Arc::new(ErrorLog::default());
    let mut r = Reader::detached(log, 1, conf, String::new(), flags & HEAD_REQUEST != 0, flags & KEEP_CONN != 0);
    let mut origin = Origin { data, at: 0, cuts };
    let limit = up.buffer_size.max(1024);
    let mut buf = Vec::new();
    let mut out = Outcome {
        head: Err(()),
        status: 0,
        fields: Vec::new(),
        records: false,
        declared: None,
        body: Vec::new(),
        end: Ok(()),
    };
    let head: ResponseHead = loop {
        let parsed = if buf.is_empty() { Ok(None) } else { r.parse(&mut buf, up) };
        match parsed {
            Ok(Some(h)) => break h,
            Ok(None) => {}
            Err(HeadError::Invalid(_) | HeadError::Protocol(_) | HeadError::Incomplete) => return out,
        }
        let room = limit.saturating_sub(buf.len());
        if room == 0 || origin.read(&mut buf, room) == 0 {
            return out;
        }
    };
    out.status = head.status;
    out.fields = head.headers.iter().map(|(n, v)| (n.to_string(), v.to_vec())).collect();
    out.head = Ok(format!(
        "{} {:?} keep_alive={} buffering={:?} expires={:?} redirect={:?}",
        head.status, head.content_type, head.keep_alive, head.accel_buffering, head.accel_expires, head.accel_redirect
    ));
    let Framing::FastCgi(mut b) = head.framing else {
        if let Framing::None(d) = head.framing {
            out.declared = d;
        } else {
            panic!("a FastCGI head framed as {:?}: {}", head.framing, show(data));
        }
        return out;
    };
    out.records = true;
    out.declared = b.declared_len();
    loop {
        let before = out.body.len();
        let used = match b.decode(&buf, &mut |d| out.body.extend_from_slice(d)) {
            Ok(n) => n,
            Err(e) => {
                out.end = Err(body_error(&e));
                return out;
            }
        };
        assert!(used <= buf.len(), "body used {used} of {} bytes", buf.len());
        assert!(out.body.len() - before <= used + data.len(), "more body than input");
        buf.drain(..used);
        if b.is_done() {
            return out;
        }
        if origin.read(&mut buf, BODY_READ) == 0 {
            out.end = Err(body_error(&BodyError::Truncated));
            return out;
        }
    }
}

fn body_error(e: &BodyError) -> String {
    match e {
        BodyError::Protocol(_) => "protocol".into(),
        other => format!("{other:?}"),
    }
}

/// Header fields as (name, value).
type Fields = Vec<(String, Vec<u8>)>;

/// The head as the model reads it from all of STDOUT: its length and
/// fields (None while incomplete or invalid).
fn model_head(stdout: &[u8]) -> Option<(usize, Fields)> {
    let mut slots = vec![httparse::EMPTY_HEADER; stdout.len() / 3 + 2];
    match httparse::parse_headers(stdout, &mut slots) {
        Ok(httparse::Status::Complete((len, fields))) => {
            Some((len, fields.iter().map(|f| (f.name.to_string(), f.value.to_vec())).collect()))
        }
        _ => None,
    }
}

/// The status nginx's rules give `fields` (the last valid `Status:`, else
/// 302 with a `Location:`, else 200); None where a `Status:` is invalid.
fn model_status(fields: &[(String, Vec<u8>)]) -> Option<u16> {
    let mut status = None;
    let mut location = false;
    for (n, v) in fields {
        if n.eq_ignore_ascii_case("status") {
            let d = v.get(..3).filter(|d| d.iter().all(u8::is_ascii_digit))?;
            let c = d.iter().fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
            if c < 100 {
                return None;
            }
            status = Some(c);
        } else if n.eq_ignore_ascii_case("location") {
            location = true;
        }
    }
    Some(status.unwrap_or(if location { 302 } else { 200 }))
}

/// A session's outcome against the model of the same bytes.
fn check_model(data: &[u8], m: &Records, out: &Outcome, flags: u8) {
    let Ok(_) = out.head else { return };
    let Some((head_len, fields)) = model_head(&m.stdout) else {
        panic!("a head where all of STDOUT holds none: {}", show(data));
    };
    assert_eq!(model_status(&fields), Some(out.status), "status of {}", show(data));
    let cookies = |f: &[(String, Vec<u8>)]| -> Vec<Vec<u8>> {
        f.iter().filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie")).map(|(_, v)| v.clone()).collect()
    };
    assert_eq!(cookies(&out.fields), cookies(&fields), "Set-Cookie fields of {}", show(data));
    let loc = |f: &[(String, Vec<u8>)]| -> Vec<Vec<u8>> {
        f.iter().filter(|(n, _)| n.eq_ignore_ascii_case("location")).map(|(_, v)| v.clone()).collect()
    };
    assert_eq!(loc(&out.fields), loc(&fields), "Location fields of {}", show(data));
    let bodiless = flags & HEAD_REQUEST != 0 || matches!(out.status, 204 | 304) || out.status < 200;
    assert_eq!(out.records, !bodiless, "body framing of a {} response: {}", out.status, show(data));
    if !out.records {
        return;
    }
    // The body: STDOUT after the head, up to the declared length.
    let mut want = &m.stdout[head_len..];
    if let Some(d) = out.declared {
        want = &want[..want.len().min(usize::try_from(d).unwrap_or(usize::MAX))];
    }
    assert!(want.starts_with(&out.body), "body is not the STDOUT after the head: {}", show(data));
    let complete = out.declared.is_none_or(|d| want.len() as u64 == d);
    match &out.end {
        Ok(()) => {
            assert!(m.ended && complete, "a body complete without END_REQUEST or short: {}", show(data));
            assert_eq!(out.body, want, "body of {}", show(data));
        }
        Err(e) if e == "Truncated" => assert!(!m.ended || !complete, "truncated, yet all there: {}", show(data)),
        Err(_) => assert!(m.error || flags & CATCH != 0, "a protocol error in valid records: {}", show(data)),
    }
}

thread_local! {
    /// [default 4 KB buffer, 1 KB buffer] x [no catch, catching "FATAL"].
    static CONFS: [FastcgiConf; 4] = {
        let make = |small: bool, catch: bool| {
            let mut c = FastcgiConf::new(std::path::Path::new("/nonexistent"));
            if small {
                c.up.buffer_size = 1024;
            }
            if catch {
                c.catch_stderr = vec![b"FATAL".to_vec()];
            }
            c
        };
        [make(false, false), make(true, false), make(false, true), make(true, true)]
    };
}

/// The FastCGI reply target. Properties: no panic; the record decoder
/// agrees with a plain model of the specification whole, byte by byte
/// (short inputs) and split at input-chosen points; the head reader and
/// body framing give the same head, body and ending however the reply is
/// split into reads; the status follows nginx's rules (`Status:`, else 302
/// with `Location:`, else 200); every `Set-Cookie` and `Location` is
/// passed on in order; the body is exactly the STDOUT after the head (cut
/// at the script's Content-Length), complete only with END_REQUEST.
pub fn fastcgi(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let encoded;
    let bytes = if flags & STRUCTURED != 0 {
        encoded = encode(rest);
        &encoded[..]
    } else {
        rest
    };
    let m = model(bytes);
    let mut picks = Picks::new(data);
    let whole = decode(&[bytes]);
    let expect = Records { used: if m.error { 0 } else { m.used }, ..model(bytes) };
    assert_eq!(whole, expect, "decoder differs from the model: {}", show(bytes));
    if bytes.len() <= 2048 {
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode(&singles), whole, "byte by byte differs: {}", show(bytes));
    }
    let cuts = picks.cuts(bytes.len(), 16);
    assert_eq!(decode(&pieces(bytes, &cuts)), whole, "split at {cuts:?} differs: {}", show(bytes));

    let conf_index = usize::from(flags & SMALL_BUFFER != 0) + 2 * usize::from(flags & CATCH != 0);
    CONFS.with(|confs| {
        let conf = &confs[conf_index];
        let one = session(bytes, Vec::new(), flags, conf);
        check_model(bytes, &m, &one, flags);
        let mut cuts = picks.cuts(bytes.len(), 32);
        if picks.below(4) == 0 {
            // Sometimes many tiny reads: every prefix gets parsed.
            cuts = (1..bytes.len().min(600)).collect();
        }
        let split = session(bytes, cuts.clone(), flags, conf);
        check_model(bytes, &m, &split, flags);
        // A caught STDERR line fails the head or the body, whichever is
        // being read: the only place where the split may matter.
        if flags & CATCH == 0 {
            assert_eq!(split, one, "split at {cuts:?} differs: {}", show(bytes));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u8, content: &[u8], pad: u8) -> Vec<u8> {
        let mut v = Vec::new();
        record::header(&mut v, kind, content.len(), pad);
        v.extend_from_slice(content);
        v.resize(v.len() + usize::from(pad), 0);
        v
    }

    #[test]
    fn a_php_reply_passes() {
        for flags in [0, HEAD_REQUEST, KEEP_CONN | SMALL_BUFFER, CATCH] {
            let mut v = vec![flags];
            v.extend(rec(record::STDOUT, b"Status: 404 Not Found\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n", 5));
            v.extend(rec(record::STDERR, b"PHP Notice: x\n", 2));
            v.extend(rec(record::STDOUT, b"Content-Length: 4\r\n\r\nbody", 0));
            v.extend(rec(record::STDOUT, b"", 0));
            v.extend(rec(record::END_REQUEST, &[0; 8], 0));
            fastcgi(&v);
        }
    }

    /// Content-Length 10, 4 bytes sent, END_REQUEST in the same read as
    /// the head: as truncated as when END_REQUEST comes later.
    #[test]
    fn short_body_with_the_head_is_truncated() {
        let mut v = rec(record::STDOUT, b"Content-Length: 10\r\n\r\nbody", 0);
        v.extend(rec(record::END_REQUEST, &[0; 8], 0));
        let out = CONFS.with(|c| session(&v, Vec::new(), 0, &c[0]));
        assert_eq!((out.body.as_slice(), out.end), (&b"body"[..], Err("Truncated".to_string())));
    }
}
