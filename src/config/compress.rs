//! The compression directives: nginx's gzip and gzip_static modules (with
//! the core's `gzip_vary`, `gzip_proxied`, `gzip_disable` and
//! `gzip_http_version`), ngx_brotli's `brotli*` directives, the zstd
//! module's `zstd*` directives (as Tengine ships them), and sluice's own
//! `compress_preference`. Their rows live in [`TABLE`]; the request path
//! reads the resolved [`CompressConf`] in `LocConf::compress`.

use std::sync::Arc;

use super::build::Ctx;
use super::model::LocConf;
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid, number};
use super::table::{Cmd, HSL, R, Set, cmd, list};
use super::value;
use crate::http::filter::compress::negotiate::Coding;

/// `gzip_proxied` flags (nginx's `NGX_HTTP_GZIP_PROXIED_*`).
pub mod proxied {
    pub const OFF: u16 = 0x0002;
    pub const EXPIRED: u16 = 0x0004;
    pub const NO_CACHE: u16 = 0x0008;
    pub const NO_STORE: u16 = 0x0010;
    pub const PRIVATE: u16 = 0x0020;
    pub const NO_LM: u16 = 0x0040;
    pub const NO_ETAG: u16 = 0x0080;
    pub const AUTH: u16 = 0x0100;
    pub const ANY: u16 = 0x0200;
}

/// `*_types`: the MIME types a filter compresses. `text/html` is always in
/// the list, as nginx adds it to every `gzip_types`.
#[derive(Clone, Debug, PartialEq)]
pub enum MimeTypes {
    /// `*`: every response, with or without a Content-Type.
    Any,
    /// Lowercase types without parameters.
    List(Arc<Vec<String>>),
}

impl Default for MimeTypes {
    fn default() -> Self {
        MimeTypes::List(Arc::new(vec!["text/html".to_string()]))
    }
}

impl MimeTypes {
    /// Whether a response with this Content-Type (parameters ignored, case
    /// ignored, as nginx's `ngx_http_test_content_type`) is listed.
    pub fn matches(&self, content_type: Option<&str>) -> bool {
        match self {
            MimeTypes::Any => true,
            MimeTypes::List(l) => {
                let Some(ct) = content_type else { return false };
                let base = ct.split(';').next().unwrap_or("").trim_ascii();
                !base.is_empty() && l.iter().any(|t| t.eq_ignore_ascii_case(base))
            }
        }
    }
}

/// `*_static off | on | always`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum StaticMode {
    #[default]
    Off,
    /// Served when the client accepts the encoding.
    On,
    /// Served whatever the client said.
    Always,
}

/// One on-the-fly encoder's settings (`gzip`, `brotli`, `zstd`).
#[derive(Clone, Debug)]
pub struct Filter {
    pub on: bool,
    pub level: i32,
    pub types: MimeTypes,
    /// Responses whose length is known and below this stay as they are.
    pub min_length: u64,
    pub precompressed: StaticMode,
}

/// What `gzip_disable` lists: regexes matched against User-Agent
/// (case-insensitively) and the `msie6` mask.
#[derive(Clone, Debug, Default)]
pub struct Disable {
    pub regexes: Arc<Vec<regex::bytes::Regex>>,
    pub msie6: bool,
}

#[derive(Clone, Debug)]
pub struct CompressConf {
    pub gzip: Filter,
    pub brotli: Filter,
    pub zstd: Filter,
    /// `brotli_window` as window bits (10..=24).
    pub brotli_window: u32,
    /// `gzip_vary`: send `Vary: Accept-Encoding` where a filter or a
    /// precompressed file looked at the request's Accept-Encoding.
    pub vary: bool,
    pub proxied: u16,
    pub disable: Disable,
    /// `gzip_http_version 1.0` lets HTTP/1.0 clients have gzip.
    pub http10: bool,
    /// `compress_preference`: ties between equally acceptable encodings go
    /// to the first listed.
    pub preference: [Coding; 3],
}

impl Default for CompressConf {
    fn default() -> Self {
        let filter = |level| Filter {
            on: false,
            level,
            types: MimeTypes::default(),
            min_length: 20,
            precompressed: StaticMode::Off,
        };
        CompressConf {
            gzip: filter(1),
            brotli: filter(6),
            zstd: filter(1),
            brotli_window: 19,
            vary: false,
            proxied: proxied::OFF,
            disable: Disable::default(),
            http10: false,
            preference: [Coding::Zstd, Coding::Br, Coding::Gzip],
        }
    }
}

impl CompressConf {
    pub fn filter(&self, c: Coding) -> &Filter {
        match c {
            Coding::Gzip => &self.gzip,
            Coding::Br => &self.brotli,
            Coding::Zstd => &self.zstd,
        }
    }

    /// Nothing in this module can touch a response here: the filter's
    /// fast path.
    pub fn idle(&self) -> bool {
        !(self.gzip.on || self.brotli.on || self.zstd.on)
    }

    pub fn any_static(&self) -> bool {
        [&self.gzip, &self.brotli, &self.zstd].iter().any(|f| f.precompressed != StaticMode::Off)
    }
}

fn filter_of<'l>(l: &'l mut LocConf, d: &Directive) -> &'l mut Filter {
    let c = &mut l.compress;
    match d.name.split('_').next().unwrap_or("") {
        "brotli" => &mut c.brotli,
        "zstd" => &mut c.zstd,
        _ => &mut c.gzip,
    }
}

fn on(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = flag(d)?;
    filter_of(l, d).on = v;
    Ok(())
}

fn level_bounds(d: &Directive) -> (i64, i64) {
    match d.name.as_str() {
        "brotli_comp_level" => (0, 11),
        "zstd_comp_level" => (-(1 << 17), 22),
        _ => (1, 9),
    }
}

fn comp_level(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let n: i64 = match v.strip_prefix('-') {
        Some(rest) if d.name == "zstd_comp_level" => value::parse_number(rest).map(|n| -(n as i64)),
        _ => value::parse_number(v).map(|n| n as i64),
    }
    .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid number", d.name), &d.span))?;
    let (lo, hi) = level_bounds(d);
    if d.name == "zstd_comp_level" && (n == 0 || n < lo || n > hi) {
        return Err(ConfError::at(format!("zstd compress level must between {lo} and {hi} excluding 0"), &d.span));
    }
    if n < lo || n > hi {
        return Err(ConfError::at(format!("value must be between {lo} and {hi}"), &d.span));
    }
    filter_of(l, d).level = n as i32;
    Ok(())
}

fn min_length(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let n = value::parse_size(v).ok_or_else(|| invalid(d, v))?;
    filter_of(l, d).min_length = n;
    Ok(())
}

/// The first `*_types` at a level starts from `text/html` alone (one reset
/// per filter: the hook has no directive to tell them apart); more lines at
/// the same level add to it, and `*` makes it match everything.
fn reset_gzip_types(l: &mut LocConf) {
    l.compress.gzip.types = MimeTypes::default();
}
fn reset_brotli_types(l: &mut LocConf) {
    l.compress.brotli.types = MimeTypes::default();
}
fn reset_zstd_types(l: &mut LocConf) {
    l.compress.zstd.types = MimeTypes::default();
}

fn types(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let f = filter_of(l, d);
    for w in &d.args {
        if w.text == "*" {
            f.types = MimeTypes::Any;
        }
        if let MimeTypes::List(list) = &mut f.types {
            let t = w.text.to_ascii_lowercase();
            if !list.contains(&t) {
                Arc::make_mut(list).push(t);
            }
        }
    }
    Ok(())
}

fn static_mode(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let m = match v {
        "off" => StaticMode::Off,
        "on" => StaticMode::On,
        "always" => StaticMode::Always,
        // nginx's enum slot says no more than this.
        _ => return Err(ConfError::at(format!("invalid value \"{}\"", v), &d.span)),
    };
    filter_of(l, d).precompressed = m;
    Ok(())
}

fn gzip_vary(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.compress.vary = flag(d)?;
    Ok(())
}

fn reset_proxied(l: &mut LocConf) {
    l.compress.proxied = 0;
}

/// nginx's bitmask slot: every value ORs its flag in; several lines at one
/// level add up.
fn gzip_proxied(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    for w in &d.args {
        let bit = match w.text.as_str() {
            "off" => proxied::OFF,
            "expired" => proxied::EXPIRED,
            "no-cache" => proxied::NO_CACHE,
            "no-store" => proxied::NO_STORE,
            "private" => proxied::PRIVATE,
            "no_last_modified" => proxied::NO_LM,
            "no_etag" => proxied::NO_ETAG,
            "auth" => proxied::AUTH,
            "any" => proxied::ANY,
            v => return Err(ConfError::at(format!("invalid value \"{}\"", v), &d.span)),
        };
        l.compress.proxied |= bit;
    }
    Ok(())
}

fn reset_disable(l: &mut LocConf) {
    // A level's own gzip_disable replaces the inherited regexes; `msie6`
    // is inherited unless this level names it (nginx's merge).
    l.compress.disable.regexes = Arc::new(Vec::new());
}

fn gzip_disable(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    for w in &d.args {
        if w.text == "msie6" {
            l.compress.disable.msie6 = true;
            continue;
        }
        let re = regex::bytes::RegexBuilder::new(&w.text).case_insensitive(true).build().map_err(|e| {
            ConfError::at(format!("{}", e).lines().last().unwrap_or("invalid regex").to_string(), &d.span)
        })?;
        Arc::make_mut(&mut l.compress.disable.regexes).push(re);
    }
    Ok(())
}

fn gzip_http_version(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    l.compress.http10 = match arg(d, 0) {
        "1.0" => true,
        "1.1" => false,
        v => return Err(ConfError::at(format!("invalid value \"{}\"", v), &d.span)),
    };
    Ok(())
}

/// `gzip_buffers N SIZE` (and brotli's, zstd's): sluice's encoders write
/// into one buffer per response, so the sizes are checked and not used.
fn buffers(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = number(d, 0)?;
    let size = value::parse_size(arg(d, 1)).ok_or_else(|| invalid(d, arg(d, 1)))?;
    if n == 0 || size == 0 {
        return Err(invalid(d, arg(d, if n == 0 { 0 } else { 1 })));
    }
    Ok(())
}

/// zlib's `gzip_window` and `gzip_hash` (window and hash memory): checked
/// with nginx's messages and not used, as zlib-rs's defaults (the largest
/// window, memLevel 8, nginx's own defaults) serve every response.
fn zlib_memory(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let (max, allowed) = match d.name.as_str() {
        "gzip_window" => (32 * 1024, "512, 1k, 2k, 4k, 8k, 16k, or 32k"),
        _ => (128 * 1024, "512, 1k, 2k, 4k, 8k, 16k, 32k, 64k, or 128k"),
    };
    match value::parse_size(arg(d, 0)) {
        Some(n) if n.is_power_of_two() && (512..=max).contains(&n) => Ok(()),
        _ => Err(ConfError::at(format!("\"{}\" directive must be {allowed}", d.name), &d.span)),
    }
}

/// `gzip_no_buffer` (a flag) and `postpone_gzipping` (a size): nginx
/// tuning of when output is gzipped; checked, not used (sluice compresses
/// each piece of body as it comes).
fn gzip_timing(_: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    if d.name == "gzip_no_buffer" {
        flag(d)?;
    } else if value::parse_size(arg(d, 0)).is_none() {
        return Err(ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span));
    }
    Ok(())
}

fn brotli_window(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let n = value::parse_size(v).ok_or_else(|| invalid(d, v))?;
    let bits = (10..=24).find(|b| 1u64 << b == n).ok_or_else(|| {
        ConfError::at(
            format!(
                "\"{}\" directive must be 1k, 2k, 4k, 8k, 16k, 32k, 64k, 128k, 256k, 512k, 1m, 2m, 4m, 8m or 16m",
                d.name
            ),
            &d.span,
        )
    })?;
    l.compress.brotli_window = bits;
    Ok(())
}

fn compress_preference(l: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut order: Vec<Coding> = Vec::with_capacity(3);
    for w in &d.args {
        let c = Coding::from_name(w.text.as_bytes()).ok_or_else(|| {
            ConfError::at(format!("unknown encoding \"{}\" in \"{}\" directive", w.text, d.name), &d.span)
        })?;
        if order.contains(&c) {
            return Err(ConfError::at(
                format!("duplicate encoding \"{}\" in \"{}\" directive", w.text, d.name),
                &d.span,
            ));
        }
        order.push(c);
    }
    // Unlisted encodings keep their default order after the listed ones.
    for c in [Coding::Zstd, Coding::Br, Coding::Gzip] {
        if !order.contains(&c) {
            order.push(c);
        }
    }
    l.compress.preference = [order[0], order[1], order[2]];
    Ok(())
}

/// The module's directive table (see `table::TABLES`).
pub static TABLE: &[Cmd] = &[
    // nginx's gzip filter (`gzip` is also valid in `if` blocks there, which
    // sluice does not have yet).
    cmd("gzip", HSL, 1, 1, Set::Loc(on)),
    cmd("gzip_comp_level", HSL, 1, 1, Set::Loc(comp_level)),
    list(cmd("gzip_types", HSL, 1, usize::MAX, Set::Loc(types)), reset_gzip_types),
    cmd("gzip_min_length", HSL, 1, 1, Set::Loc(min_length)),
    cmd("gzip_buffers", HSL, 2, 2, Set::Loc(buffers)),
    cmd("gzip_static", HSL, 1, 1, Set::Loc(static_mode)),
    // core module's gzip settings
    cmd("gzip_vary", HSL, 1, 1, Set::Loc(gzip_vary)),
    list(cmd("gzip_proxied", HSL, 1, usize::MAX, Set::Loc(gzip_proxied)), reset_proxied),
    list(cmd("gzip_disable", HSL, 1, usize::MAX, Set::Loc(gzip_disable)), reset_disable),
    cmd("gzip_http_version", HSL, 1, 1, Set::Loc(gzip_http_version)),
    cmd("gzip_window", HSL, 1, 1, Set::Loc(zlib_memory)),
    cmd("gzip_hash", HSL, 1, 1, Set::Loc(zlib_memory)),
    cmd("gzip_no_buffer", HSL, 1, 1, Set::Loc(gzip_timing)),
    cmd("postpone_gzipping", HSL, 1, 1, Set::Loc(gzip_timing)),
    // ngx_brotli
    cmd("brotli", HSL, 1, 1, Set::Loc(on)),
    cmd("brotli_comp_level", HSL, 1, 1, Set::Loc(comp_level)),
    list(cmd("brotli_types", HSL, 1, usize::MAX, Set::Loc(types)), reset_brotli_types),
    cmd("brotli_min_length", HSL, 1, 1, Set::Loc(min_length)),
    cmd("brotli_window", HSL, 1, 1, Set::Loc(brotli_window)),
    cmd("brotli_buffers", HSL, 2, 2, Set::Loc(buffers)),
    cmd("brotli_static", HSL, 1, 1, Set::Loc(static_mode)),
    // the zstd module (Tengine)
    cmd("zstd", HSL, 1, 1, Set::Loc(on)),
    cmd("zstd_comp_level", HSL, 1, 1, Set::Loc(comp_level)),
    list(cmd("zstd_types", HSL, 1, usize::MAX, Set::Loc(types)), reset_zstd_types),
    cmd("zstd_min_length", HSL, 1, 1, Set::Loc(min_length)),
    cmd("zstd_buffers", HSL, 2, 2, Set::Loc(buffers)),
    cmd("zstd_static", HSL, 1, 1, Set::Loc(static_mode)),
    // sluice's own
    cmd("compress_preference", HSL, 1, 3, Set::Loc(compress_preference)),
];
