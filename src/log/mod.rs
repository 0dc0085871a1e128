//! Logging: the per-worker buffered access log with `log_format`, and the
//! process-wide error log.

pub mod access;
pub mod error;
pub mod format;
