//! The upstream core, shared by the reverse proxy (`proxy_pass`, HTTP) and
//! FastCGI (`fastcgi_pass`, [`crate::http::fastcgi`]): pick a peer, reuse an idle
//! connection or connect, send the request (its body was read first, as
//! nginx's `*_request_buffering on` does), read the response head, and
//! retry on the next peer per `*_next_upstream`. The response body then
//! streams to the client from the connection layer ([`body::UpstreamBody`],
//! read ahead of a slow client by [`ahead`] with `*_buffering`), and the
//! origin connection goes back with [`release`] once the origin is done.
//!
//! What differs per protocol ([`Protocol`]) is behind a small seam: how the
//! request is written ([`Sent`]: an HTTP head, or FastCGI's BEGIN_REQUEST
//! and PARAMS records, the body then framed by [`SendFraming`]), how the
//! response head is read ([`HeadReader`]) and how the body is framed
//! ([`response_head::Framing`]). Peer choice, pools, the `queue`, retries,
//! timeouts, read-ahead, the cache hook, 502/504 and their log lines and
//! the `$upstream_*` variables are this module's, for both.

mod accel;
pub mod ahead;
pub mod body;
mod connect;
pub mod cookie;
pub mod dynamic;
mod errors;
mod exchange;
mod finish;
pub mod head_scan;
pub mod peers;
mod protocol;
pub mod redirect;
pub mod request_body;
pub mod response_head;
mod sticky;
pub mod store;
pub mod upstream_tls;
pub mod websocket;
pub mod wire;

pub use errors::{DETAIL_SEP, log_body_error};
use errors::{client_closed, log_timeout, log_upstream, os_error, peer_failed, upstream_suffix};
pub(crate) use exchange::ExchangeError;
use exchange::exchange;
use protocol::{HeadReader, handler_of};
pub use protocol::{has_handler, passes_body, passes_body_of, protocol_of, up_conf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use request_body::{Client, ReqBody, SendFraming};
use upstream_tls::UpStream;

use crate::config::proxy::{Pass, Protocol, ProxyPass, Upstream};
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;
use body::UpstreamBody;
use connect::{Connected, TlsFail, connect, lc_proxy_protocol, tls_connect};

/// Where the origin connection goes once its body is done.
#[derive(Debug)]
pub struct Release {
    pub upstream: Arc<Upstream>,
    pub peer: peers::Picked,
    pub uses: peers::Uses,
    pub keep_alive: bool,
    /// The `queue` slot this request holds until its body is done.
    pub slot: Option<tokio::sync::OwnedSemaphorePermit>,
    /// When this peer was tried, for `$upstream_response_time`.
    pub started: Instant,
    /// `sticky learn`: the session this response made, recorded when the
    /// origin is done.
    pub learned: Option<crate::upstream::sticky::learn::Pending>,
}

enum Attempt {
    /// The head, the connection, what followed the head, the connection's
    /// uses and when the try started.
    Ok(Box<response_head::ResponseHead>, UpStream, Vec<u8>, peers::Uses, Instant),
    /// Failed; the status it would give, whether proxy_next_upstream allows
    /// another try, and whether the request reached the origin (a request
    /// never sent may go elsewhere whatever its method, as in nginx).
    Failed { status: u16, next: bool, sent: bool },
    /// No connection could be made from the `*_bind` address: nginx's 500,
    /// not counted against the peer.
    Bind(String),
    /// The client certificate chosen by variables did not load: nginx's
    /// 500, not counted against the peer.
    Certificate(String),
    /// A streamed request body failed on the client's side.
    Client(crate::http::connection::body::BodyError),
    /// The client closed its connection while the origin worked.
    Gone(&'static str),
}

fn method_idempotent(m: Method) -> bool {
    !matches!(m, Method::Post | Method::Other)
}

/// Runs the proxy for a request whose location has `proxy_pass`; returns
/// the response to send (the origin's, or nginx's 502/504 page).
pub async fn respond<'c>(w: &WorkerCtx, ctx: &mut ReqCtx<'c, '_>, client: &mut Client<'_>) -> Response<'c> {
    let mut resp = respond_origin(w, ctx, client).await;
    // A filter that reads the whole body first (the image filter) runs
    // here, and what it answers may go to an origin again (`error_page
    // 415` naming a proxied location).
    if crate::http::handler::suspended(ctx) {
        resp = Box::pin(crate::http::handler::complete(w, ctx, resp)).await;
    }
    // An error_page that names a location with an origin of its own (an
    // intercepted error, a failed origin: `error_page 502 = @fallback`)
    // goes there now, as nginx's internal redirect runs that location's
    // handler; error_page counts the redirects, so this ends.
    if matches!(resp.body, Body::Proxy) {
        ctx.cache = None;
        ctx.cache_status = None;
        ctx.proxy_pass = None;
        resp = Box::pin(respond(w, ctx, client)).await;
    }
    resp
}

/// [`respond`] up to the header filters.
async fn respond_origin<'c>(w: &WorkerCtx, ctx: &mut ReqCtx<'c, '_>, client: &mut Client<'_>) -> Response<'c> {
    if ctx.dav_put {
        // The body was read as a proxied one; a WebDAV PUT writes it.
        return crate::http::dav::put::respond(ctx, &mut client.body).await;
    }
    let lc: &'c crate::config::model::LocConf = ctx.conf;
    // The run-time API's POST and PATCH come here for their bodies.
    if let Some(api) = &lc.api {
        let body = request_body::whole(&client.body);
        return crate::http::api::respond_with_body(ctx, api, &body);
    }
    crate::req_debug!(ctx, "http upstream request: \"{}\"", String::from_utf8_lossy(&ctx.req.path));
    let (configured, protocol) = handler_of(lc);
    let pass = match configured {
        Some(Pass::Fixed(p)) => p.clone(),
        Some(Pass::Vars(t)) => {
            let resolved = match protocol {
                Protocol::Http => dynamic::resolve(w, ctx, t).await,
                Protocol::Grpc => crate::http::grpc::resolve(w, ctx, t).await,
                other => crate::http::fastcgi::resolve(w, ctx, t, other),
            };
            match resolved {
                Ok(p) => p,
                Err(status) => return crate::http::handler::finish_error(ctx, status),
            }
        }
        None => return crate::http::handler::error(ctx, 500),
    };
    ctx.proxy_pass = Some(pass.clone());
    ctx.upstream.begin();
    request_body::keep_for_variable(ctx, &client.body);
    // The cache answers hits before any origin work (and may turn a HEAD
    // into a GET for the origin: proxy_cache_convert_head), with the
    // settings of the location's module (proxy_cache* or fastcgi_cache*).
    let mut fill = None;
    if up_conf(lc).cache.zone.is_on() {
        match crate::http::cache::serve::lookup(ctx).await {
            crate::http::cache::serve::Lookup::Hit(r) => return r,
            crate::http::cache::serve::Lookup::Fetch(f) => fill = f,
        }
    }
    let conf = up_conf(lc);
    let u = pass.upstream.clone();
    // `*_pass_request_body off` / `proxy_set_body`: the body read from the
    // client (always read whole for these, see connection/h1/upload) is
    // replaced.
    let passed = protocol::passes_body_of(lc, pass.protocol);
    if !passed && let ReqBody::Buffered(_) = client.body {
        let body = match (&lc.proxy.set_body, pass.protocol) {
            (Some(t), Protocol::Http) => t.render_to_vec(&crate::http::handler::ctx::Vars::request(ctx)),
            _ => Vec::new(),
        };
        client.body = ReqBody::Buffered(crate::http::connection::spool::Spooled::Memory(body));
    }
    let Some((req, framing)) = protocol::request_start(ctx, &pass, &client.body) else {
        return crate::http::handler::finish_error(ctx, 500);
    };
    // A HEAD whose answer may be stored reads the body a FastCGI, uwsgi
    // or SCGI application sends anyway (up to its Content-Length), so the
    // entry also serves GETs, as nginx stores it; an HTTP origin sends no
    // body to a HEAD.
    let stores = fill.as_ref().is_some_and(|f| f.store);
    let head_request = ctx.req.method == Method::Head
        && !(stores && matches!(pass.protocol, Protocol::FastCgi | Protocol::Uwsgi | Protocol::Scgi));
    let started = crate::clock::mono();
    let peer_tries = w.proxy.borrow_mut().get(&u).tries() as u32;
    let max_tries = if conf.next_upstream_tries == 0 { peer_tries } else { conf.next_upstream_tries.min(peer_tries) };
    let key = match &u.balance {
        crate::config::proxy::Balance::Hash { key, .. } => {
            key.render_to_vec(&crate::http::handler::ctx::Vars::request(ctx))
        }
        _ => Vec::new(),
    };
    let client_ip = (!ctx.client_is_unix()).then(|| ctx.client().ip());
    let mut slot = None;
    if let Some(q) = &u.queue {
        let (queued, stats) = {
            let mut p = w.proxy.borrow_mut();
            let rt = p.get(&u);
            (rt.queued.clone(), rt.stats.clone())
        };
        let on_wait = || {
            if let Some(s) = &stats {
                s.queue_wait();
            }
        };
        let waited = tokio::select! {
            r = q.enter(&queued, on_wait) => Some(r),
            _ = client.gone(), if !conf.ignore_client_abort => None,
        };
        match waited {
            None => return client_closed(ctx, client.left, "while waiting in the upstream queue", None),
            Some(Ok(s)) => slot = s,
            Some(Err(why)) => {
                if let (crate::upstream::queue::Refused::TimedOut, Some(s)) = (&why, &stats) {
                    s.queue_timeout();
                }
                let what = match why {
                    crate::upstream::queue::Refused::Full => "upstream queue is full",
                    crate::upstream::queue::Refused::TimedOut => "upstream queue timed out",
                };
                log_to!(
                    ctx.conf.error_log,
                    Level::Error,
                    "*{} {} while connecting to upstream, {}",
                    ctx.conn.id,
                    what,
                    upstream_suffix(ctx, &u.name)
                );
                return crate::http::handler::finish_error(ctx, 503);
            }
        }
    }
    let want = sticky::want(ctx, &u);
    let mut sel = crate::upstream::balance::Selection::new();
    let mut tries = 0u32;
    let mut last_status = 502u16;
    loop {
        let pick = w.proxy.borrow_mut().get(&u).pick(&u, &mut sel, client_ip, &key, &want.id);
        let Some(peer) = pick else {
            // nginx's "no live upstreams" also ends a retry that finds
            // every peer down before each was tried (a failure just marked
            // the last live one down): $upstream_addr then ends with the
            // upstream's name.
            if tries == 0 || (tries as usize) < u.peers.len() {
                log_to!(
                    ctx.conf.error_log,
                    Level::Error,
                    "*{} no live upstreams while connecting to upstream, {}",
                    ctx.conn.id,
                    upstream_suffix(ctx, &u.name)
                );
                // nginx's $upstream_addr names the upstream then, and
                // $upstream_status is the 502.
                ctx.upstream.addr.push(u.name.as_str().into());
                push_times(ctx, 502, None, None, started);
            }
            break;
        };
        tries += 1;
        let sent = Sent { head: req.bytes(), framing, protocol: pass.protocol };
        match attempt(w, ctx, &pass, &peer, &sent, client, head_request, started).await {
            Attempt::Ok(head, stream, rest, uses, tried) => {
                let head = *head;
                let status = head.status;
                let next_ok = conf.next_upstream.on_status(status)
                    && tries < max_tries
                    && (method_idempotent(ctx.req.method) || conf.next_upstream.non_idempotent)
                    && within(conf.next_upstream_timeout, started);
                if next_ok {
                    // nginx never counts a 403 or 404 as an unsuccessful
                    // attempt (NGX_PEER_NEXT): the peer is not failed out.
                    if matches!(status, 403 | 404) {
                        let _ = w.proxy.borrow_mut().get(&u).done(&peer, false);
                    } else {
                        peer_failed(w, ctx, &u, &peer);
                    }
                    last_status = status;
                    continue;
                }
                let keep_alive = head.keep_alive && !lc_proxy_protocol(ctx);
                let release =
                    Release { upstream: u.clone(), peer, uses, keep_alive, slot, started: tried, learned: None };
                // The cache may answer instead (a stale entry for a listed
                // status, or the entry the origin's 304 revalidated): the
                // origin's answer is then left, its peer released.
                let instead = match crate::http::cache::serve::on_head(ctx, &mut fill, &head) {
                    Some(r) => Some(r),
                    None => stale(ctx, &mut fill, status, false),
                };
                if let Some(r) = instead {
                    let mut body = UpstreamBody::new(stream, rest, head.framing, conf.read_timeout);
                    body.release = Some(release);
                    release_as(w, &mut body, false);
                    return r;
                }
                if head.accel_limit_rate.is_some() && !crate::http::cache::conf::of(lc).ignore.x_accel_limit_rate {
                    ctx.limit.accel_rate = head.accel_limit_rate;
                }
                if let Some(to) = head.accel_redirect.as_deref()
                    && !crate::http::cache::conf::of(lc).ignore.x_accel_redirect
                {
                    // nginx closes the origin connection and redirects.
                    let carried = accel::carried(&head);
                    let to = to.to_vec();
                    accel::remember(ctx, &head, &to);
                    let mut body = UpstreamBody::new(stream, rest, head.framing, conf.read_timeout);
                    body.release = Some(release);
                    release_as(w, &mut body, false);
                    return Box::pin(accel::redirect(w, ctx, client, &to, carried)).await;
                }
                return build_response(w, ctx, &pass, head, stream, rest, release, fill, &want);
            }
            Attempt::Gone(when) => {
                let _ = w.proxy.borrow_mut().get(&u).done(&peer, false);
                return client_closed(ctx, client.left, when, Some(&peer.conf(&u).name));
            }
            Attempt::Bind(why) => {
                let _ = w.proxy.borrow_mut().get(&u).done(&peer, false);
                let suffix = upstream_suffix(ctx, &peer.conf(&u).name);
                log_to!(
                    ctx.conf.error_log,
                    Level::Crit,
                    "*{} {why} while connecting to upstream, {suffix}",
                    ctx.conn.id
                );
                return crate::http::handler::finish_error(ctx, 500);
            }
            Attempt::Certificate(why) => {
                let _ = w.proxy.borrow_mut().get(&u).done(&peer, false);
                let suffix = upstream_suffix(ctx, &peer.conf(&u).name);
                log_to!(
                    ctx.conf.error_log,
                    Level::Error,
                    "*{} {why} while connecting to upstream, {suffix}",
                    ctx.conn.id
                );
                return crate::http::handler::finish_error(ctx, 500);
            }
            Attempt::Client(e) => {
                // Not the peer's fault: its slot is freed as a success.
                let _ = w.proxy.borrow_mut().get(&u).done(&peer, false);
                log_to!(
                    ctx.conf.error_log,
                    Level::Info,
                    "*{} {} while sending request to upstream, {}",
                    ctx.conn.id,
                    e.reason,
                    upstream_suffix(ctx, &peer.conf(&u).name)
                );
                let mut r = crate::http::handler::finish_error(ctx, e.status);
                r.close = true;
                return r;
            }
            Attempt::Failed { status, next, sent } => {
                peer_failed(w, ctx, &u, &peer);
                last_status = status;
                // A streamed body that went (partly) to this peer is gone.
                let body_left = !client.body_spent();
                let more = next
                    && body_left
                    && tries < max_tries
                    && (!sent || method_idempotent(ctx.req.method) || conf.next_upstream.non_idempotent)
                    && within(conf.next_upstream_timeout, started);
                if !more {
                    break;
                }
            }
        }
    }
    if let Some(r) = stale(ctx, &mut fill, last_status, true) {
        return r;
    }
    crate::http::handler::finish_error(ctx, last_status)
}

/// `proxy_cache_use_stale` (and the entry's own `stale-if-error`): the
/// expired entry answers instead of an origin that failed (`failed`: no
/// usable answer; 504 counts as `timeout`, other failures as `error` and
/// `invalid_header`) or answered with one of the listed statuses.
fn stale<'c>(
    ctx: &mut ReqCtx<'c, '_>,
    fill: &mut Option<crate::http::cache::serve::Fill>,
    status: u16,
    failed: bool,
) -> Option<Response<'c>> {
    let use_stale = crate::http::cache::conf::of(ctx.conf).use_stale;
    let f = fill.as_mut()?;
    let entry = f.stale.as_ref()?;
    let by_conf = if failed {
        if status == 504 { use_stale.timeout } else { use_stale.error || use_stale.invalid_header }
    } else {
        use_stale.on_status(status)
    };
    let m = &entry.found.meta;
    // nginx (since 1.19.3) serves an entry's stale-if-error only when the
    // origin failed (ngx_http_upstream_next), not for its 5xx answer.
    let by_entry = failed
        && m.stale_error > 0
        && crate::http::cache::manager::now() <= m.valid_until.saturating_add(m.stale_error as i64);
    if !(by_conf || by_entry) {
        return None;
    }
    let s = f.stale.take()?;
    ctx.cache_status = Some(crate::http::cache::serve::STALE);
    Some(crate::http::cache::deliver::from_file(ctx, s.found))
}

fn within(limit: Duration, started: Instant) -> bool {
    limit.is_zero() || crate::clock::mono().saturating_duration_since(started) < limit
}

pub(crate) fn ms(t: Instant) -> u64 {
    crate::clock::since_ms(t)
}

/// The request for the origin: its start, how its body is framed, and the
/// protocol the response is read with.
struct Sent<'a> {
    head: &'a [u8],
    framing: SendFraming,
    protocol: Protocol,
}

/// One try against one peer. A reused idle connection that turns out closed
/// is replaced by a fresh one without counting a failure.
#[allow(clippy::too_many_arguments)]
async fn attempt(
    w: &WorkerCtx,
    ctx: &mut ReqCtx<'_, '_>,
    pass: &ProxyPass,
    peer: &peers::Picked,
    req: &Sent<'_>,
    client: &mut Client<'_>,
    head_request: bool,
    started: Instant,
) -> Attempt {
    let u = &pass.upstream;
    let p = peer.conf(u);
    let lc: &crate::config::model::LocConf = ctx.conf;
    let conf = up_conf(lc);
    let next = conf.next_upstream;
    ctx.upstream.addr.push(p.name.clone());
    let t0 = crate::clock::mono();
    // A connection that began with a PROXY line belongs to one client:
    // never taken from (or given back to) the pool.
    let pp = lc_proxy_protocol(ctx);
    let grpc = req.protocol == Protocol::Grpc;
    // An upstream block may serve proxy_pass and grpc_pass both: an idle
    // connection of the other kind is closed, not reused.
    let idle = if pp { None } else { w.proxy.borrow_mut().get(u).take_idle(peer, u.keepalive_timeout, t0) }
        .filter(|(s, _)| matches!(s, UpStream::H2(_)) == grpc);
    let reused = idle.is_some();
    let bind = conf.bind.as_deref().filter(|_| idle.is_none() && p.unix.is_none());
    let bound = match bind.and_then(|b| crate::upstream::bind::local(ctx, b)) {
        Some(local) => match crate::upstream::bind::socket(p.addr, local) {
            Ok(s) => Some(s),
            Err(why) => return Attempt::Bind(why),
        },
        None => None,
    };
    // The PROXY protocol line counts in `$upstream_bytes_sent`, as nginx's.
    let mut pp_len = 0u64;
    match (idle.is_some(), &p.unix) {
        (true, _) => crate::req_debug!(ctx, "get keepalive peer: using connection to {}", p.name),
        (false, Some(path)) => crate::req_debug!(ctx, "connect to unix:{}", path.display()),
        (false, None) => crate::req_debug!(ctx, "connect to {}", p.addr),
    }
    let (mut stream, requests) = match idle {
        Some(s) => s,
        None => match crate::clock::timeout(conf.connect_timeout, connect(p, bound)).await {
            Ok(Ok(Connected::Unix(s))) => (UpStream::Unix(s), peers::Uses::fresh()),
            Ok(Ok(Connected::Tcp(mut s))) => {
                let _ = s.set_nodelay(true);
                if pp {
                    use tokio::io::AsyncWriteExt;
                    // nginx writes `PROXY UNKNOWN` for a unix-domain client.
                    let line = if ctx.client_is_unix() {
                        b"PROXY UNKNOWN\r\n".to_vec()
                    } else {
                        crate::http::connection::proxy_protocol::v1_line(ctx.client(), ctx.conn.local)
                    };
                    if let Err(e) = s.write_all(&line).await {
                        log_upstream(
                            ctx,
                            p,
                            &format!(
                                "send() failed ({}) while sending PROXY protocol header to upstream",
                                os_error(&e)
                            ),
                        );
                        push_times(ctx, 502, None, None, started);
                        return Attempt::Failed { status: 502, next: next.error, sent: false };
                    }
                    pp_len = line.len() as u64;
                }
                if !pass.tls {
                    (UpStream::Plain(s), peers::Uses::fresh())
                } else {
                    // Boxed: the handshake's state is large, and only a new
                    // connection needs it (the request's future stays small).
                    match Box::pin(tls_connect(w, ctx, pass, s)).await {
                        Ok(t) => (UpStream::Tls(Box::new(t)), peers::Uses::fresh()),
                        Err(TlsFail::Certificate(why)) => return Attempt::Certificate(why),
                        Err(TlsFail::Handshake(why)) => {
                            log_upstream(ctx, p, &format!("{} while SSL handshaking to upstream", why));
                            push_times(ctx, 502, None, None, started);
                            return Attempt::Failed { status: 502, next: next.error, sent: false };
                        }
                        Err(TlsFail::Timeout) => {
                            let why =
                                "upstream timed out (110: Connection timed out) while SSL handshaking to upstream";
                            log_timeout(ctx, p, why);
                            push_times(ctx, 504, None, None, started);
                            return Attempt::Failed { status: 504, next: next.timeout, sent: false };
                        }
                    }
                }
            }
            Ok(Err(e)) => {
                // A unix socket fails at once, where nginx names it; a TCP
                // connect fails later, in nginx's words without the name.
                let to = if p.unix.is_some() { format!(" to {}", p.name) } else { String::new() };
                log_upstream(
                    ctx,
                    p,
                    &format!("connect(){} failed ({}) while connecting to upstream", to, os_error(&e)),
                );
                push_times(ctx, 502, None, None, started);
                return Attempt::Failed { status: 502, next: next.error, sent: false };
            }
            Err(_) => {
                log_timeout(ctx, p, "upstream timed out (110: Connection timed out) while connecting to upstream");
                push_times(ctx, 504, None, None, started);
                return Attempt::Failed { status: 504, next: next.timeout, sent: false };
            }
        },
    };
    if grpc && !matches!(stream, UpStream::H2(_)) {
        // The preface goes with the first request, as nginx sends it.
        stream = UpStream::H2(Box::new(crate::http::grpc::client::handshake(stream)));
    }
    let connect_ms = ms(t0);
    let mut buf = w.proxy.borrow_mut().take_buf(conf.buffer_size.max(1024));
    let mut sent = pp_len;
    let outcome = match &mut stream {
        UpStream::H2(c) if grpc => match crate::http::grpc::head::request_block(ctx, pass, &client.body) {
            Ok(block) => {
                let limits = (lc.client_max_body_size, lc.client_body_timeout);
                crate::http::grpc::exchange(c, &block, client, conf, head_request, limits).await
            }
            Err(why) => Err(ExchangeError::Invalid(why.into())),
        },
        _ => {
            let mut reader =
                HeadReader::new(ctx, req.protocol, req.head, upstream_suffix(ctx, &p.name), head_request, u);
            exchange(&mut stream, req, client, &mut buf, conf, &mut reader, &mut sent).await
        }
    };
    if let request_body::ReqBody::Streamed(c) = &client.body
        && let Some(copy) = c.copy()
    {
        ctx.request_body = Some(copy.to_vec());
    }
    match outcome {
        Ok(head) => {
            ctx.upstream.status.push(head.status);
            ctx.upstream.connect_ms.push(Some(connect_ms));
            let took = crate::clock::since(t0);
            let header_ms = took.as_millis() as u64;
            w.proxy.borrow_mut().get(u).responded(took);
            ctx.upstream.header_ms.push(Some(header_ms));
            ctx.upstream.response_ms.push(Some(header_ms));
            // The body's bytes are counted as they pass (`finish_body`).
            ctx.upstream.response_len.push(0);
            ctx.upstream.bytes_received.push(head.head_len as u64);
            ctx.upstream.bytes_sent.push(sent);
            // The buffer goes on with what followed the head (no copy into
            // a new allocation).
            buf.drain(..head.head_len);
            Attempt::Ok(Box::new(head), stream, buf, requests.next(), t0)
        }
        Err(e) => {
            let closed = match &e {
                ExchangeError::Closed => true,
                ExchangeError::Io(_, err) => err.kind() == std::io::ErrorKind::ConnectionReset,
                _ => false,
            };
            // As nginx, only where `proxy_next_upstream` allows a retry
            // after an error: the origin may have read the request before
            // it closed, so a POST is not sent again unless non_idempotent.
            let may_repeat = next.error && (method_idempotent(ctx.req.method) || next.non_idempotent);
            // An HTTP/2 connection that refused a new stream got nothing of
            // the request: any method may go again.
            let unsent = matches!(e, ExchangeError::NotSent);
            if reused && (unsent || closed && may_repeat && buf.is_empty() && !client.body_spent()) {
                // The origin closed the idle connection as we reused it:
                // try once more on a new connection, not counted as a try.
                // Every idle connection to this peer is likely as stale.
                ctx.upstream.addr.pop();
                w.proxy.borrow_mut().get(u).drop_idle(peer);
                return Box::pin(attempt(w, ctx, pass, peer, req, client, head_request, started)).await;
            }
            let (status, why, go_next) = match e {
                ExchangeError::Client(e) => return Attempt::Client(e),
                ExchangeError::Gone(when) => {
                    push_times(ctx, 499, Some(connect_ms), None, started);
                    return Attempt::Gone(when);
                }
                ExchangeError::Timeout(what) => {
                    (504, format!("upstream timed out (110: Connection timed out) while {}", what), next.timeout)
                }
                ExchangeError::Closed | ExchangeError::NotSent => (
                    502,
                    "upstream prematurely closed connection while reading response header from upstream".into(),
                    next.error,
                ),
                ExchangeError::Io(what, err) => {
                    (502, format!("{} failed ({}) while {}", what.0, os_error(&err), what.1), next.error)
                }
                ExchangeError::Invalid(why) if why.is_empty() => (502, String::new(), next.invalid_header),
                ExchangeError::Invalid(why) => {
                    // A gRPC origin's break may come with nginx's detail
                    // line first (`upstream sent invalid header: "n: v"`),
                    // logged on its own as nginx does.
                    let (detail, main) =
                        why.rsplit_once(DETAIL_SEP).map_or((None, why.as_ref()), |(d, m)| (Some(d), m));
                    if let Some(d) = detail {
                        log_upstream(ctx, p, &format!("{d} while reading response header from upstream"));
                    }
                    (502, format!("{main} while reading response header from upstream"), next.invalid_header)
                }
            };
            // An empty reason was logged already (FastCGI's stderr caught
            // by fastcgi_catch_stderr).
            if status == 504 {
                log_timeout(ctx, p, &why);
            } else if !why.is_empty() {
                log_upstream(ctx, p, &why);
            }
            push_times(ctx, status, Some(connect_ms), None, started);
            if let Some(last) = ctx.upstream.bytes_sent.last_mut() {
                *last = sent;
            }
            Attempt::Failed { status, next: go_next, sent: !unsent }
        }
    }
}

fn push_times(ctx: &mut ReqCtx<'_, '_>, status: u16, connect: Option<u64>, header: Option<u64>, started: Instant) {
    ctx.upstream.status.push(status);
    ctx.upstream.connect_ms.push(connect);
    ctx.upstream.header_ms.push(header);
    ctx.upstream.response_ms.push(Some(ms(started)));
    ctx.upstream.response_len.push(0);
    ctx.upstream.bytes_received.push(0);
    ctx.upstream.bytes_sent.push(0);
}

#[allow(clippy::too_many_arguments)]
fn build_response<'c>(
    w: &WorkerCtx,
    ctx: &mut ReqCtx<'c, '_>,
    pass: &ProxyPass,
    head: response_head::ResponseHead,
    stream: UpStream,
    rest: Vec<u8>,
    mut release: Release,
    fill: Option<crate::http::cache::serve::Fill>,
    want: &sticky::Want,
) -> Response<'c> {
    let mut resp = Response::new(head.status);
    resp.content_type = head.content_type;
    resp.headers = head.headers;
    let passed = &protocol::up_conf(ctx.conf).pass_headers;
    let absent = |n: &str| passed.iter().any(|p| p == n) && resp.header(n).is_none();
    (resp.no_server, resp.no_date) = (absent("server"), absent("date"));
    ctx.override_charset = head
        .accel_charset
        .filter(|_| !crate::http::cache::conf::of(ctx.conf).ignore.x_accel_charset)
        .map(|v| String::from_utf8_lossy(&v).into_owned());
    for (n, v) in resp.headers.iter_mut() {
        match pass.protocol {
            Protocol::Http if n.eq_ignore_ascii_case("location") => {
                if let Some(new) = redirect::location(ctx, pass, v) {
                    *v = new.into();
                }
            }
            Protocol::Http if n.eq_ignore_ascii_case("refresh") => {
                if let Some(new) = redirect::refresh(ctx, pass, v) {
                    *v = new.into();
                }
            }
            Protocol::Http if n.eq_ignore_ascii_case("set-cookie") && ctx.conf.proxy.cookie.active() => {
                if let Some(new) = cookie::rewrite(ctx, v) {
                    *v = new.into();
                }
            }
            // FastCGI's Location goes as the script wrote it (nginx keeps
            // an upstream's relative Location relative too).
            _ => {}
        }
    }
    if pass.protocol == Protocol::Memcached {
        // A value has no type of its own: the URI's, as nginx sets it.
        let t = crate::http::handler::static_file::content_type(ctx.conf, &ctx.req.path);
        resp.content_type = Some(std::borrow::Cow::Owned(t.to_string()));
    }
    // After proxy_cookie_*, which are for the origin's cookies.
    if release.upstream.sticky.is_some() {
        let u = release.upstream.clone();
        release.learned = sticky::answered(ctx, &u, release.peer.conf(&u), want, &mut resp);
    }
    let conf = up_conf(ctx.conf);
    let mut body = UpstreamBody::new(stream, rest, head.framing, conf.read_timeout);
    body.release = Some(release);
    body.buffering = head.accel_buffering.unwrap_or(conf.buffering);
    body.limit_rate = (body.buffering && conf.limit_rate > 0).then(|| (conf.limit_rate, crate::clock::mono()));
    // memcached's END is answered as nginx's own 404 (its `intercept_404`).
    let not_found = pass.protocol == Protocol::Memcached && resp.status == 404;
    if not_found
        || conf.intercept_errors && resp.status >= 300 && crate::http::handler::has_error_page(ctx, resp.status)
    {
        // The origin's body is not wanted: its connection is not reusable
        // unless read to the end, so it is closed; the peer answered, so it
        // did not fail, and its connection count and queue slot come back.
        release_as(w, &mut body, false);
        if let Some(f) = &fill {
            crate::http::cache::serve::remember_error(
                ctx,
                f,
                resp.status,
                &resp.headers,
                head.accel_expires.as_deref(),
            );
        }
        return crate::http::handler::intercepted(ctx, &resp);
    }
    if let Some(mut f) = fill {
        body.cache =
            crate::http::cache::serve::writer_for(ctx, &mut f, &resp, head.accel_expires.as_deref(), body.buffering);
        // A response being stored is answered as a hit would be
        // (conditionals and ranges), as nginx's filters treat it.
        if body.cache.is_some()
            && !ctx.subrequest
            && let Some(status) = crate::http::cache::deliver::on_miss(ctx, &mut resp, &mut body)
        {
            let mut r = crate::http::handler::finish_error(ctx, status);
            if status == 416 {
                let mut cr = Vec::with_capacity(24);
                crate::http::range::unsatisfied_range(body.known_len().unwrap_or(0), &mut cr);
                r.content_range = Some(cr);
            }
            // The origin's body (and its entry) is dropped with `body`.
            return r;
        }
    }
    if body.cache.is_none() && !matches!(conf.store, store::StoreConf::Off) {
        let modified = resp.header("last-modified").and_then(crate::http::date::parse_http_date);
        body.store = store::StoreFile::start(ctx, conf, resp.status, body.buffering, modified);
    }
    if body.cache.is_none()
        && let Some(status) = crate::http::cache::deliver::forced(ctx, &mut resp, &mut body)
    {
        release_as(w, &mut body, false);
        let mut r = crate::http::handler::finish_error(ctx, status);
        let mut cr = Vec::with_capacity(24);
        crate::http::range::unsatisfied_range(body.known_len().unwrap_or(0), &mut cr);
        r.content_range = Some(cr);
        return r;
    }
    resp.body = Body::Upstream(Box::new(body));
    crate::http::handler::finish_proxied(ctx, resp)
}

pub use finish::{drain, fill_rest, finish_body, release, release_as, settle_orphans, tunnel};
