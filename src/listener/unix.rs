//! `listen unix:PATH`: HTTP on a unix-domain stream socket, as nginx.
//!
//! The socket file is made when the address is bound (at start, or by the
//! reload that adds it) with mode 0666 as nginx leaves it, and removed
//! when sluice quits or stops, or when a reload drops the address
//! (nginx's `ngx_close_listening_sockets` and `ngx_init_cycle`). A file
//! left at the path refuses the bind with nginx's `bind() ... failed (98:
//! Address already in use)`, as nginx does. A crashed serving process
//! removes nothing: the master process holds the socket and hands it to
//! the next one.
//!
//! `listen unix:PATH udp` (stream) binds a datagram socket at the path,
//! with the same file lifecycle; it travels as its own type
//! (`UnixDatagram`), since its senders' addresses are paths.
//!
//! Past the bind, a unix-domain stream socket is a byte stream like TCP's: the
//! accept loop's `accept4`, the connection's reads, writes, `sendfile`,
//! `shutdown` and TLS are the same system calls. The listener and the
//! accepted sockets therefore travel in the same `std::net::TcpListener`
//! and `TcpStream` wrappers as TCP's (a descriptor wrapper, no check of
//! the family); the TCP-only calls made on them (`TCP_NODELAY`,
//! `TCP_INFO`, `getsockname` for a wildcard address) fail harmlessly and
//! are not made where their answer would matter. The client's address is
//! carried as `ConnInfo::unix` instead: `$remote_addr` is `unix:`,
//! `$server_addr` `unix:PATH`, and both ports are empty (nginx's
//! `ngx_sock_ntop` for `AF_UNIX`).

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;

use socket2::{Domain, SockAddr, Socket, Type};

/// What a unix listen group's `addr` holds: never bound, and skipped
/// wherever addresses are matched.
pub const PLACEHOLDER: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));

/// `sun_path`'s size on Linux, with its terminating NUL.
const SUN_PATH: usize = 108;

/// The path of `listen unix:PATH`, checked as nginx's
/// `ngx_parse_unix_domain_url`; an error is nginx's `listen` message.
pub fn listen_path(path: &str) -> Result<Arc<str>, String> {
    let err = |what: &str| format!("{what} in \"unix:{path}\" of the \"listen\" directive");
    if path.is_empty() {
        return Err(err("no path in the unix domain socket"));
    }
    if path.len() + 1 > SUN_PATH {
        return Err(err("too long path in the unix domain socket"));
    }
    Ok(Arc::from(path))
}

/// A listening unix-domain socket at `path`, mode 0666 (nginx chmods it
/// so that every local user's client may connect), non-blocking.
pub fn bind(path: &str, backlog: i32, rcvbuf: Option<i32>, sndbuf: Option<i32>) -> io::Result<TcpListener> {
    let s = bound(Type::STREAM, path, rcvbuf, sndbuf, Some(backlog))?;
    // The descriptor is a stream socket: see the module's comment for why
    // it travels as a TcpListener.
    Ok(TcpListener::from(std::os::fd::OwnedFd::from(s)))
}

/// A bound unix datagram socket at `path` (`listen unix:PATH udp`), mode
/// 0666 as the stream one, non-blocking. Its file lives as the stream
/// socket's does (see the module's comment): the listener set removes it.
pub fn bind_datagram(path: &str, rcvbuf: Option<i32>, sndbuf: Option<i32>) -> io::Result<UnixDatagram> {
    let s = bound(Type::DGRAM, path, rcvbuf, sndbuf, None)?;
    Ok(UnixDatagram::from(std::os::fd::OwnedFd::from(s)))
}

/// A socket of type `ty` bound at `path` with its buffer sizes, mode
/// 0666, listening with `backlog` when given, non-blocking.
fn bound(ty: Type, path: &str, rcvbuf: Option<i32>, sndbuf: Option<i32>, backlog: Option<i32>) -> io::Result<Socket> {
    let s = Socket::new(Domain::UNIX, ty, None)?;
    if let Some(n) = rcvbuf {
        s.set_recv_buffer_size(n.max(0) as usize)?;
    }
    if let Some(n) = sndbuf {
        s.set_send_buffer_size(n.max(0) as usize)?;
    }
    s.bind(&SockAddr::unix(path)?)?;
    let ready =
        chmod_0666(path).and_then(|()| backlog.map_or(Ok(()), |b| s.listen(b))).and_then(|()| s.set_nonblocking(true));
    if let Err(e) = ready {
        // The file this call made goes with the socket.
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(s)
}

fn chmod_0666(path: &str) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
        .map_err(|e| io::Error::new(e.kind(), format!("chmod() \"{path}\" failed ({e})")))
}

/// Removes the socket file of an address sluice no longer listens on,
/// logging a failure at `emerg` with nginx's wording.
pub fn remove(path: &str) {
    if let Err(e) = std::fs::remove_file(path) {
        let n = e.raw_os_error().unwrap_or(0);
        crate::log_error!(
            crate::log::error::Level::Emerg,
            "unlink() \"{}\" failed ({}: {})",
            path,
            n,
            crate::process::signal::strerror(n)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn paths_are_checked_as_nginx() {
        assert!(listen_path("").is_err());
        assert!(listen_path(&"a".repeat(107)).is_ok());
        let long = listen_path(&"a".repeat(108)).unwrap_err();
        assert!(long.starts_with("too long path in the unix domain socket"), "{long}");
    }

    /// The socket is made with mode 0666, accepts through the same
    /// wrapper as TCP's, and a second bind at the path is refused while
    /// the file is there.
    #[test]
    fn binds_accepts_and_refuses_a_taken_path() {
        let dir = std::env::temp_dir().join(format!("sluice-unix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("s.sock");
        let p = path.to_str().expect("utf-8");
        let _ = std::fs::remove_file(&path);
        let l = bind(p, 16, None, None).expect("bind");
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        assert_eq!(mode, 0o666);
        let mut c = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        c.write_all(b"ping").expect("write");
        l.set_nonblocking(false).expect("blocking");
        // std's accept refuses a unix peer address; the worker's accept
        // loop takes the descriptor alone, as socket2 does here.
        let (a, _) = socket2::SockRef::from(&l).accept().expect("accept");
        let mut a = std::net::TcpStream::from(a);
        let mut buf = [0u8; 4];
        a.read_exact(&mut buf).expect("read");
        assert_eq!(&buf, b"ping");
        let again = bind(p, 16, None, None).expect_err("taken");
        assert_eq!(again.raw_os_error(), Some(libc::EADDRINUSE));
        assert!(path.exists(), "a refused bind leaves the live socket's file");
        remove(p);
        assert!(!path.exists());
        let _ = std::fs::remove_dir(&dir);
    }
}
