//! `least_conn` (`ngx_http_upstream_get_least_conn_peer`): the peer with the fewest active
//! connections per unit of weight (compared as `conns_a * weight_b < conns_b * weight_a`, no
//! division), ties settled by a smooth weighted round robin among the tied peers only. Backups and
//! a lone server behave as under round robin.

use super::round_robin::smooth;
use super::{Balancer, PickCtx, Selection, available};

pub(super) fn pick(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
    if b.is_single() {
        return super::round_robin::pick(b, sel, ctx);
    }
    loop {
        let tier = if sel.on_backup { b.backup.as_ref()? } else { &b.primary };
        let members = &tier.members;
        // (position in members, peer) of the least loaded; `many` when another ties with it.
        let mut best: Option<(usize, usize)> = None;
        let mut many = false;
        for (pos, &i) in members.iter().enumerate() {
            if !available(&b.peers, sel, ctx, i) {
                continue;
            }
            match best {
                None => best = Some((pos, i)),
                Some((_, bi)) => {
                    let (lhs, rhs) = (ctx.conns(i) * b.weight(bi), ctx.conns(bi) * b.weight(i));
                    if lhs < rhs {
                        best = Some((pos, i));
                        many = false;
                    } else if lhs == rhs {
                        many = true;
                    }
                }
            }
        }
        let Some((pos, bi)) = best else {
            if sel.on_backup || b.backup.is_none() {
                return None;
            }
            sel.on_backup = true;
            continue;
        };
        let chosen = if many {
            // nginx restarts from the first least loaded peer, which therefore takes part too.
            let peers = &b.peers;
            let w = |i: usize| u64::from(peers[i].weight);
            let ratio = |i: usize| ctx.conns(i) * w(bi) == ctx.conns(bi) * w(i);
            let tied = members[pos..].iter().copied().filter(|&i| available(peers, sel, ctx, i) && ratio(i));
            smooth(&mut b.wrr, peers, tied).unwrap_or(bi)
        } else {
            bi
        };
        sel.tried.insert(chosen);
        return Some(chosen);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ctx, picks, usable, weighted};
    use super::super::{Balancer, Method, PeerView, Selection};

    fn lc(weights: &[u32]) -> Balancer {
        Balancer::new(Method::LeastConn, weighted(weights)).unwrap()
    }

    fn loaded(conns: &[u32]) -> Vec<PeerView> {
        conns.iter().map(|&c| PeerView { usable: true, conns: c }).collect()
    }

    #[test]
    fn fewest_connections_win() {
        let mut b = lc(&[1, 1, 1]);
        assert_eq!(picks(&mut b, &loaded(&[3, 1, 2]), 5), [1; 5]);
    }

    #[test]
    fn connections_are_weighed() {
        // 2/1 against 3/3: the heavier peer is less loaded.
        let mut b = lc(&[1, 3]);
        assert_eq!(picks(&mut b, &loaded(&[2, 3]), 3), [1; 3]);
        // 2/1 against 7/3: now the lighter one.
        assert_eq!(picks(&mut b, &loaded(&[2, 7]), 3), [0; 3]);
    }

    #[test]
    fn ties_follow_smooth_round_robin() {
        // As nginx 1.22.1 answered sequential (so always tied) requests.
        let mut b = lc(&[5, 1, 1]);
        assert_eq!(picks(&mut b, &usable(3), 14), [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn only_tied_peers_share_the_round_robin() {
        let mut b = lc(&[1, 1, 1]);
        assert_eq!(picks(&mut b, &loaded(&[1, 0, 0]), 6), [1, 2, 1, 2, 1, 2]);
        // Peer 0 took no part, so its round robin state did not move.
        assert_eq!(b.wrr[0].current, 0);
    }

    #[test]
    fn skips_tried_unusable_and_down() {
        let mut peers = weighted(&[1, 1, 1, 1]);
        peers[0].down = true;
        let mut b = Balancer::new(Method::LeastConn, peers).unwrap();
        let mut views = loaded(&[0, 0, 1, 2]);
        views[1].usable = false;
        let mut sel = Selection::new();
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(2));
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(3));
        assert_eq!(b.pick(&mut sel, &ctx(&views)), None);
    }

    #[test]
    fn backups_by_least_conn_too() {
        let mut peers = weighted(&[1, 1, 1, 1]);
        peers[2].backup = true;
        peers[3].backup = true;
        let mut b = Balancer::new(Method::LeastConn, peers).unwrap();
        let mut views = loaded(&[0, 0, 5, 1]);
        views[0].usable = false;
        views[1].usable = false;
        let mut sel = Selection::new();
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(3));
        assert_eq!(b.pick(&mut sel, &ctx(&views)), Some(2));
        assert_eq!(b.pick(&mut sel, &ctx(&views)), None);
    }

    #[test]
    fn lone_server_is_round_robin_single() {
        let mut b = lc(&[1]);
        let mut sel = Selection::new();
        assert_eq!(b.pick(&mut sel, &ctx(&loaded(&[9]))), Some(0));
        assert_eq!(b.pick(&mut sel, &ctx(&loaded(&[9]))), Some(0));
    }
}
