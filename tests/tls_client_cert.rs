//! The client certificate's variables (`$ssl_client_s_dn`, `_i_dn`,
//! `_s_dn_legacy`, `_i_dn_legacy`, `_serial`, `_fingerprint`, `_cert`,
//! `_raw_cert`, `_escaped_cert`, `_v_start`, `_v_end`, `_v_remain`) against what
//! the `openssl x509` command prints for the same certificate (nginx's
//! formats are OpenSSL's), for a certificate whose subject needs RFC 2253
//! escaping and has a multi-valued RDN. With SLUICE_TEST_NGINX=1 the same
//! checks run against nginx.

mod common;

use std::process::Command;

use common::tls::*;
use common::*;

/// Signs a client certificate with the test CA; returns the directory
/// holding `c.crt` and `c.key`.
fn odd_client(s: &TestServer) -> std::path::PathBuf {
    let dir = temp_dir("odd-client");
    std::fs::write(dir.join("ca.key"), ca_key_pem()).expect("ca key");
    std::fs::copy(tls_path(s, "ca.crt"), dir.join("ca.crt")).expect("ca");
    std::fs::write(dir.join("x.cnf"), "[v3]\nbasicConstraints = CA:FALSE\nextendedKeyUsage = clientAuth\n")
        .expect("cnf");
    genkey(KeyKind::Ecdsa, "c.key", &dir);
    let subj = "/C=DE/O=Ex, Inc./OU=a+CN=b \u{fc} <x>/emailAddress=m@example.com";
    openssl(&["req", "-new", "-key", "c.key", "-utf8", "-multivalue-rdn", "-subj", subj, "-out", "c.csr"], &dir);
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "c.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-days",
            "2",
            "-set_serial",
            "0x00ab12",
            "-extfile",
            "x.cnf",
            "-extensions",
            "v3",
            "-out",
            "c.crt",
        ],
        &dir,
    );
    dir
}

/// What `openssl x509 -noout ARGS` prints after `prefix=`.
fn x509(dir: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new("openssl").args(["x509", "-in", "c.crt", "-noout"]).args(args).current_dir(dir).output();
    let out = String::from_utf8_lossy(&o.expect("openssl").stdout).trim().to_string();
    out.split_once('=').map(|(_, v)| v.to_string()).unwrap_or(out)
}

#[test]
fn client_certificate_variables_as_openssl_prints_them() {
    let s = builder()
        .tls_files()
        .http(
            "server {\n  listen 127.0.0.1:{port} ssl;\n  server_name a.test;\n\
               ssl_certificate tls/a.test.ecdsa.crt;\n  ssl_certificate_key tls/a.test.ecdsa.key;\n\
               ssl_verify_client on;\n  ssl_client_certificate tls/ca.crt;\n\
               location /dn { return 200 \"$ssl_client_s_dn\\n$ssl_client_i_dn\\n$ssl_client_serial\\n$ssl_client_fingerprint\\n\"; }\n\
               location /raw { return 200 \"$ssl_client_raw_cert\"; }\n\
               location /cert { return 200 \"$ssl_client_cert\"; }\n\
               location /legacy { return 200 \"$ssl_client_s_dn_legacy\\n$ssl_client_i_dn_legacy\\n\"; }\n\
               location /v { return 200 \"$ssl_client_v_start\\n$ssl_client_v_end\\n$ssl_client_v_remain\\n\"; }\n\
               location /esc { return 200 \"$ssl_client_escaped_cert\"; }\n}",
        )
        .start();
    let dir = odd_client(&s);
    let (c, k) = (dir.join("c.crt").display().to_string(), dir.join("c.key").display().to_string());
    let get = |path: &str| {
        let f = fetch(&s, &format!("https://a.test:{}{path}", s.port), &["--cert", &c, "--key", &k]);
        assert_eq!(f.status, 200, "{path}: {}", f.text());
        f.text()
    };
    // nginx 1.22.1's output for this certificate (OpenSSL's oneline form).
    assert_eq!(
        get("/legacy"),
        "/C=DE/O=Ex, Inc./OU=a+CN=b \\xC3\\xBC <x>/emailAddress=m@example.com\n/CN=sluice test CA\n"
    );
    let fp = x509(&dir, &["-fingerprint", "-sha1"]).replace(':', "").to_lowercase();
    let want = format!(
        "{}\n{}\n{}\n{fp}\n",
        x509(&dir, &["-subject", "-nameopt", "RFC2253"]),
        x509(&dir, &["-issuer", "-nameopt", "RFC2253"]),
        x509(&dir, &["-serial"]),
    );
    assert_eq!(get("/dn"), want);
    assert!(want.starts_with("emailAddress=m@example.com,CN=b \\C3\\BC \\<x\\>+OU=a,O=Ex\\, Inc.,C=DE\n"), "{want}");
    let pem = std::fs::read_to_string(dir.join("c.crt")).expect("crt");
    assert_eq!(get("/raw"), pem);
    assert_eq!(get("/cert"), pem.trim_end().replace('\n', "\n\t"));
    let dates = format!("{}\n{}\n", x509(&dir, &["-startdate"]), x509(&dir, &["-enddate"]));
    let v = get("/v");
    // Issued for 2 days just now: 2 whole days left in the same second,
    // else 1.
    assert!(v == format!("{dates}2\n") || v == format!("{dates}1\n"), "{v}");
    let esc = get("/esc");
    assert!(
        esc.starts_with("-----BEGIN%20CERTIFICATE-----%0A") && esc.ends_with("-----END%20CERTIFICATE-----%0A"),
        "{esc}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ssl_crl`: a revoked client certificate is nginx's 400 with
/// `FAILED:certificate revoked`; a good one passes; an expired CRL fails
/// every certificate it should vouch for (`CRL has expired`).
#[test]
fn a_revoked_client_certificate_is_refused() {
    let good = issue(KeyKind::Ecdsa, &["good.client"], true);
    let bad = issue(KeyKind::Ecdsa, &["revoked.client"], true);
    let conf = |crl: &std::path::Path| {
        format!(
            "server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name a.test;\n\
               ssl_certificate tls/a.test.ecdsa.crt;\n  ssl_certificate_key tls/a.test.ecdsa.key;\n\
               ssl_verify_client optional;\n  ssl_client_certificate tls/ca.crt;\n  ssl_crl {};\n\
               location / {{ return 200 \"$ssl_client_verify\\n\"; }}\n}}",
            crl.display()
        )
    };
    let fresh = crl_revoking(&bad.cert, 2);
    let expired = crl_revoking(&bad.cert, 0);
    let s = builder().tls_files().http(&conf(&fresh)).start();
    let dir = temp_dir("crl-clients");
    let files = |name: &str, ck: &CertKey| {
        std::fs::write(dir.join(format!("{name}.crt")), &ck.cert).expect("crt");
        std::fs::write(dir.join(format!("{name}.key")), &ck.key).expect("key");
        (dir.join(format!("{name}.crt")).display().to_string(), dir.join(format!("{name}.key")).display().to_string())
    };
    let (gc, gk) = files("good", &good);
    let (bc, bk) = files("bad", &bad);
    let url = format!("https://a.test:{}/", s.port);
    let ok = fetch(&s, &url, &["--cert", &gc, "--key", &gk]);
    assert_eq!((ok.status, ok.text().as_str()), (200, "SUCCESS\n"));
    let refused = fetch(&s, &url, &["--cert", &bc, "--key", &bk]);
    assert_eq!(refused.status, 400);
    assert!(refused.text().contains("The SSL certificate error"), "{}", refused.text());
    let log = s.wait_error_log("certificate revoked");
    assert!(log.contains("client SSL certificate verify error: (23:certificate revoked)"), "{log}");
    // An expired CRL: nothing under it verifies.
    let s2 = builder().tls_files().http(&conf(&expired)).start();
    let url2 = format!("https://a.test:{}/", s2.port);
    assert_eq!(fetch(&s2, &url2, &["--cert", &gc, "--key", &gk]).status, 400);
    let log = s2.wait_error_log("CRL has expired");
    assert!(log.contains("(12:CRL has expired)"), "{log}");
    // Without a certificate: not checked (optional).
    assert_eq!(fetch(&s2, &url2, &[]).text(), "NONE\n");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ssl_verify_client optional_no_ca` needs no `ssl_client_certificate`
/// (nginx-tests' ssl_client_escaped_cert.t, h2_ssl_verify_client.t): the
/// certificate is of an unknown issuer, which the mode lets through, and
/// its variables are there; without a certificate the request passes too.
#[test]
fn optional_no_ca_without_a_ca() {
    let s = builder()
        .tls_files()
        .http(
            "server {\n  listen 127.0.0.1:{port} ssl;\n  server_name a.test;\n\
               ssl_certificate tls/a.test.ecdsa.crt;\n  ssl_certificate_key tls/a.test.ecdsa.key;\n\
               ssl_verify_client optional_no_ca;\n\
               location / { return 200 \"[$ssl_client_verify] [$ssl_client_serial]\\n\"; }\n}",
        )
        .start();
    let dir = odd_client(&s);
    let (c, k) = (dir.join("c.crt").display().to_string(), dir.join("c.key").display().to_string());
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &["--cert", &c, "--key", &k]);
    assert_eq!(f.status, 200, "{}", f.text());
    // curl sends the CA with the certificate: a self-signed top.
    assert_eq!(f.text(), "[FAILED:self-signed certificate in certificate chain] [AB12]\n");
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
    assert_eq!((f.status, f.text().as_str()), (200, "[NONE] []\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A root, an intermediate and a client certificate it issued, each a CA
/// (as `openssl ca` makes them with `basicConstraints = CA:TRUE`, which
/// OpenSSL accepts for a client's own certificate). Returns the directory
/// holding `root-int.crt` (the trust file) and `end.crt`/`end.key`.
fn three_level_chain() -> std::path::PathBuf {
    let dir = temp_dir("depth-chain");
    std::fs::write(
        dir.join("x.cnf"),
        "[req]\ndistinguished_name = dn\n[dn]\n[v3]\nbasicConstraints = critical, CA:TRUE\n",
    )
    .expect("cnf");
    for name in ["root", "int", "end"] {
        genkey(KeyKind::Ecdsa, &format!("{name}.key"), &dir);
    }
    let subj = |n: &str| format!("/CN={n}");
    openssl(
        &["req", "-x509", "-new", "-key", "root.key", "-subj", &subj("root"), "-config", "x.cnf", "-extensions", "v3"]
            .into_iter()
            .chain(["-days", "2", "-out", "root.crt"])
            .collect::<Vec<_>>(),
        &dir,
    );
    for (name, issuer) in [("int", "root"), ("end", "int")] {
        openssl(&["req", "-new", "-key", &format!("{name}.key"), "-subj", &subj(name), "-out", "x.csr"], &dir);
        let (ca, key, out) = (format!("{issuer}.crt"), format!("{issuer}.key"), format!("{name}.crt"));
        openssl(
            &["x509", "-req", "-in", "x.csr", "-CA", &ca, "-CAkey", &key, "-days", "2", "-extfile", "x.cnf"]
                .into_iter()
                .chain(["-extensions", "v3", "-out", &out])
                .collect::<Vec<_>>(),
            &dir,
        );
    }
    let mut trust = std::fs::read(dir.join("root.crt")).expect("root");
    trust.extend(std::fs::read(dir.join("int.crt")).expect("int"));
    std::fs::write(dir.join("root-int.crt"), trust).expect("trust");
    dir
}

/// `ssl_verify_depth` counts the chain OpenSSL builds up to the root, the
/// root and the client's own certificate aside (nginx-tests'
/// ssl_verify_depth.t): with the intermediate trusted, a client sending
/// only its own certificate has a chain of three, too long for depth 0,
/// fine for 2. The refusal's page keeps `add_header ... always`.
#[test]
fn verify_depth_limits_the_client_chain() {
    let dir = three_level_chain();
    let trust = dir.join("root-int.crt").display().to_string();
    let server = |name: &str, depth: u32| {
        format!(
            "server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name {name};\n\
               ssl_certificate tls/{name}.ecdsa.crt;\n  ssl_certificate_key tls/{name}.ecdsa.key;\n\
               ssl_verify_client on;\n  ssl_client_certificate {trust};\n  ssl_verify_depth {depth};\n\
               add_header X-Verify $ssl_client_verify always;\n\
               location / {{ return 200 \"$ssl_client_verify $ssl_client_s_dn\\n\"; }}\n}}\n"
        )
    };
    let s = builder().tls_files().http(&(server("a.test", 0) + &server("b.test", 2))).start();
    let (c, k) = (dir.join("end.crt").display().to_string(), dir.join("end.key").display().to_string());
    let deep = fetch(&s, &format!("https://b.test:{}/", s.port), &["--cert", &c, "--key", &k]);
    assert_eq!((deep.status, deep.text().as_str()), (200, "SUCCESS CN=end\n"));
    let shallow = fetch(&s, &format!("https://a.test:{}/", s.port), &["--cert", &c, "--key", &k]);
    assert_eq!(shallow.status, 400, "{}", shallow.text());
    // (OpenSSL 3 stops building the chain at the depth: its last
    // certificate's issuer is then missing.)
    assert_eq!(shallow.header("X-Verify"), Some("FAILED:unable to get issuer certificate"));
    let log = s.wait_error_log("unable to get issuer certificate");
    assert!(log.contains("client SSL certificate verify error: (2:unable to get issuer certificate)"), "{log}");
    // The intermediate itself: a chain of two, within depth 0.
    let (ic, ik) = (dir.join("int.crt").display().to_string(), dir.join("int.key").display().to_string());
    let int = fetch(&s, &format!("https://a.test:{}/", s.port), &["--cert", &ic, "--key", &ik]);
    assert_eq!((int.status, int.text().as_str()), (200, "SUCCESS CN=int\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// With SNI, a request whose Host leads to a server with
/// `ssl_verify_client` gets 421 (nginx checks the client's certificate
/// only for the server the handshake named); a Host leading to a server
/// without it is served. A CA listed twice in `ssl_client_certificate` is
/// named once in the certificate request.
#[test]
fn misdirected_requests_and_the_acceptable_ca_list() {
    let dir = temp_dir("dup-ca");
    let mut twice = ca_pem();
    twice.extend(ca_pem());
    std::fs::write(dir.join("dup.crt"), twice).expect("dup");
    let s = builder()
        .tls_files()
        .http(&format!(
            "server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name a.test;\n\
               ssl_certificate tls/a.test.ecdsa.crt;\n  ssl_certificate_key tls/a.test.ecdsa.key;\n\
               ssl_verify_client optional;\n  ssl_client_certificate {};\n\
               location / {{ return 200 \"a $ssl_client_verify\\n\"; }}\n}}\n\
             server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name b.test;\n\
               ssl_certificate tls/b.test.ecdsa.crt;\n  ssl_certificate_key tls/b.test.ecdsa.key;\n\
               ssl_verify_client on;\n  ssl_client_certificate tls/ca.crt;\n\
               location / {{ return 200 \"b\\n\"; }}\n}}\n\
             server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name c.test;\n\
               ssl_certificate tls/b.test.ecdsa.crt;\n  ssl_certificate_key tls/b.test.ecdsa.key;\n\
               location / {{ return 200 \"c\\n\"; }}\n}}",
            dir.join("dup.crt").display()
        ))
        .start();
    let url = format!("https://a.test:{}/", s.port);
    assert_eq!(fetch(&s, &url, &[]).text(), "a NONE\n");
    let other = fetch(&s, &url, &["-H", "Host: b.test"]);
    assert_eq!(other.status, 421, "{}", other.text());
    assert!(other.text().contains("421 Misdirected Request"), "{}", other.text());
    assert!(s.wait_error_log("different from the one that was negotiated").contains("client attempted"));
    let plain = fetch(&s, &url, &["-H", "Host: c.test"]);
    assert_eq!((plain.status, plain.text().as_str()), (200, "c\n"));
    let r = s_client(&s, s.port, &["-servername", "a.test"], &get_close("a.test", "/"));
    let names = r.out.split("Acceptable client certificate CA names").nth(1).unwrap_or("");
    let listed = names.lines().take_while(|l| !l.contains("Requested Signature")).filter(|l| l.contains("CN")).count();
    assert_eq!(listed, 1, "{}", r.out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ssl_crl` with version 1 CRLs, which OpenSSL takes (nginx-tests'
/// ssl_crl.t): as OpenSSL's CRL_CHECK_ALL with nginx's callback, every
/// certificate under the root needs its issuer's CRL, and the last
/// problem found is reported: a revoked intermediate fails its client
/// though the client's own CRL is missing too.
#[test]
fn version_1_crls_check_the_whole_chain() {
    let dir = three_level_chain();
    v1_crl(&dir, "root", &[], "root-empty.crl");
    v1_crl(&dir, "int", &[], "int-empty.crl");
    let mut both = std::fs::read(dir.join("root-empty.crl")).expect("crl");
    both.extend(std::fs::read(dir.join("int-empty.crl")).expect("crl"));
    std::fs::write(dir.join("chain.crl"), both).expect("chain crl");
    v1_crl(&dir, "root", &["int.crt"], "root-revoking.crl");
    let server = |name: &str, crl: &str| {
        format!(
            "server {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name {name};\n\
               ssl_certificate tls/b.test.ecdsa.crt;\n  ssl_certificate_key tls/b.test.ecdsa.key;\n\
               ssl_verify_client on;\n  ssl_client_certificate {};\n  ssl_verify_depth 2;\n  ssl_crl {};\n\
               add_header X-Verify $ssl_client_verify always;\n\
               location / {{ return 200 \"$ssl_client_verify\\n\"; }}\n}}\n",
            dir.join("root-int.crt").display(),
            dir.join(crl).display()
        )
    };
    let conf =
        server("b.test", "chain.crl") + &server("a.test", "root-revoking.crl") + &server("c.test", "root-empty.crl");
    let s = builder().tls_files().http(&conf).start();
    let (c, k) = (dir.join("end.crt").display().to_string(), dir.join("end.key").display().to_string());
    // (curl checks the server's name against b.test's certificate: -k.)
    let get = |host: &str| fetch(&s, &format!("https://{host}:{}/", s.port), &["-k", "--cert", &c, "--key", &k]);
    let ok = get("b.test");
    assert_eq!((ok.status, ok.text().as_str()), (200, "SUCCESS\n"));
    let revoked = get("a.test");
    assert_eq!(revoked.status, 400);
    assert_eq!(revoked.header("X-Verify"), Some("FAILED:certificate revoked"));
    let missing = get("c.test");
    assert_eq!(missing.status, 400);
    assert_eq!(missing.header("X-Verify"), Some("FAILED:unable to get certificate CRL"));
    let _ = std::fs::remove_dir_all(&dir);
}
