//! `proxy_redirect`: the origin's `Location` and `Refresh` headers
//! rewritten for the address clients use, as nginx rewrites them:
//!
//! * The location's rules are tried in order; the first that matches
//!   wins. A plain rule replaces a matching prefix (case matters); a
//!   `~regex` (`~*` caseless) that matches anywhere replaces the whole
//!   value, its captures readable as `$1`... in the replacement. Both
//!   sides may hold variables.
//! * `default` (also what a location without `proxy_redirect` does) maps
//!   the `proxy_pass` URL to the location's own prefix.
//! * In `Refresh`, only what follows `url=` is rewritten, and it stays as
//!   rewritten; a rewritten `Location` that starts with `/` is sent
//!   absolute (`absolute_redirect`), as nginx's own redirects are.
//! * `off` stops rewriting; rules after `off` at the same level are
//!   ignored, `off` after a rule is nginx's "is duplicate". A level's
//!   rules replace the inherited ones.

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::Pass;
use crate::config::table::R;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::pattern::Regex;
use crate::variables::Template;

use crate::config::proxy::ProxyPass;

/// One `proxy_redirect FROM TO` (or `default`).
#[derive(Clone, Debug)]
pub enum Rule {
    /// `default`: the `proxy_pass` URL to the location's prefix.
    Default,
    Prefix(Template, Template),
    Regex(Arc<Regex>, Template),
}

/// A level's `proxy_redirect`.
#[derive(Clone, Debug, Default)]
pub enum Redirect {
    /// No `proxy_redirect` anywhere above: `default`.
    #[default]
    Implicit,
    Off,
    Rules(Arc<Vec<Rule>>),
}

/// The table calls this at a level's first `proxy_redirect`: the level's
/// rules replace what it inherited.
pub fn reset(c: &mut LocConf) {
    c.proxy.redirect = Redirect::Rules(Arc::new(Vec::new()));
}

pub fn proxy_redirect(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let first = d.args[0].text.as_str();
    let rule = match (d.args.get(1), first) {
        (None, "off") => {
            if matches!(&c.proxy.redirect, Redirect::Rules(r) if !r.is_empty()) {
                return Err(ConfError::at("\"proxy_redirect\" directive is duplicate", &d.span));
            }
            c.proxy.redirect = Redirect::Off;
            return Ok(());
        }
        (None, "default") => {
            match &c.proxy.pass {
                None => {
                    return Err(ConfError::at(
                        "\"proxy_redirect default\" should be placed after the \"proxy_pass\" directive",
                        &d.span,
                    ));
                }
                Some(p) if has_variables(p) => {
                    return Err(ConfError::at(
                        "\"proxy_redirect default\" cannot be used with \"proxy_pass\" directive with variables",
                        &d.span,
                    ));
                }
                Some(_) => {}
            }
            Rule::Default
        }
        (None, other) => return Err(ConfError::at(format!("invalid parameter \"{other}\""), &d.span)),
        (Some(to), from) => {
            let to = template(d, &to.text)?;
            match (from.strip_prefix("~*"), from.strip_prefix('~')) {
                (Some(re), _) => Rule::Regex(regex(d, re, true)?, to),
                (_, Some(re)) => Rule::Regex(regex(d, re, false)?, to),
                _ => Rule::Prefix(template(d, from)?, to),
            }
        }
    };
    match &mut c.proxy.redirect {
        // nginx ignores rules that follow `off` at a level.
        Redirect::Off => {}
        Redirect::Rules(r) => Arc::make_mut(r).push(rule),
        other => *other = Redirect::Rules(Arc::new(vec![rule])),
    }
    Ok(())
}

fn has_variables(p: &Pass) -> bool {
    matches!(p, Pass::Vars(_))
}

fn template(d: &Directive, s: &str) -> Result<Template, ConfError> {
    Template::compile(s).map_err(|e| ConfError::at(e, &d.span))
}

fn regex(d: &Directive, s: &str, caseless: bool) -> Result<Arc<Regex>, ConfError> {
    let re = Regex::new(s, caseless).map_err(|e| ConfError::at(e, &d.span))?;
    crate::config::captures::register(&re);
    Ok(Arc::new(re))
}

/// The origin's `Location` as the client gets it; None leaves it alone.
pub fn location(ctx: &mut ReqCtx<'_, '_>, pass: &ProxyPass, v: &[u8]) -> Option<Vec<u8>> {
    let out = apply(ctx, pass, v)?;
    Some(crate::http::handler::ret::absolute_location(ctx, &out))
}

/// The origin's `Refresh` (`5; url=...`) with its URL rewritten; None
/// leaves it alone.
pub fn refresh(ctx: &mut ReqCtx<'_, '_>, pass: &ProxyPass, v: &[u8]) -> Option<Vec<u8>> {
    let at = v.windows(4).position(|w| w.eq_ignore_ascii_case(b"url="))? + 4;
    let url = apply(ctx, pass, &v[at..])?;
    Some([&v[..at], &url[..]].concat())
}

/// The first matching rule's result for `v`.
fn apply(ctx: &mut ReqCtx<'_, '_>, pass: &ProxyPass, v: &[u8]) -> Option<Vec<u8>> {
    let rules = match &ctx.conf.proxy.redirect {
        Redirect::Off => return None,
        Redirect::Implicit => return default(ctx, pass, v),
        Redirect::Rules(r) => r.clone(),
    };
    rules.iter().find_map(|r| match r {
        Rule::Default => default(ctx, pass, v),
        Rule::Prefix(from, to) => {
            let from = from.render_to_vec(&Vars::request(ctx));
            let rest = v.strip_prefix(&from[..])?;
            let mut out = to.render_to_vec(&Vars::request(ctx));
            out.extend_from_slice(rest);
            Some(out)
        }
        Rule::Regex(re, to) => {
            // The match's captures are what `$1`... read, as in nginx.
            ctx.captures = re.capture_values(v)?;
            Some(to.render_to_vec(&Vars::request(ctx)))
        }
    })
}

/// `default`: the proxied URL (the scheme and the origin's host, then
/// `proxy_pass`'s URI) to the prefix the client used; without a URI in
/// `proxy_pass`, the origin's root to `/`.
fn default(ctx: &ReqCtx<'_, '_>, pass: &ProxyPass, v: &[u8]) -> Option<Vec<u8>> {
    let scheme: &[u8] = if pass.tls { b"https://" } else { b"http://" };
    let rest = v.strip_prefix(scheme)?.strip_prefix(pass.proxy_host.as_bytes())?;
    let rest = rest.strip_prefix(pass.uri.as_deref().unwrap_or(b"/"))?;
    let mut out = match pass.uri {
        Some(_) => ctx.req.path[..pass.location_len.min(ctx.req.path.len())].to_vec(),
        None => b"/".to_vec(),
    };
    out.extend_from_slice(rest);
    Some(out)
}
