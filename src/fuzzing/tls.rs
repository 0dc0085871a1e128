//! The private key reader of `ssl_certificate_key` and
//! `ssl_password_file` (`tls::keyfile`): PEM blocks and their legacy
//! encryption headers, and the DER of a PKCS#8 `EncryptedPrivateKeyInfo`.

use crate::tls::keyfile;

/// PBKDF2 rounds worth running per input (a real key file has 2048).
const FUZZ_MAX_ITERATIONS: u32 = 4096;

/// First byte 0: the rest is an `EncryptedPrivateKeyInfo` in DER; any
/// other: the rest is a PEM key file, read with the passphrases "wrong"
/// and "pass" (as `ssl_password_file` would give them).
pub fn encrypted_key(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode == 0 {
        der(rest);
        return;
    }
    // A PBES2 block with many rounds would only measure PBKDF2.
    if find(rest, b"ENCRYPTED PRIVATE KEY").is_some() {
        return;
    }
    let passwords = [b"wrong".to_vec(), b"pass".to_vec()];
    if let Err(e) = keyfile::read_key(rest, &passwords) {
        assert!(!e.to_string().is_empty(), "an error says why");
    }
}

fn der(rest: &[u8]) {
    let Ok(enc) = keyfile::parse_pkcs8_encrypted(rest) else { return };
    let inside = |s: &[u8]| {
        let (a, b) = (rest.as_ptr() as usize, s.as_ptr() as usize);
        b >= a && b + s.len() <= a + rest.len()
    };
    assert!(inside(enc.salt) && inside(enc.data), "slices borrowed from the input");
    assert!(enc.iterations > 0);
    if enc.iterations <= FUZZ_MAX_ITERATIONS {
        for p in [&b"wrong"[..], b"pass"] {
            if let Some(plain) = enc.decrypt(p) {
                assert!(plain.len() < enc.data.len(), "PKCS#7 padding removed");
            }
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// An OCSP responder's answer (`tls::ocsp`): first byte 0, the whole HTTP
/// answer through `http::parse_answer` then the DER; 2, a PEM trust file
/// (`ocsp::trust`); any other, the DER of an `OCSPResponse` alone. Every certificate it carries goes through
/// the certificate reader, and the single responses through the status
/// check for a fixed certificate.
pub fn ocsp_response(data: &[u8]) {
    use crate::tls::ocsp::{der, http};
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode == 2 {
        // A trust file (`ssl_trusted_certificate`) with OpenSSL's trust
        // settings.
        for (cert, _) in crate::tls::ocsp::trust::certificates(rest) {
            assert_eq!(cert.first(), Some(&0x30), "a certificate is a SEQUENCE");
        }
        return;
    }
    let inside = |s: &[u8]| {
        let (a, b) = (rest.as_ptr() as usize, s.as_ptr() as usize);
        b >= a && b + s.len() <= a + rest.len()
    };
    let body = if mode == 0 {
        match http::parse_answer(rest) {
            Ok(b) => {
                assert!(inside(b), "the body lies inside the answer");
                b
            }
            Err(_) => return,
        }
    } else {
        rest
    };
    let Ok(resp) = der::parse_response(body) else { return };
    assert!(inside(resp.tbs) && inside(resp.signature), "slices borrowed from the input");
    for c in &resp.certs {
        assert!(inside(c));
        if let Some(f) = der::cert_fields(c) {
            assert!(inside(f.subject) && inside(f.key) && f.ocsp_url.is_none_or(inside));
            // Each carried certificate as the issuer, and all of them as
            // the trusted roots (the chain walk over untrusted input).
            let store: Vec<(&[u8], bool)> = resp.certs.iter().map(|c| (*c, true)).collect();
            let _ = der::verify_response(&resp, &f, &store);
        }
    }
    for s in &resp.single {
        // GeneralizedTime's four-digit years: 0000 to 9999.
        let year_range = -62_167_219_200..=253_402_300_799;
        assert!(year_range.contains(&s.this_update) && s.next_update.is_none_or(|n| year_range.contains(&n)));
        let id =
            der::CertId { name_hash: s.name_hash.to_vec(), key_hash: s.key_hash.to_vec(), serial: s.serial.to_vec() };
        let now = s.this_update;
        if let Ok((status, _)) = der::status_of(&resp, &id, now) {
            assert!(matches!(status, der::Status::Good | der::Status::Revoked | der::Status::Unknown));
        }
    }
}

/// What an ACME server sends (`tls::acme::wire`): the input as a whole
/// HTTP answer, and as the JSON body of each document (directory, order,
/// authorization, problem). None may panic.
pub fn acme_response(data: &[u8]) {
    crate::tls::acme::wire::fuzz(data);
}

/// A CRL file's DER (`tls::crl`, the reader for what webpki refuses, such
/// as version 1 CRLs) and a chain to check against it: the input is
/// length-prefixed pieces (two bytes, big-endian), the CRL first, then
/// the chain's certificates leaf first. Reading never panics, and the
/// check gives one of OpenSSL's CRL verdicts.
pub fn crl(data: &[u8]) {
    use rustls::pki_types::CertificateRevocationListDer;
    let mut pieces = Vec::new();
    let mut rest = data;
    while let [a, b, tail @ ..] = rest {
        let n = usize::from(u16::from_be_bytes([*a, *b])).min(tail.len());
        pieces.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    let Some((crl, chain)) = pieces.split_first() else { return };
    let der = [CertificateRevocationListDer::from(crl.clone())];
    let _ = crate::tls::crl::webpki_reads(&der);
    let Ok(crls) = crate::tls::crl::Crls::parse(&der) else { return };
    for now in [0, 1_800_000_000, i64::MAX] {
        if let Err(e) = crls.check(chain, now) {
            assert!([3, 11, 12, 23].contains(&e.code), "{e:?}");
        }
    }
}
