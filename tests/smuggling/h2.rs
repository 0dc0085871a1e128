//! h2 -> h1 proxy desync: HTTP/2 requests that a proxy must not turn into
//! an HTTP/1 request with different framing or extra header lines. Each is
//! sent over h2c (prior knowledge) to a `proxy_pass` to the recording
//! origin; sluice must end the stream (RST_STREAM, 400, or the connection)
//! and forward nothing. `SLUICE_TEST_NGINX=1` runs nginx 1.22 too and
//! prints what it did, for comparison (not asserted: the rule is sluice's).

use crate::common::h2raw::{self as h2};
use crate::common::hpack::hpack_literal;
use crate::harness::Recorder;

struct H2Case {
    name: &'static str,
    /// Header fields in order, pseudo-headers included.
    fields: Vec<(&'static str, Vec<u8>)>,
    /// DATA frames; END_STREAM on the last (on HEADERS when empty).
    data: Vec<&'static [u8]>,
    /// A well-formed control: answered 200 through the origin.
    ok: bool,
}

fn fields(extra: &[(&'static str, &[u8])]) -> Vec<(&'static str, Vec<u8>)> {
    let mut f: Vec<(&'static str, Vec<u8>)> = vec![
        (":method", b"POST".to_vec()),
        (":scheme", b"http".to_vec()),
        (":path", b"/h2".to_vec()),
        (":authority", b"localhost".to_vec()),
    ];
    f.extend(extra.iter().map(|(n, v)| (*n, v.to_vec())));
    f
}

/// The request fields with pseudo-header `name` set to `value`.
fn pseudo(name: &'static str, value: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    fields(&[]).into_iter().map(|(n, v)| if n == name { (n, value.to_vec()) } else { (n, v) }).collect()
}

fn cases() -> Vec<H2Case> {
    let bad = |name, fields, data: Vec<&'static [u8]>| H2Case { name, fields, data, ok: false };
    vec![
        H2Case { name: "control_ok", fields: fields(&[]), data: vec![b"hello"], ok: true },
        H2Case { name: "control_te_trailers", fields: fields(&[("te", b"trailers")]), data: vec![b"hello"], ok: true },
        bad("cl_more_than_data", fields(&[("content-length", b"10")]), vec![b"hello"]),
        bad("cl_less_than_data", fields(&[("content-length", b"3")]), vec![b"hello"]),
        bad("cl_less_across_frames", fields(&[("content-length", b"5")]), vec![b"hel", b"lo!"]),
        bad("cl_nonzero_no_data", fields(&[("content-length", b"5")]), vec![]),
        bad("cl_two_values", fields(&[("content-length", b"5"), ("content-length", b"6")]), vec![b"hello"]),
        bad("cl_not_a_number", fields(&[("content-length", b"5x")]), vec![b"hello"]),
        bad("connection", fields(&[("connection", b"keep-alive")]), vec![b"hello"]),
        bad("transfer_encoding", fields(&[("transfer-encoding", b"chunked")]), vec![b"5\r\nhello\r\n0\r\n\r\n"]),
        bad("keep_alive", fields(&[("keep-alive", b"timeout=5")]), vec![b"hello"]),
        bad("upgrade", fields(&[("upgrade", b"websocket")]), vec![b"hello"]),
        bad("proxy_connection", fields(&[("proxy-connection", b"keep-alive")]), vec![b"hello"]),
        bad("te_gzip", fields(&[("te", b"gzip")]), vec![b"hello"]),
        bad("te_trailers_gzip", fields(&[("te", b"trailers, gzip")]), vec![b"hello"]),
        bad("path_crlf", pseudo(":path", b"/h2 HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET /x"), vec![b"hello"]),
        bad("path_lf", pseudo(":path", b"/h2\nX-Injected: 1"), vec![b"hello"]),
        bad("path_nul", pseudo(":path", b"/h2\0x"), vec![b"hello"]),
        bad("path_space", pseudo(":path", b"/h2 HTTP/1.1"), vec![b"hello"]),
        bad("method_crlf", pseudo(":method", b"POST /h2 HTTP/1.1\r\nX: y\r\n"), vec![b"hello"]),
        bad("method_space", pseudo(":method", b"PO ST"), vec![b"hello"]),
        bad("authority_crlf", pseudo(":authority", b"localhost\r\nX-Injected: 1"), vec![b"hello"]),
        bad("authority_nul", pseudo(":authority", b"local\0host"), vec![b"hello"]),
        bad("scheme_crlf", pseudo(":scheme", b"http\r\nX: y"), vec![b"hello"]),
        bad("value_crlf", fields(&[("x-a", b"a\r\nTransfer-Encoding: chunked")]), vec![b"hello"]),
        bad("value_lf", fields(&[("x-a", b"a\nContent-Length: 50")]), vec![b"hello"]),
        bad("value_cr", fields(&[("x-a", b"a\rb")]), vec![b"hello"]),
        bad("value_nul", fields(&[("x-a", b"a\0b")]), vec![b"hello"]),
        bad("name_uppercase", fields(&[("X-Upper", b"1")]), vec![b"hello"]),
        bad("name_uppercase_cl", fields(&[("Content-Length", b"5")]), vec![b"hello"]),
        bad("name_space", fields(&[("x a", b"1")]), vec![b"hello"]),
        bad("name_colon", fields(&[("x:a", b"1")]), vec![b"hello"]),
        bad("name_crlf", fields(&[("x-a\r\ny", b"1")]), vec![b"hello"]),
        bad(
            "pseudo_after_regular",
            {
                let mut f = fields(&[("x-a", b"1")]);
                f.push((":foo", b"bar".to_vec()));
                f
            },
            vec![b"hello"],
        ),
        bad(
            "pseudo_duplicate_path",
            {
                let mut f = fields(&[]);
                f.insert(3, (":path", b"/other".to_vec()));
                f
            },
            vec![b"hello"],
        ),
        bad("pseudo_unknown", fields(&[(":foo", b"bar")]), vec![b"hello"]),
    ]
}

/// What the client saw: a status, a reset code, or a connection error.
fn run(port: u16, c: &H2Case) -> Result<(u16, Option<u32>), String> {
    let mut conn = h2::Conn::open(port);
    let mut block = Vec::new();
    for (n, v) in &c.fields {
        hpack_literal(&mut block, n, v);
    }
    let id = 1;
    let mut out = h2::header_frames(id, &block, c.data.is_empty(), 16384);
    for (i, d) in c.data.iter().enumerate() {
        out.extend(h2::data_frame(id, d, i + 1 == c.data.len()));
    }
    conn.try_send(&out).map_err(|e| format!("write: {e}"))?;
    conn.read_response(id).map(|r| (r.status, r.reset))
}

fn start(nginx: bool, origin: u16) -> crate::common::TestServer {
    crate::common::builder()
        .server_is_nginx(nginx)
        .http(&format!(
            "access_log off;\n\
             server {{\n\
                 listen 127.0.0.1:{{port}} http2;\n\
                 server_name localhost;\n\
                 location / {{ proxy_pass http://127.0.0.1:{origin}; }}\n\
             }}"
        ))
        .start()
}

#[test]
fn h2_to_h1_desync_is_refused() {
    let live = std::env::var_os("SLUICE_TEST_NGINX").is_some();
    let mut failures = Vec::new();
    for nginx in if live { vec![false, true] } else { vec![false] } {
        let origin = Recorder::start();
        let server = start(nginx, origin.port);
        let who = if nginx { "nginx" } else { "sluice" };
        for c in cases() {
            let got = run(server.port, &c);
            let reqs = origin.take();
            let forwarded: Vec<String> = reqs.iter().map(|r| format!("{} {:?}", r.summary(), r.flags)).collect();
            println!("{who} {}: {got:?}, origin {forwarded:?}", c.name);
            if nginx {
                continue;
            }
            let refused = match &got {
                Ok((_, Some(_))) | Err(_) => true,
                Ok((status, None)) => (400..500).contains(status),
            };
            let fine = if c.ok {
                matches!(got, Ok((200, None)))
                    && reqs.len() == 1
                    && reqs[0].flags.is_empty()
                    && reqs[0].body == b"hello"
            } else {
                refused && reqs.is_empty()
            };
            if !fine {
                failures.push(format!("{}: client saw {got:?}; origin got {forwarded:?}", c.name));
            }
        }
    }
    assert!(failures.is_empty(), "{} h2 cases failed:\n{}", failures.len(), failures.join("\n"));
}
