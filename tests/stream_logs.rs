//! The error-log lines of proxied stream sessions as nginx 1.22 writes
//! them, session by session: connected, client reset, origin closes
//! first, refused, denied, no resolver, no live upstreams, timeout, UDP
//! done and refused. With SLUICE_TEST_NGINX=1 the same test runs against
//! Debian's nginx.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::stream::*;
use common::*;

/// An error-log line's level and what follows `PID#TID: `.
fn level_and_text(line: &str) -> (&str, &str) {
    let rest = line.split_once(" [").map_or("", |(_, r)| r);
    let (level, rest) = rest.split_once("] ").unwrap_or_default();
    (level, rest.split_once(": ").map_or("", |(_, t)| t))
}

/// The lines (level, text) of the session a client at local port
/// `client` opened to `listen` (`[udp ]client ... connected to`, then
/// every line with its `*N`).
fn session_lines(log: &str, client: u16, listen: u16) -> Vec<(String, String)> {
    let opened = log
        .lines()
        .map(level_and_text)
        .find(|(_, t)| t.contains(&format!("client 127.0.0.1:{client} connected to 127.0.0.1:{listen}")))
        .unwrap_or_else(|| panic!("no session from port {client} to {listen}:\n{log}"));
    let id = format!("{} ", opened.1.split(' ').next().unwrap_or_default());
    log.lines()
        .map(level_and_text)
        .filter(|(_, t)| t.starts_with(&id))
        .map(|(l, t)| (l.to_string(), t[id.len()..].to_string()))
        .collect()
}

/// The error-log lines of proxied sessions, as nginx 1.22 writes them:
/// `proxy LOCAL connected to PEER` at info once the origin is connected
/// (`udp proxy ...` for a datagram session); the origin and the bytes
/// moved (`bytes from/to client:X/Y, bytes from/to upstream:X/Y`) after
/// every line of the proxy phase, whether a peer was picked (`upstream:
/// "ADDR"`), none was left (`upstream: "NAME"`) or none is known yet; a
/// datagram origin's refusal `while proxying and reading from upstream`,
/// a client's reset `while proxying and reading from client`; and the
/// closing line only for a session whose relay ended well, naming the side
/// that closed (`client disconnected`, `upstream disconnected`, `udp done,
/// packets from/to client:1/1`), none after a refused connect, `access
/// forbidden by rule`, or `connection timed out`.
#[test]
fn error_log_lines_of_proxied_sessions() {
    let o = origin("O");
    let (bye, echo, mute) = (fixed_origin("bye"), udp_echo(), closing_origin());
    let (dead, dead2, udp_dead) = (free_port(), free_port(), free_port());
    let [ok, refused, denied, udp, nl, novar, slow, closing, udp_ok, tls_fail] = [(); 10].map(|_| free_port());
    let conf = format!(
        "upstream nl {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=60s;
                        server 127.0.0.1:{dead2} max_fails=1 fail_timeout=60s; }}
         server {{ listen 127.0.0.1:{{port0}}; return ready; }}
         server {{ listen 127.0.0.1:{ok}; proxy_pass 127.0.0.1:{o}; }}
         server {{ listen 127.0.0.1:{refused}; proxy_pass 127.0.0.1:{dead}; }}
         server {{ listen 127.0.0.1:{denied}; deny all; proxy_pass 127.0.0.1:{o}; }}
         server {{ listen 127.0.0.1:{udp} udp; proxy_pass 127.0.0.1:{udp_dead}; proxy_timeout 2s; }}
         server {{ listen 127.0.0.1:{nl}; proxy_pass nl; }}
         server {{ listen 127.0.0.1:{novar}; set $x nosuch.example:80; proxy_pass $x; }}
         server {{ listen 127.0.0.1:{slow}; proxy_pass 127.0.0.1:{o}; proxy_timeout 1s; }}
         server {{ listen 127.0.0.1:{closing}; proxy_pass 127.0.0.1:{bye}; }}
         server {{ listen 127.0.0.1:{udp_ok} udp; proxy_pass 127.0.0.1:{echo}; proxy_responses 1; }}
         server {{ listen 127.0.0.1:{tls_fail}; proxy_pass 127.0.0.1:{mute}; proxy_ssl on; }}",
        o = o.port
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let log_path = srv.path("logs/error.log");
    let local = |s: &TcpStream| s.local_addr().unwrap().port();
    let origin_addr = format!("127.0.0.1:{}", o.port);

    // Connected, relayed, closed by the client.
    let mut s = dial(ok);
    assert_eq!(ask(&mut s, "hello"), "O:hello");
    let ok_client = local(&s);
    drop(s);
    // The client resets its connection.
    let mut s = dial(ok);
    assert_eq!(ask(&mut s, "hello"), "O:hello");
    let reset_client = local(&s);
    socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO)).unwrap();
    drop(s);
    // The origin answers and closes first.
    let mut s = dial(closing);
    assert_eq!(ask(&mut s, "hello"), "bye");
    let closing_client = local(&s);
    assert_eq!(s.read(&mut [0u8; 16]).unwrap_or(1), 0, "closed after the origin");
    drop(s);
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.send_to(b"abc", ("127.0.0.1", udp_ok)).unwrap();
    assert_eq!(c.recv(&mut [0u8; 16]).expect("the echo"), 3);
    let udp_ok_client = c.local_addr().unwrap().port();
    let mut s = dial(refused);
    let refused_client = local(&s);
    let _ = s.write_all(b"hi");
    let _ = s.read(&mut [0u8; 16]);
    drop(s);
    let mut s = dial(denied);
    let denied_client = local(&s);
    assert_eq!(s.read(&mut [0u8; 16]).unwrap_or(0), 0, "denied: closed");
    drop(s);
    // Both peers fail and are out: the next session finds none.
    for _ in 0..2 {
        let mut s = dial(nl);
        let _ = s.read(&mut [0u8; 16]);
    }
    // TLS to an origin that does not speak it: the handshake fails.
    let mut s = dial(tls_fail);
    let tls_fail_client = local(&s);
    let _ = s.read(&mut [0u8; 16]);
    drop(s);
    let mut s = dial(novar);
    let novar_client = local(&s);
    let _ = s.read(&mut [0u8; 16]);
    drop(s);
    let mut s = dial(slow);
    let slow_client = local(&s);
    assert_eq!(ask(&mut s, "hey"), "O:hey");
    // proxy_timeout: the session ends a second later.
    let _ = s.read(&mut [0u8; 16]);
    drop(s);
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.send_to(b"abc", ("127.0.0.1", udp)).unwrap();
    let udp_client = c.local_addr().unwrap().port();
    wait_contains(&log_path, "while proxying and reading from upstream", LOG_WAIT);
    wait_contains(&log_path, "client disconnected, bytes from/to client:5/7", LOG_WAIT);
    wait_contains(&log_path, "udp done", LOG_WAIT);
    wait_contains(&log_path, "upstream disconnected", LOG_WAIT);
    std::thread::sleep(Duration::from_millis(300));
    let log = srv.error_log();
    let line = |level: &str, text: String| (level.to_string(), text);
    let bytes0 = "bytes from/to client:0/0, bytes from/to upstream:0/0";

    let lines = session_lines(&log, ok_client, ok);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let proxy_local = lines[1].1.split(' ').nth(1).unwrap_or_default().to_string();
    assert!(proxy_local.starts_with("127.0.0.1:"), "{lines:#?}");
    assert_eq!(lines[1], line("info", format!("proxy {proxy_local} connected to {origin_addr}")));
    let closed = "client disconnected, bytes from/to client:5/7, bytes from/to upstream:7/5";
    assert_eq!(lines[2], line("info", closed.to_string()));

    let lines = session_lines(&log, reset_client, ok);
    let want = format!(
        "recv() failed (104: Connection reset by peer) while proxying and reading from client, \
         client: 127.0.0.1, server: 127.0.0.1:{ok}, upstream: \"{origin_addr}\", \
         bytes from/to client:5/7, bytes from/to upstream:7/5"
    );
    assert_eq!(lines[2..], [line("info", want), line("info", closed.to_string())], "{lines:#?}");

    let lines = session_lines(&log, closing_client, closing);
    let bye_closed = "upstream disconnected, bytes from/to client:5/3, bytes from/to upstream:3/5";
    assert!(lines[1].1.ends_with(&format!(" connected to 127.0.0.1:{bye}")), "{lines:#?}");
    assert_eq!(lines[2..], [line("info", bye_closed.to_string())], "{lines:#?}");

    let lines = session_lines(&log, udp_ok_client, udp_ok);
    let done = "udp done, packets from/to client:1/1, bytes from/to client:3/3, bytes from/to upstream:3/3";
    assert!(lines[1].1.starts_with("udp proxy 127.0.0.1:"), "{lines:#?}");
    assert_eq!(lines[2..], [line("info", done.to_string())], "{lines:#?}");

    let lines = session_lines(&log, refused_client, refused);
    let want = format!(
        "connect() failed (111: Connection refused) while connecting to upstream, \
         client: 127.0.0.1, server: 127.0.0.1:{refused}, upstream: \"127.0.0.1:{dead}\", {bytes0}"
    );
    assert_eq!(lines[1..], [line("error", want)], "no close line: {lines:#?}");

    // nginx names the phase: the handshake, not the connect.
    let lines = session_lines(&log, tls_fail_client, tls_fail);
    let tail = format!(
        " while SSL handshaking to upstream, client: 127.0.0.1, server: 127.0.0.1:{tls_fail}, \
         upstream: \"127.0.0.1:{mute}\", {bytes0}"
    );
    let want = format!("peer closed connection in SSL handshake{tail}");
    assert_eq!(lines[1..], [line("error", want)], "no proxy-connected line: {lines:#?}");

    let lines = session_lines(&log, denied_client, denied);
    let want =
        format!("access forbidden by rule while initializing session, client: 127.0.0.1, server: 127.0.0.1:{denied}");
    assert_eq!(lines[1..], [line("error", want)], "no close line: {lines:#?}");

    let lines = session_lines(&log, novar_client, novar);
    let want = format!(
        "no resolver defined to resolve nosuch.example, client: 127.0.0.1, server: 127.0.0.1:{novar}, {bytes0}"
    );
    assert_eq!(lines[1..], [line("error", want)], "{lines:#?}");

    let texts: Vec<(&str, &str)> = log.lines().map(level_and_text).collect();
    let nl_tail = format!("client: 127.0.0.1, server: 127.0.0.1:{nl}");
    let disabled = format!(
        "upstream server temporarily disabled while connecting to upstream, {nl_tail}, \
         upstream: \"127.0.0.1:{dead}\", {bytes0}"
    );
    assert!(texts.iter().any(|(l, t)| *l == "warn" && t.ends_with(&disabled)), "{log}");
    let none = format!("no live upstreams while connecting to upstream, {nl_tail}, upstream: \"nl\", {bytes0}");
    assert!(texts.iter().any(|(l, t)| *l == "error" && t.ends_with(&none)), "{log}");

    let lines = session_lines(&log, slow_client, slow);
    let want = format!(
        "connection timed out (110: Connection timed out) while proxying connection, \
         client: 127.0.0.1, server: 127.0.0.1:{slow}, upstream: \"{origin_addr}\", \
         bytes from/to client:3/5, bytes from/to upstream:5/3"
    );
    assert_eq!(lines.len(), 3, "no close line after the timeout: {lines:#?}");
    assert_eq!(lines[2], line("info", want));

    // The datagram session: its origin refused (ICMP port unreachable).
    let lines = session_lines(&log, udp_client, udp);
    let proxy = &lines[1];
    assert!(
        proxy.0 == "info"
            && proxy.1.starts_with("udp proxy 127.0.0.1:")
            && proxy.1.ends_with(&format!(" connected to 127.0.0.1:{udp_dead}")),
        "{lines:#?}"
    );
    let want = format!(
        "recv() failed (111: Connection refused) while proxying and reading from upstream, \
         udp client: 127.0.0.1, server: 127.0.0.1:{udp}, upstream: \"127.0.0.1:{udp_dead}\", \
         bytes from/to client:3/0, bytes from/to upstream:0/3"
    );
    assert_eq!(lines[2], line("error", want), "{lines:#?}");
}

/// An origin that reads what it is sent (a ClientHello) and closes without
/// a word, so the TLS handshake to it meets the end of the stream.
fn closing_origin() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_millis(300)));
                let mut buf = [0u8; 4096];
                while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
            });
        }
    });
    port
}
