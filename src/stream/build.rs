//! Builds `stream {}` into [`StreamConf`], with nginx's messages: the
//! variable blocks and `log_format` first (so any template may use them),
//! then the stream level's directives, the upstreams, then each server
//! from a copy of the stream level's settings.
//!
//! The shared build state ([`Ctx`]) keeps paths, log files, certificates
//! and warnings; what nginx keeps per family (upstream names, log format
//! names) is swapped out for the stream block's own while it builds, so
//! an http upstream and a stream upstream may share a name.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::conf::*;
use super::directives::{self, Level};
use crate::config::build::Ctx;
use crate::config::family::Listen;
use crate::config::model::{MainConf, SockOpts, SslConf};
use crate::config::parser::{ConfError, Directive, Span};
use crate::config::proxy::Upstream;
use crate::variables::Template;

/// The variable blocks, built before anything else.
const VAR_BLOCKS: [&str; 3] = ["map", "geo", "split_clients"];

/// A `listen` line, before grouping.
struct ListenSpec {
    addr: SocketAddr,
    /// `listen unix:PATH` (`addr` is then `listener::unix::PLACEHOLDER`).
    unix: Option<Arc<str>>,
    udp: bool,
    ssl: bool,
    proxy_protocol: bool,
    reuseport: bool,
    bind: bool,
    default_server: bool,
    backlog: Option<i32>,
    sock: SockOpts,
    span: Span,
}

impl ListenSpec {
    /// The address as nginx names it in messages.
    fn label(&self) -> String {
        match &self.unix {
            Some(p) => format!("unix:{p}"),
            None => self.addr.to_string(),
        }
    }
}

/// A server with what grouping by address needs of it.
struct Built {
    server: Arc<Server>,
    span: Span,
    names: Vec<String>,
    regex_names: Vec<Arc<crate::pattern::Regex>>,
}

pub fn build(d: &Directive, ctx: &mut Ctx, main: &MainConf) -> Result<StreamConf, ConfError> {
    let dirs = d.block.as_deref().unwrap_or(&[]);
    // nginx keeps upstream and log format names per family.
    let saved_upstreams = std::mem::take(&mut ctx.upstreams);
    let saved_list = std::mem::take(&mut ctx.upstream_list);
    let saved_formats = std::mem::take(&mut ctx.formats);
    let r = crate::variables::scoped(&super::vars::NAMESPACE, || build_block(dirs, ctx, main));
    let upstreams = std::mem::replace(&mut ctx.upstream_list, saved_list);
    ctx.upstreams = saved_upstreams;
    ctx.formats = saved_formats;
    let mut conf = r?;
    conf.upstreams = upstreams;
    Ok(conf)
}

fn build_block(dirs: &[Directive], ctx: &mut Ctx, main: &MainConf) -> Result<StreamConf, ConfError> {
    crate::config::map::reset();
    crate::config::geo::reset();
    crate::config::split_clients::reset();
    crate::config::captures::reset();
    crate::config::captures::declare_all(dirs);
    super::vars::reset();
    declare_sets(dirs);
    // The GeoIP databases before any template: `$geoip_*` binds to them.
    super::geoip::read_main(dirs)?;
    super::geoip2::read_main(dirs, ctx)?;
    for d in dirs.iter().filter(|d| VAR_BLOCKS.contains(&d.name.as_str())) {
        directives::check(d, Level::Main)?;
        match d.name.as_str() {
            "map" => crate::config::map::map_block(d)?,
            "geo" => crate::config::geo::define(d, &mut ctx.warnings)?,
            _ => crate::config::split_clients::define(d)?,
        }
    }
    for d in dirs.iter().filter(|d| d.name == "log_format") {
        directives::check(d, Level::Main)?;
        crate::config::set_loc::log_format(d, ctx)?;
    }
    let mut zones: HashMap<String, Arc<super::limit::Zone>> = HashMap::new();
    for d in dirs.iter().filter(|d| d.name == "limit_conn_zone") {
        directives::check(d, Level::Main)?;
        let z = super::limit::zone(d)?;
        if zones.contains_key(&z.name) {
            return Err(ConfError::at(format!("duplicate zone \"{}\"", z.name), &d.span));
        }
        zones.insert(z.name.clone(), Arc::new(z));
    }
    let mut top = default_conf(main);
    let early = |n: &str| {
        VAR_BLOCKS.contains(&n)
            || n == "log_format"
            || n == "limit_conn_zone"
            || super::geoip::is_early(n)
            || n == "geoip2"
    };
    let rest: Vec<&Directive> = dirs.iter().filter(|d| !early(&d.name)).collect();
    let mut seen = Vec::new();
    for d in rest.iter().filter(|d| d.name != "server" && d.name != "upstream") {
        directives::check(d, Level::Main)?;
        directives::apply(&mut top, d, ctx, &zones, &mut seen)?;
    }
    for d in rest.iter().filter(|d| d.name == "upstream") {
        directives::check(d, Level::Main)?;
        crate::config::upstream_block::l4_upstream_block(d, ctx, &top.resolver)?;
    }
    let mut servers = Vec::new();
    let mut specs: Vec<(ListenSpec, Arc<Built>)> = Vec::new();
    for d in rest.iter().filter(|d| d.name == "server") {
        directives::check(d, Level::Main)?;
        let (server, listens, names, regex_names) = build_server(d, &top, ctx, &zones)?;
        let server = Arc::new(server);
        let built = Arc::new(Built { server: server.clone(), span: d.span.clone(), names, regex_names });
        for l in listens {
            specs.push((l, built.clone()));
        }
        servers.push(server);
    }
    let (listens, routes) = group(specs, main, &mut ctx.warnings)?;
    Ok(StreamConf { servers, listens, routes, upstreams: Vec::new(), limit_zones: zones.into_values().collect() })
}

/// Every `set $name` in the block gets its slot before any template is
/// compiled, as nginx's variables are known once parsing ends.
fn declare_sets(dirs: &[Directive]) {
    for d in dirs {
        if d.name == "set"
            && let Some(name) = d.args.first().and_then(|w| w.text.strip_prefix('$'))
        {
            super::vars::declare(name);
        }
        if let Some(b) = &d.block
            && d.name == "server"
        {
            declare_sets(b);
        }
    }
}

fn default_conf(main: &MainConf) -> SrvConf {
    SrvConf {
        error_log: main.error_log.clone(),
        access_log: Vec::new(),
        access: Arc::default(),
        proxy: ProxyConf {
            connect_timeout: Duration::from_secs(60),
            timeout: Duration::from_secs(600),
            next_upstream: true,
            next_upstream_tries: 0,
            next_upstream_timeout: Duration::ZERO,
            buffer_size: 16 * 1024,
            download_rate: Rate::Fixed(0),
            upload_rate: Rate::Fixed(0),
            requests: 0,
            responses: None,
            half_close: false,
            proxy_protocol: false,
            bind: None,
            ssl: false,
            ssl_server_name: false,
            ssl_name: None,
            ssl_verify: false,
            ssl_verify_depth: 1,
            ssl_session_reuse: true,
            ssl_trusted_certificate: None,
            ssl_certificate: None,
            ssl_certificate_key: None,
            ssl_conf_certificate: None,
            ssl_conf_key: None,
            ssl_passwords: None,
            tls: None,
        },
        tcp_nodelay: true,
        preread_buffer_size: 16 * 1024,
        preread_timeout: Duration::from_secs(30),
        proxy_protocol_timeout: Duration::from_secs(30),
        ssl_preread: false,
        ssl: SslConf {
            tls12: true,
            tls13: true,
            session_timeout: Duration::from_secs(300),
            session_tickets: true,
            verify_depth: 1,
            ..SslConf::default()
        },
        ssl_handshake_timeout: Duration::from_secs(60),
        ssl_alpn: Vec::new(),
        real_ip_from: Vec::new(),
        limit_conn: Vec::new(),
        limit_conn_log_level: crate::log::error::Level::Error,
        limit_conn_dry_run: false,
        resolver: crate::resolver::Conf::default(),
    }
}

type ServerParts = (Server, Vec<ListenSpec>, Vec<String>, Vec<Arc<crate::pattern::Regex>>);

fn build_server(
    d: &Directive,
    top: &SrvConf,
    ctx: &mut Ctx,
    zones: &HashMap<String, Arc<super::limit::Zone>>,
) -> Result<ServerParts, ConfError> {
    let mut conf = top.clone();
    let mut listens = Vec::new();
    let mut content: Option<Content> = None;
    let mut set = Vec::new();
    let mut seen = Vec::new();
    let (mut names, mut regex_names) = (Vec::new(), Vec::new());
    let mut first_name: Option<String> = None;
    let mut zone: Option<String> = None;
    for sd in d.block.as_deref().unwrap_or(&[]) {
        directives::check(sd, Level::Server)?;
        match sd.name.as_str() {
            "listen" => listens.push(listen(sd)?),
            "status_zone" => {
                if zone.is_some() {
                    return Err(ConfError::at("\"status_zone\" directive is duplicate", &sd.span));
                }
                if sd.args[0].text.is_empty() {
                    return Err(ConfError::at("empty status_zone name", &sd.span));
                }
                zone = Some(sd.args[0].text.clone());
            }
            "server_name" => crate::config::server_names::parse(sd, &mut names, &mut regex_names, &mut first_name)?,
            "proxy_pass" | "return" | "pass" => {
                if content.is_some() {
                    return Err(ConfError::at(format!("\"{}\" directive is duplicate", sd.name), &sd.span));
                }
                content = Some(match sd.name.as_str() {
                    "return" => Content::Return(compile(sd, &sd.args[0].text)?),
                    "pass" => Content::Pass(pass(sd)?),
                    _ => Content::Proxy(proxy_pass(sd, ctx)?),
                });
            }
            "set" => {
                let name =
                    sd.args[0].text.strip_prefix('$').filter(|n| !n.is_empty()).ok_or_else(|| {
                        ConfError::at(format!("invalid variable name \"{}\"", sd.args[0].text), &sd.span)
                    })?;
                let slot = super::vars::declare(name);
                set.push((slot, compile(sd, &sd.args[1].text)?));
            }
            _ => directives::apply(&mut conf, sd, ctx, zones, &mut seen)?,
        }
    }
    let Some(content) = content else {
        return Err(ConfError {
            msg: "no handler for server".into(),
            file: Some(d.span.file.as_ref().clone()),
            line: d.span.line,
        });
    };
    if listens.is_empty() {
        return Err(ConfError {
            msg: "no \"listen\" is defined for server".into(),
            file: Some(d.span.file.as_ref().clone()),
            line: d.span.line,
        });
    }
    // A server on a TLS address may be picked by SNI even when its own
    // `listen` has no `ssl`: its TLS is built whenever it has certificates.
    let tls = super::tls::server_tls(&conf, &d.span, ctx)?;
    if let Some(c) = conf.proxy.ssl_conf_certificate.clone() {
        conf.proxy.ssl_certificate = Some(c);
    }
    if let Some(k) = conf.proxy.ssl_conf_key.clone() {
        conf.proxy.ssl_certificate_key = Some(k);
    }
    if conf.proxy.ssl {
        conf.proxy.tls = Some(super::tls::client_config(&conf.proxy, &d.span)?);
    }
    // nginx: a server without server_name has the name "".
    if names.is_empty() && regex_names.is_empty() {
        names.push(String::new());
    }
    let name = first_name.unwrap_or_default();
    let zone = zone.unwrap_or_else(|| {
        let l = &listens[0];
        if l.udp { format!("{} udp", l.label()) } else { l.label() }
    });
    let zone = crate::metrics::l4::session_zone(&zone);
    Ok((Server { name, conf, content, set, tls, zone }, listens, names, regex_names))
}

/// `pass ADDRESS`: an IP address and port (a host name is looked up now),
/// or a value with variables.
fn pass(d: &Directive) -> Result<PassTo, ConfError> {
    let raw = d.args[0].text.as_str();
    if raw.contains('$') {
        return Ok(PassTo::Vars(compile(d, raw)?));
    }
    if raw.starts_with("unix:") {
        return Err(ConfError::at(format!("\"pass\" to a unix socket (\"{raw}\") is not supported yet"), &d.span));
    }
    if !crate::config::upstream_block::has_port(raw) {
        return Err(ConfError::at(format!("no port in upstream \"{}\"", raw), &d.span));
    }
    crate::config::proxy::resolve(raw).map(PassTo::Fixed).map_err(|m| ConfError::at(m, &d.span))
}

pub(super) fn compile(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

/// `proxy_pass ADDRESS | UPSTREAM | $value`.
fn proxy_pass(d: &Directive, ctx: &mut Ctx) -> Result<Pass, ConfError> {
    let raw = d.args[0].text.as_str();
    if raw.contains('$') {
        return Ok(Pass::Vars(Arc::new(compile(d, raw)?)));
    }
    if let Some(u) = ctx.upstreams.get(raw) {
        return Ok(Pass::Fixed(u.clone()));
    }
    // An upstream defined later in the block counts too.
    Ok(Pass::Fixed(Arc::new(implicit_upstream(raw, ctx.upstream_list.len()).map_err(|m| ConfError::at(m, &d.span))?)))
}

/// `proxy_pass host:port` (or `unix:/path`) without an upstream block: a
/// one-peer upstream, as nginx makes one.
pub fn implicit_upstream(raw: &str, index: usize) -> Result<Upstream, String> {
    use crate::config::proxy::{Balance, PeerConf, UNIX_PLACEHOLDER, unix_path};
    let (addr, unix) = match raw.strip_prefix("unix:") {
        Some(path) => (UNIX_PLACEHOLDER, Some(unix_path(path)?)),
        None => {
            if !crate::config::upstream_block::has_port(raw) {
                return Err(format!("no port in upstream \"{}\"", raw));
            }
            (crate::config::proxy::resolve(raw)?, None)
        }
    };
    let name = if unix.is_some() { raw.to_string() } else { addr.to_string() };
    Ok(Upstream {
        name: raw.to_string(),
        index,
        peers: vec![PeerConf::new(addr, unix, name)],
        balance: Balance::RoundRobin,
        keepalive: 0,
        keepalive_requests: 0,
        keepalive_timeout: Duration::ZERO,
        keepalive_time: Duration::ZERO,
        implicit: true,
        queue: None,
        check: None,
        zone: None,
        sticky: None,
    })
}

/// `listen ADDRESS:PORT [ssl] [udp] [proxy_protocol] [backlog=N]
/// [reuseport] [bind] [so_keepalive=...] [rcvbuf=] [sndbuf=] [fastopen=]`.
fn listen(d: &Directive) -> Result<ListenSpec, ConfError> {
    let raw = d.args[0].text.as_str();
    let (addr, unix) = crate::config::set_server::family_listen_target(raw).map_err(|m| ConfError::at(m, &d.span))?;
    let mut l = ListenSpec {
        addr,
        unix,
        udp: false,
        ssl: false,
        proxy_protocol: false,
        reuseport: false,
        bind: false,
        default_server: false,
        backlog: None,
        sock: SockOpts::default(),
        span: d.span.clone(),
    };
    for w in d.args.iter().skip(1) {
        let p = w.text.as_str();
        match p {
            "udp" => l.udp = true,
            "ssl" => l.ssl = true,
            "proxy_protocol" => l.proxy_protocol = true,
            "reuseport" => l.reuseport = true,
            "bind" => l.bind = true,
            "default_server" => l.default_server = true,
            _ => {
                if let Some(v) = p.strip_prefix("backlog=") {
                    match crate::config::value::parse_number(v) {
                        Some(n) if n > 0 && n <= i32::MAX as u64 => l.backlog = Some(n as i32),
                        _ => return Err(ConfError::at(format!("invalid backlog \"{}\"", p), &d.span)),
                    }
                } else if let Some(v) = p.strip_prefix("ipv6only=") {
                    if v != "on" && v != "off" {
                        return Err(ConfError::at(format!("invalid ipv6only flags \"{}\"", v), &d.span));
                    }
                } else if let Some(r) = crate::config::set_server::sock_opt(p, &mut l.sock) {
                    r.map_err(|m| ConfError::at(m, &d.span))?;
                } else {
                    return Err(ConfError::at(format!("invalid parameter \"{}\"", p), &d.span));
                }
            }
        }
    }
    if l.udp && l.ssl {
        return Err(ConfError::at("\"ssl\" parameter is incompatible with \"udp\"", &d.span));
    }
    if l.udp && l.backlog.is_some() {
        return Err(ConfError::at("\"backlog\" parameter is incompatible with \"udp\"", &d.span));
    }
    // so_keepalive's timings set it on too.
    if l.udp && l.sock.keepalive.is_some() {
        return Err(ConfError::at("\"so_keepalive\" parameter is incompatible with \"udp\"", &d.span));
    }
    if l.udp && l.proxy_protocol {
        return Err(ConfError::at("\"proxy_protocol\" parameter is incompatible with \"udp\"", &d.span));
    }
    Ok(l)
}

/// The sockets to bind and what each carries: the servers listening on
/// one address share it (picked by `server_name`), with the address's
/// flags joined; a specific address covered by a wildcard on its port
/// (same protocol, no `bind`) rides on the wildcard's socket.
fn group(
    specs: Vec<(ListenSpec, Arc<Built>)>,
    main: &MainConf,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Listen>, Vec<Route>), ConfError> {
    struct Acc<'a> {
        first: &'a ListenSpec,
        ssl: bool,
        proxy_protocol: bool,
        bind: bool,
        reuseport: bool,
        backlog: Option<i32>,
        sock: SockOpts,
        default: Option<&'a Arc<Built>>,
        members: Vec<&'a Arc<Built>>,
    }
    let mut accs: Vec<Acc> = Vec::new();
    for (l, b) in &specs {
        let i = match accs.iter().position(|a| a.first.addr == l.addr && a.first.udp == l.udp && a.first.unix == l.unix)
        {
            Some(i) => i,
            None => {
                accs.push(Acc {
                    first: l,
                    ssl: false,
                    proxy_protocol: false,
                    bind: false,
                    reuseport: false,
                    backlog: None,
                    sock: SockOpts::default(),
                    default: None,
                    members: Vec::new(),
                });
                accs.len() - 1
            }
        };
        let a = &mut accs[i];
        if a.members.iter().any(|m| Arc::ptr_eq(m, b)) {
            let proto = if l.udp { "udp " } else { "" };
            return Err(ConfError::at(format!("duplicate \"{}{}\" address and port pair", proto, l.label()), &l.span));
        }
        a.members.push(b);
        a.ssl |= l.ssl;
        a.proxy_protocol |= l.proxy_protocol;
        let opts = l.bind || l.reuseport || l.backlog.is_some() || l.sock != SockOpts::default();
        if opts {
            if a.bind || a.reuseport || a.backlog.is_some() || a.sock != SockOpts::default() {
                return Err(ConfError::at(format!("duplicate listen options for {}", l.label()), &l.span));
            }
            a.bind = l.bind;
            a.reuseport = l.reuseport;
            a.backlog = l.backlog;
            a.sock = l.sock;
        }
        if l.default_server {
            if a.default.is_some() {
                return Err(ConfError::at(format!("a duplicate default server for {}", l.label()), &l.span));
            }
            a.default = Some(b);
        }
    }
    let mut addrs = Vec::new();
    for a in &accs {
        let default = a.default.unwrap_or(a.members[0]);
        if a.ssl && default.server.tls.is_none() {
            return Err(ConfError::at("no \"ssl_certificate\" is defined for server", &default.span));
        }
        let mut names = crate::config::server_names::ServerNames::default();
        for m in &a.members {
            for n in &m.names {
                if !names.add(n, &m.server) {
                    let msg = format!("conflicting server name \"{n}\" on {}, ignored", a.first.label());
                    warnings.push(ConfError::at(msg, &m.span).to_string());
                }
            }
            for r in &m.regex_names {
                names.add_regex(r, &m.server);
            }
        }
        names.sort();
        addrs.push(Arc::new(Addr {
            addr: a.first.addr,
            unix: a.first.unix.clone(),
            udp: a.first.udp,
            ssl: a.ssl,
            proxy_protocol: a.proxy_protocol,
            server: default.server.clone(),
            names,
            peek: a.members.iter().any(|m| matches!(m.server.content, Content::Pass(_))),
        }));
    }
    let wildcard_of = |a: &Acc| {
        accs.iter().position(|w| {
            w.first.unix.is_none()
                && a.first.unix.is_none()
                && w.first.addr.ip().is_unspecified()
                && w.first.addr.port() == a.first.addr.port()
                && w.first.addr.is_ipv4() == a.first.addr.is_ipv4()
                && w.first.udp == a.first.udp
        })
    };
    let mut listens = Vec::new();
    let mut routes: Vec<Route> = Vec::new();
    let mut slot_of: Vec<Option<usize>> = vec![None; accs.len()];
    for (i, a) in accs.iter().enumerate() {
        let covered =
            !a.bind && a.first.unix.is_none() && !a.first.addr.ip().is_unspecified() && wildcard_of(a).is_some();
        if covered {
            continue;
        }
        slot_of[i] = Some(listens.len());
        listens.push(Listen {
            addr: a.first.addr,
            unix: a.first.unix.clone(),
            udp: a.first.udp,
            reuseport: a.reuseport || main.reuse_port,
            backlog: a.backlog.unwrap_or(511),
            sock: a.sock,
        });
        routes.push(Route { own: addrs[i].clone(), specific: Vec::new() });
    }
    for (i, a) in accs.iter().enumerate() {
        if slot_of[i].is_some() {
            continue;
        }
        if let Some(w) = wildcard_of(a).and_then(|w| slot_of[w]) {
            routes[w].specific.push(addrs[i].clone());
        }
    }
    Ok((listens, routes))
}
