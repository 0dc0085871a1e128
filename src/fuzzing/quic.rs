//! The parsers of QUIC bytes a client sends before any authentication:
//! the ClientHello's server name (`tls::quic`, read to choose the server
//! before the TLS session starts) and a datagram's destination connection
//! ID (`quic::cid`, read for every datagram to route it); and HTTP/3's
//! QPACK decoder (the vendored `h3`'s `qpack::session`), which reads the
//! client's encoder stream and field sections.

use crate::quic::cid;
use crate::tls::quic::{Hello, client_hello_sni};

/// The ClientHello reader: never panics; a complete answer does not
/// change with bytes after the message; every prefix of a message it
/// completes is `Incomplete`; a name is non-empty printable ASCII.
pub fn client_hello(data: &[u8]) {
    let whole = client_hello_sni(data);
    if let Hello::Done(name) = &whole {
        if let Some(n) = name {
            assert!(!n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic()), "{n:?}");
        }
        let len = 4 + ((usize::from(data[1]) << 16) | (usize::from(data[2]) << 8) | usize::from(data[3]));
        assert!(len <= data.len());
        assert_eq!(client_hello_sni(&data[..len]), whole, "the bytes after the message changed it");
        for cut in [0, 1, 3, 4, len / 2, len - 1] {
            if cut < len {
                assert_eq!(client_hello_sni(&data[..cut]), Hello::Incomplete, "prefix {cut} of {len}");
            }
        }
    }
}

/// The destination connection ID: never panics; what it finds lies within
/// the datagram where the header says; an ID of ours names the slot it
/// was made for.
pub fn quic_cid(data: &[u8]) {
    if let Some(id) = cid::destination(data) {
        let start = id.as_ptr() as usize - data.as_ptr() as usize;
        assert!(start == 1 || start == 6, "{start}");
        assert!(start + id.len() <= data.len());
        if data[0] & 0x80 == 0 {
            assert_eq!(id.len(), cid::LEN);
        }
    }
    let _ = cid::owner(data);
    if data.len() >= 6 {
        let slot = u16::from_be_bytes([data[0], data[1]]);
        let rand = u32::from_be_bytes([data[2], data[3], data[4], data[5]]);
        let mut short = vec![0x40];
        short.extend_from_slice(&cid::encode(slot, rand));
        short.extend_from_slice(&data[6..]);
        assert_eq!(cid::owner(&short), Some(slot));
    }
}

/// The QPACK decoder with its dynamic table: the properties are the
/// vendored `h3`'s (`qpack::session::fuzz`): no panic, and the encoder
/// stream read in one piece or two gives the same table and sections.
pub fn qpack_decoder(data: &[u8]) {
    h3::qpack_decoder_fuzz(data);
}
