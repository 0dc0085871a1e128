//! Shared helpers for sluice's integration tests: a server under test in its
//! own temporary prefix on its own loopback ports, a raw HTTP/1.x client
//! over `std::net::TcpStream` with bounded reads, and wrappers for `curl`
//! and log files.
//!
//! Every network read is bounded (`READ_TIMEOUT` per read, `RESPONSE_DEADLINE`
//! per response) so a hang fails the test in seconds.
//!
//! Environment:
//! - `SLUICE_TEST_KEEP=1` keeps each server's temporary prefix (config,
//!   logs, stderr.txt) and every other `temp_dir` for inspection.
//!   Otherwise each test binary removes every `temp_dir` it made when it
//!   exits, whether its tests passed or failed; a failed test prints the
//!   folder of its server.
//! - `SLUICE_TEST_NGINX=1` runs every server as /usr/sbin/nginx with the
//!   same config: a check that the expected answers are nginx's. Only
//!   sluice-specific texts (Server header, "sluice:" prefixes, Tengine's
//!   `reuse_port`, the default access-log path) fail then.

#![allow(dead_code)]

pub mod acme;
pub mod browser;
pub mod cache;
mod client;
pub mod codings;
pub mod fcgi_app;
pub mod fpm;
pub mod h2raw;
pub mod h3;
pub mod hpack;
pub mod mail;
pub mod mmdb;
pub mod origin;
pub mod procs;
mod server;
pub mod status;
pub mod stream;
pub mod tls;
pub mod uwsgi;
pub mod wordpress;

pub use client::*;
pub use server::*;

use std::collections::HashSet;
use std::fs;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice");
pub const NGINX: &str = "/usr/sbin/nginx";
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);
/// Access logs are flushed at most ~1 s after a write; allow for load.
pub const LOG_WAIT: Duration = Duration::from_secs(5);

/// nginx's 43-byte transparent GIF (ngx_http_empty_gif_module.c).
pub const EMPTY_GIF: [u8; 43] = [
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
    0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x02,
    0x02, 0x4c, 0x01, 0x00, 0x3b,
];

/// The program name in messages: "nginx" in validation mode
/// (SLUICE_TEST_NGINX set), else "sluice".
pub fn prog() -> &'static str {
    if std::env::var_os("SLUICE_TEST_NGINX").is_some() { "nginx" } else { "sluice" }
}

// ---------------------------------------------------------------------------
// temp dirs and ports

static COUNTER: AtomicU64 = AtomicU64::new(0);
static USED_PORTS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Every `temp_dir` this test binary made, removed when it exits.
static MADE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A fresh, empty directory under the system temp dir, removed when the
/// test binary exits (passed or failed) unless `SLUICE_TEST_KEEP` is set.
pub fn temp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().subsec_nanos();
    let dir = std::env::temp_dir().join(format!("sluice-it-{tag}-{}-{n}-{nanos}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if made.is_empty() && std::env::var_os("SLUICE_TEST_KEEP").is_none() {
        // SAFETY: atexit only records a plain extern "C" function taking
        // nothing; remove_made does not panic (it locks, ignoring poison,
        // and ignores removal errors).
        unsafe { libc::atexit(remove_made) };
    }
    made.push(dir.clone());
    dir
}

/// Run by libc's exit: libtest ends with `exit` whether tests passed or
/// failed, so folders left by a failed test's assertions go too. A test
/// killed by a signal leaves its folders, as any process would.
extern "C" fn remove_made() {
    let made = std::mem::take(&mut *MADE.lock().unwrap_or_else(|e| e.into_inner()));
    for d in made {
        let _ = fs::remove_dir_all(d);
    }
}

fn rand_u64() -> u64 {
    // std-only randomness: RandomState is seeded randomly per process and
    // per instance.
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::SeqCst));
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos());
    h.finish()
}

/// A loopback port that is free right now and not handed out before by this
/// test process. Chosen below the kernel's ephemeral range (32768+) so that
/// client connections made by other tests (curl, wrk) cannot be sitting on
/// it as a source port.
pub fn free_port() -> u16 {
    let mut used = USED_PORTS.lock().unwrap();
    let used = used.get_or_insert_with(HashSet::new);
    for _ in 0..1000 {
        let p = 20000 + (rand_u64() % 12000) as u16;
        if used.contains(&p) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", p)).is_ok() {
            used.insert(p);
            return p;
        }
    }
    // Fall back to whatever the kernel gives.
    let p = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    used.insert(p);
    p
}

/// True if something accepts connections on 127.0.0.1:port.
pub fn port_accepts(port: u16) -> bool {
    TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500)).is_ok()
}

// ---------------------------------------------------------------------------
// files and logs

pub fn read_lossy(p: &Path) -> String {
    fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// Polls `path` until it has at least `n` lines; panics with the content
/// otherwise.
pub fn wait_lines(path: &Path, n: usize, limit: Duration) -> Vec<String> {
    let deadline = Instant::now() + limit;
    loop {
        let text = read_lossy(path);
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n {
            return lines;
        }
        if Instant::now() > deadline {
            panic!("{} has {} lines after {limit:?}, expected {n}:\n{text}", path.display(), lines.len());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `path` until it contains `needle`; returns the content.
pub fn wait_contains(path: &Path, needle: &str, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let text = read_lossy(path);
        if text.contains(needle) {
            return text;
        }
        if Instant::now() > deadline {
            panic!("{} does not contain {needle:?} after {limit:?}:\n{text}", path.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Deterministic pseudo-random bytes.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407) | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

// ---------------------------------------------------------------------------
// small matchers (std only, no regex crate)

/// Parses an HTTP-date `Sun, 06 Nov 1994 08:49:37 GMT` strictly; returns
/// seconds since the epoch.
pub fn parse_http_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 29 || &s[3..5] != ", " || &s[28..] != "T" || &s[25..29] != " GMT" {
        return None;
    }
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let wd = DAYS.iter().position(|d| *d == &s[0..3])?;
    let num = |a: usize, n: usize| -> Option<i64> {
        let t = &s[a..a + n];
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    if &s[7..8] != " " || &s[11..12] != " " || &s[16..17] != " " || &s[19..20] != ":" || &s[22..23] != ":" {
        return None;
    }
    let day = num(5, 2)?;
    let mon = MONTHS.iter().position(|m| *m == &s[8..11])? as i64 + 1;
    let year = num(12, 4)?;
    let (h, mi, se) = (num(17, 2)?, num(20, 2)?, num(23, 2)?);
    if h > 23 || mi > 59 || se > 60 || !(1..=31).contains(&day) {
        return None;
    }
    let t = civil_to_epoch(year, mon, day, h, mi, se);
    if (t.div_euclid(86400)).rem_euclid(7) as usize != wd {
        return None;
    }
    Some(t)
}

pub const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Seconds since the epoch of a UTC civil time (Howard Hinnant's algorithm).
pub fn civil_to_epoch(year: i64, mon: i64, day: i64, h: i64, mi: i64, se: i64) -> i64 {
    let y = if mon <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mon + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    days * 86400 + h * 3600 + mi * 60 + se
}

/// Parses `[22/Nov/2026:14:23:06 +0000]` (`$time_local` in brackets);
/// returns seconds since the epoch.
pub fn parse_time_local(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 28 || b[0] != b'[' || b[27] != b']' || b[3] != b'/' || b[7] != b'/' || b[12] != b':' || b[21] != b' '
    {
        return None;
    }
    let num = |a: usize, n: usize| -> Option<i64> {
        let t = &s[a..a + n];
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    let day = num(1, 2)?;
    let mon = MONTHS.iter().position(|m| *m == &s[4..7])? as i64 + 1;
    let year = num(8, 4)?;
    if b[15] != b':' || b[18] != b':' {
        return None;
    }
    let (h, mi, se) = (num(13, 2)?, num(16, 2)?, num(19, 2)?);
    let sign = match b[22] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let off = sign * (num(23, 2)? * 3600 + num(25, 2)? * 60);
    Some(civil_to_epoch(year, mon, day, h, mi, se) - off)
}

pub fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Formats seconds since the epoch as an HTTP-date.
pub fn http_date(t: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The file's mtime in seconds since the epoch.
pub fn mtime(p: &Path) -> i64 {
    fs::metadata(p).unwrap().modified().unwrap().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// nginx's ETag for a file: `"<hex mtime>-<hex size>"`.
pub fn nginx_etag(p: &Path) -> String {
    let md = fs::metadata(p).unwrap();
    format!("\"{:x}-{:x}\"", mtime(p), md.len())
}

/// Asserts that every line in `lines` containing `needle` exists; returns the
/// first such line.
pub fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("no line containing {needle:?} in:\n{text}"))
}

// ---------------------------------------------------------------------------
// several independent checks in one test, all reported

/// Runs checks that may panic, collects the failures, and reports them all
/// at the end, so one test lists every deviating case at once.
#[derive(Default)]
pub struct Checks {
    failures: Vec<String>,
}

impl Checks {
    pub fn new() -> Checks {
        Checks::default()
    }

    pub fn run(&mut self, label: &str, f: impl FnOnce()) {
        if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            self.failures.push(format!("[{label}] {msg}"));
        }
    }

    pub fn finish(self) {
        if !self.failures.is_empty() {
            panic!("{} check(s) failed:\n{}", self.failures.len(), self.failures.join("\n"));
        }
    }
}
