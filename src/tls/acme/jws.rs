//! Keys and signatures for ACME: ECDSA keys (P-256, P-384, P-521) and RSA
//! keys (2048, 3072, 4096 bits) made and used with aws-lc-rs, the
//! flattened JWS every request is (RFC 8555 section 6.2: ES256/ES384/ES512,
//! RS256), the JWK thumbprint of the key authorization (RFC 7638), a
//! PKCS#10 certificate signing request with the order's names, and PEM.

use aws_lc_rs::encoding::{AsDer, Pkcs8V1Der, PublicKeyX509Der};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize};
use aws_lc_rs::signature::{self, EcdsaKeyPair, EcdsaSigningAlgorithm, KeyPair};

/// A key type nginx-acme accepts (`ecdsa:256`, `rsa:2048` and so on). The
/// variant names are part of the state files' names (`order_id` hashes
/// them), so they stay as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyType {
    P256,
    P384,
    P521,
    Rsa2048,
    Rsa3072,
    Rsa4096,
}

impl KeyType {
    /// `ecdsa[:SIZE]` or `rsa[:SIZE]`, nginx-acme's values and words.
    pub fn parse(v: &str) -> Result<KeyType, String> {
        let (alg, size) = match v.split_once(':') {
            Some((a, s)) => (a, Some(s)),
            None => (v, None),
        };
        if alg.eq_ignore_ascii_case("rsa") {
            return match size {
                None | Some("2048") => Ok(KeyType::Rsa2048),
                Some("3072") => Ok(KeyType::Rsa3072),
                Some("4096") => Ok(KeyType::Rsa4096),
                Some(_) => Err(format!("unsupported key size \"{v}\"")),
            };
        }
        if !alg.eq_ignore_ascii_case("ecdsa") {
            return Err(format!("unsupported key algorithm \"{v}\""));
        }
        match size {
            None | Some("256") => Ok(KeyType::P256),
            Some("384") => Ok(KeyType::P384),
            Some("521") => Ok(KeyType::P521),
            Some(_) => Err(format!("unsupported curve \"{v}\"")),
        }
    }

    fn rsa_size(self) -> Option<KeySize> {
        match self {
            KeyType::Rsa2048 => Some(KeySize::Rsa2048),
            KeyType::Rsa3072 => Some(KeySize::Rsa3072),
            KeyType::Rsa4096 => Some(KeySize::Rsa4096),
            _ => None,
        }
    }

    /// The fixed-size (JWS) and DER (X.509) signing algorithms of a curve.
    fn ecdsa(self) -> Option<(&'static EcdsaSigningAlgorithm, &'static EcdsaSigningAlgorithm)> {
        match self {
            KeyType::P256 => {
                Some((&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &signature::ECDSA_P256_SHA256_ASN1_SIGNING))
            }
            KeyType::P384 => {
                Some((&signature::ECDSA_P384_SHA384_FIXED_SIGNING, &signature::ECDSA_P384_SHA384_ASN1_SIGNING))
            }
            KeyType::P521 => {
                Some((&signature::ECDSA_P521_SHA512_FIXED_SIGNING, &signature::ECDSA_P521_SHA512_ASN1_SIGNING))
            }
            _ => None,
        }
    }

    fn jws_alg(self) -> &'static str {
        match self {
            KeyType::P256 => "ES256",
            KeyType::P384 => "ES384",
            KeyType::P521 => "ES512",
            _ => "RS256",
        }
    }

    fn jwk_crv(self) -> &'static str {
        match self {
            KeyType::P384 => "P-384",
            KeyType::P521 => "P-521",
            _ => "P-256",
        }
    }

    /// The curve's OID (DER contents) and that of the signature algorithm
    /// a CSR carries.
    fn oids(self) -> (&'static [u8], &'static [u8]) {
        match self {
            KeyType::P256 => {
                (&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07], &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02])
            }
            KeyType::P384 => (&[0x2b, 0x81, 0x04, 0x00, 0x22], &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03]),
            KeyType::P521 => (&[0x2b, 0x81, 0x04, 0x00, 0x23], &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04]),
            _ => (&[], SHA256_WITH_RSA),
        }
    }
}

/// The key pair behind a `Key`.
enum Pair {
    /// ECDSA: one pair signing JWS's fixed-size form, one X.509's DER form.
    Ec {
        fixed: EcdsaKeyPair,
        asn1: EcdsaKeyPair,
    },
    Rsa(RsaKeyPair),
}

/// A key with its PKCS#8 form (what the state directory holds).
pub struct Key {
    pub kind: KeyType,
    pub pkcs8: Vec<u8>,
    pair: Pair,
}

impl Key {
    pub fn generate(kind: KeyType) -> Result<Key, String> {
        const FAILED: &str = "key generation failed";
        if let Some(size) = kind.rsa_size() {
            let k = RsaKeyPair::generate(size).map_err(|_| FAILED.to_string())?;
            let der: Pkcs8V1Der = k.as_der().map_err(|_| FAILED.to_string())?;
            return Ok(Key { kind, pkcs8: der.as_ref().to_vec(), pair: Pair::Rsa(k) });
        }
        let (fixed, _) = kind.ecdsa().ok_or(FAILED)?;
        let doc = EcdsaKeyPair::generate_pkcs8(fixed, &SystemRandom::new()).map_err(|_| FAILED.to_string())?;
        Key::from_pkcs8(kind, doc.as_ref())
    }

    pub fn from_pkcs8(kind: KeyType, der: &[u8]) -> Result<Key, String> {
        let pair = match kind.ecdsa() {
            Some((fixed, asn1)) => Pair::Ec {
                fixed: EcdsaKeyPair::from_pkcs8(fixed, der).map_err(|e| format!("invalid key ({e})"))?,
                asn1: EcdsaKeyPair::from_pkcs8(asn1, der).map_err(|e| format!("invalid key ({e})"))?,
            },
            None => Pair::Rsa(RsaKeyPair::from_pkcs8(der).map_err(|e| format!("invalid key ({e})"))?),
        };
        Ok(Key { kind, pkcs8: der.to_vec(), pair })
    }

    /// A PEM key (PKCS#8 `PRIVATE KEY`, SEC1 `EC PRIVATE KEY` or PKCS#1
    /// `RSA PRIVATE KEY`): ECDSA on one of the curves, or RSA of 2048,
    /// 3072 or 4096 bits.
    pub fn from_pem(pem: &[u8]) -> Result<Key, String> {
        let der = crate::tls::keyfile::read_key(pem, &[]).map_err(|e| e.to_string())?;
        let der = der.secret_der();
        for kind in [KeyType::P256, KeyType::P384, KeyType::P521] {
            let Some((fixed, _)) = kind.ecdsa() else { continue };
            if let Ok(k) = EcdsaKeyPair::from_private_key_der(fixed, der) {
                let pkcs8 = k.to_pkcs8v1().map_err(|_| "invalid key".to_string())?;
                return Key::from_pkcs8(kind, pkcs8.as_ref());
            }
        }
        if let Ok(k) = RsaKeyPair::from_pkcs8(der).or_else(|_| RsaKeyPair::from_der(der)) {
            let kind = match k.public_modulus_len() * 8 {
                2048 => KeyType::Rsa2048,
                3072 => KeyType::Rsa3072,
                4096 => KeyType::Rsa4096,
                bits => return Err(format!("unsupported RSA key size {bits}")),
            };
            let pkcs8: Pkcs8V1Der = k.as_der().map_err(|_| "invalid key".to_string())?;
            return Ok(Key { kind, pkcs8: pkcs8.as_ref().to_vec(), pair: Pair::Rsa(k) });
        }
        Err("not an ECDSA P-256, P-384, P-521 or RSA key".into())
    }

    pub fn pem(&self) -> Vec<u8> {
        pem("PRIVATE KEY", &self.pkcs8).into_bytes()
    }

    /// The JWK of the public key, members in lexical order (RFC 7638).
    pub fn jwk(&self) -> String {
        match &self.pair {
            Pair::Ec { fixed, .. } => {
                let p = fixed.public_key().as_ref();
                let n = (p.len() - 1) / 2;
                format!(
                    r#"{{"crv":"{}","kty":"EC","x":"{}","y":"{}"}}"#,
                    self.kind.jwk_crv(),
                    b64u(&p[1..1 + n]),
                    b64u(&p[1 + n..])
                )
            }
            Pair::Rsa(k) => {
                let p = k.public_key();
                format!(
                    r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
                    b64u(p.exponent().big_endian_without_leading_zero()),
                    b64u(p.modulus().big_endian_without_leading_zero())
                )
            }
        }
    }

    pub fn thumbprint(&self) -> String {
        b64u(aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, self.jwk().as_bytes()).as_ref())
    }

    /// A flattened JWS over `payload` (None: POST-as-GET, empty payload)
    /// with the account URL (`kid`) or, before there is one, the JWK.
    pub fn jws(&self, url: &str, nonce: &str, kid: Option<&str>, payload: Option<&str>) -> Result<String, String> {
        let who = match kid {
            Some(k) => format!(r#""kid":{}"#, serde_json::Value::from(k)),
            None => format!(r#""jwk":{}"#, self.jwk()),
        };
        let protected = format!(
            r#"{{"alg":"{}",{},"nonce":{},"url":{}}}"#,
            self.kind.jws_alg(),
            who,
            serde_json::Value::from(nonce),
            serde_json::Value::from(url)
        );
        let protected = b64u(protected.as_bytes());
        let payload = payload.map(|p| b64u(p.as_bytes())).unwrap_or_default();
        let input = format!("{protected}.{payload}");
        let sig = match &self.pair {
            Pair::Ec { fixed, .. } => fixed.sign(&SystemRandom::new(), input.as_bytes()).map(|s| s.as_ref().to_vec()),
            Pair::Rsa(k) => rsa_sign(k, input.as_bytes()),
        }
        .map_err(|_| "signing failed".to_string())?;
        Ok(format!(r#"{{"protected":"{}","payload":"{}","signature":"{}"}}"#, protected, payload, b64u(&sig)))
    }

    /// The key's SubjectPublicKeyInfo (DER).
    pub(super) fn spki(&self) -> Vec<u8> {
        match &self.pair {
            Pair::Ec { asn1, .. } => {
                let (curve_oid, _) = self.kind.oids();
                tlv(
                    0x30,
                    &[
                        tlv(0x30, &[tlv(0x06, EC_PUBLIC_KEY), tlv(0x06, curve_oid)].concat()),
                        tlv(0x03, &[&[0u8][..], asn1.public_key().as_ref()].concat()),
                    ]
                    .concat(),
                )
            }
            Pair::Rsa(k) => {
                let der: Result<PublicKeyX509Der, _> = k.public_key().as_der();
                der.map(|d| d.as_ref().to_vec()).unwrap_or_default()
            }
        }
    }

    /// `data` signed (ECDSA with a DER signature, or RSA PKCS#1 v1.5 with
    /// SHA-256), with the AlgorithmIdentifier of the signature: what a CSR
    /// or certificate carries after its body.
    pub(super) fn sign_der(&self, data: &[u8]) -> Result<(Vec<u8>, Vec<u8>), String> {
        let (_, sig_oid) = self.kind.oids();
        let (alg, sig) = match &self.pair {
            Pair::Ec { asn1, .. } => {
                (tlv(0x30, &tlv(0x06, sig_oid)), asn1.sign(&SystemRandom::new(), data).map(|s| s.as_ref().to_vec()))
            }
            // RSA's AlgorithmIdentifier carries an explicit NULL parameter.
            Pair::Rsa(k) => (tlv(0x30, &[tlv(0x06, sig_oid), tlv(0x05, &[])].concat()), rsa_sign(k, data)),
        };
        let sig = sig.map_err(|_| "signing failed".to_string())?;
        Ok((alg, tlv(0x03, &[&[0u8][..], &sig].concat())))
    }

    /// A PKCS#10 request for `names` (DNS names and IP addresses), with
    /// the first as the subject's CN, signed with this key.
    pub fn csr(&self, names: &[String]) -> Result<Vec<u8>, String> {
        let san = tlv(0x30, &[tlv(0x06, SUBJECT_ALT_NAME), tlv(0x04, &general_names(names))].concat());
        let ext_req = tlv(0x30, &[tlv(0x06, EXTENSION_REQUEST), tlv(0x31, &tlv(0x30, &san))].concat());
        let subject = match names.first().filter(|n| n.len() <= 64 && n.parse::<std::net::IpAddr>().is_err()) {
            Some(cn) => common_name(cn),
            None => tlv(0x30, &[]),
        };
        let info = tlv(0x30, &[tlv(0x02, &[0]), subject, self.spki(), tlv(0xa0, &ext_req)].concat());
        let (alg, sig) = self.sign_der(&info)?;
        Ok(tlv(0x30, &[info, alg, sig].concat()))
    }
}

/// RSASSA-PKCS1-v1_5 with SHA-256: RS256 in a JWS, sha256WithRSAEncryption
/// in a CSR.
fn rsa_sign(k: &RsaKeyPair, data: &[u8]) -> Result<Vec<u8>, aws_lc_rs::error::Unspecified> {
    let mut sig = vec![0u8; k.public_modulus_len()];
    k.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), data, &mut sig)?;
    Ok(sig)
}

const SHA256_WITH_RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];

/// A Name with one CN.
pub(super) fn common_name(cn: &str) -> Vec<u8> {
    tlv(0x30, &tlv(0x31, &tlv(0x30, &[tlv(0x06, COMMON_NAME), tlv(0x0c, cn.as_bytes())].concat())))
}

/// SubjectAltName's GeneralNames for DNS names and IP addresses.
pub(super) fn general_names(names: &[String]) -> Vec<u8> {
    let mut general = Vec::new();
    for n in names {
        match n.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(a)) => general.extend(tlv(0x87, &a.octets())),
            Ok(std::net::IpAddr::V6(a)) => general.extend(tlv(0x87, &a.octets())),
            Err(_) => general.extend(tlv(0x82, n.as_bytes())),
        }
    }
    tlv(0x30, &general)
}

const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
pub(super) const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];
const EXTENSION_REQUEST: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x0e];
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// One DER element.
pub(super) fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes: Vec<u8> = n.to_be_bytes().into_iter().skip_while(|&b| b == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(body);
    out
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64(data: &[u8], url: bool) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            let c = B64[(n >> (18 - 6 * i) & 63) as usize];
            out.push(match (url, c) {
                (true, b'+') => '-',
                (true, b'/') => '_',
                (_, c) => c as char,
            });
        }
        if !url {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// base64url without padding (RFC 7515 section 2).
pub fn b64u(data: &[u8]) -> String {
    base64(data, true)
}

/// base64url decoded (padding optional), as external account keys come.
pub fn b64u_decode(text: &str) -> Option<Vec<u8>> {
    let std: Vec<u8> = text
        .trim()
        .bytes()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .collect();
    crate::tls::keyfile::base64_decode(&std).filter(|k| !k.is_empty())
}

/// External account binding (RFC 8555 7.3.4): the account key's JWK
/// signed with the CA's MAC key (HS256), for a newAccount request to `url`.
pub fn external_account_binding(kid: &str, mac_key: &[u8], url: &str, jwk: &str) -> serde_json::Value {
    let protected = serde_json::json!({ "alg": "HS256", "kid": kid, "url": url }).to_string();
    let protected = b64u(protected.as_bytes());
    let payload = b64u(jwk.as_bytes());
    let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, mac_key);
    let tag = aws_lc_rs::hmac::sign(&key, format!("{protected}.{payload}").as_bytes());
    serde_json::json!({ "protected": protected, "payload": payload, "signature": b64u(tag.as_ref()) })
}

pub fn pem(label: &str, der: &[u8]) -> String {
    let b = base64(der, false);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_forms() {
        assert_eq!(b64u(b""), "");
        assert_eq!(b64u(b"f"), "Zg");
        assert_eq!(b64u(b"fo"), "Zm8");
        assert_eq!(b64u(b"foo"), "Zm9v");
        assert_eq!(b64u(&[0xfb, 0xff]), "-_8");
        assert_eq!(base64(b"fo", false), "Zm8=");
    }

    #[test]
    fn key_types_as_nginx_acme() {
        assert_eq!(KeyType::parse("ecdsa:256"), Ok(KeyType::P256));
        assert_eq!(KeyType::parse("ecdsa"), Ok(KeyType::P256));
        assert!(KeyType::parse("ecdsa:234").unwrap_err().contains("unsupported curve"));
        assert_eq!(KeyType::parse("rsa"), Ok(KeyType::Rsa2048));
        assert_eq!(KeyType::parse("rsa:4096"), Ok(KeyType::Rsa4096));
        assert!(KeyType::parse("rsa:1024").unwrap_err().contains("unsupported key size"));
        assert!(KeyType::parse("dsa").unwrap_err().contains("unsupported key algorithm"));
    }

    #[test]
    fn keys_round_trip_and_sign() {
        for kind in [KeyType::P256, KeyType::P384, KeyType::P521, KeyType::Rsa2048] {
            let k = Key::generate(kind).unwrap();
            let again = Key::from_pem(&k.pem()).unwrap();
            assert_eq!(again.jwk(), k.jwk());
            assert_eq!(again.kind, kind);
            let jws = k.jws("https://ca/x", "nonce", None, Some("{}")).unwrap();
            let v: serde_json::Value = serde_json::from_str(&jws).unwrap();
            assert!(v["signature"].as_str().unwrap().len() > 40);
            let csr = k.csr(&["example.test".into(), "127.0.0.1".into()]).unwrap();
            assert_eq!(csr[0], 0x30);
        }
    }
}
