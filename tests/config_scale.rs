//! Configurations with thousands of `server` blocks: every server answers
//! by name, and each block costs sluice a few KiB, not a copy of every
//! module's settings per server and location (`config::shared`) nor a
//! second copy of the whole configuration in the master process. The
//! timings and nginx's figures are bench/scale's (docs/benchmarks.md).

mod common;

use std::time::Duration;

use common::procs::rss_kb;
use common::*;

/// `n` servers on one port, two locations each (bench/scale's shape).
fn servers(n: usize) -> String {
    let mut t =
        String::from("access_log off;\nserver_names_hash_max_size 65536;\nserver_names_hash_bucket_size 128;\n");
    for i in 0..n {
        t.push_str(&format!(
            "server {{ listen 127.0.0.1:{{port}}; server_name s{i}.example.com www.s{i}.example.com;\n\
             location / {{ return 200 \"s{i}\\n\"; }}\n\
             location /static/ {{ root {{prefix}}/html; expires 1h; }} }}\n"
        ));
    }
    t
}

/// VmRSS of the started process and the process that serves, in KiB (one
/// process with `master_process off`).
fn rss_of(s: &TestServer) -> u64 {
    let (master, serving) = (s.pid(), s.serving_pid());
    rss_kb(master) + if serving != master { rss_kb(serving) } else { 0 }
}

fn started(n: usize) -> TestServer {
    let s = builder().http(&servers(n)).file("html/static/a.txt", "static\n").start();
    for (host, path, body) in [
        ("s0.example.com", "/", "s0\n".to_string()),
        (&format!("www.s{}.example.com", n / 2), "/", format!("s{}\n", n / 2)),
        (&format!("s{}.example.com", n - 1), "/", format!("s{}\n", n - 1)),
        (&format!("s{}.example.com", n - 1), "/static/a.txt", "static\n".to_string()),
        // No such name: the address's default server, the first.
        ("unknown.example.com", "/", "s0\n".to_string()),
    ] {
        let r = request(s.port, &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"));
        assert_eq!((r.status, r.text()), (200, body), "GET {path} Host: {host}");
    }
    s
}

#[test]
fn thousands_of_servers_answer_by_name_and_cost_a_few_kib_each() {
    let small = started(10);
    let big = started(4000);
    // Settled: the serving process has returned what loading freed.
    std::thread::sleep(Duration::from_millis(500));
    let (a, b) = (rss_of(&small), rss_of(&big));
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() {
        // nginx's figures are bench/scale's (about 28 KiB per server over
        // master and worker); only the answers are compared here.
        return;
    }
    let per_server = b.saturating_sub(a) as f64 / 3990.0;
    // About 6 KiB now; 57 KiB when each level copied every module's
    // settings and the master kept a copy of the configuration.
    assert!(per_server < 12.0, "{per_server:.1} KiB per server block ({a} KiB with 10 servers, {b} KiB with 4,000)");
}
