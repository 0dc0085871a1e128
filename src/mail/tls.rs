//! The mail family's TLS (nginx's `ngx_mail_ssl_module`): `listen ... ssl`
//! and STARTTLS/STLS terminate TLS with the shared server configurations
//! (`crate::tls`); after the handshake the client certificate is checked
//! as `ssl_verify_client` says (nginx refuses the session with the
//! protocol's "SSL certificate error" / "No required SSL certificate"),
//! and its details go to the authentication server as `Auth-SSL-*`.

use tokio_rustls::server::TlsStream;

use super::auth_http::{SslInfo, escape};
use super::conf::{Protocol, SrvConf};
use crate::config::model::VerifyClient;
use crate::tls::ServerTls;

/// Why a client certificate refuses the session.
pub enum Refusal {
    /// The certificate failed verification (the reason for the log).
    Error(String),
    /// `ssl_verify_client on` and none was sent.
    NoCert,
}

impl Refusal {
    pub fn reply(&self, p: Protocol) -> &'static [u8] {
        match (self, p) {
            (Refusal::Error(_), Protocol::Imap) => b"* BYE SSL certificate error\r\n",
            (Refusal::NoCert, Protocol::Imap) => b"* BYE No required SSL certificate\r\n",
            (Refusal::Error(_), Protocol::Pop3) => b"-ERR SSL certificate error\r\n",
            (Refusal::NoCert, Protocol::Pop3) => b"-ERR No required SSL certificate\r\n",
            (Refusal::Error(_), Protocol::Smtp) => b"421 4.7.1 SSL certificate error\r\n",
            (Refusal::NoCert, Protocol::Smtp) => b"421 4.7.1 No required SSL certificate\r\n",
        }
    }
}

/// Checks the client certificate of a finished handshake; Ok with what
/// the authentication request tells of the TLS.
pub fn check(conf: &SrvConf, srv: &ServerTls, t: &TlsStream<crate::tls::reneg::Watched>) -> Result<SslInfo, Refusal> {
    let conn = t.get_ref().1;
    let mut info = SslInfo {
        protocol: conn.protocol_version().map(|v| crate::tls::names::protocol_name(v).to_string()),
        cipher: conn.negotiated_cipher_suite().map(|s| crate::tls::names::openssl_suite_name(s.suite()).to_string()),
        ..SslInfo::default()
    };
    let verify = conf.ssl.verify_client;
    if verify == VerifyClient::Off {
        return Ok(info);
    }
    let chain = conn.peer_certificates();
    let error = match (&srv.client_verifier, chain) {
        (Some(v), Some(chain)) => crate::tls::client_verify::check(v.as_ref(), chain).err(),
        (None, Some(chain)) if srv.no_ca => crate::tls::client_verify::without_ca(chain),
        _ => None,
    };
    if let Some(e) = &error
        && !(verify == VerifyClient::OptionalNoCa && e.issuer_only())
    {
        return Err(Refusal::Error(format!("client SSL certificate verify error: {e}")));
    }
    let leaf = chain.and_then(|c| c.first());
    if verify == VerifyClient::On && leaf.is_none() {
        return Err(Refusal::NoCert);
    }
    info.verify = Some(match (&error, leaf) {
        (_, None) => "NONE".to_string(),
        (None, Some(_)) => "SUCCESS".to_string(),
        (Some(e), Some(_)) => format!("FAILED:{}", e.text),
    });
    if let Some(cert) = leaf {
        if let Some(n) = crate::tls::client_cert::names(cert) {
            info.subject = Some(n.subject);
            info.issuer = Some(n.issuer);
            info.serial = Some(n.serial);
        }
        info.fingerprint = Some(crate::tls::client_cert::fingerprint(cert));
        if conf.auth_http_pass_client_cert {
            let pem = crate::tls::client_cert::pem(cert);
            info.cert = Some(String::from_utf8_lossy(&escape(pem.as_bytes())).into_owned());
        }
    }
    Ok(info)
}
