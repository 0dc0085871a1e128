//! Virtual server names, shared by the families that pick a server per
//! connection or request by name: HTTP by Host (and SNI), stream by SNI
//! or the preread ClientHello (nginx 1.25.5's stream `server_name`). The
//! tables keep nginx's selection order: exact name, longest leading
//! wildcard, longest trailing wildcard, first matching regex; a miss is
//! the listening address's default server, which the caller holds.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use super::parser::{ConfError, Directive};
use crate::pattern::Regex;

/// One address's names, each with the server it selects (`S`: the
/// family's server handle).
pub struct ServerNames<S> {
    pub exact: HashMap<String, S>,
    /// `*.example.com` stored as `.example.com`, longest first.
    pub wildcard_front: Vec<(String, S)>,
    /// `www.example.*` stored as `www.example.`, longest first.
    pub wildcard_back: Vec<(String, S)>,
    pub regex: Vec<(Arc<Regex>, S)>,
}

impl<S> Default for ServerNames<S> {
    fn default() -> Self {
        ServerNames { exact: HashMap::new(), wildcard_front: Vec::new(), wildcard_back: Vec::new(), regex: Vec::new() }
    }
}

impl<S: Clone> ServerNames<S> {
    /// Adds a name as `server_name` parsed it (lowercase; `.x`, `*.x`,
    /// `x.*`). An exact name already taken keeps its first server: false
    /// then, for nginx's "conflicting server name" warning.
    pub fn add(&mut self, n: &str, server: &S) -> bool {
        if let Some(rest) = n.strip_prefix('.') {
            // ".example.com" is both "example.com" and "*.example.com".
            self.exact.entry(rest.to_string()).or_insert_with(|| server.clone());
            self.wildcard_front.push((n.to_string(), server.clone()));
        } else if let Some(rest) = n.strip_prefix('*') {
            self.wildcard_front.push((rest.to_string(), server.clone()));
        } else if let Some(rest) = n.strip_suffix('*') {
            self.wildcard_back.push((rest.to_string(), server.clone()));
        } else {
            if self.exact.contains_key(n) {
                return false;
            }
            self.exact.insert(n.to_string(), server.clone());
        }
        true
    }

    pub fn add_regex(&mut self, re: &Arc<Regex>, server: &S) {
        self.regex.push((re.clone(), server.clone()));
    }

    /// Longest wildcards first: call once every name is in.
    pub fn sort(&mut self) {
        self.wildcard_front.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        self.wildcard_back.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    }

    /// How many names there are (a single "" means nothing to pick).
    pub fn len_hint(&self) -> usize {
        self.exact.len() + self.wildcard_front.len() + self.wildcard_back.len() + self.regex.len()
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty()
            && self.wildcard_front.is_empty()
            && self.wildcard_back.is_empty()
            && self.regex.is_empty()
    }
}

impl<S> ServerNames<S> {
    /// The server a (validated, lowercase) host selects, with the regex
    /// that matched when it was one (for its named captures); None: the
    /// address's default server.
    pub fn find(&self, host: &[u8]) -> Option<(&S, Option<&Arc<Regex>>)> {
        if host.is_empty() {
            return self.exact.get("").map(|s| (s, None));
        }
        // A few names (the usual case): comparing bytes beats checking
        // UTF-8 and hashing the host.
        if self.exact.len() <= 8 {
            if let Some((_, s)) = self.exact.iter().find(|(k, _)| k.as_bytes() == host) {
                return Some((s, None));
            }
            if self.wildcard_front.is_empty() && self.wildcard_back.is_empty() && self.regex.is_empty() {
                return None;
            }
        }
        let h = std::str::from_utf8(host).ok()?;
        if let Some(s) = self.exact.get(h) {
            return Some((s, None));
        }
        for (suffix, s) in &self.wildcard_front {
            if h.len() > suffix.len() && h.ends_with(suffix.as_str()) {
                return Some((s, None));
            }
        }
        for (prefix, s) in &self.wildcard_back {
            if h.len() > prefix.len() && h.starts_with(prefix.as_str()) {
                return Some((s, None));
            }
        }
        self.regex.iter().find(|(re, _)| re.is_match(h.as_bytes())).map(|(re, s)| (s, Some(re)))
    }
}

/// `server_name NAME ...`: plain and wildcard names (lowercased) into
/// `names`, `~regex` names (caseless, their captures declared) into
/// `regex`, with nginx's "invalid server name or wildcard". `first` gets
/// `$server_name` when it has none yet: the server's first name as nginx
/// keeps it, a regex as written (with its `~`), a plain name lowercased
/// and without a leading `.`.
pub fn parse(
    d: &Directive,
    names: &mut Vec<String>,
    regex: &mut Vec<Arc<Regex>>,
    first: &mut Option<String>,
) -> Result<(), ConfError> {
    if first.is_none()
        && let Some(w) = d.args.first()
    {
        let n = w.text.as_str();
        *first = Some(if n.starts_with('~') {
            n.to_string()
        } else {
            n.strip_prefix('.').unwrap_or(n).to_ascii_lowercase()
        });
    }
    for w in &d.args {
        let n = &w.text;
        if let Some(pat) = n.strip_prefix('~') {
            // nginx compiles server_name regexes caseless.
            let re = Regex::new(pat, true).map_err(|e| ConfError::at(e, &d.span))?;
            super::captures::register(&re);
            regex.push(Arc::new(re));
            continue;
        }
        let lower = n.to_ascii_lowercase();
        let stars = lower.matches('*').count();
        let ok_star =
            stars == 0 || (stars == 1 && (lower.starts_with("*.") || lower.ends_with(".*")) && lower.len() > 2);
        if !ok_star || lower.contains('/') {
            return Err(ConfError::at(format!("invalid server name or wildcard \"{}\"", n), &d.span));
        }
        names.push(lower);
    }
    Ok(())
}

/// nginx's `ngx_http_validate_host` (and stream's copy of it): lowercases,
/// drops the port and a trailing dot, and refuses what could escape a path
/// (`..`, `/`, NUL).
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
