//! nginx's `mirror` module: a copy of each request goes, in the
//! background, to other locations (usually proxying to a test or
//! analytics backend); their answers are dropped and the request goes on
//! unaffected. It runs once per request, before `try_files` and content
//! (nginx's precontent phase).
//!
//! A mirror is a task of its own: it owns a copy of the request head and
//! the connection's facts, so the client's request neither waits for it
//! nor keeps it alive. The copy keeps the method and the client's headers,
//! takes the mirror's URI (the request's arguments kept, as nginx does),
//! and skips the limit and access phases like any subrequest.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use super::ctx::{ConnInfo, ReqCtx};
use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd, list};
use crate::http::request::{Head, Request};
use crate::http::response::Body;
use crate::worker::WorkerCtx;

pub static DIRECTIVES: &[Cmd] = &[
    list(cmd("mirror", HSL, 1, 1, Set::Loc(mirror)), reset),
    cmd("mirror_request_body", HSL, 1, 1, Set::Loc(mirror_request_body)),
];

#[derive(Clone, Debug)]
pub struct MirrorConf {
    /// Normalized URIs to copy requests to.
    pub uris: Arc<Vec<Vec<u8>>>,
    pub request_body: bool,
    /// `mirror off` was written at this level (nothing else may be).
    off_here: bool,
}

impl Default for MirrorConf {
    fn default() -> Self {
        MirrorConf { uris: Arc::default(), request_body: true, off_here: false }
    }
}

fn reset(c: &mut LocConf) {
    c.mirror.uris = Arc::default();
    c.mirror.off_here = false;
}

fn mirror(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    // nginx: `off` alone at a level, or not at all.
    if c.mirror.off_here || v == "off" && !c.mirror.uris.is_empty() {
        return Err(ConfError::at("\"mirror\" directive is duplicate", &d.span));
    }
    if v == "off" {
        c.mirror.off_here = true;
        return Ok(());
    }
    let uri = crate::http::uri::normalize_path(v.as_bytes())
        .map_err(|_| ConfError::at(format!("invalid URI \"{v}\""), &d.span))?
        .into_owned();
    let mut uris = (*c.mirror.uris).clone();
    uris.push(uri);
    c.mirror.uris = Arc::new(uris);
    Ok(())
}

fn mirror_request_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.mirror.request_body = crate::config::set_main::flag(d)?;
    Ok(())
}

/// What a mirror task owns of the request.
struct Copy {
    buf: Vec<u8>,
    head: Head,
    method: crate::http::request::Method,
    args: Option<Vec<u8>>,
    host: Vec<u8>,
    conn: ConnInfo,
    realip: Option<std::net::SocketAddr>,
    group: usize,
    server: usize,
    /// The request body (`mirror_request_body on`, a body read whole into
    /// memory for the proxy).
    body: Option<Vec<u8>>,
}

/// Starts the mirrors of the locations this request reached (once per
/// request). `body_read`: false before the request body was read; a
/// proxied request with a body and `mirror_request_body on` then waits,
/// and the caller starts its mirrors again once the proxy read the body
/// (nginx reads the body before mirroring it).
pub fn start(w: &Rc<WorkerCtx>, ctx: &mut ReqCtx<'_, '_>, body_read: bool, proxied: bool) {
    if ctx.mirror_due.is_empty() || ctx.mirrored {
        return;
    }
    if !body_read
        && proxied
        && ctx.conf.mirror.request_body
        && ctx.req.head.body != crate::http::request::BodyKind::None
    {
        return;
    }
    ctx.mirrored = true;
    let body = ctx.mirror_body.take();
    let cfg = &w.cfg.http;
    let Some(group) = cfg.listens.iter().position(|g| std::ptr::eq(g, ctx.group)) else { return };
    let Some(server) = cfg.servers.iter().position(|s| std::ptr::eq(&**s, ctx.server)) else { return };
    let c = ctx.conn;
    let due = std::mem::take(&mut ctx.mirror_due);
    for uri in due.iter().flat_map(|(_, uris)| uris.iter()) {
        let copy = Copy {
            buf: ctx.req.buf[..ctx.req.head.head_len.min(ctx.req.buf.len())].to_vec(),
            head: ctx.req.head.clone(),
            method: ctx.req.method,
            args: ctx.req.args.as_deref().map(<[u8]>::to_vec),
            host: ctx.req.host.to_vec(),
            conn: ConnInfo {
                tls: c.tls.clone(),
                http2: c.http2,
                proxy_protocol: c.proxy_protocol.clone(),
                requests: c.requests,
                started: c.started,
                fd: c.fd,
                unix: c.unix.clone(),
                debug: c.debug,
                early_data: c.early_data,
                ..ConnInfo::new(c.peer, c.local, c.id)
            },
            realip: ctx.realip,
            group,
            server,
            body: body.clone(),
        };
        let task = Box::pin(run(w.clone(), copy, uri.clone()));
        tokio::task::spawn_local(crate::clock::per_poll(task));
    }
}

/// One mirror: the request again, at `uri`, its answer read and dropped.
async fn run(w: Rc<WorkerCtx>, copy: Copy, uri: Vec<u8>) {
    let cfg = w.cfg.clone();
    let (Some(g), Some(server)) = (cfg.http.listens.get(copy.group), cfg.http.servers.get(copy.server)) else {
        return;
    };
    let req = Request {
        buf: &copy.buf,
        method: copy.method,
        head: &copy.head,
        path: Cow::Owned(uri),
        args: copy.args.clone().map(Cow::Owned),
        host: Cow::Borrowed(&copy.host),
    };
    let started = crate::clock::mono();
    let mut sub = ReqCtx::new(g, server, req, &copy.conn);
    sub.subrequest = true;
    sub.mirrored = true;
    sub.realip = copy.realip;
    sub.redirects = 1;
    let mut resp = super::route(&mut sub, None);
    if matches!(resp.body, Body::Proxy) {
        // The body read for the request, or none (then sent with
        // Content-Length: 0 when the method has a body).
        let mut client = crate::http::proxy::request_body::Client::detached();
        if let Some(b) = copy.body {
            sub.body_read = b.len() as u64;
            client.body =
                crate::http::proxy::request_body::ReqBody::Buffered(crate::http::connection::spool::Spooled::Memory(b));
            crate::http::proxy::request_body::keep_for_variable(&mut sub, &client.body);
        }
        resp = Box::pin(crate::http::proxy::respond(&w, &mut sub, &mut client)).await;
        let body = std::mem::replace(&mut resp.body, Body::Empty);
        crate::http::proxy::drain(&w, body).await;
    }
    // `log_subrequest on`: the mirror's own access log line.
    if sub.conf.log_subrequest {
        crate::http::connection::h1::conn::log_request(&w, &sub, &resp, 0, 0, started, true);
    }
}
