//! `secure_link`, `secure_link_md5` and `secure_link_secret`: links made
//! with a secret, the way published configs use them (`if ($secure_link =
//! "") { return 403; }`), each answer as nginx gives it for the same URL.
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use md5::Digest;

use common::*;

const HTTP: &str = r#"
    server {
        listen 127.0.0.1:{port};
        location /s/ {
            secure_link $arg_md5,$arg_expires;
            secure_link_md5 "$secure_link_expires$uri$remote_addr secret";
            if ($secure_link = "") { return 403; }
            if ($secure_link = "0") { return 410; }
            return 200 "ok [$secure_link] [$secure_link_expires]\n";
        }
        location /n/ { secure_link $arg_md5; secure_link_md5 "$uri secret"; return 200 "[$secure_link][$secure_link_expires]\n"; }
        location /p/ {
            secure_link_secret s3cr3t;
            if ($secure_link = "") { return 403; }
            return 200 "old [$secure_link]\n";
        }
        location /none/ { return 200 "[$secure_link][$secure_link_expires]\n"; }
    }
"#;

/// base64url of the MD5 of `text`, without padding (what `openssl md5
/// -binary | openssl base64 | tr +/ -_ | tr -d =` prints).
fn token(text: &str) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let d = md5::Md5::digest(text.as_bytes());
    let mut s = String::new();
    for c in d.chunks(3) {
        let n = c.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - c.len()));
        for i in 0..=c.len() {
            s.push(char::from(T[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    s
}

fn hex_md5(text: &str) -> String {
    md5::Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// `url` answers `status`, and `body` when one is given.
fn expect(s: &TestServer, url: &str, status: u16, body: Option<&str>) {
    let r = s.get(url);
    assert_eq!(r.status, status, "{url}");
    if let Some(b) = body {
        assert_eq!(r.text(), b, "{url}");
    }
}

#[test]
fn checksums_and_expiry_decide_the_variable() {
    let s = builder().http(HTTP).start();
    let good = token("2147483647/s/file127.0.0.1 secret");
    let past = token("1000/s/file127.0.0.1 secret");
    let n = token("/n/x secret");
    for (url, status, body) in [
        (format!("/s/file?md5={good}&expires=2147483647"), 200, Some("ok [1] [2147483647]\n")),
        (format!("/s/file?md5={past}&expires=1000"), 410, None),
        // The time is part of the hash.
        (format!("/s/file?md5={good}&expires=2147483646"), 403, None),
        (format!("/s/file?md5={good}"), 403, None),
        (format!("/s/file?md5={good}&expires=0"), 403, None),
        (format!("/s/file?md5={good}&expires=abc"), 403, None),
        ("/s/file".to_string(), 403, None),
        (format!("/n/x?md5={n}"), 200, Some("[1][]\n")),
        (format!("/n/x?md5={n}=="), 200, Some("[1][]\n")),
        (format!("/n/x?md5={n}AA"), 200, Some("[][]\n")),
        (format!("/n/x?md5={}+", &n[..21]), 200, Some("[][]\n")),
        ("/none/".to_string(), 200, Some("[][]\n")),
    ] {
        expect(&s, &url, status, body);
    }
}

#[test]
fn the_old_form_checks_a_hex_hash_in_the_path() {
    let s = builder().http(HTTP).start();
    let h = hex_md5("dl/file.zips3cr3t");
    let hq = hex_md5("dl/file.zip?x=1s3cr3t");
    for (url, status, body) in [
        (format!("/p/{h}/dl/file.zip"), 200, Some("old [dl/file.zip]\n")),
        (format!("/p/{}/dl/file.zip", h.to_uppercase()), 200, Some("old [dl/file.zip]\n")),
        // The raw target, arguments included.
        (format!("/p/{hq}/dl/file.zip?x=1"), 200, Some("old [dl/file.zip?x=1]\n")),
        (format!("/p/{h}/dl/other.zip"), 403, None),
        (format!("/p/{h}/"), 403, None),
        (format!("/p/x/{h}/dl/file.zip"), 403, None),
    ] {
        expect(&s, &url, status, body);
    }
}

#[test]
fn the_two_forms_do_not_mix_at_one_level() {
    for conf in [
        "location /a/ { secure_link $arg_md5; secure_link_secret x; }",
        "location /a/ { secure_link_secret x; secure_link_md5 y; }",
    ] {
        let why = "\"secure_link_secret\" cannot be mixed with \"secure_link\" and \"secure_link_md5\"";
        assert_refused(&format!("server {{ listen 127.0.0.1:{{port}}; {conf} }}"), why);
    }
    // Across levels they do: the inner level's form replaces the outer's.
    let t = builder()
        .http("server { listen 127.0.0.1:{port}; secure_link $arg_md5; secure_link_md5 x; location /a/ { secure_link_secret x; } }")
        .prepare();
    assert!(t.run(&["-t"]).status.success());
}
