//! `error_log` per configuration level, as nginx has it: a line about a
//! request goes to the logs of the location (or server) that handles it,
//! levels inherit main -> http -> server -> location, several logs per
//! level all get the line (each filtered by its own level), and `-s reopen`
//! and reload cover every file. Checked against nginx 1.22.1 with
//! `SLUICE_TEST_NGINX=1`.
//!
//! The main log is `logs/error.log` at `info` (the builder's default).

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::*;

/// nginx's line for a missing static file under the prefix's `html/`.
fn open_failed(s: &TestServer, uri: &str) -> String {
    format!("open() \"{}\" failed (2: No such file or directory)", s.path(&format!("html{uri}")).display())
}

fn log_at(s: &TestServer, rel: &str) -> String {
    read_lossy(&s.path(rel))
}

/// Waits for `needle` in `rel`; the line is written synchronously, so once
/// it is there, every other log that would get it has it too.
fn wait_in(s: &TestServer, rel: &str, needle: &str) -> String {
    wait_contains(&s.path(rel), needle, LOG_WAIT)
}

fn assert_absent(s: &TestServer, rel: &str, needle: &str) {
    let text = log_at(s, rel);
    assert!(!text.contains(needle), "{rel} has {needle:?}:\n{text}");
}

#[test]
fn location_log_gets_its_requests_lines_and_the_main_log_does_not() {
    let s = builder()
        .ports(2)
        .http(
            "server {
                listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1} http2;
                root html;
                location /own/ { error_log logs/own.log; }
            }",
        )
        .start();
    assert_eq!(s.get("/own/missing").status, 404);
    assert_eq!(s.get("/elsewhere").status, 404);
    let own = open_failed(&s, "/own/missing");
    let log = wait_in(&s, "logs/own.log", &own);
    let line = line_with(&log, &own);
    assert!(line.contains(" [error] "), "{line}");
    assert!(
        line.ends_with(", client: 127.0.0.1, server: , request: \"GET /own/missing HTTP/1.1\", host: \"localhost\""),
        "{line}"
    );
    let other = open_failed(&s, "/elsewhere");
    s.wait_error_log(&other);
    // The same over HTTP/2.
    let h2 = curl(&["--http2-prior-knowledge", "-o", "/dev/null", &format!("http://127.0.0.1:{}/own/h2", s.ports[1])]);
    assert!(h2.status.success(), "{}", h2.stderr);
    wait_in(&s, "logs/own.log", &open_failed(&s, "/own/h2"));
    assert_absent(&s, "logs/error.log", &own);
    assert_absent(&s, "logs/error.log", "/own/h2");
    assert_absent(&s, "logs/own.log", &other);
}

#[test]
fn server_level_log() {
    let s = builder()
        .ports(2)
        .http(
            "root html;
            server { listen 127.0.0.1:{port0}; error_log logs/a.log; location /x/ { } }
            server { listen 127.0.0.1:{port1}; }",
        )
        .start();
    assert_eq!(s.get("/x/a-missing").status, 404);
    assert_eq!(request(s.ports[1], "GET /b-missing HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n").status, 404);
    let a = open_failed(&s, "/x/a-missing");
    let b = open_failed(&s, "/b-missing");
    wait_in(&s, "logs/a.log", &a);
    s.wait_error_log(&b);
    assert_absent(&s, "logs/error.log", &a);
    assert_absent(&s, "logs/a.log", &b);
}

#[test]
fn levels_inherit_main_http_server_location() {
    let s = builder()
        .http(
            "error_log logs/http.log;
            root html;
            server {
                listen 127.0.0.1:{port};
                location /plain/ { }
                location /loc/ {
                    error_log logs/loc.log;
                    location /loc/nested/ { }
                }
            }",
        )
        .start();
    for uri in ["/plain/m", "/loc/m", "/loc/nested/m"] {
        assert_eq!(s.get(uri).status, 404, "{uri}");
    }
    let plain = open_failed(&s, "/plain/m");
    let loc = open_failed(&s, "/loc/m");
    let nested = open_failed(&s, "/loc/nested/m");
    wait_in(&s, "logs/http.log", &plain);
    wait_in(&s, "logs/loc.log", &loc);
    wait_in(&s, "logs/loc.log", &nested);
    for l in [&plain, &loc, &nested] {
        assert_absent(&s, "logs/error.log", l);
    }
    assert_absent(&s, "logs/http.log", &loc);
    assert_absent(&s, "logs/http.log", &nested);
    // Lines about no request stay in the main log (the start notice may
    // reach the file after the first request on a loaded machine).
    s.wait_error_log("[notice]");
    assert!(!log_at(&s, "logs/http.log").contains("[notice]"), "{}", log_at(&s, "logs/http.log"));
}

#[test]
fn several_logs_on_one_level_each_with_its_own_level() {
    let s = builder()
        .http(
            "server {
                listen 127.0.0.1:{port};
                root html;
                location /two/ { error_log logs/one.log; error_log logs/two.log warn; }
                location /filtered/ { error_log logs/crit.log crit; error_log logs/err.log error; }
                location /quiet/ { error_log logs/quiet.log crit; }
            }",
        )
        .start();
    for uri in ["/two/m", "/filtered/m", "/quiet/m", "/after"] {
        assert_eq!(s.get(uri).status, 404, "{uri}");
    }
    let two = open_failed(&s, "/two/m");
    wait_in(&s, "logs/one.log", &two);
    wait_in(&s, "logs/two.log", &two);
    let filtered = open_failed(&s, "/filtered/m");
    wait_in(&s, "logs/err.log", &filtered);
    assert_absent(&s, "logs/crit.log", &filtered);
    // The line is written before the response goes out: had /quiet/ logged
    // anywhere, it would be there by now (and the main log has the next one).
    s.wait_error_log(&open_failed(&s, "/after"));
    let quiet = open_failed(&s, "/quiet/m");
    assert_absent(&s, "logs/quiet.log", &quiet);
    for l in [&two, &filtered, &quiet] {
        assert_absent(&s, "logs/error.log", l);
    }
}

#[test]
fn errors_before_a_server_is_chosen_go_to_the_default_servers_log() {
    let s = builder()
        .http(
            "server { listen 127.0.0.1:{port} default_server; error_log logs/default.log info; return 200; }
            server { listen 127.0.0.1:{port}; server_name b; error_log logs/b.log info; return 200; }",
        )
        .start();
    let r = request(s.port, "GET / HTTP/2.0\r\nHost: b\r\n\r\n");
    assert_eq!(r.status, 505);
    let needle = "client sent invalid version while reading client request line";
    wait_in(&s, "logs/default.log", needle);
    assert_absent(&s, "logs/b.log", needle);
    assert_absent(&s, "logs/error.log", needle);
}

#[test]
fn upstream_errors_go_to_the_proxying_locations_log() {
    let dead = free_port();
    let s = builder()
        .http(&format!(
            "server {{
                listen 127.0.0.1:{{port}};
                location /p/ {{ error_log logs/proxy.log; proxy_pass http://127.0.0.1:{dead}; }}
            }}"
        ))
        .start();
    assert_eq!(s.get("/p/x").status, 502);
    let needle = "connect() failed (111: Connection refused) while connecting to upstream";
    let log = wait_in(&s, "logs/proxy.log", needle);
    assert!(line_with(&log, needle).contains(&format!("upstream: \"http://127.0.0.1:{dead}/p/x\"")), "{log}");
    assert_absent(&s, "logs/error.log", needle);
}

#[test]
fn reopen_reopens_every_error_log() {
    let s = builder()
        .http("server { listen 127.0.0.1:{port}; root html; location /own/ { error_log logs/own.log; } }")
        .start();
    assert_eq!(s.get("/own/before").status, 404);
    wait_in(&s, "logs/own.log", "/own/before");
    for f in ["logs/own.log", "logs/error.log"] {
        fs::rename(s.path(f), s.path(&format!("{f}.1"))).unwrap();
    }
    s.signal("reopen");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut i = 0;
    while !log_at(&s, "logs/own.log").contains("/own/after-") || !s.error_log().contains("/main-after-") {
        assert!(Instant::now() < deadline, "not logged to the new files:\n{}", log_at(&s, "logs/own.log.1"));
        assert_eq!(s.get(&format!("/own/after-{i}")).status, 404);
        assert_eq!(s.get(&format!("/main-after-{i}")).status, 404);
        i += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!log_at(&s, "logs/own.log").contains("/own/before"));
    assert!(log_at(&s, "logs/own.log.1").contains("/own/before"));
}

#[test]
fn reload_opens_new_logs_and_refuses_a_path_it_cannot_open() {
    let conf = |loc_log: &str, text: &str| {
        format!(
            "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\n\
             http {{ server {{ listen 127.0.0.1:{{port}}; root html;\n\
             location /v {{ return 200 {text}; }}\n\
             location /own/ {{ error_log {loc_log}; }} }} }}\n"
        )
    };
    let s = builder().whole(&conf("logs/own.log", "v1")).start();
    let bad = s.path("no-such-dir/own.log");
    s.write_conf(&conf(&bad.display().to_string(), "v2"));
    s.signal("reload");
    let want = format!("open() \"{}\" failed (2: No such file or directory)", bad.display());
    let log = s.wait_error_log(&want);
    assert!(line_with(&log, &want).contains("[emerg]"), "{log}");
    // Still the old configuration, logging where it did.
    assert_eq!(s.get("/v").text(), "v1");
    assert_eq!(s.get("/own/still-old").status, 404);
    wait_in(&s, "logs/own.log", "/own/still-old");

    s.write_conf(&conf("logs/new.log", "v3"));
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.get("/v").text() != "v3" {
        assert!(Instant::now() < deadline, "reload not applied:\n{}", s.error_log());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.get("/own/now-new").status, 404);
    wait_in(&s, "logs/new.log", "/own/now-new");
    assert_absent(&s, "logs/own.log", "/own/now-new");
}
