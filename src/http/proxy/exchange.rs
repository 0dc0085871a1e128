//! One exchange with an origin over an HTTP-shaped connection: the
//! request (head and body) written, then the response head read, with
//! nginx's bounds and the reasons a failure is logged with.

use super::Sent;
use super::protocol::HeadReader;
use super::request_body::{self, Client, SendError};
use super::response_head::{self, HeadError};
use super::upstream_tls::UpStream;
use crate::config::proxy::UpstreamConf;

/// Why an exchange with an origin failed.
pub(crate) enum ExchangeError {
    Client(crate::http::connection::body::BodyError),
    Gone(&'static str),
    Timeout(&'static str),
    Closed,
    Io((&'static str, &'static str), std::io::Error),
    /// The connection closed before any of the request went (an HTTP/2
    /// origin connection that took no new stream).
    NotSent,
    /// A bad response head; empty when the reason was logged already.
    Invalid(std::borrow::Cow<'static, str>),
}

/// Sends the request and reads the response head into `buf`.
pub(super) async fn exchange(
    stream: &mut UpStream,
    req: &Sent<'_>,
    client: &mut Client<'_>,
    buf: &mut Vec<u8>,
    conf: &UpstreamConf,
    reader: &mut HeadReader,
    sent: &mut u64,
) -> Result<response_head::ResponseHead, ExchangeError> {
    let watch = !conf.ignore_client_abort;
    match request_body::send(stream, req.head, client, req.framing, conf.send_timeout, sent).await {
        Err(SendError::Client(e)) => return Err(ExchangeError::Client(e)),
        Err(SendError::Origin(None)) => return Err(ExchangeError::Timeout("sending request to upstream")),
        Err(SendError::Origin(Some(e)))
            if e.kind() == std::io::ErrorKind::BrokenPipe || e.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            return Err(ExchangeError::Closed);
        }
        Err(SendError::Origin(Some(e))) => {
            return Err(ExchangeError::Io(("writev()", "sending request to upstream"), e));
        }
        Ok(()) => {}
    }
    // proxy_buffer_size bounds the response head, as in nginx.
    let limit = conf.buffer_size.max(1024);
    loop {
        // Nothing to parse before the first read.
        let parsed = if buf.is_empty() { Ok(None) } else { reader.parse(buf, conf) };
        match parsed {
            Ok(Some(h)) if h.status >= 100 && h.status < 200 && h.status != 101 && reader.http_shaped() => {
                // Interim responses (100 Continue) are skipped.
                buf.drain(..h.head_len);
                continue;
            }
            // A head that came whole in one read is held to the same bound
            // as one that came in pieces (the buffer, reused from a location
            // with a larger proxy_buffer_size, may hold more than `limit`).
            Ok(Some(h)) if h.head_len > limit && reader.http_shaped() => {
                return Err(ExchangeError::Invalid("upstream sent too big header".into()));
            }
            Ok(Some(h)) => return Ok(h),
            Ok(None) => {}
            Err(HeadError::Invalid(why)) => return Err(ExchangeError::Invalid(why.into())),
            Err(HeadError::Protocol(why)) => return Err(ExchangeError::Invalid(why.into())),
            Err(HeadError::Incomplete) => return Err(ExchangeError::Closed),
        }
        if buf.len() >= limit {
            return Err(ExchangeError::Invalid("upstream sent too big header".into()));
        }
        buf.reserve(limit - buf.len());
        let read = tokio::select! {
            biased;
            r = crate::clock::timeout(conf.read_timeout, tokio::io::AsyncReadExt::read_buf(stream, buf)) => r,
            _ = client.gone(), if watch => {
                // nginx names the phase "sending request" until the
                // origin's first byte, and so does this line.
                return Err(ExchangeError::Gone("while sending request to upstream"));
            }
        };
        match read {
            Err(_) => return Err(ExchangeError::Timeout("reading response header from upstream")),
            Ok(Ok(0)) => return Err(ExchangeError::Closed),
            Ok(Ok(_)) => {}
            // A reset is logged with its errno, as nginx does.
            Ok(Err(e)) => return Err(ExchangeError::Io(("recv()", "reading response header from upstream"), e)),
        }
    }
}
