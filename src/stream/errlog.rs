//! A stream session's error-log lines in nginx's shapes: the context
//! every line ends with (`client: ..., server: ...`, and in the proxy
//! phase the origin and the bytes moved so far), the info lines as a
//! session starts, connects to its origin and ends, and how a relay ended
//! ([`Close`]), which picks the last of them.

use super::session::Session;
use crate::log::error::Level;
use crate::log_to;

/// How a relayed session ended, as nginx's closing info line says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Close {
    /// A side closed (`ngx_stream_proxy_test_finalize`): "client
    /// disconnected" or "upstream disconnected" (the origin).
    Disconnected { upstream: bool },
    /// A datagram session got its `proxy_responses` ("udp done"), or went
    /// quiet for `proxy_timeout` with what it waited for ("udp timed
    /// out"): with the datagrams from and to the client.
    Udp { done: bool, requests: u64, responses: u64 },
}

impl std::fmt::Display for Close {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Close::Disconnected { upstream } => {
                write!(f, "{} disconnected", if *upstream { "upstream" } else { "client" })
            }
            Close::Udp { done, requests, responses } => {
                let how = if *done { "done" } else { "timed out" };
                write!(f, "udp {how}, packets from/to client:{requests}/{responses}")
            }
        }
    }
}

impl Session {
    /// The client as error-log lines name it: its address, or `unix:`
    /// and the name it bound.
    fn client_label(&self) -> String {
        if self.client_unix.get() {
            format!("unix:{}", String::from_utf8_lossy(&self.unix_name))
        } else {
            self.client.get().ip().to_string()
        }
    }

    /// nginx's error-log lines call a datagram session's client a "udp
    /// client" (`ngx_stream_log_error`).
    fn udp_label(&self) -> &'static str {
        if self.udp { "udp " } else { "" }
    }

    /// nginx's info line as a datagram session starts
    /// (`ngx_stream_init_connection`): "udp client ADDR connected to ...".
    pub(super) fn log_udp_connected(&self) {
        // Off by default (info): nothing formatted for a line not written.
        if !self.server().conf.error_log.enabled(Level::Info) {
            return;
        }
        let client = if self.client_unix.get() { self.client_label() } else { self.client.get().to_string() };
        log_to!(
            self.server().conf.error_log,
            Level::Info,
            "*{} udp client {} connected to {}",
            self.id,
            client,
            self.addr_label()
        );
    }

    /// The listen address as error-log lines name it.
    fn addr_label(&self) -> String {
        match &self.addr.unix {
            Some(p) => format!("unix:{p}"),
            None => self.addr.addr.to_string(),
        }
    }

    /// An error-log line about this session, in nginx's stream shape.
    pub fn log(&self, level: Level, msg: std::fmt::Arguments<'_>) {
        crate::log_conn!(
            self.server().conf.error_log,
            self.debug,
            level,
            "*{} {}, {}client: {}, server: {}",
            self.id,
            msg,
            self.udp_label(),
            self.client_label(),
            self.addr_label()
        );
    }

    /// A line of the proxy phase, as nginx's `ngx_stream_proxy_log_error`
    /// ends it: the origin (`upstream: "ADDR"`, the upstream's name when no
    /// peer was left to pick; none before one is known) and the bytes the
    /// session moved so far, which tell how far it got.
    pub fn log_upstream(&self, level: Level, msg: std::fmt::Arguments<'_>, upstream: Option<&str>) {
        let (up_received, up_sent) = self.up.borrow().tries.last().map_or((0, 0), |t| (t.received, t.sent));
        let origin = upstream.map(|u| format!(", upstream: \"{u}\"")).unwrap_or_default();
        crate::log_conn!(
            self.server().conf.error_log,
            self.debug,
            level,
            "*{} {}, {}client: {}, server: {}{}, bytes from/to client:{}/{}, bytes from/to upstream:{}/{}",
            self.id,
            msg,
            self.udp_label(),
            self.client_label(),
            self.addr_label(),
            origin,
            self.bytes_received.get(),
            self.bytes_sent.get(),
            up_received,
            up_sent
        );
    }

    /// nginx's info line once the session's origin is connected (and past
    /// its TLS handshake): `proxy LOCAL connected to PEER`, without the
    /// context the other lines end with. `local` asks the socket, only
    /// when the line is wanted (as nginx checks the level first).
    pub fn log_proxy_connected(&self, local: impl FnOnce() -> String, peer: &str) {
        let log = &self.server().conf.error_log;
        if log.enabled(Level::Info) {
            let local = local();
            log_to!(log, Level::Info, "*{} {}proxy {} connected to {}", self.id, self.udp_label(), local, peer);
        }
    }

    /// nginx's closing info line, for a session whose relay ended well
    /// (`Session::close_line`): a session that never got there (refused
    /// by `deny` or `limit_conn`, a `return`, an origin that would not
    /// connect) or whose relay failed sending or timed out ends without
    /// one, as nginx's.
    pub(super) fn log_close(&self) {
        let Some(close) = self.close_line.get() else { return };
        let up = self.up.borrow();
        let (up_received, up_sent) = up.tries.last().map_or((0, 0), |t| (t.received, t.sent));
        log_to!(
            self.server().conf.error_log,
            Level::Info,
            "*{} {}, bytes from/to client:{}/{}, bytes from/to upstream:{}/{}",
            self.id,
            close,
            self.bytes_received.get(),
            self.bytes_sent.get(),
            up_received,
            up_sent
        );
    }
}
