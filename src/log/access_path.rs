//! Access logs whose path has variables (`access_log logs/$host.log;`), as
//! nginx writes them without `open_log_file_cache`: per line, the path is
//! rendered (relative paths start at the prefix), the request's root
//! directory must exist (nginx's guard against a log per mistyped virtual
//! host), and the file is opened for appending (created 0644 if missing,
//! never its directories), written with the one line and closed. Nothing
//! is buffered, so nginx refuses `buffer=` and `gzip` with variables, and
//! so does the configuration here. Failures lose that line only, with
//! nginx's error-log lines ("... while logging request").

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::http::handler::ctx::Vars;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

#[derive(Debug, PartialEq)]
pub struct DynamicPath {
    pub template: Template,
    /// What a relative result is joined to.
    pub prefix: PathBuf,
}

impl DynamicPath {
    /// Appends `line` to this request's file.
    pub fn write(&self, vars: &Vars<'_, '_, '_>, line: &[u8]) {
        let ctx = vars.ctx;
        let mut root = Vec::new();
        crate::http::handler::ctx::document_root(ctx, &mut root);
        if let Err(e) = std::fs::metadata(Path::new(std::ffi::OsStr::from_bytes(&root)))
            .and_then(|m| if m.is_dir() { Ok(()) } else { Err(std::io::Error::from_raw_os_error(libc::ENOTDIR)) })
        {
            log_req!(
                ctx,
                Level::Error,
                "testing \"{}\" existence failed ({}) while logging request",
                String::from_utf8_lossy(&root),
                crate::process::signal::os_error(&e)
            );
            return;
        }
        let mut rendered = Vec::new();
        self.template.render(vars, &mut rendered);
        let path = self.prefix.join(Path::new(std::ffi::OsStr::from_bytes(&rendered)));
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o644)
            .open(&path)
            .map_err(|e| ("open()", e))
            .and_then(|mut f| f.write_all(line).map_err(|e| ("write()", e)));
        if let Err((call, e)) = written {
            log_req!(
                ctx,
                Level::Crit,
                "{} \"{}\" failed ({}) while logging request",
                call,
                path.display(),
                crate::process::signal::os_error(&e)
            );
        }
    }
}
