//! Serializes a response head for HTTP/1.1 in nginx's header order:
//! status line, Server, Date, Content-Type, Content-Length, Last-Modified,
//! Location, Connection, Keep-Alive, ETag, filter headers, then the range
//! headers.

use std::time::Duration;

use crate::http::error_html;
use crate::http::handler::ctx::push_u64;
use crate::http::response::Response;

pub struct HeadOpts {
    pub keep_alive: bool,
    /// The client speaks HTTP/1.1 and the body's length is unknown (a
    /// streamed origin body) or trailers follow it: send it chunked.
    pub chunked: bool,
    pub keepalive_header: Option<Duration>,
    pub server_tokens: bool,
}

/// Whether this status carries a body (and a Content-Length) at all.
pub fn has_body(status: u16) -> bool {
    !(status < 200 || status == 204 || status == 304)
}

thread_local! {
    /// The last Last-Modified formatted: hot files and empty_gif repeat it.
    static LAST_MODIFIED: std::cell::Cell<(u64, [u8; 29])> = const { std::cell::Cell::new((u64::MAX, [0; 29])) };
}

pub fn last_modified(t: u64) -> [u8; 29] {
    LAST_MODIFIED.with(|c| {
        let (secs, d) = c.get();
        if secs == t {
            return d;
        }
        let mut d = [0u8; 29];
        crate::http::date::http_date(t, &mut d);
        c.set((t, d));
        d
    })
}

/// Appends `Name: <IMF-fixdate>\r\n`, built on the stack so it goes into
/// the buffer in one copy.
fn push_dated<const N: usize>(out: &mut Vec<u8>, name: &[u8; N], date: [u8; 29]) {
    let mut line = [0u8; 64];
    line[..N].copy_from_slice(name);
    line[N..N + 29].copy_from_slice(&date);
    line[N + 29..N + 31].copy_from_slice(b"\r\n");
    out.extend_from_slice(&line[..N + 31]);
}

pub fn write_head(resp: &Response<'_>, opts: &HeadOpts, out: &mut Vec<u8>) {
    let wire = error_html::wire_status(resp.status);
    match wire {
        200 => out.extend_from_slice(b"HTTP/1.1 200 OK\r\n"),
        _ => {
            out.extend_from_slice(b"HTTP/1.1 ");
            push_u64(out, wire as u64);
            out.push(b' ');
            out.extend_from_slice(error_html::reason(wire).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    // An origin's Server or Date passed with proxy_pass_header replaces ours.
    let passed = |n: &str| !resp.headers.is_empty() && resp.header(n).is_some();
    if !passed("server") && !resp.no_server {
        out.extend_from_slice(if opts.server_tokens {
            concat!("Server: sluice/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes()
        } else {
            b"Server: sluice\r\n"
        });
    }
    if !passed("date") && !resp.no_date {
        push_dated(out, b"Date: ", crate::clock::http_date());
    }
    if let Some(ct) = &resp.content_type {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(ct.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if has_body(wire) {
        // Chunked also for a known length when trailers follow.
        match resp.body.known_len() {
            _ if opts.chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            Some(n) => {
                out.extend_from_slice(b"Content-Length: ");
                push_u64(out, n);
                out.extend_from_slice(b"\r\n");
            }
            None => {}
        }
    }
    let validators = matches!(wire, 200 | 206 | 304);
    if validators && let Some(lm) = resp.last_modified {
        push_dated(out, b"Last-Modified: ", last_modified(lm));
    }
    if let Some(loc) = &resp.location {
        out.extend_from_slice(b"Location: ");
        out.extend_from_slice(loc);
        out.extend_from_slice(b"\r\n");
    }
    if wire == 101 {
        // A proxied protocol switch (WebSocket): the connection becomes a
        // tunnel.
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if opts.keep_alive {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
        if let Some(t) = opts.keepalive_header {
            out.extend_from_slice(b"Keep-Alive: timeout=");
            push_u64(out, t.as_secs());
            out.extend_from_slice(b"\r\n");
        }
    } else {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    if validators && let Some(e) = &resp.etag {
        out.extend_from_slice(b"ETag: ");
        out.extend_from_slice(e);
        out.extend_from_slice(b"\r\n");
    }
    for (n, v) in &resp.headers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    if let Some(cr) = &resp.content_range {
        out.extend_from_slice(b"Content-Range: ");
        out.extend_from_slice(cr);
        out.extend_from_slice(b"\r\n");
    }
    if resp.accept_ranges && wire == 200 {
        out.extend_from_slice(b"Accept-Ranges: bytes\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::response::Body;
    use std::borrow::Cow;

    fn head(resp: &Response<'_>, keep_alive: bool) -> String {
        let mut out = Vec::new();
        write_head(
            resp,
            &HeadOpts { keep_alive, chunked: false, keepalive_header: None, server_tokens: false },
            &mut out,
        );
        let s = String::from_utf8(out).unwrap();
        // Date varies; blank it.
        let i = s.find("Date: ").unwrap();
        format!("{}Date: X{}", &s[..i], &s[i + 35..])
    }

    #[test]
    fn empty_gif_shape() {
        let mut r = Response::new(200);
        r.content_type = Some(Cow::Borrowed("image/gif"));
        r.last_modified = Some(23_349_600);
        r.body = Body::Static(&[0u8; 43]);
        assert_eq!(
            head(&r, true),
            "HTTP/1.1 200 OK\r\nServer: sluice\r\nDate: X\r\nContent-Type: image/gif\r\nContent-Length: 43\r\n\
             Last-Modified: Mon, 28 Sep 1970 06:00:00 GMT\r\nConnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn not_modified_and_internal_codes() {
        let mut r = Response::new(304);
        r.etag = Some(b"\"1-2\"".to_vec());
        assert_eq!(
            head(&r, false),
            "HTTP/1.1 304 Not Modified\r\nServer: sluice\r\nDate: X\r\nConnection: close\r\nETag: \"1-2\"\r\n\r\n"
        );
        let r = Response::new(494);
        assert!(head(&r, false).starts_with("HTTP/1.1 400 Bad Request\r\n"));
    }
}
