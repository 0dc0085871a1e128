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
    // msie_padding: MSIE and Chrome would show their own page in place of
    // a short error page (HTTP/1.0 and later, 4xx and 5xx: `write_error_body`).
    let pad = status >= 400
        && ctx.conf.core.msie_padding
        && ctx.req.head.version != crate::http::request::Version::Http09
        && ctx.req.header("user-agent").is_some_and(crate::http::error_html::wants_msie_padding);
    let mut body = Vec::new();
    if crate::http::error_html::write_error_body(
        status,
        ctx.conf.server_tokens,
        crate::config::Config::version(),
        pad,
        &mut body,
    ) {
        r.content_type = Some(Cow::Borrowed("text/html"));
        r.body = Body::Owned(body);
    }
    r
}

/// msie_refresh: MSIE gets a 301/302 as a 200 page whose meta refresh
/// goes to the target as written (nginx's `ngx_http_send_refresh`).
fn msie_refresh<'c>(ctx: &ReqCtx<'c, '_>, status: u16, target: &[u8]) -> Option<Response<'c>> {
    if !ctx.conf.core.msie_refresh
        || !matches!(status, 301 | 302)
        // error_page comes first (nginx's special response handler): a
        // redirect it makes comes back here with its own target.
        || super::has_error_page(ctx, status)
        || ctx.req.method == crate::http::request::Method::Head
        || !ctx.req.header("user-agent").is_some_and(crate::http::user_agent::is_msie)
    {
        return None;
    }
    let mut body = Vec::with_capacity(96 + target.len() * 3);
    body.extend_from_slice(b"<html><head><meta http-equiv=\"Refresh\" content=\"0; URL=");
    for &b in target {
        // NGX_ESCAPE_REFRESH: space, quotes, control bytes and non-ASCII.
        if b <= b' ' || b == b'"' || b == b'\'' || b >= 0x7f {
            body.extend_from_slice(format!("%{b:02X}").as_bytes());
        } else {
            body.push(b);
        }
    }
    body.extend_from_slice(b"\"></head><body></body></html>\r\n");
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/html"));
    r.body = Body::Owned(body);
    Some(r)
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
    if let Some(r) = msie_refresh(ctx, status, target) {
        return r;
    }
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
