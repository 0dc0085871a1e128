//! The WebDAV request headers nginx's dav module reads, as pure functions
//! of the client's bytes (fuzzed as `dav_headers`): `Depth`,
//! `Overwrite`, and `Destination` (an absolute URI on this host, or a
//! path, both taken as nginx 1.22 and 1.26 take them).

/// `Depth` (RFC 4918 10.2), as `ngx_http_dav_depth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    Zero,
    One,
    Infinity,
    /// Anything else (nginx logs `client sent invalid "Depth" header`).
    Invalid,
}

/// The header's value, or `default` when there is none. Exactly `0`,
/// `1` or `infinity`, as nginx compares them (case-sensitive).
pub fn depth(value: Option<&[u8]>, default: Depth) -> Depth {
    match value {
        None => default,
        Some(b"0") => Depth::Zero,
        Some(b"1") => Depth::One,
        Some(b"infinity") => Depth::Infinity,
        Some(_) => Depth::Invalid,
    }
}

/// `Overwrite: T|F` (either case); None for anything else (nginx's 400).
/// No header means overwrite.
pub fn overwrite(value: Option<&[u8]>) -> Option<bool> {
    match value {
        None => Some(true),
        Some(b"T" | b"t") => Some(true),
        Some(b"F" | b"f") => Some(false),
        Some(_) => None,
    }
}

/// Why a `Destination` is refused, each with nginx's log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DestError {
    /// An absolute URI and no `Host` to compare it with.
    NoHost,
    /// Not `http://` (`https://` over TLS) with a path, nor a path.
    Invalid,
    /// Another host than the request's.
    OtherRepository,
}

/// The path part (with any query) of a `Destination` value, as
/// `ngx_http_dav_copy_move_handler` finds it: a value starting with `/`
/// is the path; else it must be `http://` (`https://` when `tls`) then
/// the request's host (`host`, compared as a prefix, so a port may
/// follow), and the path from the first `/` after it.
pub fn destination<'a>(value: &'a [u8], host: &[u8], tls: bool) -> Result<&'a [u8], DestError> {
    if value.first() == Some(&b'/') {
        return Ok(value);
    }
    if host.is_empty() {
        return Err(DestError::NoHost);
    }
    let scheme: &[u8] = if tls { b"https://" } else { b"http://" };
    let rest = value.strip_prefix(scheme).ok_or(DestError::Invalid)?;
    let after = rest.strip_prefix(host).ok_or(DestError::OtherRepository)?;
    match after.iter().position(|&b| b == b'/') {
        Some(i) => Ok(&after[i..]),
        None => Err(DestError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_values() {
        assert_eq!(depth(None, Depth::Infinity), Depth::Infinity);
        assert_eq!(depth(None, Depth::Zero), Depth::Zero);
        assert_eq!(depth(Some(b"0"), Depth::Infinity), Depth::Zero);
        assert_eq!(depth(Some(b"1"), Depth::Infinity), Depth::One);
        assert_eq!(depth(Some(b"infinity"), Depth::Zero), Depth::Infinity);
        for bad in [&b"Infinity"[..], b"2", b"", b"00", b" 0"] {
            assert_eq!(depth(Some(bad), Depth::Zero), Depth::Invalid, "{bad:?}");
        }
    }

    #[test]
    fn overwrite_values() {
        assert_eq!(overwrite(None), Some(true));
        assert_eq!(overwrite(Some(b"t")), Some(true));
        assert_eq!(overwrite(Some(b"F")), Some(false));
        assert_eq!(overwrite(Some(b"f")), Some(false));
        assert_eq!(overwrite(Some(b"yes")), None);
        assert_eq!(overwrite(Some(b"")), None);
    }

    #[test]
    fn destinations() {
        assert_eq!(destination(b"/a/b", b"", false), Ok(&b"/a/b"[..]));
        assert_eq!(destination(b"http://h/a?x", b"h", false), Ok(&b"/a?x"[..]));
        assert_eq!(destination(b"http://h:8080/a", b"h", false), Ok(&b"/a"[..]));
        assert_eq!(destination(b"https://h/a", b"h", true), Ok(&b"/a"[..]));
        assert_eq!(destination(b"https://h/a", b"h", false), Err(DestError::Invalid));
        assert_eq!(destination(b"http://h/a", b"h", true), Err(DestError::Invalid));
        assert_eq!(destination(b"http://other/a", b"h", false), Err(DestError::OtherRepository));
        assert_eq!(destination(b"http://h", b"h", false), Err(DestError::Invalid));
        assert_eq!(destination(b"http://h/a", b"", false), Err(DestError::NoHost));
        assert_eq!(destination(b"a/b", b"h", false), Err(DestError::Invalid));
    }
}
