//! The cache's finer rules, as nginx-tests' proxy_cache_*.t check them:
//! `proxy_cache $variable` (a zone per request, an unknown name a 500),
//! stale-if-error only for an origin that failed (not for its 5xx),
//! background refreshes that revalidate, revalidation only of a stored 200
//! or 206, Vary's whitespace normalization, the requests that go to the
//! origin as the client sent them (proxy_cache_max_range_offset, below
//! proxy_cache_min_uses), intercepted errors remembered for their key, and
//! a FastCGI answer to HEAD stored with its body.
//!
//! Origins count what reaches them, so "cached" means the origin saw no
//! further request. Checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::cache::*;
use common::fcgi_app::*;
use common::origin::*;
use common::*;

/// A server with zone `one` and `X-Cache: $upstream_cache_status`, the
/// rest of its `server` block given (with `%A%`-style ports).
fn cached(server_body: &str, vars: &[(&str, u16)]) -> TestServer {
    let http = format!(
        "proxy_cache_path {{prefix}}/c keys_zone=one:1m;\n\
         server {{\n\
         listen 127.0.0.1:{{port}};\n\
         add_header X-Cache $upstream_cache_status always;\n\
         {server_body}}}"
    );
    builder().http(&sub(&http, vars)).start()
}

fn x_cache(r: &Response) -> &str {
    r.header("X-Cache").unwrap_or("-")
}

#[test]
fn proxy_cache_with_a_variable_picks_the_zone_per_request() {
    let (o, n) = origin();
    let s = builder()
        .http(&sub(
            r#"
            proxy_cache_path {prefix}/c1 levels=1:2 keys_zone=NAME1:1m;
            proxy_cache_path {prefix}/c2 keys_zone=NAME2:1m;
            fastcgi_cache_path {prefix}/c3 keys_zone=FCGI:1m;
            server {
                listen 127.0.0.1:{port};
                add_header X-Cache $upstream_cache_status always;
                location / {
                    proxy_pass http://127.0.0.1:%A%;
                    proxy_cache $arg_c;
                    proxy_cache_key $uri;
                    proxy_cache_valid any 1m;
                }
            }"#,
            &[("%A%", o.port)],
        ))
        .start();
    let mut checks = Checks::new();
    checks.run("NAME1: a miss, then a hit, stored under c1", || {
        let before = n.load(Ordering::SeqCst);
        let a = s.get("/t?c=NAME1");
        let b = s.get("/t?c=NAME1");
        assert_eq!((a.status, x_cache(&a), b.status, x_cache(&b)), (200, "MISS", 200, "HIT"), "{}", b.head);
        assert_eq!(a.text(), b.text());
        assert_eq!(n.load(Ordering::SeqCst) - before, 1);
        assert_eq!(files_under(&s.path("c1")).len(), 1);
    });
    checks.run("NAME2 is another zone: the same key misses there", || {
        let before = n.load(Ordering::SeqCst);
        assert_eq!(x_cache(&s.get("/t?c=NAME2")), "MISS");
        assert_eq!(x_cache(&s.get("/t?c=NAME2")), "HIT");
        assert_eq!(n.load(Ordering::SeqCst) - before, 1);
        assert_eq!(files_under(&s.path("c2")).len(), 1);
    });
    checks.run("an unknown zone is a 500 with nginx's error line", || {
        let before = n.load(Ordering::SeqCst);
        let r = s.get("/t?c=NOPE");
        assert_eq!(r.status, 500, "{}", r.head);
        assert_eq!(n.load(Ordering::SeqCst), before, "the origin is not asked");
        let log = s.wait_error_log("cache \"NOPE\" not found");
        assert!(line_with(&log, "not found").contains("[error]"), "{log}");
    });
    checks.run("a fastcgi_cache_path zone is not proxy_cache's", || {
        assert_eq!(s.get("/t?c=FCGI").status, 500);
        s.wait_error_log("cache \"FCGI\" not found");
    });
    checks.run("empty and \"off\" do not cache", || {
        for q in ["", "?c=", "?c=off"] {
            let before = n.load(Ordering::SeqCst);
            let a = s.get(&format!("/t{q}"));
            let b = s.get(&format!("/t{q}"));
            assert_eq!((a.status, x_cache(&a), x_cache(&b)), (200, "-", "-"), "{q}: {}", a.head);
            assert_eq!(n.load(Ordering::SeqCst) - before, 2, "{q}");
        }
    });
    checks.finish();
}

#[test]
fn stale_if_error_serves_for_a_failed_origin_not_for_its_5xx() {
    let (o, n) = origin();
    let dead = free_port();
    let s = cached(
        r#"
            proxy_cache one;
            proxy_cache_key $arg_k;
            location /up/ { proxy_pass http://127.0.0.1:%A%; }
            location /down/ { proxy_pass http://127.0.0.1:%D%; }
        "#,
        &[("%A%", o.port), ("%D%", dead)],
    );
    let r = s.get("/up/a?k=a&h=Cache-Control:%20max-age=1,%20stale-if-error=30");
    assert_eq!((r.status, x_cache(&r)), (200, "MISS"));
    let stored = r.text();
    std::thread::sleep(Duration::from_millis(2100));
    let before = n.load(Ordering::SeqCst);
    // Since nginx 1.19.3 the origin's 500 goes to the client.
    let r = s.get("/up/a?k=a&s=500");
    assert_eq!(r.status, 500, "{}", r.head);
    assert_eq!(n.load(Ordering::SeqCst) - before, 1);
    // An origin that cannot be reached is an error: the stale entry.
    let r = s.get("/down/a?k=a");
    assert_eq!((r.status, x_cache(&r)), (200, "STALE"), "{}", r.head);
    assert_eq!(r.text(), stored);
}

#[test]
fn a_background_refresh_revalidates_and_a_304_renews_the_entry() {
    let (o, n) = versioned_origin();
    let s = cached(
        r#"
            location / {
                proxy_pass http://127.0.0.1:%A%;
                proxy_cache one;
                proxy_cache_use_stale updating;
                proxy_cache_background_update on;
                proxy_cache_revalidate on;
            }
        "#,
        &[("%A%", o.port)],
    );
    let r = s.get("/v");
    assert_eq!((x_cache(&r), r.text().as_str()), ("MISS", "version 1\n"));
    std::thread::sleep(Duration::from_millis(2100));
    let r = s.get("/v");
    assert_eq!((x_cache(&r), r.text().as_str()), ("STALE", "version 1\n"), "{}", r.head);
    // The refresh runs after the answer (sluice holds the connection until
    // it ends; nginx may close it first): wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while n.load(Ordering::SeqCst) < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(n.load(Ordering::SeqCst), 2);
    assert_eq!(o.last().header("If-None-Match"), Some("\"same\""), "the refresh asks conditionally");
    // Its 304 (max-age=1) made the stored entry fresh again.
    let r = s.get("/v");
    assert_eq!((x_cache(&r), r.text().as_str()), ("HIT", "version 1\n"), "{}", r.head);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn only_a_stored_200_or_206_is_revalidated() {
    let (o, _n) = origin();
    let s = cached(
        r#"
            location / {
                proxy_pass http://127.0.0.1:%A%;
                proxy_cache one;
                proxy_cache_revalidate on;
            }
        "#,
        &[("%A%", o.port)],
    );
    let lm = "h=Last-Modified:%20Mon,%2002%20Mar%202015%2017:20:58%20GMT&h=Cache-Control:%20max-age=1";
    let created = format!("/201?s=201&{lm}");
    let ok = format!("/200?{lm}");
    assert_eq!(x_cache(&s.get(&created)), "MISS");
    assert_eq!(x_cache(&s.get(&ok)), "MISS");
    assert_eq!(x_cache(&s.get(&created)), "HIT");
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(x_cache(&s.get(&created)), "EXPIRED");
    assert_eq!(o.last().header("If-Modified-Since"), None, "a 201 is fetched again unconditionally");
    assert_eq!(x_cache(&s.get(&ok)), "EXPIRED");
    assert_eq!(o.last().header("If-Modified-Since"), Some("Mon, 02 Mar 2015 17:20:58 GMT"));
}

#[test]
fn vary_on_accept_encoding_ignores_whitespace_and_empty_items() {
    let (o, n) = origin();
    let s = cached(
        r#"
            location / {
                proxy_pass http://127.0.0.1:%A%;
                proxy_cache one;
                proxy_cache_key $uri;
                proxy_cache_valid 1m;
            }
        "#,
        &[("%A%", o.port)],
    );
    let ae = "/ae?h=Vary:%20Accept-Encoding";
    let get = |path: &str, hs: &[&str]| x_cache(&s.get_with(path, hs)).to_string();
    assert_eq!(get(ae, &["Accept-Encoding: foo, bar"]), "MISS");
    let before = n.load(Ordering::SeqCst);
    assert_eq!(get(ae, &["Accept-Encoding: foo,bar"]), "HIT");
    assert_eq!(get(ae, &["Accept-Encoding: foo,,  ,bar , "]), "HIT");
    assert_eq!(get(ae, &["Accept-Encoding: foo", "Accept-Encoding: bar"]), "HIT", "two fields join");
    assert_eq!(n.load(Ordering::SeqCst), before);
    assert_eq!(get(ae, &["Accept-Encoding: foobar"]), "MISS");
    // Other headers are compared as sent.
    let other = "/other?h=Vary:%20X-Foo";
    assert_eq!(get(other, &["X-Foo: a, b"]), "MISS");
    assert_eq!(get(other, &["X-Foo: a, b"]), "HIT");
    assert_eq!(get(other, &["X-Foo: a,b"]), "MISS");
}

#[test]
fn requests_that_will_not_be_stored_go_to_the_origin_as_sent() {
    let (o, _n) = origin();
    let s = cached(
        r#"
            proxy_cache one;
            proxy_cache_valid 1m;
            location /mro/ { proxy_pass http://127.0.0.1:%A%; proxy_cache_max_range_offset 10; }
            location /zero/ { proxy_pass http://127.0.0.1:%A%; proxy_cache_max_range_offset 0; }
            location /min/ { proxy_pass http://127.0.0.1:%A%; proxy_cache_min_uses 2; }
        "#,
        &[("%A%", o.port)],
    );
    let range_seen = |path: &str, range: &str| {
        let r = s.get_with(path, &[&format!("Range: {range}")]);
        assert!(r.status == 200 || r.status == 206, "{path}: {}", r.head);
        (o.last().header("Range").map(str::to_string), r.status, x_cache(&r).to_string())
    };
    let passed = |r: &str| Some(r.to_string());
    // proxy_cache_max_range_offset: a start at or past it, or a suffix range.
    assert_eq!(range_seen("/mro/a", "bytes=9-12").0, None, "below the offset: cached, range from the entry");
    assert_eq!(range_seen("/mro/b", "bytes=10-12").0, passed("bytes=10-12"));
    assert_eq!(range_seen("/mro/c", "bytes=-3").0, passed("bytes=-3"));
    assert_eq!(range_seen("/zero/a", "bytes=0-0").0, passed("bytes=0-0"), "0: every range");
    // Below proxy_cache_min_uses nothing is stored, so the range is the
    // origin's to answer (this origin ignores it: a 200); then stored.
    let min = "/min/a?h=Accept-Ranges:%20bytes";
    assert_eq!(range_seen(min, "bytes=0-3"), (passed("bytes=0-3"), 200, "MISS".to_string()));
    assert_eq!(range_seen(min, "bytes=0-3"), (None, 206, "MISS".to_string()));
    let r = s.get_with(min, &["Range: bytes=0-3"]);
    assert_eq!((r.status, x_cache(&r), r.text().as_str()), (206, "HIT", "resp"));
}

#[test]
fn an_intercepted_error_is_remembered_for_its_key() {
    let (o, n) = origin();
    let s = builder()
        .http(&sub(
            r#"
            proxy_cache_path {prefix}/c keys_zone=one:1m;
            server {
                listen 127.0.0.1:{port};
                location / {
                    proxy_pass http://127.0.0.1:%A%;
                    proxy_cache one;
                    proxy_cache_key $uri;
                    proxy_cache_valid 200 401 1m;
                    proxy_cache_bypass $arg_bypass;
                    proxy_intercept_errors on;
                    error_page 404 401 = @fallback;
                }
                location @fallback { return 403; }
            }"#,
            &[("%A%", o.port)],
        ))
        .start();
    let count = || n.load(Ordering::SeqCst);
    // 401 is valid for 1m: the key answers the error page without the
    // origin, whatever the origin would now say.
    assert_eq!(s.get("/e401?s=401").status, 403);
    let before = count();
    assert_eq!(s.get("/e401").status, 403);
    assert_eq!(count(), before, "not asked again");
    // 404 has no proxy_cache_valid time, but its own max-age gives one.
    assert_eq!(s.get("/e404?s=404&h=Cache-Control:%20max-age=60").status, 403);
    let before = count();
    assert_eq!(s.get("/e404").status, 403);
    assert_eq!(count(), before);
    // no-cache: not remembered.
    assert_eq!(s.get("/nc?s=401&h=Cache-Control:%20no-cache").status, 403);
    let r = s.get("/nc");
    assert_eq!(r.status, 200, "{}", r.head);
    // A bypass stores the origin's answer, which replaces the error.
    let r = s.get("/e401?bypass=1");
    assert_eq!(r.status, 200, "{}", r.head);
    let before = count();
    let r2 = s.get("/e401");
    assert_eq!((r2.status, r2.text()), (200, r.text()));
    assert_eq!(count(), before);
}

#[test]
fn a_fastcgi_answer_to_head_is_stored_with_its_body() {
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    let app = raw_app(move |_| {
        let i = seen.fetch_add(1, Ordering::SeqCst) + 1;
        // The application writes the body even to HEAD, and more than its
        // Content-Length.
        [
            rec(6, format!("Content-Type: text/html\r\nContent-Length: 8\r\n\r\nSEE-TH{i:02}-BUT-NOT-THIS").as_bytes()),
            end_request(),
        ]
        .concat()
    });
    let s = builder()
        .http(&format!(
            r#"
            fastcgi_cache_path {{prefix}}/c keys_zone=one:1m;
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    fastcgi_pass 127.0.0.1:{app};
                    fastcgi_param REQUEST_METHOD $request_method;
                    fastcgi_cache one;
                    fastcgi_cache_key $request_uri;
                    fastcgi_cache_valid any 1m;
                    add_header X-Cache $upstream_cache_status always;
                }}
            }}"#
        ))
        .start();
    let head = request_to_close(s.port, b"HEAD /h HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let (h, body) = split_head(&head);
    assert!(h.starts_with("HTTP/1.1 200") && h.contains("X-Cache: MISS"), "{h}");
    assert!(body.is_empty(), "no body to HEAD: {body:?}");
    let r = s.get("/h");
    assert_eq!((r.status, x_cache(&r), r.text().as_str()), (200, "HIT", "SEE-TH01"), "{}", r.head);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
