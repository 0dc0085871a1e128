//! Pebble (Let's Encrypt's test CA) and pebble-challtestsrv (its DNS
//! server: every name is 127.0.0.1) for the ACME tests, installed by
//! `scripts/install-pebble` into target/tools, and what a TLS client sees
//! of the certificates sluice serves (`openssl s_client`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

pub fn tools() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/install-pebble")).output().expect("scripts/install-pebble");
    assert!(out.status.success(), "scripts/install-pebble failed:\n{}", String::from_utf8_lossy(&out.stderr));
    root.join("target/tools")
}

/// Pebble and its DNS server; both killed on drop.
pub struct Ca {
    pebble: Option<Child>,
    dns: Child,
    pub dns_port: u16,
    pub port: u16,
    pub mgmt: u16,
    pub tools: PathBuf,
    pub dir: PathBuf,
}

impl Drop for Ca {
    fn drop(&mut self) {
        self.stop_pebble();
        let _ = self.dns.kill();
        let _ = self.dns.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !port_accepts(port) {
        assert!(Instant::now() < deadline, "{what} did not start on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Ca {
    pub fn new() -> Ca {
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

    /// The DNS server, then Pebble on a port of its own validating
    /// HTTP-01 on `http_port`, with `env` for Pebble.
    pub fn started(http_port: u16, env: &[(&str, &str)]) -> Ca {
        let mut ca = Ca::new();
        ca.start_pebble_env(http_port, free_port(), free_port(), "", env);
        ca
    }

    /// The ACME directory URL by name (Pebble's certificate names
    /// localhost).
    pub fn directory(&self) -> String {
        format!("https://localhost:{}/dir", self.port)
    }

    /// Pebble's own log (the validations it made).
    pub fn log(&self) -> String {
        read_lossy(&self.dir.join("pebble.log"))
    }

    /// Starts Pebble on `port` (a fresh one: new roots, no accounts)
    /// validating HTTP-01 on `http_port`.
    pub fn start_pebble(&mut self, http_port: u16, port: u16) {
        self.start_pebble_tls(http_port, free_port(), port);
    }

    /// As `start_pebble`, validating TLS-ALPN-01 on `tls_port`.
    pub fn start_pebble_tls(&mut self, http_port: u16, tls_port: u16, port: u16) {
        self.start_pebble_with(http_port, tls_port, port, "");
    }

    /// As `start_pebble_tls`, with `extra` added to Pebble's settings
    /// (JSON members, each followed by a comma).
    pub fn start_pebble_with(&mut self, http_port: u16, tls_port: u16, port: u16, extra: &str) {
        self.start_pebble_env(http_port, tls_port, port, extra, &[]);
    }

    /// As `start_pebble_with`, with environment variables for Pebble
    /// (`PEBBLE_ALTERNATE_ROOTS`, `PEBBLE_WFE_NONCEREJECT`, ...).
    pub fn start_pebble_env(&mut self, http_port: u16, tls_port: u16, port: u16, extra: &str, env: &[(&str, &str)]) {
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
            .envs(env.iter().copied())
            .stdout(std::fs::File::create(self.dir.join("pebble.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble");
        self.pebble = Some(child);
        wait_port(self.port, "pebble");
        wait_port(self.mgmt, "pebble's management interface");
    }

    pub fn stop_pebble(&mut self) {
        if let Some(mut c) = self.pebble.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The root of this Pebble's issuing chain (from its management API).
    pub fn root(&self) -> PathBuf {
        self.root_n(0)
    }

    /// Root `n`: 0 is the default chain's, 1.. those of the alternate
    /// chains (`PEBBLE_ALTERNATE_ROOTS`).
    pub fn root_n(&self, n: usize) -> PathBuf {
        let p = self.dir.join(format!("root-{}-{n}.pem", self.mgmt));
        let out = Command::new("curl")
            .args(["-sfk", "-o"])
            .arg(&p)
            .arg(format!("https://127.0.0.1:{}/roots/{n}", self.mgmt))
            .output()
            .unwrap();
        assert!(out.status.success(), "pebble's root: {}", String::from_utf8_lossy(&out.stderr));
        p
    }

    /// Makes Pebble answer `ari` (a renewalInfo document) for the
    /// certificate `cert_pem` from now on.
    pub fn set_renewal_info(&self, cert_pem: &str, ari: &str) {
        let body = serde_json::json!({ "Certificate": cert_pem, "ARIResponse": ari }).to_string();
        let out = Command::new("curl")
            .args(["-sfk", "-X", "POST", "--data-binary", &body])
            .arg(format!("https://127.0.0.1:{}/set-renewal-info/", self.mgmt))
            .output()
            .unwrap();
        assert!(out.status.success(), "set-renewal-info: {}", String::from_utf8_lossy(&out.stderr));
    }

    pub fn minica(&self) -> PathBuf {
        self.tools.join("pebble/pebble.minica.pem")
    }
}

/// What `openssl s_client -servername NAME` got: None for a failed
/// handshake, else the leaf's `-serial -issuer -ext subjectAltName` text,
/// and whether the chain verified against `ca`.
pub fn served(port: u16, name: &str, ca: Option<&Path>) -> Option<(String, bool)> {
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

/// The subject CN of a PEM certificate file.
pub fn subject_cn(pem: &Path) -> String {
    let out = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "multiline", "-in"])
        .arg(pem)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("commonName"))
        .map(|v| v.trim_start_matches([' ', '=']).trim().to_string())
        .unwrap_or_default()
}

/// `openssl x509 -text` of a PEM file (its first certificate).
pub fn x509_text(pem: &Path) -> String {
    let out = Command::new("openssl").args(["x509", "-noout", "-text", "-in"]).arg(pem).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn serial_of(info: &str) -> String {
    info.lines().find_map(|l| l.strip_prefix("serial=")).unwrap_or("").to_string()
}

/// Waits for a certificate to be served for `name`.
pub fn wait_served(
    port: u16,
    name: &str,
    ca: Option<&Path>,
    limit: Duration,
    log: &dyn Fn() -> String,
) -> (String, bool) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(got) = served(port, name, ca) {
            return got;
        }
        assert!(Instant::now() < deadline, "no certificate for {name} within {limit:?}; error.log:\n{}", log());
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn conf(ca: &Ca, pebble_port: u16) -> String {
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

pub fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode() & 0o777
}

/// The state directory's certificate files (`ID.crt`, `ID.key`).
pub fn cert_files(dir: &Path) -> (PathBuf, PathBuf) {
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
