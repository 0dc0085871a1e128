//! The reverse proxy's error paths: what the client gets and what the
//! error log says when an origin refuses, times out, closes early, sends a
//! bad or oversized head or smuggling framing, and when an origin's body is
//! cut short (the client must never see a complete-looking response).
//! Validated against nginx 1.22 with SLUICE_TEST_NGINX=1 (where sluice
//! deliberately differs, the test branches on `prog()`).

mod common;

use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

#[test]
fn error_statuses_and_error_log_lines() {
    let (dead, dead2) = (free_port(), free_port());
    let o = misbehaving_origin();
    // max_fails=0: one failing case must not take the origin out for the
    // next (single-server upstreams are covered by the failover test).
    let s = proxy(
        r#"
        upstream deadpair { server 127.0.0.1:%D%; server 127.0.0.1:%D2%; }
        upstream origin { server 127.0.0.1:%O% max_fails=0; }
        server {
            listen 127.0.0.1:{port};
            location /refused { proxy_pass http://127.0.0.1:%D%; }
            location /slow { proxy_pass http://origin; proxy_read_timeout 300ms; }
            location / { proxy_pass http://origin; proxy_buffer_size 4k; }
            location /nolive { proxy_pass http://deadpair; }
            location /wide { proxy_pass http://origin; proxy_buffer_size 16k; proxy_busy_buffers_size 16k; }
        }"#,
        &[("%D%", dead), ("%D2%", dead2), ("%O%", o.port)],
    );
    let nginx = prog() == "nginx";
    let mut checks = Checks::new();
    let mut case = |path: &str, status: u16, line: &str| {
        checks.run(path, || {
            let t = Instant::now();
            let r = s.get(path);
            assert_eq!(r.status, status, "{}\n{}", r.head, r.text());
            if status >= 500 {
                assert!(r.text().contains(&format!("<title>{status} {}</title>", reason(status))), "{}", r.text());
            }
            assert!(t.elapsed() < Duration::from_millis(1200), "took {:?}", t.elapsed());
            let log = s.wait_error_log(line);
            let l = line_with(&log, line);
            assert!(l.contains(&format!("request: \"GET {path} HTTP/1.1\"")), "{l}");
        });
    };
    case("/refused", 502, "connect() failed (111: Connection refused) while connecting to upstream");
    case("/slow", 504, "upstream timed out (110: Connection timed out) while reading response header from upstream");
    case("/early", 502, "upstream prematurely closed connection while reading response header from upstream");
    case("/badheader", 502, "upstream sent invalid header");
    case("/bigheader", 502, "upstream sent too big header while reading response header from upstream");
    // A head over proxy_buffer_size is refused however it arrives, also
    // when a larger buffer from another location is reused for it.
    assert_eq!(s.get("/wide/warm").status, 200);
    case("/nolive-1", 502, "request: \"GET /nolive-1 HTTP/1.1\"");
    case("/nolive-2", 502, "no live upstreams while connecting to upstream");
    // nginx 1.22 passes Content-Length + Transfer-Encoding on (chunked
    // wins); sluice refuses it as nginx 1.23+ does (deliberate difference).
    if nginx {
        checks.run("/smuggle", || assert_eq!(s.get("/smuggle").text(), "hello"));
    } else {
        let why = "upstream sent \"Content-Length\" and \"Transfer-Encoding\" headers at the same time";
        case("/smuggle", 502, &format!("{why} while reading response header from upstream"));
    }
    checks.run("/bigheader-5k", || {
        assert_eq!(s.get("/bigheader-5k").status, 502);
        let log = s.wait_error_log("request: \"GET /bigheader-5k HTTP/1.1\"");
        assert!(line_with(&log, "/bigheader-5k").contains("upstream sent too big header"), "{log}");
    });
    checks.run("/garbage", || {
        let raw = request_to_close(s.port, b"GET /garbage HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        let raw = String::from_utf8_lossy(&raw).into_owned();
        if nginx {
            // nginx passes a response without a status line on as HTTP/0.9;
            // sluice answers 502 (deliberate difference).
            assert_eq!(raw, "HELLO WORLD\r\n\r\n");
            s.wait_error_log("upstream sent no valid HTTP/1.0 header while reading response header from upstream");
        } else {
            assert!(raw.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{raw}");
            let log = s.wait_error_log("request: \"GET /garbage HTTP/1.1\"");
            assert!(line_with(&log, "/garbage").contains("while reading response header from upstream"), "{log}");
        }
    });
    checks.run("both dead peers tried", || {
        let log = s.error_log();
        for p in [dead, dead2] {
            let u = format!("upstream: \"http://127.0.0.1:{p}/nolive-1\"");
            assert!(log.lines().any(|l| l.contains("connect() failed") && l.contains(&u)), "{u}:\n{log}");
        }
    });
    checks.run("no live upstreams: upstream field with the URI", || {
        let log = s.error_log();
        let l = line_with(&log, "no live upstreams");
        assert!(l.contains("upstream: \"http://deadpair/nolive-2\""), "{l}");
    });
    checks.run("error-log fields in nginx's order", || {
        let want = format!(
            "request: \"GET /refused HTTP/1.1\", upstream: \"http://127.0.0.1:{dead}/refused\", host: \"localhost\""
        );
        assert!(s.error_log().contains(&want), "{want}\n{}", s.error_log());
    });
    checks.finish();
}

#[test]
fn truncated_origin_body_is_never_complete_looking() {
    let o = cutting_origin();
    let s = proxy2(
        r#"server {
                listen 127.0.0.1:{port0}; listen 127.0.0.1:{port1} http2;
                proxy_read_timeout 300ms;
                location / { proxy_pass http://127.0.0.1:%A%; proxy_http_version 1.1; }
                location /dead { proxy_pass http://127.0.0.1:%D%; }
            }"#,
        &[("%A%", o.port), ("%D%", free_port())],
    );
    let mut checks = Checks::new();
    checks.run("502 over h2c", || {
        let c =
            curl(&["--http2-prior-knowledge", "-w", "%{http_code}", &format!("http://127.0.0.1:{}/dead", s.ports[1])]);
        assert!(c.text().contains("<title>502 Bad Gateway</title>") && c.text().ends_with("502"), "{}", c.text());
    });
    for (path, log) in [
        ("/cut-cl", "upstream prematurely closed connection while reading upstream"),
        ("/cut-chunked", "upstream prematurely closed connection while reading upstream"),
        ("/cut-slow", "upstream timed out (110: Connection timed out) while reading upstream"),
    ] {
        checks.run(&format!("{path} HTTP/1.1"), || {
            let mut c = s.connect();
            c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n"));
            let t = Instant::now();
            let raw = c.read_to_close();
            assert!(t.elapsed() < Duration::from_secs(3), "closed after {:?}", t.elapsed());
            assert_visibly_cut(&raw);
            s.wait_error_log(log);
        });
        checks.run(&format!("{path} h2c"), || {
            let c = curl(&[
                "--http2-prior-knowledge",
                "-o",
                "/dev/null",
                &format!("http://127.0.0.1:{}{path}", s.ports[1]),
            ]);
            assert!(!c.status.success(), "curl saw a complete response: {}", c.stderr);
        });
    }
    checks.finish();
}

/// A retry that finds every peer down before each was tried ends with
/// nginx's "no live upstreams": `$upstream_addr` names the peer tried,
/// then the upstream (nginx-tests upstream_hash.t's "busy" cases).
#[test]
fn a_retry_without_live_peers_names_the_upstream() {
    let (p1, p2) = (free_port(), free_port());
    let s = proxy(
        r#"
        upstream lone { server 127.0.0.1:%P1%; server 127.0.0.1:%P2%; }
        server {
            listen 127.0.0.1:{port};
            add_header X-A $upstream_addr always;
            location /one { proxy_pass http://lone; proxy_next_upstream off; }
            location /two { proxy_pass http://lone; }
        }"#,
        &[("%P1%", p1), ("%P2%", p2)],
    );
    // The first peer fails (and is down for fail_timeout), alone.
    let r = s.get("/one");
    assert_eq!((r.status, r.header("X-A")), (502, Some(format!("127.0.0.1:{p1}").as_str())), "{}", r.head);
    // The second fails too: no peer is left for the retry.
    let r = s.get("/two");
    assert_eq!(r.status, 502);
    assert_eq!(r.header("X-A"), Some(format!("127.0.0.1:{p2}, lone").as_str()), "{}", r.head);
    s.wait_error_log("no live upstreams while connecting to upstream");
}
