//! HTTP/1.x towards the origin: the request head sluice sends, the
//! response head it reads (with the same smuggling checks as for clients),
//! and the response body's framing.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use super::request_body::SendFraming;
use crate::config::proxy::{ProxyConf, ProxyPass};
use crate::connection::h1::chunked::Decoder;
use crate::handler::ctx::{ReqCtx, Vars, push_u64};
use crate::http::request::Method;

/// Client headers nginx never passes on unless set with proxy_set_header
/// (hop-by-hop ones and the framing sluice redoes).
const NOT_PASSED: &[&str] =
    &["host", "connection", "content-length", "transfer-encoding", "te", "keep-alive", "expect", "upgrade"];

/// Origin response headers a client never gets (hop-by-hop, or replaced by
/// sluice's own), plus nginx's default `proxy_hide_header` list; `name` is
/// lowercase.
fn not_returned(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection"
            | b"keep-alive"
            | b"transfer-encoding"
            | b"te"
            | b"trailer"
            | b"upgrade"
            | b"proxy-connection"
            | b"content-length"
            | b"date"
            | b"server"
            | b"x-pad"
            | b"x-accel-expires"
            | b"x-accel-redirect"
            | b"x-accel-limit-rate"
            | b"x-accel-buffering"
            | b"x-accel-charset"
    )
}

fn escape_path(out: &mut Vec<u8>, path: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path {
        let keep = b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@%".contains(&b);
        if keep {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
        }
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
/// an internal redirect); with one, it replaces the matched location prefix.
fn target(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, out: &mut Vec<u8>) {
    let req = &ctx.req;
    match &pass.uri {
        None if ctx.redirects == 0 => out.extend_from_slice(origin_form(req.target())),
        None => {
            escape_path(out, &req.path);
            if let Some(a) = &req.args {
                out.push(b'?');
                out.extend_from_slice(a);
            }
        }
        Some(uri) if pass.uri_whole => out.extend_from_slice(uri),
        Some(uri) => {
            out.extend_from_slice(uri);
            let rest = req.path.get(pass.location_len.min(req.path.len())..).unwrap_or(b"");
            escape_path(out, rest);
            if let Some(a) = &req.args {
                out.push(b'?');
                out.extend_from_slice(a);
            }
        }
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
    let method = if ctx.req.method == Method::Get && ctx.req.head.method != Method::Get {
        &b"GET"[..]
    } else {
        ctx.req.method_bytes()
    };
    out.extend_from_slice(method);
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
        SendFraming::None => {}
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
    for (name, v) in ctx.req.headers() {
        let skip = NOT_PASSED.iter().any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
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
    out.extend_from_slice(b"\r\n");
    RequestHead(out)
}

/// How the origin's response body ends.
#[derive(Debug)]
pub enum Framing {
    /// No body follows; for HEAD, the length the origin declared.
    None(Option<u64>),
    Length(u64),
    Chunked(Decoder),
    /// Until the origin closes (HTTP/1.0 style).
    Close,
}

#[derive(Debug)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: Vec<(Cow<'static, str>, Vec<u8>)>,
    pub content_type: Option<String>,
    pub framing: Framing,
    /// The connection may be reused after the body.
    pub keep_alive: bool,
    pub head_len: usize,
    /// `X-Accel-Buffering: yes|no`: the origin overrides `proxy_buffering`
    /// for this response, as nginx lets it.
    pub accel_buffering: Option<bool>,
}

#[derive(Debug)]
pub enum HeadError {
    /// nginx: "upstream sent invalid header" and similar, a 502.
    Invalid(&'static str),
    Incomplete,
}

/// The spelling origins usually use for a header passed on (given its
/// lowercase form), so that it needs no allocation.
fn common_name(lower: &[u8]) -> Option<&'static str> {
    Some(match lower {
        b"last-modified" => "Last-Modified",
        b"etag" => "ETag",
        b"accept-ranges" => "Accept-Ranges",
        b"cache-control" => "Cache-Control",
        b"expires" => "Expires",
        b"vary" => "Vary",
        b"set-cookie" => "Set-Cookie",
        b"location" => "Location",
        b"content-encoding" => "Content-Encoding",
        b"content-language" => "Content-Language",
        b"content-disposition" => "Content-Disposition",
        b"content-range" => "Content-Range",
        b"age" => "Age",
        b"pragma" => "Pragma",
        b"link" => "Link",
        b"access-control-allow-origin" => "Access-Control-Allow-Origin",
        b"x-content-type-options" => "X-Content-Type-Options",
        b"x-frame-options" => "X-Frame-Options",
        b"strict-transport-security" => "Strict-Transport-Security",
        _ => return None,
    })
}

/// Whether a Connection header names anything besides the usual
/// close / keep-alive / upgrade (which sluice handles itself).
fn has_options(v: &[u8]) -> bool {
    v.split(|&b| b == b',').map(|t| t.trim_ascii()).any(|t| {
        !t.is_empty()
            && !t.eq_ignore_ascii_case(b"close")
            && !t.eq_ignore_ascii_case(b"keep-alive")
            && !t.eq_ignore_ascii_case(b"upgrade")
    })
}

fn listed_in_connection(conn: &[u8], name: &[u8]) -> bool {
    conn.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(name))
}

/// Parses a response head from `buf`; Ok(None) when more bytes are needed.
pub fn parse_response(buf: &[u8], head_request: bool, conf: &ProxyConf) -> Result<Option<ResponseHead>, HeadError> {
    // nginx bounds the head by size (proxy_buffer_size), not by count.
    // Uninitialized slots: no 4 KB of empty headers written per parse.
    let mut hdrs = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; 128];
    let mut many;
    let mut r = httparse::Response::new(&mut []);
    let mut parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut r, buf, &mut hdrs);
    if matches!(parsed, Err(httparse::Error::TooManyHeaders)) {
        many = vec![httparse::EMPTY_HEADER; buf.len() / 4 + 1];
        r = httparse::Response::new(&mut many);
        parsed = r.parse(buf);
    }
    let head_len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(HeadError::Invalid("upstream sent invalid header")),
    };
    let status = r.code.unwrap_or(0);
    if !(100..=999).contains(&status) {
        return Err(HeadError::Invalid("upstream sent invalid status"));
    }
    let http11 = r.version == Some(1);
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut close = !http11;
    let mut headers = Vec::with_capacity(r.headers.len());
    let mut content_type = None;
    // Names are matched lowercased in this buffer (no allocation for the
    // usual short names; the configured lists are lowercase).
    let mut low = [0u8; 32];
    let mut low_long = Vec::new();
    let mut options: Vec<&[u8]> = Vec::new();
    let mut accel_buffering = None;
    for h in r.headers.iter() {
        let v = h.value;
        // httparse (default config: no obs-fold, no invalid lines ignored)
        // has already refused CR, LF and NUL in a value.
        let name: &[u8] = if h.name.len() <= low.len() {
            let l = &mut low[..h.name.len()];
            for (d, s) in l.iter_mut().zip(h.name.as_bytes()) {
                *d = s.to_ascii_lowercase();
            }
            l
        } else {
            low_long.clear();
            low_long.extend_from_slice(h.name.as_bytes());
            low_long.make_ascii_lowercase();
            &low_long
        };
        match name {
            b"content-length" => {
                let n = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(HeadError::Invalid("upstream sent invalid \"Content-Length\" header"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(HeadError::Invalid("upstream sent duplicate header line: \"Content-Length\""));
                }
                length = Some(n);
            }
            b"transfer-encoding" => {
                if !v.eq_ignore_ascii_case(b"chunked") {
                    return Err(HeadError::Invalid("upstream sent unknown \"Transfer-Encoding\""));
                }
                chunked = true;
            }
            b"connection" => {
                if has_options(v) {
                    options.push(v);
                }
                if v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")) {
                    close = true;
                } else if v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"keep-alive")) && !http11
                {
                    close = false;
                }
            }
            b"x-accel-buffering" => {
                if v.eq_ignore_ascii_case(b"yes") {
                    accel_buffering = Some(true);
                } else if v.eq_ignore_ascii_case(b"no") {
                    accel_buffering = Some(false);
                }
            }
            b"content-type" => {
                content_type = Some(match std::str::from_utf8(v) {
                    Ok(s) => s.to_owned(),
                    Err(_) => String::from_utf8_lossy(v).into_owned(),
                });
                // Carried separately, never as a header.
                continue;
            }
            _ => {}
        }
        let listed = |list: &[String]| list.iter().any(|n| n.as_bytes() == name);
        let switching = status == 101 && name == b"upgrade";
        let hidden = not_returned(name) && !listed(&conf.pass_headers) && !switching || listed(&conf.hide_headers);
        if !hidden {
            let n = match common_name(name) {
                Some(c) if c == h.name => Cow::Borrowed(c),
                _ => Cow::Owned(h.name.to_string()),
            };
            headers.push((n, v.to_vec()));
        }
    }
    // RFC 9110 7.6.1: what the origin's Connection header names is
    // hop-by-hop and stays here.
    if !options.is_empty() {
        headers.retain(|(n, _)| !options.iter().any(|c| listed_in_connection(c, n.as_bytes())));
    }
    if chunked && length.is_some() {
        return Err(HeadError::Invalid(
            "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time",
        ));
    }
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        Framing::None(if head_request { length } else { None })
    } else if chunked {
        Framing::Chunked(Decoder::default())
    } else if let Some(n) = length {
        Framing::Length(n)
    } else {
        close = true;
        Framing::Close
    };
    Ok(Some(ResponseHead { status, headers, content_type, framing, keep_alive: !close, head_len, accel_buffering }))
}
