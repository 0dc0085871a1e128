//! Tengine's active health checks (`ngx_http_upstream_check_module`): `check`,
//! `check_http_send`, `check_http_expect_alive` in an `upstream` block, and the
//! `check_status` page.
//!
//! * `conf`: the directives, with Tengine's defaults and error messages.
//! * this module: the shared per-peer state ([`Check`], made at config load and held by
//!   `Upstream`), and the checker's lifetime ([`start`], [`Checker`], [`inherit`]).
//! * `probe`: the checker itself, one thread per worker generation with a tokio
//!   `current_thread` runtime and one task per checked peer.
//! * `status`: the `check_status` content handler (html, csv, json, prometheus).
//!
//! Workers are threads, so Tengine's shared memory zone is just an `Arc`: the checker writes a
//! peer's `down` flag, the workers read it lock-free when they build their [`PeerView`]s (a
//! checked-down peer is unusable, like a failed-out one, so the balancer falls back to the
//! backups and then to "no live upstreams" exactly as for passive failures). Upstreams without
//! `check` carry `None` and pay nothing.

pub mod conf;
mod probe;
pub mod status;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::Config;
use crate::config::proxy::PeerConf;
use crate::log::error::Level;
use crate::log_error;
use crate::upstream::balance::PeerView;

/// The check protocol (`type=`). Tengine also has `ssl_hello`, `mysql`, `ajp` and `fastcgi`;
/// sluice refuses them at load time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Connect, then peek one byte: refused, timed out or closed by the peer is a failure.
    Tcp,
    /// Connect, send `check_http_send`, read the status line; its class must be expected.
    Http,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tcp => "tcp",
            Kind::Http => "http",
        }
    }
}

/// One upstream's `check` settings, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckConf {
    pub kind: Kind,
    pub interval: Duration,
    /// The whole probe (connect, send, status line) must finish within it.
    pub timeout: Duration,
    pub rise: u32,
    pub fall: u32,
    pub default_down: bool,
    /// 0: the server's own port.
    pub port: u16,
    /// `check_http_send` (http only).
    pub send: Vec<u8>,
    /// Bit `n` set: an `nxx` status means alive (`http_1xx` .. `http_5xx`).
    pub alive: u8,
}

/// The `alive` bit for a status code (none outside 100..=599).
pub fn class_bit(code: u16) -> u8 {
    if (100..600).contains(&code) { 1 << (code / 100) } else { 0 }
}

/// One checked peer: written by the checker only, read by workers and the status page.
pub struct PeerState {
    /// The server's address as Tengine's status page shows it (`127.0.0.1:8081`).
    pub name: String,
    /// Where probes go: the server's address, with `port=` replacing its port.
    pub addr: SocketAddr,
    down: AtomicBool,
    /// Consecutive successes and failures, as on Tengine's status page.
    rise: AtomicU32,
    fall: AtomicU32,
    /// Probes and failed probes so far, and the last result (for
    /// `sluice_status`; carried over reloads with the rest).
    checks: AtomicU64,
    fails: AtomicU64,
    last: AtomicU8,
}

impl PeerState {
    /// A peer's state before its first probe: down when `default_down`.
    pub fn new(server: SocketAddr, conf: &CheckConf) -> PeerState {
        let mut addr = server;
        if conf.port != 0 {
            addr.set_port(conf.port);
        }
        PeerState {
            name: server.to_string(),
            addr,
            down: AtomicBool::new(conf.default_down),
            rise: AtomicU32::new(0),
            fall: AtomicU32::new(0),
            checks: AtomicU64::new(0),
            fails: AtomicU64::new(0),
            last: AtomicU8::new(LAST_NONE),
        }
    }

    /// Whether the checker holds the peer down.
    pub fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
    }

    /// The status page's view of it.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            down: self.down.load(Ordering::Relaxed),
            rise: self.rise.load(Ordering::Relaxed),
            fall: self.fall.load(Ordering::Relaxed),
            health: Health {
                checks: self.checks.load(Ordering::Relaxed),
                fails: self.fails.load(Ordering::Relaxed),
                last: self.last.load(Ordering::Relaxed),
            },
        }
    }

    /// A probe's result, as Tengine's `ngx_http_upstream_check_status_update`: `rise`
    /// consecutive successes bring a down peer up, `fall` consecutive failures take an up peer
    /// down, each transition logged at `error` level with Tengine's words.
    pub fn record(&self, conf: &CheckConf, ok: bool) {
        let p = self;
        let log_name = p.addr;
        // The checker thread is the only writer: load and store.
        p.checks.store(p.checks.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        if !ok {
            p.fails.store(p.fails.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        }
        p.last.store(if ok { LAST_UP } else { LAST_DOWN }, Ordering::Relaxed);
        if ok {
            let rise = p.rise.load(Ordering::Relaxed).saturating_add(1);
            p.rise.store(rise, Ordering::Relaxed);
            p.fall.store(0, Ordering::Relaxed);
            if p.down.load(Ordering::Relaxed) && rise >= conf.rise {
                p.down.store(false, Ordering::Relaxed);
                log_error!(Level::Error, "enable check peer: {} ", log_name);
            }
        } else {
            let fall = p.fall.load(Ordering::Relaxed).saturating_add(1);
            p.fall.store(fall, Ordering::Relaxed);
            p.rise.store(0, Ordering::Relaxed);
            if !p.down.load(Ordering::Relaxed) && fall >= conf.fall {
                p.down.store(true, Ordering::Relaxed);
                log_error!(Level::Error, "disable check peer: {} ", log_name);
            }
        }
    }
}

/// A peer's state as the status page reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub down: bool,
    pub rise: u32,
    pub fall: u32,
    pub health: Health,
}

/// A checked peer's probe counts, for `sluice_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Health {
    pub checks: u64,
    pub fails: u64,
    last: u8,
}

/// `Health::last`: no probe finished yet, the last one passed, failed.
const LAST_NONE: u8 = 0;
const LAST_UP: u8 = 1;
const LAST_DOWN: u8 = 2;

impl Health {
    /// The last probe's result: "up", "down", or "none" before the first.
    pub fn last(&self) -> &'static str {
        match self.last {
            LAST_UP => "up",
            LAST_DOWN => "down",
            _ => "none",
        }
    }

    /// Whether the last probe passed (None before the first).
    pub fn last_up(&self) -> Option<bool> {
        (self.last != LAST_NONE).then_some(self.last == LAST_UP)
    }
}

/// The checked peers of one upstream and their shared state.
pub struct Check {
    pub upstream: String,
    pub conf: CheckConf,
    /// Every server of the upstream except those marked `down` (Tengine does not check them),
    /// backups included, in config order.
    pub peers: Vec<PeerState>,
    /// For each peer of the upstream (the balancer's positions), its entry in `peers`.
    slots: Vec<Option<usize>>,
    /// The checker generation that runs this configuration (the status page's "generation").
    generation: AtomicU64,
}

impl fmt::Debug for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Check").field("upstream", &self.upstream).field("conf", &self.conf).finish_non_exhaustive()
    }
}

impl Check {
    pub fn new(upstream: &str, conf: CheckConf, servers: &[PeerConf]) -> Check {
        let mut peers = Vec::new();
        let mut slots = Vec::with_capacity(servers.len());
        for s in servers {
            // Unix-socket peers are not checked (their TCP address is a
            // placeholder); passive health still applies to them.
            if s.down || s.unix.is_some() {
                slots.push(None);
                continue;
            }
            slots.push(Some(peers.len()));
            peers.push(PeerState::new(s.addr, &conf));
        }
        Check { upstream: upstream.to_string(), conf, peers, slots, generation: AtomicU64::new(0) }
    }

    /// Marks the peers the checker holds down as unusable (the request path's only cost).
    pub fn mark_down(&self, views: &mut [PeerView]) {
        for (v, slot) in views.iter_mut().zip(&self.slots) {
            if let Some(p) = slot.and_then(|j| self.peers.get(j))
                && p.down.load(Ordering::Relaxed)
            {
                v.usable = false;
            }
        }
    }

    /// Whether the checker holds down the upstream's peer `i` (balancer
    /// position); None for a peer it does not check.
    pub fn peer_down(&self, i: usize) -> Option<bool> {
        let p = self.slots.get(i).copied().flatten().and_then(|j| self.peers.get(j))?;
        Some(p.down.load(Ordering::Relaxed))
    }

    pub fn snapshot(&self, j: usize) -> Option<Snapshot> {
        self.peers.get(j).map(PeerState::snapshot)
    }

    /// The probe counts of the upstream's peer `i` (balancer position);
    /// None for a peer the checker does not check.
    pub fn health(&self, i: usize) -> Option<Health> {
        let j = self.slots.get(i).copied().flatten()?;
        self.snapshot(j).map(|s| s.health)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// A probe's result for peer `j`.
    fn record(&self, j: usize, ok: bool) {
        if let Some(p) = self.peers.get(j) {
            p.record(&self.conf, ok);
        }
    }

    fn restore(&self, j: usize, s: Snapshot) {
        if let Some(p) = self.peers.get(j) {
            p.down.store(s.down, Ordering::Relaxed);
            p.rise.store(s.rise, Ordering::Relaxed);
            p.fall.store(s.fall, Ordering::Relaxed);
            p.checks.store(s.health.checks, Ordering::Relaxed);
            p.fails.store(s.health.fails, Ordering::Relaxed);
            p.last.store(s.health.last, Ordering::Relaxed);
        }
    }
}

/// Every upstream of a configuration that has `check`, in config order:
/// http's, then the other families' (Tengine's stream check module takes
/// the same directives in a `stream` upstream).
pub fn checks(cfg: &Config) -> Vec<Arc<Check>> {
    by_family(cfg).into_iter().flat_map(|(_, c)| c).collect()
}

/// The checked upstreams of each family (`http`, `stream`): names are
/// per family, so a reload matches them within one.
fn by_family(cfg: &Config) -> Vec<(&'static str, Vec<Arc<Check>>)> {
    let of = |ups: &[Arc<crate::config::proxy::Upstream>]| ups.iter().filter_map(|u| u.check.clone()).collect();
    let mut out = vec![("http", of(&cfg.http.upstreams))];
    out.extend(cfg.families.iter().map(|(name, f)| (*name, of(f.upstreams()))));
    out
}

/// Carries the checked state over a reload, as Tengine does through its shared memory: a peer
/// with the same upstream name and address starts where the old generation's checker left it,
/// so a reload neither takes every peer down (`default_down`) nor up. Called before the new
/// generation's checker starts; the old one may still record a probe meanwhile, which the new
/// checker's next probes correct.
pub fn inherit(old: &Config, new: &Config) {
    let olds = by_family(old);
    for (family, checks) in by_family(new) {
        let Some((_, old_checks)) = olds.iter().find(|(f, _)| *f == family) else { continue };
        inherit_family(old_checks, &checks);
    }
}

fn inherit_family(old_checks: &[Arc<Check>], new: &[Arc<Check>]) {
    for c in new {
        let Some(o) = old_checks.iter().find(|o| o.upstream == c.upstream) else { continue };
        for (j, p) in c.peers.iter().enumerate() {
            let found = o.peers.iter().position(|q| q.name == p.name);
            if let Some(s) = found.and_then(|k| o.snapshot(k)) {
                c.restore(j, s);
            }
        }
    }
}

/// Tengine's `generation`: one more for each configuration the process has run.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The generation of the newest configuration started.
pub fn current_generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// The running checker of one worker generation. Dropping it tells the checker thread to stop
/// (its in-flight probes are abandoned); [`Checker::stop`] also waits for it.
pub struct Checker {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checker {
    pub fn stop(mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.stop.take();
    }
}

/// Starts the checker for a configuration: one thread for the whole process (not one per
/// worker), or none when no upstream has `check`.
pub fn start(cfg: &Config) -> Result<Option<Checker>, String> {
    let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
    let all = checks(cfg);
    for c in &all {
        c.generation.store(generation, Ordering::Relaxed);
    }
    // Upstreams with a zone: their peers come and go, the checker follows.
    let zones: Vec<_> = crate::upstream::zone::zones(cfg).into_iter().filter(|z| z.conf.check.is_some()).collect();
    if all.iter().all(|c| c.peers.is_empty()) && zones.is_empty() {
        return Ok(None);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("sluice-check".into())
        .spawn(move || probe::run(all, zones, rx))
        .map_err(|e| format!("could not start the upstream check thread ({e})"))?;
    Ok(Some(Checker { stop: Some(tx), thread: Some(thread) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: usize) -> Vec<PeerConf> {
        (0..n)
            .map(|i| {
                let addr: SocketAddr = format!("127.0.0.1:{}", 9000 + i).parse().unwrap();
                PeerConf::new(addr, None, addr.to_string())
            })
            .collect()
    }

    fn conf(rise: u32, fall: u32, default_down: bool) -> CheckConf {
        CheckConf {
            kind: Kind::Tcp,
            interval: Duration::from_millis(100),
            timeout: Duration::from_millis(100),
            rise,
            fall,
            default_down,
            port: 0,
            send: Vec::new(),
            alive: class_bit(200) | class_bit(300),
        }
    }

    #[test]
    fn rise_and_fall_count_consecutive_results() {
        let c = Check::new("b", conf(2, 3, true), &servers(1));
        assert!(c.snapshot(0).unwrap().down, "default_down");
        c.record(0, true);
        assert_eq!(c.snapshot(0).map(|s| (s.down, s.rise, s.fall)), Some((true, 1, 0)));
        c.record(0, false);
        c.record(0, true);
        assert!(c.snapshot(0).unwrap().down, "a failure restarts the rise count");
        c.record(0, true);
        assert_eq!(c.snapshot(0).map(|s| (s.down, s.rise, s.fall)), Some((false, 2, 0)));
        c.record(0, false);
        c.record(0, false);
        assert!(!c.snapshot(0).unwrap().down);
        c.record(0, false);
        assert_eq!(c.snapshot(0).map(|s| (s.down, s.rise, s.fall)), Some((true, 0, 3)));
        let h = c.health(0).expect("checked");
        assert_eq!((h.checks, h.fails, h.last(), h.last_up()), (7, 4, "down", Some(false)));
    }

    #[test]
    fn down_servers_are_not_checked_and_views_follow_the_state() {
        let mut s = servers(3);
        s[1].down = true;
        let c = Check::new("b", CheckConf { port: 81, ..conf(1, 1, false) }, &s);
        assert_eq!(c.peers.len(), 2);
        assert_eq!((c.peers[1].name.as_str(), c.peers[1].addr.port()), ("127.0.0.1:9002", 81));
        c.record(1, false);
        let mut views = vec![PeerView { usable: true, conns: 0 }; 3];
        c.mark_down(&mut views);
        assert_eq!(views.iter().map(|v| v.usable).collect::<Vec<_>>(), [true, true, false]);
    }

    #[test]
    fn class_bits() {
        assert_eq!(class_bit(204), 1 << 2);
        assert_eq!(class_bit(599), 1 << 5);
        assert_eq!(class_bit(99) | class_bit(600), 0);
    }
}
