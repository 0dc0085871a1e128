//! nginx's addition module (ngx_http_addition_filter_module):
//! `add_before_body` and `add_after_body` put the answers of other
//! locations before and after a response's body, for the types in
//! `addition_types`. The answers come from subrequests
//! (`handler::subrequest`, the pipeline every request runs) and are
//! written into the response's streaming body (`Compressed`) around what
//! the sub filter and SSI make of the body itself, before compression,
//! where nginx's postpone filter puts them.

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, MANY, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};
use crate::worker::WorkerCtx;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("add_before_body", HSL, 1, 1, Set::Loc(add_before_body)),
    cmd("add_after_body", HSL, 1, 1, Set::Loc(add_after_body)),
    cmd("addition_types", HSL, 1, MANY, Set::Loc(addition_types)),
];

#[derive(Clone, Debug)]
pub struct AdditionConf {
    /// The URIs (None: none, also for `""`, which turns an inherited one
    /// off as nginx's empty string does).
    pub before: Option<Arc<[u8]>>,
    pub after: Option<Arc<[u8]>>,
    /// Lowercase types (`text/html` always); `*` is any.
    pub types: Arc<Vec<String>>,
}

impl Default for AdditionConf {
    fn default() -> Self {
        AdditionConf { before: None, after: None, types: Arc::new(vec!["text/html".into()]) }
    }
}

fn uri(d: &Directive) -> Result<Option<Arc<[u8]>>, ConfError> {
    let v = d.args[0].text.as_bytes();
    Ok(if v.is_empty() { None } else { Some(Arc::from(v)) })
}

fn add_before_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.addition.before = uri(d)?;
    Ok(())
}

fn add_after_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.addition.after = uri(d)?;
    Ok(())
}

fn addition_types(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.addition.types = crate::http::filter::type_list(d);
    Ok(())
}

/// The URIs whose answers go around one response's body.
pub struct Addition {
    before: Option<Arc<[u8]>>,
    after: Option<Arc<[u8]>>,
}

impl Addition {
    /// The answer of `add_before_body`'s location, once (None after).
    pub async fn before(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>) -> Vec<u8> {
        match self.before.take() {
            Some(u) => fetch(w, ctx, &u).await,
            None => Vec::new(),
        }
    }

    /// The answer of `add_after_body`'s location, once.
    pub async fn after(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>) -> Vec<u8> {
        match self.after.take() {
            Some(u) => fetch(w, ctx, &u).await,
            None => Vec::new(),
        }
    }
}

/// A subrequest's body (whatever its status, as nginx outputs it); a URI
/// nginx would refuse or an answer that failed adds nothing (logged).
async fn fetch(w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, uri: &[u8]) -> Vec<u8> {
    let Some((path, args)) = crate::http::handler::subrequest::parse_uri(uri) else {
        crate::log_req!(
            ctx,
            crate::log::error::Level::Error,
            "unsafe URI \"{}\" was detected",
            String::from_utf8_lossy(uri)
        );
        return Vec::new();
    };
    match crate::http::handler::subrequest::fetch(w, ctx, path, args, false, None).await {
        Ok(a) => a.body,
        Err(_) => Vec::new(),
    }
}

/// The header filter: a 200 of a listed type to a client's request (not a
/// subrequest) gets the additions; its length becomes unknown, ranges go
/// and the ETag is weakened (Last-Modified stays), as nginx's.
pub fn apply<'c>(ctx: &ReqCtx<'c, '_>, resp: &mut Response<'c>) {
    let conf = &ctx.conf.addition;
    if resp.status != 200 || ctx.subrequest || (conf.before.is_none() && conf.after.is_none()) {
        return;
    }
    match &resp.body {
        Body::Empty | Body::Static(_) | Body::Owned(_) | Body::Shared(_) | Body::File { .. } | Body::Upstream(_) => {}
        Body::Compressed(z) if z.coding.is_none() => {}
        _ => return,
    }
    let Some(ct) = resp.content_type.as_deref() else { return };
    if !crate::http::filter::type_listed(&conf.types, ct.split(';').next().unwrap_or("").trim()) {
        return;
    }
    let add = Box::new(Addition { before: conf.before.clone(), after: conf.after.clone() });
    match &mut resp.body {
        Body::Compressed(z) => z.add_addition(add),
        _ => {
            let body = std::mem::replace(&mut resp.body, Body::Empty);
            resp.body =
                Body::Compressed(Box::new(crate::http::filter::compress::stream::Compressed::addition(body, add)));
        }
    }
    resp.accept_ranges = false;
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("accept-ranges") && !n.eq_ignore_ascii_case("content-length"));
    crate::http::filter::compress::weaken_etag(resp);
}

/// Whether the module changes a response of this type here (so the
/// content handler answers without ranges).
pub fn applies(ctx: &ReqCtx<'_, '_>, content_type: Option<&str>) -> bool {
    let conf = &ctx.conf.addition;
    (conf.before.is_some() || conf.after.is_some())
        && !ctx.subrequest
        && content_type
            .is_some_and(|ct| crate::http::filter::type_listed(&conf.types, ct.split(';').next().unwrap_or("").trim()))
}
