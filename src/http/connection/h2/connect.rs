//! WebSocket over HTTP/2 (RFC 8441 extended CONNECT) through the proxy, a
//! sluice extension: nginx does not implement it.
//!
//! The server advertises SETTINGS_ENABLE_CONNECT_PROTOCOL on every h2
//! connection. A `CONNECT` stream with `:protocol websocket` is routed like
//! the HTTP/1.1 `GET` Upgrade it stands for; in a `proxy_pass` location the
//! origin gets exactly that (`proxy::websocket` adds the fields), its 101
//! becomes `:status 200`, and the stream's DATA frames and the origin
//! connection's bytes are copied both ways: the client's END_STREAM is a
//! FIN towards the origin, the origin's EOF an END_STREAM, a reset on
//! either side ends both. Flow control is the backpressure: window is given
//! back to the client only once its bytes were written to the origin, and
//! the origin is read only as the client's window takes what was read.
//!
//! Elsewhere: a location that would answer 2xx itself (a file, `return
//! 200`) gets 501, as the tunnel it would signal does not exist; errors and
//! redirects (404, `return 403`) are sent as they are. An origin answering
//! with something other than 101 is passed on as an ordinary response,
//! except a 2xx, which becomes 502 for the same reason. A `:protocol` other
//! than `websocket` gets 501, and a plain CONNECT (no `:protocol`) 405,
//! as nginx answers it.

use std::cell::Cell;
use std::time::Instant;

use super::handle::{Respond, Rx, Tx};
use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::body::UpstreamBody;
use crate::http::proxy::websocket;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::worker::WorkerCtx;
use crate::{log_req, log_to};

pub enum Outcome<'c> {
    /// The stream was answered here (and tunnelled); whether it completed.
    Done(bool),
    /// An ordinary response, for the stream loop to send.
    Respond(Response<'c>),
}

/// Whether an extended CONNECT's `:protocol` is WebSocket (the upgrade
/// token is case-insensitive, RFC 9110 7.8).
pub fn is_websocket(p: &[u8]) -> bool {
    p.eq_ignore_ascii_case(b"websocket")
}

/// A plain CONNECT (no `:protocol`): 405, as nginx answers it.
pub fn refuse<'c>(ctx: &mut ReqCtx<'c, '_>) -> Response<'c> {
    log_req!(ctx, Level::Info, "client sent CONNECT method");
    crate::http::handler::finish_error(ctx, 405)
}

/// Runs an extended CONNECT stream; `resp` is what the handler pipeline
/// made of it (routed as a GET).
pub async fn run<'c>(
    w: &WorkerCtx,
    ctx: &mut ReqCtx<'c, '_>,
    resp: Response<'c>,
    websocket: bool,
    body: Rx,
    respond: &mut Respond,
    started: Instant,
) -> Outcome<'c> {
    if !websocket {
        log_req!(ctx, Level::Info, "client sent unsupported \":protocol\" in extended CONNECT");
        return Outcome::Respond(crate::http::handler::finish_error(ctx, 501));
    }
    if !matches!(resp.body, Body::Proxy) {
        if (200..300).contains(&resp.status) {
            return Outcome::Respond(crate::http::handler::finish_error(ctx, 501));
        }
        return Outcome::Respond(resp);
    }
    let Some(key) = websocket::new_key() else {
        log_to!(
            ctx.conf.error_log,
            Level::Alert,
            "*{} RAND_bytes() failed while creating Sec-WebSocket-Key",
            ctx.conn.id
        );
        return Outcome::Respond(crate::http::handler::finish_error(ctx, 500));
    };
    ctx.websocket_key = Some(key.clone());
    let mut client = crate::http::proxy::request_body::Client::h2(
        respond,
        crate::http::proxy::request_body::ReqBody::Buffered(
            crate::http::connection::spool::Spooled::Memory(Vec::new()),
        ),
    );
    let mut resp = crate::http::proxy::respond(w, ctx, &mut client).await;
    let switched = resp.status == 101 && matches!(resp.body, Body::Upstream(_));
    if !switched {
        if !(200..300).contains(&resp.status) || !matches!(resp.body, Body::Upstream(_)) {
            return Outcome::Respond(resp);
        }
        log_req!(
            ctx,
            Level::Error,
            "upstream answered the WebSocket upgrade with {} instead of 101 while reading response header \
             from upstream",
            resp.status
        );
        if let Body::Upstream(up) = &mut resp.body {
            // A well-formed answer, not the peer failing; its unread body
            // makes the connection useless, so it is closed.
            up.stream = None;
            up.done = true;
            crate::http::proxy::release(w, up);
        }
        return Outcome::Respond(crate::http::handler::finish_error(ctx, 502));
    }
    let Body::Upstream(mut up) = std::mem::replace(&mut resp.body, Body::Empty) else {
        return Outcome::Done(false);
    };
    if let Err(why) = websocket::check_switch(&key, &resp.headers) {
        log_req!(ctx, Level::Error, "{} while reading response header from upstream", why);
        crate::http::proxy::release(w, &mut up);
        return Outcome::Respond(crate::http::handler::finish_error(ctx, 502));
    }
    // The 101 as RFC 8441's 2xx: no framing fields (RFC 9110 9.3.6), and
    // no accept value, which belongs to the HTTP/1.1 handshake.
    resp.status = 200;
    let hdr = super::response::Head { resp: &resp, server_tokens: ctx.conf.server_tokens, tunnel: true };
    let (end, sent) = match respond.send_response(&hdr, false) {
        Ok(tx) => tunnel(tx, body, &mut up, ctx.conf, ctx.conn.id).await,
        Err(_) => (End::Failed, 0),
    };
    if matches!(end, End::Idle) {
        log_req!(
            ctx,
            Level::Error,
            "upstream timed out (110: Connection timed out) while proxying upgraded connection"
        );
    }
    // However the tunnel ended, the origin did its part; the connection is
    // gone either way (the tunnel took it).
    up.done = true;
    crate::http::proxy::release(w, &mut up);
    super::log(w, ctx, &resp, (sent, sent), started, !matches!(end, End::Failed));
    Outcome::Done(true)
}

/// The read buffer for the origin's side of a tunnel.
const TUNNEL_BUF: usize = 16 * 1024;

enum End {
    /// Both sides closed in order.
    Closed,
    /// Nothing moved for proxy_read_timeout.
    Idle,
    /// A reset, an I/O error, or the client's window stuck for send_timeout.
    Failed,
}

/// Copies the stream's DATA to the origin and the origin's bytes to the
/// stream until both directions ended; returns how it ended and the bytes
/// sent to the client.
async fn tunnel(
    mut tx: Tx,
    mut rx: Rx,
    up: &mut UpstreamBody,
    conf: &crate::config::model::LocConf,
    id: u64,
) -> (End, u64) {
    let Some(origin) = up.stream.take() else { return (End::Failed, 0) };
    let idle = up.read_timeout;
    // Bytes the origin sent right behind its 101.
    let early = std::mem::take(&mut up.buf);
    let (mut from_origin, mut to_origin) = tokio::io::split(origin);
    let last = Cell::new(Instant::now());
    let sent = Cell::new(0u64);
    let end = {
        let upward = async {
            while let Some(chunk) = rx.data().await {
                let chunk = chunk.map_err(|_| ())?;
                to_origin.write_all(&chunk).await.map_err(|_| ())?;
                last.set(Instant::now());
                rx.release_capacity(chunk.len()).map_err(|_| ())?;
            }
            // END_STREAM is the client's FIN (RFC 8441 4).
            let _ = to_origin.shutdown().await;
            Ok::<(), ()>(())
        };
        let downward = async {
            // One small buffer per tunnel, as nginx's upgraded connections
            // use proxy_buffer_size: idle tunnels stay cheap.
            let mut rbuf = vec![0u8; TUNNEL_BUF];
            let mut pending = Bytes::from(early);
            loop {
                if pending.is_empty() {
                    match from_origin.read(&mut rbuf).await {
                        Ok(0) => {
                            tx.send_data(Bytes::new(), true).map_err(|_| ())?;
                            return Ok::<(), ()>(());
                        }
                        Ok(n) => {
                            last.set(Instant::now());
                            pending = Bytes::copy_from_slice(&rbuf[..n]);
                        }
                        Err(_) => return Err(()),
                    }
                }
                while !pending.is_empty() {
                    let n = super::send::window(&mut tx, pending.len(), conf, id).await?;
                    let part = pending.split_to(n.min(pending.len()));
                    sent.set(sent.get() + part.len() as u64);
                    tx.send_data(part, false).map_err(|_| ())?;
                    last.set(Instant::now());
                }
            }
        };
        let watch = async {
            loop {
                tokio::time::sleep_until((last.get() + idle).into()).await;
                if last.get().elapsed() >= idle {
                    return;
                }
            }
        };
        tokio::pin!(upward, downward, watch);
        let (mut up_done, mut down_done) = (false, false);
        loop {
            tokio::select! {
                r = &mut upward, if !up_done => match r {
                    Ok(()) => up_done = true,
                    Err(()) => break End::Failed,
                },
                r = &mut downward, if !down_done => match r {
                    Ok(()) => down_done = true,
                    Err(()) => break End::Failed,
                },
                _ = &mut watch => break End::Idle,
            }
            if up_done && down_done {
                break End::Closed;
            }
        }
    };
    if !matches!(end, End::Closed) {
        tx.send_reset(h2::Reason::CANCEL);
    }
    (end, sent.get())
}
