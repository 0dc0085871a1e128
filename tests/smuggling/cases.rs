//! The corpus: malformed or ambiguous HTTP/1 requests, each a named byte
//! string. `main.rs` sends every one alone and again followed by a
//! pipelined `GET /second` (the smuggling question: is the second request
//! seen, and as what).
//!
//! Requests go to `/<case name>` unless the case is about the request line
//! itself, so the origin's log says which case a request came from.

/// A request to `/<name>` with `Host: localhost`, `extra` header lines
/// (each ending in CRLF) and `body` after the empty line.
fn req(name: &str, method: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let mut v = format!("{method} /{name} HTTP/1.1\r\nHost: localhost\r\n{extra}\r\n").into_bytes();
    v.extend_from_slice(body);
    v
}

/// A POST with these header lines and body.
fn post(name: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    req(name, "POST", extra, body)
}

/// A chunked POST with this (raw) chunked body.
fn chunked(name: &str, body: &[u8]) -> Vec<u8> {
    post(name, "Transfer-Encoding: chunked\r\n", body)
}

/// A POST whose Transfer-Encoding line is `te_line` (whole line with CRLF)
/// and whose body is a valid chunked "hello".
fn te(name: &str, te_line: &str) -> Vec<u8> {
    post(name, te_line, CHUNKED_HELLO)
}

/// A GET with exactly these bytes between the request line and the empty
/// line.
fn get_head(name: &str, lines: &[u8]) -> Vec<u8> {
    let mut v = format!("GET /{name} HTTP/1.1\r\n").into_bytes();
    v.extend_from_slice(lines);
    v.extend_from_slice(b"\r\n");
    v
}

/// A whole request given as a string.
fn raw(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

const CHUNKED_HELLO: &[u8] = b"5\r\nhello\r\n0\r\n\r\n";

pub fn base_cases() -> Vec<(String, Vec<u8>)> {
    let mut c: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut add = |name: &'static str, bytes: Vec<u8>| c.push((name, bytes));

    // --- baselines: well-formed requests, to show the harness itself agrees
    add("ok_get", req("ok_get", "GET", "", b""));
    add("ok_post_cl", post("ok_post_cl", "Content-Length: 5\r\n", b"hello"));
    add("ok_post_chunked", chunked("ok_post_chunked", CHUNKED_HELLO));

    // --- Content-Length: duplicates and malformed values
    add("cl_dup_same", post("cl_dup_same", "Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"));
    add("cl_dup_diff", post("cl_dup_diff", "Content-Length: 5\r\nContent-Length: 6\r\n", b"hello!"));
    add("cl_list_same", post("cl_list_same", "Content-Length: 5, 5\r\n", b"hello"));
    add("cl_list_1_1", post("cl_list_1_1", "Content-Length: 1, 1\r\n", b"x"));
    add("cl_plus", post("cl_plus", "Content-Length: +5\r\n", b"hello"));
    add("cl_minus", post("cl_minus", "Content-Length: -1\r\n", b"hello"));
    add("cl_hex", post("cl_hex", "Content-Length: 0x5\r\n", b"hello"));
    add("cl_leading_zeros", post("cl_leading_zeros", "Content-Length: 0005\r\n", b"hello"));
    add("cl_huge_20", post("cl_huge_20", "Content-Length: 99999999999999999999\r\n", b"hello"));
    add("cl_huge_18", post("cl_huge_18", "Content-Length: 999999999999999999\r\n", b"hello"));
    add("cl_inner_space", post("cl_inner_space", "Content-Length: 5 5\r\n", b"hello"));
    add("cl_empty", post("cl_empty", "Content-Length:\r\n", b"hello"));
    add("cl_tab_value", post("cl_tab_value", "Content-Length:\t5\t\r\n", b"hello"));
    add("cl_space_before_colon", post("cl_space_before_colon", "Content-Length : 5\r\n", b"hello"));
    add("cl_decimal_point", post("cl_decimal_point", "Content-Length: 5.0\r\n", b"hello"));
    add("cl_zero_then_bytes", post("cl_zero_then_bytes", "Content-Length: 0\r\n", b"hello"));
    add("cl_on_get", req("cl_on_get", "GET", "Content-Length: 5\r\n", b"hello"));
    add("cl_body_short", post("cl_body_short", "Content-Length: 7\r\n", b"hello"));
    add("cl_underscore_name", post("cl_underscore_name", "Content_Length: 5\r\n", b"hello"));

    // --- Content-Length with Transfer-Encoding
    add("cl_te", post("cl_te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", CHUNKED_HELLO));
    add("te_cl", post("te_cl", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", CHUNKED_HELLO));
    add("cl_te_identity", post("cl_te_identity", "Content-Length: 5\r\nTransfer-Encoding: identity\r\n", b"hello"));

    // --- Transfer-Encoding variants
    add("te_chunked_identity", te("te_chunked_identity", "Transfer-Encoding: chunked, identity\r\n"));
    add("te_identity_chunked", te("te_identity_chunked", "Transfer-Encoding: identity, chunked\r\n"));
    add("te_space_before_colon", te("te_space_before_colon", "Transfer-Encoding : chunked\r\n"));
    add("te_tab_before", te("te_tab_before", "Transfer-Encoding:\tchunked\r\n"));
    add("te_tab_after", te("te_tab_after", "Transfer-Encoding: chunked\t\r\n"));
    add("te_capital", te("te_capital", "Transfer-Encoding: Chunked\r\n"));
    add("te_upper", te("te_upper", "Transfer-Encoding: CHUNKED\r\n"));
    add("te_xchunked", te("te_xchunked", "Transfer-Encoding: xchunked\r\n"));
    add("te_chunked_param", te("te_chunked_param", "Transfer-Encoding: chunked;x\r\n"));
    add("te_two_headers", te("te_two_headers", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"));
    add(
        "te_identity_then_chunked",
        te("te_identity_then_chunked", "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"),
    );
    add("te_identity", post("te_identity", "Transfer-Encoding: identity\r\n", b""));
    add("te_empty", te("te_empty", "Transfer-Encoding:\r\n"));
    add("te_gzip_chunked", te("te_gzip_chunked", "Transfer-Encoding: gzip, chunked\r\n"));
    add("te_trailing_comma", te("te_trailing_comma", "Transfer-Encoding: chunked,\r\n"));
    add("te_vertical_tab", te("te_vertical_tab", "Transfer-Encoding: \x0bchunked\r\n"));
    add("te_obs_fold", te("te_obs_fold", "Transfer-Encoding:\r\n chunked\r\n"));
    add("te_http10", raw("POST /te_http10 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    add(
        "te_cl_http10",
        raw("POST /te_cl_http10 HTTP/1.0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello"),
    );
    add("te_underscore_name", te("te_underscore_name", "Transfer_Encoding: chunked\r\n"));

    // --- obs-fold continuation lines
    add("fold_header", get_head("fold_header", b"Host: localhost\r\nX-A: a\r\n b\r\n"));
    add("fold_cl", post("fold_cl", "Content-Length: 5\r\n 0\r\n", b"hello"));
    add("fold_host", get_head("fold_host", b"Host:\r\n localhost\r\n"));
    add("fold_first_line", get_head("fold_first_line", b" X-A: b\r\nHost: localhost\r\n"));

    // --- line endings
    add("lf_only", raw("GET /lf_only HTTP/1.1\nHost: localhost\n\n"));
    add("lf_mixed", raw("GET /lf_mixed HTTP/1.1\r\nHost: localhost\nX-A: b\r\n\r\n"));
    add("lf_post_cl", raw("POST /lf_post_cl HTTP/1.1\nHost: localhost\nContent-Length: 5\n\nhello"));
    add("cr_in_value", get_head("cr_in_value", b"Host: localhost\r\nX-A: a\rb\r\n"));
    add("cr_as_line_end", get_head("cr_as_line_end", b"Host: localhost\rX-A: b\r\n"));
    add("cr_in_request_line", raw("GET /cr_in_request_line\r HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("cr_before_cl", post("cr_before_cl", "X-A: b\rContent-Length: 5\r\n", b"hello"));
    add("leading_crlf", raw("\r\n\r\nGET /leading_crlf HTTP/1.1\r\nHost: localhost\r\n\r\n"));

    // --- NUL bytes
    add("nul_in_name", get_head("nul_in_name", b"Host: localhost\r\nX\0A: b\r\n"));
    add("nul_in_value", get_head("nul_in_value", b"Host: localhost\r\nX-A: a\0b\r\n"));
    add("nul_in_uri", raw("GET /nul_in_uri\0x HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("nul_in_method", raw("GE\0T /nul_in_method HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("nul_in_cl", post("nul_in_cl", "Content-Length: 5\0\r\n", b"hello"));

    // --- chunked bodies
    add("chunk_ext", chunked("chunk_ext", b"5;foo=bar\r\nhello\r\n0\r\n\r\n"));
    add("chunk_ext_quoted", chunked("chunk_ext_quoted", b"5;foo=\"b a;r\"\r\nhello\r\n0\r\n\r\n"));
    add("chunk_ext_quoted_lf", chunked("chunk_ext_quoted_lf", b"5;foo=\"a\nb\"\r\nhello\r\n0\r\n\r\n"));
    let mut huge_ext = b"5;".to_vec();
    huge_ext.extend(std::iter::repeat_n(b'x', 6000));
    huge_ext.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    add("chunk_ext_huge", chunked("chunk_ext_huge", &huge_ext));
    add("chunk_size_17_digits", chunked("chunk_size_17_digits", b"10000000000000005\r\nhello\r\n0\r\n\r\n"));
    add("chunk_size_ffff", chunked("chunk_size_ffff", b"ffffffffffffffff\r\nhello\r\n0\r\n\r\n"));
    add("chunk_size_16_zeros", chunked("chunk_size_16_zeros", b"0000000000000005\r\nhello\r\n0\r\n\r\n"));
    add("chunk_leading_zeros", chunked("chunk_leading_zeros", b"005\r\nhello\r\n000\r\n\r\n"));
    add("chunk_negative", chunked("chunk_negative", b"-5\r\nhello\r\n0\r\n\r\n"));
    add("chunk_0x", chunked("chunk_0x", b"0x5\r\nhello\r\n0\r\n\r\n"));
    add("chunk_plus", chunked("chunk_plus", b"+5\r\nhello\r\n0\r\n\r\n"));
    add("chunk_space_after_size", chunked("chunk_space_after_size", b"5 \r\nhello\r\n0\r\n\r\n"));
    add("chunk_upper_hex", chunked("chunk_upper_hex", b"A\r\nhellohello\r\n0\r\n\r\n"));
    add("chunk_no_final_crlf", chunked("chunk_no_final_crlf", b"5\r\nhello\r\n0\r\n"));
    add("chunk_no_data_crlf", chunked("chunk_no_data_crlf", b"5\r\nhello0\r\n\r\n"));
    add("chunk_data_too_long", chunked("chunk_data_too_long", b"3\r\nhello\r\n0\r\n\r\n"));
    add("chunk_lf_only", chunked("chunk_lf_only", b"5\nhello\n0\n\n"));
    add("chunk_cr_only", chunked("chunk_cr_only", b"5\rhello\r0\r\r"));
    add("chunk_empty_size", chunked("chunk_empty_size", b"\r\nhello\r\n0\r\n\r\n"));
    add("trailer_ok", chunked("trailer_ok", b"5\r\nhello\r\n0\r\nX-Trailer: v\r\n\r\n"));
    add("trailer_cl", chunked("trailer_cl", b"5\r\nhello\r\n0\r\nContent-Length: 50\r\n\r\n"));
    add("trailer_te", chunked("trailer_te", b"5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n"));
    add("trailer_host", chunked("trailer_host", b"5\r\nhello\r\n0\r\nHost: evil\r\n\r\n"));
    add("trailer_no_colon", chunked("trailer_no_colon", b"5\r\nhello\r\n0\r\nnot a header\r\n\r\n"));
    add("trailer_fold", chunked("trailer_fold", b"5\r\nhello\r\n0\r\nX-T: a\r\n b\r\n\r\n"));

    // --- request targets
    add("abs_uri", raw("GET http://localhost/abs_uri HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("abs_uri_other_host", raw("GET http://other.example/abs_uri_other_host HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("abs_uri_no_host", raw("GET http://localhost/abs_uri_no_host HTTP/1.1\r\n\r\n"));
    add("abs_uri_userinfo", raw("GET http://u:p@localhost/abs_uri_userinfo HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("abs_uri_https", raw("GET https://localhost/abs_uri_https HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("abs_uri_bad_scheme", raw("GET ftp://localhost/abs_uri_bad_scheme HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("authority_form", raw("CONNECT localhost:80 HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("asterisk_form", raw("OPTIONS * HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_space", raw("GET /uri space HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_tab", raw("GET /uri\ttab HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_fragment", raw("GET /uri_fragment#frag HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_pct00", raw("GET /uri_pct00%00x HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_dotdot", raw("GET /../uri_dotdot HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_high_bytes", raw("GET /uri_high_bytes\u{e9} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("uri_no_slash", raw("GET uri_no_slash HTTP/1.1\r\nHost: localhost\r\n\r\n"));

    // --- Host
    add("host_dup_diff", get_head("host_dup_diff", b"Host: localhost\r\nHost: other\r\n"));
    add("host_dup_same", get_head("host_dup_same", b"Host: localhost\r\nHost: localhost\r\n"));
    add("host_userinfo", get_head("host_userinfo", b"Host: user@localhost\r\n"));
    add("host_slash", get_head("host_slash", b"Host: local/host\r\n"));
    add("host_space", get_head("host_space", b"Host: local host\r\n"));
    add("host_dotdot", get_head("host_dotdot", b"Host: ..\r\n"));
    add("host_bad_port", get_head("host_bad_port", b"Host: localhost:8x\r\n"));
    add("host_empty_11", get_head("host_empty_11", b"Host:\r\n"));
    add("host_missing_11", get_head("host_missing_11", b""));
    add("host_missing_10", raw("GET /host_missing_10 HTTP/1.0\r\n\r\n"));

    // --- methods
    add("method_lower", raw("get /method_lower HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("method_space", raw("G ET /method_space HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("method_leading_space", raw(" GET /method_leading_space HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("method_tab_sep", raw("GET\t/method_tab_sep HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    add("method_unknown", raw("FOO /method_unknown HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    let long_method = format!("{} /method_long HTTP/1.1\r\nHost: localhost\r\n\r\n", "A".repeat(300));
    add("method_long", long_method.into_bytes());

    // --- versions
    add("v_http12", raw("GET /v_http12 HTTP/1.2\r\nHost: localhost\r\n\r\n"));
    add("v_http20", raw("GET /v_http20 HTTP/2.0\r\nHost: localhost\r\n\r\n"));
    add("v_http09", raw("GET /v_http09\r\n"));
    add("v_trailing_space", raw("GET /v_trailing_space HTTP/1.1 \r\nHost: localhost\r\n\r\n"));
    add("v_lowercase", raw("GET /v_lowercase http/1.1\r\nHost: localhost\r\n\r\n"));
    add("v_http1", raw("GET /v_http1 HTTP/1\r\nHost: localhost\r\n\r\n"));
    add("v_http1_10", raw("GET /v_http1_10 HTTP/1.10\r\nHost: localhost\r\n\r\n"));
    add("v_http10_keepalive", raw("GET /v_http10_keepalive HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));

    // --- sizes (nginx defaults: 1k header buffer, 4 x 8k large buffers)
    let long_uri = format!("GET /long_uri{} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(9000));
    add("long_uri", long_uri.into_bytes());
    let long_header = format!("X-Long: {}\r\nHost: localhost\r\n", "b".repeat(9000));
    add("long_header", get_head("long_header", long_header.as_bytes()));
    let many: String = (0..400).map(|i| format!("X-H{i}: v\r\n")).collect();
    add("many_headers_ok", get_head("many_headers_ok", format!("Host: localhost\r\n{many}").as_bytes()));
    let big: String = (0..5).map(|i| format!("X-Big{i}: {}\r\n", "c".repeat(7500))).collect();
    add("headers_total_too_big", get_head("headers_total_too_big", format!("Host: localhost\r\n{big}").as_bytes()));

    // nginx (Debian's 1.22.1) takes at most 1000 header lines.
    let tiny = |n| "X:1\r\n".repeat(n);
    add("headers_1000", get_head("headers_1000", format!("Host: localhost\r\n{}", tiny(999)).as_bytes()));
    add("headers_1001", get_head("headers_1001", format!("Host: localhost\r\n{}", tiny(1000)).as_bytes()));
    let dropped = "X_u: 1\r\n".repeat(1500);
    add("headers_1500_ignored", get_head("headers_1500_ignored", format!("Host: localhost\r\n{dropped}").as_bytes()));

    // --- bodies that look like requests: framing must keep them bodies
    let inner = b"GET /inner HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let cl = format!("Content-Length: {}\r\n", inner.len());
    add("cl_body_is_request", post("cl_body_is_request", &cl, inner));
    let mut ch = format!("{:x}\r\n", inner.len()).into_bytes();
    ch.extend_from_slice(inner);
    ch.extend_from_slice(b"\r\n0\r\n\r\n");
    add("chunked_body_is_request", chunked("chunked_body_is_request", &ch));
    add("te_on_get", req("te_on_get", "GET", "Transfer-Encoding: chunked\r\n", CHUNKED_HELLO));
    add(
        "abs_uri_port_other_host",
        raw("GET http://localhost:99/abs_uri_port_other_host HTTP/1.1\r\nHost: other:1\r\n\r\n"),
    );

    // --- other header shapes
    add("hdr_no_colon", get_head("hdr_no_colon", b"Host: localhost\r\nNoColon\r\n"));
    add("hdr_space_before_colon", get_head("hdr_space_before_colon", b"Host: localhost\r\nX-A : b\r\n"));
    add("hdr_empty_name", get_head("hdr_empty_name", b"Host: localhost\r\n: b\r\n"));
    add("hdr_del_in_value", get_head("hdr_del_in_value", b"Host: localhost\r\nX-A: a\x7fb\r\n"));
    add("hdr_high_bytes", get_head("hdr_high_bytes", b"Host: localhost\r\nX-A: \xe9\xff\r\n"));

    // --- Expect
    add("expect_100", post("expect_100", "Expect: 100-continue\r\nContent-Length: 5\r\n", b"hello"));
    add("expect_100_upper", post("expect_100_upper", "Expect: 100-CONTINUE\r\nContent-Length: 5\r\n", b"hello"));
    add("expect_bogus", post("expect_bogus", "Expect: bogus\r\nContent-Length: 5\r\n", b"hello"));
    add(
        "expect_100_chunked",
        post("expect_100_chunked", "Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n", CHUNKED_HELLO),
    );
    add("expect_100_no_body", post("expect_100_no_body", "Expect: 100-continue\r\nContent-Length: 5\r\n", b""));
    add(
        "expect_100_http10",
        raw("POST /expect_100_http10 HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"),
    );

    // --- Connection
    add("conn_close", req("conn_close", "GET", "Connection: close\r\n", b""));
    add("conn_close_post", post("conn_close_post", "Connection: close\r\nContent-Length: 5\r\n", b"hello"));
    add("conn_close_upper", req("conn_close_upper", "GET", "Connection: CLOSE\r\n", b""));
    add("conn_keepalive_close", req("conn_keepalive_close", "GET", "Connection: keep-alive, close\r\n", b""));
    add("conn_close_http10", raw("GET /conn_close_http10 HTTP/1.0\r\n\r\n"));

    c.into_iter().map(|(n, b)| (n.to_string(), b)).collect()
}
