//! `proxy_cookie_domain`, `proxy_cookie_path` and `proxy_cookie_flags`:
//! the origin's `Set-Cookie` headers rewritten for the address clients
//! use, as nginx 1.22 rewrites them (each case compared with its output):
//!
//! * A cookie is split at `;` into `name[=value]` parts, trimmed of
//!   spaces. The `Domain` and `Path` attributes (names in any case) go
//!   through the location's rules, the first that matches winning.
//!   Domains: a leading dot is ignored on both sides and kept in the
//!   result; a plain rule matches the whole value in any case, a `~regex`
//!   (always caseless) replaces the whole value. Paths: a plain rule
//!   replaces a matching prefix (case matters), `~` / `~*` regexes replace
//!   the whole value. Patterns and replacements may hold variables; a
//!   regex's captures are `$1`...
//! * The first `proxy_cookie_flags` whose cookie (a name in any case, or a
//!   caseless `~regex`) matches sets its flags: `secure`, `httponly`,
//!   `samesite=strict|lax|none` are added if missing (in that order) or,
//!   for samesite, replaced when different; `nosecure`, `nohttponly`,
//!   `nosamesite` remove them; the flags may come from variables and
//!   unknown ones are ignored. With both `secure` and `nosecure`, secure
//!   wins.
//! * A cookie that a rule changed (or a flags rule matched) is written
//!   back normalized (`; ` between parts); any other is left byte for byte.

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::R;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::pattern::Regex;
use crate::variables::Template;

#[derive(Clone, Debug)]
enum Match {
    Plain(Template),
    Regex(Arc<Regex>),
}

#[derive(Clone, Debug)]
pub struct Rewrite {
    pattern: Match,
    to: Template,
}

#[derive(Clone, Debug)]
pub struct FlagRule {
    cookie: Match,
    flags: Vec<Template>,
}

/// One level's rules: empty lists and no `off` when not set.
#[derive(Clone, Debug, Default)]
pub struct CookieConf {
    domains: Arc<Vec<Rewrite>>,
    paths: Arc<Vec<Rewrite>>,
    flags: Arc<Vec<FlagRule>>,
    /// `off` given at this level (a rule beside it is nginx's duplicate).
    off: [bool; 3],
}

impl CookieConf {
    pub fn active(&self) -> bool {
        !(self.domains.is_empty() && self.paths.is_empty() && self.flags.is_empty())
    }
}

fn template(d: &Directive, s: &str) -> Result<Template, ConfError> {
    Template::compile(s).map_err(|e| ConfError::at(e, &d.span))
}

fn regex(d: &Directive, s: &str, caseless: bool) -> Result<Match, ConfError> {
    let re = Regex::new(s, caseless).map_err(|e| ConfError::at(e, &d.span))?;
    crate::config::captures::register(&re);
    Ok(Match::Regex(Arc::new(re)))
}

/// `off` or a rule at this level (the table resets the level's lists at
/// its first directive of each kind, so the list in hand is the level's
/// own and `make_mut` never copies): `off` beside a rule is nginx's
/// "is duplicate".
fn level<T: Clone>(d: &Directive, off: &mut bool, list: &mut Arc<Vec<T>>, rule: Option<T>) -> R {
    let duplicate = || ConfError::at(format!("\"{}\" directive is duplicate", d.name), &d.span);
    match rule {
        None if !list.is_empty() || *off => Err(duplicate()),
        None => {
            *off = true;
            Ok(())
        }
        Some(_) if *off => Err(duplicate()),
        Some(r) => {
            Arc::make_mut(list).push(r);
            Ok(())
        }
    }
}

fn rewrite_rule(d: &Directive, path: bool) -> Result<Option<Rewrite>, ConfError> {
    let from = d.args[0].text.as_str();
    let Some(to) = d.args.get(1) else {
        return if from == "off" {
            Ok(None)
        } else {
            Err(ConfError::at(format!("invalid parameter \"{from}\""), &d.span))
        };
    };
    let pattern = match (from.strip_prefix("~*"), from.strip_prefix('~')) {
        (Some(re), _) if path => regex(d, re, true)?,
        (_, Some(re)) => regex(d, re, !path)?,
        _ if path => Match::Plain(template(d, from)?),
        _ => Match::Plain(template(d, from.strip_prefix('.').unwrap_or(from))?),
    };
    let to = to.text.as_str();
    let to = if path { to } else { to.strip_prefix('.').unwrap_or(to) };
    Ok(Some(Rewrite { pattern, to: template(d, to)? }))
}

pub fn reset_domain(c: &mut LocConf) {
    c.proxy.cookie.domains = Arc::new(Vec::new());
    c.proxy.cookie.off[0] = false;
}

pub fn reset_path(c: &mut LocConf) {
    c.proxy.cookie.paths = Arc::new(Vec::new());
    c.proxy.cookie.off[1] = false;
}

pub fn reset_flags(c: &mut LocConf) {
    c.proxy.cookie.flags = Arc::new(Vec::new());
    c.proxy.cookie.off[2] = false;
}

pub fn proxy_cookie_domain(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let rule = rewrite_rule(d, false)?;
    let k = &mut c.proxy.cookie;
    level(d, &mut k.off[0], &mut k.domains, rule)
}

pub fn proxy_cookie_path(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let rule = rewrite_rule(d, true)?;
    let k = &mut c.proxy.cookie;
    level(d, &mut k.off[1], &mut k.paths, rule)
}

pub fn proxy_cookie_flags(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let first = d.args[0].text.as_str();
    let rule = if d.args.len() == 1 {
        if first != "off" {
            return Err(ConfError::at(format!("invalid parameter \"{first}\""), &d.span));
        }
        None
    } else if first == "off" {
        // nginx takes `off` with flags as its whole value: no rule.
        None
    } else {
        let cookie = match first.strip_prefix('~') {
            Some(re) => regex(d, re, true)?,
            None => Match::Plain(template(d, first)?),
        };
        let flags = d.args[1..].iter().map(|w| template(d, &w.text)).collect::<Result<_, _>>()?;
        Some(FlagRule { cookie, flags })
    };
    let k = &mut c.proxy.cookie;
    level(d, &mut k.off[2], &mut k.flags, rule)
}

/// One `Set-Cookie` value as the location's rules want it; None leaves
/// it as the origin sent it.
pub fn rewrite(ctx: &mut ReqCtx<'_, '_>, v: &[u8]) -> Option<Vec<u8>> {
    let conf = ctx.conf.proxy.cookie.clone();
    let mut parts = split(v);
    let mut changed = false;
    for (name, value) in parts.iter_mut().skip(1) {
        let Some(val) = value.as_mut() else { continue };
        let new = if name.eq_ignore_ascii_case(b"domain") {
            conf.domains.iter().find_map(|r| domain(ctx, r, val))
        } else if name.eq_ignore_ascii_case(b"path") {
            conf.paths.iter().find_map(|r| path(ctx, r, val))
        } else {
            None
        };
        if let Some(n) = new {
            *val = n;
            changed = true;
        }
    }
    let cookie = parts.first().map(|(n, _)| n.clone()).unwrap_or_default();
    if let Some(rule) = conf.flags.iter().find(|r| matches(ctx, &r.cookie, &cookie)) {
        apply_flags(&flags(ctx, rule), &mut parts);
        changed = true;
    }
    changed.then(|| join(&parts))
}

/// A cookie's `name[=value]` parts, each trimmed of blanks; the first is
/// the cookie itself.
type Parts = Vec<(Vec<u8>, Option<Vec<u8>>)>;

fn split(v: &[u8]) -> Parts {
    v.split(|&b| b == b';')
        .map(trim)
        .filter(|p| !p.is_empty())
        .map(|p| match p.iter().position(|&b| b == b'=') {
            Some(i) => (trim(&p[..i]).to_vec(), Some(trim(&p[i + 1..]).to_vec())),
            None => (p.to_vec(), None),
        })
        .collect()
}

fn join(parts: &Parts) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (name, value)) in parts.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b"; ");
        }
        out.extend_from_slice(name);
        if let Some(val) = value {
            out.push(b'=');
            out.extend_from_slice(val);
        }
    }
    out
}

fn trim(s: &[u8]) -> &[u8] {
    let s = &s[s.iter().take_while(|b| matches!(b, b' ' | b'\t')).count()..];
    &s[..s.len() - s.iter().rev().take_while(|b| matches!(b, b' ' | b'\t')).count()]
}

fn render(ctx: &ReqCtx<'_, '_>, t: &Template) -> Vec<u8> {
    t.render_to_vec(&Vars::request(ctx))
}

/// A regex match sets the captures the replacement reads, as nginx's.
fn regex_replace(ctx: &mut ReqCtx<'_, '_>, re: &Regex, val: &[u8], to: &Template) -> Option<Vec<u8>> {
    ctx.captures = re.capture_values(val)?;
    Some(render(ctx, to))
}

fn domain(ctx: &mut ReqCtx<'_, '_>, r: &Rewrite, val: &[u8]) -> Option<Vec<u8>> {
    match &r.pattern {
        Match::Regex(re) => regex_replace(ctx, re, val, &r.to),
        Match::Plain(p) => {
            let (dot, rest) = match val.strip_prefix(b".") {
                Some(rest) => (&b"."[..], rest),
                None => (&b""[..], val),
            };
            let want = render(ctx, p);
            let want = want.strip_prefix(b".").unwrap_or(&want);
            if !rest.eq_ignore_ascii_case(want) {
                return None;
            }
            let to = render(ctx, &r.to);
            Some([dot, to.strip_prefix(b".").unwrap_or(&to)].concat())
        }
    }
}

fn path(ctx: &mut ReqCtx<'_, '_>, r: &Rewrite, val: &[u8]) -> Option<Vec<u8>> {
    match &r.pattern {
        Match::Regex(re) => regex_replace(ctx, re, val, &r.to),
        Match::Plain(p) => {
            let rest = val.strip_prefix(&render(ctx, p)[..])?;
            Some([&render(ctx, &r.to)[..], rest].concat())
        }
    }
}

fn matches(ctx: &ReqCtx<'_, '_>, m: &Match, cookie: &[u8]) -> bool {
    match m {
        Match::Regex(re) => re.is_match(cookie),
        Match::Plain(t) => render(ctx, t).eq_ignore_ascii_case(cookie),
    }
}

/// What a flags rule asks for: `secure` and `httponly` Some(true) to
/// add, Some(false) to remove; `samesite` Some(Some(value)) to set,
/// Some(None) to remove.
#[derive(Clone, Copy, Debug, Default)]
struct Flags {
    secure: Option<bool>,
    httponly: Option<bool>,
    samesite: Option<Option<&'static str>>,
}

fn flags(ctx: &ReqCtx<'_, '_>, rule: &FlagRule) -> Flags {
    let mut f = Flags::default();
    for t in &rule.flags {
        match &render(ctx, t).to_ascii_lowercase()[..] {
            b"secure" => f.secure = Some(true),
            b"nosecure" if f.secure != Some(true) => f.secure = Some(false),
            b"httponly" => f.httponly = Some(true),
            b"nohttponly" if f.httponly != Some(true) => f.httponly = Some(false),
            b"samesite=strict" => f.samesite = Some(Some("Strict")),
            b"samesite=lax" => f.samesite = Some(Some("Lax")),
            b"samesite=none" => f.samesite = Some(Some("None")),
            b"nosamesite" if f.samesite.is_none() => f.samesite = Some(None),
            _ => {}
        }
    }
    f
}

/// The flags on the cookie's parts (the first, the cookie, untouched).
fn apply_flags(f: &Flags, parts: &mut Parts) {
    if parts.is_empty() {
        return;
    }
    let Flags { secure, httponly, samesite } = *f;
    let is = |name: &[u8], flag: &str| name.eq_ignore_ascii_case(flag.as_bytes());
    let mut i = 1;
    let (mut has_secure, mut has_httponly, mut has_samesite) = (false, false, false);
    while i < parts.len() {
        let (name, value) = &mut parts[i];
        let remove = if is(name, "secure") {
            has_secure = true;
            secure == Some(false)
        } else if is(name, "httponly") {
            has_httponly = true;
            httponly == Some(false)
        } else if is(name, "samesite") {
            has_samesite = true;
            match samesite {
                Some(None) => true,
                Some(Some(want)) => {
                    if !value.as_deref().is_some_and(|v| v.eq_ignore_ascii_case(want.as_bytes())) {
                        *name = b"SameSite".to_vec();
                        *value = Some(want.as_bytes().to_vec());
                    }
                    false
                }
                None => false,
            }
        } else {
            false
        };
        if remove {
            parts.remove(i);
        } else {
            i += 1;
        }
    }
    if secure == Some(true) && !has_secure {
        parts.push((b"Secure".to_vec(), None));
    }
    if httponly == Some(true) && !has_httponly {
        parts.push((b"HttpOnly".to_vec(), None));
    }
    if let Some(Some(want)) = samesite
        && !has_samesite
    {
        parts.push((b"SameSite".to_vec(), Some(want.as_bytes().to_vec())));
    }
}

/// For the `head_scan` fuzz target (Set-Cookie values come from origins):
/// splitting and joining reach a fixed point after one round, and flags
/// taken from the first byte leave exactly what they ask for.
pub fn fuzz(data: &[u8]) {
    let once = join(&split(data));
    assert_eq!(join(&split(&once)), once);
    let Some((&first, rest)) = data.split_first() else { return };
    let pick = |bits: u8| match bits & 3 {
        1 => Some(true),
        2 => Some(false),
        _ => None,
    };
    let f = Flags {
        secure: pick(first),
        httponly: pick(first >> 2),
        samesite: match (first >> 4) & 7 {
            1 => Some(Some("Strict")),
            2 => Some(Some("Lax")),
            3 => Some(None),
            _ => None,
        },
    };
    let mut parts = split(rest);
    let cookie = parts.first().cloned();
    apply_flags(&f, &mut parts);
    assert_eq!(parts.first(), cookie.as_ref(), "the cookie itself is never changed");
    let count = |name: &str| parts.iter().skip(1).filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).count();
    if !parts.is_empty() {
        match f.secure {
            Some(true) => assert!(count("secure") >= 1),
            Some(false) => assert_eq!(count("secure"), 0),
            None => {}
        }
        if f.samesite == Some(None) {
            assert_eq!(count("samesite"), 0);
        }
    }
}
