//! Virtual server selection by Host, in nginx's order: exact name, longest
//! leading wildcard, longest trailing wildcard, first matching regex, then
//! the default server of the listening address.

use std::borrow::Cow;
use std::sync::Arc;

use crate::config::model::{ListenGroup, Server};

/// nginx's `ngx_http_validate_host`: lowercases, drops the port and a
/// trailing dot, and refuses what could escape a path (`..`, `/`, NUL).
pub fn validate_host(raw: &[u8]) -> Option<Cow<'_, [u8]>> {
    let mut end = raw.len();
    let mut dot_pos = usize::MAX;
    let mut in_brackets = false;
    let mut needs_lower = false;
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'.' => {
                if dot_pos == i.wrapping_sub(1) {
                    return None;
                }
                dot_pos = i;
            }
            b':' if !in_brackets => {
                end = i;
                break;
            }
            b'[' if i == 0 => in_brackets = true,
            b']' => in_brackets = false,
            b'/' | 0 | b'\\' => return None,
            b'A'..=b'Z' => needs_lower = true,
            c if c < 0x21 || c == 0x7f => return None,
            _ => {}
        }
    }
    let mut host = &raw[..end];
    if host.last() == Some(&b'.') {
        host = &host[..host.len() - 1];
    }
    if host.is_empty() {
        return None;
    }
    if needs_lower { Some(Cow::Owned(host.to_ascii_lowercase())) } else { Some(Cow::Borrowed(host)) }
}

pub fn select<'a>(group: &'a ListenGroup, host: &[u8]) -> &'a Arc<Server> {
    let names = &group.names;
    if host.is_empty() {
        return names.exact.get("").unwrap_or(&group.default_server);
    }
    // A few names (the usual case): comparing bytes beats checking UTF-8
    // and hashing the host.
    if names.exact.len() <= 8 {
        if let Some((_, s)) = names.exact.iter().find(|(k, _)| k.as_bytes() == host) {
            return s;
        }
        if names.wildcard_front.is_empty() && names.wildcard_back.is_empty() && names.regex.is_empty() {
            return &group.default_server;
        }
    }
    let Ok(h) = std::str::from_utf8(host) else {
        return &group.default_server;
    };
    if let Some(s) = names.exact.get(h) {
        return s;
    }
    for (suffix, s) in &names.wildcard_front {
        if h.len() > suffix.len() && h.ends_with(suffix.as_str()) {
            return s;
        }
    }
    for (prefix, s) in &names.wildcard_back {
        if h.len() > prefix.len() && h.starts_with(prefix.as_str()) {
            return s;
        }
    }
    for (re, s) in &names.regex {
        if re.is_match(h.as_bytes()) {
            return s;
        }
    }
    &group.default_server
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadOptions, Source, load};

    #[test]
    fn host_validation() {
        assert_eq!(validate_host(b"Example.COM:8080").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(validate_host(b"example.com.").as_deref(), Some(&b"example.com"[..]));
        assert_eq!(validate_host(b"[::1]:80").as_deref(), Some(&b"[::1]"[..]));
        assert!(validate_host(b"a..b").is_none());
        assert!(validate_host(b"a/b").is_none());
        assert!(validate_host(b"").is_none());
        assert!(validate_host(b":80").is_none());
    }

    #[test]
    fn selection_order() {
        let text = r#"events {} http {
            server { listen 127.0.0.1:1; server_name first; return 200 default; }
            server { listen 127.0.0.1:1; server_name www.example.com; return 200 exact; }
            server { listen 127.0.0.1:1; server_name *.example.com; return 200 front; }
            server { listen 127.0.0.1:1; server_name *.a.example.com; return 200 front-longer; }
            server { listen 127.0.0.1:1; server_name mail.*; return 200 back; }
            server { listen 127.0.0.1:1; server_name ~^api\d+\.test$; return 200 regex; }
            server { listen 127.0.0.1:1 default_server; server_name dflt; return 200 marked; }
        }"#;
        let cfg = load(&LoadOptions {
            prefix: "/tmp".into(),
            source: Source::Text { name: "/tmp/t.conf".into(), text: text.into() },
            globals: None,
            error_log: None,
        })
        .unwrap();
        let g = &cfg.http.listens[0];
        let pick = |h: &str| {
            let s = select(g, h.as_bytes());
            let t = s
                .rewrite
                .as_ref()
                .and_then(|s| s.first_return())
                .and_then(|r| r.text.as_ref())
                .and_then(|t| t.as_literal())
                .unwrap_or(b"?");
            String::from_utf8_lossy(t).into_owned()
        };
        assert_eq!(pick("www.example.com"), "exact");
        assert_eq!(pick("x.example.com"), "front");
        assert_eq!(pick("x.a.example.com"), "front-longer");
        assert_eq!(pick("mail.example.org"), "back");
        assert_eq!(pick("api12.test"), "regex");
        assert_eq!(pick("nothing.here"), "marked");
        assert_eq!(pick("first"), "default");
    }
}
