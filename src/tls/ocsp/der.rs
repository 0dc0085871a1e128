//! The DER of OCSP (RFC 6960) and the few certificate fields it needs:
//! the request for one certificate, the response's parse and checks, and
//! its signature. A response comes from a network responder, so every
//! read is bounds-checked and the parser is fuzzed (`ocsp_response`).

use aws_lc_rs::digest;
use aws_lc_rs::signature;

pub use crate::tls::der::Der;

const SEQ: u8 = 0x30;
const OID: u8 = 0x06;
const INT: u8 = 0x02;
const OCTETS: u8 = 0x04;
const BITS: u8 = 0x03;
const ENUM: u8 = 0x0a;
const GENTIME: u8 = 0x18;

const OID_AIA: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x01, 0x01];
const OID_AD_OCSP: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01];
const OID_OCSP_BASIC: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x30, 0x01, 0x01];
const OID_EKU: &[u8] = &[0x55, 0x1d, 0x25];
const OID_AKI: &[u8] = &[0x55, 0x1d, 0x23];
const OID_KP_OCSP_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09];
const OID_SHA1: &[u8] = &[0x2b, 0x0e, 0x03, 0x02, 0x1a];

/// What OCSP needs of a certificate.
#[derive(Debug, Clone)]
pub struct CertFields<'a> {
    pub tbs: &'a [u8],
    pub sig_alg: &'a [u8],
    pub signature: &'a [u8],
    pub serial: &'a [u8],
    /// The issuer and subject names, whole DER.
    pub issuer: &'a [u8],
    pub subject: &'a [u8],
    /// The SubjectPublicKeyInfo's algorithm (whole) and key bits.
    pub spki_alg: &'a [u8],
    pub key: &'a [u8],
    /// The first OCSP responder URL of the Authority Information Access.
    pub ocsp_url: Option<&'a [u8]>,
    pub ocsp_signing: bool,
    /// The Authority Key Identifier's keyIdentifier (ACME's renewal
    /// information names a certificate by it and the serial).
    pub aki: Option<&'a [u8]>,
}

fn bit_string(b: &[u8]) -> Option<&[u8]> {
    match b.split_first() {
        Some((0, rest)) => Some(rest),
        _ => None,
    }
}

/// Reads a certificate's fields (any version).
pub fn cert_fields(der: &[u8]) -> Option<CertFields<'_>> {
    let mut top = Der(Der(der).expect(SEQ)?);
    let (t, tbs_body, tbs) = top.next_raw()?;
    if t != SEQ {
        return None;
    }
    let sig_alg = alg_oid(top.expect(SEQ)?)?;
    let signature = bit_string(top.expect(BITS)?)?;
    let mut c = Der(tbs_body);
    c.optional(0xa0);
    let serial = c.expect(INT)?;
    c.expect(SEQ)?;
    let (t, _, issuer) = c.next_raw()?;
    if t != SEQ {
        return None;
    }
    c.expect(SEQ)?;
    let (t, _, subject) = c.next_raw()?;
    if t != SEQ {
        return None;
    }
    let mut spki = Der(c.expect(SEQ)?);
    let spki_alg = spki.expect(SEQ)?;
    let key = bit_string(spki.expect(BITS)?)?;
    c.optional(0x81);
    c.optional(0x82);
    let mut ocsp_url = None;
    let mut ocsp_signing = false;
    let mut aki = None;
    if let Some(ext) = c.optional(0xa3) {
        let mut exts = Der(Der(ext).expect(SEQ)?);
        while let Some(e) = exts.expect(SEQ) {
            let mut e = Der(e);
            let id = e.expect(OID)?;
            e.optional(0x01);
            let value = e.expect(OCTETS)?;
            if id == OID_AIA {
                let mut ads = Der(Der(value).expect(SEQ)?);
                while let Some(ad) = ads.expect(SEQ) {
                    let mut ad = Der(ad);
                    if ad.expect(OID)? == OID_AD_OCSP
                        && let Some(uri) = ad.expect(0x86)
                    {
                        ocsp_url.get_or_insert(uri);
                    }
                }
            } else if id == OID_AKI {
                aki = Der(Der(value).expect(SEQ)?).optional(0x80);
            } else if id == OID_EKU {
                let mut kps = Der(Der(value).expect(SEQ)?);
                while let Some(kp) = kps.expect(OID) {
                    ocsp_signing |= kp == OID_KP_OCSP_SIGNING;
                }
            }
        }
    }
    Some(CertFields { tbs, sig_alg, signature, serial, issuer, subject, spki_alg, key, ocsp_url, ocsp_signing, aki })
}

fn alg_oid(alg_seq: &[u8]) -> Option<&[u8]> {
    Der(alg_seq).expect(OID)
}

/// The CertID of RFC 6960 (SHA-1, as every responder takes).
#[derive(Debug, Clone, PartialEq)]
pub struct CertId {
    pub name_hash: Vec<u8>,
    pub key_hash: Vec<u8>,
    pub serial: Vec<u8>,
}

impl CertId {
    pub fn new(cert: &CertFields<'_>, issuer: &CertFields<'_>) -> CertId {
        let sha1 = |b: &[u8]| digest::digest(&digest::SHA1_FOR_LEGACY_USE_ONLY, b).as_ref().to_vec();
        CertId { name_hash: sha1(issuer.subject), key_hash: sha1(issuer.key), serial: cert.serial.to_vec() }
    }
}

fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = body.len();
    if n < 0x80 {
        out.push(n as u8);
    } else if n < 0x100 {
        out.extend([0x81, n as u8]);
    } else {
        out.extend([0x82, (n >> 8) as u8, n as u8]);
    }
    out.extend_from_slice(body);
    out
}

/// An OCSPRequest for one certificate, no nonce (as nginx sends it).
pub fn request(id: &CertId) -> Vec<u8> {
    let alg = tlv(SEQ, &[tlv(OID, OID_SHA1), vec![0x05, 0x00]].concat());
    let cert_id =
        tlv(SEQ, &[alg, tlv(OCTETS, &id.name_hash), tlv(OCTETS, &id.key_hash), tlv(INT, &id.serial)].concat());
    let req = tlv(SEQ, &cert_id);
    let list = tlv(SEQ, &req);
    let tbs = tlv(SEQ, &list);
    tlv(SEQ, &tbs)
}

/// A certificate's status in a response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Status {
    Good,
    Revoked,
    Unknown,
}

/// A successful basic response, read but not yet checked.
#[derive(Debug)]
pub struct Response<'a> {
    pub tbs: &'a [u8],
    pub sig_alg: &'a [u8],
    pub signature: &'a [u8],
    /// Certificates the responder sent (a delegated signer), whole DER.
    pub certs: Vec<&'a [u8]>,
    pub single: Vec<Single<'a>>,
}

#[derive(Debug)]
pub struct Single<'a> {
    pub name_hash: &'a [u8],
    pub key_hash: &'a [u8],
    pub serial: &'a [u8],
    pub hash_alg: &'a [u8],
    pub status: Status,
    /// Seconds since the epoch.
    pub this_update: i64,
    pub next_update: Option<i64>,
}

/// Why a response is not stapled (for the error log).
pub type Why = &'static str;

/// Parses an OCSPResponse; an unsuccessful status is an error.
pub fn parse_response(der: &[u8]) -> Result<Response<'_>, Why> {
    let bad = "malformed OCSP response";
    let mut top = Der(Der(der).expect(SEQ).ok_or(bad)?);
    let status = top.expect(ENUM).ok_or(bad)?;
    if status != [0] {
        return Err("OCSP responder sent an error status");
    }
    let mut rb = Der(Der(top.expect(0xa0).ok_or(bad)?).expect(SEQ).ok_or(bad)?);
    if rb.expect(OID).ok_or(bad)? != OID_OCSP_BASIC {
        return Err("OCSP response is not a basic response");
    }
    let basic = rb.expect(OCTETS).ok_or(bad)?;
    let mut b = Der(Der(basic).expect(SEQ).ok_or(bad)?);
    let (t, tbs_body, tbs) = b.next_raw().ok_or(bad)?;
    if t != SEQ {
        return Err(bad);
    }
    let sig_alg = alg_oid(b.expect(SEQ).ok_or(bad)?).ok_or(bad)?;
    let signature = bit_string(b.expect(BITS).ok_or(bad)?).ok_or(bad)?;
    let mut certs = Vec::new();
    if let Some(c) = b.optional(0xa0) {
        let mut list = Der(Der(c).expect(SEQ).ok_or(bad)?);
        while let Some((t, _, whole)) = list.next_raw() {
            if t != SEQ {
                return Err(bad);
            }
            certs.push(whole);
        }
    }
    let mut d = Der(tbs_body);
    d.optional(0xa0);
    match d.next_item() {
        Some((0xa1 | 0xa2, _)) => {}
        _ => return Err(bad),
    }
    d.expect(GENTIME).ok_or(bad)?;
    let mut list = Der(d.expect(SEQ).ok_or(bad)?);
    let mut single = Vec::new();
    while let Some(s) = list.expect(SEQ) {
        let mut s = Der(s);
        let mut id = Der(s.expect(SEQ).ok_or(bad)?);
        let hash_alg = alg_oid(id.expect(SEQ).ok_or(bad)?).ok_or(bad)?;
        let name_hash = id.expect(OCTETS).ok_or(bad)?;
        let key_hash = id.expect(OCTETS).ok_or(bad)?;
        let serial = id.expect(INT).ok_or(bad)?;
        let status = match s.next_item().ok_or(bad)?.0 {
            0x80 => Status::Good,
            0xa1 => Status::Revoked,
            0x82 => Status::Unknown,
            _ => return Err(bad),
        };
        let this_update = gentime(s.expect(GENTIME).ok_or(bad)?).ok_or(bad)?;
        let next_update = match s.optional(0xa0) {
            Some(n) => Some(gentime(Der(n).expect(GENTIME).ok_or(bad)?).ok_or(bad)?),
            None => None,
        };
        single.push(Single { name_hash, key_hash, serial, hash_alg, status, this_update, next_update });
    }
    if !list.is_empty() {
        return Err(bad);
    }
    Ok(Response { tbs, sig_alg, signature, certs, single })
}

/// `YYYYMMDDHHMMSS[.fff]Z` as seconds since the epoch.
fn gentime(b: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(b).ok()?;
    let s = s.strip_suffix('Z')?;
    let s = s.split('.').next()?;
    if s.len() != 14 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (n(0..4)?, n(4..6)?, n(6..8)?, n(8..10)?, n(10..12)?, n(12..14)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(days * 86400 + h * 3600 + mi * 60 + se)
}

/// Allowed clock difference with the responder, as OpenSSL's
/// `OCSP_check_validity` is called by nginx (5 minutes).
const SKEW: i64 = 300;

/// The status of `id` in `resp` at `now`, if the response covers it and
/// is current: a response without `nextUpdate` is taken as current
/// (nginx: valid for an hour from now).
pub fn status_of(resp: &Response<'_>, id: &CertId, now: i64) -> Result<(Status, Option<i64>), Why> {
    let s = resp
        .single
        .iter()
        .find(|s| {
            s.hash_alg == OID_SHA1 && s.name_hash == id.name_hash && s.key_hash == id.key_hash && s.serial == id.serial
        })
        .ok_or("OCSP response is for another certificate")?;
    if s.this_update > now + SKEW {
        return Err("OCSP response is not yet valid");
    }
    if s.next_update.is_some_and(|n| n < now - SKEW) {
        return Err("OCSP response has expired");
    }
    Ok((s.status, s.next_update))
}

/// Verifies `signature` over `msg` with a certificate's key.
pub fn verify_sig(signer: &CertFields<'_>, sig_alg: &[u8], msg: &[u8], sig: &[u8]) -> bool {
    const RSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x05];
    const RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
    const RSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0c];
    const RSA_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0d];
    const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
    const ECDSA_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x03];
    const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x2b, 0x81, 0x04, 0x00, 0x22];
    let mut a = Der(signer.spki_alg);
    a.expect(OID);
    let curve = a.expect(OID);
    let alg: &'static dyn signature::VerificationAlgorithm = match (sig_alg, curve) {
        (RSA_SHA1, _) => &signature::RSA_PKCS1_2048_8192_SHA1_FOR_LEGACY_USE_ONLY,
        (RSA_SHA256, _) => &signature::RSA_PKCS1_2048_8192_SHA256,
        (RSA_SHA384, _) => &signature::RSA_PKCS1_2048_8192_SHA384,
        (RSA_SHA512, _) => &signature::RSA_PKCS1_2048_8192_SHA512,
        (ECDSA_SHA256, Some(P256)) => &signature::ECDSA_P256_SHA256_ASN1,
        (ECDSA_SHA256, Some(P384)) => &signature::ECDSA_P384_SHA256_ASN1,
        (ECDSA_SHA384, Some(P256)) => &signature::ECDSA_P256_SHA384_ASN1,
        (ECDSA_SHA384, Some(P384)) => &signature::ECDSA_P384_SHA384_ASN1,
        _ => return false,
    };
    signature::UnparsedPublicKey::new(alg, signer.key).verify(msg, sig).is_ok()
}

/// `ssl_stapling_verify` and `ssl_ocsp`: OpenSSL's `OCSP_basic_verify` as
/// nginx calls it. The response is signed by the issuer, or by a responder
/// certificate it carries that the issuer signed for OCSP signing (RFC
/// 6960 4.2.2.2), or by a certificate whose chain, built from the
/// response's certificates and the trusted ones (`store`), ends at a
/// self-signed root of `store` that the trust file marks as trusted for
/// OCSP signing (`trust::certificates`), whoever issued the checked
/// certificate.
pub fn verify_response(resp: &Response<'_>, issuer: &CertFields<'_>, store: &[(&[u8], bool)]) -> bool {
    if verify_sig(issuer, resp.sig_alg, resp.tbs, resp.signature) {
        return true;
    }
    let carried: Vec<CertFields<'_>> = resp.certs.iter().filter_map(|c| cert_fields(c)).collect();
    let delegated = carried.iter().any(|delegate| {
        delegate.ocsp_signing
            && delegate.issuer == issuer.subject
            && verify_sig(issuer, delegate.sig_alg, delegate.tbs, delegate.signature)
            && verify_sig(delegate, resp.sig_alg, resp.tbs, resp.signature)
    });
    if delegated || !store.iter().any(|(_, ocsp)| *ocsp) {
        return delegated;
    }
    let trusted: Vec<(CertFields<'_>, bool)> =
        store.iter().filter_map(|(c, ocsp)| cert_fields(c).map(|f| (f, *ocsp))).collect();
    carried.iter().chain(trusted.iter().map(|(f, _)| f)).any(|signer| {
        verify_sig(signer, resp.sig_alg, resp.tbs, resp.signature) && chains_to_ocsp_root(signer, &carried, &trusted)
    })
}

/// Whether `cert` leads, through `carried` and `trusted`, to a self-signed
/// certificate of `trusted` marked for OCSP signing (at most 8 steps),
/// each link's signature checked.
fn chains_to_ocsp_root(cert: &CertFields<'_>, carried: &[CertFields<'_>], trusted: &[(CertFields<'_>, bool)]) -> bool {
    let mut cur = cert.clone();
    for _ in 0..8 {
        if cur.issuer == cur.subject {
            return trusted.iter().any(|(t, ocsp)| *ocsp && t.tbs == cur.tbs)
                && verify_sig(&cur, cur.sig_alg, cur.tbs, cur.signature);
        }
        let parent = trusted
            .iter()
            .map(|(f, _)| f)
            .chain(carried.iter())
            .find(|p| p.subject == cur.issuer && verify_sig(p, cur.sig_alg, cur.tbs, cur.signature));
        match parent {
            Some(p) => cur = p.clone(),
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generalized_time() {
        assert_eq!(gentime(b"19700101000000Z"), Some(0));
        assert_eq!(gentime(b"20000301000000Z"), Some(951868800));
        assert_eq!(gentime(b"20261129093000.5Z"), gentime(b"20261129093000Z"));
        assert_eq!(gentime(b"2026112909300Z"), None);
    }

    #[test]
    fn request_round_trips_its_cert_id() {
        let id = CertId { name_hash: vec![1; 20], key_hash: vec![2; 20], serial: vec![0x10, 0x01] };
        let r = request(&id);
        let mut d = Der(Der(&r).expect(SEQ).unwrap());
        assert!(d.expect(SEQ).is_some() && d.is_empty());
        assert!(parse_response(&r).is_err());
    }
}
