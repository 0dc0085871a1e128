//! `proxy_buffering`: with it on (the default) the proxy reads the origin's
//! response as fast as the origin sends it, into `proxy_buffers` and then a
//! temporary file, so a slow client does not hold the origin connection:
//! with `max_conns=1` a second client is served while the first is still
//! downloading. With it off (or `X-Accel-Buffering: no` from the origin)
//! the origin waits for the client, and the second client gets nginx's 502
//! (`no live upstreams`). Bodies arrive intact whichever way they were
//! held: memory, temporary file, or neither (`proxy_max_temp_file_size 0`),
//! Content-Length or chunked, HTTP/1.1 or HTTP/2.
//!
//! The slow client is a socket with a small receive buffer that reads
//! nothing for a while, so the kernel cannot absorb the response for it.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// Large enough that socket buffers on the way cannot hold it all.
const BIG: usize = 32 << 20;
/// For the content checks: well past any `proxy_buffers` used here.
const MEDIUM: usize = 8 << 20;

fn body(len: usize) -> Arc<Vec<u8>> {
    let block = pseudo_random(1 << 20, 42);
    Arc::new(block.iter().copied().cycle().take(len).collect())
}

/// FNV-1a: a checksum to compare bodies by.
fn checksum(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

/// `data` as a chunked body in chunks of varying sizes.
fn chunked(data: &[u8]) -> Vec<u8> {
    let mut out = CHUNKED_HEAD.as_bytes().to_vec();
    let mut rest = data;
    let mut i = 0usize;
    while !rest.is_empty() {
        let n = (1000 + i * 7919 % 60000).min(rest.len());
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
        i += 1;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// An origin answering `/big` with `body` (plus `extra` header lines) and
/// setting the flag once all of it is written; anything else is a small
/// 200.
fn big_origin(body: Arc<Vec<u8>>, extra: &'static [&'static str]) -> (Origin, Arc<AtomicBool>) {
    let sent = Arc::new(AtomicBool::new(false));
    let flag = sent.clone();
    let o = Origin::start(move |r| match r.target() {
        "/big" => {
            let mut headers = vec!["Content-Type: application/octet-stream"];
            headers.extend_from_slice(extra);
            Reply::http(200, &headers, &**body).then_signal(&flag)
        }
        "/chunked" => Reply::raw(chunked(&body)),
        _ => Reply::ok("small"),
    });
    (o, sent)
}

/// A client that asks for `path` and reads nothing until told to, with a
/// receive buffer small enough that the kernel holds little for it.
fn slow_get(port: u16, path: &str) -> TcpStream {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    sock.set_recv_buffer_size(64 * 1024).expect("SO_RCVBUF");
    sock.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into()).expect("connect");
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .expect("send");
    s
}

/// Reads a whole `Connection: close` response; its head and decoded body.
fn read_all(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read response");
    let (head, rest) = split_head(&raw);
    let body =
        if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(rest) } else { rest.to_vec() };
    (head, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let line = std::str::from_utf8(&b[..eol]).expect("size line");
        let n = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).expect("chunk size");
        b = &b[eol + 2..];
        if n == 0 {
            return out;
        }
        assert!(b.len() >= n + 2, "truncated chunk: {} of {n} bytes", b.len());
        out.extend_from_slice(&b[..n]);
        b = &b[n + 2..];
    }
}

fn wait_for(flag: &AtomicBool, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !flag.load(Ordering::SeqCst) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// While a slow client holds `/big` under `loc`: whether the origin could
/// finish sending and a second request got through to the same origin.
fn second_client_while_first_reads(s: &TestServer, o: &Origin, sent: &AtomicBool, loc: &str, body: &[u8]) -> bool {
    let mut slow = slow_get(s.port, &format!("{loc}big"));
    let released = wait_for(sent, Duration::from_secs(2));
    if !released {
        // The origin is stuck behind the client: its only connection slot
        // is taken.
        let r = req(s, "GET", &format!("{loc}small"), &[], b"");
        assert_eq!(r.status, 502, "max_conns=1 is taken while the origin waits for the client\n{}", r.text());
        return false;
    }
    // The proxy has (or is just taking) the whole body: the slot comes back
    // without the client having read anything.
    let deadline = Instant::now() + Duration::from_secs(5);
    let r = loop {
        let r = req(s, "GET", &format!("{loc}small"), &[], b"");
        if r.status == 200 || Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!((r.status, r.text()), (200, "small".to_string()), "second client while the first reads");
    let reqs = o.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!((reqs[1].conn, reqs[1].nth), (0, 1), "the origin connection was released to the keepalive pool");
    // The first client still gets every byte.
    let (head, got) = read_all(&mut slow);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("x-accel-buffering"), "{head}");
    assert_eq!((got.len(), checksum(&got)), (body.len(), checksum(body)));
    true
}

#[test]
fn a_slow_client_does_not_hold_the_origin_unless_buffering_is_off() {
    let big = body(BIG);
    let (on, on_sent) = big_origin(big.clone(), &[]);
    let (off, off_sent) = big_origin(big.clone(), &[]);
    let (no, no_sent) = big_origin(big.clone(), &["X-Accel-Buffering: no"]);
    let (yes, yes_sent) = big_origin(big.clone(), &["X-Accel-Buffering: yes"]);
    let s = proxy(
        r#"
        upstream on { server 127.0.0.1:%ON% max_conns=1; keepalive 4; }
        upstream off { server 127.0.0.1:%OFF% max_conns=1; keepalive 4; }
        upstream no { server 127.0.0.1:%NO% max_conns=1; keepalive 4; }
        upstream yes { server 127.0.0.1:%YES% max_conns=1; keepalive 4; }
        server {
            listen 127.0.0.1:{port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            location /on/ { proxy_pass http://on/; }
            location /off/ { proxy_pass http://off/; proxy_buffering off; }
            location /accel-no/ { proxy_pass http://no/; }
            location /accel-yes/ { proxy_pass http://yes/; proxy_buffering off; }
        }"#,
        &[("%ON%", on.port), ("%OFF%", off.port), ("%NO%", no.port), ("%YES%", yes.port)],
    );
    let mut checks = Checks::new();
    checks.run("proxy_buffering on (default): the origin is released", || {
        assert!(second_client_while_first_reads(&s, &on, &on_sent, "/on/", &big), "{}", s.error_log());
    });
    checks.run("proxy_buffering off: the origin waits for the client", || {
        assert!(!second_client_while_first_reads(&s, &off, &off_sent, "/off/", &big));
    });
    checks.run("X-Accel-Buffering: no turns it off for the response", || {
        assert!(!second_client_while_first_reads(&s, &no, &no_sent, "/accel-no/", &big));
    });
    checks.run("X-Accel-Buffering: yes turns it on for the response", || {
        assert!(second_client_while_first_reads(&s, &yes, &yes_sent, "/accel-yes/", &big), "{}", s.error_log());
    });
    checks.finish();
}

#[test]
fn bodies_arrive_intact_from_memory_file_or_neither() {
    let data = body(MEDIUM);
    let (o, _) = big_origin(data.clone(), &[]);
    let s = proxy2(
        r#"
        server {
            listen 127.0.0.1:{port0};
            listen 127.0.0.1:{port1} http2;
            location /spill/ { proxy_pass http://127.0.0.1:%A%/; proxy_buffers 4 4k; proxy_temp_path spill_temp 1 2; }
            location /memory/ { proxy_pass http://127.0.0.1:%A%/; proxy_buffers 256 64k; proxy_temp_path memory_temp; }
            location /nofile/ {
                proxy_pass http://127.0.0.1:%A%/;
                proxy_buffers 4 4k;
                proxy_max_temp_file_size 0;
                proxy_temp_path nofile_temp;
            }
            location /off/ { proxy_pass http://127.0.0.1:%A%/; proxy_buffering off; }
        }"#,
        &[("%A%", o.port)],
    );
    // Where sluice makes temporary directories at startup (a root master:
    // workers switch users, and get them made for them, as in nginx), the
    // ones that must never be used are taken back from the workers: a spill
    // there would be a [crit] line and a cut body. Otherwise they are made
    // on first use, and must not exist afterwards.
    let lazy = !s.prefix.join("memory_temp").exists();
    if !lazy {
        for d in ["memory_temp", "nofile_temp"] {
            let d = s.prefix.join(d);
            std::os::unix::fs::chown(&d, Some(0), Some(0)).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
    }
    let want = (data.len(), checksum(&data));
    let mut checks = Checks::new();
    for loc in ["/spill/", "/memory/", "/nofile/", "/off/"] {
        for path in ["big", "chunked"] {
            checks.run(&format!("HTTP/1.1 {loc}{path}"), || {
                let mut c = slow_get(s.ports[0], &format!("{loc}{path}"));
                std::thread::sleep(Duration::from_millis(300));
                let (head, got) = read_all(&mut c);
                assert!(head.starts_with("HTTP/1.1 200"), "{head}");
                assert_eq!((got.len(), checksum(&got)), want);
            });
            checks.run(&format!("HTTP/2 {loc}{path}"), || {
                let url = format!("http://127.0.0.1:{}{loc}{path}", s.ports[1]);
                let out = curl(&["--http2-prior-knowledge", "--limit-rate", "16M", &url]);
                assert!(out.status.success(), "{}", out.stderr);
                assert_eq!((out.stdout.len(), checksum(&out.stdout)), want);
            });
        }
    }
    if prog() == "sluice" && lazy {
        checks.run("only /spill/ needed its temporary file", || {
            assert!(s.prefix.join("spill_temp").is_dir(), "no spill happened");
            assert!(!s.prefix.join("memory_temp").exists(), "8 MB fit in 16 MB of buffers");
            assert!(!s.prefix.join("nofile_temp").exists(), "proxy_max_temp_file_size 0");
        });
    }
    checks.finish();
    assert!(!s.error_log().contains("[error]") && !s.error_log().contains("[crit]"), "{}", s.error_log());
}

/// nginx takes `$upstream_response_time` when the origin is done, not when
/// the client is: with buffering, a slow download's is short; without, the
/// origin finishes with the client.
#[test]
fn upstream_response_time_ends_with_the_origin() {
    let data = body(BIG);
    let (o, _) = big_origin(data.clone(), &[]);
    let s = proxy(
        r#"
        log_format t '$request_uri $upstream_response_time $request_time';
        access_log logs/access.log t;
        server {
            listen 127.0.0.1:{port};
            location /on/ { proxy_pass http://127.0.0.1:%A%/; }
            location /off/ { proxy_pass http://127.0.0.1:%A%/; proxy_buffering off; }
        }"#,
        &[("%A%", o.port)],
    );
    let slow_download = |path: &str| {
        let mut c = slow_get(s.port, path);
        let mut raw = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(1200) {
            std::thread::sleep(Duration::from_millis(100));
            let n = c.read(&mut buf).expect("read");
            raw.extend_from_slice(&buf[..n]);
        }
        c.read_to_end(&mut raw).expect("read the rest");
        assert_eq!(split_head(&raw).1.len(), data.len());
    };
    slow_download("/on/big");
    slow_download("/off/big");
    let lines = s.wait_access_lines(2);
    let times = |line: &str| -> (f64, f64) {
        let f: Vec<f64> = line.split(' ').skip(1).map(|t| t.parse().unwrap_or(-1.0)).collect();
        (f[0], f[1])
    };
    let (up, total) = times(&lines[0]);
    assert!(total >= 1.0 && up < 0.8, "buffered: the origin was done long before the client: {lines:?}");
    let (up, total) = times(&lines[1]);
    assert!(total >= 1.0 && up >= 1.0, "unbuffered: the origin waited for the client: {lines:?}");
}

/// A temporary file that cannot be made: nginx's [crit] line, and the
/// client's response ends short (sluice only: nginx makes the directory at
/// startup and refuses to start without it).
#[test]
fn a_failing_temp_file_cuts_the_response_with_a_crit_line() {
    if prog() != "sluice" {
        return;
    }
    let data = body(MEDIUM);
    let (o, _) = big_origin(data.clone(), &[]);
    let s = builder()
        .http(&sub(
            r#"
            server {
                listen 127.0.0.1:{port};
                location / { proxy_pass http://127.0.0.1:%A%; proxy_buffers 2 4k; proxy_busy_buffers_size 4k; proxy_temp_path spill_t; }
            }"#,
            &[("%A%", o.port)],
        ))
        .start();
    // The directory (made at startup when workers switch users) becomes a
    // file: the worker's temporary file cannot be made.
    let temp = s.prefix.join("spill_t");
    if temp.is_dir() {
        std::fs::remove_dir_all(&temp).unwrap();
    }
    std::fs::write(&temp, "x").unwrap();
    let mut c = slow_get(s.port, "/big");
    std::thread::sleep(Duration::from_millis(300));
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let (head, rest) = split_head(&raw);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(rest.len() < data.len(), "cut short: {} bytes", rest.len());
    let log = s.wait_error_log("[crit]");
    assert!(log.contains("open() a temporary file in") && log.contains("while reading upstream"), "{log}");
}

/// `proxy_limit_rate`: the origin is read at most the rate's bytes per
/// second of the body (nginx: rate × (whole seconds + 1) so far), so
/// 300 KB at 100k takes about two seconds; the body arrives whole. Without
/// buffering the limit does not apply, as in nginx.
#[test]
fn proxy_limit_rate_paces_reading_the_origin() {
    let data = body(300 * 1024);
    let (o, _) = big_origin(data.clone(), &[]);
    let s = builder()
        .http(&common::origin::sub(
            "server { listen 127.0.0.1:{port};\n\
               location /limited/ { proxy_pass http://127.0.0.1:%O%/; proxy_limit_rate 100k; }\n\
               location /unbuffered/ { proxy_pass http://127.0.0.1:%O%/; proxy_limit_rate 100k; proxy_buffering off; }\n\
               location /free/ { proxy_pass http://127.0.0.1:%O%/; } }",
            &[("%O%", o.port)],
        ))
        .start();
    let timed = |path: &str| {
        let t = Instant::now();
        let mut c = slow_get(s.port, path);
        let (head, got) = read_all(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        assert_eq!(checksum(&got), checksum(&data), "{path}: body");
        t.elapsed()
    };
    let limited = timed("/limited/big");
    assert!(limited >= Duration::from_millis(1800) && limited < Duration::from_secs(5), "limited: {limited:?}");
    let free = timed("/free/big");
    assert!(free < Duration::from_millis(800), "no limit: {free:?}");
    let unbuffered = timed("/unbuffered/big");
    assert!(unbuffered < Duration::from_millis(800), "unbuffered: {unbuffered:?}");
    assert_refused(
        "server { listen 127.0.0.1:{port}; proxy_limit_rate fast; }",
        "\"proxy_limit_rate\" directive invalid value",
    );
}
