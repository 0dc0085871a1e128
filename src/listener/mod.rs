//! Listening sockets, owned by the master thread and handed (as duplicated
//! descriptors) to each worker generation. With `reuseport` every worker
//! gets its own SO_REUSEPORT socket per address, so the kernel spreads
//! connections with no shared accept queue; otherwise workers share one.
//!
//! On reload, sockets whose address and mode are unchanged are kept (the
//! same kernel socket, so no connection is refused or lost), new ones are
//! bound, and dropped ones close once the old workers let go of them.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Socket, Type};

use crate::config::Config;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    addr: SocketAddr,
    reuseport: bool,
    /// Worker index for reuseport sockets, 0 for shared ones.
    index: usize,
}

#[derive(Default)]
pub struct ListenerSet {
    socks: Vec<(Key, TcpListener)>,
}

/// Whether `g` is served by a wildcard listener on the same port (nginx
/// binds only `*:port` then and picks the server by the local address).
pub fn covered_by_wildcard(cfg: &Config, addr: SocketAddr) -> bool {
    !addr.ip().is_unspecified()
        && cfg
            .http
            .listens
            .iter()
            .any(|w| w.addr.ip().is_unspecified() && w.addr.port() == addr.port() && w.addr.is_ipv4() == addr.is_ipv4())
}

/// Per-socket settings that may change on a live socket at reload.
#[derive(Clone, Copy)]
struct Opts {
    backlog: i32,
}

fn keys(cfg: &Config) -> Vec<(Key, usize, Opts)> {
    let mut out = Vec::new();
    for (gi, g) in cfg.http.listens.iter().enumerate() {
        if covered_by_wildcard(cfg, g.addr) {
            continue;
        }
        let n = if g.reuseport { cfg.main.worker_processes } else { 1 };
        for index in 0..n {
            out.push((Key { addr: g.addr, reuseport: g.reuseport, index }, gi, Opts { backlog: g.backlog }));
        }
    }
    out
}

fn bind(k: &Key, o: Opts) -> io::Result<TcpListener> {
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
    tune(&l)?;
    Ok(l)
}

/// Two options every listener gets (nginx sets neither by default), both
/// for the cost of a new connection, which on a busy server is mostly the
/// kernel's TCP work on either side and the wake-ups between them:
///
/// - TCP_DEFER_ACCEPT, 1 s (nginx's `deferred`; h2o's default): the kernel
///   hands a connection over when its first data arrive, not at the end of
///   the handshake. HTTP and TLS clients speak first, so the worker wakes
///   once per connection instead of twice and finds the request already
///   there (`connection::sock` then serves it without joining epoll). A
///   client that stays silent is handed over after about a second, when
///   the kernel retransmits its SYN-ACK and the client acknowledges again;
///   until then it costs the server nothing.
/// - TCP_QUICKACK off, which accepted sockets inherit: the request is not
///   acknowledged on arrival by a packet of its own; the response carries
///   the ACK, as Linux already does for every later request on a keep-alive
///   connection. The usual delayed-ACK rules still hold: a slow response
///   gets its ACK from the 40 ms timer (which also ends this mode), and
///   more than one full-sized segment of request is acknowledged at once.
///
/// On loopback, where the kernel runs the receiving side's TCP work on the
/// sending CPU, both save the client's CPU: with wrk and a new connection
/// per request (bench workload 2) its CPU per connection fell from about
/// 66 to 54 µs, so a client-bound run serves about a fifth more requests.
fn tune(l: &TcpListener) -> io::Result<()> {
    set_defer_accept(l)?;
    rustix::net::sockopt::set_tcp_quickack(l, false)?;
    Ok(())
}

/// TCP_DEFER_ACCEPT of 1 s; neither socket2 nor rustix wraps this option.
fn set_defer_accept(l: &TcpListener) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = 1;
    // SAFETY: the descriptor is an open socket owned by `l` for the whole
    // call; the option value is a c_int on the stack and its exact size is
    // passed, so the kernel reads only that.
    let r = unsafe {
        libc::setsockopt(
            l.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
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
                Some((_, l)) => {
                    let dup =
                        l.try_clone().map_err(|e| format!("dup() of listener {} failed ({})", k.addr, os_error(&e)))?;
                    // A changed backlog takes effect on the live socket.
                    let _ = socket2::SockRef::from(&dup).listen(opts.backlog);
                    dup
                }
                None => bind(&k, opts).map_err(|e| format!("bind() to {} failed ({})", k.addr, os_error(&e)))?,
            };
            next.socks.push((k, sock));
        }
        Ok(next)
    }

    /// Duplicated descriptors for worker `w`: its own reuseport sockets and
    /// the shared ones, tagged with their listen group.
    pub fn for_worker(&self, cfg: &Config, w: usize) -> io::Result<Vec<(usize, TcpListener)>> {
        let mut out = Vec::new();
        for (k, gi, _) in keys(cfg) {
            if k.reuseport && k.index != w {
                continue;
            }
            if let Some((_, l)) = self.socks.iter().find(|(sk, _)| *sk == k) {
                out.push((gi, l.try_clone()?));
            }
        }
        Ok(out)
    }

    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.socks.iter().map(|(k, _)| k.addr).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Accepted sockets inherit the listener's delayed-ACK mode: what makes
    /// the response carry the first ACK (checked with tcpdump: the request's
    /// own ACK packet is gone).
    #[test]
    fn accepted_sockets_start_in_delayed_ack_mode() {
        let k = Key { addr: "127.0.0.1:0".parse().expect("an address"), reuseport: false, index: 0 };
        let l = bind(&k, Opts { backlog: 8 }).expect("bind");
        assert!(!rustix::net::sockopt::tcp_quickack(&l).expect("getsockopt"));
        let mut c = std::net::TcpStream::connect(l.local_addr().expect("local addr")).expect("connect");
        std::io::Write::write_all(&mut c, b"GET / HTTP/1.1\r\n\r\n").expect("send");
        l.set_nonblocking(false).expect("blocking");
        let (a, _) = l.accept().expect("accept");
        assert!(!rustix::net::sockopt::tcp_quickack(&a).expect("getsockopt"));
    }
}
