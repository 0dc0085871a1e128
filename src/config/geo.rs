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
    /// The value for a family's variables: the address (the client's, or
    /// the rendered source; `xff` for `proxy`) looked up.
    pub fn eval(&self, src: &dyn crate::variables::VarSource, client: Option<SocketAddr>, xff: &[&[u8]]) -> &[u8] {
        let source = self.source.as_ref().map(|t| t.render_to_vec(src));
        self.lookup(self.address(client, source.as_deref(), xff))
    }

    pub fn lookup(&self, ip: IpAddr) -> &[u8] {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        match ip {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                if let Some(r) = &self.ranges {
                    // Sorted, not overlapping: the last range starting at
                    // or below the address.
                    let i = r.partition_point(|(s, _, _)| *s <= a);
                    return match i.checked_sub(1).map(|i| &r[i]) {
                        Some((_, e, v)) if a <= *e => v,
                        _ => &self.default,
                    };
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
    /// `client` is None for a unix-domain client, which has no address
    /// (nginx looks up `INADDR_NONE`, 255.255.255.255, for it).
    pub fn address(&self, client: Option<SocketAddr>, source: Option<&[u8]>, xff: &[&[u8]]) -> IpAddr {
        if let Some(v) = source {
            // nginx: a value that is no address counts as 255.255.255.255.
            return std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse::<IpAddr>().ok())
                .unwrap_or(IpAddr::from([255, 255, 255, 255]));
        }
        let Some(client) = client else { return IpAddr::from([255, 255, 255, 255]) };
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

/// An entry's network: as `net`, and `255.255.255.255`, which
/// `ngx_ptocidr` refuses (it is `INADDR_NONE`) but nginx's geo takes as
/// the address of a client that has none: a unix-domain socket's, or a
/// source value that is no address.
fn entry_net(t: &str, e: &Directive, warnings: &mut Vec<String>) -> Result<Cidr, ConfError> {
    if t == "255.255.255.255" {
        return Ok(Cidr::V4 { addr: u32::MAX, mask: u32::MAX });
    }
    net(t, e, warnings)
}

fn literal(v: &str) -> Arc<[u8]> {
    Arc::from(v.as_bytes())
}

/// Builds `geo [$address] $variable { ... }`.
/// `A.B.C.D-E.F.G.H` of a `ranges` geo.
fn range(k: &str, e: &Directive) -> Result<(u32, u32), ConfError> {
    let bad = || ConfError::at(format!("invalid range \"{k}\""), &e.span);
    let (a, b) = k.split_once('-').ok_or_else(bad)?;
    let ip = |t: &str| t.parse::<std::net::Ipv4Addr>().map(u32::from);
    match (ip(a), ip(b)) {
        (Ok(a), Ok(b)) if a <= b => Ok((a, b)),
        _ => Err(bad()),
    }
}

/// A range's pieces within each /16, as nginx stores them (its table is
/// indexed by the high 16 bits), so that `delete` finds the same pieces.
fn pieces(a: u32, b: u32) -> impl Iterator<Item = (u32, u32)> {
    (a >> 16..=b >> 16).map(move |hi| ((hi << 16).max(a), ((hi << 16) | 0xffff).min(b)))
}

/// Adds a range over the sorted, non-overlapping list: where it overlaps
/// earlier ranges it replaces them (nginx's "add before", "insert"...
/// cases: the later range's value wins, the rest of the earlier ones
/// stays).
fn add_range(r: &mut Ranges, a: u32, b: u32, v: &Arc<[u8]>) {
    for (a, b) in pieces(a, b) {
        let mut kept = Vec::new();
        let start = r.partition_point(|(_, e, _)| *e < a);
        let mut end = start;
        while end < r.len() && r[end].0 <= b {
            let (s, e, ref old) = r[end];
            if s < a {
                kept.push((s, a - 1, old.clone()));
            }
            if e > b {
                kept.push((b + 1, e, old.clone()));
            }
            end += 1;
        }
        kept.push((a, b, v.clone()));
        kept.sort_by_key(|(s, _, _)| *s);
        r.splice(start..end, kept);
    }
}

/// nginx's `delete` in a `ranges` geo: each /16 piece must be a range as
/// stored; false if one is not.
fn delete_range(r: &mut Ranges, a: u32, b: u32) -> bool {
    let mut all = true;
    for (a, b) in pieces(a, b) {
        match r.iter().position(|(s, e, _)| *s == a && *e == b) {
            Some(i) => drop(r.remove(i)),
            None => all = false,
        }
    }
    all
}

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
            ["delete", k] if ranges.is_some() => {
                let (a, b) = range(k, e)?;
                if let Some(r) = ranges.as_mut()
                    && !delete_range(r, a, b)
                {
                    warnings.push(ConfError::at(format!("no address range \"{k}\" to delete"), &e.span).to_string());
                }
            }
            ["delete", n] if ranges.is_none() => {
                let c = entry_net(n, e, warnings)?;
                nets.retain(|(x, _)| *x != c);
            }
            [k, v] if ranges.is_some() => {
                let (a, b) = range(k, e)?;
                if let Some(r) = ranges.as_mut() {
                    add_range(r, a, b, &literal(v));
                }
            }
            [k, v] => {
                let c = entry_net(k, e, warnings)?;
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

    /// nginx-tests' geo.t: a later range replaces what it overlaps, and
    /// `delete` removes the pieces as stored (split by later ranges and
    /// by /16).
    #[test]
    fn ranges_overlap_and_delete_as_nginx() {
        let g = geo("geo $g { ranges; default d; 127.0.0.0-127.0.0.255 t; 127.0.0.1-127.0.0.1 lo; \
             delete 127.0.0.0-127.0.0.0; delete 127.0.0.2-127.0.0.255; delete 127.0.0.1-127.0.0.1; }");
        assert_eq!(at(&g, "127.0.0.1"), "d");
        assert_eq!(at(&g, "127.0.0.9"), "d");
        let g = geo("geo $g { ranges; default d; 127.0.0.0-127.1.0.0 lo; delete 127.0.0.0-127.1.0.0; }");
        assert_eq!(at(&g, "127.0.200.1"), "d");
        let g = geo("geo $g { ranges; default d; 10.10.3.0-10.11.2.255 foo; 10.12.3.0-10.13.2.255 foo2; \
             delete 10.10.3.0-10.11.2.255; }");
        assert_eq!(at(&g, "10.11.2.1"), "d");
        assert_eq!(at(&g, "10.13.2.1"), "foo2");
        for (conf, want) in [
            ("127.0.0.1-127.0.0.255 lo; 127.0.0.0-127.0.0.0 t;", "lo"),
            ("127.0.0.0-127.0.0.255 t; 127.0.0.1-127.0.0.2 t2; 127.0.0.1-127.0.0.1 lo;", "lo"),
            ("127.0.0.0-127.0.0.255 t; 127.0.0.0-127.0.0.1 lo;", "lo"),
            ("127.0.0.0-127.0.0.255 t; 127.0.0.1-127.0.0.255 lo;", "lo"),
        ] {
            let g = geo(&format!("geo $g {{ ranges; default d; {conf} }}"));
            assert_eq!(at(&g, "127.0.0.1"), want, "{conf}");
        }
        let g = geo("geo $g { ranges; 127.0.0.0-127.0.0.255 t; 127.0.0.1-127.0.0.2 t2; }");
        assert_eq!(
            (at(&g, "127.0.0.0"), at(&g, "127.0.0.2"), at(&g, "127.0.0.3")),
            ("t".into(), "t2".into(), "t".into())
        );
    }
}
