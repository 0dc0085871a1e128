//! One worker's view of a zone's list: the balancer built over the
//! published [`Peers`], rebuilt when the zone's version moved (one relaxed
//! atomic load per use), keeping the passive-health state of the peers
//! that stayed (matched by [`Peer::id`]) and telling the caller where each
//! old position went, so it can keep the pooled connections of those peers.
//!
//! A request holds the peer it picked as a [`Picked`]: its position, and
//! its id and list, so that a list published while the request is at the
//! origin does not make it release (or pool a connection for) another peer.

use std::sync::Arc;

use super::{Peer, Peers, Zone};
use crate::config::proxy::{Balance, PeerConf, Upstream};
use crate::upstream::balance::{Balancer, PeerHealth, PeerInfo, PeerView};

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

/// A worker's balancer over a zone's current list.
pub struct View {
    pub version: u64,
    pub list: Arc<Peers>,
    pub balancer: Option<Balancer>,
    pub health: Vec<PeerHealth>,
}

impl View {
    /// The view of the zone's current list, with fresh health.
    pub fn new(zone: &Zone, balance: &Balance) -> View {
        let list = zone.current();
        let balancer = build(&list, balance);
        View { version: list.version, health: vec![PeerHealth::default(); list.list.len()], list, balancer }
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
        let mut health = vec![PeerHealth::default(); list.list.len()];
        for (old, new) in remap.iter().enumerate() {
            if let (Some(n), Some(h)) = (new, self.health.get(old)) {
                health[*n] = *h;
            }
        }
        self.balancer = build(&list, balance);
        self.health = health;
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

    /// Marks the peers the active check holds down, or that another
    /// worker's failures took out (`max_fails`, shared through the zone
    /// as nginx's zone shares it).
    pub fn mark_shared(&self, views: &mut [PeerView], now: u64) {
        for (v, p) in views.iter_mut().zip(self.list.list.iter()) {
            if p.shared.checked_down() {
                v.usable = false;
            }
            if p.shared.unavailable_until.load(std::sync::atomic::Ordering::Relaxed) > now {
                v.usable = false;
            }
        }
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
