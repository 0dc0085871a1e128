//! `queue N timeout=T` with `max_conns`: requests beyond the upstream's
//! capacity wait in line instead of failing, the origin never sees more
//! than `max_conns` at once from all workers together, and overflow or a
//! timeout is a prompt 503 with an error-log line.
//!
//! nginx (open source) has no `queue`; NGINX Plus and Angie answer 502 where
//! sluice answers 503 (the issue's choice: the origin did nothing wrong), so
//! these tests run on sluice only.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// An origin that takes `delay` per request and records the most requests
/// it ever had in hand at once.
fn slow_origin(delay: Duration) -> (Origin, Arc<AtomicUsize>) {
    let now = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let p = peak.clone();
    let o = Origin::start(move |r| {
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(n, Ordering::SeqCst);
        std::thread::sleep(delay);
        now.fetch_sub(1, Ordering::SeqCst);
        Reply::ok(r.target())
    });
    (o, peak)
}

/// `n` requests at once, each on its own connection; (status, elapsed).
fn burst(port: u16, n: usize, path: &str) -> Vec<(u16, Duration)> {
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let path = format!("{path}{i}");
            std::thread::spawn(move || {
                let t = Instant::now();
                let r = common::request(
                    port,
                    &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
                );
                (r.status, t.elapsed())
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("client thread")).collect()
}

#[test]
fn queued_requests_all_complete_within_max_conns_across_workers() {
    if prog() != "sluice" {
        return;
    }
    let (o, peak) = slow_origin(Duration::from_millis(150));
    let s = builder()
        .main("worker_processes 2;")
        .http(&sub(
            r#"
            upstream backend {
                server 127.0.0.1:%A% max_conns=3;
                queue 100 timeout=10s;
                keepalive 4;
            }
            server {
                listen 127.0.0.1:{port} reuseport;
                location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
            }"#,
            &[("%A%", o.port)],
        ))
        .start();
    let t = Instant::now();
    let results = burst(s.port, 24, "/q");
    let took = t.elapsed();
    assert!(results.iter().all(|(st, _)| *st == 200), "{results:?}\n{}", s.error_log());
    assert_eq!(o.count(), 24);
    // Both workers together never exceed max_conns=3 (without a queue each
    // worker would count its own 3).
    assert!(peak.load(Ordering::SeqCst) <= 3, "origin saw {} at once", peak.load(Ordering::SeqCst));
    // 24 requests, 3 at a time, 150 ms each: at least 8 rounds.
    assert!(took >= Duration::from_millis(8 * 150), "{took:?}");
}

#[test]
fn overflow_and_timeout_are_prompt_503s() {
    if prog() != "sluice" {
        return;
    }
    let (o, peak) = slow_origin(Duration::from_millis(600));
    let s = proxy(
        r#"
            upstream full { server 127.0.0.1:%A% max_conns=1; queue 2 timeout=30s; }
            upstream short { server 127.0.0.1:%A% max_conns=1; queue 10 timeout=200ms; }
            server {
                listen 127.0.0.1:{port};
                location /full/ { proxy_pass http://full; }
                location /short/ { proxy_pass http://short; }
            }"#,
        &[("%A%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("one in service, two queued, the rest refused at once", || {
        let r = burst(s.port, 6, "/full/");
        let ok = r.iter().filter(|(st, _)| *st == 200).count();
        let refused: Vec<_> = r.iter().filter(|(st, _)| *st == 503).collect();
        assert_eq!((ok, refused.len()), (3, 3), "{r:?}");
        assert!(refused.iter().all(|(_, d)| *d < Duration::from_millis(500)), "{r:?}");
        assert!(s.wait_error_log("upstream queue is full while connecting to upstream").contains("/full/"));
    });
    checks.run("a request that waits past timeout= gets 503", || {
        let r = burst(s.port, 2, "/short/");
        let mut statuses: Vec<u16> = r.iter().map(|(st, _)| *st).collect();
        statuses.sort();
        assert_eq!(statuses, [200, 503], "{r:?}");
        let (_, waited) = r.iter().find(|(st, _)| *st == 503).expect("a 503");
        assert!(*waited >= Duration::from_millis(180) && *waited < Duration::from_millis(550), "{waited:?}");
        s.wait_error_log("upstream queue timed out while connecting to upstream");
    });
    checks.run("the origin never had two at once", || {
        assert_eq!(peak.load(Ordering::SeqCst), 1);
    });
    checks.run("-t refuses a bad queue", || {
        let conf = std::fs::read_to_string(s.conf_path()).expect("conf");
        s.write_conf(&conf.replace("queue 2 timeout=30s;", "queue 0;"));
        let out = s.run(&["-t"]);
        assert!(!out.status.success());
        let err = stderr_of(&out);
        assert!(
            err.contains("[emerg] invalid value \"0\" in \"queue\" directive in ") && err.contains("sluice.conf:"),
            "{err}"
        );
    });
    checks.finish();
}

#[test]
fn a_client_that_leaves_the_queue_costs_the_origin_nothing() {
    if prog() != "sluice" {
        return;
    }
    let (o, _) = slow_origin(Duration::from_millis(800));
    let s = proxy(
        r#"
            upstream one { server 127.0.0.1:%A% max_conns=1; queue 10 timeout=30s; }
            server { listen 127.0.0.1:{port}; location / { proxy_pass http://one; } }"#,
        &[("%A%", o.port)],
    );
    let port = s.port;
    let first = std::thread::spawn(move || burst(port, 1, "/first"));
    std::thread::sleep(Duration::from_millis(150));
    // Queued behind the first, then gone.
    let mut quitter = s.connect();
    quitter.send("GET /quitter HTTP/1.1\r\nHost: localhost\r\n\r\n");
    std::thread::sleep(Duration::from_millis(150));
    drop(quitter);
    let last = burst(port, 1, "/last");
    assert_eq!(first.join().expect("first")[0].0, 200);
    assert_eq!(last[0].0, 200);
    let seen: Vec<String> = o.requests().iter().map(|r| r.target().to_string()).collect();
    assert_eq!(seen, ["/first0", "/last0"], "the origin served a request nobody waited for");
    s.wait_error_log("so upstream connection is closed too while waiting in the upstream queue");
    let lines = s.wait_access_lines(3);
    assert!(lines.iter().any(|l| l.contains("\"GET /quitter HTTP/1.1\" 499 ")), "{lines:?}");
}
