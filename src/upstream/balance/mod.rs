//! Load balancing for `upstream` blocks: nginx's methods ported decision for decision, so a request
//! lands on the same peer (and retries walk the same way) as under nginx with the same configuration.
//!
//! | method | nginx module | file |
//! |---|---|---|
//! | (default) smooth weighted round robin, backups | `ngx_http_upstream_round_robin.c` | `round_robin` |
//! | `least_conn` | `ngx_http_upstream_least_conn_module.c` | `least_conn` |
//! | `ip_hash` | `ngx_http_upstream_ip_hash_module.c` | `ip_hash` |
//! | `hash KEY [consistent]` | `ngx_http_upstream_hash_module.c` | `hash` |
//! | `random [two [least_conn]]` | `ngx_http_upstream_random_module.c` | `random` |
//!
//! The module is pure: no clock, no sockets. Per request the caller keeps a [`Selection`] (nginx's
//! per-request peer data: the tried set, the backup switch, the hash methods' progress) and before
//! each pick hands in a [`PickCtx`] with every peer's [`PeerView`] (usable now? active connections).
//! [`PeerHealth`] is nginx's own `max_fails`/`fail_timeout`/`max_conns` bookkeeping that produces
//! those views. One [`Balancer`] per upstream per worker holds what nginx keeps per peer in each
//! worker without a `zone`: the smooth round robin's `current_weight`/`effective_weight`.
//!
//! The protocol, as `ngx_http_upstream` drives `peer.get`/`peer.free`:
//!
//! 1. `let mut sel = Selection::new()` when the request starts; at most [`Balancer::tries`] picks
//!    (and `proxy_next_upstream_tries`).
//! 2. Views from `health[i].view(&peers[i], now)`; `i = balancer.pick(&mut sel, &ctx)?` (None is
//!    nginx's `NGX_BUSY`: 502 "no live upstreams"); then `health[i].picked(&peers[i], now)`.
//! 3. When done with `i`: `health[i].released(failed, now, balancer.is_single())`, and on
//!    failure `balancer.failed(i)`. Success needs no call: a peer's weight recovers as it is picked.
//! 4. To retry (`proxy_next_upstream`), go to 2 with the same `sel`.
//!
//! Differences from nginx (behaviour is otherwise the same, including the fallbacks to round robin):
//!
//! * Peers are addressed by their position in the list given to [`Balancer::new`] (config order,
//!   backups included), not per tier; nginx's resetting of the tried bitmap on switching to the
//!   backups falls out of that, since backup positions were never tried.
//! * `random` draws from a SplitMix64 generator, not glibc's `random()`: the same distribution, not
//!   the same sequence (nginx seeds per worker from pid and time, so no sequence is reproducible).
//! * Consistent hashing keeps, of two points with the same 32-bit hash, the one whose peer comes
//!   first in the configuration. nginx keeps the first after `qsort`: the same where libc's `qsort`
//!   is a stable merge sort (glibc's usually is), unspecified elsewhere. Only a CRC collision
//!   between two different `server` texts can tell.
//! * State is per worker, as nginx without a `zone` directive: no shared zone, no `resolve`
//!   re-resolution; a new peer list means a new `Balancer` (as nginx after a reload).
//! * A lone server (no backups) ignores `max_fails` in nginx: [`PeerHealth::released`] records no
//!   failure for it, so its view stays usable; a caller supplying its own views must do the same.
//! * `weight=0`, no primary server, and `backup` with `hash`/`ip_hash`/`random` are refused by
//!   [`Balancer::new`]; nginx refuses them while parsing.

pub(crate) mod hash;
mod health;
mod ip_hash;
mod least_conn;
mod random;
mod round_robin;

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

pub use health::PeerHealth;
pub use random::Rng;

/// A balancing method, as selected by the `upstream` block's directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// No method directive: smooth weighted round robin.
    RoundRobin,
    LeastConn,
    IpHash,
    /// `hash KEY` (Cache::Memcached compatible) or `hash KEY consistent` (ketama).
    Hash {
        consistent: bool,
    },
    /// `random`, or `random two` (of two random peers the one with fewer connections per weight;
    /// `random two least_conn` is the same thing, `least_conn` being the only and default method).
    Random {
        two: bool,
    },
}

impl Method {
    /// Whether `server ... backup` is allowed (nginx's `NGX_HTTP_UPSTREAM_BACKUP` flag).
    pub fn allows_backup(self) -> bool {
        matches!(self, Method::RoundRobin | Method::LeastConn)
    }
}

/// One peer (one address of a `server` directive; a name resolving to several addresses gives
/// several peers with the same `server`), as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerInfo {
    /// The `server` directive's address as written ("10.0.0.1:8080", "backend.local",
    /// "unix:/run/app.sock"): consistent hashing places its points by this text.
    pub server: String,
    pub weight: u32,
    /// 0 disables failure accounting for this peer.
    pub max_fails: u32,
    /// Seconds.
    pub fail_timeout: u64,
    /// 0 means unlimited.
    pub max_conns: u32,
    pub down: bool,
    pub backup: bool,
}

impl PeerInfo {
    /// A peer with nginx's defaults: `weight=1 max_fails=1 fail_timeout=10s`. (nginx gives
    /// addresses resolved per request, `proxy_pass` with variables, `max_fails=0` instead.)
    pub fn new(server: impl Into<String>) -> PeerInfo {
        PeerInfo {
            server: server.into(),
            weight: 1,
            max_fails: 1,
            fail_timeout: 10,
            max_conns: 0,
            down: false,
            backup: false,
        }
    }
}

/// A peer's dynamic state at the moment of a pick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerView {
    /// Not failed out (`max_fails` within `fail_timeout`) and below `max_conns`. `down` is static,
    /// in [`PeerInfo`].
    pub usable: bool,
    /// Active connections from this worker (least_conn and `random two` compare them).
    pub conns: u32,
}

/// What one pick looks at besides the balancer's own state.
#[derive(Clone, Copy, Debug)]
pub struct PickCtx<'a> {
    /// Indexed like the peers given to [`Balancer::new`]; a missing entry counts as unusable.
    pub peers: &'a [PeerView],
    /// For `ip_hash`: the client address as nginx's `r->connection->sockaddr` has it (after
    /// `real_ip`, an IPv4-mapped IPv6 address left as IPv6); None for a unix-socket client.
    pub client: Option<IpAddr>,
    /// For `hash`: the evaluated key. Empty means round robin, as in nginx.
    pub key: &'a [u8],
}

impl PickCtx<'_> {
    fn usable(&self, i: usize) -> bool {
        self.peers.get(i).is_some_and(|v| v.usable)
    }

    fn conns(&self, i: usize) -> u64 {
        self.peers.get(i).map_or(0, |v| u64::from(v.conns))
    }
}

/// Peers already tried by one request: nginx's `tried` bitmap, inline up to 64 peers.
#[derive(Clone, Debug, Default)]
struct Tried {
    low: u64,
    high: Vec<u64>,
}

impl Tried {
    fn contains(&self, i: usize) -> bool {
        if i < 64 {
            return self.low >> i & 1 == 1;
        }
        self.high.get(i / 64 - 1).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    fn insert(&mut self, i: usize) {
        if i < 64 {
            self.low |= 1 << i;
            return;
        }
        let w = i / 64 - 1;
        if self.high.len() <= w {
            self.high.resize(w + 1, 0);
        }
        self.high[w] |= 1 << (i % 64);
    }
}

/// One request's walk over the peers, kept across its retries: which peers were tried, whether it
/// has moved on to the backups, and where the hash methods are in their sequences (a retry
/// continues a hash sequence rather than restarting it, as in nginx).
#[derive(Clone, Debug)]
pub struct Selection {
    tried: Tried,
    on_backup: bool,
    /// Failed probes of the hash and random methods; past 20 they fall back to round robin.
    tries: u32,
    /// `hash`: iterations so far and the running sum of their hashes.
    rehash: u32,
    hash: u32,
    /// `ip_hash`: the running hash, seeded with 89.
    ip_hash: u32,
    /// `hash consistent`: the ring position, found on the first pick.
    point: Option<usize>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection::new()
    }
}

impl Selection {
    pub fn new() -> Selection {
        Selection { tried: Tried::default(), on_backup: false, tries: 0, rehash: 0, hash: 0, ip_hash: 89, point: None }
    }

    pub fn is_tried(&self, i: usize) -> bool {
        self.tried.contains(i)
    }

    pub fn on_backup(&self) -> bool {
        self.on_backup
    }

    /// Peer `i` was picked for this request outside the balancer (by
    /// `sticky`): a retry does not pick it again.
    pub fn mark_tried(&mut self, i: usize) {
        self.tried.insert(i);
    }
}

/// Why a peer list cannot be balanced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// No non-backup peer.
    NoServers,
    /// `weight=0` on the peer at this index.
    ZeroWeight(usize),
    /// A backup peer with a method that does not support them.
    BackupNotSupported,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoServers => f.write_str("no servers in upstream"),
            BuildError::ZeroWeight(i) => write!(f, "invalid weight 0 for server #{}", i + 1),
            BuildError::BackupNotSupported => f.write_str("balancing method does not support parameter \"backup\""),
        }
    }
}

impl std::error::Error for BuildError {}

/// Not tried by this request, not `down`, and usable now: the checks every nginx method makes. A
/// free function so callers can hold `&mut Balancer::wrr` alongside.
fn available(peers: &[PeerInfo], sel: &Selection, ctx: &PickCtx, i: usize) -> bool {
    !sel.tried.contains(i) && peers.get(i).is_some_and(|p| !p.down) && ctx.usable(i)
}

/// nginx's per-peer smooth round robin state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wrr {
    current: i64,
    /// Starts at `weight`; cut on failure, regrows by one per round the peer takes part in.
    effective: i64,
}

/// The primary or the backup peers: positions in `Balancer::peers`, in config order.
#[derive(Debug)]
struct Tier {
    members: Vec<usize>,
    total_weight: u64,
}

/// One upstream's balancer, owned by one worker.
#[derive(Debug)]
pub struct Balancer {
    method: Method,
    peers: Vec<PeerInfo>,
    wrr: Vec<Wrr>,
    primary: Tier,
    backup: Option<Tier>,
    /// `hash consistent`: the sorted ring of the primary peers.
    ring: Vec<hash::Point>,
    /// `hash consistent`: per peer, the first peer with the same `server` text (its point owner).
    group: Vec<usize>,
    /// `random`: per primary member, the sum of the weights before it.
    ranges: Vec<u64>,
    rng: random::Rng,
}

impl Balancer {
    pub fn new(method: Method, peers: Vec<PeerInfo>) -> Result<Balancer, BuildError> {
        if let Some(i) = peers.iter().position(|p| p.weight == 0) {
            return Err(BuildError::ZeroWeight(i));
        }
        let tier = |backup: bool| {
            let members: Vec<usize> = (0..peers.len()).filter(|&i| peers[i].backup == backup).collect();
            let total_weight = members.iter().map(|&i| u64::from(peers[i].weight)).sum();
            Tier { members, total_weight }
        };
        let primary = tier(false);
        if primary.members.is_empty() {
            return Err(BuildError::NoServers);
        }
        let backup = Some(tier(true)).filter(|t| !t.members.is_empty());
        if backup.is_some() && !method.allows_backup() {
            return Err(BuildError::BackupNotSupported);
        }
        let wrr = peers.iter().map(|p| Wrr { current: 0, effective: i64::from(p.weight) }).collect();
        let mut first: HashMap<&str, usize> = HashMap::new();
        let group = peers.iter().enumerate().map(|(i, p)| *first.entry(p.server.as_str()).or_insert(i)).collect();
        let mut b = Balancer {
            method,
            peers,
            wrr,
            primary,
            backup,
            ring: Vec::new(),
            group,
            ranges: Vec::new(),
            rng: random::Rng::from_entropy(),
        };
        match method {
            Method::Hash { consistent: true } => b.ring = hash::build_ring(&b.peers, &b.primary.members, &b.group),
            Method::Random { .. } => b.ranges = random::ranges(&b.peers, &b.primary.members),
            _ => {}
        }
        Ok(b)
    }

    pub fn method(&self) -> Method {
        self.method
    }

    pub fn peers(&self) -> &[PeerInfo] {
        &self.peers
    }

    /// nginx's `peers->single`: one primary peer and no backups. Such a peer is used whatever its
    /// failures (only `down` and `max_conns` stop it) and its failures are not accounted.
    pub fn is_single(&self) -> bool {
        self.backup.is_none() && self.primary.members.len() == 1
    }

    /// How many peers one request may try (nginx's initial `pc->tries`): the peers not marked
    /// `down`, backups included.
    pub fn tries(&self) -> usize {
        self.peers.iter().filter(|p| !p.down).count()
    }

    /// Make `random` reproducible (tests, benchmarks).
    pub fn seed_random(&mut self, seed: u64) {
        self.rng = random::Rng::new(seed);
    }

    /// The next peer for this request, or None when every candidate is tried, down or unusable
    /// (nginx's `NGX_BUSY`). The peer is marked tried in `sel`.
    pub fn pick(&mut self, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
        match self.method {
            Method::RoundRobin => round_robin::pick(self, sel, ctx),
            Method::LeastConn => least_conn::pick(self, sel, ctx),
            Method::IpHash => ip_hash::pick(self, sel, ctx),
            Method::Hash { consistent: false } => hash::pick(self, sel, ctx),
            Method::Hash { consistent: true } => hash::pick_consistent(self, sel, ctx),
            Method::Random { two } => random::pick(self, sel, ctx, two),
        }
    }

    /// A request to peer `i` failed (nginx's `NGX_PEER_FAILED` in `free_round_robin_peer`): its
    /// effective weight drops by `weight / max_fails`, so the smooth round robin (and the
    /// tie-breaks of least_conn and consistent hash) send it less until it regrows.
    pub fn failed(&mut self, i: usize) {
        if self.is_single() {
            return;
        }
        let (Some(p), Some(w)) = (self.peers.get(i), self.wrr.get_mut(i)) else { return };
        // max_fails=0 turns failure accounting off.
        if let Some(cut) = p.weight.checked_div(p.max_fails) {
            w.effective = (w.effective - i64::from(cut)).max(0);
        }
    }

    fn weight(&self, i: usize) -> u64 {
        self.peers.get(i).map_or(1, |p| u64::from(p.weight))
    }

    /// The primary member that `w` (below the total weight) falls on when each member covers
    /// `weight` consecutive values: how `hash` and `ip_hash` map a hash onto peers.
    fn by_weight(&self, mut w: u64) -> usize {
        let members = &self.primary.members;
        for &i in members {
            let weight = self.weight(i);
            if w < weight {
                return i;
            }
            w -= weight;
        }
        members.last().copied().unwrap_or(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn weighted(weights: &[u32]) -> Vec<PeerInfo> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| PeerInfo { weight: w, ..PeerInfo::new(format!("10.0.0.{}:80", i + 1)) })
            .collect()
    }

    pub(crate) fn usable(n: usize) -> Vec<PeerView> {
        vec![PeerView { usable: true, conns: 0 }; n]
    }

    pub(crate) fn ctx(views: &[PeerView]) -> PickCtx<'_> {
        PickCtx { peers: views, client: None, key: b"" }
    }

    /// `n` picks, each by a fresh request.
    pub(crate) fn picks(b: &mut Balancer, views: &[PeerView], n: usize) -> Vec<usize> {
        (0..n).filter_map(|_| b.pick(&mut Selection::new(), &ctx(views))).collect()
    }

    #[test]
    fn build_errors() {
        assert_eq!(Balancer::new(Method::RoundRobin, vec![]).err(), Some(BuildError::NoServers));
        let mut only_backup = weighted(&[1]);
        only_backup[0].backup = true;
        assert_eq!(Balancer::new(Method::RoundRobin, only_backup).err(), Some(BuildError::NoServers));
        assert_eq!(Balancer::new(Method::LeastConn, weighted(&[1, 0])).err(), Some(BuildError::ZeroWeight(1)));
        let mut with_backup = weighted(&[1, 1]);
        with_backup[1].backup = true;
        for m in [Method::IpHash, Method::Hash { consistent: false }, Method::Hash { consistent: true }] {
            assert_eq!(Balancer::new(m, with_backup.clone()).err(), Some(BuildError::BackupNotSupported));
        }
        assert_eq!(
            Balancer::new(Method::Random { two: true }, with_backup.clone()).err(),
            Some(BuildError::BackupNotSupported)
        );
        assert!(Balancer::new(Method::LeastConn, with_backup).is_ok());
    }

    #[test]
    fn tries_counts_peers_not_down_backups_included() {
        let mut peers = weighted(&[1, 1, 1, 1]);
        peers[1].down = true;
        peers[3].backup = true;
        let b = Balancer::new(Method::RoundRobin, peers).unwrap();
        assert_eq!(b.tries(), 3);
        assert!(!b.is_single());
    }

    #[test]
    fn single_means_one_primary_and_no_backup() {
        assert!(Balancer::new(Method::RoundRobin, weighted(&[3])).unwrap().is_single());
        let mut peers = weighted(&[1, 1]);
        peers[1].backup = true;
        assert!(!Balancer::new(Method::RoundRobin, peers).unwrap().is_single());
    }

    #[test]
    fn tried_set_beyond_64_peers() {
        let mut t = Tried::default();
        for i in [0, 63, 64, 127, 128, 300] {
            assert!(!t.contains(i));
            t.insert(i);
            assert!(t.contains(i));
        }
        assert!(!t.contains(1) && !t.contains(65) && !t.contains(299) && !t.contains(10_000));
    }

    #[test]
    fn one_request_tries_each_of_100_peers_once() {
        let mut b = Balancer::new(Method::RoundRobin, weighted(&[1; 100])).unwrap();
        let views = usable(100);
        let mut sel = Selection::new();
        let mut seen: Vec<usize> = std::iter::from_fn(|| b.pick(&mut sel, &ctx(&views))).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn missing_views_count_as_unusable() {
        let mut b = Balancer::new(Method::RoundRobin, weighted(&[1, 1, 1])).unwrap();
        let views = usable(2);
        assert_eq!(picks(&mut b, &views, 4), [0, 1, 0, 1]);
        assert_eq!(b.pick(&mut Selection::new(), &ctx(&[])), None);
    }

    #[test]
    fn retries_after_connect_errors_match_nginx() {
        // nginx 1.22.1: `server :19001; server :19002; server :19009 max_fails=0; server :19003
        // weight=2;` with nothing listening on :19009, so a request landing there is retried
        // (proxy_next_upstream error) until it reaches a live peer, which answers its port digit.
        let mut peers: Vec<PeerInfo> =
            [19001, 19002, 19009, 19003].iter().map(|p| PeerInfo::new(format!("127.0.0.1:{p}"))).collect();
        peers[2].max_fails = 0;
        peers[3].weight = 2;
        let views = usable(4);
        let digit = |i: usize| ['1', '2', '9', '3'][i];
        let run = |method: Method, inputs: &mut dyn Iterator<Item = (Option<IpAddr>, String)>| -> String {
            let mut b = Balancer::new(method, peers.clone()).unwrap();
            inputs
                .map(|(client, key)| {
                    let ctx = PickCtx { peers: &views, client, key: key.as_bytes() };
                    let mut sel = Selection::new();
                    let mut i = b.pick(&mut sel, &ctx).unwrap();
                    while i == 2 {
                        i = b.pick(&mut sel, &ctx).unwrap();
                    }
                    digit(i)
                })
                .collect()
        };
        let keys = || (0..64).map(|k| (None, k.to_string()));
        assert_eq!(
            run(Method::Hash { consistent: false }, &mut keys()),
            "1333323131223122312133213331132323211313332333233333233322323231"
        );
        assert_eq!(
            run(Method::Hash { consistent: true }, &mut keys()),
            "3133323311213331333213211133231331333333131333231131232122312333"
        );
        let mut clients = (0..64).map(|n| (Some(IpAddr::from([10, n, 7, 1])), String::new()));
        assert_eq!(
            run(Method::IpHash, &mut clients),
            "3132321323213231132331323313233131323313232132321323313233132311"
        );
    }

    #[test]
    fn failed_cuts_effective_weight_by_weight_over_max_fails() {
        let mut peers = weighted(&[10, 10, 1, 7]);
        peers[0].max_fails = 2;
        peers[2].max_fails = 1;
        peers[3].max_fails = 0;
        let mut b = Balancer::new(Method::RoundRobin, peers).unwrap();
        b.failed(0);
        assert_eq!(b.wrr[0].effective, 5);
        b.failed(0);
        b.failed(0);
        assert_eq!(b.wrr[0].effective, 0, "never below zero");
        b.failed(2);
        assert_eq!(b.wrr[2].effective, 0);
        b.failed(3);
        assert_eq!(b.wrr[3].effective, 7, "max_fails=0: no accounting");
        b.failed(99);

        let mut single = Balancer::new(Method::RoundRobin, weighted(&[4])).unwrap();
        single.failed(0);
        assert_eq!(single.wrr[0].effective, 4, "a lone server is never penalised");
    }
}
