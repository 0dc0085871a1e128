//! Request-target normalization (`http/uri`) and `Range` (`http/range`).

use super::show;
use crate::http::range::{self, Boundary, ByteRange, RangeResult};
use crate::http::uri;

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// nginx's normalization written the obvious way, to hold the one-pass
/// implementation to: decode every `%XX` first (a bad escape or a NUL is
/// an error), then resolve the segments on a stack (empty and `.` dropped,
/// `..` pops and may not pop the root), ending in `/` when the last
/// segment was empty, `.` or `..`.
fn reference(path: &[u8]) -> Option<Vec<u8>> {
    if path.first() != Some(&b'/') {
        return None;
    }
    let mut dec = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < path.len() {
        match path[i] {
            0 => return None,
            b'%' => {
                let v = hex(*path.get(i + 1)?)? << 4 | hex(*path.get(i + 2)?)?;
                if v == 0 {
                    return None;
                }
                dec.push(v);
                i += 3;
            }
            b => {
                dec.push(b);
                i += 1;
            }
        }
    }
    let segs: Vec<&[u8]> = dec[1..].split(|&b| b == b'/').collect();
    let mut stack: Vec<&[u8]> = Vec::new();
    for s in &segs {
        match *s {
            b"" | b"." => {}
            b".." => {
                stack.pop()?;
            }
            s => stack.push(s),
        }
    }
    let dir = segs.last().is_some_and(|s| matches!(*s, b"" | b"." | b".."));
    let mut out = vec![b'/'];
    out.extend_from_slice(&stack.join(&b'/'));
    if dir && !stack.is_empty() {
        out.push(b'/');
    }
    Some(out)
}

/// One path through `normalize_path`, checked against the reference and
/// for the properties routing relies on.
fn check_path(path: &[u8]) {
    let got = uri::normalize_path(path);
    let want = reference(path);
    assert_eq!(
        got.as_deref().ok(),
        want.as_deref(),
        "normalize_path({}) = {:?}, reference {:?}",
        show(path),
        got.as_deref().map(show),
        want.as_deref().map(show)
    );
    let Ok(out) = got else { return };
    // Never above the root, never a dot segment, never an empty one.
    assert_eq!(out.first(), Some(&b'/'), "{}", show(&out));
    let segs: Vec<&[u8]> = out[1..].split(|&b| b == b'/').collect();
    if let Some((last, inner)) = segs.split_last() {
        for seg in inner {
            assert!(!matches!(*seg, b"" | b"." | b".."), "segment {} in {} from {}", show(seg), show(&out), show(path));
        }
        assert!(!matches!(*last, b"." | b".."), "{} from {}", show(&out), show(path));
    }
    // merge_slashes off: the same result when the input cannot hold an
    // empty segment (no `//`, no `%2F`); never a dot segment, never above
    // the root.
    if let Ok(kept) = uri::normalize_path_with(path, false) {
        assert_eq!(kept.first(), Some(&b'/'));
        let segs: Vec<&[u8]> = kept[1..].split(|&b| b == b'/').collect();
        if let Some((last, inner)) = segs.split_last() {
            assert!(inner.iter().all(|s| !matches!(*s, b"." | b"..")), "{} from {}", show(&kept), show(path));
            assert!(!matches!(*last, b"." | b".."), "{} from {}", show(&kept), show(path));
        }
        let may_have_empty =
            path.windows(2).any(|w| w == b"//") || path.windows(3).any(|w| w.eq_ignore_ascii_case(b"%2f"));
        if !may_have_empty {
            assert_eq!(&kept[..], &out[..], "merge_slashes off differs without empty segments: {}", show(path));
        }
    } else {
        panic!("merge_slashes off refused {} which merging accepts", show(path));
    }
    // Normalizing again (the result escaped back into a target, since
    // normalization decodes) gives the same path.
    let mut escaped = Vec::new();
    uri::escape_uri(&out, &mut escaped);
    let again = uri::normalize_path(&escaped);
    assert_eq!(again.as_deref().ok(), Some(&out[..]), "not stable: {} -> {} -> {:?}", show(path), show(&out), again);
    // Unescaped too, where that means the same: a normal path takes the
    // borrowed fast path and comes back unchanged.
    if !out.contains(&b'%') {
        match uri::normalize_path(&out) {
            Ok(std::borrow::Cow::Borrowed(p)) => assert_eq!(p, &out[..]),
            other => panic!("normal path {} not on the fast path: {other:?}", show(&out)),
        }
    }
}

/// A request target as the connection splits it: path before the first
/// `?` or `#`, query up to a `#`.
pub(super) fn check_target(target: &[u8]) {
    let (path, query) = uri::split_target(target);
    assert!(target.starts_with(path) && !path.contains(&b'?') && !path.contains(&b'#'), "{}", show(target));
    if let Some(q) = query {
        assert!(!q.contains(&b'#'), "query {} of {}", show(q), show(target));
    }
    check_path(path);
}

/// Request-target normalization. Properties: no panic; the result equals
/// an independent reference model of nginx's rules; it starts at the root,
/// has no `.`, `..` or empty segment, and normalizing it again (escaped,
/// or as is when that means the same) gives it back.
pub fn uri(data: &[u8]) {
    check_target(data);
    if data.first() != Some(&b'/') {
        let mut rooted = Vec::with_capacity(data.len() + 1);
        rooted.push(b'/');
        rooted.extend_from_slice(data);
        check_path(&rooted);
    }
}

/// Up to four numbers written in the header, each with its neighbours, as
/// representation lengths: the edges where ranges start to fit.
fn lengths_from(header: &[u8]) -> Vec<u64> {
    let mut out = vec![0, 1, 2, 10, 1000, i64::MAX as u64, u64::MAX];
    for run in header.split(|b| !b.is_ascii_digit()).filter(|r| !r.is_empty()).take(4) {
        let n = std::str::from_utf8(run).ok().and_then(|s| s.parse::<u64>().ok()).unwrap_or(u64::MAX);
        out.extend([n.saturating_sub(1), n, n.saturating_add(1)]);
    }
    out
}

fn check_ranges(header: &[u8], len: u64, max: Option<usize>, rs: &[ByteRange]) {
    let at = || format!("{} on {len} bytes, max {max:?}", show(header));
    assert!(!rs.is_empty(), "no ranges: {}", at());
    assert!(max.is_none_or(|m| rs.len() <= m), "{} ranges: {}", rs.len(), at());
    let mut total = 0u64;
    for r in rs {
        assert!(r.start <= r.end && r.end < len, "{r:?} outside the representation: {}", at());
        total += r.end - r.start + 1;
    }
    assert!(total <= len, "{total} bytes of ranges: {}", at());
    // What goes on the wire agrees with the announced length.
    let b = Boundary::new(len);
    let ct = b"text/plain";
    let mut heads = Vec::new();
    for &r in rs {
        range::multipart_part_header(b.as_str(), ct, r, len, &mut heads);
    }
    range::multipart_trailer(b.as_str(), &mut heads);
    assert_eq!(range::multipart_length(rs, b.as_str(), ct, len), heads.len() as u64 + total, "{}", at());
    let mut cr = Vec::new();
    range::content_range(rs[0], len, &mut cr);
    assert_eq!(cr, format!("bytes {}-{}/{len}", rs[0].start, rs[0].end).into_bytes());
}

/// `Range` parsing against many representation lengths and `max_ranges`
/// values. Properties: no panic; every range returned lies inside the
/// representation, in order of its own bounds, adding up to no more than
/// it; `max_ranges` is honoured (0: always ignored; fewer than the ranges:
/// ignored) and changes nothing else; surrounding blanks change nothing.
pub fn range(data: &[u8]) {
    let h = data.trim_ascii();
    let is_bytes = h.len() >= 7 && h[..6].eq_ignore_ascii_case(b"bytes=");
    for len in lengths_from(data) {
        let free = range::parse_range(data, len, None);
        match &free {
            RangeResult::Satisfiable(rs) => check_ranges(data, len, None, rs),
            RangeResult::Ignore | RangeResult::Unsatisfiable => {}
        }
        if !is_bytes {
            assert_eq!(free, RangeResult::Ignore, "{} is not a byte range", show(data));
        }
        assert_eq!(range::parse_range(data, len, Some(0)), RangeResult::Ignore);
        for max in [1, 2, 5] {
            let capped = range::parse_range(data, len, Some(max));
            if let RangeResult::Satisfiable(rs) = &capped {
                check_ranges(data, len, Some(max), rs);
            }
            let ok = match (&free, &capped) {
                (RangeResult::Satisfiable(a), RangeResult::Satisfiable(b)) => a.len() <= max && a == b,
                (RangeResult::Satisfiable(a), RangeResult::Ignore) => a.len() > max,
                (RangeResult::Ignore, c) => *c == RangeResult::Ignore,
                (RangeResult::Unsatisfiable, c) => matches!(c, RangeResult::Unsatisfiable | RangeResult::Ignore),
                _ => false,
            };
            assert!(ok, "max_ranges {max} turned {free:?} into {capped:?}: {} on {len} bytes", show(data));
        }
    }
    let mut padded = b" \t".to_vec();
    padded.extend_from_slice(data);
    padded.extend_from_slice(b"\r\n ");
    assert_eq!(range::parse_range(&padded, 1000, None), range::parse_range(data, 1000, None), "{}", show(data));
}

/// The slice module's `Content-Range` parser (`http/slice`), which reads
/// an origin's header: what it accepts is `bytes S-E/L` or `bytes S-E/*`
/// with spaces only around the parts, `end` one past `E`, every number
/// within nginx's off_t; written back canonically it parses the same.
pub fn slice_content_range(data: &[u8]) {
    use crate::http::slice::parse_content_range;
    let Some(cr) = parse_content_range(data) else { return };
    assert!(data.starts_with(b"bytes "), "{}", show(data));
    assert!(cr.start <= i64::MAX as u64 && cr.end >= 1 && cr.end - 1 <= i64::MAX as u64, "{}", show(data));
    assert!(cr.complete.is_none_or(|l| l <= i64::MAX as u64), "{}", show(data));
    assert!(
        data[6..].iter().all(|b| b.is_ascii_digit() || matches!(b, b' ' | b'-' | b'/' | b'*')),
        "{} has other bytes",
        show(data)
    );
    let canonical = match cr.complete {
        Some(l) => format!("bytes {}-{}/{}", cr.start, cr.end - 1, l),
        None => format!("bytes {}-{}/*", cr.start, cr.end - 1),
    };
    assert_eq!(parse_content_range(canonical.as_bytes()), Some(cr), "{}", show(data));
}
