//! A DER reader, just enough for what sluice parses itself: encrypted
//! private keys (`keyfile`) and OCSP responses (`ocsp`). Both read bytes
//! from outside (a key file, a network responder), so every read checks
//! its bounds and returns `None` rather than panicking.

/// A DER reader over a slice.
#[derive(Clone, Copy)]
pub struct Der<'a>(pub &'a [u8]);

impl<'a> Der<'a> {
    /// The next element: its tag, contents and whole encoding.
    pub fn next_raw(&mut self) -> Option<(u8, &'a [u8], &'a [u8])> {
        let b = self.0;
        let tag = *b.first()?;
        let first = *b.get(1)?;
        let (len, hdr) = if first < 0x80 {
            (first as usize, 2)
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 {
                return None;
            }
            let mut len = 0usize;
            for i in 0..n {
                len = (len << 8) | *b.get(2 + i)? as usize;
            }
            (len, 2 + n)
        };
        let end = hdr.checked_add(len)?;
        let body = b.get(hdr..end)?;
        let whole = &b[..end];
        self.0 = &b[end..];
        Some((tag, body, whole))
    }

    pub fn next_item(&mut self) -> Option<(u8, &'a [u8])> {
        self.next_raw().map(|(t, b, _)| (t, b))
    }

    pub fn expect(&mut self, tag: u8) -> Option<&'a [u8]> {
        match self.next_item() {
            Some((t, body)) if t == tag => Some(body),
            _ => None,
        }
    }

    /// The next element if it has `tag`; else nothing is consumed.
    pub fn optional(&mut self, tag: u8) -> Option<&'a [u8]> {
        if self.0.first() == Some(&tag) { self.expect(tag) } else { None }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
