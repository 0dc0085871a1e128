//! TLS (HTTP/1.1 over TLS): static files, keep-alive, plain HTTP on a TLS
//! port, session resumption (session cache, tickets, across workers), SNI
//! and `default_server`, `ssl_reject_handshake`, RSA + ECDSA certificates on
//! one server, `ssl_protocols`, mutual TLS, configuration errors, and a
//! client that never starts its handshake. HTTP/2 is in tests/h2.rs.
//!
//! Clients are the real ones: curl (verifying against the test CA from
//! tests/common/tls.rs), `openssl s_client`. Expected answers were checked
//! against nginx 1.22.1 with OpenSSL 3.0 (`SLUICE_TEST_NGINX=1`); the
//! sluice-only tests say so and are skipped in that mode.
//!
//! Configs set `ssl_protocols TLSv1.2 TLSv1.3;` explicitly: nginx 1.22's
//! default is `TLSv1 TLSv1.1 TLSv1.2` (no TLS 1.3; 1.23.4 changed it to
//! `TLSv1.2 TLSv1.3`), and sluice cannot speak the old ones.

mod common;

use std::time::{Duration, Instant};

use common::tls::*;
use common::*;

const PROTOCOLS: &str = "ssl_protocols TLSv1.2 TLSv1.3;";
const A_ECDSA: &str = "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/a.test.ecdsa.key;";
const A_RSA: &str = "ssl_certificate tls/a.test.rsa.crt; ssl_certificate_key tls/a.test.rsa.key;";
const B_ECDSA: &str = "ssl_certificate tls/b.test.ecdsa.crt; ssl_certificate_key tls/b.test.ecdsa.key;";
const LOCALHOST: &str = "ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;";

/// One `listen {port} ssl` server for a.test (ECDSA) with `extra` inside
/// the server block and `http_extra` at http level.
fn a_server(http_extra: &str, extra: &str) -> ServerBuilder {
    builder().tls_files().http(&format!(
        "{PROTOCOLS}\n{http_extra}\nserver {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name a.test;\n  {A_ECDSA}\n  \
         root html;\n  {extra}\n}}"
    ))
}

/// Compares bytes without printing megabytes on failure.
fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let at = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        panic!("{what}: {} bytes received, {} expected, first difference at byte {at}", got.len(), want.len());
    }
}

// ---------------------------------------------------------------------------
// HTTP/1.1 over TLS

#[test]
fn https_static_files_head_404_and_ranges() {
    let small = pseudo_random(100 * 1024, 1);
    let big = pseudo_random(3 * 1024 * 1024, 2);
    let s = a_server("", "")
        .file("html/small.bin", &small)
        .file("html/big.bin", &big)
        .file("html/d/index.html", "d\n")
        .start();
    let base = format!("https://a.test:{}", s.port);
    let mut checks = Checks::new();

    checks.run("100 KB file", || {
        let f = fetch(&s, &format!("{base}/small.bin"), &["--http1.1"]);
        assert_eq!((f.status, f.version.as_str(), f.verify), (200, "1.1", 0), "{f:?}");
        assert_eq!(f.must("Content-Length"), "102400");
        assert_same_bytes(&f.body, &small, "small.bin");
    });
    checks.run("3 MB file", || {
        let f = fetch(&s, &format!("{base}/big.bin"), &["--http1.1"]);
        assert_eq!(f.status, 200);
        assert_same_bytes(&f.body, &big, "big.bin");
    });
    checks.run("HEAD", || {
        // HEAD then GET pipelined on one connection: the HEAD response must
        // end with its head, or the GET's response would not follow it.
        let req = "HEAD /big.bin HTTP/1.1\r\nHost: a.test\r\n\r\n\
                   GET /d/index.html HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n";
        let r = s_client(&s, s.port, &["-quiet", "-servername", "a.test"], req);
        let (head, rest) = r.stdout.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response:\n{}", r.out));
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(head.contains(&format!("\r\nContent-Length: {}\r\n", big.len())), "{head}");
        assert!(
            rest.starts_with("HTTP/1.1 200 OK\r\n") && rest.ends_with("\r\n\r\nd\n"),
            "after the HEAD response:\n{rest}"
        );
    });
    checks.run("404", || {
        let f = fetch(&s, &format!("{base}/missing"), &["--http1.1"]);
        assert_eq!(f.status, 404);
        assert!(f.text().contains("<title>404 Not Found</title>"), "{}", f.text());
    });
    checks.run("range in the small file", || {
        let f = fetch(&s, &format!("{base}/small.bin"), &["--http1.1", "-r", "1000-1999"]);
        assert_eq!(f.status, 206);
        assert_eq!(f.must("Content-Range"), "bytes 1000-1999/102400");
        assert_same_bytes(&f.body, &small[1000..2000], "range 1000-1999");
    });
    checks.run("range deep in the big file", || {
        let f = fetch(&s, &format!("{base}/big.bin"), &["--http1.1", "-r", "2000000-2999999"]);
        assert_eq!(f.status, 206);
        assert_eq!(f.must("Content-Range"), format!("bytes 2000000-2999999/{}", big.len()));
        assert_same_bytes(&f.body, &big[2000000..3000000], "range 2000000-2999999");
    });
    checks.run("directory redirect keeps https", || {
        // The Location nginx builds for a directory without its slash uses
        // the connection's scheme.
        let f = fetch(&s, &format!("{base}/d"), &["--http1.1"]);
        assert_eq!(f.status, 301);
        assert_eq!(f.must("Location"), format!("https://a.test:{}/d/", s.port));
    });
    checks.finish();
}

#[test]
fn https_keepalive_reuses_the_connection() {
    let s = a_server("", "location / { return 200 \"$uri\\n\"; }").start();
    let base = format!("https://a.test:{}", s.port);
    let (u1, u2, u3) = (format!("{base}/one"), format!("{base}/two"), format!("{base}/three"));
    let run = curl_fetch(&s, &[&u1, &u2, &u3], &["--http1.1"]);
    assert!(run.ok, "curl: {}", run.stderr);
    let got: Vec<(u16, String, u32)> = run.fetches.iter().map(|f| (f.status, f.text(), f.num_connects)).collect();
    assert_eq!(
        got,
        [(200, "/one\n".into(), 1), (200, "/two\n".into(), 0), (200, "/three\n".into(), 0)],
        "one TLS connection for three requests"
    );
}

#[test]
fn plain_http_request_on_a_tls_port_gets_400() {
    let s = a_server("", "location / { return 200 x; }").start();
    let r = request(s.port, "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 400, "{}", r.head);
    assert!(r.text().contains("<title>400 The plain HTTP request was sent to HTTPS port</title>"), "{}", r.text());
    assert!(r.text().contains("<center>The plain HTTP request was sent to HTTPS port</center>"), "{}", r.text());
}

// ---------------------------------------------------------------------------
// session resumption

/// A full handshake then a resumption attempt with the saved session;
/// returns both s_client outputs. The second is None when the first
/// connection left no session to save (no TLS 1.3 ticket was sent).
fn try_connect_twice(s: &TestServer, port: u16, args: &[&str], tag: &str) -> (SClient, Option<SClient>) {
    let sess = s.path(&format!("sess-{tag}.pem"));
    let sess_arg = sess.display().to_string();
    let req = get_close("a.test", "/");
    let mut a1 = args.to_vec();
    a1.extend(["-servername", "a.test", "-sess_out", &sess_arg]);
    let first = s_client(s, port, &a1, &req);
    assert!(first.ok && first.protocol().is_some(), "first handshake failed:\n{}", first.out);
    assert!(first.contains("HTTP/1.1 200 OK"), "no response on the first connection:\n{}", first.out);
    if !sess.exists() {
        return (first, None);
    }
    let mut a2 = args.to_vec();
    a2.extend(["-servername", "a.test", "-sess_in", &sess_arg]);
    let second = s_client(s, port, &a2, &req);
    assert!(second.ok, "second handshake failed:\n{}", second.out);
    assert!(second.contains("HTTP/1.1 200 OK"), "no response on the second connection:\n{}", second.out);
    (first, Some(second))
}

/// As `try_connect_twice`, for servers that must offer a session.
fn connect_twice(s: &TestServer, port: u16, args: &[&str], tag: &str) -> (SClient, SClient) {
    let (first, second) = try_connect_twice(s, port, args, tag);
    let second = second.unwrap_or_else(|| panic!("{args:?}: the server sent no session to resume:\n{}", first.out));
    (first, second)
}

#[test]
fn tls12_session_id_resumption_with_shared_cache() {
    // Tickets off: TLS 1.2 resumes from the session cache by session id.
    let s = a_server(
        "",
        "ssl_session_cache shared:SSL:5m; ssl_session_timeout 10m; ssl_session_tickets off;\n  \
         location / { return 200 ok; }",
    )
    .start();
    let (first, second) = connect_twice(&s, s.port, &["-tls1_2"], "12");
    assert!(!first.reused(), "{}", first.out);
    assert!(second.reused(), "TLS 1.2 session not resumed from the cache:\n{}", second.out);
    assert_eq!(second.protocol().as_deref(), Some("TLSv1.2"));
}

#[test]
fn tls13_resumption_with_session_cache_and_no_tickets() {
    // Tickets off but a cache: TLS 1.3 still resumes (stateful tickets that
    // point into the cache), as nginx/OpenSSL do.
    let s =
        a_server("", "ssl_session_cache shared:SSL:5m; ssl_session_tickets off; location / { return 200 ok; }").start();
    let (_, second) = connect_twice(&s, s.port, &["-tls1_3"], "13c");
    assert!(second.reused(), "TLS 1.3 session not resumed from the cache:\n{}", second.out);
    assert_eq!(second.protocol().as_deref(), Some("TLSv1.3"));
}

#[test]
fn resumption_with_session_tickets() {
    // No cache; tickets are on by default: TLS 1.3 and TLS 1.2 both resume.
    let s = a_server("", "location / { return 200 ok; }").start();
    let (_, second) = connect_twice(&s, s.port, &["-tls1_3"], "13t");
    assert!(second.reused(), "TLS 1.3 ticket not accepted:\n{}", second.out);
    assert_eq!(second.protocol().as_deref(), Some("TLSv1.3"));
    let (first, second) = connect_twice(&s, s.port, &["-tls1_2"], "12t");
    assert!(first.contains("TLS session ticket:"), "no TLS 1.2 ticket issued:\n{}", first.out);
    assert!(second.reused(), "TLS 1.2 ticket not accepted:\n{}", second.out);
}

#[test]
fn no_resumption_without_tickets_or_cache() {
    // ssl_session_tickets off and the default ssl_session_cache (none):
    // nothing to resume from.
    let s = a_server("", "ssl_session_tickets off; location / { return 200 ok; }").start();
    // (Without a ticket s_client has no TLS 1.3 session to save at all;
    // that passes too.)
    for (args, tag) in [(["-tls1_3"], "13n"), (["-tls1_2"], "12n")] {
        if let (_, Some(second)) = try_connect_twice(&s, s.port, &args, tag) {
            assert!(
                !second.reused(),
                "{args:?}: resumed although tickets are off and there is no cache:\n{}",
                second.out
            );
        }
    }
}

#[test]
fn resumption_works_across_workers() {
    // Two workers on a reuseport listener: each new connection lands on a
    // worker chosen by the kernel's hash of the client port, so ten chained
    // resumptions (each using the session of the previous connection) all
    // land on the worker that issued the session only with probability
    // ~2^-9. All of them must resume.
    let s = builder()
        .tls_files()
        .main("worker_processes 2;")
        .http(&format!(
            "{PROTOCOLS}\nssl_session_cache shared:SSL:5m;\nserver {{ listen 127.0.0.1:{{port}} ssl reuseport; \
             server_name a.test; {A_ECDSA} location / {{ return 200 ok; }} }}"
        ))
        .start();
    let req = get_close("a.test", "/");
    // TLS 1.3: each resumption uses the ticket the previous connection got
    // (clients use a TLS 1.3 ticket once). TLS 1.2: the client asks for no
    // ticket and offers the first session id every time (s_client does not
    // save a resumed TLS 1.2 session again).
    for proto in ["-tls1_3", "-tls1_2"] {
        let tls13 = proto == "-tls1_3";
        let sess = |i: usize| s.path(&format!("x{proto}-{i}.pem")).display().to_string();
        let mut args = vec![proto, "-servername", "a.test"];
        if !tls13 {
            args.push("-no_ticket");
        }
        let s0 = sess(0);
        let mut a = args.clone();
        a.extend(["-sess_out", &s0]);
        let first = s_client(&s, s.port, &a, &req);
        assert!(first.ok, "{proto} first handshake:\n{}", first.out);
        let mut not_reused = Vec::new();
        for i in 0..10 {
            let (si, so) = if tls13 { (sess(i), sess(i + 1)) } else { (sess(0), sess(i + 1)) };
            let mut a = args.clone();
            a.extend(["-sess_in", &si, "-sess_out", &so]);
            let r = s_client(&s, s.port, &a, &req);
            assert!(r.ok && r.contains("HTTP/1.1 200 OK"), "{proto} connection {i}:\n{}", r.out);
            if !r.reused() {
                not_reused.push(i);
            }
        }
        assert!(not_reused.is_empty(), "{proto}: connections {not_reused:?} of 10 did not resume");
    }
}

// ---------------------------------------------------------------------------
// SNI

#[test]
fn sni_selects_the_server_and_its_certificate() {
    // The default server is neither first nor last in the file.
    let s = builder()
        .tls_files()
        .http(&format!(
            "{PROTOCOLS}\n\
             server {{ listen 127.0.0.1:{{port}} ssl; server_name a.test; {A_ECDSA} location / {{ return 200 \"a\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{{port}} ssl default_server; server_name localhost; {LOCALHOST} \
               location / {{ return 200 \"default\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{{port}} ssl; server_name b.test *.b.test; {B_ECDSA} location / {{ return 200 \"b\\n\"; }} }}"
        ))
        .start();
    let mut checks = Checks::new();
    for (sni, subject, body) in [
        (Some("a.test"), "CN = a.test", "a\n"),
        (Some("b.test"), "CN = b.test", "b\n"),
        (Some("www.b.test"), "CN = b.test", "b\n"),
        (Some("unknown.test"), "CN = localhost", "default\n"),
        (None, "CN = localhost", "default\n"),
    ] {
        checks.run(&format!("SNI {sni:?}"), || {
            let host = sni.unwrap_or("localhost");
            let args: Vec<&str> = match sni {
                Some(n) => vec!["-servername", n],
                None => vec!["-noservername"],
            };
            let r = s_client(&s, s.port, &args, &get_close(host, "/"));
            assert!(r.ok, "handshake failed:\n{}", r.out);
            assert_eq!(r.subject(), Some(subject), "{}", r.out);
            assert!(r.contains(&format!("\r\n\r\n{body}")), "wrong server answered:\n{}", r.out);
        });
    }
    // curl verifies each name against its own certificate.
    for (name, body) in [("a.test", "a\n"), ("b.test", "b\n")] {
        checks.run(&format!("curl {name}"), || {
            let f = fetch(&s, &format!("https://{name}:{}/", s.port), &[]);
            assert_eq!((f.status, f.verify, f.text().as_str()), (200, 0, body));
        });
    }
    checks.finish();
}

#[test]
fn ssl_reject_handshake_refuses_unknown_names() {
    let s = builder()
        .tls_files()
        .http(&format!(
            "{PROTOCOLS}\n\
             server {{ listen 127.0.0.1:{{port}} ssl default_server; ssl_reject_handshake on; }}\n\
             server {{ listen 127.0.0.1:{{port}} ssl; server_name a.test; {A_ECDSA} location / {{ return 200 \"a\\n\"; }} }}"
        ))
        .start();
    let ok = s_client(&s, s.port, &["-servername", "a.test"], &get_close("a.test", "/"));
    assert!(ok.ok && ok.subject() == Some("CN = a.test"), "known name refused:\n{}", ok.out);
    assert!(ok.contains("\r\n\r\na\n"), "{}", ok.out);
    // nginx answers with an unrecognized_name alert (s_client: "tlsv1
    // unrecognized name ... SSL alert number 112"), with or without SNI.
    for args in [vec!["-servername", "unknown.test"], vec!["-noservername"]] {
        let r = s_client(&s, s.port, &args, &get_close("unknown.test", "/"));
        assert!(!r.ok, "{args:?}: handshake succeeded:\n{}", r.out);
        assert!(r.contains("alert number 112"), "{args:?}: not an unrecognized_name alert:\n{}", r.out);
        assert!(r.subject().is_none() && r.contains("no peer certificate available"), "{args:?}:\n{}", r.out);
        assert!(!r.contains("HTTP/1.1"), "{args:?}: got an HTTP response:\n{}", r.out);
    }
    let c = curl_fetch(&s, &[&format!("https://unknown.test:{}/", s.port)], &[]);
    assert!(!c.ok, "curl got through: {c:?}");
}

// ---------------------------------------------------------------------------
// RSA and ECDSA on one server

#[test]
fn rsa_and_ecdsa_certificates_on_one_server() {
    let s = a_server("", &format!("{A_RSA}\n  location / {{ return 200 ok; }}")).start();
    let mut checks = Checks::new();
    // (client options, expected leaf key type, key bits, signature type)
    let cases: [(&[&str], &str, u32, &str); 4] = [
        (&["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"], "rsaEncryption", 2048, "RSA-PSS"),
        (&["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256"], "id-ecPublicKey", 256, "ECDSA"),
        (&["-tls1_3", "-sigalgs", "rsa_pss_rsae_sha256"], "rsaEncryption", 2048, "RSA-PSS"),
        (&["-tls1_3", "-sigalgs", "ecdsa_secp256r1_sha256"], "id-ecPublicKey", 256, "ECDSA"),
    ];
    for (args, key_type, bits, sig) in cases {
        checks.run(&args.join(" "), || {
            let mut a = args.to_vec();
            a.extend(["-servername", "a.test"]);
            let r = s_client(&s, s.port, &a, &get_close("a.test", "/"));
            assert!(r.ok && r.verified(), "handshake failed or not verified:\n{}", r.out);
            assert_eq!(r.subject(), Some("CN = a.test"));
            assert_eq!(r.server_key_type(), Some(key_type), "{}", r.out);
            assert_eq!(r.server_key_bits(), Some(bits), "{}", r.out);
            assert_eq!(r.peer_signature_type(), Some(sig), "{}", r.out);
        });
    }
    checks.run("curl verifies whichever it gets", || {
        let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
        assert_eq!((f.status, f.verify), (200, 0));
    });
    checks.finish();
}

// ---------------------------------------------------------------------------
// ssl_protocols

#[test]
fn ssl_protocols_limits_the_versions() {
    let s = builder()
        .tls_files()
        .ports(2)
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port0}} ssl; ssl_protocols TLSv1.2; {A_ECDSA} location / {{ return 200 ok; }} }}\n\
             server {{ listen 127.0.0.1:{{port1}} ssl; ssl_protocols TLSv1.3; {A_ECDSA} location / {{ return 200 ok; }} }}"
        ))
        .start();
    let req = get_close("a.test", "/");
    let (p12, p13) = (s.ports[0], s.ports[1]);
    let mut checks = Checks::new();
    checks.run("TLSv1.2 only", || {
        let r = s_client(&s, p12, &["-tls1_3", "-servername", "a.test"], &req);
        assert!(!r.ok && r.protocol().is_none(), "TLS 1.3 accepted:\n{}", r.out);
        let r = s_client(&s, p12, &["-tls1_2", "-servername", "a.test"], &req);
        assert!(r.ok && r.contains("HTTP/1.1 200 OK"), "{}", r.out);
        assert_eq!(r.protocol().as_deref(), Some("TLSv1.2"));
        let r = s_client(&s, p12, &["-servername", "a.test"], &req);
        assert_eq!(r.protocol().as_deref(), Some("TLSv1.2"), "a client offering both: {}", r.out);
    });
    checks.run("TLSv1.3 only", || {
        let r = s_client(&s, p13, &["-tls1_2", "-servername", "a.test"], &req);
        assert!(!r.ok && r.protocol().is_none(), "TLS 1.2 accepted:\n{}", r.out);
        let r = s_client(&s, p13, &["-tls1_3", "-servername", "a.test"], &req);
        assert!(r.ok && r.contains("HTTP/1.1 200 OK"), "{}", r.out);
        assert_eq!(r.protocol().as_deref(), Some("TLSv1.3"));
    });
    checks.run("curl --tls-max 1.2 against TLSv1.3 only", || {
        let c = curl_fetch(&s, &[&format!("https://a.test:{p13}/")], &["--tls-max", "1.2"]);
        assert!(!c.ok, "{c:?}");
    });
    checks.finish();
}

#[test]
fn ssl_protocols_older_than_tls12_warn_or_are_refused_alone() {
    // sluice-only: nginx accepts these (OpenSSL may still refuse at
    // handshake time). sluice cannot speak them: listed with TLSv1.2 they
    // are left out with a warning, alone they are an error.
    if skip_in_nginx_mode("sluice leaves out TLSv1/TLSv1.1/SSLv3") {
        return;
    }
    let p = prog();
    for (proto, also) in
        [("TLSv1", " TLSv1.2"), ("TLSv1.1", " TLSv1.2"), ("SSLv3", " TLSv1.2"), ("SSLv2", ""), ("TLSv1", "")]
    {
        let conf = format!(
            "events {{}}\nhttp {{\n  server {{\n    listen 127.0.0.1:{{port}} ssl;\n    {A_ECDSA}\n    \
             ssl_protocols {proto}{also};\n  }}\n}}\n"
        );
        let s = builder().tls_files().whole(&conf).prepare();
        let out = s.run(&["-t"]);
        let err = stderr_of(&out);
        let abs = s.conf_path().display().to_string();
        let (code, level) = if also.is_empty() { (1, "[emerg]") } else { (0, "[warn]") };
        assert_eq!(out.status.code(), Some(code), "{proto}{also}: exit code; stderr:\n{err}");
        let line = line_with(&err, level);
        assert!(
            line.contains(&format!(" {proto} not offered")),
            "{proto}: the message does not name the protocol:\n{err}"
        );
        assert!(line.ends_with(&format!(" in {abs}:6")), "{proto}: the message does not name file:line 6:\n{err}");
        if also.is_empty() {
            assert!(err.ends_with(&format!("{p}: configuration file {abs} test failed\n")), "{err}");
        }
    }
}

// ---------------------------------------------------------------------------
// mutual TLS

const MTLS: &str = "ssl_client_certificate tls/ca.crt;\n  location / { return 200 \"hello client\\n\"; }";

#[test]
fn ssl_verify_client_on() {
    let s = a_server("", &format!("ssl_verify_client on;\n  {MTLS}")).start();
    let url = format!("https://a.test:{}/", s.port);
    let (cert, key) = (tls_path(&s, "client.crt"), tls_path(&s, "client.key"));
    let (rcert, rkey) = (tls_path(&s, "rogue.crt"), tls_path(&s, "rogue.key"));
    let mut checks = Checks::new();
    checks.run("with a client certificate (TLS 1.3)", || {
        let f = fetch(&s, &url, &["--cert", &cert, "--key", &key]);
        assert_eq!((f.status, f.text().as_str()), (200, "hello client\n"));
    });
    checks.run("with a client certificate (TLS 1.2)", || {
        let f = fetch(&s, &url, &["--cert", &cert, "--key", &key, "--tls-max", "1.2"]);
        assert_eq!((f.status, f.text().as_str()), (200, "hello client\n"));
    });
    checks.run("the CA is named in the certificate request", || {
        let r =
            s_client(&s, s.port, &["-servername", "a.test", "-cert", &cert, "-key", &key], &get_close("a.test", "/"));
        assert!(r.contains("Acceptable client certificate CA names\nCN = sluice test CA\n"), "{}", r.out);
        assert!(r.contains("hello client"), "{}", r.out);
    });
    // nginx completes the handshake without a certificate and answers the
    // request with 400 "No required SSL certificate was sent" (a page the
    // user can read). rustls's verifier would instead fail the handshake
    // (curl exits with an SSL error, no HTTP status). This test asserts
    // nginx's behaviour.
    checks.run("without a client certificate: 400", || {
        let f = fetch(&s, &url, &[]);
        assert_eq!(f.status, 400);
        assert!(f.text().contains("<title>400 No required SSL certificate was sent</title>"), "{}", f.text());
    });
    // Same choice for a certificate the CA did not sign: nginx answers 400
    // "The SSL certificate error".
    checks.run("with a certificate from another CA: 400", || {
        let f = fetch(&s, &url, &["--cert", &rcert, "--key", &rkey]);
        assert_eq!(f.status, 400);
        assert!(f.text().contains("<title>400 The SSL certificate error</title>"), "{}", f.text());
    });
    checks.finish();
}

#[test]
fn ssl_verify_client_optional() {
    let s = a_server("", &format!("ssl_verify_client optional;\n  {MTLS}")).start();
    let url = format!("https://a.test:{}/", s.port);
    let (cert, key) = (tls_path(&s, "client.crt"), tls_path(&s, "client.key"));
    let f = fetch(&s, &url, &[]);
    assert_eq!((f.status, f.text().as_str()), (200, "hello client\n"), "without a certificate");
    let f = fetch(&s, &url, &["--cert", &cert, "--key", &key]);
    assert_eq!((f.status, f.text().as_str()), (200, "hello client\n"), "with a certificate");
    // nginx: a certificate that does not verify is a 400, as with `on`
    // (see ssl_verify_client_on).
    let f = fetch(&s, &url, &["--cert", &tls_path(&s, "rogue.crt"), "--key", &tls_path(&s, "rogue.key")]);
    assert_eq!(f.status, 400, "with a certificate from another CA");
    assert!(f.text().contains("<title>400 The SSL certificate error</title>"), "{}", f.text());
}

// ---------------------------------------------------------------------------
// configuration errors (nginx's wording; pass against nginx too)

fn config_test_fails(conf: &str, want: &str) {
    let p = prog();
    let s = builder().tls_files().whole(conf).prepare();
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    let abs = s.conf_path().display().to_string();
    let want = want.replace("ABS", &abs).replace("CONF", &s.path("conf").display().to_string());
    assert_eq!(out.status.code(), Some(1), "exit code; stderr:\n{err}");
    assert!(err.contains(&format!("{p}: [emerg] {want}")), "want {want:?} in stderr:\n{err}");
    assert!(err.ends_with(&format!("{p}: configuration file {abs} test failed\n")), "{err}");
}

#[test]
fn listen_ssl_without_a_certificate_is_a_config_error() {
    // nginx names the line of the `server` block, not of `listen`.
    config_test_fails(
        "events {}\nhttp {\n\n  server {\n    server_name x;\n\n    listen 127.0.0.1:{port} ssl;\n  }\n}\n",
        "no \"ssl_certificate\" is defined for the \"listen ... ssl\" directive in ABS:4\n",
    );
}

#[test]
fn missing_certificate_or_key_file_is_a_config_error() {
    // nginx goes on with OpenSSL's reason (BIO_new_file() failed ...); only
    // the start, up to the quoted absolute path, is asserted.
    config_test_fails(
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:{port} ssl;\n    ssl_certificate tls/missing.crt;\n    \
         ssl_certificate_key tls/a.test.ecdsa.key;\n  }\n}\n",
        "cannot load certificate \"CONF/tls/missing.crt\": ",
    );
    config_test_fails(
        "events {}\nhttp {\n  server {\n    listen 127.0.0.1:{port} ssl;\n    ssl_certificate tls/a.test.ecdsa.crt;\n    \
         ssl_certificate_key tls/missing.key;\n  }\n}\n",
        "cannot load certificate key \"CONF/tls/missing.key\": ",
    );
}

// ---------------------------------------------------------------------------
// a client that never completes its handshake

#[test]
fn silent_client_is_closed_after_client_header_timeout() {
    let s = a_server("client_header_timeout 1s;", "location / { return 200 ok; }").start();
    let mut checks = Checks::new();
    // Nothing at all; then the first 5 bytes of a ClientHello record and
    // nothing more.
    for (label, bytes) in [("no bytes", &b""[..]), ("a partial ClientHello", &[0x16, 0x03, 0x01, 0x02, 0x00][..])] {
        checks.run(label, || {
            let mut c = s.connect();
            let t0 = Instant::now();
            if !bytes.is_empty() {
                c.send(bytes);
            }
            assert!(c.closed_within(Duration::from_secs(4)), "still open 4 s after connect (client_header_timeout 1s)");
            let took = t0.elapsed();
            assert!(took >= Duration::from_millis(800), "closed after {took:?}, before the 1 s timeout");
        });
    }
    checks.finish();
}

/// `$ssl_client_verify`, and `optional_no_ca`: a certificate no trusted
/// CA signed is no 400 there, only FAILED in the variable.
#[test]
fn ssl_client_verify_variable() {
    let ret = "location / { return 200 \"$ssl_client_verify\\n\"; }";
    let (cert, key) = ("client", "client");
    for mode in ["optional", "optional_no_ca"] {
        let s =
            a_server("", &format!("ssl_verify_client {mode};\n  ssl_client_certificate tls/ca.crt;\n  {ret}")).start();
        let url = format!("https://a.test:{}/", s.port);
        let with = |name: &str| {
            let (c, k) = (tls_path(&s, &format!("{name}.crt")), tls_path(&s, &format!("{name}.key")));
            fetch(&s, &url, &["--cert", &c, "--key", &k])
        };
        let f = fetch(&s, &url, &[]);
        assert_eq!((f.status, f.text().as_str()), (200, "NONE\n"), "{mode}: without a certificate");
        let f = with(cert);
        assert_eq!((f.status, f.text().as_str()), (200, "SUCCESS\n"), "{mode}: with {key}.crt");
        let f = with("rogue");
        if mode == "optional" {
            assert_eq!(f.status, 400, "{mode}: a self-signed certificate");
            let log = s.wait_error_log("client SSL certificate verify error");
            assert!(log.contains("client SSL certificate verify error: (18:self-signed certificate)"), "{log}");
        } else {
            assert_eq!((f.status, f.text().as_str()), (200, "FAILED:self-signed certificate\n"), "{mode}: self-signed");
        }
    }
}

/// A version 1 certificate, as `openssl req -x509` makes from a
/// configuration without extensions (nginx's test suite makes all of its
/// certificates that way): it loads and serves. The key of another
/// certificate is still refused with nginx's "key values mismatch".
#[test]
fn version_1_certificates_load() {
    let dir = temp_dir("v1-cert");
    std::fs::write(
        dir.join("openssl.conf"),
        "[ req ]\ndefault_bits = 2048\nencrypt_key = no\ndistinguished_name = req_distinguished_name\n[ req_distinguished_name ]\n",
    )
    .unwrap();
    for name in ["localhost", "other"] {
        openssl(
            &["req", "-x509", "-new", "-config", "openssl.conf", "-subj", &format!("/CN={name}/")]
                .into_iter()
                .chain(["-out", &format!("{name}.crt"), "-keyout", &format!("{name}.key")])
                .collect::<Vec<_>>(),
            &dir,
        );
    }
    let text = |args: &[&str]| {
        let out = std::process::Command::new("openssl").args(args).current_dir(&dir).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(text(&["x509", "-in", "localhost.crt", "-noout", "-text"]).contains("Version: 1 (0x0)"));
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap();
    let server = |key: &str| {
        builder().file("conf/v1/localhost.crt", read("localhost.crt")).file("conf/v1/localhost.key", read(key)).http(
            "server { listen 127.0.0.1:{port} ssl; ssl_certificate v1/localhost.crt; \
                 ssl_certificate_key v1/localhost.key; location / { return 200 \"v1 ok\\n\"; } }",
        )
    };
    let s = server("localhost.key").start();
    let out = curl(&["-sk", &format!("https://127.0.0.1:{}/", s.port)]);
    assert_eq!(out.text(), "v1 ok\n");
    drop(s);
    let t = server("other.key").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    if !nginx_mode() {
        assert!(err.contains("does not match certificate") && err.contains("(key values mismatch)"), "{err}");
    } else {
        assert!(err.contains("key values mismatch"), "{err}");
    }
}

/// The issue's authentication-portal case: `error_page 497` redirects a
/// plain HTTP request on a TLS port (nginx finalizes it with 497, so the
/// server's error_page applies), and the connection closes.
#[test]
fn error_page_497_redirects_plain_http_to_https() {
    let s = a_server("", "error_page 497 =301 https://$host:$server_port$request_uri; location / { return 200 x; }")
        .start();
    let r = request(s.port, "GET /p?q=1 HTTP/1.1\r\nHost: a.test\r\n\r\n");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.header("Location"), Some(format!("https://a.test:{}/p?q=1", s.port).as_str()), "{}", r.head);
    assert_eq!(r.header("Connection"), Some("close"), "{}", r.head);
}

/// `ssl_conf_command`: the commands sluice maps onto rustls win over the
/// other directives, whatever their order (nginx hands them to OpenSSL
/// last); any other command is refused by name.
#[test]
fn ssl_conf_command_certificate_and_options() {
    let s = a_server(
        "",
        "ssl_conf_command Certificate tls/b.test.ecdsa.crt; ssl_conf_command PrivateKey tls/b.test.ecdsa.key;\n  \
         ssl_session_tickets on; ssl_conf_command Options -SessionTicket;\n  location / { return 200 \"x\\n\"; }",
    )
    .start();
    let r = s_client(&s, s.port, &["-servername", "a.test"], &get_close("a.test", "/"));
    assert!(r.ok, "handshake failed:\n{}", r.out);
    assert_eq!(r.subject(), Some("CN = b.test"), "{}", r.out);
    // No tickets (and no session cache): a second connection is new.
    let (first, second) = try_connect_twice(&s, s.port, &[], "conf_command");
    assert!(second.is_none_or(|c| !c.reused()), "{}", first.out);
    // Without the command the same server resumes with a ticket.
    let t = a_server("", "ssl_session_tickets on; location / { return 200 \"x\\n\"; }").start();
    assert!(connect_twice(&t, t.port, &[], "tickets").1.reused());
    let refused = builder()
        .tls_files()
        .http(&format!("server {{ listen 127.0.0.1:{{port}} ssl; {A_ECDSA} ssl_conf_command RecordPadding 16; }}"))
        .prepare();
    let out = refused.run(&["-t"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr_of(&out).contains("\"ssl_conf_command\" \"RecordPadding\" is not supported"), "{}", stderr_of(&out));
}
