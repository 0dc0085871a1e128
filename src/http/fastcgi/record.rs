//! FastCGI records (the FastCGI 1.0 specification): what sluice writes
//! (BEGIN_REQUEST, PARAMS, STDIN) and a streaming decoder for what the
//! application answers (STDOUT, STDERR, END_REQUEST). The decoder takes
//! bytes in any split, holds at most one record header and one STDERR
//! record, and never panics: anything outside the protocol is an
//! [`Error`] with nginx's wording.

/// The only protocol version.
pub const VERSION: u8 = 1;
pub const BEGIN_REQUEST: u8 = 1;
pub const ABORT_REQUEST: u8 = 2;
pub const END_REQUEST: u8 = 3;
pub const PARAMS: u8 = 4;
pub const STDIN: u8 = 5;
pub const STDOUT: u8 = 6;
pub const STDERR: u8 = 7;
/// The role sluice asks for.
pub const RESPONDER: u16 = 1;
/// BEGIN_REQUEST flag: the application keeps the connection afterwards.
pub const KEEP_CONN: u8 = 1;
/// The request id sluice uses: one request per connection at a time.
pub const REQUEST_ID: u16 = 1;
/// The largest content one record carries.
pub const MAX_CONTENT: usize = 65535;
/// How much of a body goes in one STDIN record (nginx's 32 KB).
const STDIN_PIECE: usize = 32 * 1024;

/// Appends a record header; `len` is at most [`MAX_CONTENT`].
pub fn header(out: &mut Vec<u8>, kind: u8, len: usize, padding: u8) {
    debug_assert!(len <= MAX_CONTENT);
    let len = len.min(MAX_CONTENT) as u16;
    out.extend_from_slice(&[
        VERSION,
        kind,
        (REQUEST_ID >> 8) as u8,
        REQUEST_ID as u8,
        (len >> 8) as u8,
        len as u8,
        padding,
        0,
    ]);
}

/// BEGIN_REQUEST for a responder.
pub fn begin_request(out: &mut Vec<u8>, keep_conn: bool) {
    header(out, BEGIN_REQUEST, 8, 0);
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    out.extend_from_slice(&[(RESPONDER >> 8) as u8, RESPONDER as u8, flags, 0, 0, 0, 0, 0]);
}

/// A name-value pair's length: one byte below 128, else four with the
/// high bit set.
fn push_len(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        let n = (n.min(0x7fff_ffff) as u32) | 0x8000_0000;
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Collects name-value pairs and writes them as PARAMS records (split at
/// the record size, a pair may span records), then the empty PARAMS that
/// ends the stream.
#[derive(Default)]
pub struct Params {
    body: Vec<u8>,
}

impl Params {
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        push_len(&mut self.body, name.len());
        push_len(&mut self.body, value.len());
        self.body.extend_from_slice(name);
        self.body.extend_from_slice(value);
    }

    pub fn finish(self, out: &mut Vec<u8>) {
        for piece in self.body.chunks(MAX_CONTENT - 7) {
            let pad = (8 - piece.len() % 8) % 8;
            header(out, PARAMS, piece.len(), pad as u8);
            out.extend_from_slice(piece);
            out.extend_from_slice(&[0u8; 8][..pad]);
        }
        header(out, PARAMS, 0, 0);
    }
}

/// `data` as STDIN records (nothing for empty data: the empty record ends
/// the stream, [`end_stdin`]).
pub fn stdin(out: &mut Vec<u8>, data: &[u8]) {
    for piece in data.chunks(STDIN_PIECE) {
        let pad = (8 - piece.len() % 8) % 8;
        header(out, STDIN, piece.len(), pad as u8);
        out.extend_from_slice(piece);
        out.extend_from_slice(&[0u8; 8][..pad]);
    }
}

pub fn end_stdin(out: &mut Vec<u8>) {
    header(out, STDIN, 0, 0);
}

/// Something in the application's records outside the protocol; the
/// message is nginx's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    Version(u8),
    Type(u8),
    IdHigh(u8),
    IdLow(u8),
    /// Bytes after END_REQUEST.
    AfterEnd,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Version(v) => write!(f, "upstream sent unsupported FastCGI protocol version: {}", v),
            Error::Type(t) => write!(f, "upstream sent invalid FastCGI record type: {}", t),
            Error::IdHigh(b) => write!(f, "upstream sent unexpected FastCGI request id high byte: {}", b),
            Error::IdLow(b) => write!(f, "upstream sent unexpected FastCGI request id low byte: {}", b),
            Error::AfterEnd => write!(f, "upstream sent data after FastCGI END_REQUEST"),
        }
    }
}

/// What the decoder found: STDOUT borrowed from the input (`'i`), STDERR
/// from the decoder (`'s`).
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'i, 's> {
    /// A piece of STDOUT (records may arrive split; so do these); empty for
    /// the empty record that ends the stream.
    Stdout(&'i [u8]),
    /// One whole STDERR record's content.
    Stderr(&'s [u8]),
    /// END_REQUEST: the response is complete.
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a record header (`have` bytes of it so far).
    Header,
    /// Reading `left` bytes of content of a record of type `kind`.
    Content { kind: u8, left: usize },
    /// Skipping `left` bytes of padding.
    Padding { left: usize },
    /// END_REQUEST was read (and its padding skipped).
    Done,
}

/// The application's records, decoded as bytes arrive.
#[derive(Debug)]
pub struct Decoder {
    state: State,
    head: [u8; 8],
    have: usize,
    padding: usize,
    /// The record being read has no content.
    empty_record: bool,
    /// The STDERR record being read.
    stderr: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { state: State::Header, head: [0; 8], have: 0, padding: 0, empty_record: false, stderr: Vec::new() }
    }
}

impl Decoder {
    /// END_REQUEST has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes as much of `input` as forms events, calling `on` for each;
    /// returns the bytes used (all of `input`, unless `on` returns false to
    /// stop early, or the response ended: bytes after END_REQUEST are left
    /// for the caller to judge). `on` returning false stops after the
    /// current event.
    pub fn feed<'i>(
        &mut self,
        input: &'i [u8],
        on: &mut dyn for<'s> FnMut(Event<'i, 's>) -> bool,
    ) -> Result<usize, Error> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Done => return Ok(i),
                State::Header => {
                    let take = (8 - self.have).min(input.len() - i);
                    self.head[self.have..self.have + take].copy_from_slice(&input[i..i + take]);
                    self.have += take;
                    i += take;
                    if self.have < 8 {
                        continue;
                    }
                    self.have = 0;
                    let h = self.head;
                    if h[0] != VERSION {
                        return Err(Error::Version(h[0]));
                    }
                    let kind = h[1];
                    if !matches!(kind, STDOUT | STDERR | END_REQUEST) {
                        return Err(Error::Type(kind));
                    }
                    if h[2] != (REQUEST_ID >> 8) as u8 {
                        return Err(Error::IdHigh(h[2]));
                    }
                    if h[3] != REQUEST_ID as u8 {
                        return Err(Error::IdLow(h[3]));
                    }
                    let len = u16::from_be_bytes([h[4], h[5]]) as usize;
                    self.padding = h[6] as usize;
                    self.empty_record = len == 0;
                    self.stderr.clear();
                    self.state = State::Content { kind, left: len };
                    if len == 0 && !self.finish_content(kind, on) {
                        return Ok(i);
                    }
                }
                State::Content { kind, left } => {
                    let take = left.min(input.len() - i);
                    let piece = &input[i..i + take];
                    i += take;
                    let left = left - take;
                    self.state = State::Content { kind, left };
                    let mut go_on = true;
                    match kind {
                        STDOUT if !piece.is_empty() => go_on = on(Event::Stdout(piece)),
                        STDERR => self.stderr.extend_from_slice(piece),
                        _ => {}
                    }
                    if left == 0 && !self.finish_content(kind, on) {
                        return Ok(i);
                    }
                    if !go_on {
                        return Ok(i);
                    }
                }
                State::Padding { left } => {
                    let take = left.min(input.len() - i);
                    i += take;
                    if take == left {
                        self.state = State::Header;
                    } else {
                        self.state = State::Padding { left: left - take };
                    }
                }
            }
        }
        Ok(i)
    }

    /// A record's content is complete: STDERR goes out whole, END_REQUEST
    /// ends the stream (after its padding, skipped at once when present).
    fn finish_content<'i>(&mut self, kind: u8, on: &mut dyn for<'s> FnMut(Event<'i, 's>) -> bool) -> bool {
        let mut go_on = true;
        match kind {
            // An empty STDOUT record closes the stream: told as an empty
            // piece (nginx refuses it before the head is complete).
            STDOUT if self.empty_record => {
                go_on = on(Event::Stdout(&[]));
            }
            STDERR if !self.stderr.is_empty() => {
                let e = std::mem::take(&mut self.stderr);
                go_on = on(Event::Stderr(&e));
                self.stderr = e;
                self.stderr.clear();
            }
            END_REQUEST => {
                // Its padding (if any) is not waited for: the response is
                // complete; stray bytes are the caller's to judge.
                self.state = State::Done;
                let _ = on(Event::End);
                return false;
            }
            _ => {}
        }
        self.state = if self.padding > 0 { State::Padding { left: self.padding } } else { State::Header };
        go_on
    }
}

/// Of `data`, the part nginx logs from a STDERR record: trailing CR, LF,
/// dots and spaces cut.
pub fn stderr_text(data: &[u8]) -> &[u8] {
    let end = data.iter().rposition(|&b| !matches!(b, b'\r' | b'\n' | b'.' | b' ')).map_or(0, |p| p + 1);
    &data[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u8, content: &[u8], pad: u8) -> Vec<u8> {
        let mut v = Vec::new();
        header(&mut v, kind, content.len(), pad);
        v.extend_from_slice(content);
        v.extend(std::iter::repeat_n(0u8, pad as usize));
        v
    }

    fn end() -> Vec<u8> {
        record(END_REQUEST, &[0, 0, 0, 0, 0, 0, 0, 0], 0)
    }

    /// Feeds `input` in pieces of `step`; the stdout, the stderr records,
    /// whether END came, and the first error.
    fn run(input: &[u8], step: usize) -> (Vec<u8>, Vec<Vec<u8>>, bool, Option<Error>) {
        let mut d = Decoder::default();
        let (mut out, mut err, mut ended) = (Vec::new(), Vec::new(), false);
        let mut at = 0;
        while at < input.len() {
            let to = (at + step).min(input.len());
            let mut on = |e: Event<'_, '_>| {
                match e {
                    Event::Stdout(b) => out.extend_from_slice(b),
                    Event::Stderr(b) => err.push(b.to_vec()),
                    Event::End => ended = true,
                }
                true
            };
            match d.feed(&input[at..to], &mut on) {
                Ok(n) => {
                    if d.is_done() {
                        break;
                    }
                    assert_eq!(n, to - at, "all used while not done");
                }
                Err(e) => return (out, err, ended, Some(e)),
            }
            at = to;
        }
        (out, err, ended, None)
    }

    #[test]
    fn decodes_any_split() {
        let mut input = record(STDOUT, b"Status: 200\r\n\r\nhello", 3);
        input.extend(record(STDERR, b"PHP message: oops\n", 6));
        input.extend(record(STDOUT, b" world", 0));
        input.extend(record(STDOUT, b"", 0));
        input.extend(end());
        for step in [1, 2, 3, 7, 8, 9, 64, 4096] {
            let (out, err, ended, e) = run(&input, step);
            assert_eq!(e, None);
            assert_eq!(out, b"Status: 200\r\n\r\nhello world");
            assert_eq!(err, vec![b"PHP message: oops\n".to_vec()]);
            assert!(ended, "step {step}");
        }
    }

    #[test]
    fn refuses_hostile_records() {
        let mut bad_version = record(STDOUT, b"x", 0);
        bad_version[0] = 2;
        assert_eq!(run(&bad_version, 100).3, Some(Error::Version(2)));
        for kind in [0u8, BEGIN_REQUEST, ABORT_REQUEST, PARAMS, STDIN, 8, 9, 10, 11, 255] {
            assert_eq!(run(&record(kind, b"", 0), 3).3, Some(Error::Type(kind)));
        }
        let mut id = record(STDOUT, b"x", 0);
        id[2] = 1;
        assert_eq!(run(&id, 100).3, Some(Error::IdHigh(1)));
        id[2] = 0;
        id[3] = 7;
        assert_eq!(run(&id, 100).3, Some(Error::IdLow(7)));
    }

    #[test]
    fn truncated_input_is_incomplete_never_done() {
        let mut input = record(STDOUT, b"Status: 200\r\n\r\nbody", 4);
        input.extend(end());
        for cut in 0..input.len() {
            let (_, _, ended, e) = run(&input[..cut], 5);
            assert_eq!(e, None);
            assert!(!ended, "cut at {cut}");
        }
    }

    #[test]
    fn oversized_and_odd_lengths_stay_bounded() {
        // A maximal record in tiny steps, 255 bytes of padding.
        let big = vec![b'a'; MAX_CONTENT];
        let mut input = record(STDOUT, &big, 255);
        input.extend(end());
        let (out, _, ended, e) = run(&input, 1000);
        assert_eq!((out.len(), ended, e), (MAX_CONTENT, true, None));
        // Random bytes never panic.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let len = (x % 64) as usize;
            let mut v = Vec::with_capacity(len);
            for _ in 0..len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                v.push(if x.is_multiple_of(3) { 1 } else { x as u8 });
            }
            let _ = run(&v, (x % 9 + 1) as usize);
        }
    }

    #[test]
    fn bytes_after_end_are_left() {
        let mut input = end();
        input.extend_from_slice(b"junk");
        let mut d = Decoder::default();
        let n = d.feed(&input, &mut |_| true).expect("valid");
        assert!(d.is_done());
        assert_eq!(n, 16);
    }

    #[test]
    fn writes_params_and_stdin() {
        let mut p = Params::default();
        p.push(b"SCRIPT_FILENAME", b"/srv/index.php");
        let long = vec![b'v'; 200];
        p.push(b"HTTP_X", &long);
        let mut out = Vec::new();
        p.finish(&mut out);
        assert_eq!(&out[..2], &[VERSION, PARAMS]);
        let len = u16::from_be_bytes([out[4], out[5]]) as usize;
        assert_eq!(out[8], 15);
        assert_eq!(out[9], 14);
        assert_eq!(out[8 + 2 + 15 + 14], 6, "HTTP_X name length");
        assert_eq!(&out[8 + 2 + 15 + 14 + 1..8 + 2 + 15 + 14 + 5], &(200u32 | 0x8000_0000).to_be_bytes());
        let total = 8 + len + out[6] as usize;
        assert_eq!(total % 8, 0);
        assert_eq!(&out[total..], &[VERSION, PARAMS, 0, 1, 0, 0, 0, 0]);

        let mut s = Vec::new();
        stdin(&mut s, &vec![1u8; 70_000]);
        end_stdin(&mut s);
        // 32768 + 32768 + 4464 (no padding needed) in three records, then
        // the empty one.
        assert_eq!(s.len(), 3 * 8 + 70_000 + 8);
    }

    #[test]
    fn stderr_text_as_nginx_trims() {
        assert_eq!(stderr_text(b"PHP message: hi.\n"), b"PHP message: hi");
        assert_eq!(stderr_text(b"\r\n. "), b"");
        assert_eq!(stderr_text(b"a"), b"a");
    }
}
