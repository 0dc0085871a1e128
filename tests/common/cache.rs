//! Helpers for the cache suites (tests/cache.rs, tests/cache_lifecycle.rs):
//! a counting origin whose answers the query string shapes, a server with
//! one cache zone and a location per rule, and small request helpers.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::origin::*;
use super::*;

pub fn nginx_mode() -> bool {
    prog() == "nginx"
}

/// An origin whose answer depends on the path: `/h/NAME?...` answers with
/// the header line `NAME` decoded from the query (`h=Cache-Control:%20...`),
/// anything else with 200 and a body naming the request number.
pub fn origin() -> (Origin, Arc<AtomicUsize>) {
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

pub fn cache_server(o: &Origin, extra_http: &str, cache_dir: &str) -> TestServer {
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
                        proxy_ignore_headers Cache-Control;
                        proxy_ignore_headers Set-Cookie Expires;
                    }}
                    location /off/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache off; }}
                    location /mro/ {{ proxy_pass http://127.0.0.1:%A%; proxy_cache_valid 10m; proxy_cache_max_range_offset 10; }}
                }}"#
            ),
            &[("%A%", o.port)],
        ))
        .start()
}

pub fn get(s: &TestServer, path: &str) -> (String, String) {
    let r = s.get(path);
    assert!(r.status < 500, "{path}: {}\n{}", r.head, r.text());
    (r.header("X-Cache").unwrap_or("-").to_string(), r.text())
}

/// A request to `path` twice: the statuses and how many reached the origin.
pub fn twice(s: &TestServer, n: &AtomicUsize, path: &str) -> (String, String, usize) {
    let before = n.load(Ordering::SeqCst);
    let (a, body_a) = get(s, path);
    let (b, body_b) = get(s, path);
    let hits = n.load(Ordering::SeqCst) - before;
    if hits == 1 {
        assert_eq!(body_a, body_b, "{path}: a hit must give the stored body");
    }
    (a, b, hits)
}

pub fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
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

/// An origin whose entity changes with each request (the body names the
/// request number), valid for one second, and that answers a matching
/// If-None-Match with 304.
pub fn versioned_origin() -> (Origin, Arc<AtomicUsize>) {
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
