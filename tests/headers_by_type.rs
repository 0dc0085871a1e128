//! `expires` and `add_header` driven by `map`s over
//! `$sent_http_content_type`, as config frameworks (h5bp's
//! server-configs-nginx) set caching and security headers per type. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::*;

#[test]
fn expires_and_headers_follow_the_response_type() {
    let s = builder()
        .http(
            r#"include mime.types;
            map $sent_http_content_type $expires {
                default     off;
                text/html   epoch;
                text/css    max;
                ~image/     1h;
            }
            map $sent_http_content_type $x_frame_options {
                ~*text/html DENY;
            }
            server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                charset utf-8;
                expires $expires;
                add_header X-Frame-Options $x_frame_options always;
                location /fixed/ { expires 30s; }
                location /mod/ { expires modified $arg_t; }
            }"#,
        )
        .file("html/a.html", "<p></p>\n")
        .file("html/a.css", "p{}\n")
        .file("html/a.png", "png")
        .file("html/a.txt", "text\n")
        .file("html/fixed/a.html", "<p></p>\n")
        .file("html/mod/a.txt", "text\n")
        .start();
    let r = s.get("/a.html");
    assert_eq!(r.header("Expires"), Some("Thu, 01 Jan 1970 00:00:01 GMT"), "{}", r.head);
    assert_eq!(r.header("Cache-Control"), Some("no-cache"));
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    let r = s.get("/a.css");
    assert_eq!(r.header("Cache-Control"), Some("max-age=315360000"), "{}", r.head);
    assert_eq!(r.header("X-Frame-Options"), None);
    let r = s.get("/a.png");
    assert_eq!(r.header("Cache-Control"), Some("max-age=3600"), "{}", r.head);
    let r = s.get("/a.txt");
    assert_eq!((r.header("Cache-Control"), r.header("Expires")), (None, None), "{}", r.head);
    // A location's own fixed expires replaces the variable one.
    let r = s.get("/fixed/a.html");
    assert_eq!(r.header("Cache-Control"), Some("max-age=30"), "{}", r.head);
    // `modified` with a variable time.
    let r = s.get("/mod/a.txt?t=1h");
    assert!(r.header("Expires").is_some(), "{}", r.head);
    // Error pages: not a status expires applies to, but `always` headers.
    let r = s.get("/missing.html");
    assert_eq!((r.status, r.header("Cache-Control")), (404, None));
    assert_eq!(r.header("X-Frame-Options"), Some("DENY"));
}

#[test]
fn upstream_http_variables_read_the_origins_answer() {
    let o = common::origin::Origin::start(|_| common::origin::Reply::http(200, &["X-App: v1"], "x"));
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                add_header X-Seen "[$upstream_http_x_app]" always;
                location /up/ {{ proxy_pass http://127.0.0.1:{}; }}
            }}"#,
            o.port
        ))
        .file("html/a.txt", "a\n")
        .start();
    assert_eq!(s.get("/up/").header("X-Seen"), Some("[v1]"));
    assert_eq!(s.get("/a.txt").header("X-Seen"), Some("[]"));
}

#[test]
fn request_id_is_32_hex_digits_kept_for_the_request() {
    let s = builder()
        .http(
            r#"log_format ids '$request_id';
            server {
                listen 127.0.0.1:{port};
                access_log logs/ids.log ids;
                add_header X-Request-Id $request_id always;
                location / { return 200 "$request_id\n"; }
            }"#,
        )
        .start();
    let a = s.get("/");
    let b = s.get("/");
    let id = a.text().trim_end().to_string();
    assert_eq!(id.len(), 32, "{id}");
    assert!(id.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{id}");
    assert_eq!(a.header("X-Request-Id"), Some(id.as_str()));
    assert_ne!(b.text().trim_end(), id);
    let lines = common::wait_lines(&s.path("logs/ids.log"), 2, common::LOG_WAIT);
    assert_eq!(lines[0], id);
}
