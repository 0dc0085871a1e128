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
}

thread_local! {
    static CACHE: Cell<Option<Cached>> = const { Cell::new(None) };
}

/// Recomputes the cache; the worker's tick task calls this every second.
pub fn refresh() {
    let secs = unix_now();
    let mut date = [0u8; 29];
    crate::http::date::http_date(secs, &mut date);
    CACHE.with(|c| c.set(Some(Cached { secs, offset: local_offset(), date })));
}

fn cached() -> Cached {
    CACHE.with(|c| match c.get() {
        Some(v) => v,
        None => {
            refresh();
            c.get().unwrap_or(Cached { secs: 0, offset: 0, date: [b' '; 29] })
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
