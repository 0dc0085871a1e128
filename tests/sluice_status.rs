//! `sluice_status` and `status_zone`: per-zone counts, connection counts
//! and upstream peers as JSON and Prometheus text, summed over workers;
//! the whole process's responses and request times, TLS handshakes (curl
//! and `openssl s_client` resuming a session), HTTP/2 streams, cache
//! zones (MISS, HIT, EXPIRED, BYPASS, a purge, an eviction), reloads (one
//! good, one refused), parked connections, an upstream queue and health
//! checks; `-t` errors for misplaced or malformed directives. sluice-only
//! (no nginx equivalent outside NGINX Plus). The slowest tests wait for a
//! cache entry to expire and be evicted, or for connections to park (2 to
//! 4 s each).

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;
use serde_json::{Value, json};

/// One Prometheus sample: name and labels (sorted) to value.
type Samples = HashMap<(String, Vec<(String, String)>), f64>;

/// A strict reader of the text exposition format 0.0.4: every sample's
/// family has its HELP and TYPE before it; label values unescaped.
fn parse_prometheus(text: &str) -> (Samples, HashMap<String, String>) {
    let mut samples = Samples::new();
    let mut types = HashMap::new();
    let mut helps = std::collections::HashSet::new();
    assert!(text.ends_with('\n'), "{text}");
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(!help.is_empty(), "{line}");
            assert!(helps.insert(name.to_string()), "second HELP: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(helps.contains(name), "TYPE before HELP: {line}");
            assert!(types.insert(name.to_string(), kind.to_string()).is_none(), "second TYPE: {line}");
            continue;
        }
        assert!(!line.starts_with('#') && !line.is_empty(), "{line:?}");
        let name_end = line.find(['{', ' ']).unwrap_or_else(|| panic!("{line}"));
        let name = &line[..name_end];
        assert!(name.starts_with("sluice_"), "{line}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
        let mut rest = &line[name_end..];
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            loop {
                let start = chars.peek().map(|&(i, _)| i).unwrap_or_else(|| panic!("{line}"));
                let eq = r[start..].find('=').unwrap_or_else(|| panic!("{line}")) + start;
                let key = r[start..eq].to_string();
                assert_eq!(&r[eq + 1..eq + 2], "\"", "{line}");
                while chars.peek().is_some_and(|&(i, _)| i <= eq + 1) {
                    chars.next();
                }
                let mut value = String::new();
                loop {
                    match chars.next().unwrap_or_else(|| panic!("{line}")) {
                        (_, '\\') => match chars.next().unwrap_or_else(|| panic!("{line}")).1 {
                            'n' => value.push('\n'),
                            c @ ('\\' | '"') => value.push(c),
                            c => panic!("bad escape \\{c} in {line}"),
                        },
                        (_, '"') => break,
                        (_, c) => value.push(c),
                    }
                }
                labels.push((key, value));
                match chars.next().unwrap_or_else(|| panic!("{line}")) {
                    (_, ',') => continue,
                    (i, '}') => {
                        rest = &r[i + 1..];
                        break;
                    }
                    (_, c) => panic!("{c} in {line}"),
                }
            }
        }
        let value: f64 = rest.strip_prefix(' ').unwrap_or_else(|| panic!("{line}")).parse().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| types.get(*f).is_some_and(|k| k == "histogram")))
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE for {line}");
        labels.sort();
        assert!(samples.insert((name.to_string(), labels), value).is_none(), "duplicate {line}");
    }
    (samples, types)
}

fn get(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut l: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    l.sort();
    *s.get(&(name.to_string(), l)).unwrap_or_else(|| panic!("no {name} {labels:?}"))
}

fn get_json(port: u16, path: &str) -> Value {
    let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("application/json")), "{}", r.text());
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

fn get_prometheus(port: u16, path: &str) -> Samples {
    let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/plain; version=0.0.4")), "{}", r.text());
    let (s, types) = parse_prometheus(&r.text());
    assert_eq!(types.get("sluice_http_request_duration_seconds").map(String::as_str), Some("histogram"));
    s
}

/// Polls the JSON page until `done` holds (10 s at most); returns it.
fn wait_json(port: u16, what: &str, mut done: impl FnMut(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let j = get_json(port, "/status");
        if done(&j) {
            return j;
        }
        assert!(Instant::now() < deadline, "{what}: {j}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `le` values docs/configuration.md lists for the time histograms
/// (the code block after "**Time histograms.**"), then `+Inf`.
fn documented_bounds() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md")).unwrap();
    let at = doc.find("**Time histograms.**").expect("the time histograms' section");
    let block = doc[at..].split("```").nth(1).expect("the bounds' code block");
    let mut les: Vec<String> = block.split_whitespace().map(String::from).collect();
    les.push("+Inf".into());
    les
}

/// The `_bucket` samples of histogram `name` with `labels` (besides
/// `le`), by bound: (le as written, le, cumulative count).
fn histogram_buckets(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Vec<(String, f64, f64)> {
    let bucket = format!("{name}_bucket");
    let mut buckets: Vec<(String, f64, f64)> = s
        .iter()
        .filter(|((n, l), _)| {
            *n == bucket
                && l.len() == labels.len() + 1
                && labels.iter().all(|(k, v)| l.contains(&(k.to_string(), v.to_string())))
        })
        .map(|((_, l), v)| {
            let le = l.iter().find(|(k, _)| k == "le").unwrap().1.clone();
            let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() };
            (le, bound, *v)
        })
        .collect();
    buckets.sort_by(|a, b| a.1.total_cmp(&b.1));
    buckets
}

/// Prometheus' histogram_quantile: the first bucket whose count reaches
/// rank `p × count`, interpolated linearly from the bound below (0 for the
/// first); the last finite bound when that is +Inf.
fn histogram_quantile(p: f64, buckets: &[(String, f64, f64)]) -> f64 {
    let rank = p * buckets.last().unwrap().2;
    let b = buckets.iter().position(|x| x.2 >= rank).unwrap();
    if b == buckets.len() - 1 {
        return buckets[b - 1].1;
    }
    let (start, below) = if b > 0 { (buckets[b - 1].1, buckets[b - 1].2) } else { (0.0, 0.0) };
    start + (buckets[b].1 - start) * (rank - below) / (buckets[b].2 - below)
}

/// Histogram `name` with `labels`: every documented bucket and no other,
/// cumulative, +Inf equal to `_count`; returns the buckets.
fn check_histogram_of(s: &Samples, name: &str, labels: &[(&str, &str)]) -> Vec<(String, f64, f64)> {
    let buckets = histogram_buckets(s, name, labels);
    let les: Vec<&String> = buckets.iter().map(|b| &b.0).collect();
    assert_eq!(les, documented_bounds().iter().collect::<Vec<_>>(), "{name} {labels:?}: the le set");
    assert!(buckets.windows(2).all(|w| w[0].2 <= w[1].2), "not cumulative: {buckets:?}");
    let count = get(s, &format!("{name}_count"), labels);
    assert_eq!(buckets.last().map(|b| b.2), Some(count));
    assert!(get(s, &format!("{name}_sum"), labels) >= 0.0);
    buckets
}

/// The histogram of `zone` (see [`check_histogram_of`]); returns the count.
fn check_histogram(s: &Samples, zone: &str) -> f64 {
    let buckets = check_histogram_of(s, "sluice_zone_request_duration_seconds", &[("zone", zone)]);
    buckets.last().unwrap().2
}

#[test]
fn zones_connections_and_peers_in_both_formats() {
    let origin = common::origin::Origin::ok("origin says hi");
    let dead = free_port();
    let s = builder()
        .ports(2)
        .http(&format!(
            r#"upstream back {{
                server 127.0.0.1:{live};
                server 127.0.0.1:{dead};
            }}
            server {{
                listen 127.0.0.1:{{port0}};
                status_zone site;
                location /a {{ status_zone "a \"quoted\""; return 200 "0123456789"; }}
                location /b {{ status_zone b; return 404; }}
                location /big {{ status_zone b; return 200 "{big}"; }}
                location /up {{ proxy_pass http://back; }}
                location / {{ return 204; }}
            }}
            server {{
                listen 127.0.0.1:{{port1}};
                location = /status {{ sluice_status; }}
                location = /metrics {{ sluice_status format=prometheus; }}
            }}"#,
            live = origin.port,
            big = "x".repeat(1000)
        ))
        .start();
    let port = s.ports[0];
    let send = |path: &str| {
        let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        (request(port, &raw), raw.len() as u64)
    };
    let mut a_received = 0;
    for _ in 0..5 {
        let (r, n) = send("/a");
        assert_eq!(r.status, 200);
        a_received += n;
    }
    for p in ["/b", "/b", "/b", "/big", "/big"] {
        send(p);
    }
    for _ in 0..2 {
        assert_eq!(send("/other").0.status, 204);
    }
    for _ in 0..6 {
        let (r, _) = send("/up");
        assert_eq!((r.status, r.text()), (200, "origin says hi".to_string()));
    }

    let j = get_json(s.ports[1], "/status");
    assert!(j["generation"].as_u64().unwrap() >= 1);
    let c = &j["connections"];
    assert!(c["accepted"].as_u64().unwrap() >= 18 && c["active"].as_u64().unwrap() >= 1, "{c}");
    assert!(j["requests"]["total"].as_u64().unwrap() >= 19, "{j}");
    let a = &j["server_zones"]["a \"quoted\""];
    assert_eq!(a["requests"], 5, "{j}");
    assert_eq!(a["responses"]["2xx"], 5);
    assert_eq!(a["received"].as_u64(), Some(a_received));
    let b = &j["server_zones"]["b"];
    assert_eq!(
        (b["requests"].as_u64(), b["responses"]["4xx"].as_u64(), b["responses"]["2xx"].as_u64()),
        (Some(5), Some(3), Some(2))
    );
    assert!(b["sent"].as_u64().unwrap() > 2000 && a["sent"].as_u64().unwrap() > 50, "{j}");
    assert!(b["sent"].as_u64() > a["sent"].as_u64());
    assert_eq!(b["request_time"]["buckets"]["+Inf"], 5);
    // The server-level zone counts the rest of its server: 2 + 6.
    assert_eq!(j["server_zones"]["site"]["requests"], 8, "{j}");
    let peers = j["upstreams"]["back"]["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 2);
    let live = format!("127.0.0.1:{}", origin.port);
    let dead_name = format!("127.0.0.1:{dead}");
    assert_eq!((peers[0]["server"].as_str(), peers[0]["state"].as_str()), (Some(live.as_str()), Some("up")));
    assert_eq!(peers[0]["requests"], 6);
    assert_eq!(peers[0]["active"], 0);
    assert_eq!((peers[1]["server"].as_str(), peers[1]["state"].as_str()), (Some(dead_name.as_str()), Some("unavail")));
    assert!(peers[1]["fails"].as_u64().unwrap() >= 1, "{j}");
    assert_eq!(peers[1]["fails"], peers[1]["requests"]);
    // Every request of the process counts, in a zone or not: 18 so far.
    assert_eq!(j["responses"], json!({"1xx": 0, "2xx": 15, "3xx": 0, "4xx": 3, "5xx": 0}), "{j}");
    assert_eq!(j["request_time"]["buckets"]["+Inf"], 18, "{j}");
    assert_eq!(j["reloads"], json!({"ok": 0, "failed": 0}));
    let (now, loaded) = (j["time_ms"].as_u64().unwrap(), j["load_ms"].as_u64().unwrap());
    let wall = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    assert!(now.abs_diff(wall) < 5000 && loaded <= now && now - loaded < 60_000, "{j}");
    assert_eq!(j["connections"]["parked"], 0);
    // One response head per request, all from the live peer; no queue, no
    // health checks configured.
    let back = &j["upstreams"]["back"];
    assert_eq!(back["response_time"]["buckets"]["+Inf"], 6, "{j}");
    assert!(back.get("queue").is_none() && peers[0].get("health").is_none(), "{j}");
    assert_eq!((j["ssl"]["failed"].as_u64(), j["http2"]["streams"].as_u64()), (Some(0), Some(0)));

    // The same through ?format=prometheus and the fixed-format location.
    for (i, path) in ["/status?format=prometheus", "/metrics", "/metrics?format=json"].into_iter().enumerate() {
        let p = get_prometheus(s.ports[1], path);
        // The scrapes before this one count too.
        let i = i as f64;
        assert_eq!(get(&p, "sluice_http_responses_total", &[("code", "2xx")]), 16.0 + i);
        assert_eq!(get(&p, "sluice_http_responses_total", &[("code", "4xx")]), 3.0);
        assert_eq!(get(&p, "sluice_http_request_duration_seconds_count", &[]), 19.0 + i);
        assert_eq!(get(&p, "sluice_http_request_duration_seconds_bucket", &[("le", "+Inf")]), 19.0 + i);
        assert_eq!(get(&p, "sluice_upstream_response_duration_seconds_count", &[("upstream", "back")]), 6.0);
        assert_eq!(get(&p, "sluice_reloads_total", &[("result", "ok")]), 0.0);
        assert_eq!(get(&p, "sluice_zone_requests_total", &[("zone", "a \"quoted\"")]), 5.0);
        assert_eq!(check_histogram(&p, "a \"quoted\""), 5.0);
        assert_eq!(check_histogram(&p, "b"), 5.0);
        assert_eq!(get(&p, "sluice_zone_responses_total", &[("zone", "b"), ("code", "4xx")]), 3.0);
        assert_eq!(get(&p, "sluice_zone_received_bytes_total", &[("zone", "a \"quoted\"")]), a_received as f64);
        assert!(get(&p, "sluice_zone_sent_bytes_total", &[("zone", "b")]) > 2000.0);
        assert!(get(&p, "sluice_connections_accepted_total", &[]) >= 18.0);
        assert!(get(&p, "sluice_http_requests_total", &[]) >= 19.0);
        let up = [("upstream", "back"), ("peer", live.as_str())];
        let down = [("upstream", "back"), ("peer", dead_name.as_str())];
        assert_eq!(get(&p, "sluice_upstream_peer_requests_total", &up), 6.0);
        assert_eq!((get(&p, "sluice_upstream_peer_up", &up), get(&p, "sluice_upstream_peer_up", &down)), (1.0, 0.0));
        assert!(get(&p, "sluice_upstream_peer_fails_total", &down) >= 1.0);
    }
    // A bad format is refused; other methods are not served.
    let r = request(s.ports[1], "GET /status?format=xml HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 400);
    let r = request(s.ports[1], "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 405);
}

/// Fast local requests read in microseconds: the JSON page's p50 below
/// 1 ms and a mean above 0 (whole milliseconds made them 2.5 ms and 0),
/// for the process, a zone and an upstream; Prometheus exposes exactly the
/// documented `le` set, and histogram_quantile over it gives the JSON's
/// p50.
#[test]
fn fast_requests_read_in_microseconds() {
    let origin = common::origin::Origin::ok("hi");
    let s = builder()
        .server_is_nginx(false)
        .http(&format!(
            r#"upstream back {{ server 127.0.0.1:{o}; }}
            server {{
                listen 127.0.0.1:{{port}};
                location = /status {{ sluice_status; }}
                location /fast {{ status_zone fast; return 204; }}
                location /up {{ proxy_pass http://back; }}
            }}"#,
            o = origin.port
        ))
        .start();
    const N: u64 = 300;
    let mut c = s.connect();
    for _ in 0..N {
        c.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.read_response().status, 204);
    }
    for _ in 0..20 {
        c.send("GET /up HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.read_response().status, 200);
    }
    let j = get_json(s.port, "/status");
    let fast = &j["server_zones"]["fast"]["request_time"];
    let all = &j["request_time"];
    let back = &j["upstreams"]["back"]["response_time"];
    for (what, h, count, p50_below) in
        [("zone", fast, N, 0.001), ("all", all, N + 20, 0.001), ("upstream", back, 20, 0.01)]
    {
        let (p50, p99, sum) = (h["p50"].as_f64(), h["p99"].as_f64(), h["sum"].as_f64().unwrap());
        let mean = sum / count as f64;
        println!("{what}: p50 {p50:?} s, p99 {p99:?} s, mean {mean:.6} s over {count}");
        assert_eq!(h["count"], count, "{what}: {j}");
        assert!(p50.is_some_and(|p| p > 0.0 && p < p50_below), "{what}: {h}");
        assert!(mean > 0.0 && mean < p50_below, "{what}: {h}");
        // Keys are documented bounds; the count at +Inf is the count.
        let doc = documented_bounds();
        let keys = h["buckets"].as_object().unwrap();
        assert!(keys.keys().all(|k| doc.contains(k)), "{what}: {h}");
        assert_eq!(keys["+Inf"], count, "{what}: {h}");
    }
    let p = get_prometheus(s.port, "/status?format=prometheus");
    check_histogram_of(&p, "sluice_http_request_duration_seconds", &[]);
    check_histogram_of(&p, "sluice_upstream_response_duration_seconds", &[("upstream", "back")]);
    let zone = check_histogram_of(&p, "sluice_zone_request_duration_seconds", &[("zone", "fast")]);
    // Nothing reached the zone since the JSON: the same histogram, read
    // as Prometheus reads it.
    let promql = histogram_quantile(0.5, &zone);
    let json = fast["p50"].as_f64().unwrap();
    assert!((promql - json).abs() < 1e-9, "histogram_quantile {promql}, JSON {json}");
    let sum = get(&p, "sluice_zone_request_duration_seconds_sum", &[("zone", "fast")]);
    assert_eq!(sum, fast["sum"].as_f64().unwrap());
}

#[test]
fn two_workers_are_summed() {
    let s = builder()
        .main("worker_processes 2;")
        .http(
            r#"server {
                listen 127.0.0.1:{port} reuseport;
                status_zone w;
                location = /status { status_zone off_zone; sluice_status; }
                location / { return 200 "hello"; }
            }"#,
        )
        .start();
    // Many connections open at once, so the kernel spreads them over both
    // workers' sockets; three requests each.
    let mut conns: Vec<Conn> = (0..40).map(|_| s.connect()).collect();
    for _ in 0..3 {
        for c in &mut conns {
            c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
        }
        for c in &mut conns {
            assert_eq!(c.read_response().status, 200);
        }
    }
    drop(conns);
    // A worker logs (and counts) a request just after writing its response,
    // so the other worker may answer the scrape a moment before that.
    let mut scrapes = 0;
    let j = wait_json(s.port, "all counted", |j| {
        scrapes += 1;
        j["server_zones"]["w"]["requests"].as_u64() >= Some(120)
    });
    assert_eq!(j["server_zones"]["w"]["requests"], 120, "{j}");
    assert_eq!(j["server_zones"]["w"]["responses"]["2xx"], 120, "{j}");
    assert!(j["connections"]["accepted"].as_u64().unwrap() >= 41, "{j}");
    let p = get_prometheus(s.port, "/status?format=prometheus");
    assert_eq!(check_histogram(&p, "w"), 120.0);
    // The status requests count in their own zone.
    assert_eq!(get(&p, "sluice_zone_requests_total", &[("zone", "off_zone")]), f64::from(scrapes));
}

/// `-t` fails naming the file and line of the bad directive.
fn assert_t_fails(http: &str, needle: &str, msg: &str) {
    let s = builder().http(http).prepare();
    let conf = s.conf_path();
    let text = std::fs::read_to_string(&conf).unwrap();
    let line = text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let want = format!("[emerg] {msg} in {}:{line}\n", conf.display());
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
}

#[test]
fn config_errors_name_file_and_line() {
    assert_t_fails(
        "server {\n listen 127.0.0.1:{port};\n sluice_status;\n}",
        "sluice_status",
        "\"sluice_status\" directive is not allowed here",
    );
    assert_t_fails(
        "server {\n listen 127.0.0.1:{port};\n location / {\n sluice_status format=xml;\n }\n}",
        "format=xml",
        "invalid sluice_status parameter \"format=xml\"",
    );
    assert_t_fails(
        "server {\n listen 127.0.0.1:{port};\n status_zone;\n}",
        "status_zone",
        "invalid number of arguments in \"status_zone\" directive",
    );
    assert_t_fails(
        "status_zone x;\nserver {\n listen 127.0.0.1:{port};\n}",
        "status_zone",
        "\"status_zone\" directive is not allowed here",
    );
}

#[test]
fn checked_down_peer_is_unhealthy() {
    let origin = common::origin::Origin::ok("ok");
    let dead = free_port();
    let s = builder()
        .http(&format!(
            r#"upstream checked {{
                server 127.0.0.1:{live};
                server 127.0.0.1:{dead};
                server 127.0.0.1:{dead} down;
                check interval=100 rise=1 fall=1 timeout=500 type=tcp;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location = /status {{ sluice_status; }}
            }}"#,
            live = origin.port
        ))
        .start();
    let states = |j: &Value| -> Vec<String> {
        let peers = j["upstreams"]["checked"]["peers"].as_array().unwrap().clone();
        peers.iter().map(|p| p["state"].as_str().unwrap().to_string()).collect()
    };
    let dead_checked = |j: &Value| j["upstreams"]["checked"]["peers"][1]["health"]["checks"].as_u64() >= Some(1);
    let j = wait_json(s.port, "states", |j| states(j) == ["up", "unhealthy", "down"] && dead_checked(j));
    // The probes so far: every one of the live peer passed, every one of
    // the dead peer failed; a `down` peer is not checked.
    let peers = j["upstreams"]["checked"]["peers"].as_array().unwrap().clone();
    let (live, dead) = (&peers[0]["health"], &peers[1]["health"]);
    assert!(live["checks"].as_u64().unwrap() >= 1 && live["fails"] == 0 && live["last"] == "up", "{j}");
    assert!(dead["checks"].as_u64().unwrap() >= 1 && dead["fails"] == dead["checks"] && dead["last"] == "down", "{j}");
    assert!(peers[2].get("health").is_none(), "{j}");
    // Probes go on every 100 ms, and are counted.
    let before = live["checks"].as_u64().unwrap();
    wait_json(s.port, "more probes", |j| {
        j["upstreams"]["checked"]["peers"][0]["health"]["checks"].as_u64().unwrap() >= before + 2
    });
}

#[test]
fn counts_survive_a_reload_and_generation_moves() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location = /status { sluice_status; }
                location / { status_zone z; return 204; }
            }"#,
        )
        .start();
    for _ in 0..3 {
        assert_eq!(s.get("/x").status, 204);
    }
    let j = get_json(s.port, "/status");
    assert_eq!((j["generation"].as_u64(), j["server_zones"]["z"]["requests"].as_u64()), (Some(1), Some(3)), "{j}");
    assert_eq!(j["reloads"], json!({"ok": 0, "failed": 0}), "{j}");
    let first_load = j["load_ms"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    s.signal("reload");
    let j = wait_json(s.port, "reload", |j| j["generation"] == 2);
    // Workers of the new generation report the master's count.
    assert_eq!(j["reloads"], json!({"ok": 1, "failed": 0}), "{j}");
    assert!(j["load_ms"].as_u64().unwrap() > first_load, "{j}");
    assert_eq!(s.get("/x").status, 204);
    let j = get_json(s.port, "/status");
    assert_eq!(j["server_zones"]["z"]["requests"], 4, "{j}");
    // A configuration that does not load is counted as failed; the running
    // generation and its load time stay.
    let good = std::fs::read_to_string(s.conf_path()).unwrap();
    s.write_conf(&good.replace("return 204;", "return 204; no_such_directive on;"));
    // (`-s reload` would refuse it before signalling; a SIGHUP does not.)
    s.kill("HUP");
    let j = wait_json(s.port, "failed reload", |j| j["reloads"]["failed"] == 1);
    assert_eq!((j["generation"].as_u64(), j["reloads"]["ok"].as_u64()), (Some(2), Some(1)), "{j}");
    let p = get_prometheus(s.port, "/status?format=prometheus");
    assert_eq!(get(&p, "sluice_reloads_total", &[("result", "failed")]), 1.0);
    assert_eq!(get(&p, "sluice_reloads_total", &[("result", "ok")]), 1.0);
    assert_eq!(get(&p, "sluice_config_generation", &[]), 2.0);
    assert_eq!(get(&p, "sluice_config_load_time_seconds", &[]), j["load_ms"].as_f64().unwrap() / 1000.0);
}

/// `openssl s_client` offering a session: a new one saved under `tag` when
/// `resume` is false, the saved one otherwise; asserts it was (or was not)
/// resumed and the request answered.
fn s_client_session(s: &TestServer, port: u16, proto: &str, tag: &str, resume: bool) {
    let sess = s.path(&format!("sess-{tag}.pem")).display().to_string();
    let args = [proto, "-servername", "a.test", if resume { "-sess_in" } else { "-sess_out" }, &sess];
    let r = s_client(s, port, &args, &get_close("a.test", "/"));
    assert!(r.ok && r.contains("200 OK"), "{args:?}:\n{}", r.out);
    assert_eq!(r.reused(), resume, "{args:?}:\n{}", r.out);
}

#[test]
fn tls_handshakes_and_http2_streams() {
    let s = builder()
        .tls_files()
        .ports(3)
        .http(
            r#"ssl_protocols TLSv1.2 TLSv1.3;
            server {
                listen 127.0.0.1:{port0} ssl;
                listen 127.0.0.1:{port1} ssl http2;
                server_name a.test;
                ssl_certificate tls/a.test.ecdsa.crt;
                ssl_certificate_key tls/a.test.ecdsa.key;
                location / { return 200 "$ssl_protocol\n"; }
            }
            server {
                listen 127.0.0.1:{port2};
                location = /status { sluice_status; }
            }"#,
        )
        .start();
    let url = format!("https://a.test:{}/", s.ports[0]);
    assert_eq!(fetch(&s, &url, &["--tlsv1.2", "--tls-max", "1.2"]).text(), "TLSv1.2\n");
    assert_eq!(fetch(&s, &url, &["--tlsv1.3"]).text(), "TLSv1.3\n");
    for (proto, tag) in [("-tls1_2", "12"), ("-tls1_3", "13")] {
        s_client_session(&s, s.ports[0], proto, tag, false);
        s_client_session(&s, s.ports[0], proto, tag, true);
    }
    // A handshake record that ends before its ClientHello does.
    let mut c = Conn::connect(s.ports[0]);
    c.send(b"\x16\x03\x01\x00\x02\x01\x00");
    c.shutdown_write();
    assert!(c.read_to_close().is_empty());
    // HTTP/2: one connection, three streams.
    let h2 = format!("https://a.test:{}/", s.ports[1]);
    let run = curl_fetch(&s, &[&format!("{h2}1"), &format!("{h2}2"), &format!("{h2}3")], &["--http2"]);
    assert!(run.ok && run.fetches.len() == 3, "{}", run.stderr);
    assert!(run.fetches.iter().all(|f| f.version == "2" && f.text() == "TLSv1.3\n"), "{:?}", run.fetches);
    assert_eq!(run.fetches.iter().map(|f| f.num_connects).sum::<u32>(), 1);

    let j = wait_json(s.ports[2], "tls counts", |j| j["ssl"]["failed"] == 1 && j["http2"]["streams"] == 3);
    // TLSv1.2: curl, then s_client new and resumed; TLSv1.3: the same and
    // the HTTP/2 connection.
    assert_eq!(
        j["ssl"],
        json!({"handshakes": {"TLSv1.2": 3, "TLSv1.3": 4}, "resumed": {"TLSv1.2": 1, "TLSv1.3": 1}, "failed": 1}),
        "{j}"
    );
    assert_eq!(j["http2"], json!({"connections": 1, "streams": 3}), "{j}");
    assert_eq!(j["responses"]["2xx"], 9, "{j}");
    let p = get_prometheus(s.ports[2], "/status?format=prometheus");
    assert_eq!(get(&p, "sluice_ssl_handshakes_total", &[("protocol", "TLSv1.2")]), 3.0);
    assert_eq!(get(&p, "sluice_ssl_handshakes_total", &[("protocol", "TLSv1.3")]), 4.0);
    assert_eq!(get(&p, "sluice_ssl_handshakes_resumed_total", &[("protocol", "TLSv1.3")]), 1.0);
    assert_eq!(get(&p, "sluice_ssl_handshakes_failed_total", &[]), 1.0);
    assert_eq!(get(&p, "sluice_http2_connections_total", &[]), 1.0);
    assert_eq!(get(&p, "sluice_http2_streams_total", &[]), 3.0);
}

#[test]
fn cache_lookups_sizes_and_evictions() {
    let origin = common::origin::Origin::ok("cached body");
    let s = builder()
        .http(&format!(
            r#"proxy_cache_path cache_main levels=1:2 keys_zone=main:1m max_size=10m;
            proxy_cache_path cache_short keys_zone=short:1m inactive=1s;
            server {{
                listen 127.0.0.1:{{port}};
                add_header X-Cache $upstream_cache_status always;
                location = /status {{ sluice_status; }}
                location / {{
                    proxy_pass http://127.0.0.1:{o};
                    proxy_cache main;
                    proxy_cache_valid 200 2s;
                    proxy_cache_purge PURGE;
                    proxy_cache_bypass $arg_nocache;
                }}
                location /short/ {{ proxy_pass http://127.0.0.1:{o}; proxy_cache short; proxy_cache_valid 200 1h; }}
            }}"#,
            o = origin.port
        ))
        .start();
    let x_cache = |path: &str| {
        let r = s.get(path);
        assert_eq!((r.status, r.text()), (200, "cached body".to_string()), "{path}");
        r.header("X-Cache").unwrap_or("-").to_string()
    };
    // The short zone's entry first, so that its eviction overlaps the wait
    // for the main zone's entry to expire.
    assert_eq!(x_cache("/short/x"), "MISS");
    let j = get_json(s.port, "/status");
    assert_eq!((j["caches"]["short"]["miss"].as_u64(), j["caches"]["short"]["entries"].as_u64()), (Some(1), Some(1)));
    assert!(j["caches"]["short"].get("max_size").is_none(), "{j}");
    // Valid for 2 s counted in whole seconds: at least one more second.
    assert_eq!([x_cache("/a"), x_cache("/a"), x_cache("/a")], ["MISS", "HIT", "HIT"]);
    let j = get_json(s.port, "/status");
    let main = &j["caches"]["main"];
    assert_eq!((main["entries"].as_u64(), main["max_size"].as_u64()), (Some(1), Some(10 << 20)), "{j}");
    assert!(main["size"].as_u64().unwrap() > 11, "{j}");
    // A hit from the entry file puts the small entry in the memory tier.
    assert!(main["memory_size"].as_u64().unwrap() > 11, "{j}");
    // Expired once its valid second has passed (nginx: valid_sec < now):
    // 2 s stored in second S lasts through S+2.
    std::thread::sleep(Duration::from_millis(3100));
    assert_eq!([x_cache("/a"), x_cache("/a"), x_cache("/a?nocache=1")], ["EXPIRED", "HIT", "BYPASS"]);
    let r = request(s.port, "PURGE /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(x_cache("/a"), "MISS");

    let j = get_json(s.port, "/status");
    let main = &j["caches"]["main"];
    let counts = json!({"hit": 3, "miss": 2, "expired": 1, "stale": 0, "updating": 0, "revalidated": 0, "bypass": 1});
    for (k, v) in counts.as_object().unwrap() {
        assert_eq!(&main[k], v, "{k}: {j}");
    }
    // /a (stored again after the purge) and /a?nocache=1.
    assert_eq!((main["entries"].as_u64(), main["evictions"].as_u64()), (Some(2), Some(0)), "{j}");
    // Unused for its `inactive` second, the short zone's entry is evicted
    // by its manager (a pass a second).
    let j = wait_json(s.port, "eviction", |j| j["caches"]["short"]["evictions"] == 1);
    let short = &j["caches"]["short"];
    assert_eq!((short["entries"].as_u64(), short["size"].as_u64()), (Some(0), Some(0)), "{j}");
    let p = get_prometheus(s.port, "/status?format=prometheus");
    assert_eq!(get(&p, "sluice_cache_lookups_total", &[("cache", "main"), ("status", "hit")]), 3.0);
    assert_eq!(get(&p, "sluice_cache_lookups_total", &[("cache", "main"), ("status", "expired")]), 1.0);
    assert_eq!(get(&p, "sluice_cache_evictions_total", &[("cache", "short")]), 1.0);
    assert_eq!(get(&p, "sluice_cache_entries", &[("cache", "main")]), 2.0);
    assert_eq!(get(&p, "sluice_cache_max_size_bytes", &[("cache", "main")]), (10 << 20) as f64);
    assert!(get(&p, "sluice_cache_size_bytes", &[("cache", "main")]) > 0.0);
}

#[test]
fn upstream_queue_waits_and_timeouts() {
    let origin = common::origin::Origin::start(|_| common::origin::Reply::ok("slow").after(Duration::from_millis(800)));
    let s = builder()
        .http(&format!(
            r#"upstream patient {{ server 127.0.0.1:{o} max_conns=1; queue 5 timeout=10s; }}
            upstream hasty {{ server 127.0.0.1:{o} max_conns=1; queue 5 timeout=300ms; }}
            server {{
                listen 127.0.0.1:{{port}};
                location = /status {{ sluice_status; }}
                location /p/ {{ proxy_pass http://patient; }}
                location /h/ {{ proxy_pass http://hasty; }}
            }}"#,
            o = origin.port
        ))
        .start();
    let port = s.port;
    // Two at once: the second waits for the first's connection slot.
    let pair = |path: &'static str| -> [std::thread::JoinHandle<u16>; 2] {
        let one = std::thread::spawn(move || request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).status);
        std::thread::sleep(Duration::from_millis(150));
        let two = std::thread::spawn(move || request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).status);
        [one, two]
    };
    let waiting = pair("/p/x");
    wait_json(port, "queue length", |j| j["upstreams"]["patient"]["queue"]["length"] == 1);
    assert_eq!(waiting.map(|t| t.join().unwrap()), [200, 200]);
    let mut hurried = pair("/h/x").map(|t| t.join().unwrap());
    hurried.sort();
    assert_eq!(hurried, [200, 503]);

    let j = get_json(port, "/status");
    let (patient, hasty) = (&j["upstreams"]["patient"], &j["upstreams"]["hasty"]);
    assert_eq!(patient["queue"], json!({"length": 0, "waits": 1, "timeouts": 0}), "{j}");
    assert_eq!(hasty["queue"], json!({"length": 0, "waits": 1, "timeouts": 1}), "{j}");
    // Response heads come 800 ms after each try starts (the wait in the
    // queue is before the try).
    let rt = &patient["response_time"];
    assert_eq!(rt["buckets"]["+Inf"], 2, "{j}");
    // Nothing counted at or below 0.7 s; both in the buckets around 0.8 s.
    for (le, n) in rt["buckets"].as_object().unwrap() {
        assert!(n == 0 || le == "+Inf" || le.parse::<f64>().unwrap() > 0.7, "{le}: {j}");
    }
    assert!(rt["p50"].as_f64().unwrap() >= 0.72 && rt["p99"].as_f64().unwrap() < 1.5, "{j}");
    assert!(rt["sum"].as_f64().unwrap() >= 1.6, "{j}");
    assert_eq!(hasty["response_time"]["buckets"]["+Inf"], 1, "{j}");
    assert_eq!(j["responses"]["5xx"], 1, "{j}");
    let p = get_prometheus(port, "/status?format=prometheus");
    assert_eq!(get(&p, "sluice_upstream_queue_waits_total", &[("upstream", "patient")]), 1.0);
    assert_eq!(get(&p, "sluice_upstream_queue_timeouts_total", &[("upstream", "hasty")]), 1.0);
    assert_eq!(get(&p, "sluice_upstream_queue_length", &[("upstream", "hasty")]), 0.0);
    assert_eq!(get(&p, "sluice_upstream_response_duration_seconds_count", &[("upstream", "patient")]), 2.0);
}

#[test]
fn idle_connections_park() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location = /status { sluice_status; }
                location / { return 204; }
            }"#,
        )
        .start();
    let mut conns: Vec<Conn> = (0..3).map(|_| s.connect()).collect();
    for c in &mut conns {
        c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(c.read_response().status, 204);
    }
    // Idle for two seconds, each gives up its task and buffers.
    let j = wait_json(s.port, "parking", |j| j["connections"]["parked"] == 3);
    assert!(j["connections"]["waiting"].as_u64().unwrap() >= 3, "{j}");
    conns[0].send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(conns[0].read_response().status, 204);
    let p = get_prometheus(s.port, "/status?format=prometheus");
    assert_eq!(get(&p, "sluice_connections_parked", &[]), 2.0);
    drop(conns);
    wait_json(s.port, "closed", |j| j["connections"]["parked"] == 0);
}
