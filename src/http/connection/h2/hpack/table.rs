//! HPACK's static table (RFC 7541 Appendix A) and the dynamic table both
//! ends keep (section 2.3.2).

use std::collections::VecDeque;

/// RFC 7541 Appendix A; index 1 is the first entry.
pub const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

/// The index (1-based) of the first static entry named `name`, for a
/// literal that refers to it: a `match` on the bytes, which the compiler
/// turns into a length switch and a few comparisons.
pub fn static_name(name: &[u8]) -> Option<usize> {
    match name {
        b":authority" => Some(1),
        b":method" => Some(2),
        b":path" => Some(4),
        b":scheme" => Some(6),
        b":status" => Some(8),
        b"accept-charset" => Some(15),
        b"accept-encoding" => Some(16),
        b"accept-language" => Some(17),
        b"accept-ranges" => Some(18),
        b"accept" => Some(19),
        b"access-control-allow-origin" => Some(20),
        b"age" => Some(21),
        b"allow" => Some(22),
        b"authorization" => Some(23),
        b"cache-control" => Some(24),
        b"content-disposition" => Some(25),
        b"content-encoding" => Some(26),
        b"content-language" => Some(27),
        b"content-length" => Some(28),
        b"content-location" => Some(29),
        b"content-range" => Some(30),
        b"content-type" => Some(31),
        b"cookie" => Some(32),
        b"date" => Some(33),
        b"etag" => Some(34),
        b"expect" => Some(35),
        b"expires" => Some(36),
        b"from" => Some(37),
        b"host" => Some(38),
        b"if-match" => Some(39),
        b"if-modified-since" => Some(40),
        b"if-none-match" => Some(41),
        b"if-range" => Some(42),
        b"if-unmodified-since" => Some(43),
        b"last-modified" => Some(44),
        b"link" => Some(45),
        b"location" => Some(46),
        b"max-forwards" => Some(47),
        b"proxy-authenticate" => Some(48),
        b"proxy-authorization" => Some(49),
        b"range" => Some(50),
        b"referer" => Some(51),
        b"refresh" => Some(52),
        b"retry-after" => Some(53),
        b"server" => Some(54),
        b"set-cookie" => Some(55),
        b"strict-transport-security" => Some(56),
        b"transfer-encoding" => Some(57),
        b"user-agent" => Some(58),
        b"vary" => Some(59),
        b"via" => Some(60),
        b"www-authenticate" => Some(61),
        _ => None,
    }
}

/// Bytes an entry counts for in the table size (RFC 7541 4.1).
pub fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

/// An entry: name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// One end's dynamic table: newest entry first (index 62 on the wire).
#[derive(Debug, Default)]
pub struct Dynamic {
    entries: VecDeque<Entry>,
    size: usize,
    max: usize,
}

impl Dynamic {
    pub fn new(max: usize) -> Dynamic {
        Dynamic { entries: VecDeque::new(), size: 0, max }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn max(&self) -> usize {
        self.max
    }

    /// Entry `i`, 0 the newest.
    pub fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.entries.get(i).map(|(n, v)| (&n[..], &v[..]))
    }

    /// A new maximum size; entries that no longer fit are evicted.
    pub fn set_max(&mut self, max: usize) {
        self.max = max;
        self.evict(0);
    }

    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.entries.pop_back() {
                Some((n, v)) => self.size -= entry_size(&n, &v),
                None => break,
            }
        }
    }

    /// Adds an entry; one larger than the whole table empties it instead
    /// (RFC 7541 4.4).
    pub fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = entry_size(name, value);
        if size > self.max {
            self.entries.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.entries.push_front((name.into(), value.into()));
        self.size += size;
    }

    /// The newest entry equal to (`name`, `value`), and else the newest with
    /// that name: (index from 0, whether the value matched).
    pub fn find(&self, name: &[u8], value: &[u8]) -> Option<(usize, bool)> {
        let mut by_name = None;
        for (i, (n, v)) in self.entries.iter().enumerate() {
            if &n[..] == name {
                if &v[..] == value {
                    return Some((i, true));
                }
                by_name.get_or_insert((i, false));
            }
        }
        by_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_keeps_the_size_bound() {
        let mut t = Dynamic::new(100);
        t.insert(b"a", b"1"); // 34
        t.insert(b"b", b"2"); // 68
        t.insert(b"c", b"3"); // 102 > 100: "a" goes
        assert_eq!(t.len(), 2);
        assert_eq!(t.get(0), Some((&b"c"[..], &b"3"[..])));
        assert_eq!(t.get(1), Some((&b"b"[..], &b"2"[..])));
        assert_eq!(t.find(b"b", b"9"), Some((1, false)));
        assert_eq!(t.find(b"b", b"2"), Some((1, true)));
        t.insert(&[b'x'; 100], b"");
        assert_eq!(t.len(), 0);
        t.insert(b"d", b"4");
        t.set_max(0);
        assert_eq!(t.len(), 0);
        assert_eq!(static_name(b"server"), Some(54));
        for (i, (name, _)) in STATIC.iter().enumerate() {
            let first = STATIC.iter().position(|(n, _)| n == name).map(|p| p + 1);
            assert_eq!(static_name(name), first, "{i}");
        }
        assert_eq!(static_name(b"a"), None);
        assert_eq!(static_name(b"x-custom"), None);
        assert_eq!(static_name(b":status"), Some(8));
    }
}
