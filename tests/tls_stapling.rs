//! OCSP stapling against a real responder: `openssl ocsp -index ... -port`
//! on loopback answers for a CA made with `openssl ca` (one good and one
//! revoked certificate, each naming the responder in its Authority
//! Information Access), and `openssl s_client -status` checks what the
//! server staples: a good response is stapled (fetched in the background,
//! so the test polls a few handshakes), a revoked one is not, nor one whose
//! signature `ssl_stapling_verify on` refuses; `ssl_stapling_responder`
//! overrides the certificate's URL. Expectations were checked against
//! nginx 1.22.1 (`SLUICE_TEST_NGINX=1`; nginx fetches at the first
//! handshake and staples from the next, which the polling covers).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::tls::*;
use common::*;

/// A CA, its certificates and a running responder; the responder is
/// killed on drop.
struct Pki {
    dir: PathBuf,
    responder: Child,
    port: u16,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = self.responder.kill();
        let _ = self.responder.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca_conf(aia_port: u16) -> String {
    format!(
        "[ca]\ndefault_ca = myca\n[myca]\nnew_certs_dir = .\ndatabase = ./index\ndefault_md = sha256\npolicy = pol\n\
         serial = ./serial\ndefault_days = 2\nx509_extensions = leaf\ncopy_extensions = none\n[pol]\ncommonName = supplied\n\
         [leaf]\nbasicConstraints = critical,CA:FALSE\nsubjectAltName = DNS:$ENV::SAN\n\
         authorityInfoAccess = OCSP;URI:http://127.0.0.1:{aia_port}/\n\
         [ca_ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n\
         [req]\ndistinguished_name = dn\n[dn]\n"
    )
}

fn run(dir: &Path, args: &[&str], san: &str) {
    let o = Command::new("openssl").args(args).current_dir(dir).env("SAN", san).output().expect("openssl");
    assert!(o.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// `signer`: "root" (the issuer signs its responses), "other" (a key
/// the issuer never certified) or "resp" (a certificate "other" issued).
fn pki(signer: &str) -> Pki {
    let dir = temp_dir("ocsp");
    let port = free_port();
    std::fs::write(dir.join("ca.cnf"), ca_conf(port)).unwrap();
    std::fs::write(dir.join("index"), "").unwrap();
    std::fs::write(dir.join("serial"), "1000\n").unwrap();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
    let mut root =
        vec!["req", "-x509", "-new", "-subj", "/CN=ocsp test root/", "-keyout", "root.key", "-out", "root.crt"];
    root.extend(ec);
    root.extend(["-config", "ca.cnf", "-extensions", "ca_ext", "-days", "2"]);
    run(&dir, &root, "x");
    let mut other = vec!["req", "-x509", "-new", "-subj", "/CN=other/", "-keyout", "other.key", "-out", "other.crt"];
    other.extend(ec);
    other.extend(["-config", "ca.cnf", "-extensions", "ca_ext"]);
    run(&dir, &other, "x");
    // "resp": a responder certificate "other" issued (no OCSP-signing
    // delegation by the issuer of the checked certificates).
    let mut resp = vec!["req", "-new", "-subj", "/CN=responder/", "-keyout", "resp.key", "-out", "resp.csr"];
    resp.extend(ec);
    resp.extend(["-config", "ca.cnf"]);
    run(&dir, &resp, "x");
    run(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "resp.csr",
            "-CA",
            "other.crt",
            "-CAkey",
            "other.key",
            "-out",
            "resp.crt",
            "-days",
            "2",
        ],
        "x",
    );
    for name in ["good", "revoked"] {
        let host = format!("{name}.test");
        let (key, csr, crt) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"));
        let subj = format!("/CN={host}/");
        let mut req = vec!["req", "-new", "-subj", subj.as_str(), "-keyout", &key, "-out", &csr];
        req.extend(ec);
        req.extend(["-config", "ca.cnf"]);
        run(&dir, &req, &host);
        run(
            &dir,
            &[
                "ca", "-batch", "-config", "ca.cnf", "-keyfile", "root.key", "-cert", "root.crt", "-in", &csr, "-out",
                &crt,
            ],
            &host,
        );
        // The chain the server sends: leaf, then the issuer.
        let chain = [std::fs::read(dir.join(&crt)).unwrap(), std::fs::read(dir.join("root.crt")).unwrap()].concat();
        std::fs::write(dir.join(format!("{name}-chain.crt")), chain).unwrap();
    }
    run(&dir, &["ca", "-config", "ca.cnf", "-revoke", "revoked.crt", "-keyfile", "root.key", "-cert", "root.crt"], "x");
    let responder = ocsp_responder(&dir, port, "index", "root", signer, "good.crt");
    Pki { dir, responder, port }
}

/// The staple as `openssl s_client -status` printed it: None for "no
/// response sent", else the "Cert Status:" value.
fn staple(s: &TestServer, pki: &Pki, name: &str) -> Option<String> {
    let host = format!("{name}.test");
    let mut c = Command::new("openssl");
    c.args(["s_client", "-connect", &format!("127.0.0.1:{}", s.port), "-servername", &host, "-status"]);
    c.arg("-CAfile").arg(pki.dir.join("root.crt"));
    let o = run_with_input(c, b"", Duration::from_secs(15));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(out.contains(&format!("CN = {host}")), "handshake for {host}:\n{out}");
    if out.contains("OCSP response: no response sent") {
        return None;
    }
    out.lines().find_map(|l| l.trim().strip_prefix("Cert Status: ")).map(str::to_string)
}

/// Polls handshakes until the staple is `want` (the fetch runs in the
/// background) or 8 seconds pass; the last value seen.
fn staple_becomes(s: &TestServer, pki: &Pki, name: &str, want: Option<&str>) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let got = staple(s, pki, name);
        if got.as_deref() == want || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn server(pki: &Pki, extra: &str) -> TestServer {
    let d = pki.dir.display();
    builder()
        .http(&format!(
            "ssl_protocols TLSv1.2 TLSv1.3;\nssl_stapling on;\n{extra}\n\
             server {{ listen 127.0.0.1:{{port}} ssl; server_name good.test;\n  \
             ssl_certificate {d}/good-chain.crt; ssl_certificate_key {d}/good.key; return 200 ok; }}\n\
             server {{ listen 127.0.0.1:{{port}} ssl; server_name revoked.test;\n  \
             ssl_certificate {d}/revoked-chain.crt; ssl_certificate_key {d}/revoked.key; return 200 ok; }}"
        ))
        .start()
}

#[test]
fn good_is_stapled_revoked_is_not() {
    let pki = pki("root");
    let s = server(&pki, "");
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")).as_deref(), Some("good"), "good certificate");
    // Long enough for the revoked one's fetch too; never stapled.
    assert_eq!(staple(&s, &pki, "revoked"), None, "a revoked status is not stapled");
    if !nginx_mode() {
        let log = wait_contains(&s.path("logs/error.log"), "revoked", Duration::from_secs(5));
        let line = line_with(&log, "while requesting certificate status");
        assert!(line.contains("[error]") && line.contains("revoked-chain.crt"), "{line}");
    }
}

#[test]
fn stapling_verify_refuses_a_responder_the_issuer_did_not_certify() {
    let pki = pki("other");
    let s = server(&pki, "ssl_stapling_verify on;");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(staple(&s, &pki, "good"), None, "signed by an unknown key");
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")), None);
    // Without verification the same response is stapled (nginx's default).
    let s = server(&pki, "ssl_stapling_verify off;");
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")).as_deref(), Some("good"), "verification off");
}

/// OpenSSL's `OCSP_basic_verify`, as nginx calls it, also accepts a
/// responder the issuer never delegated to when the responder's own chain
/// ends at a root that `ssl_trusted_certificate` marks as trusted for OCSP
/// signing (a `TRUSTED CERTIFICATE` block, `openssl x509 -addtrust
/// OCSPSigning`); the same root without that mark is not enough.
#[test]
fn stapling_verify_accepts_a_responder_chained_to_a_root_trusted_for_ocsp() {
    let pki = pki("resp");
    let d = pki.dir.display();
    run(
        &pki.dir,
        &["x509", "-in", "other.crt", "-addtrust", "OCSPSigning", "-trustout", "-out", "other-ocsp.crt"],
        "x",
    );
    assert!(std::fs::read_to_string(pki.dir.join("other-ocsp.crt")).unwrap().contains("BEGIN TRUSTED CERTIFICATE"));
    let s = server(&pki, &format!("ssl_stapling_verify on; ssl_trusted_certificate {d}/other-ocsp.crt;"));
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")).as_deref(), Some("good"), "a trusted root's responder");
    // The root without trust settings: refused ("root ca not trusted").
    let s = server(&pki, &format!("ssl_stapling_verify on; ssl_trusted_certificate {d}/other.crt;"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")), None, "a root not trusted for OCSP signing");
}

#[test]
fn stapling_responder_overrides_the_certificate_url() {
    let pki = pki("root");
    // The certificates name pki.port; a closed port instead, then the
    // right one through ssl_stapling_responder.
    let closed = free_port();
    let s = server(&pki, &format!("ssl_stapling_responder http://127.0.0.1:{closed}/;"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(staple(&s, &pki, "good"), None, "the responder is down");
    let s = server(&pki, &format!("ssl_stapling_responder http://127.0.0.1:{}/;", pki.port));
    assert_eq!(staple_becomes(&s, &pki, "good", Some("good")).as_deref(), Some("good"), "responder set");
}
