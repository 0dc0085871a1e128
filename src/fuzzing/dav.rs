//! The WebDAV request headers (`http/dav/headers`): `Destination`,
//! `Depth`, `Overwrite`, and the destination's path through the
//! subrequest URI check that COPY and MOVE apply to it.

use crate::http::dav::headers::{self, Depth};

/// Input: `HOST \n VALUE`; the first byte's low bit says TLS.
pub fn dav_headers(data: &[u8]) {
    let tls = data.first().is_some_and(|b| b & 1 == 1);
    let rest = data.get(1..).unwrap_or(b"");
    let (host, value) = match rest.iter().position(|&b| b == b'\n') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (&b""[..], rest),
    };
    match headers::destination(value, host, tls) {
        Ok(path) => {
            // A suffix of the value that starts with '/', past the scheme
            // and the host when absolute.
            assert_eq!(path.first(), Some(&b'/'));
            assert!(value.ends_with(path));
            if value.first() != Some(&b'/') {
                let scheme: &[u8] = if tls { b"https://" } else { b"http://" };
                assert!(value.starts_with(scheme) && value[scheme.len()..].starts_with(host));
                assert!(!host.is_empty() && path.len() <= value.len() - scheme.len() - host.len());
            }
            // A path the URI check takes never climbs above the root.
            if let Some((p, _)) = crate::http::handler::subrequest::parse_uri(path) {
                assert!(p.first() == Some(&b'/') && !p.split(|&b| b == b'/').any(|s| s == b".."));
            }
        }
        Err(_) => assert!(value.first() != Some(&b'/')),
    }
    let d = headers::depth(Some(value), Depth::Zero);
    assert_eq!(d != Depth::Invalid, matches!(value, b"0" | b"1" | b"infinity"));
    assert_eq!(headers::overwrite(Some(value)).is_some(), matches!(value, b"T" | b"t" | b"F" | b"f"));
}
