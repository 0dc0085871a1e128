//! `sub_filter`: strings replaced in response bodies (static, proxied,
//! compressed after replacing), ignoring case, once or everywhere. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::codings;
use common::origin::*;
use common::*;

#[test]
fn replaces_in_static_proxied_and_compressed_bodies() {
    let page = "<html><head></head><body>see HTTP://old.example/a and http://old.example/b</body></html>\n";
    // A body the origin sends in several pieces, the string cut between them.
    let o = Origin::start(|r| {
        if r.target() == "/untyped" {
            return Reply::http(200, &[], "http://old.example/u");
        }
        Reply::raw(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n\
             b\r\n<p>http://o\r\n13\r\nld.example/x</p>   \r\n0\r\n\r\n",
        )
    });
    let big: String = (0..400).map(|i| format!("<p>line {i} http://old.example/{i}</p>\n")).collect();
    let s = builder()
        .http(&format!(
            r#"include mime.types;
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location / {{
                    sub_filter 'http://old.example' 'https://$host';
                    sub_filter '</head>' '<meta name="x"></head>';
                }}
                location /all/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_once off;
                }}
                location /css/ {{
                    sub_filter 'red' 'blue';
                    sub_filter_types text/css;
                    sub_filter_last_modified on;
                }}
                location /up/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /any/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_types *;
                    proxy_pass http://127.0.0.1:{p}/;
                }}
                location /gz/ {{
                    sub_filter 'http://old.example' 'https://new.example';
                    sub_filter_once off;
                    gzip on;
                    gzip_min_length 1;
                }}
            }}"#,
            p = o.port
        ))
        .file("html/page.html", page)
        .file("html/all/page.html", page)
        .file("html/all/a.txt", "http://old.example\n")
        .file("html/css/a.css", "p{color:RED}\n")
        .file("html/gz/big.html", &big)
        .start();
    let r = request(s.port, "GET /page.html HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "<html><head><meta name=\"x\"></head><body>see https://site.test/a and http://old.example/b</body></html>\n"
    );
    assert_eq!((r.header("Last-Modified"), r.header("ETag"), r.header("Content-Length")), (None, None, None));
    let r = s.get("/all/page.html");
    assert_eq!(
        r.text(),
        "<html><head></head><body>see https://new.example/a and https://new.example/b</body></html>\n"
    );
    // Other types are left alone unless listed.
    assert_eq!(s.get("/all/a.txt").text(), "http://old.example\n");
    let r = s.get("/css/a.css");
    assert_eq!(r.text(), "p{color:blue}\n");
    assert!(r.header("Last-Modified").is_some(), "{}", r.head);
    assert!(r.header("ETag").is_some_and(|e| e.starts_with("W/")), "{}", r.head);
    assert_eq!(s.get("/up/").text(), "<p>https://new.example/x</p>   ");
    // `*` takes a response without Content-Type too.
    let r = s.get("/any/untyped");
    assert_eq!((r.text().as_str(), r.header("Content-Length")), ("https://new.example/u", None), "{}", r.head);
    let r = s.get_with("/gz/big.html", &["Accept-Encoding: gzip"]);
    let want = big.replace("http://old.example", "https://new.example");
    codings::assert_encoded(&r, "gzip", want.as_bytes(), "sub_filter then gzip");
}

#[test]
fn an_empty_pattern_is_refused() {
    let t = builder().http("server { listen 127.0.0.1:{port}; sub_filter '' x; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success() && err.contains("empty search pattern"), "{err}");
}
