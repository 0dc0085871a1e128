//! Parsers of the smaller HTTP modules: the userid module's cookie (client
//! bytes) and the memcached module's response lines (origin bytes).

use crate::http::userid::cookie::{self, Found};

/// The userid cookie: the first byte's low bits choose the cookie name's
/// length (from the input's next bytes), the rest is `Cookie` header
/// values, one a line. Never panics; what is found lies in a header and
/// follows `NAME=`; a decoded identifier printed as words gives 32 hex
/// digits, and an identifier written back as base64 reads the same.
pub fn userid_cookie(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let n = usize::from(first & 7).min(rest.len());
    let (name, rest) = rest.split_at(n);
    let name: &[u8] = if name.is_empty() || name.contains(&b'=') { b"uid" } else { name };
    let headers: Vec<&[u8]> = rest.split(|&b| b == b'\n').take(8).collect();
    if let Some((value, header)) = cookie::find(&headers, name) {
        assert!(headers.iter().any(|h| std::ptr::eq(*h, header)), "the header is one of the input's");
        let at = value.as_ptr() as usize - header.as_ptr() as usize;
        assert!(at + value.len() <= header.len());
        assert!(!value.contains(&b';'), "a value ends at ';'");
        assert!(header[..at].contains(&b'='), "a value follows '='");
    }
    match cookie::read(&headers, name) {
        Found::None => assert!(cookie::find(&headers, name).is_none()),
        Found::TooShort { .. } => {}
        Found::Invalid { .. } => {}
        Found::Got { uid, value } => {
            assert!(value.len() >= 22);
            let mut hex = Vec::new();
            cookie::hex_words(&uid, &mut hex);
            assert!(hex.len() == 32 && hex.iter().all(u8::is_ascii_hexdigit), "{hex:?}");
            let mut again = b"uid=".to_vec();
            crate::http::userid::encode(&uid, &mut again);
            let Found::Got { uid: back, .. } = cookie::read(&[&again[..]], b"uid") else {
                panic!("the identifier written back does not read")
            };
            assert_eq!(back, uid);
        }
    }
}
