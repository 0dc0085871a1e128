//! TCP sessions run by an epoll loop of the worker's own: no task, no
//! tokio registration and no timer per session.
//!
//! Many stream sessions are short: connect, a request, its answer, close
//! (a database query on a new connection, a health probe, st3 of
//! bench/stream.py). As a task, each paid for a spawn, a registration of
//! each of its two sockets with the event loop (an aligned allocation, an
//! `epoll_ctl` to add and one to delete before the close), wake-ups
//! through tokio's scheduler and a timer for `proxy_timeout`: twice
//! nginx's user-space instructions per session. Here both sockets join
//! one epoll instance of the worker's (edge-triggered, as nginx's; closing
//! a socket takes it out), the loop of that instance moves the bytes
//! through the worker's copy buffer as the sockets become ready, and one
//! min-heap of deadlines with one timer serves every session's connect and
//! idle timeouts.
//!
//! Only the small start of a session runs here. A direction that proves
//! bulky (a read filled the buffer, or 64 KiB moved) or a destination that
//! does not take a whole read hands both sockets to a task, which goes on
//! as the task sessions do (`relay::splice_both`: the pending bytes
//! first, then splice(2), where the bytes never enter the worker's
//! memory). Sessions that need a wait of their own from the start stay
//! tasks ([`eligible`]): TLS on either side, the PROXY protocol, preread,
//! a `proxy_pass` with variables, rates, `proxy_bind`, `proxy_half_close`,
//! unix sockets, `return` and `pass`. Either way the same phases,
//! balancer (`upstream::Tries`), log lines, variables and counts.

use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;

use rustix::event::epoll::{self, EventFlags};
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;

use super::conf::{Addr, Content, Pass, Rate, StreamConf};
use super::deadlines::Deadlines;
use super::relay::{Counters, End};
use super::session::Session;
use super::splice::{BULKY, Carry, SMALL};
use super::upstream::Tries;
use crate::log::error::Level;
use crate::upstream::peers::Picked;
use crate::worker::{ConnGuard, WorkerCtx};

/// Whether sessions accepted on `addr` can run inline (see the module's
/// text); a property of the configuration.
pub fn eligible(addr: &Addr) -> bool {
    let conf = &addr.server.conf;
    let p = &conf.proxy;
    addr.unix.is_none()
        && !addr.ssl
        && !addr.proxy_protocol
        && !conf.ssl_preread
        && !p.ssl
        && p.tls.is_none()
        && !p.proxy_protocol
        && p.bind.is_none()
        && !p.half_close
        && matches!(p.upload_rate, Rate::Fixed(0))
        && matches!(p.download_rate, Rate::Fixed(0))
        && match &addr.server.content {
            Content::Proxy(Pass::Fixed(u)) => u.peers.iter().all(|peer| peer.unix.is_none()),
            _ => false,
        }
}

/// Readiness a session's sockets reported (edge-triggered: kept until a
/// read or write finds the socket drained or full).
const C_IN: u8 = 1;
const C_OUT: u8 = 2;
/// The peer's end (or an error) was reported: a short read does not mean
/// drained then, the next read finds the end.
const C_EOF: u8 = 4;
/// The origin's, three bits up.
const O_SHIFT: u8 = 3;
const O_IN: u8 = C_IN << O_SHIFT;
const O_OUT: u8 = C_OUT << O_SHIFT;
const O_EOF: u8 = C_EOF << O_SHIFT;

/// One inline session.
struct Sess {
    s: Session,
    client: OwnedFd,
    /// The origin being connected, or connected.
    origin: Option<OwnedFd>,
    tries: Tries,
    picked: Option<Picked>,
    /// When the current try started (a connected try's times count from
    /// it, as the task sessions').
    t0: Instant,
    relaying: bool,
    ready: u8,
    c: Counters,
    /// The deadline of this session's live entry in the heap (connect
    /// timeout, then `proxy_timeout` from the last move).
    due: Instant,
    slot: u32,
    era: u32,
    /// `limit_conn` holds, released after the log line.
    holds: Vec<super::limit::Hold>,
}

/// The inline sessions of one worker.
pub struct Driver {
    ep: AsyncFd<OwnedFd>,
    slots: RefCell<Vec<Option<Box<Sess>>>>,
    free: RefCell<Vec<u32>>,
    live: Cell<usize>,
    next_era: Cell<u32>,
    deadlines: RefCell<Deadlines>,
    /// The deadline the loop's timer is set to.
    armed: Cell<Option<Instant>>,
    /// Wakes the loop to set its timer earlier: a session started by the
    /// accept loop with a deadline before the armed one.
    rearm: Notify,
}

thread_local! {
    /// This worker's driver; its loop's task holds it (and drops it with
    /// the worker's event loop).
    static DRIVER: RefCell<Weak<Driver>> = const { RefCell::new(Weak::new()) };
}

/// This worker's driver, made and its loop spawned at first use; None
/// when no epoll instance could be made (the sessions then run as tasks).
pub fn driver() -> Option<Rc<Driver>> {
    DRIVER.with(|cell| {
        if let Some(d) = cell.borrow().upgrade() {
            return Some(d);
        }
        let ep =
            epoll::create(epoll::CreateFlags::CLOEXEC).map_err(io::Error::from).and_then(crate::worker::park::watch);
        let ep = match ep {
            Ok(ep) => ep,
            Err(e) => {
                crate::log_error!(Level::Alert, "epoll_create() for stream sessions failed ({})", e);
                return None;
            }
        };
        let d = Rc::new(Driver {
            ep,
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            live: Cell::new(0),
            next_era: Cell::new(0),
            deadlines: RefCell::new(Deadlines::default()),
            armed: Cell::new(None),
            rearm: Notify::new(),
        });
        *cell.borrow_mut() = Rc::downgrade(&d);
        tokio::task::spawn_local(crate::clock::per_poll(drive(d.clone())));
        Some(d)
    })
}

/// The loop: sockets' readiness and the earliest deadline.
async fn drive(d: Rc<Driver>) {
    let sleep = tokio::time::sleep_until(tokio::time::Instant::now());
    tokio::pin!(sleep);
    let mut events: Vec<epoll::Event> = Vec::with_capacity(64);
    let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
    loop {
        let next = d.deadlines.borrow().next();
        if next != d.armed.get() {
            if let Some(t) = next {
                sleep.as_mut().reset(t.into());
            }
            d.armed.set(next);
        }
        tokio::select! {
            biased;
            r = d.ep.readable() => {
                let Ok(mut guard) = r else { return };
                events.clear();
                let n = epoll::wait(d.ep.get_ref(), rustix::buffer::spare_capacity(&mut events), Some(&zero))
                    .unwrap_or(0);
                // Fewer than asked for: the instance is drained, and what
                // comes next makes it readable again.
                if n < events.capacity() {
                    guard.clear_ready();
                }
                drop(guard);
                for ev in &events {
                    d.event(ev.data.u64(), ev.flags);
                }
            }
            () = &mut sleep, if d.armed.get().is_some() => d.expire(),
            () = d.rearm.notified() => {}
        }
    }
}

/// An event's data: the session's era, slot and side (1: the origin).
fn token(era: u32, slot: u32, origin: bool) -> epoll::EventData {
    epoll::EventData::new_u64((u64::from(era) << 32) | (u64::from(slot) << 1) | u64::from(origin))
}

fn os(e: impl Into<io::Error>) -> String {
    crate::process::signal::os_error(&e.into())
}

/// What one read and the write after it did.
enum Flow {
    Moved,
    Drained,
    End(End),
    /// The direction goes on in a task, from here.
    Promote(Carry),
}

impl Driver {
    /// Starts a session accepted on `addr`: nginx's phases up to content,
    /// then its first try of a peer.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        &self,
        w: &Rc<WorkerCtx>,
        sc: Arc<StreamConf>,
        addr: Arc<Addr>,
        stream: std::net::TcpStream,
        peer: SocketAddr,
        local: SocketAddr,
        guard: ConnGuard,
    ) {
        let _ = stream.set_nodelay(addr.server.conf.tcp_nodelay);
        let client = OwnedFd::from(stream);
        let fd = client.as_raw_fd();
        let r = catch_unwind(AssertUnwindSafe(|| {
            let s = Session::tcp(w.clone(), sc, addr, peer, local, guard, fd);
            let Some(holds) = super::session::preaccess_and_access(&s) else {
                s.finish();
                return None;
            };
            let Content::Proxy(Pass::Fixed(u)) = &s.server().content else {
                s.finish();
                return None;
            };
            let tries = Tries::new(&s, u.clone());
            let (slot, era) = self.reserve();
            let now = crate::clock::mono();
            let sess = Box::new(Sess {
                s,
                client,
                origin: None,
                tries,
                picked: None,
                t0: now,
                relaying: false,
                ready: 0,
                c: Counters::new(),
                due: now,
                slot,
                era,
                holds,
            });
            // The client joins at once: what it sends while the origin
            // connects is reported by then.
            let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
            if let Err(e) = epoll::add(self.ep.get_ref(), &sess.client, token(era, slot, false), flags) {
                sess.s.log(Level::Alert, format_args!("epoll_ctl() failed ({})", os(e)));
                sess.s.status.set(500);
                self.release(slot);
                sess.s.finish();
                return None;
            }
            Some((slot, self.connect_next(sess)))
        }));
        match r {
            Ok(Some((_, Some(sess)))) => self.put(sess),
            Ok(Some((slot, None))) => self.release(slot),
            Ok(None) => {}
            Err(_) => crate::log_error!(Level::Alert, "a stream session's start panicked"),
        }
    }

    /// A free slot and a new era for a session.
    fn reserve(&self) -> (u32, u32) {
        let era = self.next_era.get().wrapping_add(1);
        self.next_era.set(era);
        self.live.set(self.live.get() + 1);
        let slot = match self.free.borrow_mut().pop() {
            Some(i) => i,
            None => {
                let mut slots = self.slots.borrow_mut();
                slots.push(None);
                (slots.len() - 1) as u32
            }
        };
        (slot, era)
    }

    /// The session's slot is free again (it ended, or went to a task).
    fn release(&self, slot: u32) {
        self.free.borrow_mut().push(slot);
        self.live.set(self.live.get().saturating_sub(1));
        let slots = self.slots.borrow();
        self.deadlines.borrow_mut().compact(self.live.get(), |t, slot, era| {
            slots.get(slot as usize).and_then(Option::as_ref).is_some_and(|s| s.era == era && s.due == t)
        });
    }

    fn take(&self, slot: u32, era: u32) -> Option<Box<Sess>> {
        let mut slots = self.slots.borrow_mut();
        let cell = slots.get_mut(slot as usize)?;
        if cell.as_ref().is_some_and(|s| s.era == era) { cell.take() } else { None }
    }

    fn put(&self, sess: Box<Sess>) {
        if let Some(cell) = self.slots.borrow_mut().get_mut(sess.slot as usize) {
            *cell = Some(sess);
        }
    }

    /// Runs `f` on the session in `slot` (of `era`), taken out of the
    /// table meanwhile: back when `f` keeps it, its slot freed when it
    /// ended or moved to a task, or when `f` panicked (the session is
    /// dropped then: its sockets close, the others go on).
    fn with(&self, slot: u32, era: u32, f: impl FnOnce(Box<Sess>) -> Option<Box<Sess>>) {
        let Some(sess) = self.take(slot, era) else { return };
        match catch_unwind(AssertUnwindSafe(|| f(sess))) {
            Ok(Some(sess)) => self.put(sess),
            Ok(None) => self.release(slot),
            Err(_) => {
                crate::log_error!(Level::Alert, "a stream session panicked; it is closed");
                self.release(slot);
            }
        }
    }

    fn event(&self, data: u64, flags: EventFlags) {
        let (era, slot, origin) = ((data >> 32) as u32, ((data & 0xffff_ffff) >> 1) as u32, data & 1 == 1);
        let mut bits = 0;
        if flags.intersects(EventFlags::IN | EventFlags::ERR | EventFlags::HUP | EventFlags::RDHUP) {
            bits |= C_IN;
        }
        if flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
            bits |= C_OUT;
        }
        if flags.intersects(EventFlags::ERR | EventFlags::HUP | EventFlags::RDHUP) {
            bits |= C_EOF;
        }
        self.with(slot, era, |mut sess| {
            sess.ready |= if origin { bits << O_SHIFT } else { bits };
            if sess.relaying {
                return self.pump(sess);
            }
            // Connecting: the client's bytes wait for the origin.
            if !origin || sess.ready & O_OUT == 0 {
                return Some(sess);
            }
            let res = match &sess.origin {
                Some(fd) => match rustix::net::sockopt::socket_error(fd) {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) | Err(e) => Err(e),
                },
                None => Err(Errno::NOTCONN),
            };
            match res {
                Ok(()) => {
                    self.connected(&mut sess);
                    self.pump(sess)
                }
                Err(e) => self.retry(sess, &format_args!("connect() failed ({}) while connecting to upstream", os(e))),
            }
        });
    }

    /// Tries peers until one connects (or is connecting); None when no
    /// peer is left (the session ended).
    fn connect_next(&self, mut sess: Box<Sess>) -> Option<Box<Sess>> {
        loop {
            let Some(i) = sess.tries.pick(&sess.s) else {
                sess.s.finish();
                return None;
            };
            let addr = sess.tries.peer(&i).addr;
            sess.t0 = crate::clock::mono();
            sess.ready &= !(O_IN | O_OUT | O_EOF);
            match self.connect(&sess, addr) {
                Ok((fd, done)) => {
                    sess.origin = Some(fd);
                    sess.picked = Some(i);
                    if done {
                        sess.ready |= O_OUT;
                        self.connected(&mut sess);
                        return self.pump(sess);
                    }
                    let due = sess.t0 + sess.s.server().conf.proxy.connect_timeout;
                    self.schedule(&mut sess, due);
                    return Some(sess);
                }
                Err(why) => {
                    if !sess.tries.failed(&sess.s, &i, &format_args!("{why} while connecting to upstream")) {
                        sess.s.finish();
                        return None;
                    }
                }
            }
        }
    }

    /// A socket connecting (or connected: true) to `addr`, in the epoll
    /// instance.
    fn connect(&self, sess: &Sess, addr: SocketAddr) -> Result<(OwnedFd, bool), String> {
        let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
        let fd =
            rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)
                .map_err(|e| format!("socket() failed ({})", os(e)))?;
        let done = match rustix::net::connect(&fd, &addr) {
            Ok(()) => true,
            // On loopback the handshake is over when connect(2) returns.
            Err(Errno::INPROGRESS) => rustix::net::getpeername(&fd).is_ok(),
            Err(e) => return Err(format!("connect() failed ({})", os(e))),
        };
        let _ = rustix::net::sockopt::set_tcp_nodelay(&fd, sess.s.server().conf.tcp_nodelay);
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        epoll::add(self.ep.get_ref(), &fd, token(sess.era, sess.slot, true), flags)
            .map_err(|e| format!("epoll_ctl() failed ({})", os(e)))?;
        Ok((fd, done))
    }

    /// The current try failed (`why`): the next one, or the session's end.
    fn retry(&self, mut sess: Box<Sess>, why: &dyn std::fmt::Display) -> Option<Box<Sess>> {
        sess.origin = None;
        let Some(i) = sess.picked.take() else {
            sess.s.finish();
            return None;
        };
        if sess.tries.failed(&sess.s, &i, why) {
            return self.connect_next(sess);
        }
        sess.s.finish();
        None
    }

    fn connected(&self, sess: &mut Sess) {
        if let (Some(i), Some(fd)) = (&sess.picked, &sess.origin) {
            sess.tries.connected(&sess.s, i, sess.t0, || local_name(fd));
        }
        sess.relaying = true;
        sess.c.moved();
        let due = sess.c.active.get() + sess.s.server().conf.proxy.timeout;
        self.schedule(sess, due);
    }

    fn schedule(&self, sess: &mut Sess, due: Instant) {
        sess.due = due;
        self.deadlines.borrow_mut().push(due, sess.slot, sess.era);
        if self.armed.get().is_none_or(|a| due < a) {
            self.rearm.notify_one();
        }
    }

    /// Moves what both sides have, as far as the other takes it.
    fn pump(&self, mut sess: Box<Sess>) -> Option<Box<Sess>> {
        loop {
            let mut moved = false;
            for upward in [true, false] {
                let (src_in, dst_out) = if upward { (C_IN, O_OUT) } else { (O_IN, C_OUT) };
                if sess.ready & src_in == 0 || sess.ready & dst_out == 0 {
                    continue;
                }
                match copy(&mut sess, upward) {
                    Flow::Moved => moved = true,
                    Flow::Drained => {}
                    Flow::End(end) => {
                        finish(*sess, end);
                        return None;
                    }
                    Flow::Promote(carry) => {
                        self.promote(*sess, upward, carry);
                        return None;
                    }
                }
            }
            if !moved {
                return Some(sess);
            }
        }
    }

    /// The session goes on in a task: both sockets leave the epoll
    /// instance for the event loop's registrations.
    fn promote(&self, sess: Sess, upward: bool, carry: Carry) {
        let Sess { s, client, origin, tries, picked, t0, c, holds, .. } = sess;
        let (Some(origin), Some(picked)) = (origin, picked) else { return };
        let _ = epoll::delete(self.ep.get_ref(), &client);
        let _ = epoll::delete(self.ep.get_ref(), &origin);
        let carry = if upward { (carry, Carry::default()) } else { (Carry::default(), carry) };
        let task = async move {
            let registered = tokio::net::TcpStream::from_std(client.into())
                .and_then(|cl| Ok((cl, tokio::net::TcpStream::from_std(origin.into())?)));
            let end = match registered {
                Ok((cl, or)) => {
                    let p = &s.server().conf.proxy;
                    super::relay::splice_both(&cl, &or, &c, p.timeout, t0, false, carry).await
                }
                Err(e) => End::Error { msg: format!("epoll_ctl() failed ({})", os(e)), upstream: false, sending: true },
            };
            wrap_up(&s, &tries, &picked, &c, t0, end);
            drop(holds);
        };
        tokio::task::spawn_local(crate::clock::per_poll(Box::pin(task)));
    }

    /// Deadlines due: connects that took too long go to the next peer,
    /// sessions silent for `proxy_timeout` end.
    fn expire(&self) {
        let now = crate::clock::mono();
        loop {
            let due = self.deadlines.borrow_mut().pop_due(now);
            let Some((t, slot, era)) = due else { return };
            self.with(slot, era, |mut sess| {
                if sess.due != t {
                    return Some(sess);
                }
                if !sess.relaying {
                    let msg = "upstream timed out (110: Connection timed out) while connecting to upstream";
                    return self.retry(sess, &msg);
                }
                let due = sess.c.active.get() + sess.s.server().conf.proxy.timeout;
                if due > now {
                    self.schedule(&mut sess, due);
                    return Some(sess);
                }
                finish(*sess, End::TimedOut);
                None
            });
        }
    }
}

/// One read from a side and the write of it to the other.
fn copy(sess: &mut Sess, upward: bool) -> Flow {
    let Some(origin) = &sess.origin else { return Flow::Drained };
    let (src, dst, src_in, dst_out, src_eof) =
        if upward { (&sess.client, origin, C_IN, O_OUT, C_EOF) } else { (origin, &sess.client, O_IN, C_OUT, O_EOF) };
    let c = &sess.c;
    let counter = if upward { &c.up } else { &c.down };
    super::splice::with_buf(|buf| {
        let n = match rustix::net::recv(src, &mut *buf, RecvFlags::empty()) {
            Ok((0, _)) => return Flow::End(End::Closed { upstream: !upward }),
            Ok((n, _)) => n.min(buf.len()),
            Err(Errno::AGAIN) => {
                sess.ready &= !src_in;
                return Flow::Drained;
            }
            Err(e) => {
                let msg = format!("recv() failed ({})", os(e));
                return Flow::End(End::Error { msg, upstream: !upward, sending: false });
            }
        };
        // A short read took all the socket had (as nginx's recv
        // concludes), unless its end was reported: that needs one more.
        if n < buf.len() && sess.ready & src_eof == 0 {
            sess.ready &= !src_in;
        }
        c.moved();
        if !upward && c.first_byte.get().is_none() {
            c.first_byte.set(Some(crate::clock::since_ms(sess.t0)));
        }
        let m = match rustix::net::send(dst, &buf[..n], SendFlags::NOSIGNAL) {
            Ok(m) => m,
            Err(Errno::AGAIN) => 0,
            Err(e) => {
                let msg = format!("send() failed ({})", os(e));
                return Flow::End(End::Error { msg, upstream: upward, sending: true });
            }
        };
        counter.set(counter.get() + m as u64);
        let total = counter.get() + (n - m) as u64;
        let bulky = n == SMALL || total >= BULKY;
        if m < n {
            sess.ready &= !dst_out;
            return Flow::Promote(Carry { rest: buf[m..n].to_vec(), total, bulky });
        }
        if bulky {
            return Flow::Promote(Carry { rest: Vec::new(), total, bulky });
        }
        Flow::Moved
    })
}

/// The session's end in the loop: both sockets closed, then the end's
/// lines and counts (`wrap_up`).
fn finish(sess: Sess, end: End) {
    let Sess { s, client, origin, tries, picked, t0, c, holds, .. } = sess;
    drop(origin);
    drop(client);
    match picked {
        Some(p) => wrap_up(&s, &tries, &p, &c, t0, end),
        None => s.finish(),
    }
    drop(holds);
}

/// A relay with peer `picked` ended: its counts, nginx's lines, the
/// peer's accounting and the access log line.
fn wrap_up(s: &Session, tries: &Tries, picked: &Picked, c: &Counters, t0: Instant, end: End) {
    super::proxy::account(s, c, 0, t0);
    super::proxy::ended(s, Some(&tries.peer(picked).name), end);
    tries.done(s, picked);
    s.finish();
}

/// The origin socket's local address, for nginx's "proxy ... connected
/// to" line.
fn local_name(fd: &OwnedFd) -> String {
    match rustix::net::getsockname(fd).ok().and_then(|a| SocketAddr::try_from(a).ok()) {
        Some(a) => a.to_string(),
        None => "unix:".to_string(),
    }
}
