//! The channel between the master process and the serving process: a
//! `SOCK_SEQPACKET` socket pair (message boundaries kept, descriptors
//! carried with `SCM_RIGHTS`), so the master can hold the listening sockets
//! the serving process uses and give them to the next serving process
//! after a crash.
//!
//! Messages, each one datagram:
//! - `L` and one key per line, with as many descriptors: part of a
//!   listener set (sets larger than [`BATCH`] take several);
//! - `E`: the set sent since the last `E` is complete;
//! - `R`: the serving process is serving (sent once, after its start);
//! - `P` and (length, path, length, content) records: what the master
//!   read from password FIFOs (`config::password_files`), sent to a new
//!   serving process before its sockets.
//!
//! The master sends the set it holds to a new serving process; the serving
//! process sends its set after starting and after each reload, so the
//! master holds what is in use now.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketFlags, SocketType,
};

/// Descriptors per datagram (the kernel allows 253).
const BATCH: usize = 64;
/// The largest datagram: 64 keys of at most ~60 bytes each.
const MAX_DATAGRAM: usize = 8192;

/// What arrived.
pub enum Msg {
    Ready,
    Passwords(Vec<(std::path::PathBuf, Vec<u8>)>),
    Listeners(Vec<(String, OwnedFd)>),
}

/// A connected pair, close-on-exec (the serving process's end is given as
/// its standard input, which exec keeps open).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, SocketFlags::CLOEXEC, None)?)
}

fn send(fd: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(BATCH))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !cmsg.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    let n = rustix::net::sendmsg(fd, &[IoSlice::new(bytes)], &mut cmsg, SendFlags::NOSIGNAL)?;
    if n != bytes.len() {
        return Err(io::Error::other("short send on the master's channel"));
    }
    Ok(())
}

/// Sends a whole listener set (`E` last).
pub fn send_listeners(fd: BorrowedFd<'_>, set: &[(String, BorrowedFd<'_>)]) -> io::Result<()> {
    for part in set.chunks(BATCH) {
        let mut text = String::from("L");
        for (k, _) in part {
            text.push('\n');
            text.push_str(k);
        }
        let fds: Vec<BorrowedFd<'_>> = part.iter().map(|(_, f)| *f).collect();
        send(fd, text.as_bytes(), &fds)?;
    }
    send(fd, b"E", &[])
}

/// Sends the password FIFOs' contents (nothing when there are none; the
/// records that do not fit one datagram are left out, and the serving
/// process then opens those files itself).
pub fn send_passwords(fd: BorrowedFd<'_>, list: &[(std::path::PathBuf, Vec<u8>)]) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    if list.is_empty() {
        return Ok(());
    }
    let mut bytes = vec![b'P'];
    for (path, content) in list {
        let path = path.as_os_str().as_bytes();
        if bytes.len() + 8 + path.len() + content.len() > MAX_DATAGRAM {
            continue;
        }
        for part in [path, content.as_slice()] {
            bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
            bytes.extend_from_slice(part);
        }
    }
    send(fd, &bytes, &[])
}

fn parse_passwords(mut b: &[u8]) -> Option<Vec<(std::path::PathBuf, Vec<u8>)>> {
    use std::os::unix::ffi::OsStrExt;
    let take = |b: &mut &[u8]| -> Option<Vec<u8>> {
        let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let v = b.get(4..4 + n)?.to_vec();
        *b = &b[4 + n..];
        Some(v)
    };
    let mut out = Vec::new();
    while !b.is_empty() {
        let path = take(&mut b)?;
        let content = take(&mut b)?;
        out.push((std::path::PathBuf::from(std::ffi::OsStr::from_bytes(&path)), content));
    }
    Some(out)
}

pub fn send_ready(fd: BorrowedFd<'_>) -> io::Result<()> {
    send(fd, b"R", &[])
}

/// Reassembles messages from datagrams.
#[derive(Default)]
pub struct Receiver {
    pending: Vec<(String, OwnedFd)>,
}

impl Receiver {
    /// Reads one datagram: a complete message, or None when it was part of
    /// a set. The peer closing is `UnexpectedEof`; on a non-blocking socket
    /// with nothing to read, `WouldBlock`. A datagram that does not parse
    /// (or whose descriptors do not match its keys) is `InvalidData` and
    /// its descriptors are closed.
    pub fn recv(&mut self, fd: impl AsFd) -> io::Result<Option<Msg>> {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(BATCH))];
        let mut cmsg = RecvAncillaryBuffer::new(&mut space);
        let r = rustix::net::recvmsg(fd, &mut [IoSliceMut::new(&mut buf)], &mut cmsg, RecvFlags::CMSG_CLOEXEC)?;
        let mut fds: Vec<OwnedFd> = Vec::new();
        for m in cmsg.drain() {
            if let RecvAncillaryMessage::ScmRights(got) = m {
                fds.extend(got);
            }
        }
        if r.bytes == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed message on the master's channel");
        if let Some(rest) = buf.get(..r.bytes).and_then(|b| b.strip_prefix(b"P"))
            && fds.is_empty()
        {
            return parse_passwords(rest).map(|l| Some(Msg::Passwords(l))).ok_or_else(bad);
        }
        let text = std::str::from_utf8(buf.get(..r.bytes).ok_or_else(bad)?).map_err(|_| bad())?;
        match text {
            "R" if fds.is_empty() => Ok(Some(Msg::Ready)),
            "E" if fds.is_empty() => Ok(Some(Msg::Listeners(std::mem::take(&mut self.pending)))),
            _ => {
                let keys: Vec<&str> = text.strip_prefix("L\n").ok_or_else(bad)?.split('\n').collect();
                if keys.len() != fds.len() {
                    return Err(bad());
                }
                self.pending.extend(keys.into_iter().map(String::from).zip(fds));
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn a_set_larger_than_a_batch_arrives_whole_with_its_sockets() {
        let (a, b) = pair().expect("pair");
        let socks: Vec<TcpListener> = (0..BATCH + 3).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind")).collect();
        let set: Vec<(String, BorrowedFd<'_>)> =
            socks.iter().enumerate().map(|(i, s)| (format!("key {i}"), s.as_fd())).collect();
        send_listeners(a.as_fd(), &set).expect("send");
        send_ready(a.as_fd()).expect("ready");
        let mut r = Receiver::default();
        let got = loop {
            if let Some(Msg::Listeners(v)) = r.recv(&b).expect("recv") {
                break v;
            }
        };
        assert_eq!(got.len(), socks.len());
        for (i, (k, fd)) in got.into_iter().enumerate() {
            assert_eq!(k, format!("key {i}"));
            let l = TcpListener::from(fd);
            assert_eq!(l.local_addr().expect("addr"), socks[i].local_addr().expect("addr"), "the same socket");
        }
        assert!(matches!(r.recv(&b).expect("recv"), Some(Msg::Ready)));
        drop(a);
        assert_eq!(r.recv(&b).err().map(|e| e.kind()), Some(io::ErrorKind::UnexpectedEof));
    }

    #[test]
    fn password_contents_arrive_as_sent() {
        let (a, b) = pair().expect("pair");
        let list = vec![("/etc/pw fifo".into(), b"one\ntwo\n".to_vec()), ("/x".into(), Vec::new())];
        send_passwords(a.as_fd(), &list).expect("send");
        match Receiver::default().recv(&b).expect("recv") {
            Some(Msg::Passwords(got)) => assert_eq!(got, list),
            _ => panic!("not the passwords"),
        }
    }

    #[test]
    fn garbage_is_refused() {
        let (a, b) = pair().expect("pair");
        let s = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut r = Receiver::default();
        for (text, with_fd) in [
            (&b"X"[..], false),
            (b"L\nk1\nk2", true),
            (b"R", true),
            (b"\xff", false),
            (b"P\0\0\0\x05ab", false),
            (b"P\0\0\0\x01a", false),
            (b"P\0\0\0\x01a\0\0\0\0", true),
        ] {
            let fds = if with_fd { vec![s.as_fd()] } else { vec![] };
            send(a.as_fd(), text, &fds).expect("send");
            assert_eq!(r.recv(&b).err().map(|e| e.kind()), Some(io::ErrorKind::InvalidData), "{text:?}");
        }
    }
}
