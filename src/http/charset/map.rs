//! `charset_map FROM TO { XX YY; ... }`: the tables between charsets, and
//! the recodings they allow. As in nginx a map is single-byte both ways
//! (each line maps a byte of FROM to a byte of TO), except a map to
//! `utf-8`, whose right-hand side is the character's UTF-8 bytes in hex.
//! A map serves both directions: `charset_map koi8-r utf-8` also recodes
//! UTF-8 to koi8-r. Bytes a map does not name become `?` (UTF-8 text a
//! map does not name becomes an `&#NNNN;` reference), bytes below 0x80
//! stay as they are.

use std::sync::Arc;

use crate::config::parser::{ConfError, Directive};

/// The charset names the maps use (compared ignoring case) and the maps.
#[derive(Debug, Default)]
pub struct Charsets {
    names: Vec<Arc<str>>,
    maps: Vec<Map>,
}

#[derive(Debug)]
struct Map {
    from: usize,
    to: usize,
    table: Table,
}

#[derive(Debug)]
enum Table {
    Bytes { forth: Arc<[u8; 256]>, back: Arc<[u8; 256]> },
    Utf8 { to: Arc<ToUtf8>, from: Arc<FromUtf8> },
}

/// A byte's UTF-8 bytes: `[len, b0, b1, b2]`.
#[derive(Debug)]
pub struct ToUtf8(pub [[u8; 4]; 256]);

/// A character's byte by its code point (U+0000 to U+FFFF): 256 pages
/// of 256, a page only where the map has characters; 0 is "not mapped".
#[derive(Debug)]
pub struct FromUtf8(Vec<Option<Box<[u8; 256]>>>);

impl FromUtf8 {
    pub fn byte(&self, c: u32) -> Option<u8> {
        let page = self.0.get((c >> 8) as usize)?.as_ref()?;
        Some(page[(c & 0xff) as usize]).filter(|&b| b != 0)
    }
}

/// How a body is recoded.
#[derive(Clone, Debug)]
pub enum Recode {
    /// Byte for byte: the length stays.
    Bytes(Arc<[u8; 256]>),
    ToUtf8(Arc<ToUtf8>),
    FromUtf8(Arc<FromUtf8>),
}

impl Recode {
    /// UTF-8 on either side: the length changes (nginx clears
    /// Content-Length, and with it ranges).
    pub fn changes_length(&self) -> bool {
        !matches!(self, Recode::Bytes(_))
    }
}

fn same(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

impl Charsets {
    /// Whether a map names this charset.
    pub fn known(&self, name: &str) -> bool {
        self.names.iter().any(|n| same(n, name))
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| same(n, name))
    }

    /// The recoding from `from` to `to`, through a map declared either way.
    pub fn recode(&self, from: &str, to: &str) -> Option<Recode> {
        let (f, t) = (self.index(from)?, self.index(to)?);
        self.maps.iter().find_map(|m| match &m.table {
            Table::Bytes { forth, .. } if (m.from, m.to) == (f, t) => Some(Recode::Bytes(forth.clone())),
            Table::Bytes { back, .. } if (m.from, m.to) == (t, f) => Some(Recode::Bytes(back.clone())),
            Table::Utf8 { to, .. } if (m.from, m.to) == (f, t) => Some(Recode::ToUtf8(to.clone())),
            Table::Utf8 { from, .. } if (m.from, m.to) == (t, f) => Some(Recode::FromUtf8(from.clone())),
            _ => None,
        })
    }

    fn add(&mut self, name: &str) -> usize {
        match self.index(name) {
            Some(i) => i,
            None => {
                self.names.push(Arc::from(name));
                self.names.len() - 1
            }
        }
    }

    /// Reads the http level's `charset_map` blocks (nginx's messages, with
    /// the file and line of the line at fault).
    pub fn build(dirs: &[&Directive]) -> Result<Charsets, ConfError> {
        let mut cs = Charsets::default();
        for d in dirs {
            let (a, b) = (&d.args[0].text, &d.args[1].text);
            let (from, to) = (cs.add(a), cs.add(b));
            if from == to {
                return Err(ConfError::at(
                    format!("\"charset_map\" between the same charsets \"{a}\" and \"{b}\""),
                    &d.span,
                ));
            }
            if cs.maps.iter().any(|m| (m.from, m.to) == (from, to) || (m.from, m.to) == (to, from)) {
                return Err(ConfError::at(format!("duplicate \"charset_map\" between \"{a}\" and \"{b}\""), &d.span));
            }
            if same(a, "utf-8") {
                // nginx would build single-byte tables for a charset it
                // then decodes as UTF-8.
                return Err(ConfError::at(
                    format!("\"charset_map\" from \"utf-8\" is not supported: write it as \"charset_map {b} utf-8\""),
                    &d.span,
                ));
            }
            let lines = d.block.as_deref().unwrap_or(&[]);
            let table = if same(b, "utf-8") { utf8_table(lines)? } else { byte_table(lines)? };
            cs.maps.push(Map { from, to, table });
        }
        Ok(cs)
    }
}

/// `XX YY` lines (each one a directive to the parser: name and one word).
fn pair(l: &Directive) -> Result<(u8, &str), ConfError> {
    if l.args.len() != 1 || l.block.is_some() {
        return Err(ConfError::at("invalid parameters number", &l.span));
    }
    let src = hex(l.name.as_bytes()).filter(|&v| v <= 255).ok_or_else(|| invalid(&l.name, l))?;
    Ok((src as u8, l.args[0].text.as_str()))
}

fn invalid(v: &str, l: &Directive) -> ConfError {
    ConfError::at(format!("invalid value \"{v}\""), &l.span)
}

/// nginx's ngx_hextoi: hex digits only, at least one.
fn hex(s: &[u8]) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u32, |n, &c| n.checked_mul(16)?.checked_add((c as char).to_digit(16)?))
}

fn byte_table(lines: &[Directive]) -> Result<Table, ConfError> {
    let mut forth = [b'?'; 256];
    let mut back = [b'?'; 256];
    for i in 0..128u8 {
        forth[i as usize] = i;
        back[i as usize] = i;
    }
    for l in lines {
        let (src, v) = pair(l)?;
        let dst = hex(v.as_bytes()).filter(|&v| v <= 255).ok_or_else(|| invalid(v, l))? as u8;
        forth[src as usize] = dst;
        back[dst as usize] = src;
    }
    Ok(Table::Bytes { forth: Arc::new(forth), back: Arc::new(back) })
}

fn utf8_table(lines: &[Directive]) -> Result<Table, ConfError> {
    let mut to = [[1, b'?', 0, 0]; 256];
    let mut pages: Vec<Option<Box<[u8; 256]>>> = vec![None; 256];
    let mut first = Box::new([0u8; 256]);
    for i in 0..128u8 {
        to[i as usize] = [1, i, 0, 0];
        first[i as usize] = i;
    }
    pages[0] = Some(first);
    for l in lines {
        let (src, v) = pair(l)?;
        // At most three bytes (U+FFFF), as nginx.
        if v.len() / 2 > 3 || v.len() % 2 != 0 {
            return Err(invalid(v, l));
        }
        let mut bytes = [0u8; 3];
        for (i, p) in v.as_bytes().chunks(2).enumerate() {
            bytes[i] = hex(p).ok_or_else(|| invalid(v, l))? as u8;
        }
        let n = v.len() / 2;
        let c = std::str::from_utf8(&bytes[..n]).ok().and_then(|s| s.chars().next()).ok_or_else(|| invalid(v, l))?;
        let c = c as u32;
        to[src as usize] = [n as u8, bytes[0], bytes[1], bytes[2]];
        pages[(c >> 8) as usize].get_or_insert_with(|| Box::new([0; 256]))[(c & 0xff) as usize] = src;
    }
    Ok(Table::Utf8 { to: Arc::new(ToUtf8(to)), from: Arc::new(FromUtf8(pages)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Charsets, String> {
        let (path, dir) = (std::path::Path::new("/conf/maps.conf"), std::path::Path::new("/conf"));
        let parsed = crate::config::parser::parse_str(text, path, dir).map_err(|e| e.to_string())?;
        let maps: Vec<&Directive> = parsed.directives.iter().collect();
        Charsets::build(&maps).map_err(|e| e.to_string())
    }

    #[test]
    fn a_map_recodes_both_ways() {
        let cs = parse("charset_map B A { 58 59; E0 C1; }").unwrap();
        let Some(Recode::Bytes(t)) = cs.recode("b", "A") else { panic!() };
        assert_eq!((t[0x58], t[0xe0], t[0x41], t[0x90]), (0x59, 0xc1, 0x41, b'?'));
        let Some(Recode::Bytes(t)) = cs.recode("A", "B") else { panic!() };
        assert_eq!((t[0x59], t[0xc1]), (0x58, 0xe0));
        assert!(cs.recode("A", "C").is_none());
    }

    #[test]
    fn a_map_to_utf8_takes_the_characters_bytes() {
        let cs = parse("charset_map koi8-r utf-8 { C1 D0B0; 9A C2A0; 80 E282AC; }").unwrap();
        let Some(Recode::ToUtf8(t)) = cs.recode("KOI8-R", "UTF-8") else { panic!() };
        assert_eq!(t.0[0xc1], [2, 0xd0, 0xb0, 0]);
        assert_eq!(t.0[0x80], [3, 0xe2, 0x82, 0xac]);
        assert_eq!(t.0[0xc2], [1, b'?', 0, 0]);
        let Some(Recode::FromUtf8(f)) = cs.recode("utf-8", "koi8-r") else { panic!() };
        assert_eq!(
            (f.byte(0x430), f.byte(0x20ac), f.byte(0x431), f.byte(0x41)),
            (Some(0xc1), Some(0x80), None, Some(0x41))
        );
    }

    #[test]
    fn bad_lines_are_refused_with_nginxs_words() {
        let e = parse("charset_map a b {\n 58 59;\n 5G 59;\n}").unwrap_err();
        assert!(e.starts_with("invalid value \"5G\" in ") && e.ends_with(":3"), "{e}");
        let e = parse("charset_map a b { 100 59; }").unwrap_err();
        assert!(e.starts_with("invalid value \"100\""), "{e}");
        let e = parse("charset_map a b { 58 59 60; }").unwrap_err();
        assert!(e.starts_with("invalid parameters number"), "{e}");
        let e = parse("charset_map a utf-8 { 58 F0908080; }").unwrap_err();
        assert!(e.starts_with("invalid value \"F0908080\""), "{e}");
        let e = parse("charset_map a utf-8 { 58 FF; }").unwrap_err();
        assert!(e.starts_with("invalid value \"FF\""), "{e}");
        let e = parse("charset_map a A { }").unwrap_err();
        assert!(e.starts_with("\"charset_map\" between the same charsets \"a\" and \"A\""), "{e}");
        let e = parse("charset_map a b { }\ncharset_map B A { }").unwrap_err();
        assert!(e.starts_with("duplicate \"charset_map\" between \"B\" and \"A\""), "{e}");
    }
}
