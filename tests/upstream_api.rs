//! NGINX Plus's run-time API (`api write=on`) on upstreams with a `zone`,
//! the `state` file, `drain`, `slow_start`, and the zone's peer state
//! shared by every worker (`max_conns` counted across workers). Clients
//! are curl (the API) and wrk (traffic while servers come and go); the
//! origins count what reaches them. nginx's open-source builds have no
//! `api` directive, `state` or `drain` (NGINX Plus only), so there is no
//! nginx run of these: the shapes follow nginx.org's ngx_http_api_module
//! page.

mod common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// curl's status and body for one API call.
fn curl(s: &TestServer, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "-", "-w", "\n%{http_code}", "-X", method]);
    if let Some(b) = body {
        c.args(["-H", "Content-Type: application/json", "--data-binary", b]);
    }
    c.arg(s.url(path));
    let out = c.output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn server(upstream: &str, extra: &str) -> TestServer {
    builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"upstream u {{
                zone u 64k;
                {upstream}
            }}
            upstream fixed {{ server 127.0.0.1:1; }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    proxy_pass http://u;
                    proxy_next_upstream error timeout http_502;
                }}
                location /api/ {{ api write=on; allow 127.0.0.1; deny all; }}
                location /ro/ {{ api; }}
                location /denied/ {{ api write=on; deny all; }}
                location /auth/ {{ api write=on; auth_basic "api"; auth_basic_user_file htpasswd; }}
                location = /status {{ sluice_status; }}
                {extra}
            }}"#
        ))
        .file("conf/htpasswd", "admin:{PLAIN}secret\n")
        .start()
}

fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        thread::sleep(Duration::from_millis(100));
    }
}

fn assert_no_failures(res: &WrkResult, s: &TestServer) {
    assert!(res.requests > 100, "too few requests:\n{}", res.output);
    assert_eq!(res.error_count(), 0, "socket errors: {:?}\n{}", res.socket_errors, res.output);
    assert!(res.non_2xx.is_none(), "failed requests: {:?}\n{}\n{}", res.non_2xx, res.output, s.error_log());
}

fn server_obj(id: u64, port: u16, extra: &str) -> String {
    format!(
        "{{\"id\":{id},\"server\":\"127.0.0.1:{port}\",\"weight\":1,\"max_conns\":0,\"max_fails\":1,\"fail_timeout\":\"10s\",\"slow_start\":\"0s\",\"route\":\"\",\"backup\":false,\"down\":{extra}}}"
    )
}

#[test]
fn add_drain_and_remove_under_load() {
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let s = server(&format!("server 127.0.0.1:{};", a.port), "");
    let (code, list) = curl(&s, "GET", "/api/9/http/upstreams/u/servers", None);
    assert_eq!((code, list.as_str()), (200, format!("[{}]", server_obj(0, a.port, "false")).as_str()));

    let wrk = wrk_start(&["-t2", "-c16", "-d6s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(800));
    // Added: it gets traffic at once, from every worker.
    let (code, added) =
        curl(&s, "POST", "/api/9/http/upstreams/u/servers", Some(&format!("{{\"server\":\"127.0.0.1:{}\"}}", b.port)));
    assert_eq!((code, added), (201, server_obj(1, b.port, "false")));
    until(Duration::from_secs(2), "the added server gets traffic", || b.count() > 50);

    // Drained: no new requests; the status page says so.
    let (code, drained) = curl(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"drain\":true}"));
    assert_eq!(code, 200, "{drained}");
    assert!(drained.ends_with(",\"down\":false,\"drain\":true}"), "{drained}");
    let status = s.get("/status").text();
    assert!(status.contains("\"state\":\"draining\""), "{status}");
    thread::sleep(Duration::from_millis(300));
    let after = a.count();
    thread::sleep(Duration::from_millis(800));
    assert_eq!(a.count(), after, "a drained server still gets requests");

    // Removed: the rest of the list comes back.
    let (code, rest) = curl(&s, "DELETE", "/api/9/http/upstreams/u/servers/0", None);
    assert_eq!((code, rest), (200, format!("[{}]", server_obj(1, b.port, "false"))));
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    // New connections (either worker): only the added server.
    let a_now = a.count();
    for _ in 0..20 {
        assert_eq!(s.get("/").text(), "b");
    }
    assert_eq!(a.count(), a_now);
    // Put back down and up with PATCH.
    let (code, down) = curl(&s, "PATCH", "/api/9/http/upstreams/u/servers/1", Some("{\"down\":true}"));
    assert_eq!((code, down), (200, server_obj(1, b.port, "true")));
    assert_eq!(s.get("/").status, 502);
    let (code, _) = curl(&s, "PATCH", "/api/9/http/upstreams/u/servers/1", Some("{\"down\":false,\"weight\":4}"));
    assert_eq!(code, 200);
    assert_eq!(s.get("/").text(), "b");
}

#[test]
fn errors_in_plus_shapes_and_protected_locations() {
    let a = Origin::ok("a");
    let s = server(&format!("server 127.0.0.1:{};", a.port), "");
    let code_text = |(code, body): (u16, String)| {
        let v = body.split("\"error\":{").nth(1).unwrap_or("").to_string();
        assert!(body.contains("\"href\":\"https://nginx.org/en/docs/http/ngx_http_api_module.html\""), "{body}");
        assert!(body.contains("\"request_id\":\""), "{body}");
        (code, v.split('}').next().unwrap_or("").to_string())
    };
    let p = "/api/9/http/upstreams/u/servers";
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"server\":"))),
        (415, "\"status\":415,\"text\":\"json error\",\"code\":\"JsonError\"".into())
    );
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"server\":\"127.0.0.1:9\",\"colour\":\"red\"}"))),
        (
            400,
            "\"status\":400,\"text\":\"unknown parameter \\\"colour\\\"\",\"code\":\"UpstreamConfFormatError\"".into()
        )
    );
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"weight\":2}"))),
        (
            400,
            "\"status\":400,\"text\":\"missing \\\"server\\\" argument\",\"code\":\"UpstreamConfFormatError\"".into()
        )
    );
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"server\":\"127.0.0.1:9\",\"weight\":0}"))),
        (400, "\"status\":400,\"text\":\"invalid \\\"weight\\\"\",\"code\":\"UpstreamBadWeight\"".into())
    );
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"server\":\"127.0.0.1:99999\"}"))).1,
        "\"status\":400,\"text\":\"host not found in upstream \\\"127.0.0.1:99999\\\"\",\"code\":\"UpstreamBadAddress\""
    );
    assert_eq!(
        code_text(curl(&s, "POST", p, Some("{\"server\":\"app.example:80\"}"))).1,
        "\"status\":400,\"text\":\"no resolver defined to resolve \\\"app.example\\\"\",\"code\":\"UpstreamBadAddress\""
    );
    assert_eq!(
        code_text(curl(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"backup\":true}"))).1,
        "\"status\":400,\"text\":\"the \\\"backup\\\" parameter cannot be changed\",\"code\":\"UpstreamConfFormatError\""
    );
    assert_eq!(
        code_text(curl(&s, "GET", "/api/9/http/upstreams/u/servers/7", None)),
        (404, "\"status\":404,\"text\":\"server not found\",\"code\":\"UpstreamServerNotFound\"".into())
    );
    assert_eq!(
        code_text(curl(&s, "GET", "/api/9/http/upstreams/nope/servers", None)),
        (404, "\"status\":404,\"text\":\"upstream not found\",\"code\":\"UpstreamNotFound\"".into())
    );
    assert_eq!(
        code_text(curl(&s, "GET", "/api/9/http/upstreams/fixed/servers", None)),
        (400, "\"status\":400,\"text\":\"upstream is static\",\"code\":\"UpstreamStatic\"".into())
    );
    assert_eq!(
        code_text(curl(&s, "GET", "/api/99/http/upstreams/u/servers", None)).1,
        "\"status\":404,\"text\":\"unknown version\",\"code\":\"UnknownVersion\""
    );
    assert_eq!(
        code_text(curl(&s, "GET", "/api/9/http/nothing", None)).1,
        "\"status\":404,\"text\":\"path not found\",\"code\":\"PathNotFound\""
    );
    assert_eq!(
        code_text(curl(&s, "DELETE", "/ro/9/http/upstreams/u/servers/0", None)),
        (405, "\"status\":405,\"text\":\"method disabled\",\"code\":\"MethodDisabled\"".into())
    );
    // The read-only location reads.
    assert_eq!(curl(&s, "GET", "/ro/9/http/upstreams/u/servers", None).0, 200);
    assert_eq!(curl(&s, "GET", "/api/", None), (200, "[1,2,3,4,5,6,7,8,9]".into()));
    // Protected as any location: nothing changed by the refused clients.
    assert_eq!(curl(&s, "DELETE", "/denied/9/http/upstreams/u/servers/0", None).0, 403);
    assert_eq!(curl(&s, "DELETE", "/auth/9/http/upstreams/u/servers/0", None).0, 401);
    assert!(s.error_log().contains("access forbidden by rule"));
    assert_eq!(s.get("/").text(), "a");
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-u", "admin:secret"]);
    c.arg(s.url("/auth/9/http/upstreams/u/servers"));
    assert_eq!(String::from_utf8_lossy(&c.output().unwrap().stdout), "200");
}

#[test]
fn concurrent_changes_from_two_clients() {
    let a = Origin::ok("a");
    let s = server(&format!("server 127.0.0.1:{};", a.port), "");
    let url = s.url("/api/9/http/upstreams/u/servers");
    let posters: Vec<_> = (0..2)
        .map(|t| {
            let url = url.clone();
            thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..15 {
                    let body = format!("{{\"server\":\"127.0.0.{}:{}\",\"down\":true}}", 2 + t, 2000 + i);
                    let out = Command::new("curl")
                        .args(["-s", "-X", "POST", "--data-binary", &body, &url])
                        .output()
                        .expect("curl");
                    let text = String::from_utf8_lossy(&out.stdout).into_owned();
                    let id: u64 = text
                        .strip_prefix("{\"id\":")
                        .and_then(|r| r.split(',').next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("{text}"));
                    ids.push(id);
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<u64> = posters.into_iter().flat_map(|t| t.join().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids, (1..=30).collect::<Vec<u64>>());
    let (_, list) = curl(&s, "GET", "/api/9/http/upstreams/u/servers", None);
    assert_eq!(list.matches("\"id\":").count(), 31);
    // Every added server is down: traffic still goes to the first alone.
    for _ in 0..10 {
        assert_eq!(s.get("/").text(), "a");
    }
}

#[test]
fn the_state_file_survives_a_restart() {
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let mut s = builder()
        .main("worker_processes 2;")
        .http(
            r#"upstream u { zone u 64k; state state/u.conf; }
            server {
                listen 127.0.0.1:{port};
                location / { proxy_pass http://u; }
                location /api/ { api write=on; }
            }"#,
        )
        .file("state/u.conf", format!("server 127.0.0.1:{} weight=2;\n", a.port))
        .start();
    assert_eq!(s.get("/").text(), "a");
    // Workers (user nobody) cannot write into a directory of root's: the
    // change is made, and the failure is logged.
    let (code, _) = curl(
        &s,
        "POST",
        "/api/9/http/upstreams/u/servers",
        Some(&format!("{{\"server\":\"127.0.0.1:{}\",\"slow_start\":\"0s\"}}", b.port)),
    );
    assert_eq!(code, 201);
    s.wait_error_log("u.conf.");
    assert!(s.error_log().contains("[crit]") && s.error_log().contains("(13: Permission denied)"), "{}", s.error_log());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(s.path("state"), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, _) = curl(&s, "DELETE", "/api/9/http/upstreams/u/servers/0", None);
    assert_eq!(code, 200);
    let state = std::fs::read_to_string(s.path("state/u.conf")).unwrap();
    assert_eq!(state, format!("server 127.0.0.1:{} weight=1 max_conns=0 max_fails=1 fail_timeout=10s;\n", b.port));
    // No temporary file left beside it.
    assert_eq!(std::fs::read_dir(s.path("state")).unwrap().count(), 1);
    s.quit();
    s.relaunch().expect("restart");
    let (_, list) = curl(&s, "GET", "/api/9/http/upstreams/u/servers", None);
    assert!(list.contains(&format!("\"server\":\"127.0.0.1:{}\"", b.port)), "{list}");
    for _ in 0..5 {
        assert_eq!(s.get("/").text(), "b");
    }
    // A corrupt file is refused at start, naming the file and line.
    s.write("state/u.conf", "server 127.0.0.1:1;\nserver 127.0.0.1:2 weight=x;\n");
    let out = s.run(&["-t"]);
    assert!(!out.status.success());
    let err = stderr_of(&out);
    assert!(
        err.contains("invalid value \"weight=x\" in \"server\" directive") && err.contains("state/u.conf:2"),
        "{err}"
    );
    s.write("state/u.conf", "location / {}\n");
    let err = stderr_of(&s.run(&["-t"]));
    assert!(err.contains("unknown directive \"location\"") && err.contains("u.conf:1"), "{err}");
}

/// Without a `state` file, API changes live until the next reload, as
/// with NGINX Plus: a reload goes back to the configuration's servers (the
/// added one gets no more traffic, its id is free again), and the API
/// keeps working on the new configuration without a failed request.
#[test]
fn a_reload_without_a_state_file_goes_back_to_the_configuration() {
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let s = server(&format!("server 127.0.0.1:{};", a.port), "");
    let wrk = wrk_start(&["-t1", "-c8", "-d5s", "--timeout", "3s", &s.url("/")]);
    thread::sleep(Duration::from_millis(500));
    let (code, added) =
        curl(&s, "POST", "/api/9/http/upstreams/u/servers", Some(&format!("{{\"server\":\"127.0.0.1:{}\"}}", b.port)));
    assert_eq!((code, added), (201, server_obj(1, b.port, "false")));
    let (code, _) = curl(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"weight\":3}"));
    assert_eq!(code, 200);
    until(Duration::from_secs(2), "the added server gets traffic", || b.count() > 20);

    s.signal("reload");
    let configured = format!("[{}]", server_obj(0, a.port, "false"));
    until(Duration::from_secs(5), "the configuration's servers are back", || {
        curl(&s, "GET", "/api/9/http/upstreams/u/servers", None) == (200, configured.clone())
    });
    // Old workers finish what they hold; then only the configured server.
    until(Duration::from_secs(5), "the added server gets no more traffic", || {
        let before = b.count();
        thread::sleep(Duration::from_millis(400));
        b.count() == before
    });
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert_no_failures(&res, &s);
    for _ in 0..10 {
        assert_eq!(s.get("/").text(), "a");
    }
    // The API works on the new configuration: the id is given out again.
    let (code, again) =
        curl(&s, "POST", "/api/9/http/upstreams/u/servers", Some(&format!("{{\"server\":\"127.0.0.1:{}\"}}", b.port)));
    assert_eq!((code, again), (201, server_obj(1, b.port, "false")));
    until(Duration::from_secs(2), "the server added after the reload gets traffic", || s.get("/").text() == "b");
}

#[test]
fn config_errors() {
    assert_refused(
        "upstream u { zone u 64k; state u.state; server 127.0.0.1:1; }",
        "\"state\" directive is incompatible with \"server\"",
    );
    assert_refused("upstream u { state u.state; }", "\"state\" requires upstream \"u\" to be in shared memory");
    // (`drain` works without a zone, as in NGINX Plus: upstream_sticky.rs.)
    assert_refused("upstream u { server 127.0.0.1:1 slow_start=10s; }", "\"slow_start\" requires upstream \"u\" in");
    assert_refused(
        "upstream u { zone u 64k; server 127.0.0.1:1; } server { listen 127.0.0.1:{port}; location / { api write=maybe; } }",
        "invalid parameter \"write=maybe\"",
    );
}

/// With a zone, `max_conns` counts the connections of every worker (two
/// here): of six requests at once to a slow origin with max_conns=1, one
/// reaches it and the others get "no live upstreams", whichever worker
/// took them.
#[test]
fn max_conns_counts_every_worker() {
    let slow = Origin::start(|_| Reply::ok("slow").after(Duration::from_millis(1500)));
    let s = server(&format!("server 127.0.0.1:{} max_conns=1;", slow.port), "");
    let url = s.url("/");
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let url = url.clone();
            thread::spawn(move || {
                let out = Command::new("curl").args(["-s", "-o", "/dev/null", "-w", "%{http_code}", &url]).output();
                String::from_utf8_lossy(&out.expect("curl").stdout).into_owned()
            })
        })
        .collect();
    let mut codes: Vec<String> = clients.into_iter().map(|t| t.join().unwrap()).collect();
    codes.sort();
    assert_eq!(codes, ["200", "502", "502", "502", "502", "502"], "{}", s.error_log());
    assert_eq!(slow.count(), 1);
}

/// `slow_start`: an added server's share grows from nothing to its weight.
#[test]
fn slow_start_ramps_an_added_server_up() {
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let s = server(&format!("server 127.0.0.1:{};", a.port), "");
    let (code, _) = curl(
        &s,
        "POST",
        "/api/9/http/upstreams/u/servers",
        Some(&format!("{{\"server\":\"127.0.0.1:{}\",\"slow_start\":\"4s\"}}", b.port)),
    );
    assert_eq!(code, 201);
    let share = |n: usize| {
        let b0 = b.count();
        for _ in 0..n {
            s.get("/");
        }
        (b.count() - b0) as f64 / n as f64
    };
    let early = share(60);
    assert!(early < 0.2, "early share {early}");
    thread::sleep(Duration::from_millis(4200));
    let late = share(100);
    assert!((0.35..=0.65).contains(&late), "late share {late}");
}

/// The API on a `stream` upstream: `/api/N/stream/upstreams/NAME/servers`;
/// new TCP sessions follow the change.
#[test]
fn stream_upstreams_through_the_api() {
    let a = Origin::ok("a");
    let b = Origin::ok("b");
    let s = builder()
        .main(&format!(
            r#"stream {{
                upstream s {{ zone s 64k; server 127.0.0.1:{}; }}
                server {{ listen 127.0.0.1:{{port1}}; proxy_pass s; }}
            }}"#,
            a.port
        ))
        .http("server { listen 127.0.0.1:{port}; location /api/ { api write=on; } }")
        .ports(2)
        .start();
    let url = format!("http://127.0.0.1:{}/", s.ports[1]);
    let get = || {
        let out = Command::new("curl").args(["-s", "-m", "3", &url]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(get(), "a");
    let p = "/api/9/stream/upstreams/s/servers";
    // A stream server names its port.
    let (code, body) = curl(&s, "POST", p, Some("{\"server\":\"127.0.0.1\"}"));
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("\"code\":\"UpstreamBadAddress\""), "{body}");
    let (code, _) = curl(&s, "POST", p, Some(&format!("{{\"server\":\"127.0.0.1:{}\"}}", b.port)));
    assert_eq!(code, 201);
    let (code, _) = curl(&s, "DELETE", &format!("{p}/0"), None);
    assert_eq!(code, 200);
    for _ in 0..5 {
        assert_eq!(get(), "b");
    }
    // The http upstreams are another family's.
    assert_eq!(curl(&s, "GET", "/api/9/http/upstreams/s/servers", None).0, 404);
}
