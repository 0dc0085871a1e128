//! The end of an origin's response: the connection back to the pool and
//! the peer's slot released (`release`), a body the client did not take
//! read on into its cache entry (`fill_rest`), `$upstream_response_time`
//! taken at the origin's last byte (`finish_body`), and the two-way tunnel
//! after a 101 (`tunnel`).

use tokio::io::AsyncWriteExt;

use super::body::UpstreamBody;
use super::ms;
use crate::http::handler::ctx::ReqCtx;
use crate::worker::WorkerCtx;

thread_local! {
    /// Releases of origin bodies dropped by a panicking request, for
    /// `settle_orphans`: a `Drop` has no `WorkerCtx`, and may run while
    /// `w.proxy` is borrowed further up the unwinding stack.
    static ORPHANS: std::cell::RefCell<Vec<super::Release>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Keeps the release of a body abandoned by a panic (see `UpstreamBody`'s
/// `Drop`) until the worker settles it.
pub(super) fn orphan(r: super::Release) {
    let _ = ORPHANS.try_with(|o| o.borrow_mut().push(r));
}

/// Gives back the peer counts (and queue slots) of origin bodies a panic
/// abandoned, so `least_conn` and `max_conns` do not count them forever.
/// Their connections were dropped: the peer did not fail. Called after a
/// guard caught a panic and on the worker's tick (for spawned tasks).
pub fn settle_orphans(w: &WorkerCtx) {
    let list = ORPHANS.with(|o| std::mem::take(&mut *o.borrow_mut()));
    for r in list {
        let _ = w.proxy.borrow_mut().get(&r.upstream).done(&r.peer, false);
    }
}

/// Returns the origin connection to the pool (when its body was read to the
/// end and the origin allows reuse) and the peer's connection slot. A body
/// cut short counts as the peer failing, as nginx's "upstream prematurely
/// closed connection" does.
pub fn release(w: &WorkerCtx, body: &mut UpstreamBody) {
    release_as(w, body, !body.done);
}

/// `release`, saying whether the peer failed; the first call wins.
pub fn release_as(w: &WorkerCtx, body: &mut UpstreamBody, failed: bool) {
    if let Some(c) = body.cache.take()
        && body.done
        && !failed
    {
        c.commit();
    }
    // A store cut short is dropped, and its temporary file with it.
    if let Some(mut s) = body.store.take()
        && body.done
        && !failed
    {
        s.finish();
    }
    let Some(r) = body.release.take() else { return };
    if let Some(l) = &r.learned {
        l.commit();
    }
    // A body that came whole with the head ended when the head did: the
    // header time already stands for it.
    if body.read_since_head {
        body.response_ms = Some(ms(r.started));
    }
    let _ = w.proxy.borrow_mut().get(&r.upstream).done(&r.peer, failed);
    body.handed_off = r.slot.is_some() && r.upstream.queue.as_ref().is_some_and(|q| q.waiting() > 0);
    if body.done
        && r.keep_alive
        && body.buf.is_empty()
        && let Some(s) = body.stream.take()
    {
        w.proxy.borrow_mut().get(&r.upstream).put_idle(&r.upstream, &r.peer, s, r.uses);
    }
    body.stream = None;
    w.proxy.borrow_mut().give_buf(std::mem::take(&mut body.buf));
}

/// A body the client did not take whole (a HEAD converted to GET for the
/// cache, or a client that left) is still read to its end when it fills a
/// cache entry, as nginx completes a cacheable response; otherwise it is
/// left, and its connection closed.
pub async fn fill_rest(w: &WorkerCtx, body: &mut UpstreamBody, head_only: bool) {
    // A body that reached its end committed its entry and dropped it.
    if body.cache.is_none() {
        if head_only && !body.done {
            // A HEAD the cache turned into GET, whose answer is not stored:
            // the peer did nothing wrong; its connection just is not reused.
            release_as(w, body, false);
        }
        return;
    }
    let mut scratch = Vec::with_capacity(64 * 1024);
    loop {
        scratch.clear();
        match body.next_raw(w, &mut scratch, 64 * 1024).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                body.cache = None;
                return;
            }
        }
    }
}

/// After the client's response: the origin connection released if that
/// has not happened yet, and `$upstream_response_time` taken as of the
/// release (the origin's last byte), as nginx measures it.
pub fn finish_body(w: &WorkerCtx, ctx: &mut ReqCtx<'_, '_>, body: &mut UpstreamBody) {
    release(w, body);
    if let super::response_head::Framing::Memcached(v) = &body.framing
        && v.invalid
    {
        super::log_body_error(ctx, &super::body::BodyError::Protocol("memcached sent invalid trailer".into()));
    }
    if let Some(t) = body.response_ms.take()
        && let Some(last) = ctx.upstream.response_ms.last_mut()
    {
        *last = Some(t);
    }
    if let Some(last) = ctx.upstream.response_len.last_mut() {
        *last = body.raw_len;
    }
    if let Some(last) = ctx.upstream.bytes_received.last_mut() {
        *last += body.raw_len;
    }
}

/// Copies both ways between the client and the origin after a 101, until
/// either side closes, or nothing moves for proxy_read_timeout (as nginx
/// applies it to upgraded connections). Returns the bytes it wrote to the
/// client, for the access log.
pub async fn tunnel(client: &mut crate::http::connection::sock::Sock, early: &[u8], up: &mut UpstreamBody) -> u64 {
    use tokio::io::AsyncReadExt;
    let Some(mut origin) = up.stream.take() else { return 0 };
    let Some(client) = client.as_io() else { return 0 };
    // Bytes that came along with the heads belong to the other side.
    if !early.is_empty() && origin.write_all(early).await.is_err() {
        return 0;
    }
    let mut to_client = 0u64;
    if !up.buf.is_empty() {
        if client.write_all(&up.buf).await.is_err() {
            return 0;
        }
        to_client = up.buf.len() as u64;
        up.buf.clear();
    }
    let idle = up.read_timeout;
    let (mut a, mut b) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    loop {
        let step = crate::clock::timeout(idle, async {
            tokio::select! {
                r = client.read(&mut a) => match r {
                    Ok(0) | Err(_) => false,
                    Ok(n) => origin.write_all(&a[..n]).await.is_ok(),
                },
                r = origin.read(&mut b) => match r {
                    Ok(0) | Err(_) => false,
                    Ok(n) => {
                        let ok = client.write_all(&b[..n]).await.is_ok();
                        to_client += if ok { n as u64 } else { 0 };
                        ok
                    }
                },
            }
        });
        if !matches!(step.await, Ok(true)) {
            let _ = origin.shutdown().await;
            let _ = client.shutdown().await;
            return to_client;
        }
    }
}

/// A response nobody receives (a subrequest's, a mirror's): an origin's
/// body is read to its end, so its connection and slot go back as after
/// any response.
pub async fn drain(w: &WorkerCtx, mut body: crate::http::response::Body) {
    let up = match &mut body {
        crate::http::response::Body::Upstream(u) => &mut **u,
        crate::http::response::Body::Compressed(z) => match z.upstream_mut() {
            Some(u) => u,
            None => return,
        },
        _ => return,
    };
    let mut sink = Vec::new();
    loop {
        sink.clear();
        match up.next(w, &mut sink, 64 * 1024).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => {
                release_as(w, up, true);
                return;
            }
        }
    }
}
