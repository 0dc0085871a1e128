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

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::tls::nginx_mode;
use common::*;

fn tools() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/install-pebble")).output().expect("scripts/install-pebble");
    assert!(out.status.success(), "scripts/install-pebble failed:\n{}", String::from_utf8_lossy(&out.stderr));
    root.join("target/tools")
}

/// Pebble and its DNS server; both killed on drop.
struct Ca {
    pebble: Option<Child>,
    dns: Child,
    dns_port: u16,
    port: u16,
    mgmt: u16,
    tools: PathBuf,
    dir: PathBuf,
}

impl Drop for Ca {
    fn drop(&mut self) {
        self.stop_pebble();
        let _ = self.dns.kill();
        let _ = self.dns.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !port_accepts(port) {
        assert!(Instant::now() < deadline, "{what} did not start on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Ca {
    fn new() -> Ca {
        let tools = tools();
        let dir = temp_dir("pebble");
        let dns_port = free_port();
        let dns = Command::new(tools.join("bin/pebble-challtestsrv"))
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .stdout(std::fs::File::create(dir.join("dns.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble-challtestsrv");
        // The DNS server listens on TCP too.
        wait_port(dns_port, "pebble-challtestsrv");
        Ca { pebble: None, dns, dns_port, port: 0, mgmt: 0, tools, dir }
    }

    /// Starts Pebble on `port` (a fresh one: new roots, no accounts)
    /// validating HTTP-01 on `http_port`.
    fn start_pebble(&mut self, http_port: u16, port: u16) {
        self.start_pebble_tls(http_port, free_port(), port);
    }

    /// As `start_pebble`, validating TLS-ALPN-01 on `tls_port`.
    fn start_pebble_tls(&mut self, http_port: u16, tls_port: u16, port: u16) {
        self.start_pebble_with(http_port, tls_port, port, "");
    }

    /// As `start_pebble_tls`, with `extra` added to Pebble's settings
    /// (JSON members, each followed by a comma).
    fn start_pebble_with(&mut self, http_port: u16, tls_port: u16, port: u16, extra: &str) {
        self.stop_pebble();
        self.port = port;
        self.mgmt = free_port();
        let t = self.tools.join("pebble");
        let conf = format!(
            r#"{{"pebble":{{{extra}"listenAddress":"127.0.0.1:{}","managementListenAddress":"127.0.0.1:{}",
            "certificate":"{}","privateKey":"{}","httpPort":{http_port},"tlsPort":{},"ocspResponderURL":"",
            "externalAccountBindingRequired":false,"retryAfter":{{"authz":1,"order":1}},"keyAlgorithm":"ecdsa"}}}}"#,
            self.port,
            self.mgmt,
            t.join("cert.pem").display(),
            t.join("key.pem").display(),
            tls_port
        );
        std::fs::write(self.dir.join("pebble.json"), conf).unwrap();
        let child = Command::new(self.tools.join("bin/pebble"))
            .arg("-config")
            .arg(self.dir.join("pebble.json"))
            .args(["-dnsserver", &format!("127.0.0.1:{}", self.dns_port)])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env_remove("PEBBLE_VA_ALWAYS_VALID")
            .stdout(std::fs::File::create(self.dir.join("pebble.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble");
        self.pebble = Some(child);
        wait_port(self.port, "pebble");
        wait_port(self.mgmt, "pebble's management interface");
    }

    fn stop_pebble(&mut self) {
        if let Some(mut c) = self.pebble.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The root of this Pebble's issuing chain (from its management API).
    fn root(&self) -> PathBuf {
        let p = self.dir.join(format!("root-{}.pem", self.mgmt));
        let out = Command::new("curl")
            .args(["-sfk", "-o"])
            .arg(&p)
            .arg(format!("https://127.0.0.1:{}/roots/0", self.mgmt))
            .output()
            .unwrap();
        assert!(out.status.success(), "pebble's root: {}", String::from_utf8_lossy(&out.stderr));
        p
    }

    fn minica(&self) -> PathBuf {
        self.tools.join("pebble/pebble.minica.pem")
    }
}

/// What `openssl s_client -servername NAME` got: None for a failed
/// handshake, else the leaf's `-serial -issuer -ext subjectAltName` text,
/// and whether the chain verified against `ca`.
fn served(port: u16, name: &str, ca: Option<&Path>) -> Option<(String, bool)> {
    let mut c = Command::new("openssl");
    c.args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-servername", name, "-verify_hostname", name]);
    if let Some(ca) = ca {
        c.arg("-CAfile").arg(ca);
    }
    c.stdin(Stdio::null());
    let out = run_bounded(c, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = text.find("-----BEGIN CERTIFICATE-----")?;
    let end = text.find("-----END CERTIFICATE-----")? + "-----END CERTIFICATE-----".len();
    let mut x = Command::new("openssl")
        .args(["x509", "-noout", "-serial", "-issuer", "-ext", "subjectAltName"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    x.stdin.take().unwrap().write_all(&text.as_bytes()[start..end]).unwrap();
    let info = x.wait_with_output().unwrap();
    Some((String::from_utf8_lossy(&info.stdout).into_owned(), text.contains("Verify return code: 0 (ok)")))
}

fn serial_of(info: &str) -> String {
    info.lines().find_map(|l| l.strip_prefix("serial=")).unwrap_or("").to_string()
}

/// Waits for a certificate to be served for `name`.
fn wait_served(port: u16, name: &str, ca: Option<&Path>, limit: Duration, log: &dyn Fn() -> String) -> (String, bool) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(got) = served(port, name, ca) {
            return got;
        }
        assert!(Instant::now() < deadline, "no certificate for {name} within {limit:?}; error.log:\n{}", log());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn conf(ca: &Ca, pebble_port: u16) -> String {
    format!(
        "resolver 127.0.0.1:{dns};\n\
         acme_issuer pebble {{\n  uri https://127.0.0.1:{pebble_port}/dir;\n  \
         ssl_trusted_certificate {minica};\n  contact admin@example.test;\n  \
         state_path acme;\n  accept_terms_of_service;\n}}\n\
         acme_shared_zone zone=ngx_acme_shared:1M;\n\
         server {{ listen 127.0.0.1:{{port0}}; server_name example.test; location / {{ return 404; }} }}\n\
         server {{\n  listen 127.0.0.1:{{port1}} ssl;\n  server_name example.test www.example.test;\n  \
         acme_certificate pebble;\n  ssl_certificate $acme_certificate;\n  ssl_certificate_key $acme_certificate_key;\n  \
         location / {{ return 200 \"acme ok\\n\"; }}\n}}\n",
        dns = ca.dns_port,
        minica = ca.minica().display()
    )
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// The state directory's certificate files (`ID.crt`, `ID.key`).
fn cert_files(dir: &Path) -> (PathBuf, PathBuf) {
    let mut crt = None;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "crt") {
            assert!(crt.is_none(), "one certificate in {}", dir.display());
            crt = Some(p);
        }
    }
    let crt = crt.expect("a .crt in the state directory");
    let key = crt.with_extension("key");
    (crt, key)
}

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
            "account_key ecdsa:384; challenge http; contact admin@example.test; state_path off; accept_terms_of_service;"
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
            format!("{resolver}{}{}", issuer(""), server("acme_certificate example key=rsa:2048;")),
            "RSA keys are not supported by sluice yet",
        ),
        (format!("{resolver}{}{}", issuer("account_key rsa:1024;"), server("")), "unsupported key size"),
        (format!("{resolver}{}{}", issuer("challenge dns-01;"), server("")), "unsupported challenge \"dns-01\""),
        (format!("{resolver}{}{}", issuer("profile short maybe;"), server("")), "invalid parameter \"maybe\""),
        (
            format!("{resolver}{}{}", issuer("external_account_key kid data:!!;"), server("")),
            "invalid external account key \"data:!!\"",
        ),
        (format!("{resolver}{}{}", issuer("external_account_key kid missing.key;"), server("")), "cannot load key"),
        (format!("{resolver}{}{}", issuer("preferred_chain X;"), server("")), "is not supported by sluice yet"),
    ] {
        let (ok, err) = check(http.clone());
        assert!(!ok, "refused:\n{http}");
        assert!(err.contains("[emerg]") && err.contains(want) && err.contains("sluice.conf:"), "{want}:\n{err}");
    }
}
