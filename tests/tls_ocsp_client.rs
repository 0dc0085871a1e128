//! `ssl_ocsp`: client certificates checked with real OCSP responders
//! (`openssl ocsp -index ... -port`) on loopback. A root CA issues an
//! intermediate CA, which issues a good and a revoked client certificate;
//! each certificate names its issuer's responder in its Authority
//! Information Access. The client is curl with the certificate; the
//! server answers `$ssl_client_verify`, so what the check decided is what
//! the test reads (a failure is nginx's 400 page with the header set
//! `always`). Checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`), except
//! the stream test (nginx has `ssl_ocsp` in stream only since 1.27.2).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use common::tls::*;
use common::*;

/// The CAs, the client certificates and the two responders (killed on
/// drop): the root's answers about the intermediate, the intermediate's
/// (on `int_port`) about the client certificates.
struct Pki {
    dir: PathBuf,
    responders: Vec<Child>,
    int_port: u16,
}

impl Drop for Pki {
    fn drop(&mut self) {
        for r in &mut self.responders {
            let _ = r.kill();
            let _ = r.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Pki {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// Stops the intermediate's responder (the client certificates' one).
    fn stop_int_responder(&mut self) {
        if let Some(mut r) = self.responders.pop() {
            let _ = r.kill();
            let _ = r.wait();
        }
    }
}

/// An `openssl ca` configuration whose certificates name the responder on
/// `$ENV::AIA`.
const CA_CONF: &str = "[ca]\ndefault_ca = myca\n[myca]\nnew_certs_dir = .\ndatabase = ./$ENV::DB\ndefault_md = sha256\n\
    policy = pol\nserial = ./serial\ndefault_days = 2\ncopy_extensions = none\n[pol]\ncommonName = supplied\n\
    [leaf]\nbasicConstraints = critical,CA:FALSE\nextendedKeyUsage = clientAuth\n\
    authorityInfoAccess = OCSP;URI:http://127.0.0.1:$ENV::AIA/\n\
    [int]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
    authorityInfoAccess = OCSP;URI:http://127.0.0.1:$ENV::AIA/\n\
    [root]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
    [req]\ndistinguished_name = dn\n[dn]\n";

fn run(dir: &Path, args: &[&str], db: &str, aia: u16) {
    let o = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .env("DB", db)
        .env("AIA", aia.to_string())
        .output()
        .expect("openssl");
    assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn pki() -> Pki {
    let dir = temp_dir("ocsp-client");
    let (root_port, int_port) = (free_port(), free_port());
    std::fs::write(dir.join("ca.cnf"), CA_CONF).unwrap();
    for db in ["root.db", "int.db"] {
        std::fs::write(dir.join(db), "").unwrap();
    }
    std::fs::write(dir.join("serial"), "1000\n").unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-config", "ca.cnf"];
    let mut root = vec!["req", "-x509", "-new", "-subj", "/CN=ocsp root/", "-keyout", "root.key", "-out", "root.crt"];
    root.extend(ec);
    root.extend(["-extensions", "root", "-days", "2"]);
    run(&dir, &root, "root.db", root_port);
    let mut csr = vec!["req", "-new", "-subj", "/CN=ocsp int/", "-keyout", "int.key", "-out", "int.csr"];
    csr.extend(ec);
    run(&dir, &csr, "root.db", root_port);
    let sign = ["ca", "-batch", "-config", "ca.cnf", "-keyfile", "root.key", "-cert", "root.crt", "-extensions", "int"];
    let mut s = sign.to_vec();
    s.extend(["-in", "int.csr", "-out", "int.crt"]);
    run(&dir, &s, "root.db", root_port);
    for name in ["good", "revoked"] {
        let (key, csr, crt, subj) =
            (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("/CN={name} client/"));
        let mut req = vec!["req", "-new", "-subj", subj.as_str(), "-keyout", &key, "-out", &csr];
        req.extend(ec);
        run(&dir, &req, "int.db", int_port);
        let sign = ["ca", "-batch", "-config", "ca.cnf", "-keyfile", "int.key", "-cert", "int.crt"];
        let mut s = sign.to_vec();
        s.extend(["-extensions", "leaf", "-in", &csr, "-out", &crt]);
        run(&dir, &s, "int.db", int_port);
        // What the client sends: its certificate and the intermediate.
        let chain = [std::fs::read(dir.join(&crt)).unwrap(), std::fs::read(dir.join("int.crt")).unwrap()].concat();
        std::fs::write(dir.join(format!("{name}-chain.crt")), chain).unwrap();
    }
    let revoke = ["ca", "-config", "ca.cnf", "-revoke", "revoked.crt", "-keyfile", "int.key", "-cert", "int.crt"];
    run(&dir, &revoke, "int.db", int_port);
    let responders = vec![
        ocsp_responder(&dir, root_port, "root.db", "root", "root", "int.crt"),
        ocsp_responder(&dir, int_port, "int.db", "int", "int", "good.crt"),
    ];
    Pki { dir, responders, int_port }
}

/// An https server on `{port}` verifying clients against the root with
/// `ocsp` (the `ssl_ocsp*` directives), answering `$ssl_client_verify`.
fn server(pki: &Pki, ocsp: &str) -> TestServer {
    builder()
        .tls_files()
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port}} ssl; server_name localhost;\n  \
             ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;\n  \
             ssl_verify_client on; ssl_verify_depth 2; ssl_client_certificate {root};\n  {ocsp}\n  \
             add_header X-Verify $ssl_client_verify always;\n  location / {{ return 200 \"$ssl_client_verify\\n\"; }} }}",
            root = pki.path("root.crt")
        ))
        .start()
}

/// One request with `client`'s certificate on a new connection.
fn get(s: &TestServer, pki: &Pki, client: &str) -> Fetch {
    let (cert, key) = (pki.path(&format!("{client}-chain.crt")), pki.path(&format!("{client}.key")));
    let url = format!("https://localhost:{}/", s.port);
    fetch(s, &url, &["--cert", &cert, "--key", &key])
}

#[test]
fn leaf_good_passes_and_revoked_gets_400() {
    let pki = pki();
    let s = server(&pki, "ssl_ocsp leaf;");
    let good = get(&s, &pki, "good");
    assert_eq!((good.status, good.text().as_str()), (200, "SUCCESS\n"), "good certificate");
    let revoked = get(&s, &pki, "revoked");
    assert_eq!(revoked.status, 400, "revoked certificate");
    assert_eq!(revoked.must("X-Verify"), "FAILED:certificate revoked");
    assert!(revoked.text().contains("The SSL certificate error"), "{}", revoked.text());
    let log = wait_contains(&s.path("logs/error.log"), "certificate revoked", Duration::from_secs(5));
    let line = line_with(&log, "client SSL certificate verify error: certificate revoked");
    assert!(line.contains("[info]"), "{line}");
}

#[test]
fn on_asks_about_the_intermediate_too() {
    let pki = pki();
    // Every certificate's own responder answers.
    let s = server(&pki, "ssl_ocsp on;");
    assert_eq!(get(&s, &pki, "good").must("X-Verify"), "SUCCESS", "whole chain good");
    // One responder for all: the intermediate's answers about the
    // intermediate itself with its own signature, which is not the
    // intermediate's issuer's: refused.
    let s = server(&pki, &format!("ssl_ocsp on; ssl_ocsp_responder http://127.0.0.1:{}/;", pki.int_port));
    let f = get(&s, &pki, "good");
    assert_eq!((f.status, f.must("X-Verify")), (400, "FAILED:certificate status request failed"), "int there");
    // `leaf` asks that responder about the client certificate only.
    let s = server(&pki, &format!("ssl_ocsp leaf; ssl_ocsp_responder http://127.0.0.1:{}/;", pki.int_port));
    assert_eq!(get(&s, &pki, "good").must("X-Verify"), "SUCCESS", "leaf only");
}

#[test]
fn an_unreachable_responder_fails_the_certificate() {
    let pki = pki();
    let closed = free_port();
    let s = server(&pki, &format!("ssl_ocsp leaf; ssl_ocsp_responder http://127.0.0.1:{closed};"));
    let f = get(&s, &pki, "good");
    assert_eq!((f.status, f.must("X-Verify")), (400, "FAILED:certificate status request failed"));
    let log = wait_contains(&s.path("logs/error.log"), "while requesting certificate status", Duration::from_secs(5));
    let line = line_with(&log, "while requesting certificate status");
    assert!(
        line.contains("[error]") && line.contains("(111: Connection refused)") && line.contains("responder: 127.0.0.1"),
        "{line}"
    );
}

#[test]
fn the_cache_answers_while_the_responder_is_down() {
    let mut pki = pki();
    let cached = server(&pki, "ssl_ocsp leaf; ssl_ocsp_cache shared:OCSP:1m;");
    let plain = server(&pki, "ssl_ocsp leaf;");
    assert_eq!(get(&cached, &pki, "good").must("X-Verify"), "SUCCESS", "stored");
    assert_eq!(get(&plain, &pki, "good").must("X-Verify"), "SUCCESS", "no cache, responder up");
    pki.stop_int_responder();
    assert_eq!(get(&cached, &pki, "good").must("X-Verify"), "SUCCESS", "from the cache");
    let f = get(&plain, &pki, "good");
    assert_eq!(f.must("X-Verify"), "FAILED:certificate status request failed", "no cache, responder down");
}

#[test]
fn optional_no_ca_is_refused() {
    let pki = pki();
    let s = builder()
        .tls_files()
        .http(&format!(
            "server {{ listen 127.0.0.1:{{port}} ssl;\n  \
             ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;\n  \
             ssl_verify_client optional_no_ca; ssl_client_certificate {}; ssl_ocsp on; }}",
            pki.path("root.crt")
        ))
        .prepare();
    let o = s.run(&["-t"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "-t accepted it: {err}");
    assert!(err.contains("\"ssl_ocsp\" is incompatible with \"ssl_verify_client optional_no_ca\""), "{err}");
}

#[test]
fn stream_ends_a_session_with_a_revoked_certificate() {
    if skip_in_nginx_mode("stream ssl_ocsp needs nginx 1.27.2") {
        return;
    }
    let pki = pki();
    let s = builder()
        .tls_files()
        .main(&format!(
            "stream {{ server {{ listen 127.0.0.1:{{port}} ssl;\n  \
             ssl_certificate tls/localhost.ecdsa.crt; ssl_certificate_key tls/localhost.ecdsa.key;\n  \
             ssl_verify_client on; ssl_verify_depth 2; ssl_client_certificate {}; ssl_ocsp leaf;\n  \
             return \"$ssl_client_verify\\n\"; }} }}",
            pki.path("root.crt")
        ))
        .http("")
        .start();
    let said = |client: &str| {
        let mut c = Command::new("openssl");
        c.args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{}", s.port)]);
        c.args(["-cert", &pki.path(&format!("{client}.crt")), "-key", &pki.path(&format!("{client}.key"))]);
        c.args(["-cert_chain", &pki.path("int.crt")]);
        String::from_utf8_lossy(&run_with_input(c, b"", Duration::from_secs(15)).stdout).into_owned()
    };
    assert_eq!(said("good"), "SUCCESS\n", "{}", read_lossy(&s.path("logs/error.log")));
    assert_eq!(said("revoked"), "", "the session ends before content");
    let log = wait_contains(&s.path("logs/error.log"), "certificate revoked", Duration::from_secs(5));
    assert!(line_with(&log, "verify error: certificate revoked").contains("while SSL handshaking"), "{log}");
}
