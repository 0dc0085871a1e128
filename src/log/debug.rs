//! Debug-level lines and `debug_connection`: nginx built `--with-debug`
//! writes `[debug]` lines to the logs at level `debug`, and to every log
//! of a connection whose client `debug_connection` names, whatever the
//! log's level. sluice writes a small set of them on the request path
//! (accept, request line, URI, proxying, finalize) for the same purpose:
//! following one client's requests in a busy server.
//!
//! A connection knows whether it is such a client from its accept
//! (`ConnInfo::debug`), so a line costs one boolean and one level
//! comparison, and no formatting, when nobody wants it.

use std::net::IpAddr;

use crate::cidr::Cidr;

/// Whether a client is one `debug_connection` names: an address in one of
/// the ranges, or any unix-domain client for `unix:`.
pub fn matches(list: &[Cidr], peer: IpAddr, unix: bool) -> bool {
    if unix {
        return list.contains(&Cidr::Unix);
    }
    crate::cidr::any_contains(list, peer)
}

/// `log_debug!(log, conn_debug, "http uri: \"{}\"", ..)`: a `[debug]`
/// line for `log` (an `ErrorLog`), written to its targets at level debug,
/// or to all of them when `conn_debug` (the connection is one
/// `debug_connection` names). Nothing is formatted otherwise.
#[macro_export]
macro_rules! log_debug {
    ($log:expr, $conn_debug:expr, $($arg:tt)*) => {{
        let log: &$crate::log::error::ErrorLog = &$log;
        let all: bool = $conn_debug;
        if all || log.enabled($crate::log::error::Level::Debug) {
            log.write_conn($crate::log::error::Level::Debug, all, format_args!($($arg)*));
        }
    }};
}

/// `log_conn!(log, conn_debug, level, ...)`: a line about a connection
/// at `level`, to the targets of `log` that take that level, or to all of
/// them for a connection `debug_connection` names.
#[macro_export]
macro_rules! log_conn {
    ($log:expr, $conn_debug:expr, $lvl:expr, $($arg:tt)*) => {{
        let log: &$crate::log::error::ErrorLog = &$log;
        let (all, lvl): (bool, $crate::log::error::Level) = ($conn_debug, $lvl);
        if all || log.enabled(lvl) {
            log.write_conn(lvl, all, format_args!($($arg)*));
        }
    }};
}

/// `req_debug!(ctx, "http finalize request: {}", status)`: a `[debug]`
/// line about a request, to the logs of the level handling it, numbered
/// with its connection as nginx's (`*5 ...`; debug lines carry no
/// `client:, server:` suffix in nginx either).
#[macro_export]
macro_rules! req_debug {
    ($ctx:expr, $($arg:tt)*) => {{
        let ctx: &$crate::http::handler::ctx::ReqCtx<'_, '_> = &$ctx;
        $crate::log_debug!(ctx.conf.error_log, ctx.conn.debug, "*{} {}", ctx.conn.id, format_args!($($arg)*));
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(v: &[&str]) -> Vec<Cidr> {
        v.iter().filter_map(|s| Cidr::parse(s)).map(|p| p.cidr).collect()
    }

    #[test]
    fn addresses_ranges_and_unix() {
        let l = cidrs(&["127.0.0.1", "10.0.0.0/8", "::1"]);
        assert!(matches(&l, "127.0.0.1".parse().unwrap(), false));
        assert!(matches(&l, "10.2.3.4".parse().unwrap(), false));
        assert!(matches(&l, "::1".parse().unwrap(), false));
        assert!(!matches(&l, "127.0.0.2".parse().unwrap(), false));
        assert!(!matches(&l, "127.0.0.1".parse().unwrap(), true));
        assert!(matches(&cidrs(&["unix:"]), "0.0.0.0".parse().unwrap(), true));
        assert!(!matches(&cidrs(&["unix:"]), "127.0.0.1".parse().unwrap(), false));
    }
}
