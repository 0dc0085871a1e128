//! `hash KEY` and `hash KEY consistent` (`ngx_http_upstream_hash_module.c`), with nginx's CRC32
//! (IEEE, as `ngx_crc32_short`/`ngx_crc32_long`).
//!
//! Plain `hash` is Cache::Memcached's: each round hashes `[ROUND] KEY` (the round number in
//! decimal, left out in round 0), adds `(crc32 >> 16) & 0x7fff` to a running sum, and the sum
//! modulo the total weight falls on a peer by weight; a peer that cannot be used means another
//! round. A request's retries continue the same rounds.
//!
//! `consistent` is Cache::Memcached::Fast's ketama ring: each peer puts `160 * weight` points at
//! `crc32(HOST "\0" PORT PREV)` where HOST and PORT come from the `server` text and PREV is the
//! previous point's hash as four little-endian bytes (zero for the first). The key's `crc32` finds
//! the first point at or after it (wrapping to the first point); the peers with that point's
//! `server` text share it by smooth round robin; if none can be used the next point is tried.
//!
//! Both give up after more than 20 misses, and an empty key or fewer than two peers means round
//! robin.

use super::{Balancer, PeerInfo, PickCtx, Selection, available, round_robin};

/// One point of the consistent hash ring, owned by a `server` text (its first peer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Point {
    pub(super) hash: u32,
    pub(super) group: usize,
}

pub(super) fn pick(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
    if sel.tries > 20 || b.primary.members.len() < 2 || ctx.key.is_empty() {
        return round_robin::pick(b, sel, ctx);
    }
    loop {
        let mut crc = Crc32::new();
        if sel.rehash > 0 {
            let mut buf = [0u8; 10];
            crc.update(decimal(sel.rehash, &mut buf));
        }
        crc.update(ctx.key);
        sel.hash = sel.hash.wrapping_add((crc.finish() >> 16) & 0x7fff);
        sel.rehash += 1;
        let i = b.by_weight(u64::from(sel.hash) % b.primary.total_weight);
        if available(&b.peers, sel, ctx, i) {
            sel.tried.insert(i);
            return Some(i);
        }
        sel.tries += 1;
        if sel.tries > 20 {
            return round_robin::pick(b, sel, ctx);
        }
    }
}

pub(super) fn pick_consistent(b: &mut Balancer, sel: &mut Selection, ctx: &PickCtx) -> Option<usize> {
    if sel.tries > 20 || b.primary.members.len() < 2 || ctx.key.is_empty() || b.ring.is_empty() {
        return round_robin::pick(b, sel, ctx);
    }
    let ring_len = b.ring.len();
    let mut point = *sel.point.get_or_insert_with(|| find_point(&b.ring, crc32(ctx.key)));
    loop {
        let group = b.ring[point % ring_len].group;
        let peers = &b.peers;
        let group_of = &b.group;
        let owners = b.primary.members.iter().copied().filter(|&i| group_of[i] == group);
        let candidates = owners.filter(|&i| available(peers, sel, ctx, i));
        if let Some(i) = round_robin::smooth(&mut b.wrr, peers, candidates) {
            sel.tried.insert(i);
            return Some(i);
        }
        point += 1;
        sel.point = Some(point);
        sel.tries += 1;
        if sel.tries > 20 {
            return round_robin::pick(b, sel, ctx);
        }
    }
}

/// The ring for the primary peers: points sorted by hash, one kept per hash value.
pub(super) fn build_ring(peers: &[PeerInfo], members: &[usize], group: &[usize]) -> Vec<Point> {
    let mut ring = Vec::new();
    for &i in members {
        let (host, port) = split_server(&peers[i].server);
        let mut base = Crc32::new();
        base.update(host);
        base.update(&[0]);
        base.update(port);
        let mut prev = 0u32;
        for _ in 0..u64::from(peers[i].weight) * 160 {
            let mut crc = base;
            crc.update(&prev.to_le_bytes());
            prev = crc.finish();
            ring.push(Point { hash: prev, group: group[i] });
        }
    }
    // Stable, so of equal hashes the earliest peer's point survives.
    ring.sort_by_key(|p| p.hash);
    ring.dedup_by_key(|p| p.hash);
    ring
}

/// HOST and PORT as nginx splits a `server` text: after a "unix:" prefix everything is the host;
/// otherwise the digits after the last ':' are the port, if the text ends in them.
fn split_server(server: &str) -> (&[u8], &[u8]) {
    let s = server.as_bytes();
    if s.len() >= 5 && s[..5].eq_ignore_ascii_case(b"unix:") {
        return (&s[5..], b"");
    }
    let digits = s.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    match s.len().checked_sub(digits + 1) {
        Some(colon) if s[colon] == b':' => (&s[..colon], &s[colon + 1..]),
        _ => (s, b""),
    }
}

/// The first point whose hash is at or above `hash`, as nginx's binary search finds it; the ring's
/// length when there is none (the caller wraps to the first point).
fn find_point(ring: &[Point], hash: u32) -> usize {
    let (mut i, mut j) = (0, ring.len());
    while i < j {
        let k = (i + j) / 2;
        match hash.cmp(&ring[k].hash) {
            std::cmp::Ordering::Greater => i = k + 1,
            std::cmp::Ordering::Less => j = k,
            std::cmp::Ordering::Equal => return k,
        }
    }
    i
}

fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), in nginx's init/update/final steps:
/// ketama needs the state between updates.
#[derive(Clone, Copy, Debug)]
pub(super) struct Crc32(u32);

const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut n = 0;
    while n < 256 {
        let mut c = n as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[n] = c;
        n += 1;
    }
    table
};

impl Crc32 {
    pub(super) fn new() -> Crc32 {
        Crc32(0xffff_ffff)
    }

    pub(super) fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = CRC_TABLE[((self.0 ^ u32::from(b)) & 0xff) as usize] ^ (self.0 >> 8);
        }
    }

    pub(super) fn finish(self) -> u32 {
        self.0 ^ 0xffff_ffff
    }
}

pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{ctx, usable, weighted};
    use super::super::{Balancer, Method, PeerInfo, PeerView, PickCtx, Selection};
    use super::*;

    /// Bit by bit, no table: an independent check of the table-driven CRC.
    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = (c >> 1) ^ (0xedb8_8320 & (c & 1).wrapping_neg());
            }
        }
        !c
    }

    fn local(spec: &[(u16, u32)]) -> Vec<PeerInfo> {
        spec.iter().map(|&(port, w)| PeerInfo { weight: w, ..PeerInfo::new(format!("127.0.0.1:{port}")) }).collect()
    }

    fn pick_key(b: &mut Balancer, views: &[PeerView], key: &str) -> Option<usize> {
        b.pick(&mut Selection::new(), &PickCtx { peers: views, client: None, key: key.as_bytes() })
    }

    /// Keys "0".."63" through `b`, as the digits nginx answered with (port 1900N answers "N").
    fn digits(b: &mut Balancer, views: &[PeerView]) -> String {
        (0..64).map(|k| char::from(b'1' + pick_key(b, views, &k.to_string()).unwrap() as u8)).collect()
    }

    /// Keys as `$arg_k` holds them (not URL-decoded), in the order nginx was asked.
    fn words(b: &mut Balancer, views: &[PeerView]) -> String {
        ["abc", "/index.html", "user:42", "127.0.0.1", "hello%20world", "a%2Fb"]
            .iter()
            .map(|k| char::from(b'1' + pick_key(b, views, k).unwrap() as u8))
            .collect()
    }

    #[test]
    fn crc32_is_ieee() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        for s in [&b"hello"[..], b"1hello", b"127.0.0.1\x008080\0\0\0\0", &[0xff; 300]] {
            assert_eq!(crc32(s), crc32_bitwise(s));
        }
        let mut split = Crc32::new();
        split.update(b"12345");
        split.update(b"6789");
        assert_eq!(split.finish(), 0xcbf4_3926);
    }

    #[test]
    fn ketama_points_for_one_server() {
        // crc32("127.0.0.1" "\0" "8080" PREV), PREV the previous point little-endian, from 0;
        // the values are Python's zlib.crc32 over those bytes.
        let mut prev = 0u32;
        let mut points = vec![];
        for _ in 0..160 {
            let mut bytes = b"127.0.0.1\x008080".to_vec();
            bytes.extend_from_slice(&prev.to_le_bytes());
            prev = crc32_bitwise(&bytes);
            points.push(prev);
        }
        assert_eq!(points[..4], [0x6dca_9547, 0x92c7_adf9, 0xddbe_b1b8, 0xf3b4_4a4a]);
        assert_eq!(points[159], 0x24b9_6112);

        let peers = vec![PeerInfo::new("127.0.0.1:8080")];
        let ring = build_ring(&peers, &[0], &[0]);
        let mut sorted = points.clone();
        sorted.sort_unstable();
        assert_eq!(ring.iter().map(|p| p.hash).collect::<Vec<_>>(), sorted);
        assert_eq!((ring[0].hash, ring[159].hash), (0x0196_cf25, 0xffa9_4421));
    }

    #[test]
    fn ketama_host_and_port_split() {
        assert_eq!(split_server("127.0.0.1:8080"), (&b"127.0.0.1"[..], &b"8080"[..]));
        assert_eq!(split_server("[::1]:80"), (&b"[::1]"[..], &b"80"[..]));
        assert_eq!(split_server("backend.example.com"), (&b"backend.example.com"[..], &b""[..]));
        assert_eq!(split_server("10.0.0.1"), (&b"10.0.0.1"[..], &b""[..]));
        assert_eq!(split_server("UNIX:/run/a:80"), (&b"/run/a:80"[..], &b""[..]));
        assert_eq!(split_server("8080"), (&b"8080"[..], &b""[..]));
        let first = |s: &str| build_ring(&[PeerInfo::new(s)], &[0], &[0]).iter().any(|p| p.hash == 0xcd54_165b);
        assert!(first("unix:unix_sock_path"), "crc32(\"unix_sock_path\\0\" 00000000)");
        let named = build_ring(&[PeerInfo::new("backend.example.com")], &[0], &[0]);
        assert!(named.iter().any(|p| p.hash == 0x4612_7ded));
    }

    #[test]
    fn ketama_weight_multiplies_points() {
        let ring = build_ring(&local(&[(1, 3), (2, 1)]), &[0, 1], &[0, 1]);
        assert_eq!(ring.len(), 640);
        assert_eq!(ring.iter().filter(|p| p.group == 0).count(), 480);
        assert!(ring.windows(2).all(|w| w[0].hash < w[1].hash));
    }

    #[test]
    fn consistent_matches_nginx() {
        // nginx 1.22.1, `hash $arg_k consistent`, keys "0".."63".
        let mut b =
            Balancer::new(Method::Hash { consistent: true }, local(&[(19001, 1), (19002, 1), (19003, 1), (19004, 1)]))
                .unwrap();
        let views = usable(4);
        assert_eq!(digits(&mut b, &views), "3144243341443334333411211433421411423131141413431144432424414333");
        assert_eq!(words(&mut b, &views), "432114");

        // The same with :19003 down: its keys move on round the ring, no other key moves.
        let mut peers = local(&[(19001, 1), (19002, 1), (19003, 1), (19004, 1)]);
        peers[2].down = true;
        let mut b = Balancer::new(Method::Hash { consistent: true }, peers).unwrap();
        assert_eq!(digits(&mut b, &views), "4144241241441224421411211424421411422141141412421144442424414112");

        let mut b =
            Balancer::new(Method::Hash { consistent: true }, local(&[(19001, 3), (19002, 1), (19003, 2)])).unwrap();
        assert_eq!(digits(&mut b, &usable(3)), "3131311111113331313211211133131131113331131133211131112122311131");
    }

    #[test]
    fn plain_hash_matches_nginx() {
        // nginx 1.22.1, `hash $arg_k`, keys "0".."63".
        let mut b =
            Balancer::new(Method::Hash { consistent: false }, local(&[(19001, 1), (19002, 1), (19003, 1), (19004, 1)]))
                .unwrap();
        let views = usable(4);
        assert_eq!(digits(&mut b, &views), "4123321414234114323214322341414123321414321441232323411432321432");
        assert_eq!(words(&mut b, &views), "134441");

        // Weighted, with a down peer whose keys go another round.
        let mut peers = local(&[(19001, 3), (19002, 1), (19003, 2)]);
        peers[1].down = true;
        let mut b = Balancer::new(Method::Hash { consistent: false }, peers).unwrap();
        assert_eq!(digits(&mut b, &usable(3)), "3333111113113111133111333313113311113131111331113311131313111113");
    }

    #[test]
    fn plain_hash_rounds() {
        // Round 0 hashes "hello", round 1 "1hello"; the sum of the 15-bit parts picks the peer.
        let r0 = (0x3610_a686u32 >> 16) & 0x7fff;
        let r1 = (0x8ed6_2430u32 >> 16) & 0x7fff;
        assert_eq!((crc32(b"hello"), crc32(b"1hello")), (0x3610_a686, 0x8ed6_2430));
        let total = 7u32;
        let weights = weighted(&[1; 7]);
        let mut b = Balancer::new(Method::Hash { consistent: false }, weights).unwrap();
        let mut views = usable(7);
        let first = (r0 % total) as usize;
        assert_eq!(pick_key(&mut b, &views, "hello"), Some(first));
        views[first].usable = false;
        let second = ((r0 + r1) % total) as usize;
        assert_ne!(first, second);
        assert_eq!(pick_key(&mut b, &views, "hello"), Some(second));
        assert_eq!(decimal(0, &mut [0; 10]), b"0");
        assert_eq!(decimal(u32::MAX, &mut [0; 10]), b"4294967295");
    }

    #[test]
    fn same_key_same_peer() {
        for consistent in [false, true] {
            let mut b = Balancer::new(Method::Hash { consistent }, weighted(&[1, 2, 3, 1, 1])).unwrap();
            let views = usable(5);
            for k in 0..200 {
                let key = format!("/static/{k}.css");
                let first = pick_key(&mut b, &views, &key);
                assert!((0..5).all(|_| pick_key(&mut b, &views, &key) == first));
            }
        }
    }

    #[test]
    fn retry_is_where_an_unusable_peer_would_send_it() {
        for consistent in [false, true] {
            let mut b = Balancer::new(Method::Hash { consistent }, weighted(&[1, 1, 2, 1, 1])).unwrap();
            let views = usable(5);
            for k in 0..100 {
                let key = format!("k{k}");
                let ctx = PickCtx { peers: &views, client: None, key: key.as_bytes() };
                let mut sel = Selection::new();
                let first = b.pick(&mut sel, &ctx).unwrap();
                let second = b.pick(&mut sel, &ctx).unwrap();
                assert_ne!(first, second);
                let mut without = views.clone();
                without[first].usable = false;
                assert_eq!(pick_key(&mut b, &without, &key), Some(second), "{key} consistent={consistent}");
            }
        }
    }

    #[test]
    fn removing_one_of_five_moves_only_its_keys() {
        let all = weighted(&[1; 5]);
        let mut four = all.clone();
        four.remove(2);
        let mut b5 = Balancer::new(Method::Hash { consistent: true }, all.clone()).unwrap();
        let mut b4 = Balancer::new(Method::Hash { consistent: true }, four.clone()).unwrap();
        let (v5, v4) = (usable(5), usable(4));
        let mut moved = 0;
        for k in 0..10_000 {
            let key = format!("/img/{k}.png");
            let before = &all[pick_key(&mut b5, &v5, &key).unwrap()].server;
            let after = &four[pick_key(&mut b4, &v4, &key).unwrap()].server;
            if before == &all[2].server {
                moved += 1;
            } else {
                assert_eq!(before, after, "{key}");
            }
        }
        assert!((1_300..=2_700).contains(&moved), "{moved} of 10000 were on the removed peer");
    }

    #[test]
    fn addresses_of_one_server_share_its_points() {
        // `server backend:80` resolving to two addresses: two peers, one set of points.
        let mut peers = vec![PeerInfo::new("backend:80"), PeerInfo::new("backend:80"), PeerInfo::new("other:80")];
        peers[2].weight = 2;
        let mut b = Balancer::new(Method::Hash { consistent: true }, peers).unwrap();
        assert_eq!(b.ring.len(), 160 + 320);
        let views = usable(3);
        let key = (0..).map(|k| format!("{k}")).find(|k| pick_key(&mut b, &views, k) != Some(2)).unwrap();
        let seq: Vec<_> = (0..4).filter_map(|_| pick_key(&mut b, &views, &key)).collect();
        assert!(seq == [0, 1, 0, 1] || seq == [1, 0, 1, 0], "{seq:?}");
    }

    #[test]
    fn ring_wraps_around() {
        let b = Balancer::new(Method::Hash { consistent: true }, weighted(&[1, 1, 1])).unwrap();
        let ring = &b.ring;
        let last = ring[ring.len() - 1].hash;
        assert_eq!(find_point(ring, 0), 0);
        assert_eq!(find_point(ring, ring[5].hash), 5);
        assert_eq!(find_point(ring, ring[5].hash + 1), 6);
        assert_eq!(find_point(ring, last), ring.len() - 1);
        assert_eq!(find_point(ring, u32::MAX), if last == u32::MAX { ring.len() - 1 } else { ring.len() });

        let mut b = b;
        let key = (0..).map(|k| format!("w{k}")).find(|k| crc32(k.as_bytes()) > last).unwrap();
        let owner = b.ring[0].group;
        assert_eq!(pick_key(&mut b, &usable(3), &key), Some(owner));
    }

    #[test]
    fn empty_key_is_round_robin() {
        // nginx 1.22.1 answered 2 3 4 1 2 3 4 1 to `?k=` after a request to :19001.
        for consistent in [false, true] {
            let mut b = Balancer::new(Method::Hash { consistent }, weighted(&[1, 1, 1, 1])).unwrap();
            let views = usable(4);
            let seq: Vec<_> = (0..8).filter_map(|_| b.pick(&mut Selection::new(), &ctx(&views))).collect();
            assert_eq!(seq, [0, 1, 2, 3, 0, 1, 2, 3]);
        }
    }

    #[test]
    fn gives_up_hashing_after_20_misses() {
        for consistent in [false, true] {
            // Only peer 1 is usable and only round robin will find it when peer 0 takes
            // (nearly) every hash; look for a key whose 21 probes all miss.
            let mut b = Balancer::new(Method::Hash { consistent }, weighted(&[60, 1])).unwrap();
            let mut views = usable(2);
            views[0].usable = false;
            let mut found = false;
            for k in 0..2000 {
                let key = format!("{k}");
                let ctx = PickCtx { peers: &views, client: None, key: key.as_bytes() };
                let mut sel = Selection::new();
                assert_eq!(b.pick(&mut sel, &ctx), Some(1));
                if sel.tries > 20 {
                    found = true;
                    assert_eq!(b.pick(&mut sel, &ctx), None);
                    break;
                }
            }
            assert!(found, "consistent={consistent}");
        }
    }
}
