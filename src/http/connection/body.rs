//! Request bodies. Every handler so far ignores them, so bodies are read and
//! dropped (nginx's discard), keeping the framing exact so the next request
//! on the connection starts where it should.

use std::time::Duration;

use super::h1::chunked::Decoder;
use super::h1::conn::Conn;
use super::spool::{Spool, Spooled};
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
    match crate::clock::timeout(timeout, c.stream.read_some(&mut c.rbuf)).await {
        Err(_) => Err("client timed out (110: Connection timed out)".into()),
        Ok(Ok(0)) => Err("client prematurely closed connection".into()),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("recv() failed ({e})")),
    }
}

/// A request body read whole for the proxy (nginx's
/// `proxy_request_buffering on`).
pub struct ReadBody {
    pub data: Spooled,
    /// Bytes of the caller's buffer (after the head) that were body.
    pub used: usize,
    /// Bytes read from the socket past the body: the next request's start.
    pub extra: Vec<u8>,
    /// The body's bytes as received, chunk framing included
    /// (`$request_length`).
    pub raw: u64,
}

#[derive(Debug)]
pub struct BodyError {
    pub status: u16,
    pub reason: String,
}

/// Where a buffered body goes: memory up to `buffer_size`, then a
/// temporary file in `temp_dir`.
pub struct Limits<'a> {
    /// `client_max_body_size` (0: no limit): 413 beyond it.
    pub max: u64,
    /// Between two reads.
    pub timeout: Duration,
    pub buffer_size: usize,
    pub temp_dir: &'a std::path::Path,
    pub naming: super::spool::Naming,
}

/// Reads the whole body that follows a head: first from `initial` (what
/// the head's read already brought), then from the socket.
pub async fn read_all(
    stream: &mut super::sock::Sock,
    initial: &[u8],
    kind: BodyKind,
    lim: &Limits<'_>,
) -> Result<ReadBody, BodyError> {
    let too_large =
        |n: u64| BodyError { status: 413, reason: format!("client intended to send too large body: {} bytes", n) };
    let spool_failed = |reason: String| BodyError { status: 500, reason };
    let mut spool = Spool::named(lim.buffer_size, lim.temp_dir, lim.naming);
    let mut chunk: Vec<u8> = Vec::new();
    async fn more(stream: &mut super::sock::Sock, buf: &mut Vec<u8>, timeout: Duration) -> Result<(), BodyError> {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        match crate::clock::timeout(timeout, stream.read_some(buf)).await {
            Ok(Ok(n)) if n > 0 => Ok(()),
            Ok(_) => Err(BodyError { status: 400, reason: "client prematurely closed connection".into() }),
            Err(_) => Err(BodyError { status: 408, reason: "client timed out (110: Connection timed out)".into() }),
        }
    }
    match kind {
        BodyKind::None => Ok(ReadBody { data: Spooled::Memory(Vec::new()), used: 0, extra: Vec::new(), raw: 0 }),
        BodyKind::Length(n) => {
            if lim.max > 0 && n > lim.max {
                return Err(too_large(n));
            }
            let used = (n.min(initial.len() as u64)) as usize;
            spool.push(&initial[..used]).map_err(spool_failed)?;
            while spool.len() < n {
                // Never read past the body: the room is what is left.
                let room = ((n - spool.len()) as usize).min(64 * 1024);
                if chunk.capacity() != room {
                    chunk = Vec::with_capacity(room);
                }
                more_exact(stream, &mut chunk, lim.timeout).await?;
                spool.push(&chunk).map_err(spool_failed)?;
            }
            Ok(ReadBody { data: spool.finish(), used, extra: Vec::new(), raw: n })
        }
        BodyKind::Chunked => {
            let mut d = Decoder::default();
            let mut failed = None;
            let bad = || BodyError { status: 400, reason: "client sent invalid chunked body".into() };
            let used = d
                .feed(initial, |b| {
                    if failed.is_none() {
                        failed = spool.push(b).err();
                    }
                })
                .map_err(|_| bad())?;
            let mut pending: Vec<u8> = Vec::new();
            let mut raw = used as u64;
            loop {
                if let Some(e) = failed.take() {
                    return Err(spool_failed(e));
                }
                if lim.max > 0 && d.total > lim.max {
                    return Err(too_large(d.total));
                }
                if d.is_done() {
                    break;
                }
                more(stream, &mut pending, lim.timeout).await?;
                let n = d
                    .feed(&pending, |b| {
                        if failed.is_none() {
                            failed = spool.push(b).err();
                        }
                    })
                    .map_err(|_| bad())?;
                pending.drain(..n);
                raw += n as u64;
            }
            Ok(ReadBody { data: spool.finish(), used, extra: pending, raw })
        }
    }
}

/// Reads into `buf`'s capacity, which the caller sized to end at the body's
/// end (a pipelined request after it stays in the socket).
async fn more_exact(stream: &mut super::sock::Sock, buf: &mut Vec<u8>, timeout: Duration) -> Result<(), BodyError> {
    buf.clear();
    match crate::clock::timeout(timeout, stream.read_some(buf)).await {
        Ok(Ok(n)) if n > 0 => Ok(()),
        Ok(_) => Err(BodyError { status: 400, reason: "client prematurely closed connection".into() }),
        Err(_) => Err(BodyError { status: 408, reason: "client timed out (110: Connection timed out)".into() }),
    }
}
