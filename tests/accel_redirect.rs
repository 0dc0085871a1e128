//! `X-Accel-Redirect` from a proxied origin: the origin's answer is
//! replaced by an internal redirect (usually to an `internal` location
//! serving a protected file), carrying nginx's few fields over. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::origin::*;
use common::*;

/// The origin: `/app/to?X` answers with `X-Accel-Redirect: X` (and a
/// cookie, a disposition and a field that must not carry over); anything
/// else is a plain page naming the request.
fn origin() -> Origin {
    Origin::start(|req| {
        let target = req.target().to_string();
        match target.strip_prefix("/app/to?") {
            Some(to) => Reply::http(
                200,
                &[
                    &format!("X-Accel-Redirect: {to}"),
                    "Content-Disposition: attachment; filename=\"f.txt\"",
                    "Set-Cookie: seen=1",
                    "X-Other: origin",
                    "Content-Type: application/x-origin",
                ],
                "the origin's own body",
            ),
            None => Reply::ok(format!("origin: {} {}", req.method(), target)),
        }
    })
}

fn server(o: &Origin, extra: &str) -> TestServer {
    builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location /protected/ {{ internal; }}
                location @named {{ return 200 "named $uri $args\n"; }}
                location /app/ {{ proxy_pass http://127.0.0.1:{p}; {extra} }}
                location /again/ {{ internal; proxy_pass http://127.0.0.1:{p}; }}
            }}"#,
            p = o.port
        ))
        .file("html/protected/file.txt", "protected bytes\n")
        .start()
}

fn get(s: &TestServer, method: &str, target: &str) -> Response {
    request(s.port, &format!("{method} {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
}

#[test]
fn redirects_to_an_internal_location_with_nginxs_fields() {
    let o = origin();
    let s = server(&o, "");
    let r = get(&s, "GET", "/app/to?/protected/file.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "protected bytes\n"), "{}", r.head);
    // nginx keeps the origin's Content-Type over the file's.
    assert_eq!(r.header("Content-Type"), Some("application/x-origin"));
    assert_eq!(r.header("Content-Disposition"), Some("attachment; filename=\"f.txt\""));
    assert_eq!(r.header("Set-Cookie"), Some("seen=1"));
    assert_eq!(r.header("X-Other"), None);
    assert_eq!(r.header("X-Accel-Redirect"), None);
    // Not reachable from outside.
    assert_eq!(get(&s, "GET", "/protected/file.txt").status, 404);
    // A POST becomes a GET for the file; a HEAD stays a HEAD.
    let r = get(&s, "POST", "/app/to?/protected/file.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "protected bytes\n"), "{}", r.head);
    let r = get(&s, "HEAD", "/app/to?/protected/file.txt");
    assert_eq!((r.status, r.header("Content-Length")), (200, Some("16")));
    assert!(r.body.is_empty());
}

#[test]
fn named_locations_arguments_and_a_second_proxy() {
    let o = origin();
    let s = server(&o, "");
    let r = get(&s, "GET", "/app/to?@named");
    assert_eq!((r.status, r.text().as_str()), (200, "named /app/to @named\n"), "{}", r.head);
    // The redirect's own arguments replace the request's.
    let r = get(&s, "GET", "/app/to?/again/page?a=1");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), "origin: GET /again/page?a=1");
    let r = get(&s, "GET", "/app/to?/protected/../secret");
    assert_eq!(r.status, 404, "an unsafe URI: {}", r.head);
}

#[test]
fn ignored_when_the_location_says_so() {
    let o = origin();
    let s = server(&o, "proxy_ignore_headers X-Accel-Redirect;");
    let r = get(&s, "GET", "/app/to?/protected/file.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "the origin's own body"), "{}", r.head);
    assert_eq!(r.header("X-Accel-Redirect"), None, "hidden by default as nginx does");
    assert_eq!(r.header("X-Other"), Some("origin"));
}
