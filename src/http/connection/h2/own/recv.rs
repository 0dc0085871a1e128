//! What the own loop does with each frame the client sends: the checks
//! that need the connection's state (stream states, CONTINUATION order,
//! windows, the stream limit), SETTINGS, PING, GOAWAY, and a finished
//! request header block handed to `Loop::dispatch`.

use super::super::frame::{self, Code, Frame, FrameError, Head};
use super::super::hpack;
use super::Loop;
use super::headers::{self, Refuse};

/// The preface every client connection starts with (RFC 9113 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A header block being continued: its stream, END_STREAM, the bytes.
pub struct Continuing {
    pub stream: u32,
    pub end_stream: bool,
    pub block: Vec<u8>,
}

/// A frame larger than the protocol's default size whose payload is
/// taken as it arrives instead of whole (nginx's reading): a DATA frame's
/// bytes go to the stream piece by piece, an unknown frame is skipped.
pub struct Rest {
    pub stream: u32,
    /// Payload bytes still to come, padding included.
    pub left: u32,
    /// Padding at the payload's end.
    pub pad: u32,
    pub end_stream: bool,
    /// An unknown frame type: nothing to pass on.
    pub skip: bool,
}

impl Loop {
    /// Reads every complete frame in `buf`; returns the bytes used.
    /// Err is a connection error, to be sent as GOAWAY.
    pub fn on_bytes(&mut self, buf: &[u8]) -> Result<usize, (Code, &'static str)> {
        let mut pos = 0;
        if self.preface_left > 0 {
            let done = PREFACE.len() - self.preface_left;
            let n = self.preface_left.min(buf.len());
            if buf[..n] != PREFACE[done..done + n] {
                return Err((Code::Protocol, "invalid connection preface"));
            }
            self.preface_left -= n;
            pos = n;
            if self.preface_left > 0 {
                return Ok(pos);
            }
        }
        loop {
            if self.rest.is_some() {
                let n = self.on_rest(&buf[pos..])?;
                pos += n;
                if self.rest.is_some() || self.exiting {
                    break;
                }
            }
            if buf.len() - pos < frame::HEAD_LEN {
                break;
            }
            let head = Head::parse(buf[pos..pos + frame::HEAD_LEN].try_into().unwrap_or(&[0; 9]));
            if head.len > self.frame_limit {
                return Err((Code::FrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE"));
            }
            if head.len > frame::MIN_MAX_FRAME {
                match head.kind {
                    frame::DATA => {
                        let Some(at) = self.start_rest(&head, &buf[pos + frame::HEAD_LEN..])? else {
                            break;
                        };
                        pos += frame::HEAD_LEN + at;
                        continue;
                    }
                    frame::HEADERS | frame::CONTINUATION => self.check_block_len(head.len as usize)?,
                    frame::SETTINGS
                    | frame::PRIORITY
                    | frame::RST_STREAM
                    | frame::PING
                    | frame::GOAWAY
                    | frame::WINDOW_UPDATE => {
                        return Err((Code::FrameSize, "control frame larger than 16384 bytes"));
                    }
                    frame::PUSH_PROMISE => {}
                    _ => {
                        if self.cont.is_some() {
                            return Err((Code::Protocol, "header block interrupted"));
                        }
                        self.rest =
                            Some(Rest { stream: head.stream, left: head.len, pad: 0, end_stream: false, skip: true });
                        pos += frame::HEAD_LEN;
                        continue;
                    }
                }
            }
            if head.kind == frame::PUSH_PROMISE {
                // Known wrong from its head: no need to wait for the
                // payload (nginx answers at once too).
                return Err((Code::Protocol, "PUSH_PROMISE from a client"));
            }
            let end = pos + frame::HEAD_LEN + head.len as usize;
            if buf.len() < end {
                if head.kind == frame::HEADERS && self.cont.is_none() {
                    self.scan_partial(&head, &buf[pos + frame::HEAD_LEN..])?;
                }
                break;
            }
            self.partial_scan = 0;
            self.on_frame(&head, &buf[pos + frame::HEAD_LEN..end])?;
            pos = end;
            if self.exiting {
                break;
            }
        }
        Ok(pos)
    }

    /// The head of a DATA frame too large to wait for: its checks (those
    /// `frame::parse` makes on a whole one), then `Rest`. None while its
    /// pad length has not arrived; else the payload bytes used.
    fn start_rest(&mut self, head: &Head, payload: &[u8]) -> Result<Option<usize>, (Code, &'static str)> {
        self.frame_seen = true;
        if self.cont.is_some() {
            return Err((Code::Protocol, "header block interrupted"));
        }
        if head.stream == 0 {
            return Err((Code::Protocol, "DATA on stream 0"));
        }
        let (used, pad) = if head.flags & frame::PADDED != 0 {
            let Some(&pad) = payload.first() else { return Ok(None) };
            if u32::from(pad) >= head.len {
                return Err((Code::Protocol, "DATA padding past the frame"));
            }
            (1, u32::from(pad))
        } else {
            (0, 0)
        };
        let end_stream = head.flags & frame::END_STREAM != 0;
        self.rest = Some(Rest { stream: head.stream, left: head.len, pad, end_stream, skip: false });
        if used > 0 {
            // The pad length byte counts against the windows too.
            self.rest_piece(&[], used as u32)?;
        }
        Ok(Some(used))
    }

    /// Passes on what arrived of a `Rest`; returns the bytes used.
    fn on_rest(&mut self, buf: &[u8]) -> Result<usize, (Code, &'static str)> {
        let Some(r) = &self.rest else { return Ok(0) };
        let n = (r.left as usize).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        if r.skip {
            let r = self.rest.as_mut().map(|r| {
                r.left -= n as u32;
                r.left
            });
            if r == Some(0) {
                self.rest = None;
            }
            return Ok(n);
        }
        // The data lies before the padding.
        let data = (r.left.saturating_sub(r.pad) as usize).min(n);
        self.rest_piece(&buf[..data], n as u32)?;
        Ok(n)
    }

    /// One piece of a DATA `Rest`: `flow` bytes of the frame, `data` of
    /// them the stream's; the last piece carries END_STREAM.
    fn rest_piece(&mut self, data: &[u8], flow: u32) -> Result<(), (Code, &'static str)> {
        let Some(r) = self.rest.as_mut() else { return Ok(()) };
        r.left -= flow.min(r.left);
        let (stream, last, end) = (r.stream, r.left == 0, r.end_stream);
        if last {
            self.rest = None;
        }
        self.on_data(stream, data, last && end, flow)
    }

    fn on_frame(&mut self, head: &Head, payload: &[u8]) -> Result<(), (Code, &'static str)> {
        // Any frame after the preface ends its timeout. The client's
        // SETTINGS need not come first: nginx takes any frame, and its
        // own test client starts with WINDOW_UPDATE or a SETTINGS ack.
        self.frame_seen = true;
        if let Some(c) = &self.cont
            && (head.kind != frame::CONTINUATION || head.stream != c.stream)
        {
            return Err((Code::Protocol, "header block interrupted"));
        }
        let f = match frame::parse(head, payload) {
            Ok(f) => f,
            Err(FrameError::Connection(code)) => return Err((code, "invalid frame")),
            Err(FrameError::Stream(id, code)) => {
                self.stream_error(id, code);
                return Ok(());
            }
        };
        match f {
            Frame::Data { stream, data, end_stream, flow } => self.on_data(stream, data, end_stream, flow),
            Frame::Headers { stream, block, end_stream, end_headers, priority } => {
                if let Some(p) = &priority {
                    self.st.borrow_mut().prio.set(stream, p);
                }
                if end_headers {
                    self.on_block(stream, block, end_stream)
                } else {
                    self.check_block_len(block.len())?;
                    self.cont = Some(Continuing { stream, end_stream, block: block.to_vec() });
                    Ok(())
                }
            }
            Frame::Continuation { stream, block, end_headers } => {
                let Some(mut c) = self.cont.take() else {
                    return Err((Code::Protocol, "CONTINUATION without a header block"));
                };
                self.check_block_len(c.block.len() + block.len())?;
                c.block.extend_from_slice(block);
                if end_headers {
                    self.on_block(stream, &c.block, c.end_stream)
                } else {
                    self.cont = Some(c);
                    Ok(())
                }
            }
            Frame::Priority { stream, priority } => {
                self.st.borrow_mut().prio.set(stream, &priority);
                Ok(())
            }
            Frame::RstStream { stream, code } => {
                if stream > self.last_id {
                    return Err((Code::Protocol, "RST_STREAM on an idle stream"));
                }
                self.st.borrow_mut().peer_reset(stream, code);
                Ok(())
            }
            Frame::Settings { ack, params } => {
                if ack {
                    self.st.borrow_mut().settings_acked = true;
                    return Ok(());
                }
                self.on_settings(params)
            }
            Frame::Ping { ack, data } => {
                if !ack {
                    frame::write_ping_ack(&mut self.st.borrow_mut().out, &data);
                }
                Ok(())
            }
            Frame::GoAway { .. } => {
                self.peer_goaway = true;
                Ok(())
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
            Frame::Unknown { .. } => Ok(()),
        }
    }

    /// The part of a HEADERS frame come so far: an over-long integer in
    /// its header block is a COMPRESSION_ERROR before the rest arrives,
    /// as nginx answers. `partial_scan` keeps where the last look ended,
    /// so a frame dripping in is not walked again from its start.
    fn scan_partial(&mut self, head: &Head, payload: &[u8]) -> Result<(), (Code, &'static str)> {
        // The block lies between the pad length and priority fields, if
        // any, and the padding.
        let (mut start, end) = if head.flags & frame::PADDED != 0 {
            let Some(&pad) = payload.first() else { return Ok(()) };
            (1, (head.len as usize).saturating_sub(pad as usize))
        } else {
            (0, head.len as usize)
        };
        if head.flags & frame::PRIORITY_FLAG != 0 {
            start += 5;
        }
        let Some(block) = payload.get(start..end.min(payload.len())) else {
            return Ok(());
        };
        match hpack::decode::scan_partial(block, self.partial_scan) {
            Ok(at) => {
                self.partial_scan = at;
                Ok(())
            }
            Err(_) => Err((Code::Compression, "client sent header block with too long integer")),
        }
    }

    /// A header block spread over CONTINUATION frames is bounded by the
    /// header list limit as it arrives (nginx: large_client_header_buffers).
    fn check_block_len(&self, n: usize) -> Result<(), (Code, &'static str)> {
        if n > self.header_limit {
            return Err((Code::EnhanceYourCalm, "header block too large"));
        }
        Ok(())
    }

    fn stream_error(&mut self, id: u32, code: Code) {
        let mut st = self.st.borrow_mut();
        st.local_resets += 1;
        st.reset(id, code);
    }

    fn on_settings(&mut self, params: &[u8]) -> Result<(), (Code, &'static str)> {
        let mut st = self.st.borrow_mut();
        for (id, value) in frame::settings(params) {
            match id {
                frame::HEADER_TABLE_SIZE => st.enc.set_peer_limit(value as usize),
                frame::INITIAL_WINDOW_SIZE => {
                    let delta = value as i64 - st.peer_initial_window as i64;
                    st.peer_initial_window = value;
                    for s in st.streams.values_mut() {
                        s.send_window += delta;
                        if s.send_window > frame::MAX_WINDOW as i64 {
                            return Err((Code::FlowControl, "window past 2^31-1"));
                        }
                    }
                }
                frame::MAX_FRAME_SIZE => st.peer_max_frame = value as usize,
                _ => {}
            }
        }
        frame::write_settings_ack(&mut st.out);
        st.window_opened(None);
        Ok(())
    }

    fn on_window_update(&mut self, stream: u32, inc: u32) -> Result<(), (Code, &'static str)> {
        let mut st = self.st.borrow_mut();
        if stream == 0 {
            st.send_window += inc as i64;
            if st.send_window > frame::MAX_WINDOW as i64 {
                return Err((Code::FlowControl, "connection window past 2^31-1"));
            }
            st.window_opened(None);
            return Ok(());
        }
        if stream > self.last_id {
            return Err((Code::Protocol, "WINDOW_UPDATE on an idle stream"));
        }
        let over = match st.streams.get_mut(&stream) {
            Some(s) if !s.closed => {
                s.send_window += inc as i64;
                s.send_window > frame::MAX_WINDOW as i64
            }
            _ => return Ok(()),
        };
        if over {
            st.local_resets += 1;
            st.reset(stream, Code::FlowControl);
        } else {
            st.window_opened(Some(stream));
        }
        Ok(())
    }

    fn on_data(&mut self, id: u32, data: &[u8], end: bool, flow: u32) -> Result<(), (Code, &'static str)> {
        if id > self.last_id {
            return Err((Code::Protocol, "DATA on an idle stream"));
        }
        let mut st = self.st.borrow_mut();
        if flow as i64 > st.recv_window {
            return Err((Code::FlowControl, "DATA past the connection window"));
        }
        st.recv_window -= flow as i64;
        let mut pad = (flow as usize) - data.len();
        enum Next {
            Ok,
            Drop(Option<Code>),
        }
        let next = match st.streams.get_mut(&id) {
            None => {
                let ignore = st.recently_reset.contains(&id);
                Next::Drop(if ignore { None } else { Some(Code::StreamClosed) })
            }
            Some(s) if s.closed => Next::Drop(if s.reset_by_us { None } else { Some(Code::StreamClosed) }),
            Some(s) if s.recv_closed => Next::Drop(Some(Code::StreamClosed)),
            Some(s) if flow as i64 > s.recv_window => Next::Drop(Some(Code::FlowControl)),
            Some(s) => {
                s.recv_window -= flow as i64;
                s.received += data.len() as u64;
                let bad = s.content_length.is_some_and(|n| s.received > n || (end && s.received != n));
                if bad && !s.bad_length && (!s.rx_alive || s.head_sent) {
                    Next::Drop(Some(Code::Protocol))
                } else if bad || s.bad_length {
                    // A handler still reading, with no answer yet, gets an
                    // error instead of this frame's data and answers 400,
                    // as nginx's does; the stream's end follows it.
                    s.bad_length = true;
                    pad += data.len();
                    if end {
                        s.recv_closed = true;
                    }
                    if let Some(w) = s.rx_waker.take() {
                        w.wake();
                    }
                    Next::Ok
                } else {
                    if s.rx_alive && !data.is_empty() {
                        s.recv.push_back(bytes::Bytes::copy_from_slice(data));
                    } else {
                        pad += data.len();
                    }
                    if end {
                        s.recv_closed = true;
                    }
                    if let Some(w) = s.rx_waker.take() {
                        w.wake();
                    }
                    Next::Ok
                }
            }
        };
        match next {
            Next::Ok => {
                if pad > 0 {
                    st.release(id, pad);
                }
                if end {
                    st.maybe_close(id);
                }
            }
            Next::Drop(code) => {
                st.release_conn(flow as usize);
                if let Some(code) = code {
                    st.local_resets += 1;
                    st.reset_closed(id, code);
                }
            }
        }
        Ok(())
    }

    /// A complete header block: a new request, or a stream's trailers.
    fn on_block(&mut self, id: u32, block: &[u8], end: bool) -> Result<(), (Code, &'static str)> {
        let compression = |e: hpack::Error| match e {
            hpack::Error::IntTruncated => (Code::FrameSize, "client sent header block with incorrect length"),
            hpack::Error::FieldTooLarge => (Code::EnhanceYourCalm, "client sent too large header field"),
            _ => (Code::Compression, "HPACK decoding failed"),
        };
        let too_large = (Code::EnhanceYourCalm, "client sent too large header");
        if id <= self.last_id {
            // Trailers on an open stream, or a HEADERS frame on a closed one.
            let mut st = self.st.borrow_mut();
            let open = st.streams.get(&id).is_some_and(|s| !s.closed && !s.recv_closed);
            let decoded = headers::trailers(&mut self.dec, block, self.header_limit).map_err(compression)?;
            if matches!(decoded, Err(Refuse::TooLarge)) {
                return Err(too_large);
            }
            if !open {
                if st.streams.get(&id).is_some_and(|s| !s.closed)
                    || st.recently_closed.contains(&id) && !st.recently_reset.contains(&id)
                {
                    // Half-closed (remote), or closed in order: STREAM_CLOSED.
                    if st.streams.get(&id).is_some_and(|s| !s.closed) {
                        st.local_resets += 1;
                        st.reset(id, Code::StreamClosed);
                        return Ok(());
                    }
                    return Err((Code::StreamClosed, "HEADERS on a closed stream"));
                }
                if st.recently_reset.contains(&id) {
                    return Ok(());
                }
                return Err((Code::Protocol, "HEADERS on a closed stream"));
            }
            match decoded {
                Ok(t) if end => {
                    if let Some(s) = st.streams.get_mut(&id) {
                        if s.content_length.is_some_and(|n| n != s.received) {
                            st.local_resets += 1;
                            st.reset(id, Code::Protocol);
                            return Ok(());
                        }
                        s.trailers = Some(t);
                        s.recv_closed = true;
                        if let Some(w) = s.rx_waker.take() {
                            w.wake();
                        }
                    }
                    st.maybe_close(id);
                }
                _ => {
                    st.local_resets += 1;
                    st.reset(id, Code::Protocol);
                }
            }
            return Ok(());
        }
        if id.is_multiple_of(2) {
            return Err((Code::Protocol, "even stream identifier from a client"));
        }
        self.last_id = id;
        let decoded = headers::request(&mut self.dec, block, &mut self.scratch, self.header_limit, &self.limits, !end)
            .map_err(compression)?;
        if matches!(decoded, Err(Refuse::TooLarge)) {
            return Err(too_large);
        }
        if self.goaway_sent || self.peer_goaway {
            // After GOAWAY new streams are not processed; the block was
            // decoded all the same to keep the tables in step.
            return Ok(());
        }
        let full = self.st.borrow().open >= self.max_streams;
        let r = match decoded {
            Ok(r) => r,
            Err(Refuse::Malformed) if !full => {
                let mut st = self.st.borrow_mut();
                st.open_stream(id, end, None);
                st.local_resets += 1;
                if let Some(s) = st.streams.get_mut(&id) {
                    s.malformed = true;
                }
                drop(st);
                self.dispatch(id, headers::Incoming::malformed());
                return Ok(());
            }
            Err(_) => {
                // Malformed with no room for it: refused.
                let mut st = self.st.borrow_mut();
                st.open_stream(id, end, None);
                st.reset(id, Code::RefusedStream);
                return Ok(());
            }
        };
        let mut st = self.st.borrow_mut();
        // A body before the client took our smaller stream window could
        // overrun it: refused, as nginx does.
        let early = !end && !st.settings_acked && st.stream_target < frame::DEFAULT_WINDOW;
        if full || early {
            st.open_stream(id, end, None);
            st.reset(id, Code::RefusedStream);
            return Ok(());
        }
        if end && r.content_length.is_some_and(|n| n > 0) {
            // A declared body that never comes: 400, as nginx answers.
            st.open_stream(id, end, None);
            st.local_resets += 1;
            if let Some(s) = st.streams.get_mut(&id) {
                s.malformed = true;
            }
            drop(st);
            self.dispatch(id, headers::Incoming::malformed());
            return Ok(());
        }
        st.open_stream(id, end, r.content_length);
        drop(st);
        self.dispatch(id, r);
        Ok(())
    }
}
