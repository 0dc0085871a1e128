//! The mail family's validated configuration: what `mail {}` builds into
//! (`build`), read by the sessions of every worker. A server's settings
//! start as a copy of the `mail` level's and then take the server's own
//! directives, which is nginx's merge.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::cidr::Cidr;
use crate::config::family::Listen;
use crate::config::model::SslConf;
use crate::log::error::ErrorLog;

/// `mail {}` built.
pub struct MailConf {
    pub servers: Vec<Arc<Server>>,
    /// The sockets to bind.
    pub listens: Vec<Listen>,
    /// Per bound socket (same index as `listens`): the addresses it
    /// carries (a wildcard socket carries the specific addresses of its
    /// port too, as nginx picks by the local address).
    pub routes: Vec<Route>,
}

pub struct Route {
    pub own: Arc<Addr>,
    pub specific: Vec<Arc<Addr>>,
}

impl Route {
    pub fn find(&self, local: SocketAddr) -> &Arc<Addr> {
        self.specific.iter().find(|a| a.addr == local).unwrap_or(&self.own)
    }
}

/// One `listen` address with its server and flags.
pub struct Addr {
    pub addr: SocketAddr,
    /// `listen unix:PATH`: clients have no address (nginx's `unix:`).
    pub unix: Option<std::sync::Arc<str>>,
    pub ssl: bool,
    pub proxy_protocol: bool,
    pub server: Arc<Server>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Protocol {
    Imap,
    Pop3,
    Smtp,
}

impl Protocol {
    /// The `Auth-Protocol` value.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Imap => "imap",
            Protocol::Pop3 => "pop3",
            Protocol::Smtp => "smtp",
        }
    }
}

/// `starttls on | off | only`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StartTls {
    Off,
    On,
    Only,
}

/// Authentication methods (`imap_auth`, `pop3_auth`, `smtp_auth`), as a
/// bit set in nginx's order.
pub mod auth {
    pub const PLAIN: u8 = 1;
    pub const LOGIN: u8 = 2;
    pub const APOP: u8 = 4;
    pub const CRAM_MD5: u8 = 8;
    pub const EXTERNAL: u8 = 16;
    pub const NONE: u8 = 32;
}

/// `auth_http URL`: where the authentication server is.
#[derive(Clone, Debug)]
pub struct AuthHttp {
    pub addr: SocketAddr,
    /// The `Host` header: the URL's host (with its port, as given).
    pub host: String,
    pub uri: String,
}

pub struct Server {
    pub conf: SrvConf,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// The shared TLS layer's server settings (client verification).
    pub tls_srv: Option<Arc<crate::tls::ServerTls>>,
    /// Answers built once from the settings (nginx builds them at merge).
    pub answers: Answers,
}

/// The capability answers of the server's protocol.
#[derive(Default)]
pub struct Answers {
    pub capability: Vec<u8>,
    pub starttls_capability: Vec<u8>,
    pub starttls_only_capability: Vec<u8>,
    /// POP3's answer to a bare `AUTH`.
    pub auth_capability: Vec<u8>,
    /// SMTP's answer to `HELO`.
    pub helo: Vec<u8>,
    pub greeting: Vec<u8>,
}

/// The settings of the mail and server levels.
#[derive(Clone)]
pub struct SrvConf {
    pub protocol: Option<Protocol>,
    pub server_name: String,
    pub error_log: Arc<ErrorLog>,
    pub auth_http: Option<AuthHttp>,
    /// `auth_http_header NAME VALUE` lines, sent as given.
    pub auth_http_headers: Vec<(String, String)>,
    pub auth_http_timeout: Duration,
    pub auth_http_pass_client_cert: bool,
    pub proxy_buffer: usize,
    pub proxy_timeout: Duration,
    pub proxy_pass_error_message: bool,
    pub proxy_protocol: bool,
    pub proxy_smtp_auth: bool,
    pub xclient: bool,
    pub smtp_auth: u8,
    pub smtp_capabilities: Vec<String>,
    pub smtp_client_buffer: usize,
    pub smtp_greeting_delay: Duration,
    pub imap_auth: u8,
    pub imap_capabilities: Vec<String>,
    pub imap_client_buffer: usize,
    pub pop3_auth: u8,
    pub pop3_capabilities: Vec<String>,
    pub starttls: StartTls,
    /// `FILE:LINE` of the `starttls` line (nginx names it when no
    /// certificate is there).
    pub starttls_at: String,
    pub ssl: SslConf,
    pub max_errors: u32,
    pub timeout: Duration,
    pub real_ip_from: Vec<Cidr>,
    pub resolver_timeout: Duration,
    /// `resolver`: the client's name for SMTP's `Client-Host` and XCLIENT
    /// is looked up (PTR, then confirmed by its addresses).
    pub resolver: Option<crate::resolver::ResolverConf>,
}

impl SrvConf {
    pub fn auth_methods(&self) -> u8 {
        match self.protocol {
            Some(Protocol::Imap) => self.imap_auth,
            Some(Protocol::Pop3) => self.pop3_auth,
            _ => self.smtp_auth,
        }
    }
}
