//! `scgi_pass` to a real SCGI server (Debian's uWSGI with `--scgi-socket`
//! and its python3 plugin, which answers with CGI `Status:` lines): the
//! variables the application sees (`include scgi_params`, nginx's own
//! `CONTENT_LENGTH` first), bodies, statuses and headers, a body without
//! a length, failures with nginx's lines, configuration errors. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::uwsgi::{APP, Uwsgi, with_params};
use common::*;

fn server(u: &Uwsgi) -> TestServer {
    let http = format!(
        "server {{\n  listen 127.0.0.1:{{port}};\n  server_name app.test;\n\
           location / {{ include scgi_params; scgi_param PATH_INFO $document_uri; scgi_param X_EXTRA hi; \
           scgi_pass {}; }}\n}}",
        u.addr
    );
    with_params(builder()).http(&http).start()
}

#[test]
fn the_application_sees_nginx_variables_headers_and_body() {
    let u = Uwsgi::start_scgi(APP, true);
    let s = server(&u);
    let raw = "POST /env/x?q=1 HTTP/1.1\r\nHost: app.test:8080\r\nX-Foo: bar\r\n\
               Content-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let r = request(s.port, raw);
    assert_eq!(r.status, 200);
    let want = "CONTENT_LENGTH=5\nCONTENT_TYPE=text/plain\nDOCUMENT_URI=/env/x\nHTTP_CONNECTION=close\n\
                HTTP_CONTENT_LENGTH=5\nHTTP_CONTENT_TYPE=text/plain\nHTTP_HOST=app.test\nHTTP_X_FOO=bar\n\
                PATH_INFO=/env/x\nQUERY_STRING=q=1\nREMOTE_ADDR=127.0.0.1\nREQUEST_METHOD=POST\n\
                REQUEST_SCHEME=http\nREQUEST_URI=/env/x?q=1\nSCGI=1\nSERVER_NAME=app.test\n\
                SERVER_PROTOCOL=HTTP/1.1\nX_EXTRA=hi\nBODY=hello\n";
    assert_eq!(r.text(), want);
    // A chunked body is read whole: CONTENT_LENGTH is what is sent.
    let raw = "POST /size HTTP/1.1\r\nHost: app.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
               3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n";
    assert_eq!(request(s.port, raw).text(), "7 7\n");
    // No body: CONTENT_LENGTH 0, as nginx writes it.
    assert_eq!(s.get("/size").text(), "0 0\n");
}

#[test]
fn cgi_status_lines_headers_and_bodies() {
    let u = Uwsgi::start_scgi(APP, false);
    let s = server(&u);
    let r = s.get("/status");
    assert_eq!((r.status, r.text().as_str()), (404, "nope\n"));
    assert_eq!((r.header("x-app"), r.header("set-cookie")), (Some("wsgi"), Some("a=1")));
    let r = s.get("/stream");
    assert_eq!(r.text(), "part 0\npart 1\npart 2\n");
    let r = s.get("/big");
    assert_eq!(r.body.len(), 1 << 20);
    for _ in 0..10 {
        assert_eq!(s.get("/ok").text(), "ok\n");
    }
    let addr = u.addr.clone();
    drop(u);
    assert_eq!(s.get("/ok").status, 502);
    let log = s.wait_error_log("Connection refused");
    let want = format!(
        "connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: app.test, request: \"GET /ok HTTP/1.1\", upstream: \"scgi://{addr}\""
    );
    assert!(log.contains(&want), "{log}");
}

#[test]
fn configuration_errors_as_nginx() {
    for (http, why) in [
        ("server { location / { scgi_pass app; } }", "no port in upstream \"app\""),
        ("server { location / { scgi_pass scgi://127.0.0.1:9; } }", "invalid host in upstream \"scgi://127.0.0.1:9\""),
        (
            "server { location / { scgi_pass 127.0.0.1:9; scgi_pass 127.0.0.1:9; } }",
            "\"scgi_pass\" directive is duplicate",
        ),
        ("scgi_pass 127.0.0.1:9;", "\"scgi_pass\" directive is not allowed here"),
        ("scgi_param A;", "invalid number of arguments in \"scgi_param\" directive"),
    ] {
        assert_refused(http, why);
    }
}
