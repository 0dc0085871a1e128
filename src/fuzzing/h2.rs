//! Fuzz entry points for sluice's own HTTP/2 codec: HPACK and frames.

use crate::http::connection::h2::frame::{self, Frame, HEAD_LEN, Head};
use crate::http::connection::h2::hpack::decode::{Decoder, Rep};
use crate::http::connection::h2::hpack::{Encoder, Indexing, huffman};

type Fields = Vec<(Vec<u8>, Vec<u8>, Rep)>;

fn decode_all(d: &mut Decoder, block: &[u8]) -> Result<Fields, crate::http::connection::h2::hpack::Error> {
    let mut out = Vec::new();
    d.decode(block, &mut |n, v, r| out.push((n.to_vec(), v.to_vec(), r)))?;
    Ok(out)
}

/// Header blocks from a client, decoded on one connection.
///
/// Input: a byte choosing our table size limit, then blocks, each a
/// length byte and that many bytes, and a byte choosing the limit the
/// re-encoding side is given. Asserts: the table never exceeds the limit;
/// what decodes, re-encoded by sluice's encoder (which must then announce
/// its own size changes correctly) decodes to the same fields on a second
/// decoder, kept across blocks as a client's would be; every value
/// survives a Huffman round trip.
pub fn hpack(data: &[u8]) {
    let Some((&pick, mut rest)) = data.split_first() else { return };
    let limit = [0, 64, 256, 4096][(pick & 3) as usize];
    let mut d = Decoder::new(limit);
    let mut e = Encoder::default();
    let mut peer = Decoder::new(4096);
    while let Some((&len, tail)) = rest.split_first() {
        let len = (len as usize).min(tail.len());
        let (block, tail) = tail.split_at(len);
        rest = tail;
        let Ok(fields) = decode_all(&mut d, block) else { return };
        assert!(d.table_state().0 <= limit);
        if let Some((&b, tail)) = rest.split_first() {
            rest = tail;
            if b & 0x80 != 0 {
                e.set_peer_limit([0, 50, 100, 4096, 1 << 20][(b % 5) as usize]);
            }
        }
        let mut out = Vec::new();
        e.begin(&mut out);
        for (n, v, r) in &fields {
            let indexing = match r {
                Rep::NeverIndexed => Indexing::Never,
                Rep::NotIndexed => Indexing::No,
                _ => Indexing::Yes,
            };
            e.field(n, v, indexing, &mut out);
            let mut h = Vec::new();
            huffman::encode(v, &mut h);
            assert_eq!(h.len(), huffman::encoded_len(v));
            let mut back = Vec::new();
            assert!(huffman::decode(&h, &mut back).is_ok());
            assert_eq!(&back, v);
        }
        let again = decode_all(&mut peer, &out).expect("sluice's own block decodes");
        assert_eq!(again.len(), fields.len());
        for ((n1, v1, r1), (n2, v2, r2)) in fields.iter().zip(&again) {
            assert_eq!((n1, v1), (n2, v2));
            assert_eq!(*r1 == Rep::NeverIndexed, *r2 == Rep::NeverIndexed);
        }
    }
}

/// Frames from a client, read one after another as the connection reads
/// them. Asserts: what parses borrows inside its own payload; DATA,
/// HEADERS without padding or priority, SETTINGS, PING, GOAWAY,
/// WINDOW_UPDATE and RST_STREAM written back by sluice's writers read back
/// the same.
pub fn h2_frame(data: &[u8]) {
    let mut rest = data;
    while rest.len() >= HEAD_LEN {
        let (h, tail) = rest.split_at(HEAD_LEN);
        let Ok(h) = <&[u8; HEAD_LEN]>::try_from(h) else { return };
        let mut head = Head::parse(h);
        let len = (head.len as usize).min(tail.len());
        head.len = len as u32;
        let (payload, tail) = tail.split_at(len);
        rest = tail;
        let Ok(f) = frame::parse(&head, payload) else { continue };
        let inside = |s: &[u8]| {
            let (p, q) = (payload.as_ptr() as usize, s.as_ptr() as usize);
            assert!(s.is_empty() || (q >= p && q + s.len() <= p + payload.len()));
        };
        let mut out = Vec::new();
        match &f {
            Frame::Data { stream, data, end_stream, flow } => {
                inside(data);
                assert_eq!(*flow as usize, payload.len());
                frame::write_data(&mut out, *stream, data, *end_stream);
            }
            Frame::Headers { stream, block, end_stream, priority: None, end_headers: true } => {
                inside(block);
                if head.flags & frame::PADDED == 0 {
                    frame::write_headers(&mut out, *stream, block, *end_stream, block.len().max(1 << 14));
                }
            }
            Frame::Headers { block, .. } | Frame::Continuation { block, .. } => inside(block),
            Frame::Settings { ack: false, params } => {
                let list: Vec<(u16, u32)> = frame::settings(params).collect();
                frame::write_settings(&mut out, &list);
            }
            Frame::GoAway { last_stream, code, debug } => {
                inside(debug);
                Head { len: 8 + debug.len() as u32, kind: frame::GOAWAY, flags: 0, stream: 0 }.write(&mut out);
                out.extend_from_slice(&last_stream.to_be_bytes());
                out.extend_from_slice(&code.to_be_bytes());
                out.extend_from_slice(debug);
            }
            Frame::WindowUpdate { stream, increment } => frame::write_window_update(&mut out, *stream, *increment),
            Frame::Ping { ack: true, data } => frame::write_ping_ack(&mut out, data),
            _ => {}
        }
        if out.is_empty() {
            continue;
        }
        let Ok(h2) = <&[u8; HEAD_LEN]>::try_from(&out[..HEAD_LEN]) else { return };
        let again = frame::parse(&Head::parse(h2), &out[HEAD_LEN..]);
        match (&f, again) {
            (
                Frame::Data { stream, data, end_stream, .. },
                Ok(Frame::Data { stream: s, data: d, end_stream: e, .. }),
            ) => {
                assert_eq!((stream, data, end_stream), (&s, &d, &e))
            }
            (_, Ok(g)) if !matches!(f, Frame::Data { .. }) => assert_eq!(f, g),
            (f, g) => panic!("{f:?} written back read as {g:?}"),
        }
    }
}
