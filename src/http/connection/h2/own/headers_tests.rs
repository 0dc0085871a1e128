use super::*;
use crate::http::connection::h2::hpack::{Encoder, Indexing};

/// `fields` as a header block, then decoded as a request.
fn decode_with(fields: &[(&str, &str)], has_body: bool, limits: &Limits) -> Result<Incoming, Refuse> {
    let mut enc = Encoder::default();
    let mut block = Vec::new();
    for (n, v) in fields {
        enc.field(n.as_bytes(), v.as_bytes(), Indexing::Yes, &mut block);
    }
    let mut dec = Decoder::new(4096);
    let mut scratch = Vec::new();
    match request(&mut dec, &block, &mut scratch, 32 * 1024, limits, has_body) {
        Ok(r) => r,
        Err(e) => panic!("the block does not decode: {e:?}"),
    }
}

fn decode(fields: &[(&str, &str)]) -> Result<Incoming, Refuse> {
    decode_with(fields, false, &Limits::sized(8192, 32 * 1024))
}

const GET: [(&str, &str); 4] =
    [(":method", "GET"), (":scheme", "https"), (":authority", "example.com"), (":path", "/a/b?x=1")];

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    GET.iter().copied().chain(extra.iter().copied()).collect()
}

fn text(i: &Incoming) -> String {
    String::from_utf8_lossy(&i.buf).into_owned()
}

fn malformed(r: Result<Incoming, Refuse>) -> bool {
    matches!(r, Err(Refuse::Malformed))
}

#[test]
fn a_request_in_http1_form() {
    let Ok(i) = decode(&with(&[("user-agent", "t"), ("cookie", "a=1"), ("accept", "*/*"), ("cookie", "b=2")])) else {
        panic!("refused")
    };
    assert_eq!(&i.buf[i.head.line.clone()], b"GET /a/b?x=1 HTTP/2.0");
    assert_eq!(i.target(), b"/a/b?x=1");
    assert_eq!(i.host(), b"example.com");
    assert_eq!(i.head.method, Method::Get);
    // Fields in the order sent, after the Host :authority stands for; the
    // cookies joined into one, last, as nginx does.
    assert_eq!(
        text(&i),
        "GET /a/b?x=1 HTTP/2.0\r\nhost: example.com\r\nuser-agent: t\r\naccept: */*\r\ncookie: a=1; b=2\r\n\r\n"
    );
    assert_eq!(i.head.headers.len(), 4);
    assert_eq!(i.head.body, BodyKind::None);
    assert_eq!(i.head.head_len, i.buf.len());
    assert!(i.refused.is_none() && !i.malformed && i.protocol.is_none());
}

#[test]
fn a_body_is_framed_by_its_length_or_as_chunks() {
    let limits = Limits::sized(8192, 32 * 1024);
    let post = [(":method", "POST"), (":scheme", "http"), (":path", "/up"), ("host", "h"), ("content-length", "12")];
    let Ok(i) = decode_with(&post, true, &limits) else { panic!("refused") };
    assert_eq!(i.head.body, BodyKind::Length(12));
    assert_eq!(i.content_length, Some(12));
    assert_eq!(i.host(), b"h");
    let Ok(i) = decode_with(&post[..4], true, &limits) else { panic!("refused") };
    assert_eq!(i.head.body, BodyKind::Chunked);
    // The same length twice is one length; two lengths are malformed.
    assert!(decode(&with(&[("content-length", "0"), ("content-length", "0")])).is_ok());
    assert!(malformed(decode(&with(&[("content-length", "1"), ("content-length", "2")]))));
    assert!(malformed(decode(&with(&[("content-length", "x")]))));
}

#[test]
fn rfc_9113_rules_make_a_block_malformed() {
    // Capitals, connection-specific fields, `te` other than trailers.
    assert!(malformed(decode(&with(&[("User-Agent", "t")]))));
    assert!(malformed(decode(&with(&[("connection", "close")]))));
    assert!(malformed(decode(&with(&[("te", "gzip")]))));
    assert!(decode(&with(&[("te", "trailers")])).is_ok());
    // A pseudo-header after a regular field, twice, unknown, or missing.
    let mut late = GET[..3].to_vec();
    late.extend([("accept", "*/*"), (":path", "/")]);
    assert!(malformed(decode(&late)));
    assert!(malformed(decode(&with(&[(":path", "/again")]))));
    assert!(malformed(decode(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":status", "200")])));
    assert!(malformed(decode(&GET[..3])));
    assert!(malformed(decode(&[(":method", "GET"), (":scheme", "http"), (":path", "/")])), "no host at all");
    // nginx's method and scheme checks; a path with a space.
    assert!(malformed(decode(&[(":method", "get"), (":scheme", "http"), (":authority", "h"), (":path", "/")])));
    assert!(malformed(decode(&[(":method", "GET"), (":scheme", "1x"), (":authority", "h"), (":path", "/")])));
    assert!(malformed(decode(&[(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "/a b")])));
    // Host beside :authority must agree (case aside), and come once.
    assert!(decode(&with(&[("host", "EXAMPLE.com")])).is_ok());
    assert!(malformed(decode(&with(&[("host", "other")]))));
    let two = [(":method", "GET"), (":scheme", "http"), (":path", "/"), ("host", "h"), ("host", "h")];
    assert!(malformed(decode(&two)));
    // NUL, CR and LF are never in a value; other control bytes are, as
    // nginx takes them (but not in Host).
    assert!(malformed(decode(&with(&[("x-a", "a\0b")]))));
    let Ok(i) = decode(&with(&[("x-a", "a\u{1}b")])) else { panic!("refused") };
    assert!(text(&i).contains("\r\nx-a: a\u{1}b\r\n"));
    assert!(malformed(decode(&with(&[("host", "example.com\u{1}")]))));
}

#[test]
fn nginx_header_rules_apply_as_over_http1() {
    // ignore_invalid_headers (on by default) drops a name with `_`.
    let Ok(i) = decode(&with(&[("x_y", "1"), ("x-z", "2")])) else { panic!("refused") };
    assert!(!text(&i).contains("x_y"));
    assert!(text(&i).contains("\r\nx-z: 2\r\n"));
    let mut limits = Limits::sized(8192, 32 * 1024);
    limits.underscores = true;
    let Ok(i) = decode_with(&with(&[("x_y", "1")]), false, &limits) else { panic!("refused") };
    assert!(text(&i).contains("\r\nx_y: 1\r\n"));
    // More regular fields than max_headers: answered 400 before routing.
    let many: Vec<(String, String)> = (0..=MAX_HEADERS).map(|k| (format!("x-{k}"), "v".to_string())).collect();
    let mut fields: Vec<(&str, &str)> = GET.to_vec();
    fields.extend(many.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    let Ok(i) = decode(&fields) else { panic!("refused") };
    assert!(matches!(i.refused, Some(Bad::TooManyHeaders)));
    // A path that is not origin-form, and `*` for OPTIONS.
    let Ok(i) = decode(&[(":method", "GET"), (":scheme", "http"), (":authority", "h"), (":path", "x")]) else {
        panic!("refused")
    };
    assert!(matches!(i.refused, Some(Bad::InvalidPath)));
    let Ok(i) = decode(&[(":method", "OPTIONS"), (":scheme", "http"), (":authority", "h"), (":path", "*")]) else {
        panic!("refused")
    };
    assert!(i.refused.is_none());
}

#[test]
fn too_large_a_block_is_the_connections_error() {
    let mut enc = Encoder::default();
    let mut block = Vec::new();
    let big = "v".repeat(200);
    let mut fields: Vec<(&str, &str)> = GET.to_vec();
    fields.push(("x-big", &big));
    for (n, v) in fields {
        enc.field(n.as_bytes(), v.as_bytes(), Indexing::No, &mut block);
    }
    let mut scratch = Vec::new();
    let r = request(&mut Decoder::new(4096), &block, &mut scratch, 100, &Limits::sized(8192, 8192), false);
    assert!(matches!(r, Ok(Err(Refuse::TooLarge))));
}

#[test]
fn connect_plain_and_extended() {
    let Ok(i) = decode(&[(":method", "CONNECT"), (":authority", "example.com:443")]) else { panic!("refused") };
    assert_eq!(i.method(), b"CONNECT");
    assert_eq!(i.host(), b"example.com:443");
    assert!(i.protocol.is_none());
    assert!(malformed(decode(&[(":method", "CONNECT"), (":path", "/")])));
    let ws = [
        (":method", "CONNECT"),
        (":protocol", "websocket"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/chat?room=1"),
        ("sec-websocket-version", "13"),
    ];
    let Ok(i) = decode_with(&ws, true, &Limits::sized(64, 64)) else { panic!("refused") };
    assert_eq!(&i.buf[i.head.line.clone()], b"CONNECT /chat?room=1 HTTP/2.0");
    assert_eq!(i.protocol.as_deref(), Some(&b"websocket"[..]));
    assert!(text(&i).contains("\r\nupgrade: websocket\r\nconnection: upgrade\r\n"), "{}", text(&i));
    assert_eq!(i.head.body, BodyKind::None);
    // :protocol belongs to CONNECT only.
    let mut get = GET.to_vec();
    get.push((":protocol", "websocket"));
    assert!(malformed(decode(&get)));
}

#[test]
fn the_placeholder_of_a_malformed_block_reads_as_get_slash() {
    let i = Incoming::malformed();
    assert!(i.malformed);
    assert_eq!(&i.buf[i.head.line.clone()], b"GET / HTTP/2.0");
    assert_eq!(i.target(), b"/");
    assert_eq!(i.method(), b"GET");
}
