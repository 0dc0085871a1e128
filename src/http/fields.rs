//! The fields of one header block in one buffer: a gRPC origin's
//! response heads and trailers as its session decodes them, and the
//! trailers an origin hands to the connection layer (`UpstreamBody::
//! trailers`), which writes them as HTTP/2 HEADERS or a chunked trailer
//! section with no `http` header map in between.

/// Fields whose ends a block keeps without an allocation of their own.
const INLINE: usize = 12;

/// The fields of one header block, names and values in one buffer, their
/// ends beside it (the first `INLINE` in place): one allocation a block
/// rather than two a field (or two a block, with the ends in a `Vec`).
#[derive(Clone, Debug, Default)]
pub struct Fields {
    buf: Vec<u8>,
    /// Where each field's name ends and its value ends in `buf`: the
    /// first `INLINE` fields' here, the rest in `more`.
    inline: [(usize, usize); INLINE],
    more: Vec<(usize, usize)>,
    len: usize,
}

impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Fields {}

impl Fields {
    /// Empty, with room for a block's names and values.
    pub fn with_capacity(bytes: usize) -> Fields {
        Fields { buf: Vec::with_capacity(bytes), ..Fields::default() }
    }

    fn end(&self, i: usize) -> Option<(usize, usize)> {
        if i >= self.len {
            return None;
        }
        if i < INLINE { Some(self.inline[i]) } else { self.more.get(i - INLINE).copied() }
    }

    fn set_end(&mut self, i: usize, e: (usize, usize)) {
        if i < INLINE {
            self.inline[i] = e;
        } else if let Some(slot) = self.more.get_mut(i - INLINE) {
            *slot = e;
        }
    }

    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        let n = self.buf.len();
        self.buf.extend_from_slice(value);
        let e = (n, self.buf.len());
        if self.len < INLINE {
            self.inline[self.len] = e;
        } else {
            self.more.push(e);
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The field at `i`, if any.
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let (n, v) = self.end(i)?;
        let start = if i == 0 { 0 } else { self.end(i - 1)?.1 };
        Some((self.buf.get(start..n)?, self.buf.get(n..v)?))
    }

    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (0..self.len).filter_map(|i| self.get(i))
    }

    /// Drops the first `k` fields (the pseudo-headers of a head).
    pub fn skip(&mut self, k: usize) {
        if k == 0 {
            return;
        }
        let k = k.min(self.len);
        let start = self.end(k - 1).map_or(self.buf.len(), |e| e.1);
        self.buf.drain(..start);
        for i in k..self.len {
            if let Some(e) = self.end(i) {
                self.set_end(i - k, (e.0 - start, e.1 - start));
            }
        }
        self.len -= k;
        self.more.truncate(self.len.saturating_sub(INLINE));
    }
}

impl From<Vec<(Vec<u8>, Vec<u8>)>> for Fields {
    fn from(list: Vec<(Vec<u8>, Vec<u8>)>) -> Fields {
        let mut f = Fields::default();
        for (n, v) in &list {
            f.push(n, v);
        }
        f
    }
}

impl PartialEq<Vec<(Vec<u8>, Vec<u8>)>> for Fields {
    fn eq(&self, other: &Vec<(Vec<u8>, Vec<u8>)>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|((n, v), (on, ov))| n == on && v == ov)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More fields than kept in place, then the first few dropped: the
    /// rest read back the same, from in place and from `more`.
    #[test]
    fn spilled_fields_and_skip() {
        let list: Vec<(Vec<u8>, Vec<u8>)> =
            (0..INLINE + 5).map(|i| (format!("n{i}").into_bytes(), format!("value-{i}").into_bytes())).collect();
        let mut f = Fields::from(list.clone());
        assert_eq!(f.len(), INLINE + 5);
        assert_eq!(f, list);
        f.skip(3);
        assert_eq!(f, list[3..].to_vec());
        assert_eq!(f.get(0), Some((&b"n3"[..], &b"value-3"[..])));
        assert_eq!(f.get(INLINE + 1), Some((&b"n16"[..], &b"value-16"[..])));
        assert_eq!(f.get(INLINE + 2), None);
        f.skip(100);
        assert!(f.is_empty());
        assert_eq!(f.iter().count(), 0);
        let mut g = Fields::with_capacity(8);
        g.push(b"a", b"");
        g.push(b"", b"b");
        assert_eq!(g, vec![(b"a".to_vec(), Vec::new()), (Vec::new(), b"b".to_vec())]);
    }
}
