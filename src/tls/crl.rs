//! Certificate revocation lists read and applied here when webpki cannot
//! take them: webpki parses version 2 CRLs with extensions only, while
//! OpenSSL (so nginx's `ssl_crl` and `proxy_ssl_crl`) also takes the
//! version 1 CRLs that `openssl ca -gencrl` writes without
//! `crl_extensions`. The check is OpenSSL's `X509_V_FLAG_CRL_CHECK_ALL`
//! as nginx sets it, with nginx's verify callback that lets every error
//! through so the last one found is the one reported.

use rustls_pki_types::CertificateRevocationListDer;

use super::client_verify::VerifyError;
use super::der::Der;
use super::ocsp::der::{cert_fields, verify_sig};

const SEQ: u8 = 0x30;
const INT: u8 = 0x02;
const OID: u8 = 0x06;
const BITS: u8 = 0x03;
const UTC_TIME: u8 = 0x17;
const GEN_TIME: u8 = 0x18;

/// One CRL's fields, owned.
#[derive(Debug)]
struct Crl {
    tbs: Vec<u8>,
    sig_alg: Vec<u8>,
    signature: Vec<u8>,
    /// The issuer's Name, whole DER (compared with certificates' issuers).
    issuer: Vec<u8>,
    this_update: i64,
    next_update: Option<i64>,
    /// The revoked certificates' serial numbers (INTEGER contents).
    revoked: Vec<Vec<u8>>,
}

fn time(tag: u8, v: &[u8]) -> Option<i64> {
    super::client_cert::cert_time(tag, v).map(|t| t.unix)
}

fn parse(der: &[u8]) -> Option<Crl> {
    let mut top = Der(Der(der).expect(SEQ)?);
    let (t, body, tbs) = top.next_raw()?;
    if t != SEQ {
        return None;
    }
    let sig_alg = Der(top.expect(SEQ)?).expect(OID)?;
    let signature = top.expect(BITS)?.split_first().filter(|(unused, _)| **unused == 0)?.1;
    let mut c = Der(body);
    c.optional(INT);
    c.expect(SEQ)?;
    let (t, _, issuer) = c.next_raw()?;
    if t != SEQ {
        return None;
    }
    let (t, v) = c.next_item()?;
    let this_update = time(t, v)?;
    let mut next_update = None;
    if let Some(&t) = c.0.first().filter(|t| **t == UTC_TIME || **t == GEN_TIME) {
        let (_, v) = c.next_item()?;
        next_update = Some(time(t, v)?);
    }
    let mut revoked = Vec::new();
    if let Some(list) = c.optional(SEQ) {
        let mut list = Der(list);
        while let Some(entry) = list.expect(SEQ) {
            revoked.push(Der(entry).expect(INT)?.to_vec());
        }
        if !list.is_empty() {
            return None;
        }
    }
    Some(Crl {
        tbs: tbs.to_vec(),
        sig_alg: sig_alg.to_vec(),
        signature: signature.to_vec(),
        issuer: issuer.to_vec(),
        this_update,
        next_update,
        revoked,
    })
}

/// The CRLs of one `ssl_crl` / `proxy_ssl_crl` file.
#[derive(Debug)]
pub struct Crls(Vec<Crl>);

impl Crls {
    /// Every CRL of the file, or the first that cannot be read.
    pub fn parse(crls: &[CertificateRevocationListDer<'_>]) -> Result<Crls, String> {
        let mut out = Vec::new();
        for (i, c) in crls.iter().enumerate() {
            out.push(parse(c.as_ref()).ok_or_else(|| format!("CRL {} of the file could not be parsed", i + 1))?);
        }
        Ok(Crls(out))
    }

    /// The chain (leaf first, each certificate followed by its issuer)
    /// checked as OpenSSL's CRL_CHECK_ALL: every certificate but a
    /// self-signed top needs a CRL from its issuer, signed by it, current,
    /// not listing it. OpenSSL reports each problem and goes on (nginx's
    /// callback accepts all); the last one is the verdict.
    pub fn check(&self, chain: &[Vec<u8>], now: i64) -> Result<(), VerifyError> {
        let mut verdict = Ok(());
        for (i, cert) in chain.iter().enumerate() {
            let Some(f) = cert_fields(cert) else { continue };
            if f.subject == f.issuer && i + 1 == chain.len() {
                break;
            }
            let issuer = chain.get(i + 1).and_then(|c| cert_fields(c));
            let signed = |crl: &&Crl| {
                crl.issuer == f.issuer
                    && issuer.as_ref().is_some_and(|is| verify_sig(is, &crl.sig_alg, &crl.tbs, &crl.signature))
            };
            let fail = |code: u32, text: &str| Err(VerifyError { code, text: text.into() });
            // The newest of the issuer's CRLs, as OpenSSL picks it.
            let Some(crl) = self.0.iter().filter(signed).max_by_key(|c| c.this_update) else {
                verdict = fail(3, "unable to get certificate CRL");
                continue;
            };
            if crl.this_update > now {
                verdict = fail(11, "CRL is not yet valid");
            } else if crl.next_update.is_some_and(|n| n < now) {
                verdict = fail(12, "CRL has expired");
            }
            if crl.revoked.iter().any(|s| s.as_slice() == f.serial) {
                verdict = fail(23, "certificate revoked");
            }
        }
        verdict
    }
}

/// Whether webpki can take every CRL of the file (else [`Crls`] applies).
pub fn webpki_reads(crls: &[CertificateRevocationListDer<'_>]) -> bool {
    crls.iter().all(|c| webpki::OwnedCertRevocationList::from_der(c.as_ref()).is_ok())
}
