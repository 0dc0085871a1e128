//! `sluice_status` and `status_zone`: per-zone counts, connection counts
//! and upstream peers as JSON and Prometheus text, summed over workers;
//! `-t` errors for misplaced or malformed directives. sluice-only (no
//! nginx equivalent outside NGINX Plus).

mod common;

use std::collections::HashMap;

use common::*;

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

fn get_json(port: u16, path: &str) -> serde_json::Value {
    let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("application/json")), "{}", r.text());
    serde_json::from_str(&r.text()).unwrap_or_else(|e| panic!("{e}: {}", r.text()))
}

fn get_prometheus(port: u16, path: &str) -> Samples {
    let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/plain; version=0.0.4")), "{}", r.text());
    let (s, types) = parse_prometheus(&r.text());
    assert_eq!(types.get("sluice_zone_request_duration_seconds").map(String::as_str), Some("histogram"));
    s
}

/// The histogram of `zone`: buckets cumulative, +Inf last and equal to
/// `_count`; returns the count.
fn check_histogram(s: &Samples, zone: &str) -> f64 {
    let mut buckets: Vec<(f64, f64)> = s
        .iter()
        .filter(|((n, l), _)| {
            n == "sluice_zone_request_duration_seconds_bucket" && l.contains(&("zone".into(), zone.into()))
        })
        .map(|((_, l), v)| {
            let le = &l.iter().find(|(k, _)| k == "le").unwrap().1;
            (if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap() }, *v)
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(buckets.len(), 11, "{buckets:?}");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "not cumulative: {buckets:?}");
    let count = get(s, "sluice_zone_request_duration_seconds_count", &[("zone", zone)]);
    assert_eq!(buckets.last().map(|b| (b.0, b.1)), Some((f64::INFINITY, count)));
    assert!(get(s, "sluice_zone_request_duration_seconds_sum", &[("zone", zone)]) >= 0.0);
    count
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

    // The same through ?format=prometheus and the fixed-format location.
    for path in ["/status?format=prometheus", "/metrics", "/metrics?format=json"] {
        let p = get_prometheus(s.ports[1], path);
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
    let j = get_json(s.port, "/status");
    assert_eq!(j["server_zones"]["w"]["requests"], 120, "{j}");
    assert_eq!(j["server_zones"]["w"]["responses"]["2xx"], 120, "{j}");
    assert!(j["connections"]["accepted"].as_u64().unwrap() >= 41, "{j}");
    let p = get_prometheus(s.port, "/status?format=prometheus");
    assert_eq!(check_histogram(&p, "w"), 120.0);
    // The status requests count in their own zone.
    assert_eq!(get(&p, "sluice_zone_requests_total", &[("zone", "off_zone")]), 1.0);
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let j = get_json(s.port, "/status");
        let peers = j["upstreams"]["checked"]["peers"].as_array().unwrap().clone();
        let states: Vec<&str> = peers.iter().map(|p| p["state"].as_str().unwrap()).collect();
        if states == ["up", "unhealthy", "down"] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{states:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
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
    s.signal("reload");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get_json(s.port, "/status")["generation"] != 2 {
        assert!(std::time::Instant::now() < deadline, "no reload");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(s.get("/x").status, 204);
    let j = get_json(s.port, "/status");
    assert_eq!(j["server_zones"]["z"]["requests"], 4, "{j}");
}
