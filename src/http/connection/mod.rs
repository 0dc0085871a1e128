//! Client connections: what protocol an accepted socket speaks (TLS, then
//! ALPN; or the HTTP/2 preface on a cleartext `http2` address), socket I/O
//! helpers, request bodies, and the HTTP/1.x and HTTP/2 protocols.

pub mod body;
pub mod h1;
pub mod h2;
pub mod h3;
pub mod io;
pub mod mem;
/// The PROXY protocol header, shared with the stream family.
pub use crate::proxy_protocol;
pub mod sock;
pub mod spool;
pub mod tcpinfo;

use std::rc::Rc;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::http::handler::ctx::ConnInfo;
use crate::worker::ConnGuard;
use sock::Sock;

/// The client preface every HTTP/2 connection starts with (RFC 9113 3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Serves an accepted connection on listen group `group`.
pub async fn start(stream: std::net::TcpStream, mut info: ConnInfo, group: usize, guard: ConnGuard) {
    let w = guard.0.clone();
    let g = &w.cfg.http.listens[group];
    if !g.ssl && !g.http2 && !g.proxy_protocol {
        return h1::conn::serve(Sock::Raw(stream), info, group, guard).await;
    }
    let Ok(mut tcp) = TcpStream::from_std(stream) else { return };
    let timeout = g.default_server.conf.client_header_timeout;
    if g.proxy_protocol {
        match proxy_protocol::read(&mut tcp, timeout).await {
            Ok(addrs) => info.proxy_protocol = addrs.map(Rc::new),
            Err(msg) => {
                // nginx logs a broken header at `error`, the rest at `info`.
                let level = if msg.starts_with("client ") || msg.starts_with("recv()") {
                    crate::log::error::Level::Info
                } else {
                    crate::log::error::Level::Error
                };
                crate::log_to!(
                    g.default_server.conf.error_log,
                    level,
                    "*{} {} while reading PROXY protocol, client: {}, server: {}",
                    info.id,
                    msg,
                    info.peer.ip(),
                    g.addr
                );
                return;
            }
        }
        if !g.ssl && !g.http2 {
            return h1::conn::serve(Sock::Reg(tcp), info, group, guard).await;
        }
    }
    if g.ssl {
        // A TLS connection starts with a handshake record (0x16); anything
        // else is most likely plain HTTP, which nginx answers with its 497
        // page in plain HTTP rather than a TLS alert.
        let mut first = [0u8; 1];
        match crate::clock::timeout(timeout, tcp.peek(&mut first)).await {
            Ok(Ok(1)) if first[0] != 0x16 => {
                info.plain_on_tls = true;
                return h1::conn::serve(Sock::Reg(tcp), info, group, guard).await;
            }
            Ok(Ok(1)) => {}
            Ok(_) => return,
            Err(_) => {
                crate::log_to!(
                    g.default_server.conf.error_log,
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
            w.metrics.tls_failed();
            return;
        };
        w.metrics.tls_handshake(tinfo.protocol, tinfo.resumed);
        serve_tls(tls, tinfo, info, group, guard).await
    } else {
        match sniff_preface(&tcp, timeout).await {
            Some(Proto::H2) => {
                info.http2 = true;
                if g.default_server.conf.tcp_nodelay {
                    let _ = tcp.set_nodelay(true);
                }
                h2::own::serve(tcp, info, group, guard).await
            }
            Some(Proto::H1) => h1::conn::serve(Sock::Reg(tcp), info, group, guard).await,
            Some(Proto::Neither) => {
                // Neither HTTP/1 nor the HTTP/2 preface: close, draining
                // what was sent so the close is a FIN, not a reset.
                crate::log_to!(
                    g.default_server.conf.error_log,
                    crate::log::error::Level::Info,
                    "*{} client sent invalid HTTP/2 connection preface, client: {}",
                    info.id,
                    info.peer.ip()
                );
                Sock::Reg(tcp).linger(&mut Vec::new()).await;
            }
            None => {}
        }
    }
}

/// A handshaked TLS connection: HTTP/2 when ALPN agreed on it, else
/// HTTP/1.
async fn serve_tls(
    tls: tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>,
    tinfo: crate::tls::handshake::TlsInfo,
    mut info: ConnInfo,
    group: usize,
    guard: ConnGuard,
) {
    let h2 = tinfo.h2;
    info.tls = Some(Rc::new(tinfo));
    if h2 {
        info.http2 = true;
        // nginx sets TCP_NODELAY on every HTTP/2 connection (the default
        // server's `tcp_nodelay`): frames of many streams interleave, and
        // a small write (a WINDOW_UPDATE, a PING ack) before an answer
        // would otherwise hold the answer back until the client's delayed
        // ACK, 40 ms, as gRPC calls one at a time showed.
        let g = &guard.0.cfg.http.listens[group];
        if g.default_server.conf.tcp_nodelay {
            let _ = tls.get_ref().0.tcp().set_nodelay(true);
        }
        h2::own::serve(tls, info, group, guard).await
    } else {
        h1::conn::serve(Sock::Tls(Box::new(tls)), info, group, guard).await
    }
}

/// A connection stream's `pass` handed over after its TLS handshake (nginx
/// passes the connection with its SSL state): served as this address's
/// TLS connections are past their handshake, whatever the address's own
/// `ssl` says, with the `$ssl_*` values the handshake gave.
pub async fn serve_handed_tls(
    tls: Box<tokio_rustls::server::TlsStream<crate::tls::reneg::Watched>>,
    info: ConnInfo,
    group: usize,
    guard: ConnGuard,
) {
    let tinfo = crate::tls::handshake::info_of(tls.get_ref().1);
    serve_tls(*tls, tinfo, info, group, guard).await
}

/// On a cleartext `http2` address, tells HTTP/2 with prior knowledge from
/// HTTP/1.x by peeking at the first bytes (nothing is consumed): a first
/// line ending in `HTTP/1.0` or `HTTP/1.1` is HTTP/1, anything else is
/// handed to HTTP/2 (which closes on a bad preface, as nginx does). None
/// when the client closed or sent nothing in time.
#[derive(Debug, PartialEq)]
enum Proto {
    H1,
    H2,
    Neither,
}

async fn sniff_preface(tcp: &TcpStream, timeout: Duration) -> Option<Proto> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = vec![0u8; SNIFF_MAX];
    loop {
        let n = match tokio::time::timeout_at(deadline, tcp.peek(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => n,
            _ => return None,
        };
        if let Some(p) = classify(&buf[..n]) {
            return Some(p);
        }
        // Undecided so far: peeking again would return at once, so give
        // the rest of the line a moment to arrive.
        if n == SNIFF_MAX || tokio::time::Instant::now() >= deadline {
            return Some(Proto::Neither);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How much of a request line is looked at before calling it HTTP/2.
const SNIFF_MAX: usize = 8192;

/// None while the bytes so far could still be either.
fn classify(b: &[u8]) -> Option<Proto> {
    if b.len() >= PREFACE.len() && b.starts_with(PREFACE) {
        return Some(Proto::H2);
    }
    if PREFACE.starts_with(b) {
        return None;
    }
    let line_end = memchr::memchr(b'\n', b)?;
    let line = b[..line_end].strip_suffix(b"\r").unwrap_or(&b[..line_end]);
    let h1 = line.ends_with(b" HTTP/1.1") || line.ends_with(b" HTTP/1.0");
    Some(if h1 { Proto::H1 } else { Proto::Neither })
}

#[cfg(test)]
mod tests {
    use super::{Proto, classify};

    #[test]
    fn tells_h2_from_h1() {
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Some(Proto::H2));
        assert_eq!(classify(b"PRI * HT"), None);
        assert_eq!(classify(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Some(Proto::H1));
        assert_eq!(classify(b"GET / HT"), None);
        assert_eq!(classify(b"INVALID CONNECTION PREFACE\r\n\r\n"), Some(Proto::Neither));
    }
}
