//! `listen unix:PATH`: HTTP on a unix-domain socket (curl's
//! `--unix-socket`, and a TCP server proxying to it as nginx's suite
//! does), the address variables as nginx sets them for unix clients
//! (`unix:`), `allow`/`deny unix:`, `set_real_ip_from unix:`, `ssl`,
//! `http2` and `proxy_protocol` on the socket, and the socket file's life:
//! made at start, kept or removed by a reload, removed at quit.
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::tls::*;
use common::*;

/// One response over the unix socket at `sock` as curl saw it: status,
/// header block, body.
fn ucurl(sock: &Path, url: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    let dir = temp_dir("ucurl");
    let (h, b) = (dir.join("h"), dir.join("b"));
    let (hs, bs) = (h.display().to_string(), b.display().to_string());
    let mut args = vec!["--unix-socket", sock.to_str().unwrap(), "-D", &hs, "-o", &bs];
    args.extend_from_slice(extra);
    args.push(url);
    let out = curl(&args);
    assert!(out.status.success(), "curl {url}: {}", out.stderr);
    let head = std::fs::read_to_string(&h).unwrap();
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head, std::fs::read(&b).unwrap())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

const SHOW: &str = r#"return 200 "ra=$remote_addr rp=$remote_port sa=$server_addr sp=$server_port bra=$binary_remote_addr rra=$realip_remote_addr\n";"#;

#[test]
fn serves_http_with_the_address_variables_nginx_sets() {
    let big = pseudo_random(3 << 20, 7);
    let s = builder()
        .file("html/big.bin", &big)
        .http(&format!(
            "log_format u '$remote_addr|$server_addr|$status';
            access_log logs/access.log u;
            server {{
                listen unix:{{prefix}}/http.sock;
                root html;
                location = /vars {{ {SHOW} }}
                location /nothing {{ }}
            }}"
        ))
        .start();
    let sock = s.path("http.sock");
    let mut checks = Checks::new();
    checks.run("the socket file is a socket with mode 0666", || {
        let m = std::fs::metadata(&sock).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o666);
    });
    checks.run("variables", || {
        let (st, _, body) = ucurl(&sock, "http://localhost/vars", &[]);
        assert_eq!(st, 200);
        let want = format!("ra=unix: rp= sa=unix:{} sp= bra=unix: rra=unix:\n", sock.display());
        assert_eq!(String::from_utf8_lossy(&body), want);
    });
    checks.run("a 3 MB static file", || {
        let (st, head, body) = ucurl(&sock, "http://localhost/big.bin", &[]);
        assert_eq!(st, 200);
        assert_eq!(header(&head, "content-length"), Some("3145728"));
        assert!(body == big, "body differs: {} bytes", body.len());
    });
    checks.run("404 and keep-alive", || {
        let mut c = UnixStream::connect(&sock).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(
            b"GET /nothing/x HTTP/1.1\r\nHost: a\r\n\r\nGET /vars HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        assert!(text.contains("HTTP/1.1 200 OK\r\n") && text.contains("ra=unix: "), "{text}");
    });
    checks.run("access log", || {
        let lines = s.wait_access_lines(4);
        assert_eq!(lines[0], format!("unix:|unix:{}|200", sock.display()));
    });
    checks.finish();
}

/// nginx-tests access.t and realip_hostname.t: a TCP server proxies to
/// the unix socket, whose server's rules see a unix client. Static files
/// answer (a `return` would run before the access and realip phases).
#[test]
fn access_rules_and_realip_see_a_unix_client() {
    const V: &str = r#"add_header X-V "$remote_addr|$remote_port|$realip_remote_addr";"#;
    let mut b = builder();
    for f in ["allow", "deny", "inet", "real", "notreal"] {
        b = b.file(&format!("html/{f}"), f);
    }
    let s = b
        .http(&format!(
            "server {{
                listen unix:{{prefix}}/u.sock;
                root html;
                location /allow {{ allow unix:; deny all; {V} }}
                location /deny {{ deny unix:; {V} }}
                location /inet {{ deny 127.0.0.1; {V} }}
                location /real {{ set_real_ip_from unix:; {V} }}
                location /notreal {{ set_real_ip_from 127.0.0.1; {V} }}
            }}
            server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    proxy_pass http://unix:{{prefix}}/u.sock:/;
                    proxy_set_header X-Real-IP 192.0.2.1;
                }}
            }}"
        ))
        .start();
    let mut checks = Checks::new();
    checks.run("allow unix:", || {
        let r = s.get("/allow");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-V"), Some("unix:||unix:"), "{}", r.head);
    });
    checks.run("deny unix:", || assert_eq!(s.get("/deny").status, 403));
    checks.run("an address rule does not match a unix client", || assert_eq!(s.get("/inet").status, 200));
    checks.run("set_real_ip_from unix:", || {
        let r = s.get("/real");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("X-V"), Some("192.0.2.1||unix:"), "{}", r.head);
    });
    checks.run("set_real_ip_from an address does not trust unix", || {
        assert_eq!(s.get("/notreal").header("X-V"), Some("unix:||unix:"));
    });
    checks.run("the error log names the client unix:", || {
        let log = s.wait_error_log("access forbidden by rule");
        assert!(line_with(&log, "access forbidden by rule").contains("client: unix:, "), "{log}");
    });
    checks.finish();
}

#[test]
fn ssl_http2_and_proxy_protocol_on_unix_sockets() {
    let s = builder()
        .tls_files()
        .http(&format!(
            "server {{
                listen unix:{{prefix}}/tls.sock ssl http2;
                server_name localhost;
                ssl_certificate tls/localhost.ecdsa.crt;
                ssl_certificate_key tls/localhost.ecdsa.key;
                location / {{ return 200 \"https=$https h2=$http2 $remote_addr\\n\"; }}
            }}
            server {{
                listen unix:{{prefix}}/pp.sock proxy_protocol;
                location / {{ return 200 \"pp=$proxy_protocol_addr:$proxy_protocol_port ra=$remote_addr\\n\"; }}
            }}
            server {{
                listen unix:{{prefix}}/h2c.sock http2;
                location / {{ {SHOW} }}
            }}"
        ))
        .start();
    let mut checks = Checks::new();
    checks.run("TLS with HTTP/2 by ALPN", || {
        let (st, head, body) = ucurl(&s.path("tls.sock"), "https://localhost/", &["-k", "--http2"]);
        assert_eq!(st, 200);
        assert!(head.starts_with("HTTP/2 200"), "{head}");
        assert_eq!(String::from_utf8_lossy(&body), "https=on h2=h2 unix:\n");
    });
    checks.run("TLS with HTTP/1.1", || {
        let (st, head, body) = ucurl(&s.path("tls.sock"), "https://localhost/", &["-k", "--http1.1"]);
        assert_eq!(st, 200);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(String::from_utf8_lossy(&body), "https=on h2= unix:\n");
    });
    checks.run("cleartext HTTP/2 by prior knowledge", || {
        let (st, head, body) = ucurl(&s.path("h2c.sock"), "http://localhost/", &["--http2-prior-knowledge"]);
        assert_eq!(st, 200);
        assert!(head.starts_with("HTTP/2 200"), "{head}");
        assert!(String::from_utf8_lossy(&body).starts_with("ra=unix: "));
    });
    checks.run("PROXY protocol header", || {
        let mut c = UnixStream::connect(s.path("pp.sock")).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(b"PROXY TCP4 192.0.2.7 198.51.100.1 4567 80\r\nGET / HTTP/1.0\r\n\r\n").unwrap();
        let mut all = Vec::new();
        c.read_to_end(&mut all).unwrap();
        let text = String::from_utf8_lossy(&all);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with("pp=192.0.2.7:4567 ra=unix:\n"), "{text}");
    });
    checks.finish();
}

/// The socket file's life, as nginx's: made at start, a reload that
/// drops the listen removes it and one that adds a listen makes its
/// file, quit removes the files; a file already at the path refuses the
/// start.
#[test]
fn the_socket_file_follows_start_reload_and_quit() {
    let conf = |paths: &[&str]| {
        paths
            .iter()
            .map(|p| format!("server {{ listen unix:{{prefix}}/{p}; location / {{ return 200 \"{p}\\n\"; }} }}\n"))
            .collect::<String>()
    };
    let mut s = builder().http(&conf(&["a.sock", "b.sock"])).start();
    let (a, b, c) = (s.path("a.sock"), s.path("b.sock"), s.path("c.sock"));
    assert!(a.exists() && b.exists());
    assert_eq!(ucurl(&a, "http://x/", &[]).2, b"a.sock\n");
    // A connection open across the reload on the kept socket.
    let mut open = UnixStream::connect(&a).unwrap();
    open.set_read_timeout(Some(Duration::from_secs(5))).unwrap();

    let main = std::fs::read_to_string(s.conf_path()).unwrap();
    let prefix = s.prefix.display().to_string();
    let reloaded = main.replace(
        &conf(&["a.sock", "b.sock"]).replace("{prefix}", &prefix),
        &conf(&["a.sock", "c.sock"]).replace("{prefix}", &prefix),
    );
    assert_ne!(main, reloaded, "the configuration changed");
    s.write_conf(&reloaded);
    s.signal("reload");
    for _ in 0..100 {
        if c.exists() && !b.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(c.exists(), "the added listen's file");
    assert!(!b.exists(), "the dropped listen's file is removed");
    assert!(a.exists(), "the kept listen's file stays");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ucurl(&c, "http://x/", &[]).2, b"c.sock\n");
    assert_eq!(ucurl(&a, "http://x/", &[]).2, b"a.sock\n");
    open.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut got = Vec::new();
    open.read_to_end(&mut got).unwrap();
    assert!(String::from_utf8_lossy(&got).ends_with("a.sock\n"), "{}", String::from_utf8_lossy(&got));

    s.quit();
    assert!(!a.exists() && !c.exists(), "quit removes the socket files");

    // A file at the path: the bind is refused, as nginx's.
    let taken = builder().http("server { listen unix:{prefix}/t.sock; }").prepare();
    std::fs::write(taken.path("t.sock"), "").unwrap();
    let out = taken.run(&[]);
    assert!(!out.status.success());
    let err = stderr_of(&out);
    assert!(
        err.contains(&format!("bind() to unix:{} failed (98: Address already in use)", taken.path("t.sock").display())),
        "{err}"
    );
}

#[test]
fn bad_unix_listens_are_refused() {
    assert_refused(
        "server { listen unix:; }",
        "no path in the unix domain socket in \"unix:\" of the \"listen\" directive",
    );
    let long = format!("server {{ listen unix:/{}; }}", "a".repeat(120));
    assert_refused(&long, "too long path in the unix domain socket");
}

/// `stream {}` on unix-domain sockets, as nginx's stream modules: the
/// address variables of a unix client (`unix:`, no ports), `geo` looking
/// up 255.255.255.255 for it, `deny unix:`, a TCP server proxying to a
/// unix listen with the PROXY protocol that `set_real_ip_from unix:`
/// believes (and one without it that does not), and the error log's
/// naming of the client.
#[test]
fn stream_listens_on_unix_sockets() {
    let conf = "LOAD daemon off;
        pid logs/sluice.pid;
        error_log logs/error.log info;
        events {}
        stream {
            geo $g { default other; 255.255.255.255 none; }
            server {
                listen unix:{prefix}/vars.sock;
                return \"ra=$remote_addr rp=$remote_port sa=$server_addr sp=$server_port rra=$realip_remote_addr g=$g\\n\";
            }
            server {
                listen unix:{prefix}/pp.sock proxy_protocol;
                set_real_ip_from unix:;
                return \"ra=$remote_addr pp=$proxy_protocol_addr rra=$realip_remote_addr g=$g\\n\";
            }
            server {
                listen unix:{prefix}/untrusted.sock proxy_protocol;
                return \"ra=$remote_addr pp=$proxy_protocol_addr\\n\";
            }
            server { listen unix:{prefix}/deny.sock; deny unix:; return \"not this\\n\"; }
            server { listen 127.0.0.1:{port0}; proxy_pass unix:{prefix}/pp.sock; proxy_protocol on; }
            server { listen 127.0.0.1:{port1}; proxy_pass unix:{prefix}/untrusted.sock; proxy_protocol on; }
        }
        ";
    let s = builder().whole(&conf.replace("LOAD", load_stream())).ports(2).start();
    let read_unix = |name: &str| {
        let mut c = UnixStream::connect(s.path(name)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let read_tcp = |port: u16| {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    };
    let mut checks = Checks::new();
    checks.run("the socket file is a socket with mode 0666", || {
        let m = std::fs::metadata(s.path("vars.sock")).unwrap();
        assert!(m.file_type().is_socket());
        assert_eq!(m.permissions().mode() & 0o777, 0o666);
    });
    checks.run("variables of a unix client", || {
        let want = format!("ra=unix: rp= sa=unix:{} sp= rra=unix: g=none\n", s.path("vars.sock").display());
        assert_eq!(read_unix("vars.sock"), want);
    });
    checks.run("PROXY header from a trusted unix peer", || {
        assert_eq!(read_tcp(s.ports[0]), "ra=127.0.0.1 pp=127.0.0.1 rra=unix: g=other\n");
    });
    checks.run("PROXY header from an untrusted unix peer", || {
        assert_eq!(read_tcp(s.ports[1]), "ra=unix: pp=127.0.0.1\n");
    });
    checks.run("deny unix:", || {
        assert_eq!(read_unix("deny.sock"), "");
        let err = wait_contains(&s.path("logs/error.log"), "access forbidden by rule", Duration::from_secs(5));
        let line = line_with(&err, "access forbidden by rule");
        assert!(line.contains("client: unix:, server: unix:"), "{line}");
    });
    checks.finish();
}

/// nginx's stream module is a dynamic one in Debian.
fn load_stream() -> &'static str {
    if prog() == "nginx" { "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n" } else { "" }
}

#[test]
fn bad_stream_unix_listens_are_refused() {
    let t = |listen: &str| {
        let conf = format!(
            "{}daemon off;\nerror_log logs/error.log;\nevents {{}}\nstream {{ server {{ listen {listen}; return x; }} }}\n",
            load_stream()
        );
        let b = builder().whole(&conf).prepare();
        let out = b.run(&["-t"]);
        assert!(!out.status.success(), "{listen}: accepted");
        stderr_of(&out)
    };
    assert!(t("unix:").contains("no path in the unix domain socket in \"unix:\" of the \"listen\" directive"));
    // A datagram unix socket is taken (`tests/stream.rs`), with nginx's
    // refusals of what a datagram socket cannot do.
    let e = t("unix:/tmp/x.sock udp ssl");
    assert!(e.contains("\"ssl\" parameter is incompatible with \"udp\""), "{e}");
    let e = t("unix:/tmp/x.sock udp so_keepalive=on");
    assert!(e.contains("\"so_keepalive\" parameter is incompatible with \"udp\""), "{e}");
    let e = t("unix:/tmp/x.sock udp proxy_protocol");
    assert!(e.contains("\"proxy_protocol\" parameter is incompatible with \"udp\""), "{e}");
}
