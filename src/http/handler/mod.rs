//! The request pipeline after parsing, in nginx's phase order: server-level
//! `return`, location match, location `return`, `try_files`, the content
//! handler (empty_gif or static files with index/autoindex), then
//! `error_page` and the header filters. Internal redirects (index,
//! try_files fallback, error_page) loop back to the location match.

pub mod autoindex;
pub mod ctx;
pub mod directory;
pub mod empty_gif;
pub mod error_page;
pub mod mirror;
mod more_vars;
pub mod open_cache;
pub mod post_action;
pub mod random_index;
pub mod ret;
pub mod static_file;
pub mod stub_status;
pub mod subrequest;
pub mod symlinks;
pub mod try_files;
pub mod upstream_log;
mod var_values;
pub(crate) use var_values::request_cookie;

use std::borrow::Cow;

use crate::http::response::Response;
use crate::http::rewrite::run::Outcome;
use crate::log::error::Level;
use crate::log_req;
use ctx::ReqCtx;

/// nginx's limit on internal redirects before declaring a cycle.
const MAX_REDIRECTS: u32 = 10;

/// What a location stage decided.
pub enum Step<'c> {
    Done(Response<'c>),
    /// Internal redirect to a new URI (and arguments).
    Redirect(Vec<u8>, Option<Vec<u8>>),
    Named(&'c str),
}

/// Runs the whole pipeline for one request.
pub fn handle<'c>(ctx: &mut ReqCtx<'c, '_>) -> Response<'c> {
    crate::worker::unwind::test_hook(&ctx.req, crate::worker::unwind::Stage::Handler);
    // nginx refuses CONNECT (not a proxy) before any location runs; an
    // HTTP/2 extended CONNECT (WebSocket) is handled by the h2 layer.
    if !ctx.conn.http2 && ctx.req.method == crate::http::request::Method::Other && ctx.req.method_bytes() == b"CONNECT"
    {
        log_req!(ctx, Level::Info, "client sent CONNECT method while reading client request headers");
        return error(ctx, 405);
    }
    // nginx's post-read phase: the realip module with the server's settings.
    crate::http::realip::apply(ctx);
    // An ACME HTTP-01 challenge of sluice's own client, before any location.
    if let Some(r) = crate::http::acme_challenge::respond(ctx) {
        return finish(ctx, r);
    }
    let resp = route(ctx, None);
    finish(ctx, resp)
}

/// `ssl_verify_client`: nginx completes the handshake and answers every
/// request of a client whose certificate failed verification with 400 "The
/// SSL certificate error" (internal 495), and, with `on`, one that sent
/// none with 400 "No required SSL certificate was sent" (496).
///
/// Before that, nginx's check of a request for another server than the
/// one the handshake named (`ngx_http_set_virtual_server`): with SNI, a
/// Host that differs from it and leads to a server with
/// `ssl_verify_client` enabled gets 421 "Misdirected Request", as that
/// server's client certificate check did not apply to the handshake.
pub fn client_cert_status(ctx: &ReqCtx<'_, '_>) -> Option<u16> {
    let t = ctx.conn.tls.as_ref()?;
    if let Some(sni) = t.server_name.as_deref() {
        let sni = crate::http::routing::server::validate_host(sni.as_bytes());
        if !ctx.req.host.is_empty()
            && sni.as_deref() != Some(&ctx.req.host[..])
            && ctx.server.conf.ssl.verify_client != crate::config::model::VerifyClient::Off
        {
            log_req!(
                ctx,
                Level::Info,
                "client attempted to request the server name different from the one that was negotiated"
            );
            return Some(421);
        }
    }
    if let Some(e) = t.cert_error.as_ref().filter(|_| !t.cert_error_tolerated) {
        log_req!(ctx, Level::Info, "client SSL certificate verify error: {} while reading client request headers", e);
        return Some(495);
    }
    if t.require_client_cert && !t.has_client_cert {
        log_req!(ctx, Level::Info, "client sent no required SSL certificate while reading client request headers");
        return Some(496);
    }
    None
}

/// nginx's phases from the server rewrite phase on, following internal
/// redirects: the server's rewrite directives, location matching, the
/// location's rewrite directives (a changed URI matches again), then
/// `try_files` and the content handler. An internal redirect to a URI
/// starts over at the server's rewrite directives; one to a named location
/// (`start_named` too) goes straight to that location's.
pub fn route<'c>(ctx: &mut ReqCtx<'c, '_>, start_named: Option<&'c str>) -> Response<'c> {
    route_from(ctx, start_named, false)
}

/// Continues a request that limit_req delayed (`limit::wait`): from the
/// location's preaccess phase on, as nginx re-runs the phase handlers
/// when the delay's timer fires, then error_page and the filters.
pub fn resume<'c>(ctx: &mut ReqCtx<'c, '_>) -> Response<'c> {
    let resp = route_from(ctx, None, true);
    finish(ctx, resp)
}

/// [`route`], or with `at_location`, straight to the phases of the
/// location already in `ctx.conf` (found and rewritten before a delay).
fn route_from<'c>(ctx: &mut ReqCtx<'c, '_>, start_named: Option<&'c str>, mut at_location: bool) -> Response<'c> {
    let mut named: Option<&'c str> = start_named;
    // nginx's r->internal: set by any internal redirect or URI rewrite.
    let mut internal = named.is_some() || ctx.redirects > 0;
    loop {
        if named.is_none() && !at_location {
            // ngx_http_handler for a new URI.
            ctx.valid_location = true;
            ctx.conf = &ctx.server.conf;
            if let Some(script) = ctx.server.rewrite.as_deref()
                && let Outcome::Respond(r) = crate::http::rewrite::run::run(ctx, script)
            {
                return r;
            }
            internal |= ctx.uri_changed;
        }
        loop {
            if std::mem::take(&mut at_location) {
                break;
            }
            if let Some(name) = named.take() {
                match ctx.server.named.get(name) {
                    Some(l) => enter(ctx, &l.conf),
                    None => {
                        log_req!(ctx, Level::Error, "could not find named location \"@{}\"", name);
                        return error(ctx, 500);
                    }
                }
            } else {
                if let Some(r) = find_location(ctx) {
                    return r;
                }
                // `internal` locations are not for client requests.
                if ctx.conf.core.internal && !internal {
                    return error(ctx, 404);
                }
            }
            if ctx.err_status.is_none()
                && let Some(r) = body_too_large(ctx)
            {
                return r;
            }
            // The location's rewrite directives (none when no location
            // matched: the server's already ran).
            if let Some(script) = ctx.conf.rewrite.script.as_deref()
                && let Outcome::Respond(r) = crate::http::rewrite::run::run(ctx, script)
            {
                return r;
            }
            if !ctx.uri_changed {
                break;
            }
            // nginx's post-rewrite phase: match the new URI.
            internal = true;
            ctx.redirects += 1;
            if ctx.redirects > MAX_REDIRECTS {
                log_req!(
                    ctx,
                    Level::Error,
                    "rewrite or internal redirection cycle while processing \"{}\"",
                    String::from_utf8_lossy(&ctx.req.path)
                );
                return error(ctx, 500);
            }
        }
        match run_location(ctx) {
            Step::Done(r) => return r,
            Step::Named(n) => {
                if !count_redirect(ctx, "redirect to named location", &format!("@{n}")) {
                    return error(ctx, 500);
                }
                internal = true;
                named = Some(n);
            }
            Step::Redirect(uri, args) => {
                if !count_redirect(ctx, "internally redirecting to", &String::from_utf8_lossy(&uri)) {
                    return error(ctx, 500);
                }
                internal = true;
                ctx.req.path = Cow::Owned(uri);
                // nginx: the redirect's own arguments, or none.
                ctx.req.args = args.map(Cow::Owned);
                ctx.filename = None;
            }
        }
    }
}

/// An internal redirect from outside the phases (a proxied response's
/// `X-Accel-Redirect`): to a URI with its own arguments, or to `@name`,
/// as GET (a HEAD stays HEAD), then the filters, as nginx's
/// ngx_http_internal_redirect and ngx_http_named_location do. A URI with
/// `..` segments or a NUL is nginx's 404 (an unsafe URI).
pub fn internal_redirect<'c>(ctx: &mut ReqCtx<'c, '_>, to: &[u8]) -> Response<'c> {
    if ctx.req.method != crate::http::request::Method::Head {
        ctx.req.method = crate::http::request::Method::Get;
    }
    // nginx zeroes the modules' request state (r->ctx) on a redirect.
    ctx.auth = Default::default();
    let resp = match to.strip_prefix(b"@") {
        Some(name) => {
            let server: &'c crate::config::model::Server = ctx.server;
            let found = std::str::from_utf8(name).ok().and_then(|n| server.named.get_key_value(n));
            match found {
                Some((n, _)) if count_redirect(ctx, "redirect to named location", &format!("@{n}")) => {
                    route(ctx, Some(n.as_str()))
                }
                Some(_) => error(ctx, 500),
                None => {
                    log_req!(ctx, Level::Error, "could not find named location \"{}\"", String::from_utf8_lossy(to));
                    error(ctx, 500)
                }
            }
        }
        None => {
            let (path, args) = match to.iter().position(|&b| b == b'?') {
                Some(q) => (&to[..q], Some(to[q + 1..].to_vec())),
                None => (to, None),
            };
            // Judged decoded, as nginx's ngx_http_parse_unsafe_uri: a
            // `.%2e` segment is `..`.
            let decoded = crate::http::uri::percent_decode(path);
            let unsafe_uri = decoded.contains(&0)
                || decoded.split(|&b| b == b'/').any(|seg| seg == b"..")
                || path.first() != Some(&b'/');
            match crate::http::uri::normalize_path(path) {
                Ok(p) if !unsafe_uri => {
                    if !count_redirect(ctx, "internally redirecting to", &String::from_utf8_lossy(path)) {
                        return finish(ctx, error(ctx, 500));
                    }
                    ctx.req.path = Cow::Owned(p.into_owned());
                    ctx.req.args = args.map(Cow::Owned);
                    ctx.filename = None;
                    route(ctx, None)
                }
                _ => {
                    log_req!(ctx, Level::Error, "unsafe URI \"{}\" was detected", String::from_utf8_lossy(path));
                    error(ctx, 404)
                }
            }
        }
    };
    finish(ctx, resp)
}

/// The pipeline stopped for something asynchronous: a limit_req delay, an
/// auth_request subrequest or the image filter's reading of the body
/// ([`complete`] waits for it and resumes).
pub fn suspended(ctx: &ReqCtx<'_, '_>) -> bool {
    ctx.limit.delay.is_some()
        || ctx.auth_delay.is_some()
        || matches!(ctx.auth, crate::http::access::auth_request::State::Pending)
        || ctx.image == crate::http::image_filter::State::Pending
}

/// Finishes a request that [`suspended`]: waits out a delay or runs the
/// auth subrequest, then resumes the request from its location, as often
/// as it stops again.
pub async fn complete<'c>(
    w: &crate::worker::WorkerCtx,
    ctx: &mut ReqCtx<'c, '_>,
    mut resp: Response<'c>,
) -> Response<'c> {
    loop {
        if ctx.limit.delay.is_some() {
            resp = crate::http::limit::wait(ctx, resp).await;
        } else if let Some(d) = ctx.auth_delay.take() {
            // The 401 as it stood, then error_page and the filters.
            tokio::time::sleep_until((crate::clock::mono() + d).into()).await;
            crate::clock::mono_stale();
            resp = finish(ctx, resp);
        } else if matches!(ctx.auth, crate::http::access::auth_request::State::Pending) {
            Box::pin(crate::http::access::auth_request::run(w, ctx)).await;
            resp = resume(ctx);
        } else if ctx.image == crate::http::image_filter::State::Pending {
            resp = Box::pin(crate::http::image_filter::run(w, ctx, resp)).await;
        } else {
            return resp;
        }
    }
}

/// nginx's find-config phase: the location for the URI (or the server
/// level), its regex captures recorded; or nginx's 301 to a location's
/// name with its trailing slash (`/app` for `location /app/ { proxy_pass
/// ...; }`), with the client's arguments.
fn find_location<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Response<'c>> {
    ctx.uri_changed = false;
    let found = match crate::http::routing::location::lookup(&ctx.server.locations, &ctx.req.path) {
        crate::http::routing::location::Lookup::Location(l) => l,
        crate::http::routing::location::Lookup::AutoRedirect(l) => {
            enter(ctx, &l.conf);
            let mut target = Vec::new();
            if let crate::config::model::Matcher::Exact(p) | crate::config::model::Matcher::Prefix { path: p, .. } =
                &l.matcher
            {
                crate::http::uri::escape_uri(p, &mut target);
            }
            if let Some(a) = &ctx.req.args {
                target.push(b'?');
                target.extend_from_slice(a);
            }
            return Some(ret::redirect(ctx, 301, &target));
        }
    };
    // A regex location's captures replace earlier ones (one without
    // groups leaves none); its named groups become variables.
    if let Some(l) = found
        && let crate::config::model::Matcher::Regex(re) = &l.matcher
        && let Some(caps) = re.capture_values(&ctx.req.path)
    {
        for (i, n) in re.names() {
            let v = caps.get(*i).cloned().unwrap_or_default();
            ctx.named.retain(|(k, _)| k != n);
            ctx.named.push((n.clone(), v));
        }
        ctx.captures = caps;
        ctx.captured(re);
    }
    match found {
        Some(l) => enter(ctx, &l.conf),
        None => {
            ctx.handler_lost = false;
            ctx.conf = &ctx.server.conf;
        }
    }
    None
}

/// Makes `conf` the request's location, or its `limit_except` block's
/// settings for a method the block does not list (nginx's
/// ngx_http_update_location_config).
fn enter<'c>(ctx: &mut ReqCtx<'c, '_>, conf: &'c crate::config::model::LocConf) {
    ctx.handler_lost = false;
    ctx.conf = match &conf.limit_except {
        Some(le) if le.applies_to(&ctx.req) => &le.conf,
        _ => conf,
    };
}

/// nginx checks Content-Length against the matched location's
/// client_max_body_size before running it (0 disables the check).
fn body_too_large<'c>(ctx: &ReqCtx<'c, '_>) -> Option<Response<'c>> {
    let max = ctx.conf.client_max_body_size;
    match ctx.req.head.body {
        crate::http::request::BodyKind::Length(n) if max > 0 && n > max => {
            log_req!(ctx, Level::Error, "client intended to send too large body: {} bytes", n);
            Some(error(ctx, 413))
        }
        _ => None,
    }
}

/// An internal redirect: nginx allows 10 URI changes (rewrites included)
/// per request.
fn count_redirect(ctx: &mut ReqCtx<'_, '_>, action: &str, to: &str) -> bool {
    ctx.redirects += 1;
    if ctx.redirects > MAX_REDIRECTS {
        log_req!(ctx, Level::Error, "rewrite or internal redirection cycle while {} \"{}\"", action, to);
        return false;
    }
    true
}

/// The phases after rewriting: preaccess (the realip module with the
/// location's settings, limit_req, limit_conn), access, `try_files`, then
/// the content handler.
fn run_location<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    crate::http::realip::apply(ctx);
    let conf = ctx.conf;
    // nginx's preaccess phase: limit_req, limit_conn (not for subrequests).
    if !ctx.subrequest
        && let Some(r) = crate::http::limit::preaccess(ctx)
    {
        return Step::Done(r);
    }
    // The access phase: allow/deny, auth_basic, satisfy.
    if let Some(r) = crate::http::access::phase(ctx) {
        return Step::Done(r);
    }
    // nginx's precontent phase: the mirrors, started by the connection
    // layer once the pipeline returns (they need the worker to spawn on).
    // Once per location the request reaches (an internal redirect, such
    // as an index file's, reaches the precontent phase again, and nginx
    // mirrors again there); a request resumed after a delay does not.
    if !conf.mirror.uris.is_empty() && !ctx.subrequest && !ctx.mirror_due.iter().any(|(r, _)| *r == ctx.redirects) {
        let uris = conf.mirror.uris.clone();
        ctx.mirror_due.push((ctx.redirects, uris));
    }
    if let Some(tf) = &conf.try_files
        && let Some(step) = try_files::run(ctx, tf)
    {
        return step;
    }
    if conf.empty_gif {
        return Step::Done(empty_gif::respond(ctx));
    }
    if conf.stub_status {
        return Step::Done(stub_status::respond(ctx));
    }
    if let Some(page) = &conf.metrics.page {
        return Step::Done(crate::metrics::page::respond(ctx, page));
    }
    if let Some(api) = &conf.api {
        return Step::Done(crate::http::api::respond(ctx, api));
    }
    if let Some(page) = &conf.check_status {
        return Step::Done(crate::upstream::check::status::respond(ctx, page));
    }
    // A purge location of its own (`proxy_cache_purge ZONE KEY` or the
    // fastcgi_ spelling).
    for up in [&conf.proxy.up, &conf.fastcgi.up] {
        if let crate::http::cache::purge::Purge::Separate { zone, key } = &up.cache.purge {
            return Step::Done(crate::http::cache::purge::separate(ctx, zone, key));
        }
    }
    if ctx.handler_lost {
        log_req!(ctx, Level::Alert, "no upstream configuration");
        return Step::Done(error(ctx, 500));
    }
    if crate::http::proxy::has_handler(conf) {
        let mut r = Response::new(200);
        r.body = crate::http::response::Body::Proxy;
        return Step::Done(r);
    }
    if conf.flv {
        return crate::http::flv::serve(ctx);
    }
    if conf.mp4.handler {
        return crate::http::mp4::serve(ctx);
    }
    if let Some(step) = crate::http::dav::handle(ctx) {
        return step;
    }
    static_file::serve(ctx)
}

/// nginx's generated error response for `status`.
pub fn error<'c>(ctx: &ReqCtx<'c, '_>, status: u16) -> Response<'c> {
    ret::special(ctx, status)
}

/// nginx's error response for `status` after a proxy failure, with
/// error_page and the header filters applied.
pub fn finish_error<'c>(ctx: &mut ReqCtx<'c, '_>, status: u16) -> Response<'c> {
    let r = error(ctx, status);
    finish(ctx, r)
}

/// `proxy_intercept_errors`: the origin's error answered by error_page,
/// with the origin's `WWW-Authenticate` fields kept on a 401 (nginx
/// copies them before it redirects to the page).
pub fn intercepted<'c>(ctx: &mut ReqCtx<'c, '_>, origin: &Response<'c>) -> Response<'c> {
    let mut r = error(ctx, origin.status);
    if origin.status == 401 {
        error_page::keep_www_authenticate(origin, &mut r);
    }
    finish(ctx, r)
}

/// The header filters on a response that came from an origin.
pub fn finish_proxied<'c>(ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>) -> Response<'c> {
    // The origin of an error_page's location answered: without `=` the
    // original status goes out with its page, `=code` forces one (nginx's
    // r->err_status); `=` alone keeps the origin's.
    if let Some(s) = ctx.err_status.filter(|s| *s != 0) {
        resp.status = s;
    }
    // The slice module's filter comes first, as in nginx's filter order.
    if let Some(r) = crate::http::slice::filter::apply(ctx, &mut resp) {
        return r;
    }
    crate::http::filter::headers::apply(ctx, &mut resp);
    crate::http::userid::apply(ctx, &mut resp);
    crate::http::gunzip::apply(ctx, &mut resp);
    crate::http::charset::apply(ctx, &mut resp);
    ctx.override_charset = None;
    crate::http::filter::sub::apply(ctx, &mut resp);
    if crate::http::image_filter::apply(ctx, &mut resp) {
        // The rest once the image filter read the body (`proxy::respond`).
        return resp;
    }
    finish_after_image(ctx, resp)
}

/// Whether an error_page covers `status` here (proxy_intercept_errors).
pub fn has_error_page(ctx: &ReqCtx<'_, '_>, status: u16) -> bool {
    ctx.conf.error_pages.iter().any(|e| e.codes.contains(&status))
}

/// error_page, then the header filters.
fn finish<'c>(ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>) -> Response<'c> {
    if matches!(resp.body, crate::http::response::Body::Proxy) || suspended(ctx) {
        // Filters run once the origin answered (finish_proxied), or once
        // a delayed request resumes (`resume`).
        return resp;
    }
    if resp.is_error_page && ctx.err_status.is_none() {
        resp = error_page::apply(ctx, resp);
    }
    crate::http::filter::headers::apply(ctx, &mut resp);
    crate::http::userid::apply(ctx, &mut resp);
    crate::http::gunzip::apply(ctx, &mut resp);
    crate::http::charset::apply(ctx, &mut resp);
    crate::http::filter::sub::apply(ctx, &mut resp);
    if crate::http::image_filter::apply(ctx, &mut resp) {
        // The rest once the image filter read the body (`complete`).
        return resp;
    }
    finish_after_image(ctx, resp)
}

/// The header filters after the image filter's (nginx's order: SSI, the
/// addition module's postponed parts, compression).
pub fn finish_after_image<'c>(ctx: &mut ReqCtx<'c, '_>, mut resp: Response<'c>) -> Response<'c> {
    crate::http::ssi::apply(ctx, &mut resp);
    crate::http::addition::apply(ctx, &mut resp);
    crate::http::filter::compress::apply(ctx, &mut resp);
    resp
}

/// error_page and every header filter, for a response a filter made
/// itself (the image filter's 415).
pub fn finish_filtered<'c>(ctx: &mut ReqCtx<'c, '_>, resp: Response<'c>) -> Response<'c> {
    finish(ctx, resp)
}

/// error_page and the header filters for a subrequest's response
/// (`subrequest::fetch`; compression is for the client's response only,
/// which `compress::apply` checks).
pub fn finish_subrequest<'c>(ctx: &mut ReqCtx<'c, '_>, resp: Response<'c>) -> Response<'c> {
    finish(ctx, resp)
}
