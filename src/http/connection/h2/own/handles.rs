//! A stream's handles on the own loop: the head and body senders and the
//! request body, each a reference to the connection's shared state and the
//! stream's id. The last one dropped ends a stream the handler left
//! unfinished (RST_STREAM CANCEL, or NO_ERROR for an unread request body
//! once the response went out), as the `h2` crate does.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::Reason;

use super::super::frame::Code;
use super::super::handle::Gone;
use super::super::response::Head;
use super::state::{Conn, Out};

struct Handle {
    conn: Rc<RefCell<Conn>>,
    id: u32,
}

impl Drop for Handle {
    fn drop(&mut self) {
        let mut c = self.conn.borrow_mut();
        let id = self.id;
        let dead = c.dead;
        let Some(s) = c.streams.get_mut(&id) else { return };
        s.refs -= 1;
        if s.refs > 0 {
            return;
        }
        let (closed, send_closed, send_done, recv_closed) = (s.closed, s.send_closed, s.send_done, s.recv_closed);
        let protocol_error = s.bad_length || s.malformed;
        if !closed && !dead {
            if protocol_error {
                c.reset(id, Code::Protocol);
            } else if !send_closed {
                c.reset(id, Code::Cancel);
            } else if send_done && !recv_closed {
                c.reset(id, Code::NoError);
            }
        }
        c.maybe_close(id);
    }
}

fn code(r: Reason) -> Code {
    match u32::from(r) {
        0x0 => Code::NoError,
        0x1 => Code::Protocol,
        0x3 => Code::FlowControl,
        0x5 => Code::StreamClosed,
        0x7 => Code::RefusedStream,
        0x8 => Code::Cancel,
        0xb => Code::EnhanceYourCalm,
        _ => Code::Internal,
    }
}

pub struct Respond(Handle);
pub struct Tx(Handle);
pub struct Rx(Handle);

/// The two handles a new stream's handler gets.
pub fn new(conn: &Rc<RefCell<Conn>>, id: u32) -> (Respond, Rx) {
    // Each handle counts in `refs` (one look-up for both).
    if let Some(s) = conn.borrow_mut().streams.get_mut(&id) {
        s.refs += 2;
        s.rx_alive = true;
    }
    (Respond(Handle { conn: conn.clone(), id }), Rx(Handle { conn: conn.clone(), id }))
}

impl Respond {
    pub fn send_response(&mut self, head: &Head<'_, '_>, end: bool) -> Result<Tx, Gone> {
        let ok = {
            let mut c = self.0.conn.borrow_mut();
            !c.dead && c.send_head(self.0.id, head, end)
        };
        if !ok {
            return Err(Gone);
        }
        // `send_head` counted this handle in the stream's `refs`.
        Ok(Tx(Handle { conn: self.0.conn.clone(), id: self.0.id }))
    }

    pub fn send_reset(&mut self, r: Reason) {
        self.0.conn.borrow_mut().reset(self.0.id, code(r));
    }

    pub fn poll_reset(&mut self, cx: &mut Context<'_>) -> Poll<Result<Reason, Gone>> {
        let mut c = self.0.conn.borrow_mut();
        let dead = c.dead;
        match c.streams.get_mut(&self.0.id) {
            Some(s) if s.reset.is_some() => Poll::Ready(Ok(Reason::from(s.reset.unwrap_or(0)))),
            Some(s) if !s.closed && !dead => {
                s.reset_waker = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(Err(Gone)),
        }
    }

    pub fn stream_id(&self) -> u32 {
        self.0.id
    }
}

impl Tx {
    pub fn send_data(&mut self, data: Bytes, end: bool) -> Result<(), Gone> {
        let mut c = self.0.conn.borrow_mut();
        if c.dead || !c.queue(self.0.id, Out::Data(data, end)) {
            return Err(Gone);
        }
        Ok(())
    }

    pub fn send_trailers(&mut self, t: crate::http::fields::Fields) -> Result<(), Gone> {
        let mut c = self.0.conn.borrow_mut();
        if c.dead || !c.send_trailers(self.0.id, t) {
            return Err(Gone);
        }
        Ok(())
    }

    /// The largest DATA frame this stream sends (`http2_chunk_size`).
    pub fn set_chunk(&mut self, n: usize) {
        if let Some(s) = self.0.conn.borrow_mut().streams.get_mut(&self.0.id) {
            s.chunk = n;
        }
    }

    pub fn reserve_capacity(&mut self, n: usize) {
        if let Some(s) = self.0.conn.borrow_mut().streams.get_mut(&self.0.id) {
            s.want = n;
        }
    }

    pub fn capacity(&self) -> usize {
        let c = self.0.conn.borrow();
        let want = c.streams.get(&self.0.id).map_or(0, |s| s.want);
        c.capacity(self.0.id).min(want)
    }

    pub fn poll_capacity(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<usize, Gone>>> {
        let mut c = self.0.conn.borrow_mut();
        let cap = c.capacity(self.0.id);
        let dead = c.dead;
        match c.streams.get_mut(&self.0.id) {
            Some(s) if s.reset.is_none() && !s.closed && !dead => {
                if s.send_closed {
                    return Poll::Ready(None);
                }
                if cap > 0 {
                    return Poll::Ready(Some(Ok(cap.min(s.want.max(1)))));
                }
                s.tx_waker = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(Some(Err(Gone))),
        }
    }

    pub fn send_reset(&mut self, r: Reason) {
        self.0.conn.borrow_mut().reset(self.0.id, code(r));
    }
}

impl Rx {
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Gone>>> {
        let mut c = self.0.conn.borrow_mut();
        let dead = c.dead;
        let Some(s) = c.streams.get_mut(&self.0.id) else { return Poll::Ready(Some(Err(Gone))) };
        if let Some(b) = s.recv.pop_front() {
            return Poll::Ready(Some(Ok(b)));
        }
        if s.reset.is_some() || dead || s.bad_length {
            return Poll::Ready(Some(Err(Gone)));
        }
        if s.recv_closed {
            return Poll::Ready(None);
        }
        s.rx_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    pub fn poll_trailers(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<http::HeaderMap>, Gone>> {
        let mut c = self.0.conn.borrow_mut();
        let dead = c.dead;
        let Some(s) = c.streams.get_mut(&self.0.id) else { return Poll::Ready(Err(Gone)) };
        if s.recv_closed && s.recv.is_empty() {
            return Poll::Ready(Ok(s.trailers.take()));
        }
        if s.reset.is_some() || dead {
            return Poll::Ready(Err(Gone));
        }
        s.rx_waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Whether the client's stream ended its side (or can send no more).
    pub fn arrived(&self) -> bool {
        let c = self.0.conn.borrow();
        c.dead || c.streams.get(&self.0.id).is_none_or(|s| s.recv_closed || s.reset.is_some())
    }

    /// The whole body, when it already came as one DATA frame that ended
    /// the stream (no trailers, no reset) and `fits` takes its length:
    /// what a first `poll_data` would give, with `is_end_stream` true
    /// after it.
    pub fn take_whole(&mut self, fits: impl FnOnce(usize) -> bool) -> Option<Bytes> {
        let mut c = self.0.conn.borrow_mut();
        let dead = c.dead;
        let s = c.streams.get_mut(&self.0.id)?;
        let whole =
            !dead && s.recv_closed && s.recv.len() == 1 && s.trailers.is_none() && s.reset.is_none() && !s.bad_length;
        if !whole || !fits(s.recv.front().map_or(0, |b| b.len())) {
            return None;
        }
        s.recv.pop_front()
    }

    /// (received, declared) when the DATA broke the declared length.
    pub fn bad_length(&self) -> Option<(u64, u64)> {
        let c = self.0.conn.borrow();
        let s = c.streams.get(&self.0.id).filter(|s| s.bad_length)?;
        Some((s.received, s.content_length.unwrap_or(0)))
    }

    pub fn is_end_stream(&self) -> bool {
        let c = self.0.conn.borrow();
        c.streams.get(&self.0.id).is_none_or(|s| s.recv_closed && s.recv.is_empty())
    }

    /// The body will be read whole, as fast as it comes: no stream
    /// flow control from here on (see `Conn::open_window`).
    pub fn open_window(&mut self) {
        self.0.conn.borrow_mut().open_window(self.0.id);
    }

    pub fn release_capacity(&mut self, n: usize) -> Result<(), Gone> {
        let mut c = self.0.conn.borrow_mut();
        if c.dead {
            return Err(Gone);
        }
        c.release(self.0.id, n);
        Ok(())
    }
}

impl Drop for Rx {
    fn drop(&mut self) {
        let mut c = self.0.conn.borrow_mut();
        let id = self.0.id;
        let Some(s) = c.streams.get_mut(&id) else { return };
        s.rx_alive = false;
        // Bytes nobody will read: the connection's window again.
        let unread: usize = s.recv.drain(..).map(|b| b.len()).sum();
        c.release_conn(unread);
    }
}
