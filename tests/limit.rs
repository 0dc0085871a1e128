//! nginx's request and connection limits: `limit_req` (refusals, bursts,
//! delays, dry run, custom status, `$limit_req_status`, its error-log
//! lines), `limit_conn` (requests held by a slow origin), zones shared by
//! every worker and kept across reloads, and the configuration errors.
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.
//!
//! Rates of `1r/m` keep the bucket from draining measurably between two
//! requests (16 thousandths per second), so excess values are exact.

mod common;

use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

const LOG: &str = "log_format lim '$status $limit_req_status $limit_conn_status';\n\
                   access_log logs/access.log lim;\n";

fn server(zones: &str, locations: &str) -> TestServer {
    builder()
        .http(&format!(
            "{LOG}{zones}\nserver {{\n listen 127.0.0.1:{{port}};\n server_name localhost;\n {locations}\n}}\n"
        ))
        .start()
}

fn statuses(s: &TestServer, path: &str, n: usize) -> Vec<u16> {
    (0..n).map(|_| s.get(path).status).collect()
}

/// `n` GETs sent at once on their own connections: (status, seconds).
fn concurrent(s: &TestServer, path: &str, n: usize) -> Vec<(u16, f64)> {
    let port = s.port;
    let start = Instant::now();
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let path = path.to_string();
            std::thread::spawn(move || {
                // Keep the order of arrival.
                std::thread::sleep(Duration::from_millis(15 * i as u64));
                let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
                (r.status, start.elapsed().as_secs_f64())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn rate_without_burst_refuses_the_second_request() {
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
        "location / { limit_req zone=one; empty_gif; }",
    );
    assert_eq!(statuses(&s, "/", 3), [200, 503, 503]);
    let r = s.get("/x");
    assert_eq!(r.status, 503);
    assert!(r.text().contains("<title>503 Service Temporarily Unavailable</title>"), "{}", r.text());
    let log = s.wait_error_log("limiting requests");
    assert!(
        log.contains("[error]")
            && log.contains("limiting requests, excess: 1.000 by zone \"one\", client: 127.0.0.1, server: localhost, request: \"GET / HTTP/1.1\""),
        "{log}"
    );
    let lines = s.wait_access_lines(4);
    assert_eq!(lines, ["200 PASSED -", "503 REJECTED -", "503 REJECTED -", "503 REJECTED -"]);
}

#[test]
fn burst_nodelay_passes_the_burst_at_once_then_refuses_with_the_set_status() {
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
         limit_req_zone $binary_remote_addr zone=two:1m rate=1r/m;",
        "location /a { limit_req zone=one burst=2 nodelay; empty_gif; }\n\
         location /b { limit_req zone=two burst=1 nodelay; limit_req_status 429; limit_req_log_level warn; empty_gif; }",
    );
    let t = Instant::now();
    assert_eq!(statuses(&s, "/a", 5), [200, 200, 200, 503, 503]);
    assert!(t.elapsed() < Duration::from_secs(2), "nodelay: no waiting");
    assert_eq!(statuses(&s, "/b", 3), [200, 200, 429]);
    let log = s.wait_error_log("by zone \"two\"");
    assert!(log.contains("[error]") && log.contains("limiting requests, excess: 3.000 by zone \"one\""), "{log}");
    assert!(log.contains("[warn]") && log.contains("limiting requests, excess: 2.000 by zone \"two\""), "{log}");
}

#[test]
fn requests_above_the_rate_wait_their_turn() {
    // 10 r/s: each request beyond the first waits 100 ms more.
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=10r/s;",
        "location / { limit_req zone=one burst=5; empty_gif; }\n\
         location /d { limit_req zone=one burst=5 delay=2; empty_gif; }",
    );
    let got = concurrent(&s, "/", 4);
    assert!(got.iter().all(|(st, _)| *st == 200), "{got:?}");
    assert!(got[0].1 < 0.1, "the first passes at once: {got:?}");
    // The fourth waits ~300 ms less what drained while the others arrived.
    assert!(got[3].1 > 0.2 && got[3].1 < 2.0, "{got:?}");
    let log = s.wait_error_log("delaying request");
    assert!(log.contains("[warn]") && log.contains("delaying request, excess: 0."), "{log}");
    let lines = s.wait_access_lines(4);
    assert_eq!(lines.iter().filter(|l| *l == "200 DELAYED -").count(), 3, "{lines:?}");

    // delay=2: three pass at once, the fourth waits (after the bucket
    // drained from the requests above).
    std::thread::sleep(Duration::from_millis(800));
    let got = concurrent(&s, "/d", 4);
    assert!(got.iter().all(|(st, _)| *st == 200), "{got:?}");
    assert!(got[2].1 < 0.2, "within delay=2 no wait: {got:?}");
    assert!(got[3].1 > 0.08 && got[3].1 < 2.0, "{got:?}");
}

/// nginx's limit_req_delay.t: `$request_time` in a header counts the time
/// the request waited for its turn (it did not before: 0.000).
#[test]
fn request_time_counts_the_delay() {
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=5r/s;",
        "location / { limit_req zone=one burst=2 delay=1; add_header X-Time $request_time; empty_gif; }",
    );
    let times: Vec<f64> = (0..3)
        .map(|_| {
            let r = s.get("/");
            assert_eq!(r.status, 200, "{}", r.head);
            r.header("X-Time").and_then(|t| t.parse().ok()).unwrap_or_else(|| panic!("X-Time: {}", r.head))
        })
        .collect();
    // The second is within delay=1; the third waits ~200 ms (one request
    // over the delay at 5 r/s).
    assert!(times[1] < 0.1, "{times:?}");
    assert!(times[2] > 0.1 && times[2] < 2.0, "{times:?}");
}

#[test]
fn dry_run_passes_and_says_what_it_would_have_done() {
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
        "location / { limit_req zone=one; limit_req_dry_run on; empty_gif; }\n\
         location /none { empty_gif; }",
    );
    assert_eq!(statuses(&s, "/", 2), [200, 200]);
    assert_eq!(s.get("/none").status, 200);
    let log = s.wait_error_log("limiting requests");
    assert!(log.contains("limiting requests, dry run, excess: 1.000 by zone \"one\""), "{log}");
    let lines = s.wait_access_lines(3);
    assert_eq!(lines, ["200 PASSED -", "200 REJECTED_DRY_RUN -", "200 - -"]);
}

#[test]
fn an_empty_key_is_not_limited_and_a_request_is_limited_once() {
    let s = server(
        "limit_req_zone $http_x_client zone=one:1m rate=1r/m;\n\
         limit_req_zone $binary_remote_addr zone=two:1m rate=1r/m;",
        "location /k { limit_req zone=one; empty_gif; }\n\
         location /a { limit_req zone=two; try_files /nothing @b; }\n\
         location @b { limit_req zone=two; empty_gif; }",
    );
    // No X-Client: no key, never limited.
    assert_eq!(statuses(&s, "/k", 3), [200, 200, 200]);
    let with = |v: &str| s.get_with("/k", &[&format!("X-Client: {v}")]).status;
    assert_eq!([with("a"), with("a"), with("b")], [200, 503, 200]);
    // The internal redirect to @b does not count the request again.
    assert_eq!(s.get("/a").status, 200);
    assert_eq!(s.get("/a").status, 503);
}

#[test]
fn proxied_locations_are_limited_before_the_origin_sees_them() {
    let o = Origin::ok("from origin\n");
    let s = server(
        "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
        &format!("location / {{ limit_req zone=one; proxy_pass http://{}; }}", o.addr()),
    );
    assert_eq!(statuses(&s, "/p", 3), [200, 503, 503]);
    assert_eq!(o.count(), 1);
}

#[test]
fn limit_conn_counts_requests_in_progress() {
    let o = Origin::start(|_| Reply::ok("slow\n").after(Duration::from_millis(1500)));
    let s = server(
        "limit_conn_zone $binary_remote_addr zone=addr:1m;",
        &format!(
            "location / {{ limit_conn addr 2; proxy_pass http://{}; }}\n\
             location /dry {{ limit_conn addr 1; limit_conn_dry_run on; proxy_pass http://{}; }}",
            o.addr(),
            o.addr()
        ),
    );
    let port = s.port;
    let slow: Vec<_> = (0..2)
        .map(|_| {
            std::thread::spawn(move || request(port, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = Instant::now();
    let r = s.get("/third");
    assert_eq!(r.status, 503, "{}", r.head);
    assert!(t.elapsed() < Duration::from_secs(1), "refused at once");
    for h in slow {
        assert_eq!(h.join().unwrap().status, 200);
    }
    // Done: the count went back down.
    assert_eq!(s.get("/again").status, 200);
    let log = s.wait_error_log("limiting connections");
    assert!(
        log.contains("[error]") && log.contains("limiting connections by zone \"addr\", client: 127.0.0.1"),
        "{log}"
    );
    let lines = s.wait_access_lines(4);
    assert_eq!(lines.iter().filter(|l| *l == "200 - PASSED").count(), 3, "{lines:?}");
    assert!(lines.contains(&"503 - REJECTED".to_string()), "{lines:?}");

    // Dry run: over the limit, still served.
    let held =
        std::thread::spawn(move || request(port, "GET /dry HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(s.get("/dry").status, 200);
    assert_eq!(held.join().unwrap().status, 200);
    let log = s.wait_error_log("limiting connections, dry run, by zone");
    assert!(log.contains("limiting connections, dry run, by zone \"addr\""), "{log}");
    let lines = s.wait_access_lines(6);
    assert!(lines.contains(&"200 - REJECTED_DRY_RUN".to_string()), "{lines:?}");
}

#[test]
fn limit_conn_is_released_when_the_client_goes_away() {
    let o = Origin::start(|_| Reply::ok("slow\n").after(Duration::from_millis(1500)));
    let s = server(
        "limit_conn_zone $binary_remote_addr zone=addr:1m;",
        &format!("location / {{ limit_conn addr 1; proxy_pass http://{}; }}", o.addr()),
    );
    {
        let mut c = s.connect();
        c.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(s.get("/busy").status, 503);
    }
    // The client left; once the server noticed (499), the count is free.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let st = s.get("/later").status;
        if st == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {st}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn zones_hold_for_all_workers_together() {
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            "{LOG}limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
             server {{ listen 127.0.0.1:{{port}} reuseport; server_name localhost;\n\
             location / {{ limit_req zone=one burst=3 nodelay; empty_gif; }} }}"
        ))
        .start();
    let got = statuses(&s, "/", 10);
    assert_eq!(got.iter().filter(|st| **st == 200).count(), 4, "{got:?}");
    assert_eq!(got.iter().filter(|st| **st == 503).count(), 6, "{got:?}");
}

#[test]
fn zones_keep_their_state_across_reload() {
    let conf = |generation: u32| {
        format!(
            "{LOG}limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
             server {{ listen 127.0.0.1:{{port}}; server_name localhost;\n\
             location = /gen {{ return 200 \"{generation}\"; }}\n\
             location / {{ limit_req zone=one; empty_gif; }} }}"
        )
    };
    let s = builder().http(&conf(1)).start();
    assert_eq!(s.get("/").status, 200);
    let whole = std::fs::read_to_string(s.conf_path()).unwrap().replace("return 200 \"1\"", "return 200 \"2\"");
    std::fs::write(s.conf_path(), whole).unwrap();
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.get("/gen").text() != "2" {
        assert!(Instant::now() < deadline, "reload not applied");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.get("/").status, 503, "the new configuration sees the old count");
}

fn test_fails(http: &str) -> String {
    let s = builder().http(http).prepare();
    let out = s.run(&["-t"]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", stderr_of(&out));
    stderr_of(&out).replace(&s.conf_path().display().to_string(), "CONF")
}

#[test]
fn configuration_errors_are_nginx_s() {
    let p = prog();
    let zone = "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/s;\n";
    let cases: &[(&str, &str)] = &[
        ("server { location / { limit_req zone=x; } }", "[emerg] zero size shared memory zone \"x\"\n"),
        ("limit_req_zone $binary_remote_addr zone=one:1m rate=1r/x;", "[emerg] invalid rate \"rate=1r/x\" in CONF:"),
        ("limit_req_zone $binary_remote_addr zone=one rate=1r/s;", "[emerg] invalid zone size \"zone=one\" in CONF:"),
        (
            "limit_req_zone $binary_remote_addr zone=one:1k rate=1r/s;",
            "[emerg] zone \"zone=one:1k\" is too small in CONF:",
        ),
        (
            "limit_conn_zone $binary_remote_addr;",
            "[emerg] invalid number of arguments in \"limit_conn_zone\" directive",
        ),
        ("server { limit_conn nope 1; }", "[emerg] zero size shared memory zone \"nope\"\n"),
        (
            &format!("{zone}server {{ limit_req zone=one burst=0; }}"),
            "[emerg] invalid burst value \"burst=0\" in CONF:",
        ),
        (
            &format!("{zone}server {{ limit_req zone=one; limit_req zone=one; }}"),
            "[emerg] \"limit_req\" directive is duplicate",
        ),
        (
            &format!("{zone}limit_conn_zone $binary_remote_addr zone=one:1m;"),
            "[emerg] the shared memory zone \"one\" is already declared for a different use",
        ),
        (&format!("{zone}server {{ limit_req_status 302; }}"), "[emerg] value must be between 400 and 599 in CONF:"),
        (&format!("{zone}server {{ limit_req_log_level debug; }}"), "[emerg] invalid value \"debug\" in CONF:"),
        (
            "limit_conn_zone $binary_remote_addr zone=a:1m; server { limit_conn a 0; }",
            "[emerg] invalid number of connections \"0\"",
        ),
        ("server { limit_rate fast; }", "[emerg] \"limit_rate\" directive invalid value in CONF:"),
    ];
    for (http, want) in cases {
        let err = test_fails(http);
        assert!(err.contains(&format!("{p}: {want}")), "want {want:?} for {http:?} in:\n{err}");
    }
}

#[test]
fn limit_rate_paces_response_bodies() {
    // 15000 bytes: at 10k/s the first second's 10240 go at once, the rest a
    // second later.
    let body = vec![b'x'; 15000];
    // The origin's X-Accel-Limit-Rate paces its answer where no
    // limit_rate is set.
    let o = Origin::start(|r| match r.target() {
        "/px/xal" => Reply::http(200, &["X-Accel-Limit-Rate: 5000"], vec![b'o'; 15000]),
        _ => Reply::ok(vec![b'o'; 15000]),
    });
    let s = builder()
        .ports(2)
        .http(&format!(
            "log_format r '$uri $status $body_bytes_sent $limit_rate';\n\
             access_log logs/access.log r;\n\
             server {{ listen 127.0.0.1:{{port0}}; listen 127.0.0.1:{{port1}} http2; server_name localhost;\n\
             root {{prefix}}/html;\n\
             location /a/ {{ alias {{prefix}}/html/; limit_rate 10k; }}\n\
             location /b/ {{ alias {{prefix}}/html/; limit_rate 10k; limit_rate_after 10k; }}\n\
             location /c/ {{ alias {{prefix}}/html/; set $limit_rate 5k; }}\n\
             location /d/ {{ alias {{prefix}}/html/; limit_rate $arg_r; }}\n\
             location /p/ {{ limit_rate 10k; proxy_pass http://{0}; }}\n\
             location /px/ {{ proxy_pass http://{0}; }}\n\
             location /n/ {{ alias {{prefix}}/html/; }} }}",
            o.addr()
        ))
        .file("html/f.bin", &body)
        .start();
    let (p0, p1) = (s.ports[0], s.ports[1]);
    let timed = move |path: &'static str, h2: bool| {
        std::thread::spawn(move || {
            let t = Instant::now();
            let out = if h2 {
                curl(&["--http2-prior-knowledge", &format!("http://127.0.0.1:{p1}{path}")])
            } else {
                curl(&[&format!("http://127.0.0.1:{p0}{path}")])
            };
            (out.stdout.len(), t.elapsed().as_secs_f64())
        })
    };
    let runs = [
        ("/a/f.bin", false, 0.7, 3.0),
        ("/b/f.bin", false, 0.0, 0.7),
        ("/c/f.bin", false, 1.7, 4.0),
        ("/d/f.bin?r=4k", false, 2.7, 5.0),
        ("/d/f.bin", false, 0.0, 0.7),
        ("/p/x", false, 0.7, 3.0),
        ("/px/xal", false, 1.7, 4.0),
        ("/px/plain", false, 0.0, 0.7),
        ("/n/f.bin", false, 0.0, 0.7),
        ("/a/f.bin", true, 0.7, 3.0),
    ];
    let handles: Vec<_> = runs.iter().map(|(p, h2, _, _)| timed(p, *h2)).collect();
    for ((path, h2, lo, hi), h) in runs.iter().zip(handles) {
        let (len, secs) = h.join().unwrap();
        assert_eq!(len, 15000, "{path} h2={h2}");
        assert!(secs >= *lo && secs < *hi, "{path} h2={h2}: {secs:.3} s, want [{lo}, {hi})");
    }
    let lines = s.wait_access_lines(runs.len());
    for want in
        ["/a/f.bin 200 15000 10240", "/c/f.bin 200 15000 5120", "/d/f.bin 200 15000 4096", "/n/f.bin 200 15000 0"]
    {
        assert!(lines.iter().any(|l| l == want), "{want:?} in {lines:?}");
    }
}

#[test]
fn http2_requests_are_limited_and_delayed_too() {
    let s = builder()
        .ports(2)
        .http(&format!(
            "{LOG}limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n\
             limit_req_zone $binary_remote_addr zone=two:1m rate=10r/s;\n\
             server {{ listen 127.0.0.1:{{port0}}; listen 127.0.0.1:{{port1}} http2; server_name localhost;\n\
             location /r {{ limit_req zone=one; empty_gif; }}\n\
             location /d {{ limit_req zone=two burst=5; empty_gif; }} }}"
        ))
        .start();
    let port = s.ports[1];
    // One curl per request: curl 7.88 fails a second transfer on a reused
    // prior-knowledge h2 connection (against nginx too).
    let get = move |p: &str| {
        let url = format!("http://127.0.0.1:{port}{p}");
        curl(&["--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", &url]).text()
    };
    assert_eq!([get("/r"), get("/r")], ["200 2", "503 2"]);
    // Three at once: the second and third wait 100 and 200 ms.
    let t = Instant::now();
    let all: Vec<_> = (0..3).map(|_| std::thread::spawn(move || get("/d"))).collect();
    for h in all {
        assert_eq!(h.join().unwrap(), "200 2");
    }
    let secs = t.elapsed().as_secs_f64();
    assert!(secs > 0.15 && secs < 3.0, "{secs}");
    let lines = s.wait_access_lines(5);
    assert_eq!(lines.iter().filter(|l| *l == "200 DELAYED -").count(), 2, "{lines:?}");
}
