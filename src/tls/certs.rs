//! Certificates: loading PEM chains and keys (with nginx's error wording),
//! and choosing between a server's RSA and ECDSA certificates by what the
//! client can verify, as OpenSSL does when a server has both.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, SignatureAlgorithm};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Parsed certificate+key pairs of one configuration load, by file paths:
/// servers inheriting `ssl_certificate` from `http` share one key.
pub type CertCache = HashMap<(PathBuf, PathBuf, Option<PathBuf>), Arc<CertifiedKey>>;

fn io_reason(e: &rustls_pki_types::pem::Error) -> String {
    match e {
        rustls_pki_types::pem::Error::Io(io) => io.to_string(),
        rustls_pki_types::pem::Error::NoItemsFound => "no PEM data found".into(),
        other => format!("{:?}", other),
    }
}

pub fn load_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot load certificate \"{}\": {}", path.display(), io_reason(&e)))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot load certificate \"{}\": {}", path.display(), io_reason(&e)))?;
    if chain.is_empty() {
        return Err(format!("cannot load certificate \"{}\": no certificate found in the file", path.display()));
    }
    Ok(chain)
}

/// `ssl_crl`: the PEM certificate revocation lists in `path`.
pub fn load_crls(path: &Path) -> Result<Vec<rustls_pki_types::CertificateRevocationListDer<'static>>, String> {
    use rustls_pki_types::pem::PemObject;
    let crls: Vec<_> = rustls_pki_types::CertificateRevocationListDer::pem_file_iter(path)
        .map_err(|e| format!("cannot load CRL \"{}\": {}", path.display(), io_reason(&e)))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot load CRL \"{}\": {}", path.display(), io_reason(&e)))?;
    if crls.is_empty() {
        return Err(format!("cannot load CRL \"{}\": no CRL found in the file", path.display()));
    }
    Ok(crls)
}

/// Loads one `ssl_certificate` + `ssl_certificate_key` pair (and the OCSP
/// response to staple, if any) and checks that the key matches.
pub fn load_pair(
    provider: &CryptoProvider,
    cert: &Path,
    key: &Path,
    ocsp: Option<&Path>,
) -> Result<Arc<CertifiedKey>, String> {
    let chain = load_chain(cert)?;
    let der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot load certificate key \"{}\": {}", key.display(), io_reason(&e)))?;
    let signing = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("cannot load certificate key \"{}\": {}", key.display(), e))?;
    // rustls's own check (`keys_match`) parses the certificate with
    // webpki, which refuses version 1 certificates, so the public keys are
    // compared here: nginx accepts any version (`openssl req -x509`
    // without extensions makes version 1, as nginx's test suite does).
    let Some(cert_spki) = chain.first().and_then(super::client_cert::spki) else {
        return Err(format!("cannot load certificate \"{}\": not a valid X.509 certificate", cert.display()));
    };
    if signing.public_key().is_some_and(|k| k.as_ref() != cert_spki) {
        return Err(format!(
            "certificate key \"{}\" does not match certificate \"{}\" (key values mismatch)",
            key.display(),
            cert.display()
        ));
    }
    let mut ck = CertifiedKey::new(chain, signing);
    if let Some(p) = ocsp {
        ck.ocsp = Some(std::fs::read(p).map_err(|e| format!("cannot open stapling file \"{}\": {}", p.display(), e))?);
    }
    Ok(Arc::new(ck))
}

/// Picks the certificate the client can use. ECDSA comes first (cheaper to
/// sign with); a TLS 1.2 client also needs a cipher suite of the key's type.
#[derive(Debug)]
pub struct CertChooser {
    pub certs: Vec<Arc<CertifiedKey>>,
    pub tls13: bool,
}

impl CertChooser {
    pub fn new(mut certs: Vec<Arc<CertifiedKey>>, tls13: bool) -> CertChooser {
        certs.sort_by_key(|c| match c.key.algorithm() {
            SignatureAlgorithm::ECDSA | SignatureAlgorithm::ED25519 => 0,
            _ => 1,
        });
        CertChooser { certs, tls13 }
    }
}

fn is_tls13(s: CipherSuite) -> bool {
    matches!(
        s,
        CipherSuite::TLS13_AES_128_GCM_SHA256
            | CipherSuite::TLS13_AES_256_GCM_SHA384
            | CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
    )
}

fn tls12_suite_fits(s: CipherSuite, alg: SignatureAlgorithm) -> bool {
    let ecdsa = matches!(
        s,
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
    let rsa = matches!(
        s,
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
            | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
            | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    );
    match alg {
        SignatureAlgorithm::RSA => rsa,
        _ => ecdsa,
    }
}

impl ResolvesServerCert for CertChooser {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let schemes = hello.signature_schemes();
        let suites = hello.cipher_suites();
        let tls13 = self.tls13 && suites.iter().any(|&s| is_tls13(s));
        self.certs
            .iter()
            .find(|c| {
                c.key.choose_scheme(schemes).is_some()
                    && (tls13 || suites.iter().any(|&s| tls12_suite_fits(s, c.key.algorithm())))
            })
            .or_else(|| self.certs.first())
            .cloned()
    }
}

/// For `ssl_reject_handshake on`: no certificate, so the handshake ends
/// with an alert.
#[derive(Debug)]
pub struct RejectAll;

impl ResolvesServerCert for RejectAll {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        None
    }
}
