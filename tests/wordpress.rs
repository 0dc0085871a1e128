//! A real application installed as a user would: Debian's WordPress 6.1
//! behind the server, with php-fpm (Debian's php.ini and extensions, a
//! static pool of four) and a private MariaDB on a unix socket, all in
//! temporary directories (tests/common/wordpress.rs says how and why the
//! files are a copy of /usr/share/wordpress with our own wp-config.php).
//!
//! The server's configuration is WordPress's own nginx recipe
//! (developer.wordpress.org, "Nginx"): `index index.php`, `location /` with
//! `try_files $uri $uri/ /index.php?$args`, `location ~ \.php$` with
//! Debian's `snippets/fastcgi-php.conf` and `fastcgi_intercept_errors on`,
//! `expires max` for static assets, plus `gzip on` for CSS and JavaScript.
//!
//! The installer's form is submitted with curl through the server; the
//! installer then probes pretty permalinks by requesting the first post from
//! PHP, through the server, while the install request is still open. The
//! rest is a browser's session: the front page, the login form and its
//! cookies, the dashboard, the permalink settings form (with its nonce) set
//! to `/%postname%/`, the post by that permalink, static assets with and
//! without gzip, WordPress's 404 page and its virtual robots.txt.
//!
//! With SLUICE_TEST_NGINX=1 the same test runs against Debian's nginx (its
//! own fastcgi snippet), so every expectation is nginx's.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::codings::decode;
use common::fpm::*;
use common::wordpress::*;
use common::*;

const TITLE: &str = "Sluice Test Blog";
const ADMIN: &str = "admin";
const PASSWORD: &str = "correct horse battery staple";

/// The conf files `include` finds under the prefix: sluice's copies, or
/// Debian's own for nginx.
fn with_conf_files(b: ServerBuilder) -> ServerBuilder {
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf");
    let debian = Path::new("/etc/nginx");
    let from = |rel: &str| {
        let src = if prog() == "nginx" { debian.join(rel) } else { ours.join(rel) };
        fs::read(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()))
    };
    b.file("conf/fastcgi_params", from("fastcgi_params"))
        .file("conf/fastcgi.conf", from("fastcgi.conf"))
        .file("conf/snippets/fastcgi-php.conf", from("snippets/fastcgi-php.conf"))
}

fn server(wp: &WordPress, fpm: &Fpm) -> TestServer {
    let http = format!(
        r#"
        include mime.types;
        default_type application/octet-stream;
        access_log logs/access.log;
        gzip on;
        gzip_vary on;
        gzip_types text/css application/javascript;
        server {{
            listen 127.0.0.1:{{port}};
            server_name localhost;
            root {root};
            index index.php;

            location = /favicon.ico {{
                log_not_found off;
                access_log off;
            }}
            location / {{
                try_files $uri $uri/ /index.php?$args;
            }}
            location ~ \.php$ {{
                include snippets/fastcgi-php.conf;
                fastcgi_intercept_errors on;
                fastcgi_pass unix:{sock};
            }}
            location ~* \.(js|css|png|jpg|jpeg|gif|ico)$ {{
                expires max;
                log_not_found off;
            }}
        }}
        "#,
        root = wp.root.display(),
        sock = fpm.sock.display()
    );
    with_conf_files(builder().http(&http)).start()
}

/// A browser's session: the Host it sends and a cookie jar (names and
/// values only: WordPress's cookie paths do not matter to these requests).
struct Browser {
    port: u16,
    host: String,
    cookies: Vec<(String, String)>,
}

impl Browser {
    fn new(port: u16) -> Browser {
        Browser { port, host: format!("127.0.0.1:{port}"), cookies: Vec::new() }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.host)
    }

    fn send(&mut self, method: &str, path: &str, headers: &[&str], body: &str) -> Response {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.host);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            req.push_str(&format!("Cookie: {}\r\n", jar.join("; ")));
        }
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        if method == "POST" {
            req.push_str(&format!(
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(body);
        let r = request(self.port, &req);
        for c in r.headers_named("set-cookie") {
            let pair = c.split(';').next().unwrap_or("");
            let Some((k, v)) = pair.split_once('=') else { continue };
            let gone = c.to_ascii_lowercase().contains("max-age=0") || v == "deleted" || v.is_empty();
            self.cookies.retain(|(n, _)| n != k);
            if !gone {
                self.cookies.push((k.to_string(), v.to_string()));
            }
        }
        r
    }

    fn get(&mut self, path: &str) -> Response {
        self.send("GET", path, &[], "")
    }

    fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Response {
        self.send("POST", path, &[], &urlencode_form(form))
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn urlencode_form(form: &[(&str, &str)]) -> String {
    form.iter().map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v))).collect::<Vec<_>>().join("&")
}

/// The value of the hidden input `name` in a form.
fn hidden(html: &str, name: &str) -> String {
    let at = html.find(&format!("name=\"{name}\"")).unwrap_or_else(|| panic!("no input {name} in:\n{html}"));
    let rest = &html[at..];
    let v = rest.find("value=\"").unwrap_or_else(|| panic!("input {name} has no value")) + 7;
    rest[v..v + rest[v..].find('"').unwrap()].to_string()
}

/// The installer's form, step 2, as curl submits it.
fn install(port: u16) -> String {
    let mut c = Command::new("curl");
    c.args(["-sS", "--max-time", "60", "-w", "\n%{http_code}"]);
    for (k, v) in [
        ("weblog_title", TITLE),
        ("user_name", ADMIN),
        ("admin_password", PASSWORD),
        ("admin_password2", PASSWORD),
        ("pw_weak", "1"),
        ("admin_email", "admin@example.com"),
        ("blog_public", "1"),
    ] {
        c.arg("--data-urlencode").arg(format!("{k}={v}"));
    }
    c.arg(format!("http://127.0.0.1:{port}/wp-admin/install.php?step=2"));
    let out = run_bounded(c, Duration::from_secs(70));
    assert!(out.status.success(), "curl: {}", stderr_of(&out));
    stdout_of(&out)
}

#[test]
fn wordpress_installs_and_serves_a_session() {
    let started = Instant::now();
    let wp = WordPress::setup();
    let fpm = Fpm::start_pool(true, 4);
    let s = server(&wp, &fpm);
    let logs = || format!("--- error.log:\n{}\n--- php-fpm:\n{}", s.error_log(), read_lossy(&fpm.dir.join("fpm.log")));
    let mut b = Browser::new(s.port);

    // Not installed yet: WordPress sends everyone to its installer.
    let r = b.get("/");
    assert_eq!(r.status, 302, "{}\n{}\n{}", r.head, r.text(), logs());
    assert_eq!(r.header("location"), Some(b.url("/wp-admin/install.php").as_str()), "{}", r.head);

    let ready = started.elapsed();
    let out = install(s.port);
    assert!(out.ends_with("\n200"), "install: {out}\n{}", logs());
    assert!(out.contains("<h1>Success!</h1>"), "install: {out}");
    let installed = started.elapsed();

    // The front page: the blog's title, and the first post linked by the
    // permalink the installer's probe turned on (dated, so it got its
    // answer through the server while its own request was still open).
    let r = b.get("/");
    assert_eq!(r.status, 200, "{}\n{}", r.head, logs());
    assert_eq!(r.header("content-type"), Some("text/html; charset=UTF-8"));
    let home = r.text();
    assert!(home.contains(&format!("<title>{TITLE}</title>")), "{home}");
    let dated = home
        .split("href=\"")
        .filter_map(|h| h.split('"').next())
        .find(|h| h.ends_with("/hello-world/"))
        .unwrap_or_else(|| panic!("no link to the first post on the front page:\n{home}"))
        .to_string();
    let dated_path = dated.strip_prefix(&b.url("")).unwrap_or_else(|| panic!("{dated}")).to_string();
    assert_eq!(dated_path.matches('/').count(), 5, "/YYYY/MM/DD/hello-world/: {dated_path}");
    let log = wait_contains(&s.path("logs/access.log"), &format!("\"GET {dated_path} HTTP/1.1\" 200 "), LOG_WAIT);
    let probe = line_with(&log, &dated_path);
    assert!(probe.contains("\"WordPress/") && probe.ends_with(&format!("; {}\"", b.url(""))), "{probe}");

    // The same page gzipped (text/html, gzip's default type).
    let z = b.send("GET", "/", &["Accept-Encoding: gzip"], "");
    assert_eq!(z.status, 200);
    assert_eq!(z.header("content-encoding"), Some("gzip"), "{}", z.head);
    let unzipped = String::from_utf8_lossy(&decode("gzip", &z.body)).into_owned();
    assert!(unzipped.contains(&format!("<title>{TITLE}</title>")), "{unzipped}");

    // Logged out, wp-admin/ (through `index index.php`) sends to the login.
    let r = b.get("/wp-admin/");
    assert_eq!(r.status, 302, "{}", r.head);
    let login_url = format!("{}?redirect_to={}&reauth=1", b.url("/wp-login.php"), urlencode(&b.url("/wp-admin/")));
    assert_eq!(r.header("location"), Some(login_url.as_str()), "{}", r.head);
    // Without its slash, the directory gets nginx's 301 first.
    let r = b.get("/wp-admin");
    assert_eq!(r.status, 301, "{}", r.head);
    assert_eq!(r.header("location"), Some(b.url("/wp-admin/").as_str()), "{}", r.head);

    // The login form sets its test cookie; posting it back with the
    // credentials logs in.
    let r = b.get("/wp-login.php");
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(r.text().contains("id=\"loginform\""), "{}", r.text());
    assert!(b.cookies.iter().any(|(k, _)| k == "wordpress_test_cookie"), "{}", r.head);
    let r = b.post(
        "/wp-login.php",
        &[
            ("log", ADMIN),
            ("pwd", PASSWORD),
            ("wp-submit", "Log In"),
            ("redirect_to", &b.url("/wp-admin/")),
            ("testcookie", "1"),
        ],
    );
    assert_eq!(r.status, 302, "{}\n{}", r.head, r.text());
    assert_eq!(r.header("location"), Some(b.url("/wp-admin/").as_str()), "{}", r.head);
    let set = r.headers_named("set-cookie");
    assert!(set.iter().any(|c| c.starts_with("wordpress_logged_in_")), "{}", r.head);

    let r = b.get("/wp-admin/");
    assert_eq!(r.status, 200, "{}\n{}", r.head, logs());
    let dash = r.text();
    assert!(dash.contains("<title>Dashboard &lsaquo; Sluice Test Blog"), "{dash}");

    // Pretty permalinks as a user sets them: the settings form, its nonce.
    let r = b.get("/wp-admin/options-permalink.php");
    assert_eq!(r.status, 200, "{}", r.head);
    let form = r.text();
    let nonce = hidden(&form, "_wpnonce");
    let r = b.post(
        "/wp-admin/options-permalink.php",
        &[
            ("_wpnonce", &nonce),
            ("_wp_http_referer", "/wp-admin/options-permalink.php"),
            ("selection", "/%postname%/"),
            ("permalink_structure", "/%postname%/"),
            ("category_base", ""),
            ("tag_base", ""),
            ("submit", "Save Changes"),
        ],
    );
    assert_eq!(r.status, 302, "{}\n{}", r.head, r.text());
    assert_eq!(
        r.header("location"),
        Some(b.url("/wp-admin/options-permalink.php?settings-updated=true").as_str()),
        "{}",
        r.head
    );
    // The browser follows: the page saves the new rewrite rules.
    let r = b.get("/wp-admin/options-permalink.php?settings-updated=true");
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(r.text().contains("Permalink structure updated."), "{}", r.text());
    b.cookies.clear();

    // The post by its pretty permalink.
    let r = b.get("/hello-world/");
    assert_eq!(r.status, 200, "{}\n{}", r.head, logs());
    assert!(r.text().contains("Hello world!"), "{}", r.text());
    assert!(r.text().contains(&format!("<title>Hello world! &#8211; {TITLE}</title>")), "{}", r.text());

    // WordPress's own 404, through try_files and fastcgi_intercept_errors
    // (no error_page: the application's page passes).
    let r = b.get("/no-such-page/");
    assert_eq!(r.status, 404, "{}", r.head);
    assert_eq!(r.header("content-type"), Some("text/html; charset=UTF-8"));
    assert!(r.text().contains("This page could not be found."), "{}", r.text());

    // robots.txt is WordPress's, virtual.
    let r = b.get("/robots.txt");
    assert_eq!(r.status, 200, "{}", r.head);
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"), "{}", r.head);
    assert!(r.text().starts_with("User-agent: *\nDisallow: /wp-admin/\n"), "{}", r.text());

    // Static assets: from the file, `expires max`, gzipped when asked. One
    // is a symlink of the package's (to /usr/share/javascript).
    for (path, ctype) in [
        ("/wp-includes/css/dashicons.min.css", "text/css"),
        ("/wp-includes/js/jquery/jquery.min.js", "application/javascript"),
        ("/wp-includes/js/underscore.min.js", "application/javascript"),
    ] {
        let want = fs::read(wp.root.join(&path[1..])).unwrap();
        let r = b.get(path);
        assert_eq!(r.status, 200, "{path}: {}", r.head);
        assert_eq!(r.header("content-type"), Some(ctype), "{path}: {}", r.head);
        assert_eq!(r.header("cache-control"), Some("max-age=315360000"), "{path}: {}", r.head);
        assert_eq!(r.header("expires"), Some("Thu, 31 Dec 2037 23:55:55 GMT"), "{path}: {}", r.head);
        assert_eq!(r.header("content-encoding"), None, "{path}: {}", r.head);
        assert!(r.body == want, "{path}: {} bytes, want {}", r.body.len(), want.len());
        let z = b.send("GET", path, &["Accept-Encoding: gzip, deflate"], "");
        assert_eq!(z.status, 200, "{path}: {}", z.head);
        assert_eq!(z.header("content-encoding"), Some("gzip"), "{path}: {}", z.head);
        assert_eq!(z.header("vary"), Some("Accept-Encoding"), "{path}: {}", z.head);
        assert!(decode("gzip", &z.body) == want, "{path}: gzip body decodes to the file");
    }
    let missing = b.get("/wp-includes/css/no-such.css");
    assert_eq!(missing.status, 404, "{}", missing.head);
    // The recipe's exact location: no WordPress. Neither miss is logged
    // (`log_not_found off`).
    let r = b.get("/favicon.ico");
    assert_eq!(r.status, 404, "{}", r.head);
    let errors = s.error_log();
    assert!(!errors.contains("favicon.ico") && !errors.contains("no-such.css"), "{errors}");

    let took = started.elapsed();
    eprintln!("wordpress: set up in {ready:?}, installed at {installed:?}, whole test {took:?}");
}
