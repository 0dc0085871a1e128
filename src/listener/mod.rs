//! Listening sockets, owned by the master thread and handed (as duplicated
//! descriptors) to each worker generation. With `reuseport` every worker
//! gets its own SO_REUSEPORT socket per address, so the kernel spreads
//! connections with no shared accept queue; otherwise workers share one.
//!
//! On reload, sockets whose address and mode are unchanged are kept (the
//! same kernel socket, so no connection is refused or lost), new ones are
//! bound, and dropped ones close once the old workers let go of them.
//!
//! `listen ... quic` addresses are UDP sockets, kept the same way: one per
//! worker with `reuseport`, else one that the workers share. Which worker
//! reads a datagram matters for QUIC (a connection lives in one worker);
//! `quic::route` forwards datagrams to their connection's worker, so the
//! kernel's choice of socket only decides who forwards.
//!
//! Another family's listens (`stream {}`: TCP and `udp`) are kept in the
//! same set, keyed with their protocol, and handed to workers apart from
//! HTTP's (`WorkerSockets`). The master process holds the whole set too
//! (`export`/`import`), so a restarted serving process finds every socket.

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use socket2::{Domain, Socket, Type};

use crate::config::Config;
use crate::config::model::SockOpts;

pub mod unix;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    addr: SocketAddr,
    /// `listen unix:PATH` (HTTP's, or a family's TCP or datagram one;
    /// `addr` is `unix::PLACEHOLDER`).
    unix: Option<Arc<str>>,
    reuseport: bool,
    /// Worker index for reuseport sockets, 0 for shared ones.
    index: usize,
    /// Whose socket: HTTP's listeners defer accepting, another family's
    /// do not (its clients may wait for the server to speak first).
    proto: Proto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    Http,
    Tcp,
    Udp,
}

/// Which configuration entry a socket serves.
#[derive(Clone, Copy, Debug)]
enum Owner {
    /// An HTTP listen group.
    Http(usize),
    /// A family (index in `Config::families`) and its listen.
    Family(usize, usize),
}

/// A listening socket: TCP (or unix stream), a bound UDP socket, or a
/// bound unix datagram socket.
enum Held {
    Tcp(TcpListener),
    Udp(std::net::UdpSocket),
    UnixUdp(std::os::unix::net::UnixDatagram),
}

impl Held {
    fn try_clone(&self) -> io::Result<Held> {
        Ok(match self {
            Held::Tcp(l) => Held::Tcp(l.try_clone()?),
            Held::Udp(u) => Held::Udp(u.try_clone()?),
            Held::UnixUdp(u) => Held::UnixUdp(u.try_clone()?),
        })
    }
}

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Http => "http",
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl Key {
    /// The text form the master process and the serving process exchange
    /// with a socket (`process::supervisor`):
    /// `ADDR reuseport|shared INDEX http|tcp|udp`, ADDR `unix:PATH` for a
    /// unix-domain socket (the path may hold spaces: read from the right).
    fn to_text(&self) -> String {
        let mode = if self.reuseport { "reuseport" } else { "shared" };
        format!("{} {mode} {} {}", self.label(), self.index, self.proto.name())
    }

    fn from_text(s: &str) -> Option<Key> {
        let mut w = s.rsplitn(4, ' ');
        let name = w.next()?;
        let proto = [Proto::Http, Proto::Tcp, Proto::Udp].into_iter().find(|p| p.name() == name)?;
        let index = w.next()?.parse().ok()?;
        let reuseport = match w.next()? {
            "reuseport" => true,
            "shared" => false,
            _ => return None,
        };
        let addr = w.next()?;
        let (addr, unix) = match addr.strip_prefix("unix:") {
            Some(p) if !reuseport => (unix::PLACEHOLDER, Some(unix::listen_path(p).ok()?)),
            Some(_) => return None,
            None => (addr.parse().ok()?, None),
        };
        Some(Key { addr, unix, reuseport, index, proto })
    }

    /// The address as nginx names it: `127.0.0.1:80`, `unix:/path`.
    fn label(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{p}"),
            None => self.addr.to_string(),
        }
    }
}

#[derive(Default)]
pub struct ListenerSet {
    socks: Vec<(Key, Held)>,
    /// QUIC's sockets (`listen ... quic`).
    udp: Vec<(Key, Arc<Udp>)>,
}

/// A worker's duplicates of the sockets it serves.
#[derive(Default)]
pub struct WorkerSockets {
    /// (HTTP listen group, socket)
    pub http: Vec<(usize, TcpListener)>,
    /// (family, listen, socket)
    pub families: Vec<(usize, usize, crate::config::family::Socket)>,
}

/// A QUIC listening socket, shared by the generations that use it.
pub struct Udp {
    pub sock: UdpSocket,
    /// Bumped each time a new configuration takes the socket over, so a
    /// retiring worker knows a newer one reads it now and stops reading it
    /// itself (its connections' datagrams reach it by `quic::route`).
    pub epoch: AtomicU64,
}

/// A worker's QUIC socket: its listen group, a duplicate of the socket,
/// and the epoch it was handed over at.
pub struct QuicSock {
    pub group: usize,
    pub sock: UdpSocket,
    pub shared: Arc<Udp>,
    pub epoch: u64,
}

impl Udp {
    /// A newer generation than the one handed the socket at `epoch` reads
    /// it now.
    pub fn taken_over_since(&self, epoch: u64) -> bool {
        self.epoch.load(Ordering::Relaxed) != epoch
    }
}

/// Whether `g` is served by a wildcard listener on the same port (nginx
/// binds only `*:port` then and picks the server by the local address).
pub fn covered_by_wildcard(cfg: &Config, addr: SocketAddr) -> bool {
    !addr.ip().is_unspecified()
        && cfg.http.listens.iter().any(|w| {
            !w.quic
                && w.unix.is_none()
                && w.addr.ip().is_unspecified()
                && w.addr.port() == addr.port()
                && w.addr.is_ipv4() == addr.is_ipv4()
        })
}

/// Per-socket settings that may change on a live socket at reload.
#[derive(Clone, Copy)]
struct Opts {
    backlog: i32,
    notsent_lowat: u32,
    sock: SockOpts,
}

fn keys(cfg: &Config) -> Vec<(Key, Owner, Opts)> {
    let mut out = Vec::new();
    for (gi, g) in cfg.http.listens.iter().enumerate() {
        if g.quic || g.unix.is_none() && covered_by_wildcard(cfg, g.addr) {
            continue;
        }
        // One unix-domain socket per path, whatever reuseport says: Linux
        // spreads no connections over sockets sharing a path.
        let reuseport = g.reuseport && g.unix.is_none();
        let n = if reuseport { cfg.main.worker_processes } else { 1 };
        for index in 0..n {
            out.push((
                Key { addr: g.addr, unix: g.unix.clone(), reuseport, index, proto: Proto::Http },
                Owner::Http(gi),
                Opts { backlog: g.backlog, notsent_lowat: g.notsent_lowat, sock: g.sock },
            ));
        }
    }
    for (fi, (_, f)) in cfg.families.iter().enumerate() {
        for (li, l) in f.listens().iter().enumerate() {
            // One socket per unix path, as HTTP's.
            let reuseport = l.reuseport && l.unix.is_none();
            let n = if reuseport { cfg.main.worker_processes } else { 1 };
            let proto = if l.udp { Proto::Udp } else { Proto::Tcp };
            for index in 0..n {
                out.push((
                    Key { addr: l.addr, unix: l.unix.clone(), reuseport, index, proto },
                    Owner::Family(fi, li),
                    Opts { backlog: l.backlog, notsent_lowat: 0, sock: l.sock },
                ));
            }
        }
    }
    out
}

/// The QUIC groups' sockets: every `quic` address is bound as given.
fn udp_keys(cfg: &Config) -> Vec<(Key, usize, SockOpts)> {
    let mut out = Vec::new();
    for (gi, g) in cfg.http.listens.iter().enumerate().filter(|(_, g)| g.quic) {
        let n = if g.reuseport { cfg.main.worker_processes } else { 1 };
        for index in 0..n {
            out.push((Key { addr: g.addr, unix: None, reuseport: g.reuseport, index, proto: Proto::Udp }, gi, g.sock));
        }
    }
    out
}

/// Receive buffer asked for a QUIC socket unless `rcvbuf=` says otherwise:
/// a burst of a fast sender's datagrams must wait there until the worker
/// reads them (the kernel caps it at net.core.rmem_max).
const UDP_RCVBUF: usize = 4 << 20;

/// A QUIC socket: as a family's UDP socket, with a larger default
/// receive buffer.
fn bind_quic(k: &Key, o: &SockOpts) -> io::Result<UdpSocket> {
    let rcvbuf = Some(o.rcvbuf.unwrap_or(UDP_RCVBUF as i32));
    let opts = Opts { backlog: 0, notsent_lowat: 0, sock: SockOpts { rcvbuf, ..*o } };
    bind_udp(k, opts)
}

fn bind(k: &Key, o: Opts) -> io::Result<Held> {
    if let Some(path) = &k.unix {
        if k.proto == Proto::Udp {
            return unix::bind_datagram(path, o.sock.rcvbuf, o.sock.sndbuf).map(Held::UnixUdp);
        }
        return unix::bind(path, o.backlog, o.sock.rcvbuf, o.sock.sndbuf).map(Held::Tcp);
    }
    match k.proto {
        Proto::Http => bind_tcp(k, o, true).map(Held::Tcp),
        Proto::Tcp => bind_tcp(k, o, false).map(Held::Tcp),
        Proto::Udp => bind_udp(k, o).map(Held::Udp),
    }
}

/// A UDP socket for a family's `listen ... udp`.
fn bind_udp(k: &Key, o: Opts) -> io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(k.addr), Type::DGRAM, None)?;
    s.set_reuse_address(true)?;
    if k.reuseport {
        s.set_reuse_port(true)?;
    }
    if k.addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    if let Some(n) = o.sock.rcvbuf {
        s.set_recv_buffer_size(n.max(0) as usize)?;
    }
    if let Some(n) = o.sock.sndbuf {
        s.set_send_buffer_size(n.max(0) as usize)?;
    }
    s.bind(&k.addr.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

fn bind_tcp(k: &Key, o: Opts, deferred: bool) -> io::Result<TcpListener> {
    let s = Socket::new(Domain::for_address(k.addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if k.reuseport {
        s.set_reuse_port(true)?;
    }
    if k.addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&k.addr.into())?;
    s.listen(o.backlog)?;
    s.set_nonblocking(true)?;
    let l: TcpListener = s.into();
    if deferred {
        tune(&l, o)?;
    } else {
        set_sock_opts(&l, &o.sock)?;
    }
    Ok(l)
}

/// Every listener defers accepting (nginx's `deferred`, off by default
/// there; h2o's default), for the cost of a new connection, which on a
/// busy server is mostly the kernel's TCP work on either side and the
/// wake-ups between them: with TCP_DEFER_ACCEPT (1 s) the kernel hands a
/// connection over when its first data arrive, not at the end of the
/// handshake. HTTP and TLS clients speak first, so the worker wakes once
/// per connection instead of twice and finds the request already there
/// (`connection::sock` then serves it without joining epoll), and the
/// handshake's last ACK is dropped instead of creating a socket. A client
/// that stays silent is handed over after about a second, when the kernel
/// retransmits its SYN-ACK and the client acknowledges again; until then it
/// costs the server nothing. On loopback, where the kernel runs the
/// receiving side's TCP work on the sending CPU, this also saves the
/// client's CPU (bench workload 2: wrk's CPU per connection -11 to -15%).
///
/// Turning TCP_QUICKACK off as well (so the response carries the first
/// request's ACK) saved about 3% more, but was left out: a client that
/// writes one request in two pieces without TCP_NODELAY would wait for the
/// 40 ms delayed-ACK timer on every new connection.
///
/// TCP_NOTSENT_LOWAT (16 KB on plain listeners unless `listen ...
/// notsent_lowat=` says otherwise; accepted sockets inherit it from the
/// listener, so it costs nothing per connection): the kernel keeps at most
/// that much of a response queued but not yet sent, and reports the socket
/// writable again when less remains. Without it one sendfile call of a
/// large body fills the whole send buffer (megabytes), and the kernel
/// transmits the rest from the ACK path, which runs on the client's CPU
/// when the client is local. With it the worker's own sendfile calls
/// transmit what they queue: bench c4 (a 1 GB cached object to 10 local
/// clients, `wrk` saturating its core) went from 0.93x to 1.7x nginx's
/// MB/s, and workload 4 (1 MB and 10 MB static files) to 1.6x; the client's
/// CPU per GB halved for 12 % more server CPU per GB. It also bounds the
/// kernel memory a slow reader pins to what is in flight plus 16 KB.
/// Responses that fit the window (100 KB and less) are unaffected. TLS
/// listeners keep the kernel's default (see `DEFAULT_NOTSENT_LOWAT`).
fn tune(l: &TcpListener, o: Opts) -> io::Result<()> {
    set_tcp_int(l, libc::TCP_DEFER_ACCEPT, 1)?;
    set_notsent_lowat(l, o.notsent_lowat)?;
    set_sock_opts(l, &o.sock)
}

/// `listen`'s rcvbuf=, sndbuf=, fastopen= and so_keepalive=, set on the
/// listener as nginx sets them; accepted sockets inherit all of them. An
/// error names the option and its value.
fn set_sock_opts(l: &TcpListener, o: &SockOpts) -> io::Result<()> {
    let named = |what: &str, v: i64, r: io::Result<()>| {
        r.map_err(|e| io::Error::new(e.kind(), format!("setsockopt({what}, {v}) failed: {e}")))
    };
    let s = socket2::SockRef::from(l);
    if let Some(n) = o.rcvbuf {
        named("SO_RCVBUF", n.into(), s.set_recv_buffer_size(n.max(0) as usize))?;
    }
    if let Some(n) = o.sndbuf {
        named("SO_SNDBUF", n.into(), s.set_send_buffer_size(n.max(0) as usize))?;
    }
    if let Some(on) = o.keepalive {
        named("SO_KEEPALIVE", on.into(), s.set_keepalive(on))?;
    }
    for (what, opt, v) in [
        ("TCP_KEEPIDLE", libc::TCP_KEEPIDLE, o.keep_idle),
        ("TCP_KEEPINTVL", libc::TCP_KEEPINTVL, o.keep_intvl),
        ("TCP_KEEPCNT", libc::TCP_KEEPCNT, o.keep_cnt),
    ] {
        if v > 0 {
            let v = v.min(i32::MAX as u32) as libc::c_int;
            named(what, v.into(), set_tcp_int(l, opt, v))?;
        }
    }
    if let Some(n) = o.fastopen {
        named("TCP_FASTOPEN", n.into(), set_tcp_int(l, libc::TCP_FASTOPEN, n))?;
    }
    Ok(())
}

fn set_notsent_lowat(l: &TcpListener, bytes: u32) -> io::Result<()> {
    // 0 (`off`) means the kernel's own, sysctl net.ipv4.tcp_notsent_lowat
    // (unlimited by default), also for a listener reloaded to `off`.
    set_tcp_int(l, libc::TCP_NOTSENT_LOWAT, bytes.min(i32::MAX as u32) as libc::c_int)
}

/// An IPPROTO_TCP option of int type; neither socket2 nor rustix wraps
/// TCP_DEFER_ACCEPT or TCP_NOTSENT_LOWAT (socket2 wraps the keepalive
/// timings only behind a feature, and TCP_FASTOPEN not at all).
fn set_tcp_int(l: &TcpListener, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is an open socket owned by `l` for the whole
    // call; the option value is a c_int on the stack and its exact size is
    // passed, so the kernel reads only that.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            opt,
            (&v as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

fn os_error(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_string();
            format!("{n}: {text}")
        }
        None => e.to_string(),
    }
}

impl ListenerSet {
    /// The sockets `cfg` needs, reusing this set's where possible. On error
    /// (nginx's wording) nothing here changes and sockets bound so far close.
    pub fn prepare(&self, cfg: &Config) -> Result<ListenerSet, String> {
        let mut next = ListenerSet::default();
        for (k, _, opts) in keys(cfg) {
            if next.socks.iter().any(|(nk, _)| *nk == k) {
                continue;
            }
            let sock = match self.socks.iter().find(|(ok, _)| *ok == k) {
                Some((_, l)) if k.unix.is_some() => {
                    // Only the backlog applies to a unix-domain socket
                    // kept across a reload.
                    let dup = l
                        .try_clone()
                        .map_err(|e| format!("dup() of listener {} failed ({})", k.label(), os_error(&e)))?;
                    if let Held::Tcp(dup) = &dup {
                        let _ = socket2::SockRef::from(dup).listen(opts.backlog);
                    }
                    dup
                }
                Some((_, l)) => {
                    let dup =
                        l.try_clone().map_err(|e| format!("dup() of listener {} failed ({})", k.addr, os_error(&e)))?;
                    // A changed backlog, notsent_lowat or socket option
                    // takes effect on the live socket (for connections
                    // accepted from now on), as nginx sets them again.
                    if let Held::Tcp(dup) = &dup {
                        let _ = socket2::SockRef::from(dup).listen(opts.backlog);
                        if k.proto == Proto::Http {
                            let _ = set_notsent_lowat(dup, opts.notsent_lowat);
                        }
                        let _ = set_sock_opts(dup, &opts.sock);
                    }
                    dup
                }
                None => bind(&k, opts).map_err(|e| format!("bind() to {} failed ({})", k.label(), os_error(&e)))?,
            };
            next.socks.push((k, sock));
        }
        for (k, _, opts) in udp_keys(cfg) {
            if next.udp.iter().any(|(nk, _)| *nk == k) {
                continue;
            }
            let shared = match self.udp.iter().find(|(ok, _)| *ok == k) {
                Some((_, u)) => u.clone(),
                None => Arc::new(Udp {
                    sock: bind_quic(&k, &opts)
                        .map_err(|e| format!("bind() to {} failed ({})", k.addr, os_error(&e)))?,
                    epoch: AtomicU64::new(0),
                }),
            };
            next.udp.push((k, shared));
        }
        Ok(next)
    }

    /// This set's QUIC sockets are the ones read from now on: retiring
    /// workers that read one of them stop (`QuicSock::taken_over`). Called
    /// once the set's generation started.
    pub fn take_over_udp(&self) {
        for (_, u) in &self.udp {
            u.epoch.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Worker `w`'s QUIC sockets: its own reuseport ones and the shared ones.
    pub fn quic_for_worker(&self, cfg: &Config, w: usize) -> io::Result<Vec<QuicSock>> {
        let mut out = Vec::new();
        for (k, gi, _) in udp_keys(cfg) {
            if k.reuseport && k.index != w {
                continue;
            }
            if let Some((_, u)) = self.udp.iter().find(|(sk, _)| *sk == k) {
                out.push(QuicSock {
                    group: gi,
                    sock: u.sock.try_clone()?,
                    shared: u.clone(),
                    epoch: u.epoch.load(Ordering::Relaxed) + 1,
                });
            }
        }
        Ok(out)
    }

    /// Duplicated descriptors for worker `w`: its own reuseport sockets and
    /// the shared ones, tagged with their listen group or family listen.
    pub fn for_worker(&self, cfg: &Config, w: usize) -> io::Result<WorkerSockets> {
        let mut out = WorkerSockets::default();
        for (k, owner, _) in keys(cfg) {
            if k.reuseport && k.index != w {
                continue;
            }
            let Some((_, l)) = self.socks.iter().find(|(sk, _)| *sk == k) else { continue };
            match (owner, l.try_clone()?) {
                (Owner::Http(gi), Held::Tcp(l)) => out.http.push((gi, l)),
                (Owner::Family(f, i), Held::Tcp(l)) => out.families.push((f, i, crate::config::family::Socket::Tcp(l))),
                (Owner::Family(f, i), Held::Udp(u)) => out.families.push((f, i, crate::config::family::Socket::Udp(u))),
                (Owner::Family(f, i), Held::UnixUdp(u)) => {
                    out.families.push((f, i, crate::config::family::Socket::UnixUdp(u)))
                }
                (Owner::Http(_), Held::Udp(_) | Held::UnixUdp(_)) => {}
            }
        }
        Ok(out)
    }

    pub fn addrs(&self) -> Vec<String> {
        self.socks.iter().map(|(k, _)| k.label()).chain(self.udp.iter().map(|(k, _)| k.label())).collect()
    }

    /// The paths of this set's unix-domain sockets.
    pub fn unix_paths(&self) -> Vec<Arc<str>> {
        let mut out: Vec<Arc<str>> = self.socks.iter().filter_map(|(k, _)| k.unix.clone()).collect();
        out.dedup();
        out
    }

    /// Removes the socket files of this set's unix-domain sockets that
    /// `next` does not keep (all of them when sluice exits), as nginx
    /// deletes a unix listen's file when it closes the socket for good.
    pub fn remove_unix_files(&self, next: Option<&ListenerSet>) {
        let kept = next.map(|n| n.unix_paths()).unwrap_or_default();
        for p in self.unix_paths() {
            if !kept.contains(&p) {
                unix::remove(&p);
            }
        }
    }

    /// Every socket with its key in text, for handing the set to another
    /// process (the master keeps the serving process's sockets so that a
    /// new serving process finds them after a crash). QUIC's sockets' keys
    /// start with `quic `.
    pub fn export(&self) -> Vec<(String, std::os::fd::BorrowedFd<'_>)> {
        use std::os::fd::AsFd;
        let socks = self.socks.iter().map(|(k, h)| {
            let fd = match h {
                Held::Tcp(l) => l.as_fd(),
                Held::Udp(u) => u.as_fd(),
                Held::UnixUdp(u) => u.as_fd(),
            };
            (k.to_text(), fd)
        });
        socks.chain(self.udp.iter().map(|(k, u)| (format!("quic {}", k.to_text()), u.sock.as_fd()))).collect()
    }

    /// A set made of sockets another process exported; an entry whose key
    /// does not parse is dropped (closed). `prepare` then reuses them by
    /// key as it reuses a running set's.
    pub fn import(items: Vec<(String, std::os::fd::OwnedFd)>) -> ListenerSet {
        let mut set = ListenerSet::default();
        for (k, fd) in items {
            // Accept and receive loops expect non-blocking sockets.
            if let Some(k) = k.strip_prefix("quic ") {
                let sock = UdpSocket::from(fd);
                if let (Some(k), Ok(())) = (Key::from_text(k), sock.set_nonblocking(true)) {
                    set.udp.push((k, Arc::new(Udp { sock, epoch: AtomicU64::new(0) })));
                }
                continue;
            }
            let Some(k) = Key::from_text(&k) else { continue };
            let held = if k.proto == Proto::Udp && k.unix.is_some() {
                let u = std::os::unix::net::UnixDatagram::from(fd);
                u.set_nonblocking(true).map(|()| Held::UnixUdp(u))
            } else if k.proto == Proto::Udp {
                let u = UdpSocket::from(fd);
                u.set_nonblocking(true).map(|()| Held::Udp(u))
            } else {
                let l = TcpListener::from(fd);
                l.set_nonblocking(true).map(|()| Held::Tcp(l))
            };
            if let Ok(h) = held {
                set.socks.push((k, h));
            }
        }
        set
    }

    pub fn is_empty(&self) -> bool {
        self.socks.is_empty() && self.udp.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn get_int(s: &impl AsRawFd, level: libc::c_int, opt: libc::c_int) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: an open socket for the call; the kernel writes at most
        // `len` bytes into the c_int on the stack and stores the length.
        let r = unsafe {
            libc::getsockopt(s.as_raw_fd(), level, opt, (&mut v as *mut libc::c_int).cast::<libc::c_void>(), &mut len)
        };
        assert_eq!(r, 0, "getsockopt: {}", io::Error::last_os_error());
        v
    }

    fn notsent_lowat(s: &impl AsRawFd) -> libc::c_int {
        get_int(s, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT)
    }

    /// A connection `l` accepted: the client speaks first, so deferred
    /// accept hands it over at once.
    fn accept_one(l: &TcpListener) -> std::net::TcpStream {
        use std::io::Write;
        let mut c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        c.write_all(b"G").expect("write");
        let (a, _) = l.accept().expect("accept");
        a
    }

    /// A blocking listener with `o` on a free loopback port.
    fn listener(o: Opts) -> TcpListener {
        let key = Key {
            addr: "127.0.0.1:0".parse().expect("addr"),
            unix: None,
            reuseport: false,
            index: 0,
            proto: Proto::Http,
        };
        let l = bind_tcp(&key, o, true).expect("bind");
        l.set_nonblocking(false).expect("blocking");
        l
    }

    #[test]
    fn keys_round_trip_as_text() {
        for k in [
            Key {
                addr: "127.0.0.1:8080".parse().expect("addr"),
                unix: None,
                reuseport: false,
                index: 0,
                proto: Proto::Http,
            },
            Key { addr: "[::1]:443".parse().expect("addr"), unix: None, reuseport: true, index: 3, proto: Proto::Tcp },
            Key { addr: "[::1]:53".parse().expect("addr"), unix: None, reuseport: false, index: 0, proto: Proto::Udp },
            Key {
                addr: unix::PLACEHOLDER,
                unix: Some("/run/a b.sock".into()),
                reuseport: false,
                index: 0,
                proto: Proto::Http,
            },
            Key { addr: unix::PLACEHOLDER, unix: Some("/run/s".into()), reuseport: false, index: 0, proto: Proto::Tcp },
            Key { addr: unix::PLACEHOLDER, unix: Some("/run/d".into()), reuseport: false, index: 0, proto: Proto::Udp },
        ] {
            assert_eq!(Key::from_text(&k.to_text()), Some(k));
        }
        for bad in [
            "",
            "127.0.0.1:80",
            "127.0.0.1:80 maybe 0 http",
            "127.0.0.1:80 shared x http",
            "x shared 0 http",
            "127.0.0.1:80 shared 0",
            "127.0.0.1:80 shared 0 sctp",
            "127.0.0.1:80 shared 0 tcp extra",
            "unix:/a reuseport 0 http",
            "unix:/a reuseport 0 udp",
            "unix: shared 0 http",
        ] {
            assert_eq!(Key::from_text(bad), None, "{bad}");
        }
    }

    /// What the worker serves on is the accepted socket: it must carry the
    /// listener's TCP_NOTSENT_LOWAT, and a reload's new value must reach
    /// connections accepted after it.
    #[test]
    fn accepted_sockets_inherit_notsent_lowat() {
        let l = listener(Opts { backlog: 16, notsent_lowat: 16384, sock: SockOpts::default() });
        let a = accept_one(&l);
        assert_eq!(notsent_lowat(&a), 16384);
        set_notsent_lowat(&l, 0).expect("off");
        let b = accept_one(&l);
        assert_eq!(notsent_lowat(&b), 0, "off leaves the kernel's default");
        assert_eq!(notsent_lowat(&a), 16384, "an open connection keeps its value");
    }

    /// rcvbuf=, sndbuf=, so_keepalive= reach accepted connections (the
    /// kernel doubles the buffer sizes it is given); fastopen= is the
    /// listener's own. A reload's changed values reach later connections.
    #[test]
    fn accepted_sockets_inherit_the_listen_socket_options() {
        let sock = SockOpts {
            rcvbuf: Some(96 * 1024),
            sndbuf: Some(48 * 1024),
            fastopen: Some(64),
            keepalive: Some(true),
            keep_idle: 1800,
            keep_intvl: 0,
            keep_cnt: 7,
        };
        let l = listener(Opts { backlog: 16, notsent_lowat: 0, sock });
        let default_intvl = {
            let plain = listener(Opts { backlog: 16, notsent_lowat: 0, sock: SockOpts::default() });
            let p = accept_one(&plain);
            assert_eq!(get_int(&p, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0, "off unless asked for");
            get_int(&p, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL)
        };
        let a = accept_one(&l);
        assert_eq!(get_int(&a, libc::SOL_SOCKET, libc::SO_RCVBUF), 2 * 96 * 1024);
        assert_eq!(get_int(&a, libc::SOL_SOCKET, libc::SO_SNDBUF), 2 * 48 * 1024);
        assert_eq!(get_int(&a, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(get_int(&a, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 1800);
        assert_eq!(get_int(&a, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), default_intvl, "the kernel's");
        assert_eq!(get_int(&a, libc::IPPROTO_TCP, libc::TCP_KEEPCNT), 7);
        assert_eq!(get_int(&l, libc::IPPROTO_TCP, libc::TCP_FASTOPEN), 64);
        let reloaded = SockOpts { rcvbuf: Some(64 * 1024), keepalive: Some(false), ..SockOpts::default() };
        set_sock_opts(&l, &reloaded).expect("reload");
        let b = accept_one(&l);
        assert_eq!(get_int(&b, libc::SOL_SOCKET, libc::SO_RCVBUF), 2 * 64 * 1024);
        assert_eq!(get_int(&b, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0, "so_keepalive=off");
        assert_eq!(get_int(&a, libc::SOL_SOCKET, libc::SO_RCVBUF), 2 * 96 * 1024, "an open connection keeps its own");
    }
}
