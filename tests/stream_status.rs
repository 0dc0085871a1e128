//! Stream and datagram sessions in `sluice_status`: a TCP proxy with a real
//! origin and a refusing peer, a UDP session, a denied server; the JSON's
//! `stream.server_zones` and `stream.upstreams` (connections, statuses,
//! bytes exactly as sent, the failed peer's fails and unavail) and the
//! Prometheus page. Upstreams with `zone` under two workers: every
//! peer's counts, bytes and times for TCP and UDP sessions, shared by both
//! workers. Then `proxy_pass unix:` from a `listen ... udp` server
//! to a unix datagram origin, whose replies come back (sluice binds its
//! socket; nginx 1.22 does not, so in nginx mode only the origin's receipt
//! is checked). The status tests are sluice-only (NGINX Plus's API is not
//! in nginx).

mod common;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};

use common::status::{n, status, status_when};
use common::*;
use serde_json::Value;

/// A UDP origin answering each datagram with it and `!`.
fn udp_origin() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind udp origin");
    let port = s.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            let _ = s.send_to(&[&buf[..n], b"!"].concat(), from);
        }
    });
    port
}

#[test]
fn stream_sessions_and_peers_in_the_status_json() {
    let origin = common::stream::origin("O").port;
    let dgram = udp_origin();
    let dead = free_port();
    let udp = free_port();
    let conf = format!(
        "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}
         stream {{
             upstream back {{ server 127.0.0.1:{dead} max_fails=1 fail_timeout=60s; server 127.0.0.1:{origin}; }}
             server {{ listen 127.0.0.1:{{port0}}; status_zone tcpz; proxy_pass back; proxy_connect_timeout 2s; }}
             server {{ listen 127.0.0.1:{udp} udp; proxy_pass 127.0.0.1:{dgram}; proxy_responses 1; proxy_timeout 5s; }}
             server {{ listen 127.0.0.1:{{port2}}; status_zone denied; deny all; return x; }}
         }}
         http {{ server {{ listen 127.0.0.1:{{port1}}; location /status {{ sluice_status; }} }} }}"
    );
    let srv = builder().server_is_nginx(false).whole(&conf).ports(3).start();
    let sp = srv.ports[1];
    let udp_zone = format!("127.0.0.1:{udp} udp");
    // The harness's readiness probes were sessions too: counted from here.
    let idle = |j: &Value| {
        let z = &j["stream"]["server_zones"];
        n(&z["tcpz"]["processing"]) == 0 && n(&z["denied"]["processing"]) == 0
    };
    // A probe's connection may still wait in the accept queue when the
    // zones look idle: the counts must be there and hold still a moment.
    let totals = |j: &Value| {
        let z = &j["stream"]["server_zones"];
        (n(&z["tcpz"]["sessions"]["total"]), n(&z["denied"]["sessions"]["total"]))
    };
    let mut before = status_when(sp, "probes done", |j| idle(j) && totals(j).0 >= 1 && totals(j).1 >= 1);
    loop {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let again = status_when(sp, "probes done", idle);
        if totals(&again) == totals(&before) {
            break;
        }
        before = again;
    }
    let zone = |j: &Value, z: &str, k: &str| j["stream"]["server_zones"][z][k].clone();
    for i in 0..3 {
        let mut c = TcpStream::connect(("127.0.0.1", srv.ports[0])).expect("connect");
        c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let msg = format!("hello{i}");
        c.write_all(msg.as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        let got = c.read(&mut buf).expect("the origin's answer");
        assert_eq!(&buf[..got], format!("O:{msg}").as_bytes());
        // While open: one session processing.
        if i == 0 {
            let j = status(sp);
            assert_eq!(n(&zone(&j, "tcpz", "processing")), 1, "{j:#}");
            let peers = &j["stream"]["upstreams"]["back"]["peers"];
            assert_eq!(n(&peers[1]["active"]), 1, "{j:#}");
        }
    }
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    c.send_to(b"abc", ("127.0.0.1", udp)).unwrap();
    let mut buf = [0u8; 64];
    let (got, _) = c.recv_from(&mut buf).expect("the udp answer");
    assert_eq!(&buf[..got], b"abc!");
    let mut d = TcpStream::connect(("127.0.0.1", srv.ports[2])).unwrap();
    d.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    assert_eq!(d.read(&mut buf).unwrap_or(0), 0, "denied: closed");

    let after = status_when(sp, "sessions ended", |j| {
        idle(j)
            && n(&zone(j, "tcpz", "sessions")["total"]) == n(&zone(&before, "tcpz", "sessions")["total"]) + 3
            && j["stream"]["server_zones"][udp_zone.as_str()]["sessions"]["total"] == 1
            && n(&zone(j, "denied", "sessions")["4xx"]) == n(&zone(&before, "denied", "sessions")["4xx"]) + 1
    });
    let delta = |z: &str, path: &[&str]| {
        let get =
            |j: &Value| path.iter().fold(zone(j, z, path[0]), |v, k| if *k == path[0] { v } else { v[*k].clone() });
        n(&get(&after)) - get(&before).as_u64().unwrap_or(0)
    };
    // Three sessions of "helloN" (6 bytes) answered "O:helloN" (8 bytes).
    assert_eq!(delta("tcpz", &["connections"]), 3);
    assert_eq!(delta("tcpz", &["sessions", "2xx"]), 3);
    assert_eq!(delta("tcpz", &["sessions", "5xx"]), 0);
    assert_eq!(delta("tcpz", &["received"]), 18);
    assert_eq!(delta("tcpz", &["sent"]), 24);
    let u = &after["stream"]["server_zones"][udp_zone.as_str()];
    assert_eq!((n(&u["connections"]), n(&u["received"]), n(&u["sent"]), n(&u["discarded"])), (1, 3, 4, 0), "{u}");
    assert_eq!(n(&u["sessions"]["2xx"]), 1, "{u}");
    assert_eq!(delta("denied", &["sessions", "4xx"]), 1);
    assert_eq!(delta("denied", &["sent"]), 0);

    // The refusing peer failed once (whichever session picked it first)
    // and is out for fail_timeout; the live one took every session since.
    let peers = &after["stream"]["upstreams"]["back"]["peers"];
    let (dead_p, live) = (&peers[0], &peers[1]);
    assert_eq!(dead_p["server"], format!("127.0.0.1:{dead}"));
    assert_eq!((n(&dead_p["fails"]), n(&dead_p["unavail"]), n(&dead_p["connections"])), (1, 1, 1), "{dead_p}");
    assert_eq!(dead_p["state"], "unavail", "{dead_p}");
    assert_eq!((n(&dead_p["sent"]), n(&dead_p["received"])), (0, 0));
    let before_live = &before["stream"]["upstreams"]["back"]["peers"][1];
    let d = |k: &str| n(&live[k]) - n(&before_live[k]);
    assert_eq!((d("connections"), d("sent"), d("received"), d("fails")), (3, 18, 24, 0), "{live}");
    assert_eq!((live["state"].as_str(), n(&live["active"])), (Some("up"), 0));
    assert!(live["connect_time"].is_u64() && live["response_time"].is_u64(), "{live}");
    // An upstream a proxy_pass made of one address is not listed.
    assert_eq!(after["stream"]["upstreams"].as_object().map(|o| o.len()), Some(1), "{after:#}");

    // The Prometheus page has the same numbers.
    let r = request(sp, "GET /status?format=prometheus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let text = r.text();
    let total = n(&zone(&after, "tcpz", "sessions")["2xx"]);
    assert!(text.contains(&format!("sluice_stream_sessions_total{{zone=\"tcpz\",code=\"2xx\"}} {total}\n")), "{text}");
    let line = format!("sluice_stream_upstream_peer_fails_total{{upstream=\"back\",peer=\"127.0.0.1:{dead}\"}} 1\n");
    assert!(text.contains(&line), "{text}");
    assert!(text.contains("sluice_mail_sessions_total{protocol=\"imap\"} 0\n"), "{text}");
}

/// The worker threads (`PID#TID` of the error log) whose `info` lines
/// name a session to `to` (`client ... connected to 127.0.0.1:PORT`).
fn workers_of(log: &str, to: &str) -> std::collections::BTreeSet<String> {
    log.lines()
        .filter(|l| l.contains(" [info] ") && l.contains("client ") && l.ends_with(&format!("connected to {to}")))
        .filter_map(|l| l.split(" [info] ").nth(1)?.split(':').next().map(String::from))
        .collect()
}

/// Upstreams with `zone` report every peer's counts as NGINX Plus's
/// `stream.upstreams` does, for TCP and UDP sessions, with two workers
/// counting into the zone's shared peers: connections, bytes exactly as
/// the clients sent and read them, fails and unavail of a refusing peer
/// (and its state), the average times, and `selected`.
#[test]
fn zone_peers_count_sessions_of_both_workers() {
    let origin = common::stream::origin("O").port;
    let dgram = udp_origin();
    let dead = free_port();
    let (tcp, udp) = (free_port(), free_port());
    let conf = format!(
        "daemon off;\npid logs/sluice.pid;\nworker_processes 2;\nerror_log logs/error.log info;\nevents {{}}
         stream {{
             upstream zt {{ zone zt 64k; server 127.0.0.1:{dead} max_fails=1 fail_timeout=60s; server 127.0.0.1:{origin}; }}
             upstream zu {{ zone zu 64k; server 127.0.0.1:{dgram}; }}
             server {{ listen 127.0.0.1:{{port0}}; return ready; }}
             server {{ listen 127.0.0.1:{tcp} reuseport; proxy_pass zt; proxy_connect_timeout 2s; }}
             server {{ listen 127.0.0.1:{udp} udp reuseport; proxy_pass zu; proxy_responses 1; proxy_timeout 5s; }}
         }}
         http {{ server {{ listen 127.0.0.1:{{port1}}; location /status {{ sluice_status; }} }} }}"
    );
    let srv = builder().server_is_nginx(false).whole(&conf).ports(2).start();
    let sp = srv.ports[1];
    let peers = |j: &Value, u: &str| j["stream"]["upstreams"][u]["peers"].clone();
    // The harness's readiness probes go to a `return` server: nothing was
    // proxied yet.
    let before = status(sp);
    for (u, i) in [("zt", 0), ("zt", 1), ("zu", 0)] {
        let p = &peers(&before, u)[i];
        assert_eq!((n(&p["connections"]), n(&p["sent"])), (0, 0), "{p}");
        assert!(p["selected"].is_null() && p["connect_time"].is_null(), "{p}");
    }
    // Twenty connections open at once, so both workers' sockets get some;
    // each sends a message of its own length and reads the answer.
    let (mut sent, mut received) = (0u64, 0u64);
    let mut conns = Vec::new();
    for i in 0..20 {
        let mut c = TcpStream::connect(("127.0.0.1", tcp)).expect("connect");
        c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let msg = format!("hello{}", "x".repeat(i));
        c.write_all(msg.as_bytes()).unwrap();
        conns.push((c, msg));
    }
    for (c, msg) in &mut conns {
        let mut buf = [0u8; 64];
        let got = c.read(&mut buf).expect("the origin's answer");
        assert_eq!(&buf[..got], format!("O:{msg}").as_bytes());
        sent += msg.len() as u64;
        received += got as u64;
    }
    // While they are open: every one of them active on the live peer.
    let j = status(sp);
    assert_eq!(n(&peers(&j, "zt")[1]["active"]), 20, "{j:#}");
    drop(conns);
    // Datagram sessions from twenty client sockets.
    let (mut usent, mut ureceived) = (0u64, 0u64);
    for i in 0..20 {
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let msg = format!("d{}", "y".repeat(i));
        c.send_to(msg.as_bytes(), ("127.0.0.1", udp)).unwrap();
        let mut buf = [0u8; 64];
        let (got, _) = c.recv_from(&mut buf).expect("the udp answer");
        assert_eq!(&buf[..got], format!("{msg}!").as_bytes());
        usent += msg.len() as u64;
        ureceived += got as u64;
    }
    let after = status_when(sp, "sessions ended", |j| {
        let (t, u) = (peers(j, "zt"), peers(j, "zu"));
        n(&t[1]["active"]) == 0
            && n(&t[1]["connections"]) == 20
            && n(&u[0]["active"]) == 0
            && n(&u[0]["connections"]) == 20
            && u[0]["response_time"].is_u64()
            && n(&t[1]["sent"]) == sent
    });
    // Both workers had sessions of each kind.
    let log = srv.error_log();
    assert!(workers_of(&log, &format!("127.0.0.1:{tcp}")).len() >= 2, "{log}");
    assert!(workers_of(&log, &format!("127.0.0.1:{udp}")).len() >= 2, "{log}");

    let (t, u) = (peers(&after, "zt"), peers(&after, "zu"));
    let (dead_p, live) = (&t[0], &t[1]);
    assert_eq!(dead_p["server"], format!("127.0.0.1:{dead}"));
    // Each worker's round robin starts with it, and sessions already on
    // their way to it when the first failure put it out fail too; then it
    // is out for every worker, and each failure counted once.
    let fails = n(&dead_p["fails"]);
    assert!((1..=20).contains(&fails), "{dead_p}");
    assert_eq!((n(&dead_p["connections"]), n(&dead_p["unavail"])), (fails, fails), "{dead_p}");
    assert_eq!((dead_p["state"].as_str(), n(&dead_p["sent"]), n(&dead_p["received"])), (Some("unavail"), 0, 0));
    assert!(dead_p["connect_time"].is_null() && dead_p["response_time"].is_null(), "{dead_p}");
    let counts = ["connections", "sent", "received", "fails"].map(|k| n(&live[k]));
    assert_eq!(counts, [20, sent, received, 0], "{live}");
    assert_eq!((live["state"].as_str(), n(&live["active"]), n(&live["unavail"])), (Some("up"), 0, 0));
    for k in ["connect_time", "first_byte_time", "response_time"] {
        assert!(live[k].is_u64(), "{k}: {live}");
    }
    let up = &u[0];
    assert_eq!(up["server"], format!("127.0.0.1:{dgram}"));
    let counts = ["connections", "sent", "received", "fails", "unavail", "active"].map(|k| n(&up[k]));
    assert_eq!(counts, [20, usent, ureceived, 0, 0, 0], "{up}");
    assert_eq!(up["state"], "up");
    for k in ["connect_time", "first_byte_time", "response_time"] {
        assert!(up[k].is_u64(), "{k}: {up}");
    }
    // `selected`: Plus's UTC time, within the last minute of the scrape.
    for p in [live, up] {
        let sel = p["selected"].as_str().unwrap_or_else(|| panic!("selected: {p}"));
        let ms = plus_time_ms(sel).unwrap_or_else(|| panic!("not Plus's time: {sel}"));
        let now = n(&after["time_ms"]);
        assert!(ms <= now && now - ms < 60_000, "{sel} vs {now}");
    }
    // The Prometheus page has the zone's numbers too.
    let r = request(sp, "GET /status?format=prometheus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let text = r.text();
    let line =
        format!("sluice_stream_upstream_peer_sent_bytes_total{{upstream=\"zu\",peer=\"127.0.0.1:{dgram}\"}} {usent}\n");
    assert!(text.contains(&line), "{text}");
}

/// `2026-11-30T16:18:11.123Z` as unix ms.
fn plus_time_ms(s: &str) -> Option<u64> {
    let (date, time) = s.strip_suffix('Z')?.split_once('T')?;
    let d: Vec<i64> = date.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let (hms, frac) = time.split_once('.')?;
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 || frac.len() != 3 {
        return None;
    }
    let secs = civil_to_epoch(d[0], d[1], d[2], t[0], t[1], t[2]);
    Some(secs as u64 * 1000 + frac.parse::<u64>().ok()?)
}

/// `status_zone` in a stream server takes one non-empty name, once.
#[test]
fn stream_status_zone_is_checked() {
    for (body, msg) in [
        (
            "server { listen 127.0.0.1:1; status_zone a; status_zone b; return x; }",
            "\"status_zone\" directive is duplicate",
        ),
        ("server { listen 127.0.0.1:1; status_zone \"\"; return x; }", "empty status_zone name"),
        ("status_zone a; server { listen 127.0.0.1:1; return x; }", "status_zone"),
    ] {
        let conf = format!("events {{}}\nstream {{ {body} }}\n");
        let srv = builder().server_is_nginx(false).whole(&conf).prepare();
        let out = srv.run(&["-t"]);
        let err = stderr_of(&out);
        assert!(!out.status.success() && err.contains(msg), "{body}: {err}");
    }
}

/// `proxy_pass unix:PATH` in a `listen ... udp` server: datagrams reach a
/// unix datagram origin, and (sluice) its replies come back to the client.
#[test]
fn udp_to_a_unix_datagram_origin() {
    let dir = temp_dir("unix-dgram");
    let path = dir.join("origin.sock");
    let origin = std::os::unix::net::UnixDatagram::bind(&path).expect("bind unix origin");
    origin.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    // Workers run as `user` (nobody when the tests run as root).
    use std::os::unix::fs::PermissionsExt;
    for p in [&dir, &path] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let udp = free_port();
    let load = if prog() == "nginx" { "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n" } else { "" };
    let conf = format!(
        "{load}daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}
         stream {{
             server {{ listen 127.0.0.1:{udp} udp; proxy_pass unix:{p}; proxy_responses 1; proxy_timeout 3s; }}
             server {{ listen 127.0.0.1:{{port0}}; return ready; }}
         }}",
        p = path.display()
    );
    let _srv = builder().whole(&conf).start();
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    for msg in [&b"one"[..], b"two"] {
        c.send_to(msg, ("127.0.0.1", udp)).unwrap();
        let mut buf = [0u8; 64];
        let (got, from) = origin.recv_from(&mut buf).expect("the datagram at the origin");
        assert_eq!(&buf[..got], msg);
        if prog() == "nginx" {
            // nginx leaves its socket unbound: nowhere to answer.
            continue;
        }
        assert!(from.as_pathname().is_none(), "an abstract (autobound) name, nothing on disk: {from:?}");
        origin.send_to_addr(&[msg, b"!"].concat(), &from).expect("the reply");
        let (got, _) = c.recv_from(&mut buf).expect("the reply through the proxy");
        assert_eq!(&buf[..got], [msg, b"!"].concat().as_slice());
    }
}
