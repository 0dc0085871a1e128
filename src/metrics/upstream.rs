//! One worker's counters of one `upstream` block: each peer's requests,
//! failures and active requests, the upstream's response times and its
//! `queue` waits. Made when the worker first proxies to the upstream
//! (registration takes a mutex once); the worker is their only writer. A
//! scrape sums them by upstream name, so workers of older generations
//! count as long as the name is configured.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::add;
use super::hist::{Hist, HistCounters};
pub use crate::upstream::traffic::SessionTimes;
use crate::upstream::traffic::{Traffic, TrafficTotals};

/// One worker's counts for one upstream peer.
#[derive(Default)]
pub struct PeerCounters {
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    pub active: AtomicU64,
    /// Until when (seconds, `clock::now_secs`) the worker holds the peer
    /// failed out by `max_fails`.
    pub unavailable_until: AtomicU64,
    /// Times a failure put the peer at its `max_fails` (NGINX Plus's
    /// `unavail`).
    pub unavail: AtomicU64,
    /// What a session family (stream) counts per peer, as NGINX Plus's
    /// `stream.upstreams` shows it.
    pub traffic: Traffic,
}

/// One worker's counters for the peers of one upstream, in the upstream's
/// peer order, and for the upstream as a whole.
pub struct PeerSet {
    /// The family whose upstream block this is (`"http"`, `"stream"`):
    /// an http and a stream upstream may share a name.
    pub family: &'static str,
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
    /// The counts of ended workers' sets for this upstream and peer list,
    /// kept in the registry's place (see [`retire_unheld`]).
    retired: bool,
}

static PEER_SETS: Mutex<Vec<Arc<PeerSet>>> = Mutex::new(Vec::new());

impl PeerSet {
    /// A worker's counters for http upstream `u`, known to every later
    /// scrape.
    pub fn register(u: &crate::config::proxy::Upstream) -> Arc<PeerSet> {
        PeerSet::register_in("http", u)
    }

    /// A worker's counters for upstream `u` of family `family`.
    pub fn register_in(family: &'static str, u: &crate::config::proxy::Upstream) -> Arc<PeerSet> {
        let s = Arc::new(PeerSet::new(
            family,
            &u.name,
            u.peers.iter().map(|p| p.name.clone()).collect(),
            u.peers.iter().map(|p| p.fail_timeout.as_secs()).collect(),
        ));
        if let Ok(mut all) = PEER_SETS.lock() {
            retire_unheld(&mut all);
            all.push(s.clone());
        }
        s
    }

    fn new(family: &'static str, upstream: &str, names: Vec<Arc<str>>, fail_timeout: Vec<u64>) -> PeerSet {
        PeerSet {
            family,
            upstream: upstream.to_string(),
            peers: names.iter().map(|_| PeerCounters::default()).collect(),
            names,
            fail_timeout,
            response: HistCounters::default(),
            queue_waits: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
            retired: false,
        }
    }

    /// Adds `gone`'s counts (not its gauges: active requests and failed-out
    /// times were that worker's own) into this retired set.
    fn absorb(&self, gone: &PeerSet) {
        self.response.absorb(&gone.response);
        add(&self.queue_waits, gone.queue_waits.load(Relaxed));
        add(&self.queue_timeouts, gone.queue_timeouts.load(Relaxed));
        for (r, g) in self.peers.iter().zip(gone.peers.iter()) {
            add(&r.requests, g.requests.load(Relaxed));
            add(&r.failures, g.failures.load(Relaxed));
            add(&r.unavail, g.unavail.load(Relaxed));
            g.traffic.read().add_into(&r.traffic);
        }
    }

    /// The balancer chose peer `i` for a request.
    pub fn picked(&self, i: usize) {
        if let Some(p) = self.peers.get(i) {
            add(&p.requests, 1);
            add(&p.active, 1);
            p.traffic.selected();
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
            add(&p.unavail, 1);
            let t = self.fail_timeout.get(i).copied().unwrap_or(0);
            p.unavailable_until.store(crate::clock::now_secs().saturating_add(t), Relaxed);
        }
    }

    /// A session with peer `i` ended after `sent` bytes to it and
    /// `received` from it.
    pub fn session(&self, i: usize, sent: u64, received: u64, times: SessionTimes) {
        if let Some(p) = self.peers.get(i) {
            p.traffic.session(sent, received, times);
        }
    }

    /// A try got its response head `took` after it started.
    pub fn responded(&self, took: std::time::Duration) {
        self.response.record(took);
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

/// Folds every set no worker holds any more (the registry's is the last
/// reference, so nothing writes it) into one retired set per upstream and
/// peer list, so the registry does not grow with reloads. Called under the
/// registry's lock, the only place retired sets are written.
fn retire_unheld(all: &mut Vec<Arc<PeerSet>>) {
    let mut i = 0;
    while i < all.len() {
        if all[i].retired || Arc::strong_count(&all[i]) > 1 {
            i += 1;
            continue;
        }
        let gone = all.remove(i);
        let same = |r: &&Arc<PeerSet>| {
            r.retired && r.family == gone.family && r.upstream == gone.upstream && r.names == gone.names
        };
        match all.iter().find(same) {
            Some(r) => r.absorb(&gone),
            None => {
                let mut r = PeerSet::new(gone.family, &gone.upstream, gone.names.clone(), gone.fail_timeout.clone());
                r.retired = true;
                r.absorb(&gone);
                all.push(Arc::new(r));
            }
        }
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
    pub unavail: u64,
    /// Bytes, times and the last selection (the stream family's).
    pub traffic: TrafficTotals,
}

/// An upstream's own counts summed over every worker that used it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamTotals {
    pub response: Hist,
    pub queue_waits: u64,
    pub queue_timeouts: u64,
}

/// The totals of upstream `upstream` of family `family`: its own, and
/// those of each of `peers` (by name: workers of older generations count
/// too when the peer is still configured).
pub fn upstream_totals(
    family: &str,
    upstream: &str,
    peers: &[Arc<str>],
    now: u64,
) -> (UpstreamTotals, Vec<PeerTotals>) {
    let mut u = UpstreamTotals::default();
    let mut out = vec![PeerTotals::default(); peers.len()];
    let Ok(all) = PEER_SETS.lock() else { return (u, out) };
    for s in all.iter().filter(|s| s.family == family && s.upstream == upstream) {
        s.response.sum_into(&mut u.response);
        u.queue_waits = u.queue_waits.wrapping_add(s.queue_waits.load(Relaxed));
        u.queue_timeouts = u.queue_timeouts.wrapping_add(s.queue_timeouts.load(Relaxed));
        for (name, p) in s.names.iter().zip(s.peers.iter()) {
            for t in peers.iter().zip(out.iter_mut()).filter(|(n, _)| *n == name).map(|(_, t)| t) {
                t.requests = t.requests.wrapping_add(p.requests.load(Relaxed));
                t.failures = t.failures.wrapping_add(p.failures.load(Relaxed));
                t.active = t.active.wrapping_add(p.active.load(Relaxed));
                t.unavailable |= p.unavailable_until.load(Relaxed) > now;
                t.unavail = t.unavail.wrapping_add(p.unavail.load(Relaxed));
                t.traffic.add(&p.traffic);
            }
        }
    }
    (u, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(upstream: &str, peers: &[&str]) -> Arc<PeerSet> {
        Arc::new(PeerSet::new("http", upstream, peers.iter().map(|p| Arc::from(*p)).collect(), vec![10; peers.len()]))
    }

    /// Ended workers' sets become one retired set per upstream and peer
    /// list, with every count and without the gauges.
    #[test]
    fn ended_workers_sets_are_folded() {
        let mut all = Vec::new();
        let held = set("u", &["a", "b"]);
        all.push(held.clone());
        for round in 0..40u64 {
            let gone = if round % 4 == 3 { set("u", &["a"]) } else { set("u", &["a", "b"]) };
            gone.picked(0);
            gone.done(0, true, true);
            gone.picked(0);
            gone.responded(std::time::Duration::from_millis(7));
            gone.queue_wait();
            all.push(gone);
            retire_unheld(&mut all);
        }
        // The held set, and one retired set for each peer list seen.
        assert_eq!(all.len(), 3);
        assert_eq!(all.iter().filter(|s| s.retired).count(), 2);
        let ab = all.iter().find(|s| s.retired && s.names.len() == 2).expect("retired u[a,b]");
        assert_eq!(ab.peers[0].requests.load(Relaxed), 60);
        assert_eq!(ab.peers[0].failures.load(Relaxed), 30);
        assert_eq!(ab.peers[0].active.load(Relaxed), 0, "gauges stay behind");
        assert_eq!(ab.peers[0].unavailable_until.load(Relaxed), 0);
        assert_eq!(ab.queue_waits.load(Relaxed), 30);
        let mut h = Hist::default();
        ab.response.sum_into(&mut h);
        assert_eq!((h.count(), h.sum_us), (30, 210_000));
        // A retired set stays put however often registration runs.
        retire_unheld(&mut all);
        assert_eq!(all.len(), 3);
    }
}
