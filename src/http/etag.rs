//! Entity tags in nginx's format plus RFC 9110 precondition matching.
//!
//! Unlike nginx's `ngx_http_test_if_match` (a prefix comparison over the raw
//! list), the list here is tokenized, so quoted tags containing commas are
//! handled correctly. One intentional difference: for If-Match nginx compares
//! bytes without special-casing `W/`, so `W/"x"` matches a weak ETag `W/"x"`;
//! here strong comparison follows RFC 9110 and a weak tag never matches.

/// `"` + hex(mtime) + `-` + hex(size) + `"`, lowercase without padding, as
/// nginx's `ngx_http_set_etag` prints it with "%xT-%xO".
pub fn etag(mtime: u64, size: u64, out: &mut Vec<u8>) {
    out.push(b'"');
    push_hex(out, mtime);
    out.push(b'-');
    push_hex(out, size);
    out.push(b'"');
}

fn push_hex(out: &mut Vec<u8>, mut n: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = HEX[(n & 15) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Splits off the weakness indicator so both comparison functions work on
/// the opaque part.
fn split_weak(tag: &[u8]) -> (bool, &[u8]) {
    match tag {
        [b'W', b'/', rest @ ..] => (true, rest),
        _ => (false, tag),
    }
}

#[inline]
fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Calls `f(weak, opaque_tag)` for each list member until it returns true.
/// Malformed members (unquoted or unterminated) are compared as their raw
/// text so garbage can only fail to match, never match by accident.
fn any_tag(header: &[u8], mut f: impl FnMut(bool, &[u8]) -> bool) -> bool {
    let mut s = header;
    loop {
        while let [b, rest @ ..] = s {
            if is_ows(*b) || *b == b',' {
                s = rest;
            } else {
                break;
            }
        }
        if s.is_empty() {
            return false;
        }
        let (weak, body) = split_weak(s);
        let (tag, rest) = if body.first() == Some(&b'"') {
            match memchr::memchr(b'"', &body[1..]) {
                Some(close) => body.split_at(close + 2),
                None => (body, &b""[..]),
            }
        } else {
            let end = memchr::memchr(b',', body).unwrap_or(body.len());
            let (t, r) = body.split_at(end);
            (t.trim_ascii_end(), r)
        };
        let rest_trim = rest.trim_ascii_start();
        // Like nginx, a member with junk after its closing quote never matches.
        let clean = rest_trim.is_empty() || rest_trim[0] == b',';
        if clean && f(weak, tag) {
            return true;
        }
        s = rest;
        match memchr::memchr(b',', s) {
            Some(c) => s = &s[c..],
            None => return false,
        }
    }
}

/// Weak comparison: `W/` is ignored on both sides. The list must be exactly
/// "*" (surrounding whitespace aside) for the wildcard, as in nginx.
pub fn if_none_match_matches(header: &[u8], etag: &[u8]) -> bool {
    let header = header.trim_ascii();
    if header == b"*" {
        return true;
    }
    let (_, opaque) = split_weak(etag);
    if opaque.is_empty() {
        return false;
    }
    any_tag(header, |_, tag| tag == opaque)
}

/// Strong comparison: both tags must be strong and byte-identical.
pub fn if_match_matches(header: &[u8], etag: &[u8]) -> bool {
    let header = header.trim_ascii();
    if header == b"*" {
        return true;
    }
    let (etag_weak, opaque) = split_weak(etag);
    if etag_weak || opaque.is_empty() {
        return false;
    }
    any_tag(header, |weak, tag| !weak && tag == opaque)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn et(m: u64, s: u64) -> String {
        let mut v = Vec::new();
        etag(m, s, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn format_like_nginx() {
        assert_eq!(et(0x5e8f_1a2b, 0x2b), "\"5e8f1a2b-2b\"");
        assert_eq!(et(0, 0), "\"0-0\"");
        assert_eq!(et(1_795_356_154, 1000), "\"6b02f5fa-3e8\"");
        assert_eq!(et(u64::MAX, 16), "\"ffffffffffffffff-10\"");
    }

    const E: &[u8] = b"\"5e8f1a2b-2b\"";
    const WE: &[u8] = b"W/\"5e8f1a2b-2b\"";

    #[test]
    fn none_match() {
        assert!(if_none_match_matches(b"*", E));
        assert!(if_none_match_matches(b" * ", E));
        assert!(if_none_match_matches(b"\"5e8f1a2b-2b\"", E));
        assert!(if_none_match_matches(b"W/\"5e8f1a2b-2b\"", E));
        assert!(if_none_match_matches(b"\"5e8f1a2b-2b\"", WE));
        assert!(if_none_match_matches(b"W/\"5e8f1a2b-2b\"", WE));
        assert!(if_none_match_matches(b"\"a\", \"5e8f1a2b-2b\"", E));
        assert!(if_none_match_matches(b"\"a\",W/\"5e8f1a2b-2b\" , \"b\"", E));
        assert!(if_none_match_matches(b"\"a\"\t,\t\"5e8f1a2b-2b\"\t", E));
        assert!(if_none_match_matches(b",,\"5e8f1a2b-2b\",,", E));
        assert!(!if_none_match_matches(b"\"5e8f1a2b-2c\"", E));
        assert!(!if_none_match_matches(b"\"5e8f1a2b-2b", E));
        assert!(!if_none_match_matches(b"5e8f1a2b-2b", E));
        assert!(!if_none_match_matches(b"\"5e8f1a2b-2b\"x", E));
        assert!(!if_none_match_matches(b"\"5e8f1a2b-2b\" x, \"b\"", E));
        assert!(!if_none_match_matches(b"", E));
        assert!(!if_none_match_matches(b"\"*\"", E));
        assert!(!if_none_match_matches(b"*, \"a\"", E));
        assert!(!if_none_match_matches(b"w/\"5e8f1a2b-2b\"", E));
        // A comma inside a quoted tag does not split it.
        assert!(if_none_match_matches(b"\"x,y\", \"a,b\"", b"\"a,b\""));
        assert!(!if_none_match_matches(b"\"x,y\"", b"\"y\""));
    }

    #[test]
    fn junk_after_tag_does_not_match_next_member() {
        assert!(if_none_match_matches(b"\"a\"junk, \"5e8f1a2b-2b\"", E));
        assert!(!if_none_match_matches(b"\"a\"\"5e8f1a2b-2b\"", E));
    }

    #[test]
    fn if_match_strong() {
        assert!(if_match_matches(b"*", E));
        assert!(if_match_matches(b"*", WE));
        assert!(if_match_matches(b"\"5e8f1a2b-2b\"", E));
        assert!(if_match_matches(b"\"x\", \"5e8f1a2b-2b\"", E));
        assert!(!if_match_matches(b"W/\"5e8f1a2b-2b\"", E));
        assert!(!if_match_matches(b"\"5e8f1a2b-2b\"", WE));
        assert!(!if_match_matches(b"W/\"5e8f1a2b-2b\"", WE));
        assert!(!if_match_matches(b"\"other\"", E));
        assert!(!if_match_matches(b"", E));
        assert!(!if_match_matches(b"\"5e8f1a2b-2b\"", b""));
    }
}
