//! `uwsgi_pass` to a real uWSGI server (Debian's uwsgi-core, python3
//! plugin) running a WSGI application: the variables the application sees
//! (`include uwsgi_params`, `uwsgi_param`, the request's headers), request
//! bodies (chunked ones read whole for CONTENT_LENGTH), statuses and
//! headers, bodies with and without a length, unix sockets, failures
//! (502, 504) with nginx's log lines, and the packet's 64 KB limit. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::time::{Duration, Instant};

use common::uwsgi::{APP, Uwsgi, with_params};
use common::*;

fn server(u: &Uwsgi, extra: &str) -> TestServer {
    let http = format!(
        "server {{\n  listen 127.0.0.1:{{port}};\n  server_name app.test;\n{extra}\n\
           location / {{ include uwsgi_params; uwsgi_param X_EXTRA hi; uwsgi_param HTTP_X_OVER param; uwsgi_pass {}; }}\n}}",
        u.addr
    );
    with_params(builder()).http(&http).start()
}

#[test]
fn the_application_sees_nginx_variables_headers_and_body() {
    let u = Uwsgi::start(APP, true);
    let s = server(&u, "");
    let raw = "POST /env/a%20b?q=1&r=2 HTTP/1.1\r\nHost: app.test\r\nX-Foo: bar\r\nX-Foo: baz\r\nX-Over: header\r\n\
               Content-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let r = request(s.port, raw);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let want = "CONTENT_LENGTH=5\nCONTENT_TYPE=text/plain\nHTTP_CONNECTION=close\nHTTP_CONTENT_LENGTH=5\n\
                HTTP_CONTENT_TYPE=text/plain\nHTTP_HOST=app.test\nHTTP_X_FOO=bar, baz\nHTTP_X_OVER=param\n\
                PATH_INFO=/env/a b\nQUERY_STRING=q=1&r=2\nREMOTE_ADDR=127.0.0.1\nREQUEST_METHOD=POST\n\
                REQUEST_SCHEME=http\nREQUEST_URI=/env/a%20b?q=1&r=2\nSERVER_NAME=app.test\n\
                SERVER_PROTOCOL=HTTP/1.1\nX_EXTRA=hi\nBODY=hello\n";
    // nginx 1.22 passes a repeated header twice (uWSGI keeps the last);
    // sluice joins them as nginx 1.23 does.
    let text = r.text();
    let got = text.replace("HTTP_X_FOO=baz\n", "HTTP_X_FOO=bar, baz\n");
    assert_eq!(got, want);
    // A chunked body is read whole: the application gets its length.
    let raw = "POST /size HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
               3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    assert_eq!(request(s.port, raw).text(), "7 7\n");
    // An empty chunked body too: CONTENT_LENGTH is 0, not empty (nginx's
    // uwsgi_body.t, "uwsgi empty chunked").
    let raw =
        "POST /size HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n";
    assert_eq!(request(s.port, raw).text(), "0 0\n");
    // A large body, in a temporary file past client_body_buffer_size.
    let big = "z".repeat(300_000);
    let raw = format!(
        "POST /size HTTP/1.1\r\nHost: app.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{big}",
        big.len()
    );
    assert_eq!(request(s.port, &raw).text(), "300000 300000\n");
}

#[test]
fn statuses_headers_and_bodies_with_or_without_a_length() {
    let u = Uwsgi::start(APP, false);
    let s = server(&u, "");
    let r = s.get("/status");
    assert_eq!((r.status, r.text().as_str()), (404, "nope\n"));
    assert_eq!(r.header("x-app"), Some("wsgi"));
    assert_eq!(r.header("set-cookie"), Some("a=1"));
    // No length: the body runs to the end of the uwsgi connection, and is
    // chunked for the client.
    let r = s.get("/stream");
    assert_eq!(r.text(), "part 0\npart 1\npart 2\n");
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    let r = s.get("/big");
    assert_eq!(r.body.len(), 1 << 20);
    assert!(r.body.chunks(16).all(|c| c == b"0123456789abcdef"));
    // HEAD: the head alone.
    let mut c = s.connect();
    c.send("HEAD /big HTTP/1.1\r\nHost: app.test\r\n\r\n");
    let h = c.read_response_to("HEAD");
    assert_eq!((h.status, h.header("content-length")), (200, Some("1048576")));
    // Every request is the connection's only one: many in a row all work.
    for _ in 0..20 {
        assert_eq!(s.get("/ok").text(), "ok\n");
    }
}

#[test]
fn failures_are_502_and_504_with_nginx_lines() {
    let u = Uwsgi::start(APP, false);
    let s = server(&u, "uwsgi_read_timeout 1s;");
    let t = Instant::now();
    assert_eq!(s.get("/slow").status, 504);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let log = s.wait_error_log("upstream timed out");
    let want = format!(
        "upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: app.test, request: \"GET /slow HTTP/1.1\", upstream: \"uwsgi://{}\"",
        u.addr
    );
    assert!(log.contains(&want), "{log}");
    let addr = u.addr.clone();
    drop(u);
    assert_eq!(s.get("/ok").status, 502);
    let log = s.wait_error_log("Connection refused");
    let want = format!(
        "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: app.test, request: \"GET /ok HTTP/1.1\", upstream: \"uwsgi://{addr}\""
    );
    assert!(log.contains(&want), "{log}");
}

#[test]
fn a_packet_past_64k_is_refused_with_500() {
    let u = Uwsgi::start(APP, true);
    // Ten copies of a 7 KB header: over 64 KB of variables.
    let params: String = (0..10).map(|i| format!("uwsgi_param BIG{i} $http_x_big;\n")).collect();
    let s = with_params(builder())
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port}}; location / {{ include uwsgi_params; {params} uwsgi_pass {}; }} }}",
            u.addr
        ))
        .start();
    let big = format!("X-Big: {}", "b".repeat(7000));
    assert_eq!(s.get_with("/env", &[&big]).status, 500);
    let log = s.wait_error_log("uwsgi request is too big");
    let line = log.lines().find(|l| l.contains("uwsgi request is too big")).expect("line");
    assert!(line.contains("[alert]"), "{line}");
    // Under the limit it goes through.
    assert_eq!(s.get_with("/ok", &["X-Big: small"]).status, 200);
}

#[test]
fn configuration_errors_as_nginx() {
    for (http, why) in [
        ("uwsgi_modifier1 256;", "value must be between 0 and 255"),
        ("uwsgi_modifier1 x;", "\"uwsgi_modifier1\" directive invalid number"),
        ("server { location / { uwsgi_pass app; } }", "no port in upstream \"app\""),
        ("server { location / { uwsgi_pass http://127.0.0.1:9; } }", "invalid host in upstream \"http://127.0.0.1:9\""),
        (
            "server { location / { uwsgi_pass 127.0.0.1:9; uwsgi_pass 127.0.0.1:9; } }",
            "\"uwsgi_pass\" directive is duplicate",
        ),
        ("uwsgi_pass 127.0.0.1:9;", "\"uwsgi_pass\" directive is not allowed here"),
        ("uwsgi_param A;", "invalid number of arguments in \"uwsgi_param\" directive"),
    ] {
        assert_refused(http, why);
    }
    let t = builder()
        .http(
            "upstream app { server 127.0.0.1:9; }\n\
             server { listen 127.0.0.1:{port}; uwsgi_connect_timeout 2s; uwsgi_buffers 8 8k; uwsgi_socket_keepalive on;\n\
               location / { uwsgi_pass uwsgi://app; uwsgi_modifier1 30; uwsgi_pass_request_headers off; }\n\
               location /v { set $a 127.0.0.1:9; uwsgi_pass $a; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// `uwsgi_cache` and `scgi_cache`: the proxy's cache engine under the
/// application-server modules' names; a second request is a HIT the
/// application never sees, and a zone without a key is nginx's warning.
#[test]
fn responses_are_cached_under_uwsgi_cache_and_scgi_cache() {
    let u = Uwsgi::start(APP, true);
    let sc = Uwsgi::start_scgi(APP, true);
    let s = with_params(builder())
        .http(&format!(
            "uwsgi_cache_path {{prefix}}/uc keys_zone=u:1m;\n\
             scgi_cache_path {{prefix}}/sc keys_zone=s:1m;\n\
             server {{ listen 127.0.0.1:{{port}};\n\
               location /count {{ include uwsgi_params; uwsgi_cache u; uwsgi_cache_key $request_uri; \
                 uwsgi_cache_valid 200 1m; add_header X-Cache $upstream_cache_status; uwsgi_pass {}; }}\n\
               location /s/ {{ include scgi_params; scgi_param PATH_INFO /count; scgi_cache s; \
                 scgi_cache_key $request_uri; scgi_cache_valid 200 1m; add_header X-Cache $upstream_cache_status; \
                 scgi_pass {}; }} }}",
            u.addr, sc.addr
        ))
        .start();
    let first = s.get("/count");
    assert_eq!((first.text().as_str(), first.header("x-cache")), ("1 GET\n", Some("MISS")));
    let second = s.get("/count");
    assert_eq!((second.text().as_str(), second.header("x-cache")), ("1 GET\n", Some("HIT")));
    let first = s.get("/s/a");
    assert_eq!((first.text().as_str(), first.header("x-cache")), ("1 GET\n", Some("MISS")));
    let second = s.get("/s/a");
    assert_eq!((second.text().as_str(), second.header("x-cache")), ("1 GET\n", Some("HIT")));
    let t = with_params(builder())
        .http(
            "uwsgi_cache_path uc keys_zone=u:1m;\n\
               server { listen 127.0.0.1:{port}; location / { uwsgi_cache u; uwsgi_pass 127.0.0.1:9; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(out.status.success() && err.contains("no \"uwsgi_cache_key\" for \"uwsgi_cache\""), "{err}");
}
