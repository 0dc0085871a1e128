//! Upgrade through the proxy (WebSocket's handshake): with nginx's usual
//! `map $http_upgrade $connection_upgrade` and `proxy_set_header Upgrade /
//! Connection`, the origin's 101 reaches the client and the connection
//! becomes a byte tunnel both ways until either end closes. The origin here
//! is a scripted one that answers 101 and then echoes what it gets, upper-
//! cased (so the test sees the bytes went through it).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;

/// Returns the port and the request heads the origin received.
fn echo_origin() -> (u16, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut b = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                }
                let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                seen.lock().unwrap().push(String::from_utf8_lossy(&buf[..end]).into_owned());
                let _ = c.write_all(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                      Sec-WebSocket-Accept: x\r\n\r\nhello from origin\n",
                );
                let mut rest = buf[end..].to_vec();
                loop {
                    if !rest.is_empty() {
                        if c.write_all(&rest.to_ascii_uppercase()).is_err() {
                            return;
                        }
                        rest.clear();
                    }
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => rest.extend_from_slice(&b[..n]),
                    }
                }
            });
        }
    });
    (port, heads)
}

#[test]
fn websocket_upgrade_is_tunnelled_both_ways() {
    let (origin, heads) = echo_origin();
    let s = builder()
        .http(&format!(
            "map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}\n\
             log_format up '$uri $status $bytes_sent $body_bytes_sent $sent_http_connection';\n\
             server {{\n\
               listen 127.0.0.1:{{port}};\n\
               access_log logs/up.log up;\n\
               location /noup {{\n\
                 proxy_pass http://127.0.0.1:{origin};\n\
                 proxy_http_version 1.1;\n\
                 proxy_set_header Connection upgrade;\n\
                 proxy_read_timeout 1s;\n\
               }}\n\
               location /ws {{\n\
                 proxy_pass http://127.0.0.1:{origin};\n\
                 proxy_http_version 1.1;\n\
                 proxy_set_header Upgrade $http_upgrade;\n\
                 proxy_set_header Connection $connection_upgrade;\n\
               }}\n\
             }}\n"
        ))
        .start();
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("hello from origin\n") {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&b[..n]);
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.starts_with("HTTP/1.1 101 Switching Protocols\r\n"), "{text}");
    let lower = text.to_ascii_lowercase();
    assert!(lower.contains("\r\nupgrade: websocket\r\n"), "{text}");
    assert!(lower.contains("\r\nconnection: upgrade\r\n"), "{text}");
    assert!(lower.contains("\r\nsec-websocket-accept: x\r\n"), "{text}");
    // What reached the origin: the upgrade headers from the map.
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(head.starts_with("get /ws http/1.1\r\n"), "{head}");
    assert!(head.contains("\r\nupgrade: websocket\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: upgrade\r\n"), "{head}");
    assert!(head.contains("\r\nsec-websocket-key: dghlihnhbxbszsbub25jzq==\r\n"), "{head}");
    // Both ways, several times.
    for msg in ["ping one", "second message", "x"] {
        c.write_all(msg.as_bytes()).unwrap();
        let mut echoed = Vec::new();
        while echoed.len() < msg.len() {
            let n = c.read(&mut b).unwrap();
            assert!(n > 0, "tunnel closed");
            echoed.extend_from_slice(&b[..n]);
        }
        assert_eq!(String::from_utf8_lossy(&echoed), msg.to_ascii_uppercase());
    }
    // The client closing ends the tunnel; the server stays up.
    drop(c);
    let r = request(s.port, "GET /nows HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 404);
    // The tunnel's line is written when it ends, with the bytes that went
    // through it to the client.
    let tunneled = "hello from origin\n".len() + "PING ONESECOND MESSAGEX".len();
    let log = wait_contains(&s.path("logs/up.log"), "/nows", Duration::from_secs(5));
    let line = line_with(&log, "/ws ");
    let f: Vec<&str> = line.split(' ').collect();
    assert_eq!((f[1], f[3], f[4]), ("101", tunneled.to_string().as_str(), "upgrade"), "{line}");
    let head: usize = f[2].parse::<usize>().unwrap() - tunneled;
    assert!((100..400).contains(&head), "{line}");
    assert!(line_with(&log, "/nows ").ends_with(" close"), "{log}");

    // A 101 to a client that asked for no upgrade: the head, no tunnel.
    let mut c = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET /noup HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 101 "), "{text}");
    assert!(!text.contains("hello from origin"), "{text}");
}

#[test]
fn map_without_upgrade_sends_connection_close() {
    let (origin, heads) = echo_origin();
    let _ = origin;
    let plain = builder()
        .http(
            "map $http_upgrade $connection_upgrade { default upgrade; '' close; }\n\
             map $uri $kind { default other; /a exact-a; ~^/re/(.*)$ regex; ~*\\.JPG$ image; }\n\
             server {\n\
               listen 127.0.0.1:{port};\n\
               location / { return 200 \"$connection_upgrade $kind\\n\"; }\n\
             }\n",
        )
        .start();
    for (uri, want) in [
        ("/a", "close exact-a\n"),
        ("/A", "close exact-a\n"),
        ("/re/x", "close regex\n"),
        ("/p.jpg", "close image\n"),
        ("/z", "close other\n"),
    ] {
        let r = request(plain.port, &format!("GET {uri} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
        assert_eq!((r.status, r.text().as_str()), (200, want), "{uri}");
    }
    let r = request(plain.port, "GET /a HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: close\r\n\r\n");
    assert_eq!(r.text(), "upgrade exact-a\n");
    assert!(heads.lock().unwrap().is_empty());
}

#[test]
fn map_entries_from_included_files() {
    // nginx allows `include` inside `map`; the files hold `key value;`
    // lines, and relative names resolve against the main config's
    // directory as everywhere else.
    let s = builder()
        .http(
            "map $http_upgrade $connection_upgrade { include maps/upgrade.map; }\n\
             map $uri $kind { default other; include maps/kinds/*.map; /inline inline; }\n\
             server {\n\
               listen 127.0.0.1:{port};\n\
               location / { return 200 \"$connection_upgrade $kind\\n\"; }\n\
             }\n",
        )
        .file("conf/maps/upgrade.map", "default upgrade;\n'' close;\n")
        .file("conf/maps/kinds/a.map", "# exact\n/a exact-a;\n")
        .file("conf/maps/kinds/b.map", "~^/re/(.*)$ regex;\n~*\\.JPG$ image;\n")
        .start();
    for (uri, upgrade, want) in [
        ("/a", false, "close exact-a\n"),
        ("/re/x", false, "close regex\n"),
        ("/p.jpg", true, "upgrade image\n"),
        ("/inline", false, "close inline\n"),
        ("/z", true, "upgrade other\n"),
    ] {
        let up = if upgrade { "Upgrade: websocket\r\n" } else { "" };
        let r = request(s.port, &format!("GET {uri} HTTP/1.1\r\nHost: t\r\n{up}Connection: close\r\n\r\n"));
        assert_eq!((r.status, r.text().as_str()), (200, want), "{uri}");
    }
    // A bad line in an included file is reported at its own file and line.
    s.write("conf/maps/kinds/b.map", "~^/re/ regex;\nthree words here;\n");
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "{}: [emerg] invalid number of the map parameters in {}:2",
            prog(),
            s.path("conf/maps/kinds/b.map").display()
        )),
        "{err}"
    );
}
