//! `return` and nginx's generated ("special") responses: error pages and
//! redirects with their small HTML bodies.

use std::borrow::Cow;

use super::ctx::{ReqCtx, Vars, push_u64};
use crate::config::model::Return;
use crate::http::response::{Body, Response};

/// Statuses after which nginx drops keep-alive (`ngx_http_special_response_handler`).
fn closes_connection(status: u16) -> bool {
    matches!(status, 400 | 413 | 414 | 494 | 495 | 496 | 497 | 500 | 501)
}

/// nginx's generated response for `status`: the standard HTML body (none
/// for 1xx/2xx/204/304), `text/html`, and Connection: close where nginx
/// closes.
pub fn special<'c>(ctx: &ReqCtx<'c, '_>, status: u16) -> Response<'c> {
    let mut r = Response::new(status);
    r.is_error_page = status >= 300;
    r.close = closes_connection(status);
    if let Some(body) =
        crate::http::error_html::error_body(status, ctx.conf.server_tokens, crate::config::Config::version())
    {
        r.content_type = Some(Cow::Borrowed("text/html"));
        r.body = Body::Owned(body.to_vec());
    }
    r
}

/// Makes a redirect target absolute the way nginx's header filter does:
/// with `absolute_redirect on`, a target starting with `/` gets the scheme,
/// the host (the server's first name with `server_name_in_redirect on`,
/// else the request's Host, else the local address) and, with
/// `port_in_redirect on`, a port other than the scheme's default.
pub fn absolute_location(ctx: &ReqCtx<'_, '_>, target: &[u8]) -> Vec<u8> {
    let core = &ctx.conf.core;
    if !target.starts_with(b"/") || !core.absolute_redirect {
        return target.to_vec();
    }
    let mut out = Vec::with_capacity(16 + ctx.req.host.len() + target.len());
    let tls = ctx.conn.tls.is_some();
    out.extend_from_slice(if tls { b"https://" } else { b"http://" });
    if core.server_name_in_redirect {
        out.extend_from_slice(ctx.server.name.as_bytes());
    } else if !ctx.req.host.is_empty() {
        out.extend_from_slice(&ctx.req.host);
    } else {
        match ctx.conn.local.ip() {
            std::net::IpAddr::V6(a) => out.extend_from_slice(format!("[{a}]").as_bytes()),
            a => out.extend_from_slice(a.to_string().as_bytes()),
        }
    }
    let port = ctx.conn.local.port();
    if core.port_in_redirect && port != if tls { 443 } else { 80 } {
        out.push(b':');
        push_u64(&mut out, port as u64);
    }
    out.extend_from_slice(target);
    out
}

pub fn redirect<'c>(ctx: &ReqCtx<'c, '_>, status: u16, target: &[u8]) -> Response<'c> {
    let mut r = special(ctx, status);
    r.location = Some(absolute_location(ctx, target));
    r
}

pub fn respond<'c>(ctx: &ReqCtx<'c, '_>, ret: &'c Return) -> Response<'c> {
    let code = ret.code;
    if matches!(code, 301 | 302 | 303 | 307 | 308) {
        let target = ret.text.as_ref().map(|t| t.render_to_vec(&Vars::request(ctx))).unwrap_or_default();
        return redirect(ctx, code, &target);
    }
    match &ret.text {
        // nginx's header filter sends a 204 as a bare head: no
        // Content-Type, no body, even with a text.
        _ if code == 204 => Response::new(204),
        Some(t) => {
            let mut r = Response::new(code);
            r.body = Body::Owned(t.render_to_vec(&Vars::request(ctx)));
            r.content_type = Some(Cow::Borrowed(super::static_file::content_type(ctx.conf, &ctx.req.path)));
            r.close = closes_connection(code);
            r
        }
        None if code == 444 => {
            let mut r = Response::new(444);
            r.close = true;
            r
        }
        None if code >= 300 => special(ctx, code),
        None => {
            let mut r = Response::new(code);
            r.content_type = Some(Cow::Borrowed(super::static_file::content_type(ctx.conf, &ctx.req.path)));
            r
        }
    }
}
