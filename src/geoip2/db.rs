//! One `geoip2` database: the MaxMind DB file read into memory, shared by
//! every worker, and swapped for a new copy when `auto_reload` sees the
//! file change.
//!
//! nginx's module maps the file with libmaxminddb in each worker and, in
//! the log phase of a request, at most once per `auto_reload` period,
//! stats it and reopens it when its mtime is newer than the last change
//! (the load time at first). Here the workers are threads of one process:
//! the reader is an `Arc` in an `ArcSwap` (a lock-free load per lookup),
//! the first lookup after the period claims the check with one atomic
//! exchange, and a short-lived thread stats and reads the file so no
//! worker waits on the disk; lookups use the old copy until the new one
//! is in. A file that no longer opens keeps the old copy, with nginx's
//! error line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use arc_swap::ArcSwap;
use maxminddb::{MaxMindDbError, Reader};

use crate::log::error::Level;

pub type MmdbReader = Reader<Vec<u8>>;

/// A `geoip2 FILE { ... }` database.
pub struct Database {
    /// The file as nginx names it in messages: relative names resolved
    /// against the prefix.
    pub path: PathBuf,
    current: ArcSwap<MmdbReader>,
    /// `auto_reload`, in seconds; 0 when off.
    interval: i64,
    /// Unix times, as `$var metadata last_check` / `last_change` give them.
    last_check: AtomicI64,
    last_change: AtomicI64,
    /// A reload thread is running.
    busy: AtomicBool,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "geoip2 {}", self.path.display())
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// libmaxminddb's `MMDB_strerror` text for why a file did not open, as
/// nginx's `MMDB_open("...") failed - ...` line ends.
pub fn strerror(e: &MaxMindDbError) -> &'static str {
    match e {
        MaxMindDbError::Io(_) => "Error opening the specified MaxMind DB file",
        MaxMindDbError::InvalidDatabase { message, .. } if message.contains("etadata") => {
            "The MaxMind DB file contains invalid metadata"
        }
        MaxMindDbError::InvalidDatabase { .. } => "The MaxMind DB file's search tree is corrupt",
        _ => "The MaxMind DB file's data section contains bad data (unknown data type or corrupt data)",
    }
}

/// Reads and checks a database file: the crate's open (metadata, record
/// size, tree size against the file), then one lookup in each family so a
/// file whose tree does not reach its data is refused at load rather than
/// at the first request.
pub fn open(path: &Path) -> Result<MmdbReader, MaxMindDbError> {
    let bytes = std::fs::read(path)?;
    parse(bytes)
}

/// The same over bytes already read (the fuzz target's entry).
pub fn parse(bytes: Vec<u8>) -> Result<MmdbReader, MaxMindDbError> {
    let reader = Reader::from_source(bytes)?;
    for addr in [std::net::Ipv4Addr::UNSPECIFIED.into(), std::net::Ipv6Addr::UNSPECIFIED.into()] {
        match reader.lookup(addr) {
            Err(e @ MaxMindDbError::InvalidDatabase { .. }) => return Err(e),
            _ => continue,
        }
    }
    Ok(reader)
}

impl Database {
    /// Opens `path` at configuration load; `interval` is `auto_reload`'s
    /// period in seconds (0: never).
    pub fn open(path: PathBuf, interval: i64) -> Result<Database, MaxMindDbError> {
        let reader = open(&path)?;
        let t = now();
        Ok(Database {
            path,
            current: ArcSwap::from_pointee(reader),
            interval,
            last_check: AtomicI64::new(t),
            last_change: AtomicI64::new(t),
            busy: AtomicBool::new(false),
        })
    }

    /// The reader for a lookup, starting a reload check first when the
    /// period has passed.
    pub fn reader(self: &Arc<Self>) -> arc_swap::Guard<Arc<MmdbReader>> {
        if self.interval > 0 {
            self.check();
        }
        self.current.load()
    }

    pub fn build_epoch(&self) -> u64 {
        self.current.load().metadata().build_epoch
    }

    pub fn last_check(&self) -> i64 {
        self.last_check.load(Ordering::Relaxed)
    }

    pub fn last_change(&self) -> i64 {
        self.last_change.load(Ordering::Relaxed)
    }

    fn check(self: &Arc<Self>) {
        let t = now();
        let last = self.last_check.load(Ordering::Relaxed);
        if last.saturating_add(self.interval) > t {
            return;
        }
        if self.last_check.compare_exchange(last, t, Ordering::Relaxed, Ordering::Relaxed).is_err()
            || self.busy.swap(true, Ordering::Acquire)
        {
            return;
        }
        let db = self.clone();
        let spawned = std::thread::Builder::new().name("sluice-geoip2".into()).spawn(move || {
            db.reload();
            db.busy.store(false, Ordering::Release);
        });
        if let Err(e) = spawned {
            self.busy.store(false, Ordering::Release);
            crate::log_error!(Level::Alert, "geoip2: could not start the reload of \"{}\": {e}", self.path.display());
        }
    }

    /// nginx's check: the file's mtime (seconds) newer than the last
    /// change, then a new open; its messages and levels.
    fn reload(&self) {
        let mtime = match std::fs::metadata(&self.path).and_then(|m| m.modified()) {
            Ok(m) => m.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64),
            Err(e) => {
                let code = e.raw_os_error().unwrap_or(0);
                crate::log_error!(Level::Emerg, "stat() \"{}\" failed ({code}: {e})", self.path.display());
                return;
            }
        };
        if mtime <= self.last_change.load(Ordering::Relaxed) {
            return;
        }
        match open(&self.path) {
            Ok(reader) => {
                self.current.store(Arc::new(reader));
                self.last_change.store(mtime, Ordering::Relaxed);
                crate::log_error!(Level::Info, "Reload MMDB \"{}\"", self.path.display());
            }
            Err(e) => {
                crate::log_error!(
                    Level::Error,
                    "MMDB_open(\"{}\") failed to reload - {}",
                    self.path.display(),
                    strerror(&e)
                );
            }
        }
    }
}
