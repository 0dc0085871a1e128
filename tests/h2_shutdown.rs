//! `worker_shutdown_timeout` with an HTTP/2 connection still busy: on a
//! graceful stop (SIGQUIT) the connection is closed once the timeout is up,
//! and its request, cut short, is logged with 499 as nginx logs it (nginx's
//! worker_shutdown_timeout_h2.t looks for that access log line). A raw
//! frame client (tests/common/h2raw.rs) holds a proxied request whose
//! origin answers only after 20 s.

mod common;

use std::time::{Duration, Instant};

use common::h2raw::{self as h2, Event};
use common::origin::{Origin, Reply};
use common::*;

#[test]
fn busy_h2_connection_is_closed_and_its_request_logged_499() {
    let o = Origin::start(|_| Reply::ok("late\n").after(Duration::from_secs(20)));
    let mut s = builder()
        .main("worker_shutdown_timeout 200ms;")
        .http(&format!(
            "access_log logs/access.log;\n\
             server {{\n\
                 listen 127.0.0.1:{{port}} http2;\n\
                 location / {{ proxy_pass http://127.0.0.1:{}; }}\n\
             }}",
            o.port
        ))
        .start();
    let mut c = h2::Conn::open(s.port);
    c.send(h2::headers_frame(1, &h2::get_block("/slow"), true, true));
    let deadline = Instant::now() + Duration::from_secs(5);
    while o.count() == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(o.count(), 1, "the request did not reach the origin");

    let t = Instant::now();
    s.signal("quit");
    // GOAWAY(NO_ERROR) for the graceful stop, then the close.
    let (frames, end) = c.drain(Duration::from_secs(5));
    assert!(matches!(end, Event::Eof | Event::Error(_)), "connection not closed: {end:?} after {frames:?}");
    assert!(!frames.iter().any(|f| f.kind == h2::HEADERS), "an answer came: {frames:?}");
    assert!(s.wait_exit(Duration::from_secs(10)).is_some(), "still running 10 s after quit");
    assert!(t.elapsed() < Duration::from_secs(5), "quit took {:?}", t.elapsed());
    let log = s.access_log();
    assert!(log.contains("\"GET /slow HTTP/2.0\" 499 "), "access log: {log}");
}
