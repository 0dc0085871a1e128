//! `allow`/`deny` rules: parsing as nginx's `ngx_ptocidr` (with its own
//! address parsers, `ngx_inet_addr` and `ngx_inet6_addr`, ported here
//! because they accept what `std::net` does not and the other way round:
//! `1..2.3` is 1.0.2.3 to nginx, `255.255.255.255` is refused) and
//! matching as ngx_http_access_module: one list per address family, in
//! file order, the first rule that matches decides.

use std::net::IpAddr;

/// What a rule applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `all`: every family.
    All,
    /// `unix:`: clients on a UNIX-domain socket.
    Unix,
    V4 {
        addr: u32,
        mask: u32,
    },
    V6 {
        addr: [u8; 16],
        mask: [u8; 16],
    },
}

/// A parsed rule argument.
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    pub target: Target,
    /// `10.0.0.1/8`: nginx masks the address and warns.
    pub low_bits_set: bool,
}

/// A level's rules, split by family as nginx keeps them (`all` is in
/// each list); `deny` is the boolean.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    v4: Vec<(u32, u32, bool)>,
    v6: Vec<([u8; 16], [u8; 16], bool)>,
    unix: Vec<bool>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty() && self.unix.is_empty()
    }

    pub fn push(&mut self, t: Target, deny: bool) {
        match t {
            Target::All => {
                self.v4.push((0, 0, deny));
                self.v6.push(([0; 16], [0; 16], deny));
                self.unix.push(deny);
            }
            Target::Unix => self.unix.push(deny),
            Target::V4 { addr, mask } => self.v4.push((addr, mask, deny)),
            Target::V6 { addr, mask } => self.v6.push((addr, mask, deny)),
        }
    }

    /// The first matching rule's verdict for a TCP client: Some(true) to
    /// deny, Some(false) to allow, None when no rule speaks (nginx's
    /// NGX_DECLINED). An IPv4-mapped IPv6 address is checked against the
    /// IPv4 rules when the level has any, as nginx does.
    pub fn check(&self, ip: IpAddr) -> Option<bool> {
        match ip {
            IpAddr::V4(a) => self.check_v4(u32::from(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) if !self.v4.is_empty() => self.check_v4(u32::from(v4)),
                _ => {
                    let o = a.octets();
                    self.v6
                        .iter()
                        .find(|(addr, mask, _)| (0..16).all(|i| o[i] & mask[i] == addr[i]))
                        .map(|&(_, _, deny)| deny)
                }
            },
        }
    }

    /// A client on a UNIX-domain socket: the first `unix:` or `all` rule.
    pub fn check_unix(&self) -> Option<bool> {
        self.unix.first().copied()
    }

    fn check_v4(&self, a: u32) -> Option<bool> {
        self.v4.iter().find(|(addr, mask, _)| a & mask == *addr).map(|&(_, _, deny)| deny)
    }
}

/// A rule's argument: `all`, `unix:`, `ADDR` or `ADDR/BITS`. None is
/// nginx's `invalid parameter`.
pub fn parse(text: &str) -> Option<Parsed> {
    match text {
        "all" => return Some(Parsed { target: Target::All, low_bits_set: false }),
        "unix:" => return Some(Parsed { target: Target::Unix, low_bits_set: false }),
        _ => {}
    }
    let b = text.as_bytes();
    let (addr, bits) = match b.iter().position(|&c| c == b'/') {
        Some(i) => (&b[..i], Some(&b[i + 1..])),
        None => (b, None),
    };
    if let Some(a) = inet_addr(addr) {
        let Some(bits) = bits else {
            return Some(Parsed { target: Target::V4 { addr: a, mask: u32::MAX }, low_bits_set: false });
        };
        let shift = atoi(bits).filter(|&s| s <= 32)?;
        let mask = if shift == 0 { 0 } else { u32::MAX << (32 - shift) };
        return Some(Parsed { target: Target::V4 { addr: a & mask, mask }, low_bits_set: a & mask != a });
    }
    let mut a = inet6_addr(addr)?;
    let Some(bits) = bits else {
        return Some(Parsed { target: Target::V6 { addr: a, mask: [0xff; 16] }, low_bits_set: false });
    };
    let mut shift = atoi(bits).filter(|&s| s <= 128)?;
    let mut mask = [0u8; 16];
    let mut low = false;
    for i in 0..16 {
        let s = shift.min(8);
        shift -= s;
        mask[i] = (0xffu32 << (8 - s)) as u8;
        if a[i] & mask[i] != a[i] {
            low = true;
            a[i] &= mask[i];
        }
    }
    Some(Parsed { target: Target::V6 { addr: a, mask }, low_bits_set: low })
}

/// ngx_atoi: decimal digits only, at least one.
fn atoi(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    b.iter().try_fold(0u32, |n, &c| n.checked_mul(10)?.checked_add(u32::from(c - b'0')))
}

/// ngx_inet_addr: exactly four dot-separated decimal octets (an empty
/// one counts as 0), in host order. `255.255.255.255` is INADDR_NONE to
/// nginx, so refused here too.
pub fn inet_addr(b: &[u8]) -> Option<u32> {
    let mut addr: u32 = 0;
    let mut octet: u32 = 0;
    let mut dots = 0;
    for &c in b {
        match c {
            b'0'..=b'9' => {
                octet = octet * 10 + u32::from(c - b'0');
                if octet > 255 {
                    return None;
                }
            }
            b'.' => {
                addr = (addr << 8).wrapping_add(octet);
                octet = 0;
                dots += 1;
            }
            _ => return None,
        }
    }
    if dots != 3 {
        return None;
    }
    let a = (addr << 8).wrapping_add(octet);
    (a != u32::MAX).then_some(a)
}

/// ngx_inet6_addr: eight groups of up to four hex digits, one `::`, an
/// IPv4 tail in place of the last two groups.
pub fn inet6_addr(b: &[u8]) -> Option<[u8; 16]> {
    let mut out = [0u8; 16];
    let mut p = b;
    if p.is_empty() {
        return None;
    }
    if p[0] == b':' {
        p = &p[1..];
    }
    let mut at = 0usize; // next byte of `out` to write
    let mut zero: Option<usize> = None;
    let mut digit: Option<usize> = None; // start of the current group in `p`
    let mut nibbles = 0;
    let mut word: u32 = 0;
    let mut n = 8;
    let mut i = 0;
    while i < p.len() {
        let c = p[i];
        i += 1;
        if c == b':' {
            if nibbles > 0 {
                digit = Some(i);
                if at + 2 > 16 {
                    return None;
                }
                out[at] = (word >> 8) as u8;
                out[at + 1] = word as u8;
                at += 2;
                n -= 1;
                if n > 0 {
                    nibbles = 0;
                    word = 0;
                    continue;
                }
            } else if zero.is_none() {
                digit = Some(i);
                zero = Some(at);
                continue;
            }
            return None;
        }
        if c == b'.' && nibbles > 0 {
            let start = digit?;
            if n < 2 {
                return None;
            }
            let v4 = inet_addr(&p[start..])?;
            if at + 2 > 16 {
                return None;
            }
            out[at] = (v4 >> 24) as u8;
            out[at + 1] = (v4 >> 16) as u8;
            at += 2;
            n -= 1;
            word = v4 & 0xffff;
            nibbles = 1;
            break;
        }
        nibbles += 1;
        if nibbles > 4 {
            return None;
        }
        let v = match c {
            b'0'..=b'9' => c - b'0',
            _ => match c | 0x20 {
                l @ b'a'..=b'f' => l - b'a' + 10,
                _ => return None,
            },
        };
        word = word * 16 + u32::from(v);
    }
    if nibbles == 0 && zero.is_none() {
        return None;
    }
    if at + 2 > 16 {
        return None;
    }
    out[at] = (word >> 8) as u8;
    out[at + 1] = word as u8;
    at += 2;
    n -= 1;
    if n > 0 {
        let z = zero?;
        // Move what follows `::` to the end, zeros in between.
        let gap = n * 2;
        let tail = at - z;
        out.copy_within(z..z + tail, z + gap);
        out[z..z + gap].fill(0);
        return Some(out);
    }
    zero.is_none().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Option<std::net::Ipv6Addr> {
        inet6_addr(s.as_bytes()).map(std::net::Ipv6Addr::from)
    }

    #[test]
    fn ipv4_as_nginx_reads_it() {
        assert_eq!(inet_addr(b"127.0.0.1"), Some(0x7f000001));
        assert_eq!(inet_addr(b"1..2.3"), Some(0x01000203));
        assert_eq!(inet_addr(b"255.255.255.255"), None);
        assert_eq!(inet_addr(b"1.2.3"), None);
        assert_eq!(inet_addr(b"1.2.3.256"), None);
        assert_eq!(inet_addr(b"1.2.3.4."), None);
    }

    #[test]
    fn ipv6_as_nginx_reads_it() {
        assert_eq!(v6("::1"), Some("::1".parse().unwrap()));
        assert_eq!(v6("::"), Some("::".parse().unwrap()));
        assert_eq!(v6("fe80::1:2"), Some("fe80::1:2".parse().unwrap()));
        assert_eq!(v6("2001:db8::"), Some("2001:db8::".parse().unwrap()));
        assert_eq!(v6("::ffff:127.0.0.1"), Some("::ffff:127.0.0.1".parse().unwrap()));
        assert_eq!(v6("1:2:3:4:5:6:7:8"), Some("1:2:3:4:5:6:7:8".parse().unwrap()));
        assert_eq!(v6("1:2:3:4:5:6:1.2.3.4"), Some("1:2:3:4:5:6:102:304".parse().unwrap()));
        assert_eq!(v6("1:2:3:4:5:6:7:8:9"), None);
        assert_eq!(v6("1::2::3"), None);
        assert_eq!(v6("12345::"), None);
        assert_eq!(v6("1:2:3"), None);
        assert_eq!(v6("g::"), None);
        assert_eq!(v6(""), None);
    }

    #[test]
    fn cidr_masks_and_flags_low_bits() {
        let p = parse("10.0.0.1/8").unwrap();
        assert_eq!(p.target, Target::V4 { addr: 0x0a000000, mask: 0xff000000 });
        assert!(p.low_bits_set);
        assert!(!parse("10.0.0.0/8").unwrap().low_bits_set);
        assert_eq!(parse("0.0.0.0/0").unwrap().target, Target::V4 { addr: 0, mask: 0 });
        assert!(parse("10.0.0.0/33").is_none());
        assert!(parse("10.0.0.0/").is_none());
        assert!(parse("::1/129").is_none());
        assert!(parse("2001:db8::1/32").unwrap().low_bits_set);
        assert!(parse("example.com").is_none());
    }

    #[test]
    fn first_match_per_family() {
        let mut r = Rules::default();
        r.push(parse("127.0.0.1").unwrap().target, true);
        r.push(parse("127.0.0.0/8").unwrap().target, false);
        r.push(Target::All, true);
        assert_eq!(r.check("127.0.0.1".parse().unwrap()), Some(true));
        assert_eq!(r.check("127.0.0.2".parse().unwrap()), Some(false));
        assert_eq!(r.check("10.0.0.1".parse().unwrap()), Some(true));
        assert_eq!(r.check("::ffff:127.0.0.2".parse().unwrap()), Some(false));
        assert_eq!(r.check("::1".parse().unwrap()), Some(true));
        let mut only6 = Rules::default();
        only6.push(parse("::ffff:0:0/96").unwrap().target, true);
        assert_eq!(only6.check("::ffff:1.2.3.4".parse().unwrap()), Some(true));
        assert_eq!(only6.check("1.2.3.4".parse().unwrap()), None);
    }
}
