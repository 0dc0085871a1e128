//! nginx's charset module (`charset`, `source_charset`, `override_charset`,
//! `charset_types`, `charset_map`): names the charset in `Content-Type` of
//! the listed types and recodes bodies between charsets a `charset_map`
//! joins. `map` owns the tables, `filter` is the header filter (what the
//! response says and whether its body is recoded), `recode` the body stage
//! that recodes a body as it streams.

pub mod filter;
pub mod map;
pub mod recode;

use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, HTTP, LIF, MANY, R, Set, block, cmd};
use crate::variables::Template;

pub use filter::{apply, decide, install};

pub static DIRECTIVES: &[Cmd] = &[
    cmd("charset", HSL | LIF, 1, 1, Set::Loc(charset)),
    cmd("source_charset", HSL | LIF, 1, 1, Set::Loc(source_charset)),
    cmd("override_charset", HSL | LIF, 1, 1, Set::Loc(override_charset)),
    cmd("charset_types", HSL, 1, MANY, Set::Loc(charset_types)),
    // Read by `config::build` before the http level's other directives
    // (see `map::Charsets::build`).
    block("charset_map", HTTP, 2, 2),
];

/// nginx's default `charset_types` (`text/html` is always in).
const DEFAULT_TYPES: [&str; 6] =
    ["text/html", "text/xml", "text/plain", "text/vnd.wap.wml", "application/javascript", "application/rss+xml"];

/// A charset as a directive gives it: a name, or variables whose value is
/// one (read for each response).
#[derive(Clone, Debug)]
pub enum Name {
    Fixed(Arc<str>),
    Var(Arc<Template>),
}

#[derive(Clone, Debug)]
pub struct CharsetConf {
    /// None: `charset off` (the default).
    pub charset: Option<Name>,
    /// None: `source_charset off`: the body is in the charset it is sent in.
    pub source: Option<Name>,
    pub override_charset: bool,
    /// Lowercase types; `*` matches any.
    pub types: Arc<Vec<String>>,
    /// The http level's `charset_map` tables.
    pub maps: Arc<map::Charsets>,
}

impl Default for CharsetConf {
    fn default() -> Self {
        CharsetConf {
            charset: None,
            source: None,
            override_charset: false,
            types: Arc::new(DEFAULT_TYPES.iter().map(|t| t.to_string()).collect()),
            maps: Arc::default(),
        }
    }
}

impl CharsetConf {
    /// The `charset` when it is a plain name.
    pub fn fixed_charset(&self) -> Option<&str> {
        match &self.charset {
            Some(Name::Fixed(n)) => Some(n),
            _ => None,
        }
    }

    /// Whether nginx would know this charset: a map or a directive here
    /// names it.
    pub fn known(&self, name: &str) -> bool {
        let named = |n: &Option<Name>| matches!(n, Some(Name::Fixed(f)) if f.eq_ignore_ascii_case(name));
        self.maps.known(name) || named(&self.charset) || named(&self.source)
    }
}

fn name(d: &Directive) -> Result<Name, ConfError> {
    let v = d.args[0].text.as_str();
    if v.contains('$') {
        let t = Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?;
        return Ok(Name::Var(Arc::new(t)));
    }
    Ok(Name::Fixed(Arc::from(v)))
}

fn charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.charset = if d.args[0].text == "off" { None } else { Some(name(d)?) };
    check_pair(&c.charset, d)
}

fn source_charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.source = Some(name(d)?);
    check_pair(&c.charset, d)
}

/// A recoding between two named charsets needs a `charset_map` (either
/// way): nginx's message when there is none.
fn check_pair(c: &CharsetConf, d: &Directive) -> R {
    if let (Some(Name::Fixed(to)), Some(Name::Fixed(from))) = (&c.charset, &c.source)
        && !to.eq_ignore_ascii_case(from)
        && c.maps.recode(from, to).is_none()
    {
        return Err(ConfError::at(format!("no \"charset_map\" between the charsets \"{from}\" and \"{to}\""), &d.span));
    }
    Ok(())
}

fn override_charset(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.override_charset = crate::config::set_main::flag(d)?;
    Ok(())
}

fn charset_types(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.charset.types = crate::http::filter::type_list(d);
    Ok(())
}
