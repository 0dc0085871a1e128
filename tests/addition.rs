//! The addition module: `add_before_body` and `add_after_body` around
//! static and proxied bodies, only for `addition_types`, only on 200s,
//! with SSI in the added location and gzip over the whole. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::codings;
use common::origin::*;
use common::*;

#[test]
fn bodies_are_added_around_static_and_proxied_answers() {
    let o = Origin::start(|r| match r.target() {
        "/page.html" => Reply::http(200, &["Content-Type: text/html", "ETag: \"abc\""], "<p>origin</p>\n"),
        "/missing.html" => Reply::http(404, &["Content-Type: text/html"], "gone\n"),
        t => Reply::http(200, &["Content-Type: text/plain"], format!("origin{t}\n")),
    });
    let s = builder()
        .http(&format!(
            r#"include mime.types;
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location / {{
                    add_before_body /parts/head.html;
                    add_after_body /parts/foot.html;
                }}
                location /up/ {{
                    add_before_body /parts/head.html;
                    add_after_body /from-origin/foot;
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /from-origin/ {{
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /txt/ {{
                    add_after_body /parts/foot.html;
                    addition_types text/plain;
                }}
                location /parts/ {{
                    ssi on;
                }}
                location /gz/ {{
                    add_before_body /parts/head.html;
                    gzip on;
                    gzip_min_length 1;
                }}
            }}"#,
            p = o.port
        ))
        .file("html/index.html", "<main>body</main>\n")
        .file("html/a.txt", "plain\n")
        .file("html/txt/a.txt", "plain\n")
        .file("html/parts/head.html", "<header><!--#echo var=\"uri\" --></header>\n")
        .file("html/parts/foot.html", "<footer/>\n")
        .file("html/gz/big.html", "<p>x</p>\n".repeat(500))
        .start();
    let r = s.get("/index.html");
    assert_eq!(r.status, 200);
    // The added location runs SSI on its own page: `$uri` is its own.
    assert_eq!(r.text(), "<header>/parts/head.html</header>\n<main>body</main>\n<footer/>\n");
    assert_eq!((r.header("Content-Length"), r.header("Accept-Ranges")), (None, None), "{}", r.head);
    assert!(r.header("Last-Modified").is_some(), "{}", r.head);
    assert!(r.header("ETag").is_some_and(|e| e.starts_with("W/")), "{}", r.head);
    // Other types are left alone, unless listed.
    assert_eq!(s.get("/a.txt").text(), "plain\n");
    assert_eq!(s.get("/txt/a.txt").text(), "plain\n<footer/>\n");
    // A proxied answer, with a proxied addition.
    let r = s.get("/up/page.html");
    assert_eq!(r.text(), "<header>/parts/head.html</header>\n<p>origin</p>\norigin/foot\n");
    assert_eq!(r.header("ETag"), Some("W/\"abc\""));
    // Only 200s get additions.
    let r = s.get("/up/missing.html");
    assert_eq!((r.status, r.text()), (404, "gone\n".to_string()));
    assert_eq!(s.get("/nope.html").status, 404);
    assert!(!s.get("/nope.html").text().contains("<footer/>"));
    // A range request gets the whole page, with its additions.
    let r = s.get_with("/index.html", &["Range: bytes=0-3"]);
    assert_eq!((r.status, r.text().len()), (200, 62));
    // Compression covers the added bodies too.
    let r = s.get_with("/gz/big.html", &["Accept-Encoding: gzip"]);
    let want = format!("<header>/parts/head.html</header>\n{}", "<p>x</p>\n".repeat(500));
    codings::assert_encoded(&r, "gzip", want.as_bytes(), "addition then gzip");
    let seen: Vec<String> = o.requests().iter().map(|r| r.target().to_string()).collect();
    assert_eq!(seen, ["/page.html", "/foot", "/missing.html"]);
}

#[test]
fn an_unsafe_or_missing_addition_adds_nothing_harmful() {
    let s = builder()
        .http(
            "include mime.types;
            server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location / { add_after_body /none.html; }
                location /before/ { add_before_body /before/x.html; }
            }",
        )
        .file("html/index.html", "body\n")
        .file("html/before/x.html", "X")
        .start();
    // The missing location's 404 page is added, as nginx does.
    let r = s.get("/index.html");
    assert_eq!(r.status, 200);
    assert!(r.text().starts_with("body\n<html>") && r.text().contains("404 Not Found"), "{}", r.text());
    // A page adding itself before itself: the addition is a subrequest,
    // and subrequests get no additions, so there is no loop.
    let r = s.get("/before/x.html");
    assert_eq!((r.status, r.text()), (200, "XX".to_string()));
}
