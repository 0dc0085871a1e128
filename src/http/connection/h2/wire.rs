//! The byte stream under the h2 crate, with two jobs.
//!
//! Reads pass a watch on frame headers that bounds a header block spread
//! over CONTINUATION frames to the header list limit (nginx:
//! `large_client_header_buffers`, 32 KiB by default). The h2 crate bounds
//! the decoded list, but buffers up to several frames of raw block first;
//! cutting the connection here keeps a CONTINUATION flood to the configured
//! size. It skips payloads, so it costs a few comparisons per frame.
//!
//! Writes can be corked: h2 flushes after every accepted stream, which over
//! TLS meant one record and one `writev` per response. While the connection
//! loop is still accepting streams that already arrived, writes gather
//! here; when no more are ready it uncorks and everything goes out at once
//! (as nginx answers all frames of one read with one write).
//!
//! Writes are also watched for a stall: the time the socket first refused
//! bytes, cleared by the next write that goes through, so the connection
//! loop can close a connection whose peer stopped reading for
//! `send_timeout` (nginx's send_timeout on the HTTP/2 connection).

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const PREFACE_LEN: usize = 24;
const HEADERS: u8 = 0x1;
const PUSH_PROMISE: u8 = 0x5;
const CONTINUATION: u8 = 0x9;
const END_HEADERS: u8 = 0x4;

#[derive(Debug)]
pub struct Watch {
    preface_left: usize,
    head: [u8; 9],
    head_len: usize,
    payload_left: usize,
    in_block: bool,
    block: usize,
    limit: usize,
}

impl Watch {
    pub fn new(limit: usize) -> Watch {
        Watch {
            preface_left: PREFACE_LEN,
            head: [0; 9],
            head_len: 0,
            payload_left: 0,
            in_block: false,
            block: 0,
            limit,
        }
    }

    /// Follows the frame boundaries through `data`; false once a header
    /// block grows past the limit.
    pub fn feed(&mut self, mut data: &[u8]) -> bool {
        let skip = self.preface_left.min(data.len());
        self.preface_left -= skip;
        data = &data[skip..];
        while !data.is_empty() {
            if self.payload_left > 0 {
                let n = self.payload_left.min(data.len());
                self.payload_left -= n;
                data = &data[n..];
                continue;
            }
            let n = (9 - self.head_len).min(data.len());
            self.head[self.head_len..self.head_len + n].copy_from_slice(&data[..n]);
            self.head_len += n;
            data = &data[n..];
            if self.head_len < 9 {
                break;
            }
            self.head_len = 0;
            let len = (usize::from(self.head[0]) << 16) | (usize::from(self.head[1]) << 8) | usize::from(self.head[2]);
            let (kind, flags) = (self.head[3], self.head[4]);
            self.payload_left = len;
            match kind {
                HEADERS | PUSH_PROMISE => {
                    self.in_block = flags & END_HEADERS == 0;
                    self.block = len;
                }
                CONTINUATION if self.in_block => {
                    self.block += len;
                    if flags & END_HEADERS != 0 {
                        self.in_block = false;
                    }
                }
                _ => {}
            }
            if self.block > self.limit && (self.in_block || kind == CONTINUATION) {
                return false;
            }
        }
        true
    }
}

/// Corked writes beyond this go out anyway.
const CORK_MAX: usize = 256 * 1024;

/// An I/O stream whose reads pass through a [`Watch`] and whose writes
/// gather while `cork` is set.
pub struct Wire<T> {
    inner: T,
    watch: Watch,
    cork: Rc<Cell<bool>>,
    stall: Rc<Cell<Option<Instant>>>,
    wbuf: Vec<u8>,
    wpos: usize,
}

/// What the connection loop holds of its `Wire`: the cork switch, and
/// since when writes have been blocked (None while they go through).
pub struct Handles {
    pub cork: Rc<Cell<bool>>,
    pub stall: Rc<Cell<Option<Instant>>>,
}

impl<T> Wire<T> {
    pub fn new(inner: T, limit: usize) -> (Wire<T>, Handles) {
        let cork = Rc::new(Cell::new(false));
        let stall = Rc::new(Cell::new(None));
        let wire = Wire {
            inner,
            watch: Watch::new(limit),
            cork: cork.clone(),
            stall: stall.clone(),
            wbuf: Vec::new(),
            wpos: 0,
        };
        (wire, Handles { cork, stall })
    }

    /// Notes a write's outcome: blocked (the stall starts, if it had not)
    /// or through (no stall).
    fn note<R>(&self, p: Poll<R>) -> Poll<R> {
        match p {
            Poll::Pending => {
                if self.stall.get().is_none() {
                    self.stall.set(Some(Instant::now()));
                }
            }
            Poll::Ready(_) => {
                if self.stall.get().is_some() {
                    self.stall.set(None);
                }
            }
        }
        p
    }
}

impl<T: AsyncWrite + Unpin> Wire<T> {
    /// Writes out what was gathered.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.wpos < self.wbuf.len() {
            let p = Pin::new(&mut self.inner).poll_write(cx, &self.wbuf[self.wpos..]);
            let n = ready!(self.note(p))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.wpos += n;
        }
        self.wbuf.clear();
        self.wpos = 0;
        Poll::Ready(Ok(()))
    }

    fn gather(&mut self, len: usize) -> bool {
        self.cork.get() && self.wbuf.len() + len <= CORK_MAX
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Wire<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if !this.watch.feed(&buf.filled()[before..]) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, "client sent too large header block")))
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Wire<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if !this.gather(data.len()) {
            ready!(this.poll_drain(cx))?;
            if !this.gather(data.len()) {
                let p = Pin::new(&mut this.inner).poll_write(cx, data);
                return this.note(p);
            }
        }
        this.wbuf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if !this.gather(len) {
            ready!(this.poll_drain(cx))?;
            if !this.gather(len) {
                let p = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
                return this.note(p);
            }
        }
        for b in bufs {
            this.wbuf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.cork.get() {
            return Poll::Ready(Ok(()));
        }
        ready!(this.poll_drain(cx))?;
        let p = Pin::new(&mut this.inner).poll_flush(cx);
        this.note(p)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_drain(cx))?;
        ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize, kind: u8, flags: u8) -> Vec<u8> {
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 1];
        f.resize(9 + len, 0);
        f
    }

    #[test]
    fn bounds_continuation_floods_only() {
        let mut w = Watch::new(32 * 1024);
        let mut bytes = vec![b'P'; PREFACE_LEN];
        bytes.extend(frame(0, 0x4, 0)); // SETTINGS
        bytes.extend(frame(16384, HEADERS, 0));
        bytes.extend(frame(16384, CONTINUATION, 0));
        // Fed one byte at a time: boundaries must survive any split.
        for b in &bytes {
            assert!(w.feed(std::slice::from_ref(b)));
        }
        assert!(!w.feed(&frame(16384, CONTINUATION, 0)), "48 KiB block over a 32 KiB limit");

        let mut ok = Watch::new(32 * 1024);
        let mut bytes = vec![b'P'; PREFACE_LEN];
        for _ in 0..10 {
            bytes.extend(frame(16000, HEADERS, END_HEADERS));
            bytes.extend(frame(16384, 0x0, 0)); // DATA
        }
        bytes.extend(frame(16384, HEADERS, 0));
        bytes.extend(frame(1000, CONTINUATION, END_HEADERS));
        assert!(ok.feed(&bytes), "complete blocks and DATA never trip it");
    }
}
