//! nginx's `auth_request` and `auth_request_set`: the access decision is
//! asked of another location, usually one proxying to an authentication
//! service (oauth2-proxy, Authelia): its 2xx admits the request, 401 and
//! 403 refuse it (a 401 with the service's `WWW-Authenticate`), anything
//! else is a 500. `auth_request_set` copies values from the subrequest
//! (`$upstream_http_x_user`) into variables of the request.
//!
//! The pipeline is synchronous and the subrequest is not: the access
//! phase marks the request pending and returns; the connection layer then
//! awaits [`run`] (through `handler::complete`) and resumes the request
//! from its location, where the phase finds the stored answer. The
//! subrequest is a GET of the URI with the client's headers and no body,
//! handled as an internal request that skips the limit and access phases,
//! as nginx's subrequests do.

use std::borrow::Cow;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd, list};
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::request::{Method, Request};
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;
use crate::worker::WorkerCtx;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("auth_request", HSL, 1, 1, Set::Loc(auth_request)),
    list(cmd("auth_request_set", HSL, 2, 2, Set::Loc(auth_request_set)), reset_set),
];

#[derive(Clone, Debug, Default)]
pub struct AuthRequestConf {
    /// None: `auth_request off` (the default).
    pub uri: Option<Arc<Template>>,
    /// `auth_request_set`: the variable (a `set` slot, or `$args`, which
    /// nginx lets any module set) and its value.
    pub set: Arc<Vec<(crate::http::rewrite::SetTarget, Template)>>,
}

fn auth_request(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    c.access.auth_request.uri =
        if v == "off" { None } else { Some(Arc::new(Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?)) };
    Ok(())
}

fn reset_set(c: &mut LocConf) {
    c.access.auth_request.set = Arc::default();
}

fn auth_request_set(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let var = d.args[0].text.as_str();
    let Some(name) = var.strip_prefix('$').filter(|n| !n.is_empty()) else {
        return Err(ConfError::at(format!("invalid variable name \"{var}\""), &d.span));
    };
    // Declared with the `set` variables (`rewrite::vars`).
    let slot = if name.eq_ignore_ascii_case("args") {
        crate::http::rewrite::SetTarget::Args
    } else {
        crate::http::rewrite::SetTarget::Slot(
            crate::http::rewrite::vars::slot(name)
                .ok_or_else(|| ConfError::at(format!("invalid variable name \"{var}\""), &d.span))?,
        )
    };
    let value = Template::compile(&d.args[1].text).map_err(|e| ConfError::at(e, &d.span))?;
    let mut set = (*c.access.auth_request.set).clone();
    set.push((slot, value));
    c.access.auth_request.set = Arc::new(set);
    Ok(())
}

/// What the subrequest answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub www_authenticate: Vec<FieldValue>,
}

/// The request's state with its `auth_request`.
#[derive(Debug, Default)]
pub enum State {
    #[default]
    NotAsked,
    /// The access phase stopped here: the subrequest is to be run.
    Pending,
    Answered(Box<Answer>),
}

/// The access handler's verdict from the stored answer.
pub enum Verdict {
    Declined,
    Pending,
    Admit,
    Refuse(Response<'static>),
    Fail,
}

pub fn handler(ctx: &ReqCtx<'_, '_>) -> Verdict {
    if ctx.conf.access.auth_request.uri.is_none() {
        return Verdict::Declined;
    }
    let State::Answered(a) = &ctx.auth else { return Verdict::Pending };
    match a.status {
        200..=299 => Verdict::Admit,
        401 => {
            let mut r = Response::new(401);
            for v in &a.www_authenticate {
                r.headers.push((Cow::Borrowed("WWW-Authenticate"), v.clone()));
            }
            Verdict::Refuse(r)
        }
        403 => Verdict::Refuse(Response::new(403)),
        s => {
            log_req!(ctx, Level::Error, "auth request unexpected status: {}", s);
            Verdict::Fail
        }
    }
}

/// Runs the subrequest and stores its answer (and `auth_request_set`'s
/// values) in `ctx`.
pub async fn run<'c>(w: &WorkerCtx, ctx: &mut ReqCtx<'c, '_>) {
    let conf: &'c LocConf = ctx.conf;
    let Some(tpl) = conf.access.auth_request.uri.as_deref() else { return };
    let target = tpl.render_to_vec(&Vars::request(ctx));
    let (path, args) = match target.iter().position(|&b| b == b'?') {
        Some(q) => (&target[..q], Some(Cow::Owned(target[q + 1..].to_vec()))),
        None => (&target[..], None),
    };
    let path = match crate::http::uri::normalize_path(path) {
        Ok(p) => p.into_owned(),
        Err(_) => {
            log_req!(ctx, Level::Error, "auth request to an invalid URI \"{}\"", String::from_utf8_lossy(&target));
            ctx.auth = State::Answered(Box::new(Answer { status: 500, www_authenticate: Vec::new() }));
            return;
        }
    };
    let req = Request {
        buf: ctx.req.buf,
        method: Method::Get,
        head: ctx.req.head,
        path: Cow::Owned(path),
        args,
        host: ctx.req.host.clone(),
    };
    let mut sub = ReqCtx::new(ctx.group, ctx.server, req, ctx.conn);
    sub.subrequest = true;
    sub.realip = ctx.realip;
    // An internal request: `internal` locations answer it.
    sub.redirects = 1;
    let mut resp = crate::http::handler::route(&mut sub, None);
    if matches!(resp.body, Body::Proxy) {
        let mut client = crate::http::proxy::request_body::Client::detached();
        resp = Box::pin(crate::http::proxy::respond(w, &mut sub, &mut client)).await;
    }
    let answer = Answer {
        status: resp.status,
        www_authenticate: resp
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
            .map(|(_, v)| v.clone())
            .collect(),
    };
    let vars = Vars { resp: Some(&resp), ..Vars::request(&sub) };
    let values: Vec<(crate::http::rewrite::SetTarget, Vec<u8>)> =
        conf.access.auth_request.set.iter().map(|(slot, t)| (slot.clone(), t.render_to_vec(&vars))).collect();
    crate::http::proxy::drain(w, resp.body).await;
    for (target, v) in values {
        match target {
            crate::http::rewrite::SetTarget::Slot(slot) => ctx.set_var(slot, v),
            crate::http::rewrite::SetTarget::Args => {
                ctx.req.args = if v.is_empty() { None } else { Some(std::borrow::Cow::Owned(v)) };
                ctx.unparsed_uri_valid = false;
            }
        }
    }
    ctx.auth = State::Answered(Box::new(answer));
}
