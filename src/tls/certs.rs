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
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// What one configuration load builds of certificates: parsed pairs by
/// file paths (or `data:` contents), so servers inheriting
/// `ssl_certificate` from `http` share one key (and one OCSP fetch);
/// the certificates to staple; and load-time warnings.
/// A certificate file's bytes, its key file's, and the password file.
type PairKey = (Vec<u8>, Vec<u8>, Option<PathBuf>);

#[derive(Default)]
pub struct CertCache {
    pub pairs: HashMap<PairKey, Arc<CertifiedKey>>,
    /// One staple per certificate, responder and verification setting.
    pub stapled: HashMap<(Vec<u8>, Option<String>, bool), Arc<super::ocsp::Staple>>,
    pub staples: Vec<Arc<super::ocsp::Staple>>,
    pub warnings: Vec<String>,
}

/// A certificate or key to read: a file, or PEM given inline (`data:`).
#[derive(Clone, Copy, Debug)]
pub enum Pem<'a> {
    File(&'a Path),
    Data(&'a [u8]),
}

impl Pem<'_> {
    /// As nginx names it in messages: the path, or `data:...`.
    pub fn name(&self) -> String {
        match self {
            Pem::File(p) => p.display().to_string(),
            Pem::Data(_) => "data:...".to_string(),
        }
    }

    /// The identity of the source, for caches.
    pub fn id(&self) -> Vec<u8> {
        match self {
            Pem::File(p) => p.as_os_str().as_encoded_bytes().to_vec(),
            Pem::Data(d) => [b"data:", *d].concat(),
        }
    }

    fn read(&self, what: &str) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        match self {
            Pem::File(p) => std::fs::read(p)
                .map(std::borrow::Cow::Owned)
                .map_err(|e| format!("cannot load {what} \"{}\": {}", p.display(), e)),
            Pem::Data(d) => Ok(std::borrow::Cow::Borrowed(d)),
        }
    }
}

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

/// A certificate chain from PEM bytes (`name` for messages).
fn chain_from_pem(pem: &[u8], name: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cannot load certificate \"{}\": {}", name, io_reason(&e)))?;
    if chain.is_empty() {
        return Err(format!("cannot load certificate \"{}\": no certificate found in the file", name));
    }
    Ok(chain)
}

/// Loads one `ssl_certificate` + `ssl_certificate_key` pair (and the OCSP
/// response to staple, if any) and checks that the key matches. An
/// encrypted key is decrypted with the first of `passwords` that works
/// (`ssl_password_file`).
pub fn load_pair(
    provider: &CryptoProvider,
    cert: Pem<'_>,
    key: Pem<'_>,
    passwords: &[Vec<u8>],
    ocsp: Option<&Path>,
) -> Result<Arc<CertifiedKey>, String> {
    let chain = chain_from_pem(&cert.read("certificate")?, &cert.name())?;
    let key_pem = key.read("certificate key")?;
    let der = super::keyfile::read_key(&key_pem, passwords)
        .map_err(|e| format!("cannot load certificate key \"{}\": {}", key.name(), e))?;
    let signing = provider
        .key_provider
        .load_private_key(der)
        .map_err(|e| format!("cannot load certificate key \"{}\": {}", key.name(), e))?;
    // rustls's own check (`keys_match`) parses the certificate with
    // webpki, which refuses version 1 certificates, so the public keys are
    // compared here: nginx accepts any version (`openssl req -x509`
    // without extensions makes version 1, as nginx's test suite does).
    let Some(cert_spki) = chain.first().and_then(super::client_cert::spki) else {
        return Err(format!("cannot load certificate \"{}\": not a valid X.509 certificate", cert.name()));
    };
    if signing.public_key().is_some_and(|k| k.as_ref() != cert_spki) {
        return Err(format!(
            "certificate key \"{}\" does not match certificate \"{}\" (key values mismatch)",
            key.name(),
            cert.name()
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
    /// With `ssl_stapling`: each certificate's staple, by position in
    /// `certs` (the current response is read at each handshake).
    pub staples: Vec<Option<Arc<super::ocsp::Staple>>>,
    pub tls13: bool,
}

impl CertChooser {
    pub fn new(certs: Vec<Arc<CertifiedKey>>, tls13: bool) -> CertChooser {
        let n = certs.len();
        CertChooser::stapled(certs.into_iter().zip(std::iter::repeat_n(None, n)).collect(), tls13)
    }

    pub fn stapled(mut certs: Vec<(Arc<CertifiedKey>, Option<Arc<super::ocsp::Staple>>)>, tls13: bool) -> CertChooser {
        certs.sort_by_key(|(c, _)| match c.key.algorithm() {
            SignatureAlgorithm::ECDSA | SignatureAlgorithm::ED25519 => 0,
            _ => 1,
        });
        let (certs, staples) = certs.into_iter().unzip();
        CertChooser { certs, staples, tls13 }
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
        let i = self
            .certs
            .iter()
            .position(|c| {
                c.key.choose_scheme(schemes).is_some()
                    && (tls13 || suites.iter().any(|&s| tls12_suite_fits(s, c.key.algorithm())))
            })
            .unwrap_or(0);
        match self.staples.get(i) {
            Some(Some(st)) => Some(st.current()),
            _ => self.certs.get(i).cloned(),
        }
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
