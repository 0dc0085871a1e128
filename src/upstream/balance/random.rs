//! `random` and `random two [least_conn]` (`ngx_http_upstream_random_module.c`). A draw is a random
//! number below the total weight, located among the peers' cumulative weights by binary search.
//! `random` takes the first usable draw; `random two` takes two different usable draws and keeps
//! the one with fewer connections per weight (the second on a tie). Each unusable (or repeated)
//! draw counts towards the limit of 20 after which round robin decides, and so does the first of a
//! `two` pair; fewer than two peers also mean round robin.

use std::hash::BuildHasher;

use super::{Balancer, PeerInfo, PickCtx, Selection, available, round_robin};

pub(super) fn pick(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx, two: bool) -> Option<usize> {
    if sel.tries > 20 || b.primary.members.len() < 2 {
        return round_robin::pick(b, sel, ctx);
    }
    let mut prev: Option<usize> = None;
    loop {
        let i = peek(b);
        if prev != Some(i) && available(&b.peers, sel, ctx, i) {
            match prev {
                // The first of two; nginx counts it as a try too.
                None if two => prev = Some(i),
                None => {
                    sel.tried.insert(i);
                    return Some(i);
                }
                Some(p) => {
                    let chosen = if ctx.conns(i) * b.weight(p) > ctx.conns(p) * b.weight(i) { p } else { i };
                    sel.tried.insert(chosen);
                    return Some(chosen);
                }
            }
        }
        sel.tries += 1;
        if sel.tries > 20 {
            return round_robin::pick(b, sel, ctx);
        }
    }
}

/// One weighted draw among the primary peers (`ngx_http_upstream_peek_random_peer`).
fn peek(b: &mut Balancer) -> usize {
    let x = b.rng.below(b.primary.total_weight);
    let ranges = &b.ranges;
    let (mut i, mut j) = (0, ranges.len());
    while j - i > 1 {
        let k = (i + j) / 2;
        if x < ranges[k] {
            j = k;
        } else {
            i = k;
        }
    }
    b.primary.members.get(i).copied().unwrap_or(0)
}

/// Per primary member, the sum of the weights before it.
pub(super) fn ranges(peers: &[PeerInfo], members: &[usize]) -> Vec<u64> {
    let mut total = 0;
    members
        .iter()
        .map(|&i| {
            let start = total;
            total += u64::from(peers[i].weight);
            start
        })
        .collect()
}

/// SplitMix64: small, fast, and good enough to spread requests; not for secrets.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// Seeded from the standard library's per-process random hash keys: workers and reloads
    /// start from different points, as nginx seeds `random()` per worker.
    pub fn from_entropy() -> Rng {
        Rng(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Below `n` (0 when `n` is 0), as nginx's `ngx_random() % n` with a 31-bit draw.
    pub fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 33).checked_rem(n).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ctx, usable, weighted};
    use super::super::{Balancer, Method, PeerView, Selection};

    fn random(weights: &[u32], two: bool) -> Balancer {
        let mut b = Balancer::new(Method::Random { two }, weighted(weights)).unwrap();
        b.seed_random(42);
        b
    }

    fn counts(b: &mut Balancer, views: &[PeerView], n: usize) -> Vec<usize> {
        let mut c = vec![0; views.len()];
        for _ in 0..n {
            c[b.pick(&mut Selection::new(), &ctx(views)).unwrap()] += 1;
        }
        c
    }

    #[test]
    fn ranges_and_draws_follow_weights() {
        let mut b = random(&[1, 3, 6], false);
        assert_eq!(b.ranges, [0, 1, 4]);
        let c = counts(&mut b, &usable(3), 100_000);
        for (got, want) in c.iter().zip([10_000, 30_000, 60_000]) {
            assert!(got.abs_diff(want) < 1_000, "{c:?}");
        }
    }

    #[test]
    fn skips_unusable_down_and_tried() {
        let mut peers = weighted(&[1, 1, 1, 1]);
        peers[0].down = true;
        let mut b = Balancer::new(Method::Random { two: false }, peers).unwrap();
        b.seed_random(7);
        let mut views = usable(4);
        views[1].usable = false;
        let c = counts(&mut b, &views, 1_000);
        assert_eq!((c[0], c[1]), (0, 0));
        assert!(c[2] > 400 && c[3] > 400, "{c:?}");

        let mut sel = Selection::new();
        let a = b.pick(&mut sel, &ctx(&views)).unwrap();
        let z = b.pick(&mut sel, &ctx(&views)).unwrap();
        assert_eq!(a + z, 5);
        assert_eq!(b.pick(&mut sel, &ctx(&views)), None);
    }

    #[test]
    fn two_keeps_the_less_loaded() {
        // With two peers both draws are needed, so the idle one always wins.
        let mut b = random(&[1, 1], true);
        let views = [PeerView { usable: true, conns: 100 }, PeerView { usable: true, conns: 0 }];
        assert_eq!(counts(&mut b, &views, 1_000), [0, 1_000]);
    }

    #[test]
    fn two_weighs_connections() {
        // 4 conns on weight 4 beats 2 conns on weight 1. Peer 1 is drawn one time in five, so
        // now and then 20 draws find no second peer and round robin decides (as in nginx).
        let mut b = random(&[4, 1], true);
        let views = [PeerView { usable: true, conns: 4 }, PeerView { usable: true, conns: 2 }];
        let mut compared = 0;
        for _ in 0..500 {
            let mut sel = Selection::new();
            let i = b.pick(&mut sel, &ctx(&views));
            if sel.tries <= 20 {
                assert_eq!(i, Some(0));
                compared += 1;
            }
        }
        assert!(compared > 450, "{compared}");
    }

    #[test]
    fn two_among_three_favours_the_idle_peer() {
        // Peer 0 is idle: it wins whenever it is one of the two draws (2/3 of the time).
        let mut b = random(&[1, 1, 1], true);
        let views = [
            PeerView { usable: true, conns: 0 },
            PeerView { usable: true, conns: 5 },
            PeerView { usable: true, conns: 5 },
        ];
        let c = counts(&mut b, &views, 30_000);
        assert!(c[0].abs_diff(20_000) < 600, "{c:?}");
    }

    #[test]
    fn two_on_a_tie_keeps_the_second_draw() {
        let mut b = random(&[1, 1], true);
        let views = usable(2);
        let c = counts(&mut b, &views, 10_000);
        assert!(c[0].abs_diff(5_000) < 300, "{c:?}");
        // Same seed, same draws: the chosen one is always the second draw.
        let mut rng = super::Rng::new(42);
        let mut b = random(&[1, 1], true);
        for _ in 0..100 {
            let first = rng.below(2);
            let mut second = rng.below(2);
            while second == first {
                second = rng.below(2);
            }
            assert_eq!(b.pick(&mut Selection::new(), &ctx(&views)), Some(second as usize));
        }
    }

    #[test]
    fn gives_up_after_20_draws() {
        for two in [false, true] {
            let mut b = random(&[1_000_000, 1, 1], two);
            let mut views = usable(3);
            views[0].usable = false;
            let mut sel = Selection::new();
            assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(1), "round robin's first");
            assert!(sel.tries > 20);
            assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(2));
            assert_eq!(b.pick(&mut sel, &ctx(&views)), None);
        }
    }

    #[test]
    fn fewer_than_two_peers_is_round_robin() {
        let mut b = random(&[5], true);
        assert_eq!(b.pick(&mut Selection::new(), &ctx(&usable(1))), Some(0));
    }
}
