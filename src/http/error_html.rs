//! Built-in error/redirect bodies and status-line reasons, byte-identical to
//! nginx 1.22.1 with "nginx" replaced by "sluice".
//!
//! Observed from a live nginx 1.22.1 (`return CODE;`, real error paths):
//!
//! * Body = page prefix + `<hr><center>SERVER</center>\r\n</body>\r\n</html>\r\n`,
//!   where SERVER is "nginx/1.22.1" (server_tokens on) or "nginx" (off).
//! * Status-line reasons come from nginx's own table, not RFC 9110: "302 Moved
//!   Temporarily" (body still says "302 Found"), "405 Not Allowed", "401
//!   Unauthorized" (body "401 Authorization Required"), "503 Service
//!   Temporarily Unavailable", "504 Gateway Time-out". Codes without an entry
//!   get an empty reason with the space kept: "HTTP/1.1 418 ", "HTTP/1.1 226 ".
//! * 494/495/496/497 go out as "400 Bad Request"; their body has the specific
//!   text as `<title>400 Request Header Or Cookie Too Large</title>`, the h1
//!   "400 Bad Request" and an extra `<center>` line. 498 is sent as "498 " with
//!   the 404 page. See [`wire_status`].
//! * `return 408`, `return 444` and `return 499` close the connection without
//!   any response.
//! * 4xx/5xx without a page (407, 417, 418, 422-428, 431, 451, 506, 508-511, 520
//!   and up) are sent with `Content-Length: 0` and no Content-Type; 2xx and
//!   300/305/306/399 from `return` get `Content-Type: text/plain` (default_type)
//!   and `Content-Length: 0`; `return 204` has neither header.
//! * nginx forces `Connection: close` after 400, 413, 414, 495, 496, 497, 500
//!   and 501 (ngx_http_special_response_handler); a genuine 494 (header too
//!   large while reading the request) is also close, but `return 494` on a
//!   parsed request keeps the connection alive. 404/405/416/502/503/504 and
//!   redirects keep it alive.
//! * For a `return 301 /x;` (relative target made absolute) the Location header
//!   comes before Connection; for an already-absolute target after it.
//! * MSIE and Chrome user agents get [`MSIE_PADDING`] appended to 4xx/5xx pages
//!   (msie_padding on by default): a 404 grows from 153 to 555 bytes. Redirect
//!   pages never get it.

/// Reason phrase exactly as nginx prints it in the status line.
pub fn reason(status: u16) -> &'static str {
    match status {
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Moved Temporarily",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Time-out",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Temporarily Unavailable",
        504 => "Gateway Time-out",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "",
    }
}

/// The status nginx actually puts on the wire: its internal 494-497 codes are
/// reported to the client as 400 (they only select a different page).
pub fn wire_status(status: u16) -> u16 {
    match status {
        494..=497 => 400,
        s => s,
    }
}

macro_rules! page {
    ($t:literal) => {
        concat!("<html>\r\n<head><title>", $t, "</title></head>\r\n<body>\r\n<center><h1>", $t, "</h1></center>\r\n")
    };
}

macro_rules! page400 {
    ($t:literal) => {
        concat!(
            "<html>\r\n<head><title>400 ",
            $t,
            "</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>",
            $t,
            "</center>\r\n"
        )
    };
}

/// Everything up to the server signature; static so producing a body is just
/// three copies.
fn page_prefix(status: u16) -> Option<&'static str> {
    Some(match status {
        301 => page!("301 Moved Permanently"),
        302 => page!("302 Found"),
        303 => page!("303 See Other"),
        307 => page!("307 Temporary Redirect"),
        308 => page!("308 Permanent Redirect"),
        400 => page!("400 Bad Request"),
        401 => page!("401 Authorization Required"),
        402 => page!("402 Payment Required"),
        403 => page!("403 Forbidden"),
        404 | 498 => page!("404 Not Found"),
        405 => page!("405 Not Allowed"),
        406 => page!("406 Not Acceptable"),
        408 => page!("408 Request Time-out"),
        409 => page!("409 Conflict"),
        410 => page!("410 Gone"),
        411 => page!("411 Length Required"),
        412 => page!("412 Precondition Failed"),
        413 => page!("413 Request Entity Too Large"),
        414 => page!("414 Request-URI Too Large"),
        415 => page!("415 Unsupported Media Type"),
        416 => page!("416 Requested Range Not Satisfiable"),
        421 => page!("421 Misdirected Request"),
        429 => page!("429 Too Many Requests"),
        494 => page400!("Request Header Or Cookie Too Large"),
        495 => page400!("The SSL certificate error"),
        496 => page400!("No required SSL certificate was sent"),
        497 => page400!("The plain HTTP request was sent to HTTPS port"),
        500 => page!("500 Internal Server Error"),
        501 => page!("501 Not Implemented"),
        502 => page!("502 Bad Gateway"),
        503 => page!("503 Service Temporarily Unavailable"),
        504 => page!("504 Gateway Time-out"),
        505 => page!("505 HTTP Version Not Supported"),
        507 => page!("507 Insufficient Storage"),
        _ => return None,
    })
}

const TAIL_OPEN: &[u8] = b"<hr><center>";
const TAIL_CLOSE: &[u8] = b"</center>\r\n</body>\r\n</html>\r\n";
const SERVER: &[u8] = b"sluice";

/// nginx's msie_padding: six comment lines that push the page past the size
/// below which MSIE and Chrome replace it with their own "friendly" page.
pub const MSIE_PADDING: &[u8] = b"<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n\
<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n\
<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n\
<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n\
<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n\
<!-- a padding to disable MSIE and Chrome friendly error page -->\r\n";

/// nginx's User-Agent classification (ngx_http_process_user_agent) reduced
/// to the question msie_padding asks: MSIE (unless Opera), or Chrome when the
/// agent is neither MSIE, Opera nor Gecko. Callers should also require
/// HTTP/1.0 or later, as nginx does.
pub fn wants_msie_padding(user_agent: &[u8]) -> bool {
    super::user_agent::is_msie(user_agent) || super::user_agent::is_chrome(user_agent)
}

fn server_len(server_tokens: bool, version: &str) -> usize {
    if server_tokens { SERVER.len() + 1 + version.len() } else { SERVER.len() }
}

/// Content-Length for [`write_error_body`] without building the body.
pub fn error_body_len(status: u16, server_tokens: bool, version: &str, msie_padding: bool) -> Option<usize> {
    page_prefix(status).map(|prefix| body_len(prefix, status, server_tokens, version, msie_padding))
}

fn body_len(prefix: &str, status: u16, server_tokens: bool, version: &str, msie_padding: bool) -> usize {
    let pad = if msie_padding && status >= 400 { MSIE_PADDING.len() } else { 0 };
    prefix.len() + TAIL_OPEN.len() + server_len(server_tokens, version) + TAIL_CLOSE.len() + pad
}

/// Appends the page to a caller-owned (typically reused) buffer; returns
/// false, writing nothing, when nginx sends no body for `status`.
/// `msie_padding` is honoured only for 4xx/5xx, like nginx.
pub fn write_error_body(
    status: u16,
    server_tokens: bool,
    version: &str,
    msie_padding: bool,
    out: &mut Vec<u8>,
) -> bool {
    let Some(prefix) = page_prefix(status) else {
        return false;
    };
    out.reserve(body_len(prefix, status, server_tokens, version, msie_padding));
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(TAIL_OPEN);
    out.extend_from_slice(SERVER);
    if server_tokens {
        out.push(b'/');
        out.extend_from_slice(version.as_bytes());
    }
    out.extend_from_slice(TAIL_CLOSE);
    if msie_padding && status >= 400 {
        out.extend_from_slice(MSIE_PADDING);
    }
    true
}

/// Convenience form of [`write_error_body`] without padding.
pub fn error_body(status: u16, server_tokens: bool, version: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    write_error_body(status, server_tokens, version, false, &mut out).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(status: u16, tokens: bool) -> String {
        String::from_utf8(error_body(status, tokens, "1.22.1").unwrap()).unwrap()
    }

    /// Captured from nginx 1.22.1 and s/nginx/sluice/.
    #[test]
    fn exact_pages() {
        assert_eq!(
            body(404, true),
            "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>sluice/1.22.1</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!(
            body(404, false),
            "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>sluice</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!(
            body(494, true),
            "<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n<hr><center>sluice/1.22.1</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!(
            body(497, false),
            "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n<hr><center>sluice</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!(
            body(302, true),
            "<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n<center><h1>302 Found</h1></center>\r\n<hr><center>sluice/1.22.1</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!(body(498, true), body(404, true));
    }

    /// nginx's Content-Length for each page with "nginx/1.22.1"; "sluice/1.22.1"
    /// is one byte longer, "sluice" vs "nginx" likewise.
    #[test]
    fn lengths_match_nginx() {
        let nginx_lengths: &[(u16, usize)] = &[
            (301, 169),
            (302, 145),
            (303, 153),
            (307, 171),
            (308, 171),
            (400, 157),
            (401, 179),
            (402, 167),
            (403, 153),
            (404, 153),
            (405, 157),
            (406, 163),
            (409, 151),
            (410, 143),
            (411, 165),
            (412, 173),
            (413, 183),
            (414, 177),
            (415, 179),
            (416, 197),
            (421, 173),
            (429, 169),
            (494, 233),
            (495, 215),
            (496, 237),
            (497, 255),
            (498, 153),
            (500, 177),
            (501, 165),
            (502, 157),
            (503, 197),
            (504, 167),
            (505, 187),
            (507, 175),
        ];
        for &(status, len) in nginx_lengths {
            assert_eq!(error_body_len(status, true, "1.22.1", false), Some(len + 1), "{status}");
            assert_eq!(error_body(status, true, "1.22.1").map(|b| b.len()), Some(len + 1));
            assert_eq!(error_body(status, false, "1.22.1").map(|b| b.len()), Some(len - 6));
        }
    }

    #[test]
    fn no_body_statuses() {
        for s in [
            100, 200, 201, 204, 206, 226, 299, 300, 304, 305, 306, 399, 407, 417, 418, 422, 426, 428, 431, 444, 449,
            451, 499, 506, 508, 510, 511, 520, 599, 999, 0,
        ] {
            assert_eq!(error_body(s, true, "1"), None, "{s}");
            assert_eq!(error_body_len(s, true, "1", true), None, "{s}");
            let mut v = b"keep".to_vec();
            assert!(!write_error_body(s, true, "1", true, &mut v));
            assert_eq!(v, b"keep");
        }
    }

    #[test]
    fn reasons_match_nginx_status_lines() {
        assert_eq!(reason(200), "OK");
        assert_eq!(reason(302), "Moved Temporarily");
        assert_eq!(reason(401), "Unauthorized");
        assert_eq!(reason(405), "Not Allowed");
        assert_eq!(reason(416), "Requested Range Not Satisfiable");
        assert_eq!(reason(503), "Service Temporarily Unavailable");
        assert_eq!(reason(504), "Gateway Time-out");
        for s in [203, 205, 207, 226, 300, 305, 407, 418, 494, 498, 499, 506, 999] {
            assert_eq!(reason(s), "", "{s}");
        }
        assert_eq!(wire_status(494), 400);
        assert_eq!(wire_status(497), 400);
        assert_eq!(wire_status(498), 498);
        assert_eq!(wire_status(404), 404);
    }

    #[test]
    fn padding() {
        assert_eq!(MSIE_PADDING.len(), 402);
        let mut v = Vec::new();
        assert!(write_error_body(404, true, "1.22.1", true, &mut v));
        // nginx sent 555 bytes with "nginx/1.22.1".
        assert_eq!(v.len(), 556);
        assert!(v.ends_with(MSIE_PADDING));
        assert_eq!(error_body_len(404, true, "1.22.1", true), Some(556));
        v.clear();
        assert!(write_error_body(301, true, "1.22.1", true, &mut v));
        assert_eq!(v.len(), 170);
        assert_eq!(error_body_len(301, true, "1.22.1", true), Some(170));
    }

    #[test]
    fn user_agents() {
        let chrome =
            b"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
        let firefox = b"Mozilla/5.0 (X11; rv:109.0) Gecko/20100101 Firefox/115.0";
        let msie = b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)";
        assert!(wants_msie_padding(chrome));
        assert!(wants_msie_padding(msie));
        assert!(!wants_msie_padding(firefox));
        assert!(!wants_msie_padding(b"MSIE 6"));
        assert!(!wants_msie_padding(b"Opera Chrome/1"));
        assert!(!wants_msie_padding(b"curl/8.0"));
        assert!(!wants_msie_padding(b""));
    }
}
