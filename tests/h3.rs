//! HTTP/3 over QUIC (`listen ... quic`) with an independent client
//! (aioquic, tests/common/h3.rs): static files and ranges, a large
//! download checked by its SHA-256, a POST through `proxy_pass` to an
//! origin that records what it got (an empty body, a short one), a body no
//! one reads stopped, error pages, access-log and status counts, Alt-Svc
//! advertised over HTTP/1.1 and HTTP/2, a client that changes its address
//! mid-download, a reload in the middle of a transfer, `quic_retry` (and a
//! token it cannot read), what `-t` refuses, and 0-RTT (`ssl_early_data`:
//! refused by default, `$ssl_early_data`, 425 for unsafe methods, tickets
//! used once, a handshake that never completes).
//!
//! nginx 1.22 (the suite's reference binary) has no HTTP/3, so these are
//! checked against nginx's documented behaviour and nginx's own h3 tests
//! (see docs/configuration.md); SLUICE_TEST_NGINX=1 skips them.

mod common;

use std::time::{Duration, Instant};

use common::h3::*;
use common::origin::{Origin, Reply};
use common::tls::*;
use common::*;

const CERT: &str = "ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;";

/// A server on {port} over QUIC and TLS (TCP) with `extra` inside it.
fn h3_server(main: &str, http_extra: &str, extra: &str) -> ServerBuilder {
    builder().tls_files().main(main).http(&format!(
        "{http_extra}\nlog_format h3 '$request $status $body_bytes_sent $server_protocol \"$http3\" $ssl_protocol';\n\
         access_log logs/access.log h3;\n\
         server {{\n  listen 127.0.0.1:{{port}} quic reuseport;\n  listen 127.0.0.1:{{port}} ssl;\n  http2 on;\n  \
         server_name localhost;\n  {CERT}\n  root html;\n  {extra}\n}}"
    ))
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 1000) as u8).collect()
}

#[test]
fn static_files_ranges_errors_and_logs() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let body = pattern(100_000);
    let s = h3_server("worker_processes 2;", "", "location = /s { stub_status; }")
        .file("html/index.html", "hello over h3\n")
        .file("html/data.bin", &body)
        .start();
    let r = get(s.port, "/index.html");
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "hello over h3\n");
    assert_eq!(r.header("content-length"), Some("14"));
    assert!(r.header("server").is_some_and(|v| v.starts_with("sluice")), "{r:?}");

    // Two requests on one connection, answered concurrently. (No HEAD:
    // aioquic takes a HEAD response's Content-Length for a body it must
    // receive and closes the connection, though RFC 9110 9.3.2 allows it.)
    let run = run(s.port, &["--request", "GET", "/data.bin", "--request", "GET", "/missing"]);
    let [full, missing] = &run.responses[..] else { panic!("{run:?}") };
    assert_eq!((full.status, full.length), (200, 100_000));
    assert_eq!(full.sha256, sha256_hex(&body));
    assert_eq!(missing.status, 404);
    assert!(missing.body.contains("<center><h1>404 Not Found</h1></center>"), "{missing:?}");
    let ranged = common::h3::run(s.port, &["--request", "GET", "/data.bin", "--header", "range:bytes=1000-1999"]);
    let r = ranged.one();
    assert_eq!(r.status, 206);
    assert_eq!(r.header("content-range"), Some("bytes 1000-1999/100000"));
    assert_eq!(r.sha256, sha256_hex(&body[1000..2000]));
    let multi = common::h3::run(s.port, &["--request", "GET", "/data.bin", "--header", "range:bytes=0-9,20-29"]);
    let r = multi.one();
    assert_eq!(r.status, 206);
    assert!(r.header("content-type").is_some_and(|v| v.starts_with("multipart/byteranges")), "{r:?}");

    let lines = s.wait_access_lines(5);
    assert!(lines.iter().any(|l| l == "GET /index.html HTTP/3.0 200 14 HTTP/3.0 \"h3\" TLSv1.3"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("GET /data.bin HTTP/3.0 206 1000 HTTP/3.0")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("GET /missing HTTP/3.0 404 ")), "{lines:?}");

    // stub_status counts HTTP/3 requests with the others.
    let st = get(s.port, "/s");
    let requests: u64 =
        st.body.lines().nth(2).and_then(|l| l.split_whitespace().nth(2)).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(requests >= 6, "{}", st.body);
}

#[test]
fn large_download_keeps_its_checksum() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let body = pattern(32 << 20);
    let s = h3_server("", "", "").file("html/big.bin", &body).start();
    let started = Instant::now();
    // aioquic is pure Python: on a loaded 2-core machine it takes 32 MB
    // at about 1 MB/s, all of it the client's CPU. The client's 30 s
    // default is for answers, not for this volume.
    let r = run(s.port, &["--timeout", "85", "--request", "GET", "/big.bin"]).one().clone();
    assert_eq!((r.status, r.length, r.error.as_deref()), (200, body.len() as u64, None));
    assert_eq!(r.sha256, sha256_hex(&body));
    println!("32 MB over HTTP/3 in {:?}", started.elapsed());
}

#[test]
fn post_body_reaches_the_proxied_origin() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let origin = Origin::start(|req| Reply::ok(format!("got {} bytes", req.body.len())));
    let o = origin.addr();
    let s = h3_server(
        "",
        "",
        &format!(
            "client_max_body_size 1m;\nlocation /app/ {{ proxy_pass http://{o}/; proxy_set_header X-H3 $http3; }}\n\
             location /file/ {{ client_body_in_file_only on; add_header X-Body-File $request_body_file; \
             proxy_pass http://{o}/; }}"
        ),
    )
    .start();
    let body = pattern(300_000);
    let file = s.path("post.bin");
    std::fs::write(&file, &body).unwrap();
    let f = file.to_str().unwrap();
    let run = run(
        s.port,
        &["--request", "POST", "/app/upload?x=1", "--body-file", f, "--header", "content-type:application/x-test"],
    );
    let r = run.one();
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, "got 300000 bytes");
    let req = origin.last();
    assert_eq!(req.line(), "POST /upload?x=1 HTTP/1.0");
    assert_eq!(req.header("content-length"), Some("300000"));
    assert_eq!(req.header("content-type"), Some("application/x-test"));
    assert_eq!(req.header("x-h3"), Some("h3"));
    assert_eq!(req.header("host"), Some(o.as_str()));
    assert!(req.body == body, "the origin got other bytes");

    // client_body_in_file_only: the body is in the file $request_body_file
    // names, and the file stays.
    let run = common::h3::run(s.port, &["--request", "POST", "/file/x", "--body-file", f]);
    let r = run.one();
    assert_eq!(r.body, "got 300000 bytes", "{r:?}");
    let kept = r.header("x-body-file").unwrap_or_else(|| panic!("no X-Body-File: {r:?}"));
    assert!(std::fs::read(kept).unwrap_or_default() == body, "{kept} does not hold the body");

    // Past client_max_body_size: 413, and the origin sees nothing more.
    let big = s.path("big.bin");
    std::fs::write(&big, pattern(2 << 20)).unwrap();
    let run = common::h3::run(s.port, &["--request", "POST", "/app/x", "--body-file", big.to_str().unwrap()]);
    assert_eq!(run.one().status, 413, "{run:?}");
    assert_eq!(origin.count(), 2);
    s.wait_error_log("client intended to send too large body");

    // An empty body (a DATA frame of no bytes, then the stream's end) is a
    // body: the origin gets `Content-Length: 0`, as from nginx, even for a
    // GET; a GET whose stream ends with its HEADERS has none.
    let empty = s.path("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let run = common::h3::run(s.port, &["--request", "GET", "/app/e", "--body-file", empty.to_str().unwrap()]);
    assert_eq!(run.one().status, 200, "{run:?}");
    assert_eq!(origin.last().header("content-length"), Some("0"));
    let run = common::h3::run(s.port, &["--request", "GET", "/app/n"]);
    assert_eq!(run.one().status, 200, "{run:?}");
    assert_eq!(origin.last().header("content-length"), None);
    assert_eq!(origin.count(), 4);
    // An empty DATA frame inside a body does not end it.
    let run = common::h3::run(s.port, &["--request", "POST", "/app/m", "--body-file", f, "--empty-data-between"]);
    assert_eq!(run.one().body, "got 300000 bytes", "{run:?}");
    assert!(origin.last().body == body, "the origin got other bytes");
    assert_eq!(origin.count(), 5);

    // A body shorter than its content-length: 400 and nginx's line; the
    // origin is not asked.
    let four = s.path("four.bin");
    std::fs::write(&four, b"TEST").unwrap();
    let args =
        ["--request", "POST", "/app/short", "--body-file", four.to_str().unwrap(), "--header", "content-length:5"];
    let run = common::h3::run(s.port, &args);
    assert_eq!(run.one().status, 400, "{run:?}");
    s.wait_error_log("client prematurely closed stream: only 4 out of 5 bytes of request body received");
    assert_eq!(origin.count(), 5);
}

#[test]
fn a_body_no_one_reads_is_stopped() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "", "location / { }").file("html/index.html", "static\n").start();
    let body = s.path("b.bin");
    std::fs::write(&body, b"TEST").unwrap();
    // The client's body never ends: the static answer goes out, then
    // STOP_SENDING H3_NO_ERROR and a QPACK Stream Cancellation for the
    // stream, as nginx does (nginx-tests h3_request_body.t).
    let run = common::h3::run(
        s.port,
        &["--request", "GET", "/index.html", "--body-file", body.to_str().unwrap(), "--no-fin"],
    );
    let r = run.one();
    assert_eq!((r.status, r.body.as_str()), (200, "static\n"), "{run:?}");
    assert_eq!(r.stop_sending, Some(0x100), "{run:?}");
    assert_eq!(run.conn["cancelled"], serde_json::json!([0]), "{run:?}");
    assert!(run.conn["terminated"].is_null(), "{run:?}");
}

#[test]
fn alt_svc_is_advertised_over_tcp() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "", "add_header Alt-Svc 'h3=\":{port}\"; ma=86400';").file("html/index.html", "x").start();
    let want = format!("h3=\":{}\"; ma=86400", s.port);
    for (opt, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let f = fetch(&s, &format!("https://localhost:{}/index.html", s.port), &[opt]);
        assert_eq!((f.status, f.version.as_str()), (200, version));
        assert_eq!(f.header("alt-svc"), Some(want.as_str()), "{f:?}");
    }
    let r = get(s.port, "/index.html");
    assert_eq!(r.header("alt-svc"), Some(want.as_str()));
}

#[test]
fn a_client_that_moves_keeps_its_download() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    // Two workers with a socket each: the new address may hash to the
    // other worker's socket, which hands the datagrams to the owner.
    let body = pattern(4 << 20);
    let s = h3_server("worker_processes 2;", "", "limit_rate 4m;").file("html/big.bin", &body).start();
    for _ in 0..3 {
        let run = run(s.port, &["--request", "GET", "/big.bin", "--rebind-after", "500000"]);
        let r = run.one();
        assert_eq!((r.status, r.error.as_deref()), (200, None), "{run:?}");
        assert_eq!(r.sha256, sha256_hex(&body));
        assert_eq!(run.conn["rebinds"], 1, "{run:?}");
    }
}

#[test]
fn reload_mid_transfer_finishes_it_and_serves_new_connections() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let body = pattern(8 << 20);
    let s = h3_server("worker_processes 2;", "", "limit_rate 2m;").file("html/big.bin", &body).start();
    let flag = s.path("progress");
    let port = s.port;
    let f = flag.to_str().unwrap().to_string();
    let t = std::thread::spawn(move || {
        run(port, &["--request", "GET", "/big.bin", "--on-progress", &f, "--timeout", "60"])
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "the download did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    s.signal("reload");
    s.wait_error_log("reconfigured");
    // A new connection goes to the new generation while the old one
    // finishes the transfer.
    let r = get(s.port, "/big.bin");
    assert_eq!((r.status, r.error.as_deref()), (200, None));
    let run = t.join().unwrap();
    let r = run.one();
    assert_eq!((r.status, r.error.as_deref()), (200, None), "{:?}\n{}", run.conn, s.error_log());
    assert_eq!(r.sha256, sha256_hex(&body));
    // The old generation told the client to go elsewhere for more.
    assert_eq!(run.conn["goaway"], true, "{run:?}");
}

#[test]
fn quic_retry_validates_the_address_first() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "quic_retry on;", "").file("html/index.html", "retried\n").start();
    let r = get(s.port, "/index.html");
    assert_eq!((r.status, r.body.as_str()), (200, "retried\n"));
    // A token the server cannot decrypt: CONNECTION_CLOSE with
    // INVALID_TOKEN (0x0b), as nginx closes, not another Retry.
    let run = run(s.port, &["--token", &"5a".repeat(60), "--timeout", "5"]);
    assert_eq!(run.conn["terminated"]["error_code"], 0x0b, "{run:?}");
}

#[test]
fn config_errors_in_nginx_words() {
    let refused = |http: &str| {
        let s = builder().tls_files().http(http).prepare();
        let o = s.run(&["-t"]);
        assert!(!o.status.success());
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = refused("server {\n listen 127.0.0.1:8443 quic;\n}");
    assert!(e.contains("no \"ssl_certificate\" is defined for the \"listen ... quic\" directive"), "{e}");
    let e = refused(&format!("server {{\n listen 127.0.0.1:8443 quic ssl;\n {CERT}\n}}"));
    assert!(e.contains("\"ssl\" parameter is incompatible with \"quic\""), "{e}");
    let e = refused(&format!("server {{\n listen 127.0.0.1:8443 quic;\n {CERT}\n http3_hq on;\n}}"));
    assert!(e.contains("\"http3_hq on\" is not supported"), "{e}");
    let e =
        refused(&format!("server {{\n listen 127.0.0.1:8443 quic;\n {CERT}\n quic_active_connection_id_limit 1;\n}}"));
    assert!(e.contains("invalid value \"1\" in \"quic_active_connection_id_limit\" directive"), "{e}");
    let ok = builder()
        .tls_files()
        .main("quic_bpf on;")
        .http(&format!(
            "http3 on; http3_max_concurrent_streams 64; http3_stream_buffer_size 128k; quic_gso on; quic_retry off;\n\
             server {{\n listen 127.0.0.1:8443 quic reuseport;\n listen 127.0.0.1:8443 ssl;\n {CERT}\n \
             add_header Alt-Svc 'h3=\":8443\"; ma=86400';\n}}"
        ))
        .prepare();
    let o = ok.run(&["-t"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The master holds the QUIC sockets as it holds the TCP ones: after the
/// serving process dies, a new one reads the same UDP sockets and new
/// connections are served (the dead process's connections are gone).
#[test]
fn a_crash_keeps_the_quic_sockets() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("worker_processes 2;", "", "").file("html/index.html", "hello over h3\n").start();
    assert_eq!(get(s.port, "/index.html").status, 200);
    let before = s.serving_pid();
    let st = std::process::Command::new("kill").args(["-KILL", &before.to_string()]).status().expect("kill");
    assert!(st.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.serving_pid() == before {
        assert!(std::time::Instant::now() < deadline, "no new serving process");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let r = get(s.port, "/index.html");
    assert_eq!((r.status, r.body.as_str()), (200, "hello over h3\n"), "{r:?}");
    s.wait_error_log(&format!("worker process {before} exited on signal 9"));
    // Every UDP socket on the port is one the new serving process reads:
    // it reused the master's (a socket of its own beside them would leave
    // the master's in the reuseport group, unread).
    let port_hex = format!(":{:04X}", s.port);
    let udp = std::fs::read_to_string("/proc/net/udp").unwrap_or_default();
    let on_port: Vec<String> = udp
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(1).is_some_and(|a| a.ends_with(&port_hex)))
        .filter_map(|l| l.split_whitespace().nth(9).map(String::from))
        .collect();
    assert_eq!(on_port.len(), 2, "reuseport sockets on the port: {on_port:?}");
    let child = s.serving_pid();
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{child}/fd"))
        .map(|d| {
            d.flatten().filter_map(|e| std::fs::read_link(e.path()).ok()).map(|p| p.display().to_string()).collect()
        })
        .unwrap_or_default();
    for inode in &on_port {
        assert!(held.contains(&format!("socket:[{inode}]")), "socket {inode} is not the serving process's");
    }
}

/// `mirror` copies an HTTP/3 request with its body, once the proxy has
/// read it, and `post_action` runs after an HTTP/3 answer, as over
/// HTTP/1 and HTTP/2.
#[test]
fn mirror_bodies_and_post_action_over_h3() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let app = Origin::start(|r| Reply::ok(format!("app got {} bytes", r.body.len())));
    let shadow = Origin::start(|_| Reply::ok("shadow"));
    let report = Origin::start(|_| Reply::http(204, &[], ""));
    let s = h3_server(
        "",
        "",
        &format!(
            "location /app/ {{ mirror /mirror; proxy_pass http://{}; }}\n\
             location = /mirror {{ internal; proxy_pass http://{}$request_uri; }}\n\
             location /done {{ post_action @report; }}\n\
             location @report {{ proxy_pass http://{}; }}",
            app.addr(),
            shadow.addr(),
            report.addr()
        ),
    )
    .file("html/done", "finished\n")
    .start();
    let body = pattern(5_000);
    let file = s.path("post.bin");
    std::fs::write(&file, &body).unwrap();
    let run = run(s.port, &["--request", "POST", "/app/form", "--body-file", file.to_str().unwrap()]);
    let r = run.one();
    assert_eq!((r.status, r.body.as_str()), (200, "app got 5000 bytes"), "{r:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while shadow.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = shadow.last();
    assert_eq!((m.line(), m.body.len()), ("POST /app/form HTTP/1.0", 5_000));
    assert_eq!(m.body, body);

    let r = get(s.port, "/done?x=1");
    assert_eq!((r.status, r.body.as_str()), (200, "finished\n"));
    while report.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(report.last().line(), "GET /done?x=1 HTTP/1.0");
}

/// A request whose header section is malformed (an empty `:method`) is
/// answered 400 through the server's `error_page`, as nginx does
/// (nginx-tests h3_request_body.t, "request body after 400 redirect"),
/// not reset; the connection serves the next request.
#[test]
fn a_malformed_request_gets_400_through_error_page() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "", "error_page 400 /bad.html;")
        .file("html/index.html", "hello over h3\n")
        .file("html/bad.html", "bad request page\n")
        .start();
    let run = run(s.port, &["--request", "", "/index.html", "--request", "GET", "/index.html"]);
    let [bad, good] = &run.responses[..] else { panic!("{run:?}") };
    assert_eq!((bad.status, bad.body.as_str(), bad.error.as_deref()), (400, "bad request page\n", None), "{run:?}");
    assert_eq!((good.status, good.body.as_str()), (200, "hello over h3\n"), "{run:?}");
    s.wait_error_log("client sent invalid request headers");
}

/// The QPACK dynamic table (RFC 9204), offered as nginx offers it: the
/// client (aioquic's encoder) inserts the fields it repeats and refers
/// to them; every request is read right (the origin sees each header),
/// and the server's decoder stream acknowledges the sections that used
/// the table and counts the inserts.
#[test]
fn qpack_dynamic_table_references_are_decoded() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server("", "", "location /echo { add_header X-Token $http_x_token; add_header X-Lang $http_accept_language; return 200 \"$arg_n\\n\"; }").start();
    let mut args = vec![
        "--after-settings",
        "--header",
        "x-token:0123456789abcdef0123456789abcdef",
        "--header",
        "accept-language:fr-CH, fr;q=0.9, en;q=0.8",
    ];
    let paths: Vec<String> = (0..8).map(|n| format!("/echo?n={n}")).collect();
    for p in &paths {
        args.extend(["--request", "GET", p.as_str()]);
    }
    let run = run(s.port, &args);
    assert_eq!(run.responses.len(), 8, "{run:?}");
    for (n, r) in run.responses.iter().enumerate() {
        assert_eq!((r.status, r.body.as_str()), (200, format!("{n}\n").as_str()), "{run:?}");
        assert_eq!(r.header("x-token"), Some("0123456789abcdef0123456789abcdef"), "{run:?}");
        assert_eq!(r.header("x-lang"), Some("fr-CH, fr;q=0.9, en;q=0.8"), "{run:?}");
    }
    let c = &run.conn;
    // SETTINGS_QPACK_MAX_TABLE_CAPACITY 4096, SETTINGS_QPACK_BLOCKED_STREAMS 16.
    assert_eq!((c["settings"]["1"].as_u64(), c["settings"]["7"].as_u64()), (Some(4096), Some(16)), "{c}");
    assert!(c["encoder_bytes"].as_u64().unwrap_or(0) > 0, "the client used no dynamic table: {c}");
    assert!(c["inserts_acked"].as_u64().unwrap_or(0) > 0, "no Insert Count Increment: {c}");
    assert!(!c["acked"].as_array().map(|a| a.is_empty()).unwrap_or(true), "no Section Acknowledgment: {c}");
}

/// A resumed session's requests in 0-RTT (aioquic: the ticket the first
/// connection got, requests sent before the handshake completes).
fn early_run(port: u16, ticket: &str, args: &[&str]) -> H3Run {
    let mut all = vec!["--ticket-in", ticket, "--early"];
    all.extend_from_slice(args);
    run(port, &all)
}

#[test]
fn zero_rtt_follows_the_sni_servers_ssl_early_data() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    // localhost (the default server) leaves ssl_early_data off (the
    // default); early.test turns it on.
    let srv = |name: &str, listen: &str, extra: &str| {
        format!(
            "server {{\n  listen 127.0.0.1:{{port}} quic{listen};\n  listen 127.0.0.1:{{port}} ssl;\n  \
             server_name {name};\n  {CERT}\n  {extra}\n  \
             add_header X-Session $ssl_session_reused always;\n  \
             location / {{ return 200 \"early=[$ssl_early_data]\"; }}\n}}\n"
        )
    };
    let s = builder()
        .tls_files()
        .http(&format!("{}{}", srv("localhost", " reuseport", ""), srv("early.test", "", "ssl_early_data on;")))
        .start();
    let t = s.path("off.ticket");
    let t = t.to_str().unwrap();
    let first = run(s.port, &["--ticket-out", t]);
    assert_eq!(first.one().body, "early=[]", "{first:?}");
    // Without ssl_early_data the ticket allows no early data.
    assert_eq!(first.conn["ticket_early"], serde_json::Value::Null, "{first:?}");
    // The client sends 0-RTT anyway: the session resumes, the early data
    // is refused, and the request, sent again in 1-RTT, is answered as
    // any other.
    let r = early_run(s.port, t, &["--force-early"]);
    assert_eq!(r.conn["zero_rtt"], true, "{r:?}");
    assert_eq!((&r.conn["session_resumed"], &r.conn["early_data_accepted"]), (&true.into(), &false.into()), "{r:?}");
    let resp = r.one();
    assert_eq!((resp.status, resp.body.as_str(), resp.header("x-session")), (200, "early=[]", Some("r")), "{r:?}");

    // The server SNI chooses decides: early.test takes 0-RTT.
    let t = s.path("on.ticket");
    let t = t.to_str().unwrap();
    let first = run(s.port, &["--sni", "early.test", "--ticket-out", t]);
    assert_eq!(first.one().body, "early=[]", "{first:?}");
    // QUIC's only allowed value (RFC 9001 4.6.1).
    assert_eq!(first.conn["ticket_early"], 0xffff_ffffu64, "{first:?}");
    let r = early_run(s.port, t, &["--sni", "early.test"]);
    assert_eq!((&r.conn["session_resumed"], &r.conn["early_data_accepted"]), (&true.into(), &true.into()), "{r:?}");
    assert_eq!(r.one().body, "early=[1]", "{r:?}");
}

#[test]
fn zero_rtt_requests_are_early_and_unsafe_ones_get_425() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    let s = h3_server(
        "",
        "ssl_early_data on;",
        "add_header X-Session $ssl_session_reused always;\n\
         location = /e { return 200 \"early=[$ssl_early_data]\"; }\n\
         location = /if { if ($ssl_early_data) { return 425; } return 200 \"late\"; }",
    )
    .start();
    let (t1, t2) = (s.path("1.ticket"), s.path("2.ticket"));
    let (t1, t2) = (t1.to_str().unwrap(), t2.to_str().unwrap());
    let first = run(s.port, &["--ticket-out", t1, "--request", "GET", "/e"]);
    let r = first.one();
    assert_eq!((r.status, r.body.as_str(), r.header("x-session")), (200, "early=[]", Some(".")), "{first:?}");

    // In 0-RTT: a GET is served early; a POST (not a safe method) gets
    // 425 (RFC 8470); nginx's way of refusing early requests by
    // configuration works too. Once the handshake completed, the same
    // requests are not early.
    let run = early_run(
        s.port,
        t1,
        &[
            "--ticket-out",
            t2,
            "--request",
            "GET",
            "/e",
            "--request",
            "POST",
            "/e",
            "--request",
            "GET",
            "/if",
            "--late",
            "GET",
            "/e",
            "--late",
            "POST",
            "/e",
            "--late",
            "GET",
            "/if",
        ],
    );
    assert_eq!(run.conn["zero_rtt"], true, "{run:?}");
    assert_eq!(
        (&run.conn["session_resumed"], &run.conn["early_data_accepted"]),
        (&true.into(), &true.into()),
        "{run:?}"
    );
    let got: Vec<(u16, &str)> = run.responses.iter().map(|r| (r.status, r.body.as_str())).collect();
    assert_eq!(
        got,
        [(200, "early=[1]"), (425, ""), (425, ""), (200, "early=[]"), (200, "early=[]"), (200, "late")],
        "{run:?}"
    );
    assert_eq!(run.responses[0].header("x-session"), Some("r"), "{run:?}");
    let lines = s.wait_access_lines(7);
    assert!(lines.iter().any(|l| l.starts_with("POST /e HTTP/3.0 425 0 HTTP/3.0")), "{lines:?}");

    // A ticket resumes once: the same ClientHello and 0-RTT again (a
    // replay) finds no session; the request goes in 1-RTT instead.
    let again = early_run(s.port, t1, &["--request", "GET", "/e"]);
    assert_eq!(again.conn["zero_rtt"], true, "{again:?}");
    assert_eq!(
        (&again.conn["session_resumed"], &again.conn["early_data_accepted"]),
        (&false.into(), &false.into()),
        "{again:?}"
    );
    assert_eq!((again.one().status, again.one().body.as_str()), (200, "early=[]"), "{again:?}");
    // The ticket the early connection got works, once.
    let next = early_run(s.port, t2, &["--request", "GET", "/e"]);
    assert_eq!(next.conn["early_data_accepted"], true, "{next:?}");
    assert_eq!(next.one().body, "early=[1]", "{next:?}");
}

#[test]
fn an_early_connection_whose_handshake_never_completes_is_closed() {
    if skip_in_nginx_mode("nginx 1.22 has no HTTP/3") {
        return;
    }
    // client_header_timeout bounds the handshake, also when the requests
    // sent in 0-RTT are served before it completes.
    let s = h3_server(
        "",
        "ssl_early_data on; client_header_timeout 2s;",
        "location = /e { return 200 \"early=[$ssl_early_data]\"; }",
    )
    .start();
    let t = s.path("ticket");
    let t = t.to_str().unwrap();
    assert_eq!(run(s.port, &["--ticket-out", t, "--request", "GET", "/e"]).one().body, "early=[]");
    // The client sends its ClientHello and request, then nothing: no
    // Finished. The request is answered all the same (0.5-RTT data).
    let r = early_run(s.port, t, &["--mute", "--timeout", "5", "--request", "GET", "/e"]);
    assert_eq!((r.one().status, r.one().body.as_str()), (200, "early=[1]"), "{r:?}");
    let log = wait_contains(
        &s.path("logs/error.log"),
        "client timed out (110: Connection timed out) while SSL handshaking",
        Duration::from_secs(10),
    );
    assert!(log.contains("while SSL handshaking, client: 127.0.0.1"), "{log}");
}
