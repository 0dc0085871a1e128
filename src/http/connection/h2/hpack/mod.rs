//! HPACK (RFC 7541), the header compression of HTTP/2, for sluice's own
//! server-side HTTP/2 codec.
//!
//! Why not the `h2` crate's: a small HTTP/2 request spends about 5,400
//! user-space instructions in `h2`'s HPACK (of 42,000 in all, against
//! 7,600 for a whole request in h2o; callgrind, see docs/benchmarks.md).
//! Its encoder hashes every header into an index and copies it into
//! `http` types first; its decoder builds `HeaderName`s and `Bytes`.
//! Here decoding hands the caller borrowed slices (of the header block
//! itself when a string is not Huffman-coded, of the table or one scratch
//! buffer otherwise), and encoding writes straight into the frame buffer.
//!
//! * `huffman`: the Huffman code, decoded a nibble at a time.
//! * `memo`: the codings of short strings that repeat, per thread.
//! * `table`: the static table and the dynamic table.
//! * `decode`: header blocks from the client.
//! * `encode`: response header blocks.

pub mod decode;
pub mod encode;
pub use hpack_huffman as huffman;
mod memo;
pub mod table;

pub use decode::Decoder;
pub use encode::{Encoder, Indexing};

/// Why a header block could not be decoded. Each is a connection error
/// (the two ends' tables can no longer be trusted to agree): of type
/// COMPRESSION_ERROR (RFC 9113 section 4.3), except where `code` says
/// nginx answers otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The block ends inside a representation.
    Truncated,
    /// The block ends inside a multi-byte integer: nginx's "header block
    /// with incorrect length", a FRAME_SIZE_ERROR.
    IntTruncated,
    /// An integer of more than `INT_OCTETS` bytes, as nginx limits them.
    IntegerOverflow,
    /// A string literal longer than the field limit (nginx: one
    /// `large_client_header_buffers` buffer): ENHANCE_YOUR_CALM.
    FieldTooLarge,
    /// Index 0, or past the end of the dynamic table.
    BadIndex,
    /// A Huffman-coded string that is not valid.
    Huffman,
    /// A table size update above the limit we announced, or after the
    /// first header field of the block (RFC 7541 section 4.2).
    SizeUpdate,
}

/// The most bytes an integer may take, its prefix byte included: nginx's
/// `NGX_HTTP_V2_INT_OCTETS` (values up to 2^21 plus the prefix's).
pub const INT_OCTETS: usize = 4;

/// Reads the integer with an `prefix`-bit prefix at `pos` (RFC 7541 5.1).
/// One cut short by the end of the block is `IntTruncated`, one still
/// going after `INT_OCTETS` bytes `IntegerOverflow`, in nginx's order:
/// an over-long integer the block ends in is the block's length error.
pub fn get_int(block: &[u8], pos: &mut usize, prefix: u32) -> Result<usize, Error> {
    let mask = ((1u32 << prefix) - 1) as u8;
    let start = *pos;
    let first = *block.get(start).ok_or(Error::Truncated)? & mask;
    *pos += 1;
    if first < mask {
        return Ok(first as usize);
    }
    let mut value = mask as usize;
    let mut shift = 0;
    loop {
        if *pos - start == INT_OCTETS {
            return Err(if *pos >= block.len() { Error::IntTruncated } else { Error::IntegerOverflow });
        }
        let b = *block.get(*pos).ok_or(Error::IntTruncated)?;
        *pos += 1;
        value += ((b & 0x7f) as usize) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Whether the bytes at `pos` start an integer that can already be seen
/// to be over-long, though the rest of its block has not arrived: nginx
/// parses a header block as it comes and refuses one at once.
pub fn int_overlong(partial: &[u8], pos: usize, prefix: u32) -> Option<bool> {
    let mask = ((1u32 << prefix) - 1) as u8;
    if *partial.get(pos)? & mask < mask {
        return Some(false);
    }
    for i in 1..INT_OCTETS {
        if *partial.get(pos + i)? & 0x80 == 0 {
            return Some(false);
        }
    }
    Some(true)
}

/// Writes `v` with a `prefix`-bit prefix; `first` holds the bits above it.
pub fn put_int(dst: &mut Vec<u8>, first: u8, prefix: u32, mut v: usize) {
    let mask = (1usize << prefix) - 1;
    if v < mask {
        dst.push(first | v as u8);
        return;
    }
    dst.push(first | mask as u8);
    v -= mask;
    while v >= 0x80 {
        dst.push(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Reads a string literal at `pos`: borrowed from the block when it is
/// raw, decoded into `buf` when it is Huffman-coded. Its length on the
/// wire may not pass `limit`.
pub fn get_str<'a>(block: &'a [u8], pos: &mut usize, buf: &'a mut Vec<u8>, limit: usize) -> Result<&'a [u8], Error> {
    get_str_as(block, pos, buf, limit, false)
}

/// [`get_str`], lenient about a whole byte of Huffman padding when
/// `lenient` ([`huffman::decode_lenient`]).
pub fn get_str_as<'a>(
    block: &'a [u8],
    pos: &mut usize,
    buf: &'a mut Vec<u8>,
    limit: usize,
    lenient: bool,
) -> Result<&'a [u8], Error> {
    let huffman = *block.get(*pos).ok_or(Error::Truncated)? & 0x80 != 0;
    let len = get_int(block, pos, 7)?;
    if len > limit {
        return Err(Error::FieldTooLarge);
    }
    let end = pos.checked_add(len).filter(|&e| e <= block.len()).ok_or(Error::Truncated)?;
    let raw = &block[*pos..end];
    *pos = end;
    if !huffman {
        return Ok(raw);
    }
    buf.clear();
    let kind = if lenient { memo::Kind::DecodeLenient } else { memo::Kind::Decode };
    if memo::get(kind, raw, buf) {
        return Ok(&buf[..]);
    }
    let decoded = if lenient { huffman::decode_lenient(raw, buf) } else { huffman::decode(raw, buf) };
    decoded.map_err(|_| Error::Huffman)?;
    memo::put(kind, raw, buf);
    Ok(&buf[..])
}

/// Writes a string literal, Huffman-coded when that is shorter.
pub fn put_str(dst: &mut Vec<u8>, s: &[u8]) {
    if memo::get(memo::Kind::Encode, s, dst) {
        return;
    }
    let start = dst.len();
    let h = huffman::encoded_len(s);
    if h < s.len() {
        put_int(dst, 0x80, 7, h);
        huffman::encode(s, dst);
    } else {
        put_int(dst, 0, 7, s.len());
        dst.extend_from_slice(s);
    }
    memo::put(memo::Kind::Encode, s, &dst[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7541 C.1: 10 and 1337 with a 5-bit prefix, 42 with 8 bits.
    #[test]
    fn integers() {
        for (v, prefix, wire) in [(10, 5, &[0x0a][..]), (1337, 5, &[0x1f, 0x9a, 0x0a]), (42, 8, &[0x2a])] {
            let mut out = Vec::new();
            put_int(&mut out, 0, prefix, v);
            assert_eq!(out, wire);
            let mut pos = 0;
            assert_eq!(get_int(&out, &mut pos, prefix), Ok(v));
            assert_eq!(pos, out.len());
        }
        let mut pos = 0;
        assert_eq!(get_int(&[0x1f, 0xff, 0xff, 0xff, 0x01], &mut pos, 5), Err(Error::IntegerOverflow));
        pos = 0;
        assert_eq!(get_int(&[0x1f, 0xff, 0xff, 0xff], &mut pos, 5), Err(Error::IntTruncated));
        pos = 0;
        assert_eq!(get_int(&[0x1f, 0xff], &mut pos, 5), Err(Error::IntTruncated));
        assert_eq!(int_overlong(&[0xff, 0xff, 0xff, 0xff], 0, 7), Some(true));
        assert_eq!(int_overlong(&[0xff, 0xff, 0x7f, 0xff], 0, 7), Some(false));
        assert_eq!(int_overlong(&[0xff, 0xff], 0, 7), None);
        for v in [0, 30, 31, 127, 128, 255, 4096, 1 << 20, (1 << 21) + 30] {
            let mut out = Vec::new();
            put_int(&mut out, 0xe0, 5, v);
            let mut pos = 0;
            assert_eq!(get_int(&out, &mut pos, 5), Ok(v), "{v}");
        }
    }
}
