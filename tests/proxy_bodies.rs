//! Request and response bodies through the proxy: buffered uploads spill to
//! an unlinked temporary file past `client_body_buffer_size` (and stay
//! whole for a retry on the next peer), `proxy_request_buffering off`
//! streams the body to the origin as it arrives (Content-Length as is,
//! chunked re-chunked to HTTP/1.1 origins), `100 Continue` goes out before
//! the body is read, a client that leaves mid-body aborts the origin
//! request, and a 1 GiB upload or download passes with sluice's peak memory
//! bounded.
//!
//! The origin here is a purpose-built sink that reads bodies as a stream
//! (it never holds one), hashing them and counting bytes as they arrive,
//! and serves large generated bodies.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::origin::sub;
use common::*;

const BLOCK: usize = 64 * 1024;

/// Every generated body repeats this block.
fn pattern() -> &'static [u8] {
    static P: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    P.get_or_init(|| pseudo_random(BLOCK, 77))
}

/// A stream checked against the repeated pattern as it passes (a memcmp
/// per piece, so a GiB checks fast even in a debug build): its length and
/// whether every byte matched its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest {
    len: u64,
    ok: bool,
}

impl Digest {
    fn new() -> Digest {
        Digest { len: 0, ok: true }
    }
    fn update(&mut self, mut data: &[u8]) {
        let p = pattern();
        while !data.is_empty() {
            let at = (self.len % BLOCK as u64) as usize;
            let n = data.len().min(BLOCK - at);
            self.ok &= data[..n] == p[at..at + n];
            self.len += n as u64;
            data = &data[n..];
        }
    }
    fn of_pattern(len: u64) -> Digest {
        Digest { len, ok: true }
    }
    fn text(&self) -> String {
        format!("{} {}", self.len, if self.ok { "intact" } else { "CORRUPT" })
    }
}

#[derive(Default)]
struct SinkState {
    /// Body bytes received by the request in progress.
    progress: AtomicU64,
    /// Request heads, in arrival order.
    heads: Mutex<Vec<String>>,
    /// A body that ended early (the proxy closed mid-body).
    cut: AtomicBool,
    /// A `/slow` request whose connection the proxy closed while the
    /// origin was still working on it.
    abandoned: AtomicBool,
}

/// The sink origin: `POST` answers `LEN HASH` of the body it read
/// (`/fail` answers 502 after reading it); `GET /gen/N` sends N pattern
/// bytes with a Content-Length.
struct Sink {
    port: u16,
    state: Arc<SinkState>,
}

impl Sink {
    fn start() -> Sink {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind sink");
        let port = l.local_addr().expect("addr").port();
        let state = Arc::new(SinkState::default());
        let st = state.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(s, &st);
                });
            }
        });
        Sink { port, state }
    }

    fn heads(&self) -> Vec<String> {
        self.state.heads.lock().expect("heads").clone()
    }
}

fn serve(s: TcpStream, st: &SinkState) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut r = BufReader::with_capacity(BLOCK, s.try_clone()?);
    let mut w = s;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    st.heads.lock().expect("heads").push(head.clone());
    st.progress.store(0, Ordering::SeqCst);
    let lower = head.to_ascii_lowercase();
    let target = head.split(' ').nth(1).unwrap_or("/").to_string();
    let mut d = Digest::new();
    let mut buf = vec![0u8; BLOCK];
    if let Some(v) = lower.lines().find_map(|l| l.strip_prefix("content-length:")) {
        let mut left: u64 = v.trim().parse().unwrap_or(0);
        while left > 0 {
            let n = r.read(&mut buf[..left.min(BLOCK as u64) as usize])?;
            if n == 0 {
                st.cut.store(true, Ordering::SeqCst);
                return Ok(());
            }
            d.update(&buf[..n]);
            st.progress.fetch_add(n as u64, Ordering::SeqCst);
            left -= n as u64;
        }
    } else if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut size = String::new();
            if r.read_line(&mut size)? == 0 {
                st.cut.store(true, Ordering::SeqCst);
                return Ok(());
            }
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                r.read_line(&mut end)?;
                break;
            }
            let mut left = n;
            while left > 0 {
                let k = r.read(&mut buf[..left.min(BLOCK)])?;
                if k == 0 {
                    st.cut.store(true, Ordering::SeqCst);
                    return Ok(());
                }
                d.update(&buf[..k]);
                st.progress.fetch_add(k as u64, Ordering::SeqCst);
                left -= k;
            }
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf)?;
        }
    }
    if target.contains("/slow") {
        // A second of work, watching for the proxy giving up on us.
        w.set_nonblocking(true)?;
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            let mut b = [0u8; 1];
            if let Ok(0) = w.peek(&mut b) {
                st.abandoned.store(true, Ordering::SeqCst);
                return Ok(());
            }
        }
        w.set_nonblocking(false)?;
    }
    if target.contains("/drip") {
        // Half the body, a pause, the other half.
        let p = pattern();
        write!(w, "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n")?;
        w.write_all(&p[..1000])?;
        std::thread::sleep(Duration::from_millis(800));
        w.write_all(&p[1000..2000])?;
        return Ok(());
    }
    if let Some(n) = target.strip_prefix("/gen/") {
        let n: u64 = n.parse().unwrap_or(0);
        write!(w, "HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n")?;
        let p = pattern();
        let mut left = n;
        while left > 0 {
            let k = left.min(BLOCK as u64) as usize;
            w.write_all(&p[..k])?;
            left -= k as u64;
        }
        return Ok(());
    }
    let status = if target.contains("/fail") { "502 Bad Gateway" } else { "200 OK" };
    let body = d.text();
    write!(w, "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len())?;
    Ok(())
}

/// Sends `len` pattern bytes on `c`, in blocks; `sent` is how many this
/// body already had (the pattern goes on where it left off).
fn send_pattern_at(c: &mut TcpStream, sent: u64, mut len: u64) {
    let p = pattern();
    let mut at = (sent % BLOCK as u64) as usize;
    while len > 0 {
        let n = len.min((BLOCK - at) as u64) as usize;
        c.write_all(&p[at..at + n]).expect("send body");
        len -= n as u64;
        at = (at + n) % BLOCK;
    }
}

fn send_pattern(c: &mut TcpStream, len: u64) {
    send_pattern_at(c, 0, len);
}

fn connect(port: u16) -> TcpStream {
    let c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    c
}

/// Reads a whole `Connection: close` response: (head, body digest).
fn read_response(c: &mut TcpStream) -> (String, Digest, Vec<u8>) {
    let mut r = BufReader::with_capacity(BLOCK, c);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).expect("read head") == 0 {
            break;
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut d = Digest::new();
    let mut first = Vec::new();
    let mut buf = vec![0u8; BLOCK];
    loop {
        let n = r.read(&mut buf).expect("read body");
        if n == 0 {
            break;
        }
        if first.len() < 256 {
            first.extend_from_slice(&buf[..n.min(256)]);
        }
        d.update(&buf[..n]);
    }
    (head, d, first)
}

fn wait_for(what: &str, limit: Duration, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Peak resident memory of a process, in KiB (VmHWM).
fn peak_rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

fn server(sinks: &[&Sink]) -> TestServer {
    let vars = [("%A%", sinks[0].port), ("%B%", sinks[sinks.len() - 1].port)];
    builder()
        .http(&sub(
            r#"
            client_max_body_size 0;
            client_body_buffer_size 16k;
            client_body_temp_path {prefix}/body_temp 1 2;
            upstream pair { server 127.0.0.1:%A%; server 127.0.0.1:%B%; }
            server {
                listen 127.0.0.1:{port};
                location / { proxy_pass http://127.0.0.1:%A%; }
                location /retry/ {
                    proxy_pass http://pair;
                    proxy_next_upstream error http_502 non_idempotent;
                }
                location /stream/ { proxy_pass http://127.0.0.1:%A%; proxy_request_buffering off; }
                location /unbuffered/ { proxy_pass http://127.0.0.1:%A%; proxy_buffering off; }
                location /ignore/ { proxy_pass http://127.0.0.1:%A%; proxy_ignore_client_abort on; }
                location /stream11/ {
                    proxy_pass http://127.0.0.1:%A%;
                    proxy_request_buffering off;
                    proxy_http_version 1.1;
                }
            }"#,
            &vars,
        ))
        .start()
}

fn post_head(path: &str, len: u64) -> String {
    format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {len}\r\n\r\n")
}

#[test]
fn buffered_bodies_spill_to_a_temp_file_wait_for_the_end_and_survive_a_retry() {
    let a = Sink::start();
    let b = Sink::start();
    let s = server(&[&a, &b]);
    let len = 5 * 1024 * 1024 + 3;
    let mut checks = Checks::new();
    checks.run("the origin sees nothing until the whole body arrived", || {
        let mut c = connect(s.port);
        c.write_all(post_head("/up", len).as_bytes()).expect("head");
        send_pattern(&mut c, len / 2);
        std::thread::sleep(Duration::from_millis(300));
        let heads_before = a.heads().len();
        send_pattern_at(&mut c, len / 2, len - len / 2);
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(String::from_utf8_lossy(&body), Digest::of_pattern(len).text());
        assert_eq!(heads_before, 0, "the origin got the request before its body was complete");
        let h = a.heads().pop().expect("a request");
        assert!(h.to_ascii_lowercase().contains(&format!("content-length: {len}")), "{h}");
    });
    checks.run("a body kept in a file is sent again to the next peer", || {
        let mut c = connect(s.port);
        c.write_all(post_head("/retry/fail", len).as_bytes()).expect("head");
        send_pattern(&mut c, len);
        let (head, _, body) = read_response(&mut c);
        // The first peer answers 502 after reading the body; the second
        // always fails too (same path), so the client gets the last 502 —
        // but both origins must have read the whole, identical body.
        assert!(head.starts_with("HTTP/1.1 502"), "{head}");
        let _ = body;
        assert_eq!((a.heads().len(), b.heads().len()), (2, 1), "both peers tried");
        assert!(!a.state.cut.load(Ordering::SeqCst) && !b.state.cut.load(Ordering::SeqCst));
        assert_eq!(b.state.progress.load(Ordering::SeqCst), len);
    });
    checks.run("no temporary file is left behind", || {
        let dir = s.path("body_temp");
        assert!(dir.is_dir(), "client_body_temp_path was not used");
        // nginx spreads its files over level directories; count files.
        fn files(d: &std::path::Path) -> usize {
            std::fs::read_dir(d)
                .expect("dir")
                .map(|e| e.expect("entry").path())
                .map(|p| if p.is_dir() { files(&p) } else { 1 })
                .sum()
        }
        assert_eq!(files(&dir), 0);
    });
    checks.run("100 Continue goes out before the body is read", || {
        let mut c = connect(s.port);
        let head = post_head("/up", 10).replace("\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n");
        c.write_all(head.as_bytes()).expect("head");
        let mut got = [0u8; 25];
        c.read_exact(&mut got).expect("100 Continue");
        assert_eq!(&got, b"HTTP/1.1 100 Continue\r\n\r\n");
        send_pattern(&mut c, 10);
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(String::from_utf8_lossy(&body), Digest::of_pattern(10).text());
    });
    checks.run("100 Continue for an empty body too, in any case; none for HTTP/1.0", || {
        for (version, expect, want) in
            [("1.1", "100-continue", true), ("1.1", "100-Continue", true), ("1.0", "100-continue", false)]
        {
            let mut c = connect(s.port);
            let head = post_head("/up", 0)
                .replacen("HTTP/1.1", &format!("HTTP/{version}"), 1)
                .replace("\r\n\r\n", &format!("\r\nExpect: {expect}\r\n\r\n"));
            c.write_all(head.as_bytes()).expect("head");
            let mut all = Vec::new();
            let _ = c.read_to_end(&mut all);
            let all = String::from_utf8_lossy(&all);
            assert_eq!(all.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200"), want, "{version} {expect}: {all}");
            assert!(all.contains(" 200 "), "{all}");
        }
    });
    checks.finish();
}

#[test]
fn unbuffered_bodies_stream_to_the_origin_as_they_arrive() {
    let a = Sink::start();
    let s = server(&[&a]);
    let len: u64 = 4 * 1024 * 1024;
    let mut checks = Checks::new();
    checks.run("Content-Length body: the origin reads it before the client finished", || {
        let mut c = connect(s.port);
        c.write_all(post_head("/stream/x", len).as_bytes()).expect("head");
        send_pattern(&mut c, 1024 * 1024);
        wait_for("the first MiB at the origin", Duration::from_secs(10), || {
            a.state.progress.load(Ordering::SeqCst) >= 1024 * 1024
        });
        send_pattern_at(&mut c, 1024 * 1024, len - 1024 * 1024);
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(String::from_utf8_lossy(&body), Digest::of_pattern(len).text());
    });
    checks.run("chunked body to an HTTP/1.1 origin goes chunked, as it arrives", || {
        let mut c = connect(s.port);
        c.write_all(
            b"POST /stream11/c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n",
        )
        .expect("head");
        let p = pattern();
        c.write_all(format!("{:x}\r\n", BLOCK).as_bytes()).expect("size");
        c.write_all(p).expect("chunk");
        c.write_all(b"\r\n").expect("crlf");
        wait_for("the first chunk at the origin", Duration::from_secs(10), || {
            a.state.progress.load(Ordering::SeqCst) >= BLOCK as u64
        });
        c.write_all(format!("{:x};ext=1\r\n", 1000).as_bytes()).expect("size");
        c.write_all(&p[..1000]).expect("chunk");
        c.write_all(b"\r\n0\r\n\r\n").expect("end");
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut want = Digest::new();
        want.update(p);
        want.update(&p[..1000]);
        assert_eq!(String::from_utf8_lossy(&body), want.text());
        let h = a.heads().pop().expect("head").to_ascii_lowercase();
        assert!(h.contains("transfer-encoding: chunked") && !h.contains("content-length"), "{h}");
    });
    checks.run("chunked body to an HTTP/1.0 origin is buffered, with a Content-Length", || {
        let mut c = connect(s.port);
        c.write_all(
            b"POST /stream/c HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        )
        .expect("request");
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut want = Digest::new();
        want.update(b"hello");
        assert_eq!(String::from_utf8_lossy(&body), want.text());
        let h = a.heads().pop().expect("head").to_ascii_lowercase();
        assert!(h.contains("content-length: 5"), "{h}");
    });
    checks.run("a client leaving mid-body aborts the origin request", || {
        let mut c = connect(s.port);
        c.write_all(post_head("/stream/gone", len).as_bytes()).expect("head");
        send_pattern(&mut c, 100_000);
        wait_for("the start at the origin", Duration::from_secs(10), || {
            a.state.progress.load(Ordering::SeqCst) >= 100_000
        });
        drop(c);
        wait_for("the origin to see the body cut", Duration::from_secs(10), || a.state.cut.load(Ordering::SeqCst));
        s.wait_error_log("client prematurely closed connection while sending request to upstream");
    });
    checks.finish();
}

#[test]
fn a_gigabyte_each_way_with_bounded_memory() {
    let a = Sink::start();
    let s = server(&[&a]);
    let gib: u64 = 1 << 30;
    let pid = s.serving_pid();
    let before = peak_rss_kib(pid);
    let t = Instant::now();
    for path in ["/stream/big", "/buffered/big"] {
        let mut c = connect(s.port);
        c.write_all(post_head(path, gib).as_bytes()).expect("head");
        send_pattern(&mut c, gib);
        let (head, _, body) = read_response(&mut c);
        assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
        assert_eq!(String::from_utf8_lossy(&body), Digest::of_pattern(gib).text(), "{path}");
    }
    let up = t.elapsed();
    let t = Instant::now();
    let mut c = connect(s.port);
    c.write_all(format!("GET /gen/{gib} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
        .expect("get");
    let (head, d, _) = read_response(&mut c);
    assert!(head.contains(&format!("Content-Length: {gib}")), "{head}");
    assert_eq!(d, Digest::of_pattern(gib));
    let down = t.elapsed();
    let peak = peak_rss_kib(pid);
    eprintln!(
        "1 GiB streamed + 1 GiB buffered upload in {up:?}, 1 GiB download in {down:?}; sluice peak RSS {} KiB (before: {} KiB)",
        peak, before
    );
    assert!(peak < 64 * 1024, "sluice peak RSS {peak} KiB for 1 GiB bodies");
}

#[test]
fn a_client_that_leaves_while_the_origin_works_abandons_the_origin_request() {
    let a = Sink::start();
    let s = server(&[&a]);
    let mut checks = Checks::new();
    checks.run("proxy_ignore_client_abort off: origin connection closed, 499 logged", || {
        let mut c = connect(s.port);
        c.write_all(b"GET /slow/1 HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("request");
        wait_for("the request at the origin", Duration::from_secs(5), || !a.heads().is_empty());
        drop(c);
        wait_for("the origin to be abandoned", Duration::from_secs(3), || a.state.abandoned.load(Ordering::SeqCst));
        s.wait_error_log(
"epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too while sending request to upstream",
        );
        let lines = s.wait_access_lines(1);
        assert!(lines[0].contains("\"GET /slow/1 HTTP/1.1\" 499 "), "{lines:?}");
    });
    checks.run("proxy_ignore_client_abort on: the origin finishes", || {
        a.state.abandoned.store(false, Ordering::SeqCst);
        let n = a.heads().len();
        let mut c = connect(s.port);
        c.write_all(b"GET /ignore/slow HTTP/1.1\r\nHost: localhost\r\n\r\n").expect("request");
        wait_for("the request at the origin", Duration::from_secs(5), || a.heads().len() > n);
        drop(c);
        std::thread::sleep(Duration::from_millis(1300));
        assert!(!a.state.abandoned.load(Ordering::SeqCst));
    });
    checks.finish();
}

/// The same over HTTP/2: a stream the client resets while the origin works,
/// or a connection it closes or resets, is a 499 with nginx's error-log
/// line for each, and the origin request is abandoned; the connection's
/// other streams go on.
#[test]
fn an_h2_client_that_leaves_while_the_origin_works_abandons_the_origin_request() {
    let a = Sink::start();
    let s = builder()
        .http(&sub(
            "server { listen 127.0.0.1:{port} http2; location / { proxy_pass http://127.0.0.1:%A%; } }",
            &[("%A%", a.port)],
        ))
        .start();
    // Stream 1 of a new connection asks for `path`, and the origin has it.
    let at_origin = |path: &str| {
        a.state.abandoned.store(false, Ordering::SeqCst);
        let n = a.heads().len();
        let mut c = h2raw::Conn::open(s.port);
        c.send(h2raw::headers_frame(1, &h2raw::request_block("GET", path, "localhost", &[]), true, true));
        wait_for("the request at the origin", Duration::from_secs(5), || a.heads().len() > n);
        c
    };
    let abandoned_with_499 = |path: &str, lines: usize| {
        wait_for("the origin to be abandoned", Duration::from_secs(3), || a.state.abandoned.load(Ordering::SeqCst));
        let lines = s.wait_access_lines(lines);
        let line = format!("\"GET {path} HTTP/2.0\" 499 ");
        assert!(lines.iter().any(|l| l.contains(&line)), "{lines:?}");
    };
    let mut checks = Checks::new();
    checks.run("RST_STREAM (CANCEL): 499, origin connection closed, the connection serves on", || {
        let mut c = at_origin("/slow/reset");
        c.send(h2raw::rst_frame(1, 8));
        abandoned_with_499("/slow/reset", 1);
        s.wait_error_log("client canceled stream 1 while sending request to upstream, client: 127.0.0.1");
        c.next_stream = 3;
        let r = c.get("/gen/5");
        assert_eq!((r.status, r.body.len()), (200, 5), "a stream after the reset");
    });
    checks.run("connection closed: 499, origin connection closed", || {
        // A FIN: closed with the server's frames unread, the socket would
        // send a reset instead (a different line in either server).
        let c = at_origin("/slow/close");
        c.stream.shutdown(std::net::Shutdown::Write).expect("shutdown");
        abandoned_with_499("/slow/close", 3);
        s.wait_error_log("client prematurely closed connection while processing HTTP/2 connection, client: 127.0.0.1");
        drop(c);
    });
    checks.run("connection reset: 499, origin connection closed, nginx's recv() line", || {
        let c = at_origin("/slow/rst");
        socket2::SockRef::from(&c.stream).set_linger(Some(Duration::ZERO)).expect("linger");
        drop(c);
        abandoned_with_499("/slow/rst", 4);
        s.wait_error_log(
            "recv() failed (104: Connection reset by peer) while processing HTTP/2 connection, client: 127.0.0.1",
        );
    });
    checks.finish();
}

#[test]
fn response_bytes_reach_the_client_as_the_origin_sends_them() {
    let a = Sink::start();
    let s = server(&[&a]);
    for path in ["/unbuffered/drip", "/drip"] {
        let mut c = connect(s.port);
        let t = Instant::now();
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes())
            .expect("request");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut first_half_at = None;
        loop {
            let n = c.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            let body = got.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |i| got.len() - i - 4);
            if body >= 1000 && first_half_at.is_none() {
                first_half_at = Some(t.elapsed());
            }
        }
        let half = first_half_at.expect("the first half");
        // nginx with proxy_buffering on holds a half-filled buffer back;
        // sluice streams in both cases (documented).
        if path.starts_with("/unbuffered/") || prog() == "sluice" {
            assert!(half < Duration::from_millis(600), "{path}: the first half took {half:?}");
        }
        assert!(t.elapsed() >= Duration::from_millis(800), "{path}");
        let end = got.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
        let mut d = Digest::new();
        d.update(&got[end..]);
        assert_eq!(d, Digest::of_pattern(2000), "{path}");
    }
}

#[test]
fn unbuffered_h2_bodies_stream_to_the_origin_as_their_frames_arrive() {
    let a = Sink::start();
    let s = builder()
        .http(&sub(
            r#"
            client_max_body_size 0;
            server {
                listen 127.0.0.1:{port} http2;
                location /stream/ { proxy_pass http://127.0.0.1:%A%; proxy_request_buffering off; }
                location /stream11/ {
                    proxy_pass http://127.0.0.1:%A%;
                    proxy_request_buffering off;
                    proxy_http_version 1.1;
                }
                location /buffered/ { proxy_pass http://127.0.0.1:%A%; proxy_http_version 1.1; }
            }"#,
            &[("%A%", a.port)],
        ))
        .start();
    let len: u64 = 4 * 1024 * 1024;
    // curl reads the body from a pipe and sends DATA frames as it gets
    // them: the first MiB must reach the origin before the rest exists.
    let upload = |path: &str, length: Option<u64>, streamed: bool| {
        let url = s.url(path);
        let mut args = vec!["-sS", "--max-time", "30", "--http2-prior-knowledge", "-T", "-", "-X", "POST"];
        let cl = length.map(|n| format!("Content-Length: {n}"));
        if let Some(h) = &cl {
            args.extend(["-H", h.as_str()]);
        }
        args.push(&url);
        let mut child = std::process::Command::new("curl")
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("curl");
        let mut stdin = child.stdin.take().expect("stdin");
        let p = pattern();
        for _ in 0..(1024 * 1024 / BLOCK) {
            stdin.write_all(p).expect("first MiB");
        }
        stdin.flush().expect("flush");
        if streamed {
            wait_for("the first MiB at the origin", Duration::from_secs(10), || {
                a.state.progress.load(Ordering::SeqCst) >= 1024 * 1024
            });
        } else {
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(a.heads().iter().filter(|h| h.contains("/buffered/")).count(), 0, "buffered body went early");
        }
        for _ in 0..((len - 1024 * 1024) / BLOCK as u64) {
            stdin.write_all(p).expect("the rest");
        }
        drop(stdin);
        let out = child.wait_with_output().expect("curl output");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.is_empty() {
            return format!("(curl: {})", String::from_utf8_lossy(&out.stderr));
        }
        text
    };
    let mut checks = Checks::new();
    checks.run("content-length: as it arrives, the length passed on", || {
        assert_eq!(upload("/stream/cl", Some(len), true), Digest::of_pattern(len).text());
        let head = a.heads().into_iter().rfind(|h| h.contains("/stream/cl")).expect("head");
        assert!(head.to_ascii_lowercase().contains(&format!("content-length: {len}")), "{head}");
    });
    checks.run("no length: chunked to an HTTP/1.1 origin, as it arrives", || {
        assert_eq!(upload("/stream11/nl", None, true), Digest::of_pattern(len).text());
        let head = a.heads().into_iter().rfind(|h| h.contains("/stream11/nl")).expect("head");
        assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    });
    checks.run("proxy_request_buffering on: the origin waits for the whole body", || {
        assert_eq!(upload("/buffered/b", None, false), Digest::of_pattern(len).text());
    });
    checks.finish();
}
