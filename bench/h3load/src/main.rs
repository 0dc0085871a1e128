//! h3load — an HTTP/3 load generator for `bench/h3.py`.
//!
//! Debian 12's h2load (nghttp2 1.52) is built without ngtcp2 and cannot
//! speak HTTP/3, so bench/h3.py uses this instead: quinn (QUIC, rustls on
//! aws-lc-rs) and crates.io's h3 0.0.8 (HTTP/3 and QPACK) as the client.
//!
//! **This is a load generator, never a real client.** Its rustls verifier
//! accepts any certificate and any handshake signature (the client's work
//! then is QUIC, ECDHE and packet protection, not ECDSA verification). It
//! only connects to loopback addresses (127.0.0.0/8, ::1), and every run is
//! bounded by `-n` requests and/or `-D` seconds (at most 600).
//!
//! `-c` connection slots each open a QUIC connection (from the slot's own
//! UDP socket; a full TLS 1.3 handshake: session resumption and 0-RTT are
//! off; ALPN `h3`; key exchange X25519), open the HTTP/3 control streams, and run `-m` request loops on it
//! at once: `GET URL` (headers `:method`, `:scheme`, `:authority`, `:path`,
//! `user-agent: h3load`), FIN right after the HEADERS, the response head and
//! the whole body read. With `-r N` a connection is closed after N requests
//! (CONNECTION_CLOSE, code 0 — H3_NO_ERROR) and the slot opens a new one:
//! `-r 1` makes every request a new connection and a full handshake. A
//! connection whose handshake fails or whose requests fail is replaced.
//!
//! A request succeeds when it gets a 2xx or 3xx status and a body of
//! Content-Length bytes (when the response has one). Single-threaded (a
//! current-thread tokio runtime): the harness pins it to one core.
//!
//! The summary is printed in h2load's format, so bench/benchlib's
//! `parse_h2load` reads it, plus lines of its own (`connections:`,
//! `client cpu:`):
//!
//! ```text
//! finished in 5.00s, 41234.50 req/s, 1.23MB/s
//! requests: 206172 total, 206172 started, 206172 done, 206172 succeeded, 0 failed, 0 errored, 0 timeout
//! status codes: 206172 2xx, 0 3xx, 0 4xx, 0 5xx
//! traffic: 6.12MB (6123456) total, 0B (0) headers (space savings 0.00%), 2.36MB (2474064) data
//!                      min         max         mean         sd        +/- sd
//! time for request:      0.21ms     12.34ms      2.40ms      0.50ms    0.00%
//! Application protocol: h3
//! connections: 10 ok, 0 failed (handshake or setup)
//! client cpu: user 3.10 s, sys 1.80 s, 98.0 % of elapsed
//! ```
//!
//! `traffic ... total` is the UDP payload bytes received (QUIC headers,
//! frames, packet protection included); `data` is response body bytes.
//! `failed` counts every request that did not succeed (so it includes
//! `errored`: a stream or connection error, and `timeout`: no complete
//! response within `--timeout`). With `-o FILE` the first response body is
//! written to FILE (the harness compares it with the file served). The first
//! error of each kind is printed to stderr. Exit status: 0 if a request
//! succeeded, 1 if none did, 2 on a usage error.

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

const MAX_DURATION_S: f64 = 600.0;
const MAX_REQUESTS: u64 = 100_000_000;
const MAX_CONNECTIONS: usize = 10_000;
const MAX_STREAMS: usize = 1_000;

const USAGE: &str = "\
usage: h3load [options] https://HOST:PORT/PATH

HTTP/3 load generator for bench/h3.py. Skips ALL certificate and
handshake-signature verification: a load generator, never a real client.
Loopback addresses only.

options:
  -c N            connections at once (default 10)
  -m N            requests in flight per connection (default 10)
  -n N            stop after N requests (with -D: whichever comes first)
  -D SECONDS      run for this long (default 10 unless -n is given; max 600)
  -r N            close each connection after N requests and open a new one
                  (default 0: keep it)
  --timeout S     per request (send to end of body) and per handshake, default 10
  --sni NAME      server name sent in the handshake (default: the URL's host)
  -o FILE         write the first response body to FILE
  -h, --help      this text
";

// ---------------------------------------------------------------------------
// The verifier that verifies nothing.
// ---------------------------------------------------------------------------

/// Accepts every certificate and every handshake signature. Only acceptable
/// because h3load is a load generator talking to a server on loopback.
#[derive(Debug)]
struct NoVerify(Vec<SignatureScheme>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

struct Opts {
    url: String,
    addr: SocketAddr,
    sni: String,
    conns: usize,
    streams: usize,
    requests: Option<u64>,
    duration: Option<f64>,
    per_conn: u64,
    timeout: Duration,
    out: Option<String>,
}

fn usage(msg: &str) -> ! {
    eprintln!("h3load: {msg}\n\n{USAGE}");
    std::process::exit(2);
}

fn parse_args() -> Opts {
    let mut args = std::env::args().skip(1);
    let (mut conns, mut streams, mut requests, mut duration) = (10usize, 10usize, None, None);
    let (mut per_conn, mut timeout, mut sni, mut out, mut url) = (0u64, 10.0f64, None, None, None);
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> T {
        v.and_then(|v| v.parse().ok()).unwrap_or_else(|| usage(&format!("{flag} needs a number")))
    }
    while let Some(a) = args.next() {
        match a.as_str() {
            "-c" => conns = num("-c", args.next()),
            "-m" => streams = num("-m", args.next()),
            "-n" => requests = Some(num("-n", args.next())),
            "-D" => duration = Some(num("-D", args.next())),
            "-r" => per_conn = num("-r", args.next()),
            "--timeout" => timeout = num("--timeout", args.next()),
            "--sni" => sni = Some(args.next().unwrap_or_else(|| usage("--sni needs a name"))),
            "-o" => out = Some(args.next().unwrap_or_else(|| usage("-o needs a file"))),
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            s if s.starts_with("https://") && url.is_none() => url = Some(s.to_string()),
            s => usage(&format!("unexpected argument {s:?}")),
        }
    }
    let url = url.unwrap_or_else(|| usage("no https:// URL"));
    if conns == 0 || conns > MAX_CONNECTIONS || streams == 0 || streams > MAX_STREAMS {
        usage("-c must be 1..10000 and -m 1..1000");
    }
    if requests.is_none() && duration.is_none() {
        duration = Some(10.0);
    }
    if let Some(d) = duration {
        if !(d > 0.0 && d <= MAX_DURATION_S) {
            usage("-D must be in (0, 600]");
        }
    }
    if let Some(n) = requests {
        if n == 0 || n > MAX_REQUESTS {
            usage("-n must be 1..100000000");
        }
    }
    if !(timeout > 0.0 && timeout <= 60.0) {
        usage("--timeout must be in (0, 60]");
    }
    let uri: http::Uri = url.parse().unwrap_or_else(|_| usage("bad URL"));
    let auth = uri.authority().unwrap_or_else(|| usage("URL without host")).clone();
    let host = auth.host().trim_start_matches('[').trim_end_matches(']').to_string();
    let port = auth.port_u16().unwrap_or(443);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .unwrap_or_else(|| usage("cannot resolve the URL's host"));
    if !addr.ip().is_loopback() {
        usage("loopback addresses only");
    }
    Opts {
        url,
        addr,
        sni: sni.unwrap_or(host),
        conns,
        streams,
        requests,
        duration,
        per_conn,
        timeout: Duration::from_secs_f64(timeout),
        out,
    }
}

// ---------------------------------------------------------------------------
// Counters
// ---------------------------------------------------------------------------

#[derive(Default)]
struct Stats {
    claimed: u64,
    started: u64,
    done: u64,
    succeeded: u64,
    errored: u64,
    timeout: u64,
    status: [u64; 6],
    body_bytes: u64,
    rx_bytes: u64,
    conns_ok: u64,
    conns_failed: u64,
    lat_n: u64,
    lat_min: f64,
    lat_max: f64,
    lat_sum: f64,
    lat_sq: f64,
    alpn: Option<String>,
    reported: Vec<&'static str>,
    first_body: Option<Vec<u8>>,
}

impl Stats {
    fn error(&mut self, kind: &'static str, msg: impl std::fmt::Display) {
        if !self.reported.contains(&kind) {
            self.reported.push(kind);
            eprintln!("h3load: first {kind} error: {msg}");
        }
    }
}

/// Requests left to start: `-n` and `-D` together.
struct Budget {
    left: Cell<u64>,
    deadline: Option<Instant>,
}

impl Budget {
    fn more(&self) -> bool {
        self.left.get() > 0 && self.deadline.map_or(true, |d| Instant::now() < d)
    }
    fn take(&self) -> bool {
        if !self.more() {
            return false;
        }
        self.left.set(self.left.get() - 1);
        true
    }
}

type Send = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

enum Outcome {
    Ok { status: u16, body: u64, length_ok: bool },
    Err(String),
}

async fn one_request(send: &mut Send, url: &str, capture: Option<&mut Vec<u8>>) -> Outcome {
    let req = http::Request::builder()
        .method("GET")
        .uri(url)
        .header("user-agent", "h3load")
        .body(())
        .expect("request");
    let mut s = match send.send_request(req).await {
        Ok(s) => s,
        Err(e) => return Outcome::Err(format!("send_request: {e}")),
    };
    if let Err(e) = s.finish().await {
        return Outcome::Err(format!("finish: {e}"));
    }
    let resp = match s.recv_response().await {
        Ok(r) => r,
        Err(e) => return Outcome::Err(format!("recv_response: {e}")),
    };
    let want: Option<u64> = resp
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let mut n = 0u64;
    let mut capture = capture;
    loop {
        match s.recv_data().await {
            Ok(Some(mut chunk)) => {
                let len = chunk.remaining();
                n += len as u64;
                if let Some(buf) = capture.as_deref_mut() {
                    while chunk.has_remaining() {
                        let c = chunk.chunk();
                        buf.extend_from_slice(c);
                        let l = c.len();
                        chunk.advance(l);
                    }
                } else {
                    chunk.advance(len);
                }
            }
            Ok(None) => break,
            Err(e) => return Outcome::Err(format!("recv_data: {e}")),
        }
    }
    Outcome::Ok { status: resp.status().as_u16(), body: n, length_ok: want.map_or(true, |w| w == n) }
}

async fn stream_loop(
    opts: Rc<Opts>,
    st: Rc<RefCell<Stats>>,
    budget: Rc<Budget>,
    conn_left: Rc<Cell<u64>>,
    mut send: Send,
) {
    loop {
        if conn_left.get() == 0 || !budget.take() {
            return;
        }
        conn_left.set(conn_left.get() - 1);
        {
            let mut s = st.borrow_mut();
            s.claimed += 1;
            s.started += 1;
        }
        let capture = opts.out.is_some() && st.borrow().first_body.is_none();
        let mut buf = Vec::new();
        let t0 = Instant::now();
        let r = tokio::time::timeout(
            opts.timeout,
            one_request(&mut send, &opts.url, if capture { Some(&mut buf) } else { None }),
        )
        .await;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut s = st.borrow_mut();
        match r {
            Err(_) => {
                s.timeout += 1;
                s.error("timeout", format!("no complete response within {:?}", opts.timeout));
                return; // the connection is suspect: its slot opens a new one
            }
            Ok(Outcome::Err(e)) => {
                s.errored += 1;
                s.error("stream", e);
                return;
            }
            Ok(Outcome::Ok { status, body, length_ok }) => {
                s.done += 1;
                s.body_bytes += body;
                s.status[(status / 100).min(5) as usize] += 1;
                if (200..400).contains(&status) && length_ok {
                    s.succeeded += 1;
                } else if !length_ok {
                    s.error("length", format!("body of {body} bytes, not Content-Length"));
                } else {
                    s.error("status", format!("status {status}"));
                }
                if capture && s.first_body.is_none() {
                    s.first_body = Some(buf);
                }
                if s.lat_n == 0 || ms < s.lat_min {
                    s.lat_min = ms;
                }
                if ms > s.lat_max {
                    s.lat_max = ms;
                }
                s.lat_n += 1;
                s.lat_sum += ms;
                s.lat_sq += ms * ms;
            }
        }
    }
}

async fn slot(opts: Rc<Opts>, st: Rc<RefCell<Stats>>, budget: Rc<Budget>, cfg: quinn::ClientConfig) {
    // One UDP socket per slot, for all of its connections (each a new
    // connection ID and a full handshake): a new socket per connection
    // would cost the client, not the server.
    let bind = if opts.addr.is_ipv4() { "127.0.0.1:0" } else { "[::1]:0" };
    let ep = loop {
        match quinn::Endpoint::client(bind.parse().unwrap()) {
            Ok(ep) => break ep,
            Err(e) => {
                st.borrow_mut().error("socket", e);
                if !budget.more() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    while budget.more() {
        let setup = async {
            let conn = ep
                .connect_with(cfg.clone(), opts.addr, &opts.sni)
                .map_err(|e| e.to_string())?
                .await
                .map_err(|e| e.to_string())?;
            let (driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((conn, driver, send))
        };
        let (conn, mut driver, send) = match tokio::time::timeout(opts.timeout, setup).await {
            Ok(Ok(x)) => x,
            r => {
                // A request that never got a connection counts as errored, so
                // a dead server ends a -n run instead of spinning.
                let mut s = st.borrow_mut();
                s.conns_failed += 1;
                if budget.take() {
                    s.claimed += 1;
                    s.errored += 1;
                }
                let msg = match r {
                    Ok(Err(e)) => e,
                    _ => format!("handshake not done within {:?}", opts.timeout),
                };
                s.error("connect", msg);
                continue;
            }
        };
        {
            let mut s = st.borrow_mut();
            s.conns_ok += 1;
            if s.alpn.is_none() {
                s.alpn = conn
                    .handshake_data()
                    .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
                    .and_then(|d| d.protocol.map(|p| String::from_utf8_lossy(&p).into_owned()));
            }
        }
        let drv = tokio::task::spawn_local(async move {
            std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let conn_left = Rc::new(Cell::new(if opts.per_conn == 0 { u64::MAX } else { opts.per_conn }));
        let mut loops = Vec::with_capacity(opts.streams);
        for _ in 0..opts.streams {
            loops.push(tokio::task::spawn_local(stream_loop(
                opts.clone(),
                st.clone(),
                budget.clone(),
                conn_left.clone(),
                send.clone(),
            )));
        }
        drop(send);
        for l in loops {
            let _ = l.await;
        }
        st.borrow_mut().rx_bytes += conn.stats().udp_rx.bytes;
        conn.close(0u32.into(), b"");
        drv.abort();
    }
    // The endpoint's driver sends the last CONNECTION_CLOSE frames.
    drop(ep);
}

fn fmt_bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2}GB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2}MB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.2}KB", b / 1024.0)
    } else {
        format!("{b}B")
    }
}

fn cpu_seconds() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

fn main() {
    let opts = Rc::new(parse_args());
    // Key exchange X25519 only, as every server here supports it: rustls
    // would offer X25519MLKEM768 first, which nginx with OpenSSL 3.0 and Go
    // 1.19's crypto/tls (Caddy 2.6) lack, and sluice would pick it, so the
    // servers would not do the same handshake.
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = vec![rustls::crypto::aws_lc_rs::kx_group::X25519];
    let schemes = provider.signature_verification_algorithms.supported_schemes();
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(schemes)))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.resumption = Resumption::disabled();
    tls.enable_early_data = false;
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).expect("QUIC client config");
    let cfg = quinn::ClientConfig::new(Arc::new(quic));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let local = tokio::task::LocalSet::new();
    let st = Rc::new(RefCell::new(Stats::default()));
    let start = Instant::now();
    let budget = Rc::new(Budget {
        left: Cell::new(opts.requests.unwrap_or(u64::MAX)),
        deadline: opts.duration.map(|d| start + Duration::from_secs_f64(d)),
    });
    local.block_on(&rt, async {
        let mut slots = Vec::new();
        for _ in 0..opts.conns {
            slots.push(tokio::task::spawn_local(slot(opts.clone(), st.clone(), budget.clone(), cfg.clone())));
        }
        for s in slots {
            let _ = s.await;
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    // Let the endpoints' drivers send their CONNECTION_CLOSE frames.
    local.block_on(&rt, async { tokio::time::sleep(Duration::from_millis(20)).await });
    let (user, sys) = cpu_seconds();
    let s = st.borrow();
    let total = match opts.requests {
        Some(n) => n,
        None => s.claimed,
    };
    if let (Some(path), Some(body)) = (&opts.out, &s.first_body) {
        if let Err(e) = std::fs::write(path, body) {
            eprintln!("h3load: cannot write {path}: {e}");
        }
    }
    let n = s.lat_n.max(1) as f64;
    let mean = s.lat_sum / n;
    let sd = (s.lat_sq / n - mean * mean).max(0.0).sqrt();
    println!(
        "finished in {:.2}s, {:.2} req/s, {}/s",
        elapsed,
        s.succeeded as f64 / elapsed,
        fmt_bytes((s.rx_bytes as f64 / elapsed) as u64)
    );
    println!(
        "requests: {} total, {} started, {} done, {} succeeded, {} failed, {} errored, {} timeout",
        total,
        s.started,
        s.done,
        s.succeeded,
        total - s.succeeded,
        s.errored,
        s.timeout
    );
    println!(
        "status codes: {} 2xx, {} 3xx, {} 4xx, {} 5xx",
        s.status[2], s.status[3], s.status[4], s.status[5]
    );
    println!(
        "traffic: {} ({}) total, 0B (0) headers (space savings 0.00%), {} ({}) data",
        fmt_bytes(s.rx_bytes),
        s.rx_bytes,
        fmt_bytes(s.body_bytes),
        s.body_bytes
    );
    println!("                     min         max         mean         sd        +/- sd");
    println!(
        "time for request: {:>10.2}ms {:>10.2}ms {:>10.2}ms {:>10.2}ms    0.00%",
        s.lat_min, s.lat_max, mean, sd
    );
    println!("Application protocol: {}", s.alpn.as_deref().unwrap_or("none"));
    println!("connections: {} ok, {} failed (handshake or setup)", s.conns_ok, s.conns_failed);
    println!(
        "client cpu: user {:.2} s, sys {:.2} s, {:.1} % of elapsed",
        user,
        sys,
        100.0 * (user + sys) / elapsed
    );
    std::process::exit(if s.succeeded > 0 { 0 } else { 1 });
}
