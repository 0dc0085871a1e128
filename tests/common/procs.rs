//! What a test reads about the server's processes from /proc, and a slow
//! download to watch a drain with.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestServer;

/// The process that serves connections: under a master (nginx's and
/// sluice's default) the master's child, else (sluice with
/// `master_process off`) the process started, whose worker threads are
/// named `sluice-w*`.
pub fn worker_pid(s: &TestServer) -> u32 {
    let pid = s.pid();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(k) = kids.split_whitespace().next().and_then(|k| k.parse().ok()) {
            return k;
        }
        if has_worker_threads(pid) {
            return pid;
        }
        assert!(Instant::now() < deadline, "{pid} has no serving process");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn has_worker_threads(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    tasks.flatten().any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("sluice-w")))
}

/// Resident memory of a process, in KiB (0 once it is gone).
pub fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// curl downloading `url` into `to` (printing status and size when done),
/// returned once the first bytes have arrived.
pub fn download_started(url: &str, to: &Path) -> Child {
    let curl = Command::new("curl")
        .args(["-sS", "--max-time", "20", "-o"])
        .arg(to)
        .args(["-w", "%{http_code} %{size_download}"])
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl runs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(to).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "the download did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    curl
}

/// Raises this process's open-file soft limit to its hard limit (servers
/// started afterwards inherit it) and returns the new soft limit.
pub fn raise_nofile() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
