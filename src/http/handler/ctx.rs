//! Per-request processing state shared by the pipeline stages, and the
//! variable values it exposes to templates and log formats.

use std::net::SocketAddr;

use crate::config::model::{ListenGroup, LocConf, Server};
use crate::http::request::Request;
use crate::http::response::Response;
use crate::variables::{Var, VarSource};

/// What the connection knows, independent of the request.
#[derive(Clone)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// nginx's `$connection`: a serial number per worker.
    pub id: u64,
    /// `$connection_requests`: this request's number on the connection.
    pub requests: u64,
    /// Set after a TLS handshake (behind a pointer: plain connections, which
    /// may idle by the thousand, pay one word; h2 streams share it).
    pub tls: Option<std::rc::Rc<crate::tls::handshake::TlsInfo>>,
    /// The request came over HTTP/2 (`$http2`).
    pub http2: bool,
    /// The request came over HTTP/3 (`$http3`).
    pub http3: bool,
    /// The request was already buffered when the previous one on the
    /// connection ended (`$pipe`).
    pub pipelined: bool,
    /// Plain HTTP arrived on a TLS address: the request gets nginx's 497.
    pub plain_on_tls: bool,
    /// What a PROXY protocol header said (`listen ... proxy_protocol`).
    pub proxy_protocol: Option<std::rc::Rc<crate::http::connection::proxy_protocol::ProxyAddrs>>,
    /// When the connection was accepted: the low 32 bits of the wall
    /// clock in milliseconds, so differences are right for 49 days
    /// (`keepalive_time`, `$connection_time`; 4 bytes, in what was padding).
    pub started: u32,
    /// The client socket's descriptor, for `$tcpinfo_*` (-1: none, as for
    /// the fuzzer's in-memory client).
    pub fd: i32,
}

impl ConnInfo {
    pub fn new(peer: SocketAddr, local: SocketAddr, id: u64) -> ConnInfo {
        ConnInfo {
            peer,
            local,
            id,
            requests: 0,
            tls: None,
            http2: false,
            http3: false,
            pipelined: false,
            plain_on_tls: false,
            proxy_protocol: None,
            started: crate::clock::unix_ms() as u32,
            fd: -1,
        }
    }

    /// Milliseconds since the connection was accepted.
    pub fn age_ms(&self) -> u64 {
        u64::from((crate::clock::unix_ms() as u32).wrapping_sub(self.started))
    }

    /// `keepalive_time`: the connection may take no more requests once it
    /// has been open this long (nginx's check).
    pub fn past_keepalive_time(&self, limit: std::time::Duration) -> bool {
        self.age_ms() > limit.as_millis() as u64
    }
}

pub struct ReqCtx<'c, 'a> {
    pub group: &'c ListenGroup,
    pub server: &'c Server,
    /// The settings of the matched location (or the server level).
    pub conf: &'c LocConf,
    pub req: Request<'a>,
    pub conn: &'a ConnInfo,
    /// Internal redirects so far (index, try_files, error_page).
    pub redirects: u32,
    /// `$request_filename` once the URI was mapped to a file.
    pub filename: Option<Vec<u8>>,
    /// Set while serving an `error_page`: the status the response keeps,
    /// and the reason conditionals and ranges are off (0: `error_page =`,
    /// the page keeps its own status).
    pub err_status: Option<u16>,
    /// `$1`..`$9` of the last regex that matched (a regex location, a
    /// `rewrite` or `if` regex; index 0: whole match). Empty until one did:
    /// then those of a regex `server_name`. A `rewrite` or `if` regex that
    /// does not match leaves `[""]` (no captures), as nginx resets them.
    pub captures: Vec<Vec<u8>>,
    /// Named captures of the regexes that matched (regex locations,
    /// `rewrite` and `if`), the latest value of each name.
    pub named: Vec<(std::sync::Arc<str>, Vec<u8>)>,
    /// Named captures of the `map` regexes evaluated so far: nginx makes
    /// them variables once the map's own variable has been evaluated (a
    /// later one of the same name wins, as over a location's).
    pub map_named: std::cell::RefCell<Vec<(std::sync::Arc<str>, Vec<u8>)>>,
    /// `$upstream_*`: one entry per peer tried, joined with ", " as nginx.
    pub upstream: UpstreamLog,
    /// Set for an HTTP/2 extended CONNECT (RFC 8441) WebSocket stream: the
    /// `Sec-WebSocket-Key` of the HTTP/1.1 Upgrade request the proxy sends
    /// the origin in its place (see `proxy::websocket`).
    pub websocket_key: Option<String>,
    /// The `proxy_pass` this request went to (resolved when it has
    /// variables), for `$proxy_host` and error-log lines.
    pub proxy_pass: Option<std::sync::Arc<crate::config::proxy::ProxyPass>>,
    /// `$upstream_cache_status` (None: the cache was not asked).
    pub cache_status: Option<&'static str>,
    /// The `sluice_status` slot of the cache zone asked
    /// (`ZoneConf::metrics`), counted with `cache_status` when logged.
    pub cache_zone: u32,
    /// The client address `set_real_ip_from` let a header or the PROXY
    /// protocol name (port 0: none given); see [`ReqCtx::client`].
    pub realip: Option<SocketAddr>,
    /// The cache's business with this request beyond its status: the
    /// validators of an entry being revalidated, a refresh to run after
    /// the response (`proxy_cache_background_update`).
    pub cache: Option<Box<crate::http::cache::serve::ReqCache>>,
    /// A precompressed sibling made the answer depend on Accept-Encoding
    /// (nginx's `r->gzip_vary`): `Vary` goes out with `gzip_vary on`.
    pub vary_encoding: bool,
    /// Values of the variables `set` writes, by slot (`rewrite::vars`);
    /// kept across internal redirects, as nginx keeps `r->variables`.
    pub vars: std::cell::RefCell<Vec<Option<Vec<u8>>>>,
    /// A rewrite changed the URI: location matching restarts once the
    /// location's rewrite directives are done (nginx's `r->uri_changed`).
    pub uri_changed: bool,
    /// False after `rewrite ... break` (or `break` after a rewrite): the URI
    /// no longer belongs to the location, so `alias` refuses it and a
    /// `proxy_pass` URI part is not substituted (nginx's `r->valid_location`).
    pub valid_location: bool,
    /// The client's request target still is the request's URI and
    /// arguments: no rewrite matched and `$args` was not set (nginx's
    /// `r->valid_unparsed_uri`; internal redirects count in `redirects`).
    pub unparsed_uri_valid: bool,
    /// `$fastcgi_path_info` split off before `try_files` moved the URI to
    /// the script name: (script name, path info).
    pub fastcgi_path_info: Option<(Vec<u8>, Vec<u8>)>,
    /// The length of a request body read whole without a Content-Length
    /// (chunked), for `$content_length` as nginx sets it.
    pub body_len: Option<u64>,
    /// Request body bytes read from the client (for `$request_length`).
    pub body_read: u64,
    /// An `auth_request` or `mirror` subrequest: no limit or access phase.
    pub subrequest: bool,
    /// The request reached a location with `mirror` ([`crate::http::handler::mirror`]).
    pub mirror_due: bool,
    /// The location's mirrors were started (once per request).
    pub mirrored: bool,
    /// This request's `auth_request` answer.
    pub auth: crate::http::access::auth_request::State,
    /// `$request_id`, made on first use and kept for the request.
    pub request_id: std::cell::Cell<Option<[u8; 16]>>,
    /// limit_req / limit_conn / limit_rate state of the request.
    pub limit: crate::http::limit::Limits,
    /// A 401 of the access phase waits this long first (`auth_delay`).
    pub auth_delay: Option<std::time::Duration>,
    /// `$request_body`: a copy of a body the proxy read whole into memory
    /// (kept only when some template reads the variable).
    pub request_body: Option<Vec<u8>>,
    /// `$request_body_file`: the named temporary file of a body the proxy
    /// read into a file.
    pub request_body_file: Option<std::path::PathBuf>,
}

pub use super::upstream_log::{Tries, UpstreamLog};
use super::upstream_log::{push_list, push_ms_list};

/// Milliseconds as nginx prints times: seconds with three decimals.
pub(super) fn push_secs_ms(out: &mut Vec<u8>, ms: u64) {
    push_u64(out, ms / 1000);
    out.push(b'.');
    let frac = ms % 1000;
    out.extend_from_slice(&[b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8]);
}

/// Values for a template: the request, and once it exists, the response.
pub struct Vars<'r, 'c, 'a> {
    pub ctx: &'r ReqCtx<'c, 'a>,
    pub resp: Option<&'r Response<'c>>,
    pub bytes_sent: u64,
    pub body_bytes_sent: u64,
    pub request_time_ms: u64,
    pub request_length: u64,
    /// The whole response went out (`$request_completion`).
    pub complete: bool,
}

impl<'r, 'c, 'a> Vars<'r, 'c, 'a> {
    pub fn request(ctx: &'r ReqCtx<'c, 'a>) -> Self {
        Vars {
            ctx,
            resp: None,
            bytes_sent: 0,
            body_bytes_sent: 0,
            request_time_ms: 0,
            request_length: 0,
            complete: false,
        }
    }
}

/// Appends `n` in decimal.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

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

/// The raw value of argument `name` (case-insensitive, as `$arg_name`).
pub(crate) fn query_arg<'q>(args: &'q [u8], name: &str) -> Option<&'q [u8]> {
    args.split(|&b| b == b'&').find_map(|kv| {
        let (k, v) = match kv.iter().position(|&b| b == b'=') {
            Some(i) => (&kv[..i], &kv[i + 1..]),
            None => (kv, &b""[..]),
        };
        k.eq_ignore_ascii_case(name.as_bytes()).then_some(v)
    })
}

fn cookie<'q>(header: &'q [u8], name: &str) -> Option<&'q [u8]> {
    header.split(|&b| b == b';').find_map(|kv| {
        let kv = kv.strip_prefix(b" ").unwrap_or(kv);
        let i = kv.iter().position(|&b| b == b'=')?;
        (&kv[..i] == name.as_bytes()).then_some(&kv[i + 1..])
    })
}

impl VarSource for Vars<'_, '_, '_> {
    fn empty_found(&self, var: &Var) -> bool {
        let req = &self.ctx.req;
        match var {
            Var::Http(name) => req.header(name).is_some(),
            Var::Arg(name) => req.args.as_deref().and_then(|a| query_arg(a, name)).is_some(),
            Var::Cookie(name) => req.header("cookie").and_then(|h| cookie(h, name)).is_some(),
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
            Var::RemoteAddr => push_ip(out, ctx.client().ip()),
            Var::RemotePort => {
                // A realip address given without a port has none (nginx: empty).
                let port = ctx.client().port();
                if port != 0 {
                    push_u64(out, port as u64)
                }
            }
            Var::RequestId => {
                let id = match ctx.request_id.get() {
                    Some(id) => id,
                    None => {
                        // nginx: 16 random bytes, printed as 32 hex digits.
                        let mut id = [0u8; 16];
                        if aws_lc_rs::rand::fill(&mut id).is_err() {
                            id[..8].copy_from_slice(&ctx.conn.id.to_le_bytes());
                            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
                            id[8..].copy_from_slice(&now.map_or(0, |d| d.as_nanos() as u64).to_le_bytes());
                        }
                        ctx.request_id.set(Some(id));
                        id
                    }
                };
                for b in id {
                    out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
                }
            }
            Var::Connections(which) => {
                let t = crate::worker::stats::totals();
                push_u64(out, [t.active, t.reading, t.writing, t.waiting][usize::from(*which).min(3)]);
            }
            Var::RealipRemoteAddr => push_ip(out, ctx.conn.peer.ip()),
            Var::RealipRemotePort => push_u64(out, ctx.conn.peer.port() as u64),
            Var::ProxyProtocolAddr => {
                if let Some(pp) = &ctx.conn.proxy_protocol {
                    out.extend_from_slice(pp.src_addr.as_bytes())
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
                push_ip(out, ctx.client().ip());
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
            Var::UpstreamResponseTime => push_ms_list(out, &ctx.upstream.response_ms, &ctx.upstream.groups),
            Var::UpstreamResponseLength => {
                push_list(out, &ctx.upstream.response_len, &ctx.upstream.groups, |out, n| push_u64(out, *n))
            }
            Var::UpstreamBytesReceived => {
                push_list(out, &ctx.upstream.bytes_received, &ctx.upstream.groups, |out, n| push_u64(out, *n))
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
            | Var::SslEarlyData
            | Var::Family(_)
            | Var::UpstreamCookie(_)
            | Var::RequestBody
            | Var::RequestBodyFile => super::more_vars::write(self, var, out),
            Var::Geo(g) => {
                let source = g.source.as_ref().map(|t| t.render_to_vec(self));
                let xff: Vec<&[u8]> = if g.proxies.is_empty() {
                    Vec::new()
                } else {
                    req.headers().filter(|(n, _)| n.eq_ignore_ascii_case(b"x-forwarded-for")).map(|(_, v)| v).collect()
                };
                let ip = g.address(ctx.client(), source.as_deref(), &xff);
                out.extend_from_slice(g.lookup(ip));
            }
            Var::Split(sc) => {
                let key = sc.source.render_to_vec(self);
                out.extend_from_slice(sc.lookup(&key));
            }
            Var::Map(m) => {
                let mut key = Vec::new();
                m.source.render(self, &mut key);
                match m.lookup(&key) {
                    (t, None) => t.render(self, out),
                    (t, Some((re, spans))) => {
                        // nginx: the regex's named captures are variables
                        // from now on in this request.
                        let mut set = ctx.map_named.borrow_mut();
                        for (i, name) in re.names() {
                            let v =
                                spans.get(*i).copied().flatten().map(|(a, b)| key[a..b].to_vec()).unwrap_or_default();
                            set.retain(|(n, _)| n != name);
                            set.push((name.clone(), v));
                        }
                        drop(set);
                        ctx.captured(re);
                        t.render(
                            &crate::config::map::WithCaptures { inner: self, re, subject: &key, spans: &spans },
                            out,
                        )
                    }
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
                if let Some(v) = req.header(name) {
                    out.extend_from_slice(v)
                }
            }
            Var::SentHttp(name) | Var::UpstreamHttp(name) => {
                // The origin's headers are those of a response it gave.
                let from_origin = matches!(var, Var::SentHttp(_)) || !ctx.upstream.status.is_empty();
                if let Some(r) = self.resp.filter(|_| from_origin) {
                    let v = match name.as_str() {
                        "content-type" => r.content_type.as_deref().map(str::as_bytes),
                        "location" => r.location.as_deref(),
                        "etag" => r.etag.as_deref(),
                        _ => r.header(name),
                    };
                    if let Some(v) = v {
                        out.extend_from_slice(v)
                    }
                }
            }
            Var::Cookie(name) => {
                if let Some(v) = req.header("cookie").and_then(|h| cookie(h, name)) {
                    out.extend_from_slice(v)
                }
            }
            Var::Connection => push_u64(out, ctx.conn.id),
            Var::ConnectionRequests => push_u64(out, ctx.conn.requests),
            Var::Pid => push_u64(out, std::process::id() as u64),
            Var::RequestLength => push_u64(out, self.request_length),
            Var::ContentType => {
                if let Some(v) = req.header("content-type") {
                    out.extend_from_slice(v)
                }
            }
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

/// `$document_root`: the root (rendered when it has variables); with
/// `alias`, the alias path, as nginx gives it.
pub(crate) fn document_root(ctx: &ReqCtx<'_, '_>, out: &mut Vec<u8>) {
    match &ctx.conf.root.template {
        Some(t) => t.render(&Vars::request(ctx), out),
        None => out.extend_from_slice(ctx.conf.root.path.as_bytes()),
    }
}

/// nginx's internal 494 goes on the wire (and in `$status`) as 400.
pub fn wire_status(s: u16) -> u16 {
    if s == 494 { 400 } else { s }
}

impl<'c, 'a> ReqCtx<'c, 'a> {
    /// A request about to be routed: server level settings until a location
    /// is matched.
    pub fn new(group: &'c ListenGroup, server: &'c Server, req: Request<'a>, conn: &'a ConnInfo) -> Self {
        ReqCtx {
            group,
            server,
            conf: &server.conf,
            req,
            conn,
            redirects: 0,
            filename: None,
            err_status: None,
            captures: Vec::new(),
            named: Vec::new(),
            map_named: Default::default(),
            upstream: UpstreamLog::default(),
            body_read: 0,
            websocket_key: None,
            proxy_pass: None,
            cache_status: None,
            cache_zone: u32::MAX,
            realip: None,
            cache: None,
            vary_encoding: false,
            vars: Default::default(),
            uri_changed: false,
            valid_location: true,
            unparsed_uri_valid: true,
            fastcgi_path_info: None,
            body_len: None,
            request_id: Default::default(),
            subrequest: false,
            mirror_due: false,
            mirrored: false,
            auth: Default::default(),
            limit: Default::default(),
            auth_delay: None,
            request_body: None,
            request_body_file: None,
        }
    }

    /// The client as the request sees it (`$remote_addr`, access rules,
    /// limits, the error log): the connection's peer unless the realip
    /// module replaced it.
    pub fn client(&self) -> SocketAddr {
        self.realip.unwrap_or(self.conn.peer)
    }

    /// A regex capture of the same name was written: the variable reads it
    /// from now on (its `set` value is gone, as in nginx's one slot).
    pub fn captured(&self, re: &crate::pattern::Regex) {
        if re.set_slots().is_empty() {
            return;
        }
        let mut vars = self.vars.borrow_mut();
        for &s in re.set_slots() {
            if let Some(v) = vars.get_mut(s) {
                *v = None;
            }
        }
    }

    /// Stores a `set` variable's value.
    pub fn set_var(&self, slot: usize, value: Vec<u8>) {
        let mut vars = self.vars.borrow_mut();
        if vars.len() <= slot {
            vars.resize(slot + 1, None);
        }
        vars[slot] = Some(value);
    }

    /// nginx's error-log suffix for a request: client, server, request line,
    /// and host when the client sent one.
    pub fn log_suffix(&self) -> String {
        let mut s = format!(
            "client: {}, server: {}, request: \"{}\"",
            self.client().ip(),
            self.server.name,
            String::from_utf8_lossy(self.req.request_line())
        );
        if let Some(h) = self.req.header("host") {
            s.push_str(&format!(", host: \"{}\"", String::from_utf8_lossy(h)));
        }
        if let Some(r) = self.req.header("referer") {
            s.push_str(&format!(", referrer: \"{}\"", String::from_utf8_lossy(r)));
        }
        s
    }
}

/// `log_req!(ctx, Level::Error, "open() \"{}\" failed", path)`: a line
/// about a request, for the error logs of the level handling it, between
/// nginx's `*CONNECTION` prefix and `, client: ..., server: ...` suffix.
/// The level comparison comes before the message or suffix is formatted.
#[macro_export]
macro_rules! log_req {
    ($ctx:expr, $lvl:expr, $($arg:tt)*) => {{
        let ctx: &$crate::http::handler::ctx::ReqCtx<'_, '_> = &$ctx;
        $crate::log_to!(ctx.conf.error_log, $lvl, "*{} {}, {}", ctx.conn.id, format_args!($($arg)*), ctx.log_suffix());
    }};
}

/// `$remote_user`: the user name of a Basic Authorization header,
/// decoded as the auth_basic module decodes it, checked or not.
pub fn basic_user(auth: &[u8]) -> Option<Vec<u8>> {
    crate::http::access::basic::decode(auth).map(|c| c.user)
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
    fn basic_auth_user() {
        assert_eq!(super::basic_user(b"Basic dXNlcjE6cGFzcw==").as_deref(), Some(&b"user1"[..]));
        assert_eq!(super::basic_user(b"Bearer x"), None);
        assert_eq!(super::basic_user(b"Basic !!!"), None);
    }

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
