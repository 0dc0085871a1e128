//! Datagrams to the endpoint that owns their connection.
//!
//! Every live endpoint (one per worker per `quic` address, of every
//! configuration generation still running) holds a slot in a process-wide
//! table and an inbox there. `Routed` wraps the endpoint's socket: what it
//! reads for another slot (`cid::owner`) is copied to that slot's inbox
//! and the owner woken; what it reads for its own slot, for no slot, or
//! for a slot nobody holds any more (quinn answers that with a stateless
//! reset) goes to its own endpoint. A retiring endpoint whose socket a
//! newer generation reads stops reading it (`stop_reading`) and lives on
//! its inbox until its connections end.
//!
//! The table is read under a lock only for a datagram that is not the
//! reader's own: with `reuseport` that is a client that changed address
//! or a connection of an older generation.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSliceMut};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::task::{Context, Poll, Waker};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// Datagrams waiting in one inbox before more are dropped (QUIC recovers
/// lost datagrams): bounds what a slow or stuck endpoint can hold.
const INBOX_MAX: usize = 4096;

struct Queue {
    items: VecDeque<(RecvMeta, Vec<u8>)>,
    waker: Option<Waker>,
}

/// Datagrams other endpoints read for this one.
pub struct Inbox {
    q: Mutex<Queue>,
    /// Datagrams handed over to this inbox, and dropped because it was full.
    pub received: AtomicU64,
    pub dropped: AtomicU64,
}

impl Inbox {
    fn push(&self, meta: RecvMeta, data: &[u8]) {
        let Ok(mut q) = self.q.lock() else { return };
        if q.items.len() >= INBOX_MAX {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.items.push_back((meta, data.to_vec()));
        self.received.fetch_add(1, Ordering::Relaxed);
        if let Some(w) = q.waker.take() {
            w.wake();
        }
    }
}

fn table() -> &'static RwLock<Vec<Weak<Inbox>>> {
    static TABLE: RwLock<Vec<Weak<Inbox>>> = RwLock::new(Vec::new());
    &TABLE
}

/// Where the next slot search starts, so a freed slot is not handed out
/// again at once (a late datagram for the old holder would reach the new).
static CURSOR: AtomicU64 = AtomicU64::new(0);

/// A slot and its inbox for a new endpoint; the slot frees itself when the
/// last reference to the inbox goes. None when all 65,536 are taken.
pub fn register() -> Option<(u16, Arc<Inbox>)> {
    let inbox = Arc::new(Inbox {
        q: Mutex::new(Queue { items: VecDeque::new(), waker: None }),
        received: 0.into(),
        dropped: 0.into(),
    });
    let mut t = table().write().ok()?;
    let n = 1usize << 16;
    let start = CURSOR.load(Ordering::Relaxed) as usize;
    for i in 0..n {
        let slot = (start + i) % n;
        if slot >= t.len() {
            t.resize_with(slot + 1, Weak::new);
        }
        if t[slot].strong_count() == 0 {
            t[slot] = Arc::downgrade(&inbox);
            CURSOR.store((slot + 1) as u64, Ordering::Relaxed);
            return Some((slot as u16, inbox));
        }
    }
    None
}

fn lookup(slot: u16) -> Option<Arc<Inbox>> {
    table().read().ok()?.get(usize::from(slot))?.upgrade()
}

/// An endpoint's socket: quinn's own (GSO, GRO, ECN, packet info) with the
/// routing above on the receive side.
pub struct Routed {
    inner: Arc<dyn AsyncUdpSocket>,
    slot: u16,
    inbox: Arc<Inbox>,
    reading: AtomicBool,
    /// `quic_gso`: send several datagrams per system call when the kernel
    /// offers segmentation offload.
    gso: bool,
}

impl fmt::Debug for Routed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Routed").field("slot", &self.slot).finish()
    }
}

impl Routed {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>, slot: u16, inbox: Arc<Inbox>, gso: bool) -> Routed {
        Routed { inner, slot, inbox, reading: AtomicBool::new(true), gso }
    }

    /// A newer generation reads the socket now: from here on only what
    /// reaches the inbox is received.
    pub fn stop_reading(&self) {
        self.reading.store(false, Ordering::Relaxed);
        if let Ok(mut q) = self.inbox.q.lock()
            && let Some(w) = q.waker.take()
        {
            w.wake();
        }
    }
}

impl AsyncUdpSocket for Routed {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        self.inner.try_send(transmit)
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        {
            let Ok(mut q) = self.inbox.q.lock() else { return Poll::Pending };
            let mut n = 0;
            while n < bufs.len().min(meta.len()) {
                let Some((m, data)) = q.items.pop_front() else { break };
                let len = data.len().min(bufs[n].len());
                bufs[n][..len].copy_from_slice(&data[..len]);
                meta[n] = RecvMeta { len, stride: m.stride.min(len.max(1)), ..m };
                n += 1;
            }
            if n > 0 {
                return Poll::Ready(Ok(n));
            }
            q.waker = Some(cx.waker().clone());
        }
        if !self.reading.load(Ordering::Relaxed) {
            return Poll::Pending;
        }
        loop {
            let n = match self.inner.poll_recv(cx, bufs, meta) {
                Poll::Ready(Ok(n)) => n,
                other => return other,
            };
            let mut kept = 0;
            for i in 0..n {
                let len = meta[i].len;
                let theirs = super::cid::owner(&bufs[i][..len]).filter(|&s| s != self.slot).and_then(lookup);
                if let Some(inbox) = theirs {
                    inbox.push(meta[i], &bufs[i][..len]);
                    continue;
                }
                if kept != i {
                    let (to, from) = bufs.split_at_mut(i);
                    to[kept][..len].copy_from_slice(&from[0][..len]);
                    meta[kept] = meta[i];
                }
                kept += 1;
            }
            if kept > 0 {
                return Poll::Ready(Ok(kept));
            }
        }
    }

    fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        if self.gso { self.inner.max_transmit_segments() } else { 1 }
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_unique_and_free_themselves() {
        let (a, ia) = register().expect("slot");
        let (b, _ib) = register().expect("slot");
        assert_ne!(a, b);
        assert!(lookup(a).is_some());
        ia.push(RecvMeta::default(), b"x");
        assert_eq!(ia.received.load(Ordering::Relaxed), 1);
        drop(ia);
        assert!(lookup(a).is_none(), "a dropped inbox frees its slot");
    }
}
