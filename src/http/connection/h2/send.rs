//! Writing a stream's response body as DATA frames: bytes and file
//! segments, an origin's body as it streams (with its trailers), a body
//! compressed as it goes; each piece waits for the peer's flow-control
//! window, `limit_rate`'s pacer and `send_timeout`.

use super::handle::Tx;
use bytes::Bytes;

use super::MAX_PIECE;
use super::response::Seg;
use crate::config::model::LocConf;
use crate::http::handler::ctx::ReqCtx;
use crate::http::limit::rate::Pacer;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;

/// Sends the body as the peer's window opens; Err when the stream was
/// reset or stalled past `send_timeout`.
pub(super) async fn send_body(
    tx: &mut Tx,
    segs: Vec<Seg>,
    total: u64,
    fin: bool,
    conf: &LocConf,
    id: u64,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut left = total;
    let mut sent = 0u64;
    for seg in segs {
        match seg {
            Seg::Bytes(mut b) => {
                while !b.is_empty() {
                    let n = capacity(tx, b.len(), conf, id, &mut pace).await?;
                    let piece = b.split_to(n.min(b.len()));
                    left -= piece.len() as u64;
                    sent += piece.len() as u64;
                    tx.send_data(piece, fin && left == 0).map_err(|_| ())?;
                }
            }
            Seg::File(file, mut off, mut len) => {
                let Some(f) = file.file.as_ref() else { return Err(()) };
                while len > 0 {
                    let want = len.min(MAX_PIECE as u64) as usize;
                    let n = capacity(tx, want, conf, id, &mut pace).await?.min(want);
                    let mut v = Vec::with_capacity(n);
                    if let Err(e) = crate::http::connection::io::pread_into(f, off, n as u64, &mut v) {
                        log_to!(conf.error_log, Level::Crit, "*{} pread() failed ({})", id, e);
                        tx.send_reset(h2::Reason::INTERNAL_ERROR);
                        return Err(());
                    }
                    off += n as u64;
                    len -= n as u64;
                    left -= n as u64;
                    sent += n as u64;
                    tx.send_data(Bytes::from(v), fin && left == 0).map_err(|_| ())?;
                }
            }
        }
    }
    Ok(sent)
}

/// Streams an origin's body as DATA frames as it arrives and as the peer's
/// window allows, reading ahead while waiting for window when the response
/// is buffered; an origin failing mid-body resets the stream, so the client
/// never takes a truncated body for a complete one.
pub(super) async fn send_upstream(
    w: &WorkerCtx,
    tx: &mut Tx,
    up: &mut crate::http::proxy::body::UpstreamBody,
    fin: bool,
    ctx: &ReqCtx<'_, '_>,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut sent = 0u64;
    loop {
        let mut piece = Vec::new();
        let more = match up.next(w, &mut piece, MAX_PIECE).await {
            Ok(m) => m,
            Err(e) => {
                crate::http::proxy::log_body_error(ctx, &e);
                tx.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(());
            }
        };
        let mut b = Bytes::from(piece);
        // An origin's trailers (gRPC's status) end the stream instead of
        // the last DATA frame.
        // With add_trailer (`!fin`) the caller sends them with its own.
        let trailers = if more || !fin { None } else { up.trailers.take() };
        let end = !more && trailers.is_none();
        if b.is_empty() && !more {
            match trailers {
                Some(t) => tx.send_trailers(t).map_err(|_| ())?,
                None if fin => tx.send_data(Bytes::new(), true).map_err(|_| ())?,
                None => {}
            }
            return Ok(sent);
        }
        while !b.is_empty() {
            let wait = capacity(tx, b.len(), ctx.conf, ctx.conn.id, &mut pace);
            let n = crate::http::proxy::ahead::while_writing(w, ctx, up, wait).await?;
            let part = b.split_to(n.min(b.len()));
            sent += part.len() as u64;
            tx.send_data(part, fin && b.is_empty() && end).map_err(|_| ())?;
        }
        if !more {
            if let Some(t) = trailers {
                tx.send_trailers(t).map_err(|_| ())?;
            }
            return Ok(sent);
        }
    }
}

/// Sends a body compressed as it goes as DATA frames, as the peer's window
/// allows (reading an origin inside ahead meanwhile); a failure midway
/// resets the stream.
pub(super) async fn send_compressed(
    w: &WorkerCtx,
    tx: &mut Tx,
    z: &mut crate::http::filter::compress::stream::Compressed,
    fin: bool,
    ctx: &ReqCtx<'_, '_>,
    mut pace: Option<Pacer>,
) -> Result<u64, ()> {
    let mut sent = 0u64;
    loop {
        let mut piece = Vec::new();
        let more = match z.next(w, ctx, &mut piece, MAX_PIECE).await {
            Ok(m) => m,
            Err(e) => {
                crate::http::filter::compress::stream::log_error(ctx, &e);
                tx.send_reset(h2::Reason::INTERNAL_ERROR);
                return Err(());
            }
        };
        let mut b = Bytes::from(piece);
        if b.is_empty() && !more {
            if fin {
                tx.send_data(Bytes::new(), true).map_err(|_| ())?;
            }
            return Ok(sent);
        }
        while !b.is_empty() {
            let wait = capacity(tx, b.len(), ctx.conf, ctx.conn.id, &mut pace);
            let n = z.while_writing(w, ctx, wait).await?;
            let part = b.split_to(n.min(b.len()));
            sent += part.len() as u64;
            tx.send_data(part, fin && b.is_empty() && !more).map_err(|_| ())?;
        }
        if !more {
            return Ok(sent);
        }
    }
}

/// Waits until the stream may send some bytes (at most `want`).
pub(super) async fn capacity(
    tx: &mut Tx,
    want: usize,
    conf: &LocConf,
    id: u64,
    pace: &mut Option<Pacer>,
) -> Result<usize, ()> {
    // limit_rate: wait for the rate first, then for the window; the
    // caller sends all it is granted (at most `want`).
    if let Some(p) = pace.as_mut() {
        let want = p.grant(want).await;
        let n = window(tx, want, conf, id).await?.min(want);
        p.wrote(n);
        return Ok(n);
    }
    window(tx, want, conf, id).await
}

pub(super) async fn window(tx: &mut Tx, want: usize, conf: &LocConf, id: u64) -> Result<usize, ()> {
    tx.reserve_capacity(want);
    if tx.capacity() > 0 {
        return Ok(tx.capacity());
    }
    let wait = std::future::poll_fn(|cx| tx.poll_capacity(cx));
    match tokio::time::timeout(conf.send_timeout, wait).await {
        Ok(Some(Ok(n))) if n > 0 => Ok(n),
        Ok(_) => Err(()),
        Err(_) => {
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client timed out (110: Connection timed out) while sending response to client",
                id
            );
            // nginx resets a timed-out stream with PROTOCOL_ERROR.
            tx.send_reset(h2::Reason::PROTOCOL_ERROR);
            Err(())
        }
    }
}
