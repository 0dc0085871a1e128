//! Faults: a request that panics inside sluice (the
//! `SLUICE_TEST_PANIC_HEADER` test hook, docs/cli.md) under load on HTTP/1
//! and HTTP/2; origins that reset, stall or drop a pooled connection in the
//! race window, with what the client gets and what the origin received
//! (a POST is never sent twice unless `non_idempotent`); and `kill -9`
//! under load, then a restart over the stale pid file.
//!
//! The origin tests run against nginx 1.22 too (SLUICE_TEST_NGINX=1); the
//! panic test is sluice's own (nginx has no such hook) and returns early
//! there.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::h2raw::{self, Event};
use common::hpack::request_block;
use common::origin::*;
use common::*;

const PANIC: &str = "x-test-panic";
const PANIC_TEXT: &str = "request processing panicked: \"test hook: request carried x-test-panic\" at ";

/// Sends every request block on its own stream at once, then reads frames
/// until each stream ended (complete or reset): a panicking stream among
/// streams in flight on the same connection.
fn h2_together(c: &mut h2raw::Conn, blocks: &[Vec<u8>]) -> Vec<h2raw::H2Response> {
    let mut ids = Vec::new();
    let mut out = Vec::new();
    for b in blocks {
        let id = c.next_stream;
        c.next_stream += 2;
        ids.push(id);
        out.extend(h2raw::header_frames(id, b, true, 16384));
    }
    c.send(&out);
    let mut got: HashMap<u32, h2raw::H2Response> = HashMap::new();
    let mut ended = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while ended < ids.len() {
        let f = match c.read_event(deadline) {
            Event::Frame(f) => f,
            e => panic!("h2: {e:?} with {ended} of {} streams ended", ids.len()),
        };
        let r = got.entry(f.stream).or_default();
        match f.kind {
            h2raw::SETTINGS if f.flags & h2raw::ACK == 0 => c.send(h2raw::settings_ack_frame()),
            h2raw::HEADERS => {
                let fields = c.decoder.decode(f.block_fragment()).expect("HPACK");
                if let Some((_, v)) = fields.iter().find(|(n, _)| n == ":status") {
                    r.status = v.parse().unwrap_or(0);
                }
                r.headers = fields;
                ended += usize::from(f.end_stream());
            }
            h2raw::DATA => {
                r.body.extend_from_slice(&f.payload);
                ended += usize::from(f.end_stream());
            }
            h2raw::RST_STREAM => {
                r.reset = f.error_code();
                ended += 1;
            }
            _ => {}
        }
    }
    ids.iter().map(|id| got.remove(id).unwrap_or_default()).collect()
}

fn panic_block(value: &str) -> Vec<u8> {
    request_block("GET", "/", "localhost", &[(PANIC, value)])
}

#[test]
fn a_panicking_request_gets_500_and_every_other_request_is_served() {
    if prog() == "nginx" {
        return;
    }
    let o = Origin::ok("from origin");
    let s = builder()
        .ports(2)
        .main("worker_processes 1;")
        .env("SLUICE_TEST_PANIC_HEADER", "X-Test-Panic")
        .file("html/f.txt", "file\n")
        .http(&sub(
            r#"server {
                listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1} http2;
                location / { return 200 "ok\n"; }
                location = /f.txt { }
                location /p/ { proxy_pass http://127.0.0.1:%O%/; }
            }"#,
            &[("%O%", o.port)],
        ))
        .start();
    // 50 keep-alive connections busy throughout, on the one worker.
    let wrk = wrk_start(&["-t2", "-c50", "-d4s", &s.url("/")]);
    std::thread::sleep(Duration::from_millis(500));
    let mut checks = Checks::new();
    checks.run("HTTP/1.1: 500, Connection: close, closed; the next connection is served", || {
        for i in 0..20 {
            let mut c = s.connect();
            c.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
            assert_eq!(c.read_response().text(), "ok\n", "#{i}");
            let path = if i % 2 == 0 { "/" } else { "/p/x" };
            c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nX-Test-Panic: 1\r\n\r\n"));
            let r = c.read_response();
            assert_eq!(r.status, 500, "#{i} {}", r.head);
            assert_eq!(r.header("Connection"), Some("close"), "{}", r.head);
            assert!(r.text().contains("<title>500 Internal Server Error</title>"), "{}", r.text());
            assert!(c.closed_within(Duration::from_secs(2)), "#{i}: connection left open");
        }
    });
    checks.run("HTTP/1.1: a panic after the response was sent closes the connection", || {
        let mut c = s.connect();
        c.send("GET / HTTP/1.1\r\nHost: localhost\r\nX-Test-Panic: after\r\n\r\n");
        assert_eq!(c.read_response().text(), "ok\n");
        assert!(c.closed_within(Duration::from_secs(2)), "connection left open");
    });
    checks.run("HTTP/2: the panicking stream gets 500, its neighbours and the connection go on", || {
        let mut c = h2raw::Conn::open(s.ports[1]);
        for round in 0..5 {
            let blocks =
                [h2raw_get("/"), panic_block("1"), h2raw_get("/f.txt"), h2raw_get("/p/y"), panic_block("after")];
            let r = h2_together(&mut c, &blocks);
            let got: Vec<(u16, String)> =
                r.iter().map(|r| (r.status, String::from_utf8_lossy(&r.body).into())).collect();
            assert_eq!((got[0].0, got[0].1.as_str()), (200, "ok\n"), "round {round}: {got:?}");
            assert_eq!(got[1].0, 500, "round {round}: {got:?}");
            assert!(got[1].1.contains("<title>500 Internal Server Error</title>"), "{got:?}");
            assert_eq!((got[2].0, got[2].1.as_str()), (200, "file\n"), "{got:?}");
            assert_eq!((got[3].0, got[3].1.as_str()), (200, "from origin"), "{got:?}");
            // Panicked after its response ended: the client saw it whole.
            assert_eq!((got[4].0, got[4].1.as_str()), (200, "ok\n"), "{got:?}");
        }
        assert_eq!(c.get("/").status, 200);
    });
    checks.run("a panic in a spawned task is logged and ends that task only", || {
        let mut c = s.connect();
        for _ in 0..3 {
            c.send("GET / HTTP/1.1\r\nHost: localhost\r\nX-Test-Panic: task\r\n\r\n");
            assert_eq!(c.read_response().text(), "ok\n");
        }
        let log = s.wait_error_log("panic in a spawned task");
        let l = line_with(&log, "panic in a spawned task");
        assert!(l.contains("[alert]") && l.contains("thread sluice-w0 panicked"), "{l}");
    });
    let w = wrk_finish(wrk, Duration::from_secs(20));
    checks.run("wrk's 50 connections: every request answered 200", || {
        assert!(w.requests > 100, "{}", w.output);
        assert_eq!((w.error_count(), w.non_2xx.as_deref()), (0, None), "{}", w.output);
    });
    checks.run("the worker serves afterwards", || {
        assert_eq!(s.get("/").text(), "ok\n");
        assert_eq!(s.get("/p/z").text(), "from origin");
        assert_eq!(h2raw::Conn::open(s.ports[1]).get("/f.txt").status, 200);
    });
    checks.run("alert lines name the requests", || {
        let log = s.error_log();
        let alerts: Vec<&str> = log.lines().filter(|l| l.contains(PANIC_TEXT)).collect();
        assert!(alerts.iter().all(|l| l.contains("[alert]") && l.contains("src/worker/unwind.rs:")), "{log}");
        assert!(alerts.iter().any(|l| l.contains("request: \"GET /p/x HTTP/1.1\", host: \"localhost\"")), "{log}");
        assert!(alerts.iter().any(|l| l.contains("request: \"GET / HTTP/2.0\"")), "{log}");
        // 20 + 1 on HTTP/1.1, 2 per round on HTTP/2.
        assert_eq!(alerts.len(), 31, "{log}");
    });
    checks.run("the 500s are in the access log", || {
        let log = s.access_log();
        assert!(log.lines().any(|l| l.contains("\"GET /p/x HTTP/1.1\" 500 ")), "no 500 line");
        // One per round on HTTP/2, with the page's length as body bytes.
        let h2: Vec<&str> = log.lines().filter(|l| l.contains("\"GET / HTTP/2.0\" 500 ")).collect();
        assert_eq!(h2.len(), 5, "{log}");
        assert!(h2.iter().all(|l| !l.contains("\" 500 0 ")), "{log}");
    });
    checks.finish();
}

fn h2raw_get(path: &str) -> Vec<u8> {
    common::hpack::get_block(path)
}

/// An origin that fails at the TCP level: `/rst-head` resets once it read
/// the request, `/rst-cl` and `/rst-chunked` reset after 30000 bytes of the
/// body, `/stall` sends its head and then nothing.
fn resetting_origin() -> Origin {
    let part = pseudo_random(30000, 11);
    Origin::start(move |r| match r.target() {
        "/rst-head" => Reply::reset(),
        "/rst-cl" => {
            Reply::raw([b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".as_slice(), &part].concat()).then_reset()
        }
        "/rst-chunked" => Reply::raw([CHUNKED_HEAD.as_bytes(), b"7530\r\n", &part, b"\r\n"].concat()).then_reset(),
        "/stall" => Reply::raw("HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n")
            .then_sleep(Duration::from_millis(1500))
            .close(),
        _ => Reply::ok("?"),
    })
}

#[test]
fn an_origin_that_resets_or_stalls_never_gives_a_complete_looking_response() {
    let o = resetting_origin();
    let s = proxy(
        r#"server {
            listen 127.0.0.1:{port};
            proxy_read_timeout 300ms;
            location / { proxy_pass http://127.0.0.1:%O%; proxy_http_version 1.1; }
        }"#,
        &[("%O%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("/rst-head: 502", || {
        let r = s.get("/rst-head");
        assert_eq!(r.status, 502, "{}", r.head);
        let want = "recv() failed (104: Connection reset by peer) while reading response header from upstream";
        let log = s.wait_error_log(want);
        assert!(line_with(&log, want).contains("request: \"GET /rst-head HTTP/1.1\""), "{log}");
    });
    for (path, log) in [
        // nginx reads a buffered body with readv(), sluice with recv().
        ("/rst-cl", "() failed (104: Connection reset by peer) while reading upstream"),
        ("/rst-chunked", "() failed (104: Connection reset by peer) while reading upstream"),
        ("/stall", "upstream timed out (110: Connection timed out) while reading upstream"),
    ] {
        checks.run(path, || {
            let mut c = s.connect();
            c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
            let t = Instant::now();
            let raw = c.read_to_close();
            assert!(t.elapsed() < Duration::from_secs(3), "closed after {:?}", t.elapsed());
            assert_visibly_cut(&raw);
            let req = format!("request: \"GET {path} HTTP/1.1\"");
            let text = s.wait_error_log(&req);
            assert!(line_with(&text, &req).contains(log), "{text}");
        });
    }
    checks.finish();
}

/// (method, target) of each request an origin received.
fn seen(o: &Origin) -> Vec<(String, String)> {
    o.requests().iter().map(|r| (r.method().to_string(), r.target().to_string())).collect()
}

fn pair(m: &str, t: &str) -> (String, String) {
    (m.to_string(), t.to_string())
}

#[test]
fn a_post_that_reached_a_failing_origin_is_not_sent_again_unless_non_idempotent() {
    // `a` resets every request it reads; `b` (backup) answers. A GET goes
    // on to `b`; a POST stops at 502 unless `non_idempotent`.
    let a = Origin::start(|_| Reply::reset());
    let b = Origin::ok("b");
    let s = proxy(
        r#"
        upstream two { server 127.0.0.1:%A% max_fails=0; server 127.0.0.1:%B% backup; }
        server {
            listen 127.0.0.1:{port};
            location / { proxy_pass http://two; }
            location /ni/ { proxy_pass http://two; proxy_next_upstream error timeout non_idempotent; }
        }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    let mut checks = Checks::new();
    checks.run("GET retried on the next peer", || {
        let r = req(&s, "GET", "/get", &[], b"");
        assert_eq!((r.status, r.text().as_str()), (200, "b"));
    });
    checks.run("POST answered 502", || {
        let r = req(&s, "POST", "/post", &["Content-Length: 3"], b"x=1");
        assert_eq!(r.status, 502, "{}", r.text());
    });
    checks.run("PATCH answered 502", || {
        let r = req(&s, "PATCH", "/patch", &["Content-Length: 3"], b"x=1");
        assert_eq!(r.status, 502, "{}", r.text());
    });
    checks.run("POST with non_idempotent retried", || {
        let r = req(&s, "POST", "/ni/post", &["Content-Length: 3"], b"x=1");
        assert_eq!((r.status, r.text().as_str()), (200, "b"));
    });
    checks.run("what each origin received", || {
        let want_a = [pair("GET", "/get"), pair("POST", "/post"), pair("PATCH", "/patch"), pair("POST", "/ni/post")];
        assert_eq!(seen(&a), want_a);
        assert_eq!(seen(&b), [pair("GET", "/get"), pair("POST", "/ni/post")]);
        assert!(b.requests().iter().all(|r| r.method() == "GET" || r.body == b"x=1"));
    });
    checks.finish();
}

#[test]
fn a_pooled_connection_closed_in_the_race_window_never_repeats_a_post() {
    // The origin answers the first request on a connection and closes the
    // connection after reading the next one, unanswered: the race where
    // the proxy reuses a kept-alive connection the origin is closing.
    let o = Origin::start(|r| if r.nth == 0 { Reply::ok("o") } else { Reply::none() });
    let s = proxy(
        r#"
        upstream st { server 127.0.0.1:%O%; keepalive 2; }
        server {
            listen 127.0.0.1:{port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            location / { proxy_pass http://st; }
            location /ni/ { proxy_pass http://st; proxy_next_upstream error timeout non_idempotent; }
        }"#,
        &[("%O%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("GET on the stale connection retried", || {
        assert_eq!(s.get("/warm1").text(), "o");
        assert_eq!(s.get("/get").text(), "o");
    });
    checks.run("POST on the stale connection: 502, sent once", || {
        let r = req(&s, "POST", "/post", &["Content-Length: 3"], b"x=1");
        assert_eq!(r.status, 502, "{}", r.text());
        let want = "upstream prematurely closed connection while reading response header from upstream";
        s.wait_error_log("request: \"POST /post HTTP/1.1\"");
        let log = s.error_log();
        assert!(line_with(&log, "request: \"POST /post HTTP/1.1\"").contains(want), "{log}");
    });
    checks.run("POST with non_idempotent: retried on a new connection", || {
        assert_eq!(s.get("/warm2").text(), "o");
        let r = req(&s, "POST", "/ni/post", &["Content-Length: 3"], b"x=1");
        assert_eq!((r.status, r.text().as_str()), (200, "o"));
    });
    checks.run("what the origin received", || {
        let posts = |t: &str| o.requests().iter().filter(|r| r.method() == "POST" && r.target() == t).count();
        assert_eq!((posts("/post"), posts("/ni/post")), (1, 2), "{:?}", seen(&o));
        assert_eq!(o.requests().iter().filter(|r| r.target() == "/get").count(), 2, "{:?}", seen(&o));
    });
    checks.finish();
}

/// The process's children (nginx's workers; sluice has none).
fn children(pid: u32) -> Vec<u32> {
    let p = format!("/proc/{pid}/task/{pid}/children");
    read_lossy(std::path::Path::new(&p)).split_whitespace().filter_map(|t| t.parse().ok()).collect()
}

#[test]
fn kill_9_under_load_then_a_restart_serves() {
    let mut s = builder()
        .main("worker_processes 2;")
        .http(r#"server { listen 127.0.0.1:{port}; location / { return 200 "ok\n"; } }"#)
        .start();
    let old = s.pid();
    let wrk = wrk_start(&["-t2", "-c50", "-d2s", &s.url("/")]);
    std::thread::sleep(Duration::from_millis(700));
    let kids = children(old);
    s.kill("KILL");
    for k in kids {
        let _ = std::process::Command::new("kill").arg("-KILL").arg(k.to_string()).status();
    }
    assert!(s.wait_exit(Duration::from_secs(5)).is_some(), "still running after kill -9");
    let w = wrk_finish(wrk, Duration::from_secs(20));
    assert!(w.requests > 0, "{}", w.output);
    // What kill -9 leaves: the pid file naming the dead process, and the
    // port's connections closing (TIME_WAIT) on the server's side.
    let pid_file = s.path("logs/sluice.pid");
    assert_eq!(read_lossy(&pid_file).trim(), old.to_string(), "the stale pid file");
    let ss = std::process::Command::new("ss").args(["-tanH", "state", "time-wait"]).output();
    let tw = ss.map(|o| stdout_of(&o).lines().filter(|l| l.contains(&format!("127.0.0.1:{} ", s.port))).count());
    eprintln!("TIME_WAIT connections on the port at restart: {tw:?}");
    s.relaunch().unwrap_or_else(|e| panic!("restart failed:\n{e}"));
    assert_ne!(s.pid(), old);
    assert_eq!(read_lossy(&pid_file).trim(), s.pid().to_string());
    assert_eq!(s.get("/").text(), "ok\n");
    let w = wrk_finish(wrk_start(&["-t2", "-c50", "-d1s", &s.url("/")]), Duration::from_secs(20));
    assert!(w.requests > 100, "{}", w.output);
    assert_eq!((w.error_count(), w.non_2xx.as_deref()), (0, None), "{}", w.output);
    assert!(!s.error_log().contains("[emerg]"), "{}", s.error_log());
}

#[test]
fn a_panic_mid_body_cuts_the_response_and_gives_the_peer_back() {
    if prog() == "nginx" {
        return;
    }
    // 100 KB of 200 KB, then a pause: the origin connection (and the
    // peer's only max_conns slot) is still held when the request panics.
    let part = pseudo_random(100_000, 3);
    let o = Origin::start(move |_| {
        Reply::raw([b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".as_slice(), &part].concat())
            .then_sleep(Duration::from_millis(800))
            .then_write(&part)
    });
    let s = builder()
        .main("worker_processes 1;")
        .env("SLUICE_TEST_PANIC_HEADER", PANIC)
        .http(&sub(
            r#"upstream one { server 127.0.0.1:%O% max_conns=1; }
            server { listen 127.0.0.1:{port}; location / { proxy_pass http://one; } }"#,
            &[("%O%", o.port)],
        ))
        .start();
    let mut c = s.connect();
    c.send("GET /a HTTP/1.1\r\nHost: localhost\r\nX-Test-Panic: body\r\n\r\n");
    let raw = c.read_to_close();
    let (head, body) = split_head(&raw);
    assert!(head.starts_with("HTTP/1.1 200") && head.contains("Content-Length: 200000"), "{head}");
    assert!(!body.is_empty() && body.len() < 200_000, "{} bytes", body.len());
    let log = s.wait_error_log(PANIC_TEXT);
    assert!(line_with(&log, PANIC_TEXT).contains("request: \"GET /a HTTP/1.1\""), "{log}");
    // Had the panic kept the peer's connection count, max_conns=1 would
    // leave no live upstream for these.
    for i in 0..3 {
        let r = s.get("/b");
        assert_eq!((r.status, r.body.len()), (200, 200_000), "#{i}");
    }
    assert!(!s.error_log().contains("no live upstreams"), "{}", s.error_log());
}

/// The accept loop itself panicking (test hook value `accept`: on the next
/// accepted connection) is logged and the loop started again: new clients
/// are served, and so are the connections already open.
#[test]
fn a_panicking_accept_loop_is_started_again() {
    if prog() == "nginx" {
        return;
    }
    let s = builder()
        .main("worker_processes 1;")
        .env("SLUICE_TEST_PANIC_HEADER", "X-Test-Panic")
        .http(r#"server { listen 127.0.0.1:{port}; location / { return 200 "ok\n"; } }"#)
        .start();
    let mut keep = s.connect();
    keep.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(keep.read_response().text(), "ok\n");
    let mut arm = s.connect();
    arm.send("GET / HTTP/1.1\r\nHost: localhost\r\nX-Test-Panic: accept\r\n\r\n");
    assert_eq!(arm.read_response().text(), "ok\n");
    // Accepted by the loop that then panics: closed unanswered.
    let mut victim = s.connect();
    assert!(victim.closed_within(Duration::from_secs(2)), "the victim connection was left open");
    let log = s.wait_error_log("panicked, started again");
    let l = line_with(&log, "panicked, started again");
    assert!(l.contains("[alert]") && l.contains(&format!("the accept loop on 127.0.0.1:{}", s.port)), "{l}");
    for i in 0..5 {
        assert_eq!(s.get("/").text(), "ok\n", "new connection #{i}");
    }
    for c in [&mut keep, &mut arm] {
        c.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!(c.read_response().text(), "ok\n");
    }
}
