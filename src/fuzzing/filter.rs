//! Body filters that read bytes from origins and files: the sub filter's
//! streaming replacer.

use super::Picks;
use crate::http::filter::sub::Replacer;

/// The replacer: the same output however the body is cut into pieces, and
/// the same as replacing in the whole body at once. The input's first
/// line holds up to three `|`-separated patterns; the rest is the body.
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
        // With no pattern in the body, the body is unchanged.
        let lower = body.to_ascii_lowercase();
        if pairs.iter().all(|(p, _)| !lower.windows(p.len()).any(|w| w == &p[..])) {
            assert_eq!(whole, body);
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
            Event::Command(c) => {
                assert!(!c.name.is_empty() && c.name.len() <= 32, "command name {:?}", c.name);
                assert!(c.params.len() <= 16);
                for (n, v) in &c.params {
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
