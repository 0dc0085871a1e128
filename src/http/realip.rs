//! nginx's `ngx_http_realip_module`: behind a trusted balancer or CDN, the
//! client address (`$remote_addr`, `$remote_port`, the error log's
//! `client:`, access rules, limits, `ip_hash`) becomes the one the
//! balancer names in a header (`X-Real-IP`, `X-Forwarded-For`, any other)
//! or in the PROXY protocol header of the connection.
//!
//! As in nginx it runs twice: right after the request head is read, with
//! the server's settings (nginx's post-read phase), and once a location is
//! chosen, with its settings (the preaccess phase), unless the first run
//! already replaced the address. The replacement lasts for the request,
//! internal redirects included; `$realip_remote_addr` and
//! `$realip_remote_port` keep the connection's own. Only a connection
//! from an address listed in `set_real_ip_from` is believed.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::cidr::Cidr;
use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd, list};
use crate::http::handler::ctx::ReqCtx;

pub static DIRECTIVES: &[Cmd] = &[
    list(cmd("set_real_ip_from", HSL, 1, 1, Set::Loc(set_real_ip_from)), reset_from),
    cmd("real_ip_header", HSL, 1, 1, Set::Loc(real_ip_header)),
    cmd("real_ip_recursive", HSL, 1, 1, Set::Loc(real_ip_recursive)),
];

/// The module's settings at one level.
#[derive(Clone, Default)]
pub struct RealIpConf {
    /// The trusted addresses; None: the module is off here.
    pub from: Option<Arc<Vec<Cidr>>>,
    pub source: Source,
    pub recursive: bool,
}

#[derive(Clone, Default, Debug, PartialEq)]
pub enum Source {
    #[default]
    XRealIp,
    XForwardedFor,
    ProxyProtocol,
    /// Any other request header, by lowercase name.
    Header(String),
}

fn reset_from(c: &mut LocConf) {
    c.realip.from = None;
}

fn set_real_ip_from(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let text = d.args[0].text.as_str();
    let mut list: Vec<Cidr> = c.realip.from.as_deref().cloned().unwrap_or_default();
    let (cidrs, low_bits_set) = crate::cidr::parse_or_resolve(text).map_err(|m| ConfError::at(m, &d.span))?;
    if low_bits_set {
        ctx.warnings.push(ConfError::at(format!("low address bits of {text} are meaningless"), &d.span).to_string());
    }
    list.extend(cidrs);
    c.realip.from = Some(Arc::new(list));
    Ok(())
}

fn real_ip_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.realip.source = match d.args[0].text.as_str() {
        "X-Real-IP" => Source::XRealIp,
        "X-Forwarded-For" => Source::XForwardedFor,
        "proxy_protocol" => Source::ProxyProtocol,
        other => Source::Header(other.to_ascii_lowercase()),
    };
    Ok(())
}

fn real_ip_recursive(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.realip.recursive = crate::config::set_main::flag(d)?;
    Ok(())
}

/// Replaces the request's client address when `ctx.conf` says so and the
/// connection is trusted (a no-op once replaced).
pub fn apply(ctx: &mut ReqCtx<'_, '_>) {
    if ctx.realip.is_some() {
        return;
    }
    let conf = &ctx.conf.realip;
    let Some(from) = conf.from.as_deref() else { return };
    let (peer, unix) = (ctx.conn.peer, ctx.conn.unix.is_some());
    let found = match &conf.source {
        Source::ProxyProtocol => {
            let Some(pp) = ctx.conn.proxy_protocol.as_deref() else { return };
            // The balancer's client port comes with it.
            forwarded_from(peer, unix, &[pp.src_addr.as_bytes()], from, false)
                .map(|a| SocketAddr::new(a.ip(), pp.src_port))
        }
        Source::XRealIp => forwarded_header(ctx, "x-real-ip", false, from, conf.recursive),
        Source::XForwardedFor => forwarded_header(ctx, "x-forwarded-for", true, from, conf.recursive),
        Source::Header(name) => forwarded_header(ctx, name, false, from, conf.recursive),
    };
    if let Some(a) = found {
        ctx.realip = Some(a);
    }
}

/// The header's values: X-Forwarded-For may come in several fields (nginx
/// walks them last to first), the others count once (the first).
fn forwarded_header(
    ctx: &ReqCtx<'_, '_>,
    name: &str,
    all_fields: bool,
    from: &[Cidr],
    recursive: bool,
) -> Option<SocketAddr> {
    let values: Vec<&[u8]> = if all_fields {
        ctx.req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v).collect()
    } else {
        vec![ctx.req.header(name)?]
    };
    if values.is_empty() {
        return None;
    }
    forwarded_from(ctx.conn.peer, ctx.conn.unix.is_some(), &values, from, recursive)
}

/// nginx's `ngx_http_get_forwarded_addr`: if `peer` is trusted, the last
/// address of the last value; with `recursive`, leftwards past every
/// trusted address (across fields), stopping at the first untrusted one.
pub fn forwarded(peer: SocketAddr, values: &[&[u8]], from: &[Cidr], recursive: bool) -> Option<SocketAddr> {
    forwarded_from(peer, false, values, from, recursive)
}

/// [`forwarded`], for a peer that may be a unix-domain socket's (`unix`:
/// then `peer` is a placeholder, trusted by `set_real_ip_from unix:`).
pub fn forwarded_from(
    peer: SocketAddr,
    mut unix: bool,
    values: &[&[u8]],
    from: &[Cidr],
    recursive: bool,
) -> Option<SocketAddr> {
    let mut addr = peer;
    let mut found = false;
    for v in values.iter().rev() {
        match walk(&mut addr, &mut unix, v, from, recursive) {
            Walk::Declined if found => return Some(addr),
            Walk::Declined => return None,
            Walk::Done => return Some(addr),
            Walk::Ok if !recursive => return Some(addr),
            Walk::Ok => found = true,
        }
    }
    found.then_some(addr)
}

enum Walk {
    /// `addr` untrusted or the value unusable: nothing changed here.
    Declined,
    /// Replaced, and the chain went on to an untrusted address: stop.
    Done,
    /// Replaced, every address of this value trusted (recursive) or one
    /// taken (not recursive).
    Ok,
}

fn walk(addr: &mut SocketAddr, unix: &mut bool, value: &[u8], from: &[Cidr], recursive: bool) -> Walk {
    let trusted = if *unix { from.contains(&Cidr::Unix) } else { crate::cidr::any_contains(from, addr.ip()) };
    if !trusted {
        return Walk::Declined;
    }
    // Trailing separators do not count.
    let mut end = value.len();
    while end > 0 && matches!(value[end - 1], b' ' | b',') {
        end -= 1;
    }
    let mut start = end;
    while start > 0 && !matches!(value[start - 1], b' ' | b',') {
        start -= 1;
    }
    let Some(a) = parse_addr_port(&value[start..end]) else { return Walk::Declined };
    *addr = a;
    *unix = false;
    if recursive && start > 0 {
        return match walk(addr, unix, &value[..start - 1], from, true) {
            Walk::Declined => Walk::Done,
            other => other,
        };
    }
    Walk::Ok
}

/// nginx's `ngx_parse_addr_port`: `1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]`, `[::1]:80`. No port is port 0 (`$remote_port` then empty).
pub fn parse_addr_port(b: &[u8]) -> Option<SocketAddr> {
    let s = std::str::from_utf8(b).ok()?;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    let (host, port) = match s.strip_prefix('[') {
        Some(rest) => {
            let (h, tail) = rest.split_once(']')?;
            match tail {
                "" => (h, None),
                t => (h, Some(t.strip_prefix(':')?)),
            }
        }
        None => {
            let (h, p) = s.rsplit_once(':')?;
            (h, Some(p))
        }
    };
    let ip: IpAddr = host.parse().ok()?;
    if s.starts_with('[') != ip.is_ipv6() {
        return None;
    }
    let port = match port {
        None => 0,
        Some(p) if !p.is_empty() && p.len() <= 5 && p.bytes().all(|c| c.is_ascii_digit()) => match p.parse::<u16>() {
            Ok(n) if n > 0 => n,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|s| Cidr::parse(s).unwrap().cidr).collect()
    }

    fn fwd(peer: &str, values: &[&str], from: &[&str], rec: bool) -> Option<String> {
        let values: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        forwarded(peer.parse().unwrap(), &values, &cidrs(from), rec).map(|a| a.to_string())
    }

    #[test]
    fn forwarded_addresses_as_nginx() {
        let lb = "10.0.0.1:5000";
        // Untrusted peers change nothing.
        assert_eq!(fwd("192.0.2.9:1", &["1.1.1.1"], &["10.0.0.0/8"], false), None);
        assert_eq!(fwd(lb, &["1.1.1.1"], &["10.0.0.0/8"], false).as_deref(), Some("1.1.1.1:0"));
        assert_eq!(fwd(lb, &["1.1.1.1:8080"], &["10.0.0.0/8"], false).as_deref(), Some("1.1.1.1:8080"));
        assert_eq!(fwd(lb, &["[2001:db8::1]:443"], &["10.0.0.0/8"], false).as_deref(), Some("[2001:db8::1]:443"));
        // The last one, not recursive.
        assert_eq!(fwd(lb, &["1.1.1.1, 10.0.0.2"], &["10.0.0.0/8"], false).as_deref(), Some("10.0.0.2:0"));
        // Recursive: past the trusted ones.
        assert_eq!(fwd(lb, &["1.1.1.1, 10.0.0.2"], &["10.0.0.0/8"], true).as_deref(), Some("1.1.1.1:0"));
        assert_eq!(fwd(lb, &["3.3.3.3, 2.2.2.2, 10.0.0.2"], &["10.0.0.0/8"], true).as_deref(), Some("2.2.2.2:0"));
        // All trusted: the leftmost.
        assert_eq!(fwd(lb, &["10.0.0.3, 10.0.0.2"], &["10.0.0.0/8"], true).as_deref(), Some("10.0.0.3:0"));
        // Several fields, last first.
        assert_eq!(fwd(lb, &["1.1.1.1", "10.0.0.2"], &["10.0.0.0/8"], true).as_deref(), Some("1.1.1.1:0"));
        assert_eq!(fwd(lb, &["1.1.1.1", "10.0.0.2"], &["10.0.0.0/8"], false).as_deref(), Some("10.0.0.2:0"));
        // Garbage in the value: unchanged.
        assert_eq!(fwd(lb, &["unknown"], &["10.0.0.0/8"], false), None);
        assert_eq!(fwd(lb, &["1.1.1.1,  "], &["10.0.0.0/8"], false).as_deref(), Some("1.1.1.1:0"));
    }

    #[test]
    fn addr_port_forms() {
        for (s, want) in [
            ("1.2.3.4", Some("1.2.3.4:0")),
            ("1.2.3.4:80", Some("1.2.3.4:80")),
            ("::1", Some("[::1]:0")),
            ("[::1]", Some("[::1]:0")),
            ("[::1]:8", Some("[::1]:8")),
            ("1.2.3.4:0", None),
            ("1.2.3.4:65536", None),
            ("1.2.3.4:", None),
            ("[1.2.3.4]:80", None),
            ("x", None),
            ("", None),
        ] {
            assert_eq!(parse_addr_port(s.as_bytes()).map(|a| a.to_string()).as_deref(), want, "{s}");
        }
    }
}
