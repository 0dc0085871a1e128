//! `proxy_ssl_verify on` (and its uwsgi, grpc and stream twins) as nginx
//! gets it from OpenSSL, where webpki is stricter:
//! - a certificate listed itself in `proxy_ssl_trusted_certificate` is
//!   trusted while valid, whatever its version or CA flag (webpki only
//!   builds paths from a version 3 end-entity certificate to a CA, and
//!   `openssl req -x509` without extensions makes version 1);
//! - the name is checked as `X509_check_host` does: the subjectAltName's
//!   DNS names, or, in a certificate that has none, the subject's
//!   commonName (webpki never reads the commonName).
//!
//! A lone self-signed certificate that is not trusted fails with OpenSSL's
//! code 18, so the error log names what nginx's names.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::{CertificateError, DigitallySignedStruct, Error, OtherError, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::client_cert;
use super::client_verify::VerifyError;

#[derive(Debug)]
pub struct OriginVerifier {
    pub inner: Arc<WebPkiServerVerifier>,
    /// Every certificate of the trusted file, as read.
    pub anchors: Vec<CertificateDer<'static>>,
    pub provider: Arc<CryptoProvider>,
    /// webpki applies the `proxy_ssl_crl`: a chain it refuses is not
    /// checked again without it.
    pub webpki_crl: bool,
    /// The `proxy_ssl_crl` that webpki cannot read (version 1 CRLs),
    /// checked here on the chain OpenSSL would build.
    pub crls: Option<Arc<super::crl::Crls>>,
    /// `proxy_ssl_verify_depth`: the most CA certificates above the
    /// origin's own, as OpenSSL counts them.
    pub depth: u32,
}

impl OriginVerifier {
    fn valid_now(cert: &CertificateDer<'_>, now: UnixTime) -> bool {
        let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        client_cert::validity(cert).is_some_and(|(start, end)| start.unix <= now && now <= end.unix)
    }
}

impl ServerCertVerifier for OriginVerifier {
    fn verify_server_cert(
        &self,
        leaf: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let verified = self.verify_chain(leaf, rest, name, ocsp, now)?;
        let as_error = |why: VerifyError| Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(why))));
        let chain = super::client_chain::build(leaf, rest, &self.anchors);
        // A chain longer than the depth allows fails as nginx 1.22 with
        // OpenSSL 3 reports it for an origin: its chain building stops at
        // the depth, short of the trusted root.
        let allowed = usize::try_from(self.depth).unwrap_or(usize::MAX).saturating_add(2);
        if chain.len() > allowed {
            return Err(as_error(VerifyError { code: 20, text: "unable to get local issuer certificate".into() }));
        }
        if let Some(crls) = &self.crls {
            let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
            crls.check(&chain, now).map_err(as_error)?;
        }
        Ok(verified)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner
            .verify_tls12_signature(message, cert, dss)
            .or_else(|e| super::client::verify_by_key(&self.provider, message, cert, dss).map_err(|_| e))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner
            .verify_tls13_signature(message, cert, dss)
            .or_else(|e| super::client::verify_by_key(&self.provider, message, cert, dss).map_err(|_| e))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

impl OriginVerifier {
    /// The chain and name, by webpki and then by OpenSSL's rules where
    /// they differ (see the module's notes); CRLs that webpki cannot read
    /// are the caller's.
    fn verify_chain(
        &self,
        leaf: &CertificateDer<'_>,
        rest: &[CertificateDer<'_>],
        name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let e = match self.inner.verify_server_cert(leaf, rest, name, ocsp, now) {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let not_for_name = Error::InvalidCertificate(CertificateError::NotValidForName);
        match e {
            // The chain verified; only the name did not, by webpki's rule.
            Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => {
                if host_matches(leaf, name) {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(e)
                }
            }
            _ if self.anchors.iter().any(|a| a.as_ref() == leaf.as_ref()) => {
                if !Self::valid_now(leaf, now) {
                    return Err(e);
                }
                if host_matches(leaf, name) { Ok(ServerCertVerified::assertion()) } else { Err(not_for_name) }
            }
            // A CA certificate as the origin's own, which OpenSSL takes.
            _ if !self.webpki_crl
                && super::client_verify::ca_used_as_leaf(&e)
                && super::client_chain::ca_leaf_trusted(leaf, rest, &self.anchors, now) =>
            {
                if host_matches(leaf, name) {
                    Ok(ServerCertVerified::assertion())
                } else {
                    Err(not_for_name)
                }
            }
            _ if rest.is_empty() && client_cert::names(leaf).is_some_and(|n| n.subject == n.issuer) => {
                let why = VerifyError { code: 18, text: "self-signed certificate".into() };
                Err(Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(why)))))
            }
            _ => Err(e),
        }
    }
}

/// `X509_check_host` with nginx's flags (none): the DNS names of the
/// subjectAltName, else every commonName of the subject.
pub fn host_matches(cert: &CertificateDer<'_>, name: &ServerName<'_>) -> bool {
    let ServerName::DnsName(host) = name else { return false };
    let host = host.as_ref();
    let dns = client_cert::dns_names(cert);
    let names = if dns.is_empty() { client_cert::common_names(cert) } else { dns };
    names.iter().any(|pattern| name_matches(pattern, host))
}

/// One name against a pattern, case-insensitively; `*` may stand for the
/// whole leftmost label when at least two labels follow it.
fn name_matches(pattern: &str, host: &str) -> bool {
    let pattern = pattern.strip_suffix('.').unwrap_or(pattern);
    let host = host.strip_suffix('.').unwrap_or(host);
    if pattern.eq_ignore_ascii_case(host) {
        return !host.is_empty();
    }
    let Some(suffix) = pattern.strip_prefix("*.") else { return false };
    let Some((label, rest)) = host.split_once('.') else { return false };
    !label.is_empty() && suffix.contains('.') && rest.eq_ignore_ascii_case(suffix)
}

#[cfg(test)]
mod tests {
    use super::{host_matches, name_matches};
    use rustls_pki_types::{CertificateDer, ServerName};

    fn host(cert: &[u8], name: &str) -> bool {
        host_matches(&CertificateDer::from(cert), &ServerName::try_from(name.to_string()).unwrap())
    }

    #[test]
    fn dns_names_first_then_the_common_name() {
        let san = include_bytes!("../../fuzz/corpus/htpasswd/4b07a00a3d32b89fa8801bb55c5c706ea9de817a");
        let v1 = include_bytes!("../../fuzz/corpus/htpasswd/655c50244f6eb50f859718f43aa6d8944dffff47");
        assert!(host(san, "example.com") && host(san, "foo.example.com"));
        // Its commonName is not read: it has DNS names.
        assert!(!host(san, "no.match.example.com"));
        assert!(host(v1, "2.example.com") && !host(v1, "bad.example.com"));
        assert!(!host(v1, "127.0.0.1"));
    }

    #[test]
    fn wildcards_as_openssl() {
        assert!(name_matches("2.example.com", "2.EXAMPLE.com"));
        assert!(name_matches("*.example.com", "foo.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(!name_matches("*.example.com", "a.b.example.com"));
        assert!(!name_matches("*.com", "example.com"));
        assert!(!name_matches("", ""));
    }
}
