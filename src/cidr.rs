//! Address ranges as nginx writes them (`192.168.0.0/16`, `2001:db8::/32`,
//! a bare address, `unix:`), parsed with `ngx_ptocidr`'s rules (and
//! nginx's own address parsers, which accept what `std::net` does not and
//! the other way round: `1..2.3` is 1.0.2.3, `255.255.255.255` is refused)
//! and matched
//! with `ngx_cidr_match`'s: an IPv4-mapped IPv6 client address
//! (`::ffff:10.0.0.1`, what a dual-stack listener reports for an IPv4
//! client) is matched against the IPv4 ranges. Shared by the modules that
//! trust or refuse clients by address (`allow`/`deny`, `set_real_ip_from`,
//! `geo`, purge lists).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cidr {
    V4 {
        addr: u32,
        mask: u32,
    },
    V6 {
        addr: u128,
        mask: u128,
    },
    /// `unix:`: every unix-domain client (`listen unix:PATH`); it matches
    /// no address, the callers test for such a client apart.
    Unix,
}

/// A parsed range, and whether address bits below the mask were set
/// (nginx warns "low address bits of ... are meaningless" and masks them).
pub struct Parsed {
    pub cidr: Cidr,
    pub low_bits_set: bool,
}

impl Cidr {
    /// `ADDR`, `ADDR/BITS` or `unix:`, read as nginx's `ngx_ptocidr`
    /// reads them; None for anything else (the caller words nginx's
    /// `invalid parameter` message).
    pub fn parse(text: &str) -> Option<Parsed> {
        if text == "unix:" {
            return Some(Parsed { cidr: Cidr::Unix, low_bits_set: false });
        }
        let b = text.as_bytes();
        let (addr, bits) = match b.iter().position(|&c| c == b'/') {
            Some(i) => (&b[..i], Some(&b[i + 1..])),
            None => (b, None),
        };
        if let Some(a) = inet_addr(addr) {
            let shift = match bits {
                None => 32,
                Some(bits) => atoi(bits).filter(|&s| s <= 32)?,
            };
            let mask = if shift == 0 { 0 } else { u32::MAX << (32 - shift) };
            return Some(Parsed { cidr: Cidr::V4 { addr: a & mask, mask }, low_bits_set: a & mask != a });
        }
        let a = u128::from_be_bytes(inet6_addr(addr)?);
        let shift = match bits {
            None => 128,
            Some(bits) => atoi(bits).filter(|&s| s <= 128)?,
        };
        let mask = if shift == 0 { 0 } else { u128::MAX << (128 - shift) };
        Some(Parsed { cidr: Cidr::V6 { addr: a & mask, mask }, low_bits_set: a & mask != a })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, v4_view(ip)) {
            (Cidr::V4 { addr, mask }, IpAddr::V4(a)) => u32::from(a) & mask == *addr,
            (Cidr::V6 { addr, mask }, IpAddr::V6(a)) => u128::from(a) & mask == *addr,
            _ => false,
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it carries.
fn v4_view(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(a),
        },
        v4 => v4,
    }
}

/// Whether any range of `list` holds `ip`.
pub fn any_contains(list: &[Cidr], ip: IpAddr) -> bool {
    list.iter().any(|c| c.contains(ip))
}

/// `set_real_ip_from`'s argument: a range as `Cidr::parse` reads it, or
/// (nginx 1.13.1+) a host name, which stands for each of its addresses.
/// The flag is `Parsed::low_bits_set`; the error is nginx's message.
pub fn parse_or_resolve(text: &str) -> Result<(Vec<Cidr>, bool), String> {
    if let Some(p) = Cidr::parse(text) {
        return Ok((vec![p.cidr], p.low_bits_set));
    }
    use std::net::ToSocketAddrs;
    let addrs = (text, 0).to_socket_addrs().map_err(|_| format!("host not found in set_real_ip_from \"{text}\""))?;
    let list = addrs
        .map(|a| match a.ip() {
            IpAddr::V4(v4) => Cidr::V4 { addr: u32::from(v4), mask: u32::MAX },
            IpAddr::V6(v6) => Cidr::V6 { addr: u128::from(v6), mask: u128::MAX },
        })
        .collect();
    Ok((list, false))
}

/// For tests and messages: the range's network address.
pub fn network(c: &Cidr) -> Option<IpAddr> {
    match c {
        Cidr::V4 { addr, .. } => Some(IpAddr::V4(Ipv4Addr::from(*addr))),
        Cidr::V6 { addr, .. } => Some(IpAddr::V6(Ipv6Addr::from(*addr))),
        Cidr::Unix => None,
    }
}

/// ngx_atoi: decimal digits only, at least one.
pub fn atoi(b: &[u8]) -> Option<u32> {
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

/// Writes a 16-bit group at `at` (None past the 16 bytes).
fn push16(out: &mut [u8; 16], at: &mut usize, word: u32) -> Option<()> {
    let slot = out.get_mut(*at..*at + 2)?;
    slot.copy_from_slice(&(word as u16).to_be_bytes());
    *at += 2;
    Some(())
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
                push16(&mut out, &mut at, word)?;
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
            push16(&mut out, &mut at, v4 >> 16)?;
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
    push16(&mut out, &mut at, word)?;
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

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

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
    fn parses_and_matches_as_nginx() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(!c.low_bits_set);
        assert!(c.cidr.contains(ip("10.1.2.3")));
        assert!(!c.cidr.contains(ip("11.0.0.1")));
        // A dual-stack listener's view of an IPv4 client.
        assert!(c.cidr.contains(ip("::ffff:10.9.9.9")));
        let c = Cidr::parse("10.0.0.1/8").unwrap();
        assert!(c.low_bits_set);
        assert_eq!(network(&c.cidr), Some(ip("10.0.0.0")));
        assert!(Cidr::parse("127.0.0.1").unwrap().cidr.contains(ip("127.0.0.1")));
        assert!(!Cidr::parse("127.0.0.1").unwrap().cidr.contains(ip("127.0.0.2")));
        let c = Cidr::parse("2001:db8::/32").unwrap().cidr;
        assert!(c.contains(ip("2001:db8:1::5")));
        assert!(!c.contains(ip("2001:db9::1")));
        assert!(!c.contains(ip("10.0.0.1")));
        assert!(Cidr::parse("0.0.0.0/0").unwrap().cidr.contains(ip("8.8.8.8")));
        assert!(Cidr::parse("::/0").unwrap().cidr.contains(ip("::1")));
        assert!(Cidr::parse("::1").unwrap().cidr.contains(ip("::1")));
        assert_eq!(Cidr::parse("unix:").unwrap().cidr, Cidr::Unix);
        for bad in ["", "10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/+8", "host.example", "1.2.3", "10.0.0.0/8/8"] {
            assert!(Cidr::parse(bad).is_none(), "{bad}");
        }
    }
}
