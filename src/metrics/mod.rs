//! Issue 15, metrics: `status_zone NAME` (server, location; NGINX Plus's
//! name) counts the requests of a server or location under a zone, and the
//! `sluice_status` content handler ([`page`]) reports those zones, the
//! connections `stub_status` counts and every configured upstream peer, as
//! JSON or in Prometheus' text format.
//!
//! Nothing here is shared between workers on the request path: each worker
//! owns one [`WorkerMetrics`] (zones) and one [`PeerSet`] per upstream it
//! proxies to, and is their only writer, so a count is a relaxed load and
//! store (as [`crate::worker::stats`] does for stub_status: no locked
//! instruction, no cache line another worker writes). A scrape sums every
//! worker's, old generations' included, so counters keep growing across
//! reloads. Registering a worker's counters takes a mutex once, when the
//! worker starts or first uses an upstream.

pub mod dashboard;
pub mod page;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, LOC, R, SRV, Set, cmd};

/// `sluice_status [format=json|prometheus|html]` (location) and `status_zone
/// NAME` (server, location).
pub static DIRECTIVES: &[Cmd] = &[
    cmd("sluice_status", LOC, 0, 1, Set::Loc(sluice_status)),
    cmd("status_zone", SRV | LOC, 1, 1, Set::Loc(status_zone)),
];

/// A location's metrics settings (`LocConf::metrics`).
#[derive(Clone, Debug, Default)]
pub struct MetricsConf {
    /// The zone this level's requests count under (an index into the
    /// process's zone names, [`zone_names`]); inherited by inner levels.
    pub zone: Option<u32>,
    /// `sluice_status`: this location is the status page (not inherited).
    pub page: Option<Arc<page::Page>>,
}

fn sluice_status(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let fixed = match d.args.first() {
        None => None,
        Some(w) => Some(
            w.text
                .strip_prefix("format=")
                .and_then(page::Format::parse)
                .ok_or_else(|| ConfError::at(format!("invalid sluice_status parameter \"{}\"", w.text), &d.span))?,
        ),
    };
    let upstreams = ctx.upstream_list.iter().filter(|u| !u.implicit).cloned().collect();
    c.metrics.page = Some(Arc::new(page::Page { fixed, upstreams }));
    Ok(())
}

fn status_zone(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let name = d.args.first().map(|w| w.text.as_str()).unwrap_or("");
    if name.is_empty() {
        return Err(ConfError::at("empty status_zone name", &d.span));
    }
    c.metrics.zone = Some(zone_index(name));
    Ok(())
}

/// Zone names in the order first configured; a zone keeps its index for the
/// life of the process, so reloads keep counting into the same slot.
static ZONES: Mutex<Vec<Arc<str>>> = Mutex::new(Vec::new());

fn zone_index(name: &str) -> u32 {
    let Ok(mut z) = ZONES.lock() else { return u32::MAX };
    let i = z.iter().position(|n| &**n == name).unwrap_or_else(|| {
        z.push(Arc::from(name));
        z.len() - 1
    });
    i as u32
}

/// Every zone name configured so far, by index.
pub fn zone_names() -> Vec<Arc<str>> {
    ZONES.lock().map(|z| z.clone()).unwrap_or_default()
}

/// Upper bounds of the request-time histogram, in milliseconds; a last
/// bucket (+Inf) follows.
pub const BUCKETS_MS: [u64; 10] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000];

/// One worker's counts for one zone.
#[derive(Default)]
pub struct ZoneCounters {
    pub requests: AtomicU64,
    /// 1xx to 5xx.
    pub responses: [AtomicU64; 5],
    pub received: AtomicU64,
    pub sent: AtomicU64,
    /// Requests per time bucket (not cumulative: the scrape adds them up).
    pub buckets: [AtomicU64; BUCKETS_MS.len() + 1],
    pub time_ms: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// One worker's zone counters, sized when the worker starts (its
/// configuration's zones are all registered by then).
pub struct WorkerMetrics {
    zones: Box<[ZoneCounters]>,
}

impl WorkerMetrics {
    /// A finished request of zone `zone`: its status, bytes read and
    /// written, and time.
    pub fn record(&self, zone: u32, status: u16, received: u64, sent: u64, ms: u64) {
        let Some(z) = self.zones.get(zone as usize) else { return };
        add(&z.requests, 1);
        if let Some(c) = (status / 100).checked_sub(1).and_then(|i| z.responses.get(i as usize)) {
            add(c, 1);
        }
        add(&z.received, received);
        add(&z.sent, sent);
        let b = BUCKETS_MS.iter().position(|&le| ms <= le).unwrap_or(BUCKETS_MS.len());
        add(&z.buckets[b], 1);
        add(&z.time_ms, ms);
    }
}

static WORKERS: Mutex<Vec<Arc<WorkerMetrics>>> = Mutex::new(Vec::new());

/// A new worker's zone counters, known to every later scrape.
pub fn register() -> Arc<WorkerMetrics> {
    let n = ZONES.lock().map(|z| z.len()).unwrap_or(0);
    let m = Arc::new(WorkerMetrics { zones: (0..n).map(|_| ZoneCounters::default()).collect() });
    if let Ok(mut all) = WORKERS.lock() {
        all.push(m.clone());
    }
    m
}

/// A zone's counts summed over every worker.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ZoneTotals {
    pub requests: u64,
    pub responses: [u64; 5],
    pub received: u64,
    pub sent: u64,
    pub buckets: [u64; BUCKETS_MS.len() + 1],
    pub time_ms: u64,
}

/// Every zone's totals, by index.
pub fn zone_totals(n: usize) -> Vec<ZoneTotals> {
    let mut out = vec![ZoneTotals::default(); n];
    let Ok(all) = WORKERS.lock() else { return out };
    for w in all.iter() {
        for (t, z) in out.iter_mut().zip(w.zones.iter()) {
            t.requests = t.requests.wrapping_add(z.requests.load(Relaxed));
            for (a, b) in t.responses.iter_mut().zip(&z.responses) {
                *a = a.wrapping_add(b.load(Relaxed));
            }
            t.received = t.received.wrapping_add(z.received.load(Relaxed));
            t.sent = t.sent.wrapping_add(z.sent.load(Relaxed));
            for (a, b) in t.buckets.iter_mut().zip(&z.buckets) {
                *a = a.wrapping_add(b.load(Relaxed));
            }
            t.time_ms = t.time_ms.wrapping_add(z.time_ms.load(Relaxed));
        }
    }
    out
}

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
/// peer order; made when the worker first proxies to the upstream.
pub struct PeerSet {
    pub upstream: String,
    pub names: Vec<Arc<str>>,
    fail_timeout: Vec<u64>,
    pub peers: Box<[PeerCounters]>,
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

/// The totals of upstream `upstream`'s peer `peer` (by name: workers of
/// older generations count too when the peer is still configured).
pub fn peer_totals(upstream: &str, peer: &str, now: u64) -> PeerTotals {
    let mut t = PeerTotals::default();
    let Ok(all) = PEER_SETS.lock() else { return t };
    for s in all.iter().filter(|s| s.upstream == upstream) {
        for (name, p) in s.names.iter().zip(s.peers.iter()) {
            if &**name != peer {
                continue;
            }
            t.requests = t.requests.wrapping_add(p.requests.load(Relaxed));
            t.failures = t.failures.wrapping_add(p.failures.load(Relaxed));
            t.active = t.active.wrapping_add(p.active.load(Relaxed));
            t.unavailable |= p.unavailable_until.load(Relaxed) > now;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fills_classes_and_buckets() {
        let w = WorkerMetrics { zones: (0..2).map(|_| ZoneCounters::default()).collect() };
        w.record(1, 200, 10, 100, 3);
        w.record(1, 404, 10, 50, 5000);
        w.record(1, 499, 1, 0, 6000);
        w.record(1, 42, 1, 0, 7);
        w.record(9, 200, 1, 1, 1);
        let z = &w.zones[1];
        assert_eq!(z.requests.load(Relaxed), 4);
        let r: Vec<u64> = z.responses.iter().map(|c| c.load(Relaxed)).collect();
        assert_eq!(r, [0, 1, 0, 2, 0]);
        let b: Vec<u64> = z.buckets.iter().map(|c| c.load(Relaxed)).collect();
        assert_eq!(b, [1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1]);
        assert_eq!((z.received.load(Relaxed), z.sent.load(Relaxed), z.time_ms.load(Relaxed)), (22, 150, 11010));
        assert_eq!(w.zones[0].requests.load(Relaxed), 0);
    }
}
