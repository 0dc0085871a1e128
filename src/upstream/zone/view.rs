//! One worker's view of a zone's list: the balancer built over the
//! published [`Peers`], rebuilt when the zone's version moved (one relaxed
//! atomic load per use), telling the caller where each old position went
//! (matched by [`Peer::id`]), so it can keep the pooled connections of the
//! peers that stayed. Their health is in the zone, for every worker.
//!
//! A request holds the peer it picked as a [`Picked`]: its position, and
//! its id and list, so that a list published while the request is at the
//! origin does not make it release (or pool a connection for) another peer.

use std::net::IpAddr;
use std::sync::Arc;

use super::{Peer, Peers, Zone};
use crate::config::proxy::{Balance, PeerConf, Upstream};
use crate::upstream::balance::{Balancer, PeerInfo, PeerView, PickCtx, Rng, Selection};

/// A peer picked for one request or session.
#[derive(Clone, Debug)]
pub struct Picked {
    /// Position in the worker's list when picked.
    pub i: usize,
    /// The zone peer (None for an upstream without a zone: `i` indexes
    /// `Upstream::peers`, which never changes).
    pub peer: Option<Arc<Peer>>,
}

impl Picked {
    /// The peer's address and parameters.
    pub fn conf<'a>(&'a self, u: &'a Upstream) -> &'a PeerConf {
        match &self.peer {
            Some(p) => &p.conf,
            // Picked from `u.peers`, which the balancer was built from.
            None => &u.peers[self.i],
        }
    }
}

/// A worker's balancer over a zone's current list. The peers' health
/// (connections, failures) is in their [`super::Shared`], for all workers;
/// what stays per worker is the balancer's own position (round robin's
/// current weights, `random`'s generator).
pub struct View {
    pub version: u64,
    pub list: Arc<Peers>,
    pub balancer: Option<Balancer>,
    /// For `slow_start`'s skips.
    rng: Rng,
    /// The peers' sticky ids, made on the first sticky pick of a list.
    ids: Option<Vec<Arc<str>>>,
}

impl View {
    /// The view of the zone's current list.
    pub fn new(zone: &Zone, balance: &Balance) -> View {
        let list = zone.current();
        let balancer = build(&list, balance);
        View { version: list.version, list, balancer, rng: Rng::from_entropy(), ids: None }
    }

    /// Catches up with the zone: None when nothing changed, else for each
    /// old position its new one (None: the peer left).
    pub fn sync(&mut self, zone: &Zone, balance: &Balance) -> Option<Vec<Option<usize>>> {
        if zone.version() == self.version {
            return None;
        }
        let list = zone.current();
        let remap: Vec<Option<usize>> =
            self.list.list.iter().map(|old| list.list.iter().position(|p| p.id == old.id)).collect();
        self.balancer = build(&list, balance);
        self.ids = None;
        self.version = list.version;
        self.list = list;
        Some(remap)
    }

    /// Where the peer a request picked is now (None: it left).
    pub fn position(&self, picked: &Picked) -> Option<usize> {
        let p = picked.peer.as_ref()?;
        match self.list.list.get(picked.i) {
            Some(q) if q.id == p.id => Some(picked.i),
            _ => self.list.list.iter().position(|q| q.id == p.id),
        }
    }

    /// The peer at position `i`, for a request that picked it.
    pub fn picked(&self, i: usize) -> Picked {
        Picked { i, peer: self.list.list.get(i).cloned() }
    }

    /// The next peer, by every worker's counts (None: "no live
    /// upstreams"). `views` is the caller's reused buffer. `want`: the
    /// request's sticky id (empty: none), tried before the balancer.
    pub fn pick(
        &mut self,
        views: &mut Vec<PeerView>,
        sel: &mut Selection,
        client: Option<IpAddr>,
        key: &[u8],
        want: &[u8],
    ) -> Option<Picked> {
        let now = crate::clock::now_secs();
        let now_ms = crate::clock::unix_ms();
        views.clear();
        let b = self.balancer.as_ref()?;
        for (info, p) in b.peers().iter().zip(self.list.list.iter()) {
            let mut v = p.shared.health().view(info, now);
            // The active check's verdict.
            if p.shared.checked_down() {
                v.usable = false;
            }
            views.push(v);
        }
        if !want.is_empty()
            && let Some(i) = self.sticky(views, sel, want, now)
        {
            return Some(self.picked(i));
        }
        // A peer being drained (`drain`) takes only its sticky sessions.
        for (v, p) in views.iter_mut().zip(self.list.list.iter()) {
            if p.conf.drain {
                v.usable = false;
            }
        }
        self.slow_start(views, now_ms);
        let b = self.balancer.as_mut()?;
        loop {
            let i = b.pick(sel, &PickCtx { peers: views, client, key })?;
            let p = self.list.list.get(i)?;
            if p.shared.claim(&b.peers()[i], now) {
                return Some(self.picked(i));
            }
            // Another worker took its last slot or failed it out since.
            if let Some(v) = views.get_mut(i) {
                v.usable = false;
            }
        }
    }

    /// The peer with sticky id `want`, its connection slot claimed and
    /// marked tried (None: the balancer picks).
    fn sticky(&mut self, views: &mut [PeerView], sel: &mut Selection, want: &[u8], now: u64) -> Option<usize> {
        let list = &self.list.list;
        let ids =
            self.ids.get_or_insert_with(|| list.iter().map(|p| crate::upstream::sticky::peer_id(&p.conf)).collect());
        let b = self.balancer.as_ref()?;
        let i = crate::upstream::sticky::choose(b.peers(), views, ids, sel, want)?;
        sel.mark_tried(i);
        if list.get(i)?.shared.claim(&b.peers()[i], now) {
            return Some(i);
        }
        // Another worker took its last slot or failed it out since.
        if let Some(v) = views.get_mut(i) {
            v.usable = false;
        }
        None
    }

    /// `slow_start`: a peer ramping up is left out of this pick with the
    /// probability of the part of its weight it has not regained, unless
    /// that would leave no peer to pick.
    fn slow_start(&mut self, views: &mut [PeerView], now_ms: u64) {
        let mut skipped = false;
        for (v, p) in views.iter_mut().zip(self.list.list.iter()) {
            if !v.usable {
                continue;
            }
            if let Some(pm) = p.shared.slow_start_permille(&p.conf, now_ms)
                && self.rng.below(1000) >= pm
            {
                v.usable = false;
                skipped = true;
            }
        }
        if skipped && !views.iter().any(|v| v.usable) {
            for (v, p) in views.iter_mut().zip(self.list.list.iter()) {
                if p.shared.slow_start_permille(&p.conf, now_ms).is_some() && !p.shared.checked_down() && !p.conf.drain
                {
                    let h = p.shared.health();
                    v.usable = h.view(&info(&p.conf, &p.server), now_ms / 1000).usable;
                }
            }
        }
    }

    /// A connection to the picked peer was made.
    pub fn connected(&self, picked: &Picked) {
        if let Some(p) = &picked.peer {
            p.shared.connected();
        }
    }

    /// Done with the picked peer; true when a failure leaves it at its
    /// `max_fails`.
    pub fn done(&mut self, picked: &Picked, failed: bool) -> bool {
        let Some(p) = &picked.peer else { return false };
        let i = self.position(picked);
        let single = self.balancer.as_ref().is_some_and(|b| b.is_single()) && i.is_some();
        let disabled = p.shared.release(&p.conf, failed, single);
        if let (true, Some(i), Some(b)) = (failed, i, self.balancer.as_mut()) {
            b.failed(i);
        }
        disabled
    }

    /// How many peers one request may try.
    pub fn tries(&self) -> usize {
        self.balancer.as_ref().map_or(0, |b| b.tries())
    }
}

/// The balancer over a list (None when it is empty: "no live upstreams").
fn build(list: &Peers, balance: &Balance) -> Option<Balancer> {
    let infos = list.list.iter().map(|p| info(&p.conf, &p.server)).collect();
    Balancer::new(crate::upstream::peers::method(balance), infos).ok()
}

fn info(p: &PeerConf, server: &str) -> PeerInfo {
    PeerInfo {
        server: server.to_string(),
        weight: p.weight,
        max_fails: p.max_fails,
        fail_timeout: p.fail_timeout.as_secs(),
        max_conns: p.max_conns,
        down: p.down,
        backup: p.backup,
    }
}
