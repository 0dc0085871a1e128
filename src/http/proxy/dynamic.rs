//! `proxy_pass` with variables: the URL is rendered per request and its
//! authority resolved as nginx does: an `upstream` name, an IP address
//! (with or without a port), `unix:/path`, or a host name asked of the
//! location's `resolver` (without one, nginx's "no resolver defined" 502).
//! A URI part then replaces the whole request URI, as written.
//!
//! Address targets get a one-server upstream made on first use and kept
//! per worker (with its keep-alive pool), bounded so that a variable
//! driven by clients cannot grow it without limit.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::proxy::{self, ProxyPass, Upstream};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;
use crate::worker::WorkerCtx;

/// Address targets kept per worker before the cache starts over.
const MAX_TARGETS: usize = 256;

/// The per-worker upstreams made for address targets, by authority.
#[derive(Default)]
pub struct Targets {
    made: HashMap<String, Arc<Upstream>>,
}

impl Targets {
    pub fn get(&mut self, authority: &str, tls: bool) -> Result<Arc<Upstream>, String> {
        self.get_as(authority, authority, tls)
    }

    /// A round-robin upstream of `addrs` (a resolved name), under `key`.
    pub fn get_many(&mut self, key: &str, addrs: &[SocketAddr], tls: bool) -> Result<Arc<Upstream>, String> {
        if let Some(u) = self.made.get(key) {
            return Ok(u.clone());
        }
        if self.made.len() >= MAX_TARGETS {
            self.made.clear();
        }
        let first = addrs.first().ok_or("no address")?;
        let mut u = proxy::implicit_upstream(&first.to_string(), tls, usize::MAX)?;
        u.name = key.to_string();
        for a in &addrs[1..] {
            u.peers.push(proxy::PeerConf::new(*a, None, a.to_string()));
        }
        // nginx makes a resolved name's peers per request: a failure in one
        // request does not take an address from the next.
        for p in &mut u.peers {
            p.max_fails = 0;
        }
        let u = Arc::new(u);
        self.made.insert(key.to_string(), u.clone());
        Ok(u)
    }

    /// The upstream for `authority`, kept (and its runtime state, pool
    /// included, named) under `key`: FastCGI's targets are apart from the
    /// proxy's.
    pub fn get_as(&mut self, key: &str, authority: &str, tls: bool) -> Result<Arc<Upstream>, String> {
        if let Some(u) = self.made.get(key) {
            return Ok(u.clone());
        }
        if self.made.len() >= MAX_TARGETS {
            self.made.clear();
        }
        let mut u = proxy::implicit_upstream(authority, tls, usize::MAX)?;
        u.name = key.to_string();
        let u = Arc::new(u);
        self.made.insert(key.to_string(), u.clone());
        Ok(u)
    }
}

/// Whether `authority` is an address nginx connects to without resolving.
pub fn is_address(authority: &str) -> bool {
    if authority.starts_with("unix:") || authority.parse::<std::net::SocketAddr>().is_ok() {
        return true;
    }
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') && port.parse::<u16>().is_ok() => h,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.parse::<std::net::IpAddr>().is_ok()
}

/// The request's `proxy_pass`, or the status to answer with (the error
/// already logged).
pub async fn resolve(w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, tpl: &Template) -> Result<Arc<ProxyPass>, u16> {
    let rendered = tpl.render_to_vec(&Vars::request(ctx));
    let raw = String::from_utf8_lossy(&rendered);
    let url = match proxy::split_url(&raw) {
        Ok(u) => u,
        Err(why) => {
            log_req!(ctx, Level::Error, "{} while handling request", why);
            return Err(500);
        }
    };
    // An upstream block, or (as in nginx) the implicit upstream another
    // `proxy_pass` made for the same host and port.
    let named = w.cfg.http.upstreams.iter().find(|u| u.name == url.authority).cloned();
    let upstream = match named {
        Some(u) => u,
        None if is_address(url.authority) => match w.proxy.borrow_mut().targets.get(url.authority, url.tls) {
            Ok(u) => u,
            Err(why) => {
                log_req!(ctx, Level::Error, "{} while handling request", why);
                return Err(502);
            }
        },
        None => by_name(w, ctx, url.authority, url.tls).await?,
    };
    Ok(Arc::new(ProxyPass {
        upstream,
        proxy_host: proxy::proxy_host(url.authority, url.tls),
        uri_whole: url.uri.is_some(),
        uri: url.uri,
        tls: url.tls,
        location_len: 0,
        protocol: proxy::Protocol::Http,
    }))
}

/// A host name through the location's `resolver`: an upstream of every
/// address it has now (round robin), kept while the answer is.
pub(crate) async fn by_name(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    authority: &str,
    tls: bool,
) -> Result<Arc<Upstream>, u16> {
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => match p.parse::<u16>() {
            Ok(p) if p > 0 => (h, p),
            _ => {
                log_req!(ctx, Level::Error, "invalid port in upstream \"{}\" while handling request", authority);
                return Err(500);
            }
        },
        None => (authority, default_port),
    };
    let Some(r) = &ctx.conf.resolver.resolver else {
        log_req!(ctx, Level::Error, "no resolver defined to resolve {}", host);
        return Err(502);
    };
    let addrs = match crate::resolver::lookup(&w.dns, r, ctx.conf.resolver.timeout, host).await {
        Ok(a) => a,
        Err(why) => {
            log_req!(ctx, Level::Error, "{} could not be resolved ({})", host, why);
            return Err(502);
        }
    };
    let key = format!("{host}:{port}={addrs:?}");
    let addrs: Vec<SocketAddr> = addrs.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
    let made = w.proxy.borrow_mut().targets.get_many(&key, &addrs, tls);
    made.map_err(|why| {
        log_req!(ctx, Level::Error, "{} while handling request", why);
        502
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_need_no_resolver() {
        for a in ["127.0.0.1", "127.0.0.1:8080", "[::1]:80", "[::1]", "unix:/tmp/s.sock"] {
            assert!(is_address(a), "{a}");
        }
        for a in ["backend", "example.com:80", "localhost"] {
            assert!(!is_address(a), "{a}");
        }
    }
}
