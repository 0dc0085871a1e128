//! The request as handlers see it: a view over the connection's read buffer
//! (no header copies), plus the few fields the pipeline needs parsed.

use std::borrow::Cow;
use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Post,
    Put,
    Delete,
    Options,
    Other,
}

impl Method {
    pub fn from_bytes(m: &[u8]) -> Method {
        match m {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// A simple request (`GET /path` alone): the answer is the bare body.
    Http09,
    Http10,
    Http11,
    /// A request that came as an HTTP/2 stream.
    Http2,
    /// A request that came as an HTTP/3 stream.
    Http3,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http09 => "HTTP/0.9",
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
            Version::Http3 => "HTTP/3.0",
        }
    }
}

/// Offsets of one header line within the request head.
#[derive(Clone, Debug)]
pub struct HeaderIdx {
    pub name: Range<usize>,
    pub value: Range<usize>,
}

/// How the request body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    None,
    Length(u64),
    Chunked,
}

/// Everything parsed from a request head, as offsets into the buffer so it
/// can be kept while the buffer is borrowed elsewhere.
#[derive(Clone, Debug)]
pub struct Head {
    pub method: Method,
    pub method_r: Range<usize>,
    pub target: Range<usize>,
    pub version: Version,
    /// The request line without CRLF (for `$request`).
    pub line: Range<usize>,
    pub head_len: usize,
    pub headers: Vec<HeaderIdx>,
    pub host: Option<Range<usize>>,
    pub body: BodyKind,
    /// Per the request's Connection header and version.
    pub keep_alive: bool,
    pub expect_continue: bool,
}

/// A request ready for routing: the parsed head over its bytes, plus the
/// normalized path and the lowercased host.
pub struct Request<'a> {
    pub buf: &'a [u8],
    /// From the head; error_page redirects turn it into GET.
    pub method: Method,
    pub head: &'a Head,
    /// Normalized, percent-decoded (`$uri`); replaced by internal redirects.
    pub path: Cow<'a, [u8]>,
    pub args: Option<Cow<'a, [u8]>>,
    pub host: Cow<'a, [u8]>,
}

impl<'a> Request<'a> {
    pub fn method(&self) -> Method {
        self.method
    }

    pub fn method_bytes(&self) -> &'a [u8] {
        &self.buf[self.head.method_r.clone()]
    }

    /// The raw request-target (`$request_uri`).
    pub fn target(&self) -> &'a [u8] {
        &self.buf[self.head.target.clone()]
    }

    pub fn request_line(&self) -> &'a [u8] {
        &self.buf[self.head.line.clone()]
    }

    pub fn version(&self) -> Version {
        self.head.version
    }

    /// First header with this (lowercase) name.
    pub fn header(&self, lower_name: &str) -> Option<&'a [u8]> {
        let buf = self.buf;
        self.head
            .headers
            .iter()
            .find(|h| buf[h.name.clone()].eq_ignore_ascii_case(lower_name.as_bytes()))
            .map(|h| &buf[h.value.clone()])
    }

    pub fn headers(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        let buf = self.buf;
        self.head.headers.iter().map(move |h| (&buf[h.name.clone()], &buf[h.value.clone()]))
    }
}
