//! Decoding the header blocks a client sends (RFC 7541 sections 3 and 6).

use super::table::{Dynamic, STATIC};
use super::{Error, get_int, get_str_as, int_overlong};

/// One connection's decoding state. A header block must be decoded whole
/// even when its request will be refused, or the dynamic tables of the two
/// ends disagree from then on; so the caller is told about each field and
/// decides about the request, while only a broken block is an error here.
#[derive(Debug)]
pub struct Decoder {
    table: Dynamic,
    /// Our SETTINGS_HEADER_TABLE_SIZE: the largest size update allowed.
    limit: usize,
    /// The longest string literal taken (`large_client_header_buffers`'
    /// buffer size, as nginx bounds each field).
    field_limit: usize,
    name: Vec<u8>,
    value: Vec<u8>,
    /// Taking a whole byte of Huffman padding (an origin's blocks, as
    /// nginx's grpc module takes them).
    lenient: bool,
}

/// Called with each decoded field: name, value and how it was sent.
pub type Emit<'e> = dyn FnMut(&[u8], &[u8], Rep) + 'e;

/// How the client sent a field; `NeverIndexed` marks a value an
/// intermediary must not compress (RFC 7541 section 7.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rep {
    Indexed,
    Incremental,
    NotIndexed,
    NeverIndexed,
}

impl Decoder {
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: Dynamic::new(limit),
            limit,
            field_limit: usize::MAX,
            name: Vec::new(),
            value: Vec::new(),
            lenient: false,
        }
    }

    /// Refuses string literals longer than `n` (`Error::FieldTooLarge`).
    pub fn with_field_limit(mut self, n: usize) -> Decoder {
        self.field_limit = n;
        self
    }

    /// A decoder for an origin's blocks, lenient as nginx's grpc module.
    pub fn lenient(limit: usize) -> Decoder {
        Decoder { lenient: true, ..Decoder::new(limit) }
    }

    /// The dynamic table's current maximum and its entry count.
    pub fn table_state(&self) -> (usize, usize) {
        (self.table.max(), self.table.len())
    }

    /// Decodes one complete header block, calling `emit` with each field
    /// in order.
    pub fn decode(&mut self, block: &[u8], emit: &mut Emit<'_>) -> Result<(), Error> {
        let Decoder { table, limit, field_limit, name: nbuf, value: vbuf, lenient } = self;
        let (field_limit, lenient) = (*field_limit, *lenient);
        let mut pos = 0;
        let mut updates_allowed = true;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                let i = get_int(block, &mut pos, 7)?;
                let (n, v) = lookup(table, i)?;
                emit(n, v, Rep::Indexed);
            } else if b & 0xe0 == 0x20 {
                if !updates_allowed {
                    return Err(Error::SizeUpdate);
                }
                let max = get_int(block, &mut pos, 5)?;
                if max > *limit {
                    return Err(Error::SizeUpdate);
                }
                table.set_max(max);
                continue;
            } else {
                let (prefix, rep) = match b & 0xf0 {
                    0x40..=0x70 => (6, Rep::Incremental),
                    0x10 => (4, Rep::NeverIndexed),
                    _ => (4, Rep::NotIndexed),
                };
                let i = get_int(block, &mut pos, prefix)?;
                let name: &[u8] = if i == 0 {
                    get_str_as(block, &mut pos, nbuf, field_limit, lenient)?
                } else if i <= STATIC.len() {
                    STATIC[i - 1].0
                } else {
                    // A copy: inserting below may evict the entry.
                    let (n, _) = table.get(i - 62).ok_or(Error::BadIndex)?;
                    nbuf.clear();
                    nbuf.extend_from_slice(n);
                    &nbuf[..]
                };
                let value = get_str_as(block, &mut pos, vbuf, field_limit, lenient)?;
                emit(name, value, rep);
                if rep == Rep::Incremental {
                    table.insert(name, value);
                }
            }
            updates_allowed = false;
        }
        Ok(())
    }
}

/// Walks the complete representations of a header block that has only
/// partly arrived, from `from`, looking at their integers alone (no table
/// is touched). An over-long integer is `Err(IntegerOverflow)` at once,
/// as nginx, which decodes as bytes come, refuses it before the frame is
/// whole; otherwise the offset where the first incomplete representation
/// starts, to resume from when more comes.
pub fn scan_partial(partial: &[u8], from: usize) -> Result<usize, Error> {
    // One integer: Ok(Some(value)), Ok(None) when it has not all come.
    let int = |pos: &mut usize, prefix: u32| -> Result<Option<usize>, Error> {
        match int_overlong(partial, *pos, prefix) {
            None => Ok(None),
            Some(true) => Err(Error::IntegerOverflow),
            Some(false) => Ok(get_int(partial, pos, prefix).ok()),
        }
    };
    let string = |pos: &mut usize| -> Result<bool, Error> {
        let Some(len) = int(pos, 7)? else { return Ok(false) };
        *pos = pos.saturating_add(len);
        Ok(*pos <= partial.len())
    };
    let mut start = from;
    while start < partial.len() {
        let b = partial[start];
        let mut pos = start;
        let complete = if b & 0x80 != 0 {
            int(&mut pos, 7)?.is_some()
        } else if b & 0xe0 == 0x20 {
            int(&mut pos, 5)?.is_some()
        } else {
            let prefix = if b & 0xc0 == 0x40 { 6 } else { 4 };
            match int(&mut pos, prefix)? {
                None => false,
                Some(0) => string(&mut pos)? && string(&mut pos)?,
                Some(_) => string(&mut pos)?,
            }
        };
        if !complete {
            break;
        }
        start = pos;
    }
    Ok(start)
}

fn lookup(table: &Dynamic, i: usize) -> Result<(&[u8], &[u8]), Error> {
    match i {
        0 => Err(Error::BadIndex),
        1..=61 => Ok(STATIC[i - 1]),
        _ => table.get(i - 62).ok_or(Error::BadIndex),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn fields(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, Error> {
        let mut out = Vec::new();
        d.decode(block, &mut |n, v, _| {
            out.push((String::from_utf8_lossy(n).into_owned(), String::from_utf8_lossy(v).into_owned()))
        })?;
        Ok(out)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// RFC 7541 C.4: three requests with Huffman coding, one connection.
    #[test]
    fn rfc_c4_requests() {
        let mut d = Decoder::new(4096);
        let r1 = fields(&mut d, &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff")).unwrap();
        assert_eq!(
            r1,
            pairs(&[(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")])
        );
        let r2 = fields(&mut d, &hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(
            r2,
            pairs(&[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache")
            ])
        );
        let r3 = fields(&mut d, &hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf")).unwrap();
        assert_eq!(
            r3,
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value")
            ])
        );
        assert_eq!(d.table_state(), (4096, 3));
    }

    #[test]
    fn broken_blocks_are_errors() {
        let mut d = Decoder::new(4096);
        assert_eq!(fields(&mut d, &[0x80]), Err(Error::BadIndex));
        assert_eq!(fields(&mut d, &[0xbe]), Err(Error::BadIndex));
        // A size update after a field.
        assert_eq!(fields(&mut d, &[0x82, 0x20]), Err(Error::SizeUpdate));
        // A size update above our setting.
        assert_eq!(fields(&mut d, &[0x3f, 0xe2, 0x1f]), Err(Error::SizeUpdate));
        // A literal whose value runs past the block.
        assert_eq!(fields(&mut d, &[0x04, 0x05, b'/']), Err(Error::Truncated));
        // Size updates first are fine, down to 0 (which empties the table).
        assert_eq!(fields(&mut d, &[0x20, 0x3f, 0x11, 0x82]).unwrap(), pairs(&[(":method", "GET")]));
        assert_eq!(d.table_state(), (48, 0));
    }

    /// nginx's h2_headers.t "too long index" / "too long literal": the
    /// frame is not whole, yet its integer is already too long.
    #[test]
    fn partial_blocks_show_overlong_integers() {
        assert_eq!(scan_partial(&[0xff, 0xff, 0xff, 0xff], 0), Err(Error::IntegerOverflow));
        assert_eq!(scan_partial(&[0x42, 0xff, 0xff, 0xff, 0xff], 0), Err(Error::IntegerOverflow));
        assert_eq!(scan_partial(&[0x82, 0x42, 0x03, b'a'], 0), Ok(1));
        assert_eq!(scan_partial(&[0x82, 0x42, 0x01, b'a', 0x00], 0), Ok(4));
        assert_eq!(scan_partial(&[0x82, 0x42, 0x01, b'a', 0x00], 4), Ok(4));
        assert_eq!(scan_partial(&[0x40, 0x01, b'a', 0x01, b'b'], 0), Ok(5));
    }

    #[test]
    fn never_indexed_is_reported() {
        let mut d = Decoder::new(4096);
        let mut reps = Vec::new();
        d.decode(&[0x10, 0x01, b'a', 0x01, b'b'], &mut |n, v, r| {
            assert_eq!((n, v), (&b"a"[..], &b"b"[..]));
            reps.push(r)
        })
        .unwrap();
        assert_eq!(reps, [Rep::NeverIndexed]);
        assert_eq!(d.table_state(), (4096, 0));
    }
}
