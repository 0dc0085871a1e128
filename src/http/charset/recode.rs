//! The charset filter's body stage: a body recoded a piece at a time as it
//! streams (`Compressed`'s stages, after the sub filter and before SSI,
//! nginx's body-filter order). Only a UTF-8 character cut by a piece's end
//! is held (at most three bytes) until the next piece.

use super::map::Recode;

pub struct Recoder {
    table: Recode,
    /// The start of a UTF-8 character the last piece ended in.
    saved: Vec<u8>,
}

/// What nginx's ngx_utf8_decode reads at the start of `s` (a byte of 0x80
/// or more first).
enum Decoded {
    /// A code point (or a value above U+10FFFF for an invalid sequence)
    /// and the bytes it took.
    Char(u32, usize),
    /// The sequence goes on past the end of `s`.
    Incomplete,
}

const INVALID: u32 = 0xffff_ffff;

fn decode(s: &[u8]) -> Decoded {
    let lead = u32::from(s[0]);
    let (mut u, valid, len) = if lead >= 0xf0 {
        (lead & 0x07, 0xffff, 3)
    } else if lead >= 0xe0 {
        (lead & 0x0f, 0x7ff, 2)
    } else if lead >= 0xc2 {
        (lead & 0x1f, 0x7f, 1)
    } else {
        return Decoded::Char(INVALID, 1);
    };
    if s.len() - 1 < len {
        return Decoded::Incomplete;
    }
    for (i, &b) in s[1..=len].iter().enumerate() {
        // nginx takes the byte that broke the sequence with it.
        if b < 0x80 {
            return Decoded::Char(INVALID, i + 2);
        }
        u = (u << 6) | u32::from(b & 0x3f);
    }
    Decoded::Char(if u > valid { u } else { INVALID }, len + 1)
}

impl Recoder {
    pub fn new(table: Recode) -> Recoder {
        Recoder { table, saved: Vec::new() }
    }

    /// Recodes the next piece into `out`.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) {
        match &self.table {
            Recode::Bytes(t) => out.extend(input.iter().map(|&b| t[usize::from(b)])),
            Recode::ToUtf8(t) => {
                out.reserve(input.len() + input.len() / 2);
                for &b in input {
                    let s = &t.0[usize::from(b)];
                    out.extend_from_slice(&s[1..=usize::from(s[0])]);
                }
            }
            Recode::FromUtf8(t) => {
                let joined;
                let buf = if self.saved.is_empty() {
                    input
                } else {
                    let mut v = std::mem::take(&mut self.saved);
                    v.extend_from_slice(input);
                    joined = v;
                    &joined[..]
                };
                out.reserve(buf.len());
                let mut i = 0;
                while i < buf.len() {
                    let b = buf[i];
                    if b < 0x80 {
                        out.push(b);
                        i += 1;
                        continue;
                    }
                    match decode(&buf[i..]) {
                        Decoded::Incomplete => {
                            self.saved = buf[i..].to_vec();
                            return;
                        }
                        Decoded::Char(c, n) => {
                            i += n;
                            if c <= 0xffff
                                && let Some(b) = t.byte(c)
                            {
                                out.push(b);
                            } else if c <= 0x10ffff {
                                out.extend_from_slice(format!("&#{c};").as_bytes());
                            } else {
                                out.push(b'?');
                            }
                        }
                    }
                }
            }
        }
    }

    /// The body's end: a character cut short there is dropped, as nginx.
    pub fn finish(&mut self) {
        self.saved.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::charset::map::Charsets;

    fn maps() -> Charsets {
        let text = "charset_map koi8-r utf-8 { C1 D0B0; C2 D0B1; 80 E282AC; }\ncharset_map B A { 58 59; }";
        let p = crate::config::parser::parse_str(text, "/c/x".as_ref(), "/c".as_ref()).unwrap();
        let d: Vec<_> = p.directives.iter().collect();
        Charsets::build(&d).unwrap()
    }

    fn run(r: Recode, input: &[u8], piece: usize) -> Vec<u8> {
        let mut rec = Recoder::new(r);
        let mut out = Vec::new();
        for c in input.chunks(piece) {
            rec.feed(c, &mut out);
        }
        rec.finish();
        out
    }

    #[test]
    fn recodes_the_same_however_the_body_is_cut() {
        let m = maps();
        let to = m.recode("koi8-r", "utf-8").unwrap();
        let from = m.recode("utf-8", "koi8-r").unwrap();
        let text = "a\u{430}\u{431}\u{20ac} \u{432} \u{1f600}!".as_bytes();
        for piece in 1..8 {
            assert_eq!(run(from.clone(), text, piece), b"a\xc1\xc2\x80 &#1074; &#128512;!", "piece {piece}");
            assert_eq!(run(to.clone(), b"a\xc1\xc2\x80\xff", piece), "a\u{430}\u{431}\u{20ac}?".as_bytes());
        }
        assert_eq!(run(m.recode("B", "A").unwrap(), b"XaX\xe0", 2), b"YaY?");
    }

    #[test]
    fn bad_utf8_is_a_question_mark_as_nginx() {
        let from = maps().recode("utf-8", "koi8-r").unwrap();
        // A lone continuation byte, an overlong form, a sequence broken by
        // ASCII (nginx takes that byte with it), one cut at the end.
        assert_eq!(run(from.clone(), b"\x80|\xc0\xaf|\xd0A|\xd0", 100), b"?|??|?|");
    }
}
