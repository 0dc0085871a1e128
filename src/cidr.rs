//! Address ranges as nginx writes them (`192.168.0.0/16`, `2001:db8::/32`,
//! a bare address, `unix:`), parsed with `ngx_ptocidr`'s rules and matched
//! with `ngx_cidr_match`'s: an IPv4-mapped IPv6 client address
//! (`::ffff:10.0.0.1`, what a dual-stack listener reports for an IPv4
//! client) is matched against the IPv4 ranges. Shared by the modules that
//! trust or refuse clients by address (`set_real_ip_from`, purge lists).

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
    /// `unix:`: every unix-domain client (sluice listens on TCP only, so
    /// it never matches a client; it is accepted as nginx accepts it).
    Unix,
}

/// A parsed range, and whether address bits below the mask were set
/// (nginx warns "low address bits of ... are meaningless" and masks them).
pub struct Parsed {
    pub cidr: Cidr,
    pub low_bits_set: bool,
}

impl Cidr {
    /// `ADDR`, `ADDR/BITS` or `unix:`; None for anything else (the caller
    /// words nginx's `invalid parameter` message).
    pub fn parse(text: &str) -> Option<Parsed> {
        if text == "unix:" {
            return Some(Parsed { cidr: Cidr::Unix, low_bits_set: false });
        }
        let (addr, bits) = match text.split_once('/') {
            Some((a, b)) => {
                // nginx's ngx_atoi: digits only.
                if b.is_empty() || !b.bytes().all(|c| c.is_ascii_digit()) || b.len() > 3 {
                    return None;
                }
                (a, Some(b.parse::<u32>().ok()?))
            }
            None => (text, None),
        };
        match addr.parse::<IpAddr>().ok()? {
            IpAddr::V4(a) => {
                let bits = bits.unwrap_or(32);
                if bits > 32 {
                    return None;
                }
                let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
                let raw = u32::from(a);
                Some(Parsed { cidr: Cidr::V4 { addr: raw & mask, mask }, low_bits_set: raw & !mask != 0 })
            }
            IpAddr::V6(a) => {
                let bits = bits.unwrap_or(128);
                if bits > 128 {
                    return None;
                }
                let mask = if bits == 0 { 0 } else { u128::MAX << (128 - bits) };
                let raw = u128::from(a);
                Some(Parsed { cidr: Cidr::V6 { addr: raw & mask, mask }, low_bits_set: raw & !mask != 0 })
            }
        }
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

/// For tests and messages: the range's network address.
pub fn network(c: &Cidr) -> Option<IpAddr> {
    match c {
        Cidr::V4 { addr, .. } => Some(IpAddr::V4(Ipv4Addr::from(*addr))),
        Cidr::V6 { addr, .. } => Some(IpAddr::V6(Ipv6Addr::from(*addr))),
        Cidr::Unix => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
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
