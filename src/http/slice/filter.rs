//! The slice module's header filter (`apply`, on the client's request)
//! and the pieces after the first (`Slicer`, a stage of the streaming
//! body that `Compressed::next` asks for the next piece when one ends).

use std::borrow::Cow;

use super::{ContentRange, parse_content_range};
use crate::http::handler::ctx::ReqCtx;
use crate::http::range::{self, RangeResult};
use crate::http::request::Request;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;
use crate::worker::WorkerCtx;

/// The rest of a sliced response: which pieces are still to come and the
/// part of the representation the client gets.
pub struct Slicer {
    size: u64,
    /// The next piece's first byte (nginx's `ctx->start`).
    next: u64,
    /// No piece starts at or after this (nginx's `ctx->end`).
    end: u64,
    /// The bytes the client gets, `[from, to)` of the representation.
    want: (u64, u64),
    /// The first piece's ETag, which every other piece must carry.
    etag: Option<Vec<u8>>,
    /// Nothing has gone out yet (see [`Slicer::holds`]).
    holding: bool,
}

/// The piece's validators and range, or why it is refused (logged as
/// nginx does).
fn check(
    size: u64,
    start: u64,
    status: u16,
    resp: &Response<'_>,
    etag: Option<&[u8]>,
) -> Result<(ContentRange, Option<Vec<u8>>), String> {
    if status != 206 {
        return Err(format!("unexpected status code {status} in slice response"));
    }
    let got = resp.etag.clone().or_else(|| resp.header("etag").map(<[u8]>::to_vec));
    if let Some(want) = etag
        && got.as_deref() != Some(want)
    {
        return Err("etag mismatch in slice response".into());
    }
    let cr = resp
        .header("content-range")
        .or(resp.content_range.as_deref())
        .and_then(parse_content_range)
        .ok_or_else(|| "invalid range in slice response".to_string())?;
    let Some(complete) = cr.complete else { return Err("no complete length in slice response".into()) };
    let end = start.saturating_add(size).min(complete);
    if cr.start != start || cr.end != end {
        return Err(format!("unexpected range in slice response: {}-{}", cr.start, cr.end));
    }
    Ok((cr, got))
}

/// The header filter for the client's request (nginx's slice header
/// filter, then the not-modified and range filters on what it made): a
/// 206 with the piece `$slice_range` asked for becomes the whole
/// representation or the client's range of it, its later pieces fetched
/// as the body goes out. Some(response) replaces the origin's: a bad
/// piece closes the connection (nginx's NGX_ERROR), a 412 or a 416.
pub fn apply<'c>(ctx: &mut ReqCtx<'c, '_>, resp: &mut Response<'c>) -> Option<Response<'c>> {
    let size = ctx.conf.slice.size;
    if ctx.subrequest || size == 0 {
        return None;
    }
    let start = ctx.slice.get()?;
    if resp.status != 206 {
        // Not sliced after all (an error, or an origin that ignores
        // ranges): passed on as it is.
        ctx.slice.set(None);
        return None;
    }
    let (cr, etag) = match check(size, start, resp.status, resp, None) {
        Ok(v) => v,
        Err(why) => {
            log_req!(ctx, Level::Error, "{}", why);
            return Some(Response::new(444));
        }
    };
    let complete = cr.complete.unwrap_or(0);
    resp.status = 200;
    resp.content_range = None;
    resp.headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-range") && !n.eq_ignore_ascii_case("accept-ranges"));
    resp.accept_ranges = true;
    let modified =
        resp.last_modified.or_else(|| resp.header("last-modified").and_then(crate::http::date::parse_http_date));
    match crate::http::handler::static_file::precondition(ctx, etag.as_deref(), modified) {
        Some(304) => {
            resp.status = 304;
            resp.content_type = None;
            resp.accept_ranges = false;
            return None;
        }
        Some(status) => return Some(crate::http::handler::finish_error(ctx, status)),
        None => {}
    }
    let mut next = cr.end;
    let mut want = (cr.start, complete);
    if let Some(h) = ctx.req.header("range")
        && crate::http::handler::static_file::if_range_ok(ctx, etag.as_deref(), modified)
    {
        match range::parse_range(h, complete, Some(1)) {
            RangeResult::Ignore => {}
            RangeResult::Unsatisfiable => {
                let mut e = crate::http::handler::finish_error(ctx, 416);
                let mut cr = Vec::with_capacity(24);
                range::unsatisfied_range(complete, &mut cr);
                e.content_range = Some(cr);
                return Some(e);
            }
            RangeResult::Satisfiable(ranges) => {
                let br = ranges[0];
                resp.status = 206;
                resp.accept_ranges = false;
                let mut v = Vec::with_capacity(40);
                range::content_range(br, complete, &mut v);
                resp.content_range = Some(v);
                // A range that starts past the first piece (its start was
                // not known: If-Range) skips the pieces before it.
                if next + size <= br.start {
                    next = size * (br.start / size);
                }
                want = (br.start, br.end + 1);
            }
        }
    }
    // The first piece holds `[cr.start, cr.end)`; the client's bytes from
    // it are cut out, and the pieces up to the end of `want` follow.
    let first = std::mem::replace(&mut resp.body, Body::Empty);
    let first = match narrow(first, cr, want) {
        Ok(b) => b,
        Err(_) => {
            log_req!(ctx, Level::Error, "slice of a response that cannot be cut");
            return Some(Response::new(444));
        }
    };
    let slicer = Slicer { size, next, end: want.1, want, etag, holding: true };
    let mut z = crate::http::filter::compress::stream::Compressed::slice(first, Box::new(slicer));
    z.declared_len = Some(want.1 - want.0);
    resp.body = Body::Compressed(Box::new(z));
    None
}

/// The part of a piece `[cr.start, cr.end)` inside `want`. An origin's
/// body keeps flowing whole into its cache entry (the window only cuts
/// what the client gets).
fn narrow(body: Body, cr: ContentRange, want: (u64, u64)) -> Result<Body, Body> {
    let from = want.0.clamp(cr.start, cr.end);
    let to = want.1.clamp(from, cr.end);
    let (skip, take) = (from - cr.start, to - from);
    Ok(match body {
        Body::Empty => Body::Empty,
        Body::Upstream(mut up) => {
            up.window = Some((skip, take));
            Body::Upstream(up)
        }
        Body::File { file, offset, len } => {
            let skip = skip.min(len);
            Body::File { file, offset: offset + skip, len: take.min(len - skip) }
        }
        Body::Shared(b) => {
            let s = (skip as usize).min(b.len());
            let e = (s + take as usize).min(b.len());
            Body::Shared(b.slice(s..e))
        }
        Body::Owned(b) => {
            let s = (skip as usize).min(b.len());
            let e = (s + take as usize).min(b.len());
            Body::Owned(b[s..e].to_vec())
        }
        Body::Static(b) => {
            let s = (skip as usize).min(b.len());
            let e = (s + take as usize).min(b.len());
            Body::Static(&b[s..e])
        }
        other => return Err(other),
    })
}

impl Slicer {
    /// Whether `pending` bytes of output are held back: as nginx's
    /// `postpone_output` (1460 bytes) does, the first bytes go out only
    /// once there are that many or the next piece was checked, so a
    /// response whose second piece is refused early sends nothing at all.
    pub fn holds(&mut self, pending: usize) -> bool {
        if self.holding && pending < 1460 {
            return true;
        }
        self.holding = false;
        false
    }

    /// The piece after `prev` (which has ended: an origin's body is read to
    /// its end first, for its cache entry and its connection), or None
    /// when the client's bytes are all out. Err: the piece was refused or
    /// failed (logged); the response is cut short.
    pub async fn next_body(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        prev: &mut Body,
    ) -> Result<Option<Body>, ()> {
        if let Body::Upstream(up) = prev {
            finish_piece(w, ctx, up).await?;
        }
        if self.next >= self.end {
            return Ok(None);
        }
        let start = self.next;
        let (cr, body) = fetch(w, ctx, start, self.size, self.etag.as_deref()).await?;
        self.next = cr.end;
        match narrow(body, cr, self.want) {
            Ok(b) => Ok(Some(b)),
            Err(b) => {
                log_req!(ctx, Level::Error, "slice of a response that cannot be cut");
                crate::http::proxy::drain(w, b).await;
                Err(())
            }
        }
    }
}

/// Reads what is left of a piece from its origin past the client's window
/// (into its cache entry), then gives the connection back.
async fn finish_piece(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    up: &mut crate::http::proxy::body::UpstreamBody,
) -> Result<(), ()> {
    let mut scratch = Vec::new();
    loop {
        scratch.clear();
        match up.next_raw(w, &mut scratch, 64 * 1024).await {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                crate::http::proxy::log_body_error(ctx, &e);
                crate::http::proxy::release_as(w, up, true);
                return Err(());
            }
        }
    }
    crate::http::proxy::release(w, up);
    Ok(())
}

/// A subrequest for the piece at `start` through the request's own
/// location (nginx's NGX_HTTP_SUBREQUEST_CLONE: same method, URI,
/// arguments, variables and location), answered by the proxy and its
/// cache with `$slice_range` naming the piece; its head checked.
async fn fetch(
    w: &WorkerCtx,
    parent: &ReqCtx<'_, '_>,
    start: u64,
    size: u64,
    etag: Option<&[u8]>,
) -> Result<(ContentRange, Body), ()> {
    if parent.sub_depth >= crate::http::handler::subrequest::MAX_DEPTH {
        log_req!(
            parent,
            Level::Error,
            "subrequests cycle while processing \"{}\"",
            String::from_utf8_lossy(&parent.req.path)
        );
        return Err(());
    }
    let req = Request {
        buf: parent.req.buf,
        method: parent.req.method,
        head: parent.req.head,
        path: Cow::Owned(parent.req.path.to_vec()),
        args: parent.req.args.as_ref().map(|a| Cow::Owned(a.to_vec())),
        host: parent.req.host.clone(),
    };
    let mut sub = ReqCtx::new(parent.group, parent.server, req, parent.conn);
    sub.conf = parent.conf;
    sub.subrequest = true;
    sub.realip = parent.realip;
    sub.sub_depth = parent.sub_depth + 1;
    sub.redirects = parent.redirects;
    sub.captures = parent.captures.clone();
    sub.named = parent.named.clone();
    *sub.vars.borrow_mut() = parent.vars.borrow().clone();
    sub.request_id.set(parent.request_id.get());
    sub.slice.set(Some(start));
    if !crate::http::proxy::has_handler(sub.conf) {
        log_req!(parent, Level::Error, "unexpected status code 500 in slice response");
        return Err(());
    }
    let mut client = crate::http::proxy::request_body::Client::detached();
    let mut resp = Box::pin(crate::http::proxy::respond(w, &mut sub, &mut client)).await;
    match check(size, start, resp.status, &resp, etag) {
        Ok((cr, _)) => Ok((cr, std::mem::replace(&mut resp.body, Body::Empty))),
        Err(why) => {
            log_req!(sub, Level::Error, "{}", why);
            let body = std::mem::replace(&mut resp.body, Body::Empty);
            crate::http::proxy::drain(w, body).await;
            Err(())
        }
    }
}
