//! Behaviours nginx's own test suite checks (nginx-tests) that sluice once
//! got wrong, each pinned here with what a client sees. Expectations hold
//! for nginx too (`SLUICE_TEST_NGINX=1`), except where a case says it
//! needs nginx 1.23+ (Debian 12 ships 1.22).

mod common;

use common::*;

fn raw(port: u16, req: &str) -> String {
    String::from_utf8_lossy(&request_to_close(port, req.as_bytes())).into_owned()
}

/// http_absolute_redirect.t, h2_absolute_redirect.t: a request refused for
/// its Host goes through the server's `error_page`, and an absolute
/// redirect then names the local address, as the Host is unusable.
/// http_method.t: TRACE gets 405 with the connection closed.
#[test]
fn refused_heads_take_error_page_and_close() {
    let s = builder()
        .http(
            r#"
        server {
            listen 127.0.0.1:{port};
            server_name on;
            absolute_redirect on;
            error_page 400 /return301;
            location / { return 200 "root\n"; }
            location /return301 { return 301 /redirect; }
        }"#,
        )
        .start();
    let r = raw(s.port, "GET /return301 HTTP/1.0\r\nHost: .\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 301 "), "{r}");
    let want = format!("Location: http://127.0.0.1:{}/redirect\r\n", s.port);
    assert!(r.contains(&want), "{r}");
    assert!(r.contains("Connection: close\r\n"), "{r}");

    // TRACE on a keep-alive request: 405, and the server closes.
    let r = raw(s.port, "TRACE / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 405 Not Allowed\r\n"), "{r}");
    assert!(r.contains("Connection: close\r\n"), "{r}");
    s.wait_error_log("client sent TRACE method");
}

/// http_uri.t: an absolute-form target with an empty path and arguments
/// (`http://host?args`) is `/` with those arguments, not a bad Host.
#[test]
fn absolute_form_with_empty_path_and_args() {
    let s = start_http(
        r#"
        server {
            listen 127.0.0.1:{port};
            location / { return 200 "uri=$uri args=$args\n"; }
        }"#,
    );
    for target in ["http://localhost?a=1", "http://localhost:8080?a=1#frag"] {
        let r = request(s.port, &format!("GET {target} HTTP/1.0\r\n\r\n"));
        assert_eq!(r.status, 200, "{target}: {}", r.head);
        assert_eq!(r.text(), "uri=/ args=a=1\n", "{target}");
    }
}

/// headers.t: `add_header ETag` replaces the response's ETag and an empty
/// value removes it; `expires` replaces an origin's Expires and
/// Cache-Control, and `expires modified` counts from an origin's
/// Last-Modified. http_variables.t: a request refused before its URI
/// parsed logs `$uri` empty.
#[test]
fn header_filter_replaces_as_nginx() {
    let s = builder()
        .ports(2)
        .file("html/t1", "x")
        .file("html/t2", "y")
        .http(
            r#"
        log_format cc "$uri: $sent_http_cache_control";
        server {
            listen 127.0.0.1:{port0};
            root html;
            access_log logs/cc.log cc;
            location /t1 {
                add_header ETag foo always;
                add_header ETag '' always;
            }
            location /t2 { add_header ETag '"mine"'; }
            location /redefine {
                expires epoch;
                proxy_pass http://127.0.0.1:{port1}/set;
            }
            location /modified {
                expires modified 2048;
                proxy_pass http://127.0.0.1:{port1}/lm;
            }
        }
        server {
            listen 127.0.0.1:{port1};
            access_log off;
            location /set {
                add_header Cache-Control max-age=3600;
                add_header Cache-Control private;
                add_header Expires "Thu, 01 Jan 2037 00:00:00 GMT";
                return 200 "set\n";
            }
            location /lm {
                add_header Last-Modified "Mon, 28 Sep 1970 06:00:00 GMT";
                return 200 "lm\n";
            }
        }"#,
        )
        .start();
    let r = s.get("/t1");
    assert_eq!(r.status, 200);
    assert!(r.headers_named("ETag").is_empty(), "{}", r.head);
    let r = s.get("/t2");
    assert_eq!(r.headers_named("ETag"), vec!["\"mine\""], "{}", r.head);

    let r = s.get("/redefine");
    assert_eq!(r.headers_named("Cache-Control"), vec!["no-cache"], "{}", r.head);
    assert_eq!(r.headers_named("Expires"), vec!["Thu, 01 Jan 1970 00:00:01 GMT"], "{}", r.head);

    let r = s.get("/modified");
    assert_eq!(r.headers_named("Expires"), vec!["Mon, 28 Sep 1970 06:34:08 GMT"], "{}", r.head);

    let r = raw(s.port, "GET /../bad HTTP/1.0\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 400 "), "{r}");
    let lines = wait_lines(&s.path("logs/cc.log"), 5, LOG_WAIT);
    assert!(lines.iter().any(|l| l == ": -"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "/t1: -"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "/redefine: no-cache"), "{lines:?}");
}

/// rewrite.t: an error_page for a `return 302 text` keeps its Location;
/// http_try_files.t: try_files appends the candidate to the alias of a
/// regex location.
#[test]
fn error_page_keeps_location_and_try_files_with_regex_alias() {
    let s = builder()
        .file("html/directory/alias-re.html", "SEE THIS")
        .http(
            r#"
        server {
            listen 127.0.0.1:{port};
            root html;
            location /return200text { return 200 "text"; }
            location /error302return200text {
                error_page 302 /return200text;
                return 302 "text";
            }
            location ~ /alias-re.html {
                alias {prefix}/html/directory;
                try_files $uri =404;
            }
        }"#,
        )
        .start();
    let r = s.get("/error302return200text");
    assert_eq!(r.status, 302, "{}", r.head);
    assert_eq!(r.header("Location"), Some("text"), "{}", r.head);
    assert_eq!(r.text(), "text");
    let r = s.get("/alias-re.html");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), "SEE THIS");
}

/// http_variables.t: `$sent_http_NAME` joins every header of that name
/// with ", " (nginx 1.23+; Debian 12's nginx 1.22 gives the first only,
/// so this case is sluice's alone).
#[test]
fn sent_http_joins_repeated_headers() {
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() {
        return;
    }
    let s = start_http(
        r#"
        log_format cc "$uri: $sent_http_cache_control";
        server {
            listen 127.0.0.1:{port};
            access_log logs/cc.log cc;
            location /set {
                add_header Cache-Control max-age=3600;
                add_header Cache-Control private;
                return 200 "set\n";
            }
        }"#,
    );
    assert_eq!(s.get("/set").status, 200);
    let lines = wait_lines(&s.path("logs/cc.log"), 1, LOG_WAIT);
    assert_eq!(lines, vec!["/set: max-age=3600, private"]);
}

const TRAILERS: &str = r#"
        server {
            listen 127.0.0.1:{port0};
            listen 127.0.0.1:{port2} http2;
            root html;
            add_trailer X-Var $host;
            add_trailer X-Always $host always;
            add_trailer X-Empty '';
            add_trailer X-Sent-HTTP $sent_http_accept_ranges;
            add_trailer X-Sent-Trailer $sent_trailer_x_var;

            location /t1 { }
            location /nx { }
            location /not_chunked { chunked_transfer_encoding off; }
            location /proxy {
                proxy_pass http://127.0.0.1:{port1}/t1;
                add_trailer X-Length $upstream_response_length;
            }
        }
        server {
            listen 127.0.0.1:{port1};
            root html;
            access_log off;
        }"#;

/// trailers.t, h2_trailers.t: add_trailer sends its fields after the body:
/// chunked HTTP/1.1 (even for a known length), HEADERS on HTTP/2; none
/// for HTTP/1.0, HEAD, `chunked_transfer_encoding off`; only `always` ones
/// on an error status; values rendered after the body.
#[test]
fn add_trailer_after_the_body() {
    let s = builder().ports(3).file("html/t1", "SEE-THIS").file("html/not_chunked", "NC").http(TRAILERS).start();
    let get = |path: &str| raw(s.port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
    let r = get("/t1");
    let (head, body) = r.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("Transfer-Encoding: chunked"), "{r}");
    assert!(!head.contains("Content-Length"), "{r}");
    assert_eq!(
        body,
        "8\r\nSEE-THIS\r\n0\r\nX-Var: localhost\r\nX-Always: localhost\r\nX-Sent-HTTP: bytes\r\n\
         X-Sent-Trailer: localhost\r\n\r\n"
    );

    let r = get("/nx");
    assert!(r.starts_with("HTTP/1.1 404 "), "{r}");
    assert!(r.contains("\r\n0\r\nX-Always: localhost\r\n\r\n"), "{r}");
    assert!(!r.contains("X-Var"), "{r}");

    let r = raw(s.port, "GET /t1 HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert!(r.contains("Content-Length: 8\r\n") && r.ends_with("\r\n\r\nSEE-THIS"), "{r}");
    let r = get("/not_chunked");
    assert!(r.contains("Content-Length: 2\r\n") && r.ends_with("\r\n\r\nNC"), "{r}");
    let r = raw(s.port, "HEAD /t1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert!(r.contains("Content-Length: 8\r\n") && !r.contains("X-Always"), "{r}");

    let r = get("/proxy");
    assert!(r.contains("8\r\nSEE-THIS\r\n0\r\n"), "{r}");
    assert!(r.contains("\r\nX-Length: 8\r\n"), "{r}");

    // HTTP/2: HEADERS, DATA, then the trailers ending the stream.
    let mut c = common::h2raw::Conn::open(s.ports[2]);
    let r = c.get("/t1");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"SEE-THIS");
    let t = |n: &str| r.trailers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    assert_eq!(t("x-var").as_deref(), Some("localhost"), "{:?}", r.trailers);
    assert_eq!(t("x-sent-trailer").as_deref(), Some("localhost"), "{:?}", r.trailers);
    assert!(r.header("x-var").is_none());
}

/// http_headers_multi.t (nginx 1.23+; Debian 12's 1.22 keeps the first
/// header only and lets these duplicates through): `$http_NAME` joins
/// repeated request headers (Cookie with "; "), `$cookie_NAME` looks in
/// every Cookie header, and a repeated header nginx needs unique gets 400.
#[test]
fn repeated_request_headers() {
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() {
        return;
    }
    let s = start_http(
        r#"
        server {
            listen 127.0.0.1:{port};
            location / {
                add_header X-Forwarded-For $http_x_forwarded_for;
                add_header X-Cookie $http_cookie;
                add_header X-Cookie-Bazz $cookie_bazz;
                add_header X-Sent-Foo $sent_http_foo;
                add_header Foo a;
                add_header Foo b;
                add_header X-Sent-Foo-After $sent_http_foo;
                return 204;
            }
        }"#,
    );
    let r = s.get_with("/", &["X-Forwarded-For: a", "X-Forwarded-For: b", "Cookie: foo=1", "Cookie: bazz=3"]);
    assert_eq!(r.status, 204);
    assert_eq!(r.header("X-Forwarded-For"), Some("a, b"));
    assert_eq!(r.header("X-Cookie"), Some("foo=1; bazz=3"));
    assert_eq!(r.header("X-Cookie-Bazz"), Some("3"));
    assert_eq!(r.header("X-Sent-Foo"), None);
    assert_eq!(r.header("X-Sent-Foo-After"), Some("a, b"));
    for h in ["If-Match", "If-None-Match", "If-Modified-Since", "Authorization", "Expect", "If-Range"] {
        let r = s.get_with("/", &[&format!("{h}: a"), &format!("{h}: b")]);
        assert_eq!(r.status, 400, "duplicate {h}");
    }
    s.wait_error_log("client sent duplicate header line: \"If-Match: b\"");
}

/// upstream_keepalive.t: `keepalive_time` in an upstream block: a cached
/// origin connection older than that serves the request it was taken for,
/// then closes instead of going back to the pool.
#[test]
fn upstream_keepalive_time() {
    let s = builder()
        .ports(2)
        .file("html/index.html", "SEE-THIS")
        .http(
            r#"
        upstream time {
            server 127.0.0.1:{port1};
            keepalive 1;
            keepalive_time 1s;
        }
        server {
            listen 127.0.0.1:{port0};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            location / { proxy_pass http://time; }
        }
        server {
            listen 127.0.0.1:{port1};
            root html;
            access_log off;
            location / { add_header X-Connection $connection; }
        }"#,
        )
        .start();
    let conn = || {
        let r = s.get("/");
        assert_eq!(r.text(), "SEE-THIS");
        r.must("X-Connection").to_string()
    };
    let first = conn();
    assert_eq!(conn(), first, "kept alive");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(conn(), first, "taken once more past keepalive_time");
    assert_ne!(conn(), first, "then closed");
}

/// `$cookie_NAME` finds the cookie whatever the case of its name in the
/// request (nginx's ngx_http_parse_multi_header_lines compares caselessly).
#[test]
fn cookie_names_match_in_any_case() {
    let s = start_http(
        r#"
        server {
            listen 127.0.0.1:{port};
            location / { return 200 "[$cookie_sid]"; }
        }"#,
    );
    assert_eq!(s.get_with("/", &["Cookie: SID=x"]).text(), "[x]");
    assert_eq!(s.get_with("/", &["Cookie: a=1; Sid=y"]).text(), "[y]");
    assert_eq!(s.get_with("/", &["Cookie: sidx=1"]).text(), "[]");
}
