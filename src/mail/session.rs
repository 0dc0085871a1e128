//! One mail session (nginx's `ngx_mail_handler.c` and the protocol
//! handlers): the PROXY header and `set_real_ip_from`, TLS, the greeting,
//! then the protocol's auth state, reading commands from a buffer of the
//! protocol's client buffer size and answering each in turn (so pipelined
//! commands are answered in order), until the client has given
//! credentials; then the authentication server is asked and the session
//! goes to the backend (`proxy`).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::auth_http::{self, Answer};
use super::commands::{imap, pop3, smtp};
use super::conf::{Addr, MailConf, Protocol, StartTls, auth};
use super::conn::Conn;
use super::parse::{self, Parsed};
use crate::log::error::Level;
use crate::log_to;
use crate::worker::{ConnGuard, WorkerCtx, accept::Acceptor};

/// The accept side of a mail listen.
#[derive(Clone)]
pub struct MailAccept {
    pub conf: Arc<MailConf>,
    pub index: usize,
}

impl Acceptor for MailAccept {
    fn addr(&self) -> SocketAddr {
        self.conf.routes[self.index].own.addr
    }

    fn log(&self) -> &crate::log::error::ErrorLog {
        &self.conf.routes[self.index].own.server.conf.error_log
    }

    fn accepted(&self, w: &Rc<WorkerCtx>, stream: std::net::TcpStream, peer: SocketAddr, guard: ConnGuard) {
        let route = &self.conf.routes[self.index];
        let own = route.own.addr;
        let wildcard = route.own.unix.is_none() && own.ip().is_unspecified();
        let local = if wildcard { stream.local_addr().unwrap_or(own) } else { own };
        let addr = route.find(local).clone();
        let id = w.next_serial();
        let unix = addr.unix.is_some();
        let debug = crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), unix);
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        if unix {
            crate::log_debug!(self.log(), debug, "*{} accept: unix: fd:{}", id, fd);
        } else {
            crate::log_debug!(self.log(), debug, "*{} accept: {} fd:{}", id, peer, fd);
        }
        let fut = Box::pin(run(addr, stream, peer, local, (id, debug), guard));
        tokio::task::spawn_local(crate::clock::per_poll(fut));
    }
}

/// How the client authenticated (nginx's `Auth-Method` words).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    Plain,
    Apop,
    CramMd5,
    External,
    None,
}

impl Method {
    fn word(self) -> &'static str {
        match self {
            Method::Plain => "plain",
            Method::Apop => "apop",
            Method::CramMd5 => "cram-md5",
            Method::External => "external",
            Method::None => "none",
        }
    }
}

/// Where the auth state is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum St {
    Start,
    /// POP3 after USER.
    User,
    LoginUsername,
    LoginPassword,
    Plain,
    CramMd5,
    External,
}

/// What a command leads to.
pub(super) enum Step {
    Reply(Vec<u8>),
    /// Answer, then close.
    Quit(Vec<u8>),
    /// Answer, then TLS.
    StartTls(Vec<u8>),
    /// Credentials complete: ask the authentication server.
    Auth,
    /// An invalid command (counted against `max_errors`).
    Invalid,
}

pub struct Session {
    pub addr: Arc<Addr>,
    pub id: u64,
    /// The client is one `debug_connection` names: the session's lines go
    /// to every log (`log::debug`).
    pub debug: bool,
    pub client: SocketAddr,
    /// The client came over a unix-domain socket (`listen unix:`) and has
    /// no address: nginx's `unix:` in logs, `Client-IP` and `XCLIENT`.
    pub client_unix: bool,
    pub local: SocketAddr,
    pub protocol: Protocol,
    pub conn: Option<Conn>,
    /// Bytes read from the client and not yet taken by a command.
    pub buf: Vec<u8>,
    pub(super) cap: usize,
    pub(super) st: St,
    pub tag: Vec<u8>,
    pub login: Vec<u8>,
    pub passwd: Vec<u8>,
    pub salt: Option<Vec<u8>>,
    pub method: Method,
    pub attempt: u32,
    pub(super) errors: u32,
    /// Synchronizing literals of the current IMAP command already
    /// answered with a continuation.
    pub(super) literals_acked: usize,
    pub smtp_helo: Vec<u8>,
    pub smtp_from: Vec<u8>,
    pub smtp_to: Vec<u8>,
    pub esmtp: bool,
    /// `Client-Host` (SMTP without a resolver: `[UNAVAILABLE]`).
    pub host: Option<String>,
    pub starttls_used: bool,
    /// The PROXY header the connection began with.
    pub proxy_protocol: Option<crate::proxy_protocol::ProxyAddrs>,
    /// What the authentication request tells of the client's TLS.
    pub ssl: Option<auth_http::SslInfo>,
}

impl Session {
    pub fn conf(&self) -> &super::conf::SrvConf {
        &self.addr.server.conf
    }

    /// The client as nginx writes it: its address, or `unix:`.
    pub fn client_text(&self) -> String {
        if self.client_unix { "unix:".to_string() } else { self.client.ip().to_string() }
    }

    /// The listen address as nginx writes it: `ADDR:PORT` or `unix:PATH`.
    fn server_text(&self) -> String {
        match &self.addr.unix {
            Some(p) => format!("unix:{p}"),
            None => self.local.to_string(),
        }
    }

    /// An error-log line about this session, in nginx's mail shape.
    pub fn log(&self, level: Level, msg: std::fmt::Arguments<'_>) {
        let conf = self.conf();
        if !self.debug && !conf.error_log.enabled(level) {
            return;
        }
        let mut tail = format!(
            ", client: {}{}, server: {}",
            self.client_text(),
            if self.starttls_used { " using starttls" } else { "" },
            self.server_text()
        );
        if !self.login.is_empty() {
            tail.push_str(&format!(", login: \"{}\"", String::from_utf8_lossy(&self.login)));
        }
        crate::log_conn!(conf.error_log, self.debug, level, "*{} {}{}", self.id, msg, tail);
    }

    pub fn tls(&self) -> bool {
        self.conn.as_ref().is_some_and(Conn::is_tls)
    }

    pub(super) fn starttls_only(&self) -> bool {
        !self.tls() && self.conf().starttls == StartTls::Only
    }

    /// Writes to the client; false when it is gone.
    pub async fn send(&mut self, data: &[u8]) -> bool {
        let timeout = self.conf().timeout;
        let Some(c) = self.conn.as_mut() else { return false };
        let w = async {
            c.write_all(data).await?;
            c.flush().await
        };
        matches!(tokio::time::timeout(timeout, w).await, Ok(Ok(())))
    }

    /// Reads more from the client into `buf`; false on close, error or
    /// `timeout` (logged as nginx does).
    pub(super) async fn fill(&mut self) -> bool {
        let timeout = self.conf().timeout;
        let room = self.cap.saturating_sub(self.buf.len()).max(1);
        let mut chunk = vec![0u8; room];
        let Some(c) = self.conn.as_mut() else { return false };
        match tokio::time::timeout(timeout, c.read(&mut chunk)).await {
            Ok(Ok(0)) | Ok(Err(_)) => false,
            Ok(Ok(n)) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(_) => {
                self.log(Level::Info, format_args!("client timed out (110: Connection timed out) while in auth state"));
                false
            }
        }
    }

    pub(super) fn internal_error(&self) -> &'static [u8] {
        match self.protocol {
            Protocol::Imap => b"* BAD internal server error\r\n",
            Protocol::Pop3 => b"-ERR internal server error\r\n",
            Protocol::Smtp => b"451 4.3.2 Internal server error\r\n",
        }
    }

    pub(super) fn invalid_reply(&self) -> Vec<u8> {
        match self.protocol {
            Protocol::Imap => self.tagged(b"BAD invalid command\r\n"),
            Protocol::Pop3 => b"-ERR invalid command\r\n".to_vec(),
            Protocol::Smtp => b"500 5.5.1 Invalid command\r\n".to_vec(),
        }
    }

    /// IMAP: `tag SP text` (`* ` with no tag).
    pub(super) fn tagged(&self, text: &[u8]) -> Vec<u8> {
        let mut v = if self.tag.is_empty() { b"*".to_vec() } else { self.tag.clone() };
        v.push(b' ');
        v.extend_from_slice(text);
        v
    }

    /// The challenge nginx makes for APOP and CRAM-MD5: `<random.time@name>`.
    pub(super) fn make_salt(&mut self) -> Vec<u8> {
        if let Some(s) = &self.salt {
            return s.clone();
        }
        let mut r = [0u8; 4];
        let _ = aws_lc_rs::rand::fill(&mut r);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let s =
            format!("<{}.{}@{}>\r\n", u32::from_le_bytes(r) & 0x7fff_ffff, now, self.conf().server_name).into_bytes();
        self.salt = Some(s.clone());
        s
    }

    pub(super) fn cram_challenge(&mut self, prefix: &str) -> Vec<u8> {
        let salt = self.make_salt();
        let bare = salt.strip_suffix(b"\r\n").unwrap_or(&salt);
        format!("{prefix}{}\r\n", parse::encode_base64(bare)).into_bytes()
    }
}

/// A session counted open in the worker's mail metrics until it ends
/// (`crate::metrics::l4::MailCounters`).
struct Open(usize);

impl Open {
    fn new(p: Protocol) -> Open {
        let slot = match p {
            Protocol::Imap => 0,
            Protocol::Pop3 => 1,
            Protocol::Smtp => 2,
        };
        crate::metrics::with_local(|m| m.mail().opened(slot));
        Open(slot)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        crate::metrics::with_local(|m| m.mail().closed(self.0));
    }
}

/// Counts how an `auth_http` exchange ended: 0 ok, 1 failed (refused),
/// 2 error (`crate::metrics::l4::AUTH_RESULTS`).
fn count_auth(result: usize) {
    crate::metrics::with_local(|m| m.mail().auth(result));
}

async fn run(
    addr: Arc<Addr>,
    stream: std::net::TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    (id, debug): (u64, bool),
    _g: ConnGuard,
) {
    let _ = stream.set_nodelay(true);
    let Ok(mut tcp) = TcpStream::from_std(stream) else { return };
    let conf = &addr.server.conf;
    let protocol = conf.protocol.unwrap_or(Protocol::Smtp);
    let cap = match protocol {
        Protocol::Imap => conf.imap_client_buffer,
        // nginx's POP3 buffer is fixed at 128 bytes.
        Protocol::Pop3 => 128,
        Protocol::Smtp => conf.smtp_client_buffer,
    };
    let _open = Open::new(protocol);
    match &addr.unix {
        Some(path) => log_to!(conf.error_log, Level::Info, "*{} client unix: connected to unix:{}", id, path),
        None => log_to!(conf.error_log, Level::Info, "*{} client {} connected to {}", id, peer, local),
    }
    let mut s = Session {
        addr: addr.clone(),
        id,
        debug,
        client: peer,
        client_unix: addr.unix.is_some(),
        local,
        protocol,
        conn: None,
        buf: Vec::new(),
        cap,
        st: St::Start,
        tag: Vec::new(),
        login: Vec::new(),
        passwd: Vec::new(),
        salt: None,
        method: Method::Plain,
        attempt: 0,
        errors: 0,
        literals_acked: 0,
        smtp_helo: Vec::new(),
        smtp_from: Vec::new(),
        smtp_to: Vec::new(),
        esmtp: false,
        host: None,
        starttls_used: false,
        proxy_protocol: None,
        ssl: None,
    };
    if addr.proxy_protocol {
        match crate::proxy_protocol::read(&mut tcp, conf.timeout).await {
            Ok(pp) => {
                let trusted = if s.client_unix {
                    conf.real_ip_from.contains(&crate::cidr::Cidr::Unix)
                } else {
                    crate::cidr::any_contains(&conf.real_ip_from, peer.ip())
                };
                if let Some(p) = &pp
                    && trusted
                    && let Ok(ip) = p.src_addr.parse::<std::net::IpAddr>()
                {
                    s.client = SocketAddr::new(ip, p.src_port);
                    s.client_unix = false;
                }
                s.proxy_protocol = pp;
            }
            Err(e) => {
                s.log(Level::Error, format_args!("{e} while reading PROXY protocol"));
                return;
            }
        }
    }
    if addr.ssl {
        let Some(cfg) = addr.server.tls.clone() else { return };
        match handshake(&s, cfg, tcp).await {
            Some(t) => {
                s.conn = Some(Conn::Tls(Box::new(t)));
                if !verified(&mut s).await {
                    return;
                }
            }
            None => return,
        }
    } else {
        s.conn = Some(Conn::Plain(tcp));
    }
    if protocol == Protocol::Smtp {
        // Without a resolver nginx sends this for the client's name.
        let host = match &s.conf().resolver {
            Some(r) => client_name(&s, r).await,
            None => "[UNAVAILABLE]".into(),
        };
        s.host = Some(host);
    }
    if !greet(&mut s).await {
        return;
    }
    auth_state(&mut s).await;
}

/// The client's name as nginx's SMTP module finds it: the address's PTR
/// name, kept when that name's addresses include the client's;
/// `[UNAVAILABLE]` when a name does not exist or does not lead back,
/// `[TEMPUNAVAIL]` when the servers failed (logged as nginx does).
async fn client_name(s: &Session, r: &crate::resolver::ResolverConf) -> String {
    use crate::resolver::query;
    use crate::resolver::wire::Failure;
    if s.client_unix {
        // nginx does not look a unix-domain client up.
        return "[UNAVAILABLE]".into();
    }
    let ip = s.client.ip();
    let deadline = tokio::time::Instant::now() + s.conf().resolver_timeout;
    let fail = |f: Failure, what: &dyn std::fmt::Display| {
        s.log(Level::Error, format_args!("{what} could not be resolved ({})", f.nginx_text()));
        if f == Failure::HostNotFound { "[UNAVAILABLE]" } else { "[TEMPUNAVAIL]" }.to_string()
    };
    let name = match query::name_of(r, ip, deadline).await {
        Ok((n, _)) => n,
        Err(f) => return fail(f, &ip),
    };
    match query::addresses(r, &name, deadline).await {
        Ok((addrs, _)) if addrs.contains(&ip) => name,
        Ok(_) => {
            s.log(Level::Error, format_args!("{name} address does not match client address"));
            "[UNAVAILABLE]".into()
        }
        Err(f) => fail(f, &name),
    }
}

async fn handshake(
    s: &Session,
    cfg: Arc<rustls::ServerConfig>,
    tcp: TcpStream,
) -> Option<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>> {
    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
    match tokio::time::timeout(s.conf().timeout, acceptor.accept(crate::tls::reneg::Watched::new(tcp))).await {
        Ok(Ok(mut t)) => {
            t.get_mut().0.arm();
            Some(t)
        }
        Ok(Err(e)) => {
            s.log(Level::Info, format_args!("SSL_do_handshake() failed ({e}) while SSL handshaking"));
            None
        }
        Err(_) => {
            s.log(Level::Info, format_args!("client timed out (110: Connection timed out) while SSL handshaking"));
            None
        }
    }
}

/// The greeting; SMTP's `smtp_greeting_delay` refuses a client that
/// speaks before it.
async fn greet(s: &mut Session) -> bool {
    let conf = s.conf().clone();
    let mut greeting = s.addr.server.answers.greeting.clone();
    if s.protocol == Protocol::Pop3 && conf.pop3_auth & (auth::APOP | auth::CRAM_MD5) != 0 {
        let salt = s.make_salt();
        greeting.truncate(greeting.len() - 2);
        greeting.push(b' ');
        greeting.extend_from_slice(&salt);
    }
    if s.protocol == Protocol::Smtp && !conf.smtp_greeting_delay.is_zero() {
        let mut probe = [0u8; 512];
        let Some(c) = s.conn.as_mut() else { return false };
        if let Ok(r) = tokio::time::timeout(conf.smtp_greeting_delay, c.read(&mut probe)).await {
            if let Ok(n) = r
                && n > 0
            {
                let text = String::from_utf8_lossy(&probe[..n]).replace(['\r', '\n'], " ");
                s.log(Level::Info, format_args!("client was rejected before greeting: \"{}\"", text.trim_end()));
                s.send(b"503 5.5.0 Improper use of SMTP command pipelining\r\n").await;
            }
            return false;
        }
    }
    s.send(&greeting).await
}

/// Reads and answers commands until the credentials are complete, then
/// authenticates; a refusal with `Auth-Wait` goes back to reading.
async fn auth_state(s: &mut Session) {
    loop {
        let parsed = match (s.st, s.protocol) {
            (St::Start | St::User, Protocol::Imap) => parse::imap(&s.buf),
            (St::Start | St::User, _) => parse::simple(&s.buf),
            _ => parse::continuation(&s.buf),
        };
        let step = match parsed {
            Parsed::Need => {
                if s.buf.len() >= s.cap {
                    let text = String::from_utf8_lossy(&s.buf).into_owned();
                    s.log(Level::Info, format_args!("client sent too long command \"{}\" while in auth state", text));
                    let r = s.invalid_reply();
                    s.send(&r).await;
                    return;
                }
                if !s.fill().await {
                    return;
                }
                continue;
            }
            Parsed::Literal(n) => {
                if n >= s.literals_acked {
                    s.literals_acked = n + 1;
                    if !s.send(b"+ OK\r\n").await {
                        return;
                    }
                }
                if !s.fill().await {
                    return;
                }
                continue;
            }
            Parsed::Invalid { consumed, tag } => {
                s.buf.drain(..consumed);
                s.literals_acked = 0;
                if s.protocol == Protocol::Imap {
                    s.tag = tag;
                }
                Step::Invalid
            }
            Parsed::Command(c) => {
                s.buf.drain(..c.consumed);
                s.literals_acked = 0;
                if s.protocol == Protocol::Imap && matches!(s.st, St::Start) {
                    s.tag = c.tag.clone();
                }
                match s.protocol {
                    Protocol::Imap => imap(s, &c),
                    Protocol::Pop3 => pop3(s, &c),
                    Protocol::Smtp => smtp(s, &c),
                }
            }
        };
        match step {
            Step::Reply(r) => {
                if !s.send(&r).await {
                    return;
                }
            }
            Step::Quit(r) => {
                s.send(&r).await;
                if let Some(c) = s.conn.as_mut() {
                    let _ = c.shutdown().await;
                }
                return;
            }
            Step::Invalid => {
                s.st = St::Start;
                if s.errors >= s.conf().max_errors {
                    s.log(Level::Info, format_args!("client sent too many invalid commands while in auth state"));
                    return;
                }
                s.errors += 1;
                let r = s.invalid_reply();
                if !s.send(&r).await {
                    return;
                }
            }
            Step::StartTls(r) => {
                if !s.send(&r).await {
                    return;
                }
                if !starttls(s).await {
                    return;
                }
            }
            Step::Auth => {
                s.st = St::Start;
                s.attempt += 1;
                match authenticate(s).await {
                    Some(Auth::Retry) => {}
                    Some(Auth::Proxy(backend)) => {
                        super::proxy::run(s, backend).await;
                        return;
                    }
                    None => return,
                }
            }
        }
    }
}

/// STARTTLS/STLS: what was read before is dropped (RFC 3207), then the
/// handshake.
async fn starttls(s: &mut Session) -> bool {
    let Some(cfg) = s.addr.server.tls.clone() else { return false };
    let Some(Conn::Plain(tcp)) = s.conn.take() else { return false };
    s.buf.clear();
    s.starttls_used = true;
    match handshake(s, cfg, tcp).await {
        Some(t) => {
            s.conn = Some(Conn::Tls(Box::new(t)));
            verified(s).await
        }
        None => false,
    }
}

/// The client certificate check after a handshake; false when it refused
/// the session (answered and logged).
async fn verified(s: &mut Session) -> bool {
    let Some(srv) = s.addr.server.tls_srv.clone() else { return true };
    let Some(Conn::Tls(t)) = s.conn.as_ref() else { return true };
    match super::tls::check(s.conf(), &srv, t) {
        Ok(info) => {
            s.ssl = Some(info);
            true
        }
        Err(r) => {
            match &r {
                super::tls::Refusal::Error(m) => s.log(Level::Info, format_args!("{m} while SSL handshaking")),
                super::tls::Refusal::NoCert => {
                    s.log(Level::Info, format_args!("client sent no required SSL certificate while SSL handshaking"))
                }
            }
            let reply = r.reply(s.protocol);
            s.send(reply).await;
            false
        }
    }
}

enum Auth {
    Retry,
    Proxy(Backend),
}

/// Where to proxy to and with what credentials.
pub struct Backend {
    pub addr: SocketAddr,
    pub name: String,
}

/// Asks the authentication server; Some(Retry) after a refusal the client
/// may retry, None when the session ends.
async fn authenticate(s: &mut Session) -> Option<Auth> {
    let conf = s.addr.server.conf.clone();
    let ah = conf.auth_http.as_ref()?;
    loop {
        // nginx sends the challenge for any method but plain once one was
        // made (APOP and CRAM-MD5 digests are no passwords).
        let with_salt = s.method != Method::Plain && s.salt.is_some();
        let ssl = if s.tls() { s.ssl.clone() } else { None };
        let req = auth_http::Request {
            conf: ah,
            method: s.method.word(),
            user: &s.login,
            pass: &s.passwd,
            salt: if with_salt { s.salt.as_deref() } else { None },
            protocol: s.protocol,
            attempt: s.attempt,
            client_ip: s.client_text(),
            client_host: s.host.as_deref(),
            proxy_protocol: s.proxy_protocol.as_ref(),
            smtp: if s.method == Method::None { Some((&s.smtp_helo, &s.smtp_from, &s.smtp_to)) } else { None },
            ssl,
            headers: &conf.auth_http_headers,
        };
        let bytes = auth_http::request(&req);
        let answer = match auth_http::ask(ah, &bytes, conf.auth_http_timeout).await {
            Ok(a) => a,
            Err(e) => {
                count_auth(2);
                s.log(Level::Error, format_args!("{e}"));
                let r = s.internal_error();
                s.send(r).await;
                return None;
            }
        };
        if with_salt {
            // The digest is no password: the server must send one.
            s.passwd.clear();
        }
        match answer {
            Answer::Wait { wait } => {
                tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
                continue;
            }
            Answer::Error { msg, code, wait } => {
                count_auth(1);
                s.log(
                    Level::Info,
                    format_args!("client login failed: \"{}\" while in http auth state", String::from_utf8_lossy(&msg)),
                );
                let reply = match s.protocol {
                    Protocol::Pop3 => [b"-ERR ".as_slice(), &msg, b"\r\n"].concat(),
                    Protocol::Imap => s.tagged(&[b"NO ".as_slice(), &msg, b"\r\n"].concat()),
                    Protocol::Smtp => {
                        let code = code.unwrap_or_else(|| b"535 5.7.0".to_vec());
                        [code.as_slice(), b" ", &msg, b"\r\n"].concat()
                    }
                };
                let Some(wait) = wait else {
                    s.send(&reply).await;
                    return None;
                };
                tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
                if !s.send(&reply).await {
                    return None;
                }
                s.method = Method::Plain;
                return Some(Auth::Retry);
            }
            Answer::Ok { server, port, user, pass } => {
                // An OK without a usable backend is an error, as nginx
                // answers it (internal error to the client).
                let usable = !server.is_empty() && !port.is_empty() && auth_http::backend(&server, &port).is_some();
                let sends_pass = pass.is_some()
                    || !((with_salt || s.method == Method::External)
                        && (s.protocol != Protocol::Smtp || conf.proxy_smtp_auth));
                count_auth(if usable && sends_pass { 0 } else { 2 });
                if let Some(u) = user {
                    s.login = u;
                }
                if let Some(p) = pass {
                    s.passwd = p;
                } else if (with_salt || s.method == Method::External)
                    && (s.protocol != Protocol::Smtp || conf.proxy_smtp_auth)
                {
                    s.log(
                        Level::Error,
                        format_args!("auth http server {} did not send password while in http auth state", ah.addr),
                    );
                    let r = s.internal_error();
                    s.send(r).await;
                    return None;
                }
                if server.is_empty() || port.is_empty() {
                    s.log(
                        Level::Error,
                        format_args!(
                            "auth http server {} did not send server or port while in http auth state",
                            ah.addr
                        ),
                    );
                    let r = s.internal_error();
                    s.send(r).await;
                    return None;
                }
                let Some(addr) = auth_http::backend(&server, &port) else {
                    s.log(
                        Level::Error,
                        format_args!(
                            "auth http server {} sent invalid server address:\"{}:{}\" while in http auth state",
                            ah.addr,
                            String::from_utf8_lossy(&server),
                            String::from_utf8_lossy(&port)
                        ),
                    );
                    let r = s.internal_error();
                    s.send(r).await;
                    return None;
                };
                let name = format!("{}:{}", String::from_utf8_lossy(&server), String::from_utf8_lossy(&port));
                return Some(Auth::Proxy(Backend { addr, name }));
            }
        }
    }
}
