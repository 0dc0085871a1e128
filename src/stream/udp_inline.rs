//! Datagram sessions run by their listening socket's own loop: no task, no
//! tokio registration and no timer per session.
//!
//! Most UDP proxying is DNS-like: a query, one answer, done
//! (`proxy_responses 1`), so a session lives for one round trip. As a
//! task of its own, each such session paid for a spawn, a registration of
//! its origin socket with the event loop (an allocation, an `epoll_ctl` to
//! add and one to delete), and a timer for `proxy_timeout`: about twice
//! nginx's user-space instructions per query. Here the listener's loop
//! keeps the sessions in a table: each origin socket is added to one epoll
//! instance per listener (closing the socket takes it out again, no
//! system call), that epoll instance is the only thing registered with the
//! event loop, and one min-heap of deadlines with a single timer serves
//! every session's `proxy_timeout`.
//!
//! The sessions are the same as `udp`'s task sessions: the same phases
//! (`set`, `limit_conn`, access) have run before one gets here, the same
//! balancer picks its peer, the same log lines, variables and counts come
//! out. Only what needs a wait of its own stays with the task sessions
//! (`eligible`): a `proxy_pass` with variables (the resolver), upload and
//! download rates, unix-domain peers and clients, `return` and `pass`.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use rustix::event::epoll;
use tokio::io::unix::AsyncFd;

use super::conf::{Content, Pass, Rate, Server};
use super::deadlines::Deadlines;
use super::session::{Close, Session, Try};
use super::udp_socket::{Client, Listening};
use crate::config::proxy::Upstream;
use crate::log::error::Level;
use crate::upstream::peers::Picked;
use crate::worker::ConnGuard;

/// Whether `server`'s sessions can run inline (see the module's text); a
/// property of the configuration, so decided before a session starts.
pub fn eligible(server: &Server, sock: &Listening) -> bool {
    let p = &server.conf.proxy;
    matches!(sock, Listening::Ip(_))
        && matches!(p.upload_rate, Rate::Fixed(0))
        && matches!(p.download_rate, Rate::Fixed(0))
        && match &server.content {
            Content::Proxy(Pass::Fixed(u)) => u.peers.iter().all(|peer| peer.unix.is_none()),
            _ => false,
        }
}

/// One inline session.
struct Sess {
    /// Boxed: the session is large, and the table's entries move.
    s: Box<Session>,
    /// The origin socket, connected to the peer, in the listener's epoll.
    fd: OwnedFd,
    client: Client,
    up: Arc<Upstream>,
    picked: Picked,
    name: Arc<str>,
    /// Datagrams the client sent in this session, and answers relayed.
    requests: u64,
    responses: u64,
    started: Instant,
    /// The last datagram either way: `proxy_timeout` counts from it.
    active: Instant,
    /// Bumped per use of the slot, so a stale deadline finds no session.
    era: u32,
    /// `limit_conn` holds and the worker's connection slot: released when
    /// the session ends.
    _holds: Vec<super::limit::Hold>,
    _guard: ConnGuard,
}

/// A session's place in the table, as the listener's client map keeps it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key {
    slot: u32,
    era: u32,
}

/// How a session's datagram or answer left it.
pub enum Step {
    /// Still waiting for answers or datagrams.
    Open,
    /// Ended: the listener's map forgets the client.
    Ended(Client),
}

/// The inline sessions of one listening socket.
pub struct Inline {
    ep: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Option<Sess>>>,
    free: RefCell<Vec<u32>>,
    next_era: Cell<u32>,
    deadlines: RefCell<Deadlines>,
    /// `epoll_wait`'s events, kept between turns.
    events: RefCell<Vec<epoll::Event>>,
}

impl Inline {
    pub fn new() -> io::Result<Inline> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        Ok(Inline {
            ep: crate::worker::park::watch(ep)?,
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            next_era: Cell::new(0),
            deadlines: RefCell::new(Deadlines::default()),
            events: RefCell::new(Vec::with_capacity(64)),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.free.borrow().len() == self.slots.borrow().len()
    }

    /// Starts session `s` (its phases passed) with its first datagram:
    /// picks the peer, connects a socket to it and sends. None when the
    /// session ended at once (no peer, a failed socket or send, or
    /// `proxy_responses 0`); its log line and counts are out then.
    pub fn start(
        &self,
        s: Box<Session>,
        client: Client,
        up: Arc<Upstream>,
        data: &[u8],
        holds: Vec<super::limit::Hold>,
        guard: ConnGuard,
    ) -> Option<Key> {
        let Some((u, picked, peer)) = super::upstream::pick_in(&s, up) else {
            s.finish();
            return None;
        };
        let name = peer.name.clone();
        s.up.borrow_mut().tries.push(Try::datagram(name.clone()));
        let fd = match origin_socket(peer.addr, peer.unix.is_some()) {
            Ok(fd) => fd,
            Err(e) => {
                s.log_upstream(Level::Error, format_args!("{e} while connecting to upstream"), Some(&name));
                s.status.set(502);
                super::upstream::release(&s, &u, &picked, true);
                s.finish();
                return None;
            }
        };
        super::upstream::connected(&u, &picked);
        s.log_proxy_connected(|| local_name(&fd), &name);
        let now = crate::clock::mono();
        let era = self.next_era.get().wrapping_add(1);
        self.next_era.set(era);
        let slot = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(None);
                (slots.len() - 1) as u32
            }
        };
        let timeout = s.server().conf.proxy.timeout;
        let sess = Sess {
            s,
            fd,
            client,
            up: u,
            picked,
            name,
            requests: 1,
            responses: 0,
            started: now,
            active: now,
            era,
            _holds: holds,
            _guard: guard,
        };
        if let Err(e) =
            epoll::add(self.ep.get_ref(), &sess.fd, epoll::EventData::new_u64(u64::from(slot)), epoll::EventFlags::IN)
        {
            let e = crate::process::signal::os_error(&io::Error::from(e));
            sess.s.log_upstream(
                Level::Error,
                format_args!("epoll_ctl() failed ({e}) while connecting to upstream"),
                Some(&sess.name),
            );
            sess.s.status.set(502);
            self.free.borrow_mut().push(slot);
            end(sess, true);
            return None;
        }
        self.slots.borrow_mut()[slot as usize] = Some(sess);
        self.deadlines.borrow_mut().push(now + timeout, slot, era);
        let key = Key { slot, era };
        // The first datagram counted as received when the session started.
        match self.send(key, data, true) {
            Step::Open => Some(key),
            Step::Ended(_) => None,
        }
    }

    /// A later datagram of the client's session `key`.
    pub fn more(&self, key: Key, data: &[u8]) -> Step {
        if let Some(sess) =
            self.slots.borrow_mut().get_mut(key.slot as usize).and_then(Option::as_mut).filter(|s| s.era == key.era)
        {
            sess.requests += 1;
        }
        self.send(key, data, false)
    }

    /// Datagrams this session took from its client.
    pub fn requests(&self, key: Key) -> u64 {
        self.slots
            .borrow()
            .get(key.slot as usize)
            .and_then(Option::as_ref)
            .filter(|s| s.era == key.era)
            .map_or(0, |s| s.requests)
    }

    fn send(&self, key: Key, data: &[u8], first: bool) -> Step {
        let mut slots = self.slots.borrow_mut();
        let Some(sess) = slots.get_mut(key.slot as usize).and_then(Option::as_mut).filter(|s| s.era == key.era) else {
            return Step::Open;
        };
        match rustix::net::send(&sess.fd, data, rustix::net::SendFlags::empty()) {
            Ok(n) => {
                if !first {
                    sess.s.bytes_received.set(sess.s.bytes_received.get() + data.len() as u64);
                }
                if let Some(t) = sess.s.up.borrow_mut().tries.last_mut() {
                    t.sent += n as u64;
                }
                sess.active = crate::clock::mono();
            }
            // A full socket buffer drops the datagram, as the network may.
            Err(rustix::io::Errno::AGAIN) => {}
            Err(e) => {
                let e = crate::process::signal::os_error(&io::Error::from(e));
                let msg = format_args!("send() failed ({e}) while proxying and sending to upstream");
                sess.s.log_upstream(Level::Error, msg, Some(&sess.name));
                sess.s.status.set(502);
                drop(slots);
                return self.close(key.slot, true);
            }
        }
        if answered(sess) {
            drop(slots);
            return self.close(key.slot, false);
        }
        Step::Open
    }

    /// The earliest `proxy_timeout` deadline of a session (which may have
    /// moved later since: `expire` looks).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.borrow().next()
    }

    /// Waits until an origin socket has something, then relays what the
    /// ready ones sent; returns the clients whose sessions ended. Safe to
    /// drop while waiting (nothing is read before the wait ends).
    pub async fn origins(&self, sock: &Listening) -> Vec<Client> {
        let mut ended = Vec::new();
        let Ok(mut guard) = self.ep.readable().await else { return ended };
        let mut events = std::mem::take(&mut *self.events.borrow_mut());
        events.clear();
        let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        match epoll::wait(self.ep.get_ref(), rustix::buffer::spare_capacity(&mut events), Some(&zero)) {
            Ok(0) | Err(_) => guard.clear_ready(),
            Ok(_) => {}
        }
        drop(guard);
        for ev in &events {
            if let Step::Ended(c) = self.answer(ev.data.u64() as u32, sock) {
                ended.push(c);
            }
        }
        *self.events.borrow_mut() = events;
        ended
    }

    /// The origin socket of `slot` is readable: one datagram (or its
    /// error) is read and the answer goes to the client.
    fn answer(&self, slot: u32, sock: &Listening) -> Step {
        let mut slots = self.slots.borrow_mut();
        let Some(sess) = slots.get_mut(slot as usize).and_then(Option::as_mut) else { return Step::Open };
        let got = super::udp_origin::with_buf(|buf| {
            rustix::net::recv(&sess.fd, &mut *buf, rustix::net::RecvFlags::empty()).map(|(n, _)| {
                let n = n.min(buf.len());
                // Straight to the listening socket, not through its
                // registration's write readiness: a full buffer drops the
                // answer, as a send that would block drops a datagram.
                let sent = match (sock, &sess.client) {
                    (Listening::Ip(u), Client::Ip(a)) => {
                        rustix::net::sendto(u.as_fd(), &buf[..n], rustix::net::SendFlags::empty(), a).is_ok()
                    }
                    _ => false,
                };
                (n, sent)
            })
        });
        match got {
            Ok((n, sent)) => {
                let since = crate::clock::since_ms(sess.started);
                if let Some(t) = sess.s.up.borrow_mut().tries.last_mut() {
                    t.first_byte_ms.get_or_insert(since);
                    t.received += n as u64;
                }
                sess.responses += 1;
                sess.active = crate::clock::mono();
                if sent {
                    sess.s.bytes_sent.set(sess.s.bytes_sent.get() + n as u64);
                }
                if answered(sess) {
                    drop(slots);
                    return self.close(slot, false);
                }
                Step::Open
            }
            Err(rustix::io::Errno::AGAIN) => Step::Open,
            Err(e) => {
                let e = crate::process::signal::os_error(&io::Error::from(e));
                let msg = format_args!("recv() failed ({e}) while proxying and reading from upstream");
                sess.s.log_upstream(Level::Error, msg, Some(&sess.name));
                sess.s.status.set(502);
                drop(slots);
                self.close(slot, true)
            }
        }
    }

    /// Ends the sessions whose `proxy_timeout` passed since their last
    /// datagram (their clients returned); the others' deadlines move to
    /// that.
    pub fn expire(&self) -> Vec<Client> {
        let mut ended = Vec::new();
        let now = crate::clock::mono();
        loop {
            let due = self.deadlines.borrow_mut().pop_due(now);
            let Some((_, slot, era)) = due else { return ended };
            let mut slots = self.slots.borrow_mut();
            let Some(sess) = slots.get_mut(slot as usize).and_then(Option::as_mut).filter(|s| s.era == era) else {
                continue;
            };
            let p = &sess.s.server().conf.proxy;
            let due = sess.active + p.timeout;
            if due > now {
                self.deadlines.borrow_mut().push(due, slot, era);
                continue;
            }
            let requests = sess.requests;
            if p.responses.is_none_or(|r| sess.responses >= r * requests) {
                sess.s.close_line.set(Some(Close::Udp { done: false, requests, responses: sess.responses }));
            } else {
                let msg = format_args!("upstream timed out (110: Connection timed out) while proxying connection");
                sess.s.log_upstream(Level::Error, msg, Some(&sess.name));
                sess.s.status.set(502);
            }
            drop(slots);
            if let Step::Ended(c) = self.close(slot, false) {
                ended.push(c);
            }
        }
    }

    /// Takes the session out of the table and ends it.
    fn close(&self, slot: u32, failed: bool) -> Step {
        let Some(sess) = self.slots.borrow_mut().get_mut(slot as usize).and_then(Option::take) else {
            return Step::Open;
        };
        self.free.borrow_mut().push(slot);
        {
            // A session has one entry in the heap: the ended ones' go once
            // they are many (see `deadlines`).
            let slots = self.slots.borrow();
            let live = slots.len() - self.free.borrow().len();
            self.deadlines.borrow_mut().compact(live, |_, slot, era| {
                slots.get(slot as usize).and_then(Option::as_ref).is_some_and(|s| s.era == era)
            });
        }
        let client = sess.client.clone();
        end(sess, failed);
        Step::Ended(client)
    }
}

/// nginx's test_finalize for datagrams: every datagram the session may
/// take came, and `proxy_responses` answers per datagram went back.
fn answered(sess: &Sess) -> bool {
    let p = &sess.s.server().conf.proxy;
    let enough_requests = p.requests == 0 || sess.requests >= p.requests;
    if enough_requests
        && let Some(r) = p.responses
        && sess.responses >= r * sess.requests
    {
        sess.s.close_line.set(Some(Close::Udp { done: true, requests: sess.requests, responses: sess.responses }));
        return true;
    }
    false
}

/// The session's end: its try's duration, the peer's accounting, the log
/// line; dropping it closes the origin socket (which leaves the epoll set)
/// and counts the session in its zone.
fn end(sess: Sess, failed: bool) {
    if let Some(t) = sess.s.up.borrow_mut().tries.last_mut() {
        t.session_ms = Some(crate::clock::since_ms(sess.started));
    }
    super::upstream::release(&sess.s, &sess.up, &sess.picked, failed);
    sess.s.finish();
}

/// A UDP socket connected to `peer` (connect(2) binds it to a port of its
/// own, as `udp_origin::Origin::udp` does).
fn origin_socket(peer: std::net::SocketAddr, unix: bool) -> Result<OwnedFd, String> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType};
    if unix {
        return Err("socket() failed (97: Address family not supported by protocol)".to_string());
    }
    let family = if peer.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let err = |e: rustix::io::Errno| crate::process::signal::os_error(&io::Error::from(e));
    let fd = rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)
        .map_err(|e| format!("socket() failed ({})", err(e)))?;
    rustix::net::connect(&fd, &peer).map_err(|e| format!("connect() failed ({})", err(e)))?;
    Ok(fd)
}

/// The origin socket's local address, for nginx's "udp proxy ... connected
/// to" line.
fn local_name(fd: &OwnedFd) -> String {
    match rustix::net::getsockname(fd.as_fd()).ok().and_then(|a| std::net::SocketAddr::try_from(a).ok()) {
        Some(a) => a.to_string(),
        None => "unix:".to_string(),
    }
}
