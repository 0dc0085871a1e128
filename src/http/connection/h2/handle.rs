//! The stream handles the HTTP/2 stream code works through, over either
//! server-side connection loop: the `h2` crate's (`Crate`) or sluice's own
//! (`Own`, see `own`). The stream pipeline (`stream`, `send`, `connect`,
//! the proxy's request body and gRPC's body pump) is written once against
//! these; each method is the `h2` crate's of the same name.

use std::task::{Context, Poll};

use bytes::Bytes;
use h2::Reason;

use super::own::handles as own;
use super::response::Head;
use crate::http::fields::Fields;

/// The stream or its connection is gone (reset, closed, broken).
#[derive(Debug)]
pub struct Gone;

/// Marks a request the own loop found malformed (RFC 9113 8.1.1): the
/// pipeline answers it 400, through `error_page`, as nginx does.
#[derive(Clone, Copy)]
pub struct BadRequest;

impl From<h2::Error> for Gone {
    fn from(_: h2::Error) -> Gone {
        Gone
    }
}

/// Where a stream's response head goes (h2's `SendResponse`).
pub enum Respond {
    Crate(h2::server::SendResponse<Bytes>),
    Own(own::Respond),
}

/// Where a stream's response body goes (h2's `SendStream`).
pub enum Tx {
    Crate(h2::SendStream<Bytes>),
    Own(own::Tx),
}

/// A stream's request body (h2's `RecvStream`).
pub enum Rx {
    Crate(h2::RecvStream),
    Own(own::Rx),
}

impl Respond {
    pub fn send_response(&mut self, head: &Head<'_, '_>, end: bool) -> Result<Tx, Gone> {
        match self {
            Respond::Crate(r) => Ok(Tx::Crate(r.send_response(super::response::crate_head(head), end)?)),
            Respond::Own(r) => Ok(Tx::Own(r.send_response(head, end)?)),
        }
    }

    pub fn send_reset(&mut self, reason: Reason) {
        match self {
            Respond::Crate(r) => r.send_reset(reason),
            Respond::Own(r) => r.send_reset(reason),
        }
    }

    pub fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reason, Gone>> {
        match self {
            Respond::Crate(r) => r.poll_reset(cx).map_err(Gone::from),
            Respond::Own(r) => r.poll_reset(cx),
        }
    }

    pub fn stream_id(&self) -> u32 {
        match self {
            Respond::Crate(r) => u32::from(r.stream_id()),
            Respond::Own(r) => r.stream_id(),
        }
    }
}

impl Tx {
    pub fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Gone> {
        match self {
            Tx::Crate(t) => Ok(t.send_data(data, end)?),
            Tx::Own(t) => t.send_data(data, end),
        }
    }

    pub fn send_trailers(&mut self, trailers: Fields) -> Result<(), Gone> {
        match self {
            Tx::Crate(t) => Ok(t.send_trailers(super::response::crate_trailers(&trailers))?),
            Tx::Own(t) => t.send_trailers(trailers),
        }
    }

    /// `http2_chunk_size`: the own loop frames DATA at this size, as
    /// nginx does; the `h2` crate frames at the peer's frame size.
    pub fn set_chunk(&mut self, n: usize) {
        if let Tx::Own(t) = self {
            t.set_chunk(n);
        }
    }

    pub fn reserve_capacity(&mut self, n: usize) {
        match self {
            Tx::Crate(t) => t.reserve_capacity(n),
            Tx::Own(t) => t.reserve_capacity(n),
        }
    }

    pub fn capacity(&self) -> usize {
        match self {
            Tx::Crate(t) => t.capacity(),
            Tx::Own(t) => t.capacity(),
        }
    }

    pub fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<usize, Gone>>> {
        match self {
            Tx::Crate(t) => t.poll_capacity(cx).map(|o| o.map(|r| r.map_err(Gone::from))),
            Tx::Own(t) => t.poll_capacity(cx),
        }
    }

    pub fn send_reset(&mut self, reason: Reason) {
        match self {
            Tx::Crate(t) => t.send_reset(reason),
            Tx::Own(t) => t.send_reset(reason),
        }
    }
}

impl Rx {
    pub async fn data(&mut self) -> Option<Result<Bytes, Gone>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Gone>>> {
        match self {
            Rx::Crate(r) => r.poll_data(cx).map(|o| o.map(|r| r.map_err(Gone::from))),
            Rx::Own(r) => r.poll_data(cx),
        }
    }

    pub async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, Gone> {
        match self {
            Rx::Crate(r) => Ok(r.trailers().await?),
            Rx::Own(r) => std::future::poll_fn(|cx| r.poll_trailers(cx)).await,
        }
    }

    /// The body is to be buffered whole: the own loop opens the stream's
    /// window all the way, as nginx does (the `h2` crate keeps its own).
    pub fn open_window(&mut self) {
        if let Rx::Own(r) = self {
            r.open_window();
        }
    }

    /// (received, declared) when the own loop saw DATA break the declared
    /// content-length (the `h2` crate resets such a stream itself).
    pub fn bad_length(&self) -> Option<(u64, u64)> {
        match self {
            Rx::Crate(_) => None,
            Rx::Own(r) => r.bad_length(),
        }
    }

    /// The error-log words for a body whose DATA broke its length, as
    /// nginx's.
    pub fn bad_length_reason(&self) -> Option<String> {
        let (got, declared) = self.bad_length()?;
        Some(if got > declared {
            "client intended to send body data larger than declared".into()
        } else {
            format!("client prematurely closed stream: only {got} out of {declared} bytes of request body received")
        })
    }

    /// Whether no more of the body will come; always for the `h2`
    /// crate's (nothing is gained there by waiting for it).
    pub fn arrived(&self) -> bool {
        match self {
            Rx::Crate(_) => true,
            Rx::Own(r) => r.arrived(),
        }
    }

    /// The whole body when it already came in one DATA frame that ended
    /// the stream and `fits` takes its length, so a caller can send it on
    /// at once instead of pumping it from a task; the own loop's only.
    pub fn take_whole(&mut self, fits: impl FnOnce(usize) -> bool) -> Option<Bytes> {
        match self {
            Rx::Crate(_) => None,
            Rx::Own(r) => r.take_whole(fits),
        }
    }

    pub fn is_end_stream(&self) -> bool {
        match self {
            Rx::Crate(r) => r.is_end_stream(),
            Rx::Own(r) => r.is_end_stream(),
        }
    }

    /// Gives `n` bytes of window back to the peer (h2's
    /// `flow_control().release_capacity`).
    pub fn release_capacity(&mut self, n: usize) -> Result<(), Gone> {
        match self {
            Rx::Crate(r) => Ok(r.flow_control().release_capacity(n)?),
            Rx::Own(r) => r.release_capacity(n),
        }
    }
}
