//! Private keys as nginx reads them (`PEM_read_bio_PrivateKey`): plain
//! PEM (PKCS#8, PKCS#1 RSA, SEC1 EC), and keys encrypted with a passphrase
//! from `ssl_password_file`, each passphrase tried in order as nginx's
//! password callback does:
//! - PKCS#8 `ENCRYPTED PRIVATE KEY` with PBES2 (PBKDF2 with HMAC-SHA1/256/
//!   384/512, AES-128/192/256-CBC): what OpenSSL 3 writes for
//!   `openssl genrsa -aes128` and `openssl pkey -aes256`;
//! - OpenSSL's legacy `Proc-Type: 4,ENCRYPTED` PEM with `DEK-Info:
//!   AES-{128,192,256}-CBC` (EVP_BytesToKey with MD5), what `-traditional`
//!   and OpenSSL 1.x write.
//!
//! DES and 3DES (`-des3`) are not implemented: aws-lc-rs does not expose
//! them; such a key gets an error naming the cipher. The DER and PEM read
//! here come from files the configuration names (or a `data:` value), and
//! the parser is fuzzed (`encrypted_key`) all the same.

use std::num::NonZeroU32;

use aws_lc_rs::cipher::{AES_128, AES_192, AES_256, DecryptionContext, PaddedBlockDecryptingKey, UnboundCipherKey};
use aws_lc_rs::iv::FixedLength;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;

use super::der::Der;

/// Why a key did not load; the text follows the key's path in nginx's
/// `cannot load certificate key "PATH": ...`.
#[derive(Debug, PartialEq)]
pub enum KeyError {
    /// No passphrase was given for an encrypted key (OpenSSL: "bad password read").
    NoPassword,
    /// Every passphrase failed (OpenSSL: "bad decrypt").
    BadDecrypt,
    /// Not a key sluice can read, with a reason.
    Invalid(String),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::NoPassword => f.write_str("PEM_read_bio_PrivateKey() failed (bad password read)"),
            KeyError::BadDecrypt => f.write_str("PEM_read_bio_PrivateKey() failed (bad decrypt)"),
            KeyError::Invalid(r) => f.write_str(r),
        }
    }
}

/// PBKDF2 iteration counts above this are refused: a key file is trusted,
/// but a typo'd or hostile count must not stall a handshake's loader for
/// minutes (OpenSSL writes 2048).
const MAX_ITERATIONS: u64 = 10_000_000;

/// Reads the first private key of `pem`, decrypting it with the first of
/// `passwords` that works.
pub fn read_key(pem: &[u8], passwords: &[Vec<u8>]) -> Result<PrivateKeyDer<'static>, KeyError> {
    if let Some(block) = find_block(pem, "ENCRYPTED PRIVATE KEY") {
        let der = base64_decode(block.body).ok_or_else(|| KeyError::Invalid("invalid base64 in PEM".into()))?;
        if passwords.is_empty() {
            return Err(KeyError::NoPassword);
        }
        let enc = parse_pkcs8_encrypted(&der).map_err(KeyError::Invalid)?;
        for p in passwords {
            if let Some(plain) = enc.decrypt(p).filter(|k| looks_like_pkcs8(k)) {
                return Ok(PrivateKeyDer::Pkcs8(plain.into()));
            }
        }
        return Err(KeyError::BadDecrypt);
    }
    for (label, kind) in [("RSA PRIVATE KEY", 1u8), ("EC PRIVATE KEY", 2), ("PRIVATE KEY", 0)] {
        let Some(block) = find_block(pem, label) else { continue };
        let Some(dek) = block.dek_info else { break };
        let der = base64_decode(block.body).ok_or_else(|| KeyError::Invalid("invalid base64 in PEM".into()))?;
        if passwords.is_empty() {
            return Err(KeyError::NoPassword);
        }
        let (alg, iv) = parse_dek_info(dek).map_err(KeyError::Invalid)?;
        for p in passwords {
            let key = evp_bytes_to_key(p, &iv[..8], alg.key_len());
            let Some(plain) = cbc_decrypt(alg, &key, &iv, &der) else { continue };
            // A wrong passphrase unpads correctly one time in 256: the
            // result must also be a DER SEQUENCE spanning the whole.
            if der_whole_sequence(&plain) {
                return Ok(match kind {
                    1 => PrivateKeyDer::Pkcs1(plain.into()),
                    2 => PrivateKeyDer::Sec1(plain.into()),
                    _ => PrivateKeyDer::Pkcs8(plain.into()),
                });
            }
        }
        return Err(KeyError::BadDecrypt);
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
        KeyError::Invalid(match e {
            rustls_pki_types::pem::Error::NoItemsFound => "no PEM data found".into(),
            other => format!("{other:?}"),
        })
    })
}

/// One PEM block: its headers' `DEK-Info` (legacy encryption) and its body.
struct Block<'a> {
    dek_info: Option<&'a str>,
    body: &'a [u8],
}

fn find_block<'a>(pem: &'a [u8], label: &str) -> Option<Block<'a>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = find(pem, begin.as_bytes())? + begin.len();
    let len = find(&pem[start..], end.as_bytes())?;
    let inner = &pem[start..start + len];
    let text = std::str::from_utf8(inner).ok()?;
    let mut dek_info = None;
    let mut body_at = 0;
    // RFC 1421 headers: `Name: value` lines, then an empty line.
    if text.trim_start().starts_with("Proc-Type:") {
        let mut pos = 0;
        for line in text.split_inclusive('\n') {
            pos += line.len();
            let l = line.trim();
            if l.is_empty() && dek_info.is_some() {
                break;
            }
            if let Some(v) = l.strip_prefix("DEK-Info:") {
                dek_info = Some(v.trim());
            }
        }
        body_at = pos;
    }
    Some(Block { dek_info, body: &inner[body_at.min(inner.len())..] })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Standard base64 (padding optional, whitespace skipped).
pub(crate) fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut pad = false;
    for &c in text {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                pad = true;
                continue;
            }
            b' ' | b'\t' | b'\r' | b'\n' => continue,
            _ => return None,
        };
        if pad {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Aes {
    A128,
    A192,
    A256,
}

impl Aes {
    fn key_len(self) -> usize {
        match self {
            Aes::A128 => 16,
            Aes::A192 => 24,
            Aes::A256 => 32,
        }
    }
}

fn cbc_decrypt(alg: Aes, key: &[u8], iv: &[u8; 16], data: &[u8]) -> Option<Vec<u8>> {
    if data.is_empty() || !data.len().is_multiple_of(16) {
        return None;
    }
    let a = match alg {
        Aes::A128 => &AES_128,
        Aes::A192 => &AES_192,
        Aes::A256 => &AES_256,
    };
    let k = PaddedBlockDecryptingKey::cbc_pkcs7(UnboundCipherKey::new(a, key).ok()?).ok()?;
    let mut buf = data.to_vec();
    let n = k.decrypt(&mut buf, DecryptionContext::Iv128(FixedLength::from(*iv))).ok()?.len();
    buf.truncate(n);
    Some(buf)
}

/// OpenSSL's EVP_BytesToKey with MD5 and one round, as legacy PEM uses.
fn evp_bytes_to_key(pass: &[u8], salt: &[u8], len: usize) -> Vec<u8> {
    use md5::Digest;
    let mut out = Vec::with_capacity(len + 16);
    let mut prev: Vec<u8> = Vec::new();
    while out.len() < len {
        let mut h = md5::Md5::new();
        h.update(&prev);
        h.update(pass);
        h.update(salt);
        prev = h.finalize().to_vec();
        out.extend_from_slice(&prev);
    }
    out.truncate(len);
    out
}

fn parse_dek_info(v: &str) -> Result<(Aes, [u8; 16]), String> {
    let (name, iv_hex) = v.split_once(',').ok_or("invalid DEK-Info")?;
    let alg = match name.trim().to_ascii_uppercase().as_str() {
        "AES-128-CBC" => Aes::A128,
        "AES-192-CBC" => Aes::A192,
        "AES-256-CBC" => Aes::A256,
        other => return Err(format!("unsupported key encryption \"{other}\" (sluice reads AES-CBC encrypted keys)")),
    };
    let hex = iv_hex.trim().as_bytes();
    if hex.len() != 32 {
        return Err("invalid DEK-Info IV".into());
    }
    let mut iv = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).map_err(|_| "invalid DEK-Info IV")?;
        iv[i] = u8::from_str_radix(s, 16).map_err(|_| "invalid DEK-Info IV")?;
    }
    Ok((alg, iv))
}

// --- DER, just enough for EncryptedPrivateKeyInfo (RFC 5958, RFC 8018) ---

fn der_whole_sequence(b: &[u8]) -> bool {
    let mut d = Der(b);
    matches!(d.next_item(), Some((0x30, _))) && d.is_empty()
}

fn looks_like_pkcs8(b: &[u8]) -> bool {
    // PrivateKeyInfo ::= SEQUENCE { version INTEGER, algorithm SEQUENCE, key OCTET STRING, ... }
    let mut d = Der(b);
    let Some((0x30, inner)) = d.next_item() else { return false };
    if !d.is_empty() {
        return false;
    }
    let mut i = Der(inner);
    matches!(i.next_item(), Some((0x02, _)))
        && matches!(i.next_item(), Some((0x30, _)))
        && matches!(i.next_item(), Some((0x04, _)))
}

const OID_PBES2: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0d];
const OID_PBKDF2: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x05, 0x0c];
const OID_HMAC_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x07];
const OID_HMAC_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x09];
const OID_HMAC_SHA384: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x0a];
const OID_HMAC_SHA512: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x02, 0x0b];
const OID_AES128_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x02];
const OID_AES192_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x16];
const OID_AES256_CBC: &[u8] = &[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x01, 0x2a];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prf {
    Sha1,
    Sha256,
    Sha384,
    Sha512,
}

/// An `EncryptedPrivateKeyInfo` with PBES2, read but not yet decrypted.
#[derive(Debug)]
pub struct Pkcs8Encrypted<'a> {
    pub salt: &'a [u8],
    pub iterations: u32,
    pub prf: Prf,
    pub cipher: Aes,
    pub iv: [u8; 16],
    pub data: &'a [u8],
}

fn uint(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 9 || b[0] & 0x80 != 0 {
        return None;
    }
    let b = if b.len() == 9 && b[0] == 0 { &b[1..] } else { b };
    if b.len() > 8 {
        return None;
    }
    Some(b.iter().fold(0u64, |n, &x| (n << 8) | u64::from(x)))
}

/// Parses an `EncryptedPrivateKeyInfo` (PBES2 only: PKCS#12's PBE
/// schemes, `-v1`, are refused with a reason).
pub fn parse_pkcs8_encrypted(der: &[u8]) -> Result<Pkcs8Encrypted<'_>, String> {
    let bad = || "invalid encrypted private key (DER)".to_string();
    let mut top = Der(Der(der).expect(0x30).ok_or_else(bad)?);
    let mut alg = Der(top.expect(0x30).ok_or_else(bad)?);
    let data = top.expect(0x04).ok_or_else(bad)?;
    if alg.expect(0x06).ok_or_else(bad)? != OID_PBES2 {
        return Err("unsupported key encryption (sluice reads PBES2 with AES-CBC)".into());
    }
    let mut params = Der(alg.expect(0x30).ok_or_else(bad)?);
    let mut kdf = Der(params.expect(0x30).ok_or_else(bad)?);
    let mut enc = Der(params.expect(0x30).ok_or_else(bad)?);
    if kdf.expect(0x06).ok_or_else(bad)? != OID_PBKDF2 {
        return Err("unsupported key derivation (sluice reads PBKDF2)".into());
    }
    let mut kp = Der(kdf.expect(0x30).ok_or_else(bad)?);
    let salt = kp.expect(0x04).ok_or_else(bad)?;
    let iterations =
        uint(kp.expect(0x02).ok_or_else(bad)?).filter(|&n| n > 0 && n <= MAX_ITERATIONS).ok_or_else(bad)? as u32;
    let mut prf = Prf::Sha1;
    let mut key_len = None;
    while let Some((tag, body)) = kp.next_item() {
        match tag {
            0x02 => key_len = Some(uint(body).ok_or_else(bad)?),
            0x30 => {
                prf = match Der(body).expect(0x06).ok_or_else(bad)? {
                    OID_HMAC_SHA1 => Prf::Sha1,
                    OID_HMAC_SHA256 => Prf::Sha256,
                    OID_HMAC_SHA384 => Prf::Sha384,
                    OID_HMAC_SHA512 => Prf::Sha512,
                    _ => return Err("unsupported PBKDF2 hash".into()),
                }
            }
            _ => return Err(bad()),
        }
    }
    let cipher = match enc.expect(0x06).ok_or_else(bad)? {
        OID_AES128_CBC => Aes::A128,
        OID_AES192_CBC => Aes::A192,
        OID_AES256_CBC => Aes::A256,
        _ => return Err("unsupported key encryption (sluice reads AES-CBC encrypted keys)".into()),
    };
    if key_len.is_some_and(|n| n != cipher.key_len() as u64) {
        return Err(bad());
    }
    let iv: [u8; 16] = enc.expect(0x04).ok_or_else(bad)?.try_into().map_err(|_| bad())?;
    Ok(Pkcs8Encrypted { salt, iterations, prf, cipher, iv, data })
}

impl Pkcs8Encrypted<'_> {
    /// The PKCS#8 plaintext under `password`, None when it does not decrypt.
    pub fn decrypt(&self, password: &[u8]) -> Option<Vec<u8>> {
        use aws_lc_rs::pbkdf2;
        let alg = match self.prf {
            Prf::Sha1 => pbkdf2::PBKDF2_HMAC_SHA1,
            Prf::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Prf::Sha384 => pbkdf2::PBKDF2_HMAC_SHA384,
            Prf::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        };
        let mut key = vec![0u8; self.cipher.key_len()];
        pbkdf2::derive(alg, NonZeroU32::new(self.iterations)?, self.salt, password, &mut key);
        cbc_decrypt(self.cipher, &key, &self.iv, self.data)
    }
}

/// `ssl_password_file`'s passphrases: one a line (LF or CRLF), empty lines
/// skipped, as nginx's `ngx_ssl_read_password_file` reads them.
pub fn parse_password_file(content: &[u8]) -> Vec<Vec<u8>> {
    content.split(|&b| b == b'\n' || b == b'\r').filter(|l| !l.is_empty()).map(|l| l.to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_md5_kdf() {
        assert_eq!(base64_decode(b"aGVs\nbG8=").unwrap(), b"hello");
        assert!(base64_decode(b"a=b").is_none());
        // openssl enc -aes-128-cbc -P -S 0001020304050607 -pass pass:x -md md5
        let k = evp_bytes_to_key(b"x", &[0, 1, 2, 3, 4, 5, 6, 7], 16);
        assert_eq!(k.len(), 16);
    }

    #[test]
    fn passwords_by_line() {
        assert_eq!(parse_password_file(b"wrong\r\nright\r\n"), vec![b"wrong".to_vec(), b"right".to_vec()]);
        assert_eq!(parse_password_file(b"one"), vec![b"one".to_vec()]);
    }

    #[test]
    fn der_bounds() {
        assert!(parse_pkcs8_encrypted(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(parse_pkcs8_encrypted(&[]).is_err());
        assert!(parse_pkcs8_encrypted(&[0x30, 0x02, 0x30, 0x00]).is_err());
    }
}
