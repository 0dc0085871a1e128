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

/// Builds an `upstream NAME { ... }` block; `http` is the http level's
/// `resolver` settings, which an upstream without its own inherits.
pub fn upstream_block(d: &Directive, ctx: &mut Ctx, http: &crate::resolver::Conf) -> Result<Arc<Upstream>, ConfError> {
    build(d, ctx, false, Some(http))
}

/// The same block in a family that proxies bytes rather than requests
/// (nginx's `stream` upstreams): no keep-alive pool, `queue`, `ip_hash` or
/// `check`, and every server names its port.
pub fn l4_upstream_block(
    d: &Directive,
    ctx: &mut Ctx,
    stream: &crate::resolver::Conf,
) -> Result<Arc<Upstream>, ConfError> {
    build(d, ctx, true, Some(stream))
}

fn build(
    d: &Directive,
    ctx: &mut Ctx,
    l4: bool,
    http: Option<&crate::resolver::Conf>,
) -> Result<Arc<Upstream>, ConfError> {
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
        zone: None,
        sticky: None,
    };
    // `zone`, `resolver`, `resolver_timeout` and the servers as written.
    let mut zone: Option<String> = None;
    let mut resolver = crate::resolver::Conf::default();
    let (mut own_resolver, mut own_timeout) = (false, false);
    let mut specs: Vec<crate::upstream::zone::ServerSpec> = Vec::new();
    let mut queue: Option<(usize, Duration)> = None;
    let mut check = crate::upstream::check::conf::Pending::default();
    let mut seen: Vec<&str> = Vec::new();
    let mut state: Option<(std::path::PathBuf, crate::config::parser::Span)> = None;
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
        // http's upstream directives are known to nginx (its http modules),
        // so a stream upstream refuses them as misplaced; NGINX Plus's
        // `queue` and `sticky` and Tengine's check option are no nginx
        // module's: unknown there.
        if l4
            && matches!(
                sub.name.as_str(),
                "keepalive" | "keepalive_requests" | "keepalive_timeout" | "keepalive_time" | "ip_hash"
            )
        {
            return Err(ConfError::at(format!("\"{}\" directive is not allowed here", sub.name), &sub.span));
        }
        if l4 && matches!(sub.name.as_str(), "queue" | "check_keepalive_requests" | "sticky") {
            return Err(ConfError::at(format!("unknown directive \"{}\"", sub.name), &sub.span));
        }
        match sub.name.as_str() {
            "server" => specs.push(peer(sub, l4)?),
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
            "zone" if (1..=2).contains(&nargs) => {
                once(&mut seen, "zone")?;
                if let Some(size) = sub.args.get(1) {
                    let n = value::parse_size(&size.text)
                        .ok_or_else(|| ConfError::at(format!("invalid zone size \"{}\"", size.text), &sub.span))?;
                    if n < 8 * 4096 {
                        return Err(ConfError::at(format!("zone \"{}\" is too small", arg(sub, 0)), &sub.span));
                    }
                }
                zone = Some(arg(sub, 0).to_string());
            }
            "zone" => return Err(bad_args()),
            "state" if nargs == 1 => {
                once(&mut seen, "state")?;
                state = Some((ctx.path(arg(sub, 0)), sub.span.clone()));
            }
            "state" => return Err(bad_args()),
            "resolver" => {
                once(&mut seen, "resolver")?;
                resolver.resolver = Some(crate::resolver::parse(sub)?);
                own_resolver = true;
            }
            "resolver_timeout" if nargs == 1 => {
                once(&mut seen, "resolver_timeout")?;
                let v = arg(sub, 0);
                resolver.timeout = value::parse_time(v).ok_or_else(|| {
                    ConfError::at(format!("invalid value \"{v}\" in \"resolver_timeout\" directive"), &sub.span)
                })?;
                own_timeout = true;
            }
            "sticky" => {
                once(&mut seen, "sticky")?;
                let s = crate::upstream::sticky::conf::directive(sub, &mut ctx.sticky_zones)?;
                if let crate::upstream::sticky::Sticky::Learn(l) = &s {
                    let name = &l.table.name;
                    if ctx.cache_zones.contains_key(name) || ctx.limit_zones.contains_key(name) {
                        return Err(ConfError::at(
                            format!("the shared memory zone \"{name}\" is already declared for a different use"),
                            &sub.span,
                        ));
                    }
                }
                u.sticky = Some(Arc::new(s));
            }
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
    let state_file = match state {
        Some((path, span)) => {
            if !specs.is_empty() {
                return Err(ConfError::at("\"state\" directive is incompatible with \"server\"", &span));
            }
            if zone.is_none() {
                return Err(ConfError::at(
                    format!("\"state\" requires upstream \"{}\" to be in shared memory", name),
                    &span,
                ));
            }
            specs = read_state(&path, l4)?;
            Some(path)
        }
        None => None,
    };
    if specs.is_empty() && state_file.is_none() {
        return Err(ConfError {
            msg: "no servers are inside upstream".to_string(),
            file: Some(d.span.file.as_ref().clone()),
            line: d.end_line,
        });
    }
    // The balancer refuses what nginx refuses at parse time (backup with
    // hash, ip_hash or random): checked on every server as written.
    u.peers = specs.iter().map(|s| s.params.clone()).collect();
    // (An empty `state` file is an upstream with no servers yet.)
    if let Err(e) = crate::upstream::peers::build_balancer(&u).map_err(|e| (e, u.peers.is_empty()))
        && !e.1
    {
        let e = e.0;
        return Err(ConfError { msg: e, file: Some(d.span.file.as_ref().clone()), line: d.end_line });
    }
    let resolvable = specs.iter().any(|s| s.resolve);
    let at = format!("{}:{}", d.span.file.display(), d.span.line);
    if resolvable && zone.is_none() {
        return Err(ConfError {
            msg: format!("resolving names at run time requires upstream \"{}\" in {} to be in shared memory", name, at),
            file: None,
            line: 0,
        });
    }
    // Without a zone slow_start would have nothing to act on (sluice
    // keeps its ramp in the zone's shared peer state). `drain` works
    // either way (a drained peer takes only its sticky sessions).
    if zone.is_none() && specs.iter().any(|s| !s.params.slow_start.is_zero()) {
        return Err(ConfError {
            msg: format!("\"slow_start\" requires upstream \"{}\" in {} to be in shared memory", name, at),
            file: None,
            line: 0,
        });
    }
    if let Some(http) = http.filter(|_| !own_resolver) {
        resolver.resolver = http.resolver.clone();
    }
    if let Some(http) = http.filter(|_| !own_timeout) {
        resolver.timeout = http.timeout;
    }
    if resolvable && resolver.resolver.is_none() {
        return Err(ConfError {
            msg: format!("no resolver defined to resolve names at run time in upstream \"{}\" in {}", name, at),
            file: None,
            line: 0,
        });
    }
    if resolvable && queue.is_some() {
        return Err(ConfError::at(
            format!("\"queue\" is not supported with resolvable servers in upstream \"{}\"", name),
            &d.span,
        ));
    }
    if state_file.is_some() && queue.is_some() {
        return Err(ConfError::at(
            format!("\"queue\" is not supported with \"state\" in upstream \"{}\"", name),
            &d.span,
        ));
    }
    if let Some((size, timeout)) = queue {
        u.queue = Some(Arc::new(crate::upstream::queue::Queue::new(size, timeout, &u.peers)));
    }
    u.check = crate::upstream::check::conf::finish(check, &u.name, &u.peers);
    let dynamic = resolvable || state_file.is_some();
    if let Some(zone_name) = zone.filter(|_| u.queue.is_none() && (dynamic || u.check.is_none())) {
        // The servers may change at run time (resolution, the API) and
        // their state is every worker's: every worker reads them from the
        // zone, `peers` stays empty. (With `queue`, whose slots are
        // counted by position, the servers stay as written; so do they
        // with `check` alone, which `check_status` lists by position.)
        let backups = matches!(u.balance, Balance::RoundRobin | Balance::LeastConn);
        let conf = crate::upstream::zone::ZoneConf {
            family: if l4 { "stream" } else { "http" },
            name: zone_name,
            resolver: resolver.resolver.clone(),
            resolver_timeout: resolver.timeout,
            backups,
            check: u.check.take().map(|c| c.conf.clone()),
            state: state_file,
            l4,
        };
        u.zone = Some(Arc::new(crate::upstream::zone::Zone::new(&u.name, conf, specs)));
        u.peers = Vec::new();
    }
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

/// NGINX Plus's `state FILE`: the servers kept in a file of `server`
/// lines (what the run-time API writes); a missing file is an empty list,
/// a file that does not parse is an error naming its line.
fn read_state(path: &std::path::Path, l4: bool) -> Result<Vec<crate::upstream::zone::ServerSpec>, ConfError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            let e = crate::process::signal::os_error(&e);
            return Err(ConfError::plain(format!("open() \"{}\" failed ({})", path.display(), e)));
        }
    };
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    let parsed = crate::config::parser::parse_str(&text, path, dir)?;
    let mut specs = Vec::new();
    for d in &parsed.directives {
        if d.name != "server" || d.block.is_some() {
            return Err(ConfError::at(format!("unknown directive \"{}\"", d.name), &d.span));
        }
        specs.push(server_spec(d, l4)?);
    }
    Ok(specs)
}

/// A `server` line of a `state` file or an API request, as the
/// configuration's.
pub fn server_spec(d: &Directive, l4: bool) -> Result<crate::upstream::zone::ServerSpec, ConfError> {
    peer(d, l4)
}

/// `server ADDR [weight=N] [max_fails=N] [fail_timeout=T] [backup] [down]
/// [max_conns=N] [resolve] [service=NAME] [route=STRING] [slow_start=T]
/// [drain]` inside `upstream`. A name with
/// `resolve` is not resolved now: the zone's resolution finds its
/// addresses once workers run (`upstream::zone::resolve`).
fn peer(d: &Directive, l4: bool) -> Result<crate::upstream::zone::ServerSpec, ConfError> {
    if d.args.is_empty() {
        return Err(ConfError::at("invalid number of arguments in \"server\" directive", &d.span));
    }
    let raw = arg(d, 0);
    let mut resolve_flag = false;
    let mut service: Option<String> = None;
    for w in d.args.iter().skip(1) {
        let t = w.text.as_str();
        if t == "resolve" {
            resolve_flag = true;
        } else if let Some(v) = t.strip_prefix("service=") {
            if v.is_empty() {
                return Err(ConfError::at(format!("invalid service \"{}\"", v), &d.span));
            }
            service = Some(v.to_string());
        }
    }
    if service.is_some() && !resolve_flag {
        return Err(ConfError::at(format!("service upstream \"{}\" requires \"resolve\" parameter", raw), &d.span));
    }
    if l4 && service.is_none() && !raw.starts_with("unix:") && !has_port(raw) {
        return Err(ConfError::at(format!("no port in upstream \"{}\"", raw), &d.span));
    }
    // `resolve` on an address (or a socket) is a static server.
    let (host, port) = split_host(raw);
    let is_name = !raw.starts_with("unix:") && host.parse::<std::net::IpAddr>().is_err();
    let dynamic = resolve_flag && is_name;
    if service.is_some() && !dynamic {
        return Err(ConfError::at(format!("service upstream \"{}\" requires domain name", raw), &d.span));
    }
    if service.is_some() && port.is_some() {
        return Err(ConfError::at(format!("service upstream \"{}\" may not have port", raw), &d.span));
    }
    let (addr, unix) = match raw.strip_prefix("unix:") {
        Some(path) => (UNIX_PLACEHOLDER, Some(unix_path(path).map_err(|m| ConfError::at(m, &d.span))?)),
        None if dynamic => {
            let port = match port {
                Some(p) => p
                    .parse::<u16>()
                    .ok()
                    .filter(|&p| p != 0)
                    .ok_or_else(|| ConfError::at(format!("invalid port in upstream \"{}\"", raw), &d.span))?,
                None if service.is_some() => 0,
                None => 80,
            };
            (std::net::SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), port), None)
        }
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
        } else if let Some(v) = t.strip_prefix("slow_start=") {
            p.slow_start = value::parse_time(v).ok_or_else(|| invalid(d, t))?;
        } else if t == "drain" {
            p.drain = true;
        } else if let Some(v) = t.strip_prefix("route=") {
            // For `sticky`, which stream upstreams do not have.
            if l4 || v.is_empty() || v.len() > 32 {
                return Err(invalid(d, t));
            }
            p.route = Some(v.into());
        } else if t == "backup" {
            p.backup = true;
        } else if t == "down" {
            p.down = true;
        } else if t == "resolve" || t.starts_with("service=") {
            // Read above.
        } else {
            return Err(invalid(d, t));
        }
    }
    Ok(crate::upstream::zone::ServerSpec {
        server: raw.to_string(),
        resolve: dynamic,
        host: host.to_string(),
        service: if dynamic { service } else { None },
        params: p,
    })
}

/// `host:port` as (host, Some(port)); `[v6]:port`, `[v6]`, `host`.
fn split_host(a: &str) -> (&str, Option<&str>) {
    if let Some(rest) = a.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => (a, None),
        };
    }
    match a.split_once(':') {
        Some((h, p)) if !p.contains(':') => (h, Some(p)),
        _ => (a, None),
    }
}

/// Whether `host:port`, `[v6]:port` or `v4:port` names a port.
pub fn has_port(a: &str) -> bool {
    match a.strip_prefix('[') {
        Some(rest) => rest.split_once(']').is_some_and(|(_, p)| p.starts_with(':')),
        None => a.matches(':').count() == 1,
    }
}
