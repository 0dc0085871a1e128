//! The stream handles the HTTP/2 stream code works through (`stream`,
//! `send`, `connect`, the proxy's request body and gRPC's body pump): the
//! connection loop's (`own::handles`), each method named as the `h2`
//! crate's, whose server loop sluice used first.

pub use super::own::handles::{Respond, Rx, Tx};

/// The stream or its connection is gone (reset, closed, broken).
#[derive(Debug)]
pub struct Gone;

/// Marks a request the own loop found malformed (RFC 9113 8.1.1): the
/// pipeline answers it 400, through `error_page`, as nginx does.
#[derive(Clone, Copy)]
pub struct BadRequest;

impl Rx {
    pub async fn data(&mut self) -> Option<Result<bytes::Bytes, Gone>> {
        std::future::poll_fn(|cx| self.poll_data(cx)).await
    }

    pub async fn trailers(&mut self) -> Result<Option<http::HeaderMap>, Gone> {
        std::future::poll_fn(|cx| self.poll_trailers(cx)).await
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
}
