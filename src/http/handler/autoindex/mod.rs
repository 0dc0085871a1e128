//! nginx's autoindex module: a directory with no index file is listed, as
//! an HTML page (`html`, the default) or as data for scripts (`json`,
//! `jsonp`, `xml`), byte for byte as nginx 1.22.1 writes them. It owns its
//! directives (`autoindex`, `autoindex_format`, `autoindex_exact_size`,
//! `autoindex_localtime`); `directory` calls `serve` for a GET or HEAD of
//! a directory once no index file matched.
//!
//! Every format lists the same entries: names starting with `.` are left
//! out, directories come first, then names in byte order (strcmp), and
//! symbolic links show what they point to.

pub mod data;
pub mod html;

use std::borrow::Cow;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, R, Set, cmd};
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;

pub static DIRECTIVES: &[Cmd] = &[
    cmd("autoindex", HSL, 1, 1, Set::Loc(autoindex)),
    cmd("autoindex_format", HSL, 1, 1, Set::Loc(autoindex_format)),
    cmd("autoindex_exact_size", HSL, 1, 1, Set::Loc(autoindex_exact_size)),
    cmd("autoindex_localtime", HSL, 1, 1, Set::Loc(autoindex_localtime)),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Json,
    /// JSON wrapped in a call of the `callback` argument's function.
    Jsonp,
    Xml,
}

#[derive(Clone, Copy, Debug)]
pub struct AutoindexConf {
    pub on: bool,
    pub format: Format,
    /// Sizes in bytes (on, the default) or rounded to K, M, G (HTML only).
    pub exact_size: bool,
    /// Times in the server's time zone instead of GMT (HTML only).
    pub localtime: bool,
}

impl Default for AutoindexConf {
    fn default() -> Self {
        AutoindexConf { on: false, format: Format::Html, exact_size: true, localtime: false }
    }
}

fn autoindex(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.autoindex.on = crate::config::set_main::flag(d)?;
    Ok(())
}

fn autoindex_format(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.autoindex.format = match d.args[0].text.as_str() {
        "html" => Format::Html,
        "json" => Format::Json,
        "jsonp" => Format::Jsonp,
        "xml" => Format::Xml,
        v => return Err(ConfError::at(format!("invalid value \"{v}\""), &d.span)),
    };
    Ok(())
}

fn autoindex_exact_size(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.autoindex.exact_size = crate::config::set_main::flag(d)?;
    Ok(())
}

fn autoindex_localtime(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.autoindex.localtime = crate::config::set_main::flag(d)?;
    Ok(())
}

pub struct Entry {
    /// Raw file name bytes.
    pub name: Vec<u8>,
    pub is_dir: bool,
    pub size: u64,
    pub mtime: u64,
}

/// Leaves out hidden entries and sorts the rest as nginx does (directories
/// first, then bytewise like strcmp). Every renderer starts with it.
pub fn listable(entries: &mut Vec<Entry>) {
    entries.retain(|e| e.name.first() != Some(&b'.'));
    entries.sort_unstable_by(|a, b| b.is_dir.cmp(&a.is_dir).then_with(|| a.name.cmp(&b.name)));
}

/// The listing of `dir` (a file-system path) in the location's format.
pub fn serve<'c>(ctx: &ReqCtx<'c, '_>, dir: &[u8]) -> Response<'c> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let conf = &ctx.conf.autoindex;
    // jsonp's callback is checked before the directory is read, as nginx.
    let callback = match conf.format {
        Format::Jsonp => match jsonp_callback(ctx) {
            Ok(c) => c,
            Err(()) => return super::error(ctx, 400),
        },
        _ => None,
    };
    let rd = match std::fs::read_dir(std::path::Path::new(std::ffi::OsStr::from_bytes(dir))) {
        Ok(rd) => rd,
        Err(e) => {
            log_req!(
                ctx,
                Level::Error,
                "opendir() \"{}\" failed ({})",
                String::from_utf8_lossy(dir),
                crate::process::signal::os_error(&e)
            );
            return super::error(ctx, if e.kind() == std::io::ErrorKind::PermissionDenied { 403 } else { 500 });
        }
    };
    let mut entries = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().as_bytes().to_vec();
        // stat follows symlinks, as nginx's listing does.
        let Ok(meta) = std::fs::metadata(ent.path()) else { continue };
        entries.push(Entry { name, is_dir: meta.is_dir(), size: meta.len(), mtime: meta.mtime().max(0) as u64 });
    }
    let mut body = Vec::with_capacity(256 + entries.len() * 120);
    let content_type = match (conf.format, callback) {
        (Format::Html, _) => {
            let utf8_charset = ctx.conf.charset.fixed_charset().is_some_and(|c| c.eq_ignore_ascii_case("utf-8"));
            let utc_offset_secs = if conf.localtime { crate::clock::offset() } else { 0 };
            let style = html::Style { utf8_charset, utc_offset_secs, rounded_sizes: !conf.exact_size };
            html::render_with(&ctx.req.path, &mut entries, style, &mut body);
            "text/html"
        }
        (Format::Xml, _) => {
            data::xml(&mut entries, &mut body);
            "text/xml; charset=utf-8"
        }
        (Format::Jsonp, Some(name)) => {
            data::jsonp(name, &mut entries, &mut body);
            "application/javascript"
        }
        // jsonp without a callback is plain JSON.
        (Format::Json | Format::Jsonp, _) => {
            data::json(&mut entries, &mut body);
            "application/json"
        }
    };
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed(content_type));
    r.body = Body::Owned(body);
    r
}

/// nginx's `callback` argument check for jsonp: None when absent or empty
/// (the listing is plain JSON then); at most 128 letters, digits, `_` and
/// `.`, else 400 with nginx's `info` line.
fn jsonp_callback<'a>(ctx: &'a ReqCtx<'_, '_>) -> Result<Option<&'a [u8]>, ()> {
    let args = ctx.req.args.as_deref().unwrap_or(b"");
    let Some(name) = crate::http::handler::ctx::query_arg(args, "callback").filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let why = if name.len() > 128 {
        "too long"
    } else if !name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.') {
        "invalid"
    } else {
        return Ok(Some(name));
    };
    log_req!(ctx, Level::Info, "client sent {} callback name: \"{}\"", why, String::from_utf8_lossy(name));
    Err(())
}
