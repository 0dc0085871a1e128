//! Pebble (Let's Encrypt's test ACME server) with `pebble-challtestsrv`
//! as its DNS server (every name is 127.0.0.1), on loopback, for tests
//! that drive an outside ACME client (certbot) against sluice. Both come
//! from `scripts/install-pebble` (Go modules, into target/tools).
//! tests/acme.rs keeps its own copy, which can also restart Pebble and
//! validate TLS-ALPN-01.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, port_accepts, temp_dir};

/// target/tools, after `scripts/install-pebble` made sure it is filled.
pub fn tools() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(root.join("scripts/install-pebble")).output().expect("scripts/install-pebble");
    assert!(out.status.success(), "scripts/install-pebble failed:\n{}", String::from_utf8_lossy(&out.stderr));
    root.join("target/tools")
}

fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !port_accepts(port) {
        assert!(Instant::now() < deadline, "{what} did not start on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running Pebble and its DNS server; both killed on drop.
pub struct Pebble {
    pebble: Child,
    dns: Child,
    /// The ACME port: the directory is `https://localhost:PORT/dir`.
    pub port: u16,
    /// The management port (`/roots/0`).
    pub mgmt: u16,
    tools: PathBuf,
    /// Pebble's settings and logs.
    pub dir: PathBuf,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for c in [&mut self.pebble, &mut self.dns] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Pebble {
    /// Starts both, Pebble validating HTTP-01 by fetching from
    /// `http_port` on 127.0.0.1. Every nonce is accepted: the client
    /// under test is not what is being tested, and certbot retries a
    /// rejected nonce only once.
    pub fn start(http_port: u16) -> Pebble {
        let tools = tools();
        let dir = temp_dir("pebble");
        let dns_port = free_port();
        let dns = Command::new(tools.join("bin/pebble-challtestsrv"))
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", ""])
            .stdout(std::fs::File::create(dir.join("dns.log")).expect("dns.log"))
            .stderr(Stdio::null())
            .spawn()
            .expect("pebble-challtestsrv");
        let (port, mgmt) = (free_port(), free_port());
        let t = tools.join("pebble");
        let conf = format!(
            r#"{{"pebble":{{"listenAddress":"127.0.0.1:{port}","managementListenAddress":"127.0.0.1:{mgmt}",
            "certificate":"{}","privateKey":"{}","httpPort":{http_port},"tlsPort":{},"ocspResponderURL":"",
            "externalAccountBindingRequired":false,"retryAfter":{{"authz":1,"order":1}},"keyAlgorithm":"ecdsa"}}}}"#,
            t.join("cert.pem").display(),
            t.join("key.pem").display(),
            free_port()
        );
        std::fs::write(dir.join("pebble.json"), conf).expect("pebble.json");
        let pebble = match Command::new(tools.join("bin/pebble"))
            .arg("-config")
            .arg(dir.join("pebble.json"))
            .args(["-dnsserver", &format!("127.0.0.1:{dns_port}")])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .env_remove("PEBBLE_VA_ALWAYS_VALID")
            .stdout(std::fs::File::create(dir.join("pebble.log")).expect("pebble.log"))
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                let mut dns = dns;
                let _ = dns.kill();
                let _ = dns.wait();
                panic!("pebble: {e}");
            }
        };
        let p = Pebble { pebble, dns, port, mgmt, tools, dir };
        // The DNS server listens on TCP too.
        wait_port(dns_port, "pebble-challtestsrv");
        wait_port(p.port, "pebble");
        wait_port(p.mgmt, "pebble's management interface");
        p
    }

    /// The ACME directory URL (Pebble's certificate names localhost).
    pub fn directory(&self) -> String {
        format!("https://localhost:{}/dir", self.port)
    }

    /// The minica root that signs Pebble's own HTTPS certificate.
    pub fn minica(&self) -> PathBuf {
        self.tools.join("pebble/pebble.minica.pem")
    }

    /// The root of this Pebble's issuing chain (from its management API).
    pub fn root(&self) -> PathBuf {
        let p = self.dir.join("root.pem");
        let out = Command::new("curl")
            .args(["-sfk", "-o"])
            .arg(&p)
            .arg(format!("https://127.0.0.1:{}/roots/0", self.mgmt))
            .output()
            .expect("curl");
        assert!(out.status.success(), "pebble's root: {}", String::from_utf8_lossy(&out.stderr));
        p
    }

    /// Pebble's own log (the validations it made).
    pub fn log(&self) -> String {
        super::read_lossy(&self.dir.join("pebble.log"))
    }
}
