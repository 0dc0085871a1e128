//! Socket I/O helpers on tokio's readiness model, tuned for syscall count:
//! a short read clears read readiness (the socket is drained), so the next
//! wait goes straight to epoll instead of a read that returns EAGAIN.

use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use tokio::io::Interest;
use tokio::net::TcpStream;

/// Waits for read readiness through the socket's single reader slot, which
/// is cheaper than `readable()`'s waiter list; each connection has only one
/// task waiting on it.
pub async fn read_ready(stream: &TcpStream) -> io::Result<()> {
    std::future::poll_fn(|cx| stream.poll_read_ready(cx)).await
}

pub async fn write_ready(stream: &TcpStream) -> io::Result<()> {
    std::future::poll_fn(|cx| stream.poll_write_ready(cx)).await
}

/// One read attempt without waiting (None: it would block); a short read
/// clears readiness as in `read_some`.
pub fn try_read(stream: &TcpStream, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
    let want = buf.capacity() - buf.len();
    let mut got = 0usize;
    let r = stream.try_io(Interest::READABLE, || {
        let flags = rustix::net::RecvFlags::empty();
        let (n, _) = rustix::net::recv(stream.as_fd(), rustix::buffer::spare_capacity(&mut *buf), flags)?;
        got = n;
        if n > 0 && n < want {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match r {
        Ok(n) => Some(Ok(n)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => (got > 0).then_some(Ok(got)),
        Err(e) => Some(Err(e)),
    }
}

/// Reads into the spare capacity of `buf` (which must have some), waiting
/// for readiness as needed.
pub async fn read_some(stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    loop {
        read_ready(stream).await?;
        if let Some(r) = try_read(stream, buf) {
            return r;
        }
    }
}

/// Writes all of `data`, waiting at most `timeout` for each stall
/// (nginx's send_timeout is between two successive writes).
pub async fn write_all(stream: &TcpStream, data: &[u8], timeout: Duration) -> io::Result<()> {
    write_all_flags(stream, data, timeout, rustix::net::SendFlags::empty()).await
}

/// `write_all` with send(2) flags (MSG_MORE before a close, so the FIN
/// rides on the last data segment).
pub async fn write_all_flags(
    stream: &TcpStream,
    mut data: &[u8],
    timeout: Duration,
    flags: rustix::net::SendFlags,
) -> io::Result<()> {
    while !data.is_empty() {
        let r = stream
            .try_io(Interest::WRITABLE, || rustix::net::send(stream.as_fd(), data, flags).map_err(io::Error::from));
        match r {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                crate::clock::timeout(timeout, write_ready(stream)).await.map_err(|_| timed_out())??;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "timed out")
}

/// `sendfile(2)` of `len` bytes from `offset`, waiting for writability
/// between partial sends.
pub async fn send_file(
    stream: &TcpStream,
    file: &std::fs::File,
    mut offset: u64,
    mut len: u64,
    timeout: Duration,
    max_chunk: usize,
) -> io::Result<()> {
    let most = chunk_limit(max_chunk);
    while len > 0 {
        let chunk = len.min(most) as usize;
        let mut sent = 0usize;
        let r = stream.try_io(Interest::WRITABLE, || {
            let n = rustix::fs::sendfile(stream.as_fd(), file.as_fd(), Some(&mut offset), chunk)?;
            sent = n;
            if n > 0 && n < chunk {
                // The socket buffer is full: clear readiness now instead of
                // learning it from one more call that returns EAGAIN.
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(n)
        });
        len -= sent as u64;
        match r {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file was truncated")),
            // A whole chunk went out and more follows: let the worker's
            // other connections run first, as nginx posts the write event
            // after sendfile_max_chunk. Without it one fast client's
            // sendfile ran on for tens of MB while every other connection
            // of the worker waited (and their clients' buffers ran dry).
            Ok(_) if len > 0 => tokio::task::yield_now().await,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if len > 0 {
                    crate::clock::timeout(timeout, write_ready(stream)).await.map_err(|_| timed_out())??;
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The most one sendfile call sends: `sendfile_max_chunk`, 0 meaning no
/// limit (then 1 GB, the kernel's own cap being near 2 GB).
pub fn chunk_limit(max_chunk: usize) -> u64 {
    if max_chunk == 0 { 1 << 30 } else { max_chunk as u64 }
}

/// Positional read of a whole range into `out` (for small bodies that go
/// out with the header in one write).
pub fn pread_into(file: &std::fs::File, mut offset: u64, len: u64, out: &mut Vec<u8>) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let start = out.len();
    out.resize(start + len as usize, 0);
    let mut pos = start;
    while pos < out.len() {
        let n = file.read_at(&mut out[pos..], offset)?;
        if n == 0 {
            out.truncate(start);
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file was truncated"));
        }
        pos += n;
        offset += n as u64;
    }
    Ok(())
}
