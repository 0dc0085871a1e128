//! nginx's error-log lines for upstream failures: the reason, then its
//! context (client, server, request, the upstream URL, host), worded and
//! ordered as nginx writes them so log tooling reads both alike; with the
//! two failures that log as they act (a peer counted failed, a client
//! that left: 499).

use super::body::BodyError;
use super::peers;
use super::request_body::ClientLeft;
use super::wire;
use crate::config::proxy::Protocol;
use crate::config::proxy::Upstream;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;

pub(super) fn os_error(e: &std::io::Error) -> String {
    crate::process::signal::os_error(e)
}

pub(super) fn log_upstream(ctx: &ReqCtx<'_, '_>, p: &crate::config::proxy::PeerConf, why: &str) {
    log_to!(ctx.conf.error_log, Level::Error, "*{} {}, {}", ctx.conn.id, why, upstream_suffix(ctx, &p.name));
}

/// A timeout's line: nginx logs it after letting the peer go, when a unix
/// socket's name no longer gets its `:` before the URI.
pub(super) fn log_timeout(ctx: &ReqCtx<'_, '_>, p: &crate::config::proxy::PeerConf, why: &str) {
    let suffix = suffix_with(ctx, &p.name, false);
    log_to!(ctx.conf.error_log, Level::Error, "*{} {}, {}", ctx.conn.id, why, suffix);
}

/// Between a detail line and the verdict in one error reason (a gRPC
/// origin's: `upstream sent invalid header: "N: V"`, then `upstream sent
/// invalid header`): each is logged as its own line, as nginx logs them.
/// A control character no real reason holds (FastCGI's stderr text, which
/// may hold newlines, stays one line).
pub const DETAIL_SEP: char = '\u{1e}';

/// A body failing on its way to the client (HTTP/1 and HTTP/2 alike):
/// nginx's "... while reading upstream" line.
pub fn log_body_error(ctx: &ReqCtx<'_, '_>, e: &BodyError) {
    // Logged already (FastCGI's stderr caught by fastcgi_catch_stderr).
    if matches!(e, BodyError::Protocol(why) if why.is_empty()) {
        return;
    }
    let io;
    let (level, why) = match e {
        BodyError::Timeout => (Level::Error, "upstream timed out (110: Connection timed out)"),
        BodyError::Truncated => (Level::Error, "upstream prematurely closed connection"),
        BodyError::Invalid => (Level::Error, "upstream sent invalid chunked response"),
        BodyError::Protocol(why) => (Level::Error, why.as_str()),
        BodyError::Io(e) => {
            io = format!("recv() failed ({})", os_error(e));
            (Level::Error, io.as_str())
        }
        BodyError::TempFile(why) => (Level::Crit, why.as_str()),
    };
    let peer = ctx.upstream.addr.last().map(|a| &**a).unwrap_or("");
    // A gRPC origin's break may come with nginx's detail line first
    // (`upstream sent too large http2 header`), logged on its own.
    let (detail, why) = why.rsplit_once(DETAIL_SEP).map_or((None, why), |(d, w)| (Some(d), w));
    for line in detail.into_iter().chain(std::iter::once(why)) {
        log_to!(
            ctx.conf.error_log,
            level,
            "*{} {} while reading upstream, {}",
            ctx.conn.id,
            line,
            upstream_suffix(ctx, peer)
        );
    }
}

/// nginx's context for upstream errors: client, server, request, then the
/// upstream URL, then host.
pub(super) fn upstream_suffix(ctx: &ReqCtx<'_, '_>, peer: &str) -> String {
    suffix_with(ctx, peer, true)
}

/// [`upstream_suffix`]; `unix_sep`: a unix socket's name is followed by
/// `:` (nginx, while it holds the peer).
fn suffix_with(ctx: &ReqCtx<'_, '_>, peer: &str, unix_sep: bool) -> String {
    // FastCGI has no URI to show (nginx logs `fastcgi://ADDRESS`).
    let mut uri = Vec::new();
    if let Some(pass) = ctx.proxy_pass.as_ref().filter(|p| p.protocol == Protocol::Http) {
        wire::target_for_log(ctx, pass, &mut uri);
    }
    let scheme = match &ctx.proxy_pass {
        Some(p) if p.protocol == Protocol::FastCgi => "fastcgi",
        Some(p) if p.protocol == Protocol::Uwsgi => "uwsgi",
        Some(p) if p.protocol == Protocol::Scgi => "scgi",
        Some(p) if p.protocol == Protocol::Memcached => "memcached",
        Some(p) if p.protocol == Protocol::Grpc && p.tls => "grpcs",
        Some(p) if p.protocol == Protocol::Grpc => "grpc",
        Some(p) if p.tls => "https",
        _ => "http",
    };
    // nginx separates a unix socket's path from the URI with a colon.
    let sep = if unix_sep && peer.starts_with("unix:") { ":" } else { "" };
    let mut s = format!(
        "client: {}, server: {}, request: \"{}\", upstream: \"{}://{}{}{}\"",
        ctx.client_text(),
        ctx.server.name,
        String::from_utf8_lossy(ctx.req.request_line()),
        scheme,
        peer,
        sep,
        String::from_utf8_lossy(&uri)
    );
    if let Some(h) = ctx.req.header("host") {
        s.push_str(&format!(", host: \"{}\"", String::from_utf8_lossy(h)));
    }
    s
}

/// nginx's 499: the client closed the connection (or reset its HTTP/2
/// stream) before the origin answered; the origin connection is closed too
/// (its request abandoned). The error-log line is nginx's for each way of
/// leaving; an HTTP/2 connection's end is logged by the connection.
pub(super) fn client_closed<'c>(
    ctx: &mut ReqCtx<'c, '_>,
    left: Option<ClientLeft>,
    when: &str,
    peer: Option<&str>,
) -> Response<'c> {
    let suffix = match peer {
        Some(p) => upstream_suffix(ctx, p),
        None => ctx.log_suffix(),
    };
    let how = match left {
        Some(ClientLeft::Ended) => None,
        Some(ClientLeft::Reset(h2::Reason::CANCEL, id)) => Some(format!("client canceled stream {id}")),
        Some(ClientLeft::Reset(h2::Reason::INTERNAL_ERROR, id)) => {
            Some(format!("client terminated stream {id} due to internal error"))
        }
        Some(ClientLeft::Reset(reason, id)) => {
            Some(format!("client terminated stream {id} with status {}", u32::from(reason)))
        }
        Some(ClientLeft::Closed) | None => Some(
            "epoll_wait() reported that client prematurely closed connection, so upstream connection is closed too"
                .to_string(),
        ),
    };
    if let Some(how) = how {
        log_to!(ctx.conf.error_log, Level::Info, "*{} {} {}, {}", ctx.conn.id, how, when, suffix);
    }
    let mut r = Response::new(499);
    r.close = true;
    r
}

/// Counts a failure against the peer, with nginx's warning when that takes
/// it out for fail_timeout.
pub(super) fn peer_failed(w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, u: &Upstream, peer: &peers::Picked) {
    if w.proxy.borrow_mut().get(u).done(peer, true) {
        let name = &*peer.conf(u).name;
        log_to!(
            ctx.conf.error_log,
            Level::Warn,
            "*{} upstream server temporarily disabled while connecting to upstream, {}",
            ctx.conn.id,
            upstream_suffix(ctx, name)
        );
    }
}
