//! An outside audit of the default TLS configuration: Debian's `testssl.sh`
//! (package `testssl.sh`, command `testssl`) against `listen ... ssl` with an
//! ECDSA certificate and no other TLS directive, on loopback only.
//!
//! The scan is `--protocols --server-defaults --vulnerable` with `--fast`
//! (about 25 s here). It makes no lookups of its own: `--nodns none` (no
//! DNS), no `--phone-out` (no CRL or OCSP fetches), and `NXCONNECT` set to
//! 127.0.0.1:0 for the probes testssl makes of its openssl binary (which
//! otherwise connect to the name "invalid.").
//!
//! Asserted, from the `--jsonfile` findings: no finding of severity HIGH or
//! CRITICAL and none saying VULNERABLE; SSLv2, SSLv3, TLS 1.0 and TLS 1.1
//! not offered; TLS 1.2 and TLS 1.3 offered.
//!
//! The certificate is the test CA's (passed with `--add-ca`), valid for 90
//! days: testssl rates a certificate expiring within 30 days HIGH and a
//! self-signed one CRITICAL, and those would be verdicts on the test PKI,
//! not on the server. One certificate finding is ignored for the same
//! reason: `cert_revocation` (HIGH when the certificate names neither a CRL
//! nor an OCSP URI, which a private test CA has no use for).
//!
//! With `SLUICE_TEST_NGINX=1` (nginx 1.22.1, OpenSSL 3.0) the same config
//! gets a different protocol list, asserted as such: nginx 1.22's default
//! `ssl_protocols` is `TLSv1 TLSv1.1 TLSv1.2`, so TLS 1.3 is not offered;
//! TLS 1.0 and 1.1 are enabled but still "not offered", because Debian's
//! OpenSSL 3.0 runs at security level 2, which refuses them. Everything else
//! (no HIGH, CRITICAL or VULNERABLE) is the same; nginx gets one extra LOW
//! finding (LUCKY13, "potentially vulnerable, uses TLS CBC ciphers"), which
//! the assertions allow.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;

/// Findings that judge the test certificate rather than the server (see
/// the top of the file).
const IGNORED: &[&str] = &["cert_revocation"];

/// One finding of testssl's flat JSON output.
#[derive(Debug, Clone)]
struct Finding {
    id: String,
    severity: String,
    finding: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}] {}", self.id, self.severity, self.finding)
    }
}

// ---------------------------------------------------------------------------
// a minimal JSON reader (no serde in this crate): testssl's flat file is an
// array of objects whose values are strings.

#[derive(Debug)]
enum Json {
    Str(String),
    Other,
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Result<(), String> {
        self.ws();
        if self.b.get(self.i) == Some(&c) {
            self.i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {}", c as char, self.i))
        }
    }
    fn value(&mut self) -> Result<Json, String> {
        self.ws();
        match self.b.get(self.i) {
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'[') => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Arr(v));
                }
                loop {
                    v.push(self.value()?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(v));
                        }
                        _ => return Err(format!("bad array at byte {}", self.i)),
                    }
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut v = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(v));
                }
                loop {
                    self.ws();
                    let k = self.string()?;
                    self.eat(b':')?;
                    v.push((k, self.value()?));
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(v));
                        }
                        _ => return Err(format!("bad object at byte {}", self.i)),
                    }
                }
            }
            Some(_) => {
                // number, true, false, null
                while self.i < self.b.len() && !b",]} \t\r\n".contains(&self.b[self.i]) {
                    self.i += 1;
                }
                Ok(Json::Other)
            }
            None => Err("unexpected end".into()),
        }
    }
    fn string(&mut self) -> Result<String, String> {
        self.eat(b'"')?;
        let mut out = Vec::new();
        while let Some(&c) = self.b.get(self.i) {
            self.i += 1;
            match c {
                b'"' => return Ok(String::from_utf8_lossy(&out).into_owned()),
                b'\\' => {
                    let e = *self.b.get(self.i).ok_or("unexpected end in escape")?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' | b'f' => {}
                        b'u' => {
                            let hex = std::str::from_utf8(self.b.get(self.i..self.i + 4).ok_or("short \\u")?)
                                .map_err(|e| e.to_string())?;
                            let cp = u32::from_str_radix(hex, 16).map_err(|e| e.to_string())?;
                            self.i += 4;
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                _ => out.push(c),
            }
        }
        Err("unterminated string".into())
    }
}

fn parse_findings(text: &str) -> Result<Vec<Finding>, String> {
    let mut p = Parser { b: text.as_bytes(), i: 0 };
    let Json::Arr(items) = p.value()? else { return Err("not an array".into()) };
    let mut out = Vec::new();
    for it in items {
        let Json::Obj(fields) = it else { continue };
        let get = |k: &str| {
            fields
                .iter()
                .find_map(
                    |(n, v)| if n == k { if let Json::Str(s) = v { Some(s.clone()) } else { None } } else { None },
                )
                .unwrap_or_default()
        };
        out.push(Finding { id: get("id"), severity: get("severity"), finding: get("finding") });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------

fn openssl_in(dir: &Path, args: &[&str]) {
    let mut c = Command::new("openssl");
    c.args(args).current_dir(dir);
    let o = run_bounded(c, Duration::from_secs(30));
    assert!(o.status.success(), "openssl {args:?}:\n{}", stderr_of(&o));
}

/// An ECDSA P-256 certificate for localhost and 127.0.0.1 from the test CA,
/// valid for 90 days (the shared ones are valid for 30, which testssl rates
/// HIGH).
fn long_lived_localhost_cert() -> CertKey {
    let dir = temp_dir("testssl-pki");
    fs::write(dir.join("ca.crt"), ca_pem()).unwrap();
    fs::write(dir.join("ca.key"), ca_key_pem()).unwrap();
    fs::write(
        dir.join("leaf.cnf"),
        "[v3]\nbasicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\n\
         extendedKeyUsage = serverAuth\nsubjectAltName = DNS:localhost, IP:127.0.0.1\n\
         subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n",
    )
    .unwrap();
    openssl_in(&dir, &["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "leaf.key"]);
    openssl_in(&dir, &["req", "-new", "-key", "leaf.key", "-subj", "/CN=localhost", "-out", "leaf.csr"]);
    openssl_in(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-days",
            "90",
            "-extfile",
            "leaf.cnf",
            "-extensions",
            "v3",
            "-set_serial",
            "0x7e57551",
            "-out",
            "leaf.crt",
        ],
    );
    let ck = CertKey { cert: fs::read(dir.join("leaf.crt")).unwrap(), key: fs::read(dir.join("leaf.key")).unwrap() };
    let _ = fs::remove_dir_all(&dir);
    ck
}

/// Runs testssl against 127.0.0.1:port; returns its findings (panics with
/// its output if it did not finish a scan).
fn run_testssl(port: u16, ca_file: &Path) -> Vec<Finding> {
    let work = temp_dir("testssl");
    let json = work.join("findings.json");
    let mut c = Command::new("testssl");
    c.args([
        "--quiet",
        "--color",
        "0",
        "--warnings",
        "batch",
        "--nodns",
        "none",
        "--sneaky",
        "--fast",
        "--openssl",
        "/usr/bin/openssl",
        "--connect-timeout",
        "10",
        "--openssl-timeout",
        "10",
        "--protocols",
        "--server-defaults",
        "--vulnerable",
    ]);
    c.arg("--add-ca").arg(ca_file);
    c.arg("--jsonfile").arg(&json);
    c.arg(format!("127.0.0.1:{port}"));
    // Its scratch files go to our directory; no probe connects to "invalid.".
    c.env("TMPDIR", &work).env("NXCONNECT", "127.0.0.1:0").current_dir(&work);
    let t0 = Instant::now();
    let o = run_bounded(c, Duration::from_secs(150));
    let took = t0.elapsed();
    let text = read_lossy(&json);
    let output = format!("{}{}", stdout_of(&o), stderr_of(&o));
    let findings = parse_findings(&text)
        .unwrap_or_else(|e| panic!("testssl ({}) left no readable JSON ({e}):\n{output}\n--- json:\n{text}", o.status));
    assert!(
        findings.iter().any(|f| f.id == "scanTime"),
        "testssl ({}) did not finish the scan:\n{output}\n--- json:\n{text}",
        o.status
    );
    println!("testssl took {took:?} (exit {})", o.status);
    let _ = fs::remove_dir_all(&work);
    findings
}

#[test]
fn testssl_finds_nothing_high_in_the_default_tls_config() {
    let which = Command::new("testssl").arg("--version").output();
    assert!(which.is_ok(), "testssl is not installed (Debian package testssl.sh: apt-get install -y testssl.sh)");
    let cert = long_lived_localhost_cert();
    let s = builder()
        .file("conf/tls/ca.crt", ca_pem())
        .file("conf/tls/localhost.crt", &cert.cert)
        .file("conf/tls/localhost.key", &cert.key)
        .http(
            "server {\n  listen 127.0.0.1:{port} ssl;\n  ssl_certificate tls/localhost.crt;\n  \
             ssl_certificate_key tls/localhost.key;\n  location / { return 200 \"ok\\n\"; }\n}",
        )
        .start();
    let findings = run_testssl(s.port, &s.path("conf/tls/ca.crt"));
    let all = || findings.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n");

    let bad: Vec<&Finding> = findings
        .iter()
        .filter(|f| !IGNORED.contains(&f.id.as_str()))
        .filter(|f| f.severity == "HIGH" || f.severity == "CRITICAL" || f.finding.contains("VULNERABLE"))
        .collect();
    let ignored: Vec<&Finding> = findings.iter().filter(|f| IGNORED.contains(&f.id.as_str())).collect();
    for f in &ignored {
        println!("ignored (test PKI): {f}");
    }

    // The protocol findings, by id.
    let protocols: BTreeMap<&str, &str> = findings
        .iter()
        .filter(|f| ["SSLv2", "SSLv3", "TLS1", "TLS1_1", "TLS1_2", "TLS1_3"].contains(&f.id.as_str()))
        .map(|f| (f.id.as_str(), f.finding.as_str()))
        .collect();
    // sluice (rustls) speaks TLS 1.2 and 1.3 only. nginx 1.22: see the top
    // of the file.
    let want: [(&str, bool); 6] = if nginx_mode() {
        [("SSLv2", false), ("SSLv3", false), ("TLS1", false), ("TLS1_1", false), ("TLS1_2", true), ("TLS1_3", false)]
    } else {
        [("SSLv2", false), ("SSLv3", false), ("TLS1", false), ("TLS1_1", false), ("TLS1_2", true), ("TLS1_3", true)]
    };
    let mut wrong = Vec::new();
    for (id, offered) in want {
        let got = protocols.get(id).copied().unwrap_or("(no finding)");
        // "offered", "offered with final"; "not offered", "not offered +
        // downgraded to weaker protocol"
        let ok = if offered { got.starts_with("offered") } else { got.starts_with("not offered") };
        if !ok {
            wrong.push(format!("  {id}: {got:?}, expected {}", if offered { "offered" } else { "not offered" }));
        }
    }

    let mut msg = String::new();
    if !bad.is_empty() {
        msg += &format!(
            "findings with severity HIGH/CRITICAL or VULNERABLE:\n{}\n",
            bad.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n")
        );
    }
    if !wrong.is_empty() {
        msg += &format!("protocols:\n{}\n", wrong.join("\n"));
    }
    assert!(msg.is_empty(), "{msg}--- all findings:\n{}", all());
}
