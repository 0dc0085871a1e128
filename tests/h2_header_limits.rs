//! HTTP/2 request headers as nginx bounds and reads them, seen by a raw
//! frame client (tests/common/h2raw.rs) on cleartext prior knowledge:
//!
//! * `large_client_header_buffers N SIZE`: a name or value longer than
//!   SIZE, or names and values adding up to more than N * SIZE (indexed
//!   fields included), is a connection error ENHANCE_YOUR_CALM, as nginx
//!   1.19.7+ answers ("client sent too large header field" / "header");
//!   exactly the limit is served.
//! * HPACK integers: one the header block ends in is FRAME_SIZE_ERROR,
//!   one longer than four bytes COMPRESSION_ERROR, the latter at once even
//!   while the rest of its frame has not come (nginx decodes as bytes
//!   arrive; its h2_headers.t waits for that GOAWAY).
//! * `underscores_in_headers on`: a header `x_foo` is `$http_x_foo`.
//! * A value with control characters (not NUL, CR or LF) is taken and
//!   can be echoed back by `add_header`.
//! * A buffered request body (proxied with `proxy_request_buffering on`):
//!   the stream's window is opened all the way at once, as nginx does,
//!   rather than in steps as it is read.

mod common;

use std::time::{Duration, Instant};

use common::h2raw::{self as h2, Event};
use common::*;

const ENHANCE_YOUR_CALM: u32 = 0xb;
const COMPRESSION_ERROR: u32 = 0x9;

fn start() -> TestServer {
    builder()
        .ports(2)
        .http(
            "access_log logs/access.log;\n\
             server {\n\
                 listen 127.0.0.1:{port0} http2;\n\
                 large_client_header_buffers 2 512;\n\
                 root html;\n\
                 location / { }\n\
                 location /proxy/ {\n\
                     proxy_pass http://127.0.0.1:1/;\n\
                 }\n\
             }\n\
             server {\n\
                 listen 127.0.0.1:{port1} http2;\n\
                 underscores_in_headers on;\n\
                 location / { add_header X-Sent-Foo $http_x_foo always; return 204; }\n\
             }",
        )
        .file("html/t.html", "SEE-THIS")
        .start()
}

/// Frames until the connection ends or 5 s pass.
fn until_closed(c: &mut h2::Conn) -> Vec<h2::Frame> {
    let (frames, end) = c.drain(Duration::from_secs(5));
    assert!(!matches!(end, Event::Timeout), "connection still open: {frames:?}");
    frames
}

fn goaway_code(frames: &[h2::Frame]) -> Option<u32> {
    frames.iter().find(|f| f.kind == h2::GOAWAY).and_then(|f| f.error_code())
}

/// A GET for /t.html with one more field (literal, new name).
fn block_with(name: &str, value: &str) -> Vec<u8> {
    h2::request_block("GET", "/t.html", "localhost", &[(name, value)])
}

#[test]
fn field_longer_than_a_buffer_is_enhance_your_calm() {
    let mut s = start();
    let mut c = h2::Conn::open(s.port);
    let r = c.try_request(&block_with(&"x".repeat(512), "v"), None).unwrap();
    assert_eq!((r.status, r.body.as_slice()), (200, &b"SEE-THIS"[..]), "a 512-byte name fits");
    let r = c.try_request(&block_with("name", &"x".repeat(512)), None).unwrap();
    assert_eq!(r.status, 200, "a 512-byte value fits");

    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &block_with(&"x".repeat(513), "v"), true, true));
    let frames = until_closed(&mut c);
    assert_eq!(goaway_code(&frames), Some(ENHANCE_YOUR_CALM), "513-byte name: {frames:?}");
    assert!(!frames.iter().any(|f| f.kind == h2::DATA), "no answer: {frames:?}");

    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &block_with("name", &"x".repeat(513)), true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(ENHANCE_YOUR_CALM), "513-byte value");
    assert!(s.is_running());
}

#[test]
fn header_list_past_number_times_size_is_enhance_your_calm() {
    let s = start();
    // Pseudo-headers: 7+3 + 7+4 + 5+7 + 10+9 = 52 bytes; 1024 in all fit.
    let fill = 1024 - 52 - "a".len() - "b".len();
    let mut c = h2::Conn::open(s.port);
    let r = c
        .try_request(
            &h2::request_block(
                "GET",
                "/t.html",
                "localhost",
                &[("a", &"x".repeat(fill / 2)), ("b", &"y".repeat(fill - fill / 2))],
            ),
            None,
        )
        .unwrap();
    assert_eq!(r.status, 200, "exactly 2 * 512 bytes of names and values");

    let mut c = h2::Conn::open(s.port);
    let block = h2::request_block(
        "GET",
        "/t.html",
        "localhost",
        &[("a", &"x".repeat(fill / 2)), ("b", &"y".repeat(fill - fill / 2 + 1))],
    );
    c.send(h2::headers_frame(1, &block, true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(ENHANCE_YOUR_CALM), "one byte more");

    // Indexed fields count as decoded: a second copy of an indexed 500-byte
    // field passes the limit though it takes one byte on the wire.
    let mut c = h2::Conn::open(s.port);
    let mut block = h2::request_block("GET", "/t.html", "localhost", &[]);
    h2::hpack_literal_indexed(&mut block, "longname", "x".repeat(500).as_bytes());
    let r = c.try_request(&block, None).unwrap();
    assert_eq!(r.status, 200);
    let mut block = h2::request_block("GET", "/t.html", "localhost", &[]);
    h2::hpack_indexed(&mut block, 62);
    h2::hpack_indexed(&mut block, 62);
    c.send(h2::headers_frame(3, &block, true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(ENHANCE_YOUR_CALM), "indexed fields counted");
}

#[test]
fn hpack_integer_errors_are_nginx_codes() {
    let mut s = start();
    // An indexed field whose index the block ends in.
    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &[0xff], true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(h2::FRAME_SIZE_ERROR), "truncated index");
    // A literal whose value length the block ends in.
    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &[0x42, 0xff], true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(h2::FRAME_SIZE_ERROR), "truncated length");
    // A literal with no length at all stays COMPRESSION_ERROR (h2spec 4.3).
    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &[0x40], true, true));
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(COMPRESSION_ERROR), "no length");

    // Over-long integers, in a HEADERS frame announcing one byte more than
    // is sent: the GOAWAY comes without the rest.
    for (what, payload) in [("index", &[0xff, 0xff, 0xff, 0xff][..]), ("literal", &[0x42, 0xff, 0xff, 0xff, 0xff][..])]
    {
        let mut c = h2::Conn::open(s.port);
        let mut f = h2::headers_frame(1, payload, true, true);
        f[2] += 1;
        c.send(&f);
        let started = Instant::now();
        let frames = until_closed(&mut c);
        assert_eq!(goaway_code(&frames), Some(COMPRESSION_ERROR), "too long {what}: {frames:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "too long {what}: GOAWAY late");
    }

    // The same behind a pad length and priority fields (padding unsent).
    let mut c = h2::Conn::open(s.port);
    let payload = [&[2u8][..], &[0, 0, 0, 0, 15], &[0xff, 0xff, 0xff, 0xff]].concat();
    let mut f = h2::frame(h2::HEADERS, h2::END_HEADERS | h2::PADDED | h2::PRIORITY_FLAG, 1, &payload);
    f[2] += 3;
    c.send(&f);
    assert_eq!(goaway_code(&until_closed(&mut c)), Some(COMPRESSION_ERROR), "padded, with priority");
    assert!(s.is_running());
}

#[test]
fn underscore_header_is_its_variable() {
    let s = start();
    let mut c = h2::Conn::open(s.ports[1]);
    let block = h2::request_block("GET", "/", "localhost", &[("x_foo", "x-bar")]);
    let r = c.try_request(&block, None).unwrap();
    let sent = r.headers.iter().find(|(n, _)| n == "x-sent-foo").map(|(_, v)| v.as_str());
    assert_eq!((r.status, sent), (204, Some("x-bar")), "{r:?}");
}

/// Control characters other than NUL, CR and LF are allowed in HTTP/2
/// field values (RFC 9113 8.2.1): nginx takes them and echoes them.
#[test]
fn control_characters_in_a_value_go_through() {
    let s = start();
    let mut c = h2::Conn::open(s.ports[1]);
    let value = "a\u{1}b\u{7f}c\u{1f}d";
    let block = h2::request_block("GET", "/", "localhost", &[("x-foo", value)]);
    let r = c.try_request(&block, None).unwrap();
    let sent = r.headers.iter().find(|(n, _)| n == "x-sent-foo").map(|(_, v)| v.as_str());
    assert_eq!((r.status, sent), (204, Some(value)), "{r:?}");
    // A value with CR in it is still a bad request.
    let block = h2::request_block("GET", "/", "localhost", &[("x-foo", "a\rb")]);
    let r = c.try_request(&block, None).unwrap();
    assert_eq!(r.status, 400, "{r:?}");
}

#[test]
fn buffered_body_opens_the_stream_window() {
    let s = start();
    let mut c = h2::Conn::open(s.port);
    let block = h2::request_block("POST", "/proxy/t.html", "localhost", &[]);
    c.send(h2::headers_frame(1, &block, false, true));
    let chunk = vec![b'x'; 16384];
    for _ in 0..4 {
        c.send(h2::data_frame(1, &chunk, false));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let update = loop {
        match c.read_event(deadline) {
            Event::Frame(f) if f.kind == h2::WINDOW_UPDATE && f.stream == 1 => {
                break u32::from_be_bytes(f.payload[..4].try_into().unwrap()) & 0x7fff_ffff;
            }
            Event::Frame(_) => {}
            e => panic!("no WINDOW_UPDATE for the stream: {e:?}"),
        }
    };
    assert!(update >= 65536, "stream WINDOW_UPDATE of {update}");
}
