//! The origin's response head: read with the same smuggling checks as a
//! client's request (conflicting framing, bad lengths), turned into what the
//! client gets (hop-by-hop and `proxy_hide_header` fields dropped) and how
//! the body that follows is framed.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use super::head_scan::{self, Field};
use super::wire::{has_options, listed_in_connection};
use crate::config::proxy::ProxyConf;
use crate::connection::h1::chunked::Decoder;
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
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(Cow<'static, str>, FieldValue)>,
    pub content_type: Option<String>,
    pub framing: Framing,
    /// The connection may be reused after the body.
    pub keep_alive: bool,
    pub head_len: usize,
    /// `X-Accel-Buffering: yes|no`: the origin overrides `proxy_buffering`
    /// for this response, as nginx lets it.
    pub accel_buffering: Option<bool>,
}

#[derive(Debug)]
pub enum HeadError {
    /// nginx: "upstream sent invalid header" and similar, a 502.
    Invalid(&'static str),
    Incomplete,
}

/// What a response header is to the proxy, from its lowercase name.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    ContentLength,
    TransferEncoding,
    Connection,
    AccelBuffering,
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
            Kind::ContentLength | Kind::TransferEncoding | Kind::Connection | Kind::AccelBuffering | Kind::NotReturned
        )
    }
}

fn classify(lower: &[u8]) -> Kind {
    match lower {
        b"content-length" => Kind::ContentLength,
        b"transfer-encoding" => Kind::TransferEncoding,
        b"connection" => Kind::Connection,
        b"x-accel-buffering" => Kind::AccelBuffering,
        b"content-type" => Kind::ContentType,
        b"keep-alive"
        | b"te"
        | b"trailer"
        | b"upgrade"
        | b"proxy-connection"
        | b"date"
        | b"server"
        | b"x-pad"
        | b"x-accel-expires"
        | b"x-accel-redirect"
        | b"x-accel-limit-rate"
        | b"x-accel-charset" => Kind::NotReturned,
        b"last-modified" => Kind::Common("Last-Modified"),
        b"etag" => Kind::Common("ETag"),
        b"accept-ranges" => Kind::Common("Accept-Ranges"),
        b"cache-control" => Kind::Common("Cache-Control"),
        b"expires" => Kind::Common("Expires"),
        b"vary" => Kind::Common("Vary"),
        b"set-cookie" => Kind::Common("Set-Cookie"),
        b"location" => Kind::Common("Location"),
        b"content-encoding" => Kind::Common("Content-Encoding"),
        b"content-language" => Kind::Common("Content-Language"),
        b"content-disposition" => Kind::Common("Content-Disposition"),
        b"content-range" => Kind::Common("Content-Range"),
        b"age" => Kind::Common("Age"),
        b"pragma" => Kind::Common("Pragma"),
        b"link" => Kind::Common("Link"),
        b"access-control-allow-origin" => Kind::Common("Access-Control-Allow-Origin"),
        b"x-content-type-options" => Kind::Common("X-Content-Type-Options"),
        b"x-frame-options" => Kind::Common("X-Frame-Options"),
        b"strict-transport-security" => Kind::Common("Strict-Transport-Security"),
        _ => Kind::Other,
    }
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
pub fn parse_response(buf: &[u8], head_request: bool, conf: &ProxyConf) -> Result<Option<ResponseHead>, HeadError> {
    let mut fields = [Field::EMPTY; FAST_FIELDS];
    let mut lower = [0u8; 512];
    if let Some(h) = head_scan::scan(buf, &mut fields, &mut lower) {
        let line = StatusLine { http11: h.http11, status: h.status, head_len: h.len };
        return interpret(line, &fields[..h.fields], &lower, head_request, conf).map(Some);
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
    let lower: Vec<u8> = fields.iter().flat_map(|f| f.name.iter().map(u8::to_ascii_lowercase)).collect();
    let line = StatusLine { http11: r.version == Some(1), status: r.code.unwrap_or(0), head_len };
    interpret(line, &fields, &lower, head_request, conf).map(Some)
}

struct StatusLine {
    http11: bool,
    status: u16,
    head_len: usize,
}

/// The head's meaning: `lower` holds the fields' lowercase names back to
/// back. httparse (default config: no obs-fold, no invalid lines ignored)
/// and the scanner have already refused CR, LF and NUL in a value.
fn interpret(
    line: StatusLine,
    fields: &[Field<'_>],
    lower: &[u8],
    head_request: bool,
    conf: &ProxyConf,
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
    let mut at = 0;
    for f in fields {
        let name = &lower[at..at + f.name.len()];
        at += f.name.len();
        let v = f.value;
        let kind = classify(name);
        match kind {
            Kind::ContentLength => {
                let n =
                    content_length(v).ok_or(HeadError::Invalid("upstream sent invalid \"Content-Length\" header"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(HeadError::Invalid("upstream sent duplicate header line: \"Content-Length\""));
                }
                length = Some(n);
            }
            Kind::TransferEncoding => {
                if !v.eq_ignore_ascii_case(b"chunked") {
                    return Err(HeadError::Invalid("upstream sent unknown \"Transfer-Encoding\""));
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
            Kind::ContentType => {
                content_type = Some(match std::str::from_utf8(v) {
                    Ok(s) => s.to_owned(),
                    Err(_) => String::from_utf8_lossy(v).into_owned(),
                });
                continue;
            }
            Kind::NotReturned | Kind::Common(_) | Kind::Other => {}
        }
        let listed = |list: &[String]| list.iter().any(|n| n.as_bytes() == name);
        let switching = status == 101 && name == b"upgrade";
        let hidden = kind.not_returned() && !listed(&conf.pass_headers) && !switching || listed(&conf.hide_headers);
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(buf: &[u8]) -> Result<Option<ResponseHead>, HeadError> {
        parse_response(buf, false, &ProxyConf::default())
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
