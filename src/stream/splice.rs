//! One direction of a plain TCP to plain TCP session (`relay::splice_both`).
//!
//! Most stream sessions move a few small messages (a request, its answer)
//! and then idle or close. A pipe pair per direction for them costs two
//! pipe2() calls, four closes and more splice calls per session, and four
//! fds and the kernel's pipe memory for as long as the session idles. So a
//! direction starts by copying through the worker's one buffer (a read and
//! a write in the same poll, nothing kept per session unless the origin or
//! client does not take it all at once), and moves to splice(2) once it
//! proves bulky: a read filled the buffer, or it has moved [`BULKY`]
//! bytes. From then on its bytes never enter the worker's memory. The
//! pipe comes from a small per-worker pool and goes back to it when the
//! direction ends with the pipe empty (a pipe with bytes left in it is
//! closed instead, so a pooled pipe never hands stale bytes on).

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::relay::{Counters, End};

/// The worker's copy buffer: nginx's default `proxy_buffer_size`, and
/// what a read must fill for the direction to count as bulky.
pub(super) const SMALL: usize = 16 * 1024;

/// Bytes a direction copies before it moves to splice(2) even though no
/// single read filled the buffer.
pub(super) const BULKY: u64 = 64 * 1024;

/// The most one splice(2) moves into the pipe (its default capacity).
const PIPE_CHUNK: usize = 64 * 1024;

/// Empty pipes a worker keeps for the next bulky direction: enough for the
/// bulky sessions a worker usually has at once, few enough that their fds
/// do not matter next to `worker_connections`.
const POOL: usize = 32;

/// Where a direction begins when an inline session (`tcp_inline`) hands
/// its sockets to a task: the bytes its destination had not taken yet, the
/// bytes moved so far, and whether it already proved bulky.
#[derive(Default)]
pub struct Carry {
    pub rest: Vec<u8>,
    pub total: u64,
    pub bulky: bool,
}

/// Runs `f` with the worker's copy buffer (`tcp_inline`'s copies use it
/// as this module's do: between a read and the write after it).
pub(super) fn with_buf<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with_borrow_mut(|b| f(b))
}

struct Pipe {
    r: OwnedFd,
    w: OwnedFd,
}

thread_local! {
    /// A worker is one thread polling one task at a time, and the buffer
    /// is only borrowed between a read and the write that follows it in
    /// the same poll: one buffer serves all of its sessions.
    static BUF: RefCell<Box<[u8]>> = RefCell::new(vec![0u8; SMALL].into_boxed_slice());
    static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

/// A pipe lent to one direction, with the bytes in it: back to the pool
/// when dropped empty, however the direction ended (its future may be
/// dropped at any await when the other direction ends first).
struct Lent {
    pipe: Option<Pipe>,
    held: Cell<usize>,
}

impl Lent {
    fn take() -> io::Result<Lent> {
        use rustix::pipe::{PipeFlags, pipe_with};
        let pooled = PIPES.try_with(|p| p.try_borrow_mut().ok().and_then(|mut p| p.pop())).ok().flatten();
        let pipe = match pooled {
            Some(p) => p,
            None => {
                let (r, w) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
                Pipe { r, w }
            }
        };
        Ok(Lent { pipe: Some(pipe), held: Cell::new(0) })
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(p) = self.pipe.take() else { return };
        if self.held.get() != 0 {
            return;
        }
        let _ = PIPES.try_with(|pool| {
            if let Ok(mut pool) = pool.try_borrow_mut()
                && pool.len() < POOL
            {
                pool.push(p);
            }
        });
    }
}

/// What one read and the write after it did.
enum Copied {
    /// Nothing to read after all (the readiness was stale).
    Again,
    Eof,
    ReadFailed(io::Error),
    /// `n` bytes read; `rest` what the destination did not take yet;
    /// `failed` a write error.
    Read {
        n: usize,
        rest: Vec<u8>,
        failed: Option<io::Error>,
    },
}

/// Reads what `src` has into the worker's buffer and writes it to `dst`
/// at once: no await between the two, so the buffer is free again after.
fn copy_once(src: &TcpStream, dst: &TcpStream) -> Copied {
    BUF.with_borrow_mut(|buf| {
        let n = match src.try_read(buf) {
            Ok(0) => return Copied::Eof,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Copied::Again,
            Err(e) => return Copied::ReadFailed(e),
        };
        if n < buf.len() {
            // A short read took all the socket had (as nginx's `recv`
            // concludes): its readiness goes now rather than by one more
            // read's EAGAIN. Bytes that come after wake the worker again,
            // and a seen end of stream stays ready (tokio keeps closed
            // states).
            let _ = src.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
        }
        // send(2) on the descriptor, not `try_write`: an origin socket
        // connected at once (`proxy::connect_tcp`) has no write readiness
        // from the event loop yet, and `try_write` would wait a turn of
        // the loop for it. An EAGAIN here leaves the readiness stale; the
        // wait below then tries once more and clears it.
        let sent = rustix::net::send(dst.as_fd(), &buf[..n], rustix::net::SendFlags::NOSIGNAL);
        let (written, failed) = match sent {
            Ok(m) => (m, None),
            Err(rustix::io::Errno::AGAIN) => (0, None),
            Err(e) => (0, Some(io::Error::from(e))),
        };
        let rest = if failed.is_none() { buf[written..n].to_vec() } else { Vec::new() };
        Copied::Read { n, rest, failed }
    })
}

/// Reading `src` failed; `upward`: `src` is the client.
fn recv_failed(e: &io::Error, upward: bool) -> End {
    let msg = format!("recv() failed ({})", crate::process::signal::os_error(e));
    End::Error { msg, upstream: !upward, sending: false }
}

/// Sending to `dst` failed; `upward`: `dst` is the origin.
fn send_failed(e: &io::Error, upward: bool) -> End {
    let msg = format!("send() failed ({})", crate::process::signal::os_error(e));
    End::Error { msg, upstream: upward, sending: true }
}

/// Moves `src`'s bytes to `dst` until `src` closes or either fails,
/// starting where `carry` says.
pub(super) async fn one(
    src: &TcpStream,
    dst: &TcpStream,
    c: &Counters,
    upward: bool,
    started: Instant,
    carry: Carry,
) -> End {
    let counter = if upward { &c.up } else { &c.down };
    let count = |m: usize| {
        counter.set(counter.get() + m as u64);
        c.moved();
    };
    if let Err(e) = write_rest(dst, &carry.rest, &count).await {
        return send_failed(&e, upward);
    }
    let mut total = carry.total;
    let mut bulky = carry.bulky;
    while !bulky {
        if let Err(e) = src.readable().await {
            return recv_failed(&e, upward);
        }
        let (n, rest) = match copy_once(src, dst) {
            Copied::Again => continue,
            Copied::Eof => return End::Closed { upstream: !upward },
            Copied::ReadFailed(e) => return recv_failed(&e, upward),
            Copied::Read { n, rest, failed } => {
                c.moved();
                if !upward && c.first_byte.get().is_none() {
                    c.first_byte.set(Some(crate::clock::since_ms(started)));
                }
                if let Some(e) = failed {
                    return send_failed(&e, upward);
                }
                count(n - rest.len());
                (n, rest)
            }
        };
        if let Err(e) = write_rest(dst, &rest, &count).await {
            return send_failed(&e, upward);
        }
        total += n as u64;
        bulky = n == SMALL || total >= BULKY;
    }
    // Boxed: the splice loop's state stays out of the task of every
    // session that never gets here.
    Box::pin(spliced(src, dst, c, upward, started)).await
}

/// Writes what `dst` did not take at once, as it takes it.
async fn write_rest(dst: &TcpStream, rest: &[u8], count: &impl Fn(usize)) -> io::Result<()> {
    let mut off = 0;
    while off < rest.len() {
        dst.writable().await?;
        match dst.try_write(&rest[off..]) {
            Ok(m) => {
                off += m;
                count(m);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The bulky rest of a direction: socket to pipe to socket.
async fn spliced(src: &TcpStream, dst: &TcpStream, c: &Counters, upward: bool, started: Instant) -> End {
    use rustix::pipe::{SpliceFlags, splice};
    let lent = match Lent::take() {
        Ok(p) => p,
        Err(e) => {
            let msg = format!("pipe2() failed ({})", crate::process::signal::os_error(&e));
            return End::Error { msg, upstream: false, sending: true };
        }
    };
    let Some(Pipe { r: pr, w: pw }) = lent.pipe.as_ref() else { return End::Closed { upstream: !upward } };
    let counter = if upward { &c.up } else { &c.down };
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        let n = match src
            .async_io(Interest::READABLE, || splice(src, None, pw, None, PIPE_CHUNK, flags).map_err(io::Error::from))
            .await
        {
            Ok(0) => return End::Closed { upstream: !upward },
            Ok(n) => n,
            Err(e) => return recv_failed(&e, upward),
        };
        lent.held.set(n);
        c.moved();
        if !upward && c.first_byte.get().is_none() {
            c.first_byte.set(Some(crate::clock::since_ms(started)));
        }
        while lent.held.get() > 0 {
            let left = lent.held.get();
            match dst
                .async_io(Interest::WRITABLE, || splice(pr, None, dst, None, left, flags).map_err(io::Error::from))
                .await
            {
                Ok(m) => {
                    lent.held.set(left - m);
                    counter.set(counter.get() + m as u64);
                    c.moved();
                }
                Err(e) => return send_failed(&e, upward),
            }
        }
    }
}
