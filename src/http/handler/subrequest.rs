//! Subrequests whose answer is wanted (nginx's `ngx_http_subrequest` as
//! the SSI and addition filters use it): a GET of a URI with the client's
//! headers, run through the same pipeline as any request (locations,
//! rewrites, static files, the proxy and its cache, the header filters but
//! compression), and its body gathered for the filter that asked.
//!
//! As `auth_request`'s, the subrequest is internal (it may reach
//! `internal` locations), skips the limit and access phases, and is
//! answered in full, without conditionals or ranges. nginx bounds the
//! nesting of subrequests at 50 levels ("subrequests cycle").

use std::borrow::Cow;

use crate::http::handler::ctx::ReqCtx;
use crate::http::request::{Method, Request};
use crate::http::response::Body;
use crate::log::error::Level;
use crate::log_req;
use crate::worker::WorkerCtx;

/// nginx's NGX_HTTP_MAX_SUBREQUESTS: how deep subrequests may nest.
pub const MAX_DEPTH: u8 = 50;

/// What a subrequest answered.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why there is no answer.
#[derive(Debug)]
pub enum Failed {
    /// Nested too deep (logged).
    Cycle,
    /// The body could not be read to its end (logged).
    Body,
    /// An in-memory answer longer than `subrequest_output_buffer_size`
    /// (logged): nginx ends the main request too, without a response.
    TooBig,
}

/// nginx's ngx_http_parse_unsafe_uri for a subrequest's URI: the
/// arguments split off at `?`, `%XX` decoded in the path (an encoded `?`
/// is part of it), and a path with `..` segments or a NUL refused.
pub fn parse_uri(uri: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let (path, args) = match uri.iter().position(|&b| b == b'?') {
        Some(q) => (&uri[..q], Some(uri[q + 1..].to_vec())),
        None => (uri, None),
    };
    if path.first() != Some(&b'/') {
        return None;
    }
    let unsafe_path = |p: &[u8]| p.contains(&0) || p.split(|&b| b == b'/').any(|seg| seg == b"..");
    if unsafe_path(path) || unsafe_path(&crate::http::uri::percent_decode(path)) {
        return None;
    }
    let decoded = crate::http::uri::normalize_path(path).ok()?.into_owned();
    Some((decoded, args))
}

/// A subrequest's decoded path and its arguments.
pub type Target = (Vec<u8>, Option<Vec<u8>>);

/// [`parse_uri`] of a URI the caller owns: one already in its final form
/// (no arguments, nothing to decode or resolve: most includes) is kept,
/// not copied. Err(uri) for an unsafe one.
pub fn parse_uri_owned(uri: Vec<u8>) -> Result<Target, Vec<u8>> {
    // A path normalization leaves as it is has no `%`, NUL, `.` or `..`
    // segment: with no `?` either, nothing is split, decoded or refused.
    let final_form = !uri.contains(&b'?') && matches!(crate::http::uri::normalize_path(&uri), Ok(Cow::Borrowed(_)));
    if final_form {
        return Ok((uri, None));
    }
    parse_uri(&uri).ok_or(uri)
}

/// Runs a GET of `path` (decoded) with `args` as a subrequest of `parent`
/// and gathers its answer; `in_memory`: at most the subrequest location's
/// `subrequest_output_buffer_size` (more fails it), as nginx's
/// NGX_HTTP_SUBREQUEST_IN_MEMORY.
pub async fn fetch(
    w: &WorkerCtx,
    parent: &ReqCtx<'_, '_>,
    path: Vec<u8>,
    args: Option<Vec<u8>>,
    in_memory: bool,
    ssi: Option<std::rc::Rc<crate::http::ssi::Shared>>,
) -> Result<Answer, Failed> {
    match start(w, parent, path, args, in_memory, ssi) {
        Started::Done(r) => r,
        Started::Waiting(rest) => finish(w, rest).await,
    }
}

/// How far [`start`] got.
pub enum Started<'c, 'a> {
    /// The answer (or failure), with nothing awaited: a file, a page in
    /// memory, a return.
    Done(Result<Answer, Failed>),
    /// The subrequest waits (a delay, an origin, a filtered body): what
    /// [`finish`] goes on with (boxed: a request's state is large, and
    /// only this path needs it past `start`).
    Waiting(Box<Rest<'c, 'a>>),
}

/// A started subrequest that must be awaited.
pub struct Rest<'c, 'a> {
    sub: ReqCtx<'c, 'a>,
    /// The response still to settle, or (once settled) its status and the
    /// body still to gather.
    resp: crate::http::response::Response<'c>,
    settled: bool,
    in_memory: bool,
}

/// [`fetch`] as far as it goes without waiting: most includes (files)
/// are answered here, with no future to build, move and poll.
pub fn start<'c, 'a>(
    w: &WorkerCtx,
    parent: &ReqCtx<'c, 'a>,
    path: Vec<u8>,
    args: Option<Vec<u8>>,
    in_memory: bool,
    ssi: Option<std::rc::Rc<crate::http::ssi::Shared>>,
) -> Started<'c, 'a> {
    if parent.sub_depth >= MAX_DEPTH {
        log_req!(parent, Level::Error, "subrequests cycle while processing \"{}\"", String::from_utf8_lossy(&path));
        return Started::Done(Err(Failed::Cycle));
    }
    let mut sub = child(parent, Method::Get, path, args);
    sub.body_only = true;
    sub.ssi = ssi.or_else(|| parent.ssi.clone());
    match &sub.ssi {
        // Made when first read, in the page's store: the SSI filter gives
        // it to the page's own request once its subrequests are done
        // (`ssi::run`).
        Some(shared) => {
            if let Some(id) = sub.request_id.get() {
                shared.request_id.set(Some(id));
            }
        }
        None => sub.request_id.set(Some(parent.request_id())),
    }
    let resp = crate::http::handler::route(&mut sub, None);
    let resp = crate::http::handler::finish_subrequest(&mut sub, resp);
    let mut resp = resp;
    if crate::http::handler::suspended(&sub) || matches!(resp.body, Body::Proxy) {
        return Started::Waiting(Box::new(Rest { sub, resp, settled: false, in_memory }));
    }
    match settled(w, &sub, &mut resp, in_memory) {
        Some(r) => Started::Done(r),
        None => Started::Waiting(Box::new(Rest { sub, resp, settled: true, in_memory })),
    }
}

/// A settled response's answer, its body gathered now; None for a body
/// that must be awaited (left in `resp`). The request and response are
/// borrowed: moving them (large structures) cost more than the rest for
/// an included file.
fn settled(
    w: &WorkerCtx,
    sub: &ReqCtx<'_, '_>,
    resp: &mut crate::http::response::Response<'_>,
    in_memory: bool,
) -> Option<Result<Answer, Failed>> {
    let limit = limit(sub, in_memory);
    if let Some(n) = resp.body.known_len().filter(|&n| n > limit as u64) {
        // nginx's postpone filter judges a declared length before reading.
        log_req!(sub, Level::Error, "too big subrequest response: {} while sending to client", n);
        if let Body::Upstream(up) = &mut resp.body {
            crate::http::proxy::release_as(w, up, true);
        }
        return Some(Err(Failed::TooBig));
    }
    let status = resp.status;
    let mut out = Vec::new();
    // Most answers (files, in-memory pages) are read without waiting.
    let body = std::mem::replace(&mut resp.body, Body::Empty);
    match gather_now(body, &mut out, limit) {
        Ok(read) => Some(answer(sub, status, read, out)),
        Err(body) => {
            resp.body = body;
            None
        }
    }
}

/// How much of an answer may be gathered (`in_memory`: the location's
/// `subrequest_output_buffer_size`).
fn limit(sub: &ReqCtx<'_, '_>, in_memory: bool) -> usize {
    if in_memory { sub.conf.subrequest_output_buffer_size } else { usize::MAX }
}

/// The answer of a gathered body, or its failure (logged).
fn answer(
    sub: &ReqCtx<'_, '_>,
    status: u16,
    read: Result<(), Option<String>>,
    body: Vec<u8>,
) -> Result<Answer, Failed> {
    match read {
        Ok(()) => Ok(Answer { status, body }),
        Err(e) => {
            let too_big = e.as_deref() == Some(TOO_BIG);
            if let Some(msg) = e {
                log_req!(sub, Level::Error, "{}", msg);
            }
            Err(if too_big { Failed::TooBig } else { Failed::Body })
        }
    }
}

/// The rest of a [`start`]ed subrequest: its delayed phase and origin,
/// then its body.
pub async fn finish(w: &WorkerCtx, rest: Box<Rest<'_, '_>>) -> Result<Answer, Failed> {
    let Rest { mut sub, resp, settled: done, in_memory } = *rest;
    let mut resp = resp;
    if !done {
        resp = settle_rest(w, &mut sub, resp).await;
        if let Some(r) = settled(w, &sub, &mut resp, in_memory) {
            return r;
        }
    }
    let limit = limit(&sub, in_memory);
    let status = resp.status;
    let mut out = Vec::new();
    let read = Box::pin(gather_waiting(w, &sub, resp.body, &mut out, limit)).await;
    answer(&sub, status, read, out)
}

/// A request inside `parent` (internal, past the limit and access phases)
/// for `path` and `args`, with the parent's head and connection.
pub(crate) fn child<'c, 'a>(
    parent: &ReqCtx<'c, 'a>,
    method: Method,
    path: Vec<u8>,
    args: Option<Vec<u8>>,
) -> ReqCtx<'c, 'a> {
    let req = Request {
        buf: parent.req.buf,
        method,
        head: parent.req.head,
        path: Cow::Owned(path),
        args: args.map(Cow::Owned),
        host: parent.req.host.clone(),
    };
    let mut sub = ReqCtx::new(parent.group, parent.server, req, parent.conn);
    sub.subrequest = true;
    sub.realip = parent.realip;
    sub.sub_depth = parent.sub_depth + 1;
    // An internal request: `internal` locations answer it.
    sub.redirects = 1;
    // nginx's subrequests share the main request's `$request_id`: the
    // caller makes one if the parent has none yet ([`start`] leaves it to
    // an SSI page's first reader).
    sub.request_id.set(parent.request_id.get());
    sub
}

/// The routed response of a child request, after its filters, a delayed
/// phase and the origin's answer.
pub(crate) async fn settle<'c>(
    w: &WorkerCtx,
    sub: &mut ReqCtx<'c, '_>,
    resp: crate::http::response::Response<'c>,
) -> crate::http::response::Response<'c> {
    let resp = crate::http::handler::finish_subrequest(sub, resp);
    settle_rest(w, sub, resp).await
}

/// [`settle`] past the filters.
async fn settle_rest<'c>(
    w: &WorkerCtx,
    sub: &mut ReqCtx<'c, '_>,
    mut resp: crate::http::response::Response<'c>,
) -> crate::http::response::Response<'c> {
    if crate::http::handler::suspended(sub) {
        resp = Box::pin(crate::http::handler::complete(w, sub, resp)).await;
    }
    if matches!(resp.body, Body::Proxy) {
        let mut client = crate::http::proxy::request_body::Client::detached();
        resp = Box::pin(crate::http::proxy::respond(w, sub, &mut client)).await;
    }
    resp
}

/// nginx's words for an answer past the in-memory limit.
const TOO_BIG: &str = "too big subrequest response while sending to client";

/// Reads a response body into `out`; Err(Some(message)) for a failure to
/// log, Err(None) for one logged already.
pub(crate) async fn gather(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    body: Body,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Option<String>> {
    match gather_now(body, out, limit) {
        Ok(r) => r,
        Err(body) => gather_waiting(w, ctx, body, out, limit).await,
    }
}

/// [`gather`] for the bodies read without waiting (in memory, files);
/// Err(body) for one that must be awaited (an origin's, a filtered one).
fn gather_now(body: Body, out: &mut Vec<u8>, limit: usize) -> Result<Result<(), Option<String>>, Body> {
    let read = match body {
        Body::Empty | Body::Proxy => Ok(()),
        Body::Static(b) => {
            out.extend_from_slice(b);
            Ok(())
        }
        // The answer's own buffer becomes the gathered one: no copy.
        Body::Owned(b) if out.is_empty() => {
            *out = b;
            Ok(())
        }
        Body::Owned(b) => {
            out.extend_from_slice(&b);
            Ok(())
        }
        Body::Shared(b) => {
            out.extend_from_slice(&b);
            Ok(())
        }
        Body::File { file, offset, len } => read_file(&file, offset, len, out, limit),
        Body::Multipart { file, parts, trailer } => read_multipart(&file, parts, &trailer, out, limit),
        body => return Err(body),
    };
    Ok(read.and_then(|()| if out.len() > limit { Err(too_big()) } else { Ok(()) }))
}

fn too_big() -> Option<String> {
    Some(TOO_BIG.to_string())
}

fn read_file(
    file: &crate::http::handler::open_cache::OpenFile,
    offset: u64,
    len: u64,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Option<String>> {
    if len as usize > limit {
        return Err(too_big());
    }
    match file.cached_bytes(offset, len) {
        Some(b) => out.extend_from_slice(b),
        None => {
            let Some(f) = file.file.as_ref() else { return Err(Some("pread() failed".into())) };
            crate::http::connection::io::pread_into(f, offset, len, out)
                .map_err(|e| Some(format!("pread() failed ({})", crate::process::signal::os_error(&e))))?;
        }
    }
    Ok(())
}

/// A spliced file (the flv module's header and the file past `start`):
/// its bytes and ranges in order.
fn read_multipart(
    file: &crate::http::handler::open_cache::OpenFile,
    parts: Vec<(Vec<u8>, crate::http::range::ByteRange)>,
    trailer: &[u8],
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Option<String>> {
    let total = parts.iter().map(|(h, r)| h.len() as u64 + r.end - r.start + 1).sum::<u64>();
    if total + trailer.len() as u64 > limit as u64 {
        return Err(too_big());
    }
    let Some(f) = file.file.as_ref() else { return Err(Some("pread() failed".into())) };
    for (h, r) in parts {
        out.extend_from_slice(&h);
        crate::http::connection::io::pread_into(f, r.start, r.end - r.start + 1, out)
            .map_err(|e| Some(format!("pread() failed ({})", crate::process::signal::os_error(&e))))?;
    }
    out.extend_from_slice(trailer);
    Ok(())
}

/// [`gather`] for the bodies that must be awaited.
async fn gather_waiting(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    body: Body,
    out: &mut Vec<u8>,
    limit: usize,
) -> Result<(), Option<String>> {
    match body {
        Body::Upstream(mut up) => loop {
            match up.next(w, out, 64 * 1024).await {
                Ok(true) if out.len() > limit => {
                    crate::http::proxy::release_as(w, &mut up, true);
                    return Err(too_big());
                }
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    crate::http::proxy::log_body_error(ctx, &e);
                    crate::http::proxy::release_as(w, &mut up, true);
                    return Err(None);
                }
            }
        },
        Body::Compressed(mut z) => loop {
            match z.next(w, ctx, out, 64 * 1024).await {
                Ok(true) if out.len() > limit => {
                    if let Some(up) = z.upstream_mut() {
                        crate::http::proxy::release_as(w, up, true);
                    }
                    return Err(too_big());
                }
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => {
                    crate::http::filter::compress::stream::log_error(ctx, &e);
                    if let Some(up) = z.upstream_mut() {
                        crate::http::proxy::release_as(w, up, true);
                    }
                    return Err(None);
                }
            }
        },
        // The others are read without waiting.
        other => return gather_now(other, out, limit).unwrap_or(Ok(())),
    }
    if out.len() > limit {
        return Err(too_big());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_parsed_as_nginxs_unsafe_uri() {
        assert_eq!(parse_uri(b"/tes%741.html?test=test"), Some((b"/test1.html".to_vec(), Some(b"test=test".to_vec()))));
        assert_eq!(parse_uri(b"/unescape.html%3f"), Some((b"/unescape.html?".to_vec(), None)));
        assert_eq!(parse_uri(b"/a/../../etc/passwd"), None);
        assert_eq!(parse_uri(b"/a/%2e%2e/%2e%2e/b"), None);
        assert_eq!(parse_uri(b"relative"), None);
        for uri in [&b"/a/b.html"[..], b"/tes%741.html?test=test", b"/a//b", b"/a/./b", b"/a/../../x", b"rel"] {
            assert_eq!(parse_uri_owned(uri.to_vec()).ok(), parse_uri(uri), "{}", String::from_utf8_lossy(uri));
        }
    }
}
