//! stream's virtual servers and hand-offs with real clients: `server_name`
//! picked by SNI on a TLS address (exact, wildcard, regex with a named
//! capture, `ssl_reject_handshake`) and by the `ssl_preread` name on a
//! plain one (`openssl s_client` to two TLS origins), `pass` handing
//! connections to HTTP listeners (plain and HTTPS, by the preread name),
//! and `proxy_pass` with a variable host name through `resolver` to a DNS
//! server in the test.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::tls::{self, KeyKind};
use common::*;

fn stream_conf(body: &str) -> String {
    format!("daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\nstream {{\n{body}\n}}\n")
}

/// What `s_client` printed after the handshake for `name` (`-quiet`: the
/// server's bytes only), or its error output when the handshake failed.
fn sni(srv: &TestServer, port: u16, name: &str) -> tls::SClient {
    let mut args = vec!["-quiet"];
    if !name.is_empty() {
        args.extend(["-servername", name]);
    } else {
        args.push("-noservername");
    }
    tls::s_client(srv, port, &args, "")
}

#[test]
fn server_name_picks_the_virtual_server_by_sni() {
    let ck = tls::issue(KeyKind::Ecdsa, &["localhost"], false);
    let conf = "ssl_certificate tls/s.crt; ssl_certificate_key tls/s.key;
         server { listen 127.0.0.1:{port0} ssl; server_name dflt; return \"default:$server_name\"; }
         server { listen 127.0.0.1:{port0}; server_name www.example.com; return \"exact:$server_name\"; }
         server { listen 127.0.0.1:{port0}; server_name *.wc.example.com; return \"front:$server_name\"; }
         server { listen 127.0.0.1:{port0}; server_name wc2.example.*; return \"back:$server_name\"; }
         server { listen 127.0.0.1:{port0}; server_name ~^(?P<sub>[a-z]+)\\.re\\.example\\.com$; return \"regex:$sub\"; }
         server { listen 127.0.0.1:{port0}; server_name .dot.example.com; return \"dot:$server_name\"; }
         server { listen 127.0.0.1:{port0}; server_name bad.example.com; ssl_reject_handshake on; return \"never\"; }";
    let srv = builder()
        .whole(&stream_conf(conf))
        .file("conf/tls/s.crt", &ck.cert)
        .file("conf/tls/s.key", &ck.key)
        .file("conf/tls/ca.crt", tls::ca_pem())
        .start();
    let p = srv.port;
    for (name, want) in [
        ("nothing.test", "default:dflt"),
        ("", "default:dflt"),
        ("www.example.com", "exact:www.example.com"),
        ("WWW.Example.COM", "exact:www.example.com"),
        ("a.b.wc.example.com", "front:*.wc.example.com"),
        ("wc2.example.net", "back:wc2.example.*"),
        ("blah.re.example.com", "regex:blah"),
        ("wc2.example.net", "back:wc2.example.*"),
        ("BLAH.RE.EXAMPLE.COM", "regex:blah"),
        ("dot.example.com", "dot:dot.example.com"),
        ("www.dot.example.com", "dot:dot.example.com"),
    ] {
        let r = sni(&srv, p, name);
        assert_eq!(r.stdout, want, "SNI {name:?}: {}", r.out);
    }
    let r = sni(&srv, p, "bad.example.com");
    assert!(r.stdout.is_empty() && r.out.contains("unrecognized name"), "{}", r.out);
    srv.wait_error_log("SSL handshake rejected (ssl_reject_handshake)");
}

/// A TLS origin (`openssl s_server -www`) with a certificate for `name`.
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
fn server_name_picks_the_virtual_server_by_the_preread_name() {
    let dir = temp_dir("stream-names");
    let a = tls_origin("a.test", &dir);
    let b = tls_origin("b.test", &dir);
    let conf = format!(
        "ssl_preread on;
         log_format n '$server_name $ssl_preread_server_name $upstream_addr';
         access_log logs/n.log n;
         server {{ listen 127.0.0.1:{{port0}}; proxy_pass 127.0.0.1:{}; }}
         server {{ listen 127.0.0.1:{{port0}}; server_name a.test; proxy_pass 127.0.0.1:{}; }}",
        b.port, a.port
    );
    let srv = builder().whole(&stream_conf(&conf)).file("conf/tls/ca.crt", tls::ca_pem()).start();
    let get = "GET / HTTP/1.0\r\n\r\n";
    let ra = tls::s_client(&srv, srv.port, &["-servername", "a.test"], get);
    assert_eq!(ra.subject(), Some("CN = a.test"), "{}", ra.out);
    let rb = tls::s_client(&srv, srv.port, &["-servername", "other.test"], get);
    assert_eq!(rb.subject(), Some("CN = b.test"), "{}", rb.out);
    let lines = wait_lines(&srv.path("logs/n.log"), 3, LOG_WAIT);
    assert!(lines.contains(&format!("a.test a.test 127.0.0.1:{}", a.port)), "{lines:?}");
    // The default server has no name: "" (logged as "-").
    assert!(lines.contains(&format!("- other.test 127.0.0.1:{}", b.port)), "{lines:?}");
}

#[test]
fn server_name_errors_speak_nginx() {
    let check = |body: &str| {
        let out = builder().whole(&stream_conf(body)).prepare().run(&["-t"]);
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = check("server { listen 127.0.0.1:1; server_name a/b; return x; }");
    assert!(!ok && err.contains("invalid server name or wildcard \"a/b\""), "{err}");
    let (ok, err) = check(
        "server { listen 127.0.0.1:1; server_name a.test; return x; }
         server { listen 127.0.0.1:1; server_name a.test; return y; }",
    );
    assert!(ok && err.contains("conflicting server name \"a.test\" on 127.0.0.1:1, ignored"), "{err}");
    let (ok, err) = check("server { listen 127.0.0.1:1; pass 127.0.0.1; }");
    assert!(!ok && err.contains("no port in upstream \"127.0.0.1\""), "{err}");
}

/// A plain HTTP request on a raw connection, the whole answer.
fn http_get(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn pass_hands_connections_to_http_listeners() {
    let ck = tls::issue(KeyKind::Ecdsa, &["h.test"], false);
    // port0: plain pass; port1: by the preread name, to plain or TLS HTTP;
    // port2: HTTP; port3: HTTPS; port4: a variable address.
    let conf = "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {}
        stream {
            log_format p $status;
            access_log logs/p.log p;
            server { listen 127.0.0.1:{port0}; pass 127.0.0.1:{port2}; }
            server { listen 127.0.0.1:{port1}; ssl_preread on; pass 127.0.0.1:{port2}; }
            server { listen 127.0.0.1:{port1}; server_name h.test; pass 127.0.0.1:{port3}; }
            map $server_port $to { default 127.0.0.1:{port2}; }
            server { listen 127.0.0.1:{port4}; pass $to; }
            server { listen 127.0.0.1:{port5}; pass 127.0.0.1:1; }
            server { listen 127.0.0.1:{port6} ssl; ssl_certificate tls/h.crt; ssl_certificate_key tls/h.key;
                     ssl_preread on; pass 127.0.0.1:{port7}; }
            server { listen 127.0.0.1:{port6} ssl; server_name h.test; pass 127.0.0.1:{port7}; }
        }
        http {
            access_log off;
            server { listen 127.0.0.1:{port2}; return 200 \"plain $remote_addr $server_port\\n\"; }
            server { listen 127.0.0.1:{port3} ssl; ssl_certificate tls/h.crt; ssl_certificate_key tls/h.key;
                     return 200 \"tls $ssl_server_name $server_port\\n\"; }
            server { listen 127.0.0.1:{port7};
                     return 200 \"handed $scheme $https $ssl_server_name $server_port\\n\"; }
        }";
    let srv = builder()
        .whole(conf)
        .ports(8)
        .file("conf/tls/h.crt", &ck.cert)
        .file("conf/tls/h.key", &ck.key)
        .file("conf/tls/ca.crt", tls::ca_pem())
        .start();
    let [p0, p1, p2, p3, p4, p5] = [0, 1, 2, 3, 4, 5].map(|i| srv.ports[i]);
    let r = http_get(p0);
    assert!(r.starts_with("HTTP/1.1 200") && r.ends_with(&format!("plain 127.0.0.1 {p2}\n")), "{r}");
    // Not TLS: the preread finds no name, the default server passes the
    // bytes it peeked at, unread, to plain HTTP.
    let r = http_get(p1);
    assert!(r.ends_with(&format!("plain 127.0.0.1 {p2}\n")), "{r}");
    let r = tls::s_client(&srv, p1, &["-servername", "h.test", "-quiet"], &tls::get_close("h.test", "/"));
    assert!(r.stdout.ends_with(&format!("tls h.test {p3}\n")), "{}", r.out);
    let r = http_get(p4);
    assert!(r.ends_with(&format!("plain 127.0.0.1 {p2}\n")), "{r}");
    // TLS terminated by the stream server, the connection passed with its
    // handshake done: HTTP serves it as HTTPS (nginx passes the SSL state).
    let p7 = srv.ports[7];
    let r = tls::s_client(&srv, srv.ports[6], &["-servername", "h.test", "-quiet"], &tls::get_close("h.test", "/"));
    assert!(r.stdout.ends_with(&format!("handed https on h.test {p7}\n")), "{}", r.out);
    // The default server prereads the decrypted bytes: they cannot go on.
    let r = tls::s_client(&srv, srv.ports[6], &["-quiet"], &tls::get_close("h.test", "/"));
    assert!(!r.stdout.contains("200"), "{}", r.out);
    srv.wait_error_log("cannot pass connection with preread data");
    // No listener there: 500, logged.
    assert_eq!(http_get(p5), "");
    srv.wait_error_log("port 127.0.0.1:1 not found while passing connection");
    // Handed-off sessions are the listener's: only refused ones are logged
    // (ours, and the harness's readiness probe of the last port), and the
    // harness's empty probe of the preread port, which ends in preread
    // with 200 as in nginx.
    let lines = wait_lines(&srv.path("logs/p.log"), 1, LOG_WAIT);
    std::thread::sleep(Duration::from_millis(1500));
    let lines =
        std::fs::read_to_string(srv.path("logs/p.log")).map_or(lines, |t| t.lines().map(str::to_string).collect());
    assert!(lines.iter().any(|l| l == "500") && lines.iter().all(|l| l == "500" || l == "200"), "{lines:?}");
    assert!(lines.iter().filter(|l| *l == "200").count() <= 1, "{lines:?}");
}

/// A DNS server in the test: `A` questions for a name with "app" get
/// 127.0.0.1; others get NXDOMAIN.
fn dns_server() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind dns");
    let port = s.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            let Ok((len, from)) = s.recv_from(&mut buf) else { return };
            let q = &buf[..len];
            // The question's name ends at its zero label; then type, class.
            let end = 12 + q[12..].iter().position(|&b| b == 0).unwrap_or(0) + 1;
            let qtype = u16::from_be_bytes([q[end], q[end + 1]]);
            let known = String::from_utf8_lossy(&q[12..end]).contains("app");
            let answer = known && qtype == 1;
            let rcode = if known { 0 } else { 3 };
            let mut r = vec![q[0], q[1], 0x81, 0x80 | rcode, 0, 1, 0, u8::from(answer), 0, 0, 0, 0];
            r.extend_from_slice(&q[12..end + 4]);
            if answer {
                r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
            }
            let _ = s.send_to(&r, from);
        }
    });
    port
}

#[test]
fn proxy_pass_resolves_a_variable_host_name() {
    let dns = dns_server();
    let origin = TcpListener::bind("127.0.0.1:0").unwrap();
    let op = origin.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in origin.incoming() {
            let Ok(mut c) = c else { continue };
            let _ = c.write_all(b"from origin\n");
        }
    });
    let conf = format!(
        "resolver 127.0.0.1:{dns};
         log_format r '$status $upstream_addr';
         access_log logs/r.log r;
         map $server_port $h {{ {{port0}} app.test:{op}; {{port1}} nx.test:{op}; default app.test; }}
         server {{ listen 127.0.0.1:{{port0}}; listen 127.0.0.1:{{port1}}; listen 127.0.0.1:{{port2}}; proxy_pass $h; }}"
    );
    let srv = builder().whole(&stream_conf(&conf)).ports(3).start();
    let read = |port: u16| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    };
    assert_eq!(read(srv.ports[0]), "from origin\n");
    assert_eq!(read(srv.ports[1]), "");
    srv.wait_error_log("nx.test could not be resolved (3: Host not found)");
    assert_eq!(read(srv.ports[2]), "");
    srv.wait_error_log("no port in upstream \"app.test\"");
    let lines = wait_lines(&srv.path("logs/r.log"), 3, LOG_WAIT);
    assert!(lines.contains(&format!("200 127.0.0.1:{op}")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("502 ")), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("500 ")), "{lines:?}");
}
