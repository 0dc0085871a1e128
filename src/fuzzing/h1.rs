//! HTTP/1 request heads (`connection/h1/codec`) and chunked request bodies
//! (`connection/h1/chunked`).

use super::{Picks, pieces, show};
use crate::http::connection::h1::chunked::Decoder;
use crate::http::connection::h1::codec::{self, Limits};
use crate::http::request::Head;

/// nginx's default `large_client_header_buffers 4 8k`.
const DEFAULT: Limits = Limits::sized(8192, 4 * 8192);
/// Small enough that fuzzed inputs reach both the 414 and the 494 limit.
const SMALL: Limits = Limits::sized(96, 384);

/// What the connection's `read_head` loop decides with exactly `buf`
/// buffered: wait for more, a head, or an error status (with the buffer
/// full, `overflow`'s). The head is compared by its Debug text, which
/// shows every field.
#[derive(Debug, PartialEq)]
enum Outcome {
    Pending,
    Head(String),
    Error(u16),
}

fn outcome(buf: &[u8], lim: Limits) -> (Outcome, Option<Head>) {
    match codec::parse_head(buf, lim) {
        Ok(Some(h)) => (Outcome::Head(format!("{h:?}")), Some(h)),
        Err(e) => (Outcome::Error(e.status()), None),
        Ok(None) if buf.len() >= lim.total_max => (Outcome::Error(codec::overflow(buf, lim).status()), None),
        Ok(None) => (Outcome::Pending, None),
    }
}

/// A parsed head's offsets all lie in the head and in order.
fn check_head(buf: &[u8], h: &Head) {
    let n = h.head_len;
    assert!(n <= buf.len(), "head_len {n} past the buffer");
    let inside = |r: &std::ops::Range<usize>, what: &str| {
        assert!(r.start <= r.end && r.end <= n, "{what} {r:?} outside the head of {n} bytes: {}", show(buf));
    };
    inside(&h.method_r, "method");
    inside(&h.target, "target");
    inside(&h.line, "request line");
    assert!(h.line.start == h.method_r.start && h.method_r.end <= h.target.start && h.target.end <= h.line.end);
    for hd in &h.headers {
        inside(&hd.name, "header name");
        inside(&hd.value, "header value");
        assert!(hd.name.start >= h.line.end && hd.name.end <= hd.value.start);
    }
    if let Some(host) = &h.host {
        assert!(h.headers.iter().any(|hd| hd.value == *host), "Host is not one of the headers");
    }
}

/// Host validation (`routing::server::validate_host`): what it accepts is
/// non-empty, lower case, free of separators and controls, and a fixed
/// point.
fn check_host(raw: &[u8]) {
    let Some(v) = crate::http::routing::server::validate_host(raw) else { return };
    assert!(!v.is_empty(), "empty host from {}", show(raw));
    assert!(
        !v.iter().any(|&c| c.is_ascii_uppercase() || c < 0x21 || c == 0x7f || c == b'/' || c == b'\\'),
        "host {} from {}",
        show(&v),
        show(raw)
    );
    assert!(!v.windows(2).any(|w| w == b".."), "host with an empty label: {}", show(&v));
    let again = crate::http::routing::server::validate_host(&v);
    assert_eq!(again.as_deref(), Some(&v[..]), "host not a fixed point: {} from {}", show(&v), show(raw));
}

/// A request head, as the connection reads it. Properties: no panic;
/// offsets inside the head; the decision does not depend on how the bytes
/// arrived (every prefix the connection could hold either waits for more
/// or decides exactly what the whole does, so any split into reads gives
/// the same result); the head alone re-parses to the same head; and the
/// target and Host go through the same checks as the connection's
/// (`uri` target's properties, host validation).
pub fn h1_head(data: &[u8]) {
    for lim in [DEFAULT, SMALL] {
        // The connection never buffers more than total_max.
        let buf = &data[..data.len().min(lim.total_max)];
        let (whole, head) = outcome(buf, lim);
        let mut picks = Picks::new(buf);
        let every = buf.len() <= 512;
        let prefixes: Vec<usize> = if every { (0..buf.len()).collect() } else { picks.cuts(buf.len(), 64) };
        for p in prefixes {
            let (part, _) = outcome(&buf[..p], lim);
            if part != Outcome::Pending {
                assert_eq!(
                    part,
                    whole,
                    "the first {p} bytes decide otherwise than all {} (limits {lim:?}): {}",
                    buf.len(),
                    show(buf)
                );
            }
        }
        let _ = codec::overflow(buf, lim);
        let Some(mut h) = head else { continue };
        check_head(buf, &h);
        let (again, _) = outcome(&buf[..h.head_len], lim);
        assert_eq!(again, whole, "the head alone parses otherwise: {}", show(buf));
        let target = &buf[h.target.clone()];
        let (authority, origin) = crate::http::connection::h1::conn::split_absolute(target);
        let empty_path = authority.is_some() && (origin.starts_with(b"?") || origin.starts_with(b"#"));
        assert!(origin.starts_with(b"/") || empty_path || authority.is_none(), "origin-form {}", show(origin));
        if !empty_path {
            super::http::check_target(origin);
        }
        if let Some(host) = authority.or_else(|| h.host.clone().map(|r| &buf[r])) {
            check_host(host);
        }
        codec::recycle(&mut h);
    }
}

/// Feeds `parts` in order to one decoder; the body, whether it finished,
/// and the bytes used, or the error.
fn decode(parts: &[&[u8]]) -> Result<(Vec<u8>, bool, usize), ()> {
    let mut d = Decoder::default();
    let mut body = Vec::new();
    let mut used = 0;
    for p in parts {
        let before = body.len();
        let n = d.feed(p, |b| body.extend_from_slice(b)).map_err(|_| ())?;
        assert!(n <= p.len(), "used {n} of {} bytes", p.len());
        assert!(body.len() - before <= n, "more body than input");
        assert!(n == p.len() || d.is_done(), "stopped early without finishing");
        used += n;
        if d.is_done() {
            assert_eq!(d.total, body.len() as u64);
            return Ok((body, true, used));
        }
    }
    assert_eq!(d.total, body.len() as u64);
    Ok((body, false, used))
}

/// `data` encoded as a chunked body with sizes from `picks`, extensions
/// and a trailer sometimes, and bare LFs sometimes (nginx takes them).
fn encode(data: &[u8], picks: &mut Picks) -> Vec<u8> {
    let nl: &[u8] = if picks.below(4) == 0 { b"\n" } else { b"\r\n" };
    let mut out = Vec::with_capacity(data.len() * 2 + 16);
    let mut at = 0;
    while at < data.len() {
        let n = (1 + picks.below(64)).min(data.len() - at);
        let size = if picks.below(2) == 0 { format!("{n:x}") } else { format!("{n:X}") };
        out.extend_from_slice(size.as_bytes());
        if picks.below(4) == 0 {
            out.extend_from_slice(b";ext=\"v\"");
        }
        out.extend_from_slice(nl);
        out.extend_from_slice(&data[at..at + n]);
        out.extend_from_slice(nl);
        at += n;
    }
    out.extend_from_slice(b"0");
    out.extend_from_slice(nl);
    if picks.below(3) == 0 {
        out.extend_from_slice(b"Trailer: x");
        out.extend_from_slice(nl);
    }
    out.extend_from_slice(nl);
    out
}

/// The chunked decoder. Properties: no panic; never more body than input;
/// the same result however the input is split into reads (whole, one byte
/// at a time, and at input-chosen points); a finished body re-fed alone
/// gives the same; and any bytes encoded as a chunked body (sizes chosen
/// from the input) decode back to themselves, using exactly the encoding.
pub fn chunked(data: &[u8]) {
    let whole = decode(&[data]);
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(decode(&bytes), whole, "byte by byte differs: {}", show(data));
    let mut picks = Picks::new(data);
    let cuts = picks.cuts(data.len(), 8);
    assert_eq!(decode(&pieces(data, &cuts)), whole, "split at {cuts:?} differs: {}", show(data));
    if let Ok((_, true, used)) = &whole {
        assert_eq!(decode(&[&data[..*used]]), whole, "the body alone differs: {}", show(data));
    }
    let enc = encode(data, &mut picks);
    let mut with_next = enc.clone();
    with_next.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_eq!(decode(&[&with_next]), Ok((data.to_vec(), true, enc.len())), "round trip of {}", show(data));
}
