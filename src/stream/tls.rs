//! The stream family's TLS: `listen ... ssl` terminates TLS with the
//! shared server configurations (`crate::tls`: certificates, protocols,
//! ciphers, session caches and tickets, client verification), offering
//! `ssl_alpn`'s protocols; `proxy_ssl` speaks TLS to the origin with the
//! shared client configurations (`crate::tls::client`).

use std::sync::Arc;

use super::conf::{ProxyConf, SrvConf};
use crate::config::build::Ctx;
use crate::config::model::PemSource;
use crate::config::parser::{ConfError, Span};
use crate::tls::dynamic::Source;

/// A server's TLS for `listen ... ssl`: its configuration, or a refusal
/// (`ssl_reject_handshake on`).
pub struct ServerTls {
    pub reject: bool,
    /// None when rejecting without certificates.
    pub cfg: Option<Arc<rustls::ServerConfig>>,
    /// The shared layer's build (client verification settings).
    pub shared: Arc<crate::tls::ServerTls>,
}

/// A server's TLS from its `ssl_*` settings: None without certificates
/// (and without `ssl_reject_handshake on`).
pub fn server_tls(c: &SrvConf, span: &Span, ctx: &mut Ctx) -> Result<Option<ServerTls>, ConfError> {
    let Some(shared) = crate::tls::build_server(&c.ssl, &mut ctx.tls_cache, None)? else { return Ok(None) };
    let cfg = match &shared.h1_only {
        Some(base) => {
            let mut cfg = (**base).clone();
            cfg.alpn_protocols = c.ssl_alpn.clone();
            Some(Arc::new(cfg))
        }
        None if shared.reject => None,
        None => return Err(ConfError::at("invalid TLS settings", span)),
    };
    Ok(Some(ServerTls { reject: shared.reject, cfg, shared }))
}

/// The client configuration of `proxy_ssl on`; a certificate with
/// variables is added for each session ([`session_client`]). As nginx's
/// `ngx_stream_proxy_set_ssl`, a certificate needs its key, and one
/// without variables must load now.
pub fn client_config(p: &ProxyConf, span: &Span) -> Result<Arc<rustls::ClientConfig>, ConfError> {
    let client_cert = match (&p.ssl_certificate, &p.ssl_certificate_key) {
        (Some((_, written)), None) => {
            let why = format!("no \"proxy_ssl_certificate_key\" is defined for certificate \"{written}\"");
            return Err(ConfError::at(why, span));
        }
        (Some((c, _)), Some(k)) if !has_vars(c) && !has_vars(k) => {
            Some((crate::tls::dynamic::fixed(c), crate::tls::dynamic::fixed(k)))
        }
        _ => None,
    };
    let cfg = crate::tls::client::client_config(&client_key(p, client_cert)).map_err(|m| ConfError::at(m, span))?;
    Ok(cfg)
}

fn has_vars(v: &PemSource) -> bool {
    matches!(v, PemSource::Vars(..))
}

fn client_key(p: &ProxyConf, client_cert: Option<(Source, Source)>) -> crate::tls::client::Key {
    crate::tls::client::Key {
        verify: p.ssl_verify,
        trusted: p.ssl_trusted_certificate.clone(),
        crl: None,
        verify_depth: p.ssl_verify_depth,
        sni: p.ssl_server_name,
        client_cert,
        passwords: p.ssl_passwords.clone(),
        alpn_h2: false,
        no_session_reuse: !p.ssl_session_reuse,
    }
}

/// The session's client configuration: the one built at load, or, with
/// a certificate with variables, one for the certificate they name (none
/// when it is empty), from the worker's cache. The error is nginx's
/// "cannot load certificate ..." (the session then ends with 500).
pub async fn session_client(
    p: &ProxyConf,
    vars: &dyn crate::variables::VarSource,
    clients: &std::cell::RefCell<crate::tls::client::Clients>,
) -> Result<Option<Arc<rustls::ClientConfig>>, String> {
    let Some(base) = &p.tls else { return Ok(None) };
    let (Some((cert, _)), Some(key)) = (&p.ssl_certificate, &p.ssl_certificate_key) else {
        return Ok(Some(base.clone()));
    };
    let (pair, dynamic) = crate::config::upstream_ssl::client_pair(cert, key, vars);
    if !dynamic || pair.is_none() {
        return Ok(Some(base.clone()));
    }
    let cfg = crate::tls::client::Clients::get_dynamic(clients, &client_key(p, pair)).await?;
    Ok(Some(cfg))
}

/// What `$ssl_*` read on a terminated connection.
pub struct TlsInfo {
    pub protocol: &'static str,
    pub cipher: &'static str,
    pub server_name: String,
    pub alpn: Vec<u8>,
    pub resumed: bool,
    /// The client's certificate (`$ssl_client_*`).
    pub client_cert: Option<rustls_pki_types::CertificateDer<'static>>,
    /// Why it failed verification (`$ssl_client_verify`'s `FAILED:`).
    pub cert_error: Option<crate::tls::client_verify::VerifyError>,
}

impl TlsInfo {
    /// The connection's state, the client's chain checked against the
    /// server's `ssl_client_certificate` as the shared TLS layer does.
    pub fn of(conn: &rustls::ServerConnection, tls: &crate::tls::ServerTls) -> TlsInfo {
        let chain = conn.peer_certificates().filter(|c| !c.is_empty());
        let cert_error = match (&tls.client_verifier, chain) {
            (Some(v), Some(chain)) => crate::tls::client_verify::check(v.as_ref(), chain).err(),
            (None, Some(chain)) if tls.no_ca => crate::tls::client_verify::without_ca(chain),
            _ => None,
        };
        TlsInfo {
            protocol: conn.protocol_version().map(crate::tls::names::protocol_name).unwrap_or(""),
            cipher: conn
                .negotiated_cipher_suite()
                .map(|s| crate::tls::names::openssl_suite_name(s.suite()))
                .unwrap_or(""),
            server_name: conn.server_name().unwrap_or("").to_string(),
            alpn: conn.alpn_protocol().map(|a| a.to_vec()).unwrap_or_default(),
            resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
            client_cert: chain.and_then(|c| c.first()).map(|c| c.clone().into_owned()),
            cert_error,
        }
    }

    /// `$ssl_client_verify`: NONE, SUCCESS or FAILED:reason.
    pub fn client_verify(&self) -> std::borrow::Cow<'static, str> {
        match (&self.cert_error, &self.client_cert) {
            (_, None) => "NONE".into(),
            (None, Some(_)) => "SUCCESS".into(),
            (Some(e), Some(_)) => format!("FAILED:{}", e.text).into(),
        }
    }

    /// nginx's check after the handshake (`ngx_stream_ssl_handler`): with
    /// `ssl_verify_client on` a certificate is required, and a failed one
    /// ends the session unless `optional_no_ca` tolerates its issuer. The
    /// error-log text when the session must end.
    pub fn refusal(&self, tls: &crate::tls::ServerTls, verify: bool) -> Option<String> {
        if !verify {
            return None;
        }
        if let Some(e) = &self.cert_error
            && !(tls.no_ca && e.issuer_only())
        {
            return Some(format!("client SSL certificate verify error: {e}"));
        }
        if tls.require_client_cert && self.client_cert.is_none() {
            return Some("client sent no required SSL certificate".into());
        }
        None
    }
}
