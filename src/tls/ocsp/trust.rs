//! OpenSSL's trust settings in `ssl_trusted_certificate`: a `TRUSTED
//! CERTIFICATE` PEM block (`openssl x509 -addtrust OCSPSigning`) is the
//! certificate followed by an `X509_CERT_AUX` structure listing the
//! purposes it is trusted and rejected for. nginx's stapling check
//! (`OCSP_basic_verify`) accepts a responder that neither is the issuer
//! nor holds its delegation when the responder's chain ends at a root
//! trusted this way for OCSP signing; a root without trust settings does
//! not count (OpenSSL 3's `X509_check_trust` finds it untrusted). The file
//! comes from the configuration, but is read with the same bounds-checked
//! DER reader as everything else and fuzzed (`ocsp_response`).

use super::der::Der;

const OID_KP_OCSP_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x09];
const OID_ANY_EKU: &[u8] = &[0x55, 0x1d, 0x25, 0x00];

/// Every certificate of a PEM text (`CERTIFICATE` and `TRUSTED
/// CERTIFICATE` blocks, as OpenSSL reads a trust file), each with whether
/// its trust settings make it a root for OCSP signing.
pub fn certificates(pem: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let text = String::from_utf8_lossy(pem);
    let mut out = Vec::new();
    let mut rest = text.as_ref();
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after = &rest[begin + 11..];
        let Some(label_end) = after.find("-----") else { break };
        let label = &after[..label_end];
        let body = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body.find(&end_marker) else { break };
        rest = &body[end + end_marker.len()..];
        let trusted = match label {
            "CERTIFICATE" | "X509 CERTIFICATE" => false,
            "TRUSTED CERTIFICATE" => true,
            _ => continue,
        };
        let b64: Vec<u8> = body[..end].bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        let Some(der) = crate::tls::keyfile::base64_decode(&b64) else { continue };
        let mut d = Der(&der);
        let Some((0x30, _, cert)) = d.next_raw() else { continue };
        let for_ocsp = trusted && d.next_item().is_some_and(|(t, aux)| t == 0x30 && ocsp_signing_trusted(aux));
        out.push((cert.to_vec(), for_ocsp));
    }
    out
}

/// Whether an `X509_CERT_AUX`'s contents trust OCSP signing (the purpose
/// itself, or any purpose) and do not reject it.
fn ocsp_signing_trusted(aux: &[u8]) -> bool {
    let mut a = Der(aux);
    let has = |list: Option<&[u8]>| {
        let mut l = Der(list.unwrap_or(&[]));
        let mut found = false;
        while let Some(oid) = l.expect(0x06) {
            found |= oid == OID_KP_OCSP_SIGNING || oid == OID_ANY_EKU;
        }
        found
    };
    let trust = a.optional(0x30);
    let reject = a.optional(0xa0);
    has(trust) && !has(reject)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag, body.len() as u8];
        v.extend_from_slice(body);
        v
    }

    fn pem(label: &str, der: &[u8]) -> String {
        crate::tls::acme::jws::pem(label, der)
    }

    #[test]
    fn trust_settings_for_ocsp_signing() {
        let cert = tlv(0x30, &tlv(0x30, b"tbs"));
        let ocsp = tlv(0x06, OID_KP_OCSP_SIGNING);
        let server_auth = tlv(0x06, &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01]);
        let trusted = [cert.clone(), tlv(0x30, &tlv(0x30, &ocsp))].concat();
        let other = [cert.clone(), tlv(0x30, &tlv(0x30, &server_auth))].concat();
        let rejected = [cert.clone(), tlv(0x30, &[tlv(0x30, &ocsp), tlv(0xa0, &ocsp)].concat())].concat();
        let text = [
            pem("CERTIFICATE", &cert),
            pem("TRUSTED CERTIFICATE", &trusted),
            pem("TRUSTED CERTIFICATE", &other),
            pem("TRUSTED CERTIFICATE", &rejected),
            pem("PRIVATE KEY", b"skipped"),
        ]
        .concat();
        let got: Vec<bool> = certificates(text.as_bytes())
            .into_iter()
            .map(|(c, t)| {
                assert_eq!(c, cert);
                t
            })
            .collect();
        assert_eq!(got, [false, true, false, false]);
        assert!(certificates(b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n").is_empty());
        assert!(certificates(b"-----BEGIN TRUSTED CERTIFICATE-----\nAAAA\n").is_empty());
    }
}
