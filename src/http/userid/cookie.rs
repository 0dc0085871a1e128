//! Reading the userid cookie out of the client's `Cookie` headers, as
//! nginx's userid filter does: `ngx_http_parse_multi_header_lines` finds
//! the first `NAME=value` (name compared ignoring case, at the start of a
//! value or after `;` or `,`), then the first 22 characters of the value
//! are base64-decoded into the 16 bytes of the identifier (a mark and the
//! `=` padding may follow them). These are client-controlled bytes: the
//! `userid_cookie` fuzz target runs this module.

/// What the request's cookies said about the identifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<'h> {
    /// No cookie of that name.
    None,
    /// A cookie shorter than 22 characters: nginx's "client sent too
    /// short userid cookie" (the header line it was found in is logged).
    TooShort { header: &'h [u8] },
    /// The 22 characters are not base64: "client sent invalid userid
    /// cookie".
    Invalid { header: &'h [u8] },
    /// The identifier's 16 bytes, and the value as sent (its 23rd and 24th
    /// bytes are compared with `userid_mark`).
    Got { uid: [u8; 16], value: &'h [u8] },
}

/// The first cookie `name` in `headers` (the values of the `Cookie`
/// headers in order), as `ngx_http_parse_multi_header_lines` finds it:
/// the value and the header it came from.
pub fn find<'h>(headers: &[&'h [u8]], name: &[u8]) -> Option<(&'h [u8], &'h [u8])> {
    for &h in headers {
        let mut i = 0;
        while i < h.len() {
            if h.len() - i >= name.len() && h[i..i + name.len()].eq_ignore_ascii_case(name) {
                i += name.len();
                while i < h.len() && h[i] == b' ' {
                    i += 1;
                }
                if i < h.len() && h[i] == b'=' {
                    i += 1;
                    while i < h.len() && h[i] == b' ' {
                        i += 1;
                    }
                    let from = i;
                    while i < h.len() && h[i] != b';' {
                        i += 1;
                    }
                    return Some((&h[from..i], h));
                }
                // Not `NAME=`: on to the next pair, as nginx's `skip`.
            }
            while i < h.len() {
                let c = h[i];
                i += 1;
                if c == b';' || c == b',' {
                    break;
                }
            }
            while i < h.len() && h[i] == b' ' {
                i += 1;
            }
        }
    }
    None
}

/// The identifier the request carries in cookie `name`.
pub fn read<'h>(headers: &[&'h [u8]], name: &[u8]) -> Found<'h> {
    let Some((value, header)) = find(headers, name) else { return Found::None };
    if value.len() < 22 {
        return Found::TooShort { header };
    }
    // Only 22 characters: a mark may follow them, and (as nginx's comment
    // says) many cookies carry garbage instead of the "==" padding.
    let Some(bytes) = crate::http::access::basic::decode_base64(&value[..22]) else {
        return Found::Invalid { header };
    };
    // A `=` among the 22 ends the decoding early, as in nginx: the rest
    // of the identifier stays zero.
    let mut uid = [0u8; 16];
    let n = bytes.len().min(16);
    uid[..n].copy_from_slice(&bytes[..n]);
    Found::Got { uid, value }
}

/// The identifier as nginx prints it in `$uid_got`, `$uid_set` and its
/// log line: four 32-bit words in the host's byte order, as `%08XD`.
pub fn hex_words(uid: &[u8; 16], out: &mut Vec<u8>) {
    for w in uid.chunks_exact(4) {
        let word = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
        out.extend_from_slice(format!("{word:08X}").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_pair_ignoring_case() {
        let h: &[&[u8]] = &[b"a=1; UID = abc ; uid=zzz", b"uid=later"];
        assert_eq!(find(h, b"uid").map(|(v, _)| v), Some(&b"abc "[..]));
        assert_eq!(find(&[b"xuid=1, uid=2"], b"uid").map(|(v, _)| v), Some(&b"2"[..]));
        assert_eq!(find(&[b"uidx=1; uid"], b"uid"), None);
        assert_eq!(find(&[b"a=1", b"uid=2"], b"uid").map(|(v, _)| v), Some(&b"2"[..]));
    }

    #[test]
    fn decodes_22_characters() {
        let Found::Got { uid, .. } = read(&[b"uid=fwAAAWWq7fQDAwMDAwMDAw=="], b"uid") else { panic!() };
        assert_eq!(&uid[..4], &[0x7f, 0, 0, 1]);
        let mut hex = Vec::new();
        hex_words(&uid, &mut hex);
        assert_eq!(hex.len(), 32);
        assert!(matches!(read(&[b"uid=short"], b"uid"), Found::TooShort { .. }));
        assert!(matches!(read(&[b"uid=fwAAAWWq7fQDAwMDAw*MDAw=="], b"uid"), Found::Invalid { .. }));
        let Found::Got { uid, .. } = read(&[b"uid=fwAA=AAAAAAAAAAAAAAAAAAA"], b"uid") else { panic!() };
        assert_eq!(uid, [0x7f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
