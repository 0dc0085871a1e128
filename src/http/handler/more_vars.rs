//! Variables that read the connection, the clock or the origin's answer
//! rather than the request: `$connection_time`, `$request_completion`,
//! `$msie`, `$date_gmt`/`$date_local`, `$proxy_port`, `$tcpinfo_*`,
//! `$ssl_alpn_protocol`, `$ssl_curve`, `$ssl_early_data`,
//! `$upstream_cookie_NAME` and `$request_body`. Kept apart from `ctx`'s hot ones; each is
//! computed only when a template asks.

use super::ctx::{Vars, push_secs_ms, push_u64};
use crate::variables::Var;

pub(super) fn write(v: &Vars<'_, '_, '_>, var: &Var, out: &mut Vec<u8>) {
    let ctx = v.ctx;
    match var {
        Var::ConnectionTime => push_secs_ms(out, ctx.conn.age_ms()),
        Var::RequestCompletion if v.complete => out.extend_from_slice(b"OK"),
        Var::Msie if ctx.req.header("user-agent").is_some_and(crate::http::user_agent::is_msie) => out.push(b'1'),
        Var::Date(gmt) => {
            let now = crate::clock::now_secs() as i64;
            if *gmt {
                crate::http::date::ssi_date(now, "GMT", out)
            } else {
                let (offset, zone) = crate::clock::local_zone(now);
                crate::http::date::ssi_date(now + offset, &zone, out)
            }
        }
        Var::ProxyPort => {
            if let Some(port) = proxy_port(v) {
                out.extend_from_slice(port.as_bytes())
            }
        }
        Var::Tcpinfo(field) => {
            if let Some(n) = crate::http::connection::tcpinfo::read(ctx.conn.fd, *field) {
                push_u64(out, u64::from(n))
            }
        }
        Var::SslAlpnProtocol => {
            if let Some(p) = ctx.conn.tls.as_ref().and_then(|t| t.alpn) {
                out.extend_from_slice(p.as_bytes())
            }
        }
        Var::SslCurve => {
            if let Some(c) = ctx.conn.tls.as_ref().and_then(|t| t.curve) {
                out.extend_from_slice(c.as_bytes())
            }
        }
        Var::SslCurves => {
            if let Some(c) = ctx.conn.tls.as_ref().and_then(|t| t.curves.as_deref()) {
                out.extend_from_slice(c.as_bytes())
            }
        }
        Var::SslCiphers => {
            if let Some(c) = ctx.conn.tls.as_ref().and_then(|t| t.ciphers.as_deref()) {
                out.extend_from_slice(c.as_bytes())
            }
        }
        Var::SslSessionId => {
            if let Some(id) = ctx.conn.tls.as_ref().and_then(|t| t.session_id) {
                for b in id {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
            }
        }
        // "1" for a request that came in 0-RTT before the handshake
        // completed (HTTP/3 with `ssl_early_data on`), as nginx's
        // SSL_in_early_data; otherwise empty, and not found (logged `-`)
        // as nginx's SSL variables with an empty value.
        Var::SslEarlyData if ctx.conn.early_data => out.push(b'1'),
        // Never compiled in http's namespace.
        Var::Family(_) => {}
        Var::UpstreamCookie(name) => {
            if let Some(c) = upstream_cookie(v, name) {
                out.extend_from_slice(c)
            }
        }
        Var::RequestBody => {
            if let Some(b) = &ctx.request_body {
                out.extend_from_slice(b)
            }
        }
        Var::RequestBodyFile => {
            if let Some(p) = &ctx.request_body_file {
                out.extend_from_slice(p.as_os_str().as_encoded_bytes())
            }
        }
        _ => {}
    }
}

/// Whether a variable that rendered empty exists (logged as nothing
/// rather than `-`).
pub(super) fn found(v: &Vars<'_, '_, '_>, var: &Var) -> bool {
    match var {
        Var::ProxyPort => proxy_port(v).is_some(),
        Var::UpstreamCookie(name) => upstream_cookie(v, name).is_some(),
        Var::RequestBody => v.ctx.request_body.is_some(),
        Var::RequestBodyFile => v.ctx.request_body_file.is_some(),
        _ => false,
    }
}

/// `$proxy_port`: the port of the `proxy_pass` URL as written, the
/// scheme's default without one, empty for a unix socket; not found
/// outside a proxying location.
fn proxy_port<'a>(v: &'a Vars<'_, '_, '_>) -> Option<&'a str> {
    let ctx = v.ctx;
    let fixed = match &ctx.conf.proxy.pass {
        Some(crate::config::proxy::Pass::Fixed(p)) => Some(p),
        _ => None,
    };
    let p = ctx.proxy_pass.as_ref().or(fixed).filter(|p| p.protocol == crate::config::proxy::Protocol::Http)?;
    let u = &p.upstream;
    if u.implicit && !u.peers.is_empty() && u.peers.iter().all(|peer| peer.unix.is_some()) {
        return Some("");
    }
    // proxy_host keeps the port unless it is the scheme's default.
    let host = p.proxy_host.as_str();
    let after_host = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or("", |(_, tail)| tail),
        None => host.rfind(':').map_or("", |i| &host[i..]),
    };
    match after_host.strip_prefix(':') {
        Some(port) => Some(port),
        None => Some(if p.tls { "443" } else { "80" }),
    }
}

/// The value of cookie `name` in the origin's `Set-Cookie` headers, as
/// nginx's `ngx_http_parse_set_cookie_lines`: the first header whose text
/// starts with the name (any case), then optional spaces and `=`; the
/// value runs to the first `;`, trailing spaces included.
fn upstream_cookie<'a>(v: &'a Vars<'_, '_, '_>, name: &str) -> Option<&'a [u8]> {
    if v.ctx.upstream.status.is_empty() {
        return None;
    }
    let resp = v.resp?;
    resp.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie")).find_map(|(_, value)| {
        let text = value.as_slice();
        let n = name.len();
        if text.len() <= n || !text[..n].eq_ignore_ascii_case(name.as_bytes()) {
            return None;
        }
        let rest = &text[n..];
        let rest = &rest[rest.iter().position(|&b| b != b' ')?..];
        let rest = rest.strip_prefix(b"=")?;
        let start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        let rest = &rest[start..];
        Some(&rest[..memchr::memchr(b';', rest).unwrap_or(rest.len())])
    })
}
