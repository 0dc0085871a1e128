//! The encoder's sections decoded by the `h3` crate's own QPACK decoder.

use std::borrow::Cow;

use super::encode;
use crate::http::response::{Body, Response};

fn decode(resp: &Response<'_>) -> (Vec<(String, Vec<u8>)>, u64) {
    let (block, size) = encode(resp, false);
    let (fields, mem) = h3::decode_section_stateless(&block, u64::MAX).expect("decodes");
    assert_eq!(mem, size, "the size the encoder counts is the decoder's");
    (fields.into_iter().map(|(n, v)| (String::from_utf8(n).expect("ascii name"), v)).collect(), size)
}

fn get<'a>(f: &'a [(String, Vec<u8>)], name: &str) -> Vec<&'a [u8]> {
    f.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_slice()).collect()
}

#[test]
fn a_static_file_head_decodes_to_its_fields() {
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/plain"));
    r.body = Body::Static(b"hello world\n");
    r.last_modified = Some(784_111_777);
    r.etag = Some(b"\"2ebc5ba1-c\"".to_vec());
    r.accept_ranges = true;
    let (f, _) = decode(&r);
    assert_eq!(f[0], (":status".to_string(), b"200".to_vec()));
    assert_eq!(get(&f, "server"), [b"sluice"]);
    assert_eq!(get(&f, "date")[0].len(), 29);
    assert_eq!(get(&f, "content-type"), [b"text/plain"]);
    assert_eq!(get(&f, "content-length"), [b"12"]);
    assert_eq!(get(&f, "last-modified"), [b"Sun, 06 Nov 1994 08:49:37 GMT"]);
    assert_eq!(get(&f, "etag"), [b"\"2ebc5ba1-c\""]);
    assert_eq!(get(&f, "accept-ranges"), [b"bytes"]);
}

#[test]
fn statuses_outside_the_table_and_long_values_use_literals() {
    for code in [201u16, 301, 418, 502, 599, 200, 404, 503] {
        let mut r = Response::new(code);
        let long = vec![b'v'; 300];
        r.headers.push((Cow::Borrowed("X-Long"), long.clone().into()));
        let (f, _) = decode(&r);
        assert_eq!(f[0].1, code.to_string().into_bytes());
        assert_eq!(get(&f, "x-long"), [long.as_slice()]);
    }
}

#[test]
fn added_headers_keep_their_order_lowercase_and_skip_what_http3_forbids() {
    let mut r = Response::new(404);
    for (n, v) in [
        ("X-B", &b"1"[..]),
        ("Cache-Control", b"no-cache"),
        ("Connection", b"close"),
        ("x-a", b"2"),
        ("X-B", b"3"),
        ("Bad Name", b"4"),
        ("X-Ctl", b"a\x01b"),
        ("X-Crlf", b"a\r\nb"),
        ("Vary", b"Accept-Encoding"),
    ] {
        r.headers.push((Cow::Borrowed(n), v.to_vec().into()));
    }
    let (f, _) = decode(&r);
    let names: Vec<&str> = f.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [":status", "server", "date", "content-length", "x-b", "cache-control", "x-a", "x-b", "x-ctl", "vary"]
    );
    assert_eq!(get(&f, "x-b"), [b"1", b"3"]);
    assert_eq!(get(&f, "x-ctl"), [b"a\x01b"], "control bytes other than NUL, CR, LF go out, as nginx sends them");
}

#[test]
fn an_origins_server_and_date_replace_ours() {
    let mut r = Response::new(200);
    r.headers.push((Cow::Borrowed("Server"), b"origin".to_vec().into()));
    r.headers.push((Cow::Borrowed("Date"), b"Thu, 01 Jan 1970 00:00:00 GMT".to_vec().into()));
    let (f, _) = decode(&r);
    assert_eq!(get(&f, "server"), [b"origin"]);
    assert_eq!(get(&f, "date"), [b"Thu, 01 Jan 1970 00:00:00 GMT"]);
}

#[test]
fn no_length_without_a_body_and_the_mapped_statuses() {
    let mut r = Response::new(304);
    r.body = Body::Static(b"x");
    let (f, _) = decode(&r);
    assert!(get(&f, "content-length").is_empty());
    let (f, _) = decode(&Response::new(495));
    assert_eq!(f[0].1, b"400");
}

#[test]
fn values_are_huffman_coded_only_where_that_is_shorter() {
    // nginx's h3_headers.t: "aaaaa" goes Huffman-coded, "{{{{{" as is.
    let mut r = Response::new(200);
    r.headers.push((Cow::Borrowed("x-sent-foo"), b"aaaaa".to_vec().into()));
    r.headers.push((Cow::Borrowed("X-Rare"), b"{{{{{".to_vec().into()));
    let (block, _) = encode(&r, false);
    let has = |needle: &[u8]| block.windows(needle.len()).any(|w| w == needle);
    assert!(!has(b"aaaaa") && !has(b"x-sent-foo"), "coded");
    assert!(has(b"{{{{{"), "as is");
    let (f, _) = decode(&r);
    assert_eq!(get(&f, "x-sent-foo"), [b"aaaaa"]);
    assert_eq!(get(&f, "x-rare"), [b"{{{{{"]);
}
