//! 50,000 idle connections: half never send a byte (bounded by
//! `client_header_timeout`), half send one request and then sit in
//! keep-alive (bounded by `keepalive_timeout`), while a well-behaved client
//! keeps asking every worker for a small file, open loop (wrk2's way: a
//! request every 8 ms per worker, timed from when it was due). The test
//! prints what it measured, half a second a line and in sum: connections
//! each server holds (its stub_status), each worker's RSS, CPU and time
//! spent waiting for a CPU, the probe's latency, when each connection was
//! closed, and the kernel's listen-queue counters.
//!
//! Why four server processes: sluice's workers are threads of one process,
//! and a process's descriptors are capped by its open-file limit, whose
//! hard value on the machines this suite runs on is 20,000 and cannot be
//! raised (no CAP_SYS_RESOURCE). So four sluice processes with one worker
//! each share one port through SO_REUSEPORT (`listen ... reuseport`), as
//! four nginx worker processes would; the kernel spreads connections over
//! them by address hash. The clients are four child processes of this test
//! (the `holder` test below, run again by path), each holding 12,500
//! sockets from its own source address (127.0.0.2..5): one source address
//! to one port has only the ~28,000 ports of ip_local_port_range.
//!
//! No sysctl is changed. The flood is paced (`RATE`): sluice's listeners
//! defer accepting (TCP_DEFER_ACCEPT), so a silent connection waits in the
//! listener's SYN queue for about a second, until the kernel retransmits
//! its SYN-ACK and hands it over; at this pace they fit in a 4096 backlog
//! (net.core.somaxconn is 4096). An unpaced burst of 25,000 silent
//! connects overflows it into SYN cookies (about a third of them): those
//! are handed over at once instead, no connection is lost, but the
//! clients' own connects then starve the servers of CPU on this machine.
//!
//! Two latency figures: the probe's round trip, which on a machine shared
//! with other work includes waiting for a CPU, and the worker's CPU time
//! while each probe request was out, which is the work the server did
//! before answering: what a stall of the event loop would show as. The
//! latter is asserted under 10 ms at p99; the round trip more loosely.
//!
//! With SLUICE_TEST_NGINX=1 the same runs on four nginx processes.

mod common;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::procs::{raise_nofile, rss_kb, worker_pid};
use common::*;

const INSTANCES: usize = 4;
const HOLDERS: usize = 4;
const SILENT: usize = 25_000;
const KEEPALIVE: usize = 25_000;
/// client_header_timeout and keepalive_timeout, in seconds: long enough
/// for all 50,000 to be open at once after the flood (4 s, up to 7 s on a
/// busy machine).
const HEADER_TIMEOUT: u64 = 10;
const KEEPALIVE_TIMEOUT: u64 = 12;
/// New connections a second, all holders together. Unpaced, the clients'
/// connects (whose kernel work on loopback is done on this machine's two
/// cores as well) would take the CPU from the servers, which measures the
/// machine rather than the server.
const RATE: f64 = 12_500.0;
/// The probe sends each worker a request this often, whether or not the
/// last one was answered.
const PROBE_EVERY: Duration = Duration::from_millis(8);
const SMALL: &str = "small body\n";
/// Probing before the flood starts, in ms.
const BASELINE_MS: f64 = 1000.0;

fn nginx() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// Monotonic milliseconds: CLOCK_MONOTONIC is one clock for every process
/// on the machine, so the holders' times compare with this test's.
fn mono_ms() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as f64 * 1000.0 + t.tv_nsec as f64 / 1e6
}

/// CPU time of process `pid` so far (all its threads), in milliseconds,
/// exact to the call: the kernel's per-process CPU clock, which any process
/// may read.
fn process_cpu_ms(pid: u32) -> f64 {
    // The clock id Linux gives another process's CPU clock:
    // MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED).
    let id: libc::clockid_t = (!(pid as libc::clockid_t) << 3) | 2;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, a local that
    // outlives the call; an invalid id only makes it return -1.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    assert_eq!(r, 0, "CPU clock of process {pid}: {}", std::io::Error::last_os_error());
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

/// Milliseconds the serving thread has spent runnable but waiting for a
/// CPU (schedstat): sluice's worker thread, nginx's worker process.
fn runqueue_wait_ms(pid: u32) -> f64 {
    let dir = format!("/proc/{pid}/task");
    let tid = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .find(|e| nginx() || std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.starts_with("sluice-w")))
        .map_or_else(|| pid.to_string(), |e| e.file_name().to_string_lossy().into_owned());
    let text = std::fs::read_to_string(format!("{dir}/{tid}/schedstat")).unwrap_or_default();
    text.split_whitespace().nth(1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) / 1e6
}

/// Kernel counters that tell whether the flood overflowed a listen queue,
/// fell back to SYN cookies, or lost packets on loopback: TcpExt of
/// /proc/net/netstat, and packets dropped because a CPU's input backlog
/// (net.core.netdev_max_backlog) was full (loopback traffic goes through
/// it; a dropped probe packet costs a retransmission, 200 ms or more).
fn kernel_counters() -> Vec<(&'static str, u64)> {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let ext: Vec<&str> = text.lines().filter(|l| l.starts_with("TcpExt:")).collect();
    let get = |name: &str| -> u64 {
        let [names, values] = ext[..] else { return 0 };
        names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| v.parse().unwrap_or(0))
    };
    let softnet = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    let dropped =
        softnet.lines().filter_map(|l| l.split_whitespace().nth(1)).filter_map(|v| u64::from_str_radix(v, 16).ok());
    vec![
        ("ListenOverflows", get("ListenOverflows")),
        ("ListenDrops", get("ListenDrops")),
        ("TCPReqQFullDoCookies", get("TCPReqQFullDoCookies")),
        // SYN-ACK retransmissions among them: deferred accepts.
        ("TCPTimeouts", get("TCPTimeouts")),
        ("backlog drops", dropped.sum()),
    ]
}

/// One keep-alive connection to each server process, in `pids` order:
/// connections from 127.0.0.1 land on a process by address hash, so
/// connect until every process has one (told by the X-Pid header).
fn one_per_worker(port: u16, pids: &[u32]) -> Vec<Conn> {
    let mut got: Vec<Option<Conn>> = (0..pids.len()).map(|_| None).collect();
    for _ in 0..400 {
        let mut c = Conn::connect(port);
        c.send("GET /small.txt HTTP/1.1\r\nHost: probe\r\n\r\n");
        let r = c.read_response();
        assert_eq!(r.status, 200);
        let pid: u32 = r.must("X-Pid").parse().unwrap();
        if let Some(i) = pids.iter().position(|&p| p == pid)
            && got[i].is_none()
        {
            got[i] = Some(c);
        }
        if got.iter().all(Option::is_some) {
            return got.into_iter().flatten().collect();
        }
    }
    panic!("400 connections did not reach all {} server processes", pids.len());
}

/// `Active connections` of a stub_status page.
fn active(c: &mut Conn) -> u64 {
    c.send("GET /status HTTP/1.1\r\nHost: probe\r\n\r\n");
    let text = c.read_response().text();
    text.lines()
        .find_map(|l| l.strip_prefix("Active connections:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no active count in {text:?}"))
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn sorted(v: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = v.collect();
    v.sort_by(f64::total_cmp);
    v
}

/// A holder child: this test binary run again with `--ignored --exact
/// holder` and its orders in SLUICE_FLOOD_HOLDER; it reports on stdout.
struct Holder {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr: std::path::PathBuf,
}

impl Holder {
    fn spawn(src: &str, port: u16, until: f64) -> Holder {
        let (silent, keepalive, rate) = (SILENT / HOLDERS, KEEPALIVE / HOLDERS, RATE / HOLDERS as f64);
        let stderr = temp_dir("holder").join("stderr.txt");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "holder", "--nocapture", "--test-threads=1"])
            .env("SLUICE_FLOOD_HOLDER", format!("{src} {port} {silent} {keepalive} {until} {rate}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn holder");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(out).split(b'\n').map_while(Result::ok) {
                // libtest's "test holder ... " may precede a report.
                let l = String::from_utf8_lossy(&l).into_owned();
                if let Some(i) = l.find("flood-")
                    && tx.send(l[i..].to_string()).is_err()
                {
                    break;
                }
            }
        });
        Holder { child, lines, stderr }
    }

    /// The numbers of the next report line starting with `tag`.
    fn report(&mut self, tag: &str, limit: Duration) -> Vec<f64> {
        let deadline = Instant::now() + limit;
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with(tag) => {
                    return l.split_whitespace().skip(1).map(|v| v.parse().unwrap_or(f64::NAN)).collect();
                }
                Ok(_) => {}
                Err(e) => panic!(
                    "holder sent no {tag} line within {limit:?}: {e}; exit {:?}, its stderr:\n{}",
                    self.child.try_wait(),
                    read_lossy(&self.stderr)
                ),
            }
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::env::var_os("SLUICE_TEST_KEEP").is_none()
            && let Some(dir) = self.stderr.parent()
        {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// One server at one moment: open connections, RSS kB, CPU ms, runqueue
/// wait ms.
type Sample = (u64, u64, f64, f64);

/// What the probe and the sampler saw, in ms since the flood began.
#[derive(Default)]
struct Seen {
    /// (when, round trip ms, the worker's CPU ms while it was out)
    probes: Vec<(f64, f64, f64)>,
    /// (when, per server: open connections, RSS kB, CPU ms, runqueue wait ms)
    samples: Vec<(f64, Vec<Sample>)>,
}

impl Seen {
    /// Half a second a line: connections, RSS, CPU% / waiting-for-CPU% per
    /// worker, then the probe's p50/p99/max in that half second.
    fn print_timeline(&self) {
        println!("t(s)  open per process             RSS MB per worker  cpu%/wait% per worker    probe p50/p99/max ms");
        let end = self.samples.last().map_or(0.0, |s| s.0);
        let at = |t: f64| self.samples.iter().find(|s| s.0 >= t);
        let mut t = 0.0;
        while let (Some(a), Some(b)) = (at(t), at(t + 500.0)) {
            let open: Vec<u64> = a.1.iter().map(|s| s.0).collect();
            let rss: Vec<u64> = a.1.iter().map(|s| s.1 / 1024).collect();
            let span = (b.0 - a.0) / 100.0;
            let cpu: Vec<String> =
                a.1.iter()
                    .zip(&b.1)
                    .map(|(x, y)| format!("{:.0}/{:.0}", (y.2 - x.2) / span, (y.3 - x.3) / span))
                    .collect();
            let w = sorted(self.probes.iter().filter(|p| p.0 >= t && p.0 < t + 500.0).map(|p| p.1));
            println!(
                "{:4.1}  {:<28} {:<18} {:<24} {:.2}/{:.2}/{:.2}",
                t / 1000.0,
                format!("{open:?}"),
                format!("{rss:?}"),
                cpu.join(" "),
                pct(&w, 0.5),
                pct(&w, 0.99),
                w.last().copied().unwrap_or(f64::NAN)
            );
            t += 500.0;
            if t > end {
                break;
            }
        }
    }
}

/// The probe of one worker: a GET every `PROBE_EVERY` on its keep-alive
/// connection, on schedule (pipelined if the last is not answered yet), and
/// a reader that times each answer from the moment its request was due.
/// Open loop, as wrk2: a probe that waited for each answer before asking
/// again would see a stall once, however many requests it held up.
fn probe(
    c: Conn,
    pid: u32,
    i: usize,
    t0: f64,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let mut out = c.stream.try_clone().unwrap();
    let (tx, rx) = mpsc::channel::<(f64, f64)>();
    let writer = thread::spawn(move || {
        // Staggered, so the workers are not all asked at once.
        let start = mono_ms() + i as f64 * PROBE_EVERY.as_secs_f64() * 1000.0 / INSTANCES as f64;
        for k in 0.. {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let due = start + k as f64 * PROBE_EVERY.as_secs_f64() * 1000.0;
            let now = mono_ms();
            if due > now {
                thread::sleep(Duration::from_secs_f64((due - now) / 1000.0));
            }
            let cpu = process_cpu_ms(pid);
            out.write_all(b"GET /small.txt HTTP/1.1\r\nHost: probe\r\n\r\n").expect("probe write");
            if tx.send((due, cpu)).is_err() {
                break;
            }
        }
    });
    thread::spawn(move || {
        let mut c = c;
        for (due, cpu) in rx {
            let r = c.read_response();
            let (lat, busy) = (mono_ms() - due, process_cpu_ms(pid) - cpu);
            assert_eq!(r.status, 200, "probe request failed");
            seen.lock().unwrap().probes.push((due - t0, lat, busy));
        }
        writer.join().unwrap();
    })
}

#[test]
fn fifty_thousand_idle_connections() {
    let limit = raise_nofile();
    assert!(limit >= 16_000, "open-file limit {limit}: each holder needs 12,500 sockets");
    let conf = |listen: String| {
        builder()
            .main("worker_processes 1;\nworker_rlimit_nofile 20000;")
            .events("worker_connections 19000;")
            .http(&format!(
                "client_header_timeout {HEADER_TIMEOUT}s;\nkeepalive_timeout {KEEPALIVE_TIMEOUT}s;\n\
                 keepalive_requests 1000000;\nadd_header X-Pid $pid;\n\
                 server {{ listen {listen} reuseport backlog=4096; root html;\n\
                 location = /status {{ stub_status; }} }}"
            ))
            .file("html/small.txt", SMALL)
    };
    // The first is started on the builder's port (and waited for until it
    // accepts); the others join its SO_REUSEPORT group.
    let first = conf("127.0.0.1:{port}".into()).start();
    let port = first.port;
    let mut servers = vec![first];
    for _ in 1..INSTANCES {
        servers.push(conf(format!("127.0.0.1:{port}")).start());
    }
    let pids: Vec<u32> = servers.iter().map(worker_pid).collect();
    let probes = one_per_worker(port, &pids);
    let mut status = one_per_worker(port, &pids);
    let rss_before: Vec<u64> = pids.iter().map(|&p| rss_kb(p)).collect();
    let kernel_before = kernel_counters();

    let t0 = mono_ms();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let probers: Vec<_> = probes
        .into_iter()
        .zip(pids.clone())
        .enumerate()
        .map(|(i, (c, pid))| probe(c, pid, i, t0, seen.clone(), stop.clone()))
        .collect();
    let sampler = {
        let (seen, stop, pids) = (seen.clone(), stop.clone(), pids.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let t = mono_ms() - t0;
                // Minus the probe's and this sampler's own connections.
                let s: Vec<_> = (0..INSTANCES)
                    .map(|i| {
                        let p = pids[i];
                        (active(&mut status[i]).saturating_sub(2), rss_kb(p), process_cpu_ms(p), runqueue_wait_ms(p))
                    })
                    .collect();
                seen.lock().unwrap().samples.push((t, s));
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    // A second of probing before the flood: the machine's own noise.
    thread::sleep(Duration::from_millis(BASELINE_MS as u64));

    // The flood. Each holder reports when all its connections are open
    // (silent connects and answered GETs), then, once the server closed
    // them, per kind: how many, their lifetimes, bytes received.
    let until = t0 + 45_000.0;
    let mut holders: Vec<Holder> =
        (0..HOLDERS).map(|h| Holder::spawn(&format!("127.0.0.{}", h + 2), port, until)).collect();
    let mut open_ms = 0.0f64;
    for h in holders.iter_mut() {
        // [silent connected, keep-alive answered 200, when done]
        let r = h.report("flood-open", Duration::from_secs(30));
        assert_eq!(r[0] as usize, SILENT / HOLDERS, "every silent connect succeeds");
        assert_eq!(r[1] as usize, KEEPALIVE / HOLDERS, "every keep-alive connection is answered 200");
        open_ms = open_ms.max(r[2] - t0);
    }
    // [closed, lifetime min, p50, p99, max (ms), bytes received, last close]
    let mut silent = Vec::new();
    let mut keepalive = Vec::new();
    for h in holders.iter_mut() {
        silent.push(h.report("flood-silent", Duration::from_secs(45)));
        keepalive.push(h.report("flood-keepalive", Duration::from_secs(5)));
    }
    let closed_ms = silent.iter().chain(&keepalive).map(|r| r[6] - t0).fold(0.0, f64::max);
    thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    for p in probers {
        p.join().unwrap();
    }
    sampler.join().unwrap();
    let rss_after: Vec<u64> = pids.iter().map(|&p| rss_kb(p)).collect();
    let kernel = kernel_counters();
    drop(holders);

    let seen = seen.lock().unwrap();
    seen.print_timeline();
    let base = sorted(seen.probes.iter().filter(|p| p.0 < BASELINE_MS).map(|p| p.1));
    let flood: Vec<_> = seen.probes.iter().filter(|p| p.0 >= BASELINE_MS && p.0 <= closed_ms).collect();
    let lat = sorted(flood.iter().map(|p| p.1));
    let busy = sorted(flood.iter().map(|p| p.2));
    let open_at = |s: &(f64, Vec<Sample>)| s.1.iter().map(|x| x.0).sum::<u64>();
    let peak = seen.samples.iter().max_by_key(|s| open_at(s)).expect("no samples");
    let peak_open: Vec<u64> = peak.1.iter().map(|x| x.0).collect();
    let highest: Vec<u64> = (0..INSTANCES).map(|i| seen.samples.iter().map(|s| s.1[i].1).max().unwrap_or(0)).collect();
    let per_conn = |rss: &[u64]| -> Vec<u64> {
        (0..INSTANCES).map(|i| rss[i].saturating_sub(rss_before[i]) * 1024 / peak_open[i].max(1)).collect()
    };
    let peak_rss: Vec<u64> = peak.1.iter().map(|x| x.1).collect();
    let kernel: Vec<String> =
        kernel.iter().zip(&kernel_before).map(|((n, a), (_, b))| format!("{n} +{}", a.saturating_sub(*b))).collect();
    println!(
        "idle flood: {} connections ({SILENT} silent, {KEEPALIVE} keep-alive) to {INSTANCES} {} processes, all open \
         by {:.1} s; {} open at once at {:.1} s {peak_open:?}\n  worker RSS kB: before {rss_before:?}; highest \
         {highest:?} ({:?} B per connection); at that peak {peak_rss:?} ({:?} B per connection); after they \
         closed {rss_after:?}\n  kernel: {}",
        SILENT + KEEPALIVE,
        prog(),
        open_ms / 1000.0,
        open_at(peak),
        peak.0 / 1000.0,
        per_conn(&highest),
        per_conn(&peak_rss),
        kernel.join(", ")
    );
    for (tag, r) in [("silent", &silent), ("keep-alive", &keepalive)] {
        let lives: Vec<String> = r.iter().map(|r| format!("{:.0}/{:.0}/{:.0}/{:.0}", r[1], r[2], r[3], r[4])).collect();
        println!(
            "  {tag}: closed {:?}, lifetime ms min/p50/p99/max per holder {lives:?}",
            r.iter().map(|r| r[0]).collect::<Vec<_>>()
        );
    }
    println!(
        "  all closed by {:.1} s; probe before the flood: {} requests, round trip p50 {:.2} ms, p99 {:.2} ms, \
         max {:.2} ms\n  probe during the flood: {} requests, round trip p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, \
         max {:.2} ms; the worker's CPU while a request was out p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        closed_ms / 1000.0,
        base.len(),
        pct(&base, 0.5),
        pct(&base, 0.99),
        base.last().copied().unwrap_or(f64::NAN),
        lat.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 0.999),
        lat.last().copied().unwrap_or(f64::NAN),
        pct(&busy, 0.5),
        pct(&busy, 0.99),
        busy.last().copied().unwrap_or(f64::NAN)
    );

    let (header_ms, keepalive_ms) = ((HEADER_TIMEOUT * 1000) as f64, (KEEPALIVE_TIMEOUT * 1000) as f64);
    for (s, k) in silent.iter().zip(&keepalive) {
        assert_eq!(s[0] as usize, SILENT / HOLDERS, "every silent connection is closed by the server: {s:?}");
        assert_eq!(k[0] as usize, KEEPALIVE / HOLDERS, "every keep-alive connection is closed by the server: {k:?}");
        assert_eq!(s[5], 0.0, "nothing is sent to a connection that never sent a byte");
        // Never before the timeout. After it: the timers' one-second
        // sweep, sluice's deferred accept (a silent connection reaches it
        // about a second after its connect) and a loaded machine.
        // A silent connection whose client's ACK of the retransmitted
        // SYN-ACK was lost reaches sluice only at the next retransmission
        // (3 s, then 7 s after its connect), hence the wider bound on its
        // max.
        // (Less 10 ms: nginx times from its cached clock, read when
        // epoll_wait returned, a millisecond before the accept.)
        assert!(s[1] >= header_ms - 10.0, "a silent connection was closed before client_header_timeout: {s:?}");
        assert!(s[3] <= header_ms + 3000.0, "client_header_timeout overrun: {s:?}");
        assert!(s[4] <= header_ms + 9000.0, "client_header_timeout overrun: {s:?}");
        assert!(k[1] >= keepalive_ms - 10.0, "a keep-alive connection was closed before keepalive_timeout: {k:?}");
        assert!(k[4] <= keepalive_ms + 3000.0, "keepalive_timeout overrun: {k:?}");
    }
    let want = (SILENT + KEEPALIVE) as u64;
    assert!(open_at(peak) >= want * 99 / 100, "the servers held the flood at once: {peak_open:?}");
    for i in 0..INSTANCES {
        let each = per_conn(&highest)[i];
        assert!(each < 8192, "worker {i}: {each} bytes of RSS per idle connection");
        let (a, b) = (rss_after[i], rss_before[i]);
        assert!(a < b + 16 * 1024, "worker {i}: RSS {a} kB after the connections closed, {b} kB before");
    }
    // The worker's own stalls: a probe request waits behind at most a pass
    // of the sweep or a malloc_trim, not behind a whole second's worth of
    // parking or closing (30 ms of CPU for 12,500 connections done at once:
    // p99 20 ms here).
    assert!(pct(&busy, 0.99) < 10.0, "p99 of the worker's CPU while a probe was out: {:.2} ms", pct(&busy, 0.99));
    // The round trip includes waiting for a CPU on a machine that may be
    // busy with other work (2 to 10 ms at p99 on a quiet one; 115 to 140 ms
    // with the stalls above), hence the looser bound.
    assert!(pct(&lat, 0.99) < 50.0, "probe p99 {:.2} ms during the flood", pct(&lat, 0.99));
    // Each probe request was asserted 200, up to a second after the last
    // close; the servers still run.
    let served_after = seen.probes.iter().filter(|p| p.0 > closed_ms).count();
    assert!(served_after >= INSTANCES, "{served_after} probe requests after the flood");
    for s in servers.iter_mut() {
        assert!(s.is_running(), "a server exited");
    }
}

/// Not a test on its own: the client side of
/// `fifty_thousand_idle_connections`, run by it as a child process with
/// its orders in SLUICE_FLOOD_HOLDER: source address, port, how many silent
/// and keep-alive connections, when to give up, connects per second.
#[test]
#[ignore = "a child process of fifty_thousand_idle_connections"]
fn holder() {
    let Ok(orders) = std::env::var("SLUICE_FLOOD_HOLDER") else { return };
    let o: Vec<&str> = orders.split_whitespace().collect();
    let src: std::net::IpAddr = o[0].parse().unwrap();
    let port: u16 = o[1].parse().unwrap();
    let (silent, keepalive): (usize, usize) = (o[2].parse().unwrap(), o[3].parse().unwrap());
    let (until, rate): (f64, f64) = (o[4].parse().unwrap(), o[5].parse().unwrap());
    raise_nofile();
    // The clients are the load generator, not what is measured: at nice 10
    // their connects (and the kernel's loopback work done in them) give way
    // to the servers, as on the separate machines real clients run on.
    let _ = rustix::process::setpriority_process(None, 10);
    let dst: SocketAddr = ([127, 0, 0, 1], port).into();
    let connect = || -> TcpStream {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        s.bind(&SocketAddr::new(src, 0).into()).expect("bind source address");
        s.connect(&dst.into()).expect("connect");
        s.into()
    };
    // (socket, keep-alive?, idle since: connected or request sent, closed)
    let mut socks: Vec<(TcpStream, bool, f64, Option<f64>)> = Vec::with_capacity(silent + keepalive);
    let mut answered = 0;
    let (start, total) = (mono_ms(), silent + keepalive);
    for i in 0..total {
        // At `rate` a second, the two kinds mixed evenly.
        let due = start + i as f64 * 1000.0 / rate;
        let now = mono_ms();
        if due > now + 1.0 {
            thread::sleep(Duration::from_secs_f64((due - now) / 1000.0));
        }
        let ka = (i + 1) * keepalive / total > i * keepalive / total;
        let mut s = connect();
        let since = mono_ms();
        if ka {
            // Timed from before the request: the server's keep-alive wait
            // starts later, so a close before the timeout cannot hide.
            s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: flood\r\n\r\n").expect("send request");
            answered += usize::from(read_small_response(&mut s));
        }
        socks.push((s, ka, since, None));
    }
    let connected = socks.iter().filter(|s| !s.1).count();
    println!("flood-open {connected} {answered} {}", mono_ms());
    std::io::stdout().flush().unwrap();

    // Wait for the server to close each: one epoll set over all of them.
    use rustix::event::epoll;
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).unwrap();
    for (i, (s, _, _, _)) in socks.iter().enumerate() {
        s.set_nonblocking(true).unwrap();
        epoll::add(&ep, s, epoll::EventData::new_u64(i as u64), epoll::EventFlags::IN | epoll::EventFlags::RDHUP)
            .unwrap();
    }
    let mut bytes = [0usize; 2];
    let mut open = socks.len();
    let mut events: Vec<epoll::Event> = Vec::with_capacity(1024);
    let mut buf = [0u8; 4096];
    while open > 0 && mono_ms() < until {
        events.clear();
        let wait = rustix::time::Timespec { tv_sec: 0, tv_nsec: 100_000_000 };
        let _ = epoll::wait(&ep, rustix::buffer::spare_capacity(&mut events), Some(&wait));
        for ev in &events {
            let (s, ka, _, closed) = &mut socks[ev.data.u64() as usize];
            loop {
                match s.read(&mut buf) {
                    Ok(0) => {}
                    Ok(n) => {
                        bytes[usize::from(*ka)] += n;
                        continue;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    // A reset counts as closed too.
                    Err(_) => {}
                }
                *closed = Some(mono_ms());
                let _ = epoll::delete(&ep, &*s);
                open -= 1;
                break;
            }
        }
    }
    for (tag, ka) in [("silent", false), ("keepalive", true)] {
        let kind = || socks.iter().filter(move |s| s.1 == ka);
        let life = sorted(kind().filter_map(|(_, _, t, c)| c.map(|c| c - t)));
        let last = kind().filter_map(|s| s.3).fold(0.0, f64::max);
        println!(
            "flood-{tag} {} {:.0} {:.0} {:.0} {:.0} {} {last}",
            life.len(),
            pct(&life, 0.0),
            pct(&life, 0.5),
            pct(&life, 0.99),
            life.last().copied().unwrap_or(f64::NAN),
            bytes[usize::from(ka)]
        );
    }
    std::io::stdout().flush().unwrap();
}

/// Reads one response to the holder's GET (head, then Content-Length
/// bytes); true if it is a 200 with the whole body.
fn read_small_response(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(usize::MAX);
            if got.len() >= end + 4 + len {
                return head.starts_with("http/1.1 200");
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}
