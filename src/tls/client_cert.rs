//! The client certificate's variables, as nginx (OpenSSL) formats them:
//! `$ssl_client_s_dn` and `$ssl_client_i_dn` (RFC 2253: the last RDN
//! first, `,` between RDNs and `+` inside one, short attribute names,
//! `\,` `\+` `\"` `\\` `\<` `\>` `\;` and a leading `#`/space or a trailing
//! space escaped, control and non-ASCII bytes as `\XX` of their UTF-8;
//! unknown attributes and string types as `OID=#` and the DER in hex),
//! `$ssl_client_serial` (upper-case hex), `$ssl_client_fingerprint` (SHA-1
//! of the DER, lower-case hex), `$ssl_client_raw_cert` (PEM),
//! `$ssl_client_escaped_cert` (PEM, URI-escaped), `$ssl_client_cert` (PEM
//! folded with tabs) and the validity (`_v_start`, `_v_end`, `_v_remain`).
//!
//! The certificate's DER is walked here, every length checked against
//! what is left, for any version (webpki parses version 3 only, and
//! `openssl req -x509` without extensions makes version 1). The subject's
//! commonNames and the subjectAltName's DNS names serve the origin's name
//! check (`origin_verify`).

use rustls_pki_types::CertificateDer;

/// One DER element: tag, contents, what follows.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        (rest[..n].iter().fold(0usize, |l, &b| l << 8 | usize::from(b)), &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// An OID's dotted form.
fn oid(der: &[u8]) -> Option<String> {
    let (&first, rest) = der.split_first()?;
    let mut out = format!("{}.{}", first / 40, first % 40);
    let mut n: u64 = 0;
    for &b in rest {
        n = n.checked_mul(128)? | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            out.push_str(&format!(".{n}"));
            n = 0;
        }
    }
    Some(out)
}

/// OpenSSL's short names for the attributes certificates use.
fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.4" => "SN",
        "2.5.4.5" => "serialNumber",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "street",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.12" => "title",
        "2.5.4.13" => "description",
        "2.5.4.15" => "businessCategory",
        "2.5.4.17" => "postalCode",
        "2.5.4.41" => "name",
        "2.5.4.42" => "GN",
        "2.5.4.43" => "initials",
        "2.5.4.44" => "generationQualifier",
        "2.5.4.46" => "dnQualifier",
        "2.5.4.65" => "pseudonym",
        "2.5.4.97" => "organizationIdentifier",
        "1.2.840.113549.1.9.1" => "emailAddress",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.3.6.1.4.1.311.60.2.1.1" => "jurisdictionL",
        "1.3.6.1.4.1.311.60.2.1.2" => "jurisdictionST",
        "1.3.6.1.4.1.311.60.2.1.3" => "jurisdictionC",
        _ => return None,
    })
}

fn hex_upper(bytes: &[u8], out: &mut String) {
    for b in bytes {
        out.push_str(&format!("{b:02X}"));
    }
}

/// A string value in UTF-8 (None: a type OpenSSL dumps as DER).
fn text(tag: u8, v: &[u8]) -> Option<String> {
    match tag {
        // UTF8String, NumericString, PrintableString, IA5String, VisibleString
        0x0c | 0x12 | 0x13 | 0x16 | 0x1a => Some(String::from_utf8_lossy(v).into_owned()),
        // T61String: OpenSSL reads it as Latin-1.
        0x14 => Some(v.iter().map(|&b| char::from(b)).collect()),
        // BMPString (UCS-2) and UniversalString (UCS-4), big-endian.
        0x1e if v.len().is_multiple_of(2) => {
            char::decode_utf16(v.chunks(2).map(|c| u16::from(c[0]) << 8 | u16::from(c[1])))
                .collect::<Result<String, _>>()
                .ok()
        }
        0x1c if v.len().is_multiple_of(4) => v
            .chunks(4)
            .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
            .collect::<Option<String>>(),
        _ => None,
    }
}

/// RFC 2253 escaping of one value, as OpenSSL's ASN1_STRFLGS_RFC2253.
fn escape(v: &str, out: &mut String) {
    let bytes = v.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let edge = (i == 0 && (b == b'#' || b == b' ')) || (i + 1 == bytes.len() && b == b' ');
        if edge || b",+\"\\<>;".contains(&b) {
            out.push('\\');
            out.push(char::from(b));
        } else if !(0x20..0x7f).contains(&b) {
            out.push_str(&format!("\\{b:02X}"));
        } else {
            out.push(char::from(b));
        }
    }
}

/// A Name's contents (webpki's `subject()`/`issuer()`) as RFC 2253.
/// One attribute of a Name: its RDN's number, OID, value's tag and
/// contents, and the value's whole DER.
struct Attr<'a> {
    set: usize,
    oid: String,
    tag: u8,
    value: &'a [u8],
    der: &'a [u8],
}

/// A Name's attributes in DER order (None: not a well-formed Name).
fn attrs(name: &[u8]) -> Option<Vec<Attr<'_>>> {
    let mut out = Vec::new();
    let mut rest = name;
    let mut set_no = 0;
    while !rest.is_empty() {
        let (tag, set, after) = tlv(rest)?;
        if tag != 0x31 {
            return None;
        }
        rest = after;
        set_no += 1;
        let mut inner = set;
        while !inner.is_empty() {
            let (tag, atv, after) = tlv(inner)?;
            if tag != 0x30 {
                return None;
            }
            inner = after;
            let (otag, oid_der, value) = tlv(atv)?;
            if otag != 0x06 {
                return None;
            }
            let (vtag, v, tail) = tlv(value)?;
            let der = &value[..value.len() - tail.len()];
            out.push(Attr { set: set_no, oid: oid(oid_der)?, tag: vtag, value: v, der });
        }
    }
    Some(out)
}

/// Joins formatted attributes: `between_sets` between RDNs, `+` inside one.
fn join_attrs(parts: impl Iterator<Item = (usize, String)>, between_sets: &str, lead: &str) -> String {
    let mut out = String::new();
    let mut prev = None;
    for (set, s) in parts {
        match prev {
            Some(p) if p == set => out.push('+'),
            Some(_) => out.push_str(between_sets),
            None => out.push_str(lead),
        }
        out.push_str(&s);
        prev = Some(set);
    }
    out
}

pub fn rfc2253(name: &[u8]) -> Option<String> {
    let parts = attrs(name)?.into_iter().map(|a| {
        let mut s = String::new();
        match (short_name(&a.oid), text(a.tag, a.value)) {
            (Some(sn), Some(t)) => {
                s.push_str(sn);
                s.push('=');
                escape(&t, &mut s);
            }
            (sn, _) => {
                s.push_str(sn.unwrap_or(&a.oid));
                s.push_str("=#");
                hex_upper(a.der, &mut s);
            }
        }
        (a.set, s)
    });
    // OpenSSL's XN_FLAG_DN_REV reverses the attributes one by one, so a
    // multi-valued RDN's order flips too.
    Some(join_attrs(parts.collect::<Vec<_>>().into_iter().rev(), ",", ""))
}

/// `$ssl_client_s_dn_legacy`: OpenSSL's X509_NAME_oneline (`/C=DE/O=Ex`),
/// in DER order, the value's bytes as they are, those outside printable
/// ASCII as `\xXX`; a BMPString or UniversalString of Latin-1 only is
/// narrowed to its low bytes first, as OpenSSL does.
pub fn oneline(name: &[u8]) -> Option<String> {
    let parts = attrs(name)?.into_iter().map(|a| {
        let mut s = String::from(short_name(&a.oid).unwrap_or(&a.oid));
        s.push('=');
        let width = match a.tag {
            0x1e => 2,
            0x1c => 4,
            _ => 1,
        };
        let narrow = width > 1
            && a.value.len() % width == 0
            && a.value.chunks(width).all(|c| c[..width - 1].iter().all(|&b| b == 0));
        let bytes: Vec<u8> =
            if narrow { a.value.chunks(width).map(|c| c[width - 1]).collect() } else { a.value.to_vec() };
        for b in bytes {
            if (0x20..=0x7e).contains(&b) {
                s.push(char::from(b));
            } else {
                s.push_str(&format!("\\x{b:02X}"));
            }
        }
        (a.set, s)
    });
    Some(join_attrs(parts, "/", "/"))
}

/// The values of one client certificate that the variables read.
pub struct Names {
    pub subject: String,
    pub issuer: String,
    pub serial: String,
    pub subject_legacy: String,
    pub issuer_legacy: String,
}

/// The names and serial of a certificate of any version (webpki parses
/// version 3 only; `openssl req -x509` without extensions makes version 1).
pub fn names(cert: &CertificateDer<'_>) -> Option<Names> {
    let (f, _) = tbs_fields(cert.as_ref())?;
    let (subject, issuer) = (f[4].1, f[2].1);
    let mut serial = String::new();
    let s = f[0].1;
    // DER's sign byte is not part of the number OpenSSL prints.
    let s = if s.len() > 1 && s[0] == 0 { &s[1..] } else { s };
    hex_upper(s, &mut serial);
    Some(Names {
        subject: rfc2253(subject)?,
        issuer: rfc2253(issuer)?,
        serial,
        subject_legacy: oneline(subject)?,
        issuer_legacy: oneline(issuer)?,
    })
}

/// The subject's commonName values as text: the names OpenSSL's host
/// check (`X509_check_host`) reads when the certificate has no DNS name
/// in a subjectAltName.
pub fn common_names(cert: &CertificateDer<'_>) -> Vec<String> {
    name_cns(cert, 4)
}

/// The issuer's commonName values: ACME's `preferred_chain` names a chain
/// by the issuer of its topmost certificate.
pub fn issuer_common_names(cert: &CertificateDer<'_>) -> Vec<String> {
    name_cns(cert, 2)
}

/// The commonName values of the Name in TBS field `field` (2 issuer, 4
/// subject).
fn name_cns(cert: &CertificateDer<'_>, field: usize) -> Vec<String> {
    let Some((f, _)) = tbs_fields(cert.as_ref()) else { return Vec::new() };
    let Some(attrs) = attrs(f[field].1) else { return Vec::new() };
    attrs.iter().filter(|a| a.oid == "2.5.4.3").filter_map(|a| text(a.tag, a.value)).collect()
}

/// The dNSName entries of the subjectAltName extension (none in a
/// version 1 certificate).
pub fn dns_names(cert: &CertificateDer<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let Some((_, mut rest)) = tbs_fields(cert.as_ref()) else { return out };
    // issuerUniqueID [1], subjectUniqueID [2], then extensions [3].
    while let Some((tag, v, after)) = tlv(rest) {
        rest = after;
        if tag != 0xa3 {
            continue;
        }
        let Some((0x30, mut exts, _)) = tlv(v) else { return out };
        while let Some((_, ext, after)) = tlv(exts) {
            exts = after;
            let Some((0x06, id, mut body)) = tlv(ext) else { continue };
            if id != [0x55, 0x1d, 0x11] {
                continue;
            }
            // An optional `critical` BOOLEAN before the OCTET STRING.
            if body.first() == Some(&0x01) {
                body = tlv(body).map_or(&[][..], |t| t.2);
            }
            let Some((0x04, octets, _)) = tlv(body) else { continue };
            let Some((0x30, mut names, _)) = tlv(octets) else { continue };
            while let Some((tag, name, after)) = tlv(names) {
                names = after;
                if tag == 0x82 {
                    out.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
    }
    out
}

/// SHA-1 of the DER, lower-case hex (`$ssl_client_fingerprint`).
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, cert.as_ref());
    d.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A certificate time as OpenSSL's ASN1_TIME_print writes it
/// (`Nov  5 14:06:00 2026 GMT`), and in Unix seconds.
pub struct CertTime {
    pub text: String,
    pub unix: i64,
}

/// One DER element as (tag, contents, the whole element).
type Field<'a> = (u8, &'a [u8], &'a [u8]);

/// The TBSCertificate's first six fields after the optional version
/// (serial, signature algorithm, issuer, validity, subject,
/// subjectPublicKeyInfo), each as (tag, contents, whole element). A
/// version 1 certificate has no version field, which is why this walk is
/// here and not webpki's: webpki parses version 3 only.
fn tbs_fields(cert: &[u8]) -> Option<([Field<'_>; 6], &[u8])> {
    let (_, c, _) = tlv(cert).filter(|(t, _, _)| *t == 0x30)?;
    let (_, tbs, _) = tlv(c).filter(|(t, _, _)| *t == 0x30)?;
    let mut rest = tbs;
    if rest.first() == Some(&0xa0) {
        rest = tlv(rest)?.2;
    }
    let mut out = [(0u8, &[][..], &[][..]); 6];
    for (slot, want) in out.iter_mut().zip([0x02, 0x30, 0x30, 0x30, 0x30, 0x30]) {
        let (tag, v, after) = tlv(rest).filter(|(t, _, _)| *t == want)?;
        *slot = (tag, v, &rest[..rest.len() - after.len()]);
        rest = after;
    }
    Some((out, rest))
}

/// notBefore and notAfter.
pub fn validity(cert: &CertificateDer<'_>) -> Option<(CertTime, CertTime)> {
    let (_, v, _) = tbs_fields(cert.as_ref())?.0[3];
    let (t1, a, after) = tlv(v)?;
    let (t2, b, _) = tlv(after)?;
    Some((cert_time(t1, a)?, cert_time(t2, b)?))
}

/// The subjectPublicKeyInfo element, whole (what a private key's public
/// half is compared with), of any certificate version.
pub fn spki<'a>(cert: &'a CertificateDer<'_>) -> Option<&'a [u8]> {
    Some(tbs_fields(cert.as_ref())?.0[5].2)
}

pub(crate) fn cert_time(tag: u8, v: &[u8]) -> Option<CertTime> {
    let digits = v.strip_suffix(b"Z")?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> { std::str::from_utf8(digits.get(r)?).ok()?.parse().ok() };
    let (year, at) = match (tag, digits.len()) {
        // UTCTime: YYMMDDHHMMSS, years 50-99 in the 1900s.
        (0x17, 12) => (num(0..2).map(|y| if y >= 50 { 1900 + y } else { 2000 + y })?, 2),
        // GeneralizedTime: YYYYMMDDHHMMSS.
        (0x18, 14) => (num(0..4)?, 4),
        _ => return None,
    };
    let (mon, day) = (num(at..at + 2)?, num(at + 2..at + 4)?);
    let (h, m, s) = (num(at + 4..at + 6)?, num(at + 6..at + 8)?, num(at + 8..at + 10)?);
    let date = chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, mon, day)?;
    let unix = date.and_hms_opt(h, m, s)?.and_utc().timestamp();
    let month: &[u8] = *crate::http::date::MONTHS.get(usize::try_from(mon).ok()?.checked_sub(1)?)?;
    let name = std::str::from_utf8(month).ok()?;
    Some(CertTime { text: format!("{name} {day:2} {h:02}:{m:02}:{s:02} {year} GMT"), unix })
}

/// nginx's `$ssl_client_cert`: the PEM without its last line end, every
/// other line end followed by a tab (a header value that folds).
pub fn folded_pem(cert: &CertificateDer<'_>) -> String {
    let pem = pem(cert);
    pem.strip_suffix('\n').unwrap_or(&pem).replace('\n', "\n\t")
}

/// The certificate in PEM (`$ssl_client_raw_cert`).
pub fn pem(cert: &CertificateDer<'_>) -> String {
    let b64 = crate::http::proxy::websocket::base64(cert.as_ref());
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// One of the certificate's variables; nothing when it cannot be read.
pub fn var(c: &CertificateDer<'_>, which: crate::variables::ClientCertVar, out: &mut Vec<u8>) {
    use crate::variables::ClientCertVar as V;
    match which {
        V::SubjectDn | V::IssuerDn | V::SubjectDnLegacy | V::IssuerDnLegacy | V::Serial => {
            if let Some(n) = names(c) {
                let v = match which {
                    V::SubjectDn => n.subject,
                    V::IssuerDn => n.issuer,
                    V::SubjectDnLegacy => n.subject_legacy,
                    V::IssuerDnLegacy => n.issuer_legacy,
                    _ => n.serial,
                };
                out.extend_from_slice(v.as_bytes());
            }
        }
        V::Fingerprint => out.extend_from_slice(fingerprint(c).as_bytes()),
        V::RawCert => out.extend_from_slice(pem(c).as_bytes()),
        V::EscapedCert => crate::http::uri::escape_uri_component(pem(c).as_bytes(), out),
        V::Cert => out.extend_from_slice(folded_pem(c).as_bytes()),
        V::Start | V::End | V::Remain => {
            let Some((start, end)) = validity(c) else { return };
            match which {
                V::Start => out.extend_from_slice(start.text.as_bytes()),
                V::End => out.extend_from_slice(end.text.as_bytes()),
                // nginx: whole days left, 0 within the last day.
                _ => {
                    let left = end.unix - crate::clock::now_secs() as i64;
                    crate::http::date::push_u64(out, if left < 86400 { 0 } else { (left / 86400) as u64 })
                }
            }
        }
    }
}

/// For the `htpasswd` fuzz target (client credentials): a name's DER
/// never panics the formatter, and what it gives has no raw control byte.
pub fn fuzz(data: &[u8]) {
    if let Some(s) = rfc2253(data) {
        assert!(!s.bytes().any(|b| b < 0x20), "{s:?}");
    }
    if let Some(s) = oneline(data) {
        assert!(s.bytes().all(|b| (0x20..=0x7e).contains(&b)), "{s:?}");
    }
    let _ = names(&CertificateDer::from(data));
    let _ = validity(&CertificateDer::from(data));
    let _ = common_names(&CertificateDer::from(data));
    let _ = dns_names(&CertificateDer::from(data));
    let der = CertificateDer::from(data);
    if let Some(k) = spki(&der) {
        // The element lies inside the input and is one whole SEQUENCE.
        assert!(k.len() >= 2 && k[0] == 0x30 && data.windows(k.len()).any(|w| w == k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -x509` with a critical subjectAltName (two DNS names
    /// and an IP) and CN=no.match.example.com; and one without extensions
    /// (version 1, CN=2.example.com). Both are in the fuzz corpus.
    const SAN: &[u8] = include_bytes!("../../fuzz/corpus/htpasswd/4b07a00a3d32b89fa8801bb55c5c706ea9de817a");
    const V1: &[u8] = include_bytes!("../../fuzz/corpus/htpasswd/655c50244f6eb50f859718f43aa6d8944dffff47");

    #[test]
    fn names_of_version_1_and_3_certificates() {
        let san = CertificateDer::from(SAN);
        assert_eq!(dns_names(&san), ["example.com", "*.example.com"]);
        assert_eq!(common_names(&san), ["no.match.example.com"]);
        let v1 = CertificateDer::from(V1);
        assert!(dns_names(&v1).is_empty());
        assert_eq!(common_names(&v1), ["2.example.com"]);
        let n = names(&v1).expect("a version 1 certificate's names");
        assert_eq!((n.subject.as_str(), n.issuer.as_str()), ("CN=2.example.com", "CN=2.example.com"));
        assert_eq!(n.subject_legacy, "/CN=2.example.com");
        assert!(validity(&v1).is_some() && spki(&v1).is_some());
    }

    #[test]
    fn escaping_as_openssl_rfc2253() {
        let mut s = String::new();
        escape(" a,b+c\"d\\e<f>g;h#\u{fc}\u{1} ", &mut s);
        assert_eq!(s, "\\ a\\,b\\+c\\\"d\\\\e\\<f\\>g\\;h#\\C3\\BC\\01\\ ");
        let mut s = String::new();
        escape("#x", &mut s);
        assert_eq!(s, "\\#x");
    }

    #[test]
    fn names_in_reverse_with_multi_valued_rdns() {
        // C=DE, O=Ex, OU=a + CN=b (UTF8), 1.2.3=PrintableString ""
        let der: &[u8] = &[
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x06, 0x13, 0x02, b'D', b'E', //
            0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x0a, 0x0c, 0x02, b'E', b'x', //
            0x31, 0x14, 0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x0b, 0x0c, 0x01, b'a', //
            0x30, 0x08, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x01, b'b', //
            0x31, 0x08, 0x30, 0x06, 0x06, 0x02, 0x2a, 0x03, 0x13, 0x00,
        ];
        assert_eq!(rfc2253(der).as_deref(), Some("1.2.3=#1300,CN=b+OU=a,O=Ex,C=DE"));
        assert_eq!(rfc2253(&der[..10]), None, "cut short");
    }
}
