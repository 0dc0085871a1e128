//! One HTTP/1.x connection: keep-alive and pipelining, header and body
//! timeouts, request bodies (discarded with framing kept), response writing
//! with sendfile, and the access log line.
//!
//! Between requests the connection holds no buffers: the read buffer goes
//! back to the worker's pool while idle. The per-request work runs inline in
//! the connection's task (not boxed): the task is sized for the largest path
//! of `connection::start` (TLS, HTTP/2) anyway, so a box per request only
//! cost an allocation and a copy of the ~3.6 KB future.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use super::codec::{self, HeadError, Limits};
use super::send::{Out, flush, push_chunk_size, write_body, write_compressed, write_upstream};
use super::writer::{self, HeadOpts};
use crate::config::model::ListenGroup;
use crate::http::connection::body;
use crate::http::connection::sock::Sock;
use crate::http::handler::ctx::{ConnInfo, ReqCtx, Vars};
use crate::http::request::{BodyKind, Head, Method, Request, Version};
use crate::http::response::{Body, Response};
use crate::http::uri;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::ConnGuard;
use crate::worker::idle::Fired;

/// While draining, how long an idle keep-alive connection may still bring
/// one more request (answered with `Connection: close`). Keep-alive timers
/// are swept once a second, so one second could end a connection that went
/// idle a moment before the sweep, while its client's next request is on
/// the way; two seconds means it was idle at least one.
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);

pub struct Conn {
    pub stream: Sock,
    pub rbuf: Vec<u8>,
    pub wbuf: Vec<u8>,
    pub info: ConnInfo,
    nodelay: bool,
    /// keepalive_timeout of the location that served the last request.
    keepalive: Duration,
    /// Input may be left unread at close: close by lingering.
    pub(super) linger: bool,
    /// The current request's response head went into `wbuf` (or out): a
    /// panic after this closes the connection instead of answering 500.
    pub(super) answered: bool,
}

enum Next {
    KeepAlive,
    Close,
}

pub async fn serve(stream: Sock, info: ConnInfo, group: usize, guard: ConnGuard) {
    let w = &*guard.0;
    let mut c = Conn {
        stream,
        rbuf: Vec::new(),
        wbuf: Vec::new(),
        info,
        nodelay: false,
        keepalive: Duration::ZERO,
        linger: false,
        answered: false,
    };
    let g = &w.cfg.http.listens[group];
    let header_buf = g.default_server.conf.client_header_buffer_size;
    loop {
        if c.rbuf.is_empty() {
            w.give_buf(std::mem::take(&mut c.rbuf));
            // Not yet registered: the request may already be here.
            if c.stream.is_raw() {
                let mut b = w.take_buf(header_buf);
                match c.stream.try_read_now(&mut b) {
                    Some(Ok(n)) if n > 0 => c.rbuf = b,
                    Some(_) => {
                        w.give_buf(b);
                        break;
                    }
                    None => w.give_buf(b),
                }
            }
        }
        if c.rbuf.is_empty() {
            match idle_wait(&mut c, g, w).await {
                Idle::Readable => {}
                Idle::Close => break,
                Idle::Park(deadline) => {
                    let w = guard.0.clone();
                    if let Ok(std) = c.stream.into_std() {
                        w.parking.park(std, c.info, group, deadline, guard);
                    }
                    return;
                }
            }
            c.rbuf = w.take_buf(header_buf);
        }
        // A panic in the request costs this connection only (see
        // `worker::unwind`): 500 if nothing was answered yet, then close.
        match crate::worker::unwind::Guarded::new(serve_one(&mut c, g, &guard.0)).await {
            // nginx's r->pipeline: the next request was already read.
            Ok(Next::KeepAlive) => c.info.pipelined = !c.rbuf.is_empty(),
            Ok(Next::Close) => break,
            Err(p) => {
                super::fault::panicked(&mut c, g, w, &p).await;
                break;
            }
        }
    }
    w.logs.borrow_mut().flush_pending();
    let log = &g.default_server.conf.error_log;
    crate::log_debug!(log, c.info.debug, "*{} close http connection: {}", c.info.id, c.info.fd);
    if c.linger {
        Box::pin(c.stream.linger(&mut c.rbuf)).await;
    } else if c.stream.is_tls() {
        c.stream.close_notify().await;
    }
    w.give_buf(std::mem::take(&mut c.rbuf));
}

enum Idle {
    Readable,
    Close,
    /// Idle long enough to give up the task; keep-alive ends at the deadline.
    Park(u64),
}

/// Seconds of idleness after which a connection is parked.
const PARK_AFTER: u64 = 2;

/// Waits, holding no buffers, for the next request's first bytes. Ends on
/// timeout (keepalive_timeout, or client_header_timeout before the first
/// request), on a socket error, or with a request to park. While the worker
/// drains, an idle connection gets a short grace for a request already on
/// its way.
async fn idle_wait(c: &mut Conn, g: &ListenGroup, w: &crate::worker::WorkerCtx) -> Idle {
    let first = c.info.requests == 0;
    let dconf = &g.default_server.conf;
    let wait = if first { dconf.client_header_timeout } else { c.keepalive };
    let (id, peer) = (c.info.id, c.info.peer);
    // The idle timers are swept at each second's start: the deadline is
    // the first second boundary at or after the timeout's end, so the wait
    // lasts at least `wait` and less than a second more (nginx: `wait`).
    let now_ms = crate::clock::unix_ms();
    let now = now_ms / 1000;
    let mut deadline = (now_ms + wait.as_millis() as u64).div_ceil(1000);
    if w.draining.get() {
        deadline = deadline.min(now + DRAIN_GRACE.as_secs());
    }
    let parkable = w.parking.enabled() && !w.draining.get() && !c.stream.is_tls();
    let park_at = if parkable { now + PARK_AFTER } else { u64::MAX };
    let slot = w.idle.add(deadline, park_at);
    let r = tokio::select! {
        biased;
        r = c.stream.readable() => if r.is_ok() { Idle::Readable } else { Idle::Close },
        f = w.idle.wait(slot) => match f {
            Fired::Park => Idle::Park(deadline),
            Fired::Timeout => {
                if first {
                    log_to!(g.default_server.conf.error_log, Level::Info, "*{} client timed out (110: Connection timed out) while waiting for request, client: {}", id, peer.ip());
                }
                Idle::Close
            }
        }
    };
    w.idle.remove(slot);
    r
}

pub(crate) fn limits(g: &ListenGroup) -> Limits {
    let c = &g.default_server.conf;
    let (n, size) = c.large_client_header_buffers;
    Limits {
        underscores: c.core.underscores_in_headers,
        ignore_invalid: c.core.ignore_invalid_headers,
        max_lines: c.core.max_headers,
        ..Limits::sized(size, n * size)
    }
}

/// nginx's error-log context for a request whose head is incomplete: the
/// request line and Host when they already arrived.
pub(super) fn partial_suffix(buf: &[u8], info: &ConnInfo, g: &ListenGroup) -> String {
    let mut s = format!("client: {}, server: {}", info.peer.ip(), g.default_server.name);
    let mut lines = buf.split(|&b| b == b'\n');
    let complete = |l: &[u8]| l.strip_suffix(b"\r").unwrap_or(l).to_vec();
    if let Some(first) = lines.next()
        && buf.contains(&b'\n')
    {
        s.push_str(&format!(", request: \"{}\"", String::from_utf8_lossy(&complete(first))));
        for l in lines {
            let l = complete(l);
            if l.len() > 5 && l[..5].eq_ignore_ascii_case(b"host:") {
                s.push_str(&format!(", host: \"{}\"", String::from_utf8_lossy(l[5..].trim_ascii())));
                break;
            }
        }
    }
    s
}

/// Reads until a full request head is buffered.
async fn read_head(c: &mut Conn, g: &ListenGroup, started: Instant) -> Result<Option<Head>, HeadError> {
    let lim = limits(g);
    let dconf = &g.default_server.conf;
    let deadline = tokio::time::Instant::from_std(started) + dconf.client_header_timeout;
    loop {
        if let Some(h) = codec::parse_head(&c.rbuf, lim)? {
            return Ok(Some(h));
        }
        if c.rbuf.len() >= lim.total_max {
            return Err(codec::overflow(&c.rbuf, lim));
        }
        if !c.wbuf.is_empty() {
            if c.stream.write_all(&c.wbuf, dconf.send_timeout).await.is_err() {
                return Ok(None);
            }
            c.wbuf.clear();
        }
        if c.rbuf.len() == c.rbuf.capacity() {
            let want = (c.rbuf.capacity() * 2).max(lim.line_max).min(lim.total_max);
            c.rbuf.reserve_exact(want - c.rbuf.len());
        }
        // Data is usually already there: no timer unless we must wait.
        let read = match c.stream.try_read(&mut c.rbuf) {
            Some(r) => Ok(r),
            None => tokio::time::timeout_at(deadline, c.stream.read_some(&mut c.rbuf)).await,
        };
        match read {
            Err(_) => {
                log_to!(
                    g.default_server.conf.error_log,
                    Level::Info,
                    "*{} client timed out (110: Connection timed out) while reading client request headers, {}",
                    c.info.id,
                    partial_suffix(&c.rbuf, &c.info, g)
                );
                // nginx has a request once bytes arrived: it logs 408.
                return if c.rbuf.is_empty() { Ok(None) } else { Err(HeadError::TimedOut) };
            }
            Ok(Err(e)) if crate::tls::reneg::is_refusal(&e) => {
                log_to!(
                    g.default_server.conf.error_log,
                    Level::Notice,
                    "*{} SSL renegotiation disabled while reading client request headers, client: {}",
                    c.info.id,
                    c.info.peer.ip()
                );
                c.stream.flush_alert().await;
                return Ok(None);
            }
            Ok(Ok(0)) | Ok(Err(_)) => {
                if !c.rbuf.is_empty() {
                    log_to!(
                        g.default_server.conf.error_log,
                        Level::Info,
                        "*{} client prematurely closed connection while reading client request headers, client: {}",
                        c.info.id,
                        c.info.peer.ip()
                    );
                }
                return Ok(None);
            }
            Ok(Ok(_)) => {}
        }
    }
}

async fn serve_one(c: &mut Conn, g: &ListenGroup, w: &std::rc::Rc<crate::worker::WorkerCtx>) -> Next {
    let started = crate::clock::mono();
    c.answered = false;
    // stub_status: reading until the head is in, then writing until the
    // answer is out (a refused head counts as a request, as in nginx).
    let mut phase = w.stats.reading();
    let head = read_head(c, g, started).await;
    if !matches!(head, Ok(None)) {
        phase.writing();
    }
    let mut head = match head {
        Ok(Some(h)) => h,
        Ok(None) => return Next::Close,
        Err(HeadError::TimedOut) => {
            log_unanswered(c, g, w, 408, started);
            return Next::Close;
        }
        Err(e) => {
            reject(c, g, w, e, started).await;
            return Next::Close;
        }
    };
    let head_len = head.head_len;
    // nginx discards (and so checks) the buffered part of a chunked body
    // before answering: a malformed one gets 400, not a response.
    if head.body == BodyKind::Chunked && super::chunked::Decoder::default().feed(&c.rbuf[head_len..], |_| {}).is_err() {
        reject(c, g, w, HeadError::Bad("client sent invalid chunked body"), started).await;
        return Next::Close;
    }
    c.info.requests += 1;

    // Request target: origin-form or absolute-form.
    let Conn { stream, rbuf, wbuf, info, nodelay, keepalive, linger, answered } = &mut *c;
    let mut out = Out { stream, wbuf, id: info.id, closing: false, pace: None };
    let target = &rbuf[head.target.clone()];
    let (authority, origin) = split_absolute(target);
    if authority.is_some_and(|a| !uri::absolute_host_ok(a)) {
        reject(c, g, w, HeadError::BadLine("client sent invalid request"), started).await;
        return Next::Close;
    }
    let (raw_path, raw_args) = uri::split_target(origin);
    let raw_path: &[u8] = if raw_path.is_empty() { b"/" } else { raw_path };
    let path = match uri::normalize_path_with(raw_path, g.default_server.conf.core.merge_slashes) {
        Ok(p) => p,
        Err(_) => {
            reject(c, g, w, HeadError::BadLine("client sent invalid request"), started).await;
            return Next::Close;
        }
    };
    let host_raw = authority.or_else(|| head.host.clone().map(|r| &rbuf[r]));
    // A head that parsed but is refused (an invalid Host, plain HTTP on a
    // TLS port) is answered as nginx's ngx_http_finalize_request(r, code)
    // does: through the server's error_page, with the connection closed.
    let mut refused = None;
    let host = match host_raw {
        Some(h) => match crate::http::routing::server::validate_host(h) {
            Some(v) => v,
            None => {
                refused = Some(HeadError::Bad("client sent invalid host header"));
                Cow::Borrowed(&b""[..])
            }
        },
        None => Cow::Borrowed(&b""[..]),
    };
    if refused.is_none() && rbuf[head.method_r.clone()] == *b"TRACE" {
        refused = Some(HeadError::Trace);
    }
    if refused.is_none() && info.plain_on_tls {
        refused = Some(HeadError::PlainOnTls);
    }
    let server = crate::http::routing::server::select(g, &host);
    if let Some(e) = &refused {
        log_refused(g, info, rbuf, e);
    }
    let req = Request { buf: rbuf, head: &head, method: head.method, path, args: raw_args.map(Cow::Borrowed), host };
    let mut ctx = ReqCtx::new(g, server, req, info);
    ctx.started = started;
    crate::req_debug!(ctx, "http request line: \"{}\"", String::from_utf8_lossy(ctx.req.request_line()));
    crate::req_debug!(ctx, "http uri: \"{}\"", String::from_utf8_lossy(&ctx.req.path));
    let mut resp = match (&refused, crate::http::handler::client_cert_status(&ctx)) {
        (Some(e), _) => {
            let mut r = crate::http::handler::finish_error(&mut ctx, e.status());
            r.close = true;
            r
        }
        (None, Some(code)) => crate::http::handler::finish_error(&mut ctx, code),
        (None, None) => crate::http::handler::handle(&mut ctx),
    };
    if crate::http::handler::suspended(&ctx) {
        // A client that closes while the request waits (a limit_req delay,
        // an auth subrequest) ends it, as nginx's read-side check does:
        // 499, and a delayed request no longer holds its connection.
        let finished = tokio::select! {
            biased;
            r = crate::http::handler::complete(w, &mut ctx, resp) => Some(r),
            () = out.stream.peer_closed() => None,
        };
        match finished {
            Some(r) => resp = r,
            None => {
                crate::log_req!(ctx, Level::Info, "client prematurely closed connection");
                log_request(w, &ctx, &Response::new(499), 0, 0, started, false);
                return Next::Close;
            }
        }
    }
    let proxied = matches!(resp.body, Body::Proxy);
    crate::http::handler::mirror::start(w, &mut ctx, false, proxied);
    // proxy_pass: the request body goes to the origin (buffered first or
    // streamed, per proxy_request_buffering), then the origin answers.
    let mut body_taken: Option<(usize, Vec<u8>)> = None;
    let mut continued = false;
    if matches!(resp.body, Body::Proxy) {
        let (r, taken) = super::upload::respond(w, &mut ctx, out.stream, &rbuf[head_len..], &head).await;
        resp = r;
        // Mirrors that waited for the request body (read by now).
        crate::http::handler::mirror::start(w, &mut ctx, true, true);
        continued = taken.continued;
        body_taken = Some((taken.used, taken.extra));
    }

    out.pace = crate::http::limit::rate::pacer(&ctx, started);
    // 444: close without a response; so is a 408 of our own (a body read
    // timed out, or `return 408`), as nginx's ngx_http_terminate_request.
    if resp.status == 444 || resp.status == 499 || (resp.status == 408 && resp.is_error_page) {
        log_request(w, &ctx, &resp, 0, 0, started, false);
        return Next::Close;
    }
    let conf = ctx.conf;
    // A streamed body of unknown length is chunked for HTTP/1.1 (unless
    // `chunked_transfer_encoding off`) and otherwise ends with the
    // connection.
    let head_only = head.method == Method::Head || !writer::has_body(resp.status);
    // add_trailer: the body goes chunked (whatever its length) so the
    // fields can follow it, as nginx's chunked filter does.
    let trailers = !head_only
        && head.version == Version::Http11
        && conf.core.chunked_transfer_encoding
        && crate::http::filter::headers::expects_trailers(&ctx, resp.status);
    let chunked = trailers
        || (resp.body.known_len().is_none() && head.version == Version::Http11 && conf.core.chunked_transfer_encoding);
    let keep_alive = head.keep_alive
        && !resp.close
        && !w.draining.get()
        && !conf.keepalive_timeout.is_zero()
        && info.requests < conf.keepalive_requests
        && !info.past_keepalive_time(conf.keepalive_time)
        && !keepalive_disabled(conf.core.keepalive_disable, head.method, ctx.req.header("user-agent"))
        && (resp.body.known_len().is_some() || chunked);
    ctx.keep_alive = keep_alive;
    let has_body = head.body != BodyKind::None;
    out.closing = !keep_alive;
    *linger = !keep_alive && (has_body || rbuf.len() > head_len);
    if has_body && keep_alive && head.expect_continue && rbuf.len() == head_len && !continued {
        out.wbuf.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let opts =
        HeadOpts { keep_alive, chunked, keepalive_header: conf.keepalive_header, server_tokens: conf.server_tokens };
    // One allocation for a head (and a small body) instead of growing from
    // empty by doubling on a connection's first response.
    out.wbuf.reserve(512);
    let start_len = out.wbuf.len();
    *answered = true;
    if head.version != Version::Http09 {
        writer::write_head(&resp, &opts, out.wbuf);
    }
    let header_bytes = (out.wbuf.len() - start_len) as u64;
    let more_pipelined = rbuf.len() > head_len && !has_body;
    if resp.status == 101 && matches!(resp.body, Body::Upstream(_)) {
        // Switching protocols (WebSocket): after the 101 the connection is
        // a two-way tunnel to the origin until either side closes.
        // Only a client that asked for an upgrade gets the tunnel; to any
        // other, nginx sends the head and nothing after it.
        let head_bytes = out.wbuf.len() as u64;
        let ok = flush(&mut out, conf.send_timeout, false).await;
        let asked = ctx.req.header("upgrade").is_some();
        let mut tunneled = 0;
        if let Body::Upstream(mut up) = std::mem::replace(&mut resp.body, Body::Empty) {
            if ok && asked {
                let client_early = rbuf[head_len..].to_vec();
                tunneled = crate::http::proxy::tunnel(out.stream, &client_early, &mut up).await;
            }
            // A tunnel that ran its course is no failure of the peer; its
            // connection is not reusable either way (the stream is gone).
            up.done = ok;
            crate::http::proxy::release(w, &mut up);
        }
        // Logged when the tunnel ends, with what went through it to the
        // client (nginx's `$bytes_sent` counts the connection's bytes).
        let sent = if ok { head_bytes + tunneled } else { 0 };
        log_request(w, &ctx, &resp, sent, tunneled, started, ok);
        return Next::Close;
    }
    let (sent_ok, body_bytes) = match &mut resp.body {
        Body::Upstream(up) => {
            let r = write_upstream(w, &mut out, up, head_only, chunked, !trailers, &ctx).await;
            crate::http::proxy::fill_rest(w, up, head_only).await;
            crate::http::proxy::finish_body(w, &mut ctx, up);
            r
        }
        Body::Compressed(z) => {
            let r = write_compressed(w, &mut out, z, head_only, chunked, !trailers, &ctx).await;
            if let Some(up) = z.upstream_mut() {
                crate::http::proxy::fill_rest(w, up, head_only).await;
                crate::http::proxy::finish_body(w, &mut ctx, up);
            }
            r
        }
        _ if trailers => {
            // The whole body as one chunk (a file still by sendfile).
            let n = resp.body.len();
            if n > 0 {
                push_chunk_size(out.wbuf, n as usize);
            }
            let r = write_body(&mut out, &resp, false, conf, true).await;
            if n > 0 {
                out.wbuf.extend_from_slice(b"\r\n");
            }
            r
        }
        _ => write_body(&mut out, &resp, head_only, conf, more_pipelined && keep_alive).await,
    };
    let (sent_ok, body_bytes) = if trailers && sent_ok {
        crate::http::filter::headers::origin_trailers(&mut ctx, &mut resp.body);
        crate::http::filter::headers::trailers(&mut ctx, &resp);
        crate::http::filter::headers::chunked_end(&ctx, out.wbuf);
        (flush(&mut out, conf.send_timeout, more_pipelined && keep_alive).await, body_bytes)
    } else {
        (sent_ok, body_bytes)
    };
    let total = if sent_ok { header_bytes + body_bytes } else { 0 };
    crate::worker::unwind::test_hook(&ctx.req, crate::worker::unwind::Stage::After);
    log_request(w, &ctx, &resp, total, if sent_ok { body_bytes } else { 0 }, started, sent_ok);
    crate::http::handler::post_action::run(w, &ctx).await;
    // proxy_cache_background_update: the stale answer is out; refresh now.
    if ctx.cache.is_some() {
        drop(resp);
        crate::http::cache::serve::refresh_after(w, &mut ctx).await;
    }
    drop(ctx);
    super::codec::recycle(&mut head);
    if !sent_ok || !keep_alive {
        return Next::Close;
    }
    *keepalive = conf.keepalive_timeout;
    if conf.tcp_nodelay && !*nodelay {
        stream.set_nodelay();
        *nodelay = true;
    }
    // Consume this request's bytes; then its body, if any.
    if let Some((used, extra)) = body_taken {
        c.rbuf.drain(..head_len + used);
        c.rbuf.extend_from_slice(&extra);
        return Next::KeepAlive;
    }
    c.rbuf.drain(..head_len);
    match head.body {
        BodyKind::None => Next::KeepAlive,
        kind => {
            let max = conf.client_max_body_size;
            match body::discard(c, kind, max, conf.client_body_timeout).await {
                Ok(()) => Next::KeepAlive,
                Err(e) => {
                    log_to!(
                        conf.error_log,
                        Level::Info,
                        "*{} {} while discarding request body, client: {}",
                        c.info.id,
                        e,
                        c.info.peer.ip()
                    );
                    Next::Close
                }
            }
        }
    }
}

/// `http://host/path` (absolute-form): the host wins over the Host header.
/// The origin part starts with `/`, or with `?` or `#` after an empty path.
pub(crate) fn split_absolute(target: &[u8]) -> (Option<&[u8]>, &[u8]) {
    let rest = if target.len() > 7 && target[..7].eq_ignore_ascii_case(b"http://") {
        &target[7..]
    } else if target.len() > 8 && target[..8].eq_ignore_ascii_case(b"https://") {
        &target[8..]
    } else {
        return (None, target);
    };
    // The authority ends at the path, or at the query or fragment of an
    // empty path (`http://host?args`, which nginx serves as `/?args`).
    match rest.iter().position(|&b| b == b'/' || b == b'?' || b == b'#') {
        Some(i) => (Some(&rest[..i]), &rest[i..]),
        None => (Some(rest), b"/"),
    }
}

/// Writes the access log line(s) of a request (HTTP/1 and HTTP/2).
pub fn log_request(
    w: &crate::worker::WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    resp: &Response<'_>,
    bytes_sent: u64,
    body_bytes_sent: u64,
    started: Instant,
    complete: bool,
) {
    // sluice_status: every request's class and time (three relaxed adds
    // into this worker's counters); a status_zone and a cache lookup cost
    // one branch each when absent. The clock is read afresh: `mono()` is
    // read once per task poll, and a request answered within the poll it
    // started in (most local ones) would take 0 µs by it; the sums and
    // percentiles of fast requests need the real time, and the next
    // request of the connection starts from this reading.
    crate::req_debug!(ctx, "http finalize request: {}, \"{}\"", resp.status, String::from_utf8_lossy(&ctx.req.path));
    crate::clock::mono_stale();
    let took = crate::clock::since(started);
    let ms = took.as_millis() as u64;
    w.metrics.finished(resp.status, took);
    if let Some(zone) = ctx.conf.metrics.zone {
        let received = ctx.request_length();
        w.metrics.record(zone, resp.status, received, bytes_sent, took);
    }
    if let Some(status) = ctx.cache_status {
        w.metrics.cache_lookup(ctx.cache_zone, status);
    }
    let Some(refs) = &ctx.conf.access_log else { return };
    if refs.is_empty() {
        return;
    }
    let vars = Vars {
        ctx,
        resp: Some(resp),
        bytes_sent,
        body_bytes_sent,
        request_time_ms: ms,
        request_length: ctx.request_length(),
        complete,
        in_flight: false,
    };
    w.logs.borrow_mut().log(refs, &vars);
}

/// Answers a request that could not be parsed: nginx's error page with
/// Connection: close, an info line in the error log, an access log line.
async fn reject(c: &mut Conn, g: &ListenGroup, w: &crate::worker::WorkerCtx, e: HeadError, started: Instant) {
    c.info.requests += 1;
    log_refused(g, &c.info, &c.rbuf, &e);
    send_error(c, g, w, e.status(), started).await;
}

/// The error-log line of a refused head, as nginx's (info level).
fn log_refused(g: &ListenGroup, info: &ConnInfo, rbuf: &[u8], e: &HeadError) {
    let line_end = request_line_end(rbuf, g);
    log_to!(
        g.default_server.conf.error_log,
        Level::Info,
        "*{} {}, client: {}, server: {}, request: \"{}\"",
        info.id,
        e.reason(),
        info.peer.ip(),
        g.default_server.name,
        String::from_utf8_lossy(&rbuf[..line_end])
    );
}

/// Where the request line in `rbuf` ends (before its CR LF), bounded by
/// the line limit.
fn request_line_end(rbuf: &[u8], g: &ListenGroup) -> usize {
    let line_end = memchr::memchr(b'\n', rbuf).unwrap_or(rbuf.len()).min(limits(g).line_max);
    if line_end > 0 && rbuf.get(line_end - 1) == Some(&b'\r') { line_end - 1 } else { line_end }
}

/// The head of a request that never parsed: its request line as far as it
/// arrived, for the access log.
fn error_head(rbuf: &[u8], g: &ListenGroup) -> Head {
    Head {
        method: Method::Other,
        method_r: 0..0,
        target: 0..0,
        version: Version::Http11,
        line: 0..request_line_end(rbuf, g),
        head_len: rbuf.len(),
        headers: Vec::new(),
        host: None,
        body: BodyKind::None,
        keep_alive: false,
        expect_continue: false,
    }
}

/// Writes the access-log line of a request that ends with `status` and no
/// response (a head cut by client_header_timeout).
fn log_unanswered(c: &mut Conn, g: &ListenGroup, w: &crate::worker::WorkerCtx, status: u16, started: Instant) {
    let Conn { rbuf, info, .. } = &mut *c;
    let head = error_head(rbuf, g);
    let ctx = ReqCtx::new(g, &g.default_server, error_request(rbuf, &head), info);
    let mut resp = crate::http::handler::error(&ctx, status);
    resp.close = true;
    log_request(w, &ctx, &resp, 0, 0, started, false);
}

/// The request an unparsed head is logged as: its request line (as far as
/// it came) on the default server, at `/`.
fn error_request<'a>(rbuf: &'a [u8], head: &'a Head) -> Request<'a> {
    // No URI was parsed: `$uri` is empty, as nginx logs it.
    Request { buf: rbuf, head, method: Method::Other, path: Cow::Borrowed(b""), args: None, host: Cow::Borrowed(b"") }
}

/// Answers with nginx's error page for `status` and Connection: close, and
/// writes its access log line; the connection then closes by lingering.
pub(super) async fn send_error(
    c: &mut Conn,
    g: &ListenGroup,
    w: &crate::worker::WorkerCtx,
    status: u16,
    started: Instant,
) {
    c.linger = true;
    c.answered = true;
    let Conn { stream, rbuf, wbuf, info, .. } = &mut *c;
    let head = error_head(rbuf, g);
    let server = &g.default_server;
    let ctx = ReqCtx::new(g, server, error_request(rbuf, &head), info);
    let mut resp = crate::http::handler::error(&ctx, status);
    resp.close = true;
    // nginx's header filter runs on these too: the server's
    // `add_header ... always` fields are sent.
    crate::http::filter::headers::apply(&ctx, &mut resp);
    let opts =
        HeadOpts { keep_alive: false, chunked: false, keepalive_header: None, server_tokens: ctx.conf.server_tokens };
    writer::write_head(&resp, &opts, wbuf);
    let hl = wbuf.len() as u64;
    let body_len = resp.body.len();
    if let Body::Owned(b) = &resp.body {
        wbuf.extend_from_slice(b);
    }
    let ok = stream.write_all_flags(wbuf, ctx.conf.send_timeout, true).await.is_ok();
    wbuf.clear();
    log_request(w, &ctx, &resp, if ok { hl + body_len } else { 0 }, if ok { body_len } else { 0 }, started, ok);
}

/// `keepalive_disable`: an old MSIE's POST, or Safari on macOS, ends the
/// connection (nginx's workarounds for their broken keep-alive).
fn keepalive_disabled(bits: u8, method: Method, ua: Option<&[u8]>) -> bool {
    use crate::config::set_core::{KEEPALIVE_MSIE6, KEEPALIVE_SAFARI};
    let Some(ua) = ua.filter(|_| bits != 0) else { return false };
    (bits & KEEPALIVE_MSIE6 != 0 && method == Method::Post && crate::http::user_agent::is_msie6(ua))
        || (bits & KEEPALIVE_SAFARI != 0 && crate::http::user_agent::is_safari(ua))
}
