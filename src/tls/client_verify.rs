//! Client certificates the nginx way: the handshake accepts any certificate
//! whose holder proves its key, and the chain is checked against
//! `ssl_client_certificate` afterwards, so a bad certificate gets nginx's
//! 400 "The SSL certificate error" page instead of a failed handshake.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};

#[derive(Debug)]
pub struct Deferred {
    pub inner: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for Deferred {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The post-handshake check: Err with the reason when the chain does not
/// lead to a trusted CA.
pub fn check(inner: &dyn ClientCertVerifier, chain: &[CertificateDer<'_>]) -> Result<(), String> {
    let Some((leaf, rest)) = chain.split_first() else { return Ok(()) };
    inner.verify_client_cert(leaf, rest, UnixTime::now()).map(|_| ()).map_err(|e| e.to_string())
}
