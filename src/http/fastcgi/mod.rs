//! FastCGI (`fastcgi_pass`), as nginx's ngx_http_fastcgi_module: a
//! responder request to an application server such as php-fpm, on the
//! reverse proxy's upstream core (`crate::http::proxy`). This module supplies
//! only what FastCGI does its own way, behind the core's protocol seam
//! (`crate::config::proxy::Protocol::FastCgi`):
//!
//! - [`request_head`]: BEGIN_REQUEST and the PARAMS records (the
//!   `fastcgi_param`s and the request's headers as `HTTP_*`); the body
//!   then goes in STDIN records (`crate::http::proxy::request_body`);
//! - [`response::Reader`]: the CGI header lines at the start of STDOUT
//!   (`Status:`, `Location:`, the rest passed on), STDERR logged;
//! - [`response::Body`]: the rest of STDOUT, until END_REQUEST.
//!
//! Everything else (peers, keep-alive pools, `queue`, retries, timeouts,
//! read-ahead buffering, 502/504, `$upstream_*`) is the core's.

pub mod conf;
pub mod record;
pub mod response;

use std::sync::Arc;

use crate::config::proxy::ProxyPass;
use crate::http::cache::serve::ReqCache;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::proxy::request_body::ReqBody;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;
use crate::worker::WorkerCtx;

/// `$fastcgi_script_name` and `$fastcgi_path_info` of `uri`, by
/// `fastcgi_split_path_info` (the whole URI and nothing without it, or
/// when it does not match), `fastcgi_index` appended to a script name
/// ending in `/`.
pub fn split(conf: &conf::FastcgiConf, uri: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut script, info) = match conf.split_path_info.as_deref().and_then(|re| re.captures(uri)) {
        Some(c) => {
            (c.get(1).map_or(&b""[..], |m| m.as_bytes()).to_vec(), c.get(2).map_or(&b""[..], |m| m.as_bytes()).to_vec())
        }
        None => (uri.to_vec(), Vec::new()),
    };
    if script.last() == Some(&b'/')
        && let Some(index) = &conf.index
    {
        script.extend_from_slice(index);
    }
    (script, info)
}

/// `$fastcgi_script_name` of the request as it stands.
pub fn script_name(ctx: &ReqCtx<'_, '_>) -> Vec<u8> {
    split(&ctx.conf.fastcgi, &ctx.req.path).0
}

/// `$fastcgi_path_info` of the request as it stands. A `try_files` that
/// moved the URI to the script name keeps the path info split off before
/// (nginx loses it there: its ticket 321, worked around with `set` in
/// Debian's snippets/fastcgi-php.conf).
pub fn path_info(ctx: &ReqCtx<'_, '_>) -> Vec<u8> {
    let (script, info) = split(&ctx.conf.fastcgi, &ctx.req.path);
    if info.is_empty()
        && let Some((kept_script, kept_info)) = &ctx.fastcgi_path_info
        && *kept_script == script
    {
        return kept_info.clone();
    }
    info
}

/// The request's start: BEGIN_REQUEST (with FCGI_KEEP_CONN when the
/// connection is to be kept) and the PARAMS stream.
pub fn request_head(ctx: &mut ReqCtx<'_, '_>, body: &ReqBody, keep_conn: bool) -> Vec<u8> {
    note_body_len(ctx, body);
    let ctx = &*ctx;
    let conf = &ctx.conf.fastcgi;
    let mut out = Vec::with_capacity(1024);
    record::begin_request(&mut out, keep_conn);
    let mut params = record::Params::default();
    each_param(ctx, &conf.params, conf.pass_request_headers, |name, value| params.push(name, value));
    params.finish(&mut out);
    out
}

/// nginx sets the length of a body it read whole (a chunked one too, even
/// empty) for `$content_length`, which the params pass on as CONTENT_LENGTH.
pub(crate) fn note_body_len(ctx: &mut ReqCtx<'_, '_>, body: &ReqBody) {
    if ctx.req.header("content-length").is_none()
        && let ReqBody::Buffered(b) = body
        && (!b.is_empty() || ctx.req.header("transfer-encoding").is_some())
    {
        ctx.body_len = Some(b.len());
    }
}

/// The variables a FastCGI, uwsgi or SCGI application gets, in order:
/// the `*_param`s (rendered, `if_not_empty` ones left out when empty),
/// then, with `headers`, the request's headers as `HTTP_*` unless a param
/// of the same name was given (`fastcgi_param HTTP_HOST ...` wins), then
/// for `*_cache_revalidate` the stored entry's validators, as nginx's
/// cache params (`HTTP_IF_NONE_MATCH $upstream_cache_etag`, ...).
pub(crate) fn each_param(
    ctx: &ReqCtx<'_, '_>,
    params: &[conf::Param],
    headers: bool,
    mut emit: impl FnMut(&[u8], &[u8]),
) {
    let vars = Vars::request(ctx);
    let mut value = Vec::with_capacity(256);
    for p in params {
        value.clear();
        p.value.render(&vars, &mut value);
        if p.if_not_empty && value.is_empty() {
            continue;
        }
        emit(&p.name, &value);
    }
    if headers {
        for (name, v) in merged_headers(ctx) {
            if !params.iter().any(|p| p.name == name) {
                emit(&name, &v);
            }
        }
    }
    for (name, v) in ReqCache::validators(ctx) {
        emit(&param_name(name.as_bytes()), v);
    }
}

/// The request's headers as `HTTP_*` params: uppercase, `-` as `_`;
/// repeated headers joined (cookies with "; ", others with ", ") as nginx
/// 1.23 does. A name with `_` in it is left out, as nginx ignores such
/// header lines by default: `X_Forwarded_For` cannot pose as
/// `X-Forwarded-For`.
fn merged_headers(ctx: &ReqCtx<'_, '_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for (name, v) in ctx.req.headers() {
        if name.contains(&b'_')
            || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
            || ReqCache::withholds(ctx, name)
        {
            continue;
        }
        let key = param_name(name);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, prev)) => {
                prev.extend_from_slice(if name.eq_ignore_ascii_case(b"cookie") { b"; " } else { b", " });
                prev.extend_from_slice(v);
            }
            None => out.push((key, v.to_vec())),
        }
    }
    out
}

/// A header's `HTTP_*` param name: uppercase, `-` as `_`.
pub(crate) fn param_name(header: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(5 + header.len());
    key.extend_from_slice(b"HTTP_");
    key.extend(header.iter().map(|&b| if b == b'-' { b'_' } else { b.to_ascii_uppercase() }));
    key
}

/// `fastcgi_pass` (or `uwsgi_pass`) with variables: the rendered value names an upstream
/// block, or is an address (`host:port` with an IP, `unix:/path`); any
/// other name is nginx's "no resolver defined" 502 (or, without a port,
/// its "no port in upstream" 500).
pub fn resolve(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    tpl: &Template,
    protocol: crate::config::proxy::Protocol,
) -> Result<Arc<ProxyPass>, u16> {
    let rendered = tpl.render_to_vec(&Vars::request(ctx));
    let written = String::from_utf8_lossy(&rendered);
    // uwsgi's value may carry its scheme: `suwsgi://` is TLS.
    let (authority, tls) = match protocol {
        crate::config::proxy::Protocol::Uwsgi => match written.strip_prefix("suwsgi://") {
            Some(r) => (r.to_string(), true),
            None => (written.strip_prefix("uwsgi://").unwrap_or(&written).to_string(), false),
        },
        _ => (written.into_owned(), false),
    };
    let named = w.cfg.http.upstreams.iter().find(|u| !u.implicit && u.name == authority).cloned();
    let upstream = match named {
        Some(u) => u,
        None if crate::http::proxy::dynamic::is_address(&authority) => {
            // Kept apart from a proxy_pass to the same address: a pool
            // holds connections of one protocol.
            let scheme = match protocol {
                crate::config::proxy::Protocol::Uwsgi if tls => "suwsgi",
                crate::config::proxy::Protocol::Uwsgi => "uwsgi",
                crate::config::proxy::Protocol::Scgi => "scgi",
                crate::config::proxy::Protocol::Memcached => "memcached",
                _ => "fastcgi",
            };
            match w.proxy.borrow_mut().targets.get_as(&format!("{scheme}://{}", authority), &authority, tls) {
                Ok(u) => u,
                Err(why) => {
                    log_req!(ctx, Level::Error, "{} while handling request", why);
                    return Err(502);
                }
            }
        }
        // A name without a port is no address (nginx's 500); with one,
        // nginx would need a `resolver` (its 502).
        None if !conf::has_port(&authority) => {
            log_req!(ctx, Level::Error, "no port in upstream \"{}\"", authority);
            return Err(500);
        }
        None => {
            let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h);
            log_req!(ctx, Level::Error, "no resolver defined to resolve {}", host);
            return Err(502);
        }
    };
    let mut target = conf::target(upstream, protocol);
    target.tls = tls;
    target.proxy_host = authority;
    Ok(Arc::new(target))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_path_info_and_appends_the_index() {
        let mut c = conf::FastcgiConf::default();
        assert_eq!(split(&c, b"/a/b.php/x/y"), (b"/a/b.php/x/y".to_vec(), Vec::new()));
        c.split_path_info = Some(Arc::new(regex::bytes::Regex::new(r"^(.+?\.php)(/.*)$").expect("regex")));
        assert_eq!(split(&c, b"/a/b.php/x/y"), (b"/a/b.php".to_vec(), b"/x/y".to_vec()));
        assert_eq!(split(&c, b"/a/b.php"), (b"/a/b.php".to_vec(), Vec::new()));
        c.index = Some(b"index.php".to_vec());
        assert_eq!(split(&c, b"/dir/"), (b"/dir/index.php".to_vec(), Vec::new()));
    }
}
