//! sluice's own HTTP/2 connection loop (`connection/h2/own`) on arbitrary
//! client bytes: the preface, frames of every type in any order, header
//! blocks through HPACK into the same handler pipeline as a socket's, the
//! windows, the stream states and the limits.
//!
//! The loop is generic over `AsyncRead + AsyncWrite`, so the in-memory
//! client of `h1_conn` (`connection/mem`) stands behind a small adapter;
//! the worker, configuration and runtime are `h1_conn`'s (`conn::with`).
//! Input gets the preface and an empty SETTINGS frame put in front unless
//! its first byte's low bit is set, so most inputs reach the frames; its
//! second bit picks the listen with raised buffers, where frames past
//! 16 KiB are taken piecewise.
//!
//! Properties: no panic; the connection ends within the polls allowed
//! (the client never makes it wait: a loop still pending waits for nothing
//! it can get); what the server wrote is a sequence of whole frames, its
//! own SETTINGS first, no frame larger than 16384 bytes; every HEADERS
//! block it sent decodes with a decoder kept across the connection, as the
//! client's would, and starts with `:status`.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::show;
use crate::http::connection::h2::frame::{self, HEAD_LEN, Head};
use crate::http::connection::h2::hpack::decode::Decoder;
use crate::http::connection::mem::{MemPeer, MemSock};
use crate::http::handler::ctx::ConnInfo;
use crate::worker::ConnGuard;

const POLLS: usize = 10_000;

struct Io(MemSock);

impl AsyncRead for Io {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut v = Vec::with_capacity(buf.remaining());
        let n = self.0.borrow_mut().read(&mut v);
        buf.put_slice(&v[..n]);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Io {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.borrow_mut().write(data).map(|()| data.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.borrow_mut().shut = true;
        Poll::Ready(Ok(()))
    }
}

/// See the module comment.
pub fn h2_conn(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else { return };
    let mut input = Vec::with_capacity(rest.len() + 33);
    if flags & 1 == 0 {
        input.extend_from_slice(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        frame::write_settings(&mut input, &[]);
    }
    input.extend_from_slice(rest);
    let sends = super::Picks::new(data).cuts(input.len(), 32);
    let out = super::conn::with(|rt, w| {
        let peer = MemPeer::new(input.clone(), sends);
        // The second bit: the listen whose raised buffers allow frames
        // past 16 KiB.
        let group = if flags & 2 != 0 { w.cfg.http.listens.len() - 1 } else { 0 };
        let info = ConnInfo::new(SocketAddr::from(([192, 0, 2, 1], 40000)), w.cfg.http.listens[group].addr, 1);
        let _enter = rt.enter();
        crate::clock::mono_stale();
        let conn = crate::http::connection::h2::own::serve(Io(peer.clone()), info, group, ConnGuard::new(w.clone()));
        // Streams that wait (for a body, a window) run as local tasks.
        let local = tokio::task::LocalSet::new();
        let mut conn = std::pin::pin!(local.run_until(conn));
        let mut cx = Context::from_waker(Waker::noop());
        let done = (0..POLLS).any(|_| conn.as_mut().poll(&mut cx).is_ready());
        assert!(done, "the h2 connection still waits after {POLLS} polls: {}", show(&input));
        peer.borrow().output.clone()
    });
    if let Some(out) = out {
        check_output(&out, &input);
    }
}

fn check_output(out: &[u8], input: &[u8]) {
    let mut dec = Decoder::new(4096);
    let mut at = 0;
    let mut first = true;
    let mut block: Option<Vec<u8>> = None;
    while at < out.len() {
        assert!(out.len() - at >= HEAD_LEN, "a cut frame head at {at}: {}\nfor {}", show(&out[at..]), show(input));
        let head = Head::parse(out[at..at + HEAD_LEN].try_into().unwrap_or(&[0; HEAD_LEN]));
        assert!(head.len <= frame::MIN_MAX_FRAME, "a frame of {} bytes", head.len);
        let end = at + HEAD_LEN + head.len as usize;
        assert!(end <= out.len(), "a cut frame at {at}: {}\nfor {}", show(&out[at..]), show(input));
        let payload = &out[at + HEAD_LEN..end];
        if first {
            assert_eq!(head.kind, frame::SETTINGS, "the first frame is not SETTINGS");
            first = false;
        }
        match head.kind {
            frame::HEADERS | frame::CONTINUATION => {
                let b = block.get_or_insert_with(Vec::new);
                b.extend_from_slice(payload);
                if head.flags & frame::END_HEADERS != 0 {
                    let mut names = Vec::new();
                    let r = dec.decode(b, &mut |n, _, _| names.push(n.to_vec()));
                    assert!(r.is_ok(), "a header block of ours does not decode: {}\nfor {}", show(b), show(input));
                    assert!(
                        names.is_empty() || names[0] == b":status" || !names.iter().any(|n| n.starts_with(b":")),
                        "a response block without :status first\nfor {}",
                        show(input)
                    );
                    block = None;
                }
            }
            _ => assert!(block.is_none(), "a frame inside one of our header blocks\nfor {}", show(input)),
        }
        at = end;
    }
}
