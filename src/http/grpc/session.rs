//! The client side of an HTTP/2 connection to a gRPC origin, as nginx's
//! grpc module frames it: no I/O here, only the protocol's state. Bytes
//! from the origin go in ([`Session::receive`]); what to send comes out
//! of [`Session::out`]; the response of the one stream in flight is kept
//! for the reader (head, DATA bytes, trailers).
//!
//! nginx's module is lenient where a general HTTP/2 client is strict: it
//! sends its preface, SETTINGS and first request at once without waiting
//! for the origin's SETTINGS, accepts the origin's frames in any order a
//! single stream allows, and only the frames that break *this* stream or
//! connection are errors. Each error is nginx's log line; any error ends
//! the connection (it is never reused), as in nginx.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::http::connection::h2::frame::{
    self, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEAD_LEN, HEADERS, Head, MAX_WINDOW, PADDED, PING,
    PRIORITY_FLAG, PUSH_PROMISE, RST_STREAM, SETTINGS, WINDOW_UPDATE,
};
use crate::http::connection::h2::hpack::Decoder;
use crate::http::proxy::DETAIL_SEP;

/// What nginx sends first on a new connection: the preface, SETTINGS
/// (header table size 0, no push, the largest initial window) and a
/// connection WINDOW_UPDATE up to the largest window.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\
\x00\x00\x12\x04\x00\x00\x00\x00\x00\
\x00\x01\x00\x00\x00\x00\
\x00\x02\x00\x00\x00\x00\
\x00\x04\x7f\xff\xff\xff\
\x00\x00\x04\x08\x00\x00\x00\x00\x00\
\x7f\xff\x00\x00";

/// The frame size both ends keep to (nginx's NGX_HTTP_V2_DEFAULT_FRAME_SIZE):
/// larger frames from the origin are an error, and ours are no larger.
pub const FRAME_SIZE: usize = 1 << 14;

pub use crate::http::fields::Fields;

/// Why the connection cannot go on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The origin closed the connection.
    Closed,
    /// Reading or writing failed.
    Io(std::io::ErrorKind, String),
    /// The origin broke the protocol: nginx's log line.
    Invalid(String),
}

/// The response head of the stream in flight.
#[derive(Debug, Default)]
pub struct RespHead {
    pub status: u16,
    pub fields: Fields,
    /// The stream ended with the head (a trailers-only answer).
    pub end_stream: bool,
}

/// The state of the stream in flight (or of the last one).
#[derive(Debug, Default)]
struct Stream {
    id: u32,
    /// Inside a header block: only CONTINUATION may follow.
    parsing_headers: bool,
    block: Vec<u8>,
    block_end_stream: bool,
    head: Option<RespHead>,
    /// The head was taken by the reader.
    head_taken: bool,
    data: VecDeque<Bytes>,
    queued: usize,
    trailers: Option<Fields>,
    done: bool,
    rst: bool,
    /// The body's length still due per Content-Length, when it was given.
    length: Option<u64>,
    /// The request's END_STREAM went.
    output_closed: bool,
    send_window: i64,
    recv_window: i64,
}

/// One connection's protocol state.
pub struct Session {
    inbuf: Vec<u8>,
    /// Bytes to write to the origin, in order.
    pub out: Vec<u8>,
    dec: Decoder,
    /// The origin's SETTINGS_INITIAL_WINDOW_SIZE.
    init_window: i64,
    conn_send: i64,
    conn_recv: i64,
    next_id: u32,
    st: Stream,
    goaway: bool,
    error: Option<Failure>,
    /// `grpc_buffer_size`: the largest response head (or trailers).
    header_limit: usize,
}

impl Session {
    /// A new connection, its preface queued.
    pub fn new() -> Session {
        Session {
            inbuf: Vec::new(),
            out: PREFACE.to_vec(),
            // SETTINGS_HEADER_TABLE_SIZE 0: the origin may not index.
            dec: Decoder::lenient(0),
            init_window: i64::from(frame::DEFAULT_WINDOW),
            conn_send: i64::from(frame::DEFAULT_WINDOW),
            conn_recv: i64::from(MAX_WINDOW),
            next_id: 1,
            st: Stream::default(),
            goaway: false,
            error: None,
            header_limit: usize::MAX,
        }
    }

    pub fn error(&self) -> Option<&Failure> {
        self.error.as_ref()
    }

    /// Ends the connection (an I/O failure, or the end of the origin's
    /// bytes); the first reason stays.
    pub fn fail(&mut self, f: Failure) {
        if self.error.is_none() {
            self.error = Some(f);
        }
    }

    /// Whether another request may go on this connection: the last
    /// stream completed both ways, nothing broke, no GOAWAY.
    pub fn reusable(&self) -> bool {
        self.error.is_none()
            && !self.goaway
            && self.inbuf.is_empty()
            && (self.st.id == 0 || (self.st.done && self.st.output_closed && !self.st.parsing_headers))
    }

    /// Opens the next stream with the request's header block.
    pub fn start(&mut self, block: &[u8], end_stream: bool, header_limit: usize) -> Result<u32, Failure> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.goaway {
            return Err(Failure::Closed);
        }
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(2);
        // The last stream's queues keep their room for this one.
        let mut data = std::mem::take(&mut self.st.data);
        data.clear();
        let mut gathered = std::mem::take(&mut self.st.block);
        gathered.clear();
        self.st = Stream {
            id,
            output_closed: end_stream,
            send_window: self.init_window,
            recv_window: i64::from(MAX_WINDOW),
            data,
            block: gathered,
            ..Stream::default()
        };
        self.header_limit = header_limit.max(1);
        frame::write_headers(&mut self.out, id, block, end_stream, FRAME_SIZE);
        Ok(id)
    }

    /// The id of the stream in flight, 0 before the first.
    pub fn stream_id(&self) -> u32 {
        self.st.id
    }

    /// How many body bytes may go now in one DATA frame.
    pub fn send_room(&self) -> usize {
        let w = self.conn_send.min(self.st.send_window).min(FRAME_SIZE as i64);
        usize::try_from(w).unwrap_or(0)
    }

    /// Queues body bytes (within [`Session::send_room`]) as one DATA
    /// frame, the last one ending the stream when `end`.
    pub fn push_data(&mut self, data: &[u8], end: bool) {
        frame::write_data(&mut self.out, self.st.id, data, end);
        self.conn_send -= data.len() as i64;
        self.st.send_window -= data.len() as i64;
        if end {
            self.st.output_closed = true;
        }
    }

    /// Abandons the stream in flight (the client's body broke off).
    pub fn reset(&mut self) {
        if self.st.id != 0 && !self.st.done {
            frame::write_rst_stream(&mut self.out, self.st.id, frame::Code::Cancel);
        }
        self.st.done = true;
        self.fail(Failure::Closed);
    }

    /// The response head once it came (taken once).
    pub fn take_head(&mut self) -> Option<RespHead> {
        if self.st.head_taken {
            return None;
        }
        let h = self.st.head.take()?;
        self.st.head_taken = true;
        Some(h)
    }

    /// Whether the response head came (or was taken).
    pub fn has_head(&self) -> bool {
        self.st.head.is_some() || self.st.head_taken
    }

    /// The next bytes of the response body.
    pub fn take_data(&mut self) -> Option<Bytes> {
        let b = self.st.data.pop_front()?;
        self.st.queued -= b.len();
        Some(b)
    }

    /// Puts back what the reader could not take.
    pub fn unread(&mut self, b: Bytes) {
        self.st.queued += b.len();
        self.st.data.push_front(b);
    }

    /// Body bytes received and not read yet.
    pub fn queued(&self) -> usize {
        self.st.queued
    }

    /// The response ended (its trailers, if any, are ready).
    pub fn done(&self) -> bool {
        self.st.done
    }

    pub fn take_trailers(&mut self) -> Option<Fields> {
        self.st.trailers.take()
    }

    /// Takes in bytes from the origin and handles every whole frame among
    /// them. An error is kept ([`Session::error`]) and ends the parsing.
    pub fn receive(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if self.inbuf.is_empty() {
            // The usual case: whole frames, parsed where they were read.
            if let Some(used) = self.frames(bytes) {
                self.inbuf.extend_from_slice(&bytes[used..]);
            }
            return;
        }
        self.inbuf.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.inbuf);
        if let Some(used) = self.frames(&buf) {
            self.inbuf = buf;
            self.inbuf.drain(..used);
        }
    }

    /// Handles the whole frames at the start of `buf`: how many bytes they
    /// took, or none after an error.
    fn frames(&mut self, buf: &[u8]) -> Option<usize> {
        let mut pos = 0;
        while buf.len() - pos >= HEAD_LEN {
            let mut hb = [0u8; HEAD_LEN];
            hb.copy_from_slice(&buf[pos..pos + HEAD_LEN]);
            let head = Head::parse(&hb);
            let len = head.len as usize;
            if len > FRAME_SIZE {
                self.fail(Failure::Invalid(format!("upstream sent too large http2 frame: {len}")));
                return None;
            }
            if buf.len() - pos - HEAD_LEN < len {
                break;
            }
            let payload = &buf[pos + HEAD_LEN..pos + HEAD_LEN + len];
            pos += HEAD_LEN + len;
            if let Err(why) = self.frame(&head, payload) {
                self.fail(Failure::Invalid(why));
                return None;
            }
        }
        Some(pos)
    }

    fn frame(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        let st = &self.st;
        if (h.kind == CONTINUATION) != st.parsing_headers {
            return Err(format!("upstream sent unexpected http2 frame: {}", h.kind));
        }
        if h.kind == DATA && !self.has_head() {
            return Err(format!("upstream sent unexpected http2 frame: {}", h.kind));
        }
        if h.stream != 0 && h.stream != st.id {
            return Err(format!("upstream sent frame for unknown stream {}", h.stream));
        }
        if h.stream != 0 && st.done && h.kind != RST_STREAM && h.kind != WINDOW_UPDATE {
            return Err(format!("upstream sent frame for closed stream {}", h.stream));
        }
        match h.kind {
            DATA => self.data(h, p),
            HEADERS | CONTINUATION => self.headers(h, p),
            RST_STREAM => self.rst_stream(h, p),
            GOAWAY => self.goaway(p),
            WINDOW_UPDATE => self.window_update(h, p),
            SETTINGS => self.settings(h, p),
            PING => {
                if p.len() != 8 {
                    return Err(format!("upstream sent ping frame with invalid length: {}", p.len()));
                }
                if h.flags & frame::ACK == 0 {
                    let mut d = [0u8; 8];
                    d.copy_from_slice(p);
                    frame::write_ping_ack(&mut self.out, &d);
                }
                Ok(())
            }
            PUSH_PROMISE => Err("upstream sent unexpected push promise frame".into()),
            // PRIORITY and unknown frames.
            _ => Ok(()),
        }
    }

    fn data(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        let n = p.len() as i64;
        if n > self.st.recv_window {
            return Err(format!(
                "upstream violated stream flow control, received {n} data frame with window {}",
                self.st.recv_window
            ));
        }
        if n > self.conn_recv {
            return Err(format!(
                "upstream violated connection flow control, received {n} data frame with window {}",
                self.conn_recv
            ));
        }
        self.st.recv_window -= n;
        self.conn_recv -= n;
        let max = i64::from(MAX_WINDOW);
        if self.conn_recv < max / 4 || self.st.recv_window < max / 4 {
            if self.conn_recv < max {
                frame::write_window_update(&mut self.out, 0, (max - self.conn_recv) as u32);
                self.conn_recv = max;
            }
            if self.st.recv_window < max {
                frame::write_window_update(&mut self.out, self.st.id, (max - self.st.recv_window) as u32);
                self.st.recv_window = max;
            }
        }
        let body = if h.flags & PADDED != 0 {
            let Some((&pad, rest)) = p.split_first() else {
                return Err("upstream sent too short http2 frame".into());
            };
            if usize::from(pad) > rest.len() {
                return Err(format!("upstream sent http2 frame with too long padding: {pad} in frame {}", rest.len()));
            }
            &rest[..rest.len() - usize::from(pad)]
        } else {
            p
        };
        if let Some(left) = self.st.length {
            if body.len() as u64 > left {
                return Err("upstream sent response body larger than indicated content length".into());
            }
            self.st.length = Some(left - body.len() as u64);
        }
        if !body.is_empty() {
            self.st.queued += body.len();
            self.st.data.push_back(Bytes::copy_from_slice(body));
        }
        if h.flags & END_STREAM != 0 {
            self.end_stream()?;
        }
        Ok(())
    }

    fn end_stream(&mut self) -> Result<(), String> {
        self.st.done = true;
        if self.st.length.is_some_and(|l| l > 0) {
            return Err("upstream prematurely closed stream".into());
        }
        Ok(())
    }

    fn headers(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        let mut frag = p;
        if h.kind == HEADERS {
            let min = usize::from(h.flags & PADDED != 0) + if h.flags & PRIORITY_FLAG != 0 { 5 } else { 0 };
            if p.len() < min {
                return Err(format!("upstream sent headers frame with invalid length: {}", p.len()));
            }
            let mut pad = 0usize;
            if h.flags & PADDED != 0 {
                pad = usize::from(p[0]);
                frag = &frag[1..];
            }
            if h.flags & PRIORITY_FLAG != 0 {
                frag = &frag[5..];
            }
            if pad > frag.len() {
                return Err(format!("upstream sent http2 frame with too long padding: {pad} in frame {}", frag.len()));
            }
            frag = &frag[..frag.len() - pad];
            self.st.parsing_headers = true;
            self.st.block.clear();
            self.st.block_end_stream = h.flags & END_STREAM != 0;
        }
        let trailer = self.has_head();
        // nginx's verdict line after a detail line, for a head or trailers.
        let verdict = if trailer { "upstream sent invalid trailer" } else { "upstream sent invalid header" };
        let too_large = || format!("upstream sent too large http2 header{DETAIL_SEP}{verdict}");
        // The block is kept whole until it ends; its fields are bounded by
        // `grpc_buffer_size` below, the block itself by a multiple of it.
        if self.st.block.len() + frag.len() > self.header_limit.saturating_mul(2).max(FRAME_SIZE * 8) {
            return Err(too_large());
        }
        // A block in one HEADERS frame (the usual case) is decoded where
        // it lies; one split over CONTINUATION frames is gathered first.
        let whole = h.kind == HEADERS && h.flags & END_HEADERS != 0;
        if !whole {
            self.st.block.extend_from_slice(frag);
        }
        if h.flags & END_HEADERS == 0 {
            return Ok(());
        }
        self.st.parsing_headers = false;
        let block: &[u8] = if whole { frag } else { &self.st.block };
        let mut fields = Fields::with_capacity(block.len() * 2 + 64);
        // The block's room is kept for the next one.
        let decoded = self.dec.decode(block, &mut |n, v, _| fields.push(n, v));
        let end = self.st.block_end_stream;
        if decoded.is_err() {
            return Err(verdict.into());
        }
        // As nginx: each field checked in turn, its name and value counted
        // against `grpc_buffer_size`.
        let mut left = self.header_limit;
        for (n, v) in fields.iter() {
            if !valid_name(n) || !valid_value(v) {
                return Err(format!(
                    "upstream sent invalid header: \"{}: {}\"{DETAIL_SEP}{verdict}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                ));
            }
            left = left.checked_sub(n.len() + v.len()).ok_or_else(too_large)?;
        }
        if trailer {
            if let Some((n, v)) = fields.iter().find(|(n, _)| n.first() == Some(&b':')) {
                return Err(format!(
                    "upstream sent invalid trailer \"{}: {}\"",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                ));
            }
            if !end {
                return Err("upstream sent trailer without end stream flag".into());
            }
            self.st.trailers = Some(fields);
            return self.end_stream();
        }
        let mut status = None;
        // Pseudo-headers come first (a field before :status fails), so
        // the head's fields are those after it.
        let mut pseudo = 0;
        for (n, v) in fields.iter() {
            if n.first() == Some(&b':') {
                if n != b":status" {
                    return Err(format!(
                        "upstream sent invalid header \"{}: {}\"",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    ));
                }
                if status.is_some() {
                    return Err("upstream sent duplicate :status header".into());
                }
                let code = std::str::from_utf8(v)
                    .ok()
                    .filter(|s| s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(|| format!("upstream sent invalid :status \"{}\"", String::from_utf8_lossy(v)))?;
                if code < 200 && code != 103 {
                    return Err(format!("upstream sent unexpected :status \"{code}\""));
                }
                status = Some(code);
                pseudo += 1;
                continue;
            }
            if status.is_none() {
                return Err("upstream sent no :status header".into());
            }
        }
        let Some(status) = status else { return Err("upstream sent no :status header".into()) };
        if status == 103 {
            // Early hints are not passed on; the final head follows.
            if end {
                return Err("upstream prematurely closed stream".into());
            }
            return Ok(());
        }
        let mut rest = fields;
        rest.skip(pseudo);
        self.st.length = rest
            .iter()
            .find(|(n, _)| *n == b"content-length")
            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
        self.st.head = Some(RespHead { status, fields: rest, end_stream: end });
        if end {
            self.st.length = None;
            self.st.done = true;
        }
        Ok(())
    }

    /// A HEAD request or a 204/304 answer: no body is due whatever
    /// Content-Length says.
    pub fn no_body(&mut self) {
        self.st.length = None;
    }

    fn rst_stream(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        if p.len() != 4 {
            return Err(format!("upstream sent rst_stream frame with invalid length: {}", p.len()));
        }
        if h.stream == 0 {
            return Err("upstream sent rst_stream frame for stream 0".into());
        }
        let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
        if code != 0 || !self.st.done {
            return Err(format!("upstream rejected request with error {code}"));
        }
        if self.st.rst {
            return Err(format!("upstream sent frame for closed stream {}", h.stream));
        }
        self.st.rst = true;
        Ok(())
    }

    fn goaway(&mut self, p: &[u8]) -> Result<(), String> {
        if p.len() < 8 {
            return Err(format!("upstream sent goaway frame with invalid length: {}", p.len()));
        }
        let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
        let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
        // A stream above the last one the origin takes was not processed.
        if last < self.st.id && !self.st.done {
            return Err(format!("upstream sent goaway with error {code}"));
        }
        self.goaway = true;
        Ok(())
    }

    fn window_update(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        if p.len() != 4 {
            return Err(format!("upstream sent window update frame with invalid length: {}", p.len()));
        }
        let inc = i64::from(u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW);
        let max = i64::from(MAX_WINDOW);
        if h.stream == 0 {
            if inc > max - self.conn_send {
                return Err("upstream sent too large window update".into());
            }
            self.conn_send += inc;
        } else {
            if inc > max - self.st.send_window {
                return Err("upstream sent too large window update".into());
            }
            self.st.send_window += inc;
        }
        Ok(())
    }

    fn settings(&mut self, h: &Head, p: &[u8]) -> Result<(), String> {
        if h.stream != 0 {
            return Err("upstream sent settings frame with non-zero stream id".into());
        }
        if h.flags & frame::ACK != 0 {
            if !p.is_empty() {
                return Err("upstream sent settings frame with ack flag and non-zero length".into());
            }
            return Ok(());
        }
        if !p.len().is_multiple_of(6) {
            return Err(format!("upstream sent settings frame with invalid length: {}", p.len()));
        }
        for (id, value) in frame::settings(p) {
            match id {
                frame::INITIAL_WINDOW_SIZE => {
                    if value > MAX_WINDOW {
                        return Err(format!(
                            "upstream sent settings frame with too large initial window size: {value}"
                        ));
                    }
                    let delta = i64::from(value) - self.init_window;
                    self.init_window = i64::from(value);
                    self.st.send_window += delta;
                }
                frame::MAX_FRAME_SIZE if !(frame::MIN_MAX_FRAME..=frame::MAX_MAX_FRAME).contains(&value) => {
                    return Err(format!("upstream sent settings frame with invalid max frame size: {value}"));
                }
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.out);
        Ok(())
    }
}

impl Default for Session {
    fn default() -> Session {
        Session::new()
    }
}

/// nginx's check of a header name from the origin: lowercase token
/// characters, a leading ':' for pseudo-headers.
fn valid_name(n: &[u8]) -> bool {
    let body = n.strip_prefix(b":").unwrap_or(n);
    !n.is_empty() && body.iter().all(|&c| c > 0x20 && c != 0x7f && c != b':' && !c.is_ascii_uppercase())
}

/// No NUL, CR or LF in a value.
fn valid_value(v: &[u8]) -> bool {
    !v.iter().any(|&c| c == 0 || c == b'\r' || c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        Head { len: payload.len() as u32, kind, flags, stream }.write(&mut v);
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn response_with_settings_padding_continuation_and_trailers() {
        let mut s = Session::new();
        assert_eq!(s.start(b"\x83", true, 4096), Ok(1));
        s.out.clear();
        let mut wire = frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 2]);
        wire.extend(frame(SETTINGS, 1, 0, &[]));
        // :status 200 (padded, with priority), then content-type in a
        // CONTINUATION.
        wire.extend(frame(HEADERS, PADDED | PRIORITY_FLAG, 1, &[2, 1, 2, 3, 4, 9, 0x88, 0, 0]));
        wire.extend(frame(CONTINUATION, END_HEADERS, 1, b"\x0f\x10\x03abc"));
        wire.extend(frame(DATA, PADDED, 1, b"\x01Hello!"));
        wire.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\x00\x0bgrpc-status\x010"));
        s.receive(&wire[..10]);
        s.receive(&wire[10..]);
        assert_eq!(s.error(), None);
        let head = s.take_head().expect("head");
        assert_eq!(head.status, 200);
        assert_eq!(head.fields, vec![(b"content-type".to_vec(), b"abc".to_vec())]);
        assert_eq!(s.take_data().as_deref(), Some(&b"Hello"[..]));
        assert!(s.done());
        assert_eq!(s.take_trailers().expect("trailers"), vec![(b"grpc-status".to_vec(), b"0".to_vec())]);
        // The SETTINGS was acked; the ack was not.
        assert_eq!(s.out, frame(SETTINGS, 1, 0, &[]));
        assert!(s.reusable());
    }

    #[test]
    fn errors_are_nginx_lines() {
        let mut s = Session::new();
        s.start(b"\x83", true, 4096).expect("start");
        s.receive(&frame(RST_STREAM, 0, 1, &[0, 0, 0, 8]));
        assert_eq!(s.error(), Some(&Failure::Invalid("upstream rejected request with error 8".into())));
        assert!(!s.reusable());

        let mut s = Session::new();
        s.start(b"\x83", true, 4096).expect("start");
        s.receive(&frame(DATA, 0, 1, b"x"));
        assert_eq!(s.error(), Some(&Failure::Invalid("upstream sent unexpected http2 frame: 0".into())));

        let mut s = Session::new();
        s.start(b"\x83", true, 4096).expect("start");
        s.receive(&frame(HEADERS, END_HEADERS, 1, b"\x88\x00\x02NN\x01v"));
        let why = "upstream sent invalid header: \"NN: v\"\u{1e}upstream sent invalid header";
        assert_eq!(s.error(), Some(&Failure::Invalid(why.into())));
    }

    #[test]
    fn fields_count_against_the_buffer_size() {
        let mut s = Session::new();
        s.start(b"\x83", true, 8).expect("start");
        // :status 200, then x: 1234567 (8 bytes with its name: too many).
        s.receive(&frame(HEADERS, END_HEADERS, 1, b"\x88\x00\x01x\x071234567"));
        let why = "upstream sent too large http2 header\u{1e}upstream sent invalid header";
        assert_eq!(s.error(), Some(&Failure::Invalid(why.into())));
    }

    #[test]
    fn windows_follow_settings_and_updates() {
        let mut s = Session::new();
        s.start(b"\x83", false, 4096).expect("start");
        assert_eq!(s.send_room(), FRAME_SIZE);
        s.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 2]));
        assert_eq!(s.send_room(), 2);
        s.push_data(b"He", false);
        assert_eq!(s.send_room(), 0);
        s.receive(&frame(SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 5]));
        assert_eq!(s.send_room(), 3);
        s.receive(&frame(WINDOW_UPDATE, 0, 1, &[0, 0, 0, 10]));
        assert_eq!(s.send_room(), 13);
    }

    #[test]
    fn goaway_below_the_stream_fails_it() {
        let mut s = Session::new();
        s.start(b"\x83", true, 4096).expect("start");
        s.receive(&frame(GOAWAY, 0, 0, &[0, 0, 0, 3, 0, 0, 0, 0]));
        assert_eq!(s.error(), None);
        assert!(!s.reusable());
        let mut s = Session::new();
        s.start(b"\x83", true, 4096).expect("start");
        s.receive(&frame(GOAWAY, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 5]));
        assert_eq!(s.error(), Some(&Failure::Invalid("upstream sent goaway with error 5".into())));
    }
}
