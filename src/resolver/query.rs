//! Questions to the `resolver` servers from any tokio runtime, without the
//! per-worker cache: what the background re-resolution of `server ...
//! resolve` in upstream zones asks (`crate::upstream::zone::resolve`).
//!
//! Each question goes over UDP to the servers in turn, each given an equal
//! share of what is left of `resolver_timeout` (at most 5 seconds, after
//! which it is sent again, as nginx resends); a truncated answer is asked
//! again over TCP from the same server (RFC 7766), as nginx does. The
//! per-worker cache of `resolver` (`super::lookup`) asks through here too. A CNAME
//! without the records asked is followed (at most [`MAX_CNAMES`] times),
//! as nginx's resolver does. An SRV question is answered with its targets'
//! addresses, each target asked in turn.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

use super::ResolverConf;
use super::wire::{self, Failure, Records};

/// How many CNAMEs one question follows before giving up.
pub const MAX_CNAMES: usize = 8;

/// The largest UDP answer read (EDNS is not asked for; 512 would do).
const UDP_MAX: usize = 4096;

/// A query id that an off-path guesser cannot predict from the last one.
fn next_id() -> u16 {
    static SEQ: AtomicU32 = AtomicU32::new(0x5a5a);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let n = SEQ.fetch_add(0x9e37, Ordering::Relaxed).wrapping_mul(0x85eb_ca6b) ^ nanos.rotate_left(13);
    (n ^ (n >> 16)) as u16
}

/// How long one UDP question waits before it is sent again (nginx's
/// resolver resends every 5 seconds, to the next server).
const RESEND: std::time::Duration = std::time::Duration::from_secs(5);

/// One question, to the servers in turn until one answers it.
pub async fn exchange(servers: &[SocketAddr], name: &str, qtype: u16, deadline: Instant) -> Result<Records, Failure> {
    exchange_from(servers, 0, name, qtype, deadline).await
}

/// One question, first to `servers[start]` (the per-name round robin of
/// nginx's resolver), then to the next ones in turn. On the first round
/// each server gets an equal share of what is left (at most [`RESEND`]), so
/// a silent server does not eat the whole `resolver_timeout`; while time
/// is left after that, the question is sent again every [`RESEND`], as
/// nginx resends it (an answer that was not ours, lost, or never sent, is
/// then asked for again). A server that refused on every try ends it.
pub async fn exchange_from(
    servers: &[SocketAddr],
    start: usize,
    name: &str,
    qtype: u16,
    deadline: Instant,
) -> Result<Records, Failure> {
    let id = next_id();
    let q = wire::query(id, name, qtype).ok_or(Failure::HostNotFound)?;
    let n = servers.len();
    let mut last = Failure::TimedOut;
    let mut attempt = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if n == 0 || left.is_zero() || (attempt >= n && last != Failure::TimedOut) {
            break;
        }
        let share = if attempt < n { left / (n - attempt) as u32 } else { left };
        let until = Instant::now() + share.min(RESEND);
        let server = &servers[(start + attempt) % n];
        attempt += 1;
        match udp(server, &q, id, name, qtype, until).await {
            // Over TCP within the same window: a server that takes the
            // connection and never answers is left as a silent one is.
            Err(Failure::Truncated) => match tcp(server, &q, id, name, qtype, until).await {
                Ok(r) => return Ok(r),
                Err(f) => last = f,
            },
            Err(f @ (Failure::TimedOut | Failure::Unreachable)) => last = f,
            other => return other,
        }
    }
    Err(last)
}

async fn udp(
    server: &SocketAddr,
    q: &[u8],
    id: u16,
    name: &str,
    qtype: u16,
    until: Instant,
) -> Result<Records, Failure> {
    let bind: SocketAddr =
        if server.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (IpAddr::from([0u16; 8]), 0).into() };
    let sock = tokio::net::UdpSocket::bind(bind).await.map_err(|_| Failure::Unreachable)?;
    if sock.connect(server).await.is_err() || sock.send(q).await.is_err() {
        return Err(Failure::Unreachable);
    }
    let mut buf = vec![0u8; UDP_MAX];
    loop {
        match tokio::time::timeout_at(until, sock.recv(&mut buf)).await {
            Ok(Ok(n)) => match wire::parse_records(&buf[..n], id, name, qtype) {
                // Someone else's datagram: keep waiting for ours.
                Err(Failure::Malformed) => continue,
                other => return other,
            },
            Ok(Err(_)) => return Err(Failure::Unreachable),
            Err(_) => return Err(Failure::TimedOut),
        }
    }
}

/// The same question over TCP: a two-byte length before each message.
async fn tcp(
    server: &SocketAddr,
    q: &[u8],
    id: u16,
    name: &str,
    qtype: u16,
    deadline: Instant,
) -> Result<Records, Failure> {
    let work = async {
        let mut s = tokio::net::TcpStream::connect(server).await.map_err(|_| Failure::Unreachable)?;
        let mut out = Vec::with_capacity(q.len() + 2);
        out.extend_from_slice(&(q.len() as u16).to_be_bytes());
        out.extend_from_slice(q);
        s.write_all(&out).await.map_err(|_| Failure::Unreachable)?;
        let mut len = [0u8; 2];
        s.read_exact(&mut len).await.map_err(|_| Failure::Malformed)?;
        let mut msg = vec![0u8; u16::from_be_bytes(len) as usize];
        s.read_exact(&mut msg).await.map_err(|_| Failure::Malformed)?;
        match wire::parse_records(&msg, id, name, qtype) {
            // Over TCP the whole answer came: truncated still is broken.
            Err(Failure::Truncated) => Err(Failure::Malformed),
            other => other,
        }
    };
    tokio::time::timeout_at(deadline, work).await.unwrap_or(Err(Failure::TimedOut))
}

/// Records of one type for `name`, following CNAMEs.
async fn follow(servers: &[SocketAddr], name: &str, qtype: u16, deadline: Instant) -> Result<Records, Failure> {
    let mut asked = name.to_string();
    for _ in 0..=MAX_CNAMES {
        let r = exchange(servers, &asked, qtype, deadline).await?;
        match &r.cname {
            Some(next) if r.addrs.is_empty() && r.srvs.is_empty() && r.names.is_empty() => asked = next.clone(),
            _ => return Ok(r),
        }
    }
    Err(Failure::HostNotFound)
}

/// `name`'s addresses, IPv4 first (A and AAAA as the resolver's `ipv4=` and
/// `ipv6=` say), and their smallest TTL. No address at all is
/// `HostNotFound` (nginx's NXDOMAIN: the name has gone), unless a question
/// failed otherwise, which is then the answer (the name may still exist).
pub async fn addresses(conf: &ResolverConf, name: &str, deadline: Instant) -> Result<(Vec<IpAddr>, u32), Failure> {
    let mut addrs = Vec::new();
    let mut ttl = u32::MAX;
    let mut failure = None;
    for (qtype, on) in [(wire::A, conf.ipv4), (wire::AAAA, conf.ipv6)] {
        if !on {
            continue;
        }
        match follow(&conf.servers, name, qtype, deadline).await {
            Ok(r) => {
                if !r.addrs.is_empty() {
                    ttl = ttl.min(r.ttl);
                }
                addrs.extend(r.addrs);
            }
            Err(Failure::HostNotFound) => {}
            Err(f) => failure = Some(f),
        }
    }
    if !addrs.is_empty() {
        // Background re-resolution keeps one peer per address.
        let mut seen = std::collections::HashSet::new();
        addrs.retain(|a| seen.insert(*a));
        return Ok((addrs, ttl));
    }
    Err(failure.unwrap_or(Failure::HostNotFound))
}

/// One address of a service, from its SRV record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The record's target name (the peer's `server` in nginx).
    pub name: String,
    pub addr: SocketAddr,
    pub priority: u16,
    pub weight: u16,
}

/// A service's answer: its targets' addresses, the targets that do not
/// exist (logged by the caller, as nginx does), and the smallest TTL.
#[derive(Debug, Default)]
pub struct Service {
    pub targets: Vec<Target>,
    pub missing: Vec<String>,
    pub ttl: u32,
}

/// The SRV records of `srv_name` (`_http._tcp.example.net`) and each
/// target's addresses. No record is `HostNotFound`; a target whose own
/// question failed other than by not existing fails the whole answer, so
/// that the caller keeps what it had (nginx's "bad subordinate reply").
pub async fn service(conf: &ResolverConf, srv_name: &str, deadline: Instant) -> Result<Service, Failure> {
    let r = follow(&conf.servers, srv_name, wire::SRV, deadline).await?;
    if r.srvs.is_empty() {
        return Err(Failure::HostNotFound);
    }
    let mut out = Service { ttl: r.ttl, ..Default::default() };
    for s in &r.srvs {
        match addresses(conf, &s.target, deadline).await {
            Ok((ips, ttl)) => {
                out.ttl = out.ttl.min(ttl);
                out.targets.extend(ips.into_iter().map(|ip| Target {
                    name: s.target.clone(),
                    addr: SocketAddr::new(ip, s.port),
                    priority: s.priority,
                    weight: s.weight,
                }));
            }
            Err(Failure::HostNotFound) => out.missing.push(s.target.clone()),
            Err(f) => return Err(f),
        }
    }
    if out.targets.is_empty() {
        return Err(Failure::HostNotFound);
    }
    Ok(out)
}

/// The name of an address (a PTR question for `in-addr.arpa` or
/// `ip6.arpa`), following CNAMEs, as nginx's `ngx_resolve_addr`: the first
/// name, and the TTL. No PTR record at all is `Malformed` (nginx: "no PTR
/// type in DNS response"), a name that does not exist `HostNotFound`.
pub async fn name_of(conf: &ResolverConf, ip: IpAddr, deadline: Instant) -> Result<(String, u32), Failure> {
    let r = follow(&conf.servers, &reverse_name(ip), wire::PTR, deadline).await?;
    r.names.into_iter().next().map(|n| (n, r.ttl)).ok_or(Failure::Malformed)
}

/// `1.0.0.127.in-addr.arpa` for 127.0.0.1; nibbles for IPv6.
pub fn reverse_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(a) => {
            let mut s = String::with_capacity(72);
            for b in a.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s.push_str("ip6.arpa");
            s
        }
    }
}
