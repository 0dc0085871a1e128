//! Access and error logs as an operator reads them: the combined format,
//! custom formats and escaping, `access_log off`, buffer=/flush=, reopening
//! after rotation, and error_log level filtering. Expected lines were
//! checked against nginx 1.22.1.

mod common;

use std::fs;
use std::time::Duration;

use common::*;

/// Splits a combined line into (time_local, the rest with the time blanked).
fn split_time(line: &str) -> (String, String) {
    let a = line.find('[').unwrap_or_else(|| panic!("no [ in {line}"));
    let b = line[a..].find(']').unwrap_or_else(|| panic!("no ] in {line}")) + a;
    (line[a..=b].to_string(), format!("{}[TIME]{}", &line[..a], &line[b + 1..]))
}

#[test]
fn combined_format_line() {
    let mut s = builder()
        .http("server { listen 127.0.0.1:{port}; root html; access_log logs/access.log combined; }")
        .file("html/a.txt", "0123456789")
        .start();
    let r = s.get_with("/a.txt?x=1", &["User-Agent: test-agent/1.0", "Referer: http://ref.test/p"]);
    assert_eq!(r.status, 200);
    let r = s.get_with("/missing", &["User-Agent: ua \"quoted\""]);
    assert_eq!(r.status, 404);
    let body404 = r.body.len();
    // no User-Agent / Referer at all
    let r = request(s.port, "GET /a.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    // Basic auth user shows in $remote_user.
    let r = s.get_with("/a.txt", &["Authorization: Basic dXNlcjE6cHc="]);
    assert_eq!(r.status, 200);
    assert!(s.quit().success());

    let log = s.access_log();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4, "{log}");
    let want = [
        "127.0.0.1 - - [TIME] \"GET /a.txt?x=1 HTTP/1.1\" 200 10 \"http://ref.test/p\" \"test-agent/1.0\"".to_string(),
        format!("127.0.0.1 - - [TIME] \"GET /missing HTTP/1.1\" 404 {body404} \"-\" \"ua \\x22quoted\\x22\""),
        "127.0.0.1 - - [TIME] \"GET /a.txt HTTP/1.0\" 200 10 \"-\" \"-\"".to_string(),
        "127.0.0.1 - user1 [TIME] \"GET /a.txt HTTP/1.1\" 200 10 \"-\" \"-\"".to_string(),
    ];
    for (line, want) in lines.iter().zip(want) {
        let (time, rest) = split_time(line);
        assert_eq!(rest, want);
        let t = parse_time_local(&time).unwrap_or_else(|| panic!("bad $time_local {time:?}"));
        assert!((t - now_secs()).abs() < 120, "time {time} is not now");
    }
}

#[test]
fn default_access_log_is_combined_in_logs_access_log() {
    // No access_log directive at all: nginx logs to logs/access.log in the
    // combined format.
    let mut s = builder()
        .whole(
            "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}\n\
             http { server { listen 127.0.0.1:{port}; return 200 ok; } }\n",
        )
        .start();
    let r = s.get_with("/x", &["User-Agent: ua"]);
    assert_eq!(r.status, 200);
    assert!(s.quit().success());
    let log = s.access_log();
    let (_, rest) = split_time(log.lines().next().unwrap_or_else(|| panic!("empty access log")));
    assert_eq!(rest, "127.0.0.1 - - [TIME] \"GET /x HTTP/1.1\" 200 2 \"-\" \"ua\"");
}

#[test]
fn custom_log_format_variables() {
    let fmt = "'$remote_addr|$request_method|$request_uri|$uri|$args|$status|$body_bytes_sent|$bytes_sent|'\n\
               '$host|$server_name|$server_port|$http_x_test|$sent_http_content_type|$connection|'\n\
               '$connection_requests|$request_time|$msec|$time_iso8601|$request|$http_user_agent'";
    let http = format!(
        "log_format t {fmt};\n\
         server {{ listen 127.0.0.1:{{port}}; server_name logs.test other.test; root html; access_log logs/t.log t; }}"
    );
    let mut s = builder().http(&http).file("html/a.txt", "hello").start();
    let mut c = s.connect();
    c.send("GET /dir/../a.txt?x=1&y=2 HTTP/1.1\r\nHost: Example.TEST:8000\r\nX-Test: hi there\r\n\r\n");
    let r1 = c.read_response();
    assert_eq!(r1.status, 200);
    c.send("HEAD /nope HTTP/1.1\r\nHost: example.test\r\n\r\n");
    let r2 = c.read_response_to("HEAD");
    assert_eq!(r2.status, 404);
    assert!(s.quit().success());

    let log = read_lossy(&s.path("logs/t.log"));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    let f1: Vec<&str> = lines[0].split('|').collect();
    let f2: Vec<&str> = lines[1].split('|').collect();
    assert_eq!(f1.len(), 20, "{}", lines[0]);
    let sent1 = r1.head.len() + 4 + r1.body.len();
    let sent2 = r2.head.len() + 4;
    let port = s.port.to_string();
    assert_eq!(
        f1[..13],
        [
            "127.0.0.1",
            "GET",
            "/dir/../a.txt?x=1&y=2",
            "/a.txt",
            "x=1&y=2",
            "200",
            "5",
            &sent1.to_string(),
            "example.test",
            "logs.test",
            &port,
            "hi there",
            "text/plain",
        ]
    );
    assert_eq!(
        f2[..13],
        [
            "127.0.0.1",
            "HEAD",
            "/nope",
            "/nope",
            "-",
            "404",
            "0",
            &sent2.to_string(),
            "example.test",
            "logs.test",
            &port,
            "-",
            "text/html"
        ]
    );
    // same connection number, request counter 1 then 2
    assert!(f1[13].parse::<u64>().is_ok(), "$connection {}", f1[13]);
    assert_eq!(f1[13], f2[13]);
    assert_eq!((f1[14], f2[14]), ("1", "2"));
    // $request_time: seconds with millisecond resolution
    for f in [f1[15], f2[15]] {
        let (a, b) = f.split_once('.').unwrap_or_else(|| panic!("$request_time {f}"));
        assert!(a.parse::<u64>().is_ok() && b.len() == 3 && b.parse::<u64>().is_ok(), "$request_time {f}");
    }
    // $msec: epoch seconds with milliseconds, close to now
    let (secs, ms) = f1[16].split_once('.').unwrap_or_else(|| panic!("$msec {}", f1[16]));
    assert_eq!(ms.len(), 3, "$msec {}", f1[16]);
    assert!((secs.parse::<i64>().unwrap() - now_secs()).abs() < 120, "$msec {}", f1[16]);
    // $time_iso8601: 2026-11-22T14:23:06+00:00
    let iso = f1[17];
    assert_eq!(iso.len(), 25, "$time_iso8601 {iso}");
    assert_eq!((&iso[4..5], &iso[7..8], &iso[10..11], &iso[13..14], &iso[22..23]), ("-", "-", "T", ":", ":"), "{iso}");
    assert_eq!(f1[18], "GET /dir/../a.txt?x=1&y=2 HTTP/1.1");
    assert_eq!(f1[19], "-");
}

#[test]
fn log_format_escaping() {
    let http = "log_format d '\"$http_user_agent\"';\n\
                log_format j escape=json '{\"ua\":\"$http_user_agent\",\"missing\":\"$http_x_none\"}';\n\
                log_format n escape=none '[$http_user_agent]';\n\
                server { listen 127.0.0.1:{port}; return 200 ok;\n\
                access_log logs/d.log d; access_log logs/j.log j; access_log logs/n.log n; }";
    let mut s = builder().http(http).start();
    let mut c = s.connect();
    c.send(b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: a\"b\\c\td\xffe\r\nConnection: close\r\n\r\n".as_slice());
    assert_eq!(c.read_response().status, 200);
    assert!(s.quit().success());
    assert_eq!(read_lossy(&s.path("logs/d.log")), "\"a\\x22b\\x5Cc\\x09d\\xFFe\"\n");
    assert_eq!(read_lossy(&s.path("logs/j.log")), "{\"ua\":\"a\\\"b\\\\c\\td\u{fffd}e\",\"missing\":\"\"}\n");
    let raw = fs::read(s.path("logs/n.log")).unwrap();
    assert_eq!(raw, b"[a\"b\\c\td\xffe]\n");
}

#[test]
fn access_log_off() {
    let mut s = builder()
        .http(
            "access_log logs/access.log;\n\
             server { listen 127.0.0.1:{port};\n\
               location /quiet/ { access_log off; return 200 q; }\n\
               location / { return 200 loud; } }",
        )
        .start();
    assert_eq!(s.get("/quiet/a").text(), "q");
    assert_eq!(s.get("/loud").text(), "loud");
    assert_eq!(s.get("/quiet/b").text(), "q");
    assert!(s.quit().success());
    let log = s.access_log();
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("\"GET /loud HTTP/1.1\" 200 4 "), "{log}");

    // off at http level: no file is created at all
    let mut s = builder().http("access_log off;\nserver { listen 127.0.0.1:{port}; return 200 x; }").start();
    assert_eq!(s.get("/").text(), "x");
    assert!(s.quit().success());
    assert!(!s.path("logs/access.log").exists(), "access.log written with access_log off");
}

/// Without `buffer=` a line is in the file once the client has its
/// answer, as with nginx's unbuffered write: on a closed connection and
/// on one kept alive.
#[test]
fn unbuffered_lines_are_there_when_the_answer_is() {
    let s = builder()
        .http("server { listen 127.0.0.1:{port}; return 200 x;\n access_log logs/access.log combined; }")
        .start();
    for i in 0..20 {
        // Read to the close, the server's last act for the request.
        let mut c = std::net::TcpStream::connect(("127.0.0.1", s.port)).unwrap();
        std::io::Write::write_all(&mut c, format!("GET /closed-{i} HTTP/1.0\r\n\r\n").as_bytes()).unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut c, &mut got).unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
        let log = s.access_log();
        assert!(log.contains(&format!("GET /closed-{i} HTTP/1.0")), "line {i} missing:\n{log}");
    }
    let mut c = s.connect();
    for i in 0..5 {
        c.send(format!("GET /kept-{i} HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert_eq!(c.read_response_to("GET").status, 200);
        let mut found = false;
        for _ in 0..50 {
            found = s.access_log().contains(&format!("GET /kept-{i} HTTP/1.1"));
            if found {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        assert!(found, "line {i} not written within 100 ms");
    }
}

#[test]
fn flush_interval_writes_buffered_lines() {
    let s = builder()
        .http("server { listen 127.0.0.1:{port}; return 200 x;\n access_log logs/access.log combined buffer=64k flush=1s; }")
        .start();
    assert_eq!(s.get("/one").text(), "x");
    // Without further traffic the buffered line reaches the file by the
    // flush timer.
    let lines = s.wait_access_lines(1);
    assert!(lines[0].contains("\"GET /one HTTP/1.1\" 200 1 "), "{lines:?}");
}

#[test]
fn buffer_size_and_long_flush() {
    // 1k buffer, 60 s flush: lines reach the file only when the buffer
    // fills, and the rest on shutdown.
    let mut s = builder()
        .http("server { listen 127.0.0.1:{port}; return 200 x;\n access_log logs/access.log combined buffer=1k flush=60s; }")
        .start();
    let n = 30;
    for i in 0..n {
        let r = s.get(&format!("/req-{i:02}-{}", "p".repeat(40)));
        assert_eq!(r.status, 200);
    }
    // ~30 lines of ~120 bytes do not fit in 1k: some must be written...
    let lines = s.wait_access_lines(1);
    // ...but not all: the tail stays in the buffer until shutdown.
    assert!(lines.len() < n, "all {n} lines written despite buffer=1k flush=60s");
    assert!(lines[0].contains("/req-00-"), "{lines:?}");
    assert!(s.quit().success());
    let all = s.access_log();
    assert_eq!(all.lines().count(), n, "{all}");
    for (i, l) in all.lines().enumerate() {
        assert!(l.contains(&format!("/req-{i:02}-")), "line {i} out of order: {l}");
    }
}

#[test]
fn reopen_after_rotation() {
    let mut s = builder()
        .http("server { listen 127.0.0.1:{port}; return 200 x; access_log logs/access.log combined; }")
        .start();
    assert_eq!(s.get("/before").text(), "x");
    s.wait_access_lines(1);
    let log = s.path("logs/access.log");
    let rotated = s.path("logs/access.log.1");
    fs::rename(&log, &rotated).unwrap();
    s.signal("reopen");
    // The new file is created by the reopen itself.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !log.exists() {
        assert!(std::time::Instant::now() < deadline, "-s reopen did not create a new access.log");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Workers switch files shortly after the signal: request until a line
    // lands in the new file.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut i = 0;
    while !read_lossy(&log).contains("GET /after-") {
        assert!(std::time::Instant::now() < deadline, "no request logged to the new access.log");
        assert_eq!(s.get(&format!("/after-{i}")).text(), "x");
        i += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.quit().success());
    let old = read_lossy(&rotated);
    let new = read_lossy(&log);
    assert!(old.contains("GET /before "), "rotated file:\n{old}");
    assert!(!new.contains("GET /before "), "new file:\n{new}");
    assert!(s.error_log().contains("reopening logs"), "{}", s.error_log());
}

#[test]
fn reopen_recreates_error_log() {
    let mut s = builder().http("server { listen 127.0.0.1:{port}; root html; }").start();
    let log = s.path("logs/error.log");
    fs::rename(&log, s.path("logs/error.log.1")).unwrap();
    s.signal("reopen");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut i = 0;
    while !read_lossy(&log).contains("missing-after-reopen") {
        assert!(std::time::Instant::now() < deadline, "no error logged to the new error.log:\n{}", read_lossy(&log));
        assert_eq!(s.get(&format!("/missing-after-reopen-{i}")).status, 404);
        i += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.quit().success());
}

fn level_server(level: &str) -> TestServer {
    let conf = format!(
        "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log {level};\nevents {{}}\n\
         http {{ server {{ listen 127.0.0.1:{{port}}; root html; }} }}\n"
    );
    builder().whole(&conf).start()
}

#[test]
fn error_log_level_filtering() {
    // warn: [error] lines yes; [notice] (start/stop) and [info] (client
    // errors) no.
    let mut s = level_server("warn");
    assert_eq!(s.get("/missing.txt").status, 404);
    assert_eq!(request(s.port, "GET / HTTP/1.1\r\n\r\n").status, 400);
    assert!(s.quit().success());
    let log = s.error_log();
    assert!(log.contains("[error]") && log.contains("missing.txt"), "{log}");
    // (nginx's `-s` signaller itself notes "signal process started")
    let below: Vec<&str> = log
        .lines()
        .filter(|l| (l.contains("[info]") || l.contains("[notice]")) && !l.contains("signal process started"))
        .collect();
    assert!(below.is_empty(), "lines below warn:\n{log}");

    // crit: not even the 404
    let mut s = level_server("crit");
    assert_eq!(s.get("/missing.txt").status, 404);
    assert!(s.quit().success());
    let log = s.error_log();
    assert!(!log.contains("[error]"), "{log}");

    // info: the client error too
    let mut s = level_server("info");
    assert_eq!(request(s.port, "GET / HTTP/1.1\r\n\r\n").status, 400);
    assert!(s.quit().success());
    let log = s.error_log();
    let line = line_with(&log, "without \"Host\" header");
    assert!(line.contains(" [info] "), "{line}");
}

#[test]
fn error_log_line_format() {
    let mut s = level_server("error");
    assert_eq!(s.get("/missing.txt").status, 404);
    let pid = s.serving_pid();
    assert!(s.quit().success());
    let log = s.error_log();
    let line = line_with(&log, "missing.txt");
    // 2026/11/22 14:23:06 [error] PID#TID: *N open() "..." failed (2: No such file or directory), client: ...
    let b = line.as_bytes();
    assert!(line.len() > 20, "{line}");
    assert_eq!((b[4], b[7], b[10], b[13], b[16], b[19]), (b'/', b'/', b' ', b':', b':', b' '), "{line}");
    assert!(line[..4].bytes().all(|c| c.is_ascii_digit()), "{line}");
    let rest = &line[20..];
    let rest = rest.strip_prefix("[error] ").unwrap_or_else(|| panic!("{line}"));
    let rest = rest.strip_prefix(&format!("{pid}#")).unwrap_or_else(|| panic!("pid {pid} not in {line}"));
    let (tid, rest) = rest.split_once(": *").unwrap_or_else(|| panic!("{line}"));
    assert!(tid.parse::<u32>().is_ok(), "{line}");
    let (conn, rest) = rest.split_once(' ').unwrap();
    assert!(conn.parse::<u64>().is_ok(), "{line}");
    let file = s.path("html/missing.txt").display().to_string();
    assert_eq!(
        rest,
        format!(
            "open() \"{file}\" failed (2: No such file or directory), client: 127.0.0.1, server: , \
             request: \"GET /missing.txt HTTP/1.1\", host: \"localhost\""
        )
    );
}

#[test]
fn closed_444_and_head_are_logged() {
    let mut s = builder()
        .http(
            "server { listen 127.0.0.1:{port}; location /close { return 444; } location / { return 200 \"hello\"; } }",
        )
        .start();
    assert!(request_to_close(s.port, b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n").is_empty());
    let r = request(s.port, "HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
    assert!(s.quit().success());
    let log = s.access_log();
    assert!(log.contains("\"GET /close HTTP/1.1\" 444 0 "), "{log}");
    assert!(log.contains("\"HEAD /h HTTP/1.1\" 200 0 "), "{log}");
}

/// `access_log` with variables in its path: a file per rendered path,
/// written per line; no line while the request's root is missing; nginx's
/// lines for a file that cannot be opened; buffering refused.
#[test]
fn variables_in_the_path_pick_the_file_per_request() {
    let mut s = builder()
        .http(
            "server { listen 127.0.0.1:{port}; root html;\n\
               access_log logs/$host.log;\n\
               location / { return 200 x; }\n\
               location /noroot/ { root nothere; return 200 y; }\n\
               location /abs/ { access_log {prefix}/logs/abs-$arg_n.log; return 200 a; }\n\
               location /nodir/ { access_log logs/none/$host.log; return 200 n; } }",
        )
        .file("html/.keep", "")
        .start();
    // nginx's workers run as nobody here: let them create the files.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(s.path("logs"), fs::Permissions::from_mode(0o777)).expect("chmod logs");
    let get = |host: &str, path: &str| {
        request(s.port, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")).status
    };
    assert_eq!(get("a.example", "/one"), 200);
    assert_eq!(get("b.example", "/two"), 200);
    assert_eq!(get("a.example", "/three"), 200);
    assert_eq!(get("c.example", "/noroot/"), 200);
    assert_eq!(get("d.example", "/abs/?n=7"), 200);
    assert_eq!(get("e.example", "/nodir/"), 200);
    assert!(s.quit().success());
    let read = |name: &str| fs::read_to_string(s.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let a = read("logs/a.example.log");
    assert_eq!(a.lines().count(), 2, "{a}");
    assert!(a.contains("\"GET /one HTTP/1.1\" 200 1 ") && a.contains("\"GET /three HTTP/1.1\" 200 1 "), "{a}");
    assert!(read("logs/b.example.log").contains("\"GET /two HTTP/1.1\" 200 1 "));
    assert!(read("logs/abs-7.log").contains("\"GET /abs/?n=7 HTTP/1.1\" 200 1 "));
    assert!(!s.path("logs/c.example.log").exists(), "a line logged while the root is missing");
    let log = s.error_log();
    let root = s.path("nothere").display().to_string();
    let line = line_with(
        &log,
        &format!("testing \"{root}\" existence failed (2: No such file or directory) while logging request"),
    );
    assert!(line.contains("[error]") && line.contains("request: \"GET /noroot/ HTTP/1.1\""), "{line}");
    let file = s.path("logs/none/e.example.log").display().to_string();
    let line =
        line_with(&log, &format!("open() \"{file}\" failed (2: No such file or directory) while logging request"));
    assert!(line.contains("[crit]"), "{line}");

    for (params, why) in [
        ("combined buffer=4k", "buffered logs cannot have variables in name".to_string()),
        ("combined gzip", "buffered logs cannot have variables in name".to_string()),
        (
            "combined flush=1s",
            format!("no buffer is defined for access_log \"{}\"", s.path("logs/$host.log").display()),
        ),
    ] {
        let t = builder()
            .http(&format!("server {{ listen 127.0.0.1:{{port}}; access_log logs/$host.log {params}; }}"))
            .prepare();
        let out = t.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        let want = why.replace(&s.path("").display().to_string(), &t.path("").display().to_string());
        assert!(!out.status.success() && err.contains(&want), "{params}: {err}");
    }
}

/// `open_log_file_cache` (nginx-tests' access_log.t): a path used
/// `min_uses` times keeps its descriptor, so its lines still reach the file
/// after its directory is renamed; a path used less often, or pushed out by
/// `max` newer ones, is opened per line and its lines are lost then.
#[test]
fn open_log_file_cache_keeps_descriptors_of_paths_in_use() {
    let mut s = builder()
        .http(
            "server { listen 127.0.0.1:{port}; root html;\n\
               location / {\n\
                 open_log_file_cache max=3 inactive=20s valid=1m min_uses=2;\n\
                 access_log {prefix}/dir/$arg_n.log;\n\
                 return 200 x; } }",
        )
        .file("html/.keep", "")
        .file("dir/.keep", "")
        .start();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(s.path("dir"), fs::Permissions::from_mode(0o777)).expect("chmod dir");
    let get = |n: &str| assert_eq!(s.get(&format!("/?n={n}")).status, 200);
    for n in ["lru", "lru", "once", "first", "first", "second", "second"] {
        get(n);
    }
    // nginx writes a line after the answer went out: let the last one land.
    std::thread::sleep(Duration::from_millis(300));
    fs::rename(s.path("dir"), s.path("moved")).expect("rename");
    for n in ["lru", "once", "first", "second"] {
        get(n);
    }
    // A line is written after its answer: stop the server to have them all.
    assert!(s.quit().success());
    let lines = |n: &str| fs::read_to_string(s.path(&format!("moved/{n}.log"))).unwrap_or_default().lines().count();
    assert_eq!(lines("lru"), 2, "closed: the fourth path pushed it out");
    assert_eq!(lines("once"), 1, "below min_uses: opened per line");
    assert_eq!((lines("first"), lines("second")), (3, 3), "kept open");
    let log = s.error_log();
    let moved_away = s.path("dir/lru.log").display().to_string();
    assert!(
        line_with(&log, &format!("open() \"{moved_away}\" failed (2: No such file or directory)")).contains("[crit]")
    );
}
