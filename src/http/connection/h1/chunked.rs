//! Incremental `Transfer-Encoding: chunked` decoder, strict where smuggling
//! lives (chunk sizes: hex only, no overflow, no sign or prefix) and as
//! lenient as nginx elsewhere (bare LF line ends, extensions ignored).

#[derive(Debug, PartialEq, Eq)]
pub struct ChunkError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    SizeStart,
    Size,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    FinalLf,
    Done,
}

#[derive(Debug)]
pub struct Decoder {
    state: State,
    size: u64,
    remaining: u64,
    /// Body bytes delivered so far, for client_max_body_size.
    pub total: u64,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { state: State::SizeStart, size: 0, remaining: 0, total: 0 }
    }
}

impl Decoder {
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes from `input`, calling `data` with body bytes; returns how many
    /// input bytes were used (all of them unless the body ended).
    pub fn feed(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        let mut i = 0;
        while i < input.len() {
            let c = input[i];
            match self.state {
                State::Done => return Ok(i),
                State::SizeStart | State::Size => {
                    if let Some(d) = (c as char).to_digit(16) {
                        if self.size > (u64::MAX >> 8) {
                            return Err(ChunkError);
                        }
                        self.size = self.size * 16 + d as u64;
                        self.state = State::Size;
                    } else if self.state == State::SizeStart {
                        return Err(ChunkError);
                    } else {
                        match c {
                            b'\r' => self.state = State::SizeLf,
                            b'\n' => self.end_size(),
                            b';' | b' ' | b'\t' => self.state = State::Extension,
                            _ => return Err(ChunkError),
                        }
                    }
                    i += 1;
                }
                State::Extension => {
                    match c {
                        b'\r' => self.state = State::SizeLf,
                        b'\n' => self.end_size(),
                        0 => return Err(ChunkError),
                        _ => {}
                    }
                    i += 1;
                }
                State::SizeLf => {
                    if c != b'\n' {
                        return Err(ChunkError);
                    }
                    self.end_size();
                    i += 1;
                }
                State::Data => {
                    let n = (self.remaining.min((input.len() - i) as u64)) as usize;
                    data(&input[i..i + n]);
                    self.total += n as u64;
                    self.remaining -= n as u64;
                    i += n;
                    if self.remaining == 0 {
                        self.state = State::DataCr;
                    }
                }
                State::DataCr => {
                    match c {
                        b'\r' => self.state = State::DataLf,
                        b'\n' => self.state = State::SizeStart,
                        _ => return Err(ChunkError),
                    }
                    i += 1;
                }
                State::DataLf => {
                    if c != b'\n' {
                        return Err(ChunkError);
                    }
                    self.state = State::SizeStart;
                    i += 1;
                }
                State::TrailerStart => {
                    match c {
                        b'\r' => self.state = State::FinalLf,
                        b'\n' => self.state = State::Done,
                        _ => self.state = State::Trailer,
                    }
                    i += 1;
                }
                State::Trailer => {
                    match c {
                        b'\r' => self.state = State::TrailerLf,
                        b'\n' => self.state = State::TrailerStart,
                        0 => return Err(ChunkError),
                        _ => {}
                    }
                    i += 1;
                }
                State::TrailerLf => {
                    if c != b'\n' {
                        return Err(ChunkError);
                    }
                    self.state = State::TrailerStart;
                    i += 1;
                }
                State::FinalLf => {
                    if c != b'\n' {
                        return Err(ChunkError);
                    }
                    self.state = State::Done;
                    i += 1;
                }
            }
        }
        Ok(i)
    }

    fn end_size(&mut self) {
        if self.size == 0 {
            self.state = State::TrailerStart;
        } else {
            self.remaining = self.size;
            self.size = 0;
            self.state = State::Data;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(parts: &[&[u8]]) -> Result<(Vec<u8>, bool, usize), ChunkError> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        let mut used = 0;
        for p in parts {
            used += d.feed(p, |b| out.extend_from_slice(b))?;
        }
        Ok((out, d.is_done(), used))
    }

    #[test]
    fn decodes() {
        let (out, done, used) = decode_all(&[b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\nGET"]).unwrap();
        assert_eq!(out, b"hello world");
        assert!(done);
        assert_eq!(used, 32);
    }

    #[test]
    fn split_anywhere() {
        let whole = b"a\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
        for cut in 0..whole.len() {
            let (out, done, _) = decode_all(&[&whole[..cut], &whole[cut..]]).unwrap();
            assert_eq!(out, b"0123456789");
            assert!(done, "cut at {cut}");
        }
    }

    #[test]
    fn bare_lf() {
        let (out, done, _) = decode_all(&[b"3\nabc\n0\n\n"]).unwrap();
        assert_eq!(out, b"abc");
        assert!(done);
    }

    #[test]
    fn invalid_sizes() {
        assert!(decode_all(&[b"-1\r\n"]).is_err());
        assert!(decode_all(&[b"0x5\r\n"]).is_err());
        assert!(decode_all(&[b"\r\n"]).is_err());
        assert!(decode_all(&[b"fffffffffffffffff\r\n"]).is_err());
        assert!(decode_all(&[b"3\r\nabcX"]).is_err());
        assert!(decode_all(&[b"3\rX"]).is_err());
    }

    #[test]
    fn random_input_never_panics_or_overreads() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b"0123456789abcdefABCDEFxX-;= \r\n\tz";
        for _ in 0..20_000 {
            let len = (next() % 64) as usize;
            let input: Vec<u8> = (0..len).map(|_| alphabet[(next() as usize) % alphabet.len()]).collect();
            let mut d = Decoder::default();
            let mut body = 0usize;
            if let Ok(used) = d.feed(&input, |b| body += b.len()) {
                assert!(used <= input.len());
                assert!(body <= used);
                assert_eq!(d.total as usize, body);
            }
        }
    }
}
