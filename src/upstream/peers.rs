//! An upstream block's peers as one worker sees them, for any protocol:
//! the balancer built from the block (nginx's methods, `balance`), each
//! peer's failure accounting and connection count (`max_fails`,
//! `fail_timeout`, `max_conns`: per worker as nginx keeps them without a
//! `zone`, in the zone for all workers with one) and the `check` module's verdicts. HTTP's proxy keeps its own
//! state around the same balancer (with its keep-alive pool and `queue`);
//! the stream proxy uses [`PeerState`] as it is.

use std::net::IpAddr;
use std::sync::Arc;

use crate::config::proxy::{Balance, Upstream};
use crate::upstream::balance::{Balancer, Method, PeerHealth, PeerInfo, PeerView, PickCtx, Selection};
pub use crate::upstream::zone::view::Picked;
use crate::upstream::zone::{Zone, view::View};

pub fn method(b: &Balance) -> Method {
    match b {
        Balance::RoundRobin => Method::RoundRobin,
        Balance::LeastConn => Method::LeastConn,
        Balance::IpHash => Method::IpHash,
        Balance::Hash { consistent, .. } => Method::Hash { consistent: *consistent },
        Balance::Random { two, .. } => Method::Random { two: *two },
    }
}

/// The balancer's view of an upstream's peers (checked at load time, so
/// building it again per worker cannot fail).
pub fn build_balancer(u: &Upstream) -> Result<Balancer, String> {
    let peers = u
        .peers
        .iter()
        .map(|p| PeerInfo {
            server: p.name.to_string(),
            weight: p.weight,
            max_fails: p.max_fails,
            fail_timeout: p.fail_timeout.as_secs(),
            max_conns: p.max_conns,
            down: p.down,
            backup: p.backup,
        })
        .collect();
    Balancer::new(method(&u.balance), peers).map_err(|e| e.to_string())
}

/// One upstream's per-worker state.
pub struct PeerState {
    balancer: Option<Balancer>,
    health: Vec<PeerHealth>,
    check: Option<Arc<crate::upstream::check::Check>>,
    /// The views of the peers, rebuilt per pick in this reused buffer.
    views: Vec<PeerView>,
    /// An upstream with a `zone`: the balancer over its current list
    /// (then `balancer` and `health` are unused).
    zone: Option<(Arc<Zone>, View)>,
    /// The peers' `drain` flags (without a zone).
    drain: Vec<bool>,
}

impl PeerState {
    pub fn new(u: &Upstream) -> PeerState {
        if let Some(z) = &u.zone {
            return PeerState {
                balancer: None,
                health: Vec::new(),
                check: None,
                views: Vec::new(),
                zone: Some((z.clone(), View::new(z, &u.balance))),
                drain: Vec::new(),
            };
        }
        PeerState {
            balancer: build_balancer(u).ok(),
            health: vec![PeerHealth::default(); u.peers.len()],
            check: u.check.clone(),
            views: Vec::new(),
            zone: None,
            drain: u.peers.iter().map(|p| p.drain).collect(),
        }
    }

    /// Catches up with the zone's list (one atomic load when unchanged).
    pub fn sync(&mut self, u: &Upstream) {
        if let Some((z, v)) = &mut self.zone {
            v.sync(z, &u.balance);
        }
    }

    /// The next peer (None: nginx's "no live upstreams").
    pub fn pick(&mut self, sel: &mut Selection, client: Option<IpAddr>, key: &[u8]) -> Option<Picked> {
        let now = crate::clock::now_secs();
        self.views.clear();
        if let Some((_, v)) = &mut self.zone {
            return v.pick(&mut self.views, sel, client, key, b"");
        }
        let b = self.balancer.as_mut()?;
        self.views.extend(b.peers().iter().zip(&self.health).map(|(p, h)| h.view(p, now)));
        if let Some(c) = &self.check {
            c.mark_down(&mut self.views);
        }
        // `drain`: no new sessions (the stream proxy has no `sticky`).
        for (v, d) in self.views.iter_mut().zip(&self.drain) {
            if *d {
                v.usable = false;
            }
        }
        let i = b.pick(sel, &PickCtx { peers: &self.views, client, key })?;
        self.health[i].picked(&b.peers()[i], now);
        Some(Picked { i, peer: None })
    }

    /// A connection to the picked peer was made.
    pub fn connected(&mut self, picked: &Picked) {
        if let Some((_, v)) = &self.zone {
            v.connected(picked);
            return;
        }
        if let Some(h) = self.health.get_mut(picked.i) {
            h.connected();
        }
    }

    /// How many peers one session may try.
    pub fn tries(&self) -> usize {
        match &self.zone {
            Some((_, v)) => v.tries(),
            None => self.balancer.as_ref().map_or(0, |b| b.tries()),
        }
    }

    /// Done with the picked peer. True when a failure leaves the peer at
    /// its `max_fails` (nginx then warns "upstream server temporarily
    /// disabled").
    pub fn done(&mut self, picked: &Picked, failed: bool) -> bool {
        if let Some((_, v)) = &mut self.zone {
            return v.done(picked, failed);
        }
        let i = picked.i;
        let Some(b) = self.balancer.as_mut() else { return false };
        let health = &mut self.health;
        let single = b.is_single();
        let mut disabled = false;
        if let Some(h) = health.get_mut(i) {
            h.released(failed, crate::clock::now_secs(), single);
            let max_fails = b.peers().get(i).map_or(0, |p| p.max_fails);
            disabled = failed && !single && max_fails != 0 && h.fails() >= max_fails;
        }
        if failed {
            b.failed(i);
        }
        disabled
    }
}
