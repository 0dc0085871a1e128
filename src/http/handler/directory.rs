//! Requests for a directory (URI ending in `/`): nginx's index module
//! (first existing index file, by internal redirect), then `autoindex`, else
//! 403 for an existing directory and 404 for a missing one.

use super::ctx::{ReqCtx, Vars};
use super::open_cache::OpenError;
use super::static_file::{map_path, open_logged};
use super::{Step, error};
use crate::http::request::Method;
use crate::log::error::Level;
use crate::log_req;

pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    let conf = ctx.conf;
    if super::static_file::alias_refused(ctx) {
        return Step::Done(error(ctx, 500));
    }
    // nginx's content phase asks random_index before the index module.
    if let Some(step) = super::random_index::pick(ctx) {
        return step;
    }
    // The index module's redirect keeps the request's arguments.
    let args = || ctx.req.args.as_deref().map(<[u8]>::to_vec);
    let mut dir = Vec::new();
    map_path(ctx, &ctx.req.path, &mut dir);
    let mut dir_tested = false;
    for idx in &conf.index {
        let name = idx.render_to_vec(&Vars::request(ctx));
        if name.starts_with(b"/") {
            return Step::Redirect(name, args());
        }
        let mut uri = ctx.req.path.to_vec();
        uri.extend_from_slice(&name);
        let mut path = Vec::new();
        map_path(ctx, &uri, &mut path);
        match super::open_cache::open_for(ctx, bytes_path(&path)) {
            Ok(f) if !f.is_dir => return Step::Redirect(uri, args()),
            Ok(_) => {}
            // nginx's index module: the directory is tested once, at the
            // first missing index file, and a missing one is reported
            // under that file's name.
            Err(OpenError::NotFound) if !dir_tested => {
                dir_tested = true;
                if let Err(OpenError::NotFound) = super::open_cache::open_for(ctx, bytes_path(&dir)) {
                    return Step::Done(index_error(ctx, &path, OpenError::NotFound));
                }
            }
            Err(OpenError::NotFound) => {}
            Err(e @ (OpenError::NotDir | OpenError::Forbidden)) => return Step::Done(index_error(ctx, &path, e)),
            Err(e) => {
                super::static_file::log_open_failed(ctx, Level::Crit, &path, e);
                return Step::Done(error(ctx, 500));
            }
        }
    }
    match open_logged(ctx, &dir) {
        Ok(f) if f.is_dir => {}
        Ok(_) => return Step::Done(error(ctx, 404)),
        Err(e) => return Step::Done(error(ctx, e.status())),
    }
    // A POST (the only other method that gets here) is not listed: nginx's
    // autoindex declines it and the directory is forbidden.
    if conf.autoindex.on && matches!(ctx.req.method(), Method::Get | Method::Head) {
        return Step::Done(super::autoindex::serve(ctx, &dir));
    }
    log_req!(ctx, Level::Error, "directory index of \"{}\" is forbidden", String::from_utf8_lossy(&dir));
    Step::Done(error(ctx, 403))
}

/// nginx's `ngx_http_index_error`: an index file (or its directory) that
/// cannot be reached is 403 when forbidden, else 404, logged as
/// `"PATH" is forbidden|is not found (ERRNO: TEXT)` (not found only with
/// `log_not_found`).
fn index_error<'c>(ctx: &ReqCtx<'c, '_>, path: &[u8], e: OpenError) -> crate::http::response::Response<'c> {
    let what = if e == OpenError::Forbidden { "is forbidden" } else { "is not found" };
    if e == OpenError::Forbidden || ctx.conf.log_not_found {
        let (n, text) = (e.errno(), crate::process::signal::strerror(e.errno()));
        log_req!(ctx, Level::Error, "\"{}\" {} ({}: {})", String::from_utf8_lossy(path), what, n, text);
    }
    error(ctx, if e == OpenError::Forbidden { 403 } else { 404 })
}

fn bytes_path(b: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(b))
}
