//! The slice module: `slice SIZE` with `proxy_set_header Range
//! $slice_range` fetches a response from the origin in pieces (one
//! request per piece, each cached under its own key), and answers the
//! whole body or the client's range of it; a piece whose status, ETag or
//! Content-Range does not fit cuts the response off. The origin is a
//! small range-honouring server that records what it was asked. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::origin::*;
use common::*;

const BODY: &str = "0123456789abcdefghij";

/// Answers `Range: bytes=A-B` with a 206 of BODY, and the whole body
/// otherwise; `/badetag` changes its ETag per piece and `/badrange`
/// answers every piece with the first one.
fn ranged(r: &Req) -> Reply {
    let len = BODY.len();
    let Some(range) = r.header("Range").and_then(|v| v.strip_prefix("bytes=")) else {
        return Reply::http(200, &["Content-Type: text/plain", "ETag: \"e1\""], BODY);
    };
    let (a, b) = range.split_once('-').unwrap_or(("0", ""));
    let a: usize = a.parse().unwrap_or(0);
    if a >= len {
        return Reply::http(416, &[&format!("Content-Range: bytes */{len}")], "");
    }
    let b: usize = b.parse::<usize>().unwrap_or(len - 1).min(len - 1);
    let (a, b, etag) = match r.target() {
        "/badrange" => (0, b - a, "\"e1\"".to_string()),
        "/badetag" => (a, b, format!("\"e{a}\"")),
        _ => (a, b, "\"e1\"".to_string()),
    };
    let cr = format!("Content-Range: bytes {a}-{b}/{len}");
    let et = format!("ETag: {etag}");
    Reply::http(206, &["Content-Type: text/plain", &cr, &et, "Accept-Ranges: bytes"], &BODY[a..=b])
}

fn server(o: &Origin) -> TestServer {
    builder()
        .http(&format!(
            r#"proxy_cache_path {{prefix}}/cache keys_zone=pieces:1m;
            server {{
                listen 127.0.0.1:{{port}};
                location /p/ {{
                    slice 4;
                    proxy_pass http://127.0.0.1:{p}/;
                    proxy_set_header Range $slice_range;
                }}
                location /c/ {{
                    slice 4;
                    proxy_pass http://127.0.0.1:{p}/;
                    proxy_set_header Range $slice_range;
                    proxy_cache pieces;
                    proxy_cache_key $uri$is_args$args$slice_range;
                    proxy_cache_valid 200 206 1h;
                    add_header X-Cache $upstream_cache_status;
                }}
                location /unused/ {{
                    slice 4;
                    proxy_pass http://127.0.0.1:{p}/;
                }}
            }}"#,
            p = o.port
        ))
        .start()
}

fn ranges_seen(o: &Origin) -> Vec<String> {
    o.requests().iter().map(|r| format!("{} {}", r.target(), r.header("Range").unwrap_or("-"))).collect()
}

#[test]
fn a_response_is_fetched_in_pieces_and_answered_whole_or_by_range() {
    let o = Origin::start(ranged);
    let s = server(&o);
    let r = s.get("/p/file");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), BODY);
    assert_eq!(r.header("Content-Length"), Some("20"), "{}", r.head);
    assert_eq!(r.header("Content-Range"), None, "{}", r.head);
    assert_eq!(r.header("ETag"), Some("\"e1\""), "{}", r.head);
    assert_eq!(
        ranges_seen(&o),
        ["/file bytes=0-3", "/file bytes=4-7", "/file bytes=8-11", "/file bytes=12-15", "/file bytes=16-19"]
    );
    // A range asks for the pieces it touches only.
    let r = s.get_with("/p/file", &["Range: bytes=5-9"]);
    assert_eq!(r.status, 206, "{}", r.head);
    assert_eq!(r.text(), "56789");
    assert_eq!(r.header("Content-Range"), Some("bytes 5-9/20"), "{}", r.head);
    assert_eq!(r.header("Accept-Ranges"), None, "{}", r.head);
    assert_eq!(ranges_seen(&o)[5..], ["/file bytes=4-7", "/file bytes=8-11"]);
    // A suffix range: its start is unknown, so from the first piece.
    let r = s.get_with("/p/file", &["Range: bytes=-3"]);
    assert_eq!((r.status, r.text()), (206, "hij".to_string()), "{}", r.head);
    // Several ranges get the whole body.
    let r = s.get_with("/p/file", &["Range: bytes=1-1,3-3"]);
    assert_eq!((r.status, r.text()), (200, BODY.to_string()), "{}", r.head);
    // Past the end: 416 with the complete length.
    let r = s.get_with("/p/file", &["Range: bytes=40-"]);
    assert_eq!(r.status, 416, "{}", r.head);
    assert_eq!(r.header("Content-Range"), Some("bytes */20"), "{}", r.head);
    // Conditionals against the first piece's validators.
    assert_eq!(s.get_with("/p/file", &["If-None-Match: \"e1\""]).status, 304);
    assert_eq!(s.get_with("/p/file", &["If-Match: \"other\""]).status, 412);
    // If-Range that matches: the range; that does not: the whole body.
    let r = s.get_with("/p/file", &["Range: bytes=9-10", "If-Range: \"e1\""]);
    assert_eq!((r.status, r.text()), (206, "9a".to_string()), "{}", r.head);
    let r = s.get_with("/p/file", &["Range: bytes=9-10", "If-Range: \"x\""]);
    assert_eq!((r.status, r.text()), (200, BODY.to_string()), "{}", r.head);
    // Without $slice_range read, slice does nothing.
    let before = o.count();
    let r = s.get("/unused/file");
    assert_eq!((r.status, r.text()), (200, BODY.to_string()));
    assert_eq!(o.count(), before + 1);
    assert_eq!(o.last().header("Range"), None);
}

#[test]
fn pieces_are_cached_under_their_own_keys() {
    let o = Origin::start(ranged);
    let s = server(&o);
    let r = s.get_with("/c/file", &["Range: bytes=0-0"]);
    assert_eq!((r.status, r.text()), (206, "0".to_string()), "{}", r.head);
    assert_eq!(r.header("X-Cache"), Some("MISS"));
    // Same piece: a hit; the next piece: a miss.
    let r = s.get_with("/c/file", &["Range: bytes=1-2"]);
    assert_eq!((r.status, r.text(), r.header("X-Cache")), (206, "12".to_string(), Some("HIT")), "{}", r.head);
    let r = s.get_with("/c/file", &["Range: bytes=4-4"]);
    assert_eq!((r.status, r.text(), r.header("X-Cache")), (206, "4".to_string(), Some("MISS")), "{}", r.head);
    assert_eq!(o.count(), 2);
    // The whole body: the two cached pieces are not asked for again.
    let r = s.get("/c/file");
    assert_eq!((r.status, r.text()), (200, BODY.to_string()), "{}", r.head);
    assert_eq!(ranges_seen(&o)[2..], ["/file bytes=8-11", "/file bytes=12-15", "/file bytes=16-19"]);
    let r = s.get("/c/file");
    assert_eq!((r.status, r.text()), (200, BODY.to_string()), "{}", r.head);
    assert_eq!(o.count(), 5, "every piece cached");
}

#[test]
fn a_piece_that_does_not_fit_cuts_the_response() {
    let o = Origin::start(ranged);
    let s = server(&o);
    // The first piece is fine, the second has another ETag: as nginx's
    // output is held until 1460 bytes or the next piece, nothing is sent.
    let got = raw(&s, "/p/badetag", "");
    assert!(got.is_empty(), "{got}");
    s.wait_error_log("etag mismatch in slice response");
    // A first piece that is not the one asked for: no response at all.
    let got = raw(&s, "/p/badrange", "Range: bytes=8-9\r\n");
    assert!(got.is_empty(), "{got}");
    s.wait_error_log("unexpected range in slice response: 0-4");
    // An origin that ignores ranges: its 200 passes unchanged.
    let plain = Origin::start(|_| Reply::http(200, &["Content-Type: text/plain"], BODY));
    let s2 = server(&plain);
    let r = s2.get_with("/p/x", &["Range: bytes=2-3"]);
    assert_eq!((r.status, r.text()), (200, BODY.to_string()), "{}", r.head);
}

/// What the server sends for one request before it closes.
fn raw(s: &TestServer, path: &str, extra: &str) -> String {
    let mut c = s.connect();
    c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n"));
    let mut got = Vec::new();
    let _ = std::io::Read::read_to_end(&mut c.stream, &mut got);
    String::from_utf8_lossy(&got).into_owned()
}
