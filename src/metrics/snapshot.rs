//! One scrape: every thread's counters summed now, plus what is read from
//! shared state at this moment (connections, cache zones' sizes, queue
//! lengths, health-check results, reloads). The scrape pays for the sums;
//! the request path never does.

use std::sync::Arc;

use super::l4::{MailTotals, SessionTotals};
use super::page::Page;
use super::upstream::{PeerTotals, UpstreamTotals};
use super::worker::{CacheTotals, ProcessTotals, ZoneTotals};
use crate::worker::stats::Totals;

/// Everything one scrape reports.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The configuration generation (1 at start, one more per reload).
    pub generation: u64,
    /// The server's clock at the scrape, unix ms.
    pub time_ms: u64,
    /// When the running generation started, unix ms.
    pub load_ms: u64,
    pub reloads_ok: u64,
    pub reloads_failed: u64,
    pub conns: Totals,
    pub all: ProcessTotals,
    pub zones: Vec<(Arc<str>, ZoneTotals)>,
    pub caches: Vec<CacheSnap>,
    pub upstreams: Vec<UpstreamSnap>,
    /// The stream family's session zones, by name.
    pub stream_zones: Vec<(Arc<str>, SessionTotals)>,
    /// The stream family's upstream blocks.
    pub stream_upstreams: Vec<UpstreamSnap>,
    pub mail: MailTotals,
}

/// A cache zone: lookups and evictions counted, and its size now.
#[derive(Debug, Default)]
pub struct CacheSnap {
    pub name: String,
    pub counts: CacheTotals,
    /// Bytes of entry files on disk.
    pub size: u64,
    /// `max_size`, when set.
    pub max_size: Option<u64>,
    /// Bytes held by the memory tier.
    pub memory_size: u64,
    /// Entry files on disk.
    pub entries: u64,
}

/// An upstream's `queue` now.
#[derive(Debug, Default, Clone, Copy)]
pub struct QueueSnap {
    /// Requests waiting now (all workers).
    pub length: u64,
    pub waits: u64,
    pub timeouts: u64,
}

#[derive(Debug, Default)]
pub struct UpstreamSnap {
    pub name: String,
    pub totals: UpstreamTotals,
    /// None without a `queue` directive.
    pub queue: Option<QueueSnap>,
    pub peers: Vec<PeerSnap>,
}

#[derive(Debug)]
pub struct PeerSnap {
    pub name: Arc<str>,
    /// "up", "down", "unhealthy" or "unavail".
    pub state: &'static str,
    pub totals: PeerTotals,
    /// The active health check's counts; None for a peer it does not check.
    pub health: Option<crate::upstream::check::Health>,
}

/// Sums every thread's counters now.
pub fn snapshot(page: &Page) -> Snapshot {
    let names = super::zone_names();
    let session_names = super::l4::session_zone_names();
    let counted = super::worker::totals(names.len(), super::CACHES.len(), session_names.len());
    let zones = names.into_iter().zip(counted.zones).collect();
    let stream_zones = session_names.into_iter().zip(counted.sessions).collect();
    let caches = page
        .caches
        .iter()
        .map(|conf| {
            // The zone as the first request would find it (starting its
            // loader if no request has yet).
            let (size, entries, memory_size) = crate::http::cache::zone::get(conf).usage();
            CacheSnap {
                name: conf.name.clone(),
                counts: counted.caches.get(conf.metrics as usize).copied().unwrap_or_default(),
                size,
                max_size: conf.max_size,
                memory_size,
                entries,
            }
        })
        .collect();
    let now = crate::clock::now_secs();
    let upstreams = page.upstreams.iter().map(|u| upstream("http", u, now)).collect();
    let stream_upstreams = super::l4::published("stream").iter().map(|u| upstream("stream", u, now)).collect();
    let (reloads_ok, reloads_failed, load_ms) = super::reloads();
    Snapshot {
        generation: crate::upstream::check::current_generation(),
        time_ms: crate::clock::unix_now_ms(),
        load_ms,
        reloads_ok,
        reloads_failed,
        conns: crate::worker::stats::totals(),
        all: counted.all,
        zones,
        caches,
        upstreams,
        stream_zones,
        stream_upstreams,
        mail: counted.mail,
    }
}

/// Upstream `u` of family `family` with every worker's counts.
fn upstream(family: &str, u: &crate::config::proxy::Upstream, now: u64) -> UpstreamSnap {
    let names: Vec<Arc<str>> = u.peers.iter().map(|p| p.name.clone()).collect();
    let (totals, peer_totals) = super::upstream::upstream_totals(family, &u.name, &names, now);
    let peers = match &u.zone {
        Some(z) => zone_peers(z, now),
        None => static_peers(u, peer_totals),
    };
    let queue = u.queue.as_ref().map(|q| QueueSnap {
        length: q.waiting() as u64,
        waits: totals.queue_waits,
        timeouts: totals.queue_timeouts,
    });
    UpstreamSnap { name: u.name.clone(), totals, queue, peers }
}

/// The peers of an upstream without a zone, with every worker's counts.
fn static_peers(u: &crate::config::proxy::Upstream, peer_totals: Vec<super::upstream::PeerTotals>) -> Vec<PeerSnap> {
    u.peers
        .iter()
        .zip(peer_totals)
        .enumerate()
        .map(|(i, (p, t))| {
            let checked_down = u.check.as_ref().and_then(|c| c.peer_down(i)).unwrap_or(false);
            let state = if p.down {
                "down"
            } else if checked_down {
                "unhealthy"
            } else if t.unavailable {
                "unavail"
            } else {
                "up"
            };
            PeerSnap { name: p.name.clone(), state, totals: t, health: u.check.as_ref().and_then(|c| c.health(i)) }
        })
        .collect()
}

/// The peers an upstream with a `zone` has now (resolved ones named by
/// address, as nginx's API names them), with the counts all workers
/// keep in the zone.
fn zone_peers(z: &crate::upstream::zone::Zone, now: u64) -> Vec<PeerSnap> {
    use std::sync::atomic::Ordering::Relaxed;
    z.current()
        .list
        .iter()
        .map(|p| {
            let s = &p.shared;
            let totals = super::upstream::PeerTotals {
                requests: s.requests.load(Relaxed),
                failures: s.failures.load(Relaxed),
                active: s.active.load(Relaxed),
                unavailable: s.unavailable_until.load(Relaxed) > now,
                unavail: s.unavail.load(Relaxed),
                traffic: s.traffic.read(),
            };
            let state = if p.conf.down {
                "down"
            } else if p.conf.drain {
                "draining"
            } else if s.checked_down() {
                "unhealthy"
            } else if totals.unavailable {
                "unavail"
            } else {
                "up"
            };
            let health = s.check.as_ref().map(|c| c.snapshot().health);
            PeerSnap { name: p.conf.name.clone(), state, totals, health }
        })
        .collect()
}

/// A scrape with one of everything, for the writers' tests.
#[cfg(test)]
pub fn sample() -> Snapshot {
    use super::hist::{Hist, HistCounters};
    let hist = |ms: &[u64]| -> Hist {
        let h = HistCounters::default();
        ms.iter().for_each(|&ms| h.record(std::time::Duration::from_millis(ms)));
        h.read()
    };
    let mut z = ZoneTotals { requests: 3, received: 30, sent: 300, ..Default::default() };
    z.responses[1] = 2;
    z.responses[3] = 1;
    z.time = hist(&[2, 3, 1200]);
    let mut all =
        ProcessTotals { handshakes: [1, 4], resumed: [0, 2], h2_connections: 2, h2_streams: 7, ..Default::default() };
    all.responses = [0, 5, 1, 1, 0];
    all.time = hist(&[1, 1, 1, 1, 1, 1, 100_000]);
    let mut counts = CacheTotals { evictions: 3, ..Default::default() };
    counts.statuses[0] = 4;
    counts.statuses[1] = 2;
    let health = |i: usize| (i == 0).then(crate::upstream::check::Health::default);
    let peer =
        |i: usize, name: &str, state, totals| PeerSnap { name: Arc::from(name), state, totals, health: health(i) };
    Snapshot {
        generation: 1,
        time_ms: 1_700_000_000_123,
        load_ms: 1_700_000_000_000,
        reloads_ok: 2,
        reloads_failed: 1,
        conns: Totals { active: 1, accepts: 2, handled: 2, requests: 4, reading: 0, writing: 1, waiting: 0 },
        all,
        zones: vec![(Arc::from("a\"b\\c"), z)],
        caches: vec![CacheSnap {
            name: "c1".into(),
            counts,
            size: 4096,
            max_size: Some(1 << 20),
            memory_size: 300,
            entries: 2,
        }],
        upstreams: vec![UpstreamSnap {
            name: "up".into(),
            totals: UpstreamTotals { response: hist(&[5, 7]), ..Default::default() },
            queue: Some(QueueSnap { length: 1, waits: 3, timeouts: 1 }),
            peers: vec![
                peer(0, "127.0.0.1:1", "up", PeerTotals { requests: 5, ..Default::default() }),
                peer(1, "127.0.0.1:2", "unavail", PeerTotals { failures: 1, ..Default::default() }),
            ],
        }],
        stream_zones: vec![(
            Arc::from("tcp1"),
            SessionTotals {
                connections: 4,
                processing: 1,
                sessions: [0, 2, 0, 0, 1],
                received: 9,
                sent: 12,
                discarded: 1,
            },
        )],
        stream_upstreams: vec![UpstreamSnap {
            name: "sb".into(),
            totals: UpstreamTotals::default(),
            queue: None,
            peers: vec![peer(
                1,
                "127.0.0.1:3",
                "up",
                PeerTotals {
                    requests: 3,
                    failures: 1,
                    unavail: 1,
                    traffic: crate::upstream::traffic::TrafficTotals {
                        sent: 9,
                        received: 12,
                        times: [(3, 2), (10, 2), (0, 0)],
                        selected_ms: 1_700_000_000_123,
                    },
                    ..Default::default()
                },
            )],
        }],
        mail: MailTotals { sessions: [1, 0, 2], processing: [0, 0, 1], auth: [2, 1, 0] },
    }
}
