//! The charset filter (`charset`, `charset_types`, `source_charset`):
//! which responses get `; charset=...` in Content-Type. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::origin::*;
use common::*;

fn ct(r: &Response) -> Option<&str> {
    r.header("Content-Type")
}

#[test]
fn listed_types_get_the_charset() {
    let o = Origin::start(|r| match r.target() {
        "/own" => Reply::http(200, &["Content-Type: text/html; charset=iso-8859-1"], "x"),
        "/gz" => Reply::http(200, &["Content-Type: text/html", "Content-Encoding: gzip"], "x"),
        "/json" => Reply::http(200, &["Content-Type: application/json"], "{}"),
        _ => Reply::http(200, &["Content-Type: text/html"], "x"),
    });
    let s = builder()
        .http(&format!(
            r#"include mime.types;
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                charset utf-8;
                location /css/ {{ charset_types text/css; }}
                location /off/ {{ charset off; }}
                location /up/ {{ proxy_pass http://127.0.0.1:{p}/; }}
                location /upall/ {{ charset_types *; proxy_pass http://127.0.0.1:{p}/; }}
                location /same/ {{ source_charset UTF-8; }}
                location /static/ {{ gzip_static on; }}
            }}"#,
            p = o.port
        ))
        .file("html/a.html", "<p>é</p>\n")
        .file("html/a.txt", "é\n")
        .file("html/a.css", "p{}\n")
        .file("html/css/a.css", "p{}\n")
        .file("html/css/a.html", "<p></p>\n")
        .file("html/off/a.html", "<p></p>\n")
        .file("html/same/a.html", "<p></p>\n")
        .file("html/a.png", "png")
        .file("html/static/a.html", "<p></p>\n")
        .file("html/static/a.html.gz", "gz")
        .start();
    assert_eq!(ct(&s.get("/a.html")), Some("text/html; charset=utf-8"));
    assert_eq!(ct(&s.get("/a.txt")), Some("text/plain; charset=utf-8"));
    assert_eq!(ct(&s.get("/a.css")), Some("text/css"));
    assert_eq!(ct(&s.get("/a.png")), Some("image/png"));
    // charset_types adds to text/html.
    assert_eq!(ct(&s.get("/css/a.css")), Some("text/css; charset=utf-8"));
    assert_eq!(ct(&s.get("/css/a.html")), Some("text/html; charset=utf-8"));
    assert_eq!(ct(&s.get("/off/a.html")), Some("text/html"));
    assert_eq!(ct(&s.get("/same/a.html")), Some("text/html; charset=utf-8"));
    let r = s.get_with("/static/a.html", &["Accept-Encoding: gzip"]);
    assert_eq!((r.header("Content-Encoding"), ct(&r)), (Some("gzip"), Some("text/html; charset=utf-8")));
    // nginx's own error pages are text/html.
    let r = s.get("/missing");
    assert_eq!((r.status, ct(&r)), (404, Some("text/html; charset=utf-8")));
    // Proxied: an origin's own charset stays, an encoded body gets it too,
    // other types as listed.
    assert_eq!(ct(&s.get("/up/page")), Some("text/html; charset=utf-8"));
    assert_eq!(ct(&s.get("/up/own")), Some("text/html; charset=iso-8859-1"));
    assert_eq!(ct(&s.get("/up/gz")), Some("text/html; charset=utf-8"));
    assert_eq!(ct(&s.get("/up/json")), Some("application/json"));
    assert_eq!(ct(&s.get("/upall/json")), Some("application/json; charset=utf-8"));
}

#[test]
fn recoding_is_refused_at_load_time() {
    let t = builder().http("server { listen 127.0.0.1:{port}; charset utf-8; source_charset koi8-r; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("no \"charset_map\" between the charsets \"koi8-r\" and \"utf-8\""), "{err}");
}
