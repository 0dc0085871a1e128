//! How the ACME server's certificate is checked with `ssl_verify on`:
//! webpki against `ssl_trusted_certificate` (or the system's bundle), and,
//! as OpenSSL does for nginx-acme, a server certificate that is itself one
//! of the trusted certificates (a self-signed one, often version 1 with
//! only a CN, as `openssl req -x509` makes) is accepted when it is
//! current and names the host in its CN or subjectAltName. webpki refuses
//! such a certificate as an end entity; the handshake signature is then
//! checked with its key alone.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

#[derive(Debug)]
struct Verifier {
    inner: Arc<WebPkiServerVerifier>,
    /// The trusted certificates, DER, for the exact-match rule.
    pinned: Vec<Vec<u8>>,
    provider: Arc<CryptoProvider>,
}

impl Verifier {
    fn pinned(&self, cert: &CertificateDer<'_>) -> bool {
        self.pinned.iter().any(|p| p.as_slice() == cert.as_ref())
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        ee: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(ee, intermediates, name, ocsp, now) {
            Ok(v) => Ok(v),
            Err(e) => {
                let current = crate::tls::client_cert::validity(ee)
                    .is_some_and(|(nb, na)| (nb.unix..=na.unix).contains(&(now.as_secs() as i64)));
                if self.pinned(ee) && current && names_host(ee, name) {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(e)
                }
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match self.inner.verify_tls12_signature(message, cert, dss) {
            Err(rustls::Error::InvalidCertificate(_)) if self.pinned(cert) => {
                crate::tls::client::verify_by_key(&self.provider, message, cert, dss)
            }
            r => r,
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        match self.inner.verify_tls13_signature(message, cert, dss) {
            Err(rustls::Error::InvalidCertificate(_)) if self.pinned(cert) => {
                crate::tls::client::verify_by_key(&self.provider, message, cert, dss)
            }
            r => r,
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Whether the certificate's subject CN or a subjectAltName dNSName /
/// iPAddress is `host` (exactly, case-insensitively; no wildcards: this
/// is for a certificate trusted as it is).
fn names_host(cert: &CertificateDer<'_>, name: &ServerName<'_>) -> bool {
    use crate::tls::ocsp::der::Der;
    let host = name.to_str();
    let Some(f) = crate::tls::ocsp::der::cert_fields(cert.as_ref()) else { return false };
    // Name: SEQUENCE OF SET OF SEQUENCE { OID, value }.
    let mut rdns = Der(f.subject);
    let Some(seq) = rdns.expect(0x30) else { return false };
    let mut rdns = Der(seq);
    while let Some((_, set)) = rdns.next_item() {
        let mut atvs = Der(set);
        while let Some(atv) = atvs.expect(0x30) {
            let mut a = Der(atv);
            if a.expect(0x06) == Some(&[0x55, 0x04, 0x03][..])
                && let Some((_, v)) = a.next_item()
                && v.eq_ignore_ascii_case(host.as_bytes())
            {
                return true;
            }
        }
    }
    webpki::EndEntityCert::try_from(cert).is_ok_and(|ee| ee.verify_is_valid_for_subject_name(name).is_ok())
}

/// The client configuration for `ssl_verify on` with the certificates of
/// `trusted` (PEM).
pub fn client_config(trusted: &std::path::Path) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let certs = crate::tls::certs::load_chain(trusted)?;
    let mut roots = rustls::RootCertStore::empty();
    for c in &certs {
        roots.add(c.clone()).map_err(|e| format!("invalid certificate in \"{}\": {}", trusted.display(), e))?;
    }
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let v = Verifier { inner, pinned: certs.iter().map(|c| c.as_ref().to_vec()).collect(), provider: provider.clone() };
    let cfg = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(v))
        .with_no_client_auth();
    Ok(Arc::new(cfg))
}
