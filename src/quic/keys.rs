//! The secrets behind stateless resets and address-validation tokens
//! (Retry and NEW_TOKEN): derived from `quic_host_key` when given, else
//! from a random secret made once per process. Every worker and every
//! configuration generation derive the same keys, so a token issued by one
//! worker is accepted by any other and after a reload (nginx makes a new
//! random key on each reload); with `quic_host_key`, also by a restarted
//! process.

use std::sync::{Arc, OnceLock};

use aws_lc_rs::{hkdf, hmac};

fn process_secret() -> &'static [u8; 32] {
    static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
    SECRET.get_or_init(|| {
        let mut b = [0u8; 32];
        let _ = aws_lc_rs::rand::fill(&mut b);
        b
    })
}

fn derive(host_key: Option<&[u8]>, label: &[u8]) -> Vec<u8> {
    let secret: &[u8] = host_key.unwrap_or(process_secret());
    let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"sluice quic").extract(secret);
    let mut out = vec![0u8; 32];
    let info = [label];
    // Cannot fail for a 32-byte output of SHA-256's HKDF; the secret
    // itself would do as a key then.
    match prk.expand(&info, hkdf::HKDF_SHA256).map(|okm| okm.fill(&mut out)) {
        Ok(Ok(())) => out,
        _ => secret.to_vec(),
    }
}

/// The key stateless reset tokens are computed with.
pub fn reset_key(host_key: Option<&[u8]>) -> Arc<dyn quinn::crypto::HmacKey> {
    Arc::new(hmac::Key::new(hmac::HMAC_SHA256, &derive(host_key, b"stateless reset")))
}

/// The key Retry and NEW_TOKEN tokens are sealed with.
pub fn token_key(host_key: Option<&[u8]>) -> Arc<dyn quinn::crypto::HandshakeTokenKey> {
    Arc::new(hkdf::Salt::new(hkdf::HKDF_SHA256, b"sluice quic tokens").extract(&derive(host_key, b"tokens")))
}
