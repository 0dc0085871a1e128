//! A WebDAV PUT, as nginx's `ngx_http_dav_put_handler`: the body (read by
//! the connection layer as a proxied one is) goes into a named temporary
//! file under `client_body_temp_path`, which gets `dav_access`'s mode and,
//! when the request has a `Date`, that modification time; then it is
//! renamed over the target, so a reader sees the old file or the whole
//! new one, never a part. `create_full_put_path` makes missing
//! directories. 201 (with `Location`) for a new file, 204 for a replaced
//! one.

use std::fs::File;
use std::io::{Seek, Write};
use std::os::unix::fs::PermissionsExt;

use super::{as_path, dir_access};
use crate::http::connection::spool::Spooled;
use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::request_body::ReqBody;
use crate::http::response::Response;
use crate::log::error::Level;
use crate::log_req;

pub async fn respond<'c>(ctx: &mut ReqCtx<'c, '_>, body: &mut ReqBody) -> Response<'c> {
    let status = put(ctx, body);
    let r = match status {
        201 => super::created(ctx),
        204 => Response::new(204),
        s => return crate::http::handler::finish_error(ctx, s),
    };
    crate::http::handler::finish_proxied(ctx, r)
}

fn put(ctx: &mut ReqCtx<'_, '_>, body: &mut ReqBody) -> u16 {
    let ReqBody::Buffered(spooled) = body else {
        log_req!(ctx, Level::Alert, "PUT request body must be in a file");
        return 500;
    };
    let mut path = Vec::new();
    crate::http::handler::static_file::map_path(ctx, &ctx.req.path, &mut path);
    ctx.filename = Some(path.clone());
    let status = match std::fs::metadata(as_path(&path)) {
        Err(_) => 201,
        Ok(m) if m.is_dir() => {
            log_req!(
                ctx,
                Level::Error,
                "\"{}\" could not be created (21: Is a directory)",
                String::from_utf8_lossy(&path)
            );
            return 409;
        }
        Ok(_) => 204,
    };
    let conf = ctx.conf;
    let (mut file, name) = match crate::http::connection::spool::rename_source(&conf.client_body_temp_path) {
        Ok(f) => f,
        Err(m) => {
            log_req!(ctx, Level::Crit, "{m}");
            return 500;
        }
    };
    if let Err(e) = write_body(&mut file, spooled) {
        log_req!(
            ctx,
            Level::Crit,
            "write() \"{}\" failed ({})",
            name.path.display(),
            crate::process::signal::os_error(&e)
        );
        return 500;
    }
    let access = conf.dav.access;
    if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(access)) {
        log_req!(
            ctx,
            Level::Crit,
            "chmod() \"{}\" failed ({})",
            name.path.display(),
            crate::process::signal::os_error(&e)
        );
        return 500;
    }
    // nginx sets the file's time from the request's Date, when it parses.
    if let Some(t) = ctx.req.header("date").and_then(crate::http::date::parse_http_date) {
        let _ = file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t));
    }
    drop(file);
    let target = as_path(&path);
    let mut r = std::fs::rename(&name.path, target);
    if conf.dav.create_full_put_path
        && r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ENOENT))
        && let Some(parent) = target.parent()
    {
        use std::os::unix::fs::DirBuilderExt;
        if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(dir_access(access)).create(parent) {
            log_req!(
                ctx,
                Level::Crit,
                "mkdir() \"{}\" failed ({})",
                parent.display(),
                crate::process::signal::os_error(&e)
            );
        }
        r = std::fs::rename(&name.path, target);
    }
    if let Err(e) = r {
        log_req!(
            ctx,
            Level::Crit,
            "rename() \"{}\" to \"{}\" failed ({})",
            name.path.display(),
            target.display(),
            crate::process::signal::os_error(&e)
        );
        return 500;
    }
    status
}

/// The body's bytes into the temporary file: from memory, or copied from
/// the file the connection layer spooled it to (an unnamed one, which
/// cannot be renamed).
fn write_body(to: &mut File, body: &mut Spooled) -> std::io::Result<()> {
    match body {
        Spooled::Memory(m) => to.write_all(m),
        Spooled::File { file, .. } => {
            file.rewind()?;
            std::io::copy(file, to).map(|_| ())
        }
    }
}
