//! TLS and HTTP/2 test helpers: a throwaway PKI made with the `openssl` CLI,
//! and wrappers for the real clients the tests drive (`curl`, `openssl
//! s_client`, `h2load`).
//!
//! The PKI is generated once per test process (about half a second, most of
//! it the RSA key) and kept in memory; `tls_files()` writes it under a
//! server's prefix as `conf/tls/*`, so configs say `ssl_certificate
//! tls/a.test.ecdsa.crt;` (relative to the conf directory, as in nginx) and
//! everything is removed with the prefix.
//!
//! Files written by `tls_files()` (all signed by `ca.crt` unless noted):
//! - `ca.crt`: the test CA (ECDSA P-256)
//! - `a.test.ecdsa.crt/.key`, `a.test.rsa.crt/.key`: SAN a.test, ECDSA
//!   P-256 and RSA-2048
//! - `b.test.ecdsa.crt/.key`: SAN b.test
//! - `localhost.ecdsa.crt/.key`: SAN localhost and IP 127.0.0.1 (default
//!   servers)
//! - `client.crt/.key`: a client certificate (CN=client.test, clientAuth)
//! - `rogue.crt/.key`: a self-signed client certificate the CA did not sign

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use super::*;

// ---------------------------------------------------------------------------
// modes

/// True when the suite runs against /usr/sbin/nginx (`SLUICE_TEST_NGINX`).
pub fn nginx_mode() -> bool {
    std::env::var_os("SLUICE_TEST_NGINX").is_some()
}

/// For tests of sluice-only behaviour: true (and a note on stdout) when the
/// test should be skipped because it runs against nginx.
pub fn skip_in_nginx_mode(what: &str) -> bool {
    if nginx_mode() {
        println!("note: skipped in nginx mode: {what}");
        return true;
    }
    false
}

// ---------------------------------------------------------------------------
// the test PKI

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum KeyKind {
    /// ECDSA P-256.
    Ecdsa,
    /// RSA 2048.
    Rsa,
}

/// A certificate and its private key (PEM; the key is PKCS#8).
#[derive(Clone)]
pub struct CertKey {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

struct Ca {
    pem: Vec<u8>,
    key: Vec<u8>,
}

static CA: OnceLock<Ca> = OnceLock::new();
static LEAVES: Mutex<Option<HashMap<String, CertKey>>> = Mutex::new(None);

pub fn openssl(args: &[&str], cwd: &Path) {
    let mut c = Command::new("openssl");
    c.args(args).current_dir(cwd);
    let o = run_bounded(c, Duration::from_secs(30));
    assert!(o.status.success(), "openssl {args:?} failed:\n{}", String::from_utf8_lossy(&o.stderr));
}

pub fn genkey(kind: KeyKind, out: &str, cwd: &Path) {
    match kind {
        KeyKind::Ecdsa => {
            openssl(&["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out], cwd)
        }
        KeyKind::Rsa => {
            openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", out], cwd)
        }
    }
}

/// The CA, created on first use and kept in memory (each signing writes
/// it to that leaf's scratch directory).
fn ca() -> &'static Ca {
    CA.get_or_init(|| {
        let dir = temp_dir("pki");
        fs::write(
            dir.join("ca.cnf"),
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = sluice test CA\n\
             [v3_ca]\nbasicConstraints = critical, CA:TRUE\nkeyUsage = critical, keyCertSign, cRLSign\n\
             subjectKeyIdentifier = hash\n",
        )
        .unwrap();
        genkey(KeyKind::Ecdsa, "ca.key", &dir);
        let req = "req -x509 -new -key ca.key -out ca.crt -days 30 -config ca.cnf -extensions v3_ca";
        openssl(&req.split(' ').collect::<Vec<_>>(), &dir);
        let ca = Ca { pem: fs::read(dir.join("ca.crt")).unwrap(), key: fs::read(dir.join("ca.key")).unwrap() };
        let _ = fs::remove_dir_all(&dir);
        ca
    })
}

/// The CA certificate (PEM).
pub fn ca_pem() -> Vec<u8> {
    ca().pem.clone()
}

/// The CA's private key (PEM), for tests that sign more with it (an OCSP
/// response, a leaf with other extensions or validity).
pub fn ca_key_pem() -> Vec<u8> {
    ca().key.clone()
}

/// A certificate for `names` (CN = the first name, every name a SAN; names
/// that parse as IPv4 addresses become IP SANs), signed by the test CA.
/// `client` makes a clientAuth certificate instead of a serverAuth one.
/// Cached per process.
pub fn issue(kind: KeyKind, names: &[&str], client: bool) -> CertKey {
    let id = format!("{kind:?}-{}-{client}", names.join(","));
    // Held while generating, so parallel tests wanting the same leaf wait
    // for one generation instead of each making their own.
    let mut cache = LEAVES.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(ck) = cache.get(&id) {
        return ck.clone();
    }
    let ca = ca();
    let dir = temp_dir("leaf");
    let san: Vec<String> = names
        .iter()
        .map(|n| if n.parse::<std::net::Ipv4Addr>().is_ok() { format!("IP:{n}") } else { format!("DNS:{n}") })
        .collect();
    let usage = match (kind, client) {
        (_, true) => "keyUsage = critical, digitalSignature\nextendedKeyUsage = clientAuth\n",
        (KeyKind::Ecdsa, false) => "keyUsage = critical, digitalSignature\nextendedKeyUsage = serverAuth\n",
        (KeyKind::Rsa, false) => {
            "keyUsage = critical, digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n"
        }
    };
    fs::write(
        dir.join("leaf.cnf"),
        format!(
            "[v3]\nbasicConstraints = critical, CA:FALSE\n{usage}subjectAltName = {}\n\
             subjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid\n",
            san.join(",")
        ),
    )
    .unwrap();
    genkey(kind, "leaf.key", &dir);
    openssl(&["req", "-new", "-key", "leaf.key", "-subj", &format!("/CN={}", names[0]), "-out", "leaf.csr"], &dir);
    let serial = format!("0x{:x}", 0x1000 + cache.len() + 1);
    fs::write(dir.join("ca.crt"), &ca.pem).unwrap();
    fs::write(dir.join("ca.key"), &ca.key).unwrap();
    let sign =
        "x509 -req -in leaf.csr -CA ca.crt -CAkey ca.key -days 30 -extfile leaf.cnf -extensions v3 -out leaf.crt";
    let mut args: Vec<&str> = sign.split(' ').collect();
    args.extend(["-set_serial", &serial]);
    openssl(&args, &dir);
    let ck = CertKey { cert: fs::read(dir.join("leaf.crt")).unwrap(), key: fs::read(dir.join("leaf.key")).unwrap() };
    let _ = fs::remove_dir_all(&dir);
    cache.insert(id, ck.clone());
    ck
}

/// A version 1 CRL (what `openssl ca -gencrl` writes without
/// `crl_extensions`) signed by `issuer` in `dir`, revoking `revoke`
/// (certificate files) first; written to `out`.
pub fn v1_crl(dir: &std::path::Path, issuer: &str, revoke: &[&str], out: &str) {
    let db = dir.join(format!("{issuer}.db"));
    std::fs::create_dir_all(&db).expect("db");
    std::fs::write(db.join("index"), "").expect("index");
    std::fs::write(
        dir.join(format!("{issuer}.ca.cnf")),
        format!(
            "[ca]\ndefault_ca = c\n[c]\ndatabase = {d}/index\ndefault_md = sha256\ndefault_crl_days = 1\n",
            d = db.display()
        ),
    )
    .expect("ca cnf");
    let (cnf, cert, key) = (format!("{issuer}.ca.cnf"), format!("{issuer}.crt"), format!("{issuer}.key"));
    for r in revoke {
        openssl(&["ca", "-config", &cnf, "-keyfile", &key, "-cert", &cert, "-revoke", r], dir);
    }
    openssl(&["ca", "-gencrl", "-config", &cnf, "-keyfile", &key, "-cert", &cert, "-out", out], dir);
}

/// A CRL signed by the test CA revoking the certificate in `revoked`
/// (PEM); `days` of validity (0: expired an hour ago).
pub fn crl_revoking(revoked: &[u8], days: i32) -> PathBuf {
    let dir = temp_dir("crl");
    fs::write(dir.join("ca.key"), ca_key_pem()).expect("ca key");
    fs::write(dir.join("ca.crt"), ca_pem()).expect("ca");
    fs::write(dir.join("r.crt"), revoked).expect("revoked");
    let out = Command::new("openssl")
        .args(["x509", "-in", "r.crt", "-noout", "-serial", "-subject", "-enddate", "-nameopt", "compat"])
        .current_dir(&dir)
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let field = |k: &str| text.lines().find_map(|l| l.strip_prefix(k)).unwrap_or("").trim().to_string();
    // index.txt: status, expiry, revocation time, serial, file, subject.
    let line = format!("R\t491231235959Z\t250101000000Z\t{}\tunknown\t{}\n", field("serial="), field("subject="));
    fs::write(dir.join("index.txt"), line).expect("index");
    fs::write(dir.join("crlnumber"), "01\n").expect("crlnumber");
    fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\ncrlnumber = crlnumber\ndefault_md = sha256\n",
    )
    .expect("cnf");
    let mut args =
        vec!["ca", "-gencrl", "-config", "ca.cnf", "-keyfile", "ca.key", "-cert", "ca.crt", "-out", "crl.pem"];
    let hours;
    if days > 0 {
        hours = format!("{}", days * 24);
    } else {
        // Already past its next update: openssl takes no negative hours,
        // so the CRL is dated in the past with -crl_lastupdate/-crl_nextupdate.
        hours = String::new();
        args.extend(["-crl_lastupdate", "20250101000000Z", "-crl_nextupdate", "20250102000000Z"]);
    }
    if !hours.is_empty() {
        args.extend(["-crlhours", &hours]);
    }
    openssl(&args, &dir);
    dir.join("crl.pem")
}

/// A self-signed client certificate (not from the test CA).
pub fn rogue_client() -> CertKey {
    static ROGUE: OnceLock<CertKey> = OnceLock::new();
    ROGUE
        .get_or_init(|| {
            let dir = temp_dir("rogue");
            genkey(KeyKind::Ecdsa, "r.key", &dir);
            openssl(
                &["req", "-x509", "-new", "-key", "r.key", "-subj", "/CN=rogue client", "-days", "30", "-out", "r.crt"],
                &dir,
            );
            let ck = CertKey { cert: fs::read(dir.join("r.crt")).unwrap(), key: fs::read(dir.join("r.key")).unwrap() };
            let _ = fs::remove_dir_all(&dir);
            ck
        })
        .clone()
}

/// Adds the standard PKI files under `conf/tls/` of a server's prefix.
pub trait TlsFiles {
    fn tls_files(self) -> Self;
}

impl TlsFiles for ServerBuilder {
    fn tls_files(self) -> Self {
        let mut b = self.file("conf/tls/ca.crt", ca_pem());
        let set: [(&str, KeyKind, &[&str], bool); 6] = [
            ("a.test.ecdsa", KeyKind::Ecdsa, &["a.test"], false),
            ("a.test.rsa", KeyKind::Rsa, &["a.test"], false),
            ("b.test.ecdsa", KeyKind::Ecdsa, &["b.test"], false),
            ("localhost.ecdsa", KeyKind::Ecdsa, &["localhost", "127.0.0.1"], false),
            ("client", KeyKind::Ecdsa, &["client.test"], true),
            ("rogue", KeyKind::Ecdsa, &[], true),
        ];
        for (name, kind, names, client) in set {
            let ck = if name == "rogue" { rogue_client() } else { issue(kind, names, client) };
            b = b.file(&format!("conf/tls/{name}.crt"), ck.cert).file(&format!("conf/tls/{name}.key"), ck.key);
        }
        b
    }
}

/// Absolute path of a file written by `tls_files()` (e.g. "ca.crt").
pub fn tls_path(s: &TestServer, name: &str) -> String {
    s.path(&format!("conf/tls/{name}")).display().to_string()
}

// ---------------------------------------------------------------------------
// curl

/// One transfer as curl saw it.
#[derive(Debug, Clone)]
pub struct Fetch {
    /// `%{http_code}` (0 when no response).
    pub status: u16,
    /// `%{http_version}`: "1.1", "2", ...
    pub version: String,
    /// `%{num_connects}`: new connections this transfer needed.
    pub num_connects: u32,
    /// `%{ssl_verify_result}` (0 = verified).
    pub verify: i64,
    /// Header lines of the response (status line excluded).
    pub headers: Vec<(String, String)>,
    /// The status line ("HTTP/2 200", "HTTP/1.1 404 Not Found").
    pub status_line: String,
    pub body: Vec<u8>,
}

impl Fetch {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    pub fn must(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("no {name} header in {:?} {:?}", self.status_line, self.headers))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The result of one curl run (possibly several URLs).
#[derive(Debug)]
pub struct CurlRun {
    pub ok: bool,
    pub exit: Option<i32>,
    pub stderr: String,
    pub fetches: Vec<Fetch>,
}

impl CurlRun {
    /// The single transfer; panics with curl's stderr if curl failed.
    pub fn one(mut self) -> Fetch {
        assert!(self.ok && self.fetches.len() == 1, "curl failed ({:?}): {}", self.exit, self.stderr);
        self.fetches.remove(0)
    }
}

/// Runs curl on `urls` in one invocation (so connections can be reused),
/// with `extra` options before the URLs. `https://NAME:PORT/` URLs are
/// pinned to 127.0.0.1 with `--resolve` and verified against the test CA
/// of server `s`.
pub fn curl_fetch(s: &TestServer, urls: &[&str], extra: &[&str]) -> CurlRun {
    let dir = temp_dir("curl");
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "30", "--cacert", &tls_path(s, "ca.crt")]);
    c.arg("-D").arg(dir.join("headers"));
    c.args(["-w", "%{http_code} %{http_version} %{num_connects} %{ssl_verify_result}\\n"]);
    let mut resolved = Vec::new();
    for u in urls {
        if let Some(rest) = u.strip_prefix("https://") {
            let hostport = rest.split('/').next().unwrap();
            if !resolved.contains(&hostport) {
                c.arg("--resolve").arg(format!("{hostport}:127.0.0.1"));
                resolved.push(hostport);
            }
        }
    }
    c.args(extra);
    for (i, u) in urls.iter().enumerate() {
        c.arg("-o").arg(dir.join(format!("body{i}"))).arg(u);
    }
    let o = run_bounded(c, Duration::from_secs(40));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let heads = read_lossy(&dir.join("headers"));
    // -D appends every transfer's head; a blank line ends each.
    let blocks: Vec<&str> = heads.split("\r\n\r\n").filter(|b| !b.trim().is_empty()).collect();
    let mut fetches = Vec::new();
    for (i, line) in out.lines().enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        if f.len() != 4 {
            continue;
        }
        let block = blocks.get(i).copied().unwrap_or("");
        let mut lines = block.lines();
        // (curl writes "HTTP/2 200 " for h2: trimmed)
        let status_line = lines.next().unwrap_or("").trim().to_string();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        fetches.push(Fetch {
            status: f[0].parse().unwrap_or(0),
            version: f[1].to_string(),
            num_connects: f[2].parse().unwrap_or(0),
            verify: f[3].parse().unwrap_or(-1),
            headers,
            status_line,
            body: fs::read(dir.join(format!("body{i}"))).unwrap_or_default(),
        });
    }
    let _ = fs::remove_dir_all(&dir);
    CurlRun {
        ok: o.status.success(),
        exit: o.status.code(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
        fetches,
    }
}

/// One GET of `url` with curl options `extra`; panics if curl fails.
pub fn fetch(s: &TestServer, url: &str, extra: &[&str]) -> Fetch {
    curl_fetch(s, &[url], extra).one()
}

// ---------------------------------------------------------------------------
// openssl s_client

/// What `openssl s_client` printed.
#[derive(Debug)]
pub struct SClient {
    /// s_client's exit status was 0 (handshake done).
    pub ok: bool,
    /// stdout and stderr, in that order.
    pub out: String,
    /// stdout alone: with `-quiet`, exactly the bytes the server sent after
    /// the handshake.
    pub stdout: String,
}

impl SClient {
    fn line_after(&self, prefix: &str) -> Option<&str> {
        self.out.lines().find_map(|l| l.trim_start().strip_prefix(prefix)).map(str::trim)
    }
    /// True if the handshake resumed a session ("Reused, TLSv1.x, ...").
    pub fn reused(&self) -> bool {
        self.out.lines().any(|l| l.starts_with("Reused, "))
    }
    /// The negotiated protocol: "TLSv1.2", "TLSv1.3" (None if no handshake).
    pub fn protocol(&self) -> Option<String> {
        let l = self.out.lines().find(|l| l.starts_with("New, ") || l.starts_with("Reused, "))?;
        let p = l.split(", ").nth(1)?.to_string();
        if p == "(NONE)" { None } else { Some(p) }
    }
    /// The server certificate's subject line, e.g. "CN = a.test".
    pub fn subject(&self) -> Option<&str> {
        self.line_after("subject=")
    }
    /// "Server public key is N bit".
    pub fn server_key_bits(&self) -> Option<u32> {
        self.line_after("Server public key is ")?.split(' ').next()?.parse().ok()
    }
    /// The leaf's key type from the chain's "a:PKEY:" line
    /// ("id-ecPublicKey" or "rsaEncryption").
    pub fn server_key_type(&self) -> Option<&str> {
        self.line_after("a:PKEY: ")?.split(',').next()
    }
    /// "Peer signature type: ECDSA" / "RSA-PSS".
    pub fn peer_signature_type(&self) -> Option<&str> {
        self.line_after("Peer signature type:")
    }
    /// "ALPN protocol: h2" (None for "No ALPN negotiated").
    pub fn alpn(&self) -> Option<&str> {
        self.line_after("ALPN protocol:")
    }
    /// "Verification: OK" was printed.
    pub fn verified(&self) -> bool {
        self.out.lines().any(|l| l.trim() == "Verification: OK")
    }
    /// The output contains `needle` (e.g. a line of the HTTP response).
    pub fn contains(&self, needle: &str) -> bool {
        self.out.contains(needle)
    }
}

/// `openssl s_client -connect 127.0.0.1:PORT -CAfile CA -ign_eof ARGS`,
/// sending `send` on stdin; s_client runs until the server closes.
/// Use a `Connection: close` request as `send` so that it does, and so that
/// TLS 1.3 session tickets (sent after the handshake) are read before exit.
/// With an empty `send`, no `-ign_eof`: s_client quits right after the
/// handshake (for checks of the handshake alone, e.g. ALPN h2).
pub fn s_client(s: &TestServer, port: u16, args: &[&str], send: &str) -> SClient {
    let mut c = Command::new("openssl");
    c.args(["s_client", "-connect", &format!("127.0.0.1:{port}"), "-CAfile", &tls_path(s, "ca.crt")]);
    if !send.is_empty() {
        c.arg("-ign_eof");
    }
    c.args(args);
    let o = run_with_input(c, send.as_bytes(), Duration::from_secs(15));
    SClient {
        ok: o.status.success(),
        out: format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
    }
}

/// A `GET PATH` for `host` with `Connection: close`, for s_client's stdin.
pub fn get_close(host: &str, path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// Runs a command with `input` on stdin and piped output, killed after
/// `limit`.
pub fn run_with_input(mut c: Command, input: &[u8], limit: Duration) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {c:?}: {e}"));
    let id = child.id();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
        // dropped: EOF, which -ign_eof ignores
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => r.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-KILL").arg(id.to_string()).status();
            panic!("command {c:?} did not finish within {limit:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// h2load

/// h2load's "requests:" summary line.
#[derive(Debug)]
pub struct H2load {
    pub total: u64,
    pub started: u64,
    pub done: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub errored: u64,
    /// The "status codes:" line.
    pub status_codes: String,
    pub output: String,
}

/// Runs `h2load ARGS` (bounded to 60 s) and parses its summary.
pub fn h2load(args: &[&str]) -> H2load {
    let mut c = Command::new("h2load");
    c.args(args);
    let o = run_bounded(c, Duration::from_secs(60));
    let output = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    // "requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout"
    let line = output
        .lines()
        .find(|l| l.starts_with("requests: "))
        .unwrap_or_else(|| panic!("no requests: line in h2load output:\n{output}"));
    let num = |label: &str| -> u64 {
        line.trim_start_matches("requests: ")
            .split(", ")
            .find_map(|p| p.strip_suffix(label).map(str::trim))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {label:?} count in {line:?}"))
    };
    let status_codes = output.lines().find(|l| l.starts_with("status codes: ")).unwrap_or("").to_string();
    H2load {
        total: num(" total"),
        started: num(" started"),
        done: num(" done"),
        succeeded: num(" succeeded"),
        failed: num(" failed"),
        errored: num(" errored"),
        status_codes,
        output,
    }
}

// ---------------------------------------------------------------------------
// OCSP responders

/// `openssl ocsp -port` on loopback for the CA `ca` (`ca.crt`, its
/// database `index` in `dir`), signing with `signer.crt`/`signer.key`.
/// Returns once it answers a real query about `probe` (a bare
/// connect-and-close probe leaves OpenSSL 3's responder stuck on that
/// connection); the caller kills it.
pub fn ocsp_responder(dir: &Path, port: u16, index: &str, ca: &str, signer: &str, probe: &str) -> std::process::Child {
    let crt = format!("{ca}.crt");
    let mut child = Command::new("openssl")
        .args(["ocsp", "-index", index, "-port", &port.to_string(), "-CA", &crt])
        .args(["-rsigner", &format!("{signer}.crt"), "-rkey", &format!("{signer}.key"), "-ndays", "1"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl ocsp");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let url = format!("http://127.0.0.1:{port}/");
        let q = Command::new("openssl")
            .args(["ocsp", "-issuer", &crt, "-cert", probe, "-url", &url, "-timeout", "2", "-noverify"])
            .current_dir(dir)
            .output()
            .expect("openssl ocsp query");
        if String::from_utf8_lossy(&q.stdout).contains(&format!("{probe}: ")) {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the OCSP responder for {ca} did not start");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}
