//! Behaviours nginx's own test suite (nginx-tests) showed sluice lacked,
//! each checked here as a client, an origin or the logs see it; the name
//! of the nginx test file that found it is given with each. With
//! SLUICE_TEST_NGINX=1 they run against Debian's nginx too.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// proxy_connection_headers.t: an origin's `Upgrade` in a 200 or a 426
/// reaches an HTTP/1.1 client (RFC 9110 7.8: a 426 must carry it).
#[test]
fn upgrade_in_a_200_or_426_reaches_the_client() {
    let o = Origin::start(|r| {
        let status = if r.target().ends_with("426") { 426 } else { 200 };
        Reply::http(status, &["Connection: Upgrade", "Upgrade: websocket"], "")
    });
    let s = proxy(
        "server { listen 127.0.0.1:{port}; location / { proxy_pass http://127.0.0.1:%A%; proxy_http_version 1.1; } }",
        &[("%A%", o.port)],
    );
    for (path, status) in [("/upgrade200", 200), ("/upgrade426", 426)] {
        let r = s.get(path);
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.header("upgrade"), Some("websocket"), "{path}");
    }
}

/// proxy_if.t: `proxy_pass` inside an `if` whose settings a later `if`
/// replaced: nginx keeps the handler without its upstream, and answers
/// 500 with "no upstream configuration".
#[test]
fn proxy_pass_lost_by_a_later_if_is_a_500() {
    let o = Origin::ok("origin");
    let s = proxy(
        "server { listen 127.0.0.1:{port};
            location /crash { set $true 1; if ($true) { proxy_pass http://127.0.0.1:%A%; } if ($true) { } }
            location /one { set $true 1; if ($true) { proxy_pass http://127.0.0.1:%A%; } }
        }",
        &[("%A%", o.port)],
    );
    assert_eq!(s.get("/crash").status, 500);
    s.wait_error_log("no upstream configuration");
    assert_eq!(s.get("/one").text(), "origin");
    assert_eq!(o.count(), 1);
}

/// http_host.t: an absolute-form target with an IPvFuture literal host.
#[test]
fn absolute_form_with_an_ipvfuture_host() {
    let s = start_http("server { listen 127.0.0.1:{port}; return 200 \"host=$host\"; }");
    let r = request(s.port, "GET http://[v0123456789aBcDeF.!$&'()*+,;=-._~AbC:]/ HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "host=[v0123456789abcdef.!$&'()*+,;=-._~abc:]");
    let r = request(s.port, "GET http://[a@b]/ HTTP/1.0\r\nHost: localhost\r\n\r\n");
    assert_eq!(r.status, 400);
}

/// proxy.t ("response time - next 2"): at header time the try in progress
/// has no response time yet; the one that failed before it has.
#[test]
fn upstream_response_time_at_header_time() {
    let good = Origin::ok("fine");
    let s = proxy(
        "upstream u { server 127.0.0.1:%B%; server 127.0.0.1:%A%; }
         log_format t '$upstream_response_time';
         server { listen 127.0.0.1:{port};
            access_log logs/t.log t;
            add_header X-Response $upstream_response_time;
            location / { proxy_pass http://u; proxy_next_upstream error; }
         }",
        &[("%A%", good.port), ("%B%", free_port())],
    );
    let mut seen = Vec::new();
    for _ in 0..2 {
        let r = s.get("/");
        assert_eq!(r.text(), "fine");
        seen.push(r.must("x-response").to_string());
    }
    // Round robin: one request tried the closed port first.
    assert!(seen.iter().any(|v| v.len() == 8 && v.ends_with(", -")), "{seen:?}");
    assert!(seen.iter().any(|v| v == "-"), "{seen:?}");
    // The access log has every try's time.
    let lines = wait_lines(&s.path("logs/t.log"), 2, Duration::from_secs(5));
    assert!(lines.iter().all(|l| !l.contains('-')), "{lines:?}");
}

/// proxy_request_buffering_ssl.t: with `proxy_request_buffering off`, the
/// body bytes that came with the request's head go to the origin in the
/// same write as its head.
#[test]
fn unbuffered_preread_goes_with_the_head() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let s = proxy(
        "server { listen 127.0.0.1:{port}; location / { proxy_pass http://127.0.0.1:%A%; proxy_request_buffering off; } }",
        &[("%A%", port)],
    );
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"POST /p HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: 10\r\n\r\n01234").unwrap();
    let (mut o, _) = l.accept().unwrap();
    o.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = [0u8; 4096];
    let n = o.read(&mut b).unwrap();
    let first = String::from_utf8_lossy(&b[..n]).into_owned();
    assert!(first.ends_with("\r\n\r\n01234"), "{first:?}");
    c.write_all(b"56789").unwrap();
    let n = o.read(&mut b).unwrap();
    assert_eq!(&b[..n], b"56789");
    o.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").unwrap();
    drop(o);
    let mut got = Vec::new();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = c.read_to_end(&mut got);
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
}

/// subrequest_output_buffer_size.t: an SSI `include ... set=` whose answer
/// is larger than `subrequest_output_buffer_size` ends the whole request:
/// nothing is sent, and the error log says why.
#[test]
fn a_too_big_in_memory_subrequest_ends_the_request() {
    let s = builder()
        .ports(2)
        .file("html/ssi.html", "<!--#include virtual=\"/$arg_c\" set=\"x\" -->set: <!--#echo var=\"x\" -->")
        .file("html/long", "x".repeat(400))
        .file("html/short", "short")
        .http(
            "server { listen 127.0.0.1:{port0}; root html;
                location / { proxy_pass http://127.0.0.1:{port1}; subrequest_output_buffer_size 42; }
                location /ssi { ssi on; }
             }
             server { listen 127.0.0.1:{port1}; root html; }",
        )
        .start();
    let ok = request(s.port, "GET /ssi.html?c=short HTTP/1.0\r\nHost: t\r\n\r\n");
    assert_eq!(ok.text(), "set: short");
    let raw = request_to_close(s.port, b"GET /ssi.html?c=long HTTP/1.0\r\nHost: t\r\n\r\n");
    assert!(raw.is_empty(), "{}", String::from_utf8_lossy(&raw));
    s.wait_error_log("too big subrequest response");
}

/// stub_status.t: a client that closes while `limit_rate` paces its
/// response no longer counts as an active connection.
#[test]
fn a_client_gone_during_limit_rate_is_not_active() {
    let s = start_http(
        "server { listen 127.0.0.1:{port}; location /rate { limit_rate 15; return 200 \"%BODY%\"; } location /stub { stub_status; } }"
            .replace("%BODY%", &"y".repeat(300))
            .as_str(),
    );
    let active = || {
        let t = s.get("/stub").text();
        t.lines().next().unwrap_or("").trim_start_matches("Active connections:").trim().parse::<u32>().unwrap()
    };
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.write_all(b"GET /rate HTTP/1.0\r\nHost: t\r\n\r\n").unwrap();
    let mut b = [0u8; 16];
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(c.read(&mut b).unwrap() > 0);
    assert_eq!(active(), 2);
    drop(c);
    // At once, not at the paced write after the close that fails.
    let t0 = Instant::now();
    while active() != 1 {
        assert!(t0.elapsed() < Duration::from_millis(700), "the paced connection stayed active");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// syslog.t ("send error - recover"): a syslog receiver that went away and
/// came back gets the next line at once.
#[test]
fn syslog_lines_reach_a_receiver_that_came_back() {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = rx.local_addr().unwrap().port();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let s = start_http(&format!(
        "server {{ listen 127.0.0.1:{{port}}; location / {{ access_log syslog:server=127.0.0.1:{port}; return 204; }} }}"
    ));
    let mut b = [0u8; 2048];
    s.get("/one");
    assert!(rx.recv(&mut b).unwrap() > 0);
    drop(rx);
    // Lines to nobody: one refused (ICMP), which drops the socket.
    s.get("/lost");
    s.get("/lost");
    let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s.get("/back");
    let n = rx.recv(&mut b).expect("the line after the receiver came back");
    assert!(String::from_utf8_lossy(&b[..n]).contains("GET /back"), "{}", String::from_utf8_lossy(&b[..n]));
}

/// config_dump.t: a file included twice is dumped once by `-T`.
#[test]
fn dump_shows_a_twice_included_file_once() {
    let s = builder()
        .conf_file("conf/inc.conf", "# included\n")
        .main("include inc.conf;\ninclude inc.conf;")
        .http("server { listen 127.0.0.1:{port}; }")
        .prepare();
    let out = s.run(&["-T"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr_of(&out));
    let dump = stdout_of(&out);
    assert_eq!(dump.matches("inc.conf:\n").count(), 1, "{dump}");
}

/// fastcgi_keepalive.t: a HEAD is answered as soon as the application's
/// head came, not when it finished a body nobody reads; the connection to
/// it is then not reused.
#[test]
fn fastcgi_head_is_answered_without_waiting_for_the_body() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            std::thread::spawn(move || {
                loop {
                    let mut h = [0u8; 8];
                    if c.read_exact(&mut h).is_err() {
                        return;
                    }
                    let len = u16::from_be_bytes([h[4], h[5]]) as usize + h[6] as usize;
                    let mut skip = vec![0u8; len];
                    if c.read_exact(&mut skip).is_err() {
                        return;
                    }
                    if h[1] == 5 && len == 0 {
                        break;
                    }
                }
                let _ = c.write_all(&common::fcgi_app::rec(6, b"Content-Type: text/plain\r\n\r\nbody"));
                std::thread::sleep(Duration::from_secs(2));
                let _ = c.write_all(&[common::fcgi_app::rec(6, b""), common::fcgi_app::end_request()].concat());
            });
        }
    });
    let s = start_http(&format!(
        "upstream app {{ server 127.0.0.1:{port}; keepalive 2; }}
         server {{ listen 127.0.0.1:{{port}}; location / {{ fastcgi_pass app; fastcgi_keep_conn on; }} }}"
    ));
    let t0 = Instant::now();
    let r = request(s.port, "HEAD /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(t0.elapsed() < Duration::from_millis(1500), "{:?}", t0.elapsed());
    assert!(r.text().is_empty());
}

/// gunzip_ssi.t: an SSI include of a gzip origin through `gunzip on` is
/// decompressed in the page even for a client that takes gzip (the
/// include is a subrequest, which never takes it).
#[test]
fn gunzip_in_an_ssi_include_for_a_gzip_client() {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b"INCLUDED-TEXT").unwrap();
    let s = builder()
        .ports(2)
        .file("html/t1.gz", e.finish().unwrap())
        .file("html/t.html", "xxx <!--#include virtual=\"/t1\" --> xxx")
        .http(
            "server { listen 127.0.0.1:{port0};
                location / { gunzip on; proxy_pass http://127.0.0.1:{port1}/; proxy_set_header Accept-Encoding gzip; }
                location /t.html { root html; ssi on; }
             }
             server { listen 127.0.0.1:{port1}; root html; default_type text/plain; gzip_static on; gzip_http_version 1.0; }",
        )
        .start();
    let r = s.get_with("/t.html", &["Accept-Encoding: gzip"]);
    assert_eq!(r.header("content-encoding"), None);
    assert_eq!(r.text(), "xxx INCLUDED-TEXT xxx");
}

/// proxy_cache_lock_ssi.t: an SSI page's includes run at the same time
/// (nginx starts each subrequest as its parser meets it), and their
/// answers keep the page's order; `wait="yes"` still waits.
#[test]
fn ssi_includes_run_at_the_same_time_in_page_order() {
    let o = Origin::start(|r| Reply::ok(r.target().trim_start_matches('/')).after(Duration::from_millis(700)));
    let s = builder()
        .file(
            "html/page.html",
            "[<!--#include virtual=\"/o/a\" -->|<!--#include virtual=\"/o/b\" -->|<!--#include virtual=\"/o/c\" -->]",
        )
        .file(
            "html/wait.html",
            "[<!--#include virtual=\"/o/a\" wait=\"yes\" -->|<!--#include virtual=\"/o/b\" wait=\"yes\" -->]",
        )
        .http(&sub(
            "server { listen 127.0.0.1:{port}; root html; ssi on;
                location /o/ { proxy_pass http://127.0.0.1:%A%/; }
             }",
            &[("%A%", o.port)],
        ))
        .start();
    let t0 = Instant::now();
    assert_eq!(s.get("/page.html").text(), "[a|b|c]");
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1400), "{took:?}");
    let t0 = Instant::now();
    assert_eq!(s.get("/wait.html").text(), "[a|b]");
    assert!(t0.elapsed() >= Duration::from_millis(1400), "{:?}", t0.elapsed());
}

/// ssl_sni_reneg.t: a TLS 1.2 client that renegotiates mid-request loses
/// its connection after the `no_renegotiation` alert, with nginx's notice;
/// rustls alone would refuse with the alert and leave the client waiting
/// for a new handshake.
#[test]
fn tls12_renegotiation_ends_the_connection() {
    use common::tls::TlsFiles;
    let s = builder()
        .tls_files()
        .http(
            "server { listen 127.0.0.1:{port} ssl; server_name localhost;\n  \
             ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;\n  \
             ssl_protocols TLSv1.2; location / { return 200 \"served\\n\"; } }",
        )
        .start();
    // `openssl s_client` renegotiates when a read of its input starts
    // with "R"; each piece goes in its own read. Its input stays open, so
    // it ends only when the server closes.
    let client = |pieces: &[&str]| {
        let mut c = std::process::Command::new("openssl")
            .args(["s_client", "-tls1_2", "-crlf", "-connect", &format!("127.0.0.1:{}", s.port)])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("openssl s_client");
        let mut input = c.stdin.take().expect("stdin");
        std::thread::sleep(Duration::from_millis(500));
        for p in pieces {
            let _ = input.write_all(p.as_bytes());
            let _ = input.flush();
            std::thread::sleep(Duration::from_millis(400));
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let ended = c.try_wait().ok().flatten().is_some();
        drop(input);
        let _ = c.kill();
        let mut out = String::new();
        if let Some(mut o) = c.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(mut e) = c.stderr.take() {
            let _ = e.read_to_string(&mut out);
        }
        let _ = c.wait();
        (ended, out)
    };
    let (_, plain) = client(&["GET / HTTP/1.0\n", "Host: localhost\n\n"]);
    assert!(plain.contains("served"), "without renegotiation: {plain}");
    let (ended, out) = client(&["GET / HTTP/1.0\n", "R\n", "Host: localhost\n\n"]);
    assert!(out.contains("RENEGOTIATING"), "the client did not renegotiate: {out}");
    assert!(ended, "the server kept the connection");
    // OpenSSL's warning alert, which is what tells a client (and testssl)
    // that the renegotiation was refused.
    assert!(out.contains("no renegotiation"), "no refusal alert: {out}");
    assert!(
        !out.contains("served") && !out.contains("HTTP/1.1"),
        "answered after a renegotiation: {}",
        &out[out.len().saturating_sub(600)..]
    );
    if !common::tls::nginx_mode() {
        let log = wait_contains(&s.path("logs/error.log"), "renegotiation", Duration::from_secs(5));
        assert!(line_with(&log, "SSL renegotiation disabled").contains("[notice]"), "{log}");
    }
}
