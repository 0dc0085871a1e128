//! Response compression: nginx's gzip filter, ngx_brotli's brotli filter
//! and the zstd module's filter as one filter that picks, per response, the
//! encoding the client accepts best ([`negotiate`]), and the `*_static`
//! content handlers that serve precompressed siblings ([`precompressed`]).
//!
//! The decision ([`apply`]) follows the nginx filters' header-filter tests
//! in their order: the filter is on, the status is 200, 403 or 404, the
//! response has no Content-Encoding yet, its
//! length (when known) reaches `*_min_length`, its type is in `*_types`.
//! A response passing them varies by Accept-Encoding (`Vary` when
//! `gzip_vary on`), whatever the client accepts. gzip alone also applies
//! the core's `gzip_http_version`, `gzip_proxied` and `gzip_disable`
//! (ngx_brotli and the zstd module do not look at them). The chosen
//! encoding wraps the body ([`stream::Compressed`]); Content-Length goes
//! (chunked on HTTP/1.1, DATA frames on HTTP/2), Accept-Ranges goes, and a
//! strong ETag becomes weak, as nginx ≥ 1.7.3 does. A HEAD request gets
//! the headers its GET would (as from nginx) and no encoder runs: the body
//! is never pulled, and the encoder starts with the first piece.
//!
//! One difference from nginx: a Range request is answered by the static
//! handler (206, unencoded) before this filter runs, where nginx would
//! compress the whole file and ignore the range.

pub mod encoder;
pub mod negotiate;
pub mod precompressed;
pub mod stream;

use std::borrow::Cow;

use crate::config::compress::{CompressConf, proxied};
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Version;
use crate::http::response::{Body, Response};
use negotiate::{Accepted, Coding};

/// The request's Accept-Encoding lines as one list; None without any.
pub fn accepted(ctx: &ReqCtx<'_, '_>) -> Option<Accepted> {
    let mut a: Option<Accepted> = None;
    for (n, v) in ctx.req.headers() {
        if n.eq_ignore_ascii_case(b"accept-encoding") {
            a.get_or_insert_with(Accepted::default).add(v);
        }
    }
    a
}

/// The header filter: compresses `resp` when the location and the client
/// allow it, and adds `Vary: Accept-Encoding` where nginx does.
pub fn apply<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    // A subrequest's body becomes part of its parent's (nginx's
    // ngx_http_gzip_ok declines subrequests).
    if ctx.subrequest {
        return;
    }
    let conf = &ctx.conf.compress;
    let mut vary = ctx.vary_encoding;
    if !conf.idle() {
        let (varies, chosen) = decide(ctx, resp, conf);
        vary |= varies;
        if let Some(c) = chosen {
            encode(ctx, resp, c);
        }
    }
    if vary && conf.vary {
        resp.headers.push((Cow::Borrowed("Vary"), FieldValue::from_static(b"Accept-Encoding")));
    }
}

/// Whether the response depends on Accept-Encoding here, and the encoding
/// to apply.
fn decide(ctx: &ReqCtx<'_, '_>, resp: &Response<'_>, conf: &CompressConf) -> (bool, Option<Coding>) {
    let compressible_body = match &resp.body {
        Body::Empty | Body::Static(_) | Body::Owned(_) | Body::Shared(_) | Body::File { .. } | Body::Upstream(_) => {
            true
        }
        // Only replaced by the sub filter so far.
        Body::Compressed(z) => z.coding.is_none(),
        _ => false,
    };
    if !matches!(resp.status, 200 | 403 | 404)
        || !compressible_body
        // An HTTP/2 WebSocket (extended CONNECT) is no response to encode.
        || ctx.websocket_key.is_some()
        || resp.header("content-encoding").is_some_and(|v| !v.is_empty())
    {
        return (false, None);
    }
    let len = resp.body.known_len();
    let ct = resp.content_type.as_deref();
    let mut varies = false;
    let mut offered = [Coding::Gzip; 3];
    let mut n = 0;
    for c in conf.preference {
        let f = conf.filter(c);
        if !f.on || len.is_some_and(|l| l < f.min_length) || !f.types.matches(ct) {
            continue;
        }
        varies = true;
        if c == Coding::Gzip && !gzip_allowed(ctx, Some(resp), conf) {
            continue;
        }
        offered[n] = c;
        n += 1;
    }
    if n == 0 {
        return (varies, None);
    }
    let chosen = accepted(ctx).and_then(|a| a.choose(&offered[..n]));
    (varies, chosen)
}

fn encode<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>, c: Coding) {
    let conf = &ctx.conf.compress;
    match &mut resp.body {
        // The sub filter's output: encoded as it comes out.
        Body::Compressed(z) if z.coding.is_none() => z.encode_too(c, conf.filter(c).level, conf.brotli_window),
        _ => {
            let body = std::mem::replace(&mut resp.body, Body::Empty);
            let z = stream::Compressed::new(c, body, conf.filter(c).level, conf.brotli_window);
            resp.body = Body::Compressed(Box::new(z));
        }
    }
    resp.headers.push((Cow::Borrowed("Content-Encoding"), FieldValue::from_static(c.name().as_bytes())));
    // nginx's ngx_http_clear_accept_ranges and ngx_http_weak_etag.
    resp.accept_ranges = false;
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges"));
    weaken_etag(resp);
}

/// nginx's ngx_http_weak_etag on a response: its own ETag or an origin's
/// becomes weak; one that is not a quoted string goes.
pub fn weaken_etag(resp: &mut Response<'_>) {
    if let Some(e) = resp.etag.take() {
        resp.etag = weak_etag(&e);
    }
    let mut i = 0;
    while i < resp.headers.len() {
        if resp.headers[i].0.eq_ignore_ascii_case("etag") {
            match weak_etag(&resp.headers[i].1) {
                Some(w) => resp.headers[i].1 = w.into(),
                None => {
                    resp.headers.remove(i);
                    continue;
                }
            }
        }
        i += 1;
    }
}

/// `W/"..."` stays, `"..."` gets the `W/`, anything else is dropped.
pub fn weak_etag(e: &[u8]) -> Option<Vec<u8>> {
    if e.starts_with(b"W/") {
        Some(e.to_vec())
    } else if e.starts_with(b"\"") {
        let mut w = Vec::with_capacity(e.len() + 2);
        w.extend_from_slice(b"W/");
        w.extend_from_slice(e);
        Some(w)
    } else {
        None
    }
}

/// The rest of nginx's `ngx_http_gzip_ok` past Accept-Encoding: the MSIE 6
/// mask, `gzip_http_version`, `gzip_proxied` for a request with `Via`, and
/// the `gzip_disable` regexes. `resp` is None for a precompressed file,
/// decided before any response exists (nginx's gzip_static sees no response
/// headers either).
pub fn gzip_allowed(ctx: &ReqCtx<'_, '_>, resp: Option<&Response<'_>>, conf: &CompressConf) -> bool {
    let ua = ctx.req.header("user-agent");
    if conf.disable.msie6 && ua.is_some_and(crate::http::user_agent::is_msie6) {
        return false;
    }
    match ctx.req.version() {
        Version::Http09 => return false,
        Version::Http10 if !conf.http10 => return false,
        _ => {}
    }
    if ctx.req.header("via").is_some() && !proxied_ok(ctx, resp, conf.proxied) {
        return false;
    }
    !(ua.is_some_and(|ua| conf.disable.regexes.iter().any(|re| re.is_match(ua))))
}

/// `gzip_proxied` for a request that came through a proxy.
fn proxied_ok(ctx: &ReqCtx<'_, '_>, resp: Option<&Response<'_>>, p: u16) -> bool {
    if p & proxied::OFF != 0 {
        return false;
    }
    if p & proxied::ANY != 0 {
        return true;
    }
    if p & proxied::AUTH != 0 && ctx.req.header("authorization").is_some() {
        return true;
    }
    let header = |name: &str| resp.and_then(|r| r.header(name));
    if let Some(e) = header("expires") {
        if p & proxied::EXPIRED == 0 {
            return false;
        }
        let Some(expires) = crate::http::date::parse_http_date(e) else { return false };
        let date = match header("date") {
            Some(d) => match crate::http::date::parse_http_date(d) {
                Some(d) => d,
                None => return false,
            },
            None => crate::clock::now_secs(),
        };
        return expires < date;
    }
    let cache_control: Vec<&[u8]> = resp
        .map(|r| {
            r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case("cache-control")).map(|(_, v)| &v[..]).collect()
        })
        .unwrap_or_default();
    if !cache_control.is_empty() {
        let has = |t: &[u8]| {
            cache_control.iter().any(|v| v.split(|&b| b == b',').any(|x| x.trim_ascii().eq_ignore_ascii_case(t)))
        };
        return (p & proxied::NO_CACHE != 0 && has(b"no-cache"))
            || (p & proxied::NO_STORE != 0 && has(b"no-store"))
            || (p & proxied::PRIVATE != 0 && has(b"private"));
    }
    let last_modified = resp.is_some_and(|r| r.last_modified.is_some() || r.header("last-modified").is_some());
    if p & proxied::NO_LM != 0 && last_modified {
        return false;
    }
    let etag = resp.is_some_and(|r| r.etag.is_some() || r.header("etag").is_some());
    !(p & proxied::NO_ETAG != 0 && etag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_etags() {
        assert_eq!(weak_etag(b"\"a-1\"").as_deref(), Some(&b"W/\"a-1\""[..]));
        assert_eq!(weak_etag(b"W/\"a-1\"").as_deref(), Some(&b"W/\"a-1\""[..]));
        assert_eq!(weak_etag(b"a-1"), None);
    }
}
