//! The default method, nginx's smooth weighted round robin (`ngx_http_upstream_get_round_robin_peer`
//! and `ngx_http_upstream_get_peer`): each round every candidate's `current_weight` grows by its
//! `effective_weight`, the largest wins and pays back the round's total. Weights 5,1,1 give
//! `a a b a c a a` rather than `a a a a a b c`. When no primary peer is left the request moves to
//! the backups for good. Every other method falls back to this one.

use super::{Balancer, PeerInfo, PickCtx, Selection, Wrr, available};

pub(super) fn pick(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
    if b.is_single() {
        // nginx neither checks nor sets the tried bit here: a lone peer is retried only if the
        // caller allows more than `tries()` attempts.
        let i = *b.primary.members.first()?;
        return (!b.peers[i].down && ctx.usable(i)).then_some(i);
    }
    loop {
        let tier = if sel.on_backup { b.backup.as_ref()? } else { &b.primary };
        let candidates = tier.members.iter().copied().filter(|&i| available(&b.peers, sel, ctx, i));
        if let Some(i) = smooth(&mut b.wrr, &b.peers, candidates) {
            sel.tried.insert(i);
            return Some(i);
        }
        if sel.on_backup || b.backup.is_none() {
            return None;
        }
        sel.on_backup = true;
    }
}

/// One round of smooth weighted round robin over `candidates` (in config order, already filtered):
/// the winner, with every candidate's weights advanced as nginx does. Ties go to the first.
pub(super) fn smooth(
    wrr: &mut [Wrr],
    peers: &[PeerInfo],
    candidates: impl IntoIterator<Item = usize>,
) -> Option<usize> {
    let mut best: Option<usize> = None;
    let mut total = 0i64;
    for i in candidates {
        let weight = i64::from(peers[i].weight);
        let w = &mut wrr[i];
        w.current += w.effective;
        total += w.effective;
        if w.effective < weight {
            w.effective += 1;
        }
        if best.is_none_or(|b| wrr[i].current > wrr[b].current) {
            best = Some(i);
        }
    }
    let best = best?;
    wrr[best].current -= total;
    Some(best)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ctx, picks, usable, weighted};
    use super::super::{Balancer, Method, PeerView, Selection};

    fn rr(weights: &[u32]) -> Balancer {
        Balancer::new(Method::RoundRobin, weighted(weights)).unwrap()
    }

    #[test]
    fn weights_5_1_1_give_nginx_sequence() {
        // nginx's commit message for smooth weighted round robin (and nginx 1.22.1, measured).
        let mut b = rr(&[5, 1, 1]);
        let seq = picks(&mut b, &usable(3), 14);
        assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn shares_equal_weights_exactly() {
        let mut b = rr(&[4, 2, 1, 3]);
        let seq = picks(&mut b, &usable(4), 10 * 1000);
        let count = |p| seq.iter().filter(|&&i| i == p).count();
        assert_eq!([count(0), count(1), count(2), count(3)], [4000, 2000, 1000, 3000]);
        // Smooth: within any window of one cycle (10 picks) each peer gets exactly its weight.
        for w in seq.chunks(10) {
            assert_eq!(w.iter().filter(|&&i| i == 0).count(), 4);
        }
    }

    #[test]
    fn equal_weights_alternate() {
        let mut b = rr(&[1, 1, 1]);
        assert_eq!(picks(&mut b, &usable(3), 6), [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn skips_unusable_and_down() {
        let mut peers = weighted(&[1, 1, 1, 1]);
        peers[3].down = true;
        let mut b = Balancer::new(Method::RoundRobin, peers).unwrap();
        let mut views = usable(4);
        views[1].usable = false;
        let seq = picks(&mut b, &views, 8);
        assert_eq!(seq, [0, 2, 0, 2, 0, 2, 0, 2]);
    }

    #[test]
    fn retries_skip_tried_peers_then_give_up() {
        let mut b = rr(&[3, 1, 1]);
        let views = usable(3);
        let mut sel = Selection::new();
        let mut got = vec![];
        while let Some(i) = b.pick(&mut sel, &ctx(&views)) {
            got.push(i);
        }
        assert_eq!(got, [0, 1, 2]);
        assert!((0..3).all(|i| sel.is_tried(i)));
    }

    #[test]
    fn backups_only_when_no_primary_is_left_and_then_for_good() {
        let mut peers = weighted(&[1, 1, 2, 1]);
        peers[2].backup = true;
        peers[3].backup = true;
        let mut b = Balancer::new(Method::RoundRobin, peers).unwrap();
        let mut views = usable(4);
        assert!(picks(&mut b, &views, 20).iter().all(|&i| i < 2));

        views[0].usable = false;
        views[1].usable = false;
        assert_eq!(picks(&mut b, &views, 6), [2, 3, 2, 2, 3, 2]);

        // A request that moved to the backups stays there even if the primaries recover.
        let mut sel = Selection::new();
        let first = b.pick(&mut sel, &ctx(&views)).unwrap();
        assert!(first >= 2 && sel.on_backup());
        let all = usable(4);
        let second = b.pick(&mut sel, &ctx(&all)).unwrap();
        assert!(second >= 2 && second != first);
        assert_eq!(b.pick(&mut sel, &ctx(&all)), None);
        assert!(!sel.is_tried(0) && !sel.is_tried(1));
    }

    #[test]
    fn lone_peer_ignores_tried_but_not_down_or_unusable() {
        let mut b = rr(&[2]);
        let mut sel = Selection::new();
        let views = usable(1);
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(0));
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(0));
        assert!(!sel.is_tried(0));
        assert_eq!(b.pick(&mut sel, &ctx(&[PeerView { usable: false, conns: 0 }])), None);

        let mut peers = weighted(&[1]);
        peers[0].down = true;
        let mut down = Balancer::new(Method::RoundRobin, peers).unwrap();
        assert_eq!(down.pick(&mut Selection::new(), &ctx(&views)), None);
    }

    #[test]
    fn failure_lowers_share_then_weight_regrows() {
        let mut peers = weighted(&[10, 10]);
        peers[0].max_fails = 1;
        let mut b = Balancer::new(Method::RoundRobin, peers).unwrap();
        let views = usable(2);
        b.failed(0);
        assert_eq!(b.wrr[0].effective, 0);
        // Effective weights 0,10 then 1,10 ... : peer 1 wins the first rounds outright.
        assert_eq!(picks(&mut b, &views, 3), [1, 1, 1]);
        for n in 1..=10 {
            picks(&mut b, &views, 1);
            assert_eq!(b.wrr[0].effective, (3 + n).min(10));
        }
        // Fully recovered: over a long run the split is even again.
        let seq = picks(&mut b, &views, 2000);
        let zeros = seq.iter().filter(|&&i| i == 0).count();
        assert!((995..=1005).contains(&zeros), "{zeros}");
    }
}
