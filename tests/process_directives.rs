//! Directives for the process and its event loop that real configurations
//! carry (`worker_rlimit_core`, `working_directory`, `lock_file`,
//! `thread_pool` with `aio threads=`, `ssl_engine`, and in `events`: `use`,
//! `debug_connection`, `worker_aio_requests`, `epoll_events`), a few
//! tuning ones (`*_send_lowat`, `open_file_cache_events`, `http2_pool_size`,
//! `http2_streams_index_size`), and `max_headers`. With
//! SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx, whose
//! workers are processes: what a sluice process shows is then read from
//! nginx's worker.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::*;

/// The processes that serve: nginx's workers, or sluice itself.
fn serving(pid: u32) -> Vec<u32> {
    let kids = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let kids: Vec<u32> = kids.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    if kids.is_empty() { vec![pid] } else { kids }
}

/// "Max core file size" soft limit of `pid`, as /proc prints it.
fn core_limit(pid: u32) -> String {
    let limits = fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let line = limits.lines().find(|l| l.starts_with("Max core file size")).unwrap_or("").to_string();
    line.split_whitespace().nth(4).unwrap_or("").to_string()
}

fn cwd(pid: u32) -> String {
    fs::read_link(format!("/proc/{pid}/cwd")).map(|p| p.display().to_string()).unwrap_or_default()
}

/// Waits until every serving process satisfies `ok`.
fn until(s: &TestServer, what: &str, ok: impl Fn(u32) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let procs = serving(s.pid());
        if procs.iter().all(|&p| ok(p)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {procs:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn core_limit_and_working_directory_apply_and_follow_reloads() {
    let dir = temp_dir("workdir");
    let other = temp_dir("workdir2");
    let conf = |limit: &str, d: &std::path::Path| {
        format!("worker_rlimit_core {limit};\nworking_directory {};\nlock_file logs/x.lock;\n", d.display())
    };
    let s = builder().main(&conf("10m", &dir)).http("server { listen 127.0.0.1:{port}; }").start();
    assert!(s.get("/").status > 0);
    until(&s, "10m core limit and the directory", |p| {
        core_limit(p) == (10 << 20).to_string() && cwd(p) == dir.display().to_string()
    });
    // A reload brings the new values, as nginx's new workers have them.
    let text = fs::read_to_string(s.conf_path()).expect("conf").replace(&conf("10m", &dir), &conf("20m", &other));
    s.write_conf(&text);
    s.signal("reload");
    until(&s, "20m and the other directory", |p| {
        core_limit(p) == (20 << 20).to_string() && cwd(p) == other.display().to_string()
    });
    assert!(s.get("/").status > 0);
    assert!(!s.path("logs/x.lock").exists(), "lock_file is never created");
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&other);
}

fn check(main: &str, events: &str, http: &str) -> (bool, String) {
    let t = builder().main(main).events(events).http(http).prepare();
    let out = t.run(&["-t"]);
    (out.status.success(), stderr_of(&out))
}

#[test]
fn process_and_event_directives_are_checked_as_nginx_checks_them() {
    let (ok, err) = check(
        "thread_pool default threads=32 max_queue=65536;\nthread_pool io threads=4;\n",
        "use epoll;\nworker_aio_requests 32;\nepoll_events 512;\n\
         debug_connection 127.0.0.1;\ndebug_connection 10.0.0.0/8;\ndebug_connection unix:;\n\
         debug_connection ::1;\ndebug_connection localhost;\n",
        "aio threads=io;\n",
    );
    assert!(ok, "{err}");
    // A pool may be declared after the `aio` that names it; "default"
    // needs no declaration.
    let (ok, err) = check("", "", "server { listen 127.0.0.1:{port}; aio threads=late; location / { aio threads; } }");
    assert!(!ok && err.contains("unknown thread pool \"late\""), "{err}");
    let (ok, err) = check("thread_pool late threads=2;", "", "aio threads=late; aio_write on;");
    assert!(ok, "{err}");
    for (main, events, why) in [
        ("worker_rlimit_core abc;", "", "\"worker_rlimit_core\" directive invalid value"),
        ("worker_rlimit_core 1g;\nworker_rlimit_core 2g;", "", "\"worker_rlimit_core\" directive is duplicate"),
        ("working_directory a b;", "", "invalid number of arguments in \"working_directory\" directive"),
        ("thread_pool p threads=0;", "", "invalid threads value \"threads=0\""),
        ("thread_pool p max_queue=5;", "", "\"thread_pool\" must have \"threads\" parameter"),
        ("thread_pool p threads=2 max_queue=x;", "", "invalid max_queue value \"max_queue=x\""),
        ("thread_pool p threads=4;\nthread_pool p threads=4;", "", "duplicate thread pool \"p\""),
        ("", "use kqueue;", "invalid event type \"kqueue\""),
        ("", "debug_connection bad!addr;", "host not found in debug_connection \"bad!addr\""),
        ("", "debug_connection 127.0.0.1/33;", "host not found in debug_connection \"127.0.0.1/33\""),
        ("", "worker_aio_requests x;", "\"worker_aio_requests\" directive invalid number"),
        ("", "epoll_events x;", "\"epoll_events\" directive invalid number"),
    ] {
        let (ok, err) = check(main, events, "");
        assert!(!ok && err.contains(why), "{main}{events}: wanted {why:?} in:\n{err}");
    }
    // An engine is refused: sluice names why; nginx fails to load it.
    let (ok, err) = check("ssl_engine pkcs11;", "", "");
    assert!(!ok, "{err}");
    if !nginx_mode() {
        assert!(err.contains("cannot load OpenSSL engines"), "{err}");
    }
}

fn nginx_mode() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

#[test]
fn tuning_directives_are_checked_and_lowat_warns() {
    let (ok, err) = check(
        "",
        "",
        "open_file_cache_events on;\nhttp2_pool_size 4k;\nhttp2_streams_index_size 32;\n\
         send_lowat 0;\nproxy_send_lowat 1k;\nfastcgi_send_lowat 0;\n",
    );
    assert!(ok, "{err}");
    // Linux cannot set SO_SNDLOWAT: nginx warns for each.
    for name in ["send_lowat", "proxy_send_lowat", "fastcgi_send_lowat"] {
        let line = err.lines().find(|l| l.contains(&format!("\"{name}\" is not supported, ignored")));
        assert!(line.is_some_and(|l| l.contains("[warn]")), "{name}: {err}");
    }
    for (http, why) in [
        ("http2_pool_size 10;", "the pool size must be no less than 112"),
        ("http2_pool_size 4x;", "\"http2_pool_size\" directive invalid value"),
        ("http2_streams_index_size 33;", "\"http2_streams_index_size\" directive must be a power of two"),
        ("server { location / { http2_pool_size 4k; } }", "\"http2_pool_size\" directive is not allowed here"),
        ("open_file_cache_events maybe;", "invalid value \"maybe\" in \"open_file_cache_events\" directive"),
        ("proxy_send_lowat x;", "\"proxy_send_lowat\" directive invalid value"),
        ("max_headers x;", "\"max_headers\" directive invalid number"),
        ("server { location / { max_headers 10; } }", "\"max_headers\" directive is not allowed here"),
    ] {
        assert_refused(http, why);
    }
}

#[test]
fn max_headers_refuses_more_header_lines() {
    let s = builder()
        .http(
            "max_headers 100;\n\
             server { listen 127.0.0.1:{port}; max_headers 3; location / { return 200 \"ok\\n\"; } }",
        )
        .start();
    let req = |n: usize| {
        let extra: String = (1..n).map(|i| format!("X-{i}: v\r\n")).collect();
        request(s.port, &format!("GET /q HTTP/1.1\r\nHost: a\r\n{extra}Connection: close\r\n\r\n"))
    };
    // Host, the extra lines and Connection.
    assert_eq!(req(1).status, 200);
    assert_eq!(req(2).status, 200);
    assert_eq!(req(3).status, 400);
    let log = s.wait_error_log("client sent too many header lines");
    let line = log.lines().find(|l| l.contains("too many header lines")).expect("line");
    assert!(line.contains("[info]") && line.contains("while reading client request headers"), "{line}");
}
