//! The ACME client's renewals and choices against Pebble (see
//! tests/common/acme.rs): two short-lived certificates renewed while wrk
//! opens a new TLS connection for every request (no request fails, no
//! reload), a renewal the CA asks for through its renewal information
//! (RFC 9773), RSA keys, and `preferred_chain` among the chains Pebble
//! offers. nginx has no ACME module in Debian's build, so nothing here
//! runs against nginx (`SLUICE_TEST_NGINX`).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::acme::*;
use common::tls::nginx_mode;
use common::*;

/// An issuer block for `ca` on `pebble_port` with `extra` directives.
fn issuer(ca: &Ca, pebble_port: u16, extra: &str) -> String {
    format!(
        "resolver 127.0.0.1:{dns};\n\
         acme_issuer pebble {{\n  uri https://127.0.0.1:{pebble_port}/dir;\n  \
         ssl_trusted_certificate {minica};\n  state_path acme;\n  accept_terms_of_service;\n  {extra}\n}}\n\
         server {{ listen 127.0.0.1:{{port0}}; location / {{ return 404; }} }}\n",
        dns = ca.dns_port,
        minica = ca.minica().display()
    )
}

/// A TLS server for `names` on port index `port` with `acme_certificate`
/// arguments `args`.
fn tls_server(port: usize, names: &str, args: &str) -> String {
    format!(
        "server {{\n  listen 127.0.0.1:{{port{port}}} ssl;\n  server_name {names};\n  \
         acme_certificate pebble {args};\n  \
         ssl_certificate $acme_certificate;\n  ssl_certificate_key $acme_certificate_key;\n  \
         location / {{ return 200 \"ok\\n\"; }}\n}}\n"
    )
}

/// The serial the server on `port` presents for `name` (None: no
/// certificate yet).
fn serial(port: u16, name: &str) -> Option<String> {
    served(port, name, None).map(|(info, _)| serial_of(&info))
}

/// Certificates of 36 seconds: renewed by the thread, while wrk opens a
/// new TLS connection for every request to both names, without a reload
/// and without a failed request. Pebble's renewal window for them is
/// their whole life, so sluice renews each between 12 s (a third of its
/// life: the least it serves a certificate it obtained) and 36 s after
/// issuance, both within the run: two names renewing at once.
#[test]
fn two_short_lived_certificates_renew_under_load_without_a_failed_request() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    let pebble_port = free_port();
    let http = format!(
        "{}{}{}",
        issuer(&ca, pebble_port, ""),
        tls_server(1, "a.example.test", ""),
        tls_server(2, "b.example.test", "")
    );
    let s = builder().ports(3).http(&http).start();
    let (web, a, b) = (s.ports[0], s.ports[1], s.ports[2]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);
    let profiles = r#""profiles":{"default":{"description":"d","validityPeriod":36}},"#;
    ca.start_pebble_with(web, free_port(), pebble_port, profiles);
    s.signal("reload");
    let root = ca.root();
    wait_served(a, "a.example.test", Some(&root), Duration::from_secs(60), &log);
    wait_served(b, "b.example.test", Some(&root), Duration::from_secs(60), &log);
    let first = (serial(a, "a.example.test").unwrap(), serial(b, "b.example.test").unwrap());
    let master = s.pid();
    std::fs::write(&log_path, "").unwrap();

    // New connections all the time to both servers, across the renewals.
    let wrk = |port: u16| {
        let mut c = Command::new("wrk");
        c.args(["-t1", "-c4", "-d42s", "-H", "Connection: close", &format!("https://127.0.0.1:{port}/")]);
        std::thread::spawn(move || run_bounded(c, Duration::from_secs(90)))
    };
    let (wa, wb) = (wrk(a), wrk(b));
    let (oa, ob) = (wa.join().unwrap(), wb.join().unwrap());
    for (out, port) in [(oa, a), (ob, b)] {
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "wrk on {port}: {text}");
        let done: u64 = text
            .lines()
            .find_map(|l| l.trim().split_once(" requests in ").map(|(n, _)| n.trim().parse().unwrap_or(0)))
            .unwrap_or(0);
        assert!(done > 200, "wrk did requests on {port}:\n{text}");
        assert!(!text.contains("Socket errors") && !text.contains("Non-2xx"), "no failed request on {port}:\n{text}");
    }
    let now = (serial(a, "a.example.test").unwrap(), serial(b, "b.example.test").unwrap());
    assert_ne!(now.0, first.0, "a.example.test renewed during the run:\n{}", log());
    assert_ne!(now.1, first.1, "b.example.test renewed during the run:\n{}", log());
    let l = log();
    assert!(l.matches("\" issued (serial").count() >= 2, "{l}");
    assert!(!l.contains("signal 1") && !l.contains("reconfiguring"), "no reload:\n{l}");
    assert_eq!(s.pid(), master);
    let (info, verified) = served(a, "a.example.test", Some(&root)).expect("a.example.test after the run");
    assert!(verified, "the renewed chain verifies:\n{info}");
}

/// The CA's renewal information (RFC 9773) moves a renewal: Pebble is
/// told the certificate's window has passed, and sluice renews it at
/// start (it asks for every stored certificate's window then), though
/// the certificate's own schedule is two thirds of an hour away. Pebble
/// rejects 30 % of nonces meanwhile (each refusal retried with the new
/// nonce). Then the CA goes down: a restart serves the stored
/// certificate, and the failed check is a warning with a retry.
#[test]
fn renewal_information_from_the_ca_renews_at_once() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    let pebble_port = free_port();
    let http = format!("{}{}", issuer(&ca, pebble_port, ""), tls_server(1, "example.test", ""));
    let mut s = builder().ports(2).http(&http).start();
    let (web, https) = (s.ports[0], s.ports[1]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);
    let profiles = r#""profiles":{"default":{"description":"d","validityPeriod":3600}},"#;
    ca.start_pebble_env(web, free_port(), pebble_port, profiles, &[("PEBBLE_WFE_NONCEREJECT", "30")]);
    s.signal("reload");
    let root = ca.root();
    wait_served(https, "example.test", Some(&root), Duration::from_secs(60), &log);
    let first = serial(https, "example.test").unwrap();
    let l = log();
    assert!(line_with(&l, "nonce rejected").contains("[info]"), "Pebble's nonce refusals were retried:\n{l}");
    let l = wait_contains(&log_path, "renewal information suggests", Duration::from_secs(10));
    assert!(!line_with(&l, "renewal information suggests").contains("renewal in 0s"), "{l}");

    let (crt, _) = cert_files(&s.path("acme"));
    let pem = std::fs::read_to_string(&crt).unwrap();
    let leaf = &pem[..pem.find("-----END CERTIFICATE-----").unwrap() + 25];
    let past = |secs: u64| {
        let t = std::time::SystemTime::now() - Duration::from_secs(secs);
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        Command::new("date")
            .args(["-u", "-d", &format!("@{d}"), "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap()
    };
    ca.set_renewal_info(leaf, &format!(r#"{{"suggestedWindow":{{"start":"{}","end":"{}"}}}}"#, past(120), past(60)));
    s.quit();
    std::fs::write(&log_path, "").unwrap();
    s.relaunch().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let renewed = loop {
        match serial(https, "example.test") {
            Some(n) if n != first => break n,
            _ => {}
        }
        assert!(Instant::now() < deadline, "no renewal after the window passed:\n{}", log());
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_ne!(renewed, first);
    let l = log();
    assert!(l.contains("renewal information suggests renewal in 0s"), "{l}");

    // The CA is down at the next start: the renewed certificate is
    // served, and the check is retried later.
    s.quit();
    ca.stop_pebble();
    std::fs::write(&log_path, "").unwrap();
    s.relaunch().unwrap();
    assert_eq!(serial(https, "example.test").as_deref(), Some(renewed.as_str()), "the stored certificate");
    let l = wait_contains(&log_path, "while checking renewal information", Duration::from_secs(10));
    let line = line_with(&l, "while checking renewal information");
    assert!(line.contains("[warn]") && line.contains("connect() failed"), "{line}");
    assert_eq!(serial(https, "example.test").as_deref(), Some(renewed.as_str()), "still served");
}

/// `key=rsa` and `account_key rsa:2048` (RS256 requests), and
/// `preferred_chain` naming the root of the second of the chains Pebble
/// offers: the certificate is RSA and its chain leads to that root, not
/// to the default one.
#[test]
fn rsa_keys_and_the_preferred_chain() {
    if nginx_mode() {
        return;
    }
    let mut ca = Ca::new();
    let pebble_port = free_port();
    let http = format!(
        "{}{}{}",
        issuer(&ca, pebble_port, "account_key rsa:2048;\n  preferred_chain \"CHAIN\";"),
        tls_server(1, "example.test", "key=rsa"),
        tls_server(2, "ec.example.test", "key=ecdsa:384")
    );
    let s = builder().ports(3).http(&http).start();
    let (web, rsa, ec) = (s.ports[0], s.ports[1], s.ports[2]);
    let log_path = s.path("logs/error.log");
    let log = || read_lossy(&log_path);
    ca.start_pebble_env(web, free_port(), pebble_port, "", &[("PEBBLE_ALTERNATE_ROOTS", "2")]);
    let (root0, root1, root2) = (ca.root_n(0), ca.root_n(1), ca.root_n(2));
    let wanted = subject_cn(&root2);
    assert!(!wanted.is_empty() && wanted != subject_cn(&root0), "distinct roots");
    let conf = std::fs::read_to_string(s.conf_path()).unwrap().replace("\"CHAIN\"", &format!("\"{wanted}\""));
    std::fs::write(s.conf_path(), conf).unwrap();
    s.signal("reload");

    let (info, verified) = wait_served(rsa, "example.test", Some(&root2), Duration::from_secs(60), &log);
    assert!(verified, "the chain leads to the preferred root:\n{info}");
    let (_, via_default) = served(rsa, "example.test", Some(&root0)).unwrap();
    assert!(!via_default, "not the default chain");
    let (_, via_other) = served(rsa, "example.test", Some(&root1)).unwrap();
    assert!(!via_other, "not the first alternate");
    let (info, verified) = wait_served(ec, "ec.example.test", Some(&root2), Duration::from_secs(60), &log);
    assert!(verified, "{info}");

    let state = s.path("acme");
    let key_of = |name: &str| {
        let crt = std::fs::read_dir(&state)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.extension().is_some_and(|x| x == "crt") && p.file_name().unwrap().to_string_lossy().starts_with(name)
            })
            .unwrap_or_else(|| panic!("{name}'s certificate in {}", state.display()));
        x509_text(&crt)
    };
    let text = key_of("example.test-");
    assert!(text.contains("Public Key Algorithm: rsaEncryption") && text.contains("(2048 bit)"), "{text}");
    let text = key_of("ec.example.test-");
    assert!(text.contains("Public Key Algorithm: id-ecPublicKey") && text.contains("NIST CURVE: P-384"), "{text}");
    let k = Command::new("openssl")
        .args(["pkey", "-noout", "-text", "-in"])
        .arg(state.join("account.key"))
        .output()
        .unwrap();
    let k = String::from_utf8_lossy(&k.stdout);
    assert!(k.contains("Private-Key: (2048 bit"), "an RSA account key: {}", k.lines().next().unwrap_or(""));
}
