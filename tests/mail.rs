//! The mail family (`mail {}`) with real clients and servers: an
//! authentication server and scripted IMAP, POP3 and SMTP backends run in
//! the test on loopback; a client logs in through sluice (IMAP LOGIN,
//! AUTHENTICATE, POP3 USER/PASS, APOP, SMTP AUTH, SMTP without
//! authentication, STARTTLS with `openssl s_client`), and the tests check
//! what the client saw, the `Auth-*` headers the authentication server
//! got, and the login and commands that reached the backend. With
//! `SLUICE_TEST_NGINX=1` the same run against nginx and its mail module.

mod common;

use std::io::{BufRead, BufReader, Write};

use common::mail::{Client, Log, Proto, auth_http, backend};
use common::tls::{self, KeyKind};
use common::*;

/// The authentication server: records each request head; a password
/// "secret" (or any digest with APOP/CRAM-MD5, or none for EXTERNAL and
/// SMTP without auth) is accepted with the backend `port` and the
/// backend password "backendpw", anything else is refused with
/// `Auth-Wait: 1`.
fn auth_server(port: u16) -> (u16, Log) {
    auth_http(move |h| {
        let ok = h("Auth-Pass") == "secret"
            || matches!(h("Auth-Method").as_str(), "apop" | "cram-md5" | "external" | "none");
        if ok {
            format!(
                "HTTP/1.0 200 OK\r\nAuth-Status: OK\r\nAuth-Server: 127.0.0.1\r\nAuth-Port: {port}\r\n\
                 Auth-Pass: backendpw\r\n\r\n"
            )
        } else {
            "HTTP/1.0 200 OK\r\nAuth-Status: Invalid login or password\r\nAuth-Wait: 1\r\n\r\n".to_string()
        }
    })
}

fn mail_conf(body: &str) -> String {
    // Debian's packaged nginx has the mail module as a dynamic module;
    // sluice accepts the line (the module is built in).
    format!(
        "load_module /usr/lib/nginx/modules/ngx_mail_module.so;\ndaemon off;\npid logs/sluice.pid;\n\
         error_log logs/error.log info;\nevents {{}}\nmail {{\n{body}\n}}\n"
    )
}

fn b64(s: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in s.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            out.push(if k <= c.len() { A[(n >> (18 - 6 * k) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(": ")))
}

fn wait_for(log: &Log, n: usize) -> Vec<String> {
    for _ in 0..100 {
        if log.lock().unwrap().len() >= n {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    log.lock().unwrap().clone()
}

#[test]
fn imap_login_goes_to_the_backend_the_auth_server_names() {
    let (bport, blog) = backend(Proto::Imap);
    let (aport, alog) = auth_server(bport);
    let srv = builder()
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}/mail/auth; auth_http_header X-Secret s3;
             server {{ listen 127.0.0.1:{{port}}; protocol imap; imap_auth plain login; }}"
        )))
        .start();
    let mut c = Client::connect(srv.port);
    assert_eq!(c.line(), "* OK IMAP4 ready\r\n");
    c.send("c1 CAPABILITY");
    assert_eq!(c.line(), "* CAPABILITY IMAP4 IMAP4rev1 UIDPLUS AUTH=PLAIN AUTH=LOGIN\r\n");
    assert_eq!(c.line(), "c1 OK completed\r\n");
    c.send("c2 LOGIN");
    assert_eq!(c.line(), "c2 BAD invalid command\r\n");
    // A wrong password: refused after Auth-Wait, and the session goes on.
    c.send("c3 LOGIN \"us er\" bad");
    assert_eq!(c.line(), "c3 NO Invalid login or password\r\n");
    // The right one, pipelined with the next command.
    c.w.write_all(b"c4 LOGIN {4}\r\n").unwrap();
    assert_eq!(c.line(), "+ OK\r\n");
    c.w.write_all(b"user secret\r\nc5 SELECT inbox\r\n").unwrap();
    assert_eq!(c.line(), "c4 OK LOGIN done\r\n");
    assert_eq!(c.line(), "c5 OK SELECT done\r\n");
    let reqs = wait_for(&alog, 2);
    let first = &reqs[0];
    assert!(first.starts_with("GET /mail/auth HTTP/1.0\r\n"), "{first}");
    assert_eq!(header(first, "Auth-Method"), Some("plain"));
    assert_eq!(header(first, "Auth-User"), Some("us%20er"));
    assert_eq!(header(first, "Auth-Pass"), Some("bad"));
    assert_eq!(header(first, "Auth-Protocol"), Some("imap"));
    assert_eq!(header(first, "Auth-Login-Attempt"), Some("1"));
    assert_eq!(header(first, "Client-IP"), Some("127.0.0.1"));
    assert_eq!(header(first, "X-Secret"), Some("s3"));
    assert_eq!(header(&reqs[1], "Auth-Login-Attempt"), Some("2"));
    assert_eq!(header(&reqs[1], "Auth-User"), Some("user"));
    // The backend got the login with the auth server's password, in
    // literals, then the client's next command.
    let seen = wait_for(&blog, 2);
    assert_eq!(seen[0], "c4 LOGIN user backendpw");
    assert_eq!(seen[1], "c5 SELECT inbox");
}

#[test]
fn imap_authenticate_plain_login_and_cram_md5() {
    let (bport, blog) = backend(Proto::Imap);
    let (aport, alog) = auth_server(bport);
    let srv = builder()
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}; server_name mail.test;
             server {{ listen 127.0.0.1:{{port}}; protocol imap; imap_auth plain cram-md5; }}"
        )))
        .start();
    let mut c = Client::connect(srv.port);
    c.line();
    c.send(&format!("a AUTHENTICATE PLAIN {}", b64(b"\0joe\0secret")));
    assert_eq!(c.line(), "a OK LOGIN done\r\n");
    let mut c = Client::connect(srv.port);
    c.line();
    c.send("b AUTHENTICATE LOGIN");
    assert_eq!(c.line(), "+ VXNlcm5hbWU6\r\n");
    c.send(&b64(b"ann"));
    assert_eq!(c.line(), "+ UGFzc3dvcmQ6\r\n");
    c.send(&b64(b"secret"));
    assert_eq!(c.line(), "b OK LOGIN done\r\n");
    let mut c = Client::connect(srv.port);
    c.line();
    c.send("c AUTHENTICATE CRAM-MD5");
    let challenge = c.line();
    assert!(challenge.starts_with("+ "), "{challenge}");
    c.send(&b64(format!("bob {}", "0".repeat(32)).as_bytes()));
    assert_eq!(c.line(), "c OK LOGIN done\r\n");
    let reqs = wait_for(&alog, 3);
    assert_eq!(header(&reqs[0], "Auth-User"), Some("joe"));
    assert_eq!(header(&reqs[1], "Auth-User"), Some("ann"));
    assert_eq!(header(&reqs[2], "Auth-Method"), Some("cram-md5"));
    assert_eq!(header(&reqs[2], "Auth-Pass"), Some("00000000000000000000000000000000"));
    // The salt is the challenge, decoded: <random.time@server_name>.
    let salt = header(&reqs[2], "Auth-Salt").unwrap_or("");
    assert!(salt.starts_with('<') && salt.ends_with("@mail.test>"), "{salt}");
    let seen = wait_for(&blog, 3);
    assert!(seen.contains(&"c LOGIN bob backendpw".to_string()), "{seen:?}");
}

#[test]
fn pop3_user_pass_apop_and_auth_list() {
    let (bport, blog) = backend(Proto::Pop3);
    let (aport, alog) = auth_server(bport);
    let srv = builder()
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport};
             server {{ listen 127.0.0.1:{{port}}; protocol pop3; pop3_auth plain apop cram-md5; }}"
        )))
        .start();
    let mut c = Client::connect(srv.port);
    let greeting = c.line();
    assert!(greeting.starts_with("+OK POP3 ready <") && greeting.ends_with(">\r\n"), "{greeting}");
    c.send("AUTH");
    assert_eq!(c.line(), "+OK methods supported:\r\n");
    assert_eq!(c.line(), "PLAIN\r\n");
    assert_eq!(c.line(), "LOGIN\r\n");
    assert_eq!(c.line(), "CRAM-MD5\r\n");
    assert_eq!(c.line(), ".\r\n");
    c.send("PASS early");
    assert_eq!(c.line(), "-ERR invalid command\r\n");
    c.w.write_all(b"USER pat\r\nPASS secret\r\nSTAT\r\n").unwrap();
    assert_eq!(c.line(), "+OK\r\n");
    assert_eq!(c.line(), "+OK PASS\r\n");
    assert_eq!(c.line(), "+OK STAT\r\n");
    let mut c = Client::connect(srv.port);
    let greeting = c.line();
    let salt = &greeting["+OK POP3 ready ".len()..greeting.len() - 2];
    c.send(&format!("APOP pat {}", "a".repeat(32)));
    assert_eq!(c.line(), "+OK PASS\r\n");
    let reqs = wait_for(&alog, 2);
    assert_eq!(header(&reqs[0], "Auth-Protocol"), Some("pop3"));
    assert_eq!(header(&reqs[1], "Auth-Method"), Some("apop"));
    assert_eq!(header(&reqs[1], "Auth-Salt"), Some(salt));
    let seen = wait_for(&blog, 5);
    assert_eq!(&seen[..3], ["USER pat", "PASS backendpw", "STAT"]);
    assert_eq!(&seen[3..5], ["USER pat", "PASS backendpw"]);
}

#[test]
fn smtp_auth_and_unauthenticated_relay() {
    let (bport, blog) = backend(Proto::Smtp);
    let (aport, alog) = auth_server(bport);
    let srv = builder()
        .ports(2)
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}; server_name mx.test;
             server {{ listen 127.0.0.1:{{port0}}; protocol smtp; smtp_auth login plain; xclient on; }}
             server {{ listen 127.0.0.1:{{port1}}; protocol smtp; smtp_auth none; xclient off;
                      smtp_capabilities PIPELINING SIZE; }}"
        )))
        .start();
    let mut c = Client::connect(srv.ports[0]);
    assert_eq!(c.line(), "220 mx.test ESMTP ready\r\n");
    c.send("EHLO client.test");
    assert_eq!(c.reply(), "250-mx.test\r\n250 AUTH PLAIN LOGIN\r\n");
    c.send("MAIL FROM:<a@b.test>");
    assert_eq!(c.reply(), "530 5.7.1 Authentication required\r\n");
    c.send("AUTH LOGIN");
    assert_eq!(c.reply(), "334 VXNlcm5hbWU6\r\n");
    c.send(&b64(b"sam"));
    assert_eq!(c.reply(), "334 UGFzc3dvcmQ6\r\n");
    c.send(&b64(b"secret"));
    assert_eq!(c.reply(), "235 2.0.0 OK\r\n");
    c.send("MAIL FROM:<sam@b.test>");
    assert_eq!(c.reply(), "250 MAIL ok\r\n");
    let seen = wait_for(&blog, 4);
    assert_eq!(seen[0], "EHLO mx.test");
    assert!(seen[1].starts_with("XCLIENT ADDR=127.0.0.1 LOGIN=sam NAME="), "{seen:?}");
    assert_eq!(seen[2], "EHLO client.test");
    assert_eq!(seen[3], "MAIL FROM:<sam@b.test>");
    // Without authentication: MAIL FROM is taken, RCPT TO asks the auth
    // server, then both go to the backend and its answer to the client.
    let mut c = Client::connect(srv.ports[1]);
    c.line();
    c.send("EHLO other.test");
    assert_eq!(c.reply(), "250-mx.test\r\n250-PIPELINING\r\n250 SIZE\r\n");
    c.send("RCPT TO:<x@y.test>");
    assert_eq!(c.reply(), "503 5.5.1 Bad sequence of commands\r\n");
    c.send("MAIL FROM:<from@a.test> SIZE=10");
    assert_eq!(c.reply(), "250 2.0.0 OK\r\n");
    c.send("RCPT TO:<to@b.test>");
    assert_eq!(c.reply(), "250 RCPT ok\r\n");
    c.send("QUIT");
    assert_eq!(c.reply(), "221 bye\r\n");
    assert!(c.closed());
    let reqs = wait_for(&alog, 2);
    let none = reqs.iter().find(|r| header(r, "Auth-Method") == Some("none")).expect("auth none request");
    assert_eq!(header(none, "Auth-SMTP-Helo"), Some("other.test"));
    assert_eq!(header(none, "Auth-SMTP-From"), Some("MAIL FROM:<from@a.test> SIZE=10"));
    assert_eq!(header(none, "Auth-SMTP-To"), Some("RCPT TO:<to@b.test>"));
    assert_eq!(header(none, "Client-Host"), Some("[UNAVAILABLE]"));
    let seen = wait_for(&blog, 8);
    assert_eq!(&seen[4..], ["EHLO mx.test", "MAIL FROM:<from@a.test> SIZE=10", "RCPT TO:<to@b.test>", "QUIT"]);
}

#[test]
fn smtp_starttls_then_login() {
    let (bport, blog) = backend(Proto::Smtp);
    let (aport, _alog) = auth_server(bport);
    let ck = tls::issue(KeyKind::Ecdsa, &["mx.test"], false);
    let srv = builder()
        .file("conf/tls/ca.crt", tls::ca_pem())
        .file("conf/mx.crt", &ck.cert)
        .file("conf/mx.key", &ck.key)
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}; server_name mx.test; xclient off;
             ssl_certificate mx.crt; ssl_certificate_key mx.key;
             server {{ listen 127.0.0.1:{{port}}; protocol smtp; starttls only; }}"
        )))
        .start();
    let mut c = Client::connect(srv.port);
    c.line();
    c.send("EHLO plain.test");
    assert_eq!(c.reply(), "250-mx.test\r\n250 STARTTLS\r\n");
    c.send(&format!("AUTH PLAIN {}", b64(b"\0u\0secret")));
    assert_eq!(c.reply(), "500 5.5.1 Invalid command\r\n");
    let script = format!("EHLO tls.test\r\nAUTH PLAIN {}\r\nNOOP\r\nQUIT\r\n", b64(b"\0u\0secret"));
    let out = tls::s_client(&srv, srv.port, &["-starttls", "smtp", "-quiet"], &script).out;
    assert!(out.contains("250 AUTH PLAIN LOGIN"), "{out}");
    assert!(out.contains("235 2.0.0 OK"), "{out}");
    assert!(out.contains("250 NOOP ok"), "{out}");
    let seen = wait_for(&blog, 3);
    assert_eq!(seen, ["EHLO mx.test", "NOOP", "QUIT"]);
    // ALPN, as nginx's mail module: the protocol's own name is taken, a
    // client offering only others fails the handshake.
    let out = tls::s_client(&srv, srv.port, &["-starttls", "smtp", "-alpn", "smtp"], "QUIT\r\n").out;
    assert!(out.contains("ALPN protocol: smtp"), "{out}");
    let out = tls::s_client(&srv, srv.port, &["-starttls", "smtp", "-alpn", "imap"], "QUIT\r\n");
    assert!(!out.ok && out.out.contains("no application protocol"), "{}", out.out);
}

#[test]
fn invalid_commands_end_the_session_at_max_errors() {
    let srv = builder()
        .whole(&mail_conf(
            "auth_http 127.0.0.1:1; max_errors 2;
             server { listen 127.0.0.1:{port}; protocol pop3; }",
        ))
        .start();
    let mut c = Client::connect(srv.port);
    c.line();
    c.send("FOO");
    assert_eq!(c.line(), "-ERR invalid command\r\n");
    c.send("BAR");
    assert_eq!(c.line(), "-ERR invalid command\r\n");
    c.send("BAZ");
    assert!(c.closed());
    // An unreachable auth server: the protocol's internal error.
    let mut c = Client::connect(srv.port);
    c.line();
    c.send("USER u");
    c.line();
    c.send("PASS p");
    assert_eq!(c.line(), "-ERR internal server error\r\n");
    assert!(c.closed());
}

#[test]
fn config_test_speaks_nginx() {
    let check = |body: &str| {
        let srv = builder().whole(&mail_conf(body)).prepare();
        let out = srv.run(&["-t"]);
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ok, err) = check("server { listen 127.0.0.1:1; protocol imap; }");
    assert!(!ok && err.contains("no \"auth_http\" is defined for server in "), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; }");
    assert!(!ok && err.contains("unknown mail protocol for server in "), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol nntp; }");
    assert!(!ok && err.contains("unknown protocol \"nntp\""), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol imap; imap_auth apop; }");
    assert!(!ok && err.contains("invalid value \"apop\" in "), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol smtp; frobnicate on; }");
    assert!(!ok && err.contains("unknown directive \"frobnicate\""), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:1; protocol smtp; starttls on; }");
    assert!(!ok && err.contains("no \"ssl_certificate\" is defined for the \"starttls\" directive in "), "{err}");
    let (ok, err) = check("auth_http 127.0.0.1:1; server { listen 127.0.0.1:25; }");
    assert!(ok, "{err}");
}

/// A DNS server for the client's name: PTR for 127.0.0.1 gives `ptr`
/// (None: SERVFAIL), and `A` for a name gives 127.0.0.1 when it starts
/// with "client", 192.0.2.1 otherwise.
fn dns_server(ptr: Option<&'static str>) -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind dns");
    let port = s.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        loop {
            let Ok((len, from)) = s.recv_from(&mut buf) else { return };
            let q = &buf[..len];
            let end = 12 + q[12..].iter().position(|&b| b == 0).unwrap_or(0) + 1;
            let qtype = u16::from_be_bytes([q[end], q[end + 1]]);
            let qname = String::from_utf8_lossy(&q[12..end]).into_owned();
            let mut rdata = Vec::new();
            let mut rcode = 0;
            match (qtype, ptr) {
                (12, None) => rcode = 2,
                (12, Some(name)) => {
                    for l in name.split('.') {
                        rdata.push(l.len() as u8);
                        rdata.extend_from_slice(l.as_bytes());
                    }
                    rdata.push(0);
                }
                (1, _) if qname.contains("client") => rdata.extend_from_slice(&[127, 0, 0, 1]),
                (1, _) => rdata.extend_from_slice(&[192, 0, 2, 1]),
                _ => {}
            }
            let an = u8::from(!rdata.is_empty());
            let mut r = vec![q[0], q[1], 0x81, 0x80 | rcode, 0, 1, 0, an, 0, 0, 0, 0];
            r.extend_from_slice(&q[12..end + 4]);
            if an == 1 {
                r.extend_from_slice(&[0xc0, 0x0c]);
                r.extend_from_slice(&qtype.to_be_bytes());
                r.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
                r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
                r.extend_from_slice(&rdata);
            }
            let _ = s.send_to(&r, from);
        }
    });
    port
}

#[test]
fn smtp_client_host_through_the_resolver() {
    let (bport, _blog) = backend(Proto::Smtp);
    let (aport, alog) = auth_server(bport);
    let good = dns_server(Some("client.example"));
    let failing = dns_server(None);
    let elsewhere = dns_server(Some("other.example"));
    let srv = builder()
        .ports(3)
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}; server_name mx.test; smtp_auth none; resolver_timeout 2s;
             server {{ listen 127.0.0.1:{{port0}}; protocol smtp; resolver 127.0.0.1:{good}; }}
             server {{ listen 127.0.0.1:{{port1}}; protocol smtp; resolver 127.0.0.1:{failing}; }}
             server {{ listen 127.0.0.1:{{port2}}; protocol smtp; resolver 127.0.0.1:{elsewhere}; }}"
        )))
        .start();
    for (i, port) in srv.ports.iter().enumerate() {
        let mut c = Client::connect(*port);
        assert_eq!(c.line(), "220 mx.test ESMTP ready\r\n");
        c.send("EHLO me.test");
        c.reply();
        c.send("MAIL FROM:<a@b.test>");
        assert_eq!(c.reply(), "250 2.0.0 OK\r\n");
        c.send("RCPT TO:<c@d.test>");
        assert_eq!(c.reply(), "250 RCPT ok\r\n", "server {i}");
        c.send("QUIT");
    }
    let reqs = wait_for(&alog, 3);
    let hosts: Vec<_> = reqs.iter().map(|r| header(r, "Client-Host").unwrap_or("")).collect();
    assert_eq!(hosts, ["client.example", "[TEMPUNAVAIL]", "[UNAVAILABLE]"]);
    srv.wait_error_log("127.0.0.1 could not be resolved (2: Server failure)");
    srv.wait_error_log("other.example address does not match client address");
}

/// `listen unix:PATH` in `mail {}`: an SMTP client over a unix-domain
/// socket logs in; it is `unix:` to the authentication server
/// (`Client-IP`), to the backend (`XCLIENT ADDR=`) and in the error log.
#[test]
fn smtp_over_a_unix_socket() {
    use std::os::unix::net::UnixStream;
    let (bport, blog) = backend(Proto::Smtp);
    let (aport, alog) = auth_server(bport);
    let srv = builder()
        .whole(&mail_conf(&format!(
            "auth_http 127.0.0.1:{aport}; server_name mx.test;
             server {{ listen unix:{{prefix}}/logs/smtp.sock; protocol smtp; smtp_auth plain; xclient on; }}"
        )))
        .start();
    let sock = srv.path("logs/smtp.sock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let w = loop {
        match UnixStream::connect(&sock) {
            Ok(s) => break s,
            Err(e) => {
                assert!(std::time::Instant::now() < deadline, "connect {}: {e}", sock.display());
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    };
    w.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut r = BufReader::new(w.try_clone().unwrap());
    let mut w = w;
    let mut reply = || {
        let mut all = String::new();
        loop {
            let mut l = String::new();
            let _ = r.read_line(&mut l);
            all.push_str(&l);
            if l.len() < 4 || l.as_bytes()[3] != b'-' {
                return all;
            }
        }
    };
    assert_eq!(reply(), "220 mx.test ESMTP ready\r\n");
    w.write_all(b"EHLO client.test\r\n").unwrap();
    assert_eq!(reply(), "250-mx.test\r\n250 AUTH PLAIN\r\n");
    w.write_all(format!("AUTH PLAIN {}\r\n", b64(b"\0sam\0secret")).as_bytes()).unwrap();
    assert_eq!(reply(), "235 2.0.0 OK\r\n");
    w.write_all(b"MAIL FROM:<sam@b.test>\r\n").unwrap();
    assert_eq!(reply(), "250 MAIL ok\r\n");
    let reqs = wait_for(&alog, 1);
    assert_eq!(header(&reqs[0], "Client-IP"), Some("unix:"), "{}", reqs[0]);
    assert_eq!(header(&reqs[0], "Client-Host"), Some("[UNAVAILABLE]"));
    let seen = wait_for(&blog, 2);
    assert!(seen[1].starts_with("XCLIENT ADDR=unix: LOGIN=sam NAME=[UNAVAILABLE]"), "{seen:?}");
    let log = srv.wait_error_log("connected to unix:");
    assert!(log.contains(&format!("client unix: connected to unix:{}", sock.display())), "{log}");
}
