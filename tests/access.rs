//! nginx's access phase: `allow`/`deny`, `auth_basic` with every password
//! format Apache's `htpasswd` and `openssl passwd` write, `satisfy`, and
//! where the phase runs (every location reached, proxying ones too, after
//! internal redirects and for error pages; not before a `return`).
//! With SLUICE_TEST_NGINX=1 the same tests run against Debian's nginx.

mod common;

use std::process::Command;

use common::*;

fn b64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(c.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(c.get(2).copied().unwrap_or(0));
        for i in 0..4 {
            s.push(if i <= c.len() { char::from(T[(n >> (18 - 6 * i)) as usize & 63]) } else { '=' });
        }
    }
    s
}

fn basic(user: &str, pass: &str) -> String {
    format!("Authorization: Basic {}", b64(format!("{user}:{pass}").as_bytes()))
}

/// `USER:HASH` lines from the real tools.
fn htpasswd(flag: &str, user: &str, pass: &str) -> String {
    let out =
        Command::new("htpasswd").args([&format!("-nb{flag}"), user, pass]).output().expect("htpasswd (apache2-utils)");
    assert!(out.status.success(), "htpasswd {flag}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim_end().to_string() + "\n"
}

fn openssl_passwd(flag: &str, user: &str, pass: &str) -> String {
    let out = Command::new("openssl").args(["passwd", flag, pass]).output().expect("openssl");
    assert!(out.status.success());
    format!("{user}:{}\n", String::from_utf8(out.stdout).unwrap().trim_end())
}

fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn allow_and_deny_first_match_wins_and_levels_replace_the_list() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                deny all;
                location = /d.html { deny 127.0.0.1; allow all; }
                location = /a.html { allow 127.0.0.0/8; deny all; }
                location = /order.html { deny all; allow 127.0.0.1; }
                location = /other.html { allow 10.0.0.0/8; allow ::1; deny all; }
                location = /inherit.html { }
                location = /only-allow.html { allow 127.0.0.1; }
                location = /low.html { allow 127.1.2.3/8; deny all; }
                location /nested/ { allow all; location /nested/closed/ { deny 127.0.0.0/24; } }
                location = /ret { return 200 "returned\n"; }
                location = /proxy { proxy_pass http://127.0.0.1:9; }
            }"#,
        )
        .file("html/d.html", "d\n")
        .file("html/a.html", "a\n")
        .file("html/order.html", "o\n")
        .file("html/other.html", "x\n")
        .file("html/inherit.html", "i\n")
        .file("html/only-allow.html", "oa\n")
        .file("html/low.html", "low\n")
        .file("html/nested/open.html", "open\n")
        .file("html/nested/closed/c.html", "c\n")
        .start();
    for (path, want) in [
        ("/d.html", 403),
        ("/a.html", 200),
        ("/order.html", 403),
        ("/other.html", 403),
        ("/inherit.html", 403),
        ("/only-allow.html", 200),
        ("/low.html", 200),
        ("/nested/open.html", 200),
        ("/nested/closed/c.html", 403),
        // The rewrite phase's `return` comes before the access phase.
        ("/ret", 200),
        // A proxying location is refused before any origin is asked (none
        // listens on port 9: a 502 would mean it was).
        ("/proxy", 403),
    ] {
        let r = s.get(path);
        assert_eq!(r.status, want, "{path}: {}", r.head);
        if want == 403 {
            assert!(r.text().contains("<title>403 Forbidden</title>"), "{path}: {}", r.text());
        }
    }
    let log = s.wait_error_log("GET /proxy ");
    let denied = lines_with(&log, "access forbidden by rule");
    assert_eq!(denied.len(), 6, "{log}");
    assert!(denied.iter().all(|l| l.contains("[error]") && l.contains("client: 127.0.0.1")), "{log}");
    assert!(
        log.contains(r#"access forbidden by rule, client: 127.0.0.1, server: , request: "GET /d.html HTTP/1.1""#),
        "{log}"
    );
}

#[test]
fn the_access_phase_runs_again_after_internal_redirects() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location /secret/ { deny all; }
                location = /tf { try_files /nothing /secret/x.html; }
                location = /rw { rewrite ^ /secret/x.html last; }
                location = /idx/ { index /secret/x.html; }
                location = /ep { error_page 404 /secret/x.html; }
                location /pub/ { error_page 403 /denied.html; }
                location = /denied.html { }
                location /pub/closed/ { deny all; error_page 403 /denied.html; }
            }"#,
        )
        .file("html/secret/x.html", "secret\n")
        .file("html/denied.html", "custom denied\n")
        .start();
    for path in ["/tf", "/rw", "/idx/", "/ep"] {
        let r = s.get(path);
        assert_eq!(r.status, 403, "{path}: {}", r.head);
    }
    // A 403 of the access phase goes through error_page.
    let r = s.get("/pub/closed/x");
    assert_eq!((r.status, r.text().as_str()), (403, "custom denied\n"), "{}", r.head);
}

#[test]
fn ipv6_clients() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                listen [::1]:{port};
                root {prefix}/html;
                location = /deny6.html { deny ::1; }
                location = /net6.html { allow ::/127; deny all; }
                location = /v4only.html { allow 127.0.0.1; deny all; }
            }"#,
        )
        .file("html/deny6.html", "6\n")
        .file("html/net6.html", "n\n")
        .file("html/v4only.html", "4\n")
        .start();
    let get = |addr: std::net::SocketAddr, path: &str| {
        let mut c = Conn::connect_addr(addr);
        c.send(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
        c.read_response().status
    };
    let v6: std::net::SocketAddr = format!("[::1]:{}", s.port).parse().unwrap();
    let v4: std::net::SocketAddr = format!("127.0.0.1:{}", s.port).parse().unwrap();
    assert_eq!(get(v6, "/deny6.html"), 403);
    assert_eq!(get(v4, "/deny6.html"), 200);
    assert_eq!(get(v6, "/net6.html"), 200);
    assert_eq!(get(v4, "/net6.html"), 403);
    assert_eq!(get(v6, "/v4only.html"), 403);
    // IPv4-mapped clients (nginx's dual-stack `ipv6only=off` sockets) are
    // covered by access::rules' unit tests: sluice's IPv6 listeners are
    // always IPv6-only, so none arrives here.
    let log = s.wait_error_log("client: ::1");
    assert!(log.contains("access forbidden by rule, client: ::1,"), "{log}");
}

/// Every format: bcrypt, apr1, SHA, DES crypt, plain text (which nginx
/// takes for a DES salt, so it never matches), `{PLAIN}`, `{SSHA}`, and
/// glibc's `$1$`, `$5$`, `$6$`.
fn password_file() -> String {
    let mut f = String::from("# users\n\n");
    f += &htpasswd("B", "bcrypt", "s3cret");
    f += &htpasswd("m", "apr1", "s3cret");
    f += &htpasswd("s", "sha", "s3cret");
    f += &htpasswd("d", "des", "s3cret");
    f += &htpasswd("p", "plain", "s3cret");
    f += "tagged:{PLAIN}s3cret\n";
    // Salted SHA-1 as LDAP tools write it: base64(SHA1("s3cret" "NaCl") "NaCl").
    f += "ssha:{SSHA}xhwvAVlxQgjdD+6rzZoVg7iQWZROYUNs\n";
    f += &openssl_passwd("-1", "md5crypt", "s3cret");
    f += &openssl_passwd("-5", "sha256crypt", "s3cret");
    f += &openssl_passwd("-6", "sha512crypt", "s3cret");
    f += "$2y$05$bvIG6Nmid91Mu9RcmmWZfO5HJIMCT8riNW0hEp8f6/FuA2/mHZFpe:not-a-user\n";
    f += &htpasswd("B", "bcrypt", "second-entry-ignored");
    f
}

#[test]
fn auth_basic_checks_every_htpasswd_format() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location / {
                    auth_basic "Staff \"only\"";
                    auth_basic_user_file htpasswd;
                    add_header X-User "$remote_user" always;
                }
            }"#,
        )
        .file("conf/htpasswd", password_file())
        .file("html/index.html", "welcome\n")
        .start();
    for user in ["bcrypt", "apr1", "sha", "des", "tagged", "ssha", "md5crypt", "sha256crypt", "sha512crypt"] {
        let r = s.get_with("/", &[&basic(user, "s3cret")]);
        assert_eq!((r.status, r.text().as_str()), (200, "welcome\n"), "{user}: {}", r.head);
        assert_eq!(r.header("X-User"), Some(user));
        let r = s.get_with("/", &[&basic(user, "wrong")]);
        assert_eq!(r.status, 401, "{user} with a wrong password: {}", r.head);
        assert_eq!(r.header("WWW-Authenticate"), Some(r#"Basic realm="Staff "only"""#));
        assert_eq!(r.header("X-User"), Some(user));
        assert!(r.text().contains("<title>401 Authorization Required</title>"), "{}", r.text());
    }
    // htpasswd -p writes the password as is: nginx hands it to crypt().
    let r = s.get_with("/", &[&basic("plain", "s3cret")]);
    assert_eq!(r.status, 401);
    let r = s.get_with("/", &[&basic("nobody", "s3cret")]);
    assert_eq!(r.status, 401);
    let r = s.get("/");
    assert_eq!(r.status, 401);
    assert_eq!(r.header("WWW-Authenticate"), Some(r#"Basic realm="Staff "only"""#));
    for bad in ["Basic", "Basic !!!", "Bearer abc", &format!("Basic {}", b64(b"nocolon"))] {
        let r = s.get_with("/", &[&format!("Authorization: {bad}")]);
        assert_eq!(r.status, 401, "{bad}");
        assert_eq!(r.header("X-User"), None, "{bad}: an empty value is not sent");
    }
    let log = s.wait_error_log("user \"nobody\"");
    let file = s.path("conf/htpasswd").display().to_string();
    let not_found = lines_with(&log, &format!("user \"nobody\" was not found in \"{file}\", client: 127.0.0.1"));
    assert!(not_found.len() == 1 && not_found[0].contains("[error]"), "{log}");
    assert!(log.contains("user \"plain\": password mismatch"), "{log}");
    assert!(log.contains("user \"bcrypt\": password mismatch"), "{log}");
    let none = lines_with(&log, "no user/password was provided for basic authentication");
    assert_eq!(none.len(), 5, "{log}");
    assert!(none.iter().all(|l| l.contains("[info]")), "{log}");
}

#[test]
fn auth_basic_variables_off_and_file_errors() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                auth_basic "realm of $host";
                auth_basic_user_file pw_$arg_f;
                location /open/ { auth_basic off; }
                location /var-off/ { auth_basic $arg_realm; }
                location /missing/ { auth_basic_user_file {prefix}/no/such/file; }
                location /notdir/ { auth_basic_user_file {prefix}/html/index.html/x; }
                location /isdir/ { auth_basic_user_file {prefix}/html; }
                location /ret { return 200 "user=$remote_user\n"; }
            }"#,
        )
        .file("conf/pw_a", "ann:{PLAIN}pa\n")
        .file("conf/pw_b", "bob:{PLAIN}pb\n")
        .file("html/index.html", "home\n")
        .file("html/open/index.html", "open\n")
        .file("html/var-off/index.html", "var-off\n")
        .start();
    let r = s.get_with("/?f=a", &[&basic("ann", "pa")]);
    assert_eq!(r.status, 200, "{}", r.head);
    let r = s.get_with("/?f=b", &[&basic("ann", "pa")]);
    assert_eq!(r.status, 401);
    assert_eq!(r.header("WWW-Authenticate"), Some(r#"Basic realm="realm of localhost""#));
    let r = s.get_with("/?f=b", &[&basic("bob", "pb")]);
    assert_eq!(r.status, 200);
    assert_eq!(s.get("/open/").status, 200);
    assert_eq!(s.get("/var-off/?realm=off").status, 200);
    assert_eq!(s.get("/var-off/?realm=on").status, 401);
    // `return` runs before the access phase; $remote_user is the header's.
    let r = s.get_with("/ret", &[&basic("zed", "x")]);
    assert_eq!((r.status, r.text().as_str()), (200, "user=zed\n"));
    // A file that does not exist is a 403; one that cannot be read, 500.
    let r = s.get_with("/missing/", &[&basic("ann", "pa")]);
    assert_eq!(r.status, 403);
    let r = s.get("/missing/");
    assert_eq!(r.status, 401, "credentials are asked for before the file is opened");
    let r = s.get_with("/notdir/", &[&basic("ann", "pa")]);
    assert_eq!(r.status, 500);
    let r = s.get_with("/isdir/", &[&basic("ann", "pa")]);
    assert_eq!(r.status, 500);
    let log = s.wait_error_log("pread()");
    let p = s.prefix.display().to_string();
    let missing = lines_with(&log, &format!("open() \"{p}/no/such/file\" failed (2: No such file or directory)"));
    assert_eq!(missing.len(), 1, "{log}");
    assert!(missing[0].contains("[error]"), "{log}");
    assert!(!log.contains("access forbidden by rule"), "{log}");
    let notdir = lines_with(&log, &format!("open() \"{p}/html/index.html/x\" failed (20: Not a directory)"));
    assert!(notdir.len() == 1 && notdir[0].contains("[crit]"), "{log}");
    let isdir = lines_with(&log, &format!("pread() \"{p}/html\" failed (21: Is a directory)"));
    assert!(isdir.len() == 1 && isdir[0].contains("[crit]"), "{log}");
}

#[test]
fn satisfy_any_admits_on_either_and_prefers_401() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                auth_basic "R";
                auth_basic_user_file pw;
                location /all-deny/ { deny all; }
                location /all-allow/ { allow 127.0.0.1; }
                location /any-deny/ { satisfy any; deny all; }
                location /any-allow/ { satisfy any; allow 127.0.0.1; deny all; }
                location /any-norules/ { satisfy any; }
                location /any-noauth/ { satisfy any; deny all; auth_basic off; }
                location /any-nofile/ { satisfy any; deny all; auth_basic_user_file {prefix}/nothing; }
                location /any-badfile/ { satisfy any; allow all; auth_basic_user_file {prefix}/html/x/y; }
            }"#,
        )
        .file("conf/pw", "u:{PLAIN}p\n")
        .file("html/all-deny/index.html", "x\n")
        .file("html/all-allow/index.html", "x\n")
        .file("html/any-deny/index.html", "x\n")
        .file("html/any-allow/index.html", "x\n")
        .file("html/any-norules/index.html", "x\n")
        .file("html/any-noauth/index.html", "x\n")
        .file("html/any-nofile/index.html", "x\n")
        .file("html/any-badfile/index.html", "x\n")
        .start();
    let good = basic("u", "p");
    let bad = basic("u", "nope");
    for (path, cred, want) in [
        // satisfy all: a deny is final, without asking for a password.
        ("/all-deny/", None, 403),
        ("/all-deny/", Some(&good), 403),
        ("/all-allow/", None, 401),
        ("/all-allow/", Some(&good), 200),
        // satisfy any: either admits; when both refuse, 401 wins.
        ("/any-deny/", None, 401),
        ("/any-deny/", Some(&bad), 401),
        ("/any-deny/", Some(&good), 200),
        ("/any-allow/", None, 200),
        ("/any-norules/", None, 401),
        ("/any-norules/", Some(&good), 200),
        ("/any-noauth/", None, 403),
        ("/any-nofile/", Some(&good), 403),
        ("/any-badfile/", Some(&good), 200),
    ] {
        let r = match cred {
            Some(c) => s.get_with(path, &[c]),
            None => s.get(path),
        };
        assert_eq!(r.status, want, "{path} {cred:?}: {}", r.head);
        assert_eq!(r.header("WWW-Authenticate").is_some(), want == 401, "{path}: {}", r.head);
    }
    let log = s.wait_error_log("/any-nofile/");
    let denied = lines_with(&log, "access forbidden by rule");
    // all-deny twice, then under `satisfy any` only when no handler asked
    // for a password: any-noauth, and any-nofile after its open() line.
    assert_eq!(denied.len(), 4, "{log}");
    assert_eq!(lines_with(&log, "/any-deny/").iter().filter(|l| l.contains("forbidden")).count(), 0, "{log}");
    assert_eq!(lines_with(&log, "GET /any-nofile/").len(), 2, "{log}");
}

#[test]
fn error_page_for_401_keeps_www_authenticate() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                location /p/ { auth_basic "R"; auth_basic_user_file pw; error_page 401 /login.html; }
                location = /login.html { }
            }"#,
        )
        .file("conf/pw", "u:{PLAIN}p\n")
        .file("html/login.html", "please log in\n")
        .start();
    let r = s.get("/p/");
    assert_eq!((r.status, r.text().as_str()), (401, "please log in\n"), "{}", r.head);
    assert_eq!(r.header("WWW-Authenticate"), Some(r#"Basic realm="R""#));
}

fn test_conf(body: &str) -> (TestServer, std::process::Output) {
    // access_log given, so nginx's run gets no extra line (line numbers
    // below count from the http block's start at line 7).
    let s = builder().http(&format!("access_log logs/access.log;\n{body}")).prepare();
    let out = s.run(&["-t"]);
    (s, out)
}

#[test]
fn configuration_errors_and_warnings_as_nginx() {
    let p = prog();
    for arg in ["300.0.0.1", "example.com", "10.0.0.0/33", "::1/129", "1.2.3.4/x", "255.255.255.255"] {
        let (s, out) = test_conf(&format!("server {{\n    listen 127.0.0.1:{{port}};\n    deny {arg};\n}}\n"));
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{arg}: {err}");
        let want = format!("{p}: [emerg] invalid parameter \"{arg}\" in {}:10", s.conf_path().display());
        assert!(err.contains(&want), "want {want:?} in:\n{err}");
    }
    let (s, out) = test_conf("server {\n    listen 127.0.0.1:{port};\n    allow 10.0.0.1/8;\n}\n");
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    let want = format!("{p}: [warn] low address bits of 10.0.0.1/8 are meaningless in {}:10", s.conf_path().display());
    assert!(err.contains(&want), "want {want:?} in:\n{err}");
    let (s, out) = test_conf("server {\n    listen 127.0.0.1:{port};\n    satisfy some;\n}\n");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("[emerg] invalid value \"some\" in {}:10", s.conf_path().display())), "{err}");
    let (_s, out) =
        test_conf("server {\n    listen 127.0.0.1:{port};\n    location / { if ($arg_x) { deny all; } }\n}\n");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("[emerg] \"deny\" directive is not allowed here"), "{err}");
}

#[test]
fn valid_referers_and_invalid_referer() {
    let s = builder()
        .http(
            r#"access_log logs/access.log;
            server {
                listen 127.0.0.1:{port};
                server_name site.test *.site.test;
                location / {
                    valid_referers none blocked example.com *.example.org example.net/galleries/ ~\.google\.;
                    if ($invalid_referer) { return 403; }
                    return 200 "ok\n";
                }
                location /strict/ {
                    valid_referers example.com;
                    valid_referers .example.org www.example.*;
                    return 200 "[$invalid_referer]\n";
                }
                location /names/ {
                    valid_referers server_names;
                    return 200 "[$invalid_referer]\n";
                }
                location /unset/ { return 200 "[$invalid_referer]\n"; }
            }"#,
        )
        .start();
    let get = |path: &str, referer: Option<&str>| {
        let h = referer.map(|r| format!("Referer: {r}"));
        let hs: Vec<&str> = h.iter().map(String::as_str).collect();
        let r = s.get_with(path, &hs);
        (r.status, r.text())
    };
    for (referer, want) in [
        (None, 200),
        (Some("bookmark"), 200),
        (Some("http://example.com/any"), 200),
        (Some("HTTPS://EXAMPLE.COM:8443/x"), 200),
        (Some("http://a.b.example.org/"), 200),
        (Some("http://example.org/"), 403),
        (Some("http://example.net/galleries/1.jpg"), 200),
        (Some("http://example.net/other/"), 403),
        (Some("https://www.google.com/search?q=x"), 200),
        (Some("http://evil.test/"), 403),
    ] {
        assert_eq!(get("/", referer).0, want, "{referer:?}");
    }
    for (referer, want) in [
        (None, "[1]\n"),
        (Some("http://a.b"), "[1]\n"),
        (Some("http://example.com/"), "[]\n"),
        (Some("http://example.org/"), "[]\n"),
        (Some("http://x.example.org/"), "[]\n"),
        (Some("http://www.example.co.uk/"), "[]\n"),
        (Some("http://www.example/"), "[1]\n"),
    ] {
        assert_eq!(get("/strict/", referer).1, want, "{referer:?}");
    }
    assert_eq!(get("/names/", Some("http://site.test/")).1, "[]\n");
    assert_eq!(get("/names/", Some("http://w.site.test/")).1, "[]\n");
    assert_eq!(get("/names/", Some("http://other.test/")).1, "[1]\n");
    assert_eq!(get("/unset/", Some("http://other.test/")).1, "[]\n");
}

#[test]
fn valid_referers_configuration_errors() {
    let p = prog();
    for (directive, msg) in [
        ("valid_referers none blocked;", None),
        ("valid_referers none ~x;", None),
        ("valid_referers a.com a.com/x;", Some("conflicting parameter \"a.com\"")),
        ("valid_referers a*b.com;", Some("invalid hostname or wildcard \"a*b.com\"")),
        ("valid_referers \"\";", Some("invalid referer \"\"")),
        ("valid_referers ~;", Some("empty regex in \"~\"")),
        ("valid_referers ~(;", Some("pcre2_compile() failed: missing closing parenthesis in \"(\"")),
    ] {
        let (s, out) = test_conf(&format!("server {{\n    listen 127.0.0.1:{{port}};\n    {directive}\n}}\n"));
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{directive}: {err}");
        let want = match msg {
            Some(m) => format!("{p}: [emerg] {m} in {}:10", s.conf_path().display()),
            None => format!(
                "[emerg] the \"none\" or \"blocked\" referers are specified in the \"valid_referers\" directive without any valid referer\n{p}: configuration file"
            ),
        };
        assert!(err.contains(&want), "{directive}: want {want:?} in:\n{err}");
    }
}

#[test]
fn proxied_locations_are_checked_before_the_origin_is_asked() {
    let o = common::origin::Origin::start(|req| {
        common::origin::Reply::ok(format!("origin saw {}\n", req.header("authorization").unwrap_or("-")))
    });
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                location / {{
                    auth_basic "R";
                    auth_basic_user_file pw;
                    proxy_pass http://{};
                }}
                location /closed/ {{ deny all; proxy_pass http://{}; }}
            }}"#,
            o.addr(),
            o.addr()
        ))
        .file("conf/pw", "u:{PLAIN}p\n")
        .start();
    assert_eq!(s.get("/x").status, 401);
    assert_eq!(s.get_with("/x", &[&basic("u", "bad")]).status, 401);
    assert_eq!(s.get_with("/closed/x", &[&basic("u", "p")]).status, 403);
    assert_eq!(o.connections(), 0, "refused requests never reach the origin");
    let cred = basic("u", "p");
    let r = s.get_with("/x", &[&cred]);
    assert_eq!(r.status, 200, "{}", r.head);
    // The Authorization header goes to the origin, as nginx passes it.
    assert_eq!(r.text(), format!("origin saw {}\n", cred.trim_start_matches("Authorization: ")));
}

#[test]
fn limit_except_applies_to_the_methods_it_does_not_list() {
    let o = common::origin::echo();
    let s = builder()
        .http(&format!(
            r#"server {{
                listen 127.0.0.1:{{port}};
                root {{prefix}}/html;
                location /ro/ {{
                    limit_except GET {{ deny all; }}
                }}
                location /api/ {{
                    proxy_pass http://127.0.0.1:{p};
                    limit_except GET POST {{ allow 10.0.0.0/8; deny all; }}
                }}
                location /auth/ {{
                    limit_except GET {{
                        auth_basic "writers";
                        auth_basic_user_file {{prefix}}/conf/htpasswd;
                    }}
                }}
            }}"#,
            p = o.port
        ))
        .file("html/ro/a.txt", "read only\n")
        .file("html/auth/a.txt", "auth\n")
        .file("conf/htpasswd", "writer:{PLAIN}secret\n")
        .start();
    let req = |m: &str, path: &str, extra: &str| {
        request(
            s.port,
            &format!("{m} {path} HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"),
        )
    };
    assert_eq!(req("GET", "/ro/a.txt", "").status, 200);
    assert_eq!(req("HEAD", "/ro/a.txt", "").status, 200);
    assert_eq!(req("POST", "/ro/a.txt", "").status, 403);
    assert_eq!(req("DELETE", "/ro/a.txt", "").status, 403);
    // A proxied location: listed methods reach the origin, others do not.
    assert_eq!(req("GET", "/api/x", "").text(), "GET /api/x\n");
    assert_eq!(req("POST", "/api/x", "").text(), "POST /api/x\n");
    let before = o.count();
    assert_eq!(req("DELETE", "/api/x", "").status, 403);
    assert_eq!(o.count(), before);
    // auth_basic for writers only.
    assert_eq!(req("GET", "/auth/a.txt", "").status, 200);
    assert_eq!(req("PUT", "/auth/a.txt", "").status, 401);
    let auth = format!("{}\r\n", basic("writer", "secret"));
    // Authorized, then the static module's own answer to a PUT.
    assert_eq!(req("PUT", "/auth/a.txt", &auth).status, 405);
}

#[test]
fn limit_except_configuration_errors() {
    for (conf, msg) in [
        ("location / { limit_except BREW { deny all; } }", "invalid method \"BREW\""),
        ("limit_except GET { deny all; }", "\"limit_except\" directive is not allowed here"),
        ("location / { limit_except GET { root /tmp; } }", "\"root\" directive is not allowed here"),
    ] {
        let (_t, out) = test_conf(&format!("server {{ listen 127.0.0.1:{{port}}; {conf} }}"));
        let err = stderr_of(&out);
        assert!(!out.status.success() && err.contains(msg), "{conf}: {err}");
    }
}

/// `auth_delay`: a 401 of the access phase (no password, a wrong one, or
/// `satisfy any` ending in 401) is held back, with nginx's info line; a
/// right password and a 403 are not.
#[test]
fn auth_delay_holds_back_unauthorized_answers() {
    let s = builder()
        .http(
            r#"server {
                listen 127.0.0.1:{port};
                root {prefix}/html;
                auth_basic "R";
                auth_basic_user_file pw;
                auth_delay 600ms;
                location /deny/ { auth_basic off; deny all; }
            }"#,
        )
        .file("conf/pw", "u:{PLAIN}p\n")
        .file("html/index.html", "in\n")
        .file("html/deny/index.html", "x\n")
        .start();
    let timed = |headers: &[&str], path: &str| {
        let t = std::time::Instant::now();
        let r = s.get_with(path, headers);
        (r.status, t.elapsed())
    };
    let delay = std::time::Duration::from_millis(600);
    let (status, took) = timed(&[], "/");
    assert!(status == 401 && took >= delay, "{status} after {took:?}");
    let bad = basic("u", "wrong");
    let (status, took) = timed(&[&bad], "/");
    assert!(status == 401 && took >= delay, "{status} after {took:?}");
    let good = basic("u", "p");
    let (status, took) = timed(&[&good], "/");
    assert!(status == 200 && took < delay, "{status} after {took:?}");
    let (status, took) = timed(&[], "/deny/");
    assert!(status == 403 && took < delay, "{status} after {took:?}");
    let log = s.wait_error_log("delaying unauthorized request");
    assert_eq!(lines_with(&log, "delaying unauthorized request").len(), 2, "{log}");
    assert!(lines_with(&log, "delaying unauthorized request").iter().all(|l| l.contains("[info]")), "{log}");
}
