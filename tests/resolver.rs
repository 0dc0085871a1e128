//! `resolver` and `resolver_timeout`: `proxy_pass` with a host name in a
//! variable, resolved at request time through a DNS server the test runs
//! on loopback (it counts the questions it gets). With SLUICE_TEST_NGINX=1
//! the same tests run against Debian's nginx.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// One record of the test zone: its type and data, TTL 300.
#[derive(Clone, Copy)]
enum Rr {
    A([u8; 4]),
    Aaaa([u8; 16]),
    Cname(&'static str),
}

/// The test zone: `app.test` has A 127.0.0.1, no AAAA; `www.test` is an
/// alias of `mid.test`, itself an alias of `app.test` (both families asked
/// get the CNAME); `both.test` has A 127.0.0.1 and AAAA ::1; `dup.test`
/// lists A 127.0.0.2 twice. Every other name is NXDOMAIN.
fn zone(name: &str, qtype: u16) -> Option<Vec<Rr>> {
    let mut v6 = [0u8; 16];
    v6[15] = 1;
    Some(match (name.to_ascii_lowercase().as_str(), qtype) {
        ("app.test", 1) => vec![Rr::A([127, 0, 0, 1])],
        ("app.test", _) => vec![],
        ("www.test", _) => vec![Rr::Cname("mid.test")],
        ("mid.test", _) => vec![Rr::Cname("app.test")],
        ("both.test", 1) => vec![Rr::A([127, 0, 0, 1])],
        ("both.test", 28) => vec![Rr::Aaaa(v6)],
        ("dup.test", 1) => vec![Rr::A([127, 0, 0, 2]), Rr::A([127, 0, 0, 2])],
        ("both.test" | "dup.test", _) => vec![],
        _ => return None,
    })
}

/// A DNS server on 127.0.0.1 answering from [`zone`]; it records the
/// questions it gets (`name type`). Stops on drop.
struct Dns {
    port: u16,
    questions: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    served: Arc<AtomicUsize>,
}

impl Dns {
    fn start() -> Dns {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let port = sock.local_addr().unwrap().port();
        let questions = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let served = Arc::new(AtomicUsize::new(0));
        let (q2, s2, n2) = (questions.clone(), stop.clone(), served.clone());
        thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !s2.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let Some((name, qtype, qend)) = question(&buf[..n]) else { continue };
                q2.lock().unwrap().push(format!("{name} {qtype}"));
                let records = zone(&name, qtype);
                let mut r = buf[..qend].to_vec();
                r[2] = 0x81 | (buf[2] & 0x01);
                r[3] = if records.is_some() { 0x80 } else { 0x83 };
                r[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
                let records = records.unwrap_or_default();
                r[7] = records.len() as u8;
                for rr in records {
                    let (rtype, data) = match rr {
                        Rr::A(a) => (1u16, a.to_vec()),
                        Rr::Aaaa(a) => (28, a.to_vec()),
                        Rr::Cname(target) => {
                            let mut d = Vec::new();
                            for l in target.split('.') {
                                d.push(l.len() as u8);
                                d.extend_from_slice(l.as_bytes());
                            }
                            d.push(0);
                            (5, d)
                        }
                    };
                    // Owner: the question's name; class IN, TTL 300.
                    r.extend_from_slice(&[0xc0, 12]);
                    r.extend_from_slice(&rtype.to_be_bytes());
                    r.extend_from_slice(&[0, 1, 0, 0, 1, 44]);
                    r.extend_from_slice(&(data.len() as u16).to_be_bytes());
                    r.extend_from_slice(&data);
                }
                let _ = sock.send_to(&r, from);
                n2.fetch_add(1, Ordering::Relaxed);
            }
        });
        Dns { port, questions, stop, served }
    }

    fn asked(&self) -> Vec<String> {
        self.questions.lock().unwrap().clone()
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The question's name, type and where it ends.
fn question(m: &[u8]) -> Option<(String, u16, usize)> {
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *m.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(m.get(at..at + len)?).into_owned());
        at += len;
    }
    let qtype = u16::from_be_bytes([*m.get(at)?, *m.get(at + 1)?]);
    Some((labels.join("."), qtype, at + 4))
}

fn server(dns_port: u16, origin: &Origin, extra: &str) -> TestServer {
    builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                location /dyn/ {{
                    resolver 127.0.0.1:{dns_port} valid=30s;
                    resolver_timeout 2s;
                    proxy_pass http://$arg_h:{o}$uri;
                }}
                location /none/ {{
                    proxy_pass http://$arg_h:{o}$uri;
                }}
                {extra}
            }}"#,
            o = origin.port
        ))
        .start()
}

#[test]
fn names_in_variables_are_resolved_and_kept() {
    let dns = Dns::start();
    let o = echo();
    let s = server(dns.port, &o, "");
    let r = s.get("/dyn/a?h=app.test");
    assert_eq!((r.status, r.text().as_str()), (200, "GET /dyn/a\n"), "{}\n{}", r.head, s.error_log());
    let first = dns.asked();
    assert!(first.contains(&"app.test 1".to_string()), "{first:?}");
    // Kept for valid=30s: no second question.
    assert_eq!(s.get("/dyn/b?h=app.test").status, 200);
    assert_eq!(dns.asked().len(), first.len(), "{:?}", dns.asked());
    assert!(dns.served.load(Ordering::Relaxed) >= 1);

    // An unknown name: 502 and nginx's line.
    let r = s.get("/dyn/c?h=missing.test");
    assert_eq!(r.status, 502);
    let log = s.wait_error_log("could not be resolved");
    assert!(log.contains("missing.test could not be resolved (3: Host not found)"), "{log}");
    // No resolver here: nginx's 502.
    assert_eq!(s.get("/none/x?h=app.test").status, 502);
    let log = s.wait_error_log("no resolver defined");
    assert!(log.contains("no resolver defined to resolve app.test"), "{log}");
}

#[test]
fn cname_chains_are_followed_and_cached() {
    let dns = Dns::start();
    let o = echo();
    // No valid=: the records' own TTLs (300 s) keep the answers.
    let s = server(
        dns.port,
        &o,
        &format!("location /ttl/ {{ resolver 127.0.0.1:{}; proxy_pass http://$arg_h:{}$uri; }}", dns.port, o.port),
    );
    let r = s.get("/ttl/a?h=www.test");
    assert_eq!((r.status, r.text().as_str()), (200, "GET /ttl/a\n"), "{}\n{}", r.head, s.error_log());
    // Each alias asked about, then its target, both families each time.
    let first = dns.asked();
    for q in ["www.test 1", "www.test 28", "mid.test 1", "mid.test 28", "app.test 1", "app.test 28"] {
        assert!(first.contains(&q.to_string()), "{q} not in {first:?}");
    }
    // The aliases are cached as well as the address: nothing asked again,
    // whether through the alias or the target's own name.
    assert_eq!(s.get("/ttl/b?h=WWW.test").status, 200);
    assert_eq!(s.get("/ttl/c?h=mid.test").status, 200);
    assert_eq!(s.get("/ttl/d?h=app.test").status, 200);
    assert_eq!(dns.asked(), first);
}

#[test]
fn families_follow_ipv4_and_ipv6() {
    let dns = Dns::start();
    let o = echo();
    let loc = |path: &str, flags: &str| {
        format!(
            "location /{path}/ {{ resolver 127.0.0.1:{} {flags}; proxy_pass http://$arg_h:{}$uri; \
             add_header X-Addr $upstream_addr always; }}",
            dns.port, o.port
        )
    };
    // `ipv4=` came in nginx 1.23.1: Debian's 1.22 refuses it.
    let v6 = !common::cache::nginx_mode();
    let v6_loc = if v6 { loc("v6", "ipv4=off") } else { String::new() };
    let s = server(dns.port, &o, &[loc("v4", "ipv6=off"), v6_loc, loc("all", "")].concat());
    // Both families by default (the origin answers on IPv4 only).
    let r = s.get("/all/a?h=both.test");
    assert_eq!(r.status, 200, "{}\n{}", r.head, s.error_log());
    assert!(r.header("X-Addr").unwrap_or("").ends_with(&format!("127.0.0.1:{}", o.port)), "{}", r.head);
    assert!(dns.asked().contains(&"both.test 28".to_string()), "{:?}", dns.asked());
    // ipv6=off: only A asked, and the answer is its own (not the default
    // location's, which holds an IPv6 address too).
    let before = dns.asked().len();
    let r = s.get("/v4/a?h=both.test");
    assert_eq!((r.status, r.header("X-Addr")), (200, Some(format!("127.0.0.1:{}", o.port).as_str())));
    assert_eq!(dns.asked()[before..], ["both.test 1".to_string()]);
    // ipv4=off: only AAAA asked; the origin listens on IPv4 only, so the
    // one address tried is [::1] and the request fails.
    if !v6 {
        return;
    }
    let before = dns.asked().len();
    let r = s.get("/v6/a?h=both.test");
    assert_eq!((r.status, r.header("X-Addr")), (502, Some(format!("[::1]:{}", o.port).as_str())), "{}", r.head);
    assert_eq!(dns.asked()[before..], ["both.test 28".to_string()]);
}

#[test]
fn duplicate_addresses_are_each_tried() {
    let dns = Dns::start();
    let o = echo();
    let s = server(
        dns.port,
        &o,
        &format!(
            "location /dup/ {{ resolver 127.0.0.1:{}; proxy_pass http://$arg_h:{}$uri; \
             add_header X-Addr $upstream_addr always; }}",
            dns.port, o.port
        ),
    );
    // 127.0.0.2 listed twice, nothing listening there: two tries, as nginx
    // makes a peer of each record.
    let r = s.get("/dup/a?h=dup.test");
    let p = o.port;
    assert_eq!((r.status, r.header("X-Addr")), (502, Some(format!("127.0.0.2:{p}, 127.0.0.2:{p}").as_str())));
    // Failures do not carry over to the next request: the same two tries.
    let r = s.get("/dup/b?h=dup.test");
    assert_eq!((r.status, r.header("X-Addr")), (502, Some(format!("127.0.0.2:{p}, 127.0.0.2:{p}").as_str())));
}

#[test]
fn a_silent_server_times_out() {
    let o = echo();
    // A port nobody answers on.
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let s = server(port, &o, "");
    let t0 = Instant::now();
    let r = s.get("/dyn/a?h=app.test");
    assert_eq!(r.status, 502);
    let took = t0.elapsed();
    assert!(took >= Duration::from_millis(1500) && took < Duration::from_secs(6), "{took:?}");
    let log = s.wait_error_log("could not be resolved");
    assert!(log.contains("app.test could not be resolved (110: Operation timed out)"), "{log}");
}

#[test]
fn config_checks() {
    let t = builder().http("server { listen 127.0.0.1:{port}; resolver 127.0.0.1 valid=x; }").prepare();
    let out = t.run(&["-t"]);
    assert!(!out.status.success());
    assert!(stderr_of(&out).contains("invalid parameter: valid=x"), "{}", stderr_of(&out));
    let t = builder()
        .http("server { listen 127.0.0.1:{port}; resolver 127.0.0.1:5353 [::1] valid=10s ipv6=off; resolver_timeout 5s; }")
        .prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}
