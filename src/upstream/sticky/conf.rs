//! The `sticky` directive inside an http `upstream` block, read as NGINX
//! Plus reads it:
//!
//! ```text
//! sticky cookie NAME [expires=TIME|max] [domain=DOMAIN] [httponly]
//!        [samesite=strict|lax|none|$var] [secure] [path=PATH];
//! sticky route $var ...;
//! sticky learn create=$var lookup=$var zone=NAME:SIZE [timeout=TIME]
//!        [header] [sync];
//! ```
//!
//! `create=` and `lookup=` may be repeated (the first non-empty value
//! counts). `sync` (sharing sessions with other nodes through
//! `zone_sync`) is refused: sluice has no `zone_sync`.

use super::{CookieConf, Expires, Learn, SameSite, Sticky};
use crate::config::parser::{ConfError, Directive};
use crate::config::value;
use crate::variables::Template;

fn at(d: &Directive, msg: impl Into<String>) -> ConfError {
    ConfError::at(msg.into(), &d.span)
}

fn invalid(d: &Directive, t: &str) -> ConfError {
    at(d, format!("invalid parameter \"{t}\""))
}

fn template(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| at(d, e))
}

/// Parses one `sticky` line. `zones` are the `sticky learn` zone names
/// the configuration declared so far (a name is one zone).
pub fn directive(d: &Directive, zones: &mut Vec<String>) -> Result<Sticky, ConfError> {
    let words: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
    let Some((&method, rest)) = words.split_first() else {
        return Err(at(d, "invalid number of arguments in \"sticky\" directive"));
    };
    match method {
        "cookie" => cookie(d, rest).map(Sticky::Cookie),
        "route" => {
            if rest.is_empty() {
                return Err(at(d, "invalid number of arguments in \"sticky\" directive"));
            }
            rest.iter().map(|t| template(d, t)).collect::<Result<_, _>>().map(Sticky::Route)
        }
        "learn" => learn(d, rest, zones).map(Sticky::Learn),
        other => Err(invalid(d, other)),
    }
}

fn cookie(d: &Directive, rest: &[&str]) -> Result<CookieConf, ConfError> {
    let Some((&name, params)) = rest.split_first() else {
        return Err(at(d, "invalid number of arguments in \"sticky\" directive"));
    };
    if name.is_empty() || name.bytes().any(|b| b <= b' ' || b"=;,\"".contains(&b) || b >= 0x7f) {
        return Err(at(d, format!("invalid cookie name \"{name}\"")));
    }
    let mut c = CookieConf {
        name: name.to_string(),
        expires: None,
        domain: None,
        path: None,
        httponly: false,
        secure: false,
        samesite: None,
    };
    for &t in params {
        if let Some(v) = t.strip_prefix("expires=") {
            c.expires = Some(if v == "max" {
                Expires::Max
            } else {
                Expires::Secs(value::parse_time(v).ok_or_else(|| invalid(d, t))?.as_secs())
            });
        } else if let Some(v) = t.strip_prefix("domain=") {
            if v.is_empty() {
                return Err(invalid(d, t));
            }
            c.domain = Some(template(d, v)?);
        } else if let Some(v) = t.strip_prefix("path=") {
            if v.is_empty() {
                return Err(invalid(d, t));
            }
            c.path = Some(v.to_string());
        } else if t == "httponly" {
            c.httponly = true;
        } else if t == "secure" {
            c.secure = true;
        } else if let Some(v) = t.strip_prefix("samesite=") {
            c.samesite = Some(match v {
                _ if v.eq_ignore_ascii_case("strict") => SameSite::Strict,
                _ if v.eq_ignore_ascii_case("lax") => SameSite::Lax,
                _ if v.eq_ignore_ascii_case("none") => SameSite::None,
                _ if v.starts_with('$') => SameSite::Var(template(d, v)?),
                _ => return Err(invalid(d, t)),
            });
        } else {
            return Err(invalid(d, t));
        }
    }
    Ok(c)
}

fn learn(d: &Directive, rest: &[&str], zones: &mut Vec<String>) -> Result<Learn, ConfError> {
    let (mut create, mut lookup) = (Vec::new(), Vec::new());
    let mut zone: Option<(String, u64)> = None;
    let mut timeout = std::time::Duration::from_secs(600);
    let mut header = false;
    for &t in rest {
        if let Some(v) = t.strip_prefix("create=") {
            if !v.starts_with('$') {
                return Err(invalid(d, t));
            }
            create.push(template(d, v)?);
        } else if let Some(v) = t.strip_prefix("lookup=") {
            if !v.starts_with('$') {
                return Err(invalid(d, t));
            }
            lookup.push(template(d, v)?);
        } else if let Some(v) = t.strip_prefix("zone=") {
            let bad = || at(d, format!("invalid zone size \"{t}\""));
            let (name, size) = v.split_once(':').ok_or_else(bad)?;
            if name.is_empty() {
                return Err(invalid(d, t));
            }
            let size = value::parse_size(size).ok_or_else(bad)?;
            if size < 8 * 4096 {
                return Err(at(d, format!("zone \"{name}\" is too small")));
            }
            zone = Some((name.to_string(), size));
        } else if let Some(v) = t.strip_prefix("timeout=") {
            timeout = value::parse_time(v).filter(|t| !t.is_zero()).ok_or_else(|| invalid(d, t))?;
        } else if t == "header" {
            header = true;
        } else if t == "sync" {
            return Err(at(
                d,
                "the \"sync\" parameter of \"sticky\" needs \"zone_sync\", which sluice does not support",
            ));
        } else {
            return Err(invalid(d, t));
        }
    }
    let Some((name, size)) = zone else {
        return Err(at(d, "\"sticky\" must have \"zone\" parameter"));
    };
    if create.is_empty() {
        return Err(at(d, "\"sticky\" must have \"create\" parameter"));
    }
    if lookup.is_empty() {
        return Err(at(d, "\"sticky\" must have \"lookup\" parameter"));
    }
    if zones.contains(&name) {
        return Err(at(d, format!("duplicate zone \"{name}\"")));
    }
    zones.push(name.clone());
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    Ok(Learn { create, lookup, table: super::learn::table(&name, size, ms), header })
}
