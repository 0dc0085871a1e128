//! The origin's response head: read with the same smuggling checks as a
//! client's request (conflicting framing, bad lengths), turned into what the
//! client gets (hop-by-hop and `proxy_hide_header` fields dropped) and how
//! the body that follows is framed.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use super::head_scan::{self, Field};
use super::wire::{has_options, listed_in_connection};
use crate::config::proxy::UpstreamConf;
use crate::http::connection::h1::chunked::Decoder;
use crate::http::field_value::FieldValue;

/// How the origin's response body ends.
#[derive(Debug)]
pub enum Framing {
    /// No body follows; for HEAD, the length the origin declared.
    None(Option<u64>),
    Length(u64),
    Chunked(Decoder),
    /// Until the origin closes (HTTP/1.0 style).
    Close,
    /// Until the origin's HTTP/2 stream ends (gRPC): the connection stays
    /// usable, and the stream's trailers follow the body.
    Stream,
    /// FastCGI STDOUT records, until END_REQUEST.
    FastCgi(Box<crate::http::fastcgi::response::Body>),
    /// A memcached value, then its `\r\nEND\r\n` trailer.
    Memcached(crate::http::memcached::response::Value),
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(Cow<'static, str>, FieldValue)>,
    pub content_type: Option<Cow<'static, str>>,
    pub framing: Framing,
    /// The connection may be reused after the body.
    pub keep_alive: bool,
    pub head_len: usize,
    /// `X-Accel-Buffering: yes|no`: the origin overrides `proxy_buffering`
    /// for this response, as nginx lets it.
    pub accel_buffering: Option<bool>,
    /// `X-Accel-Expires`, for the cache (never passed to the client).
    pub accel_expires: Option<Vec<u8>>,
    /// `X-Accel-Limit-Rate`: bytes per second for the rest of the response.
    pub accel_limit_rate: Option<u64>,
    /// `X-Accel-Redirect`: the URI (or `@name`) to redirect to internally
    /// instead of sending this response (never passed to the client).
    pub accel_redirect: Option<Vec<u8>>,
    /// `X-Accel-Charset`: the charset to recode the body to (never
    /// passed to the client).
    pub accel_charset: Option<Vec<u8>>,
}

#[derive(Debug)]
pub enum HeadError {
    /// nginx: "upstream sent invalid header" and similar, a 502.
    Invalid(&'static str),
    /// The same, with a message made for the response (FastCGI records).
    Protocol(String),
    Incomplete,
}

/// An `X-Accel-Limit-Rate` value: nginx's `ngx_atoi`, digits only, else
/// the header is ignored.
pub fn limit_rate(v: &[u8]) -> Option<u64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// What a response header is to the proxy, from its lowercase name.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    ContentLength,
    TransferEncoding,
    Connection,
    AccelBuffering,
    AccelExpires,
    AccelRedirect,
    AccelCharset,
    AccelLimitRate,
    /// Carried separately, never as a header.
    ContentType,
    /// Hop-by-hop, replaced by sluice's own, or on nginx's default
    /// `proxy_hide_header` list.
    NotReturned,
    /// Passed on; the spelling origins usually use, so that a name sent
    /// that way needs no allocation.
    Common(&'static str),
    Other,
}

impl Kind {
    fn not_returned(self) -> bool {
        matches!(
            self,
            Kind::ContentLength
                | Kind::TransferEncoding
                | Kind::Connection
                | Kind::AccelBuffering
                | Kind::AccelExpires
                | Kind::AccelRedirect
                | Kind::AccelCharset
                | Kind::AccelLimitRate
                | Kind::NotReturned
        )
    }
}

/// The names the proxy knows, lowercase, and what each is. `Upgrade` is
/// not among them: as nginx, it goes on to an HTTP/1.1 client in any
/// response (RFC 9110 7.8: a 426 must carry it, others may advertise),
/// and the HTTP/2 and HTTP/3 writers drop it as connection-specific.
const KNOWN: [(&[u8], Kind); 35] = [
    (b"content-length", Kind::ContentLength),
    (b"transfer-encoding", Kind::TransferEncoding),
    (b"connection", Kind::Connection),
    (b"x-accel-buffering", Kind::AccelBuffering),
    (b"content-type", Kind::ContentType),
    (b"keep-alive", Kind::NotReturned),
    (b"te", Kind::NotReturned),
    (b"trailer", Kind::NotReturned),
    (b"proxy-connection", Kind::NotReturned),
    (b"date", Kind::NotReturned),
    (b"server", Kind::NotReturned),
    (b"x-pad", Kind::NotReturned),
    (b"x-accel-expires", Kind::AccelExpires),
    (b"x-accel-redirect", Kind::AccelRedirect),
    (b"x-accel-limit-rate", Kind::AccelLimitRate),
    (b"x-accel-charset", Kind::AccelCharset),
    (b"last-modified", Kind::Common("Last-Modified")),
    (b"etag", Kind::Common("ETag")),
    (b"accept-ranges", Kind::Common("Accept-Ranges")),
    (b"cache-control", Kind::Common("Cache-Control")),
    (b"expires", Kind::Common("Expires")),
    (b"vary", Kind::Common("Vary")),
    (b"set-cookie", Kind::Common("Set-Cookie")),
    (b"location", Kind::Common("Location")),
    (b"content-encoding", Kind::Common("Content-Encoding")),
    (b"content-language", Kind::Common("Content-Language")),
    (b"content-disposition", Kind::Common("Content-Disposition")),
    (b"content-range", Kind::Common("Content-Range")),
    (b"age", Kind::Common("Age")),
    (b"pragma", Kind::Common("Pragma")),
    (b"link", Kind::Common("Link")),
    (b"access-control-allow-origin", Kind::Common("Access-Control-Allow-Origin")),
    (b"x-content-type-options", Kind::Common("X-Content-Type-Options")),
    (b"x-frame-options", Kind::Common("X-Frame-Options")),
    (b"strict-transport-security", Kind::Common("Strict-Transport-Security")),
];

/// Folding to lowercase by setting 0x20 in every byte: exact for the
/// bytes of a (validated) token against a known name, which is made of
/// lowercase letters and `-` only (`-` is 0x2d; the byte that folds to it,
/// CR, is never in a token).
const FOLD: u64 = 0x2020_2020_2020_2020;

/// A name's bytes as four words that, with its length, identify it: for 8
/// bytes or more, the words at 0, 8 and 16 (those within the name) and the
/// last 8 bytes (overlapping); for 4 to 7, the first and last 4 bytes; below
/// that, the bytes. Built the same way at compile time for the known names
/// and at run time (with 8-byte loads) for a field's name.
const fn keys(s: &[u8]) -> [u64; 4] {
    const fn load(s: &[u8], at: usize, len: usize) -> u64 {
        let mut w = 0u64;
        let mut i = 0;
        while i < len {
            w |= (s[at + i] as u64) << (8 * i);
            i += 1;
        }
        w
    }
    let n = s.len();
    if n >= 8 {
        let mid8 = if n >= 16 { load(s, 8, 8) } else { 0 };
        let mid16 = if n >= 24 { load(s, 16, 8) } else { 0 };
        [load(s, 0, 8), mid8, mid16, load(s, n - 8, 8)]
    } else if n >= 4 {
        [load(s, 0, 4) | load(s, n - 4, 4) << 32, 0, 0, 0]
    } else {
        [load(s, 0, n), 0, 0, 0]
    }
}

/// `keys` of a field's name, folded to lowercase.
fn folded_keys(s: &[u8]) -> [u64; 4] {
    let n = s.len();
    let word =
        |at: usize| s.get(at..at.checked_add(8)?).and_then(|w| <[u8; 8]>::try_from(w).ok()).map(u64::from_le_bytes);
    match (word(0), word(n.wrapping_sub(8))) {
        (Some(first), Some(last)) => {
            let mid = |at: usize| word(at).map_or(0, |w| w | FOLD);
            [first | FOLD, mid(8), mid(16), last | FOLD]
        }
        _ => {
            let k = keys(s);
            let mask = if n >= 4 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
            [(k[0] | FOLD) & mask, 0, 0, 0]
        }
    }
}

/// Known names by length, with their keys: at most five share a length,
/// so a name is classified by a few word compares.
const BY_LEN_SLOTS: usize = 5;
type Slot = Option<([u64; 4], Kind)>;
static BY_LEN: [[Slot; BY_LEN_SLOTS]; 28] = by_len();

const fn by_len() -> [[Slot; BY_LEN_SLOTS]; 28] {
    let mut t = [[None; BY_LEN_SLOTS]; 28];
    let mut i = 0;
    while i < KNOWN.len() {
        let (name, kind) = KNOWN[i];
        let mut j = 0;
        while t[name.len()][j].is_some() {
            j += 1;
        }
        t[name.len()][j] = Some((keys(name), kind));
        i += 1;
    }
    t
}

/// What a field is, from its name in any case.
fn classify(name: &[u8]) -> Kind {
    let Some(slots) = BY_LEN.get(name.len()) else { return Kind::Other };
    let k = folded_keys(name);
    for (known, kind) in slots.iter().map_while(Option::as_ref) {
        if known[0] == k[0] && known[1..] == k[1..] {
            return *kind;
        }
    }
    Kind::Other
}

/// The origin's Content-Type when it is one of the usual ones, borrowed:
/// no allocation (and no UTF-8 check) for most responses.
fn common_type(v: &[u8]) -> Option<&'static str> {
    Some(match v {
        b"text/html" => "text/html",
        b"text/html; charset=utf-8" => "text/html; charset=utf-8",
        b"text/html; charset=UTF-8" => "text/html; charset=UTF-8",
        b"text/plain" => "text/plain",
        b"text/plain; charset=utf-8" => "text/plain; charset=utf-8",
        b"text/css" => "text/css",
        b"text/xml" => "text/xml",
        b"application/javascript" => "application/javascript",
        b"application/json" => "application/json",
        b"application/json; charset=utf-8" => "application/json; charset=utf-8",
        b"application/octet-stream" => "application/octet-stream",
        b"application/xml" => "application/xml",
        b"image/gif" => "image/gif",
        b"image/jpeg" => "image/jpeg",
        b"image/png" => "image/png",
        b"image/svg+xml" => "image/svg+xml",
        b"image/webp" => "image/webp",
        _ => return None,
    })
}

/// Content-Length as nginx reads it: digits only, no sign, no overflow.
fn content_length(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    v.iter().try_fold(0u64, |n, &b| {
        let d = b.wrapping_sub(b'0');
        if d > 9 { None } else { n.checked_mul(10)?.checked_add(d as u64) }
    })
}

/// Fields the fast scanner reads in place; a head with more goes to
/// httparse.
const FAST_FIELDS: usize = 32;

/// Parses a response head from `buf`; Ok(None) when more bytes are needed.
pub fn parse_response(buf: &[u8], head_request: bool, conf: &UpstreamConf) -> Result<Option<ResponseHead>, HeadError> {
    let mut fields = [Field::EMPTY; FAST_FIELDS];
    if let Some(h) = head_scan::scan(buf, &mut fields) {
        let line = StatusLine { http11: h.http11, status: h.status, head_len: h.len };
        return interpret(line, &fields[..h.fields], head_request, conf).map(Some);
    }
    // nginx bounds the head by size (proxy_buffer_size), not by count.
    // Uninitialized slots: no 4 KB of empty headers written per parse.
    let mut hdrs = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; 128];
    let mut many;
    let mut r = httparse::Response::new(&mut []);
    let mut parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut r, buf, &mut hdrs);
    if matches!(parsed, Err(httparse::Error::TooManyHeaders)) {
        many = vec![httparse::EMPTY_HEADER; buf.len() / 4 + 1];
        r = httparse::Response::new(&mut many);
        parsed = r.parse(buf);
    }
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HeadError::Invalid("upstream sent invalid header")),
    };
    let fields: Vec<Field<'_>> = r.headers.iter().map(|h| Field { name: h.name.as_bytes(), value: h.value }).collect();
    let line = StatusLine { http11: r.version == Some(1), status: r.code.unwrap_or(0), head_len };
    interpret(line, &fields, head_request, conf).map(Some)
}

/// Fields that nginx (1.23 and later) takes once: a repeat is dropped
/// ("upstream sent duplicate header line ..., ignoring"), so that what
/// the client and the cache see is unambiguous. Content-Type and the
/// X-Accel fields are kept once by their own arms; Date and Server are
/// replaced anyway.
const FIRST_ONLY: [&str; 4] = ["Last-Modified", "ETag", "Expires", "Location"];
/// `first_seen`'s bit for Refresh (not a `Kind::Common` name).
const REFRESH_SEEN: u8 = 1 << FIRST_ONLY.len();

struct StatusLine {
    http11: bool,
    status: u16,
    head_len: usize,
}

/// The head's meaning. httparse (default config: no obs-fold, no invalid lines ignored)
/// and the scanner have already refused CR, LF and NUL in a value.
fn interpret(
    line: StatusLine,
    fields: &[Field<'_>],
    head_request: bool,
    conf: &UpstreamConf,
) -> Result<ResponseHead, HeadError> {
    let status = line.status;
    if !(100..=999).contains(&status) {
        return Err(HeadError::Invalid("upstream sent invalid status"));
    }
    let http11 = line.http11;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut close = !http11;
    let mut headers = Vec::with_capacity(fields.len());
    let mut content_type = None;
    let mut options: Vec<&[u8]> = Vec::new();
    let mut accel_buffering = None;
    let mut accel_expires = None;
    let mut accel_limit_rate = None;
    let mut accel_redirect = None;
    let mut accel_charset = None;
    let mut first_seen = 0u8;
    for f in fields {
        let v = f.value;
        let kind = classify(f.name);
        match kind {
            Kind::ContentLength => {
                let n =
                    content_length(v).ok_or(HeadError::Invalid("upstream sent invalid \"Content-Length\" header"))?;
                // nginx refuses a repeated Content-Length even with the same
                // value (a framing ambiguity a smuggling attempt relies on).
                if length.is_some() {
                    return Err(HeadError::Invalid("upstream sent duplicate header line: \"Content-Length\""));
                }
                length = Some(n);
            }
            Kind::TransferEncoding => {
                if !v.eq_ignore_ascii_case(b"chunked") {
                    return Err(HeadError::Invalid("upstream sent unknown \"Transfer-Encoding\""));
                }
                if chunked {
                    return Err(HeadError::Invalid("upstream sent duplicate header line: \"Transfer-Encoding\""));
                }
                chunked = true;
            }
            Kind::Connection if v.eq_ignore_ascii_case(b"keep-alive") => close &= http11,
            Kind::Connection if v.eq_ignore_ascii_case(b"close") => close = true,
            Kind::Connection => {
                if has_options(v) {
                    options.push(v);
                }
                let token = |t: &[u8]| v.split(|&b| b == b',').any(|x| x.trim_ascii().eq_ignore_ascii_case(t));
                if token(b"close") {
                    close = true;
                } else if token(b"keep-alive") && !http11 {
                    close = false;
                }
            }
            Kind::AccelBuffering => {
                if v.eq_ignore_ascii_case(b"yes") {
                    accel_buffering = Some(true);
                } else if v.eq_ignore_ascii_case(b"no") {
                    accel_buffering = Some(false);
                }
            }
            // nginx acts on the first X-Accel-Expires; a duplicate is ignored.
            Kind::AccelExpires if accel_expires.is_none() => accel_expires = Some(v.to_vec()),
            Kind::AccelExpires => {}
            Kind::AccelRedirect if accel_redirect.is_none() => accel_redirect = Some(v.to_vec()),
            Kind::AccelRedirect => {}
            Kind::AccelCharset => accel_charset = Some(v.to_vec()),
            Kind::AccelLimitRate => accel_limit_rate = limit_rate(v).or(accel_limit_rate),
            // The first Content-Type counts, as in nginx.
            Kind::ContentType if content_type.is_some() => continue,
            Kind::ContentType => {
                content_type = Some(match common_type(v) {
                    Some(t) => Cow::Borrowed(t),
                    None => Cow::Owned(String::from_utf8_lossy(v).into_owned()),
                });
                continue;
            }
            Kind::Common(c) => {
                if let Some(i) = FIRST_ONLY.iter().position(|&u| u == c) {
                    if first_seen & (1 << i) != 0 {
                        continue;
                    }
                    first_seen |= 1 << i;
                }
            }
            Kind::Other if f.name.eq_ignore_ascii_case(b"refresh") => {
                if first_seen & REFRESH_SEEN != 0 {
                    continue;
                }
                first_seen |= REFRESH_SEEN;
            }
            Kind::NotReturned | Kind::Other => {}
        }
        let listed = |list: &[String]| list.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(f.name));
        let hidden = kind.not_returned() && !listed(&conf.pass_headers) || listed(&conf.hide_headers);
        if !hidden {
            let n = match kind {
                Kind::Common(c) if c.as_bytes() == f.name => Cow::Borrowed(c),
                _ => Cow::Owned(String::from_utf8_lossy(f.name).into_owned()),
            };
            headers.push((n, FieldValue::copy_from(v)));
        }
    }
    // RFC 9110 7.6.1: what the origin's Connection header names is
    // hop-by-hop and stays here.
    if !options.is_empty() {
        headers.retain(|(n, _)| !options.iter().any(|c| listed_in_connection(c, n.as_bytes())));
    }
    if chunked && length.is_some() {
        return Err(HeadError::Invalid(
            "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
        ));
    }
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        Framing::None(if head_request { length } else { None })
    } else if chunked {
        Framing::Chunked(Decoder::default())
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::Close
    };
    Ok(ResponseHead {
        status,
        headers,
        content_type,
        framing,
        keep_alive: !close,
        head_len: line.head_len,
        accel_buffering,
        accel_expires,
        accel_limit_rate,
        accel_redirect,
        accel_charset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Option<ResponseHead>, HeadError> {
        parse_response(buf, false, &UpstreamConf::default())
    }

    fn names(h: &ResponseHead) -> Vec<String> {
        h.headers.iter().map(|(n, v)| format!("{}: {}", n, String::from_utf8_lossy(v))).collect()
    }

    #[test]
    fn passes_end_to_end_fields_and_keeps_framing() {
        // The same head through the fast path and (with a tab, which the
        // scanner leaves to httparse) the slow one.
        for sep in [&b" "[..], b"\t"] {
            let buf = [
                &b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: text/html\r\nContent-Length: 5\r\nETag:"[..],
                sep,
                b"\"x\"\r\nX-Custom: a\r\nConnection: keep-alive, X-Custom\r\nlast-modified: d\r\n\r\nhello",
            ]
            .concat();
            let h = parse(&buf).expect("valid").expect("complete");
            assert_eq!(names(&h), ["ETag: \"x\"", "last-modified: d"]);
            assert_eq!(h.content_type.as_deref(), Some("text/html"));
            assert!(matches!(h.framing, Framing::Length(5)));
            assert!(h.keep_alive);
            assert_eq!(h.head_len, buf.len() - 5);
        }
    }

    #[test]
    fn classifies_names_in_any_case_and_nothing_else() {
        let flip = |n: &[u8], every: usize| -> Vec<u8> {
            n.iter().enumerate().map(|(i, b)| if i % every == 0 { b.to_ascii_uppercase() } else { *b }).collect()
        };
        for (name, kind) in KNOWN {
            for every in [1, 2, 3, usize::MAX] {
                assert_eq!(classify(&flip(name, every)), kind, "{}", String::from_utf8_lossy(name));
            }
            // Any one byte changed (to another token character: names
            // reach here validated), or one more or fewer, is another name.
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            for at in 0..name.len() {
                for b in (0..=255u8).filter(|&b| token(b)) {
                    let mut odd = name.to_vec();
                    odd[at] = b;
                    let same = KNOWN.iter().any(|(k, _)| k.eq_ignore_ascii_case(&odd));
                    assert_eq!(classify(&odd) != Kind::Other, same, "{:?}", odd.escape_ascii().to_string());
                }
            }
            assert_eq!(classify(&[name, &b"s"[..]].concat()), Kind::Other);
            assert_eq!(classify(&name[..name.len() - 1]), Kind::Other);
        }
        assert_eq!(classify(b""), Kind::Other);
        assert_eq!(classify(&[b'a'; 100]), Kind::Other);
    }

    #[test]
    fn refuses_smuggling_shapes_and_bad_lengths() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"HTTP/1.1 099 Odd\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
        ] {
            assert!(matches!(parse(bad), Err(HeadError::Invalid(_))), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(matches!(parse(b"HTTP/1.1 200 OK\r\nContent-Len"), Ok(None)));
    }

    #[test]
    fn connection_and_version_decide_reuse() {
        let h = |b: &[u8]| parse(b).expect("valid").expect("complete");
        assert!(!h(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(!h(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(h(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(!h(b"HTTP/1.1 200 OK\r\nConnection: x, close\r\nContent-Length: 0\r\n\r\n").keep_alive);
        assert!(!h(b"HTTP/1.1 200 OK\r\n\r\n").keep_alive, "read until close");
    }
}
