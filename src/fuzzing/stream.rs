//! The stream family's parsers of untrusted bytes: the TLS ClientHello
//! read by `ssl_preread` (`stream::preread`).

use crate::stream::preread::{self, Parsed};

/// ClientHello preread: never panics; values lie inside the input; the
/// verdict does not depend on how the bytes arrived (a prefix of input
/// whose whole parses asks for more or gives the same answer, a prefix
/// refused means the whole is refused) nor on bytes after the message.
pub fn ssl_preread(data: &[u8]) {
    let whole = preread::parse(data);
    if let Parsed::Done(h) = &whole {
        assert!(h.server_name.len() <= data.len() && h.alpn.len() <= data.len());
        assert!(
            ["", "SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"].contains(&h.protocol),
            "{}",
            h.protocol
        );
        let mut more = data.to_vec();
        more.extend_from_slice(b"\x16\x03\x01\x00\x01\x01trailing");
        assert_eq!(preread::parse(&more), whole, "bytes after the message changed it");
    }
    let step = (data.len() / 64).max(1);
    for cut in (0..data.len()).step_by(step) {
        match preread::parse(&data[..cut]) {
            Parsed::Need => {}
            Parsed::NotTls => assert_eq!(whole, Parsed::NotTls, "prefix {cut} refused, the whole not"),
            done => assert_eq!(done, whole, "prefix {cut} decided otherwise"),
        }
    }
}
