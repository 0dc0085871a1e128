//! Per-request processing state shared by the pipeline stages, and the
//! view of it that variables read (`Vars`; their values: `var_values`).

use std::net::SocketAddr;

use crate::config::model::{ListenGroup, LocConf, Server};
use crate::http::request::Request;
use crate::http::response::Response;

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
    /// `listen unix:PATH`: the connection came on the unix-domain socket
    /// at PATH; `peer` and `local` are then placeholders, and the address
    /// variables say `unix:` as nginx's (`listener::unix`).
    pub unix: Option<std::sync::Arc<str>>,
    /// The client is one `debug_connection` names: every line about the
    /// connection goes to every log, `[debug]` ones included (`log::debug`).
    pub debug: bool,
    /// The request came in TLS early data (0-RTT) before the handshake
    /// completed (`$ssl_early_data`; HTTP/3 only).
    pub early_data: bool,
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
            unix: None,
            debug: false,
            early_data: false,
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
    /// The values of the non-`volatile` maps evaluated so far: nginx keeps
    /// a map's first value for the whole request.
    pub map_values: std::cell::RefCell<Vec<(std::sync::Arc<crate::config::map::MapDef>, Vec<u8>)>>,
    /// `$upstream_*`: one entry per peer tried, joined with ", " as nginx.
    pub upstream: UpstreamLog,
    /// Set for an HTTP/2 extended CONNECT (RFC 8441) WebSocket stream: the
    /// `Sec-WebSocket-Key` of the HTTP/1.1 Upgrade request the proxy sends
    /// the origin in its place (see `proxy::websocket`).
    pub websocket_key: Option<String>,
    /// The HTTP/1 connection stays open after this response (nginx's
    /// `r->keepalive`, for `$sent_http_connection`).
    pub keep_alive: bool,
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
    /// A WebDAV PUT (`dav_methods PUT`): the connection layer reads the
    /// body and hands it to `http::dav::put` instead of an origin.
    pub dav_put: bool,
    /// try_files ran where `alias` is a regex location's whole path: the
    /// URI is appended to it from then on (nginx's `r->add_uri_to_alias`).
    pub add_uri_to_alias: bool,
    /// add_trailer's fields, rendered when the body has ended.
    pub trailers: Vec<(String, Vec<u8>)>,
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
    /// A location `if` that held had an upstream handler (`proxy_pass` in
    /// the `if`) and a later one that held has none: nginx keeps the
    /// handler but not its settings, and answers 500 "no upstream
    /// configuration".
    pub handler_lost: bool,
    /// Request body bytes read from the client (for `$request_length`).
    pub body_read: u64,
    /// The bytes the request head took on the wire when that is not its
    /// HTTP/1 form: an HTTP/2 header block (HEADERS and CONTINUATION
    /// payloads), which nginx counts in `$request_length`.
    pub wire_head_len: Option<u64>,
    /// An `auth_request`, `mirror`, SSI or addition subrequest: no limit
    /// or access phase.
    pub subrequest: bool,
    /// A subrequest whose status and body alone are read (SSI's and the
    /// addition module's, `handler::subrequest::fetch`): the header
    /// fields nobody reads (ETag) are not made.
    pub body_only: bool,
    /// How deeply nested this subrequest is (0: the client's request);
    /// nginx allows 50 levels (`handler::subrequest`).
    pub sub_depth: u8,
    /// The SSI variables of the main request, which its SSI subrequests
    /// share (`ssi::Shared`).
    pub ssi: Option<std::rc::Rc<crate::http::ssi::Shared>>,
    /// The `mirror` URIs of each location the request reached, with the
    /// redirect count it was reached at ([`crate::http::handler::mirror`]).
    pub mirror_due: Vec<(u32, std::sync::Arc<Vec<Vec<u8>>>)>,
    /// The request body, kept for the mirrors (`mirror_request_body`).
    pub mirror_body: Option<Vec<u8>>,
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
    /// The image filter's progress (`crate::http::image_filter`).
    pub image: crate::http::image_filter::State,
    /// `$request_body`: a copy of a body the proxy read whole into memory
    /// (kept only when some template reads the variable).
    pub request_body: Option<Vec<u8>>,
    /// `$request_body_file`: the named temporary file of a body the proxy
    /// read into a file.
    pub request_body_file: Option<std::path::PathBuf>,
    /// The slice module's piece for this request (its first byte): set
    /// when `$slice_range` is first read for the client's request, or by
    /// the subrequest that fetches a later piece.
    pub slice: std::cell::Cell<Option<u64>>,
    /// The userid module's identifiers, read and made on first use.
    pub userid: std::cell::RefCell<Option<crate::http::userid::State>>,
    /// When the request began (for HTTP/1, when its head started to be
    /// read), per `clock::mono`: `$request_time` before the access log
    /// counts from it, so a `limit_req` delay shows in an `add_header`.
    pub started: std::time::Instant,
    /// The origin's `X-Accel-Charset` for the response being filtered: the
    /// charset the charset filter recodes it to (`handler::finish_proxied`
    /// clears it once used).
    pub override_charset: Option<String>,
}

pub use super::upstream_log::{Tries, UpstreamLog};

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
    /// Rendered at header time with the origin's body still to come: the
    /// last try has no `$upstream_response_time` yet (nginx's `-`).
    pub in_flight: bool,
}

impl<'r, 'c, 'a> Vars<'r, 'c, 'a> {
    pub fn request(ctx: &'r ReqCtx<'c, 'a>) -> Self {
        Vars {
            ctx,
            resp: None,
            bytes_sent: 0,
            body_bytes_sent: 0,
            request_time_ms: crate::clock::since_ms(ctx.started),
            request_length: ctx.request_length(),
            complete: false,
            in_flight: false,
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

/// 16 random bytes from a per-thread store filled 32 ids at a time: the
/// generator's fixed cost per call is most of what one id costs.
fn random_id(id: &mut [u8; 16]) -> bool {
    thread_local! {
        static STORE: std::cell::RefCell<(usize, [u8; 512])> = const { std::cell::RefCell::new((512, [0; 512])) };
    }
    STORE.with(|s| {
        let mut s = s.borrow_mut();
        let (used, bytes) = &mut *s;
        if *used == bytes.len() {
            if aws_lc_rs::rand::fill(bytes).is_err() {
                return false;
            }
            *used = 0;
        }
        id.copy_from_slice(&bytes[*used..*used + 16]);
        // Used bytes are not kept.
        bytes[*used..*used + 16].fill(0);
        *used += 16;
        true
    })
}

impl<'c, 'a> ReqCtx<'c, 'a> {
    /// `$request_id`'s bytes, made on first use: nginx's 16 random bytes
    /// (printed as 32 hex digits).
    /// An SSI subrequest takes the one of its page (`ssi::Shared`),
    /// made there by whichever request of the page reads it first.
    pub fn request_id(&self) -> [u8; 16] {
        if let Some(id) = self.request_id.get() {
            return id;
        }
        let shared = self.ssi.as_deref().map(|s| &s.request_id);
        let id = shared.and_then(std::cell::Cell::get).unwrap_or_else(|| self.new_request_id());
        self.request_id.set(Some(id));
        if let Some(cell) = shared {
            cell.set(Some(id));
        }
        id
    }

    fn new_request_id(&self) -> [u8; 16] {
        let mut id = [0u8; 16];
        if !random_id(&mut id) {
            id[..8].copy_from_slice(&self.conn.id.to_le_bytes());
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            id[8..].copy_from_slice(&now.map_or(0, |d| d.as_nanos() as u64).to_le_bytes());
        }
        id
    }

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
            map_values: Default::default(),
            upstream: UpstreamLog::default(),
            body_read: 0,
            wire_head_len: None,
            websocket_key: None,
            keep_alive: false,
            proxy_pass: None,
            cache_status: None,
            cache_zone: u32::MAX,
            realip: None,
            cache: None,
            vary_encoding: false,
            vars: Default::default(),
            uri_changed: false,
            valid_location: true,
            dav_put: false,
            add_uri_to_alias: false,
            trailers: Vec::new(),
            unparsed_uri_valid: true,
            fastcgi_path_info: None,
            body_len: None,
            handler_lost: false,
            request_id: Default::default(),
            subrequest: false,
            body_only: false,
            sub_depth: 0,
            ssi: None,
            mirror_due: Vec::new(),
            mirror_body: None,
            mirrored: false,
            auth: Default::default(),
            limit: Default::default(),
            auth_delay: None,
            image: Default::default(),
            request_body: None,
            request_body_file: None,
            slice: Default::default(),
            userid: Default::default(),
            override_charset: None,
            started: crate::clock::mono(),
        }
    }

    /// `$request_length`: the head as received and the body read so far.
    pub fn request_length(&self) -> u64 {
        self.wire_head_len.unwrap_or(self.req.head.head_len as u64) + self.body_read
    }

    /// The client as the request sees it (`$remote_addr`, access rules,
    /// limits, the error log): the connection's peer unless the realip
    /// module replaced it.
    pub fn client(&self) -> SocketAddr {
        self.realip.unwrap_or(self.conn.peer)
    }

    /// The client's address as nginx's error log names it (`unix:` for a
    /// unix-domain socket's).
    pub fn client_text(&self) -> String {
        if self.client_is_unix() { "unix:".to_string() } else { self.client().ip().to_string() }
    }

    /// The client is the unix-domain socket's peer (no realip address
    /// replaced it): nginx's `AF_UNIX` client, `$remote_addr` `unix:`.
    pub fn client_is_unix(&self) -> bool {
        self.realip.is_none() && self.conn.unix.is_some()
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
            self.client_text(),
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
        $crate::log_conn!(
            ctx.conf.error_log,
            ctx.conn.debug,
            $lvl,
            "*{} {}, {}",
            ctx.conn.id,
            format_args!($($arg)*),
            ctx.log_suffix()
        );
    }};
}

/// `$remote_user`: the user name of a Basic Authorization header,
/// decoded as the auth_basic module decodes it, checked or not.
pub fn basic_user(auth: &[u8]) -> Option<Vec<u8>> {
    crate::http::access::basic::decode(auth).map(|c| c.user)
}

#[cfg(test)]
mod tests {
    #[test]
    fn basic_auth_user() {
        assert_eq!(super::basic_user(b"Basic dXNlcjE6cGFzcw==").as_deref(), Some(&b"user1"[..]));
        assert_eq!(super::basic_user(b"Bearer x"), None);
        assert_eq!(super::basic_user(b"Basic !!!"), None);
    }
}
