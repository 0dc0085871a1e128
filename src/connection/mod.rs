//! Client connections: what protocol an accepted socket speaks (TLS, then
//! ALPN; or the HTTP/2 preface on a cleartext `http2` address), socket I/O
//! helpers, request bodies, and the HTTP/1.x and HTTP/2 protocols.

pub mod body;
pub mod h1;
pub mod h2;
pub mod io;
pub mod sock;

use std::rc::Rc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::handler::ctx::ConnInfo;
use crate::worker::ConnGuard;
use sock::Sock;

/// The client preface every HTTP/2 connection starts with (RFC 9113 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves an accepted connection on listen group `group`.
pub async fn start(stream: std::net::TcpStream, mut info: ConnInfo, group: usize, guard: ConnGuard) {
    let w = guard.0.clone();
    let g = &w.cfg.http.listens[group];
    if !g.ssl && !g.http2 {
        return h1::conn::serve(Sock::Raw(stream), info, group, guard).await;
    }
    let Ok(tcp) = TcpStream::from_std(stream) else { return };
    let timeout = g.default_server.conf.client_header_timeout;
    if g.ssl {
        // A TLS connection starts with a handshake record (0x16); anything
        // else is most likely plain HTTP, which nginx answers with its 497
        // page in plain HTTP rather than a TLS alert.
        let mut first = [0u8; 1];
        match tokio::time::timeout(timeout, tcp.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] != 0x16 => {
                info.plain_on_tls = true;
                return h1::conn::serve(Sock::Reg(tcp), info, group, guard).await;
            }
            Ok(Ok(1)) => {}
            Ok(_) => return,
            Err(_) => {
                crate::log_error!(
                    crate::log::error::Level::Info,
                    "*{} client timed out (110: Connection timed out) while SSL handshaking, client: {}, server: {}",
                    info.id,
                    info.peer.ip(),
                    g.addr
                );
                return;
            }
        }
        let Some((tls, tinfo)) = crate::tls::handshake::accept(tcp, g, timeout, info.id, info.peer).await else {
            return;
        };
        let h2 = tinfo.h2;
        info.tls = Some(Rc::new(tinfo));
        if h2 {
            info.http2 = true;
            h2::serve(tls, info, group, guard).await
        } else {
            h1::conn::serve(Sock::Tls(Box::new(tls)), info, group, guard).await
        }
    } else {
        match sniff_preface(&tcp, timeout).await {
            Some(true) => {
                info.http2 = true;
                h2::serve(tcp, info, group, guard).await
            }
            Some(false) => h1::conn::serve(Sock::Reg(tcp), info, group, guard).await,
            None => {}
        }
    }
}

/// On a cleartext `http2` address, tells HTTP/2 with prior knowledge from
/// HTTP/1.x by peeking at the first bytes (nothing is consumed). None when
/// the client closed or sent nothing in time.
async fn sniff_preface(tcp: &TcpStream, timeout: Duration) -> Option<bool> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = [0u8; 24];
    loop {
        let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return None,
        };
        if buf[..n] != PREFACE[..n] {
            return Some(false);
        }
        if n == PREFACE.len() {
            return Some(true);
        }
        // A prefix of the preface so far: peeking again would return at
        // once, so give the rest a moment to arrive.
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
