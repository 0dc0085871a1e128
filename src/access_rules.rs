//! `allow`/`deny` rules: parsed as nginx's `ngx_ptocidr` (`crate::cidr`,
//! with nginx's own address parsers) and matched as
//! ngx_http_access_module: one list per address family, in file order,
//! the first rule that matches decides.

use std::net::IpAddr;

use crate::cidr::Cidr;

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

/// A rule's argument: `all`, `unix:`, `ADDR` or `ADDR/BITS` (nginx's
/// address forms, `crate::cidr`). None is nginx's `invalid parameter`.
pub fn parse(text: &str) -> Option<Parsed> {
    if text == "all" {
        return Some(Parsed { target: Target::All, low_bits_set: false });
    }
    let p = Cidr::parse(text)?;
    let target = match p.cidr {
        Cidr::V4 { addr, mask } => Target::V4 { addr, mask },
        Cidr::V6 { addr, mask } => Target::V6 { addr: addr.to_be_bytes(), mask: mask.to_be_bytes() },
        Cidr::Unix => Target::Unix,
    };
    Some(Parsed { target, low_bits_set: p.low_bits_set })
}

#[cfg(test)]
mod tests {
    use super::*;

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
