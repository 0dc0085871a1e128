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

/// A DNS server on 127.0.0.1: `app.test` has A 127.0.0.1 (TTL 300), no
/// AAAA; every other name is NXDOMAIN. Stops on drop.
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
                let known = name.eq_ignore_ascii_case("app.test");
                let mut r = buf[..qend].to_vec();
                r[2] = 0x81 | (buf[2] & 0x01);
                r[3] = if known { 0x80 } else { 0x83 };
                r[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 0]);
                if known && qtype == 1 {
                    r[7] = 1;
                    r.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 127, 0, 0, 1]);
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
