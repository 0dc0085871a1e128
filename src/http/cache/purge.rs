//! `proxy_cache_purge`, in the style of the ngx_cache_purge module most
//! nginx users install: in a caching location, a `PURGE` request (or the
//! method named, from the addresses listed after `from`) removes the
//! request's entry; in a location of its own, `proxy_cache_purge ZONE KEY`
//! removes KEY's entry for any request; as NGINX Plus has it, a condition
//! (`proxy_cache_purge $purge;`) purges when its value is non-empty and not
//! "0". A key ending in `*` removes every entry whose key starts with the
//! rest: entries stored before the purge stop being served at once, and the
//! zone's manager thread deletes their files in the background.
//!
//! The answer is the module's: 200 with its "Successful purge" page naming
//! the key (and the file), or 404 when there was nothing to purge.

use std::sync::Arc;

use super::conf::ZoneConf;
use super::zone::{self, Zone};
use crate::cidr::Cidr;
use crate::config::parser::{ConfError, Directive};
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::http::response::{Body, Response};
use crate::variables::Template;

/// How a location purges.
#[derive(Clone, Debug, Default)]
pub enum Purge {
    #[default]
    Off,
    /// Requests with this method purge the location's own key.
    Method { method: String, from: Option<Vec<Cidr>> },
    /// NGINX Plus's form: a true condition purges the location's own key.
    Condition(Vec<Template>),
    /// A location of its own: every request purges KEY in ZONE.
    Separate { zone: Arc<ZoneConf>, key: Template },
}

/// Parses the directive's arguments (`zones` to resolve the separate form).
pub fn parse(d: &Directive, zones: &super::conf::Zones) -> Result<Purge, ConfError> {
    let args: Vec<&str> = d.args.iter().map(|w| w.text.as_str()).collect();
    let first = args[0];
    if args.len() == 2 && args[1] != "from" && !is_method(first) {
        let zone = zones
            .get(first)
            .ok_or_else(|| ConfError::at(format!("\"proxy_cache_purge\" zone \"{}\" is unknown", first), &d.span))?;
        let key = Template::compile(args[1]).map_err(|e| ConfError::at(e, &d.span))?;
        return Ok(Purge::Separate { zone: zone.clone(), key });
    }
    if first == "off" && args.len() == 1 {
        return Ok(Purge::Off);
    }
    if first.contains('$') {
        let conds = args
            .iter()
            .map(|a| Template::compile(a).map_err(|e| ConfError::at(e, &d.span)))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Purge::Condition(conds));
    }
    let method = match first {
        "on" => "PURGE".to_string(),
        m if is_method(m) => m.to_string(),
        _ => return Err(ConfError::at(format!("invalid parameter \"{}\"", first), &d.span)),
    };
    let from = match args.get(1) {
        None => None,
        Some(&"from") => {
            let list = &args[2..];
            if list.is_empty() {
                return Err(ConfError::at("invalid number of arguments in \"proxy_cache_purge\" directive", &d.span));
            }
            if list == ["all"] {
                None
            } else {
                let mut v = Vec::new();
                for a in list {
                    v.push(
                        Cidr::parse(a)
                            .map(|p| p.cidr)
                            .ok_or_else(|| ConfError::at(format!("invalid parameter \"{}\"", a), &d.span))?,
                    );
                }
                Some(v)
            }
        }
        Some(other) => return Err(ConfError::at(format!("invalid parameter \"{}\"", other), &d.span)),
    };
    Ok(Purge::Method { method, from })
}

fn is_method(s: &str) -> bool {
    !s.is_empty() && s != "on" && s != "off" && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// For a caching location: whether this request is a purge (Some: its
/// answer, 403 for a purge from an address not listed).
pub fn check<'c>(ctx: &mut ReqCtx<'c, '_>, key: &[u8], zone_conf: &Arc<ZoneConf>) -> Option<Response<'c>> {
    match &super::conf::of(ctx.conf).purge {
        Purge::Method { method, from } if ctx.req.method_bytes() == method.as_bytes() => {
            if let Some(list) = from
                && !list.iter().any(|c| c.contains(ctx.client().ip()))
            {
                return Some(crate::http::handler::finish_error(ctx, 403));
            }
            Some(purge(ctx, &zone::get(zone_conf), key))
        }
        Purge::Condition(conds) if super::serve::any_true(ctx, conds) => Some(purge(ctx, &zone::get(zone_conf), key)),
        _ => None,
    }
}

/// The content handler of a purge location.
pub fn separate<'c>(ctx: &mut ReqCtx<'c, '_>, zone_conf: &Arc<ZoneConf>, key: &Template) -> Response<'c> {
    let key = key.render_to_vec(&Vars::request(ctx));
    purge(ctx, &zone::get(zone_conf), &key)
}

fn purge<'c>(ctx: &mut ReqCtx<'c, '_>, z: &Arc<Zone>, key: &[u8]) -> Response<'c> {
    let (found, path) = match key.strip_suffix(b"*") {
        Some(prefix) => (z.purge_prefix(prefix), None),
        None => {
            let h = zone::hash(key);
            let path = z.path_of(&h);
            // A key with variants: each variant's file has its own name
            // (the file at the key's own is the link to the newest one,
            // which tells before the loader has run).
            let linked = super::store::holds_variant(&path);
            let node = z.forget(&h);
            let removed = std::fs::remove_file(&path).is_ok();
            let variants = (linked || node.as_ref().is_some_and(|n| n.vary.is_some())) && z.purge_exact(key);
            (removed || node.is_some_and(|n| n.on_disk) || variants, Some(path))
        }
    };
    if !found {
        return crate::http::handler::finish_error(ctx, 404);
    }
    let mut body = String::from(
        "<html>\r\n<head><title>Successful purge</title></head>\r\n<body bgcolor=\"white\">\r\n<center><h1>Successful purge</h1>\r\n",
    );
    body.push_str("<br>Key : ");
    body.push_str(&String::from_utf8_lossy(key));
    if let Some(p) = path {
        body.push_str("\r\n<br>Path: ");
        body.push_str(&p.display().to_string());
    }
    body.push_str("\r\n</center>\r\n<hr><center>");
    body.push_str(crate::config::Config::version());
    body.push_str("</center>\r\n</body>\r\n</html>\r\n");
    let mut r = Response::new(200);
    r.content_type = Some(std::borrow::Cow::Borrowed("text/html"));
    r.body = Body::Owned(body.into_bytes());
    crate::http::handler::finish_proxied(ctx, r)
}
