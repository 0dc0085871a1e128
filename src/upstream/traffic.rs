//! What a session family (stream) counts per upstream peer beyond the
//! balancer's needs, as NGINX Plus's `stream.upstreams` peer object shows
//! it: the bytes moved each way, the connect, first byte and session times
//! (summed, with their counts, so a scrape can average them as Plus's
//! `connect_time`, `first_byte_time` and `response_time`), and when the
//! peer was last selected.
//!
//! It lives here, below both users: a worker's `metrics::PeerSet` keeps one
//! per peer of an upstream without a `zone`, and a zone's peer keeps one in
//! its [`super::zone::Shared`], written by every worker, so all of them
//! count into the same numbers. Hence atomic adds (not the single-writer
//! load and store of the per-worker counters): a zone's peer has many
//! writers, and once per session the difference does not show.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A sum of milliseconds and how many went into it.
#[derive(Default)]
pub struct Timing {
    pub ms: AtomicU64,
    pub n: AtomicU64,
}

impl Timing {
    fn record(&self, ms: Option<u64>) {
        if let Some(ms) = ms {
            self.ms.fetch_add(ms, Relaxed);
            self.n.fetch_add(1, Relaxed);
        }
    }
}

/// One session's times with a peer, in ms (None: it did not get there).
#[derive(Debug, Default, Clone, Copy)]
pub struct SessionTimes {
    pub connect: Option<u64>,
    pub first_byte: Option<u64>,
    pub session: Option<u64>,
}

/// One peer's traffic counters.
#[derive(Default)]
pub struct Traffic {
    /// Bytes to the peer, and from it.
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// Connect, first byte and session times.
    pub times: [Timing; 3],
    /// When (`clock::unix_ms`) the balancer last gave the peer a session;
    /// 0: never.
    pub selected_ms: AtomicU64,
}

impl Traffic {
    /// The balancer gave the peer a session now.
    pub fn selected(&self) {
        self.selected_ms.fetch_max(crate::clock::unix_ms(), Relaxed);
    }

    /// A session with the peer ended after `sent` bytes to it and
    /// `received` from it.
    pub fn session(&self, sent: u64, received: u64, times: SessionTimes) {
        self.sent.fetch_add(sent, Relaxed);
        self.received.fetch_add(received, Relaxed);
        for (t, ms) in self.times.iter().zip([times.connect, times.first_byte, times.session]) {
            t.record(ms);
        }
    }

    /// The counts now.
    pub fn read(&self) -> TrafficTotals {
        let mut t = TrafficTotals::default();
        t.add(self);
        t
    }
}

/// A peer's traffic summed over its counters (every worker's, or the
/// zone's one).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TrafficTotals {
    pub sent: u64,
    pub received: u64,
    /// (sum ms, count) of the connect, first byte and session times.
    pub times: [(u64, u64); 3],
    /// The latest selection (unix ms; 0: never).
    pub selected_ms: u64,
}

impl TrafficTotals {
    /// Adds one set of counters (the latest selection wins).
    pub fn add(&mut self, c: &Traffic) {
        self.sent = self.sent.wrapping_add(c.sent.load(Relaxed));
        self.received = self.received.wrapping_add(c.received.load(Relaxed));
        for (t, c) in self.times.iter_mut().zip(&c.times) {
            t.0 = t.0.wrapping_add(c.ms.load(Relaxed));
            t.1 = t.1.wrapping_add(c.n.load(Relaxed));
        }
        self.selected_ms = self.selected_ms.max(c.selected_ms.load(Relaxed));
    }

    /// Adds these counts into `c` (an ended worker's counts kept in a
    /// retired set).
    pub fn add_into(&self, c: &Traffic) {
        c.sent.fetch_add(self.sent, Relaxed);
        c.received.fetch_add(self.received, Relaxed);
        for (c, t) in c.times.iter().zip(&self.times) {
            c.ms.fetch_add(t.0, Relaxed);
            c.n.fetch_add(t.1, Relaxed);
        }
        c.selected_ms.fetch_max(self.selected_ms, Relaxed);
    }

    /// The average of time `k` (0 connect, 1 first byte, 2 session) in
    /// ms, as NGINX Plus's `connect_time`, `first_byte_time` and
    /// `response_time`; None before any.
    pub fn average_ms(&self, k: usize) -> Option<u64> {
        let (ms, n) = self.times.get(k).copied()?;
        (n > 0).then(|| ms / n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_sum_and_average() {
        let t = Traffic::default();
        t.session(5, 7, SessionTimes { connect: Some(2), first_byte: Some(10), session: None });
        t.session(1, 0, SessionTimes { connect: Some(4), first_byte: None, session: Some(30) });
        t.selected_ms.store(9, Relaxed);
        let r = t.read();
        assert_eq!((r.sent, r.received, r.selected_ms), (6, 7, 9));
        assert_eq!(
            (r.average_ms(0), r.average_ms(1), r.average_ms(2), r.average_ms(3)),
            (Some(3), Some(10), Some(30), None)
        );
        let kept = Traffic::default();
        kept.selected_ms.store(20, Relaxed);
        r.add_into(&kept);
        assert_eq!(kept.read(), TrafficTotals { selected_ms: 20, ..r });
        t.selected();
        assert!(t.read().selected_ms > 9);
    }
}
