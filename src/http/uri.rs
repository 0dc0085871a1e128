//! Request-target normalization with nginx's `ngx_http_parse_complex_uri`
//! semantics (merge_slashes on), verified against nginx 1.22.1:
//!
//! * `%XX` is decoded before segment processing, so `%2F` acts as a slash and
//!   `%2e%2e` as `..` ("/a%2F..%2Fb" -> "/b"). Decoded `%`, `#`, `?` are
//!   literal path bytes ("/a%3Fb" -> "/a?b", "/a%2541" -> "/a%41").
//! * A `..` that would climb above `/` is a 400, never clamped.
//! * A trailing `.` / `..` segment leaves a trailing slash ("/a/b/.." -> "/a/").
//! * `%00`, a bad escape ("%", "%4", "%zz") and a raw NUL are 400.
//! * Backslashes are ordinary bytes on Unix ("/a\..\b" stays as is).
//! * A raw `#` ends the path and the query ("/a#b?c" -> path "/a", no args;
//!   "/a?b#c" -> args "b").

use std::borrow::Cow;

#[derive(Debug, PartialEq, Eq)]
pub enum UriError {
    BadRequest,
}

/// Besides splitting at the first `?`, a raw `#` terminates both path and
/// query, because nginx drops the fragment ("/a#x?y" has no args in nginx).
pub fn split_target(target: &[u8]) -> (&[u8], Option<&[u8]>) {
    // A plain scan: targets are short, memchr's setup would cost more.
    match target.iter().position(|&b| b == b'?' || b == b'#') {
        None => (target, None),
        Some(i) if target[i] == b'#' => (&target[..i], None),
        Some(i) => {
            let rest = &target[i + 1..];
            let query = match memchr::memchr(b'#', rest) {
                Some(j) => &rest[..j],
                None => rest,
            };
            (&target[..i], Some(query))
        }
    }
}

/// The borrowed fast path covers almost every real request: it is taken when
/// there is no `%`, no NUL, no empty segment and no segment that is exactly
/// `.` or `..` (dot-files such as "/.well-known" stay on the fast path).
pub fn normalize_path(path: &[u8]) -> Result<Cow<'_, [u8]>, UriError> {
    normalize_path_with(path, true)
}

/// `merge_slashes off` keeps empty segments (`//`) as they are; `.` and
/// `..` are still resolved.
pub fn normalize_path_with(path: &[u8], merge_slashes: bool) -> Result<Cow<'_, [u8]>, UriError> {
    if path.first() != Some(&b'/') {
        return Err(UriError::BadRequest);
    }
    if is_already_normal(path) {
        return Ok(Cow::Borrowed(path));
    }
    normalize_slow(path, merge_slashes).map(Cow::Owned)
}

fn is_already_normal(path: &[u8]) -> bool {
    // One plain pass: paths are short, memchr's setup would cost more.
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'%' | 0 => return false,
            b'/' => match &path[i + 1..] {
                [b'/', ..] | [b'.'] | [b'.', b'/', ..] | [b'.', b'.'] | [b'.', b'.', b'/', ..] => {
                    return false;
                }
                _ => {}
            },
            _ => {}
        }
    }
    true
}

#[inline]
fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Single pass: decodes into `out` and resolves each segment as soon as its
/// terminating slash (decoded or raw) is seen, so only one buffer is needed.
/// Invariant: `out[..seg_start]` is a normalized prefix ending in '/'.
fn normalize_slow(path: &[u8], merge_slashes: bool) -> Result<Vec<u8>, UriError> {
    let mut out = Vec::with_capacity(path.len());
    out.push(b'/');
    let mut seg_start = 1usize;
    let mut i = 1usize;
    loop {
        let c = match path.get(i) {
            None => None,
            Some(&b'%') => {
                let hi = path.get(i + 1).copied().and_then(hex_val);
                let lo = path.get(i + 2).copied().and_then(hex_val);
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        i += 3;
                        match (h << 4) | l {
                            0 => return Err(UriError::BadRequest),
                            v => Some(v),
                        }
                    }
                    _ => return Err(UriError::BadRequest),
                }
            }
            Some(&0) => return Err(UriError::BadRequest),
            Some(&b) => {
                i += 1;
                Some(b)
            }
        };
        match c {
            Some(b'/') | None => {
                match &out[seg_start..] {
                    b"" if !merge_slashes && c.is_some() => out.push(b'/'),
                    b"" => {}
                    b"." => out.truncate(seg_start),
                    b".." => {
                        if seg_start <= 1 {
                            return Err(UriError::BadRequest);
                        }
                        let prev = memchr::memrchr(b'/', &out[..seg_start - 1]).unwrap_or(0);
                        out.truncate(prev + 1);
                    }
                    _ => {
                        if c.is_some() {
                            out.push(b'/');
                        }
                    }
                }
                if c.is_none() {
                    return Ok(out);
                }
                seg_start = out.len();
            }
            Some(b) => out.push(b),
        }
    }
}

/// Byte classes as 256-bit masks, copied from nginx 1.22's ngx_escape_uri
/// tables so escaped output is byte-identical to nginx's.
const fn table(words: [u32; 8]) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = words[i >> 5] & (1 << (i & 31)) != 0;
        i += 1;
    }
    t
}

/// NGX_ESCAPE_URI: controls, space, `"`, `#`, `%`, `<`, `>`, `?`, `\`, `^`,
/// `` ` ``, `{`, `|`, `}`, DEL and non-ASCII.
static URI: [bool; 256] =
    table([0xffff_ffff, 0xd000_002d, 0x5000_0000, 0xb800_0001, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff]);

/// NGX_ESCAPE_URI_COMPONENT: everything except ALPHA, DIGIT, `-`, `.`, `_`, `~`.
static URI_COMPONENT: [bool; 256] =
    table([0xffff_ffff, 0xfc00_9fff, 0x7800_0001, 0xb800_0001, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff]);

/// NGX_ESCAPE_ARGS: controls, space, `#`, `%`, `&`, `+`, `;`, `?`, DEL and
/// non-ASCII.
static ARGS: [bool; 256] =
    table([0xffff_ffff, 0x8800_0869, 0x0000_0000, 0x8000_0000, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff, 0xffff_ffff]);

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn escape_with(s: &[u8], tbl: &[bool; 256], out: &mut Vec<u8>) {
    out.reserve(s.len());
    let mut plain = 0;
    for (i, &b) in s.iter().enumerate() {
        if tbl[usize::from(b)] {
            out.extend_from_slice(&s[plain..i]);
            out.extend_from_slice(&[b'%', HEX_UPPER[usize::from(b >> 4)], HEX_UPPER[usize::from(b & 15)]]);
            plain = i + 1;
        }
    }
    out.extend_from_slice(&s[plain..]);
}

/// Used where nginx re-escapes a decoded URI, e.g. the Location of the
/// directory redirect ("/a dir" -> "/a%20dir/").
pub fn escape_uri(path: &[u8], out: &mut Vec<u8>) {
    escape_with(path, &URI, out);
}

/// Used for autoindex hrefs, where nginx escapes a single name as a URI
/// component (so `&`, `:`, `/`, `;` etc. are escaped too).
pub fn escape_uri_component(s: &[u8], out: &mut Vec<u8>) {
    escape_with(s, &URI_COMPONENT, out);
}

/// NGX_ESCAPE_ARGS, for regex captures copied into a rewritten query or
/// redirect when the client's URI was escaped.
pub fn escape_args(s: &[u8], out: &mut Vec<u8>) {
    escape_with(s, &ARGS, out);
}

/// nginx's `ngx_unescape_uri(NGX_UNESCAPE_REDIRECT)` on a rewritten
/// redirect, byte for byte: up to the first `?` (literal, or decoded from
/// `%3F`), `%XX` is decoded when it stands for a printable character above
/// `%` and kept as written otherwise; nginx drops a malformed escape (the
/// `%` of `%zz`, the whole `%4z`) and an unfinished one at the end.
pub fn unescape_redirect(s: &[u8]) -> Vec<u8> {
    let hex = |c: u8| -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            _ => match c | 0x20 {
                l @ b'a'..=b'f' => Some(l - b'a' + 10),
                _ => None,
            },
        }
    };
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let ch = s[i];
        i += 1;
        if ch == b'?' {
            out.push(ch);
            break;
        }
        if ch != b'%' {
            out.push(ch);
            continue;
        }
        // sw_quoted
        let Some(&c1) = s.get(i) else { break };
        i += 1;
        let Some(hi) = hex(c1) else {
            out.push(c1);
            continue;
        };
        // sw_quoted_second
        let Some(&c2) = s.get(i) else { break };
        i += 1;
        let Some(lo) = hex(c2) else { continue };
        let decoded = (hi << 4) | lo;
        if decoded == b'?' {
            out.push(decoded);
            break;
        }
        if decoded > b'%' && decoded < 0x7f {
            out.push(decoded);
        } else {
            out.extend_from_slice(&[b'%', c1, c2]);
        }
    }
    out.extend_from_slice(&s[i..]);
    out
}

/// Every well-formed `%XX` decoded; anything else kept as written.
pub fn percent_decode(s: &[u8]) -> Cow<'_, [u8]> {
    if !s.contains(&b'%') {
        return Cow::Borrowed(s);
    }
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%'
            && let (Some(h), Some(l)) = (s.get(i + 1).and_then(|&c| hex(c)), s.get(i + 2).and_then(|&c| hex(c)))
        {
            out.push(h << 4 | l);
            i += 3;
            continue;
        }
        out.push(s[i]);
        i += 1;
    }
    Cow::Owned(out)
}

/// Whether nginx's request-line parser set `quoted_uri` or `plus_in_uri`
/// for this raw path: a `%` or `+` seen before the parser leaves its fast
/// states (a `.` or `/` right after a slash, or a `#`). With either flag,
/// captures copied into a rewritten query or a redirect are escaped.
pub fn quoted_or_plus(raw_path: &[u8]) -> bool {
    let mut after_slash = false;
    for &b in raw_path {
        match b {
            b'%' | b'+' => return true,
            b'?' | b'#' => return false,
            b'.' | b'/' if after_slash => return false,
            b'/' => after_slash = true,
            _ => after_slash = false,
        }
    }
    false
}

/// The host of an absolute-form target as nginx's request-line parser
/// takes it: letters, digits, `.` and `-` (or a bracketed IP literal),
/// then an optional `:port` of digits. Anything else, userinfo
/// (`http://user:pass@host/`) included, is nginx's 400 "client sent invalid
/// request"; sluice had let the Host-header validation accept `@` and
/// proxied such a request (found by tests/smuggling).
pub fn absolute_host_ok(a: &[u8]) -> bool {
    let (host, port) = if a.starts_with(b"[") {
        match memchr::memchr(b']', a) {
            // nginx's IP-literal: an IPv6 address or RFC 3986's IPvFuture,
            // so unreserved and sub-delims characters besides `:`.
            Some(i) if a[1..i].iter().all(|&b| b.is_ascii_alphanumeric() || b":-._~!$&'()*+,;=".contains(&b)) => {
                a.split_at(i + 1)
            }
            _ => return false,
        }
    } else {
        let (h, p) = a.split_at(memchr::memchr(b':', a).unwrap_or(a.len()));
        if h.is_empty() || !h.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') {
            return false;
        }
        (h, p)
    };
    !host.is_empty() && (port.is_empty() || (port[0] == b':' && port[1..].iter().all(u8::is_ascii_digit)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(p: &[u8]) -> Result<Vec<u8>, UriError> {
        normalize_path(p).map(|c| c.into_owned())
    }

    fn ok(p: &str, expect: &str) {
        assert_eq!(
            norm(p.as_bytes()).map(|v| String::from_utf8_lossy(&v).into_owned()),
            Ok(expect.to_string()),
            "input {p:?}"
        );
    }

    fn bad(p: &[u8]) {
        assert_eq!(norm(p), Err(UriError::BadRequest), "input {p:?}");
    }

    #[test]
    fn redirect_unescaping_is_nginx_s() {
        let u = |s: &str| String::from_utf8(unescape_redirect(s.as_bytes())).unwrap();
        assert_eq!(u("http://x/a%20b%26c?z=%41"), "http://x/a%20b&c?z=%41");
        assert_eq!(u("/%41%2f%25%7e%7F"), "/A/%25~%7F");
        assert_eq!(u("/a%3Fb%41"), "/a?b%41");
        assert_eq!(u("/a%3fb"), "/a?b");
        assert_eq!(u("/%zz/%4z/end%"), "/zz//end");
        assert_eq!(u("/x%4"), "/x");
    }

    #[test]
    fn args_escaping() {
        let mut out = Vec::new();
        escape_args(b"a b&c+d;e?f#g%h=i/j\\\x7f\xc3", &mut out);
        assert_eq!(out, b"a%20b%26c%2Bd%3Be%3Ff%23g%25h=i/j\\%7F%C3".to_vec());
    }

    #[test]
    fn quoted_or_plus_flags() {
        assert!(quoted_or_plus(b"/a+b"));
        assert!(quoted_or_plus(b"/a%20b"));
        assert!(!quoted_or_plus(b"/ab"));
        assert!(!quoted_or_plus(b"/./a+b"));
        assert!(!quoted_or_plus(b"//a+b"));
        assert!(quoted_or_plus(b"/a.b/c+d"));
    }

    #[test]
    fn absolute_form_hosts() {
        for ok in ["localhost", "a.b-c.example:8080", "127.0.0.1:80", "[::1]", "[::1]:8080", "h:", "[v1.a!$(*)~]"] {
            assert!(absolute_host_ok(ok.as_bytes()), "{ok}");
        }
        for bad in ["u:p@localhost", "user@h", "", "a_b", "h:8x", "[::1", "[a@b]", "[a/b]", "a b", "h%41"] {
            assert!(!absolute_host_ok(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn split() {
        assert_eq!(split_target(b"/a"), (&b"/a"[..], None));
        assert_eq!(split_target(b"/a?x=1"), (&b"/a"[..], Some(&b"x=1"[..])));
        assert_eq!(split_target(b"/a?"), (&b"/a"[..], Some(&b""[..])));
        assert_eq!(split_target(b"/a??b"), (&b"/a"[..], Some(&b"?b"[..])));
        assert_eq!(split_target(b"/a?b#c"), (&b"/a"[..], Some(&b"b"[..])));
        assert_eq!(split_target(b"/a#b?c"), (&b"/a"[..], None));
        assert_eq!(split_target(b"/a%3F?x"), (&b"/a%3F"[..], Some(&b"x"[..])));
        assert_eq!(split_target(b""), (&b""[..], None));
    }

    /// Every expectation here was observed from nginx 1.22.1's `$uri`.
    #[test]
    fn nginx_observed() {
        ok("/", "/");
        ok("//", "/");
        ok("/a//b///c", "/a/b/c");
        ok("/a/./b", "/a/b");
        ok("/a/../b", "/b");
        ok("/foo/../bar", "/bar");
        ok("/a/b/..", "/a/");
        ok("/a/b/.", "/a/b/");
        ok("/a/.", "/a/");
        ok("/a/..", "/");
        ok("/a/%2e%2e", "/");
        ok("/a/%2E%2e/b", "/b");
        ok("/a%2F..%2Fb", "/b");
        ok("/a%2f..", "/");
        ok("/a%2f%2fb", "/a/b");
        ok("/a%20b", "/a b");
        ok("/a%41b", "/aAb");
        ok("/%2F", "/");
        ok("/./", "/");
        ok("/.", "/");
        ok("/./.", "/");
        ok("/.a", "/.a");
        ok("/a/.b/..c/...", "/a/.b/..c/...");
        ok("/a/.../b", "/a/.../b");
        ok("/a/..../", "/a/..../");
        ok("/a/b/../../c/", "/c/");
        ok("/a%3Fb", "/a?b");
        ok("/a%23b", "/a#b");
        ok("/a%25b", "/a%b");
        ok("/a%2541", "/a%41");
        ok("/a/b%2F", "/a/b/");
        ok("/a/.%2e/b", "/b");
        ok("/a/%2e./b", "/b");
        ok("/a/%2e", "/a/");
        ok("/a/b/%2e%2e", "/a/");
        ok("/a\\b", "/a\\b");
        ok("/a\\..\\b", "/a\\..\\b");
        ok("/a/./../b", "/b");
        ok("/a/..//b", "/b");
        ok("/a//../b", "/b");
        ok("/a/b/c/../../../", "/");
        ok("/a%20%2F..%2F", "/");
        ok("/a/b/..%2F", "/a/");
        ok("/\u{e9}/\u{fc}", "/\u{e9}/\u{fc}");
        ok("/%C3%A9", "/\u{e9}");
    }

    #[test]
    fn nginx_observed_errors() {
        bad(b"/..");
        bad(b"/../");
        bad(b"/../..");
        bad(b"/a/../..");
        bad(b"/a/../../b");
        bad(b"/%2e%2e/");
        bad(b"/a/b/../../../c/");
        bad(b"/a/b/c/../../../../");
        bad(b"/%");
        bad(b"/a%");
        bad(b"/a%4");
        bad(b"/a%4g");
        bad(b"/a%zz");
        bad(b"/a%00");
        bad(b"/a%00b");
        bad(b"/a\0b");
        bad(b"");
        bad(b"a/b");
        bad(b"%2Fa");
    }

    #[test]
    fn fast_path_borrows() {
        for p in
            [&b"/"[..], b"/index.html", b"/a/b/c.txt", b"/.well-known/acme", b"/a/.b/..c/...", b"/\xc3\xa9/x", b"/a/"]
        {
            assert!(matches!(normalize_path(p), Ok(Cow::Borrowed(_))), "{p:?}");
        }
        for p in [&b"//"[..], b"/a/./b", b"/a/..", b"/a%20", b"/a/."] {
            assert!(matches!(normalize_path(p), Ok(Cow::Owned(_))), "{p:?}");
        }
    }

    #[test]
    fn long_path() {
        let mut p = Vec::new();
        let mut expect = Vec::new();
        for i in 0..2000 {
            p.extend_from_slice(format!("//seg{i}/./x/../").as_bytes());
            expect.extend_from_slice(format!("/seg{i}").as_bytes());
        }
        expect.push(b'/');
        assert_eq!(norm(&p).unwrap(), expect);
        let deep: Vec<u8> = b"/a".repeat(10_000).into_iter().chain(b"/..".repeat(10_000)).collect();
        assert_eq!(norm(&deep).unwrap(), b"/");
        let deeper: Vec<u8> = b"/a".repeat(10_000).into_iter().chain(b"/..".repeat(10_001)).collect();
        assert_eq!(norm(&deeper), Err(UriError::BadRequest));
    }

    /// Property check over generated inputs built from the troublesome
    /// alphabet; a tiny xorshift keeps it deterministic without extra crates.
    #[test]
    fn property_output_is_normal() {
        const PIECES: [&[u8]; 14] =
            [b"/", b"//", b".", b"..", b"a", b"bc", b"%2e", b"%2E", b"%2f", b"%2F", b"%", b"%00", b"%41", b"\xc3\xa9"];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut oks = 0;
        for _ in 0..50_000 {
            let mut p = vec![b'/'];
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 12) as usize;
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                p.extend_from_slice(PIECES[(x % PIECES.len() as u64) as usize]);
            }
            if let Ok(out) = normalize_path(&p) {
                oks += 1;
                let o = &out[..];
                assert_eq!(o.first(), Some(&b'/'), "{p:?}");
                assert!(!o.windows(2).any(|w| w == b"//"), "{p:?} -> {o:?}");
                assert!(!o.windows(3).any(|w| w == b"/./"), "{p:?} -> {o:?}");
                assert!(!o.windows(4).any(|w| w == b"/../"), "{p:?} -> {o:?}");
                assert!(!o.ends_with(b"/.") && !o.ends_with(b"/.."), "{p:?} -> {o:?}");
                // Idempotent: a normalized path (without '%') is a fixed point.
                if !o.contains(&b'%') {
                    assert_eq!(&normalize_path(o).unwrap()[..], o);
                }
            }
        }
        assert!(oks > 10_000, "generator should produce mostly valid paths: {oks}");
    }

    #[test]
    fn escape_uri_nginx_table() {
        let mut out = Vec::new();
        escape_uri(b"/dir/we\"ird<>\\^`{|}#?%x/", &mut out);
        assert_eq!(out, b"/dir/we%22ird%3C%3E%5C%5E%60%7B%7C%7D%23%3F%25x/");
        out.clear();
        escape_uri(b"/a dir/\xc3\xa9\x01\x7f&=+;:@!$'()*,~", &mut out);
        assert_eq!(out, b"/a%20dir/%C3%A9%01%7F&=+;:@!$'()*,~");
        out.clear();
        escape_uri(b"", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn escape_component_nginx_table() {
        let mut out = Vec::new();
        escape_uri_component(b"sp ace & amp.txt", &mut out);
        assert_eq!(out, b"sp%20ace%20%26%20amp.txt");
        out.clear();
        escape_uri_component(b"dir&<x>/pct%41:q?#~_-.", &mut out);
        assert_eq!(out, b"dir%26%3Cx%3E%2Fpct%2541%3Aq%3F%23~_-.");
        out.clear();
        escape_uri_component(b"AZaz09", &mut out);
        assert_eq!(out, b"AZaz09");
    }
}
