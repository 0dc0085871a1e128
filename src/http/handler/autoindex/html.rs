//! nginx's autoindex HTML page (`autoindex_format html`), byte-identical to
//! nginx 1.22.1's `ngx_http_autoindex_html`, including its quirks:
//!
//! * Columns are counted in bytes unless the response charset is utf-8, in
//!   which case (valid) UTF-8 names are counted and cut in characters. With
//!   byte counting a long multi-byte name is cut mid-character, as nginx does.
//! * Names longer than 50 columns keep 47 and get `..&gt;`.
//! * A directory's '/' only fits if the name is shorter than 50 columns: a
//!   50-column directory name is shown without its slash.
//! * Truncation happens before HTML escaping, and padding is computed from the
//!   unescaped width.
//! * hrefs use URI-component escaping (`&` -> `%26`); title and h1 are the
//!   decoded URI, HTML-escaped only.
//! * `autoindex_exact_size off` rounds sizes to K, M and G (1024-based,
//!   half up) only from 10000 bytes on; `autoindex_localtime on` shifts
//!   times by the current UTC offset in whole minutes, as nginx's cached
//!   `gmtoff`.

use super::Entry;
use crate::http::date::{Tm, push_u64, push2};
use crate::http::uri::escape_uri_component;

/// NGX_HTTP_AUTOINDEX_NAME_LEN
const NAME_LEN: usize = 50;

/// How the page is laid out beyond nginx's defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    /// The response charset is utf-8 (nginx's `charset utf-8;`), which
    /// switches name widths from bytes to characters.
    pub utf8_charset: bool,
    /// Non-zero only for `autoindex_localtime on`.
    pub utc_offset_secs: i32,
    /// `autoindex_exact_size off`.
    pub rounded_sizes: bool,
}

/// `uri` is the decoded request path; `entries` are made `listable` first.
/// Renders with nginx's defaults: no charset, GMT times, exact sizes.
pub fn render(uri: &[u8], entries: &mut Vec<Entry>, out: &mut Vec<u8>) {
    render_with(uri, entries, Style::default(), out);
}

pub fn render_with(uri: &[u8], entries: &mut Vec<Entry>, style: Style, out: &mut Vec<u8>) {
    super::listable(entries);
    let Style { utf8_charset, utc_offset_secs, rounded_sizes } = style;

    // Escaping may grow names up to 3x; the fixed part of a line is ~110 bytes.
    let estimate = 200 + uri.len() * 2 + entries.iter().map(|e| e.name.len() * 4 + 120).sum::<usize>();
    out.reserve(estimate);

    out.extend_from_slice(b"<html>\r\n<head><title>Index of ");
    escape_html(uri, out);
    out.extend_from_slice(b"</title></head>\r\n<body>\r\n<h1>Index of ");
    escape_html(uri, out);
    out.extend_from_slice(b"</h1><hr><pre><a href=\"../\">../</a>\r\n");

    // nginx keeps the offset in minutes.
    let offset = i64::from(utc_offset_secs / 60) * 60;

    for e in entries.iter() {
        out.extend_from_slice(b"<a href=\"");
        escape_uri_component(&e.name, out);
        if e.is_dir {
            out.push(b'/');
        }
        out.extend_from_slice(b"\">");

        let mut len = if utf8_charset { utf8_length(&e.name) } else { e.name.len() };
        let shown = if len > NAME_LEN { NAME_LEN - 3 } else { len };
        let shown_bytes = if len != e.name.len() { utf8_prefix_len(&e.name, shown) } else { shown };
        escape_html(&e.name[..shown_bytes.min(e.name.len())], out);

        if len > NAME_LEN {
            out.extend_from_slice(b"..&gt;</a>");
        } else {
            if e.is_dir && len < NAME_LEN {
                out.push(b'/');
                len += 1;
            }
            out.extend_from_slice(b"</a>");
            out.resize(out.len() + (NAME_LEN - len), b' ');
        }
        out.push(b' ');

        let secs = i64::try_from(e.mtime).unwrap_or(i64::MAX).saturating_add(offset);
        let tm = Tm::from_unix(secs);
        tm.push_dmy(b'-', out);
        out.push(b' ');
        push2(out, tm.hour);
        out.push(b':');
        push2(out, tm.min);
        out.push(b' ');

        if rounded_sizes {
            push_rounded(out, e);
        } else if e.is_dir {
            out.extend_from_slice(b"                  -");
        } else {
            let digits = dec_len(e.size);
            out.resize(out.len() + 19usize.saturating_sub(digits), b' ');
            push_u64(out, e.size);
        }
        out.extend_from_slice(b"\r\n");
    }

    out.extend_from_slice(b"</pre><hr></body>\r\n</html>\r\n");
}

/// `autoindex_exact_size off`: nginx's `%6i%c` with K, M or G rounded
/// half up, or ` %6i` for sizes under 10000 bytes; `-` for a directory.
fn push_rounded(out: &mut Vec<u8>, e: &Entry) {
    const K: u64 = 1024;
    if e.is_dir {
        out.extend_from_slice(b"      -");
        return;
    }
    let n = e.size;
    let (size, scale) = if n > K * K * K - 1 {
        (n / (K * K * K) + u64::from(n % (K * K * K) > K * K * K / 2 - 1), Some(b'G'))
    } else if n > K * K - 1 {
        (n / (K * K) + u64::from(n % (K * K) > K * K / 2 - 1), Some(b'M'))
    } else if n > 9999 {
        (n / K + u64::from(n % K > K / 2 - 1), Some(b'K'))
    } else {
        (n, None)
    };
    if scale.is_none() {
        out.push(b' ');
    }
    out.resize(out.len() + 6usize.saturating_sub(dec_len(size)), b' ');
    push_u64(out, size);
    out.extend(scale);
}

fn dec_len(mut n: u64) -> usize {
    let mut l = 1;
    while n >= 10 {
        n /= 10;
        l += 1;
    }
    l
}

/// ngx_escape_html: only these four characters.
pub(super) fn escape_html(s: &[u8], out: &mut Vec<u8>) {
    let mut plain = 0;
    for (i, &b) in s.iter().enumerate() {
        let rep: &[u8] = match b {
            b'<' => b"&lt;",
            b'>' => b"&gt;",
            b'&' => b"&amp;",
            b'"' => b"&quot;",
            _ => continue,
        };
        out.extend_from_slice(&s[plain..i]);
        out.extend_from_slice(rep);
        plain = i + 1;
    }
    out.extend_from_slice(&s[plain..]);
}

/// ngx_utf8_decode: returns the sequence length, or None where nginx reports
/// invalid UTF-8. Deliberately as permissive as nginx (continuation bytes are
/// only checked for the high bit) so widths agree with it exactly.
fn ngx_utf8_decode(s: &[u8]) -> Option<usize> {
    let first = u32::from(*s.first()?);
    let (mut u, valid, len) = if first >= 0xf0 {
        (first & 0x07, 0xffff, 3)
    } else if first >= 0xe0 {
        (first & 0x0f, 0x7ff, 2)
    } else if first >= 0xc2 {
        (first & 0x1f, 0x7f, 1)
    } else {
        return None;
    };
    let tail = s.get(1..=len)?;
    for &c in tail {
        if c < 0x80 {
            return None;
        }
        u = (u << 6) | (u32::from(c) & 0x3f);
    }
    (u > valid && u <= 0x10_ffff).then_some(len + 1)
}

/// ngx_utf8_length: character count, or the byte length if any sequence is
/// invalid (which makes nginx fall back to byte columns for that name).
fn utf8_length(s: &[u8]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < s.len() {
        if s[i] < 0x80 {
            i += 1;
        } else {
            match ngx_utf8_decode(&s[i..]) {
                Some(l) => i += l,
                None => return s.len(),
            }
        }
        n += 1;
    }
    n
}

/// Byte length of the first `chars` characters (names reaching here were
/// already validated by `utf8_length`).
fn utf8_prefix_len(s: &[u8], chars: usize) -> usize {
    let mut i = 0;
    for _ in 0..chars {
        match s.get(i) {
            None => break,
            Some(&b) if b < 0x80 => i += 1,
            Some(_) => match ngx_utf8_decode(&s[i..]) {
                Some(l) => i += l,
                None => break,
            },
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-22 14:06:00 UTC, the mtime of the fixture files on the nginx
    /// used to capture the expectations.
    const T: u64 = 1_795_356_360;
    const T2: u64 = 1_795_356_540; // 14:09

    fn f(name: &[u8], size: u64, mtime: u64) -> Entry {
        Entry { name: name.to_vec(), is_dir: false, size, mtime }
    }

    fn d(name: &[u8], mtime: u64) -> Entry {
        Entry { name: name.to_vec(), is_dir: true, size: 4096, mtime }
    }

    fn render_str(uri: &[u8], entries: &mut Vec<Entry>, utf8: bool) -> String {
        let mut out = Vec::new();
        render_with(uri, entries, Style { utf8_charset: utf8, ..Style::default() }, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn fixture() -> Vec<Entry> {
        let rep = |c: &str, n: usize| c.repeat(n).into_bytes();
        vec![
            f(b"short.txt", 3, 1_767_582_245), // 2026-01-05 03:04:05
            f(b"sp ace & amp.txt", 0, T),
            f(b".hidden", 0, T),
            d(b"a dir", T),
            d(b"dir&<x>", T),
            d(&rep("e", 55), T),
            d(&rep("f", 50), T2),
            d(&rep("g", 49), T2),
            d(&rep("h", 51), T2),
            d(&rep("\u{f6}", 49), T2),
            d(b"sub", T),
            f(b"Zed", 0, T),
            f(&rep("a", 50), 0, T),
            f(&rep("b", 51), 0, T),
            f(&rep("c", 49), 0, T),
            f(&rep("d", 60), 0, T),
            f(b"big.bin", 123_456_789, T),
            f(b"mid.bin", 1000, T),
            f(b"hash#x", 0, T),
            f(b"lt<gt>\"q", 0, T),
            f(b"pct%41", 0, T),
            f(b"q?mark", 0, T),
            f(&[rep("x", 40), rep("&", 11)].concat(), 0, T2),
            f(&[rep("y", 48), rep("&", 1)].concat(), 0, T2),
            f(b"bad\xff\xfename", 0, T2),
            f(&rep("\u{e9}", 30), 0, T),
            f(&rep("\u{e9}", 60), 0, T),
            f(&rep("\u{e9}", 50), 0, T2),
            f(&rep("\u{e4}", 51), 0, T2),
            f("\u{fc}n\u{ef}c\u{f6}d\u{e9}-\u{540d}\u{524d}.txt".as_bytes(), 0, T),
        ]
    }

    const HEAD: &str = "<html>\r\n<head><title>Index of /dir/</title></head>\r\n<body>\r\n<h1>Index of /dir/</h1><hr><pre><a href=\"../\">../</a>\r\n";
    const FOOT: &str = "</pre><hr></body>\r\n</html>\r\n";

    /// Lines copied from nginx 1.22.1's output for the same directory
    /// (byte columns, no charset).
    #[test]
    fn matches_nginx_byte_columns() {
        let mut entries = fixture();
        let out = render_str(b"/dir/", &mut entries, false);
        let e = "\u{e9}";
        let expect_lines = [
            "<a href=\"a%20dir/\">a dir/</a>                                             22-Nov-2026 14:06                   -".to_string(),
            "<a href=\"dir%26%3Cx%3E/\">dir&amp;&lt;x&gt;/</a>                                           22-Nov-2026 14:06                   -".to_string(),
            format!("<a href=\"{0}/\">{1}..&gt;</a> 22-Nov-2026 14:06                   -", "e".repeat(55), "e".repeat(47)),
            format!("<a href=\"{0}/\">{0}</a> 22-Nov-2026 14:09                   -", "f".repeat(50)),
            format!("<a href=\"{0}/\">{0}/</a> 22-Nov-2026 14:09                   -", "g".repeat(49)),
            format!("<a href=\"{0}/\">{1}..&gt;</a> 22-Nov-2026 14:09                   -", "h".repeat(51), "h".repeat(47)),
            "<a href=\"sub/\">sub/</a>                                               22-Nov-2026 14:06                   -".to_string(),
            format!("<a href=\"{0}/\">{1}\u{fffd}..&gt;</a> 22-Nov-2026 14:09                   -", "%C3%B6".repeat(49), "\u{f6}".repeat(23)),
            "<a href=\"Zed\">Zed</a>                                                22-Nov-2026 14:06                   0".to_string(),
            format!("<a href=\"{0}\">{0}</a> 22-Nov-2026 14:06                   0", "a".repeat(50)),
            "<a href=\"bad%FF%FEname\">bad\u{fffd}\u{fffd}name</a>                                          22-Nov-2026 14:09                   0".to_string(),
            format!("<a href=\"{0}\">{1}..&gt;</a> 22-Nov-2026 14:06                   0", "b".repeat(51), "b".repeat(47)),
            "<a href=\"big.bin\">big.bin</a>                                            22-Nov-2026 14:06           123456789".to_string(),
            format!("<a href=\"{0}\">{0}</a>  22-Nov-2026 14:06                   0", "c".repeat(49)),
            format!("<a href=\"{0}\">{1}..&gt;</a> 22-Nov-2026 14:06                   0", "d".repeat(60), "d".repeat(47)),
            "<a href=\"hash%23x\">hash#x</a>                                             22-Nov-2026 14:06                   0".to_string(),
            "<a href=\"lt%3Cgt%3E%22q\">lt&lt;gt&gt;&quot;q</a>                                           22-Nov-2026 14:06                   0".to_string(),
            "<a href=\"mid.bin\">mid.bin</a>                                            22-Nov-2026 14:06                1000".to_string(),
            "<a href=\"pct%2541\">pct%41</a>                                             22-Nov-2026 14:06                   0".to_string(),
            "<a href=\"q%3Fmark\">q?mark</a>                                             22-Nov-2026 14:06                   0".to_string(),
            "<a href=\"short.txt\">short.txt</a>                                          05-Jan-2026 03:04                   3".to_string(),
            "<a href=\"sp%20ace%20%26%20amp.txt\">sp ace &amp; amp.txt</a>                                   22-Nov-2026 14:06                   0".to_string(),
            format!("<a href=\"{0}{1}\">{0}&amp;&amp;&amp;&amp;&amp;&amp;&amp;..&gt;</a> 22-Nov-2026 14:09                   0", "x".repeat(40), "%26".repeat(11)),
            format!("<a href=\"{0}%26\">{0}&amp;</a>  22-Nov-2026 14:09                   0", "y".repeat(48)),
            format!("<a href=\"{0}\">{1}\u{fffd}..&gt;</a> 22-Nov-2026 14:09                   0", "%C3%A4".repeat(51), "\u{e4}".repeat(23)),
            format!("<a href=\"{0}\">{1}\u{fffd}..&gt;</a> 22-Nov-2026 14:06                   0", "%C3%A9".repeat(30), e.repeat(23)),
            format!("<a href=\"{0}\">{1}\u{fffd}..&gt;</a> 22-Nov-2026 14:09                   0", "%C3%A9".repeat(50), e.repeat(23)),
            format!("<a href=\"{0}\">{1}\u{fffd}..&gt;</a> 22-Nov-2026 14:06                   0", "%C3%A9".repeat(60), e.repeat(23)),
            "<a href=\"%C3%BCn%C3%AFc%C3%B6d%C3%A9-%E5%90%8D%E5%89%8D.txt\">\u{fc}n\u{ef}c\u{f6}d\u{e9}-\u{540d}\u{524d}.txt</a>                             22-Nov-2026 14:06                   0".to_string(),
        ];
        let mut expect = HEAD.to_string();
        for l in &expect_lines {
            expect.push_str(l);
            expect.push_str("\r\n");
        }
        expect.push_str(FOOT);
        assert_eq!(out, expect);
        assert_eq!(entries.len(), 29, "hidden entry removed");
    }

    /// Lines that differ when nginx runs with `charset utf-8;`.
    #[test]
    fn matches_nginx_utf8_columns() {
        let mut entries = fixture();
        let out = render_str(b"/diru/", &mut entries, true);
        let want = [
            format!("<a href=\"{0}/\">{1}/</a> 22-Nov-2026 14:09                   -", "%C3%B6".repeat(49), "\u{f6}".repeat(49)),
            format!("<a href=\"{0}\">{1}..&gt;</a> 22-Nov-2026 14:09                   0", "%C3%A4".repeat(51), "\u{e4}".repeat(47)),
            format!("<a href=\"{0}\">{1}</a>                     22-Nov-2026 14:06                   0", "%C3%A9".repeat(30), "\u{e9}".repeat(30)),
            format!("<a href=\"{0}\">{1}</a> 22-Nov-2026 14:09                   0", "%C3%A9".repeat(50), "\u{e9}".repeat(50)),
            format!("<a href=\"{0}\">{1}..&gt;</a> 22-Nov-2026 14:06                   0", "%C3%A9".repeat(60), "\u{e9}".repeat(47)),
            "<a href=\"%C3%BCn%C3%AFc%C3%B6d%C3%A9-%E5%90%8D%E5%89%8D.txt\">\u{fc}n\u{ef}c\u{f6}d\u{e9}-\u{540d}\u{524d}.txt</a>                                     22-Nov-2026 14:06                   0".to_string(),
            // Invalid UTF-8 falls back to byte columns.
            "<a href=\"bad%FF%FEname\">bad\u{fffd}\u{fffd}name</a>                                          22-Nov-2026 14:09                   0".to_string(),
            // ASCII is unaffected.
            "<a href=\"sub/\">sub/</a>                                               22-Nov-2026 14:06                   -".to_string(),
        ];
        for w in &want {
            assert!(out.contains(&format!("{w}\r\n")), "missing line {w:?}\n{out}");
        }
        assert!(out.starts_with("<html>\r\n<head><title>Index of /diru/</title></head>\r\n"));
    }

    #[test]
    fn empty_dir_and_escaped_uri() {
        let mut entries = vec![f(b".only-hidden", 1, 0)];
        let mut out = Vec::new();
        render(b"/a dir/<b>&\"/", &mut entries, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<html>\r\n<head><title>Index of /a dir/&lt;b&gt;&amp;&quot;/</title></head>\r\n<body>\r\n<h1>Index of /a dir/&lt;b&gt;&amp;&quot;/</h1><hr><pre><a href=\"../\">../</a>\r\n</pre><hr></body>\r\n</html>\r\n"
        );
        assert!(entries.is_empty());
    }

    #[test]
    fn localtime_and_sizes() {
        let mut entries = vec![f(b"x", u64::MAX, 0), f(b"y", 1_234_567_890_123_456_789, 0)];
        let mut out = Vec::new();
        render_with(b"/", &mut entries, Style { utc_offset_secs: -(5 * 3600 + 30 * 60), ..Style::default() }, &mut out);
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains(
            "<a href=\"x\">x</a>                                                  31-Dec-1969 18:30 18446744073709551615\r\n"
        ));
        assert!(s.contains(
            "<a href=\"y\">y</a>                                                  31-Dec-1969 18:30 1234567890123456789\r\n"
        ));
    }

    /// `autoindex_exact_size off` and `autoindex_localtime on` (UTC+5:30),
    /// lines copied from nginx 1.22.1's output for the same files.
    #[test]
    fn rounded_sizes_and_localtime_match_nginx() {
        let sizes: [(&[u8], u64); 13] = [
            (b"g1", (1 << 30) - 1),
            (b"g2", 1 << 30),
            (b"g3", 3 << 29),
            (b"g4", 5_000_000_000_000),
            (b"m1", (1 << 20) - 1),
            (b"m2", 1 << 20),
            (b"m3", 3 << 19),
            (b"m4", (3 << 19) - 1),
            (b"s10000", 10000),
            (b"s10751", 10751),
            (b"s10752", 10752),
            (b"s9999", 9999),
            (b"zero", 0),
        ];
        let mut entries: Vec<Entry> = sizes.iter().map(|(n, s)| f(n, *s, T)).collect();
        entries.push(d(b"sub dir", T));
        let mut out = Vec::new();
        let style = Style { utc_offset_secs: 5 * 3600 + 30 * 60, rounded_sizes: true, ..Style::default() };
        render_with(b"/h/", &mut entries, style, &mut out);
        let pad = |name: &str| " ".repeat(50 - name.len());
        let mut want = String::from(
            "<html>\r\n<head><title>Index of /h/</title></head>\r\n<body>\r\n<h1>Index of /h/</h1><hr><pre><a href=\"../\">../</a>\r\n",
        );
        want.push_str(&format!("<a href=\"sub%20dir/\">sub dir/</a>{} 22-Nov-2026 19:36       -\r\n", pad("sub dir/")));
        for (name, shown) in [
            ("g1", "  1024M"),
            ("g2", "     1G"),
            ("g3", "     2G"),
            ("g4", "  4657G"),
            ("m1", "  1024K"),
            ("m2", "     1M"),
            ("m3", "     2M"),
            ("m4", "     1M"),
            ("s10000", "    10K"),
            ("s10751", "    10K"),
            ("s10752", "    11K"),
            ("s9999", "   9999"),
            ("zero", "      0"),
        ] {
            want.push_str(&format!("<a href=\"{name}\">{name}</a>{} 22-Nov-2026 19:36 {shown}\r\n", pad(name)));
        }
        want.push_str(FOOT);
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    #[test]
    fn sort_is_dirs_first_then_bytewise() {
        let mut entries = vec![f(b"b", 0, 0), d(b"z", 0), f(b"B", 0, 0), d(b"A", 0), f(b"\xc3\xa9", 0, 0)];
        let mut out = Vec::new();
        render(b"/", &mut entries, &mut out);
        let names: Vec<&[u8]> = entries.iter().map(|e| &e.name[..]).collect();
        assert_eq!(names, [&b"A"[..], b"z", b"B", b"b", b"\xc3\xa9"]);
    }

    #[test]
    fn utf8_helpers_follow_nginx() {
        assert_eq!(utf8_length("h\u{e9}llo".as_bytes()), 5);
        assert_eq!(utf8_length("\u{540d}\u{1f600}".as_bytes()), 2);
        assert_eq!(utf8_length(b"a\xc3"), 2); // truncated sequence: byte length
        assert_eq!(utf8_length(b"\xc0\x80"), 2); // overlong lead: invalid
        assert_eq!(utf8_length(b"\xe0\x80\x80"), 3); // overlong: invalid
        assert_eq!(utf8_length(b"\xf4\x90\x80\x80"), 4); // > U+10FFFF: invalid
        assert_eq!(utf8_prefix_len("\u{e9}\u{e9}x".as_bytes(), 2), 4);
        assert_eq!(utf8_prefix_len(b"ab", 5), 2);
    }
}
