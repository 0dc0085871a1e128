//! The validated, internal configuration that workers run on.
//!
//! Everything here is resolved at load time (inheritance merged, paths made
//! absolute, regexes compiled, variables compiled) so that the request path
//! only reads plain fields. A `Config` is immutable once built; reload builds
//! a new one and new workers pick it up, while old workers finish on theirs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::parser::{ConfigFile, Span};
use crate::log::error::ErrorLog;
use crate::log::error_file::LogFile;
use crate::log::format::LogFormat;
use crate::variables::Template;

pub use super::shared::Shared;

pub struct Config {
    pub main: MainConf,
    pub http: HttpConf,
    /// Every file read, for `-T`.
    pub files: Vec<ConfigFile>,
    /// The certificates to fetch OCSP responses for (`ssl_stapling on`).
    pub staples: Vec<Arc<crate::tls::ocsp::Staple>>,
    /// The certificates to obtain from ACME servers (`acme_certificate`).
    pub acme: Vec<Arc<crate::tls::acme::Order>>,
    pub conf_file: PathBuf,
    pub prefix: PathBuf,
    /// nginx's load-time `[warn]`s ("... ignored in FILE:LINE"): printed by
    /// `-t` and at startup, logged on reload.
    pub warnings: Vec<String>,
    /// Load-time `[notice]`s (a built-in module's `load_module`), shown the
    /// same way.
    pub notices: Vec<String>,
    /// Every distinct error log file any level names, opened by the master
    /// before the configuration runs.
    pub error_log_files: Vec<Arc<LogFile>>,
    /// Unique access log files of every family; `LogDest::File` indexes
    /// this.
    pub access_log_files: Vec<AccessLogFile>,
    /// `access_log syslog:...` targets; `LogDest::Syslog` indexes this.
    pub access_log_syslog: Vec<Arc<crate::log::syslog::Peer>>,
    /// The other protocol families' blocks (`stream {}`), built by their
    /// modules (`config::family`), by block name.
    pub families: Vec<(&'static str, Arc<dyn super::family::FamilyConf>)>,
}

#[derive(Clone, Debug)]
pub struct MainConf {
    pub worker_processes: usize,
    pub cpu_affinity: CpuAffinity,
    pub rlimit_nofile: Option<u64>,
    /// `worker_rlimit_core`.
    pub rlimit_core: Option<u64>,
    /// `working_directory`: the process changes into it.
    pub working_directory: Option<std::path::PathBuf>,
    pub pid: PathBuf,
    /// The main level's logs: lines not about a request, and what http
    /// inherits.
    pub error_log: Arc<ErrorLog>,
    pub daemon: bool,
    pub worker_connections: usize,
    /// Tengine's `reuse_port on` in `events`: every listen gets SO_REUSEPORT.
    pub reuse_port: bool,
    /// `user`, resolved; None when absent or when sluice does not run as
    /// root (then the workers keep the starting user, with a warning).
    pub user: Option<crate::worker::credentials::Credentials>,
    /// `worker_shutdown_timeout`: a retiring worker closes what is still
    /// open after this long (None: waits for every connection).
    pub worker_shutdown_timeout: Option<Duration>,
    /// `worker_priority`: the workers' nice value.
    pub worker_priority: Option<i32>,
    /// `master_process`: a supervising master process that keeps the
    /// listeners and restarts the serving process if it dies (on, the
    /// default), or one process (off, nginx's debugging mode).
    pub master_process: bool,
    /// `debug_connection`: clients whose connections write `[debug]`
    /// lines to every log (`log::debug`).
    pub debug_connection: Vec<crate::cidr::Cidr>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CpuAffinity {
    None,
    /// Worker i on the i-th allowed CPU, optionally restricted to a mask.
    Auto(Option<Vec<usize>>),
    /// One CPU set per worker; the last one repeats, as in nginx.
    Masks(Vec<Vec<usize>>),
}

pub struct HttpConf {
    pub servers: Vec<Arc<Server>>,
    pub listens: Vec<ListenGroup>,
    /// Every upstream (blocks and implicit ones), by `Upstream::index`.
    pub upstreams: Vec<Arc<super::proxy::Upstream>>,
    /// `proxy_cache_path` zones (their directories are prepared at start).
    pub cache_zones: Vec<Arc<crate::http::cache::conf::ZoneConf>>,
}

/// Every server block that listens on one address, with the lookup tables
/// that pick one by Host.
pub struct ListenGroup {
    pub addr: SocketAddr,
    pub backlog: i32,
    /// TCP_NOTSENT_LOWAT set on the listener (accepted sockets inherit
    /// it); 0 leaves the kernel's default.
    pub notsent_lowat: u32,
    /// `rcvbuf=`, `sndbuf=`, `fastopen=`, `so_keepalive=`.
    pub sock: SockOpts,
    pub reuseport: bool,
    /// TLS on this address (any server's `listen ... ssl` or `ssl on`, as
    /// nginx applies listen flags to the whole address).
    pub ssl: bool,
    /// HTTP/2 on some server of the address: its preface is looked for
    /// on a cleartext connection.
    pub http2: bool,
    /// `listen ... http2`: HTTP/2 for every server of the address; else
    /// only for servers with `http2 on` (ALPN offers h2 after SNI chose
    /// one; a request whose Host picks another gets 421), as nginx 1.25+.
    pub listen_http2: bool,
    /// `listen ... quic`: a UDP address serving HTTP/3 over QUIC (a group
    /// of its own beside the TCP one on the same address).
    pub quic: bool,
    /// `listen ... proxy_protocol`: a PROXY header precedes everything.
    pub proxy_protocol: bool,
    /// `listen unix:PATH`: a unix-domain socket at PATH (`addr` is then
    /// `listener::unix::PLACEHOLDER`, never bound or matched).
    pub unix: Option<Arc<str>>,
    pub default_server: Arc<Server>,
    pub names: ServerNames,
}

impl ListenGroup {
    /// Whether `server` speaks HTTP/2 on this address.
    pub fn http2_for(&self, server: &Server) -> bool {
        self.listen_http2 || server.conf.http2.on
    }
}

/// nginx's `listen` socket options: set on the listening socket, which
/// accepted connections inherit them from (no cost per connection), and
/// set again on a live socket at reload. None (0 for the keepalive
/// timings) leaves what the socket has: the kernel's default, or an
/// earlier configuration's value, as nginx does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockOpts {
    /// SO_RCVBUF and SO_SNDBUF, in bytes (the kernel doubles them).
    pub rcvbuf: Option<i32>,
    pub sndbuf: Option<i32>,
    /// TCP_FASTOPEN: the queue of connections that carried data in their
    /// SYN (used only when sysctl net.ipv4.tcp_fastopen allows servers).
    pub fastopen: Option<i32>,
    /// SO_KEEPALIVE on or off.
    pub keepalive: Option<bool>,
    /// TCP_KEEPIDLE and TCP_KEEPINTVL in seconds, TCP_KEEPCNT.
    pub keep_idle: u32,
    pub keep_intvl: u32,
    pub keep_cnt: u32,
}

/// An address's server names (`config::server_names`), selecting HTTP servers.
pub type ServerNames = super::server_names::ServerNames<Arc<Server>>;

pub struct Server {
    /// The first `server_name`, for `$server_name`.
    pub name: String,
    pub conf: Arc<LocConf>,
    /// Server-level rewrite directives (`rewrite`, `return`, `set`, `if`...):
    /// run before location matching, and again after each internal
    /// redirect, as nginx's server rewrite phase.
    pub rewrite: Option<Arc<crate::http::rewrite::Script>>,
    pub locations: Locations,
    pub named: HashMap<String, Arc<Location>>,
    /// The server's TLS settings, built when it has certificates (or
    /// rejects handshakes); chosen per connection by SNI.
    pub tls: Option<Arc<crate::tls::ServerTls>>,
}

#[derive(Default)]
pub struct Locations {
    pub exact: Vec<Arc<Location>>,
    /// Longest path first, so the first match is the longest.
    pub prefix: Vec<Arc<Location>>,
    /// In configuration order, as nginx tests them.
    pub regex: Vec<Arc<Location>>,
}

impl Locations {
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefix.is_empty() && self.regex.is_empty()
    }
}

pub struct Location {
    pub matcher: Matcher,
    pub conf: Arc<LocConf>,
    pub children: Locations,
}

pub enum Matcher {
    Exact(Vec<u8>),
    Prefix { path: Vec<u8>, noregex: bool },
    Regex(crate::pattern::Regex),
    Named(String),
}

/// `types {}`: extension to MIME type, looked up for every file served
/// (foldhash: SipHash's cost shows per request), keyed by the extension's
/// bytes in lower case: a URI's extension is looked up with no UTF-8 check.
pub type MimeMap = HashMap<Box<[u8]>, Arc<str>, foldhash::fast::RandomState>;

/// Settings of the http, server and location levels. A child level starts
/// as a copy of its parent (minus what nginx does not inherit) and then
/// applies its own directives, which gives nginx's merge semantics.
#[derive(Clone)]
pub struct LocConf {
    pub root: DocRoot,
    pub index: Vec<Template>,
    pub try_files: Option<TryFiles>,
    /// The rewrite module: this level's script and its two flags.
    pub rewrite: crate::http::rewrite::RewriteConf,
    /// The location's name as nginx prints it in messages (its path,
    /// regex or `@name`; an `if` block's is its location's).
    pub location_name: Arc<str>,
    pub empty_gif: bool,
    /// `flv` (`crate::http::flv`): the location's content handler.
    pub flv: bool,
    /// `mp4*` (`crate::http::mp4`): the content handler and its buffers.
    pub mp4: crate::http::mp4::Mp4Conf,
    /// `stub_status`: the content handler of nginx's status page.
    pub stub_status: bool,
    /// `status_zone` and the `sluice_status` page (`src/metrics`).
    pub metrics: crate::metrics::MetricsConf,
    /// nginx core settings for requests and redirects (`internal`, ...).
    pub core: super::set_core::CoreFlags,
    /// The access phase: allow/deny, satisfy, auth_basic, valid_referers.
    pub access: Shared<crate::http::access::AccessConf>,
    /// Tengine's `check_status` content handler.
    pub check_status: Option<Arc<crate::upstream::check::status::StatusPage>>,
    /// NGINX Plus's `api`: the run-time API (not inherited).
    pub api: Option<Arc<crate::http::api::ApiConf>>,
    pub autoindex: crate::http::handler::autoindex::AutoindexConf,
    /// `random_index on`.
    pub random_index: bool,
    pub error_pages: Vec<Arc<ErrorPage>>,
    pub add_headers: Vec<AddHeader>,
    /// `add_trailer`: fields sent after the body (chunked HTTP/1.1, HTTP/2
    /// and HTTP/3 trailers).
    pub add_trailers: Vec<AddHeader>,
    pub expires: Option<Expires>,
    /// `expires [modified] $variable`: parsed per response (nginx's
    /// `expires $expires` with a `map` over `$sent_http_content_type`).
    pub expires_var: Option<(Arc<crate::variables::Template>, bool)>,
    /// None: `access_log off`.
    pub access_log: Option<Vec<AccessLogRef>>,
    /// Where lines about a request handled here go (`log_to!`).
    pub error_log: Arc<ErrorLog>,
    pub default_type: Arc<str>,
    pub types: Arc<MimeMap>,
    pub sendfile: bool,
    /// Bytes one sendfile call may send before the connection lets the
    /// worker's other connections run (0: no limit).
    pub sendfile_max_chunk: usize,
    pub tcp_nopush: bool,
    pub tcp_nodelay: bool,
    pub keepalive_timeout: Duration,
    pub keepalive_header: Option<Duration>,
    pub keepalive_requests: u64,
    /// `keepalive_time`: no new request on a connection open this long.
    pub keepalive_time: Duration,
    pub server_tokens: bool,
    pub client_header_buffer_size: usize,
    pub large_client_header_buffers: (usize, usize),
    pub client_max_body_size: u64,
    pub client_header_timeout: Duration,
    pub client_body_timeout: Duration,
    /// Request bodies larger than this are buffered in a temporary file.
    pub client_body_buffer_size: usize,
    pub client_body_temp_path: PathBuf,
    /// `client_body_in_file_only`: `Anonymous` for `off` (the body goes to
    /// a file only past `client_body_buffer_size`), `Kept` for `on`,
    /// `Clean` for `clean`.
    pub client_body_in_file_only: crate::http::connection::spool::Naming,
    pub send_timeout: Duration,
    pub open_file_cache: Option<OpenFileCacheConf>,
    pub open_file_cache_valid: Duration,
    pub open_file_cache_min_uses: u32,
    pub open_file_cache_errors: bool,
    pub output_buffers: (usize, usize),
    pub postpone_output: usize,
    /// `subrequest_output_buffer_size`: the most of a subrequest's answer
    /// kept in memory (`include ... set=`).
    pub subrequest_output_buffer_size: usize,
    pub etag: bool,
    pub if_modified_since: IfModifiedSince,
    pub log_not_found: bool,
    /// `log_subrequest`: subrequests (mirrors) write access log lines.
    pub log_subrequest: bool,
    pub ssl: Shared<SslConf>,
    pub http2: Http2Conf,
    /// `http3`, `http3_*`, `quic_*` (`crate::http::connection::h3::conf`).
    pub h3: crate::http::connection::h3::conf::H3Conf,
    pub proxy: Shared<super::proxy::ProxyConf>,
    /// gzip, brotli and zstd, on the fly and precompressed.
    pub compress: Shared<super::compress::CompressConf>,
    /// `fastcgi_*` (the FastCGI module's settings).
    pub fastcgi: Shared<crate::http::fastcgi::conf::FastcgiConf>,
    /// `uwsgi_*` (`crate::http::uwsgi`).
    pub uwsgi: Shared<crate::http::uwsgi::conf::UwsgiConf>,
    /// `scgi_*` (`crate::http::scgi`).
    pub scgi: Shared<crate::http::scgi::conf::ScgiConf>,
    pub grpc: Shared<crate::http::grpc::conf::GrpcConf>,
    /// `set_real_ip_from`, `real_ip_header`, `real_ip_recursive`.
    pub realip: crate::http::realip::RealIpConf,
    /// `resolver`, `resolver_timeout`.
    pub resolver: crate::resolver::Conf,
    /// `charset`, `charset_types`, `source_charset`, `override_charset`,
    /// and the http level's `charset_map` tables.
    pub charset: Shared<crate::http::charset::CharsetConf>,
    /// `mirror`, `mirror_request_body`.
    pub mirror: crate::http::handler::mirror::MirrorConf,
    /// `post_action`.
    pub post_action: crate::http::handler::post_action::PostAction,
    /// `sub_filter*`.
    pub sub: crate::http::filter::sub::SubConf,
    /// `image_filter*` (`crate::http::image_filter`).
    pub image_filter: crate::http::image_filter::ImageFilterConf,
    /// `ssi*`.
    pub ssi: crate::http::ssi::SsiConf,
    /// `add_before_body`, `add_after_body`, `addition_types`.
    pub addition: crate::http::addition::AdditionConf,
    /// `dav_methods`, `dav_access`, `create_full_put_path`, `min_delete_depth`.
    pub dav: crate::http::dav::DavConf,
    /// `gunzip`, `gunzip_buffers`.
    pub gunzip: crate::http::gunzip::GunzipConf,
    pub slice: crate::http::slice::SliceConf,
    /// `memcached_*` (`crate::http::memcached`).
    pub memcached: Shared<crate::http::memcached::MemcachedConf>,
    /// `userid*` (`crate::http::userid`).
    pub userid: Shared<crate::http::userid::UseridConf>,
    /// `disable_symlinks`.
    pub symlinks: crate::http::handler::symlinks::SymlinksConf,
    /// `limit_except`: the settings for the methods it does not list.
    pub limit_except: Option<Arc<super::limit_except::LimitExcept>>,
    /// `limit_req*`, `limit_conn*`, `limit_rate*`.
    pub limit: Shared<crate::http::limit::LimitConf>,
}

/// The `ssl_*` directives as written (http and server levels); the tls
/// module turns them into a rustls configuration per server.
#[derive(Clone, Default)]
pub struct SslConf {
    /// Legacy `ssl on`: every listen of the server is TLS.
    pub on: bool,
    /// `ssl_certificate` / `ssl_certificate_key`, paired in order as nginx does.
    pub certificates: Vec<(PemSource, Span)>,
    pub keys: Vec<(PemSource, Span)>,
    /// `ssl_password_file`: the passphrases, read when the directive is.
    pub passwords: Option<std::sync::Arc<Vec<Vec<u8>>>>,
    /// `ssl_certificate_cache max=N [inactive=T] [valid=T]` (None: `off`).
    pub certificate_cache: Option<CertCacheConf>,
    /// TLSv1.2 and TLSv1.3 (nginx 1.22's default also lists 1.0 and 1.1,
    /// which rustls does not implement).
    pub tls12: bool,
    pub tls13: bool,
    pub ciphers: Option<(String, Span)>,
    pub prefer_server_ciphers: bool,
    pub ecdh_curve: Option<(String, Span)>,
    pub session_cache: SessionCache,
    pub session_timeout: Duration,
    pub session_tickets: bool,
    pub ticket_keys: Vec<(PathBuf, Span)>,
    pub early_data: bool,
    pub stapling: bool,
    pub stapling_file: Option<(PathBuf, Span)>,
    /// `ssl_stapling_responder URL`: instead of the certificate's own.
    pub stapling_responder: Option<String>,
    pub stapling_verify: bool,
    /// `ssl_trusted_certificate`: issuers for stapling (PEM, read at load).
    pub trusted_certificate: Option<(PathBuf, Span)>,
    pub reject_handshake: bool,
    pub client_certificate: Option<(PathBuf, Span)>,
    /// `ssl_crl`: revoked client certificates (PEM CRLs).
    pub crl: Option<(PathBuf, Span)>,
    pub verify_client: VerifyClient,
    pub verify_depth: u32,
    /// `ssl_ocsp`: which of a client's certificates are asked about
    /// (None: `off`).
    pub ocsp: Option<crate::tls::ocsp::client::Depth>,
    /// `ssl_ocsp_responder URL`: instead of each certificate's own.
    pub ocsp_responder: Option<String>,
    /// `ssl_ocsp_cache shared:NAME:SIZE`: the zone's name and size.
    pub ocsp_cache: Option<(String, usize)>,
    /// `acme_certificate`: what `$acme_certificate` and
    /// `$acme_certificate_key` read at a handshake.
    pub acme: Option<Arc<crate::tls::acme::CertSlot>>,
    /// `ssl_conf_command`s: applied over the rest when the TLS
    /// configuration is built.
    pub conf_commands: crate::config::ssl_conf_command::ConfCommands,
}

/// Where an `ssl_certificate` or `ssl_certificate_key` value comes from.
#[derive(Clone, Debug)]
pub enum PemSource {
    /// A file, its path resolved against the configuration's directory.
    File(PathBuf),
    /// `data:...`: the PEM itself.
    Data(std::sync::Arc<[u8]>),
    /// A value with variables, evaluated at each handshake
    /// (`tls::dynamic`); a relative result resolves against `dir`; and
    /// the value as written (messages, the session id context).
    Vars(crate::variables::Template, PathBuf, std::sync::Arc<str>),
}

impl PemSource {
    /// As nginx names the value in its messages: the path, or `data:...`.
    pub fn display(&self) -> String {
        match self {
            PemSource::File(p) => p.display().to_string(),
            PemSource::Data(_) => "data:...".to_string(),
            PemSource::Vars(_, _, written) => written.to_string(),
        }
    }
}

/// `ssl_certificate_cache`: nginx 1.27.4's defaults are `inactive=10s`
/// and `valid=60s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CertCacheConf {
    pub max: usize,
    pub inactive: Duration,
    pub valid: Duration,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub enum SessionCache {
    Off,
    /// nginx's default: no cache, but clients are not told so.
    #[default]
    None,
    Builtin(usize),
    /// `shared:NAME:SIZE`: one cache per name for the whole process, so every
    /// worker (and the next configuration, after a reload) sees it.
    Shared(String, usize),
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum VerifyClient {
    #[default]
    Off,
    On,
    Optional,
    OptionalNoCa,
}

/// `http2` and the `http2_*` directives.
#[derive(Clone, Debug, PartialEq)]
pub struct Http2Conf {
    /// `http2 on` (nginx 1.25.1+ form of `listen ... http2`).
    pub on: bool,
    pub max_concurrent_streams: u32,
    pub recv_buffer_size: usize,
    pub chunk_size: usize,
    pub body_preread_size: usize,
}

impl LocConf {
    /// Drops the inherited content handlers that come from an upstream, as
    /// a new `proxy_pass`, `fastcgi_pass`, `uwsgi_pass` or `scgi_pass`
    /// replaces whichever of them was set (the last one wins, as nginx's
    /// `clcf->handler`).
    ///
    /// Each module's settings are written only when they hold a handler, so
    /// a level without one keeps sharing them (`Shared`).
    pub fn clear_handlers(&mut self) {
        if self.proxy.pass.is_some() {
            self.proxy.pass = None;
        }
        if self.fastcgi.pass.is_some() {
            self.fastcgi.pass = None;
        }
        if self.uwsgi.pass.is_some() {
            self.uwsgi.pass = None;
        }
        if self.scgi.pass.is_some() {
            self.scgi.pass = None;
        }
        if self.grpc.pass.is_some() {
            self.grpc.pass = None;
        }
        if self.memcached.pass.is_some() {
            self.memcached.pass = None;
        }
    }
}

impl Default for Http2Conf {
    fn default() -> Self {
        Http2Conf {
            on: false,
            max_concurrent_streams: 128,
            recv_buffer_size: 256 * 1024,
            chunk_size: 8 * 1024,
            body_preread_size: 64 * 1024,
        }
    }
}

#[derive(Clone)]
pub struct DocRoot {
    /// Absolute; without a trailing slash for `root`, as written for `alias`.
    pub path: String,
    /// Set when the path contains variables.
    pub template: Option<Template>,
    /// For `alias`: how many bytes of the URI (the length of the location's
    /// path where alias was set) the alias path replaces; `usize::MAX` in a
    /// regex location, where the alias is the whole path.
    pub alias_len: Option<usize>,
}

#[derive(Clone)]
pub struct TryFiles {
    /// Candidates; `true` for a directory test (written with a trailing
    /// slash, which is stripped here as nginx does).
    pub files: Vec<(Template, bool)>,
    pub fallback: TryFallback,
}

#[derive(Clone)]
pub enum TryFallback {
    Uri(Template),
    Named(String),
    Code(u16),
}

#[derive(Clone)]
pub struct Return {
    pub code: u16,
    /// Body text for codes other than redirects, Location for redirects.
    pub text: Option<Template>,
}

pub struct ErrorPage {
    pub codes: Vec<u16>,
    pub overwrite: Option<u16>,
    pub target: ErrorTarget,
}

pub enum ErrorTarget {
    Uri(Template),
    Named(String),
    /// `http://...`: a 302 (or the `=code`) redirect.
    Redirect(Template),
}

#[derive(Clone)]
pub struct AddHeader {
    pub name: String,
    pub value: Template,
    pub always: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Expires {
    Off,
    Epoch,
    Max,
    /// Relative to now (may be negative: "Cache-Control: no-cache").
    Access(i64),
    /// Relative to the file's modification time.
    Modified(i64),
    /// `@time`: the next time the local clock shows this many seconds
    /// after midnight.
    Daily(i64),
}

#[derive(Clone)]
pub struct AccessLogRef {
    pub dest: LogDest,
    pub format: Arc<LogFormat>,
    /// `if=condition`: no line when it evaluates to "" or "0".
    pub cond: Option<Arc<crate::variables::Template>>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LogDest {
    /// An index into `Config::access_log_files`.
    File(usize),
    /// An index into `Config::access_log_syslog`.
    Syslog(usize),
    /// A path with variables, opened for each line.
    Dynamic(Arc<crate::log::access_path::DynamicPath>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct AccessLogFile {
    pub path: PathBuf,
    pub buffer: usize,
    pub flush: Duration,
    /// `gzip[=level]`: each buffer written as one gzip member.
    pub gzip: Option<u32>,
    /// No `buffer=`, `flush=` or `gzip` given: nginx writes each line at
    /// once; sluice writes the lines of one turn of the worker's event
    /// loop together, right after it.
    pub eager: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpenFileCacheConf {
    pub max: usize,
    pub inactive: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IfModifiedSince {
    Off,
    Exact,
    Before,
}

impl Config {
    pub fn version() -> &'static str {
        env!("CARGO_PKG_VERSION")
    }
}
