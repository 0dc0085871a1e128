//! Time as the request path sees it: a per-worker cache refreshed once per
//! second by a timer task, so the Date header and log timestamps cost a
//! thread-local read instead of a clock call and a format per request (as
//! nginx's `ngx_time_update`).

use std::cell::Cell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub fn unix_now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The local time zone's offset from UTC in seconds (for `$time_local`).
pub fn local_offset() -> i32 {
    use chrono::Offset;
    chrono::Local::now().offset().fix().local_minus_utc()
}

/// The local time at Unix second `secs`: the offset from UTC in seconds
/// and the zone's abbreviation ("UTC", "EST"), for `$date_local`, whose
/// `%Z` chrono cannot give. localtime_r through libc, in one small
/// wrapper: it fills the `tm` this frame owns, and `tm_zone` points into
/// the C library's static zone data, copied out at once.
pub fn local_zone(secs: i64) -> (i64, String) {
    let t: libc::time_t = secs;
    // SAFETY: libc::tm is plain integers and a pointer; zeroed is valid.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r is the
    // thread-safe form and writes only `tm`.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return (0, "UTC".into());
    }
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null tm_zone is a NUL-terminated string in the C
        // library's zone tables, alive for the process.
        unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) }.to_string_lossy().into_owned()
    };
    (tm.tm_gmtoff, zone)
}

#[derive(Clone, Copy)]
struct Cached {
    secs: u64,
    /// The wall clock in milliseconds, and the monotonic clock, when
    /// `secs` was read.
    ms: u64,
    at: Instant,
    offset: i32,
    date: [u8; 29],
    /// `$time_local` (26 bytes for four-digit years) and its length.
    time_local: ([u8; 32], u8),
}

thread_local! {
    static CACHE: Cell<Option<Cached>> = const { Cell::new(None) };
}

/// Recomputes the cache; the worker's tick task calls this every second.
pub fn refresh() {
    let ms = unix_now_ms();
    let at = Instant::now();
    let secs = ms / 1000;
    let mut date = [0u8; 29];
    crate::http::date::http_date(secs, &mut date);
    let offset = local_offset();
    let mut local = Vec::with_capacity(32);
    crate::http::date::log_time_local(secs, offset, &mut local);
    let mut time_local = ([0u8; 32], 0u8);
    let n = local.len().min(32);
    time_local.0[..n].copy_from_slice(&local[..n]);
    time_local.1 = n as u8;
    CACHE.with(|c| c.set(Some(Cached { secs, ms, at, offset, date, time_local })));
}

fn cached() -> Cached {
    CACHE.with(|c| match c.get() {
        Some(v) => v,
        None => {
            refresh();
            c.get().unwrap_or(Cached {
                secs: 0,
                ms: 0,
                at: Instant::now(),
                offset: 0,
                date: [b' '; 29],
                time_local: ([0; 32], 0),
            })
        }
    })
}

/// The current second, as of the last refresh.
pub fn now_secs() -> u64 {
    cached().secs
}

/// The wall clock in milliseconds as of this task poll: the last refresh
/// advanced by `mono()`, so no clock is read beyond the poll's one, and it
/// stays exact when the once-a-second refresh runs late (a busy or
/// starved worker), where `now_secs` lags. For deadlines that must not
/// come early (keep-alive and header timeouts).
pub fn unix_ms() -> u64 {
    let c = cached();
    c.ms + mono().saturating_duration_since(c.at).as_millis() as u64
}

pub fn offset() -> i32 {
    cached().offset
}

/// The IMF-fixdate for the Date header.
pub fn http_date() -> [u8; 29] {
    cached().date
}

/// Appends `$time_local` for the current second (formatted once a second,
/// as nginx's cached log time).
pub fn push_time_local(out: &mut Vec<u8>) {
    let c = cached();
    out.extend_from_slice(&c.time_local.0[..usize::from(c.time_local.1)]);
}

thread_local! {
    /// The monotonic clock as first read in the current task poll; None
    /// once a new poll (or a wake-up from the event loop's park) begins.
    static MONO: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Monotonic time for deadlines and durations (`$request_time`,
/// `$upstream_*_time`, timeouts), read at most once per task poll, as
/// nginx reads its clock once per event-loop iteration (`ngx_current_msec`).
/// Why: a proxied request read the clock 7 times, and in this VM each read
/// costs ~32 ns in the vDSO (perf: 0.23 µs per request, nginx 0.01).
/// A reading is at most one poll old (a poll never waits for the network,
/// only computes and makes non-blocking calls); nginx's is as old as its
/// event-loop turn.
pub fn mono() -> Instant {
    MONO.with(|c| match c.get() {
        Some(t) => t,
        None => {
            let t = Instant::now();
            c.set(Some(t));
            t
        }
    })
}

/// Forgets the cached reading: the next `mono()` reads the clock.
pub fn mono_stale() {
    MONO.with(|c| c.set(None));
}

/// Milliseconds since `t`, per `mono()`.
pub fn since_ms(t: Instant) -> u64 {
    since(t).as_millis() as u64
}

/// The time since `t`, per `mono()`.
pub fn since(t: Instant) -> Duration {
    mono().saturating_duration_since(t)
}

/// `tokio::time::timeout` measured from `mono()` (tokio's own reads the
/// clock for every call).
pub fn timeout<F: IntoFuture>(d: Duration, f: F) -> tokio::time::Timeout<F::IntoFuture> {
    match mono().checked_add(d) {
        Some(at) => tokio::time::timeout_at(at.into(), f),
        None => tokio::time::timeout(d, f),
    }
}

pin_project_lite::pin_project! {
    /// A task whose every poll starts with a fresh `mono()`; every task of
    /// a worker is spawned in one. A struct, not an async fn: that would
    /// hold the task's future twice (as argument and pinned local), and a
    /// connection's is 4.5 KB, copied at each spawn.
    pub struct PerPoll<F> {
        #[pin]
        f: F,
    }
}

impl<F: Future> Future for PerPoll<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        mono_stale();
        self.project().f.poll(cx)
    }
}

pub fn per_poll<F: Future>(f: F) -> PerPoll<F> {
    PerPoll { f }
}

/// The civil date (year, month, day) of a count of days since 1970-01-01:
/// Howard Hinnant's days-to-civil algorithm, branch-light and exact for the
/// whole proleptic Gregorian calendar, which a loop over years is not (cheaply).
pub fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let d = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let m = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u8, d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reading per poll: the same instant however long the poll runs,
    /// a new one in the next poll.
    #[test]
    fn mono_is_read_once_per_poll() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let task = tokio::task::spawn_local(per_poll(async {
                let a = mono();
                std::thread::sleep(Duration::from_millis(5));
                assert_eq!(mono(), a, "same poll, same reading");
                tokio::task::yield_now().await;
                let b = mono();
                assert!(b >= a + Duration::from_millis(5), "a new poll reads the clock again");
                assert_eq!(since_ms(a), (b - a).as_millis() as u64);
                // A timeout counts from the poll's reading.
                let r = timeout(Duration::from_millis(20), std::future::pending::<()>()).await;
                assert!(r.is_err());
                assert!(Instant::now() >= b + Duration::from_millis(20));
            }));
            task.await.expect("task");
        });
    }
}
