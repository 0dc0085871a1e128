//! nginx's charset filter (`charset`, `charset_types`, `source_charset`,
//! `override_charset`): names the character set in `Content-Type` of
//! responses whose type is listed (`text/html; charset=utf-8`), the way
//! published configs use it (`charset utf-8;`). Recoding between charsets
//! (`charset_map`) is not done: a `source_charset` different from
//! `charset` is refused at load time with nginx's own message for a
//! missing map, so no response is ever labelled with a charset its bytes
//! are not in.

use std::borrow::Cow;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, LIF, MANY, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::Response;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("charset", HSL | LIF, 1, 1, Set::Loc(charset)),
    cmd("source_charset", HSL | LIF, 1, 1, Set::Loc(source_charset)),
    cmd("override_charset", HSL | LIF, 1, 1, Set::Loc(override_charset)),
    cmd("charset_types", HSL, 1, MANY, Set::Loc(charset_types)),
];

/// nginx's default `charset_types` (`text/html` is always in).
const DEFAULT_TYPES: [&str; 6] =
    ["text/html", "text/xml", "text/plain", "text/vnd.wap.wml", "application/javascript", "application/rss+xml"];

#[derive(Clone, Debug)]
pub struct CharsetConf {
    /// None: `charset off` (the default).
    pub charset: Option<Arc<str>>,
    pub source: Option<Arc<str>>,
    pub override_charset: bool,
    /// Lowercase types; `*` matches any.
    pub types: Arc<Vec<String>>,
}

impl Default for CharsetConf {
    fn default() -> Self {
        CharsetConf {
            charset: None,
            source: None,
            override_charset: false,
            types: Arc::new(DEFAULT_TYPES.iter().map(|t| t.to_string()).collect()),
        }
    }
}

fn charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = d.args[0].text.as_str();
    if v.contains('$') {
        return Err(ConfError::at("\"charset\" with variables is not supported", &d.span));
    }
    c.charset.charset = (v != "off").then(|| Arc::from(v));
    check_pair(&c.charset, d)
}

fn source_charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.source = Some(Arc::from(d.args[0].text.as_str()));
    check_pair(&c.charset, d)
}

/// Recoding needs a `charset_map`, which sluice does not have: nginx's
/// message for a pair without one.
fn check_pair(c: &CharsetConf, d: &Directive) -> R {
    if let (Some(to), Some(from)) = (&c.charset, &c.source)
        && !to.eq_ignore_ascii_case(from)
    {
        return Err(ConfError::at(
            format!("no \"charset_map\" between the charsets \"{from}\" and \"{to}\" (sluice does not recode)"),
            &d.span,
        ));
    }
    Ok(())
}

fn override_charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.override_charset = crate::config::set_main::flag(d)?;
    Ok(())
}

fn charset_types(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.types = super::type_list(d);
    Ok(())
}

/// Adds `; charset=NAME` where nginx would: a listed type with no charset
/// of its own (whatever its Content-Encoding, as nginx 1.22).
pub fn apply(ctx: &ReqCtx<'_, '_>, resp: &mut Response<'_>) {
    let conf = &ctx.conf.charset;
    let Some(name) = &conf.charset else { return };
    let Some(ct) = resp.content_type.as_deref() else { return };
    if ct.is_empty() {
        return;
    }
    let (mime, params) = match ct.split_once(';') {
        Some((m, p)) => (m.trim(), p),
        None => (ct.trim(), ""),
    };
    // A charset the response already names stays (nginx recodes it only
    // with override_charset and a charset_map).
    if params.to_ascii_lowercase().contains("charset=") {
        return;
    }
    if !super::type_listed(&conf.types, mime) {
        return;
    }
    let with = format!("{ct}; charset={name}");
    resp.content_type = Some(Cow::Owned(with));
}
