//! Origins, clients and the configuration frame the stream tests share
//! (tests/stream.rs, tests/stream_logs.rs).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use super::*;

/// A TCP origin: answers each read with `TAG:` and the bytes read; records
/// the first bytes of each connection.
pub struct Origin {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

pub fn origin(tag: &'static str) -> Origin {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let port = l.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            let rec = rec.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut first = true;
                loop {
                    let n = match c.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    if first {
                        rec.lock().unwrap().push(buf[..n].to_vec());
                        first = false;
                    }
                    let mut out = format!("{tag}:").into_bytes();
                    out.extend_from_slice(&buf[..n]);
                    if c.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    Origin { port, seen }
}

pub fn dial(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s
}

/// Sends `msg` and reads what comes back (one read's worth, up to 4 KB).
pub fn ask(s: &mut TcpStream, msg: &str) -> String {
    s.write_all(msg.as_bytes()).expect("write");
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Everything the server sends until it closes.
pub fn read_all(port: u16) -> String {
    let mut s = dial(port);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn stream_conf(body: &str) -> String {
    // Debian's nginx has the stream module as a dynamic one.
    let load = if prog() == "nginx" { "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n" } else { "" };
    format!(
        "{load}daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\nstream {{\n{body}\n}}\n"
    )
}

/// An echo server for datagrams.
pub fn udp_echo() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind echo");
    let port = s.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 65536];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            let _ = s.send_to(&buf[..n], from);
        }
    });
    port
}

/// An origin that answers every connection with `reply` once it has read
/// something, then closes (what a `check type=http` probe and a client
/// both see).
pub fn fixed_origin(reply: &'static str) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let port = l.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 1024];
                if matches!(c.read(&mut buf), Ok(n) if n > 0) {
                    let _ = c.write_all(reply.as_bytes());
                }
            });
        }
    });
    port
}
