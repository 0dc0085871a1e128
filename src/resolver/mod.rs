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

/// Which resolver an answer came from. nginx keeps a cache per `resolver`
/// directive; here the answers are shared by the directives that would get
/// the same ones: the same servers, families and `valid=`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Which {
    servers: Arc<Vec<SocketAddr>>,
    ipv4: bool,
    ipv6: bool,
    valid: Option<Duration>,
}

impl Which {
    fn of(conf: &ResolverConf) -> Which {
        Which { servers: conf.servers.clone(), ipv4: conf.ipv4, ipv6: conf.ipv6, valid: conf.valid }
    }
}

/// A lowercase name and the resolver asked.
type Key = (String, Which);

/// What a name was found to be.
#[derive(Clone, Debug, PartialEq)]
enum Answer {
    /// Its addresses, IPv4 first, duplicates kept (a peer each).
    Addrs(Vec<IpAddr>),
    /// An alias: the answer is the target's (cached apart, for its own
    /// TTL), as nginx keeps a CNAME node.
    Cname(String),
    /// NXDOMAIN, or no record of either family.
    NotFound,
}

/// A worker's answers, by lowercase name and resolver, and until when they
/// are kept; and each resolver's next server (nginx's round robin: each
/// name asked starts at the next server).
#[derive(Default)]
pub struct Cache {
    names: HashMap<Key, (Answer, Instant)>,
    next_server: HashMap<Which, usize>,
}

/// Names kept per worker before the cache starts over (names can come
/// from clients through variables).
const MAX_NAMES: usize = 1024;

/// How long a name that does not exist is remembered without `valid=`
/// (nginx's 10 seconds).
const NXDOMAIN_KEEP: Duration = Duration::from_secs(10);

impl Cache {
    fn get(&self, key: &Key, now: Instant) -> Option<Answer> {
        self.names.get(key).filter(|(_, until)| *until > now).map(|(a, _)| a.clone())
    }

    fn put(&mut self, key: Key, answer: Answer, until: Instant) {
        if self.names.len() >= MAX_NAMES {
            self.names.retain(|_, (_, u)| *u > Instant::now());
            if self.names.len() >= MAX_NAMES {
                self.names.clear();
                self.next_server.clear();
            }
        }
        self.names.insert(key, (answer, until));
    }

    /// The server a new name's questions go to first.
    fn start(&mut self, which: &Which) -> usize {
        let n = which.servers.len().max(1);
        let next = self.next_server.entry(which.clone()).or_insert(0);
        let start = *next % n;
        *next = (start + 1) % n;
        start
    }
}

/// `name`'s addresses (IPv4 first, duplicates kept), or nginx's reason in
/// its words (`110: Operation timed out`, `3: Host not found`). A CNAME is
/// followed with a new question for its target (at most
/// [`query::MAX_CNAMES`] of them), each step cached for its own TTL, all
/// within `timeout`.
pub async fn lookup(
    cache: &std::cell::RefCell<Cache>,
    conf: &ResolverConf,
    timeout: Duration,
    name: &str,
) -> Result<Vec<IpAddr>, &'static str> {
    let deadline = tokio::time::Instant::now() + timeout;
    let which = Which::of(conf);
    let mut name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    for _ in 0..=query::MAX_CNAMES {
        let key = (name, which.clone());
        let cached = cache.borrow().get(&key, Instant::now());
        let answer = match cached {
            Some(a) => a,
            None => {
                let start = cache.borrow_mut().start(&which);
                let (answer, ttl) = ask(conf, start, &key.0, deadline).await.map_err(wire::Failure::nginx_text)?;
                let keep = conf.valid.unwrap_or(match answer {
                    Answer::NotFound => NXDOMAIN_KEEP,
                    _ => Duration::from_secs(u64::from(ttl)),
                });
                cache.borrow_mut().put(key.clone(), answer.clone(), Instant::now() + keep);
                answer
            }
        };
        match answer {
            Answer::Addrs(a) => return Ok(a),
            Answer::NotFound => break,
            Answer::Cname(next) => name = next.to_ascii_lowercase(),
        }
    }
    Err(wire::Failure::HostNotFound.nginx_text())
}

/// The A and AAAA questions for `name` (as `ipv4=` and `ipv6=` say), sent
/// together, and what their answers make of it, as nginx's resolver reads
/// them: any error fails the name (an NXDOMAIN is cached as such); else
/// the addresses of both; else the last answer (AAAA's when asked) decides
/// between an alias and no such host. The TTL is the smallest of the
/// answers that gave addresses, or the alias's.
async fn ask(
    conf: &ResolverConf,
    start: usize,
    name: &str,
    deadline: tokio::time::Instant,
) -> Result<(Answer, u32), wire::Failure> {
    let one = |on: bool, qtype: u16| async move {
        if on { Some(query::exchange_from(&conf.servers, start, name, qtype, deadline).await) } else { None }
    };
    let (a, aaaa) = tokio::join!(one(conf.ipv4, wire::A), one(conf.ipv6, wire::AAAA));
    combine([a, aaaa].into_iter().flatten().collect())
}

/// See [`ask`]: `answers` in the order asked (A, then AAAA).
fn combine(answers: Vec<Result<wire::Records, wire::Failure>>) -> Result<(Answer, u32), wire::Failure> {
    if let Some(f) = answers.iter().rev().find_map(|r| r.as_ref().err()) {
        return match f {
            wire::Failure::HostNotFound => Ok((Answer::NotFound, 0)),
            f => Err(*f),
        };
    }
    let answers: Vec<wire::Records> = answers.into_iter().flatten().collect();
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    for r in &answers {
        if !r.addrs.is_empty() {
            ttl = ttl.min(r.ttl);
            addrs.extend_from_slice(&r.addrs);
        }
    }
    if !addrs.is_empty() {
        return Ok((Answer::Addrs(addrs), ttl));
    }
    match answers.last() {
        Some(wire::Records { cname: Some(target), ttl, .. }) => Ok((Answer::Cname(target.clone()), *ttl)),
        _ => Ok((Answer::NotFound, 0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{Failure, Records};

    fn addrs(ips: &[&str], ttl: u32) -> Result<Records, Failure> {
        Ok(Records { addrs: ips.iter().map(|a| a.parse().unwrap()).collect(), ttl, ..Default::default() })
    }
    fn cname(target: &str, ttl: u32) -> Result<Records, Failure> {
        Ok(Records { cname: Some(target.into()), ttl, ..Default::default() })
    }
    fn zero() -> Result<Records, Failure> {
        Ok(Records::default())
    }

    /// The cases of nginx-tests' http_resolver_aaaa.t: A's answer, then AAAA's.
    #[test]
    fn answers_combine_as_nginx_reads_them() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // Addresses of both, IPv4 first, duplicates kept; the smaller TTL.
        assert_eq!(
            combine(vec![addrs(&["127.0.0.1", "127.0.0.1"], 60), addrs(&["fe80::1"], 30)]),
            Ok((Answer::Addrs(vec![ip("127.0.0.1"), ip("127.0.0.1"), ip("fe80::1")]), 30))
        );
        // Addresses win over the other family's alias.
        assert_eq!(
            combine(vec![addrs(&["127.0.0.201"], 60), cname("alias2", 9)]),
            Ok((Answer::Addrs(vec![ip("127.0.0.201")]), 60))
        );
        // Nothing but aliases: the last answer's is followed (c1-c2).
        assert_eq!(combine(vec![cname("alias4", 5), cname("alias6", 7)]), Ok((Answer::Cname("alias6".into()), 7)));
        assert_eq!(combine(vec![zero(), cname("alias2", 7)]), Ok((Answer::Cname("alias2".into()), 7)));
        // An alias for A but no AAAA record at all: no such host (c-z).
        assert_eq!(combine(vec![cname("alias", 5), zero()]), Ok((Answer::NotFound, 0)));
        assert_eq!(combine(vec![zero(), zero()]), Ok((Answer::NotFound, 0)));
        // Any error fails the name, whatever the other family gave; the
        // last answer's error first; NXDOMAIN is an answer, kept.
        assert_eq!(
            combine(vec![addrs(&["127.0.0.201"], 60), Err(Failure::ServerFailure)]),
            Err(Failure::ServerFailure)
        );
        assert_eq!(combine(vec![Err(Failure::ServerFailure), addrs(&["fe80::1"], 60)]), Err(Failure::ServerFailure));
        assert_eq!(combine(vec![Err(Failure::TimedOut), Err(Failure::Refused)]), Err(Failure::Refused));
        assert_eq!(combine(vec![Err(Failure::HostNotFound), addrs(&["fe80::1"], 60)]), Ok((Answer::NotFound, 0)));
        // One family asked (ipv4=off or ipv6=off): its answer alone.
        assert_eq!(combine(vec![cname("a", 3)]), Ok((Answer::Cname("a".into()), 3)));
    }

    #[test]
    fn each_name_starts_at_the_next_server() {
        let conf = |n: u16| ResolverConf {
            servers: Arc::new((0..n).map(|i| SocketAddr::from(([127, 0, 0, 1], 53 + i))).collect()),
            valid: None,
            ipv4: true,
            ipv6: true,
        };
        let mut c = Cache::default();
        let (two, one) = (Which::of(&conf(2)), Which::of(&conf(1)));
        assert_eq!([c.start(&two), c.start(&two), c.start(&two), c.start(&one)], [0, 1, 0, 0]);
        // Another family setting is another resolver, with its own answers.
        let mut v4 = conf(2);
        v4.ipv6 = false;
        assert_ne!(Which::of(&v4), two);
        assert_eq!(c.start(&Which::of(&v4)), 0);
    }
}
