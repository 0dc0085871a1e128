//! HTTP/3 (RFC 9114) over QUIC: quinn for the transport (`endpoint`, one
//! per worker per `listen ... quic` address, on `crate::quic`), the `h3`
//! crate for framing and QPACK. Each request stream becomes the same
//! `Head` HTTP/1 and HTTP/2 produce and runs the same pipeline
//! (`stream`); the connection loop here accepts streams, closes a
//! connection idle for `keepalive_timeout` or past `keepalive_requests` /
//! `keepalive_time`, and on reload or quit sends GOAWAY and lets the
//! requests in progress finish, as the HTTP/2 loop does. A connection
//! whose 0-RTT data the server took (`ssl_early_data on`) is served before
//! its handshake completes (`establish`).

pub mod conf;
pub mod endpoint;
pub mod head;
pub mod quic;
pub mod stream;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::http::handler::ctx::ConnInfo;
use crate::log::error::Level;
use crate::log_to;
use crate::tls::handshake::TlsInfo;
use crate::worker::ConnGuard;

/// The request streams of one connection in progress and when the last
/// one ended.
#[derive(Default)]
pub struct Shared {
    pub active: Cell<usize>,
    pub last_active: Cell<Option<Instant>>,
}

impl Shared {
    fn finish(&self) {
        self.active.set(self.active.get().saturating_sub(1));
        self.last_active.set(Some(Instant::now()));
    }
}

/// HTTP/3 application error codes (RFC 9114 8.1) for closing.
const H3_NO_ERROR: u32 = 0x100;
const H3_GENERAL_PROTOCOL_ERROR: u32 = 0x101;

pub async fn serve(connecting: quinn::Connecting, group: usize, guard: ConnGuard) {
    let w = guard.0.clone();
    let g = &w.cfg.http.listens[group];
    let conf = &g.default_server.conf;
    let peer = connecting.remote_address();
    let id = w.next_serial();
    let deadline = tokio::time::Instant::now() + conf.client_header_timeout;
    let mut connecting = connecting;
    // The ClientHello is read once quinn has its server name and ALPN:
    // whether its 0-RTT data was accepted is known then.
    let early = matches!(
        tokio::time::timeout_at(deadline, connecting.handshake_data()).await,
        Ok(Ok(d)) if d.downcast_ref::<crate::tls::quic::Handshake>().is_some_and(|h| h.early)
    );
    let conn = match tokio::time::timeout_at(deadline, establish(connecting, early)).await {
        Ok(Ok((c, None))) => c,
        Ok(Ok((c, Some(accepted)))) => {
            // Served early, the handshake still has until the deadline.
            let (c2, w2) = (c.clone(), w.clone());
            tokio::task::spawn_local(async move {
                if tokio::time::timeout_at(deadline, accepted).await.is_err() {
                    let g = &w2.cfg.http.listens[group];
                    w2.metrics.tls_failed();
                    log_to!(
                        g.default_server.conf.error_log,
                        Level::Info,
                        "*{} client timed out (110: Connection timed out) while SSL handshaking, client: {}, server: {}",
                        id,
                        peer.ip(),
                        g.addr
                    );
                    c2.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
                }
            });
            c
        }
        Ok(Err(e)) => {
            w.metrics.tls_failed();
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} SSL_do_handshake() failed ({}) while SSL handshaking, client: {}, server: {}",
                id,
                e,
                peer.ip(),
                g.addr
            );
            return;
        }
        Err(_) => {
            w.metrics.tls_failed();
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client timed out (110: Connection timed out) while SSL handshaking, client: {}, server: {}",
                id,
                peer.ip(),
                g.addr
            );
            return;
        }
    };
    let mut tinfo = tls_info(g, &conn);
    ocsp_check(g, &conn, &mut tinfo, id, peer).await;
    w.metrics.tls_handshake(tinfo.protocol, tinfo.resumed);
    let server = match tinfo.server_name.as_deref() {
        Some(n) => crate::http::routing::server::select(g, n.as_bytes()),
        None => &g.default_server,
    };
    if !server.conf.h3.on {
        log_to!(server.conf.error_log, Level::Info, "*{} http3 is off, client: {}, server: {}", id, peer.ip(), g.addr);
        conn.close(quinn::VarInt::from_u32(H3_GENERAL_PROTOCOL_ERROR), b"");
        return;
    }
    let local = conn.local_ip().map_or(g.addr, |ip| std::net::SocketAddr::new(ip, g.addr.port()));
    let debug = crate::log::debug::matches(&w.cfg.main.debug_connection, peer.ip(), false);
    let info = ConnInfo { tls: Some(Rc::new(tinfo)), http3: true, debug, ..ConnInfo::new(peer, local, id) };
    let (n, size) = conf.large_client_header_buffers;
    let mut builder = h3::server::builder();
    builder.max_field_section_size((n * size) as u64);
    // A QPACK dynamic table as nginx offers one (4096 bytes, 16 blocked
    // streams; nginx has no directive for them), with inserts limited to
    // a header buffer per field name or value as nginx limits them.
    builder.qpack(4096, 16, size as u64);
    // No GREASE frames and settings (RFC 9114 7.2.8 allows leaving them
    // out): nginx sends none either, and some clients (nginx's own test
    // client among them) do not skip unknown frame types as they should.
    builder.send_grease(false);
    let side = Rc::new(quic::Side::default());
    let build = builder.build::<_, Bytes>(quic::Conn::new(conn.clone(), side.clone()));
    let mut h3c = match tokio::time::timeout(conf.client_header_timeout, build).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            log_to!(conf.error_log, Level::Info, "*{} HTTP/3 setup failed ({}), client: {}", id, e, peer.ip());
            return;
        }
        Err(_) => {
            conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
            return;
        }
    };
    w.metrics.h3_connection();
    let shared = Rc::new(Shared::default());
    shared.last_active.set(Some(Instant::now()));
    let mut requests = 0u64;
    let mut closing = false;
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let accepted = tokio::select! {
            r = h3c.accept() => r,
            _ = ticker.tick() => {
                let idle_for = shared.last_active.get().map(|t| t.elapsed()).unwrap_or_default();
                // Before its first request a connection has
                // client_header_timeout, after one keepalive_timeout, as
                // an HTTP/1 connection (nginx's keepalive_timeout 0 closes
                // after a request, not before the first).
                let wait = if requests == 0 { conf.client_header_timeout } else { conf.keepalive_timeout };
                let idle = shared.active.get() == 0 && idle_for >= wait;
                if !closing && (w.draining.get() || idle) {
                    // GOAWAY naming the stream after the last one accepted
                    // (h3's `shutdown(1)`): requests already sent are
                    // answered, the client sends new ones elsewhere.
                    let _ = h3c.shutdown(1).await;
                    closing = true;
                }
                if closing && shared.active.get() == 0 {
                    break;
                }
                continue;
            }
        };
        let resolver = match accepted {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // A client closing (any application code: aioquic says 0,
                // browsers H3_NO_ERROR) or going silent is no error.
                let quiet = e.is_h3_no_error()
                    || matches!(
                        e,
                        h3::error::ConnectionError::Timeout { .. } | h3::error::ConnectionError::Remote { .. }
                    );
                if !quiet {
                    log_to!(
                        conf.error_log,
                        Level::Info,
                        "*{} HTTP/3 connection error ({}), client: {}, server: {}",
                        id,
                        e,
                        peer.ip(),
                        g.addr
                    );
                }
                break;
            }
        };
        requests += 1;
        w.metrics.h3_stream();
        shared.active.set(shared.active.get() + 1);
        // The client's address now: a connection that migrated (RFC 9000
        // 9) shows its new one, as nginx's $remote_addr does.
        let sinfo = ConnInfo {
            requests,
            tls: info.tls.clone(),
            http3: true,
            started: info.started,
            debug: info.debug,
            ..ConnInfo::new(conn.remote_address(), local, id)
        };
        let task = stream::guarded(w.clone(), group, sinfo, resolver, shared.clone(), conn.clone(), side.clone());
        tokio::task::spawn_local(crate::clock::per_poll(Box::pin(task)));
        if !closing && (requests >= conf.keepalive_requests || info.past_keepalive_time(conf.keepalive_time)) {
            let _ = h3c.shutdown(1).await;
            closing = true;
        }
    }
    // Requests still running (the peer closed, or an error) end with the
    // connection; its CONNECTION_CLOSE goes out before the slot is freed.
    while shared.active.get() > 0 && conn.close_reason().is_none() {
        tokio::select! {
            _ = conn.closed() => {}
            _ = ticker.tick() => {}
        }
    }
    settle(&conn, conf.send_timeout).await;
    conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
    tokio::time::sleep(Duration::from_millis(10)).await;
    drop(guard);
}

/// The connection once its handshake completed; or, when the server took
/// the client's 0-RTT data (`ssl_early_data on`, a resumed session), at
/// once: the requests sent in 0-RTT are then served before the handshake
/// completes (quinn's 0.5-RTT), their streams marked early
/// (`quic::Watch::early`) for `$ssl_early_data` and the 425 of unsafe
/// methods (`stream`). A handshake that fails later closes the
/// connection and its streams with it; the future returned with such a
/// connection resolves when the handshake completed.
async fn establish(
    connecting: quinn::Connecting,
    early: bool,
) -> Result<(quinn::Connection, Option<quinn::ZeroRttAccepted>), quinn::ConnectionError> {
    if early {
        // Always Ok on a server.
        return match connecting.into_0rtt() {
            Ok((conn, accepted)) => Ok((conn, Some(accepted))),
            Err(connecting) => Ok((connecting.await?, None)),
        };
    }
    Ok((connecting.await?, None))
}

/// Waits until what the streams queued has reached the client, or the
/// client closed, or `limit` passed: quinn drops data not yet sent or not
/// yet acknowledged when a connection is closed, and a finished stream
/// only means its last bytes are queued (up to quinn's send window, many
/// megabytes, ahead of the wire). While data is outstanding quinn keeps
/// transmitting (retransmissions and probes included); once a few round
/// trips pass with nothing sent, everything was acknowledged.
async fn settle(conn: &quinn::Connection, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    let mut sent = conn.stats().udp_tx.datagrams;
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = conn.closed() => return,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        let now = tokio::time::Instant::now();
        let n = conn.stats().udp_tx.datagrams;
        if n != sent {
            sent = n;
            quiet_since = now;
        } else if now.duration_since(quiet_since) >= (conn.rtt() * 3).max(Duration::from_millis(150)) {
            return;
        }
        if now >= deadline {
            return;
        }
    }
}

/// `ssl_ocsp` for a chain that verified, as over TCP.
async fn ocsp_check(
    g: &crate::config::model::ListenGroup,
    conn: &quinn::Connection,
    t: &mut TlsInfo,
    id: u64,
    peer: std::net::SocketAddr,
) {
    let server = match t.server_name.as_deref() {
        Some(n) => crate::http::routing::server::select(g, n.as_bytes()),
        None => &g.default_server,
    };
    let Some(o) = server.tls.as_ref().or(g.default_server.tls.as_ref()).and_then(|t| t.ocsp.as_ref()) else { return };
    let chain = conn
        .peer_identity()
        .and_then(|p| p.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>().ok())
        .filter(|c| !c.is_empty());
    if let (None, Some(chain)) = (&t.cert_error, chain) {
        let log = |m: &str| {
            let (ip, addr) = (peer.ip(), g.addr);
            log_to!(server.conf.error_log, Level::Error, "*{id} {m}, client: {ip}, server: {addr}");
        };
        t.cert_error = crate::tls::ocsp::client::check(o, &chain, &log).await.err();
    }
}

/// What `$ssl_*` shows for a QUIC connection: TLS 1.3, the facts of its
/// ServerHello, and the client's certificate checked as over TCP.
fn tls_info(g: &crate::config::model::ListenGroup, conn: &quinn::Connection) -> TlsInfo {
    let hs = conn
        .handshake_data()
        .and_then(|d| d.downcast::<crate::tls::quic::Handshake>().ok())
        .map(|b| *b)
        .unwrap_or_default();
    let server = match hs.server_name.as_deref() {
        Some(n) => crate::http::routing::server::select(g, n.to_ascii_lowercase().as_bytes()),
        None => &g.default_server,
    };
    let tls = server.tls.as_ref().or(g.default_server.tls.as_ref());
    let chain = conn
        .peer_identity()
        .and_then(|p| p.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>().ok())
        .map(|b| *b)
        .filter(|c| !c.is_empty());
    let cert_error = match (tls.and_then(|t| t.client_verifier.as_ref()), &chain) {
        (Some(v), Some(c)) => crate::tls::client_verify::check(v.as_ref(), c).err(),
        _ => None,
    };
    let no_ca = tls.is_some_and(|t| t.no_ca);
    TlsInfo {
        protocol: "TLSv1.3",
        cipher: hs.suite.map_or("", |s| crate::tls::names::openssl_suite_name(rustls::CipherSuite::from(s))),
        server_name: hs.server_name.map(|n| n.to_ascii_lowercase().into_boxed_str()),
        h2: false,
        alpn: Some("h3"),
        curve: hs.group.map(|gr| crate::tls::names::group_name(rustls::NamedGroup::from(gr))).filter(|n| !n.is_empty()),
        resumed: hs.resumed,
        // quinn keeps the session and the ClientHello to itself.
        session_id: None,
        curves: None,
        ciphers: None,
        has_client_cert: chain.is_some(),
        require_client_cert: tls.is_some_and(|t| t.require_client_cert),
        cert_error_tolerated: no_ca && cert_error.as_ref().is_some_and(|e| e.issuer_only()),
        client_cert: chain.and_then(|c| c.into_iter().next()),
        cert_error,
    }
}
