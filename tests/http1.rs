//! HTTP/1.x connection handling as a client sees it: keep-alive, close,
//! HTTP/1.0, HEAD, pipelining, request bodies and their framing, 100-continue,
//! limits, malformed and smuggling-shaped requests, and the logs they leave.
//! Expected answers were checked against nginx 1.22.1.

mod common;

use std::time::Duration;

use common::*;

const HTTP: &str = r#"
    client_max_body_size 100;
    large_client_header_buffers 4 1k;
    server {
        listen 127.0.0.1:{port};
        root html;
        location /r { return 200 "ret\n"; }
    }
"#;

fn server() -> TestServer {
    builder().http(HTTP).file("html/index.html", "hello\n").file("html/a.txt", "AAA").file("html/b.txt", "BBBB").start()
}

const GET_INDEX: &str = "GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n";
const GET_R: &str = "GET /r HTTP/1.1\r\nHost: localhost\r\n\r\n";

fn assert_index(r: &Response) {
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), "hello\n");
    assert_eq!(r.must("Content-Length"), "6");
}

#[test]
fn keep_alive_two_requests_one_connection() {
    let s = server();
    let mut c = s.connect();
    c.send(GET_INDEX);
    let r = c.read_response();
    assert_index(&r);
    assert_eq!(r.version, "HTTP/1.1");
    assert_eq!(r.must("Connection"), "keep-alive");
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "ret\n");
    assert_eq!(r.must("Connection"), "keep-alive");
    assert!(!c.closed_within(Duration::from_millis(300)), "server closed a keep-alive connection");
}

#[test]
fn connection_close_is_honoured() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let r = c.read_response();
    assert_index(&r);
    assert_eq!(r.must("Connection"), "close");
    assert!(c.closed_within(Duration::from_secs(3)), "server kept the connection open");
}

#[test]
fn http10_closes_by_default_and_keeps_alive_on_request() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.0\r\n\r\n");
    let r = c.read_response();
    assert_index(&r);
    assert_eq!(r.version, "HTTP/1.1");
    assert_eq!(r.must("Connection"), "close");
    assert!(c.closed_within(Duration::from_secs(3)));

    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response();
    assert_index(&r);
    assert_eq!(r.must("Connection"), "keep-alive");
    c.send("GET /r HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.text(), "ret\n");
}

#[test]
fn head_has_length_but_no_body() {
    let s = server();
    let mut c = s.connect();
    c.send("HEAD /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response_to("HEAD");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("Content-Length"), "6");
    assert_eq!(r.must("Content-Type"), "text/html");
    // If any body bytes had been sent they would precede the next response.
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!(r.status, 200, "body bytes after HEAD response? {}", r.head);
    assert_eq!(r.text(), "ret\n");
}

#[test]
fn pipelined_requests_answered_in_order() {
    let s = server();
    let mut c = s.connect();
    c.send(
        "GET /a.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
         GET /b.txt HTTP/1.1\r\nHost: localhost\r\n\r\n\
         GET /r HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    );
    let bodies: Vec<String> = (0..3).map(|_| c.read_response().text()).collect();
    assert_eq!(bodies, ["AAA", "BBBB", "ret\n"]);
    assert!(c.closed_within(Duration::from_secs(3)));
}

#[test]
fn keepalive_timeout_zero_closes() {
    let s = builder()
        .http("keepalive_timeout 0;\nserver { listen 127.0.0.1:{port}; location / { return 200 x; } }")
        .start();
    let mut c = s.connect();
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!(r.text(), "x");
    assert_eq!(r.must("Connection"), "close");
    assert!(c.closed_within(Duration::from_secs(3)));
}

#[test]
fn keepalive_requests_limit_closes_nth_response() {
    let s = builder()
        .http("keepalive_requests 3;\nserver { listen 127.0.0.1:{port}; location / { return 200 x; } }")
        .start();
    let mut c = s.connect();
    for i in 1..=3 {
        c.send(GET_R);
        let r = c.read_response();
        assert_eq!(r.text(), "x");
        let want = if i < 3 { "keep-alive" } else { "close" };
        assert_eq!(r.must("Connection"), want, "response {i}");
    }
    assert!(c.closed_within(Duration::from_secs(3)));
}

/// `keepalive_time`: a connection open longer takes no more requests; the
/// response that finds it so says `Connection: close`.
#[test]
fn keepalive_time_closes_a_connection_open_too_long() {
    let s =
        builder().http("keepalive_time 1s;\nserver { listen 127.0.0.1:{port}; location / { return 200 x; } }").start();
    let mut c = s.connect();
    c.send(GET_R);
    assert_eq!(c.read_response().must("Connection"), "keep-alive");
    std::thread::sleep(Duration::from_millis(2100));
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!((r.text().as_str(), r.must("Connection")), ("x", "close"));
    assert!(c.closed_within(Duration::from_secs(3)));
}

#[test]
fn content_length_body_on_static_get_keeps_framing() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nGET /a.txt ");
    assert_index(&c.read_response());
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!(r.text(), "ret\n", "body bytes were parsed as a request");
}

#[test]
fn chunked_body_on_static_get_keeps_framing() {
    let s = server();
    let mut c = s.connect();
    c.send(
        "GET /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
         5\r\nabcde\r\n3;ext=1\r\nfgh\r\n0\r\nTrailer: x\r\n\r\n",
    );
    assert_index(&c.read_response());
    c.send(GET_R);
    assert_eq!(c.read_response().text(), "ret\n");
}

#[test]
fn body_split_across_writes_keeps_framing() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc");
    std::thread::sleep(Duration::from_millis(100));
    c.send("defghij");
    assert_index(&c.read_response());
    c.send(GET_R);
    assert_eq!(c.read_response().text(), "ret\n");
}

#[test]
fn expect_100_continue() {
    let s = server();
    let mut c = s.connect();
    c.send("POST /r HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.head, "HTTP/1.1 100 Continue");
    c.send("abcde");
    let r = c.read_response();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "ret\n");
    c.send(GET_R);
    assert_eq!(c.read_response().text(), "ret\n");
}

#[test]
fn body_over_client_max_body_size_is_413() {
    let s = server();
    for path in ["/index.html", "/r"] {
        let mut c = s.connect();
        c.send(format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 500\r\n\r\n"));
        let r = c.read_response();
        assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 413 Request Entity Too Large", "POST {path}");
        assert!(r.text().contains("<title>413 Request Entity Too Large</title>"));
        assert_eq!(r.must("Connection"), "close");
    }
    let log = s.wait_error_log("client intended to send too large body: 500 bytes");
    assert!(line_with(&log, "too large body").contains("[error]"), "{log}");
    // At the limit is fine.
    let mut c = s.connect();
    c.send(format!("POST /r HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\n\r\n{}", "x".repeat(100)));
    assert_eq!(c.read_response().status, 200);
}

/// One malformed request: expected status line, title, and that the server
/// closes without answering a request pipelined behind it.
fn assert_rejected(s: &TestServer, raw: &[u8], status_line: &str) -> Response {
    let mut c = s.connect();
    let mut data = raw.to_vec();
    data.extend_from_slice(b"GET /r HTTP/1.1\r\nHost: localhost\r\n\r\n");
    c.send(&data);
    let r = c.read_response();
    let shown = String::from_utf8_lossy(&raw[..raw.len().min(120)]).into_owned();
    assert_eq!(r.head.lines().next().unwrap(), status_line, "request {shown:?}");
    assert_eq!(r.must("Connection"), "close", "request {shown:?}");
    let code = &status_line[9..];
    assert!(r.text().contains(&format!("<title>{code}</title>")), "request {shown:?}: {}", r.text());
    let rest = c.read_to_close();
    assert!(
        rest.is_empty(),
        "request {shown:?}: server answered the smuggled request: {:?}",
        String::from_utf8_lossy(&rest)
    );
    r
}

const BAD_REQUEST: &str = "HTTP/1.1 400 Bad Request";

#[test]
fn too_long_request_line_is_414() {
    let s = server();
    let raw = format!("GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(2000));
    assert_rejected(&s, raw.as_bytes(), "HTTP/1.1 414 Request-URI Too Large");
}

#[test]
fn oversized_header_line_is_400_header_too_large() {
    let s = server();
    let raw = format!("GET / HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "a".repeat(2000));
    let mut c = s.connect();
    c.send(raw);
    let r = c.read_response();
    assert_eq!(r.status, 400);
    assert!(r.text().contains("<title>400 Request Header Or Cookie Too Large</title>"), "{}", r.text());
    assert!(r.text().contains("<center>Request Header Or Cookie Too Large</center>"), "{}", r.text());
}

#[test]
fn http2_version_is_505() {
    let s = server();
    assert_rejected(&s, b"GET / HTTP/2.0\r\nHost: localhost\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported");
    // nginx decides on the major version's digits, whatever follows them.
    for raw in [&b"GET / HTTP/2x\r\nHost: localhost\r\n\r\n"[..], b"GET / HTTP/12.0\r\nHost: localhost\r\n\r\n"] {
        assert_rejected(&s, raw, "HTTP/1.1 505 HTTP Version Not Supported");
    }
    for raw in [&b"GET / HTTP/0.9\r\nHost: localhost\r\n\r\n"[..], b"GET / HTTP// HTTP/2.1\r\nHost: localhost\r\n\r\n"]
    {
        assert_rejected(&s, raw, "HTTP/1.1 400 Bad Request");
    }
    // So the answer does not wait for, or depend on, the rest of the line
    // (found by fuzzing: this was a 400 until ".0\r\n" arrived).
    let mut c = s.connect();
    c.send("GET / HTTP/2");
    let r = c.read_response();
    assert_eq!(r.status, 505, "{}", r.head);
}

/// A later HTTP/1 minor version is HTTP/1.1 (RFC 9112 section 2.3), as
/// nginx takes it: answered, kept alive, still needing Host.
#[test]
fn http12_is_served_as_http11() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.2\r\nHost: localhost\r\n\r\n");
    let r = c.read_response();
    assert_index(&r);
    assert_eq!(r.version, "HTTP/1.1");
    c.send(GET_R);
    let r = c.read_response();
    assert_eq!(r.text(), "ret\n");
    assert_rejected(&s, b"GET / HTTP/1.9\r\n\r\n", "HTTP/1.1 400 Bad Request");
}

/// Found by fuzzing: a read that ended between the CR and the LF of an
/// HTTP/0.9 request line got a 400.
#[test]
fn http09_request_split_between_cr_and_lf() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html\r");
    std::thread::sleep(Duration::from_millis(200));
    c.send("\n");
    assert_eq!(String::from_utf8_lossy(&c.read_to_close()), "hello\n");
}

#[test]
fn smuggling_and_malformed_requests_are_400() {
    let s = server();
    let cases: &[&[u8]] = &[
        // CL + TE
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // two differing Content-Length
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nabcdef",
        // two equal Content-Length (nginx: duplicate header line)
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        // negative Content-Length
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n",
        // TE on HTTP/1.0
        b"GET /index.html HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        // invalid chunk sizes
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabcde\r\n0\r\n\r\n",
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nabcde\r\n0\r\n\r\n",
        // whitespace between name and colon
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length : 5\r\n\r\nabcde",
        // NUL in a header value
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-A: b\x00c\r\n\r\n",
        // HTTP/1.1 without Host
        b"GET /index.html HTTP/1.1\r\nUser-Agent: t\r\n\r\n",
        // two Host headers
        b"GET /index.html HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        // invalid Host
        b"GET /index.html HTTP/1.1\r\nHost: a/b\r\n\r\n",
        // obsolete line folding
        b"GET /index.html HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  folded\r\n\r\n",
        // request target without a leading slash
        b"GET index.html HTTP/1.1\r\nHost: a\r\n\r\n",
        // lowercase method (nginx: invalid method)
        b"get /index.html HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    let mut checks = Checks::new();
    for raw in cases {
        let label = format!("{:?}", String::from_utf8_lossy(raw));
        checks.run(&label, || {
            assert_rejected(&s, raw, BAD_REQUEST);
        });
    }
    checks.finish();
}

#[test]
fn unknown_transfer_encoding_is_501() {
    let s = server();
    assert_rejected(
        &s,
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 501 Not Implemented",
    );
    assert_rejected(
        &s,
        b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 501 Not Implemented",
    );
}

/// Each client error leaves an `[info]` error-log line with nginx's wording
/// and an access-log line with the status.
#[test]
fn client_errors_logged_at_info_and_in_access_log() {
    let mut s = server();
    let long_uri = format!("/{}", "u".repeat(2000));
    // (raw request, nginx's error-log message, access-log request line, status)
    let cases: Vec<(String, &str, String, u16)> = vec![
        (
            "GET / HTTP/2.0\r\nHost: localhost\r\n\r\n".into(),
            "client sent invalid version while reading client request line, client: 127.0.0.1, server: , request: \"GET / HTTP/2.0\"",
            "GET / HTTP/2.0".into(),
            505,
        ),
        (
            format!("GET {long_uri} HTTP/1.1\r\nHost: localhost\r\n\r\n"),
            "client sent too long URI while reading client request line, client: 127.0.0.1, server: , request: \"GET /uuu",
            // nginx logs the part of the line that fit in the buffer
            "GET /uuuuuuuuuuuuuuuuuuuu".into(),
            414,
        ),
        (
            format!("GET /big HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n", "b".repeat(2000)),
            "client sent too long header line: \"X-Big: bbbb",
            "GET /big HTTP/1.1".into(),
            400,
        ),
        (
            "GET /nohost HTTP/1.1\r\n\r\n".into(),
            "client sent HTTP/1.1 request without \"Host\" header while reading client request headers, client: 127.0.0.1, server: , request: \"GET /nohost HTTP/1.1\"",
            "GET /nohost HTTP/1.1".into(),
            400,
        ),
        (
            "GET /clte HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .into(),
            "client sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time while reading client request headers, client: 127.0.0.1, server: , request: \"GET /clte HTTP/1.1\"",
            "GET /clte HTTP/1.1".into(),
            400,
        ),
        (
            "GET /te HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n".into(),
            "client sent unknown \"Transfer-Encoding\": \"gzip\" while reading client request headers, client: 127.0.0.1, server: , request: \"GET /te HTTP/1.1\"",
            "GET /te HTTP/1.1".into(),
            501,
        ),
    ];
    for (raw, _, _, status) in &cases {
        let mut c = s.connect();
        c.send(raw);
        assert_eq!(c.read_response().status, *status, "{}", &raw[..raw.len().min(80)]);
    }
    assert!(s.quit().success());
    let err = s.error_log();
    let access = s.access_log();
    let mut checks = Checks::new();
    for (_, msg, reqline, status) in &cases {
        checks.run(&format!("error.log {status}"), || {
            let line = line_with(&err, msg);
            assert!(line.contains(" [info] "), "not at info level: {line}");
        });
        checks.run(&format!("access.log {status}"), || {
            let (req, st) = (format!("\"{reqline}"), format!("\" {status} "));
            assert!(
                access.lines().any(|l| l.contains(&req) && l.contains(&st)),
                "no access-log line with {req:?} and {st:?} in:\n{access}"
            );
        });
    }
    checks.finish();
}

#[test]
fn date_header_is_imf_fixdate_now() {
    let s = server();
    let r = s.get("/index.html");
    let d = r.must("Date");
    let t = parse_http_date(d).unwrap_or_else(|| panic!("Date not in IMF-fixdate form: {d:?}"));
    assert!((t - now_secs()).abs() <= 60, "Date {d} is far from now");
    let lm = r.must("Last-Modified");
    assert!(parse_http_date(lm).is_some(), "Last-Modified not IMF-fixdate: {lm:?}");
    // Header order as nginx: Server, Date first.
    let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).take(2).collect();
    assert_eq!(names, ["Server", "Date"]);
}

#[test]
fn server_header_and_server_tokens_off() {
    let s = server();
    let r = s.get("/index.html");
    assert_eq!(r.must("Server"), "sluice/0.1.0");
    let r = s.get("/missing");
    assert_eq!(r.must("Server"), "sluice/0.1.0");
    assert!(r.text().contains("<hr><center>sluice/0.1.0</center>"), "{}", r.text());

    let s = builder()
        .http("server_tokens off;\nserver { listen 127.0.0.1:{port}; root html; }")
        .file("html/index.html", "x")
        .start();
    let r = s.get("/index.html");
    assert_eq!(r.must("Server"), "sluice");
    let r = s.get("/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.must("Server"), "sluice");
    assert_eq!(
        r.text(),
        "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n\
         <hr><center>sluice</center>\r\n</body>\r\n</html>\r\n"
    );
}

#[test]
fn idle_keepalive_connection_closed_after_timeout() {
    let s = builder()
        .http("keepalive_timeout 1;\nserver { listen 127.0.0.1:{port}; location / { return 200 x; } }")
        .start();
    let mut c = s.connect();
    c.send(GET_R);
    assert_eq!(c.read_response().text(), "x");
    assert!(c.closed_within(Duration::from_secs(4)), "idle connection not closed after keepalive_timeout 1s");
}

#[test]
fn error_responses_keep_the_connection() {
    let s = server();
    let mut c = s.connect();
    // 404, then 405 for a POST with a body to a static file: both keep the
    // connection and the body is not taken for the next request.
    c.send("GET /missing HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 404);
    assert_eq!(r.must("Connection"), "keep-alive");
    c.send("POST /index.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nGET /a.txt ");
    let r = c.read_response();
    assert_eq!(r.head.lines().next().unwrap(), "HTTP/1.1 405 Not Allowed");
    assert_eq!(r.must("Connection"), "keep-alive");
    c.send(GET_R);
    assert_eq!(c.read_response().text(), "ret\n");
}

#[test]
fn bare_lf_line_endings_accepted() {
    let s = server();
    let mut c = s.connect();
    c.send("GET /index.html HTTP/1.1\nHost: localhost\n\nGET /r HTTP/1.1\nHost: localhost\n\n");
    assert_index(&c.read_response());
    assert_eq!(c.read_response().text(), "ret\n");
}

#[test]
fn http09_simple_request_gets_bare_body() {
    let s = server();
    let raw = request_to_close(s.port, b"GET /index.html\r\n");
    assert_eq!(String::from_utf8_lossy(&raw), "hello\n");
}

#[test]
fn client_header_timeout_closes_silently() {
    let mut s = builder()
        .http("client_header_timeout 1s;\nserver { listen 127.0.0.1:{port}; location / { return 200 x; } }")
        .start();
    let mut c = s.connect();
    c.send("GET / HTTP/1.1\r\nHost: localhost\r\n");
    // nginx closes without a response (no 408)
    assert!(c.closed_within(Duration::from_secs(4)), "incomplete request head not timed out");
    assert!(s.quit().success());
    let log = s.error_log();
    let line = line_with(&log, "client timed out (110: Connection timed out) while reading client request headers");
    assert!(line.contains(" [info] "), "{line}");
    assert!(line.contains("client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", host: \"localhost\""), "{line}");
}

#[test]
fn head_and_return() {
    let s = server();
    let mut c = s.connect();
    c.send("HEAD /r HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response_to("HEAD");
    assert_eq!(r.status, 200);
    assert_eq!(r.must("Content-Length"), "4");
    c.send(GET_INDEX);
    assert_index(&c.read_response());
}

#[test]
fn request_sent_byte_by_byte() {
    let s = server();
    let mut c = s.connect();
    for b in b"GET /index.html HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n\r\n" {
        c.send([*b]);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_index(&c.read_response());
}

#[test]
fn headers_beyond_all_large_buffers_are_400() {
    let s = server();
    // each line fits in a 1k buffer, but 8 of them do not fit in 4 buffers
    let mut raw = String::from("GET /index.html HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..8 {
        raw.push_str(&format!("X-H{i}: {}\r\n", "v".repeat(900)));
    }
    raw.push_str("\r\n");
    let mut c = s.connect();
    c.send(raw);
    let r = c.read_response();
    assert_eq!(r.status, 400);
    assert!(r.text().contains("<title>400 Request Header Or Cookie Too Large</title>"), "{}", r.text());
    // fewer of them are fine
    let mut raw = String::from("GET /index.html HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for i in 0..2 {
        raw.push_str(&format!("X-H{i}: {}\r\n", "v".repeat(900)));
    }
    raw.push_str("\r\n");
    assert_index(&request(s.port, &raw));
}

#[test]
fn too_large_body_in_flight_still_gets_the_413() {
    // The client has already sent part of a large body when the 413 is
    // decided: the server must close by lingering (FIN, drain), not with a
    // reset that would destroy the response before the client reads it.
    let s = server();
    let mut c = s.connect();
    let mut req = b"POST /r HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3000000\r\n\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'x', 256 * 1024));
    c.send(&req);
    let r = c.read_response();
    assert_eq!(r.status, 413, "{}", r.head);
    assert!(r.text().contains("<title>413 Request Entity Too Large</title>"));
    assert_eq!(r.must("Connection"), "close");
}

#[test]
fn unchanged_small_file_is_served_from_the_open_file_cache() {
    // With open_file_cache the bytes of a small file are kept, so later
    // responses are identical and need no read of the file.
    let s = builder()
        .http("open_file_cache max=10 inactive=60s;\nserver { listen 127.0.0.1:{port}; root html; }")
        .file("html/small.txt", "cached bytes\n")
        .start();
    for _ in 0..3 {
        let r = s.get("/small.txt");
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "cached bytes\n");
        assert_eq!(r.must("Content-Length"), "13");
    }
    // A range of a cached file comes from the same bytes.
    let mut c = s.connect();
    c.send("GET /small.txt HTTP/1.1\r\nHost: localhost\r\nRange: bytes=7-11\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 206);
    assert_eq!(r.text(), "bytes");
}

#[test]
fn connect_is_refused_as_nginx_does() {
    let s = server();
    // Authority form: not a request line nginx accepts.
    let r = request(s.port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n");
    assert_eq!(r.status, 400);
    // Origin form: 405, before any location runs.
    let r = request(s.port, "CONNECT / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 405);
    s.wait_error_log("client sent CONNECT method while reading client request headers");
}

#[test]
fn listeners_hand_over_connections_with_data_only() {
    // `$connection` numbers connections in the order the server accepts
    // them, so it shows whether a silent connection was handed over. The
    // kernel keeps a deferred connection for at least 1 s (its first SYN-ACK
    // retransmission), far longer than the 300 ms waited here; timing the
    // client_header_timeout instead raced that retransmission under CI load.
    let conf = "server { listen 127.0.0.1:{port}{opt}; location / { return 200 \"$connection\"; } }";
    let order = |opt: &str| {
        let s = builder().http(&conf.replace("{opt}", opt)).start();
        let num = |t: String| t.parse::<u64>().expect("a connection number");
        let first = num(s.get("/").text());
        let mut quiet = s.connect();
        std::thread::sleep(Duration::from_millis(300));
        let next = num(s.get("/").text()) - first;
        quiet.send("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        (next, num(quiet.read_response().text()) - first)
    };
    // `deferred`: the silent connection comes after the next one, once its
    // request arrives...
    assert_eq!(order(" deferred"), (1, 2), "the deferred listener accepted a silent connection");
    // ...and sluice defers on every listener (TCP_DEFER_ACCEPT, as h2o
    // does), where nginx takes the silent connection at once.
    let plain = if tls::nginx_mode() { (2, 1) } else { (1, 2) };
    assert_eq!(order(""), plain, "a listener without `deferred`");
}
