//! `ip_hash` (`ngx_http_upstream_get_ip_hash_peer`): the client's network picks the peer. The hash
//! starts at 89 and takes in the first three bytes of an IPv4 address (so a whole /24 shares a
//! peer) or all sixteen of an IPv6 one, each as `hash = (hash * 113 + byte) % 6271`; `hash % total
//! weight` then falls on a peer by weight. A peer that cannot be used sends the hash round again
//! from where it is; the request keeps its hash for retries. After more than 20 misses, or with
//! fewer than two peers, round robin decides.

use super::{Balancer, PickCtx, Selection, available, round_robin};

pub(super) fn pick(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
    if sel.tries > 20 || b.primary.members.len() < 2 {
        return round_robin::pick(b, sel, ctx);
    }
    let v4;
    let v6;
    let addr: &[u8] = match ctx.client {
        Some(std::net::IpAddr::V4(a)) => {
            v4 = a.octets();
            &v4[..3]
        }
        Some(std::net::IpAddr::V6(a)) => {
            v6 = a.octets();
            &v6
        }
        // nginx's pseudo address for clients without one (unix sockets): three zero bytes.
        None => &[0, 0, 0],
    };
    let mut hash = sel.ip_hash;
    loop {
        hash = step(hash, addr);
        let i = b.by_weight(u64::from(hash) % b.primary.total_weight);
        if available(&b.peers, sel, ctx, i) {
            sel.ip_hash = hash;
            sel.tried.insert(i);
            return Some(i);
        }
        sel.tries += 1;
        if sel.tries > 20 {
            return round_robin::pick(b, sel, ctx);
        }
    }
}

fn step(mut hash: u32, addr: &[u8]) -> u32 {
    for &byte in addr {
        hash = (hash * 113 + u32::from(byte)) % 6271;
    }
    hash
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::super::tests::{usable, weighted};
    use super::super::{Balancer, Method, PeerView, PickCtx, Selection};

    fn pick_for(b: &mut Balancer, views: &[PeerView], ip: &str) -> Option<usize> {
        let client: Option<IpAddr> = Some(ip.parse().unwrap());
        b.pick(&mut Selection::new(), &PickCtx { peers: views, client, key: b"" })
    }

    #[test]
    fn matches_nginx() {
        // nginx 1.22.1, `ip_hash; server :19001; server :19002; server :19003 weight=2;
        // server :19004 down;`, client addresses set through real_ip.
        let mut peers = weighted(&[1, 1, 2, 1]);
        peers[3].down = true;
        let mut b = Balancer::new(Method::IpHash, peers).unwrap();
        let views = usable(4);
        let ips = [
            "10.0.0.1",
            "10.0.0.200",
            "10.0.1.1",
            "10.0.2.1",
            "192.168.1.1",
            "192.168.2.1",
            "172.16.0.1",
            "8.8.8.8",
            "1.2.3.4",
            "203.0.113.9",
            "198.51.100.7",
            "100.64.3.3",
            "::1",
            "2001:db8::1",
            "2001:db8::2",
            "fe80::1",
            "::ffff:10.0.0.1",
        ];
        let nginx = "11232123232211231";
        for (ip, want) in ips.iter().zip(nginx.bytes()) {
            assert_eq!(pick_for(&mut b, &views, ip), Some(usize::from(want - b'1')), "{ip}");
        }
    }

    #[test]
    fn same_slash_24_same_peer_and_networks_spread() {
        let mut b = Balancer::new(Method::IpHash, weighted(&[1, 1, 1, 1])).unwrap();
        let views = usable(4);
        let mut counts = [0usize; 4];
        for net in 0..=255u8 {
            let first = pick_for(&mut b, &views, &format!("10.1.{net}.1")).unwrap();
            for host in [2, 77, 254] {
                assert_eq!(pick_for(&mut b, &views, &format!("10.1.{net}.{host}")), Some(first));
            }
            counts[first] += 1;
        }
        assert!(counts.iter().all(|&c| c > 40), "{counts:?}");
    }

    #[test]
    fn ipv6_uses_every_byte() {
        let mut b = Balancer::new(Method::IpHash, weighted(&[1, 1, 1, 1, 1, 1, 1])).unwrap();
        let views = usable(7);
        let got: std::collections::HashSet<_> =
            (1..=30).map(|n| pick_for(&mut b, &views, &format!("2001:db8::{n:x}")).unwrap()).collect();
        assert!(got.len() > 1);
    }

    #[test]
    fn unix_clients_hash_as_zero_address() {
        let mut b = Balancer::new(Method::IpHash, weighted(&[1, 1, 1])).unwrap();
        let views = usable(3);
        let unix = b.pick(&mut Selection::new(), &PickCtx { peers: &views, client: None, key: b"" });
        assert_eq!(unix, pick_for(&mut b, &views, "0.0.0.9"));
    }

    #[test]
    fn retry_continues_the_hash_sequence() {
        // The second pick of a request is where the first would have gone had its peer been
        // unusable: one hash sequence per client, whichever way a peer drops out.
        let mut b = Balancer::new(Method::IpHash, weighted(&[1, 2, 1, 3])).unwrap();
        let views = usable(4);
        for n in 0..50u8 {
            let client = Some(IpAddr::from([192, 0, n, 1]));
            let mut sel = Selection::new();
            let first = b.pick(&mut sel, &PickCtx { peers: &views, client, key: b"" }).unwrap();
            let second = b.pick(&mut sel, &PickCtx { peers: &views, client, key: b"" }).unwrap();
            assert_ne!(first, second);
            let mut without = views.clone();
            without[first].usable = false;
            let again = b.pick(&mut Selection::new(), &PickCtx { peers: &without, client, key: b"" });
            assert_eq!(again, Some(second));
        }
    }

    #[test]
    fn falls_back_to_round_robin_after_20_misses() {
        // Peer 0 covers 1000 of 1002 hash values and is unusable: find a client whose first 21
        // hashes all land on it (computed here independently), so only round robin reaches 1 or 2.
        let mut b = Balancer::new(Method::IpHash, weighted(&[1000, 1, 1])).unwrap();
        let mut views = usable(3);
        views[0].usable = false;
        let misses = |a: [u8; 3]| {
            let mut h = 89u32;
            (0..21).all(|_| {
                for x in a {
                    h = (h * 113 + u32::from(x)) % 6271;
                }
                h % 1002 < 1000
            })
        };
        let net = (0..=255u8).map(|n| [172, 16, n]).find(|&a| misses(a)).unwrap();
        let client = Some(IpAddr::from([net[0], net[1], net[2], 1]));
        let mut sel = Selection::new();
        let ctx = PickCtx { peers: &views, client, key: b"" };
        assert_eq!(b.pick(&mut sel, &ctx), Some(1), "round robin: first of the tied");
        assert_eq!(sel.tries, 21);
        assert_eq!(b.pick(&mut sel, &ctx), Some(2), "and round robin from then on");
        assert_eq!(b.pick(&mut sel, &ctx), None);
    }

    #[test]
    fn fewer_than_two_peers_is_round_robin() {
        let mut b = Balancer::new(Method::IpHash, weighted(&[1])).unwrap();
        assert_eq!(pick_for(&mut b, &usable(1), "10.0.0.1"), Some(0));
    }
}
