//! The HTTP/2 connection to a gRPC origin, on the `h2` crate's client.
//! It rides in the upstream core as one more kind of origin connection
//! (`UpStream::H2`): the core connects (TCP, unix socket, TLS with ALPN
//! `h2`), picks peers, retries and pools it like any other; this module
//! makes the HTTP/2 handshake, opens one stream per request, and reads the
//! response's DATA frames as the byte stream the core's body reader
//! expects, keeping the trailers (`grpc-status`, `grpc-message`) for the
//! connection layer to send on after the body.
//!
//! As nginx with `keepalive` in the upstream block, a connection carries
//! one request at a time and goes back to the pool after its response.

use std::io;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::ReadBuf;

use crate::http::proxy::upstream_tls::UpStream;

/// A client HTTP/2 connection and the stream in flight on it.
pub struct Conn {
    send: h2::client::SendRequest<Bytes>,
    /// The task driving the connection (frames in and out); ended when
    /// the connection is dropped.
    task: tokio::task::JoinHandle<()>,
    /// The response body of the stream in flight.
    recv: Option<h2::RecvStream>,
    /// A DATA frame's bytes not yet read.
    pending: Bytes,
    /// The response's trailers, once its stream ended.
    trailers: Option<http::HeaderMap>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The HTTP/2 preface and SETTINGS on a new connection; its frames are
/// then driven by a task of the worker's.
pub async fn handshake(io: UpStream) -> Result<Conn, h2::Error> {
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 20)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await?;
    let task = tokio::task::spawn_local(crate::clock::per_poll(async move {
        let _ = conn.await;
    }));
    Ok(Conn { send, task, recv: None, pending: Bytes::new(), trailers: None })
}

impl Conn {
    /// Whether an idle connection can no longer carry a request (the
    /// origin closed it or sent GOAWAY, or a stream is still open).
    pub fn is_stale(&self) -> bool {
        self.task.is_finished() || self.recv.is_some()
    }

    /// Opens a stream with the request's head (ending it when there is no
    /// body).
    pub async fn open(
        &mut self,
        req: http::Request<()>,
        end: bool,
    ) -> Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>), h2::Error> {
        let mut ready = self.send.clone().ready().await?;
        self.trailers = None;
        self.pending = Bytes::new();
        ready.send_request(req, end)
    }

    /// The response body to read next.
    pub fn set_body(&mut self, recv: h2::RecvStream) {
        self.recv = Some(recv);
    }

    /// The trailers of the response just read, once its body ended.
    pub fn take_trailers(&mut self) -> Option<http::HeaderMap> {
        self.trailers.take()
    }

    /// DATA frames as a byte stream; the end of the stream (after its
    /// trailers) reads as EOF; a reset or a broken connection is an error.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            if !self.pending.is_empty() {
                let n = self.pending.len().min(buf.remaining());
                buf.put_slice(&self.pending[..n]);
                self.pending.advance(n);
                return Poll::Ready(Ok(()));
            }
            let Some(recv) = self.recv.as_mut() else { return Poll::Ready(Ok(())) };
            match recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    // The window opens as the bytes are taken: the core
                    // reads only as fast as the client (or read-ahead)
                    // takes them, which holds the origin back.
                    let _ = recv.flow_control().release_capacity(data.len());
                    self.pending = data;
                }
                Poll::Ready(Some(Err(e))) => {
                    self.recv = None;
                    return Poll::Ready(Err(stream_error(e)));
                }
                Poll::Ready(None) => match recv.poll_trailers(cx) {
                    Poll::Ready(Ok(t)) => {
                        self.trailers = t;
                        self.recv = None;
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(Err(e)) => {
                        self.recv = None;
                        return Poll::Ready(Err(stream_error(e)));
                    }
                    Poll::Pending => return Poll::Pending,
                },
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// An h2 error as the I/O error the core's body reader logs.
pub fn stream_error(e: h2::Error) -> io::Error {
    if let Some(io) = e.get_io() {
        return io::Error::new(io.kind(), io.to_string());
    }
    match e.reason() {
        Some(r) if e.is_remote() => io::Error::other(format!("upstream reset stream with {r:?}")),
        Some(r) => io::Error::other(format!("upstream stream error {r:?}")),
        None => io::Error::other(e.to_string()),
    }
}

/// Sends `data` on the stream as the origin's window allows, ending the
/// stream with the last piece when `end`.
pub async fn send_data(tx: &mut h2::SendStream<Bytes>, mut data: Bytes, end: bool) -> Result<(), h2::Error> {
    if data.is_empty() {
        return if end { tx.send_data(Bytes::new(), true) } else { Ok(()) };
    }
    while !data.is_empty() {
        tx.reserve_capacity(data.len());
        let granted = match std::future::poll_fn(|cx| tx.poll_capacity(cx)).await {
            Some(r) => r?,
            None => return Err(h2::Error::from(h2::Reason::STREAM_CLOSED)),
        };
        if granted == 0 {
            continue;
        }
        let part = data.split_to(granted.min(data.len()));
        tx.send_data(part, end && data.is_empty())?;
    }
    Ok(())
}
