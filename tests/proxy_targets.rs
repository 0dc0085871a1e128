//! Where `proxy_pass` can point besides `host:port` and upstream names:
//! unix-domain sockets (`server unix:/path` in an upstream and
//! `proxy_pass http://unix:/path:/uri`), and URLs with variables, resolved
//! per request as nginx does without a `resolver` (an upstream name, an IP
//! address, `unix:`; other host names are a 502). Checked against nginx
//! 1.22 (`SLUICE_TEST_NGINX=1`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::origin::*;
use common::*;

/// An origin on a unix socket answering `unix LINE` plus the Host header it
/// got; keeps the request heads.
fn unix_origin(path: &Path) -> Arc<Mutex<Vec<String>>> {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).expect("bind unix origin");
    // nginx's workers run as nobody when the tests run as root.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod socket");
    let heads = Arc::new(Mutex::new(Vec::new()));
    let h = heads.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            let h = h.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().expect("clone"));
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let first = head.lines().next().unwrap_or("").to_string();
                h.lock().expect("heads").push(head);
                let body = format!("unix {first}\n");
                let mut w = s;
                let _ =
                    write!(w, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            });
        }
    });
    heads
}

#[test]
fn unix_socket_peers() {
    let s = builder()
        .http(
            r#"
            upstream u { server unix:{prefix}/origin.sock; }
            server {
                listen 127.0.0.1:{port};
                location /u/ { proxy_pass http://u; }
                location /d/ { proxy_pass http://unix:{prefix}/origin.sock:/direct/; }
                location /missing/ { proxy_pass http://unix:{prefix}/nothing.sock; }
            }"#,
        )
        .start();
    // Unix paths are connected to per request, so the origin may come later.
    let heads = unix_origin(&s.path("origin.sock"));
    let mut checks = Checks::new();
    checks.run("upstream server unix:", || {
        let r = s.get("/u/a?x=1");
        assert_eq!((r.status, r.text().as_str()), (200, "unix GET /u/a?x=1 HTTP/1.0\n"));
        let h = heads.lock().expect("heads").last().cloned().expect("head");
        assert!(h.contains("Host: u\r\n"), "{h}");
    });
    checks.run("proxy_pass http://unix:/path:/uri replaces the location prefix", || {
        let r = s.get("/d/b");
        assert_eq!((r.status, r.text().as_str()), (200, "unix GET /direct/b HTTP/1.0\n"));
        let h = heads.lock().expect("heads").last().cloned().expect("head");
        // nginx sends Host: localhost for a unix socket.
        assert!(h.contains("Host: localhost\r\n"), "{h}");
    });
    checks.run("a socket nobody listens on is a 502 with nginx's line", || {
        assert_eq!(s.get("/missing/").status, 502);
        let log = s.wait_error_log("nothing.sock");
        let line = line_with(&log, "nothing.sock");
        assert!(line.contains("connect() to unix:") && line.contains("(2: No such file or directory)"), "{line}");
        assert!(line.contains("nothing.sock:/missing/\""), "{line}");
    });
    checks.finish();
}

#[test]
fn proxy_pass_with_variables() {
    let o = echo();
    let s = proxy(
        r#"
            upstream backend { server 127.0.0.1:%A%; }
            server {
                listen 127.0.0.1:{port};
                location /v/ { proxy_pass http://$http_x_target; }
                location /w/ { proxy_pass http://$http_x_target/fixed$is_args$args; }
                location /bad/ { proxy_pass $http_x_target; }
            }"#,
        &[("%A%", o.port)],
    );
    let get = |path: &str, target: &str| s.get_with(path, &[&format!("X-Target: {target}")]);
    let mut checks = Checks::new();
    checks.run("an upstream name", || {
        let r = get("/v/a?q=1", "backend");
        assert_eq!((r.status, r.text().as_str()), (200, "GET /v/a?q=1\n"));
        assert_eq!(o.last().headers_named("Host"), ["backend"]);
    });
    checks.run("an address with a port", || {
        let r = get("/v/b", &format!("127.0.0.1:{}", o.port));
        assert_eq!((r.status, r.text().as_str()), (200, "GET /v/b\n"));
        assert_eq!(o.last().headers_named("Host"), [format!("127.0.0.1:{}", o.port)]);
    });
    checks.run("a URI part replaces the whole URI, as written", || {
        let r = get("/w/c/d?z=2", "backend");
        assert_eq!((r.status, r.text().as_str()), (200, "GET /fixed?z=2\n"));
    });
    checks.run("a host name without a resolver is a 502", || {
        let r = get("/v/e", "example.invalid");
        assert_eq!(r.status, 502);
        s.wait_error_log("no resolver defined to resolve example.invalid");
    });
    checks.run("a URL that is not one is a 500", || {
        let r = get("/bad/", "ftp://x");
        assert_eq!(r.status, 500);
        s.wait_error_log("invalid URL prefix in \"ftp://x\"");
    });
    checks.finish();
}

/// `proxy_bind`: connections to the origin come from the given local
/// address, fixed or from variables; one the kernel refuses to bind is a
/// 500 with nginx's `[crit] bind(...) failed` line.
#[test]
fn proxy_bind_picks_the_local_address() {
    let o = echo();
    let s = proxy(
        r#"
            server {
                listen 127.0.0.1:{port};
                location /fixed/ { proxy_bind 127.0.0.2; proxy_pass http://127.0.0.1:%A%; }
                location /var/ { proxy_bind $arg_ip; proxy_pass http://127.0.0.1:%A%; }
                location /nonlocal/ { proxy_bind 192.0.2.1; proxy_pass http://127.0.0.1:%A%; }
                location /plain/ { proxy_pass http://127.0.0.1:%A%; }
            }"#,
        &[("%A%", o.port)],
    );
    let from = |path: &str| {
        let r = s.get(path);
        assert_eq!(r.status, 200, "{path}");
        o.last().peer.expect("peer address").ip().to_string()
    };
    let mut checks = Checks::new();
    checks.run("a fixed address", || assert_eq!(from("/fixed/a"), "127.0.0.2"));
    checks.run("an address from a variable", || assert_eq!(from("/var/b?ip=127.0.0.3"), "127.0.0.3"));
    checks.run("an empty value binds nothing", || assert_eq!(from("/var/c"), "127.0.0.1"));
    checks.run("no proxy_bind", || assert_eq!(from("/plain/d"), "127.0.0.1"));
    checks.run("a value that is no address is logged and left out", || {
        assert_eq!(from("/var/e?ip=nonsense"), "127.0.0.1");
        s.wait_error_log("invalid local address \"nonsense\"");
    });
    checks.run("an address not on this host is a 500", || {
        let n = o.count();
        assert_eq!(s.get("/nonlocal/f").status, 500);
        let log = s.wait_error_log("bind(192.0.2.1) failed (99: Cannot assign requested address)");
        let line = line_with(&log, "bind(192.0.2.1) failed");
        assert!(line.contains("[crit]") && line.contains("while connecting to upstream"), "{line}");
        assert_eq!(o.count(), n, "the origin was reached");
    });
    checks.finish();
    for (conf, why) in [
        ("proxy_bind nowhere;", "invalid address \"nowhere\""),
        (
            "proxy_bind 127.0.0.2 transparent;",
            "the \"transparent\" parameter of the \"proxy_bind\" directive is not supported",
        ),
    ] {
        if prog() == "nginx" && why.contains("transparent") {
            continue; // nginx has it
        }
        assert_refused(&format!("server {{ listen 127.0.0.1:{{port}}; location / {{ {conf} }} }}"), why);
    }
}

/// nginx's auto redirect: a prefix location whose name ends with `/` and
/// that passes to an origin answers its name without the slash with a 301
/// to the (escaped) name, arguments kept, before any regex location; not
/// when a location has exactly the requested name, and not for a static
/// location. The directory redirect escapes the URI the same way
/// (nginx-tests' http_location_auto.t, http_absolute_redirect.t).
#[test]
fn auto_redirect_to_the_slashed_location_and_escaped_directories() {
    let o = Origin::start(|r| Reply::ok(format!("origin {}", r.target())));
    let s = builder()
        .file("html/dir sp/index.html", "x")
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                server_name localhost;
                location /app/ { proxy_pass http://127.0.0.1:%O%; }
                location "/a sp/" { fastcgi_pass 127.0.0.1:9; }
                location /both/ { proxy_pass http://127.0.0.1:%O%; }
                location /both { return 200 "both\n"; }
                location /static/ { return 200 "static\n"; }
                location ~ ^/app$ { return 200 "regex\n"; }
                location / { }
            }"#
            .replace("%O%", &o.port.to_string())
            .as_str(),
        )
        .start();
    let p = s.port;
    let r = s.get("/app");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.must("Location"), format!("http://localhost:{p}/app/"));
    let r = s.get("/app?a=b");
    assert_eq!(r.must("Location"), format!("http://localhost:{p}/app/?a=b"));
    assert_eq!(s.get("/app/x").text(), "origin /app/x");
    let r = s.get("/a%20sp");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.must("Location"), format!("http://localhost:{p}/a%20sp/"));
    assert_eq!(s.get("/both").text(), "both\n");
    assert_eq!(s.get("/static").status, 404);
    let r = s.get("/dir%20sp?q=1");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.must("Location"), format!("http://localhost:{p}/dir%20sp/?q=1"));
}
