//! The differential harness: a recording origin that is strict about the
//! framing it receives, a raw client that sends a case's bytes and reads
//! until the server closes or goes quiet, and the per-case outcome.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The origin's answer body, so the client can tell proxied answers from
/// the server's own.
pub const ORIGIN_BODY: &[u8] = b"origin-ok\n";

/// One request as the origin received it.
#[derive(Clone, Debug)]
pub struct OriginReq {
    pub line: String,
    /// The body after removing its framing (Content-Length or chunked).
    pub body: Vec<u8>,
    /// Framing the origin found ambiguous or malformed (must stay empty
    /// for sluice: it must never forward what it could not frame itself).
    pub flags: Vec<String>,
}

impl OriginReq {
    /// `LINE {BODY}`, both escaped.
    pub fn summary(&self) -> String {
        format!("{} {{{}}}", self.line, self.body.escape_ascii())
    }
}

struct Shared {
    stop: AtomicBool,
    active: AtomicUsize,
    reqs: Mutex<Vec<OriginReq>>,
}

/// A recording origin on 127.0.0.1: a thread per connection; answers 200
/// with `ORIGIN_BODY` to every request it could frame.
pub struct Recorder {
    pub port: u16,
    shared: Arc<Shared>,
}

impl Recorder {
    pub fn start() -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            reqs: Mutex::new(Vec::new()),
        });
        let sh = shared.clone();
        std::thread::spawn(move || {
            for s in listener.incoming() {
                if sh.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(s) = s else { continue };
                sh.active.fetch_add(1, Ordering::SeqCst);
                let sh2 = sh.clone();
                std::thread::spawn(move || {
                    serve(s, &sh2);
                    sh2.active.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Recorder { port, shared }
    }

    /// Waits (briefly) for open origin connections to finish, then takes
    /// what was recorded since the last call.
    pub fn take(&self) -> Vec<OriginReq> {
        let deadline = Instant::now() + Duration::from_millis(500);
        while self.shared.active.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::mem::take(&mut *self.shared.reqs.lock().unwrap())
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Reads until `buf` holds at least `n` bytes; false on EOF or error.
fn fill_to(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> bool {
    let mut tmp = [0u8; 16384];
    while buf.len() < n {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return false,
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
        }
    }
    true
}

/// Strict chunked decoding of `buf` from `at`: returns (body, end).
fn dechunk(s: &mut TcpStream, buf: &mut Vec<u8>, mut at: usize) -> Result<(Vec<u8>, usize), String> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf[at..], b"\r\n") {
                break at + i;
            }
            if !fill_to(s, buf, buf.len() + 1) {
                return Err("EOF in a chunk size line".into());
            }
        };
        let line = &buf[at..line_end];
        if line.is_empty() || line.len() > 16 || !line.iter().all(u8::is_ascii_hexdigit) {
            return Err(format!("chunk size line {:?}", line.escape_ascii().to_string()));
        }
        let size = usize::from_str_radix(std::str::from_utf8(line).unwrap(), 16).map_err(|e| e.to_string())?;
        at = line_end + 2;
        if size == 0 {
            // No trailers expected from a proxy: the empty line must follow.
            if !fill_to(s, buf, at + 2) || &buf[at..at + 2] != b"\r\n" {
                return Err("no empty line after the last chunk".into());
            }
            return Ok((body, at + 2));
        }
        if !fill_to(s, buf, at + size + 2) {
            return Err("EOF in chunk data".into());
        }
        body.extend_from_slice(&buf[at..at + size]);
        if &buf[at + size..at + size + 2] != b"\r\n" {
            return Err("chunk data not followed by CRLF".into());
        }
        at += size + 2;
    }
}

/// Reads one request from `buf` + `s`; None at a clean EOF.
fn read_one(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(OriginReq, bool)> {
    let end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        if !fill_to(s, buf, buf.len() + 1) {
            if buf.is_empty() {
                return None;
            }
            let r = OriginReq {
                line: "<incomplete head>".into(),
                body: std::mem::take(buf),
                flags: vec!["EOF inside a request head".into()],
            };
            return Some((r, false));
        }
    };
    // The head with its last line's CRLF: every line then ends in "\n".
    let head = buf[..end + 2].to_vec();
    let mut flags = Vec::new();
    let mut lines = head[..head.len() - 1].split(|&b| b == b'\n');
    let first = lines.next().unwrap_or_default();
    let line = first.strip_suffix(b"\r").unwrap_or(first);
    if line.len() + 1 != first.len() {
        flags.push("request line not ended by CRLF".into());
    }
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    let line_ok = parts.len() == 3
        && !parts[0].is_empty()
        && parts[0].iter().all(|&b| is_tchar(b))
        && !parts[1].is_empty()
        && parts[1].iter().all(|&b| b > 0x20 && b != 0x7f)
        && (parts[2] == b"HTTP/1.0" || parts[2] == b"HTTP/1.1");
    if !line_ok {
        flags.push(format!("malformed request line {:?}", line.escape_ascii().to_string()));
    }
    let mut cls = Vec::new();
    let mut tes = Vec::new();
    let mut close = parts.get(2) == Some(&&b"HTTP/1.0"[..]);
    for raw in lines {
        let Some(l) = raw.strip_suffix(b"\r") else {
            flags.push("header line not ended by CRLF".into());
            continue;
        };
        let Some(colon) = l.iter().position(|&b| b == b':') else {
            flags.push(format!("header line without a colon {:?}", l.escape_ascii().to_string()));
            continue;
        };
        let (name, value) = (&l[..colon], &l[colon + 1..]);
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            flags.push(format!("bad header name {:?}", name.escape_ascii().to_string()));
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            flags.push(format!("control byte in header value {:?}", l.escape_ascii().to_string()));
        }
        let v = String::from_utf8_lossy(value).trim().to_string();
        if name.eq_ignore_ascii_case(b"content-length") {
            cls.push(v);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            tes.push(v);
        } else if name.eq_ignore_ascii_case(b"connection") {
            let v = v.to_ascii_lowercase();
            close = v.contains("close") || (close && !v.contains("keep-alive"));
        }
    }
    let mut at = end + 4;
    let body = match (cls.as_slice(), tes.as_slice()) {
        ([], []) => Vec::new(),
        ([cl], []) if !cl.is_empty() && cl.len() < 10 && cl.bytes().all(|b| b.is_ascii_digit()) => {
            let n: usize = cl.parse().unwrap();
            if !fill_to(s, buf, at + n) {
                flags.push("EOF inside a Content-Length body".into());
            }
            let n = n.min(buf.len() - at);
            at += n;
            buf[at - n..at].to_vec()
        }
        ([], [te]) if te == "chunked" => match dechunk(s, buf, at) {
            Ok((b, e)) => {
                at = e;
                b
            }
            Err(e) => {
                flags.push(format!("bad chunked body: {e}"));
                at = buf.len();
                Vec::new()
            }
        },
        _ => {
            flags.push(format!("ambiguous framing: Content-Length {cls:?}, Transfer-Encoding {tes:?}"));
            at = buf.len();
            Vec::new()
        }
    };
    buf.drain(..at);
    let line = String::from_utf8_lossy(line).escape_default().to_string();
    Some((OriginReq { line, body, flags }, close))
}

fn serve(mut s: TcpStream, sh: &Shared) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    while let Some((req, close)) = read_one(&mut s, &mut buf) {
        let framed = req.flags.is_empty();
        // Recorded in the order received (pipelined requests reach the
        // origin in order even when their answers finish out of order).
        let at = {
            let mut reqs = sh.reqs.lock().unwrap();
            reqs.push(req);
            reqs.len() - 1
        };
        let conn = if close { "close" } else { "keep-alive" };
        let answer = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n", ORIGIN_BODY.len());
        let ok = framed && s.write_all(answer.as_bytes()).is_ok() && s.write_all(ORIGIN_BODY).is_ok();
        if ok && close {
            // Whatever follows a request that ends its connection was sent
            // after the proxy said it would send nothing more.
            let _ = s.shutdown(Shutdown::Write);
            let _ = s.set_read_timeout(Some(Duration::from_millis(100)));
            let mut tmp = [0u8; 4096];
            while let Ok(n) = s.read(&mut tmp) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            if !buf.is_empty() {
                let f = format!("{} bytes after a closing request: {:?}", buf.len(), buf.escape_ascii().to_string());
                sh.reqs.lock().unwrap()[at].flags.push(f);
            }
        }
        if !ok || close {
            return;
        }
    }
}

// ---------------------------------------------------------------------------
// the client side

/// What one case did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Response statuses in order; 0 for a response without a status line
    /// (HTTP/0.9).
    pub statuses: Vec<u16>,
    /// How many of those responses carried the origin's body.
    pub from_origin: usize,
    /// The server closed the connection (FIN or reset) rather than going
    /// quiet with it open.
    pub closed: bool,
    /// What reached the origin, as `OriginReq::summary`.
    pub origin: Vec<String>,
}

impl Outcome {
    /// The expectations-file form: `STATUSES<TAB>close|open<TAB>ORIGIN`.
    pub fn line(&self) -> String {
        let st = if self.statuses.is_empty() {
            "-".to_string()
        } else {
            self.statuses.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
        };
        let origin = if self.origin.is_empty() { "-".to_string() } else { self.origin.join(" | ") };
        format!("{st}\t{}\t{origin}", if self.closed { "close" } else { "open" })
    }

    pub fn parse(s: &str) -> Option<Outcome> {
        let mut f = s.splitn(3, '\t');
        let st = f.next()?;
        let statuses =
            if st == "-" { Vec::new() } else { st.split(',').map(|x| x.parse().ok()).collect::<Option<_>>()? };
        let closed = match f.next()? {
            "close" => true,
            "open" => false,
            _ => return None,
        };
        let o = f.next()?;
        let origin = if o == "-" { Vec::new() } else { o.split(" | ").map(str::to_string).collect() };
        Some(Outcome { statuses, from_origin: 0, closed, origin })
    }
}

/// Sends `bytes` and reads until the server closes, goes quiet for `idle`
/// (the case is over, the connection left open), or 5 s pass.
pub fn exchange(port: u16, bytes: &[u8], split: Option<usize>, idle: Duration) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(idle)).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
    match split {
        Some(at) => {
            let _ = s.write_all(&bytes[..at]);
            std::thread::sleep(Duration::from_millis(30));
            let _ = s.write_all(&bytes[at..]);
        }
        None => {
            let _ = s.write_all(bytes);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    let mut tmp = [0u8; 65536];
    let closed = loop {
        if Instant::now() > deadline {
            break false;
        }
        match s.read(&mut tmp) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&tmp[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break true,
        }
    };
    (got, closed)
}

/// Splits the bytes a client received into responses: (status, body).
pub fn responses(mut b: &[u8]) -> Vec<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if !b.starts_with(b"HTTP/") {
            out.push((0, b.to_vec()));
            break;
        }
        let Some(end) = find(b, b"\r\n\r\n") else {
            out.push((1, Vec::new()));
            break;
        };
        let head = String::from_utf8_lossy(&b[..end]).to_string();
        let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
        let header = |n: &str| {
            head.lines().skip(1).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(n).then(|| v.trim().to_ascii_lowercase())
            })
        };
        b = &b[end + 4..];
        if (100..200).contains(&status) || status == 204 || status == 304 {
            out.push((status, Vec::new()));
            continue;
        }
        if header("transfer-encoding").as_deref() == Some("chunked") {
            let mut body = Vec::new();
            while let Some(e) = find(b, b"\r\n") {
                let size_str = String::from_utf8_lossy(&b[..e]).to_string();
                let size = usize::from_str_radix(size_str.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
                b = &b[e + 2..];
                if size == 0 {
                    b = find(b, b"\r\n").map(|i| &b[i + 2..]).unwrap_or(&[]);
                    break;
                }
                let n = size.min(b.len());
                body.extend_from_slice(&b[..n]);
                b = &b[(n + 2).min(b.len())..];
            }
            out.push((status, body));
        } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
            let n = n.min(b.len());
            out.push((status, b[..n].to_vec()));
            b = &b[n..];
        } else {
            out.push((status, b.to_vec()));
            break;
        }
    }
    out
}
