//! Setters for directives valid at the http, server and location levels.
//! They write into a `LocConf` that started as a copy of the parent level,
//! which is how nginx's inheritance falls out without a merge pass.

use std::sync::Arc;

use super::build::Ctx;
use super::model::*;
use super::parser::{ConfError, Directive};
use super::set_main::{arg, flag, invalid, number};
use super::table::R;
use super::value;
use crate::log::format::{Escape, LogFormat};
use crate::variables::Template;

fn compile(d: &Directive, text: &str) -> Result<Template, ConfError> {
    Template::compile(text).map_err(|e| ConfError::at(e, &d.span))
}

fn size(d: &Directive, i: usize) -> Result<u64, ConfError> {
    let v = arg(d, i);
    value::parse_size(v).ok_or_else(|| invalid(d, v))
}

fn time(d: &Directive, i: usize) -> Result<std::time::Duration, ConfError> {
    let v = arg(d, i);
    value::parse_time(v).ok_or_else(|| invalid(d, v))
}

pub fn reset_types(c: &mut LocConf) {
    c.types = Arc::default();
}
pub fn reset_access_log(c: &mut LocConf) {
    c.access_log = Some(Vec::new());
}
pub fn reset_index(c: &mut LocConf) {
    c.index.clear();
}
pub fn reset_error_page(c: &mut LocConf) {
    c.error_pages.clear();
}
pub fn reset_add_header(c: &mut LocConf) {
    c.add_headers.clear();
}
pub fn reset_add_trailer(c: &mut LocConf) {
    c.add_trailers.clear();
}

/// `types { mime/type ext ext; ... }`: the block's "directives" are types.
pub fn types_block(c: &mut LocConf, d: &Directive) -> R {
    let map = Arc::make_mut(&mut c.types);
    for entry in d.block.as_deref().unwrap_or(&[]) {
        if entry.block.is_some() {
            return Err(ConfError::at("unexpected \"{\"", &entry.span));
        }
        if entry.args.is_empty() {
            return Err(ConfError::at("invalid number of arguments in \"types\" directive", &entry.span));
        }
        let mime: Arc<str> = Arc::from(entry.name.as_str());
        for ext in &entry.args {
            map.insert(ext.text.to_ascii_lowercase().into_bytes().into_boxed_slice(), mime.clone());
        }
    }
    Ok(())
}

pub fn log_format(d: &Directive, ctx: &mut Ctx) -> R {
    let name = arg(d, 0).to_string();
    if name == "combined" || ctx.formats.contains_key(&name) {
        return Err(ConfError::at(format!("duplicate \"log_format\" name \"{}\"", name), &d.span));
    }
    let mut rest = &d.args[1..];
    let mut escape = Escape::Default;
    if let Some(e) = rest.first().and_then(|w| w.text.strip_prefix("escape=")) {
        escape = match e {
            "default" => Escape::Default,
            "json" => Escape::Json,
            "none" => Escape::None,
            _ => return Err(ConfError::at(format!("unknown log format escaping \"{}\"", e), &d.span)),
        };
        rest = &rest[1..];
    }
    if rest.is_empty() {
        return Err(ConfError::at("invalid number of arguments in \"log_format\" directive", &d.span));
    }
    let text: String = rest.iter().map(|w| w.text.as_str()).collect();
    let template = compile(d, &text)?;
    ctx.formats.insert(name.clone(), Arc::new(LogFormat { name, template, escape }));
    Ok(())
}

pub fn default_type(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.default_type = Arc::from(arg(d, 0));
    Ok(())
}

/// `access_log path|syslog:... [format [buffer=size] [gzip[=level]] [flush=time] [if=condition]]`.
pub fn access_log(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    match access_log_entry(d, ctx)? {
        Some(r) => c.access_log.get_or_insert_with(Vec::new).push(r),
        None => c.access_log = None,
    }
    Ok(())
}

/// One `access_log` line: None for `access_log off`. Shared by the
/// families (a stream server's access log is the same directive).
pub fn access_log_entry(d: &Directive, ctx: &mut Ctx) -> Result<Option<AccessLogRef>, ConfError> {
    let path = arg(d, 0);
    if path == "off" {
        if d.args.len() > 1 {
            return Err(ConfError::at("invalid number of arguments in \"access_log\" directive", &d.span));
        }
        return Ok(None);
    }
    let syslog = match path.strip_prefix("syslog:") {
        Some(spec) => Some(crate::log::syslog::parse(spec).map_err(|e| ConfError::at(e, &d.span))?),
        None => None,
    };
    let format = match d.args.get(1) {
        None => ctx.formats.get("combined").cloned(),
        Some(w) => ctx.formats.get(&w.text).cloned(),
    }
    .ok_or_else(|| ConfError::at(format!("unknown log format \"{}\"", arg(d, 1)), &d.span))?;
    let (mut buffer, mut flush, mut gzip, mut cond) = (None, None, None, None);
    for w in d.args.iter().skip(2) {
        let t = w.text.as_str();
        if let Some(v) = t.strip_prefix("buffer=") {
            buffer = Some(
                value::parse_size(v).ok_or_else(|| ConfError::at(format!("invalid buffer size \"{}\"", v), &d.span))?,
            );
        } else if let Some(v) = t.strip_prefix("flush=") {
            flush = Some(
                value::parse_time(v)
                    .filter(|t| !t.is_zero())
                    .ok_or_else(|| ConfError::at(format!("invalid flush time \"{}\"", v), &d.span))?,
            );
        } else if t == "gzip" {
            gzip = Some(1);
        } else if let Some(v) = t.strip_prefix("gzip=") {
            match v.parse::<u32>() {
                Ok(n @ 1..=9) => gzip = Some(n),
                _ => return Err(ConfError::at(format!("invalid compression level \"{}\"", v), &d.span)),
            }
        } else if let Some(v) = t.strip_prefix("if=") {
            cond = Some(Arc::new(compile(d, v)?));
        } else {
            return Err(ConfError::at(format!("invalid parameter \"{}\"", t), &d.span));
        }
    }
    let dest = match syslog {
        Some(peer) => {
            if buffer.is_some() || gzip.is_some() {
                return Err(ConfError::at("logs to syslog cannot be buffered", &d.span));
            }
            if flush.is_some() {
                return Err(ConfError::at(format!("no buffer is defined for access_log \"{}\"", path), &d.span));
            }
            ctx.log_syslog.push(Arc::new(peer));
            LogDest::Syslog(ctx.log_syslog.len() - 1)
        }
        None if path.contains('$') => {
            if buffer.is_some() || gzip.is_some() {
                return Err(ConfError::at("buffered logs cannot have variables in name", &d.span));
            }
            if flush.is_some() {
                let full = ctx.path(path);
                return Err(ConfError::at(
                    format!("no buffer is defined for access_log \"{}\"", full.display()),
                    &d.span,
                ));
            }
            let template = crate::variables::Template::compile(path).map_err(|e| ConfError::at(e, &d.span))?;
            LogDest::Dynamic(Arc::new(crate::log::access_path::DynamicPath { template, prefix: ctx.prefix.clone() }))
        }
        None => LogDest::File(ctx.log_file(path, buffer, flush, gzip)),
    };
    Ok(Some(AccessLogRef { dest, format, cond }))
}

macro_rules! flag_setter {
    ($name:ident, $field:ident) => {
        pub fn $name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
            c.$field = flag(d)?;
            Ok(())
        }
    };
}
flag_setter!(sendfile, sendfile);
flag_setter!(tcp_nopush, tcp_nopush);
flag_setter!(tcp_nodelay, tcp_nodelay);
flag_setter!(etag, etag);
flag_setter!(open_file_cache_errors, open_file_cache_errors);
flag_setter!(log_not_found, log_not_found);
flag_setter!(log_subrequest, log_subrequest);

macro_rules! time_setter {
    ($name:ident, $field:ident) => {
        pub fn $name(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
            c.$field = time(d, 0)?;
            Ok(())
        }
    };
}
time_setter!(client_header_timeout, client_header_timeout);
time_setter!(client_body_timeout, client_body_timeout);
time_setter!(send_timeout, send_timeout);
time_setter!(open_file_cache_valid, open_file_cache_valid);

pub fn server_tokens(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.server_tokens = match arg(d, 0) {
        "on" | "build" => true,
        "off" => false,
        v => {
            return Err(ConfError::at(
                format!(
                    "invalid value \"{}\" in \"server_tokens\" directive, it must be \"on\", \"off\" or \"build\"",
                    v
                ),
                &d.span,
            ));
        }
    };
    Ok(())
}

pub fn keepalive_timeout(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.keepalive_timeout = time(d, 0)?;
    c.keepalive_header = if d.args.len() > 1 { Some(time(d, 1)?) } else { None };
    Ok(())
}

pub fn keepalive_requests(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.keepalive_requests = number(d, 0)?;
    Ok(())
}

pub fn keepalive_time(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.keepalive_time = value::parse_time(arg(d, 0))
        .ok_or_else(|| ConfError::at("\"keepalive_time\" directive invalid value", &d.span))?;
    Ok(())
}

pub fn client_header_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = size(d, 0)?;
    if n == 0 {
        return Err(invalid(d, arg(d, 0)));
    }
    c.client_header_buffer_size = n as usize;
    Ok(())
}

pub fn large_client_header_buffers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = number(d, 0)?;
    let s = size(d, 1)?;
    if n == 0 || s < 2 {
        return Err(ConfError::at("invalid value in \"large_client_header_buffers\" directive", &d.span));
    }
    c.large_client_header_buffers = (n as usize, s as usize);
    Ok(())
}

/// `sendfile_max_chunk SIZE` (0: no limit), nginx 1.21.4's 2m by default.
pub fn sendfile_max_chunk(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    // nginx's size slot words its refusal this way.
    let v = value::parse_size(arg(d, 0))
        .ok_or_else(|| ConfError::at(format!("\"{}\" directive invalid value", d.name), &d.span))?;
    c.sendfile_max_chunk = v.min(1 << 30) as usize;
    Ok(())
}

pub fn client_body_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.client_body_buffer_size = size(d, 0)?.min(1 << 30) as usize;
    Ok(())
}

/// `client_body_in_file_only on|clean|off`: every body read for an origin
/// goes to a named file in `client_body_temp_path` (`$request_body_file`),
/// kept after the request (`on`) or removed with it (`clean`).
pub fn client_body_in_file_only(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    use crate::http::connection::spool::Naming;
    c.client_body_in_file_only = match arg(d, 0) {
        "off" => Naming::Anonymous,
        "on" => Naming::Kept,
        "clean" => Naming::Clean,
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

/// `client_body_temp_path PATH [LEVEL...]`: as `proxy_temp_path`.
pub fn client_body_temp_path(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    c.client_body_temp_path = super::proxy_buffers::temp_path(d, ctx)?;
    Ok(())
}

pub fn client_max_body_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.client_max_body_size = size(d, 0)?;
    Ok(())
}

pub fn open_file_cache(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    if arg(d, 0) == "off" {
        if d.args.len() > 1 {
            return Err(ConfError::at("invalid number of arguments in \"open_file_cache\" directive", &d.span));
        }
        c.open_file_cache = None;
        return Ok(());
    }
    let mut max = None;
    let mut inactive = std::time::Duration::from_secs(60);
    for w in &d.args {
        if let Some(v) = w.text.strip_prefix("max=") {
            max = Some(value::parse_number(v).filter(|&n| n > 0).ok_or_else(|| invalid(d, &w.text))? as usize);
        } else if let Some(v) = w.text.strip_prefix("inactive=") {
            inactive = value::parse_time(v).ok_or_else(|| invalid(d, &w.text))?;
        } else {
            return Err(ConfError::at(format!("invalid \"open_file_cache\" parameter \"{}\"", w.text), &d.span));
        }
    }
    let max = max.ok_or_else(|| ConfError::at("\"open_file_cache\" must have the \"max\" parameter", &d.span))?;
    c.open_file_cache = Some(OpenFileCacheConf { max, inactive });
    Ok(())
}

pub fn open_file_cache_min_uses(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.open_file_cache_min_uses = number(d, 0)?.min(u32::MAX as u64) as u32;
    Ok(())
}

pub fn output_buffers(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.output_buffers = (number(d, 0)? as usize, size(d, 1)? as usize);
    Ok(())
}

pub fn subrequest_output_buffer_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.subrequest_output_buffer_size = size(d, 0)? as usize;
    Ok(())
}

pub fn postpone_output(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.postpone_output = size(d, 0)? as usize;
    Ok(())
}

pub fn if_modified_since(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.if_modified_since = match arg(d, 0) {
        "off" => IfModifiedSince::Off,
        "exact" => IfModifiedSince::Exact,
        "before" => IfModifiedSince::Before,
        v => return Err(invalid(d, v)),
    };
    Ok(())
}

fn doc_root(d: &Directive, ctx: &Ctx, alias: bool) -> Result<DocRoot, ConfError> {
    let raw = arg(d, 0);
    let has_vars = raw.contains('$');
    let mut path = if has_vars && !raw.starts_with('/') && !raw.starts_with('$') {
        format!("{}/{}", ctx.prefix.display(), raw)
    } else if has_vars {
        raw.to_string()
    } else {
        ctx.path(raw).to_string_lossy().into_owned()
    };
    // nginx strips a trailing slash from root (not alias), so "$root$uri"
    // never doubles it.
    if !alias {
        while path.len() > 1 && path.ends_with('/') {
            path.pop();
        }
    }
    let template = if has_vars { Some(compile(d, &path)?) } else { None };
    let alias_len = if alias { Some(ctx.location_len) } else { None };
    Ok(DocRoot { path, template, alias_len })
}

pub fn root(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    if ctx.alias_here {
        return Err(ConfError::at(
            "\"root\" directive is duplicate, \"alias\" directive was specified earlier",
            &d.span,
        ));
    }
    ctx.root_here = true;
    c.root = doc_root(d, ctx, false)?;
    Ok(())
}

pub fn alias(c: &mut LocConf, d: &Directive, ctx: &mut Ctx) -> R {
    if ctx.root_here {
        return Err(ConfError::at(
            "\"alias\" directive is duplicate, \"root\" directive was specified earlier",
            &d.span,
        ));
    }
    ctx.alias_here = true;
    c.root = doc_root(d, ctx, true)?;
    if ctx.in_regex_location {
        // nginx: in a regex location the alias (built from captures) is the
        // whole file path; nothing of the URI is appended.
        c.root.alias_len = Some(usize::MAX);
    }
    Ok(())
}

pub fn index(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    for w in &d.args {
        if w.text.is_empty() {
            return Err(ConfError::at("index \"\" in \"index\" directive is invalid", &d.span));
        }
        if w.text.starts_with('/') && !std::ptr::eq(w, d.args.last().unwrap_or(w)) {
            return Err(ConfError::at(
                "only the last index in \"index\" directive should be absolute".to_string(),
                &d.span,
            ));
        }
        c.index.push(compile(d, &w.text)?);
    }
    Ok(())
}

fn status_code(d: &Directive, s: &str) -> Option<u16> {
    let _ = d;
    value::parse_number(s).filter(|&n| (100..=999).contains(&n)).map(|n| n as u16)
}

pub fn try_files(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = d.args.len();
    let last = arg(d, n - 1);
    let fallback = if let Some(code) = last.strip_prefix('=') {
        TryFallback::Code(
            status_code(d, code).ok_or_else(|| ConfError::at(format!("invalid code \"{}\"", last), &d.span))?,
        )
    } else if let Some(name) = last.strip_prefix('@') {
        TryFallback::Named(name.to_string())
    } else {
        TryFallback::Uri(compile(d, last)?)
    };
    let files = d.args[..n - 1]
        .iter()
        .map(|w| {
            let t = w.text.as_str();
            let dir = t.len() > 1 && t.ends_with('/');
            compile(d, if dir { &t[..t.len() - 1] } else { t }).map(|c| (c, dir))
        })
        .collect::<Result<_, _>>()?;
    c.try_files = Some(TryFiles { files, fallback });
    Ok(())
}

fn is_redirect_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://") || s.starts_with("$scheme")
}

pub fn error_page(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let n = d.args.len();
    let target_s = arg(d, n - 1);
    let mut overwrite = None;
    let mut codes = Vec::new();
    let mut end = n - 1;
    if let Some(eq) = d.args.get(n - 2).map(|w| w.text.as_str()).filter(|s| s.starts_with('=')) {
        end = n - 2;
        overwrite = if eq.len() == 1 {
            Some(0)
        } else {
            Some(status_code(d, &eq[1..]).ok_or_else(|| ConfError::at(format!("invalid value \"{}\"", eq), &d.span))?)
        };
    }
    for w in &d.args[..end] {
        let code = status_code(d, &w.text)
            .filter(|c| (300..=599).contains(c))
            .ok_or_else(|| ConfError::at(format!("value \"{}\" must be between 300 and 599", w.text), &d.span))?;
        codes.push(code);
    }
    if codes.is_empty() {
        return Err(ConfError::at("invalid number of arguments in \"error_page\" directive", &d.span));
    }
    let target = if let Some(name) = target_s.strip_prefix('@') {
        ErrorTarget::Named(name.to_string())
    } else if is_redirect_url(target_s) {
        ErrorTarget::Redirect(compile(d, target_s)?)
    } else {
        ErrorTarget::Uri(compile(d, target_s)?)
    };
    c.error_pages.push(Arc::new(ErrorPage { codes, overwrite, target }));
    Ok(())
}

pub fn add_header(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let h = header_field(d)?;
    c.add_headers.push(h);
    Ok(())
}

pub fn add_trailer(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let h = header_field(d)?;
    c.add_trailers.push(h);
    Ok(())
}

/// `NAME VALUE [always]` of add_header and add_trailer.
fn header_field(d: &Directive) -> Result<AddHeader, ConfError> {
    let always = match d.args.get(2) {
        None => false,
        Some(w) if w.text == "always" => true,
        Some(w) => return Err(ConfError::at(format!("invalid parameter \"{}\"", w.text), &d.span)),
    };
    let name = arg(d, 0);
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(ConfError::at(format!("invalid header name \"{}\"", name), &d.span));
    }
    let value = compile(d, arg(d, 1))?;
    Ok(AddHeader { name: name.to_string(), value, always })
}

pub fn expires(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let (modified, v) = if d.args.len() == 2 {
        if arg(d, 0) != "modified" {
            return Err(invalid(d, arg(d, 0)));
        }
        (true, arg(d, 1))
    } else {
        (false, arg(d, 0))
    };
    if v.contains('$') {
        let t = crate::variables::Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?;
        c.expires_var = Some((Arc::new(t), modified));
        c.expires = None;
        return Ok(());
    }
    let e = parse_expires(v, modified).map_err(|why| ConfError::at(format!("\"expires\" directive {why}"), &d.span))?;
    c.expires = Some(e);
    c.expires_var = None;
    Ok(())
}

/// nginx's `ngx_http_parse_expires`: `off`, `epoch`, `max`, a signed time
/// from now or (`modified`) from the file's modification time, or `@` and
/// a time of day; Err is nginx's wording.
pub fn parse_expires(v: &str, modified: bool) -> Result<Expires, &'static str> {
    Ok(match v {
        "off" if !modified => Expires::Off,
        "epoch" if !modified => Expires::Epoch,
        "max" if !modified => Expires::Max,
        _ => {
            let secs = |t: &str| value::parse_time(t).map(|d| d.as_secs() as i64).ok_or("invalid value");
            if let Some(t) = v.strip_prefix('@') {
                if modified {
                    return Err("daily time cannot be used with \"modified\" parameter");
                }
                let s = secs(t)?;
                if s > 24 * 60 * 60 {
                    return Err("daily time value must be less than 24 hours");
                }
                return Ok(Expires::Daily(s));
            }
            let s = match v.strip_prefix('-') {
                Some(t) => -secs(t)?,
                None => secs(v.strip_prefix('+').unwrap_or(v))?,
            };
            if modified { Expires::Modified(s) } else { Expires::Access(s) }
        }
    })
}

pub fn empty_gif(c: &mut LocConf, _: &Directive, _: &mut Ctx) -> R {
    c.empty_gif = true;
    Ok(())
}
