//! A minimal blocking HTTP/2 client for tests, over a plain `TcpStream`
//! (cleartext, prior knowledge): frame encoding, a frame reader with
//! bounded waits, an HPACK encoder (literals without or with incremental
//! indexing, no Huffman, indexed references) and an HPACK decoder (static
//! and dynamic tables, Huffman) so responses can be read with their status.
//!
//! It does what abuse tests need and nothing protects the peer from it:
//! frames are built by hand and sent as given. `Conn::request` is the one
//! well-behaved exchange (it answers SETTINGS and PING, opens flow-control
//! windows as DATA arrives). `Conn::spawn_reader` drains the socket on a
//! thread, so a flood can be written without the two sides' buffers
//! filling up, and reports what the server sent (GOAWAY, RST_STREAM,
//! responses, close) as it happens.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use super::hpack::*;

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// frame types
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

// flags
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

// SETTINGS identifiers
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

// error codes
pub const NO_ERROR: u32 = 0x0;
pub const PROTOCOL_ERROR: u32 = 0x1;
pub const INTERNAL_ERROR: u32 = 0x2;
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
pub const SETTINGS_TIMEOUT: u32 = 0x4;
pub const STREAM_CLOSED: u32 = 0x5;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
pub const CANCEL: u32 = 0x8;
pub const COMPRESSION_ERROR: u32 = 0x9;
pub const CONNECT_ERROR: u32 = 0xa;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;
pub const INADEQUATE_SECURITY: u32 = 0xc;
pub const HTTP_1_1_REQUIRED: u32 = 0xd;

pub fn error_name(code: u32) -> String {
    const NAMES: &str = "NO_ERROR PROTOCOL_ERROR INTERNAL_ERROR FLOW_CONTROL_ERROR SETTINGS_TIMEOUT STREAM_CLOSED \
                         FRAME_SIZE_ERROR REFUSED_STREAM CANCEL COMPRESSION_ERROR CONNECT_ERROR ENHANCE_YOUR_CALM \
                         INADEQUATE_SECURITY HTTP_1_1_REQUIRED";
    NAMES.split(' ').nth(code as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("0x{code:x}"))
}

pub fn frame_name(kind: u8) -> String {
    const NAMES: &str = "DATA HEADERS PRIORITY RST_STREAM SETTINGS PUSH_PROMISE PING GOAWAY WINDOW_UPDATE CONTINUATION";
    NAMES.split(' ').nth(kind as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("type 0x{kind:x}"))
}

// ---------------------------------------------------------------------------
// frame encoding

/// One frame: 9-byte header and payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(9 + payload.len());
    put_frame(&mut v, kind, flags, stream, payload);
    v
}

/// Appends one frame to `out`.
pub fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len();
    assert!(len < 1 << 24, "frame payload too long");
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

pub fn settings_frame(settings: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::with_capacity(settings.len() * 6);
    for (id, val) in settings {
        p.extend_from_slice(&id.to_be_bytes());
        p.extend_from_slice(&val.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

pub fn settings_ack_frame() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

pub fn ping_frame(data: [u8; 8]) -> Vec<u8> {
    frame(PING, 0, 0, &data)
}

pub fn rst_frame(stream: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream, &code.to_be_bytes())
}

pub fn window_update_frame(stream: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream, &increment.to_be_bytes())
}

pub fn goaway_frame(last_stream: u32, code: u32) -> Vec<u8> {
    let mut p = last_stream.to_be_bytes().to_vec();
    p.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &p)
}

pub fn headers_frame(stream: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let flags = if end_stream { END_STREAM } else { 0 } | if end_headers { END_HEADERS } else { 0 };
    frame(HEADERS, flags, stream, block)
}

pub fn continuation_frame(stream: u32, block: &[u8], end_headers: bool) -> Vec<u8> {
    frame(CONTINUATION, if end_headers { END_HEADERS } else { 0 }, stream, block)
}

pub fn data_frame(stream: u32, data: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { END_STREAM } else { 0 }, stream, data)
}

/// A header block as HEADERS plus CONTINUATION frames of at most
/// `max_frame` bytes each (16384 is the default SETTINGS_MAX_FRAME_SIZE).
pub fn header_frames(stream: u32, block: &[u8], end_stream: bool, max_frame: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(block.len() + 9 * (block.len() / max_frame + 1));
    let mut chunks = block.chunks(max_frame).peekable();
    let first = chunks.next().unwrap_or(&[]);
    let last = chunks.peek().is_none();
    let flags = if end_stream { END_STREAM } else { 0 } | if last { END_HEADERS } else { 0 };
    put_frame(&mut out, HEADERS, flags, stream, first);
    while let Some(c) = chunks.next() {
        let last = chunks.peek().is_none();
        put_frame(&mut out, CONTINUATION, if last { END_HEADERS } else { 0 }, stream, c);
    }
    out
}

// ---------------------------------------------------------------------------
// frames received

#[derive(Clone, Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY frame.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        self.payload.get(at..at + 4).map(|b| u32::from_be_bytes(b.try_into().unwrap()))
    }
    /// GOAWAY's last stream id.
    pub fn last_stream(&self) -> Option<u32> {
        if self.kind != GOAWAY {
            return None;
        }
        self.payload.get(0..4).map(|b| u32::from_be_bytes(b.try_into().unwrap()) & 0x7fff_ffff)
    }
    /// The header block fragment of HEADERS/CONTINUATION (padding and
    /// priority removed).
    pub fn block_fragment(&self) -> &[u8] {
        let mut p = &self.payload[..];
        if self.kind != HEADERS {
            return p;
        }
        let mut pad = 0;
        if self.flags & PADDED != 0 && !p.is_empty() {
            pad = p[0] as usize;
            p = &p[1..];
        }
        if self.flags & PRIORITY_FLAG != 0 && p.len() >= 5 {
            p = &p[5..];
        }
        &p[..p.len().saturating_sub(pad)]
    }
    pub fn end_stream(&self) -> bool {
        matches!(self.kind, DATA | HEADERS) && self.flags & END_STREAM != 0
    }
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} stream={} flags=0x{:x} len={}",
            frame_name(self.kind),
            self.stream,
            self.flags,
            self.payload.len()
        );
        if let Some(c) = self.error_code() {
            s.push_str(&format!(" error={}", error_name(c)));
        }
        if self.kind == GOAWAY && self.payload.len() > 8 {
            s.push_str(&format!(" debug={:?}", String::from_utf8_lossy(&self.payload[8..])));
        }
        s
    }
}

/// What a read produced.
#[derive(Debug)]
pub enum Event {
    Frame(Frame),
    /// Orderly close (FIN).
    Eof,
    /// Connection reset or another error (RST from the peer).
    Error(std::io::Error),
    /// Nothing within the limit.
    Timeout,
}

/// Splits whole frames off the front of `buf`.
pub fn take_frame(buf: &mut Vec<u8>) -> Option<Frame> {
    if buf.len() < 9 {
        return None;
    }
    let len = (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize;
    if buf.len() < 9 + len {
        return None;
    }
    let f = Frame {
        kind: buf[3],
        flags: buf[4],
        stream: u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff,
        payload: buf[9..9 + len].to_vec(),
    };
    buf.drain(..9 + len);
    Some(f)
}

#[derive(Debug, Default, Clone)]
pub struct H2Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The fields of a HEADERS block after the response's (trailers).
    pub trailers: Vec<(String, String)>,
    /// RST_STREAM code if the stream was reset instead of completed.
    pub reset: Option<u32>,
}

impl H2Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

// ---------------------------------------------------------------------------
// the connection

pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
    pub decoder: Decoder,
    /// The next client stream id `request` uses.
    pub next_stream: u32,
    /// Frames read by `request` that belong to other streams.
    pub other: Vec<Frame>,
}

impl Conn {
    /// TCP connect only; nothing sent.
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"));
        stream.set_nodelay(true).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        Conn { stream, buf: Vec::new(), decoder: Decoder::default(), next_stream: 1, other: Vec::new() }
    }

    /// Connects, sends the preface and SETTINGS (`settings`), a connection
    /// WINDOW_UPDATE making the receive window 16 MiB, and waits for the
    /// server's SETTINGS, which it acknowledges.
    pub fn handshake(port: u16, settings: &[(u16, u32)]) -> Conn {
        let mut c = Conn::connect(port);
        let mut out = PREFACE.to_vec();
        out.extend(settings_frame(settings));
        out.extend(window_update_frame(0, (16 << 20) - 65535));
        c.send(&out);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match c.read_event(deadline) {
                Event::Frame(f) if f.kind == SETTINGS && f.flags & ACK == 0 => {
                    c.send(settings_ack_frame());
                    return c;
                }
                Event::Frame(_) => {}
                e => panic!("no SETTINGS from the server after the preface: {e:?}"),
            }
        }
    }

    /// `handshake` with no settings.
    pub fn open(port: u16) -> Conn {
        Conn::handshake(port, &[])
    }

    pub fn send(&mut self, data: impl AsRef<[u8]>) {
        self.stream.write_all(data.as_ref()).unwrap_or_else(|e| panic!("h2 write: {e}"));
    }

    pub fn try_send(&mut self, data: impl AsRef<[u8]>) -> std::io::Result<()> {
        self.stream.write_all(data.as_ref())
    }

    /// The next frame, or EOF/error/timeout by `deadline`.
    pub fn read_event(&mut self, deadline: Instant) -> Event {
        loop {
            if let Some(f) = take_frame(&mut self.buf) {
                return Event::Frame(f);
            }
            let now = Instant::now();
            if now >= deadline {
                return Event::Timeout;
            }
            self.stream.set_read_timeout(Some((deadline - now).max(Duration::from_millis(1)))).unwrap();
            let mut tmp = [0u8; 65536];
            match self.stream.read(&mut tmp) {
                Ok(0) => return Event::Eof,
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Event::Error(e),
            }
        }
    }

    /// Sends a request on a new stream and reads its response (status,
    /// headers, body), answering SETTINGS and PING and returning credit
    /// for DATA. A RST_STREAM on the stream ends it with `reset` set;
    /// GOAWAY, close or 10 s without an answer are errors.
    pub fn try_request(&mut self, block: &[u8], body: Option<&[u8]>) -> Result<H2Response, String> {
        let id = self.next_stream;
        self.next_stream += 2;
        let mut out = header_frames(id, block, body.is_none(), 16384);
        if let Some(b) = body {
            out.extend(data_frame(id, b, true));
        }
        self.try_send(&out).map_err(|e| format!("write: {e}"))?;
        self.read_response(id)
    }

    /// Reads the response of stream `id` (see `try_request`).
    pub fn read_response(&mut self, id: u32) -> Result<H2Response, String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut r = H2Response::default();
        let mut block: Vec<u8> = Vec::new();
        loop {
            let f = match self.read_event(deadline) {
                Event::Frame(f) => f,
                e => return Err(format!("stream {id}: {e:?} before the response ended")),
            };
            match f.kind {
                SETTINGS if f.flags & ACK == 0 => self.try_send(settings_ack_frame()).map_err(|e| e.to_string())?,
                PING if f.flags & ACK == 0 => {
                    self.try_send(frame(PING, ACK, 0, &f.payload)).map_err(|e| e.to_string())?
                }
                GOAWAY => return Err(format!("stream {id}: {}", f.describe())),
                HEADERS | CONTINUATION if f.stream == id => {
                    block.extend_from_slice(f.block_fragment());
                    if f.flags & END_HEADERS != 0 {
                        let fields = self.decoder.decode(&block).map_err(|e| format!("HPACK: {e}"))?;
                        block.clear();
                        if r.status == 0 {
                            r.status = fields
                                .iter()
                                .find(|(n, _)| n == ":status")
                                .and_then(|(_, v)| v.parse().ok())
                                .ok_or("no :status")?;
                            r.headers = fields;
                        } else {
                            r.trailers = fields;
                        }
                    }
                    if f.end_stream() {
                        return Ok(r);
                    }
                }
                HEADERS | CONTINUATION => {
                    // Another stream's headers: decode to keep HPACK state.
                    if f.kind == HEADERS && f.flags & END_HEADERS != 0 {
                        let _ = self.decoder.decode(f.block_fragment());
                    }
                    self.other.push(f);
                }
                DATA if f.stream == id => {
                    let n = f.payload.len() as u32;
                    let mut data = &f.payload[..];
                    if f.flags & PADDED != 0 && !data.is_empty() {
                        let pad = data[0] as usize;
                        data = &data[1..];
                        data = &data[..data.len().saturating_sub(pad)];
                    }
                    r.body.extend_from_slice(data);
                    if f.end_stream() {
                        return Ok(r);
                    }
                    if n > 0 {
                        let mut wu = window_update_frame(0, n);
                        wu.extend(window_update_frame(id, n));
                        self.try_send(&wu).map_err(|e| e.to_string())?;
                    }
                }
                RST_STREAM if f.stream == id => {
                    r.reset = f.error_code();
                    return Ok(r);
                }
                _ => self.other.push(f),
            }
        }
    }

    /// `GET path`, panicking on anything but a complete response.
    pub fn get(&mut self, path: &str) -> H2Response {
        self.try_request(&get_block(path), None).unwrap_or_else(|e| panic!("h2 GET {path}: {e}"))
    }

    /// Reads until the server closes the connection or `limit` passes;
    /// returns the frames seen and how it ended (Eof/Error/Timeout).
    pub fn drain(&mut self, limit: Duration) -> (Vec<Frame>, Event) {
        let deadline = Instant::now() + limit;
        let mut frames = Vec::new();
        loop {
            match self.read_event(deadline) {
                Event::Frame(f) => frames.push(f),
                e => return (frames, e),
            }
        }
    }

    /// Starts a thread that reads and decodes everything the server sends
    /// on this connection (the `Conn` keeps the write side).
    pub fn spawn_reader(&mut self) -> Reader {
        let mut rd = self.stream.try_clone().expect("clone stream");
        rd.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let stats = Arc::new(Mutex::new(ReadStats::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (stats.clone(), stop.clone());
        let mut buf = std::mem::take(&mut self.buf);
        let mut decoder = std::mem::take(&mut self.decoder);
        let thread = std::thread::spawn(move || {
            let mut tmp = vec![0u8; 1 << 16];
            let mut block = Vec::new();
            let mut hpack_ok = true;
            loop {
                while let Some(f) = take_frame(&mut buf) {
                    let mut s = st.lock().unwrap();
                    s.frames[f.kind.min(10) as usize] += 1;
                    match f.kind {
                        GOAWAY if s.goaway.is_none() => {
                            s.goaway = Some((f.last_stream().unwrap_or(0), f.error_code().unwrap_or(u32::MAX)));
                            s.goaway_at = Some(Instant::now());
                        }
                        RST_STREAM => *s.rst.entry(f.error_code().unwrap_or(u32::MAX)).or_default() += 1,
                        HEADERS | CONTINUATION => {
                            block.extend_from_slice(f.block_fragment());
                            if f.flags & END_HEADERS != 0 {
                                if hpack_ok {
                                    match decoder.decode(&block) {
                                        Ok(fields) => {
                                            if let Some((_, v)) = fields.iter().find(|(n, _)| n == ":status") {
                                                *s.statuses.entry(v.parse().unwrap_or(0)).or_default() += 1;
                                            }
                                        }
                                        Err(_) => hpack_ok = false,
                                    }
                                }
                                block.clear();
                            }
                        }
                        _ => {}
                    }
                    if s.first.len() < 20 {
                        s.first.push(f.describe());
                    }
                }
                if sp.load(Ordering::Relaxed) {
                    return;
                }
                match rd.read(&mut tmp) {
                    Ok(0) => {
                        st.lock().unwrap().end = Some(("EOF".into(), Instant::now()));
                        return;
                    }
                    Ok(n) => {
                        st.lock().unwrap().bytes += n as u64;
                        buf.extend_from_slice(&tmp[..n]);
                    }
                    Err(e)
                        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                    }
                    Err(e) => {
                        st.lock().unwrap().end = Some((e.to_string(), Instant::now()));
                        return;
                    }
                }
            }
        });
        Reader { stats, stop, thread: Some(thread) }
    }
}

/// What a `Reader` thread saw.
#[derive(Debug, Default, Clone)]
pub struct ReadStats {
    /// Frame counts by type (index = type, 10 = unknown types).
    pub frames: [u64; 11],
    pub bytes: u64,
    /// First GOAWAY: (last stream id, error code), and when it came.
    pub goaway: Option<(u32, u32)>,
    pub goaway_at: Option<Instant>,
    /// RST_STREAM counts by error code.
    pub rst: std::collections::BTreeMap<u32, u64>,
    /// Response :status counts (from decoded HEADERS).
    pub statuses: std::collections::BTreeMap<u16, u64>,
    /// How the connection ended ("EOF" or the read error) and when.
    pub end: Option<(String, Instant)>,
    /// The first 20 frames, described.
    pub first: Vec<String>,
}

impl ReadStats {
    pub fn closed(&self) -> bool {
        self.end.is_some()
    }
    pub fn goaway_code(&self) -> Option<u32> {
        self.goaway.map(|g| g.1)
    }
    /// A one-line account for messages.
    pub fn summary(&self) -> String {
        let frames: Vec<String> = self
            .frames
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{}={n}", frame_name(k as u8)))
            .collect();
        let rst: Vec<String> = self.rst.iter().map(|(c, n)| format!("{}={n}", error_name(*c))).collect();
        format!(
            "received {} bytes; frames [{}]; GOAWAY {}; RST_STREAM [{}]; statuses {:?}; connection {}",
            self.bytes,
            frames.join(" "),
            self.goaway.map(|(l, c)| format!("{} (last stream {l})", error_name(c))).unwrap_or_else(|| "none".into()),
            rst.join(" "),
            self.statuses,
            self.end.as_ref().map(|(e, _)| format!("closed ({e})")).unwrap_or_else(|| "open".into())
        )
    }
}

pub struct Reader {
    stats: Arc<Mutex<ReadStats>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Reader {
    pub fn stats(&self) -> ReadStats {
        self.stats.lock().unwrap().clone()
    }

    /// Waits until `done(stats)` holds or `limit` passes; returns the stats.
    pub fn wait_until(&self, limit: Duration, done: impl Fn(&ReadStats) -> bool) -> ReadStats {
        let deadline = Instant::now() + limit;
        loop {
            let s = self.stats();
            if done(&s) || s.closed() || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the connection to close (or `limit`).
    pub fn wait_closed(&self, limit: Duration) -> ReadStats {
        self.wait_until(limit, |s| s.closed())
    }

    /// Stops the thread and returns the final stats.
    pub fn finish(mut self) -> ReadStats {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
