//! The stream family (`stream {}`) with real clients and servers: TCP
//! proxying through an upstream with weights and a failing peer, `return`,
//! access rules, the access log's stream variables, the PROXY protocol in
//! and out, TLS termination, `ssl_preread` routing `openssl s_client` by
//! SNI to two TLS origins (`openssl s_server`), a reload under open
//! sessions that keeps every one, a crash of the serving process that
//! loses no TCP connect and no datagram, datagram sessions on a unix
//! socket (`listen unix:PATH udp`) answered at the client's bound name,
//! and `-t`'s messages. The error-log lines of proxied sessions are
//! tests/stream_logs.rs.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::stream::*;
use common::tls::{self, KeyKind};
use common::*;

#[test]
fn proxies_through_an_upstream_and_logs_stream_variables() {
    let a = origin("A");
    let b = origin("B");
    // A port that refuses connections: the first pick of the round robin
    // fails over to the next peer (proxy_next_upstream).
    let dead = free_port();
    let conf = format!(
        "log_format s '$remote_addr $status $bytes_received $bytes_sent $upstream_addr \
         $upstream_bytes_sent $upstream_bytes_received $protocol';
         upstream u {{ server 127.0.0.1:{a} weight=2; server 127.0.0.1:{b}; }}
         upstream f {{ server 127.0.0.1:{dead}; server 127.0.0.1:{b}; }}
         server {{ listen 127.0.0.1:{{port0}}; proxy_pass u; access_log logs/s.log s; }}
         server {{ listen 127.0.0.1:{{port1}}; proxy_pass f; access_log logs/s.log s; proxy_connect_timeout 2s; }}
         server {{ listen 127.0.0.1:{{port2}}; return \"hi $remote_addr $server_port\\n\"; }}
         server {{ listen 127.0.0.1:{{port3}}; deny 127.0.0.1; proxy_pass u; access_log logs/s.log s; }}",
        a = a.port,
        b = b.port
    );
    let srv = builder().whole(&stream_conf(&conf)).ports(4).start();
    let mut tags = Vec::new();
    for _ in 0..6 {
        let mut s = dial(srv.ports[0]);
        let r = ask(&mut s, "ping");
        tags.push(r.clone());
        assert_eq!(r.len(), 6, "{r:?}");
        // A second exchange on the same session.
        assert_eq!(ask(&mut s, "again")[2..], *"again");
    }
    // weight=2: A twice as often as B (smooth round robin: A B A A B A).
    assert_eq!(tags.iter().filter(|t| t.starts_with("A:")).count(), 4, "{tags:?}");
    assert_eq!(tags.iter().filter(|t| t.starts_with("B:")).count(), 2, "{tags:?}");

    let mut s = dial(srv.ports[1]);
    assert_eq!(ask(&mut s, "x"), "B:x");
    drop(s);
    assert_eq!(read_all(srv.ports[2]), format!("hi 127.0.0.1 {}\n", srv.ports[2]));
    assert_eq!(read_all(srv.ports[3]), "", "denied: closed at once");

    // The harness's readiness probes (connect, close) log lines too: 200
    // with nothing received, or the 403. The test's own sessions all sent.
    wait_lines(&srv.path("logs/s.log"), 9, LOG_WAIT);
    std::thread::sleep(Duration::from_millis(1500));
    let all = read_lossy(&srv.path("logs/s.log"));
    let lines: Vec<&str> = all.lines().filter(|l| !l.starts_with("127.0.0.1 200 0 0 ")).collect();
    assert_eq!(lines.iter().filter(|l| l.starts_with("127.0.0.1 200 ")).count(), 7, "{lines:?}");
    let proxied = lines.iter().find(|l| l.starts_with("127.0.0.1 200 ")).expect("a proxied line");
    let f: Vec<&str> = proxied.split(' ').collect();
    assert_eq!((f[0], f[1], f[2], f[3]), ("127.0.0.1", "200", "9", "13"), "{proxied}");
    assert_eq!((f[5], f[6], f[7]), ("9", "13", "TCP"), "{proxied}");
    // The first session through `f` (the probe's) found the dead peer.
    let failover = all.lines().find(|l| l.contains(&format!("127.0.0.1:{dead}"))).expect("failover line");
    assert!(failover.contains(&format!("127.0.0.1:{dead}, 127.0.0.1:{}", b.port)), "{failover}");
    assert!(lines.iter().any(|l| l.starts_with("127.0.0.1 403 0 0 - ")), "{lines:?}");
    let err = srv.error_log();
    assert!(err.contains("connect() failed (111: Connection refused) while connecting to upstream"), "{err}");
    // nginx names what the session was doing (`c->log->action`): the access
    // phase runs while "initializing session".
    assert!(err.contains("access forbidden by rule while initializing session, client: 127.0.0.1"), "{err}");
}

#[test]
fn proxy_protocol_in_and_out() {
    let o = origin("O");
    let conf = format!(
        "log_format pp '$remote_addr $proxy_protocol_addr $realip_remote_addr';
         server {{ listen 127.0.0.1:{{port0}} proxy_protocol; set_real_ip_from 127.0.0.1;
                  proxy_protocol on; proxy_pass 127.0.0.1:{}; access_log logs/pp.log pp; }}",
        o.port
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let mut s = dial(srv.port);
    s.write_all(b"PROXY TCP4 192.0.2.7 127.0.0.1 4242 80\r\ndata").unwrap();
    let mut got = String::new();
    while !got.ends_with("data") {
        let mut buf = [0u8; 512];
        let n = s.read(&mut buf).expect("the origin's answer");
        assert!(n > 0, "closed after {got:?}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    drop(s);
    // The first connection is the harness's readiness probe, which sent
    // no header: its session ended with 400 before reaching the origin.
    let seen = o.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let first = String::from_utf8_lossy(&seen[0]).into_owned();
    assert!(
        first.starts_with(&format!("PROXY TCP4 192.0.2.7 127.0.0.1 4242 {}\r\n", srv.port)),
        "what the origin got first: {first:?}"
    );
    let lines = wait_lines(&srv.path("logs/pp.log"), 2, LOG_WAIT);
    assert!(lines.contains(&"192.0.2.7 192.0.2.7 127.0.0.1".to_string()), "{lines:?}");
    // A broken header: the session ends with 400 and nginx's log line.
    let mut bad = dial(srv.port);
    bad.write_all(b"HELLO\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest);
    assert!(rest.is_empty());
    wait_contains(&srv.path("logs/error.log"), "broken header: \"HELLO", LOG_WAIT);
}

/// `openssl s_server` with a certificate for `name` on a free port.
struct TlsOrigin {
    port: u16,
    child: Child,
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_origin(name: &str, dir: &std::path::Path) -> TlsOrigin {
    let ck = tls::issue(KeyKind::Ecdsa, &[name], false);
    let (crt, key) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    std::fs::write(&crt, &ck.cert).unwrap();
    std::fs::write(&key, &ck.key).unwrap();
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept", &port.to_string(), "-cert"])
        .arg(&crt)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    for _ in 0..200 {
        if port_accepts(port) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    TlsOrigin { port, child }
}

#[test]
fn ssl_preread_routes_by_sni_to_two_tls_origins() {
    let dir = temp_dir("stream-tls");
    let a = tls_origin("a.test", &dir);
    let b = tls_origin("b.test", &dir);
    let conf = format!(
        "log_format sni '$ssl_preread_server_name|$ssl_preread_alpn_protocols|$ssl_preread_protocol|$upstream_addr';
         map $ssl_preread_server_name $backend {{ a.test 127.0.0.1:{}; default 127.0.0.1:{}; }}
         server {{ listen 127.0.0.1:{{port0}}; ssl_preread on; proxy_pass $backend; access_log logs/sni.log sni; }}",
        a.port, b.port
    );
    let srv = builder().whole(&stream_conf(&conf)).file("conf/tls/ca.crt", tls::ca_pem()).start();
    let get = "GET / HTTP/1.0\r\n\r\n";
    let ra = tls::s_client(&srv, srv.port, &["-servername", "a.test", "-alpn", "h2,http/1.1", "-tls1_3"], get);
    assert!(ra.ok && ra.verified(), "{}", ra.out);
    assert_eq!(ra.subject(), Some("CN = a.test"), "{}", ra.out);
    let rb = tls::s_client(&srv, srv.port, &["-servername", "b.test", "-tls1_2"], get);
    assert_eq!(rb.subject(), Some("CN = b.test"), "{}", rb.out);
    let lines = wait_lines(&srv.path("logs/sni.log"), 3, LOG_WAIT);
    // The readiness probe sent nothing and closed: the session ends in
    // preread, no origin asked (nginx finalizes it with 200 there).
    assert_eq!(lines[0], "-|-|-|-");
    assert_eq!(lines[1], format!("a.test|h2,http/1.1|TLSv1.3|127.0.0.1:{}", a.port));
    assert_eq!(lines[2], format!("b.test||TLSv1.2|127.0.0.1:{}", b.port));
}

/// TLS termination and its variables. `ssl_protocols` is spelled out:
/// nginx enables TLSv1.3 by default only since 1.23.4 (the reference 1.26
/// and sluice do; Debian's 1.22 offers TLSv1.2 at most), and the log line
/// checks which protocol was negotiated.
#[test]
fn terminates_tls_in_front_of_tcp() {
    let o = origin("T");
    let ck = tls::issue(KeyKind::Ecdsa, &["stream.test"], false);
    let conf = format!(
        "log_format t '$ssl_protocol $ssl_server_name $bytes_received';
         server {{ listen 127.0.0.1:{{port0}} ssl; ssl_certificate tls/s.crt; ssl_certificate_key tls/s.key;
                  ssl_protocols TLSv1.2 TLSv1.3;
                  proxy_pass 127.0.0.1:{}; proxy_timeout 1s; access_log logs/t.log t; }}",
        o.port
    );
    let srv = builder()
        .whole(&stream_conf(&conf))
        .file("conf/tls/s.crt", &ck.cert)
        .file("conf/tls/s.key", &ck.key)
        .file("conf/tls/ca.crt", tls::ca_pem())
        .start();
    let r = tls::s_client(&srv, srv.port, &["-servername", "stream.test", "-quiet"], "hello\n");
    assert!(r.stdout.contains("T:hello"), "{}", r.out);
    let lines = wait_lines(&srv.path("logs/t.log"), 2, LOG_WAIT);
    assert!(lines.contains(&"TLSv1.3 stream.test 6".to_string()), "{lines:?}");
}

#[test]
fn reload_keeps_open_sessions() {
    let o = origin("R");
    let conf = |v: &str| {
        stream_conf(&format!(
            "server {{ listen 127.0.0.1:{{port0}}; proxy_pass 127.0.0.1:{}; }}
         server {{ listen 127.0.0.1:{{port1}}; return {v}; }}",
            o.port
        ))
    };
    let srv = builder().whole(&conf("v1")).ports(2).start();
    let mut open: Vec<TcpStream> = (0..200).map(|_| dial(srv.port)).collect();
    for (i, s) in open.iter_mut().enumerate() {
        assert_eq!(ask(s, &format!("m{i}")), format!("R:m{i}"));
    }
    srv.write_conf(&conf("v2"));
    srv.signal("reload");
    // The new generation answers new sessions...
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while read_all(srv.ports[1]) != "v2" {
        assert!(std::time::Instant::now() < deadline, "the reload never took effect");
        std::thread::sleep(Duration::from_millis(50));
    }
    // ...while every session of the old one goes on.
    for (i, s) in open.iter_mut().enumerate() {
        assert_eq!(ask(s, &format!("n{i}")), format!("R:n{i}"), "session {i} after the reload");
    }
    let mut fresh = dial(srv.port);
    assert_eq!(ask(&mut fresh, "new"), "R:new");
}

#[test]
fn config_test_speaks_nginx() {
    let check = |body: &str| {
        let srv = builder().whole(&stream_conf(body)).prepare();
        let out = srv.run(&["-t"]);
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = check("server { listen 127.0.0.1:1; }");
    assert!(!ok && err.contains("no handler for server in "), "{err}");
    let (ok, err) = check("server { listen 127.0.0.1:1; proxy_pass 127.0.0.1; }");
    assert!(!ok && err.contains("no port in upstream \"127.0.0.1\""), "{err}");
    // A directive some module knows, in another context, is misplaced in
    // nginx's words (its http modules know `location` and `keepalive`);
    // only a name no module has is unknown.
    let (ok, err) = check("server { listen 127.0.0.1:1; return x; location / {} }");
    assert!(!ok && err.contains("\"location\" directive is not allowed here"), "{err}");
    let (ok, err) =
        check("upstream u { server 127.0.0.1:1; keepalive 2; } server { listen 127.0.0.1:1; proxy_pass u; }");
    assert!(!ok && err.contains("\"keepalive\" directive is not allowed here"), "{err}");
    let (ok, err) = check("server { listen 127.0.0.1:1; return x; no_such_thing 1; }");
    assert!(!ok && err.contains("unknown directive \"no_such_thing\""), "{err}");
    // Servers share an address (nginx 1.25.5's `server_name`); two without
    // names conflict on "" and the first wins. Debian's 1.22 predates
    // stream virtual servers and refuses the second server's address as a
    // duplicate instead: the newer reference's behaviour is sluice's.
    let (ok, err) = check("server { listen 127.0.0.1:1; return x; } server { listen 127.0.0.1:1; return y; }");
    if prog() == "nginx" {
        assert!(!ok && err.contains("duplicate \"127.0.0.1:1\" address and port pair"), "{err}");
    } else {
        assert!(ok && err.contains("conflicting server name \"\" on 127.0.0.1:1, ignored"), "{err}");
    }
    let (ok, err) = check("server { listen 127.0.0.1:1; listen 127.0.0.1:1; return x; }");
    assert!(!ok && err.contains("duplicate \"127.0.0.1:1\" address and port pair"), "{err}");
    let (ok, err) = check("server { listen 127.0.0.1:1; proxy_pass 127.0.0.1:2; proxy_timeout 5s; }");
    assert!(ok, "{err}");
    if prog() == "nginx" {
        // nginx loads the module (every configuration here does); sluice's
        // note about the line is its own.
        return;
    }
    // Debian's modules-enabled line loads the module sluice has built in.
    let srv = builder()
        .whole(&format!(
            "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n{}",
            stream_conf("server { listen 127.0.0.1:1; return x; }")
        ))
        .prepare();
    let out = srv.run(&["-t"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("ngx_stream_module is built into sluice"), "{err}");
}

/// A DNS server in the test: answers every A query with 192.0.2.53 and
/// counts the queries.
fn dns_server() -> (u16, Arc<Mutex<u32>>) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind dns");
    let port = s.local_addr().unwrap().port();
    let n = Arc::new(Mutex::new(0));
    let count = n.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            let Ok((len, from)) = s.recv_from(&mut buf) else { return };
            *count.lock().unwrap() += 1;
            let q = &buf[..len];
            // Header: same id, QR + RD + RA, one question, one answer.
            let mut r = vec![q[0], q[1], 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
            r.extend_from_slice(&q[12..]);
            r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 53]);
            let _ = s.send_to(&r, from);
        }
    });
    (port, n)
}

fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = id.to_be_bytes().to_vec();
    q.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

#[test]
fn dns_over_udp_with_proxy_responses() {
    let (dns, count) = dns_server();
    // The harness waits for the TCP port of the second server; the UDP
    // port is not a placeholder, which it would try to connect to.
    let udp = free_port();
    let conf = format!(
        "log_format u '$protocol $status $bytes_received $bytes_sent $upstream_addr';
         server {{ listen 127.0.0.1:{udp} udp; proxy_pass 127.0.0.1:{dns}; proxy_responses 1;
                  proxy_timeout 2s; access_log logs/udp.log u; }}
         server {{ listen 127.0.0.1:{{port0}}; return ready; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    for id in [0x1234u16, 0x4321, 0x5555] {
        let q = dns_query(id, "example.test");
        c.send_to(&q, ("127.0.0.1", udp)).unwrap();
        let mut buf = [0u8; 512];
        let (n, from) = c.recv_from(&mut buf).expect("an answer through the proxy");
        assert_eq!(from.port(), udp);
        assert_eq!(&buf[..2], &id.to_be_bytes(), "the answer to this query");
        assert_eq!(&buf[n - 4..n], &[192, 0, 2, 53]);
    }
    assert_eq!(*count.lock().unwrap(), 3);
    // proxy_responses 1: each query was its own session, ended by its answer.
    let lines = wait_lines(&srv.path("logs/udp.log"), 3, LOG_WAIT);
    let q = dns_query(0, "example.test").len();
    for l in &lines {
        assert_eq!(*l, format!("UDP 200 {q} {} 127.0.0.1:{dns}", q + 16), "{lines:?}");
    }
}

/// Datagram sessions without a task of their own (the listener's loop
/// runs them) end as nginx's do: at `proxy_timeout` after the last
/// datagram when the origin stays silent (502 and nginx's error line), and
/// after `proxy_requests` datagrams and their answers when it does not,
/// with a later datagram of the client going to the session it opened.
/// The byte pattern of the bulky sessions: position-dependent, so a lost,
/// repeated or reordered piece shows.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Sessions that start small and turn bulky, both ways (the proxy moves
/// such a session from its first copies to splice(2) part way): a client
/// that reads late gets every byte of a 4 MB answer and of one that
/// trickles in 1000-byte pieces, and a 3 MB upload reaches the origin
/// whole; the access log counts each.
#[test]
fn bulky_sessions_keep_every_byte_both_ways() {
    const DOWN: usize = 4_000_000;
    const UP: usize = 3_000_000;
    const TRICKLE: usize = 200_000;
    // The source answers a connection's first bytes with DOWN bytes, then
    // closes; the sink reads until the end and records what it got.
    let source = TcpListener::bind("127.0.0.1:0").expect("bind source");
    let source_port = source.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in source.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 16];
                match c.read(&mut buf) {
                    // Small pieces, each read by the proxy alone.
                    Ok(7) if &buf[..7] == b"trickle" => {
                        let _ = c.set_nodelay(true);
                        for piece in pattern(TRICKLE).chunks(1000) {
                            if c.write_all(piece).is_err() {
                                return;
                            }
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    Ok(n) if n > 0 => {
                        let _ = c.write_all(&pattern(DOWN));
                    }
                    _ => {}
                }
            });
        }
    });
    let sink = TcpListener::bind("127.0.0.1:0").expect("bind sink");
    let sink_port = sink.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let rec = got.clone();
    std::thread::spawn(move || {
        for c in sink.incoming() {
            let Ok(mut c) = c else { continue };
            let rec = rec.clone();
            std::thread::spawn(move || {
                let mut all = Vec::new();
                let _ = c.read_to_end(&mut all);
                if !all.is_empty() {
                    rec.lock().unwrap().push(all);
                }
            });
        }
    });
    let conf = format!(
        "log_format b '$server_port $status $bytes_received $bytes_sent $upstream_bytes_sent $upstream_bytes_received';
         server {{ listen 127.0.0.1:{{port0}}; proxy_pass 127.0.0.1:{source_port}; access_log logs/b.log b; }}
         server {{ listen 127.0.0.1:{{port1}}; proxy_pass 127.0.0.1:{sink_port}; access_log logs/b.log b; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).ports(2).start();

    let mut c = dial(srv.ports[0]);
    c.write_all(b"go").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut down = Vec::new();
    c.read_to_end(&mut down).expect("the whole answer");
    assert!(down == pattern(DOWN), "{} bytes came, not the {DOWN} sent in order", down.len());

    // A client with a small receive window that reads late, the answer in
    // small pieces: the direction turns bulky by the bytes it moved.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let to: std::net::SocketAddr = format!("127.0.0.1:{}", srv.ports[0]).parse().unwrap();
    sock.connect(&to.into()).expect("connect");
    let mut c: TcpStream = sock.into();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.write_all(b"trickle").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut down = Vec::new();
    c.read_to_end(&mut down).expect("the whole answer");
    assert!(down == pattern(TRICKLE), "{} bytes came, not the {TRICKLE} sent in order", down.len());

    let mut c = dial(srv.ports[1]);
    c.write_all(&pattern(UP)).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let t = std::time::Instant::now();
    while got.lock().unwrap().is_empty() && t.elapsed() < READ_TIMEOUT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let up = got.lock().unwrap().pop().expect("the upload reached the sink");
    assert!(up == pattern(UP), "{} bytes reached the origin, not the {UP} sent in order", up.len());

    let (p0, p1) = (srv.ports[0], srv.ports[1]);
    let want = [
        format!("{p0} 200 2 {DOWN} 2 {DOWN}"),
        format!("{p0} 200 7 {TRICKLE} 7 {TRICKLE}"),
        format!("{p1} 200 {UP} 0 {UP} 0"),
    ];
    let t = std::time::Instant::now();
    loop {
        let log = read_lossy(&srv.path("logs/b.log"));
        if want.iter().all(|w| log.lines().any(|l| l == w)) {
            break;
        }
        assert!(t.elapsed() < LOG_WAIT, "{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn udp_sessions_time_out_and_take_later_datagrams() {
    // Answers only datagrams that start with "A".
    let o = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind origin");
    let origin = o.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = o.recv_from(&mut buf) {
            if buf[0] == b'A' {
                let _ = o.send_to(&[b"re:", &buf[..n]].concat(), from);
            }
        }
    });
    let (silent, two) = (free_port(), free_port());
    let conf = format!(
        "log_format u '$server_port $status $bytes_received $bytes_sent $upstream_bytes_sent $upstream_bytes_received';
         server {{ listen 127.0.0.1:{silent} udp; proxy_pass 127.0.0.1:{origin}; proxy_responses 1;
                  proxy_timeout 1s; access_log logs/udp.log u; }}
         server {{ listen 127.0.0.1:{two} udp; proxy_pass 127.0.0.1:{origin}; proxy_responses 1;
                  proxy_requests 2; proxy_timeout 5s; access_log logs/udp.log u; }}
         server {{ listen 127.0.0.1:{{port0}}; return ready; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut buf = [0u8; 2048];
    // Two datagrams of one session, each answered.
    for q in ["A1", "A22"] {
        c.send_to(q.as_bytes(), ("127.0.0.1", two)).unwrap();
        let (n, _) = c.recv_from(&mut buf).expect("an answer");
        assert_eq!(&buf[..n], format!("re:{q}").as_bytes());
    }
    // A silent origin: the session ends a second after the datagram.
    let t = std::time::Instant::now();
    c.send_to(b"S", ("127.0.0.1", silent)).unwrap();
    srv.wait_error_log("upstream timed out (110: Connection timed out) while proxying connection");
    let waited = t.elapsed();
    assert!(waited >= Duration::from_millis(900), "timed out after {waited:?}");
    let lines = wait_lines(&srv.path("logs/udp.log"), 2, LOG_WAIT);
    assert_eq!(lines, [format!("{two} 200 5 11 5 11"), format!("{silent} 502 1 0 1 0")]);
    // The silent session is over: the client's next datagram opens another.
    c.send_to(b"A3", ("127.0.0.1", silent)).unwrap();
    let (n, _) = c.recv_from(&mut buf).expect("an answer in a new session");
    assert_eq!(&buf[..n], b"re:A3");
}

/// The master holds the family's sockets too: right after the serving
/// process is killed, a TCP connect and a UDP datagram wait in the
/// kernel's queues of the master's copies, and the new serving process
/// answers both.
#[test]
fn a_crash_keeps_the_tcp_and_udp_sockets() {
    let o = origin("K");
    let (dns, _) = dns_server();
    let udp = free_port();
    let conf = format!(
        "server {{ listen 127.0.0.1:{{port0}}; proxy_pass 127.0.0.1:{}; }}
         server {{ listen 127.0.0.1:{udp} udp; proxy_pass 127.0.0.1:{dns}; proxy_responses 1; proxy_timeout 2s; }}",
        o.port
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let mut s = dial(srv.port);
    assert_eq!(ask(&mut s, "before"), "K:before");
    let before = srv.serving_pid();
    let st = Command::new("kill").args(["-KILL", &before.to_string()]).status().expect("kill");
    assert!(st.success());
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.send_to(&dns_query(0x7777, "example.test"), ("127.0.0.1", udp)).unwrap();
    let mut t = TcpStream::connect(("127.0.0.1", srv.port)).expect("connect refused after the crash");
    t.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    assert_eq!(ask(&mut t, "after"), "K:after");
    let mut buf = [0u8; 512];
    let (n, _) = c.recv_from(&mut buf).expect("the datagram sent during the restart was answered");
    assert_eq!(&buf[..2], &0x7777u16.to_be_bytes());
    assert_eq!(&buf[n - 4..n], &[192, 0, 2, 53]);
    assert_ne!(srv.serving_pid(), before, "a new serving process");
    srv.wait_error_log(&format!("worker process {before} exited on signal 9"));
}

/// `proxy_download_rate` / `proxy_upload_rate` on UDP, as nginx's: a
/// datagram is never split, and once a session moved more than its
/// allowance (the rate for each second begun since it started), the
/// origin's next answer waits in the origin socket until the allowance
/// covers it, while the client's next datagram is dropped: nginx reads a
/// client's datagram only as the listening socket hands it over and
/// leaves it unread while the upload rate holds the session back (nginx
/// 1.22 measured: the second datagram never reaches the origin, one sent
/// two seconds into the session does, in the same session).
#[test]
fn udp_rates_delay_answers_and_drop_excess_datagrams() {
    let echo = udp_echo();
    let (down, up) = (free_port(), free_port());
    let conf = format!(
        "log_format u '$bytes_received $bytes_sent';
         proxy_requests 2; proxy_responses 1; proxy_timeout 5s;
         server {{ listen 127.0.0.1:{down} udp; proxy_pass 127.0.0.1:{echo}; proxy_download_rate 500; }}
         server {{ listen 127.0.0.1:{up} udp; proxy_pass 127.0.0.1:{echo}; proxy_upload_rate 500;
                  access_log logs/up.log u; }}
         server {{ listen 127.0.0.1:{{port0}}; return ready; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    let msg = "1234567890".repeat(100);
    let echo_of = |c: &std::net::UdpSocket| {
        let mut buf = [0u8; 4096];
        c.recv_from(&mut buf).map(|(n, _)| buf[..n].to_vec())
    };
    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut times = Vec::new();
    for _ in 0..2 {
        let t = std::time::Instant::now();
        c.send_to(msg.as_bytes(), ("127.0.0.1", down)).unwrap();
        assert_eq!(echo_of(&c).expect("the echo"), msg.as_bytes(), "whole, not split");
        times.push(t.elapsed());
    }
    assert!(times[0] < Duration::from_millis(500), "first at once: {times:?}");
    // 1000 bytes at 500 B/s: the second answer waits until the session's
    // second or third second begins (nginx counts whole seconds of its
    // clock, sluice of the session's).
    assert!(times[1] >= Duration::from_millis(900), "second delayed: {times:?}");
    assert!(times[1] < Duration::from_millis(3000), "not much longer: {times:?}");

    let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let start = std::time::Instant::now();
    c.send_to(msg.as_bytes(), ("127.0.0.1", up)).unwrap();
    assert_eq!(echo_of(&c).expect("the echo"), msg.as_bytes(), "whole, not split");
    assert!(start.elapsed() < Duration::from_millis(500), "first at once");
    // Past the allowance: dropped, no answer.
    c.send_to(b"dropped", ("127.0.0.1", up)).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(1000))).unwrap();
    assert!(echo_of(&c).is_err(), "the datagram over the upload rate was dropped");
    // Two seconds in, 1000 bytes are within the allowance again: the
    // session takes the next datagram and forwards it at once.
    std::thread::sleep(Duration::from_millis(2200).saturating_sub(start.elapsed()));
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let t = std::time::Instant::now();
    c.send_to(b"later", ("127.0.0.1", up)).unwrap();
    assert_eq!(echo_of(&c).expect("the echo"), b"later");
    assert!(t.elapsed() < Duration::from_millis(500), "not delayed: {:?}", t.elapsed());
    // proxy_requests 2: the dropped datagram was not one of them, the
    // session ended with the second one's answer.
    let lines = wait_lines(&srv.path("logs/up.log"), 1, LOG_WAIT);
    assert_eq!(lines, ["1005 1005"]);
}

/// Tengine's `check` in a stream upstream: a peer whose HTTP probe fails is
/// held down and no session goes to it, until its probes pass again.
#[test]
fn check_holds_a_failing_peer_out_of_stream_sessions() {
    if tls::skip_in_nginx_mode("nginx has no upstream check module") {
        return;
    }
    let good = fixed_origin("HTTP/1.0 200 OK\r\n\r\ngood\n");
    let bad = fixed_origin("HTTP/1.0 500 Internal Server Error\r\n\r\nbad\n");
    let conf = format!(
        "upstream u {{ server 127.0.0.1:{good}; server 127.0.0.1:{bad};\n  \
         check interval=100 rise=1 fall=1 timeout=1000 type=http;\n  \
         check_http_send \"GET /health HTTP/1.0\\r\\n\\r\\n\"; check_http_expect_alive http_2xx; }}\n\
         server {{ listen 127.0.0.1:{{port}}; proxy_pass u; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).start();
    // default_down: nothing is up until the first probes have passed.
    let log = srv.wait_error_log(&format!("enable check peer: 127.0.0.1:{good}"));
    assert!(log.contains("[error]"), "{log}");
    let answers: Vec<String> = (0..8)
        .map(|_| {
            let mut s = dial(srv.port);
            ask(&mut s, "GET / HTTP/1.0\r\n\r\n")
        })
        .collect();
    assert!(answers.iter().all(|a| a.contains("good")), "a session reached the failing peer: {answers:?}");
    assert!(!srv.error_log().contains(&format!("enable check peer: 127.0.0.1:{bad}")), "{}", srv.error_log());
}

/// A unix datagram origin: records each datagram and echoes it with `U:`
/// in front to a sender that bound a name (an unnamed one cannot be
/// answered, which is how nginx 1.22's unbound origin sockets are).
fn unix_dgram_origin(path: &std::path::Path) -> Arc<Mutex<Vec<Vec<u8>>>> {
    let s = std::os::unix::net::UnixDatagram::bind(path).expect("bind unix origin");
    // nginx's workers run as nobody when the test runs as root.
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            rec.lock().unwrap().push(buf[..n].to_vec());
            let mut out = b"U:".to_vec();
            out.extend_from_slice(&buf[..n]);
            if let Some(p) = from.as_pathname() {
                let _ = s.send_to(&out, p);
            } else {
                use std::os::linux::net::SocketAddrExt;
                if from.as_abstract_name().is_some() {
                    let _ = s.send_to_addr(&out, &from);
                }
            }
        }
    });
    seen
}

/// `listen unix:PATH udp`: a client that bound its own unix datagram
/// socket gets each origin's answer back at its name, through a UDP
/// origin and a unix datagram one; `proxy_responses 1` ends each session
/// at its answer (long before `proxy_timeout`), the access log names the
/// client `unix:` and the path it bound (as nginx's `$remote_addr` does
/// for a datagram client), a denied session counts its datagram, the
/// socket file is mode 0666, kept by a reload and by a crash of the
/// serving process, and removed at quit.
#[test]
fn unix_datagram_listen_proxies_sessions_back_to_the_client() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    use std::os::unix::net::UnixDatagram;
    let echo = udp_echo();
    let dir = temp_dir("unix-dgram");
    let origin_path = dir.join("origin.sock");
    let seen = unix_dgram_origin(&origin_path);
    let conf = format!(
        "log_format u '$remote_addr $protocol $status $bytes_received $bytes_sent $upstream_addr';
         proxy_responses 1; proxy_timeout 30s;
         server {{ listen unix:{{prefix}}/ip.sock udp; proxy_pass 127.0.0.1:{echo}; access_log logs/ip.log u; }}
         server {{ listen unix:{{prefix}}/ux.sock udp; proxy_pass unix:{}; access_log logs/ux.log u; }}
         server {{ listen unix:{{prefix}}/deny.sock udp; deny unix:; proxy_pass 127.0.0.1:{echo}; access_log logs/deny.log u; }}
         server {{ listen 127.0.0.1:{{port0}}; return ready; }}",
        origin_path.display()
    );
    let mut srv = builder().whole(&stream_conf(&conf)).start();
    let client_path = dir.join("client.sock");
    let c = UnixDatagram::bind(&client_path).expect("bind the client");
    std::fs::set_permissions(&client_path, std::fs::Permissions::from_mode(0o666)).unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let ask = |sock: &str, msg: &[u8]| -> Vec<u8> {
        c.send_to(msg, srv.path(sock)).expect("send");
        let mut buf = [0u8; 4096];
        let (n, from) = c.recv_from(&mut buf).expect("an answer through the proxy");
        assert_eq!(from.as_pathname(), Some(srv.path(sock).as_path()), "answered from the listen socket");
        buf[..n].to_vec()
    };
    let me = format!("unix:{}", client_path.display());
    let mut checks = Checks::new();
    checks.run("the socket file is a socket with mode 0666", || {
        let m = std::fs::metadata(srv.path("ip.sock")).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o666);
    });
    checks.run("a UDP origin's answers come back to the client's name", || {
        let t = std::time::Instant::now();
        assert_eq!(ask("ip.sock", b"first"), b"first");
        assert_eq!(ask("ip.sock", b"second!"), b"second!");
        // proxy_responses 1: each datagram was a session that ended at its
        // answer, not at proxy_timeout's 30 s.
        let lines = wait_lines(&srv.path("logs/ip.log"), 2, LOG_WAIT);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(lines, [format!("{me} UDP 200 5 5 127.0.0.1:{echo}"), format!("{me} UDP 200 7 7 127.0.0.1:{echo}")]);
    });
    checks.run("a unix datagram origin", || {
        let up = format!("unix:{}", origin_path.display());
        if prog() == "nginx" {
            // nginx's origin socket is unbound: the origin gets the datagram
            // and cannot answer; the session ends at proxy_timeout.
            c.send_to(b"via-unix", srv.path("ux.sock")).expect("send");
            let deadline = std::time::Instant::now() + READ_TIMEOUT;
            while seen.lock().unwrap().is_empty() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        } else {
            assert_eq!(ask("ux.sock", b"via-unix"), b"U:via-unix");
            let lines = wait_lines(&srv.path("logs/ux.log"), 1, LOG_WAIT);
            assert_eq!(lines, [format!("{me} UDP 200 8 10 {up}")]);
        }
        assert_eq!(*seen.lock().unwrap(), [b"via-unix".to_vec()]);
    });
    checks.run("deny unix: refuses the session", || {
        c.send_to(b"no", srv.path("deny.sock")).expect("send");
        let lines = wait_lines(&srv.path("logs/deny.log"), 1, LOG_WAIT);
        assert_eq!(lines, [format!("{me} UDP 403 2 0 -")]);
        let err = wait_contains(&srv.path("logs/error.log"), "access forbidden by rule", LOG_WAIT);
        let line = line_with(&err, "access forbidden by rule");
        assert!(line.contains(&format!("client: {me}, server: unix:{}", srv.path("deny.sock").display())), "{line}");
    });
    if prog() == "sluice" {
        checks.run("a reload keeps the socket, quit removes its file", || {
            let before = std::fs::metadata(srv.path("ip.sock")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
            srv.signal("reload");
            srv.wait_error_log("reconfiguring");
            let after = std::fs::metadata(srv.path("ip.sock")).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
            assert_eq!(before.ok(), after.ok(), "the same socket file");
            assert_eq!(ask("ip.sock", b"again"), b"again");
        });
        checks.run("a crashed serving process's successor reads the same socket", || {
            let before = srv.serving_pid();
            let st = Command::new("kill").args(["-KILL", &before.to_string()]).status().expect("kill");
            assert!(st.success());
            // Sent while no serving process runs: it waits in the socket
            // the master process holds.
            assert_eq!(ask("ip.sock", b"after"), b"after");
            assert_ne!(srv.serving_pid(), before, "a new serving process");
        });
    }
    checks.finish();
    if prog() == "sluice" {
        srv.quit();
        assert!(!srv.path("ip.sock").exists(), "quit removes the socket file");
        assert!(!srv.path("ux.sock").exists());
    }
}
