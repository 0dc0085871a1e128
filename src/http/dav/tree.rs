//! The file-tree work of DELETE, COPY and MOVE, as nginx's
//! `ngx_http_dav_delete_path` and `ngx_http_dav_copy_move_handler`: a
//! tree is walked without following symbolic links; a file that cannot
//! be removed or copied is logged at `crit` and the walk goes on, as
//! nginx's tree handlers do; the top's failure decides the status.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use super::{as_path, fs_error};
use crate::http::handler::ctx::ReqCtx;
use crate::log::error::Level;
use crate::log_req;

/// Removes the directory at `path` and everything under it.
pub fn delete_dir(ctx: &ReqCtx<'_, '_>, path: &[u8]) -> Result<(), u16> {
    walk_delete(ctx, as_path(path));
    fs::remove_dir(as_path(path)).map_err(|e| fs_error(ctx, &e, 404, "rmdir()", path))
}

fn walk_delete(ctx: &ReqCtx<'_, '_>, dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        let r = if is_dir {
            walk_delete(ctx, &p);
            fs::remove_dir(&p).map_err(|err| ("rmdir()", err))
        } else {
            fs::remove_file(&p).map_err(|err| ("unlink()", err))
        };
        if let Err((op, err)) = r {
            crit(ctx, op, &p, &err);
        }
    }
}

fn crit(ctx: &ReqCtx<'_, '_>, op: &str, p: &Path, e: &std::io::Error) {
    let n = e.raw_os_error().unwrap_or(0);
    log_req!(ctx, Level::Crit, "{op} \"{}\" failed ({n}: {})", p.display(), crate::process::signal::strerror(n));
}

/// COPY or MOVE of `uri` to `duri` (both decoded, both collections or
/// both not): the status.
pub fn copy_move(ctx: &ReqCtx<'_, '_>, uri: &[u8], duri: &[u8], is_move: bool, overwrite: bool) -> u16 {
    let mut src = super::map(ctx, uri);
    let mut dst = super::map(ctx, duri);
    let slash = dst.ends_with(b"/");
    while dst.len() > 1 && dst.ends_with(b"/") {
        dst.pop();
    }
    let (mut overwrite, mut dst_dir) = (overwrite, false);
    match fs::symlink_metadata(as_path(&dst)) {
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => overwrite = false,
        Err(e) => return fs_error(ctx, &e, 404, "lstat()", &dst),
        Ok(m) => {
            if m.is_dir() && !slash {
                log_req!(
                    ctx,
                    Level::Error,
                    "\"{}\" could not be {}d to collection \"{}\"",
                    String::from_utf8_lossy(uri),
                    if is_move { "MOVE" } else { "COPY" },
                    String::from_utf8_lossy(duri)
                );
                return 409;
            }
            if !overwrite {
                log_req!(
                    ctx,
                    Level::Error,
                    "\"{}\" could not be created (17: File exists)",
                    String::from_utf8_lossy(&dst)
                );
                return 412;
            }
            dst_dir = m.is_dir();
        }
    }
    let meta = match fs::symlink_metadata(as_path(&src)) {
        Ok(m) => m,
        Err(e) => return fs_error(ctx, &e, 404, "lstat()", &src),
    };
    if meta.is_dir() {
        if !uri.ends_with(b"/") {
            log_req!(ctx, Level::Error, "\"{}\" is collection (21: Is a directory)", String::from_utf8_lossy(uri));
            return 400;
        }
        if overwrite {
            let r = if dst_dir {
                delete_dir(ctx, &dst)
            } else {
                fs::remove_file(as_path(&dst)).map_err(|e| fs_error(ctx, &e, 404, "unlink()", &dst))
            };
            if let Err(s) = r {
                return s;
            }
        }
        while src.len() > 1 && src.ends_with(b"/") {
            src.pop();
        }
        if is_move && fs::rename(as_path(&src), as_path(&dst)).is_ok() {
            return 201;
        }
        let mode = meta.permissions().mode() & 0o7777;
        if let Err(e) = fs::DirBuilder::new().mode(mode).create(as_path(&dst)) {
            return fs_error(ctx, &e, 404, "mkdir()", &dst);
        }
        copy_tree(ctx, as_path(&src), as_path(&dst));
        if is_move && let Err(s) = delete_dir(ctx, &src) {
            return s;
        }
        return 201;
    }
    if is_move {
        // nginx's ngx_ext_rename_file with create_path: the destination's
        // missing directories are made (dav_access's, as directories).
        let mut r = fs::rename(as_path(&src), as_path(&dst));
        if r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ENOENT))
            && let Some(parent) = as_path(&dst).parent()
        {
            let _ = fs::DirBuilder::new().recursive(true).mode(super::dir_access(ctx.conf.dav.access)).create(parent);
            r = fs::rename(as_path(&src), as_path(&dst));
        }
        return match r {
            Ok(()) => 204,
            Err(e) => {
                let n = e.raw_os_error().unwrap_or(0);
                log_req!(
                    ctx,
                    Level::Crit,
                    "rename() \"{}\" to \"{}\" failed ({n}: {})",
                    String::from_utf8_lossy(&src),
                    String::from_utf8_lossy(&dst),
                    crate::process::signal::strerror(n)
                );
                500
            }
        };
    }
    match copy_file(as_path(&src), as_path(&dst), &meta) {
        Ok(()) => 204,
        Err((op, p, e)) => {
            crit(ctx, op, &p, &e);
            500
        }
    }
}

/// nginx's `ngx_copy_file`: the destination made (or truncated) with the
/// source's mode, its bytes, then the source's modification time.
fn copy_file(
    src: &Path,
    dst: &Path,
    meta: &fs::Metadata,
) -> Result<(), (&'static str, std::path::PathBuf, std::io::Error)> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut from = fs::File::open(src).map_err(|e| ("open()", src.to_path_buf(), e))?;
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(meta.permissions().mode() & 0o7777)
        .open(dst)
        .map_err(|e| ("open()", dst.to_path_buf(), e))?;
    std::io::copy(&mut from, &mut to).map_err(|e| ("write()", dst.to_path_buf(), e))?;
    let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(meta.mtime().max(0) as u64);
    to.set_modified(mtime).map_err(|e| ("utimes()", dst.to_path_buf(), e))?;
    Ok(())
}

/// Copies what is under `src` into the existing directory `dst`:
/// directories with their modes, files as `copy_file`; symbolic links and
/// other special files are skipped, as nginx's tree walk skips them.
fn copy_tree(ctx: &ReqCtx<'_, '_>, src: &Path, dst: &Path) {
    let Ok(entries) = fs::read_dir(src) else { return };
    for e in entries.flatten() {
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let Ok(m) = fs::symlink_metadata(&from) else { continue };
        if m.is_dir() {
            match fs::DirBuilder::new().mode(m.permissions().mode() & 0o7777).create(&to) {
                Ok(()) => copy_tree(ctx, &from, &to),
                Err(err) => crit(ctx, "mkdir()", &to, &err),
            }
        } else if m.is_file()
            && let Err((op, p, err)) = copy_file(&from, &to, &m)
        {
            crit(ctx, op, &p, &err);
        }
    }
}
