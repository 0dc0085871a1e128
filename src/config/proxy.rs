//! The reverse-proxy configuration: `upstream` blocks and the `proxy_*`
//! location directives, checked and resolved at load time (upstream names,
//! host names and the URI rewrite of `proxy_pass` are all settled here, so
//! the request path only copies bytes).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use super::build::Ctx;
use super::model::LocConf;
use super::parser::{ConfError, Directive};
use super::set_main::{arg, invalid};
use super::table::R;
use super::value;
use crate::variables::{Part, Template, Var};

/// One `server` line of an `upstream` block.
#[derive(Clone, Debug)]
pub struct PeerConf {
    /// Unused for a unix-socket peer.
    pub addr: SocketAddr,
    /// `unix:/path`: a unix-domain socket instead of `addr`.
    pub unix: Option<std::path::PathBuf>,
    /// As written (`host:port`), for `$upstream_addr`-style logs and hashing;
    /// shared, so logging the peer a request went to copies no string.
    pub name: std::sync::Arc<str>,
    pub weight: u32,
    pub max_fails: u32,
    pub fail_timeout: Duration,
    pub backup: bool,
    pub down: bool,
    /// 0: unlimited.
    pub max_conns: u32,
    /// NGINX Plus's `drain`: no new requests but those bound to the peer
    /// (`sticky`).
    pub drain: bool,
    /// NGINX Plus's `slow_start=T`: the weight grows from zero over T
    /// after the peer is added or comes back; zero: none.
    pub slow_start: Duration,
    /// NGINX Plus's `route=STRING`: the server's name for `sticky` (the
    /// cookie's value, what `sticky route` matches). None: the MD5 of its
    /// address (`upstream::sticky::peer_id`).
    pub route: Option<Arc<str>>,
}

impl PeerConf {
    /// A server with nginx's defaults (weight=1 max_fails=1 fail_timeout=10s).
    pub fn new(addr: SocketAddr, unix: Option<std::path::PathBuf>, name: String) -> PeerConf {
        PeerConf {
            addr,
            unix,
            name: name.into(),
            weight: 1,
            max_fails: 1,
            fail_timeout: Duration::from_secs(10),
            backup: false,
            down: false,
            max_conns: 0,
            drain: false,
            slow_start: Duration::ZERO,
            route: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Balance {
    RoundRobin,
    LeastConn,
    IpHash,
    /// `hash KEY [consistent]`: the key may hold variables.
    Hash {
        key: Template,
        consistent: bool,
    },
    Random {
        two: bool,
        least_conn: bool,
    },
}

#[derive(Debug)]
pub struct Upstream {
    pub name: String,
    /// Position in `HttpConf::upstreams`, which workers index their peer
    /// state and connection pools by.
    pub index: usize,
    pub peers: Vec<PeerConf>,
    pub balance: Balance,
    /// Idle connections kept per worker (`keepalive`); 0 keeps none.
    pub keepalive: usize,
    pub keepalive_requests: u64,
    pub keepalive_timeout: Duration,
    /// `keepalive_time`: a connection open longer is closed once its
    /// request is done, not kept for another.
    pub keepalive_time: Duration,
    /// Made for a `proxy_pass http://host:port` without an upstream block.
    pub implicit: bool,
    /// `queue N [timeout=T]`: requests wait for a `max_conns` slot.
    pub queue: Option<Arc<crate::upstream::queue::Queue>>,
    /// Tengine's `check`: the active health check and its shared peer state.
    pub check: Option<Arc<crate::upstream::check::Check>>,
    /// `zone` with `server ... resolve`: the servers change at run time;
    /// workers balance over the zone's list (and `peers` is empty).
    pub zone: Option<Arc<crate::upstream::zone::Zone>>,
    /// `sticky`: session persistence in front of the balancer.
    pub sticky: Option<Arc<crate::upstream::sticky::Sticky>>,
}

/// What `proxy_pass` points at, resolved.
#[derive(Debug)]
pub struct ProxyPass {
    pub upstream: Arc<Upstream>,
    /// The URI part of `proxy_pass` (`http://b/new/` gives `/new/`); None
    /// passes the client's URI unchanged.
    pub uri: Option<Vec<u8>>,
    /// `https://`: TLS to the origin.
    pub tls: bool,
    /// `$proxy_host`: the host (and port unless 80) as written.
    pub proxy_host: String,
    /// The matched location's prefix, which a URI part replaces.
    pub location_len: usize,
    /// The URI part replaces the whole request URI (a URL with variables,
    /// as nginx passes it).
    pub uri_whole: bool,
    /// What the upstream speaks.
    pub protocol: Protocol,
}

/// The protocols the upstream core speaks: the seam between the shared
/// machinery (`crate::http::proxy`: peers, pools, queue, retries, timeouts,
/// read-ahead, cache, logs) and what each protocol does its own way (how
/// the request is written, how the response head and body are framed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// `proxy_pass`: HTTP/1.x (over TLS with `https://`).
    Http,
    /// `fastcgi_pass` (`crate::http::fastcgi`).
    FastCgi,
    /// `uwsgi_pass` (`crate::http::uwsgi`).
    Uwsgi,
    /// `scgi_pass` (`crate::http::scgi`).
    Scgi,
    /// `grpc_pass` (`crate::http::grpc`): HTTP/2 to the origin.
    Grpc,
    /// `memcached_pass` (`crate::http::memcached`).
    Memcached,
}

/// `proxy_pass`, as written: settled at load time, or with variables.
#[derive(Clone, Debug)]
pub enum Pass {
    Fixed(Arc<ProxyPass>),
    Vars(Arc<Template>),
}

/// Conditions under which a request goes to the next peer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NextUpstream {
    pub error: bool,
    pub timeout: bool,
    pub invalid_header: bool,
    pub http_500: bool,
    pub http_502: bool,
    pub http_503: bool,
    pub http_504: bool,
    pub http_403: bool,
    pub http_404: bool,
    pub http_429: bool,
    pub non_idempotent: bool,
}

impl NextUpstream {
    pub const DEFAULT: NextUpstream = NextUpstream {
        error: true,
        timeout: true,
        invalid_header: false,
        http_500: false,
        http_502: false,
        http_503: false,
        http_504: false,
        http_403: false,
        http_404: false,
        http_429: false,
        non_idempotent: false,
    };
    pub const OFF: NextUpstream = NextUpstream { error: false, timeout: false, ..NextUpstream::DEFAULT };

    pub fn on_status(&self, status: u16) -> bool {
        match status {
            500 => self.http_500,
            502 => self.http_502,
            503 => self.http_503,
            504 => self.http_504,
            403 => self.http_403,
            404 => self.http_404,
            429 => self.http_429,
            _ => false,
        }
    }
}

/// The settings every upstream protocol shares (the `proxy_*` and
/// `fastcgi_*` directives of the same name set them): timeouts, retries,
/// read-ahead buffering, error interception and header filtering. The
/// upstream core (`crate::http::proxy`) reads only these, whichever protocol the
/// location speaks.
#[derive(Clone)]
pub struct UpstreamConf {
    /// `*_hide_header` / `*_pass_header`, lowercase.
    pub hide_headers: Vec<String>,
    pub pass_headers: Vec<String>,
    pub connect_timeout: Duration,
    pub send_timeout: Duration,
    pub read_timeout: Duration,
    pub next_upstream: NextUpstream,
    pub next_upstream_tries: u32,
    pub next_upstream_timeout: Duration,
    /// `*_buffering`: read the origin ahead of the client (the origin's
    /// `X-Accel-Buffering` may change it per response).
    pub buffering: bool,
    pub buffer_size: usize,
    pub buffers: super::proxy_buffers::BufferConf,
    pub request_buffering: bool,
    /// Whether the origin request goes on when the client leaves.
    pub ignore_client_abort: bool,
    pub intercept_errors: bool,
    /// `*_force_ranges`: answer byte ranges of the origin's 200 whatever
    /// its `Accept-Ranges` says (one range unless the answer is cached).
    pub force_ranges: bool,
    /// `*_cache*`: the cache engine is shared; each module has its own
    /// settings for it, as nginx's proxy and fastcgi modules do.
    pub cache: crate::http::cache::conf::CacheConf,
    /// `*_bind`: the local address of connections to origins.
    pub bind: Option<std::sync::Arc<crate::upstream::bind::Bind>>,
    /// `*_limit_rate`: bytes per second read from the origin (buffered
    /// responses; 0: no limit).
    pub limit_rate: u64,
    /// `*_store` and `*_store_access`.
    pub store: crate::http::proxy::store::StoreConf,
    pub store_access: u32,
}

impl UpstreamConf {
    /// nginx's defaults, with temporary files under `temp_path`.
    pub fn new(temp_path: std::path::PathBuf) -> UpstreamConf {
        let mut buffers = super::proxy_buffers::BufferConf::new(std::path::Path::new(""));
        buffers.temp_path = temp_path;
        UpstreamConf {
            hide_headers: Vec::new(),
            pass_headers: Vec::new(),
            connect_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            read_timeout: Duration::from_secs(60),
            next_upstream: NextUpstream::DEFAULT,
            next_upstream_tries: 0,
            next_upstream_timeout: Duration::ZERO,
            buffering: true,
            buffer_size: super::proxy_buffers::PAGE,
            buffers,
            request_buffering: true,
            ignore_client_abort: false,
            intercept_errors: false,
            force_ranges: false,
            cache: Default::default(),
            bind: None,
            limit_rate: 0,
            store: Default::default(),
            store_access: 0o600,
        }
    }
}

impl Default for UpstreamConf {
    fn default() -> Self {
        UpstreamConf::new(std::path::PathBuf::from("proxy_temp"))
    }
}

/// The `proxy_*` settings of a level (inherited like nginx's).
#[derive(Clone)]
pub struct ProxyConf {
    /// The content handler; not inherited (as `return`).
    pub pass: Option<Pass>,
    /// `proxy_set_header`: nginx's defaults are `Host $proxy_host` and
    /// `Connection close`; an empty value removes the header.
    pub set_headers: Vec<(String, Template)>,
    pub http_version_11: bool,
    /// `proxy_protocol on`: a PROXY protocol v1 line naming the client
    /// starts every origin connection (sluice's; nginx has it in `stream`).
    pub proxy_protocol: bool,
    /// `proxy_ssl_*`: TLS to an `https://` origin.
    pub ssl: crate::config::upstream_ssl::UpstreamSsl,
    /// `proxy_redirect`.
    pub redirect: crate::http::proxy::redirect::Redirect,
    /// `proxy_method`: the origin request's method instead of the client's.
    pub method: Option<Template>,
    /// `proxy_pass_request_headers`: the client's headers go along.
    pub pass_request_headers: bool,
    /// `proxy_pass_request_body`: the client's body goes along.
    pub pass_request_body: bool,
    /// `proxy_set_body`: the origin request's body instead of the client's.
    pub set_body: Option<Template>,
    /// What the upstream core reads (shared with `fastcgi_*`).
    pub up: UpstreamConf,
    /// `proxy_cookie_domain`, `proxy_cookie_path`, `proxy_cookie_flags`.
    pub cookie: crate::http::proxy::cookie::CookieConf,
}

impl Default for ProxyConf {
    fn default() -> Self {
        ProxyConf {
            pass: None,
            set_headers: default_headers(),
            http_version_11: false,
            proxy_protocol: false,
            ssl: Default::default(),
            redirect: Default::default(),
            method: None,
            pass_request_headers: true,
            pass_request_body: true,
            set_body: None,
            up: UpstreamConf::default(),
            cookie: Default::default(),
        }
    }
}

fn default_headers() -> Vec<(String, Template)> {
    let proxy_host = Template { parts: vec![Part::Var(Var::ProxyHost)] };
    vec![("Host".into(), proxy_host), ("Connection".into(), Template::literal("close"))]
}

pub fn reset_set_headers(c: &mut LocConf) {
    c.proxy.set_headers = default_headers();
}

pub(crate) fn duration(d: &Directive) -> Result<Duration, ConfError> {
    let v = arg(d, 0);
    value::parse_time(v).ok_or_else(|| invalid(d, v))
}

/// What a unix-socket peer has as its (unused) TCP address.
pub const UNIX_PLACEHOLDER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

pub fn unix_path(path: &str) -> Result<std::path::PathBuf, String> {
    if path.is_empty() || path.len() > 107 {
        return Err(format!("invalid unix socket path \"{}\"", path));
    }
    Ok(std::path::PathBuf::from(path))
}

/// A `proxy_pass` URL taken apart.
#[derive(Debug, PartialEq)]
pub struct PassUrl<'a> {
    pub tls: bool,
    /// `host[:port]`, an upstream name, or `unix:/path`.
    pub authority: &'a str,
    pub uri: Option<Vec<u8>>,
}

/// `http[s]://AUTHORITY[/URI]`, with nginx's `http://unix:/path[:/URI]`.
pub fn split_url(raw: &str) -> Result<PassUrl<'_>, String> {
    let (rest, tls) = if let Some(r) = raw.strip_prefix("http://") {
        (r, false)
    } else if let Some(r) = raw.strip_prefix("https://") {
        (r, true)
    } else {
        return Err(format!("invalid URL prefix in \"{}\"", raw));
    };
    let (authority, uri) = if let Some(path) = rest.strip_prefix("unix:") {
        match path.find(':') {
            Some(i) => (&rest[..5 + i], Some(path.as_bytes()[i + 1..].to_vec())),
            None => (rest, None),
        }
    } else {
        match rest.find('/') {
            Some(i) => (&rest[..i], Some(rest.as_bytes()[i..].to_vec())),
            None => (rest, None),
        }
    };
    if authority.is_empty() || authority == "unix:" {
        return Err(format!("no host in \"{}\" of the \"proxy_pass\" directive", raw));
    }
    if tls && authority.starts_with("unix:") {
        return Err(format!("TLS to a unix socket is not supported in \"{}\"", raw));
    }
    Ok(PassUrl { tls, authority, uri })
}

/// A one-server upstream for `proxy_pass http://host:port` (or a unix
/// socket) without an upstream block; `index` is where workers keep its
/// state (usize::MAX: made per request, from variables).
pub fn implicit_upstream(authority: &str, tls: bool, index: usize) -> Result<Upstream, String> {
    let (addr, unix) = match authority.strip_prefix("unix:") {
        Some(path) => (UNIX_PLACEHOLDER, Some(unix_path(path)?)),
        None => (resolve_port(authority, if tls { 443 } else { 80 })?, None),
    };
    let name = if unix.is_some() { authority.to_string() } else { addr.to_string() };
    Ok(Upstream {
        name: authority.to_string(),
        index,
        peers: vec![PeerConf::new(addr, unix, name)],
        balance: Balance::RoundRobin,
        keepalive: 0,
        keepalive_requests: 1000,
        keepalive_timeout: Duration::from_secs(60),
        keepalive_time: Duration::from_secs(3600),
        implicit: true,
        queue: None,
        check: None,
        zone: None,
        sticky: None,
    })
}

/// `$proxy_host`: the authority without the scheme's default port; nginx
/// uses `localhost` for a unix socket.
pub fn proxy_host(authority: &str, tls: bool) -> String {
    if authority.starts_with("unix:") {
        return "localhost".to_string();
    }
    let default_port = if tls { ":443" } else { ":80" };
    authority.strip_suffix(default_port).unwrap_or(authority).to_string()
}

/// `proxy_pass http://upstream_name[/uri]`, `http://host[:port][/uri]`,
/// `http://unix:/path[:/uri]`, or a URL with variables (resolved per
/// request: an upstream name or an address, as nginx without a resolver).
pub fn proxy_pass(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let raw = arg(d, 0);
    if raw.contains('$') {
        let tpl = Template::compile(raw).map_err(|e| ConfError::at(e, &d.span))?;
        c.clear_handlers();
        c.proxy.pass = Some(Pass::Vars(Arc::new(tpl)));
        return Ok(());
    }
    let url = split_url(raw).map_err(|m| ConfError::at(m, &d.span))?;
    if url.uri.is_some() && ctx.in_regex_location {
        return Err(ConfError::at(
            "\"proxy_pass\" cannot have URI part in location given by regular expression, or inside named location, \
             or inside \"if\" statement, or inside \"limit_except\" block",
            &d.span,
        ));
    }
    let upstream = match ctx.upstreams.get(url.authority) {
        Some(u) => u.clone(),
        None => {
            let u = implicit_upstream(url.authority, url.tls, ctx.upstream_list.len())
                .map_err(|m| ConfError::at(m, &d.span))?;
            let u = Arc::new(u);
            ctx.upstream_list.push(u.clone());
            u
        }
    };
    let proxy_host = proxy_host(url.authority, url.tls);
    c.clear_handlers();
    c.proxy.pass = Some(Pass::Fixed(Arc::new(ProxyPass {
        upstream,
        uri: url.uri,
        uri_whole: false,
        tls: url.tls,
        proxy_host,
        location_len: ctx.location_len,
        protocol: Protocol::Http,
    })));
    Ok(())
}

/// `host[:port]` to one address (nginx resolves at load time too).
pub fn resolve(authority: &str) -> Result<SocketAddr, String> {
    resolve_port(authority, 80)
}

fn resolve_port(authority: &str, default_port: u16) -> Result<SocketAddr, String> {
    if let Ok(a) = authority.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bare_v6 = authority.starts_with('[') && authority.ends_with(']');
    let with_port = if bare_v6 || !authority.contains(':') {
        format!("{}:{}", authority, default_port)
    } else {
        authority.to_string()
    };
    with_port
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| format!("host not found in upstream \"{}\"", authority))
}

pub fn proxy_set_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    // Sent as written (nginx keeps the operator's spelling).
    let name = arg(d, 0).to_string();
    let value = Template::compile(arg(d, 1)).map_err(|e| ConfError::at(e, &d.span))?;
    c.proxy.set_headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
    c.proxy.set_headers.push((name, value));
    Ok(())
}

pub fn proxy_protocol(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.proxy_protocol = super::set_main::flag(d)?;
    Ok(())
}

pub fn proxy_http_version(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.http_version_11 = match arg(d, 0) {
        "1.0" => false,
        "1.1" => true,
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

pub fn proxy_method(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.method = Some(Template::compile(arg(d, 0)).map_err(|e| ConfError::at(e, &d.span))?);
    Ok(())
}

pub fn proxy_set_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.set_body = Some(Template::compile(arg(d, 0)).map_err(|e| ConfError::at(e, &d.span))?);
    Ok(())
}

pub fn proxy_pass_request_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.pass_request_headers = super::set_main::flag(d)?;
    Ok(())
}

pub fn proxy_pass_request_body(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.proxy.pass_request_body = super::set_main::flag(d)?;
    Ok(())
}

/// Setters of the [`UpstreamConf`] settings, shared by every module that
/// speaks to upstreams: [`upstream_directives!`] wraps each for a module's
/// `LocConf` field, so `proxy_read_timeout` and `fastcgi_read_timeout`
/// parse alike.
pub mod shared {
    use super::{NextUpstream, UpstreamConf, duration};
    use crate::config::parser::Directive;
    use crate::config::set_main::{arg, flag, invalid, number};
    use crate::config::table::R;

    pub fn hide_header(u: &mut UpstreamConf, d: &Directive) -> R {
        u.hide_headers.push(arg(d, 0).to_ascii_lowercase());
        Ok(())
    }

    pub fn pass_header(u: &mut UpstreamConf, d: &Directive) -> R {
        u.pass_headers.push(arg(d, 0).to_ascii_lowercase());
        Ok(())
    }

    pub fn connect_timeout(u: &mut UpstreamConf, d: &Directive) -> R {
        u.connect_timeout = duration(d)?;
        Ok(())
    }

    pub fn send_timeout(u: &mut UpstreamConf, d: &Directive) -> R {
        u.send_timeout = duration(d)?;
        Ok(())
    }

    pub fn read_timeout(u: &mut UpstreamConf, d: &Directive) -> R {
        u.read_timeout = duration(d)?;
        Ok(())
    }

    pub fn next_upstream(u: &mut UpstreamConf, d: &Directive) -> R {
        let mut n = NextUpstream::OFF;
        for w in &d.args {
            match w.text.as_str() {
                "off" if d.args.len() == 1 => {}
                "error" => n.error = true,
                "timeout" => n.timeout = true,
                "invalid_header" => n.invalid_header = true,
                "http_500" => n.http_500 = true,
                "http_502" if !d.name.starts_with("fastcgi") => n.http_502 = true,
                "http_503" => n.http_503 = true,
                "http_504" if !d.name.starts_with("fastcgi") => n.http_504 = true,
                "http_403" => n.http_403 = true,
                "http_404" => n.http_404 = true,
                "http_429" => n.http_429 = true,
                "non_idempotent" => n.non_idempotent = true,
                v => return Err(invalid(d, v)),
            }
        }
        u.next_upstream = n;
        Ok(())
    }

    pub fn next_upstream_tries(u: &mut UpstreamConf, d: &Directive) -> R {
        u.next_upstream_tries = number(d, 0)?.min(u32::MAX as u64) as u32;
        Ok(())
    }

    pub fn next_upstream_timeout(u: &mut UpstreamConf, d: &Directive) -> R {
        u.next_upstream_timeout = duration(d)?;
        Ok(())
    }

    pub fn request_buffering(u: &mut UpstreamConf, d: &Directive) -> R {
        u.request_buffering = flag(d)?;
        Ok(())
    }

    pub fn ignore_client_abort(u: &mut UpstreamConf, d: &Directive) -> R {
        u.ignore_client_abort = flag(d)?;
        Ok(())
    }

    pub fn intercept_errors(u: &mut UpstreamConf, d: &Directive) -> R {
        u.intercept_errors = flag(d)?;
        Ok(())
    }

    pub fn force_ranges(u: &mut UpstreamConf, d: &Directive) -> R {
        u.force_ranges = flag(d)?;
        Ok(())
    }

    pub fn bind(u: &mut UpstreamConf, d: &Directive) -> R {
        u.bind = crate::upstream::bind::parse(d)?;
        Ok(())
    }

    pub fn limit_rate(u: &mut UpstreamConf, d: &Directive) -> R {
        u.limit_rate = crate::config::value::parse_size(arg(d, 0)).ok_or_else(|| {
            crate::config::parser::ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span)
        })?;
        Ok(())
    }
}

/// The `LocConf` setters of the shared upstream settings for a module
/// whose settings live in `LocConf::$field` (with an `up: UpstreamConf`):
/// a module `$module` with one function per directive suffix
/// (`connect_timeout`, `buffers`, ...) for its directive table.
#[macro_export]
macro_rules! upstream_directives {
    ($module:ident, $field:ident) => {
        pub mod $module {
            use $crate::config::build::Ctx;
            use $crate::config::model::LocConf;
            use $crate::config::parser::Directive;
            use $crate::config::proxy::shared;
            use $crate::config::proxy_buffers as b;
            use $crate::config::table::R;

            pub fn reset_hide_headers(c: &mut LocConf) {
                c.$field.up.hide_headers.clear();
            }
            pub fn reset_pass_headers(c: &mut LocConf) {
                c.$field.up.pass_headers.clear();
            }
            pub fn hide_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::hide_header(&mut c.$field.up, d)
            }
            pub fn pass_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::pass_header(&mut c.$field.up, d)
            }
            pub fn connect_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::connect_timeout(&mut c.$field.up, d)
            }
            pub fn send_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::send_timeout(&mut c.$field.up, d)
            }
            pub fn read_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::read_timeout(&mut c.$field.up, d)
            }
            pub fn next_upstream(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::next_upstream(&mut c.$field.up, d)
            }
            pub fn next_upstream_tries(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::next_upstream_tries(&mut c.$field.up, d)
            }
            pub fn next_upstream_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::next_upstream_timeout(&mut c.$field.up, d)
            }
            pub fn request_buffering(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::request_buffering(&mut c.$field.up, d)
            }
            pub fn ignore_client_abort(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::ignore_client_abort(&mut c.$field.up, d)
            }
            pub fn intercept_errors(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::intercept_errors(&mut c.$field.up, d)
            }
            pub fn force_ranges(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::force_ranges(&mut c.$field.up, d)
            }
            pub fn bind(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::bind(&mut c.$field.up, d)
            }
            pub fn limit_rate(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                shared::limit_rate(&mut c.$field.up, d)
            }
            pub fn store(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                $crate::http::proxy::store::store(&mut c.$field.up, d)
            }
            pub fn store_access(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                $crate::http::proxy::store::store_access(&mut c.$field.up, d)
            }
            pub fn buffering(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::buffering(&mut c.$field.up, d)
            }
            pub fn buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::buffer_size(&mut c.$field.up, d)
            }
            pub fn buffers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::buffers(&mut c.$field.up, d)
            }
            pub fn busy_buffers_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::busy_buffers_size(&mut c.$field.up, d)
            }
            pub fn temp_file_write_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::temp_file_write_size(&mut c.$field.up, d)
            }
            pub fn max_temp_file_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
                b::max_temp_file_size(&mut c.$field.up, d)
            }
            pub fn temp_path(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
                c.$field.up.buffers.temp_path = b::temp_path(d, ctx)?;
                Ok(())
            }
        }
    };
}

upstream_directives!(proxy_up, proxy);
