//! The configurations that ship for deployment, so that none of them rots:
//! the Debian package's (`packaging/deb/sluice.conf`), the container
//! image's (`packaging/docker/sluice.conf`), the Kubernetes ConfigMap's
//! (`packaging/k8s/sluice.yaml`), and every ```nginx block of
//! `docs/deployment.md`. Each must pass `sluice -t`; the container's and
//! the ConfigMap's are also started as those environments run them (in the
//! foreground, as a non-root user when the test runs as root) and must
//! answer their health checks, proxy, serve metrics, and drain on SIGQUIT.
//! The Dockerfile and the manifest are checked against their configuration
//! (ports, probe paths, files they copy or mount).
//!
//! Absolute paths (`/etc/sluice`, `/var/log/sluice`, ...) are mapped into a
//! temporary root, which holds `conf/`'s files where the package puts them.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::origin::*;
use common::*;

const ROOTS: &str =
    r"/etc/sluice|/var/log/sluice|/var/lib/sluice|/var/cache/sluice|/run/sluice|/var/www|/usr/share/sluice";
/// The user the container image runs as stands in for: nobody.
const NOBODY: u32 = 65534;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn read_repo(p: &str) -> String {
    fs::read_to_string(repo(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// A temporary file-system root laid out as the package lays out /.
struct Root {
    dir: PathBuf,
}

impl Root {
    fn new(tag: &str) -> Root {
        let dir = temp_dir(tag);
        for r in ROOTS.split('|') {
            fs::create_dir_all(dir.join(&r[1..])).unwrap();
        }
        let etc = dir.join("etc/sluice");
        fs::create_dir_all(etc.join("conf.d")).unwrap();
        fs::create_dir_all(etc.join("snippets")).unwrap();
        for f in ["mime.types", "fastcgi_params", "fastcgi.conf"] {
            fs::copy(repo(&format!("conf/{f}")), etc.join(f)).unwrap();
        }
        for e in fs::read_dir(repo("conf/snippets")).unwrap().flatten() {
            fs::copy(e.path(), etc.join("snippets").join(e.file_name())).unwrap();
        }
        let html = dir.join("usr/share/sluice/html");
        fs::create_dir_all(&html).unwrap();
        fs::copy(repo("packaging/deb/index.html"), html.join("index.html")).unwrap();
        fs::create_dir_all(dir.join("var/www/html")).unwrap();
        Root { dir }
    }

    /// The text with every absolute path under ROOTS moved into this root.
    fn map(&self, text: &str) -> String {
        let re = regex::Regex::new(&format!("({ROOTS})")).unwrap();
        re.replace_all(text, |c: &regex::Captures| format!("{}{}", self.dir.display(), &c[1])).into_owned()
    }

    /// Writes the mapped configuration as etc/sluice/NAME.
    fn conf(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join("etc/sluice").join(name);
        fs::write(&p, self.map(text)).unwrap();
        p
    }

    /// The prefix the package and the image compile in
    /// (`SLUICE_PREFIX=/usr/share/sluice/`), for the defaults a
    /// configuration leaves unset.
    fn prefix(&self) -> String {
        format!("{}/usr/share/sluice/", self.dir.display())
    }

    /// `sluice -t -c CONF`: Err with the output unless it passed.
    fn test(&self, conf: &Path) -> Result<(), String> {
        let out = sluice(&["-t", "-p", &self.prefix(), "-c", &conf.display().to_string()], &self.dir);
        let err = stderr_of(&out);
        if out.status.success() && err.contains("test is successful") {
            Ok(())
        } else {
            Err(format!("{}:\n{}\n{err}", conf.display(), fs::read_to_string(conf).unwrap_or_default()))
        }
    }

    /// Starts sluice in the foreground on CONF, as a container runs it: as
    /// nobody when the test is root (the image's user is not root either),
    /// stdout and stderr into files. Waits until `port` accepts.
    fn start(&self, conf: &Path, port: u16) -> Running {
        let (out, err) = (self.dir.join("stdout.txt"), self.dir.join("stderr.txt"));
        let files = [fs::File::create(&out).unwrap(), fs::File::create(&err).unwrap()];
        let mut cmd = if is_root() {
            // What the image's user owns: the pid and temporary directories,
            // and its stdout/stderr (reopened through /dev/stdout).
            for p in ["run/sluice", "var/cache/sluice", "stdout.txt", "stderr.txt"] {
                std::os::unix::fs::chown(self.dir.join(p), Some(NOBODY), Some(NOBODY)).unwrap();
            }
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN]);
            c
        } else {
            Command::new(BIN)
        };
        let [o, e] = files;
        let child = cmd
            .args(["-p", &self.prefix(), "-c"])
            .arg(conf)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(o)
            .stderr(e)
            .spawn()
            .expect("sluice starts");
        let r = Running { child, stdout: out, stderr: err };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !port_accepts(port) {
            assert!(Instant::now() < deadline, "no listener on {port}; stderr:\n{}", read_lossy(&r.stderr));
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if std::env::var_os("SLUICE_TEST_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// A foreground sluice; killed if the test fails before it exits.
struct Running {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Running {
    fn signal(&self, sig: &str) {
        let st = Command::new("kill").arg(format!("-{sig}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(st.success(), "kill -{sig}");
    }

    /// The exit code once the process ends, within `limit`.
    fn wait_exit(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(Instant::now() < deadline, "sluice still runs; stderr:\n{}", read_lossy(&self.stderr));
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(port: u16, path: &str) -> Response {
    request(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
}

/// The ```nginx blocks of a markdown file. A block with an `http` block is
/// a whole configuration; any other is a file for the package's
/// `/etc/sluice/conf.d/` (included at `http` level), a block of `location`s
/// wrapped in a server.
fn nginx_blocks(md: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in md.lines() {
        match (&mut cur, line.trim_start()) {
            (None, "```nginx") => cur = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    blocks
        .into_iter()
        .map(|b| {
            let first = b.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
            if b.contains("http {") {
                Block::Whole(b)
            } else if first.starts_with("location") {
                Block::Site(format!("server {{\n{b}}}\n"))
            } else {
                Block::Site(b)
            }
        })
        .collect()
}

enum Block {
    Whole(String),
    Site(String),
}

/// The block under `KEY: |` in a YAML file, dedented.
fn yaml_literal(yaml: &str, key: &str) -> String {
    let mut lines = yaml.lines();
    let head = lines.by_ref().find(|l| l.trim() == format!("{key}: |")).unwrap_or_else(|| panic!("no {key}: |"));
    let indent = head.len() - head.trim_start().len();
    let body: Vec<&str> =
        lines.take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent).collect();
    let strip = body.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    body.iter().map(|l| format!("{}\n", l.get(strip..).unwrap_or(""))).collect()
}

#[test]
fn deployment_doc_and_debian_configs_pass_the_test() {
    let root = Root::new("deploy-docs");
    let mut failed = Vec::new();
    // The package's configuration names its own system user, which may not
    // exist here; nobody stands in.
    let deb = read_repo("packaging/deb/sluice.conf").replace("user sluice;", "user nobody nogroup;");
    let deb = root.conf("sluice.conf", &deb);
    failed.extend(root.test(&deb).err());
    let blocks = nginx_blocks(&read_repo("docs/deployment.md"));
    assert!(blocks.len() >= 3, "docs/deployment.md has {} nginx blocks", blocks.len());
    let site = root.dir.join("etc/sluice/conf.d/doc.conf");
    for (i, b) in blocks.iter().enumerate() {
        let r = match b {
            Block::Whole(text) => root.test(&root.conf(&format!("doc-{i}.conf"), text)),
            Block::Site(text) => {
                fs::write(&site, root.map(text)).unwrap();
                root.test(&deb).map_err(|e| format!("{e}\nwith conf.d/doc.conf:\n{text}"))
            }
        };
        failed.extend(r.err());
    }
    let _ = fs::remove_file(&site);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn container_config_serves_health_and_drains_on_sigquit() {
    let text = read_repo("packaging/docker/sluice.conf");
    let dockerfile = read_repo("packaging/Dockerfile");

    // The Dockerfile against the repository and the configuration.
    for line in dockerfile.lines().filter(|l| l.starts_with("COPY ") && !l.contains("--from")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for src in &words[1..words.len() - 1] {
            assert!(repo(src).exists(), "Dockerfile copies {src}, which is not in the repository");
        }
    }
    assert!(dockerfile.contains("COPY packaging/docker/sluice.conf /etc/sluice/sluice.conf"));
    assert!(dockerfile.contains(r#"ENTRYPOINT ["/usr/sbin/sluice", "-c", "/etc/sluice/sluice.conf"]"#));
    assert!(dockerfile.contains("\nSTOPSIGNAL SIGQUIT\n"), "docker stop must drain");
    assert!(dockerfile.contains("\nUSER 101:101\n") && dockerfile.contains("--uid 101 --gid 101"));
    assert!(dockerfile.contains("\nEXPOSE 8080\n") && text.contains("listen 8080 default_server;"));
    assert!(dockerfile.contains("http://127.0.0.1:8080/healthz") && text.contains("location = /healthz {"));
    assert!(!text.contains("\nuser "), "a non-root master cannot switch users");

    let root = Root::new("deploy-docker");
    let (port, slow_port) = (free_port(), free_port());
    let conf = root.conf(
        "sluice.conf",
        &text.replace("listen 8080 default_server;", &format!("listen 127.0.0.1:{port} default_server;")),
    );
    root.test(&conf).unwrap();
    // A site mounted into conf.d, as the image's usage shows; it sends
    // slowly, so the drain has a download in flight.
    let site = root.dir.join("site");
    fs::create_dir_all(site.join("slow")).unwrap();
    fs::set_permissions(&site, fs::Permissions::from_mode(0o755)).unwrap();
    let big = pseudo_random(384 * 1024, 3);
    fs::write(site.join("slow/big.bin"), &big).unwrap();
    fs::write(
        root.dir.join("etc/sluice/conf.d/site.conf"),
        format!(
            "server {{ listen 127.0.0.1:{slow_port}; root {}; location /slow/ {{ limit_rate 128k; }} }}\n",
            site.display()
        ),
    )
    .unwrap();
    let mut s = root.start(&conf, port);

    let r = get(port, "/healthz");
    assert_eq!((r.status, r.text().as_str(), r.header("Content-Type")), (200, "ok\n", Some("text/plain")));
    let r = get(port, "/");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("Welcome to sluice!"));
    // The access log goes to stdout (buffered up to a second), without
    // the health checks.
    let log = wait_contains(&s.stdout, "\"GET / HTTP/1.1\" 200", LOG_WAIT);
    assert!(!log.contains("/healthz"), "health checks are not logged:\n{log}");
    wait_contains(&s.stderr, "[notice]", LOG_WAIT);

    // STOPSIGNAL SIGQUIT: the download in flight completes, then sluice
    // exits 0.
    let body = root.dir.join("download");
    let curl = common::procs::download_started(&format!("http://127.0.0.1:{slow_port}/slow/big.bin"), &body);
    s.signal("QUIT");
    let at_quit = fs::metadata(&body).map(|m| m.len()).unwrap_or(0);
    let got = curl.wait_with_output().unwrap();
    assert_eq!(stdout_of(&got), format!("200 {}", big.len()), "curl: {}", stderr_of(&got));
    assert!(at_quit < big.len() as u64, "the download was in flight at SIGQUIT");
    assert_eq!(fs::read(&body).unwrap(), big);
    assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0), "stderr:\n{}", read_lossy(&s.stderr));
}

#[test]
fn kubernetes_configmap_serves_probes_proxies_and_metrics() {
    let yaml = read_repo("packaging/k8s/sluice.yaml");
    let text = yaml_literal(&yaml, "sluice.conf");
    assert!(text.starts_with("daemon off;\n"), "{text}");

    // The manifest against its configuration.
    assert!(yaml.contains("containerPort: 8080") && text.contains("listen 8080 default_server;"));
    assert!(yaml.contains("containerPort: 9100") && text.contains("listen 9100;"));
    assert!(yaml.contains("path: /healthz") && text.contains("location = /healthz {"));
    assert!(yaml.contains("mountPath: /etc/sluice/k8s") && yaml.contains(r#""-c", "/etc/sluice/k8s/sluice.conf""#));
    assert!(yaml.contains("mountPath: /run/sluice") && text.contains("pid /run/sluice/sluice.pid;"));
    assert!(yaml.contains("runAsUser: 101") && yaml.contains("command: [\"sleep\", \"5\"]"));
    assert!(yaml.contains("terminationGracePeriodSeconds: 60") && text.contains("worker_shutdown_timeout 45s;"));

    let origin = Origin::start(|r| Reply::ok(format!("app saw {}", r.target())));
    let root = Root::new("deploy-k8s");
    let (port, metrics) = (free_port(), free_port());
    let text = text
        .replace("app.default.svc.cluster.local:8080", &format!("127.0.0.1:{}", origin.port))
        .replace("listen 8080 default_server;", &format!("listen 127.0.0.1:{port} default_server;"))
        .replace("listen 9100;", &format!("listen 127.0.0.1:{metrics};"));
    let conf = root.conf("k8s.conf", &text);
    root.test(&conf).unwrap();
    let mut s = root.start(&conf, port);

    let r = get(port, "/healthz");
    assert_eq!((r.status, r.text().as_str()), (200, "ok\n"));
    let r = get(port, "/orders?page=2");
    assert_eq!((r.status, r.text().as_str()), (200, "app saw /orders?page=2"));
    assert_eq!(origin.last().header("Connection"), None, "kept alive to the upstream");
    let r = get(metrics, "/metrics");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("sluice_connections_accepted_total"), "{}", r.text());

    // SIGTERM, what a runtime sends without the image's STOPSIGNAL: the
    // fast stop, still exit code 0.
    s.signal("TERM");
    assert_eq!(s.wait_exit(Duration::from_secs(5)), Some(0), "stderr:\n{}", read_lossy(&s.stderr));
}
