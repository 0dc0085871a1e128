//! `proxy_pass https://`: the connection to the origin, plain or TLS
//! (rustls client), and the client configurations per `proxy_ssl_*`
//! settings. As in nginx, the origin's certificate is not checked unless
//! `proxy_ssl_verify on` (with `proxy_ssl_trusted_certificate`), and SNI is
//! sent only with `proxy_ssl_server_name on`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection to an origin.
pub enum UpStream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// `unix:/path` (plain only).
    Unix(tokio::net::UnixStream),
}

impl UpStream {
    /// For a pooled connection: has the origin closed it (or sent
    /// something unasked)? Reading would not block then.
    pub fn is_stale(&self) -> bool {
        let mut probe = [0u8; 1];
        let r = match self {
            UpStream::Plain(s) => s.try_read(&mut probe),
            UpStream::Tls(t) => t.get_ref().0.try_read(&mut probe),
            UpStream::Unix(s) => s.try_read(&mut probe),
        };
        !matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

impl AsyncRead for UpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
            UpStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, data),
            UpStream::Unix(s) => Pin::new(s).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            UpStream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
            UpStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

pub use crate::tls::client::{Clients, Key, client_config, handshake_error, server_name};
