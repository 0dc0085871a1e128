//! hsload — a cheap TLS full-handshake load generator for `bench/run` (workload tls2).
//!
//! **This is a load generator, never a real TLS client.** It accepts any
//! certificate and any handshake signature: its rustls verifier (see
//! [`NoVerify`]) skips certificate-chain verification *and* the verification
//! of the server's CertificateVerify / ServerKeyExchange signature. That is
//! the point: with an ECDSA P-256 certificate, verifying the server's
//! signature costs the client more CPU than signing costs the server, so a
//! verifying client (ab/OpenSSL) on one core saturates long before the server
//! on its core does, and the benchmark measures the client. Skipping the
//! verification leaves the client with TCP, ECDHE and symmetric crypto only.
//! It only connects to loopback addresses (127.0.0.0/8, ::1) and every run is
//! bounded in time (`-d`, at most 3600 s) and/or in requests (`-n`).
//!
//! Each of `-c` concurrent workers (default 100) loops: TCP connect, a full
//! TLS handshake (TLS 1.3, or TLS 1.2 with `--tls12`; key exchange X25519
//! unless `--group` says otherwise: the TLS 1.3 key share is for that group,
//! and supported_groups lists it, then X25519, secp256r1, secp384r1 — no
//! post-quantum hybrids; a HelloRetryRequest would be counted), ALPN
//! `http/1.1`, then
//! `GET PATH HTTP/1.1\r\nHost: HOST:PORT\r\nConnection: close\r\n\r\n`, reads
//! the whole response until the server closes the connection, checks that it
//! starts with `HTTP/1.1 200` and that the body matches its Content-Length,
//! and closes. The request is handed to rustls before the handshake, so in
//! TLS 1.3 it leaves in the same write as the client's Finished (as browsers
//! do). The client key pair of each group is generated once per run and
//! reused ([`ReusedKeyShare`]; `--fresh-key-share` for a new one per
//! handshake): the server's work is the same either way.
//!
//! Session resumption is impossible: the ClientConfig uses
//! `Resumption::disabled()` (a session store that stores nothing), so every
//! handshake is a full one; resumed handshakes would be counted as errors.
//! (By default the client still *asks* for a TLS 1.2 session ticket, as
//! OpenSSL clients such as ab and browsers do, so the server does the same
//! work as for them; the ticket is thrown away. `--no-tls12-ticket-request`
//! turns the request off.)
//!
//! Single-threaded (a current-thread tokio runtime): the harness pins it to
//! one core. Output (stdout), made to be parsed:
//!
//! ```text
//! TLS: TLSv1.3 TLS_AES_256_GCM_SHA384 X25519 alpn=http/1.1 handshake=full
//! requests: 12345 ok, 0 errors, elapsed 3.001 s, 4113.6 req/s
//! errors: connect 0, tls 0, write 0, read 0, status 0, length 0, timeout 0, resumed 0
//! handshakes: 12345 full, 0 hrr, 0 resumed
//! ocsp: 0 stapled
//! latency: p50 20.12 ms, p99 35.40 ms, max 50.00 ms
//! bytes: 2765280 received (decrypted), 0 responses closed without close_notify
//! client cpu: user 1.20 s, sys 0.80 s, 66.6 % of elapsed
//! ```
//!
//! The `TLS:` line describes the first completed handshake. When a
//! request fails, the first error of each kind is printed to stderr. Exit
//! status: 0 if at least one request succeeded, 1 if none did, 2 on a usage
//! error.

use std::cell::Cell;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::aws_lc_rs::agreement;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{aws_lc_rs, ActiveKeyExchange, CryptoProvider, SharedSecret, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::NamedGroup;
use rustls::{ClientConfig, DigitallySignedStruct, HandshakeKind, ProtocolVersion, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const MAX_DURATION_S: f64 = 3600.0;
const MAX_REQUESTS: u64 = 100_000_000;
const MAX_CONNECTIONS: usize = 20_000;
/// Per-request latency samples kept for the percentiles, over all workers.
const MAX_SAMPLES: usize = 2_000_000;

const USAGE: &str = "\
usage: hsload [options] https://HOST:PORT/PATH

Cheap TLS full-handshake load generator (bench/run workload tls2). Skips ALL
certificate and handshake-signature verification: a load generator, never a
real client. Loopback addresses only.

options:
  -c N                  concurrent connections (default 100)
  -d SECONDS            run for this long (default 10 unless -n is given; max 3600)
  -n N                  stop after N requests (with -d: whichever comes first)
  --tls12               TLS 1.2 only (default: TLS 1.3 only)
  --tls13               TLS 1.3 only (the default)
  --group NAME          key exchange: x25519 (default), secp256r1, secp384r1
  --fresh-key-share     a new client key pair per handshake, as a real client
                        (default: one per run, reused: the server's work is
                        the same, the client saves a key generation)
  --no-tls12-ticket-request
                        do not ask for a TLS 1.2 session ticket (default: ask,
                        as OpenSSL clients do; it is never used)
  --timeout SECONDS     per request (connect to end of response), default 10
  --sni NAME            send NAME in SNI and in Host (the connection still goes
                        to the URL's loopback address), e.g. for a server
                        that has no certificate for an IP address
  -V, --version         print the version
  -h, --help            this text
";

// ---------------------------------------------------------------------------
// The verifier that verifies nothing.
// ---------------------------------------------------------------------------

/// Handshakes whose server sent an OCSP response (`ocsp:` line).
static STAPLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Accepts every certificate and every handshake signature. Only acceptable
/// because hsload is a load generator talking to a server on loopback.
#[derive(Debug)]
struct NoVerify {
    schemes: Vec<SignatureScheme>,
}

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // rustls always sends the status_request extension; count the
        // handshakes where the server stapled a response (not checked).
        if !ocsp_response.is_empty() {
            STAPLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
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
        // Advertise what a normal aws-lc-rs client would, so the server picks
        // the same signature scheme as for a verifying client.
        self.schemes.clone()
    }
}

// ---------------------------------------------------------------------------
// A client key share made once and reused by every connection.
// ---------------------------------------------------------------------------

/// A key-exchange group whose client key pair is generated once at start-up
/// and reused for every handshake, instead of a fresh ephemeral key per
/// connection: this saves the client a key generation (a scalar
/// multiplication) per handshake. The server cannot tell and does exactly
/// the same work (its own fresh key pair, one key agreement). Fine for a load
/// generator, never for a real client (no forward secrecy between its
/// connections). `--fresh-key-share` uses rustls's ordinary groups instead.
#[derive(Debug)]
struct ReusedKeyShare(Arc<KeyPair>);

struct KeyPair {
    name: NamedGroup,
    alg: &'static agreement::Algorithm,
    key: agreement::PrivateKey,
    pub_key: Vec<u8>,
}

impl fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyPair({:?})", self.name)
    }
}

impl ReusedKeyShare {
    /// A new key pair, for the whole run (the provider wants 'static groups).
    fn leak(name: NamedGroup, alg: &'static agreement::Algorithm) -> &'static Self {
        let key = agreement::PrivateKey::generate(alg).expect("key generation");
        let pub_key = key.compute_public_key().expect("public key").as_ref().to_vec();
        Box::leak(Box::new(Self(Arc::new(KeyPair { name, alg, key, pub_key }))))
    }
}

impl SupportedKxGroup for ReusedKeyShare {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, rustls::Error> {
        Ok(Box::new(ReusedActive(self.0.clone())))
    }

    fn name(&self) -> NamedGroup {
        self.0.name
    }
}

struct ReusedActive(Arc<KeyPair>);

impl ActiveKeyExchange for ReusedActive {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, rustls::Error> {
        agreement::agree(
            &self.0.key,
            agreement::UnparsedPublicKey::new(self.0.alg, peer_pub_key),
            rustls::Error::General("key agreement failed (bad server key share)".into()),
            |secret| Ok(SharedSecret::from(secret)),
        )
    }

    fn pub_key(&self) -> &[u8] {
        &self.0.pub_key
    }

    fn group(&self) -> NamedGroup {
        self.0.name
    }
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

struct Opts {
    conns: usize,
    duration: Option<f64>,
    requests: Option<u64>,
    tls12: bool,
    group: NamedGroup,
    fresh_key_share: bool,
    tls12_ticket_request: bool,
    timeout: Duration,
    sni: Option<String>,
    host: String,
    port: u16,
    path: String,
}

fn usage_error(msg: &str) -> ! {
    eprintln!("hsload: {msg}\n\n{USAGE}");
    std::process::exit(2);
}

fn parse_args() -> Opts {
    let mut args = std::env::args().skip(1);
    let mut conns = 100usize;
    let mut duration = None;
    let mut requests = None;
    let mut tls12 = false;
    let mut group = NamedGroup::X25519;
    let mut fresh_key_share = false;
    let mut tls12_ticket_request = true;
    let mut timeout = 10.0f64;
    let mut sni = None;
    let mut url = None;
    fn value(args: &mut impl Iterator<Item = String>, opt: &str) -> String {
        args.next().unwrap_or_else(|| usage_error(&format!("{opt} needs a value")))
    }
    fn num<T: std::str::FromStr>(s: &str, opt: &str) -> T {
        s.parse().unwrap_or_else(|_| usage_error(&format!("bad value for {opt}: {s:?}")))
    }
    while let Some(a) = args.next() {
        match a.as_str() {
            "-c" => conns = num(&value(&mut args, "-c"), "-c"),
            "-d" => duration = Some(num::<f64>(&value(&mut args, "-d"), "-d")),
            "-n" => requests = Some(num::<u64>(&value(&mut args, "-n"), "-n")),
            "--tls12" => tls12 = true,
            "--tls13" => tls12 = false,
            "--group" => {
                group = match value(&mut args, "--group").to_ascii_lowercase().as_str() {
                    "x25519" => NamedGroup::X25519,
                    "secp256r1" | "p-256" | "p256" | "prime256v1" => NamedGroup::secp256r1,
                    "secp384r1" | "p-384" | "p384" => NamedGroup::secp384r1,
                    g => usage_error(&format!("unknown --group {g:?}")),
                }
            }
            "--no-tls12-ticket-request" => tls12_ticket_request = false,
            "--fresh-key-share" => fresh_key_share = true,
            "--timeout" => timeout = num(&value(&mut args, "--timeout"), "--timeout"),
            "--sni" => sni = Some(value(&mut args, "--sni")),
            "-V" | "--version" => {
                println!("hsload {} (rustls 0.23, aws-lc-rs provider)", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            s if s.starts_with('-') => usage_error(&format!("unknown option {s}")),
            s => {
                if url.replace(s.to_string()).is_some() {
                    usage_error("more than one URL");
                }
            }
        }
    }
    let url = url.unwrap_or_else(|| usage_error("no URL"));
    if conns == 0 || conns > MAX_CONNECTIONS {
        usage_error(&format!("-c must be 1..={MAX_CONNECTIONS}"));
    }
    if let Some(d) = duration {
        if !(d > 0.0 && d <= MAX_DURATION_S) {
            usage_error(&format!("-d must be > 0 and <= {MAX_DURATION_S}"));
        }
    }
    if let Some(n) = requests {
        if n == 0 || n > MAX_REQUESTS {
            usage_error(&format!("-n must be 1..={MAX_REQUESTS}"));
        }
    }
    if duration.is_none() && requests.is_none() {
        duration = Some(10.0);
    }
    if !(timeout > 0.0 && timeout <= 600.0) {
        usage_error("--timeout must be > 0 and <= 600");
    }
    let rest = url.strip_prefix("https://").unwrap_or_else(|| usage_error("the URL must start with https://"));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = if let Some(h) = authority.strip_prefix('[') {
        // [::1]:port
        let (h, p) = h.split_once(']').unwrap_or_else(|| usage_error("bad [IPv6] host"));
        (h.to_string(), p.strip_prefix(':').map(|p| num::<u16>(p, "port")).unwrap_or(443))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), num::<u16>(p, "port")),
            None => (authority.to_string(), 443),
        }
    };
    if host.is_empty() {
        usage_error("no host in the URL");
    }
    Opts {
        conns,
        duration,
        requests,
        tls12,
        group,
        fresh_key_share,
        tls12_ticket_request,
        timeout: Duration::from_secs_f64(timeout),
        sni,
        host,
        port,
        path,
    }
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrKind {
    Connect,
    Tls,
    Write,
    Read,
    Status,
    Length,
    Timeout,
    Resumed,
}

const ERR_KINDS: [ErrKind; 8] = [
    ErrKind::Connect,
    ErrKind::Tls,
    ErrKind::Write,
    ErrKind::Read,
    ErrKind::Status,
    ErrKind::Length,
    ErrKind::Timeout,
    ErrKind::Resumed,
];

impl fmt::Display for ErrKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ErrKind::Connect => "connect",
            ErrKind::Tls => "tls",
            ErrKind::Write => "write",
            ErrKind::Read => "read",
            ErrKind::Status => "status",
            ErrKind::Length => "length",
            ErrKind::Timeout => "timeout",
            ErrKind::Resumed => "resumed",
        })
    }
}

#[derive(Default)]
struct Stats {
    ok: u64,
    errors: [u64; ERR_KINDS.len()],
    full: u64,
    hrr: u64,
    resumed: u64,
    /// Responses that ended without a TLS close_notify (complete, so not an error).
    unclean_close: u64,
    bytes: u64,
    /// Latency of successful requests, microseconds.
    lat_us: Vec<u32>,
}

impl Stats {
    fn merge(&mut self, o: Stats) {
        self.ok += o.ok;
        for (a, b) in self.errors.iter_mut().zip(o.errors) {
            *a += b;
        }
        self.full += o.full;
        self.hrr += o.hrr;
        self.resumed += o.resumed;
        self.unclean_close += o.unclean_close;
        self.bytes += o.bytes;
        self.lat_us.extend(o.lat_us);
    }
}

struct ReqError {
    kind: ErrKind,
    msg: String,
}

fn err(kind: ErrKind, msg: impl fmt::Display) -> ReqError {
    ReqError { kind, msg: msg.to_string() }
}

// ---------------------------------------------------------------------------
// The load
// ---------------------------------------------------------------------------

struct Ctx {
    addr: SocketAddr,
    server_name: ServerName<'static>,
    connector: TlsConnector,
    request: Vec<u8>,
    timeout: Duration,
    deadline: Option<Instant>,
    max_requests: Option<u64>,
    started: Cell<u64>,
    tls_printed: Cell<bool>,
    err_printed: Cell<u32>,
    samples_per_worker: usize,
}

struct Done {
    kind: Option<HandshakeKind>,
    bytes: usize,
    clean_close: bool,
}

fn version_name(v: ProtocolVersion) -> String {
    match v {
        ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        v => format!("{v:?}"),
    }
}

fn describe(conn: &rustls::ClientConnection) -> String {
    let version = conn.protocol_version().map(version_name).unwrap_or_else(|| "?".into());
    // IANA names (which OpenSSL also uses for the TLS 1.3 suites).
    let suite = conn
        .negotiated_cipher_suite()
        .map(|s| format!("{:?}", s.suite()).replacen("TLS13_", "TLS_", 1))
        .unwrap_or_else(|| "?".into());
    let group = conn.negotiated_key_exchange_group().map(|g| format!("{:?}", g.name())).unwrap_or_else(|| "?".into());
    let alpn = conn.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_else(|| "none".into());
    let kind = match conn.handshake_kind() {
        Some(HandshakeKind::Full) => "full",
        Some(HandshakeKind::FullWithHelloRetryRequest) => "full-with-hrr",
        Some(HandshakeKind::Resumed) => "resumed",
        None => "?",
    };
    format!("{version} {suite} {group} alpn={alpn} handshake={kind}")
}

/// Checks a complete response: `HTTP/1.1 200`, and a body of Content-Length
/// bytes if the header is there.
fn check_response(buf: &[u8]) -> Result<(), ReqError> {
    if !buf.starts_with(b"HTTP/1.1 200") {
        let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
        return Err(err(
            ErrKind::Status,
            format!("status line {:?} ({} bytes received)", String::from_utf8_lossy(line).trim_end(), buf.len()),
        ));
    }
    let Some(hend) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Err(err(ErrKind::Length, "response header not terminated"));
    };
    let head = &buf[..hend];
    for line in head.split(|&b| b == b'\n') {
        let line = String::from_utf8_lossy(line);
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                let want: usize =
                    value.trim().parse().map_err(|_| err(ErrKind::Length, format!("bad Content-Length {value:?}")))?;
                let got = buf.len() - hend - 4;
                if got != want {
                    return Err(err(ErrKind::Length, format!("body of {got} bytes, Content-Length {want}")));
                }
            }
        }
    }
    Ok(())
}

async fn one_request(ctx: &Ctx, buf: &mut Vec<u8>) -> Result<Done, ReqError> {
    let tcp = TcpStream::connect(ctx.addr).await.map_err(|e| err(ErrKind::Connect, e))?;
    let _ = tcp.set_nodelay(true);
    // The request is handed to rustls before the handshake: it is sent as
    // soon as the handshake allows, in the same write as the client's last
    // handshake flight when possible (TLS 1.3: with the client Finished), as
    // browsers do. This saves a write and a packet on each side.
    let mut tls = ctx
        .connector
        .connect_with(ctx.server_name.clone(), tcp, |conn| {
            use std::io::Write;
            let _ = conn.writer().write_all(&ctx.request);
        })
        .await
        .map_err(|e| err(ErrKind::Tls, e))?;
    let kind = tls.get_ref().1.handshake_kind();
    if !ctx.tls_printed.get() {
        ctx.tls_printed.set(true);
        println!("TLS: {}", describe(tls.get_ref().1));
    }
    // Normally a no-op: the handshake future has written everything.
    tls.flush().await.map_err(|e| err(ErrKind::Write, e))?;
    buf.clear();
    let clean_close = loop {
        if buf.capacity() - buf.len() < 2048 {
            buf.reserve(8192);
        }
        match tls.read_buf(buf).await {
            Ok(0) => break true,
            Ok(_) => {}
            // The server closed the TCP connection without a close_notify:
            // fine if the response is complete (checked below).
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break false,
            Err(e) => return Err(err(ErrKind::Read, format!("{e} after {} bytes", buf.len()))),
        }
    };
    check_response(buf)?;
    if kind == Some(HandshakeKind::Resumed) {
        return Err(err(ErrKind::Resumed, "the handshake was a resumption"));
    }
    Ok(Done { kind, bytes: buf.len(), clean_close })
    // Dropping `tls` closes the socket; the server has closed its side already.
}

async fn worker(ctx: Rc<Ctx>) -> Stats {
    let mut st = Stats::default();
    let mut buf = Vec::with_capacity(16384);
    loop {
        if let Some(d) = ctx.deadline {
            if Instant::now() >= d {
                break;
            }
        }
        if let Some(n) = ctx.max_requests {
            if ctx.started.get() >= n {
                break;
            }
        }
        ctx.started.set(ctx.started.get() + 1);
        let t0 = Instant::now();
        let res = match tokio::time::timeout(ctx.timeout, one_request(&ctx, &mut buf)).await {
            Ok(r) => r,
            Err(_) => Err(err(ErrKind::Timeout, format!("no complete response within {:?}", ctx.timeout))),
        };
        match res {
            Ok(done) => {
                st.ok += 1;
                st.bytes += done.bytes as u64;
                match done.kind {
                    Some(HandshakeKind::FullWithHelloRetryRequest) => st.hrr += 1,
                    Some(HandshakeKind::Resumed) => st.resumed += 1,
                    _ => st.full += 1,
                }
                if !done.clean_close {
                    st.unclean_close += 1;
                }
                // Bounded memory: samples past the cap are not kept (the
                // percentiles then describe the first part of the run).
                if st.lat_us.len() < ctx.samples_per_worker {
                    st.lat_us.push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                }
            }
            Err(e) => {
                let i = ERR_KINDS.iter().position(|k| *k == e.kind).unwrap();
                if st.errors[i] == 0 && ctx.err_printed.get() & (1 << i) == 0 {
                    ctx.err_printed.set(ctx.err_printed.get() | (1 << i));
                    eprintln!("hsload: first {} error: {}", e.kind, e.msg);
                }
                st.errors[i] += 1;
                if e.kind == ErrKind::Resumed {
                    st.resumed += 1;
                }
            }
        }
    }
    st
}

fn percentile_ms(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

fn self_cpu() -> (f64, f64) {
    // SAFETY: getrusage only writes the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        (t(ru.ru_utime), t(ru.ru_stime))
    }
}

fn main() {
    let o = parse_args();

    // Loopback only.
    let addrs: Vec<SocketAddr> = (o.host.as_str(), o.port)
        .to_socket_addrs()
        .unwrap_or_else(|e| usage_error(&format!("cannot resolve {}: {e}", o.host)))
        .collect();
    let Some(&addr) = addrs.first() else {
        usage_error(&format!("{} resolves to no address", o.host));
    };
    if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
        usage_error(&format!(
            "{} resolves to {}, which is not a loopback address; hsload only targets loopback",
            o.host,
            a.ip()
        ));
    }

    let mut provider: CryptoProvider = aws_lc_rs::default_provider();
    // The chosen group first (the only key share a TLS 1.3 ClientHello
    // carries), then the other classic groups, as OpenSSL offers them: a TLS
    // 1.2 server with a P-256 certificate (OpenSSL) refuses a client whose
    // supported_groups lack secp256r1. No post-quantum hybrids: Debian's
    // nginx (OpenSSL 3.0) has none, and both servers must see the same offer.
    let mut classic: Vec<(NamedGroup, &'static dyn SupportedKxGroup, &'static agreement::Algorithm)> = vec![
        (NamedGroup::X25519, aws_lc_rs::kx_group::X25519, &agreement::X25519),
        (NamedGroup::secp256r1, aws_lc_rs::kx_group::SECP256R1, &agreement::ECDH_P256),
        (NamedGroup::secp384r1, aws_lc_rs::kx_group::SECP384R1, &agreement::ECDH_P384),
    ];
    classic.sort_by_key(|(name, _, _)| *name != o.group);
    provider.kx_groups =
        classic
            .into_iter()
            .map(|(name, fresh, alg)| {
                if o.fresh_key_share {
                    fresh
                } else {
                    ReusedKeyShare::leak(name, alg) as &'static dyn SupportedKxGroup
                }
            })
            .collect();
    let schemes = provider.signature_verification_algorithms.supported_schemes();
    let versions: &[&rustls::SupportedProtocolVersion] =
        if o.tls12 { &[&rustls::version::TLS12] } else { &[&rustls::version::TLS13] };
    let mut config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .expect("protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify { schemes }))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // A store that stores nothing: no handshake can be resumed.
    config.resumption = Resumption::disabled().tls12_resumption(if o.tls12_ticket_request {
        Tls12Resumption::SessionIdOrTickets
    } else {
        Tls12Resumption::Disabled
    });

    let name = o.sni.clone().unwrap_or_else(|| o.host.clone());
    let server_name =
        ServerName::try_from(name.clone()).unwrap_or_else(|e| usage_error(&format!("bad host name {name:?}: {e}")));
    let host_header =
        if name.contains(':') { format!("[{}]:{}", name, o.port) } else { format!("{}:{}", name, o.port) };
    let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", o.path, host_header).into_bytes();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let local = tokio::task::LocalSet::new();
    let start = Instant::now();
    let ctx = Rc::new(Ctx {
        addr,
        server_name,
        connector: TlsConnector::from(Arc::new(config)),
        request,
        timeout: o.timeout,
        deadline: o.duration.map(|d| start + Duration::from_secs_f64(d)),
        max_requests: o.requests,
        started: Cell::new(0),
        tls_printed: Cell::new(false),
        err_printed: Cell::new(0),
        samples_per_worker: (MAX_SAMPLES / o.conns).max(1),
    });
    let total = local.block_on(&rt, async {
        let handles: Vec<_> = (0..o.conns).map(|_| tokio::task::spawn_local(worker(ctx.clone()))).collect();
        let mut total = Stats::default();
        for h in handles {
            total.merge(h.await.expect("worker panicked"));
        }
        total
    });
    let elapsed = start.elapsed().as_secs_f64();
    let (user, sys) = self_cpu();

    let nerr: u64 = total.errors.iter().sum();
    if !ctx.tls_printed.get() {
        println!("TLS: none (no handshake completed)");
    }
    println!(
        "requests: {} ok, {} errors, elapsed {:.3} s, {:.1} req/s",
        total.ok,
        nerr,
        elapsed,
        total.ok as f64 / elapsed
    );
    println!(
        "errors: {}",
        ERR_KINDS.iter().zip(total.errors).map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
    );
    println!("handshakes: {} full, {} hrr, {} resumed", total.full, total.hrr, total.resumed);
    println!("ocsp: {} stapled", STAPLED.load(std::sync::atomic::Ordering::Relaxed));
    let mut lat = total.lat_us;
    lat.sort_unstable();
    println!(
        "latency: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile_ms(&lat, 50.0),
        percentile_ms(&lat, 99.0),
        lat.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    println!(
        "bytes: {} received (decrypted), {} responses closed without close_notify",
        total.bytes, total.unclean_close
    );
    println!("client cpu: user {:.2} s, sys {:.2} s, {:.1} % of elapsed", user, sys, 100.0 * (user + sys) / elapsed);
    std::process::exit(if total.ok > 0 { 0 } else { 1 });
}
