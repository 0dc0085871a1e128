//! One worker's counters: its `status_zone`s, every request it answered
//! (status class and time), TLS handshakes, HTTP/2 connections and
//! streams, parked connections and cache lookups. The worker is their only
//! writer (relaxed load and store, see [`super::add`]); a scrape reads and
//! sums every registered set. A thread that is not a worker (a cache zone's
//! manager counting evictions) gets a set of its own on first use through
//! [`with_local`].

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::add;
use super::hist::{Hist, HistCounters};
use super::l4::{MailCounters, MailTotals, SessionCounters, SessionTotals};
use crate::http::cache::serve::{BYPASS, EXPIRED, HIT, MISS, REVALIDATED, STALE, UPDATING};

/// One worker's counts for one zone.
#[derive(Default)]
pub struct ZoneCounters {
    requests: AtomicU64,
    /// 1xx to 5xx.
    responses: [AtomicU64; 5],
    received: AtomicU64,
    sent: AtomicU64,
    time: HistCounters,
}

/// Cache lookups by the `$upstream_cache_status` they ended with, in the
/// order of [`CacheTotals::statuses`].
pub const CACHE_STATUSES: [&str; 7] = [HIT, MISS, EXPIRED, STALE, UPDATING, REVALIDATED, BYPASS];

/// One thread's counts for one cache zone.
#[derive(Default)]
struct CacheCounters {
    statuses: [AtomicU64; CACHE_STATUSES.len()],
    /// Entries the zone's manager removed (inactive, or over `max_size` /
    /// under `min_free`); purges are not evictions.
    evictions: AtomicU64,
}

/// What every request and connection of the worker counts, on cache lines
/// of its own.
#[derive(Default)]
#[repr(align(128))]
struct ProcessCounters {
    responses: [AtomicU64; 5],
    time: HistCounters,
    /// TLSv1.2, TLSv1.3.
    handshakes: [AtomicU64; 2],
    resumed: [AtomicU64; 2],
    handshakes_failed: AtomicU64,
    h2_connections: AtomicU64,
    h2_streams: AtomicU64,
    h3_connections: AtomicU64,
    h3_streams: AtomicU64,
    /// A gauge: connections parked now (see `worker::park`).
    parked: AtomicU64,
}

/// One worker's counters, sized when the worker starts (its
/// configuration's zones are all registered by then).
pub struct WorkerMetrics {
    all: ProcessCounters,
    zones: Box<[ZoneCounters]>,
    caches: Box<[CacheCounters]>,
    /// Session zones of the families that are not HTTP (`super::l4`).
    sessions: Box<[SessionCounters]>,
    mail: MailCounters,
}

/// Status class 1xx..5xx as an index 0..4 (None outside 100..=599).
pub(super) fn class(status: u16) -> Option<usize> {
    let c = (status / 100).wrapping_sub(1) as usize;
    (c < 5).then_some(c)
}

fn tls_index(protocol: &str) -> Option<usize> {
    match protocol {
        "TLSv1.2" => Some(0),
        "TLSv1.3" => Some(1),
        _ => None,
    }
}

impl WorkerMetrics {
    fn new() -> WorkerMetrics {
        WorkerMetrics {
            all: ProcessCounters::default(),
            zones: (0..super::ZONES.len()).map(|_| ZoneCounters::default()).collect(),
            caches: (0..super::CACHES.len()).map(|_| CacheCounters::default()).collect(),
            sessions: (0..super::l4::SESSION_ZONES.len()).map(|_| SessionCounters::default()).collect(),
            mail: MailCounters::default(),
        }
    }

    /// The counters of session zone `zone` (`super::l4::session_zone`);
    /// None for a zone named after this worker started.
    pub fn session_zone(&self, zone: u32) -> Option<&SessionCounters> {
        self.sessions.get(zone as usize)
    }

    /// The mail family's counters.
    pub fn mail(&self) -> &MailCounters {
        &self.mail
    }

    /// Any finished request: its status class and time (the request
    /// path's whole cost here: three relaxed adds and the bucket's
    /// computation, see [`super::hist::bucket`]).
    #[inline]
    pub fn finished(&self, status: u16, took: Duration) {
        if let Some(c) = class(status) {
            add(&self.all.responses[c], 1);
        }
        self.all.time.record(took);
    }

    /// A finished request of zone `zone`: its status, bytes read and
    /// written, and time.
    pub fn record(&self, zone: u32, status: u16, received: u64, sent: u64, took: Duration) {
        let Some(z) = self.zones.get(zone as usize) else { return };
        add(&z.requests, 1);
        if let Some(c) = class(status) {
            add(&z.responses[c], 1);
        }
        add(&z.received, received);
        add(&z.sent, sent);
        z.time.record(took);
    }

    /// A request that asked cache zone `cache` (`ZoneConf::metrics`),
    /// by its final `$upstream_cache_status`.
    pub fn cache_lookup(&self, cache: u32, status: &str) {
        let Some(c) = self.caches.get(cache as usize) else { return };
        if let Some(i) = CACHE_STATUSES.iter().position(|s| *s == status) {
            add(&c.statuses[i], 1);
        }
    }

    /// The manager of cache zone `cache` evicted `n` entries.
    pub fn evicted(&self, cache: u32, n: u64) {
        if let Some(c) = self.caches.get(cache as usize) {
            add(&c.evictions, n);
        }
    }

    /// A TLS handshake completed with `protocol` ("TLSv1.2", "TLSv1.3").
    pub fn tls_handshake(&self, protocol: &str, resumed: bool) {
        let Some(i) = tls_index(protocol) else { return };
        add(&self.all.handshakes[i], 1);
        if resumed {
            add(&self.all.resumed[i], 1);
        }
    }

    /// A TLS handshake failed (an error, a timeout, `ssl_reject_handshake`).
    pub fn tls_failed(&self) {
        add(&self.all.handshakes_failed, 1);
    }

    /// An HTTP/2 connection completed its preface and settings.
    pub fn h2_connection(&self) {
        add(&self.all.h2_connections, 1);
    }

    /// An HTTP/2 stream (a request) was accepted.
    pub fn h2_stream(&self) {
        add(&self.all.h2_streams, 1);
    }

    /// An HTTP/3 connection completed its handshake and settings.
    pub fn h3_connection(&self) {
        add(&self.all.h3_connections, 1);
    }

    /// An HTTP/3 request stream was accepted.
    pub fn h3_stream(&self) {
        add(&self.all.h3_streams, 1);
    }

    /// The worker holds `n` connections parked.
    pub fn set_parked(&self, n: usize) {
        self.all.parked.store(n as u64, Relaxed);
    }
}

/// The sets threads hold, and what the sets of threads that ended had
/// counted, summed: a worker of an old generation leaves its counts behind
/// but not its set, so the registry does not grow with reloads.
struct Registry {
    live: Vec<Arc<WorkerMetrics>>,
    retired: Option<Totals>,
}

impl Registry {
    /// Folds every set no thread holds any more (the registry's is the
    /// last reference, so nothing writes it) into `retired`. Gauges
    /// (parked connections) are not carried over: they were the ended
    /// thread's own.
    fn retire_unheld(&mut self) {
        let retired = &mut self.retired;
        self.live.retain(|m| {
            if Arc::strong_count(m) > 1 {
                return true;
            }
            let t = retired.get_or_insert_with(|| Totals::sized(0, 0, 0));
            t.grow(m.zones.len(), m.caches.len(), m.sessions.len());
            t.add(m, false);
            false
        });
    }
}

static WORKERS: Mutex<Registry> = Mutex::new(Registry { live: Vec::new(), retired: None });

thread_local! {
    /// The calling thread's counters (a worker's are its `w.metrics`).
    static LOCAL: RefCell<Option<Arc<WorkerMetrics>>> = const { RefCell::new(None) };
}

fn registered() -> Arc<WorkerMetrics> {
    let m = Arc::new(WorkerMetrics::new());
    if let Ok(mut reg) = WORKERS.lock() {
        reg.retire_unheld();
        reg.live.push(m.clone());
    }
    m
}

/// A new worker's counters, known to every later scrape; code of the
/// worker's thread that has no `WorkerCtx` at hand reaches them with
/// [`with_local`].
pub fn register() -> Arc<WorkerMetrics> {
    let m = registered();
    let _ = LOCAL.try_with(|l| *l.borrow_mut() = Some(m.clone()));
    m
}

/// Runs `f` on the calling thread's counters, registering a set for a
/// thread that has none yet.
pub fn with_local(f: impl FnOnce(&WorkerMetrics)) {
    let _ = LOCAL.try_with(|l| {
        let mut l = l.borrow_mut();
        f(l.get_or_insert_with(registered));
    });
}

/// A zone's counts summed over every worker.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ZoneTotals {
    pub requests: u64,
    pub responses: [u64; 5],
    pub received: u64,
    pub sent: u64,
    pub time: Hist,
}

/// A cache zone's counts summed over every thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CacheTotals {
    /// In the order of [`CACHE_STATUSES`].
    pub statuses: [u64; CACHE_STATUSES.len()],
    pub evictions: u64,
}

/// The whole process's counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProcessTotals {
    pub responses: [u64; 5],
    pub time: Hist,
    /// TLSv1.2, TLSv1.3.
    pub handshakes: [u64; 2],
    pub resumed: [u64; 2],
    pub handshakes_failed: u64,
    pub h2_connections: u64,
    pub h2_streams: u64,
    pub h3_connections: u64,
    pub h3_streams: u64,
    pub parked: u64,
}

/// Every thread's counters summed: the process's, each zone's (by index)
/// and each cache zone's (by index).
pub struct Totals {
    pub all: ProcessTotals,
    pub zones: Vec<ZoneTotals>,
    pub caches: Vec<CacheTotals>,
    pub sessions: Vec<SessionTotals>,
    pub mail: MailTotals,
}

fn sum(a: &mut u64, c: &AtomicU64) {
    *a = a.wrapping_add(c.load(Relaxed));
}

fn sum_all(a: &mut [u64], c: &[AtomicU64]) {
    for (a, c) in a.iter_mut().zip(c) {
        sum(a, c);
    }
}

impl Totals {
    fn sized(zones: usize, caches: usize, sessions: usize) -> Totals {
        Totals {
            all: ProcessTotals::default(),
            zones: vec![ZoneTotals::default(); zones],
            caches: vec![CacheTotals::default(); caches],
            sessions: vec![SessionTotals::default(); sessions],
            mail: MailTotals::default(),
        }
    }

    fn grow(&mut self, zones: usize, caches: usize, sessions: usize) {
        if self.sessions.len() < sessions {
            self.sessions.resize(sessions, SessionTotals::default());
        }
        if self.zones.len() < zones {
            self.zones.resize(zones, ZoneTotals::default());
        }
        if self.caches.len() < caches {
            self.caches.resize(caches, CacheTotals::default());
        }
    }

    /// Adds one thread's counts (zones and cache zones beyond this total's
    /// length are left out); `gauges`: the parked-connections gauge too.
    fn add(&mut self, w: &WorkerMetrics, gauges: bool) {
        let (a, p) = (&mut self.all, &w.all);
        sum_all(&mut a.responses, &p.responses);
        p.time.sum_into(&mut a.time);
        sum_all(&mut a.handshakes, &p.handshakes);
        sum_all(&mut a.resumed, &p.resumed);
        sum(&mut a.handshakes_failed, &p.handshakes_failed);
        sum(&mut a.h2_connections, &p.h2_connections);
        sum(&mut a.h2_streams, &p.h2_streams);
        sum(&mut a.h3_connections, &p.h3_connections);
        sum(&mut a.h3_streams, &p.h3_streams);
        if gauges {
            sum(&mut a.parked, &p.parked);
        }
        for (t, z) in self.zones.iter_mut().zip(w.zones.iter()) {
            sum(&mut t.requests, &z.requests);
            sum_all(&mut t.responses, &z.responses);
            sum(&mut t.received, &z.received);
            sum(&mut t.sent, &z.sent);
            z.time.sum_into(&mut t.time);
        }
        for (t, c) in self.caches.iter_mut().zip(w.caches.iter()) {
            sum_all(&mut t.statuses, &c.statuses);
            sum(&mut t.evictions, &c.evictions);
        }
        for (t, c) in self.sessions.iter_mut().zip(w.sessions.iter()) {
            t.add(c, gauges);
        }
        self.mail.add(&w.mail, gauges);
    }

    /// Adds a total of the same kind (ended threads' counts).
    fn add_totals(&mut self, r: &Totals) {
        let (a, b) = (&mut self.all, &r.all);
        let add_all = |a: &mut [u64], b: &[u64]| a.iter_mut().zip(b).for_each(|(a, b)| *a = a.wrapping_add(*b));
        add_all(&mut a.responses, &b.responses);
        a.time.add(&b.time);
        add_all(&mut a.handshakes, &b.handshakes);
        add_all(&mut a.resumed, &b.resumed);
        a.handshakes_failed = a.handshakes_failed.wrapping_add(b.handshakes_failed);
        a.h2_connections = a.h2_connections.wrapping_add(b.h2_connections);
        a.h2_streams = a.h2_streams.wrapping_add(b.h2_streams);
        a.h3_connections = a.h3_connections.wrapping_add(b.h3_connections);
        a.h3_streams = a.h3_streams.wrapping_add(b.h3_streams);
        for (t, z) in self.zones.iter_mut().zip(&r.zones) {
            t.requests = t.requests.wrapping_add(z.requests);
            add_all(&mut t.responses, &z.responses);
            t.received = t.received.wrapping_add(z.received);
            t.sent = t.sent.wrapping_add(z.sent);
            t.time.add(&z.time);
        }
        for (t, c) in self.caches.iter_mut().zip(&r.caches) {
            add_all(&mut t.statuses, &c.statuses);
            t.evictions = t.evictions.wrapping_add(c.evictions);
        }
        for (t, s) in self.sessions.iter_mut().zip(&r.sessions) {
            t.add_totals(s);
        }
        self.mail.add_totals(&r.mail);
    }
}

pub fn totals(zones: usize, caches: usize, sessions: usize) -> Totals {
    let mut t = Totals::sized(zones, caches, sessions);
    let Ok(reg) = WORKERS.lock() else { return t };
    if let Some(r) = &reg.retired {
        t.add_totals(r);
    }
    for w in reg.live.iter() {
        t.add(w, true);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sized(zones: usize, caches: usize) -> WorkerMetrics {
        WorkerMetrics {
            all: ProcessCounters::default(),
            zones: (0..zones).map(|_| ZoneCounters::default()).collect(),
            caches: (0..caches).map(|_| CacheCounters::default()).collect(),
            sessions: Box::new([]),
            mail: MailCounters::default(),
        }
    }

    fn loads(c: &[AtomicU64]) -> Vec<u64> {
        c.iter().map(|c| c.load(Relaxed)).collect()
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The non-zero buckets of `h` as (bucket, count).
    fn filled(h: &Hist) -> Vec<(usize, u64)> {
        h.buckets.iter().copied().enumerate().filter(|&(_, n)| n > 0).collect()
    }

    #[test]
    fn record_fills_classes_and_buckets() {
        let w = sized(2, 0);
        w.record(1, 200, 10, 100, ms(3));
        w.record(1, 404, 10, 50, ms(5000));
        w.record(1, 499, 1, 0, ms(6000));
        w.record(1, 42, 1, 0, Duration::from_micros(7));
        w.record(9, 200, 1, 1, ms(1));
        let z = &w.zones[1];
        assert_eq!(z.requests.load(Relaxed), 4);
        assert_eq!(loads(&z.responses), [0, 1, 0, 2, 0]);
        let h = z.time.read();
        // 7 µs is in the first bucket (up to 9.152 µs); 3 ms in
        // (2.894, 3.162] ms; 5 s in (4.924, 5.380] s; 6 s in (5.878, 6.422] s.
        assert_eq!(filled(&h), [(0, 1), (66, 1), (150, 1), (152, 1)]);
        let bounds = super::super::hist::BOUNDS_NS;
        assert_eq!(
            [bounds[65], bounds[66], bounds[150], bounds[152]],
            [2_894_000, 3_162_000, 5_380_000_000, 6_422_000_000]
        );
        assert_eq!((z.received.load(Relaxed), z.sent.load(Relaxed), h.sum_us), (22, 150, 11_003_007));
        assert_eq!(w.zones[0].requests.load(Relaxed), 0);
    }

    #[test]
    fn process_counts_classes_tls_and_caches() {
        let w = sized(0, 1);
        for (status, took) in [(200, ms(0)), (304, ms(11)), (503, ms(100_000)), (600, ms(1)), (99, ms(1))] {
            w.finished(status, took);
        }
        assert_eq!(loads(&w.all.responses), [0, 1, 1, 0, 1]);
        let h = w.all.time.read();
        // 0 in the first bucket, 1 ms (a bound) in its own, 11 ms in
        // (10.93, 11.94] ms, 100 s past the last bound (+Inf).
        assert_eq!(filled(&h), [(0, 1), (53, 2), (81, 1), (179, 1)]);
        assert_eq!(h.sum_us, 100_013_000);
        w.tls_handshake("TLSv1.3", true);
        w.tls_handshake("TLSv1.2", false);
        w.tls_handshake("SSLv3", false);
        assert_eq!((loads(&w.all.handshakes), loads(&w.all.resumed)), (vec![1, 1], vec![0, 1]));
        w.cache_lookup(0, "HIT");
        w.cache_lookup(0, "REVALIDATED");
        w.cache_lookup(3, "HIT");
        w.evicted(0, 2);
        assert_eq!(loads(&w.caches[0].statuses), [1, 0, 0, 0, 0, 1, 0]);
        assert_eq!(w.caches[0].evictions.load(Relaxed), 2);
    }

    /// Sets whose threads ended are folded into one total when the next
    /// set registers: the registry keeps only held sets, and a scrape's
    /// sums stay what they were (the parked gauge excepted).
    #[test]
    fn ended_threads_sets_are_folded_not_kept() {
        let mut reg = Registry { live: Vec::new(), retired: None };
        let held = Arc::new(sized(1, 1));
        reg.live.push(held.clone());
        for round in 0..50u64 {
            let gone = Arc::new(sized(2, 1));
            gone.finished(200, ms(3));
            gone.record(1, 404, 10, 20, ms(30));
            gone.cache_lookup(0, "HIT");
            gone.tls_handshake("TLSv1.3", round % 2 == 0);
            gone.set_parked(7);
            reg.live.push(gone);
            reg.retire_unheld();
            assert_eq!(reg.live.len(), 1, "only the held set stays");
        }
        held.finished(500, ms(1));
        let mut t = Totals::sized(2, 1, 0);
        if let Some(r) = &reg.retired {
            t.add_totals(r);
        }
        for w in &reg.live {
            t.add(w, true);
        }
        assert_eq!(t.all.responses, [0, 50, 0, 0, 1]);
        assert_eq!(t.all.time.count(), 51);
        assert_eq!((t.all.handshakes, t.all.resumed), ([0, 50], [0, 25]));
        assert_eq!(t.all.parked, 0, "an ended thread's gauge is not carried over");
        assert_eq!((t.zones[1].requests, t.zones[1].responses[3], t.zones[1].sent), (50, 50, 1000));
        assert_eq!(t.zones[1].time.sum_us, 1_500_000);
        assert_eq!(t.caches[0].statuses[0], 50);
    }
}
