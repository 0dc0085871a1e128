//! The cache's directives: `proxy_cache_path` (a zone: where entries live
//! on disk and how the index and the memory tier are bounded) and the
//! per-location `proxy_cache*` settings, with nginx's defaults and
//! messages. The runtime state of a zone is built from a [`ZoneConf`] the
//! first time a worker uses it (`super::zone`), so `-t` touches no disk.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, HTTP, MANY, R, Set, cmd, list};
use crate::config::value;
use crate::variables::Template;

/// Generates a module's cache directives (`proxy_cache*` or
/// `fastcgi_cache*`, nginx's two spellings of one engine): setters that
/// apply the shared parsers below to that module's [`CacheConf`] (in its
/// [`crate::config::proxy::UpstreamConf`]), and the table rows.
macro_rules! cache_directives {
    ($table:ident, $module:ident, $field:ident, $p:literal, [$($extra:expr),*]) => {
        pub mod $module {
            use crate::config::build::Ctx;
            use crate::config::model::LocConf;
            use crate::config::parser::Directive;
            use crate::config::table::R;

            fn c(l: &mut LocConf) -> &mut super::CacheConf {
                &mut l.$field.up.cache
            }
            pub fn path(d: &Directive, ctx: &mut Ctx) -> R {
                super::cache_path(d, ctx, $p)
            }
            pub fn cache(l: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
                super::cache(c(l), d, ctx, $p)
            }
            pub fn reset_valid(l: &mut LocConf) {
                c(l).valid.clear();
            }
            pub fn reset_bypass(l: &mut LocConf) {
                c(l).bypass.clear();
            }
            pub fn reset_no_cache(l: &mut LocConf) {
                c(l).no_cache.clear();
            }
            pub fn reset_ignore_headers(l: &mut LocConf) {
                c(l).ignore = Default::default();
            }
            super::setters!(c; key, valid, methods, min_uses, bypass, no_cache, use_stale, background_update,
                lock, lock_timeout, lock_age, revalidate, convert_head, max_range_offset, ignore_headers, purge);
        }

        pub static $table: &[Cmd] = &[
            cmd(concat!($p, "_cache_path"), HTTP, 2, MANY, Set::Ctx($module::path)),
            cmd(concat!($p, "_cache"), HSL, 1, 1, Set::Loc($module::cache)),
            cmd(concat!($p, "_cache_key"), HSL, 1, 1, Set::Loc($module::key)),
            list(cmd(concat!($p, "_cache_valid"), HSL, 1, MANY, Set::Loc($module::valid)), $module::reset_valid),
            cmd(concat!($p, "_cache_methods"), HSL, 1, MANY, Set::Loc($module::methods)),
            cmd(concat!($p, "_cache_min_uses"), HSL, 1, 1, Set::Loc($module::min_uses)),
            list(cmd(concat!($p, "_cache_bypass"), HSL, 1, MANY, Set::Loc($module::bypass)), $module::reset_bypass),
            list(cmd(concat!($p, "_no_cache"), HSL, 1, MANY, Set::Loc($module::no_cache)), $module::reset_no_cache),
            cmd(concat!($p, "_cache_use_stale"), HSL, 1, MANY, Set::Loc($module::use_stale)),
            cmd(concat!($p, "_cache_background_update"), HSL, 1, 1, Set::Loc($module::background_update)),
            cmd(concat!($p, "_cache_lock"), HSL, 1, 1, Set::Loc($module::lock)),
            cmd(concat!($p, "_cache_lock_timeout"), HSL, 1, 1, Set::Loc($module::lock_timeout)),
            cmd(concat!($p, "_cache_lock_age"), HSL, 1, 1, Set::Loc($module::lock_age)),
            cmd(concat!($p, "_cache_revalidate"), HSL, 1, 1, Set::Loc($module::revalidate)),
            cmd(concat!($p, "_cache_max_range_offset"), HSL, 1, 1, Set::Loc($module::max_range_offset)),
            list(cmd(concat!($p, "_ignore_headers"), HSL, 1, MANY, Set::Loc($module::ignore_headers)), $module::reset_ignore_headers),
            cmd(concat!($p, "_cache_purge"), HSL, 1, MANY, Set::Loc($module::purge)),
            $($extra),*
        ];
    };
}

/// Setters that hand a module's `CacheConf` to the shared parser of the
/// same name.
macro_rules! setters {
    ($c:ident; $($name:ident),*) => {
        $(pub fn $name(l: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
            super::$name($c(l), d, ctx)
        })*
    };
}
use setters;

cache_directives!(
    PROXY,
    proxy,
    proxy,
    "proxy",
    [cmd("proxy_cache_convert_head", HSL, 1, 1, Set::Loc(proxy::convert_head))]
);
// nginx has no fastcgi_cache_convert_head: a HEAD goes to the application
// as HEAD (and, with the usual key, is stored under the GET's key: the
// reason nginx's docs put $request_method in fastcgi_cache_key).
cache_directives!(FASTCGI, fastcgi, fastcgi, "fastcgi", []);
// uwsgi and SCGI have none either.
cache_directives!(UWSGI, uwsgi, uwsgi, "uwsgi", []);
cache_directives!(SCGI, scgi, scgi, "scgi", []);

/// One `proxy_cache_path`: a named zone.
#[derive(Debug)]
pub struct ZoneConf {
    pub name: String,
    pub path: PathBuf,
    /// Directory name lengths under `path` (`levels=1:2` is `[1, 2]`),
    /// taken from the end of the key's hex MD5 as nginx does.
    pub levels: Vec<usize>,
    /// `keys_zone=NAME:SIZE`: bounds how many keys the index holds (nginx
    /// fits about 8,000 keys in 1 MB; so does sluice).
    pub keys_size: u64,
    pub inactive: Duration,
    pub max_size: Option<u64>,
    pub min_free: Option<u64>,
    pub use_temp_path: bool,
    /// sluice's `memory=SIZE`: the in-memory tier (default 16 × the
    /// keys_zone size, at most 256 MB; `memory=0` turns it off).
    pub memory: u64,
    pub manager_files: u64,
    pub manager_sleep: Duration,
    pub manager_threshold: Duration,
    pub loader_files: u64,
    pub loader_sleep: Duration,
    pub loader_threshold: Duration,
    /// `FILE:LINE` of the directive, for nginx's duplicate-path message.
    pub defined_at: String,
    /// "proxy" or "fastcgi": the module whose `*_cache` may use the zone.
    pub module: &'static str,
    /// The zone this configuration resolved to on first use
    /// (`zone::get`), so a lookup does not go through the process-wide
    /// registry and its lock on every request. Weak: the zone holds its
    /// configuration.
    pub resolved: std::sync::OnceLock<std::sync::Weak<super::zone::Zone>>,
    /// The zone's counter slot in `sluice_status` (by name, for the life
    /// of the process: `crate::metrics::cache_index`).
    pub metrics: u32,
}

const DIFFERENT_USE: &str = "the shared memory zone \"{}\" is already declared for a different use";

impl ZoneConf {
    /// How many keys the index may hold (nginx: a key node is ~128 bytes).
    pub fn max_keys(&self) -> usize {
        (self.keys_size / 128).max(8) as usize
    }
}

/// Which of the origin's headers the cache does not act on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ignore {
    pub x_accel_expires: bool,
    pub x_accel_redirect: bool,
    pub x_accel_limit_rate: bool,
    pub x_accel_buffering: bool,
    pub x_accel_charset: bool,
    pub expires: bool,
    pub cache_control: bool,
    pub set_cookie: bool,
    pub vary: bool,
}

/// `proxy_cache_use_stale`: when an expired entry is served instead.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UseStale {
    pub error: bool,
    pub timeout: bool,
    pub invalid_header: bool,
    pub updating: bool,
    /// The statuses (500, 502, 503, 504, 403, 404, 429).
    pub statuses: [bool; 7],
}

const STALE_STATUSES: [u16; 7] = [500, 502, 503, 504, 403, 404, 429];

impl UseStale {
    pub fn on_status(&self, status: u16) -> bool {
        STALE_STATUSES.iter().zip(self.statuses).any(|(s, on)| on && *s == status)
    }
}

/// `proxy_cache_valid`: a time for some statuses, or for any.
#[derive(Clone, Debug, PartialEq)]
pub struct Valid {
    /// Empty: `any`.
    pub codes: Vec<u16>,
    pub time: Duration,
}

/// `proxy_cache`: off, a zone, or a value naming one per request.
#[derive(Clone, Debug, Default)]
pub enum CacheZone {
    #[default]
    Off,
    Zone(Arc<ZoneConf>),
    /// `proxy_cache $var`: evaluated per request; empty or "off" is no
    /// caching, a name not among the module's zones is nginx's 500 with
    /// `cache "NAME" not found` (`ngx_http_upstream_cache_get`). The zones
    /// are the module's own (a `fastcgi_cache_path` zone is not found by
    /// `proxy_cache`), taken when the directive is read, as every
    /// `*_cache_path` is read before any server.
    Var(Arc<Template>, Arc<Zones>),
}

/// What a request's `proxy_cache` value came to.
pub enum Resolved<'a> {
    Off,
    Zone(&'a Arc<ZoneConf>),
    /// The value named no zone of the module.
    Unknown(Vec<u8>),
}

impl CacheZone {
    /// Whether the location caches at all (a variable may still come to
    /// nothing for a request).
    pub fn is_on(&self) -> bool {
        !matches!(self, CacheZone::Off)
    }

    /// The zone for this request.
    pub fn resolve(&self, vars: &dyn crate::variables::VarSource) -> Resolved<'_> {
        match self {
            CacheZone::Off => Resolved::Off,
            CacheZone::Zone(z) => Resolved::Zone(z),
            CacheZone::Var(t, zones) => {
                let v = t.render_to_vec(vars);
                if v.is_empty() || v == b"off" {
                    return Resolved::Off;
                }
                match std::str::from_utf8(&v).ok().and_then(|n| zones.get(n)) {
                    Some(z) => Resolved::Zone(z),
                    None => Resolved::Unknown(v),
                }
            }
        }
    }
}

/// The per-location cache settings.
#[derive(Clone, Debug)]
pub struct CacheConf {
    /// `proxy_cache`.
    pub zone: CacheZone,
    pub key: Option<Arc<Template>>,
    pub valid: Vec<Valid>,
    /// GET and HEAD are always cached; `POST` may be added.
    pub post: bool,
    pub min_uses: u32,
    pub bypass: Vec<Template>,
    pub no_cache: Vec<Template>,
    pub use_stale: UseStale,
    pub background_update: bool,
    pub lock: bool,
    pub lock_timeout: Duration,
    pub lock_age: Duration,
    pub revalidate: bool,
    pub convert_head: bool,
    pub max_range_offset: Option<u64>,
    pub ignore: Ignore,
    /// `proxy_cache_purge` (see `super::purge`).
    pub purge: super::purge::Purge,
}

impl Default for CacheConf {
    fn default() -> Self {
        CacheConf {
            zone: CacheZone::Off,
            key: None,
            valid: Vec::new(),
            post: false,
            min_uses: 1,
            bypass: Vec::new(),
            no_cache: Vec::new(),
            use_stale: UseStale::default(),
            background_update: false,
            lock: false,
            lock_timeout: Duration::from_secs(5),
            lock_age: Duration::from_secs(5),
            revalidate: false,
            convert_head: true,
            max_range_offset: None,
            ignore: Ignore::default(),
            purge: Default::default(),
        }
    }
}

impl CacheConf {
    /// The validity `proxy_cache_valid` gives a status (nginx: the first
    /// rule naming it, else `any`).
    pub fn valid_for(&self, status: u16) -> Option<Duration> {
        self.valid
            .iter()
            .find(|v| v.codes.contains(&status))
            .or_else(|| self.valid.iter().find(|v| v.codes.is_empty()))
            .map(|v| v.time)
    }
}

/// Zones by name, filled by `proxy_cache_path` before any server is built.
pub type Zones = HashMap<String, Arc<ZoneConf>>;

fn arg(d: &Directive, i: usize) -> &str {
    d.args.get(i).map(|w| w.text.as_str()).unwrap_or("")
}

fn invalid(d: &Directive, v: &str) -> ConfError {
    ConfError::at(format!("invalid value \"{}\" in \"{}\" directive", v, d.name), &d.span)
}

fn flag(d: &Directive) -> Result<bool, ConfError> {
    let v = arg(d, 0);
    value::parse_flag(v).ok_or_else(|| {
        ConfError::at(
            format!("invalid value \"{}\" in \"{}\" directive, it must be \"on\" or \"off\"", v, d.name),
            &d.span,
        )
    })
}

fn time(d: &Directive, v: &str) -> Result<Duration, ConfError> {
    value::parse_time(v).ok_or_else(|| invalid(d, v))
}

/// `proxy_cache_path` / `fastcgi_cache_path`: a zone of `module`'s.
pub fn cache_path(d: &Directive, ctx: &mut Ctx, module: &'static str) -> R {
    let path = ctx.path(arg(d, 0));
    let mut z = ZoneConf {
        name: String::new(),
        path,
        levels: Vec::new(),
        keys_size: 0,
        inactive: Duration::from_secs(600),
        max_size: None,
        min_free: None,
        use_temp_path: true,
        memory: 0,
        manager_files: 100,
        manager_sleep: Duration::from_millis(50),
        manager_threshold: Duration::from_millis(200),
        loader_files: 100,
        loader_sleep: Duration::from_millis(50),
        loader_threshold: Duration::from_millis(200),
        defined_at: String::new(),
        module,
        resolved: std::sync::OnceLock::new(),
        metrics: u32::MAX,
    };
    let mut memory = None;
    z.defined_at = format!("{}:{}", d.span.file.display(), d.span.line);
    for w in &d.args[1..] {
        let a = w.text.as_str();
        let bad = || ConfError::at(format!("invalid parameter \"{}\"", a), &d.span);
        let (k, v) = a.split_once('=').ok_or_else(bad)?;
        match k {
            "levels" => {
                let mut levels = Vec::new();
                for part in v.split(':') {
                    match part {
                        "1" => levels.push(1),
                        "2" => levels.push(2),
                        _ => return Err(ConfError::at(format!("invalid \"levels\" \"{}\"", a), &d.span)),
                    }
                }
                if levels.is_empty() || levels.len() > 3 {
                    return Err(ConfError::at(format!("invalid \"levels\" \"{}\"", a), &d.span));
                }
                z.levels = levels;
            }
            "keys_zone" => {
                let bad_size = || ConfError::at(format!("invalid keys zone size \"{}\"", a), &d.span);
                let (name, size) = v.split_once(':').ok_or_else(bad_size)?;
                if name.is_empty() {
                    return Err(bad_size());
                }
                let size = value::parse_size(size).ok_or_else(bad_size)?;
                if size < 8192 {
                    return Err(ConfError::at(format!("keys zone \"{}\" is too small", a), &d.span));
                }
                z.name = name.to_string();
                z.keys_size = size;
            }
            "inactive" => z.inactive = value::parse_time(v).ok_or_else(|| inv(d, k, a))?,
            "max_size" => z.max_size = Some(value::parse_size(v).ok_or_else(|| inv(d, k, a))?),
            "min_free" => z.min_free = Some(value::parse_size(v).ok_or_else(|| inv(d, k, a))?),
            "use_temp_path" => z.use_temp_path = value::parse_flag(v).ok_or_else(|| inv(d, k, a))?,
            "memory" => memory = Some(value::parse_size(v).ok_or_else(|| inv(d, k, a))?),
            "manager_files" => z.manager_files = pos_number(d, k, a, v)?,
            "loader_files" => z.loader_files = pos_number(d, k, a, v)?,
            "manager_sleep" => z.manager_sleep = value::parse_time(v).ok_or_else(|| inv(d, k, a))?,
            "loader_sleep" => z.loader_sleep = value::parse_time(v).ok_or_else(|| inv(d, k, a))?,
            "manager_threshold" => z.manager_threshold = value::parse_time(v).ok_or_else(|| inv(d, k, a))?,
            "loader_threshold" => z.loader_threshold = value::parse_time(v).ok_or_else(|| inv(d, k, a))?,
            _ => return Err(bad()),
        }
    }
    if z.name.is_empty() {
        return Err(ConfError::at(format!("\"{}\" must have \"keys_zone\" parameter", d.name), &d.span));
    }
    z.memory = memory.unwrap_or_else(|| (z.keys_size / 4 * 64).min(256 << 20));
    z.metrics = crate::metrics::cache_index(&z.name);
    if let Some(o) = ctx.cache_zones.get(&z.name) {
        let why = if o.module == module { "duplicate zone \"{}\"" } else { DIFFERENT_USE };
        return Err(ConfError::at(why.replace("{}", &z.name), &d.span));
    }
    if let Some(o) = ctx.cache_zones.values().find(|o| o.path == z.path) {
        return Err(ConfError::at(
            format!("the same path name \"{}\" used in {} and in {}", z.path.display(), o.defined_at, z.defined_at),
            &d.span,
        ));
    }
    ctx.cache_zones.insert(z.name.clone(), Arc::new(z));
    Ok(())
}

/// nginx's `invalid inactive value "inactive=zz"`.
fn inv(d: &Directive, k: &str, a: &str) -> ConfError {
    ConfError::at(format!("invalid {} value \"{}\"", k, a), &d.span)
}

fn pos_number(d: &Directive, k: &str, a: &str, v: &str) -> Result<u64, ConfError> {
    value::parse_number(v).filter(|n| *n > 0).ok_or_else(|| inv(d, k, a))
}

/// nginx's plain `invalid value "X"` (no directive name).
fn bad_value(d: &Directive, v: &str) -> ConfError {
    ConfError::at(format!("invalid value \"{}\"", v), &d.span)
}

pub fn cache(c: &mut CacheConf, d: &Directive, ctx: &mut Ctx, module: &str) -> R {
    let name = arg(d, 0);
    if name == "off" {
        c.zone = CacheZone::Off;
        return Ok(());
    }
    if name.contains('$') {
        let t = template(d, name)?;
        let own: Zones =
            ctx.cache_zones.iter().filter(|(_, z)| z.module == module).map(|(n, z)| (n.clone(), z.clone())).collect();
        c.zone = CacheZone::Var(Arc::new(t), Arc::new(own));
        return Ok(());
    }
    let z = ctx
        .cache_zones
        .get(name)
        .ok_or_else(|| ConfError::at(format!("\"{}\" zone \"{}\" is unknown", d.name, name), &d.span))?;
    // A zone belongs to the module whose *_cache_path made it, as nginx's
    // shared memory zones carry their module's tag.
    if z.module != module {
        return Err(ConfError::at(DIFFERENT_USE.replace("{}", name), &d.span));
    }
    c.zone = CacheZone::Zone(z.clone());
    Ok(())
}

fn template(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

pub fn key(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.key = Some(Arc::new(template(d, arg(d, 0))?));
    Ok(())
}

pub fn valid(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    let n = d.args.len();
    let t = time(d, arg(d, n - 1))?;
    let mut codes = Vec::new();
    let mut any = false;
    for w in &d.args[..n - 1] {
        if w.text == "any" {
            any = true;
            continue;
        }
        match value::parse_number(&w.text) {
            Some(s) if (100..=599).contains(&s) => codes.push(s as u16),
            _ => return Err(ConfError::at(format!("invalid status \"{}\"", w.text), &d.span)),
        }
    }
    if n == 1 {
        codes = vec![200, 301, 302];
    }
    if any {
        codes.clear();
    }
    c.valid.push(Valid { codes, time: t });
    Ok(())
}

pub fn methods(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.post = false;
    for w in &d.args {
        match w.text.as_str() {
            "GET" | "HEAD" => {}
            "POST" => c.post = true,
            other => return Err(bad_value(d, other)),
        }
    }
    Ok(())
}

pub fn min_uses(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.min_uses = value::parse_number(v).and_then(|n| u32::try_from(n).ok()).ok_or_else(|| invalid(d, v))?;
    Ok(())
}

pub fn bypass(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    for w in &d.args {
        c.bypass.push(template(d, &w.text)?);
    }
    Ok(())
}

pub fn no_cache(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    for w in &d.args {
        c.no_cache.push(template(d, &w.text)?);
    }
    Ok(())
}

pub fn use_stale(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    let mut s = UseStale::default();
    for w in &d.args {
        match w.text.as_str() {
            "off" if d.args.len() == 1 => {}
            "error" => s.error = true,
            "timeout" => s.timeout = true,
            "invalid_header" => s.invalid_header = true,
            "updating" => s.updating = true,
            other => {
                let code = other.strip_prefix("http_").and_then(|c| c.parse::<u16>().ok());
                match code.and_then(|c| STALE_STATUSES.iter().position(|s| *s == c)) {
                    Some(i) => s.statuses[i] = true,
                    None => return Err(bad_value(d, other)),
                }
            }
        }
    }
    c.use_stale = s;
    Ok(())
}

pub fn background_update(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.background_update = flag(d)?;
    Ok(())
}

pub fn lock(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.lock = flag(d)?;
    Ok(())
}

pub fn lock_timeout(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.lock_timeout = time(d, arg(d, 0))?;
    Ok(())
}

pub fn lock_age(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.lock_age = time(d, arg(d, 0))?;
    Ok(())
}

pub fn revalidate(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.revalidate = flag(d)?;
    Ok(())
}

pub fn convert_head(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    c.convert_head = flag(d)?;
    Ok(())
}

pub fn max_range_offset(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    c.max_range_offset = Some(value::parse_number(v).ok_or_else(|| invalid(d, v))?);
    Ok(())
}

/// nginx's bitmask: repeated at a level, the directive adds to what the
/// level set (the inherited value is dropped by the first one).
pub fn ignore_headers(c: &mut CacheConf, d: &Directive, _: &mut Ctx) -> R {
    let mut i = c.ignore;
    for w in &d.args {
        match w.text.to_ascii_lowercase().as_str() {
            "x-accel-expires" => i.x_accel_expires = true,
            "x-accel-redirect" => i.x_accel_redirect = true,
            "x-accel-limit-rate" => i.x_accel_limit_rate = true,
            "x-accel-buffering" => i.x_accel_buffering = true,
            "x-accel-charset" => i.x_accel_charset = true,
            "expires" => i.expires = true,
            "cache-control" => i.cache_control = true,
            "set-cookie" => i.set_cookie = true,
            "vary" => i.vary = true,
            _ => return Err(bad_value(d, &w.text)),
        }
    }
    c.ignore = i;
    Ok(())
}

pub fn purge(c: &mut CacheConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.purge = super::purge::parse(d, &ctx.cache_zones)?;
    Ok(())
}

/// The cache settings a location's requests use: its FastCGI module's when
/// it has `fastcgi_pass`, else the proxy module's.
pub fn of(lc: &LocConf) -> &CacheConf {
    &crate::http::proxy::up_conf(lc).cache
}

/// Load-time checks once a server, location or `if` level is complete:
/// nginx has no default `fastcgi_cache_key`; it warns and uses an empty
/// key (every response of the location shares one entry), and so does
/// sluice.
pub fn check_level(l: &mut LocConf, dirs: &[Directive], ctx: &mut Ctx) {
    // Read first: a module's settings are copied only when written
    // (`config::shared`), and most levels need no change.
    let missing = |c: &CacheConf| c.zone.is_on() && c.key.is_none();
    let modules = [
        ("fastcgi", missing(&l.fastcgi.up.cache)),
        ("uwsgi", missing(&l.uwsgi.up.cache)),
        ("scgi", missing(&l.scgi.up.cache)),
    ];
    for (p, _) in modules.into_iter().filter(|(_, m)| *m) {
        let name = format!("{p}_cache");
        if let Some(d) = dirs.iter().find(|d| d.name == name).or(dirs.first()) {
            ctx.warnings.push(ConfError::at(format!("no \"{p}_cache_key\" for \"{name}\""), &d.span).to_string());
        }
        let c = match p {
            "fastcgi" => &mut l.fastcgi.up.cache,
            "uwsgi" => &mut l.uwsgi.up.cache,
            _ => &mut l.scgi.up.cache,
        };
        c.key = Some(Arc::new(Template { parts: Vec::new() }));
    }
}
