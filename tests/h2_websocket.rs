//! WebSocket over HTTP/2 (RFC 8441 extended CONNECT) through the proxy, a
//! sluice extension (nginx has none, so nothing here runs in nginx mode).
//!
//! The client is the `h2` crate over h2c (prior knowledge); the origin is a
//! small RFC 6455 server on `std::net` that checks the handshake, answers
//! 101 with the right accept value, echoes data frames unmasked, answers a
//! close frame with one and closes, and on the text message "bye" closes
//! first. It records the raw bytes it received, so the tests see that the
//! client's masked frames reached it byte for byte and its frames came back
//! byte for byte.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::origin::{Origin, Reply};
use common::*;

const WAIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// WebSocket frames (RFC 6455 5.2)

const TEXT: u8 = 0x1;
const BINARY: u8 = 0x2;
const CLOSE: u8 = 0x8;

/// One final frame; masked (as a client must) when `mask` is given.
fn ws_frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    let mut f = vec![0x80 | opcode];
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => f.push(m | n as u8),
        n if n <= 0xffff => {
            f.push(m | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            f.push(m | 127);
            f.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(k) => {
            f.extend_from_slice(&k);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ k[i % 4]));
        }
        None => f.extend_from_slice(payload),
    }
    f
}

/// Splits one frame off `buf`: (opcode, unmasked payload), or None if
/// incomplete.
fn take_ws_frame(buf: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
    if buf.len() < 2 {
        return None;
    }
    let masked = buf[1] & 0x80 != 0;
    let (len, mut at) = match buf[1] & 0x7f {
        126 if buf.len() >= 4 => (u16::from_be_bytes([buf[2], buf[3]]) as usize, 4),
        127 if buf.len() >= 10 => (u64::from_be_bytes(buf[2..10].try_into().unwrap()) as usize, 10),
        126 | 127 => return None,
        n => (n as usize, 2),
    };
    let key = if masked {
        let k: [u8; 4] = buf.get(at..at + 4)?.try_into().unwrap();
        at += 4;
        Some(k)
    } else {
        None
    };
    if buf.len() < at + len {
        return None;
    }
    let mut payload = buf[at..at + len].to_vec();
    if let Some(k) = key {
        payload.iter_mut().enumerate().for_each(|(i, b)| *b ^= k[i % 4]);
    }
    let opcode = buf[0] & 0x0f;
    buf.drain(..at + len);
    Some((opcode, payload))
}

fn b64_decode(s: &str) -> Option<Vec<u8>> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let s = s.trim_end_matches('=');
    let mut bits = 0u32;
    let (mut n, mut out) = (0, Vec::new());
    for c in s.bytes() {
        bits = (bits << 6) | T.iter().position(|&t| t == c)? as u32;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    Some(out)
}

fn b64_encode(data: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            s.push(if i <= c.len() { T[(n >> (18 - 6 * i)) as usize & 63] as char } else { '=' });
        }
    }
    s
}

fn accept_for(key: &str) -> String {
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    b64_encode(ctx.finish().as_ref())
}

// ---------------------------------------------------------------------------
// the WebSocket origin

#[derive(Default, Debug)]
struct Seen {
    /// Request heads.
    heads: Vec<String>,
    /// Every byte received after the head.
    raw: Vec<u8>,
    /// Close frames received from the client side.
    closes: usize,
    /// The client side's FIN/close was seen.
    eof: bool,
}

struct WsOrigin {
    port: u16,
    seen: Arc<Mutex<Seen>>,
}

impl WsOrigin {
    fn start() -> WsOrigin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let seen = shared.clone();
                std::thread::spawn(move || ws_serve(c, &seen));
            }
        });
        WsOrigin { port, seen }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap()
    }

    /// Waits (letting the client's connection task run) until `done`.
    async fn wait(&self, what: &str, done: impl Fn(&Seen) -> bool) {
        let t = Instant::now();
        while !done(&self.seen()) {
            assert!(t.elapsed() < Duration::from_secs(3), "origin never saw {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn ws_serve(mut c: TcpStream, seen: &Mutex<Seen>) {
    let mut buf = Vec::new();
    let mut b = vec![0u8; 64 * 1024];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match c.read(&mut b) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    seen.lock().unwrap().heads.push(head.clone());
    let field = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_string())
    };
    let Some(key) = field("sec-websocket-key") else {
        let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    };
    let mut reply = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n",
        accept_for(&key)
    );
    if let Some(p) = field("sec-websocket-protocol") {
        reply.push_str(&format!("Sec-WebSocket-Protocol: {}\r\n", p.split(',').next().unwrap_or("").trim()));
    }
    reply.push_str("\r\n");
    if c.write_all(reply.as_bytes()).is_err() {
        return;
    }
    let mut rest = buf[end..].to_vec();
    seen.lock().unwrap().raw.extend_from_slice(&rest);
    loop {
        while let Some((op, payload)) = take_ws_frame(&mut rest) {
            if op == CLOSE {
                seen.lock().unwrap().closes += 1;
                let _ = c.write_all(&ws_frame(CLOSE, &payload, None));
                let _ = c.shutdown(Shutdown::Write);
            } else if op == TEXT && payload == b"bye" {
                let _ = c.write_all(&ws_frame(CLOSE, &1001u16.to_be_bytes(), None));
                let _ = c.shutdown(Shutdown::Both);
                return;
            } else if c.write_all(&ws_frame(op, &payload, None)).is_err() {
                return;
            }
        }
        match c.read(&mut b) {
            Ok(0) | Err(_) => {
                seen.lock().unwrap().eof = true;
                return;
            }
            Ok(n) => {
                seen.lock().unwrap().raw.extend_from_slice(&b[..n]);
                rest.extend_from_slice(&b[..n]);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// the h2 client

struct Client {
    send: h2::client::SendRequest<Bytes>,
}

impl Client {
    /// Connects with prior knowledge and waits for the server's SETTINGS to
    /// allow extended CONNECT (a failure here is the setting's absence).
    async fn connect(port: u16) -> Client {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let send = send.ready().await.unwrap();
        let t = Instant::now();
        while !send.is_extended_connect_protocol_enabled() {
            assert!(t.elapsed() < WAIT, "server did not advertise SETTINGS_ENABLE_CONNECT_PROTOCOL");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Client { send }
    }

    /// Sends a CONNECT for `path` with `protocol` (none: plain CONNECT to
    /// the authority) and waits for the response head.
    async fn connect_stream(
        &mut self,
        port: u16,
        path: &str,
        protocol: Option<&'static str>,
        headers: &[(&str, &str)],
    ) -> Stream {
        let mut b = http::Request::builder().method(http::Method::CONNECT);
        b = match protocol {
            Some(p) => b.uri(format!("http://127.0.0.1:{port}{path}")).extension(h2::ext::Protocol::from_static(p)),
            None => b.uri(format!("127.0.0.1:{port}")),
        };
        for (n, v) in headers {
            b = b.header(*n, *v);
        }
        self.send = self.send.clone().ready().await.unwrap();
        let (resp, tx) = self.send.send_request(b.body(()).unwrap(), false).unwrap();
        let resp = tokio::time::timeout(WAIT, resp).await.expect("no response head").unwrap();
        let (parts, rx) = resp.into_parts();
        Stream { status: parts.status.as_u16(), headers: parts.headers, tx, rx, buf: Vec::new() }
    }
}

struct Stream {
    status: u16,
    headers: http::HeaderMap,
    tx: h2::SendStream<Bytes>,
    rx: h2::RecvStream,
    /// Received and not yet taken.
    buf: Vec<u8>,
}

impl Stream {
    /// Sends as the server's window allows.
    async fn send(&mut self, data: &[u8], end: bool) {
        let mut data = Bytes::copy_from_slice(data);
        if data.is_empty() {
            self.tx.send_data(data, end).unwrap();
            return;
        }
        while !data.is_empty() {
            self.tx.reserve_capacity(data.len());
            let mut n = self.tx.capacity();
            if n == 0 {
                let wait = std::future::poll_fn(|cx| self.tx.poll_capacity(cx));
                n = tokio::time::timeout(WAIT, wait).await.expect("no window").unwrap().unwrap();
            }
            let part = data.split_to(n.min(data.len()));
            self.tx.send_data(part, end && data.is_empty()).unwrap();
        }
    }

    /// Reads until `n` bytes are at hand (or the stream ends); returns them.
    async fn read(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            match tokio::time::timeout(WAIT, self.rx.data()).await.expect("nothing received") {
                Some(Ok(d)) => {
                    let _ = self.rx.flow_control().release_capacity(d.len());
                    self.buf.extend_from_slice(&d);
                }
                Some(Err(e)) => panic!("stream failed after {} bytes: {e}", self.buf.len()),
                None => break,
            }
        }
        let k = n.min(self.buf.len());
        self.buf.drain(..k).collect()
    }

    /// Waits for the stream's end: Ok(()) for END_STREAM, Err for a reset.
    async fn ended(&mut self) -> Result<(), String> {
        loop {
            match tokio::time::timeout(WAIT, self.rx.data()).await.expect("stream did not end") {
                Some(Ok(d)) if d.is_empty() => {}
                Some(Ok(d)) => panic!("unexpected data: {:?}", String::from_utf8_lossy(&d)),
                Some(Err(e)) => return Err(e.to_string()),
                None => return Ok(()),
            }
        }
    }

    /// The whole body of an ordinary response.
    async fn body(&mut self) -> String {
        let mut out = Vec::new();
        while let Some(d) = tokio::time::timeout(WAIT, self.rx.data()).await.expect("body stalled") {
            let d = d.unwrap();
            let _ = self.rx.flow_control().release_capacity(d.len());
            out.extend_from_slice(&d);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

// ---------------------------------------------------------------------------
// tests

fn ws_server(origin: u16, extra: &str) -> TestServer {
    ws_server_with(origin, extra, "5s")
}

fn ws_server_with(origin: u16, extra: &str, read_timeout: &str) -> TestServer {
    builder()
        .http(&format!(
            "access_log logs/access.log;\n\
             map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}\n\
             server {{\n\
               listen 127.0.0.1:{{port}} http2;\n\
               root html;\n\
               location /ws {{\n\
                 proxy_pass http://127.0.0.1:{origin};\n\
                 proxy_http_version 1.1;\n\
                 proxy_set_header Upgrade $http_upgrade;\n\
                 proxy_set_header Connection $connection_upgrade;\n\
                 proxy_set_header X-Seen $http_upgrade/$http_connection/$request_method;\n\
                 proxy_read_timeout {read_timeout};\n\
               }}\n\
               {extra}\n\
             }}\n"
        ))
        .start()
}

const MASK: Option<[u8; 4]> = Some([0x37, 0xfa, 0x21, 0x3d]);

#[tokio::test]
async fn websocket_over_h2_echoes_frames_both_ways() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    let origin = WsOrigin::start();
    let s = ws_server(origin.port, "");
    let mut c = Client::connect(s.port).await;
    let mut ws = c
        .connect_stream(
            s.port,
            "/ws?room=1",
            Some("websocket"),
            &[
                ("sec-websocket-version", "13"),
                ("sec-websocket-protocol", "chat, superchat"),
                ("sec-websocket-extensions", "x-test"),
            ],
        )
        .await;
    assert_eq!(ws.status, 200, "{:?}", ws.headers);
    assert_eq!(ws.header("sec-websocket-protocol"), Some("chat"));
    assert_eq!(ws.header("sec-websocket-accept"), None, "the accept value stays on the HTTP/1.1 side");
    assert_eq!(ws.header("content-length"), None);
    assert_eq!(ws.header("upgrade"), None);

    // The handshake the origin got: an HTTP/1.1 Upgrade with a fresh key.
    let raw_head = origin.seen().heads[0].clone();
    let head = raw_head.to_ascii_lowercase();
    assert!(head.starts_with("get /ws?room=1 http/1.1\r\n"), "{head}");
    for want in [
        "\r\nupgrade: websocket\r\n",
        "\r\nconnection: upgrade\r\n",
        "\r\nsec-websocket-version: 13\r\n",
        "\r\nsec-websocket-protocol: chat, superchat\r\n",
        "\r\nsec-websocket-extensions: x-test\r\n",
        // $http_upgrade, $http_connection and $request_method as nginx's
        // variables see the stream.
        "\r\nx-seen: websocket/upgrade/connect\r\n",
    ] {
        assert!(head.contains(want), "{want:?} missing in {head}");
    }
    assert_eq!(head.matches("\r\nupgrade:").count(), 1, "{head}");
    assert_eq!(head.matches("\r\nconnection:").count(), 1, "{head}");
    let key = raw_head
        .lines()
        .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case("sec-websocket-key")))
        .map(|(_, v)| v.trim())
        .expect("no key");
    assert_eq!(b64_decode(key).map(|k| k.len()), Some(16), "{key}");

    // Several messages, one of them larger than the initial windows.
    let big: Vec<u8> = pseudo_random(150 * 1024, 3);
    let medium: Vec<u8> = pseudo_random(300, 4);
    let messages: Vec<(u8, &[u8])> =
        vec![(TEXT, b"hello"), (BINARY, &medium), (BINARY, &big), (TEXT, b"after the big one")];
    let mut sent_raw = Vec::new();
    for (op, payload) in &messages {
        let frame = ws_frame(*op, payload, MASK);
        sent_raw.extend_from_slice(&frame);
        ws.send(&frame, false).await;
        let want = ws_frame(*op, payload, None);
        let got = ws.read(want.len()).await;
        assert!(got == want, "echo of a {}-byte message differs", payload.len());
    }
    // Two messages in one DATA frame come back as two frames.
    let (a, b) = (ws_frame(TEXT, b"one", MASK), ws_frame(TEXT, b"two", MASK));
    let both = [a.clone(), b.clone()].concat();
    sent_raw.extend_from_slice(&both);
    ws.send(&both, false).await;
    let want = [ws_frame(TEXT, b"one", None), ws_frame(TEXT, b"two", None)].concat();
    assert_eq!(ws.read(want.len()).await, want);

    // The client closes: its close frame and END_STREAM reach the origin,
    // whose close frame and EOF end the stream.
    let close = ws_frame(CLOSE, &1000u16.to_be_bytes(), MASK);
    sent_raw.extend_from_slice(&close);
    ws.send(&close, true).await;
    let want = ws_frame(CLOSE, &1000u16.to_be_bytes(), None);
    assert_eq!(ws.read(want.len()).await, want);
    assert_eq!(ws.ended().await, Ok(()));
    origin.wait("the close frame and EOF", |s| s.closes == 1 && s.eof).await;
    assert!(origin.seen().raw == sent_raw, "the origin did not get the client's frames byte for byte");

    let lines = s.wait_access_lines(1);
    assert!(lines[0].contains("\"CONNECT /ws?room=1 HTTP/2.0\" 200 "), "{}", lines[0]);
}

#[tokio::test]
async fn origin_close_ends_the_stream_and_connection_lives_on() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    let origin = WsOrigin::start();
    let s = ws_server(origin.port, "");
    let mut c = Client::connect(s.port).await;
    for round in 0..2 {
        let mut ws = c.connect_stream(s.port, "/ws", Some("websocket"), &[("sec-websocket-version", "13")]).await;
        assert_eq!(ws.status, 200, "round {round}");
        ws.send(&ws_frame(TEXT, b"ping", MASK), false).await;
        let want = ws_frame(TEXT, b"ping", None);
        assert_eq!(ws.read(want.len()).await, want);
        // "bye": the origin sends a close frame and closes its connection.
        ws.send(&ws_frame(TEXT, b"bye", MASK), false).await;
        let want = ws_frame(CLOSE, &1001u16.to_be_bytes(), None);
        assert_eq!(ws.read(want.len()).await, want, "round {round}");
        assert_eq!(ws.ended().await, Ok(()), "the origin's EOF is END_STREAM");
        ws.send(b"", true).await;
    }
    // The h2 connection still serves ordinary requests.
    let mut st = c.connect_stream(s.port, "/nothing", Some("websocket"), &[]).await;
    assert_eq!(st.status, 404);
    let _ = st.body().await;
}

#[tokio::test]
async fn client_reset_closes_the_origin_connection() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    let origin = WsOrigin::start();
    let s = ws_server(origin.port, "");
    let mut c = Client::connect(s.port).await;
    let mut ws = c.connect_stream(s.port, "/ws", Some("websocket"), &[]).await;
    assert_eq!(ws.status, 200);
    ws.send(&ws_frame(BINARY, b"\x00\x01\x02", MASK), false).await;
    assert_eq!(ws.read(5).await, ws_frame(BINARY, b"\x00\x01\x02", None));
    ws.tx.send_reset(h2::Reason::CANCEL);
    origin.wait("EOF after RST_STREAM", |s| s.eof).await;
    assert_eq!(origin.seen().closes, 0);
}

#[tokio::test]
async fn what_is_not_a_tunnel() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    // An origin that does not switch: its answers, and the upgrade request
    // it got from a location without any proxy_set_header (nginx's default
    // proxy_http_version 1.0 too).
    let plain = Origin::start(|r| match r.target() {
        "/deny" => Reply::http(403, &["Content-Type: text/plain", "X-Why: nope"], "denied\n"),
        _ => Reply::ok("plain page\n"),
    });
    let origin = WsOrigin::start();
    let s = ws_server(
        origin.port,
        &format!(
            "location /deny {{ proxy_pass http://{0}; }}\n\
             location /page {{ proxy_pass http://{0}; }}\n\
             location = /static {{ return 200 \"static\\n\"; }}\n\
             location = /forbidden {{ return 403; }}\n",
            plain.addr()
        ),
    );
    let mut c = Client::connect(s.port).await;
    let mut st = c.connect_stream(s.port, "/deny", Some("websocket"), &[]).await;
    assert_eq!((st.status, st.header("x-why")), (403, Some("nope")));
    assert_eq!(st.body().await, "denied\n");
    let got = plain.last();
    assert_eq!(got.line(), "GET /deny HTTP/1.1");
    assert_eq!(got.header("upgrade"), Some("websocket"));
    assert_eq!(got.header("connection"), Some("upgrade"));
    let key = got.header("sec-websocket-key").expect("no key");
    assert_eq!(b64_decode(key).map(|k| k.len()), Some(16), "{key}");
    // A fresh key per request.
    let _ = c.connect_stream(s.port, "/deny", Some("websocket"), &[]).await.body().await;
    assert_ne!(plain.last().header("sec-websocket-key"), Some(key));

    // A 2xx that is no switch would read as an open tunnel: 502.
    let mut st = c.connect_stream(s.port, "/page", Some("websocket"), &[]).await;
    assert_eq!(st.status, 502);
    let _ = st.body().await;
    // Content sluice serves itself cannot be tunnelled: 501; errors stand.
    for (path, status) in [("/static", 501), ("/forbidden", 403), ("/missing", 404)] {
        let mut st = c.connect_stream(s.port, path, Some("websocket"), &[]).await;
        assert_eq!(st.status, status, "{path}");
        let _ = st.body().await;
    }
    // Other protocols are not implemented.
    let mut st = c.connect_stream(s.port, "/ws", Some("connect-udp"), &[]).await;
    assert_eq!(st.status, 501);
    let _ = st.body().await;
    assert!(origin.seen().heads.is_empty());
    s.wait_error_log("instead of 101");
}

#[tokio::test]
async fn plain_connect_is_not_proxied() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    let origin = WsOrigin::start();
    let s = ws_server(origin.port, "location / { proxy_pass http://127.0.0.1:1; }");
    let mut c = Client::connect(s.port).await;
    let mut st = c.connect_stream(s.port, "", None, &[]).await;
    assert_eq!(st.status, 405);
    let _ = st.body().await;
    assert!(origin.seen().heads.is_empty());
}

#[test]
fn settings_advertise_enable_connect_protocol() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    use common::h2raw::*;
    let s = builder().http("server { listen 127.0.0.1:{port} http2; location / { return 200; } }").start();
    let mut c = Conn::connect(s.port);
    let mut out = PREFACE.to_vec();
    out.extend(settings_frame(&[]));
    c.send(&out);
    let deadline = Instant::now() + WAIT;
    let settings = loop {
        match c.read_event(deadline) {
            Event::Frame(f) if f.kind == SETTINGS && f.flags & ACK == 0 => break f.payload,
            Event::Frame(_) => {}
            e => panic!("no SETTINGS: {e:?}"),
        }
    };
    let pairs: Vec<(u16, u32)> = settings
        .chunks(6)
        .map(|p| (u16::from_be_bytes([p[0], p[1]]), u32::from_be_bytes([p[2], p[3], p[4], p[5]])))
        .collect();
    // SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 3) = 0x8.
    assert!(pairs.contains(&(0x8, 1)), "{pairs:?}");
}

#[tokio::test]
async fn idle_tunnel_ends_after_proxy_read_timeout() {
    if tls::skip_in_nginx_mode("RFC 8441 is a sluice extension") {
        return;
    }
    let origin = WsOrigin::start();
    let s = ws_server_with(origin.port, "", "1s");
    let mut c = Client::connect(s.port).await;
    let mut ws = c.connect_stream(s.port, "/ws", Some("websocket"), &[]).await;
    assert_eq!(ws.status, 200);
    let t = Instant::now();
    assert!(ws.ended().await.is_err(), "an idle tunnel is reset");
    assert!(t.elapsed() >= Duration::from_millis(900), "{:?}", t.elapsed());
    origin.wait("EOF after the idle timeout", |s| s.eof).await;
    s.wait_error_log("upstream timed out (110: Connection timed out) while proxying upgraded connection");
}
