//! Groups servers by listening address and builds, per address, the
//! server-name tables in nginx's selection order (exact, longest leading
//! wildcard, longest trailing wildcard, first matching regex, default).

use std::collections::HashSet;
use std::sync::Arc;

use super::build::ServerListen;
use super::model::{ListenGroup, Server, ServerNames};
use super::parser::ConfError;

/// nginx's NGX_LISTEN_BACKLOG on Linux.
const DEFAULT_BACKLOG: i32 = 511;

/// TCP_NOTSENT_LOWAT of plain listeners unless `notsent_lowat=` says
/// otherwise (see `listener::tune` for why). TLS listeners keep the
/// kernel's: there every write is a TLS record the worker encrypts, and
/// stopping at 16 KB queued cut a 10 MB HTTP/2 download over TLS from
/// ~700 to ~450 MB/s (bench tls4), where sendfile on plain connections
/// went from 1.4 to 2.5 GB/s.
pub const DEFAULT_NOTSENT_LOWAT: u32 = 16 * 1024;

pub fn group(specs: Vec<(ServerListen, Arc<Server>)>, reuse_port_all: bool) -> Result<Vec<ListenGroup>, ConfError> {
    struct Acc {
        addr: std::net::SocketAddr,
        backlog: Option<i32>,
        notsent_lowat: Option<u32>,
        sock: super::model::SockOpts,
        reuseport: bool,
        ssl: bool,
        http2: bool,
        listen_http2: bool,
        quic: bool,
        proxy_protocol: bool,
        unix: Option<Arc<str>>,
        /// Servers on this address with where they listen, to check TLS.
        members: Vec<(Arc<Server>, crate::config::parser::Span)>,
        /// The same servers by address, to find a duplicate listen without
        /// scanning `members` (quadratic with thousands of servers).
        member_set: HashSet<*const Server>,
        opts_set: bool,
        default: Option<Arc<Server>>,
        first: Arc<Server>,
        names: ServerNames,
    }
    let mut groups: Vec<Acc> = Vec::new();
    for (sl, server) in specs {
        let spec = &sl.spec;
        // A `quic` address is UDP: a group of its own beside TCP's.
        let idx = match groups.iter().position(|g| g.addr == spec.addr && g.quic == spec.quic && g.unix == spec.unix) {
            Some(i) => i,
            None => {
                groups.push(Acc {
                    addr: spec.addr,
                    backlog: None,
                    notsent_lowat: None,
                    sock: Default::default(),
                    reuseport: false,
                    ssl: false,
                    http2: false,
                    listen_http2: false,
                    quic: spec.quic,
                    proxy_protocol: false,
                    unix: spec.unix.clone(),
                    members: Vec::new(),
                    member_set: HashSet::new(),
                    opts_set: false,
                    default: None,
                    first: server.clone(),
                    names: ServerNames::default(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[idx];
        // One server listing an address twice is refused, as nginx does.
        if !g.member_set.insert(Arc::as_ptr(&server)) {
            return Err(ConfError::at(format!("a duplicate listen {}", spec.addr_text()), &spec.span));
        }
        g.ssl |= spec.ssl;
        g.http2 |= spec.http2;
        g.listen_http2 |= spec.http2_param;
        g.proxy_protocol |= spec.proxy_protocol;
        g.members.push((server.clone(), sl.server_span.clone()));
        let has_opts = spec.backlog.is_some()
            || spec.notsent_lowat.is_some()
            || spec.sock != Default::default()
            || spec.reuseport
            || spec.deferred;
        if has_opts {
            if g.opts_set {
                return Err(ConfError::at(format!("duplicate listen options for {}", spec.addr_text()), &spec.span));
            }
            g.opts_set = true;
            g.backlog = spec.backlog;
            g.notsent_lowat = spec.notsent_lowat;
            g.sock = spec.sock;
            g.reuseport = spec.reuseport;
        }
        if spec.default_server {
            if g.default.is_some() {
                return Err(ConfError::at(format!("a duplicate default server for {}", spec.addr_text()), &spec.span));
            }
            g.default = Some(server.clone());
        }
        for n in &sl.names {
            g.names.add(n, &server);
        }
        for r in &sl.regex_names {
            g.names.add_regex(r, &server);
        }
    }
    for g in &groups {
        if !g.ssl && !g.quic {
            continue;
        }
        // nginx (ngx_http_ssl_init) asks for a certificate (or
        // `ssl_reject_handshake on`) of the default server only: another
        // server chosen by SNI then uses the default's; QUIC needs TLS 1.3.
        let default = g.default.as_ref().unwrap_or(&g.first);
        if g.quic && default.tls.as_ref().is_some_and(|t| !t.reject) {
            if !default.conf.ssl.tls13
                && let Some((_, span)) = g.members.iter().find(|(s, _)| Arc::ptr_eq(s, default))
            {
                return Err(ConfError::at(
                    "\"ssl_protocols\" must enable TLSv1.3 for the \"listen ... quic\" directive",
                    span,
                ));
            }
            continue;
        }
        // On a TLS address too (ngx_http_ssl_init): only the default
        // server needs a certificate; another chosen by SNI without one
        // finishes the handshake with the default's (`tls::handshake`).
        if let Some((_, span)) = g.members.iter().find(|(s, _)| Arc::ptr_eq(s, default) && s.tls.is_none()) {
            let what = if g.quic { "quic" } else { "ssl" };
            return Err(ConfError::at(
                format!("no \"ssl_certificate\" is defined for the \"listen ... {what}\" directive"),
                span,
            ));
        }
    }
    Ok(groups
        .into_iter()
        .map(|mut g| {
            g.names.sort();
            ListenGroup {
                addr: g.addr,
                backlog: g.backlog.unwrap_or(DEFAULT_BACKLOG),
                notsent_lowat: g.notsent_lowat.unwrap_or(if g.ssl { 0 } else { DEFAULT_NOTSENT_LOWAT }),
                sock: g.sock,
                reuseport: g.reuseport || reuse_port_all,
                ssl: g.ssl,
                http2: g.http2,
                listen_http2: g.listen_http2,
                quic: g.quic,
                proxy_protocol: g.proxy_protocol,
                unix: g.unix,
                default_server: g.default.unwrap_or(g.first),
                names: g.names,
            }
        })
        .collect())
}
