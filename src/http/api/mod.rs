//! NGINX Plus's `api [write=on|off]` location: the run-time API's
//! `/N/{http,stream}/upstreams/NAME/servers[/ID]` subset (the path after
//! the location's prefix, as Plus reads it), for upstreams with a `zone`.
//! The work is `upstream::zone::api`'s; this module routes the request,
//! refuses writes when `write=off` (nginx's default), reads the body of a
//! POST or PATCH (the connection layer reads it as it reads a proxied
//! request's, so `client_max_body_size` and the body timeouts apply) and
//! answers in Plus's JSON, errors in its envelope:
//! `{"error":{"status":N,"text":"...","code":"..."},"request_id":"...","href":"..."}`.
//!
//! The location is protected as any other (allow/deny, auth_basic,
//! auth_request run before it). Tengine's `dyups_interface` is not
//! offered: its API (plain-text bodies holding `server` lines, a whole
//! upstream replaced per request, upstreams created at run time) does not
//! map onto Plus's per-server operations and ids without a second model.

use std::borrow::Cow;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, LOC, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::upstream::zone::api::{ApiError, Op};

/// The newest API version Plus documents; 1 to it are accepted.
const VERSION: u32 = 9;

pub static DIRECTIVES: &[Cmd] = &[cmd("api", LOC, 0, 1, Set::Loc(api))];

/// An `api` location's settings.
#[derive(Debug)]
pub struct ApiConf {
    /// `write=on`: POST, PATCH and DELETE are allowed.
    pub write: bool,
}

fn api(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let write = match d.args.first().map(|w| w.text.as_str()) {
        None | Some("write=off") => false,
        Some("write=on") => true,
        Some(v) => return Err(ConfError::at(format!("invalid parameter \"{}\"", v), &d.span)),
    };
    c.api = Some(Arc::new(ApiConf { write }));
    Ok(())
}

fn op(ctx: &ReqCtx<'_, '_>) -> Option<Op> {
    match ctx.req.method() {
        Method::Get | Method::Head => Some(Op::Get),
        Method::Post => Some(Op::Post),
        Method::Delete => Some(Op::Delete),
        _ if ctx.req.method_bytes() == b"PATCH" => Some(Op::Patch),
        _ => None,
    }
}

/// The content phase: GET, HEAD and DELETE are answered now; a POST or
/// PATCH gets the marker that makes the connection read its body and call
/// [`respond_with_body`].
pub fn respond<'c>(ctx: &ReqCtx<'c, '_>, conf: &ApiConf) -> Response<'c> {
    match op(ctx) {
        Some(Op::Post | Op::Patch) if conf.write => {
            let mut r = Response::new(200);
            r.body = Body::Proxy;
            r
        }
        _ => answer(ctx, conf, b""),
    }
}

/// A POST or PATCH once its body is read.
pub fn respond_with_body<'c>(ctx: &ReqCtx<'c, '_>, conf: &ApiConf, body: &[u8]) -> Response<'c> {
    answer(ctx, conf, body)
}

fn answer<'c>(ctx: &ReqCtx<'c, '_>, conf: &ApiConf, body: &[u8]) -> Response<'c> {
    match route(ctx, conf, body) {
        Ok((status, json)) => reply(status, json),
        Err(e) => {
            if e.status >= 500 {
                crate::log_req!(ctx, crate::log::error::Level::Error, "api: {}", e.text);
            }
            reply(e.status, envelope(ctx, &e))
        }
    }
}

fn route(ctx: &ReqCtx<'_, '_>, conf: &ApiConf, body: &[u8]) -> Result<(u16, String), ApiError> {
    let Some(op) = op(ctx) else {
        return Err(ApiError { status: 405, code: "MethodNotSupported", text: "method not supported".into() });
    };
    if op != Op::Get && !conf.write {
        return Err(ApiError { status: 405, code: "MethodDisabled", text: "method disabled".into() });
    }
    let path: &[u8] = &ctx.req.path;
    let loc = ctx.conf.location_name.as_bytes();
    let rest = path.strip_prefix(loc).unwrap_or(path);
    let rest = String::from_utf8_lossy(rest);
    let segs: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let not_found = || ApiError { status: 404, code: "PathNotFound", text: "path not found".into() };
    let read_only = |json: String| if op == Op::Get { Ok((200, json)) } else { Err(not_allowed()) };
    let Some(version) = segs.first() else {
        let list: Vec<String> = (1..=VERSION).map(|v| v.to_string()).collect();
        return read_only(format!("[{}]", list.join(",")));
    };
    if !version.parse::<u32>().is_ok_and(|v| (1..=VERSION).contains(&v)) {
        return Err(ApiError { status: 404, code: "UnknownVersion", text: "unknown version".into() });
    }
    match segs[1..] {
        [] => read_only("[\"http\",\"stream\"]".into()),
        [family @ ("http" | "stream")] => {
            let _ = family;
            read_only("[\"upstreams\"]".into())
        }
        [family @ ("http" | "stream"), "upstreams"] => {
            let names: Vec<String> = crate::upstream::zone::registry::names(family)
                .into_iter()
                .map(|(n, _)| crate::upstream::zone::api::json_str(&n))
                .collect();
            read_only(format!("[{}]", names.join(",")))
        }
        [family @ ("http" | "stream"), "upstreams", name, "servers"] => {
            crate::upstream::zone::api::servers(family, name, None, op, body)
        }
        [family @ ("http" | "stream"), "upstreams", name, "servers", id] => {
            crate::upstream::zone::api::servers(family, name, Some(id), op, body)
        }
        _ => Err(not_found()),
    }
}

fn not_allowed() -> ApiError {
    ApiError { status: 405, code: "MethodNotSupported", text: "method not supported".into() }
}

fn reply<'c>(status: u16, json: String) -> Response<'c> {
    let mut r = Response::new(status);
    r.content_type = Some(Cow::Borrowed("application/json"));
    r.body = Body::Owned(json.into_bytes());
    r
}

/// Plus's error object, with the request's `$request_id`.
fn envelope(ctx: &ReqCtx<'_, '_>, e: &ApiError) -> String {
    let mut id = Vec::new();
    crate::variables::VarSource::write_var(
        &crate::http::handler::ctx::Vars::request(ctx),
        &crate::variables::Var::RequestId,
        &mut id,
    );
    format!(
        "{{\"error\":{{\"status\":{},\"text\":{},\"code\":\"{}\"}},\"request_id\":\"{}\",\"href\":\"https://nginx.org/en/docs/http/ngx_http_api_module.html\"}}",
        e.status,
        crate::upstream::zone::api::json_str(&e.text),
        e.code,
        String::from_utf8_lossy(&id)
    )
}
