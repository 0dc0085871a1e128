//! The listing as data: nginx's `autoindex_format json`, `jsonp` and `xml`,
//! byte-identical to nginx 1.22.1. Times are always GMT and sizes always
//! exact (`autoindex_localtime` and `autoindex_exact_size` shape only the
//! HTML page); names are escaped for the format and otherwise passed as
//! the file system has them (invalid UTF-8 included, as nginx does).

use super::{Entry, listable};
use crate::http::date::{Tm, push_u64, push_year, push2};

/// `[` and one `{ "name":..., "type":..., "mtime":..., "size":... }` per
/// line, CRLF-separated, then `]` with no line end.
pub fn json(entries: &mut Vec<Entry>, out: &mut Vec<u8>) {
    listable(entries);
    out.extend_from_slice(b"[");
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"\r\n{ \"name\":\"");
        escape_json(&e.name, out);
        out.extend_from_slice(if e.is_dir { b"\", \"type\":\"directory\"" } else { b"\", \"type\":\"file\"" });
        out.extend_from_slice(b", \"mtime\":\"");
        let mut date = [0u8; 29];
        crate::http::date::http_date(e.mtime, &mut date);
        out.extend_from_slice(&date);
        out.push(b'"');
        if !e.is_dir {
            out.extend_from_slice(b", \"size\":");
            push_u64(out, e.size);
        }
        out.extend_from_slice(b" }");
    }
    out.extend_from_slice(b"\r\n]");
}

/// `/* callback */`, then `NAME(` the JSON `);`.
pub fn jsonp(callback: &[u8], entries: &mut Vec<Entry>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"/* callback */\r\n");
    out.extend_from_slice(callback);
    out.push(b'(');
    json(entries, out);
    out.extend_from_slice(b");");
}

/// `<list>` of `<directory mtime="...">` and `<file mtime="..." size="...">`
/// elements, one per line, times in ISO 8601 UTC.
pub fn xml(entries: &mut Vec<Entry>, out: &mut Vec<u8>) {
    listable(entries);
    out.extend_from_slice(b"<?xml version=\"1.0\"?>\r\n<list>\r\n");
    for e in entries.iter() {
        out.extend_from_slice(if e.is_dir { b"<directory" } else { b"<file" });
        out.extend_from_slice(b" mtime=\"");
        let tm = Tm::from_unix(i64::try_from(e.mtime).unwrap_or(i64::MAX));
        push_year(out, tm.year);
        for (sep, n) in [(b'-', tm.mon), (b'-', tm.mday), (b'T', tm.hour), (b':', tm.min), (b':', tm.sec)] {
            out.push(sep);
            push2(out, n);
        }
        out.extend_from_slice(b"Z\"");
        if !e.is_dir {
            out.extend_from_slice(b" size=\"");
            push_u64(out, e.size);
            out.push(b'"');
        }
        out.push(b'>');
        super::html::escape_html(&e.name, out);
        out.extend_from_slice(if e.is_dir { b"</directory>\r\n" } else { b"</file>\r\n" });
    }
    out.extend_from_slice(b"</list>\r\n");
}

/// ngx_escape_json: `"` and `\` backslashed, control characters as `\n`,
/// `\r`, `\t`, `\b`, `\f` or `\u00XX` (upper-case hex); every other byte,
/// DEL and non-ASCII included, as is.
fn escape_json(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'"' | b'\\' => out.extend_from_slice(&[b'\\', b]),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..0x20 => {
                const HEX: &[u8; 16] = b"0123456789ABCDEF";
                out.extend_from_slice(b"\\u00");
                out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            }
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-22 14:06:00 UTC.
    const T: u64 = 1_795_356_360;

    fn fixture() -> Vec<Entry> {
        let f = |name: &[u8], size: u64| Entry { name: name.to_vec(), is_dir: false, size, mtime: T };
        vec![
            f(b"zero", 0),
            f(b"q\"uo\\te<&>.txt", 0),
            f(b".hidden", 1),
            Entry { name: b"sub dir".to_vec(), is_dir: true, size: 4096, mtime: T },
            f(b"g4", 5_000_000_000_000),
            f(b"c\x01\x02\x1f\x7f\x08x\x0cy\rz", 0),
            f(b"n\nl\ttab", 0),
            f(b"inv\xff\xfe", 0),
        ]
    }

    /// Bytes as nginx 1.22.1 sent them for the same names.
    #[test]
    fn json_matches_nginx() {
        let mut out = Vec::new();
        json(&mut fixture(), &mut out);
        let m = "\"mtime\":\"Sun, 22 Nov 2026 14:06:00 GMT\"";
        let mut want = b"[\r\n".to_vec();
        for line in [
            format!("{{ \"name\":\"sub dir\", \"type\":\"directory\", {m} }},"),
            format!("{{ \"name\":\"c\\u0001\\u0002\\u001F\x7f\\bx\\fy\\rz\", \"type\":\"file\", {m}, \"size\":0 }},"),
            format!("{{ \"name\":\"g4\", \"type\":\"file\", {m}, \"size\":5000000000000 }},"),
        ] {
            want.extend_from_slice(line.as_bytes());
            want.extend_from_slice(b"\r\n");
        }
        want.extend_from_slice(b"{ \"name\":\"inv");
        want.extend_from_slice(b"\xff\xfe");
        want.extend_from_slice(format!("\", \"type\":\"file\", {m}, \"size\":0 }},\r\n").as_bytes());
        for line in [
            format!("{{ \"name\":\"n\\nl\\ttab\", \"type\":\"file\", {m}, \"size\":0 }},"),
            format!("{{ \"name\":\"q\\\"uo\\\\te<&>.txt\", \"type\":\"file\", {m}, \"size\":0 }},"),
        ] {
            want.extend_from_slice(line.as_bytes());
            want.extend_from_slice(b"\r\n");
        }
        want.extend_from_slice(format!("{{ \"name\":\"zero\", \"type\":\"file\", {m}, \"size\":0 }}\r\n]").as_bytes());
        assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(&want));
        assert_eq!(out, want);

        let mut empty = Vec::new();
        json(&mut Vec::new(), &mut empty);
        assert_eq!(empty, b"[\r\n]");
        let mut p = Vec::new();
        jsonp(b"cb", &mut Vec::new(), &mut p);
        assert_eq!(p, b"/* callback */\r\ncb([\r\n]);");
    }

    #[test]
    fn xml_matches_nginx() {
        let mut out = Vec::new();
        let mut entries = fixture();
        entries.retain(|e| e.name.starts_with(b"q") || e.name.starts_with(b"sub") || e.name == b"g4");
        xml(&mut entries, &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "<?xml version=\"1.0\"?>\r\n<list>\r\n\
             <directory mtime=\"2026-11-22T14:06:00Z\">sub dir</directory>\r\n\
             <file mtime=\"2026-11-22T14:06:00Z\" size=\"5000000000000\">g4</file>\r\n\
             <file mtime=\"2026-11-22T14:06:00Z\" size=\"0\">q&quot;uo\\te&lt;&amp;&gt;.txt</file>\r\n\
             </list>\r\n"
        );
        let mut empty = Vec::new();
        xml(&mut Vec::new(), &mut empty);
        assert_eq!(empty, b"<?xml version=\"1.0\"?>\r\n<list>\r\n</list>\r\n");
    }
}
