//! Tengine's active health checks (`check`, `check_http_send`,
//! `check_http_expect_alive`, `check_status`) against real origins on
//! loopback: peers going down and back up as origins die and return, the
//! checker's verdict steering the balancer (including a peer that still
//! serves requests but fails its check), `default_down`, tcp checks and
//! `port=`, backups and "no live upstreams" when every checked peer is down,
//! one checker for the whole process whatever `worker_processes`, state
//! carried over a reload, the status page's formats, and `-t` refusing bad
//! parameters with Tengine's messages.
//!
//! Expected behaviour follows Tengine's ngx_http_upstream_check_module
//! (there is no Tengine package to compare against here); the origins are
//! `common::origin::Origin`, which record every request, check probes
//! included (`GET / HTTP/1.0` unless `check_http_send` says otherwise).

mod common;

use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

/// Answers the check path `/` with 200 and anything else with `tag`.
fn named(tag: &'static str) -> impl Fn(&Req) -> Reply + Send + Sync + 'static {
    move |r| if r.target() == "/" { Reply::ok("alive") } else { Reply::ok(tag) }
}

/// Requests the proxy passed on (under `/app/`), as opposed to check probes.
fn proxied(o: &Origin) -> usize {
    o.requests().iter().filter(|r| r.target().starts_with("/app/")).count()
}

fn probes(o: &Origin) -> usize {
    o.requests().iter().filter(|r| r.line() == "GET / HTTP/1.0").count()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    free_port()
}

/// One line of the csv status page.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    index: usize,
    upstream: String,
    name: String,
    status: String,
    rise: u32,
    fall: u32,
    kind: String,
    port: u16,
}

fn rows(s: &TestServer) -> Vec<Row> {
    let r = s.get("/status?format=csv");
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/plain")), "{}", r.head);
    r.text()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 8, "csv line {l:?}");
            Row {
                index: f[0].parse().unwrap(),
                upstream: f[1].into(),
                name: f[2].into(),
                status: f[3].into(),
                rise: f[4].parse().unwrap(),
                fall: f[5].parse().unwrap(),
                kind: f[6].into(),
                port: f[7].parse().unwrap(),
            }
        })
        .collect()
}

fn row(s: &TestServer, upstream: &str, port: u16) -> Row {
    let name = format!("127.0.0.1:{port}");
    let all = rows(s);
    all.iter().find(|r| r.upstream == upstream && r.name == name).cloned().unwrap_or_else(|| {
        panic!("no {upstream}/{name} on the status page: {all:?}");
    })
}

/// Polls the status page until the peer has `want` status (8 s at most).
fn wait_state(s: &TestServer, upstream: &str, port: u16, want: &str) -> Row {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let r = row(s, upstream, port);
        if r.status == want {
            return r;
        }
        if Instant::now() > deadline {
            panic!("{upstream}/127.0.0.1:{port} is still {r:?}, want {want}; error log:\n{}", s.error_log());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// `n` requests through the proxy; every one must be a 200. Returns the bodies.
fn app_requests(s: &TestServer, prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let r = s.get(&format!("{prefix}{i}"));
            assert_eq!(r.status, 200, "request {i}: {}\n{}\nerror log:\n{}", r.head, r.text(), s.error_log());
            r.text()
        })
        .collect()
}

/// Lines of the error log about a proxied request to this peer failing.
fn proxy_errors_for(s: &TestServer, port: u16) -> usize {
    let needle = format!("upstream: \"http://127.0.0.1:{port}/");
    s.error_log().lines().filter(|l| l.contains(&needle)).count()
}

#[test]
fn dead_origin_goes_down_then_comes_back_and_the_status_page_says_so() {
    let a = Origin::start(named("a"));
    let b = Origin::start(named("b"));
    let c = Origin::start(named("c"));
    let b_port = b.port;
    let s = proxy(
        r#"
        upstream backend {
            server 127.0.0.1:%A%;
            server 127.0.0.1:%B%;
            server 127.0.0.1:%C%;
            check interval=100 rise=2 fall=2 timeout=500 type=http;
        }
        server {
            listen 127.0.0.1:{port};
            location /app/ { proxy_pass http://backend; }
            location = /status { check_status; }
            location = /status.json { check_status json; }
        }"#,
        &[("%A%", a.port), ("%B%", b.port), ("%C%", c.port)],
    );
    for p in [a.port, b.port, c.port] {
        wait_state(&s, "backend", p, "up");
    }
    let mut checks = Checks::new();
    checks.run("json", || {
        let r = s.get("/status.json");
        assert_eq!((r.status, r.header("Content-Type")), (200, Some("application/json")), "{}", r.head);
        let t = r.text();
        assert!(t.starts_with("{\"servers\": {\n  \"total\": 3,\n  \"up\": 3,\n  \"down\": 0,\n  \"generation\": 1,\n  \"server\": [\n"), "{t}");
        for (i, p) in [a.port, b.port, c.port].iter().enumerate() {
            let want = format!("{{\"index\": {i}, \"upstream\": \"backend\", \"name\": \"127.0.0.1:{p}\", \"status\": \"up\", \"rise\": ");
            assert!(t.contains(&want), "{want} in\n{t}");
        }
        assert!(t.contains(", \"fall\": 0, \"type\": \"http\", \"port\": 0}\n  ]\n}}\n"), "{t}");
        // ?format= overrides the location's format.
        assert!(s.get("/status?format=json").text().starts_with("{\"servers\": {"));
    });
    checks.run("html", || {
        let r = s.get("/status");
        assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/html")), "{}", r.head);
        let t = r.text();
        assert!(t.contains("<h2>Check upstream server number: 3, generation: 1</h2>"), "{t}");
        for h in ["Index", "Upstream", "Name", "Status", "Rise counts", "Fall counts", "Check type", "Check port"] {
            assert!(t.contains(&format!("<th>{h}</th>")), "{h}:\n{t}");
        }
        assert!(t.contains(&format!("<td>backend</td>\n    <td>127.0.0.1:{}</td>\n    <td>up</td>", a.port)), "{t}");
    });
    checks.run("HEAD, POST and bad arguments", || {
        let r = req(&s, "HEAD", "/status.json", &[], b"");
        assert_eq!((r.status, r.header("Content-Type"), r.body.len()), (200, Some("application/json"), 0));
        assert_eq!(req(&s, "POST", "/status", &["Content-Length: 0"], b"").status, 405);
        let r = s.get("/status.json?format=xml");
        assert!(r.text().starts_with("{\"servers\""), "a bad format falls back to the location's");
        s.wait_error_log("http upstream check, bad argument: \"xml\"");
    });
    checks.finish();

    drop(b);
    let row_b = wait_state(&s, "backend", b_port, "down");
    assert!(row_b.fall >= 2 && row_b.rise == 0, "{row_b:?}");
    let log = s.wait_error_log(&format!("disable check peer: 127.0.0.1:{b_port} \n"));
    assert!(log.contains(&format!("connect() to 127.0.0.1:{b_port} failed (111: Connection refused)")), "{log}");
    let t = s.get("/status.json?status=down").text();
    assert!(t.contains("\"total\": 1,") && t.contains(&format!("127.0.0.1:{b_port}")), "{t}");

    // The checker's verdict keeps requests off the dead peer: no try, so no
    // failed connect in the error log, and no 5xx.
    let (a0, c0, errors0) = (proxied(&a), proxied(&c), proxy_errors_for(&s, b_port));
    let bodies = app_requests(&s, "/app/", 30);
    assert!(bodies.iter().all(|b| b == "a" || b == "c"), "{bodies:?}");
    assert_eq!((proxied(&a) - a0) + (proxied(&c) - c0), 30);
    assert!(proxied(&a) > a0 && proxied(&c) > c0, "both live peers serve");
    assert_eq!(proxy_errors_for(&s, b_port), errors0, "the proxy tried the down peer:\n{}", s.error_log());

    // Back on the same port: up after `rise` checks, and in the rotation again.
    let b = Origin::start_on(b_port, named("b"));
    wait_state(&s, "backend", b_port, "up");
    s.wait_error_log(&format!("enable check peer: 127.0.0.1:{b_port} \n"));
    let bodies = app_requests(&s, "/app/again/", 30);
    let from_b = bodies.iter().filter(|b| *b == "b").count();
    assert!((5..=15).contains(&from_b), "b served {from_b} of 30: {bodies:?}");
    assert_eq!(proxied(&b), from_b);
}

#[test]
fn a_peer_failing_its_check_gets_no_traffic_though_it_serves() {
    // x answers 500 on the check path but 200 to everything else; y is healthy.
    let x = Origin::start(|r| if r.target() == "/" { Reply::http(500, &[], "no") } else { Reply::ok("x") });
    let y = Origin::start(named("y"));
    // z is checked with a custom request (escapes turned into CR LF) and
    // answers it with a redirect, which the default expectation accepts.
    let z =
        Origin::start(
            |r| if r.target() == "/health" { Reply::http(302, &["Location: /"], "") } else { Reply::ok("z") },
        );
    let s = proxy(
        r#"
        upstream strict {
            server 127.0.0.1:%X%;
            server 127.0.0.1:%Y%;
            check interval=100 rise=1 fall=2 timeout=500 type=http default_down=false;
            check_http_expect_alive http_2xx;
        }
        upstream custom {
            check interval=100 rise=1 fall=1 timeout=500 type=http;
            check_http_send "HEAD /health HTTP/1.0\r\nX-Check: \"1\"\r\n\r\n";
            server 127.0.0.1:%Z%;
        }
        server {
            listen 127.0.0.1:{port};
            location /app/ { proxy_pass http://strict; }
            location /z/ { proxy_pass http://custom; }
            location = /status { check_status csv; }
        }"#,
        &[("%X%", x.port), ("%Y%", y.port), ("%Z%", z.port)],
    );
    let rx = wait_state(&s, "strict", x.port, "down");
    assert_eq!(rx.kind, "http");
    s.wait_error_log(&format!("check protocol http error with peer: 127.0.0.1:{} \n", x.port));
    wait_state(&s, "strict", y.port, "up");
    let bodies = app_requests(&s, "/app/", 20);
    assert!(bodies.iter().all(|b| b == "y"), "{bodies:?}");
    assert_eq!(proxied(&x), 0, "the peer failing its check was used");

    wait_state(&s, "custom", z.port, "up");
    let q = z.requests().into_iter().find(|r| r.target() == "/health").expect("z was never checked");
    assert_eq!(q.line(), "HEAD /health HTTP/1.0");
    assert_eq!(q.header("X-Check"), Some("\"1\""), "{}", q.head);
    assert_eq!(probes(&z), 0, "the default request was sent instead of check_http_send");
    assert_eq!(app_requests(&s, "/z/", 1), ["z"]);
}

#[test]
fn default_down_peers_wait_for_rise() {
    let a = Origin::start(named("a"));
    let dead = closed_port();
    let s = proxy(
        r#"
        upstream cold {
            server 127.0.0.1:%A%;
            check interval=1500 rise=2 fall=2 timeout=500 type=http;
        }
        upstream warm {
            server 127.0.0.1:%A%;
            server 127.0.0.1:%D%;
            check interval=100 rise=2 fall=2 timeout=500 type=http default_down=false;
        }
        server {
            listen 127.0.0.1:{port};
            location /app/ { proxy_pass http://cold; }
            location /warm/ { proxy_pass http://warm; }
            location = /status { check_status; }
        }"#,
        &[("%A%", a.port), ("%D%", dead)],
    );
    // Tengine's default: down until `rise` checks passed (the second one is
    // 1.5 s away), so the upstream has no live peer yet.
    let r = row(&s, "cold", a.port);
    assert_eq!((r.status.as_str(), r.fall), ("down", 0), "{r:?}");
    let resp = s.get("/app/early");
    assert_eq!(resp.status, 502, "{}", resp.head);
    s.wait_error_log("no live upstreams while connecting to upstream");
    assert_eq!(proxied(&a), 0);
    wait_state(&s, "cold", a.port, "up");
    assert_eq!(app_requests(&s, "/app/", 3), ["a", "a", "a"]);
    // default_down=false: up from the start; a dead peer goes down after
    // `fall` checks.
    assert_eq!(row(&s, "warm", a.port).status, "up");
    let r = wait_state(&s, "warm", dead, "down");
    assert!(r.fall >= 2, "{r:?}");
    // It was up first: a peer that starts down is never "disabled".
    s.wait_error_log(&format!("disable check peer: 127.0.0.1:{dead} \n"));
    assert!(!s.error_log().contains(&format!("disable check peer: 127.0.0.1:{} ", a.port)));
}

#[test]
fn tcp_checks_and_port() {
    let a = Origin::start(named("a"));
    let dead = closed_port();
    let elsewhere = closed_port();
    let s = proxy(
        r#"
        upstream plain {
            server 127.0.0.1:%A%;
            server 127.0.0.1:%D%;
            check interval=100 rise=1 fall=1 timeout=500;
        }
        upstream ported {
            server 127.0.0.1:%E%;
            check interval=100 rise=1 fall=1 timeout=500 port=%A%;
        }
        server {
            listen 127.0.0.1:{port};
            location /app/ { proxy_pass http://plain; }
            location = /status { check_status; }
        }"#,
        &[("%A%", a.port), ("%D%", dead), ("%E%", elsewhere)],
    );
    let up = wait_state(&s, "plain", a.port, "up");
    assert_eq!((up.kind.as_str(), up.port, up.index), ("tcp", 0, 0));
    let down = wait_state(&s, "plain", dead, "down");
    assert_eq!(down.index, 1);
    s.wait_error_log(&format!("connect() to 127.0.0.1:{dead} failed (111: Connection refused)"));
    // A tcp check sends nothing.
    assert_eq!(a.requests().len(), 0);
    // port=: the server's own port is closed, the check port answers. The
    // page names the server, as Tengine's does, and shows the check port.
    let r = wait_state(&s, "ported", elsewhere, "up");
    assert_eq!((r.port, r.index), (a.port, 2));
}

#[test]
fn backups_take_over_and_all_down_is_no_live_upstreams() {
    let spare = Origin::start(named("spare"));
    let (dead1, dead2) = (closed_port(), closed_port());
    let s = proxy(
        r#"
        upstream withbackup {
            server 127.0.0.1:%D1%;
            server 127.0.0.1:%S% backup;
            check interval=100 rise=1 fall=1 timeout=500 type=http default_down=false;
        }
        upstream alldead {
            server 127.0.0.1:%D1%;
            server 127.0.0.1:%D2%;
            server 127.0.0.1:%S% down;
            check interval=100 rise=1 fall=1 timeout=500;
        }
        server {
            listen 127.0.0.1:{port};
            location /app/ { proxy_pass http://withbackup; }
            location /dead/ { proxy_pass http://alldead; }
            location = /status { check_status; }
        }"#,
        &[("%D1%", dead1), ("%D2%", dead2), ("%S%", spare.port)],
    );
    wait_state(&s, "withbackup", dead1, "down");
    wait_state(&s, "withbackup", spare.port, "up");
    assert_eq!(app_requests(&s, "/app/", 5), ["spare"; 5]);
    // A `down` server is not checked (nor listed), as in Tengine.
    assert!(!rows(&s).iter().any(|r| r.upstream == "alldead" && r.name.ends_with(&format!(":{}", spare.port))));
    wait_state(&s, "alldead", dead1, "down");
    wait_state(&s, "alldead", dead2, "down");
    let errors = proxy_errors_for(&s, dead1) + proxy_errors_for(&s, dead2);
    let r = s.get("/dead/x");
    assert_eq!(r.status, 502, "{}", r.head);
    s.wait_error_log("no live upstreams while connecting to upstream, client: 127.0.0.1");
    assert_eq!(proxy_errors_for(&s, dead1) + proxy_errors_for(&s, dead2), errors, "a down peer was tried");
}

#[test]
fn one_checker_for_the_process_whatever_the_workers() {
    let a = Origin::start(named("a"));
    let s = builder()
        .main("worker_processes 4;")
        .http(&sub(
            r#"
            upstream backend {
                server 127.0.0.1:%A%;
                check interval=100 rise=1 fall=1 timeout=500 type=http;
            }
            server {
                listen 127.0.0.1:{port};
                location /app/ { proxy_pass http://backend; }
                location = /status { check_status; }
            }"#,
            &[("%A%", a.port)],
        ))
        .start();
    wait_state(&s, "backend", a.port, "up");
    let window = Duration::from_secs(2);
    let before = probes(&a);
    std::thread::sleep(window);
    let n = probes(&a) - before;
    // 2 s / 100 ms = 20 probes; one checker per worker would make 80.
    assert!((12..=30).contains(&n), "{n} probes in {window:?}");
    assert_eq!(app_requests(&s, "/app/", 4), ["a"; 4]);
}

#[test]
fn reload_carries_the_checked_state() {
    let a = Origin::start(named("a"));
    let c = Origin::start(named("c"));
    let dead = closed_port();
    let conf = |extra: &str| {
        sub(
            &format!(
                r#"daemon off;
            pid logs/sluice.pid;
            error_log logs/error.log info;
            events {{}}
            http {{
            access_log logs/access.log;
            upstream backend {{
                server 127.0.0.1:%A%;
                server 127.0.0.1:%D%;
                check interval=400 rise=3 fall=3 timeout=300 type=http;
            }}
            {extra}
            server {{
                listen 127.0.0.1:{{port}};
                location /app/ {{ proxy_pass http://backend; }}
                location = /status {{ check_status; }}
            }}
            }}"#
            ),
            &[("%A%", a.port), ("%D%", dead), ("%C%", c.port)],
        )
    };
    let mut s = builder().whole(&conf("")).start();
    let before = wait_state(&s, "backend", a.port, "up");
    assert!(before.rise >= 3, "{before:?}");
    wait_state(&s, "backend", dead, "down");

    // The new configuration adds an upstream; the old one's peers keep their
    // state (a fresh start would hold them down for 3 x 400 ms).
    s.write_conf(&conf(
        "upstream fresh { server 127.0.0.1:%C%; check interval=400 rise=3 fall=3 timeout=300 type=http; }",
    ));
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !s.get("/status").text().contains("generation: 2<") {
        assert!(Instant::now() < deadline, "reload not applied:\n{}", s.error_log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let after = row(&s, "backend", a.port);
    assert_eq!(after.status, "up", "{after:?}");
    assert!(after.rise >= before.rise, "rise count restarted: {before:?} -> {after:?}");
    assert_eq!(row(&s, "backend", dead).status, "down");
    assert_eq!(row(&s, "fresh", c.port).status, "down", "a new upstream starts as default_down says");
    assert_eq!(app_requests(&s, "/app/", 2), ["a", "a"]);

    // The old generation's checker stopped: `a` sees one probe per 400 ms.
    let window = Duration::from_secs(4);
    let n0 = probes(&a);
    std::thread::sleep(window);
    let n = probes(&a) - n0;
    assert!((6..=14).contains(&n), "{n} probes in {window:?}");
    wait_state(&s, "fresh", c.port, "up");
    s.quit();
}

#[test]
fn t_refuses_bad_check_parameters() {
    let p = prog();
    let cases: &[(&str, &str, &str)] = &[
        ("check interval=100 type=mysql;", "", "invalid parameter \"type=mysql\""),
        ("check interval=0;", "", "invalid parameter \"interval=0\""),
        ("check interval=3s;", "", "invalid parameter \"interval=3s\""),
        ("check rise=two;", "", "invalid parameter \"rise=two\""),
        ("check default_down=maybe;", "", "invalid value \"default_down=maybe\", it must be \"true\" or \"false\""),
        ("check_http_send \"GET / HTTP/1.0\\r\\n\\r\\n\";", "", "invalid check_http_send should set [check] first"),
        ("check type=tcp; check_http_send \"GET /\";", "", "invalid check_http_send for type \"tcp\""),
        ("check_http_expect_alive http_2xx http_6xx;", "", "invalid value \"http_6xx\""),
        ("check;", "", "invalid number of arguments in \"check\" directive"),
        ("", "check_status xml;", "invalid check format \"xml\""),
        ("", "check_status json extra;", "invalid number of arguments in \"check_status\" directive"),
    ];
    for (ups, loc, msg) in cases {
        // The offending directive is on line 7 of this file.
        let conf = format!(
            "events {{}}\nhttp {{\n    upstream b {{\n        server 127.0.0.1:1;\n\n        {}\n        {ups}\n    }}\n    server {{ listen 127.0.0.1:1; location / {{\n {loc}\n }} }}\n}}\n",
            if ups.is_empty() { "" } else { "# the check" }
        );
        let line = if ups.is_empty() { 10 } else { 7 };
        let s = builder().whole(&conf).prepare();
        let out = s.run(&["-t"]);
        let err = stderr_of(&out);
        let want = format!("{p}: [emerg] {msg} in {}:{line}\n", s.conf_path().display());
        assert_eq!(out.status.code(), Some(1), "{conf}\n{err}");
        assert!(err.contains(&want), "want {want:?} for {conf}\nstderr:\n{err}");
    }
    // Everything accepted, including what sluice takes but does not need.
    let s = builder()
        .http(
            r#"
            check_shm_size 10m;
            upstream b {
                server 127.0.0.1:1;
                server 127.0.0.1:2 backup;
                check interval=3000 rise=2 fall=5 timeout=1000 default_down=true type=http port=8080 unique=true;
                check_keepalive_requests 100;
                check_http_send "HEAD / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n";
                check_http_expect_alive http_1xx http_2xx http_3xx http_4xx http_5xx;
            }
            server {
                listen 127.0.0.1:{port};
                check_status;
                location /a { check_status html; }
                location /b { check_status csv; }
                location /c { check_status prometheus; }
                location / { proxy_pass http://b; }
            }"#,
        )
        .prepare();
    let out = s.run(&["-t"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("test is successful"), "{}", stderr_of(&out));
}
