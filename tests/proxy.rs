//! The reverse proxy: proxy_pass to upstream blocks and host:port, URI
//! replacement, request and response headers, request and response bodies
//! (Content-Length, chunked, close-delimited; HTTP/1.0, HTTP/1.1 and h2c
//! clients), smooth weighted round-robin, failover, passive health checks,
//! backup peers, proxy_next_upstream, the 502/504 error paths with nginx's
//! error-log lines, keep-alive pools, proxy_intercept_errors (response heads
//! and proxy_redirect: tests/proxy_headers.rs),
//! $upstream_* in the access log, and truncation of a body the origin cut.
//!
//! Origins are real processes (a second server serving files) or the
//! scripted `common::origin::Origin`, which records the raw requests that
//! reached it. Expected answers were checked against nginx 1.22.1
//! (`SLUICE_TEST_NGINX=1`); where sluice deliberately differs the test says
//! so and branches on `prog()`.

mod common;

use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

#[test]
fn get_head_post_via_upstream_and_host_port() {
    let o = echo();
    let s = proxy2(
        r#"
            client_max_body_size 8m;
            upstream backend { server 127.0.0.1:%A%; }
            server {
                listen 127.0.0.1:{port0};
                listen 127.0.0.1:{port1} http2;
                location /u/ { proxy_pass http://backend; }
                location /h/ { proxy_pass http://127.0.0.1:%A%; }
            }"#,
        &[("%A%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("GET via upstream", || {
        let r = s.get("/u/x");
        assert_eq!((r.status, r.text().as_str()), (200, "GET /u/x\n"));
        assert_eq!((r.must("X-Origin"), r.must("Content-Type"), r.must("Content-Length")), ("echo", "text/plain", "9"));
        let q = o.last();
        assert_eq!(q.line(), "GET /u/x HTTP/1.0");
        assert_eq!(q.headers_named("Host"), ["backend"]);
        assert_eq!(q.headers_named("Connection"), ["close"]);
        assert_eq!(q.header("Content-Length"), None, "{}", q.head);
    });
    checks.run("GET via host:port", || {
        let r = s.get("/h/x?a=1");
        assert_eq!((r.status, r.text().as_str()), (200, "GET /h/x?a=1\n"));
        assert_eq!(o.last().headers_named("Host"), [format!("127.0.0.1:{}", o.port)]);
    });
    checks.run("HEAD", || {
        let r = req(&s, "HEAD", "/u/x", &[], b"");
        // The origin's length for its HEAD answer ("HEAD /u/x\n"), no body.
        assert_eq!((r.status, r.must("Content-Length"), r.body.len()), (200, "10", 0), "{}", r.head);
        assert_eq!(o.last().line(), "HEAD /u/x HTTP/1.0");
    });
    checks.run("POST with Content-Length", || {
        let r = req(
            &s,
            "POST",
            "/u/p",
            &["Content-Type: application/x-www-form-urlencoded", "Content-Length: 7"],
            b"a=1&b=2",
        );
        assert_eq!((r.status, r.text().as_str()), (200, "POST /u/p\n"));
        let q = o.last();
        assert_eq!((q.header("Content-Length"), q.body.as_slice()), (Some("7"), &b"a=1&b=2"[..]), "{}", q.head);
        assert_eq!(q.header("Content-Type"), Some("application/x-www-form-urlencoded"));
    });
    checks.run("POST chunked arrives with Content-Length", || {
        let r = req(&s, "POST", "/h/c", &["Transfer-Encoding: chunked"], b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n");
        assert_eq!(r.status, 200);
        let q = o.last();
        assert_eq!((q.header("Content-Length"), q.body.as_slice()), (Some("11"), &b"hello world"[..]), "{}", q.head);
        assert_eq!(q.header("Transfer-Encoding"), None, "{}", q.head);
    });
    checks.run("POST with an empty body", || {
        assert_eq!(req(&s, "POST", "/u/e", &["Content-Length: 0"], b"").status, 200);
        assert_eq!(o.last().header("Content-Length"), Some("0"));
    });
    let data = pseudo_random(3_000_000, 11);
    let f = s.path("upload.bin");
    std::fs::write(&f, &data).unwrap();
    let h2c = format!("http://127.0.0.1:{}/u/up", s.ports[1]);
    for (label, url, args) in
        [("HTTP/1.1 (Expect: 100-continue)", s.url("/u/up"), "--http1.1"), ("h2c", h2c, "--http2-prior-knowledge")]
    {
        checks.run(&format!("3 MB upload with curl over {label}"), || {
            let c = curl(&[args, "--data-binary", &format!("@{}", f.display()), &url]);
            assert_eq!(c.text(), "POST /u/up\n", "{}", c.stderr);
            let q = o.last();
            assert_eq!(q.header("Content-Length"), Some("3000000"));
            assert!(q.body == data, "upload corrupted: {} bytes arrived", q.body.len());
            assert_eq!(q.header("Expect"), None, "{}", q.head);
        });
    }
    checks.run("keep-alive client: POST, then pipelined GETs", || {
        let mut c = s.connect();
        c.send("POST /u/ka HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc");
        assert_eq!(c.read_response().text(), "POST /u/ka\n");
        c.send("GET /u/p1 HTTP/1.1\r\nHost: localhost\r\n\r\nGET /h/p2 HTTP/1.1\r\nHost: localhost\r\n\r\n");
        assert_eq!((c.read_response().text(), c.read_response().text()), ("GET /u/p1\n".into(), "GET /h/p2\n".into()));
    });
    checks.run("hop-by-hop request headers are not passed", || {
        let hdrs = ["Keep-Alive: 300", "TE: trailers", "Upgrade: foo/1", "X-Pass: yes", "User-Agent: t/1"];
        let mut c = s.connect();
        c.send(format!(
            "GET /u/hop HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n{}\r\n\r\n",
            hdrs.join("\r\n")
        ));
        assert_eq!(c.read_response().status, 200);
        let q = o.last();
        assert_eq!(q.headers_named("Connection"), ["close"], "{}", q.head);
        for h in ["Keep-Alive", "TE", "Upgrade"] {
            assert_eq!(q.header(h), None, "{h} reached the origin:\n{}", q.head);
        }
        assert_eq!((q.header("X-Pass"), q.header("User-Agent")), (Some("yes"), Some("t/1")));
    });
    checks.finish();
}

#[test]
fn uri_replacement() {
    let o = echo();
    let s = proxy(
        r#"
        upstream backend { server 127.0.0.1:%A%; }
        server {
            listen 127.0.0.1:{port};
            location /plain/ { proxy_pass http://127.0.0.1:%A%; }
            location /rep/ { proxy_pass http://127.0.0.1:%A%/new/; }
            location /root/ { proxy_pass http://backend/; }
            location /pre { proxy_pass http://backend/pfx; }
            location = /exact { proxy_pass http://127.0.0.1:%A%/other; }
        }"#,
        &[("%A%", o.port)],
    );
    let cases = [
        ("/plain/a/b?x=1&y=2", "/plain/a/b?x=1&y=2"),
        ("/plain/%7Ea%20b/c%2Fd?q=%20&r", "/plain/%7Ea%20b/c%2Fd?q=%20&r"),
        ("/plain/a/../b", "/plain/a/../b"),
        ("/plain//a", "/plain//a"),
        ("/rep/a/b?x=1", "/new/a/b?x=1"),
        ("/rep/", "/new/"),
        ("/rep/%7Ea%20b%3F?q=%20", "/new/~a%20b%3F?q=%20"),
        ("/rep/a/../c", "/new/c"),
        ("/root/x/y", "/x/y"),
        ("/pre/z", "/pfx/z"),
        ("/prefix/z", "/pfxfix/z"),
        ("/exact?a=b", "/other?a=b"),
    ];
    let mut checks = Checks::new();
    checks.run("absolute-form request target", || {
        let r = request(s.port, "GET http://localhost/plain/abs?q=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!((r.status, o.last().target()), (200, "/plain/abs?q=1"));
    });
    for (client, origin) in cases {
        checks.run(client, || {
            let r = s.get(client);
            assert_eq!(r.status, 200, "{}", r.head);
            assert_eq!(o.last().target(), origin);
        });
    }
    checks.finish();
}

#[test]
fn proxy_set_header_variables_removal_and_inheritance() {
    let o = echo();
    let s = proxy(
        r#"
        server {
            listen 127.0.0.1:{port};
            proxy_set_header X-Srv srv;
            location /inh/ { proxy_pass http://127.0.0.1:%A%; }
            location /own/ {
                proxy_pass http://127.0.0.1:%A%;
                proxy_set_header Host $host;
                proxy_set_header X-Real-IP $remote_addr;
                proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                proxy_set_header User-Agent "";
                proxy_set_header X-Combo "$request_method $uri $proxy_host";
            }
        }"#,
        &[("%A%", o.port)],
    );
    let mut checks = Checks::new();
    checks.run("inherited from server, default Host", || {
        assert_eq!(s.get_with("/inh/", &["User-Agent: t/1"]).status, 200);
        let q = o.last();
        assert_eq!(q.header("X-Srv"), Some("srv"));
        assert_eq!(q.headers_named("Host"), [format!("127.0.0.1:{}", o.port)]);
        assert_eq!(q.header("User-Agent"), Some("t/1"));
    });
    checks.run("own list replaces the inherited one", || {
        let r = request(
            s.port,
            "GET /own/x HTTP/1.1\r\nHost: example.test\r\nUser-Agent: t/1\r\nX-Forwarded-For: 10.1.2.3\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(r.status, 200);
        let q = o.last();
        assert_eq!(q.headers_named("Host"), ["example.test"]);
        assert_eq!(q.header("X-Real-IP"), Some("127.0.0.1"));
        assert_eq!(q.headers_named("X-Forwarded-For"), ["10.1.2.3, 127.0.0.1"], "{}", q.head);
        assert_eq!(q.header("User-Agent"), None, "removed with an empty value:\n{}", q.head);
        assert_eq!(q.header("X-Srv"), None);
        assert_eq!(q.header("X-Combo"), Some(format!("GET /own/x 127.0.0.1:{}", o.port).as_str()));
    });
    checks.run("$proxy_add_x_forwarded_for without a client header", || {
        assert_eq!(s.get("/own/y").status, 200);
        assert_eq!(o.last().headers_named("X-Forwarded-For"), ["127.0.0.1"]);
    });
    checks.finish();
}

#[test]
fn five_megabytes_intact_over_http11_and_h2c() {
    let big = pseudo_random(5 * 1024 * 1024, 42);
    let origin = builder().http("server { listen 127.0.0.1:{port}; root html; }").file("html/big.bin", &big).start();
    let s = proxy2(
        "server { listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1} http2; location / { proxy_pass http://127.0.0.1:%O%; } }",
        &[("%O%", origin.port)],
    );
    for (label, port, args) in [("HTTP/1.1", s.ports[0], "--http1.1"), ("h2c", s.ports[1], "--http2-prior-knowledge")] {
        let out = s.path(&format!("out-{}.bin", port));
        let url = format!("http://127.0.0.1:{port}/big.bin");
        let c = curl(&[args, "-o", &out.display().to_string(), "-w", "%{http_code} %{http_version}", &url]);
        let want = if label == "h2c" { "200 2" } else { "200 1.1" };
        assert_eq!(c.text(), want, "{label}: {}", c.stderr);
        let got = std::fs::read(&out).unwrap();
        assert!(got == big, "{label}: body differs ({} of {} bytes)", got.len(), big.len());
    }
}

#[test]
fn chunked_and_close_delimited_origin_bodies() {
    let (o, want) = chunked_origin();
    let s = proxy2(
        r#"server {
                listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1} http2;
                location / { proxy_pass http://127.0.0.1:%A%; proxy_http_version 1.1; }
            }"#,
        &[("%A%", o.port)],
    );
    let mut checks = Checks::new();
    for path in ["/chunked", "/close-delimited"] {
        checks.run(&format!("{path}: HTTP/1.1 client gets it chunked, keep-alive kept"), || {
            let mut c = s.connect();
            for _ in 0..2 {
                c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
                let r = c.read_response();
                assert_eq!(r.header("Transfer-Encoding"), Some("chunked"), "{}", r.head);
                assert_eq!(r.header("Content-Length"), None, "{}", r.head);
                assert!(r.body == want, "body differs: {} bytes", r.body.len());
            }
        });
        checks.run(&format!("{path}: HTTP/1.0 client gets it until close"), || {
            let raw = request_to_close(s.port, format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes());
            let (head, body) = split_head(&raw);
            assert!(!head.to_ascii_lowercase().contains("transfer-encoding"), "{head}");
            assert!(body == want, "body differs: {} bytes", body.len());
        });
        checks.run(&format!("{path}: h2c client"), || {
            let c = curl(&["--http2-prior-knowledge", &format!("http://127.0.0.1:{}{path}", s.ports[1])]);
            assert!(c.status.success() && c.stdout == want, "{} bytes; {}", c.stdout.len(), c.stderr);
        });
    }
    checks.finish();
}

#[test]
fn weighted_round_robin_three_to_one() {
    let (a, b) = (Origin::ok("A"), Origin::ok("B"));
    let s = proxy(
        r#"
        upstream w { server 127.0.0.1:%A% weight=3; server 127.0.0.1:%B%; }
        server { listen 127.0.0.1:{port}; location / { proxy_pass http://w; } }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    let bodies = get_many(&s, "/", 400);
    let na = bodies.iter().filter(|b| *b == "A").count();
    assert!((298..=302).contains(&na), "A answered {na} of 400, B {}", 400 - na);
    assert_eq!((a.count(), b.count()), (na, 400 - na));
}

#[test]
fn failover_and_recovery_after_fail_timeout() {
    let (dead, single) = (free_port(), free_port());
    let b = Origin::ok("B");
    let s = proxy(
        r#"
        upstream f { server 127.0.0.1:%D% max_fails=1 fail_timeout=1s; server 127.0.0.1:%B%; }
        upstream one { server 127.0.0.1:%S%; }
        server {
            listen 127.0.0.1:{port};
            location /f/ { proxy_pass http://f; }
            location /one/ { proxy_pass http://one; }
        }"#,
        &[("%D%", dead), ("%B%", b.port), ("%S%", single)],
    );
    let mut checks = Checks::new();
    let failed_at = Instant::now();
    let first = get_many(&s, "/f/", 6);
    checks.run("no 502 while a peer works; the dead one is tried once", || {
        assert_eq!(first, vec!["B"; 6]);
        let log = s.wait_error_log("connect() failed (111: Connection refused) while connecting to upstream");
        let u = format!("upstream: \"http://127.0.0.1:{dead}/f/\"");
        let n = log.lines().filter(|l| l.contains("connect() failed") && l.contains(&u)).count();
        assert_eq!(n, 1, "{log}");
        let warn = line_with(&log, "upstream server temporarily disabled");
        assert!(warn.contains("[warn]") && warn.contains(&u), "{log}");
    });
    let a = Origin::start_on(dead, |_| Reply::ok("A"));
    checks.run("still out within fail_timeout", || {
        assert_eq!(get_many(&s, "/f/", 4), vec!["B"; 4]);
        assert_eq!(a.count(), 0);
    });
    // nginx compares fail_timeout in whole seconds: with 1s, a peer is
    // certainly back 2 s after the failure.
    std::thread::sleep(Duration::from_millis(2100).saturating_sub(failed_at.elapsed()));
    checks.run("back after fail_timeout", || {
        let n = get_many(&s, "/f/", 6).iter().filter(|b| *b == "A").count();
        assert!(n >= 2, "the recovered peer answered {n} of 6");
    });
    checks.run("a single-server upstream is never taken out", || {
        let r = s.get("/one/");
        assert_eq!(r.status, 502);
        let _c = Origin::start_on(single, |_| Reply::ok("C"));
        let r = s.get("/one/");
        assert_eq!((r.status, r.text().as_str()), (200, "C"), "{}", s.error_log());
    });
    checks.finish();
}

#[test]
fn backup_only_when_primary_is_down() {
    let (a, b) = (Origin::ok("A"), Origin::ok("B"));
    let s = proxy(
        r#"
        upstream bk { server 127.0.0.1:%A%; server 127.0.0.1:%B% backup; }
        upstream dn { server 127.0.0.1:%B% down; server 127.0.0.1:%A%; }
        server { listen 127.0.0.1:{port}; location / { proxy_pass http://bk; } location /dn { proxy_pass http://dn; } }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    assert_eq!(get_many(&s, "/dn", 4), vec!["A"; 4], "a `down` server gets nothing");
    assert_eq!(get_many(&s, "/", 10), vec!["A"; 10]);
    assert_eq!(b.count(), 0);
    let a_port = a.port;
    drop(a);
    assert_eq!(get_many(&s, "/", 5), vec!["B"; 5]);
    // The failure that sent the request to the backup: A refuses the
    // connection, or (when its listener was still closing) accepts it and
    // closes it unanswered.
    let at_a = format!("upstream: \"http://127.0.0.1:{a_port}/\"");
    let log = s.wait_error_log(&at_a);
    let line = line_with(&log, &at_a);
    assert!(
        line.contains("[error]")
            && (line.contains("connect() failed (111: Connection refused) while connecting to upstream")
                || line.contains("upstream prematurely closed connection while reading response header")),
        "{log}"
    );
}

/// `proxy_next_upstream http_403 http_404 http_502`: a 403 or 404 sends
/// the request on without failing the peer out (nginx's NGX_PEER_NEXT);
/// a 502 does (max_fails=1), so the next request skips it.
#[test]
fn a_403_or_404_does_not_fail_the_peer_out() {
    let a = Origin::start(|r| match r.target() {
        "/403" => Reply::http(403, &[], "no"),
        "/404" => Reply::http(404, &[], "no"),
        _ => Reply::http(502, &[], "bad"),
    });
    let b = Origin::ok("B");
    let s = proxy(
        r#"
        upstream u { server 127.0.0.1:%A% max_fails=1 fail_timeout=30s; server 127.0.0.1:%B% backup; }
        server { listen 127.0.0.1:{port}; location / { proxy_pass http://u; proxy_next_upstream http_403 http_404 http_502; } }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    for path in ["/403", "/404", "/403", "/404"] {
        assert_eq!(s.get(path).text(), "B");
    }
    assert_eq!(a.count(), 4, "every request tried the primary first");
    assert_eq!(s.get("/502").text(), "B");
    assert_eq!(s.get("/403").text(), "B");
    assert_eq!(a.count(), 5, "after a 502 the primary is out for fail_timeout");
}

#[test]
fn max_conns_limits_concurrent_requests() {
    let slow = |_: &Req| Reply::ok("A").after(Duration::from_millis(600));
    let (a, b) = (Origin::start(slow), Origin::ok("B"));
    let s = proxy(
        r#"
        upstream mc { server 127.0.0.1:%A% max_conns=1; server 127.0.0.1:%B%; }
        upstream mc1 { server 127.0.0.1:%A% max_conns=1; }
        server { listen 127.0.0.1:{port}; location /mc { proxy_pass http://mc; } location /one { proxy_pass http://mc1; } }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    for (path, second) in [("/mc", (200, "B")), ("/one", (502, "502 Bad Gateway"))] {
        let port = s.port;
        let first = std::thread::spawn(move || {
            request(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")).text()
        });
        std::thread::sleep(Duration::from_millis(200));
        let r = s.get(path);
        assert_eq!(r.status, second.0, "{path}: {}", r.text());
        assert!(r.text().contains(second.1), "{path}: {}", r.text());
        assert_eq!(first.join().unwrap(), "A", "{path}");
    }
    s.wait_error_log("no live upstreams while connecting to upstream");
}

#[test]
fn proxy_next_upstream_statuses_methods_and_off() {
    let dead = free_port();
    let e500 = Origin::start(|_| Reply::http(500, &[], "e500 body"));
    let e502 = Origin::start(|_| Reply::http(502, &[], "e502 body"));
    let ok = Origin::ok("ok");
    let mut http = String::from("server {\n listen 127.0.0.1:{port};\n");
    let mut ups = String::new();
    // (location, first peer, proxy_next_upstream..., method, expected status, expected body part)
    let cases = [
        ("n502", "%E502%", "proxy_next_upstream error timeout http_502;", "GET", 200, "ok"),
        ("n502off", "%E502%", "proxy_next_upstream off;", "GET", 502, "e502 body"),
        ("n500", "%E500%", "proxy_next_upstream error http_500;", "GET", 200, "ok"),
        ("n500default", "%E500%", "", "GET", 500, "e500 body"),
        ("deadoff", "%D%", "proxy_next_upstream off;", "GET", 502, "502 Bad Gateway"),
        ("deadtries", "%D%", "proxy_next_upstream_tries 1;", "GET", 502, "502 Bad Gateway"),
        ("deaddefault", "%D%", "", "GET", 200, "ok"),
        // A POST that never reached the first peer is retried...
        ("postdead", "%D%", "", "POST", 200, "ok"),
        // ...one that did is not, unless non_idempotent.
        ("post502", "%E502%", "proxy_next_upstream error http_502;", "POST", 502, "e502 body"),
        ("post502ni", "%E502%", "proxy_next_upstream error http_502 non_idempotent;", "POST", 200, "ok"),
        ("delete502", "%E502%", "proxy_next_upstream error http_502;", "DELETE", 200, "ok"),
        ("patch502", "%E502%", "proxy_next_upstream error http_502;", "PATCH", 502, "e502 body"),
    ];
    for (name, first, extra, ..) in cases {
        ups.push_str(&format!("upstream {name} {{ server 127.0.0.1:{first}; server 127.0.0.1:%OK%; }}\n"));
        http.push_str(&format!(" location = /{name} {{ proxy_pass http://{name}; {extra} }}\n"));
    }
    http.push('}');
    let vars = [("%D%", dead), ("%E500%", e500.port), ("%E502%", e502.port), ("%OK%", ok.port)];
    let s = proxy(&format!("{ups}{http}"), &vars);
    let mut checks = Checks::new();
    for (name, _, _, method, status, body) in cases {
        checks.run(&format!("{method} /{name}"), || {
            let r = req(&s, method, &format!("/{name}"), &["Content-Length: 3"], b"x=1");
            assert_eq!(r.status, status, "{}", r.text());
            assert!(r.text().contains(body), "{}", r.text());
        });
    }
    checks.run("requests per origin", || assert_eq!((e500.count(), e502.count(), ok.count()), (2, 6, 6)));
    checks.finish();
}

#[test]
fn keepalive_pool_reuse_and_limits() {
    let handler = |r: &Req| match r.target() {
        t if t.ends_with("/chunked") => Reply::raw(CHUNKED_HEAD).then_write("3\r\nabc\r\n0\r\n\r\n"),
        t if t.ends_with("/nocontent") => Reply::raw("HTTP/1.1 204 No Content\r\nX-A: b\r\n\r\n"),
        _ => Reply::http(200, &["Content-Type: text/plain"], "abc"),
    };
    let (a, b, c) = (Origin::start(handler), Origin::start(handler), Origin::start(handler));
    let s = proxy(
        r#"
        upstream ka { server 127.0.0.1:%A%; keepalive 4; }
        upstream noka { server 127.0.0.1:%B%; }
        upstream kr { server 127.0.0.1:%C%; keepalive 4; keepalive_requests 10; }
        server {
            listen 127.0.0.1:{port};
            location /ka/ { proxy_pass http://ka; proxy_http_version 1.1; proxy_set_header Connection ""; }
            location /noka/ { proxy_pass http://noka; }
            location /kr/ { proxy_pass http://kr; proxy_http_version 1.1; proxy_set_header Connection ""; }
        }"#,
        &[("%A%", a.port), ("%B%", b.port), ("%C%", c.port)],
    );
    for prefix in ["/ka/", "/noka/", "/kr/"] {
        let mut conn = s.connect();
        for i in 0..50 {
            let (method, path) = match i % 5 {
                0 => ("HEAD", "x"),
                1 => ("GET", "chunked"),
                2 => ("GET", "nocontent"),
                _ => ("GET", "x"),
            };
            conn.send(format!("{method} {prefix}{path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
            let r = conn.read_response_to(method);
            let want = match (method, path) {
                ("HEAD", _) => (200, ""),
                (_, "nocontent") => (204, ""),
                _ => (200, "abc"),
            };
            assert_eq!((r.status, r.text().as_str()), want, "{prefix}{path} #{i}: {}", r.head);
        }
    }
    let mut checks = Checks::new();
    checks.run("keepalive 4: one origin connection for 50 requests", || {
        assert_eq!((a.count(), a.connections()), (50, 1));
        for q in a.requests() {
            assert!(q.line().ends_with(" HTTP/1.1") && q.header("Connection").is_none(), "{}", q.head);
        }
    });
    checks.run("no keepalive: one connection per request", || {
        assert_eq!((b.count(), b.connections()), (50, 50));
        assert!(
            b.requests().iter().all(|q| q.line().ends_with(" HTTP/1.0") && q.header("Connection") == Some("close"))
        );
    });
    checks.run("keepalive_requests 10", || assert_eq!((c.count(), c.connections()), (50, 5)));
    checks.finish();
}

#[test]
fn stale_pooled_connections_are_retried_transparently() {
    // One request per connection: a reused connection is closed by the
    // origin after it read the request (the race nginx retries), or closed
    // right after each response while idle in the pool.
    let a = Origin::start(|r| if r.nth == 0 { Reply::ok("a") } else { Reply::none() });
    let b = Origin::start(|_| Reply::ok("b").close());
    let s = proxy(
        r#"
        upstream sa { server 127.0.0.1:%A%; keepalive 2; }
        upstream sb { server 127.0.0.1:%B%; keepalive 2; }
        server {
            listen 127.0.0.1:{port};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            location /a/ { proxy_pass http://sa; }
            location /b/ { proxy_pass http://sb; }
        }"#,
        &[("%A%", a.port), ("%B%", b.port)],
    );
    let mut checks = Checks::new();
    checks.run("closed after reading the request", || {
        for i in 0..5 {
            let r = s.get("/a/");
            assert_eq!((r.status, r.text().as_str()), (200, "a"), "#{i}");
        }
        assert_eq!((a.connections(), a.count()), (5, 9));
    });
    checks.run("closed while idle", || {
        for i in 0..5 {
            let r = s.get("/b/");
            assert_eq!((r.status, r.text().as_str()), (200, "b"), "#{i}");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!((b.connections(), b.count()), (5, 5));
    });
    checks.finish();
}

#[test]
fn proxy_intercept_errors_with_error_page() {
    let o = Origin::start(|r| match r.target() {
        t if t.ends_with("/missing") => Reply::http(404, &["X-From: origin"], "origin 404 body"),
        t if t.ends_with("/err") => Reply::http(500, &[], "origin 500 body"),
        _ => Reply::ok("fine"),
    });
    let s = builder()
        .http(&sub(
            r#"server {
                listen 127.0.0.1:{port};
                root html;
                location /ic/ { proxy_pass http://127.0.0.1:%A%; proxy_intercept_errors on; error_page 404 /e404.html; }
                location /noic/ { proxy_pass http://127.0.0.1:%A%; error_page 404 /e404.html; }
                location /ic200/ { proxy_pass http://127.0.0.1:%A%; proxy_intercept_errors on; error_page 404 =200 @named; }
                location @named { return 200 "named\n"; }
            }"#,
            &[("%A%", o.port)],
        ))
        .file("html/e404.html", "custom 404 page\n")
        .start();
    let mut checks = Checks::new();
    let mut case = |path: &str, status: u16, body: &str| {
        checks.run(path, || {
            let r = s.get(path);
            assert_eq!((r.status, r.text().as_str()), (status, body), "{}", r.head);
        })
    };
    case("/ic/missing", 404, "custom 404 page\n");
    case("/ic/err", 500, "origin 500 body");
    case("/ic/ok", 200, "fine");
    case("/noic/missing", 404, "origin 404 body");
    case("/ic200/missing", 200, "named\n");
    checks.finish();
}

#[test]
fn intercepted_errors_give_back_the_peers_connection_slot() {
    // With max_conns=1, a slot the intercepted response kept would turn every
    // later request into a 502 ("no live upstreams").
    let o = Origin::start(|r| match r.target() {
        t if t.ends_with("/missing") => Reply::http(404, &[], "origin 404 body"),
        _ => Reply::ok("fine"),
    });
    let s = builder()
        .http(&sub(
            r#"upstream one { server 127.0.0.1:%A% max_conns=1; }
            server {
                listen 127.0.0.1:{port};
                root html;
                location / { proxy_pass http://one; proxy_intercept_errors on; error_page 404 /e404.html; }
                location = /e404.html { }
            }"#,
            &[("%A%", o.port)],
        ))
        .file("html/e404.html", "custom 404 page\n")
        .start();
    for _ in 0..3 {
        let r = s.get("/missing");
        assert_eq!((r.status, r.text().as_str()), (404, "custom 404 page\n"), "{}", r.head);
    }
    let r = s.get("/ok");
    assert_eq!((r.status, r.text().as_str()), (200, "fine"), "{}", r.head);
}

#[test]
fn upstream_variables_in_access_log() {
    let dead = free_port();
    let e502 = Origin::start(|_| Reply::http(502, &[], "e502"));
    let ok = Origin::ok("ok");
    let s = proxy(
        r#"
        log_format up '$request_uri|$status|$upstream_addr|$upstream_status|$upstream_response_time|$upstream_connect_time|$upstream_header_time';
        access_log logs/access.log up;
        upstream r1 { server 127.0.0.1:%E%; server 127.0.0.1:%OK%; }
        upstream r2 { server 127.0.0.1:%D%; server 127.0.0.1:%OK%; }
        server {
            listen 127.0.0.1:{port};
            location = /r1 { proxy_pass http://r1; proxy_next_upstream error http_502; }
            location = /r2 { proxy_pass http://r2; }
            location = /one { proxy_pass http://127.0.0.1:%OK%; }
            location = /local { return 200; }
        }"#,
        &[("%E%", e502.port), ("%D%", dead), ("%OK%", ok.port)],
    );
    for p in ["/r1", "/r2", "/one", "/local"] {
        assert_eq!(s.get(p).status, 200, "{p}");
    }
    let (e, d, k) = (e502.port, dead, ok.port);
    // Times (`0.001`) become `T`; `-` stays.
    let time = |t: &str| t.len() >= 5 && t.as_bytes()[t.len() - 4] == b'.' && t.replace('.', "").parse::<u64>().is_ok();
    let norm = |l: &String| -> String {
        let f: Vec<String> = l
            .split('|')
            .map(|c| c.split(", ").map(|t| if time(t) { "T" } else { t }).collect::<Vec<_>>().join(", "))
            .collect();
        f.join("|")
    };
    let lines: Vec<String> = s.wait_access_lines(4).iter().map(norm).collect();
    let expect = [
        format!("/r1|200|127.0.0.1:{e}, 127.0.0.1:{k}|502, 200|T, T|T, T|T, T"),
        format!("/r2|200|127.0.0.1:{d}, 127.0.0.1:{k}|502, 200|T, T|-, T|-, T"),
        format!("/one|200|127.0.0.1:{k}|200|T|T|T"),
        "/local|200|-|-|-|-|-".to_string(),
    ];
    let mut checks = Checks::new();
    for (line, want) in lines.iter().zip(&expect) {
        checks.run(&want[..want.find('|').unwrap()], || assert_eq!(line, want));
    }
    checks.finish();
}

/// RFC 9110 7.6.1: headers named by a Connection header are hop-by-hop in
/// both directions. nginx passes them on; sluice drops them.
#[test]
fn connection_listed_headers_stay_on_their_hop() {
    if prog() != "sluice" {
        return;
    }
    let o = Origin::start(|_| {
        Reply::http(200, &["Connection: keep-alive, X-Hop", "X-Hop: origin-only", "X-Keep: yes"], "ok")
    });
    let s = proxy(
        r#"server { listen 127.0.0.1:{port}; location / { proxy_pass http://127.0.0.1:%A%; } }"#,
        &[("%A%", o.port)],
    );
    let r = req(&s, "GET", "/x", &["Connection: close, X-Secret", "X-Secret: client-only", "X-Other: 2"], b"");
    assert_eq!((r.status, r.header("X-Keep"), r.header("X-Hop")), (200, Some("yes"), None), "{}", r.head);
    let q = o.last();
    assert_eq!((q.header("X-Secret"), q.header("X-Other")), (None, Some("2")), "{}", q.head);
}
