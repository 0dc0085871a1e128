//! nginx core-module settings that shape requests and redirects
//! (`internal`, `recursive_error_pages`, `absolute_redirect`,
//! `port_in_redirect`, `server_name_in_redirect`, `max_ranges`,
//! `chunked_transfer_encoding`, `underscores_in_headers`,
//! `ignore_invalid_headers`, `open_log_file_cache`), and the tuning
//! directives of nginx's own memory and I/O model that sluice accepts with
//! their values checked but has no use for (documented in docs/configuration.md, "Accepted
//! directives"), so that configs carrying them run unchanged.

use super::build::Ctx;
use super::model::LocConf;
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid};
use super::table::{Cmd, HSL, HTTP, LOC, MANY, R, SRV, Set, cmd};
use super::value;

/// The per-level flags (in `LocConf::core`).
#[derive(Clone, Debug)]
pub struct CoreFlags {
    /// `internal`: only internal requests (redirects by rewrite,
    /// error_page, try_files, index, X-Accel-Redirect) may use the
    /// location; others get 404. Not inherited (a location's own).
    pub internal: bool,
    pub recursive_error_pages: bool,
    pub absolute_redirect: bool,
    pub port_in_redirect: bool,
    pub server_name_in_redirect: bool,
    /// None: no limit; Some(0): ranges are not served.
    pub max_ranges: Option<usize>,
    pub chunked_transfer_encoding: bool,
    /// Server level, read when a head is parsed (the listening address's
    /// default server's, as nginx before the Host header is known).
    pub underscores_in_headers: bool,
    pub ignore_invalid_headers: bool,
    /// `merge_slashes`: `//` in a request URI becomes `/` (server level,
    /// read from the address's default server when the URI is parsed).
    pub merge_slashes: bool,
    /// `max_headers`: header lines a request may have (server level, read
    /// with the other head limits).
    pub max_headers: usize,
    /// `keepalive_disable`: [`KEEPALIVE_MSIE6`] | [`KEEPALIVE_SAFARI`].
    pub keepalive_disable: u8,
    /// `msie_padding`: error pages for MSIE and Chrome padded past the size
    /// below which they show their own.
    pub msie_padding: bool,
    /// `msie_refresh`: MSIE gets a 301/302 as a page that refreshes.
    pub msie_refresh: bool,
    /// `open_log_file_cache`: for access logs with variables in the path.
    pub open_log_file_cache: Option<crate::log::access_path::LogFileCache>,
}

/// `keepalive_disable msie6`: no keep-alive after an old MSIE's POST.
pub const KEEPALIVE_MSIE6: u8 = 1;
/// `keepalive_disable safari`: no keep-alive with Safari on macOS.
pub const KEEPALIVE_SAFARI: u8 = 2;

impl Default for CoreFlags {
    fn default() -> Self {
        CoreFlags {
            internal: false,
            recursive_error_pages: false,
            absolute_redirect: true,
            port_in_redirect: true,
            server_name_in_redirect: false,
            max_ranges: None,
            chunked_transfer_encoding: true,
            underscores_in_headers: false,
            ignore_invalid_headers: true,
            merge_slashes: true,
            max_headers: 1000,
            keepalive_disable: KEEPALIVE_MSIE6,
            msie_padding: true,
            msie_refresh: false,
            open_log_file_cache: None,
        }
    }
}

pub static DIRECTIVES: &[Cmd] = &[
    cmd("internal", LOC, 0, 0, Set::Loc(internal)),
    cmd("recursive_error_pages", HSL, 1, 1, Set::Loc(recursive_error_pages)),
    cmd("absolute_redirect", HSL, 1, 1, Set::Loc(absolute_redirect)),
    cmd("port_in_redirect", HSL, 1, 1, Set::Loc(port_in_redirect)),
    cmd("server_name_in_redirect", HSL, 1, 1, Set::Loc(server_name_in_redirect)),
    cmd("max_ranges", HSL, 1, 1, Set::Loc(max_ranges)),
    cmd("chunked_transfer_encoding", HSL, 1, 1, Set::Loc(chunked_transfer_encoding)),
    cmd("underscores_in_headers", HTTP | SRV, 1, 1, Set::Loc(underscores_in_headers)),
    cmd("ignore_invalid_headers", HTTP | SRV, 1, 1, Set::Loc(ignore_invalid_headers)),
    cmd("merge_slashes", HTTP | SRV, 1, 1, Set::Loc(merge_slashes)),
    cmd("max_headers", HTTP | SRV, 1, 1, Set::Loc(max_headers)),
    // Accepted: nginx's memory pools, hash sizing, and I/O paths sluice
    // does not have (values checked as nginx checks them).
    cmd("lingering_close", HSL, 1, 1, Set::Ctx(lingering_close)),
    cmd("lingering_time", HSL, 1, 1, Set::Ctx(time)),
    cmd("lingering_timeout", HSL, 1, 1, Set::Ctx(time)),
    cmd("reset_timedout_connection", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("open_log_file_cache", HSL, 1, 4, Set::Loc(open_log_file_cache)),
    cmd("aio", HSL, 1, 1, Set::Ctx(aio)),
    cmd("aio_write", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("directio", HSL, 1, 1, Set::Ctx(size_or_off)),
    cmd("directio_alignment", HSL, 1, 1, Set::Ctx(size)),
    cmd("read_ahead", HSL, 1, 1, Set::Ctx(size)),
    cmd("send_lowat", HSL, 1, 1, Set::Ctx(lowat)),
    cmd("proxy_send_lowat", HSL, 1, 1, Set::Ctx(lowat)),
    cmd("fastcgi_send_lowat", HSL, 1, 1, Set::Ctx(lowat)),
    cmd("open_file_cache_events", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("http2_pool_size", HTTP | SRV, 1, 1, Set::Ctx(http2_pool_size)),
    cmd("http2_streams_index_size", HTTP | SRV, 1, 1, Set::Ctx(http2_streams_index_size)),
    cmd("variables_hash_max_size", HTTP, 1, 1, Set::Ctx(number)),
    cmd("variables_hash_bucket_size", HTTP, 1, 1, Set::Ctx(number)),
    cmd("map_hash_max_size", HTTP, 1, 1, Set::Ctx(number)),
    cmd("map_hash_bucket_size", HTTP, 1, 1, Set::Ctx(number)),
    cmd("proxy_headers_hash_max_size", HSL, 1, 1, Set::Ctx(number)),
    cmd("proxy_headers_hash_bucket_size", HSL, 1, 1, Set::Ctx(number)),
    cmd("connection_pool_size", HTTP | SRV, 1, 1, Set::Ctx(size)),
    cmd("request_pool_size", HTTP | SRV, 1, 1, Set::Ctx(size)),
    cmd("keepalive_disable", HSL, 1, MANY, Set::Loc(keepalive_disable)),
    cmd("msie_padding", HSL, 1, 1, Set::Loc(msie_padding)),
    cmd("msie_refresh", HSL, 1, 1, Set::Loc(msie_refresh)),
    cmd("client_body_in_single_buffer", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("proxy_socket_keepalive", HSL, 1, 1, Set::Ctx(on_off)),
    cmd("fastcgi_socket_keepalive", HSL, 1, 1, Set::Ctx(on_off)),
];

pub fn internal(c: &mut LocConf, _: &Directive, _: &mut Ctx) -> R {
    c.core.internal = true;
    Ok(())
}

pub fn recursive_error_pages(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.recursive_error_pages = flag(d)?;
    Ok(())
}

pub fn absolute_redirect(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.absolute_redirect = flag(d)?;
    Ok(())
}

pub fn port_in_redirect(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.port_in_redirect = flag(d)?;
    Ok(())
}

pub fn server_name_in_redirect(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.server_name_in_redirect = flag(d)?;
    Ok(())
}

pub fn max_ranges(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = arg(d, 0);
    let n = value::parse_number(v).and_then(|n| usize::try_from(n).ok()).ok_or_else(|| invalid(d, v))?;
    c.core.max_ranges = Some(n);
    Ok(())
}

pub fn chunked_transfer_encoding(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.chunked_transfer_encoding = flag(d)?;
    Ok(())
}

pub fn underscores_in_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.underscores_in_headers = flag(d)?;
    Ok(())
}

pub fn ignore_invalid_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.ignore_invalid_headers = flag(d)?;
    Ok(())
}

fn max_headers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = value::parse_number(arg(d, 0)).ok_or_else(|| slot_error(d, "invalid number"))?;
    c.core.max_headers = usize::try_from(n).unwrap_or(usize::MAX);
    Ok(())
}

fn merge_slashes(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.merge_slashes = flag(d)?;
    Ok(())
}

fn on_off(d: &Directive, _: &mut Ctx) -> R {
    flag(d).map(|_| ())
}

/// nginx's slot message for a value it cannot read: `"NAME" directive
/// invalid value`.
fn slot_error(d: &Directive, what: &str) -> ConfError {
    ConfError::at(format!("\"{}\" directive {}", d.name, what), &d.span)
}

fn time(d: &Directive, _: &mut Ctx) -> R {
    value::parse_time(arg(d, 0)).map(|_| ()).ok_or_else(|| slot_error(d, "invalid value"))
}

fn size(d: &Directive, _: &mut Ctx) -> R {
    value::parse_size(arg(d, 0)).map(|_| ()).ok_or_else(|| slot_error(d, "invalid value"))
}

fn size_or_off(d: &Directive, ctx: &mut Ctx) -> R {
    if arg(d, 0) == "off" { Ok(()) } else { size(d, ctx) }
}

fn number(d: &Directive, _: &mut Ctx) -> R {
    value::parse_number(arg(d, 0)).map(|_| ()).ok_or_else(|| slot_error(d, "invalid number"))
}

/// nginx's enum and bitmask slots: `invalid value "X"`.
fn bad_word(d: &Directive, v: &str) -> ConfError {
    ConfError::at(format!("invalid value \"{}\"", v), &d.span)
}

fn one_of(d: &Directive, allowed: &[&str]) -> R {
    let v = arg(d, 0);
    if allowed.contains(&v) { Ok(()) } else { Err(bad_word(d, v)) }
}

fn lingering_close(d: &Directive, _: &mut Ctx) -> R {
    one_of(d, &["off", "on", "always"])
}

/// `aio on|off|threads[=POOL]`; a named pool must be declared by a
/// `thread_pool` somewhere in the file.
fn aio(d: &Directive, ctx: &mut Ctx) -> R {
    let v = arg(d, 0);
    if let Some(pool) = v.strip_prefix("threads=")
        && !pool.contains('$')
    {
        let e = ConfError::at(format!("unknown thread pool \"{pool}\""), &d.span);
        ctx.aio_pools.push((pool.to_string(), e));
    }
    if matches!(v, "on" | "off" | "threads") || v.starts_with("threads=") { Ok(()) } else { Err(bad_word(d, v)) }
}

fn keepalive_disable(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut bits = 0;
    for w in &d.args {
        bits |= match w.text.as_str() {
            "none" => 0,
            "msie6" => KEEPALIVE_MSIE6,
            "safari" => KEEPALIVE_SAFARI,
            _ => return Err(bad_word(d, &w.text)),
        };
    }
    c.core.keepalive_disable = bits;
    Ok(())
}

fn msie_padding(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.msie_padding = flag(d)?;
    Ok(())
}

fn msie_refresh(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.core.msie_refresh = flag(d)?;
    Ok(())
}

/// `open_log_file_cache off | max=N [inactive=T] [min_uses=N] [valid=T]`:
/// the descriptors of access logs whose path has variables, kept per
/// worker (`crate::log::access_path`); nginx's defaults and messages.
fn open_log_file_cache(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    if d.args.len() == 1 && arg(d, 0) == "off" {
        c.core.open_log_file_cache = None;
        return Ok(());
    }
    let mut conf = crate::log::access_path::LogFileCache {
        max: 0,
        inactive: std::time::Duration::from_secs(10),
        min_uses: 1,
        valid: std::time::Duration::from_secs(60),
    };
    for w in &d.args {
        let bad = || ConfError::at(format!("invalid \"open_log_file_cache\" parameter \"{}\"", w.text), &d.span);
        match w.text.split_once('=') {
            Some(("max", n)) => {
                conf.max = value::parse_number(n).filter(|n| *n > 0).ok_or_else(bad)? as usize;
            }
            Some(("min_uses", n)) => {
                conf.min_uses = value::parse_number(n).and_then(|n| u32::try_from(n).ok()).ok_or_else(bad)?;
            }
            Some(("inactive", t)) => conf.inactive = value::parse_time(t).ok_or_else(bad)?,
            Some(("valid", t)) => conf.valid = value::parse_time(t).ok_or_else(bad)?,
            _ => return Err(bad()),
        }
    }
    if conf.max == 0 {
        return Err(ConfError::at("\"open_log_file_cache\" must have \"max\" parameter", &d.span));
    }
    c.core.open_log_file_cache = Some(conf);
    Ok(())
}

/// `send_lowat`, `proxy_send_lowat`, `fastcgi_send_lowat`: SO_SNDLOWAT,
/// which Linux does not let a program set; nginx built on Linux checks the
/// size and warns, as this does.
fn lowat(d: &Directive, ctx: &mut Ctx) -> R {
    size(d, ctx)?;
    ctx.warnings.push(ConfError::at(format!("\"{}\" is not supported, ignored", d.name), &d.span).to_string());
    Ok(())
}

/// nginx's per-connection HTTP/2 memory pool; the h2 crate has its own
/// allocation. nginx's lower bound is checked.
fn http2_pool_size(d: &Directive, ctx: &mut Ctx) -> R {
    size(d, ctx)?;
    match value::parse_size(arg(d, 0)) {
        Some(n) if n < 112 => Err(ConfError::at("the pool size must be no less than 112", &d.span)),
        _ => Ok(()),
    }
}

/// nginx's stream hash size; must be a power of two there.
fn http2_streams_index_size(d: &Directive, ctx: &mut Ctx) -> R {
    number(d, ctx)?;
    match value::parse_number(arg(d, 0)) {
        Some(n) if n.is_power_of_two() => Ok(()),
        _ => Err(slot_error(d, "must be a power of two")),
    }
}
