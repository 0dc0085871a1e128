//! nginx's dav module (ngx_http_dav_module): `dav_methods` PUT, DELETE,
//! MKCOL, COPY and MOVE on the files under a location's root, with
//! `dav_access`, `create_full_put_path` and `min_delete_depth`.
//!
//! As nginx's, it is a content-phase handler: a location with its own
//! content handler (`proxy_pass`, `return`, ...) never reaches it, and a
//! method it is not given falls through to the static handler (405 for
//! PUT and DELETE). DELETE, MKCOL, COPY and MOVE run in the worker as
//! nginx runs them, synchronously; they refuse a request body (415). PUT
//! needs its body: `handle` marks the request (`ReqCtx::dav_put`) and
//! answers `Body::Proxy`, so that each protocol's connection layer reads
//! the body as it reads a proxied one (buffered, `client_max_body_size`,
//! `client_body_timeout`) and hands it to `put::respond` instead of an
//! origin. Statuses, log lines and headers are nginx's (checked against
//! nginx 1.22 in `tests/dav.rs`).

pub mod headers;
pub mod put;
mod tree;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::config::build::Ctx;
use crate::config::model::LocConf;
use crate::config::parser::{ConfError, Directive};
use crate::config::table::{Cmd, HSL, MANY, R, Set, cmd};
use crate::http::handler::Step;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_req;
use headers::{Depth, DestError};

pub static DIRECTIVES: &[Cmd] = &[
    cmd("dav_methods", HSL, 1, MANY, Set::Loc(dav_methods)),
    cmd("dav_access", HSL, 1, 3, Set::Loc(dav_access)),
    cmd("create_full_put_path", HSL, 1, 1, Set::Loc(create_full_put_path)),
    cmd("min_delete_depth", HSL, 1, 1, Set::Loc(min_delete_depth)),
];

pub const PUT: u8 = 1;
pub const DELETE: u8 = 2;
pub const MKCOL: u8 = 4;
pub const COPY: u8 = 8;
pub const MOVE: u8 = 16;

#[derive(Clone, Copy, Debug)]
pub struct DavConf {
    /// The methods `dav_methods` turned on (none: `off`, the default).
    pub methods: u8,
    /// `dav_access`: the mode of files PUT makes (0600 by default);
    /// directories get an `x` where they have an `r`.
    pub access: u32,
    pub create_full_put_path: bool,
    pub min_delete_depth: usize,
}

impl Default for DavConf {
    fn default() -> Self {
        DavConf { methods: 0, access: 0o600, create_full_put_path: false, min_delete_depth: 0 }
    }
}

fn dav_methods(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let mut m = 0;
    for a in &d.args {
        m |= match a.text.to_ascii_lowercase().as_str() {
            "off" => 0,
            "put" => PUT,
            "delete" => DELETE,
            "mkcol" => MKCOL,
            "copy" => COPY,
            "move" => MOVE,
            _ => return Err(ConfError::at(format!("invalid value \"{}\"", a.text), &d.span)),
        };
    }
    c.dav.methods = m;
    Ok(())
}

/// nginx's `ngx_conf_set_access_slot`.
fn dav_access(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.dav.access = crate::config::value::parse_access(d.args.iter().map(|a| a.text.as_str()))
        .map_err(|t| ConfError::at(format!("invalid value \"{t}\""), &d.span))?;
    Ok(())
}

fn create_full_put_path(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    c.dav.create_full_put_path = crate::config::set_main::flag(d)?;
    Ok(())
}

fn min_delete_depth(c: &mut LocConf, d: &Directive, _: &mut Ctx) -> R {
    let v = &d.args[0].text;
    c.dav.min_delete_depth = crate::config::value::parse_number(v)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| ConfError::at("invalid number", &d.span))?;
    Ok(())
}

pub use crate::config::value::dir_access;

fn method_flag(m: &[u8]) -> u8 {
    match m {
        b"PUT" => PUT,
        b"DELETE" => DELETE,
        b"MKCOL" => MKCOL,
        b"COPY" => COPY,
        b"MOVE" => MOVE,
        _ => 0,
    }
}

pub(crate) fn as_path(b: &[u8]) -> &Path {
    Path::new(OsStr::from_bytes(b))
}

/// The content handler: Some when the request's method is one the
/// location's `dav_methods` names.
pub fn handle<'c>(ctx: &mut ReqCtx<'c, '_>) -> Option<Step<'c>> {
    let flag = method_flag(ctx.req.method_bytes());
    if flag == 0 || ctx.conf.dav.methods & flag == 0 {
        return None;
    }
    let has_body = ctx.req.head.body != crate::http::request::BodyKind::None
        && ctx.req.head.body != crate::http::request::BodyKind::Length(0);
    let uri = ctx.req.path.to_vec();
    let collection = uri.ends_with(b"/");
    let status = match flag {
        PUT => {
            if collection {
                log_req!(ctx, Level::Error, "cannot PUT to a collection");
                return Some(done(ctx, 409));
            }
            if ctx.req.header("content-range").is_some() {
                log_req!(ctx, Level::Error, "PUT with range is unsupported");
                return Some(done(ctx, 501));
            }
            ctx.dav_put = true;
            let mut r = Response::new(200);
            r.body = crate::http::response::Body::Proxy;
            return Some(Step::Done(r));
        }
        _ if has_body => {
            let what = match flag {
                DELETE => "DELETE with body is unsupported",
                MKCOL => "MKCOL with body is unsupported",
                _ => "COPY and MOVE with body are unsupported",
            };
            log_req!(ctx, Level::Error, "{what}");
            415
        }
        DELETE => delete(ctx, &uri),
        MKCOL => match mkcol(ctx, &uri) {
            201 => return Some(Step::Done(created(ctx))),
            s => s,
        },
        _ => return Some(copy_move(ctx, &uri, flag == MOVE)),
    };
    Some(done(ctx, status))
}

/// The answer for `status`: 201 with `Location` (MKCOL), 204, or nginx's
/// error page.
fn done<'c>(ctx: &mut ReqCtx<'c, '_>, status: u16) -> Step<'c> {
    match status {
        201 | 204 => Step::Done(Response::new(status)),
        s => Step::Done(crate::http::handler::error(ctx, s)),
    }
}

/// A 201 naming the created resource, as `ngx_http_dav_location`.
pub(crate) fn created<'c>(ctx: &ReqCtx<'c, '_>) -> Response<'c> {
    let mut r = Response::new(201);
    let mut loc = Vec::with_capacity(ctx.req.path.len());
    crate::http::uri::escape_uri(&ctx.req.path, &mut loc);
    r.location = Some(crate::http::handler::ret::absolute_location(ctx, &loc));
    r
}

/// nginx's `ngx_http_dav_error`: the status for a failed file operation,
/// and its log line (`error` for what a client can cause, `crit` else).
pub(crate) fn fs_error(ctx: &ReqCtx<'_, '_>, e: &std::io::Error, not_found: u16, op: &str, path: &[u8]) -> u16 {
    let n = e.raw_os_error().unwrap_or(0);
    let (level, status) = match n {
        libc::ENOENT | libc::ENOTDIR | libc::ENAMETOOLONG => (Level::Error, not_found),
        libc::EACCES | libc::EPERM => (Level::Error, 403),
        libc::EEXIST => (Level::Error, 405),
        libc::ENOSPC => (Level::Crit, 507),
        _ => (Level::Crit, 500),
    };
    log_req!(
        ctx,
        level,
        "{op} \"{}\" failed ({n}: {})",
        String::from_utf8_lossy(path),
        crate::process::signal::strerror(n)
    );
    status
}

fn map(ctx: &ReqCtx<'_, '_>, uri: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(ctx.conf.root.path.len() + uri.len());
    crate::http::handler::static_file::map_path(ctx, uri, &mut p);
    p
}

fn delete(ctx: &mut ReqCtx<'_, '_>, uri: &[u8]) -> u16 {
    let min = ctx.conf.dav.min_delete_depth;
    if min > 0 {
        // nginx counts slashes that have something after them.
        let mut d = 0;
        let deep = uri.iter().enumerate().any(|(i, &b)| {
            if b == b'/' {
                d += 1;
                return d >= min && i + 1 < uri.len();
            }
            false
        });
        if !deep {
            log_req!(ctx, Level::Error, "insufficient URI depth:{d} to DELETE");
            return 409;
        }
    }
    let mut path = map(ctx, uri);
    let meta = match std::fs::symlink_metadata(as_path(&path)) {
        Ok(m) => m,
        Err(e) => {
            let nf = if e.raw_os_error() == Some(libc::ENOTDIR) { 409 } else { 404 };
            return fs_error(ctx, &e, nf, "lstat()", &path);
        }
    };
    let depth_value = ctx.req.header("depth");
    if meta.is_dir() {
        if !uri.ends_with(b"/") {
            log_req!(ctx, Level::Error, "DELETE \"{}\" failed (21: Is a directory)", String::from_utf8_lossy(&path));
            return 409;
        }
        if headers::depth(depth_value, Depth::Infinity) != Depth::Infinity {
            invalid_depth(ctx, depth_value);
            log_req!(ctx, Level::Error, "\"Depth\" header must be infinity");
            return 400;
        }
        while path.len() > 1 && path.ends_with(b"/") {
            path.pop();
        }
        match tree::delete_dir(ctx, &path) {
            Ok(()) => 204,
            Err(s) => s,
        }
    } else {
        let d = headers::depth(depth_value, Depth::Zero);
        if d != Depth::Zero && d != Depth::Infinity {
            invalid_depth(ctx, depth_value);
            log_req!(ctx, Level::Error, "\"Depth\" header must be 0 or infinity");
            return 400;
        }
        match std::fs::remove_file(as_path(&path)) {
            Ok(()) => 204,
            Err(e) => fs_error(ctx, &e, 404, "unlink()", &path),
        }
    }
}

/// nginx logs an unreadable Depth before the message of the method.
fn invalid_depth(ctx: &ReqCtx<'_, '_>, v: Option<&[u8]>) {
    if let Some(v) = v
        && headers::depth(Some(v), Depth::Zero) == Depth::Invalid
    {
        log_req!(ctx, Level::Error, "client sent invalid \"Depth\" header: \"{}\"", String::from_utf8_lossy(v));
    }
}

fn mkcol(ctx: &mut ReqCtx<'_, '_>, uri: &[u8]) -> u16 {
    if !uri.ends_with(b"/") {
        log_req!(ctx, Level::Error, "MKCOL can create a collection only");
        return 409;
    }
    let mut path = map(ctx, uri);
    while path.len() > 1 && path.ends_with(b"/") {
        path.pop();
    }
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(dir_access(ctx.conf.dav.access)).create(as_path(&path)) {
        Ok(()) => 201,
        Err(e) => fs_error(ctx, &e, 409, "mkdir()", &path),
    }
}

fn copy_move<'c>(ctx: &mut ReqCtx<'c, '_>, uri: &[u8], is_move: bool) -> Step<'c> {
    let Some(dest) = ctx.req.header("destination") else {
        log_req!(ctx, Level::Error, "client sent no \"Destination\" header");
        return done(ctx, 400);
    };
    let invalid = |ctx: &mut ReqCtx<'c, '_>| {
        log_req!(
            ctx,
            Level::Error,
            "client sent invalid \"Destination\" header: \"{}\"",
            String::from_utf8_lossy(dest)
        );
        done(ctx, 400)
    };
    let raw = match headers::destination(dest, &ctx.req.host, ctx.conn.tls.is_some()) {
        Ok(r) => r,
        Err(DestError::NoHost) => {
            log_req!(ctx, Level::Error, "client sent no \"Host\" header");
            return done(ctx, 400);
        }
        Err(DestError::OtherRepository) => {
            log_req!(
                ctx,
                Level::Error,
                "\"Destination\" URI \"{}\" is handled by different repository than the source URI",
                String::from_utf8_lossy(dest)
            );
            return done(ctx, 400);
        }
        Err(DestError::Invalid) => return invalid(ctx),
    };
    let Some((duri, _args)) = crate::http::handler::subrequest::parse_uri(raw) else {
        log_req!(ctx, Level::Error, "unsafe URI \"{}\" was detected", String::from_utf8_lossy(raw));
        return invalid(ctx);
    };
    if uri.ends_with(b"/") != duri.ends_with(b"/") {
        log_req!(
            ctx,
            Level::Error,
            "both URI \"{}\" and \"Destination\" URI \"{}\" should be either collections or non-collections",
            String::from_utf8_lossy(uri),
            String::from_utf8_lossy(dest)
        );
        return done(ctx, 409);
    }
    let depth_value = ctx.req.header("depth");
    let depth = headers::depth(depth_value, Depth::Infinity);
    if depth != Depth::Infinity {
        if !is_move {
            if depth != Depth::Zero {
                invalid_depth(ctx, depth_value);
                log_req!(ctx, Level::Error, "\"Depth\" header must be 0 or infinity");
                return done(ctx, 400);
            }
        } else {
            invalid_depth(ctx, depth_value);
            log_req!(ctx, Level::Error, "\"Depth\" header must be infinity");
            return done(ctx, 400);
        }
    }
    let over = ctx.req.header("overwrite");
    let Some(overwrite) = headers::overwrite(over) else {
        log_req!(
            ctx,
            Level::Error,
            "client sent invalid \"Overwrite\" header: \"{}\"",
            String::from_utf8_lossy(over.unwrap_or(b""))
        );
        return done(ctx, 400);
    };
    // Depth 0 is checked but, as in nginx, a collection is still copied
    // whole.
    let status = tree::copy_move(ctx, uri, &duri, is_move, overwrite);
    match status {
        // nginx's 201 here names nothing: no Location.
        201 => Step::Done(Response::new(201)),
        s => done(ctx, s),
    }
}
