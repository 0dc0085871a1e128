//! Per-worker upstream state: the balancer (src/upstream/balance, nginx's
//! methods), each peer's failure accounting and connection count (nginx's
//! max_fails / fail_timeout / max_conns, per worker as nginx keeps them
//! without a `zone`; with one they are in the zone, `upstream::zone`), and
//! the keep-alive pool of idle origin connections.
//! Only two things come from outside the worker, both read with relaxed
//! atomics: the active checker's up/down verdicts and, with `queue`, the
//! process-wide connection counts that `max_conns` is then checked against.

use std::cell::Cell;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::upstream_tls::UpStream;

use crate::config::proxy::Upstream;
use crate::upstream::balance::{Balancer, PeerHealth, PeerView, PickCtx, Selection};
use crate::upstream::queue::Queue;

pub struct Idle {
    pub peer: usize,
    pub stream: UpStream,
    pub since: Instant,
    pub uses: Uses,
}

/// How much an origin connection has served: its request count (for
/// `keepalive_requests`) and when it was opened (for `keepalive_time`).
#[derive(Clone, Copy, Debug)]
pub struct Uses {
    pub requests: u64,
    pub opened: Instant,
}

impl Uses {
    pub fn fresh() -> Uses {
        Uses { requests: 0, opened: crate::clock::mono() }
    }

    /// One more request on the connection.
    pub fn next(self) -> Uses {
        Uses { requests: self.requests + 1, ..self }
    }
}

#[derive(Default)]
pub struct UpstreamRt {
    balancer: Option<Balancer>,
    health: Vec<PeerHealth>,
    /// Tengine's `check`: peers the checker holds down are not picked.
    check: Option<std::sync::Arc<crate::upstream::check::Check>>,
    /// Most recently released last.
    pub idle: Vec<Idle>,
    /// `queue`: connection slots counted for all workers together.
    shared: Option<Arc<Queue>>,
    /// Requests of this worker waiting in the upstream's queue.
    pub queued: Rc<Cell<usize>>,
    /// The balancer's view of the peers, rebuilt per pick in this reused
    /// buffer.
    views: Vec<PeerView>,
    /// This worker's `sluice_status` counters of the peers, queue and
    /// response times (upstream blocks only, not per-request upstreams).
    pub stats: Option<Arc<crate::metrics::PeerSet>>,
    /// An upstream with a `zone`: the balancer over its current list
    /// (then `balancer` and `health` are unused).
    zone: Option<View>,
    /// The peers' sticky ids (`upstream::sticky::peer_id`), made on the
    /// first sticky pick.
    ids: Option<Vec<Arc<str>>>,
    /// Some peer has `drain` (static upstreams).
    drain: bool,
}

#[derive(Default)]
pub struct WorkerProxy {
    pub ups: Vec<UpstreamRt>,
    /// Upstreams made per request (`proxy_pass` with variables), by name.
    dynamic: std::collections::HashMap<String, UpstreamRt>,
    pub targets: super::dynamic::Targets,
    /// Response buffers (proxy_buffer_size) of finished requests, reused.
    bufs: Vec<Vec<u8>>,
}

pub use crate::upstream::peers::{build_balancer, method};
pub use crate::upstream::zone::view::Picked;
use crate::upstream::zone::view::View;

impl WorkerProxy {
    /// An empty buffer of at least `cap` bytes.
    pub fn take_buf(&mut self, cap: usize) -> Vec<u8> {
        match self.bufs.pop() {
            Some(b) if b.capacity() >= cap => b,
            _ => Vec::with_capacity(cap),
        }
    }

    pub fn give_buf(&mut self, mut b: Vec<u8>) {
        if b.capacity() > 0 && b.capacity() <= 64 * 1024 && self.bufs.len() < 64 {
            b.clear();
            self.bufs.push(b);
        }
    }

    pub fn get(&mut self, u: &Upstream) -> &mut UpstreamRt {
        let rt = if u.index == usize::MAX {
            if self.dynamic.len() >= 256 && !self.dynamic.contains_key(&u.name) {
                self.dynamic.clear();
            }
            self.dynamic.entry(u.name.clone()).or_default()
        } else {
            if self.ups.len() <= u.index {
                self.ups.resize_with(u.index + 1, Default::default);
            }
            &mut self.ups[u.index]
        };
        if let Some(z) = &u.zone {
            match &mut rt.zone {
                None => {
                    rt.zone = Some(View::new(z, &u.balance));
                    if u.index != usize::MAX {
                        rt.stats = Some(crate::metrics::PeerSet::register(u));
                    }
                }
                Some(v) => {
                    if let Some(remap) = v.sync(z, &u.balance) {
                        // Pooled connections follow their peer, or close.
                        rt.idle.retain_mut(|c| match remap.get(c.peer).copied().flatten() {
                            Some(n) => {
                                c.peer = n;
                                true
                            }
                            None => false,
                        });
                    }
                }
            }
            return rt;
        }
        if rt.balancer.is_none() {
            rt.balancer = build_balancer(u).ok();
            rt.health = vec![PeerHealth::default(); u.peers.len()];
            rt.shared = u.queue.clone();
            rt.check = u.check.clone();
            rt.drain = u.peers.iter().any(|p| p.drain);
            if u.index != usize::MAX {
                rt.stats = Some(crate::metrics::PeerSet::register(u));
            }
        }
        rt
    }
}

impl UpstreamRt {
    /// The next peer for a request (None: nginx's "no live upstreams").
    /// `client` is None for a unix-domain client (`ip_hash` hashes nginx's
    /// pseudo address then).
    /// `want` is the request's sticky id (empty: none): the peer with that
    /// id, when usable, is taken before the balancer is asked.
    pub fn pick(
        &mut self,
        u: &Upstream,
        sel: &mut Selection,
        client: Option<IpAddr>,
        key: &[u8],
        want: &[u8],
    ) -> Option<Picked> {
        if let Some(v) = &mut self.zone {
            return v.pick(&mut self.views, sel, client, key, want);
        }
        self.pick_static(u, sel, client, key, want).map(|i| Picked { i, peer: None })
    }

    fn pick_static(
        &mut self,
        u: &Upstream,
        sel: &mut Selection,
        client: Option<IpAddr>,
        key: &[u8],
        want: &[u8],
    ) -> Option<usize> {
        let b = self.balancer.as_mut()?;
        let now = crate::clock::now_secs();
        let views = &mut self.views;
        views.clear();
        views.extend(b.peers().iter().zip(&self.health).map(|(p, h)| h.view(p, now)));
        if let Some(c) = &self.check {
            c.mark_down(views);
        }
        if let Some(q) = &self.shared {
            // With a queue, max_conns counts every worker's connections.
            for (i, v) in views.iter_mut().enumerate() {
                v.conns = q.conns(i);
                v.usable &= !q.full(i);
            }
        }
        if !want.is_empty() {
            let ids = self.ids.get_or_insert_with(|| u.peers.iter().map(crate::upstream::sticky::peer_id).collect());
            if let Some(i) = crate::upstream::sticky::choose(b.peers(), views, ids, sel, want) {
                sel.mark_tried(i);
                if self.shared.as_ref().is_none_or(|q| q.claim(i)) {
                    return Some(took(&mut self.health, &self.stats, &b.peers()[i], i, now));
                }
                if let Some(v) = views.get_mut(i) {
                    v.usable = false;
                }
            }
        }
        // A peer being drained (`drain`) takes only its sticky sessions.
        if self.drain {
            for (v, p) in views.iter_mut().zip(&u.peers) {
                if p.drain {
                    v.usable = false;
                }
            }
        }
        let Some(q) = &self.shared else {
            let i = b.pick(sel, &PickCtx { peers: views, client, key })?;
            return Some(took(&mut self.health, &self.stats, &b.peers()[i], i, now));
        };
        loop {
            let i = b.pick(sel, &PickCtx { peers: views, client, key })?;
            // Another worker may have taken the peer's last slot since the
            // counters were read: pick again without it.
            if q.claim(i) {
                return Some(took(&mut self.health, &self.stats, &b.peers()[i], i, now));
            }
            if let Some(v) = views.get_mut(i) {
                v.usable = false;
            }
        }
    }

    /// A try got its response head `took` after it started.
    pub fn responded(&self, took: std::time::Duration) {
        if let Some(s) = &self.stats {
            s.responded(took);
        }
    }

    /// How many peers one request may try.
    pub fn tries(&self) -> usize {
        if let Some(v) = &self.zone {
            return v.tries();
        }
        self.balancer.as_ref().map(|b| b.tries()).unwrap_or(0)
    }

    /// The request is done with the peer it picked. True when a failure
    /// leaves the peer at its `max_fails` (nginx then warns "upstream
    /// server temporarily disabled").
    pub fn done(&mut self, picked: &Picked, failed: bool) -> bool {
        if let Some(v) = &mut self.zone {
            return v.done(picked, failed);
        }
        let i = picked.i;
        let Some(b) = self.balancer.as_mut() else { return false };
        let single = b.is_single();
        let mut disabled = false;
        if let Some(h) = self.health.get_mut(i) {
            h.released(failed, crate::clock::now_secs(), single);
            let max_fails = b.peers().get(i).map_or(0, |p| p.max_fails);
            disabled = failed && !single && max_fails != 0 && h.fails() >= max_fails;
        }
        if let Some(q) = &self.shared {
            q.release(i);
        }
        if failed {
            b.failed(i);
        }
        if let Some(s) = &self.stats {
            s.done(i, failed, disabled);
        }
        disabled
    }

    /// Where the peer a request picked sits in this worker's list now
    /// (None: a zone peer that has left since).
    fn position(&self, picked: &Picked) -> Option<usize> {
        match &self.zone {
            Some(v) => v.position(picked),
            None => Some(picked.i),
        }
    }

    /// An idle connection to the peer that the origin has not closed.
    pub fn take_idle(&mut self, picked: &Picked, timeout: Duration, now: Instant) -> Option<(UpStream, Uses)> {
        let peer = self.position(picked)?;
        while let Some(pos) = self.idle.iter().rposition(|c| c.peer == peer) {
            let c = self.idle.remove(pos);
            if now.duration_since(c.since) >= timeout {
                continue;
            }
            // Closed by the origin meanwhile (or it sent something it should
            // not have): reading now would not block.
            if !c.stream.is_stale() {
                return Some((c.stream, c.uses));
            }
        }
        None
    }

    /// Every idle connection to the peer is dropped (likely as stale as
    /// one that turned out closed).
    pub fn drop_idle(&mut self, picked: &Picked) {
        if let Some(peer) = self.position(picked) {
            self.idle.retain(|c| c.peer != peer);
        }
    }

    pub fn put_idle(&mut self, u: &Upstream, picked: &Picked, stream: UpStream, uses: Uses) {
        let now = crate::clock::mono();
        if u.keepalive == 0
            || uses.requests >= u.keepalive_requests
            || now.duration_since(uses.opened) > u.keepalive_time
        {
            return;
        }
        // A peer that left the zone meanwhile: its connection closes.
        let Some(peer) = self.position(picked) else { return };
        if self.idle.len() >= u.keepalive {
            self.idle.remove(0);
        }
        self.idle.push(Idle { peer, stream, since: now, uses });
    }
}

/// Peer `i` was chosen: its health bookkeeping and its `sluice_status`
/// count. Returns `i`.
fn took(
    health: &mut [PeerHealth],
    stats: &Option<Arc<crate::metrics::PeerSet>>,
    peer: &crate::upstream::balance::PeerInfo,
    i: usize,
    now: u64,
) -> usize {
    health[i].picked(peer, now);
    if let Some(s) = stats {
        s.picked(i);
    }
    i
}
