//! The request body of a proxied HTTP/1 request: `100 Continue` when the
//! client waits for it, then either the whole body buffered first (memory
//! or a temporary file, `proxy_request_buffering on`) or the body streamed
//! to the origin as it arrives (`off`). Streaming needs a framing the
//! origin can take: a Content-Length, or chunked to an HTTP/1.1 origin; a
//! chunked body to an HTTP/1.0 origin is buffered, as in nginx.

use crate::http::connection::body::{self, BodyError};
use crate::http::connection::sock::Sock;
use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::request_body::{Client, ClientBody, ReqBody};
use crate::http::request::{BodyKind, Head};
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_req;
use crate::worker::WorkerCtx;

/// What the body took from the connection: bytes of the read buffer after
/// the head that were body, and bytes read past the body's end.
pub struct Taken {
    pub used: usize,
    pub extra: Vec<u8>,
    /// `100 Continue` already went out.
    pub continued: bool,
}

pub async fn respond<'c>(
    w: &WorkerCtx,
    ctx: &mut ReqCtx<'c, '_>,
    stream: &mut Sock,
    initial: &[u8],
    head: &Head,
) -> (Response<'c>, Taken) {
    let conf = ctx.conf;
    let mut taken = Taken { used: 0, extra: Vec::new(), continued: false };
    // Even when the body came with the head, or is empty
    // (`Content-Length: 0`): nginx sends `100 Continue` whenever it starts
    // reading a request body for a client that asked
    // (ngx_http_test_expect), and a client that waits for it gets it.
    if head.expect_continue {
        if let BodyKind::Length(n) = head.body
            && conf.client_max_body_size > 0
            && n > conf.client_max_body_size
        {
            // Refused before the client sends it.
            let e = BodyError { status: 413, reason: format!("client intended to send too large body: {} bytes", n) };
            return (refuse(ctx, e), taken);
        }
        // nginx answers the expectation when it starts reading the body.
        if stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n", conf.send_timeout).await.is_err() {
            let mut r = crate::http::handler::finish_error(ctx, 400);
            r.close = true;
            return (r, taken);
        }
        taken.continued = true;
    }
    // A chunked body is buffered for an HTTP/1.0 origin; FastCGI's records
    // carry it as it comes (without CONTENT_LENGTH, as nginx sends it).
    let protocol = crate::http::proxy::protocol_of(conf);
    let fastcgi = protocol == crate::config::proxy::Protocol::FastCgi;
    // uwsgi and SCGI have no framing of their own: the length must be known.
    let sized = matches!(protocol, crate::config::proxy::Protocol::Uwsgi | crate::config::proxy::Protocol::Scgi);
    // A body that is not passed on (`*_pass_request_body off`,
    // `proxy_set_body`) is read whole first, then left behind.
    let passed = crate::http::proxy::passes_body_of(conf, protocol);
    // As in nginx, `client_body_in_file_only` has no effect on a body
    // passed on unbuffered.
    let stream_it = !ctx.dav_put
        && !crate::http::proxy::up_conf(conf).request_buffering
        && passed
        && match head.body {
            BodyKind::Length(_) => true,
            BodyKind::Chunked => !sized && (conf.proxy.http_version_11 || fastcgi),
            BodyKind::None => false,
        };
    if stream_it {
        let length = match head.body {
            BodyKind::Length(n) => {
                if conf.client_max_body_size > 0 && n > conf.client_max_body_size {
                    let e = BodyError {
                        status: 413,
                        reason: format!("client intended to send too large body: {} bytes", n),
                    };
                    return (refuse(ctx, e), taken);
                }
                Some(n)
            }
            _ => None,
        };
        let mut c = ClientBody::new(initial, length, conf.client_max_body_size, conf.client_body_timeout);
        if crate::variables::request_body_used() {
            c.keep_copy(conf.client_body_buffer_size);
        }
        let mut client = Client::h1(stream, ReqBody::Streamed(c));
        let mut resp = crate::http::proxy::respond(w, ctx, &mut client).await;
        taken.used = initial.len();
        if let ReqBody::Streamed(c) = client.body {
            if c.done {
                taken.extra = c.extra;
                ctx.body_read = length.unwrap_or(0);
            } else {
                // The rest of the body was never read: the connection
                // cannot carry another request.
                resp.close = true;
            }
        }
        return (resp, taken);
    }
    let lim = body::Limits {
        max: conf.client_max_body_size,
        timeout: conf.client_body_timeout,
        buffer_size: conf.client_body_buffer_size,
        temp_dir: &conf.client_body_temp_path,
        naming: crate::http::connection::spool::naming(conf),
    };
    match body::read_all(stream, initial, head.body, &lim).await {
        Ok(b) => {
            taken.used = b.used;
            taken.extra = b.extra;
            ctx.body_read = b.raw;
            let mut client = Client::h1(stream, ReqBody::Buffered(b.data));
            (crate::http::proxy::respond(w, ctx, &mut client).await, taken)
        }
        Err(e) => (refuse(ctx, e), taken),
    }
}

fn refuse<'c>(ctx: &mut ReqCtx<'c, '_>, e: BodyError) -> Response<'c> {
    let level = if e.status == 500 { Level::Crit } else { Level::Info };
    log_req!(ctx, level, "{} while reading client request body", e.reason);
    // A body timeout is never answered (nginx terminates the request):
    // no error_page, and the connection closes on the generated 408.
    let mut r = if e.status == 408 {
        crate::http::handler::error(ctx, 408)
    } else {
        crate::http::handler::finish_error(ctx, e.status)
    };
    r.close = true;
    r
}
