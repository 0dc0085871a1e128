//! The listening side of datagram sessions: a UDP socket (`listen
//! ADDR:PORT udp`) or a unix-domain datagram socket (`listen unix:PATH
//! udp`). `udp` reads, keys sessions and answers through this one type, so
//! the session code is the same for both; only who a datagram came from
//! differs ([`Client`]).
//!
//! A unix datagram client is known by the name it bound: a path, or a name
//! in Linux's abstract namespace. One that bound none (an unnamed socket)
//! can send but cannot be answered, as with nginx: its datagrams still
//! make a session (all unnamed senders share one, as their addresses are
//! equal), and the replies to it are dropped.

use std::io;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;

use tokio::io::Interest;
use tokio::net::{UdpSocket, UnixDatagram};

use crate::config::family::Socket;

/// A listening datagram socket, registered with the worker's event loop.
pub enum Listening {
    Ip(UdpSocket),
    Unix(UnixDatagram),
}

/// Who sent a datagram: the key of its session, and where replies go.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Client {
    Ip(SocketAddr),
    /// The bound name of a unix datagram client: its path's bytes, or a
    /// NUL then the name for the abstract namespace (`sun_path`'s own
    /// spelling); `None` for an unnamed socket.
    Unix(Option<Vec<u8>>),
}

impl Client {
    /// The address a session's variables and access rules read: the IP
    /// peer, or the unix placeholder (the session marks its client as a
    /// unix one, so `$remote_addr` is `unix:` as nginx gives it).
    pub fn addr(&self) -> SocketAddr {
        match self {
            Client::Ip(a) => *a,
            Client::Unix(_) => crate::listener::unix::PLACEHOLDER,
        }
    }

    pub fn is_unix(&self) -> bool {
        matches!(self, Client::Unix(_))
    }

    /// A unix client's name as nginx prints it after `unix:`: the path,
    /// or nothing for an abstract or unnamed socket (`ngx_sock_ntop`
    /// reads `sun_path` up to its first NUL).
    pub fn unix_name(&self) -> &[u8] {
        match self {
            Client::Unix(Some(n)) => n.split(|b| *b == 0).next().unwrap_or_default(),
            _ => &[],
        }
    }
}

impl Listening {
    /// Registers a worker's socket (a family's `Udp` or `UnixUdp`) with
    /// the running event loop.
    pub fn new(sock: Socket) -> io::Result<Listening> {
        match sock {
            Socket::Udp(u) => UdpSocket::from_std(u).map(Listening::Ip),
            Socket::UnixUdp(u) => UnixDatagram::from_std(u).map(Listening::Unix),
            Socket::Tcp(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, "not a datagram socket")),
        }
    }

    pub async fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, Client)> {
        match self {
            Listening::Ip(u) => u.recv_from(buf).await.map(|(n, a)| (n, Client::Ip(a))),
            Listening::Unix(u) => {
                let (n, a) = u.recv_from(buf).await?;
                let name = match (a.as_pathname(), a.as_abstract_name()) {
                    (Some(p), _) => Some(p.as_os_str().as_bytes().to_vec()),
                    (None, Some(n)) => Some([&[0u8][..], n].concat()),
                    (None, None) => None,
                };
                Ok((n, Client::Unix(name)))
            }
        }
    }

    /// Sends one datagram to `to`. tokio's unix `send_to` takes a path
    /// only; socket2's address also spells an abstract name, so the send
    /// goes through it on the registered descriptor.
    pub async fn send_to(&self, buf: &[u8], to: &Client) -> io::Result<usize> {
        match (self, to) {
            (Listening::Ip(u), Client::Ip(a)) => u.send_to(buf, *a).await,
            (Listening::Unix(u), Client::Unix(Some(name))) => {
                let addr = socket2::SockAddr::unix(std::ffi::OsStr::from_bytes(name))?;
                u.async_io(Interest::WRITABLE, || socket2::SockRef::from(u).send_to(buf, &addr)).await
            }
            _ => Err(io::Error::new(io::ErrorKind::AddrNotAvailable, "the client bound no address to reply to")),
        }
    }

    /// The address a datagram came in on, for a wildcard IP socket (the
    /// specific address's server answers); `own` otherwise.
    pub fn local(&self, own: SocketAddr) -> SocketAddr {
        match self {
            Listening::Ip(u) if own.ip().is_unspecified() => u.local_addr().unwrap_or(own),
            _ => own,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A named unix client is answered at its path, and an abstract one at
    /// its abstract name; an unnamed one is refused a reply.
    #[tokio::test(flavor = "current_thread")]
    async fn unix_clients_are_answered_by_name() {
        let dir = std::env::temp_dir().join(format!("sluice-udp-socket-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (lp, cp) = (dir.join("l.sock"), dir.join("c.sock"));
        let _ = (std::fs::remove_file(&lp), std::fs::remove_file(&cp));
        let l = std::os::unix::net::UnixDatagram::bind(&lp).expect("bind");
        l.set_nonblocking(true).expect("nonblocking");
        let l = Listening::new(Socket::UnixUdp(l)).expect("register");
        let mut buf = [0u8; 64];

        let c = std::os::unix::net::UnixDatagram::bind(&cp).expect("client");
        c.send_to(b"hi", &lp).expect("send");
        let (n, from) = l.recv_from(&mut buf).await.expect("recv");
        assert_eq!(&buf[..n], b"hi");
        assert_eq!(from, Client::Unix(Some(cp.as_os_str().as_bytes().to_vec())));
        l.send_to(b"back", &from).await.expect("reply");
        let n = c.recv(&mut buf).expect("client recv");
        assert_eq!(&buf[..n], b"back");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("sluice-udp-socket-{}", std::process::id());
        let abs = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let a = std::os::unix::net::UnixDatagram::bind_addr(&abs).expect("abstract");
        a.send_to(b"x", &lp).expect("send");
        let (_, from) = l.recv_from(&mut buf).await.expect("recv");
        l.send_to(b"y", &from).await.expect("reply to the abstract name");
        assert_eq!(a.recv(&mut buf).expect("abstract recv"), 1);

        let u = std::os::unix::net::UnixDatagram::unbound().expect("unbound");
        u.send_to(b"z", &lp).expect("send");
        let (_, from) = l.recv_from(&mut buf).await.expect("recv");
        assert_eq!(from, Client::Unix(None));
        assert!(l.send_to(b"no", &from).await.is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
