//! Counters of the families that are not HTTP, in protocol-free terms so
//! this shared layer names none of them: a *session zone* is what NGINX
//! Plus's `stream/server_zones` reports (a stream `server`'s
//! `status_zone`, or its first `listen` address), and a *mail protocol*
//! is one of three slots the mail family fills (IMAP, POP3, SMTP). The
//! families write them through the worker's [`super::WorkerMetrics`] (one
//! writer, relaxed load and store, as every counter here), a scrape sums
//! them with the rest ([`super::worker::totals`]).
//!
//! The upstream blocks of a family are published when a generation starts
//! ([`publish`]), so a status page built by the HTTP family, which knows
//! nothing of `stream {}`, lists them; their peers count in
//! [`super::PeerSet`]s registered under the family's block name.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::{Names, add};
use crate::config::proxy::Upstream;

/// One worker's counts for one session zone.
#[derive(Default)]
pub struct SessionCounters {
    /// Connections (or a first datagram) accepted.
    connections: AtomicU64,
    /// A gauge: sessions of this zone the worker has open now.
    processing: AtomicU64,
    /// Sessions ended, by the class of their status (1xx..5xx).
    sessions: [AtomicU64; 5],
    /// Bytes from and to clients.
    received: AtomicU64,
    sent: AtomicU64,
    /// Datagrams dropped without a session taking them (no connection
    /// slot left, a session's queue full).
    discarded: AtomicU64,
}

impl SessionCounters {
    /// A connection was accepted and its session opened.
    pub fn opened(&self) {
        add(&self.connections, 1);
        add(&self.processing, 1);
    }

    /// A session [`opened`](Self::opened) here ended.
    pub fn closed(&self) {
        self.processing.store(self.processing.load(Relaxed).saturating_sub(1), Relaxed);
    }

    /// A session ended with `status` (nginx's stream `$status`: 200, 400,
    /// 403, 500, 502, 503) after `received` and `sent` bytes.
    pub fn ended(&self, status: u16, received: u64, sent: u64) {
        if let Some(c) = super::worker::class(status) {
            add(&self.sessions[c], 1);
        }
        add(&self.received, received);
        add(&self.sent, sent);
    }

    /// A datagram was dropped without a session.
    pub fn discarded(&self) {
        add(&self.discarded, 1);
    }
}

/// One zone's counts summed over every worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SessionTotals {
    pub connections: u64,
    pub processing: u64,
    pub sessions: [u64; 5],
    pub received: u64,
    pub sent: u64,
    pub discarded: u64,
}

impl SessionTotals {
    /// Adds one worker's counts; `gauges`: its open sessions too (not for
    /// a worker that ended: its sessions ended with it).
    pub(super) fn add(&mut self, c: &SessionCounters, gauges: bool) {
        let s = |a: &mut u64, c: &AtomicU64| *a = a.wrapping_add(c.load(Relaxed));
        s(&mut self.connections, &c.connections);
        if gauges {
            s(&mut self.processing, &c.processing);
        }
        self.sessions.iter_mut().zip(&c.sessions).for_each(|(a, c)| s(a, c));
        s(&mut self.received, &c.received);
        s(&mut self.sent, &c.sent);
        s(&mut self.discarded, &c.discarded);
    }

    pub(super) fn add_totals(&mut self, o: &SessionTotals) {
        self.connections = self.connections.wrapping_add(o.connections);
        self.sessions.iter_mut().zip(&o.sessions).for_each(|(a, b)| *a = a.wrapping_add(*b));
        self.received = self.received.wrapping_add(o.received);
        self.sent = self.sent.wrapping_add(o.sent);
        self.discarded = self.discarded.wrapping_add(o.discarded);
    }

    /// Sessions ended, all statuses.
    pub fn total(&self) -> u64 {
        self.sessions.iter().fold(0u64, |a, b| a.wrapping_add(*b))
    }
}

/// The mail protocols' slots, in the order of [`MailCounters`]' arrays.
pub const MAIL_PROTOCOLS: [&str; 3] = ["imap", "pop3", "smtp"];

/// How an `auth_http` exchange ended, in the order of [`MailTotals::auth`].
pub const AUTH_RESULTS: [&str; 3] = ["ok", "failed", "error"];

/// One worker's mail counts.
#[derive(Default)]
pub struct MailCounters {
    sessions: [AtomicU64; 3],
    /// A gauge: sessions open now, per protocol.
    processing: [AtomicU64; 3],
    /// `auth_http` answers: a backend (ok), a refusal (`Auth-Status` other
    /// than OK: failed), or no usable answer (unreachable, timed out,
    /// malformed, no server: error).
    auth: [AtomicU64; 3],
}

impl MailCounters {
    /// A session of protocol slot `p` (index into [`MAIL_PROTOCOLS`]) began.
    pub fn opened(&self, p: usize) {
        if let (Some(s), Some(g)) = (self.sessions.get(p), self.processing.get(p)) {
            add(s, 1);
            add(g, 1);
        }
    }

    /// A session [`opened`](Self::opened) with slot `p` ended.
    pub fn closed(&self, p: usize) {
        if let Some(g) = self.processing.get(p) {
            g.store(g.load(Relaxed).saturating_sub(1), Relaxed);
        }
    }

    /// An `auth_http` exchange ended with result `r` (index into
    /// [`AUTH_RESULTS`]).
    pub fn auth(&self, r: usize) {
        if let Some(c) = self.auth.get(r) {
            add(c, 1);
        }
    }
}

/// The mail counts summed over every worker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MailTotals {
    pub sessions: [u64; 3],
    pub processing: [u64; 3],
    pub auth: [u64; 3],
}

impl MailTotals {
    pub(super) fn add(&mut self, c: &MailCounters, gauges: bool) {
        let s = |a: &mut [u64; 3], c: &[AtomicU64; 3]| a.iter_mut().zip(c).for_each(|(a, c)| *a += c.load(Relaxed));
        s(&mut self.sessions, &c.sessions);
        if gauges {
            s(&mut self.processing, &c.processing);
        }
        s(&mut self.auth, &c.auth);
    }

    pub(super) fn add_totals(&mut self, o: &MailTotals) {
        let s = |a: &mut [u64; 3], b: &[u64; 3]| a.iter_mut().zip(b).for_each(|(a, b)| *a = a.wrapping_add(*b));
        s(&mut self.sessions, &o.sessions);
        s(&mut self.auth, &o.auth);
    }
}

/// Session zone names (stream servers' `status_zone`s and addresses).
pub(super) static SESSION_ZONES: Names = Names::new();

/// The counter slot of session zone `name`: a name keeps its slot for the
/// life of the process, so reloads keep counting into it.
pub fn session_zone(name: &str) -> u32 {
    SESSION_ZONES.index(name)
}

/// Every session zone name configured so far, by slot.
pub fn session_zone_names() -> Vec<Arc<str>> {
    SESSION_ZONES.all()
}

/// A family's upstream blocks as the running generation has them: (the
/// family's block name, its upstreams).
pub type Published = Vec<(&'static str, Vec<Arc<Upstream>>)>;

static PUBLISHED: Mutex<Published> = Mutex::new(Vec::new());

/// The families' upstream blocks of the generation starting now (those
/// `proxy_pass` names; the one-address upstreams a `proxy_pass ADDRESS`
/// makes are left out, as HTTP's page leaves them out). Returns what was
/// published before, for a generation that does not start.
pub fn publish(cfg: &crate::config::model::Config) -> Published {
    let now: Published = cfg
        .families
        .iter()
        .map(|(name, f)| (*name, f.upstreams().iter().filter(|u| !u.implicit).cloned().collect::<Vec<_>>()))
        .filter(|(_, u)| !u.is_empty())
        .collect();
    restore(now)
}

/// Publishes `p` again (a generation that did not start), returning what
/// it replaced.
pub fn restore(p: Published) -> Published {
    match PUBLISHED.lock() {
        Ok(mut g) => std::mem::replace(&mut *g, p),
        Err(_) => Vec::new(),
    }
}

/// The upstream blocks of family `block` (`"stream"`) now.
pub fn published(block: &str) -> Vec<Arc<Upstream>> {
    let Ok(g) = PUBLISHED.lock() else { return Vec::new() };
    g.iter().filter(|(n, _)| *n == block).flat_map(|(_, u)| u.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_and_gauges_sum() {
        let c = SessionCounters::default();
        c.opened();
        c.opened();
        c.closed();
        c.ended(200, 10, 20);
        c.ended(502, 1, 0);
        c.ended(403, 0, 0);
        c.discarded();
        let mut t = SessionTotals::default();
        t.add(&c, true);
        assert_eq!((t.connections, t.processing, t.sessions, t.received, t.sent), (2, 1, [0, 1, 0, 1, 1], 11, 20));
        assert_eq!((t.total(), t.discarded), (3, 1));
        let mut gone = SessionTotals::default();
        gone.add(&c, false);
        assert_eq!(gone.processing, 0, "an ended worker's gauge stays behind");
        let m = MailCounters::default();
        m.opened(0);
        m.opened(2);
        m.closed(2);
        m.opened(9);
        m.auth(1);
        let mut mt = MailTotals::default();
        mt.add(&m, true);
        assert_eq!((mt.sessions, mt.processing, mt.auth), ([1, 0, 1], [1, 0, 0], [0, 1, 0]));
    }
}
