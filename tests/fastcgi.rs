//! FastCGI against a real php-fpm: each test starts its own php-fpm master
//! (`php-fpm8.2 -F -y CONF -p DIR`, `-R` as root) with one static pool of
//! two children on a unix socket in a temporary directory, then the server
//! with `fastcgi_pass unix:...` to it and Debian's `fastcgi_params` /
//! `fastcgi.conf` / `snippets/fastcgi-php.conf` (the copies in conf/).
//!
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx (its
//! own snippet, which needs `set`), so the expectations are nginx's; the
//! queue test is sluice's only (nginx open source has no `queue`).

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::fcgi_app::*;
use common::fpm::*;
use common::*;

/// The PHP scripts every test's document root has.
const INFO: &str = r#"<?php
header("Content-Type: text/plain");
$keys = ["QUERY_STRING", "REQUEST_METHOD", "CONTENT_TYPE", "CONTENT_LENGTH", "SCRIPT_NAME", "SCRIPT_FILENAME",
         "REQUEST_URI", "DOCUMENT_URI", "DOCUMENT_ROOT", "SERVER_PROTOCOL", "REQUEST_SCHEME", "GATEWAY_INTERFACE",
         "REMOTE_ADDR", "SERVER_ADDR", "SERVER_PORT", "SERVER_NAME", "REDIRECT_STATUS", "PATH_INFO", "HTTP_HOST",
         "HTTP_X_TEST", "HTTP_COOKIE", "HTTPS"];
foreach ($keys as $k) {
    if (array_key_exists($k, $_SERVER)) { echo "$k=", $_SERVER[$k], "\n"; }
}
foreach ($_GET as $k => $v) { echo "GET[$k]=$v\n"; }
foreach ($_POST as $k => $v) { echo "POST[$k]=$v\n"; }
$b = file_get_contents("php://input");
echo "BODY=", strlen($b), " ", md5($b), "\n";
"#;

const HEADERS: &str = r#"<?php
setcookie("a", "1");
setcookie("b", "2");
header("X-Custom: yes");
header("Cache-Control: no-store");
echo "headers";
"#;

const STATUS: &str = r#"<?php
http_response_code(404);
echo "nope";
"#;

const REDIRECT: &str = r#"<?php
header("Location: " . $_GET["to"]);
if (isset($_GET["code"])) { http_response_code((int)$_GET["code"]); }
echo "moved";
"#;

const BIG: &str = r#"<?php
$mb = (int)($_GET["mb"] ?? 20);
for ($i = 0; $i < $mb * 1024; $i++) { echo str_repeat(chr(97 + $i % 26), 1024); }
"#;

const STDERR: &str = r#"<?php
error_log("hello from php");
echo "ok";
"#;

const SLEEP: &str = r#"<?php
usleep((int)$_GET["ms"] * 1000);
echo "slept";
"#;

/// Records the order requests reach PHP in, then holds the child 200 ms.
const ORDER: &str = r#"<?php
$f = fopen(__DIR__ . "/../order.txt", "a");
flock($f, LOCK_EX);
fwrite($f, $_GET["i"] . "\n");
flock($f, LOCK_UN);
fclose($f);
usleep(200000);
echo "done ", $_GET["i"];
"#;

/// The params files and the PHP scripts.
fn with_conf_files(b: ServerBuilder) -> ServerBuilder {
    with_params(b)
        .file("html/info.php", INFO)
        .file("html/headers.php", HEADERS)
        .file("html/status.php", STATUS)
        .file("html/redirect.php", REDIRECT)
        .file("html/big.php", BIG)
        .file("html/stderr.php", STDERR)
        .file("html/sleep.php", SLEEP)
        .file("html/q/order.php", ORDER)
        .file("html/snip/info.php", INFO)
}

/// sluice (or nginx) in front of `fpm`, `extra` inside the server block.
fn server(fpm: &Fpm, extra: &str) -> TestServer {
    let http = format!(
        r#"
        client_max_body_size 64m;
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location ~ \.php$ {{
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
                fastcgi_pass unix:{sock};
                fastcgi_read_timeout 2s;
            }}
            location /snip/ {{
                location ~ [^/]\.php(/|$) {{
                    include snippets/fastcgi-php.conf;
                    fastcgi_pass unix:{sock};
                }}
            }}
            {extra}
        }}
        "#,
        sock = fpm.sock.display()
    );
    with_conf_files(builder().http(&http)).start()
}

fn get(port: u16, target: &str, extra: &str) -> Response {
    request(port, &format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n\r\n"))
}

/// The `KEY=value` lines of info.php's answer.
fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    body.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn md5_hex(data: &[u8]) -> String {
    use md5::{Digest, Md5};
    Md5::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn get_with_query_string_and_request_headers_reach_php() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let r = get(s.port, "/info.php?a=1&b=two%20words", "X-Test: hello\r\nCookie: c=1\r\n");
    assert_eq!(r.status, 200, "{}\n{}", r.head, s.error_log());
    let b = r.text();
    let root = format!("{}/html", s.prefix.display());
    assert_eq!(field(&b, "QUERY_STRING"), Some("a=1&b=two%20words"), "{b}");
    assert_eq!(field(&b, "REQUEST_METHOD"), Some("GET"));
    assert_eq!(field(&b, "SCRIPT_NAME"), Some("/info.php"));
    assert_eq!(field(&b, "SCRIPT_FILENAME"), Some(format!("{root}/info.php").as_str()));
    assert_eq!(field(&b, "DOCUMENT_ROOT"), Some(root.as_str()));
    assert_eq!(field(&b, "REQUEST_URI"), Some("/info.php?a=1&b=two%20words"));
    assert_eq!(field(&b, "DOCUMENT_URI"), Some("/info.php"));
    assert_eq!(field(&b, "SERVER_PROTOCOL"), Some("HTTP/1.1"));
    assert_eq!(field(&b, "REQUEST_SCHEME"), Some("http"));
    assert_eq!(field(&b, "GATEWAY_INTERFACE"), Some("CGI/1.1"));
    assert_eq!(field(&b, "REMOTE_ADDR"), Some("127.0.0.1"));
    assert_eq!(field(&b, "SERVER_ADDR"), Some("127.0.0.1"));
    assert_eq!(field(&b, "SERVER_PORT"), Some(s.port.to_string().as_str()));
    assert_eq!(field(&b, "SERVER_NAME"), Some("localhost"));
    assert_eq!(field(&b, "REDIRECT_STATUS"), Some("200"));
    assert_eq!(field(&b, "HTTP_HOST"), Some("localhost"));
    assert_eq!(field(&b, "HTTP_X_TEST"), Some("hello"));
    assert_eq!(field(&b, "HTTP_COOKIE"), Some("c=1"));
    assert_eq!(field(&b, "GET[b]"), Some("two words"));
    assert_eq!(field(&b, "HTTPS"), None, "if_not_empty leaves HTTPS out on plain HTTP");
    assert_eq!(field(&b, "CONTENT_LENGTH"), Some(""));
    assert_eq!(r.header("content-type"), Some("text/plain;charset=UTF-8"));
    // HEAD: the head alone, the connection still in order for the next.
    let h = request(s.port, "HEAD /info.php HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(h.status, 200);
    assert!(h.body.is_empty());
    // A script that is not there: php-fpm's own 404 ("File not found.").
    let m = get(s.port, "/missing.php", "");
    assert_eq!(m.status, 404, "{}", m.head);
    assert!(s.error_log().contains("Primary script unknown"), "{}", s.error_log());
}

#[test]
fn post_bodies_reach_php_buffered_and_streamed() {
    let fpm = Fpm::start();
    let s = server(
        &fpm,
        &format!(
            r#"location /streamed/ {{
                fastcgi_request_buffering off;
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root/info.php;
                fastcgi_pass unix:{};
            }}"#,
            fpm.sock.display()
        ),
    );
    let form = "x=1&y=two";
    let r = request(
        s.port,
        &format!(
            "POST /info.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{form}",
            form.len()
        ),
    );
    assert_eq!(r.status, 200, "{}", s.error_log());
    let b = r.text();
    assert_eq!(field(&b, "POST[y]"), Some("two"), "{b}");
    assert_eq!(field(&b, "CONTENT_LENGTH"), Some("9"));
    assert_eq!(field(&b, "CONTENT_TYPE"), Some("application/x-www-form-urlencoded"));

    let big = pseudo_random(10 << 20, 7);
    let want = format!("{} {}", big.len(), md5_hex(&big));
    for (path, chunked) in [("/info.php", false), ("/streamed/x", false), ("/streamed/y", true), ("/info.php", true)] {
        let mut c = Conn::connect(s.port);
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n"
        );
        if chunked {
            head.push_str("Transfer-Encoding: chunked\r\n\r\n");
        } else {
            head.push_str(&format!("Content-Length: {}\r\n\r\n", big.len()));
        }
        c.send(head.as_bytes());
        for piece in big.chunks(256 * 1024) {
            if chunked {
                c.send(format!("{:x}\r\n", piece.len()).as_bytes());
                c.send(piece);
                c.send(b"\r\n");
            } else {
                c.send(piece);
            }
        }
        if chunked {
            c.send(b"0\r\n\r\n");
        }
        let r = c.read_response();
        assert_eq!(r.status, 200, "{path} chunked={chunked}: {}\n{}", r.head, s.error_log());
        let b = r.text();
        if chunked && path.starts_with("/streamed/") {
            // Streamed as it comes, so without CONTENT_LENGTH, which PHP
            // then reads as no body at all (as behind nginx).
            assert_eq!(field(&b, "CONTENT_LENGTH"), Some(""), "{b}");
            assert_eq!(field(&b, "BODY"), Some("0 d41d8cd98f00b204e9800998ecf8427e"), "{b}");
            continue;
        }
        assert_eq!(field(&b, "BODY"), Some(want.as_str()), "{path} chunked={chunked}");
        if chunked && path == "/info.php" {
            // A chunked body read whole gets its length, as nginx sets it.
            assert_eq!(field(&b, "CONTENT_LENGTH"), Some((10 << 20).to_string().as_str()), "{b}");
        }
    }
}

#[test]
fn path_info_is_split_by_the_debian_snippet() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let r = get(s.port, "/snip/info.php/extra/path?q=1", "");
    assert_eq!(r.status, 200, "{}\n{}", r.head, s.error_log());
    let b = r.text();
    assert_eq!(field(&b, "SCRIPT_NAME"), Some("/snip/info.php"), "{b}");
    assert_eq!(field(&b, "PATH_INFO"), Some("/extra/path"), "{b}");
    assert_eq!(field(&b, "SCRIPT_FILENAME"), Some(format!("{}/html/snip/info.php", s.prefix.display()).as_str()));
    assert_eq!(field(&b, "QUERY_STRING"), Some("q=1"));
    // try_files $fastcgi_script_name =404: a missing script never reaches PHP.
    assert_eq!(get(s.port, "/snip/missing.php/x", "").status, 404);
    let plain = get(s.port, "/snip/info.php", "");
    assert_eq!(field(&plain.text(), "PATH_INFO"), Some(""));
}

#[test]
fn response_headers_status_and_redirects() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let r = get(s.port, "/headers.php", "");
    assert_eq!(r.status, 200, "{}", s.error_log());
    assert_eq!(r.headers_named("set-cookie"), vec!["a=1", "b=2"], "{}", r.head);
    assert_eq!(r.header("x-custom"), Some("yes"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    assert!(r.header("status").is_none());
    assert_eq!(r.text(), "headers");

    let r = get(s.port, "/status.php", "");
    assert_eq!((r.status, r.text().as_str()), (404, "nope"), "{}", r.head);

    // PHP answers a Location with 302 itself; nginx passes it on as the
    // script wrote it, a relative one too.
    let r = get(s.port, "/redirect.php?to=/elsewhere", "");
    assert_eq!(r.status, 302, "{}", r.head);
    assert_eq!(r.header("location"), Some("/elsewhere"));
    let r = get(s.port, "/redirect.php?to=http://example.com/x&code=301", "");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.header("location"), Some("http://example.com/x"));
    // A Location with status 200 set back by the script: no Status line
    // reaches the server, which makes it nginx's 302.
    let r = get(s.port, "/redirect.php?to=/local&code=200", "");
    assert_eq!(r.status, 302, "{}", r.head);
    assert_eq!(r.header("location"), Some("/local"));
}

/// Peak resident memory of a process, in KiB (VmHWM).
fn peak_rss_kib(pid: u32) -> u64 {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_large_response_streams_with_bounded_memory() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let before = peak_rss_kib(s.serving_pid());
    // Read slowly at first so the server has to hold back (backpressure).
    let mut c = Conn::connect(s.port);
    c.send(b"GET /big.php?mb=20 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    std::thread::sleep(Duration::from_millis(500));
    let raw = c.read_to_close();
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("transfer-encoding: chunked"), "{head}");
    // De-chunk and check every byte.
    let mut body = Vec::with_capacity(21 << 20);
    let mut rest = &raw[head_end..];
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let n = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16).unwrap();
        rest = &rest[eol + 2..];
        if n == 0 {
            break;
        }
        body.extend_from_slice(&rest[..n]);
        rest = &rest[n + 2..];
    }
    assert_eq!(body.len(), 20 << 20);
    for (i, block) in body.chunks(1024).enumerate() {
        assert!(block.iter().all(|&b| b == b'a' + (i % 26) as u8), "block {i}");
    }
    if prog() == "sluice" {
        let grown = peak_rss_kib(s.serving_pid()).saturating_sub(before);
        // The proxy's read-ahead (8 x 4k buffers, then a temporary file)
        // bounds what a response holds in memory: far below its 20 MB.
        assert!(grown < 8 * 1024, "peak RSS grew by {grown} KiB for a 20 MB response");
    }
}

#[test]
fn stderr_goes_to_the_error_log_as_nginx_writes_it() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let r = get(s.port, "/stderr.php", "");
    assert_eq!((r.status, r.text().as_str()), (200, "ok"));
    let log = wait_contains(&s.path("logs/error.log"), "FastCGI sent in stderr", LOG_WAIT);
    let line = line_with(&log, "FastCGI sent in stderr");
    let want = format!(
        "[error] {{pid}}: *{{n}} FastCGI sent in stderr: \"PHP message: hello from php\" while reading response header \
         from upstream, client: 127.0.0.1, server: localhost, request: \"GET /stderr.php HTTP/1.1\", upstream: \
         \"fastcgi://unix:{}:\", host: \"localhost\"",
        fpm.sock.display()
    );
    let tail = want.split("FastCGI").nth(1).unwrap();
    assert!(line.contains(tail), "got:  {line}\nwant: ...{tail}");
    assert!(line.contains("[error]"), "{line}");
}

#[test]
fn php_fpm_stopped_is_a_502_with_nginx_log_line() {
    let mut fpm = Fpm::start();
    let s = server(&fpm, "");
    assert_eq!(get(s.port, "/status.php", "").status, 404);
    fpm.stop();
    let r = get(s.port, "/info.php", "");
    assert_eq!(r.status, 502, "{}", r.head);
    let log = wait_contains(&s.path("logs/error.log"), "connect() to unix:", LOG_WAIT);
    let line = line_with(&log, "connect() to unix:");
    let want = format!(
        "connect() to unix:{s} failed (2: No such file or directory) while connecting to upstream, client: \
         127.0.0.1, server: localhost, request: \"GET /info.php HTTP/1.1\", upstream: \"fastcgi://unix:{s}:\", host: \
         \"localhost\"",
        s = fpm.sock.display()
    );
    assert!(line.contains(&want), "got:  {line}\nwant: {want}");
    assert!(line.contains("[error]") || line.contains("[crit]"), "{line}");
}

#[test]
fn a_script_past_fastcgi_read_timeout_is_a_504() {
    let fpm = Fpm::start();
    let s = server(&fpm, "");
    let t = Instant::now();
    let r = get(s.port, "/sleep.php?ms=4000", "");
    assert_eq!(r.status, 504, "{}", r.head);
    assert!(t.elapsed() < Duration::from_millis(3800), "answered after {:?}", t.elapsed());
    let log = wait_contains(&s.path("logs/error.log"), "upstream timed out", LOG_WAIT);
    let line = line_with(&log, "upstream timed out");
    assert!(
        line.contains(
            "upstream timed out (110: Connection timed out) while reading response header from upstream, client: \
             127.0.0.1"
        ),
        "{line}"
    );
    // nginx names the socket without its `:` here: the line is written
    // after the peer was let go.
    assert!(line.contains(&format!("upstream: \"fastcgi://unix:{}\"", fpm.sock.display())), "{line}");
}

#[test]
fn keep_conn_reuses_connections_to_php_fpm() {
    let fpm = Fpm::start();
    let sock = fpm.sock.display().to_string();
    let http = format!(
        r#"
        upstream php {{ server unix:{sock}; keepalive 4; }}
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location ~ \.php$ {{
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
                fastcgi_keep_conn on;
                fastcgi_pass php;
            }}
        }}
        "#
    );
    let s = with_conf_files(builder().http(&http)).start();
    let mut c = Conn::connect(s.port);
    for i in 0..20 {
        let target = if i % 2 == 0 { "/headers.php" } else { "/big.php?mb=1" };
        c.send(format!("GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
        let r = c.read_response();
        assert_eq!(r.status, 200, "request {i}: {}\n{}", r.head, s.error_log());
        let want = if i % 2 == 0 { 7 } else { 1 << 20 };
        assert_eq!(r.body.len(), want, "request {i}");
    }
    // With FCGI_KEEP_CONN the connections stay open: php-fpm's two
    // children were all it took, each connection used many times.
    let open = count_connections(&fpm.sock);
    assert!(open >= 1, "no connection kept to php-fpm");
    assert!(!s.error_log().contains("[error]"), "{}", s.error_log());
}

/// Established connections to a unix socket (from /proc/net/unix).
fn count_connections(sock: &Path) -> usize {
    let text = fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let name = sock.display().to_string();
    // The listening socket has state 01 (LISTEN flag 00010000); accepted
    // ones share the path with state 03 (connected).
    text.lines().filter(|l| l.ends_with(&name) && l.split_whitespace().nth(5) == Some("03")).count()
}

#[test]
fn queued_requests_are_served_in_arrival_order() {
    if prog() != "sluice" {
        return;
    }
    let fpm = Fpm::start();
    let sock = fpm.sock.display().to_string();
    let http = format!(
        r#"
        upstream php {{ server unix:{sock} max_conns=2; queue 100 timeout=30s; }}
        log_format arrival "$arg_i $msec $request_time $upstream_connect_time";
        access_log logs/access.log arrival;
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location ~ \.php$ {{
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
                fastcgi_pass php;
            }}
        }}
        "#
    );
    let s = with_conf_files(builder().http(&http)).start();
    let port = s.port;
    let t = Instant::now();
    let mut threads = Vec::new();
    for i in 0..20 {
        threads.push(std::thread::spawn(move || {
            let r = request(
                port,
                &format!("GET /q/order.php?i={i} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"),
            );
            (r.status, r.text())
        }));
        // Arrivals 15 ms apart: the order is the clients'.
        std::thread::sleep(Duration::from_millis(15));
    }
    for (i, t) in threads.into_iter().enumerate() {
        let (status, text) = t.join().expect("client");
        assert_eq!((status, text.as_str()), (200, format!("done {i}").as_str()), "{}", s.error_log());
    }
    // 20 requests of 200 ms, two at a time: about 2 s.
    assert!(t.elapsed() >= Duration::from_millis(1800), "{:?}", t.elapsed());
    let order: Vec<usize> =
        fs::read_to_string(s.path("html/order.txt")).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    // Arrival as the server saw it (a loaded machine may reorder the
    // clients' sends): the access log's start times, $msec - $request_time.
    let lines = wait_lines(&s.path("logs/access.log"), 20, LOG_WAIT);
    let mut arrived: Vec<(u64, usize)> = lines
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let ms = |v: &str| (v.parse::<f64>().unwrap() * 1000.0).round() as u64;
            (ms(f[1]) - ms(f[2]), f[0].parse().unwrap())
        })
        .collect();
    arrived.sort();
    let arrival: Vec<usize> = arrived.iter().map(|(_, i)| *i).collect();
    // Two run at once (max_conns=2): the two let in together may reach PHP
    // in either order, so each request may move by one place, no more.
    for (pos, i) in order.iter().enumerate() {
        let want = arrival.iter().position(|a| a == i).expect("logged");
        assert!(
            pos.abs_diff(want) <= 1,
            "request {i}: PHP saw it {pos}th, it arrived {want}th\nPHP order {order:?}\narrival {arrival:?}\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn malformed_or_truncated_records_are_a_502_or_a_cut_response_never_a_whole_one() {
    let cases: Vec<Vec<u8>> = vec![
        // 0: another protocol version.
        [vec![2, 6, 0, 1, 0, 5, 0, 0], b"hello".to_vec()].concat(),
        // 1: END_REQUEST before any header.
        end_request(),
        // 2: the body cut off: no END_REQUEST.
        rec(6, b"Content-Type: text/plain\r\n\r\nhello"),
        // 3: a Location without Status.
        [rec(6, b"Location: /there\r\n\r\n"), end_request()].concat(),
        // 4: an invalid Status.
        [rec(6, b"Status: abc\r\n\r\n"), end_request()].concat(),
        // 5: the head cut off.
        rec(6, b"Content-Type: text/pl"),
        // 6: an unexpected record type.
        [rec(5, b"x"), end_request()].concat(),
        // 7: a well-formed answer in tiny records, with stderr between.
        [
            rec(6, b"Status: 201 Created\r\nX-A: 1\r\n"),
            rec(7, b"warned\n"),
            rec(6, b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n"),
            rec(6, b"bo"),
            rec(6, b"dy"),
            rec(6, b""),
            end_request(),
        ]
        .concat(),
        [rec(6, b"X-A: 1\r\n"), rec(6, b""), end_request()].concat(),
        // 9: stderr that fastcgi_catch_stderr catches.
        [rec(7, b"boom: fatal\n"), rec(6, b"Content-Type: text/plain\r\n\r\nfine"), end_request()].concat(),
        // 10: a 404 that fastcgi_intercept_errors hands to error_page.
        [rec(6, b"Status: 404\r\n\r\nscript's own page"), end_request()].concat(),
    ];
    let app = raw_app(move |n| cases[n % cases.len()].clone());
    let s = with_conf_files(builder().http(&format!(
        r#"
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location / {{
                include fastcgi_params;
                fastcgi_pass 127.0.0.1:{app};
            }}
            location /catch/ {{
                fastcgi_catch_stderr "boom";
                fastcgi_pass 127.0.0.1:{app};
            }}
            location /intercept/ {{
                fastcgi_intercept_errors on;
                error_page 404 /err.html;
                fastcgi_pass 127.0.0.1:{app};
            }}
            location = /err.html {{ }}
        }}
        "#
    )))
    .file("html/err.html", "our error page\n")
    .start();
    let raw_get = |path: &str| {
        request_to_close(
            s.port,
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
        )
    };
    let status = |raw: &[u8]| String::from_utf8_lossy(&raw[..12.min(raw.len())]).into_owned();
    let log_has = |what: &str| {
        let log = wait_contains(&s.path("logs/error.log"), what, LOG_WAIT);
        line_with(&log, what).to_string()
    };
    let r = raw_get("/0");
    assert_eq!(status(&r), "HTTP/1.1 502");
    let l = log_has("upstream sent unsupported FastCGI protocol version: 2");
    assert!(l.contains("while reading response header from upstream"), "{l}");

    assert_eq!(status(&raw_get("/1")), "HTTP/1.1 502");
    log_has("upstream sent unexpected FastCGI record: 3 while reading response header from upstream");

    let r = raw_get("/2");
    let text = String::from_utf8_lossy(&r).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("hello"), "{text}");
    if prog() == "nginx" {
        // nginx 1.22 ends the chunked response as if it were whole, and
        // logs nothing; sluice never makes a cut body look complete.
        assert!(text.ends_with("0\r\n\r\n"), "{text:?}");
    } else {
        assert!(!text.ends_with("0\r\n\r\n"), "a cut body must not end like a whole one: {text:?}");
        log_has("upstream prematurely closed connection while reading upstream");
    }

    let r = request(s.port, "GET /3 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.header("location")), (302, Some("/there")), "{}", r.head);

    assert_eq!(status(&raw_get("/4")), "HTTP/1.1 502");
    log_has("upstream sent invalid status \"abc\" while reading response header from upstream");

    assert_eq!(status(&raw_get("/5")), "HTTP/1.1 502");
    log_has("upstream prematurely closed connection while reading response header from upstream");

    assert_eq!(status(&raw_get("/6")), "HTTP/1.1 502");
    log_has("upstream sent invalid FastCGI record type: 5");

    let r = request(s.port, "GET /7 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (201, "body"), "{}", r.head);
    assert_eq!(r.headers_named("set-cookie"), vec!["a=1", "b=2"]);
    assert_eq!(r.header("x-a"), Some("1"));
    log_has("FastCGI sent in stderr: \"warned\" while reading response header from upstream");

    // STDOUT closed before the head ended.
    assert_eq!(status(&raw_get("/8")), "HTTP/1.1 502");
    log_has("upstream prematurely closed FastCGI stdout while reading response header from upstream");

    assert_eq!(status(&raw_get("/catch/9")), "HTTP/1.1 502");
    log_has("FastCGI sent in stderr: \"boom: fatal\" while reading response header from upstream");

    let r = request(s.port, "GET /intercept/10 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!((r.status, r.text().as_str()), (404, "our error page\n"), "{}", r.head);
}

#[test]
fn fastcgi_pass_with_variables_and_an_upstream_name() {
    let fpm = Fpm::start();
    let sock = fpm.sock.display().to_string();
    let http = format!(
        r#"
        upstream php {{ server unix:{sock}; }}
        map $arg_via $fcgi {{ default unix:{sock}; up php; nowhere php.example:9000; noport php.example; }}
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location ~ \.php$ {{
                include fastcgi.conf;
                fastcgi_pass $fcgi;
            }}
        }}
        "#
    );
    let s = with_conf_files(builder().http(&http)).start();
    for via in ["", "up"] {
        let r = get(s.port, &format!("/info.php?via={via}"), "");
        assert_eq!(r.status, 200, "via={via}: {}\n{}", r.head, s.error_log());
        assert_eq!(field(&r.text(), "SCRIPT_NAME"), Some("/info.php"));
    }
    let r = get(s.port, "/info.php?via=nowhere", "");
    assert_eq!(r.status, 502);
    wait_contains(&s.path("logs/error.log"), "no resolver defined to resolve php.example", LOG_WAIT);
    // A name without a port is no address at all: nginx's 500.
    let r = get(s.port, "/info.php?via=noport", "");
    assert_eq!(r.status, 500);
    wait_contains(&s.path("logs/error.log"), "no port in upstream \"php.example\"", LOG_WAIT);
}

#[test]
fn fastcgi_pass_request_body_off_leaves_stdin_empty() {
    let fpm = Fpm::start();
    let s = server(
        &fpm,
        &format!(
            r#"location /nobody/ {{
                fastcgi_pass_request_body off;
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root/info.php;
                fastcgi_pass unix:{};
            }}"#,
            fpm.sock.display()
        ),
    );
    let send = |path: &str| {
        request(
            s.port,
            &format!("POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"),
        )
    };
    let r = send("/info.php");
    assert_eq!(field(&r.text(), "BODY"), Some(format!("5 {}", md5_hex(b"hello")).as_str()));
    let r = send("/nobody/x");
    assert_eq!(r.status, 200, "{}", r.head);
    let b = r.text();
    assert_eq!(field(&b, "BODY"), Some(format!("0 {}", md5_hex(b"")).as_str()), "{b}");
    assert_eq!(field(&b, "CONTENT_LENGTH"), Some("5"));
}

#[test]
fn x_accel_redirect_from_php_serves_the_protected_file() {
    let fpm = Fpm::start();
    let s = with_params(builder().http(&format!(
        r#"server {{
            listen 127.0.0.1:{{port}};
            root {{prefix}}/html;
            location /protected/ {{ internal; }}
            location ~ \.php$ {{
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
                fastcgi_pass unix:{};
            }}
        }}"#,
        fpm.sock.display()
    )))
    .file(
        "html/dl.php",
        "<?php header('X-Accel-Redirect: /protected/report.txt'); header('Content-Disposition: attachment'); echo 'php body';",
    )
    .file("html/protected/report.txt", "the report\n")
    .start();
    let r = get(s.port, "/dl.php", "");
    assert_eq!((r.status, r.text().as_str()), (200, "the report\n"), "{}\n{}", r.head, s.error_log());
    assert_eq!(r.header("Content-Disposition"), Some("attachment"));
    assert_eq!(r.header("X-Accel-Redirect"), None);
    assert_eq!(get(s.port, "/protected/report.txt", "").status, 404);
}
