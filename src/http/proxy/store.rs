//! `proxy_store` (and `fastcgi_store`, `uwsgi_store`, `scgi_store`): an
//! origin's 200 response kept as a plain file, the mirror nginx builds on
//! disk for a `try_files` or `root` in front to serve next time. The body
//! is written as it streams to the client into a temporary file under the
//! module's temp path and renamed into place only once the origin sent it
//! whole, so a cut-short response or a client that left never leaves a
//! partial file under the final name nor a temporary one behind.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::config::parser::{ConfError, Directive};
use crate::config::proxy::UpstreamConf;
use crate::config::table::R;
use crate::http::connection::spool::TempName;
use crate::http::handler::ctx::{ReqCtx, Vars};
use crate::log::error::Level;
use crate::variables::Template;

/// Where a stored response goes.
#[derive(Clone, Debug, Default)]
pub enum StoreConf {
    #[default]
    Off,
    /// `on`: the file `root` or `alias` maps the request's URI to.
    Root,
    /// A path, with variables.
    Path(Template),
}

/// `*_store on | off | PATH`, as nginx parses it.
pub fn store(u: &mut UpstreamConf, d: &Directive) -> R {
    let v = crate::config::set_main::arg(d, 0);
    u.store = match v {
        "on" => StoreConf::Root,
        "off" => StoreConf::Off,
        _ => StoreConf::Path(Template::compile(v).map_err(|e| ConfError::at(e, &d.span))?),
    };
    Ok(())
}

/// `*_store_access user:rw group:r all:r`.
pub fn store_access(u: &mut UpstreamConf, d: &Directive) -> R {
    u.store_access = crate::config::value::parse_access(d.args.iter().map(|a| a.text.as_str()))
        .map_err(|t| ConfError::at(format!("invalid value \"{t}\""), &d.span))?;
    Ok(())
}

/// A response being stored.
pub struct StoreFile {
    file: Option<File>,
    /// Removes the temporary file unless it was renamed away.
    temp: TempName,
    dest: PathBuf,
    access: u32,
    /// The origin's Last-Modified, the file's time as nginx sets it.
    modified: Option<u64>,
    /// Failures go to the location's error log after the response (the
    /// request context is gone by then): `*CONN` and the message.
    log: std::sync::Arc<crate::log::error::ErrorLog>,
    conn: u64,
}

impl StoreFile {
    /// A store for this response when the location stores and the origin
    /// answered 200 (with a body: not to a HEAD). nginx stores only what it
    /// buffers, so not with `*_buffering off` (or `X-Accel-Buffering: no`).
    pub fn start(
        ctx: &ReqCtx<'_, '_>,
        conf: &UpstreamConf,
        status: u16,
        buffering: bool,
        modified: Option<u64>,
    ) -> Option<Box<StoreFile>> {
        if status != 200 || !buffering || ctx.req.method == crate::http::request::Method::Head {
            return None;
        }
        let mut dest = Vec::new();
        match &conf.store {
            StoreConf::Off => return None,
            StoreConf::Root => crate::http::handler::static_file::map_path(ctx, &ctx.req.path, &mut dest),
            StoreConf::Path(t) => t.render(&Vars::request(ctx), &mut dest),
        }
        let dest = PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(dest));
        match crate::http::connection::spool::rename_source(&conf.buffers.temp_path) {
            Ok((file, temp)) => Some(Box::new(StoreFile {
                file: Some(file),
                temp,
                dest,
                access: conf.store_access,
                modified,
                log: ctx.conf.error_log.clone(),
                conn: ctx.conn.id,
            })),
            Err(m) => {
                crate::log_req!(ctx, Level::Crit, "{m}");
                None
            }
        }
    }

    /// Appends body bytes; a failed write abandons the store (the
    /// temporary file goes), the response goes on to the client.
    pub fn push(&mut self, data: &[u8]) {
        let Some(f) = self.file.as_mut() else { return };
        if let Err(e) = f.write_all(data) {
            self.file = None;
            let os = crate::process::signal::os_error(&e);
            self.crit(format_args!("write() \"{}\" failed ({os})", self.temp.path.display()));
        }
    }

    fn crit(&self, what: std::fmt::Arguments<'_>) {
        crate::log_to!(self.log, Level::Crit, "*{} {what}", self.conn);
    }

    /// The whole body arrived: into place (a failure is logged).
    pub fn finish(&mut self) {
        if let Err(why) = self.commit() {
            self.crit(format_args!("{why}"));
        }
    }

    /// The whole body arrived: the file gets its mode and time and goes
    /// into place, with the directories it needs.
    fn commit(&mut self) -> Result<(), String> {
        let Some(f) = self.file.take() else { return Ok(()) };
        let temp = &self.temp.path;
        let os = crate::process::signal::os_error;
        f.set_permissions(std::fs::Permissions::from_mode(self.access))
            .map_err(|e| format!("chmod() \"{}\" failed ({})", temp.display(), os(&e)))?;
        if let Some(t) = self.modified {
            let _ = f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t));
        }
        drop(f);
        let mut r = std::fs::rename(temp, &self.dest);
        if r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ENOENT))
            && let Some(parent) = self.dest.parent()
        {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(crate::config::value::dir_access(self.access))
                .create(parent)
                .map_err(|e| format!("mkdir() \"{}\" failed ({})", parent.display(), os(&e)))?;
            r = std::fs::rename(temp, &self.dest);
        }
        if r.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::EXDEV)) {
            r = copy_across(temp, &self.dest);
        }
        r.map_err(|e| format!("rename() \"{}\" to \"{}\" failed ({})", temp.display(), self.dest.display(), os(&e)))
    }
}

/// A destination on another file system: copied next to it under a
/// temporary name, then renamed, as nginx's `ngx_copy_file` fallback.
fn copy_across(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut side = to.as_os_str().to_owned();
    side.push(format!(".{}", std::process::id()));
    let side = PathBuf::from(side);
    let r = std::fs::copy(from, &side).and_then(|_| std::fs::rename(&side, to));
    if r.is_err() {
        let _ = std::fs::remove_file(&side);
    }
    r
}
