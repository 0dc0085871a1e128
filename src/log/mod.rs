//! Logging: the per-worker buffered access log with `log_format` (and,
//! unbuffered, logs whose path has variables), and the error logs of each
//! configuration level, to files or syslog, with `debug_connection`.

pub mod access;
pub mod access_path;
pub mod debug;
pub mod error;
pub mod error_file;
pub mod format;
pub mod syslog;
