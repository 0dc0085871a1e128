//! The accept loop of one listening socket in one worker, enforcing
//! `worker_connections`: when the worker is full it stops accepting (the
//! kernel queues, or another worker takes them) until a slot frees.
//!
//! Accepting goes through `accept4` directly (non-blocking, close-on-exec,
//! peer address included) so the new socket is not registered with the
//! event loop until it has to wait; see `connection::sock`.

use std::net::SocketAddr;
use std::rc::Rc;

use rustix::net::SocketFlags;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::{ConnGuard, WorkerCtx};
use crate::http::handler::ctx::ConnInfo;
use crate::log::error::{ErrorLog, Level};
use crate::{log_error, log_to};

/// How long accepting stops after accept4 fails with EMFILE and the like.
const ACCEPT_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);
/// At most one error-log line per this while accepting stays paused.
const PAUSE_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Accepting stopped because accept4 failed for want of descriptors or
/// memory: since when, how many failed retries, whether it was logged.
struct Paused {
    since: std::time::Instant,
    tries: u64,
    logged: bool,
}

/// What an accept loop hands its connections to: HTTP's listen groups
/// ([`Http`]) or another family's listen (`config::family`). Generic, so
/// HTTP's loop is compiled for HTTP alone and pays nothing per connection
/// for the seam.
pub trait Acceptor: Clone + 'static {
    /// The listening address, for messages.
    fn addr(&self) -> SocketAddr;
    /// nginx logs accept-time trouble to the listening socket's log.
    fn log(&self) -> &ErrorLog;
    /// Serves an accepted connection (`peer`: the client's address).
    fn accepted(&self, w: &Rc<WorkerCtx>, stream: std::net::TcpStream, peer: SocketAddr, guard: ConnGuard);

    /// A connection stream's `pass` hands over after terminating TLS on it.
    /// Only HTTP takes one (as nginx's http serves a passed SSL
    /// connection); elsewhere it is closed, logged.
    fn accepted_tls(
        &self,
        _: &Rc<WorkerCtx>,
        _: Box<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>>,
        peer: SocketAddr,
        _: ConnGuard,
    ) {
        log_to!(self.log(), Level::Error, "a TLS connection from {} cannot be passed to {}", peer.ip(), self.addr());
    }
}

/// HTTP's listen group `group` of the worker's configuration.
#[derive(Clone)]
pub struct Http {
    cfg: std::sync::Arc<crate::config::Config>,
    group: usize,
}

impl Http {
    pub fn new(cfg: std::sync::Arc<crate::config::Config>, group: usize) -> Http {
        Http { cfg, group }
    }
}

impl Acceptor for Http {
    fn addr(&self) -> SocketAddr {
        self.cfg.http.listens[self.group].addr
    }

    fn log(&self) -> &ErrorLog {
        // The default server's.
        &self.cfg.http.listens[self.group].default_server.conf.error_log
    }

    fn accepted(&self, w: &Rc<WorkerCtx>, stream: std::net::TcpStream, peer: SocketAddr, guard: ConnGuard) {
        let (addr, group) = (self.addr(), self.group);
        if let Some(path) = &self.cfg.http.listens[group].unix {
            // A unix-domain client: no address to pick a group by.
            let info = ConnInfo {
                fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
                unix: Some(path.clone()),
                debug: crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), true),
                ..ConnInfo::new(peer, addr, w.next_serial())
            };
            log_accept(self.log(), &info);
            let conn = Box::pin(crate::http::connection::start(stream, info, group, guard));
            tokio::task::spawn_local(crate::clock::per_poll(conn));
            return;
        }
        let wildcard = addr.ip().is_unspecified();
        let local = if wildcard { stream.local_addr().unwrap_or(addr) } else { addr };
        // A wildcard socket also carries addresses that have their own
        // servers (`listen 127.0.0.1:80` beside `listen 80`).
        let group = if wildcard {
            w.cfg.http.listens.iter().position(|g| g.addr == local && !g.quic).unwrap_or(group)
        } else {
            group
        };
        let info = ConnInfo {
            fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
            debug: crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), false),
            ..ConnInfo::new(peer, local, w.next_serial())
        };
        log_accept(&w.cfg.http.listens[group].default_server.conf.error_log, &info);
        // Boxed: a connection's future is ~4.5 KB, and tokio moves a task's
        // future by value when it spawns and when it finishes (callgrind:
        // six copies, ~3k instructions, per connection unboxed).
        let conn = Box::pin(crate::http::connection::start(stream, info, group, guard));
        tokio::task::spawn_local(crate::clock::per_poll(conn));
    }

    fn accepted_tls(
        &self,
        w: &Rc<WorkerCtx>,
        tls: Box<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>>,
        peer: SocketAddr,
        guard: ConnGuard,
    ) {
        // As `accepted`: the listener's address (the socket's own is the
        // stream listener's), or the local one on a wildcard.
        let (addr, group) = (self.addr(), self.group);
        let local = if addr.ip().is_unspecified() { tls.get_ref().0.tcp().local_addr().unwrap_or(addr) } else { addr };
        let group = w.cfg.http.listens.iter().position(|g| g.addr == local && !g.quic).unwrap_or(group);
        let fd = std::os::fd::AsRawFd::as_raw_fd(tls.get_ref().0.tcp());
        let debug = crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), false);
        let info = ConnInfo { fd, debug, ..ConnInfo::new(peer, local, w.next_serial()) };
        log_accept(&w.cfg.http.listens[group].default_server.conf.error_log, &info);
        let conn = Box::pin(crate::http::connection::serve_handed_tls(tls, info, group, guard));
        tokio::task::spawn_local(crate::clock::per_poll(conn));
    }
}

/// nginx's first debug line of a connection, to the listening address's
/// (default server's) logs: `*5 accept: 127.0.0.1:40312 fd:9`.
fn log_accept(log: &ErrorLog, info: &ConnInfo) {
    if info.unix.is_some() {
        crate::log_debug!(log, info.debug, "*{} accept: unix: fd:{}", info.id, info.fd);
    } else {
        crate::log_debug!(log, info.debug, "*{} accept: {} fd:{}", info.id, info.peer, info.fd);
    }
}

/// Runs [`run`] on a duplicate of the listening socket and, should it
/// panic (a bug: it holds no request), logs it and starts it again, so a
/// worker never silently stops accepting on an address while it keeps
/// serving the connections it has.
pub async fn supervise<A: Acceptor>(listener: std::net::TcpListener, a: A, w: Rc<WorkerCtx>, stop: Rc<Notify>) {
    let addr = a.addr();
    let h = a.clone();
    let handoff: super::Handoff = Rc::new(move |w, handed, peer, guard| match handed {
        super::Handed::Plain(stream) => h.accepted(w, stream, peer, guard),
        super::Handed::Tls(tls) => h.accepted_tls(w, tls, peer, guard),
    });
    w.handoff.borrow_mut().push((addr, handoff));
    loop {
        let l = match listener.try_clone() {
            Ok(l) => l,
            Err(e) => {
                log_error!(Level::Alert, "worker {}: dup() of the listener on {} failed: {}", w.index, addr, e);
                return;
            }
        };
        let task = tokio::task::spawn_local(crate::clock::per_poll(run(l, a.clone(), w.clone(), stop.clone())));
        match task.await {
            Err(e) if e.is_panic() && !w.draining.get() => {
                log_to!(a.log(), Level::Alert, "the accept loop on {} panicked, started again", addr);
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            _ => return,
        }
    }
}

pub async fn run<A: Acceptor>(listener: std::net::TcpListener, a: A, w: Rc<WorkerCtx>, stop: Rc<Notify>) {
    // SAFETY: the std listener owns its descriptor, which stays open and
    // unchanged until the AsyncFd (its only owner from here on) is dropped.
    let listener = match unsafe { AsyncFd::register_with_interest(listener, Interest::READABLE) } {
        Ok(l) => l,
        Err(e) => {
            log_error!(Level::Alert, "worker {}: listener registration failed: {}", w.index, e);
            return;
        }
    };
    let addr = a.addr();
    let log = a.log();
    let mut paused: Option<Paused> = None;
    let mut last_log: Option<std::time::Instant> = None;
    // accept failed and the loop yielded once before pausing.
    let mut yielded = false;
    // One wait for the stop signal for the loop's life: a new one per turn
    // would cost its setup per connection, and a `notify_waiters` between
    // turns would reach none.
    let stopped = stop.notified();
    tokio::pin!(stopped);
    stopped.as_mut().enable();
    loop {
        if w.draining.get() {
            return;
        }
        while w.active.get() >= w.max_conns {
            log_to!(log, Level::Alert, "{} worker_connections are not enough", w.max_conns);
            tokio::select! {
                _ = w.slot.notified() => {}
                _ = &mut stopped => return,
            }
        }
        let mut ready = tokio::select! {
            r = listener.readable() => match r {
                Ok(g) => g,
                Err(_) => return,
            },
            _ = &mut stopped => return,
        };
        let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
        let (fd, peer) = match rustix::net::acceptfrom_with(listener.get_ref(), flags) {
            Ok(r) => r,
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::INTR => {
                ready.clear_ready();
                continue;
            }
            Err(e) if e == rustix::io::Errno::CONNABORTED => continue,
            Err(e) => {
                // EMFILE and friends: the pending connection stays in the
                // listen queue. First let the connections just spawned run
                // once (one that reads EOF closes its descriptor at once);
                // if accept still fails, stop accepting for 500 ms (nginx's
                // accept_mutex_delay) instead of retrying at once, which
                // would spin and write a line per attempt. One error-log
                // line per 10 s at most, however often descriptors run out.
                drop(ready);
                if !yielded {
                    yielded = true;
                    tokio::task::yield_now().await;
                    continue;
                }
                let now = std::time::Instant::now();
                let p = paused.get_or_insert(Paused { since: now, tries: 0, logged: false });
                p.tries += 1;
                if last_log.is_none_or(|t| now.duration_since(t) >= PAUSE_LOG_EVERY) {
                    last_log = Some(now);
                    let (n, text) = (e.raw_os_error(), crate::process::signal::strerror(e.raw_os_error()));
                    let ms = now.duration_since(p.since).as_millis();
                    if p.logged || ms > 0 {
                        log_to!(log, Level::Crit, "accept4() failed ({n}: {text}), still paused after {ms} ms");
                    } else {
                        log_to!(
                            log,
                            Level::Crit,
                            "accept4() failed ({n}: {text}), accept paused, retrying every 500 ms"
                        );
                    }
                    p.logged = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(ACCEPT_PAUSE) => {}
                    _ = &mut stopped => return,
                }
                continue;
            }
        };
        drop(ready);
        yielded = false;
        crate::worker::unwind::accept_hook();
        if let Some(p) = paused.take()
            && p.logged
        {
            log_to!(
                log,
                Level::Notice,
                "accepting again after {} ms paused ({} retries)",
                p.since.elapsed().as_millis(),
                p.tries
            );
        }
        let stream = std::net::TcpStream::from(fd);
        let peer = peer.and_then(|a| SocketAddr::try_from(a).ok()).unwrap_or(addr);
        let guard = ConnGuard::new(w.clone());
        a.accepted(&w, stream, peer, guard);
    }
}
