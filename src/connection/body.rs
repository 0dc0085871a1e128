//! Request bodies. Every handler so far ignores them, so bodies are read and
//! dropped (nginx's discard), keeping the framing exact so the next request
//! on the connection starts where it should.

use std::time::Duration;

use super::h1::chunked::Decoder;
use super::h1::conn::Conn;
use crate::http::request::BodyKind;

/// Reads and drops the body that follows the head already consumed from
/// `c.rbuf`; on error the connection must close.
pub async fn discard(c: &mut Conn, kind: BodyKind, max: u64, timeout: Duration) -> Result<(), String> {
    match kind {
        BodyKind::None => Ok(()),
        BodyKind::Length(mut left) => loop {
            let take = (left.min(c.rbuf.len() as u64)) as usize;
            c.rbuf.drain(..take);
            left -= take as u64;
            if left == 0 {
                return Ok(());
            }
            read_more(c, timeout).await?;
        },
        BodyKind::Chunked => {
            let mut d = Decoder::default();
            loop {
                let used = d.feed(&c.rbuf, |_| {}).map_err(|_| "client sent invalid chunked body".to_string())?;
                c.rbuf.drain(..used);
                if max > 0 && d.total > max {
                    return Err(format!("client intended to send too large chunked body: {} bytes", d.total));
                }
                if d.is_done() {
                    return Ok(());
                }
                read_more(c, timeout).await?;
            }
        }
    }
}

async fn read_more(c: &mut Conn, timeout: Duration) -> Result<(), String> {
    if c.rbuf.capacity() - c.rbuf.len() < 1024 {
        c.rbuf.reserve(16 * 1024);
    }
    match tokio::time::timeout(timeout, c.stream.read_some(&mut c.rbuf)).await {
        Err(_) => Err("client timed out (110: Connection timed out)".into()),
        Ok(Ok(0)) => Err("client prematurely closed connection".into()),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("recv() failed ({e})")),
    }
}

/// A request body read whole for the proxy.
pub struct ReadBody {
    pub data: Vec<u8>,
    /// Bytes of the caller's buffer (after the head) that were body.
    pub used: usize,
    /// Bytes read from the socket past the body: the next request's start.
    pub extra: Vec<u8>,
}

pub struct BodyError {
    pub status: u16,
    pub reason: String,
}

/// Reads the whole body that follows a head: first from `initial` (what
/// the head's read already brought), then from the socket; bounded by
/// `max` (`client_max_body_size`, 413) and `timeout` between reads.
pub async fn read_all(
    stream: &mut super::sock::Sock,
    initial: &[u8],
    kind: BodyKind,
    max: u64,
    timeout: Duration,
) -> Result<ReadBody, BodyError> {
    let too_large =
        |n: u64| BodyError { status: 413, reason: format!("client intended to send too large body: {} bytes", n) };
    async fn more(
        stream: &mut super::sock::Sock,
        buf: &mut Vec<u8>,
        want: usize,
        timeout: Duration,
    ) -> Result<(), BodyError> {
        if buf.capacity() == buf.len() {
            buf.reserve(want.clamp(1, 64 * 1024));
        }
        match tokio::time::timeout(timeout, stream.read_some(buf)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            Ok(_) => Err(BodyError { status: 400, reason: "client prematurely closed connection".into() }),
            Err(_) => Err(BodyError { status: 408, reason: "client timed out (110: Connection timed out)".into() }),
        }
    }
    match kind {
        BodyKind::None => Ok(ReadBody { data: Vec::new(), used: 0, extra: Vec::new() }),
        BodyKind::Length(n) => {
            if max > 0 && n > max {
                return Err(too_large(n));
            }
            let used = (n.min(initial.len() as u64)) as usize;
            let mut data = initial[..used].to_vec();
            while (data.len() as u64) < n {
                // Never read past the body: the spare room is what is left.
                let left = (n - data.len() as u64) as usize;
                let mut chunk = Vec::with_capacity(left.min(64 * 1024));
                more(stream, &mut chunk, 0, timeout).await?;
                data.extend_from_slice(&chunk);
            }
            Ok(ReadBody { data, used, extra: Vec::new() })
        }
        BodyKind::Chunked => {
            let mut d = Decoder::default();
            let mut data = Vec::new();
            let used = d
                .feed(initial, |b| data.extend_from_slice(b))
                .map_err(|_| BodyError { status: 400, reason: "client sent invalid chunked body".into() })?;
            let mut pending: Vec<u8> = Vec::new();
            while !d.is_done() {
                if max > 0 && d.total > max {
                    return Err(too_large(d.total));
                }
                more(stream, &mut pending, 16 * 1024, timeout).await?;
                let n = d
                    .feed(&pending, |b| data.extend_from_slice(b))
                    .map_err(|_| BodyError { status: 400, reason: "client sent invalid chunked body".into() })?;
                pending.drain(..n);
            }
            if max > 0 && d.total > max {
                return Err(too_large(d.total));
            }
            Ok(ReadBody { data, used, extra: pending })
        }
    }
}
