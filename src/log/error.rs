//! Error logs (`error_log PATH LEVEL`), in nginx's line format so
//! operators' log tooling keeps working:
//! `2026/11/22 14:02:34 [error] 1234#1240: *5 message`.
//!
//! As in nginx, each configuration level has its own list of logs: a line
//! about a request goes to the logs of the location (or server) handling
//! it (`log_to!`), everything else to the main level's (`log_error!`).

use std::io::Write;
use std::sync::{Arc, RwLock};

use super::error_file::LogFile;

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

/// The logs of one configuration level: each target gets the lines at or
/// above its own level (nginx 1.5.2+ allows several per level).
#[derive(Clone, Default)]
pub struct ErrorLog {
    targets: Vec<(Arc<LogFile>, Level)>,
    /// `syslog:` targets: a datagram per line, severity from the level.
    syslog: Vec<(Arc<super::syslog::Peer>, Level)>,
    /// The most verbose level of any target (0: none), so a line no target
    /// wants costs one comparison and no formatting.
    max: u8,
}

impl ErrorLog {
    pub fn add(&mut self, file: Arc<LogFile>, level: Level) {
        self.max = self.max.max(level as u8);
        self.targets.push((file, level));
    }

    pub fn add_syslog(&mut self, peer: Arc<super::syslog::Peer>, level: Level) {
        self.max = self.max.max(level as u8);
        self.syslog.push((peer, level));
    }

    #[inline]
    pub fn enabled(&self, level: Level) -> bool {
        level as u8 <= self.max
    }

    pub fn write(&self, level: Level, msg: std::fmt::Arguments<'_>) {
        self.write_conn(level, false, msg);
    }

    /// `write`, for a line about a connection: one `debug_connection`
    /// names (`all`) goes to every target whatever its level, as nginx
    /// raises such a connection's log level to debug. The line is
    /// formatted once, so every target gets the same bytes.
    pub fn write_conn(&self, level: Level, all: bool, msg: std::fmt::Arguments<'_>) {
        let line = format_line(level, msg);
        for (file, max) in &self.targets {
            if all || level <= *max {
                file.write(&line);
            }
        }
        for (peer, max) in &self.syslog {
            if all || level <= *max {
                peer.write_error(level as u8, &line);
            }
        }
    }

    /// (path, level) per target, None for stderr: for tests and diagnostics.
    pub fn targets(&self) -> impl Iterator<Item = (Option<&std::path::Path>, Level)> {
        self.targets.iter().map(|(f, l)| (f.path(), *l))
    }
}

impl std::fmt::Debug for ErrorLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.targets()).entries(self.syslog.iter()).finish()
    }
}

impl PartialEq for ErrorLog {
    fn eq(&self, other: &Self) -> bool {
        self.targets().eq(other.targets()) && self.syslog == other.syslog
    }
}

fn format_line(level: Level, msg: std::fmt::Arguments<'_>) -> Vec<u8> {
    let mut line = Vec::with_capacity(160);
    crate::http::date::error_log_time(crate::clock::unix_now(), crate::clock::local_offset(), &mut line);
    let _ = writeln!(
        line,
        " [{}] {}#{}: {}",
        level.name(),
        std::process::id(),
        rustix::thread::gettid().as_raw_nonzero(),
        msg
    );
    line
}

/// The main level's logs, for lines that belong to no request. None until
/// a configuration is running: stderr, errors only.
static MAIN: RwLock<Option<Arc<ErrorLog>>> = RwLock::new(None);

/// Makes a configuration's main logs (already opened) the process's.
pub fn install(log: Arc<ErrorLog>) {
    if let Ok(mut m) = MAIN.write() {
        *m = Some(log);
    }
}

fn main_log() -> Option<Arc<ErrorLog>> {
    MAIN.read().ok().and_then(|m| m.clone())
}

pub fn enabled(level: Level) -> bool {
    match main_log() {
        Some(l) => l.enabled(level),
        None => level <= Level::Error,
    }
}

pub fn write(level: Level, msg: std::fmt::Arguments<'_>) {
    match main_log() {
        Some(l) => l.write(level, msg),
        None if level <= Level::Error => {
            let _ = std::io::stderr().write_all(&format_line(level, msg));
        }
        None => {}
    }
}

/// Appends one line in the error log's format to `path`: what nginx
/// writes to the `-e` log before a configuration runs (a refused
/// configuration's `[emerg]`, load-time warnings). A file that cannot be
/// opened is ignored: the same line went to stderr.
pub fn append_line(path: &std::path::Path, level: Level, msg: std::fmt::Arguments<'_>) {
    let line = format_line(level, msg);
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(&line);
    }
}

/// `log_error!(Level::Notice, "signal 1 (SIGHUP) received, reconfiguring")`:
/// a line for the main level's logs (startup, reload, workers, health
/// checks): no request to attribute it to.
#[macro_export]
macro_rules! log_error {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::error::enabled($lvl) {
            $crate::log::error::write($lvl, format_args!($($arg)*));
        }
    };
}

/// `log_to!(ctx.conf.error_log, Level::Error, "open() ...")`: a line for
/// the logs of the level handling a request. The level comparison comes
/// before any argument is evaluated or formatted.
#[macro_export]
macro_rules! log_to {
    ($log:expr, $lvl:expr, $($arg:tt)*) => {{
        let log: &$crate::log::error::ErrorLog = &$log;
        let lvl = $lvl;
        if log.enabled(lvl) {
            log.write(lvl, format_args!($($arg)*));
        }
    }};
}
