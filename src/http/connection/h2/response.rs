//! Our protocol-neutral `Response` as an HTTP/2 HEADERS block, with the
//! same fields the HTTP/1 writer sends (minus Connection/Keep-Alive, which
//! HTTP/2 forbids), and its body as a list of segments to send as DATA.

use std::rc::Rc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};

use super::hpack::{Encoder, Indexing};
use crate::http::connection::h1::writer::{has_body, last_modified};
use crate::http::error_html::wire_status;
use crate::http::fields::Fields;
use crate::http::handler::open_cache::OpenFile;
use crate::http::response::{Body, Response};

/// A response head to send on a stream: the pipeline's response and how
/// it is written.
pub struct Head<'a, 'c> {
    pub resp: &'a Response<'c>,
    pub server_tokens: bool,
    /// The 200 that opens an RFC 8441 tunnel: no framing field (RFC 9110
    /// 9.3.6) and no WebSocket accept value (the HTTP/1.1 handshake's).
    pub tunnel: bool,
}

impl<'a, 'c> Head<'a, 'c> {
    pub fn new(resp: &'a Response<'c>, server_tokens: bool) -> Head<'a, 'c> {
        Head { resp, server_tokens, tunnel: false }
    }
}

fn server_bytes(tokens: bool) -> &'static [u8] {
    if tokens { concat!("sluice/", env!("CARGO_PKG_VERSION")).as_bytes() } else { b"sluice" }
}

/// Writes `head` as an HPACK block (after `:status`'s caller-side
/// `begin`) straight from the response, in the order the HTTP/1 writer
/// uses (nginx's), with no `http` types in between: names lowercased as
/// HTTP/2 requires, connection-specific fields left out, and a value
/// HTTP/2 cannot carry (NUL, CR, LF) or a name that is not a token
/// dropped. Values that repeat across responses enter the dynamic table;
/// lengths, ranges and cookies do not.
pub fn encode(head: &Head<'_, '_>, enc: &mut Encoder, block: &mut Vec<u8>) {
    let resp = head.resp;
    let wire = wire_status(resp.status);
    enc.status(wire, block);
    // An origin's Server or Date passed with proxy_pass_header replaces ours.
    let passed = |n: &str| !resp.headers.is_empty() && resp.header(n).is_some();
    if !resp.no_server && !passed("server") {
        enc.field(b"server", server_bytes(head.server_tokens), Indexing::Yes, block);
    }
    if !resp.no_date && !passed("date") {
        enc.field(b"date", &crate::clock::http_date(), Indexing::Yes, block);
    }
    if let Some(ct) = &resp.content_type
        && super::request::value_allowed(ct.as_bytes())
    {
        enc.field(b"content-type", ct.as_bytes(), Indexing::Yes, block);
    }
    if has_body(wire)
        && !head.tunnel
        && let Some(n) = resp.body.known_len()
    {
        let mut digits = [0u8; 20];
        enc.field(b"content-length", crate::http::date::decimal(n, &mut digits), Indexing::No, block);
    }
    let validators = matches!(wire, 200 | 206 | 304);
    if validators && let Some(lm) = resp.last_modified {
        enc.field(b"last-modified", &last_modified(lm), Indexing::Yes, block);
    }
    if let Some(loc) = &resp.location
        && super::request::value_allowed(loc)
    {
        enc.field(b"location", loc, Indexing::Yes, block);
    }
    if validators
        && let Some(e) = &resp.etag
        && super::request::value_allowed(e)
    {
        enc.field(b"etag", e, Indexing::Yes, block);
    }
    let mut lower = Vec::new();
    for (n, v) in &resp.headers {
        let Some(name) = field_name(n.as_bytes(), &mut lower) else { continue };
        if super::request::HOP_BY_HOP.iter().any(|h| h.as_bytes() == name)
            || (head.tunnel && name == b"sec-websocket-accept")
            || !super::request::value_allowed(v)
        {
            continue;
        }
        let indexing = if name == b"set-cookie" || name == b"content-length" || v.len() > 512 {
            Indexing::No
        } else {
            Indexing::Yes
        };
        enc.field(name, v, indexing, block);
    }
    if let Some(cr) = &resp.content_range
        && super::request::value_allowed(cr)
    {
        enc.field(b"content-range", cr, Indexing::No, block);
    }
    if resp.accept_ranges && wire == 200 {
        enc.field(b"accept-ranges", b"bytes", Indexing::Yes, block);
    }
}

/// A field name as HTTP/2 carries it: a token, lowercase (copied into
/// `lower` only when it has capitals); None for a name that is not a
/// token, which no HTTP version can carry.
fn field_name<'b>(n: &'b [u8], lower: &'b mut Vec<u8>) -> Option<&'b [u8]> {
    let mut capitals = false;
    for &b in n {
        match TOKEN[b as usize] {
            0 => return None,
            2 => capitals = true,
            _ => {}
        }
    }
    if n.is_empty() {
        return None;
    }
    if !capitals {
        return Some(n);
    }
    lower.clear();
    lower.extend(n.iter().map(u8::to_ascii_lowercase));
    Some(lower)
}

/// Whether `n` is a token without capitals, as an HTTP/2 field name must
/// be (RFC 9113 8.2.1).
pub(crate) fn is_lower_token(n: &[u8]) -> bool {
    n.iter().all(|&b| TOKEN[b as usize] == 1)
}

/// RFC 9110 5.6.2's token characters, by byte: 0 not a token character,
/// 1 one that is not a capital letter,
/// 2 a capital letter. A table: names are checked byte by byte on every
/// request and response, and a table look-up is one load per byte.
static TOKEN: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        let special = matches!(
            c,
            b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
        );
        t[b] = if c.is_ascii_uppercase() {
            2
        } else if c.is_ascii_alphanumeric() || special {
            1
        } else {
            0
        };
        b += 1;
    }
    t
};

/// A piece of a response body: bytes at hand, or a file range read as the
/// peer's flow-control window allows.
pub enum Seg {
    Bytes(Bytes),
    File(Rc<OpenFile>, u64, u64),
}

pub fn segments(body: &Body) -> Vec<Seg> {
    match body {
        Body::Empty => Vec::new(),
        Body::Static(b) => vec![Seg::Bytes(Bytes::from_static(b))],
        Body::Owned(b) => vec![Seg::Bytes(Bytes::copy_from_slice(b))],
        Body::Shared(b) => vec![Seg::Bytes(b.clone())],
        Body::File { file, offset, len } => match file.cached_bytes(*offset, *len) {
            Some(b) => vec![Seg::Bytes(Bytes::copy_from_slice(b))],
            None => vec![Seg::File(file.clone(), *offset, *len)],
        },
        Body::Multipart { file, parts, trailer } => {
            let mut v = Vec::with_capacity(parts.len() * 2 + 1);
            for (h, r) in parts {
                v.push(Seg::Bytes(Bytes::copy_from_slice(h)));
                v.push(Seg::File(file.clone(), r.start, r.end - r.start + 1));
            }
            v.push(Seg::Bytes(Bytes::copy_from_slice(trailer)));
            v
        }
        // Streamed bodies are sent by the stream loop itself.
        Body::Proxy | Body::Upstream(_) | Body::Compressed(_) => Vec::new(),
    }
}

/// Trailers as the HPACK block that ends a stream: names HTTP/2 cannot
/// carry (pseudo-headers, non-tokens) left out; status values repeat and
/// are indexed, messages are not.
pub fn encode_trailers(fields: &Fields, enc: &mut Encoder, block: &mut Vec<u8>) {
    let mut lower = Vec::new();
    for (n, v) in fields.iter() {
        let Some(name) = field_name(n, &mut lower) else { continue };
        if !super::request::value_allowed(v) {
            continue;
        }
        let indexing = if v.len() > 512 { Indexing::No } else { Indexing::Yes };
        enc.field(name, v, indexing, block);
    }
}

/// add_trailer's fields (after an origin's) as `Fields` for the HEADERS
/// frame that ends the stream; `encode_trailers` drops what HTTP/2 cannot
/// carry.
pub fn trailer_fields(list: &[(String, Vec<u8>)]) -> Fields {
    let mut f = Fields::with_capacity(list.iter().map(|(n, v)| n.len() + v.len()).sum());
    for (n, v) in list {
        f.push(n.as_bytes(), v);
    }
    f
}

/// add_trailer's fields as the HEADERS block that ends the stream (names
/// lowercased, as HTTP/2 requires; a field HTTP/2 cannot carry is left
/// out).
pub fn trailers(fields: &[(String, Vec<u8>)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::with_capacity(fields.len());
    for (n, v) in fields {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n.as_bytes()), HeaderValue::from_bytes(v)) {
            map.append(n, v);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::super::hpack::Decoder;
    use super::*;
    use crate::http::field_value::FieldValue;
    use std::borrow::Cow;

    fn fields(head: &Head<'_, '_>) -> Vec<(String, Vec<u8>)> {
        let (mut enc, mut dec, mut block) = (Encoder::default(), Decoder::new(4096), Vec::new());
        enc.begin(&mut block);
        encode(head, &mut enc, &mut block);
        let mut out = Vec::new();
        dec.decode(&block, &mut |n, v, _| out.push((String::from_utf8_lossy(n).into_owned(), v.to_vec()))).unwrap();
        out
    }

    #[test]
    fn head_fields_as_http2_carries_them() {
        let mut resp = Response::new(200);
        resp.content_type = Some("text/plain".into());
        resp.body = Body::Static(b"hello");
        resp.etag = Some(b"\"1-2\"".to_vec());
        for (n, v) in [
            ("X-Mixed-Case", &b"a"[..]),
            ("Connection", b"close"),
            ("bad name", b"x"),
            ("x-ctl", b"a\x01b"),
            ("x-crlf", b"a\r\nb"),
            ("Set-Cookie", b"k=v"),
            ("Sec-WebSocket-Accept", b"abc"),
        ] {
            resp.headers.push((Cow::Borrowed(n), FieldValue::copy_from(v)));
        }
        let f = fields(&Head::new(&resp, false));
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                ":status",
                "server",
                "date",
                "content-type",
                "content-length",
                "etag",
                "x-mixed-case",
                "x-ctl",
                "set-cookie",
                "sec-websocket-accept"
            ]
        );
        assert_eq!(f[0].1, b"200");
        assert_eq!(f[1].1, b"sluice");
        assert_eq!(f[4].1, b"5");
        assert_eq!(f[7].1, b"a\x01b");
        // The tunnel's 200: no length, no accept value.
        let f = fields(&Head { resp: &resp, server_tokens: true, tunnel: true });
        assert!(f.iter().all(|(n, _)| n != "content-length" && n != "sec-websocket-accept"));
        assert!(f[1].1.starts_with(b"sluice/"));
    }

    #[test]
    fn an_origins_server_and_date_replace_ours() {
        let mut resp = Response::new(404);
        resp.headers.push((Cow::Borrowed("Server"), FieldValue::copy_from(b"origin")));
        resp.headers.push((Cow::Borrowed("date"), FieldValue::copy_from(b"Mon, 01 Jan 2024 00:00:00 GMT")));
        let f = fields(&Head::new(&resp, false));
        let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, [":status", "content-length", "server", "date"]);
        assert_eq!(f[2].1, b"origin");
    }
}
