//! The seam between the upstream core and the protocols it speaks
//! ([`Protocol`]): which handler a location has, whether its request
//! carries the client's body, how the request starts ([`request_start`])
//! and how the response head is read ([`HeadReader`]). HTTP is the
//! proxy's (`wire`, `response_head`), FastCGI, uwsgi, SCGI and memcached
//! their modules' (SCGI's answer is read as uwsgi's).

use super::request_body::{ReqBody, SendFraming};
use super::{response_head, wire};
use crate::config::model::LocConf;
use crate::config::proxy::{Pass, Protocol, ProxyPass, Upstream, UpstreamConf};
use crate::http::handler::ctx::ReqCtx;
use crate::http::request::Method;
use response_head::{HeadError, ResponseHead};

/// Whether a proxied request carries the client's body.
pub fn passes_body(p: &crate::config::proxy::ProxyConf) -> bool {
    p.pass_request_body && p.set_body.is_none()
}

/// `*_pass_request_body` (and `proxy_set_body`) of the protocol's module.
pub fn passes_body_of(lc: &LocConf, protocol: Protocol) -> bool {
    match protocol {
        Protocol::Http => passes_body(&lc.proxy),
        Protocol::FastCgi => lc.fastcgi.pass_request_body,
        Protocol::Uwsgi => lc.uwsgi.pass_request_body,
        Protocol::Scgi => lc.scgi.pass_request_body,
        Protocol::Grpc => true,
        Protocol::Memcached => false,
    }
}

/// The protocol of the location's upstream handler (HTTP without one).
pub fn protocol_of(lc: &LocConf) -> Protocol {
    handler_of(lc).1
}

/// Whether the location's content comes from an upstream.
pub fn has_handler(lc: &LocConf) -> bool {
    handler_of(lc).0.is_some()
}

/// The shared upstream settings of the location's content handler:
/// `fastcgi_*` under `fastcgi_pass`, `uwsgi_*` under `uwsgi_pass`, else
/// `proxy_*`.
pub fn up_conf(lc: &LocConf) -> &UpstreamConf {
    match handler_of(lc).1 {
        Protocol::FastCgi => &lc.fastcgi.up,
        Protocol::Uwsgi => &lc.uwsgi.up,
        Protocol::Scgi => &lc.scgi.up,
        Protocol::Grpc => &lc.grpc.up,
        Protocol::Memcached => &lc.memcached.up,
        Protocol::Http => &lc.proxy.up,
    }
}

/// The location's upstream handler: its target as written, and protocol.
pub fn handler_of(lc: &LocConf) -> (&Option<Pass>, Protocol) {
    if lc.fastcgi.pass.is_some() {
        (&lc.fastcgi.pass, Protocol::FastCgi)
    } else if lc.uwsgi.pass.is_some() {
        (&lc.uwsgi.pass, Protocol::Uwsgi)
    } else if lc.scgi.pass.is_some() {
        (&lc.scgi.pass, Protocol::Scgi)
    } else if lc.grpc.pass.is_some() {
        (&lc.grpc.pass, Protocol::Grpc)
    } else if lc.memcached.pass.is_some() {
        (&lc.memcached.pass, Protocol::Memcached)
    } else {
        (&lc.proxy.pass, Protocol::Http)
    }
}

/// The request's start, as the protocol writes it.
pub enum Head {
    Http(wire::RequestHead),
    /// FastCGI's BEGIN_REQUEST and PARAMS records, or uwsgi's packet.
    Binary(Vec<u8>),
}

impl Head {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Head::Http(h) => h,
            Head::Binary(v) => v,
        }
    }
}

/// The request's start and how its body follows; None when it cannot be
/// written (a uwsgi packet past 64 KB: nginx's 500).
pub fn request_start(ctx: &mut ReqCtx<'_, '_>, pass: &ProxyPass, body: &ReqBody) -> Option<(Head, SendFraming)> {
    let lc = ctx.conf;
    Some(match pass.protocol {
        Protocol::Http => {
            // A body the client sent, even an empty one (an HTTP/2 stream
            // that ended with an empty DATA frame), goes with its length,
            // as nginx sends it.
            let declared = !matches!(ctx.req.head.body, crate::http::request::BodyKind::None);
            let framing = match body {
                ReqBody::Buffered(b)
                    if !b.is_empty() || declared || matches!(ctx.req.method, Method::Post | Method::Put) =>
                {
                    SendFraming::Length(b.len())
                }
                ReqBody::Buffered(_) => SendFraming::None,
                ReqBody::Streamed(c) => c.framing(),
            };
            (Head::Http(wire::request_head(ctx, pass, &lc.proxy, framing)), framing)
        }
        Protocol::FastCgi => {
            let keep_conn = lc.fastcgi.keep_conn && pass.upstream.keepalive > 0;
            (Head::Binary(crate::http::fastcgi::request_head(ctx, body, keep_conn)), SendFraming::Records)
        }
        // The body follows the packet as it is (a chunked one was read
        // whole: see connection/h1/upload).
        Protocol::Uwsgi => (Head::Binary(crate::http::uwsgi::request_head(ctx, body)?), raw_framing(body)),
        Protocol::Scgi => (Head::Binary(crate::http::scgi::request_head(ctx, body)), raw_framing(body)),
        // `get KEY`; the client's body is not sent (nginx reads and drops it).
        Protocol::Memcached => (Head::Binary(crate::http::memcached::request_head(ctx)?.0), SendFraming::None),
        // HTTP/2 frames, written on the stream by `grpc::exchange`.
        Protocol::Grpc => {
            crate::http::fastcgi::note_body_len(ctx, body);
            (Head::Binary(Vec::new()), SendFraming::None)
        }
    })
}

/// A body sent as it is after the request's start: its length, if any.
fn raw_framing(body: &ReqBody) -> SendFraming {
    match body {
        ReqBody::Buffered(b) if b.is_empty() => SendFraming::None,
        ReqBody::Buffered(b) => SendFraming::Length(b.len()),
        ReqBody::Streamed(c) => c.framing(),
    }
}

/// How the response head is read: HTTP's status line and fields, FastCGI
/// records whose STDOUT starts with CGI header lines, or uwsgi's status
/// line (or CGI lines) on a connection that is not reused.
pub enum HeadReader {
    Http {
        head_request: bool,
    },
    FastCgi(Box<crate::http::fastcgi::response::Reader>),
    Uwsgi {
        head_request: bool,
    },
    /// The key as sent, which a `VALUE` line must name.
    Memcached {
        key: Vec<u8>,
        gzip_flag: u32,
        head_request: bool,
    },
}

impl HeadReader {
    /// `suffix`: the error log's context for the peer (FastCGI's stderr);
    /// `sent`: the request's start as written.
    pub fn new(
        ctx: &ReqCtx<'_, '_>,
        protocol: Protocol,
        sent: &[u8],
        suffix: String,
        head_request: bool,
        u: &Upstream,
    ) -> HeadReader {
        match protocol {
            // gRPC's head comes from h2 (`grpc::exchange`), not from bytes.
            Protocol::Http | Protocol::Grpc => HeadReader::Http { head_request },
            Protocol::FastCgi => HeadReader::FastCgi(Box::new(crate::http::fastcgi::response::Reader::new(
                ctx,
                suffix,
                head_request,
                ctx.conf.fastcgi.keep_conn && u.keepalive > 0,
            ))),
            Protocol::Uwsgi | Protocol::Scgi => HeadReader::Uwsgi { head_request },
            Protocol::Memcached => HeadReader::Memcached {
                key: crate::http::memcached::sent_key(sent).to_vec(),
                gzip_flag: ctx.conf.memcached.gzip_flag,
                head_request,
            },
        }
    }

    pub fn parse(&mut self, buf: &mut Vec<u8>, conf: &UpstreamConf) -> Result<Option<ResponseHead>, HeadError> {
        match self {
            HeadReader::Http { head_request } => response_head::parse_response(buf, *head_request, conf),
            HeadReader::FastCgi(r) => r.parse(buf, conf),
            HeadReader::Uwsgi { head_request } => crate::http::uwsgi::response::parse(buf, *head_request, conf),
            HeadReader::Memcached { key, gzip_flag, head_request } => {
                crate::http::memcached::response::parse(buf, key, *gzip_flag, *head_request)
            }
        }
    }

    /// Whether the head is HTTP-shaped: interim 1xx answers are skipped
    /// and the head is held to `*_buffer_size` (FastCGI's records are
    /// bounded by their own reader).
    pub fn http_shaped(&self) -> bool {
        !matches!(self, HeadReader::FastCgi(_))
    }
}
