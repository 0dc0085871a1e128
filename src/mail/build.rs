//! Builds `mail {}` into [`MailConf`], with nginx's messages: the mail
//! level's directives, then each server from a copy of them; then the
//! capability answers each server's protocol gives, built once as nginx
//! builds them when it merges.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::conf::*;
use super::directives::{self, Level};
use crate::config::build::Ctx;
use crate::config::family::Listen;
use crate::config::model::{MainConf, SockOpts, SslConf};
use crate::config::parser::{ConfError, Directive, Span};

/// A `listen` line, before grouping.
struct ListenSpec {
    addr: SocketAddr,
    /// `listen unix:PATH` (`addr` is then `listener::unix::PLACEHOLDER`).
    unix: Option<Arc<str>>,
    ssl: bool,
    proxy_protocol: bool,
    reuseport: bool,
    bind: bool,
    backlog: Option<i32>,
    sock: SockOpts,
    span: Span,
}

pub fn build(d: &Directive, ctx: &mut Ctx, main: &MainConf) -> Result<MailConf, ConfError> {
    let dirs = d.block.as_deref().unwrap_or(&[]);
    let mut top = default_conf(main);
    let mut seen = Vec::new();
    for d in dirs.iter().filter(|d| d.name != "server") {
        directives::check(d, Level::Main)?;
        directives::apply(&mut top, d, ctx, &mut seen)?;
    }
    let mut servers = Vec::new();
    let mut specs: Vec<(ListenSpec, Arc<Server>)> = Vec::new();
    for d in dirs.iter().filter(|d| d.name == "server") {
        directives::check(d, Level::Main)?;
        let (server, listens) = build_server(d, &top, ctx)?;
        let server = Arc::new(server);
        for l in listens {
            specs.push((l, server.clone()));
        }
        servers.push(server);
    }
    let (listens, routes) = group(specs, main)?;
    Ok(MailConf { servers, listens, routes })
}

fn default_conf(main: &MainConf) -> SrvConf {
    SrvConf {
        protocol: None,
        server_name: crate::process::hostname().to_string(),
        error_log: main.error_log.clone(),
        auth_http: None,
        auth_http_headers: Vec::new(),
        auth_http_timeout: Duration::from_secs(60),
        auth_http_pass_client_cert: false,
        proxy_buffer: 4096,
        proxy_timeout: Duration::from_secs(24 * 3600),
        proxy_pass_error_message: false,
        proxy_protocol: false,
        proxy_smtp_auth: false,
        xclient: true,
        smtp_auth: auth::PLAIN | auth::LOGIN,
        smtp_capabilities: Vec::new(),
        smtp_client_buffer: 4096,
        smtp_greeting_delay: Duration::ZERO,
        imap_auth: auth::PLAIN,
        imap_capabilities: vec!["IMAP4".into(), "IMAP4rev1".into(), "UIDPLUS".into()],
        imap_client_buffer: 4096,
        pop3_auth: auth::PLAIN,
        pop3_capabilities: vec!["TOP".into(), "USER".into(), "UIDL".into()],
        starttls: StartTls::Off,
        starttls_at: String::new(),
        ssl: SslConf {
            tls12: true,
            tls13: true,
            session_timeout: Duration::from_secs(300),
            session_tickets: true,
            verify_depth: 1,
            ..SslConf::default()
        },
        max_errors: 5,
        timeout: Duration::from_secs(60),
        real_ip_from: Vec::new(),
        resolver_timeout: Duration::from_secs(30),
        resolver: None,
    }
}

fn file_line(msg: String, span: &Span) -> ConfError {
    ConfError { msg, file: Some(span.file.as_ref().clone()), line: span.line }
}

fn build_server(d: &Directive, top: &SrvConf, ctx: &mut Ctx) -> Result<(Server, Vec<ListenSpec>), ConfError> {
    let mut conf = top.clone();
    let mut listens = Vec::new();
    let mut seen = Vec::new();
    for sd in d.block.as_deref().unwrap_or(&[]) {
        directives::check(sd, Level::Server)?;
        match sd.name.as_str() {
            "listen" => listens.push(listen(sd)?),
            _ => directives::apply(&mut conf, sd, ctx, &mut seen)?,
        }
    }
    let at = format!("{}:{}", d.span.file.display(), d.span.line);
    if listens.is_empty() {
        return Err(file_line("no \"listen\" is defined for server".into(), &d.span));
    }
    if conf.protocol.is_none() {
        // nginx picks the protocol by the first listen's port.
        conf.protocol = match listens[0].addr.port() {
            143 | 993 => Some(Protocol::Imap),
            110 | 995 => Some(Protocol::Pop3),
            25 | 587 | 465 => Some(Protocol::Smtp),
            _ => None,
        };
    }
    let Some(protocol) = conf.protocol else {
        return Err(ConfError { msg: format!("unknown mail protocol for server in {at}"), file: None, line: 0 });
    };
    if conf.auth_http.is_none() {
        return Err(ConfError { msg: format!("no \"auth_http\" is defined for server in {at}"), file: None, line: 0 });
    }
    if conf.ssl.on {
        for l in &mut listens {
            l.ssl = true;
        }
    }
    let needs_tls = listens.iter().any(|l| l.ssl) || conf.starttls != StartTls::Off;
    let mut tls_srv = None;
    let tls = if needs_tls {
        if conf.ssl.certificates.is_empty() {
            let (mode, where_) = match listens.iter().find(|l| l.ssl) {
                Some(l) => ("listen ... ssl", format!("{}:{}", l.span.file.display(), l.span.line)),
                None => ("starttls", conf.starttls_at.clone()),
            };
            return Err(ConfError {
                msg: format!("no \"ssl_certificate\" is defined for the \"{mode}\" directive in {where_}"),
                file: None,
                line: 0,
            });
        }
        let built = crate::tls::build_server(&conf.ssl, &mut ctx.tls_cache, None)?;
        if built.as_ref().is_some_and(|t| t.dynamic.is_some()) {
            // nginx's mail module has no variables either.
            return Err(ConfError::at("\"ssl_certificate\" in mail does not take variables", &d.span));
        }
        tls_srv = built.clone();
        let base =
            built.and_then(|t| t.h1_only.clone()).ok_or_else(|| ConfError::at("invalid TLS settings", &d.span))?;
        let mut cfg = (*base).clone();
        // nginx's ngx_mail_ssl_alpn_select: the protocol's own name; a
        // client offering only others fails the handshake
        // (no_application_protocol), one offering none is served.
        let name: &[u8] = match protocol {
            crate::mail::conf::Protocol::Imap => b"imap",
            crate::mail::conf::Protocol::Pop3 => b"pop3",
            crate::mail::conf::Protocol::Smtp => b"smtp",
        };
        cfg.alpn_protocols = vec![name.to_vec()];
        Some(Arc::new(cfg))
    } else {
        None
    };
    let answers = answers(&conf, protocol);
    Ok((Server { conf, tls, tls_srv, answers }, listens))
}

const CRLF: &str = "\r\n";

/// The greeting and capability answers of the server's protocol.
fn answers(c: &SrvConf, p: Protocol) -> Answers {
    let mut a = Answers::default();
    match p {
        Protocol::Imap => {
            a.greeting = b"* OK IMAP4 ready\r\n".to_vec();
            let mut caps = String::from("* CAPABILITY");
            for cap in &c.imap_capabilities {
                caps.push(' ');
                caps.push_str(cap);
            }
            let base = caps.clone();
            for (bit, name) in [
                (auth::PLAIN, "AUTH=PLAIN"),
                (auth::LOGIN, "AUTH=LOGIN"),
                (auth::CRAM_MD5, "AUTH=CRAM-MD5"),
                (auth::EXTERNAL, "AUTH=EXTERNAL"),
            ] {
                if c.imap_auth & bit != 0 {
                    caps.push(' ');
                    caps.push_str(name);
                }
            }
            a.capability = format!("{caps}{CRLF}").into_bytes();
            a.starttls_capability = format!("{caps} STARTTLS{CRLF}").into_bytes();
            a.starttls_only_capability = format!("{base} STARTTLS LOGINDISABLED{CRLF}").into_bytes();
        }
        Protocol::Pop3 => {
            a.greeting = b"+OK POP3 ready\r\n".to_vec();
            let head = format!("+OK Capability list follows{CRLF}");
            let mut lines: Vec<String> = c.pop3_capabilities.clone();
            let mut sasl = String::new();
            if c.pop3_auth & auth::PLAIN != 0 {
                sasl.push_str(" PLAIN LOGIN");
            }
            if c.pop3_auth & auth::CRAM_MD5 != 0 {
                sasl.push_str(" CRAM-MD5");
            }
            if c.pop3_auth & auth::EXTERNAL != 0 {
                sasl.push_str(" EXTERNAL");
            }
            if !sasl.is_empty() {
                lines.push(format!("SASL{sasl}"));
            }
            let join = |ls: &[String]| ls.iter().map(|l| format!("{l}{CRLF}")).collect::<String>();
            a.capability = format!("{head}{}.{CRLF}", join(&lines)).into_bytes();
            a.starttls_capability = format!("{head}{}STLS{CRLF}.{CRLF}", join(&lines)).into_bytes();
            let only: Vec<String> =
                c.pop3_capabilities.iter().filter(|l| !l.eq_ignore_ascii_case("USER")).cloned().collect();
            a.starttls_only_capability = format!("{head}{}STLS{CRLF}.{CRLF}", join(&only)).into_bytes();
            let mut m = format!("+OK methods supported:{CRLF}");
            if c.pop3_auth & auth::PLAIN != 0 {
                m.push_str("PLAIN\r\nLOGIN\r\n");
            }
            if c.pop3_auth & auth::CRAM_MD5 != 0 {
                m.push_str("CRAM-MD5\r\n");
            }
            if c.pop3_auth & auth::EXTERNAL != 0 {
                m.push_str("EXTERNAL\r\n");
            }
            m.push_str(".\r\n");
            a.auth_capability = m.into_bytes();
        }
        Protocol::Smtp => {
            a.greeting = format!("220 {} ESMTP ready{CRLF}", c.server_name).into_bytes();
            a.helo = format!("250 {}{CRLF}", c.server_name).into_bytes();
            let mut lines = vec![c.server_name.clone()];
            lines.extend(c.smtp_capabilities.iter().cloned());
            let base = lines.clone();
            let mut auth_line = String::from("AUTH");
            for (bit, name) in [
                (auth::PLAIN, " PLAIN"),
                (auth::LOGIN, " LOGIN"),
                (auth::CRAM_MD5, " CRAM-MD5"),
                (auth::EXTERNAL, " EXTERNAL"),
            ] {
                if c.smtp_auth & bit != 0 {
                    auth_line.push_str(name);
                }
            }
            if auth_line.len() > 4 {
                lines.push(auth_line);
            }
            let ehlo = |ls: &[String]| {
                let mut out = String::new();
                for (i, l) in ls.iter().enumerate() {
                    let sep = if i + 1 == ls.len() { ' ' } else { '-' };
                    out.push_str(&format!("250{sep}{l}{CRLF}"));
                }
                out.into_bytes()
            };
            a.capability = ehlo(&lines);
            let mut with = lines.clone();
            with.push("STARTTLS".into());
            a.starttls_capability = ehlo(&with);
            let mut only = base;
            only.push("STARTTLS".into());
            a.starttls_only_capability = ehlo(&only);
        }
    }
    a
}

/// `listen ADDRESS:PORT [ssl] [proxy_protocol] [backlog=N] [reuseport]
/// [bind] [so_keepalive=...] [rcvbuf=] [sndbuf=]`.
fn listen(d: &Directive) -> Result<ListenSpec, ConfError> {
    let raw = d.args[0].text.as_str();
    let (addr, unix) = crate::config::set_server::family_listen_target(raw).map_err(|m| ConfError::at(m, &d.span))?;
    let mut l = ListenSpec {
        addr,
        unix,
        ssl: false,
        proxy_protocol: false,
        reuseport: false,
        bind: false,
        backlog: None,
        sock: SockOpts::default(),
        span: d.span.clone(),
    };
    for w in d.args.iter().skip(1) {
        let p = w.text.as_str();
        match p {
            "ssl" => l.ssl = true,
            "proxy_protocol" => l.proxy_protocol = true,
            "reuseport" => l.reuseport = true,
            "bind" => l.bind = true,
            _ => {
                if let Some(v) = p.strip_prefix("backlog=") {
                    match crate::config::value::parse_number(v) {
                        Some(n) if n > 0 && n <= i32::MAX as u64 => l.backlog = Some(n as i32),
                        _ => return Err(ConfError::at(format!("invalid backlog \"{}\"", p), &d.span)),
                    }
                } else if let Some(v) = p.strip_prefix("ipv6only=") {
                    if v != "on" && v != "off" {
                        return Err(ConfError::at(format!("invalid ipv6only flags \"{}\"", v), &d.span));
                    }
                } else if let Some(r) = crate::config::set_server::sock_opt(p, &mut l.sock) {
                    r.map_err(|m| ConfError::at(m, &d.span))?;
                } else {
                    return Err(ConfError::at(format!("invalid parameter \"{}\"", p), &d.span));
                }
            }
        }
    }
    Ok(l)
}

/// The sockets to bind and what each carries: one per distinct address
/// (nginx's "duplicate ... address and port pair" otherwise); a specific
/// address covered by a wildcard on its port (no `bind`) rides on the
/// wildcard's socket.
fn group(specs: Vec<(ListenSpec, Arc<Server>)>, main: &MainConf) -> Result<(Vec<Listen>, Vec<Route>), ConfError> {
    for (i, (a, _)) in specs.iter().enumerate() {
        if specs[..i].iter().any(|(b, _)| b.addr == a.addr && b.unix == a.unix) {
            let shown = a.unix.as_ref().map_or_else(|| a.addr.to_string(), |p| format!("unix:{p}"));
            return Err(ConfError::at(format!("duplicate \"{shown}\" address and port pair"), &a.span));
        }
    }
    let wildcard_of = |a: &ListenSpec| {
        specs.iter().position(|(w, _)| {
            w.unix.is_none()
                && a.unix.is_none()
                && w.addr.ip().is_unspecified()
                && w.addr.port() == a.addr.port()
                && w.addr.is_ipv4() == a.addr.is_ipv4()
        })
    };
    let mut listens = Vec::new();
    let mut routes: Vec<Route> = Vec::new();
    let mut slot_of: Vec<Option<usize>> = vec![None; specs.len()];
    for (i, (l, server)) in specs.iter().enumerate() {
        if !l.bind && l.unix.is_none() && !l.addr.ip().is_unspecified() && wildcard_of(l).is_some() {
            continue;
        }
        slot_of[i] = Some(listens.len());
        listens.push(Listen {
            addr: l.addr,
            unix: l.unix.clone(),
            udp: false,
            reuseport: l.reuseport || main.reuse_port,
            backlog: l.backlog.unwrap_or(511),
            sock: l.sock,
        });
        routes.push(Route { own: Arc::new(addr(l, server)), specific: Vec::new() });
    }
    for (i, (l, server)) in specs.iter().enumerate() {
        if slot_of[i].is_some() {
            continue;
        }
        if let Some(w) = wildcard_of(l).and_then(|w| slot_of[w]) {
            routes[w].specific.push(Arc::new(addr(l, server)));
        }
    }
    Ok((listens, routes))
}

fn addr(l: &ListenSpec, server: &Arc<Server>) -> Addr {
    Addr { addr: l.addr, unix: l.unix.clone(), ssl: l.ssl, proxy_protocol: l.proxy_protocol, server: server.clone() }
}
