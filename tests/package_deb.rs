//! The Debian package as an admin meets it. `packaging/build-deb` wraps the
//! binary cargo built for this run in a .deb; dpkg installs it on this
//! machine for real (maintainer scripts need the real root: adduser, the
//! log directory), and the test then does what the systemd unit and the
//! logrotate policy would do: `-t`, start, serve, reload, rotate and
//! reopen, drain on SIGQUIT, stop on `dpkg -r`, and `dpkg --purge`.
//!
//! It changes the machine, so it runs only where that is safe: as root, on
//! a machine where systemd is not the running init (a container or CI:
//! there the package's postinst would start the service on port 80; set
//! SLUICE_TEST_DPKG=1 to run anyway), and where no sluice package is
//! installed that this test did not install itself (a marker file in
//! /var/tmp tells; an aborted run's leftovers are purged at the next one).
//! Elsewhere it says that it skipped.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

const CONF: &str = "/etc/sluice/sluice.conf";
const UNIT: &str = "/lib/systemd/system/sluice.service";
const LOGROTATE: &str = "/etc/logrotate.d/sluice";
const PID: &str = "/run/sluice.pid";
const MARKER: &str = "/var/tmp/sluice-package-test.installed";

/// `sh -c CMD`, bounded.
fn sh(cmd: &str, limit: Duration) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd);
    run_bounded(c, limit)
}

/// `sh -c CMD` that must succeed; returns stdout.
fn ok(cmd: &str) -> String {
    let out = sh(cmd, Duration::from_secs(60));
    assert!(out.status.success(), "`{cmd}` failed ({}):\n{}{}", out.status, stdout_of(&out), stderr_of(&out));
    stdout_of(&out)
}

fn package_state() -> String {
    let out = sh("dpkg-query -W -f='${Status}' sluice 2>/dev/null", Duration::from_secs(20));
    stdout_of(&out).trim().to_string()
}

/// Why the test must not touch this machine's packages, if it must not.
fn reason_to_skip() -> Option<String> {
    if !fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    {
        return Some("installing a package needs root".into());
    }
    for tool in ["dpkg", "dpkg-deb", "dpkg-shlibdeps", "adduser"] {
        if !sh(&format!("command -v {tool}"), Duration::from_secs(5)).status.success() {
            return Some(format!("{tool} is missing (apt-get install dpkg-dev adduser)"));
        }
    }
    if Path::new("/run/systemd/system").exists() && std::env::var_os("SLUICE_TEST_DPKG").is_none() {
        return Some("systemd runs here: installing would start sluice.service (SLUICE_TEST_DPKG=1 to run)".into());
    }
    let state = package_state();
    if !state.is_empty() && !state.ends_with("not-installed") && !Path::new(MARKER).exists() {
        return Some(format!("a sluice package this test did not install is here ({state}); it would be purged"));
    }
    None
}

/// While alive, the package is installed by this test: dropping it (also
/// on a failed assertion) stops what the test started and purges.
struct Installed;

impl Installed {
    fn purge_leftovers() {
        stop_running(Duration::from_secs(5));
        let _ = sh("dpkg --purge sluice", Duration::from_secs(60));
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        Installed::purge_leftovers();
        let _ = fs::remove_file(MARKER);
    }
}

fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

fn running_pid() -> Option<u32> {
    fs::read_to_string(PID).ok()?.trim().parse().ok()
}

/// Ends a server the test started (SIGQUIT, then SIGKILL after `grace`).
fn stop_running(grace: Duration) {
    let Some(pid) = running_pid() else { return };
    if fs::read_link(format!("/proc/{pid}/exe")).ok().as_deref() != Some(Path::new("/usr/sbin/sluice")) {
        return;
    }
    let _ = sh(&format!("kill -QUIT {pid}"), Duration::from_secs(5));
    let deadline = Instant::now() + grace;
    while pid_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = sh(&format!("kill -KILL {pid}"), Duration::from_secs(5));
}

/// `Key=value` lines of a unit file's `[Service]` section.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
        } else if let Some((k, v)) = line.split_once('=')
            && section == "[Service]"
            && k.trim() == key
        {
            out.push(v.trim().to_string());
        }
    }
    out
}

/// A unit's command as a shell runs it: systemd's `-`, `@`, `+`, `!`
/// prefixes dropped; its quoting of `'daemon on;'` is the shell's.
fn unit_command(unit: &str, key: &str) -> String {
    let v = unit_values(unit, key);
    assert_eq!(v.len(), 1, "{key} in the unit: {v:?}");
    v[0].trim_start_matches(['-', '@', '+', '!']).to_string()
}

/// uid of a user name from the passwd database.
fn passwd(user: &str) -> Vec<String> {
    ok(&format!("getent passwd {user}")).trim().split(':').map(String::from).collect()
}

/// Real uids of the server's worker threads (in the master's serving
/// process).
fn worker_uids(pid: u32) -> Vec<u32> {
    let mut uids = Vec::new();
    let kids = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let pid = kids.split_whitespace().next().and_then(|k| k.parse().ok()).unwrap_or(pid);
    for t in fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default() {
        let comm = fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with("sluice-w") {
            let status = fs::read_to_string(t.path().join("status")).unwrap_or_default();
            let uid = status.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(1));
            uids.extend(uid.and_then(|u| u.parse::<u32>().ok()));
        }
    }
    uids
}

fn build_deb(out: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/build-deb");
    let t = Instant::now();
    let mut c = Command::new(&script);
    c.arg("--binary").arg(BIN).arg("--out").arg(out);
    let o = run_bounded(c, Duration::from_secs(300));
    assert!(o.status.success(), "build-deb failed:\n{}", stderr_of(&o));
    let deb = PathBuf::from(stdout_of(&o).trim());
    println!("build-deb: {} in {:.1} s", deb.display(), t.elapsed().as_secs_f64());
    deb
}

#[test]
fn deb_installs_serves_rotates_drains_and_purges() {
    if let Some(why) = reason_to_skip() {
        eprintln!("skipped: {why}");
        return;
    }
    let work = temp_dir("deb");
    let deb = build_deb(&work);

    // What the archive says before anything is installed.
    let info = ok(&format!("dpkg-deb -f {} Package Version Architecture Depends", deb.display()));
    assert!(info.contains("Package: sluice"), "{info}");
    let depends = info.lines().find(|l| l.starts_with("Depends:")).unwrap_or_default();
    assert!(depends.contains("libc6 (>= ") && depends.contains("adduser"), "computed Depends: {depends}");
    let conffiles = ok(&format!("dpkg-deb --ctrl-tarfile {} | tar -xOf - ./conffiles", deb.display()));
    for f in [
        CONF,
        "/etc/sluice/mime.types",
        "/etc/sluice/fastcgi_params",
        "/etc/sluice/fastcgi.conf",
        "/etc/sluice/snippets/fastcgi-php.conf",
        LOGROTATE,
    ] {
        assert!(conffiles.lines().any(|l| l == f), "{f} is not a conffile:\n{conffiles}");
    }

    // Install (a leftover of an aborted run is purged first).
    fs::write(MARKER, "installed by tests/package_deb.rs\n").unwrap();
    let _guard = Installed;
    Installed::purge_leftovers();
    ok(&format!("DEBIAN_FRONTEND=noninteractive dpkg -i {}", deb.display()));
    assert_eq!(package_state(), "install ok installed");
    let listed = ok("dpkg -L sluice");
    for f in [
        "/usr/sbin/sluice",
        CONF,
        UNIT,
        LOGROTATE,
        "/etc/sluice/snippets/log-json.conf",
        "/var/log/sluice",
        "/usr/share/sluice/logs",
    ] {
        assert!(listed.lines().any(|l| l == f), "dpkg -L lacks {f}:\n{listed}");
    }
    let user = passwd("sluice");
    let uid: u32 = user[2].parse().unwrap();
    assert!(uid < 1000 && user[5] == "/nonexistent" && user[6].ends_with("nologin"), "system user: {user:?}");
    assert_eq!(ok("id -gn sluice").trim(), "sluice");
    let log_dir = fs::metadata("/var/log/sluice").unwrap();
    assert_eq!((log_dir.uid(), log_dir.mode() & 0o777), (0, 0o755), "/var/log/sluice: root-owned, 0755");
    assert!(Path::new("/var/www/html/index.sluice-debian.html").exists(), "postinst puts the default page in place");

    // The configuration as installed passes the test the unit runs first.
    let t = sh(&format!("/usr/sbin/sluice -t -c {CONF}"), Duration::from_secs(20));
    assert!(t.status.success() && stderr_of(&t).contains("test is successful"), "{}", stderr_of(&t));

    // The unit: systemd's own verifier where systemd is installed, and the
    // settings the drain and the pid file depend on.
    let unit = fs::read_to_string(UNIT).unwrap();
    if sh("command -v systemd-analyze", Duration::from_secs(5)).status.success() {
        let v = sh(&format!("systemd-analyze verify {UNIT}"), Duration::from_secs(30));
        let err = stderr_of(&v);
        assert!(v.status.success() && !err.contains("sluice.service"), "systemd-analyze verify:\n{err}");
    } else {
        eprintln!("note: systemd-analyze missing; the unit is only parse-checked");
    }
    for (k, want) in [
        ("Type", "forking"),
        ("PIDFile", PID),
        ("KillSignal", "SIGQUIT"),
        ("KillMode", "mixed"),
        ("TimeoutStopSec", "30"),
    ] {
        assert_eq!(unit_values(&unit, k), vec![want.to_string()], "{k} in {UNIT}");
    }
    let (pre, start, reload) =
        (unit_command(&unit, "ExecStartPre"), unit_command(&unit, "ExecStart"), unit_command(&unit, "ExecReload"));
    assert!(pre.contains(" -t -q") && reload.ends_with("-s reload"), "{pre} / {reload}");

    // Port 80 may be taken here: the default server moves to a free port.
    let (port, port2) = (free_port(), free_port());
    let conf = fs::read_to_string(CONF).unwrap();
    assert!(conf.contains("listen 80 default_server;") && conf.contains("user sluice;"), "{conf}");
    let conf = conf
        .replace("listen 80 default_server;", &format!("listen 127.0.0.1:{port} default_server;"))
        .replace("listen [::]:80 default_server;", "");
    fs::write(CONF, conf).unwrap();

    // Start as systemd would: ExecStartPre, then ExecStart, which returns
    // once the daemon serves and its pid file is written.
    ok(&pre);
    ok(&start);
    let pid = running_pid().expect("the pid file names the server");
    assert_eq!(fs::read_link(format!("/proc/{pid}/exe")).unwrap(), Path::new("/usr/sbin/sluice"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while worker_uids(pid).is_empty() || worker_uids(pid).iter().any(|&u| u != uid) {
        assert!(Instant::now() < deadline, "workers run as sluice ({uid}): {:?}", worker_uids(pid));
        std::thread::sleep(Duration::from_millis(20));
    }

    let r = request(port, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 200, "{}", r.head);
    assert!(r.text().contains("Welcome to sluice!"), "{}", r.text());
    assert_eq!(r.header("Content-Type"), Some("text/html"));
    let r = request(port, "GET /first-before-rotation HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    assert_eq!(r.status, 404);
    let access = Path::new("/var/log/sluice/access.log");
    wait_contains(access, "GET /first-before-rotation HTTP/1.1\" 404", LOG_WAIT);

    // A site in conf.d, added while serving, through the unit's ExecReload.
    let site = work.join("site");
    fs::create_dir_all(site.join("slow")).unwrap();
    let big = pseudo_random(384 * 1024, 7);
    fs::write(site.join("slow/big.bin"), &big).unwrap();
    fs::write(
        "/etc/sluice/conf.d/test.conf",
        format!(
            "server {{\n    listen 127.0.0.1:{port2};\n    root {};\n    \
             location = /healthz {{ return 200 \"ok\\n\"; }}\n    \
             location /slow/ {{ limit_rate 128k; }}\n}}\n",
            site.display()
        ),
    )
    .unwrap();
    ok(&reload);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if port_accepts(port2) {
            let r = request(port2, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            if r.status == 200 {
                assert_eq!(r.text(), "ok\n");
                break;
            }
        }
        assert!(Instant::now() < deadline, "the reloaded configuration does not serve :{port2}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // logrotate with the packaged policy: the old lines stay in .1, the
    // file it creates gets the new ones once postrotate's `-s reopen` ran.
    assert!(
        sh("command -v logrotate", Duration::from_secs(5)).status.success(),
        "logrotate is not installed: run scripts/test-all (which installs it), or `apt-get install -y logrotate`"
    );
    let rot =
        sh(&format!("logrotate -f -s {} {LOGROTATE}", work.join("logrotate.state").display()), Duration::from_secs(30));
    assert!(rot.status.success(), "logrotate:\n{}", stderr_of(&rot));
    let rotated = read_lossy(Path::new("/var/log/sluice/access.log.1"));
    assert!(rotated.contains("/first-before-rotation"), "access.log.1:\n{rotated}");
    let fresh = fs::metadata(access).unwrap();
    assert_eq!((fresh.uid(), fresh.mode() & 0o777), (uid, 0o640), "logrotate's `create 0640 sluice adm`");
    // `-s reopen` is a signal: the workers reopen soon after logrotate
    // returns, not before. Until then a line still goes to access.log.1.
    let deadline = Instant::now() + LOG_WAIT;
    let mut i = 0;
    let now = loop {
        i += 1;
        let path = format!("/after-rotation-{i}");
        let r = request(port, &format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
        assert_eq!(r.status, 404);
        std::thread::sleep(Duration::from_millis(50));
        let now = read_lossy(access);
        if now.contains(&format!("GET {path} HTTP/1.1\" 404")) {
            break now;
        }
        assert!(Instant::now() < deadline, "no request reached the new access.log:\n{now}");
    };
    assert!(!now.contains("/first-before-rotation"), "the new access.log holds only new lines:\n{now}");
    assert!(!read_lossy(Path::new("/var/log/sluice/access.log.1")).contains(&format!("/after-rotation-{i} ")));

    // `-s quit` drains: a download in flight finishes whole, then the
    // server exits and removes its pid file.
    let body = work.join("download");
    let curl = common::procs::download_started(&format!("http://127.0.0.1:{port2}/slow/big.bin"), &body);
    ok(&format!("/usr/sbin/sluice -c {CONF} -s quit"));
    let when_quit = fs::metadata(&body).map(|m| m.len()).unwrap_or(0);
    let got = curl.wait_with_output().unwrap();
    assert_eq!(stdout_of(&got), format!("200 {}", big.len()), "curl: {}", stderr_of(&got));
    assert!(when_quit < big.len() as u64, "the download was still running at quit ({when_quit} bytes)");
    assert_eq!(fs::read(&body).unwrap(), big, "the drained download is whole");
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(pid) {
        assert!(Instant::now() < deadline, "sluice did not exit after the drain");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!Path::new(PID).exists(), "the pid file is removed");

    // `dpkg -r` stops a running server first (prerm), and keeps the
    // configuration and the logs.
    ok(&start);
    let pid = running_pid().expect("started again");
    ok("dpkg -r sluice");
    assert!(!pid_alive(pid), "prerm stopped the server");
    assert!(!Path::new("/usr/sbin/sluice").exists());
    assert!(Path::new(CONF).exists() && access.exists(), "remove keeps the configuration and the logs");
    assert_eq!(package_state(), "deinstall ok config-files");

    // `dpkg --purge` deletes them; the system user stays.
    ok("dpkg --purge sluice");
    for gone in ["/etc/sluice", "/var/log/sluice", "/var/lib/sluice", UNIT, "/var/www/html/index.sluice-debian.html"] {
        assert!(!Path::new(gone).exists(), "purge leaves {gone}");
    }
    assert_eq!(passwd("sluice")[2], uid.to_string());
    assert!(package_state().is_empty() || package_state().ends_with("not-installed"), "{}", package_state());
    let _ = fs::remove_dir_all(&work);
}
