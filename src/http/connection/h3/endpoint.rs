//! One worker's QUIC endpoint on one `listen ... quic` address: quinn on
//! the worker's socket for it (wrapped by `quic::route`, so datagrams of
//! connections other endpoints own are handed over to them), accepting
//! connections within `worker_connections`, with a stateless Retry first
//! under `quic_retry on`.
//!
//! On quit the endpoint stops taking connections, and stops reading its
//! socket if a newer generation reads it (what is still for its own
//! connections reaches it through its inbox); its connections drain with
//! GOAWAY (`super::serve`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use quinn::{EndpointConfig, Runtime, ServerConfig, TransportConfig, VarInt};
use tokio::sync::Notify;

use crate::listener::QuicSock;
use crate::log::error::Level;
use crate::worker::{ConnGuard, WorkerCtx};
use crate::{log_error, log_to};

/// QUIC's version 1 (RFC 9000), the one HTTP/3 runs on.
const QUIC_V1: u32 = 1;

/// Unidirectional streams a client may open: HTTP/3's control and the two
/// QPACK streams, plus room for extensions (nginx allows 3 + a margin).
const MAX_UNI_STREAMS: u32 = 16;

/// A connection's receive window across its streams, in units of the
/// per-stream window (`http3_stream_buffer_size`).
const CONN_WINDOW_STREAMS: u64 = 16;

pub async fn run(w: Rc<WorkerCtx>, q: QuicSock, stop: Rc<Notify>) {
    let QuicSock { group, sock, shared, epoch } = q;
    let g = &w.cfg.http.listens[group];
    let conf = &g.default_server.conf;
    let Some((slot, inbox)) = crate::quic::route::register() else {
        log_error!(Level::Alert, "worker {}: no QUIC endpoint slot left for {}", w.index, g.addr);
        return;
    };
    let Some(sni) = crate::tls::quic::Sni::new(w.cfg.clone(), group) else {
        log_error!(Level::Alert, "worker {}: no TLS configuration for QUIC on {}", w.index, g.addr);
        return;
    };
    let host_key = conf.h3.host_key.as_deref().map(|k| k.as_slice());
    let mut server = ServerConfig::new(Arc::new(sni), crate::quic::keys::token_key(host_key));
    server.transport_config(Arc::new(transport(conf)));
    // A client that moves (NAT rebinding, a new network) keeps its
    // connection: quinn validates the new path.
    server.migration(true);
    // NEW_TOKEN after the handshake, so a client that comes back skips the
    // Retry round trip of `quic_retry on` (tokens are sealed with the
    // process's key: any worker accepts them; each endpoint logs the ones
    // used, against replay).
    let mut tokens = quinn::ValidationTokenConfig::default();
    tokens.sent(1);
    server.validation_token_config(tokens);
    let mut ecfg = EndpointConfig::new(crate::quic::keys::reset_key(host_key));
    ecfg.cid_generator(move || Box::new(crate::quic::cid::Generator { slot }));
    ecfg.supported_versions(vec![QUIC_V1]);
    let runtime = Arc::new(quinn::TokioRuntime);
    let inner = match runtime.wrap_udp_socket(sock) {
        Ok(s) => s,
        Err(e) => {
            log_error!(Level::Alert, "worker {}: QUIC socket on {} failed: {}", w.index, g.addr, e);
            return;
        }
    };
    let socket = Arc::new(crate::quic::route::Routed::new(inner, slot, inbox, conf.h3.gso));
    let endpoint = match quinn::Endpoint::new_with_abstract_socket(ecfg, Some(server), socket.clone(), runtime) {
        Ok(e) => e,
        Err(e) => {
            log_error!(Level::Alert, "worker {}: QUIC endpoint on {} failed: {}", w.index, g.addr, e);
            return;
        }
    };
    loop {
        if w.draining.get() {
            break;
        }
        let incoming = tokio::select! {
            i = endpoint.accept() => match i {
                Some(i) => i,
                None => break,
            },
            _ = stop.notified() => break,
        };
        if w.draining.get() {
            incoming.refuse();
            break;
        }
        if w.active.get() >= w.max_conns {
            log_to!(conf.error_log, Level::Alert, "{} worker_connections are not enough", w.max_conns);
            incoming.refuse();
            continue;
        }
        // `quic_retry on`: a client proves its address with a Retry
        // token before any handshake work (RFC 9000 8.1.2).
        if conf.h3.retry && !incoming.remote_address_validated() {
            // A token that cannot be decrypted, or a Retry token for
            // another address or past its lifetime, never comes here:
            // quinn-proto closes with INVALID_TOKEN, as nginx does (see
            // vendor/quinn-proto/SLUICE-PATCH.md). A client that cannot be
            // sent another Retry (RFC 9000 8.1.2) is refused.
            if let Err(e) = incoming.retry() {
                e.into_incoming().refuse();
            }
            continue;
        }
        let connecting = match incoming.accept() {
            Ok(c) => c,
            Err(e) => {
                log_to!(conf.error_log, Level::Info, "QUIC connection refused ({}), server: {}", e, g.addr);
                continue;
            }
        };
        let guard = ConnGuard::new(w.clone());
        let conn = Box::pin(super::serve(connecting, group, guard));
        tokio::task::spawn_local(crate::clock::per_poll(conn));
    }
    // Quitting: no new connections here; the socket is left to the newer
    // generation when one reads it, else this one goes on reading it for
    // its own connections until they end.
    endpoint.set_server_config(None);
    if shared.taken_over_since(epoch) {
        socket.stop_reading();
    }
    // The endpoint (its driver) lives as long as connections hold it.
    drop(endpoint);
}

/// Transport parameters from the server's settings: streams per
/// connection (`http3_max_concurrent_streams`), each stream's window
/// (`http3_stream_buffer_size`), and an idle timeout of
/// `keepalive_timeout` at the QUIC level; the HTTP/3 layer closes a
/// connection with no request for `keepalive_timeout` itself (as HTTP/2
/// does) and keeps one with requests in progress alive with PINGs.
fn transport(conf: &crate::config::model::LocConf) -> TransportConfig {
    let mut t = TransportConfig::default();
    let h3 = &conf.h3;
    t.max_concurrent_bidi_streams(VarInt::from_u32(h3.max_concurrent_streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(MAX_UNI_STREAMS));
    let window = (h3.stream_buffer_size as u64).clamp(1024, (1 << 62) - 1);
    t.stream_receive_window(VarInt::from_u64(window).unwrap_or(VarInt::MAX));
    t.receive_window(VarInt::from_u64(window.saturating_mul(CONN_WINDOW_STREAMS)).unwrap_or(VarInt::MAX));
    let idle = conf.keepalive_timeout.max(Duration::from_secs(1)) + Duration::from_secs(5);
    t.max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
    t.keep_alive_interval(Some((idle / 3).max(Duration::from_secs(1))));
    t
}
