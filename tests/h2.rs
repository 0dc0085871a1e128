//! HTTP/2: ALPN on `listen ... ssl http2` (and its absence on `listen ...
//! ssl`), cleartext prior knowledge on `listen ... http2`, the same answers
//! as HTTP/1.1 for static files, empty_gif, return, redirects and error
//! pages, ranges, a large file, load with h2load, and the TLS/HTTP/2
//! variables in the access log. Protocol conformance is tests/h2spec.rs.
//!
//! Clients: curl (`--http2`, `--http2-prior-knowledge`), `openssl s_client
//! -alpn`, h2load. Expected answers were checked against nginx 1.22.1
//! (`SLUICE_TEST_NGINX=1`).

mod common;

use common::tls::*;
use common::*;

/// One server on four ports: TLS with h2 (port0), TLS without h2 (port1),
/// h2c prior knowledge (port2) and plain HTTP/1.1 (port3).
const SITE: &str = r#"
    include mime.types;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:{port0} ssl http2;
        listen 127.0.0.1:{port1} ssl;
        listen 127.0.0.1:{port2} http2;
        listen 127.0.0.1:{port3};
        server_name a.test;
        ssl_certificate tls/a.test.ecdsa.crt;
        ssl_certificate_key tls/a.test.ecdsa.key;
        root html;
        location = /empty.gif { empty_gif; }
        location = /text { return 200 "text\n"; }
        location = /moved { return 301 https://example.com/new; }
        location /ep/ { error_page 404 /custom404.html; }
    }
"#;

struct Site {
    s: TestServer,
    small: Vec<u8>,
    big: Vec<u8>,
}

fn site() -> Site {
    let small = pseudo_random(100 * 1024, 7);
    let big = pseudo_random(10 * 1024 * 1024, 8);
    let s = builder()
        .tls_files()
        .ports(4)
        .http(SITE)
        .file("html/index.html", "index\n")
        .file("html/small.bin", &small)
        .file("html/big.bin", &big)
        .file("html/custom404.html", "custom 404\n")
        .file("html/dir/index.html", "dir index\n")
        .start();
    Site { s, small, big }
}

impl Site {
    /// h2 over TLS.
    fn h2(&self, path: &str, extra: &[&str]) -> Fetch {
        let mut a = vec!["--http2"];
        a.extend(extra);
        fetch(&self.s, &format!("https://a.test:{}{path}", self.s.ports[0]), &a)
    }
    /// h2c prior knowledge.
    fn h2c(&self, path: &str, extra: &[&str]) -> Fetch {
        let mut a = vec!["--http2-prior-knowledge"];
        a.extend(extra);
        fetch(&self.s, &format!("http://127.0.0.1:{}{path}", self.s.ports[2]), &a)
    }
    /// HTTP/1.1 over TLS on the h2 port (the reference answers).
    fn h1(&self, path: &str, extra: &[&str]) -> Fetch {
        let mut a = vec!["--http1.1"];
        a.extend(extra);
        fetch(&self.s, &format!("https://a.test:{}{path}", self.s.ports[0]), &a)
    }
}

fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!("{what}: {} bytes received, {} expected, first difference at byte {at}", got.len(), want.len());
    }
}

// ---------------------------------------------------------------------------
// protocol selection

#[test]
fn alpn_offers_h2_only_on_listen_ssl_http2() {
    let site = site();
    let s = &site.s;
    let (h2port, h1port) = (s.ports[0], s.ports[1]);
    let mut checks = Checks::new();
    checks.run("curl --http2 on ssl http2", || {
        let f = site.h2("/text", &[]);
        assert_eq!((f.status, f.version.as_str(), f.verify, f.text().as_str()), (200, "2", 0, "text\n"));
        assert_eq!(f.status_line, "HTTP/2 200");
    });
    checks.run("curl --http1.1 on ssl http2", || {
        let f = site.h1("/text", &[]);
        assert_eq!((f.status, f.version.as_str(), f.text().as_str()), (200, "1.1", "text\n"));
    });
    checks.run("curl --http2 on ssl without http2", || {
        let f = fetch(s, &format!("https://a.test:{h1port}/text"), &["--http2"]);
        assert_eq!((f.status, f.version.as_str(), f.text().as_str()), (200, "1.1", "text\n"));
    });
    let req = get_close("a.test", "/text");
    checks.run("s_client -alpn h2,http/1.1 on ssl http2", || {
        let r = s_client(s, h2port, &["-servername", "a.test", "-alpn", "h2,http/1.1"], "");
        assert_eq!(r.alpn(), Some("h2"), "{}", r.out);
    });
    checks.run("s_client -alpn http/1.1 on ssl http2", || {
        let r = s_client(s, h2port, &["-servername", "a.test", "-alpn", "http/1.1"], &req);
        assert_eq!(r.alpn(), Some("http/1.1"), "{}", r.out);
        assert!(r.contains("HTTP/1.1 200 OK"), "{}", r.out);
    });
    checks.run("no ALPN at all on ssl http2: HTTP/1.1", || {
        let r = s_client(s, h2port, &["-servername", "a.test"], &req);
        assert!(r.contains("No ALPN negotiated"), "{}", r.out);
        assert!(r.contains("HTTP/1.1 200 OK") && r.contains("\r\n\r\ntext\n"), "{}", r.out);
    });
    checks.run("s_client -alpn h2 on ssl without http2", || {
        let r = s_client(s, h1port, &["-servername", "a.test", "-alpn", "h2,http/1.1"], &req);
        assert_eq!(r.alpn(), Some("http/1.1"), "{}", r.out);
        assert!(r.contains("HTTP/1.1 200 OK"), "{}", r.out);
    });
    checks.run("h2c prior knowledge on listen http2", || {
        let f = site.h2c("/text", &[]);
        assert_eq!((f.status, f.version.as_str(), f.text().as_str()), (200, "2", "text\n"));
    });
    checks.run("plain HTTP/1.1 port", || {
        let f = fetch(s, &format!("http://127.0.0.1:{}/text", s.ports[3]), &[]);
        assert_eq!((f.status, f.version.as_str(), f.text().as_str()), (200, "1.1", "text\n"));
    });
    checks.finish();
}

// ---------------------------------------------------------------------------
// the same answers over h2 and h2c as over HTTP/1.1

#[test]
fn h2_answers_match_http11() {
    let site = site();
    let host_port = format!("a.test:{}", site.s.ports[0]);
    let mut checks = Checks::new();
    // (path, expected status, expected body if fixed)
    let cases: [(&str, u16, Option<&[u8]>); 9] = [
        ("/small.bin", 200, Some(&site.small)),
        ("/index.html", 200, Some(b"index\n")),
        ("/", 200, Some(b"index\n")),
        ("/empty.gif", 200, Some(&EMPTY_GIF)),
        ("/text", 200, Some(b"text\n")),
        ("/moved", 301, None),
        ("/ep/missing", 404, Some(b"custom 404\n")),
        ("/missing", 404, None),
        ("/dir", 301, None),
    ];
    for (path, status, body) in cases {
        checks.run(path, || {
            let h1 = site.h1(path, &[]);
            assert_eq!(h1.status, status, "HTTP/1.1 status");
            if let Some(b) = body {
                assert_same_bytes(&h1.body, b, "HTTP/1.1 body");
            }
            for (proto, f) in [("h2", site.h2(path, &[])), ("h2c", site.h2c(path, &[]))] {
                assert_eq!(f.version, "2", "{proto}");
                assert_eq!(f.status, status, "{proto} status");
                assert_same_bytes(&f.body, &h1.body, &format!("{proto} body vs HTTP/1.1"));
                for name in ["Content-Type", "Content-Length", "Last-Modified", "ETag", "Accept-Ranges"] {
                    assert_eq!(f.header(name), h1.header(name), "{proto} {name}");
                }
                if path != "/dir" {
                    assert_eq!(f.header("Location"), h1.header("Location"), "{proto} Location");
                }
                // HTTP/2 has no connection-specific headers.
                for name in ["Connection", "Keep-Alive", "Transfer-Encoding"] {
                    assert_eq!(f.header(name), None, "{proto} sent {name}");
                }
            }
        });
    }
    checks.run("empty_gif headers", || {
        let f = site.h2("/empty.gif", &[]);
        assert_eq!((f.must("Content-Type"), f.must("Content-Length")), ("image/gif", "43"));
    });
    checks.run("return 301 Location", || {
        assert_eq!(site.h2("/moved", &[]).must("Location"), "https://example.com/new");
    });
    checks.run("directory redirect", || {
        // Built from :authority (h2) or Host, with the connection's scheme.
        assert_eq!(site.h2("/dir", &[]).must("Location"), format!("https://{host_port}/dir/"));
        assert_eq!(site.h2c("/dir", &[]).must("Location"), format!("http://127.0.0.1:{}/dir/", site.s.ports[2]));
    });
    checks.run("HEAD over h2", || {
        let f = site.h2("/small.bin", &["-I"]);
        assert_eq!((f.status, f.must("Content-Length")), (200, "102400"));
        // with -I curl writes the head to the output: no body bytes follow it
        assert!(f.text().starts_with("HTTP/2 200") && f.text().ends_with("\r\n\r\n"), "{:?}", f.text());
    });
    checks.finish();
}

#[test]
fn h2_ranges() {
    let site = site();
    let small = &site.small;
    let mut checks = Checks::new();
    for (proto, get) in [("h2", Site::h2 as fn(&Site, &str, &[&str]) -> Fetch), ("h2c", Site::h2c)] {
        checks.run(&format!("{proto} single range"), || {
            let f = get(&site, "/small.bin", &["-r", "100-199"]);
            assert_eq!(
                (f.status, f.must("Content-Range"), f.must("Content-Length")),
                (206, "bytes 100-199/102400", "100")
            );
            assert_same_bytes(&f.body, &small[100..200], "100-199");
        });
        checks.run(&format!("{proto} suffix range"), || {
            let f = get(&site, "/small.bin", &["-r", "-500"]);
            assert_eq!((f.status, f.must("Content-Range")), (206, "bytes 101900-102399/102400"));
            assert_same_bytes(&f.body, &small[101900..], "last 500");
        });
        checks.run(&format!("{proto} range in the 10 MB file"), || {
            let f = get(&site, "/big.bin", &["-r", "5000000-5999999"]);
            assert_eq!(f.status, 206);
            assert_same_bytes(&f.body, &site.big[5000000..6000000], "5000000-5999999");
        });
        checks.run(&format!("{proto} unsatisfiable"), || {
            let f = get(&site, "/small.bin", &["-r", "200000-"]);
            assert_eq!((f.status, f.must("Content-Range")), (416, "bytes */102400"));
        });
        checks.run(&format!("{proto} two ranges"), || {
            let f = get(&site, "/small.bin", &["-r", "0-9,20-29"]);
            assert_eq!(f.status, 206);
            let ct = f.must("Content-Type");
            assert!(ct.starts_with("multipart/byteranges; boundary="), "{ct}");
            let boundary = &ct["multipart/byteranges; boundary=".len()..];
            let mut want = Vec::new();
            for (a, b) in [(0usize, 9usize), (20, 29)] {
                let part = format!(
                    "\r\n--{boundary}\r\nContent-Type: application/octet-stream\r\n\
                     Content-Range: bytes {a}-{b}/102400\r\n\r\n"
                );
                want.extend(part.bytes());
                want.extend(&small[a..=b]);
            }
            want.extend(format!("\r\n--{boundary}--\r\n").bytes());
            assert_same_bytes(&f.body, &want, "multipart body");
            assert_eq!(f.must("Content-Length"), want.len().to_string());
        });
    }
    checks.finish();
}

#[test]
fn h2_large_file_intact() {
    let site = site();
    let f = site.h2("/big.bin", &[]);
    assert_eq!((f.status, f.version.as_str()), (200, "2"));
    assert_eq!(f.must("Content-Length"), "10485760");
    assert_same_bytes(&f.body, &site.big, "10 MB over h2");
    let f = site.h2c("/big.bin", &[]);
    assert_eq!((f.status, f.version.as_str()), (200, "2"));
    assert_same_bytes(&f.body, &site.big, "10 MB over h2c");
}

#[test]
fn h2_several_requests_share_one_connection() {
    let site = site();
    let p = site.s.ports[0];
    let urls: Vec<String> =
        ["/text", "/index.html", "/empty.gif"].iter().map(|u| format!("https://a.test:{p}{u}")).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let run = curl_fetch(&site.s, &urls, &["--http2"]);
    assert!(run.ok, "{}", run.stderr);
    let got: Vec<(u16, &str, u32)> =
        run.fetches.iter().map(|f| (f.status, f.version.as_str(), f.num_connects)).collect();
    assert_eq!(got, [(200, "2", 1), (200, "2", 0), (200, "2", 0)]);
}

// ---------------------------------------------------------------------------
// load

fn assert_h2load_clean(r: &H2load, n: u64) {
    assert_eq!(
        (r.total, r.started, r.done, r.succeeded, r.failed, r.errored),
        (n, n, n, n, 0, 0),
        "h2load summary:\n{}",
        r.output
    );
    assert!(r.status_codes.starts_with(&format!("status codes: {n} 2xx, 0 3xx, 0 4xx, 0 5xx")), "{}", r.output);
}

#[test]
fn h2load_over_tls() {
    let site = site();
    let p = site.s.ports[0];
    let (u1, u2) = (format!("https://127.0.0.1:{p}/text"), format!("https://127.0.0.1:{p}/index.html"));
    let r = h2load(&["-c", "10", "-m", "10", "-n", "2000", &u1, &u2]);
    assert!(r.output.contains("Application protocol: h2"), "{}", r.output);
    assert_h2load_clean(&r, 2000);
}

#[test]
fn h2load_over_h2c() {
    let site = site();
    let p = site.s.ports[2];
    let (u1, u2) = (format!("http://127.0.0.1:{p}/text"), format!("http://127.0.0.1:{p}/index.html"));
    let r = h2load(&["-c", "10", "-m", "10", "-n", "2000", &u1, &u2]);
    assert!(r.output.contains("Application protocol: h2c"), "{}", r.output);
    assert_h2load_clean(&r, 2000);
}

/// A client that reads more slowly than the server writes keeps the
/// server's socket full, so the response's last TLS records are written
/// by a flush that must wait for room: the whole body still arrives (the
/// connection loop once left such a flush pending for good when nothing
/// new was to be written, and the stream never ended; under h2load at
/// -c100 -m100 with 100 KB files, a few streams a run).
#[test]
fn a_slow_reader_gets_the_end_of_every_body_over_tls() {
    use rustls_pki_types::pem::PemObject;
    // A small send buffer on the server's side: nearly every write then
    // ends part way, the rest kept in the TLS stream's buffer.
    let big = pseudo_random(4 * 1024 * 1024, 9);
    let s = builder()
        .tls_files()
        .http(
            r#"
            server {
                listen 127.0.0.1:{port0} ssl http2 sndbuf=4k;
                server_name a.test;
                ssl_certificate tls/a.test.ecdsa.crt;
                ssl_certificate_key tls/a.test.ecdsa.key;
                root html;
            }
            "#,
        )
        .file("html/big.bin", &big)
        .start();
    let port = s.ports[0];
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&ca_pem()) {
        roots.add(c.expect("the test CA parses")).expect("the test CA is a root");
    }
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        // A small receive buffer: the kernel cannot take the body in
        // for the client, so the server's socket stays full.
        let sock = tokio::net::TcpSocket::new_v4().expect("a socket");
        sock.set_recv_buffer_size(16 * 1024).expect("SO_RCVBUF");
        let tcp = sock.connect(([127, 0, 0, 1], port).into()).await.expect("connect");
        let name = rustls_pki_types::ServerName::try_from("a.test").expect("a name");
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg)).connect(name, tcp).await.expect("TLS");
        let (mut client, conn) = h2::client::Builder::new()
            .initial_window_size(1 << 30)
            .initial_connection_window_size(1 << 30)
            .handshake::<_, bytes::Bytes>(tls)
            .await
            .expect("the HTTP/2 preface");
        tokio::spawn(conn);
        for round in 0..3 {
            let req = http::Request::get(format!("https://a.test:{port}/big.bin")).body(()).expect("a request");
            let (resp, _) = client.send_request(req, true).expect("a stream");
            let mut body = resp.await.expect("a response head").into_body();
            let mut got = Vec::with_capacity(big.len());
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let next = tokio::time::timeout_at(deadline, body.data()).await;
                let Ok(next) = next else {
                    panic!("round {round}: the body stopped at {} of {} bytes", got.len(), big.len())
                };
                let Some(chunk) = next else { break };
                let chunk = chunk.expect("DATA");
                got.extend_from_slice(&chunk);
                let _ = body.flow_control().release_capacity(chunk.len());
                // About 16 MB/s: slower than the server writes.
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            assert_same_bytes(&got, &big, "big.bin read slowly over h2 + TLS");
        }
    });
}

// ---------------------------------------------------------------------------
// access log

#[test]
fn access_log_tls_and_http2_variables() {
    let site = {
        let s = builder()
            .tls_files()
            .ports(4)
            .http(&format!(
                "log_format t '$ssl_protocol $ssl_cipher $ssl_server_name $http2 $status';\naccess_log logs/access.log t;\n{SITE}"
            ))
            .file("html/index.html", "index\n")
            .start();
        Site { s, small: Vec::new(), big: Vec::new() }
    };
    let s = &site.s;
    // one request at a time, so the log lines come in this order
    site.h2("/text", &["--tlsv1.3"]);
    site.h1("/missing", &["--tls-max", "1.2"]);
    site.h2c("/text", &[]);
    fetch(s, &format!("http://127.0.0.1:{}/text", s.ports[3]), &[]);
    fetch(s, &format!("https://127.0.0.1:{}/text", s.ports[1]), &["-k"]); // no SNI for an IP address
    let lines = s.wait_access_lines(5);
    let fields: Vec<Vec<&str>> = lines.iter().map(|l| l.split(' ').collect()).collect();
    for (l, f) in lines.iter().zip(&fields) {
        assert_eq!(f.len(), 5, "{l:?}");
    }
    // $ssl_cipher: nginx logs OpenSSL's names (TLS_AES_256_GCM_SHA384,
    // ECDHE-ECDSA-AES256-GCM-SHA384); only "some cipher" is asserted.
    let cipher_ok = |c: &str| !c.is_empty() && c != "-";
    let want: [(&str, bool, &str, &str, &str); 5] = [
        ("TLSv1.3", true, "a.test", "h2", "200"),
        ("TLSv1.2", true, "a.test", "", "404"),
        ("-", false, "-", "h2c", "200"),
        ("-", false, "-", "", "200"),
        ("TLSv1.3", true, "-", "", "200"),
    ];
    let mut checks = Checks::new();
    for (i, (proto, tls, sni, http2, status)) in want.into_iter().enumerate() {
        let (l, f) = (&lines[i], &fields[i]);
        checks.run(&format!("line {}", i + 1), || {
            assert_eq!((f[0], f[2], f[3], f[4]), (proto, sni, http2, status), "{l:?}");
            if tls {
                assert!(cipher_ok(f[1]), "{l:?}");
            } else {
                assert_eq!(f[1], "-", "{l:?}");
            }
        });
    }
    checks.finish();
}
