//! What SSI commands compute from their parameters: values with
//! variables in them (nginx's `ngx_http_ssi_evaluate_string`), the
//! `if` command's expressions (`ngx_http_ssi_if`: a value, `=`/`!=` a
//! string or a `/regex/`, `!` in front), and `echo`'s encodings.

use std::sync::Arc;

use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::variables::{Var, VarSource};

/// Where a command's variables come from: the SSI variables of the main
/// request, the captures of the last `if` regex, then the request's.
pub struct Scope<'s, 'c, 'a> {
    pub ctx: &'s ReqCtx<'c, 'a>,
    pub shared: &'s super::Shared,
    pub captures: &'s [Vec<u8>],
    pub named: &'s [(Arc<str>, Vec<u8>)],
    pub timefmt: &'s [u8],
}

impl Scope<'_, '_, '_> {
    /// The value of a variable: Ok(None) when it is not found (empty in a
    /// value, `default` for `echo`); Err for a name nginx does not know.
    pub fn lookup(&self, name: &[u8]) -> Result<Option<Vec<u8>>, String> {
        if !name.is_empty() && name.iter().all(u8::is_ascii_digit) {
            let n: usize = std::str::from_utf8(name).ok().and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
            return Ok(self.captures.get(n).cloned());
        }
        if let Some(v) = self.shared.get(name) {
            return Ok(Some(v));
        }
        let text = String::from_utf8_lossy(name);
        if let Some((_, v)) = self.named.iter().rev().find(|(n, _)| **n == *text) {
            return Ok(Some(v.clone()));
        }
        let lower = text.to_ascii_lowercase();
        // A `set` variable with a value in this request (else what the
        // name means otherwise, as nginx's).
        if let Some(&slot) = self.ctx.conf.ssi.slots.get(&lower)
            && let Some(Some(v)) = self.ctx.vars.borrow().get(slot)
        {
            return Ok(Some(v.clone()));
        }
        if (lower == "date_local" || lower == "date_gmt") && self.timefmt != super::TIMEFMT {
            let now = crate::clock::now_secs() as i64;
            let mut out = Vec::new();
            if lower == "date_gmt" {
                crate::http::date::strftime(self.timefmt, now, now, "GMT", 0, &mut out);
            } else {
                let (offset, zone) = crate::clock::local_zone(now);
                crate::http::date::strftime(self.timefmt, now, now + offset, &zone, offset, &mut out);
            }
            return Ok(Some(out));
        }
        // A name nginx does not know is a variable not found.
        let Some(var) = Var::from_name(&text) else { return Ok(None) };
        let vars = Vars::request(self.ctx);
        let mut out = Vec::new();
        vars.write_var(&var, &mut out);
        if out.is_empty() && !vars.empty_found(&var) && !var.empty_is_value() {
            return Ok(None);
        }
        Ok(Some(out))
    }

    /// A parameter's value with its variables (`$name`, `${name}`) put in
    /// and its backslash escapes read.
    pub fn evaluate(&self, text: &[u8]) -> Result<Vec<u8>, String> {
        // Most values (an include's URI) have no variable or escape.
        if memchr::memchr2(b'$', b'\\', text).is_none() {
            return Ok(text.to_vec());
        }
        let mut out = Vec::with_capacity(text.len());
        let mut i = 0;
        while i < text.len() {
            let ch = text[i];
            if ch == b'\\' {
                match text.get(i + 1) {
                    Some(&n) if matches!(n, b'\\' | b'\'' | b'"' | b'$') => out.push(n),
                    Some(&n) => out.extend_from_slice(&[b'\\', n]),
                    None => out.push(b'\\'),
                }
                i += 2;
                continue;
            }
            if ch != b'$' {
                out.push(ch);
                i += 1;
                continue;
            }
            let (name, next) = if text.get(i + 1) == Some(&b'{') {
                match text[i + 2..].iter().position(|&b| b == b'}') {
                    Some(end) => (&text[i + 2..i + 2 + end], i + 3 + end),
                    None => {
                        return Err(format!(
                            "the closing bracket in \"{}\" variable is missing",
                            String::from_utf8_lossy(&text[i + 2..])
                        ));
                    }
                }
            } else {
                let mut j = i + 1;
                while j < text.len() && (text[j].is_ascii_alphanumeric() || text[j] == b'_') {
                    j += 1;
                }
                (&text[i + 1..j], j)
            };
            if name.is_empty() {
                return Err(format!("invalid variable name in \"{}\"", String::from_utf8_lossy(text)));
            }
            if let Some(v) = self.lookup(name)? {
                out.extend_from_slice(&v);
            }
            i = next;
        }
        Ok(out)
    }
}

/// A regex's numbered groups and its named ones.
pub type Captures = (Vec<Vec<u8>>, Vec<(Arc<str>, Vec<u8>)>);

/// What an `if` expression decided, and the captures of a regex that
/// matched (to become `$1`.. and named variables).
pub struct Decision {
    pub truth: bool,
    pub captures: Option<Captures>,
}

/// Evaluates an `if`/`elif` expression: `[!] left [(= | !=) (right |
/// /regex/)]`, as nginx reads it.
pub fn condition(scope: &Scope<'_, '_, '_>, expr: &[u8]) -> Result<Decision, String> {
    let invalid = || format!("invalid expression in \"{}\"", String::from_utf8_lossy(expr));
    let mut p = 0;
    let last = expr.len();
    let skip = |p: &mut usize| {
        while *p < last && expr[*p] == b' ' {
            *p += 1;
        }
    };
    skip(&mut p);
    let mut negative = false;
    if p < last && expr[p] == b'!' {
        negative = true;
        p += 1;
        skip(&mut p);
    }
    let start = p;
    while p < last && expr[p] != b' ' {
        p += 1;
    }
    let left = scope.evaluate(&expr[start..p])?;
    skip(&mut p);
    if p == last {
        return Ok(Decision { truth: !left.is_empty() ^ negative, captures: None });
    }
    let mut not_equal = false;
    if p + 1 < last && expr[p] == b'!' {
        not_equal = true;
        p += 1;
    }
    if expr[p] != b'=' {
        return Err(invalid());
    }
    p += 1;
    skip(&mut p);
    let mut end = last;
    let regex = p + 1 < last && expr[p] == b'/';
    if regex {
        if expr[last - 1] != b'/' {
            return Err(invalid());
        }
        p += 1;
        end -= 1;
    }
    let right = scope.evaluate(&expr[p..end.max(p)])?;
    let mut captures = None;
    let matched = if regex {
        let pattern = String::from_utf8_lossy(&right);
        let re = crate::pattern::Regex::new(&pattern, false)?;
        match re.capture_values(&left) {
            Some(values) => {
                let named =
                    re.names().iter().map(|(i, n)| (n.clone(), values.get(*i).cloned().unwrap_or_default())).collect();
                captures = Some((values, named));
                true
            }
            None => false,
        }
    } else {
        left == right
    };
    Ok(Decision { truth: matched ^ not_equal ^ negative, captures })
}

/// `echo encoding="url"`: nginx's ngx_escape_uri with its HTML table
/// (space, `"`, `#`, `%`, `'`, `<`, `>`, controls and bytes above 0x7e).
pub fn escape_url(v: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in v {
        if b <= b' ' || b >= 0x7f || matches!(b, b'"' | b'#' | b'%' | b'\'' | b'<' | b'>') {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.push(b);
        }
    }
}

/// `echo encoding="entity"` (the default): nginx's ngx_escape_html.
pub fn escape_entity(v: &[u8], out: &mut Vec<u8>) {
    for &b in v {
        match b {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_nginxs() {
        let mut u = Vec::new();
        escape_url(b"<test> a&b", &mut u);
        assert_eq!(u, b"%3Ctest%3E%20a&b");
        let mut e = Vec::new();
        escape_entity(b"<a href=\"x\">&", &mut e);
        assert_eq!(e, b"&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}
