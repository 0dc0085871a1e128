//! Live metrics: `status_zone NAME` (server, location; NGINX Plus's name)
//! counts the requests of a server or location under a zone, and the
//! `sluice_status` content handler ([`page`]) reports those zones, the whole
//! process's requests, connections, TLS handshakes, HTTP/2, cache zones,
//! reloads and every configured upstream (peers, queue, response times,
//! health checks), as JSON or in Prometheus' text format.
//!
//! Nothing here is shared between workers on the request path: each worker
//! owns one [`WorkerMetrics`] ([`worker`]) and one [`PeerSet`] per upstream
//! it proxies to ([`upstream`]), and is their only writer, so a count is a
//! relaxed load and store (as [`crate::worker::stats`] does for
//! stub_status: no locked instruction, no cache line another worker
//! writes). Threads that are not workers (a cache zone's manager) get a
//! [`WorkerMetrics`] of their own the same way. A scrape sums every
//! registered set, old generations' included, so counters keep growing
//! across reloads; a set whose thread has ended is folded into a retired
//! total when the next one registers, so the registry does not grow with
//! reloads. Registering takes a mutex once, when a worker starts or
//! first uses an upstream. What the master alone writes (reloads) and what
//! lives in shared state already (a cache zone's size, a queue's length, a
//! health checker's results) is read at scrape time.
//!
//! * [`worker`]: per-worker counters (zones, all requests, TLS, HTTP/2,
//!   parked connections, cache lookups and evictions).
//! * [`upstream`]: per-worker counters of an upstream block's peers, queue
//!   and response times.
//! * [`hist`]: the time histograms' buckets (10 µs to 60 s within 10 %).
//! * [`l4`]: the counters of the families that are not HTTP (stream
//!   session zones, mail sessions and `auth_http`), and their published
//!   upstream blocks.
//! * [`snapshot`]: one scrape's sums; [`json`] and [`prometheus`] write it.
//! * [`page`]: the `sluice_status` handler; [`dashboard`]: its HTML page.

pub mod dashboard;
pub mod hist;
pub mod json;
pub mod l4;
pub mod page;
pub mod prometheus;
pub mod snapshot;
pub mod upstream;
pub mod worker;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, LOC, R, SRV, Set, cmd};

pub use hist::Hist;
pub use upstream::{PeerSet, PeerTotals};
pub use worker::{WorkerMetrics, ZoneTotals, register, with_local};

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
    // Cache zones are built before any server, so the page sees them all.
    let mut caches: Vec<_> = ctx.cache_zones.values().cloned().collect();
    caches.sort_by(|a, b| a.name.cmp(&b.name));
    c.metrics.page = Some(Arc::new(page::Page { fixed, upstreams, caches }));
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

/// Names in the order first configured; a name keeps its index for the
/// life of the process, so reloads keep counting into the same slot.
struct Names(Mutex<Vec<Arc<str>>>);

impl Names {
    const fn new() -> Names {
        Names(Mutex::new(Vec::new()))
    }

    fn index(&self, name: &str) -> u32 {
        let Ok(mut z) = self.0.lock() else { return u32::MAX };
        let i = z.iter().position(|n| &**n == name).unwrap_or_else(|| {
            z.push(Arc::from(name));
            z.len() - 1
        });
        i as u32
    }

    fn all(&self) -> Vec<Arc<str>> {
        self.0.lock().map(|z| z.clone()).unwrap_or_default()
    }

    fn len(&self) -> usize {
        self.0.lock().map(|z| z.len()).unwrap_or(0)
    }
}

/// `status_zone` names.
static ZONES: Names = Names::new();
/// Cache zone names (`proxy_cache_path keys_zone=NAME`).
static CACHES: Names = Names::new();

fn zone_index(name: &str) -> u32 {
    ZONES.index(name)
}

/// Every zone name configured so far, by index.
pub fn zone_names() -> Vec<Arc<str>> {
    ZONES.all()
}

/// The counter slot of cache zone `name` (`ZoneConf::metrics`).
pub fn cache_index(name: &str) -> u32 {
    CACHES.index(name)
}

/// A count of the calling thread's own: relaxed load and store, no locked
/// instruction (one writer only).
fn add(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Reloads that started a new generation, and those refused (bad
/// configuration, a file or socket that could not be opened), and when the
/// running generation started (unix ms). The master thread is their only
/// writer.
static RELOADS_OK: AtomicU64 = AtomicU64::new(0);
static RELOADS_FAILED: AtomicU64 = AtomicU64::new(0);
static LOADED_MS: AtomicU64 = AtomicU64::new(0);

/// The master is starting a worker generation (at start, or on a reload
/// when `reload`): its load time, and the reload counted as done. Called
/// before any thread of the generation runs, so that a scrape that sees the
/// new generation sees its reload too. The families' upstream blocks of
/// `cfg` are published for the page ([`l4::publish`]). Returns the
/// previous load time and publication, for [`generation_abandoned`].
pub fn generation_starting(reload: bool, cfg: &crate::config::model::Config) -> (u64, l4::Published) {
    if reload {
        add(&RELOADS_OK, 1);
    }
    let published = l4::publish(cfg);
    (LOADED_MS.swap(crate::clock::unix_now_ms(), Relaxed), published)
}

/// The generation [`generation_starting`] announced did not start: the
/// running one's load time and upstream blocks again, and the reload not
/// counted as done ([`reload_failed`] counts it as failed).
pub fn generation_abandoned(reload: bool, (previous_load_ms, published): (u64, l4::Published)) {
    if reload {
        RELOADS_OK.store(RELOADS_OK.load(Relaxed).saturating_sub(1), Relaxed);
    }
    l4::restore(published);
    LOADED_MS.store(previous_load_ms, Relaxed);
}

/// A reload was refused (bad configuration, a file or socket that could
/// not be opened, a generation that did not start).
pub fn reload_failed() {
    add(&RELOADS_FAILED, 1);
}

/// (reloads ok, reloads failed, when the running generation started).
pub fn reloads() -> (u64, u64, u64) {
    (RELOADS_OK.load(Relaxed), RELOADS_FAILED.load(Relaxed), LOADED_MS.load(Relaxed))
}
