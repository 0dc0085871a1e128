//! HTTP/3 transport behaviour that nginx's own QUIC test client
//! (nginx-tests, lib/Test/Nginx/HTTP3.pm) depends on, checked with the
//! aioquic client (tests/common/h3.rs): what a client that stops reading
//! for a while gets once it reads again.
//!
//! SLUICE_TEST_NGINX=1 skips them (the suite's reference nginx 1.22 has no
//! HTTP/3).

mod common;

use common::h3::*;
use common::tls::*;
use common::*;

const CERT: &str = "ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;";

/// A server on {port} over QUIC (and TLS over TCP, which the harness waits
/// for) with `extra` inside it, `http_extra` before it.
fn h3_server(http_extra: &str, extra: &str) -> ServerBuilder {
    builder().tls_files().http(http_extra).http(&format!(
        "server {{\n  listen 127.0.0.1:{{port}} quic;\n  listen 127.0.0.1:{{port}} ssl;\n  server_name localhost;\n  {CERT}\n  root html;\n  {extra}\n}}"
    ))
}

/// A client that does not acknowledge for a second gets loss probes without
/// copies of its session tickets (or of the response): nginx's test client
/// dies ("bad inner") on a second copy of 1-RTT CRYPTO data it already
/// consumed.
#[test]
fn a_stalled_client_gets_no_second_copy_of_its_tickets() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "").file("html/index.html", "after the stall\n").start();
    for _ in 0..2 {
        let run = run(s.port, &["--stall", "1.2", "--request", "GET", "/index.html"]);
        let r = run.one();
        assert_eq!((r.status, r.body.as_str(), r.error.as_deref()), (200, "after the stall\n", None), "{run:?}");
        assert_eq!(run.conn["dups_1rtt"], 0, "{run:?}");
    }
}

/// A client that resets its stream before its request body ended is
/// logged 499, as in nginx (nginx-tests h3_limit_req.t): the request was
/// not logged at all before.
#[test]
fn a_body_reset_by_the_client_is_logged_499() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server(
        "log_format st '$request_method $status';",
        "access_log logs/h3.log st; location / { proxy_pass http://127.0.0.1:1/; }",
    )
    .file("body", "the start of a body")
    .start();
    let body = s.path("body");
    let run = run(
        s.port,
        &[
            "--request",
            "POST",
            "/",
            "--body-file",
            body.to_str().unwrap(),
            "--reset-body-after",
            "0.3",
            "--timeout",
            "2",
        ],
    );
    assert_eq!(run.one().status, 0, "{run:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let log = std::fs::read_to_string(s.path("logs/h3.log")).unwrap_or_default();
        if log.contains("POST 499") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no 499 logged: {log:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
