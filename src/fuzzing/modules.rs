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

/// A memcached server's answer. First byte: bit 0 a HEAD request, bit 1
/// a gzip flag of 2, bits 4-7 the key's length (taken from the input's
/// next bytes); the rest is the answer, also split at the points its
/// last byte chooses. Never panics; a whole line is needed and every
/// shorter prefix waits; the head's length lies inside the input; `END`
/// is 404, a value 200; the value is the same whole and in pieces, never
/// longer than declared, and complete only with its trailer (or a bad
/// one).
pub fn memcached_response(data: &[u8]) {
    use crate::http::memcached::response::{Value, parse};
    use crate::http::proxy::response_head::Framing;
    let Some((&first, rest)) = data.split_first() else { return };
    let head_request = first & 1 != 0;
    let gzip = if first & 2 != 0 { 2 } else { 0 };
    let n = usize::from(first >> 4).min(rest.len());
    let (key, answer) = rest.split_at(n);
    let Ok(Some(head)) = parse(answer, key, gzip, head_request) else {
        if let Ok(None) = parse(answer, key, gzip, head_request) {
            assert!(!answer.contains(&b'\n'), "a whole line must decide");
        }
        return;
    };
    assert!(head.head_len <= answer.len() && answer[head.head_len - 1] == b'\n');
    assert!(matches!(head.status, 200 | 404));
    for cut in 0..head.head_len {
        assert!(matches!(parse(&answer[..cut], key, gzip, head_request), Ok(None)), "prefix {cut} decided");
    }
    let Framing::Memcached(v) = head.framing else { return };
    let body = &answer[head.head_len..];
    let run = |cuts: &[usize]| {
        let mut v = Value::new(v.len);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut at = 0;
        for &c in cuts.iter().chain(std::iter::once(&body.len())) {
            let c = c.clamp(at, body.len());
            buf.extend_from_slice(&body[at..c]);
            at = c;
            let used = v.decode(&buf, 4096, &mut |d| out.extend_from_slice(d));
            buf.drain(..used);
            if v.is_done() {
                break;
            }
        }
        // Drain what the 4096-byte cap left.
        while !v.is_done() {
            let used = v.decode(&buf, 4096, &mut |d| out.extend_from_slice(d));
            if used == 0 {
                break;
            }
            buf.drain(..used);
        }
        (out, v.is_done(), v.invalid)
    };
    let whole = run(&[]);
    assert!(whole.0.len() as u64 <= v.len && body.starts_with(&whole.0));
    if whole.1 && !whole.2 {
        assert_eq!(whole.0.len() as u64, v.len);
    }
    let step = usize::from(*data.last().unwrap_or(&1)).max(1);
    let cuts: Vec<usize> = (step..body.len()).step_by(step).collect();
    let split = run(&cuts);
    assert_eq!(split.0, whole.0, "the value depends on how it was split");
    assert_eq!(split.1, whole.1);
}
