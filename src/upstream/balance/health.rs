//! A peer's failure accounting and connection count, as nginx keeps them per worker in
//! `ngx_http_upstream_rr_peer_t` (`fails`, `accessed`, `checked`, `conns`), producing the
//! [`PeerView`] each pick reads.
//!
//! A peer is failed out once `fails` reaches `max_fails` and until `fail_timeout` has passed since
//! `checked`. The first pick after that window moves `checked` to now (a probe); a success released
//! after such a probe (`accessed < checked`) clears `fails`, a failure restarts the window. A success
//! within the window does not clear `fails`: failures spread over time still add up, as in nginx.

use super::{PeerInfo, PeerView};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerHealth {
    fails: u32,
    /// Time of the last failure, in seconds.
    accessed: u64,
    /// Start of the current failure window, in seconds.
    checked: u64,
    conns: u32,
}

impl PeerHealth {
    pub fn view(&self, peer: &PeerInfo, now: u64) -> PeerView {
        let failed_out = peer.max_fails != 0
            && self.fails >= peer.max_fails
            && now.saturating_sub(self.checked) <= peer.fail_timeout;
        let full = peer.max_conns != 0 && self.conns >= peer.max_conns;
        PeerView { usable: !failed_out && !full, conns: self.conns }
    }

    /// The balancer chose this peer.
    pub fn picked(&mut self, peer: &PeerInfo, now: u64) {
        self.conns = self.conns.saturating_add(1);
        if now.saturating_sub(self.checked) > peer.fail_timeout {
            self.checked = now;
        }
    }

    /// The request is done with this peer. `single` is [`super::Balancer::is_single`]: a lone
    /// server's failures are not counted.
    pub fn released(&mut self, failed: bool, now: u64, single: bool) {
        self.conns = self.conns.saturating_sub(1);
        if single {
            return;
        }
        if failed {
            self.fails = self.fails.saturating_add(1);
            self.accessed = now;
            self.checked = now;
        } else if self.accessed < self.checked {
            self.fails = 0;
        }
    }

    /// A TCP connection to the peer was made (nginx stream's
    /// `NOTIFY_CONNECT`): after a probe it clears `fails` at once, rather
    /// than when the session ends, so the sessions that follow are not
    /// kept on the backups for the whole first session.
    pub fn connected(&mut self) {
        if self.accessed < self.checked {
            self.fails = 0;
        }
    }

    pub fn conns(&self) -> u32 {
        self.conns
    }

    pub fn fails(&self) -> u32 {
        self.fails
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(max_fails: u32, fail_timeout: u64) -> PeerInfo {
        PeerInfo { max_fails, fail_timeout, ..PeerInfo::new("10.0.0.1:80") }
    }

    #[test]
    fn failed_out_for_fail_timeout_then_probed() {
        let p = peer(1, 10);
        let mut h = PeerHealth::default();
        h.picked(&p, 100);
        h.released(true, 100, false);
        assert!(!h.view(&p, 100).usable);
        assert!(!h.view(&p, 110).usable);
        assert!(h.view(&p, 111).usable);
        // The probe succeeds: fails are cleared.
        h.picked(&p, 111);
        h.released(false, 112, false);
        assert_eq!(h.fails(), 0);
        assert!(h.view(&p, 112).usable);
    }

    #[test]
    fn failed_probe_restarts_the_window() {
        let p = peer(1, 10);
        let mut h = PeerHealth::default();
        h.picked(&p, 100);
        h.released(true, 100, false);
        h.picked(&p, 111);
        h.released(true, 111, false);
        assert_eq!(h.fails(), 2);
        assert!(!h.view(&p, 121).usable);
        assert!(h.view(&p, 122).usable);
    }

    #[test]
    fn success_within_the_window_does_not_clear_fails() {
        let p = peer(2, 10);
        let mut h = PeerHealth::default();
        h.picked(&p, 100);
        h.released(true, 100, false);
        h.picked(&p, 105);
        h.released(false, 105, false);
        assert_eq!(h.fails(), 1, "no probe happened: checked is still 100");
        h.picked(&p, 106);
        h.released(true, 106, false);
        assert!(!h.view(&p, 116).usable);
        assert!(h.view(&p, 117).usable);
    }

    #[test]
    fn max_fails_zero_never_fails_out() {
        let p = peer(0, 10);
        let mut h = PeerHealth::default();
        for t in 0..5 {
            h.picked(&p, t);
            h.released(true, t, false);
        }
        assert!(h.view(&p, 5).usable);
    }

    #[test]
    fn lone_server_failures_are_not_counted() {
        let p = peer(1, 10);
        let mut h = PeerHealth::default();
        h.picked(&p, 100);
        h.released(true, 100, true);
        assert_eq!(h.fails(), 0);
        assert!(h.view(&p, 100).usable);
    }

    #[test]
    fn max_conns_limits() {
        let p = PeerInfo { max_conns: 2, ..PeerInfo::new("10.0.0.1:80") };
        let mut h = PeerHealth::default();
        h.picked(&p, 1);
        assert_eq!(h.view(&p, 1), PeerView { usable: true, conns: 1 });
        h.picked(&p, 1);
        assert_eq!(h.view(&p, 1), PeerView { usable: false, conns: 2 });
        h.released(false, 2, false);
        assert!(h.view(&p, 2).usable);
        assert_eq!(h.conns(), 1);
    }
}
