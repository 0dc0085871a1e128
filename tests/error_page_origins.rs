//! `error_page` naming a location that has an origin of its own: the
//! common `error_page 502 = @fallback` behind a failed origin, and an
//! origin's error caught by `proxy_intercept_errors`. The fallback's origin
//! must be asked (with the request's body) and its answer must reach the
//! client, over HTTP/1.1 and HTTP/2. Runs against nginx too
//! (SLUICE_TEST_NGINX=1).

mod common;

use common::origin::*;
use common::*;

fn fallback_server(dead: u16, first: &Origin, fallback: &Origin) -> TestServer {
    builder()
        .ports(2)
        .http(&sub(
            r#"
            log_format up '$request_uri $status $upstream_status';
            server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                access_log logs/access.log up;
                location /down { proxy_pass http://127.0.0.1:%D%; error_page 502 = @fallback; }
                location /missing {
                    proxy_pass http://127.0.0.1:%F%;
                    proxy_intercept_errors on;
                    error_page 404 = @fallback;
                }
                location /kept {
                    proxy_pass http://127.0.0.1:%F%;
                    proxy_intercept_errors on;
                    error_page 404 @fallback;
                }
                location /forced {
                    proxy_pass http://127.0.0.1:%F%;
                    proxy_intercept_errors on;
                    error_page 404 =200 /page;
                }
                location /page { proxy_pass http://127.0.0.1:%B%; }
                location @fallback { proxy_pass http://127.0.0.1:%B%; }
            }"#,
            &[("%D%", dead), ("%F%", first.port), ("%B%", fallback.port)],
        ))
        .start()
}

fn origins() -> (Origin, Origin) {
    let first = Origin::start(|_| Reply::http(404, &["Content-Type: text/plain"], "first origin's 404\n"));
    let fallback = Origin::start(|r| {
        Reply::http(
            200,
            &["Content-Type: text/plain", "X-From: fallback"],
            format!("fallback: {} {} {} bytes\n", r.method(), r.target(), r.body.len()),
        )
    });
    (first, fallback)
}

fn post(port: u16, path: &str, body: &str) -> Response {
    request(
        port,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn a_failed_origin_falls_back_to_a_named_location_with_an_origin() {
    let (first, fallback) = origins();
    let s = fallback_server(free_port(), &first, &fallback);
    let p = s.ports[0];

    let r = s.get("/down/a?x=1");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("x-from"), Some("fallback"));
    assert_eq!(r.text(), "fallback: GET /down/a?x=1 0 bytes\n");

    // A named location gets the request as it came: method and body.
    let r = post(p, "/down/b", "hello body");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "fallback: POST /down/b 10 bytes\n");
    assert_eq!(fallback.last().body, b"hello body");

    let log = s.wait_access_lines(2);
    assert!(log[0].ends_with("/down/a?x=1 200 502 : 200"), "{log:?}");
}

#[test]
fn an_intercepted_origin_error_goes_to_the_fallback_origin() {
    let (first, fallback) = origins();
    let s = fallback_server(free_port(), &first, &fallback);

    // `=`: the fallback's status.
    let r = s.get("/missing/x");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "fallback: GET /missing/x 0 bytes\n");
    // No `=`: the original 404 with the fallback's answer.
    let r = s.get("/kept/x");
    assert_eq!(r.status, 404, "{}", r.text());
    assert_eq!(r.text(), "fallback: GET /kept/x 0 bytes\n");
    // A URI page in a proxied location, status forced.
    let r = s.get("/forced/x");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.text(), "fallback: GET /page 0 bytes\n");
    assert_eq!(first.count(), 3, "the first origin was asked each time");

    let log = s.wait_access_lines(3);
    assert!(log[0].ends_with("/missing/x 200 404 : 200"), "{log:?}");
}

#[test]
fn the_fallback_answers_over_http2() {
    let (first, fallback) = origins();
    let s = fallback_server(free_port(), &first, &fallback);
    let mut c = h2raw::Conn::open(s.ports[1]);
    let r = c.get("/down/h2");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), "fallback: GET /down/h2 0 bytes\n");
    let r = c.get("/missing/h2");
    assert_eq!(r.status, 200);
    assert_eq!(String::from_utf8_lossy(&r.body), "fallback: GET /missing/h2 0 bytes\n");
}
