//! Time as the request path sees it: a per-worker cache refreshed once per
//! second by a timer task, so the Date header and log timestamps cost a
//! thread-local read instead of a clock call and a format per request (as
//! nginx's `ngx_time_update`).

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

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

#[derive(Clone, Copy)]
struct Cached {
    secs: u64,
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
    let secs = unix_now();
    let mut date = [0u8; 29];
    crate::http::date::http_date(secs, &mut date);
    let offset = local_offset();
    let mut local = Vec::with_capacity(32);
    crate::http::date::log_time_local(secs, offset, &mut local);
    let mut time_local = ([0u8; 32], 0u8);
    let n = local.len().min(32);
    time_local.0[..n].copy_from_slice(&local[..n]);
    time_local.1 = n as u8;
    CACHE.with(|c| c.set(Some(Cached { secs, offset, date, time_local })));
}

fn cached() -> Cached {
    CACHE.with(|c| match c.get() {
        Some(v) => v,
        None => {
            refresh();
            c.get().unwrap_or(Cached { secs: 0, offset: 0, date: [b' '; 29], time_local: ([0; 32], 0) })
        }
    })
}

/// The current second, as of the last refresh.
pub fn now_secs() -> u64 {
    cached().secs
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
