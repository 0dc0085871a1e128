//! The `geo` block (ngx_http_geo_module): a variable whose value depends on
//! the client address, by the longest matching network
//! (`geo $office { default 0; 10.0.0.0/8 1; }`) or, after `ranges`, by
//! address range (`10.0.0.0-10.0.0.255 1;`). Like `map`, blocks are built
//! before the rest of `http` so any template may use their variable
//! (`config::map` keeps the registry of both).
//!
//! The address is the request's client (after the realip module), or the
//! value of the block's first variable parsed as an address; with `proxy`
//! networks, a client among them is replaced by the last address of
//! `X-Forwarded-For` (walked past trusted ones with `proxy_recursive`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::parser::{ConfError, Directive};
use crate::cidr::Cidr;
use crate::variables::Template;

/// Networks of one prefix length: (mask, network address -> value).
type Nets<A> = Vec<(A, HashMap<A, Arc<[u8]>>)>;

/// `ranges` mode: inclusive IPv4 ranges and their values.
type Ranges = Vec<(u32, u32, Arc<[u8]>)>;

pub struct GeoDef {
    pub name: String,
    /// None: the client address.
    pub source: Option<Template>,
    /// Networks by prefix length, longest first, for longest-prefix match.
    v4: Nets<u32>,
    v6: Nets<u128>,
    /// `ranges` mode: inclusive IPv4 ranges, later ones first.
    ranges: Option<Ranges>,
    default: Arc<[u8]>,
    pub proxies: Vec<Cidr>,
    pub proxy_recursive: bool,
}

impl std::fmt::Debug for GeoDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "geo ${}", self.name)
    }
}

impl PartialEq for GeoDef {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl GeoDef {
    pub fn lookup(&self, ip: IpAddr) -> &[u8] {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                if let Some(r) = &self.ranges {
                    return r.iter().find(|(s, e, _)| *s <= a && a <= *e).map_or(&self.default, |(_, _, v)| v);
                }
                self.v4.iter().find_map(|(mask, nets)| nets.get(&(a & mask))).unwrap_or(&self.default)
            }
            IpAddr::V6(a) => {
                if self.ranges.is_some() {
                    return &self.default;
                }
                let a = u128::from(a);
                self.v6.iter().find_map(|(mask, nets)| nets.get(&(a & mask))).unwrap_or(&self.default)
            }
        }
    }

    /// The address a request is looked up by.
    pub fn address(&self, client: SocketAddr, source: Option<&[u8]>, xff: &[&[u8]]) -> IpAddr {
        if let Some(v) = source {
            // nginx: a value that is no address counts as 255.255.255.255.
            return std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse::<IpAddr>().ok())
                .unwrap_or(IpAddr::from([255, 255, 255, 255]));
        }
        if !self.proxies.is_empty()
            && !xff.is_empty()
            && let Some(a) = crate::http::realip::forwarded(client, xff, &self.proxies, self.proxy_recursive)
        {
            return a.ip();
        }
        client.ip()
    }
}

/// A network of the block (nginx warns about host bits and masks them).
fn net(t: &str, e: &Directive, warnings: &mut Vec<String>) -> Result<Cidr, ConfError> {
    let p = Cidr::parse(t)
        .filter(|p| p.cidr != Cidr::Unix)
        .ok_or_else(|| ConfError::at(format!("invalid network \"{t}\""), &e.span))?;
    if p.low_bits_set {
        warnings.push(ConfError::at(format!("low address bits of {t} are meaningless"), &e.span).to_string());
    }
    Ok(p.cidr)
}

fn literal(v: &str) -> Arc<[u8]> {
    Arc::from(v.as_bytes())
}

/// Builds `geo [$address] $variable { ... }`.
pub fn geo_block(d: &Directive, warnings: &mut Vec<String>) -> Result<GeoDef, ConfError> {
    let args: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
    let (source, var) = match args.as_slice() {
        [v] => (None, *v),
        [s, v] => (Some(Template::compile(s).map_err(|e| ConfError::at(e, &d.span))?), *v),
        _ => return Err(ConfError::at("invalid number of arguments in \"geo\" directive", &d.span)),
    };
    let Some(name) = var.strip_prefix('$').filter(|n| !n.is_empty()) else {
        return Err(ConfError::at(format!("invalid variable name \"{var}\""), &d.span));
    };
    let mut nets: Vec<(Cidr, Arc<[u8]>)> = Vec::new();
    let mut ranges: Option<Ranges> = None;
    let mut default = literal("");
    let (mut proxies, mut recursive) = (Vec::new(), false);
    for e in d.block.as_deref().unwrap_or(&[]) {
        let mut words = vec![e.name.as_str()];
        words.extend(e.args.iter().map(|w| w.text.as_str()));
        match words.as_slice() {
            ["ranges"] => ranges = Some(Vec::new()),
            ["proxy_recursive"] => recursive = true,
            ["proxy", n] => proxies.push(net(n, e, warnings)?),
            ["default", v] => default = literal(v),
            ["delete", n] if ranges.is_none() => {
                let c = net(n, e, warnings)?;
                nets.retain(|(x, _)| *x != c);
            }
            [k, v] if ranges.is_some() => {
                let (a, b) =
                    k.split_once('-').ok_or_else(|| ConfError::at(format!("invalid range \"{k}\""), &e.span))?;
                let ip = |t: &str| t.parse::<std::net::Ipv4Addr>().map(u32::from);
                let (Ok(a), Ok(b)) = (ip(a), ip(b)) else {
                    return Err(ConfError::at(format!("invalid range \"{k}\""), &e.span));
                };
                if a > b {
                    return Err(ConfError::at(format!("invalid range \"{k}\""), &e.span));
                }
                if let Some(r) = ranges.as_mut() {
                    r.insert(0, (a, b, literal(v)));
                }
            }
            [k, v] => {
                let c = net(k, e, warnings)?;
                if let Some(old) = nets.iter_mut().find(|(x, _)| *x == c) {
                    warnings.push(
                        ConfError::at(
                            format!(
                                "duplicate network \"{k}\", value: \"{v}\", old value: \"{}\"",
                                String::from_utf8_lossy(&old.1)
                            ),
                            &e.span,
                        )
                        .to_string(),
                    );
                    old.1 = literal(v);
                } else {
                    nets.push((c, literal(v)));
                }
            }
            _ => return Err(ConfError::at("invalid number of the geo parameters", &e.span)),
        }
    }
    let mut g = GeoDef {
        name: name.to_string(),
        source,
        v4: Vec::new(),
        v6: Vec::new(),
        ranges,
        default,
        proxies,
        proxy_recursive: recursive,
    };
    for (c, v) in nets {
        match c {
            // 0.0.0.0/0 is nginx's other spelling of `default`.
            Cidr::V4 { mask: 0, .. } | Cidr::V6 { mask: 0, .. } => g.default = v,
            Cidr::V4 { addr, mask } => match g.v4.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, t)) => drop(t.insert(addr, v)),
                None => g.v4.push((mask, HashMap::from([(addr, v)]))),
            },
            Cidr::V6 { addr, mask } => match g.v6.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, t)) => drop(t.insert(addr, v)),
                None => g.v6.push((mask, HashMap::from([(addr, v)]))),
            },
            Cidr::Unix => {}
        }
    }
    g.v4.sort_by_key(|(m, _)| std::cmp::Reverse(m.count_ones()));
    g.v6.sort_by_key(|(m, _)| std::cmp::Reverse(m.count_ones()));
    Ok(g)
}

thread_local! {
    static DEFINED: std::cell::RefCell<HashMap<String, Arc<GeoDef>>> = std::cell::RefCell::new(HashMap::new());
}

/// Forgets the blocks of a previous build.
pub fn reset() {
    DEFINED.with(|d| d.borrow_mut().clear());
}

/// The `geo` defining `$name`, for `Template::compile`.
pub fn lookup_var(name: &str) -> Option<Arc<GeoDef>> {
    DEFINED.with(|d| d.borrow().get(name).cloned())
}

/// Builds a block and makes its variable known.
pub fn define(d: &Directive, warnings: &mut Vec<String>) -> Result<(), ConfError> {
    let g = geo_block(d, warnings)?;
    DEFINED.with(|r| r.borrow_mut().insert(g.name.clone(), Arc::new(g)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(text: &str) -> GeoDef {
        let p = std::path::Path::new("t");
        let mut parsed = crate::config::parser::parse_str(text, p, p).expect("parses");
        let d = parsed.directives.remove(0);
        geo_block(&d, &mut Vec::new()).expect("builds")
    }

    fn at(g: &GeoDef, ip: &str) -> String {
        String::from_utf8_lossy(g.lookup(ip.parse().unwrap())).into_owned()
    }

    #[test]
    fn longest_prefix_and_ranges() {
        let g = geo("geo $g { default none; 10.0.0.0/8 ten; 10.1.0.0/16 ten-one; 10.1.2.3 host; 2001:db8::/32 v6; \
             delete 10.1.0.0/16; }");
        assert_eq!(at(&g, "10.9.9.9"), "ten");
        assert_eq!(at(&g, "10.1.9.9"), "ten");
        assert_eq!(at(&g, "10.1.2.3"), "host");
        assert_eq!(at(&g, "::ffff:10.1.2.3"), "host");
        assert_eq!(at(&g, "2001:db8::7"), "v6");
        assert_eq!(at(&g, "192.0.2.1"), "none");
        let g = geo("geo $g { ranges; default d; 10.0.0.0-10.0.0.255 a; 10.0.0.10-10.0.0.20 b; }");
        assert_eq!(at(&g, "10.0.0.15"), "b");
        assert_eq!(at(&g, "10.0.0.5"), "a");
        assert_eq!(at(&g, "10.0.1.5"), "d");
        let g = geo("geo $g { 0.0.0.0/0 any; 127.0.0.1 lo; }");
        assert_eq!(at(&g, "8.8.8.8"), "any");
    }
}
