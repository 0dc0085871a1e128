//! HTTP/1.x towards the origin: the request head sluice sends (the
//! response head it reads is [`super::response_head`]).

use super::request_body::SendFraming;
use crate::config::proxy::{ProxyConf, ProxyPass};
use crate::http::cache::serve::ReqCache;
use crate::http::handler::ctx::{ReqCtx, Vars, push_u64};
use crate::http::request::Method;

/// Client headers nginx never passes on unless set with proxy_set_header
/// (hop-by-hop ones and the framing sluice redoes).
const NOT_PASSED: &[&str] =
    &["host", "connection", "content-length", "transfer-encoding", "te", "keep-alive", "expect", "upgrade"];

/// The URI path as nginx's proxy sends it: escaped (NGX_ESCAPE_URI, so a
/// literal `%` of a rewritten URI goes as `%25`) once the request was
/// redirected or rewritten or when the client's URI had escapes, else as
/// it is.
fn push_path(out: &mut Vec<u8>, ctx: &ReqCtx<'_, '_>, path: &[u8]) {
    let (raw, _) = crate::http::uri::split_target(ctx.req.target());
    if ctx.redirects > 0 || !ctx.unparsed_uri_valid || raw.contains(&b'%') {
        crate::http::uri::escape_uri(path, out);
    } else {
        out.extend_from_slice(path);
    }
}

/// `http://host/path` (absolute-form) as `/path`.
fn origin_form(t: &[u8]) -> &[u8] {
    let rest = if t.len() > 7 && t[..7].eq_ignore_ascii_case(b"http://") {
        &t[7..]
    } else if t.len() > 8 && t[..8].eq_ignore_ascii_case(b"https://") {
        &t[8..]
    } else {
        return t;
    };
    match rest.iter().position(|&b| b == b'/') {
        Some(i) => &rest[i..],
        None => b"/",
    }
}

/// The target sent upstream, for error-log lines.
pub fn target_for_log(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, out: &mut Vec<u8>) {
    target(ctx, pass, out);
}

/// The request line's target, by nginx's rules: without a URI part in
/// `proxy_pass` the client's URI goes unchanged (or the rewritten one after
/// an internal redirect or a rewrite); with one, it replaces the matched
/// location prefix, unless `rewrite ... break` moved the URI out of the
/// location: then the whole new URI goes.
fn target(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, out: &mut Vec<u8>) {
    let req = &ctx.req;
    match &pass.uri {
        None if ctx.redirects == 0 && ctx.unparsed_uri_valid => out.extend_from_slice(origin_form(req.target())),
        Some(uri) if pass.uri_whole => out.extend_from_slice(uri),
        Some(uri) if ctx.valid_location => {
            out.extend_from_slice(uri);
            let rest = req.path.get(pass.location_len.min(req.path.len())..).unwrap_or(b"");
            push_path(out, ctx, rest);
            push_args(out, req);
        }
        _ => {
            push_path(out, ctx, &req.path);
            push_args(out, req);
        }
    }
}

fn push_args(out: &mut Vec<u8>, req: &crate::http::request::Request<'_>) {
    if let Some(a) = &req.args {
        out.push(b'?');
        out.extend_from_slice(a);
    }
}

thread_local! {
    /// Buffers of request heads already sent, for the next ones.
    static HEAD_BUFS: std::cell::RefCell<Vec<Vec<u8>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A request head for the origin. Its buffer goes back to a per-thread
/// pool when dropped, so building one allocates nothing.
pub struct RequestHead(Vec<u8>);

impl std::ops::Deref for RequestHead {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for RequestHead {
    fn drop(&mut self) {
        let mut b = std::mem::take(&mut self.0);
        if b.capacity() <= 16 * 1024 {
            b.clear();
            HEAD_BUFS.with(|p| {
                let mut p = p.borrow_mut();
                if p.len() < 64 {
                    p.push(b);
                }
            });
        }
    }
}

/// Serializes the request head for the origin: a buffered body goes with
/// its Content-Length (as nginx sends it), a streamed chunked one chunked.
pub fn request_head(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, conf: &ProxyConf, framing: SendFraming) -> RequestHead {
    let mut out = HEAD_BUFS.with(|p| p.borrow_mut().pop()).unwrap_or_else(|| Vec::with_capacity(512));
    if let Some(m) = &conf.method {
        m.render(&Vars::request(ctx), &mut out);
    } else if ctx.req.method == Method::Get && ctx.req.head.method != Method::Get {
        out.extend_from_slice(b"GET");
    } else {
        out.extend_from_slice(ctx.req.method_bytes());
    }
    out.push(b' ');
    target(ctx, pass, &mut out);
    // An h2 WebSocket (extended CONNECT) goes as an HTTP/1.1 Upgrade.
    let ws_key = ctx.websocket_key.as_deref();
    let http11 = conf.http_version_11 || ws_key.is_some();
    out.extend_from_slice(if http11 { b" HTTP/1.1\r\n" } else { b" HTTP/1.0\r\n" });
    let vars = Vars::request(ctx);
    for (name, tpl) in &conf.set_headers {
        if super::websocket::skip_set_header(ws_key, name) {
            continue;
        }
        // Rendered in place; an empty value takes the header out again.
        let mark = out.len();
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        let value_at = out.len();
        tpl.render(&vars, &mut out);
        if out.len() == value_at {
            out.truncate(mark);
            continue;
        }
        out.extend_from_slice(b"\r\n");
    }
    if let Some(key) = ws_key {
        super::websocket::push_fields(key, &mut out);
    }
    match framing {
        SendFraming::None | SendFraming::Records => {}
        SendFraming::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            push_u64(&mut out, n);
            out.extend_from_slice(b"\r\n");
        }
        SendFraming::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    // RFC 9110 7.6.1: headers the client's Connection header names are
    // hop-by-hop too (nginx passes them; sluice drops them).
    let mut conn: Vec<&[u8]> = Vec::new();
    for (name, v) in ctx.req.headers() {
        if name.eq_ignore_ascii_case(b"connection") && has_options(v) {
            conn.push(v);
        }
    }
    let pass_headers = conf.pass_request_headers;
    for (name, v) in ctx.req.headers().filter(|_| pass_headers) {
        let skip = NOT_PASSED.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
            || ReqCache::withholds(ctx, name)
            || conn.iter().any(|c| listed_in_connection(c, name))
            || conf.set_headers.iter().any(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes()))
            || super::websocket::skip_client_header(ws_key, name);
        if skip {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    for (name, v) in ReqCache::validators(ctx) {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    RequestHead(out)
}

/// Whether a Connection header names anything besides the usual
/// close / keep-alive / upgrade (which sluice handles itself).
pub(super) fn has_options(v: &[u8]) -> bool {
    v.split(|&b| b == b',').map(|t| t.trim_ascii()).any(|t| {
        !t.is_empty()
            && !t.eq_ignore_ascii_case(b"close")
            && !t.eq_ignore_ascii_case(b"keep-alive")
            && !t.eq_ignore_ascii_case(b"upgrade")
    })
}

pub(super) fn listed_in_connection(conn: &[u8], name: &[u8]) -> bool {
    conn.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(name))
}
