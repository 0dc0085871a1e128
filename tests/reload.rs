//! Reconfiguration and shutdown under traffic: `-s reload` while wrk runs
//! (keep-alive and a connection per request), a broken config keeps the old
//! one serving, listen sockets added and removed by reload, and `-s quit` /
//! `-s stop` with a download in flight.

mod common;

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

fn gif_conf(extra: &str) -> String {
    format!(
        "access_log off;\n{extra}\n\
         server {{ listen 127.0.0.1:{{port}}; location = /empty.gif {{ empty_gif; }} location / {{ return 200 \"v1\\n\"; }} }}"
    )
}

/// 20 reloads ~0.25 s apart while wrk runs; returns wrk's result.
fn reload_under_load(extra: &str) -> (WrkResult, TestServer) {
    let s = builder().http(&gif_conf(extra)).start();
    let url = s.url("/empty.gif");
    let wrk = wrk_start(&["-t1", "-c20", "-d7s", "--timeout", "5s", &url]);
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..20 {
        s.signal("reload");
        std::thread::sleep(Duration::from_millis(250));
    }
    let res = wrk_finish(wrk, Duration::from_secs(20));
    (res, s)
}

fn assert_clean(res: &WrkResult, s: &TestServer) {
    assert!(res.requests > 0, "no requests completed:\n{}", res.output);
    assert_eq!(res.error_count(), 0, "socket errors during reloads: {:?}\n{}", res.socket_errors, res.output);
    assert!(res.non_2xx.is_none(), "non-2xx responses during reloads: {:?}\n{}", res.non_2xx, res.output);
    // still serving, and all 20 reloads were processed
    assert_eq!(s.get("/empty.gif").body, EMPTY_GIF);
    let log = s.error_log();
    let n = log.lines().filter(|l| l.contains("(SIGHUP) received")).count();
    assert_eq!(n, 20, "reloads logged:\n{log}");
    let bad: Vec<&str> =
        log.lines().filter(|l| l.contains("[alert]") || l.contains("[crit]") || l.contains("[emerg]")).collect();
    assert!(bad.is_empty(), "alerts in error.log:\n{}", bad.join("\n"));
}

#[test]
fn reload_20_times_under_keepalive_load() {
    let (res, s) = reload_under_load("keepalive_timeout 65; keepalive_requests 100000;");
    assert_clean(&res, &s);
}

#[test]
fn reload_20_times_under_connection_per_request_load() {
    let (res, s) = reload_under_load("keepalive_timeout 0;");
    assert_clean(&res, &s);
}

fn body_of(s: &TestServer) -> String {
    s.get("/").text()
}

/// Polls until `/` answers `want` 5 times in a row (old workers may take a
/// moment to stop accepting after a reload), up to 10 s.
fn wait_body(s: &TestServer, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut streak = 0;
    loop {
        let got = body_of(s);
        if got == want {
            streak += 1;
            if streak == 5 {
                return;
            }
            continue;
        }
        streak = 0;
        assert!(Instant::now() < deadline, "still answering {got:?}, expected {want:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

const V_CONF: &str = "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
                      http {\n    access_log off;\n    server {\n        listen 127.0.0.1:{port};\n";

#[test]
fn broken_config_reload_keeps_old_config() {
    let s = builder().whole(&format!("{V_CONF}        return 200 \"v1\\n\";\n    }}\n}}\n")).start();
    assert_eq!(body_of(&s), "v1\n");

    // line 9 has the bad directive
    s.write_conf(&format!("{V_CONF}        bogus_directive on;\n        return 200 \"v2\\n\";\n    }}\n}}\n"));
    let want = format!("unknown directive \"bogus_directive\" in {}:9", s.conf_path().display());
    // `-s reload` reads the config first, as nginx does, and refuses.
    let out = s.run(&["-s", "reload"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains(&format!("[emerg] {want}")), "{}", stderr_of(&out));
    // A SIGHUP sent directly (as by a service manager) makes the running
    // server try the broken file: it logs the error and keeps serving.
    s.kill("HUP");
    let log = s.wait_error_log(&want);
    assert!(line_with(&log, &want).contains("[emerg]"), "{log}");
    // old configuration still answers, on new connections too
    for _ in 0..5 {
        assert_eq!(body_of(&s), "v1\n");
    }
    // a keep-alive connection opened before keeps working as well
    let mut c = s.connect();
    c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().text(), "v1\n");

    s.write_conf(&format!("{V_CONF}        return 200 \"v2\\n\";\n    }}\n}}\n"));
    s.signal("reload");
    wait_body(&s, "v2\n");
}

fn refuses(port: u16) -> bool {
    match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)) {
        Err(e) => e.kind() == ErrorKind::ConnectionRefused,
        Ok(_) => false,
    }
}

#[test]
fn reload_adds_and_removes_listen_ports() {
    let one = "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
               http { access_log off; server { listen 127.0.0.1:{port0}; return 200 \"a\\n\"; } }\n";
    let both = "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
                http { access_log off;\n server { listen 127.0.0.1:{port0}; return 200 \"a\\n\"; }\n\
                server { listen 127.0.0.1:{port1}; return 200 \"b\\n\"; } }\n";
    let only_new = "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
                    http { access_log off; server { listen 127.0.0.1:{port1}; return 200 \"b\\n\"; } }\n";
    let s = builder().whole(one).ports(2).start();
    let (p0, p1) = (s.ports[0], s.ports[1]);
    assert!(refuses(p1));
    let get = |p: u16| request(p, "GET / HTTP/1.0\r\n\r\n").text();
    assert_eq!(get(p0), "a\n");

    s.write_conf(both);
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !port_accepts(p1) {
        assert!(Instant::now() < deadline, "new port {p1} never opened:\n{}", s.error_log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(p1), "b\n");
    assert_eq!(get(p0), "a\n");

    s.write_conf(only_new);
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !refuses(p0) {
        assert!(Instant::now() < deadline, "removed port {p0} still accepts:\n{}", s.error_log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(p1), "b\n");
}

const BIG: usize = 20 * 1024 * 1024;

fn download_server() -> (TestServer, Vec<u8>) {
    let data = pseudo_random(BIG, 7);
    let s = builder()
        .http("sendfile on;\nserver { listen 127.0.0.1:{port}; root html; }")
        .file("html/big.bin", &data)
        .start();
    (s, data)
}

/// Starts a download and reads the head plus ~1 MB of body.
fn start_download(s: &TestServer) -> (TcpStream, Vec<u8>) {
    let mut st = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    st.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    use std::io::Write;
    st.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    while got.len() < 1024 * 1024 {
        let n = st.read(&mut buf).expect("reading start of download");
        assert!(n > 0, "closed early");
        got.extend_from_slice(&buf[..n]);
    }
    (st, got)
}

fn split_body(all: &[u8]) -> (String, &[u8]) {
    let i = all.windows(4).position(|w| w == b"\r\n\r\n").expect("no head");
    (String::from_utf8_lossy(&all[..i]).into_owned(), &all[i + 4..])
}

#[test]
fn quit_lets_slow_download_finish() {
    let (mut s, data) = download_server();
    let (mut st, mut got) = start_download(&s);
    s.signal("quit");
    let mut checks = Checks::new();
    // New connections are refused once the listener is closed.
    checks.run("listener closed", || {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !refuses(s.port) {
            assert!(Instant::now() < deadline, "new connections still accepted 5 s after -s quit");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // Read the rest slowly (~10 MB/s at most).
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut checked_alive = false;
    loop {
        assert!(Instant::now() < deadline, "download too slow");
        let n = match st.read(&mut buf) {
            Ok(n) => n,
            Err(e) => panic!("download broken after {} bytes: {e}", got.len()),
        };
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if !checked_alive && got.len() > BIG / 2 {
            assert!(s.is_running(), "server exited with a download in flight");
            checked_alive = true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (head, body) = split_body(&got);
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert_eq!(body.len(), data.len(), "download truncated");
    assert!(body == data.as_slice(), "download corrupted");
    let st = s.wait_exit(Duration::from_secs(10)).expect("server did not exit after the download finished");
    assert!(st.success(), "exit status {st}");
    assert!(!s.path("logs/sluice.pid").exists(), "pid file left after quit");
    checks.finish();
}

#[test]
fn stop_exits_promptly_despite_download() {
    let (mut s, data) = download_server();
    let (mut st, mut got) = start_download(&s);
    // The client stops reading; a graceful shutdown would wait for it.
    s.signal("stop");
    let st_exit = s.wait_exit(Duration::from_secs(5)).expect("server still running 5 s after -s stop");
    assert!(st_exit.success(), "exit status after -s stop: {st_exit}");
    // The connection is gone without the whole file.
    let mut buf = vec![0u8; 65536];
    loop {
        match st.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!("connection not closed after stop: {e}"),
        }
    }
    let (_, body) = split_body(&got);
    assert!(body.len() < data.len(), "whole file delivered; stop was not a fast shutdown");
    assert!(refuses(s.port));
}
