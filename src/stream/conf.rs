//! The stream family's validated configuration: what `stream {}` builds
//! into (`build`), read by the sessions of every worker. As in HTTP, a
//! server's settings start as a copy of the `stream` level's and then
//! take the server's own directives, which is nginx's merge.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::access_rules::Rules;
use crate::cidr::Cidr;
use crate::config::family::Listen;
use crate::config::model::{AccessLogRef, SslConf};
use crate::config::proxy::Upstream;
use crate::log::error::ErrorLog;
use crate::variables::Template;

/// `stream {}` built.
pub struct StreamConf {
    pub servers: Vec<Arc<Server>>,
    /// The sockets to bind.
    pub listens: Vec<Listen>,
    /// Per bound socket (same index as `listens`): the addresses it
    /// carries. A wildcard socket carries the specific addresses of its
    /// port too (nginx binds only `*:port` then and picks by the local
    /// address).
    pub routes: Vec<Route>,
    pub upstreams: Vec<Arc<Upstream>>,
    /// `limit_conn_zone` zones, by name.
    pub limit_zones: Vec<Arc<crate::stream::limit::Zone>>,
}

/// The addresses one bound socket serves.
pub struct Route {
    /// The socket's own address (the wildcard's, for a wildcard socket).
    pub own: Arc<Addr>,
    /// Specific addresses on a wildcard socket's port.
    pub specific: Vec<Arc<Addr>>,
}

impl Route {
    /// The address a connection accepted on `local` came in on.
    pub fn find(&self, local: SocketAddr) -> &Arc<Addr> {
        if self.own.unix.is_some() {
            return &self.own;
        }
        self.specific.iter().find(|a| a.addr == local).unwrap_or(&self.own)
    }
}

/// One `listen` address with its servers and flags (a flag on any
/// server's `listen` applies to the whole address, as in nginx).
pub struct Addr {
    pub addr: SocketAddr,
    /// `listen unix:PATH`: its clients have no address (`$remote_addr`
    /// is `unix:`, `$server_addr` `unix:PATH`, as nginx's `AF_UNIX`).
    pub unix: Option<Arc<str>>,
    pub udp: bool,
    pub ssl: bool,
    pub proxy_protocol: bool,
    /// The default server: `listen ... default_server`, else the first.
    pub server: Arc<Server>,
    /// `server_name`s of the servers on this address, picked by SNI (TLS
    /// termination) or the preread ClientHello's name.
    pub names: crate::config::server_names::ServerNames<Arc<Server>>,
    /// A server here has `pass`: preread peeks (MSG_PEEK) so the
    /// connection can be handed on with its bytes unread.
    pub peek: bool,
}

pub struct Server {
    /// The first `server_name` ("" without one), for `$server_name`.
    pub name: String,
    pub conf: SrvConf,
    pub content: Content,
    /// `set $name value;` in order, run at preaccess (nginx's stream set
    /// module runs in its preaccess phase).
    pub set: Vec<(usize, Template)>,
    /// The TLS of `listen ... ssl` (built from the `ssl_*` settings): None
    /// without certificates (a server chosen by SNI then continues with
    /// the default server's, as nginx keeps the default's context).
    pub tls: Option<super::tls::ServerTls>,
    /// The session zone its sessions count in (`crate::metrics::l4`):
    /// `status_zone NAME` (NGINX Plus's), else its first `listen` address
    /// (`ADDR`, `ADDR udp`, `unix:PATH`), so every server shows.
    pub zone: u32,
}

/// What the content phase does.
pub enum Content {
    Proxy(Pass),
    /// `return VALUE`: sent, then the session closes.
    Return(Template),
    /// `pass ADDRESS`: the connection goes to the listening socket of that
    /// address (any family's), as if accepted there.
    Pass(PassTo),
}

/// `pass`'s address, fixed or with variables.
pub enum PassTo {
    Fixed(SocketAddr),
    Vars(Template),
}

/// `proxy_pass`: an upstream (a block or an address made into one), or a
/// value with variables naming an upstream or an address.
#[derive(Clone)]
pub enum Pass {
    Fixed(Arc<Upstream>),
    Vars(Arc<Template>),
}

/// The settings of the stream and server levels.
#[derive(Clone)]
pub struct SrvConf {
    pub error_log: Arc<ErrorLog>,
    /// Empty: no access log (`access_log off`, or none given: nginx's
    /// stream has no default log).
    pub access_log: Vec<AccessLogRef>,
    /// `allow` / `deny`.
    pub access: Arc<Rules>,
    pub proxy: ProxyConf,
    pub tcp_nodelay: bool,
    pub preread_buffer_size: usize,
    pub preread_timeout: Duration,
    /// `proxy_protocol_timeout`: how long the PROXY header may take.
    pub proxy_protocol_timeout: Duration,
    /// `ssl_preread on`: the ClientHello is parsed for `$ssl_preread_*`.
    pub ssl_preread: bool,
    pub ssl: SslConf,
    pub ssl_handshake_timeout: Duration,
    /// `ssl_alpn`: the protocols offered to clients, in order.
    pub ssl_alpn: Vec<Vec<u8>>,
    /// `set_real_ip_from`: a PROXY header's address replaces the client's
    /// when the connection comes from one of these.
    pub real_ip_from: Vec<Cidr>,
    /// `limit_conn ZONE N` lines.
    pub limit_conn: Vec<(Arc<crate::stream::limit::Zone>, u32)>,
    pub limit_conn_log_level: crate::log::error::Level,
    pub limit_conn_dry_run: bool,
    /// `resolver`, `resolver_timeout`: for `server ... resolve` in this
    /// stream's upstreams (set at the stream level).
    pub resolver: crate::resolver::Conf,
}

/// The `proxy_*` settings.
#[derive(Clone)]
pub struct ProxyConf {
    pub connect_timeout: Duration,
    /// `proxy_timeout`: the longest wait for either side to send.
    pub timeout: Duration,
    pub next_upstream: bool,
    /// 0: as many as the upstream has peers.
    pub next_upstream_tries: usize,
    /// Zero: no limit.
    pub next_upstream_timeout: Duration,
    pub buffer_size: usize,
    /// Bytes per second, 0 for no limit; a value with variables is
    /// evaluated when the session starts proxying.
    pub download_rate: Rate,
    pub upload_rate: Rate,
    /// `proxy_requests`: datagrams after which a client's next one starts a
    /// new UDP session (0: no limit).
    pub requests: u64,
    /// `proxy_responses`: datagrams expected back per datagram (None: any
    /// number, until `proxy_timeout`).
    pub responses: Option<u64>,
    /// `proxy_half_close`: one side's end is passed on, and the session
    /// lasts until both sides ended.
    pub half_close: bool,
    /// `proxy_protocol on`: a v1 header goes to the origin first.
    pub proxy_protocol: bool,
    /// `proxy_bind ADDRESS [transparent] | off`.
    pub bind: Option<Arc<Template>>,
    /// `proxy_ssl on`: TLS to the origin.
    pub ssl: bool,
    pub ssl_server_name: bool,
    pub ssl_name: Option<Arc<Template>>,
    pub ssl_verify: bool,
    /// `proxy_ssl_verify_depth` (default 1).
    pub ssl_verify_depth: u32,
    /// `proxy_ssl_session_reuse` (on by default).
    pub ssl_session_reuse: bool,
    pub ssl_trusted_certificate: Option<std::path::PathBuf>,
    /// `proxy_ssl_certificate` and its key: files, `data:` PEM, or values
    /// with variables evaluated for each session (None also for `""`).
    pub ssl_certificate: Option<(crate::config::model::PemSource, Arc<str>)>,
    pub ssl_certificate_key: Option<crate::config::model::PemSource>,
    /// `proxy_ssl_conf_command Certificate` / `PrivateKey`: in place of
    /// the two above once the server is complete (OpenSSL applies the
    /// commands last).
    pub ssl_conf_certificate: Option<(crate::config::model::PemSource, Arc<str>)>,
    pub ssl_conf_key: Option<crate::config::model::PemSource>,
    /// `proxy_ssl_password_file`: passphrases for the client key.
    pub ssl_passwords: Option<Arc<Vec<Vec<u8>>>>,
    /// The client configuration made from the settings above (without a
    /// client certificate when it has variables: `tls::session_client`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// `proxy_download_rate` / `proxy_upload_rate`.
#[derive(Clone)]
pub enum Rate {
    Fixed(u64),
    Vars(Arc<Template>),
}

impl Rate {
    /// Bytes per second for a session (a value that is not a size: 0).
    pub fn eval(&self, src: &dyn crate::variables::VarSource) -> u64 {
        match self {
            Rate::Fixed(n) => *n,
            Rate::Vars(t) => {
                let v = t.render_to_vec(src);
                std::str::from_utf8(&v).ok().and_then(crate::config::value::parse_size).unwrap_or(0)
            }
        }
    }
}
