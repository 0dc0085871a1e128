//! Client-initiated renegotiation ends the connection, as in nginx: its
//! info callback flags a handshake that starts after the first one, and
//! the next read fails ("SSL renegotiation disabled"). rustls refuses
//! renegotiation with a warning alert and carries on, which leaves a
//! client that waits for the new handshake (and a half-read request)
//! hanging until a timeout. So the accepted socket is read through
//! `Watched`, which follows the TLS record headers of what the client
//! sends: once the handshake is done, a record of the handshake content
//! type is a renegotiation (TLS 1.2 sends none otherwise, and TLS 1.3
//! encrypts every later handshake message as application data). The
//! record still reaches rustls, which queues the `no_renegotiation`
//! warning alert OpenSSL also sends (clients and scanners such as
//! testssl read a renegotiation as refused only when that alert
//! arrives); the read after it fails with `RenegotiationRefused`'s error,
//! and the connection flushes the alert as it closes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The TLS record content type of handshake messages.
const HANDSHAKE: u8 = 22;

/// An accepted TCP connection whose TLS records are followed.
#[derive(Debug)]
pub struct Watched {
    io: TcpStream,
    scan: Scan,
}

/// Where the reader is in the record stream.
#[derive(Debug, Default)]
struct Scan {
    /// The handshake is over: a handshake record now is a renegotiation.
    armed: bool,
    header: [u8; 5],
    have: usize,
    /// Bytes of the current record's body still to pass.
    skip: usize,
    tripped: bool,
}

impl Scan {
    /// Follows `bytes`; true once a renegotiation was seen.
    fn feed(&mut self, mut bytes: &[u8]) -> bool {
        while !bytes.is_empty() && !self.tripped {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let n = (5 - self.have).min(bytes.len());
            self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
            self.have += n;
            bytes = &bytes[n..];
            if self.have == 5 {
                self.have = 0;
                self.skip = usize::from(u16::from_be_bytes([self.header[3], self.header[4]]));
                self.tripped = self.armed && self.header[0] == HANDSHAKE;
            }
        }
        self.tripped
    }
}

/// The read error of a connection whose client tried to renegotiate.
#[derive(Debug)]
pub struct RenegotiationRefused;

impl std::fmt::Display for RenegotiationRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SSL renegotiation disabled")
    }
}

impl std::error::Error for RenegotiationRefused {}

/// Whether `e` is (or wraps) the refusal.
pub fn is_refusal(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<RenegotiationRefused>())
}

impl Watched {
    pub fn new(io: TcpStream) -> Watched {
        Watched { io, scan: Scan::default() }
    }

    /// The handshake is over: from now on a handshake record is refused.
    pub fn arm(&mut self) {
        self.scan.armed = true;
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.io
    }
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.scan.tripped {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, RenegotiationRefused)));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        // A renegotiation in these bytes still goes up, for rustls's
        // alert; the next read is refused.
        this.scan.feed(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, body: usize) -> Vec<u8> {
        let mut r = vec![kind, 3, 3, (body >> 8) as u8, body as u8];
        r.resize(5 + body, 0x16);
        r
    }

    #[test]
    fn a_handshake_record_after_the_handshake_trips() {
        let mut s = Scan::default();
        // The handshake's own records, then data, whatever the splits.
        let before = [record(22, 300), record(20, 1), record(22, 40)].concat();
        for chunk in before.chunks(7) {
            assert!(!s.feed(chunk));
        }
        s.arm_for_test();
        let after = [record(23, 1000), record(21, 2)].concat();
        for chunk in after.chunks(3) {
            assert!(!s.feed(chunk));
        }
        let reneg = record(22, 200);
        assert!(!s.feed(&reneg[..4]), "the header is not whole yet");
        assert!(s.feed(&reneg[4..]));
    }

    #[test]
    fn data_that_looks_like_handshake_bytes_does_not() {
        let mut s = Scan::default();
        s.arm_for_test();
        // Bodies full of 0x16 bytes: only headers count.
        let data = [record(23, 16384), record(23, 5)].concat();
        assert!(!s.feed(&data));
    }

    impl Scan {
        fn arm_for_test(&mut self) {
            self.armed = true;
        }
    }
}
