//! Upstreams whose servers change while sluice runs: an `upstream` block
//! with `zone` (nginx's shared memory zone, NGINX Plus's run-time API), its
//! `server NAME resolve [service=...]` lines re-resolved in the background,
//! and the servers the API adds, changes and removes.
//!
//! Workers are threads, so nginx's shared zone is a [`Zone`] in an `Arc`
//! that every worker's `Upstream` holds: the writers (the resolver thread,
//! an API request) change its server list under a mutex and publish a new
//! immutable [`Peers`] list with a new version number; each worker compares
//! the version (one relaxed load) when it next uses the upstream and, when
//! it changed, takes the new list and rebuilds its balancer ([`view`]),
//! keeping the passive-health state and the pooled connections of the
//! peers that stayed (by [`Peer::id`]). Upstreams without a zone do not
//! have one and pay nothing.
//!
//! What a peer has that all workers share (its connections and failures,
//! which balancing and `max_conns`/`max_fails` read, its request counts
//! for `sluice_status`, the active check's verdict) is in [`Shared`], which
//! stays with the peer as long as it is in the list, across changes of its
//! parameters and across reloads ([`inherit`]).
//!
//! * `resolve`: the background resolution (one thread per worker
//!   generation, one task per resolvable server).
//! * `view`: one worker's view of the list.
//! * `api`: NGINX Plus's run-time API on the servers; `registry`: the
//!   serving configuration's upstreams, where the API finds them.
//! * `state`: the `state` file, written after every API change.

pub mod api;
pub mod registry;
pub mod resolve;
pub mod state;
pub mod view;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::config::proxy::PeerConf;
use crate::resolver::ResolverConf;

/// A `server` of a zone as written: a configuration line, a line of the
/// `state` file, or an API addition.
#[derive(Clone, Debug)]
pub struct ServerSpec {
    /// The address as written: `10.0.0.1:8080`, `backend.example:8080`,
    /// `unix:/run/app.sock`.
    pub server: String,
    /// `resolve`: `host` is resolved again in the background.
    pub resolve: bool,
    /// The host part of `server` for a resolvable server.
    pub host: String,
    /// `service=NAME` as written (`http`, `_http._tcp`).
    pub service: Option<String>,
    /// The parameters each of its peers gets. For a static server `addr`
    /// is its address; for a resolvable one the port the addresses get (0
    /// with `service=`: the SRV records give the ports).
    pub params: PeerConf,
}

impl ServerSpec {
    /// The name asked in an SRV question: `_http._tcp.example.net` for
    /// `service=http` (nginx's short form) or `service=_http._tcp`.
    pub fn srv_name(&self) -> Option<String> {
        let s = self.service.as_deref()?;
        Some(if s.starts_with('_') { format!("{s}.{}", self.host) } else { format!("_{s}._tcp.{}", self.host) })
    }

    /// The name asked, for log lines.
    pub fn question(&self) -> String {
        self.srv_name().unwrap_or_else(|| self.host.clone())
    }
}

/// One peer's state that every worker shares, kept while the peer stays:
/// what nginx keeps in the zone's `ngx_http_upstream_rr_peer_t` (`conns`,
/// `fails`, `accessed`, `checked`) under the peer's lock, so `max_conns`,
/// `max_fails` and least-connections balancing count every worker.
#[derive(Default)]
pub struct Shared {
    /// The failure accounting and connection count of all workers.
    pub health: Mutex<crate::upstream::balance::PeerHealth>,
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    pub active: AtomicU64,
    /// Until when (`clock::now_secs`) some worker holds it failed out by
    /// `max_fails`.
    pub unavailable_until: AtomicU64,
    /// Times a failure put it at its `max_fails` (NGINX Plus's `unavail`).
    pub unavail: AtomicU64,
    /// Bytes, times and last selection of its sessions (the stream
    /// family's), counted by every worker.
    pub traffic: crate::upstream::traffic::Traffic,
    /// `slow_start`: when (`clock::unix_ms`) the peer was added or came
    /// back; 0: not ramping up.
    pub slow_since: AtomicU64,
    /// Tengine's `check`: the checker's verdict on this peer, when the
    /// upstream has `check` (and the peer is neither `down` nor a unix
    /// socket, which Tengine does not check).
    pub check: Option<crate::upstream::check::PeerState>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("requests", &self.requests).field("active", &self.active).finish_non_exhaustive()
    }
}

impl Shared {
    /// The peer's health now.
    pub fn health(&self) -> crate::upstream::balance::PeerHealth {
        *lock(&self.health)
    }

    /// Takes a connection slot for a pick: false when another worker took
    /// the last one (`max_conns`) or failed it out since the views were
    /// read, as nginx checks again under the peer's lock.
    pub fn claim(&self, info: &crate::upstream::balance::PeerInfo, now: u64) -> bool {
        let mut h = lock(&self.health);
        if !h.view(info, now).usable {
            return false;
        }
        h.picked(info, now);
        drop(h);
        self.picked();
        true
    }

    /// The session connected (nginx stream's `NOTIFY_CONNECT`).
    pub fn connected(&self) {
        lock(&self.health).connected();
    }

    /// Gives the slot back; true when this failure leaves the peer at its
    /// `max_fails` (nginx's "upstream server temporarily disabled").
    pub fn release(&self, conf: &PeerConf, failed: bool, single: bool) -> bool {
        let (max_fails, fail_timeout) = (conf.max_fails, conf.fail_timeout);
        let now = crate::clock::now_secs();
        let (disabled, recovered) = {
            let mut h = lock(&self.health);
            let was_out = max_fails != 0 && h.fails() >= max_fails;
            h.released(failed, now, single);
            (failed && !single && max_fails != 0 && h.fails() >= max_fails, was_out && h.fails() == 0)
        };
        // Back after `fail_timeout`: its weight ramps up again.
        if recovered {
            self.start_slow(conf);
        }
        self.done(failed, disabled, fail_timeout);
        disabled
    }

    pub fn picked(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
        self.traffic.selected();
    }

    /// Done with the peer; `failed_out`: that failure reached `max_fails`.
    pub fn done(&self, failed: bool, failed_out: bool, fail_timeout: Duration) {
        let _ = self.active.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_sub(1)));
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        if failed_out {
            self.unavail.fetch_add(1, Ordering::Relaxed);
            let until = crate::clock::now_secs().saturating_add(fail_timeout.as_secs());
            self.unavailable_until.fetch_max(until, Ordering::Relaxed);
        }
    }

    /// Starts the `slow_start` ramp (a peer added, or back in service).
    pub fn start_slow(&self, conf: &PeerConf) {
        if !conf.slow_start.is_zero() {
            self.slow_since.store(crate::clock::unix_ms().max(1), Ordering::Relaxed);
        }
    }

    /// How far into its `slow_start` the peer is, in thousandths (None:
    /// at full weight). nginx Plus grows the weight from zero over the
    /// time; sluice skips the peer in the same proportion of picks.
    pub fn slow_start_permille(&self, conf: &PeerConf, now_ms: u64) -> Option<u64> {
        let since = self.slow_since.load(Ordering::Relaxed);
        if since == 0 || conf.slow_start.is_zero() {
            return None;
        }
        let total = conf.slow_start.as_millis().max(1) as u64;
        let gone = now_ms.saturating_sub(since);
        if gone >= total {
            self.slow_since.store(0, Ordering::Relaxed);
            return None;
        }
        Some(gone * 1000 / total)
    }

    /// Whether the active check holds the peer down.
    pub fn checked_down(&self) -> bool {
        self.check.as_ref().is_some_and(|c| c.is_down())
    }

    /// A new peer's shared state: with `check`, its checker state starts
    /// as `default_down` says.
    fn new(conf: &PeerConf, check: Option<&crate::upstream::check::CheckConf>) -> Arc<Shared> {
        let check = check
            .filter(|_| !conf.down && conf.unix.is_none())
            .map(|c| crate::upstream::check::PeerState::new(conf.addr, c));
        Arc::new(Shared { check, ..Default::default() })
    }
}

/// One peer: an address to connect to, with its parameters.
#[derive(Debug)]
pub struct Peer {
    /// Unique in the zone for its lifetime (NGINX Plus's server `id`).
    pub id: u64,
    /// The resolvable server it was resolved from (the API's `parent`);
    /// None for a static server, whose peer has the server's own id.
    pub parent: Option<u64>,
    /// `conf.name` is the address (`10.0.0.1:8080`) for a resolved peer,
    /// as written for a static one.
    pub conf: PeerConf,
    /// The `server` as nginx keeps it for consistent hashing: the line as
    /// written, or the SRV record's target.
    pub server: Arc<str>,
    pub shared: Arc<Shared>,
}

/// A published list: what workers balance over.
#[derive(Debug, Default)]
pub struct Peers {
    pub version: u64,
    pub list: Vec<Arc<Peer>>,
}

/// One server of the zone and the peers it makes.
#[derive(Debug)]
pub struct Entry {
    pub id: u64,
    pub spec: ServerSpec,
    pub peers: Vec<Arc<Peer>>,
}

#[derive(Debug, Default)]
struct Servers {
    list: Vec<Entry>,
    next_id: u64,
}

/// An address a resolution found for a resolvable server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub addr: SocketAddr,
    /// The SRV record's target (its peers' `server`); None for A/AAAA.
    pub target: Option<String>,
    /// The SRV record's weight.
    pub weight: Option<u16>,
    /// Its SRV priority is above the lowest of the answer: a backup.
    pub backup: bool,
}

/// The settings a zone was configured with.
#[derive(Debug, Clone)]
pub struct ZoneConf {
    /// The protocol family of the upstream (`http`, `stream`): upstream
    /// names are per family.
    pub family: &'static str,
    /// The `zone` directive's name.
    pub name: String,
    pub resolver: Option<ResolverConf>,
    pub resolver_timeout: Duration,
    /// The balancing method takes `backup` peers (round robin,
    /// least_conn): SRV records above the lowest priority become backups;
    /// otherwise they are left out, as nginx does without a backup list.
    pub backups: bool,
    /// Tengine's `check` settings, when the upstream has `check`.
    pub check: Option<crate::upstream::check::CheckConf>,
    /// NGINX Plus's `state FILE`: written after every API change.
    pub state: Option<std::path::PathBuf>,
    /// A stream upstream (servers name their ports).
    pub l4: bool,
}

/// An upstream's changeable server list, shared by all workers.
#[derive(Debug)]
pub struct Zone {
    pub upstream: String,
    pub conf: ZoneConf,
    version: AtomicU64,
    current: Mutex<Arc<Peers>>,
    servers: Mutex<Servers>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `10.0.0.1:80`, `[::1]:80`: nginx's `ngx_sock_ntop` with the port.
pub fn addr_text(a: &SocketAddr) -> String {
    a.to_string()
}

impl Zone {
    /// A zone with the servers of the configuration (static servers get
    /// their peer at once, resolvable ones when first resolved).
    pub fn new(upstream: &str, conf: ZoneConf, specs: Vec<ServerSpec>) -> Zone {
        let z = Zone {
            upstream: upstream.to_string(),
            conf,
            version: AtomicU64::new(0),
            current: Mutex::new(Arc::new(Peers::default())),
            servers: Mutex::new(Servers::default()),
        };
        {
            let mut g = lock(&z.servers);
            for spec in specs {
                let id = g.next_id;
                g.next_id += 1;
                let peers = static_peer(id, &spec, z.conf.check.as_ref()).into_iter().collect();
                g.list.push(Entry { id, spec, peers });
            }
            z.publish(&g);
        }
        z
    }

    /// The version of the published list (workers compare it per use).
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The published list.
    pub fn current(&self) -> Arc<Peers> {
        lock(&self.current).clone()
    }

    fn publish(&self, s: &Servers) {
        let mut cur = lock(&self.current);
        let version = cur.version + 1;
        let list = s.list.iter().flat_map(|e| e.peers.iter().cloned()).collect();
        *cur = Arc::new(Peers { version, list });
        self.version.store(version, Ordering::Release);
    }

    /// The resolvable servers, for the resolver thread: (id, spec).
    pub fn resolvable(&self) -> Vec<(u64, ServerSpec)> {
        lock(&self.servers).list.iter().filter(|e| e.spec.resolve).map(|e| (e.id, e.spec.clone())).collect()
    }

    /// Runs `f` on the server entries (API reads).
    pub fn with_servers<R>(&self, f: impl FnOnce(&[Entry]) -> R) -> R {
        f(&lock(&self.servers).list)
    }

    /// A resolution of server `id` found `found` (empty: the name no longer
    /// exists). Peers whose address is still there stay as they are (same
    /// id, same shared state); the others go; new addresses become new
    /// peers. Returns whether the list changed (then published), or None
    /// when the server is gone (removed by the API meanwhile).
    pub fn resolved(&self, id: u64, found: &[Found]) -> Option<bool> {
        let mut g = lock(&self.servers);
        let s: &mut Servers = &mut g;
        let e = s.list.iter_mut().find(|e| e.id == id)?;
        let changed = merge(e, found, &self.conf, &mut s.next_id);
        if changed {
            self.publish(&g);
        }
        Some(changed)
    }

    /// The servers as configured or changed (the API's list): each with
    /// its id.
    pub fn servers(&self) -> Vec<(u64, ServerSpec)> {
        lock(&self.servers).list.iter().map(|e| (e.id, e.spec.clone())).collect()
    }

    /// One server by id.
    pub fn server(&self, id: u64) -> Option<ServerSpec> {
        lock(&self.servers).list.iter().find(|e| e.id == id).map(|e| e.spec.clone())
    }

    /// Adds a server (the API's POST): a static one serves at once, a
    /// resolvable one once the resolver thread finds it (it looks for new
    /// servers on its next round). Returns its id.
    pub fn add(&self, spec: ServerSpec) -> u64 {
        let mut g = lock(&self.servers);
        let id = g.next_id;
        g.next_id += 1;
        let peers: Vec<Arc<Peer>> = static_peer(id, &spec, self.conf.check.as_ref()).into_iter().collect();
        for p in &peers {
            p.shared.start_slow(&p.conf);
        }
        g.list.push(Entry { id, spec, peers });
        self.publish(&g);
        drop(g);
        self.save();
        id
    }

    /// Changes a server's parameters (the API's PATCH); its peers keep
    /// their ids and shared state. None: no such server.
    pub fn modify(&self, id: u64, f: impl FnOnce(&mut PeerConf)) -> Option<ServerSpec> {
        let mut g = lock(&self.servers);
        let e = g.list.iter_mut().find(|e| e.id == id)?;
        let was_down = e.spec.params.down;
        f(&mut e.spec.params);
        let params = e.spec.params.clone();
        for p in e.peers.iter_mut() {
            let mut conf = params.clone();
            // A resolved peer keeps its address, and an SRV record's weight.
            conf.addr = p.conf.addr;
            conf.unix = p.conf.unix.clone();
            conf.name = p.conf.name.clone();
            conf.backup = p.conf.backup;
            if e.spec.service.is_some() && params.weight == 1 {
                conf.weight = p.conf.weight;
            }
            if was_down && !conf.down {
                p.shared.start_slow(&conf);
            }
            *p =
                Arc::new(Peer { id: p.id, parent: p.parent, conf, server: p.server.clone(), shared: p.shared.clone() });
        }
        let spec = e.spec.clone();
        self.publish(&g);
        drop(g);
        self.save();
        Some(spec)
    }

    /// Removes a server and its peers (the API's DELETE); requests at
    /// them finish. False: no such server.
    pub fn remove(&self, id: u64) -> bool {
        let mut g = lock(&self.servers);
        let before = g.list.len();
        g.list.retain(|e| e.id != id);
        if g.list.len() == before {
            return false;
        }
        self.publish(&g);
        drop(g);
        self.save();
        true
    }

    /// Writes the `state` file, if the upstream has one (logged on
    /// failure: the change itself is made).
    fn save(&self) {
        let Some(path) = &self.conf.state else { return };
        let specs: Vec<ServerSpec> = lock(&self.servers).list.iter().map(|e| e.spec.clone()).collect();
        if let Err(e) = state::write(path, &specs) {
            crate::log_error!(crate::log::error::Level::Crit, "{}", e);
        }
    }

    /// Takes over what `old` (the same upstream in the configuration being
    /// replaced) knew: the addresses its resolvable servers had (with this
    /// configuration's port and parameters, as nginx's zone does on
    /// reload, so a reload does not empty the list until the next answer),
    /// and the shared state of peers that are still there.
    pub fn inherit(&self, old: &Zone) {
        let old_servers = lock(&old.servers);
        let mut g = lock(&self.servers);
        let s: &mut Servers = &mut g;
        for e in s.list.iter_mut() {
            if e.spec.resolve {
                let Some(o) = old_servers
                    .list
                    .iter()
                    .find(|o| o.spec.resolve && o.spec.host == e.spec.host && o.spec.service == e.spec.service)
                else {
                    continue;
                };
                let found: Vec<Found> = o
                    .peers
                    .iter()
                    .map(|p| {
                        let mut addr = p.conf.addr;
                        if e.spec.service.is_none() {
                            addr.set_port(e.spec.params.addr.port());
                        }
                        Found {
                            addr,
                            target: e.spec.service.as_ref().map(|_| p.server.to_string()),
                            weight: e.spec.service.as_ref().map(|_| p.conf.weight.min(u32::from(u16::MAX)) as u16),
                            backup: p.conf.backup && !o.spec.params.backup,
                        }
                    })
                    .collect();
                merge(e, &found, &self.conf, &mut s.next_id);
            }
            // The shared counts and check verdicts of peers still here.
            for p in e.peers.iter_mut() {
                let same = old_servers
                    .list
                    .iter()
                    .flat_map(|o| o.peers.iter())
                    .find(|q| q.server == p.server && q.conf.addr == p.conf.addr && q.conf.unix == p.conf.unix);
                if let Some(q) = same {
                    *p = Arc::new(Peer {
                        id: p.id,
                        parent: p.parent,
                        conf: p.conf.clone(),
                        server: p.server.clone(),
                        shared: q.shared.clone(),
                    });
                }
            }
        }
        self.publish(&g);
    }
}

/// The peer of a static server.
fn static_peer(id: u64, spec: &ServerSpec, check: Option<&crate::upstream::check::CheckConf>) -> Option<Arc<Peer>> {
    if spec.resolve {
        return None;
    }
    Some(Arc::new(Peer {
        id,
        parent: None,
        conf: spec.params.clone(),
        server: spec.params.name.clone(),
        shared: Shared::new(&spec.params, check),
    }))
}

/// nginx's `ngx_http_upstream_zone_resolve_handler`: keeps each peer that
/// matches a found address not yet matched (same address, and for SRV the
/// same target, weight and tier), drops the rest, adds what is left.
fn merge(e: &mut Entry, found: &[Found], zc: &ZoneConf, next_id: &mut u64) -> bool {
    let spec = &e.spec;
    let srv = spec.service.is_some();
    let usable: Vec<&Found> = found.iter().filter(|f| zc.backups || !f.backup).collect();
    let weight_of = |f: &Found| -> u32 {
        match f.weight {
            // A configured weight wins over the records' (nginx).
            Some(w) if spec.params.weight == 1 => u32::from(w).max(1),
            _ => spec.params.weight,
        }
    };
    let mut taken = vec![false; usable.len()];
    let before = e.peers.len();
    e.peers.retain(|p| {
        let hit = usable.iter().enumerate().position(|(i, f)| {
            !taken[i]
                && f.addr == p.conf.addr
                && (!srv || f.target.as_deref() == Some(&*p.server))
                && (!srv || weight_of(f) == p.conf.weight)
                && (spec.params.backup || f.backup) == p.conf.backup
        });
        if let Some(i) = hit {
            taken[i] = true;
        }
        hit.is_some()
    });
    let mut changed = e.peers.len() != before;
    for (i, f) in usable.iter().enumerate() {
        if taken[i] {
            continue;
        }
        let mut conf = spec.params.clone();
        conf.addr = f.addr;
        conf.unix = None;
        conf.name = addr_text(&f.addr).into();
        conf.weight = weight_of(f);
        conf.backup = spec.params.backup || f.backup;
        let server: Arc<str> = match &f.target {
            Some(t) => Arc::from(t.as_str()),
            None => Arc::from(spec.server.as_str()),
        };
        let shared = Shared::new(&conf, zc.check.as_ref());
        e.peers.push(Arc::new(Peer { id: *next_id, parent: Some(e.id), conf, server, shared }));
        *next_id += 1;
        changed = true;
    }
    changed
}

/// Every zone of a configuration (http's upstreams, then the other
/// families').
pub fn zones(cfg: &crate::config::Config) -> Vec<Arc<Zone>> {
    let families = cfg.families.iter().flat_map(|(_, f)| f.upstreams().iter());
    cfg.http.upstreams.iter().chain(families).filter_map(|u| u.zone.clone()).collect()
}

/// Carries each zone's addresses and shared state into the configuration
/// replacing it (reload), matched by family and upstream name.
pub fn inherit(old: &crate::config::Config, new: &crate::config::Config) {
    let olds = zones(old);
    for z in zones(new) {
        if let Some(o) = olds.iter().find(|o| o.upstream == z.upstream && o.conf.family == z.conf.family) {
            z.inherit(o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(server: &str, host: &str, port: u16, service: Option<&str>) -> ServerSpec {
        let addr = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), port);
        ServerSpec {
            server: server.into(),
            resolve: true,
            host: host.into(),
            service: service.map(String::from),
            params: PeerConf::new(addr, None, server.into()),
        }
    }

    fn conf(backups: bool) -> ZoneConf {
        ZoneConf {
            family: "http",
            name: "z".into(),
            resolver: None,
            resolver_timeout: Duration::from_secs(1),
            backups,
            check: None,
            state: None,
            l4: false,
        }
    }

    fn a(ip: &str) -> Found {
        Found { addr: ip.parse().unwrap(), target: None, weight: None, backup: false }
    }

    fn names(z: &Zone) -> Vec<String> {
        z.current().list.iter().map(|p| format!("{}{}", p.conf.name, if p.conf.backup { "b" } else { "" })).collect()
    }

    #[test]
    fn peers_follow_answers_and_keep_their_state() {
        let z = Zone::new("u", conf(true), vec![spec("example.net:81", "example.net", 81, None)]);
        let v0 = z.version();
        assert!(names(&z).is_empty());
        assert_eq!(z.resolved(0, &[a("10.0.0.1:81"), a("10.0.0.2:81")]), Some(true));
        assert!(z.version() > v0);
        let first = z.current();
        first.list[0].shared.picked();
        // The same answer changes nothing, publishes nothing.
        let v1 = z.version();
        assert_eq!(z.resolved(0, &[a("10.0.0.2:81"), a("10.0.0.1:81")]), Some(false));
        assert_eq!(z.version(), v1);
        // One stays (same id, same shared counts), one goes, one comes.
        assert_eq!(z.resolved(0, &[a("10.0.0.1:81"), a("10.0.0.3:81")]), Some(true));
        let now = z.current();
        assert_eq!(names(&z), ["10.0.0.1:81", "10.0.0.3:81"]);
        assert_eq!(now.list[0].id, first.list[0].id);
        assert!(Arc::ptr_eq(&now.list[0].shared, &first.list[0].shared));
        assert_eq!(now.list[0].shared.requests.load(Ordering::Relaxed), 1);
        // The name went: no peers. A server the API removed: None.
        assert_eq!(z.resolved(0, &[]), Some(true));
        assert!(names(&z).is_empty());
        assert_eq!(z.resolved(7, &[]), None);
    }

    #[test]
    fn srv_priorities_and_weights() {
        let srv = |ip: &str, t: &str, w: u16, backup| Found {
            addr: ip.parse().unwrap(),
            target: Some(t.into()),
            weight: Some(w),
            backup,
        };
        let found = [srv("10.0.0.1:8080", "a.example", 5, false), srv("10.0.0.2:8081", "b.example", 0, true)];
        let z = Zone::new("u", conf(true), vec![spec("example.net", "example.net", 0, Some("http"))]);
        z.resolved(0, &found);
        assert_eq!(names(&z), ["10.0.0.1:8080", "10.0.0.2:8081b"]);
        let cur = z.current();
        assert_eq!((cur.list[0].conf.weight, cur.list[1].conf.weight), (5, 1));
        assert_eq!(&*cur.list[1].server, "b.example");
        // A balancer without backups (hash, ip_hash, random) leaves them out.
        let z = Zone::new("u", conf(false), vec![spec("example.net", "example.net", 0, Some("http"))]);
        z.resolved(0, &found);
        assert_eq!(names(&z), ["10.0.0.1:8080"]);
        // A changed weight is a new peer.
        z.resolved(0, &[srv("10.0.0.1:8080", "a.example", 6, false)]);
        assert_eq!(z.current().list[0].conf.weight, 6);
        assert_ne!(z.current().list[0].id, cur.list[0].id);
        assert_eq!(spec("x", "example.net", 0, Some("http")).srv_name().unwrap(), "_http._tcp.example.net");
        assert_eq!(spec("x", "example.net", 0, Some("_ldap._udp")).srv_name().unwrap(), "_ldap._udp.example.net");
    }

    #[test]
    fn reload_keeps_addresses_with_the_new_port() {
        let old = Zone::new("u", conf(true), vec![spec("example.net:81", "example.net", 81, None)]);
        old.resolved(0, &[a("10.0.0.1:81")]);
        let shared = old.current().list[0].shared.clone();
        let new = Zone::new("u", conf(true), vec![spec("example.net:82", "example.net", 82, None)]);
        assert!(names(&new).is_empty());
        new.inherit(&old);
        assert_eq!(names(&new), ["10.0.0.1:82"]);
        let kept = Zone::new("u", conf(true), vec![spec("example.net:81", "example.net", 81, None)]);
        kept.inherit(&old);
        assert!(Arc::ptr_eq(&kept.current().list[0].shared, &shared));
    }
}
