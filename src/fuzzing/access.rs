//! The access module's parsers: the Authorization header decoder, the
//! password-file scanner with the password checks, and `allow`/`deny`
//! addresses.

use super::show;
use crate::http::access::{basic, crypt, rules};

/// `Authorization` values: a decoded header has a non-empty user without
/// `:`, and encoding what was decoded decodes to the same again; the
/// base64 decoder takes its own output's encoding back, and so does the
/// base64url one of `secure_link` checksums, whose other parsers
/// (`secure_link::fuzz`) run on the same bytes.
pub fn authorization(data: &[u8]) {
    if let Some(c) = basic::decode(data) {
        assert!(!c.user.is_empty() && !c.user.contains(&b':'), "{}", show(data));
        let mut joined = c.user.clone();
        joined.push(b':');
        joined.extend_from_slice(&c.password);
        let again = format!("Basic {}", crate::http::proxy::websocket::base64(&joined));
        assert_eq!(basic::decode(again.as_bytes()), Some(c), "{}", show(data));
    }
    if let Some(raw) = basic::decode_base64(data) {
        let enc = crate::http::proxy::websocket::base64(&raw);
        assert_eq!(basic::decode_base64(enc.as_bytes()).as_deref(), Some(&raw[..]), "{}", show(data));
    }
    if let Some(raw) = basic::decode_base64url(data) {
        let enc = crate::http::proxy::websocket::base64(&raw).replace('+', "-").replace('/', "_");
        assert_eq!(basic::decode_base64url(enc.as_bytes()).as_deref(), Some(&raw[..]), "{}", show(data));
    }
    crate::http::access::secure_link::fuzz(data);
}

/// A password file: the input's first line is the user name (and the
/// password), the rest the file. A password found lies inside the file,
/// holds no CR, LF or `:`, and follows `user:`; checking it never panics
/// (formats whose cost the file chooses, bcrypt and SHA-crypt rounds, are
/// skipped to keep runs fast). The same bytes go through the client
/// certificate's name formatting (`tls::client_cert::fuzz`), the other
/// client credential read here.
pub fn htpasswd(data: &[u8]) {
    crate::tls::client_cert::fuzz(data);
    let (user, file) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let Some(found) = basic::find_user(file, user) else { return };
    let start = found.as_ptr() as usize - file.as_ptr() as usize;
    assert!(start + found.len() <= file.len(), "{}", show(data));
    assert!(!found.iter().any(|b| matches!(b, b'\r' | b'\n' | b':')), "{}", show(data));
    assert!(start > user.len() && file[..start].ends_with(&[user, b":"].concat()), "{}", show(data));
    let costly = found.starts_with(b"$") && !found.starts_with(b"$apr1$") && !found.starts_with(b"$1$");
    if !costly {
        let _ = crypt::verify(user, found);
    }
}

/// `allow`/`deny` arguments: a masked address has no bits past its
/// prefix; an IPv4 address `std` reads nginx reads the same (except
/// 255.255.255.255, which nginx refuses); an IPv6 address both read is
/// the same address.
pub fn access_rule(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match rules::parse(text).map(|p| p.target) {
        Some(rules::Target::V4 { addr, mask }) => assert_eq!(addr & mask, addr, "{}", show(data)),
        Some(rules::Target::V6 { addr, mask }) => {
            assert!(addr.iter().zip(mask).all(|(a, m)| a & m == *a), "{}", show(data))
        }
        _ => {}
    }
    if let Ok(v4) = text.parse::<std::net::Ipv4Addr>() {
        let want = (v4 != std::net::Ipv4Addr::BROADCAST).then(|| u32::from(v4));
        assert_eq!(crate::cidr::inet_addr(data), want, "{}", show(data));
    }
    // nginx refuses some forms std reads (`::` for a single group), so
    // only where both read an address must they agree.
    if let (Ok(v6), Some(a)) = (text.parse::<std::net::Ipv6Addr>(), crate::cidr::inet6_addr(data)) {
        assert_eq!(a, v6.octets(), "{}", show(data));
    }
}
