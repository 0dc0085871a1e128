//! The ACME client (`acme_issuer`, `acme_certificate`, `$acme_certificate`)
//! against a real ACME server: Pebble, Let's Encrypt's test CA, with
//! `pebble-challtestsrv` as its DNS server (every name is 127.0.0.1), on
//! loopback. Pebble validates HTTP-01 by fetching
//! `/.well-known/acme-challenge/TOKEN` from sluice's plain-HTTP listener
//! (its `httpPort`), and rejects a share of nonces (its default), which
//! the client must retry. Both come from `scripts/install-pebble` (Go
//! modules, into target/tools). What is checked is what a user sees:
//! the handshake before issuance, `openssl s_client -servername` after,
//! the state files, a restart with the CA down, a corrupt state file.
//! nginx has no ACME module in Debian's build, so nothing here runs
//! against nginx (`SLUICE_TEST_NGINX`).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::acme::*;
use common::tls::nginx_mode;
use common::*;

#[test]
fn issues_by_http01_then_restarts_from_state_and_recovers_from_a_corrupt_file() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    // Pebble's port is chosen before sluice starts, but Pebble runs only
    // once sluice has served without a certificate.
    let pebble_port = free_port();
    let mut s = builder().ports(2).http(&conf(&ca, pebble_port)).start();
    let (http, https) = (s.ports[0], s.ports[1]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);

    // Before issuance: as nginx-acme, `$acme_certificate` has no value,
    // so the handshake fails with an alert and the reason is logged.
    assert_eq!(served(https, "example.test", None), None, "a handshake before any certificate");
    let l = wait_contains(&s.path("logs/error.log"), "is not issued yet", Duration::from_secs(5));
    assert!(line_with(&l, "is not issued yet").contains("while SSL handshaking"), "{l}");
    // The CA is down: a warning with the next attempt, no crash.
    let l = wait_contains(&s.path("logs/error.log"), "next attempt in", Duration::from_secs(10));
    let line = line_with(&l, "next attempt in");
    assert!(line.contains("[warn]") && line.contains("connect() failed"), "{line}");
    assert!(line.contains("while creating account for acme issuer \"pebble\", next attempt in 60s"), "{line}");

    // The CA comes up (on the port the configuration names); a reload
    // schedules the order at once, as nginx-acme does after a failure.
    ca.start_pebble(http, pebble_port);
    s.signal("reload");
    let root = ca.root();
    let (info, verified) = wait_served(https, "example.test", Some(&root), Duration::from_secs(60), &log);
    assert!(verified, "the chain verifies against Pebble's root for example.test:\n{info}");
    assert!(info.contains("Pebble Intermediate CA"), "{info}");
    assert!(info.contains("DNS:example.test") && info.contains("DNS:www.example.test"), "{info}");
    // The same certificate for the other name, and a request through it.
    let (www, _) = served(https, "www.example.test", Some(&root)).expect("www.example.test");
    assert_eq!(serial_of(&www), serial_of(&info));
    let out = Command::new("curl")
        .args(["-s", "--cacert"])
        .arg(&root)
        .args(["--resolve", &format!("example.test:{https}:127.0.0.1"), &format!("https://example.test:{https}/")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "acme ok\n", "curl verifying with Pebble's root");
    // Pebble fetched the token from the plain-HTTP listener.
    assert!(log().contains("acme: answering http-01 challenge"), "{}", log());
    let l = log();
    assert!(line_with(&l, "acme certificate \"pebble/").contains("issued"), "{l}");

    // The state: account key and URL, the certificate and its key (0600).
    let state = s.path("acme");
    assert_eq!(mode(&state.join("account.key")), 0o600);
    let url = std::fs::read_to_string(state.join("account.url")).unwrap();
    assert!(url.starts_with(&format!("https://127.0.0.1:{pebble_port}/")), "{url}");
    let (crt, key) = cert_files(&state);
    assert!(crt.file_name().unwrap().to_string_lossy().starts_with("example.test-"), "{}", crt.display());
    assert_eq!(mode(&key), 0o600);
    assert!(std::fs::read_to_string(&crt).unwrap().matches("BEGIN CERTIFICATE").count() >= 2, "leaf and intermediate");

    // A restart with the CA down serves the stored certificate at once
    // and does not try to reach the CA (not due for renewal).
    let serial = serial_of(&info);
    s.quit();
    ca.stop_pebble();
    std::fs::write(s.path("logs/error.log"), "").unwrap();
    s.relaunch().unwrap();
    let (again, verified) = served(https, "example.test", Some(&root)).expect("the stored certificate after a restart");
    assert!(verified, "{again}");
    assert_eq!(serial_of(&again), serial, "the same certificate after a restart");
    std::thread::sleep(Duration::from_secs(2));
    let l = log();
    assert!(!l.contains("next attempt") && !l.contains("issued"), "no order after restart:\n{l}");

    // A corrupt certificate file: an error-log line, and a fresh order
    // (from a fresh Pebble, which knows no account: registered again).
    s.quit();
    std::fs::write(&crt, "-----BEGIN CERTIFICATE-----\nnot base64 at all\n").unwrap();
    ca.start_pebble(http, pebble_port);
    std::fs::write(s.path("logs/error.log"), "").unwrap();
    s.relaunch().unwrap();
    let l = wait_contains(&s.path("logs/error.log"), "acme state", Duration::from_secs(5));
    let line = line_with(&l, "acme state");
    assert!(line.contains("[error]") && line.contains(".crt") && line.contains("ignored"), "{line}");
    let root = ca.root();
    let (fresh, verified) = wait_served(https, "example.test", Some(&root), Duration::from_secs(60), &log);
    assert!(verified, "{fresh}");
    assert_ne!(serial_of(&fresh), serial, "a new certificate");
    assert!(std::fs::read_to_string(&crt).unwrap().contains("BEGIN CERTIFICATE"), "the state file rewritten");
    assert!(s.is_running());
}

/// `challenge tls-alpn` (RFC 8737): Pebble validates by a handshake to
/// the TLS listener offering only `acme-tls/1`; sluice answers it with
/// the challenge certificate before any server's configuration, and the
/// plain-HTTP listener is never asked. Ordinary clients meanwhile get the
/// server's own answer (no certificate yet: the handshake fails), never
/// the challenge certificate.
#[test]
fn issues_by_tls_alpn01() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    let pebble_port = free_port();
    let conf =
        conf(&ca, pebble_port).replace("accept_terms_of_service;", "accept_terms_of_service;\n  challenge tls-alpn;");
    let s = builder().ports(2).http(&conf).start();
    let (http, https) = (s.ports[0], s.ports[1]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);
    // Pebble's HTTP-01 port is a closed one: only TLS-ALPN-01 can pass.
    ca.start_pebble_tls(free_port(), https, pebble_port);
    s.signal("reload");
    let root = ca.root();
    let (info, verified) = wait_served(https, "example.test", Some(&root), Duration::from_secs(60), &log);
    assert!(verified, "the chain verifies against Pebble's root:\n{info}");
    assert!(info.contains("DNS:example.test") && info.contains("DNS:www.example.test"), "{info}");
    let l = log();
    assert!(line_with(&l, "acme certificate \"pebble/").contains("issued"), "{l}");
    assert!(!l.contains("answering http-01 challenge"), "{l}");
    assert!(l.contains("acme: answering tls-alpn-01 challenge \"example.test\""), "{l}");
    assert!(l.contains("acme: answering tls-alpn-01 challenge \"www.example.test\""), "{l}");
    let _ = http;
    // A client offering acme-tls/1 when no challenge is pending gets no
    // challenge certificate: the ALPN is refused.
    let mut c = Command::new("openssl");
    c.args([
        "s_client",
        "-connect",
        &format!("127.0.0.1:{https}"),
        "-servername",
        "example.test",
        "-alpn",
        "acme-tls/1",
    ]);
    c.stdin(Stdio::null());
    let out = run_bounded(c, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("ALPN protocol: acme-tls/1"), "{text}");
}

/// `external_account_key` (RFC 8555 7.3.4) against a Pebble that requires
/// external account binding, and `profile NAME require` against one that
/// offers profiles: the account is bound with the MAC key and the
/// certificate has the profile's lifetime (Pebble's "shortlived": six
/// days, against 90 by default).
#[test]
fn external_account_binding_and_profile() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    let pebble_port = free_port();
    // A 32-byte MAC key in base64url, as CAs hand them out.
    let mac = "c2x1aWNlLXRlc3QtbWFjLWtleS0zMi1ieXRlcy1sb25n";
    let conf = conf(&ca, pebble_port).replace(
        "accept_terms_of_service;",
        &format!("accept_terms_of_service;\n  external_account_key kid-1 data:{mac};\n  profile shortlived require;"),
    );
    let s = builder().ports(2).http(&conf).start();
    let (http, https) = (s.ports[0], s.ports[1]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);
    let extra = format!(
        r#""externalAccountBindingRequired":true,"externalAccountMACKeys":{{"kid-1":"{mac}"}},
        "profiles":{{"default":{{"description":"d","validityPeriod":7776000}},
        "shortlived":{{"description":"s","validityPeriod":518400}}}},"#
    );
    ca.start_pebble_with(http, free_port(), pebble_port, &extra);
    s.signal("reload");
    let root = ca.root();
    let (info, verified) = wait_served(https, "example.test", Some(&root), Duration::from_secs(60), &log);
    assert!(verified, "{info}");
    let (crt, _) = cert_files(&s.path("acme"));
    let expires_within = |secs: u64| {
        let out = Command::new("openssl")
            .args(["x509", "-noout", "-checkend", &secs.to_string(), "-in"])
            .arg(&crt)
            .output()
            .unwrap();
        !out.status.success()
    };
    assert!(expires_within(7 * 86_400), "the shortlived profile's certificate lasts under a week");
    assert!(!expires_within(5 * 86_400), "and more than five days");
}

/// `-t` checks the blocks offline (the CA's port is closed), and refuses
/// what nginx-acme refuses, with its words and the file:line.
#[test]
fn config_test_is_offline_and_refuses_bad_blocks() {
    if nginx_mode() {
        return;
    }
    let closed = free_port();
    let issuer = |body: &str| {
        format!("acme_issuer example {{\n  uri https://127.0.0.1:{closed}/dir;\n  ssl_verify off;\n  {body}\n}}\n")
    };
    let server = |cert: &str| {
        format!(
            "server {{ listen 127.0.0.1:{{port}} ssl; server_name example.test;\n  {cert}\n  \
             ssl_certificate $acme_certificate; ssl_certificate_key $acme_certificate_key; }}\n"
        )
    };
    let check = |http: String| {
        let s = builder().http(&http).prepare();
        let out = s.run(&["-t"]);
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let resolver = "resolver 127.0.0.1:53;\n";
    let (ok, err) = check(format!(
        "{resolver}acme_shared_zone zone=ngx_acme_shared:1M;\n{}{}",
        issuer(
            "account_key rsa:4096; challenge http; contact admin@example.test; state_path off; accept_terms_of_service; preferred_chain \"ISRG Root X1\";"
        ),
        server("acme_certificate example;")
    ));
    assert!(ok, "an unreachable CA is no refusal:\n{err}");
    for (http, want) in [
        (format!("{}{}", issuer(""), server("acme_certificate example;")), "\"resolver\" is not defined"),
        (format!("{resolver}{}{}", issuer("account_key ecdsa:234;"), server("")), "unsupported curve"),
        (format!("{resolver}{}{}", issuer("challenge bad-value;"), server("")), "unsupported challenge"),
        (format!("{resolver}{}{}", issuer("account_key no-such-file.key;"), server("")), "cannot load"),
        (format!("{resolver}acme_shared_zone bad-value;\n{}", issuer("")), "must have \"zone\""),
        (format!("{resolver}acme_shared_zone zone=test:bad-size;\n{}", issuer("")), "invalid zone size"),
        (
            format!("{resolver}{}{}", issuer(""), server("acme_certificate nope example.test;")),
            "issuer \"nope\" is missing",
        ),
        (
            format!("{resolver}{}{}", issuer(""), server("server_name www.example.*; acme_certificate example;")),
            "invalid server name",
        ),
        (
            format!("{resolver}{}{}", issuer(""), server("acme_certificate example key=rsa:1024;")),
            "unsupported key size \"rsa:1024\"",
        ),
        (
            format!("{resolver}{}{}", issuer(""), server("acme_certificate example key=dsa;")),
            "unsupported key algorithm",
        ),
        (format!("{resolver}{}{}", issuer("account_key rsa:1024;"), server("")), "unsupported key size"),
        (format!("{resolver}{}{}", issuer("challenge dns-01;"), server("")), "unsupported challenge \"dns-01\""),
        (format!("{resolver}{}{}", issuer("profile short maybe;"), server("")), "invalid parameter \"maybe\""),
        (
            format!("{resolver}{}{}", issuer("external_account_key kid data:!!;"), server("")),
            "invalid external account key \"data:!!\"",
        ),
        (format!("{resolver}{}{}", issuer("external_account_key kid missing.key;"), server("")), "cannot load key"),
        (format!("{resolver}{}{}", issuer("preferred_chain A B;"), server("")), "invalid number of arguments"),
    ] {
        let (ok, err) = check(http.clone());
        assert!(!ok, "refused:\n{http}");
        assert!(err.contains("[emerg]") && err.contains(want) && err.contains("sluice.conf:"), "{want}:\n{err}");
    }
}
