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
    /// An HTTP/2 connection to a gRPC origin (over one of the above),
    /// read as its current stream's response body.
    H2(Box<crate::http::grpc::client::Conn>),
}

impl UpStream {
    /// For a pooled connection: has the origin closed it (or sent
    /// something unasked)? Reading would not block then.
    pub fn is_stale(&self) -> bool {
        if let UpStream::H2(c) = self {
            return c.is_stale();
        }
        let mut probe = [0u8; 1];
        let r = match self {
            UpStream::Plain(s) => s.try_read(&mut probe),
            UpStream::Tls(t) => t.get_ref().0.try_read(&mut probe),
            UpStream::Unix(s) => s.try_read(&mut probe),
            UpStream::H2(_) => return false,
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
            UpStream::H2(c) => c.poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, data),
            UpStream::Unix(s) => Pin::new(s).poll_write(cx, data),
            // Requests go through the stream's own API (`grpc::exchange`).
            UpStream::H2(_) => Poll::Ready(Err(io::Error::from(io::ErrorKind::Unsupported))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
            UpStream::Unix(s) => Pin::new(s).poll_flush(cx),
            UpStream::H2(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpStream::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
            UpStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            UpStream::H2(_) => Poll::Ready(Ok(())),
        }
    }
}

pub use crate::tls::client::{Clients, Key, client_config, handshake_error, server_name};
