//! `post_action URI | @name`: once the response is out, the request runs
//! again in the given location and that answer is dropped (nginx's core
//! `post_action`, used to report finished downloads to another service).
//!
//! As in nginx, the request keeps its method and headers, and the action
//! runs as an internal request (it may reach `internal` locations); it
//! runs after the client has the whole response, before the next request
//! of the connection is read, and only for main requests.

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::handler::subrequest;
use crate::http::response::Body;
use crate::worker::WorkerCtx;

pub static DIRECTIVES: &[Cmd] = &[cmd("post_action", HSL, 1, 1, Set::Loc(post_action))];

/// Where the action goes.
#[derive(Clone, Debug, Default)]
pub enum PostAction {
    #[default]
    Off,
    /// A URI (decoded path, arguments).
    Uri(Vec<u8>, Option<Vec<u8>>),
    /// A named location, without its `@`.
    Named(Box<str>),
}

fn post_action(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    c.post_action = if let Some(name) = v.strip_prefix('@') {
        PostAction::Named(name.into())
    } else {
        let (path, args) = subrequest::parse_uri(v.as_bytes())
            .ok_or_else(|| ConfError::at(format!("invalid URI \"{v}\" in \"post_action\""), &d.span))?;
        PostAction::Uri(path, args)
    };
    Ok(())
}

/// Runs the location's post action, if any, and drops its answer.
pub async fn run(w: &WorkerCtx, ctx: &ReqCtx<'_, '_>) {
    if ctx.subrequest {
        return;
    }
    let (path, args, named) = match &ctx.conf.post_action {
        PostAction::Off => return,
        PostAction::Uri(p, a) => (p.clone(), a.clone(), None),
        PostAction::Named(n) => (ctx.req.path.to_vec(), ctx.req.args.as_deref().map(<[u8]>::to_vec), Some(&**n)),
    };
    let mut sub = subrequest::child(ctx, ctx.req.method, path, args);
    sub.request_id.set(Some(ctx.request_id()));
    let resp = crate::http::handler::route(&mut sub, named);
    let resp = subrequest::settle(w, &mut sub, resp).await;
    // An origin's answer is read to its end (its connection goes back to
    // the pool); a file or a generated body is simply dropped.
    if matches!(resp.body, Body::Upstream(_) | Body::Compressed(_)) {
        let mut sink = Vec::new();
        let _ = subrequest::gather(w, &sub, resp.body, &mut sink, usize::MAX).await;
    }
}
