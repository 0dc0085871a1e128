//! The directives of nginx's limit_req and limit_conn modules, with their
//! defaults and messages (nginx 1.22). Zones (`limit_req_zone`,
//! `limit_conn_zone`) are read before any server is built
//! (`config::build`), so `limit_req`/`limit_conn` anywhere in `http` may
//! name a zone defined later in the file, as nginx allows.

use std::collections::HashMap;
use std::sync::Arc;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, HTTP, LIF, R, Set, cmd, list};
use crate::config::value;
use crate::log::error::Level;
use crate::variables::Template;

use super::zone::{Table, shared};

pub static DIRECTIVES: &[Cmd] = &[
    cmd("limit_req_zone", HTTP, 3, 3, Set::Ctx(limit_req_zone)),
    list(cmd("limit_req", HSL, 1, 3, Set::Loc(limit_req)), reset_req),
    cmd("limit_req_status", HSL, 1, 1, Set::Loc(limit_req_status)),
    cmd("limit_req_log_level", HSL, 1, 1, Set::Loc(limit_req_log_level)),
    cmd("limit_req_dry_run", HSL, 1, 1, Set::Loc(limit_req_dry_run)),
    cmd("limit_conn_zone", HTTP, 2, 2, Set::Ctx(limit_conn_zone)),
    list(cmd("limit_conn", HSL, 2, 2, Set::Loc(limit_conn)), reset_conn),
    cmd("limit_conn_status", HSL, 1, 1, Set::Loc(limit_conn_status)),
    cmd("limit_conn_log_level", HSL, 1, 1, Set::Loc(limit_conn_log_level)),
    cmd("limit_conn_dry_run", HSL, 1, 1, Set::Loc(limit_conn_dry_run)),
    cmd("limit_rate", HSL | LIF, 1, 1, Set::Loc(super::rate::limit_rate)),
    cmd("limit_rate_after", HSL | LIF, 1, 1, Set::Loc(super::rate::limit_rate_after)),
];

/// Whether a directive defines a zone (read first, see the module comment).
pub fn is_zone(name: &str) -> bool {
    name == "limit_req_zone" || name == "limit_conn_zone"
}

/// A `limit_req_zone`.
pub struct ReqZone {
    pub name: String,
    pub key: Template,
    /// The key as written, for messages.
    pub key_text: String,
    /// Requests per 1000 seconds (nginx's "1 corresponds to 0.001 r/s").
    pub rate: u64,
    pub table: Arc<Table<super::req::Node>>,
}

/// A `limit_conn_zone`.
pub struct ConnZone {
    pub name: String,
    pub key: Template,
    pub key_text: String,
    pub table: Arc<Table<super::conn::Node>>,
}

pub enum Zone {
    Req(Arc<ReqZone>, u64),
    Conn(Arc<ConnZone>, u64),
}

/// Zones by name (one namespace, as nginx's shared memory zones).
pub type Zones = HashMap<String, Zone>;

/// One `limit_req` of a level.
#[derive(Clone)]
pub struct ReqRule {
    pub zone: Arc<ReqZone>,
    /// In thousandths of a request, as `excess`.
    pub burst: u64,
    /// Excess (thousandths) served without delay; `nodelay` is the maximum.
    pub delay: u64,
}

#[derive(Clone)]
pub struct ConnRule {
    pub zone: Arc<ConnZone>,
    pub conn: u32,
}

/// The per-level settings (`LocConf::limit`). A level with its own
/// `limit_req` (or `limit_conn`) lines replaces its parent's list, as
/// nginx's merge keeps the parent's array only when the child has none.
#[derive(Clone)]
pub struct LimitConf {
    pub req: Vec<ReqRule>,
    pub req_status: u16,
    pub req_log_level: Level,
    pub req_dry_run: bool,
    pub conn: Vec<ConnRule>,
    pub conn_status: u16,
    pub conn_log_level: Level,
    pub conn_dry_run: bool,
    /// `limit_rate` / `limit_rate_after` (`super::rate`).
    pub rate: super::rate::RateConf,
}

impl Default for LimitConf {
    fn default() -> Self {
        LimitConf {
            req: Vec::new(),
            req_status: 503,
            req_log_level: Level::Error,
            req_dry_run: false,
            conn: Vec::new(),
            conn_status: 503,
            conn_log_level: Level::Error,
            conn_dry_run: false,
            rate: Default::default(),
        }
    }
}

fn arg(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(|w| w.text.as_str()).unwrap_or("")
}

fn err(d: &Directive, msg: String) -> ConfError {
    ConfError::at(msg, &d.span)
}

/// `zone=NAME:SIZE` as nginx reads it for both zone directives.
fn zone_param(d: &Directive, a: &str) -> Result<(String, u64), ConfError> {
    let bad = || err(d, format!("invalid zone size \"{a}\""));
    let v = &a[5..];
    let (name, size) = v.split_once(':').ok_or_else(bad)?;
    let size = value::parse_size(size).ok_or_else(bad)?;
    // nginx: at least 8 pages.
    if size < 8 * 4096 {
        return Err(err(d, format!("zone \"{a}\" is too small")));
    }
    Ok((name.to_string(), size))
}

/// nginx's `ngx_shared_memory_add` checks for a new zone's name.
fn check_new_zone(d: &Directive, ctx: &Ctx, name: &str, size: u64, module: &str) -> R {
    let different = || err(d, format!("the shared memory zone \"{name}\" is already declared for a different use"));
    if ctx.cache_zones.contains_key(name) {
        return Err(different());
    }
    match ctx.limit_zones.get(name) {
        None => Ok(()),
        Some(Zone::Req(_, s) | Zone::Conn(_, s)) if *s != size => Err(err(
            d,
            format!("the size {size} of shared memory zone \"{name}\" conflicts with already declared size {s}"),
        )),
        Some(Zone::Req(z, _)) if module == "limit_req" => {
            Err(err(d, format!("limit_req_zone \"{name}\" is already bound to key \"{}\"", z.key_text)))
        }
        Some(Zone::Conn(z, _)) if module == "limit_conn" => {
            Err(err(d, format!("limit_conn_zone \"{name}\" is already bound to key \"{}\"", z.key_text)))
        }
        Some(_) => Err(different()),
    }
}

fn key(d: &Directive) -> Result<(Template, String), ConfError> {
    let text = arg(d, 0);
    let t = Template::compile(text).map_err(|e| err(d, e))?;
    Ok((t, text.to_string()))
}

pub fn limit_req_zone(d: &Directive, ctx: &mut Ctx) -> R {
    let (key, key_text) = key(d)?;
    let mut zone = None;
    let mut rate: u64 = 1;
    let mut scale: u64 = 1;
    for w in &d.args[1..] {
        let a = w.text.as_str();
        if a.starts_with("zone=") {
            zone = Some(zone_param(d, a)?);
        } else if let Some(v) = a.strip_prefix("rate=") {
            let (n, s) = if let Some(n) = v.strip_suffix("r/s") {
                (n, 1)
            } else if let Some(n) = v.strip_suffix("r/m") {
                (n, 60)
            } else {
                (v, 1)
            };
            rate = value::parse_number(n)
                .filter(|n| *n > 0 && *n <= i64::MAX as u64 / 1000)
                .ok_or_else(|| err(d, format!("invalid rate \"{a}\"")))?;
            scale = s;
        } else {
            return Err(err(d, format!("invalid parameter \"{a}\"")));
        }
    }
    let Some((name, size)) = zone.filter(|(n, _)| !n.is_empty()) else {
        return Err(err(d, format!("\"{}\" must have \"zone\" parameter", d.name)));
    };
    check_new_zone(d, ctx, &name, size, "limit_req")?;
    let table = shared("limit_req", &name, size, &key_text, || Table::new(size)).map_err(ConfError::plain)?;
    let z = ReqZone { name: name.clone(), key, key_text, rate: (rate * 1000 / scale).max(1), table };
    ctx.limit_zones.insert(name, Zone::Req(Arc::new(z), size));
    Ok(())
}

pub fn limit_conn_zone(d: &Directive, ctx: &mut Ctx) -> R {
    let (key, key_text) = key(d)?;
    let a = arg(d, 1);
    if !a.starts_with("zone=") {
        return Err(err(d, format!("invalid parameter \"{a}\"")));
    }
    let (name, size) = zone_param(d, a)?;
    if name.is_empty() {
        return Err(err(d, format!("\"{}\" must have \"zone\" parameter", d.name)));
    }
    check_new_zone(d, ctx, &name, size, "limit_conn")?;
    let table = shared("limit_conn", &name, size, &key_text, || Table::new(size)).map_err(ConfError::plain)?;
    let z = ConnZone { name: name.clone(), key, key_text, table };
    ctx.limit_zones.insert(name, Zone::Conn(Arc::new(z), size));
    Ok(())
}

/// nginx's message for a zone no `*_zone` directive defines (reported
/// without a position, as nginx finds it after reading the whole file), or
/// one of the other module's.
fn zone_ref<'z>(zones: &'z Zones, name: &str) -> Result<&'z Zone, ConfError> {
    zones.get(name).ok_or_else(|| ConfError::plain(format!("zero size shared memory zone \"{name}\"")))
}

fn different_use(d: &Directive, name: &str) -> ConfError {
    err(d, format!("the shared memory zone \"{name}\" is already declared for a different use"))
}

pub fn reset_req(l: &mut LocConf) {
    l.limit.req.clear();
}

pub fn reset_conn(l: &mut LocConf) {
    l.limit.conn.clear();
}

pub fn limit_req(l: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let mut zone: Option<&str> = None;
    let mut burst: u64 = 0;
    let mut delay: u64 = 0;
    for w in &d.args {
        let a = w.text.as_str();
        if let Some(v) = a.strip_prefix("zone=") {
            zone = Some(v);
        } else if let Some(v) = a.strip_prefix("burst=") {
            burst = value::parse_number(v)
                .filter(|n| *n > 0 && *n <= i64::MAX as u64 / 1000)
                .ok_or_else(|| err(d, format!("invalid burst value \"{a}\"")))?;
        } else if let Some(v) = a.strip_prefix("delay=") {
            delay = value::parse_number(v)
                .filter(|n| *n > 0 && *n <= i64::MAX as u64 / 1000)
                .ok_or_else(|| err(d, format!("invalid delay value \"{a}\"")))?;
        } else if a == "nodelay" {
            delay = i64::MAX as u64 / 1000;
        } else {
            return Err(err(d, format!("invalid parameter \"{a}\"")));
        }
    }
    let Some(name) = zone else {
        return Err(err(d, format!("\"{}\" must have \"zone\" parameter", d.name)));
    };
    let zone = match zone_ref(&ctx.limit_zones, name)? {
        Zone::Req(z, _) => z.clone(),
        Zone::Conn(..) => return Err(different_use(d, name)),
    };
    if l.limit.req.iter().any(|r| Arc::ptr_eq(&r.zone, &zone)) {
        return Err(err(d, format!("\"{}\" directive is duplicate", d.name)));
    }
    l.limit.req.push(ReqRule { zone, burst: burst * 1000, delay: delay * 1000 });
    Ok(())
}

pub fn limit_conn(l: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    let name = arg(d, 0);
    if ctx.cache_zones.contains_key(name) {
        return Err(different_use(d, name));
    }
    let zone = match zone_ref(&ctx.limit_zones, name)? {
        Zone::Conn(z, _) => z.clone(),
        Zone::Req(..) => return Err(different_use(d, name)),
    };
    if l.limit.conn.iter().any(|r| Arc::ptr_eq(&r.zone, &zone)) {
        return Err(err(d, format!("\"{}\" directive is duplicate", d.name)));
    }
    let v = arg(d, 1);
    let n = value::parse_number(v)
        .filter(|n| *n > 0)
        .ok_or_else(|| err(d, format!("invalid number of connections \"{v}\"")))?;
    if n > 65535 {
        return Err(err(d, "connection limit must be less 65536".to_string()));
    }
    l.limit.conn.push(ConnRule { zone, conn: n as u32 });
    Ok(())
}

fn status(d: &Directive) -> Result<u16, ConfError> {
    let v = arg(d, 0);
    let n = value::parse_number(v).ok_or_else(|| err(d, format!("\"{}\" directive invalid number", d.name)))?;
    if !(400..=599).contains(&n) {
        return Err(err(d, "value must be between 400 and 599".to_string()));
    }
    Ok(n as u16)
}

fn level(d: &Directive) -> Result<Level, ConfError> {
    match arg(d, 0) {
        "info" => Ok(Level::Info),
        "notice" => Ok(Level::Notice),
        "warn" => Ok(Level::Warn),
        "error" => Ok(Level::Error),
        v => Err(err(d, format!("invalid value \"{v}\""))),
    }
}

fn flag(d: &Directive) -> Result<bool, ConfError> {
    crate::config::set_main::flag(d)
}

pub fn limit_req_status(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.req_status = status(d)?;
    Ok(())
}

pub fn limit_req_log_level(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.req_log_level = level(d)?;
    Ok(())
}

pub fn limit_req_dry_run(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.req_dry_run = flag(d)?;
    Ok(())
}

pub fn limit_conn_status(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.conn_status = status(d)?;
    Ok(())
}

pub fn limit_conn_log_level(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.conn_log_level = level(d)?;
    Ok(())
}

pub fn limit_conn_dry_run(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.limit.conn_dry_run = flag(d)?;
    Ok(())
}
