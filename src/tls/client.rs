//! TLS to an origin, for any family: the rustls client configuration per
//! `proxy_ssl_*` settings and nginx's wording of a failed handshake. As in
//! nginx, the origin's certificate is not checked unless `proxy_ssl_verify
//! on` (with `proxy_ssl_trusted_certificate`), and SNI is sent only with
//! `proxy_ssl_server_name on`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::dynamic::{FileId, Source, file_id};

/// `proxy_ssl_verify off`: any certificate, but the handshake signature is
/// still checked (the origin must hold the key it presents).
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms) {
            Err(rustls::Error::InvalidCertificate(_)) => self.by_key(message, cert, dss),
            r => r,
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms) {
            Err(rustls::Error::InvalidCertificate(_)) => self.by_key(message, cert, dss),
            r => r,
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl NoVerify {
    /// The signature checked with the certificate's public key alone, for
    /// what webpki will not parse as an end-entity certificate (version 1
    /// certificates, which `openssl req -x509` makes without extensions
    /// and OpenSSL accepts): the origin must still hold the key.
    fn by_key(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_by_key(&self.0, message, cert, dss)
    }
}

/// A handshake signature checked with the certificate's public key alone
/// (any certificate version; see `NoVerify::by_key`).
pub fn verify_by_key(
    provider: &CryptoProvider,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    let bad = || rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature);
    let spki = crate::tls::client_cert::spki(cert).ok_or_else(bad)?;
    let spki = rustls_pki_types::SubjectPublicKeyInfoDer::from(spki);
    let key = webpki::RawPublicKeyEntity::try_from(&spki).map_err(|_| bad())?;
    let algs = provider.signature_verification_algorithms.mapping.iter().find(|(s, _)| *s == dss.scheme);
    for alg in algs.map_or(&[][..], |(_, a)| *a) {
        if key.verify_signature(*alg, message, dss.signature()).is_ok() {
            return Ok(HandshakeSignatureValid::assertion());
        }
    }
    Err(bad())
}

/// What distinguishes one client configuration from another.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Key {
    pub verify: bool,
    pub trusted: Option<PathBuf>,
    /// `proxy_ssl_crl`.
    pub crl: Option<PathBuf>,
    /// `proxy_ssl_verify_depth` (nginx's default is 1).
    pub verify_depth: u32,
    pub sni: bool,
    /// `proxy_ssl_certificate` and its key (files or `data:` PEM).
    pub client_cert: Option<(Source, Source)>,
    /// `proxy_ssl_password_file`: passphrases for the client key.
    pub passwords: Option<Arc<Vec<Vec<u8>>>>,
    /// Offer ALPN `h2` (`grpcs://`).
    pub alpn_h2: bool,
    /// `proxy_ssl_session_reuse off`: every handshake is a full one. With
    /// reuse on, the configuration's own session store resumes the
    /// sessions of the origins it connected to (nginx keeps one session
    /// per upstream peer; here per configuration and worker).
    pub no_session_reuse: bool,
}

/// Builds a client configuration (also used by `-t` to check the trusted
/// certificate file).
pub fn client_config(k: &Key) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if k.verify {
        let path = k.trusted.as_ref().ok_or("no proxy_ssl_trusted_certificate for proxy_ssl_verify")?;
        let mut roots = rustls::RootCertStore::empty();
        let anchors = crate::tls::certs::load_chain(path)?;
        for c in &anchors {
            roots.add(c.clone()).map_err(|e| format!("invalid certificate in \"{}\": {}", path.display(), e))?;
        }
        let mut vb = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone());
        // OpenSSL's CRL_CHECK_ALL, as nginx sets it with proxy_ssl_crl.
        // CRLs webpki cannot read (version 1) are applied by `crl`.
        let mut crls = None;
        if let Some(crl) = &k.crl {
            let list = crate::tls::certs::load_crls(crl)?;
            if crate::tls::crl::webpki_reads(&list) {
                vb = vb.with_crls(list).enforce_revocation_expiration();
            } else {
                let parsed = crate::tls::crl::Crls::parse(&list)
                    .map_err(|m| format!("cannot load CRL \"{}\": {m}", crl.display()))?;
                crls = Some(Arc::new(parsed));
            }
        }
        let inner = vb.build().map_err(|e| e.to_string())?;
        let v = crate::tls::origin_verify::OriginVerifier {
            inner,
            anchors,
            provider: provider.clone(),
            webpki_crl: k.crl.is_some() && crls.is_none(),
            crls,
            depth: k.verify_depth,
        };
        builder.dangerous().with_custom_certificate_verifier(Arc::new(v))
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(NoVerify(provider.clone())))
    };
    let mut cfg = match &k.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let ck = crate::tls::certs::load_pair(
                &provider,
                cert.pem(),
                key.pem(),
                k.passwords.as_deref().map_or(&[][..], |v| v.as_slice()),
                None,
            )?;
            builder.with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(ck)))
        }
    };
    cfg.enable_sni = k.sni;
    if k.no_session_reuse {
        cfg.resumption = rustls::client::Resumption::disabled();
    }
    if k.alpn_h2 {
        cfg.alpn_protocols = vec![b"h2".to_vec()];
    }
    Ok(Arc::new(cfg))
}

/// A failed handshake in nginx's words: a certificate that does not
/// verify is `upstream SSL certificate verify error: (CODE:TEXT)` (OpenSSL's
/// reasons), one for another name `upstream SSL certificate does not match
/// "NAME"`; anything else `SSL_do_handshake() failed (...)`.
pub fn handshake_error(e: &std::io::Error, name: &str) -> String {
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
        )) => format!("upstream SSL certificate does not match \"{}\"", server_name_text(name)),
        Some(err @ rustls::Error::InvalidCertificate(_)) => {
            format!("upstream SSL certificate verify error: {}", crate::tls::client_verify::openssl_reason(err))
        }
        // The origin closed before the handshake ended (it speaks no
        // TLS, or refused ours): nginx's words.
        _ if e.kind() == std::io::ErrorKind::UnexpectedEof => "peer closed connection in SSL handshake".to_string(),
        _ => format!("SSL_do_handshake() failed ({})", e),
    }
}

/// The host part of a `proxy_ssl_name` or `$proxy_host`.
fn server_name_text(name: &str) -> &str {
    if let Some(v6) = name.strip_prefix('[') {
        v6.split(']').next().unwrap_or(v6)
    } else {
        name.rsplit_once(':').map(|(h, _)| h).unwrap_or(name)
    }
}

/// Client configurations of one worker, built on first use. Those whose
/// certificate was chosen by variables are kept apart, at most
/// [`DYNAMIC_MAX`], and read again when their files change (checked at
/// most every [`RECHECK`]): nginx reads such a certificate at every
/// connection (before `proxy_ssl_certificate_cache`, 1.27.4), which this
/// matches but for a change less than a second old.
#[derive(Default)]
pub struct Clients {
    fixed: HashMap<Key, Arc<ClientConfig>>,
    dynamic: HashMap<Key, Dynamic>,
}

struct Dynamic {
    cfg: Arc<ClientConfig>,
    checked: Instant,
    used: Instant,
    ident: Ident,
}

/// The certificate's and key's file identities when loaded.
type Ident = (Option<FileId>, Option<FileId>);

pub const DYNAMIC_MAX: usize = 64;
pub const RECHECK: Duration = Duration::from_secs(1);

fn ident(k: &Key) -> Ident {
    match &k.client_cert {
        Some((c, key)) => (file_id(c), file_id(key)),
        None => (None, None),
    }
}

impl Clients {
    pub fn get(&mut self, k: &Key) -> Result<Arc<ClientConfig>, String> {
        if let Some(c) = self.fixed.get(k) {
            return Ok(c.clone());
        }
        let c = client_config(k)?;
        self.fixed.insert(k.clone(), c.clone());
        Ok(c)
    }

    /// The configuration for a certificate chosen by variables: from the
    /// worker's cache while its files are unchanged, else loaded off the
    /// event loop (a slow disk never stalls the worker's other
    /// connections). The error is nginx's "cannot load certificate ...".
    pub async fn get_dynamic(clients: &RefCell<Clients>, k: &Key) -> Result<Arc<ClientConfig>, String> {
        let now = Instant::now();
        let stale = {
            let mut me = clients.borrow_mut();
            match me.dynamic.get_mut(k) {
                Some(e) if now.duration_since(e.checked) <= RECHECK => {
                    e.used = now;
                    return Ok(e.cfg.clone());
                }
                Some(e) => Some((e.cfg.clone(), e.ident)),
                None => None,
            }
        };
        let key = k.clone();
        let (cfg, id) = tokio::task::spawn_blocking(move || {
            let id = ident(&key);
            match stale {
                // `data:` PEM is its own identity (both None).
                Some((cfg, old)) if old == id => Ok((cfg, id)),
                _ => client_config(&key).map(|c| (c, id)),
            }
        })
        .await
        .map_err(|e| format!("certificate loader failed: {e}"))??;
        let mut me = clients.borrow_mut();
        if !me.dynamic.contains_key(k) && me.dynamic.len() >= DYNAMIC_MAX {
            // The least recently used goes.
            if let Some(old) = me.dynamic.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone()) {
                me.dynamic.remove(&old);
            }
        }
        me.dynamic.insert(k.clone(), Dynamic { cfg: cfg.clone(), checked: now, used: now, ident: id });
        Ok(cfg)
    }
}

/// The name to present and verify: `proxy_ssl_name`, else the host part
/// of `$proxy_host`.
pub fn server_name(name: &str) -> Option<ServerName<'static>> {
    ServerName::try_from(server_name_text(name).to_string()).ok()
}
