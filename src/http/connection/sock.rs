//! A client socket that joins the event loop only when it has to wait.
//!
//! Accepted sockets start unregistered: the request of a fresh connection
//! is already in the kernel buffer (listeners use TCP_DEFER_ACCEPT, see
//! `listener::tune`), so the first read, the response
//! write and (for `keepalive_timeout 0` or `Connection: close`) the close
//! happen without the two `epoll_ctl` calls and the extra `epoll_wait` round
//! a registered socket costs. The first `EAGAIN` registers it with tokio and
//! from then on it is an ordinary async socket.

use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::time::Duration;

use tokio::net::TcpStream;

use super::io as sio;
use rustix::net::SendFlags;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::server::TlsStream;

/// nginx's lingering_timeout and lingering_time defaults.
const LINGERING_TIMEOUT: Duration = Duration::from_secs(5);
const LINGERING_TIME: Duration = Duration::from_secs(30);
/// Stop draining a client that keeps sending.
const LINGERING_MAX: usize = 1 << 20;

/// Anything a tunnel can copy to and from.
pub trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Io for T {}

pub enum Sock {
    Raw(std::net::TcpStream),
    Reg(TcpStream),
    /// After a TLS handshake: always registered, never parked, no sendfile.
    Tls(Box<TlsStream<crate::tls::reneg::Watched>>),
    /// An in-memory client (`super::mem`), for fuzzing the connection
    /// loop: reads and writes never wait, no sendfile, no tunnel.
    Mem(super::mem::MemSock),
    Closed,
}

fn would_block(e: &rustix::io::Errno) -> bool {
    *e == rustix::io::Errno::AGAIN
}

impl Sock {
    pub fn is_raw(&self) -> bool {
        matches!(self, Sock::Raw(_))
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Sock::Tls(_))
    }

    /// The tokio socket, registering on first use.
    pub fn registered(&mut self) -> io::Result<&TcpStream> {
        if let Sock::Raw(_) = self
            && let Sock::Raw(s) = std::mem::replace(self, Sock::Closed)
        {
            *self = Sock::Reg(TcpStream::from_std(s)?);
        }
        match self {
            Sock::Reg(t) => Ok(t),
            _ => Err(io::Error::new(io::ErrorKind::NotConnected, "socket closed")),
        }
    }

    /// A read that never waits: None when nothing is there yet.
    pub fn try_read_now(&mut self, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
        let Sock::Raw(s) = self else { return None };
        // recv(2) rather than read(2): the socket call skips the VFS layer.
        match rustix::net::recv(s.as_fd(), rustix::buffer::spare_capacity(buf), rustix::net::RecvFlags::empty()) {
            Ok((n, _)) => Some(Ok(n)),
            Err(e) if would_block(&e) => None,
            Err(e) => Some(Err(e.into())),
        }
    }

    /// A read that never waits, registered or not: None when it would block.
    pub fn try_read(&mut self, buf: &mut Vec<u8>) -> Option<io::Result<usize>> {
        match self {
            Sock::Raw(_) => self.try_read_now(buf),
            Sock::Reg(s) => sio::try_read(s, buf),
            Sock::Tls(t) => {
                // One poll with a no-op waker: decrypted data already
                // buffered, or a record that arrived, without waiting.
                let fut = std::pin::pin!(t.read_buf(buf));
                match fut.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
                    std::task::Poll::Ready(r) => Some(r),
                    std::task::Poll::Pending => None,
                }
            }
            Sock::Mem(m) => Some(Ok(m.borrow_mut().read(buf))),
            Sock::Closed => Some(Err(io::Error::new(io::ErrorKind::NotConnected, "socket closed"))),
        }
    }

    pub async fn read_some(&mut self, buf: &mut Vec<u8>) -> io::Result<usize> {
        if let Sock::Tls(t) = self {
            return t.read_buf(buf).await;
        }
        if let Sock::Mem(m) = self {
            return Ok(m.borrow_mut().read(buf));
        }
        if let Some(r) = self.try_read_now(buf) {
            return r;
        }
        sio::read_some(self.registered()?, buf).await
    }

    pub async fn readable(&mut self) -> io::Result<()> {
        if let Sock::Tls(t) = self {
            let (tcp, conn) = t.get_mut();
            // Plaintext may already be decrypted and waiting in rustls.
            match conn.process_new_packets() {
                Ok(st) if st.plaintext_bytes_to_read() > 0 => return Ok(()),
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
            return sio::read_ready(tcp.tcp()).await;
        }
        if let Sock::Mem(_) = self {
            // Input or end of file: always readable.
            return Ok(());
        }
        sio::read_ready(self.registered()?).await
    }

    /// Resolves once the peer has closed the connection (or it failed),
    /// judged by peeking, so nothing is consumed; a peer that sends more
    /// (a pipelined request, a TLS record) never resolves it. What nginx's
    /// EPOLLRDHUP check gives it while it waits for an origin.
    pub async fn peer_closed(&mut self) {
        let tcp = match self {
            Sock::Mem(m) => {
                if !m.borrow().at_eof() {
                    std::future::pending::<()>().await;
                }
                return;
            }
            Sock::Tls(t) => t.get_ref().0.tcp(),
            other => match other.registered() {
                Ok(t) => t,
                Err(_) => return,
            },
        };
        // The socket's single reader slot, then a peek that clears readiness
        // when nothing is there (cheaper than `peek`'s waiter list).
        loop {
            if sio::read_ready(tcp).await.is_err() {
                return;
            }
            let mut b = [0u8; 1];
            let peeked = tcp.try_io(tokio::io::Interest::READABLE, || {
                rustix::net::recv(tcp.as_fd(), &mut b, rustix::net::RecvFlags::PEEK)
                    .map(|(n, _)| n)
                    .map_err(io::Error::from)
            });
            match peeked {
                Ok(0) => return,
                Ok(_) => std::future::pending().await,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }

    pub async fn write_all(&mut self, data: &[u8], timeout: Duration) -> io::Result<()> {
        self.write_all_flags(data, timeout, false).await
    }

    /// With `last`, the kernel is told no more data follows (MSG_MORE), so
    /// closing right after sends the response and the FIN in one segment.
    pub async fn write_all_flags(&mut self, mut data: &[u8], timeout: Duration, last: bool) -> io::Result<()> {
        if let Sock::Tls(t) = self {
            let write = async {
                t.write_all(data).await?;
                t.flush().await
            };
            return crate::clock::timeout(timeout, write)
                .await
                .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "send timed out")));
        }
        if let Sock::Mem(m) = self {
            return m.borrow_mut().write(data);
        }
        let flags = if last { SendFlags::MORE } else { SendFlags::empty() };
        if let Sock::Raw(s) = self {
            while !data.is_empty() {
                match rustix::net::send(s.as_fd(), data, flags) {
                    Ok(n) => data = &data[n..],
                    Err(e) if would_block(&e) => break,
                    Err(e) => return Err(e.into()),
                }
            }
            if data.is_empty() {
                return Ok(());
            }
        }
        sio::write_all_flags(self.registered()?, data, timeout, flags).await
    }

    /// nginx's lingering close: after a response that leaves unread input
    /// (a body, pipelined bytes), send FIN first and drain what the client
    /// still sends, so closing does not reset the connection and destroy the
    /// response in flight.
    pub async fn linger(&mut self, scratch: &mut Vec<u8>) {
        let fd_ok = match self {
            Sock::Raw(s) => rustix::net::shutdown(s.as_fd(), rustix::net::Shutdown::Write).is_ok(),
            Sock::Reg(s) => rustix::net::shutdown(s.as_fd(), rustix::net::Shutdown::Write).is_ok(),
            Sock::Tls(t) => crate::clock::timeout(LINGERING_TIMEOUT, t.shutdown()).await.is_ok_and(|r| r.is_ok()),
            Sock::Mem(m) => {
                m.borrow_mut().shut = true;
                true
            }
            Sock::Closed => false,
        };
        if !fd_ok {
            return;
        }
        let total = tokio::time::Instant::now() + LINGERING_TIME;
        let mut drained = 0usize;
        while drained < LINGERING_MAX {
            scratch.clear();
            if scratch.capacity() < 4096 {
                scratch.reserve(4096);
            }
            let deadline = total.min(tokio::time::Instant::now() + LINGERING_TIMEOUT);
            match tokio::time::timeout_at(deadline, self.read_some(scratch)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => return,
            }
        }
    }

    pub async fn send_file(
        &mut self,
        file: &std::fs::File,
        mut offset: u64,
        mut len: u64,
        t: Duration,
        max_chunk: usize,
    ) -> io::Result<()> {
        if let Sock::Mem(m) = self {
            let mut data = Vec::new();
            sio::pread_into(file, offset, len, &mut data)?;
            return m.borrow_mut().write(&data);
        }
        let most = sio::chunk_limit(max_chunk);
        if let Sock::Raw(s) = self {
            // Only the first call, before the socket is registered: a body
            // that does not fit goes on below, a chunk at a time.
            let chunk = len.min(most) as usize;
            match rustix::fs::sendfile(s.as_fd(), file.as_fd(), Some(&mut offset), chunk) {
                Ok(0) if chunk > 0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file was truncated")),
                Ok(n) => len -= n as u64,
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e.into()),
            }
            if len == 0 {
                return Ok(());
            }
        }
        sio::send_file(self.registered()?, file, offset, len, t, max_chunk).await
    }

    /// The socket as a tokio stream (registering a raw one), for tunnels.
    pub fn as_io(&mut self) -> Option<&mut dyn Io> {
        if let Sock::Raw(_) = self {
            self.registered().ok()?;
        }
        match self {
            Sock::Reg(s) => Some(s),
            Sock::Tls(t) => Some(t.as_mut()),
            _ => None,
        }
    }

    pub fn set_nodelay(&self) {
        let _ = match self {
            Sock::Raw(s) => s.set_nodelay(true),
            Sock::Reg(s) => s.set_nodelay(true),
            Sock::Tls(t) => t.get_ref().0.tcp().set_nodelay(true),
            Sock::Mem(_) | Sock::Closed => Ok(()),
        };
    }

    /// Back to a plain socket (for parking).
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        match self {
            Sock::Raw(s) => Ok(s),
            Sock::Reg(s) => s.into_std(),
            Sock::Tls(_) | Sock::Mem(_) | Sock::Closed => {
                Err(io::Error::new(io::ErrorKind::NotConnected, "not a plain socket"))
            }
        }
    }

    /// Sends what rustls has queued (the `no_renegotiation` alert of a
    /// refused renegotiation) without ending the session: nginx sends no
    /// close_notify after a renegotiation either.
    pub async fn flush_alert(&mut self) {
        if let Sock::Tls(t) = self {
            let _ = crate::clock::timeout(std::time::Duration::from_millis(500), t.flush()).await;
        }
    }

    /// Ends a TLS session with close_notify before the socket closes, as
    /// nginx's SSL_shutdown does; a no-op for plain sockets.
    pub async fn close_notify(&mut self) {
        if let Sock::Tls(t) = self {
            let _ = crate::clock::timeout(std::time::Duration::from_millis(500), t.shutdown()).await;
        }
    }
}
