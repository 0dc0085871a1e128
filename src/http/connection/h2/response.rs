//! Our protocol-neutral `Response` as an HTTP/2 HEADERS block, with the
//! same fields the HTTP/1 writer sends (minus Connection/Keep-Alive, which
//! HTTP/2 forbids), and its body as a list of segments to send as DATA.

use std::cell::RefCell;
use std::rc::Rc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};

use crate::http::connection::h1::writer::has_body;
use crate::http::error_html::wire_status;
use crate::http::handler::open_cache::OpenFile;
use crate::http::response::{Body, Response};

/// A header value built last, with the bytes it was built from.
type Reused = RefCell<Option<(Vec<u8>, HeaderValue)>>;

thread_local! {
    /// The last Date and Content-Type values built, with their bytes: the
    /// next response (the same second, the same type, as most are) clones
    /// them (a reference count) instead of copying them into a new
    /// allocation each.
    static DATE: Reused = const { RefCell::new(None) };
    static CONTENT_TYPE: Reused = const { RefCell::new(None) };
}

/// `v` as a header value, the one in `slot` when it holds the same bytes.
fn reused(slot: &'static std::thread::LocalKey<Reused>, v: &[u8]) -> Option<HeaderValue> {
    slot.with(|c| {
        let mut c = c.borrow_mut();
        if let Some((bytes, value)) = c.as_ref()
            && bytes == v
        {
            return Some(value.clone());
        }
        let value = HeaderValue::from_maybe_shared(Bytes::copy_from_slice(v)).ok()?;
        *c = Some((v.to_vec(), value.clone()));
        Some(value)
    })
}

fn server_value(tokens: bool) -> HeaderValue {
    HeaderValue::from_static(if tokens { concat!("sluice/", env!("CARGO_PKG_VERSION")) } else { "sluice" })
}

pub fn head(resp: &Response<'_>, server_tokens: bool) -> http::Response<()> {
    let wire = wire_status(resp.status);
    let mut out = http::Response::new(());
    *out.status_mut() = http::StatusCode::from_u16(wire).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    // Sized once for the usual head (ours plus the added or origin's
    // headers), instead of growing and rehashing as they are inserted.
    h.reserve(8 + resp.headers.len());
    if !resp.no_server {
        h.insert(http::header::SERVER, server_value(server_tokens));
    }
    if !resp.no_date
        && let Some(v) = reused(&DATE, &crate::clock::http_date())
    {
        h.insert(http::header::DATE, v);
    }
    if let Some(ct) = &resp.content_type
        && let Some(v) = reused(&CONTENT_TYPE, ct.as_bytes())
    {
        h.insert(http::header::CONTENT_TYPE, v);
    }
    if has_body(wire)
        && let Some(n) = resp.body.known_len()
    {
        h.insert(http::header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    let validators = matches!(wire, 200 | 206 | 304);
    if validators && let Some(lm) = resp.last_modified {
        let mut d = [0u8; 29];
        crate::http::date::http_date(lm, &mut d);
        if let Ok(v) = HeaderValue::from_bytes(&d) {
            h.insert(http::header::LAST_MODIFIED, v);
        }
    }
    if let Some(loc) = &resp.location
        && let Ok(v) = HeaderValue::from_bytes(loc)
    {
        h.insert(http::header::LOCATION, v);
    }
    if validators
        && let Some(e) = &resp.etag
        && let Ok(v) = HeaderValue::from_bytes(e)
    {
        h.insert(http::header::ETAG, v);
    }
    let mut raw = Vec::new();
    for (n, v) in &resp.headers {
        let Ok(name) = HeaderName::from_bytes(n.as_bytes()) else { continue };
        if super::request::HOP_BY_HOP.contains(&name.as_str()) {
            continue;
        }
        if let Ok(v) = HeaderValue::from_bytes(v) {
            // An origin's Server or Date (proxy_pass_header) replaces ours.
            if name == http::header::SERVER || name == http::header::DATE {
                h.insert(name, v);
            } else {
                h.append(name, v);
            }
        } else if super::request::value_allowed(v) {
            raw.push((name, v.to_vec()));
        }
    }
    if let Some(cr) = &resp.content_range
        && let Ok(v) = HeaderValue::from_bytes(cr)
    {
        h.insert(http::header::CONTENT_RANGE, v);
    }
    if resp.accept_ranges && wire == 200 {
        h.insert(http::header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    }
    if !raw.is_empty() {
        out.extensions_mut().insert(super::request::RawFields(raw));
    }
    out
}

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
