//! The values of nginx's HTTP variables for a request (`VarSource` for
//! `ctx::Vars`): what templates, `if`, `map` and log formats read. The
//! less common ones are in `more_vars`.

use super::ctx::*;
use super::upstream_log::{push_list, push_ms_list};
use crate::variables::{Var, VarSource};
use std::sync::Arc;

/// An address as `IpAddr`'s Display writes it; IPv4 without the
/// formatting machinery (every access log line has `$remote_addr`).
const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_ip(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let mut text = [0u8; 15];
            let mut n = 0;
            for (i, o) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[n] = b'.';
                    n += 1;
                }
                if o >= 100 {
                    text[n] = b'0' + o / 100;
                    n += 1;
                }
                if o >= 10 {
                    text[n] = b'0' + o / 10 % 10;
                    n += 1;
                }
                text[n] = b'0' + o % 10;
                n += 1;
            }
            out.extend_from_slice(&text[..n]);
        }
        std::net::IpAddr::V6(_) => {
            use std::io::Write;
            let _ = write!(out, "{ip}");
        }
    }
}

fn cookie<'q>(header: &'q [u8], name: &str) -> Option<&'q [u8]> {
    header.split(|&b| b == b';').find_map(|kv| {
        let kv = kv.strip_prefix(b" ").unwrap_or(kv);
        let i = kv.iter().position(|&b| b == b'=')?;
        // Names match in any case, as nginx's ngx_http_parse_multi_header_lines.
        kv[..i].eq_ignore_ascii_case(name.as_bytes()).then_some(&kv[i + 1..])
    })
}

/// A cookie from any of the request's Cookie headers.
pub(crate) fn request_cookie<'q>(req: &crate::http::request::Request<'q>, name: &str) -> Option<&'q [u8]> {
    req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie")).find_map(|(_, v)| cookie(v, name))
}

/// Every request header named `name`, joined with `sep`.
/// Whether request header `header` is the one `$http_NAME` names (`name`
/// as stored: lowercase, its `_` turned to `-`). nginx compares the
/// header's name with `-` read as `_`, so a header `X_Foo` (kept by
/// `underscores_in_headers on` or `ignore_invalid_headers off`) is
/// `$http_x_foo` just as `X-Foo` is.
fn is_var_header(header: &[u8], name: &str) -> bool {
    header.len() == name.len()
        && header.iter().zip(name.bytes()).all(|(&h, v)| h.to_ascii_lowercase() == v || (h == b'_' && v == b'-'))
}

fn join_request_headers(req: &crate::http::request::Request<'_>, name: &str, sep: &[u8], out: &mut Vec<u8>) {
    let mut first = true;
    for (_, v) in req.headers().filter(|(n, _)| is_var_header(n, name)) {
        if !first {
            out.extend_from_slice(sep);
        }
        first = false;
        out.extend_from_slice(v);
    }
}

impl Vars<'_, '_, '_> {
    /// The address a geoip2 variable looks up: `source=`'s value, else the
    /// client through `geoip2_proxy`.
    fn geoip2_address(&self, g: &crate::geoip2::Geoip2Var) -> Option<std::net::IpAddr> {
        if let Some(t) = g.source() {
            return crate::geoip2::parse_addr(&t.render_to_vec(self));
        }
        if !g.wants_address() {
            return None;
        }
        let ctx = self.ctx;
        let xff: Vec<&[u8]> = if g.conf.proxies.is_empty() {
            Vec::new()
        } else {
            ctx.req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"x-forwarded-for")).map(|(_, v)| v).collect()
        };
        let client = (!ctx.client_is_unix()).then(|| ctx.client());
        crate::http::geoip2::address(&g.conf, client, &xff)
    }
}

impl VarSource for Vars<'_, '_, '_> {
    fn empty_found(&self, var: &Var) -> bool {
        let req = &self.ctx.req;
        match var {
            // An empty string in the database is a value (logged as nothing).
            Var::Geoip2(g) => g.value(self.geoip2_address(g), &mut Vec::new()),
            Var::Http(name) => req.headers().any(|(n, _)| is_var_header(n, name)),
            Var::Arg(name) => req.args.as_deref().and_then(|a| query_arg(a, name)).is_some(),
            Var::Cookie(name) => request_cookie(req, name).is_some(),
            // A request refused before its URI parsed logs `$uri` empty.
            Var::Uri => true,
            Var::ProxyPort | Var::UpstreamCookie(_) | Var::RequestBody | Var::RequestBodyFile => {
                super::more_vars::found(self, var)
            }
            _ => false,
        }
    }

    fn write_var(&self, var: &Var, out: &mut Vec<u8>) {
        let ctx = self.ctx;
        let req = &ctx.req;
        match var {
            Var::RemoteAddr if ctx.client_is_unix() => out.extend_from_slice(b"unix:"),
            Var::RemotePort if ctx.client_is_unix() => {}
            Var::RemoteAddr => push_ip(out, ctx.client().ip()),
            Var::RemotePort => {
                // A realip address given without a port has none (nginx: empty).
                let port = ctx.client().port();
                if port != 0 {
                    push_u64(out, port as u64)
                }
            }
            Var::RequestId => {
                let id = ctx.request_id();
                for b in id {
                    out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
                }
            }
            Var::Connections(which) => {
                let t = crate::worker::stats::totals();
                push_u64(out, [t.active, t.reading, t.writing, t.waiting][usize::from(*which).min(3)]);
            }
            // nginx's binary form of an AF_UNIX address is its text.
            Var::BinaryRemoteAddr if ctx.client_is_unix() => out.extend_from_slice(b"unix:"),
            Var::RealipRemoteAddr if ctx.conn.unix.is_some() => out.extend_from_slice(b"unix:"),
            Var::RealipRemotePort if ctx.conn.unix.is_some() => {}
            Var::RealipRemoteAddr => push_ip(out, ctx.conn.peer.ip()),
            Var::RealipRemotePort => push_u64(out, ctx.conn.peer.port() as u64),
            Var::ProxyProtocolAddr => {
                if let Some(pp) = &ctx.conn.proxy_protocol {
                    out.extend_from_slice(pp.src_addr.as_bytes())
                }
            }
            Var::ProxyProtocolTlv(name) => {
                if let Some(v) = ctx.conn.proxy_protocol.as_ref().and_then(|p| p.tlv(name)) {
                    out.extend_from_slice(&v);
                }
            }
            Var::ProxyProtocolPort => {
                if let Some(pp) = &ctx.conn.proxy_protocol {
                    push_u64(out, pp.src_port as u64)
                }
            }
            Var::ProxyProtocolServerAddr => {
                if let Some(pp) = &ctx.conn.proxy_protocol {
                    out.extend_from_slice(pp.dst_addr.as_bytes())
                }
            }
            Var::ProxyProtocolServerPort => {
                if let Some(pp) = &ctx.conn.proxy_protocol {
                    push_u64(out, pp.dst_port as u64)
                }
            }
            Var::BinaryRemoteAddr => match ctx.client().ip() {
                std::net::IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
                std::net::IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
            },
            Var::LimitReqStatus => out.extend_from_slice(ctx.limit.req_status.as_str().as_bytes()),
            Var::LimitConnStatus => out.extend_from_slice(ctx.limit.conn_status.as_str().as_bytes()),
            Var::LimitRate => push_u64(out, crate::http::limit::rate::rate_of(ctx)),
            Var::RemoteUser => {
                if let Some(u) = req.header("authorization").and_then(basic_user) {
                    out.extend_from_slice(&u)
                }
            }
            Var::TimeLocal => crate::clock::push_time_local(out),
            Var::TimeIso8601 => {
                crate::http::date::log_time_iso8601(crate::clock::now_secs(), crate::clock::offset(), out)
            }
            Var::Msec => push_secs_ms(out, crate::clock::unix_now_ms()),
            Var::Request => out.extend_from_slice(req.request_line()),
            Var::Status => push_u64(out, self.resp.map(|r| wire_status(r.status)).unwrap_or(0) as u64),
            Var::BodyBytesSent => push_u64(out, self.body_bytes_sent),
            Var::BytesSent => push_u64(out, self.bytes_sent),
            Var::RequestTime => push_secs_ms(out, self.request_time_ms),
            // An internal redirect that made the request a GET (error_page,
            // X-Accel-Redirect) renames it too, as nginx's method_name.
            // (An HTTP/2 extended CONNECT is routed as a GET but stays
            // CONNECT.)
            Var::RequestMethod if ctx.redirects > 0 && req.method == crate::http::request::Method::Get => {
                out.extend_from_slice(b"GET")
            }
            Var::RequestMethod => out.extend_from_slice(req.method_bytes()),
            Var::RequestUri => out.extend_from_slice(req.target()),
            Var::Uri => out.extend_from_slice(&req.path),
            Var::Args => {
                if let Some(a) = &req.args {
                    out.extend_from_slice(a)
                }
            }
            Var::IsArgs => {
                if req.args.is_some() {
                    out.push(b'?')
                }
            }
            Var::Arg(name) => {
                if let Some(v) = req.args.as_deref().and_then(|a| query_arg(a, name)) {
                    out.extend_from_slice(v)
                }
            }
            Var::Host => {
                if req.host.is_empty() {
                    out.extend_from_slice(ctx.server.name.as_bytes())
                } else {
                    out.extend_from_slice(&req.host)
                }
            }
            Var::Hostname => out.extend_from_slice(crate::process::hostname().as_bytes()),
            Var::ServerName => out.extend_from_slice(ctx.server.name.as_bytes()),
            Var::ServerAddr if ctx.conn.unix.is_some() => {
                out.extend_from_slice(b"unix:");
                out.extend_from_slice(ctx.conn.unix.as_deref().unwrap_or("").as_bytes());
            }
            Var::ServerPort if ctx.conn.unix.is_some() => {}
            Var::ServerAddr => {
                use std::io::Write;
                let _ = write!(out, "{}", ctx.conn.local.ip());
            }
            Var::ServerPort => push_u64(out, ctx.conn.local.port() as u64),
            Var::ServerProtocol => out.extend_from_slice(req.version().as_str().as_bytes()),
            Var::Scheme => out.extend_from_slice(if ctx.conn.tls.is_some() { b"https" } else { b"http" }),
            Var::Https => out.extend_from_slice(if ctx.conn.tls.is_some() { b"on" } else { b"" }),
            Var::Http2 => out.extend_from_slice(match (ctx.conn.http2, ctx.conn.tls.is_some()) {
                (true, true) => b"h2",
                (true, false) => b"h2c",
                _ => b"",
            }),
            Var::Http3 => out.extend_from_slice(if ctx.conn.http3 { b"h3" } else { b"" }),
            Var::SslProtocol => out.extend_from_slice(ctx.conn.tls.as_ref().map_or("", |t| t.protocol).as_bytes()),
            Var::SslCipher => out.extend_from_slice(ctx.conn.tls.as_ref().map_or("", |t| t.cipher).as_bytes()),
            Var::SslServerName => out.extend_from_slice(
                ctx.conn.tls.as_ref().and_then(|t| t.server_name.as_deref()).unwrap_or("").as_bytes(),
            ),
            // As at a handshake: the server's ACME certificate as `data:` PEM.
            Var::AcmeCertificate | Var::AcmeCertificateKey => {
                if let Some(i) = ctx.server.conf.ssl.acme.as_ref().and_then(|s| s.current()) {
                    out.extend_from_slice(b"data:");
                    out.extend_from_slice(if *var == Var::AcmeCertificate { &i.chain_pem } else { &i.key_pem });
                }
            }
            Var::ProxyHost => {
                let fixed = match &ctx.conf.proxy.pass {
                    Some(crate::config::proxy::Pass::Fixed(p)) => Some(p),
                    _ => None,
                };
                if let Some(p) = ctx.proxy_pass.as_ref().or(fixed) {
                    out.extend_from_slice(p.proxy_host.as_bytes());
                }
            }
            Var::ProxyAddXForwardedFor => {
                if let Some(x) = req.header("x-forwarded-for") {
                    out.extend_from_slice(x);
                    out.extend_from_slice(b", ");
                }
                if ctx.client_is_unix() {
                    out.extend_from_slice(b"unix:");
                } else {
                    push_ip(out, ctx.client().ip());
                }
            }
            Var::UpstreamAddr => {
                push_list(out, &ctx.upstream.addr, &ctx.upstream.groups, |out, a| out.extend_from_slice(a.as_bytes()))
            }
            Var::UpstreamStatus => {
                push_list(out, &ctx.upstream.status, &ctx.upstream.groups, |out, s| push_u64(out, u64::from(*s)))
            }
            Var::UpstreamConnectTime => push_ms_list(out, &ctx.upstream.connect_ms, &ctx.upstream.groups),
            Var::UpstreamHeaderTime => push_ms_list(out, &ctx.upstream.header_ms, &ctx.upstream.groups),
            Var::UpstreamCacheStatus => {
                if let Some(s) = ctx.cache_status {
                    out.extend_from_slice(s.as_bytes())
                }
            }
            Var::UpstreamResponseTime if self.in_flight => {
                let last = ctx.upstream.response_ms.len().saturating_sub(1);
                let i = std::cell::Cell::new(0);
                push_list(out, &ctx.upstream.response_ms, &ctx.upstream.groups, |out, v| {
                    match v {
                        Some(ms) if i.get() < last => push_secs_ms(out, *ms),
                        _ => out.push(b'-'),
                    }
                    i.set(i.get() + 1);
                })
            }
            Var::UpstreamResponseTime => push_ms_list(out, &ctx.upstream.response_ms, &ctx.upstream.groups),
            Var::UpstreamResponseLength => {
                push_list(out, &ctx.upstream.response_len, &ctx.upstream.groups, |out, n| push_u64(out, *n))
            }
            Var::UpstreamBytesReceived => {
                push_list(out, &ctx.upstream.bytes_received, &ctx.upstream.groups, |out, n| push_u64(out, *n))
            }
            Var::UpstreamBytesSent => {
                push_list(out, &ctx.upstream.bytes_sent, &ctx.upstream.groups, |out, n| push_u64(out, *n))
            }
            Var::Pipe => out.push(if ctx.conn.pipelined { b'p' } else { b'.' }),
            Var::ConnectionTime
            | Var::RequestCompletion
            | Var::Msie
            | Var::Date(_)
            | Var::ProxyPort
            | Var::Tcpinfo(_)
            | Var::SslAlpnProtocol
            | Var::SslCurve
            | Var::SslCurves
            | Var::SslCiphers
            | Var::SslSessionId
            | Var::SslEarlyData
            | Var::Family(_)
            | Var::UpstreamCookie(_)
            | Var::RequestBody
            | Var::RequestBodyFile => super::more_vars::write(self, var, out),
            Var::Geo(g) => {
                let xff: Vec<&[u8]> = if g.proxies.is_empty() {
                    Vec::new()
                } else {
                    req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"x-forwarded-for")).map(|(_, v)| v).collect()
                };
                let client = (!ctx.client_is_unix()).then(|| ctx.client());
                out.extend_from_slice(g.eval(self, client, &xff));
            }
            Var::Geoip(g) => {
                let xff: Vec<&[u8]> = if g.conf.proxies.is_empty() {
                    Vec::new()
                } else {
                    req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"x-forwarded-for")).map(|(_, v)| v).collect()
                };
                let client = (!ctx.client_is_unix()).then(|| ctx.client());
                g.value(crate::http::geoip::client(&g.conf, client, &xff), out);
            }
            Var::Geoip2(g) => {
                g.value(self.geoip2_address(g), out);
            }
            Var::Split(sc) => out.extend_from_slice(sc.eval(self)),
            Var::Map(m) if m.volatile => m.eval(self, Some(&ctx.map_named), &|re| ctx.captured(re), out),
            Var::Map(m) => {
                let known = ctx
                    .map_values
                    .borrow()
                    .iter()
                    .find(|(d, _)| Arc::ptr_eq(d, m))
                    .map(|(_, v)| out.extend_from_slice(v));
                if known.is_none() {
                    let from = out.len();
                    m.eval(self, Some(&ctx.map_named), &|re| ctx.captured(re), out);
                    ctx.map_values.borrow_mut().push((m.clone(), out[from..].to_vec()));
                }
            }
            Var::Set(sv) => {
                let value = ctx.vars.borrow().get(sv.slot).map(|v| v.as_ref().map(|v| out.extend_from_slice(v)));
                if !matches!(value, Some(Some(()))) {
                    match &sv.fallback {
                        Some(f) => self.write_var(f, out),
                        None => {
                            // nginx warns once: the empty value is then the
                            // variable's for the rest of the request.
                            if ctx.conf.rewrite.warn_uninitialized {
                                crate::log_req!(
                                    ctx,
                                    crate::log::error::Level::Warn,
                                    "using uninitialized \"{}\" variable",
                                    sv.name
                                );
                            }
                            ctx.set_var(sv.slot, Vec::new());
                        }
                    }
                }
            }
            // Empty on a plain connection, as nginx's SSL variables.
            Var::SslClientVerify => {
                if let Some(t) = &ctx.conn.tls {
                    out.extend_from_slice(t.client_verify().as_bytes())
                }
            }
            Var::CompressRatio(want) => {
                if let Some(crate::http::response::Body::Compressed(z)) = self.resp.map(|r| &r.body)
                    && let Some((c, zin, zout)) = z.totals()
                    && c == *want
                {
                    crate::http::filter::compress::stream::push_ratio(zin, zout, out)
                }
            }
            Var::SslClient(which) => {
                if let Some(c) = ctx.conn.tls.as_ref().and_then(|t| t.client_cert.as_ref()) {
                    crate::tls::client_cert::var(c, *which, out)
                }
            }
            Var::SslSessionReused => {
                out.extend_from_slice(if ctx.conn.tls.as_ref().is_some_and(|t| t.resumed) { b"r" } else { b"." })
            }
            Var::Http(name) => {
                // Every header of that name, joined as nginx 1.23+ does
                // (Cookie with "; ", others with ", ").
                let sep: &[u8] = if name == "cookie" { b"; " } else { b", " };
                join_request_headers(req, name, sep, out);
            }
            Var::UpstreamHttp(name) if ctx.upstream.redirected_by.is_some() => {
                let fields = ctx.upstream.redirected_by.iter().flatten();
                let mut first = true;
                for (_, v) in fields.filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    if !first {
                        out.extend_from_slice(b", ");
                    }
                    first = false;
                    out.extend_from_slice(v);
                }
            }
            Var::SentHttp(name) | Var::UpstreamHttp(name) => {
                // The origin's headers are those of a response it gave.
                let from_origin = matches!(var, Var::SentHttp(_)) || !ctx.upstream.status.is_empty();
                if let Some(r) = self.resp.filter(|_| from_origin) {
                    let v = match name.as_str() {
                        "content-type" => r.content_type.as_deref().map(str::as_bytes),
                        // What the HTTP/1 writer sends, as nginx's variable.
                        "connection" if matches!(var, Var::SentHttp(_)) => Some(match () {
                            _ if r.status == 101 => &b"upgrade"[..],
                            _ if ctx.keep_alive => b"keep-alive",
                            _ => b"close",
                        }),
                        "location" => r.location.as_deref(),
                        "etag" => r.etag.as_deref(),
                        "accept-ranges" if r.accept_ranges && r.status == 200 => Some(&b"bytes"[..]),
                        _ => {
                            // Every header of that name, joined with ", "
                            // (nginx 1.23+).
                            let mut first = true;
                            for (_, v) in r.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                                if !first {
                                    out.extend_from_slice(b", ");
                                }
                                first = false;
                                out.extend_from_slice(v);
                            }
                            None
                        }
                    };
                    if let Some(v) = v {
                        out.extend_from_slice(v)
                    }
                }
            }
            Var::SentTrailer(name) => {
                let mut first = true;
                for (_, v) in ctx.trailers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)) {
                    if !first {
                        out.extend_from_slice(b", ");
                    }
                    first = false;
                    out.extend_from_slice(v);
                }
            }
            Var::Cookie(name) => {
                if let Some(v) = request_cookie(req, name) {
                    out.extend_from_slice(v)
                }
            }
            Var::Connection => push_u64(out, ctx.conn.id),
            Var::ConnectionRequests => push_u64(out, ctx.conn.requests),
            Var::Pid => push_u64(out, std::process::id() as u64),
            Var::RequestLength => push_u64(out, self.request_length),
            Var::ContentType => join_request_headers(req, "content-type", b", ", out),
            Var::ContentLength => {
                if let Some(v) = req.header("content-length") {
                    out.extend_from_slice(v)
                } else if let Some(n) = ctx.body_len {
                    push_u64(out, n)
                }
            }
            Var::DocumentRoot => document_root(ctx, out),
            Var::RealpathRoot => {
                let mut root = Vec::new();
                document_root(ctx, &mut root);
                use std::os::unix::ffi::{OsStrExt, OsStringExt};
                let p = std::path::Path::new(std::ffi::OsStr::from_bytes(&root));
                // nginx: the root when it cannot be resolved (and logs).
                match std::fs::canonicalize(p) {
                    Ok(real) => out.extend_from_slice(&real.into_os_string().into_vec()),
                    Err(_) => out.extend_from_slice(&root),
                }
            }
            Var::FastcgiScriptName => out.extend_from_slice(&crate::http::fastcgi::script_name(ctx)),
            Var::FastcgiPathInfo => out.extend_from_slice(&crate::http::fastcgi::path_info(ctx)),
            Var::RequestFilename => match &ctx.filename {
                Some(f) => out.extend_from_slice(f),
                None => {
                    let mut p = Vec::new();
                    crate::http::handler::static_file::map_path(ctx, &req.path, &mut p);
                    out.extend_from_slice(&p);
                }
            },
            Var::Version => out.extend_from_slice(crate::config::Config::version().as_bytes()),
            Var::InvalidReferer => {
                if crate::http::access::referer::invalid(ctx) {
                    out.push(b'1')
                }
            }
            Var::SecureLink => out.extend(crate::http::access::secure_link::value(ctx).unwrap_or_default()),
            Var::SecureLinkExpires => out.extend(crate::http::access::secure_link::expires(ctx).unwrap_or_default()),
            Var::SliceRange => crate::http::slice::range_var(ctx, out),
            Var::UidGot => crate::http::userid::got_var(ctx, out),
            Var::UidSet => crate::http::userid::set_var(ctx, out),
            Var::UidReset => {}
            Var::Capture(n) => {
                if ctx.captures.is_empty() {
                    if let Some((nums, _)) = server_captures(ctx)
                        && let Some(c) = nums.get(*n)
                    {
                        out.extend_from_slice(c);
                    }
                } else if let Some(c) = ctx.captures.get(*n) {
                    out.extend_from_slice(c)
                }
            }
            Var::Named(name) => {
                let from_map = ctx.map_named.borrow().iter().find(|(k, _)| **k == **name).map(|(_, v)| v.clone());
                let here =
                    from_map.or_else(|| ctx.named.iter().rev().find(|(k, _)| **k == **name).map(|(_, v)| v.clone()));
                let v = here.or_else(|| {
                    server_captures(ctx)
                        .and_then(|(_, named)| named.into_iter().find(|(k, _)| **k == **name))
                        .map(|(_, v)| v)
                });
                if let Some(v) = v {
                    out.extend_from_slice(&v);
                }
            }
        }
    }
}

/// Named captures: (name, value).
type NamedCaptures = Vec<(std::sync::Arc<str>, Vec<u8>)>;

/// The captures of the regex `server_name` that chose this request's
/// server (numbered, then named), found again when a variable needs them:
/// rare enough not to cost every request a capture.
fn server_captures(ctx: &ReqCtx<'_, '_>) -> Option<(Vec<Vec<u8>>, NamedCaptures)> {
    let host = std::str::from_utf8(&ctx.req.host).ok()?;
    let names = &ctx.group.names;
    if names.exact.contains_key(host) {
        return None;
    }
    let (re, _) = names.regex.iter().find(|(re, s)| std::ptr::eq(&**s, ctx.server) && re.is_match(host.as_bytes()))?;
    let nums = re.capture_values(host.as_bytes())?;
    let named = re.names().iter().map(|(i, n)| (n.clone(), nums.get(*i).cloned().unwrap_or_default())).collect();
    Some((nums, named))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ip_text_matches_display() {
        for ip in ["127.0.0.1", "0.0.0.0", "255.255.255.255", "10.20.0.3", "::1", "2001:db8::8:1"] {
            let ip: std::net::IpAddr = ip.parse().unwrap();
            let mut out = Vec::new();
            super::push_ip(&mut out, ip);
            assert_eq!(out, ip.to_string().into_bytes());
        }
    }
}
