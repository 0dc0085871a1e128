//! A request in `http` types (HTTP/3's, from the `h3` crate) turned into
//! the same `Head` the HTTP/1 codec produces: its fields are written into
//! one buffer in HTTP/1 form, so every handler, variable and log format
//! works on it exactly as on h1 at the cost of one small copy. (HTTP/2
//! requests are decoded into that form directly: `own/headers`.)

use crate::http::connection::h1::codec::Limits;
use crate::http::request::{BodyKind, Head, HeaderIdx, Method, Version};

/// RFC 9113 8.2.2 connection-specific fields a request must not carry;
/// the h2 crate already refuses them, this is the response-side list.
pub const HOP_BY_HOP: &[&str] = &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// Fields whose values `http::HeaderValue` refuses but HTTP/2 allows
/// (RFC 9113 8.2.1 forbids only NUL, CR and LF, and nginx takes the
/// rest): values with other control characters. They ride beside the
/// `HeaderMap`, on a request (to its HTTP/1-form head) or a response (to
/// its HEADERS block), so that such a value reaches `$http_NAME` and an
/// `add_header` echoing it goes out, as with nginx.
#[derive(Clone, Debug, Default)]
pub struct RawFields(pub Vec<(http::HeaderName, Vec<u8>)>);

/// Whether nginx takes `v` as an HTTP/2 field value: no NUL, CR or LF.
pub fn value_allowed(v: &[u8]) -> bool {
    // One comparison for nearly every byte (all above CR).
    v.iter().all(|&b| b > b'\r' || !matches!(b, 0 | b'\r' | b'\n'))
}

/// Appends `name: value\r\n` to a request's HTTP/1-form buffer and the
/// field's ranges to its index; the value's range.
pub fn push_field(
    buf: &mut Vec<u8>,
    headers: &mut Vec<HeaderIdx>,
    name: &[u8],
    value: &[u8],
) -> std::ops::Range<usize> {
    let n0 = buf.len();
    buf.extend_from_slice(name);
    let n = n0..buf.len();
    buf.extend_from_slice(b": ");
    let v0 = buf.len();
    buf.extend_from_slice(value);
    let v = v0..buf.len();
    buf.extend_from_slice(b"\r\n");
    headers.push(HeaderIdx { name: n, value: v.clone() });
    v
}

/// More header fields than this get a 400 (a cheap bound against header
/// floods that stay within the byte limit).
pub const MAX_HEADERS: usize = 100;

pub enum Bad {
    TooManyHeaders,
    InvalidPath,
}

/// Builds the buffer and the head of a request of HTTP/2 or HTTP/3
/// (`version`), which carry their requests in the same pseudo-header
/// form; `has_body` is whether DATA frames follow. With `websocket` (an
/// extended CONNECT, RFC 8441) the head also gets the `Upgrade: websocket`
/// and `Connection: upgrade` fields its HTTP/1.1 equivalent carries, so
/// `$http_upgrade` and `$http_connection` read as they would there; its
/// DATA frames are the tunnel, not a body. Header names `limits` drops
/// (`ignore_invalid_headers`) are left out, as in HTTP/1.
pub fn synthesize_version<B>(
    req: &http::Request<B>,
    has_body: bool,
    websocket: bool,
    limits: &Limits,
    version: Version,
) -> Result<(Vec<u8>, Head), Bad> {
    // `max_headers` counts the regular fields (pseudo-headers are not
    // header lines), as nginx does for HTTP/2 and HTTP/3.
    if req.headers().len() > MAX_HEADERS.min(limits.max_lines) {
        return Err(Bad::TooManyHeaders);
    }
    let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let method = req.method().as_str();
    if !(target.starts_with('/') || (target == "*" && req.method() == http::Method::OPTIONS)) {
        return Err(Bad::InvalidPath);
    }
    let mut buf = Vec::with_capacity(64 + target.len() + req.headers().len() * 32);
    buf.extend_from_slice(method.as_bytes());
    let method_r = 0..buf.len();
    buf.push(b' ');
    let t0 = buf.len();
    buf.extend_from_slice(target.as_bytes());
    let target_r = t0..buf.len();
    buf.push(b' ');
    buf.extend_from_slice(version.as_str().as_bytes());
    let line = 0..buf.len();
    buf.extend_from_slice(b"\r\n");

    let mut headers = Vec::with_capacity(req.headers().len() + 1);
    let mut host = None;
    // :authority stands for Host (RFC 9113 8.3.1); a Host field, if sent
    // as well, comes after it and the first one wins for routing.
    if let Some(a) = req.uri().authority() {
        host = Some(push_field(&mut buf, &mut headers, b"host", a.as_str().as_bytes()));
    }
    let mut cookies: Vec<&[u8]> = Vec::new();
    let mut length = None;
    for (name, value) in req.headers() {
        let n = name.as_str();
        if limits.drops(n.as_bytes()) {
            continue;
        }
        if n == "cookie" {
            // h2 may split Cookie into several fields; nginx joins them.
            cookies.push(value.as_bytes());
            continue;
        }
        if n == "content-length" {
            length = std::str::from_utf8(value.as_bytes()).ok().and_then(|v| v.trim().parse::<u64>().ok());
        }
        let r = push_field(&mut buf, &mut headers, n.as_bytes(), value.as_bytes());
        if n == "host" && host.is_none() {
            host = Some(r);
        }
    }
    for (name, value) in req.extensions().get::<RawFields>().map(|r| &r.0[..]).unwrap_or_default() {
        if !limits.drops(name.as_str().as_bytes()) {
            push_field(&mut buf, &mut headers, name.as_str().as_bytes(), value);
        }
    }
    if !cookies.is_empty() {
        let joined = cookies.join(&b"; "[..]);
        push_field(&mut buf, &mut headers, b"cookie", &joined);
    }
    if websocket {
        push_field(&mut buf, &mut headers, b"upgrade", b"websocket");
        push_field(&mut buf, &mut headers, b"connection", b"upgrade");
    }
    buf.extend_from_slice(b"\r\n");
    let body = match (length, has_body) {
        (Some(n), _) => BodyKind::Length(n),
        (None, true) => BodyKind::Chunked,
        (None, false) => BodyKind::None,
    };
    let head = Head {
        method: Method::from_bytes(method.as_bytes()),
        method_r,
        target: target_r,
        version,
        line,
        head_len: buf.len(),
        headers,
        host,
        body,
        keep_alive: true,
        expect_continue: false,
    };
    Ok((buf, head))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthesize<B>(req: &http::Request<B>, has_body: bool) -> Result<(Vec<u8>, Head), Bad> {
        synthesize_as(req, has_body, false, &Limits::sized(usize::MAX, usize::MAX))
    }

    fn synthesize_as<B>(
        req: &http::Request<B>,
        has_body: bool,
        websocket: bool,
        limits: &Limits,
    ) -> Result<(Vec<u8>, Head), Bad> {
        synthesize_version(req, has_body, websocket, limits, Version::Http2)
    }

    #[test]
    fn request_in_h1_form() {
        let req = http::Request::builder()
            .method("GET")
            .uri("https://example.com/a/b?x=1")
            .header("user-agent", "t")
            .header("cookie", "a=1")
            .header("cookie", "b=2")
            .body(())
            .unwrap();
        let (buf, head) = synthesize(&req, false).ok().unwrap();
        assert_eq!(&buf[head.line.clone()], b"GET /a/b?x=1 HTTP/2.0");
        assert_eq!(&buf[head.target.clone()], b"/a/b?x=1");
        assert_eq!(&buf[head.host.clone().unwrap()], b"example.com");
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.contains("\r\ncookie: a=1; b=2\r\n"), "{}", text);
        assert_eq!(head.body, BodyKind::None);
        assert_eq!(head.head_len, buf.len());
    }

    #[test]
    fn values_with_nul_cr_or_lf_are_refused_wherever_they_are() {
        let mut v = b"gzip, deflate, br; q=0.9 \x01\x7f\xff".to_vec();
        assert!(value_allowed(&v) && value_allowed(b""));
        for bad in [0u8, b'\r', b'\n'] {
            for at in 0..v.len() {
                let keep = v[at];
                v[at] = bad;
                assert!(!value_allowed(&v), "{bad} at {at}");
                assert!(value_allowed(&v[..at]), "{bad} after {at}");
                v[at] = keep;
            }
        }
    }

    #[test]
    fn bad_requests() {
        let mut b = http::Request::builder().uri("https://h/");
        for i in 0..=MAX_HEADERS {
            b = b.header(format!("x-{}", i), "v");
        }
        assert!(matches!(synthesize(&b.body(()).unwrap(), false), Err(Bad::TooManyHeaders)));
        let star = http::Request::builder().method("GET").uri("*").body(()).unwrap();
        assert!(matches!(synthesize(&star, false), Err(Bad::InvalidPath)));
    }

    #[test]
    fn extended_connect_reads_as_an_upgrade() {
        let req = http::Request::builder()
            .method("CONNECT")
            .uri("https://example.com/chat?room=1")
            .header("sec-websocket-version", "13")
            .body(())
            .unwrap();
        let (buf, head) = synthesize_as(&req, false, true, &Limits::sized(64, 64)).ok().unwrap();
        assert_eq!(&buf[head.line.clone()], b"CONNECT /chat?room=1 HTTP/2.0");
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(text.contains("\r\nupgrade: websocket\r\nconnection: upgrade\r\n"), "{}", text);
        assert_eq!(head.body, BodyKind::None);
    }
}
