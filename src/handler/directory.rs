//! Requests for a directory (URI ending in `/`): nginx's index module
//! (first existing index file, by internal redirect), then autoindex, else
//! 403 for an existing directory and 404 for a missing one.

use std::borrow::Cow;

use super::ctx::{ReqCtx, Vars};
use super::open_cache::OpenError;
use super::static_file::{map_path, open_logged};
use super::{Step, error};
use crate::handler::autoindex_html::{self, Entry};
use crate::http::request::Method;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_req;

pub fn serve<'c>(ctx: &mut ReqCtx<'c, '_>) -> Step<'c> {
    let conf = ctx.conf;
    if super::static_file::alias_refused(ctx) {
        return Step::Done(error(ctx, 500));
    }
    // The index module's redirect keeps the request's arguments.
    let args = || ctx.req.args.as_deref().map(<[u8]>::to_vec);
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
            Ok(_) | Err(OpenError::NotFound) | Err(OpenError::NotDir) => {}
            Err(e) => {
                super::static_file::log_open_failed(ctx, Level::Error, &path, e);
                return Step::Done(error(ctx, e.status()));
            }
        }
    }
    let mut dir = Vec::new();
    map_path(ctx, &ctx.req.path, &mut dir);
    match open_logged(ctx, &dir) {
        Ok(f) if f.is_dir => {}
        Ok(_) => return Step::Done(error(ctx, 404)),
        Err(e) => return Step::Done(error(ctx, e.status())),
    }
    if conf.autoindex {
        if !matches!(ctx.req.method(), Method::Get | Method::Head) {
            return Step::Done(error(ctx, 405));
        }
        return Step::Done(autoindex(ctx, &dir));
    }
    log_req!(ctx, Level::Error, "directory index of \"{}\" is forbidden", String::from_utf8_lossy(&dir));
    Step::Done(error(ctx, 403))
}

fn bytes_path(b: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt;
    std::path::Path::new(std::ffi::OsStr::from_bytes(b))
}

fn autoindex<'c>(ctx: &ReqCtx<'c, '_>, dir: &[u8]) -> Response<'c> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let rd = match std::fs::read_dir(bytes_path(dir)) {
        Ok(rd) => rd,
        Err(e) => {
            log_req!(
                ctx,
                Level::Error,
                "opendir() \"{}\" failed ({})",
                String::from_utf8_lossy(dir),
                crate::process::signal::os_error(&e)
            );
            return error(ctx, if e.kind() == std::io::ErrorKind::PermissionDenied { 403 } else { 500 });
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
    autoindex_html::render(&ctx.req.path, &mut entries, &mut body);
    let mut r = Response::new(200);
    r.content_type = Some(Cow::Borrowed("text/html"));
    r.body = Body::Owned(body);
    r
}
