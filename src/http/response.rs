//! A protocol-neutral response: handlers and filters fill it, the HTTP/1
//! writer (and later HTTP/2) serializes it. Fields the hot path always sets
//! are plain fields, not header-list entries, so the common static and
//! empty_gif responses allocate nothing for headers.

use std::borrow::Cow;
use std::rc::Rc;

use crate::http::field_value::FieldValue;
use crate::http::handler::open_cache::OpenFile;
use crate::http::range::ByteRange;

pub enum Body {
    Empty,
    Static(&'static [u8]),
    Owned(Vec<u8>),
    /// Bytes shared with a holder that outlives the response (a cache
    /// entry in memory): sending them copies nothing for HTTP/2.
    Shared(bytes::Bytes),
    File {
        file: Rc<OpenFile>,
        offset: u64,
        len: u64,
    },
    /// Set by a `proxy_pass` location: the connection layer runs the proxy
    /// (which is asynchronous) and replaces the whole response.
    Proxy,
    /// The origin's body, streamed as it arrives.
    Upstream(Box<crate::http::proxy::body::UpstreamBody>),
    /// Another body compressed as it is sent (gzip, br, zstd): length
    /// unknown until the end, so chunked on HTTP/1.1.
    Compressed(Box<crate::http::filter::compress::stream::Compressed>),
    /// multipart/byteranges: each part's header, its range, then a trailer.
    Multipart {
        file: Rc<OpenFile>,
        parts: Vec<(Vec<u8>, ByteRange)>,
        trailer: Vec<u8>,
    },
}

impl Body {
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Static(b) => b.len() as u64,
            Body::Owned(b) => b.len() as u64,
            Body::Shared(b) => b.len() as u64,
            Body::File { len, .. } => *len,
            Body::Proxy => 0,
            Body::Upstream(u) => u.known_len().unwrap_or(0),
            Body::Compressed(z) => z.declared_len.unwrap_or(0),
            Body::Multipart { parts, trailer, .. } => {
                parts.iter().map(|(h, r)| h.len() as u64 + (r.end - r.start + 1)).sum::<u64>() + trailer.len() as u64
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// None for a streamed body whose length the origin did not say.
    pub fn known_len(&self) -> Option<u64> {
        match self {
            Body::Upstream(u) => u.known_len(),
            Body::Compressed(z) => z.declared_len,
            other => Some(other.len()),
        }
    }
}

pub struct Response<'c> {
    /// nginx's internal codes (494) are mapped to wire codes by the writer.
    pub status: u16,
    pub content_type: Option<Cow<'c, str>>,
    pub last_modified: Option<u64>,
    pub etag: Option<Vec<u8>>,
    pub location: Option<Vec<u8>>,
    /// Headers added by filters, in order (Expires, Cache-Control, add_header).
    pub headers: Vec<(Cow<'c, str>, FieldValue)>,
    pub accept_ranges: bool,
    pub content_range: Option<Vec<u8>>,
    pub body: Body,
    /// The connection must close after this response (bad requests).
    pub close: bool,
    /// Set for nginx's generated error pages, so `error_page` may replace them.
    pub is_error_page: bool,
    /// `proxy_pass_header Server` (or `Date`) was set and the origin sent
    /// none: nginx then sends none of its own either.
    pub no_server: bool,
    pub no_date: bool,
}

impl<'c> Response<'c> {
    pub fn new(status: u16) -> Response<'c> {
        Response {
            status,
            content_type: None,
            last_modified: None,
            etag: None,
            location: None,
            headers: Vec::new(),
            accept_ranges: false,
            content_range: None,
            body: Body::Empty,
            close: false,
            is_error_page: false,
            no_server: false,
            no_date: false,
        }
    }

    pub fn header(&self, lower_name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(lower_name)).map(|(_, v)| v.as_slice())
    }
}
