//! The charset module (`charset`, `charset_types`, `source_charset`,
//! `override_charset`, `charset_map`): which responses get `; charset=...`
//! in Content-Type, and bodies recoded between charsets with nginx's own
//! maps (conf/koi-utf, conf/koi-win, included by path). With
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
fn recoding_without_a_map_is_refused_at_load_time() {
    let t = builder().http("server { listen 127.0.0.1:{port}; charset utf-8; source_charset koi8-r; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("no \"charset_map\" between the charsets \"koi8-r\" and \"utf-8\""), "{err}");
}

/// "Привет, мир! Ёлка" in three charsets (Python's codecs, not nginx's maps).
const UTF8: &str = "Привет, мир! Ёлка";
const KOI8R: [u8; 17] = [240, 210, 201, 215, 197, 212, 44, 32, 205, 201, 210, 33, 32, 179, 204, 203, 193];
const CP1251: [u8; 17] = [207, 240, 232, 226, 229, 242, 44, 32, 236, 232, 240, 33, 32, 168, 235, 234, 224];

/// nginx's maps as shipped in conf/.
fn maps() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/conf");
    format!("include {dir}/koi-utf; include {dir}/koi-win;")
}

fn repeat(b: &[u8], n: usize) -> Vec<u8> {
    b.iter().copied().cycle().take(b.len() * n).collect()
}

#[test]
fn a_koi8r_file_is_sent_as_utf8_and_windows_1251() {
    // Big enough to be read and recoded in many pieces.
    let n = 20_000;
    let s = builder()
        .http(&format!(
            r#"include mime.types;
            {maps}
            server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                source_charset koi8-r;
                location /utf/ {{ charset utf-8; }}
                location /win/ {{ charset windows-1251; }}
                location /koi/ {{ charset koi8-r; source_charset utf-8; }}
            }}"#,
            maps = maps()
        ))
        .file("html/utf/a.html", repeat(&KOI8R, n))
        .file("html/utf/a.txt", KOI8R)
        .file("html/utf/a.css", KOI8R)
        .file("html/win/a.html", repeat(&KOI8R, n))
        .file("html/koi/a.html", format!("{UTF8} \u{2603}"))
        .start();
    // To UTF-8 the length changes: no Content-Length, no ranges.
    let r = s.get("/utf/a.html");
    assert_eq!((r.status, ct(&r)), (200, Some("text/html; charset=utf-8")));
    assert!(r.body == UTF8.repeat(n).as_bytes(), "{} bytes", r.body.len());
    assert_eq!((r.header("Content-Length"), r.header("Accept-Ranges")), (None, None), "{}", r.head);
    let r = s.get_with("/utf/a.html", &["Range: bytes=0-5"]);
    assert_eq!((r.status, r.body.len()), (200, UTF8.len() * n), "{}", r.head);
    // charset_types: text/plain is listed, text/css is not.
    assert_eq!(s.get("/utf/a.txt").body, UTF8.as_bytes());
    let r = s.get("/utf/a.css");
    assert_eq!((ct(&r), &r.body[..]), (Some("text/css"), &KOI8R[..]));
    // Byte for byte: the length and ranges stay.
    let r = s.get("/win/a.html");
    assert_eq!(ct(&r), Some("text/html; charset=windows-1251"));
    assert!(r.body == repeat(&CP1251, n));
    let len = (KOI8R.len() * n).to_string();
    assert_eq!((r.header("Content-Length"), r.header("Accept-Ranges")), (Some(&len[..]), Some("bytes")));
    let r = s.get_with("/win/a.html", &["Range: bytes=17-22"]);
    assert_eq!((r.status, &r.body[..]), (206, &CP1251[..6]), "{}", r.head);
    assert_eq!(r.header("Content-Range"), Some(&format!("bytes 17-22/{len}")[..]));
    // The other way through the same map: what koi8-r lacks is a
    // character reference.
    let r = s.get("/koi/a.html");
    assert_eq!(ct(&r), Some("text/html; charset=koi8-r"));
    assert_eq!(r.body, [&KOI8R[..], b" &#9731;"].concat());
}

#[test]
fn an_origins_charset_is_recoded_with_override_charset() {
    // The origin's body comes chunked, cut inside characters.
    let utf8 = UTF8.as_bytes();
    let chunked = |b: &[u8]| {
        let mut out =
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for c in b.chunks(3) {
            out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            out.extend_from_slice(c);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    };
    let cut = chunked(utf8);
    let o = Origin::start(move |r| match r.target() {
        "/koi" => Reply::http(200, &["Content-Type: text/html; charset=koi8-r"], KOI8R),
        "/accel" => {
            Reply::http(200, &["Content-Type: text/html; charset=koi8-r", "X-Accel-Charset: windows-1251"], KOI8R)
        }
        "/cut" => Reply::raw(&cut),
        _ => Reply::http(200, &["Content-Type: text/html; charset=koi8-r"], KOI8R),
    });
    let s = builder()
        .http(&format!(
            r#"{maps}
            server {{
                listen 127.0.0.1:{{port}};
                location /over/ {{ charset utf-8; override_charset on; proxy_pass http://127.0.0.1:{p}/; }}
                location /keep/ {{ charset utf-8; proxy_pass http://127.0.0.1:{p}/; }}
                location /to-koi/ {{ charset koi8-r; override_charset on; proxy_pass http://127.0.0.1:{p}/; }}
                location /accel/ {{ proxy_pass http://127.0.0.1:{p}/; }}
            }}"#,
            maps = maps(),
            p = o.port
        ))
        .start();
    let r = s.get("/over/koi");
    assert_eq!((ct(&r), r.text().as_str()), (Some("text/html; charset=utf-8"), UTF8));
    assert_eq!(r.header("Content-Length"), None, "{}", r.head);
    // Without override_charset the origin's charset stays, bytes too.
    let r = s.get("/keep/koi");
    assert_eq!((ct(&r), &r.body[..]), (Some("text/html; charset=koi8-r"), &KOI8R[..]));
    let r = s.get("/to-koi/cut");
    assert_eq!((ct(&r), &r.body[..]), (Some("text/html; charset=koi8-r"), &KOI8R[..]));
    // X-Accel-Charset: recoded to what the origin asks, not passed on.
    let r = s.get("/accel/accel");
    assert_eq!((ct(&r), &r.body[..]), (Some("text/html; charset=windows-1251"), &CP1251[..]));
    assert_eq!(r.header("X-Accel-Charset"), None);
    assert_eq!(r.header("Content-Length"), Some("17"));
}

#[test]
fn a_bad_charset_map_line_is_refused_with_its_file_and_line() {
    let t = builder()
        .http("charset_map koi8-r windows-1251 {\n    C1 E0;\n    ZZ E1;\n}\nserver { listen 127.0.0.1:{port}; }")
        .prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    let conf = std::fs::read_to_string(t.conf_path()).unwrap();
    let line = 1 + conf.lines().position(|l| l.contains("ZZ E1")).unwrap();
    let at = format!("invalid value \"ZZ\" in {}:{line}", t.conf_path().display());
    assert!(err.contains(&at), "{err}");
}

#[test]
fn cached_responses_are_recoded_and_ranged_as_nginx_does() {
    let o = Origin::start(|r| match r.target() {
        "/accel" => Reply::http(
            200,
            &["Content-Type: text/html; charset=koi8-r", "X-Accel-Charset: windows-1251", "Accept-Ranges: bytes"],
            KOI8R,
        ),
        _ => Reply::http(200, &["Content-Type: text/html; charset=koi8-r", "Accept-Ranges: bytes"], KOI8R),
    });
    let s = builder()
        .http(&format!(
            r#"{maps}
            proxy_cache_path {{prefix}}/cache keys_zone=z:1m;
            server {{
                listen 127.0.0.1:{{port}};
                proxy_cache z;
                proxy_cache_valid 200 10m;
                location /utf/ {{ charset utf-8; override_charset on; proxy_pass http://127.0.0.1:{p}/; }}
                location / {{ proxy_pass http://127.0.0.1:{p}/; }}
            }}"#,
            maps = maps(),
            p = o.port
        ))
        .start();
    // Recoded to UTF-8: no length, so a range gets the whole body, on the
    // miss and on the hit.
    for _ in 0..2 {
        let r = s.get_with("/utf/page", &["Range: bytes=0-3"]);
        assert_eq!((r.status, r.text().as_str()), (200, UTF8), "{}", r.head);
        assert_eq!(ct(&r), Some("text/html; charset=utf-8"));
    }
    // The origin's X-Accel-Charset is kept with the entry: a hit is
    // recoded too, and its ranges (byte for byte) are recoded parts.
    let _ = s.get("/accel");
    let r = s.get_with("/accel", &["Range: bytes=0-1, 3-4"]);
    assert_eq!(r.status, 206, "{}", r.head);
    let body = r.body.clone();
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"Content-Type: text/html; charset=windows-1251\r\n"), "{}", String::from_utf8_lossy(&body));
    assert!(has(&CP1251[..2]) && has(&CP1251[3..5]), "{}", String::from_utf8_lossy(&body));
    assert_eq!(o.count(), 2);
}
