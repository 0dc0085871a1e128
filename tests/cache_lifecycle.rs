//! The HTTP cache's entries over time: stale answers when the origin
//! fails, revalidation and background update, lock timeout and age,
//! purge, restarts and `kill -9` (also mid-write), damaged files, reload,
//! `max_size`/`inactive`, a 1 GB object, and disk hits following replaced
//! entries. Checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`) except
//! where a test says it is sluice's own.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::cache::*;
use common::origin::*;
use common::*;

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
    let before = hwm(s.serving_pid());
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
        let growth = hwm(s.serving_pid()).saturating_sub(before);
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
    if nginx_mode() {
        return;
    }
    // A reload that changes the zone's limits: the entries stay hits, and
    // one manager looks after the directory (the replaced zone's stops).
    let conf = std::fs::read_to_string(s.conf_path()).unwrap();
    std::fs::write(s.conf_path(), conf.replace("inactive=1h", "inactive=2h")).unwrap();
    s.signal("reload");
    std::thread::sleep(Duration::from_millis(500));
    for (i, b) in bodies.iter().enumerate() {
        assert_eq!(get(&s, &format!("/k{i}")), ("HIT".to_string(), b.clone()));
    }
    let managers = || {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", s.serving_pid())).unwrap();
        tasks
            .flatten()
            .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "cache one"))
            .count()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while managers() > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(managers(), 1);
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

/// A key whose responses vary is a hit at once after a restart, before the
/// loader has indexed the directory (`loader_sleep` holds it back here, as
/// nginx's loader waits a minute), for the variant the key's own file
/// holds and for the others: that file leads to the request's variant, as
/// nginx's main-key file does. The origin is not asked again. sluice's own
/// part: the key's file is a second name of the newest variant's, so the
/// zone counts each variant once, and unused for `inactive` it goes with
/// the variants.
#[test]
fn varied_entries_hit_after_a_restart_before_the_loader_runs() {
    use std::os::unix::fs::MetadataExt;
    let (o, n) = origin();
    let dir = temp_dir("cache-vary-cold");
    let cdir = dir.join("c");
    let (status, purge) =
        if nginx_mode() { ("", "") } else { ("location = /status { sluice_status; }", "proxy_cache_purge PURGE;") };
    let start = |params: &str| {
        builder()
            .http(&format!(
                r#"proxy_cache_path {} levels=1:2 keys_zone=one:1m {params};
                server {{
                    listen 127.0.0.1:{{port}};
                    add_header X-Cache $upstream_cache_status always;
                    {status}
                    location / {{
                        proxy_pass http://127.0.0.1:{};
                        proxy_cache one;
                        proxy_cache_valid 10m;
                        proxy_cache_key $uri;
                        {purge}
                    }}
                }}"#,
                cdir.display(),
                o.port
            ))
            .start()
    };
    let ask = |s: &TestServer, lang: &str| {
        let r = s.get_with("/v?h=Vary:%20Accept-Language", &[&format!("Accept-Language: {lang}")]);
        (r.must("X-Cache").to_string(), r.text())
    };
    let hit = |body: &String| ("HIT".to_string(), body.clone());
    // (entries, bytes) the zone counts, and the distinct files' (entries,
    // bytes) on disk with the number of names.
    let counted = |s: &TestServer| {
        let r = s.get("/status");
        let j: serde_json::Value = serde_json::from_str(&r.text()).unwrap_or_default();
        (j["caches"]["one"]["entries"].as_u64().unwrap_or(0), j["caches"]["one"]["size"].as_u64().unwrap_or(0))
    };
    let on_disk = || {
        let names = files_under(&cdir);
        let mut inodes: Vec<(u64, u64)> =
            names.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| (m.ino(), m.len())).collect();
        inodes.sort();
        inodes.dedup();
        (inodes.len() as u64, inodes.iter().map(|i| i.1).sum::<u64>(), names.len())
    };
    let cold = "inactive=1h loader_files=1 loader_sleep=60s";

    let mut s = start(cold);
    let (m1, en) = ask(&s, "en");
    let (m2, fr) = ask(&s, "fr");
    assert_eq!((m1.as_str(), m2.as_str()), ("MISS", "MISS"));
    assert_ne!(en, fr);
    if !nginx_mode() {
        let (entries, bytes, names) = on_disk();
        assert_eq!((entries, names), (2, 3), "two variants and the key's own name: {:?}", files_under(&cdir));
        assert_eq!(counted(&s), (2, bytes), "each variant counted once");
    }
    s.quit();

    // The older variant first (the key's own file holds the newer one).
    let mut s = start(cold);
    assert_eq!(ask(&s, "en"), hit(&en), "first request after the restart");
    assert_eq!(ask(&s, "fr"), hit(&fr));
    let (m3, de) = ask(&s, "de");
    assert_eq!(m3, "MISS");
    s.quit();
    // The variant the key's own file holds first.
    let mut s = start(cold);
    assert_eq!(ask(&s, "de"), hit(&de), "first request after the second restart");
    assert_eq!(ask(&s, "en"), hit(&en));
    assert_eq!(n.load(Ordering::SeqCst), 3, "the origin was asked once per variant");
    s.quit();
    if nginx_mode() {
        return;
    }

    // Loaded: the same counts as when stored.
    let mut s = start("inactive=1h");
    let (entries, bytes, names) = on_disk();
    assert_eq!((entries, names), (3, 4));
    let deadline = Instant::now() + Duration::from_secs(5);
    while counted(&s) != (3, bytes) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(counted(&s), (3, bytes), "the loader counts each variant once");
    // A purge of the key takes every variant and the key's own name.
    let r = req(&s, "PURGE", "/v", &[], b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let deadline = Instant::now() + Duration::from_secs(5);
    while (!files_under(&cdir).is_empty() || counted(&s) != (0, 0)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(files_under(&cdir).is_empty(), "{:?}", files_under(&cdir));
    assert_eq!(counted(&s), (0, 0));
    assert_eq!(ask(&s, "en").0, "MISS");
    assert_eq!(ask(&s, "fr").0, "MISS");
    s.quit();
    // Unused: every file goes, the key's own name included.
    let s = start("inactive=1s");
    // (A zone's loader and manager start with its first use.)
    assert_eq!(ask(&s, "en").0, "HIT");
    assert_eq!(on_disk().2, 3);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !files_under(&cdir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(files_under(&cdir).is_empty(), "{:?}", files_under(&cdir));
}
