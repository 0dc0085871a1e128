//! Body filters that read bytes from origins and files: the sub filter's
//! streaming replacer.

use super::Picks;
use crate::http::filter::sub::Replacer;

/// The replacer: the same output however the body is cut into pieces, and
/// the same as replacing in the whole body at once. The input's first
/// line holds up to three `|`-separated patterns; the rest is the body.
/// The output is also what a plain model of nginx's filter gives.
pub fn sub_filter(data: &[u8]) {
    let (head, body) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = head
        .split(|&b| b == b'|')
        .filter(|p| !p.is_empty())
        .take(3)
        .enumerate()
        .map(|(i, p)| (p.to_ascii_lowercase(), format!("<{i}>").into_bytes()))
        .collect();
    if pairs.is_empty() {
        return;
    }
    for once in [false, true] {
        let mut whole = Vec::new();
        let mut r = Replacer::new(pairs.clone(), once);
        r.feed(body, &mut whole);
        r.finish(&mut whole);
        let mut picks = Picks::new(data);
        let mut pieces = Vec::new();
        let mut r = Replacer::new(pairs.clone(), once);
        let mut at = 0;
        while at < body.len() {
            let n = 1 + (picks.next() % 7) as usize;
            let end = (at + n).min(body.len());
            r.feed(&body[at..end], &mut pieces);
            at = end;
        }
        r.finish(&mut pieces);
        assert_eq!(pieces, whole, "pieces differ from the whole (once={once})");
        assert_eq!(whole, model(&pairs, once, body), "differs from the model (once={once})");
        // With no pattern in the body, the body is unchanged.
        let lower = body.to_ascii_lowercase();
        if pairs.iter().all(|(p, _)| !lower.windows(p.len()).any(|w| w == &p[..])) {
            assert_eq!(whole, body);
        }
    }
}

/// nginx's sub filter on a whole body, written plainly: at each place the
/// first active pattern that matches there (ignoring case) is replaced; a
/// pattern listed before it that is cut off by the end of the body stops
/// the search there and the rest goes out as it is.
fn model(pairs: &[(Vec<u8>, Vec<u8>)], once: bool, body: &[u8]) -> Vec<u8> {
    let mut used = vec![false; pairs.len()];
    let mut out = Vec::new();
    let mut p = 0;
    'outer: while p < body.len() {
        for (i, (pat, repl)) in pairs.iter().enumerate() {
            if once && used[i] {
                continue;
            }
            let rest = &body[p..];
            if rest.len() < pat.len() {
                if pat[..rest.len()].eq_ignore_ascii_case(rest) {
                    out.extend_from_slice(rest);
                    return out;
                }
            } else if rest[..pat.len()].eq_ignore_ascii_case(pat) {
                out.extend_from_slice(repl);
                used[i] = true;
                p += pat.len();
                continue 'outer;
            }
        }
        out.push(body[p]);
        p += 1;
    }
    out
}

/// The charset filter's recoding (`charset::recode`) with nginx's koi8-r
/// to UTF-8 map: the first byte picks the direction (koi8-r to UTF-8, UTF-8
/// to koi8-r, or a byte-for-byte map), the rest is the body. The output
/// does not depend on how the body is cut; byte for byte keeps the length;
/// to UTF-8 gives valid UTF-8; from UTF-8 gives at most one reference
/// (`&#1114111;`, 10 bytes) per input byte, and valid UTF-8 comes out as
/// a plain model says (each character its byte, else `&#N;`).
pub fn charset_recode(data: &[u8]) {
    use crate::http::charset::map::Charsets;
    use crate::http::charset::recode::Recoder;
    let Some((&first, body)) = data.split_first() else { return };
    let text = concat!(include_str!("../../conf/koi-utf"), "\ncharset_map B A { 58 59; C1 E1; }");
    let Ok(p) = crate::config::parser::parse_str(text, "/f/koi-utf".as_ref(), "/f".as_ref()) else { return };
    let maps: Vec<_> = p.directives.iter().collect();
    let Ok(cs) = Charsets::build(&maps) else { panic!("nginx's koi-utf map is refused") };
    let (from, to) = [("koi8-r", "utf-8"), ("utf-8", "koi8-r"), ("B", "A")][usize::from(first % 3)];
    let Some(table) = cs.recode(from, to) else { panic!("no map from {from} to {to}") };
    let model = match (&table, std::str::from_utf8(body)) {
        (crate::http::charset::map::Recode::FromUtf8(t), Ok(s)) => Some(s.chars().fold(Vec::new(), |mut v, c| {
            match t.byte(c as u32) {
                _ if c.is_ascii() => v.push(c as u8),
                Some(b) => v.push(b),
                None => v.extend_from_slice(format!("&#{};", c as u32).as_bytes()),
            }
            v
        })),
        _ => None,
    };
    let mut whole = Vec::new();
    let mut r = Recoder::new(table.clone());
    r.feed(body, &mut whole);
    r.finish();
    let mut picks = Picks::new(data);
    let mut pieces = Vec::new();
    let mut r = Recoder::new(table);
    let mut at = 0;
    while at < body.len() {
        let end = (at + 1 + (picks.next() % 7) as usize).min(body.len());
        r.feed(&body[at..end], &mut pieces);
        at = end;
    }
    r.finish();
    assert_eq!(pieces, whole, "pieces differ from the whole ({from} to {to})");
    match to {
        "utf-8" => assert!(std::str::from_utf8(&whole).is_ok(), "not UTF-8"),
        "A" => assert_eq!(whole.len(), body.len()),
        _ => {
            assert!(whole.len() <= body.len() * 10);
            if let Some(m) = model {
                assert_eq!(whole, m, "valid UTF-8 recoded unlike the model");
            }
        }
    }
}

/// The SSI command parser (`ssi::parse`): the first byte picks
/// `ssi_value_length` (1 to 256), the rest is the page. The events do not
/// depend on how the page is cut into pieces; every command keeps nginx's
/// limits; text only ever comes from the page, in order, so a page with
/// no `<!--#` is its own only text.
pub fn ssi(data: &[u8]) {
    use crate::http::ssi::parse::{Event, parse_all};
    let Some((&first, body)) = data.split_first() else { return };
    let value_len = usize::from(first) + 1;
    let whole = parse_all(body, body.len().max(1), value_len);
    let mut picks = Picks::new(data);
    for _ in 0..3 {
        let piece = 1 + (picks.next() % 9) as usize;
        assert_eq!(parse_all(body, piece, value_len), whole, "pieces of {piece} differ from the whole");
    }
    let mut text = Vec::new();
    for e in &whole {
        match e {
            Event::Text(t) => text.extend_from_slice(t),
            Event::Span(..) => panic!("parse_all gives spans as text"),
            Event::Command(c) => {
                assert!(!c.name().is_empty() && c.name().len() <= 32, "command name {:?}", c.name());
                assert!(c.param_count() <= 16);
                for (n, v) in c.params() {
                    assert!(!n.is_empty() && n.len() <= 32 && v.len() <= value_len);
                }
            }
            Event::Error(m) => assert!(!m.is_empty()),
        }
    }
    assert!(text.len() <= body.len());
    if memchr::memmem::find(body, b"<!--#").is_none() {
        assert_eq!(text, body, "a page without commands is its own text");
        assert!(whole.iter().all(|e| matches!(e, Event::Text(_))));
    }
}
