//! Core and proxy directives nginx's own suite checks (proxy_force_ranges.t,
//! proxy_variables.t, post_action.t, http_keepalive.t, msie_refresh.t,
//! http_listen.t, geo_unix.t), as a client and an origin see them. The
//! expectations hold for nginx too (`SLUICE_TEST_NGINX=1`) except where a
//! test says it needs a newer nginx than Debian 12's 1.22.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::*;

fn raw(port: u16, req: &str) -> String {
    String::from_utf8_lossy(&request_to_close(port, req.as_bytes())).into_owned()
}

fn get_range(port: u16, path: &str, extra: &str) -> String {
    raw(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}\r\n"))
}

/// The origin (the second server) ignores ranges (`max_ranges 0`) and sends
/// no Accept-Ranges: only `proxy_force_ranges` makes the proxy answer them,
/// one range of a passed-on answer, any number of a cached one.
#[test]
fn proxy_force_ranges_cuts_the_origins_200() {
    let s = builder()
        .ports(2)
        .file("html/t.html", "SEE-THIS")
        .http(
            r#"
        proxy_cache_path {prefix}/cache levels=1:2 keys_zone=NAME:1m;
        server {
            listen 127.0.0.1:{port0};
            location / { proxy_pass http://127.0.0.1:{port1}; }
            location /proxy/ {
                proxy_pass http://127.0.0.1:{port1}/;
                proxy_force_ranges on;
            }
            location /lm/ {
                alias {prefix}/html/;
                add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT";
            }
            location /cache/ {
                proxy_pass http://127.0.0.1:{port1}/;
                proxy_cache NAME;
                proxy_cache_valid 200 1m;
                proxy_force_ranges on;
            }
        }
        server {
            listen 127.0.0.1:{port1};
            location / {
                max_ranges 0;
                add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT";
                add_header ETag '"59a5401c-8"';
            }
        }"#,
        )
        .start();
    let p = s.port;

    // Without it, the origin's full answer goes as it came.
    let r = get_range(p, "/t.html", "Range: bytes=4-\r\n");
    assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
    assert!(r.ends_with("\r\n\r\nSEE-THIS"), "{r}");

    let r = get_range(p, "/proxy/t.html", "Range: bytes=4-\r\n");
    assert!(r.starts_with("HTTP/1.1 206 "), "{r}");
    assert!(r.contains("Content-Range: bytes 4-7/8\r\n"), "{r}");
    assert!(r.ends_with("\r\n\r\nTHIS"), "{r}");
    // A full answer says ranges are served.
    let r = get_range(p, "/proxy/t.html", "");
    assert!(r.contains("Accept-Ranges: bytes\r\n"), "{r}");

    // If-Range by date and by entity tag; a stale one gets the whole body.
    let r = get_range(p, "/proxy/t.html", "Range: bytes=4-\r\nIf-Range: Mon, 28 Sep 1970 06:00:00 GMT\r\n");
    assert!(r.starts_with("HTTP/1.1 206 ") && r.ends_with("THIS"), "{r}");
    let r = get_range(p, "/proxy/t.html", "Range: bytes=4-\r\nIf-Range: \"59a5401c-8\"\r\n");
    assert!(r.starts_with("HTTP/1.1 206 ") && r.ends_with("THIS"), "{r}");
    let r = get_range(p, "/proxy/t.html", "Range: bytes=4-\r\nIf-Range: \"other\"\r\n");
    assert!(r.starts_with("HTTP/1.1 200 ") && r.ends_with("SEE-THIS"), "{r}");

    // add_header's Last-Modified is what If-Range compares with (nginx's
    // range filter runs after the headers filter).
    let r = get_range(p, "/lm/t.html", "Range: bytes=4-\r\nIf-Range: Mon, 28 Sep 1970 06:00:00 GMT\r\n");
    assert!(r.starts_with("HTTP/1.1 206 ") && r.ends_with("THIS"), "{r}");

    // One range only while passing an answer on; past the end is 416.
    let r = get_range(p, "/proxy/t.html", "Range: bytes=0-2,4-\r\n");
    assert!(r.starts_with("HTTP/1.1 200 ") && r.ends_with("SEE-THIS"), "{r}");
    let r = get_range(p, "/proxy/t.html", "Range: bytes=10-\r\n");
    assert!(r.starts_with("HTTP/1.1 416 "), "{r}");
    assert!(r.contains("Content-Range: bytes */8\r\n"), "{r}");

    // Cached: the miss and the hit both cut; the hit answers several ranges.
    let r = get_range(p, "/cache/t.html", "Range: bytes=4-\r\n");
    assert!(r.starts_with("HTTP/1.1 206 ") && r.ends_with("THIS"), "{r}");
    let r = get_range(p, "/cache/t.html", "Range: bytes=4-\r\n");
    assert!(r.starts_with("HTTP/1.1 206 ") && r.ends_with("THIS"), "{r}");
    let r = get_range(p, "/cache/t.html", "Range: bytes=0-2,4-\r\n");
    assert!(r.starts_with("HTTP/1.1 206 "), "{r}");
    assert!(r.contains("multipart/byteranges"), "{r}");
    let body = &r[r.find("\r\n\r\n").unwrap()..];
    let (see, this) = (body.find("\r\n\r\nSEE\r\n"), body.find("\r\n\r\nTHIS\r\n"));
    assert!(see.is_some() && this > see, "{r}");
}

/// An origin that records the bytes of one request (head and a
/// Content-Length body) and answers it.
fn counting_origin() -> (u16, Arc<Mutex<Vec<usize>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).into_owned();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text[..end]
                        .lines()
                        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_string))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if got.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            record.lock().unwrap().push(got.len());
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (port, seen)
}

/// `$upstream_bytes_sent`: what the origin received of the request, head
/// and body; `$upstream_bytes_received` beside it.
#[test]
fn upstream_bytes_sent_counts_what_the_origin_got() {
    let (origin, seen) = counting_origin();
    let s = builder()
        .http(&format!(
            r#"
        log_format u "$uri $upstream_bytes_sent $upstream_bytes_received";
        server {{
            listen 127.0.0.1:{{port}};
            access_log logs/u.log u;
            location / {{ proxy_pass http://127.0.0.1:{origin}; }}
        }}"#
        ))
        .start();
    let r = request(
        s.port,
        "POST /post HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789",
    );
    assert_eq!(r.status, 200, "{}", r.head);
    let r = request(s.port, "GET /get HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.head);
    let lines = wait_lines(&s.path("logs/u.log"), 2, std::time::Duration::from_secs(5));
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    let reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".len();
    assert_eq!(lines[0], format!("/post {} {reply}", got[0]), "{lines:?}");
    assert_eq!(lines[1], format!("/get {} {reply}", got[1]), "{lines:?}");
    assert!(got[0] > got[1] + 10, "{got:?}");
}

/// `post_action`: after the answer, the request runs again in the named
/// URI; that answer is dropped, and a proxied one reaches its origin.
#[test]
fn post_action_runs_after_the_response() {
    let s = builder()
        .ports(2)
        .file("html/index.html", "SEE-THIS")
        .file("html/post.html", "HIDDEN")
        .file("html/remote", "SEE-THIS")
        .http(
            r#"
        server {
            listen 127.0.0.1:{port0};
            location / { post_action /post.html; }
            location = /post.html { }
            location /remote { post_action @report; }
            location @report { proxy_pass http://127.0.0.1:{port1}; }
        }
        server {
            listen 127.0.0.1:{port1};
            access_log logs/report.log;
            location / { return 204; }
        }"#,
        )
        .start();
    for path in ["/", "/remote"] {
        let r = raw(s.port, &format!("GET {path} HTTP/1.0\r\n\r\n"));
        assert!(r.starts_with("HTTP/1.1 200 "), "{r}");
        assert!(r.ends_with("\r\n\r\nSEE-THIS"), "{r}");
        assert!(!r.contains("HIDDEN"), "{r}");
    }
    // The named location kept the URI, and the method.
    let line = wait_contains(&s.path("logs/report.log"), "GET /remote ", std::time::Duration::from_secs(5));
    assert!(line.contains("\" 204 "), "{line}");
    // Keep-alive goes on after the action.
    let mut c = s.connect();
    for _ in 0..2 {
        c.send(b"GET /remote HTTP/1.1\r\nHost: localhost\r\n\r\n");
        let r = c.read_response_to("GET");
        assert_eq!(r.text(), "SEE-THIS");
    }
}

/// `post_action` over HTTP/2: the stream's answer goes out, then the
/// action reaches its origin with the request's method and URI.
#[test]
fn post_action_runs_after_an_http2_response() {
    let s = builder()
        .ports(2)
        .file("html/remote", "SEE-THIS")
        .http(
            r#"
        server {
            listen 127.0.0.1:{port0} http2;
            location /remote { post_action @report; }
            location @report { proxy_pass http://127.0.0.1:{port1}; }
        }
        server {
            listen 127.0.0.1:{port1};
            access_log logs/report.log;
            location / { return 204; }
        }"#,
        )
        .start();
    let mut c = h2raw::Conn::open(s.port);
    let r = c.get("/remote?from=h2");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"SEE-THIS"[..]));
    let line = wait_contains(&s.path("logs/report.log"), "GET /remote?from=h2 ", std::time::Duration::from_secs(5));
    assert!(line.contains("\" 204 "), "{line}");
    // The connection goes on serving.
    assert_eq!(c.get("/remote").status, 200);
}

/// `keepalive_disable`: msie6 (the default) ends the connection after an
/// old MSIE's POST; safari after any request from Safari on macOS.
#[test]
fn keepalive_disable_msie6_and_safari() {
    let s = builder()
        .file("html/index.html", "x")
        .http(
            r#"
        server {
            listen 127.0.0.1:{port};
            location / { }
            location /safari { keepalive_disable safari; alias html/index.html; }
            location /none { keepalive_disable none; alias html/index.html; }
        }"#,
        )
        .start();
    let ask = |method: &str, path: &str, ua: &str| {
        let r = request(
            s.port,
            &format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {ua}\r\nContent-Length: 0\r\n\r\n"),
        );
        r.header("connection").unwrap_or("").to_string()
    };
    assert_eq!(ask("POST", "/index.html", "MSIE 5.0"), "close");
    assert_eq!(ask("GET", "/index.html", "MSIE 5.0"), "keep-alive");
    assert_eq!(ask("POST", "/index.html", "MSIE 7.0"), "keep-alive");
    assert_eq!(ask("GET", "/index.html", "Mac OS X Safari/7534.48.3"), "keep-alive");
    assert_eq!(ask("GET", "/safari", "Mac OS X Safari/7534.48.3"), "close");
    assert_eq!(ask("GET", "/safari", "Mac OS X Chrome/1 Safari/7534.48.3"), "keep-alive");
    assert_eq!(ask("POST", "/none", "MSIE 5.0"), "keep-alive");
}

/// `msie_refresh` turns a redirect into a refreshing page for MSIE;
/// `msie_padding` pads error pages for MSIE and Chrome unless off.
#[test]
fn msie_refresh_and_padding() {
    let s = start_http(
        r#"
        server {
            listen 127.0.0.1:{port};
            msie_refresh on;
            location / { return 301 text; }
            location /space { return 301 "a b'c"; }
            location /error_page { return 301; error_page 301 text; }
            location /off { msie_refresh off; return 301 text; }
            location /missing { msie_padding on; }
            location /nopad { msie_padding off; }
        }"#,
    );
    let ask = |path: &str, ua: &str| {
        request(
            s.port,
            &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {ua}\r\nConnection: close\r\n\r\n"),
        )
    };
    let r = ask("/", "MSIE foo");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.header("location"), None, "{}", r.head);
    assert_eq!(r.must("content-type"), "text/html");
    assert_eq!(
        r.text(),
        "<html><head><meta http-equiv=\"Refresh\" content=\"0; URL=text\"></head><body></body></html>\r\n"
    );
    assert!(ask("/space", "MSIE foo").text().contains("URL=a%20b%27c\""));
    assert!(ask("/error_page", "MSIE foo").text().contains("URL=text\""));
    let r = ask("/off", "MSIE foo");
    assert_eq!(r.status, 301, "{}", r.head);
    let r = ask("/", "curl/8");
    assert_eq!(r.status, 301, "{}", r.head);

    let padded = ask("/missing", "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)");
    assert_eq!(padded.status, 404);
    assert!(padded.text().contains("a padding to disable MSIE and Chrome friendly error page"));
    let plain = ask("/nopad", "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)");
    assert!(!plain.text().contains("padding"), "{}", plain.text());
    assert!(!ask("/missing", "curl/8").text().contains("padding"));
}

/// Two consecutive free ports.
fn port_pair() -> u16 {
    for _ in 0..50 {
        let p = free_port();
        if p < 65535 && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two consecutive free ports");
}

/// `listen ADDR:FIRST-LAST` (nginx 1.27.3; nginx 1.22 refuses it): one
/// socket per port, each with the server's parameters.
#[test]
fn listen_port_range() {
    if common::cache::nginx_mode() {
        return;
    }
    let p = port_pair();
    let _s = start_http(&format!(
        r#"
        server {{
            listen 127.0.0.1:{{port}};
            listen 127.0.0.1:{p}-{};
            location / {{ return 200 "$server_port"; }}
        }}"#,
        p + 1
    ));
    for port in [p, p + 1] {
        let r = request(port, "GET / HTTP/1.0\r\n\r\n");
        assert_eq!(r.text(), port.to_string());
    }
    let bad = |listen: &str, why: &str| {
        let conf = format!("server {{ listen {listen}; }}");
        assert_refused(&conf, why);
    };
    bad(&format!("127.0.0.1:{}-{}", p + 1, p), "invalid port range");
    bad("127.0.0.1:8000-70000", "invalid port range");
}

/// geo's `255.255.255.255` entry: what a value that is no address is
/// looked up by (and a unix-socket client, in nginx).
#[test]
fn geo_none_address() {
    let s = start_http(
        r#"
        geo $arg_ip $g {
            default         default;
            255.255.255.255 none;
            192.0.2.0/24    test;
        }
        server {
            listen 127.0.0.1:{port};
            location / { return 200 "$g"; }
        }"#,
    );
    for (ip, want) in [("foo", "none"), ("192.0.2.1", "test"), ("10.0.0.1", "default")] {
        let r = request(s.port, &format!("GET /?ip={ip} HTTP/1.0\r\n\r\n"));
        assert_eq!(r.text(), want, "{ip}");
    }
}
