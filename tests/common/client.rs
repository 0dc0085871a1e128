//! Clients: a raw HTTP/1.x client with bounded reads, curl and wrk.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::*;

// ---------------------------------------------------------------------------
// raw HTTP client

#[derive(Debug, Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The status line and header lines as received (without the final CRLF).
    pub head: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// Header value, panicking with the response head if absent.
    pub fn must(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("no {name} header in:\n{}", self.head))
    }
}

pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        Conn::connect_addr(([127, 0, 0, 1], port).into())
    }

    /// A connection to any address (`[::1]:port` for IPv6 tests).
    pub fn connect_addr(addr: std::net::SocketAddr) -> Conn {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Conn { stream, buf: Vec::new() }
    }

    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).unwrap_or_else(|e| panic!("write: {e}"));
    }

    /// Like `send` but returns the error (the server may have closed).
    pub fn try_send(&mut self, data: impl AsRef<[u8]>) -> std::io::Result<()> {
        self.stream.write_all(data.as_ref())
    }

    /// Reads more bytes into the buffer; Ok(0) on EOF.
    fn fill(&mut self, deadline: Instant) -> std::io::Result<usize> {
        if Instant::now() > deadline {
            return Err(std::io::Error::new(ErrorKind::TimedOut, "response deadline passed"));
        }
        let mut tmp = [0u8; 65536];
        // A read with SO_RCVTIMEO set fails with EINTR when the process is
        // stopped and continued (signal(7)); it is simply read again.
        let n = loop {
            match self.stream.read(&mut tmp) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) -> ! {
        panic!(
            "{what}: {e}; received so far ({} bytes): {:?}",
            self.buf.len(),
            String::from_utf8_lossy(&self.buf[..self.buf.len().min(2000)])
        )
    }

    /// Reads one response to a GET-like request.
    pub fn read_response(&mut self) -> Response {
        self.read_response_to("GET")
    }

    /// Reads one response; `method` decides whether a body follows (HEAD).
    /// A 1xx response is returned on its own.
    pub fn read_response_to(&mut self, method: &str) -> Response {
        match self.try_read_response(method) {
            Ok(r) => r,
            Err(e) => self.fail("reading response", e),
        }
    }

    pub fn try_read_response(&mut self, method: &str) -> Result<Response, String> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            match self.fill(deadline) {
                Ok(0) => return Err("connection closed before a complete response head".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("read error before response head complete: {e}")),
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..head_end]).into_owned();
        self.buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        let status: u16 =
            parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for l in lines {
            let (k, v) = l.split_once(':').ok_or_else(|| format!("bad header line {l:?}"))?;
            headers.push((k.to_string(), v.trim().to_string()));
        }
        let mut resp = Response { version, status, reason, headers, body: Vec::new(), head };
        if method == "HEAD" || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(resp);
        }
        let te = resp.header("Transfer-Encoding").map(|s| s.to_ascii_lowercase());
        if te.as_deref() == Some("chunked") {
            resp.body = self.read_chunked(deadline)?;
        } else if let Some(cl) = resp.header("Content-Length") {
            let n: usize = cl.parse().map_err(|_| format!("bad Content-Length {cl:?}"))?;
            while self.buf.len() < n {
                match self.fill(deadline) {
                    Ok(0) => return Err(format!("closed after {} of {n} body bytes", self.buf.len())),
                    Ok(_) => {}
                    Err(e) => return Err(format!("read error in body ({} of {n}): {e}", self.buf.len())),
                }
            }
            resp.body = self.buf.drain(..n).collect();
        } else {
            resp.body = self.read_to_close_inner(deadline)?;
        }
        Ok(resp)
    }

    fn read_chunked(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(&self.buf, b"\r\n") {
                    break i;
                }
                if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                    return Err("closed in chunk size".into());
                }
            };
            let line = String::from_utf8_lossy(&self.buf[..line_end]).into_owned();
            let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16)
                .map_err(|_| format!("bad chunk size line {line:?}"))?;
            self.buf.drain(..line_end + 2);
            if size == 0 {
                // trailers until empty line
                loop {
                    if let Some(i) = find(&self.buf, b"\r\n") {
                        let empty = i == 0;
                        self.buf.drain(..i + 2);
                        if empty {
                            return Ok(body);
                        }
                        continue;
                    }
                    if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                        return Err("closed in trailers".into());
                    }
                }
            }
            while self.buf.len() < size + 2 {
                if self.fill(deadline).map_err(|e| e.to_string())? == 0 {
                    return Err("closed in chunk data".into());
                }
            }
            body.extend_from_slice(&self.buf[..size]);
            self.buf.drain(..size + 2);
        }
    }

    fn read_to_close_inner(&mut self, deadline: Instant) -> Result<Vec<u8>, String> {
        loop {
            match self.fill(deadline) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
                Err(e) => return Err(format!("read error waiting for close: {e}")),
            }
        }
        Ok(std::mem::take(&mut self.buf))
    }

    /// Everything (remaining buffered plus new) until the server closes.
    pub fn read_to_close(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + RESPONSE_DEADLINE;
        match self.read_to_close_inner(deadline) {
            Ok(v) => v,
            Err(e) => self.fail("reading until close", e),
        }
    }

    /// True if the server closes (EOF or reset) within `within`, with no
    /// further bytes; panics if bytes arrive.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        if !self.buf.is_empty() {
            self.fail("unexpected extra bytes", "server sent more than expected");
        }
        self.stream.set_read_timeout(Some(within)).unwrap();
        let mut tmp = [0u8; 4096];
        let r = self.stream.read(&mut tmp);
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        match r {
            Ok(0) => true,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                self.fail("unexpected extra bytes", "server sent data instead of closing")
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Bytes buffered but not consumed by a response read.
    pub fn leftover(&self) -> &[u8] {
        &self.buf
    }

    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// Connects, sends `raw`, reads one response.
pub fn request(port: u16, raw: &str) -> Response {
    let mut c = Conn::connect(port);
    c.send(raw.as_bytes());
    c.read_response_to(raw.split(' ').next().unwrap_or("GET"))
}

/// Connects, sends `raw` bytes, reads until the server closes.
pub fn request_to_close(port: u16, raw: &[u8]) -> Vec<u8> {
    let mut c = Conn::connect(port);
    c.send(raw);
    c.read_to_close()
}

// ---------------------------------------------------------------------------
// curl

pub struct CurlOut {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl CurlOut {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Runs `curl -sS --max-time 10 ARGS`.
pub fn curl(args: &[&str]) -> CurlOut {
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "10"]).args(args);
    let o = run_bounded(c, Duration::from_secs(20));
    CurlOut { status: o.status, stdout: o.stdout, stderr: String::from_utf8_lossy(&o.stderr).into_owned() }
}

// ---------------------------------------------------------------------------
// wrk

/// wrk's binary, or a panic telling how to get it.
pub fn wrk_bin() -> String {
    for p in ["/usr/bin/wrk", "/usr/local/bin/wrk"] {
        if Path::new(p).exists() {
            return p.to_string();
        }
    }
    panic!("wrk is not installed: run .ci/run (which installs it), or `apt-get install -y wrk`");
}

/// Starts `wrk ARGS` with output captured; finish with `wrk_finish`.
pub fn wrk_start(args: &[&str]) -> Child {
    Command::new(wrk_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wrk")
}

#[derive(Debug)]
pub struct WrkResult {
    pub requests: u64,
    /// The "Socket errors:" line, if wrk printed one.
    pub socket_errors: Option<String>,
    /// The "Non-2xx or 3xx responses:" line, if any.
    pub non_2xx: Option<String>,
    pub output: String,
}

impl WrkResult {
    /// Socket errors summed (connect, read, write, timeout).
    pub fn error_count(&self) -> u64 {
        let Some(l) = &self.socket_errors else { return 0 };
        l.split(|c: char| !c.is_ascii_digit()).filter_map(|t| t.parse::<u64>().ok()).sum()
    }
}

/// Waits (bounded) for wrk and parses its summary.
pub fn wrk_finish(child: Child, limit: Duration) -> WrkResult {
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(limit) {
        Ok(r) => r.expect("wrk output"),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(id.to_string()).status();
            panic!("wrk did not finish within {limit:?}");
        }
    };
    let output = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "wrk failed ({}):\n{output}", out.status);
    let requests = output
        .lines()
        .find(|l| l.contains(" requests in "))
        .and_then(|l| l.trim().split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no request count in wrk output:\n{output}"));
    let line = |p: &str| output.lines().find(|l| l.trim_start().starts_with(p)).map(|l| l.trim().to_string());
    WrkResult { requests, socket_errors: line("Socket errors:"), non_2xx: line("Non-2xx or 3xx responses:"), output }
}
