//! Debian's certbot with its nginx plugin (`python3-certbot-nginx`)
//! driving sluice as it drives nginx, against Pebble on loopback:
//! `certbot --nginx --nginx-ctl SLUICE --nginx-server-root DIR`. certbot
//! runs `SLUICE -c DIR/nginx.conf -V` (version, `--with-http_ssl_module`,
//! SNI, the OpenSSL line), parses the configuration itself, adds the
//! HTTP-01 location, runs `-t` and `-s reload`, and after issuance adds
//! `listen PORT ssl`, `ssl_certificate` and an `include` of its
//! `options-ssl-nginx.conf` (`ssl_session_cache shared:le_nginx_SSL:10m`,
//! `ssl_ciphers` with DHE suites, ...) and `ssl_dhparam`, then reloads
//! again. What is checked is what a user sees: certbot's exit status,
//! the edited site file, Pebble's validation request in the access log,
//! the same master serving the new certificate (chained to Pebble's
//! root) after each reload, and plain HTTP unchanged. Then
//! `certbot renew --force-renewal` swaps in a second certificate. A
//! second test does the first run on the Debian package's layout
//! (sluice.conf, sites in conf.d, an `nginx.conf` symlink for certbot).
//!
//! certbot adds its redirect only to servers listening on port 80
//! (`DEFAULT_LISTEN_PORT` in the plugin), which a test cannot take, so
//! the run says `--no-redirect`. With `SLUICE_TEST_NGINX=1` the same runs
//! drive Debian's nginx (started and named as `--nginx-ctl`), a check
//! that what is asserted is what certbot does with nginx.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::acme::Ca;
use common::tls::nginx_mode;
use common::*;

/// The server certbot drives: sluice, or nginx with `SLUICE_TEST_NGINX`.
fn server_bin() -> &'static str {
    if nginx_mode() { NGINX } else { BIN }
}

const NAME: &str = "example.test";
const PAGE: &str = "hello from example.test\n";

/// sluice started as `sluice -p PREFIX/ -c PREFIX/MAIN` (PREFIX is what
/// certbot's `--nginx-server-root` names); stopped on drop.
struct Sluice {
    child: Child,
    prefix: PathBuf,
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sluice {
    /// Starts on `prefix` with `prefix/main` as the configuration.
    fn start(prefix: &Path, main: &str, port: u16) -> Sluice {
        let child = Command::new(server_bin())
            .arg("-p")
            .arg(format!("{}/", prefix.display()))
            .arg("-c")
            .arg(prefix.join(main))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(prefix.join("stderr.txt")).expect("stderr.txt"))
            .spawn()
            .expect("sluice");
        let mut s = Sluice { child, prefix: prefix.to_path_buf() };
        let deadline = Instant::now() + Duration::from_secs(15);
        while !(port_accepts(port) && s.pid_file() == Some(s.child.id())) {
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("sluice exited ({st}):\n{}\n{}", read_lossy(&prefix.join("stderr.txt")), s.error_log());
            }
            assert!(Instant::now() < deadline, "sluice did not start:\n{}", s.error_log());
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn pid_file(&self) -> Option<u32> {
        std::fs::read_to_string(self.prefix.join("logs/nginx.pid")).ok()?.trim().parse().ok()
    }

    fn error_log(&self) -> String {
        read_lossy(&self.prefix.join("logs/error.log"))
    }

    fn reloads(&self) -> usize {
        // nginx adds "from PID" before ", reconfiguring".
        self.error_log().matches("signal 1 (SIGHUP) received").count()
    }

    /// Still the master that was started, and the one the pid file names.
    fn assert_same_master(&mut self) {
        assert!(matches!(self.child.try_wait(), Ok(None)), "the master exited:\n{}", self.error_log());
        assert_eq!(self.pid_file(), Some(self.child.id()), "the pid file names the master started");
    }
}

/// Where the site's server block is and how the main file is named.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Debian's nginx: nginx.conf including `sites-enabled/*` (relative,
    /// so from the configuration's directory).
    Nginx,
    /// Debian's sluice package: workers as `user nobody`, sluice.conf
    /// including `conf.d/*.conf` by absolute path, and the `nginx.conf -> sluice.conf` symlink certbot
    /// needs, since its plugin opens `SERVER_ROOT/nginx.conf` by name.
    Packaged,
}

impl Layout {
    fn main(self) -> &'static str {
        match self {
            Layout::Nginx => "nginx.conf",
            Layout::Packaged => "sluice.conf",
        }
    }
    fn site(self) -> &'static str {
        match self {
            Layout::Nginx => "sites-enabled/example",
            Layout::Packaged => "conf.d/example.conf",
        }
    }
}

/// A server root in `layout`, with every path certbot's `-t`/`-s reload`
/// read absolute (certbot gives `-c` and no `-p`): a default server on
/// `http` and the site's.
fn server_root(layout: Layout, http: u16, ipv6: bool) -> PathBuf {
    let root = temp_dir("certbot-srv");
    for d in ["logs", "html", "sites-enabled", "conf.d"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/mime.types"), root.join("mime.types"))
        .expect("mime.types");
    std::fs::write(root.join("html/index.html"), PAGE).expect("index.html");
    let r = root.display();
    let sites = match layout {
        Layout::Nginx => "sites-enabled/*".to_string(),
        Layout::Packaged => format!("{r}/conf.d/*.conf"),
    };
    // The package's workers serve as an unprivileged user; certbot's keys
    // are root's (0600 in 0700 directories), read by the root side.
    let user = if layout == Layout::Packaged { "user nobody nogroup;\n" } else { "" };
    let conf = format!(
        "{user}daemon off;\npid {r}/logs/nginx.pid;\nerror_log {r}/logs/error.log info;\nevents {{}}\n\
         http {{\n    include mime.types;\n    default_type application/octet-stream;\n    \
         access_log {r}/logs/access.log;\n    include {sites};\n\n    \
         server {{\n        listen 127.0.0.1:{http} default_server;\n        server_name _;\n        \
         return 404 \"no such site\\n\";\n    }}\n}}\n"
    );
    std::fs::write(root.join(layout.main()), conf).expect("main configuration");
    if layout == Layout::Packaged {
        std::os::unix::fs::symlink("sluice.conf", root.join("nginx.conf")).expect("nginx.conf symlink");
    }
    let v6 = if ipv6 { format!("    listen [::1]:{http};\n") } else { String::new() };
    let site =
        format!("server {{\n    listen 127.0.0.1:{http};\n{v6}    server_name {NAME};\n    root {r}/html;\n}}\n");
    std::fs::write(root.join(layout.site()), site).expect("site");
    root
}

/// Runs certbot with its state under `le`, trusting Pebble's HTTPS.
fn certbot(args: &[&str], le: &Path, ca: &Ca) -> Output {
    let mut c = Command::new("certbot");
    c.args(args)
        .arg("--non-interactive")
        .arg("--config-dir")
        .arg(le.join("config"))
        .arg("--work-dir")
        .arg(le.join("work"))
        .arg("--logs-dir")
        .arg(le.join("logs"))
        .env("REQUESTS_CA_BUNDLE", ca.minica());
    run_bounded(c, Duration::from_secs(180))
}

fn assert_ok(what: &str, out: &Output, le: &Path, s: &Sluice, ca: &Ca) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}\n--- certbot's log:\n{}\n--- error.log:\n{}\n--- pebble:\n{}",
        out.status,
        stdout_of(out),
        stderr_of(out),
        read_lossy(&le.join("logs/letsencrypt.log")),
        s.error_log(),
        ca.log()
    );
}

fn x509(args: &[&str], pem: &[u8]) -> String {
    use std::io::Write;
    let mut x = Command::new("openssl")
        .arg("x509")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl x509");
    x.stdin.take().expect("stdin").write_all(pem).expect("write pem");
    String::from_utf8_lossy(&x.wait_with_output().expect("openssl x509").stdout).into_owned()
}

/// The leaf `openssl s_client -servername NAME` got on `addr`, as
/// `-serial -issuer -ext subjectAltName` text, and whether its chain
/// verified against `ca` for NAME; None for a failed handshake.
fn served(addr: &str, ca: &Path) -> Option<(String, bool)> {
    let mut c = Command::new("openssl");
    c.args(["s_client", "-connect", addr, "-servername", NAME, "-verify_hostname", NAME, "-CAfile"]).arg(ca);
    let out = run_bounded(c, Duration::from_secs(10));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = text.find("-----BEGIN CERTIFICATE-----")?;
    let end = text.find("-----END CERTIFICATE-----")? + "-----END CERTIFICATE-----".len();
    let info = x509(&["-noout", "-serial", "-issuer", "-ext", "subjectAltName"], &text.as_bytes()[start..end]);
    Some((info, text.contains("Verify return code: 0 (ok)")))
}

/// The serial of certbot's current certificate for NAME.
fn live_serial(le: &Path) -> String {
    let pem = std::fs::read(le.join(format!("config/live/{NAME}/cert.pem"))).expect("certbot's cert.pem");
    x509(&["-noout", "-serial"], &pem).trim().to_string()
}

/// Waits (certbot already slept a second after its reload) until `addr`
/// serves the certificate with `serial`, verified against `root`.
fn assert_serves(addr: &str, serial: &str, root: &Path, s: &Sluice) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = served(addr, root);
        if let Some((info, verified)) = &got
            && info.contains(serial)
        {
            assert!(*verified, "{addr}: the chain verifies against Pebble's root for {NAME}:\n{info}");
            assert!(info.contains("issuer=CN = Pebble Intermediate CA"), "{addr}: issued by Pebble:\n{info}");
            assert!(info.contains(&format!("DNS:{NAME}")), "{addr}: names {NAME}:\n{info}");
            return;
        }
        assert!(Instant::now() < deadline, "{addr} does not serve {serial}: {got:?}\n{}", s.error_log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// curl's status and body for `name` at `scheme://name:port/`
/// (`--resolve`d to 127.0.0.1), trusting only `root` for https.
fn fetch(scheme: &str, name: &str, port: u16, root: Option<&Path>) -> (String, String) {
    let mut c = Command::new("curl");
    c.args(["-s", "-o", "-", "-w", "\n%{http_code}"]);
    if let Some(root) = root {
        c.arg("--cacert").arg(root);
    }
    c.arg("--resolve").arg(format!("{name}:{port}:127.0.0.1")).arg(format!("{scheme}://{name}:{port}/"));
    let out = stdout_of(&run_bounded(c, Duration::from_secs(10)));
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", &out));
    (code.to_string(), body.to_string())
}

fn page() -> (String, String) {
    ("200".to_string(), PAGE.to_string())
}

/// One `certbot --nginx` run against a fresh sluice in `layout`, checked;
/// what the renewal goes on with.
struct Issued {
    // Field order is drop order: sluice before Pebble.
    s: Sluice,
    ca: Ca,
    le: PathBuf,
    https: u16,
    pebble_root: PathBuf,
    serial: String,
}

fn issue(layout: Layout) -> Issued {
    let (http, https) = (free_port(), free_port());
    let ipv6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let root = server_root(layout, http, ipv6);
    let mut s = Sluice::start(&root, layout.main(), http);
    assert_eq!(fetch("http", NAME, http, None), page(), "before certbot");

    let ca = Ca::started(http, &[("PEBBLE_WFE_NONCEREJECT", "0")]);
    let le = temp_dir("certbot-le");
    let t0 = Instant::now();
    let reloads = s.reloads();
    let out = certbot(
        &[
            "--nginx",
            "--nginx-ctl",
            server_bin(),
            "--nginx-server-root",
            &root.display().to_string(),
            "--server",
            &ca.directory(),
            "-d",
            NAME,
            "--agree-tos",
            "-m",
            "admin@example.test",
            "--http-01-port",
            &http.to_string(),
            "--https-port",
            &https.to_string(),
            "--no-redirect",
        ],
        &le,
        &ca,
    );
    assert_ok("certbot --nginx", &out, &le, &s, &ca);
    let said = stdout_of(&out) + &stderr_of(&out);
    assert!(said.contains(&format!("Successfully deployed certificate for {NAME}")), "{said}");
    eprintln!("certbot --nginx took {:?}", t0.elapsed());

    // The site file, as certbot edited it (its own parser, sluice's syntax).
    let site = read_lossy(&root.join(layout.site()));
    let cfg = le.join("config");
    let c = cfg.display();
    for want in [
        format!("listen {https} ssl; # managed by Certbot"),
        format!("ssl_certificate {c}/live/{NAME}/fullchain.pem; # managed by Certbot"),
        format!("ssl_certificate_key {c}/live/{NAME}/privkey.pem; # managed by Certbot"),
        format!("include {c}/options-ssl-nginx.conf; # managed by Certbot"),
        format!("ssl_dhparam {c}/ssl-dhparams.pem; # managed by Certbot"),
    ] {
        assert!(site.contains(&want), "the site file has {want:?}:\n{site}");
    }
    if ipv6 {
        let want = format!("listen [::]:{https} ssl ipv6only=on; # managed by Certbot");
        assert!(site.contains(&want), "the site file has {want:?}:\n{site}");
    }
    let options = read_lossy(&cfg.join("options-ssl-nginx.conf"));
    assert!(options.contains("ssl_session_cache shared:le_nginx_SSL:10m;"), "{options}");
    // certbot's challenge edits of the main file are gone again.
    let main = read_lossy(&root.join(layout.main()));
    assert!(!main.contains("le_http_01") && !main.contains("server_names_hash_bucket_size"), "{main}");
    if layout == Layout::Packaged {
        let link = std::fs::read_link(root.join("nginx.conf")).expect("nginx.conf is still a symlink");
        assert_eq!(link, Path::new("sluice.conf"));
    }

    // Pebble fetched the token from sluice, on the port certbot edited.
    let access = read_lossy(&root.join("logs/access.log"));
    assert!(
        access.lines().any(|l| l.contains("GET /.well-known/acme-challenge/")
            && l.contains("\" 200 ")
            && l.contains("LetsEncrypt-Pebble-VA")),
        "{access}"
    );

    // The master certbot reloaded (challenge, cleanup, certificate) is
    // the one started, and it serves the new certificate.
    s.assert_same_master();
    assert!(s.reloads() >= reloads + 2, "certbot reloaded sluice:\n{}", s.error_log());
    let pebble_root = ca.root();
    let serial = live_serial(&le);
    assert!(serial.starts_with("serial="), "{serial}");
    assert_serves(&format!("127.0.0.1:{https}"), &serial, &pebble_root, &s);
    if ipv6 {
        assert_serves(&format!("[::1]:{https}"), &serial, &pebble_root, &s);
    }
    assert_eq!(fetch("https", NAME, https, Some(&pebble_root)), page(), "over TLS");
    assert_eq!(fetch("http", NAME, http, None), page(), "plain HTTP");
    let other = ("404".to_string(), "no such site\n".to_string());
    assert_eq!(fetch("http", "other.test", http, None), other, "the default server");
    let log = s.error_log();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("[emerg]") || l.contains("[error]")).collect();
    assert!(errors.is_empty(), "{errors:?}");
    // What certbot ran to test the edited configuration.
    let mut t = Command::new(server_bin());
    t.arg("-c").arg(root.join("nginx.conf")).arg("-t");
    let t = run_bounded(t, Duration::from_secs(20));
    assert!(t.status.success(), "{}", stderr_of(&t));
    Issued { s, ca, le, https, pebble_root, serial }
}

#[test]
fn certbot_nginx_plugin_issues_installs_reloads_and_renews() {
    let mut got = issue(Layout::Nginx);

    // Renewal: the same plugin, from certbot's renewal file.
    let reloads = got.s.reloads();
    let out = certbot(&["renew", "--force-renewal", "--no-random-sleep-on-renew"], &got.le, &got.ca);
    assert_ok("certbot renew", &out, &got.le, &got.s, &got.ca);
    let second = live_serial(&got.le);
    assert_ne!(got.serial, second, "a new certificate");
    got.s.assert_same_master();
    assert!(got.s.reloads() > reloads, "certbot renew reloaded sluice:\n{}", got.s.error_log());
    assert_serves(&format!("127.0.0.1:{}", got.https), &second, &got.pebble_root, &got.s);
    assert_eq!(fetch("https", NAME, got.https, Some(&got.pebble_root)), page(), "renewed");
}

/// The Debian package's layout: certbot reads and edits the
/// configuration through the `nginx.conf` symlink, and its `-s reload`
/// reaches the master started with `-c sluice.conf` by the pid file.
#[test]
fn certbot_nginx_plugin_with_the_packaged_layout_and_an_nginx_conf_symlink() {
    issue(Layout::Packaged);
}
