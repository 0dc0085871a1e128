//! One connection's state that its loop and its streams' handles share
//! (one thread, so a `RefCell`): the stream table with each stream's
//! states, windows and queues, the connection windows, the HPACK encoder
//! and the output buffer every frame is appended to.
//!
//! Handles never write to the socket: they append frames to `out` (DATA
//! only as far as both windows allow, the rest queued on the stream) and
//! wake the loop, which writes everything gathered in one go.

use std::collections::{HashMap, VecDeque};
use std::task::Waker;

use bytes::Bytes;

use super::super::frame::{self, Code};
use super::super::hpack::Encoder;
use super::super::response::Head;
use crate::http::fields::Fields;

/// Something queued behind a stream's window.
pub enum Out {
    Data(Bytes, bool),
    /// Boxed: a queue entry stays small, and trailers are queued only
    /// behind DATA still waiting for window (`send_trailers`).
    Trailers(Box<Fields>),
}

#[derive(Default)]
pub struct Stream {
    /// What we may still send (the peer's window for this stream).
    pub send_window: i64,
    pub queue: VecDeque<Out>,
    pub queued: usize,
    /// The capacity the sender asked for (`reserve_capacity`).
    pub want: usize,
    pub tx_waker: Option<Waker>,
    /// END_STREAM queued (or sent with the head): nothing more may be sent.
    pub send_closed: bool,
    /// ... and everything queued went out.
    pub send_done: bool,
    pub recv: VecDeque<Bytes>,
    /// END_STREAM received.
    pub recv_closed: bool,
    pub trailers: Option<http::HeaderMap>,
    pub rx_waker: Option<Waker>,
    /// What the peer may still send on this stream.
    pub recv_window: i64,
    /// Bytes taken by the reader and not yet given back as window.
    pub unreleased: u32,
    /// The body is read whole into a buffer or file: the stream window
    /// was opened to 2^31-1 and is kept there (nginx's
    /// `no_flow_control`); the connection window still bounds memory.
    pub no_flow_control: bool,
    pub content_length: Option<u64>,
    pub received: u64,
    /// RST_STREAM sent or received, with its code.
    pub reset: Option<u32>,
    /// ... and it was ours: the peer's frames in flight are ignored.
    pub reset_by_us: bool,
    pub reset_waker: Option<Waker>,
    /// Live handles (`Respond`, `Tx`, `Rx`).
    pub refs: u32,
    pub rx_alive: bool,
    /// No longer counts against concurrency; frames for it are for a
    /// closed stream.
    pub closed: bool,
    /// A response head went out.
    pub head_sent: bool,
    /// `http2_chunk_size`: the largest DATA frame for this stream (0: the
    /// peer's frame size).
    pub chunk: usize,
    /// The DATA broke the declared content-length while a handler still
    /// read the body with no answer yet: the data went on, for the
    /// handler to answer 400 as nginx does; the stream then ends with
    /// RST_STREAM PROTOCOL_ERROR all the same (RFC 9113 8.1.1).
    pub bad_length: bool,
    /// Answered 400 for a malformed request, as nginx does; it ends with
    /// RST_STREAM PROTOCOL_ERROR too, as RFC 9113 8.1.1 requires.
    pub malformed: bool,
}

impl Stream {
    fn wake_all(&mut self) {
        for w in [self.tx_waker.take(), self.rx_waker.take(), self.reset_waker.take()].into_iter().flatten() {
            w.wake();
        }
    }
}

pub struct Conn {
    pub out: Vec<u8>,
    pub streams: HashMap<u32, Stream, StreamIds>,
    /// Open (not closed) streams.
    pub open: usize,
    pub send_window: i64,
    /// The connection window the peer has left, and what we give back.
    pub recv_window: i64,
    pub recv_target: u32,
    pub unreleased: u32,
    /// Our SETTINGS_INITIAL_WINDOW_SIZE for streams.
    pub stream_target: u32,
    pub peer_initial_window: u32,
    pub peer_max_frame: usize,
    pub enc: Encoder,
    pub block: Vec<u8>,
    pub loop_waker: Option<Waker>,
    /// The connection is gone: every handle's call fails.
    pub dead: bool,
    /// Streams we reset lately, whose late frames are ignored.
    pub recently_reset: VecDeque<u32>,
    pub recently_closed: VecDeque<u32>,
    pub local_resets: u64,
    pub prio: super::priority::Tree,
    /// The client acknowledged our SETTINGS: our stream window applies.
    pub settings_acked: bool,
}

const RECENT: usize = 64;

/// The stream table's hasher: one multiplication per lookup, where the
/// default SipHash cost a fifth of a small request's instructions (every
/// frame and every handle call looks its stream up). The table holds at
/// most the open streams and those whose handles are still alive, bounded
/// by `http2_max_concurrent_streams`, so chosen ids cannot make it slow.
#[derive(Clone, Copy, Default)]
pub struct StreamIds;

#[derive(Default)]
pub struct StreamIdHasher(u64);

impl std::hash::BuildHasher for StreamIds {
    type Hasher = StreamIdHasher;
    fn build_hasher(&self) -> StreamIdHasher {
        StreamIdHasher(0)
    }
}

impl std::hash::Hasher for StreamIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u32(&mut self, id: u32) {
        // Fibonacci hashing: the high bits, which the table uses too,
        // vary with every bit of the id.
        self.0 = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Conn {
    pub fn new(stream_target: u32, recv_target: u32) -> Conn {
        Conn {
            out: Vec::new(),
            streams: HashMap::with_hasher(StreamIds),
            open: 0,
            send_window: 65535,
            recv_window: recv_target as i64,
            recv_target,
            unreleased: 0,
            stream_target,
            peer_initial_window: 65535,
            peer_max_frame: frame::MIN_MAX_FRAME as usize,
            enc: Encoder::default(),
            block: Vec::new(),
            loop_waker: None,
            dead: false,
            recently_reset: VecDeque::new(),
            recently_closed: VecDeque::new(),
            local_resets: 0,
            prio: Default::default(),
            settings_acked: false,
        }
    }

    pub fn wake_loop(&mut self) {
        if let Some(w) = self.loop_waker.take() {
            w.wake();
        }
    }

    pub fn open_stream(&mut self, id: u32, end: bool, content_length: Option<u64>) {
        let s = Stream {
            send_window: self.peer_initial_window as i64,
            // Until our SETTINGS are acknowledged the client may assume
            // the protocol's default window.
            recv_window: if self.settings_acked {
                self.stream_target as i64
            } else {
                self.stream_target.max(frame::DEFAULT_WINDOW) as i64
            },
            recv_closed: end,
            content_length,
            refs: 0,
            ..Stream::default()
        };
        self.streams.insert(id, s);
        self.open += 1;
    }

    /// Ends the stream once both sides are done or it was reset; drops
    /// it once no handle is left.
    pub fn maybe_close(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        if !s.closed && (s.reset.is_some() || (s.send_done && s.recv_closed)) {
            s.closed = true;
            s.queue.clear();
            s.queued = 0;
            self.open -= 1;
            push_recent(&mut self.recently_closed, id);
            self.prio.forget(id);
        }
        if s.closed && s.refs == 0 {
            self.streams.remove(&id);
        }
    }

    /// RST_STREAM from us.
    pub fn reset(&mut self, id: u32, code: Code) {
        let Some(s) = self.streams.get_mut(&id) else {
            frame::write_rst_stream(&mut self.out, id, code);
            return;
        };
        if s.closed {
            return;
        }
        frame::write_rst_stream(&mut self.out, id, code);
        s.reset = Some(code as u32);
        s.reset_by_us = true;
        // Data the peer sent that nobody will read is its window again.
        let unread: usize = s.recv.drain(..).map(|b| b.len()).sum::<usize>() + s.unreleased as usize;
        s.unreleased = 0;
        s.wake_all();
        push_recent(&mut self.recently_reset, id);
        self.release_conn(unread);
        self.maybe_close(id);
        self.wake_loop();
    }

    /// A stream error on a stream already closed: only the frame.
    pub fn reset_closed(&mut self, id: u32, code: Code) {
        let open = self.streams.get(&id).is_some_and(|s| !s.closed);
        if open {
            self.reset(id, code);
        } else {
            frame::write_rst_stream(&mut self.out, id, code);
            self.wake_loop();
        }
    }

    /// RST_STREAM from the peer.
    pub fn peer_reset(&mut self, id: u32, code: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        if s.closed {
            return;
        }
        s.reset = Some(code);
        let unread: usize = s.recv.drain(..).map(|b| b.len()).sum::<usize>() + s.unreleased as usize;
        s.unreleased = 0;
        s.wake_all();
        self.release_conn(unread);
        self.maybe_close(id);
    }

    /// Connection window given back for bytes read or dropped.
    pub fn release_conn(&mut self, n: usize) {
        self.unreleased = self.unreleased.saturating_add(n as u32);
        if self.unreleased > 0 && self.unreleased >= self.recv_target / 2 {
            frame::write_window_update(&mut self.out, 0, self.unreleased);
            self.recv_window += self.unreleased as i64;
            self.unreleased = 0;
            self.wake_loop();
        }
    }

    pub fn release(&mut self, id: u32, n: usize) {
        self.release_conn(n);
        let target = self.stream_target;
        let Some(s) = self.streams.get_mut(&id) else { return };
        if s.recv_closed || s.closed {
            return;
        }
        if s.no_flow_control {
            if s.recv_window < (frame::MAX_WINDOW / 4) as i64 {
                self.open_window(id);
            }
            return;
        }
        s.unreleased = s.unreleased.saturating_add(n as u32);
        if s.unreleased > 0 && s.unreleased >= target / 2 {
            frame::write_window_update(&mut self.out, id, s.unreleased);
            s.recv_window += s.unreleased as i64;
            s.unreleased = 0;
            self.wake_loop();
        }
    }

    /// Opens a stream's window all the way (2^31-1), for a body read
    /// whole as it comes: nginx sends this WINDOW_UPDATE once it starts
    /// reading a buffered request body, rather than one per preread.
    pub fn open_window(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        if s.recv_closed || s.closed {
            return;
        }
        s.no_flow_control = true;
        let delta = frame::MAX_WINDOW as i64 - s.recv_window;
        if delta > 0 {
            frame::write_window_update(&mut self.out, id, delta as u32);
            s.recv_window = frame::MAX_WINDOW as i64;
            s.unreleased = 0;
            self.wake_loop();
        }
    }

    /// What a stream may send now.
    pub fn capacity(&self, id: u32) -> usize {
        let Some(s) = self.streams.get(&id) else { return 0 };
        let room = s.send_window.min(self.send_window) - s.queued as i64;
        room.max(0) as usize
    }

    /// A response head; not flow-controlled, so it goes out at once.
    pub fn send_head(&mut self, id: u32, head: &Head<'_, '_>, end: bool) -> bool {
        let s = match self.streams.get_mut(&id) {
            Some(s) if !s.closed && !s.send_closed => s,
            _ => return false,
        };
        s.head_sent = true;
        // The body's handle the caller makes now (`Respond::send_response`).
        s.refs += 1;
        let block = &mut self.block;
        block.clear();
        self.enc.begin(block);
        super::super::response::encode(head, &mut self.enc, block);
        frame::write_headers(&mut self.out, id, block, end, self.peer_max_frame);
        if end {
            self.end_sending(id);
        }
        self.wake_loop();
        true
    }

    fn end_sending(&mut self, id: u32) {
        let Some(s) = self.streams.get_mut(&id) else { return };
        s.send_closed = true;
        if s.queue.is_empty() {
            s.send_done = true;
            self.orphan_check(id);
            self.maybe_close(id);
        }
    }

    /// A stream whose handles are all gone and whose response went out
    /// but whose body the peer is still sending is reset with NO_ERROR
    /// (RFC 9113 8.1).
    fn orphan_check(&mut self, id: u32) {
        let Some(s) = self.streams.get(&id) else { return };
        if s.closed {
            return;
        }
        if s.bad_length || s.malformed {
            self.reset(id, Code::Protocol);
        } else if s.refs == 0 && s.send_done && !s.recv_closed {
            self.reset(id, Code::NoError);
        }
    }

    /// The trailers that end a stream: written at once when nothing of the
    /// stream waits for window (a gRPC call's status, as a rule), else
    /// queued behind it, since HPACK blocks must reach the peer in the
    /// order they were encoded.
    pub fn send_trailers(&mut self, id: u32, fields: Fields) -> bool {
        let Some(s) = self.streams.get_mut(&id) else { return false };
        if s.closed || s.send_closed {
            return false;
        }
        if !s.queue.is_empty() {
            return self.queue(id, Out::Trailers(Box::new(fields)));
        }
        s.send_closed = true;
        let mut block = std::mem::take(&mut self.block);
        block.clear();
        self.enc.begin(&mut block);
        super::super::response::encode_trailers(&fields, &mut self.enc, &mut block);
        frame::write_headers(&mut self.out, id, &block, true, self.peer_max_frame);
        self.block = block;
        // Nothing queued: this only marks the sending side done.
        self.flush_stream(id);
        self.wake_loop();
        true
    }

    pub fn queue(&mut self, id: u32, item: Out) -> bool {
        let Some(s) = self.streams.get_mut(&id) else { return false };
        if s.closed || s.send_closed {
            return false;
        }
        let end = match &item {
            Out::Data(b, end) => {
                s.queued += b.len();
                *end
            }
            Out::Trailers(_) => true,
        };
        s.queue.push_back(item);
        if end {
            s.send_closed = true;
        }
        self.flush_stream(id);
        self.wake_loop();
        true
    }

    /// Moves what a stream has queued into `out` as far as the windows
    /// allow, in frames of at most the peer's frame size.
    pub fn flush_stream(&mut self, id: u32) {
        let peer_max = self.peer_max_frame;
        let Some(s) = self.streams.get_mut(&id) else { return };
        let max_frame = if s.chunk > 0 { s.chunk.min(peer_max) } else { peer_max };
        while let Some(front) = s.queue.front_mut() {
            match front {
                Out::Data(b, end) => {
                    let end = *end;
                    if b.is_empty() {
                        frame::write_data(&mut self.out, id, &[], end);
                        s.queue.pop_front();
                        continue;
                    }
                    let n = (s.send_window.min(self.send_window).max(0) as usize).min(b.len()).min(max_frame);
                    if n == 0 {
                        return;
                    }
                    let piece = b.split_to(n);
                    frame::write_data(&mut self.out, id, &piece, end && b.is_empty());
                    s.send_window -= n as i64;
                    self.send_window -= n as i64;
                    s.queued -= n;
                    if b.is_empty() {
                        s.queue.pop_front();
                    }
                }
                Out::Trailers(fields) => {
                    let mut block = std::mem::take(&mut self.block);
                    block.clear();
                    self.enc.begin(&mut block);
                    super::super::response::encode_trailers(fields, &mut self.enc, &mut block);
                    frame::write_headers(&mut self.out, id, &block, true, peer_max);
                    self.block = block;
                    s.queue.pop_front();
                }
            }
        }
        if s.send_closed && !s.send_done {
            s.send_done = true;
            self.orphan_check(id);
            self.maybe_close(id);
        }
    }

    /// After a window grew: queued data goes on, waiting senders wake.
    pub fn window_opened(&mut self, only: Option<u32>) {
        let ids: Vec<u32> = match only {
            Some(id) => vec![id],
            None => {
                let mut ids: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|(_, s)| !s.queue.is_empty() || s.tx_waker.is_some())
                    .map(|(&id, _)| id)
                    .collect();
                self.prio.order(&mut ids);
                ids
            }
        };
        for id in ids {
            self.flush_stream(id);
            if self.capacity(id) > 0
                && let Some(w) = self.streams.get_mut(&id).and_then(|s| s.tx_waker.take())
            {
                w.wake();
            }
        }
    }

    /// The connection ended: every handle's next call fails.
    pub fn kill(&mut self) {
        self.dead = true;
        for s in self.streams.values_mut() {
            s.wake_all();
        }
    }
}

fn push_recent(q: &mut VecDeque<u32>, id: u32) {
    if q.len() == RECENT {
        q.pop_front();
    }
    q.push_back(id);
}
