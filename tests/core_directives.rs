//! nginx core-module directives that shape requests and redirects
//! (`internal`, `recursive_error_pages`, `absolute_redirect`,
//! `port_in_redirect`, `server_name_in_redirect`, `max_ranges`,
//! `chunked_transfer_encoding`, `underscores_in_headers`,
//! `ignore_invalid_headers`), the proxy's request-shaping directives
//! (`proxy_method`, `proxy_set_body`, `proxy_pass_request_headers`,
//! `proxy_pass_request_body`), the tuning directives sluice accepts, and
//! `listen`'s socket options as the kernel reports them (`ss`).
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::origin::*;
use common::*;

fn raw(port: u16, head: &str) -> Response {
    request(port, &format!("{head}Connection: close\r\n\r\n"))
}

#[test]
fn internal_locations_answer_only_internal_requests() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                server_name localhost;
                root {prefix}/html;
                error_page 404 /in/404.html;
                location /in/ { internal; }
                location = /go { rewrite ^ /in/page.html last; }
                location = /tf { try_files /nothing /in/page.html; }
                location = /ep { error_page 418 = /in/page.html; return 418; }
            }"#,
        )
        .file("html/in/page.html", "internal page\n")
        .file("html/in/404.html", "custom not found\n")
        .start();
    let r = s.get("/in/page.html");
    assert_eq!(r.status, 404, "{}", r.head);
    // The error page is itself internal: an internal redirect may use it.
    assert_eq!(r.text(), "custom not found\n");
    for path in ["/go", "/tf", "/ep"] {
        let r = s.get(path);
        assert_eq!((r.status, r.text().as_str()), (200, "internal page\n"), "{path}: {}", r.head);
    }
}

#[test]
fn recursive_error_pages_follow_an_error_page_that_fails() {
    let conf = |recursive: &str| {
        format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                {recursive}
                location = /a {{ error_page 404 = /b; return 404; }}
                location = /b {{ error_page 404 = /c; return 404; }}
                location = /c {{ return 200 "from c\n"; }}
            }}"#
        )
    };
    let s = builder().http(&conf("")).start();
    let r = s.get("/a");
    assert_eq!(r.status, 404, "off: /b's 404 is sent as it is");
    assert!(r.text().contains("404 Not Found"), "{}", r.text());
    drop(s);
    let s = builder().http(&conf("recursive_error_pages on;")).start();
    let r = s.get("/a");
    assert_eq!((r.status, r.text().as_str()), (200, "from c\n"));
}

#[test]
fn redirect_locations_as_absolute_redirect_and_friends_say() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                server_name example.test;
                root {prefix}/html;
                location = /plain { return 301 /to; }
                location = /rel { absolute_redirect off; return 302 /to; }
                location = /noport { port_in_redirect off; return 302 /to; }
                location = /named { server_name_in_redirect on; return 302 /to; }
                location /off/ { absolute_redirect off; }
            }"#,
        )
        .file("html/off/dir/index.html", "x")
        .file("html/dir/index.html", "x")
        .start();
    let loc = |path: &str| {
        let r = raw(s.port, &format!("GET {path} HTTP/1.1\r\nHost: h.test\r\n"));
        r.header("Location").unwrap_or("-").to_string()
    };
    let port = s.port;
    assert_eq!(loc("/plain"), format!("http://h.test:{port}/to"));
    assert_eq!(loc("/rel"), "/to");
    assert_eq!(loc("/noport"), "http://h.test/to");
    assert_eq!(loc("/named"), format!("http://example.test:{port}/to"));
    // The directory redirect too.
    assert_eq!(loc("/dir"), format!("http://h.test:{port}/dir/"));
    assert_eq!(loc("/off/dir"), "/off/dir/");
}

#[test]
fn max_ranges_and_chunked_transfer_encoding() {
    let o =
        Origin::start(|_| Reply::raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location /one/ {{ max_ranges 1; }}
                location /none/ {{ max_ranges 0; }}
                location /up/ {{ proxy_pass http://127.0.0.1:{p}; }}
                location /close/ {{ chunked_transfer_encoding off; proxy_pass http://127.0.0.1:{p}; }}
            }}"#,
            p = o.port
        ))
        .file("html/one/f.txt", "0123456789")
        .file("html/none/f.txt", "0123456789")
        .start();
    let ranged =
        |path: &str, range: &str| raw(s.port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nRange: {range}\r\n"));
    let r = ranged("/one/f.txt", "bytes=0-1");
    assert_eq!((r.status, r.text().as_str()), (206, "01"));
    // More ranges than allowed: the whole file.
    let r = ranged("/one/f.txt", "bytes=0-1,4-5");
    assert_eq!((r.status, r.body.len()), (200, 10), "{}", r.head);
    let r = ranged("/none/f.txt", "bytes=0-1");
    assert_eq!((r.status, r.body.len()), (200, 10), "{}", r.head);
    assert_eq!(r.header("Accept-Ranges"), None, "max_ranges 0 takes Accept-Ranges away");

    let r = raw(s.port, "GET /up/ HTTP/1.1\r\nHost: x\r\n");
    assert_eq!((r.header("Transfer-Encoding"), r.text().as_str()), (Some("chunked"), "hello"));
    let r = raw(s.port, "GET /close/ HTTP/1.1\r\nHost: x\r\n");
    assert_eq!((r.status, r.header("Transfer-Encoding"), r.text().as_str()), (200, None, "hello"), "{}", r.head);
    assert_eq!(r.header("Connection"), Some("close"));
}

#[test]
fn header_names_with_underscores_or_odd_characters() {
    let o = Origin::start(|_| Reply::ok("ok"));
    let conf = |extra: &str| {
        format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                {extra}
                location / {{ proxy_pass http://127.0.0.1:{p}; }}
            }}"#,
            p = o.port
        )
    };
    let send = |s: &TestServer| {
        let r = raw(s.port, "GET / HTTP/1.1\r\nHost: x\r\nX_Under: 1\r\nX.Dot: 2\r\nX-Fine: 3\r\n");
        assert_eq!(r.status, 200, "{}", r.head);
        let req = o.requests().pop().expect("the origin got the request");
        (req.header("X_Under").is_some(), req.header("X.Dot").is_some(), req.header("X-Fine").is_some())
    };
    let s = builder().http(&conf("")).start();
    assert_eq!(send(&s), (false, false, true), "nginx ignores invalid names by default");
    drop(s);
    let s = builder().http(&conf("underscores_in_headers on;")).start();
    assert_eq!(send(&s), (true, false, true));
    drop(s);
    let s = builder().http(&conf("ignore_invalid_headers off;")).start();
    assert_eq!(send(&s), (true, true, true));
}

#[test]
fn proxy_method_body_and_headers_directives() {
    let o = Origin::start(|_| Reply::ok("ok"));
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                location /m/ {{ proxy_method PATCH; proxy_pass http://127.0.0.1:{p}; }}
                location /b/ {{ proxy_set_body "user=$arg_u"; proxy_pass http://127.0.0.1:{p}; }}
                location /nob/ {{
                    proxy_pass_request_body off;
                    # nginx still sends the client's Content-Length otherwise
                    # (sluice does not), so configs clear it.
                    proxy_set_header Content-Length "";
                    proxy_pass http://127.0.0.1:{p};
                }}
                location /noh/ {{ proxy_pass_request_headers off; proxy_set_header X-Kept yes; proxy_pass http://127.0.0.1:{p}; }}
            }}"#,
            p = o.port
        ))
        .start();
    let post = |path: &str| {
        let r = request(
            s.port,
            &format!(
                "POST {path} HTTP/1.1\r\nHost: x\r\nX-Test: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
            ),
        );
        assert_eq!(r.status, 200, "{}", r.head);
        o.requests().pop().expect("the origin got it")
    };
    let r = post("/m/");
    assert_eq!((r.method(), r.body.as_slice()), ("PATCH", &b"hello"[..]));
    let r = post("/b/?u=ann");
    assert_eq!((r.method(), r.body.as_slice(), r.header("Content-Length")), ("POST", &b"user=ann"[..], Some("8")));
    let r = post("/nob/");
    assert_eq!((r.body.len(), r.header("X-Test")), (0, Some("t")), "{}", r.head);
    let r = post("/noh/");
    assert_eq!((r.header("X-Test"), r.header("X-Kept"), r.body.as_slice()), (None, Some("yes"), &b"hello"[..]));
}

#[test]
fn tuning_directives_are_accepted_and_checked() {
    let t = builder()
        .http(
            r#"
            variables_hash_max_size 2048; variables_hash_bucket_size 128;
            map_hash_max_size 2048; map_hash_bucket_size 128;
            connection_pool_size 512; request_pool_size 4k;
            open_log_file_cache max=1000 inactive=20s valid=1m min_uses=2;
            server {
                listen 127.0.0.1:{port};
                lingering_close on; lingering_time 30s; lingering_timeout 5s;
                reset_timedout_connection on; sendfile_max_chunk 512k;
                aio threads; directio 4m; directio_alignment 512; read_ahead 0; send_lowat 0;
                keepalive_disable msie6 safari; msie_padding on; msie_refresh off; log_subrequest off;
                client_body_in_single_buffer off; client_body_in_file_only off;
                subrequest_output_buffer_size 8k;
                proxy_headers_hash_max_size 1024; proxy_headers_hash_bucket_size 128;
                proxy_socket_keepalive on;
                location / { return 204; }
            }"#,
        )
        .prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    drop(t);
    for (bad, why) in [
        ("lingering_close sometimes;", "invalid value \"sometimes\""),
        ("lingering_timeout soon;", "\"lingering_timeout\" directive invalid value"),
        ("sendfile_max_chunk lots;", "\"sendfile_max_chunk\" directive invalid value"),
        ("keepalive_disable opera;", "invalid value \"opera\""),
    ] {
        assert_refused(&format!("server {{ listen 127.0.0.1:{{port}}; {bad} }}"), why);
    }
}

#[test]
fn merge_slashes_off_keeps_empty_segments() {
    let s = builder()
        .ports(2)
        .http(
            r#"server {
                listen 127.0.0.1:{port0};
                location / { return 200 "$uri\n"; }
            }
            server {
                listen 127.0.0.1:{port1};
                merge_slashes off;
                location = /a//b { return 200 "exact $uri\n"; }
                location / { return 200 "$uri\n"; }
            }"#,
        )
        .start();
    let uri = |port: u16, path: &str| raw(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n")).text();
    assert_eq!(uri(s.ports[0], "//a//b/"), "/a/b/\n");
    assert_eq!(uri(s.ports[1], "//a//b/"), "//a//b/\n");
    assert_eq!(uri(s.ports[1], "/a//b"), "exact /a//b\n");
    assert_eq!(uri(s.ports[1], "/x/./y//z"), "/x/y//z\n");
    assert_eq!(uri(s.ports[1], "/x//../y"), "/x/y\n");
    assert_eq!(uri(s.ports[0], "/x//../y"), "/y\n");
}

/// `listen`'s socket options reach the connections the server accepts, as
/// the kernel reports them for the server's side (`ss`): the receive
/// buffer (doubled by the kernel) and the keepalive timer.
#[test]
fn listen_socket_options_reach_accepted_connections() {
    let s = builder()
        .http(
            "server { listen 127.0.0.1:{port} rcvbuf=96k so_keepalive=30m::7 fastopen=16; location / { return 204; } }",
        )
        .start();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    // Half a request: accepted (data arrived) and held open.
    std::io::Write::write_all(&mut c, b"GET / HTTP/1.1\r\n").expect("write");
    let filter = format!("( sport = :{} )", s.port);
    let mut out = String::new();
    for _ in 0..50 {
        let o = std::process::Command::new("ss")
            .args(["-tnmoiH", "state", "established", &filter])
            .output()
            .expect("run ss (iproute2)");
        out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.contains("timer:") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(out.contains(&format!(",rb{},", 2 * 96 * 1024)), "no rcvbuf=96k on the accepted socket: {out}");
    // The first keepalive probe is due 30 minutes after the last packet.
    assert!(
        out.contains("timer:(keepalive,29min") || out.contains("timer:(keepalive,30min"),
        "no 30m keepalive timer on the accepted socket: {out}"
    );
    drop(c);
}

/// `expires @time`: Expires is the next time the server's local clock
/// shows that time of day, and max-age counts the seconds until then.
#[test]
fn expires_at_a_time_of_day() {
    let s = builder()
        .http(
            "map $arg_e $e { default off; a @23h59m59s; }\n\
             server { listen 127.0.0.1:{port}; location / { expires @10h30m; return 200 x; }\n\
                      location /v/ { expires $e; return 200 v; } }",
        )
        .start();
    for (path, secs) in [("/", 10 * 3600 + 30 * 60), ("/v/?e=a", 86399)] {
        let r = raw(s.port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n"));
        assert_eq!(r.status, 200);
        let expires = chrono::DateTime::parse_from_rfc2822(r.must("Expires")).expect("Expires is a date").timestamp();
        let date = chrono::DateTime::parse_from_rfc2822(r.must("Date")).expect("Date").timestamp();
        let max_age: i64 = r.must("Cache-Control").strip_prefix("max-age=").expect("max-age").parse().expect("n");
        assert!((expires - date - max_age).abs() <= 1, "{path}: {}", r.head);
        assert!(max_age > 0 && max_age <= 86400 + 3600, "{path}: {}", r.head);
        use chrono::Timelike;
        let local = chrono::DateTime::from_timestamp(expires, 0).expect("ts").with_timezone(&chrono::Local);
        assert_eq!(local.num_seconds_from_midnight() as i64, secs, "{path}: {}", r.head);
    }
    let r = raw(s.port, "GET /v/ HTTP/1.1\r\nHost: x\r\n");
    assert!(r.header("Expires").is_none(), "{}", r.head);
}
