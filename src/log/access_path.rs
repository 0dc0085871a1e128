//! Access logs whose path has variables (`access_log logs/$host.log;`), as
//! nginx writes them without `open_log_file_cache`: per line, the path is
//! rendered (relative paths start at the prefix), the request's root
//! directory must exist (nginx's guard against a log per mistyped virtual
//! host), and the file is opened for appending (created 0644 if missing,
//! never its directories), written with the one line and closed. Nothing
//! is buffered, so nginx refuses `buffer=` and `gzip` with variables, and
//! so does the configuration here. Failures lose that line only, with
//! nginx's error-log lines ("... while logging request").
//!
//! With `open_log_file_cache` a worker keeps the descriptors instead, as
//! nginx's cache does: a path used `min_uses` times stays open (writes
//! reach the file it was opened as, even once renamed), is checked
//! against the path again after `valid`, and is closed after `inactive`
//! without use or when `max` paths are known (least recently used first;
//! paths not yet open count too, as nginx's nodes do). The cache is the
//! worker's, not the location's: the requesting location's settings apply.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::http::handler::ctx::Vars;
use crate::log::error::Level;
use crate::log_req;
use crate::variables::Template;

/// `open_log_file_cache max=N inactive=T min_uses=N valid=T`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogFileCache {
    pub max: usize,
    pub inactive: Duration,
    pub min_uses: u32,
    pub valid: Duration,
}

struct Cached {
    file: Option<File>,
    uses: u32,
    used: Instant,
    checked: Instant,
}

thread_local! {
    static FILES: RefCell<HashMap<PathBuf, Cached>> = RefCell::new(HashMap::new());
}

fn open(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new().append(true).create(true).mode(0o644).open(path)
}

/// The path still names the open file (nginx compares the inode after
/// `valid`).
fn same_file(path: &Path, f: &File) -> bool {
    match (std::fs::metadata(path), f.metadata()) {
        (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
        _ => false,
    }
}

/// Appends `line` through the worker's descriptor cache.
fn write_cached(c: &LogFileCache, path: &Path, line: &[u8]) -> Result<(), (&'static str, std::io::Error)> {
    let now = crate::clock::mono();
    FILES.with(|files| {
        let mut m = files.borrow_mut();
        if !m.contains_key(path) {
            // A path is known only once it opened (nginx creates its node
            // after a successful open), so failures evict nothing.
            let mut f = open(path).map_err(|err| ("open()", err))?;
            let written = f.write_all(line).map_err(|err| ("write()", err));
            m.retain(|_, e| now.saturating_duration_since(e.used) < c.inactive);
            if m.len() >= c.max
                && let Some(old) = m.iter().min_by_key(|(_, e)| e.used).map(|(p, _)| p.clone())
            {
                m.remove(&old);
            }
            let file = (c.min_uses <= 1).then_some(f);
            m.insert(path.to_path_buf(), Cached { file, uses: 1, used: now, checked: now });
            return written;
        }
        let Some(e) = m.get_mut(path) else { return Err(("open()", std::io::Error::from_raw_os_error(libc::ENOMEM))) };
        if now.saturating_duration_since(e.used) >= c.inactive {
            e.file = None;
            e.uses = 0;
        }
        e.uses = e.uses.saturating_add(1);
        e.used = now;
        if e.file.is_some() && now.saturating_duration_since(e.checked) >= c.valid {
            if !e.file.as_ref().is_some_and(|f| same_file(path, f)) {
                e.file = None;
            }
            e.checked = now;
        }
        if e.file.is_none() && e.uses >= c.min_uses {
            let f = open(path).map_err(|err| ("open()", err))?;
            e.file = Some(f);
            e.checked = now;
        }
        match &mut e.file {
            Some(f) => f.write_all(line).map_err(|err| ("write()", err)),
            None => open(path)
                .map_err(|err| ("open()", err))
                .and_then(|mut f| f.write_all(line).map_err(|err| ("write()", err))),
        }
    })
}

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
        let written = match &ctx.conf.core.open_log_file_cache {
            Some(c) => write_cached(c, &path, line),
            None => {
                open(&path).map_err(|e| ("open()", e)).and_then(|mut f| f.write_all(line).map_err(|e| ("write()", e)))
            }
        };
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
