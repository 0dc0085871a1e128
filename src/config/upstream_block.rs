//! The `upstream NAME { ... }` block: its servers (with nginx's
//! parameters), balancing method, keep-alive pool settings, `queue` and
//! Tengine's `check*` lines, checked with nginx's messages.

use super::build::Ctx;
use super::parser::{ConfError, Directive};
use super::proxy::*;
use super::set_main::{arg, invalid, number};
use super::table::R;
use super::value;
use crate::variables::Template;
use std::sync::Arc;
use std::time::Duration;

/// Builds an `upstream NAME { ... }` block.
pub fn upstream_block(d: &Directive, ctx: &mut Ctx) -> Result<Arc<Upstream>, ConfError> {
    build(d, ctx, false)
}

/// The same block in a family that proxies bytes rather than requests
/// (nginx's `stream` upstreams): no keep-alive pool, `queue`, `ip_hash` or
/// `check`, and every server names its port.
pub fn l4_upstream_block(d: &Directive, ctx: &mut Ctx) -> Result<Arc<Upstream>, ConfError> {
    build(d, ctx, true)
}

fn build(d: &Directive, ctx: &mut Ctx, l4: bool) -> Result<Arc<Upstream>, ConfError> {
    let name = arg(d, 0).to_string();
    if ctx.upstreams.contains_key(&name) {
        return Err(ConfError::at(format!("duplicate upstream \"{}\"", name), &d.span));
    }
    let mut u = Upstream {
        name: name.clone(),
        index: ctx.upstream_list.len(),
        peers: Vec::new(),
        balance: Balance::RoundRobin,
        keepalive: 0,
        keepalive_requests: 1000,
        keepalive_timeout: Duration::from_secs(60),
        keepalive_time: Duration::from_secs(3600),
        implicit: false,
        queue: None,
        check: None,
    };
    let mut queue: Option<(usize, Duration)> = None;
    let mut check = crate::upstream::check::conf::Pending::default();
    let mut seen: Vec<&str> = Vec::new();
    for sub in d.block.as_deref().unwrap_or(&[]) {
        let once = |seen: &mut Vec<&str>, n: &'static str| -> R {
            if seen.contains(&n) {
                return Err(ConfError::at(format!("\"{}\" directive is duplicate", n), &sub.span));
            }
            seen.push(n);
            Ok(())
        };
        let nargs = sub.args.len();
        let bad_args =
            || ConfError::at(format!("invalid number of arguments in \"{}\" directive", sub.name), &sub.span);
        if l4
            && matches!(
                sub.name.as_str(),
                "keepalive"
                    | "keepalive_requests"
                    | "keepalive_timeout"
                    | "keepalive_time"
                    | "queue"
                    | "ip_hash"
                    | "check"
                    | "check_http_send"
                    | "check_http_expect_alive"
                    | "check_keepalive_requests"
            )
        {
            return Err(ConfError::at(format!("unknown directive \"{}\"", sub.name), &sub.span));
        }
        match sub.name.as_str() {
            "server" => u.peers.push(peer(sub, l4)?),
            "keepalive" if nargs == 1 => {
                once(&mut seen, "keepalive")?;
                u.keepalive = number(sub, 0)? as usize;
            }
            "keepalive_requests" if nargs == 1 => u.keepalive_requests = number(sub, 0)?,
            "queue" if (1..=2).contains(&nargs) => {
                once(&mut seen, "queue")?;
                queue = Some(queue_args(sub)?);
            }
            "keepalive_timeout" if nargs == 1 => u.keepalive_timeout = duration(sub)?,
            "keepalive_time" if nargs == 1 => u.keepalive_time = duration(sub)?,
            "least_conn" if nargs == 0 => set_balance(&mut u, Balance::LeastConn, sub)?,
            "ip_hash" if nargs == 0 => set_balance(&mut u, Balance::IpHash, sub)?,
            "hash" if (1..=2).contains(&nargs) => {
                let consistent = match sub.args.get(1).map(|w| w.text.as_str()) {
                    None => false,
                    Some("consistent") => true,
                    Some(v) => return Err(invalid(sub, v)),
                };
                let key = Template::compile(arg(sub, 0)).map_err(|e| ConfError::at(e, &sub.span))?;
                set_balance(&mut u, Balance::Hash { key, consistent }, sub)?;
            }
            "random" if nargs <= 2 => {
                let two = nargs >= 1 && arg(sub, 0) == "two";
                let lc = nargs == 2 && arg(sub, 1) == "least_conn";
                if (nargs >= 1 && !two) || (nargs == 2 && !lc) {
                    return Err(invalid(sub, arg(sub, nargs - 1)));
                }
                set_balance(&mut u, Balance::Random { two, least_conn: lc }, sub)?;
            }
            "keepalive" | "keepalive_requests" | "keepalive_timeout" | "keepalive_time" | "least_conn" | "ip_hash"
            | "hash" | "random" | "queue" => {
                return Err(bad_args());
            }
            "zone" => {}
            "check" | "check_http_send" | "check_http_expect_alive" | "check_keepalive_requests" => {
                crate::upstream::check::conf::directive(&mut check, sub)?;
            }
            other => {
                let known = super::table::lookup(other).is_some();
                let msg = if known {
                    format!("\"{}\" directive is not allowed here", other)
                } else {
                    format!("unknown directive \"{}\"", other)
                };
                return Err(ConfError::at(msg, &sub.span));
            }
        }
    }
    if u.peers.is_empty() {
        return Err(ConfError {
            msg: "no servers are inside upstream".to_string(),
            file: Some(d.span.file.as_ref().clone()),
            line: d.end_line,
        });
    }
    // The balancer refuses what nginx refuses at parse time (backup with
    // hash, ip_hash or random).
    if let Err(e) = crate::upstream::peers::build_balancer(&u) {
        return Err(ConfError { msg: e, file: Some(d.span.file.as_ref().clone()), line: d.end_line });
    }
    if let Some((size, timeout)) = queue {
        u.queue = Some(Arc::new(crate::upstream::queue::Queue::new(size, timeout, &u.peers)));
    }
    u.check = crate::upstream::check::conf::finish(check, &u.name, &u.peers);
    let u = Arc::new(u);
    ctx.upstreams.insert(name, u.clone());
    ctx.upstream_list.push(u.clone());
    Ok(u)
}

/// `queue N [timeout=T]` (NGINX Plus): the timeout defaults to 60 s.
fn queue_args(d: &Directive) -> Result<(usize, Duration), ConfError> {
    let size = number(d, 0)?;
    if size == 0 {
        return Err(invalid(d, arg(d, 0)));
    }
    let mut timeout = Duration::from_secs(60);
    if let Some(w) = d.args.get(1) {
        let t = w.text.as_str();
        timeout = t.strip_prefix("timeout=").and_then(value::parse_time).ok_or_else(|| invalid(d, t))?;
    }
    Ok((size.min(1 << 20) as usize, timeout))
}

fn set_balance(u: &mut Upstream, b: Balance, d: &Directive) -> R {
    if u.balance != Balance::RoundRobin {
        return Err(ConfError::at("load balancing method redefined", &d.span));
    }
    u.balance = b;
    Ok(())
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]
/// [max_conns=N]` inside `upstream`.
fn peer(d: &Directive, l4: bool) -> Result<PeerConf, ConfError> {
    if d.args.is_empty() {
        return Err(ConfError::at("invalid number of arguments in \"server\" directive", &d.span));
    }
    let raw = arg(d, 0);
    if l4 && !raw.starts_with("unix:") && !has_port(raw) {
        return Err(ConfError::at(format!("no port in upstream \"{}\"", raw), &d.span));
    }
    let (addr, unix) = match raw.strip_prefix("unix:") {
        Some(path) => (UNIX_PLACEHOLDER, Some(unix_path(path).map_err(|m| ConfError::at(m, &d.span))?)),
        None => (resolve(raw).map_err(|m| ConfError::at(m, &d.span))?, None),
    };
    // Named as written: consistent hashing places a server's points by it.
    let mut p = PeerConf::new(addr, unix, raw.to_string());
    for w in d.args.iter().skip(1) {
        let t = w.text.as_str();
        let num = |v: &str| value::parse_number(v).ok_or_else(|| invalid(d, t));
        if let Some(v) = t.strip_prefix("weight=") {
            p.weight = num(v)?.clamp(1, 1_000_000) as u32;
            if num(v)? == 0 {
                return Err(invalid(d, t));
            }
        } else if let Some(v) = t.strip_prefix("max_fails=") {
            p.max_fails = num(v)?.min(u32::MAX as u64) as u32;
        } else if let Some(v) = t.strip_prefix("fail_timeout=") {
            p.fail_timeout = value::parse_time(v).ok_or_else(|| invalid(d, t))?;
        } else if let Some(v) = t.strip_prefix("max_conns=") {
            p.max_conns = num(v)?.min(u32::MAX as u64) as u32;
        } else if t == "backup" {
            p.backup = true;
        } else if t == "down" {
            p.down = true;
        } else {
            return Err(invalid(d, t));
        }
    }
    Ok(p)
}

/// Whether `host:port`, `[v6]:port` or `v4:port` names a port.
pub fn has_port(a: &str) -> bool {
    match a.strip_prefix('[') {
        Some(rest) => rest.split_once(']').is_some_and(|(_, p)| p.starts_with(':')),
        None => a.matches(':').count() == 1,
    }
}
