//! Encoding response header blocks (RFC 7541 section 6).

use super::table::{Dynamic, STATIC, entry_size, static_name};
use super::{put_int, put_str};

/// The dynamic table size sluice uses for its responses at most; the
/// client's SETTINGS_HEADER_TABLE_SIZE can only lower it. 4096 is the
/// protocol's default, so a client that says nothing needs no update.
pub const MAX_TABLE: usize = 4096;

/// Whether a field should enter the dynamic table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    /// Values that repeat across responses (`server`, `content-type`,
    /// `date` within its second, a file's `etag`): sent once, then as one
    /// byte.
    Yes,
    /// Values that rarely repeat (`content-length`): not worth a slot.
    No,
    /// Values no intermediary may compress or index (RFC 7541 7.1.3).
    Never,
}

/// One connection's encoding state: a mirror of the client's decoding
/// table.
#[derive(Debug)]
pub struct Encoder {
    table: Dynamic,
    /// The table size the client's decoder was last told of.
    announced: usize,
    /// The smallest size the table had since the last block, when the
    /// client's limit changed since.
    low: Option<usize>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder { table: Dynamic::new(MAX_TABLE), announced: MAX_TABLE, low: None }
    }
}

impl Encoder {
    /// The client's SETTINGS_HEADER_TABLE_SIZE.
    pub fn set_peer_limit(&mut self, limit: usize) {
        let max = limit.min(MAX_TABLE);
        self.table.set_max(max);
        self.low = Some(self.low.map_or(max, |low| low.min(max)));
    }

    /// Starts a header block with the size updates the client must see
    /// first (RFC 7541 4.2): the smallest size since the last block when
    /// entries were evicted for it, then the size now.
    pub fn begin(&mut self, dst: &mut Vec<u8>) {
        let Some(low) = self.low.take() else { return };
        let max = self.table.max();
        if low < self.announced && low < max {
            put_int(dst, 0x20, 5, low);
        }
        if max != self.announced || low < max {
            put_int(dst, 0x20, 5, max);
        }
        self.announced = max;
    }

    /// `:status`: one byte for the seven codes of the static table.
    pub fn status(&mut self, code: u16, dst: &mut Vec<u8>) {
        let index = match code {
            200 => 8,
            204 => 9,
            206 => 10,
            304 => 11,
            400 => 12,
            404 => 13,
            500 => 14,
            _ => 0,
        };
        if index != 0 {
            dst.push(0x80 | index);
            return;
        }
        let mut digits = [b'0'; 3];
        let mut c = code.min(999);
        for d in digits.iter_mut().rev() {
            *d = b'0' + (c % 10) as u8;
            c /= 10;
        }
        // Literal without indexing, name `:status` (8).
        dst.push(0x08);
        put_str(dst, &digits);
    }

    /// A header field; `name` must be lowercase, as HTTP/2 requires.
    pub fn field(&mut self, name: &[u8], value: &[u8], indexing: Indexing, dst: &mut Vec<u8>) {
        let found = match indexing {
            Indexing::Never => None,
            _ => self.table.find(name, value),
        };
        if let Some((i, true)) = found {
            put_int(dst, 0x80, 7, STATIC.len() + 1 + i);
            return;
        }
        let name_index = static_name(name).or(found.map(|(i, _)| STATIC.len() + 1 + i)).unwrap_or(0);
        let index = indexing == Indexing::Yes && entry_size(name, value) <= self.table.max();
        match (index, indexing) {
            (true, _) => put_int(dst, 0x40, 6, name_index),
            (false, Indexing::Never) => put_int(dst, 0x10, 4, name_index),
            (false, _) => put_int(dst, 0x00, 4, name_index),
        }
        if name_index == 0 {
            put_str(dst, name);
        }
        put_str(dst, value);
        if index {
            self.table.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode::{Decoder, Rep};
    use super::*;

    fn decode(d: &mut Decoder, block: &[u8]) -> Vec<(Vec<u8>, Vec<u8>, Rep)> {
        let mut out = Vec::new();
        d.decode(block, &mut |n, v, r| out.push((n.to_vec(), v.to_vec(), r))).unwrap();
        out
    }

    #[test]
    fn repeated_headers_become_one_byte() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        let mut first = Vec::new();
        e.begin(&mut first);
        e.status(200, &mut first);
        e.field(b"server", b"sluice", Indexing::Yes, &mut first);
        e.field(b"content-type", b"text/plain", Indexing::Yes, &mut first);
        e.field(b"content-length", b"12", Indexing::No, &mut first);
        e.field(b"x-custom", b"1", Indexing::Yes, &mut first);
        let mut second = Vec::new();
        e.begin(&mut second);
        e.status(200, &mut second);
        e.field(b"server", b"sluice", Indexing::Yes, &mut second);
        e.field(b"content-type", b"text/plain", Indexing::Yes, &mut second);
        e.field(b"content-length", b"12", Indexing::No, &mut second);
        e.field(b"x-custom", b"1", Indexing::Yes, &mut second);
        // :status, three indexed fields, and content-length: two bytes of
        // name index (28 with a 4-bit prefix) and three of value.
        assert_eq!(second.len(), 1 + 3 + 5, "{second:02x?}");
        for block in [&first, &second] {
            let f = decode(&mut d, block);
            let names: Vec<&[u8]> = f.iter().map(|(n, _, _)| &n[..]).collect();
            assert_eq!(names, [&b":status"[..], b"server", b"content-type", b"content-length", b"x-custom"]);
            assert_eq!(f[4].1, b"1");
        }
    }

    #[test]
    fn statuses_and_never_indexed() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        for code in [200, 301, 404, 503, 101] {
            let mut b = Vec::new();
            e.begin(&mut b);
            e.status(code, &mut b);
            e.field(b"set-cookie", b"a=b", Indexing::Never, &mut b);
            let f = decode(&mut d, &b);
            assert_eq!(f[0].1, code.to_string().as_bytes());
            assert_eq!(f[1], (b"set-cookie".to_vec(), b"a=b".to_vec(), Rep::NeverIndexed));
        }
        assert_eq!(d.table_state(), (4096, 0));
    }

    /// A client that lowers its table size gets the update first in the
    /// next block, and the tables stay in step.
    #[test]
    fn table_size_changes_are_announced() {
        let mut e = Encoder::default();
        let mut d = Decoder::new(4096);
        let mut b = Vec::new();
        e.begin(&mut b);
        e.field(b"server", b"sluice", Indexing::Yes, &mut b);
        decode(&mut d, &b);
        e.set_peer_limit(0);
        e.set_peer_limit(100);
        b.clear();
        e.begin(&mut b);
        assert_eq!(&b[..2], &[0x20, 0x3f]);
        e.field(b"server", b"sluice", Indexing::Yes, &mut b);
        let f = decode(&mut d, &b);
        assert_eq!(f[0].1, b"sluice");
        assert_eq!(d.table_state(), (100, 1));
        // A limit above ours changes nothing on the wire.
        e.set_peer_limit(1 << 20);
        e.set_peer_limit(100);
        b.clear();
        e.begin(&mut b);
        assert!(b.is_empty(), "{b:02x?}");
    }
}
