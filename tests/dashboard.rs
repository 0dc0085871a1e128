//! The `sluice_status` HTML dashboard in a real headless chromium
//! (`common::browser`, the DevTools protocol over a pipe): served to a
//! browser's `Accept` and `format=html`, its security headers, live numbers
//! under load from wrk, a peer turning red when its origin stops and the
//! health check fails it, and the page against the whole JSON contract
//! (fields this build may not send yet, hostile names, odd documents) by
//! answering its polls from the test. No console error or exception is
//! allowed anywhere. Screenshots go to target/tmp/dashboard/ (printed).
//!
//! sluice-only (no nginx equivalent outside NGINX Plus): the servers here
//! are sluice whatever SLUICE_TEST_NGINX says.

mod common;

use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::browser::Browser;
use common::origin::Origin;
use common::*;
use serde_json::{Value, json};

/// One browser at a time: with wrk it is most of a 2-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

const CHROME_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,\
                             image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";
const XSS_ZONE: &str = "<img src=x onerror=alert(1)>";

fn screenshots() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn get(port: u16, path: &str, accept: Option<&str>) -> Response {
    let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
    request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n"))
}

/// The number in a displayed figure ("1,234", "56.7"); None for "–".
fn figure(v: &Value) -> Option<f64> {
    v.as_str()?.replace(',', "").parse().ok()
}

#[test]
fn served_by_accept_and_format_with_security_headers() {
    let s = builder()
        .server_is_nginx(false)
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location = /status { sluice_status; }
                location = /dash { sluice_status format=html; }
            }"#,
        )
        .start();
    let html = |r: &Response| r.header("Content-Type") == Some("text/html; charset=utf-8");
    let json = |r: &Response| r.header("Content-Type") == Some("application/json");
    // A browser's navigation gets the page; curl's */*, no Accept and
    // JSON-first Accepts keep getting JSON.
    let page = get(s.port, "/status", Some(CHROME_ACCEPT));
    assert!(page.status == 200 && html(&page), "{:?}", page.headers);
    assert!(page.text().starts_with("<!DOCTYPE html>"));
    assert_eq!(page.header("Vary"), Some("Accept"));
    for accept in [Some("*/*"), None, Some("application/json"), Some("text/html;q=0.5, application/json")] {
        let r = get(s.port, "/status", accept);
        assert!(r.status == 200 && json(&r), "{accept:?}: {:?}", r.headers);
        serde_json::from_str::<Value>(&r.text()).unwrap();
    }
    // The query chooses over Accept.
    assert!(html(&get(s.port, "/status?format=html", None)));
    let r = get(s.port, "/status?format=json", Some(CHROME_ACCEPT));
    assert!(json(&r) && r.header("Vary").is_none(), "{:?}", r.headers);
    // The fixed dashboard is the page whatever Accept says, and answers its
    // own polls.
    for path in ["/dash", "/dash?format=prometheus", "/dash?refresh=2"] {
        assert!(html(&get(s.port, path, Some("*/*"))), "{path}");
    }
    assert!(json(&get(s.port, "/dash?format=json", Some(CHROME_ACCEPT))));
    // Only its own inline script and style, polls to itself, nothing else.
    let csp = page.must("Content-Security-Policy");
    for want in ["default-src 'none'", "script-src 'sha256-", "style-src 'sha256-", "connect-src 'self'"] {
        assert!(csp.contains(want), "{want} not in {csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(page.header("X-Content-Type-Options"), Some("nosniff"));
    // HEAD: the headers without the body.
    let r = request(s.port, "HEAD /dash HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(r.status == 200 && html(&r) && r.body.is_empty());
}

/// `document.querySelector(sel)` evaluated to a short description.
const PEER_ROW: &str = "((name) => { const r = document.querySelector(`tr[data-peer=\"${name}\"]`);
    return r ? { cls: r.className, color: getComputedStyle(r.querySelector('td.state')).color,
                 state: r.cells[1].textContent, requests: r.cells[3].textContent } : null; })";

#[test]
fn live_numbers_and_a_failing_peer_in_chromium() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let a = Origin::ok("from a");
    let b = Origin::ok("from b");
    let s = builder()
        .server_is_nginx(false)
        .http(&format!(
            r#"upstream back {{
                server 127.0.0.1:{a};
                server 127.0.0.1:{b};
                check interval=300 rise=1 fall=1 timeout=300 type=tcp;
            }}
            server {{
                listen 127.0.0.1:{{port}};
                status_zone site;
                location / {{ proxy_pass http://back; }}
                location = /missing {{ return 404; }}
                location = /status {{ status_zone "{XSS_ZONE}"; sluice_status; }}
            }}"#,
            a = a.port,
            b = b.port
        ))
        .start();
    let (peer_a, peer_b) = (a.addr(), b.addr());
    let mut br = Browser::launch();
    // A plain navigation: the browser's own Accept gets the dashboard.
    br.open(&s.url("/status"));
    br.wait_for("first poll", "document.getElementById('poll-state').className === 'meta ok'", Duration::from_secs(10));
    let both_up =
        format!("{PEER_ROW}('{peer_a}')?.cls === 'peer state-up' && {PEER_ROW}('{peer_b}')?.cls === 'peer state-up'");
    br.wait_for("both peers up", &both_up, Duration::from_secs(10));
    // Server-provided names are text, never markup.
    let zones = br.eval("[...document.querySelectorAll('#zones tr[data-zone]')].map((r) => r.cells[0].textContent)");
    assert!(zones.as_array().unwrap().iter().any(|z| z == XSS_ZONE), "{zones}");
    assert_eq!(br.eval("document.querySelectorAll('img, script').length"), json!(1), "an injected element");
    let dir = screenshots();
    br.screenshot(&dir.join("before.png"));
    let total_before = figure(&br.eval("document.getElementById('req-total').textContent")).expect("a total");

    // Bounded load: 2xx through the upstream, 404s on the side.
    let wrk_ok = wrk_start(&["-t1", "-c4", "-d3s", &s.url("/")]);
    let wrk_404 = wrk_start(&["-t1", "-c1", "-d3s", &s.url("/missing")]);
    let (mut max_rate, mut max_4xx) = (0.0f64, 0.0f64);
    let load_end = Instant::now() + Duration::from_millis(3500);
    while Instant::now() < load_end {
        let v = br
            .eval("[document.getElementById('req-rate').textContent, document.getElementById('rate-4xx').textContent]");
        max_rate = max_rate.max(figure(&v[0]).unwrap_or(0.0));
        max_4xx = max_4xx.max(figure(&v[1]).unwrap_or(0.0));
        br.pump(Duration::from_millis(200));
    }
    let ok = wrk_finish(wrk_ok, Duration::from_secs(15));
    let not_found = wrk_finish(wrk_404, Duration::from_secs(15));
    assert!(ok.non_2xx.is_none() && ok.error_count() == 0, "{}", ok.output);
    let sent = (ok.requests + not_found.requests) as f64;
    println!(
        "wrk: {} proxied + {} 404 requests; page showed up to {max_rate} req/s, {max_4xx} 4xx/s",
        ok.requests, not_found.requests
    );
    assert!(max_rate >= 100.0 && max_4xx >= 10.0, "rates shown under load: {max_rate} req/s, {max_4xx} 4xx/s");
    let want = total_before + sent;
    br.wait_for(
        "the total to count the load",
        &format!("Number(document.getElementById('req-total').textContent.replace(/,/g, '')) >= {want}"),
        Duration::from_secs(5),
    );
    // Each peer served part of it, and the table says so.
    let shown: f64 =
        [&peer_a, &peer_b].iter().map(|p| figure(&br.eval(&format!("{PEER_ROW}('{p}').requests"))).unwrap()).sum();
    assert!(shown >= ok.requests as f64, "peers show {shown} of {} proxied", ok.requests);
    // The chart drew the rise: its y axis went up and the requests line is there.
    let chart = br.eval(
        "(() => { const c = document.getElementById('chart'); const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0; for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - 9) < 40 && Math.abs(d[i + 1] - 105) < 40 && Math.abs(d[i + 2] - 218) < 40 && d[i + 3] > 200) n++;
          return [Number(c.dataset.max), n]; })()",
    );
    assert!(
        chart[0].as_f64().unwrap() >= 100.0 && chart[1].as_u64().unwrap() > 100,
        "chart (y max, line pixels): {chart}"
    );

    // One origin stops: its check fails within 300 ms, the next poll shows it.
    drop(b);
    let stopped = Instant::now();
    let red = format!("{PEER_ROW}('{peer_b}')?.cls === 'peer state-bad'");
    br.wait_for("the stopped peer to turn red", &red, Duration::from_secs(5));
    println!("peer turned red {:?} after its origin stopped", stopped.elapsed());
    let row_b = br.eval(&format!("{PEER_ROW}('{peer_b}')"));
    assert_eq!(
        (row_b["state"].as_str(), row_b["color"].as_str()),
        (Some("unhealthy"), Some("rgb(207, 34, 46)")),
        "{row_b}"
    );
    let row_a = br.eval(&format!("{PEER_ROW}('{peer_a}')"));
    assert_eq!(
        (row_a["cls"].as_str(), row_a["color"].as_str()),
        (Some("peer state-up"), Some("rgb(26, 127, 55)")),
        "{row_a}"
    );
    br.screenshot(&dir.join("after.png"));
    println!("screenshots: {}/before.png, after.png", dir.display());

    let problems = br.problems();
    assert!(problems.is_empty(), "console errors: {problems:#?}");
    println!("took {:?}", started.elapsed());
}

/// A JSON document with every field of the contract; counters grow with
/// `k` by 100 requests, 10 4xx and 2 5xx per poll, one second apart (the
/// classes' shares stay 88, 10 and 2 %).
fn full_doc(k: u64) -> Value {
    let t0: u64 = 1_700_000_000_000;
    // t0 is 2023-11-14T22:13:20Z: the stream peer was selected 3 s
    // before each poll's time.
    let sel = 13 * 60 + 17 + k;
    let selected = format!("2023-11-14T22:{:02}:{:02}.250Z", sel / 60, sel % 60);
    let buckets = json!({"0.005": 0, "0.01": 0, "0.025": 500, "0.05": 900, "0.1": 1000, "0.25": 1000, "0.5": 1000,
                         "1": 1000, "2.5": 1000, "5": 1000, "+Inf": 1000});
    json!({
        "time_ms": t0 + k * 1000, "load_ms": t0 - 90_000, "generation": 3, "reloads": {"ok": 2, "failed": 1},
        "connections": {"accepted": 1000, "handled": 1000, "active": 7, "reading": 1, "writing": 2, "waiting": 4, "parked": 3},
        "requests": {"total": 100 * (50 + k)},
        "responses": {"1xx": 0, "2xx": 88 * (50 + k), "3xx": 0, "4xx": 10 * (50 + k), "5xx": 2 * (50 + k)},
        "request_time": {"sum": 15.0, "buckets": buckets},
        "server_zones": {"z<i>x</i>": {"requests": 10, "responses": {"1xx": 0, "2xx": 10, "3xx": 0, "4xx": 0, "5xx": 0},
                         "received": 2048, "sent": 1_048_576, "request_time": {"sum": 0.000515, "count": 10,
                         "buckets": {"0.00004924": 0, "0.0000538": 10, "+Inf": 10}}}},
        "upstreams": {"<script>u</script>": {
            "queue": {"length": 2, "waits": 9, "timeouts": 1},
            "response_time": {"sum": 15.0, "buckets": buckets},
            "peers": [
                {"server": "10.0.0.1:80", "state": "up", "active": 1, "requests": 100 + 50 * k, "fails": 0,
                 "health": {"checks": 40, "fails": 0, "last": "up"}},
                {"server": "10.0.0.2:80", "state": "unhealthy", "active": 0, "requests": 10, "fails": 3,
                 "health": {"checks": 40, "fails": 12, "last": "down"}},
                {"server": "10.0.0.3:80", "state": "draining", "active": 0, "requests": 0, "fails": 0}]}},
        "ssl": {"handshakes": {"TLSv1.2": 100, "TLSv1.3": 300}, "resumed": {"TLSv1.2": 0, "TLSv1.3": 100}, "failed": 5},
        "http2": {"connections": 250, "streams": 4000},
        "stream": {"server_zones": {"tcpz": {"processing": 1, "connections": 9, "received": 10, "sent": 20, "discarded": 0,
                   "sessions": {"2xx": 7, "4xx": 1, "5xx": 0, "total": 8}}},
                   "upstreams": {"sb": {"peers": [
                       {"server": "10.0.1.1:53", "state": "up", "active": 1, "connections": 7, "sent": 2048,
                        "received": 100, "fails": 1, "unavail": 0, "connect_time": 2, "first_byte_time": 5,
                        "response_time": 40, "selected": selected}]}}},
        "caches": {"<b>c</b>": {"hit": 60, "miss": 20, "expired": 5, "stale": 5, "updating": 0, "revalidated": 10,
                   "bypass": 0, "size": 1_048_576, "max_size": 10_485_760, "memory_size": 2048, "entries": 42, "evictions": 1}}
    })
}

/// Documents missing or mangling every part: shown as "–", never thrown on.
fn odd_docs() -> Vec<Value> {
    vec![
        json!({}),
        json!({"connections": null, "requests": 5, "responses": [], "request_time": {"buckets": {"x": "y"}},
               "server_zones": {"z": null, "y": {"responses": null, "request_time": 3}},
               "upstreams": {"u": {"peers": [{}, null, 5, {"server": 7, "state": null, "health": "x"}], "queue": 1}},
               "stream": {"upstreams": {"s": {"peers": [{"selected": 5}, {"selected": "x", "server": "a"}, null]}}},
               "caches": {"c": {}}, "ssl": {"handshakes": null}, "http2": [], "reloads": "x", "load_ms": "y"}),
        json!({"generation": 1, "requests": {"total": 1}, "upstreams": {}, "server_zones": {}}),
    ]
}

#[test]
fn whole_json_contract_renders_without_errors() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = builder()
        .server_is_nginx(false)
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location = /dash { sluice_status format=html; }
            }"#,
        )
        .start();
    let mut br = Browser::launch();
    // The test answers the page's polls: first growing full documents,
    // then (phase 1) odd ones.
    let phase = Rc::new(Cell::new(0u32));
    let (p, mut k, mut odd) = (phase.clone(), 0u64, 0usize);
    let docs = odd_docs();
    br.intercept(
        "*format=json*",
        Box::new(move |_| {
            let doc = if p.get() == 0 {
                k += 1;
                full_doc(k)
            } else {
                odd += 1;
                docs[(odd - 1) % docs.len()].clone()
            };
            Some(serde_json::to_vec(&doc).unwrap())
        }),
    );
    br.open(&s.url("/dash?refresh=0.3"));
    // Two polls make rates: 100 requests, 10 4xx, 2 5xx per (server) second.
    br.wait_for("rates", "document.getElementById('rate-5xx').textContent !== '–'", Duration::from_secs(10));
    let text = |br: &mut Browser, id: &str| br.eval(&format!("document.getElementById('{id}').textContent"));
    assert_eq!(
        ["req-rate", "rate-4xx", "rate-5xx", "generation", "reloads"].map(|id| text(&mut br, id)),
        [json!("100"), json!("10.0"), json!("2.00"), json!("3"), json!("ok 2, failed 1")]
    );
    assert!(text(&mut br, "loaded").as_str().unwrap().contains("ago"));
    // Cells of a table row whose first cell is `name`, or null.
    let cells = |br: &mut Browser, table: &str, name: &str| {
        br.eval(&format!(
            "(() => {{ for (const r of document.querySelectorAll('{table} tr')) if (r.cells[0] && r.cells[0].textContent === {name:?})
                 return [...r.cells].map((c) => c.textContent); return null; }})()"
        ))
    };
    assert_eq!(
        cells(&mut br, "#latency", "since start"),
        json!(["since start", "25.0 ms", "50.0 ms", "95.0 ms", "15.0 ms"])
    );
    assert_eq!(cells(&mut br, "#conns", "parked"), json!(["parked", "3"]));
    assert_eq!(cells(&mut br, "#codes", "4xx")[2], json!("10.0%"), "share of responses");
    let cache = cells(&mut br, "#caches", "<b>c</b>");
    assert_eq!(
        (&cache[1], &cache[9], &cache[11], &cache[12]),
        (&json!("75.0%"), &json!("1.0 MiB of 10.0 MiB"), &json!("2.0 KiB"), &json!("42"))
    );
    assert_eq!(cells(&mut br, "#ssl", "all"), json!(["all", "400", "100", "25.0%"]));
    assert_eq!(cells(&mut br, "#ssl", "TLSv1.3")[3], json!("33.3%"));
    assert_eq!(text(&mut br, "ssl-failed"), json!("5"));
    assert_eq!(cells(&mut br, "#h2", "share of connections")[1], json!("25.0%"));
    let zone = cells(&mut br, "#zones", "z<i>x</i>");
    // The server's sparse form: only the bucket with requests and the
    // bound below it.
    assert_eq!((&zone[9], &zone[10], &zone[11]), (&json!("1.0 MiB"), &json!("51.5 µs"), &json!("53.8 µs")));
    let up = br.eval(
        "(() => { const u = document.querySelector('#upstreams .upstream'); return [u.dataset.upstream, u.querySelector('h3').textContent, u.querySelector('p').textContent]; })()",
    );
    assert_eq!(
        up,
        json!([
            "<script>u</script>",
            "<script>u</script>",
            "queue 2, waits 9, timeouts 1 · response time p50 25.0 ms, p99 95.0 ms"
        ])
    );
    let peers = cells(&mut br, "#upstreams", "10.0.0.2:80");
    assert_eq!(peers, json!(["10.0.0.2:80", "unhealthy", "0", "10", "0.00", "3", "40", "12", "down"]));
    assert_eq!(cells(&mut br, "#upstreams", "10.0.0.1:80")[4], json!("50.0"));
    let stream = cells(&mut br, "#stream-peers", "sb");
    assert_eq!(
        stream,
        json!(["sb", "10.0.1.1:53", "up", "1", "7", "1", "0", "2.0 KiB", "100 B", "2", "5", "40", "3 s ago"])
    );
    let classes = br.eval("[...document.querySelectorAll('#upstreams tr.peer')].map((r) => r.className)");
    assert_eq!(classes, json!(["peer state-up", "peer state-bad", "peer state-other"]));
    // Names stayed text: the page's own script is the only element of its kind.
    assert_eq!(
        br.eval("[...document.querySelectorAll('script, img, td b, td i, .upstream h3 *')].map((e) => e.outerHTML)").as_array().map(Vec::len),
        Some(1),
        "{}",
        br.eval("[...document.querySelectorAll('script, img, td b, td i, .upstream h3 *')].map((e) => e.outerHTML.slice(0, 80))")
    );
    br.screenshot(&screenshots().join("full-contract.png"));

    // Odd documents: every panel copes, the page keeps polling.
    phase.set(1);
    br.wait_for(
        "the odd documents",
        "document.getElementById('generation').textContent === '1' && document.getElementById('caches-section').hidden",
        Duration::from_secs(10),
    );
    br.pump(Duration::from_secs(1));
    assert_eq!(text(&mut br, "poll-state").as_str().map(|t| t.starts_with("updated")), Some(true));
    let problems = br.problems();
    assert!(problems.is_empty(), "console errors: {problems:#?}");
}
