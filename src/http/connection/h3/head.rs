//! A response head as a QPACK field section (RFC 9204 4.5), written
//! straight from sluice's `Response`, as nginx's HTTP/3 filter writes it:
//! a static table reference where the table has the field or its name,
//! literals otherwise (Huffman-coded where that is shorter, with the
//! HPACK code's tables), and no dynamic table (so no encoder-stream state
//! and nothing for the client to acknowledge).
//!
//! Why not the `h3` crate's encoder: it needs an `http::Response`, turns
//! each field into owned vectors, finds it in hash maps and Huffman-codes
//! every value a bit at a time, about a sixth of the CPU of a small
//! request. The fields and their rules are the HTTP/2 head's
//! (`h2::response::head`), in the response's own order.

use bytes::Bytes;

use crate::http::connection::h1::writer::has_body;
use crate::http::connection::h2::hpack::huffman;
use crate::http::connection::h2::request::{HOP_BY_HOP, value_allowed};
use crate::http::error_html::wire_status;
use crate::http::response::Response;

/// RFC 9204 Appendix A indices used here.
mod idx {
    pub const CONTENT_LENGTH: u8 = 4;
    pub const DATE: u8 = 6;
    pub const ETAG: u8 = 7;
    pub const LAST_MODIFIED: u8 = 10;
    pub const LOCATION: u8 = 12;
    pub const ACCEPT_RANGES_BYTES: u8 = 32;
    pub const CONTENT_TYPE: u8 = 44;
    pub const SERVER: u8 = 92;
    /// `:status` with a value the table has no entry for.
    pub const STATUS: u8 = 24;
}

/// The static table's entry for `:status` `code`.
fn status_index(code: u16) -> Option<u8> {
    Some(match code {
        103 => 24,
        200 => 25,
        304 => 26,
        404 => 27,
        503 => 28,
        100 => 63,
        204 => 64,
        206 => 65,
        302 => 66,
        400 => 67,
        403 => 68,
        421 => 69,
        425 => 70,
        500 => 71,
        _ => return None,
    })
}

/// The static table's entry for a field name a response may carry
/// (lowercase), for a literal with a name reference.
fn name_index(name: &[u8]) -> Option<u8> {
    Some(match name {
        b"age" => 2,
        b"content-disposition" => 3,
        b"content-length" => 4,
        b"date" => 6,
        b"etag" => 7,
        b"last-modified" => 10,
        b"link" => 11,
        b"location" => 12,
        b"set-cookie" => 14,
        b"accept-ranges" => 32,
        b"access-control-allow-headers" => 33,
        b"access-control-allow-origin" => 35,
        b"cache-control" => 36,
        b"content-encoding" => 42,
        b"content-type" => 44,
        b"strict-transport-security" => 56,
        b"vary" => 59,
        b"x-content-type-options" => 61,
        b"x-xss-protection" => 62,
        b"access-control-allow-credentials" => 73,
        b"access-control-allow-methods" => 76,
        b"access-control-expose-headers" => 79,
        b"alt-svc" => 83,
        b"content-security-policy" => 85,
        b"early-data" => 86,
        b"expect-ct" => 87,
        b"server" => 92,
        b"timing-allow-origin" => 93,
        b"x-frame-options" => 97,
        _ => return None,
    })
}

/// A field section being written, with its size as RFC 9114 4.2.2 counts
/// it against the peer's SETTINGS_MAX_FIELD_SECTION_SIZE.
struct Section {
    out: Vec<u8>,
    size: u64,
    /// A literal name, lowercased.
    lower: Vec<u8>,
}

impl Section {
    fn new(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        // Required Insert Count 0, Delta Base 0: no dynamic table.
        out.extend_from_slice(&[0, 0]);
        Section { out, size: 0, lower: Vec::new() }
    }

    /// An integer with an N-bit prefix whose high bits are `flags`.
    fn int(&mut self, flags: u8, bits: u8, mut v: u64) {
        let max = (1u64 << bits) - 1;
        if v < max {
            self.out.push(flags | v as u8);
            return;
        }
        self.out.push(flags | max as u8);
        v -= max;
        while v >= 128 {
            self.out.push((v & 0x7f) as u8 | 0x80);
            v >>= 7;
        }
        self.out.push(v as u8);
    }

    /// A string with a `bits`-bit length prefix under `flags`, Huffman-coded
    /// (the `huff` bit set) when that is shorter, as nginx codes it.
    fn string(&mut self, flags: u8, huff: u8, bits: u8, s: &[u8]) {
        let h = huffman::encoded_len(s);
        if h < s.len() {
            self.int(flags | huff, bits, h as u64);
            huffman::encode(s, &mut self.out);
        } else {
            self.int(flags, bits, s.len() as u64);
            self.out.extend_from_slice(s);
        }
    }

    /// An indexed field line of the static table (`11` T=1, 6-bit index).
    fn indexed(&mut self, index: u8, name_len: usize, value_len: usize) {
        self.int(0xc0, 6, u64::from(index));
        self.size += (name_len + value_len + 32) as u64;
    }

    /// A literal field line with a static name reference (`01` N=0 T=1,
    /// 4-bit index) and a literal value (H=0, 7-bit length).
    fn with_name(&mut self, index: u8, name_len: usize, value: &[u8]) {
        self.int(0x50, 4, u64::from(index));
        self.string(0, 0x80, 7, value);
        self.size += (name_len + value.len() + 32) as u64;
    }

    /// A literal field line with a literal name (`001` N=0, H and a 3-bit
    /// length), the name lowercased.
    fn literal(&mut self, name: &[u8], value: &[u8]) {
        let mut lower = std::mem::take(&mut self.lower);
        lower.clear();
        lower.extend(name.iter().map(u8::to_ascii_lowercase));
        self.string(0x20, 0x08, 3, &lower);
        self.lower = lower;
        self.string(0, 0x80, 7, value);
        self.size += (name.len() + value.len() + 32) as u64;
    }

    /// `date` for this second: its Huffman code is made once a second
    /// (it is always shorter: digits, letters, spaces, a comma, colons).
    fn date(&mut self) {
        thread_local! {
            static CODED: std::cell::RefCell<([u8; 29], Vec<u8>)> = const { std::cell::RefCell::new(([0; 29], Vec::new())) };
        }
        let d = crate::clock::http_date();
        CODED.with_borrow_mut(|(date, code)| {
            if *date != d || code.is_empty() {
                *date = d;
                code.clear();
                huffman::encode(&d, code);
            }
            self.int(0x50, 4, u64::from(idx::DATE));
            self.int(0x80, 7, code.len() as u64);
            self.out.extend_from_slice(code);
        });
        self.size += (4 + d.len() + 32) as u64;
    }

    /// A field by name: the table's name if it has it, else the literal.
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.iter().all(|b| !b.is_ascii_uppercase())
            && let Some(i) = name_index(name)
        {
            self.with_name(i, name.len(), value);
            return;
        }
        let mut lower = [0u8; 40];
        if name.len() <= lower.len() {
            let l = &mut lower[..name.len()];
            l.copy_from_slice(name);
            l.make_ascii_lowercase();
            if let Some(i) = name_index(l) {
                self.with_name(i, name.len(), value);
                return;
            }
        }
        self.literal(name, value);
    }
}

/// A field name HTTP/3 can carry: a token (RFC 9110 5.6.2), sent
/// lowercase; the names `http::HeaderName` takes.
fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The response's head: the HEADERS frame's payload and its size.
pub fn encode(resp: &Response<'_>, server_tokens: bool) -> (Bytes, u64) {
    let mut s = Section::new(160 + resp.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>());
    let wire = wire_status(resp.status);
    match status_index(wire) {
        Some(i) => s.indexed(i, 7, 3),
        None => {
            let mut code = [b'0'; 3];
            let mut n = wire.min(999);
            for d in code.iter_mut().rev() {
                *d = b'0' + (n % 10) as u8;
                n /= 10;
            }
            s.with_name(idx::STATUS, 7, &code);
        }
    }
    // An origin's Server or Date (proxy_pass_header) goes in place of ours.
    let theirs = |name: &str| resp.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !resp.no_server && !theirs("server") {
        let v: &[u8] = if server_tokens { concat!("sluice/", env!("CARGO_PKG_VERSION")).as_bytes() } else { b"sluice" };
        s.with_name(idx::SERVER, 6, v);
    }
    if !resp.no_date && !theirs("date") {
        s.date();
    }
    if let Some(ct) = &resp.content_type
        && value_allowed(ct.as_bytes())
    {
        s.with_name(idx::CONTENT_TYPE, 12, ct.as_bytes());
    }
    if has_body(wire)
        && let Some(n) = resp.body.known_len()
    {
        s.with_name(idx::CONTENT_LENGTH, 14, itoa_buf(n).as_slice());
    }
    let validators = matches!(wire, 200 | 206 | 304);
    if validators && let Some(lm) = resp.last_modified {
        let mut d = [0u8; 29];
        crate::http::date::http_date(lm, &mut d);
        s.with_name(idx::LAST_MODIFIED, 13, &d);
    }
    if let Some(loc) = &resp.location
        && value_allowed(loc)
    {
        s.with_name(idx::LOCATION, 8, loc);
    }
    if validators
        && let Some(e) = &resp.etag
        && value_allowed(e)
    {
        s.with_name(idx::ETAG, 4, e);
    }
    for (n, v) in &resp.headers {
        let name = n.as_bytes();
        if !valid_name(name) || HOP_BY_HOP.iter().any(|h| h.as_bytes().eq_ignore_ascii_case(name)) {
            continue;
        }
        if value_allowed(v) {
            s.field(name, v);
        }
    }
    if let Some(cr) = &resp.content_range
        && value_allowed(cr)
    {
        s.field(b"content-range", cr);
    }
    if resp.accept_ranges && wire == 200 {
        s.indexed(idx::ACCEPT_RANGES_BYTES, 13, 5);
    }
    (Bytes::from(s.out), s.size)
}

/// `n` in decimal, without allocating.
fn itoa_buf(mut n: u64) -> Digits {
    let mut d = Digits { buf: [0; 20], start: 20 };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return d;
        }
    }
}

struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_slice(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

#[cfg(test)]
mod tests;
