//! Slow clients and exhaustion (issue 14): slowloris heads, slow request
//! bodies, a client that never reads a large response, thousands of idle
//! connections, and running out of file descriptors. Each test prints what
//! it measured (latency p99 of a well-behaved client, worker RSS, worker CPU
//! time) so the numbers can be quoted; the asserted bounds are generous.
//!
//! The tests share one lock: they measure latency and CPU, so they do not
//! run beside each other. With SLUICE_TEST_NGINX=1 the same configs run on
//! nginx, and the assertions are nginx's behaviour.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use common::procs::{raise_nofile, rss_kb, worker_pid};
use common::*;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// utime + stime of a process, in milliseconds.
fn cpu_ms(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    // Fields 14 and 15 of stat; `after` starts at field 3.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    // USER_HZ is 100 on Linux.
    ticks * 10
}

/// A well-behaved keep-alive client: `n` GETs of `path` spaced `gap`
/// apart; returns each request's latency.
fn probe(port: u16, path: &str, n: usize, gap: Duration) -> Vec<Duration> {
    probe_on(Conn::connect(port), path, n, gap)
}

fn probe_on(mut c: Conn, path: &str, n: usize, gap: Duration) -> Vec<Duration> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        c.send(format!("GET {path} HTTP/1.1\r\nHost: probe\r\n\r\n"));
        let r = c.read_response();
        lat.push(t.elapsed());
        assert_eq!(r.status, 200, "probe request failed");
        thread::sleep(gap);
    }
    lat
}

fn p99(lat: &mut [Duration]) -> Duration {
    lat.sort();
    lat[(lat.len() * 99 / 100).min(lat.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Reads until EOF or reset within `within`: Ok(bytes read) if the peer
/// closed, Err if it was still open.
fn drain_until_closed(s: &mut TcpStream, within: Duration) -> Result<usize, usize> {
    let deadline = Instant::now() + within;
    let mut total = 0;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(total);
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Ok(total),
            Err(_) => return Err(total),
        }
    }
}

fn count_408(s: &TestServer) -> usize {
    s.access_log().lines().filter(|l| l.contains("\" 408 ")).count()
}

fn wait_408(s: &TestServer, n: usize) -> usize {
    let deadline = Instant::now() + LOG_WAIT;
    while count_408(s) < n && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
    }
    count_408(s)
}

const SMALL: &str = "small body\n";

#[test]
fn slowloris_heads_are_cut_by_client_header_timeout() {
    let _g = serial();
    let s = builder()
        .http("client_header_timeout 2s;\nserver { listen 127.0.0.1:{port}; root html; }")
        .file("html/small.txt", SMALL)
        .start();
    let port = s.port;
    const N: usize = 200;
    let mut slow: Vec<TcpStream> = (0..N).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let started = Instant::now();
    let feeder = {
        let mut socks: Vec<TcpStream> = slow.iter().map(|s| s.try_clone().unwrap()).collect();
        thread::spawn(move || {
            // Never a whole head: 8 bytes at 0.5 s, well past the timeout.
            for b in b"GET /sma".iter() {
                for s in socks.iter_mut() {
                    let _ = s.write(&[*b]);
                }
                thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let mut lat = probe(port, "/small.txt", 250, Duration::from_millis(10));
    let p = p99(&mut lat);
    let mut closed = 0;
    let mut sent = 0;
    for c in slow.iter_mut() {
        let left = Duration::from_secs(5).saturating_sub(started.elapsed());
        if let Ok(n) = drain_until_closed(c, left.max(Duration::from_millis(10))) {
            closed += 1;
            sent += n;
        }
    }
    let took = started.elapsed();
    feeder.join().unwrap();
    let logged = wait_408(&s, N);
    println!(
        "slowloris: {N} heads at 1 byte/0.5 s; {closed} closed after {:.1} s, {sent} bytes sent to them, \
         {logged} 408 lines logged; probe p99 {:.2} ms over {} requests",
        took.as_secs_f64(),
        ms(p),
        lat.len()
    );
    assert_eq!(closed, N, "every slowloris connection is closed by client_header_timeout");
    assert_eq!(sent, 0, "nginx sends nothing on a header timeout, only logs 408");
    assert_eq!(logged, N, "each timed-out head is logged with 408");
    assert!(p < Duration::from_millis(50), "probe p99 {p:?} while under slowloris");
}

#[test]
fn slow_post_bodies_are_cut_by_client_body_timeout() {
    let _g = serial();
    let origin = origin::Origin::ok("origin\n");
    let s = builder()
        .http(&format!(
            "client_body_timeout 2s;\nserver {{ listen 127.0.0.1:{{port}}; root html;\n\
             location /up {{ proxy_pass http://127.0.0.1:{}; }} }}",
            origin.port
        ))
        .file("html/small.txt", SMALL)
        .start();
    let port = s.port;
    const N: usize = 20;
    let mut slow: Vec<TcpStream> = (0..N)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n").unwrap();
            c
        })
        .collect();
    let started = Instant::now();
    let feeder = {
        let mut socks: Vec<TcpStream> = slow.iter().map(|s| s.try_clone().unwrap()).collect();
        thread::spawn(move || {
            // A byte a second: each gap is under client_body_timeout (a
            // timeout between two reads, as nginx's), so this goes on...
            for _ in 0..3 {
                for s in socks.iter_mut() {
                    let _ = s.write(b"x");
                }
                thread::sleep(Duration::from_secs(1));
            }
            // ...and then the client stalls for longer than the timeout.
        })
    };
    let probing = thread::spawn(move || probe(port, "/small.txt", 300, Duration::from_millis(10)));
    thread::sleep(Duration::from_millis(2800));
    let mut open_at_3s = 0;
    for c in slow.iter_mut() {
        c.set_nonblocking(true).unwrap();
        let mut b = [0u8; 64];
        if matches!(c.read(&mut b), Err(ref e) if e.kind() == ErrorKind::WouldBlock) {
            open_at_3s += 1;
        }
        c.set_nonblocking(false).unwrap();
    }
    let mut closed = 0;
    let mut sent = 0;
    for c in slow.iter_mut() {
        let left = Duration::from_secs(8).saturating_sub(started.elapsed());
        if let Ok(n) = drain_until_closed(c, left.max(Duration::from_millis(10))) {
            closed += 1;
            sent += n;
        }
    }
    let took = started.elapsed();
    feeder.join().unwrap();
    let mut lat = probing.join().unwrap();
    let p = p99(&mut lat);
    let logged = wait_408(&s, N);
    println!(
        "slow POST: {N} bodies at 1 byte/s then stalled; {open_at_3s} still open at 2.8 s, {closed} closed by \
         {:.1} s, {sent} bytes sent to them, {logged} 408 lines logged; probe p99 {:.2} ms over {} requests",
        took.as_secs_f64(),
        ms(p),
        lat.len()
    );
    assert_eq!(open_at_3s, N, "a byte a second is within a 2 s client_body_timeout");
    assert_eq!(closed, N, "a stalled body is cut by client_body_timeout");
    assert_eq!(sent, 0, "nginx sends nothing on a body timeout, only logs 408");
    assert_eq!(logged, N, "each timed-out body is logged with 408");
    assert!(p < Duration::from_millis(50), "probe p99 {p:?} beside slow bodies");
}

#[test]
fn slow_reader_is_bounded_by_send_timeout() {
    let _g = serial();
    const BIG: usize = 10 << 20;
    let s = builder()
        .http("send_timeout 2s;\nserver { listen 127.0.0.1:{port}; root html; }")
        .file("html/big.bin", pseudo_random(BIG, 14))
        .file("html/small.txt", SMALL)
        .start();
    let port = s.port;
    let pid = worker_pid(&s);
    // Warm up: one full read of the file, so the baseline includes buffers
    // a normal request uses.
    let mut c = Conn::connect(port);
    c.send("GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(c.read_response().body.len(), BIG);
    drop(c);
    let before = rss_kb(pid);
    const N: usize = 10;
    let started = Instant::now();
    let mut readers: Vec<TcpStream> = (0..N)
        .map(|_| {
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            c.write_all(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            c
        })
        .collect();
    let mut lat = probe(port, "/small.txt", 150, Duration::from_millis(10));
    let p = p99(&mut lat);
    let during = rss_kb(pid);
    let lines = wait_lines(&s.path("logs/access.log"), N + 151, Duration::from_secs(6));
    let took = started.elapsed();
    let mut got = Vec::new();
    for c in readers.iter_mut() {
        match drain_until_closed(c, Duration::from_secs(5)) {
            Ok(n) => got.push(n),
            Err(n) => panic!("slow reader still open after reading {n} bytes"),
        }
    }
    thread::sleep(Duration::from_millis(500));
    let after = rss_kb(pid);
    let cut: Vec<&String> =
        lines.iter().filter(|l| l.contains("/big.bin") && !l.contains(&format!(" {BIG} "))).collect();
    println!(
        "slow reader: {N} clients never reading a 10 MB file; logged after {:.1} s, bytes they got {:?}; \
         worker RSS {before} kB before, {during} kB with them, {after} kB after; probe p99 {:.2} ms",
        took.as_secs_f64(),
        got,
        ms(p)
    );
    assert_eq!(cut.len(), N, "each slow reader's request is logged, cut short:\n{}", lines.join("\n"));
    assert!(got.iter().all(|&n| n < BIG), "a slow reader never gets the whole file");
    assert!(after < before + 20 * 1024, "RSS grew from {before} kB to {after} kB");
    assert!(p < Duration::from_millis(50), "probe p99 {p:?} beside slow readers");
}

#[test]
fn idle_connections_are_closed_by_client_header_timeout() {
    let _g = serial();
    let limit = raise_nofile();
    let want: usize = if limit >= 52_000 { 50_000 } else { 10_000 };
    if limit < want as u64 + 500 {
        println!("idle: skipped, open-file limit {limit} is below {want} connections + slack");
        return;
    }
    if want < 50_000 {
        println!("idle: 50,000 not tried: the hard open-file limit is {limit}");
    }
    let s = builder()
        .main(&format!("worker_rlimit_nofile {};", want + 1000))
        .events(&format!("worker_connections {};", want + 1000))
        .http("client_header_timeout 4s;\nserver { listen 127.0.0.1:{port} backlog=4096; root html; }")
        .file("html/small.txt", SMALL)
        .start();
    let port = s.port;
    let pid = worker_pid(&s);
    let before = rss_kb(pid);
    // The probe's connection is made (and in keep-alive) before the flood:
    // a connection made during it can wait seconds in the kernel (the
    // flood fills the SYN queue; see below), which is not the server's
    // latency.
    let mut pc = Conn::connect(port);
    pc.send("GET /small.txt HTTP/1.1\r\nHost: probe\r\n\r\n");
    assert_eq!(pc.read_response().status, 200);
    let started = Instant::now();
    let mut idle = Vec::with_capacity(want);
    for i in 0..want {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => idle.push(c),
            Err(e) => panic!("idle connection {i}: {e}"),
        }
    }
    let opened = started.elapsed();
    // The probe runs from 0.3 s to ~4 s after the last connect: through
    // sluice's parking of them all (2 s idle) and after. (A closed-loop
    // probe: a stall shows in its max, not its p99; tests/idle_flood.rs
    // probes open loop, with 50,000 connections over four processes.)
    thread::sleep(Duration::from_millis(300));
    let probing = thread::spawn(move || probe_on(pc, "/small.txt", 600, Duration::from_millis(5)));
    thread::sleep(Duration::from_millis(200));
    let with = rss_kb(pid);
    // sluice parks connections idle for 2 s (no task, no buffers); by 3.5 s
    // all are handed over and parked, none yet timed out.
    thread::sleep((opened + Duration::from_millis(3500)).saturating_sub(started.elapsed()));
    let parked = rss_kb(pid);
    let mut lat = probing.join().unwrap();
    let p = p99(&mut lat);
    // All are closed 4 s after they were accepted, + 1 s for sluice's
    // one-second idle timer resolution. sluice's listeners defer accepting
    // (TCP_DEFER_ACCEPT, see listener::tune): the kernel hands a silent
    // connection over only after retransmitting its SYN-ACK, at about 1 s
    // or 3 s, so its timeout starts that much later than nginx's.
    // Under a flood the kernel may fall back to SYN cookies and hold a few
    // silent connections itself until a later SYN-ACK retransmission (7 s,
    // 15 s): they never reach sluice, cost it nothing, and the kernel's
    // tcp_synack_retries bounds them. Wait up to 20 s, and require all but
    // 1 % to be closed by the server.
    let mut closed = 0;
    for c in idle.iter_mut() {
        let left = (opened + Duration::from_secs(20)).saturating_sub(started.elapsed());
        if drain_until_closed(c, left.max(Duration::from_millis(10))).is_ok() {
            closed += 1;
        }
    }
    let took = started.elapsed();
    drop(idle);
    thread::sleep(Duration::from_millis(500));
    let after = rss_kb(pid);
    println!(
        "idle: {want} connections opened in {:.1} s; worker RSS {before} kB before, {with} kB with them open \
         ({:.0} B each), {parked} kB 3.5 s later ({:.0} B each), {after} kB after; probe p99 {:.2} ms, max {:.2} ms \
         over {} requests; {closed} closed by {:.1} s",
        opened.as_secs_f64(),
        (with.saturating_sub(before) * 1024) as f64 / want as f64,
        (parked.saturating_sub(before) * 1024) as f64 / want as f64,
        ms(p),
        ms(lat[lat.len() - 1]),
        lat.len(),
        took.as_secs_f64()
    );
    assert!(closed * 100 >= want * 99, "idle connections are closed by client_header_timeout: {closed} of {want}");
    assert!(p < Duration::from_millis(50), "probe p99 {p:?} beside {want} idle connections");
    assert_eq!(s.get("/small.txt").status, 200);
}

#[test]
fn fd_exhaustion_pauses_accept_and_recovers() {
    let _g = serial();
    let s = builder()
        .main("worker_rlimit_nofile 64;")
        .events("worker_connections 1024;")
        .http("server { listen 127.0.0.1:{port}; root html; }")
        .file("html/small.txt", SMALL)
        .start();
    let port = s.port;
    let pid = worker_pid(&s);
    assert_eq!(s.get("/small.txt").status, 200);
    let mut clients = Vec::new();
    let mut refused = 0;
    for _ in 0..200 {
        match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(300)) {
            Ok(c) => clients.push(c),
            Err(_) => refused += 1,
        }
    }
    thread::sleep(Duration::from_millis(1000));
    let lines_at = s.error_log().lines().filter(|l| l.contains("Too many open files")).count();
    let cpu0 = cpu_ms(pid);
    thread::sleep(Duration::from_secs(2));
    let cpu = cpu_ms(pid) - cpu0;
    let log = s.error_log();
    let emfile: Vec<&str> = log.lines().filter(|l| l.contains("Too many open files")).collect();
    let in_2s = emfile.len() - lines_at;
    // Is anyone served while out of descriptors? (No: a new connection waits
    // in the listen queue.)
    drop(clients);
    let freed = Instant::now();
    let mut ok = None;
    while freed.elapsed() < Duration::from_secs(5) {
        let mut c = match TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)) {
            Ok(c) => c,
            Err(_) => continue,
        };
        c.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
        let _ = c.write_all(b"GET /small.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        if out.starts_with(b"HTTP/1.1 200") {
            ok = Some(freed.elapsed());
            break;
        }
    }
    let first = emfile.first().copied().unwrap_or("(none)");
    println!(
        "fd exhaustion: 200 clients ({refused} connects timed out); worker CPU {cpu} ms over 2 s out of \
         descriptors; {} EMFILE lines in total, {in_2s} in those 2 s, first: {first}; served again {:?} after \
         the clients closed",
        emfile.len(),
        ok
    );
    assert!(!emfile.is_empty(), "the error log says why accepting stopped:\n{log}");
    assert!(in_2s <= 6, "EMFILE lines are rate-limited: {in_2s} in 2 s");
    assert!(cpu < 300, "the accept loop does not spin while out of descriptors: {cpu} ms CPU in 2 s");
    assert!(ok.is_some(), "requests succeed again once descriptors are freed");
    assert_eq!(s.get("/small.txt").status, 200);
}
