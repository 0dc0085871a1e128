//! A fast path for reading an origin's response head in its usual shape:
//! `HTTP/1.x` status line and header lines ending in CRLF, token names,
//! values of printable ASCII. Anything else (a tab or obs-text in a value,
//! a bare LF, leading empty lines, a partial head, more fields than fit)
//! gives None and goes to httparse, which decides; on what it accepts this
//! scanner gives exactly httparse's result, and the differential test below
//! holds it to that.
//!
//! Why: callgrind put ~2k instructions of a proxied 1 KB request in
//! httparse, mostly walking header names byte by byte. Here names and
//! values are both checked eight bytes at a time (names: letters, digits
//! and `-` in one word test, other token characters byte by byte), and
//! names are not lowercased: [`crate::http::proxy::response_head`] classifies
//! them by case-folded words.

/// One header line: the name as sent and the value without the
/// surrounding blanks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Field<'b> {
    pub name: &'b [u8],
    pub value: &'b [u8],
}

impl Field<'_> {
    pub const EMPTY: Field<'static> = Field { name: b"", value: b"" };
}

#[derive(Debug, PartialEq)]
pub struct Head {
    pub http11: bool,
    pub status: u16,
    /// How many of `fields` were filled.
    pub fields: usize,
    /// Bytes of the head, through the empty line.
    pub len: usize,
}

/// Token characters (RFC 9110 5.6.2, httparse's set).
static TOKEN: [bool; 256] = token_table();

const fn token_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        b += 1;
    }
    t
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The top bit of each byte of `v` (bytes below 0x80) within lo..=hi:
/// adding 0x80 - lo sets it from lo up, adding 0x7f - hi from above hi; no
/// byte carries into the next.
const fn in_range(v: u64, lo: u8, hi: u8) -> u64 {
    (v.wrapping_add((0x80 - lo as u64) * ONES) & !v.wrapping_add((0x7f - hi as u64) * ONES)) & HIGH
}

/// The top bit of each byte of `x` that is not a letter, digit or `-`
/// (what nearly every field name is made of). Letters are tested folded
/// to lowercase, the others unfolded (folding would turn CR into `-`).
fn not_name_byte(x: u64) -> u64 {
    let a = x & !HIGH;
    let ok = in_range(a | 0x2020_2020_2020_2020, b'a', b'z') | in_range(a, b'0', b'9') | in_range(a, b'-', b'-');
    (!ok | x) & HIGH
}

/// The colon that ends the field name starting at `p`, when the name is a
/// non-empty token.
fn name_end(buf: &[u8], p: usize) -> Option<usize> {
    let mut i = p;
    while let Some(w) = buf.get(i..i + 8) {
        let Ok(w) = <[u8; 8]>::try_from(w) else { break };
        let bad = not_name_byte(u64::from_le_bytes(w));
        if bad == 0 {
            i += 8;
            continue;
        }
        i += (bad.trailing_zeros() / 8) as usize;
        // Another token character (`_`, `.`, ...): rare, step over it.
        if !TOKEN[buf[i] as usize] {
            break;
        }
        i += 1;
    }
    while buf.get(i).is_some_and(|&b| TOKEN[b as usize]) {
        i += 1;
    }
    (i > p && buf.get(i) == Some(&b':')).then_some(i)
}

/// How many leading bytes of `v` are printable ASCII (0x20..=0x7e), a
/// word at a time: a byte below 0x20 makes `x - 0x20..` borrow into its top
/// bit where `x` has none; a byte above 0x7e has its top bit set once 1 is
/// added (or already). Borrows and carries only move to higher bytes, so
/// the lowest flagged byte is exactly the first one that is not printable.
fn printable_run(v: &[u8]) -> usize {
    let mut i = 0;
    while let Some(w) = v.get(i..i + 8) {
        let Ok(w) = <[u8; 8]>::try_from(w) else { break };
        let x = u64::from_le_bytes(w);
        let bad = ((x.wrapping_sub(0x20 * ONES) & !x) | x.wrapping_add(ONES) | x) & HIGH;
        if bad != 0 {
            return i + (bad.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i + v[i..].iter().take_while(|b| (0x20..0x7f).contains(*b)).count()
}

/// `buf[at..]` is printable up to a CRLF; the CR's position.
fn line_end(buf: &[u8], at: usize) -> Option<usize> {
    let cr = at + printable_run(buf.get(at..)?);
    (buf.get(cr..cr + 2)? == b"\r\n").then_some(cr)
}

/// Scans `buf` into `fields`. None when the head is not in the usual
/// shape, incomplete, or has more fields than `fields` holds.
pub fn scan<'b>(buf: &'b [u8], fields: &mut [Field<'b>]) -> Option<Head> {
    if buf.len() < 14 || &buf[..7] != b"HTTP/1." || buf[8] != b' ' {
        return None;
    }
    let http11 = match buf[7] {
        b'1' => true,
        b'0' => false,
        _ => return None,
    };
    let mut status = 0u16;
    for &b in &buf[9..12] {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        status = status * 10 + d as u16;
    }
    let mut p = match buf[12] {
        b'\r' => 13,
        b' ' => line_end(buf, 13)? + 1,
        _ => return None,
    };
    if buf.get(p) != Some(&b'\n') {
        return None;
    }
    p += 1;
    let mut n = 0;
    loop {
        if *buf.get(p)? == b'\r' {
            if *buf.get(p + 1)? != b'\n' {
                return None;
            }
            return Some(Head { http11, status, fields: n, len: p + 2 });
        }
        let colon = name_end(buf, p)?;
        let name = &buf[p..colon];
        p = colon + 1;
        while buf.get(p) == Some(&b' ') {
            p += 1;
        }
        let cr = line_end(buf, p)?;
        let mut value = &buf[p..cr];
        while let [rest @ .., b' '] = value {
            value = rest;
        }
        *fields.get_mut(n)? = Field { name, value };
        n += 1;
        p = cr + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 22 Nov 2026 23:52:15 GMT\r\n\
Content-Type: application/octet-stream\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\
ETag: \"6b03613c-400\"\r\nAccept-Ranges: bytes\r\n\r\nbody";

    type Owned = Vec<(Vec<u8>, Vec<u8>)>;

    /// httparse's reading of `buf`, in this module's terms; None unless
    /// complete and valid.
    fn reference(buf: &[u8]) -> Option<(Head, Owned)> {
        let mut hdrs = [httparse::EMPTY_HEADER; 64];
        let mut r = httparse::Response::new(&mut hdrs);
        match r.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let fields: Vec<_> = r.headers.iter().map(|h| (h.name.as_bytes().to_vec(), h.value.to_vec())).collect();
                let head = Head { http11: r.version == Some(1), status: r.code?, fields: fields.len(), len };
                Some((head, fields))
            }
            _ => None,
        }
    }

    fn fast(buf: &[u8]) -> Option<(Head, Owned)> {
        let mut fields = [Field::EMPTY; 32];
        let h = scan(buf, &mut fields)?;
        let list: Vec<_> = fields[..h.fields].iter().map(|f| (f.name.to_vec(), f.value.to_vec())).collect();
        Some((h, list))
    }

    #[test]
    fn reads_a_usual_head() {
        let (h, fields) = fast(HEAD).expect("fast path");
        assert_eq!(h, Head { http11: true, status: 200, fields: 7, len: HEAD.len() - 4 });
        assert_eq!(fields[0], (b"Server".to_vec(), b"nginx".to_vec()));
        assert_eq!(fields[5], (b"ETag".to_vec(), b"\"6b03613c-400\"".to_vec()));
        let bare = b"HTTP/1.0 404\r\nX-A:  v  \r\nX-B:\r\n\r\n";
        let (h, fields) = fast(bare).expect("fast path");
        assert_eq!((h.http11, h.status, h.len), (false, 404, bare.len()));
        assert_eq!(fields, vec![(b"X-A".to_vec(), b"v".to_vec()), (b"X-B".to_vec(), b"".to_vec())]);
    }

    #[test]
    fn unusual_shapes_go_to_httparse() {
        for odd in [
            &b"HTTP/1.1 200 OK\r\nX: a\tb\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\nX: a\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\n\r\n",
            b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
            b"\r\nHTTP/1.1 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\r\n",
            b"HTTP/2.0 200 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
        ] {
            assert!(fast(odd).is_none(), "{:?}", String::from_utf8_lossy(odd));
        }
        let many: Vec<u8> = [&b"HTTP/1.1 200 OK\r\n"[..], &b"X: y\r\n".repeat(33), b"\r\n"].concat();
        assert!(fast(&many).is_none());
    }

    #[test]
    fn printable_run_stops_at_the_first_other_byte() {
        for b in 0..=255u8 {
            for at in 0..17 {
                let mut v = vec![b'a'; 17];
                v[at] = b;
                // A second odd byte later must not move the answer.
                v[16] = 0xff;
                let want = if (0x20..0x7f).contains(&b) { 16 } else { at };
                assert_eq!(printable_run(&v), want, "byte {b:#x} at {at}");
            }
        }
        assert_eq!(printable_run(b""), 0);
        assert_eq!(printable_run(b"abc"), 3);
    }

    #[test]
    fn name_bytes_are_letters_digits_and_dashes() {
        for b in 0..=255u8 {
            for at in 0..8 {
                let mut w = *b"aZ0-9zA-";
                w[at] = b;
                let want = if b.is_ascii_alphanumeric() || b == b'-' { 0 } else { 0x80u64 << (8 * at) };
                assert_eq!(not_name_byte(u64::from_le_bytes(w)), want, "byte {b:#x} at {at}");
            }
        }
    }

    /// A small deterministic generator (xorshift), so failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a>(&mut self, from: &[&'a [u8]]) -> &'a [u8] {
            from[(self.next() % from.len() as u64) as usize]
        }

        /// Mostly the first (usual) piece: one in eight from the rest.
        fn usual<'a>(&mut self, from: &[&'a [u8]]) -> &'a [u8] {
            if self.next().is_multiple_of(8) { self.pick(from) } else { self.pick(&from[..2]) }
        }
    }

    /// Random heads built from usual and unusual pieces, some truncated or
    /// with a byte changed: wherever the fast path answers, httparse must
    /// give the same answer.
    #[test]
    fn agrees_with_httparse() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let status: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\n",
            b"HTTP/1.0 404 Not Found\r\n",
            b"HTTP/1.1 200\r\n",
            b"HTTP/1.1 200 \r\n",
            b"HTTP/1.1 204 No\tContent\r\n",
            b"HTTP/1.1 200 OK\n",
            b"HTTP/1.2 200 OK\r\n",
            b"HTTP/1.1 20 OK\r\n",
            b"HTTP/1.1  200 OK\r\n",
            b"HTTP/1.1 999 \xffx\r\n",
            b"\r\nHTTP/1.1 200 OK\r\n",
            b"http/1.1 200 OK\r\n",
        ];
        let names: &[&[u8]] = &[
            b"Content-Length",
            b"ETag",
            b"x-a",
            b"Set-Cookie",
            b"A~b!",
            b"Bad Name",
            b"X\"",
            b"",
            b" Lead",
            b"N\x80",
            b"Access-Control-Allow-Origin",
            b"X-Accel_Buffering-Long.Name",
            b"abcdefg@hij",
            b"ABCDEFGH[I{J",
            b"x-y\rz-long-name",
            b"N\xcd-long-name",
            b"a.b_c~d|e^f`g#h$i%j&k'l*m+n",
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        ];
        let seps: &[&[u8]] = &[b": ", b":", b":   ", b":\t", b" :", b": \t "];
        let values: &[&[u8]] = &[
            b"1024",
            b"\"abc\"",
            b"a b  ",
            b"",
            b"x\ty",
            b"caf\xc3\xa9",
            b"nul\0",
            b"del\x7f",
            b"  ",
            b"a\rb",
            b"a\nb",
        ];
        let ends: &[&[u8]] = &[b"\r\n", b"\r\n", b"\n", b"\r", b"\r\r\n"];
        let mut accepted = 0;
        for case in 0..60_000 {
            let mut buf = rng.usual(status).to_vec();
            for _ in 0..rng.next() % 6 {
                buf.extend_from_slice(rng.usual(names));
                buf.extend_from_slice(rng.usual(seps));
                buf.extend_from_slice(rng.usual(values));
                buf.extend_from_slice(rng.usual(ends));
            }
            buf.extend_from_slice(rng.pick(&[b"\r\n", b"\r\n", b"\n", b""]));
            match rng.next() % 4 {
                0 => buf.truncate((rng.next() % (buf.len() as u64 + 1)) as usize),
                1 => {
                    let at = (rng.next() % buf.len() as u64) as usize;
                    buf[at] = rng.next() as u8;
                }
                _ => {}
            }
            buf.extend_from_slice(b"trailing body bytes");
            let Some((h, fields)) = fast(&buf) else { continue };
            accepted += 1;
            let (rh, rfields) = reference(&buf).unwrap_or_else(|| {
                panic!("case {case}: fast accepted what httparse refuses: {:?}", buf.escape_ascii().to_string())
            });
            assert_eq!(h, rh, "case {case}: {:?}", buf.escape_ascii().to_string());
            assert_eq!(fields, rfields, "case {case}: {:?}", buf.escape_ascii().to_string());
        }
        // Enough cases must take the fast path, or this test would prove
        // nothing.
        assert!(accepted > 5_000, "fast path accepted only {accepted} cases");
    }
}
