//! The files error logs write to. One `LogFile` per path per configuration,
//! shared by every level that names the path, so the same file written from
//! main, a server and a location is one descriptor, as in nginx, and
//! `-s reopen` has one place per path to swap it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};

pub struct LogFile {
    /// None: stderr, which is never opened or reopened.
    path: Option<PathBuf>,
    /// Taken for reading by every line written and for writing only by
    /// open and reopen: error lines are rare, so the lock costs nothing the
    /// hot path pays.
    file: RwLock<Option<File>>,
}

/// Every file opened by any configuration still alive, so `-s reopen`
/// reaches the files of a generation that is still draining too.
static OPENED: Mutex<Vec<Weak<LogFile>>> = Mutex::new(Vec::new());

impl LogFile {
    pub fn new(path: Option<PathBuf>) -> Arc<LogFile> {
        Arc::new(LogFile { path, file: RwLock::new(None) })
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn write(&self, line: &[u8]) {
        if self.path.is_none() {
            let _ = std::io::stderr().write_all(line);
            return;
        }
        if let Ok(f) = self.file.read()
            && let Some(f) = f.as_ref()
        {
            let _ = (&*f).write_all(line);
        }
    }

    fn replace(&self, f: File) {
        if let Ok(mut slot) = self.file.write() {
            *slot = Some(f);
        }
    }
}

fn open(p: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| format!("open() \"{}\" failed ({})", p.display(), crate::process::signal::os_error(&e)))
}

/// Opens every file of a configuration, all or none: a reload naming a
/// path that cannot be opened changes nothing, and the old configuration
/// keeps logging where it did.
pub fn open_all(files: &[Arc<LogFile>]) -> Result<(), String> {
    let mut opened = Vec::with_capacity(files.len());
    for f in files {
        if let Some(p) = &f.path {
            opened.push((f, open(p)?));
        }
    }
    let mut registry = OPENED.lock().unwrap_or_else(|e| e.into_inner());
    registry.retain(|w| w.strong_count() > 0);
    for (f, file) in opened {
        f.replace(file);
        registry.push(Arc::downgrade(f));
    }
    Ok(())
}

/// `-s reopen`: log rotation moved the files away; each path gets a new
/// file. Returns the failures, for the caller to log once no lock is held.
pub fn reopen_all() -> Vec<String> {
    let live: Vec<Arc<LogFile>> = {
        let mut registry = OPENED.lock().unwrap_or_else(|e| e.into_inner());
        registry.retain(|w| w.strong_count() > 0);
        registry.iter().filter_map(Weak::upgrade).collect()
    };
    let mut failed = Vec::new();
    for f in live {
        if let Some(p) = &f.path {
            match open(p) {
                Ok(file) => f.replace(file),
                Err(e) => failed.push(e),
            }
        }
    }
    failed
}
