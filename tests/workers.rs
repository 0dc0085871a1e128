//! Worker settings under concurrent clients: several workers with
//! reuseport, and a tiny worker_connections limit.

mod common;

use std::time::Duration;

use common::*;

fn hammer(port: u16, threads: usize, per_thread: usize, keepalive: bool) -> usize {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut ok = 0;
                let mut conn = if keepalive { Some(Conn::connect(port)) } else { None };
                for i in 0..per_thread {
                    let path = format!("/t{t}/r{i}");
                    let r = match conn.as_mut() {
                        Some(c) => {
                            c.send(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"));
                            c.read_response()
                        }
                        None => request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")),
                    };
                    assert_eq!(r.status, 200, "{path}");
                    assert_eq!(r.text(), path, "{path}");
                    ok += 1;
                }
                ok
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("client thread failed")).sum()
}

const ECHO: &str = "location / { return 200 $uri; }";

#[test]
fn two_workers_with_reuseport_serve_many_connections() {
    let s = builder()
        .main("worker_processes 2;")
        .http(&format!("access_log off;\nserver {{ listen 127.0.0.1:{{port}} reuseport; {ECHO} }}"))
        .start();
    assert_eq!(hammer(s.port, 8, 50, false), 400);
    assert_eq!(hammer(s.port, 8, 50, true), 400);
    // wrk for a moment: no errors
    let w = wrk_start(&["-t1", "-c50", "-d2s", "--timeout", "5s", &s.url("/w")]);
    let res = wrk_finish(w, Duration::from_secs(15));
    assert!(res.requests > 0, "{}", res.output);
    assert_eq!(res.error_count(), 0, "{}", res.output);
    assert!(res.non_2xx.is_none(), "{}", res.output);
}

#[test]
fn small_worker_connections_does_not_crash() {
    // keepalive_timeout well under the client's 5 s read timeout: a held
    // client waits for a served one's keep-alive to end (3 to 4 s).
    let mut s = builder()
        .events("worker_connections 4;")
        .http(&format!("access_log off;\nkeepalive_timeout 3;\nserver {{ listen 127.0.0.1:{{port}}; {ECHO} }}"))
        .start();
    // one at a time: slots are freed as connections close
    for i in 0..30 {
        let r = request(s.port, &format!("GET /seq{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        assert_eq!(r.text(), format!("/seq{i}"));
    }
    // More simultaneous keep-alive clients than slots: each one gets either
    // its own answer or a close/reset (nginx resets the excess with "worker
    // connections are not enough"); none hangs, some are served.
    let mut conns: Vec<Conn> = (0..8).map(|_| s.connect()).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        let _ = c.try_send(format!("GET /held{i} HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    let mut served = 0;
    for (i, c) in conns.iter_mut().enumerate() {
        match c.try_read_response("GET") {
            Ok(r) => {
                assert_eq!(r.text(), format!("/held{i}"), "held connection {i}");
                served += 1;
            }
            Err(e) => assert!(
                e.contains("closed") || e.contains("reset"),
                "held connection {i}: neither answered nor closed: {e}"
            ),
        }
    }
    assert!(served >= 1, "no held connection was served");
    drop(conns);
    assert!(s.is_running(), "server died:\n{}", s.error_log());
    for i in 0..10 {
        let r = request(s.port, &format!("GET /after{i} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        assert_eq!(r.text(), format!("/after{i}"));
    }
    assert!(s.is_running());
}

/// Keep-alive connections idle for more than 2 s are parked (they leave the
/// event loop for a cheaper per-worker set); they must come back
/// transparently on their next request, and still honour keepalive_timeout.
#[test]
fn parked_keepalive_connections_resume_and_time_out() {
    let s = builder()
        .http(
            "keepalive_timeout 6s;\n\
             server { listen 127.0.0.1:{port}; location / { return 200 \"ok $connection_requests\"; } }",
        )
        .start();
    let mut c = s.connect();
    c.send("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.text(), "ok 1");
    // Long enough to be parked (idle > 2 s, swept on a second boundary).
    std::thread::sleep(Duration::from_millis(3500));
    c.send("GET /b HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let r = c.read_response();
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.text(), "ok 2", "the same connection must carry on");
    // Parked again; now past keepalive_timeout the server closes it.
    assert!(c.closed_within(Duration::from_secs(10)), "parked connection outlived keepalive_timeout");
}

/// A parked connection whose client closes is cleaned up, and the worker
/// keeps serving.
#[test]
fn parked_connection_closed_by_client() {
    let s = builder().http("server { listen 127.0.0.1:{port}; location / { return 200 x; } }").start();
    let mut c = s.connect();
    c.send("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert_eq!(c.read_response().text(), "x");
    std::thread::sleep(Duration::from_millis(3500));
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(s.get("/").text(), "x");
}
