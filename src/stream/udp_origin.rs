//! The origin side of a datagram session: a UDP socket connected to an IP
//! peer, or a unix-domain datagram socket connected to `unix:PATH`
//! (`proxy_pass unix:/path;` in a `listen ... udp` server).
//!
//! A unix datagram socket that is not bound has no address, so an origin
//! could not answer it (`recvfrom` gives it an empty name). nginx 1.22
//! leaves it unbound, so its unix datagram origins can only receive; here
//! the socket is bound first to an address the kernel picks (Linux's
//! autobind: a unique name in the abstract namespace, nothing on disk),
//! which the origin's replies then come back to.

use std::net::SocketAddr;
use std::path::Path;

use tokio::net::{UdpSocket, UnixDatagram};

thread_local! {
    /// The worker's receive buffer for its sessions' origins: as large as
    /// the largest datagram (a worker is one thread, and `Origin::recv`
    /// holds it only between the read and the copy out).
    static BUF: std::cell::RefCell<Box<[u8]>> = std::cell::RefCell::new(vec![0u8; 65536].into_boxed_slice());
}

/// Runs `f` on the worker's receive buffer (`udp_inline` reads its
/// origins' answers into it too).
pub fn with_buf<R>(f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with_borrow_mut(|b| f(b))
}

pub enum Origin {
    Udp(UdpSocket),
    Unix(UnixDatagram),
}

impl Origin {
    /// A UDP socket connected to `peer` (connect(2) binds it to the
    /// wildcard address and a port of its own, as nginx's socket is: no
    /// bind(2) of ours, one system call less per session). Errors say
    /// which call failed, in nginx's words.
    pub fn udp(peer: SocketAddr) -> Result<Origin, String> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let family = if peer.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
        let err = |e: rustix::io::Errno| crate::process::signal::os_error(&std::io::Error::from(e));
        let fd =
            rustix::net::socket_with(family, SocketType::DGRAM, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC, None)
                .map_err(|e| format!("socket() failed ({})", err(e)))?;
        rustix::net::connect(&fd, &peer).map_err(|e| format!("connect() failed ({})", err(e)))?;
        let sock = UdpSocket::from_std(std::net::UdpSocket::from(fd)).map_err(|e| format!("socket() failed ({e})"))?;
        Ok(Origin::Udp(sock))
    }

    /// An autobound unix datagram socket connected to `path`.
    pub fn unix(path: &Path) -> Result<Origin, String> {
        use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
        let os = |e: std::io::Error| crate::process::signal::os_error(&e);
        let fd = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::DGRAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .map_err(|e| format!("socket() failed ({})", os(e.into())))?;
        let unnamed = SocketAddrUnix::new_unnamed();
        rustix::net::bind(&fd, &unnamed).map_err(|e| format!("bind() failed ({})", os(e.into())))?;
        let sock = UnixDatagram::from_std(std::os::unix::net::UnixDatagram::from(fd))
            .map_err(|e| format!("socket() failed ({})", os(e)))?;
        sock.connect(path).map_err(|e| format!("connect() to unix:{} failed ({})", path.display(), os(e)))?;
        Ok(Origin::Unix(sock))
    }

    /// The local end as nginx's "udp proxy LOCAL connected to" line shows
    /// it: the address the connected socket got, or `unix:` (nginx leaves
    /// its unix socket unnamed; this one's autobound name is abstract).
    pub fn local(&self) -> String {
        match self {
            Origin::Udp(u) => u.local_addr().map_or_else(|_| "unix:".to_string(), |a| a.to_string()),
            Origin::Unix(_) => "unix:".to_string(),
        }
    }

    pub async fn send(&self, d: &[u8]) -> std::io::Result<usize> {
        match self {
            Origin::Udp(u) => u.send(d).await,
            Origin::Unix(u) => u.send(d).await,
        }
    }

    /// The origin's next datagram, in a vector of its own size: read into
    /// the worker's one buffer room enough for the largest datagram, so a
    /// session (often one query and its answer) needs no 64 KB of its own.
    pub async fn recv(&self) -> std::io::Result<Vec<u8>> {
        use tokio::io::Interest;
        loop {
            // UDP waits for errors too, as tokio's own `UdpSocket::recv`:
            // an ICMP port unreachable leaves the socket in error, not
            // readable, and the session must see ECONNREFUSED at once (as
            // nginx's does). `try_io` takes one interest at a time.
            let interest = match self {
                Origin::Udp(u) => {
                    let ready = u.ready(Interest::READABLE | Interest::ERROR).await?;
                    if ready.is_readable() { Interest::READABLE } else { Interest::ERROR }
                }
                Origin::Unix(u) => {
                    u.readable().await?;
                    Interest::READABLE
                }
            };
            // No await while the buffer is borrowed: the worker's other
            // sessions find it free.
            let r: std::io::Result<Vec<u8>> = BUF.with_borrow_mut(|buf| {
                let n = match self {
                    Origin::Udp(u) => u.try_io(interest, || {
                        use std::os::fd::AsFd;
                        let (n, _) = rustix::net::recv(u.as_fd(), &mut buf[..], rustix::net::RecvFlags::empty())
                            .map_err(std::io::Error::from)?;
                        Ok(n)
                    }),
                    Origin::Unix(u) => u.try_recv(buf),
                }?;
                Ok(buf[..n].to_vec())
            });
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                r => return r,
            }
        }
    }
}
