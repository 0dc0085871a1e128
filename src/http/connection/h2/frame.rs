//! HTTP/2 frames (RFC 9113 sections 4 and 6) as the server reads and
//! writes them, for sluice's own connection loop.
//!
//! Reading gives borrowed views of one frame's payload with every check
//! the RFC puts on the frame by itself (stream 0 or not, lengths, padding,
//! setting values); the checks that need the connection's state (stream
//! states, CONTINUATION order, flow-control windows) are the loop's.
//! Writing appends to the connection's output buffer, so the frames of
//! many streams leave in one TLS record train and one write.

pub const HEAD_LEN: usize = 9;
/// The window every stream and the connection start with (RFC 9113 6.9.2).
pub const DEFAULT_WINDOW: u32 = 65535;
/// SETTINGS_MAX_FRAME_SIZE's initial value and lower bound.
pub const MIN_MAX_FRAME: u32 = 1 << 14;
/// Its upper bound.
pub const MAX_MAX_FRAME: u32 = (1 << 24) - 1;
/// The largest flow-control window.
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Error codes (RFC 9113 section 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Code {
    NoError = 0x0,
    Protocol = 0x1,
    Internal = 0x2,
    FlowControl = 0x3,
    SettingsTimeout = 0x4,
    StreamClosed = 0x5,
    FrameSize = 0x6,
    RefusedStream = 0x7,
    Cancel = 0x8,
    Compression = 0x9,
    Connect = 0xa,
    EnhanceYourCalm = 0xb,
    InadequateSecurity = 0xc,
    Http11Required = 0xd,
}

/// A frame that breaks the protocol: the whole connection (GOAWAY) or
/// only its stream (RST_STREAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    Connection(Code),
    Stream(u32, Code),
}

/// The nine bytes before every payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: u32,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    pub fn parse(b: &[u8; HEAD_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, b[0], b[1], b[2]]),
            kind: b[3],
            flags: b[4],
            // The reserved bit is ignored on receipt (section 4.1).
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & MAX_WINDOW,
        }
    }

    pub fn write(&self, dst: &mut Vec<u8>) {
        let len = self.len.to_be_bytes();
        dst.extend_from_slice(&[len[1], len[2], len[3], self.kind, self.flags]);
        dst.extend_from_slice(&(self.stream & MAX_WINDOW).to_be_bytes());
    }
}

/// A PRIORITY frame's or HEADERS frame's priority fields; RFC 9113
/// deprecates the scheme, so they are only checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Priority {
    pub depends_on: u32,
    pub exclusive: bool,
    pub weight: u8,
}

/// One frame, its payload borrowed.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `flow` counts the padding too: it is what flow control charges.
    Data {
        stream: u32,
        data: &'a [u8],
        end_stream: bool,
        flow: u32,
    },
    Headers {
        stream: u32,
        block: &'a [u8],
        end_stream: bool,
        end_headers: bool,
        priority: Option<Priority>,
    },
    Priority {
        stream: u32,
        priority: Priority,
    },
    RstStream {
        stream: u32,
        code: u32,
    },
    /// Six bytes per setting; see [`settings`].
    Settings {
        ack: bool,
        params: &'a [u8],
    },
    Ping {
        ack: bool,
        data: [u8; 8],
    },
    GoAway {
        last_stream: u32,
        code: u32,
        debug: &'a [u8],
    },
    WindowUpdate {
        stream: u32,
        increment: u32,
    },
    Continuation {
        stream: u32,
        block: &'a [u8],
        end_headers: bool,
    },
    /// Frame types this end does not know are ignored (section 4.1).
    Unknown {
        kind: u8,
    },
}

fn conn(code: Code) -> FrameError {
    FrameError::Connection(code)
}

/// The payload without its padding (section 6.1).
fn unpad(head: &Head, payload: &[u8]) -> Result<(usize, usize), FrameError> {
    if head.flags & PADDED == 0 {
        return Ok((0, payload.len()));
    }
    let pad = *payload.first().ok_or(conn(Code::FrameSize))? as usize;
    if pad >= payload.len() {
        return Err(conn(Code::Protocol));
    }
    Ok((1, payload.len() - pad))
}

fn priority(b: &[u8], stream: u32) -> Result<Priority, FrameError> {
    let dep = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let p = Priority { depends_on: dep & MAX_WINDOW, exclusive: dep & !MAX_WINDOW != 0, weight: b[4] };
    if p.depends_on == stream {
        // A stream depending on itself (section 5.3.1 of RFC 7540): a
        // stream error there, a connection error here, as nginx answers
        // (which RFC 7540 allows for any stream error, and which spares
        // decoding the rejected block).
        return Err(conn(Code::Protocol));
    }
    Ok(p)
}

/// Reads a frame whose payload (`head.len` bytes) the caller has checked
/// against its SETTINGS_MAX_FRAME_SIZE.
pub fn parse<'a>(head: &Head, payload: &'a [u8]) -> Result<Frame<'a>, FrameError> {
    let on_stream = |f: Frame<'a>| if head.stream == 0 { Err(conn(Code::Protocol)) } else { Ok(f) };
    let on_conn = |f: Frame<'a>| if head.stream != 0 { Err(conn(Code::Protocol)) } else { Ok(f) };
    match head.kind {
        DATA => {
            let (start, end) = unpad(head, payload)?;
            on_stream(Frame::Data {
                stream: head.stream,
                data: &payload[start..end],
                end_stream: head.flags & END_STREAM != 0,
                flow: payload.len() as u32,
            })
        }
        HEADERS => {
            if head.stream == 0 {
                return Err(conn(Code::Protocol));
            }
            let (mut start, end) = unpad(head, payload)?;
            let mut prio = None;
            if head.flags & PRIORITY_FLAG != 0 {
                if end - start < 5 {
                    return Err(conn(Code::FrameSize));
                }
                prio = Some(priority(&payload[start..start + 5], head.stream)?);
                start += 5;
            }
            Ok(Frame::Headers {
                stream: head.stream,
                block: &payload[start..end],
                end_stream: head.flags & END_STREAM != 0,
                end_headers: head.flags & END_HEADERS != 0,
                priority: prio,
            })
        }
        PRIORITY => {
            if head.stream == 0 {
                return Err(conn(Code::Protocol));
            }
            if payload.len() != 5 {
                return Err(FrameError::Stream(head.stream, Code::FrameSize));
            }
            Ok(Frame::Priority { stream: head.stream, priority: priority(payload, head.stream)? })
        }
        RST_STREAM => {
            if payload.len() != 4 {
                return Err(conn(Code::FrameSize));
            }
            let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
            on_stream(Frame::RstStream { stream: head.stream, code })
        }
        SETTINGS => {
            let ack = head.flags & ACK != 0;
            if (ack && !payload.is_empty()) || !payload.len().is_multiple_of(6) {
                return Err(conn(Code::FrameSize));
            }
            for (id, value) in settings(payload) {
                check_setting(id, value)?;
            }
            on_conn(Frame::Settings { ack, params: payload })
        }
        // A client cannot push (section 8.4).
        PUSH_PROMISE => Err(conn(Code::Protocol)),
        PING => {
            if payload.len() != 8 {
                return Err(conn(Code::FrameSize));
            }
            let mut data = [0; 8];
            data.copy_from_slice(payload);
            on_conn(Frame::Ping { ack: head.flags & ACK != 0, data })
        }
        GOAWAY => {
            if payload.len() < 8 {
                return Err(conn(Code::FrameSize));
            }
            let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_WINDOW;
            let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
            on_conn(Frame::GoAway { last_stream: last, code, debug: &payload[8..] })
        }
        WINDOW_UPDATE => {
            if payload.len() != 4 {
                return Err(conn(Code::FrameSize));
            }
            let increment = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]) & MAX_WINDOW;
            if increment == 0 {
                return Err(match head.stream {
                    0 => conn(Code::Protocol),
                    s => FrameError::Stream(s, Code::Protocol),
                });
            }
            Ok(Frame::WindowUpdate { stream: head.stream, increment })
        }
        CONTINUATION => on_stream(Frame::Continuation {
            stream: head.stream,
            block: payload,
            end_headers: head.flags & END_HEADERS != 0,
        }),
        kind => Ok(Frame::Unknown { kind }),
    }
}

pub const HEADER_TABLE_SIZE: u16 = 0x1;
pub const ENABLE_PUSH: u16 = 0x2;
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const MAX_FRAME_SIZE: u16 = 0x5;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;

/// The (identifier, value) pairs of a SETTINGS payload.
pub fn settings(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params.chunks_exact(6).map(|c| (u16::from_be_bytes([c[0], c[1]]), u32::from_be_bytes([c[2], c[3], c[4], c[5]])))
}

/// Section 6.5.2's bounds; unknown identifiers are ignored.
fn check_setting(id: u16, value: u32) -> Result<(), FrameError> {
    match id {
        ENABLE_PUSH | ENABLE_CONNECT_PROTOCOL if value > 1 => Err(conn(Code::Protocol)),
        INITIAL_WINDOW_SIZE if value > MAX_WINDOW => Err(conn(Code::FlowControl)),
        MAX_FRAME_SIZE if !(MIN_MAX_FRAME..=MAX_MAX_FRAME).contains(&value) => Err(conn(Code::Protocol)),
        _ => Ok(()),
    }
}

/// Appends a HEADERS frame and as many CONTINUATION frames as `block`
/// needs at `max_frame` bytes each.
pub fn write_headers(dst: &mut Vec<u8>, stream: u32, block: &[u8], end_stream: bool, max_frame: usize) {
    let max_frame = max_frame.max(MIN_MAX_FRAME as usize);
    let mut chunks = block.chunks(max_frame).peekable();
    let mut kind = HEADERS;
    let mut flags = if end_stream { END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last = chunks.peek().is_none();
        if last {
            flags |= END_HEADERS;
        }
        Head { len: chunk.len() as u32, kind, flags, stream }.write(dst);
        dst.extend_from_slice(chunk);
        if last {
            return;
        }
        kind = CONTINUATION;
        flags = 0;
    }
}

/// Appends a DATA frame; `data` must fit the peer's frame size.
pub fn write_data(dst: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let flags = if end_stream { END_STREAM } else { 0 };
    Head { len: data.len() as u32, kind: DATA, flags, stream }.write(dst);
    dst.extend_from_slice(data);
}

pub fn write_settings(dst: &mut Vec<u8>, params: &[(u16, u32)]) {
    Head { len: (params.len() * 6) as u32, kind: SETTINGS, flags: 0, stream: 0 }.write(dst);
    for (id, value) in params {
        dst.extend_from_slice(&id.to_be_bytes());
        dst.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(dst: &mut Vec<u8>) {
    Head { len: 0, kind: SETTINGS, flags: ACK, stream: 0 }.write(dst);
}

pub fn write_ping_ack(dst: &mut Vec<u8>, data: &[u8; 8]) {
    Head { len: 8, kind: PING, flags: ACK, stream: 0 }.write(dst);
    dst.extend_from_slice(data);
}

pub fn write_window_update(dst: &mut Vec<u8>, stream: u32, increment: u32) {
    Head { len: 4, kind: WINDOW_UPDATE, flags: 0, stream }.write(dst);
    dst.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

pub fn write_rst_stream(dst: &mut Vec<u8>, stream: u32, code: Code) {
    Head { len: 4, kind: RST_STREAM, flags: 0, stream }.write(dst);
    dst.extend_from_slice(&(code as u32).to_be_bytes());
}

pub fn write_goaway(dst: &mut Vec<u8>, last_stream: u32, code: Code, debug: &[u8]) {
    Head { len: 8 + debug.len() as u32, kind: GOAWAY, flags: 0, stream: 0 }.write(dst);
    dst.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    dst.extend_from_slice(&(code as u32).to_be_bytes());
    dst.extend_from_slice(debug);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
        let head = Head::parse(bytes[..HEAD_LEN].try_into().unwrap());
        assert_eq!(head.len as usize, bytes.len() - HEAD_LEN);
        parse(&head, &bytes[HEAD_LEN..])
    }

    #[test]
    fn written_frames_read_back() {
        let mut b = Vec::new();
        write_window_update(&mut b, 3, 1000);
        assert_eq!(one(&b), Ok(Frame::WindowUpdate { stream: 3, increment: 1000 }));
        b.clear();
        write_goaway(&mut b, 7, Code::EnhanceYourCalm, b"x");
        assert_eq!(one(&b), Ok(Frame::GoAway { last_stream: 7, code: 0xb, debug: b"x" }));
        b.clear();
        write_settings(&mut b, &[(MAX_CONCURRENT_STREAMS, 128), (INITIAL_WINDOW_SIZE, 65535)]);
        let Ok(Frame::Settings { ack: false, params }) = one(&b) else { panic!() };
        assert_eq!(settings(params).collect::<Vec<_>>(), [(3, 128), (4, 65535)]);
        b.clear();
        write_data(&mut b, 1, b"hello", true);
        assert_eq!(one(&b), Ok(Frame::Data { stream: 1, data: b"hello", end_stream: true, flow: 5 }));
    }

    #[test]
    fn long_header_blocks_continue() {
        let block = vec![0x82; 40_000];
        let mut b = Vec::new();
        write_headers(&mut b, 5, &block, true, 16_384);
        let mut pos = 0;
        let mut got = Vec::new();
        let mut kinds = Vec::new();
        while pos < b.len() {
            let head = Head::parse(b[pos..pos + HEAD_LEN].try_into().unwrap());
            let payload = &b[pos + HEAD_LEN..pos + HEAD_LEN + head.len as usize];
            kinds.push((head.kind, head.flags));
            match parse(&head, payload).unwrap() {
                Frame::Headers { block, .. } | Frame::Continuation { block, .. } => got.extend_from_slice(block),
                f => panic!("{f:?}"),
            }
            pos += HEAD_LEN + head.len as usize;
        }
        assert_eq!(got, block);
        assert_eq!(kinds, [(HEADERS, END_STREAM), (CONTINUATION, 0), (CONTINUATION, END_HEADERS)]);
    }

    #[test]
    fn malformed_frames_are_refused() {
        // DATA on stream 0.
        assert_eq!(one(&[0, 0, 1, DATA, 0, 0, 0, 0, 0, b'x']), Err(conn(Code::Protocol)));
        // Padding as long as the payload.
        assert_eq!(one(&[0, 0, 2, DATA, PADDED, 0, 0, 0, 1, 2, 0]), Err(conn(Code::Protocol)));
        // A padded DATA frame: only the data, but flow counts all.
        assert_eq!(
            one(&[0, 0, 4, DATA, PADDED, 0, 0, 0, 1, 2, b'x', 0, 0]),
            Ok(Frame::Data { stream: 1, data: b"x", end_stream: false, flow: 4 })
        );
        // A stream depending on itself.
        assert_eq!(one(&[0, 0, 5, PRIORITY, 0, 0, 0, 0, 3, 0, 0, 0, 3, 16]), Err(conn(Code::Protocol)));
        assert_eq!(one(&[0, 0, 4, PRIORITY, 0, 0, 0, 0, 3, 0, 0, 0, 1]), Err(FrameError::Stream(3, Code::FrameSize)));
        // SETTINGS: on a stream, ACK with a payload, a bad length, bad values.
        assert_eq!(one(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 1]), Err(conn(Code::Protocol)));
        assert_eq!(one(&[0, 0, 6, SETTINGS, ACK, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]), Err(conn(Code::FrameSize)));
        assert_eq!(one(&[0, 0, 3, SETTINGS, 0, 0, 0, 0, 0, 0, 1, 0]), Err(conn(Code::FrameSize)));
        assert_eq!(one(&[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 2]), Err(conn(Code::Protocol)));
        assert_eq!(one(&[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 4, 0x80, 0, 0, 0]), Err(conn(Code::FlowControl)));
        assert_eq!(one(&[0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0x3f, 0xff]), Err(conn(Code::Protocol)));
        // WINDOW_UPDATE of 0: a stream error on a stream.
        assert_eq!(
            one(&[0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 1, 0, 0, 0, 0]),
            Err(FrameError::Stream(1, Code::Protocol))
        );
        assert_eq!(one(&[0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(conn(Code::Protocol)));
        assert_eq!(one(&[0, 0, 0, PUSH_PROMISE, 0, 0, 0, 0, 1]), Err(conn(Code::Protocol)));
        assert_eq!(one(&[0, 0, 7, PING, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), Err(conn(Code::FrameSize)));
        assert_eq!(one(&[0, 0, 0, 0x42, 0, 0, 0, 0, 0]), Ok(Frame::Unknown { kind: 0x42 }));
    }
}
