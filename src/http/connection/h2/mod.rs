//! HTTP/2 connections, over TLS (ALPN "h2") or cleartext with prior
//! knowledge: the connection loop (`own`, on `frame` and `hpack`) and what
//! a stream does, written once against its handles (`handle`).
//!
//! Each stream runs the same handler pipeline as HTTP/1. A stream's work is
//! polled once inline as it is accepted: a small response whose body fits
//! the peer's window completes there, with no task spawned; only a body that
//! must wait for flow control or an origin continues as its own task.
//!
//! Abuse bounds (see `own` for the connection's): a connection whose
//! streams the peer keeps resetting is cut off (`RESET_FLOOR`), a peer that
//! opens no window for `send_timeout` loses the stream (RST_STREAM), and a
//! request body that stops arriving for `client_body_timeout` ends its
//! stream as 408.

pub mod connect;
pub mod frame;
pub mod handle;
pub mod hpack;
pub mod own;
pub mod request;
pub mod response;
mod send;

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use handle::{Respond, Rx};

use crate::http::handler::ctx::{ConnInfo, ReqCtx};
use crate::http::proxy::request_body::{ClientBody, ReqBody};
use crate::http::request::{Method, Request};
use crate::http::response::Response;
use crate::log::error::Level;
use crate::worker::WorkerCtx;
use crate::{log_req, log_to};
use own::headers::Incoming;
use send::{send_body, send_compressed, send_upstream};

/// Per-connection counters the streams report into.
#[derive(Default)]
pub(crate) struct Shared {
    active: Cell<usize>,
    /// Streams the peer reset before we could answer them.
    resets: Cell<u64>,
    completed: Cell<u64>,
    last_active: Cell<Option<Instant>>,
}

/// Resets tolerated before the ratio test applies, and the ratio: a peer
/// resetting more streams than it lets complete is cut off.
pub(crate) const RESET_FLOOR: u64 = 100;

/// How long an answered stream's unread body may pause before the stream
/// is reset (`drain_rest`): frames already on their way are still seen.
const DRAIN_PAUSE: Duration = Duration::from_millis(200);

/// Largest piece of a file read and queued per stream at a time.
const MAX_PIECE: usize = 64 * 1024;

/// Runs a stream's handler: polled once inline, where most responses
/// finish; the rest wait for window or an origin as tasks of their own.
pub(crate) fn start_stream(
    w: Rc<WorkerCtx>,
    group: usize,
    info: ConnInfo,
    inc: Incoming,
    body: Rx,
    respond: Respond,
    shared: Rc<Shared>,
) {
    let mut fut: Pin<Box<dyn Future<Output = ()>>> = Box::pin(guarded(w, group, info, inc, body, respond, shared));
    if fut.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending() {
        tokio::task::spawn_local(crate::clock::per_poll(fut));
    }
}

/// One stream under a panic guard (see `worker::unwind`): a panic in its
/// pipeline is logged at `alert` with the request named, and answers 500
/// if no head went out yet, else resets the stream; the connection and its
/// other streams go on.
#[allow(clippy::too_many_arguments)]
async fn guarded(
    w: Rc<WorkerCtx>,
    group: usize,
    info: ConnInfo,
    inc: Incoming,
    body: Rx,
    mut respond: Respond,
    shared: Rc<Shared>,
) {
    let (id, peer) = (info.id, info.peer);
    let started = Instant::now();
    let spare = info.clone();
    // Boxed: the guard then holds a pointer, not a second copy of the
    // stream's state, and the task moves a small future. The request
    // stays here, lent to the stream, for the log lines if it panics.
    let run = Box::pin(stream(w.clone(), group, info, &inc, body, &mut respond, shared.clone()));
    let Err(p) = crate::worker::unwind::Guarded::new(run).await else { return };
    let g = &w.cfg.http.listens[group];
    log_to!(
        g.default_server.conf.error_log,
        Level::Alert,
        "*{} request processing panicked: {}, client: {}, server: {}, request: \"{}\", host: \"{}\"",
        id,
        p,
        peer.ip(),
        g.default_server.name,
        String::from_utf8_lossy(&inc.buf[inc.head.line.clone()]),
        String::from_utf8_lossy(inc.host())
    );
    crate::http::proxy::settle_orphans(&w);
    let tokens = g.default_server.conf.server_tokens;
    let body = crate::http::error_html::error_body(500, tokens, crate::config::Config::version());
    let mut resp = Response::new(500);
    resp.content_type = Some("text/html".into());
    if let Some(b) = &body {
        resp.body = crate::http::response::Body::Owned(b.clone());
    }
    // h2 refuses a second HEADERS once a head went out. Then no explicit
    // reset: it would discard a complete response still queued; dropping
    // `respond` resets (CANCEL) a stream whose body was not finished.
    // Logged when this 500 is what the client got; a stream that panicked
    // after its head went out has no line, as on HTTP/1.
    let len = body.as_ref().map_or(0, |b| b.len() as u64);
    if let Ok(mut tx) = respond.send_response(&response::Head::new(&resp, tokens), body.is_none()) {
        let sent = body.is_none_or(|b| tx.send_data(Bytes::from(b), true).is_ok());
        log_panicked(&w, g, &spare, &inc, &resp, if sent { len } else { 0 }, started);
    }
    finish(&shared, true);
}

/// The access-log line of a stream whose handling panicked, as HTTP/1
/// writes one for its 500: the request line and fields as they came, the
/// path as sent (the request's context went down with the stream).
fn log_panicked(
    w: &WorkerCtx,
    g: &crate::config::model::ListenGroup,
    info: &ConnInfo,
    inc: &Incoming,
    resp: &Response<'_>,
    body_bytes: u64,
    started: Instant,
) {
    let (path, args) = crate::http::uri::split_target(inc.target());
    let req = Request {
        buf: &inc.buf,
        head: &inc.head,
        method: inc.head.method,
        path: std::borrow::Cow::Borrowed(path),
        args: args.map(std::borrow::Cow::Borrowed),
        host: std::borrow::Cow::Borrowed(b""),
    };
    let ctx = ReqCtx::new(g, &g.default_server, req, info);
    log(w, &ctx, resp, (body_bytes, body_bytes), started, true);
}

/// One stream: route the request, run the pipeline, send head and body,
/// write the access log line.
#[allow(clippy::too_many_arguments)]
async fn stream(
    w: Rc<WorkerCtx>,
    group: usize,
    info: ConnInfo,
    inc: &Incoming,
    body: Rx,
    respond: &mut Respond,
    shared: Rc<Shared>,
) {
    let started = Instant::now();
    let stats = w.stats.clone();
    let _counted = stats.request();
    let g = &w.cfg.http.listens[group];
    // RFC 8441 extended CONNECT: Some(true) for a WebSocket.
    let tunnel = inc.protocol.as_deref().map(connect::is_websocket);
    // A plain CONNECT is refused at once (nginx: 405), its stream unread.
    let plain_connect = tunnel.is_none() && inc.method() == b"CONNECT";
    let trace = inc.method() == b"TRACE";
    let malformed = inc.malformed;
    let has_body = !body.is_end_stream() && !plain_connect;
    let (buf, head) = (&inc.buf, &inc.head);
    if let Some(bad) = &inc.refused {
        let why = match bad {
            request::Bad::TooManyHeaders => "client sent too many header fields",
            request::Bad::InvalidPath => "client sent invalid :path header",
        };
        log_to!(
            g.default_server.conf.error_log,
            Level::Info,
            "*{} {} while reading client request headers, client: {}",
            info.id,
            why,
            info.peer.ip()
        );
        let _ = respond.send_response(&response::Head::new(&Response::new(400), false), true);
        finish(&shared, false);
        return;
    }
    let target = &buf[head.target.clone()];
    let (raw_path, raw_args) = crate::http::uri::split_target(target);
    let host = head.host.clone().map(|r| &buf[r]);
    // An invalid :authority or Host is answered through the default
    // server's error_page, as nginx finalizes the request with 400.
    let mut bad_host = false;
    let host = match host.map(crate::http::routing::server::validate_host) {
        Some(Some(h)) => h,
        Some(None) => {
            log_to!(
                g.default_server.conf.error_log,
                Level::Info,
                "*{} client sent invalid host header, client: {}",
                info.id,
                info.peer.ip()
            );
            bad_host = true;
            std::borrow::Cow::Borrowed(&b""[..])
        }
        None => std::borrow::Cow::Borrowed(&b""[..]),
    };
    let server = crate::http::routing::server::select(g, &host);
    let path = match crate::http::uri::normalize_path_with(raw_path, g.default_server.conf.core.merge_slashes) {
        Ok(p) => p,
        Err(_) => {
            log_to!(
                server.conf.error_log,
                Level::Info,
                "*{} client sent invalid request, client: {}",
                info.id,
                info.peer.ip()
            );
            let _ = respond.send_response(&response::Head::new(&Response::new(400), false), true);
            finish(&shared, false);
            return;
        }
    };
    let req = Request {
        buf,
        head,
        // An extended CONNECT is routed as the GET its HTTP/1.1 form is.
        method: if tunnel.is_some() { Method::Get } else { head.method },
        path,
        args: raw_args.map(std::borrow::Cow::Borrowed),
        host,
    };
    let misdirected = !g.http2_for(server);
    let mut ctx = ReqCtx::new(g, server, req, &info);
    ctx.wire_head_len = inc.block_len;
    crate::req_debug!(ctx, "http2 request line: \"{}\"", String::from_utf8_lossy(ctx.req.request_line()));
    crate::req_debug!(ctx, "http uri: \"{}\"", String::from_utf8_lossy(&ctx.req.path));
    let mut resp = match crate::http::handler::client_cert_status(&ctx) {
        _ if bad_host => crate::http::handler::finish_error(&mut ctx, 400),
        Some(code) => crate::http::handler::finish_error(&mut ctx, code),
        None if misdirected => {
            // Host names a server without HTTP/2 on this address: nginx's
            // 421.
            log_req!(ctx, Level::Info, "client attempted to request the server name without HTTP/2 enabled");
            crate::http::handler::finish_error(&mut ctx, 421)
        }
        None if malformed => {
            log_req!(ctx, Level::Info, "client sent invalid request headers");
            crate::http::handler::finish_error(&mut ctx, 400)
        }
        None if plain_connect => connect::refuse(&mut ctx),
        None if trace => {
            log_req!(ctx, Level::Info, "client sent TRACE method");
            crate::http::handler::finish_error(&mut ctx, 405)
        }
        None => crate::http::handler::handle(&mut ctx),
    };
    if crate::http::handler::suspended(&ctx) {
        resp = Box::pin(crate::http::handler::complete(&w, &mut ctx, resp)).await;
    }
    // A proxied request's mirrors wait for its body (`mirror_request_body`),
    // as over HTTP/1: they start below, once the proxy has read it.
    let proxied = matches!(resp.body, crate::http::response::Body::Proxy);
    crate::http::handler::mirror::start(&w, &mut ctx, false, proxied);
    // A body for an origin (proxy, FastCGI) is read whole first, within
    // `client_body_timeout` between DATA frames, as nginx buffers it. A
    // handler that does not read the body answers at once, as nginx's
    // HTTP/2 discard does, and the rest is read and dropped after the
    // answer (`drain_rest`), so a body that stalls never holds the answer.
    let mut unread = None;
    if let Some(websocket) = tunnel {
        match Box::pin(connect::run(&w, &mut ctx, resp, websocket, body, respond, started)).await {
            connect::Outcome::Done(ok) => {
                finish(&shared, ok);
                return;
            }
            connect::Outcome::Respond(r) => resp = r,
        }
    } else if matches!(resp.body, crate::http::response::Body::Proxy)
        && has_body
        && crate::http::proxy::protocol_of(ctx.conf) == crate::config::proxy::Protocol::Grpc
        && (ctx.conf.mirror.uris.is_empty() || !ctx.conf.mirror.request_body)
    {
        // gRPC: the body goes on to the origin as it arrives (streaming
        // calls need the origin's answers before the client's end);
        // with `mirror` (and `mirror_request_body on`) it is read whole
        // first, as nginx's mirror module reads it before the content
        // handler, and `$request_body` then has it.
        let mut client = crate::http::proxy::request_body::Client::h2(
            respond,
            ReqBody::Buffered(crate::http::connection::spool::Spooled::Memory(Vec::new())),
        );
        if !body.arrived() {
            // A client's DATA most often comes in the same read as its
            // HEADERS, parsed only after this stream's first poll: one
            // turn lets it arrive (before an origin connection is taken),
            // so that a unary call's body goes out with its HEADERS and
            // needs no pump task (`grpc::send_whole`).
            tokio::task::yield_now().await;
        }
        client.h2_body = Some(body);
        resp = Box::pin(crate::http::proxy::respond(&w, &mut ctx, &mut client)).await;
    } else if matches!(resp.body, crate::http::response::Body::Proxy)
        && has_body
        && let Some(length) = streams_body(&ctx, head)
    {
        // `proxy_request_buffering off`: the body goes on to the origin as
        // its DATA frames arrive, as nginx passes it.
        let conf = ctx.conf;
        if let Some(n) = length
            && conf.client_max_body_size > 0
            && n > conf.client_max_body_size
        {
            log_req!(ctx, Level::Error, "client intended to send too large body: {} bytes", n);
            resp = crate::http::handler::finish_error(&mut ctx, 413);
        } else {
            let mut c = ClientBody::h2(body, length, conf.client_max_body_size, conf.client_body_timeout);
            if crate::variables::request_body_used() {
                c.keep_copy(conf.client_body_buffer_size);
            }
            let mut client = crate::http::proxy::request_body::Client::h2(respond, ReqBody::Streamed(c));
            resp = Box::pin(crate::http::proxy::respond(&w, &mut ctx, &mut client)).await;
            if let ReqBody::Streamed(c) = &client.body
                && c.done
            {
                ctx.body_read = length.unwrap_or(0);
            }
        }
    } else if matches!(resp.body, crate::http::response::Body::Proxy) {
        let conf = ctx.conf;
        let mut spool = crate::http::connection::spool::Spool::named(
            conf.client_body_buffer_size,
            &conf.client_body_temp_path,
            crate::http::connection::spool::proxied_naming(conf),
        );
        let read = if has_body {
            discard(body, conf.client_max_body_size, conf.client_body_timeout, Some(&mut spool)).await
        } else {
            Discard::Done
        };
        resp = match read {
            Discard::Done => {
                let data = spool.finish();
                ctx.body_read = data.len();
                let mut client = crate::http::proxy::request_body::Client::h2(respond, ReqBody::Buffered(data));
                Box::pin(crate::http::proxy::respond(&w, &mut ctx, &mut client)).await
            }
            Discard::TooLarge(n) => {
                log_req!(ctx, Level::Error, "client intended to send too large body: {} bytes", n);
                crate::http::handler::finish_error(&mut ctx, 413)
            }
            Discard::BadLength(why) => {
                log_req!(ctx, Level::Info, "{}", why);
                crate::http::handler::finish_error(&mut ctx, 400)
            }
            Discard::Spool(why) => {
                log_req!(ctx, Level::Crit, "{} while reading client request body", why);
                crate::http::handler::finish_error(&mut ctx, 500)
            }
            Discard::TimedOut => {
                // nginx: "client timed out", the request terminated with
                // 408 (logged, never sent) and the stream reset with
                // PROTOCOL_ERROR, its code for a timed-out stream.
                log_req!(
                    ctx,
                    Level::Info,
                    "client timed out (110: Connection timed out) while reading client request body"
                );
                let r = crate::http::handler::error(&ctx, 408);
                respond.send_reset(h2::Reason::PROTOCOL_ERROR);
                log(&w, &ctx, &r, (0, 0), started, false);
                finish(&shared, false);
                return;
            }
            Discard::Failed => {
                finish(&shared, false);
                return;
            }
        };
    } else if has_body && resp.status != 413 {
        unread = Some(body);
    }
    // Mirrors that waited for the request body (read by now, if it was).
    crate::http::handler::mirror::start(&w, &mut ctx, true, true);
    if resp.status == 444 {
        respond.send_reset(h2::Reason::CANCEL);
        log(&w, &ctx, &resp, (0, 0), started, false);
        finish(&shared, true);
        return;
    }
    let conf = ctx.conf;
    let head_only = head.method == Method::Head || !crate::http::connection::h1::writer::has_body(resp.status);
    let segs = if head_only { Vec::new() } else { response::segments(&resp.body) };
    let total: u64 = if head_only { 0 } else { resp.body.len() };
    // add_trailer: the stream ends with a HEADERS frame after the body.
    let trailers = !head_only && crate::http::filter::headers::expects_trailers(&ctx, resp.status);
    let end = total == 0 && !trailers;
    let streamed = match &resp.body {
        crate::http::response::Body::Upstream(u) => !u.ends_with_head(),
        crate::http::response::Body::Compressed(_) => true,
        _ => false,
    };
    // A streamed body ends with its last DATA frame, not with the head.
    let end = end && (head_only || !streamed);
    let pace = crate::http::limit::rate::pacer(&ctx, started);
    let fin = !trailers;
    let mut open = None;
    let sent = match respond.send_response(&response::Head::new(&resp, conf.server_tokens), end).map(|mut tx| {
        tx.set_chunk(conf.http2.chunk_size);
        tx
    }) {
        Ok(mut tx) if streamed && !end => {
            let r = match &mut resp.body {
                crate::http::response::Body::Upstream(up) => {
                    Box::pin(send_upstream(&w, &mut tx, up, fin, &ctx, pace)).await
                }
                crate::http::response::Body::Compressed(z) => {
                    Box::pin(send_compressed(&w, &mut tx, z, fin, &ctx, pace)).await
                }
                _ => Err(()),
            };
            open = Some(tx);
            r
        }
        Ok(mut tx) if !end => {
            let r = send_body(&mut tx, segs, total, fin, conf, info.id, pace).await;
            open = Some(tx);
            r
        }
        Ok(_) => Ok(0),
        Err(_) => Err(()),
    };
    if let crate::http::response::Body::Upstream(up) = &mut resp.body {
        Box::pin(crate::http::proxy::fill_rest(&w, up, head_only)).await;
        crate::http::proxy::finish_body(&w, &mut ctx, up);
    }
    if let crate::http::response::Body::Compressed(z) = &mut resp.body
        && let Some(up) = z.upstream_mut()
    {
        Box::pin(crate::http::proxy::fill_rest(&w, up, head_only)).await;
        crate::http::proxy::finish_body(&w, &mut ctx, up);
    }
    let mut ok = sent.is_ok();
    if trailers
        && ok
        && let Some(mut tx) = open
    {
        crate::http::filter::headers::origin_trailers(&mut ctx, &mut resp.body);
        crate::http::filter::headers::trailers(&mut ctx, &resp);
        ok = tx.send_trailers(response::trailer_fields(&ctx.trailers)).is_ok();
    }
    let body_bytes = sent.unwrap_or(0);
    crate::worker::unwind::test_hook(&ctx.req, crate::worker::unwind::Stage::After);
    log(&w, &ctx, &resp, (body_bytes, body_bytes), started, ok);
    if !matches!(ctx.conf.post_action, crate::http::handler::post_action::PostAction::Off) {
        Box::pin(crate::http::handler::post_action::run(&w, &ctx)).await;
    }
    if ctx.cache.is_some() {
        drop(resp);
        Box::pin(crate::http::cache::serve::refresh_after(&w, &mut ctx)).await;
    }
    if let Some(rest) = unread
        && ok
    {
        drain_rest(rest, ctx.conf.client_max_body_size, ctx.conf.client_body_timeout).await;
    }
    finish(&shared, ok);
}

enum Discard {
    Done,
    TooLarge(u64),
    /// `client_body_timeout` passed without a DATA frame.
    TimedOut,
    /// The peer reset the stream or broke the connection.
    Failed,
    /// The body's temporary file failed.
    Spool(String),
    /// The DATA broke the declared content-length (the own loop reports
    /// it for this answer; the `h2` crate resets the stream instead).
    BadLength(String),
}

/// Whether a proxied HTTP/2 body goes on unbuffered (nginx's
/// `proxy_request_buffering off`), and its content-length. As for HTTP/1,
/// a body of unknown length needs an origin that can take it chunked
/// (HTTP/1.1, FastCGI); uwsgi and SCGI need the length.
fn streams_body(ctx: &ReqCtx<'_, '_>, head: &crate::http::request::Head) -> Option<Option<u64>> {
    use crate::config::proxy::Protocol;
    let conf = ctx.conf;
    let protocol = crate::http::proxy::protocol_of(conf);
    if ctx.dav_put
        || crate::http::proxy::up_conf(conf).request_buffering
        || !crate::http::proxy::passes_body_of(conf, protocol)
    {
        return None;
    }
    match head.body {
        crate::http::request::BodyKind::Length(n) => Some(Some(n)),
        crate::http::request::BodyKind::Chunked => {
            let sized = matches!(protocol, Protocol::Uwsgi | Protocol::Scgi);
            (!sized && (conf.proxy.http_version_11 || protocol == Protocol::FastCgi)).then_some(None)
        }
        crate::http::request::BodyKind::None => None,
    }
}

/// Reads a request body to its end (keeping it in `keep` if given),
/// returning window as it goes; stops past `client_max_body_size` or after
/// `client_body_timeout` of silence.
async fn discard(
    mut body: Rx,
    max: u64,
    timeout: Duration,
    mut keep: Option<&mut crate::http::connection::spool::Spool<'_>>,
) -> Discard {
    let mut total = 0u64;
    if keep.is_some() {
        body.open_window();
    }
    loop {
        match tokio::time::timeout(timeout, body.data()).await {
            Ok(None) => return Discard::Done,
            Ok(Some(Ok(chunk))) => {
                total += chunk.len() as u64;
                if let Some(k) = keep.as_deref_mut()
                    && (max == 0 || total <= max)
                    && let Err(why) = k.push(&chunk)
                {
                    return Discard::Spool(why);
                }
                if body.release_capacity(chunk.len()).is_err() {
                    return Discard::Failed;
                }
                if max > 0 && total > max {
                    return Discard::TooLarge(total);
                }
            }
            Ok(Some(Err(_))) => return body.bad_length_reason().map_or(Discard::Failed, Discard::BadLength),
            Err(_) => return Discard::TimedOut,
        }
    }
}

/// Reads and drops what is left of a body after the stream was answered,
/// returning its window, so the stream's end (and a peer's error in it,
/// such as a wrong content-length) is seen as the peer sends it. A pause
/// of `DRAIN_PAUSE` (or `client_body_timeout`, if shorter) or more than
/// `client_max_body_size` ends it: dropping the stream then resets it with
/// NO_ERROR (RFC 9113 8.1), as nginx does at once for a body it does not
/// read.
async fn drain_rest(mut body: Rx, max: u64, timeout: Duration) {
    let timeout = timeout.min(DRAIN_PAUSE);
    let mut total = 0u64;
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(timeout, body.data()).await {
        total += chunk.len() as u64;
        if body.release_capacity(chunk.len()).is_err() || (max > 0 && total > max) {
            return;
        }
    }
}

fn finish(shared: &Shared, ok: bool) {
    shared.active.set(shared.active.get().saturating_sub(1));
    shared.last_active.set(Some(Instant::now()));
    if ok {
        shared.completed.set(shared.completed.get() + 1);
    } else {
        shared.resets.set(shared.resets.get() + 1);
    }
}

/// The access log line of a stream: the same as HTTP/1's.
/// `complete`: the whole response went out (`$request_completion`).
fn log(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    resp: &Response<'_>,
    (bytes_sent, body_bytes): (u64, u64),
    started: Instant,
    complete: bool,
) {
    crate::http::connection::h1::conn::log_request(w, ctx, resp, bytes_sent, body_bytes, started, complete);
}
