//! OpenSSL's names for what rustls calls by IANA names: `ssl_ciphers`
//! lists and the `$ssl_cipher` / `$ssl_protocol` values operators' log
//! parsers expect from nginx.

use rustls::{CipherSuite, ProtocolVersion};

const SUITES: &[(&str, CipherSuite)] = &[
    ("TLS_AES_128_GCM_SHA256", CipherSuite::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", CipherSuite::TLS13_AES_256_GCM_SHA384),
    ("TLS_CHACHA20_POLY1305_SHA256", CipherSuite::TLS13_CHACHA20_POLY1305_SHA256),
    ("ECDHE-ECDSA-AES128-GCM-SHA256", CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-ECDSA-AES256-GCM-SHA384", CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-ECDSA-CHACHA20-POLY1305", CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ("ECDHE-RSA-AES128-GCM-SHA256", CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ("ECDHE-RSA-AES256-GCM-SHA384", CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ("ECDHE-RSA-CHACHA20-POLY1305", CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
];

pub fn suite_by_openssl_name(name: &str) -> Option<CipherSuite> {
    SUITES.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
}

pub fn openssl_suite_name(s: CipherSuite) -> &'static str {
    SUITES.iter().find(|(_, x)| *x == s).map(|(n, _)| *n).unwrap_or("UNKNOWN")
}

pub fn protocol_name(v: ProtocolVersion) -> &'static str {
    match v {
        ProtocolVersion::TLSv1_3 => "TLSv1.3",
        ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "unknown",
    }
}

/// `$ssl_curve`: OpenSSL's short name of the key exchange group
/// (`OBJ_nid2sn`, so P-256 is "prime256v1").
pub fn group_name(g: rustls::NamedGroup) -> &'static str {
    use rustls::NamedGroup as G;
    match g {
        G::X25519 => "X25519",
        G::X448 => "X448",
        G::secp256r1 => "prime256v1",
        G::secp384r1 => "secp384r1",
        G::secp521r1 => "secp521r1",
        G::X25519MLKEM768 => "X25519MLKEM768",
        G::secp256r1MLKEM768 => "SecP256r1MLKEM768",
        G::MLKEM768 => "MLKEM768",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (n, s) in SUITES {
            assert_eq!(suite_by_openssl_name(n), Some(*s));
            assert_eq!(openssl_suite_name(*s), *n);
        }
        assert_eq!(suite_by_openssl_name("HIGH"), None);
    }
}
