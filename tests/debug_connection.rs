//! `[debug]` error-log lines and `events { debug_connection }`: a log at
//! level `debug` gets the debug lines of every request it handles; a
//! client that `debug_connection` names gets them in every log whatever
//! its level, each log the same lines, and other clients none. The
//! client is told apart by its source address (127.0.0.2 on loopback),
//! or is a unix-socket one (`unix:`); stream sessions follow it too.
//! With SLUICE_TEST_NGINX=1 the same runs against Debian's nginx, built
//! `--with-debug`, whose far more numerous lines are checked only for
//! `[debug]` and which connection they are about.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::*;

fn nginx_mode() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// A request from 127.0.0.2 (loopback routes all of 127/8), read to the
/// end: HTTP/1.0 closes the connection after the response.
fn get_from_127_0_0_2(port: u16, path: &str) -> String {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into()).expect("bind 127.0.0.2");
    sock.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into()).expect("connect");
    let mut c: TcpStream = sock.into();
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").as_bytes()).expect("write");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn named_client_logs_debug_to_every_log_and_others_nothing() {
    let s = builder()
        .events("debug_connection 127.0.0.2;")
        .http(
            "error_log logs/d1.log alert;
            error_log logs/d2.log alert;
            server {
                listen 127.0.0.1:{port0};
                location / { return 204; }
                location /up { proxy_pass http://127.0.0.1:{port0}/; }
            }",
        )
        .start();
    // 127.0.0.1 is not named: nothing reaches the alert-level logs.
    assert_eq!(s.get("/plain").status, 204);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_lossy(&s.path("logs/d1.log")), "", "a client not named wrote to d1.log");
    assert_eq!(read_lossy(&s.path("logs/d2.log")), "", "a client not named wrote to d2.log");

    let resp = get_from_127_0_0_2(s.ports[0], "/up/x");
    assert!(resp.starts_with("HTTP/1.1 204"), "{resp}");
    let last = if nginx_mode() { "\"/up/x\"" } else { "http finalize request: 204" };
    wait_contains(&s.path("logs/d1.log"), last, LOG_WAIT);
    std::thread::sleep(Duration::from_millis(200));
    let (d1, d2) = (read_lossy(&s.path("logs/d1.log")), read_lossy(&s.path("logs/d2.log")));
    assert!(d1.contains(" [debug] "), "{d1}");
    assert_eq!(d1, d2, "both logs get the same lines");
    // Every line is about the 127.0.0.2 connection (the proxied request
    // to 127.0.0.1 is another client's, not named).
    let conn = line_with(&d1, "/up/x").split(": *").nth(1).and_then(|r| r.split(' ').next()).map(str::to_string);
    let conn = conn.unwrap_or_else(|| panic!("no *N in {d1}"));
    // (nginx also dumps the proxied request's head, over several lines.)
    for l in d1.lines().filter(|l| l.contains(" [debug] ")) {
        assert!(l.contains(&format!(": *{conn} ")), "another connection's line: {l}");
    }
    if !nginx_mode() {
        line_with(&d1, "accept: 127.0.0.2:");
        line_with(&d1, "http request line: \"GET /up/x HTTP/1.0\"");
        line_with(&d1, "http uri: \"/up/x\"");
        line_with(&d1, "http upstream request: \"/up/x\"");
        line_with(&d1, &format!("connect to 127.0.0.1:{}", s.ports[0]));
        line_with(&d1, "http finalize request: 204, \"/up/x\"");
        assert!(!d1.contains("/plain") && !d1.contains("\"/x\""), "{d1}");
    }
}

#[test]
fn debug_level_log_gets_every_clients_lines_others_none() {
    let s = builder()
        .ports(2)
        .http(
            "server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                error_log logs/all.log debug;
                error_log logs/info.log info;
                location / { return 204; }
            }",
        )
        .start();
    assert_eq!(s.get("/seen").status, 204);
    let all = wait_contains(&s.path("logs/all.log"), "[debug]", LOG_WAIT);
    if !nginx_mode() {
        wait_contains(&s.path("logs/all.log"), "http finalize request: 204", LOG_WAIT);
        assert!(all.contains("http request line: \"GET /seen HTTP/1.1\""), "{all}");
    }
    // HTTP/2 streams are the connection's.
    let h2 = curl(&["--http2-prior-knowledge", "-o", "/dev/null", &format!("http://127.0.0.1:{}/h2", s.ports[1])]);
    assert!(h2.status.success(), "{}", h2.stderr);
    let all = wait_contains(&s.path("logs/all.log"), "\"/h2\"", LOG_WAIT);
    if !nginx_mode() {
        assert!(all.contains("http2 request line: \"GET /h2 HTTP/2.0\""), "{all}");
    }
    let info = read_lossy(&s.path("logs/info.log"));
    assert!(!info.contains("[debug]"), "{info}");
}

#[test]
fn unix_names_the_unix_socket_clients() {
    let s = builder()
        .events("debug_connection unix:;")
        .http(
            "error_log logs/d.log alert;
            server {
                listen 127.0.0.1:{port0};
                listen unix:{prefix}/u.sock;
                location / { return 204; }
            }",
        )
        .start();
    assert_eq!(s.get("/tcp").status, 204);
    let sock = s.path("u.sock").display().to_string();
    let out = curl(&["--unix-socket", &sock, "-o", "/dev/null", "http://localhost/unix"]);
    assert!(out.status.success(), "{}", out.stderr);
    let log = wait_contains(&s.path("logs/d.log"), "\"/unix", LOG_WAIT);
    assert!(log.contains(" [debug] "), "{log}");
    assert!(!log.contains("/tcp"), "the TCP client is not named:\n{log}");
    if !nginx_mode() {
        line_with(&log, "accept: unix: fd:");
    }
}

#[test]
fn stream_session_of_a_named_client_logs_everything() {
    // Debian's nginx has stream as a dynamic module.
    let load = if nginx_mode() { "load_module /usr/lib/nginx/modules/ngx_stream_module.so;" } else { "" };
    let s = builder()
        .events("debug_connection 127.0.0.1;")
        .main(load)
        .main(
            "stream {
                server {
                    listen 127.0.0.1:{port0};
                    proxy_pass 127.0.0.1:1;
                    error_log logs/s.log emerg;
                }
            }",
        )
        .http("")
        .start();
    // Nothing listens on port 1: the session's connect() error is logged
    // at `error`, and to the emerg-level log only because the client is
    // named.
    let mut c = TcpStream::connect(("127.0.0.1", s.ports[0])).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    let _ = c.read_to_end(&mut Vec::new());
    let log = wait_contains(&s.path("logs/s.log"), "[error]", LOG_WAIT);
    assert!(log.contains(" [debug] "), "{log}");
    if !nginx_mode() {
        line_with(&log, "accept: 127.0.0.1:");
    }
}
