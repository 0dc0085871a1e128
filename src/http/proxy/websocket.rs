//! The HTTP/1.1 side of a WebSocket that arrived as an HTTP/2 extended
//! CONNECT (RFC 8441): the origin gets the Upgrade request an HTTP/1.1
//! client would have sent (`GET`, `Upgrade: websocket`, `Connection:
//! upgrade`, a `Sec-WebSocket-Key` sluice makes up, since an h2 client sends
//! none), and its 101 is checked against that key (RFC 6455 4.1: the
//! accept value must be the key's SHA-1 with the protocol GUID) because
//! sluice is the one that can tell.
//!
//! The request's `$http_upgrade` reads "websocket" and `$http_connection`
//! "upgrade" (the h2 request is seen as its HTTP/1.1 equivalent), so
//! templates and the usual `map $http_upgrade $connection_upgrade` give
//! what they give for an HTTP/1.1 WebSocket. The `Upgrade` and `Connection`
//! fields themselves are the translation's: proxy_set_header lines for them
//! are not used on such a request (nginx's default `Connection: close`
//! would otherwise undo it); every other proxy_set_header applies.

use aws_lc_rs::digest;
use aws_lc_rs::rand::SecureRandom;

use crate::http::field_value::FieldValue;

/// RFC 6455 1.3.
const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// A fresh `Sec-WebSocket-Key`: 16 random bytes in base64. None only if
/// the system's random source fails.
pub fn new_key() -> Option<String> {
    let mut k = [0u8; 16];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut k).ok()?;
    Some(base64(&k))
}

/// The `Sec-WebSocket-Accept` an origin must answer `key` with.
pub fn accept_for(key: &str) -> String {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.as_bytes());
    ctx.update(GUID);
    base64(ctx.finish().as_ref())
}

/// Why an origin's 101 is not a WebSocket handshake for `key`, if it is not.
pub fn check_switch(key: &str, headers: &[(std::borrow::Cow<'_, str>, FieldValue)]) -> Result<(), &'static str> {
    let field = |name: &str| headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_slice());
    let upgrade = field("upgrade").unwrap_or(b"");
    if !upgrade.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"websocket")) {
        return Err("upstream sent no \"Upgrade: websocket\" header in its 101 response");
    }
    match field("sec-websocket-accept") {
        Some(v) if v.trim_ascii() == accept_for(key).as_bytes() => Ok(()),
        _ => Err("upstream sent invalid \"Sec-WebSocket-Accept\" header"),
    }
}

/// Whether a configured `proxy_set_header` field gives way to the
/// translation's own fields on a translated request (`key` set).
pub fn skip_set_header(key: Option<&str>, name: &str) -> bool {
    key.is_some() && ["upgrade", "connection", "sec-websocket-key"].iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// Whether a client field is left out of a translated request (a
/// `Sec-WebSocket-Key` an h2 client should not have sent).
pub fn skip_client_header(key: Option<&str>, name: &[u8]) -> bool {
    key.is_some() && name.eq_ignore_ascii_case(b"sec-websocket-key")
}

/// Appends the translation's Upgrade fields to a request head.
pub fn push_fields(key: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(b"upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-key: ");
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(b"\r\n");
}

pub(crate) fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(c.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(c.get(2).copied().unwrap_or(0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(char::from(T[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn rfc6455_example() {
        // RFC 6455 1.3's worked example.
        assert_eq!(accept_for("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(base64(b"the sample nonce"), "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
    }

    #[test]
    fn keys_are_fresh_base64_of_16_bytes() {
        let (a, b) = (new_key().unwrap(), new_key().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 24);
        assert!(a.ends_with("=="));
    }

    #[test]
    fn switch_is_checked() {
        let key = "dGhlIHNhbXBsZSBub25jZQ==";
        let good = vec![
            (Cow::Borrowed("Upgrade"), FieldValue::from_static(b"WebSocket")),
            (Cow::Borrowed("Sec-WebSocket-Accept"), FieldValue::from_static(b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")),
        ];
        assert!(check_switch(key, &good).is_ok());
        let mut bad = good.clone();
        bad[1].1 = FieldValue::from_static(b"x");
        assert!(check_switch(key, &bad).is_err());
        assert!(check_switch(key, &good[1..]).is_err(), "no Upgrade field");
    }

    #[test]
    fn translation_fields_win() {
        assert!(skip_set_header(Some("K"), "Connection"));
        assert!(!skip_set_header(None, "Connection"));
        assert!(!skip_set_header(Some("K"), "X-Forwarded-For"));
        let mut out = Vec::new();
        push_fields("K", &mut out);
        assert_eq!(out, b"upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-key: K\r\n");
    }
}
