//! The request's head for the origin, as nginx's grpc module builds it,
//! written straight into its HPACK block from the client's fields.
//!
//! Why not through `http::Request`: building a `HeaderMap` (a name and a
//! value allocated per field, a hash table) and then encoding it cost a
//! gRPC call about a dozen allocations and 10,000 instructions
//! (bench/callgrind_grpc.py). The rules stay those of that path: a field
//! `http` would refuse is left out, repeated names go together at the
//! place of the first, and a target or authority `http::Uri` would not
//! take is still checked by it (the rare slow path).

use std::borrow::Cow;

use crate::config::proxy::ProxyPass;
use crate::http::connection::h2::hpack::{put_int, put_str};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::proxy::request_body::ReqBody;

/// Client headers never passed as they are: hop-by-hop ones, those h2
/// writes itself, and those nginx's defaults replace (`DEFAULT_HEADERS`).
/// A match, not a list searched: it is asked for every field of every call.
fn not_passed(name: &[u8]) -> bool {
    matches!(
        name,
        b"host"
            | b"connection"
            | b"content-length"
            | b"transfer-encoding"
            | b"te"
            | b"keep-alive"
            | b"proxy-connection"
            | b"expect"
            | b"upgrade"
            | b"http2-settings"
    )
}

/// The request's head for the origin as an HPACK block: the client's
/// method, `:scheme` (the connection's), the URI as the proxy sends it,
/// `:authority` (the `grpc_pass` address, or none when `grpc_set_header
/// Host` gives a `host` header instead, as nginx), the client's headers
/// with `grpc_set_header` applied, `te: trailers` when the client asked
/// for trailers, and the body's length when known. As nginx's module
/// writes it: the pseudo-headers first (static-table names), then the
/// fields as literals never entered in a table (the origin's table is
/// not used).
pub fn request_block(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, body: &ReqBody) -> Result<Vec<u8>, String> {
    let conf = &ctx.conf.grpc;
    let mut target = Vec::with_capacity(128);
    crate::http::proxy::wire::target_for_log(ctx, pass, &mut target);
    let mut set: Vec<(&str, Vec<u8>)> = Vec::new();
    if !conf.set_headers.is_empty() {
        let vars = Vars::request(ctx);
        set.reserve(conf.set_headers.len());
        for (name, tpl) in &conf.set_headers {
            set.push((name.as_str(), tpl.render_to_vec(&vars)));
        }
    }
    let host_set = set.iter().any(|(n, _)| n.eq_ignore_ascii_case("host"));
    let authority = (!host_set).then_some(pass.proxy_host.as_str());
    let (path, authority) = uri_parts(&target, authority, pass.tls)?;
    let mut b = Vec::with_capacity(256);
    match ctx.req.method_bytes() {
        b"GET" => b.push(0x82),
        b"POST" => b.push(0x83),
        m => {
            let m = http::Method::from_bytes(m).map_err(|e| e.to_string())?;
            put_int(&mut b, 0, 4, 2);
            put_str(&mut b, m.as_str().as_bytes());
        }
    }
    b.push(if pass.tls { 0x87 } else { 0x86 });
    put_int(&mut b, 0, 4, 4);
    put_str(&mut b, &path);
    if let Some(a) = &authority {
        put_int(&mut b, 0, 4, 1);
        put_str(&mut b, a.as_bytes());
    }
    // An explicit empty `grpc_set_header` removes a client's header.
    let removed = |name: &[u8]| set.iter().any(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name));
    let mut fields: Vec<(Cow<'_, [u8]>, &[u8])> = Vec::with_capacity(16);
    for (name, value) in ctx.req.headers() {
        let Some(lower) = field_name(name) else { continue };
        if not_passed(&lower) || removed(name) || !valid_value(value) {
            continue;
        }
        fields.push((lower, value));
    }
    // As a header map keeps them: a repeated name's values together, at
    // the place of its first.
    for (i, (name, value)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(n, _)| n == name) {
            continue;
        }
        field(&mut b, name, value);
        for (n, v) in &fields[i + 1..] {
            if n == name {
                field(&mut b, n, v);
            }
        }
    }
    // Set headers replace the client's (removed above) and are unique.
    for (name, value) in &set {
        if value.is_empty() || !valid_value(value) {
            continue;
        }
        if let Some(n) = field_name(name.as_bytes()) {
            field(&mut b, &n, value);
        }
    }
    if ctx.req.header("te").is_some_and(|v| contains_token(v, b"trailers")) && !removed(b"te") {
        field(&mut b, b"te", b"trailers");
    }
    let len = match body {
        ReqBody::Buffered(b) if !b.is_empty() => Some(b.len()),
        _ => ctx.req.header("content-length").and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok()),
    };
    if let Some(n) = len
        && !removed(b"content-length")
    {
        let mut digits = [0u8; 20];
        field(&mut b, b"content-length", crate::http::date::decimal(n, &mut digits));
    }
    Ok(b)
}

fn field(b: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    b.push(0);
    put_str(b, name);
    put_str(b, value);
}

/// A field name as `http::HeaderName` takes it (lowercased), or none for
/// one it refuses. The usual names (lowercase letters, digits, `-`, `_`)
/// are taken as they are.
fn field_name(name: &[u8]) -> Option<Cow<'_, [u8]>> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_');
    if plain {
        return Some(Cow::Borrowed(name));
    }
    http::HeaderName::from_bytes(name).ok().map(|n| Cow::Owned(n.as_str().as_bytes().to_vec()))
}

/// A value `http::HeaderValue` takes: no control characters but TAB.
fn valid_value(v: &[u8]) -> bool {
    v.iter().all(|&b| b >= 32 && b != 127 || b == b'\t')
}

/// `:path` and `:authority`.
type UriParts<'a> = (Cow<'a, [u8]>, Option<Cow<'a, str>>);

/// The `:path` and `:authority` as `http::Uri` renders them. Targets of
/// the characters it passes unchanged (those of a path, and `?`) and a
/// host[:port] authority are taken as they are; others go through its
/// builder, which refuses some and cuts a fragment off.
fn uri_parts<'a>(target: &'a [u8], authority: Option<&'a str>, tls: bool) -> Result<UriParts<'a>, String> {
    let plain_target = target.first() == Some(&b'/')
        && target.len() < 0x8000
        && target.iter().all(|&b| matches!(b, 0x21 | 0x24..=0x3B | 0x3D | 0x3F..=0x5F | 0x61..=0x7A | 0x7C | 0x7E));
    if plain_target && authority.is_none_or(plain_authority) {
        return Ok((Cow::Borrowed(target), authority.map(Cow::Borrowed)));
    }
    let mut uri = http::uri::Builder::new();
    if let Some(a) = authority {
        uri = uri.scheme(if tls { "https" } else { "http" }).authority(a);
    }
    let uri = uri.path_and_query(target).build().map_err(|e| format!("invalid request URI: {e}"))?;
    let path = uri.path_and_query().map_or(b"/".to_vec(), |p| p.as_str().as_bytes().to_vec());
    Ok((Cow::Owned(path), uri.authority().map(|a| Cow::Owned(a.as_str().to_string()))))
}

/// A host name or IPv4 address of letters, digits, `.`, `-` and `_`,
/// with a port of at most 65535: what `http::uri::Authority` takes as it
/// is.
fn plain_authority(a: &str) -> bool {
    let (host, port) = match a.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (a, None),
    };
    let host_ok =
        !host.is_empty() && host.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-' || c == b'_');
    let port_ok = port.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 5
            && p.bytes().all(|c| c.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| n <= 65535)
    });
    host_ok && port_ok
}

pub(super) fn contains_token(v: &[u8], token: &[u8]) -> bool {
    v.split(|&b| b == b',').any(|t| {
        t.trim_ascii().split(|&b| b == b';').next().is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(token))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_parts_are_what_http_uri_renders() {
        for (target, authority) in [
            ("/bench.Echo/Say", Some("grpc_origin")),
            ("/a/b?x=1&y=%20z", Some("127.0.0.1:50051")),
            ("/p", None),
            ("/p#frag", Some("h")),
            ("/\"{}\"", Some("h:65536")),
            ("/é", Some("[::1]:80")),
        ] {
            let fast = uri_parts(target.as_bytes(), authority, false);
            let mut uri = http::uri::Builder::new();
            if let Some(a) = authority {
                uri = uri.scheme("http").authority(a);
            }
            let slow = uri.path_and_query(target).build();
            match (fast, slow) {
                (Ok((p, a)), Ok(u)) => {
                    assert_eq!(p.as_ref(), u.path_and_query().map_or("/", |p| p.as_str()).as_bytes());
                    assert_eq!(a.as_deref(), u.authority().map(|a| a.as_str()));
                }
                (Err(_), Err(_)) => {}
                (f, s) => panic!("{target} {authority:?}: {f:?} against {s:?}"),
            }
        }
    }

    #[test]
    fn field_names_as_http_takes_them() {
        assert_eq!(field_name(b"x-custom_1").as_deref(), Some(&b"x-custom_1"[..]));
        assert_eq!(field_name(b"X-Custom").as_deref(), Some(&b"x-custom"[..]));
        assert_eq!(field_name(b"bad name"), None);
        assert_eq!(field_name(b""), None);
        assert!(valid_value(b"a\tb"));
        assert!(!valid_value(b"a\x01b"));
        let mut buf = [0u8; 20];
        assert_eq!(crate::http::date::decimal(0, &mut buf), b"0");
        assert_eq!(crate::http::date::decimal(u64::MAX, &mut buf), u64::MAX.to_string().as_bytes());
    }
}
