//! `stub_status`: nginx's text, counts that follow connections and
//! requests, and the `$connections_*` variables. With SLUICE_TEST_NGINX=1
//! the same tests run against Debian's nginx.

mod common;

use common::*;

/// (active, accepts, handled, requests, reading, writing, waiting)
fn parse(body: &str) -> [u64; 7] {
    let lines: Vec<&str> = body.split('\n').collect();
    assert_eq!(lines.len(), 5, "{body:?}");
    assert!(lines[0].starts_with("Active connections: ") && lines[0].ends_with(' '), "{body:?}");
    assert_eq!(lines[1], "server accepts handled requests");
    assert!(lines[2].starts_with(' ') && lines[2].ends_with(' '), "{body:?}");
    assert!(lines[3].starts_with("Reading: ") && lines[3].ends_with(' '), "{body:?}");
    assert_eq!(lines[4], "");
    let nums: Vec<u64> =
        body.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    nums.try_into().unwrap_or_else(|n| panic!("{n:?} in {body:?}"))
}

#[test]
fn counts_connections_and_requests_in_nginxs_text() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                location = /status { stub_status; }
                location = /vars { return 200 "$connections_active $connections_reading $connections_writing $connections_waiting\n"; }
                location / { return 204; }
            }"#,
        )
        .start();
    let r = s.get("/status");
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/plain")));
    let [active, accepts, handled, requests, reading, writing, waiting] = parse(&r.text());
    assert!(active >= 1 && writing >= 1, "{}", r.text());
    assert_eq!(accepts, handled);
    assert_eq!(active, reading + writing + waiting);
    // Three keep-alive connections left idle after a request each.
    let mut idle: Vec<Conn> = (0..3)
        .map(|_| {
            let mut c = s.connect();
            c.send("GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
            assert_eq!(c.read_response().status, 204);
            c
        })
        .collect();
    let [active2, accepts2, _, requests2, _, writing2, waiting2] = parse(&s.get("/status").text());
    assert!(active2 >= 4, "active {active2}");
    assert!(waiting2 >= 3, "waiting {waiting2}");
    assert!(writing2 >= 1);
    assert!(accepts2 >= accepts + 4, "{accepts} -> {accepts2}");
    // This status request, the three, and the first status request.
    assert!(requests2 >= requests + 4, "{requests} -> {requests2}");
    for c in &mut idle {
        c.send("GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert_eq!(c.read_response().status, 204);
    }
    drop(idle);
    let v = s.get("/vars").text();
    let nums: Vec<u64> = v.split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert_eq!(nums.len(), 4, "{v}");
    assert!(nums[0] >= 1 && nums[2] >= 1, "{v}");
    // Only GET and HEAD.
    let r = request(s.port, "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 405);
    let r = request(s.port, "HEAD /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200);
}

/// The counters keep counting across reloads, as nginx's shared-memory
/// ones do, while each reload's exited workers are folded into the sums
/// (sluice keeps no entry per worker ever started): after several reloads
/// with requests between them, `accepts` and `requests` cover them all.
#[test]
fn counters_survive_reloads() {
    let s = builder()
        .http(
            "server {\n\
                 listen 127.0.0.1:{port};\n\
                 location = /status { stub_status; }\n\
                 location / { return 204; }\n\
             }",
        )
        .start();
    let [_, accepts0, _, requests0, ..] = parse(&s.get("/status").text());
    let per_round = 5;
    let rounds = 4;
    for round in 0..rounds {
        for _ in 0..per_round {
            assert_eq!(s.get("/x").status, 204, "round {round}");
        }
        s.signal("reload");
        // The reload is done once it is logged (nginx logs the signal);
        // the old worker then exits and the next reload folds its counts.
        let want = if prog() == "nginx" { "reconfiguring" } else { "reconfigured: listening on" };
        let deadline = std::time::Instant::now() + LOG_WAIT;
        while s.error_log().matches(want).count() <= round && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let [_, accepts, handled, requests, ..] = parse(&s.get("/status").text());
    let n = (per_round * rounds) as u64;
    assert!(accepts > accepts0 + n, "accepts {accepts0} -> {accepts} after {n} requests and {rounds} reloads");
    assert!(requests > requests0 + n, "requests {requests0} -> {requests} after {n} requests");
    assert_eq!(accepts, handled);
}
