//! TLS settings written for OpenSSL that rustls cannot honour in full:
//! obsolete protocols, cipher suites and curves it does not implement. As
//! long as something usable remains, nginx would run the configuration, so
//! sluice runs it too, leaving the rest out with one `[warn]` line per
//! directive; a list with nothing usable is an error (HTTP/3's directives
//! are in tests/h3.rs). With `SLUICE_TEST_NGINX=1`
//! the serving checks run against nginx 1.22.1 (which accepts all of these
//! lists); the messages are sluice's own.

mod common;

use common::tls::*;
use common::*;

const CERT: &str = "ssl_certificate tls/a.test.ecdsa.crt; ssl_certificate_key tls/a.test.ecdsa.key;";

fn server(http: &str, srv: &str) -> ServerBuilder {
    builder().tls_files().http(&format!(
        "{http}\nserver {{\n  listen 127.0.0.1:{{port}} ssl;\n  server_name a.test;\n  {CERT}\n  root html;\n  {srv}\n}}"
    ))
}

fn warn_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("[warn]")).collect()
}

#[test]
fn legacy_protocols_ciphers_and_curves_warn_and_serve_the_rest() {
    // Debian's stock nginx.conf line, and a Mozilla-"intermediate"-style
    // cipher list with DHE and CBC suites rustls lacks.
    let http = "ssl_protocols SSLv3 TLSv1 TLSv1.1 TLSv1.2;\n\
                ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-SHA:DHE-RSA-AES256-GCM-SHA384:HIGH:!aNULL;\n\
                ssl_ecdh_curve secp521r1:prime256v1:X448;";
    let b = server(http, "").file("html/index.html", "legacy ok\n");
    let t = b.prepare();
    let out = t.run(&["-t"]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "-t failed:\n{err}");
    if !nginx_mode() {
        let warns = warn_lines(&err);
        assert_eq!(warns.len(), 3, "one warning per directive:\n{err}");
        let conf = t.conf_path().display().to_string();
        assert!(
            warns[0].contains("\"ssl_protocols\": SSLv3 TLSv1 TLSv1.1 not offered")
                && warns[0].contains("using TLSv1.2")
                && warns[0].contains(&format!("in {conf}:")),
            "{err}"
        );
        assert!(
            warns[1].contains("\"ssl_ciphers\": ECDHE-RSA-AES128-SHA:DHE-RSA-AES256-GCM-SHA384 not offered"),
            "{err}"
        );
        assert!(warns[2].contains("\"ssl_ecdh_curve\": secp521r1:X448 not offered"), "{err}");
    }
    drop(t);
    let s = b.start();
    let f = fetch(&s, &format!("https://a.test:{}/", s.port), &["--http1.1"]);
    assert_eq!((f.status, f.verify), (200, 0), "{f:?}");
    assert_eq!(f.text(), "legacy ok\n");
    // Only TLS 1.2 is left of the list: a TLS 1.3-only client fails.
    let r = curl_fetch(&s, &[&format!("https://a.test:{}/", s.port)], &["--tlsv1.3"]);
    assert!(!r.ok, "TLS 1.3 was not listed, yet a TLS 1.3 client got through:\n{}", r.stderr);
}

#[test]
fn nothing_usable_is_an_error() {
    if skip_in_nginx_mode("nginx accepts lists that rustls cannot serve at all") {
        return;
    }
    let cases = [
        ("ssl_protocols TLSv1 TLSv1.1;", "no protocol in \"ssl_protocols\" is supported: TLSv1 TLSv1.1 not offered"),
        ("ssl_ciphers DHE-RSA-AES256-SHA:AES128-SHA;", "no cipher in \"DHE-RSA-AES256-SHA:AES128-SHA\" is supported"),
        ("ssl_ecdh_curve secp521r1:X448;", "no curve in \"secp521r1:X448\" is supported"),
    ];
    for (http, msg) in cases {
        let t = server(http, "").prepare();
        let out = t.run(&["-t"]);
        let err = stderr_of(&out);
        assert!(!out.status.success(), "{http} accepted:\n{err}");
        assert!(err.contains(msg) && err.contains("[emerg]"), "{http}: expected {msg:?} in:\n{err}");
    }
}
