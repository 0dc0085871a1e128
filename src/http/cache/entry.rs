//! One cache entry on disk: a self-checking header, then the body bytes.
//!
//! ```text
//! magic "SLUICEC1" | header_len u32 | crc32 u32 (of the header after it)
//! valid_until i64 | stale_updating u32 | stale_error u32 | stored i64
//! status u16 | body_len u64
//! key (u32 len) | vary names (u16 len) | variant md5 [16]
//! content type (u8 present, u16 len) | headers (u16 count; u16 name len,
//! name, u32 value len, value) ... | body (body_len bytes)
//! ```
//!
//! Everything is little-endian and length-prefixed, so [`decode`] reads a
//! header with bounds checks only: a truncated, corrupt or foreign file is
//! an error (the caller removes it and misses), never a panic or a wrong
//! body. The file's size must be exactly `header_len + body_len`, which
//! catches a body cut short by a crash; the CRC catches a damaged header.

pub const MAGIC: &[u8; 8] = b"SLUICEC1";
/// Headers larger than this are not entries of ours.
pub const MAX_HEADER: usize = 1 << 20;
/// Where `body_len` sits, patched when a streamed body's length is known.
const BODY_LEN_AT: usize = 16 + 8 + 4 + 4 + 8 + 2;

/// What an entry says about its response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Meta {
    /// Unix seconds after which the entry is expired.
    pub valid_until: i64,
    /// `stale-while-revalidate=` and `stale-if-error=` seconds.
    pub stale_updating: u32,
    pub stale_error: u32,
    /// When it was stored: a [`super::zone::stamp`] (unix microseconds,
    /// unique within the process, so a purge orders against it exactly).
    pub stored: i64,
    pub status: u16,
    pub body_len: u64,
    /// The full cache key, checked on every read (hash collisions and
    /// foreign files miss).
    pub key: Vec<u8>,
    /// The origin's `Vary` value when the entry is one variant.
    pub vary: Vec<u8>,
    pub variant: [u8; 16],
    pub content_type: Option<String>,
    pub headers: Vec<(String, Vec<u8>)>,
}

#[derive(Debug, PartialEq)]
pub enum EntryError {
    /// Fewer bytes than the header says: read more (or the file is short).
    Short(usize),
    /// Not an entry of ours, or damaged.
    Bad(&'static str),
}

/// The header's bytes for `m` (with its `body_len`).
pub fn encode(m: &Meta) -> Vec<u8> {
    let mut h =
        Vec::with_capacity(128 + m.key.len() + m.headers.iter().map(|(n, v)| n.len() + v.len() + 6).sum::<usize>());
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&m.valid_until.to_le_bytes());
    h.extend_from_slice(&m.stale_updating.to_le_bytes());
    h.extend_from_slice(&m.stale_error.to_le_bytes());
    h.extend_from_slice(&m.stored.to_le_bytes());
    h.extend_from_slice(&m.status.to_le_bytes());
    h.extend_from_slice(&m.body_len.to_le_bytes());
    h.extend_from_slice(&(m.key.len() as u32).to_le_bytes());
    h.extend_from_slice(&m.key);
    let vary = &m.vary[..m.vary.len().min(u16::MAX as usize)];
    h.extend_from_slice(&(vary.len() as u16).to_le_bytes());
    h.extend_from_slice(vary);
    h.extend_from_slice(&m.variant);
    match &m.content_type {
        Some(t) => {
            let t = &t.as_bytes()[..t.len().min(u16::MAX as usize)];
            h.push(1);
            h.extend_from_slice(&(t.len() as u16).to_le_bytes());
            h.extend_from_slice(t);
        }
        None => h.push(0),
    }
    let headers: Vec<_> =
        m.headers.iter().filter(|(n, _)| n.len() <= u16::MAX as usize).take(u16::MAX as usize).collect();
    h.extend_from_slice(&(headers.len() as u16).to_le_bytes());
    for (n, v) in headers {
        h.extend_from_slice(&(n.len() as u16).to_le_bytes());
        h.extend_from_slice(n.as_bytes());
        h.extend_from_slice(&(v.len() as u32).to_le_bytes());
        h.extend_from_slice(v);
    }
    seal(&mut h);
    h
}

/// Sets a header's length and checksum fields.
fn seal(h: &mut [u8]) {
    let len = h.len() as u32;
    h[8..12].copy_from_slice(&len.to_le_bytes());
    let crc = crate::upstream::balance::hash::crc32(&h[16..]);
    h[12..16].copy_from_slice(&crc.to_le_bytes());
}

/// Writes the final body length into an encoded header.
pub fn set_body_len(h: &mut [u8], len: u64) {
    if h.len() >= BODY_LEN_AT + 8 {
        h[BODY_LEN_AT..BODY_LEN_AT + 8].copy_from_slice(&len.to_le_bytes());
        seal(h);
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], EntryError> {
        let end = self.at.checked_add(n).ok_or(EntryError::Bad("length overflow"))?;
        let s = self.b.get(self.at..end).ok_or(EntryError::Bad("field past the header"))?;
        self.at = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], EntryError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u16(&mut self) -> Result<u16, EntryError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, EntryError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, EntryError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, EntryError> {
        Ok(i64::from_le_bytes(self.array()?))
    }
}

/// The header length an entry's first 16 bytes announce.
pub fn header_len(b: &[u8]) -> Result<usize, EntryError> {
    if b.len() < 16 {
        return Err(EntryError::Short(16));
    }
    if &b[..8] != MAGIC {
        return Err(EntryError::Bad("no entry magic"));
    }
    let len = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
    if !(BODY_LEN_AT + 8..=MAX_HEADER).contains(&len) {
        return Err(EntryError::Bad("header length out of range"));
    }
    Ok(len)
}

/// Reads an entry's header from the start of `b`; returns it and its
/// length (where the body starts).
pub fn decode(b: &[u8]) -> Result<(Meta, usize), EntryError> {
    let len = header_len(b)?;
    if b.len() < len {
        return Err(EntryError::Short(len));
    }
    let h = &b[..len];
    let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if crc != crate::upstream::balance::hash::crc32(&h[16..]) {
        return Err(EntryError::Bad("header checksum mismatch"));
    }
    let mut r = Reader { b: h, at: 16 };
    let mut m = Meta {
        valid_until: r.i64()?,
        stale_updating: r.u32()?,
        stale_error: r.u32()?,
        stored: r.i64()?,
        status: r.u16()?,
        body_len: r.u64()?,
        ..Meta::default()
    };
    let n = r.u32()? as usize;
    m.key = r.take(n)?.to_vec();
    let n = r.u16()? as usize;
    m.vary = r.take(n)?.to_vec();
    m.variant = r.array()?;
    m.content_type = match r.take(1)?[0] {
        0 => None,
        1 => {
            let n = r.u16()? as usize;
            Some(String::from_utf8(r.take(n)?.to_vec()).map_err(|_| EntryError::Bad("content type not UTF-8"))?)
        }
        _ => return Err(EntryError::Bad("content type flag")),
    };
    let count = r.u16()? as usize;
    m.headers.reserve(count);
    for _ in 0..count {
        let n = r.u16()? as usize;
        let name = String::from_utf8(r.take(n)?.to_vec()).map_err(|_| EntryError::Bad("header name not UTF-8"))?;
        let n = r.u32()? as usize;
        m.headers.push((name, r.take(n)?.to_vec()));
    }
    if r.at != len {
        return Err(EntryError::Bad("trailing bytes in header"));
    }
    if !(100..=999).contains(&m.status) {
        return Err(EntryError::Bad("status out of range"));
    }
    Ok((m, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            valid_until: 1_900_000_000,
            stale_updating: 5,
            stale_error: 60,
            stored: 1_800_000_000,
            status: 200,
            body_len: 0,
            key: b"httplocalhost/a?b".to_vec(),
            vary: b"Accept-Language".to_vec(),
            variant: [7; 16],
            content_type: Some("text/html".into()),
            headers: vec![("ETag".into(), b"\"x\"".to_vec()), ("X-A".into(), Vec::new())],
        }
    }

    #[test]
    fn round_trips_and_patches_the_body_length() {
        let mut m = sample();
        let mut h = encode(&m);
        set_body_len(&mut h, 12345);
        m.body_len = 12345;
        let (d, len) = decode(&h).expect("decodes");
        assert_eq!(d, m);
        assert_eq!(len, h.len());
        let mut with_body = h.clone();
        with_body.extend_from_slice(b"body");
        assert_eq!(decode(&with_body).map(|(_, l)| l), Ok(h.len()));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused_not_misread() {
        let h = encode(&sample());
        for cut in 0..h.len() {
            assert!(decode(&h[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..h.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = h.clone();
                bad[at] ^= bit;
                // A flipped bit either fails the checks or (in the length
                // field) asks for more bytes than there are.
                assert!(decode(&bad).is_err(), "flip {bit:#x} at {at}");
            }
        }
        assert!(decode(b"GET / HTTP/1.1\r\n\r\n").is_err());
        assert!(decode(&[0u8; 64]).is_err());
    }
}
