//! `gunzip on`: gzip responses (from an origin through `proxy_pass`, and
//! `gzip_static always` files) decompressed for clients that do not take
//! gzip, passed as they are to those that do, with `Vary`. With SLUICE_TEST_NGINX=1 the
//! same tests run against Debian's nginx.
//! (sub_filter after gunzip is not covered: see docs/configuration.md.)

mod common;

use std::io::Write;

use common::*;

fn gz(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn plain() -> Vec<u8> {
    (0..2000).map(|i| format!("X{i:04}XXXXX")).collect::<String>().into_bytes()
}

fn server() -> TestServer {
    let p = plain();
    let mut two = gz(&p);
    two.extend(gz(b"second member"));
    builder()
        .ports(2)
        .file("html/t1.gz", gz(&p))
        .file("html/t2.gz", two)
        .file("html/t3", "not compressed")
        .file("html/empty.gz", "")
        .file("html/s/page.html.gz", gz(b"<p>hello world</p>"))
        .http(
            "server {
                listen 127.0.0.1:{port0};
                location / {
                    gunzip on;
                    gzip_vary on;
                    proxy_pass http://127.0.0.1:{port1}/;
                    proxy_set_header Accept-Encoding gzip;
                }
                location /s/ {
                    root html;
                    gzip_static always;
                    gunzip on;
                }
            }
            server {
                listen 127.0.0.1:{port1};
                root html;
                default_type text/plain;
                gzip_static on;
                gzip_http_version 1.0;
            }",
        )
        .start()
}

#[test]
fn gzip_responses_are_decompressed_for_clients_without_gzip() {
    let s = server();
    let p = plain();
    let mut checks = Checks::new();
    checks.run("decompressed, no Content-Encoding, Vary", || {
        let r = s.get("/t1");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Encoding"), None, "{}", r.head);
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
        assert!(r.body == p, "{} bytes", r.body.len());
    });
    checks.run("passed compressed to a client taking gzip", || {
        let r = s.get_with("/t1", &["Accept-Encoding: gzip"]);
        assert_eq!(r.header("Content-Encoding"), Some("gzip"), "{}", r.head);
        assert!(r.body == gz(&p) || flate2_decode(&r.body) == p);
    });
    checks.run("several gzip members", || {
        let mut want = p.clone();
        want.extend_from_slice(b"second member");
        assert!(s.get("/t2").body == want);
    });
    checks.run("HEAD: no Content-Encoding, Vary", || {
        let r = request(s.port, "HEAD /t1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(r.header("Content-Encoding"), None, "{}", r.head);
        assert_eq!(r.header("Vary"), Some("Accept-Encoding"), "{}", r.head);
    });
    checks.run("not gzip: untouched, no Vary", || {
        let r = s.get("/t3");
        assert_eq!(r.text(), "not compressed");
        assert_eq!(r.header("Vary"), None, "{}", r.head);
    });
    // nginx 1.22 closes the connection here; 1.23.2 and later answer 200
    // (nginx-tests gunzip.t "gunzip empty").
    if prog() != "nginx" {
        checks.run("an empty gzip body", || assert_eq!(s.get("/empty").status, 200));
    }
    checks.run("gzip_static always: the file decompressed", || {
        let r = s.get("/s/page.html");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Encoding"), None, "{}", r.head);
        assert_eq!(r.text(), "<p>hello world</p>");
    });
    checks.finish();
}

fn flate2_decode(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(b).read_to_end(&mut out).unwrap();
    out
}

#[test]
fn bad_gunzip_directives_are_refused() {
    assert_refused("gunzip maybe;", "invalid value \"maybe\"");
    // nginx: `"gunzip_buffers" directive invalid value`; sluice names the value.
    assert_refused("gunzip_buffers 0 4k;", "invalid value");
}
