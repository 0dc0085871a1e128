//! One HTTP/3 request stream: its head in the HTTP/1 form every handler
//! reads (`h2::request`, the same pseudo-header form), the pipeline, the
//! body for an origin read whole first (as HTTP/2 does, within
//! `client_max_body_size` and `client_body_timeout`), the response as
//! HEADERS and DATA frames within `send_timeout` per write, and the
//! access log line.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::error::Code;

use super::Shared;
use crate::config::model::LocConf;
use crate::http::connection::h2::request as h2req;
use crate::http::connection::h2::response::{self as h2resp, Seg};
use crate::http::handler::ctx::{ConnInfo, ReqCtx};
use crate::http::limit::rate::Pacer;
use crate::http::request::{Method, Request, Version};
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::worker::WorkerCtx;
use crate::{log_req, log_to};

type Resolver = h3::server::RequestResolver<super::quic::Conn, Bytes>;
type Stream = h3::server::RequestStream<super::quic::Bidi, Bytes>;

/// H3_NO_ERROR (RFC 9114 8.1): STOP_SENDING for a body no one reads.
const H3_NO_ERROR: u32 = 0x100;

/// Largest piece of a body read and written at a time.
const MAX_PIECE: usize = 64 * 1024;

/// A stream under a panic guard (`worker::unwind`): a panic is logged at
/// `alert` and the stream reset; the connection's other streams go on.
pub async fn guarded(
    w: Rc<WorkerCtx>,
    group: usize,
    info: ConnInfo,
    resolver: Resolver,
    shared: Rc<Shared>,
    conn: quinn::Connection,
    side: Rc<super::quic::Side>,
) {
    let (id, peer) = (info.id, info.peer);
    let run = request(w.clone(), group, info, resolver, conn, side);
    if let Err(p) = crate::worker::unwind::Guarded::new(run).await {
        let g = &w.cfg.http.listens[group];
        log_to!(
            g.default_server.conf.error_log,
            Level::Alert,
            "*{} request processing panicked: {}, client: {}, server: {}",
            id,
            p,
            peer.ip(),
            g.default_server.name
        );
        crate::http::proxy::settle_orphans(&w);
    }
    shared.finish();
}

/// RFC 8470 5.2: a request that came in 0-RTT (possibly a replay) with a
/// method that is not safe is answered 425 Too Early rather than handled;
/// the client sends it again once the handshake completed. nginx leaves
/// this to configuration (`if ($ssl_early_data) { return 425; }`); sluice
/// does it itself for anything but GET, HEAD and OPTIONS.
fn too_early(info: &ConnInfo, method: Method) -> bool {
    info.early_data && !matches!(method, Method::Get | Method::Head | Method::Options)
}

/// The paths most requests do not take (proxying, a suspended handler,
/// compression, the cache's refresh, post_action) are boxed futures: kept
/// inline, their state would make every request's future about 9 KB to
/// allocate and copy.
async fn request(
    w: Rc<WorkerCtx>,
    group: usize,
    mut info: ConnInfo,
    resolver: Resolver,
    conn: quinn::Connection,
    side: Rc<super::quic::Side>,
) {
    let g = &w.cfg.http.listens[group];
    let dconf = &g.default_server.conf;
    // The header section has client_header_timeout, waits for QPACK
    // inserts included; at the deadline the stream is reset, as nginx
    // resets it.
    let deadline = Instant::now() + dconf.client_header_timeout;
    let (mut req, mut tx) = match resolver.resolve_request_until(tokio::time::sleep(dconf.client_header_timeout)).await
    {
        Ok(r) => r,
        Err(_) if Instant::now() >= deadline => {
            log_to!(
                dconf.error_log,
                Level::Info,
                "*{} client timed out (110: Connection timed out) while reading client request headers, client: {}",
                info.id,
                info.peer.ip()
            );
            return;
        }
        Err(e) => {
            log_to!(
                dconf.error_log,
                Level::Info,
                "*{} client sent invalid request ({}) while reading client request headers, client: {}",
                info.id,
                e,
                info.peer.ip()
            );
            return;
        }
    };
    // Values with control characters ride beside the HeaderMap, as over
    // HTTP/2, to reach `$http_NAME` and the origin as nginx passes them.
    if let Some(raw) = req.extensions_mut().remove::<h3::server::RawFields>() {
        req.extensions_mut().insert(h2req::RawFields(raw.0));
    }
    let watch = side.take(tx.id());
    info.early_data = watch.as_ref().is_some_and(|w| w.early());
    let started = Instant::now();
    let stats = w.stats.clone();
    let _counted = stats.request();
    // Whether a body follows: known at once when the stream ended after
    // its HEADERS; otherwise taken to follow. As nginx, any frame after
    // HEADERS makes a body, an empty DATA frame too (sent on to an origin
    // with `Content-Length: 0`).
    let mut first = None;
    let has_body = match std::future::poll_fn(|cx| std::task::Poll::Ready(tx.poll_recv_data(cx))).await {
        std::task::Poll::Ready(Ok(None)) => watch.as_ref().is_some_and(|w| w.frames() > 1),
        std::task::Poll::Ready(Ok(Some(mut b))) => {
            first = Some(b.copy_to_bytes(b.remaining()));
            true
        }
        // A stream the client reset while its header section waited for
        // inserts comes as the malformed placeholder: answered 400, as
        // nginx answers it; any other reset ends the request.
        std::task::Poll::Ready(Err(_)) if req.extensions().get::<h3::server::MalformedRequest>().is_some() => false,
        std::task::Poll::Ready(Err(_)) => return,
        std::task::Poll::Pending => true,
    };
    let plain_connect = req.method() == http::Method::CONNECT;
    // A malformed header section comes as a placeholder `GET /` (the
    // vendored h3's patch): answered 400 through `error_page`, as nginx,
    // and as the HTTP/2 path answers the same request.
    let malformed = req.extensions().get::<h3::server::MalformedRequest>().map(|m| m.0.clone());
    let limits = crate::http::connection::h1::conn::limits(g);
    let (buf, head) = match h2req::synthesize_version(&req, has_body, false, &limits, Version::Http3) {
        Ok(x) => x,
        Err(bad) => {
            let why = match bad {
                h2req::Bad::TooManyHeaders => "client sent too many header fields",
                h2req::Bad::InvalidPath => "client sent invalid :path header",
            };
            log_to!(
                dconf.error_log,
                Level::Info,
                "*{} {} while reading client request headers, client: {}",
                info.id,
                why,
                info.peer.ip()
            );
            let _ = send_block(&mut tx, &Response::new(400), false).await;
            let _ = tx.finish().await;
            return;
        }
    };
    let target = &buf[head.target.clone()];
    let (raw_path, raw_args) = crate::http::uri::split_target(target);
    // An invalid :authority or Host is answered through the default
    // server's error_page, as nginx finalizes the request with 400.
    let mut bad_host = false;
    let host = match head.host.clone().map(|r| crate::http::routing::server::validate_host(&buf[r])) {
        Some(Some(h)) => h,
        Some(None) => {
            log_to!(
                dconf.error_log,
                Level::Info,
                "*{} client sent invalid host header, client: {}",
                info.id,
                info.peer.ip()
            );
            bad_host = true;
            std::borrow::Cow::Borrowed(&b""[..])
        }
        // No :authority: the server the TLS handshake chose by SNI.
        None => std::borrow::Cow::Owned(
            info.tls.as_ref().and_then(|t| t.server_name.as_deref()).unwrap_or("").as_bytes().to_vec(),
        ),
    };
    let server = crate::http::routing::server::select(g, &host);
    let path = match crate::http::uri::normalize_path_with(raw_path, dconf.core.merge_slashes) {
        Ok(p) => p,
        Err(_) => {
            log_to!(
                server.conf.error_log,
                Level::Info,
                "*{} client sent invalid request, client: {}",
                info.id,
                info.peer.ip()
            );
            let _ = send_block(&mut tx, &Response::new(400), false).await;
            let _ = tx.finish().await;
            return;
        }
    };
    let req = Request {
        buf: &buf,
        head: &head,
        method: head.method,
        path,
        args: raw_args.map(std::borrow::Cow::Borrowed),
        host,
    };
    let mut ctx = ReqCtx::new(g, server, req, &info);
    crate::req_debug!(ctx, "http3 request line: \"{}\"", String::from_utf8_lossy(ctx.req.request_line()));
    crate::req_debug!(ctx, "http uri: \"{}\"", String::from_utf8_lossy(&ctx.req.path));
    let mut resp = match crate::http::handler::client_cert_status(&ctx) {
        _ if bad_host => crate::http::handler::finish_error(&mut ctx, 400),
        _ if malformed.is_some() => {
            log_req!(
                ctx,
                Level::Info,
                "client sent invalid request headers ({})",
                malformed.as_deref().unwrap_or_default()
            );
            crate::http::handler::finish_error(&mut ctx, 400)
        }
        Some(code) => crate::http::handler::finish_error(&mut ctx, code),
        None if too_early(&info, head.method) => {
            crate::req_debug!(ctx, "unsafe method in early data: 425");
            crate::http::handler::finish_error(&mut ctx, 425)
        }
        None if plain_connect => crate::http::connection::h2::connect::refuse(&mut ctx),
        None => crate::http::handler::handle(&mut ctx),
    };
    if crate::http::handler::suspended(&ctx) {
        resp = Box::pin(crate::http::handler::complete(&w, &mut ctx, resp)).await;
    }
    // A proxied request's mirrors wait for its body, as over HTTP/1 and
    // HTTP/2: they start below, once the proxy has read it.
    let proxied = matches!(resp.body, Body::Proxy);
    crate::http::handler::mirror::start(&w, &mut ctx, false, proxied);
    let mut unread = false;
    if matches!(resp.body, Body::Proxy) {
        let conf = ctx.conf;
        // Named for `$request_body_file` and `client_body_in_file_only`.
        let mut spool = crate::http::connection::spool::Spool::named(
            conf.client_body_buffer_size,
            &conf.client_body_temp_path,
            crate::http::connection::spool::proxied_naming(conf),
        );
        let declared = match head.body {
            crate::http::request::BodyKind::Length(n) => Some(n),
            _ => None,
        };
        let read = if has_body {
            let limits = (conf.client_max_body_size, conf.client_body_timeout);
            Box::pin(read_body(&mut tx, watch.as_deref(), first.take(), limits, declared, Some(&mut spool))).await
        } else {
            // The stream ended with its HEADERS: a content-length above 0
            // was not kept.
            match declared {
                Some(n) if n > 0 => Read::BadLength(short(0, n)),
                _ => Read::Done,
            }
        };
        resp = match read {
            Read::Done => {
                let data = spool.finish();
                ctx.body_read = data.len();
                let mut client = crate::http::proxy::request_body::Client::h3(conn.clone(), data);
                Box::pin(crate::http::proxy::respond(&w, &mut ctx, &mut client)).await
            }
            Read::TooLarge(n) => {
                log_req!(ctx, Level::Error, "client intended to send too large body: {} bytes", n);
                crate::http::handler::finish_error(&mut ctx, 413)
            }
            Read::BadLength(why) => {
                // nginx answers 400; an error_page naming a proxied
                // location sends what was read there, as nginx's internal
                // redirect finds the body already read.
                log_req!(ctx, Level::Info, "{}", why);
                let r = crate::http::handler::finish_error(&mut ctx, 400);
                if matches!(r.body, Body::Proxy) {
                    let data = spool.finish();
                    ctx.body_read = data.len();
                    let mut client = crate::http::proxy::request_body::Client::h3(conn.clone(), data);
                    Box::pin(crate::http::proxy::respond(&w, &mut ctx, &mut client)).await
                } else {
                    r
                }
            }
            Read::Spool(why) => {
                log_req!(ctx, Level::Crit, "{} while reading client request body", why);
                crate::http::handler::finish_error(&mut ctx, 500)
            }
            Read::TimedOut => {
                log_req!(
                    ctx,
                    Level::Info,
                    "client timed out (110: Connection timed out) while reading client request body"
                );
                let r = crate::http::handler::error(&ctx, 408);
                tx.stop_stream(Code::H3_REQUEST_CANCELLED);
                tx.qpack_cancel();
                log(&w, &ctx, &r, 0, started, false);
                return;
            }
            Read::Failed => {
                // The client reset the stream (or closed the connection)
                // before its body ended: logged 499, and the stream's
                // QPACK state cancelled (RFC 9204 4.4.2), as nginx does.
                tx.qpack_cancel();
                log(&w, &ctx, &Response::new(499), 0, started, false);
                return;
            }
        };
    } else if has_body && resp.status != 413 {
        unread = true;
    }
    // Mirrors that waited for the request body (read by now, if it was).
    crate::http::handler::mirror::start(&w, &mut ctx, true, true);
    if resp.status == 444 {
        tx.stop_stream(Code::H3_REQUEST_REJECTED);
        log(&w, &ctx, &resp, 0, started, false);
        return;
    }
    let conf = ctx.conf;
    let head_only = head.method == Method::Head || !crate::http::connection::h1::writer::has_body(resp.status);
    let pace = crate::http::limit::rate::pacer(&ctx, started);
    let sent = match send_head(&mut tx, &resp, conf).await {
        Err(()) => Err(()),
        Ok(()) if head_only => Ok(0),
        Ok(()) => match &mut resp.body {
            Body::Upstream(up) => Box::pin(send_upstream(&w, &mut tx, up, &ctx, pace)).await,
            Body::Compressed(z) => Box::pin(send_compressed(&w, &mut tx, z, &ctx, pace)).await,
            body => send_body(&mut tx, h2resp::segments(body), conf, info.id, pace).await,
        },
    };
    // The origin's trailers (gRPC's status) and add_trailer's: a HEADERS
    // frame after the body, before the stream ends.
    let origin_trailers = matches!(&resp.body, Body::Upstream(up) if up.trailers.is_some());
    let sent = match sent {
        Ok(n)
            if !head_only && (origin_trailers || crate::http::filter::headers::expects_trailers(&ctx, resp.status)) =>
        {
            // The origin's own (a gRPC status), then add_trailer's, as over
            // HTTP/2.
            crate::http::filter::headers::origin_trailers(&mut ctx, &mut resp.body);
            crate::http::filter::headers::trailers(&mut ctx, &resp);
            match timed(conf, tx.send_trailers(h2resp::trailers(&ctx.trailers))).await {
                Ok(()) => Ok(n),
                Err(()) => Err(n),
            }
        }
        other => other.map_err(|()| 0),
    };
    let sent = match sent {
        Ok(n) => match timed(conf, tx.finish()).await {
            Ok(()) => Ok(n),
            Err(()) => Err(n),
        },
        Err(n) => Err(n),
    };
    if let Body::Upstream(up) = &mut resp.body {
        Box::pin(crate::http::proxy::fill_rest(&w, up, head_only)).await;
        crate::http::proxy::finish_body(&w, &mut ctx, up);
    }
    if let Body::Compressed(z) = &mut resp.body
        && let Some(up) = z.upstream_mut()
    {
        Box::pin(crate::http::proxy::fill_rest(&w, up, head_only)).await;
        crate::http::proxy::finish_body(&w, &mut ctx, up);
    }
    let ok = sent.is_ok();
    let body_bytes = sent.unwrap_or_else(|n| n);
    crate::worker::unwind::test_hook(&ctx.req, crate::worker::unwind::Stage::After);
    log(&w, &ctx, &resp, body_bytes, started, ok);
    if !matches!(ctx.conf.post_action, crate::http::handler::post_action::PostAction::Off) {
        Box::pin(crate::http::handler::post_action::run(&w, &ctx)).await;
    }
    if ctx.cache.is_some() {
        drop(resp);
        Box::pin(crate::http::cache::serve::refresh_after(&w, &mut ctx)).await;
    }
    if unread && ok && !(ended(&mut tx) && watch.as_ref().is_none_or(|wt| wt.finished())) {
        // The rest of a body no handler read: refused with STOP_SENDING
        // H3_NO_ERROR (RFC 9114 4.1: the answer is complete) and a QPACK
        // Stream Cancellation, as nginx does when it discards a body.
        if let Some(wt) = &watch {
            wt.stop(H3_NO_ERROR);
        }
        tx.qpack_cancel();
    }
}

/// Reads what already arrived of a body no one wants, without waiting:
/// whether the client's side has ended.
fn ended(tx: &mut Stream) -> bool {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    loop {
        match tx.poll_recv_data(&mut cx) {
            std::task::Poll::Ready(Ok(Some(_))) => continue,
            std::task::Poll::Ready(Ok(None)) => return true,
            std::task::Poll::Ready(Err(_)) => return true,
            std::task::Poll::Pending => return false,
        }
    }
}

enum Read {
    Done,
    TooLarge(u64),
    /// DATA that broke the declared content-length: nginx's words.
    BadLength(String),
    TimedOut,
    Failed,
    Spool(String),
}

/// Reads a request body to its end (into `keep` if given), stopping past
/// `client_max_body_size` (`limits.0`) or after `client_body_timeout`
/// (`limits.1`) of silence, or at DATA that breaks the `declared`
/// content-length.
async fn read_body(
    tx: &mut Stream,
    watch: Option<&super::quic::Watch>,
    first: Option<Bytes>,
    limits: (u64, Duration),
    declared: Option<u64>,
    mut keep: Option<&mut crate::http::connection::spool::Spool<'_>>,
) -> Read {
    let (max, timeout) = limits;
    let mut total = 0u64;
    let mut next = first;
    loop {
        let chunk = match next.take() {
            Some(c) => c,
            None => match tokio::time::timeout(timeout, tx.recv_data()).await {
                Ok(Ok(Some(mut b))) => b.copy_to_bytes(b.remaining()),
                // An empty DATA frame, which the h3 crate reports as the
                // end, with more of the stream to come.
                Ok(Ok(None)) if watch.is_some_and(|wt| !wt.finished() || total < wt.data_bytes()) => continue,
                Ok(Ok(None)) => {
                    return match declared {
                        Some(n) if total < n => Read::BadLength(short(total, n)),
                        _ => Read::Done,
                    };
                }
                Ok(Err(_)) => return Read::Failed,
                Err(_) => return Read::TimedOut,
            },
        };
        total += chunk.len() as u64;
        if declared.is_some_and(|n| total > n) {
            return Read::BadLength("client intended to send body data larger than declared".into());
        }
        if max > 0 && total > max {
            // The request's stream, dropped at its end, stops the client's
            // sending (quinn's STOP_SENDING on drop).
            return Read::TooLarge(total);
        }
        if let Some(k) = keep.as_deref_mut()
            && let Err(why) = k.push(&chunk)
        {
            return Read::Spool(why);
        }
    }
}

/// nginx's words for a body that ended before its content-length.
fn short(got: u64, declared: u64) -> String {
    format!("client prematurely closed stream: only {got} out of {declared} bytes of request body received")
}

/// A write bounded by `send_timeout`, nginx's line when it passes.
async fn timed<F: std::future::Future<Output = Result<(), h3::error::StreamError>>>(
    conf: &LocConf,
    f: F,
) -> Result<(), ()> {
    match tokio::time::timeout(conf.send_timeout, f).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(()),
        Err(_) => {
            log_to!(
                conf.error_log,
                Level::Info,
                "client timed out (110: Connection timed out) while sending response to client"
            );
            Err(())
        }
    }
}

async fn send_head(tx: &mut Stream, resp: &Response<'_>, conf: &LocConf) -> Result<(), ()> {
    timed(conf, send_block(tx, resp, conf.server_tokens)).await
}

/// The response head, encoded by `head` (not the `h3` crate's encoder).
async fn send_block(tx: &mut Stream, resp: &Response<'_>, tokens: bool) -> Result<(), h3::error::StreamError> {
    let (block, size) = super::head::encode(resp, tokens);
    tx.send_response_block(block, size).await
}

/// Sends `b` as DATA, paced by `limit_rate` when set.
async fn send(tx: &mut Stream, mut b: Bytes, conf: &LocConf, pace: &mut Option<Pacer>) -> Result<(), ()> {
    while !b.is_empty() {
        let n = match pace.as_mut() {
            Some(p) => p.grant(b.len()).await.min(b.len()).max(1),
            None => b.len(),
        };
        let piece = b.split_to(n);
        timed(conf, tx.send_data(piece)).await?;
        if let Some(p) = pace.as_mut() {
            p.wrote(n);
        }
    }
    Ok(())
}

async fn send_body(
    tx: &mut Stream,
    segs: Vec<Seg>,
    conf: &LocConf,
    id: u64,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut sent = 0u64;
    for seg in segs {
        match seg {
            Seg::Bytes(b) => {
                let n = b.len() as u64;
                send(tx, b, conf, &mut pace).await?;
                sent += n;
            }
            Seg::File(file, mut off, mut len) => {
                let Some(f) = file.file.as_ref() else { return Err(()) };
                while len > 0 {
                    let n = len.min(MAX_PIECE as u64);
                    let mut v = Vec::with_capacity(n as usize);
                    if let Err(e) = crate::http::connection::io::pread_into(f, off, n, &mut v) {
                        log_to!(conf.error_log, Level::Crit, "*{} pread() failed ({})", id, e);
                        tx.stop_stream(Code::H3_INTERNAL_ERROR);
                        return Err(());
                    }
                    if v.is_empty() {
                        // The file shrank under us: the response cannot
                        // be completed as announced.
                        tx.stop_stream(Code::H3_INTERNAL_ERROR);
                        return Err(());
                    }
                    let got = v.len() as u64;
                    send(tx, Bytes::from(v), conf, &mut pace).await?;
                    off += got;
                    len -= got;
                    sent += got;
                }
            }
        }
    }
    Ok(sent)
}

/// Streams an origin's body as it arrives, reading ahead while a write
/// waits; an origin failing mid-body resets the stream, so the client
/// never takes a truncated body for a complete one.
async fn send_upstream(
    w: &WorkerCtx,
    tx: &mut Stream,
    up: &mut crate::http::proxy::body::UpstreamBody,
    ctx: &ReqCtx<'_, '_>,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut sent = 0u64;
    loop {
        let mut piece = Vec::new();
        let more = match up.next(w, &mut piece, MAX_PIECE).await {
            Ok(m) => m,
            Err(e) => {
                crate::http::proxy::log_body_error(ctx, &e);
                tx.stop_stream(Code::H3_INTERNAL_ERROR);
                return Err(());
            }
        };
        if !piece.is_empty() {
            let n = piece.len() as u64;
            let write = send(tx, Bytes::from(piece), ctx.conf, &mut pace);
            crate::http::proxy::ahead::while_writing(w, ctx, up, write).await?;
            sent += n;
        }
        if !more {
            return Ok(sent);
        }
    }
}

async fn send_compressed(
    w: &WorkerCtx,
    tx: &mut Stream,
    z: &mut crate::http::filter::compress::stream::Compressed,
    ctx: &ReqCtx<'_, '_>,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut sent = 0u64;
    loop {
        let mut piece = Vec::new();
        let more = match z.next(w, ctx, &mut piece, MAX_PIECE).await {
            Ok(m) => m,
            Err(e) => {
                crate::http::filter::compress::stream::log_error(ctx, &e);
                tx.stop_stream(Code::H3_INTERNAL_ERROR);
                return Err(());
            }
        };
        if !piece.is_empty() {
            let n = piece.len() as u64;
            let write = send(tx, Bytes::from(piece), ctx.conf, &mut pace);
            z.while_writing(w, ctx, write).await?;
            sent += n;
        }
        if !more {
            return Ok(sent);
        }
    }
}

/// The access log line: the same as HTTP/1's and HTTP/2's.
fn log(w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, resp: &Response<'_>, body_bytes: u64, started: Instant, complete: bool) {
    crate::http::connection::h1::conn::log_request(w, ctx, resp, body_bytes, body_bytes, started, complete);
}
