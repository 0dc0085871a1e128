//! The GeoIP2 modules' shared half (leev/ngx_http_geoip2_module 3.4, as
//! Debian's libnginx-mod-http-geoip2 and libnginx-mod-stream-geoip2 ship
//! it): a `geoip2 FILE { ... }` block opens a MaxMind DB (`db`) and
//! defines variables, each a path into the record of an address (`value`)
//! or a fact about the file (`metadata`).
//!
//! A family reads its `geoip2` blocks before any other directive of its
//! level ([`block`]), as it reads the legacy `geoip_*` ones, so a `map`
//! over a geoip2 variable compiles bound to it; the variables are then
//! published for `variables::block_var` ([`lookup_var`]). A `source=`
//! template is compiled there and then, so it may name the family's own
//! variables and the earlier geoip2 ones, not a `map` (nginx resolves it
//! later). The family computes the address a variable looks up: the
//! `source=` value parsed as an address, else the client (http: after
//! `geoip2_proxy`'s `X-Forwarded-For`).

pub mod db;
pub mod value;

use std::cell::RefCell;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use crate::cidr::Cidr;
use crate::config::parser::{ConfError, Directive};
use crate::variables::Template;
use db::Database;

/// A family's settings outside the blocks: `geoip2_proxy` and
/// `geoip2_proxy_recursive` (http only).
#[derive(Default, Debug)]
pub struct Geoip2Conf {
    pub proxies: Vec<Cidr>,
    pub proxy_recursive: bool,
}

/// `$var metadata NAME`: nginx matches NAME by prefix and leaves any other
/// name not found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meta {
    BuildEpoch,
    LastCheck,
    LastChange,
    Unknown,
}

/// What a variable gives.
#[derive(Debug)]
pub enum Kind {
    Data {
        path: Vec<String>,
        /// `default=`: the value when nothing is found.
        default: Option<Vec<u8>>,
        /// `source=`: the template whose value is the address to look up.
        source: Option<Template>,
    },
    Meta(Meta),
}

/// A variable a `geoip2` block defines.
#[derive(Debug)]
pub struct Geoip2Var {
    pub name: String,
    pub db: Arc<Database>,
    pub kind: Kind,
    pub conf: Arc<Geoip2Conf>,
}

impl PartialEq for Geoip2Var {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Geoip2Var {
    /// The template to evaluate for the address, when not the client's.
    pub fn source(&self) -> Option<&Template> {
        match &self.kind {
            Kind::Data { source, .. } => source.as_ref(),
            Kind::Meta(_) => None,
        }
    }

    /// Whether the value depends on an address at all.
    pub fn wants_address(&self) -> bool {
        matches!(self.kind, Kind::Data { .. })
    }

    /// The value for `addr` (None: no address, a unix-domain client or a
    /// `source=` value that is not one) appended to `out`; false when not
    /// found and there is no `default=`.
    pub fn value(&self, addr: Option<IpAddr>, out: &mut Vec<u8>) -> bool {
        use std::io::Write;
        match &self.kind {
            Kind::Meta(m) => {
                let _ = match m {
                    Meta::BuildEpoch => write!(out, "{}", self.db.build_epoch()),
                    Meta::LastCheck => write!(out, "{}", self.db.last_check()),
                    Meta::LastChange => write!(out, "{}", self.db.last_change()),
                    Meta::Unknown => return false,
                };
                true
            }
            Kind::Data { path, default, .. } => {
                let from = out.len();
                if let Some(a) = addr {
                    let reader = self.db.reader();
                    if value::find(&reader, a, path, out) {
                        return true;
                    }
                }
                out.truncate(from);
                match default {
                    Some(d) => {
                        out.extend_from_slice(d);
                        true
                    }
                    None => false,
                }
            }
        }
    }
}

/// nginx's `ngx_parse_addr` over a `source=` value: an IPv4 or IPv6
/// address, nothing around it.
pub fn parse_addr(v: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

thread_local! {
    /// The variables of the family being built (a configuration is built
    /// on one thread; each family's build calls [`reset`] first).
    static VARS: RefCell<Vec<Arc<Geoip2Var>>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the variables of the previous family or build.
pub fn reset() {
    VARS.with(|v| v.borrow_mut().clear());
}

/// A geoip2 variable by name, for `Template::compile`.
pub fn lookup_var(name: &str) -> Option<Arc<Geoip2Var>> {
    VARS.with(|v| v.borrow().iter().rev().find(|g| g.name.eq_ignore_ascii_case(name)).cloned())
}

/// Reads one `geoip2 FILE { ... }` block: opens the database (nginx's
/// `MMDB_open("...") failed - ...` when it does not), then its
/// `auto_reload` and variables, which it publishes. `path` is the file
/// resolved against the prefix; `seen` the files of earlier blocks.
pub fn block(
    d: &Directive,
    path: PathBuf,
    conf: &Arc<Geoip2Conf>,
    seen: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<(), ConfError> {
    let shown = path.display().to_string();
    if seen.contains(&path) {
        return Err(ConfError::at(format!("Duplicate GeoIP2 mmdb - {shown}"), &d.span));
    }
    seen.push(path.clone());
    let children = d.block.as_deref().unwrap_or(&[]);
    let mut interval = 0;
    for c in children.iter().filter(|c| c.name == "auto_reload") {
        if c.args.len() != 1 {
            return Err(ConfError::at("invalid number of arguments for auto_reload", &c.span));
        }
        let v = &c.args[0].text;
        interval = crate::config::value::parse_time(v)
            .map(|t| i64::try_from(t.as_secs()).unwrap_or(i64::MAX))
            .ok_or_else(|| ConfError::at(format!("invalid interval for auto_reload \"{v}\""), &c.span))?;
    }
    let db = Database::open(path, interval)
        .map_err(|e| ConfError::at(format!("MMDB_open(\"{shown}\") failed - {}", db::strerror(&e)), &d.span))?;
    let db = Arc::new(db);
    for c in children {
        if c.name == "auto_reload" {
            continue;
        }
        let Some(name) = c.name.strip_prefix('$') else {
            return Err(ConfError::at(format!("invalid setting \"{}\"", c.name), &c.span));
        };
        let kind = variable(c, name, warnings)?;
        let var = Arc::new(Geoip2Var { name: name.to_string(), db: db.clone(), kind, conf: conf.clone() });
        VARS.with(|v| v.borrow_mut().push(var));
    }
    Ok(())
}

/// `$name metadata NAME` or `$name [default=V] [source=$v] path...`.
fn variable(c: &Directive, name: &str, warnings: &mut Vec<String>) -> Result<Kind, ConfError> {
    let args: Vec<&str> = c.args.iter().map(|a| a.text.as_str()).collect();
    if name.is_empty() {
        return Err(ConfError::at("invalid variable name \"$\"", &c.span));
    }
    if args.first() == Some(&"metadata") {
        // nginx reads the third word without checking it is there.
        let Some(which) = args.get(1) else {
            return Err(ConfError::at(format!("no metadata name for \"${name}\""), &c.span));
        };
        let meta = if which.starts_with("build_epoch") {
            Meta::BuildEpoch
        } else if which.starts_with("last_check") {
            Meta::LastCheck
        } else if which.starts_with("last_change") {
            Meta::LastChange
        } else {
            let msg = format!("unknown metadata \"{which}\" for \"${name}\": the variable is never found");
            warnings.push(ConfError::at(msg, &c.span).to_string());
            Meta::Unknown
        };
        return Ok(Kind::Meta(meta));
    }
    let mut default = None;
    let mut source = None;
    let mut at = 0;
    while let Some(a) = args.get(at).filter(|a| a.contains('=')) {
        if let Some(v) = a.strip_prefix("default=").filter(|v| !v.is_empty()) {
            if default.is_some() {
                return Err(ConfError::at(format!("default has already been declared for  \"${name}\""), &c.span));
            }
            default = Some(v.as_bytes().to_vec());
        } else if let Some(v) = a.strip_prefix("source=").filter(|v| !v.is_empty()) {
            if source.is_some() {
                return Err(ConfError::at(format!("source has already been declared for  \"${name}\""), &c.span));
            }
            if !v.starts_with('$') {
                return Err(ConfError::at(format!("invalid source variable name \"{v}\""), &c.span));
            }
            let t = Template::compile(v).map_err(|e| ConfError::at(e, &c.span))?;
            source = Some(t);
        } else {
            return Err(ConfError::at(format!("invalid setting \"{a}\" for \"${name}\""), &c.span));
        }
        at += 1;
    }
    let path = args[at..].iter().map(|s| s.to_string()).collect();
    Ok(Kind::Data { path, default, source })
}
