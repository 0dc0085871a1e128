//! A client's header block as a request (or its trailers), with RFC 9113
//! 8.2 and 8.3's rules: lowercase names, pseudo-headers first, once each
//! and only the request ones, no connection-specific fields, `te` only
//! `trailers`, the pseudo-headers each method needs. A block that breaks
//! them is a malformed request: a stream error, not a response.
//!
//! A request's fields are decoded straight into the HTTP/1 form the rest
//! of the pipeline reads (`request::Head` over one buffer, as the HTTP/1
//! codec gives): no `http` types, no copy per field. The pseudo-headers
//! come first in a valid block, so the request line is written when the
//! first regular field arrives; until then their values wait in the
//! connection's scratch buffer.

use std::ops::Range;

use super::super::hpack::{self, Decoder};
use super::super::request::{Bad, MAX_HEADERS, push_field, value_allowed};
use super::super::response::is_lower_token;
use crate::http::connection::h1::codec::Limits;
use crate::http::request::{BodyKind, Head, HeaderIdx, Method, Version};

pub enum Refuse {
    /// Answered 400 (through `error_page`, as nginx does), then
    /// RST_STREAM PROTOCOL_ERROR.
    Malformed,
    /// Names and values past the header limit: nginx's "client sent too
    /// large header", a connection error (ENHANCE_YOUR_CALM).
    TooLarge,
}

/// A decoded request: its bytes in HTTP/1 form and the head over them.
pub struct Incoming {
    pub buf: Vec<u8>,
    pub head: Head,
    /// An extended CONNECT's `:protocol` (RFC 8441).
    pub protocol: Option<Vec<u8>>,
    /// The declared `content-length`.
    pub content_length: Option<u64>,
    /// Answered 400 before routing, with nginx's log line.
    pub refused: Option<Bad>,
    /// Malformed (RFC 9113 8.1.1): answered 400 through `error_page`.
    pub malformed: bool,
    /// The header block's length (HEADERS and CONTINUATION payloads
    /// without padding or priority), for `$request_length`.
    pub block_len: Option<u64>,
}

impl Incoming {
    /// The request a malformed header block is answered as: `GET /` on
    /// the default server, marked so that the pipeline answers 400.
    pub fn malformed() -> Incoming {
        let buf = b"GET / HTTP/2.0\r\n\r\n".to_vec();
        let head = Head {
            method: Method::Get,
            method_r: 0..3,
            target: 4..5,
            version: Version::Http2,
            line: 0..14,
            head_len: buf.len(),
            headers: Vec::new(),
            host: None,
            body: BodyKind::None,
            keep_alive: true,
            expect_continue: false,
        };
        Incoming { buf, head, protocol: None, content_length: None, refused: None, malformed: true, block_len: None }
    }

    /// The request's method, path and query as its request line has them.
    pub fn target(&self) -> &[u8] {
        &self.buf[self.head.target.clone()]
    }

    pub fn method(&self) -> &[u8] {
        &self.buf[self.head.method_r.clone()]
    }

    /// The Host its request line stands with (`:authority`, else Host).
    pub fn host(&self) -> &[u8] {
        self.head.host.clone().map_or(&b""[..], |r| &self.buf[r])
    }
}

const CONNECTION_SPECIFIC: &[&[u8]] =
    &[b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"];

/// A pseudo-header's value: the usual methods and schemes as static text,
/// others where they wait in the scratch buffer.
#[derive(Clone)]
enum PseudoVal {
    Static(&'static [u8]),
    Scratch(Range<usize>),
}

struct Builder<'s> {
    scratch: &'s mut Vec<u8>,
    method: Option<PseudoVal>,
    scheme: Option<PseudoVal>,
    authority: Option<PseudoVal>,
    path: Option<PseudoVal>,
    protocol: Option<PseudoVal>,
    buf: Vec<u8>,
    headers: Vec<HeaderIdx>,
    /// Where the request line ends in `buf` once written (`line_written`).
    line: Range<usize>,
    method_r: Range<usize>,
    target: Range<usize>,
    line_written: bool,
    host: Option<Range<usize>>,
    /// A `host` field (beside `:authority`), its value's range.
    host_field: Option<Range<usize>>,
    /// `cookie` fields' values in `scratch`: nginx joins them.
    cookies: Vec<Range<usize>>,
    content_length: Option<u64>,
    regular: usize,
    size: usize,
    regular_seen: bool,
    malformed: bool,
    too_large: bool,
}

impl<'s> Builder<'s> {
    fn new(scratch: &'s mut Vec<u8>, block_len: usize, limit: usize) -> Builder<'s> {
        scratch.clear();
        Builder {
            scratch,
            method: None,
            scheme: None,
            authority: None,
            path: None,
            protocol: None,
            // Decoded fields are mostly a little longer than their block
            // (Huffman), plus the separators HTTP/1 form adds.
            buf: Vec::with_capacity((block_len * 2 + 64).min(limit + 64)),
            headers: Vec::with_capacity(12),
            line: 0..0,
            method_r: 0..0,
            target: 0..0,
            line_written: false,
            host: None,
            host_field: None,
            cookies: Vec::new(),
            content_length: None,
            regular: 0,
            size: 0,
            regular_seen: false,
            malformed: false,
            too_large: false,
        }
    }

    fn stash(&mut self, v: &[u8]) -> PseudoVal {
        PseudoVal::Static(match v {
            b"GET" => b"GET",
            b"POST" => b"POST",
            b"HEAD" => b"HEAD",
            b"http" => b"http",
            b"https" => b"https",
            _ => {
                let s = self.scratch.len();
                self.scratch.extend_from_slice(v);
                return PseudoVal::Scratch(s..self.scratch.len());
            }
        })
    }

    fn take(&mut self, name: &[u8], value: &[u8], limit: usize, limits: &Limits) {
        // nginx counts names and values only (not RFC 9113's 32 bytes of
        // overhead a field), indexed ones included, against
        // `large_client_header_buffers`' number times size.
        self.size += name.len() + value.len();
        if self.size > limit {
            self.too_large = true;
        }
        if self.malformed || self.too_large {
            return;
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular_seen {
                self.malformed = true;
                return;
            }
            let v = self.stash(value);
            let slot = match pseudo {
                b"method" => &mut self.method,
                b"scheme" => &mut self.scheme,
                b"authority" => &mut self.authority,
                b"path" => &mut self.path,
                b"protocol" => &mut self.protocol,
                _ => {
                    self.malformed = true;
                    return;
                }
            };
            if slot.is_some() || !value_allowed(value) {
                self.malformed = true;
            } else {
                *slot = Some(v);
            }
            return;
        }
        if !self.regular_seen {
            self.regular_seen = true;
            if !self.request_line() {
                self.malformed = true;
                return;
            }
        }
        if !regular_ok(name, value) {
            self.malformed = true;
            return;
        }
        if name == b"host" {
            // nginx: "client sent duplicate host header"; a Host value
            // takes only what HTTP/1 allows.
            if self.host_field.is_some() || !host_value_ok(value) {
                self.malformed = true;
                return;
            }
        }
        if name == b"content-length" {
            let n = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u64>().ok());
            match (n, self.content_length) {
                (Some(n), None) => self.content_length = Some(n),
                (Some(n), Some(m)) if n == m => {}
                _ => {
                    self.malformed = true;
                    return;
                }
            }
        }
        if limits.drops(name) {
            return;
        }
        self.regular += 1;
        if name == b"cookie" {
            // HTTP/2 may split Cookie into several fields; nginx joins
            // them into one.
            let s = self.scratch.len();
            self.scratch.extend_from_slice(value);
            self.cookies.push(s..self.scratch.len());
            return;
        }
        let v = self.push(name, value);
        if name == b"host" {
            self.host_field = Some(v.clone());
            if self.host.is_none() {
                self.host = Some(v);
            }
        }
    }

    /// Appends `name: value\r\n`; the value's range.
    fn push(&mut self, name: &[u8], value: &[u8]) -> Range<usize> {
        push_field(&mut self.buf, &mut self.headers, name, value)
    }

    /// Writes the request line (and `:authority` as the first `host`
    /// field) from the pseudo-headers; false when they do not make a
    /// request (RFC 9113 8.3.1 and 8.5, nginx's checks on each).
    fn request_line(&mut self) -> bool {
        self.line_written = true;
        let scratch: &[u8] = self.scratch;
        let Some(method) = self.method.as_ref().map(|m| val(scratch, m)) else { return false };
        // nginx's method token: capital letters, '_' and '-' only.
        if method.is_empty() || !method.iter().all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-') {
            return false;
        }
        let connect = method == b"CONNECT";
        let plain_connect = connect && self.protocol.is_none() && (self.scheme.is_none() || self.path.is_none());
        let target: &[u8] = if plain_connect {
            // A plain CONNECT: :authority only (RFC 9113 8.5). One that
            // also has :scheme and :path is taken as the request it looks
            // like, so that it gets nginx's 405 rather than a reset.
            if self.authority.is_none() {
                return false;
            }
            b"/"
        } else {
            if self.protocol.is_some() && !connect {
                return false;
            }
            let (Some(scheme), Some(path)) = (&self.scheme, &self.path) else { return false };
            let (scheme, path) = (val(scratch, scheme), val(scratch, path));
            if !scheme_ok(scheme) || !path_ok(path) {
                return false;
            }
            path
        };
        let buf = &mut self.buf;
        buf.extend_from_slice(method);
        self.method_r = 0..buf.len();
        buf.push(b' ');
        let t0 = buf.len();
        buf.extend_from_slice(target);
        self.target = t0..buf.len();
        buf.push(b' ');
        buf.extend_from_slice(Version::Http2.as_str().as_bytes());
        self.line = 0..buf.len();
        buf.extend_from_slice(b"\r\n");
        // :authority stands for Host (RFC 9113 8.3.1); a Host field, if
        // sent as well, comes after it and the first one wins for routing.
        if let Some(a) = &self.authority {
            self.host = Some(push_field(buf, &mut self.headers, b"host", val(scratch, a)));
        }
        true
    }

    fn finish(mut self, has_body: bool, limits: &Limits) -> Incoming {
        if !self.line_written && !self.request_line() {
            self.malformed = true;
        }
        // nginx: a request needs :authority or Host, and the two agree.
        match (&self.authority, &self.host_field) {
            (None, None) => self.malformed = true,
            (Some(a), Some(h)) if !val(self.scratch, a).eq_ignore_ascii_case(&self.buf[h.clone()]) => {
                self.malformed = true
            }
            _ => {}
        }
        let refused = if self.regular > MAX_HEADERS.min(limits.max_lines) {
            Some(Bad::TooManyHeaders)
        } else {
            let t = &self.buf[self.target.clone()];
            let options = &self.buf[self.method_r.clone()] == b"OPTIONS";
            (!(t.starts_with(b"/") || (t == b"*" && options))).then_some(Bad::InvalidPath)
        };
        if !self.cookies.is_empty() {
            let mut joined = Vec::with_capacity(self.cookies.iter().map(|r| r.len() + 2).sum());
            for (i, r) in self.cookies.iter().enumerate() {
                if i > 0 {
                    joined.extend_from_slice(b"; ");
                }
                joined.extend_from_slice(&self.scratch[r.clone()]);
            }
            self.push(b"cookie", &joined);
        }
        let protocol = self.protocol.as_ref().map(|p| val(self.scratch, p).to_vec());
        if protocol.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(b"websocket")) {
            // Its HTTP/1.1 form's fields, so that `$http_upgrade` and
            // `$http_connection` read as they would there.
            self.push(b"upgrade", b"websocket");
            self.push(b"connection", b"upgrade");
        }
        self.buf.extend_from_slice(b"\r\n");
        // A CONNECT's DATA frames are a tunnel (or unread: a plain one
        // gets 405), not a body.
        let connect = &self.buf[self.method_r.clone()] == b"CONNECT";
        let body = match (self.content_length, has_body && !connect) {
            (Some(n), _) => BodyKind::Length(n),
            (None, true) => BodyKind::Chunked,
            (None, false) => BodyKind::None,
        };
        let head = Head {
            method: Method::from_bytes(&self.buf[self.method_r.clone()]),
            method_r: self.method_r,
            target: self.target,
            version: Version::Http2,
            line: self.line,
            head_len: self.buf.len(),
            headers: self.headers,
            host: self.host,
            body,
            keep_alive: true,
            expect_continue: false,
        };
        Incoming {
            buf: self.buf,
            head,
            protocol,
            content_length: self.content_length,
            refused,
            malformed: self.malformed,
            block_len: None,
        }
    }
}

fn val<'a>(scratch: &'a [u8], v: &'a PseudoVal) -> &'a [u8] {
    match v {
        PseudoVal::Static(s) => s,
        PseudoVal::Scratch(r) => &scratch[r.clone()],
    }
}

/// A regular field's name and value as HTTP/2 allows them: a lowercase
/// token name, no connection-specific field, `te` only `trailers`, no
/// NUL, CR or LF in the value (nginx takes every other byte).
fn regular_ok(name: &[u8], value: &[u8]) -> bool {
    !name.is_empty()
        && is_lower_token(name)
        && !CONNECTION_SPECIFIC.contains(&name)
        && (name != b"te" || value == b"trailers")
        && value_allowed(value)
}

/// A Host value: visible ASCII, obs-text, spaces and tabs; no control
/// characters (nginx's host validation then has the last word).
fn host_value_ok(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

/// nginx's `:scheme` check: a letter, then letters, digits, `+`, `-`, `.`.
fn scheme_ok(s: &[u8]) -> bool {
    s.first().is_some_and(|b| b.is_ascii_alphabetic())
        && s.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// nginx's `:path` check: not empty, no space or control characters.
fn path_ok(p: &[u8]) -> bool {
    !p.is_empty() && p.iter().all(|&b| b > 0x20 && b != 0x7f)
}

/// Decodes a request's header block into its HTTP/1 form; `scratch` is
/// the connection's, reused from block to block. `has_body` is whether
/// DATA frames follow. The outer error is the connection's (the HPACK
/// state is lost); the inner one the stream's.
pub fn request(
    dec: &mut Decoder,
    block: &[u8],
    scratch: &mut Vec<u8>,
    limit: usize,
    limits: &Limits,
    has_body: bool,
) -> Result<Result<Incoming, Refuse>, hpack::Error> {
    let mut b = Builder::new(scratch, block.len(), limit);
    dec.decode(block, &mut |n, v, _| b.take(n, v, limit, limits))?;
    if b.too_large {
        return Ok(Err(Refuse::TooLarge));
    }
    if b.malformed {
        return Ok(Err(Refuse::Malformed));
    }
    let mut inc = b.finish(has_body, limits);
    inc.block_len = Some(block.len() as u64);
    if inc.malformed {
        return Ok(Err(Refuse::Malformed));
    }
    Ok(Ok(inc))
}

/// Decodes a trailing header block: regular fields only.
pub fn trailers(
    dec: &mut Decoder,
    block: &[u8],
    limit: usize,
) -> Result<Result<http::HeaderMap, Refuse>, hpack::Error> {
    let mut map = http::HeaderMap::new();
    let (mut size, mut malformed) = (0usize, false);
    dec.decode(block, &mut |n, v, _| {
        size += n.len() + v.len();
        if malformed || size > limit {
            return;
        }
        match (regular_ok(n, v), http::HeaderName::from_bytes(n), http::HeaderValue::from_bytes(v)) {
            (true, Ok(n), Ok(v)) => {
                map.append(n, v);
            }
            _ => malformed = true,
        }
    })?;
    if size > limit {
        return Ok(Err(Refuse::TooLarge));
    }
    if malformed {
        return Ok(Err(Refuse::Malformed));
    }
    Ok(Ok(map))
}

#[cfg(test)]
#[path = "headers_tests.rs"]
mod tests;
