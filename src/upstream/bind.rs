//! `proxy_bind` and `fastcgi_bind` (nginx's `ngx_http_upstream_bind_set_slot`):
//! the local address connections to origins are made from, on a server
//! with several addresses. The value is an address with an optional port,
//! or variables that give one per request (`split_clients` over outgoing
//! addresses); `off` cancels an inherited one.
//!
//! As nginx: an address that does not parse is refused at load time, one
//! from variables is logged and left out for that request, an empty one
//! binds nothing, and a `bind()` the kernel refuses fails the request with
//! 500 (not a peer failure: no other peer would do better).
//! `transparent` (binding to the client's own, non-local address) is
//! refused: it needs CAP_NET_ADMIN kept in the workers and TPROXY routing.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::parser::{ConfError, Directive};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

#[derive(Debug)]
pub enum Bind {
    Fixed(SocketAddr),
    Vars(Template),
}

/// `*_bind off | ADDRESS[:PORT]`: None for `off`.
pub fn parse(d: &Directive) -> Result<Option<Arc<Bind>>, ConfError> {
    let v = d.args[0].text.as_str();
    if let Some(p) = d.args.get(1) {
        let why = match p.text.as_str() {
            "transparent" => format!(
                "the \"transparent\" parameter of the \"{}\" directive is not supported: it needs CAP_NET_ADMIN in \
                 the workers and TPROXY routing",
                d.name
            ),
            other => format!("invalid parameter \"{other}\""),
        };
        return Err(ConfError::at(why, &d.span));
    }
    if v == "off" {
        return Ok(None);
    }
    if v.contains('$') {
        let t = Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?;
        return Ok(Some(Arc::new(Bind::Vars(t))));
    }
    let addr = address(v.as_bytes()).ok_or_else(|| ConfError::at(format!("invalid address \"{v}\""), &d.span))?;
    Ok(Some(Arc::new(Bind::Fixed(addr))))
}

/// nginx's `ngx_parse_addr_port`: `1.2.3.4`, `1.2.3.4:80`, `::1`,
/// `[::1]`, `[::1]:80` (port 0: any).
fn address(v: &[u8]) -> Option<SocketAddr> {
    let s = std::str::from_utf8(v).ok()?;
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return Some(SocketAddr::new(std::net::IpAddr::V6(inner.parse().ok()?), 0));
    }
    s.parse::<SocketAddr>().ok()
}

/// The local address for this request's connection; None binds nothing
/// (variables gave an empty value, or one that is not an address, which
/// is logged as nginx does).
pub fn local(ctx: &ReqCtx<'_, '_>, b: &Bind) -> Option<SocketAddr> {
    match b {
        Bind::Fixed(a) => Some(*a),
        Bind::Vars(t) => {
            let mut v = Vec::new();
            t.render(&Vars::request(ctx), &mut v);
            if v.is_empty() {
                return None;
            }
            let a = address(&v);
            if a.is_none() {
                log_req!(ctx, Level::Error, "invalid local address \"{}\"", String::from_utf8_lossy(&v));
            }
            a
        }
    }
}

/// A socket for a connection to `to`, bound to `local`; Err is nginx's
/// `bind(ADDR) failed (ERRNO: TEXT)` (or the socket's own failure).
pub fn socket(to: SocketAddr, local: SocketAddr) -> Result<tokio::net::TcpSocket, String> {
    let os = |call: &str, e: std::io::Error| format!("{call} failed ({})", crate::process::signal::os_error(&e));
    let sock = if to.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() };
    let sock = sock.map_err(|e| os("socket()", e))?;
    let shown = if local.port() == 0 { local.ip().to_string() } else { local.to_string() };
    sock.bind(local).map_err(|e| os(&format!("bind({shown})"), e))?;
    Ok(sock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_as_nginx_parses_them() {
        assert_eq!(address(b"127.0.0.2"), Some("127.0.0.2:0".parse().unwrap()));
        assert_eq!(address(b"127.0.0.2:4000"), Some("127.0.0.2:4000".parse().unwrap()));
        assert_eq!(address(b"::1"), Some("[::1]:0".parse().unwrap()));
        assert_eq!(address(b"[::1]"), Some("[::1]:0".parse().unwrap()));
        assert_eq!(address(b"[::1]:80"), Some("[::1]:80".parse().unwrap()));
        for bad in [&b"localhost"[..], b"1.2.3", b"1.2.3.4:x", b"", b"\xff"] {
            assert_eq!(address(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }
}
