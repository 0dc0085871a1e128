//! nginx's User-Agent classification (`ngx_http_process_user_agent`), the
//! one place its flags are computed: `$msie`, `gzip_disable msie6` and
//! `msie_padding` all ask it. Case-sensitive substring tests, as nginx's.

fn find(ua: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(ua, needle)
}

/// `r->headers_in.msie`: "MSIE " with at least the "x.y" digits after
/// it, and not Opera (which claimed to be MSIE).
pub fn is_msie(ua: &[u8]) -> bool {
    find(ua, b"Opera").is_none() && find(ua, b"MSIE ").is_some_and(|i| i + 7 < ua.len())
}

/// `r->headers_in.msie6`: MSIE 4, 5 or 6 (6 without "SV1" after it, the
/// service pack that fixed compressed responses), not Opera.
pub fn is_msie6(ua: &[u8]) -> bool {
    if find(ua, b"Opera").is_some() {
        return false;
    }
    let Some(i) = find(ua, b"MSIE ") else { return false };
    if i + 7 >= ua.len() || ua[i + 6] != b'.' {
        return false;
    }
    match ua[i + 5] {
        b'4' | b'5' => true,
        b'6' => find(&ua[i + 8..], b"SV1").is_none(),
        _ => false,
    }
}

/// `r->headers_in.safari`: Safari on macOS, when the agent is neither
/// Gecko nor Chrome (`keepalive_disable safari`).
pub fn is_safari(ua: &[u8]) -> bool {
    find(ua, b"Gecko/").is_none()
        && find(ua, b"Chrome/").is_none()
        && find(ua, b"Safari/").is_some()
        && find(ua, b"Mac OS X").is_some()
}

/// Chrome, when the agent is neither MSIE, Opera nor Gecko (`msie_padding`
/// pads error pages for it too).
pub fn is_chrome(ua: &[u8]) -> bool {
    find(ua, b"Opera").is_none() && !is_msie(ua) && find(ua, b"Gecko/").is_none() && find(ua, b"Chrome/").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msie() {
        assert!(is_msie(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"));
        assert!(is_msie(b"Mozilla/5.0 (compatible; MSIE 10.0; Windows NT 6.1)"));
        assert!(!is_msie(b"MSIE 6."), "the digits must follow");
        assert!(!is_msie(b"Opera/9.80 (compatible; MSIE 6.0; Windows NT 5.1)"));
        assert!(!is_msie(b"curl/8.0"));
        assert!(!is_msie(b"Mozilla/4.0 (compatible; msie 6.0)"), "case matters, as in nginx");
    }

    #[test]
    fn msie6() {
        assert!(is_msie6(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)"));
        assert!(!is_msie6(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)"));
        assert!(is_msie6(b"Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)"));
        assert!(!is_msie6(b"Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 6.0)"));
        assert!(!is_msie6(b"Opera/9.80 (compatible; MSIE 6.0; Windows NT 5.1)"));
        assert!(!is_msie6(b"curl/8.0"));
        assert!(!is_msie6(b"MSIE 6."));
    }

    #[test]
    fn chrome() {
        assert!(is_chrome(b"Mozilla/5.0 (X11) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"));
        assert!(!is_chrome(b"Mozilla/5.0 (X11; rv:120.0) Gecko/20100101 Firefox/120.0 Chrome/1"));
        assert!(!is_chrome(b"curl/8.0"));
    }
}
