//! `proxy_pass`: the origin for a session, picked by the upstream core's
//! balancer (`crate::upstream::peers`, per worker), connected within
//! `proxy_connect_timeout` and retried on the next peer as
//! `proxy_next_upstream*` allow; then the PROXY header (`proxy_protocol
//! on`), TLS (`proxy_ssl on`), and the relay until one side closes.

use std::net::SocketAddr;
use std::sync::Arc;

use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::conf::Pass;
use super::relay::{self, Counters, End};
use super::session::{Close, Session};
use super::upstream::{Tries, pick_in};
use crate::config::proxy::Upstream;
use crate::log::error::Level;
use crate::upstream::peers::Picked;

/// The client's side of a session.
pub enum Client {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>>),
}

/// The origin's side.
enum Origin {
    Tcp(TcpStream),
    Unix(tokio::net::UnixStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The upstream a `proxy_pass` with variables names: a block of this
/// stream, an address, or a host name looked up through `resolver` (an
/// upstream of every address it has, in the answer's order, round robin).
async fn resolve(s: &Session, t: &crate::variables::Template) -> Result<Arc<Upstream>, (u16, String)> {
    let v = t.render_to_vec(s);
    let name = String::from_utf8_lossy(&v).into_owned();
    if let Some(u) = s.conf.upstreams.iter().find(|u| !u.implicit && u.name == name) {
        return Ok(u.clone());
    }
    let is_addr = |h: &str| h.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_ok();
    let mut u = if name.starts_with("unix:") || is_addr(name.rsplit_once(':').map_or(name.as_str(), |(h, _)| h)) {
        super::build::implicit_upstream(&name, usize::MAX).map_err(|e| (500, e))?
    } else {
        let Some((host, port)) = name.rsplit_once(':').and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?))) else {
            return Err((500, format!("no port in upstream \"{name}\"")));
        };
        let rc = &s.server().conf.resolver;
        let Some(r) = &rc.resolver else { return Err((500, format!("no resolver defined to resolve {host}"))) };
        let addrs = crate::resolver::lookup(&s.w.dns, r, rc.timeout, host)
            .await
            .map_err(|why| (502, format!("{host} could not be resolved ({why})")))?;
        let first = std::net::SocketAddr::new(addrs[0], port).to_string();
        let mut u = super::build::implicit_upstream(&first, usize::MAX).map_err(|e| (500, e))?;
        u.name = name.clone();
        u.peers = addrs
            .iter()
            .map(|ip| {
                let a = std::net::SocketAddr::new(*ip, port);
                crate::config::proxy::PeerConf::new(a, None, a.to_string())
            })
            .collect();
        u
    };
    // nginx gives an address resolved per session no failure accounting.
    for p in &mut u.peers {
        p.max_fails = 0;
    }
    Ok(Arc::new(u))
}

/// One peer for a datagram session (no retries: UDP has no connect to
/// fail): the upstream, the peer's index and settings.
pub async fn pick_one(s: &Session, pass: &Pass) -> Option<(Arc<Upstream>, Picked, crate::config::proxy::PeerConf)> {
    let u = match pass {
        Pass::Fixed(u) => u.clone(),
        Pass::Vars(t) => match Box::pin(resolve(s, t)).await {
            Ok(u) => u,
            Err((status, e)) => {
                s.log_upstream(Level::Error, format_args!("{e}"), None);
                s.status.set(status);
                return None;
            }
        },
    };
    pick_in(s, u)
}

/// Proxies the session to `pass`'s upstream; None when it ended before
/// an origin was connected (its status and lines set).
pub async fn run(s: &Session, pass: &Pass, client: Client, pre: Vec<u8>) -> Option<()> {
    let conf = &s.server().conf;
    let p = &conf.proxy;
    let u = match pass {
        Pass::Fixed(u) => u.clone(),
        // Boxed, as the rarer paths below: a session's future is as large
        // as its largest state.
        Pass::Vars(t) => match Box::pin(resolve(s, t)).await {
            Ok(u) => u,
            Err((status, e)) => {
                s.log_upstream(Level::Error, format_args!("{e}"), None);
                s.status.set(status);
                return None;
            }
        },
    };
    // A client certificate with variables, loaded once for the session:
    // one that does not load ends it with 500 (nginx's
    // NGX_STREAM_INTERNAL_SERVER_ERROR), no origin tried.
    let tls = match super::tls::session_client(p, s, &s.w.tls_clients).await {
        Ok(t) => t,
        Err(e) => {
            s.log_upstream(Level::Error, format_args!("{e} while connecting to upstream"), None);
            s.status.set(500);
            return None;
        }
    };
    let mut tries = Tries::new(s, u);
    let (origin, peer, connected_at) = loop {
        let i = tries.pick(s)?;
        let t0 = crate::clock::mono();
        match connect(s, &tries.u.name, tries.peer(&i), p, tls.as_ref()).await {
            Ok(o) => {
                tries.connected(s, &i, t0, || o.local());
                break (o, i, t0);
            }
            Err(e) => {
                if !tries.failed(s, &i, &e) {
                    return None;
                }
            }
        }
    };
    let end = relay_session(s, client, origin, pre, connected_at).await;
    ended(s, Some(&tries.peer(&peer).name), end);
    tries.done(s, &peer);
    Some(())
}

/// nginx's lines for how a relay with the origin `name` ended.
pub(super) fn ended(s: &Session, name: Option<&str>, end: End) {
    match end {
        End::Closed { upstream } => s.close_line.set(Some(Close::Disconnected { upstream })),
        // nginx ends a timed-out relay with this line alone.
        End::TimedOut => {
            let msg = format_args!("connection timed out (110: Connection timed out) while proxying connection");
            s.log_upstream(Level::Info, msg, name)
        }
        // The origin's errors are errors (its connection logs at `error`),
        // the client's are the client's business (`info`, as nginx logs
        // a reset or a broken pipe). A read that failed ends the session
        // as that side's close would; a send that failed, at once.
        End::Error { msg, upstream, sending } => {
            let level = if upstream { Level::Error } else { Level::Info };
            s.log_upstream(level, format_args!("{msg} while {}", End::action(upstream, sending)), name);
            if !sending {
                s.close_line.set(Some(Close::Disconnected { upstream }));
            }
        }
    }
}

impl Origin {
    /// The local end as nginx's "proxy LOCAL connected to" line shows it
    /// (`ngx_connection_local_sockaddr`): `127.0.0.1:41234`, or `unix:`
    /// for an unnamed unix socket.
    fn local(&self) -> String {
        let tcp = |t: &TcpStream| t.local_addr().map_or_else(|_| "unix:".to_string(), |a| a.to_string());
        match self {
            Origin::Tcp(t) => tcp(t),
            Origin::Tls(t) => tcp(t.get_ref().0),
            Origin::Unix(_) => "unix:".to_string(),
        }
    }
}

/// A failed connection to a peer: the reason, and whether it was the TLS
/// handshake that failed, which nginx's log line names ("while SSL
/// handshaking to upstream" rather than "while connecting to upstream").
struct ConnectError {
    why: String,
    handshaking: bool,
}

impl From<String> for ConnectError {
    fn from(why: String) -> ConnectError {
        ConnectError { why, handshaking: false }
    }
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let during = if self.handshaking { "SSL handshaking to upstream" } else { "connecting to upstream" };
        write!(f, "{} while {during}", self.why)
    }
}

/// Connects to one peer (with `proxy_bind`), sends the PROXY header and
/// does the TLS handshake, all within `proxy_connect_timeout`.
async fn connect(
    s: &Session,
    upstream: &str,
    peer: &crate::config::proxy::PeerConf,
    p: &super::conf::ProxyConf,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<Origin, ConnectError> {
    let work = async {
        if let Some(path) = &peer.unix {
            let mut u = tokio::net::UnixStream::connect(path).await.map_err(|e| {
                format!("connect() to unix:{} failed ({})", path.display(), crate::process::signal::os_error(&e))
            })?;
            if p.proxy_protocol {
                let line = s.proxy_protocol_line();
                u.write_all(&line).await.map_err(|e| format!("send() failed ({e})"))?;
            }
            return Ok::<_, ConnectError>(Origin::Unix(u));
        }
        let os = |e: rustix::io::Errno| crate::process::signal::os_error(&std::io::Error::from(e));
        let family = if peer.addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
        let fd =
            rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)
                .map_err(|e| format!("socket() failed ({})", os(e)))?;
        if let Some(b) = &p.bind {
            let text = String::from_utf8_lossy(&b.render_to_vec(s)).into_owned();
            let local: Option<SocketAddr> = text
                .parse::<SocketAddr>()
                .ok()
                .or_else(|| text.parse::<std::net::IpAddr>().ok().map(|ip| SocketAddr::new(ip, 0)));
            match local {
                Some(a) => rustix::net::bind(&fd, &a).map_err(|e| format!("bind({}) failed ({})", text, os(e)))?,
                None if text.is_empty() => {}
                None => return Err(format!("invalid local address \"{text}\"").into()),
            }
        }
        let mut tcp = connect_tcp(fd, peer.addr)
            .await
            .map_err(|e| format!("connect() failed ({})", crate::process::signal::os_error(&e)))?;
        let _ = tcp.set_nodelay(s.server().conf.tcp_nodelay);
        if p.proxy_protocol {
            let line = s.proxy_protocol_line();
            tcp.write_all(&line)
                .await
                .map_err(|e| format!("send() failed ({})", crate::process::signal::os_error(&e)))?;
            if let Some(t) = s.up.borrow_mut().tries.last_mut() {
                t.sent += line.len() as u64;
            }
        }
        if let Some(cfg) = tls {
            let name = match &p.ssl_name {
                Some(t) => String::from_utf8_lossy(&t.render_to_vec(s)).into_owned(),
                // nginx's default: the host of `proxy_pass` (an
                // upstream's name, or the address as written).
                None => upstream.to_string(),
            };
            let server_name = crate::tls::client::server_name(&name)
                .unwrap_or_else(|| rustls_pki_types::ServerName::IpAddress(peer.addr.ip().into()));
            let tls = Box::pin(tokio_rustls::TlsConnector::from(cfg.clone()).connect(server_name, tcp))
                .await
                .map_err(|e| ConnectError { why: crate::tls::client::handshake_error(&e, &name), handshaking: true })?;
            return Ok(Origin::Tls(Box::new(tls)));
        }
        Ok(Origin::Tcp(tcp))
    };
    match tokio::time::timeout(p.connect_timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(String::from("upstream timed out (110: Connection timed out)").into()),
    }
}

/// A non-blocking connect(2) of `fd` to `addr`. On loopback (and on any
/// fast path) the handshake is over by the time connect(2) returns
/// EINPROGRESS: a getpeername(2) then tells the socket is connected, and
/// the session goes on without a turn of the event loop and without arming
/// `proxy_connect_timeout`'s timer. Otherwise it waits for the socket to
/// become writable, as tokio's own connect does.
async fn connect_tcp(fd: std::os::fd::OwnedFd, addr: SocketAddr) -> std::io::Result<TcpStream> {
    match rustix::net::connect(&fd, &addr) {
        Ok(()) | Err(rustix::io::Errno::INPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    let tcp = TcpStream::from_std(std::net::TcpStream::from(fd))?;
    match tcp.peer_addr() {
        Ok(_) => return Ok(tcp),
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {}
        Err(e) => return Err(e),
    }
    tcp.writable().await?;
    match tcp.take_error()? {
        Some(e) => Err(e),
        None => Ok(tcp),
    }
}

async fn relay_session(
    s: &Session,
    client: Client,
    origin: Origin,
    pre: Vec<u8>,
    connected: std::time::Instant,
) -> End {
    let p = &s.server().conf.proxy;
    let c = Counters::new();
    let (upload_rate, download_rate) = (p.upload_rate.eval(s), p.download_rate.eval(s));
    let opts = relay::CopyOpts {
        buffer: p.buffer_size,
        upload_rate,
        download_rate,
        timeout: p.timeout,
        half_close: p.half_close,
    };
    let pre_len = pre.len() as u64;
    let end = match (client, origin) {
        (Client::Plain(cl), Origin::Tcp(mut o)) if upload_rate == 0 && download_rate == 0 => {
            match o.write_all(&pre).await {
                Ok(()) => relay::splice_both(&cl, &o, &c, p.timeout, connected, p.half_close, Default::default()).await,
                Err(e) => pre_failed(&e),
            }
        }
        (cl, o) => {
            let r = async {
                let mut o = o;
                write_pre(&mut o, &pre).await?;
                Ok::<_, std::io::Error>(o)
            }
            .await;
            match r {
                Err(e) => pre_failed(&e),
                // Boxed: a TLS stream moved into the copy future inline
                // would size every session's task.
                Ok(o) => match (cl, o) {
                    (Client::Plain(a), Origin::Tcp(b)) => Box::pin(relay::copy_both(a, b, &c, opts, connected)).await,
                    (Client::Plain(a), Origin::Unix(b)) => Box::pin(relay::copy_both(a, b, &c, opts, connected)).await,
                    (Client::Plain(a), Origin::Tls(b)) => Box::pin(relay::copy_both(a, *b, &c, opts, connected)).await,
                    (Client::Tls(a), Origin::Tcp(b)) => Box::pin(relay::copy_both(*a, b, &c, opts, connected)).await,
                    (Client::Tls(a), Origin::Unix(b)) => Box::pin(relay::copy_both(*a, b, &c, opts, connected)).await,
                    (Client::Tls(a), Origin::Tls(b)) => Box::pin(relay::copy_both(*a, *b, &c, opts, connected)).await,
                },
            }
        }
    };
    account(s, &c, pre_len, connected);
    end
}

/// What a relay moved, into the session's and its try's counts:
/// `pre_len` bytes the client sent before it (preread), the relay's
/// counters `c`, the time since the origin `connected`.
pub(super) fn account(s: &Session, c: &Counters, pre_len: u64, connected: std::time::Instant) {
    s.bytes_received.set(s.bytes_received.get().max(pre_len) + c.up.get());
    s.bytes_sent.set(s.bytes_sent.get() + c.down.get());
    if let Some(t) = s.up.borrow_mut().tries.last_mut() {
        t.sent += pre_len + c.up.get();
        t.received += c.down.get();
        t.first_byte_ms = c.first_byte.get();
        t.session_ms = Some(crate::clock::since_ms(connected));
    }
}

/// Sending the client's first bytes (read by preread) to the origin
/// failed.
fn pre_failed(e: &std::io::Error) -> End {
    End::Error {
        msg: format!("send() failed ({})", crate::process::signal::os_error(e)),
        upstream: true,
        sending: true,
    }
}

async fn write_pre(o: &mut Origin, pre: &[u8]) -> std::io::Result<()> {
    if pre.is_empty() {
        return Ok(());
    }
    match o {
        Origin::Tcp(t) => t.write_all(pre).await,
        Origin::Unix(u) => u.write_all(pre).await,
        Origin::Tls(t) => {
            t.write_all(pre).await?;
            t.flush().await
        }
    }
}
