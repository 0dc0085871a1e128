//! The master process (`master_process on`, the default): faults that no
//! unwinding catches end the serving process, and the master starts a new
//! one on the same listening sockets within a second, so no connection is
//! refused meanwhile; a crash loop backs off; `master_process off` is one
//! process that a fault ends. The faults come from the test hook
//! (`SLUICE_TEST_PANIC_HEADER`, docs/cli.md): a request whose header says
//! `abort` or `segv`, and `kill -9` of the serving process.
//!
//! sluice's own behaviour (nginx has no such hook): these tests return
//! early with SLUICE_TEST_NGINX=1.

mod common;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::cache::origin;
use common::*;

const FAULT: &str = "x-fault";

fn sluice_only() -> bool {
    if prog() == "nginx" {
        println!("note: skipped in nginx mode: the fault hook is sluice's");
        return false;
    }
    true
}

/// Sends a request that ends the serving process: no answer, the
/// connection just closes.
fn fault(port: u16, how: &str) {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
    c.write_all(format!("GET /static/f.txt HTTP/1.1\r\nHost: x\r\n{FAULT}: {how}\r\n\r\n").as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(out.is_empty(), "the {how} request was answered: {}", String::from_utf8_lossy(&out));
}

/// Polls with new connections until `path` answers 200; returns how long
/// it took. Every connect must succeed: the master keeps the sockets.
fn answered_after(port: u16, path: &str) -> Duration {
    let t0 = Instant::now();
    loop {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect refused during the restart");
        c.set_read_timeout(Some(Duration::from_secs(3))).expect("timeout");
        let _ = c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.starts_with(b"HTTP/1.1 200") {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(25), "no answer 25 s after the crash");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// wrk's count of failed connects ("Socket errors: connect N, ...").
fn connect_errors(w: &WrkResult) -> u64 {
    w.socket_errors
        .as_deref()
        .and_then(|l| l.split("connect ").nth(1))
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn crashes_are_restarted_on_the_same_sockets_without_refusing_a_connection() {
    if !sluice_only() {
        return;
    }
    let (o, n) = origin();
    let proxied = common::origin::Origin::start(|_| common::origin::Reply::ok("proxied\n"));
    let cache = temp_dir("sup-cache");
    let s = builder()
        .env("SLUICE_TEST_PANIC_HEADER", FAULT)
        .main("worker_processes 2;")
        .file("html/static/f.txt", "static file\n")
        .http(&format!(
            "proxy_cache_path {} levels=1:2 keys_zone=c:1m;\n\
             server {{ listen 127.0.0.1:{{port}}; root html;\n\
               location /proxy/ {{ proxy_pass http://127.0.0.1:{}; }}\n\
               location /cache/ {{ proxy_pass http://127.0.0.1:{}; proxy_cache c; proxy_cache_valid 200 1h;\n\
                 add_header X-Cache $upstream_cache_status; }}\n\
             }}",
            cache.display(),
            proxied.port,
            o.port
        ))
        .start();
    assert_eq!(s.get("/cache/a").header("X-Cache"), Some("MISS"));
    assert_eq!(s.get("/cache/a").header("X-Cache"), Some("HIT"));
    let stored = n.load(std::sync::atomic::Ordering::SeqCst);
    let master = s.pid();
    let loads: Vec<_> = ["/static/f.txt", "/proxy/p", "/cache/a"]
        .iter()
        .map(|p| wrk_start(&["-t1", "-c8", "-d9s", &s.url(p)]))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for (how, signal) in [("segv", "signal 11"), ("abort", "signal 6"), ("kill", "signal 9")] {
        let before = s.serving_pid();
        if how == "kill" {
            let st = std::process::Command::new("kill").args(["-KILL", &before.to_string()]).status().expect("kill");
            assert!(st.success());
        } else {
            fault(s.port, how);
        }
        let took = answered_after(s.port, "/static/f.txt");
        assert!(took < Duration::from_secs(1), "{how}: first answer {took:?} after the crash");
        let after = s.serving_pid();
        assert_ne!(after, before, "{how}: the same serving process");
        let log = s.wait_error_log(&format!("worker process {before} exited on {signal}"));
        let line = line_with(&log, &format!("worker process {before} exited"));
        assert!(line.contains(&format!(" [alert] {master}#")), "{line}");
        assert!(log.contains(&format!("[notice] {master}#{master}: start worker process {after}")), "{log}");
        // Two seconds apart: not a crash loop.
        std::thread::sleep(Duration::from_millis(2500));
    }
    for w in loads {
        let w = wrk_finish(w, Duration::from_secs(30));
        assert!(w.requests > 0, "{}", w.output);
        assert_eq!(connect_errors(&w), 0, "refused connections:\n{}", w.output);
    }
    // The cache entry stored before the crashes is still a hit, and the
    // origin saw no more requests for it.
    let r = s.get("/cache/a");
    assert_eq!((r.status, r.header("X-Cache")), (200, Some("HIT")), "{}", r.head);
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), stored, "the cached entry's origin was asked again");
    assert!(proxied.count() > 0);
    assert_eq!(s.pid(), master, "the master lives on");
}

#[test]
fn a_crash_loop_backs_off_and_recovers_when_the_fault_stops() {
    if !sluice_only() {
        return;
    }
    let s = builder()
        .env("SLUICE_TEST_PANIC_HEADER", FAULT)
        .file("html/static/f.txt", "static file\n")
        .http("server { listen 127.0.0.1:{port}; root html; }")
        .start();
    let master = s.pid();
    // The fault on every request for 4 s.
    let w = wrk_start(&["-t1", "-c4", "-d4s", "-H", &format!("{FAULT}: abort"), &s.url("/static/f.txt")]);
    let _ = wrk_finish(w, Duration::from_secs(30));
    let log = s.wait_error_log("times in a row");
    let line = line_with(&log, "times in a row");
    assert!(line.contains("[alert]") && line.contains("starting a new one in"), "{line}");
    let restarts = log.matches("start worker process").count();
    assert!(restarts < 40, "{restarts} restarts in 4 s: not backing off\n{log}");
    // Once the fault stops, serving resumes: the connections wrk left in
    // the listen queue still carry the fault and may cost a few more
    // rounds of the longest pause (5 s).
    let took = answered_after(s.port, "/static/f.txt");
    assert!(took < Duration::from_secs(20), "served again after {took:?}");
    let mut s = s;
    assert!(s.is_running());
    assert_eq!(s.pid(), master);
}

#[test]
fn master_process_off_is_one_process_that_a_fault_ends() {
    if !sluice_only() {
        return;
    }
    let mut s = builder()
        .env("SLUICE_TEST_PANIC_HEADER", FAULT)
        .main("master_process off;")
        .file("html/static/f.txt", "static file\n")
        .http("server { listen 127.0.0.1:{port}; root html; }")
        .start();
    assert_eq!(s.serving_pid(), s.pid(), "the workers are the started process's threads");
    assert_eq!(s.get("/static/f.txt").status, 200);
    fault(s.port, "segv");
    let st = s.wait_exit(Duration::from_secs(5)).expect("still running after the fault");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(11), "{st:?}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", s.port)).is_err(), "the port still accepts");
}

#[test]
fn sockets_added_by_a_reload_survive_a_crash_and_signals_reach_the_master() {
    if !sluice_only() {
        return;
    }
    let mut s =
        builder().ports(2).http("server { listen 127.0.0.1:{port0}; location / { return 200 \"one\\n\"; } }").start();
    let master = s.pid();
    assert_eq!(read_lossy(&s.path("logs/sluice.pid")).trim(), master.to_string(), "the pid file names the master");
    s.write_conf(
        "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\nhttp {\n\
         server { listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1}; location / { return 200 \"two\\n\"; } }\n}\n",
    );
    let out = s.run(&["-s", "reload"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let deadline = Instant::now() + Duration::from_secs(10);
    // The new port is bound once the serving process has read the new
    // configuration: refused until then.
    while !port_accepts(s.ports[1]) || request(s.ports[1], "GET / HTTP/1.0\r\n\r\n").text() != "two\n" {
        assert!(Instant::now() < deadline, "the reload did not take");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The serving process dies; the new one must find the port the reload
    // added among the master's sockets.
    let before = s.serving_pid();
    let _ = std::process::Command::new("kill").args(["-KILL", &before.to_string()]).status();
    assert!(answered_after(s.ports[1], "/") < Duration::from_secs(1));
    assert_eq!(request(s.ports[1], "GET / HTTP/1.0\r\n\r\n").text(), "two\n");
    assert_eq!(request(s.ports[0], "GET / HTTP/1.0\r\n\r\n").text(), "two\n");
    let out = s.run(&["-s", "quit"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(s.wait_exit(Duration::from_secs(10)).is_some_and(|st| st.success()), "quit");
    assert!(!s.path("logs/sluice.pid").exists(), "the pid file is removed");
    let log = s.error_log();
    assert!(log.contains(&format!("{master}#{master}: exit")), "{log}");
}
