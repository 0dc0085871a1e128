//! Mail sessions in `sluice_status`, end to end: IMAP, POP3 and SMTP
//! clients log in through sluice's `auth_http` path to backends the test
//! runs (one login proxied per protocol that takes one, one refused by the
//! authentication server, one whose authentication server is down, one
//! session that never logs in), then the JSON's `mail` object (sessions
//! and the processing gauge per protocol, `auth_http` results) and the
//! Prometheus page must count exactly those. Sluice-only: the status API
//! is not in nginx.

mod common;

use common::mail::{Client, Proto, auth_http, backend};
use common::status::{n, status, status_when};
use common::*;
use serde_json::Value;

/// The authentication server: the password "secret" is accepted with the
/// backend of the request's `Auth-Protocol`, anything else is refused
/// without `Auth-Wait` (the session ends at the refusal).
fn auth_server(imap: u16, pop3: u16, smtp: u16) -> u16 {
    let (me, _) = auth_http(move |h| {
        let port = match h("Auth-Protocol").as_str() {
            "imap" => imap,
            "pop3" => pop3,
            _ => smtp,
        };
        if h("Auth-Pass") == "secret" {
            format!(
                "HTTP/1.0 200 OK\r\nAuth-Status: OK\r\nAuth-Server: 127.0.0.1\r\nAuth-Port: {port}\r\n\
                 Auth-Pass: backendpw\r\n\r\n"
            )
        } else {
            "HTTP/1.0 200 OK\r\nAuth-Status: Invalid login or password\r\n\r\n".to_string()
        }
    });
    me
}

const PROTOCOLS: [&str; 3] = ["imap", "pop3", "smtp"];

fn processing(j: &Value, p: &str) -> u64 {
    n(&j["mail"]["sessions"][p]["processing"])
}

fn idle(j: &Value) -> bool {
    PROTOCOLS.iter().all(|p| processing(j, p) == 0)
}

/// B64 of SASL PLAIN's `\0user\0pass`.
fn plain(user: &str, pass: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let s = format!("\0{user}\0{pass}").into_bytes();
    let mut out = String::new();
    for c in s.chunks(3) {
        let v = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for k in 0..4 {
            out.push(if k <= c.len() { A[(v >> (18 - 6 * k) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

#[test]
fn mail_sessions_and_auth_http_results_in_the_status_json() {
    let (imap, pop3, smtp) = (backend(Proto::Imap).0, backend(Proto::Pop3).0, backend(Proto::Smtp).0);
    let auth = auth_server(imap, pop3, smtp);
    let dead = free_port();
    let conf = format!(
        "daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}
         mail {{
             auth_http 127.0.0.1:{auth};
             server {{ listen 127.0.0.1:{{port0}}; protocol imap; }}
             server {{ listen 127.0.0.1:{{port1}}; protocol pop3; }}
             server {{ listen 127.0.0.1:{{port2}}; protocol smtp; smtp_auth plain; }}
             server {{ listen 127.0.0.1:{{port3}}; protocol imap; auth_http 127.0.0.1:{dead}; }}
         }}
         http {{ server {{ listen 127.0.0.1:{{port4}}; location /status {{ sluice_status; }} }} }}"
    );
    let srv = builder().server_is_nginx(false).whole(&conf).ports(5).start();
    let sp = srv.ports[4];
    // The harness's readiness probes were sessions too: count from here.
    let before = status_when(sp, "probes done", idle);
    let total = |j: &Value, p: &str| n(&j["mail"]["sessions"][p]["total"]);
    let auth = |j: &Value, r: &str| n(&j["mail"]["auth_http"][r]);

    // IMAP: a login proxied to the backend; the session is processing
    // while it is open.
    let mut c = Client::connect(srv.ports[0]);
    assert_eq!(c.line(), "* OK IMAP4 ready\r\n");
    c.send("a1 LOGIN user secret");
    assert_eq!(c.line(), "a1 OK LOGIN done\r\n");
    c.send("a2 SELECT inbox");
    assert_eq!(c.line(), "a2 OK SELECT done\r\n", "the backend's answer");
    let open = status(sp);
    assert_eq!(processing(&open, "imap"), 1, "{open:#}");
    assert_eq!(total(&open, "imap"), total(&before, "imap") + 1, "{open:#}");
    drop(c);

    // POP3: a refused login ends the session with the refusal.
    let mut c = Client::connect(srv.ports[1]);
    assert!(c.line().starts_with("+OK POP3 ready"));
    c.send("USER pat");
    assert_eq!(c.line(), "+OK\r\n");
    c.send("PASS wrong");
    assert_eq!(c.line(), "-ERR Invalid login or password\r\n");
    assert!(c.drains_to_close(), "a refusal without Auth-Wait ends the session");

    // SMTP: AUTH PLAIN proxied, then QUIT from the backend.
    let mut c = Client::connect(srv.ports[2]);
    assert!(c.line().starts_with("220 "));
    c.send("EHLO client.test");
    while !c.line().starts_with("250 ") {}
    c.send(&format!("AUTH PLAIN {}", plain("sam", "secret")));
    assert_eq!(c.line(), "235 2.0.0 OK\r\n");
    c.send("QUIT");
    assert_eq!(c.line(), "221 bye\r\n");
    assert!(c.drains_to_close());

    // IMAP whose authentication server is down: an error, the session ends.
    let mut c = Client::connect(srv.ports[3]);
    c.line();
    c.send("b1 LOGIN user secret");
    assert_eq!(c.line(), "* BAD internal server error\r\n");
    assert!(c.drains_to_close());

    // IMAP that never logs in: a session, no auth_http exchange.
    let mut c = Client::connect(srv.ports[0]);
    c.line();
    c.send("c1 LOGOUT");
    assert!(c.line().starts_with("* BYE"));
    assert!(c.drains_to_close());

    let after = status_when(sp, "sessions ended", |j| idle(j) && total(j, "imap") >= total(&before, "imap") + 3);
    let m = &after["mail"];
    for (p, want) in [("imap", 3), ("pop3", 1), ("smtp", 1)] {
        assert_eq!(total(&after, p) - total(&before, p), want, "{p} sessions: {m:#}");
    }
    for (r, want) in [("ok", 2), ("failed", 1), ("error", 1)] {
        assert_eq!(auth(&after, r) - auth(&before, r), want, "auth_http {r}: {m:#}");
    }

    // The Prometheus page has the same numbers.
    let r = request(sp, "GET /status?format=prometheus HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let text = r.text();
    for p in PROTOCOLS {
        let line = format!("sluice_mail_sessions_total{{protocol=\"{p}\"}} {}\n", total(&after, p));
        assert!(text.contains(&line), "{line}{text}");
        assert!(text.contains(&format!("sluice_mail_processing{{protocol=\"{p}\"}} 0\n")), "{text}");
    }
    for r in ["ok", "failed", "error"] {
        let line = format!("sluice_mail_auth_http_total{{result=\"{r}\"}} {}\n", auth(&after, r));
        assert!(text.contains(&line), "{line}{text}");
    }
}
