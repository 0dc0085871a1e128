//! Session persistence in http upstreams: NGINX Plus's `sticky cookie`,
//! `sticky route` and `sticky learn` (the nginx 1.29 spelling), with the
//! `server ... route=` parameter, in front of every balancing method, with
//! `zone`, the run-time API, `down`/`drain` and reloads. The origins are
//! real sockets that answer their own name; clients are raw HTTP/1.1 and
//! wrk (many connections over two workers). nginx's open-source 1.22 has
//! no `sticky`, so there is no nginx run of these: the expectations are
//! nginx.org's ngx_http_upstream_module page and nginx's own tests
//! (upstream_sticky*.t), which are the specification.

mod common;

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;
use md5::Digest;

fn nginx_run() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// The cookie value NGINX Plus gives a peer without `route=`: the hex MD5
/// of its address.
fn md5_of(addr: &str) -> String {
    md5::Md5::digest(addr.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn id(o: &Origin) -> String {
    md5_of(&format!("127.0.0.1:{}", o.port))
}

/// An origin answering its name, and the Cookie header it got in X-Cookie.
fn named(name: &'static str) -> Origin {
    Origin::start(move |_| Reply::http(200, &["Content-Type: text/plain"], name))
}

fn with_cookie(s: &TestServer, path: &str, cookie: &str) -> Response {
    s.get_with(path, &[&format!("Cookie: {cookie}")])
}

/// The value of the `Set-Cookie` for `name` in `r` (None: not set).
fn set_cookie(r: &Response, name: &str) -> Option<String> {
    r.headers_named("set-cookie").into_iter().find(|v| v.starts_with(&format!("{name}="))).map(String::from)
}

fn value_of(set_cookie: &str) -> String {
    let v = set_cookie.split(';').next().unwrap_or("");
    v.split_once('=').map_or("", |(_, v)| v).to_string()
}

fn curl_api(s: &TestServer, method: &str, path: &str, body: Option<&str>) -> (u16, String) {
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

/// A whole configuration with this `http` block, for reloads.
fn whole(http: &str) -> String {
    format!(
        "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nworker_processes 2;\n\
         events {{}}\nhttp {{\n{http}}}\n"
    )
}

fn until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "not within {limit:?}: {what}");
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn cookie_set_with_nginx_attributes_and_followed_by_both_workers() {
    if nginx_run() {
        return;
    }
    let (a, b, c) = (named("a"), named("b"), named("c"));
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"upstream u {{
                server 127.0.0.1:{a};
                server 127.0.0.1:{b};
                server 127.0.0.1:{c};
                sticky cookie srv_id expires=1h domain=.example.com path=/ httponly secure samesite=lax;
            }}
            upstream bare {{
                server 127.0.0.1:{a};
                sticky cookie plain;
            }}
            upstream max {{
                server 127.0.0.1:{a};
                sticky cookie m expires=max domain=$arg_d samesite=$arg_s;
            }}
            upstream routed {{
                server 127.0.0.1:{a} route=alpha;
                server 127.0.0.1:{b} route=beta;
                sticky cookie r;
            }}
            upstream plain {{ server 127.0.0.1:{a}; }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{ proxy_pass http://u; }}
                location /bare {{ proxy_pass http://bare; }}
                location /max {{ proxy_pass http://max; }}
                location /routed {{ proxy_pass http://routed; }}
                location /plain {{ proxy_pass http://plain; }}
                location /var {{ proxy_pass http://$arg_u; }}
            }}"#,
            a = a.port,
            b = b.port,
            c = c.port
        ))
        .start();

    let name_of = |port: u16| ["a", "b", "c"][[a.port, b.port, c.port].iter().position(|p| *p == port).unwrap()];
    // The first response binds the client to the peer that answered.
    let r = s.get("/");
    let who = r.text();
    let origin = match who.as_str() {
        "a" => &a,
        "b" => &b,
        _ => &c,
    };
    let sc = set_cookie(&r, "srv_id").expect("a Set-Cookie for the sticky cookie");
    let (head, expires) = sc.split_once("; expires=").expect("expires");
    assert_eq!(head, format!("srv_id={}", id(origin)));
    let (when, rest) = expires.split_once("; ").unwrap();
    assert_eq!(rest, "max-age=3600; domain=.example.com; path=/; secure; httponly; samesite=lax", "{sc}");
    // nginx's cookie time, an hour ahead: "Thu, 31-Dec-37 23:55:55 GMT".
    let out = Command::new("date").args(["-u", "-d", &when.replace('-', " "), "+%s"]).output().unwrap();
    let at: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().expect("a date(1) reads the expiry");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(at.abs_diff(now + 3600) <= 10, "expires {when}");
    assert_eq!(when.len(), "Thu, 31-Dec-37 23:55:55 GMT".len(), "{when}");

    // Each peer's cookie leads to it, from many connections over both
    // workers, and comes back with every response.
    for o in [&a, &b, &c] {
        let cookie = format!("srv_id={}", id(o));
        for _ in 0..6 {
            let r = with_cookie(&s, "/", &cookie);
            assert_eq!(r.text(), name_of(o.port));
            assert_eq!(value_of(&set_cookie(&r, "srv_id").unwrap()), id(o));
        }
    }
    let before = (a.count(), b.count(), c.count());
    let wrk = wrk_start(&["-t2", "-c16", "-d2s", "-H", &format!("Cookie: x=1; srv_id={}", id(&b)), &s.url("/")]);
    let res = wrk_finish(wrk, Duration::from_secs(20));
    assert!(res.requests > 100, "{}", res.output);
    assert_eq!(res.error_count(), 0, "{}", res.output);
    assert_eq!((a.count(), c.count()), (before.0, before.2), "a sticky request went elsewhere");
    assert!(b.count() >= before.1 + res.requests as usize, "b saw {} of {}", b.count() - before.1, res.requests);

    // A cookie naming no peer (garbage, too long) is balanced and replaced.
    for bad in ["garbage", "012345689.123456789.123456789.12-too-big"] {
        let r = with_cookie(&s, "/", &format!("srv_id={bad}"));
        let served = [&a, &b, &c].into_iter().find(|o| r.text() == name_of(o.port)).unwrap();
        assert_eq!(value_of(&set_cookie(&r, "srv_id").unwrap()), id(served));
    }
    // New clients are still balanced round robin.
    let mut seen: Vec<String> = (0..6).map(|_| s.get("/").text()).collect();
    seen.sort();
    seen.dedup();
    assert!(seen.len() >= 2, "{seen:?}");

    // No attributes: just the value.
    assert_eq!(set_cookie(&s.get("/bare"), "plain").unwrap(), format!("plain={}", id(&a)));
    // expires=max, domain and samesite from variables (empty: left out,
    // anything but lax/none: strict).
    let m = set_cookie(&s.get("/max?d=example.org&s=None"), "m").unwrap();
    assert_eq!(
        m,
        format!(
            "m={}; expires=Thu, 31-Dec-37 23:55:55 GMT; max-age=315360000; domain=example.org; samesite=none",
            id(&a)
        )
    );
    let m = set_cookie(&s.get("/max?s=wrong"), "m").unwrap();
    assert!(m.ends_with("max-age=315360000; samesite=strict"), "{m}");
    let m = set_cookie(&s.get("/max"), "m").unwrap();
    assert!(m.ends_with("max-age=315360000"), "{m}");
    // route= is the cookie's value.
    let r = with_cookie(&s, "/routed", "r=beta");
    assert_eq!((r.text(), set_cookie(&r, "r").unwrap()), ("b".to_string(), "r=beta".to_string()));
    // No sticky, no cookie; an upstream chosen by a variable uses its own.
    assert_eq!(set_cookie(&s.get("/plain"), "srv_id"), None);
    assert!(set_cookie(&s.get("/var?u=bare"), "plain").is_some());
    let r = with_cookie(&s, "/var?u=routed", "r=alpha");
    assert_eq!(r.text(), "a");
}

#[test]
fn every_balancer_keeps_sessions_and_balances_the_rest() {
    if nginx_run() {
        return;
    }
    let (a, b, c) = (named("a"), named("b"), named("c"));
    let mut http = String::new();
    let methods = ["", "least_conn;", "ip_hash;", "hash $arg_k;", "hash $arg_k consistent;", "random;", "random two;"];
    for (i, m) in methods.iter().enumerate() {
        http.push_str(&format!(
            "upstream u{i} {{ {m} server 127.0.0.1:{}; server 127.0.0.1:{}; server 127.0.0.1:{}; sticky cookie s; }}\n",
            a.port, b.port, c.port
        ));
    }
    // The same with a zone: the peers' state is every worker's.
    for (i, m) in methods.iter().enumerate() {
        http.push_str(&format!(
            "upstream z{i} {{ zone z{i} 64k; {m} server 127.0.0.1:{}; server 127.0.0.1:{}; server 127.0.0.1:{}; sticky cookie s; }}\n",
            a.port, b.port, c.port
        ));
    }
    http.push_str("server { listen 127.0.0.1:{port}; location / { proxy_pass http://$arg_u; } }");
    let s = builder().main("worker_processes 2;").http(&http).start();
    for prefix in ["u", "z"] {
        for (i, method) in methods.iter().enumerate() {
            for (o, name) in [(&a, "a"), (&b, "b"), (&c, "c")] {
                for k in 0..4 {
                    let r = with_cookie(&s, &format!("/?u={prefix}{i}&k={k}"), &format!("s={}", id(o)));
                    assert_eq!(r.text(), name, "{prefix}{i} ({method}) with the cookie of {name}");
                    assert_eq!(value_of(&set_cookie(&r, "s").unwrap()), id(o));
                }
            }
        }
    }
    // Sticky requests leave the round robin where it was: fresh requests
    // after many sticky ones to a are spread evenly (nginx's test).
    let s1 = builder()
        .http(&format!(
            "upstream u {{ server 127.0.0.1:{}; server 127.0.0.1:{}; server 127.0.0.1:{}; sticky cookie s; }}
             server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://u; }} }}",
            a.port, b.port, c.port
        ))
        .main("worker_processes 1;")
        .start();
    for _ in 0..20 {
        assert_eq!(with_cookie(&s1, "/", &format!("s={}", id(&a))).text(), "a");
    }
    let mut counts = [0; 3];
    for _ in 0..30 {
        let r = s1.get("/");
        let i = ["a", "b", "c"].iter().position(|n| *n == r.text());
        counts[i.unwrap_or_else(|| panic!("{} {}\n{}", r.head, r.text(), s1.error_log()))] += 1;
    }
    assert_eq!(counts, [10, 10, 10]);
}

#[test]
fn a_down_or_removed_peer_falls_back_and_a_new_cookie_is_issued() {
    if nginx_run() {
        return;
    }
    let (a, b, c) = (named("a"), named("b"), named("c"));
    let (ap, bp) = (a.port, b.port);
    let conf = |a_params: &str, b_params: &str| {
        format!(
            r#"upstream u {{
                zone u 64k;
                server 127.0.0.1:{a};
                server 127.0.0.1:{b};
                sticky cookie s;
            }}
            upstream st {{
                server 127.0.0.1:{a} {a_params};
                server 127.0.0.1:{b} {b_params};
                sticky cookie s;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{ proxy_pass http://u; }}
                location /static {{ proxy_pass http://st; }}
                location /api/ {{ api write=on; }}
            }}"#,
            a = ap,
            b = bp
        )
    };
    let mut s = builder().whole(&whole(&conf("", ""))).start();
    let ca = format!("s={}", id(&a));
    assert_eq!(with_cookie(&s, "/", &ca).text(), "a");
    // Marked down through the API: every worker falls back at once and
    // rebinds the client to the peer that answered.
    let (code, body) = curl_api(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"down\":true}"));
    assert_eq!(code, 200, "{body}");
    for _ in 0..8 {
        let r = with_cookie(&s, "/", &ca);
        assert_eq!(r.text(), "b");
        assert_eq!(value_of(&set_cookie(&r, "s").unwrap()), id(&b));
    }
    curl_api(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"down\":false}"));
    assert_eq!(with_cookie(&s, "/", &ca).text(), "a");
    // Drained: its sessions stay, new clients never get it.
    let (code, _) = curl_api(&s, "PATCH", "/api/9/http/upstreams/u/servers/0", Some("{\"drain\":true}"));
    assert_eq!(code, 200);
    for _ in 0..6 {
        assert_eq!(with_cookie(&s, "/", &ca).text(), "a");
        assert_eq!(s.get("/").text(), "b");
    }
    // Removed: the cookie falls back.
    let (code, _) = curl_api(&s, "DELETE", "/api/9/http/upstreams/u/servers/0", None);
    assert_eq!(code, 200);
    let r = with_cookie(&s, "/", &ca);
    assert_eq!((r.text(), value_of(&set_cookie(&r, "s").unwrap())), ("b".to_string(), id(&b)));
    // A server added with a route is reached by it.
    let (code, added) = curl_api(
        &s,
        "POST",
        "/api/9/http/upstreams/u/servers",
        Some(&format!("{{\"server\":\"127.0.0.1:{}\",\"route\":\"gamma\"}}", c.port)),
    );
    assert_eq!(code, 201, "{added}");
    assert!(added.contains("\"route\":\"gamma\""), "{added}");
    for _ in 0..6 {
        let r = with_cookie(&s, "/", "s=gamma");
        assert_eq!((r.text(), value_of(&set_cookie(&r, "s").unwrap())), ("c".to_string(), "gamma".to_string()));
    }
    let (_, patched) = curl_api(&s, "PATCH", "/api/9/http/upstreams/u/servers/2", Some("{\"route\":\"\"}"));
    assert!(patched.contains("\"route\":\"\""), "{patched}");
    assert_eq!(with_cookie(&s, "/", &format!("s={}", id(&c))).text(), "c");

    // `down` written into the configuration and reloaded.
    assert_eq!(with_cookie(&s, "/static", &ca).text(), "a");
    s.write_conf(&whole(&conf("down", "")));
    s.signal("reload");
    // (Until the old workers are gone: five answers in a row.)
    until(Duration::from_secs(5), "the reload is serving", || {
        (0..5).all(|_| with_cookie(&s, "/static", &ca).text() == "b")
    });
    for _ in 0..6 {
        let r = with_cookie(&s, "/static", &ca);
        assert_eq!((r.text(), value_of(&set_cookie(&r, "s").unwrap())), ("b".to_string(), id(&b)));
    }
    // A peer that fails (nothing listening) is retried elsewhere and the
    // cookie then names the peer that answered.
    drop(a);
    s.write_conf(&whole(&conf("", "")));
    s.signal("reload");
    until(Duration::from_secs(5), "the reload is serving", || {
        (0..5).all(|_| with_cookie(&s, "/static", &format!("s={}", id(&b))).text() == "b")
    });
    let r = with_cookie(&s, "/static", &ca);
    assert_eq!((r.text(), value_of(&set_cookie(&r, "s").unwrap())), ("b".to_string(), id(&b)));
    let log = s.error_log();
    assert!(log.contains(&format!("upstream: \"http://127.0.0.1:{ap}/static\"")), "{log}");
    // Every peer down: 502 and no cookie.
    s.write_conf(&whole(&conf("down", "down")));
    s.signal("reload");
    until(Duration::from_secs(5), "the all-down reload is serving", || (0..5).all(|_| s.get("/static").status == 502));
    let r = with_cookie(&s, "/static", &ca);
    assert_eq!((r.status, set_cookie(&r, "s")), (502, None));
    let _ = s.quit();
}

#[test]
fn route_from_cookie_and_argument_variables() {
    if nginx_run() {
        return;
    }
    let (a, b, c, d) = (named("a"), named("b"), named("c"), named("d"));
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"map $cookie_jsessionid $route_cookie {{ ~.+\.(?P<route>\w+)$ $route; }}
            upstream u {{
                server 127.0.0.1:{a} route=a;
                server 127.0.0.1:{b} route=b;
                server 127.0.0.1:{c};
                sticky route $route_cookie $cookie_route $arg_route;
            }}
            upstream iph {{
                ip_hash;
                server 127.0.0.1:{a} route=a;
                server 127.0.0.1:{b} route=b;
                sticky route $arg_route;
            }}
            upstream backup {{
                server 127.0.0.1:{a} route=a;
                server 127.0.0.1:{b} route=b;
                server 127.0.0.1:{d} backup route=d;
                sticky route $arg_route;
            }}
            upstream lim {{
                zone lim 64k;
                server 127.0.0.1:{a} route=a max_conns=1;
                server 127.0.0.1:{b} route=b;
                sticky route $arg_route;
            }}
            upstream dr {{
                server 127.0.0.1:{a} route=a drain;
                server 127.0.0.1:{b} route=b;
                sticky route $arg_route;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{ proxy_pass http://u; }}
                location /dr {{ proxy_pass http://dr; }}
                location /iph {{ proxy_pass http://iph; }}
                location /backup {{ proxy_pass http://backup; }}
                location /lim {{ proxy_pass http://lim; }}
            }}"#,
            a = a.port,
            b = b.port,
            c = c.port,
            d = d.port
        ))
        .start();
    for _ in 0..6 {
        assert_eq!(s.get("/?route=b").text(), "b");
        assert_eq!(with_cookie(&s, "/", "route=a").text(), "a");
        // The first non-empty variable counts: the cookie before the argument.
        assert_eq!(with_cookie(&s, "/?route=a", "route=b").text(), "b");
        // The JSESSIONID's part after the last dot, through the map.
        assert_eq!(with_cookie(&s, "/?route=b", "jsessionid=x.y.a").text(), "a");
        // A server without route= answers to the MD5 of its address.
        assert_eq!(s.get(&format!("/?route={}", id(&c))).text(), "c");
        // Route with ip_hash.
        assert_eq!(s.get("/iph?route=b").text(), "b");
        assert_eq!(s.get("/iph?route=a").text(), "a");
        // A drained server (no zone needed) keeps its sessions, no others.
        assert_eq!(s.get("/dr?route=a").text(), "a");
        assert_eq!(s.get("/dr").text(), "b");
        // A backup is not reached by its route while primaries live.
        assert_ne!(s.get("/backup?route=d").text(), "d");
    }
    // An unknown or empty route is balanced: every server gets some.
    let mut seen: Vec<String> = (0..12).map(|_| s.get("/?route=zz").text()).collect();
    seen.extend((0..12).map(|_| with_cookie(&s, "/", "jsessionid=nodot").text()));
    seen.sort();
    seen.dedup();
    assert_eq!(seen, ["a", "b", "c"]);
    // No Set-Cookie from the route method.
    assert_eq!(s.get("/?route=a").headers_named("set-cookie").len(), 0);
}

#[test]
fn max_conns_sends_sessions_elsewhere_while_the_peer_is_full() {
    if nginx_run() {
        return;
    }
    let slow = Origin::start(|r| {
        let d = if r.target().contains("slow") { 1500 } else { 0 };
        Reply::http(200, &[], "a").after(Duration::from_millis(d))
    });
    let b = named("b");
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"upstream lim {{
                zone lim 64k;
                server 127.0.0.1:{a} route=a max_conns=1;
                server 127.0.0.1:{b} route=b;
                sticky route $arg_route;
            }}
            server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://lim; }} }}"#,
            a = slow.port,
            b = b.port
        ))
        .start();
    assert_eq!(s.get("/?route=a").text(), "a");
    let port = s.port;
    let holder =
        thread::spawn(move || request(port, "GET /slow?route=a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    until(Duration::from_secs(2), "the slow request reached a", || slow.count() >= 2);
    // a is at max_conns (counted for both workers through the zone).
    for _ in 0..4 {
        assert_eq!(s.get("/?route=a").text(), "b");
    }
    assert_eq!(holder.join().unwrap().text(), "a");
    assert_eq!(s.get("/?route=a").text(), "a");
}

#[test]
fn learn_sessions_from_the_origin_and_forget_them_after_timeout() {
    if nginx_run() {
        return;
    }
    // Each origin starts a session for a client without one.
    let origin = |name: &'static str| {
        Origin::start(move |r| {
            let has = r.header("cookie").is_some_and(|c| c.contains("sid="));
            let n = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            if has {
                Reply::http(200, &[], name)
            } else {
                Reply::http(200, &[&format!("Set-Cookie: sid={name}{n}; path=/")], name)
            }
        })
    };
    let (a, b) = (origin("a"), origin("b"));
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!(
            r#"upstream u {{
                server 127.0.0.1:{a};
                server 127.0.0.1:{b};
                sticky learn create=$upstream_cookie_sid lookup=$cookie_sid zone=client_sessions:1m timeout=2s;
            }}
            upstream cl {{
                zone cl 64k;
                server 127.0.0.1:{a};
                server 127.0.0.1:{b};
                sticky learn create=$cookie_sid lookup=$cookie_sid zone=cl_sessions:1m timeout=1h header;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{ proxy_pass http://u; }}
                location /cl {{ proxy_pass http://cl; }}
            }}"#,
            a = a.port,
            b = b.port
        ))
        .start();
    // A session the origin made sticks to it, over many connections.
    for _ in 0..2 {
        let r = s.get("/");
        let who = r.text();
        let sid = r.header("set-cookie").expect("the origin's session").split(';').next().unwrap().to_string();
        assert!(sid.starts_with(&format!("sid={who}")), "{sid}");
        let wrk = wrk_start(&["-t2", "-c8", "-d1s", "-H", &format!("Cookie: {sid}"), &s.url("/")]);
        let (a0, b0) = (a.count(), b.count());
        let res = wrk_finish(wrk, Duration::from_secs(20));
        assert!(res.requests > 50 && res.error_count() == 0, "{}", res.output);
        let (da, db) = (a.count() - a0, b.count() - b0);
        assert_eq!(if who == "a" { db } else { da }, 0, "a learned session went to the other origin");
        // Unused for longer than timeout=2s: forgotten, balanced again.
        thread::sleep(Duration::from_millis(2500));
        let seen: Vec<String> = (0..8).map(|_| with_cookie(&s, "/", &sid).text()).collect();
        assert!(seen.contains(&"a".to_string()) && seen.contains(&"b".to_string()), "{seen:?}");
    }
    // Learned sessions outlive a reload (the zone keeps its name and size).
    let r = s.get("/");
    let who = r.text();
    let sid = r.header("set-cookie").expect("a session").split(';').next().unwrap().to_string();
    s.signal("reload");
    thread::sleep(Duration::from_millis(500));
    for _ in 0..8 {
        assert_eq!(with_cookie(&s, "/", &sid).text(), who, "after the reload");
    }
    // An unknown session is balanced.
    let seen: Vec<String> = (0..8).map(|_| with_cookie(&s, "/", "sid=never").text()).collect();
    assert!(seen.contains(&"a".to_string()) && seen.contains(&"b".to_string()), "{seen:?}");
    // Client-made sessions (create=$cookie_sid): bound to whichever peer
    // served the first request, in a zone upstream.
    for k in 0..6 {
        let cookie = format!("sid=client{k}");
        let first = with_cookie(&s, "/cl", &cookie).text();
        for _ in 0..5 {
            assert_eq!(with_cookie(&s, "/cl", &cookie).text(), first);
        }
    }
}

/// nginx's upstream_sticky_drain.t: a server marked `drain` by a reload
/// keeps its sessions and gets no new ones, and each reload's old workers,
/// once drained, are logged with nginx's `exited with code` (what scripts
/// and nginx's tests wait for before they count on the new
/// configuration): one line per old worker, per reload.
#[test]
fn drain_by_reload_keeps_sessions_and_old_workers_are_logged_as_exited() {
    if nginx_run() {
        return;
    }
    let (a, b, c) = (named("a"), named("b"), named("c"));
    let conf = |a_flags: &str, others: bool| {
        let rest = if others {
            format!("server 127.0.0.1:{} route=2;\nserver 127.0.0.1:{} route=3;", b.port, c.port)
        } else {
            String::new()
        };
        whole(&format!(
            r#"upstream u {{
                server 127.0.0.1:{a} route=1{a_flags};
                {rest}
                sticky route $arg_sticky;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{ proxy_pass http://u; }}
            }}
            "#,
            a = a.port
        ))
    };
    let mut s = builder().whole(&conf("", true)).start();
    let exits = |s: &TestServer| s.error_log().matches("exited with code").count();
    let rr = |s: &TestServer, n| (0..n).map(|_| s.get("/").text()).collect::<Vec<_>>();
    assert!(rr(&s, 6).contains(&"a".to_string()));
    assert_eq!(exits(&s), 0);

    s.write_conf(&conf(" drain", true));
    s.signal("reload");
    // worker_processes 2: two old workers end, each logged once.
    until(Duration::from_secs(10), "the old workers' exit lines", || exits(&s) == 2);
    let log = s.error_log();
    assert!(log.contains("of the previous configuration exited with code 0"), "{log}");
    for _ in 0..4 {
        assert_eq!(s.get("/?sticky=1").text(), "a", "a drained server keeps its sessions");
    }
    let seen = rr(&s, 12);
    assert!(!seen.contains(&"a".to_string()) && seen.contains(&"b".to_string()), "{seen:?}");

    s.write_conf(&conf(" drain", false));
    s.signal("reload");
    until(Duration::from_secs(10), "the second reload's exit lines", || exits(&s) == 4);
    for _ in 0..4 {
        assert_eq!(s.get("/?sticky=1").text(), "a", "the only server, drained");
    }
    // No more lines than old workers.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(exits(&s), 4);
    let _ = s.quit();
}

#[test]
fn config_errors_in_nginx_words() {
    if nginx_run() {
        return;
    }
    let up = |sticky: &str| {
        format!(
            "upstream u {{ server 127.0.0.1:81; {sticky} }} server {{ listen 127.0.0.1:{{port}}; location / {{ proxy_pass http://u; }} }}"
        )
    };
    assert_refused(&up("sticky;"), "invalid number of arguments in \"sticky\" directive");
    assert_refused(&up("sticky cookie;"), "invalid number of arguments in \"sticky\" directive");
    assert_refused(&up("sticky session s;"), "invalid parameter \"session\"");
    assert_refused(&up("sticky cookie s expire=1h;"), "invalid parameter \"expire=1h\"");
    assert_refused(&up("sticky cookie s expires=soon;"), "invalid parameter \"expires=soon\"");
    assert_refused(&up("sticky cookie s samesite=sometimes;"), "invalid parameter \"samesite=sometimes\"");
    assert_refused(&up("sticky cookie s; sticky cookie t;"), "\"sticky\" directive is duplicate");
    assert_refused(&up("sticky route;"), "invalid number of arguments in \"sticky\" directive");
    assert_refused(&up("sticky route $nope_nope;"), "unknown \"nope_nope\" variable");
    assert_refused(
        &up("sticky learn create=$upstream_cookie_s lookup=$cookie_s;"),
        "\"sticky\" must have \"zone\" parameter",
    );
    assert_refused(&up("sticky learn lookup=$cookie_s zone=z:1m;"), "\"sticky\" must have \"create\" parameter");
    assert_refused(
        &up("sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1k;"),
        "zone \"z\" is too small",
    );
    assert_refused(
        &up("sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m timeout=never;"),
        "invalid parameter \"timeout=never\"",
    );
    assert_refused(
        &up("sticky learn create=$upstream_cookie_s lookup=$cookie_s zone=z:1m sync;"),
        "\"sync\" parameter of \"sticky\" needs \"zone_sync\"",
    );
    assert_refused(
        &format!(
            "upstream v {{ server 127.0.0.1:82; sticky learn create=$cookie_s lookup=$cookie_s zone=z:1m; }} {}",
            up("sticky learn create=$cookie_s lookup=$cookie_s zone=z:1m;")
        ),
        "duplicate zone \"z\"",
    );
    assert_refused(&up("server 127.0.0.1:82 route=;"), "invalid value \"route=\" in \"server\" directive");
    assert_refused(&up(&format!("server 127.0.0.1:82 route={};", "r".repeat(33))), "invalid value \"route=rrrrr");
    // Named by file and line.
    let t = builder().http(&up("\nsticky cookie s bogus;")).prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    let conf = t.conf_path().display().to_string();
    assert!(err.contains(&format!("invalid parameter \"bogus\" in {conf}:")), "{err}");
    // Not in stream upstreams (NGINX Plus has none there either).
    let t = builder()
        .main("stream { upstream s { server 127.0.0.1:81; sticky cookie s; } server { listen 127.0.0.1:{port}; proxy_pass s; } }")
        .prepare();
    let out = t.run(&["-t"]);
    assert!(stderr_of(&out).contains("unknown directive \"sticky\""), "{}", stderr_of(&out));
    let t = builder()
        .main(
            "stream { upstream s { server 127.0.0.1:81 route=a; } server { listen 127.0.0.1:{port}; proxy_pass s; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    assert!(stderr_of(&out).contains("invalid value \"route=a\""), "{}", stderr_of(&out));
    // A good one passes.
    let t = builder()
        .http(&up(
            "sticky learn create=$upstream_cookie_s create=$cookie_s lookup=$cookie_s zone=ok:1m timeout=1h header;",
        ))
        .prepare();
    let out = t.run(&["-t"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}
