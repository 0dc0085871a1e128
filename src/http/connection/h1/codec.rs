//! HTTP/1.x request head parsing on `httparse`, plus the checks httparse
//! leaves to the server: nginx's size limits and the framing rules that stop
//! request smuggling (Content-Length with Transfer-Encoding, duplicate
//! lengths, Transfer-Encoding on HTTP/1.0, unknown codings).

use crate::http::request::{BodyKind, Head, HeaderIdx, Method, Version};

/// A request the server must refuse, with nginx's status and log text.
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// 400 found while reading the request line.
    BadLine(&'static str),
    /// 400 found while reading the headers.
    Bad(&'static str),
    /// 400 naming the offending header line (nginx quotes its start).
    BadHeader(&'static str, String),
    /// 414: the request line does not fit one large header buffer.
    UriTooLong,
    /// nginx's 494, sent as 400 "Request Header Or Cookie Too Large".
    HeaderTooLarge(String),
    /// 505.
    Version,
    /// 501: a Transfer-Encoding other than chunked (the value).
    NotImplemented(String),
    /// nginx's 497: plain HTTP on a TLS address, answered in plain HTTP.
    PlainOnTls,
    /// 405: nginx refuses the TRACE method before any location runs.
    Trace,
    /// 408: client_header_timeout expired with part of a head read; logged,
    /// never answered (as nginx).
    TimedOut,
}

impl HeadError {
    pub fn status(&self) -> u16 {
        match self {
            HeadError::BadLine(_) | HeadError::Bad(_) | HeadError::BadHeader(..) => 400,
            HeadError::UriTooLong => 414,
            HeadError::HeaderTooLarge(_) => 494,
            HeadError::Version => 505,
            HeadError::NotImplemented(_) => 501,
            HeadError::PlainOnTls => 497,
            HeadError::Trace => 405,
            HeadError::TimedOut => 408,
        }
    }

    /// nginx's error-log text: the reason and the phase it was found in.
    pub fn reason(&self) -> String {
        match self {
            HeadError::BadLine(r) => format!("{r} while reading client request line"),
            HeadError::Bad(r) => format!("{r} while reading client request headers"),
            HeadError::BadHeader(r, h) => format!("{r}: \"{h}\" while reading client request headers"),
            HeadError::UriTooLong => "client sent too long URI while reading client request line".into(),
            HeadError::HeaderTooLarge(h) => {
                format!("client sent too long header line: \"{h}...\" while reading client request headers")
            }
            HeadError::Version => "client sent invalid version while reading client request line".into(),
            HeadError::PlainOnTls => {
                "client sent plain HTTP request to HTTPS port while reading client request headers".into()
            }
            HeadError::Trace => "client sent TRACE method while reading client request headers".into(),
            HeadError::TimedOut => {
                "client timed out (110: Connection timed out) while reading client request headers".into()
            }
            HeadError::NotImplemented(v) => {
                format!("client sent unknown \"Transfer-Encoding\": \"{v}\" while reading client request headers")
            }
        }
    }
}

/// Request headers nginx refuses to see twice (besides Host,
/// Content-Length and Transfer-Encoding, checked on their own): 400.
/// Expect comes first (its value is read).
const UNIQUE: [&[u8]; 8] = [
    b"expect",
    b"if-modified-since",
    b"if-unmodified-since",
    b"if-match",
    b"if-none-match",
    b"content-range",
    b"if-range",
    b"authorization",
];

/// The start of a header line for a log message (nginx prints a prefix).
fn excerpt(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == b'\r' || c == b'\n').unwrap_or(b.len()).min(256);
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// `large_client_header_buffers NUM SIZE`, and which header names count.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub line_max: usize,
    pub total_max: usize,
    /// `underscores_in_headers`: `_` is a valid name character.
    pub underscores: bool,
    /// `ignore_invalid_headers`: a header whose name has characters other
    /// than letters, digits and `-` is dropped, as if not sent.
    pub ignore_invalid: bool,
    /// `max_headers`: header lines allowed, not counting dropped ones.
    pub max_lines: usize,
}

impl Limits {
    /// nginx's defaults around a header buffer size.
    pub const fn sized(line_max: usize, total_max: usize) -> Limits {
        Limits { line_max, total_max, underscores: false, ignore_invalid: true, max_lines: MAX_HEADER_LINES }
    }

    /// Whether a header line with this name is dropped (nginx's
    /// "client sent invalid header line" at info level, then ignored).
    pub fn drops(&self, name: &[u8]) -> bool {
        self.ignore_invalid
            && !name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'-' || (b == b'_' && self.underscores))
    }
}

fn offset(buf: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - buf.as_ptr() as usize
}

fn range(buf: &[u8], part: &[u8]) -> std::ops::Range<usize> {
    let s = offset(buf, part);
    s..s + part.len()
}

const STACK_HEADERS: usize = 64;

/// Header lines a request may have by default (`max_headers`), not
/// counting lines dropped as invalid (`ignore_invalid_headers`): Debian's
/// nginx 1.22.1 (1.22.1-9+deb12u11) answers a 1001st with 400 "client sent
/// too many header lines" (found by tests/smuggling).
const MAX_HEADER_LINES: usize = 1000;

fn config() -> httparse::ParserConfig {
    let mut c = httparse::ParserConfig::default();
    c.allow_multiple_spaces_in_request_line_delimiters(true);
    c
}

/// Parses the head at the start of `buf`. `Ok(None)`: not complete yet (the
/// caller checks `overflow` when its buffer is at the limit).
pub fn parse_head(buf: &[u8], limits: Limits) -> Result<Option<Head>, HeadError> {
    if let Some(h) = simple_request(buf) {
        return Ok(Some(h));
    }
    if simple_request_cut_at_cr(buf) {
        return Ok(None);
    }
    if bad_method_start(buf) {
        return Err(HeadError::BadLine("client sent invalid method"));
    }
    // Uninitialized: httparse writes only the slots it fills, so a request
    // does not pay for clearing 64 header slots (2 KB).
    let mut stack = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; STACK_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    match config().parse_request_with_uninit_headers(&mut req, buf, &mut stack) {
        Ok(httparse::Status::Complete(n)) => finish(buf, &req, n, limits).map(Some),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            let lines = memchr::memchr_iter(b'\n', buf).count() + 1;
            let mut heap = vec![httparse::EMPTY_HEADER; lines];
            let mut req = httparse::Request::new(&mut heap);
            match config().parse_request(&mut req, buf) {
                Ok(httparse::Status::Complete(n)) => finish(buf, &req, n, limits).map(Some),
                Ok(httparse::Status::Partial) => Ok(None),
                Err(e) => Err(classify(buf, e)),
            }
        }
        Err(httparse::Error::Version) if later_minor(buf).is_some() => {
            // A later HTTP/1 minor version ("HTTP/1.2"): nginx takes the
            // request as HTTP/1.1 (RFC 9112 section 2.3), httparse refuses
            // it. The same head with the digit read as 1 has the same
            // offsets, so its ranges index `buf` as they are.
            let mut copy = buf.to_vec();
            if let Some(at) = later_minor(buf) {
                copy[at] = b'1';
            }
            parse_head(&copy, limits)
        }
        Err(e) => Err(classify(buf, e)),
    }
}

/// Where the minor digit of an `HTTP/1.2` to `HTTP/1.9` request line is.
fn later_minor(buf: &[u8]) -> Option<usize> {
    let nl = memchr::memchr(b'\n', buf)?;
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let at = line.len().checked_sub(b"HTTP/1.2".len())?;
    match &line[at..] {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', b'2'..=b'9'] if at > 0 && line[at - 1] == b' ' => Some(at + 7),
        _ => None,
    }
}

/// The method so far (after any empty lines) has a byte nginx refuses in
/// a method: nginx answers 400 at that byte, while httparse waits for the
/// line to end (so bytes left after a request, "hello" after
/// `Content-Length: 0`, kept the connection open where nginx answers 400;
/// found by tests/smuggling). Checked first, whatever else is wrong later
/// in the head, so the answer does not depend on how the bytes were split.
fn bad_method_start(buf: &[u8]) -> bool {
    let start = buf.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(buf.len());
    let m = &buf[start..];
    let end = memchr::memchr(b' ', m).unwrap_or(m.len());
    !m[..end].iter().all(|&b| b.is_ascii_uppercase() || b == b'_' || b == b'-')
}

/// Finds the header line httparse rejected, for the log.
fn bad_header_line(headers: &[u8]) -> String {
    for line in headers.split(|&c| c == b'\n') {
        let l = line.strip_suffix(b"\r").unwrap_or(line);
        if l.is_empty() {
            break;
        }
        let ok = match l.iter().position(|&c| c == b':') {
            Some(i) => {
                i > 0
                    && l[..i].iter().all(|&c| c.is_ascii_graphic())
                    && l[i + 1..].iter().all(|&c| c == b'\t' || (c >= 0x20 && c != 0x7f))
            }
            None => false,
        };
        if !ok {
            return excerpt(l);
        }
    }
    excerpt(headers)
}

/// HTTP/0.9's `GET /path` (no version, no headers), which nginx still
/// answers with the bare body.
fn simple_request(buf: &[u8]) -> Option<Head> {
    let nl = memchr::memchr(b'\n', buf)?;
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if !is_simple_line(line) {
        return None;
    }
    Some(Head {
        method: Method::Get,
        method_r: 0..3,
        target: 4..line.len(),
        version: Version::Http09,
        line: 0..line.len(),
        head_len: nl + 1,
        headers: Vec::new(),
        host: None,
        body: BodyKind::None,
        keep_alive: false,
        expect_continue: false,
    })
}

/// `GET /path` with nothing after the target.
fn is_simple_line(line: &[u8]) -> bool {
    line.strip_prefix(b"GET ")
        .is_some_and(|target| target.starts_with(b"/") && !target.iter().any(|&b| b == b' ' || b < 0x21 || b == 0x7f))
}

/// An HTTP/0.9 line whose read ended between its CR and LF: wait for the
/// LF, as nginx does, instead of letting httparse refuse a CR where it
/// wants a version (found by fuzzing: the answer depended on where the
/// client's bytes were split).
fn simple_request_cut_at_cr(buf: &[u8]) -> bool {
    buf.strip_suffix(b"\r").is_some_and(is_simple_line)
}

fn classify(buf: &[u8], e: httparse::Error) -> HeadError {
    match e {
        httparse::Error::Version => {
            // nginx (checked against 1.22.1) answers 505 as soon as the
            // version after the target has a major number above 1
            // ("HTTP/2", "HTTP/2x", "HTTP/12"), whatever follows, and 400
            // otherwise. Deciding on the version httparse refused, not on
            // the line's last word, also makes the answer the same however
            // the line was split into reads (found by fuzzing: "GET /
            // HTTP/2" was a 400 until its ".0\r\n" arrived).
            let line = buf.split(|&b| b == b'\n').next().unwrap_or(b"");
            // The HTTP/2 preface read as HTTP/1 (on a TLS address, or one
            // without HTTP/2) is an invalid request, not a version nginx
            // does not support (nginx 1.25+).
            if line.starts_with(b"PRI * HTTP/2") {
                return HeadError::BadLine("client sent invalid request");
            }
            match line.split(|&b| b == b' ').filter(|w| !w.is_empty()).nth(2) {
                Some([b'H', b'T', b'T', b'P', b'/', b'2'..=b'9', ..])
                | Some([b'H', b'T', b'T', b'P', b'/', b'1', b'0'..=b'9', ..]) => HeadError::Version,
                _ => HeadError::BadLine("client sent invalid request"),
            }
        }
        httparse::Error::HeaderName | httparse::Error::HeaderValue | httparse::Error::NewLine => {
            // The first line past the request line that httparse choked on.
            let first_nl = memchr::memchr(b'\n', buf).map(|n| n + 1).unwrap_or(buf.len());
            if first_nl >= buf.len() {
                return HeadError::BadLine("client sent invalid request");
            }
            HeadError::BadHeader("client sent invalid header line", bad_header_line(&buf[first_nl..]))
        }
        httparse::Error::Token => HeadError::BadLine("client sent invalid method"),
        _ => HeadError::BadLine("client sent invalid request"),
    }
}

/// The buffer reached its limit without a complete head: 414 when the
/// request line itself is too long, else nginx's 494.
pub fn overflow(buf: &[u8], limits: Limits) -> HeadError {
    match memchr::memchr(b'\n', buf) {
        None => HeadError::UriTooLong,
        Some(n) if n > limits.line_max => HeadError::UriTooLong,
        Some(_) => {
            // The header line that does not fit.
            let mut start = 0;
            for line in buf.split(|&c| c == b'\n') {
                if line.len() > limits.line_max || start + line.len() >= buf.len() {
                    return HeadError::HeaderTooLarge(excerpt(&buf[start..]));
                }
                start += line.len() + 1;
            }
            HeadError::HeaderTooLarge(excerpt(&buf[start.min(buf.len())..]))
        }
    }
}

thread_local! {
    /// Header index vectors handed back by `recycle`, so a request does not
    /// allocate one. A stack, not one slot: with requests in flight on many
    /// connections at once (a proxy waiting on its origin), one slot was
    /// nearly always empty and each request paid a malloc and a free.
    static SPARE: std::cell::RefCell<Vec<Vec<HeaderIdx>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Vectors kept per worker: enough for the requests one worker has in
/// flight under load; each at most STACK_HEADERS entries (2 KB).
const SPARE_MAX: usize = 64;

fn spare_headers(n: usize) -> Vec<HeaderIdx> {
    let mut v = SPARE.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    v.clear();
    v.reserve(n);
    v
}

/// Gives a finished request's header vector back for a later head.
pub fn recycle(head: &mut Head) {
    let v = std::mem::take(&mut head.headers);
    if v.capacity() > 0 && v.capacity() <= STACK_HEADERS {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_MAX {
                s.push(v);
            }
        });
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let s = v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len());
    let e = v.iter().rposition(|b| !b.is_ascii_whitespace()).map(|i| i + 1).unwrap_or(s);
    &v[s..e.max(s)]
}

/// A header's value as nginx reads it: from the colon to the end of the
/// line with spaces, and only spaces, stripped at both ends. httparse also
/// strips tabs, so `Transfer-Encoding:<TAB>chunked` would be chunked to
/// sluice but an unknown coding (501) to nginx, and `Content-Length:
/// 5<TAB>` a length to sluice but invalid (400) to nginx: a server in front
/// that frames such a request differently is how a request is smuggled, so
/// the framing headers are read nginx's way (found by tests/smuggling).
fn nginx_value<'b>(buf: &'b [u8], idx: &HeaderIdx) -> &'b [u8] {
    let rest = &buf[idx.name.end..];
    let line = &rest[..memchr::memchr2(b'\r', b'\n', rest).unwrap_or(rest.len())];
    let v = line.strip_prefix(b":").unwrap_or(line);
    let s = v.iter().position(|&b| b != b' ').unwrap_or(v.len());
    let e = v.iter().rposition(|&b| b != b' ').map_or(s, |i| i + 1);
    &v[s..e.max(s)]
}

fn has_token(v: &[u8], token: &[u8]) -> bool {
    v.split(|&b| b == b',').any(|t| trim(t).eq_ignore_ascii_case(token))
}

fn finish(buf: &[u8], req: &httparse::Request<'_, '_>, head_len: usize, limits: Limits) -> Result<Head, HeadError> {
    let (Some(method), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(HeadError::BadLine("client sent invalid request"));
    };
    // nginx accepts only upper-case letters, '_' and '-' in a method.
    if !method.bytes().all(|b| b.is_ascii_uppercase() || b == b'_' || b == b'-') {
        return Err(HeadError::BadLine("client sent invalid method"));
    }
    let method_r = range(buf, method.as_bytes());
    let line_end = memchr::memchr(b'\n', &buf[method_r.start..]).map(|n| method_r.start + n).unwrap_or(head_len);
    let line_end = if line_end > 0 && buf[line_end - 1] == b'\r' { line_end - 1 } else { line_end };
    if line_end - method_r.start > limits.line_max {
        return Err(HeadError::UriTooLong);
    }
    let version = if minor == 0 { Version::Http10 } else { Version::Http11 };
    let mut headers = spare_headers(req.headers.len());
    let mut host = None;
    let mut content_length: Option<u64> = None;
    let mut te: Option<&[u8]> = None;
    let mut conn_close = false;
    let mut conn_keep_alive = false;
    let mut expect_continue = false;
    let mut unique_seen = 0u16;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let idx = HeaderIdx { name: range(buf, name), value: range(buf, h.value) };
        if idx.value.end - idx.name.start > limits.line_max {
            return Err(HeadError::HeaderTooLarge(excerpt(&buf[idx.name.start..])));
        }
        if limits.drops(name) {
            continue;
        }
        if headers.len() >= limits.max_lines {
            return Err(HeadError::Bad("client sent too many header lines"));
        }
        let v = h.value;
        if name.eq_ignore_ascii_case(b"host") {
            if host.is_some() {
                return Err(HeadError::Bad("client sent duplicate host header"));
            }
            host = Some(idx.value.clone());
        } else if name.eq_ignore_ascii_case(b"content-length") {
            if content_length.is_some() {
                return Err(HeadError::BadHeader("client sent duplicate header line", excerpt(&buf[idx.name.start..])));
            }
            let t = nginx_value(buf, &idx);
            if t.is_empty() || t.len() > 18 || !t.iter().all(u8::is_ascii_digit) {
                return Err(HeadError::Bad("client sent invalid \"Content-Length\" header"));
            }
            content_length = std::str::from_utf8(t).ok().and_then(|s| s.parse().ok());
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if te.is_some() {
                return Err(HeadError::BadHeader("client sent duplicate header line", excerpt(&buf[idx.name.start..])));
            }
            te = Some(nginx_value(buf, &idx));
        } else if name.eq_ignore_ascii_case(b"connection") {
            conn_close |= has_token(v, b"close");
            conn_keep_alive |= has_token(v, b"keep-alive");
        } else if let Some(i) = UNIQUE.iter().position(|u| u.len() == name.len() && u.eq_ignore_ascii_case(name)) {
            // nginx's ngx_http_process_unique_header_line.
            if unique_seen & (1 << i) != 0 {
                return Err(HeadError::BadHeader("client sent duplicate header line", excerpt(&buf[idx.name.start..])));
            }
            unique_seen |= 1 << i;
            if i == 0 {
                expect_continue = trim(v).eq_ignore_ascii_case(b"100-continue");
            }
        }
        headers.push(idx);
    }
    let body = match (te, content_length) {
        (Some(_), _) if version == Version::Http10 => {
            return Err(HeadError::Bad("client sent HTTP/1.0 request with \"Transfer-Encoding\" header"));
        }
        // nginx refuses an unknown coding (501) before it looks for a
        // Content-Length beside it.
        (Some(t), _) if !t.eq_ignore_ascii_case(b"chunked") => {
            return Err(HeadError::NotImplemented(String::from_utf8_lossy(t).into_owned()));
        }
        (Some(_), Some(_)) => {
            return Err(HeadError::Bad(
                "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
            ));
        }
        (Some(_), None) => BodyKind::Chunked,
        (None, Some(0)) | (None, None) => BodyKind::None,
        (None, Some(n)) => BodyKind::Length(n),
    };
    if version == Version::Http11 && host.is_none() {
        return Err(HeadError::Bad("client sent HTTP/1.1 request without \"Host\" header"));
    }
    let keep_alive = match version {
        Version::Http11 => !conn_close,
        Version::Http10 => conn_keep_alive && !conn_close,
        Version::Http09 | Version::Http2 | Version::Http3 => false,
    };
    let target = range(buf, path.as_bytes());
    Ok(Head {
        method: Method::from_bytes(method.as_bytes()),
        method_r: method_r.clone(),
        target,
        version,
        line: method_r.start..line_end,
        head_len,
        headers,
        host,
        body,
        keep_alive,
        expect_continue: expect_continue && version == Version::Http11,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: Limits = Limits::sized(8192, 32768);

    fn parse(s: &str) -> Result<Option<Head>, HeadError> {
        parse_head(s.as_bytes(), L)
    }

    #[test]
    fn simple_get() {
        let s = "GET /empty.gif?x=1 HTTP/1.1\r\nHost: Example.com\r\nUser-Agent: t\r\n\r\nNEXT";
        let h = parse(s).unwrap().unwrap();
        assert_eq!(h.method, Method::Get);
        assert_eq!(&s[h.target.clone()], "/empty.gif?x=1");
        assert_eq!(&s[h.line.clone()], "GET /empty.gif?x=1 HTTP/1.1");
        assert_eq!(h.head_len, s.len() - 4);
        assert_eq!(&s[h.host.clone().unwrap()], "Example.com");
        assert_eq!(h.body, BodyKind::None);
        assert!(h.keep_alive);
        assert_eq!(h.headers.len(), 2);
    }

    #[test]
    fn partial_and_bare_lf() {
        assert!(parse("GET / HTTP/1.1\r\nHost: a\r\n").unwrap().is_none());
        let h = parse("GET / HTTP/1.0\n\n").unwrap().unwrap();
        assert_eq!(h.version, Version::Http10);
        assert!(!h.keep_alive);
        let h = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert!(h.keep_alive);
        let h = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn simple_request_split_at_its_crlf() {
        assert!(parse("GET /x\r").unwrap().is_none());
        assert_eq!(parse("GET /x\r\n").unwrap().unwrap().version, Version::Http09);
        // A later minor version is HTTP/1.1 (RFC 9112 section 2.3), as nginx takes it.
        let h = parse("GET /x HTTP/1.2\r\nHost: a\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.version, Version::Http11);
        assert!(h.keep_alive);
        assert_eq!(h.target, 4..6);
        assert_eq!(parse("GET /x HTTP/1.2\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(parse("GET /x HTTP/2.2\r\nHost: a\r\n\r\n").unwrap_err().status(), 505);
        assert!(parse("GET /x\rY").is_err());
        assert!(parse("GET x\r").is_err());
    }

    #[test]
    fn bodies() {
        let h = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Length(5));
        let h = parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Chunked);
        let h =
            parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").unwrap().unwrap();
        assert!(h.expect_continue);
    }

    #[test]
    fn smuggling_shapes_are_refused() {
        let bad = |s: &str| parse(s).unwrap_err().status();
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), 400);
        assert_eq!(bad("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"), 400);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1e3\r\n\r\n"), 400);
        assert_eq!(bad("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), 400);
        assert_eq!(bad("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"), 400);
        assert_eq!(bad("GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n"), 400);
        assert_eq!(bad("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
        assert_eq!(bad("GET / HTTP/1.1\r\n\r\n"), 400);
    }

    /// Found by tests/smuggling against nginx 1.22.1.
    #[test]
    fn framing_headers_read_as_nginx_does() {
        let bad = |s: &str| parse(s).unwrap_err();
        // Only spaces around a framing value are optional whitespace.
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\t5\r\n\r\n").status(), 400);
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\t\r\n\r\n").status(), 400);
        assert_eq!(
            bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked\r\n\r\n"),
            HeadError::NotImplemented("\tchunked".into())
        );
        assert_eq!(bad("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n").status(), 501);
        let h = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:   5  \r\n\r\n").unwrap().unwrap();
        assert_eq!(h.body, BodyKind::Length(5));
        // An unknown coding is 501 even beside a Content-Length.
        assert_eq!(
            bad("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: identity\r\n\r\n").status(),
            501
        );
        // A method nginx refuses is refused before its line ends.
        assert_eq!(bad("hello"), HeadError::BadLine("client sent invalid method"));
        assert_eq!(bad("\r\nget"), HeadError::BadLine("client sent invalid method"));
        assert!(parse("GE").unwrap().is_none());
    }

    #[test]
    fn versions() {
        assert_eq!(parse("GET / HTTP/2.0\r\n\r\n").unwrap_err(), HeadError::Version);
        // The HTTP/2 preface where HTTP/1 is read: 400, as nginx 1.25+.
        assert_eq!(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap_err().status(), 400);
        assert_eq!(parse("GET / HTTP/3.0\r\n\r\n").unwrap_err(), HeadError::Version);
        assert_eq!(parse("GET / FOO/1.1\r\n\r\n").unwrap_err().status(), 400);
    }

    /// Each observed from nginx 1.22.1.
    #[test]
    fn versions_as_nginx_reads_them() {
        for v in ["GET / HTTP/2", "GET / HTTP/2x\r\n\r\n", "GET / HTTP/2.00\r\n\r\n", "GET / HTTP/12.0\r\n\r\n"] {
            assert_eq!(parse(v).unwrap_err(), HeadError::Version, "{v:?}");
        }
        for v in ["GET / HTTP/0.9\r\n\r\n", "GET / HTTP// HTTP/2.1\r\n\r\n", "GET / HTTP/1.1 HTTP/2.0\r\n\r\n"] {
            assert_eq!(parse(v).unwrap_err().status(), 400, "{v:?}");
        }
    }

    #[test]
    fn limits() {
        let small = Limits::sized(64, 256);
        let long_uri = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(100));
        assert_eq!(parse_head(long_uri.as_bytes(), small).unwrap_err(), HeadError::UriTooLong);
        let long_hdr = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Long: {}\r\n\r\n", "b".repeat(100));
        assert_eq!(parse_head(long_hdr.as_bytes(), small).unwrap_err().status(), 494);
        assert_eq!(overflow(b"GET /aaaaaaaa", small), HeadError::UriTooLong);
        assert_eq!(overflow(b"GET / HTTP/1.1\r\nX: aaaa", small), HeadError::HeaderTooLarge("X: aaaa".into()));
    }

    #[test]
    fn header_line_count_limit() {
        let head = |n: usize, line: &str| format!("GET / HTTP/1.1\r\nHost: a\r\n{}\r\n", line.repeat(n));
        assert!(parse(&head(999, "X:1\r\n")).unwrap().is_some());
        assert_eq!(parse(&head(1000, "X:1\r\n")).unwrap_err(), HeadError::Bad("client sent too many header lines"));
        assert!(parse(&head(1500, "X_u:1\r\n")).unwrap().is_some());
    }

    #[test]
    fn many_headers_fall_back_to_heap() {
        let mut s = String::from("GET / HTTP/1.1\r\nHost: a\r\n");
        for i in 0..200 {
            s.push_str(&format!("X-{i}: v\r\n"));
        }
        s.push_str("\r\n");
        assert_eq!(parse(&s).unwrap().unwrap().headers.len(), 201);
    }

    /// Mutated and random heads never panic, and whatever parses has
    /// offsets inside the buffer (a cheap stand-in for a fuzzer run).
    #[test]
    fn random_and_mutated_input_is_handled() {
        let seeds: [&[u8]; 3] = [
            b"GET /a?b=c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"GET /x\r\n",
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let lim = Limits::sized(64, 256);
        for i in 0..20_000 {
            let mut buf = seeds[i % seeds.len()].to_vec();
            for _ in 0..(next() % 6) {
                let pos = (next() as usize) % (buf.len() + 1);
                match next() % 3 {
                    0 if pos < buf.len() => buf[pos] = next() as u8,
                    1 => buf.insert(pos, next() as u8),
                    _ if pos < buf.len() => {
                        buf.remove(pos);
                    }
                    _ => {}
                }
            }
            if i % 7 == 0 {
                buf = (0..(next() % 300)).map(|_| next() as u8).collect();
            }
            if let Ok(Some(h)) = parse_head(&buf, lim) {
                assert!(h.head_len <= buf.len());
                assert!(h.target.end <= h.head_len && h.line.end <= h.head_len);
                for hd in &h.headers {
                    assert!(hd.name.end <= h.head_len && hd.value.end <= h.head_len);
                }
            }
            let _ = overflow(&buf, lim);
        }
    }
}
