//! HTTP/2 timeouts that act on one stream or on the connection, with a raw
//! client (tests/common/h2raw.rs) over cleartext prior knowledge:
//!
//! - `client_body_timeout`: a request body that stops arriving midway
//!   ends that stream (nginx: 408 in the access log, "client timed out"
//!   at `info`, RST_STREAM) for every handler that reads a body: proxy,
//!   FastCGI, and one that discards it (`return`);
//! - `send_timeout`: a stream whose window the client never reopens is
//!   reset, and a client that stops reading the socket altogether loses
//!   the connection.
//!
//! In each case the other streams of the same connection, opened before,
//! during and after the stall, are answered in full.
//!
//! `SLUICE_TEST_NGINX=1` runs the same checks against nginx.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::h2raw::{self as h2, Event};
use common::origin::{Origin, sub};
use common::*;

const SMALL: &str = "small over h2\n";
const BIG_LEN: usize = 1 << 20;
/// Both timeouts in the config below.
const TIMEOUT: Duration = Duration::from_secs(2);

fn start(origin: &Origin) -> TestServer {
    // The FastCGI port is free and never listened on: it is not reached
    // unless the body arrived whole.
    let http = sub(
        "access_log logs/access.log;\n\
         server {\n\
             listen 127.0.0.1:{port} http2;\n\
             root html;\n\
             client_body_timeout 2s;\n\
             send_timeout 2s;\n\
             keepalive_timeout 60s;\n\
             location / { }\n\
             location /proxy/ { proxy_pass http://127.0.0.1:%O%; }\n\
             location /fcgi/ { fastcgi_pass 127.0.0.1:%F%; }\n\
             location /ret/ { return 200 \"returned\\n\"; }\n\
         }",
        &[("%O%", origin.port), ("%F%", free_port())],
    );
    builder().http(&http).file("html/small.txt", SMALL).file("html/big.bin", pseudo_random(BIG_LEN, 0xb16)).start()
}

/// How a stream ended, as the client saw it.
#[derive(Debug, PartialEq)]
enum End {
    Status(u16),
    Reset(String),
}

/// Reads until stream `id` is answered (its HEADERS) or reset, or
/// `deadline`; frames of other streams are kept in `c.other`. Counts the
/// stream's DATA bytes, returning no window for them.
fn wait_end(c: &mut h2::Conn, id: u32, deadline: Instant) -> (Option<End>, usize) {
    let mut data = 0;
    let mut seen = std::mem::take(&mut c.other).into_iter();
    loop {
        let f = match seen.next() {
            Some(f) => f,
            None => match c.read_event(deadline) {
                Event::Frame(f) => f,
                _ => return (None, data),
            },
        };
        let end = |c: &mut h2::Conn, seen: std::vec::IntoIter<h2::Frame>, e: End| {
            c.other.extend(seen);
            (Some(e), data)
        };
        match f.kind {
            h2::SETTINGS if f.flags & h2::ACK == 0 => c.send(h2::settings_ack_frame()),
            h2::PING if f.flags & h2::ACK == 0 => c.send(h2::frame(h2::PING, h2::ACK, 0, &f.payload)),
            h2::DATA if f.stream == id => data += f.payload.len(),
            h2::RST_STREAM if f.stream == id => {
                return end(c, seen, End::Reset(h2::error_name(f.error_code().unwrap_or(u32::MAX))));
            }
            h2::HEADERS if f.stream == id => {
                let fields = c.decoder.decode(f.block_fragment()).unwrap_or_default();
                let status = fields.iter().find(|(n, _)| n == ":status").and_then(|(_, v)| v.parse().ok());
                return end(c, seen, End::Status(status.unwrap_or(0)));
            }
            h2::HEADERS => {
                let _ = c.decoder.decode(f.block_fragment());
            }
            _ => {}
        }
    }
}

/// A GET for the small file on a new stream of `c`: 200 and its bytes.
fn assert_small(c: &mut h2::Conn, what: &str) {
    let r = c.try_request(&h2::get_block("/small.txt"), None).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!((r.status, r.body.as_slice(), r.reset), (200, SMALL.as_bytes(), None), "{what}");
}

/// Starts a POST of 100 bytes to `path` on stream 1 that sends 10 and
/// stalls, serves small GETs on the same connection meanwhile, and checks
/// that the stalled stream ends once `client_body_timeout` passed: reset,
/// or answered 408, with "client timed out" in the error log and a 408
/// in the access log; the connection goes on serving.
fn stalled_body(path: &str) {
    let origin = Origin::ok("proxied\n");
    let s = start(&origin);
    let mut c = h2::Conn::open(s.port);
    let block = h2::request_block("POST", path, "localhost", &[("content-length", "100")]);
    let t0 = Instant::now();
    c.send(h2::headers_frame(1, &block, false, true));
    c.send(h2::data_frame(1, &[b'x'; 10], false));
    c.next_stream = 3;
    assert_small(&mut c, "a GET beside the stalled body, at once");
    std::thread::sleep(Duration::from_millis(800));
    assert_small(&mut c, "a GET beside the stalled body, 0.8 s in");
    let (end, _) = wait_end(&mut c, 1, t0 + Duration::from_secs(10));
    let took = t0.elapsed();
    eprintln!("{path}: stalled body ended by {end:?} after {took:?}");
    match &end {
        Some(End::Reset(_)) | Some(End::Status(408)) => {}
        other => panic!("{path}: the stalled body's stream ended by {other:?} after {took:?}, not a reset or 408"),
    }
    assert!(took >= TIMEOUT - Duration::from_millis(100), "{path}: ended before client_body_timeout: {took:?}");
    assert!(took < TIMEOUT * 3, "{path}: ended {took:?} after a client_body_timeout of {TIMEOUT:?}");
    assert_small(&mut c, "a GET on the same connection after the timeout");
    let log = s.wait_error_log("client timed out");
    assert!(log.contains("client timed out (110: Connection timed out)"), "{path}: error log:\n{log}");
    let line = format!("\"POST {path} HTTP/2.0\" 408 ");
    let access = wait_contains(&s.path("logs/access.log"), &line, LOG_WAIT);
    assert!(access.contains(&line), "{path}: no 408 line in the access log:\n{access}");
    assert_eq!(origin.count(), 0, "{path}: the origin got a request for a body that never arrived");
}

#[test]
fn stalled_body_proxy() {
    stalled_body("/proxy/upload");
}

#[test]
fn stalled_body_fastcgi() {
    stalled_body("/fcgi/upload.php");
}

/// A handler that does not read the body (`return`). nginx answers such a
/// request at once, whatever the body does (HTTP/2 discards by ignoring
/// the stream's DATA), so the answer is there before any timeout.
#[test]
fn stalled_body_discarded() {
    let origin = Origin::ok("unused\n");
    let s = start(&origin);
    let mut c = h2::Conn::open(s.port);
    let block = h2::request_block("POST", "/ret/x", "localhost", &[("content-length", "100")]);
    let t0 = Instant::now();
    c.send(h2::headers_frame(1, &block, false, true));
    c.send(h2::data_frame(1, &[b'x'; 10], false));
    c.next_stream = 3;
    let (end, _) = wait_end(&mut c, 1, t0 + Duration::from_secs(10));
    let took = t0.elapsed();
    eprintln!("discard: stalled body answered by {end:?} after {took:?}");
    assert_eq!(end, Some(End::Status(200)), "the discarding handler's answer");
    assert!(took < TIMEOUT, "the answer waited for the body: {took:?}");
    assert_small(&mut c, "a GET after the answer");
    // The rest of the body arriving late does no harm.
    c.send(h2::data_frame(1, &[b'x'; 90], true));
    std::thread::sleep(TIMEOUT + Duration::from_millis(500));
    assert_small(&mut c, "a GET after client_body_timeout");
    let access = wait_contains(&s.path("logs/access.log"), "\"POST /ret/x HTTP/2.0\" 200 ", LOG_WAIT);
    assert!(access.contains("\"POST /ret/x HTTP/2.0\" 200 "), "access log:\n{access}");
}

/// A download whose stream window the client never reopens (the
/// connection's is wide open): after the first 65,535 bytes nothing more
/// can go, and `send_timeout` resets the stream with "client timed out" in
/// the error log and the request in the access log, while small GETs on
/// the same connection are answered before, during and after.
#[test]
fn stuck_window_send_timeout() {
    let origin = Origin::ok("unused\n");
    let s = start(&origin);
    let mut c = h2::Conn::open(s.port);
    let t0 = Instant::now();
    c.send(h2::headers_frame(1, &h2::get_block("/big.bin"), true, true));
    c.next_stream = 3;
    assert_small(&mut c, "a GET beside the stuck download, at once");
    std::thread::sleep(Duration::from_millis(800));
    assert_small(&mut c, "a GET beside the stuck download, 0.8 s in");
    let (end, _) = wait_end(&mut c, 1, t0 + Duration::from_secs(5));
    assert_eq!(end, Some(End::Status(200)), "the download's head");
    let (end, data) = wait_end(&mut c, 1, t0 + Duration::from_secs(10));
    let took = t0.elapsed();
    eprintln!("stuck window: download ended by {end:?} after {took:?}, {data} bytes");
    assert!(matches!(end, Some(End::Reset(_))), "the stuck download was not reset: {end:?} after {took:?}");
    assert!(took >= TIMEOUT - Duration::from_millis(100), "reset before send_timeout: {took:?}");
    assert!(took < TIMEOUT * 3, "reset {took:?} after a send_timeout of {TIMEOUT:?}");
    assert!(data <= 65535, "{data} bytes sent beyond the stream's 65,535-byte window");
    assert_small(&mut c, "a GET on the same connection after the reset");
    let log = s.wait_error_log("client timed out");
    assert!(log.contains("client timed out (110: Connection timed out)"), "error log:\n{log}");
    let access = wait_contains(&s.path("logs/access.log"), "\"GET /big.bin HTTP/2.0\"", LOG_WAIT);
    assert!(access.contains("\"GET /big.bin HTTP/2.0\" 200 "), "access log:\n{access}");
}

/// A client that stops reading the socket with 8 MiB of downloads under
/// way (their windows open): the server's writes block, and after
/// `send_timeout` without progress it closes the connection, as nginx
/// does, instead of holding it until `keepalive_timeout` (60 s here).
#[test]
fn unread_socket_send_timeout() {
    let origin = Origin::ok("unused\n");
    let s = start(&origin);
    let mut c = h2::Conn::handshake(s.port, &[(h2::SETTINGS_INITIAL_WINDOW_SIZE, 16 << 20)]);
    let mut out = Vec::new();
    for i in 0..8 {
        out.extend(h2::headers_frame(1 + 2 * i, &h2::get_block("/big.bin"), true, true));
    }
    c.send(&out);
    let t0 = Instant::now();
    std::thread::sleep(TIMEOUT + Duration::from_secs(2));
    // Now read: what the kernel holds, then the close.
    c.stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let end = loop {
        if t0.elapsed() > Duration::from_secs(15) {
            break "still open after 15 s".to_string();
        }
        match c.stream.read(&mut buf) {
            Ok(0) => break format!("EOF after {:?}", t0.elapsed()),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => break format!("{e} after {:?}", t0.elapsed()),
        }
    };
    eprintln!("unread socket: {end}; {got} bytes were readable");
    assert!(!end.starts_with("still open"), "the connection was {end} (send_timeout 2s)");
    assert!(got < 8 * BIG_LEN, "all {got} bytes arrived: the stall never happened");
    // Every download has its access-log line.
    let lines = s.wait_access_lines(8);
    assert_eq!(lines.iter().filter(|l| l.contains("\"GET /big.bin HTTP/2.0\" 200 ")).count(), 8, "{lines:#?}");
    // nginx 1.22.1 says why only at debug level; sluice at info.
    if prog() == "sluice" {
        let log = s.wait_error_log("while sending to client");
        assert!(log.contains("client timed out (110: Connection timed out) while sending to client"), "{log}");
    }
    // The server goes on: a fresh connection is served.
    let mut c2 = h2::Conn::open(s.port);
    assert_small(&mut c2, "a fresh connection after the cut");
}
