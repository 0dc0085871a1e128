//! HPACK (RFC 7541) for the raw HTTP/2 test client: an encoder with
//! literals (without or with incremental indexing, no Huffman) and indexed
//! references, and a decoder with the static and dynamic tables and Huffman,
//! so responses can be read with their status.

use std::collections::VecDeque;

// ---------------------------------------------------------------------------
// HPACK encoding (RFC 7541), no Huffman

/// An integer with an N-bit prefix; `first` holds the representation's
/// high bits.
pub fn hpack_int(out: &mut Vec<u8>, prefix_bits: u8, first: u8, mut value: usize) {
    let max = (1usize << prefix_bits) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 7, 0x00, s.len());
    out.extend_from_slice(s);
}

/// Literal header field without indexing, new name.
pub fn hpack_literal(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x00);
    hpack_str(out, name.as_bytes());
    hpack_str(out, value);
}

/// Literal header field with incremental indexing, new name: the field
/// enters the server's dynamic table (at index 62, pushing others down).
pub fn hpack_literal_indexed(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(0x40);
    hpack_str(out, name.as_bytes());
    hpack_str(out, value);
}

/// Indexed header field (static 1..=61, dynamic from 62).
pub fn hpack_indexed(out: &mut Vec<u8>, index: usize) {
    hpack_int(out, 7, 0x80, index);
}

/// Dynamic table size update (only at the start of a block).
pub fn hpack_size_update(out: &mut Vec<u8>, size: usize) {
    hpack_int(out, 5, 0x20, size);
}

/// A request header block: the four pseudo-headers then `extra`, all as
/// literals without indexing.
pub fn request_block(method: &str, path: &str, authority: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::with_capacity(64);
    hpack_literal(&mut b, ":method", method.as_bytes());
    hpack_literal(&mut b, ":scheme", b"http");
    hpack_literal(&mut b, ":path", path.as_bytes());
    hpack_literal(&mut b, ":authority", authority.as_bytes());
    for (n, v) in extra {
        hpack_literal(&mut b, n, v.as_bytes());
    }
    b
}

/// `GET path` on localhost.
pub fn get_block(path: &str) -> Vec<u8> {
    request_block("GET", path, "localhost", &[])
}

// ---------------------------------------------------------------------------
// HPACK decoding

/// RFC 7541 Appendix A, entries 1..=61 separated by '|', name and value
/// separated by the first space.
const STATIC_TABLE: &str = ":authority|:method GET|:method POST|:path /|:path /index.html|:scheme http|:scheme https|\
     :status 200|:status 204|:status 206|:status 304|:status 400|:status 404|:status 500|\
     accept-charset|accept-encoding gzip, deflate|accept-language|accept-ranges|accept|\
     access-control-allow-origin|age|allow|authorization|cache-control|content-disposition|\
     content-encoding|content-language|content-length|content-location|content-range|content-type|\
     cookie|date|etag|expect|expires|from|host|if-match|if-modified-since|if-none-match|if-range|\
     if-unmodified-since|last-modified|link|location|max-forwards|proxy-authenticate|\
     proxy-authorization|range|referer|refresh|retry-after|server|set-cookie|\
     strict-transport-security|transfer-encoding|user-agent|vary|via|www-authenticate";

fn static_entry(index: usize) -> (String, String) {
    let e = STATIC_TABLE.split('|').nth(index - 1).expect("static index");
    let (n, v) = e.split_once(' ').unwrap_or((e, ""));
    (n.to_string(), v.to_string())
}

/// Huffman code lengths of symbols 0..=255 (RFC 7541 Appendix B), one
/// character each: '5'..'9' then 'A' = 10 .. 'U' = 30. EOS (256) is 30.
/// The code is canonical, so lengths determine the codes.
const HUFFMAN_LENGTHS: &str = "DNSSSSSSSOUSSUSSSSSSSSUSSSSSSSSS6AACD68BAA8B8666555666666678F6CA\
    D67777777777777777777777878DJDE6F56565666577666567655677777FBEDS\
    KMKKMMMNMNNNNNONOOMNONNNNLMNMNNOMLKMMNNLNMMOLMNNLLMLNMNNKMMMNMMN\
    QQKJMNMPQQQRRQOPJLQRRQROLLQQSRRRKOKLMLLNMMPPOOQNQRQQRRRRRSRRRRRQ";

/// (code, length) -> symbol, sorted for binary search.
fn huffman_codes() -> &'static Vec<((u8, u32), u16)> {
    static CODES: std::sync::OnceLock<Vec<((u8, u32), u16)>> = std::sync::OnceLock::new();
    CODES.get_or_init(|| {
        let mut lens: Vec<(u8, u16)> = HUFFMAN_LENGTHS
            .bytes()
            .enumerate()
            .map(|(sym, c)| (if c.is_ascii_digit() { c - b'0' } else { c - b'A' + 10 }, sym as u16))
            .collect();
        assert_eq!(lens.len(), 256);
        lens.push((30, 256));
        lens.sort();
        let mut out = Vec::with_capacity(257);
        let mut code: u32 = 0;
        let mut prev = lens[0].0;
        for (i, &(len, sym)) in lens.iter().enumerate() {
            if i > 0 {
                code = (code + 1) << (len - prev);
            }
            prev = len;
            out.push(((len, code), sym));
        }
        out.sort();
        out
    })
}

pub fn huffman_decode(src: &[u8]) -> Result<Vec<u8>, String> {
    let codes = huffman_codes();
    let mut out = Vec::with_capacity(src.len() * 8 / 5);
    let (mut code, mut len) = (0u32, 0u8);
    for &byte in src {
        for bit in (0..8).rev() {
            code = (code << 1) | ((byte >> bit) & 1) as u32;
            len += 1;
            if len >= 5
                && let Ok(i) = codes.binary_search_by(|probe| probe.0.cmp(&(len, code)))
            {
                let sym = codes[i].1;
                if sym == 256 {
                    return Err("EOS in Huffman string".into());
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            }
            if len > 30 {
                return Err("invalid Huffman code".into());
            }
        }
    }
    // Padding: fewer than 8 bits, all ones (a prefix of EOS).
    if len > 7 || code != (1 << len) - 1 {
        return Err("invalid Huffman padding".into());
    }
    Ok(out)
}

/// An HPACK decoder with its dynamic table.
pub struct Decoder {
    table: VecDeque<(String, String)>,
    size: usize,
    max_size: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { table: VecDeque::new(), size: 0, max_size: 4096 }
    }
}

fn read_int(b: &[u8], pos: &mut usize, prefix_bits: u8) -> Result<usize, String> {
    let max = (1usize << prefix_bits) - 1;
    let first = *b.get(*pos).ok_or("truncated integer")? as usize & max;
    *pos += 1;
    if first < max {
        return Ok(first);
    }
    let (mut v, mut shift) = (max, 0u32);
    loop {
        let byte = *b.get(*pos).ok_or("truncated integer")?;
        *pos += 1;
        v += ((byte & 0x7f) as usize) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
        if shift > 28 {
            return Err("integer too large".into());
        }
    }
}

fn read_str(b: &[u8], pos: &mut usize) -> Result<String, String> {
    let huff = b.get(*pos).ok_or("truncated string")? & 0x80 != 0;
    let len = read_int(b, pos, 7)?;
    let raw = b.get(*pos..*pos + len).ok_or("truncated string")?;
    *pos += len;
    let bytes = if huff { huffman_decode(raw)? } else { raw.to_vec() };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

impl Decoder {
    fn get(&self, index: usize) -> Result<(String, String), String> {
        match index {
            0 => Err("index 0".into()),
            1..=61 => Ok(static_entry(index)),
            _ => self.table.get(index - 62).cloned().ok_or_else(|| format!("index {index} out of range")),
        }
    }

    fn insert(&mut self, name: String, value: String) {
        let sz = name.len() + value.len() + 32;
        self.table.push_front((name, value));
        self.size += sz;
        self.evict();
    }

    fn evict(&mut self) {
        while self.size > self.max_size {
            let Some((n, v)) = self.table.pop_back() else { break };
            self.size -= n.len() + v.len() + 32;
        }
    }

    /// Decodes one complete header block.
    pub fn decode(&mut self, b: &[u8]) -> Result<Vec<(String, String)>, String> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < b.len() {
            let c = b[pos];
            if c & 0x80 != 0 {
                let i = read_int(b, &mut pos, 7)?;
                out.push(self.get(i)?);
            } else if c & 0xe0 == 0x20 {
                self.max_size = read_int(b, &mut pos, 5)?;
                self.evict();
            } else {
                let (prefix, index) = if c & 0x40 != 0 { (6, true) } else { (4, false) };
                let i = read_int(b, &mut pos, prefix)?;
                let name = if i == 0 { read_str(b, &mut pos)? } else { self.get(i)?.0 };
                let value = read_str(b, &mut pos)?;
                if index {
                    self.insert(name.clone(), value.clone());
                }
                out.push((name, value));
            }
        }
        Ok(out)
    }
}
