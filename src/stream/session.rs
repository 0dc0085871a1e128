//! One TCP session, through nginx's stream phases in order: post-accept
//! (the PROXY protocol header, `set_real_ip_from`), preaccess (`set`,
//! `limit_conn`), access (`allow`/`deny`), TLS termination, preread
//! (`ssl_preread`), content (`proxy_pass` or `return`), then the access
//! log line. Its status is nginx's: 200, 400 (a bad PROXY header), 403,
//! 500, 502, 503.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::conf::{Addr, Content, Server, StreamConf};
pub use super::errlog::Close;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::{ConnGuard, WorkerCtx, accept::Acceptor};

/// One try of an origin (`$upstream_*` list one entry per try).
pub struct Try {
    pub addr: Arc<str>,
    pub connect_ms: Option<u64>,
    pub first_byte_ms: Option<u64>,
    pub session_ms: Option<u64>,
    pub sent: u64,
    pub received: u64,
}

impl Try {
    /// A try of `addr` about to start.
    pub fn new(addr: Arc<str>) -> Try {
        Try { addr, connect_ms: None, first_byte_ms: None, session_ms: None, sent: 0, received: 0 }
    }

    /// A datagram session's one try of `addr`: UDP has no connect to time,
    /// so its connect time is 0 as nginx's.
    pub fn datagram(addr: Arc<str>) -> Try {
        Try { addr, connect_ms: Some(0), first_byte_ms: None, session_ms: None, sent: 0, received: 0 }
    }
}

#[derive(Default)]
pub struct UpInfo {
    pub tries: Vec<Try>,
}

pub struct Session {
    pub w: Rc<WorkerCtx>,
    pub conf: Arc<StreamConf>,
    pub addr: Arc<Addr>,
    pub id: u64,
    /// The client: the connection's peer, or a PROXY header's address
    /// when `set_real_ip_from` trusts the peer.
    pub client: Cell<SocketAddr>,
    /// The client is the unix-domain socket's peer (`listen unix:`), no
    /// PROXY header's address replaced it: `client` is a placeholder then.
    pub client_unix: Cell<bool>,
    /// What nginx prints after `unix:` for a unix client (`$remote_addr`,
    /// the error log's `client:`): the path a datagram client bound. Empty
    /// for a stream client (its socket has no name) and for an unnamed or
    /// abstract datagram one (nginx's `ngx_sock_ntop` stops at the NUL).
    pub unix_name: Box<[u8]>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub udp: bool,
    pub start: Instant,
    pub status: Cell<u16>,
    /// To the client.
    pub bytes_sent: Cell<u64>,
    /// From the client.
    pub bytes_received: Cell<u64>,
    pub up: RefCell<UpInfo>,
    /// `set` values by slot.
    pub vars: RefCell<Vec<Option<Vec<u8>>>>,
    /// Named captures of `map` regexes.
    pub named: RefCell<Vec<(Arc<str>, Vec<u8>)>>,
    pub proxy_protocol: Option<crate::proxy_protocol::ProxyAddrs>,
    pub preread: RefCell<Option<super::preread::Hello>>,
    pub tls: RefCell<Option<super::tls::TlsInfo>>,
    pub limit_status: Cell<&'static str>,
    /// The server `server_name` picked (by SNI or the preread name); until
    /// then, and without one, the address's default.
    pub srv: std::cell::OnceCell<Arc<Server>>,
    /// The worker's connection slot, which `pass` hands over with the
    /// connection (None for UDP, whose flows hold theirs).
    pub guard: RefCell<Option<ConnGuard>>,
    /// `pass` handed the connection on: the session ends without a log
    /// line, as nginx's does.
    pub passed: Cell<bool>,
    /// nginx's info line at the session's end, set by a relay with the
    /// origin that ended well (None: no line).
    pub close_line: Cell<Option<Close>>,
    /// The client is one `debug_connection` names: the session's lines go
    /// to every log (`log::debug`).
    pub debug: bool,
    /// The session zone that counted the connection as accepted and
    /// processing ([`Session::open_zone`]); the session itself counts in
    /// its final server's zone when it ends (`Drop`).
    pub zone: u32,
}

/// The session's counts go to the worker's metrics when it ends, however
/// it ends: its status and bytes in its server's zone, and the
/// processing gauge down in the zone that counted it open.
impl Drop for Session {
    fn drop(&mut self) {
        let m = &self.w.metrics;
        if let Some(c) = m.session_zone(self.zone) {
            c.closed();
        }
        if let Some(c) = m.session_zone(self.server().zone) {
            c.ended(self.status.get(), self.bytes_received.get(), self.bytes_sent.get());
        }
    }
}

impl Session {
    /// Counts a connection accepted on `addr` as opened in its default
    /// server's zone, which the session keeps (`zone`).
    pub fn open_zone(w: &WorkerCtx, addr: &Addr) -> u32 {
        let zone = addr.server.zone;
        if let Some(c) = w.metrics.session_zone(zone) {
            c.opened();
        }
        zone
    }

    /// A session's state as its phases start, for a client `peer` of
    /// `addr` (a datagram one when `udp`): no PROXY header, TLS, preread
    /// or tries yet, counted open in its address's zone.
    pub fn new(
        w: Rc<WorkerCtx>,
        conf: Arc<StreamConf>,
        addr: Arc<Addr>,
        peer: SocketAddr,
        local: SocketAddr,
        udp: bool,
    ) -> Session {
        let unix = addr.unix.is_some();
        Session {
            debug: crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), unix),
            zone: Session::open_zone(&w, &addr),
            id: w.next_serial(),
            w,
            conf,
            addr,
            client: Cell::new(peer),
            client_unix: Cell::new(unix),
            unix_name: Box::default(),
            peer,
            local,
            udp,
            start: crate::clock::mono(),
            status: Cell::new(200),
            bytes_sent: Cell::new(0),
            bytes_received: Cell::new(0),
            up: RefCell::new(UpInfo::default()),
            vars: RefCell::new(Vec::new()),
            named: RefCell::new(Vec::new()),
            proxy_protocol: None,
            preread: RefCell::new(None),
            tls: RefCell::new(None),
            limit_status: Cell::new(""),
            srv: std::cell::OnceCell::new(),
            guard: RefCell::new(None),
            passed: Cell::new(false),
            close_line: Cell::new(None),
        }
    }

    /// A TCP session for a connection accepted on `addr` from `peer`
    /// (descriptor `fd`), holding the worker's connection slot `guard`,
    /// with nginx's first lines about it.
    pub fn tcp(
        w: Rc<WorkerCtx>,
        conf: Arc<StreamConf>,
        addr: Arc<Addr>,
        peer: SocketAddr,
        local: SocketAddr,
        guard: ConnGuard,
        fd: i32,
    ) -> Session {
        let s = Session::new(w, conf, addr, peer, local, false);
        *s.guard.borrow_mut() = Some(guard);
        let debug = s.debug;
        let conf = &s.addr.server.conf;
        if s.addr.unix.is_some() {
            crate::log_debug!(conf.error_log, debug, "*{} accept: unix: fd:{}", s.id, fd);
        } else {
            crate::log_debug!(conf.error_log, debug, "*{} accept: {} fd:{}", s.id, peer, fd);
        }
        if let Some(path) = &s.addr.unix {
            log_to!(conf.error_log, Level::Info, "*{} client unix: connected to unix:{}", s.id, path);
        } else {
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client {}:{} connected to {}",
                s.id,
                peer.ip(),
                peer.port(),
                local
            );
        }
        s
    }

    /// The session's virtual server.
    pub fn server(&self) -> &Arc<Server> {
        self.srv.get().unwrap_or(&self.addr.server)
    }

    /// Picks the virtual server for a name the client sent (SNI), as
    /// nginx's `ngx_stream_find_virtual_server`: validated and lowercased,
    /// a regex name's captures become variables. Once per session.
    pub fn select(&self, raw: &[u8]) {
        if self.addr.names.is_empty() || self.srv.get().is_some() {
            return;
        }
        let Some(host) = crate::config::server_names::validate_host(raw) else { return };
        let Some((server, re)) = self.addr.names.find(&host) else { return };
        if let Some(re) = re
            && let Some(spans) = re.captures(&host)
        {
            let mut set = self.named.borrow_mut();
            for (i, name) in re.names() {
                let v = spans.get(*i).copied().flatten().map(|(a, b)| host[a..b].to_vec()).unwrap_or_default();
                set.retain(|(n, _)| n != name);
                set.push((name.clone(), v));
            }
        }
        let _ = self.srv.set(server.clone());
    }

    /// `allow`/`deny` for the client: `unix:` rules for a unix-domain one.
    pub fn access_denied(&self, rules: &crate::access_rules::Rules) -> bool {
        let v = if self.client_unix.get() { rules.check_unix() } else { rules.check(self.client.get().ip()) };
        v == Some(true)
    }

    /// The PROXY protocol line sent to an origin: `PROXY UNKNOWN` for a
    /// unix-domain client, which has no address to give (nginx's
    /// `ngx_proxy_protocol_write`).
    pub fn proxy_protocol_line(&self) -> Vec<u8> {
        if self.client_unix.get() || self.addr.unix.is_some() {
            return b"PROXY UNKNOWN\r\n".to_vec();
        }
        crate::proxy_protocol::v1_line(self.client.get(), self.local)
    }

    pub(super) fn finish(&self) {
        if self.passed.get() {
            return;
        }
        self.log_close();
        let conf = &self.server().conf;
        if !conf.access_log.is_empty() {
            let mut logs = self.w.logs.borrow_mut();
            logs.log_with(&conf.access_log, self, |d, line| write_dynamic(self, d, line));
            // The session's sockets may be closed already: the line goes
            // now, as nginx writes it, for whoever saw the close.
            logs.flush_pending();
        }
    }
}

/// An access log whose path has variables: opened, written and closed
/// per line.
fn write_dynamic(s: &Session, d: &crate::log::access_path::DynamicPath, line: &[u8]) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let rendered = d.template.render_to_vec(s);
    let path = d.prefix.join(std::path::Path::new(std::ffi::OsStr::from_bytes(&rendered)));
    let r = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(&path)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line));
    if let Err(e) = r {
        s.log(
            Level::Crit,
            format_args!(
                "open() \"{}\" failed ({}) while logging session",
                path.display(),
                crate::process::signal::os_error(&e)
            ),
        );
    }
}

/// The accept side of a stream listen.
#[derive(Clone)]
pub struct StreamAccept {
    pub conf: Arc<StreamConf>,
    pub index: usize,
}

impl Acceptor for StreamAccept {
    fn addr(&self) -> SocketAddr {
        self.conf.routes[self.index].own.addr
    }

    fn log(&self) -> &crate::log::error::ErrorLog {
        &self.conf.routes[self.index].own.server.conf.error_log
    }

    fn accepted(&self, w: &Rc<WorkerCtx>, stream: std::net::TcpStream, peer: SocketAddr, guard: ConnGuard) {
        let route = &self.conf.routes[self.index];
        let own = route.own.addr;
        let wildcard = route.own.unix.is_none() && own.ip().is_unspecified();
        let local = if wildcard { stream.local_addr().unwrap_or(own) } else { own };
        let addr = route.find(local).clone();
        if super::tcp_inline::eligible(&addr)
            && let Some(d) = super::tcp_inline::driver()
        {
            d.start(w, self.conf.clone(), addr, stream, peer, local, guard);
            return;
        }
        let fut = Box::pin(run(w.clone(), self.conf.clone(), addr, stream, peer, local, guard));
        tokio::task::spawn_local(crate::clock::per_poll(fut));
    }
}

async fn run(
    w: Rc<WorkerCtx>,
    sc: Arc<StreamConf>,
    addr: Arc<Addr>,
    stream: std::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    guard: ConnGuard,
) {
    let conf = &addr.server.conf;
    let _ = stream.set_nodelay(conf.tcp_nodelay);
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let Ok(mut tcp) = TcpStream::from_std(stream) else { return };
    let mut s = Session::tcp(w, sc, addr.clone(), peer, local, guard, fd);
    // post-accept: the PROXY protocol header.
    if addr.proxy_protocol {
        match Box::pin(crate::proxy_protocol::read_with(&mut tcp, conf.proxy_protocol_timeout, false)).await {
            Ok(pp) => {
                let trusted = if addr.unix.is_some() {
                    conf.real_ip_from.contains(&crate::cidr::Cidr::Unix)
                } else {
                    crate::cidr::any_contains(&conf.real_ip_from, peer.ip())
                };
                if let Some(p) = &pp
                    && trusted
                    && let Ok(ip) = p.src_addr.parse::<std::net::IpAddr>()
                {
                    s.client.set(SocketAddr::new(ip, p.src_port));
                    s.client_unix.set(false);
                }
                s.proxy_protocol = pp;
            }
            Err(e) => {
                s.log(Level::Error, format_args!("{e} while reading PROXY protocol"));
                s.status.set(400);
                s.finish();
                return;
            }
        }
    }
    let _hold = phases(&s, tcp).await;
    s.finish();
}

/// What nginx's stream sessions are doing while `limit_conn` and the
/// access rules run (`c->log->action`), which its error lines end with.
const INITIALIZING: &str = " while initializing session";

/// Preaccess (`set`, `limit_conn`) and access (`allow`/`deny`): the
/// `limit_conn` holds, or None when the session is refused (its status
/// set).
pub(super) fn preaccess_and_access(s: &Session) -> Option<Vec<super::limit::Hold>> {
    let srv = &s.server();
    let conf = &srv.conf;
    for (slot, t) in &srv.set {
        let v = t.render_to_vec(s);
        let mut vars = s.vars.borrow_mut();
        if vars.len() <= *slot {
            vars.resize(*slot + 1, None);
        }
        vars[*slot] = Some(v);
    }
    let mut holds = Vec::new();
    for (zone, limit) in &conf.limit_conn {
        let key = zone.key.render_to_vec(s);
        if key.is_empty() {
            continue;
        }
        if key.len() > 255 {
            s.log(Level::Error, format_args!("the value of the \"{}\" key is more than 255 bytes", zone.name));
            continue;
        }
        match super::limit::take(zone, key, *limit) {
            Some(h) => holds.push(h),
            None => {
                let dry = if conf.limit_conn_dry_run { ", dry run," } else { "" };
                s.log(
                    conf.limit_conn_log_level,
                    format_args!("limiting connections{dry} by zone \"{}\"{INITIALIZING}", zone.name),
                );
                if conf.limit_conn_dry_run {
                    s.limit_status.set("REJECTED_DRY_RUN");
                    continue;
                }
                s.limit_status.set("REJECTED");
                s.status.set(503);
                return None;
            }
        }
    }
    if !conf.limit_conn.is_empty() && s.limit_status.get().is_empty() {
        s.limit_status.set("PASSED");
    }
    if s.access_denied(&conf.access) {
        s.log(Level::Error, format_args!("access forbidden by rule{INITIALIZING}"));
        s.status.set(403);
        return None;
    }
    Some(holds)
}

/// Preaccess to content; returns the `limit_conn` holds, released after
/// the log line. The TLS handshake, OCSP and preread futures are boxed:
/// inline, the largest of them would size every session's task, a plain
/// one's too (and its memory is what an idle session costs).
async fn phases(s: &Session, mut tcp: TcpStream) -> Vec<super::limit::Hold> {
    let srv = &s.server();
    let conf = &srv.conf;
    let Some(holds) = preaccess_and_access(s) else { return Vec::new() };
    // TLS termination, then preread and content.
    if s.addr.ssl {
        let Some((tls, shared)) = Box::pin(handshake(s, tcp)).await else {
            s.status.set(500);
            return holds;
        };
        let mut tls = Box::new(tls);
        let mut info = super::tls::TlsInfo::of(tls.get_ref().1, &shared);
        if let (None, Some(o), Some(chain)) = (&info.cert_error, &shared.ocsp, tls.get_ref().1.peer_certificates()) {
            let log = |m: &str| s.log(Level::Error, format_args!("{m}"));
            info.cert_error = Box::pin(crate::tls::ocsp::client::check(o, chain, &log)).await.err();
        }
        let verify = s.server().conf.ssl.verify_client != crate::config::model::VerifyClient::Off;
        if let Some(why) = info.refusal(&shared, verify) {
            s.log(Level::Info, format_args!("{why} while SSL handshaking"));
            s.status.set(500);
            return holds;
        }
        *s.tls.borrow_mut() = Some(info);
        // The server the name chose decides; its bytes are decrypted ones.
        let pre = if s.server().conf.ssl_preread {
            match Box::pin(preread_from(s, Src::Read(&mut *tls))).await {
                Some(p) => p,
                None => return holds,
            }
        } else {
            Vec::new()
        };
        content(s, super::proxy::Client::Tls(tls), pre).await;
        return holds;
    }
    let pre = if conf.ssl_preread {
        match Box::pin(preread(s, &mut tcp)).await {
            Some(p) => p,
            None => return holds,
        }
    } else {
        Vec::new()
    };
    content(s, super::proxy::Client::Plain(tcp), pre).await;
    holds
}

/// TLS termination: the ClientHello's name picks the virtual server,
/// whose configuration (or the default server's, when it has none, as
/// nginx keeps the default's context) finishes the handshake. The name is
/// read by peeking with the `ssl_preread` parser, so a server with
/// `ssl_reject_handshake on` can answer with nginx's `unrecognized_name`
/// alert (rustls itself would send `access_denied`).
async fn handshake(
    s: &Session,
    mut tcp: TcpStream,
) -> Option<(tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>, Arc<crate::tls::ServerTls>)> {
    let timeout = s.server().conf.ssl_handshake_timeout;
    let run = async {
        if s.addr.names.len_hint() > 1 || s.addr.server.tls.as_ref().is_some_and(|t| t.reject) {
            let mut buf = Vec::new();
            loop {
                match super::preread::parse(&buf) {
                    super::preread::Parsed::Done(h) => {
                        s.select(&h.server_name);
                        break;
                    }
                    super::preread::Parsed::NotTls => break,
                    super::preread::Parsed::Need if buf.len() >= HELLO_MAX => break,
                    super::preread::Parsed::Need => {}
                }
                if !matches!(peek_more(&tcp, &mut buf, HELLO_MAX).await, Ok(true)) {
                    break;
                }
            }
        }
        let tls = s.server().tls.as_ref().or(s.addr.server.tls.as_ref())?;
        let cfg = match (&tls.cfg, tls.reject) {
            (Some(cfg), false) => cfg.clone(),
            _ => {
                // A fatal unrecognized_name alert, in a TLS 1.2 record.
                let _ = tcp.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x70]).await;
                s.log(Level::Info, format_args!("SSL handshake rejected (ssl_reject_handshake) while SSL handshaking"));
                return None;
            }
        };
        let accepted = if tls.shared.dynamic.is_none() {
            tokio_rustls::TlsAcceptor::from(cfg).accept(crate::tls::reneg::Watched::new(tcp)).await
        } else {
            // Certificates with variables: evaluated once the ClientHello
            // is read (`$ssl_server_name`), as in the http family.
            let watched = crate::tls::reneg::Watched::new(tcp);
            let start = match tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), watched).await
            {
                Ok(st) => st,
                Err(e) => {
                    s.log(Level::Info, format_args!("SSL_do_handshake() failed ({e}) while SSL handshaking"));
                    return None;
                }
            };
            let sni = start.client_hello().server_name().map(|n| n.to_ascii_lowercase());
            let conn = crate::tls::dynamic::Conn { peer: s.client.get(), local: s.local, sni: sni.as_deref() };
            match tls.shared.for_connection(cfg, &conn).await {
                Ok(cfg) => start.into_stream(cfg).await,
                Err(m) => {
                    s.log(Level::Error, format_args!("{m} while SSL handshaking"));
                    crate::tls::refuse(start).await;
                    return None;
                }
            }
        };
        match accepted {
            Ok(mut t) => {
                t.get_mut().0.arm();
                Some((t, tls.shared.clone()))
            }
            Err(e) => {
                s.log(Level::Info, format_args!("SSL_do_handshake() failed ({e}) while SSL handshaking"));
                None
            }
        }
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(r) => r,
        Err(_) => {
            s.log(Level::Info, format_args!("client timed out (110: Connection timed out) while SSL handshaking"));
            None
        }
    }
}

/// The most of a ClientHello peeked at for its name (a larger one goes on
/// with the default server).
const HELLO_MAX: usize = 16 * 1024 + 5;

/// Reads the ClientHello for `$ssl_preread_*`; the bytes read go to the
/// origin first. None: the session ends (buffer full: 400).
async fn preread(s: &Session, tcp: &mut TcpStream) -> Option<Vec<u8>> {
    preread_from(s, if s.addr.peek { Src::Peek(tcp) } else { Src::Read(tcp) }).await
}

/// Where preread takes the client's first bytes from: peeked at on the
/// socket (a `pass` address), or read (the socket, or the TLS stream a
/// terminating server made, as nginx's preread phase runs after its SSL
/// phase).
enum Src<'a> {
    Peek(&'a TcpStream),
    Read(&'a mut (dyn tokio::io::AsyncRead + Unpin)),
}

async fn preread_from(s: &Session, mut src: Src<'_>) -> Option<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let conf = &s.server().conf;
    let deadline = tokio::time::Instant::now() + conf.preread_timeout;
    let mut buf = Vec::with_capacity(conf.preread_buffer_size.min(16 * 1024));
    loop {
        match super::preread::parse(&buf) {
            super::preread::Parsed::Done(h) => {
                // nginx 1.25.5: the preread name picks the virtual server.
                s.select(&h.server_name);
                *s.preread.borrow_mut() = Some(h);
                break;
            }
            super::preread::Parsed::NotTls => break,
            super::preread::Parsed::Need => {}
        }
        if buf.len() >= conf.preread_buffer_size {
            s.log(Level::Error, format_args!("preread buffer full while prereading client data"));
            s.status.set(400);
            return None;
        }
        // A client that closes, fails or stays silent past
        // `preread_timeout` before its ClientHello is whole ends the
        // session there with 200, no origin asked (nginx's preread phase
        // finalizes with NGX_STREAM_OK then).
        let r = match &mut src {
            Src::Peek(tcp) => {
                match tokio::time::timeout_at(deadline, peek_more(tcp, &mut buf, conf.preread_buffer_size)).await {
                    Ok(Ok(true)) => {}
                    Ok(_) | Err(_) => return preread_ended(s, &buf),
                }
                continue;
            }
            Src::Read(r) => r,
        };
        let mut chunk = vec![0u8; (conf.preread_buffer_size - buf.len()).min(16 * 1024)];
        match tokio::time::timeout_at(deadline, r.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return preread_ended(s, &buf),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    if let Src::Peek(_) = src {
        // Peeked: the bytes are still the socket's, for whoever reads next.
        return Some(Vec::new());
    }
    s.bytes_received.set(buf.len() as u64);
    Some(buf)
}

/// The session's end in preread (see `preread_from`): status 200.
fn preread_ended(s: &Session, buf: &[u8]) -> Option<Vec<u8>> {
    s.bytes_received.set(buf.len() as u64);
    s.status.set(200);
    None
}

/// Peeks at what the client sent (MSG_PEEK, as nginx's preread does on a
/// `pass` address, so the connection can be handed on intact) until more
/// than `buf` holds has arrived: Ok(false) at EOF. A peek that finds no
/// more clears readiness, so the wait is for the next arrival, not a spin.
async fn peek_more(tcp: &TcpStream, buf: &mut Vec<u8>, limit: usize) -> std::io::Result<bool> {
    use std::os::fd::AsFd;
    let mut b = vec![0u8; limit];
    loop {
        tcp.readable().await?;
        let had = buf.len();
        let r = tcp.try_io(tokio::io::Interest::READABLE, || {
            let (n, _) = rustix::net::recv(tcp.as_fd(), &mut b[..], rustix::net::RecvFlags::PEEK)
                .map_err(std::io::Error::from)?;
            if n != 0 && n <= had {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        match r {
            Ok(0) => return Ok(false),
            Ok(n) => {
                buf.clear();
                buf.extend_from_slice(&b[..n]);
                return Ok(true);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

async fn content(s: &Session, mut client: super::proxy::Client, pre: Vec<u8>) {
    match &s.server().content {
        Content::Return(t) => {
            let v = t.render_to_vec(s);
            let r = match &mut client {
                super::proxy::Client::Plain(t) => t.write_all(&v).await,
                super::proxy::Client::Tls(t) => match t.write_all(&v).await {
                    Ok(()) => t.shutdown().await,
                    Err(e) => Err(e),
                },
            };
            if r.is_ok() {
                s.bytes_sent.set(v.len() as u64);
            }
        }
        Content::Proxy(pass) => {
            super::proxy::run(s, pass, client, pre).await;
        }
        Content::Pass(to) => pass(s, client, pre, to),
    }
}

/// `pass`: the connection goes to the listening socket of the address, as
/// nginx's `ngx_stream_pass_module` calls that listening's handler. What
/// was already read from it (preread without peeking, TLS) cannot go with
/// it: 500, as in nginx for read data.
fn pass(s: &Session, client: super::proxy::Client, pre: Vec<u8>, to: &super::conf::PassTo) {
    let addr = match to {
        super::conf::PassTo::Fixed(a) => *a,
        super::conf::PassTo::Vars(t) => {
            let v = t.render_to_vec(s);
            let text = String::from_utf8_lossy(&v);
            match text.parse::<SocketAddr>() {
                Ok(a) => a,
                Err(_) => {
                    s.log(Level::Error, format_args!("invalid pass address \"{text}\""));
                    s.status.set(500);
                    return;
                }
            }
        }
    };
    if !pre.is_empty() {
        s.log(Level::Error, format_args!("cannot pass connection with preread data"));
        s.status.set(500);
        return;
    }
    let Some(handoff) = s.w.handoff_to(addr) else {
        s.log(Level::Error, format_args!("port {} not found while passing connection", addr));
        s.status.set(500);
        return;
    };
    // A TLS connection goes on with its handshake done (nginx passes the
    // connection with its SSL state).
    let handed = match client {
        super::proxy::Client::Plain(t) => t.into_std().map(crate::worker::Handed::Plain),
        super::proxy::Client::Tls(t) => Ok(crate::worker::Handed::Tls(t)),
    };
    let (Ok(handed), Some(guard)) = (handed, s.guard.borrow_mut().take()) else {
        s.status.set(500);
        return;
    };
    s.passed.set(true);
    handoff(&s.w, handed, s.peer, guard);
}
