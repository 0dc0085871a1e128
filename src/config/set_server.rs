//! Setters for the `server` context: `listen` and `server_name`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use super::build::{Ctx, ListenSpec, ServerBuild};
use super::model::SockOpts;
use super::parser::{ConfError, Directive};
use super::set_main::arg;
use super::table::R;
use super::value;

/// `listen [addr:]port [default_server] [backlog=N] [rcvbuf=SIZE] [sndbuf=SIZE]
/// [fastopen=N] [so_keepalive=on|off|[idle]:[intvl]:[cnt]] [reuseport]
/// [notsent_lowat=SIZE|off] ...`
pub fn listen(s: &mut ServerBuild, d: &Directive, _: &mut Ctx) -> R {
    let raw = arg(d, 0);
    let (mut spec, more_ports) = match raw.strip_prefix("unix:") {
        Some(path) => {
            let path = crate::listener::unix::listen_path(path).map_err(|m| ConfError::at(m, &d.span))?;
            let mut spec = ListenSpec::new(crate::listener::unix::PLACEHOLDER, d.span.clone());
            spec.unix = Some(path);
            (spec, Vec::new())
        }
        None => {
            let (addr, more) = listen_range(raw).map_err(|m| ConfError::at(m, &d.span))?;
            (ListenSpec::new(addr, d.span.clone()), more)
        }
    };
    for w in d.args.iter().skip(1) {
        let p = w.text.as_str();
        match p {
            "default_server" | "default" => spec.default_server = true,
            "reuseport" => spec.reuseport = true,
            "bind" => {}
            "ssl" => spec.ssl = true,
            "http2" => {
                spec.http2 = true;
                spec.http2_param = true;
            }
            "quic" => spec.quic = true,
            "proxy_protocol" => spec.proxy_protocol = true,
            _ => {
                if p == "deferred" {
                    spec.deferred = true;
                } else if let Some(v) = p.strip_prefix("backlog=") {
                    match value::parse_number(v) {
                        Some(n) if n > 0 && n <= i32::MAX as u64 => spec.backlog = Some(n as i32),
                        _ => return Err(ConfError::at(format!("invalid backlog \"{}\"", p), &d.span)),
                    }
                } else if let Some(v) = p.strip_prefix("notsent_lowat=") {
                    spec.notsent_lowat = Some(match v {
                        "off" => 0,
                        _ => match value::parse_size(v) {
                            Some(n) if n > 0 && n <= i32::MAX as u64 => n as u32,
                            _ => return Err(ConfError::at(format!("invalid notsent_lowat \"{}\"", p), &d.span)),
                        },
                    });
                } else if let Some(v) = p.strip_prefix("ipv6only=") {
                    if v != "on" && v != "off" {
                        return Err(ConfError::at(format!("invalid ipv6only flags \"{}\"", v), &d.span));
                    }
                } else if let Some(set) = sock_opt(p, &mut spec.sock) {
                    set.map_err(|m| ConfError::at(m, &d.span))?;
                } else if p.starts_with("accept_filter=") {
                    // FreeBSD's; nginx on Linux refuses it with this line.
                    return Err(ConfError::at(
                        format!("accept filters \"{}\" are not supported on this platform, ignored", p),
                        &d.span,
                    ));
                } else {
                    return Err(ConfError::at(format!("invalid parameter \"{}\"", p), &d.span));
                }
            }
        }
    }
    // A unix-domain socket has no SO_REUSEPORT groups or UDP, and
    // nginx refuses the UDP flavour of it.
    if spec.unix.is_some() && spec.quic {
        return Err(ConfError::at(format!("invalid parameter \"quic\" for \"{raw}\""), &d.span));
    }
    // nginx's ngx_http_core_listen: QUIC is TLS 1.3 over UDP by itself.
    if spec.quic {
        for (on, what) in [(spec.ssl, "ssl"), (spec.http2, "http2"), (spec.proxy_protocol, "proxy_protocol")] {
            if on {
                return Err(ConfError::at(format!("\"{what}\" parameter is incompatible with \"quic\""), &d.span));
            }
        }
    }
    // A port range is one listen per port, each with the same parameters.
    let more: Vec<ListenSpec> = more_ports
        .into_iter()
        .map(|port| {
            let mut c = spec.clone();
            c.addr.set_port(port);
            c
        })
        .collect();
    s.listens.push(spec);
    s.listens.extend(more);
    Ok(())
}

/// `ADDR:FIRST-LAST` (nginx 1.27.3): the first port's address and the
/// other ports of the range; any other form is one address.
pub fn listen_range(raw: &str) -> Result<(SocketAddr, Vec<u16>), String> {
    let ports = raw.rsplit_once(':').map_or(raw, |(_, p)| p);
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let Some((first, last)) = ports.split_once('-').filter(|(a, b)| digits(a) && digits(b)) else {
        return Ok((parse_listen_addr(raw)?, Vec::new()));
    };
    let bad = || format!("invalid port range in \"{}\" of the \"listen\" directive", raw);
    let host = &raw[..raw.len() - ports.len()];
    let addr = parse_listen_addr(&format!("{host}{first}"))?;
    let last = match value::parse_number(last) {
        Some(n) if n <= 65535 && n as u16 >= addr.port() => n as u16,
        _ => return Err(bad()),
    };
    Ok((addr, (addr.port() + 1..=last).collect()))
}

/// The socket options `listen` passes to the listening socket, with
/// nginx's grammar and error lines: None if `p` is not one of them.
pub fn sock_opt(p: &str, o: &mut SockOpts) -> Option<Result<(), String>> {
    // ngx_parse_size: k and m only. nginx keeps it in an int, so larger
    // values pass; the kernel caps the buffers at net.core.[rw]mem_max.
    let size = |v: &str| match v.ends_with(['g', 'G']) {
        true => None,
        false => value::parse_size(v).map(|n| n.min(i32::MAX as u64) as i32),
    };
    if let Some(v) = p.strip_prefix("rcvbuf=") {
        o.rcvbuf = size(v);
        return Some(o.rcvbuf.map(|_| ()).ok_or_else(|| format!("invalid rcvbuf \"{}\"", p)));
    }
    if let Some(v) = p.strip_prefix("sndbuf=") {
        o.sndbuf = size(v);
        return Some(o.sndbuf.map(|_| ()).ok_or_else(|| format!("invalid sndbuf \"{}\"", p)));
    }
    if let Some(v) = p.strip_prefix("fastopen=") {
        // nginx stores ngx_atoi's result in an int; larger values pass.
        o.fastopen = value::parse_number(v).map(|n| n.min(i32::MAX as u64) as i32);
        return Some(o.fastopen.map(|_| ()).ok_or_else(|| format!("invalid fastopen \"{}\"", p)));
    }
    let v = p.strip_prefix("so_keepalive=")?;
    Some(keepalive(v, o).ok_or_else(|| format!("invalid so_keepalive value: \"{}\"", v)))
}

/// `on`, `off`, or `[idle]:[intvl]:[cnt]` (times in seconds, with nginx's
/// units but not `ms`; at least one part not zero): keepalive on with the
/// parts given, the kernel's values for the others.
fn keepalive(v: &str, o: &mut SockOpts) -> Option<()> {
    match v {
        "on" => o.keepalive = Some(true),
        "off" => o.keepalive = Some(false),
        _ => {
            let mut parts = v.splitn(3, ':');
            let secs = |s: &str| -> Option<u32> {
                if s.is_empty() {
                    return Some(0);
                }
                if s.contains("ms") {
                    return None;
                }
                u32::try_from(value::parse_time(s)?.as_secs()).ok()
            };
            o.keep_idle = secs(parts.next().unwrap_or(""))?;
            o.keep_intvl = secs(parts.next().unwrap_or(""))?;
            o.keep_cnt = match parts.next().unwrap_or("") {
                "" => 0,
                c => u32::try_from(value::parse_number(c)?).ok()?,
            };
            if o.keep_idle == 0 && o.keep_intvl == 0 && o.keep_cnt == 0 {
                return None;
            }
            o.keepalive = Some(true);
        }
    }
    Some(())
}

/// The address of a stream or mail `listen`: `ADDRESS:PORT` (a port is
/// required, as nginx's stream and mail modules require one) or
/// `unix:PATH`, whose address is then `listener::unix::PLACEHOLDER`.
pub fn family_listen_target(raw: &str) -> Result<(SocketAddr, Option<std::sync::Arc<str>>), String> {
    if let Some(path) = raw.strip_prefix("unix:") {
        return Ok((crate::listener::unix::PLACEHOLDER, Some(crate::listener::unix::listen_path(path)?)));
    }
    let has_port = raw.bytes().all(|b| b.is_ascii_digit()) || crate::config::upstream_block::has_port(raw);
    if !has_port {
        return Err(format!("no port in \"{raw}\" of the \"listen\" directive"));
    }
    Ok((parse_listen_addr(raw)?, None))
}

/// nginx's forms: `80`, `*:80`, `127.0.0.1`, `127.0.0.1:80`, `[::1]:80`,
/// `localhost:80`. A bare address means port 80.
pub fn parse_listen_addr(raw: &str) -> Result<SocketAddr, String> {
    // HTTP's and stream's `listen` take `unix:` before calling this; the
    // mail family does not listen on unix-domain sockets yet.
    if raw.starts_with("unix:") {
        return Err(format!("listening on a unix socket (\"{}\") is not supported yet", raw));
    }
    let port = |p: &str| -> Result<u16, String> {
        match value::parse_number(p) {
            Some(n) if (1..=65535).contains(&n) => Ok(n as u16),
            _ => Err(format!("invalid port in \"{}\" of the \"listen\" directive", raw)),
        }
    };
    if raw.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port(raw)?));
    }
    if let Some(rest) = raw.strip_prefix('[') {
        let (host, tail) = rest.split_once(']').ok_or_else(|| format!("invalid IPv6 address in \"{}\"", raw))?;
        let ip: Ipv6Addr = host.parse().map_err(|_| format!("invalid IPv6 address in \"{}\"", raw))?;
        let p = match tail.strip_prefix(':') {
            Some(p) => port(p)?,
            None if tail.is_empty() => 80,
            None => return Err(format!("invalid port in \"{}\" of the \"listen\" directive", raw)),
        };
        return Ok(SocketAddr::new(IpAddr::V6(ip), p));
    }
    let (host, p) = match raw.rsplit_once(':') {
        Some((h, p)) => (h, port(p)?),
        None => (raw, 80),
    };
    if host == "*" {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, p));
    }
    (host, p)
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.find(|a| a.is_ipv4()))
        .ok_or_else(|| format!("host not found in \"{}\" of the \"listen\" directive", raw))
}

pub fn server_name(s: &mut ServerBuild, d: &Directive, _: &mut Ctx) -> R {
    super::server_names::parse(d, &mut s.names, &mut s.regex_names, &mut s.first_name)
}
