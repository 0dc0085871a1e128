//! gRPC (`grpc_pass`), as nginx's ngx_http_grpc_module: the request goes
//! to the origin over HTTP/2 (cleartext for `grpc://`, TLS with ALPN `h2`
//! for `grpcs://`), whatever the client spoke, and the response comes
//! back with its trailers. Everything else (peers, keep-alive pools,
//! retries, timeouts, 502/504, `$upstream_*`) is the upstream core's
//! (`crate::http::proxy`), behind its protocol seam
//! (`crate::config::proxy::Protocol::Grpc`). What is gRPC's own:
//!
//! - [`session`]: HTTP/2's client side as nginx's module frames it (no
//!   I/O): one stream at a time, windows, the response and its errors;
//! - [`fields`]: a response head's or trailers' fields as it decodes them;
//! - [`client`]: the connection on the origin's socket that drives it;
//! - [`head`]: the request's head as nginx's module builds it
//!   (`:authority`, the client's headers, `grpc_set_header`), written as
//!   its HPACK block;
//! - here: the body sent, the response head read and filtered.
//!
//! The frames' payload (gRPC's length-prefixed messages) passes through
//! untouched.

pub mod client;
pub mod conf;
pub mod head;
pub mod session;

use std::borrow::Cow;

use bytes::Bytes;

use crate::config::proxy::{ProxyPass, UpstreamConf};
use crate::http::connection::spool::{self, Spooled};
use crate::http::field_value::FieldValue;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::proxy::ExchangeError;
use crate::http::proxy::request_body::{Client, ReqBody};
use crate::http::proxy::response_head::{Framing, ResponseHead};
use session::{Failure, RespHead};

/// `grpc_pass` with variables: the rendered value, its scheme taken off
/// (`grpcs://` for TLS), names an upstream block, an address, or a host
/// name asked of the `resolver` (as `proxy_pass` with variables).
pub async fn resolve(
    w: &crate::worker::WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    tpl: &crate::variables::Template,
) -> Result<std::sync::Arc<ProxyPass>, u16> {
    use crate::log::error::Level;
    let rendered = tpl.render_to_vec(&Vars::request(ctx));
    let raw = String::from_utf8_lossy(&rendered).into_owned();
    let (authority, tls) = match (raw.strip_prefix("grpc://"), raw.strip_prefix("grpcs://")) {
        (Some(r), _) => (r, false),
        (_, Some(r)) => (r, true),
        _ => (raw.as_str(), false),
    };
    if authority.is_empty() || authority.contains('/') && !authority.starts_with("unix:") {
        crate::log_req!(ctx, Level::Error, "invalid host in upstream \"{}\" while handling request", raw);
        return Err(500);
    }
    let named = w.cfg.http.upstreams.iter().find(|u| !u.implicit && u.name == authority).cloned();
    let upstream = match named {
        Some(u) => u,
        None if crate::http::proxy::dynamic::is_address(authority) => {
            let key = format!("{}://{authority}", if tls { "grpcs" } else { "grpc" });
            match w.proxy.borrow_mut().targets.get_as(&key, authority, tls) {
                Ok(u) => u,
                Err(why) => {
                    crate::log_req!(ctx, Level::Error, "{} while handling request", why);
                    return Err(502);
                }
            }
        }
        None => crate::http::proxy::dynamic::by_name(w, ctx, authority, tls).await?,
    };
    let mut target = crate::http::fastcgi::conf::target(upstream, crate::config::proxy::Protocol::Grpc);
    target.tls = tls;
    target.proxy_host = conf::authority(authority);
    Ok(std::sync::Arc::new(target))
}

/// Opens the request's stream on `conn`, sends the body (the client's,
/// read whole before, or streamed as it comes from an HTTP/2 client), and
/// waits for the response head within `grpc_read_timeout`; the response
/// body is left on `conn` for the core to read.
pub(crate) async fn exchange(
    conn: &mut client::Conn,
    block: &[u8],
    client: &mut Client<'_>,
    conf: &UpstreamConf,
    head_request: bool,
    limits: (u64, std::time::Duration),
) -> Result<ResponseHead, ExchangeError> {
    let body_len = match &client.body {
        ReqBody::Buffered(b) => b.len(),
        ReqBody::Streamed(_) => 0,
    };
    let streamed = client.h2_body.take();
    let end = body_len == 0 && streamed.is_none();
    let tx = match conn.open(block, end, conf.buffer_size) {
        Ok(tx) => tx,
        // Nothing went: a reused connection the origin closed or sent
        // GOAWAY on may be replaced by a new one.
        Err(_) => return Err(ExchangeError::NotSent),
    };
    if let Some(rx) = streamed {
        client.h2_body_sent = true;
        // A body that came whole (a unary call's one DATA frame) goes at
        // once; any other goes on as its DATA frames come, in a task of
        // its own, while the answer is awaited and streamed back.
        if let Some(rx) = send_whole(rx, &tx, limits.0) {
            tokio::task::spawn_local(crate::clock::per_poll(pump(rx, tx, limits.0, limits.1)));
        }
    } else if let ReqBody::Buffered(b) = &client.body
        && body_len > 0
    {
        let sent = crate::clock::timeout(conf.send_timeout, send_body(&tx, b)).await;
        match sent {
            Err(_) => return Err(ExchangeError::Timeout("sending request to upstream")),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(())) => {}
        }
    }
    let watch = !conf.ignore_client_abort;
    let got = tokio::select! {
        biased;
        r = crate::clock::timeout(conf.read_timeout, conn.response(head_request)) => r,
        _ = client.gone(), if watch => return Err(ExchangeError::Gone("while sending request to upstream")),
    };
    let resp = match got {
        Err(_) => return Err(ExchangeError::Timeout("reading response header from upstream")),
        Ok(Err(e)) => return Err(failure(e, "reading response header from upstream")),
        Ok(Ok(r)) => r,
    };
    let mut head = response_head(&resp, conf);
    if resp.end_stream || head_request {
        // A trailers-only answer (grpc-status in the head) ends with it.
        head.framing = Framing::None(Some(0));
    }
    Ok(head)
}

/// Sends a body that came whole before the exchange began (one DATA
/// frame that ended the client's stream) as [`pump`] would, without its
/// task: the same frame, the client's window given back the same way.
/// The stream is handed back when that cannot be done at once (more
/// frames to come, trailers, a body over `max`, the origin's window too
/// narrow), for the pump.
fn send_whole(
    mut rx: crate::http::connection::h2::handle::Rx,
    tx: &client::Sender,
    max: u64,
) -> Option<crate::http::connection::h2::handle::Rx> {
    let fits = |n: usize| (max == 0 || n as u64 <= max) && tx.fits(n);
    let Some(chunk) = rx.take_whole(fits) else { return Some(rx) };
    tx.send_now(&chunk, true);
    let _ = rx.release_capacity(chunk.len());
    None
}

/// An HTTP/2 client's body to the origin, frame by frame, the client's
/// window opened as the origin's takes each frame. A client that stalls
/// past `client_body_timeout`, resets its stream or sends more than
/// `client_max_body_size` (0: no limit) resets the origin's stream. The
/// client's trailers are not passed (nginx ends the stream with an empty
/// DATA frame).
async fn pump(
    mut rx: crate::http::connection::h2::handle::Rx,
    tx: client::Sender,
    max: u64,
    timeout: std::time::Duration,
) {
    let mut total = 0u64;
    loop {
        match tokio::time::timeout(timeout, rx.data()).await {
            Ok(None) => {
                match tokio::time::timeout(timeout, rx.trailers()).await {
                    Ok(Ok(_)) => {
                        let _ = tx.send(Bytes::new(), true).await;
                    }
                    _ => tx.reset(),
                }
                return;
            }
            Ok(Some(Ok(chunk))) => {
                let n = chunk.len();
                total += n as u64;
                if max > 0 && total > max {
                    tx.reset();
                    return;
                }
                // The client's last DATA frame ends the origin's stream too
                // (unless trailers follow).
                let last = rx.is_end_stream();
                if tx.send(chunk, last).await.is_err() {
                    return;
                }
                let _ = rx.release_capacity(n);
                if last {
                    return;
                }
            }
            Ok(Some(Err(_))) | Err(_) => {
                tx.reset();
                return;
            }
        }
    }
}

/// The buffered request body as DATA frames, the last one ending the
/// stream.
async fn send_body(tx: &client::Sender, b: &Spooled) -> Result<(), ExchangeError> {
    const PIECE: usize = 64 * 1024;
    let total = b.len();
    let mut off = 0u64;
    while off < total {
        let mut piece = vec![0u8; PIECE.min((total - off) as usize)];
        let n = spool::read_at(b, off, &mut piece)
            .map_err(|e| ExchangeError::Io(("pread()", "sending request to upstream"), e))?;
        if n == 0 {
            break;
        }
        piece.truncate(n);
        off += n as u64;
        tx.send(Bytes::from(piece), off >= total).await.map_err(|e| failure(e, "sending request to upstream"))?;
    }
    Ok(())
}

/// A broken connection as the core reports it: closed by the origin as a
/// premature close, an I/O error as such, a protocol error with nginx's
/// line.
fn failure(e: Failure, when: &'static str) -> ExchangeError {
    match e {
        Failure::Closed => ExchangeError::Closed,
        Failure::Io(kind, why) => ExchangeError::Io(("recv()", when), std::io::Error::new(kind, why)),
        Failure::Invalid(why) => ExchangeError::Invalid(Cow::Owned(why)),
    }
}

/// Headers of the origin's answer nginx's grpc module hides by default
/// (a match, not a list searched: it is asked for every field).
fn hidden_by_default(name: &[u8]) -> bool {
    matches!(
        name,
        b"date"
            | b"server"
            | b"x-accel-expires"
            | b"x-accel-redirect"
            | b"x-accel-limit-rate"
            | b"x-accel-buffering"
            | b"x-accel-charset"
            | b"connection"
            | b"keep-alive"
            | b"transfer-encoding"
            | b"content-length"
            | b"upgrade"
    )
}

/// Names of the origin's answer passed on often enough to be kept
/// without an allocation.
const COMMON: &[&str] = &[
    "grpc-encoding",
    "grpc-accept-encoding",
    "grpc-status",
    "grpc-message",
    "last-modified",
    "etag",
    "accept-ranges",
    "cache-control",
    "expires",
    "vary",
    "content-encoding",
];

/// The client's response head from the origin's: the status, Content-Type
/// apart, the rest passed on but for the hidden ones (`grpc_hide_header`,
/// nginx's defaults unless `grpc_pass_header` names them).
pub fn response_head(resp: &RespHead, conf: &UpstreamConf) -> ResponseHead {
    let mut headers = Vec::with_capacity(resp.fields.len());
    let mut content_type = None;
    // Compared as bytes: a name becomes text only when it is kept and not
    // one of the usual ones.
    for (name, value) in resp.fields.iter() {
        if name == b"content-type" {
            content_type = Some(match value {
                b"application/grpc" => Cow::Borrowed("application/grpc"),
                b"application/grpc+proto" => Cow::Borrowed("application/grpc+proto"),
                _ => Cow::Owned(String::from_utf8_lossy(value).into_owned()),
            });
            continue;
        }
        let hidden = (hidden_by_default(name) && !conf.pass_headers.iter().any(|p| p.as_bytes() == name))
            || conf.hide_headers.iter().any(|h| h.as_bytes() == name);
        if hidden {
            continue;
        }
        let n = COMMON
            .iter()
            .find(|&&c| c.as_bytes() == name)
            .map_or_else(|| Cow::Owned(String::from_utf8_lossy(name).into_owned()), |&c| Cow::Borrowed(c));
        headers.push((n, FieldValue::copy_from(value)));
    }
    ResponseHead {
        status: resp.status,
        headers,
        content_type,
        framing: Framing::Stream,
        keep_alive: true,
        head_len: 0,
        accel_buffering: None,
        accel_expires: None,
        accel_limit_rate: None,
        accel_redirect: None,
        accel_charset: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn te_trailers_token() {
        use head::contains_token;
        assert!(contains_token(b"trailers", b"trailers"));
        assert!(contains_token(b"gzip, Trailers;q=1", b"trailers"));
        assert!(!contains_token(b"gzip", b"trailers"));
    }

    #[test]
    fn hidden_headers_and_content_type() {
        let mut conf = UpstreamConf::default();
        let field = |n: &str, v: &str| (n.as_bytes().to_vec(), v.as_bytes().to_vec());
        let resp = RespHead {
            status: 200,
            fields: vec![
                field("content-type", "application/grpc"),
                field("date", "x"),
                field("server", "y"),
                field("grpc-encoding", "identity"),
                field("x-secret", "z"),
            ]
            .into(),
            end_stream: false,
        };
        conf.hide_headers.push("x-secret".into());
        conf.pass_headers.push("server".into());
        let h = response_head(&resp, &conf);
        assert_eq!(h.content_type.as_deref(), Some("application/grpc"));
        let names: Vec<&str> = h.headers.iter().map(|(n, _)| n.as_ref()).collect();
        assert_eq!(names, ["server", "grpc-encoding"]);
    }
}
