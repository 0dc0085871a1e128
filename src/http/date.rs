//! HTTP dates and nginx log timestamps.
//!
//! These run on every response (`Date`, `Last-Modified`) and every log line,
//! so formatting is hand-rolled into caller buffers instead of going through
//! `fmt` or a calendar crate. Parsing is rare enough (conditional requests
//! only) to delegate to `httpdate`.

use std::time::UNIX_EPOCH;

const WDAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
pub(crate) const MONTHS: [&[u8; 3]; 12] =
    [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];

/// Last second representable as a four-digit IMF-fixdate year
/// (9999-12-31T23:59:59Z); later times are clamped so the output stays 29 bytes.
const MAX_HTTP_SECS: u64 = 253_402_300_799;

/// Broken-down civil time, shared with the autoindex renderer so every module
/// formats dates from the same arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tm {
    pub year: i64,
    /// 1..=12
    pub mon: u8,
    /// 1..=31
    pub mday: u8,
    pub hour: u8,
    pub min: u8,
    pub sec: u8,
    /// 0 = Sunday
    pub wday: u8,
}

impl Tm {
    /// `DD<sep>Mon<sep>YYYY`, the day-month-year of the access log
    /// (`/`), the SSI dates and autoindex's listing (`-`).
    pub(crate) fn push_dmy(&self, sep: u8, out: &mut Vec<u8>) {
        push2(out, self.mday);
        out.push(sep);
        out.extend_from_slice(MONTHS[usize::from(self.mon - 1)]);
        out.push(sep);
        push_year(out, self.year);
    }

    /// Signed input so that local times just before the epoch (negative UTC
    /// offsets applied to tiny timestamps) still format sensibly.
    pub(crate) fn from_unix(secs: i64) -> Tm {
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (year, mon, mday) = crate::clock::civil_from_days(days);
        Tm {
            year,
            mon,
            mday,
            hour: (rem / 3600) as u8,
            min: (rem / 60 % 60) as u8,
            sec: (rem % 60) as u8,
            // 1970-01-01 was a Thursday.
            wday: (days + 4).rem_euclid(7) as u8,
        }
    }
}

#[inline]
fn two(n: u8) -> [u8; 2] {
    [b'0' + n / 10, b'0' + n % 10]
}

#[inline]
pub(crate) fn push2(out: &mut Vec<u8>, n: u8) {
    out.extend_from_slice(&two(n));
}

/// Years are zero-padded to four digits like nginx's "%4d" would show them in
/// practice; out-of-range years (only reachable with absurd timestamps) are
/// printed in full rather than truncated.
pub(crate) fn push_year(out: &mut Vec<u8>, year: i64) {
    if (0..=9999).contains(&year) {
        let y = year as u16;
        out.extend_from_slice(&[
            b'0' + (y / 1000) as u8,
            b'0' + (y / 100 % 10) as u8,
            b'0' + (y / 10 % 10) as u8,
            b'0' + (y % 10) as u8,
        ]);
    } else {
        if year < 0 {
            out.push(b'-');
        }
        push_u64(out, year.unsigned_abs());
    }
}

/// Decimal without `fmt`: avoids the formatting machinery on hot paths.
pub(crate) fn push_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(decimal(n, &mut [0u8; 20]));
}

/// `n` in decimal, written into `buf` (no allocation): the digits.
pub(crate) fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Timestamps beyond `i64` are meaningless for a calendar; saturate instead of
/// wrapping so a corrupt mtime cannot turn into a date before 1970.
fn local_secs(unix_secs: u64, utc_offset_secs: i32) -> (i64, i32) {
    // nginx keeps the offset in whole minutes (tp->gmtoff); match its rounding.
    let gmtoff_min = utc_offset_secs / 60;
    let secs = i64::try_from(unix_secs).unwrap_or(i64::MAX);
    (secs.saturating_add(i64::from(gmtoff_min) * 60), gmtoff_min)
}

/// nginx's `ngx_http_cookie_time`: `Thu, 31-Dec-37 23:55:55 GMT`, the
/// year in two digits up to 2037 (old browsers read no more) and in full
/// after it.
pub fn cookie_time(unix_secs: i64, out: &mut Vec<u8>) {
    let tm = Tm::from_unix(unix_secs.clamp(0, MAX_HTTP_SECS as i64));
    out.extend_from_slice(WDAYS[usize::from(tm.wday)]);
    out.extend_from_slice(b", ");
    out.extend_from_slice(&two(tm.mday));
    out.push(b'-');
    out.extend_from_slice(MONTHS[usize::from(tm.mon - 1)]);
    out.push(b'-');
    if tm.year > 2037 {
        out.extend_from_slice(tm.year.to_string().as_bytes());
    } else {
        out.extend_from_slice(&two((tm.year % 100) as u8));
    }
    for (sep, n) in [(b' ', tm.hour), (b':', tm.min), (b':', tm.sec)] {
        out.push(sep);
        out.extend_from_slice(&two(n));
    }
    out.extend_from_slice(b" GMT");
}

pub fn http_date(unix_secs: u64, out: &mut [u8; 29]) {
    let secs = unix_secs.min(MAX_HTTP_SECS) as i64;
    let tm = Tm::from_unix(secs);
    let y = tm.year as u16; // clamped above to <= 9999
    let wd = WDAYS[usize::from(tm.wday)];
    let mo = MONTHS[usize::from(tm.mon - 1)];
    let d = two(tm.mday);
    let h = two(tm.hour);
    let mi = two(tm.min);
    let s = two(tm.sec);
    *out = [
        wd[0],
        wd[1],
        wd[2],
        b',',
        b' ',
        d[0],
        d[1],
        b' ',
        mo[0],
        mo[1],
        mo[2],
        b' ',
        b'0' + (y / 1000) as u8,
        b'0' + (y / 100 % 10) as u8,
        b'0' + (y / 10 % 10) as u8,
        b'0' + (y % 10) as u8,
        b' ',
        h[0],
        h[1],
        b':',
        mi[0],
        mi[1],
        b':',
        s[0],
        s[1],
        b' ',
        b'G',
        b'M',
        b'T',
    ];
}

/// Accepts IMF-fixdate, RFC 850 and asctime via `httpdate`. Old MSIE appends
/// "; length=NNN" to If-Modified-Since, which nginx tolerates (its parser stops
/// after the time), so that suffix is retried without. Unlike nginx, a wrong
/// weekday name is rejected by `httpdate`; the caller then treats the resource
/// as modified, which only costs a full response.
pub fn parse_http_date(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    let parse = |b: &[u8]| -> Option<u64> {
        let s = std::str::from_utf8(b).ok()?;
        let t = httpdate::parse_http_date(s).ok()?;
        t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs())
    };
    parse(v).or_else(|| {
        let semi = memchr::memchr(b';', v)?;
        parse(v[..semi].trim_ascii())
    })
}

fn push_offset(out: &mut Vec<u8>, gmtoff_min: i32, colon: bool) {
    out.push(if gmtoff_min < 0 { b'-' } else { b'+' });
    let abs = gmtoff_min.unsigned_abs();
    // Offsets beyond 99 hours are nonsense; clamp rather than print 3 digits.
    push2(out, (abs / 60).min(99) as u8);
    if colon {
        out.push(b':');
    }
    push2(out, (abs % 60) as u8);
}

/// `HH:MM:SS`, the time of day every log format shares.
fn push_hms(out: &mut Vec<u8>, tm: &Tm) {
    push2(out, tm.hour);
    out.push(b':');
    push2(out, tm.min);
    out.push(b':');
    push2(out, tm.sec);
}

pub fn log_time_local(unix_secs: u64, utc_offset_secs: i32, out: &mut Vec<u8>) {
    let (secs, off) = local_secs(unix_secs, utc_offset_secs);
    let tm = Tm::from_unix(secs);
    tm.push_dmy(b'/', out);
    out.push(b':');
    push_hms(out, &tm);
    out.push(b' ');
    push_offset(out, off, false);
}

const WEEKDAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// `$date_gmt` and `$date_local` in the SSI module's default `timefmt`,
/// `"%A, %d-%b-%Y %H:%M:%S %Z"`: `secs` already shifted to the zone whose
/// abbreviation `zone` is ("GMT" for `$date_gmt`, as strftime names it).
pub fn ssi_date(secs: i64, zone: &str, out: &mut Vec<u8>) {
    let tm = Tm::from_unix(secs);
    out.extend_from_slice(WEEKDAYS[usize::from(tm.wday)].as_bytes());
    out.extend_from_slice(b", ");
    tm.push_dmy(b'-', out);
    out.push(b' ');
    push_hms(out, &tm);
    out.push(b' ');
    out.extend_from_slice(zone.as_bytes());
}

/// C's strftime for the SSI `config timefmt` formats: `unix` is the
/// moment, `secs` the same shifted to the zone named `zone` whose offset
/// from UTC is `offset` seconds. The conversions C defines in the POSIX
/// locale are written; an unknown one is copied as written.
pub fn strftime(fmt: &[u8], unix: i64, secs: i64, zone: &str, offset: i64, out: &mut Vec<u8>) {
    const FULL_MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let tm = Tm::from_unix(secs);
    let yday = {
        const BEFORE: [u16; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
        let leap = tm.year % 4 == 0 && (tm.year % 100 != 0 || tm.year % 400 == 0);
        BEFORE[usize::from(tm.mon - 1)] + u16::from(tm.mday) - 1 + u16::from(leap && tm.mon > 2)
    };
    let mut i = 0;
    while i < fmt.len() {
        if fmt[i] != b'%' || i + 1 == fmt.len() {
            out.push(fmt[i]);
            i += 1;
            continue;
        }
        let c = fmt[i + 1];
        i += 2;
        let hour12 = if tm.hour.is_multiple_of(12) { 12 } else { tm.hour % 12 };
        match c {
            b'a' => out.extend_from_slice(&WEEKDAYS[usize::from(tm.wday)].as_bytes()[..3]),
            b'A' => out.extend_from_slice(WEEKDAYS[usize::from(tm.wday)].as_bytes()),
            b'b' | b'h' => out.extend_from_slice(MONTHS[usize::from(tm.mon - 1)]),
            b'B' => out.extend_from_slice(FULL_MONTHS[usize::from(tm.mon - 1)].as_bytes()),
            b'C' => push2(out, (tm.year / 100).rem_euclid(100) as u8),
            b'd' => push2(out, tm.mday),
            b'e' => {
                out.push(if tm.mday >= 10 { b'0' + tm.mday / 10 } else { b' ' });
                out.push(b'0' + tm.mday % 10);
            }
            b'D' => strftime(b"%m/%d/%y", unix, secs, zone, offset, out),
            b'F' => strftime(b"%Y-%m-%d", unix, secs, zone, offset, out),
            b'T' => strftime(b"%H:%M:%S", unix, secs, zone, offset, out),
            b'R' => strftime(b"%H:%M", unix, secs, zone, offset, out),
            b'r' => strftime(b"%I:%M:%S %p", unix, secs, zone, offset, out),
            b'c' => strftime(b"%a %b %e %H:%M:%S %Y", unix, secs, zone, offset, out),
            b'x' => strftime(b"%m/%d/%y", unix, secs, zone, offset, out),
            b'X' => strftime(b"%H:%M:%S", unix, secs, zone, offset, out),
            b'H' => push2(out, tm.hour),
            b'I' => push2(out, hour12),
            b'j' => {
                let d = yday + 1;
                out.extend_from_slice(&[b'0' + (d / 100) as u8, b'0' + (d / 10 % 10) as u8, b'0' + (d % 10) as u8]);
            }
            b'k' => {
                out.push(if tm.hour >= 10 { b'0' + tm.hour / 10 } else { b' ' });
                out.push(b'0' + tm.hour % 10);
            }
            b'm' => push2(out, tm.mon),
            b'M' => push2(out, tm.min),
            b'n' => out.push(b'\n'),
            b't' => out.push(b'\t'),
            b'p' => out.extend_from_slice(if tm.hour < 12 { b"AM" } else { b"PM" }),
            b'S' => push2(out, tm.sec),
            b's' => out.extend_from_slice(unix.to_string().as_bytes()),
            b'u' => out.push(b'0' + if tm.wday == 0 { 7 } else { tm.wday }),
            b'w' => out.push(b'0' + tm.wday),
            b'y' => push2(out, tm.year.rem_euclid(100) as u8),
            b'Y' => out.extend_from_slice(tm.year.to_string().as_bytes()),
            b'z' => {
                let m = offset / 60;
                out.push(if m < 0 { b'-' } else { b'+' });
                let m = m.unsigned_abs();
                push2(out, (m / 60 % 100) as u8);
                push2(out, (m % 60) as u8);
            }
            b'Z' => out.extend_from_slice(zone.as_bytes()),
            b'%' => out.push(b'%'),
            other => out.extend_from_slice(&[b'%', other]),
        }
    }
}

pub fn log_time_iso8601(unix_secs: u64, utc_offset_secs: i32, out: &mut Vec<u8>) {
    let (secs, off) = local_secs(unix_secs, utc_offset_secs);
    let tm = Tm::from_unix(secs);
    push_year(out, tm.year);
    out.push(b'-');
    push2(out, tm.mon);
    out.push(b'-');
    push2(out, tm.mday);
    out.push(b'T');
    push_hms(out, &tm);
    push_offset(out, off, true);
}

/// nginx's syslog header time (RFC 3164): `Nov  7 14:02:34`, local time,
/// the day padded with a space.
pub fn syslog_time(unix_secs: u64, utc_offset_secs: i32, out: &mut Vec<u8>) {
    let (secs, _) = local_secs(unix_secs, utc_offset_secs);
    let tm = Tm::from_unix(secs);
    out.extend_from_slice(MONTHS[usize::from(tm.mon - 1)]);
    out.push(b' ');
    out.push(if tm.mday >= 10 { b'0' + tm.mday / 10 } else { b' ' });
    out.push(b'0' + tm.mday % 10);
    out.push(b' ');
    push_hms(out, &tm);
}

pub fn error_log_time(unix_secs: u64, utc_offset_secs: i32, out: &mut Vec<u8>) {
    let (secs, _) = local_secs(unix_secs, utc_offset_secs);
    let tm = Tm::from_unix(secs);
    push_year(out, tm.year);
    out.push(b'/');
    push2(out, tm.mon);
    out.push(b'/');
    push2(out, tm.mday);
    out.push(b' ');
    push_hms(out, &tm);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn strftime_formats_as_c() {
        let mut out = Vec::new();
        strftime(b"%A, %H:%M:%S|%a %d %b %Y %j %e|%s|%Z %z|%q", 1_795_824_607, 1_795_824_607, "GMT", 0, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "Saturday, 00:10:07|Sat 28 Nov 2026 332 28|1795824607|GMT +0000|%q"
        );
        let mut out = Vec::new();
        strftime(b"%j", 1_767_225_600, 1_767_225_600, "GMT", 0, &mut out);
        assert_eq!(out, b"001");
    }

    #[test]
    fn ssi_date_is_strftimes() {
        let mut out = Vec::new();
        // 2026-11-28 00:10:07 UTC, a Saturday (nginx printed this one).
        ssi_date(1_795_824_607, "GMT", &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "Saturday, 28-Nov-2026 00:10:07 GMT");
    }

    fn hd(secs: u64) -> String {
        let mut b = [0u8; 29];
        http_date(secs, &mut b);
        String::from_utf8(b.to_vec()).unwrap()
    }

    fn with(f: fn(u64, i32, &mut Vec<u8>), secs: u64, off: i32) -> String {
        let mut v = Vec::new();
        f(secs, off, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn cookie_time_as_nginx() {
        let mut v = Vec::new();
        super::cookie_time(2_145_916_555, &mut v);
        assert_eq!(v, b"Thu, 31-Dec-37 23:55:55 GMT");
        v.clear();
        super::cookie_time(0, &mut v);
        assert_eq!(v, b"Thu, 01-Jan-70 00:00:00 GMT");
        v.clear();
        super::cookie_time(2_208_988_800, &mut v);
        assert_eq!(v, b"Sun, 01-Jan-2040 00:00:00 GMT");
    }

    #[test]
    fn http_date_known_values() {
        assert_eq!(hd(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(hd(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(hd(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(hd(951_868_799), "Tue, 29 Feb 2000 23:59:59 GMT");
        assert_eq!(hd(951_868_800), "Wed, 01 Mar 2000 00:00:00 GMT");
        // 2100 is not a leap year: Feb 28 is followed by Mar 1.
        assert_eq!(hd(4_107_542_399), "Sun, 28 Feb 2100 23:59:59 GMT");
        assert_eq!(hd(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
        assert_eq!(hd(2_147_483_647), "Tue, 19 Jan 2038 03:14:07 GMT");
        assert_eq!(hd(2_147_483_648), "Tue, 19 Jan 2038 03:14:08 GMT");
        assert_eq!(hd(1_795_356_154), "Sun, 22 Nov 2026 14:02:34 GMT");
        assert_eq!(hd(MAX_HTTP_SECS), "Fri, 31 Dec 9999 23:59:59 GMT");
        assert_eq!(hd(u64::MAX), "Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn http_date_matches_httpdate_crate() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let secs = if i % 2 == 0 { x % MAX_HTTP_SECS } else { x % 5_000_000_000 };
            let expect = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(hd(secs), expect, "secs={secs}");
        }
        // Every day boundary across a few leap cycles.
        for day in 0..(366 * 12) {
            let secs = 946_684_800 - 86_400 * 200 + day * 86_400 - 1;
            let expect = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(hd(secs), expect);
        }
    }

    #[test]
    fn parse_formats() {
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(784_111_777));
        assert_eq!(parse_http_date(b"  Sun, 06 Nov 1994 08:49:37 GMT "), Some(784_111_777));
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT; length=1234"), Some(784_111_777));
        assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
    }

    #[test]
    fn parse_rejects_garbage() {
        assert_eq!(parse_http_date(b""), None);
        assert_eq!(parse_http_date(b"yesterday"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37"), None);
        assert_eq!(parse_http_date(b"Sun, 31 Feb 1994 08:49:37 GMT"), None);
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 25:49:37 GMT"), None);
        assert_eq!(parse_http_date(b"\xff\xfe"), None);
        assert_eq!(parse_http_date(b";"), None);
    }

    #[test]
    fn roundtrip_parse_format() {
        for secs in [0u64, 1, 784_111_777, 951_782_400, 2_147_483_648, 4_107_542_400] {
            let mut b = [0u8; 29];
            http_date(secs, &mut b);
            assert_eq!(parse_http_date(&b), Some(secs));
        }
    }

    #[test]
    fn time_local() {
        assert_eq!(with(log_time_local, 1_795_356_154, 0), "22/Nov/2026:14:02:34 +0000");
        assert_eq!(with(log_time_local, 1_795_356_154, 3600), "22/Nov/2026:15:02:34 +0100");
        assert_eq!(with(log_time_local, 1_795_356_154, -(5 * 3600 + 30 * 60)), "22/Nov/2026:08:32:34 -0530");
        assert_eq!(with(log_time_local, 1_795_356_154, 5 * 3600 + 45 * 60), "22/Nov/2026:19:47:34 +0545");
        // Local time before the epoch.
        assert_eq!(with(log_time_local, 0, -3600), "31/Dec/1969:23:00:00 -0100");
        // Crossing a year boundary forward.
        assert_eq!(with(log_time_local, 1_798_761_599, 14 * 3600), "01/Jan/2027:13:59:59 +1400");
        // Seconds in the offset are dropped, as nginx keeps minutes only.
        assert_eq!(with(log_time_local, 0, 61), "01/Jan/1970:00:01:00 +0001");
        assert_eq!(with(log_time_local, 0, -59), "01/Jan/1970:00:00:00 +0000");
    }

    #[test]
    fn time_iso8601() {
        assert_eq!(with(log_time_iso8601, 1_795_356_154, 0), "2026-11-22T14:02:34+00:00");
        assert_eq!(with(log_time_iso8601, 1_795_356_154, -(5 * 3600 + 30 * 60)), "2026-11-22T08:32:34-05:30");
        assert_eq!(with(log_time_iso8601, 951_782_400, 9 * 3600), "2000-02-29T09:00:00+09:00");
        assert_eq!(with(log_time_iso8601, 4_107_542_400, -1), "2100-03-01T00:00:00+00:00");
    }

    #[test]
    fn error_log() {
        assert_eq!(with(error_log_time, 1_795_356_154, 0), "2026/11/22 14:02:34");
        assert_eq!(with(error_log_time, 1_795_356_154, -(5 * 3600 + 30 * 60)), "2026/11/22 08:32:34");
        assert_eq!(with(error_log_time, 0, 0), "1970/01/01 00:00:00");
    }

    #[test]
    fn huge_timestamps_do_not_panic() {
        let mut v = Vec::new();
        log_time_local(u64::MAX, i32::MAX, &mut v);
        log_time_iso8601(u64::MAX, i32::MIN, &mut v);
        error_log_time(u64::MAX, 0, &mut v);
        assert!(!v.is_empty());
    }

    #[test]
    fn tm_weekday_and_negative() {
        assert_eq!(Tm::from_unix(0).wday, 4);
        let t = Tm::from_unix(-1);
        assert_eq!((t.year, t.mon, t.mday, t.hour, t.min, t.sec, t.wday), (1969, 12, 31, 23, 59, 59, 3));
    }
}
