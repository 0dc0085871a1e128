//! `location` blocks: modifier parsing and nginx's nesting rules, producing
//! the per-level tables the router searches (exact, prefix longest-first,
//! regex in order, named).

use std::collections::HashMap;
use std::sync::Arc;

use super::build::{Ctx, apply_location_level, inherit};
use super::model::{LocConf, Location, Locations, MainConf, Matcher};
use super::parser::{ConfError, Directive};
use super::table::Cmd;

fn describe(m: &Matcher) -> String {
    match m {
        Matcher::Exact(p) | Matcher::Prefix { path: p, .. } => String::from_utf8_lossy(p).into_owned(),
        Matcher::Regex(r) => r.as_str().to_string(),
        Matcher::Named(n) => format!("@{n}"),
    }
}

fn regex(d: &Directive, pat: &str, caseless: bool) -> Result<Matcher, ConfError> {
    let re = crate::pattern::Regex::new(pat, caseless).map_err(|e| ConfError::at(e, &d.span))?;
    super::captures::register(&re);
    Ok(Matcher::Regex(re))
}

/// nginx's `ngx_http_core_location` argument forms.
fn parse_matcher(d: &Directive) -> Result<Matcher, ConfError> {
    let a = |i: usize| d.args.get(i).map(|w| w.text.as_str()).unwrap_or("");
    if d.args.len() == 2 {
        let (m, name) = (a(0), a(1));
        return match m {
            "=" => Ok(Matcher::Exact(name.as_bytes().to_vec())),
            "^~" => Ok(Matcher::Prefix { path: name.as_bytes().to_vec(), noregex: true }),
            "~" => regex(d, name, false),
            "~*" => regex(d, name, true),
            _ => Err(ConfError::at(format!("invalid location modifier \"{}\"", m), &d.span)),
        };
    }
    let name = a(0);
    if let Some(rest) = name.strip_prefix('=') {
        Ok(Matcher::Exact(rest.as_bytes().to_vec()))
    } else if let Some(rest) = name.strip_prefix("~*") {
        regex(d, rest, true)
    } else if let Some(rest) = name.strip_prefix('~') {
        regex(d, rest, false)
    } else if let Some(rest) = name.strip_prefix("^~") {
        Ok(Matcher::Prefix { path: rest.as_bytes().to_vec(), noregex: true })
    } else if let Some(rest) = name.strip_prefix('@') {
        Ok(Matcher::Named(rest.to_string()))
    } else {
        Ok(Matcher::Prefix { path: name.as_bytes().to_vec(), noregex: false })
    }
}

pub type Named = HashMap<String, Arc<Location>>;

/// Builds the locations among `children` (other block kinds are errors at
/// this point) under a parent level.
pub fn build_all(
    children: &[(&'static Cmd, &Directive)],
    parent: &LocConf,
    parent_matcher: Option<&Matcher>,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<(Locations, Named), ConfError> {
    let mut locs = Locations::default();
    let mut named = Named::new();
    for (_, d) in children {
        let matcher = parse_matcher(d)?;
        if let Some(pm) = parent_matcher {
            match pm {
                Matcher::Exact(_) => {
                    return Err(ConfError::at(
                        format!(
                            "location \"{}\" cannot be inside the exact location \"{}\"",
                            describe(&matcher),
                            describe(pm)
                        ),
                        &d.span,
                    ));
                }
                Matcher::Named(_) => {
                    return Err(ConfError::at(
                        format!(
                            "location \"{}\" cannot be inside the named location \"{}\"",
                            describe(&matcher),
                            describe(pm)
                        ),
                        &d.span,
                    ));
                }
                Matcher::Prefix { path: pp, .. } => {
                    if let Matcher::Exact(p) | Matcher::Prefix { path: p, .. } = &matcher
                        && !p.starts_with(pp)
                    {
                        return Err(ConfError::at(
                            format!("location \"{}\" is outside location \"{}\"", describe(&matcher), describe(pm)),
                            &d.span,
                        ));
                    }
                }
                Matcher::Regex(_) => {}
            }
            if matches!(matcher, Matcher::Named(_)) {
                return Err(ConfError::at(
                    format!("named location \"{}\" can be on the server level only", describe(&matcher)),
                    &d.span,
                ));
            }
        }
        let dup = match &matcher {
            Matcher::Exact(p) => locs.exact.iter().any(|l| matches!(&l.matcher, Matcher::Exact(q) if q == p)),
            Matcher::Prefix { path: p, .. } => {
                locs.prefix.iter().any(|l| matches!(&l.matcher, Matcher::Prefix { path: q, .. } if q == p))
            }
            Matcher::Named(n) => named.contains_key(n),
            Matcher::Regex(_) => false,
        };
        if dup {
            return Err(ConfError::at(format!("duplicate location \"{}\"", describe(&matcher)), &d.span));
        }
        let loc = Arc::new(build_one(d, matcher, parent, ctx, main)?);
        match &loc.matcher {
            Matcher::Exact(_) => locs.exact.push(loc),
            Matcher::Prefix { .. } => locs.prefix.push(loc),
            Matcher::Regex(_) => locs.regex.push(loc),
            Matcher::Named(n) => {
                named.insert(n.clone(), loc.clone());
            }
        }
    }
    // Longest first; a stable sort keeps equal lengths in config order.
    locs.prefix.sort_by_key(|l| match &l.matcher {
        Matcher::Prefix { path, .. } => std::cmp::Reverse(path.len()),
        _ => std::cmp::Reverse(0),
    });
    Ok((locs, named))
}

fn build_one(
    d: &Directive,
    matcher: Matcher,
    parent: &LocConf,
    ctx: &mut Ctx,
    main: &mut MainConf,
) -> Result<Location, ConfError> {
    let mut conf = inherit(parent);
    let saved = (ctx.root_here, ctx.alias_here, ctx.in_regex_location, ctx.location_len);
    ctx.root_here = false;
    ctx.alias_here = false;
    ctx.in_regex_location = matches!(matcher, Matcher::Regex(_));
    ctx.location_len = match &matcher {
        Matcher::Exact(p) | Matcher::Prefix { path: p, .. } => p.len(),
        _ => 0,
    };
    conf.location_name = Arc::from(describe(&matcher));
    let dirs = d.block.as_deref().unwrap_or(&[]);
    let mut children = apply_location_level(dirs, ctx, main, &mut conf)?;
    super::upstream_ssl::check_client_certificate(&conf, &d.span)?;
    conf.rewrite.script = crate::http::rewrite::compile::level(dirs, true, &conf, ctx, main)?;
    // limit_except: built on the location's complete settings.
    if let Some(i) = children.iter().position(|(c, _)| c.name == "limit_except") {
        let (_, le) = children.remove(i);
        if let Some((_, dup)) = children.iter().find(|(c, _)| c.name == "limit_except") {
            return Err(ConfError::at("\"limit_except\" directive is duplicate", &dup.span));
        }
        conf.limit_except = Some(super::limit_except::build(le, &conf, ctx, main)?);
    }
    let (children, named) = build_all(&children, &conf, Some(&matcher), ctx, main)?;
    debug_assert!(named.is_empty());
    (ctx.root_here, ctx.alias_here, ctx.in_regex_location, ctx.location_len) = saved;
    Ok(Location { matcher, conf: Arc::new(conf), children })
}
