//! Password checks for `auth_basic_user_file`, as nginx's `ngx_crypt`:
//! the hash is recomputed from the password and the stored value (its
//! salt and parameters), then compared with the stored value.
//!
//! - `$apr1$` (Apache's MD5), `{PLAIN}`, `{SHA}` and `{SSHA}` are nginx's
//!   own code, ported here (MD5 from `md-5`, SHA-1 from `aws-lc-rs`, both
//!   already dependencies).
//! - Anything else goes to the C library's `crypt()` in nginx; on Debian
//!   that is libxcrypt: traditional DES (13 characters), `$1$` (MD5),
//!   `$5$`/`$6$` (SHA-256/512), bcrypt (`$2a$`, `$2b$`, `$2y$`). These use
//!   the `pwhash` crate, a pure-Rust work-alike of `crypt(3)` covering
//!   exactly these formats behind one call (`pwhash::unix::crypt`), with
//!   no C library and no `unsafe` on our side. Alternatives considered:
//!   `bcrypt` plus `sha-crypt` cover only part of the list (no DES, no
//!   `$1$`), and calling libcrypt would need `unsafe` FFI.
//!
//! A hash `crypt()` cannot handle (an unknown `$id$`, a bad salt) makes
//! libxcrypt return a failure token that never equals the stored value:
//! a password mismatch, and so here.

use md5::{Digest, Md5};

/// Whether `password` matches the stored hash. Both are C strings to
/// nginx: each ends at its first NUL.
pub fn verify(password: &[u8], stored: &[u8]) -> bool {
    let password = cstr(password);
    let stored = cstr(stored);
    let computed = if stored.starts_with(b"$apr1$") {
        apr1(password, stored)
    } else if stored.starts_with(b"{PLAIN}") {
        [&b"{PLAIN}"[..], password].concat()
    } else if stored.starts_with(b"{SSHA}") {
        ssha(password, stored)
    } else if stored.starts_with(b"{SHA}") {
        let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, password);
        format!("{{SHA}}{}", crate::http::proxy::websocket::base64(d.as_ref())).into_bytes()
    } else {
        match libc_crypt(password, stored) {
            Some(c) => c,
            None => return false,
        }
    };
    constant_time_eq(&computed, stored)
}

fn cstr(b: &[u8]) -> &[u8] {
    b.split(|&c| c == 0).next().unwrap_or_default()
}

/// What `crypt()` gives: None where libxcrypt returns a failure token.
fn libc_crypt(password: &[u8], stored: &[u8]) -> Option<Vec<u8>> {
    // crypt(3) settings are printable ASCII; libxcrypt refuses others
    // (and pwhash's decoders would underflow on control characters).
    if !stored.iter().all(|b| b.is_ascii_graphic()) {
        return None;
    }
    let hash = std::str::from_utf8(stored).ok()?;
    // pwhash reads the salt and parameters from text the file controls;
    // a panic there must not take the worker down.
    std::panic::catch_unwind(|| pwhash::unix::crypt(password, hash).ok()).ok().flatten().map(String::into_bytes)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn to64(out: &mut Vec<u8>, mut v: u32, n: usize) {
    for _ in 0..n {
        out.push(ITOA64[(v & 0x3f) as usize]);
        v >>= 6;
    }
}

/// ngx_crypt_apr1: Apache's variant of the FreeBSD MD5 crypt.
fn apr1(key: &[u8], stored: &[u8]) -> Vec<u8> {
    let salt_all = &stored[6..];
    let salt_len = salt_all.iter().take(8).position(|&c| c == b'$').unwrap_or(salt_all.len().min(8));
    let salt = &salt_all[..salt_len];

    let mut md5 = Md5::new();
    md5.update(key);
    md5.update(b"$apr1$");
    md5.update(salt);

    let mut ctx1 = Md5::new();
    ctx1.update(key);
    ctx1.update(salt);
    ctx1.update(key);
    let mut fin: [u8; 16] = ctx1.finalize().into();

    let mut n = key.len();
    while n > 0 {
        md5.update(&fin[..n.min(16)]);
        n = n.saturating_sub(16);
    }
    fin = [0; 16];
    let mut i = key.len();
    while i > 0 {
        if i & 1 == 1 {
            md5.update(&fin[..1]);
        } else {
            md5.update(&key[..1]);
        }
        i >>= 1;
    }
    fin = md5.finalize().into();

    for i in 0..1000 {
        let mut c = Md5::new();
        if i & 1 == 1 {
            c.update(key);
        } else {
            c.update(fin);
        }
        if i % 3 != 0 {
            c.update(salt);
        }
        if i % 7 != 0 {
            c.update(key);
        }
        if i & 1 == 1 {
            c.update(fin);
        } else {
            c.update(key);
        }
        fin = c.finalize().into();
    }

    let f = |i: usize| u32::from(fin[i]);
    let mut out = Vec::with_capacity(6 + salt.len() + 1 + 22);
    out.extend_from_slice(b"$apr1$");
    out.extend_from_slice(salt);
    out.push(b'$');
    to64(&mut out, (f(0) << 16) | (f(6) << 8) | f(12), 4);
    to64(&mut out, (f(1) << 16) | (f(7) << 8) | f(13), 4);
    to64(&mut out, (f(2) << 16) | (f(8) << 8) | f(14), 4);
    to64(&mut out, (f(3) << 16) | (f(9) << 8) | f(15), 4);
    to64(&mut out, (f(4) << 16) | (f(10) << 8) | f(5), 4);
    to64(&mut out, f(11), 2);
    out
}

/// ngx_crypt_ssha: SHA-1 of the password and the salt that follows the
/// 20-byte digest in the stored base64 (none when it does not decode).
fn ssha(key: &[u8], stored: &[u8]) -> Vec<u8> {
    let decoded = super::basic::decode_base64(&stored[6..]).filter(|d| d.len() >= 20).unwrap_or_else(|| vec![0; 20]);
    let salt = &decoded[20..];
    let mut ctx = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(salt);
    let d = ctx.finish();
    let mut raw = d.as_ref().to_vec();
    raw.extend_from_slice(salt);
    format!("{{SSHA}}{}", crate::http::proxy::websocket::base64(&raw)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::verify;

    #[test]
    fn formats() {
        // `htpasswd -bm`, `-bs`, `-bp`, `-bd`, and crypt(3) hashes of "secret".
        assert!(verify(b"secret", b"{PLAIN}secret"));
        assert!(!verify(b"secreT", b"{PLAIN}secret"));
        assert!(verify(b"secret", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(!verify(b"other", b"{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="));
        assert!(verify(b"password", b"$1$5pZSV9va$azfrPr6af3Fc7dLblQXVa0"));
        assert!(verify(b"test", b"aZGJuE6EXrjEE"));
        assert!(!verify(b"test", b"$9$nonsense"));
        assert!(!verify(b"test", b""));
    }

    #[test]
    fn apr1_matches_apache() {
        // openssl passwd -apr1 -salt abcdefgh secret
        assert!(verify(b"secret", b"$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"));
        assert!(!verify(b"Secret", b"$apr1$abcdefgh$h9FWgUz3n9YxylKLlR5SQ/"));
    }
}
