//! `mirror`: a copy of each request goes in the background to another
//! location, whose answer is dropped. With SLUICE_TEST_NGINX=1 the same
//! tests run against Debian's nginx.

mod common;

use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

fn wait_count(o: &Origin, n: usize) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(5) {
        if o.count() >= n {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn requests_are_copied_and_the_copys_answer_dropped() {
    let app = echo();
    let shadow = Origin::start(|_| Reply::http(500, &[], "shadow's answer"));
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location / {{
                    mirror /mirror;
                    proxy_pass http://127.0.0.1:{a};
                }}
                location /static/ {{
                    mirror /mirror;
                    mirror /mirror2;
                }}
                location /quiet/ {{
                    mirror off;
                }}
                location /denied/ {{
                    mirror /mirror;
                    deny all;
                }}
                location = /mirror {{
                    internal;
                    proxy_pass http://127.0.0.1:{m}$request_uri;
                }}
                location = /mirror2 {{
                    internal;
                    proxy_pass http://127.0.0.1:{m}/second$request_uri;
                }}
            }}"#,
            a = app.port,
            m = shadow.port
        ))
        .file("html/static/a.txt", "static\n")
        .file("html/quiet/a.txt", "quiet\n")
        .start();
    let r = s.get("/page?x=1");
    assert_eq!((r.status, r.text().as_str()), (200, "GET /page?x=1\n"));
    assert!(wait_count(&shadow, 1));
    assert_eq!(shadow.last().line(), "GET /page?x=1 HTTP/1.0");
    let r = s.get("/static/a.txt");
    assert_eq!((r.status, r.text().as_str()), (200, "static\n"));
    assert!(wait_count(&shadow, 3));
    let mut seen: Vec<String> = shadow.requests().iter().skip(1).map(|r| r.target().to_string()).collect();
    seen.sort();
    assert_eq!(seen, ["/second/static/a.txt", "/static/a.txt"]);
    assert_eq!(s.get("/quiet/a.txt").status, 200);
    assert_eq!(s.get("/denied/a.txt").status, 403);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(shadow.count(), 3, "no copy of a request mirror is off for or denied");
}

#[test]
fn off_stands_alone() {
    let t = builder().http("server { listen 127.0.0.1:{port}; location / { mirror /m; mirror off; } }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains("\"mirror\" directive is duplicate"), "{err}");
}

/// No request body with `mirror_request_body off`; `log_subrequest on` logs the mirror in
/// its location's access log; an index file's internal redirect reaches
/// the mirror's location twice, and nginx mirrors each time.
#[test]
fn bodies_logs_and_redirects() {
    let app = echo();
    let shadow = Origin::start(|_| Reply::http(204, &[], ""));
    let s = builder()
        .http(&format!(
            r#"log_format sub "$uri $args";
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location /up/ {{
                    mirror /m;
                    proxy_pass http://127.0.0.1:{a};
                }}
                location /nobody/ {{
                    mirror /m;
                    mirror_request_body off;
                    proxy_pass http://127.0.0.1:{a};
                }}
                location /dir/ {{
                    mirror /m;
                }}
                location = /m {{
                    internal;
                    log_subrequest on;
                    access_log {{prefix}}/logs/mirror.log sub;
                    proxy_pass http://127.0.0.1:{m}$request_uri;
                }}
            }}"#,
            a = app.port,
            m = shadow.port
        ))
        .file("html/dir/index.html", "index\n")
        .start();
    let r = req(&s, "POST", "/up/a", &["Content-Type: text/plain"], b"0123456789");
    assert_eq!(r.status, 200);
    assert!(wait_count(&shadow, 1));
    assert_eq!(shadow.last().line(), "POST /up/a HTTP/1.0");
    let r = req(&s, "POST", "/nobody/a", &[], b"0123456789");
    assert_eq!(r.status, 200);
    assert!(wait_count(&shadow, 2));
    let m = shadow.last();
    assert_eq!((m.line(), m.body.as_slice()), ("POST /nobody/a HTTP/1.0", &b""[..]));
    // `/dir/` then, after the index redirect, `/dir/index.html`.
    assert_eq!(s.get("/dir/?q=1").text(), "index\n");
    assert!(wait_count(&shadow, 4));
    let lines = wait_lines(&s.path("logs/mirror.log"), 4, Duration::from_secs(5));
    // (An empty `$args` is written as nothing or `-`.)
    let lines: Vec<&str> = lines.iter().map(|l| l.trim_end_matches(['-', ' '])).collect();
    assert_eq!(lines, ["/m", "/m", "/m q=1", "/m q=1"]);
}

/// Over HTTP/2 the copies carry the request body too, as over HTTP/1:
/// they start once the proxy has read it.
#[test]
fn http2_request_bodies_reach_the_mirror() {
    let app = Origin::start(|r| Reply::ok(format!("app got {} bytes", r.body.len())));
    let shadow = Origin::start(|_| Reply::ok("shadow"));
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}} http2;
                location / {{
                    mirror /mirror;
                    proxy_pass http://127.0.0.1:{a};
                }}
                location = /mirror {{
                    internal;
                    proxy_pass http://127.0.0.1:{m}$request_uri;
                }}
            }}"#,
            a = app.port,
            m = shadow.port
        ))
        .start();
    let mut c = h2raw::Conn::open(s.port);
    let block = h2raw::request_block("POST", "/form?x=1", "localhost", &[("content-length", "10")]);
    let r = c.try_request(&block, Some(b"0123456789")).expect("response");
    assert_eq!((r.status, String::from_utf8_lossy(&r.body).as_ref()), (200, "app got 10 bytes"));
    assert!(wait_count(&shadow, 1));
    let m = shadow.last();
    assert_eq!((m.line(), m.body.as_slice()), ("POST /form?x=1 HTTP/1.0", &b"0123456789"[..]));
}
