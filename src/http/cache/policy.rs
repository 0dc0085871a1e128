//! Whether and for how long an origin's response may be cached, decided
//! as nginx 1.22 decides it from the response's headers, in the order they
//! arrived: `X-Accel-Expires` (seconds, or `@` absolute time) wins over
//! `Cache-Control` (`no-cache`/`no-store`/`private` refuse; `s-maxage`,
//! else `max-age`; `max-age=0` refuses), which wins over `Expires` (a past
//! date refuses); `Set-Cookie` refuses; `Vary: *` refuses; only when no
//! header set a time does `proxy_cache_valid` give one by status.

use super::conf::{CacheConf, Ignore};

/// The outcome for one response.
#[derive(Debug, Default, PartialEq)]
pub struct Verdict {
    /// Unix seconds until which the entry is fresh; None: not cacheable.
    pub valid_until: Option<i64>,
    pub stale_updating: u32,
    pub stale_error: u32,
    /// The origin's `Vary` value (entries vary by these request headers).
    pub vary: Vec<u8>,
}

/// What the header loop learns, as nginx's `u->headers_in` flags.
#[derive(Default)]
struct State {
    cacheable: bool,
    valid_sec: i64,
    no_cache: bool,
    expired: bool,
    x_accel_expires: bool,
    stale_updating: u32,
    stale_error: u32,
    vary: Vec<u8>,
}

/// `headers` are the origin's, in order (name, value); `accel_expires` is
/// its X-Accel-Expires (which the proxy does not pass to the client).
pub fn decide(
    status: u16,
    headers: &[(impl AsRef<str>, impl AsRef<[u8]>)],
    accel_expires: Option<&[u8]>,
    conf: &CacheConf,
    now: i64,
) -> Verdict {
    let mut s = scan(headers, accel_expires, &conf.ignore, now);
    if s.no_cache || s.expired {
        s.cacheable = false;
    }
    let mut out =
        Verdict { stale_updating: s.stale_updating, stale_error: s.stale_error, vary: s.vary, ..Verdict::default() };
    if !s.cacheable {
        return out;
    }
    if s.valid_sec == 0
        && let Some(t) = conf.valid_for(status)
        && !t.is_zero()
    {
        s.valid_sec = now + t.as_secs() as i64;
    }
    if s.valid_sec != 0 {
        out.valid_until = Some(s.valid_sec);
    }
    out
}

/// How long an entry revalidated by the origin's 304 stays fresh, as
/// nginx's `ngx_http_upstream_test_next` decides it: the time the 304's
/// own headers give, else the time the stored response's headers give
/// (nginx reads them again as it sends the entry), else
/// `proxy_cache_valid` for the stored status. None: the entry keeps its
/// old time.
pub fn revalidated(
    stored_status: u16,
    not_modified: &[(impl AsRef<str>, impl AsRef<[u8]>)],
    accel_expires: Option<&[u8]>,
    stored: &[(impl AsRef<str>, impl AsRef<[u8]>)],
    conf: &CacheConf,
    now: i64,
) -> Option<i64> {
    let fresh = scan(not_modified, accel_expires, &conf.ignore, now).valid_sec;
    let fresh = if fresh != 0 { fresh } else { scan(stored, None, &conf.ignore, now).valid_sec };
    if fresh != 0 {
        return Some(fresh);
    }
    conf.valid_for(stored_status).filter(|t| !t.is_zero()).map(|t| now + t.as_secs() as i64)
}

/// The header loop: what each caching header says, in arrival order.
fn scan(headers: &[(impl AsRef<str>, impl AsRef<[u8]>)], accel_expires: Option<&[u8]>, ig: &Ignore, now: i64) -> State {
    let mut s = State { cacheable: true, ..State::default() };
    // nginx handles X-Accel-Expires where it appears among the headers;
    // the proxy keeps it apart, and an origin sends it first in practice,
    // which is also the order in which it takes effect over the others.
    if let Some(v) = accel_expires {
        accel(&mut s, v, ig, now);
    }
    for (n, v) in headers {
        let (n, v) = (n.as_ref(), v.as_ref());
        if n.eq_ignore_ascii_case("cache-control") {
            cache_control(&mut s, v, ig, now);
        } else if n.eq_ignore_ascii_case("expires") {
            expires(&mut s, v, ig, now);
        } else if n.eq_ignore_ascii_case("set-cookie") {
            if !ig.set_cookie {
                s.cacheable = false;
            }
        } else if n.eq_ignore_ascii_case("vary") && !ig.vary && s.cacheable {
            // nginx keeps at most 128 bytes of Vary; more is not cached.
            if v == b"*" || v.len() > 128 {
                s.cacheable = false;
            }
            if !s.vary.is_empty() {
                s.vary.extend_from_slice(b",");
            }
            s.vary.extend_from_slice(v);
        }
    }
    s
}

fn accel(s: &mut State, v: &[u8], ig: &Ignore, now: i64) {
    if ig.x_accel_expires || v.is_empty() {
        return;
    }
    s.x_accel_expires = true;
    let (absolute, digits) = match v.strip_prefix(b"@") {
        Some(rest) => (true, rest),
        None => (false, v),
    };
    let Some(n) = atoi(digits) else { return };
    if !absolute && n == 0 {
        s.cacheable = false;
        return;
    }
    s.valid_sec = if absolute { n } else { now.saturating_add(n) };
    s.no_cache = false;
    s.expired = false;
}

fn cache_control(s: &mut State, v: &[u8], ig: &Ignore, now: i64) {
    if ig.cache_control {
        return;
    }
    if !(s.valid_sec != 0 && s.x_accel_expires) {
        if find(v, b"no-cache").is_some() || find(v, b"no-store").is_some() || find(v, b"private").is_some() {
            s.no_cache = true;
            return;
        }
        let at = find(v, b"s-maxage=").map(|p| p + 9).or_else(|| find(v, b"max-age=").map(|p| p + 8));
        if let Some(at) = at {
            let Some(n) = seconds(&v[at..]) else {
                s.cacheable = false;
                return;
            };
            if n == 0 {
                s.no_cache = true;
                return;
            }
            s.valid_sec = now.saturating_add(n);
            s.expired = false;
        }
    }
    if let Some(p) = find(v, b"stale-while-revalidate=") {
        let Some(n) = seconds(&v[p + 23..]) else {
            s.cacheable = false;
            return;
        };
        s.stale_updating = n.min(u32::MAX as i64) as u32;
        s.stale_error = s.stale_updating;
    }
    if let Some(p) = find(v, b"stale-if-error=") {
        let Some(n) = seconds(&v[p + 15..]) else {
            s.cacheable = false;
            return;
        };
        s.stale_error = n.min(u32::MAX as i64) as u32;
    }
}

fn expires(s: &mut State, v: &[u8], ig: &Ignore, now: i64) {
    if ig.expires || s.valid_sec != 0 {
        return;
    }
    match std::str::from_utf8(v).ok().and_then(|t| httpdate::parse_http_date(t).ok()) {
        Some(t) => {
            let t = t.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            if t < now {
                s.expired = true;
            } else {
                s.valid_sec = t;
            }
        }
        None => s.expired = true,
    }
}

/// nginx's digit loop after `max-age=`: digits up to `,`, `;`, a space or
/// the end; anything else makes the response uncacheable (None).
fn seconds(v: &[u8]) -> Option<i64> {
    let mut n: i64 = 0;
    for &b in v {
        match b {
            b',' | b';' | b' ' => break,
            b'0'..=b'9' => n = n.saturating_mul(10).saturating_add((b - b'0') as i64),
            _ => return None,
        }
    }
    Some(n)
}

/// nginx's `ngx_atoi`: digits only, at least one.
fn atoi(v: &[u8]) -> Option<i64> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) || v.len() > 18 {
        return None;
    }
    Some(v.iter().fold(0i64, |n, b| n * 10 + (b - b'0') as i64))
}

/// Case-insensitive substring search (nginx's `ngx_strlcasestrn`).
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::super::conf::Valid;
    use super::*;
    use std::time::Duration;

    const NOW: i64 = 1_700_000_000;

    fn conf(valid: &[(&[u16], u64)]) -> CacheConf {
        CacheConf {
            valid: valid.iter().map(|(c, t)| Valid { codes: c.to_vec(), time: Duration::from_secs(*t) }).collect(),
            ..CacheConf::default()
        }
    }

    fn until(status: u16, h: &[(&str, &str)], xae: Option<&str>, c: &CacheConf) -> Option<i64> {
        let h: Vec<(&str, &[u8])> = h.iter().map(|(n, v)| (*n, v.as_bytes())).collect();
        decide(status, &h, xae.map(str::as_bytes), c, NOW).valid_until.map(|t| t - NOW)
    }

    #[test]
    fn header_precedence_as_nginx() {
        let c = conf(&[(&[200], 600)]);
        assert_eq!(until(200, &[], None, &c), Some(600));
        assert_eq!(until(404, &[], None, &c), None);
        assert_eq!(until(200, &[("Cache-Control", "max-age=60")], None, &c), Some(60));
        assert_eq!(until(200, &[("Cache-Control", "public, s-maxage=30, max-age=60")], None, &c), Some(30));
        assert_eq!(until(200, &[("Cache-Control", "max-age=0")], None, &c), None);
        assert_eq!(until(200, &[("Cache-Control", "no-store")], None, &c), None);
        assert_eq!(until(200, &[("Cache-Control", "private, max-age=60")], None, &c), None);
        assert_eq!(until(200, &[("cache-control", "No-Cache")], None, &c), None);
        assert_eq!(until(200, &[("Cache-Control", "max-age=6x")], None, &c), None);
        assert_eq!(until(200, &[("Set-Cookie", "a=b")], None, &c), None);
        assert_eq!(until(200, &[("Vary", "*")], None, &c), None);
        assert_eq!(until(200, &[("Expires", "Thu, 01 Jan 1970 00:00:01 GMT")], None, &c), None);
        assert_eq!(until(200, &[("Expires", "garbage")], None, &c), None);
        let later = httpdate::fmt_http_date(std::time::UNIX_EPOCH + Duration::from_secs((NOW + 90) as u64));
        assert_eq!(until(200, &[("Expires", &later)], None, &c), Some(90));
        assert_eq!(until(200, &[("Cache-Control", "max-age=5"), ("Expires", &later)], None, &c), Some(5));
        // X-Accel-Expires wins, also over no-cache and a past Expires.
        assert_eq!(until(200, &[("Cache-Control", "no-cache")], Some("20"), &c), Some(20));
        assert_eq!(until(200, &[("Expires", "garbage")], Some("20"), &c), Some(20));
        assert_eq!(until(200, &[], Some("0"), &c), None);
        assert_eq!(until(200, &[], Some("@1700000100"), &c), Some(100));
        assert_eq!(until(200, &[], Some("x"), &c), Some(600));
        // Set-Cookie refuses even with X-Accel-Expires.
        assert_eq!(until(200, &[("Set-Cookie", "a=b")], Some("20"), &c), None);
    }

    #[test]
    fn ignored_headers_and_valid_defaults() {
        let mut c = conf(&[(&[], 100)]);
        assert_eq!(until(404, &[], None, &c), Some(100), "any");
        c.ignore.cache_control = true;
        c.ignore.set_cookie = true;
        assert_eq!(until(200, &[("Cache-Control", "no-store"), ("Set-Cookie", "a")], None, &c), Some(100));
        c.ignore.x_accel_expires = true;
        assert_eq!(until(200, &[], Some("0"), &c), Some(100));
        let none = conf(&[]);
        assert_eq!(until(200, &[], None, &none), None, "no time from anywhere");
        assert_eq!(until(200, &[("Cache-Control", "max-age=7")], None, &none), Some(7));
    }

    #[test]
    fn stale_extensions() {
        let c = conf(&[]);
        let h = [("Cache-Control", b"max-age=1, stale-while-revalidate=30, stale-if-error=60".as_slice())];
        let v = decide(200, &h, None, &c, NOW);
        assert_eq!((v.stale_updating, v.stale_error), (30, 60));
    }
}
