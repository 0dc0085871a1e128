//! Response compression: gzip, brotli and zstd on the fly (static files,
//! error pages, proxied bodies; HTTP/1.1 and h2c), and precompressed
//! siblings (`gzip_static`, `brotli_static`, `zstd_static`).
//!
//! Every compressed body is decoded by an independent decoder (Python's
//! `gzip` module, the `brotli` and `zstd` command-line tools) and compared
//! byte for byte with what was compressed.
//!
//! The gzip and gzip_static tests hold for Debian's nginx too
//! (`SLUICE_TEST_NGINX=1`); where sluice chooses differently on purpose (a
//! Range request is answered with the range, unencoded) the test says so.
//! The brotli, zstd and negotiation tests are sluice's alone (Debian's
//! nginx has no zstd, and ngx_brotli needs `load_module`).

mod common;

use std::io::Read;
use std::time::Duration;

use common::codings::*;
use common::origin::{Origin, Reply};
use common::*;

const GZIP: &str = "Accept-Encoding: gzip";

// ---------------------------------------------------------------------------
// gzip on static files (nginx-compatible)

#[test]
fn gzip_static_files_headers_and_exclusions() {
    let page = text(200_000, 1);
    let css = text(5_000, 2);
    let small = b"<p>tiny</p>".to_vec();
    let jpg = text(3_000, 3);
    let s = builder()
        .http(
            r#"include mime.types;
            server {
                listen 127.0.0.1:{port};
                root html;
                gzip on; gzip_vary on;
                gzip_types text/css;
                gzip_min_length 100;
                location /lvl9/ { gzip_comp_level 9; }
                location /off/ { gzip off; }
                location /novary/ { gzip_vary off; }
            }"#,
        )
        .file("html/page.html", &page)
        .file("html/lvl9/page.html", &page)
        .file("html/off/page.html", &page)
        .file("html/novary/page.html", &page)
        .file("html/style.css", &css)
        .file("html/small.html", &small)
        .file("html/photo.jpg", &jpg)
        .start();
    let mut checks = Checks::new();
    checks.run("text/html with Accept-Encoding: gzip", || {
        let r = s.get_with("/page.html", &[GZIP]);
        assert_eq!(r.status, 200);
        assert_encoded(&r, "gzip", &page, "page");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
        let etag = r.must("ETag");
        assert!(etag.starts_with("W/\""), "weak ETag when compressing: {etag}");
        assert!(r.body.len() < page.len() / 2, "{} compressed bytes", r.body.len());
    });
    checks.run("no Accept-Encoding: as is, strong ETag, Vary all the same", || {
        let r = s.get("/page.html");
        assert_plain(&r, &page, "page");
        assert_eq!(r.header("Content-Length"), Some(page.len().to_string().as_str()));
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
        assert!(r.must("ETag").starts_with('"'), "{}", r.head);
        assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    });
    checks.run("gzip_types lists text/css", || {
        assert_encoded(&s.get_with("/style.css", &[GZIP]), "gzip", &css, "css");
    });
    checks.run("a type not listed: untouched, no Vary", || {
        let r = s.get_with("/photo.jpg", &[GZIP]);
        assert_plain(&r, &jpg, "jpg");
        assert_eq!(r.header("Vary"), None, "{}", r.head);
    });
    checks.run("below gzip_min_length: untouched, no Vary", || {
        let r = s.get_with("/small.html", &[GZIP]);
        assert_plain(&r, &small, "small");
        assert_eq!(r.header("Vary"), None, "{}", r.head);
    });
    checks.run("gzip_comp_level 9 compresses at least as well", || {
        let (l1, l9) = (s.get_with("/page.html", &[GZIP]), s.get_with("/lvl9/page.html", &[GZIP]));
        assert_encoded(&l9, "gzip", &page, "level 9");
        assert!(l9.body.len() <= l1.body.len(), "level 9: {} > level 1: {}", l9.body.len(), l1.body.len());
    });
    checks.run("gzip off in a location", || {
        let r = s.get_with("/off/page.html", &[GZIP]);
        assert_plain(&r, &page, "off");
        assert_eq!(r.header("Vary"), None);
    });
    checks.run("gzip_vary off: compressed, no Vary", || {
        let r = s.get_with("/novary/page.html", &[GZIP]);
        assert_encoded(&r, "gzip", &page, "novary");
        assert_eq!(r.header("Vary"), None);
    });
    checks.run("the client refuses or does not name gzip", || {
        for ae in ["Accept-Encoding: gzip;q=0", "Accept-Encoding: deflate", "Accept-Encoding: identity;q=0"] {
            assert_plain(&s.get_with("/page.html", &[ae]), &page, ae);
        }
        for ae in
            ["Accept-Encoding: gzip;q=0.5", "Accept-Encoding: deflate, gzip", "Accept-Encoding: gzip, deflate, br"]
        {
            let r = s.get_with("/page.html", &[ae]);
            assert_encoded(&r, "gzip", &page, ae);
        }
    });
    checks.run("HEAD: the GET's headers, no body", || {
        let r = head_request(s.port, "/page.html", &[GZIP]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        assert_eq!(r.header("Content-Length"), None, "{}", r.head);
        assert!(r.must("ETag").starts_with("W/"), "{}", r.head);
        // Nothing follows the head: the connection closes right after it.
        let mut c = Conn::connect(s.port);
        c.send(format!("HEAD /page.html HTTP/1.1\r\nHost: x\r\n{GZIP}\r\nConnection: close\r\n\r\n"));
        let raw = c.read_to_close();
        assert!(raw.ends_with(b"\r\n\r\n"), "bytes after the HEAD response's head");
    });
    checks.run("If-None-Match with the weak ETag: 304, not encoded", || {
        let etag = s.get_with("/page.html", &[GZIP]).must("ETag").to_string();
        let r = s.get_with("/page.html", &[GZIP, &format!("If-None-Match: {etag}")]);
        assert_eq!(r.status, 304, "{}", r.head);
        assert_eq!(r.header("Content-Encoding"), None, "{}", r.head);
        assert!(r.body.is_empty());
    });
    checks.run("Range", || {
        let r = s.get_with("/page.html", &[GZIP, "Range: bytes=10-19"]);
        if nginx() {
            // nginx compresses the whole file and ignores the range.
            assert_eq!(r.status, 200, "{}", r.head);
            assert_encoded(&r, "gzip", &page, "range under nginx");
        } else {
            // sluice answers the range, unencoded.
            assert_eq!(r.status, 206, "{}", r.head);
            assert_plain(&r, &page[10..20], "range");
            assert_eq!(r.header("Content-Range"), Some(format!("bytes 10-19/{}", page.len()).as_str()));
        }
    });
    checks.run("404 error page is compressed", || {
        let r = s.get_with("/missing.html", &[GZIP]);
        assert_eq!(r.status, 404);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        let page = String::from_utf8(decode("gzip", &r.body)).unwrap();
        assert!(page.contains("404 Not Found"), "{page}");
    });
    checks.run("HTTP/1.0: gzip_http_version 1.1 keeps it plain", || {
        let raw = request_to_close(s.port, format!("GET /page.html HTTP/1.0\r\n{GZIP}\r\n\r\n").as_bytes());
        let head = String::from_utf8_lossy(&raw[..raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap()]).to_string();
        assert!(!head.contains("Content-Encoding"), "{head}");
        assert!(head.contains("Vary: Accept-Encoding"), "{head}");
    });
    checks.run("keep-alive: two compressed responses on one connection", || {
        let mut c = s.connect();
        for _ in 0..2 {
            c.send(format!("GET /style.css HTTP/1.1\r\nHost: x\r\n{GZIP}\r\n\r\n"));
            let r = c.read_response();
            assert_encoded(&r, "gzip", &css, "keep-alive");
        }
    });
    checks.finish();
}

#[test]
fn gzip_request_tests_proxied_disable_http_version() {
    let page = text(20_000, 4);
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root html;
                gzip on;
                gzip_disable "^Old" msie6;
                location /any/ { gzip_proxied any; }
                location /auth/ { gzip_proxied auth; expires 1h; }
                location /expired/ { gzip_proxied expired; expires -1; }
                location /notexpired/ { gzip_proxied expired; expires 1h; }
                location /nocache/ { gzip_proxied no-cache; add_header Cache-Control "private, no-cache"; }
                location /noetag/ { gzip_proxied no_etag; }
                location /noetag-off/ { gzip_proxied no_etag; etag off; }
                location /v10/ { gzip_http_version 1.0; }
            }"#,
        )
        .file("html/p.html", &page)
        .file("html/any/p.html", &page)
        .file("html/auth/p.html", &page)
        .file("html/expired/p.html", &page)
        .file("html/notexpired/p.html", &page)
        .file("html/nocache/p.html", &page)
        .file("html/noetag/p.html", &page)
        .file("html/noetag-off/p.html", &page)
        .file("html/v10/p.html", &page)
        .start();
    let mut checks = Checks::new();
    let gz = |path: &str, extra: &[&str]| -> bool {
        let mut hs = vec![GZIP];
        hs.extend_from_slice(extra);
        let r = s.get_with(path, &hs);
        assert_eq!(r.status, 200, "{path}: {}", r.head);
        match r.header("Content-Encoding") {
            Some(c) => {
                assert!(decode(c, &r.body) == page, "{path}: decoded body differs");
                true
            }
            None => {
                assert!(r.body == page, "{path}: body differs");
                false
            }
        }
    };
    let via = "Via: 1.1 cache.example";
    checks.run("gzip_proxied off (default) refuses requests with Via", || {
        assert!(gz("/p.html", &[]));
        assert!(!gz("/p.html", &[via]));
    });
    checks.run("gzip_proxied any", || assert!(gz("/any/p.html", &[via])));
    checks.run("gzip_proxied auth", || {
        assert!(!gz("/auth/p.html", &[via]));
        assert!(gz("/auth/p.html", &[via, "Authorization: Basic eDp5"]));
    });
    checks.run("gzip_proxied expired", || {
        assert!(gz("/expired/p.html", &[via]), "Expires in the past");
        assert!(!gz("/notexpired/p.html", &[via]), "Expires in the future");
    });
    checks.run("gzip_proxied no-cache", || assert!(gz("/nocache/p.html", &[via])));
    checks.run("gzip_proxied no_etag", || {
        assert!(!gz("/noetag/p.html", &[via]), "has an ETag");
        assert!(gz("/noetag-off/p.html", &[via]), "etag off");
    });
    checks.run("gzip_disable regex and msie6", || {
        assert!(!gz("/p.html", &["User-Agent: OldBrowser/1.0"]));
        assert!(!gz("/p.html", &["User-Agent: oldbrowser/1.0"]), "case-insensitive");
        assert!(gz("/p.html", &["User-Agent: NewBrowser/2.0 (Old)"]));
        assert!(!gz("/p.html", &["User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"]));
        assert!(gz("/p.html", &["User-Agent: Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"]));
    });
    checks.run("gzip_http_version 1.0", || {
        let raw = request_to_close(s.port, format!("GET /v10/p.html HTTP/1.0\r\n{GZIP}\r\n\r\n").as_bytes());
        let end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..end]).to_string();
        assert!(head.contains("Content-Encoding: gzip"), "{head}");
        assert!(!head.contains("Transfer-Encoding"), "no chunked for HTTP/1.0: {head}");
        assert!(decode("gzip", &raw[end + 4..]) == page, "HTTP/1.0 body ends with the connection");
    });
    checks.finish();
}

#[test]
fn gzip_large_file_and_h2c() {
    let big = {
        // Several MB, half text, half incompressible, so the encoder's
        // output comes in many pieces.
        let mut v = text(3 * 1024 * 1024, 5);
        v.extend_from_slice(&pseudo_random(2 * 1024 * 1024, 6));
        v
    };
    let page = text(50_000, 7);
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                root html;
                gzip on; gzip_vary on;
                gzip_types application/octet-stream;
                types { text/html html; application/octet-stream bin; }
            }"#,
        )
        .ports(2)
        .file("html/big.bin", &big)
        .file("html/page.html", &page)
        .start();
    let mut checks = Checks::new();
    checks.run("5 MB over HTTP/1.1", || {
        let r = s.get_with("/big.bin", &[GZIP]);
        assert_encoded(&r, "gzip", &big, "big over HTTP/1.1");
    });
    checks.run("5 MB over h2c", || {
        let (hs, body) = h2c(s.ports[1], "/big.bin", &[GZIP]);
        assert_eq!(h(&hs, "content-encoding").as_deref(), Some("gzip"), "{hs:?}");
        assert_eq!(h(&hs, "content-length"), None, "{hs:?}");
        assert!(decode("gzip", &body) == big, "big over h2c");
    });
    checks.run("h2c: headers as over HTTP/1.1", || {
        let (hs, body) = h2c(s.ports[1], "/page.html", &[GZIP]);
        assert_eq!(h(&hs, "content-encoding").as_deref(), Some("gzip"));
        assert_eq!(h(&hs, "vary").as_deref(), Some("Accept-Encoding"));
        assert!(h(&hs, "etag").unwrap().starts_with("W/"), "{hs:?}");
        assert!(decode("gzip", &body) == page);
        let (hs, body) = h2c(s.ports[1], "/page.html", &[]);
        assert_eq!(h(&hs, "content-encoding"), None);
        assert!(body == page);
    });
    checks.finish();
}

// ---------------------------------------------------------------------------
// gzip on proxied bodies (nginx-compatible)

#[test]
fn gzip_proxied_responses() {
    let page = text(300_000, 8);
    let chunked_body = text(100_000, 9);
    let big = text(6 * 1024 * 1024, 10);
    let (p, cb, bg) = (page.clone(), chunked_body.clone(), big.clone());
    let origin = Origin::start(move |r| match r.target() {
        "/page" => Reply::http(200, &["Content-Type: text/html", "ETag: \"abc\"", "Accept-Ranges: bytes"], &p),
        "/big" => Reply::http(200, &["Content-Type: text/html; charset=utf-8"], &bg),
        "/chunked" => {
            let mut raw = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for piece in cb.chunks(7000) {
                raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                raw.extend_from_slice(piece);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n\r\n");
            Reply::raw(raw)
        }
        "/encoded" => Reply::http(200, &["Content-Type: text/html", "Content-Encoding: gzip"], b"not really gzip"),
        "/plain" => Reply::http(200, &["Content-Type: text/plain"], &p),
        "/notfound" => Reply::http(404, &["Content-Type: text/html"], &p),
        "/created" => Reply::http(201, &["Content-Type: text/html"], &p),
        _ => Reply::http(500, &[], ""),
    });
    let s = builder()
        .http(
            &r#"server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                gzip on; gzip_vary on;
                location / { proxy_pass http://127.0.0.1:ORIGIN; }
                location /unbuffered/ { proxy_pass http://127.0.0.1:ORIGIN/; proxy_buffering off; }
            }"#
            .replace("ORIGIN", &origin.port.to_string()),
        )
        .ports(2)
        .start();
    let mut checks = Checks::new();
    checks.run("origin body with Content-Length", || {
        let r = s.get_with("/page", &[GZIP]);
        assert_encoded(&r, "gzip", &page, "proxied page");
        assert_eq!(r.header("ETag"), Some("W/\"abc\""), "{}", r.head);
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
    });
    checks.run("origin body chunked", || {
        assert_encoded(&s.get_with("/chunked", &[GZIP]), "gzip", &chunked_body, "chunked");
    });
    checks.run("proxy_buffering off", || {
        assert_encoded(&s.get_with("/unbuffered/page", &[GZIP]), "gzip", &page, "unbuffered");
        assert_encoded(&s.get_with("/unbuffered/chunked", &[GZIP]), "gzip", &chunked_body, "unbuffered chunked");
    });
    checks.run("already encoded by the origin: passed as is", || {
        let r = s.get_with("/encoded", &[GZIP]);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        assert_eq!(r.body, b"not really gzip");
    });
    checks.run("a type not listed", || assert_plain(&s.get_with("/plain", &[GZIP]), &page, "text/plain"));
    checks.run("the origin's 404 is compressed, its 201 is not", || {
        let r = s.get_with("/notfound", &[GZIP]);
        assert_eq!(r.status, 404);
        assert_encoded(&r, "gzip", &page, "404");
        let r = s.get_with("/created", &[GZIP]);
        assert_eq!(r.status, 201);
        assert_plain(&r, &page, "201");
    });
    checks.run("6 MB through the proxy over HTTP/1.1 and h2c", || {
        assert_encoded(&s.get_with("/big", &[GZIP]), "gzip", &big, "big HTTP/1.1");
        let (hs, body) = h2c(s.ports[1], "/big", &[GZIP]);
        assert_eq!(h(&hs, "content-encoding").as_deref(), Some("gzip"), "{hs:?}");
        assert!(decode("gzip", &body) == big, "big h2c");
    });
    checks.run("h2c chunked origin", || {
        let (hs, body) = h2c(s.ports[1], "/chunked", &[GZIP]);
        assert_eq!(h(&hs, "content-encoding").as_deref(), Some("gzip"));
        assert!(decode("gzip", &body) == chunked_body);
    });
    checks.finish();
}

/// With `proxy_buffering off`, each piece the origin sends reaches the
/// client decodable before the origin sends the next (a sync flush per
/// piece, as nginx's gzip does for flushed buffers).
#[test]
fn gzip_unbuffered_origin_streams_each_piece() {
    let first = text(3000, 11);
    let second = text(3000, 12);
    let (f, sc) = (first.clone(), second.clone());
    let origin = Origin::start(move |_| {
        let mut head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        head.extend_from_slice(format!("{:x}\r\n", f.len()).as_bytes());
        head.extend_from_slice(&f);
        head.extend_from_slice(b"\r\n");
        let mut tail = format!("{:x}\r\n", sc.len()).into_bytes();
        tail.extend_from_slice(&sc);
        tail.extend_from_slice(b"\r\n0\r\n\r\n");
        Reply::raw(head).then_sleep(Duration::from_secs(2)).then_write(tail)
    });
    let s = builder()
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port}}; gzip on; location / {{ proxy_pass http://127.0.0.1:{}; proxy_buffering off; }} }}",
            origin.port
        ))
        .start();
    let mut c = s.connect();
    c.send(format!("GET /stream HTTP/1.1\r\nHost: x\r\n{GZIP}\r\nConnection: close\r\n\r\n"));
    // Read what arrives within a second: the head and the first piece.
    c.stream.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
    let mut early = Vec::new();
    let mut buf = [0u8; 65536];
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(1200) {
        match c.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => early.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    let end = early.windows(4).position(|w| w == b"\r\n\r\n").expect("head within a second");
    let head = String::from_utf8_lossy(&early[..end]).to_string();
    assert!(head.contains("Content-Encoding: gzip"), "{head}");
    // De-chunk what came and decode it as a partial gzip stream.
    let mut rest = &early[end + 4..];
    let mut gz = Vec::new();
    while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..i]).unwrap(), 16).unwrap();
        if rest.len() < i + 2 + size {
            break;
        }
        gz.extend_from_slice(&rest[i + 2..i + 2 + size]);
        rest = &rest[i + 2 + size + 2.min(rest.len() - i - 2 - size)..];
    }
    let partial = pipe(
        "python3",
        &[
            "-c",
            "import zlib,sys; d=zlib.decompressobj(16+15); sys.stdout.buffer.write(d.decompress(sys.stdin.buffer.read()))",
        ],
        &gz,
    );
    assert!(partial == first, "decodable before the origin's second piece: {} of {} bytes", partial.len(), first.len());
}

// ---------------------------------------------------------------------------
// gzip_static (nginx-compatible)

#[test]
fn gzip_static_serves_precompressed_siblings() {
    let css = text(40_000, 13);
    let css_gz = encode("gzip", &css);
    let js = text(10_000, 14);
    let js_gz = encode("gzip", &js);
    let s = builder()
        .http(
            r#"include mime.types;
            server {
                listen 127.0.0.1:{port};
                root html;
                gzip_static on; gzip_vary on;
                location /always/ { gzip_static always; }
                location /novary/ { gzip_vary off; }
                location /off/ { gzip_static off; }
            }"#,
        )
        .file("html/a.css", &css)
        .file("html/a.css.gz", &css_gz)
        .file("html/only.js.gz", &js_gz)
        .file("html/always/a.css", &css)
        .file("html/always/a.css.gz", &css_gz)
        .file("html/novary/a.css", &css)
        .file("html/novary/a.css.gz", &css_gz)
        .file("html/off/a.css", &css)
        .file("html/off/a.css.gz", &css_gz)
        .file("html/plain.css", &css)
        .start();
    let mut checks = Checks::new();
    checks.run("the .gz file as it is on disk", || {
        let r = s.get_with("/a.css", &[GZIP]);
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        assert_eq!(r.header("Content-Type"), Some("text/css"));
        assert_eq!(r.header("Content-Length"), Some(css_gz.len().to_string().as_str()), "{}", r.head);
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
        assert_eq!(r.header("Accept-Ranges"), None, "{}", r.head);
        assert!(r.must("ETag").starts_with('"'), "the sibling's own strong ETag: {}", r.head);
        assert!(r.body == css_gz, "the sibling's bytes");
        assert!(decode("gzip", &r.body) == css);
    });
    checks.run("no Accept-Encoding: the original, with Vary", || {
        let r = s.get("/a.css");
        assert_plain(&r, &css, "original");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
    });
    checks.run("no sibling: the original, no Vary", || {
        let r = s.get_with("/plain.css", &[GZIP]);
        assert_plain(&r, &css, "plain");
        assert_eq!(r.header("Vary"), None, "{}", r.head);
    });
    checks.run("a sibling without an original", || {
        let r = s.get_with("/only.js", &[GZIP]);
        assert_eq!(r.status, 200, "{}", r.head);
        assert!(r.body == js_gz);
        assert_eq!(s.get("/only.js").status, 404);
    });
    checks.run("gzip_static always", || {
        let r = s.get("/always/a.css");
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        assert!(r.body == css_gz);
        assert_eq!(r.header("Vary"), None, "{}", r.head);
    });
    checks.run("gzip_vary off", || {
        let r = s.get_with("/novary/a.css", &[GZIP]);
        assert!(r.body == css_gz);
        assert_eq!(r.header("Vary"), None);
    });
    checks.run("gzip_static off", || assert_plain(&s.get_with("/off/a.css", &[GZIP]), &css, "off"));
    checks.run("HEAD", || {
        let r = head_request(s.port, "/a.css", &[GZIP]);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"));
        assert_eq!(r.header("Content-Length"), Some(css_gz.len().to_string().as_str()));
    });
    checks.run("conditional requests against the sibling", || {
        let r = s.get_with("/a.css", &[GZIP]);
        let (etag, lm) = (r.must("ETag").to_string(), r.must("Last-Modified").to_string());
        let r = s.get_with("/a.css", &[GZIP, &format!("If-None-Match: {etag}")]);
        assert_eq!(r.status, 304, "{}", r.head);
        let r = s.get_with("/a.css", &[GZIP, &format!("If-Modified-Since: {lm}")]);
        assert_eq!(r.status, 304, "{}", r.head);
    });
    checks.run("q=0 refuses the sibling", || {
        assert_plain(&s.get_with("/a.css", &["Accept-Encoding: gzip;q=0"]), &css, "q=0");
    });
    checks.finish();
}

// ---------------------------------------------------------------------------
// brotli, zstd and negotiation (sluice's)

#[test]
fn brotli_and_zstd_on_the_fly() {
    if nginx() {
        return;
    }
    let page = text(400_000, 15);
    let small = text(100, 16);
    let big = text(5 * 1024 * 1024, 17);
    let pg = page.clone();
    let origin = Origin::start(move |r| match r.target() {
        "/page" => Reply::http(200, &["Content-Type: text/html"], &pg),
        _ => Reply::http(404, &[], ""),
    });
    let s = builder()
        .http(
            &r#"server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                root html;
                gzip on; brotli on; zstd on; gzip_vary on;
                brotli_min_length 200;
                zstd_types text/plain;
                location /proxy/ { proxy_pass http://127.0.0.1:ORIGIN/; }
                location /prefer/ { compress_preference br gzip; }
                location /levels/ { brotli_comp_level 11; brotli_window 16m; zstd_comp_level 19; gzip_comp_level 9; }
            }"#
            .replace("ORIGIN", &origin.port.to_string()),
        )
        .ports(2)
        .file("html/page.html", &page)
        .file("html/small.html", &small)
        .file("html/big.html", &big)
        .file("html/prefer/page.html", &page)
        .file("html/levels/page.html", &page)
        .file("html/notes.txt", &page)
        .start();
    let mut checks = Checks::new();
    let coding = |path: &str, ae: &str| -> Option<String> {
        let r = s.get_with(path, &[&format!("Accept-Encoding: {ae}")]);
        assert_eq!(r.status, 200, "{}", r.head);
        let c = r.header("Content-Encoding").map(str::to_string);
        let want = std::fs::read(s.path(&format!("html{path}"))).unwrap();
        match &c {
            Some(c) => assert_encoded(&r, c, &want, &format!("{path} {ae}")),
            None => assert_plain(&r, &want, ae),
        }
        c
    };
    checks.run("each coding alone", || {
        for c in ["gzip", "br", "zstd"] {
            assert_eq!(coding("/page.html", c).as_deref(), Some(c));
        }
    });
    checks.run("equal weights: zstd, br, gzip by default", || {
        assert_eq!(coding("/page.html", "gzip, deflate, br, zstd").as_deref(), Some("zstd"));
        assert_eq!(coding("/page.html", "gzip, br").as_deref(), Some("br"));
        assert_eq!(coding("/page.html", "*").as_deref(), Some("zstd"));
    });
    checks.run("compress_preference br gzip", || {
        assert_eq!(coding("/prefer/page.html", "gzip, br, zstd").as_deref(), Some("br"));
        assert_eq!(coding("/prefer/page.html", "gzip, zstd").as_deref(), Some("gzip"));
    });
    checks.run("q-values win over preference", || {
        assert_eq!(coding("/page.html", "zstd;q=0.5, br;q=0.9, gzip;q=0.1").as_deref(), Some("br"));
        assert_eq!(coding("/page.html", "zstd;q=0, br;q=0, *").as_deref(), Some("gzip"));
        assert_eq!(coding("/page.html", "*;q=0"), None);
        assert_eq!(coding("/page.html", "br;q=0.4, identity;q=0.8"), None, "identity preferred");
        assert_eq!(coding("/page.html", "br, identity;q=0").as_deref(), Some("br"));
        assert_eq!(coding("/page.html", "x-gzip").as_deref(), Some("gzip"));
    });
    checks.run("per-coding min_length and types", || {
        // 100 bytes: gzip and zstd (min 20) qualify, brotli (min 200) not.
        assert_eq!(coding("/small.html", "br, gzip").as_deref(), Some("gzip"));
        assert_eq!(coding("/small.html", "br"), None);
        // text/plain is in zstd_types only.
        assert_eq!(coding("/notes.txt", "gzip, br, zstd").as_deref(), Some("zstd"));
        assert_eq!(coding("/notes.txt", "gzip, br"), None);
    });
    checks.run("highest levels and a 16m brotli window", || {
        for c in ["gzip", "br", "zstd"] {
            assert_eq!(coding("/levels/page.html", c).as_deref(), Some(c));
        }
    });
    checks.run("5 MB in each coding over HTTP/1.1 and h2c", || {
        for c in ["br", "zstd"] {
            let r = s.get_with("/big.html", &[&format!("Accept-Encoding: {c}")]);
            assert_encoded(&r, c, &big, c);
            let (hs, body) = h2c(s.ports[1], "/big.html", &[&format!("Accept-Encoding: {c}")]);
            assert_eq!(h(&hs, "content-encoding").as_deref(), Some(c));
            assert!(decode(c, &body) == big, "{c} over h2c");
        }
    });
    checks.run("proxied body in each coding, HTTP/1.1 and h2c", || {
        for c in ["gzip", "br", "zstd"] {
            let r = s.get_with("/proxy/page", &[&format!("Accept-Encoding: {c}")]);
            assert_encoded(&r, c, &page, c);
            let (hs, body) = h2c(s.ports[1], "/proxy/page", &[&format!("Accept-Encoding: {c}")]);
            assert_eq!(h(&hs, "content-encoding").as_deref(), Some(c));
            assert!(decode(c, &body) == page, "{c} proxied over h2c");
        }
    });
    checks.finish();
}

#[test]
fn brotli_and_zstd_static() {
    if nginx() {
        return;
    }
    let css = text(30_000, 18);
    let (gz, br, zst) = (encode("gzip", &css), encode("br", &css), encode("zstd", &css));
    let s = builder()
        .http(
            r#"include mime.types;
            server {
                listen 127.0.0.1:{port};
                root html;
                gzip_static on; brotli_static on; zstd_static on; gzip_vary on;
                brotli on;
                location /gzonly/ { brotli_static off; zstd_static off; }
                location /always/ { gzip_static off; zstd_static off; brotli_static always; }
            }"#,
        )
        .file("html/a.css", &css)
        .file("html/a.css.gz", &gz)
        .file("html/a.css.br", &br)
        .file("html/a.css.zst", &zst)
        .file("html/b.css", &css)
        .file("html/b.css.gz", &gz)
        .file("html/gzonly/a.css", &css)
        .file("html/gzonly/a.css.gz", &gz)
        .file("html/gzonly/a.css.br", &br)
        .file("html/always/a.css.br", &br)
        .start();
    let mut checks = Checks::new();
    let get = |path: &str, ae: &str| s.get_with(path, &[&format!("Accept-Encoding: {ae}")]);
    checks.run("each sibling by the client's choice", || {
        for (ae, bytes) in [("gzip", &gz), ("br", &br), ("zstd", &zst)] {
            let r = get("/a.css", ae);
            assert_eq!(r.header("Content-Encoding"), Some(ae), "{}", r.head);
            assert!(&r.body == bytes, "{ae}: the sibling's bytes");
            assert_eq!(r.header("Content-Length"), Some(bytes.len().to_string().as_str()));
            assert!(decode(ae, &r.body) == css);
        }
    });
    checks.run("ties by preference, q-values first", || {
        assert_eq!(get("/a.css", "gzip, br, zstd").header("Content-Encoding"), Some("zstd"));
        assert_eq!(get("/a.css", "gzip, br;q=0.9, zstd;q=0.5").header("Content-Encoding"), Some("gzip"));
    });
    checks.run("the best sibling that exists", || {
        let r = get("/b.css", "br, zstd, gzip;q=0.1");
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        assert!(r.body == gz);
    });
    checks.run("only gzip_static here", || {
        let r = get("/gzonly/a.css", "br, gzip");
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
    });
    checks.run("brotli_static always", || {
        let r = s.get("/always/a.css");
        assert_eq!(r.header("Content-Encoding"), Some("br"), "{}", r.head);
        assert!(r.body == br);
    });
    checks.run("neither accepted: original, Vary", || {
        let r = get("/a.css", "deflate");
        assert_plain(&r, &css, "deflate");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    });
    checks.finish();
}

// ---------------------------------------------------------------------------
// brotli as ngx_brotli does it (also checked against Debian's nginx with
// libnginx-mod-http-brotli-filter and -static, loaded with load_module)

const BROTLI_MODULES: [&str; 2] = [
    "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so",
    "/usr/lib/nginx/modules/ngx_http_brotli_static_module.so",
];

#[test]
fn brotli_as_ngx_brotli() {
    let mut b = builder();
    if nginx() {
        if !BROTLI_MODULES.iter().all(|m| std::path::Path::new(m).exists()) {
            eprintln!("skipped: Debian's ngx_brotli modules are not installed");
            return;
        }
        b = b.main(&BROTLI_MODULES.iter().map(|m| format!("load_module {m};\n")).collect::<String>());
    }
    let page = text(100_000, 19);
    let css = text(20_000, 20);
    let css_br = encode("br", &css);
    let s = b
        .http(
            r#"include mime.types;
            server {
                listen 127.0.0.1:{port};
                root html;
                gzip on; brotli on; gzip_vary on;
                brotli_types text/css;
                brotli_comp_level 4;
                location /static/ { brotli_static on; }
                location /small/ { brotli_min_length 200000; }
            }"#,
        )
        .file("html/page.html", &page)
        .file("html/small/page.html", &page)
        .file("html/style.css", &css)
        .file("html/static/a.css", &css)
        .file("html/static/a.css.br", &css_br)
        .start();
    let mut checks = Checks::new();
    checks.run("br on the fly, preferred over gzip", || {
        for ae in ["Accept-Encoding: br", "Accept-Encoding: gzip, deflate, br"] {
            let r = s.get_with("/page.html", &[ae]);
            assert_encoded(&r, "br", &page, ae);
            assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
            assert!(r.must("ETag").starts_with("W/"), "{}", r.head);
        }
        assert_encoded(&s.get_with("/style.css", &["Accept-Encoding: br"]), "br", &css, "css");
    });
    checks.run("br refused: gzip", || {
        assert_encoded(&s.get_with("/page.html", &["Accept-Encoding: gzip, br;q=0"]), "gzip", &page, "br;q=0");
    });
    checks.run("brotli_min_length", || {
        assert_encoded(&s.get_with("/small/page.html", &["Accept-Encoding: gzip, br"]), "gzip", &page, "small");
    });
    checks.run("HEAD", || {
        let r = head_request(s.port, "/page.html", &["Accept-Encoding: br"]);
        assert_eq!(r.header("Content-Encoding"), Some("br"), "{}", r.head);
        assert_eq!(r.header("Content-Length"), None, "{}", r.head);
    });
    checks.run("brotli_static on", || {
        let r = s.get_with("/static/a.css", &["Accept-Encoding: br"]);
        assert_eq!(r.header("Content-Encoding"), Some("br"), "{}", r.head);
        assert_eq!(r.header("Content-Length"), Some(css_br.len().to_string().as_str()));
        assert!(r.body == css_br);
        let r = s.get("/static/a.css");
        assert_plain(&r, &css, "no Accept-Encoding");
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"));
    });
    checks.finish();
}
