//! A client's header block as a request (or its trailers), with RFC 9113
//! 8.2 and 8.3's rules: lowercase names, pseudo-headers first, once each
//! and only the request ones, no connection-specific fields, `te` only
//! `trailers`, the pseudo-headers each method needs. A block that breaks
//! them is a malformed request: a stream error, not a response.

use std::borrow::Cow;

use super::super::hpack::{self, Decoder};
use super::super::request;

pub enum Refuse {
    /// Answered 400 (through `error_page`, as nginx does), then
    /// RST_STREAM PROTOCOL_ERROR.
    Malformed,
    /// Names and values past the header limit: nginx's "client sent too
    /// large header", a connection error (ENHANCE_YOUR_CALM).
    TooLarge,
}

/// A decoded request: its head (body-less) and its declared length.
pub struct Req {
    pub req: http::Request<()>,
    pub content_length: Option<u64>,
}

const CONNECTION_SPECIFIC: &[&[u8]] =
    &[b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade"];

/// A pseudo-header's value: the usual methods and schemes borrowed from
/// static text, others copied.
type Pseudo = Cow<'static, [u8]>;

#[derive(Default)]
struct Fields {
    method: Option<Pseudo>,
    scheme: Option<Pseudo>,
    authority: Option<Pseudo>,
    path: Option<Pseudo>,
    protocol: Option<Pseudo>,
    headers: http::HeaderMap,
    /// Fields with values `headers` cannot hold (see `RawFields`).
    raw: Vec<(http::HeaderName, Vec<u8>)>,
    content_length: Option<u64>,
    size: usize,
    regular_seen: bool,
    malformed: bool,
    too_large: bool,
}

impl Fields {
    fn take(&mut self, name: &[u8], value: &[u8], limit: usize, trailers: bool) {
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
            let slot = match pseudo {
                _ if self.regular_seen || trailers => None,
                b"method" => Some(&mut self.method),
                b"scheme" => Some(&mut self.scheme),
                b"authority" => Some(&mut self.authority),
                b"path" => Some(&mut self.path),
                b"protocol" => Some(&mut self.protocol),
                _ => None,
            };
            match slot {
                Some(s) if s.is_none() => *s = Some(pseudo_value(value)),
                _ => self.malformed = true,
            }
            return;
        }
        self.regular_seen = true;
        if name.iter().any(|b| b.is_ascii_uppercase())
            || CONNECTION_SPECIFIC.contains(&name)
            || (name == b"te" && value != b"trailers")
        {
            self.malformed = true;
            return;
        }
        if name == b"host" && self.headers.contains_key(http::header::HOST) {
            // nginx: "client sent duplicate host header".
            self.malformed = true;
            return;
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
        match (
            http::HeaderName::from_bytes(name),
            known_value(value).map_or_else(|| http::HeaderValue::from_bytes(value), Ok),
        ) {
            (Ok(n), Ok(v)) => {
                self.headers.append(n, v);
            }
            (Ok(n), Err(_)) if !trailers && name != b"host" && request::value_allowed(value) => {
                self.raw.push((n, value.to_vec()))
            }
            _ => self.malformed = true,
        }
    }
}

/// Two allocations a request saved: `:method` and `:scheme` are nearly
/// always one of these.
fn pseudo_value(v: &[u8]) -> Pseudo {
    Cow::Borrowed(match v {
        b"GET" => b"GET",
        b"POST" => b"POST",
        b"HEAD" => b"HEAD",
        b"http" => b"http",
        b"https" => b"https",
        _ => return Cow::Owned(v.to_vec()),
    })
}

/// Values every gRPC call sends (`te: trailers`, `content-type:
/// application/grpc`), taken as static values: the `http` crate copies
/// any other into an allocation of its own.
fn known_value(v: &[u8]) -> Option<http::HeaderValue> {
    Some(http::HeaderValue::from_static(match v {
        b"trailers" => "trailers",
        b"application/grpc" => "application/grpc",
        _ => return None,
    }))
}

/// Decodes a request's header block. The outer error is the connection's
/// (the HPACK state is lost); the inner one the stream's.
pub fn request(dec: &mut Decoder, block: &[u8], limit: usize) -> Result<Result<Req, Refuse>, hpack::Error> {
    let mut f = Fields::default();
    dec.decode(block, &mut |n, v, _| f.take(n, v, limit, false))?;
    if f.too_large {
        return Ok(Err(Refuse::TooLarge));
    }
    if f.malformed {
        return Ok(Err(Refuse::Malformed));
    }
    Ok(build(f).ok_or(Refuse::Malformed))
}

fn build(f: Fields) -> Option<Req> {
    let method = f.method.as_deref()?;
    // nginx's method token: capital letters, '_' and '-' only.
    if method.is_empty() || !method.iter().all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-') {
        return None;
    }
    let method = http::Method::from_bytes(method).ok()?;
    // nginx: a request needs :authority or Host, and the two must agree.
    let host = f.headers.get(http::header::HOST).map(|h| h.as_bytes());
    match (&f.authority, host) {
        (None, None) => return None,
        (Some(a), Some(h)) if !a.eq_ignore_ascii_case(h) => return None,
        _ => {}
    }
    let connect = method == http::Method::CONNECT;
    let uri = if connect && f.protocol.is_none() && (f.scheme.is_none() || f.path.is_none()) {
        // A plain CONNECT: :authority (RFC 9113 8.5). One that also has
        // :scheme and :path is taken as the request it looks like, so
        // that it gets nginx's 405 rather than a reset.
        http::Uri::builder().authority(f.authority?.into_owned()).build().ok()?
    } else {
        if f.protocol.is_some() && !connect {
            return None;
        }
        let (scheme, path) = (f.scheme?, f.path?);
        if path.is_empty() {
            return None;
        }
        let mut b = http::Uri::builder();
        if let Some(a) = f.authority {
            b = b.scheme(&scheme[..]).authority(a.into_owned());
        }
        b.path_and_query(path.into_owned()).build().ok()?
    };
    let mut req = http::Request::new(());
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.version_mut() = http::Version::HTTP_2;
    *req.headers_mut() = f.headers;
    if !f.raw.is_empty() {
        req.extensions_mut().insert(request::RawFields(f.raw));
    }
    if let Some(p) = f.protocol {
        let p = std::str::from_utf8(&p).ok()?;
        req.extensions_mut().insert(h2::ext::Protocol::from(p));
    }
    Some(Req { req, content_length: f.content_length })
}

/// Decodes a trailing header block: regular fields only.
pub fn trailers(
    dec: &mut Decoder,
    block: &[u8],
    limit: usize,
) -> Result<Result<http::HeaderMap, Refuse>, hpack::Error> {
    let mut f = Fields::default();
    dec.decode(block, &mut |n, v, _| f.take(n, v, limit, true))?;
    if f.too_large {
        return Ok(Err(Refuse::TooLarge));
    }
    if f.malformed {
        return Ok(Err(Refuse::Malformed));
    }
    Ok(Ok(f.headers))
}

/// The request a malformed header block is answered as: `GET /` on the
/// default server, marked so that the pipeline answers 400.
pub fn malformed_placeholder() -> http::Request<()> {
    let mut req = http::Request::new(());
    *req.version_mut() = http::Version::HTTP_2;
    *req.uri_mut() = http::Uri::from_static("/");
    req.extensions_mut().insert(super::super::handle::BadRequest);
    req
}
