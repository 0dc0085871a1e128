//! `server NAME resolve` and `service=` in an `upstream` with a `zone`
//! (nginx 1.27.3): a DNS server in the test whose answers change while
//! `wrk` runs, and what reaches the origins. Names are re-resolved in the
//! background per `valid=`; peers come and go without a reload and with no
//! failed request; a resolver that stops answering keeps the last set; a
//! name that disappears empties it; a reload during resolution keeps
//! serving. The DNS answers on 127.0.0.1; the origins listen on 127.0.0.2
//! and 127.0.0.3 (the same port: an A record carries no port) or on
//! 127.0.0.1 ports that SRV records name. nginx has `resolve` in open
//! source from 1.27.3 on: with SLUICE_TEST_NGINX=1 (Debian's 1.22) these
//! configurations are refused; nginx's own upstream_resolve*.t,
//! upstream_service*.t and their stream twins are the reference instead.

mod common;

use std::collections::HashMap;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// What the test DNS server does with questions.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Answer,
    /// Reads questions and answers none.
    Silent,
    /// Answers SERVFAIL.
    Fail,
}

#[derive(Default)]
struct Zone {
    /// A records by name.
    a: HashMap<String, Vec<[u8; 4]>>,
    /// AAAA records by name.
    aaaa: HashMap<String, Vec<[u8; 16]>>,
    /// SRV records by name: (priority, weight, port, target).
    srv: HashMap<String, Vec<(u16, u16, u16, String)>>,
}

/// A DNS server on 127.0.0.1 answering from a zone the test changes (TTL
/// 1 s; an unknown name is NXDOMAIN, a name without AAAA answers empty).
struct Dns {
    port: u16,
    zone: Arc<Mutex<Zone>>,
    mode: Arc<Mutex<Mode>>,
    stop: Arc<AtomicBool>,
}

impl Dns {
    fn start() -> Dns {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let port = sock.local_addr().unwrap().port();
        let zone = Arc::new(Mutex::new(Zone::default()));
        let mode = Arc::new(Mutex::new(Mode::Answer));
        let stop = Arc::new(AtomicBool::new(false));
        let (z2, m2, s2) = (zone.clone(), mode.clone(), stop.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !s2.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let mode = *m2.lock().unwrap();
                if mode == Mode::Silent {
                    continue;
                }
                let Some(r) = answer(&buf[..n], &z2.lock().unwrap(), mode == Mode::Fail) else { continue };
                let _ = sock.send_to(&r, from);
            }
        });
        Dns { port, zone, mode, stop }
    }

    fn set_a(&self, name: &str, ips: &[[u8; 4]]) {
        self.zone.lock().unwrap().a.insert(name.into(), ips.to_vec());
    }

    fn set_aaaa(&self, name: &str, ips: &[std::net::Ipv6Addr]) {
        self.zone.lock().unwrap().aaaa.insert(name.into(), ips.iter().map(|i| i.octets()).collect());
    }

    fn remove(&self, name: &str) {
        let mut z = self.zone.lock().unwrap();
        z.a.remove(name);
        z.aaaa.remove(name);
        z.srv.remove(name);
    }

    fn set_srv(&self, name: &str, records: &[(u16, u16, u16, &str)]) {
        let r = records.iter().map(|&(p, w, port, t)| (p, w, port, t.to_string())).collect();
        self.zone.lock().unwrap().srv.insert(name.into(), r);
    }

    fn mode(&self, m: Mode) {
        *self.mode.lock().unwrap() = m;
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn encode_name(out: &mut Vec<u8>, name: &str) {
    for l in name.split('.').filter(|l| !l.is_empty()) {
        out.push(l.len() as u8);
        out.extend_from_slice(l.as_bytes());
    }
    out.push(0);
}

/// The answer to one question from `zone`.
fn answer(m: &[u8], zone: &Zone, fail: bool) -> Option<Vec<u8>> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *m.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(m.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let name = labels.join(".");
    let qtype = u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]);
    let mut r = m.get(..at + 4)?.to_vec();
    r[2] = 0x81 | (m[2] & 0x01);
    r[6..12].copy_from_slice(&[0; 6]);
    let known = zone.a.contains_key(&name) || zone.aaaa.contains_key(&name) || zone.srv.contains_key(&name);
    r[3] = match (fail, known) {
        (true, _) => 0x82,
        (false, true) => 0x80,
        (false, false) => 0x83,
    };
    if fail || !known {
        return Some(r);
    }
    let mut count = 0u16;
    let mut record = |r: &mut Vec<u8>, rtype: u16, data: &[u8]| {
        r.extend_from_slice(&[0xc0, 12]);
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&[0, 1, 0, 0, 0, 1]);
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
        count += 1;
    };
    match qtype {
        1 => {
            for ip in zone.a.get(&name).into_iter().flatten() {
                record(&mut r, 1, ip);
            }
        }
        28 => {
            for ip in zone.aaaa.get(&name).into_iter().flatten() {
                record(&mut r, 28, ip);
            }
        }
        33 => {
            for (p, w, port, t) in zone.srv.get(&name).into_iter().flatten() {
                let mut d = Vec::new();
                d.extend_from_slice(&p.to_be_bytes());
                d.extend_from_slice(&w.to_be_bytes());
                d.extend_from_slice(&port.to_be_bytes());
                encode_name(&mut d, t);
                record(&mut r, 33, &d);
            }
        }
        _ => {}
    }
    r[6..8].copy_from_slice(&count.to_be_bytes());
    Some(r)
}

/// Two origins on the same port, on 127.0.0.2 and 127.0.0.3, answering
/// "2" and "3".
fn two_hosts() -> (Origin, Origin, u16) {
    for _ in 0..20 {
        let a = Origin::try_start_at("127.0.0.2", 0, |_| Reply::ok("2")).expect("bind 127.0.0.2");
        let port = a.port;
        if let Some(b) = Origin::try_start_at("127.0.0.3", port, |_| Reply::ok("3")) {
            return (a, b, port);
        }
    }
    panic!("no port free on both 127.0.0.2 and 127.0.0.3");
}

fn server(dns: &Dns, upstream: &str) -> TestServer {
    builder()
        .http(&format!(
            r#"resolver 127.0.0.1:{d} valid=1s;
            resolver_timeout 1s;
            upstream u {{
                zone u 64k;
                {upstream}
                keepalive 16;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    proxy_pass http://u;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    add_header X-Peer $upstream_addr always;
                }}
                location = /status {{ sluice_status; }}
            }}"#,
            d = dns.port
        ))
        .start()
}

/// Polls until `what` holds (every 100 ms), or panics after `limit`.
fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        thread::sleep(Duration::from_millis(100));
    }
    t0.elapsed()
}

fn body(s: &TestServer, path: &str) -> String {
    let r = s.get(path);
    if r.status == 200 { r.text() } else { format!("{} {}", r.status, r.head) }
}

fn assert_no_failures(res: &WrkResult, s: &TestServer) {
    assert!(res.requests > 100, "too few requests:\n{}", res.output);
    assert_eq!(res.error_count(), 0, "socket errors: {:?}\n{}", res.socket_errors, res.output);
    assert!(res.non_2xx.is_none(), "failed requests: {:?}\n{}\n{}", res.non_2xx, res.output, s.error_log());
}

#[test]
fn a_records_change_under_load() {
    let dns = Dns::start();
    let (o2, o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = server(&dns, &format!("server app.test:{port} resolve max_fails=0;"));
    until(Duration::from_secs(5), "first resolution", || body(&s, "/") == "2");
    for _ in 0..5 {
        assert_eq!(body(&s, "/"), "2");
    }
    // A second address joins; the peer that stayed keeps its pooled
    // connection (one client, one request at a time: one connection each).
    let conns = o2.connections();
    dns.set_a("app.test", &[[127, 0, 0, 2], [127, 0, 0, 3]]);
    until(Duration::from_secs(3), "the new address gets traffic", || body(&s, "/") == "3");
    for _ in 0..10 {
        body(&s, "/");
    }
    assert_eq!((o2.connections(), o3.connections()), (conns, 1), "pooled connections were not kept");

    // Under load, the first address leaves.
    let wrk = wrk_start(&["-t1", "-c8", "-d5s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(1500));
    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    let t = until(Duration::from_secs(3), "the old address stops getting traffic", || {
        let before = o2.count();
        thread::sleep(Duration::from_millis(300));
        o2.count() == before
    });
    // valid=1s, plus the question and a request finishing on the old peer.
    assert!(t < Duration::from_millis(2500), "took {t:?}");
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    let stale = o2.count();
    for _ in 0..20 {
        assert_eq!(body(&s, "/"), "3");
    }
    assert_eq!(o2.count(), stale, "requests still reach the address that left");
    // sluice_status lists the peer resolved now, by address.
    let status = s.get("/status").text();
    assert!(status.contains(&format!("\"server\":\"127.0.0.3:{port}\"")), "{status}");
    assert!(!status.contains(&format!("\"server\":\"127.0.0.2:{port}\"")), "{status}");
}

/// AAAA answers: a name with an IPv6 address is followed to it (and
/// from IPv4 to IPv6 and back) under load.
#[test]
fn aaaa_records_are_followed() {
    let dns = Dns::start();
    let v4 = Origin::try_start_at("127.0.0.2", 0, |_| Reply::ok("4")).expect("bind 127.0.0.2");
    let port = v4.port;
    let Some(v6) = Origin::try_start_at("::1", port, |_| Reply::ok("6")) else {
        panic!("port {port} taken on ::1");
    };
    dns.set_aaaa("app.test", &["::1".parse().unwrap()]);
    let s = server(&dns, &format!("server app.test:{port} resolve max_fails=0;"));
    until(Duration::from_secs(5), "first resolution", || body(&s, "/") == "6");
    assert_eq!(s.get("/").header("X-Peer"), Some(format!("[::1]:{port}").as_str()));
    let wrk = wrk_start(&["-t1", "-c8", "-d4s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(1000));
    // Both families, then IPv4 alone.
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    until(Duration::from_secs(3), "the A record joins", || v4.count() > 0);
    dns.set_aaaa("app.test", &[]);
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    until(Duration::from_secs(3), "the AAAA record goes", || {
        let before = v6.count();
        (0..5).all(|_| body(&s, "/") == "4") && v6.count() == before
    });
}

#[test]
fn srv_records_give_ports_weights_and_backups() {
    let dns = Dns::start();
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let c = Origin::ok("c");
    dns.set_a("host.test", &[[127, 0, 0, 1]]);
    dns.set_srv(
        "_http._tcp.svc.test",
        &[(1, 1, a.port, "host.test"), (1, 3, b.port, "host.test"), (5, 1, c.port, "host.test")],
    );
    let s = server(&dns, "server svc.test service=http resolve;");
    until(Duration::from_secs(5), "both primaries resolved", || {
        let got: Vec<String> = (0..4).map(|_| body(&s, "/")).collect();
        got.contains(&"a".to_string()) && got.contains(&"b".to_string())
    });
    // Weighted 1:3 over the priority-1 records; the priority-5 one is a
    // backup that gets nothing while they answer.
    let (a0, b0, c0) = (a.count(), b.count(), c.count());
    for _ in 0..40 {
        assert_ne!(body(&s, "/"), "c");
    }
    assert_eq!((a.count() - a0, b.count() - b0, c.count() - c0), (10, 30, 0));

    // Under load, the service moves to the third port alone.
    let wrk = wrk_start(&["-t1", "-c8", "-d5s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(1500));
    dns.set_srv("_http._tcp.svc.test", &[(2, 1, c.port, "host.test")]);
    until(Duration::from_secs(3), "traffic moves to the new port", || {
        let (a1, b1) = (a.count(), b.count());
        thread::sleep(Duration::from_millis(300));
        a.count() == a1 && b.count() == b1 && c.count() > c0
    });
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    assert_eq!(body(&s, "/"), "c");
}

#[test]
fn a_silent_or_failing_resolver_keeps_the_last_set() {
    let dns = Dns::start();
    let (o2, _o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = server(&dns, &format!("server app.test:{port} resolve;"));
    until(Duration::from_secs(5), "first resolution", || body(&s, "/") == "2");
    dns.mode(Mode::Silent);
    s.wait_error_log("110: Operation timed out");
    for _ in 0..10 {
        assert_eq!(body(&s, "/"), "2");
    }
    let log = s.error_log();
    assert!(
        log.contains(
            "app.test could not be resolved (110: Operation timed out) in upstream \"u\", keeping its current peers"
        ),
        "{log}"
    );
    dns.mode(Mode::Fail);
    s.wait_error_log("2: Server failure");
    for _ in 0..10 {
        assert_eq!(body(&s, "/"), "2");
    }
    // Answering again, with another address: followed.
    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    dns.mode(Mode::Answer);
    until(Duration::from_secs(4), "the new answer is followed", || body(&s, "/") == "3");
    assert!(o2.count() >= 20);
}

#[test]
fn a_name_that_disappears_empties_the_upstream() {
    let dns = Dns::start();
    let (_o2, _o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = server(&dns, &format!("server app.test:{port} resolve;"));
    until(Duration::from_secs(5), "first resolution", || body(&s, "/") == "2");
    // NXDOMAIN: nginx removes the peers; requests get 502 "no live upstreams".
    dns.remove("app.test");
    until(Duration::from_secs(4), "the peers go", || s.get("/").status == 502);
    let log = s.wait_error_log("no live upstreams");
    assert!(log.contains("app.test could not be resolved (3: Host not found) in upstream \"u\""), "{log}");
    let status = s.get("/status").text();
    assert!(status.contains("\"u\":{\"peers\":[]"), "{status}");
    // Back again.
    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    until(Duration::from_secs(4), "the name comes back", || body(&s, "/") == "3");
}

#[test]
fn reloads_during_resolution_keep_serving() {
    let dns = Dns::start();
    let (o2, o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = server(&dns, &format!("server app.test:{port} resolve;"));
    until(Duration::from_secs(5), "first resolution", || body(&s, "/") == "2");
    // The resolver is slow (silent, timing out at 1 s) while reloads come:
    // each new configuration starts with the addresses the old one had.
    dns.mode(Mode::Silent);
    let wrk = wrk_start(&["-t1", "-c8", "-d5s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(300));
    for _ in 0..6 {
        s.signal("reload");
        thread::sleep(Duration::from_millis(400));
    }
    // Answering again, with a change, then one more reload.
    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    dns.mode(Mode::Answer);
    until(Duration::from_secs(4), "the change is followed", || o3.count() > 0);
    s.signal("reload");
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    assert!(o2.count() > 0);
    assert_eq!(body(&s, "/"), "3");
}

/// A name added through the API (`api write=on`) is resolved at run time
/// like a configured `resolve` server: under load, it gets traffic once
/// resolved, follows its DNS changes, then is drained and removed through
/// the API, and no request fails.
#[test]
fn api_added_names_follow_dns_under_load() {
    let dns = Dns::start();
    let one = Origin::ok("1");
    let (o2, o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"resolver 127.0.0.1:{d} valid=1s;
            resolver_timeout 1s;
            upstream u {{
                zone u 64k;
                server 127.0.0.1:{one} max_fails=0;
                keepalive 16;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    proxy_pass http://u;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                }}
                location /api/ {{ api write=on; }}
            }}"#,
            d = dns.port,
            one = one.port
        ))
        .start();
    let api = |method: &str, path: &str, body: Option<&str>| {
        let mut c = std::process::Command::new("curl");
        c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method]);
        if let Some(b) = body {
            c.args(["--data-binary", b]);
        }
        let out = c.arg(s.url(&format!("/api/9/http/upstreams/u/servers{path}"))).output().expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse::<u16>().unwrap_or(0), body.to_string())
    };
    let wrk = wrk_start(&["-t2", "-c8", "-d7s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(500));
    let (code, added) = api("POST", "", Some(&format!("{{\"server\":\"app.test:{port}\",\"max_fails\":0}}")));
    assert_eq!(code, 201, "{added}");
    assert!(added.starts_with(&format!("{{\"id\":1,\"server\":\"app.test:{port}\"")), "{added}");
    until(Duration::from_secs(3), "the added name gets traffic", || o2.count() > 20);

    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    until(Duration::from_secs(4), "the new address gets traffic", || o3.count() > 20);
    until(Duration::from_secs(4), "the old address gets none", || {
        let before = o2.count();
        thread::sleep(Duration::from_millis(300));
        o2.count() == before
    });
    // The listing shows the server as it was added, by name.
    let (_, list) = api("GET", "", None);
    assert!(list.contains(&format!("\"server\":\"app.test:{port}\"")), "{list}");

    let (code, drained) = api("PATCH", "/1", Some("{\"drain\":true}"));
    assert_eq!(code, 200, "{drained}");
    until(Duration::from_secs(3), "the drained name gets no new requests", || {
        let before = o3.count();
        thread::sleep(Duration::from_millis(300));
        o3.count() == before
    });
    let (code, rest) = api("DELETE", "/1", None);
    assert_eq!(code, 200);
    assert!(!rest.contains("app.test"), "{rest}");
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    let (c2, c3) = (o2.count(), o3.count());
    for _ in 0..10 {
        assert_eq!(body(&s, "/"), "1");
    }
    assert_eq!((o2.count(), o3.count()), (c2, c3));
}

#[test]
fn config_errors_in_nginx_words() {
    assert_refused(
        "upstream u { server app.test:81 resolve; } resolver 127.0.0.1;",
        "resolving names at run time requires upstream \"u\" in",
    );
    assert_refused(
        "upstream u { zone u 64k; server app.test:81 resolve; }",
        "no resolver defined to resolve names at run time in upstream \"u\" in",
    );
    assert_refused(
        "upstream u { zone u 64k; server app.test service=http; } resolver 127.0.0.1;",
        "service upstream \"app.test\" requires \"resolve\" parameter",
    );
    assert_refused(
        "upstream u { zone u 64k; server app.test:80 service=http resolve; } resolver 127.0.0.1;",
        "service upstream \"app.test:80\" may not have port",
    );
    assert_refused("upstream u { zone u 1k; server 127.0.0.1:81; }", "zone \"u\" is too small");
    // An upstream's own resolver, and an address with `resolve`, are fine.
    let t = builder()
        .http(
            "upstream u { zone u 64k; server app.test:81 resolve; server 127.0.0.1:82 resolve; \
             resolver 127.0.0.1:53 valid=5s; resolver_timeout 2s; } \
             server { listen 127.0.0.1:{port}; location / { proxy_pass http://u; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// The same in a `stream` upstream (resolver at the stream level): wrk's
/// HTTP goes through the TCP proxy to whichever address the name has.
#[test]
fn stream_upstreams_follow_dns_too() {
    let dns = Dns::start();
    let (o2, o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    let s = builder()
        .main(&format!(
            r#"stream {{
                resolver 127.0.0.1:{d} valid=1s;
                resolver_timeout 1s;
                upstream s {{
                    zone s 64k;
                    server app.test:{port} resolve;
                }}
                server {{
                    listen 127.0.0.1:{{port1}};
                    proxy_pass s;
                }}
            }}"#,
            d = dns.port
        ))
        .http("server { listen 127.0.0.1:{port}; location / { return 204; } }")
        .ports(2)
        .start();
    let url = format!("http://127.0.0.1:{}/", s.ports[1]);
    let get = || {
        let out = std::process::Command::new("curl").args(["-s", "-m", "3", &url]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    until(Duration::from_secs(5), "first resolution", || get() == "2");
    // wrk's sessions stay with the origin they reached (as nginx's), and
    // go on without an error; new sessions follow the name.
    let wrk = wrk_start(&["-t1", "-c8", "-d4s", "--timeout", "3s", &url]);
    thread::sleep(Duration::from_millis(1200));
    dns.set_a("app.test", &[[127, 0, 0, 3]]);
    let t = until(Duration::from_secs(3), "new sessions go to the new address", || get() == "3");
    assert!(t < Duration::from_millis(2500), "took {t:?}");
    for _ in 0..5 {
        assert_eq!(get(), "3");
    }
    assert!(o2.count() > 0 && o3.count() >= 6);
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    assert_eq!(get(), "3");
}

/// Tengine's `check` on resolved peers: a peer that appears is probed,
/// and one that does not answer is taken out (`unhealthy` in
/// sluice_status) while the one that does serves every request.
#[test]
fn resolved_peers_are_actively_checked() {
    let dns = Dns::start();
    let (o2, _o3, port) = two_hosts();
    // 127.0.0.4: nothing listens there.
    dns.set_a("app.test", &[[127, 0, 0, 2], [127, 0, 0, 4]]);
    let s = server(
        &dns,
        &format!(
            "server app.test:{port} resolve max_fails=0;\n\
             check interval=100 rise=1 fall=1 timeout=500 type=http default_down=false;"
        ),
    );
    until(Duration::from_secs(5), "the silent peer is checked down", || {
        let status = s.get("/status").text();
        status.contains(&format!("\"server\":\"127.0.0.4:{port}\",\"state\":\"unhealthy\""))
    });
    let before = o2.count();
    let refused = || s.error_log().matches("connect() failed").count();
    let refused_before = refused();
    for _ in 0..10 {
        assert_eq!(body(&s, "/"), "2");
    }
    assert_eq!(o2.count(), before + 10);
    // None of them tried the peer the check holds down.
    assert_eq!(refused(), refused_before, "{}", s.error_log());
    let status = s.get("/status").text();
    assert!(status.contains(&format!("\"server\":\"127.0.0.2:{port}\",\"state\":\"up\"")), "{status}");
    let log = s.error_log();
    assert!(log.contains(&format!("disable check peer: 127.0.0.4:{port}")), "{log}");
}

/// `sticky cookie` over resolved peers: the cookie names a peer by the MD5
/// of its address, so it follows the peer while the name resolves to it,
/// falls back (and is reissued) when the address leaves, and sticks again
/// when it returns.
#[test]
fn sticky_sessions_follow_resolved_peers() {
    use md5::Digest;
    let dns = Dns::start();
    let (_o2, _o3, port) = two_hosts();
    dns.set_a("app.test", &[[127, 0, 0, 2], [127, 0, 0, 3]]);
    let s = server(&dns, &format!("server app.test:{port} resolve; sticky cookie s;"));
    let cookie_of = |ip: &str| -> String {
        md5::Md5::digest(format!("{ip}:{port}").as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    };
    let (c2, c3) = (cookie_of("127.0.0.2"), cookie_of("127.0.0.3"));
    let get = |c: &str| {
        let r = s.get_with("/", &[&format!("Cookie: s={c}")]);
        let set = r.header("set-cookie").unwrap_or("").to_string();
        (r.text(), set)
    };
    until(Duration::from_secs(5), "both addresses resolved", || get(&c3).0 == "3" && get(&c2).0 == "2");
    for _ in 0..6 {
        assert_eq!(get(&c3), ("3".to_string(), format!("s={c3}")));
        assert_eq!(get(&c2), ("2".to_string(), format!("s={c2}")));
    }
    dns.set_a("app.test", &[[127, 0, 0, 2]]);
    until(Duration::from_secs(5), "127.0.0.3 left the upstream", || get(&c3).0 == "2");
    assert_eq!(get(&c3), ("2".to_string(), format!("s={c2}")));
    dns.set_a("app.test", &[[127, 0, 0, 2], [127, 0, 0, 3]]);
    until(Duration::from_secs(5), "127.0.0.3 is back", || get(&c3).0 == "3");
    assert_eq!(get(&c3), ("3".to_string(), format!("s={c3}")));
}
