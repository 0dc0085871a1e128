//! An in-memory client, for driving the HTTP/1 connection loop
//! (`h1::conn::serve`) without a socket: the `h1_conn` fuzzing target
//! (`crate::fuzzing::h1_conn`). It stands behind [`Sock::Mem`]
//! (`super::sock`), the enum every connection already reads and writes
//! through, so the loop under test is the one a TCP or TLS client gets,
//! unchanged; only the byte transport differs.
//!
//! The client has sent everything up front: a read returns the next bytes
//! up to the end of the client's current send (so the connection sees the
//! input in the pieces chosen), and end of file once all is read. Nothing
//! ever waits: a connection that still does, with all its input readable
//! or at end of file, is stuck. Writes are collected; after the server
//! shuts down its side (a lingering close) they fail as a socket's would,
//! and are counted.
//!
//! [`Sock::Mem`]: super::sock::Sock::Mem

use std::cell::RefCell;
use std::io;
use std::rc::Rc;

/// The client side, shared between the connection's socket and the test.
#[derive(Debug, Default)]
pub struct MemPeer {
    input: Vec<u8>,
    at: usize,
    /// Where each of the client's sends ends, ascending: one read never
    /// returns bytes of two sends.
    sends: Vec<usize>,
    /// Everything the server wrote.
    pub output: Vec<u8>,
    /// The server shut down its side of the connection.
    pub shut: bool,
    /// Bytes the server tried to write after that.
    pub late_writes: usize,
}

/// What [`Sock::Mem`](super::sock::Sock::Mem) holds.
pub type MemSock = Rc<RefCell<MemPeer>>;

impl MemPeer {
    /// A client that sends `input` in pieces ending at `sends` (offsets
    /// inside it, ascending).
    pub fn new(input: Vec<u8>, sends: Vec<usize>) -> MemSock {
        Rc::new(RefCell::new(MemPeer { input, sends, ..MemPeer::default() }))
    }

    /// All input read.
    pub fn at_eof(&self) -> bool {
        self.at == self.input.len()
    }

    /// A read into the spare capacity of `buf`: 0 at end of file (or, as
    /// recv(2), with no room).
    pub fn read(&mut self, buf: &mut Vec<u8>) -> usize {
        let end = self.sends.iter().copied().find(|&s| s > self.at).unwrap_or(self.input.len());
        let n = (end.min(self.input.len()) - self.at).min(buf.capacity() - buf.len());
        buf.extend_from_slice(&self.input[self.at..self.at + n]);
        self.at += n;
        n
    }

    pub fn write(&mut self, data: &[u8]) -> io::Result<()> {
        if self.shut {
            self.late_writes += data.len();
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.output.extend_from_slice(data);
        Ok(())
    }
}
