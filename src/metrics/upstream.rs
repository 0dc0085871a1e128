//! One worker's counters of one `upstream` block: each peer's requests,
//! failures and active requests, the upstream's response times and its
//! `queue` waits. Made when the worker first proxies to the upstream
//! (registration takes a mutex once); the worker is their only writer. A
//! scrape sums them by upstream name, so workers of older generations
//! count as long as the name is configured.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::add;
use super::worker::{Hist, HistCounters};

/// One worker's counts for one upstream peer.
#[derive(Default)]
pub struct PeerCounters {
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    pub active: AtomicU64,
    /// Until when (seconds, `clock::now_secs`) the worker holds the peer
    /// failed out by `max_fails`.
    pub unavailable_until: AtomicU64,
}

/// One worker's counters for the peers of one upstream, in the upstream's
/// peer order, and for the upstream as a whole.
pub struct PeerSet {
    pub upstream: String,
    pub names: Vec<Arc<str>>,
    fail_timeout: Vec<u64>,
    pub peers: Box<[PeerCounters]>,
    /// From the start of a try to the end of its response head, for every
    /// try that got one (`$upstream_header_time`).
    response: HistCounters,
    /// Requests that had to wait in the upstream's `queue`.
    queue_waits: AtomicU64,
    /// Waits that ended with the queue's timeout (503).
    queue_timeouts: AtomicU64,
}

static PEER_SETS: Mutex<Vec<Arc<PeerSet>>> = Mutex::new(Vec::new());

impl PeerSet {
    /// A worker's counters for `u`, known to every later scrape.
    pub fn register(u: &crate::config::proxy::Upstream) -> Arc<PeerSet> {
        let s = Arc::new(PeerSet {
            upstream: u.name.clone(),
            names: u.peers.iter().map(|p| p.name.clone()).collect(),
            fail_timeout: u.peers.iter().map(|p| p.fail_timeout.as_secs()).collect(),
            peers: u.peers.iter().map(|_| PeerCounters::default()).collect(),
            response: HistCounters::default(),
            queue_waits: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
        });
        if let Ok(mut all) = PEER_SETS.lock() {
            all.push(s.clone());
        }
        s
    }

    /// The balancer chose peer `i` for a request.
    pub fn picked(&self, i: usize) {
        if let Some(p) = self.peers.get(i) {
            add(&p.requests, 1);
            add(&p.active, 1);
        }
    }

    /// The request is done with peer `i`; `failed_out`: the failure put the
    /// peer at its `max_fails`.
    pub fn done(&self, i: usize, failed: bool, failed_out: bool) {
        let Some(p) = self.peers.get(i) else { return };
        p.active.store(p.active.load(Relaxed).saturating_sub(1), Relaxed);
        if failed {
            add(&p.failures, 1);
        }
        if failed_out {
            let t = self.fail_timeout.get(i).copied().unwrap_or(0);
            p.unavailable_until.store(crate::clock::now_secs().saturating_add(t), Relaxed);
        }
    }

    /// A try got its response head `ms` after it started.
    pub fn responded(&self, ms: u64) {
        self.response.record(ms);
    }

    /// A request found every slot taken and waits in the queue.
    pub fn queue_wait(&self) {
        add(&self.queue_waits, 1);
    }

    /// A wait in the queue timed out.
    pub fn queue_timeout(&self) {
        add(&self.queue_timeouts, 1);
    }
}

/// One peer's counts summed over every worker that used it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PeerTotals {
    pub requests: u64,
    pub failures: u64,
    pub active: u64,
    /// Some worker holds it failed out by `max_fails` now.
    pub unavailable: bool,
}

/// An upstream's own counts summed over every worker that used it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTotals {
    pub response: Hist,
    pub queue_waits: u64,
    pub queue_timeouts: u64,
}

/// The totals of upstream `upstream`: its own, and those of each of
/// `peers` (by name: workers of older generations count too when the peer
/// is still configured).
pub fn upstream_totals(upstream: &str, peers: &[Arc<str>], now: u64) -> (UpstreamTotals, Vec<PeerTotals>) {
    let mut u = UpstreamTotals::default();
    let mut out = vec![PeerTotals::default(); peers.len()];
    let Ok(all) = PEER_SETS.lock() else { return (u, out) };
    for s in all.iter().filter(|s| s.upstream == upstream) {
        s.response.sum_into(&mut u.response);
        u.queue_waits = u.queue_waits.wrapping_add(s.queue_waits.load(Relaxed));
        u.queue_timeouts = u.queue_timeouts.wrapping_add(s.queue_timeouts.load(Relaxed));
        for (name, p) in s.names.iter().zip(s.peers.iter()) {
            for t in peers.iter().zip(out.iter_mut()).filter(|(n, _)| *n == name).map(|(_, t)| t) {
                t.requests = t.requests.wrapping_add(p.requests.load(Relaxed));
                t.failures = t.failures.wrapping_add(p.failures.load(Relaxed));
                t.active = t.active.wrapping_add(p.active.load(Relaxed));
                t.unavailable |= p.unavailable_until.load(Relaxed) > now;
            }
        }
    }
    (u, out)
}
