//! `user USER [GROUP]`: workers serve with the configured credentials while
//! the master keeps root, as nginx's workers do. Switching users needs root:
//! CI runs the suite as root; elsewhere the root-only tests say they skipped.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const NOBODY: u32 = 65534;

fn running_as_root() -> bool {
    let root = uid_of(&fs::read_to_string("/proc/self/status").unwrap_or_default()) == Some(0);
    if !root {
        eprintln!("skipped: switching users needs root");
    }
    root
}

/// The real uid from a /proc status file.
fn uid_of(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// (name, real uid) of the server's workers: sluice's worker threads
/// (`sluice-wN`) or nginx's worker processes (children of the master).
fn workers(pid: u32) -> Vec<(String, Option<u32>)> {
    let mut out = Vec::new();
    let threads =
        fs::read_dir(format!("/proc/{pid}/task")).map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default();
    for t in threads {
        let comm = fs::read_to_string(t.path().join("comm")).unwrap_or_default().trim().to_string();
        if comm.starts_with("sluice-w") {
            out.push((comm, uid_of(&fs::read_to_string(t.path().join("status")).unwrap_or_default())));
        }
    }
    for p in fs::read_dir("/proc").map(|d| d.flatten().collect::<Vec<_>>()).unwrap_or_default() {
        let status = fs::read_to_string(p.path().join("status")).unwrap_or_default();
        let ppid = status.lines().find(|l| l.starts_with("PPid:")).and_then(|l| l.split_whitespace().nth(1));
        if ppid == Some(pid.to_string().as_str()) {
            out.push((p.file_name().to_string_lossy().into_owned(), uid_of(&status)));
        }
    }
    out
}

/// The workers once `ready` holds and all of them have switched users (up to
/// 10 s): a port accepts as soon as the master has bound it, before worker
/// threads start, and a reload's new workers start while the old serve.
fn settled_workers(pid: u32, ready: impl Fn(&[(String, Option<u32>)]) -> bool) -> Vec<(String, Option<u32>)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ws = workers(pid);
        if (ready(&ws) && ws.iter().all(|(_, uid)| *uid == Some(NOBODY))) || Instant::now() > deadline {
            return ws;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn master_uid(pid: u32) -> Option<u32> {
    uid_of(&fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default())
}

#[test]
fn workers_serve_as_the_configured_user_and_the_master_stays_root() {
    if !running_as_root() {
        return;
    }
    let s = builder()
        .ports(2)
        .main("user nobody nogroup;\nworker_processes 2;")
        .http(
            "client_body_temp_path client_body_temp;\n\
             proxy_temp_path proxy_temp;\n\
             server { listen 127.0.0.1:{port0};\n\
               location / { root html; }\n\
               location /up { client_body_buffer_size 1k; proxy_pass http://127.0.0.1:{port1}/; } }\n\
             server { listen 127.0.0.1:{port1}; location / { return 200 \"origin\"; } }",
        )
        .file("html/pub.txt", "public\n")
        .file("html/secret.txt", "root only\n")
        .start();
    fs::set_permissions(s.prefix.join("html/secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();

    let ws = settled_workers(s.serving_pid(), |ws| ws.len() == 2);
    assert_eq!(ws.len(), 2, "workers: {ws:?}");
    assert!(ws.iter().all(|(_, uid)| *uid == Some(NOBODY)), "workers must run as nobody: {ws:?}");
    assert_eq!(master_uid(s.pid()), Some(0), "the master keeps root (to bind and reopen on reload)");

    // Files are opened with the worker's credentials: a root-only file is a
    // 403 with the kernel's reason in the error log, as on nginx.
    let r = s.get("/pub.txt");
    assert_eq!((r.status, r.text()), (200, "public\n".to_string()));
    assert_eq!(s.get("/secret.txt").status, 403);
    s.wait_error_log("secret.txt\" failed (13: Permission denied)");

    // A body larger than client_body_buffer_size goes to a temporary file:
    // the temp directory was made for the worker user.
    let body = "x".repeat(100_000);
    let r = request(
        s.port,
        &format!("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
    );
    assert_eq!((r.status, r.text()), (200, "origin".to_string()));
    let temp = fs::metadata(s.prefix.join("client_body_temp")).expect("client_body_temp exists");
    assert_eq!(temp.uid(), NOBODY, "client_body_temp belongs to the worker user");
    // So does the one responses read ahead of slow clients spill into.
    let temp = fs::metadata(s.prefix.join("proxy_temp")).expect("proxy_temp exists");
    assert_eq!(temp.uid(), NOBODY, "proxy_temp belongs to the worker user");

    // A reload's new workers drop as well.
    s.write_conf(&fs::read_to_string(s.conf_path()).unwrap().replace("\"origin\"", "\"reloaded\""));
    s.signal("reload");
    let deadline = Instant::now() + Duration::from_secs(10);
    while request(s.ports[1], "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").text() != "reloaded" {
        assert!(Instant::now() < deadline, "reload not applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.get("/secret.txt").status, 403);
    let ws = settled_workers(s.serving_pid(), |ws| !ws.is_empty());
    assert!(!ws.is_empty() && ws.iter().all(|(_, uid)| *uid == Some(NOBODY)), "after reload: {ws:?}");
}

#[test]
fn without_user_a_root_master_serves_as_nobody() {
    if !running_as_root() {
        return;
    }
    // No `user` directive: nginx's default for a root master.
    let s = builder()
        .http("server { listen 127.0.0.1:{port}; location / { root html; } }")
        .file("html/pub.txt", "public\n")
        .file("html/secret.txt", "root only\n")
        .start();
    fs::set_permissions(s.prefix.join("html/secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
    let ws = settled_workers(s.serving_pid(), |ws| !ws.is_empty());
    assert!(!ws.is_empty() && ws.iter().all(|(_, uid)| *uid == Some(NOBODY)), "workers: {ws:?}");
    assert_eq!(master_uid(s.pid()), Some(0));
    assert_eq!(s.get("/pub.txt").status, 200);
    assert_eq!(s.get("/secret.txt").status, 403);
}

#[test]
fn unknown_user_or_group_fails_the_test_with_nginx_words() {
    if !running_as_root() {
        return;
    }
    for (user, emerg) in [
        ("no-such-user-xyz", "getpwnam(\"no-such-user-xyz\") failed"),
        ("nobody no-such-group-xyz", "getgrnam(\"no-such-group-xyz\") failed"),
    ] {
        let s = builder().main(&format!("user {user};")).http("server { listen 127.0.0.1:{port}; }").prepare();
        let out = s.run(&["-t"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
        let want = format!("[emerg] {emerg} in {}:4\n", s.conf_path().display());
        assert!(err.contains(&want), "want {want:?} in:\n{err}");
    }
}

#[test]
fn without_root_user_is_ignored_with_nginx_warning() {
    if !running_as_root() {
        return;
    }
    // Run `-t` as nobody (setpriv, util-linux) on a prefix nobody can read,
    // with a logs directory it may write (`-t` opens the logs).
    let s = builder().main("user www-data;").http("server { listen 127.0.0.1:{port}; }").prepare();
    for (dir, mode) in [(s.prefix.clone(), 0o755), (s.prefix.join("conf"), 0o755), (s.prefix.join("logs"), 0o777)] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).unwrap();
    }
    let bin = if std::env::var_os("SLUICE_TEST_NGINX").is_some() { NGINX } else { BIN };
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin, "-t", "-p"])
        .arg(format!("{}/", s.prefix.display()))
        .arg("-c")
        .arg(s.conf_path())
        .output()
        .expect("setpriv runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let want = format!(
        "the \"user\" directive makes sense only if the master process runs with super-user privileges, ignored in {}:4",
        s.conf_path().display()
    );
    assert!(err.lines().any(|l| l.contains("[warn]") && l.ends_with(&want)), "want {want:?} in:\n{err}");
    if bin == BIN {
        assert!(out.status.success() && err.contains("test is successful"), "stderr:\n{err}");
    }
}
