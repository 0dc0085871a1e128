//! The HTTP/2 connection to a gRPC origin: sluice's own framing
//! ([`super::session`]) over the socket the upstream core connected. It
//! rides in the core as one more kind of origin connection
//! (`UpStream::H2`): the core connects (TCP, unix socket, TLS with ALPN
//! `h2`), picks peers, retries and pools it like any other; this module
//! opens one stream per request, and reads the response's DATA frames as
//! the byte stream the core's body reader expects, keeping the trailers
//! (`grpc-status`, `grpc-message`) for the connection layer to send on
//! after the body.
//!
//! A task of the worker's reads the origin's frames as they come (so
//! SETTINGS, PING and WINDOW_UPDATE are answered while the request body is
//! still going or the client is slow to take the response) and writes
//! what the session queued. As nginx with `keepalive` in the upstream
//! block, a connection carries one request at a time and goes back to the
//! pool after its response.

use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::session::{Failure, RespHead, Session};
use crate::http::proxy::upstream_tls::UpStream;

/// Response bytes held for the reader before the origin is read no
/// further (nginx stops reading when its buffer is full).
const HIGH_WATER: usize = 256 * 1024;

/// The most room the writer keeps between writes for the session's next
/// frames.
const SPARE_ROOM: usize = 64 * 1024;

/// The session and whoever waits for it to change.
pub struct Shared {
    s: RefCell<Session>,
    wakers: RefCell<Vec<Waker>>,
}

impl Shared {
    fn wake(&self) {
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    fn park(&self, cx: &Context<'_>) {
        let mut ws = self.wakers.borrow_mut();
        if !ws.iter().any(|w| w.will_wake(cx.waker())) {
            ws.push(cx.waker().clone());
        }
    }

    /// Waits until `ready` gives a value; the session is checked again
    /// after each change.
    async fn until<T>(&self, mut ready: impl FnMut(&mut Session) -> Option<T>) -> T {
        std::future::poll_fn(|cx| {
            if let Some(v) = ready(&mut self.s.borrow_mut()) {
                return Poll::Ready(v);
            }
            self.park(cx);
            Poll::Pending
        })
        .await
    }
}

/// A client HTTP/2 connection to an origin.
pub struct Conn {
    sh: Rc<Shared>,
    /// The task reading and writing the socket; ended with the connection.
    task: tokio::task::JoinHandle<()>,
    /// The response's trailers, once its stream ended.
    trailers: Option<crate::http::fields::Fields>,
    /// A stream's body is being read (set with the head, cleared at its
    /// end).
    reading: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
        // A body pump still holding the session stops at once.
        self.sh.s.borrow_mut().fail(Failure::Closed);
        self.sh.wake();
    }
}

/// Starts the connection: the preface and SETTINGS are queued to go with
/// the first request, as nginx sends them, without waiting for the
/// origin's SETTINGS.
pub fn handshake(io: UpStream) -> Conn {
    let sh = Rc::new(Shared { s: RefCell::new(Session::new()), wakers: RefCell::new(Vec::new()) });
    let (rd, wr) = tokio::io::split(io);
    let task = tokio::task::spawn_local(crate::clock::per_poll(drive(sh.clone(), rd, wr)));
    Conn { sh, task, trailers: None, reading: false }
}

/// Reads the origin's bytes into the session and writes what it queues,
/// until either side of the socket fails.
async fn drive(sh: Rc<Shared>, mut rd: tokio::io::ReadHalf<UpStream>, mut wr: tokio::io::WriteHalf<UpStream>) {
    let reader = async {
        // Read into spare capacity: a zeroed buffer per connection cost a
        // new connection to the origin (one in twenty calls when more calls
        // run than `keepalive` keeps) some 20,000 instructions.
        let mut buf = bytes::BytesMut::with_capacity(16 * 1024);
        loop {
            // The reader is slow: hold the origin back (TCP's window).
            sh.until(|s| (s.queued() < HIGH_WATER || s.error().is_some()).then_some(())).await;
            if sh.s.borrow().error().is_some() {
                return;
            }
            buf.clear();
            let r = rd.read_buf(&mut buf).await;
            {
                let mut s = sh.s.borrow_mut();
                match r {
                    Ok(0) => s.fail(Failure::Closed),
                    Ok(n) => s.receive(&buf[..n]),
                    Err(e) => s.fail(Failure::Io(e.kind(), e.to_string())),
                }
            }
            sh.wake();
            if sh.s.borrow().error().is_some() {
                return;
            }
        }
    };
    let writer = async {
        // The session's queue and this one trade places, so each keeps
        // its room: a queue taken and left empty made the next call's
        // frames grow a new one (three or four allocations a call).
        let mut spare = Vec::new();
        loop {
            let out = sh
                .until(|s| (!s.out.is_empty()).then(|| std::mem::replace(&mut s.out, std::mem::take(&mut spare))))
                .await;
            let r = match wr.write_all(&out).await {
                Ok(()) => wr.flush().await,
                Err(e) => Err(e),
            };
            if let Err(e) = r {
                sh.s.borrow_mut().fail(Failure::Io(e.kind(), e.to_string()));
                sh.wake();
                return;
            }
            // A large body's room is not kept for the calls after it.
            if out.capacity() <= SPARE_ROOM {
                spare = out;
                spare.clear();
            }
        }
    };
    tokio::select! {
        () = reader => {}
        () = writer => {}
    }
    // What was queued before the end (a last SETTINGS ack) may still go.
    let rest = std::mem::take(&mut sh.s.borrow_mut().out);
    if !rest.is_empty() {
        let _ = wr.write_all(&rest).await;
    }
}

/// The sending side of the stream in flight, for a task of its own (the
/// client's body as it comes).
pub struct Sender {
    sh: Rc<Shared>,
    id: u32,
}

impl Sender {
    /// Sends `data` as the origin's windows allow, ending the stream with
    /// the last piece when `end` (an empty `data` with `end` is an empty
    /// DATA frame that ends it).
    pub async fn send(&self, mut data: Bytes, end: bool) -> Result<(), Failure> {
        loop {
            let room = self
                .sh
                .until(|s| {
                    if let Some(e) = s.error() {
                        return Some(Err(e.clone()));
                    }
                    if s.stream_id() != self.id {
                        return Some(Err(Failure::Closed));
                    }
                    let room = s.send_room();
                    (room > 0 || data.is_empty()).then_some(Ok(room))
                })
                .await?;
            let part = data.split_to(room.min(data.len()));
            let last = data.is_empty();
            self.sh.s.borrow_mut().push_data(&part, end && last);
            self.sh.wake();
            if last {
                return Ok(());
            }
        }
    }

    /// Whether `n` bytes go at once in one DATA frame: the stream still
    /// open and the origin's windows that wide ([`Sender::send`] would
    /// not wait).
    pub fn fits(&self, n: usize) -> bool {
        let s = self.sh.s.borrow();
        s.error().is_none() && s.stream_id() == self.id && (n == 0 || s.send_room() >= n)
    }

    /// Sends `data` now, as one DATA frame; only after [`Sender::fits`]
    /// said it goes whole.
    pub fn send_now(&self, data: &[u8], end: bool) {
        self.sh.s.borrow_mut().push_data(data, end);
        self.sh.wake();
    }

    /// Gives up the stream: RST_STREAM, and the connection is not reused.
    pub fn reset(&self) {
        let mut s = self.sh.s.borrow_mut();
        if s.stream_id() == self.id {
            s.reset();
        }
        drop(s);
        self.sh.wake();
    }
}

impl Conn {
    /// Whether an idle connection can no longer carry a request (the
    /// origin closed it, sent GOAWAY or broke the protocol, or the last
    /// stream did not complete both ways).
    pub fn is_stale(&self) -> bool {
        self.reading || self.task.is_finished() || !self.sh.s.borrow().reusable()
    }

    /// Opens a stream with the request's header block (ending it when
    /// there is no body); `header_limit` is `grpc_buffer_size`.
    pub fn open(&mut self, block: &[u8], end: bool, header_limit: usize) -> Result<Sender, Failure> {
        self.trailers = None;
        let id = self.sh.s.borrow_mut().start(block, end, header_limit)?;
        self.sh.wake();
        Ok(Sender { sh: self.sh.clone(), id })
    }

    /// Waits for the response head; `no_body` for a HEAD request.
    pub async fn response(&mut self, no_body: bool) -> Result<RespHead, Failure> {
        let head = self
            .sh
            .until(|s| {
                if let Some(h) = s.take_head() {
                    return Some(Ok(h));
                }
                s.error().map(|e| Err(e.clone()))
            })
            .await?;
        if no_body || head.status == 204 || head.status == 304 {
            self.sh.s.borrow_mut().no_body();
        }
        // A trailers-only answer has no body to read; nor has a HEAD
        // request's (its connection is then not reused).
        self.reading = !(head.end_stream || no_body);
        Ok(head)
    }

    /// The trailers of the response just read, once its body ended.
    pub fn take_trailers(&mut self) -> Option<crate::http::fields::Fields> {
        self.trailers.take()
    }

    /// DATA frames as a byte stream; the end of the stream (after its
    /// trailers) reads as EOF; a reset or a broken connection is an error.
    pub fn poll_read(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.reading {
            return Poll::Ready(Ok(()));
        }
        let mut s = self.sh.s.borrow_mut();
        if let Some(mut b) = s.take_data() {
            let n = b.len().min(buf.remaining());
            buf.put_slice(&b[..n]);
            b.advance(n);
            if !b.is_empty() {
                s.unread(b);
            }
            drop(s);
            // The reading task may have stopped at the high-water mark.
            self.sh.wake();
            return Poll::Ready(Ok(()));
        }
        if let Some(e) = s.error()
            && (*e != Failure::Closed || !s.done())
        {
            let e = body_error(e);
            drop(s);
            self.reading = false;
            return Poll::Ready(Err(e));
        }
        if s.done() {
            let t = s.take_trailers();
            drop(s);
            self.trailers = t;
            self.reading = false;
            return Poll::Ready(Ok(()));
        }
        drop(s);
        self.sh.park(cx);
        Poll::Pending
    }
}

/// A failure while the body is read, as the I/O error the core's body
/// reader turns into nginx's line (`InvalidData`: the origin's protocol
/// break, logged as it is; `UnexpectedEof`: a premature close).
fn body_error(e: &Failure) -> io::Error {
    match e {
        Failure::Closed => io::Error::new(io::ErrorKind::UnexpectedEof, "upstream prematurely closed connection"),
        Failure::Io(kind, why) => io::Error::new(*kind, why.clone()),
        Failure::Invalid(why) => io::Error::new(io::ErrorKind::InvalidData, why.clone()),
    }
}
