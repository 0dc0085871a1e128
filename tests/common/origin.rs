//! Purpose-built origin servers for the proxy tests: a `std::net`
//! listener with a thread per connection that records every request it
//! receives (raw head and body, and on which connection) and answers with
//! whatever the test's handler scripts, including misbehaviour: delays,
//! chunked or close-delimited bodies, a close before or in the middle of a
//! response, invalid heads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::{Response, TestServer, builder, pseudo_random};

/// One request as the origin received it.
#[derive(Clone, Debug)]
pub struct Req {
    /// The connection it came on (0-based, in accept order).
    pub conn: usize,
    /// Its position on that connection (0 for the first).
    pub nth: usize,
    /// Request line and header lines, without the final empty line.
    pub head: String,
    pub body: Vec<u8>,
    /// The address the request came from (what `proxy_bind` chooses).
    pub peer: Option<std::net::SocketAddr>,
}

impl Req {
    pub fn line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }
    pub fn method(&self) -> &str {
        self.line().split(' ').next().unwrap_or("")
    }
    pub fn target(&self) -> &str {
        self.line().split(' ').nth(1).unwrap_or("")
    }
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .collect()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers_named(name).into_iter().next()
    }
    fn keep_alive(&self) -> bool {
        let conn = self.header("Connection").unwrap_or("").to_ascii_lowercase();
        if self.line().ends_with("HTTP/1.1") { !conn.contains("close") } else { conn.contains("keep-alive") }
    }
}

enum Step {
    Write(Vec<u8>),
    Sleep(Duration),
    Signal(Arc<AtomicBool>),
    /// Close with a TCP reset (SO_LINGER 0), ending the reply.
    Reset,
}

/// What the origin does with a request, step by step.
pub struct Reply {
    steps: Vec<Step>,
    /// Close the connection afterwards, whatever the request asked for.
    close: bool,
    /// For a reply built by `http`: the head's length, so a HEAD request
    /// gets the head only.
    head_len: Option<usize>,
}

impl Reply {
    /// These bytes as they are.
    pub fn raw(bytes: impl AsRef<[u8]>) -> Reply {
        Reply { steps: vec![Step::Write(bytes.as_ref().to_vec())], close: false, head_len: None }
    }
    /// A well-formed HTTP/1.1 response with Content-Length; `headers` are
    /// whole lines without CRLF.
    pub fn http(status: u16, headers: &[&str], body: impl AsRef<[u8]>) -> Reply {
        let body = body.as_ref();
        let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for h in headers {
            out.push_str(h);
            out.push_str("\r\n");
        }
        out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let head_len = out.len();
        let mut bytes = out.into_bytes();
        bytes.extend_from_slice(body);
        Reply { steps: vec![Step::Write(bytes)], close: false, head_len: Some(head_len) }
    }
    pub fn ok(body: impl AsRef<[u8]>) -> Reply {
        Reply::http(200, &["Content-Type: text/plain"], body)
    }
    /// Close without answering.
    pub fn none() -> Reply {
        Reply { steps: Vec::new(), close: true, head_len: None }
    }
    /// Sleep first.
    pub fn after(mut self, d: Duration) -> Reply {
        self.steps.insert(0, Step::Sleep(d));
        self
    }
    pub fn then_sleep(mut self, d: Duration) -> Reply {
        self.steps.push(Step::Sleep(d));
        self
    }
    pub fn then_write(mut self, bytes: impl AsRef<[u8]>) -> Reply {
        self.steps.push(Step::Write(bytes.as_ref().to_vec()));
        self
    }
    /// Sets `flag` once everything before it was written (handed to the
    /// kernel: the proxy has it, or its socket buffers do).
    pub fn then_signal(mut self, flag: &Arc<AtomicBool>) -> Reply {
        self.steps.push(Step::Signal(flag.clone()));
        self
    }
    /// Reset the connection (RST, not FIN) once what came before is
    /// written: a crashed or killed origin.
    pub fn then_reset(mut self) -> Reply {
        self.steps.push(Step::Reset);
        self
    }
    /// Reset the connection without answering.
    pub fn reset() -> Reply {
        Reply { steps: vec![Step::Reset], close: true, head_len: None }
    }
    /// Close the connection after the reply.
    pub fn close(mut self) -> Reply {
        self.close = true;
        self
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        302 => "Found",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Time-out",
        _ => "Whatever",
    }
}

type Handler = Arc<dyn Fn(&Req) -> Reply + Send + Sync>;

struct Shared {
    stop: AtomicBool,
    conns: AtomicUsize,
    reqs: Mutex<Vec<Req>>,
    /// Clones of the open connections (by connection number), shut down
    /// on drop; a connection's entry goes when it closes, so a test with
    /// thousands of connections does not run out of descriptors.
    streams: Mutex<Vec<(usize, TcpStream)>>,
    handler: Handler,
}

/// An origin on 127.0.0.1; stops (listener and connections closed) on drop.
pub struct Origin {
    pub port: u16,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Origin {
    /// On a port the kernel picks when binding (not `free_port`'s probe
    /// and bind again, which another process could take in between: a CI
    /// run once failed with "origin bind: Address already in use").
    pub fn start(handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap_or_else(|e| panic!("origin bind: {e}"));
        Origin::serve_on(listener, handler)
    }

    /// Answers every request with 200 and this body.
    pub fn ok(body: &str) -> Origin {
        let body = body.to_string();
        Origin::start(move |_| Reply::ok(&body))
    }

    pub fn start_on(port: u16, handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| panic!("origin bind {port}: {e}"));
        Origin::serve_on(listener, handler)
    }

    /// On `ip:port` (another loopback address, to stand for another host
    /// on the same port), or None when that port is taken there.
    pub fn try_start_at(
        ip: &str,
        port: u16,
        handler: impl Fn(&Req) -> Reply + Send + Sync + 'static,
    ) -> Option<Origin> {
        let listener = TcpListener::bind((ip, port)).ok()?;
        Some(Origin::serve_on(listener, handler))
    }

    fn serve_on(listener: TcpListener, handler: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> Origin {
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_else(|e| panic!("origin local_addr: {e}"));
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            conns: AtomicUsize::new(0),
            reqs: Mutex::new(Vec::new()),
            streams: Mutex::new(Vec::new()),
            handler: Arc::new(handler),
        });
        let sh = shared.clone();
        let accept = std::thread::spawn(move || {
            for s in listener.incoming() {
                if sh.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else {
                    // Out of descriptors, say: not a busy loop.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let n = sh.conns.fetch_add(1, Ordering::SeqCst);
                if let Ok(c) = s.try_clone() {
                    sh.streams.lock().unwrap().push((n, c));
                }
                let sh2 = sh.clone();
                std::thread::spawn(move || {
                    serve(s, n, &sh2);
                    sh2.streams.lock().unwrap_or_else(|e| e.into_inner()).retain(|(c, _)| *c != n);
                });
            }
        });
        Origin { port, shared, accept: Some(accept) }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.conns.load(Ordering::SeqCst)
    }
    pub fn requests(&self) -> Vec<Req> {
        self.shared.reqs.lock().unwrap().clone()
    }
    pub fn count(&self) -> usize {
        self.shared.reqs.lock().unwrap().len()
    }
    pub fn last(&self) -> Req {
        self.shared.reqs.lock().unwrap().last().cloned().expect("the origin received no request")
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees `stop`. If this connect
        // fails the thread is left to end at its next accept: joining it
        // would wait forever.
        let woken = TcpStream::connect(("127.0.0.1", self.port)).is_ok();
        if let Some(h) = self.accept.take()
            && woken
        {
            let _ = h.join();
        }
        for (_, s) in self.shared.streams.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request (head and Content-Length body) from `buf` + `s`.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let mut tmp = [0u8; 65536];
    let end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end + 4);
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < len {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
    let body = buf.drain(..len).collect();
    Some((head, body))
}

fn serve(mut s: TcpStream, conn: usize, sh: &Shared) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let _ = s.set_nodelay(true);
    let mut buf = Vec::new();
    let peer = s.peer_addr().ok();
    for nth in 0.. {
        let Some((head, body)) = read_request(&mut s, &mut buf) else { return };
        let req = Req { conn, nth, head, body, peer };
        sh.reqs.lock().unwrap().push(req.clone());
        let reply = (sh.handler)(&req);
        let head_only = req.method() == "HEAD";
        for step in reply.steps {
            match step {
                Step::Sleep(d) => std::thread::sleep(d),
                Step::Signal(f) => f.store(true, Ordering::SeqCst),
                Step::Reset => {
                    // Give the bytes before it time to leave: a reset
                    // discards what is still in the send buffer.
                    std::thread::sleep(Duration::from_millis(50));
                    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                    // The clone kept for shutting down on drop would keep
                    // the socket open (and the reset unsent): drop it too.
                    sh.streams.lock().unwrap().retain(|(c, _)| *c != conn);
                    drop(s);
                    return;
                }
                Step::Write(b) => {
                    let b = match reply.head_len {
                        Some(n) if head_only => &b[..n],
                        _ => &b[..],
                    };
                    if s.write_all(b).is_err() {
                        return;
                    }
                }
            }
        }
        if reply.close || !req.keep_alive() {
            let _ = s.shutdown(Shutdown::Write);
            // Drain what the proxy may still send, so closing does not reset.
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let mut tmp = [0u8; 4096];
            while matches!(s.read(&mut tmp), Ok(n) if n > 0) {}
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// proxy-test helpers

pub const CHUNKED_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";

/// `%A%`-style placeholders in a config template replaced by ports.
pub fn sub(t: &str, vars: &[(&str, u16)]) -> String {
    vars.iter().fold(t.to_string(), |s, (k, v)| s.replace(k, &v.to_string()))
}

pub fn proxy(http: &str, vars: &[(&str, u16)]) -> TestServer {
    builder().http(&sub(http, vars)).start()
}

/// `proxy` with two ports: `{port0}` for HTTP/1.x, `{port1}` for h2c.
pub fn proxy2(http: &str, vars: &[(&str, u16)]) -> TestServer {
    builder().ports(2).http(&sub(http, vars)).start()
}

/// Answers `METHOD TARGET\n`, with a header to recognise it by.
pub fn echo() -> Origin {
    Origin::start(|r| {
        Reply::http(200, &["Content-Type: text/plain", "X-Origin: echo"], format!("{} {}\n", r.method(), r.target()))
    })
}

/// A request with `Host: localhost`, `Connection: close` and extra lines.
pub fn req(s: &TestServer, method: &str, path: &str, headers: &[&str], body: &[u8]) -> Response {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for h in headers {
        r.push_str(h);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    let mut c = s.connect();
    let mut raw = r.into_bytes();
    raw.extend_from_slice(body);
    c.send(raw);
    c.read_response_to(method)
}

/// `n` keep-alive GETs on one client connection; returns the bodies.
pub fn get_many(s: &TestServer, path: &str, n: usize) -> Vec<String> {
    let mut c = s.connect();
    (0..n)
        .map(|_| {
            c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
            let r = c.read_response();
            assert_eq!(r.status, 200, "{}\n{}", r.head, r.text());
            r.text()
        })
        .collect()
}

/// A 200 whose body was cut must never look complete: shorter than its
/// Content-Length, or chunked without the last chunk.
pub fn assert_visibly_cut(raw: &[u8]) {
    let (head, body) = split_head(raw);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    if let Some(cl) = head.lines().find_map(|l| l.strip_prefix("Content-Length: ")) {
        let cl: usize = cl.parse().unwrap();
        assert!(body.len() < cl, "{} of {cl} bytes", body.len());
    } else {
        assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
        assert!(!body.ends_with(b"0\r\n\r\n"), "chunked body has its last chunk:\n{head}");
    }
}

/// A raw HTTP/1 response split into its head (without the empty line) and
/// the bytes after it.
pub fn split_head(raw: &[u8]) -> (String, &[u8]) {
    let end = find(raw, b"\r\n\r\n").expect("no response head");
    (String::from_utf8_lossy(&raw[..end]).into_owned(), &raw[end + 4..])
}

/// Answers `/close-delimited` with an HTTP/1.0 body ended by closing, and
/// anything else with a chunked body (an extension, a pause between
/// chunks, a trailer); returns the origin and the body both decode to.
pub fn chunked_origin() -> (Origin, Vec<u8>) {
    let part = pseudo_random(4096, 5);
    let mut want = b"hello".to_vec();
    want.extend_from_slice(&part);
    let o = Origin::start(move |r| {
        let pause = Duration::from_millis(30);
        match r.target() {
            "/close-delimited" => Reply::raw("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello")
                .then_sleep(pause)
                .then_write(&part)
                .close(),
            _ => Reply::raw(CHUNKED_HEAD)
                .then_write("5;ext=1\r\nhello\r\n")
                .then_sleep(pause)
                .then_write([b"1000\r\n".as_slice(), &part, b"\r\n"].concat())
                .then_sleep(pause)
                .then_write("0\r\nX-Trailer: t\r\n\r\n"),
        }
    });
    (o, want)
}

/// An origin that fails at the head: `/slow` answers after 1.5 s, `/early`
/// closes without answering, `/garbage` has no status line, `/badheader` a
/// bare CR in a header, `/smuggle` both Content-Length and chunked,
/// `/bigheader` an 8 KB header line, `/bigheader-5k` a 5 KB one.
pub fn misbehaving_origin() -> Origin {
    let big_header = format!("X-Big: {}", "b".repeat(8000));
    Origin::start(move |r| match r.target() {
        "/slow" => Reply::ok("late").after(Duration::from_millis(1500)),
        "/early" => Reply::none(),
        "/garbage" => Reply::raw("HELLO WORLD\r\n\r\n").close(),
        "/badheader" => Reply::raw("HTTP/1.1 200 OK\r\nX-Bad: a\rb\r\nContent-Length: 2\r\n\r\nok").close(),
        "/smuggle" => Reply::raw(
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        )
        .close(),
        "/bigheader" => Reply::http(200, &[&big_header], "ok"),
        "/bigheader-5k" => Reply::http(200, &[&big_header[..5000]], "ok"),
        _ => Reply::ok("?"),
    })
}

/// An origin that fails mid-body: `/cut-cl` closes after 30000 of 100000
/// bytes, `/cut-chunked` after a 30000-byte chunk, anything else sends 100
/// of 10000 bytes and then nothing for 1.5 s.
pub fn cutting_origin() -> Origin {
    let part = pseudo_random(30000, 9);
    Origin::start(move |r| match r.target() {
        "/cut-cl" => {
            Reply::raw([b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".as_slice(), &part].concat()).close()
        }
        "/cut-chunked" => Reply::raw([CHUNKED_HEAD.as_bytes(), b"7530\r\n", &part, b"\r\n"].concat()).close(),
        _ => Reply::raw("HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n")
            .then_write(&part[..100])
            .then_sleep(Duration::from_millis(1500))
            .close(),
    })
}
