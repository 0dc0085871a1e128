//! `valid_referers` and `$invalid_referer` (ngx_http_referer_module).
//!
//! The variable is evaluated where it is read (usually an `if` in the
//! rewrite phase), against the current location's list: empty when the
//! Referer is acceptable, `1` when not. A level with `valid_referers`
//! replaces the inherited list; several at one level add up.
//!
//! nginx's test, in order: no list at all, valid; no Referer, valid with
//! `none`; a Referer that does not start with `http://` or `https://` (or
//! is shorter than `http://i.ru`), valid with `blocked`; then the host
//! (lowercased, up to `/` or `:`, at most 256 bytes) against the names:
//! exact, then the most specific `*.example.com`/`.example.com`, then
//! `www.example.*`; a name with a URI part (`example.com/galleries/`)
//! also needs the Referer's path to start with it. Then the server's own
//! names (`server_names`; nginx merges them into the same tables, and
//! its regex names), then the `~regex` entries (case-insensitive, matched
//! against the Referer without its scheme).

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::R;
use crate::http::handler::ctx::ReqCtx;
use crate::pattern::Regex;

/// A level's list. A URI part of None means the name alone suffices.
#[derive(Debug, Default)]
pub struct ValidReferers {
    none: bool,
    blocked: bool,
    server_names: bool,
    exact: HashMap<String, Option<String>>,
    /// `.example.com` (from `*.example.com` or `.example.com`), whether
    /// the bare `example.com` matches too, the URI part.
    front: Vec<(String, bool, Option<String>)>,
    /// `www.example.` (from `www.example.*`), the URI part.
    back: Vec<(String, Option<String>)>,
    regex: Vec<Arc<Regex>>,
}

/// The first `valid_referers` at a level drops the inherited list (the
/// directive table's reset).
pub fn reset(c: &mut LocConf) {
    c.access.referers = None;
}

pub fn valid_referers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut v = match c.access.referers.take() {
        Some(prev) => Arc::try_unwrap(prev).unwrap_or_else(|shared| clone(&shared)),
        None => ValidReferers::default(),
    };
    for w in &d.args {
        let t = w.text.as_str();
        match t {
            "" => return Err(ConfError::at("invalid referer \"\"", &d.span)),
            "none" => v.none = true,
            "blocked" => v.blocked = true,
            "server_names" => v.server_names = true,
            _ if t.starts_with('~') => {
                if t.len() == 1 {
                    return Err(ConfError::at(format!("empty regex in \"{t}\""), &d.span));
                }
                v.regex.push(Arc::new(Regex::new(&t[1..], true).map_err(|e| ConfError::at(e, &d.span))?));
            }
            _ => {
                let (host, uri) = match t.find('/') {
                    Some(i) => (&t[..i], Some(t[i..].to_string())),
                    None => (t, None),
                };
                add_name(&mut v, host, uri).map_err(|e| ConfError::at(format!("{e} \"{host}\""), &d.span))?;
            }
        }
    }
    c.access.referers = Some(Arc::new(v));
    Ok(())
}

fn clone(v: &ValidReferers) -> ValidReferers {
    ValidReferers {
        none: v.none,
        blocked: v.blocked,
        server_names: v.server_names,
        exact: v.exact.clone(),
        front: v.front.clone(),
        back: v.back.clone(),
        regex: v.regex.clone(),
    }
}

/// ngx_hash_add_key with NGX_HASH_WILDCARD_KEY: a name, `*.name`,
/// `.name` or `name.*`, lowercased; the same name twice conflicts.
fn add_name(v: &mut ValidReferers, host: &str, uri: Option<String>) -> Result<(), &'static str> {
    const BAD: &str = "invalid hostname or wildcard";
    const BUSY: &str = "conflicting parameter";
    let h = host.to_ascii_lowercase();
    if let Some(rest) = h.strip_prefix("*.") {
        if rest.is_empty() || rest.contains('*') {
            return Err(BAD);
        }
        let suffix = format!(".{rest}");
        if v.front.iter().any(|(s, _, _)| *s == suffix) {
            return Err(BUSY);
        }
        v.front.push((suffix, false, uri));
    } else if let Some(rest) = h.strip_prefix('.') {
        if rest.is_empty() || rest.contains('*') {
            return Err(BAD);
        }
        if v.front.iter().any(|(s, _, _)| *s == h) || v.exact.contains_key(rest) {
            return Err(BUSY);
        }
        v.front.push((h.clone(), true, uri));
    } else if let Some(rest) = h.strip_suffix(".*") {
        if rest.is_empty() || rest.contains('*') {
            return Err(BAD);
        }
        let prefix = format!("{rest}.");
        if v.back.iter().any(|(p, _)| *p == prefix) {
            return Err(BUSY);
        }
        v.back.push((prefix, uri));
    } else {
        if h.contains('*') || h.is_empty() {
            return Err(BAD);
        }
        if v.exact.contains_key(&h) {
            return Err(BUSY);
        }
        v.exact.insert(h, uri);
    }
    // The most specific wildcard is tried first.
    v.front.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
    v.back.sort_by_key(|e| std::cmp::Reverse(e.0.len()));
    Ok(())
}

/// nginx's merge-time check, once a level is complete: `none` or
/// `blocked` with no name to accept is an error (regexes do not count).
pub fn check_level(c: &LocConf) -> R {
    if let Some(v) = &c.access.referers
        && (v.none || v.blocked)
        && v.exact.is_empty()
        && v.front.is_empty()
        && v.back.is_empty()
        && !v.server_names
    {
        return Err(ConfError::plain(
            "the \"none\" or \"blocked\" referers are specified in the \"valid_referers\" directive without any valid referer",
        ));
    }
    Ok(())
}

/// `$invalid_referer` for the request's current location.
pub fn invalid(ctx: &ReqCtx<'_, '_>) -> bool {
    match &ctx.conf.access.referers {
        None => false,
        Some(v) => !valid(v, ctx.req.header("referer"), || server_names(ctx)),
    }
}

/// The server's `server_name` entries, for `server_names`: those of the
/// request's address that lead to this server.
fn server_names(ctx: &ReqCtx<'_, '_>) -> ValidReferers {
    let mut v = ValidReferers::default();
    let names = &ctx.group.names;
    let mine = |s: &Arc<crate::config::model::Server>| std::ptr::eq(Arc::as_ptr(s), ctx.server);
    for (n, s) in &names.exact {
        if mine(s) && !n.is_empty() {
            v.exact.insert(n.clone(), None);
        }
    }
    for (suffix, s) in &names.wildcard_front {
        if mine(s) {
            v.front.push((suffix.clone(), false, None));
        }
    }
    for (prefix, s) in &names.wildcard_back {
        if mine(s) {
            v.back.push((prefix.clone(), None));
        }
    }
    for (re, s) in &names.regex {
        if mine(s) {
            v.regex.push(re.clone());
        }
    }
    v
}

/// Which entry names `host`: exact, the most specific leading wildcard,
/// the most specific trailing one. Some(uri part) when one does.
fn find_name<'v>(v: &'v ValidReferers, host: &str) -> Option<&'v Option<String>> {
    if let Some(u) = v.exact.get(host) {
        return Some(u);
    }
    for (suffix, bare, uri) in &v.front {
        if (host.len() > suffix.len() && host.ends_with(suffix.as_str())) || (*bare && host == &suffix[1..]) {
            return Some(uri);
        }
    }
    for (prefix, uri) in &v.back {
        if host.len() > prefix.len() && host.starts_with(prefix.as_str()) {
            return Some(uri);
        }
    }
    None
}

/// nginx's ngx_http_referer_variable, true for a valid Referer.
fn valid(v: &ValidReferers, referer: Option<&[u8]>, servers: impl FnOnce() -> ValidReferers) -> bool {
    if v.exact.is_empty() && v.front.is_empty() && v.back.is_empty() && v.regex.is_empty() && !v.server_names {
        return true;
    }
    let Some(r) = referer else { return v.none };
    let rest = if r.len() >= "http://i.ru".len() {
        if r[..7].eq_ignore_ascii_case(b"http://") {
            Some(&r[7..])
        } else if r[..8].eq_ignore_ascii_case(b"https://") {
            Some(&r[8..])
        } else {
            None
        }
    } else {
        None
    };
    let Some(rest) = rest else { return v.blocked };
    let host_end = rest.iter().position(|&c| c == b'/' || c == b':').unwrap_or(rest.len());
    if host_end > 256 {
        return false;
    }
    let host = String::from_utf8_lossy(&rest[..host_end]).to_ascii_lowercase();
    if let Some(uri) = find_name(v, &host) {
        let Some(uri) = uri else { return true };
        let path = &rest[host_end..];
        let path = &path[path.iter().position(|&c| c == b'/').unwrap_or(path.len())..];
        return path.starts_with(uri.as_bytes());
    }
    if v.server_names {
        let s = servers();
        if find_name(&s, &host).is_some() || s.regex.iter().any(|re| re.is_match(host.as_bytes())) {
            return true;
        }
    }
    v.regex.iter().any(|re| re.is_match(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[&str]) -> ValidReferers {
        let mut v = ValidReferers::default();
        for t in items {
            match *t {
                "none" => v.none = true,
                "blocked" => v.blocked = true,
                _ if t.starts_with('~') => v.regex.push(Arc::new(Regex::new(&t[1..], true).unwrap())),
                _ => {
                    let (h, u) = match t.find('/') {
                        Some(i) => (&t[..i], Some(t[i..].to_string())),
                        None => (*t, None),
                    };
                    add_name(&mut v, h, u).unwrap();
                }
            }
        }
        v
    }

    fn ok(v: &ValidReferers, r: Option<&str>) -> bool {
        valid(v, r.map(str::as_bytes), ValidReferers::default)
    }

    #[test]
    fn nginx_examples() {
        let v = list(&[
            "none",
            "blocked",
            "server.example.com",
            "*.example.org",
            "example.net/galleries/",
            "~\\.google\\.",
        ]);
        assert!(ok(&v, None));
        assert!(ok(&v, Some("bookmark")));
        assert!(ok(&v, Some("http://server.example.com/x")));
        assert!(ok(&v, Some("HTTPS://SERVER.example.com:8443/x")));
        assert!(ok(&v, Some("http://a.b.example.org/")));
        assert!(!ok(&v, Some("http://example.org/")));
        assert!(ok(&v, Some("http://example.net/galleries/1.jpg")));
        assert!(!ok(&v, Some("http://example.net/other/")));
        assert!(ok(&v, Some("https://www.google.com/search")));
        assert!(!ok(&v, Some("http://evil.example.com/")));
        let strict = list(&["example.com", ".example.org", "www.example.*"]);
        assert!(!ok(&strict, None));
        assert!(!ok(&strict, Some("http://a.b")), "shorter than http://i.ru");
        assert!(ok(&strict, Some("http://example.org/")));
        assert!(ok(&strict, Some("http://x.example.org/")));
        assert!(ok(&strict, Some("http://www.example.co.uk/")));
        assert!(!ok(&strict, Some("http://www.example/")));
        assert!(!ok(&strict, Some(&format!("http://{}.example.com/", "a".repeat(300)))));
    }

    #[test]
    fn names_are_checked() {
        let mut v = ValidReferers::default();
        assert_eq!(add_name(&mut v, "a*b.com", None), Err("invalid hostname or wildcard"));
        add_name(&mut v, "a.com", None).unwrap();
        assert_eq!(add_name(&mut v, "A.com", Some("/x".into())), Err("conflicting parameter"));
    }
}
