//! The origin's response head: the one-pass scanner (`proxy/head_scan`)
//! against httparse, and the whole of `proxy/response_head`.

use super::show;
use crate::config::proxy::ProxyConf;
use crate::http::proxy::head_scan::{self, Field};
use crate::http::proxy::response_head;

type Owned = Vec<(Vec<u8>, Vec<u8>)>;

/// httparse's reading with the configuration the proxy's slow path uses
/// (the default one) and room for every line; None unless complete.
fn httparse_head(buf: &[u8]) -> Option<(head_scan::Head, Owned)> {
    let mut hdrs = vec![httparse::EMPTY_HEADER; buf.len() / 3 + 2];
    let mut r = httparse::Response::new(&mut hdrs);
    match httparse::ParserConfig::default().parse_response(&mut r, buf) {
        Ok(httparse::Status::Complete(len)) => {
            let fields: Owned = r.headers.iter().map(|h| (h.name.as_bytes().to_vec(), h.value.to_vec())).collect();
            let head = head_scan::Head { http11: r.version == Some(1), status: r.code?, fields: fields.len(), len };
            Some((head, fields))
        }
        _ => None,
    }
}

fn scan(buf: &[u8], room: usize) -> Option<(head_scan::Head, Owned)> {
    let mut fields = [Field::EMPTY; 32];
    let room = room.min(fields.len());
    let h = head_scan::scan(buf, &mut fields[..room])?;
    let list = fields[..h.fields].iter().map(|f| (f.name.to_vec(), f.value.to_vec())).collect();
    Some((h, list))
}

thread_local! {
    static CONF: ProxyConf = ProxyConf::default();
}

/// Differential: where the scanner accepts a head, httparse accepts it
/// with the same length, version, status and fields (names as sent,
/// values without surrounding blanks). Also: the scanner's answer does
/// not depend on bytes after the head, nor on the room for fields beyond
/// what the head has (one slot fewer and it declines); and the proxy's
/// whole head reader (`response_head::parse_response`, scanner then
/// httparse) does not panic, and neither does the rewriting of the
/// Set-Cookie values such a head carries (`proxy::cookie::fuzz`).
pub fn head_scan(data: &[u8]) {
    crate::http::proxy::cookie::fuzz(data);
    CONF.with(|conf| {
        let _ = response_head::parse_response(data, false, &conf.up);
        let _ = response_head::parse_response(data, true, &conf.up);
        // uwsgi's answer: a status line or CGI lines, never kept alive,
        // its head within what was read.
        for head_request in [false, true] {
            if let Ok(Some(h)) = crate::http::uwsgi::response::parse(data, head_request, &conf.up) {
                assert!(!h.keep_alive && h.head_len <= data.len(), "uwsgi head: {}", show(data));
            }
        }
    });
    let Some((h, fields)) = scan(data, 32) else { return };
    let Some((rh, rfields)) = httparse_head(data) else {
        panic!("head_scan accepted what httparse refuses: {}", show(data));
    };
    assert_eq!(h, rh, "head differs from httparse's: {}", show(data));
    assert_eq!(fields, rfields, "fields differ from httparse's: {}", show(data));
    let len = h.len;
    assert_eq!(scan(&data[..len], 32), Some((h, fields.clone())), "the head alone: {}", show(data));
    assert_eq!(scan(data, fields.len()).map(|(_, f)| f), Some(fields.clone()), "exact room: {}", show(data));
    if !fields.is_empty() {
        assert_eq!(scan(data, fields.len() - 1), None, "accepted with too little room: {}", show(data));
    }
    for p in [len - 1, len - 2, len / 2] {
        assert_eq!(scan(&data[..p], 32), None, "a partial head of {p} bytes accepted: {}", show(data));
    }
}
