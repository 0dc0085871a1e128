//! Client certificates shown to TLS origins when they are chosen by
//! variables (`proxy_ssl_certificate $var`, nginx 1.21.0; the stream
//! proxy's too), `""` meaning none, and a certificate that does not load
//! being nginx's 500; a stream server's `ssl_certificate` with variables;
//! and `proxy_ssl_verify` against a version 1 self-signed origin
//! certificate checked by its commonName, as OpenSSL does. The origin is
//! a TLS server block of the same sluice (or nginx 1.22 with
//! SLUICE_TEST_NGINX=1) that answers with the client certificate it saw.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::tls::*;
use common::*;

/// A TLS server on `{port}` answering `VERIFY SUBJECT` of the client
/// certificate it got (ssl_verify_client optional_no_ca: any certificate
/// is taken; one the CA signed verifies).
fn origin(port: &str) -> String {
    format!(
        "server {{\n\
           listen 127.0.0.1:{{{port}}} ssl;\n\
           ssl_certificate tls/a.test.ecdsa.crt;\n\
           ssl_certificate_key tls/a.test.ecdsa.key;\n\
           ssl_verify_client optional_no_ca;\n\
           ssl_trusted_certificate tls/ca.crt;\n\
           location / {{ return 200 \"$ssl_client_verify $ssl_client_s_dn\\n\"; }}\n\
         }}\n"
    )
}

fn get(port: u16, path: &str) -> Response {
    request(port, &format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"))
}

/// A PEM file's text as a quoted configuration string (its line ends
/// kept: a quoted value may span lines).
fn quoted(pem: &[u8]) -> String {
    String::from_utf8_lossy(pem).into_owned()
}

#[test]
fn proxy_certificate_chosen_per_request() {
    let client = issue(KeyKind::Ecdsa, &["client.test"], true);
    // `""` cancelling an inherited certificate is newer than nginx 1.22
    // (which reads it as the configuration directory); 1.26 has it.
    let cancelled = if nginx_mode() {
        ""
    } else {
        "location /cancelled/ {\n\
           proxy_pass https://127.0.0.1:{port1}/;\n\
           proxy_ssl_certificate \"\";\n\
           proxy_ssl_certificate_key \"\";\n\
         }\n"
    };
    let s = builder()
        .tls_files()
        .file("conf/tls/changing.crt", &client.cert)
        .file("conf/tls/changing.key", &client.key)
        .ports(2)
        .http(&format!(
            "{}\
             map $arg_d $dcert {{ default \"\"; yes \"data:{}\"; }}\n\
             map $arg_d $dkey {{ default \"\"; yes \"data:{}\"; }}\n\
             server {{\n\
               listen 127.0.0.1:{{port0}};\n\
               proxy_ssl_session_reuse off;\n\
               proxy_ssl_certificate tls/client.crt;\n\
               proxy_ssl_certificate_key tls/client.key;\n\
               location /vars/ {{\n\
                 proxy_pass https://127.0.0.1:{{port1}}/;\n\
                 proxy_ssl_certificate $arg_c;\n\
                 proxy_ssl_certificate_key $arg_k;\n\
               }}\n\
               location /data/ {{\n\
                 proxy_pass https://127.0.0.1:{{port1}}/;\n\
                 proxy_ssl_certificate $dcert;\n\
                 proxy_ssl_certificate_key $dkey;\n\
               }}\n\
               location /inherited/ {{ proxy_pass https://127.0.0.1:{{port1}}/; }}\n\
               {}\
             }}\n",
            origin("port1"),
            quoted(&client.cert),
            quoted(&client.key),
            cancelled,
        ))
        .start();
    let p = s.ports[0];
    let body = |path: &str| {
        let r = get(p, path);
        assert_eq!(r.status, 200, "{path}: {}\n{}", r.text(), s.error_log());
        r.text()
    };

    // Each request's own certificate reaches the origin.
    assert_eq!(body("/vars/?c=tls/client.crt&k=tls/client.key"), "SUCCESS CN=client.test\n");
    let rogue = body("/vars/?c=tls/rogue.crt&k=tls/rogue.key");
    assert!(rogue.starts_with("FAILED:") && rogue.ends_with(" CN=rogue client\n"), "{rogue}");
    // An empty value: no certificate at all.
    assert_eq!(body("/vars/"), "NONE \n");
    // `data:` PEM from a variable.
    assert_eq!(body("/data/?d=yes"), "SUCCESS CN=client.test\n");
    assert_eq!(body("/data/"), "NONE \n");
    // Without variables: inherited, and cancelled by "".
    assert_eq!(body("/inherited/"), "SUCCESS CN=client.test\n");
    if !nginx_mode() {
        assert_eq!(body("/cancelled/"), "NONE \n");
    }

    // A file that does not load: nginx's 500 and the reason, logged.
    let r = get(p, "/vars/?c=tls/missing.crt&k=tls/missing.key");
    assert_eq!(r.status, 500, "{}", r.text());
    let missing = format!("cannot load certificate \"{}\"", tls_path(&s, "missing.crt"));
    let log = s.wait_error_log(&missing);
    assert!(log.lines().any(|l| l.contains("[error]") && l.contains(&missing)), "{log}");

    // The file changes on disk: the next connections show the new one
    // (nginx reads it for each; sluice's cache notices within a second).
    let path = "/vars/?c=tls/changing.crt&k=tls/changing.key";
    assert_eq!(body(path), "SUCCESS CN=client.test\n");
    let rogue = rogue_client();
    s.write("conf/tls/changing.crt", &rogue.cert);
    s.write("conf/tls/changing.key", &rogue.key);
    std::thread::sleep(Duration::from_millis(1300));
    let now = body(path);
    assert!(now.starts_with("FAILED:") && now.ends_with(" CN=rogue client\n"), "{now}");
}

/// A stream configuration, with the module loaded as Debian's nginx needs
/// it (sluice has it built in and says so).
fn stream_and_http(stream: &str, http: &str) -> String {
    format!(
        "load_module /usr/lib/nginx/modules/ngx_stream_module.so;\n\
         daemon off;\npid logs/sluice.pid;\nerror_log logs/error.log info;\nevents {{}}\n\
         stream {{\n{stream}\n}}\nhttp {{\naccess_log logs/access.log;\n{http}\n}}\n"
    )
}

fn stream_get(port: u16) -> String {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET / HTTP/1.0\r\nHost: t\r\n\r\n").expect("write");
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn stream_proxy_certificate_chosen_per_session() {
    let s = builder()
        .tls_files()
        .ports(5)
        .whole(&stream_and_http(
            "map $server_port $cert {\n\
               {port0} tls/client.crt;\n\
               {port1} tls/rogue.crt;\n\
               {port3} tls/missing.crt;\n\
               default \"\";\n\
             }\n\
             map $server_port $key {\n\
               {port0} tls/client.key;\n\
               {port1} tls/rogue.key;\n\
               {port3} tls/missing.key;\n\
               default \"\";\n\
             }\n\
             proxy_ssl on;\n\
             proxy_ssl_session_reuse off;\n\
             proxy_ssl_certificate $cert;\n\
             proxy_ssl_certificate_key $key;\n\
             server {\n\
               listen 127.0.0.1:{port0};\n\
               listen 127.0.0.1:{port1};\n\
               listen 127.0.0.1:{port2};\n\
               listen 127.0.0.1:{port3};\n\
               proxy_pass 127.0.0.1:{port4};\n\
             }",
            &origin("port4"),
        ))
        .start();
    let client = stream_get(s.ports[0]);
    assert!(client.ends_with("\r\n\r\nSUCCESS CN=client.test\n"), "{client}\n{}", s.error_log());
    let rogue = stream_get(s.ports[1]);
    assert!(rogue.contains("\r\n\r\nFAILED:") && rogue.ends_with(" CN=rogue client\n"), "{rogue}");
    let none = stream_get(s.ports[2]);
    assert!(none.ends_with("\r\n\r\nNONE \n"), "{none}");
    // Not loaded: the session ends without reaching the origin, and the
    // reason is an error.
    assert_eq!(stream_get(s.ports[3]), "");
    let missing = format!("cannot load certificate \"{}\"", tls_path(&s, "missing.crt"));
    let log = s.wait_error_log(&missing);
    assert!(log.lines().any(|l| l.contains("[error]") && l.contains(&missing)), "{log}");
}

#[test]
fn stream_server_certificate_by_sni() {
    let s = builder()
        .tls_files()
        .ports(1)
        .whole(&stream_and_http(
            "server {\n\
               listen 127.0.0.1:{port0} ssl;\n\
               ssl_certificate tls/$ssl_server_name.ecdsa.crt;\n\
               ssl_certificate_key tls/$ssl_server_name.ecdsa.key;\n\
               return \"name $ssl_server_name\\n\";\n\
             }",
            "",
        ))
        .start();
    for name in ["a.test", "b.test"] {
        let c = s_client(&s, s.ports[0], &["-servername", name], "x");
        assert!(c.verified(), "{name}: {}", c.out);
        assert_eq!(c.subject(), Some(format!("CN = {name}").as_str()), "{}", c.out);
        assert!(c.stdout.contains(&format!("name {name}\n")), "{}", c.out);
    }
    // A name with no files: the handshake fails, the reason is logged.
    let c = s_client(&s, s.ports[0], &["-servername", "c.test"], "x");
    assert!(!c.stdout.contains("name c.test"), "{}", c.out);
    s.wait_error_log("cannot load certificate");
}

/// `openssl req -x509` without extensions: a version 1 certificate whose
/// only name is its commonName.
fn v1_self_signed(cn: &str) -> CertKey {
    let dir = std::env::temp_dir().join(format!("sluice-v1-{}-{cn}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("o.cnf"),
        "[req]\nprompt = no\ndistinguished_name = dn\n[dn]\ncommonName = v1.test\n".replace("v1.test", cn),
    )
    .unwrap();
    openssl(
        &[
            "req", "-x509", "-new", "-config", "o.cnf", "-newkey", "rsa:2048", "-nodes", "-keyout", "o.key", "-out",
            "o.crt",
        ],
        &dir,
    );
    let ck =
        CertKey { cert: std::fs::read(dir.join("o.crt")).unwrap(), key: std::fs::read(dir.join("o.key")).unwrap() };
    let _ = std::fs::remove_dir_all(&dir);
    ck
}

#[test]
fn verified_origin_by_common_name_of_a_version_1_certificate() {
    let v1 = v1_self_signed("v1.test");
    let other = v1_self_signed("other.test");
    let s = builder()
        .file("conf/v1.crt", &v1.cert)
        .file("conf/v1.key", &v1.key)
        .file("conf/other.crt", &other.cert)
        .ports(2)
        .http(
            "server {\n\
               listen 127.0.0.1:{port1} ssl;\n\
               ssl_certificate v1.crt;\n\
               ssl_certificate_key v1.key;\n\
               location / { return 200 \"origin\\n\"; }\n\
             }\n\
             server {\n\
               listen 127.0.0.1:{port0};\n\
               proxy_ssl_verify on;\n\
               proxy_ssl_trusted_certificate v1.crt;\n\
               location /cn/ { proxy_pass https://127.0.0.1:{port1}/; proxy_ssl_name v1.test; }\n\
               location /wrong/ { proxy_pass https://127.0.0.1:{port1}/; proxy_ssl_name w.test; }\n\
               location /untrusted/ {\n\
                 proxy_pass https://127.0.0.1:{port1}/;\n\
                 proxy_ssl_session_reuse off;\n\
                 proxy_ssl_name v1.test;\n\
                 proxy_ssl_trusted_certificate other.crt;\n\
               }\n\
             }",
        )
        .start();
    let p = s.ports[0];
    let r = get(p, "/cn/");
    assert_eq!((r.status, r.text().as_str()), (200, "origin\n"), "{}", s.error_log());
    let r = get(p, "/wrong/");
    assert_eq!(r.status, 502, "{}", r.text());
    s.wait_error_log("upstream SSL certificate does not match \"w.test\" while SSL handshaking to upstream");
    let r = get(p, "/untrusted/");
    assert_eq!(r.status, 502, "{}", r.text());
    s.wait_error_log("upstream SSL certificate verify error: (18:self");
}
