//! The realip module (`set_real_ip_from`, `real_ip_header`,
//! `real_ip_recursive`) and `listen ... proxy_protocol` (PROXY protocol v1
//! and v2, plain and TLS), as a balancer in front of the server uses them.
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use common::tls::*;
use common::*;

const SHOW: &str = r#"return 200 "addr=$remote_addr port=$remote_port conn=$realip_remote_addr\n";"#;

fn body(r: &Response) -> String {
    r.text().trim_end().to_string()
}

fn get_with(port: u16, path: &str, headers: &[&str]) -> Response {
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    request(port, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n"))
}

#[test]
fn headers_from_trusted_addresses_replace_the_client() {
    let s = builder()
        .http(&format!(
            r#"log_format real '$remote_addr|$realip_remote_addr|$request_uri';
            access_log logs/access.log real;
            server {{
                listen 127.0.0.1:{{port0}};
                set_real_ip_from 127.0.0.0/8;
                location / {{ {SHOW} }}
                location /loc/ {{ set_real_ip_from 10.0.0.0/8; {SHOW} }}
            }}
            server {{
                listen 127.0.0.1:{{port1}};
                set_real_ip_from 127.0.0.1;
                set_real_ip_from 192.0.2.0/24;
                real_ip_header X-Forwarded-For;
                location / {{ {SHOW} }}
            }}
            server {{
                listen 127.0.0.1:{{port4}};
                set_real_ip_from 127.0.0.1;
                set_real_ip_from 192.0.2.0/24;
                real_ip_header X-Forwarded-For;
                real_ip_recursive on;
                location / {{ {SHOW} }}
            }}
            server {{
                listen 127.0.0.1:{{port2}};
                set_real_ip_from 127.0.0.1;
                real_ip_header CF-Connecting-IP;
                location / {{ {SHOW} }}
            }}
            server {{
                listen 127.0.0.1:{{port3}};
                set_real_ip_from 10.0.0.0/8;
                location / {{ {SHOW} }}
            }}"#
        ))
        .ports(5)
        .start();
    let (p0, p1, p2, p3, p4) = (s.ports[0], s.ports[1], s.ports[2], s.ports[3], s.ports[4]);
    // X-Real-IP by default; a port in it becomes $remote_port.
    assert_eq!(body(&get_with(p0, "/", &["X-Real-IP: 198.51.100.7"])), "addr=198.51.100.7 port= conn=127.0.0.1");
    assert_eq!(
        body(&get_with(p0, "/", &["X-Real-IP: 198.51.100.7:4321"])),
        "addr=198.51.100.7 port=4321 conn=127.0.0.1"
    );
    assert_eq!(body(&get_with(p0, "/", &["X-Real-IP: [2001:db8::5]:80"])), "addr=2001:db8::5 port=80 conn=127.0.0.1");
    // Garbage or no header: the connection's address.
    let r = get_with(p0, "/", &["X-Real-IP: not-an-address"]);
    assert!(body(&r).starts_with("addr=127.0.0.1 port="), "{}", body(&r));
    assert!(body(&get_with(p0, "/", &[])).starts_with("addr=127.0.0.1 port="));
    // Trusting only 10/8: the header is ignored.
    let r = get_with(p3, "/", &["X-Real-IP: 198.51.100.7"]);
    assert!(body(&r).starts_with("addr=127.0.0.1 "), "{}", body(&r));
    // The server's setting applied as soon as the head was read (nginx's
    // post-read phase), before the location's could.
    assert!(body(&get_with(p0, "/loc/", &["X-Real-IP: 198.51.100.7"])).starts_with("addr=198.51.100.7 "));

    // X-Forwarded-For: the last address, or with real_ip_recursive the
    // first untrusted one from the right, across repeated fields.
    let xff = ["X-Forwarded-For: 203.0.113.9, 192.0.2.10"];
    assert_eq!(body(&get_with(p1, "/", &xff)), "addr=192.0.2.10 port= conn=127.0.0.1");
    assert_eq!(body(&get_with(p4, "/", &xff)), "addr=203.0.113.9 port= conn=127.0.0.1");
    let two = ["X-Forwarded-For: 203.0.113.9", "X-Forwarded-For: 192.0.2.10, 192.0.2.11"];
    assert_eq!(body(&get_with(p4, "/", &two)), "addr=203.0.113.9 port= conn=127.0.0.1");
    assert_eq!(body(&get_with(p1, "/", &two)), "addr=192.0.2.11 port= conn=127.0.0.1");
    // X-Real-IP is not looked at when X-Forwarded-For is the header.
    assert!(body(&get_with(p1, "/", &["X-Real-IP: 198.51.100.7"])).starts_with("addr=127.0.0.1 "));
    // Any other header.
    assert_eq!(
        body(&get_with(p2, "/", &["CF-Connecting-IP: 198.51.100.99"])),
        "addr=198.51.100.99 port= conn=127.0.0.1"
    );

    // The access log shows the replaced address and the connection's.
    let _ = get_with(p0, "/logged", &["X-Real-IP: 198.51.100.42"]);
    let lines = s.wait_access_lines(14);
    assert!(lines.iter().any(|l| l == "198.51.100.42|127.0.0.1|/logged"), "{lines:?}");
}

#[test]
fn a_location_setting_applies_after_rewrites() {
    // In a location, realip runs in the preaccess phase: after `return`
    // (rewrite phase), before the content and the header filters.
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location /static/ {
                    set_real_ip_from 127.0.0.1;
                    add_header X-Addr $remote_addr;
                }
                location /early/ {
                    set_real_ip_from 127.0.0.1;
                    return 200 "$remote_addr\n";
                }
            }"#,
        )
        .file("html/static/f.txt", "file\n")
        .start();
    let r = get_with(s.port, "/static/f.txt", &["X-Real-IP: 198.51.100.3"]);
    assert_eq!((r.status, r.header("X-Addr")), (200, Some("198.51.100.3")), "{}", r.head);
    let r = get_with(s.port, "/early/", &["X-Real-IP: 198.51.100.3"]);
    assert_eq!(body(&r), "127.0.0.1");
}

const PP_SHOW: &str = r#"return 200 "pp=$proxy_protocol_addr:$proxy_protocol_port server=$proxy_protocol_server_addr:$proxy_protocol_server_port addr=$remote_addr:$remote_port\n";"#;

fn pp_server() -> TestServer {
    // $proxy_protocol_tlv_* came with nginx 1.23.2 (Debian 12 has 1.22).
    let tlv = if nginx_mode() {
        ""
    } else {
        r#"location /tlv { return 200 "authority=$proxy_protocol_tlv_authority 0x02=$proxy_protocol_tlv_0x02 alpn=$proxy_protocol_tlv_alpn"; }"#
    };
    builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port0}} proxy_protocol;
                location / {{ {PP_SHOW} }}
                {tlv}
            }}
            server {{
                listen 127.0.0.1:{{port1}} proxy_protocol;
                set_real_ip_from 127.0.0.1;
                real_ip_header proxy_protocol;
                location / {{ {PP_SHOW} }}
            }}"#
        ))
        .ports(2)
        .start()
}

fn v2_header(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut h = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    h.extend_from_slice(&[0x21, 0x11, 0, 12 + 7]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    // A TLV (PP2_TYPE_AUTHORITY "a.tx").
    h.extend_from_slice(&[0x02, 0, 4, b'a', b'.', b't', b'x']);
    h
}

const REQ: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

#[test]
fn proxy_protocol_v1_and_v2_name_the_client() {
    let s = pp_server();
    let mut c = Conn::connect(s.ports[0]);
    c.send(b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n");
    c.send(REQ);
    let r = body(&c.read_response());
    assert!(r.starts_with("pp=192.0.2.1:56324 server=198.51.100.2:443 addr=127.0.0.1:"), "{r}");
    // Later requests on the connection need (and may have) no header.
    c.send(REQ);
    assert!(body(&c.read_response()).starts_with("pp=192.0.2.1:56324 "));

    let mut c = Conn::connect(s.ports[0]);
    c.send([v2_header([10, 1, 2, 3], [10, 9, 9, 9], 4000, 8443), REQ.to_vec()].concat());
    assert!(body(&c.read_response()).starts_with("pp=10.1.2.3:4000 server=10.9.9.9:8443 addr=127.0.0.1:"));
    if !nginx_mode() {
        let mut c = Conn::connect(s.ports[0]);
        c.send(
            [v2_header([10, 1, 2, 3], [10, 9, 9, 9], 4000, 8443), b"GET /tlv HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()]
                .concat(),
        );
        assert_eq!(body(&c.read_response()), "authority=a.tx 0x02=a.tx alpn=");
    }

    // The header split across packets.
    let mut c = Conn::connect(s.ports[0]);
    c.send(b"PROXY TCP6 2001:db8::1 ");
    std::thread::sleep(std::time::Duration::from_millis(50));
    c.send([&b"::1 1234 80\r\n"[..], REQ].concat());
    let r = c.try_read_response("GET");
    // nginx parses only its first read and closes here; sluice waits.
    if !nginx_mode() {
        assert!(body(&r.expect("answered")).starts_with("pp=2001:db8::1:1234 server=::1:80 "));
    }

    // UNKNOWN and v2 LOCAL: accepted, no address.
    let mut c = Conn::connect(s.ports[0]);
    c.send([&b"PROXY UNKNOWN\r\n"[..], REQ].concat());
    assert!(body(&c.read_response()).starts_with("pp=: server=: addr=127.0.0.1:"));

    // real_ip_header proxy_protocol: the balancer's client is the client.
    let mut c = Conn::connect(s.ports[1]);
    c.send([&b"PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"[..], REQ].concat());
    assert_eq!(body(&c.read_response()), "pp=192.0.2.1:56324 server=198.51.100.2:443 addr=192.0.2.1:56324");
}

#[test]
fn a_broken_header_closes_the_connection_with_a_log_line() {
    let s = pp_server();
    let mut c = Conn::connect(s.ports[0]);
    c.send(REQ);
    assert!(c.closed_within(std::time::Duration::from_secs(5)));
    let log = s.wait_error_log("broken header");
    assert!(log.contains("broken header: \"GET / HTTP/1.1"), "{log}");
    assert!(log.contains("while reading PROXY protocol, client: 127.0.0.1"), "{log}");
    let mut c = Conn::connect(s.ports[0]);
    c.send([&b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n"[..], REQ].concat());
    assert!(c.closed_within(std::time::Duration::from_secs(5)));
    // The server keeps serving.
    let mut c = Conn::connect(s.ports[0]);
    c.send([&b"PROXY TCP4 1.2.3.4 5.6.7.8 9 1\r\n"[..], REQ].concat());
    assert_eq!(c.read_response().status, 200);
}

#[test]
fn proxy_protocol_before_tls() {
    let s = builder()
        .tls_files()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}} ssl proxy_protocol;
                ssl_certificate tls/localhost.ecdsa.crt;
                ssl_certificate_key tls/localhost.ecdsa.key;
                set_real_ip_from 127.0.0.1;
                real_ip_header proxy_protocol;
                location / {{ {PP_SHOW} }}
            }}"#
        ))
        .start();
    // curl sends a PROXY v1 line naming its own connection.
    let f = curl_fetch(&s, &[&format!("https://localhost:{}/", s.port)], &["--haproxy-protocol"]).one();
    assert_eq!(f.status, 200);
    assert!(f.text().starts_with("pp=127.0.0.1:"), "{}", f.text());
    assert!(f.text().contains(&format!("server=127.0.0.1:{} ", s.port)), "{}", f.text());
}

#[test]
fn config_errors_name_file_and_line() {
    let t = builder().http("server { listen 127.0.0.1:{port}; set_real_ip_from 10.0.0.0/40; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(!out.status.success());
    assert!(err.contains("set_real_ip_from"), "{err}");
    assert!(err.contains(&format!("{}:", t.conf_path().display())), "{err}");
    let t = builder().http("server { listen 127.0.0.1:{port}; set_real_ip_from 10.0.0.1/8; }").prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("low address bits of 10.0.0.1/8 are meaningless"), "{err}");
}

#[test]
fn access_rules_see_the_real_client() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                set_real_ip_from 127.0.0.1;
                real_ip_header X-Forwarded-For;
                deny 198.51.100.0/24;
                allow all;
            }"#,
        )
        .file("html/index.html", "ok\n")
        .start();
    assert_eq!(get_with(s.port, "/", &["X-Forwarded-For: 198.51.100.7"]).status, 403);
    assert_eq!(get_with(s.port, "/", &["X-Forwarded-For: 203.0.113.7"]).status, 200);
    let log = s.wait_error_log("access forbidden by rule");
    assert!(log.contains("access forbidden by rule, client: 198.51.100.7"), "{log}");
}

#[test]
fn proxy_protocol_towards_the_origin() {
    // sluice's own directive (nginx has it only in `stream`).
    if nginx_mode() {
        return;
    }
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let origin = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for _ in 0..2 {
            let (mut c, _) = listener.accept().unwrap();
            c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let first = String::from_utf8_lossy(&got).lines().next().unwrap_or("").to_string();
            let body = first.clone();
            let _ = c.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n{body}", body.len())
                    .as_bytes(),
            );
            lines.push(first);
        }
        lines
    });
    let s = builder()
        .http(&format!(
            r#"upstream app {{ server 127.0.0.1:{port}; keepalive 4; }}
            server {{
                listen 127.0.0.1:{{port}};
                set_real_ip_from 127.0.0.1;
                location / {{
                    proxy_protocol on;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                    proxy_pass http://app;
                }}
            }}"#
        ))
        .start();
    let a = get_with(s.port, "/", &["X-Real-IP: 192.0.2.44"]);
    let b = get_with(s.port, "/", &["X-Real-IP: 198.51.100.9"]);
    assert_eq!(a.text(), format!("PROXY TCP4 192.0.2.44 127.0.0.1 0 {}", s.port));
    // A second connection (none is reused: each names its own client).
    assert_eq!(b.text(), format!("PROXY TCP4 198.51.100.9 127.0.0.1 0 {}", s.port));
    assert_eq!(origin.join().unwrap().len(), 2);
}
