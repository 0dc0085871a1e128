//! Certificates chosen at handshake time and encrypted keys: variables in
//! `ssl_certificate` / `ssl_certificate_key` (`$ssl_server_name`, `map`
//! over it, `data:` values), `ssl_certificate_cache` (nginx 1.27.4, so
//! sluice-only against Debian's nginx 1.22), a missing file at handshake
//! time (the handshake fails, an error-log line names the file), and
//! `ssl_password_file` (passphrases tried in order, nginx's message when
//! none works).
//!
//! Clients are curl (verifying against the test CA, so the certificate
//! served is the one for the name) and `openssl s_client` (the subject).
//! Expectations were checked against nginx 1.22.1 (`SLUICE_TEST_NGINX=1`).

mod common;

use std::time::Duration;

use common::tls::*;
use common::*;

const PROTOCOLS: &str = "ssl_protocols TLSv1.2 TLSv1.3;";

/// One `listen {port} ssl` server with `certs` (its certificate
/// directives) and `extra` at http level; answers with its server name.
fn server(extra: &str, certs: &str) -> ServerBuilder {
    builder().tls_files().http(&format!(
        "{PROTOCOLS}\n{extra}\nserver {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name _;\n  {certs}\n  \
         location / {{ return 200 \"name=$ssl_server_name\\n\"; }}\n}}"
    ))
}

fn subject_for(s: &TestServer, name: &str) -> Option<String> {
    let c = s_client(s, s.port, &["-servername", name], &get_close(name, "/"));
    c.subject().map(str::to_string)
}

#[test]
fn certificate_by_server_name_variable() {
    let s = server(
        "",
        "ssl_certificate tls/$ssl_server_name.ecdsa.crt; ssl_certificate_key tls/$ssl_server_name.ecdsa.key;",
    )
    .start();
    // curl verifies the name against the certificate: each name gets its own.
    for name in ["a.test", "b.test"] {
        let f = fetch(&s, &format!("https://{name}:{}/", s.port), &[]);
        assert_eq!((f.status, f.verify, f.text()), (200, 0, format!("name={name}\n")), "{name}");
    }
    // A name without files: the handshake fails, the error log says why.
    let c = s_client(&s, s.port, &["-servername", "c.test"], &get_close("c.test", "/"));
    assert!(!c.contains("name=c.test"), "no response without a certificate:\n{}", c.out);
    assert!(c.subject().is_none(), "no certificate served:\n{}", c.out);
    let want = format!("cannot load certificate \"{}\"", s.path("conf/tls/c.test.ecdsa.crt").display());
    let log = wait_for_log(&s, &want);
    let line = log.lines().find(|l| l.contains(&want)).unwrap_or_default();
    assert!(line.contains("[error]") && line.contains("while SSL handshaking, client: 127.0.0.1"), "{line}");
    // The worker still serves the others.
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
    assert_eq!(f.status, 200);
}

fn wait_for_log(s: &TestServer, want: &str) -> String {
    for _ in 0..50 {
        let log = s.error_log();
        if log.contains(want) {
            return log;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no {want:?} in the error log:\n{}", s.error_log());
}

/// `data:` values: static ones, and one chosen by a `map` over the name.
#[test]
fn data_values_static_and_by_map() {
    let a = issue(KeyKind::Ecdsa, &["a.test"], false);
    let b = issue(KeyKind::Ecdsa, &["b.test"], false);
    let q = |pem: &[u8]| String::from_utf8_lossy(pem).trim().to_string();
    let stat = format!("ssl_certificate \"data:{}\"; ssl_certificate_key \"data:{}\";", q(&a.cert), q(&a.key));
    let s = server("", &stat).start();
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
    assert_eq!((f.status, f.verify), (200, 0), "static data: certificate");
    drop(s);

    let maps = format!(
        "map $ssl_server_name $crt {{ default \"data:{}\"; b.test \"data:{}\"; }}\n\
         map $ssl_server_name $key {{ default \"data:{}\"; b.test \"data:{}\"; }}",
        q(&a.cert),
        q(&b.cert),
        q(&a.key),
        q(&b.key)
    );
    let s = server(&maps, "ssl_certificate $crt; ssl_certificate_key $key;").start();
    for name in ["a.test", "b.test"] {
        let f = fetch(&s, &format!("https://{name}:{}/", s.port), &[]);
        assert_eq!((f.status, f.verify), (200, 0), "{name} from the map");
    }
}

/// `ssl_certificate_cache max=N valid=T`: a cached pair is served until
/// `valid` passes even if the files change; with no cache (nginx's
/// default) each handshake reads the files.
#[test]
fn certificate_cache_valid_and_off() {
    if skip_in_nginx_mode("ssl_certificate_cache is nginx 1.27.4") {
        return;
    }
    let certs = "ssl_certificate tls/v/$ssl_server_name.crt; ssl_certificate_key tls/v/$ssl_server_name.key;";
    let a = issue(KeyKind::Ecdsa, &["a.test"], false);
    let b = issue(KeyKind::Ecdsa, &["b.test"], false);
    for (cache, kept) in [("ssl_certificate_cache max=4 valid=2s;", true), ("", false)] {
        let s =
            server(cache, certs).file("conf/tls/v/x.test.crt", &a.cert).file("conf/tls/v/x.test.key", &a.key).start();
        assert_eq!(subject_for(&s, "x.test").as_deref(), Some("CN = a.test"), "{cache:?} first");
        s.write("conf/tls/v/x.test.crt", &b.cert);
        s.write("conf/tls/v/x.test.key", &b.key);
        let now = subject_for(&s, "x.test");
        let want = if kept { "CN = a.test" } else { "CN = b.test" };
        assert_eq!(now.as_deref(), Some(want), "{cache:?} after the files changed");
        if kept {
            std::thread::sleep(Duration::from_millis(2500));
            assert_eq!(subject_for(&s, "x.test").as_deref(), Some("CN = b.test"), "after valid=2s");
        }
    }
}

/// An encrypted copy of a.test's key, written to the prefix: PKCS#8
/// PBES2 (what OpenSSL 3 writes for `genrsa -aes128`) and OpenSSL's
/// legacy `Proc-Type: 4,ENCRYPTED` PEM.
fn encrypted_keys(pass: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = temp_dir("enckey");
    std::fs::write(dir.join("plain.key"), issue(KeyKind::Ecdsa, &["a.test"], false).key).unwrap();
    let pw = format!("pass:{pass}");
    openssl(&["pkcs8", "-topk8", "-in", "plain.key", "-v2", "aes-256-cbc", "-passout", &pw, "-out", "p8.key"], &dir);
    openssl(&["ec", "-in", "plain.key", "-aes128", "-passout", &pw, "-out", "legacy.key"], &dir);
    let out = (std::fs::read(dir.join("p8.key")).unwrap(), std::fs::read(dir.join("legacy.key")).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    out
}

#[test]
fn password_file_tries_each_passphrase() {
    let (p8, legacy) = encrypted_keys("right");
    assert!(String::from_utf8_lossy(&p8).contains("ENCRYPTED PRIVATE KEY"));
    assert!(String::from_utf8_lossy(&legacy).contains("Proc-Type: 4,ENCRYPTED"));
    for (what, key) in [("pkcs8", &p8), ("legacy", &legacy)] {
        let s =
            server("", "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/enc.key; ssl_password_file pw;")
                .file("conf/tls/enc.key", key)
                .file("conf/pw", "wrong\r\nright\r\n")
                .start();
        let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
        assert_eq!((f.status, f.verify), (200, 0), "{what}");
    }
    // With variables: the passphrases apply at handshake time too.
    let s = server(
        "",
        "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/$ssl_server_name.enc; ssl_password_file pw;",
    )
    .file("conf/tls/a.test.enc", &p8)
    .file("conf/pw", "right\n")
    .start();
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
    assert_eq!((f.status, f.verify), (200, 0), "encrypted key loaded at handshake");
}

/// A password file that is a FIFO (a secrets agent, or `echo pw > fifo`
/// as nginx's tests do): its writer supplies the content once, and the
/// server starts with it. nginx reads it once in its master; sluice's
/// serving process parses the configuration again and must not wait for
/// a second writer.
#[test]
fn password_file_may_be_a_fifo() {
    let (p8, _) = encrypted_keys("right");
    let mut s =
        server("", "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/enc.key; ssl_password_file pw;")
            .file("conf/tls/enc.key", &p8)
            .prepare();
    let fifo = s.path("conf/pw");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // One writer, as `echo right > pw`: open blocks until a reader comes.
    let writer = std::thread::spawn(move || std::fs::write(&fifo, "right\n"));
    s.relaunch().expect("starts with the FIFO's passphrase");
    writer.join().unwrap().unwrap();
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &[]);
    assert_eq!((f.status, f.verify), (200, 0));
}

fn config_test_fails(b: ServerBuilder, want: &str) {
    let p = prog();
    let s = b.prepare();
    let out = s.run(&["-t"]);
    let err = stderr_of(&out);
    let want = want.replace("CONF", &s.path("conf").display().to_string());
    assert_eq!(out.status.code(), Some(1), "exit code; stderr:\n{err}");
    assert!(err.contains(&format!("{p}: [emerg] {want}")), "want {want:?} in stderr:\n{err}");
}

#[test]
fn password_file_errors_as_nginx_words_them() {
    let (p8, _) = encrypted_keys("right");
    let certs = "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/enc.key;";
    // No passphrase works: nginx goes on with OpenSSL's reasons.
    config_test_fails(
        server("", &format!("{certs} ssl_password_file pw;")).file("conf/tls/enc.key", &p8).file("conf/pw", "wrong\n"),
        "cannot load certificate key \"CONF/tls/enc.key\": PEM_read_bio_PrivateKey() failed",
    );
    config_test_fails(
        server("", certs).file("conf/tls/enc.key", &p8),
        "cannot load certificate key \"CONF/tls/enc.key\": PEM_read_bio_PrivateKey() failed",
    );
    config_test_fails(
        server("", &format!("{certs} ssl_password_file nope;")).file("conf/tls/enc.key", &p8),
        "open() \"CONF/nope\" failed (2: No such file or directory)",
    );
    config_test_fails(
        server("", &format!("{certs} ssl_password_file pw;")).file("conf/tls/enc.key", &p8).file("conf/pw", ""),
        "empty password file \"CONF/pw\"",
    );
}
