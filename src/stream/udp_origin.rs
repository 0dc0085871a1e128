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

pub enum Origin {
    Udp(UdpSocket),
    Unix(UnixDatagram),
}

impl Origin {
    /// A UDP socket on the wildcard address of `peer`'s family, connected
    /// to it. Errors say which call failed, in nginx's words.
    pub async fn udp(peer: SocketAddr) -> Result<Origin, String> {
        let bind: SocketAddr =
            if peer.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
        let os = |e: std::io::Error| crate::process::signal::os_error(&e);
        let sock = UdpSocket::bind(bind).await.map_err(|e| format!("socket() failed ({})", os(e)))?;
        sock.connect(peer).await.map_err(|e| format!("connect() failed ({})", os(e)))?;
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

    pub async fn recv(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Origin::Udp(u) => u.recv(buf).await,
            Origin::Unix(u) => u.recv(buf).await,
        }
    }
}
