//! `$tcpinfo_rtt`, `$tcpinfo_rttvar`, `$tcpinfo_snd_cwnd` and
//! `$tcpinfo_rcv_space`: the kernel's `TCP_INFO` for the client socket,
//! read when a template asks (as nginx does, so a log line shows the
//! connection as it was when the request ended).

/// Which figure of `struct tcp_info`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Smoothed round-trip time, microseconds.
    Rtt,
    /// Its variance, microseconds.
    RttVar,
    /// Congestion window, segments.
    SndCwnd,
    /// Receive space, bytes.
    RcvSpace,
}

/// The figure for the socket `fd`; None when there is no socket (-1) or
/// the kernel refuses (nginx: the variable is not found).
pub fn read(fd: i32, field: Field) -> Option<u32> {
    if fd < 0 {
        return None;
    }
    let info = tcp_info(fd)?;
    Some(match field {
        Field::Rtt => info.tcpi_rtt,
        Field::RttVar => info.tcpi_rttvar,
        Field::SndCwnd => info.tcpi_snd_cwnd,
        Field::RcvSpace => info.tcpi_rcv_space,
    })
}

/// getsockopt(TCP_INFO). Neither rustix nor socket2 exposes it, so this
/// is a libc call: the kernel fills at most `len` bytes of a zeroed,
/// properly sized and aligned `tcp_info` owned by this frame, and reads
/// nothing else. A descriptor that is no longer a TCP socket (a request
/// logged after its connection closed) fails with an error, never UB.
fn tcp_info(fd: i32) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain integers; all-zero bytes are a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are valid for writes for the whole call and
    // `len` holds the buffer's size, which the kernel does not exceed.
    let rc = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut info).cast::<libc::c_void>(), &mut len)
    };
    (rc == 0).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn reads_a_connected_socket() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        let cwnd = read(s.as_raw_fd(), Field::SndCwnd).expect("tcp_info");
        assert!(cwnd >= 1, "a connected socket has a congestion window: {cwnd}");
        assert!(read(s.as_raw_fd(), Field::RcvSpace).is_some_and(|n| n > 0));
        drop(c);
        assert_eq!(read(-1, Field::Rtt), None);
        // A descriptor that is not a socket: refused, not garbage.
        let f = std::fs::File::open("/dev/null").expect("open");
        assert_eq!(read(f.as_raw_fd(), Field::Rtt), None);
    }
}
