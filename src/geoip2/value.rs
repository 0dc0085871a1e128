//! One value of a MaxMind DB record, found by a `geoip2` variable's path
//! and written as ngx_http_geoip2_module writes it.
//!
//! The module hands its path to libmaxminddb's `MMDB_aget_value`, which
//! reads each element by what the data holds at that point: a map key in
//! a map, an array index (negative from the end) in an array, and fails
//! anywhere else. The maxminddb crate's `decode_path` wants to be told up
//! front, so [`find`] first tries the path read the usual way (numbers are
//! indexes, words are keys) and, only when the data disagrees, walks it
//! element by element asking the record what each step is ([`Shape`]).

use std::net::IpAddr;

use maxminddb::{PathElement, Reader};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A scalar the module writes, or a container it does not.
#[derive(Debug, PartialEq)]
pub enum Leaf<'a> {
    Str(&'a str),
    Bytes(&'a [u8]),
    Bool(bool),
    /// Float and double alike: both are printed `%.5f`.
    Float(f64),
    Unsigned(u64),
    Signed(i64),
    U128(u128),
    /// A map or an array: not a value (nginx: not found).
    Container,
}

impl<'a> Leaf<'a> {
    /// The text nginx's module gives the value; None for a container.
    pub fn write(&self, out: &mut Vec<u8>) -> bool {
        use std::io::Write;
        match *self {
            Leaf::Str(s) => out.extend_from_slice(s.as_bytes()),
            Leaf::Bytes(b) => out.extend_from_slice(b),
            Leaf::Bool(b) => out.push(if b { b'1' } else { b'0' }),
            Leaf::Float(f) => write_fixed5(f, out),
            Leaf::Unsigned(n) => {
                let _ = write!(out, "{n}");
            }
            Leaf::Signed(n) => {
                let _ = write!(out, "{n}");
            }
            // "0x%016uxL%016uxL": 32 lower-case hex digits.
            Leaf::U128(n) => {
                let _ = write!(out, "0x{n:032x}");
            }
            Leaf::Container => return false,
        }
        true
    }
}

/// nginx's `ngx_sprintf("%.5f")`: the integer part, then the fraction
/// scaled by 10^5 and rounded half up, carrying into the integer part.
/// Values past what `int64_t` holds (and NaN) are clamped, where C would
/// be undefined.
pub fn write_fixed5(f: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    const SCALE: u64 = 100_000;
    let mut f = if f.is_nan() { 0.0 } else { f };
    if f < 0.0 {
        out.push(b'-');
        f = -f;
    }
    let mut int = f as u64;
    let mut frac = ((f - int as f64) * SCALE as f64 + 0.5) as u64;
    if frac >= SCALE {
        int = int.saturating_add(1);
        frac = 0;
    }
    let _ = write!(out, "{int}.{frac:05}");
}

impl<'de> Deserialize<'de> for Leaf<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LeafVisitor)
    }
}

struct LeafVisitor;

impl<'de> Visitor<'de> for LeafVisitor {
    type Value = Leaf<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a MaxMind DB value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Bool(v))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Str(v))
    }
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Bytes(v))
    }
    fn visit_f32<E: de::Error>(self, v: f32) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Float(f64::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Float(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Unsigned(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Leaf<'de>, E> {
        Ok(Leaf::Signed(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Leaf<'de>, E> {
        Ok(Leaf::U128(v))
    }
    // Not read: the module writes no containers.
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Leaf<'de>, A::Error> {
        Ok(Leaf::Container)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Leaf<'de>, A::Error> {
        Ok(Leaf::Container)
    }
}

/// What the record holds at a point of a path: how the next element reads.
#[derive(Debug, PartialEq)]
enum Shape {
    Map,
    Array,
    Scalar,
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a MaxMind DB value")
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Shape, A::Error> {
        Ok(Shape::Map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Shape, A::Error> {
        Ok(Shape::Array)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_borrowed_str<E: de::Error>(self, _: &'de str) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, _: &'de [u8]) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Shape, E> {
        Ok(Shape::Scalar)
    }
}

/// libmaxminddb's reading of an array index: C's `strtol` in base 10
/// over the whole element (leading blanks and a sign allowed), a negative
/// one counting from the end (-1 the last).
fn index(elem: &str) -> Option<PathElement<'_>> {
    let t = elem.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let t = t.strip_prefix('+').unwrap_or(t);
    // strtol reads nothing from an empty element: 0, and nothing invalid
    // follows.
    if t.is_empty() {
        return Some(PathElement::Index(0));
    }
    if let Some(neg) = t.strip_prefix('-') {
        if neg.is_empty() || !neg.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = neg.parse().ok()?;
        return Some(match n.checked_sub(1) {
            Some(from_end) => PathElement::IndexFromEnd(from_end),
            None => PathElement::Index(0),
        });
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok().map(PathElement::Index)
}

/// The value at `path` in the record for `addr`, written to `out`; false
/// when there is none the module would write (no record, no such key or
/// index, a container, or data the reader refuses).
pub fn find<S: AsRef<[u8]>>(reader: &Reader<S>, addr: IpAddr, path: &[String], out: &mut Vec<u8>) -> bool {
    let Ok(result) = reader.lookup(addr) else { return false };
    if !result.has_data() {
        return false;
    }
    // The usual reading: words are keys, numbers indexes.
    let guess: Vec<PathElement> = path.iter().map(|e| index(e).unwrap_or(PathElement::Key(e.as_str()))).collect();
    match result.decode_path::<Leaf>(&guess) {
        Ok(Some(leaf)) => return leaf.write(out),
        Ok(None) => return false,
        // The data has a map where a number was read as an index, or the
        // like: ask it, step by step. Corrupt data fails again below.
        Err(_) => {}
    }
    let mut walked: Vec<PathElement> = Vec::with_capacity(path.len());
    for e in path {
        let step = match result.decode_path::<Shape>(&walked) {
            Ok(Some(Shape::Map)) => PathElement::Key(e.as_str()),
            Ok(Some(Shape::Array)) => match index(e) {
                Some(i) => i,
                None => return false,
            },
            _ => return false,
        };
        walked.push(step);
    }
    matches!(result.decode_path::<Leaf>(&walked), Ok(Some(leaf)) if leaf.write(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed(f: f64) -> String {
        let mut v = Vec::new();
        write_fixed5(f, &mut v);
        String::from_utf8(v).unwrap_or_default()
    }

    #[test]
    fn floats_as_nginx_prints_them() {
        assert_eq!(fixed(55.7543), "55.75430");
        assert_eq!(fixed(-122.0838), "-122.08380");
        assert_eq!(fixed(0.0), "0.00000");
        assert_eq!(fixed(1.999_999_9), "2.00000");
        assert_eq!(fixed(f64::from(37.386_f32)), "37.38600");
    }

    #[test]
    fn indexes_as_strtol_reads_them() {
        assert_eq!(index("0"), Some(PathElement::Index(0)));
        assert_eq!(index("+2"), Some(PathElement::Index(2)));
        assert_eq!(index("-1"), Some(PathElement::IndexFromEnd(0)));
        assert_eq!(index("-0"), Some(PathElement::Index(0)));
        assert_eq!(index("1a"), None);
        assert_eq!(index("en"), None);
    }

    #[test]
    fn values_as_written() {
        let w = |l: Leaf| {
            let mut v = Vec::new();
            l.write(&mut v).then(|| String::from_utf8_lossy(&v).into_owned())
        };
        assert_eq!(w(Leaf::Bool(true)).as_deref(), Some("1"));
        assert_eq!(w(Leaf::Bool(false)).as_deref(), Some("0"));
        assert_eq!(w(Leaf::Signed(-5)).as_deref(), Some("-5"));
        assert_eq!(w(Leaf::U128(255)).as_deref(), Some("0x000000000000000000000000000000ff"));
        assert_eq!(w(Leaf::Container), None);
    }
}
