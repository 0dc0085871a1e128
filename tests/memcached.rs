//! `memcached_pass`: values from a real memcached (Debian's package, started
//! privately on a loopback port; the tests say so and pass when the binary
//! is missing), the 404 of `END`, HEAD, `memcached_gzip_flag`, connections
//! pooled through an upstream's `keepalive` (memcached's own connection
//! count), `memcached_next_upstream not_found`; and, against a scripted
//! server, what reaches memcached (the escaped key), a split trailer, bad
//! answers with nginx's error-log lines, and configuration errors. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;

/// A private memcached; killed on drop.
struct Memcached {
    child: Child,
    port: u16,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts memcached, or None (with a message) when it is not installed.
fn memcached() -> Option<Memcached> {
    let bin = ["/usr/bin/memcached", "/usr/local/bin/memcached"].into_iter().find(|p| std::path::Path::new(p).exists());
    let Some(bin) = bin else {
        eprintln!("SKIPPED: memcached is not installed (scripts/test-all installs Debian's memcached package)");
        return None;
    };
    for _ in 0..5 {
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0", "-t", "1"]);
        if rustix::process::geteuid().is_root() {
            cmd.args(["-u", "nobody"]);
        }
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn memcached");
        let m = Memcached { child, port };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if port_accepts(port) {
                return Some(m);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("memcached did not start");
}

impl Memcached {
    fn command(&self, cmd: &[u8], end: &[u8]) -> Vec<u8> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(cmd).unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(end) {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "memcached closed: {}", String::from_utf8_lossy(&out));
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    fn set(&self, key: &str, flags: u32, value: &[u8]) {
        let mut cmd = format!("set {key} {flags} 0 {}\r\n", value.len()).into_bytes();
        cmd.extend_from_slice(value);
        cmd.extend_from_slice(b"\r\n");
        assert_eq!(self.command(&cmd, b"\r\n"), b"STORED\r\n");
    }

    fn total_connections(&self) -> u64 {
        let out = String::from_utf8(self.command(b"stats\r\n", b"END\r\n")).unwrap();
        let line = out.lines().find(|l| l.starts_with("STAT total_connections ")).unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    }
}

fn server(m: &Memcached) -> TestServer {
    builder()
        .http(&format!(
            r#"upstream memd {{
                server 127.0.0.1:{mp};
                keepalive 1;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    set $memcached_key $uri;
                    memcached_pass 127.0.0.1:{mp};
                }}
                location /gz/ {{
                    set $memcached_key $uri;
                    memcached_gzip_flag 2;
                    memcached_pass 127.0.0.1:{mp};
                }}
                location /ka/ {{
                    set $memcached_key $uri;
                    memcached_pass memd;
                }}
                location /nokey/ {{
                    memcached_pass 127.0.0.1:{mp};
                }}
            }}"#,
            mp = m.port
        ))
        .start()
}

#[test]
fn values_not_found_and_head() {
    let Some(m) = memcached() else { return };
    m.set("/page.html", 0, b"<p>SEE-THIS</p>");
    let s = server(&m);
    let r = s.get("/page.html");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"<p>SEE-THIS</p>");
    assert_eq!(r.must("Content-Type"), "text/html");
    assert_eq!(r.must("Content-Length"), "15");

    let r = s.get("/missing");
    assert_eq!(r.status, 404);
    assert!(r.text().contains("404 Not Found"), "nginx's own page: {}", r.text());

    let r = request(s.port, "HEAD /page.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());

    // A range of a value, as nginx serves one (force_ranges).
    let r = s.get_with("/page.html", &["Range: bytes=3-10"]);
    assert_eq!((r.status, r.body.as_slice()), (206, &b"SEE-THIS"[..]));

    // Flags with the gzip flag's bit: the value is gzip as stored.
    m.set("/gz/a.txt", 3, b"\x1f\x8bnot really");
    m.set("/gz/b.txt", 4, b"plain");
    let r = s.get("/gz/a.txt");
    assert_eq!((r.status, r.header("Content-Encoding")), (200, Some("gzip")));
    assert_eq!(r.body, b"\x1f\x8bnot really");
    assert_eq!(s.get("/gz/b.txt").header("Content-Encoding"), None);

    let r = s.get("/nokey/x");
    assert_eq!(r.status, 500);
    s.wait_error_log("the \"$memcached_key\" variable is not set");
}

#[test]
fn keepalive_pools_one_connection_and_head_closes_it() {
    let Some(m) = memcached() else { return };
    m.set("/ka/v", 0, b"SEE-THIS");
    m.set("/ka/big", 0, &vec![b'X'; 100_000]);
    let s = server(&m);
    let before = m.total_connections();
    for _ in 0..4 {
        assert_eq!(s.get("/ka/v").body, b"SEE-THIS");
    }
    assert_eq!(s.get("/ka/none").status, 404);
    assert_eq!(s.get("/ka/big").body.len(), 100_000);
    // Each stats() call above and below is one connection of its own.
    assert_eq!(m.total_connections(), before + 1 + 1, "one pooled connection for six requests");

    let before = m.total_connections();
    let r = request(s.port, "HEAD /ka/big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(r.body.is_empty());
    assert_eq!(s.get("/ka/v").body, b"SEE-THIS");
    assert_eq!(m.total_connections(), before + 1 + 1, "HEAD closes the connection: the GET after makes one");
}

#[test]
fn next_upstream_not_found_tries_the_next_server() {
    let Some(m) = memcached() else { return };
    m.set("/next/k", 0, b"FROM-SECOND");
    // The first server answers END for every key.
    let (first, seen) = fake(vec![b"END\r\n"]);
    let s = builder()
        .http(&format!(
            "upstream both {{
                server 127.0.0.1:{first};
                server 127.0.0.1:{mp};
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location /next/ {{
                    set $memcached_key $uri;
                    memcached_next_upstream not_found;
                    memcached_pass both;
                }}
                location /stop/ {{
                    set $memcached_key $uri;
                    memcached_pass both;
                }}
            }}",
            mp = m.port
        ))
        .start();
    let r = s.get("/next/k");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"FROM-SECOND"[..]));
    assert_eq!(seen.lock().unwrap().as_slice(), &[b"get /next/k\r\n".to_vec()], "the first server was asked");
    // Without not_found the first server's END is the answer (round robin
    // comes back to it on the second request).
    let statuses: Vec<u16> = (0..2).map(|_| s.get("/stop/k").status).collect();
    assert!(statuses.contains(&404), "{statuses:?}");
}

/// A scripted memcached: records each request line and answers with the
/// given pieces (a pause between them), then closes.
fn fake(answer: Vec<&'static [u8]>) -> (u16, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = Vec::new();
            if r.read_until(b'\n', &mut line).is_err() {
                continue;
            }
            log.lock().unwrap().push(line);
            let mut c = c;
            for piece in &answer {
                let _ = c.write_all(piece);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    });
    (port, seen)
}

fn fake_server(port: u16) -> TestServer {
    builder()
        .http(&format!(
            "server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    set $memcached_key $uri;
                    memcached_pass 127.0.0.1:{port};
                }}
            }}"
        ))
        .start()
}

#[test]
fn what_reaches_memcached_and_a_split_trailer() {
    let (port, seen) = fake(vec![b"VALUE /a%20b%25 0 8\r\nSEE-", b"THIS\r\nEN", b"D\r\n"]);
    let s = fake_server(port);
    let r = s.get("/a%20b%25");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"SEE-THIS"[..]));
    assert_eq!(seen.lock().unwrap().as_slice(), &[b"get /a%20b%25\r\n".to_vec()]);
    assert!(!s.error_log().contains("[error]"), "{}", s.error_log());
}

#[test]
fn bad_answers_are_502_with_nginx_lines() {
    for (answer, line) in [
        (&b"ERROR\r\n"[..], "memcached sent invalid response: \"ERROR\""),
        (
            b"VALUE /other 0 1\r\nx\r\nEND\r\n",
            "memcached sent invalid key in response \"VALUE /other 0 1\" for key \"/k\"",
        ),
        (b"VALUE /k 0 x\r\n", "memcached sent invalid length in response \"VALUE /k 0 x\" for key \"/k\""),
    ] {
        let (port, _) = fake(vec![answer]);
        let s = fake_server(port);
        assert_eq!(s.get("/k").status, 502);
        let log = s.wait_error_log(line);
        let l = line_with(&log, line);
        assert!(
            l.contains("while reading response header from upstream")
                && l.contains(&format!("upstream: \"memcached://127.0.0.1:{port}\"")),
            "{l}"
        );
    }
    // A bad trailer: the value stands, the line is logged.
    let (port, _) = fake(vec![b"VALUE /k 0 2\r\nokXXXXXXX"]);
    let s = fake_server(port);
    let r = s.get("/k");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok"[..]));
    s.wait_error_log("memcached sent invalid trailer");
}

#[test]
fn bad_configuration_is_refused() {
    for (conf, msg) in [
        ("memcached_next_upstream error bogus;", "invalid value \"bogus\" in "),
        ("memcached_pass http://127.0.0.1:1;", "invalid host in upstream \"http://127.0.0.1:1\""),
        ("memcached_pass 127.0.0.1;", "no port in upstream \"127.0.0.1\""),
        ("memcached_gzip_flag x;", "\"memcached_gzip_flag\" directive invalid number"),
    ] {
        let srv = builder().http(&format!("server {{ listen 127.0.0.1:{{port}}; location / {{ {conf} }} }}")).prepare();
        let out = srv.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{conf}");
        assert!(err.contains(msg) && err.contains(".conf:"), "{conf}: {err}");
    }
}
