//! TLS-ALPN-01 (RFC 8737; RFC 8738 for IP addresses): `challenge
//! tls-alpn` in an `acme_issuer` block. The CA proves control of a name by
//! a TLS handshake to port 443 that offers only the ALPN protocol
//! `acme-tls/1` and names the identifier in SNI; the server must answer
//! with a self-signed certificate for the identifier that carries the
//! SHA-256 of the challenge's key authorization in a critical
//! `acmeIdentifier` extension, and nothing follows the handshake.
//!
//! The ACME thread publishes such a certificate here while the challenge
//! is pending; `tls::handshake` asks [`config_for`] about every
//! ClientHello before choosing a server, so the validation never reaches
//! a server's configuration (nor its ALPN list, which has no
//! `acme-tls/1`), and ordinary clients never see a challenge certificate.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::jws::{self, Key, KeyType, tlv};

/// The protocol a validation handshake offers, alone.
pub const ACME_TLS_1: &[u8] = b"acme-tls/1";

/// id-pe-acmeIdentifier, 1.3.6.1.5.5.7.1.31.
const ACME_IDENTIFIER: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x1f];

/// Pending challenges' configurations by the SNI name the CA sends.
static PENDING: Mutex<Option<HashMap<String, Arc<ServerConfig>>>> = Mutex::new(None);

/// The SNI a validation handshake carries for `identifier`: the name
/// itself, or for an IP address its reverse-DNS name (RFC 8738 6).
pub fn sni_for(identifier: &str) -> String {
    match identifier.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => {
            let o = a.octets();
            format!("{}.{}.{}.{}.in-addr.arpa", o[3], o[2], o[1], o[0])
        }
        Ok(IpAddr::V6(a)) => {
            let mut s = String::with_capacity(72);
            for b in a.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s.push_str("ip6.arpa");
            s
        }
        Err(_) => identifier.trim_end_matches('.').to_ascii_lowercase(),
    }
}

/// Makes the challenge certificate for `identifier` and serves it to
/// validation handshakes until [`withdraw`]; returns the SNI it answers.
pub fn publish(identifier: &str, key_auth: &str) -> Result<String, String> {
    let key = Key::generate(KeyType::P256)?;
    let der = certificate(&key, identifier, key_auth, SystemTime::now())?;
    let signer = rustls::crypto::aws_lc_rs::sign::any_supported_type(&PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        key.pkcs8.clone(),
    )))
    .map_err(|e| format!("challenge key: {e}"))?;
    let ck = Arc::new(CertifiedKey::new(vec![CertificateDer::from(der)], signer));
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("challenge configuration: {e}"))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Fixed(ck)));
    cfg.alpn_protocols = vec![ACME_TLS_1.to_vec()];
    let sni = sni_for(identifier);
    if let Ok(mut p) = PENDING.lock() {
        p.get_or_insert_with(HashMap::new).insert(sni.clone(), Arc::new(cfg));
    }
    Ok(sni)
}

pub fn withdraw(sni: &str) {
    if let Ok(mut p) = PENDING.lock()
        && let Some(m) = p.as_mut()
    {
        m.remove(sni);
    }
}

/// For a ClientHello that offers exactly `acme-tls/1` and names an
/// identifier with a pending challenge: the configuration that answers
/// it. A ClientHello that offers `acme-tls/1` with other protocols is an
/// ordinary one (RFC 8737 4 lets only a lone `acme-tls/1` through).
pub fn config_for(hello: &ClientHello<'_>) -> Option<Arc<ServerConfig>> {
    let mut alpn = hello.alpn()?;
    if alpn.next()? != ACME_TLS_1 || alpn.next().is_some() {
        return None;
    }
    let sni = hello.server_name()?.trim_end_matches('.').to_ascii_lowercase();
    PENDING.lock().ok()?.as_ref()?.get(&sni).cloned()
}

#[derive(Debug)]
struct Fixed(Arc<CertifiedKey>);

impl ResolvesServerCert for Fixed {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The self-signed certificate RFC 8737 3 describes: the identifier as
/// its only subjectAltName, and the critical acmeIdentifier extension
/// holding SHA-256(key authorization); valid from a day before `now` for
/// a week (the CA looks only at the extension and the name).
fn certificate(key: &Key, identifier: &str, key_auth: &str, now: SystemTime) -> Result<Vec<u8>, String> {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, key_auth.as_bytes());
    let mut serial = [0u8; 16];
    aws_lc_rs::rand::fill(&mut serial).map_err(|_| "no randomness".to_string())?;
    serial[0] &= 0x7f;
    serial[0] |= 0x01;
    let (alg, _) = key.sign_der(b"")?;
    let name = jws::common_name("ACME challenge");
    let day = Duration::from_secs(86_400);
    let validity = tlv(0x30, &[utc_time(now - day), utc_time(now + 7 * day)].concat());
    let san = tlv(
        0x30,
        &[tlv(0x06, jws::SUBJECT_ALT_NAME), tlv(0x04, &jws::general_names(&[identifier.to_string()]))].concat(),
    );
    let acme =
        tlv(0x30, &[tlv(0x06, ACME_IDENTIFIER), tlv(0x01, &[0xff]), tlv(0x04, &tlv(0x04, digest.as_ref()))].concat());
    let tbs = tlv(
        0x30,
        &[
            tlv(0xa0, &tlv(0x02, &[2])),
            tlv(0x02, &serial),
            alg,
            name.clone(),
            validity,
            name,
            key.spki(),
            tlv(0xa3, &tlv(0x30, &[san, acme].concat())),
        ]
        .concat(),
    );
    let (alg, sig) = key.sign_der(&tbs)?;
    Ok(tlv(0x30, &[tbs, alg, sig].concat()))
}

/// UTCTime (YYMMDDHHMMSSZ) for a time between 1950 and 2049.
fn utc_time(t: SystemTime) -> Vec<u8> {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, d) = crate::clock::civil_from_days(days);
    let s = format!("{:02}{:02}{:02}{:02}{:02}{:02}Z", y % 100, m, d, rem / 3600, rem / 60 % 60, rem % 60);
    tlv(0x17, s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_names_for_ip_identifiers() {
        assert_eq!(sni_for("127.0.0.1"), "1.0.0.127.in-addr.arpa");
        assert_eq!(sni_for("2001:db8::1"), "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa");
        assert_eq!(sni_for("Example.COM."), "example.com");
    }

    #[test]
    fn utc_times() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(utc_time(t), tlv(0x17, b"261118110640Z"));
        assert_eq!(utc_time(UNIX_EPOCH), tlv(0x17, b"700101000000Z"));
    }

    #[test]
    fn the_challenge_certificate_carries_the_digest() {
        let key = Key::generate(KeyType::P256).expect("key");
        let der = certificate(&key, "a.example", "tok.thumb", SystemTime::now()).expect("cert");
        let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, b"tok.thumb");
        let ext = [tlv(0x06, ACME_IDENTIFIER), tlv(0x01, &[0xff]), tlv(0x04, &tlv(0x04, digest.as_ref()))].concat();
        assert!(der.windows(ext.len()).any(|w| w == ext.as_slice()));
        assert!(der.windows(9).any(|w| w == b"a.example"));
    }
}
