//! `queue N [timeout=T]` (NGINX Plus's directive, open in sluice): when
//! every peer of an upstream is at its `max_conns`, a request waits in a
//! FIFO queue for a free connection slot instead of failing.
//!
//! Why a semaphore: with a queue, `max_conns` is counted for the whole
//! process (as NGINX Plus does with a `zone`), not per worker, so an origin
//! that can serve 20 requests at once never sees more than 20 from all
//! workers together. The upstream's capacity (the sum of its primary peers'
//! `max_conns`) is a tokio semaphore shared by the workers; tokio's
//! semaphore is fair, so permits go out strictly in arrival order, across
//! workers. Holding a permit means some peer has a free slot; the per-peer
//! counters here say which one, for the balancer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::proxy::PeerConf;

#[derive(Debug)]
pub struct Queue {
    /// Requests allowed to wait at once, per worker (as NGINX Plus counts it).
    pub size: usize,
    pub timeout: Duration,
    /// Free connection slots of the whole upstream; None when some primary
    /// peer has no `max_conns` (the upstream is never full, nothing waits).
    slots: Option<Arc<Semaphore>>,
    /// Connections in use per peer, all workers together.
    conns: Box<[AtomicU32]>,
    max: Box<[u32]>,
    /// Requests waiting right now, all workers together (for status pages
    /// and tests; the per-worker bound is kept by the worker).
    waiting: AtomicUsize,
}

/// Why a request could not get a connection slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `size` requests of this worker are already waiting.
    Full,
    /// No slot freed within `timeout`.
    TimedOut,
}

impl Queue {
    pub fn new(size: usize, timeout: Duration, peers: &[PeerConf]) -> Queue {
        let primary: Vec<&PeerConf> = peers.iter().filter(|p| !p.backup && !p.down).collect();
        let capacity = if primary.iter().all(|p| p.max_conns > 0) {
            Some(primary.iter().map(|p| p.max_conns as usize).sum::<usize>())
        } else {
            None
        };
        Queue {
            size,
            timeout,
            slots: capacity.map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS)))),
            conns: peers.iter().map(|_| AtomicU32::new(0)).collect(),
            max: peers.iter().map(|p| p.max_conns).collect(),
            waiting: AtomicUsize::new(0),
        }
    }

    /// A connection slot, waiting in line for one if the upstream is full.
    /// `queued` is the calling worker's count of waiting requests;
    /// `on_wait` runs when the request starts to wait (for the worker's
    /// `sluice_status` counters).
    pub async fn enter(
        &self,
        queued: &std::cell::Cell<usize>,
        on_wait: impl FnOnce(),
    ) -> Result<Option<OwnedSemaphorePermit>, Refused> {
        let Some(slots) = &self.slots else { return Ok(None) };
        if let Ok(p) = slots.clone().try_acquire_owned() {
            return Ok(Some(p));
        }
        if queued.get() >= self.size {
            return Err(Refused::Full);
        }
        on_wait();
        // Counted while waiting, and uncounted however the wait ends: a
        // client that leaves drops this future mid-wait.
        let _waiting = Waiting::new(self, queued);
        let got = tokio::time::timeout(self.timeout, slots.clone().acquire_owned()).await;
        match got {
            Ok(Ok(p)) => Ok(Some(p)),
            // The semaphore is never closed; treat it like a timeout anyway.
            Ok(Err(_)) | Err(_) => Err(Refused::TimedOut),
        }
    }

    /// Requests waiting now, in all workers.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// Connections to peer `i` from all workers.
    pub fn conns(&self, i: usize) -> u32 {
        self.conns.get(i).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Whether peer `i` is at its `max_conns`, counting every worker.
    pub fn full(&self, i: usize) -> bool {
        let max = self.max.get(i).copied().unwrap_or(0);
        max != 0 && self.conns(i) >= max
    }

    /// Takes a slot of peer `i`, unless another worker took the last one
    /// since the pick looked.
    pub fn claim(&self, i: usize) -> bool {
        let Some(c) = self.conns.get(i) else { return false };
        let max = self.max.get(i).copied().unwrap_or(0);
        c.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| (max == 0 || n < max).then_some(n + 1)).is_ok()
    }

    pub fn release(&self, i: usize) {
        if let Some(c) = self.conns.get(i) {
            let _ = c.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
        }
    }
}

/// One request's place in the counts of waiting requests (the worker's,
/// bounded by `size`, and all workers'), given back when dropped.
struct Waiting<'q> {
    queue: &'q Queue,
    queued: &'q std::cell::Cell<usize>,
}

impl<'q> Waiting<'q> {
    fn new(queue: &'q Queue, queued: &'q std::cell::Cell<usize>) -> Waiting<'q> {
        queued.set(queued.get() + 1);
        queue.waiting.fetch_add(1, Ordering::Relaxed);
        Waiting { queue, queued }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.queue.waiting.fetch_sub(1, Ordering::Relaxed);
        self.queued.set(self.queued.get().saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn peer(max_conns: u32, backup: bool) -> PeerConf {
        let mut p = PeerConf::new("127.0.0.1:1".parse().expect("addr"), None, "127.0.0.1:1".into());
        p.max_conns = max_conns;
        p.backup = backup;
        p
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
    }

    #[test]
    fn capacity_is_the_primaries_max_conns() {
        let q = Queue::new(10, Duration::from_secs(1), &[peer(2, false), peer(3, false), peer(5, true)]);
        assert_eq!(q.slots.as_ref().map(|s| s.available_permits()), Some(5));
        let unlimited = Queue::new(10, Duration::from_secs(1), &[peer(2, false), peer(0, false)]);
        assert!(unlimited.slots.is_none());
    }

    #[test]
    fn claim_respects_max_conns_and_release_frees() {
        let q = Queue::new(1, Duration::from_secs(1), &[peer(2, false)]);
        assert!(q.claim(0));
        assert!(q.claim(0));
        assert!(!q.claim(0));
        assert!(q.full(0));
        q.release(0);
        assert!(!q.full(0));
        assert!(q.claim(0));
    }

    #[test]
    fn waits_in_order_then_full_then_times_out() {
        let local = tokio::task::LocalSet::new();
        rt().block_on(local.run_until(async {
            let q = Arc::new(Queue::new(1, Duration::from_millis(200), &[peer(1, false)]));
            let mine = Cell::new(0);
            let first = q.enter(&mine, || {}).await.expect("free slot");
            assert!(first.is_some());
            // One may wait; the next is refused at once.
            let waiter = {
                let q = q.clone();
                tokio::task::spawn_local(async move {
                    let local = Cell::new(0);
                    q.enter(&local, || {}).await.map(|p| p.is_some())
                })
            };
            tokio::task::yield_now().await;
            mine.set(1);
            assert_eq!(q.enter(&mine, || {}).await.err(), Some(Refused::Full));
            mine.set(0);
            drop(first);
            assert_eq!(waiter.await.expect("join"), Ok(true));
            // Nobody releases now: a waiter times out.
            let held = q.enter(&mine, || {}).await.expect("slot");
            assert_eq!(q.enter(&mine, || {}).await.err(), Some(Refused::TimedOut));
            drop(held);
        }));
    }

    #[test]
    fn a_request_that_leaves_while_waiting_gives_its_place_back() {
        rt().block_on(async {
            let q = Queue::new(2, Duration::from_secs(30), &[peer(1, false)]);
            let queued = Cell::new(0);
            let held = q.enter(&queued, || {}).await.expect("a free slot");
            // Two wait and are dropped (their clients left), twice over:
            // with places leaked the second round would be refused.
            for _ in 0..2 {
                for _ in 0..2 {
                    let wait = q.enter(&queued, || {});
                    assert!(tokio::time::timeout(Duration::from_millis(10), wait).await.is_err());
                }
                assert_eq!((queued.get(), q.waiting()), (0, 0));
            }
            drop(held);
            assert!(q.enter(&queued, || {}).await.expect("slot").is_some());
        });
    }
}
