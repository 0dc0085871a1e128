//! The TLS handshake of an accepted connection: read the ClientHello, pick
//! the server by SNI (the same name lookup as for Host), continue with that
//! server's configuration, all bounded by `client_header_timeout` so a
//! client that stalls mid-handshake cannot hold a slot.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

use crate::config::model::{ListenGroup, Server};
use crate::log::error::ErrorLog;
use crate::log::error::Level;
use crate::log_to;

/// What `$ssl_*` variables and the request pipeline need to know.
#[derive(Debug)]
pub struct TlsInfo {
    pub protocol: &'static str,
    pub cipher: &'static str,
    pub server_name: Option<Box<str>>,
    pub h2: bool,
    /// The protocol ALPN agreed on (`$ssl_alpn_protocol`): one of ours.
    pub alpn: Option<&'static str>,
    /// The key exchange group (`$ssl_curve`), in OpenSSL's name.
    pub curve: Option<&'static str>,
    pub resumed: bool,
    /// `$ssl_session_id`: 32 random bytes chosen at the session's full
    /// handshake and carried in its TLS 1.3 resumption ticket, so a resumed
    /// session shows the same id (as OpenSSL's session id does). rustls
    /// keeps no such data for TLS 1.2: a resumed one gets a new id.
    pub session_id: Option<[u8; 32]>,
    /// `$ssl_curves`: the groups the client offered, in OpenSSL's names
    /// (unknown ones as `0x` and the hex code, as nginx prints them).
    pub curves: Option<Box<str>>,
    /// `$ssl_ciphers`: the cipher suites the client offered, in OpenSSL's
    /// names (unknown ones as `0x` and the hex code).
    pub ciphers: Option<Box<str>>,
    pub has_client_cert: bool,
    pub require_client_cert: bool,
    /// The client's certificate failed verification: nginx's 495 unless
    /// `optional_no_ca` tolerates it; `$ssl_client_verify` names it.
    pub cert_error: Option<super::client_verify::VerifyError>,
    pub cert_error_tolerated: bool,
    /// The client's certificate, for `$ssl_client_s_dn` and the like.
    pub client_cert: Option<rustls_pki_types::CertificateDer<'static>>,
}

impl TlsInfo {
    /// `$ssl_client_verify`: NONE, SUCCESS or FAILED:reason.
    pub fn client_verify(&self) -> std::borrow::Cow<'static, str> {
        match (&self.cert_error, self.has_client_cert) {
            (_, false) => "NONE".into(),
            (None, true) => "SUCCESS".into(),
            (Some(e), true) => format!("FAILED:{}", e.text).into(),
        }
    }
}

/// `$ssl_curves`: the offered groups joined by `:`.
fn curve_list(groups: &[rustls::NamedGroup]) -> Box<str> {
    let mut out = String::new();
    for g in groups {
        if !out.is_empty() {
            out.push(':');
        }
        match super::names::group_name(*g) {
            "" => out.push_str(&format!("0x{:04x}", u16::from(*g))),
            name => out.push_str(name),
        }
    }
    out.into_boxed_str()
}

/// `$ssl_ciphers`: the offered suites joined by `:`, without the
/// signalling values (OpenSSL drops them from the list too).
fn cipher_list(suites: &[rustls::CipherSuite]) -> Box<str> {
    let mut out = String::new();
    for s in suites {
        let code = u16::from(*s);
        if code == 0x00ff || code == 0x5600 {
            continue;
        }
        if !out.is_empty() {
            out.push(':');
        }
        match super::names::openssl_suite_name(*s) {
            "UNKNOWN" => out.push_str(&format!("0x{code:04x}")),
            name => out.push_str(name),
        }
    }
    out.into_boxed_str()
}

/// What a finished handshake shows of itself; the offered groups and
/// suites, the session id and the certificate checks are `accept`'s (a
/// connection stream's `pass` hands over has none of them).
pub fn info_of(conn: &rustls::ServerConnection) -> TlsInfo {
    TlsInfo {
        protocol: conn.protocol_version().map(super::names::protocol_name).unwrap_or(""),
        cipher: conn.negotiated_cipher_suite().map(|s| super::names::openssl_suite_name(s.suite())).unwrap_or(""),
        server_name: conn.server_name().map(|n| n.to_ascii_lowercase().into_boxed_str()),
        h2: conn.alpn_protocol() == Some(b"h2"),
        alpn: match conn.alpn_protocol() {
            Some(b"h2") => Some("h2"),
            Some(b"http/1.1") => Some("http/1.1"),
            Some(b"http/1.0") => Some("http/1.0"),
            _ => None,
        },
        curve: conn
            .negotiated_key_exchange_group()
            .map(|g| super::names::group_name(g.name()))
            .filter(|n| !n.is_empty()),
        resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        session_id: conn.received_resumption_data().and_then(|d| <[u8; 32]>::try_from(d).ok()),
        curves: None,
        ciphers: None,
        has_client_cert: conn.peer_certificates().is_some_and(|c| !c.is_empty()),
        require_client_cert: false,
        cert_error: None,
        cert_error_tolerated: false,
        client_cert: conn.peer_certificates().and_then(|c| c.first()).map(|c| c.clone().into_owned()),
    }
}

/// Runs the handshake; None when it failed (logged at info, as nginx does).
pub async fn accept(
    tcp: TcpStream,
    g: &ListenGroup,
    timeout: Duration,
    id: u64,
    peer: SocketAddr,
) -> Option<(TlsStream<crate::tls::reneg::Watched>, TlsInfo)> {
    // Before SNI chose a server, the default server's logs; after, the
    // chosen one's (nginx switches the connection's log in its SNI callback).
    let fail = |log: &ErrorLog, what: &dyn std::fmt::Display| {
        log_to!(log, Level::Info, "*{} {} while SSL handshaking, client: {}, server: {}", id, what, peer.ip(), g.addr);
    };
    let default_log = &g.default_server.conf.error_log;
    let local = tcp.local_addr().unwrap_or(g.addr);
    let run = async {
        let watched = super::reneg::Watched::new(tcp);
        let start = match LazyConfigAcceptor::new(rustls::server::Acceptor::default(), watched).await {
            Ok(s) => s,
            Err(e) => {
                fail(default_log, &format_args!("SSL_do_handshake() failed ({})", e));
                return None;
            }
        };
        // An ACME TLS-ALPN-01 validation (RFC 8737): answered with the
        // challenge certificate, and nothing follows its handshake.
        if let Some(cfg) = crate::tls::acme::alpn::config_for(&start.client_hello()) {
            let name = start.client_hello().server_name().unwrap_or("").to_string();
            log_to!(
                default_log,
                Level::Info,
                "*{} acme: answering tls-alpn-01 challenge \"{}\", client: {}, server: {}",
                id,
                name,
                peer.ip(),
                g.addr
            );
            if let Ok(mut s) = start.into_stream(cfg).await {
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut s).await;
            }
            return None;
        }
        let sni = start.client_hello().server_name().map(|s| s.to_ascii_lowercase());
        let curves = start.client_hello().named_groups().map(curve_list);
        let ciphers = Some(cipher_list(start.client_hello().cipher_suites()));
        let server: &Arc<Server> = match &sni {
            Some(name) => crate::http::routing::server::select(g, name.as_bytes()),
            None => &g.default_server,
        };
        let tls = server.tls.as_ref().or(g.default_server.tls.as_ref())?;
        if tls.reject {
            log_to!(
                server.conf.error_log,
                Level::Info,
                "*{} SSL handshake rejected (ssl_reject_handshake) while SSL handshaking, client: {}, server: {}",
                id,
                peer.ip(),
                g.addr
            );
            super::reject_unrecognized_name(start).await;
            return None;
        }
        // ALPN offers h2 when the server SNI chose has it (nginx).
        let cfg = if g.http2_for(server) { tls.with_h2.clone() } else { tls.h1_only.clone() };
        let Some(cfg) = cfg else {
            fail(&server.conf.error_log, &"no TLS configuration for this server");
            return None;
        };
        let conn = super::dynamic::Conn { peer, local, sni: sni.as_deref() };
        let cfg = match tls.for_connection(cfg, &conn).await {
            Ok(cfg) => cfg,
            Err(m) => {
                // nginx: the certificate callback fails, the handshake
                // ends with an alert, and the reason is an error.
                log_to!(
                    server.conf.error_log,
                    Level::Error,
                    "*{} {} while SSL handshaking, client: {}, server: {}",
                    id,
                    m,
                    peer.ip(),
                    g.addr
                );
                super::refuse(start).await;
                return None;
            }
        };
        let mut fresh_id = [0u8; 32];
        let _ = aws_lc_rs::rand::fill(&mut fresh_id);
        let mut stream = match start.into_stream_with(cfg, |c| c.set_resumption_data(&fresh_id)).await {
            Ok(s) => s,
            Err(e) => {
                fail(&server.conf.error_log, &format_args!("SSL_do_handshake() failed ({})", e));
                return None;
            }
        };
        stream.get_mut().0.arm();
        let conn = stream.get_ref().1;
        let mut cert_error = match (&tls.client_verifier, conn.peer_certificates()) {
            (Some(v), Some(chain)) => super::client_verify::check(v.as_ref(), chain).err(),
            (None, Some(chain)) if tls.no_ca => super::client_verify::without_ca(chain),
            _ => None,
        };
        if let (None, Some(o), Some(chain)) = (&cert_error, &tls.ocsp, conn.peer_certificates()) {
            let log = |m: &str| {
                let (ip, addr) = (peer.ip(), g.addr);
                log_to!(server.conf.error_log, Level::Error, "*{id} {m}, client: {ip}, server: {addr}");
            };
            cert_error = super::ocsp::client::check(o, chain, &log).await.err();
        }
        let info = TlsInfo {
            session_id: Some(
                conn.received_resumption_data().and_then(|d| <[u8; 32]>::try_from(d).ok()).unwrap_or(fresh_id),
            ),
            curves,
            ciphers,
            require_client_cert: tls.require_client_cert,
            cert_error_tolerated: tls.no_ca && cert_error.as_ref().is_some_and(|e| e.issuer_only()),
            cert_error,
            server_name: sni.map(String::into_boxed_str),
            ..info_of(conn)
        };
        Some((stream, info))
    };
    match tokio::time::timeout(timeout, run).await {
        Ok(r) => r,
        Err(_) => {
            fail(default_log, &"client timed out (110: Connection timed out)");
            None
        }
    }
}
