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
    /// The chain's verifier; None with `ssl_verify_client optional_no_ca`
    /// and no `ssl_client_certificate` (nginx accepts that: every
    /// certificate is then of an unknown issuer).
    pub inner: Option<Arc<dyn ClientCertVerifier>>,
    /// Checks the client's proof of its key when there is no verifier.
    pub algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for Deferred {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.as_ref().map_or(&[], |v| v.root_hint_subjects())
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
        match &self.inner {
            Some(v) => v.verify_tls12_signature(message, cert, dss),
            None => rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms),
        }
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        match &self.inner {
            Some(v) => v.verify_tls13_signature(message, cert, dss),
            None => tls13_by_key(message, cert, dss, &self.algorithms)
                .unwrap_or_else(|| rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)),
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        match &self.inner {
            Some(v) => v.supported_verify_schemes(),
            None => self.algorithms.supported_schemes(),
        }
    }
}

/// The CA's verifier with OpenSSL's rule for a certificate that is itself
/// in the trust store (`ssl_client_certificate` listing a client's own
/// self-signed certificate): trusted while valid, whatever its version or
/// CA flag. webpki only builds paths from an end-entity certificate to a
/// CA, so such a certificate (version 1, or the CA certificate `openssl req
/// -x509` makes) would fail there.
#[derive(Debug)]
pub struct Anchored {
    pub inner: Arc<dyn ClientCertVerifier>,
    /// Every certificate of the trust files, as read.
    pub anchors: Vec<CertificateDer<'static>>,
    pub algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
    /// `ssl_verify_depth`: the most CA certificates above the client's
    /// own, the trust anchor aside.
    pub depth: u32,
    /// webpki applies the `ssl_crl`: a chain it refuses is then not
    /// checked again without it (`client_chain::ca_leaf_trusted` reads no
    /// CRL).
    pub webpki_crl: bool,
    /// The `ssl_crl` that webpki cannot read, checked here instead.
    pub crls: Option<Arc<super::crl::Crls>>,
}

impl Anchored {
    fn trusted_itself(&self, leaf: &CertificateDer<'_>, now: UnixTime) -> bool {
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        self.anchors.iter().any(|a| a.as_ref() == leaf.as_ref())
            && super::client_cert::validity(leaf).is_some_and(|(start, end)| start.unix <= now && now <= end.unix)
    }
}

impl Anchored {
    /// A chain longer than `ssl_verify_depth` allows fails as with OpenSSL
    /// 3, whose chain building stops at the depth and then misses the
    /// issuer of its last certificate (X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT);
    /// then the CRLs checked here, if any.
    fn within_depth(
        &self,
        leaf: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let as_error = |why: VerifyError| {
            Error::InvalidCertificate(rustls::CertificateError::Other(rustls::OtherError(Arc::new(why))))
        };
        let chain = super::client_chain::build(leaf, rest, &self.anchors);
        let allowed = usize::try_from(self.depth).unwrap_or(usize::MAX).saturating_add(2);
        if chain.len() > allowed {
            return Err(as_error(VerifyError { code: 2, text: "unable to get issuer certificate".into() }));
        }
        if let Some(crls) = &self.crls {
            let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
            crls.check(&chain, now).map_err(as_error)?;
        }
        Ok(ClientCertVerified::assertion())
    }
}

/// webpki's refusal of a CA certificate as the client's own.
pub(crate) fn ca_used_as_leaf(e: &Error) -> bool {
    matches!(e, Error::InvalidCertificate(rustls::CertificateError::Other(o))
        if matches!(o.0.downcast_ref::<webpki::Error>(), Some(webpki::Error::CaUsedAsEndEntity)))
}

impl ClientCertVerifier for Anchored {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        leaf: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        match self.inner.verify_client_cert(leaf, rest, now) {
            Err(_) if self.trusted_itself(leaf, now) => self.within_depth(leaf, rest, now),
            Err(e)
                if !self.webpki_crl
                    && ca_used_as_leaf(&e)
                    && super::client_chain::ca_leaf_trusted(leaf, rest, &self.anchors, now) =>
            {
                self.within_depth(leaf, rest, now)
            }
            Err(e) => Err(e),
            Ok(_) => self.within_depth(leaf, rest, now),
        }
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
        match self.inner.verify_tls13_signature(message, cert, dss) {
            // A version 1 certificate webpki cannot parse: its key signs.
            Err(e) => tls13_by_key(message, cert, dss, &self.algorithms).unwrap_or(Err(e)),
            ok => ok,
        }
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// A certificate's subject as a client-certificate request names an
/// acceptable issuer.
pub fn subject(cert: &CertificateDer<'_>) -> Option<DistinguishedName> {
    super::ocsp::der::cert_fields(cert.as_ref()).map(|f| DistinguishedName::from(f.subject.to_vec()))
}

/// A TLS 1.3 signature checked with the certificate's key alone, of any
/// certificate version (webpki refuses version 1, which `openssl req
/// -x509` makes without extensions): None when the certificate has no
/// readable key.
fn tls13_by_key(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
    algorithms: &rustls::crypto::WebPkiSupportedAlgorithms,
) -> Option<Result<HandshakeSignatureValid, Error>> {
    let spki = super::client_cert::spki(cert)?;
    Some(rustls::crypto::verify_tls13_signature_with_raw_key(
        message,
        &rustls_pki_types::SubjectPublicKeyInfoDer::from(spki),
        dss,
        algorithms,
    ))
}

/// Why a client certificate failed, as OpenSSL's verify result names it
/// (nginx logs `(CODE:TEXT)` and gives TEXT in `$ssl_client_verify`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub code: u32,
    pub text: String,
}

/// The code of a failure `ssl_ocsp` found (no X509_V_ERR code: nginx
/// keeps OCSP's result beside OpenSSL's).
const OCSP: u32 = 0;

impl VerifyError {
    /// `ssl_ocsp`'s failure, in nginx's words.
    pub fn ocsp(text: &str) -> VerifyError {
        VerifyError { code: OCSP, text: text.to_string() }
    }

    /// The chain does not lead to a CA we know (the only failures that
    /// `ssl_verify_client optional_no_ca` lets through, as nginx's
    /// `ngx_ssl_verify_error_optional`).
    pub fn issuer_only(&self) -> bool {
        matches!(self.code, 2 | 18 | 19 | 20 | 21)
    }
}

/// As nginx logs it: OpenSSL's `(CODE:TEXT)`, or an OCSP status's text
/// alone.
impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            OCSP => f.write_str(&self.text),
            code => write!(f, "({}:{})", code, self.text),
        }
    }
}

impl std::error::Error for VerifyError {}

/// The post-handshake check: Err with the reason when the chain does not
/// lead to a trusted CA (or is expired, or otherwise invalid).
pub fn check(inner: &dyn ClientCertVerifier, chain: &[CertificateDer<'_>]) -> Result<(), VerifyError> {
    let Some((leaf, rest)) = chain.split_first() else { return Ok(()) };
    let now = UnixTime::now();
    inner.verify_client_cert(leaf, rest, now).map(|_| ()).map_err(|e| {
        // OpenSSL's first complaint about a lone untrusted certificate
        // that issued itself (webpki may find another first, such as a CA
        // certificate used by a client).
        if rest.is_empty() && self_issued(leaf) {
            return VerifyError { code: 18, text: "self-signed certificate".into() };
        }
        openssl_reason(&e)
    })
}

/// A chain checked with no CA at all (`optional_no_ca` without
/// `ssl_client_certificate`): OpenSSL's complaint about its issuer.
pub fn without_ca(chain: &[CertificateDer<'_>]) -> Option<VerifyError> {
    let (leaf, rest) = chain.split_first()?;
    Some(match rest.last() {
        None if self_issued(leaf) => VerifyError { code: 18, text: "self-signed certificate".into() },
        Some(top) if self_issued(top) => {
            VerifyError { code: 19, text: "self-signed certificate in certificate chain".into() }
        }
        _ => VerifyError { code: 20, text: "unable to get local issuer certificate".into() },
    })
}

/// Subject and issuer are the same name (parsed by webpki, as rustls does).
/// A version 1 certificate, which webpki refuses, is compared by its
/// names as this server formats them.
fn self_issued(leaf: &CertificateDer<'_>) -> bool {
    match webpki::EndEntityCert::try_from(leaf) {
        Ok(c) => c.subject() == c.issuer(),
        Err(_) => super::client_cert::names(leaf).is_some_and(|n| n.subject == n.issuer),
    }
}

/// rustls's certificate errors in OpenSSL's X509_V_ERR codes and words.
pub(crate) fn openssl_reason(e: &Error) -> VerifyError {
    use rustls::CertificateError as C;
    let (code, text) = match e {
        Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => (20, "unable to get local issuer certificate"),
            C::Expired | C::ExpiredContext { .. } => (10, "certificate has expired"),
            C::NotValidYet | C::NotValidYetContext { .. } => (9, "certificate is not yet valid"),
            C::BadSignature => (7, "certificate signature failure"),
            C::Revoked => (23, "certificate revoked"),
            C::UnknownRevocationStatus => (3, "unable to get certificate CRL"),
            C::ExpiredRevocationList | C::ExpiredRevocationListContext { .. } => (12, "CRL has expired"),
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => (26, "unsupported certificate purpose"),
            C::BadEncoding => (4, "unable to decode issuer public key"),
            // A reason already in OpenSSL's words (`origin_verify`).
            C::Other(o) if o.0.downcast_ref::<VerifyError>().is_some() => {
                return o.0.downcast_ref::<VerifyError>().cloned().unwrap_or_else(|| VerifyError {
                    code: 1,
                    text: "unspecified certificate verification error".into(),
                });
            }
            _ => (1, "unspecified certificate verification error"),
        },
        _ => (1, "unspecified certificate verification error"),
    };
    VerifyError { code, text: text.to_string() }
}
