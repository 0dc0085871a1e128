//! Moving a session's bytes both ways, in the session's own task (the two
//! directions are two futures polled together: no task per read).
//!
//! Plain TCP to plain TCP without rate limits copies through the worker's
//! one buffer and moves to `splice(2)` once a direction proves bulky (see
//! `splice`): the kernel moves socket to pipe to socket, and the bytes
//! never enter the worker's memory.
//! Anything else (TLS on either side, a unix-socket origin, rates) copies
//! through a `proxy_buffer_size` buffer per direction.
//!
//! As nginx without `proxy_half_close`, the session ends when either side
//! has closed and what it sent is passed on; `proxy_timeout` is the
//! longest either side may stay silent.

use std::cell::Cell;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// One direction's outcome and counters.
pub struct Counters {
    /// Client to origin.
    pub up: Cell<u64>,
    /// Origin to client.
    pub down: Cell<u64>,
    /// Milliseconds from the origin's connect to its first byte.
    pub first_byte: Cell<Option<u64>>,
    /// When either side last moved (the monotonic clock).
    pub active: Cell<std::time::Instant>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters::new()
    }
}

impl Counters {
    pub fn new() -> Counters {
        Counters {
            up: Cell::new(0),
            down: Cell::new(0),
            first_byte: Cell::new(None),
            active: Cell::new(crate::clock::mono()),
        }
    }

    pub(super) fn moved(&self) {
        self.active.set(crate::clock::mono());
    }
}

/// How the relay ended, with what nginx's lines about it need: which
/// side, and whether reading from it or sending to it failed.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// A side closed (and what it sent went through): the origin when
    /// `upstream` (nginx's "upstream disconnected"). With half-close, the
    /// side that closed last.
    Closed {
        upstream: bool,
    },
    TimedOut,
    /// Reading from (`sending` false) or sending to a side failed; the
    /// message in nginx's words (`recv() failed (104: ...)`).
    Error {
        msg: String,
        upstream: bool,
        sending: bool,
    },
}

impl End {
    fn closed(&self) -> bool {
        matches!(self, End::Closed { .. })
    }

    /// What nginx's proxy was doing when it failed (`c->log->action`).
    pub fn action(upstream: bool, sending: bool) -> &'static str {
        match (sending, upstream) {
            (false, true) => "proxying and reading from upstream",
            (false, false) => "proxying and reading from client",
            (true, true) => "proxying and sending to upstream",
            (true, false) => "proxying and sending to client",
        }
    }
}

/// The errno of a failed call as nginx prints it: `104: Connection reset
/// by peer`.
fn os(e: impl Into<std::io::Error>) -> String {
    crate::process::signal::os_error(&e.into())
}

/// Runs the two directions to their ends (`half_close`): the first error,
/// else `Closed` naming the side that closed last.
async fn both_ends(up: impl std::future::Future<Output = End>, down: impl std::future::Future<Output = End>) -> End {
    let last = Cell::new(false);
    let mark = |r: End| {
        if let End::Closed { upstream } = r {
            last.set(upstream);
        }
        r
    };
    let (a, b) = tokio::join!(async { mark(up.await) }, async { mark(down.await) });
    match (a.closed(), b.closed()) {
        (true, true) => End::Closed { upstream: last.get() },
        (false, _) => a,
        (true, false) => b,
    }
}

/// Waits until neither side moved for `timeout`.
async fn idle(c: &Counters, timeout: Duration) {
    loop {
        let deadline = c.active.get() + timeout;
        if crate::clock::mono() >= deadline {
            return;
        }
        tokio::time::sleep_until(deadline.into()).await;
    }
}

/// Plain TCP both ways: splice(2). With `half_close` (nginx's
/// `proxy_half_close`), a side's end is passed on as a shutdown of the
/// other's writing and the session goes on until both ended.
pub async fn splice_both(
    client: &TcpStream,
    origin: &TcpStream,
    c: &Counters,
    timeout: Duration,
    started: std::time::Instant,
    half_close: bool,
    carry: (super::splice::Carry, super::splice::Carry),
) -> End {
    let (up, down) = carry;
    // Each direction's future is made where it is polled: made up front
    // and moved into one of the two selects, both would take room in the
    // session's task.
    if half_close {
        return tokio::select! {
            r = both_ends(
                direction(client, origin, c, true, started, half_close, up),
                direction(origin, client, c, false, started, half_close, down),
            ) => r,
            _ = idle(c, timeout) => End::TimedOut,
        };
    }
    tokio::select! {
        r = direction(client, origin, c, true, started, half_close, up) => r,
        r = direction(origin, client, c, false, started, half_close, down) => r,
        _ = idle(c, timeout) => End::TimedOut,
    }
}

/// One direction of `splice_both` (upward: from the client), its end
/// passed on with `half_close`.
async fn direction(
    src: &TcpStream,
    dst: &TcpStream,
    c: &Counters,
    upward: bool,
    started: std::time::Instant,
    half_close: bool,
    carry: super::splice::Carry,
) -> End {
    let r = super::splice::one(src, dst, c, upward, started, carry).await;
    if r.closed() && half_close {
        let _ = socket2::SockRef::from(dst).shutdown(std::net::Shutdown::Write);
    }
    r
}

/// Rates and buffer of the copying relay.
#[derive(Clone, Copy)]
pub struct CopyOpts {
    pub buffer: usize,
    pub upload_rate: u64,
    pub download_rate: u64,
    pub timeout: Duration,
    pub half_close: bool,
}

/// Any two byte streams: a buffer per direction.
pub async fn copy_both<A, B>(a: A, b: B, c: &Counters, o: CopyOpts, started: std::time::Instant) -> End
where
    A: AsyncRead + AsyncWrite,
    B: AsyncRead + AsyncWrite,
{
    let (mut ar, mut aw) = tokio::io::split(a);
    let (mut br, mut bw) = tokio::io::split(b);
    let end = {
        let up = async {
            let r = copy_one(&mut ar, &mut bw, c, true, o.buffer, o.upload_rate, started).await;
            if r.closed() && o.half_close {
                let _ = bw.shutdown().await;
            }
            r
        };
        let down = async {
            let r = copy_one(&mut br, &mut aw, c, false, o.buffer, o.download_rate, started).await;
            if r.closed() && o.half_close {
                let _ = aw.shutdown().await;
            }
            r
        };
        if o.half_close {
            tokio::select! {
                r = both_ends(up, down) => r,
                _ = idle(c, o.timeout) => End::TimedOut,
            }
        } else {
            tokio::select! {
                r = up => r,
                r = down => r,
                _ = idle(c, o.timeout) => End::TimedOut,
            }
        }
    };
    // A TLS client gets its close_notify.
    let _ = aw.shutdown().await;
    end
}

async fn copy_one<R, W>(
    r: &mut R,
    w: &mut W,
    c: &Counters,
    upward: bool,
    size: usize,
    rate: u64,
    started: std::time::Instant,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; size.max(1)];
    let since = crate::clock::mono();
    let mut total: u64 = 0;
    loop {
        let mut want = buf.len();
        if rate > 0 {
            // nginx's pacing: no more than the rate allows so far, and
            // wait out what was read ahead of it.
            let elapsed = crate::clock::since_ms(since);
            let allowed = (rate * elapsed / 1000 + rate).saturating_sub(total);
            if allowed == 0 {
                let ahead_ms = (total * 1000 / rate).saturating_sub(elapsed).max(1);
                tokio::time::sleep(Duration::from_millis(ahead_ms)).await;
                continue;
            }
            want = want.min(allowed as usize);
        }
        let n = match r.read(&mut buf[..want]).await {
            Ok(0) => return End::Closed { upstream: !upward },
            Ok(n) => n,
            Err(e) => {
                return End::Error { msg: format!("recv() failed ({})", os(e)), upstream: !upward, sending: false };
            }
        };
        total += n as u64;
        c.moved();
        if !upward && c.first_byte.get().is_none() {
            c.first_byte.set(Some(crate::clock::since_ms(started)));
        }
        if let Err(e) = w.write_all(&buf[..n]).await.and(w.flush().await) {
            return End::Error { msg: format!("send() failed ({})", os(e)), upstream: upward, sending: true };
        }
        let counter = if upward { &c.up } else { &c.down };
        counter.set(counter.get() + n as u64);
        c.moved();
    }
}
