//! The reverse proxy's response heads: the origin's fields passed on,
//! hop-by-hop and nginx's default hidden ones dropped, `proxy_hide_header`
//! and `proxy_pass_header`, repeated fields (the first counts; a repeated
//! Content-Length or Transfer-Encoding is a 502), and `proxy_redirect`
//! rewriting `Location` and `Refresh` (default, off, plain rules with
//! variables, regexes with captures).
//!
//! The origin is the scripted `common::origin::Origin`. Expected answers
//! were checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`); what nginx
//! 1.23 changed is skipped there.

mod common;

use common::origin::*;
use common::*;

#[test]
fn response_headers_passthrough_hiding_and_redirects() {
    let o = Origin::start(|r| {
        if r.target() == "/a/many" {
            let hs: Vec<String> = (0..120).map(|i| format!("X-H-{i}: {i}")).collect();
            return Reply::http(200, &hs.iter().map(String::as_str).collect::<Vec<_>>(), "many");
        }
        if r.target().starts_with("/new/") {
            let host = r.header("Host").unwrap_or("");
            let loc = format!("Location: http://{host}/new/there");
            let refresh = format!("Refresh: 3; URL=http://{host}/new/there");
            return Reply::http(302, &[&loc, &refresh], "");
        }
        // nginx takes the first of a repeated Expires or Content-Type and
        // refuses a repeated Content-Length or Transfer-Encoding.
        match r.target() {
            "/a/dup-expires" => {
                let hs = ["Expires: foo", "Expires: bar", "Content-Type: text/one", "Content-Type: text/two"];
                return Reply::http(200, &hs, "");
            }
            "/a/dup-length" => {
                return Reply::raw("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok");
            }
            "/a/dup-chunked" => {
                return Reply::raw(
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                );
            }
            _ => {}
        }
        let hs = "Server: origin/9|Date: Mon, 01 Jan 2001 00:00:00 GMT|Content-Type: text/x-origin|X-One: 1|\
                  Set-Cookie: a=1|Set-Cookie: b=2|Connection: keep-alive|Keep-Alive: timeout=99|X-Secret: s|\
                  X-Accel-Expires: 10|X-Pad: avoid browser bug";
        Reply::http(201, &hs.split('|').collect::<Vec<_>>(), "hello")
    });
    let s = proxy(
        r#"
        server {
            listen 127.0.0.1:{port};
            location /a/ { proxy_pass http://127.0.0.1:%A%; proxy_hide_header X-Secret; }
            location /pass/ { proxy_pass http://127.0.0.1:%A%; proxy_pass_header Server; proxy_pass_header X-Accel-Expires; }
            location /passdate/ { proxy_pass http://127.0.0.1:%A%/new/; proxy_pass_header Date; proxy_pass_header Server; }
            location /old/ { proxy_pass http://127.0.0.1:%A%/new/; }
            location /roff/ { proxy_pass http://127.0.0.1:%A%/new/; proxy_redirect off; }
            location /rrule/ { proxy_pass http://127.0.0.1:%A%/new/; proxy_redirect http://127.0.0.1:%A%/new/ http://front.example/r/; }
            location /rvar/ {
                set $v var_here;
                proxy_pass http://127.0.0.1:%A%/new/;
                proxy_redirect http://127.0.0.1:%A%/nothing/ /no/;
                proxy_redirect http://127.0.0.1:%A%/new/ /$v/;
            }
            location /rre/ {
                proxy_pass http://127.0.0.1:%A%/new/;
                proxy_redirect ~*^(.+)/NEW/(\w+)$ $1/re/$2/x;
            }
            location /rdef/ {
                proxy_pass http://127.0.0.1:%A%/new/;
                proxy_redirect wrong wrong;
                proxy_redirect default;
            }
        }"#,
        &[("%A%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("passthrough and hop-by-hop removal", || {
        let r = s.get("/a/");
        assert_eq!((r.status, r.text().as_str()), (201, "hello"));
        assert_eq!((r.must("Content-Type"), r.must("X-One"), r.must("Content-Length")), ("text/x-origin", "1", "5"));
        assert_eq!(r.headers_named("Set-Cookie"), ["a=1", "b=2"]);
        assert_eq!(r.headers_named("Server").len(), 1, "{}", r.head);
        assert!(r.must("Server").starts_with(prog()), "the proxy's own Server:\n{}", r.head);
        assert_eq!(r.headers_named("Date").len(), 1, "{}", r.head);
        assert!(!r.must("Date").contains("2001"), "the proxy's own Date:\n{}", r.head);
        assert_eq!(r.headers_named("Connection"), ["close"], "{}", r.head);
        for h in ["Keep-Alive", "X-Secret", "X-Accel-Expires", "X-Pad", "Transfer-Encoding"] {
            assert_eq!(r.header(h), None, "{h} reached the client:\n{}", r.head);
        }
    });
    checks.run("120 response headers", || {
        let r = s.get("/a/many");
        assert_eq!((r.status, r.text().as_str()), (200, "many"), "{}", s.error_log());
        assert_eq!((r.headers_named("X-H-119"), r.headers.len() > 120), (vec!["119"], true));
    });
    checks.run("proxy_pass_header", || {
        let r = s.get("/pass/");
        assert_eq!(r.headers_named("Server"), ["origin/9"], "{}", r.head);
        assert_eq!(r.header("X-Accel-Expires"), Some("10"), "{}", r.head);
    });
    checks.run("proxy_pass_header Date, Server: none when the origin sends none", || {
        let r = s.get("/passdate/x");
        assert_eq!(r.status, 302);
        assert_eq!((r.header("Date"), r.header("Server")), (None, None), "{}", r.head);
    });
    checks.run("proxy_redirect default", || {
        let r = s.get("/old/x");
        assert_eq!(r.status, 302);
        // The rewritten "/old/there" is made absolute (absolute_redirect on).
        assert_eq!(r.must("Location"), format!("http://localhost:{}/old/there", s.port));
    });
    checks.run("proxy_redirect off", || {
        assert_eq!(s.get("/roff/x").must("Location"), format!("http://127.0.0.1:{}/new/there", o.port));
    });
    checks.run("proxy_redirect FROM TO", || {
        assert_eq!(s.get("/rrule/x").must("Location"), "http://front.example/r/there");
    });
    checks.run("Refresh: only the URL, left relative", || {
        assert_eq!(s.get("/old/x").must("Refresh"), "3; URL=/old/there");
        assert_eq!(s.get("/rdef/x").must("Refresh"), "3; URL=/rdef/there");
        assert_eq!(s.get("/roff/x").must("Refresh"), format!("3; URL=http://127.0.0.1:{}/new/there", o.port));
    });
    checks.run("proxy_redirect with variables, the first matching rule", || {
        let r = s.get("/rvar/x");
        assert_eq!(r.must("Location"), format!("http://localhost:{}/var_here/there", s.port));
        assert_eq!(r.must("Refresh"), "3; URL=/var_here/there");
    });
    checks.run("proxy_redirect ~* regex: the whole value, with captures", || {
        let r = s.get("/rre/x");
        assert_eq!(r.must("Location"), format!("http://127.0.0.1:{}/re/there/x", o.port));
        assert_eq!(r.must("Refresh"), format!("3; URL=http://127.0.0.1:{}/re/there/x", o.port));
    });
    // nginx 1.23 and later (1.26.3: nginx-tests' proxy_duplicate_headers.t);
    // Debian's 1.22 passed both and took the last.
    if prog() != "nginx" {
        checks.run("repeated Expires and Content-Type: the first", || {
            let r = s.get("/a/dup-expires");
            assert_eq!(r.headers_named("Expires"), ["foo"], "{}", r.head);
            assert_eq!(r.headers_named("Content-Type"), ["text/one"], "{}", r.head);
        });
        checks.run("repeated Content-Length or Transfer-Encoding: 502", || {
            assert_eq!(s.get("/a/dup-length").status, 502);
            assert_eq!(s.get("/a/dup-chunked").status, 502);
            s.wait_error_log("upstream sent duplicate header line: \"Content-Length\"");
        });
    }
    checks.finish();
}
