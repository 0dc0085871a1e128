//! The error log (`error_log PATH LEVEL`), in nginx's line format so
//! operators' log tooling keeps working:
//! `2026/11/22 14:02:34 [error] 1234#1240: *5 message`.
//!
//! Error lines are rare, so one process-wide log behind a lock is enough; the
//! per-request access log is the one that must avoid syscalls.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::RwLock;

use crate::config::model::ErrorLogConf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Emerg = 1,
    Alert,
    Crit,
    Error,
    Warn,
    Notice,
    Info,
    Debug,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "debug" => Level::Debug,
            "info" => Level::Info,
            "notice" => Level::Notice,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "crit" => Level::Crit,
            "alert" => Level::Alert,
            "emerg" => Level::Emerg,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Notice => "notice",
            Level::Warn => "warn",
            Level::Error => "error",
            Level::Crit => "crit",
            Level::Alert => "alert",
            Level::Emerg => "emerg",
        }
    }
}

struct Sink {
    file: Option<File>,
    path: Option<PathBuf>,
    level: Level,
}

static SINK: RwLock<Sink> = RwLock::new(Sink { file: None, path: None, level: Level::Error });

/// Opens the configured target; on failure nothing changes, so a bad reload
/// keeps logging where it did.
pub fn install(conf: &ErrorLogConf) -> std::io::Result<()> {
    let file = match &conf.path {
        Some(p) => Some(open(p)?),
        None => None,
    };
    if let Ok(mut s) = SINK.write() {
        *s = Sink { file, path: conf.path.clone(), level: conf.level };
    }
    Ok(())
}

fn open(p: &PathBuf) -> std::io::Result<File> {
    OpenOptions::new().create(true).append(true).open(p)
}

/// `-s reopen`: log rotation moved the file away; start a new one at the path.
pub fn reopen() {
    if let Ok(mut s) = SINK.write()
        && let Some(p) = s.path.clone()
    {
        match open(&p) {
            Ok(f) => s.file = Some(f),
            Err(e) => eprintln!("sluice: [alert] reopen of \"{}\" failed ({})", p.display(), e),
        }
    }
}

pub fn enabled(level: Level) -> bool {
    SINK.read().map(|s| level <= s.level).unwrap_or(true)
}

pub fn write(level: Level, msg: std::fmt::Arguments<'_>) {
    let Ok(s) = SINK.read() else { return };
    if level > s.level {
        return;
    }
    let now = crate::clock::unix_now();
    let mut line = Vec::with_capacity(160);
    crate::http::date::error_log_time(now, crate::clock::local_offset(), &mut line);
    let _ = writeln!(
        line,
        " [{}] {}#{}: {}",
        level.name(),
        std::process::id(),
        rustix::thread::gettid().as_raw_nonzero(),
        msg
    );
    match &s.file {
        Some(f) => {
            let _ = (&*f).write_all(&line);
        }
        None => {
            let _ = std::io::stderr().write_all(&line);
        }
    }
}

/// `error!(Level::Error, "open() \"{}\" failed", path)`.
#[macro_export]
macro_rules! log_error {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::error::enabled($lvl) {
            $crate::log::error::write($lvl, format_args!($($arg)*));
        }
    };
}
