//! The stream family's side of the upstream core: this worker's peer
//! state and counters per upstream block, the pick of a datagram
//! session's one peer, and [`Tries`], a TCP session's tries of peers as
//! `proxy_next_upstream*` allow. Shared by sessions run as tasks
//! (`proxy::run`) and those the worker's own loop runs (`tcp_inline`), so
//! both pick, retry, log and count alike.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use super::session::{Session, Try};
use crate::config::proxy::{PeerConf, Upstream};
use crate::log::error::Level;
use crate::upstream::balance::Selection;
use crate::upstream::peers::{PeerState, Picked};

thread_local! {
    /// This worker's peer state per upstream (by the block's address: a
    /// worker lives as long as its configuration). foldhash: a session
    /// looks its upstream up three times (pick, connected, release), and
    /// SipHash's cost showed per session.
    static PEERS: RefCell<HashMap<usize, PeerState, foldhash::fast::FixedState>> =
        RefCell::new(HashMap::with_hasher(foldhash::fast::FixedState::default()));
}

thread_local! {
    /// This worker's counters of the stream upstream blocks' peers, for the
    /// status page (keyed as `PEERS`).
    static STATS: RefCell<HashMap<usize, Arc<crate::metrics::PeerSet>, foldhash::fast::FixedState>> =
        RefCell::new(HashMap::with_hasher(foldhash::fast::FixedState::default()));
}

/// The worker's counters for upstream block `u`: None for what the page
/// does not list (an upstream a `proxy_pass` made of one address or a
/// value with variables), or whose peers change at run time (a `zone`:
/// its peers' counts are the zone's).
fn stats(u: &Arc<Upstream>) -> Option<Arc<crate::metrics::PeerSet>> {
    if u.implicit || u.index == usize::MAX || u.zone.is_some() {
        return None;
    }
    STATS.with(|m| {
        let mut m = m.borrow_mut();
        let set = m.entry(Arc::as_ptr(u) as usize).or_insert_with(|| crate::metrics::PeerSet::register_in("stream", u));
        Some(set.clone())
    })
}

/// The session's counts with the peer it picked (its last try's bytes
/// and times): into the zone's peer, which every worker counts into, or
/// into this worker's set for the upstream.
fn count_session(s: &Session, u: &Arc<Upstream>, picked: &Picked) {
    let (sent, received, times) = {
        let up = s.up.borrow();
        let Some(t) = up.tries.last() else { return };
        let times = crate::upstream::traffic::SessionTimes {
            connect: t.connect_ms,
            first_byte: t.first_byte_ms,
            session: t.session_ms,
        };
        (t.sent, t.received, times)
    };
    if let Some(p) = &picked.peer {
        p.shared.traffic.session(sent, received, times);
    } else if let Some(set) = stats(u) {
        set.session(picked.i, sent, received, times);
    }
}

pub(super) fn with_peers<R>(u: &Arc<Upstream>, f: impl FnOnce(&mut PeerState) -> R) -> R {
    PEERS.with(|p| {
        let mut p = p.borrow_mut();
        let st = p.entry(Arc::as_ptr(u) as usize).or_insert_with(|| PeerState::new(u));
        st.sync(u);
        f(st)
    })
}

/// The peer of upstream `u` for a datagram session (`pick_one` once the
/// upstream is known): no await, so the listener's loop can start an
/// inline session (`udp_inline`) with it.
pub fn pick_in(s: &Session, u: Arc<Upstream>) -> Option<(Arc<Upstream>, Picked, crate::config::proxy::PeerConf)> {
    let key = match &u.balance {
        crate::config::proxy::Balance::Hash { key, .. } => key.render_to_vec(s),
        _ => Vec::new(),
    };
    let mut sel = Selection::new();
    let ip = Some(s.client.get().ip());
    let picked = if u.index == usize::MAX {
        PeerState::new(&u).pick(&mut sel, ip, &key)
    } else {
        with_peers(&u, |st| st.pick(&mut sel, ip, &key))
    };
    let Some(i) = picked else {
        s.log_upstream(Level::Error, format_args!("no live upstreams while connecting to upstream"), Some(&u.name));
        s.status.set(502);
        return None;
    };
    let peer = i.conf(&u).clone();
    if let Some(set) = stats(&u) {
        set.picked(i.i);
    }
    Some((u, i, peer))
}

/// Done with a peer `pick_one` gave: its failure accounting, and the
/// session's counts for the page.
pub fn release(s: &Session, u: &Arc<Upstream>, i: &Picked, failed: bool) {
    let disabled = u.index != usize::MAX && with_peers(u, |st| st.done(i, failed));
    if let Some(set) = stats(u) {
        set.done(i.i, failed, disabled);
    }
    count_session(s, u, i);
}

/// A peer `pick_one` gave was reached.
pub fn connected(u: &Arc<Upstream>, i: &Picked) {
    if u.index != usize::MAX {
        with_peers(u, |st| st.connected(i));
    }
}

/// A TCP session's tries of the peers of its upstream: the balancer's
/// picks in order, each try's entry in `$upstream_*`, the failure
/// accounting and nginx's lines, until one connects or
/// `proxy_next_upstream`, `_tries` or `_timeout` say stop.
pub struct Tries {
    pub u: Arc<Upstream>,
    /// The peer state of an upstream made for this session (a `proxy_pass`
    /// with variables), which no other session shares.
    state: Option<PeerState>,
    key: Vec<u8>,
    sel: Selection,
    client_ip: Option<IpAddr>,
    max: usize,
    tried: usize,
    started: Instant,
}

impl Tries {
    pub fn new(s: &Session, u: Arc<Upstream>) -> Tries {
        let p = &s.server().conf.proxy;
        let state = (u.index == usize::MAX).then(|| PeerState::new(&u));
        let key = match &u.balance {
            crate::config::proxy::Balance::Hash { key, .. } => key.render_to_vec(s),
            _ => Vec::new(),
        };
        let peers = match &state {
            Some(st) => st.tries(),
            None => with_peers(&u, |st| st.tries()),
        };
        let max = if p.next_upstream_tries == 0 { peers } else { p.next_upstream_tries.min(peers.max(1)) };
        Tries {
            u,
            state,
            key,
            sel: Selection::new(),
            client_ip: Some(s.client.get().ip()),
            max,
            tried: 0,
            started: crate::clock::mono(),
        }
    }

    /// The next peer to try, with its entry in the session's tries; None
    /// when no peer is live (the line logged, status 502).
    pub fn pick(&mut self, s: &Session) -> Option<Picked> {
        let (u, key, ip) = (&self.u, &self.key, self.client_ip);
        let picked = match self.state.as_mut() {
            Some(st) => st.pick(&mut self.sel, ip, key),
            None => with_peers(u, |st| st.pick(&mut self.sel, ip, key)),
        };
        let Some(i) = picked else {
            // nginx names the upstream itself in `$upstream_addr` and in
            // the line then.
            s.log_upstream(Level::Error, format_args!("no live upstreams while connecting to upstream"), Some(&u.name));
            s.up.borrow_mut().tries.push(Try::new(u.name.as_str().into()));
            s.status.set(502);
            return None;
        };
        self.tried += 1;
        if let Some(set) = stats(u) {
            set.picked(i.i);
        }
        s.up.borrow_mut().tries.push(Try::new(i.conf(u).name.clone()));
        Some(i)
    }

    pub fn peer<'a>(&'a self, i: &'a Picked) -> &'a PeerConf {
        i.conf(&self.u)
    }

    /// The try of `i`, started at `t0`, connected: its connect time,
    /// nginx's info line (`local` names the socket's end, asked only when
    /// the line is wanted), the peer's accounting.
    pub fn connected(&self, s: &Session, i: &Picked, t0: Instant, local: impl FnOnce() -> String) {
        if let Some(t) = s.up.borrow_mut().tries.last_mut() {
            t.connect_ms = Some(crate::clock::since_ms(t0));
        }
        s.log_proxy_connected(local, &self.peer(i).name);
        if self.state.is_none() {
            with_peers(&self.u, |st| st.connected(i));
        }
    }

    /// The try of `i` failed (`why`, nginx's words with the action):
    /// logged and counted against the peer. True when another try may
    /// follow; else the session's status is 502.
    pub fn failed(&mut self, s: &Session, i: &Picked, why: &dyn std::fmt::Display) -> bool {
        let name = &self.peer(i).name;
        s.log_upstream(Level::Error, format_args!("{why}"), Some(name));
        let disabled = self.state.is_none() && with_peers(&self.u, |st| st.done(i, true));
        if let Some(set) = stats(&self.u) {
            set.done(i.i, true, disabled);
        }
        if disabled {
            let msg = format_args!("upstream server temporarily disabled while connecting to upstream");
            s.log_upstream(Level::Warn, msg, Some(name));
        }
        let p = &s.server().conf.proxy;
        let out_of_time =
            !p.next_upstream_timeout.is_zero() && crate::clock::mono() >= self.started + p.next_upstream_timeout;
        if !p.next_upstream || self.tried >= self.max || out_of_time {
            s.status.set(502);
            return false;
        }
        true
    }

    /// The session with the connected peer `i` is over: the peer's
    /// accounting and the session's counts for the status page.
    pub fn done(&self, s: &Session, i: &Picked) {
        if self.state.is_none() {
            with_peers(&self.u, |st| st.done(i, false));
        }
        if let Some(set) = stats(&self.u) {
            set.done(i.i, false, false);
        }
        count_session(s, &self.u, i);
    }
}
