//! The request body on its way to the origin: either buffered whole first
//! (nginx's `proxy_request_buffering on`, in memory or a temporary file, so
//! a failed peer can be retried with it), or read from the client while it
//! is written to the origin (`proxy_request_buffering off`), with
//! backpressure both ways and a bounded buffer: the origin's pace sets the
//! client's.

use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::upstream_tls::UpStream;
use crate::http::connection::body::BodyError;
use crate::http::connection::h1::chunked::Decoder;
use crate::http::connection::sock::Sock;
use crate::http::connection::spool::{self, Spooled};

/// How much of a body moves per read and write.
const PIECE: usize = 64 * 1024;

pub enum ReqBody {
    Buffered(Spooled),
    Streamed(ClientBody),
}

/// The client's side of a proxied request: its body, and what is watched
/// for the client leaving while the origin works (nginx's
/// `proxy_ignore_client_abort off`): its HTTP/1 connection, which a
/// streamed body is also read from, or its HTTP/2 stream.
pub struct Client<'s> {
    pub sock: Option<&'s mut Sock>,
    /// An HTTP/2 stream: a RST_STREAM from the client, or the end of its
    /// connection, means it left (nginx sets `error` on the stream's fake
    /// connection and the upstream's broken-connection check sees it).
    pub stream: Option<&'s mut crate::http::connection::h2::handle::Respond>,
    /// An HTTP/3 request's QUIC connection: its end means the client left.
    pub quic: Option<quinn::Connection>,
    pub body: ReqBody,
    /// How the client left, once `gone` saw it.
    pub left: Option<ClientLeft>,
    /// An HTTP/2 client's body still arriving, for a gRPC origin: passed
    /// on frame by frame (bidirectional streaming), not read whole first.
    pub h2_body: Option<crate::http::connection::h2::handle::Rx>,
    /// The streamed HTTP/2 body went (partly) to an origin: no retry.
    pub h2_body_sent: bool,
}

/// How a client left, for nginx's wording of the error-log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientLeft {
    /// An HTTP/1 connection closed.
    Closed,
    /// An HTTP/2 stream reset by the client: its reason and stream id.
    Reset(h2::Reason, u32),
    /// An HTTP/2 stream whose connection ended (logged by the connection).
    Ended,
}

impl<'s> Client<'s> {
    /// An HTTP/1 client: its connection and its body.
    pub fn h1(sock: &'s mut Sock, body: ReqBody) -> Self {
        Client { sock: Some(sock), stream: None, quic: None, body, left: None, h2_body: None, h2_body_sent: false }
    }

    /// An HTTP/2 stream and its body (read whole, or streamed from its
    /// DATA frames: `ClientBody::h2`).
    pub fn h2(stream: &'s mut crate::http::connection::h2::handle::Respond, body: ReqBody) -> Self {
        Client { sock: None, stream: Some(stream), quic: None, body, left: None, h2_body: None, h2_body_sent: false }
    }

    /// An HTTP/3 request on `conn`, its body already read whole.
    pub fn h3(conn: quinn::Connection, body: Spooled) -> Self {
        Client {
            sock: None,
            stream: None,
            quic: Some(conn),
            body: ReqBody::Buffered(body),
            left: None,
            h2_body: None,
            h2_body_sent: false,
        }
    }

    /// No body and nobody to watch: requests sluice makes on its own
    /// (cache refreshes, auth_request, mirrors), which no client can abort.
    pub fn detached() -> Self {
        Client {
            sock: None,
            stream: None,
            quic: None,
            body: ReqBody::Buffered(Spooled::Memory(Vec::new())),
            left: None,
            h2_body: None,
            h2_body_sent: false,
        }
    }

    /// Some of a streamed body went to an origin: no other peer can have it.
    pub fn body_spent(&self) -> bool {
        matches!(&self.body, ReqBody::Streamed(c) if c.started) || self.h2_body_sent
    }

    /// Resolves when the client has closed its connection or reset its
    /// stream, noting how in `left`.
    pub async fn gone(&mut self) {
        if let Some(s) = self.sock.as_deref_mut() {
            s.peer_closed().await;
            self.left = Some(ClientLeft::Closed);
            return;
        }
        if let Some(r) = self.stream.as_deref_mut() {
            let id = r.stream_id();
            self.left = Some(match std::future::poll_fn(|cx| r.poll_reset(cx)).await {
                Ok(reason) => ClientLeft::Reset(reason, id),
                Err(_) => ClientLeft::Ended,
            });
            return;
        }
        if let Some(c) = &self.quic {
            c.closed().await;
            self.left = Some(ClientLeft::Ended);
            return;
        }
        std::future::pending().await
    }
}

/// How the body is framed towards the origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendFraming {
    None,
    Length(u64),
    /// A streamed body of unknown length, re-chunked (HTTP/1.1 origins only).
    Chunked,
    /// FastCGI: the body in STDIN records, ended by an empty one (sent
    /// even when there is no body).
    Records,
}

enum Left {
    Length(u64),
    Chunked(Decoder),
    /// An HTTP/2 body without content-length: DATA frames until the
    /// stream's end.
    Frames(u64),
}

/// A body still arriving from the client: read from its HTTP/1
/// connection, or from its HTTP/2 stream's DATA frames.
pub struct ClientBody {
    /// The HTTP/2 stream the body comes on; None: the HTTP/1 connection.
    h2: Option<crate::http::connection::h2::handle::Rx>,
    /// The HTTP/2 stream ended (END_STREAM seen).
    ended: bool,
    /// Read from the client, not yet passed on.
    pending: Vec<u8>,
    left: Left,
    max: u64,
    timeout: Duration,
    /// Some of the body went to an origin: no other peer can have it.
    pub started: bool,
    pub done: bool,
    /// Bytes that followed the body (a pipelined request).
    pub extra: Vec<u8>,
    /// `$request_body` of a body passed on unbuffered: what was passed, while
    /// it fits `client_body_buffer_size` (nginx's variable gives the body's
    /// buffers, which hold it all when it is that small).
    copy: Option<Vec<u8>>,
    copy_limit: usize,
    /// `next` stops where it would read from the client ([`ClientBody::at_hand`]).
    at_hand_only: bool,
}

/// Why sending the request failed.
pub enum SendError {
    /// The origin side: (errno text or timeout, whether it timed out).
    Origin(Option<std::io::Error>),
    /// The client side of a streamed body (the request ends with the
    /// status given; the client connection closes).
    Client(BodyError),
}

impl ClientBody {
    /// The next piece from what is at hand only (the preread), never
    /// waiting for the client: empty if that is nothing, or only part of
    /// a chunk's framing.
    async fn at_hand(&mut self, out: &mut Vec<u8>, framing: SendFraming) -> Result<(), BodyError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        self.at_hand_only = true;
        let r = self.next(None, out, framing).await;
        self.at_hand_only = false;
        r
    }

    /// `initial` is what arrived with the head; `length` is the
    /// Content-Length, or None for a chunked body.
    pub fn new(initial: &[u8], length: Option<u64>, max: u64, timeout: Duration) -> Self {
        let left = match length {
            Some(n) => Left::Length(n),
            None => Left::Chunked(Decoder::default()),
        };
        let done = matches!(left, Left::Length(0));
        ClientBody {
            h2: None,
            ended: false,
            pending: initial.to_vec(),
            left,
            max,
            timeout,
            started: false,
            done,
            extra: Vec::new(),
            copy: None,
            copy_limit: 0,
            at_hand_only: false,
        }
    }

    /// An HTTP/2 request's body, as its DATA frames arrive; `length` is
    /// its content-length, if it gave one.
    pub fn h2(rx: crate::http::connection::h2::handle::Rx, length: Option<u64>, max: u64, timeout: Duration) -> Self {
        let mut c = ClientBody::new(b"", length, max, timeout);
        if length.is_none() {
            c.left = Left::Frames(0);
        }
        // Done at the stream's end, not when the length is reached: data
        // past it is the client's error (400), as in nginx.
        c.done = false;
        c.h2 = Some(rx);
        c
    }

    /// Keeps a copy of the body passed on for `$request_body`, up to
    /// `limit` bytes (a larger body leaves the variable empty).
    pub fn keep_copy(&mut self, limit: usize) {
        self.copy = Some(Vec::new());
        self.copy_limit = limit;
    }

    /// The whole body passed on, if it was kept.
    pub fn copy(&self) -> Option<&[u8]> {
        self.copy.as_deref().filter(|c| self.done && !c.is_empty())
    }

    /// Content-Length when the client sent one, else re-chunked.
    pub fn framing(&self) -> SendFraming {
        match &self.left {
            Left::Length(n) => SendFraming::Length(*n),
            Left::Chunked(_) | Left::Frames(_) => SendFraming::Chunked,
        }
    }

    /// The next piece of the body, framed for the origin, into `out`
    /// (empty once the body is complete).
    async fn next(
        &mut self,
        mut sock: Option<&mut Sock>,
        out: &mut Vec<u8>,
        framing: SendFraming,
    ) -> Result<(), BodyError> {
        loop {
            if self.done {
                return Ok(());
            }
            if self.h2.is_some()
                && let Left::Length(n) = self.left
            {
                // HTTP/2 frames the body itself: nothing may follow it.
                if self.pending.len() as u64 > n {
                    return Err(BodyError {
                        status: 400,
                        reason: "client intended to send body data larger than declared".into(),
                    });
                }
                if n == 0 && self.ended {
                    self.done = true;
                    return Ok(());
                }
            }
            if let Left::Frames(total) = &mut self.left
                && (!self.pending.is_empty() || self.ended)
            {
                *total += self.pending.len() as u64;
                if self.max > 0 && *total > self.max {
                    return Err(BodyError {
                        status: 413,
                        reason: format!("client intended to send too large body: {} bytes", *total),
                    });
                }
                let data = std::mem::take(&mut self.pending);
                keep(&mut self.copy, self.copy_limit, &data);
                frame(out, &data, framing);
                if self.ended {
                    self.done = true;
                    if framing == SendFraming::Chunked {
                        out.extend_from_slice(b"0\r\n\r\n");
                    }
                }
                return Ok(());
            }
            if self.ended && self.pending.is_empty() {
                return Err(BodyError { status: 400, reason: "client prematurely closed stream".into() });
            }
            if !self.pending.is_empty() {
                match &mut self.left {
                    Left::Frames(_) => {}
                    Left::Length(n) => {
                        let take = (*n).min(self.pending.len() as u64) as usize;
                        out.extend_from_slice(&self.pending[..take]);
                        *n -= take as u64;
                        keep(&mut self.copy, self.copy_limit, &self.pending[..take]);
                        self.pending.drain(..take);
                        if *n == 0 && self.h2.is_none() {
                            self.done = true;
                            self.extra = std::mem::take(&mut self.pending);
                        } else if *n == 0 && self.ended && self.pending.is_empty() {
                            // An HTTP/2 stream whose end came with its last
                            // DATA: done now, so that FastCGI's end of stdin
                            // goes in the same write as the data, as nginx
                            // sends it.
                            self.done = true;
                        }
                        return Ok(());
                    }
                    Left::Chunked(d) => {
                        let mut data = Vec::new();
                        let used = d.feed(&self.pending, |b| data.extend_from_slice(b)).map_err(|_| BodyError {
                            status: 400,
                            reason: "client sent invalid chunked body".into(),
                        })?;
                        self.pending.drain(..used);
                        if self.max > 0 && d.total > self.max {
                            return Err(BodyError {
                                status: 413,
                                reason: format!("client intended to send too large chunked body: {} bytes", d.total),
                            });
                        }
                        keep(&mut self.copy, self.copy_limit, &data);
                        frame(out, &data, framing);
                        if d.is_done() {
                            self.done = true;
                            if framing == SendFraming::Chunked {
                                out.extend_from_slice(b"0\r\n\r\n");
                            }
                            self.extra = std::mem::take(&mut self.pending);
                        }
                        if !out.is_empty() || self.done {
                            return Ok(());
                        }
                    }
                }
            }
            if self.at_hand_only {
                return Ok(());
            }
            if let Some(rx) = self.h2.as_mut() {
                match crate::clock::timeout(self.timeout, rx.data()).await {
                    Ok(Some(Ok(b))) => {
                        // The window comes back as the piece moves on; the
                        // origin's pace is the client's.
                        if rx.release_capacity(b.len()).is_err() {
                            return Err(BodyError { status: 400, reason: "client prematurely closed stream".into() });
                        }
                        self.pending.extend_from_slice(&b);
                        // Frames that are already here go on together.
                        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                        while self.pending.len() < PIECE {
                            match rx.poll_data(&mut cx) {
                                std::task::Poll::Ready(Some(Ok(b))) => {
                                    if rx.release_capacity(b.len()).is_err() {
                                        break;
                                    }
                                    self.pending.extend_from_slice(&b);
                                }
                                std::task::Poll::Ready(None) => {
                                    self.ended = true;
                                    break;
                                }
                                _ => break,
                            }
                        }
                    }
                    Ok(None) => self.ended = true,
                    Ok(Some(Err(_))) => {
                        let reason =
                            rx.bad_length_reason().unwrap_or_else(|| "client prematurely closed stream".into());
                        return Err(BodyError { status: 400, reason });
                    }
                    Err(_) => {
                        return Err(BodyError {
                            status: 408,
                            reason: "client timed out (110: Connection timed out)".into(),
                        });
                    }
                }
                continue;
            }
            let Some(sock) = sock.as_deref_mut() else {
                return Err(BodyError { status: 500, reason: "no client connection".into() });
            };
            self.pending.reserve(PIECE);
            match crate::clock::timeout(self.timeout, sock.read_some(&mut self.pending)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => {
                    return Err(BodyError { status: 400, reason: "client prematurely closed connection".into() });
                }
                Err(_) => {
                    return Err(BodyError {
                        status: 408,
                        reason: "client timed out (110: Connection timed out)".into(),
                    });
                }
            }
        }
    }
}

/// A piece of body for the origin: as a chunk when re-chunked, else as is.
fn frame(out: &mut Vec<u8>, data: &[u8], framing: SendFraming) {
    if data.is_empty() {
        return;
    }
    if framing == SendFraming::Chunked {
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(data);
    }
}

/// Adds a piece passed on to the kept copy, dropping the copy past `limit`.
fn keep(copy: &mut Option<Vec<u8>>, limit: usize, data: &[u8]) {
    if let Some(c) = copy {
        if c.len() + data.len() > limit {
            *copy = None;
        } else {
            c.extend_from_slice(data);
        }
    }
}

/// `sent` counts the bytes written (`$upstream_bytes_sent`).
async fn write(stream: &mut UpStream, mut data: &[u8], t: Duration, sent: &mut u64) -> Result<(), SendError> {
    *sent += data.len() as u64;
    // A request usually fits the socket buffer: write it without setting
    // up a timer, which only a write that must wait needs.
    while !data.is_empty() {
        let r = match stream {
            UpStream::Plain(s) => s.try_write(data),
            UpStream::Unix(s) => s.try_write(data),
            UpStream::Tls(_) | UpStream::H2(_) => break,
        };
        match r {
            Ok(0) => return Err(SendError::Origin(Some(std::io::ErrorKind::WriteZero.into()))),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(SendError::Origin(Some(e))),
        }
    }
    if data.is_empty() {
        return Ok(());
    }
    match crate::clock::timeout(t, stream.write_all(data)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(SendError::Origin(Some(e))),
        Err(_) => Err(SendError::Origin(None)),
    }
}

/// Writes the request head, then the body, to the origin.
pub async fn send(
    stream: &mut UpStream,
    head: &[u8],
    client: &mut Client<'_>,
    framing: SendFraming,
    t: Duration,
    sent: &mut u64,
) -> Result<(), SendError> {
    if framing == SendFraming::Records {
        return send_records(stream, head, client, t, sent).await;
    }
    match &mut client.body {
        ReqBody::Buffered(Spooled::Memory(m)) if m.is_empty() => write(stream, head, t, sent).await,
        ReqBody::Buffered(Spooled::Memory(m)) if m.len() <= PIECE => {
            // One write for a small request, head and body together.
            let mut all = Vec::with_capacity(head.len() + m.len());
            all.extend_from_slice(head);
            all.extend_from_slice(m);
            write(stream, &all, t, sent).await
        }
        ReqBody::Buffered(b) => {
            write(stream, head, t, sent).await?;
            let mut buf = vec![0u8; PIECE];
            let mut off = 0u64;
            while off < b.len() {
                let n = spool::read_at(b, off, &mut buf).map_err(|e| SendError::Origin(Some(e)))?;
                if n == 0 {
                    break;
                }
                write(stream, &buf[..n], t, sent).await?;
                off += n as u64;
            }
            Ok(())
        }
        ReqBody::Streamed(c) => {
            // What came with the request's head goes with the origin's head,
            // in one write (one TLS record), as nginx sends its preread.
            let mut piece = Vec::with_capacity(PIECE + 32);
            c.at_hand(&mut piece, framing).await.map_err(SendError::Client)?;
            let mut all = Vec::with_capacity(head.len() + piece.len());
            all.extend_from_slice(head);
            all.extend_from_slice(&piece);
            c.started |= !piece.is_empty();
            write(stream, &all, t, sent).await?;
            while !c.done {
                piece.clear();
                c.next(client.sock.as_deref_mut(), &mut piece, framing).await.map_err(SendError::Client)?;
                if piece.is_empty() && c.done {
                    return Ok(());
                }
                c.started = true;
                write(stream, &piece, t, sent).await?;
            }
            Ok(())
        }
    }
}

/// [`send`] for FastCGI: the body goes in STDIN records, piece by piece as
/// it is read (from memory, the temporary file, or the client), and an
/// empty STDIN record ends it.
async fn send_records(
    stream: &mut UpStream,
    head: &[u8],
    client: &mut Client<'_>,
    t: Duration,
    sent: &mut u64,
) -> Result<(), SendError> {
    use crate::http::fastcgi::record;
    let mut out = Vec::with_capacity(head.len() + 64);
    out.extend_from_slice(head);
    match &mut client.body {
        ReqBody::Buffered(Spooled::Memory(m)) if m.len() <= PIECE => {
            // One write for a small request.
            record::stdin(&mut out, m);
            record::end_stdin(&mut out);
            write(stream, &out, t, sent).await
        }
        ReqBody::Buffered(b) => {
            write(stream, &out, t, sent).await?;
            let mut buf = vec![0u8; PIECE];
            let mut off = 0u64;
            while off < b.len() {
                let n = spool::read_at(b, off, &mut buf).map_err(|e| SendError::Origin(Some(e)))?;
                if n == 0 {
                    break;
                }
                out.clear();
                record::stdin(&mut out, &buf[..n]);
                write(stream, &out, t, sent).await?;
                off += n as u64;
            }
            out.clear();
            record::end_stdin(&mut out);
            write(stream, &out, t, sent).await
        }
        ReqBody::Streamed(c) => {
            write(stream, &out, t, sent).await?;
            let mut piece = Vec::with_capacity(PIECE);
            loop {
                piece.clear();
                c.next(client.sock.as_deref_mut(), &mut piece, SendFraming::Records)
                    .await
                    .map_err(SendError::Client)?;
                out.clear();
                if !piece.is_empty() {
                    c.started = true;
                    record::stdin(&mut out, &piece);
                }
                if c.done {
                    record::end_stdin(&mut out);
                }
                write(stream, &out, t, sent).await?;
                if c.done {
                    return Ok(());
                }
            }
        }
    }
}

/// nginx's `$request_body`: a body read whole into memory (not one in a
/// temp file, not one streamed, not an empty one), copied into the
/// request's context when some template reads the variable.
pub fn keep_for_variable(ctx: &mut crate::http::handler::ctx::ReqCtx<'_, '_>, body: &ReqBody) {
    if let ReqBody::Buffered(b) = body
        && let Some(name) = b.file_name()
    {
        ctx.request_body_file = Some(name.to_path_buf());
    }
    if let ReqBody::Buffered(crate::http::connection::spool::Spooled::Memory(b)) = body
        && !b.is_empty()
        && !ctx.mirror_due.is_empty()
        && !ctx.mirrored
        && ctx.conf.mirror.request_body
    {
        ctx.mirror_body = Some(b.clone());
    }
    if crate::variables::request_body_used()
        && let ReqBody::Buffered(crate::http::connection::spool::Spooled::Memory(b)) = body
        && !b.is_empty()
    {
        ctx.request_body = Some(b.clone());
    }
}

/// A buffered body read whole (the run-time API's small JSON bodies); a
/// streamed one is not, and reads as empty.
pub fn whole(body: &ReqBody) -> Vec<u8> {
    let ReqBody::Buffered(b) = body else { return Vec::new() };
    if let crate::http::connection::spool::Spooled::Memory(v) = b {
        return v.clone();
    }
    let mut out = vec![0u8; b.len().min(1 << 20) as usize];
    let mut at = 0;
    while at < out.len() {
        match spool::read_at(b, at as u64, &mut out[at..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => at += n,
        }
    }
    out.truncate(at);
    out
}
