//! Argument value parsers with nginx's exact grammar (`ngx_parse_size`,
//! `ngx_parse_time`, flags), so operators' existing values keep their meaning.

use std::time::Duration;

/// nginx's access slot (`dav_access`, `proxy_store_access`): `user:rw|r`,
/// `group:rw|r`, `all:rw|r` as a file mode; the user keeps `rw` unless
/// given. Err names the word that is not one of these.
pub fn parse_access<'a>(words: impl IntoIterator<Item = &'a str>) -> Result<u32, &'a str> {
    let mut user = 0o600;
    let mut rest = 0;
    for t in words {
        let (shift, right) = if let Some(r) = t.strip_prefix("user:") {
            (6, r)
        } else if let Some(r) = t.strip_prefix("group:") {
            (3, r)
        } else if let Some(r) = t.strip_prefix("all:") {
            (0, r)
        } else {
            return Err(t);
        };
        let bits = match right {
            "rw" => 6,
            "r" => 4,
            _ => return Err(t),
        };
        if shift == 6 {
            user = bits << 6;
        } else {
            rest |= bits << shift;
        }
    }
    Ok(user | rest)
}

/// nginx's `ngx_dir_access`: an `x` wherever there is an `r`, for the
/// directories made for files of an access slot's mode.
pub fn dir_access(a: u32) -> u32 {
    a | (a & 0o444) >> 2
}

/// `1024`, `8k`, `1m`, `1g` (case-insensitive suffix). nginx rejects
/// anything else, including fractions and negative numbers.
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024u64),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// nginx time values: a plain number means seconds; otherwise a sequence of
/// `<n><unit>` parts with units ms, s, m, h, d, w, M (30 days), y (365 days),
/// optionally separated by spaces (`1h 30m`).
pub fn parse_time(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse::<u64>().ok().map(Duration::from_secs);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total_ms: u64 = 0;
    while i < b.len() {
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
        if i == b.len() {
            break;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return None;
        }
        let n: u64 = s[start..i].parse().ok()?;
        let unit_ms: u64 = if b[i..].starts_with(b"ms") {
            i += 2;
            1
        } else {
            let u = *b.get(i)?;
            i += 1;
            match u {
                b's' => 1000,
                b'm' => 60_000,
                b'h' => 3_600_000,
                b'd' => 86_400_000,
                b'w' => 7 * 86_400_000,
                b'M' => 30 * 86_400_000,
                b'y' => 365 * 86_400_000,
                _ => return None,
            }
        };
        total_ms = total_ms.checked_add(n.checked_mul(unit_ms)?)?;
    }
    Some(Duration::from_millis(total_ms))
}

/// `on` / `off`, exactly; nginx is case-insensitive here.
pub fn parse_flag(s: &str) -> Option<bool> {
    if s.eq_ignore_ascii_case("on") {
        Some(true)
    } else if s.eq_ignore_ascii_case("off") {
        Some(false)
    } else {
        None
    }
}

/// A positive decimal integer (nginx's `ngx_atoi` used for counts).
pub fn parse_number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("8k"), Some(8192));
        assert_eq!(parse_size("8K"), Some(8192));
        assert_eq!(parse_size("1m"), Some(1 << 20));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("k"), None);
        assert_eq!(parse_size("1.5m"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999g"), None);
    }

    #[test]
    fn times() {
        assert_eq!(parse_time("75"), Some(Duration::from_secs(75)));
        assert_eq!(parse_time("75s"), Some(Duration::from_secs(75)));
        assert_eq!(parse_time("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_time("1h 30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_time("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_time("1d"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_time("1M"), Some(Duration::from_secs(30 * 86400)));
        assert_eq!(parse_time("0"), Some(Duration::ZERO));
        assert_eq!(parse_time("10x"), None);
        assert_eq!(parse_time("s"), None);
        assert_eq!(parse_time(""), None);
    }

    #[test]
    fn flags() {
        assert_eq!(parse_flag("on"), Some(true));
        assert_eq!(parse_flag("OFF"), Some(false));
        assert_eq!(parse_flag("yes"), None);
    }
}
