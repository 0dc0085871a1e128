//! The QUIC side of the `h3` crate (its `quic` traits) on quinn, in place
//! of `h3-quinn`, for two things nginx does that `h3-quinn` 0.0.10
//! cannot:
//!
//! - STOP_SENDING at any time on a request stream (`Watch::stop`): a body
//!   no handler reads is refused with H3_NO_ERROR as nginx refuses it.
//!   `h3-quinn`'s read future owns the quinn stream while a read waits,
//!   and its `stop_sending` panics then; here reads are polled in place,
//!   so the stream is always at hand.
//! - Whether anything followed a request's HEADERS frame (`Watch::frames`):
//!   nginx takes any bytes after HEADERS as a body, an empty DATA frame
//!   included, and sends such a body to an origin with `Content-Length:
//!   0`; the `h3` crate reports an empty DATA frame as the body's end,
//!   even one in the middle of a body (`Watch::finished` and
//!   `Watch::data_bytes` tell whether more follows).
//!
//! (QPACK's decoder stream is written by the vendored `h3`, which keeps
//! the dynamic table: vendor/h3/src/qpack/session.rs.)
//!
//! Unidirectional streams the client opens are `h3-quinn`'s (nothing is
//! needed of them). Reads take quinn's chunks as they are, without a
//! copy: the received packet's bytes.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use quinn::VarInt;

/// Largest piece read from a request stream at a time.
const READ_PIECE: usize = 32 * 1024;

type Pending<T> = Pin<Box<dyn std::future::Future<Output = Result<T, quinn::ConnectionError>>>>;

/// What a connection's streams share with the request handlers: each
/// request stream's [`Watch`] by id until its handler takes it.
#[derive(Default)]
pub struct Side {
    watches: RefCell<HashMap<u64, Weak<Watch>>>,
}

impl Side {
    /// The request stream `id`'s watch, once.
    pub fn take(&self, id: StreamId) -> Option<Rc<Watch>> {
        self.watches.borrow_mut().remove(&id.into_inner()).and_then(|w| w.upgrade())
    }

    fn keep(&self, id: u64, w: &Rc<Watch>) {
        let mut m = self.watches.borrow_mut();
        // Streams h3 refused before a handler took them.
        if m.len() >= 64 {
            m.retain(|_, w| w.strong_count() > 0);
        }
        m.insert(id, Rc::downgrade(w));
    }
}

/// One request stream's receiving side, shared by the `h3` crate's reads
/// and the request's handler.
pub struct Watch {
    stream: RefCell<quinn::RecvStream>,
    scan: Cell<Scan>,
    fin: Cell<bool>,
    early: bool,
}

impl Watch {
    /// The stream was taken up before the handshake completed: its
    /// request came in 0-RTT (TLS early data) and may be a replay.
    pub fn early(&self) -> bool {
        self.early
    }

    /// STOP_SENDING with `code` (an HTTP/3 error code).
    pub fn stop(&self, code: u32) {
        let _ = self.stream.borrow_mut().stop(VarInt::from_u32(code));
    }

    /// HTTP/3 frames begun on the stream so far (HEADERS is the first).
    pub fn frames(&self) -> u32 {
        self.scan.get().frames
    }

    /// The lengths of the DATA frames begun so far, added up.
    pub fn data_bytes(&self) -> u64 {
        self.scan.get().data
    }

    /// Whether the client's side ended (its FIN read).
    pub fn finished(&self) -> bool {
        self.fin.get()
    }
}

/// Where the stream's bytes are in HTTP/3's framing (type, length,
/// payload), a varint possibly split between reads.
#[derive(Clone, Copy, Default)]
struct Scan {
    frames: u32,
    data: u64,
    ftype: u64,
    in_len: bool,
    varint: u64,
    varint_left: u8,
    in_varint: bool,
    payload: u64,
}

impl Scan {
    fn feed(&mut self, mut b: &[u8]) {
        while let Some((&byte, rest)) = b.split_first() {
            if self.payload > 0 {
                let n = self.payload.min(b.len() as u64);
                self.payload -= n;
                b = &b[n as usize..];
                continue;
            }
            b = rest;
            if self.in_varint {
                self.varint = (self.varint << 8) | u64::from(byte);
                self.varint_left -= 1;
            } else {
                self.varint = u64::from(byte & 0x3f);
                self.varint_left = (1u8 << (byte >> 6)) - 1;
                self.in_varint = true;
            }
            if self.varint_left > 0 {
                continue;
            }
            self.in_varint = false;
            if self.in_len {
                self.payload = self.varint;
                if self.ftype == 0 {
                    self.data = self.data.saturating_add(self.varint);
                }
                self.in_len = false;
            } else {
                self.frames = self.frames.saturating_add(1);
                self.ftype = self.varint;
                self.in_len = true;
            }
        }
    }
}

fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => {
            ConnectionErrorIncoming::ApplicationClose { error_code: c.error_code.into() }
        }
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(Arc::new(other)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(code) => StreamErrorIncoming::StreamTerminated { error_code: code.into_inner() },
        quinn::ReadError::ConnectionLost(c) => {
            StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(c) }
        }
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated { error_code: code.into_inner() },
        quinn::WriteError::ConnectionLost(c) => {
            StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(c) }
        }
        other => StreamErrorIncoming::Unknown(Box::new(other)),
    }
}

fn stream_id(id: quinn::StreamId) -> Result<StreamId, ConnectionErrorIncoming> {
    StreamId::try_from(u64::from(id)).map_err(|_| ConnectionErrorIncoming::InternalError("stream id".into()))
}

/// A connection for the `h3` crate.
pub struct Conn {
    uni: h3_quinn::Connection,
    opener: Opener,
    accepting: Option<Pending<(quinn::SendStream, quinn::RecvStream)>>,
}

impl Conn {
    pub fn new(conn: quinn::Connection, side: Rc<Side>) -> Self {
        Conn {
            uni: h3_quinn::Connection::new(conn.clone()),
            opener: Opener { conn, side, opening: None },
            accepting: None,
        }
    }
}

impl quic::Connection<Bytes> for Conn {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = Opener;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        quic::Connection::<Bytes>::poll_accept_recv(&mut self.uni, cx)
    }

    fn poll_accept_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let fut = self.accepting.get_or_insert_with(|| {
            let c = self.opener.conn.clone();
            Box::pin(async move { c.accept_bi().await })
        });
        let r = ready!(fut.as_mut().poll(cx));
        self.accepting = None;
        let (send, recv) = r.map_err(connection_error)?;
        let id = stream_id(recv.id())?;
        // Opened by a 0-RTT packet: quinn's `is_0rtt` says the connection
        // was still handshaking when the stream was accepted (1-RTT
        // packets are processed only after the handshake); one accepted
        // later, its client's Finished having come meanwhile, is counted
        // by the vendored quinn-proto (vendor/quinn-proto/SLUICE-PATCH.md).
        let early = recv.is_0rtt() || recv.id().index() < self.opener.conn.stats().zero_rtt_bidi_streams;
        let watch = Rc::new(Watch {
            stream: RefCell::new(recv),
            scan: Cell::new(Scan::default()),
            fin: Cell::new(false),
            early,
        });
        self.opener.side.keep(id.into_inner(), &watch);
        Poll::Ready(Ok(Bidi { send: SendHalf::new(send, id), recv: Recv { watch, id } }))
    }

    fn opener(&self) -> Self::OpenStreams {
        Opener { conn: self.opener.conn.clone(), side: self.opener.side.clone(), opening: None }
    }
}

impl quic::OpenStreams<Bytes> for Conn {
    type BidiStream = Bidi;
    type SendStream = SendHalf;

    fn poll_open_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Bidi, StreamErrorIncoming>> {
        self.opener.poll_open_bidi(cx)
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<SendHalf, StreamErrorIncoming>> {
        self.opener.poll_open_send(cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.opener, code, reason)
    }
}

/// Opens the server's unidirectional streams (control, QPACK).
pub struct Opener {
    conn: quinn::Connection,
    side: Rc<Side>,
    opening: Option<Pending<quinn::SendStream>>,
}

impl quic::OpenStreams<Bytes> for Opener {
    type BidiStream = Bidi;
    type SendStream = SendHalf;

    /// A server opens no request streams (no server push here).
    fn poll_open_bidi(&mut self, _cx: &mut Context<'_>) -> Poll<Result<Bidi, StreamErrorIncoming>> {
        Poll::Ready(Err(StreamErrorIncoming::Unknown("a server opens no bidirectional streams".into())))
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<SendHalf, StreamErrorIncoming>> {
        let fut = self.opening.get_or_insert_with(|| {
            let c = self.conn.clone();
            Box::pin(async move { c.open_uni().await })
        });
        let r = ready!(fut.as_mut().poll(cx));
        self.opening = None;
        let conn_err = |e| StreamErrorIncoming::ConnectionErrorIncoming { connection_error: e };
        let s = r.map_err(|e| conn_err(connection_error(e)))?;
        let id = stream_id(s.id()).map_err(conn_err)?;
        Poll::Ready(Ok(SendHalf::new(s, id)))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.conn.close(VarInt::from_u64(code.value()).unwrap_or(VarInt::MAX), reason);
    }
}

/// A request stream: quinn's two halves.
pub struct Bidi {
    send: SendHalf,
    recv: Recv,
}

impl quic::BidiStream<Bytes> for Bidi {
    type SendStream = SendHalf;
    type RecvStream = Recv;

    fn split(self) -> (SendHalf, Recv) {
        (self.send, self.recv)
    }
}

impl quic::RecvStream for Bidi {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, code: u64) {
        self.recv.stop_sending(code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.id
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Option<u64>> {
        quic::RecvStream::poll_reset(&mut self.recv, cx)
    }
}

impl quic::SendStream<Bytes> for Bidi {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, code: u64) {
        self.send.reset(code)
    }

    fn send_id(&self) -> StreamId {
        self.send.id
    }
}

/// A request stream's receiving side.
pub struct Recv {
    watch: Rc<Watch>,
    id: StreamId,
}

impl quic::RecvStream for Recv {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let mut stream = self.watch.stream.borrow_mut();
        // quinn's chunk reads are an `async fn` only; one made and polled
        // in place holds nothing between polls but the waker quinn keeps.
        let chunk = {
            let read = std::pin::pin!(stream.read_chunk(READ_PIECE, true));
            ready!(read.poll(cx)).map_err(read_error)?
        };
        let Some(chunk) = chunk else {
            self.watch.fin.set(true);
            return Poll::Ready(Ok(None));
        };
        let mut scan = self.watch.scan.get();
        scan.feed(&chunk.bytes);
        self.watch.scan.set(scan);
        Poll::Ready(Ok(Some(chunk.bytes)))
    }

    fn stop_sending(&mut self, code: u64) {
        let _ = self.watch.stream.borrow_mut().stop(VarInt::from_u64(code).unwrap_or(VarInt::MAX));
    }

    fn recv_id(&self) -> StreamId {
        self.id
    }

    fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Option<u64>> {
        let mut stream = self.watch.stream.borrow_mut();
        let reset = std::pin::pin!(stream.received_reset());
        match ready!(reset.poll(cx)) {
            Ok(Some(code)) => Poll::Ready(Some(code.into_inner())),
            // Finished and read: it can no longer be reset.
            Ok(None) => Poll::Ready(None),
            // The connection is gone: as good as a reset.
            Err(_) => Poll::Ready(Some(0)),
        }
    }
}

/// A sending side: a request stream's, or one of the server's
/// unidirectional streams.
pub struct SendHalf {
    stream: Rc<RefCell<quinn::SendStream>>,
    id: StreamId,
    writing: Option<WriteBuf<Bytes>>,
}

impl SendHalf {
    fn new(stream: quinn::SendStream, id: StreamId) -> Self {
        SendHalf { stream: Rc::new(RefCell::new(stream)), id, writing: None }
    }
}

impl quic::SendStream<Bytes> for SendHalf {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = self.writing.as_mut() {
            while data.has_remaining() {
                let mut s = self.stream.borrow_mut();
                let n = ready!(Pin::new(&mut *s).poll_write(cx, data.chunk())).map_err(write_error)?;
                data.advance(n);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError("send_data while not ready".into()),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(self.stream.borrow_mut().finish().map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))))
    }

    fn reset(&mut self, code: u64) {
        let _ = self.stream.borrow_mut().reset(VarInt::from_u64(code).unwrap_or(VarInt::MAX));
    }

    fn send_id(&self) -> StreamId {
        self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_counts_frames_across_pieces() {
        let mut s = Scan::default();
        // HEADERS of 3 bytes, then an empty DATA frame, split everywhere.
        let wire = [0x01, 0x03, 0xaa, 0xbb, 0xcc, 0x00, 0x00];
        for b in wire.chunks(1) {
            s.feed(b);
        }
        assert_eq!((s.frames, s.data), (2, 0));
        // A DATA frame with a two-byte length (64) and its payload.
        let mut s = Scan::default();
        let mut wire = vec![0x00, 0x40, 0x40];
        wire.extend_from_slice(&[7; 64]);
        wire.extend_from_slice(&[0x00, 0x00]);
        s.feed(&wire[..10]);
        s.feed(&wire[10..]);
        assert_eq!((s.frames, s.data), (2, 64));
    }
}
