//! The stream family's TLS: `listen ... ssl` terminates TLS with the
//! shared server configurations (`crate::tls`: certificates, protocols,
//! ciphers, session caches and tickets, client verification), offering
//! `ssl_alpn`'s protocols; `proxy_ssl` speaks TLS to the origin with the
//! shared client configurations (`crate::tls::client`).

use std::sync::Arc;

use super::conf::{ProxyConf, SrvConf};
use crate::config::build::Ctx;
use crate::config::parser::{ConfError, Span};

/// The server configuration of a `listen ... ssl` server.
pub fn server_config(c: &SrvConf, span: &Span, ctx: &mut Ctx) -> Result<Arc<rustls::ServerConfig>, ConfError> {
    if c.ssl.certificates.is_empty() {
        return Err(ConfError::at("no \"ssl_certificate\" is defined for server", span));
    }
    let tls = crate::tls::build_server(&c.ssl, &mut ctx.tls_cache, None)?;
    if tls.as_ref().is_some_and(|t| t.dynamic.is_some()) {
        return Err(ConfError::at(
            "variables in \"ssl_certificate\" or \"ssl_certificate_key\" are not supported in stream yet",
            span,
        ));
    }
    let base = tls.and_then(|t| t.h1_only.clone()).ok_or_else(|| ConfError::at("invalid TLS settings", span))?;
    let mut cfg = (*base).clone();
    cfg.alpn_protocols = c.ssl_alpn.clone();
    Ok(Arc::new(cfg))
}

/// The client configuration of `proxy_ssl on`.
pub fn client_config(p: &ProxyConf, span: &Span) -> Result<Arc<rustls::ClientConfig>, ConfError> {
    let key = crate::tls::client::Key {
        verify: p.ssl_verify,
        trusted: p.ssl_trusted_certificate.clone(),
        crl: None,
        sni: p.ssl_server_name,
        client_cert: match (&p.ssl_certificate, &p.ssl_certificate_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            _ => None,
        },
        alpn_h2: false,
    };
    let cfg = crate::tls::client::client_config(&key).map_err(|m| ConfError::at(m, span))?;
    if p.ssl_session_reuse {
        return Ok(cfg);
    }
    let mut cfg = (*cfg).clone();
    cfg.resumption = rustls::client::Resumption::disabled();
    Ok(Arc::new(cfg))
}

/// What `$ssl_*` read on a terminated connection.
pub struct TlsInfo {
    pub protocol: &'static str,
    pub cipher: &'static str,
    pub server_name: String,
    pub alpn: Vec<u8>,
    pub resumed: bool,
}

impl TlsInfo {
    pub fn of(conn: &rustls::ServerConnection) -> TlsInfo {
        TlsInfo {
            protocol: conn.protocol_version().map(crate::tls::names::protocol_name).unwrap_or(""),
            cipher: conn
                .negotiated_cipher_suite()
                .map(|s| crate::tls::names::openssl_suite_name(s.suite()))
                .unwrap_or(""),
            server_name: conn.server_name().unwrap_or("").to_string(),
            alpn: conn.alpn_protocol().map(|a| a.to_vec()).unwrap_or_default(),
            resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
        }
    }
}
