//! Writing a response body after its head (HTTP/1): bytes and files
//! (sendfile, or read through the write buffer), an origin's body as it
//! streams (chunked when its length is unknown), a compressed body, and the
//! buffered flush that gathers pipelined responses.

use std::time::Duration;

use crate::http::connection::sock::Sock;
use crate::http::handler::ctx::ReqCtx;
use crate::http::response::{Body, Response};
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;

/// Pipelined responses are gathered up to this size before a write.
const PIPELINE_FLUSH: usize = 64 * 1024;
/// Bodies up to this size are read into the write buffer with the header
/// (one write) instead of header write + sendfile.
const INLINE_FILE: u64 = 4 * 1024;

/// Sends the body after the head already in `wbuf`. With `defer`, a body
/// that fits stays in the buffer to go out with the next pipelined response.
/// The write side of a connection, split from the read buffer that the
/// request borrows.
pub(super) struct Out<'a> {
    pub(super) stream: &'a mut Sock,
    pub(super) wbuf: &'a mut Vec<u8>,
    pub(super) id: u64,
    /// The connection closes after this response.
    pub(super) closing: bool,
    /// `limit_rate`: every write of the response waits its turn.
    pub(super) pace: Option<crate::http::limit::rate::Pacer>,
}

pub(super) async fn write_body(
    c: &mut Out<'_>,
    resp: &Response<'_>,
    head_only: bool,
    conf: &crate::config::model::LocConf,
    defer: bool,
) -> (bool, u64) {
    let t = conf.send_timeout;
    if head_only {
        return (flush(c, t, defer).await, 0);
    }
    match &resp.body {
        Body::Empty => (flush(c, t, defer).await, 0),
        Body::Static(b) => {
            c.wbuf.extend_from_slice(b);
            (flush(c, t, defer).await, b.len() as u64)
        }
        Body::Owned(b) => {
            c.wbuf.extend_from_slice(b);
            (flush(c, t, defer).await, b.len() as u64)
        }
        Body::Shared(b) => {
            c.wbuf.extend_from_slice(b);
            (flush(c, t, defer).await, b.len() as u64)
        }
        Body::File { file, offset, len } => {
            let Some(f) = &file.file else { return (false, 0) };
            if let Some(bytes) = file.cached_bytes(*offset, *len) {
                c.wbuf.extend_from_slice(bytes);
                return (flush(c, t, defer).await, *len);
            }
            // TLS encrypts in user space: no sendfile.
            if *len <= INLINE_FILE || !conf.sendfile || c.stream.is_tls() || c.pace.is_some() {
                let ok = send_file_buffered(c, f, *offset, *len, conf, defer).await;
                return (ok, if ok { *len } else { 0 });
            }
            // The head goes out with MSG_MORE, so the kernel holds it for the
            // file data (what tcp_nopush's TCP_CORK achieves, without the two
            // setsockopt calls per response).
            let mut ok = c.stream.write_all_flags(c.wbuf, t, true).await.is_ok();
            c.wbuf.clear();
            if ok {
                ok = c.stream.send_file(f, *offset, *len, t, conf.sendfile_max_chunk).await.is_ok();
            }
            (ok, if ok { *len } else { 0 })
        }
        // Streamed bodies are written by write_upstream; a bare Proxy marker
        // never reaches here (the proxy replaced it).
        Body::Proxy | Body::Upstream(_) | Body::Compressed(_) => (flush(c, t, defer).await, 0),
        Body::Multipart { file, parts, trailer } => {
            let Some(f) = &file.file else { return (false, 0) };
            let mut n = 0;
            for (h, r) in parts {
                c.wbuf.extend_from_slice(h);
                let len = r.end - r.start + 1;
                if !send_file_buffered(c, f, r.start, len, conf, true).await {
                    return (false, 0);
                }
                n += h.len() as u64 + len;
            }
            c.wbuf.extend_from_slice(trailer);
            n += trailer.len() as u64;
            (flush(c, t, false).await, n)
        }
    }
}

/// Streams an origin's body to the client as it arrives (chunked when its
/// length is unknown or trailers follow), reading ahead of a slow client while writing when
/// the response is buffered. An origin that fails mid-body leaves the
/// client response truncated (the connection closes), never a short body
/// that looks complete.
pub(super) async fn write_upstream(
    w: &WorkerCtx,
    c: &mut Out<'_>,
    up: &mut crate::http::proxy::body::UpstreamBody,
    head_only: bool,
    chunked: bool,
    last_chunk: bool,
    ctx: &ReqCtx<'_, '_>,
) -> (bool, u64) {
    let t = ctx.conf.send_timeout;
    if head_only {
        return (flush(c, t, false).await, 0);
    }
    let mut sent = 0u64;
    // Chunked output needs each piece's size first; otherwise the body goes
    // straight into the write buffer, after the head.
    let mut piece = Vec::new();
    loop {
        piece.clear();
        let before = c.wbuf.len();
        let next = if chunked { up.next(w, &mut piece, 64 * 1024).await } else { up.next(w, c.wbuf, 64 * 1024).await };
        match next {
            Ok(more) => {
                if !piece.is_empty() {
                    push_chunk_size(c.wbuf, piece.len());
                    c.wbuf.extend_from_slice(&piece);
                    c.wbuf.extend_from_slice(b"\r\n");
                    sent += piece.len() as u64;
                }
                if !chunked {
                    sent += (c.wbuf.len() - before) as u64;
                }
                if !more {
                    // With add_trailer the caller ends the chunked body
                    // (and moves the origin's trailers into its section).
                    if chunked && last_chunk {
                        c.wbuf.extend_from_slice(b"0\r\n");
                        // An origin's trailers (gRPC's status) go in the
                        // chunked body's trailer section.
                        if let Some(tr) = up.trailers.take() {
                            for (name, value) in tr.iter().filter(|(n, _)| !n.starts_with(b":")) {
                                c.wbuf.extend_from_slice(name);
                                c.wbuf.extend_from_slice(b": ");
                                c.wbuf.extend_from_slice(value);
                                c.wbuf.extend_from_slice(b"\r\n");
                            }
                        }
                        c.wbuf.extend_from_slice(b"\r\n");
                    }
                    return (flush(c, t, false).await, sent);
                }
                if !crate::http::proxy::ahead::while_writing(w, ctx, up, flush(c, t, false)).await {
                    return (false, sent);
                }
                crate::worker::unwind::test_hook(&ctx.req, crate::worker::unwind::Stage::Body);
            }
            Err(e) => {
                crate::http::proxy::log_body_error(ctx, &e);
                // What arrived goes out; the missing end tells the client.
                if !piece.is_empty() {
                    push_chunk_size(c.wbuf, piece.len());
                    c.wbuf.extend_from_slice(&piece);
                }
                let _ = flush(c, t, false).await;
                return (false, sent);
            }
        }
    }
}

/// Sends a body compressed as it goes (chunked, or up to the close for
/// HTTP/1.0), as `write_upstream` sends an origin's; a body that fails
/// midway leaves the response truncated.
pub(super) async fn write_compressed(
    w: &WorkerCtx,
    c: &mut Out<'_>,
    z: &mut crate::http::filter::compress::stream::Compressed,
    head_only: bool,
    chunked: bool,
    last_chunk: bool,
    ctx: &ReqCtx<'_, '_>,
) -> (bool, u64) {
    let t = ctx.conf.send_timeout;
    if head_only {
        return (flush(c, t, false).await, 0);
    }
    // The worker's spare buffer: a response's pieces need no room of
    // their own.
    let mut piece = w.take_buf(1024);
    let r = write_pieces(w, c, z, chunked, last_chunk, ctx, &mut piece).await;
    w.give_buf(piece);
    r
}

/// [`write_compressed`]'s loop, each piece made in `piece`.
async fn write_pieces(
    w: &WorkerCtx,
    c: &mut Out<'_>,
    z: &mut crate::http::filter::compress::stream::Compressed,
    chunked: bool,
    last_chunk: bool,
    ctx: &ReqCtx<'_, '_>,
    piece: &mut Vec<u8>,
) -> (bool, u64) {
    let t = ctx.conf.send_timeout;
    let mut sent = 0u64;
    loop {
        piece.clear();
        match z.next(w, ctx, piece, 64 * 1024).await {
            Ok(more) => {
                if !piece.is_empty() {
                    if chunked {
                        push_chunk_size(c.wbuf, piece.len());
                    }
                    c.wbuf.extend_from_slice(piece);
                    if chunked {
                        c.wbuf.extend_from_slice(b"\r\n");
                    }
                    sent += piece.len() as u64;
                }
                if !more {
                    // With trailers the caller ends the chunked body.
                    if chunked && last_chunk {
                        c.wbuf.extend_from_slice(b"0\r\n\r\n");
                    }
                    return (flush(c, t, false).await, sent);
                }
                if !z.while_writing(w, ctx, flush(c, t, false)).await {
                    return (false, sent);
                }
            }
            Err(e) => {
                crate::http::filter::compress::stream::log_error(ctx, &e);
                // A sliced response refused, or a request a filter ended,
                // before any of its body went out is not sent at all, head
                // included (nginx's).
                use crate::http::filter::compress::stream::StreamError;
                if sent == 0 && matches!(e, StreamError::Slice | StreamError::Aborted) {
                    c.wbuf.clear();
                    return (false, 0);
                }
                let _ = flush(c, t, false).await;
                return (false, sent);
            }
        }
    }
}

/// A chunk's size line (`{:x}\r\n`) without formatting machinery.
pub(super) fn push_chunk_size(out: &mut Vec<u8>, n: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = HEX[n & 15];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

pub(super) async fn flush(c: &mut Out<'_>, t: Duration, defer: bool) -> bool {
    if let Some(p) = c.pace.as_mut() {
        // limit_rate: the buffer goes out in the pieces the rate allows.
        // A client that closes while its turn is awaited ends the response
        // at once, as nginx's read-side check does (its connection would
        // otherwise stay active for the whole paced time).
        let mut off = 0;
        while off < c.wbuf.len() {
            let n = tokio::select! {
                biased;
                n = p.grant(c.wbuf.len() - off) => n,
                () = c.stream.peer_closed() => {
                    c.wbuf.clear();
                    return false;
                }
            };
            let last = off + n == c.wbuf.len();
            if c.stream.write_all_flags(&c.wbuf[off..off + n], t, c.closing && last).await.is_err() {
                c.wbuf.clear();
                return false;
            }
            p.wrote(n);
            off += n;
        }
        c.wbuf.clear();
        return true;
    }
    if defer && c.wbuf.len() < PIPELINE_FLUSH {
        return true;
    }
    let ok = c.stream.write_all_flags(c.wbuf, t, c.closing).await.is_ok();
    c.wbuf.clear();
    ok
}

/// Reads the file through the write buffer in `chunk`-sized pieces.
async fn send_file_buffered(
    c: &mut Out<'_>,
    f: &std::fs::File,
    mut offset: u64,
    mut len: u64,
    conf: &crate::config::model::LocConf,
    defer: bool,
) -> bool {
    let t = conf.send_timeout;
    let chunk = conf.output_buffers.1.max(4096) as u64;
    if len == 0 {
        // An empty file: the head alone.
        return flush(c, t, defer).await;
    }
    while len > 0 {
        let n = len.min(chunk);
        if let Err(e) = crate::http::connection::io::pread_into(f, offset, n, c.wbuf) {
            log_to!(conf.error_log, Level::Crit, "*{} pread() failed ({})", c.id, e);
            return false;
        }
        offset += n;
        len -= n;
        let last = len == 0;
        if !flush(c, t, defer && last).await {
            return false;
        }
    }
    true
}
