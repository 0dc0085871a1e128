//! nginx's `resolver` and `resolver_timeout`: the DNS servers that turn a
//! host name into addresses at request time, for `proxy_pass` with
//! variables (`proxy_pass http://$backend;` with a name in `$backend`).
//! Names in a fixed `proxy_pass` or an `upstream` are resolved once, when
//! the configuration loads, as nginx does.
//!
//! Each worker asks the servers itself over UDP (no thread, no blocking
//! call on the event loop) and keeps answers for their TTL, or for
//! `valid=` when given, as nginx's resolver caches them. Servers are tried
//! in turn until one answers, all within `resolver_timeout`.

pub mod query;
pub mod wire;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, MANY, R, Set, cmd};

pub static DIRECTIVES: &[Cmd] = &[
    cmd("resolver", HSL, 1, MANY, Set::Loc(resolver)),
    cmd("resolver_timeout", HSL, 1, 1, Set::Loc(resolver_timeout)),
];

/// The `resolver` of a level.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolverConf {
    pub servers: Arc<Vec<SocketAddr>>,
    /// `valid=`: how long answers are kept, whatever their TTL.
    pub valid: Option<Duration>,
    pub ipv4: bool,
    pub ipv6: bool,
}

/// The module's settings at one level (`LocConf::resolver`).
#[derive(Clone, Debug)]
pub struct Conf {
    pub resolver: Option<ResolverConf>,
    pub timeout: Duration,
}

impl Default for Conf {
    fn default() -> Self {
        Conf { resolver: None, timeout: Duration::from_secs(30) }
    }
}

fn resolver(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.resolver.resolver = Some(parse(d)?);
    Ok(())
}

/// `resolver ADDR... [valid=T] [ipv4=] [ipv6=]` (also inside an
/// `upstream` block).
pub fn parse(d: &Directive) -> Result<ResolverConf, ConfError> {
    let mut r = ResolverConf { servers: Arc::new(Vec::new()), valid: None, ipv4: true, ipv6: true };
    let mut servers = Vec::new();
    for w in &d.args {
        let a = w.text.as_str();
        let invalid = || ConfError::at(format!("invalid parameter: {a}"), &d.span);
        if let Some(v) = a.strip_prefix("valid=") {
            let t = crate::config::value::parse_time(v).ok_or_else(invalid)?;
            r.valid = Some(t);
        } else if let Some(v) = a.strip_prefix("ipv4=") {
            r.ipv4 = crate::config::value::parse_flag(v).ok_or_else(invalid)?;
        } else if let Some(v) = a.strip_prefix("ipv6=") {
            r.ipv6 = crate::config::value::parse_flag(v).ok_or_else(invalid)?;
        } else if a.starts_with("status_zone=") {
            // NGINX Plus's statistics zone: nothing to count it in here.
        } else {
            servers.push(
                server_addr(a).ok_or_else(|| ConfError::at(format!("host not found in resolver \"{a}\""), &d.span))?,
            );
        }
    }
    if !r.ipv4 && !r.ipv6 {
        return Err(ConfError::at("\"ipv4\" and \"ipv6\" cannot both be \"off\"", &d.span));
    }
    if servers.is_empty() {
        return Err(ConfError::at("invalid number of arguments in \"resolver\" directive", &d.span));
    }
    r.servers = Arc::new(servers);
    Ok(r)
}

/// `1.2.3.4`, `1.2.3.4:5353`, `[::1]`, `[::1]:53`, `::1`, or a host name
/// (resolved now, as nginx does).
fn server_addr(a: &str) -> Option<SocketAddr> {
    if let Ok(ip) = a.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 53));
    }
    if let Ok(sa) = a.parse::<SocketAddr>() {
        return Some(sa);
    }
    if let Some(v6) = a.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return v6.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53));
    }
    use std::net::ToSocketAddrs;
    let with_port = if a.contains(':') { a.to_string() } else { format!("{a}:53") };
    with_port.to_socket_addrs().ok()?.next()
}

fn resolver_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    c.resolver.timeout = crate::config::value::parse_time(v)
        .ok_or_else(|| ConfError::at(format!("invalid value \"{v}\" in \"resolver_timeout\" directive"), &d.span))?;
    Ok(())
}

/// A lowercase name and the servers asked.
type Key = (String, Arc<Vec<SocketAddr>>);

/// A worker's answers, by lowercase name and resolver: the addresses (none:
/// the name does not exist) and until when they are kept.
#[derive(Default)]
pub struct Cache {
    names: HashMap<Key, (Vec<IpAddr>, Instant)>,
    next_id: u16,
}

/// Names kept per worker before the cache starts over (names can come
/// from clients through variables).
const MAX_NAMES: usize = 1024;

impl Cache {
    fn get(&self, key: &Key, now: Instant) -> Option<Vec<IpAddr>> {
        self.names.get(key).filter(|(_, until)| *until > now).map(|(a, _)| a.clone())
    }

    fn put(&mut self, key: Key, addrs: Vec<IpAddr>, until: Instant) {
        if self.names.len() >= MAX_NAMES {
            self.names.retain(|_, (_, u)| *u > Instant::now());
            if self.names.len() >= MAX_NAMES {
                self.names.clear();
            }
        }
        self.names.insert(key, (addrs, until));
    }

    fn id(&mut self) -> u16 {
        // Unpredictable enough that an off-path guess rarely lands; the
        // answer must also repeat the question.
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        self.next_id = self.next_id.wrapping_add(1).wrapping_mul(31) ^ (nanos as u16);
        self.next_id
    }
}

/// `name`'s addresses (IPv4 first), or nginx's reason in its words
/// (`110: Operation timed out`, `3: Host not found`).
pub async fn lookup(
    cache: &std::cell::RefCell<Cache>,
    conf: &ResolverConf,
    timeout: Duration,
    name: &str,
) -> Result<Vec<IpAddr>, &'static str> {
    let key = (name.to_ascii_lowercase(), conf.servers.clone());
    if let Some(a) = cache.borrow().get(&key, Instant::now()) {
        return if a.is_empty() { Err(wire::Failure::HostNotFound.nginx_text()) } else { Ok(a) };
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    let types: &[u16] = match (conf.ipv4, conf.ipv6) {
        (true, true) => &[wire::A, wire::AAAA],
        (true, false) => &[wire::A],
        _ => &[wire::AAAA],
    };
    let mut failure = None;
    for &qtype in types {
        let id = cache.borrow_mut().id();
        match ask(conf, &key.0, qtype, id, deadline).await {
            Ok((mut a, t)) => {
                if !a.is_empty() {
                    ttl = ttl.min(t);
                }
                addrs.append(&mut a);
            }
            Err(f) => failure = Some(f),
        }
    }
    if addrs.is_empty() {
        let why = failure.unwrap_or(wire::Failure::HostNotFound.nginx_text());
        // nginx keeps a negative answer briefly too (30 s, or `valid=`).
        if why == wire::Failure::HostNotFound.nginx_text() {
            let keep = conf.valid.unwrap_or(Duration::from_secs(30));
            cache.borrow_mut().put(key, Vec::new(), Instant::now() + keep);
        }
        return Err(why);
    }
    let keep = conf.valid.unwrap_or(Duration::from_secs(u64::from(ttl)));
    cache.borrow_mut().put(key, addrs.clone(), Instant::now() + keep);
    Ok(addrs)
}

/// One question to the servers in turn, until one answers it.
async fn ask(
    conf: &ResolverConf,
    name: &str,
    qtype: u16,
    id: u16,
    deadline: tokio::time::Instant,
) -> Result<(Vec<IpAddr>, u32), &'static str> {
    let q = wire::query(id, name, qtype).ok_or(wire::Failure::HostNotFound.nginx_text())?;
    let per_server = deadline.saturating_duration_since(tokio::time::Instant::now()) / conf.servers.len().max(1) as u32;
    let mut last = "110: Operation timed out";
    for server in conf.servers.iter() {
        let bind: SocketAddr =
            if server.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (IpAddr::from([0u16; 8]), 0).into() };
        let Ok(sock) = tokio::net::UdpSocket::bind(bind).await else { continue };
        if sock.connect(server).await.is_err() || sock.send(&q).await.is_err() {
            last = "111: Connection refused";
            continue;
        }
        let until = (tokio::time::Instant::now() + per_server).min(deadline);
        let mut buf = vec![0u8; 4096];
        loop {
            match tokio::time::timeout_at(until, sock.recv(&mut buf)).await {
                Ok(Ok(n)) => match wire::parse_answer(&buf[..n], id, name, qtype) {
                    Ok(found) => return Ok(found),
                    // Someone else's datagram: keep waiting for ours.
                    Err(wire::Failure::Malformed) => continue,
                    Err(f) => return Err(f.nginx_text()),
                },
                Ok(Err(_)) => {
                    last = "111: Connection refused";
                    break;
                }
                Err(_) => {
                    last = "110: Operation timed out";
                    break;
                }
            }
        }
    }
    Err(last)
}
