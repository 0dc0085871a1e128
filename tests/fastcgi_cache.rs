//! `fastcgi_cache*` against a real php-fpm (tests/common/fpm.rs): the same
//! cache engine as `proxy_cache*`, with FastCGI's spelling and nginx's
//! FastCGI rules (no default key, no HEAD conversion, the cache's request
//! headers as `HTTP_*` params). Each script counts the times PHP ran it in
//! a file beside the document root, so "served from the cache" means PHP
//! did not run.
//!
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::fs;
use std::time::Duration;

use common::fpm::*;
use common::*;

/// Counts its runs in ../runs-NAME and answers with the count.
const COUNT: &str = r#"<?php
$f = __DIR__ . "/../runs-" . basename($_SERVER["SCRIPT_NAME"], ".php");
$n = (int)@file_get_contents($f) + 1;
file_put_contents($f, $n);
header("Content-Type: text/plain");
header("X-Run: $n");
echo "run $n of ", $_SERVER["REQUEST_URI"], "\n";
"#;

/// What PHP's sessions send: no-store, an Expires in 1981 and a cookie.
const SESSION: &str = r#"<?php
session_save_path(__DIR__ . "/..");
session_start();
$f = __DIR__ . "/../runs-session";
$n = (int)@file_get_contents($f) + 1;
file_put_contents($f, $n);
echo "session run $n\n";
"#;

/// A validator-aware page: ETag "v1", a 1 s lifetime, 304 when asked with
/// its ETag. Logs the conditional params each run saw.
const ETAG: &str = r#"<?php
$seen = [];
foreach (["HTTP_IF_NONE_MATCH", "HTTP_IF_MODIFIED_SINCE", "HTTP_RANGE", "HTTP_IF_RANGE"] as $k) {
    if (isset($_SERVER[$k])) { $seen[] = "$k=" . $_SERVER[$k]; }
}
file_put_contents(__DIR__ . "/../etag.log", implode(" ", $seen) . "\n", FILE_APPEND);
header('ETag: "v1"');
header("Cache-Control: max-age=1");
if (($_SERVER["HTTP_IF_NONE_MATCH"] ?? "") === '"v1"') { http_response_code(304); exit; }
echo str_repeat("0123456789", 10), "\n";
"#;

fn runs(s: &TestServer, name: &str) -> u32 {
    fs::read_to_string(s.path(&format!("runs-{name}"))).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// sluice (or nginx) with a FastCGI cache zone in front of `fpm`;
/// `extra` goes in the caching location.
fn server(fpm: &Fpm, extra: &str) -> TestServer {
    let http = format!(
        r#"
        fastcgi_cache_path {{prefix}}/fcache levels=1:2 keys_zone=php:1m;
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {{prefix}}/html;
            location ~ \.php$ {{
                include fastcgi_params;
                fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
                fastcgi_pass unix:{sock};
                fastcgi_cache php;
                fastcgi_cache_key "$scheme$request_method$host$request_uri";
                add_header X-Cache $upstream_cache_status always;
                {extra}
            }}
        }}
        "#,
        sock = fpm.sock.display()
    );
    with_params(builder().http(&http))
        .file("html/count.php", COUNT)
        .file("html/session.php", SESSION)
        .file("html/etag.php", ETAG)
        .start()
}

fn req(s: &TestServer, method: &str, target: &str, extra: &str) -> Response {
    let body = if method == "POST" { "Content-Length: 3\r\n\r\nabc" } else { "\r\n" };
    let r = request(
        s.port,
        &format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n{extra}Connection: close\r\n{body}"),
    );
    assert!(r.status < 500, "{target}: {}\n{}", r.head, s.error_log());
    r
}

fn cache_status(r: &Response) -> &str {
    r.header("X-Cache").unwrap_or("-")
}

#[test]
fn a_hit_is_served_without_running_php() {
    let fpm = Fpm::start();
    let s = server(&fpm, "fastcgi_cache_valid 200 1m;");
    let a = req(&s, "GET", "/count.php?x=1", "");
    let b = req(&s, "GET", "/count.php?x=1", "");
    assert_eq!((cache_status(&a), cache_status(&b)), ("MISS", "HIT"), "{}\n{}", a.head, b.head);
    assert_eq!(a.body, b.body);
    assert_eq!(a.text(), "run 1 of /count.php?x=1\n");
    assert_eq!((b.header("X-Run"), b.header("Content-Type")), (Some("1"), Some("text/plain;charset=UTF-8")));
    assert_eq!(runs(&s, "count"), 1);
    // Another URI is another key; the entry is a file under the zone.
    assert_eq!(cache_status(&req(&s, "GET", "/count.php?x=2", "")), "MISS");
    assert_eq!(runs(&s, "count"), 2);
    let files = common::cache::files_under(&s.path("fcache"));
    assert_eq!(files.len(), 2, "{files:?}");
    // POST is not among fastcgi_cache_methods: PHP runs each time, and
    // nothing is stored for it.
    let p = req(&s, "POST", "/count.php?x=1", "Content-Type: text/plain\r\n");
    assert_eq!((p.status, cache_status(&p)), (200, "-"), "{}", p.head);
    assert_eq!(p.text(), "run 3 of /count.php?x=1\n");
    // A HEAD reaches PHP as HEAD (no fastcgi_cache_convert_head): under
    // this key (with $request_method) it is its own entry.
    let h = req(&s, "HEAD", "/count.php?x=1", "");
    assert_eq!((h.status, cache_status(&h)), (200, "MISS"), "{}", h.head);
    assert!(h.body.is_empty());
    assert_eq!(runs(&s, "count"), 4);
    assert_eq!(cache_status(&req(&s, "GET", "/count.php?x=1", "")), "HIT");
}

#[test]
fn session_pages_are_stored_only_when_their_headers_are_ignored() {
    let fpm = Fpm::start();
    // PHP's session headers (Cache-Control: no-store, an old Expires,
    // Set-Cookie) keep the response out of the cache.
    let s = server(&fpm, "fastcgi_cache_valid 200 1m;");
    let a = req(&s, "GET", "/session.php", "");
    assert!(a.header("Set-Cookie").is_some_and(|c| c.starts_with("PHPSESSID=")), "{}", a.head);
    let b = req(&s, "GET", "/session.php", "");
    assert_eq!((cache_status(&a), cache_status(&b)), ("MISS", "MISS"));
    assert_eq!(runs(&s, "session"), 2);
    drop(s);
    let s = server(&fpm, "fastcgi_cache_valid 200 1m;\nfastcgi_ignore_headers Cache-Control Expires Set-Cookie;");
    let a = req(&s, "GET", "/session.php", "");
    let b = req(&s, "GET", "/session.php", "");
    assert_eq!((cache_status(&a), cache_status(&b)), ("MISS", "HIT"), "{}", b.head);
    assert_eq!(b.text(), "session run 1\n");
    assert_eq!(runs(&s, "session"), 1);
}

#[test]
fn revalidation_sends_the_entry_validators_to_php_and_never_the_clients() {
    let fpm = Fpm::start();
    let s = server(&fpm, "fastcgi_cache_revalidate on;");
    // The client's own conditions and range are not passed: PHP is asked
    // for the whole, unconditional page (which says no Accept-Ranges, so
    // the whole page is the answer).
    let a = req(&s, "GET", "/etag.php", "If-None-Match: \"zzz\"\r\nRange: bytes=0-4\r\nIf-Range: \"v1\"\r\n");
    assert_eq!((a.status, cache_status(&a)), (200, "MISS"), "{}", a.head);
    assert_eq!(a.body.len(), 101);
    let b = req(&s, "GET", "/etag.php", "If-None-Match: \"v1\"\r\n");
    assert_eq!((b.status, cache_status(&b)), (304, "HIT"), "{}", b.head);
    std::thread::sleep(Duration::from_millis(2100));
    // Expired: PHP gets the entry's ETag, answers 304, and the entry is
    // served again, valid for another second.
    let c = req(&s, "GET", "/etag.php", "");
    assert_eq!((c.status, cache_status(&c)), (200, "REVALIDATED"), "{}", c.head);
    assert_eq!(c.body.len(), 101);
    let d = req(&s, "GET", "/etag.php", "");
    assert_eq!(cache_status(&d), "HIT");
    let log = fs::read_to_string(s.path("etag.log")).unwrap_or_default();
    assert_eq!(log, "\nHTTP_IF_NONE_MATCH=\"v1\"\n", "what PHP saw, run by run");
}

#[test]
fn stale_entries_are_served_while_php_fpm_is_down() {
    let mut fpm = Fpm::start();
    let s = server(&fpm, "fastcgi_cache_valid 200 1s;\nfastcgi_cache_use_stale error timeout;");
    let a = req(&s, "GET", "/count.php", "");
    assert_eq!(cache_status(&a), "MISS");
    fpm.stop();
    std::thread::sleep(Duration::from_millis(2100));
    let b = req(&s, "GET", "/count.php", "");
    assert_eq!((b.status, cache_status(&b)), (200, "STALE"), "{}\n{}", b.head, s.error_log());
    assert_eq!(b.body, a.body);
    // Not stored before: php-fpm's absence is nginx's 502.
    let r = request(s.port, "GET /count.php?new HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 502);
}

#[test]
fn bypass_and_no_cache_conditions() {
    let fpm = Fpm::start();
    let s = server(
        &fpm,
        "fastcgi_cache_valid 200 1m;\nfastcgi_cache_bypass $arg_fresh;\nfastcgi_no_cache $arg_fresh $cookie_nocache;",
    );
    assert_eq!(cache_status(&req(&s, "GET", "/count.php?fresh=1", "")), "BYPASS");
    assert_eq!(cache_status(&req(&s, "GET", "/count.php?fresh=1", "")), "BYPASS");
    // no_cache on the miss: answered, not stored.
    assert_eq!(cache_status(&req(&s, "GET", "/count.php", "Cookie: nocache=1\r\n")), "MISS");
    assert_eq!(cache_status(&req(&s, "GET", "/count.php", "")), "MISS");
    let hit = req(&s, "GET", "/count.php", "");
    assert_eq!(cache_status(&hit), "HIT");
    assert_eq!(hit.header("X-Run"), Some("4"));
    assert_eq!(runs(&s, "count"), 4);
}

#[test]
fn configuration_checks_as_nginx() {
    // No fastcgi_cache_key: a warning, and one entry for everything.
    let t = builder()
        .http(
            "fastcgi_cache_path {prefix}/fc keys_zone=php:1m;
             server { listen 127.0.0.1:{port}; location / { fastcgi_cache php; fastcgi_pass 127.0.0.1:9; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("[warn]") && err.contains("no \"fastcgi_cache_key\" for \"fastcgi_cache\""), "{err}");
    drop(t);
    // A zone belongs to the module whose *_cache_path made it.
    let t = builder()
        .http(
            "proxy_cache_path {prefix}/pc keys_zone=one:1m;
             server { listen 127.0.0.1:{port}; location / { fastcgi_cache one; fastcgi_cache_key $uri; fastcgi_pass 127.0.0.1:9; } }",
        )
        .prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success());
    assert!(err.contains("the shared memory zone \"one\" is already declared for a different use"), "{err}");
    drop(t);
    let t = builder().http("fastcgi_cache_path {prefix}/fc levels=1;").prepare();
    let err = stderr_of(&t.run(&["-t"]));
    assert!(err.contains("\"fastcgi_cache_path\" must have \"keys_zone\" parameter"), "{err}");
}
