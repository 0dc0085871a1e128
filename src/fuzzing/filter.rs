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
