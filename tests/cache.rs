//! The HTTP cache (`proxy_cache*`): what is stored and for how long (the
//! origin's Cache-Control, Expires, X-Accel-Expires, Set-Cookie and Vary,
//! and proxy_cache_valid), `$upstream_cache_status`, bypass/no_cache,
//! min_uses, methods, convert_head, stale answers when the origin fails,
//! entries surviving a restart and `kill -9`, damaged files in the cache
//! directory, coalesced misses, and hits over HTTP/2.
//!
//! Origins count what reaches them, so "cached" means the origin saw no
//! second request. Checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`);
//! where sluice deliberately differs the test says so.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

fn nginx_mode() -> bool {
    prog() == "nginx"
}

/// An origin whose answer depends on the path: `/h/NAME?...` answers with
/// the header line `NAME` decoded from the query (`h=Cache-Control:%20...`),
/// anything else with 200 and a body naming the request number.
fn origin() -> (Origin, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let o = Origin::start(move |r| {
        let i = c.fetch_add(1, Ordering::SeqCst) + 1;
        let target = r.target().to_string();
        let mut headers = vec!["Content-Type: text/plain".to_string()];
        let mut status = 200;
        if let Some((_, q)) = target.split_once('?') {
            for kv in q.split('&') {
                if let Some(v) = kv.strip_prefix("h=") {
                    headers.push(v.replace("%20", " ").replace("%3A", ":").replace("%2C", ","));
                }
                if let Some(v) = kv.strip_prefix("s=") {
                    status = v.parse().unwrap_or(200);
                }
            }
        }
        let body = format!("response {i} to {} {}\n", r.method(), target);
        let hs: Vec<&str> = headers.iter().map(String::as_str).collect();
        Reply::http(status, &hs, body)
    });
    (o, n)
}

fn cache_server(o: &Origin, extra_http: &str, cache_dir: &str) -> TestServer {
    builder()
        .ports(2)
        .http(&sub(
            &format!(
                r#"
                proxy_cache_path {cache_dir} levels=1:2 keys_zone=one:1m inactive=1h;
                {extra_http}
                server {{
                    listen 127.0.0.1:{{port0}};
                    listen 127.0.0.1:{{port1}} http2;
                    proxy_cache one;
                    add_header X-Cache $upstream_cache_status always;
                    location / {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 200 10m; }}
                    location /any/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid any 10m; }}
                    location /dflt/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 10m; }}
                    location /none/ {{ proxy_pass http://127.0.0.1:%A%; }}
                    location /byp/ {{
                        proxy_pass http://127.0.0.1:%A%;
                        proxy_cache_valid 10m;
                        proxy_cache_key $uri;
                        proxy_cache_bypass $arg_nocache;
                    }}
                    location /nc/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 10m; proxy_no_cache $arg_nc; }}
                    location /min/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 10m; proxy_cache_min_uses 2; }}
                    location /post/ {{
                        proxy_pass http://127.0.0.1:%A%;
                        proxy_cache_valid 10m;
                        proxy_cache_methods POST;
                        proxy_cache_key $request_method$uri;
                    }}
                    location /ign/ {{
                        proxy_pass http://127.0.0.1:%A%;
                        proxy_cache_valid 10m;
                        proxy_ignore_headers Cache-Control Set-Cookie Expires;
                    }}
                    location /off/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache off; }}
                    location /mro/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 10m; proxy_cache_max_range_offset 10; }}
                }}"#
            ),
            &[("%A%", o.port)],
        ))
        .start()
}

fn get(s: &TestServer, path: &str) -> (String, String) {
    let r = s.get(path);
    assert!(r.status < 500, "{path}: {}\n{}", r.head, r.text());
    (r.header("X-Cache").unwrap_or("-").to_string(), r.text())
}

/// A request to `path` twice: the statuses and how many reached the origin.
fn twice(s: &TestServer, n: &AtomicUsize, path: &str) -> (String, String, usize) {
    let before = n.load(Ordering::SeqCst);
    let (a, body_a) = get(s, path);
    let (b, body_b) = get(s, path);
    let hits = n.load(Ordering::SeqCst) - before;
    if hits == 1 {
        assert_eq!(body_a, body_b, "{path}: a hit must give the stored body");
    }
    (a, b, hits)
}

#[test]
fn what_is_stored_follows_the_origin_headers_and_proxy_cache_valid() {
    let (o, n) = origin();
    let dir = temp_dir("cache-rules");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let mut checks = Checks::new();
    let mut case = |label: &str, path: &str, want: (&str, &str, usize)| {
        checks.run(label, || {
            let (a, b, hits) = twice(&s, &n, path);
            assert_eq!((a.as_str(), b.as_str(), hits), want, "{path}");
        });
    };
    case("plain 200", "/plain", ("MISS", "HIT", 1));
    case("query is part of the default key", "/plain?x=1", ("MISS", "HIT", 1));
    case("404 not valid here", "/p404?s=404", ("MISS", "MISS", 2));
    case("any covers 404", "/any/p404?s=404", ("MISS", "HIT", 1));
    case("valid without codes: 200", "/dflt/a", ("MISS", "HIT", 1));
    case("valid without codes: 302", "/dflt/b?s=302&h=Location:%20/x", ("MISS", "HIT", 1));
    case("valid without codes: not 404", "/dflt/c?s=404", ("MISS", "MISS", 2));
    case("no time at all", "/none/a", ("MISS", "MISS", 2));
    case("max-age without valid", "/none/b?h=Cache-Control:%20max-age=60", ("MISS", "HIT", 1));
    case("no-store", "/ns?h=Cache-Control:%20no-store", ("MISS", "MISS", 2));
    case("no-cache", "/nc1?h=Cache-Control:%20no-cache", ("MISS", "MISS", 2));
    case("private", "/pr?h=Cache-Control:%20private", ("MISS", "MISS", 2));
    case("max-age=0", "/ma0?h=Cache-Control:%20max-age=0", ("MISS", "MISS", 2));
    case("Set-Cookie", "/sc?h=Set-Cookie:%20a=b", ("MISS", "MISS", 2));
    case("Vary: *", "/vs?h=Vary:%20*", ("MISS", "MISS", 2));
    case("past Expires", "/ex?h=Expires:%20Thu,%2001%20Jan%201970%2000:00:01%20GMT", ("MISS", "MISS", 2));
    case(
        "X-Accel-Expires wins over no-cache",
        "/xa?h=X-Accel-Expires:%2060&h=Cache-Control:%20no-cache",
        ("MISS", "HIT", 1),
    );
    case("X-Accel-Expires 0", "/xa0?h=X-Accel-Expires:%200", ("MISS", "MISS", 2));
    case("ignored headers", "/ign/a?h=Cache-Control:%20no-store&h=Set-Cookie:%20a=b", ("MISS", "HIT", 1));
    case("proxy_cache off", "/off/a", ("-", "-", 2));
    case("no_cache stores nothing", "/nc/a?nc=1", ("MISS", "MISS", 2));
    checks.run("proxy_cache_max_range_offset", || {
        let before = n.load(Ordering::SeqCst);
        let r = s.get_with("/mro/a", &["Range: bytes=20-25"]);
        assert_eq!((r.status, r.header("X-Cache")), (200, Some("MISS")), "{}", r.head);
        assert_eq!(o.last().header("Range"), Some("bytes=20-25"), "passed to the origin as it is");
        let r = s.get_with("/mro/a", &["Range: bytes=2-5"]);
        assert_eq!(r.header("X-Cache"), Some("MISS"));
        assert_eq!(o.last().header("Range"), None);
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.run("X-Accel-Expires is not passed on", || {
        let r = s.get("/xa2?h=X-Accel-Expires:%2060");
        assert_eq!(r.header("X-Accel-Expires"), None, "{}", r.head);
    });
    checks.run("bypass still stores", || {
        let before = n.load(Ordering::SeqCst);
        assert_eq!(get(&s, "/byp/a?nocache=1").0, "BYPASS");
        assert_eq!(get(&s, "/byp/a").0, "HIT");
        assert_eq!(get(&s, "/byp/a?nocache=1").0, "BYPASS");
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.run("min_uses 2", || {
        let before = n.load(Ordering::SeqCst);
        let got: Vec<String> = (0..3).map(|_| get(&s, "/min/a").0).collect();
        assert_eq!(got, ["MISS", "MISS", "HIT"]);
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.run("expiry", || {
        let before = n.load(Ordering::SeqCst);
        assert_eq!(get(&s, "/exp?h=Cache-Control:%20max-age=1").0, "MISS");
        assert_eq!(get(&s, "/exp?h=Cache-Control:%20max-age=1").0, "HIT");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(get(&s, "/exp?h=Cache-Control:%20max-age=1").0, "EXPIRED");
        assert_eq!(get(&s, "/exp?h=Cache-Control:%20max-age=1").0, "HIT");
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.finish();
}

#[test]
fn methods_head_and_hit_headers() {
    let (o, n) = origin();
    let dir = temp_dir("cache-methods");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let mut checks = Checks::new();
    checks.run("HEAD is fetched as GET and fills the entry", || {
        let r = req(&s, "HEAD", "/hd", &[], b"");
        assert_eq!((r.status, r.must("X-Cache"), r.body.len()), (200, "MISS", 0), "{}", r.head);
        assert_eq!(o.last().line(), "GET /hd HTTP/1.0");
        let (st, body) = get(&s, "/hd");
        assert_eq!((st.as_str(), body.contains("to GET /hd")), ("HIT", true), "{body}");
        let r = req(&s, "HEAD", "/hd", &[], b"");
        assert_eq!((r.must("X-Cache"), r.body.len()), ("HIT", 0));
    });
    checks.run("POST is not cached by default", || {
        let before = n.load(Ordering::SeqCst);
        for _ in 0..2 {
            let r = req(&s, "POST", "/pp", &["Content-Length: 1"], b"x");
            assert_eq!((r.status, r.header("X-Cache")), (200, None), "{}", r.head);
        }
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.run("proxy_cache_methods POST", || {
        let before = n.load(Ordering::SeqCst);
        let a = req(&s, "POST", "/post/a", &["Content-Length: 1"], b"x");
        let b = req(&s, "POST", "/post/a", &["Content-Length: 1"], b"x");
        assert_eq!((a.must("X-Cache"), b.must("X-Cache")), ("MISS", "HIT"));
        assert_eq!(n.load(Ordering::SeqCst) - before, 1);
    });
    checks.run("a hit keeps the origin's headers", || {
        let p = "/hh?h=ETag:%20%22v1%22&h=X-Custom:%20kept";
        let a = s.get(p);
        let b = s.get(p);
        assert_eq!(b.must("X-Cache"), "HIT");
        for h in ["ETag", "X-Custom", "Content-Length", "Content-Type"] {
            assert_eq!(a.header(h), b.header(h), "{h}: {}\n{}", a.head, b.head);
        }
        assert_eq!(b.must("X-Custom"), "kept");
        assert_eq!(a.body, b.body);
    });
    checks.finish();
}

#[test]
fn vary_keys_variants() {
    let (o, n) = origin();
    let dir = temp_dir("cache-vary");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let p = "/v?h=Vary:%20Accept-Language";
    let ask = |lang: &str| {
        let r = s.get_with(p, &[&format!("Accept-Language: {lang}")]);
        (r.must("X-Cache").to_string(), r.text())
    };
    let (a1, en) = ask("en");
    let (a2, en2) = ask("en");
    let (b1, fr) = ask("fr");
    let (b2, fr2) = ask("fr");
    let (a3, en3) = ask("en");
    assert_eq!(
        (a1.as_str(), a2.as_str(), b1.as_str(), b2.as_str(), a3.as_str()),
        ("MISS", "HIT", "MISS", "HIT", "HIT")
    );
    assert_eq!((&en, &fr), (&en2, &fr2));
    assert_eq!(en, en3);
    assert_ne!(en, fr);
    assert_eq!(n.load(Ordering::SeqCst), 2);
}

#[test]
fn stale_answers_when_the_origin_fails() {
    let (o, n) = origin();
    let port = o.port;
    let dir = temp_dir("cache-stale");
    let s = cache_server(&o, "proxy_cache_use_stale error timeout http_500;", &dir.join("c").display().to_string());
    let p = "/st?h=Cache-Control:%20max-age=1";
    assert_eq!(get(&s, p).0, "MISS");
    let body = get(&s, p).1;
    std::thread::sleep(Duration::from_millis(2100));
    drop(o);
    let r = s.get(p);
    assert_eq!((r.status, r.must("X-Cache"), r.text()), (200, "STALE", body.clone()), "{}", r.head);
    // A 500 from a new origin on the same port: still the stale entry.
    let _o2 = Origin::start_on(port, |_| Reply::http(500, &["Content-Type: text/plain"], "broken\n"));
    let r = s.get(p);
    assert_eq!((r.status, r.must("X-Cache"), r.text()), (200, "STALE", body), "{}", r.head);
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

/// Entries on disk serve as hits after a restart and after `kill -9`,
/// without asking the origin.
#[test]
fn entries_survive_restart_and_kill_9() {
    let (o, n) = origin();
    let dir = temp_dir("cache-restart");
    let cdir = dir.join("c").display().to_string();
    let paths: Vec<String> = (0..20).map(|i| format!("/r{i}")).collect();
    let mut s = cache_server(&o, "", &cdir);
    let first: Vec<String> = paths.iter().map(|p| get(&s, p).1).collect();
    assert_eq!(n.load(Ordering::SeqCst), 20);
    s.quit();
    let mut s = cache_server(&o, "", &cdir);
    for (p, body) in paths.iter().zip(&first) {
        assert_eq!(get(&s, p), ("HIT".to_string(), body.clone()), "after restart");
    }
    s.kill("KILL");
    s.wait_exit(Duration::from_secs(5));
    let s = cache_server(&o, "", &cdir);
    for (p, body) in paths.iter().zip(&first) {
        assert_eq!(get(&s, p), ("HIT".to_string(), body.clone()), "after kill -9");
    }
    assert_eq!(n.load(Ordering::SeqCst), 20, "the origin saw nothing after the first fill");
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A truncated entry, a damaged one and files that are not entries at all
/// start cleanly and miss; the bad files are removed. sluice's own format:
/// nginx's files differ, so this runs against sluice only.
#[test]
fn damaged_and_foreign_files_miss_and_are_removed() {
    if nginx_mode() {
        return;
    }
    let (o, n) = origin();
    let dir = temp_dir("cache-damaged");
    let cdir = dir.join("c");
    let mut s = cache_server(&o, "", &cdir.display().to_string());
    let bodies: Vec<String> = (0..3).map(|i| get(&s, &format!("/d{i}")).1).collect();
    s.quit();
    let mut files = files_under(&cdir);
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    // Cut one short, flip a header byte in another, keep the third.
    let f0 = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &f0[..f0.len() - 3]).unwrap();
    let mut f1 = std::fs::read(&files[1]).unwrap();
    f1[20] ^= 0x40;
    std::fs::write(&files[1], &f1).unwrap();
    // Foreign files: one at the top, one where an entry would be.
    std::fs::write(cdir.join("garbage.txt"), "not an entry").unwrap();
    let sub = files[2].parent().unwrap();
    std::fs::write(sub.join("0123456789abcdef0123456789abcdef"), vec![0u8; 100]).unwrap();
    std::fs::write(sub.join("0123456789abcdef0123456789abcdef.tmp99.1"), "half").unwrap();
    let s = cache_server(&o, "", &cdir.display().to_string());
    let before = n.load(Ordering::SeqCst);
    let mut statuses = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let (st, b) = get(&s, &format!("/d{i}"));
        if st == "HIT" {
            assert_eq!(&b, body, "a hit must be the stored body");
        }
        statuses.push(st);
    }
    statuses.sort();
    assert_eq!(statuses, ["HIT", "MISS", "MISS"]);
    assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    // The loader removes what is not an entry where entries live (it runs
    // in the background); a file outside the levels is left alone.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = files_under(&cdir);
    while left.len() != 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = files_under(&cdir);
    }
    assert_eq!(left.len(), 4, "three entries and garbage.txt: {left:?}");
    assert!(left.iter().any(|p| p.ends_with("garbage.txt")), "{left:?}");
    assert!(!left.iter().any(|p| p.to_string_lossy().contains("0123456789abcdef")), "{left:?}");
    assert!(s.error_log().contains("is invalid"), "{}", s.error_log());
}

/// `proxy_cache_lock`: concurrent misses for one key make one origin
/// request, and every client is answered as soon as it is in (nginx polls
/// every 500 ms; sluice wakes the waiters at once).
#[test]
fn lock_coalesces_misses_and_wakes_waiters_at_once() {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let o = Origin::start(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        Reply::http(200, &["Content-Type: text/plain"], "slow answer\n").after(Duration::from_millis(300))
    });
    let dir = temp_dir("cache-lock");
    let s = cache_server(&o, "proxy_cache_lock on;", &dir.join("c").display().to_string());
    let start = Instant::now();
    let threads: Vec<_> = (0..40)
        .map(|_| {
            let port = s.port;
            std::thread::spawn(move || {
                let r = request(port, "GET /lock HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
                (r.status, r.text(), Instant::now())
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(n.load(Ordering::SeqCst), 1, "one origin request for 40 concurrent misses");
    for (status, body, _) in &results {
        assert_eq!((*status, body.as_str()), (200, "slow answer\n"));
    }
    let slowest = results.iter().map(|(_, _, t)| t.duration_since(start)).max().unwrap();
    if !nginx_mode() {
        assert!(slowest < Duration::from_millis(300 + 200), "slowest answer after {slowest:?}");
    }
}

#[test]
fn http2_hits_share_the_cache() {
    let (o, n) = origin();
    let dir = temp_dir("cache-h2");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let url = format!("http://127.0.0.1:{}/h2obj", s.ports[1]);
    let a = curl(&["--http2-prior-knowledge", "-D", "-", &url]).text();
    let b = curl(&["--http2-prior-knowledge", "-D", "-", &url]).text();
    assert!(a.to_ascii_lowercase().contains("x-cache: miss"), "{a}");
    assert!(b.to_ascii_lowercase().contains("x-cache: hit"), "{b}");
    let (st, _) = get(&s, "/h2obj");
    assert_eq!(st, "HIT");
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

/// The configuration errors an operator can make, with nginx's messages.
#[test]
fn config_errors() {
    let cases = [
        ("proxy_cache_path /tmp/x levels=1;", "\"proxy_cache_path\" must have \"keys_zone\" parameter"),
        ("proxy_cache_path /tmp/x keys_zone=a:zz;", "invalid keys zone size \"keys_zone=a:zz\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1k;", "keys zone \"keys_zone=a:1k\" is too small"),
        ("proxy_cache_path /tmp/x keys_zone=a:1m levels=3;", "invalid \"levels\" \"levels=3\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1m levels=1:2:2:2;", "invalid \"levels\" \"levels=1:2:2:2\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1m bogus=1;", "invalid parameter \"bogus=1\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1m inactive=zz;", "invalid inactive value \"inactive=zz\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1m max_size=1x;", "invalid max_size value \"max_size=1x\""),
        ("proxy_cache_path /tmp/x keys_zone=a:1m; proxy_cache_path /tmp/y keys_zone=a:1m;", "duplicate zone \"a\""),
        (
            "proxy_cache_path /tmp/x keys_zone=a:1m; proxy_cache_path /tmp/x keys_zone=b:1m;",
            "the same path name \"/tmp/x\" used in",
        ),
        ("proxy_cache nope;", "\"proxy_cache\" zone \"nope\" is unknown"),
        ("proxy_cache_valid 20x 1m;", "invalid status \"20x\""),
        ("proxy_cache_use_stale http_501;", "invalid value \"http_501\""),
        ("proxy_cache_methods PUT;", "invalid value \"PUT\""),
        ("proxy_ignore_headers Foo;", "invalid value \"Foo\""),
    ];
    for (conf, want) in cases {
        let b = builder().http(&format!("{conf}\nserver {{ listen 127.0.0.1:{{port}}; }}"));
        let t = b.prepare();
        let out = t.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{conf}: accepted");
        assert!(err.contains(want), "{conf}: {err}");
    }
}

/// Ranges and conditional requests are answered from the stored entry, on
/// the miss that fills it as on later hits; the origin is asked for the
/// whole, unconditional representation.
#[test]
fn ranges_and_conditionals_from_the_cache() {
    const AZ: &str = "abcdefghijklmnopqrstuvwxyz";
    const ETAG: &str = "\"v1\"";
    let o = Origin::start(|r| {
        let mut h = vec!["Content-Type: text/plain", "ETag: \"v1\"", "Last-Modified: Mon, 02 Jan 2023 03:04:05 GMT"];
        if !r.target().starts_with("/norange") {
            h.push("Accept-Ranges: bytes");
        }
        Reply::http(200, &h, AZ)
    });
    let dir = temp_dir("cache-ranges");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let mut checks = Checks::new();
    checks.run("range on the miss, then on the hit", || {
        for want in ["MISS", "HIT"] {
            let r = s.get_with("/rg", &["Range: bytes=2-4"]);
            assert_eq!((r.status, r.must("X-Cache"), r.text().as_str()), (206, want, "cde"), "{}", r.head);
            assert_eq!(r.must("Content-Range"), "bytes 2-4/26");
        }
        let q = o.last();
        assert_eq!(q.header("Range"), None, "the origin is asked for everything: {}", q.head);
    });
    checks.run("several ranges from a hit", || {
        let r = s.get_with("/rg", &["Range: bytes=0-1,5-6"]);
        assert_eq!(r.status, 206);
        assert!(r.must("Content-Type").starts_with("multipart/byteranges; boundary="), "{}", r.head);
        let t = r.text();
        assert!(t.contains("Content-Range: bytes 0-1/26\r\n\r\nab\r\n"), "{t}");
        assert!(t.contains("Content-Range: bytes 5-6/26\r\n\r\nfg\r\n"), "{t}");
    });
    checks.run("unsatisfiable range", || {
        let r = s.get_with("/rg", &["Range: bytes=50-60"]);
        assert_eq!((r.status, r.must("Content-Range")), (416, "bytes */26"));
    });
    checks.run("If-Range that does not match gives everything", || {
        let r = s.get_with("/rg", &["Range: bytes=2-4", "If-Range: \"v0\""]);
        assert_eq!((r.status, r.text().as_str()), (200, AZ));
    });
    checks.run("no ranges when the origin did not offer them", || {
        for want in ["MISS", "HIT"] {
            let r = s.get_with("/norange", &["Range: bytes=2-4"]);
            assert_eq!((r.status, r.must("X-Cache"), r.text().as_str()), (200, want, AZ));
            assert_eq!(r.header("Accept-Ranges"), None);
        }
    });
    checks.run("304 on the miss and on the hit", || {
        for (path, want) in [("/cond", "MISS"), ("/cond", "HIT")] {
            let r = s.get_with(path, &[&format!("If-None-Match: {ETAG}")]);
            assert_eq!((r.status, r.must("X-Cache"), r.body.len()), (304, want, 0), "{}", r.head);
            assert_eq!(r.must("ETag"), ETAG);
            assert_eq!(r.header("Accept-Ranges"), None);
        }
        let r = s.get("/cond");
        assert_eq!((r.status, r.must("X-Cache"), r.text().as_str()), (200, "HIT", AZ));
        let r = s.get_with("/cond", &["If-Modified-Since: Mon, 02 Jan 2023 03:04:05 GMT"]);
        assert_eq!(r.status, 304);
        let r = s.get_with("/cond", &["If-Match: \"other\""]);
        assert_eq!(r.status, 412);
        assert_eq!(o.requests().iter().filter(|q| q.target() == "/cond").count(), 1);
        assert_eq!(o.last().header("If-None-Match"), None);
    });
    checks.finish();
}

/// The nginx configuration of the nuster benchmark article (seed 003) runs
/// as published but for addresses, file paths and the user, and its
/// HTTP/2 + TLS hits come from the cache.
#[test]
fn nuster_article_config_runs_and_serves_h2_hits() {
    use common::tls::*;
    let o = Origin::start(|r| {
        Reply::http(
            200,
            &["Content-Type: text/plain"],
            if r.target() == "/helloworld" { "hello world\n" } else { "?\n" },
        )
    });
    let cache = temp_dir("cache-nuster").join("cache_all").display().to_string();
    let conf = format!(
        r#"user  nobody nogroup;
worker_processes  auto;
worker_rlimit_nofile 1000000;
error_log  logs/errorall.log warn;
pid        logs/nginxall.pid;
events {{
  worker_connections  1000000;
  use epoll;
  multi_accept on;
}}
http {{
  include                     mime.types;
  default_type                application/octet-stream;
  access_log                  off;
  sendfile                    on;
  server_tokens               off;
  keepalive_timeout           300;
  keepalive_requests          100000;
  tcp_nopush                  on;
  tcp_nodelay                 on;
  client_body_buffer_size     128k;
  client_header_buffer_size   1m;
  large_client_header_buffers 4 4k;
  output_buffers              1 32k;
  postpone_output             1460;
  open_file_cache             max=200000 inactive=20s;
  open_file_cache_valid       30s;
  open_file_cache_min_uses    2;
  open_file_cache_errors      on;
  proxy_cache_path {cache} levels=1:2 keys_zone=STATIC:10m inactive=24h max_size=1g;
  server {{
    listen 127.0.0.1:{{port}} ssl http2;
    ssl on;
    ssl_session_cache shared:SSL:5m;
    ssl_session_timeout 1h;
    http2_max_concurrent_streams 1000;
    http2_max_requests 10000000;
    ssl_certificate     tls/localhost.ecdsa.crt;
    ssl_certificate_key tls/localhost.ecdsa.key;
    location / {{
      proxy_pass        http://127.0.0.1:{}/;
      proxy_cache       STATIC;
      proxy_cache_valid any 1d;
    }}
  }}
}}
"#,
        o.port
    );
    let s = builder().tls_files().whole(&conf).arg("-g").arg("daemon off;").start();
    let url = format!("https://127.0.0.1:{}/helloworld", s.port);
    let first = curl(&["-k", "--http2", &url]);
    assert_eq!(first.text(), "hello world\n");
    let r = h2load(&["-c", "10", "-m", "10", "-n", "2000", &url]);
    assert!(r.output.contains("Application protocol: h2"), "{}", r.output);
    assert_eq!((r.succeeded, r.failed, r.errored), (2000, 0, 0), "{}", r.output);
    assert!(r.status_codes.starts_with("status codes: 2000 2xx"), "{}", r.output);
    assert_eq!(o.count(), 1, "every h2load request was a hit");
}

/// `proxy_cache_purge` as the ngx_cache_purge module has it (a PURGE
/// request, a purge location, a key prefix with `*`) and as NGINX Plus has
/// it (a condition). sluice only: Debian's build of the module crashes
/// nginx 1.22's worker on a same-location PURGE.
#[test]
fn purge_by_request_by_location_and_by_prefix() {
    if nginx_mode() {
        return;
    }
    let (o, n) = origin();
    let dir = temp_dir("cache-purge");
    let cdir = dir.join("c");
    let s = builder()
        .http(&sub(
            &format!(
                r#"
                proxy_cache_path {} levels=1:2 keys_zone=one:1m;
                map $request_method $purge_method {{ PURGE 1; default 0; }}
                server {{
                    listen 127.0.0.1:{{port}};
                    proxy_cache one;
                    proxy_cache_valid 10m;
                    proxy_cache_key $uri;
                    add_header X-Cache $upstream_cache_status always;
                    location / {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_purge PURGE from 127.0.0.1 ::1; }}
                    location /far/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_purge on from 10.0.0.0/8; }}
                    location /cond/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_purge $purge_method; }}
                    location ~ ^/purge(/.*)$ {{ proxy_cache_purge one $1; }}
                }}"#,
                cdir.display()
            ),
            &[("%A%", o.port)],
        ))
        .start();
    let status = |p: &str| get(&s, p).0;
    let mut checks = Checks::new();
    checks.run("PURGE request", || {
        assert_eq!((status("/x"), status("/x")), ("MISS".into(), "HIT".into()));
        let r = req(&s, "PURGE", "/x", &[], b"");
        assert_eq!((r.status, r.must("Content-Type")), (200, "text/html"), "{}", r.head);
        assert!(r.text().contains("<h1>Successful purge</h1>") && r.text().contains("<br>Key : /x"), "{}", r.text());
        assert_eq!(status("/x"), "MISS");
        assert_eq!(status("/x"), "HIT");
        assert_eq!(req(&s, "PURGE", "/x", &[], b"").status, 200);
        assert_eq!(req(&s, "PURGE", "/x", &[], b"").status, 404, "nothing left to purge");
    });
    checks.run("PURGE from an address not listed", || {
        status("/far/a");
        assert_eq!(req(&s, "PURGE", "/far/a", &[], b"").status, 403);
        assert_eq!(status("/far/a"), "HIT");
    });
    checks.run("condition", || {
        status("/cond/a");
        assert_eq!(req(&s, "PURGE", "/cond/a", &[], b"").status, 200);
        assert_eq!(status("/cond/a"), "MISS");
    });
    checks.run("purge location", || {
        status("/y");
        let r = s.get("/purge/y");
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(status("/y"), "MISS");
        assert_eq!(s.get("/purge/nothing-here").status, 404);
    });
    checks.run("prefix", || {
        for p in ["/pre/1", "/pre/2", "/pre/3/x", "/other"] {
            status(p);
            assert_eq!(status(p), "HIT");
        }
        let before = files_under(&cdir).len();
        assert_eq!(s.get("/purge/pre/*").status, 200);
        for p in ["/pre/1", "/pre/2", "/pre/3/x"] {
            assert_eq!(status(p), "MISS", "{p}");
        }
        assert_eq!(status("/other"), "HIT");
        // The purged files go; the refilled entries replace them.
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(files_under(&cdir).len(), before, "{:?}", files_under(&cdir));
        for p in ["/pre/1", "/pre/2", "/pre/3/x", "/other"] {
            assert_eq!(status(p), "HIT", "{p}");
        }
    });
    checks.finish();
    assert!(n.load(Ordering::SeqCst) > 0);
}

/// Hits are compressed on the way out like any response (the entry holds
/// the origin's bytes), from the memory tier and from disk alike.
#[test]
fn hits_are_compressed_on_the_way_out() {
    let body = "compress me please; ".repeat(200);
    let b2 = body.clone();
    let o = Origin::start(move |_| Reply::http(200, &["Content-Type: text/plain"], &b2));
    let dir = temp_dir("cache-gzip");
    let s =
        cache_server(&o, "gzip on; gzip_min_length 10; gzip_types text/plain;", &dir.join("c").display().to_string());
    for want in ["MISS", "HIT", "HIT"] {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "-D", "-", "--compressed", &format!("http://127.0.0.1:{}/z", s.port)])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lower = text.to_ascii_lowercase();
        assert!(lower.contains("content-encoding: gzip"), "{want}: {text}");
        assert!(lower.contains(&format!("x-cache: {}", want.to_ascii_lowercase())), "{text}");
        assert!(text.ends_with(&body), "{want}: decoded body differs");
    }
    let (st, plain) = get(&s, "/z");
    assert_eq!((st.as_str(), plain), ("HIT", body));
    assert_eq!(o.count(), 1);
}

/// An origin whose entity changes with each request (the body names the
/// request number), valid for one second, and that answers a matching
/// If-None-Match with 304.
fn versioned_origin() -> (Origin, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let o = Origin::start(move |r| {
        let i = c.fetch_add(1, Ordering::SeqCst) + 1;
        if r.header("If-None-Match") == Some("\"same\"") {
            return Reply::http(304, &["ETag: \"same\"", "Cache-Control: max-age=1"], "");
        }
        let slow = r.target().contains("slow") && i > 1;
        let reply = Reply::http(
            200,
            &["Content-Type: text/plain", "Cache-Control: max-age=1", "ETag: \"same\""],
            format!("version {i}\n"),
        );
        if slow { reply.after(Duration::from_millis(600)) } else { reply }
    });
    (o, n)
}

/// Expired entries: `proxy_cache_background_update` answers with the stale
/// entry at once and refreshes it behind; `proxy_cache_revalidate` asks the
/// origin with the entry's validators and keeps it on a 304; with
/// `proxy_cache_use_stale updating` a request for an entry being refreshed
/// gets the stale one.
#[test]
fn background_update_revalidate_and_updating() {
    let (o, n) = versioned_origin();
    let dir = temp_dir("cache-refresh");
    let s = builder()
        .http(&sub(
            &format!(
                r#"
                proxy_cache_path {} levels=1:2 keys_zone=one:1m;
                server {{
                    listen 127.0.0.1:{{port}};
                    proxy_cache one;
                    add_header X-Cache $upstream_cache_status always;
                    location /bg/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_use_stale updating; proxy_cache_background_update on; }}
                    location /rv/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_revalidate on; }}
                    location /up/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_use_stale updating; }}
                }}"#,
                dir.join("c").display()
            ),
            &[("%A%", o.port)],
        ))
        .start();
    let mut checks = Checks::new();
    checks.run("background update", || {
        let (a, body1) = get(&s, "/bg/x");
        assert_eq!((a.as_str(), get(&s, "/bg/x").0.as_str()), ("MISS", "HIT"));
        std::thread::sleep(Duration::from_millis(2100));
        let (st, old) = get(&s, "/bg/x");
        assert_eq!((st.as_str(), &old), ("STALE", &body1), "the stale entry at once");
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut last = get(&s, "/bg/x");
        while last.1 == body1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            last = get(&s, "/bg/x");
        }
        assert_eq!(last.0, "HIT");
        assert_ne!(last.1, body1, "refreshed behind the stale answer");
    });
    checks.run("revalidate", || {
        let before = n.load(Ordering::SeqCst);
        let (a, body) = get(&s, "/rv/y");
        assert_eq!((a.as_str(), get(&s, "/rv/y").0.as_str()), ("MISS", "HIT"));
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(get(&s, "/rv/y"), ("REVALIDATED".to_string(), body.clone()));
        let q = o.last();
        assert_eq!(q.header("If-None-Match"), Some("\"same\""), "{}", q.head);
        assert_eq!(get(&s, "/rv/y"), ("HIT".to_string(), body), "valid again after the 304");
        assert_eq!(n.load(Ordering::SeqCst) - before, 2);
    });
    checks.run("updating", || {
        get(&s, "/up/slow");
        std::thread::sleep(Duration::from_millis(2100));
        let port = s.port;
        let first = std::thread::spawn(move || {
            request(port, "GET /up/slow HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        });
        std::thread::sleep(Duration::from_millis(150));
        let t = Instant::now();
        let (st, _) = get(&s, "/up/slow");
        assert_eq!(st, "UPDATING");
        assert!(t.elapsed() < Duration::from_millis(400), "answered without waiting: {:?}", t.elapsed());
        let r = first.join().unwrap();
        assert_eq!(r.must("X-Cache"), "EXPIRED");
    });
    checks.finish();
}

/// `proxy_cache_lock_timeout` and `proxy_cache_lock_age`: waiters give up
/// on a fill that takes too long. Past the lock timeout a waiter asks the
/// origin itself and stores nothing; past the lock age one more request
/// fills in the first one's place.
#[test]
fn lock_timeout_and_lock_age() {
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let o = Origin::start(move |r| {
        let i = c.fetch_add(1, Ordering::SeqCst) + 1;
        let slow = if i == 1 { Duration::from_millis(1500) } else { Duration::from_millis(10) };
        Reply::http(200, &["Content-Type: text/plain"], format!("answer {i} to {}\n", r.target())).after(slow)
    });
    let dir = temp_dir("cache-lockage");
    let s = builder()
        .http(&sub(
            &format!(
                r#"
                proxy_cache_path {} levels=1:2 keys_zone=one:1m;
                server {{
                    listen 127.0.0.1:{{port}};
                    proxy_cache one;
                    proxy_cache_valid 10m;
                    proxy_cache_lock on;
                    add_header X-Cache $upstream_cache_status always;
                    location /t/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_lock_timeout 300ms; }}
                    location /a/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_lock_timeout 5s; proxy_cache_lock_age 300ms; }}
                }}"#,
                dir.join("c").display()
            ),
            &[("%A%", o.port)],
        ))
        .start();
    let port = s.port;
    let bg = |path: &'static str| {
        std::thread::spawn(move || {
            request(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
        })
    };
    // Lock timeout: the waiter goes to the origin after 300 ms; its answer
    // is not stored, so the slow first fill's answer is what stays.
    let first = bg("/t/x");
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let (st, body) = get(&s, "/t/x");
    assert!(t.elapsed() < Duration::from_millis(1000), "{:?}", t.elapsed());
    assert!(body.starts_with("answer 2"), "{st} {body}");
    let r1 = first.join().unwrap();
    assert!(r1.text().starts_with("answer 1"), "{}", r1.text());
    assert_eq!(get(&s, "/t/x").1, r1.text(), "the first fill's answer is stored");
    // Lock age: past 300 ms a waiter fills in the slow fill's place.
    let before = n.load(Ordering::SeqCst);
    n.store(0, Ordering::SeqCst);
    let first = bg("/a/y");
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    let (_, body) = get(&s, "/a/y");
    assert!(t.elapsed() < Duration::from_millis(1000), "{:?}", t.elapsed());
    assert!(body.starts_with("answer 2"), "{body}");
    first.join().unwrap();
    assert!(before >= 2);
}

/// `kill -9` while a 200 MB entry is being written leaves no half entry:
/// after the restart the key is a miss and the origin is asked again.
#[test]
fn kill_9_mid_write_leaves_no_half_entry() {
    const MB: usize = 1 << 20;
    let n = Arc::new(AtomicUsize::new(0));
    let c = n.clone();
    let o = Origin::start(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        let chunk = vec![b'x'; MB];
        let mut r = Reply::raw(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            200 * MB
        ));
        for _ in 0..200 {
            r = r.then_write(&chunk).then_sleep(Duration::from_millis(5));
        }
        r
    });
    let dir = temp_dir("cache-kill-write");
    let cdir = dir.join("c").display().to_string();
    let mut s = cache_server(&o, "", &cdir);
    let mut conn = s.connect();
    conn.send("GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n");
    // Read until some 20 MB arrived, then kill the server mid-body.
    let mut got = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let deadline = Instant::now() + Duration::from_secs(20);
    while got < 20 * MB && Instant::now() < deadline {
        match std::io::Read::read(&mut conn.stream, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    assert!(got >= 20 * MB, "only {got} bytes arrived");
    s.kill("KILL");
    s.wait_exit(Duration::from_secs(5));
    drop(conn);
    let s = cache_server(&o, "", &cdir);
    let r = s.get("/big");
    assert_eq!((r.status, r.must("X-Cache"), r.body.len()), (200, "MISS", 200 * MB));
    assert_eq!(n.load(Ordering::SeqCst), 2, "the half-written entry was not served");
    let r = s.get("/big");
    assert_eq!((r.must("X-Cache"), r.body.len()), ("HIT", 200 * MB));
}

/// A 1 GB object streams to the client while it is written to the cache:
/// the server's memory does not grow with it, and the next request is a
/// hit of the whole object.
#[test]
fn one_gigabyte_object_streams_through_with_bounded_memory() {
    const GB: u64 = 1 << 30;
    let origin = builder().http("server { listen 127.0.0.1:{port}; root html; }").start();
    let big = origin.path("html/big.bin");
    std::fs::File::create(&big).and_then(|f| f.set_len(GB)).expect("sparse 1 GB file");
    let dir = temp_dir("cache-1g");
    let o_port = origin.port;
    let s = builder()
        .http(&format!(
            "proxy_cache_path {} levels=1:2 keys_zone=one:1m;
             server {{
                 listen 127.0.0.1:{{port}};
                 proxy_cache one;
                 proxy_cache_valid 10m;
                 add_header X-Cache $upstream_cache_status always;
                 location / {{ proxy_pass http://127.0.0.1:{o_port}; }}
             }}",
            dir.join("c").display()
        ))
        .start();
    let hwm = |pid: u32| -> u64 {
        let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        st.lines()
            .find(|l| l.starts_with("VmHWM:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    assert_eq!(s.get("/small-warmup").status, 404);
    let before = hwm(s.pid());
    let url = format!("http://127.0.0.1:{}/big.bin", s.port);
    for want in ["MISS", "HIT"] {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "120", "-o", "/dev/null", "-D", "-", "-w", "%{size_download}", &url])
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains(&format!("X-Cache: {want}")), "{text}");
        assert!(text.ends_with(&GB.to_string()), "{text}");
    }
    if !nginx_mode() {
        let growth = hwm(s.pid()).saturating_sub(before);
        assert!(growth < 64 << 20, "peak RSS grew by {} MB", growth >> 20);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reload keeps the cache: entries stay hits, with no origin request.
#[test]
fn reload_keeps_the_cache() {
    let (o, n) = origin();
    let dir = temp_dir("cache-reload");
    let s = cache_server(&o, "", &dir.join("c").display().to_string());
    let bodies: Vec<String> = (0..5).map(|i| get(&s, &format!("/k{i}")).1).collect();
    assert_eq!(n.load(Ordering::SeqCst), 5);
    s.signal("reload");
    // The new generation answers once the old one has handed over.
    std::thread::sleep(Duration::from_millis(500));
    for (i, b) in bodies.iter().enumerate() {
        assert_eq!(get(&s, &format!("/k{i}")), ("HIT".to_string(), b.clone()));
    }
    assert_eq!(n.load(Ordering::SeqCst), 5);
}

/// The manager keeps the disk under `max_size` (least recently used
/// first) and drops entries unused for `inactive`. sluice's manager runs
/// once a second; nginx's may wait ten, so this runs on sluice only.
#[test]
fn max_size_and_inactive_are_enforced() {
    if nginx_mode() {
        return;
    }
    let body = "x".repeat(10_000);
    let b2 = body.clone();
    let o = Origin::start(move |_| Reply::http(200, &["Content-Type: text/plain"], &b2));
    let dir = temp_dir("cache-evict");
    let cdir = dir.join("c");
    let s = builder()
        .http(&format!(
            "proxy_cache_path {} levels=1 keys_zone=one:1m max_size=50k inactive=6s;
             server {{
                 listen 127.0.0.1:{{port}};
                 proxy_cache one;
                 proxy_cache_valid 10m;
                 add_header X-Cache $upstream_cache_status always;
                 location / {{ proxy_pass http://127.0.0.1:{}; }}
             }}",
            cdir.display(),
            o.port
        ))
        .start();
    let du = || files_under(&cdir).iter().map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum::<u64>();
    for i in 0..20 {
        get(&s, &format!("/e{i}"));
        if i >= 15 {
            // The last five are used again: the most recently used stay.
            get(&s, &format!("/e{i}"));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while du() > 50 * 1024 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(du() <= 50 * 1024, "{} bytes on disk", du());
    assert_eq!(get(&s, "/e19").0, "HIT", "the most recently used entry stays");
    assert_eq!(get(&s, "/e0").0, "MISS", "the least recently used went first");
    // Nothing is used for longer than `inactive`: everything goes.
    let deadline = Instant::now() + Duration::from_secs(12);
    while !files_under(&cdir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(files_under(&cdir).is_empty(), "{:?}", files_under(&cdir));
}

/// Disk hits (no memory tier) keep serving the right file: after the entry
/// is replaced (expired and refetched) or purged, the worker's open
/// descriptor of the old file is not used again.
#[test]
fn disk_hits_follow_replaced_and_purged_entries() {
    let (o, _n) = versioned_origin();
    let dir = temp_dir("cache-open");
    let memory = if nginx_mode() { "" } else { " memory=0" };
    let s = builder()
        .http(&sub(
            &format!(
                r#"
                proxy_cache_path {}{memory} levels=1:2 keys_zone=one:1m;
                server {{
                    listen 127.0.0.1:{{port}};
                    proxy_cache one;
                    add_header X-Cache $upstream_cache_status always;
                    location / {{ proxy_pass http://127.0.0.1:%A%; }}
                }}"#,
                dir.join("c").display()
            ),
            &[("%A%", o.port)],
        ))
        .start();
    let (a, v1) = get(&s, "/d");
    assert_eq!(a, "MISS");
    for _ in 0..3 {
        assert_eq!(get(&s, "/d"), ("HIT".to_string(), v1.clone()));
    }
    std::thread::sleep(Duration::from_millis(2100));
    let (st, v2) = get(&s, "/d");
    assert_eq!(st, "EXPIRED");
    assert_ne!(v1, v2);
    for _ in 0..3 {
        assert_eq!(get(&s, "/d"), ("HIT".to_string(), v2.clone()), "the new entry, not the old file");
    }
}
