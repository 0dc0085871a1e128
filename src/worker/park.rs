//! Parking for long-idle keep-alive connections.
//!
//! A connection that stays idle past a short threshold gives up its tokio
//! task and registration (about 1 KB together) and is kept here as a bare
//! socket plus a few numbers, watched by one epoll instance per worker.
//! When it becomes readable it is re-registered with tokio and served by a
//! fresh task. Busy connections never pay for this (they are never idle long
//! enough); a server holding thousands of idle keep-alive connections keeps
//! them at well under nginx's per-connection footprint.

use std::cell::RefCell;
use std::net::TcpStream;
use std::os::fd::OwnedFd;
use std::rc::Rc;

use rustix::event::epoll;
use tokio::io::unix::AsyncFd;

use super::{ConnGuard, WorkerCtx};
use crate::http::handler::ctx::ConnInfo;
use crate::log::error::Level;
use crate::log_error;

struct Parked {
    stream: TcpStream,
    info: ConnInfo,
    group: usize,
    deadline: u64,
    _guard: ConnGuard,
}

pub struct Parking {
    epoll: Option<OwnedFd>,
    /// Parked since the last sweep; many at once means much freed memory.
    recent: std::cell::Cell<usize>,
    slots: RefCell<Vec<Option<Parked>>>,
    free: RefCell<Vec<usize>>,
}

impl Default for Parking {
    fn default() -> Self {
        Self::new()
    }
}

impl Parking {
    pub fn new() -> Parking {
        let epoll = match epoll::create(epoll::CreateFlags::CLOEXEC) {
            Ok(fd) => Some(fd),
            Err(e) => {
                log_error!(Level::Warn, "epoll_create() for idle connections failed ({}); parking disabled", e);
                None
            }
        };
        Parking {
            epoll,
            recent: std::cell::Cell::new(0),
            slots: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.epoll.is_some()
    }

    /// Takes over an idle connection until it is readable or `deadline`.
    pub fn park(&self, stream: TcpStream, info: ConnInfo, group: usize, deadline: u64, guard: ConnGuard) {
        let Some(ep) = &self.epoll else { return };
        let mut slots = self.slots.borrow_mut();
        let idx = self.free.borrow_mut().pop().unwrap_or(slots.len());
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        if epoll::add(ep, &stream, epoll::EventData::new_u64(idx as u64), flags).is_err() {
            return;
        }
        let p = Parked { stream, info, group, deadline, _guard: guard };
        self.recent.set(self.recent.get() + 1);
        if idx == slots.len() {
            slots.push(Some(p));
        } else {
            slots[idx] = Some(p);
        }
        drop(slots);
        self.publish();
    }

    /// Connections parked now: `sluice_status`'s `connections.parked`
    /// gauge, in this worker's counters.
    fn publish(&self) {
        let n = self.slots.borrow().len().saturating_sub(self.free.borrow().len());
        crate::metrics::with_local(|m| m.set_parked(n));
    }

    fn take(&self, idx: usize) -> Option<Parked> {
        let p = self.slots.borrow_mut().get_mut(idx)?.take()?;
        self.free.borrow_mut().push(idx);
        if let Some(ep) = &self.epoll {
            let _ = epoll::delete(ep, &p.stream);
        }
        self.publish();
        Some(p)
    }

    /// Closes parked connections whose keep-alive time is up (all of them
    /// when `all`, for a draining worker), visiting slots from `from` on,
    /// at most `max` closes; returns where to go on, or None when done.
    ///
    /// Why at most `max`: closing a socket costs several microseconds (the
    /// FIN goes out within the call), so the thousands of a flood that
    /// timed out in the same second would hold the worker for tens of
    /// milliseconds; the tick pauses between passes instead (see
    /// `worker::sweep`). A slot is judged when visited: one freed and
    /// reused between passes holds a connection parked since, with its own
    /// deadline.
    pub fn expire(&self, now: u64, all: bool, from: usize, max: usize) -> Option<usize> {
        if from == 0 && self.recent.replace(0) >= 256 {
            super::trim::release_free_memory();
        }
        let mut closed = 0;
        let mut i = from;
        loop {
            let due = match self.slots.borrow().get(i) {
                None => return None,
                Some(s) => s.as_ref().is_some_and(|p| all || p.deadline <= now),
            };
            if due {
                if closed == max {
                    return Some(i);
                }
                // Dropping the socket closes it, which also removes it from
                // epoll.
                drop(self.take(i));
                closed += 1;
            }
            i += 1;
        }
    }
}

/// An epoll instance of the worker's own (parked connections, a UDP
/// listener's inline sessions), registered with the event loop to wake it
/// when any of its descriptors is readable.
pub fn watch(ep: OwnedFd) -> std::io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `ep` is an OwnedFd: a valid descriptor that stays open and
    // unchanged until the AsyncFd (its only owner) is dropped.
    unsafe { AsyncFd::register_with_interest(ep, tokio::io::Interest::READABLE) }.map_err(std::io::Error::from)
}

/// Resumes parked connections as they become readable.
pub async fn run(w: Rc<WorkerCtx>) {
    let Some(ep) = w.parking.epoll.as_ref().and_then(|fd| fd.try_clone().ok()) else { return };
    let afd = match watch(ep) {
        Ok(a) => a,
        Err(e) => {
            log_error!(Level::Warn, "registering the idle-connection epoll failed ({})", e);
            return;
        }
    };
    let mut events: Vec<epoll::Event> = Vec::with_capacity(256);
    loop {
        let Ok(mut guard) = afd.readable().await else { return };
        events.clear();
        let zero = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        match epoll::wait(afd.get_ref(), rustix::buffer::spare_capacity(&mut events), Some(&zero)) {
            Ok(0) => guard.clear_ready(),
            Ok(_) => {}
            Err(_) => {
                guard.clear_ready();
                continue;
            }
        }
        for ev in &events {
            let Some(p) = w.parking.take(ev.data.u64() as usize) else { continue };
            // Readable now: served without registering until it must wait.
            let sock = crate::http::connection::sock::Sock::Raw(p.stream);
            // Boxed for the reason accept gives.
            let conn = Box::pin(crate::http::connection::h1::conn::serve(sock, p.info, p.group, p._guard));
            tokio::task::spawn_local(crate::clock::per_poll(conn));
        }
    }
}
