//! A body compressed on its way out (`Body::Compressed`): the inner body
//! (a file, bytes in memory, or an origin's body as it streams) is read a
//! piece at a time and each piece goes through the encoder, so memory stays
//! bounded for any size. The HTTP/1 writer sends the output chunked, the
//! HTTP/2 writer as DATA frames, pulling it with [`Compressed::next`].

use std::future::Future;

use super::encoder::Encoder;
use super::negotiate::Coding;
use crate::http::filter::sub::Replacer;
use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::body::{BodyError, UpstreamBody};
use crate::http::response::Body;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;

pub struct Compressed {
    /// None: not encoded, only the sub filter's replacements.
    pub coding: Option<Coding>,
    /// The sub filter, ahead of the encoder.
    sub: Option<Box<crate::http::filter::sub::Replacer>>,
    /// What is being compressed (never `Compressed`, `Proxy` or
    /// `Multipart`: the filter does not wrap those).
    pub inner: Body,
    /// Bytes of a file or in-memory body read so far.
    pos: u64,
    /// Started at the first piece (a HEAD request's never is), None again
    /// once finished.
    enc: Option<Encoder>,
    done: bool,
    /// The encoder's level and brotli's window bits, from the location.
    level: i32,
    window: u32,
    /// Flush the encoder after every piece of an unbuffered origin body, as
    /// nginx's gzip does for buffers flagged `flush` (`proxy_buffering
    /// off`): each piece the origin sends reaches the client decodable.
    flush_each: bool,
    /// A file's piece or an origin's piece before it is compressed.
    scratch: Vec<u8>,
    /// Bytes into the encoder and out of it (header and trailer
    /// included), for `$gzip_ratio` and its kin.
    zin: u64,
    zout: u64,
}

#[derive(Debug)]
pub enum StreamError {
    /// The origin's body failed (logged as nginx's "while reading upstream").
    Upstream(BodyError),
    /// Reading the file failed.
    Read(std::io::Error),
    /// The encoder failed.
    Encode(std::io::Error),
}

impl Compressed {
    pub fn new(coding: Coding, inner: Body, level: i32, window: u32) -> Compressed {
        let flush_each = matches!(&inner, Body::Upstream(u) if !u.buffering);
        Compressed {
            coding: Some(coding),
            sub: None,
            inner,
            pos: 0,
            enc: None,
            done: false,
            level,
            window,
            flush_each,
            scratch: Vec::new(),
            zin: 0,
            zout: 0,
        }
    }

    /// The coding and its bytes in and out, once the whole body went
    /// through (nginx's ratio exists only then).
    pub fn totals(&self) -> Option<(Coding, u64, u64)> {
        let c = self.coding?;
        (self.done && self.zout > 0).then_some((c, self.zin, self.zout))
    }

    /// A body that only goes through the sub filter (compression may be
    /// added by [`Compressed::encode_too`]).
    pub fn substituting(inner: Body, sub: crate::http::filter::sub::Replacer) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, inner, 0, 0);
        c.coding = None;
        c.sub = Some(Box::new(sub));
        c
    }

    /// Compresses too what the sub filter puts out.
    pub fn encode_too(&mut self, coding: Coding, level: i32, window: u32) {
        (self.coding, self.level, self.window) = (Some(coding), level, window);
    }

    /// The origin's body inside, which the proxy must still release.
    pub fn upstream_mut(&mut self) -> Option<&mut UpstreamBody> {
        match &mut self.inner {
            Body::Upstream(u) => Some(u),
            _ => None,
        }
    }

    /// Appends the next piece of compressed output to `out`, reading about
    /// `max` bytes of the inner body per step; Ok(false) once the stream
    /// has ended (its last bytes may come with that same call).
    pub async fn next(&mut self, w: &WorkerCtx, out: &mut Vec<u8>, max: usize) -> Result<bool, StreamError> {
        let Compressed { coding, sub, inner, pos, enc, done, level, window, flush_each, scratch, zin, zout } = self;
        loop {
            if *done {
                return Ok(false);
            }
            let e = match enc {
                Some(e) => e,
                None => enc.insert(match coding {
                    Some(c) => Encoder::new(*c, *level, *window, inner.known_len()).map_err(StreamError::Encode)?,
                    None => Encoder::Identity,
                }),
            };
            let before = out.len();
            let eof = match inner {
                Body::Static(b) => feed_slice(e, sub, b, pos, max, out, zin)?,
                Body::Owned(b) => feed_slice(e, sub, b, pos, max, out, zin)?,
                Body::Shared(b) => feed_slice(e, sub, b, pos, max, out, zin)?,
                Body::File { file, offset, len } => {
                    let n = (*len - *pos).min(max as u64);
                    if n > 0 {
                        let at = *offset + *pos;
                        match file.cached_bytes(at, n) {
                            Some(b) => put(e, sub, b, out, zin)?,
                            None => {
                                let Some(f) = file.file.as_ref() else {
                                    return Err(StreamError::Read(std::io::ErrorKind::NotFound.into()));
                                };
                                scratch.clear();
                                crate::http::connection::io::pread_into(f, at, n, scratch)
                                    .map_err(StreamError::Read)?;
                                put(e, sub, scratch, out, zin)?;
                            }
                        }
                        *pos += n;
                    }
                    *pos == *len
                }
                Body::Upstream(up) => {
                    scratch.clear();
                    let more = up.next(w, scratch, max).await.map_err(StreamError::Upstream)?;
                    put(e, sub, scratch, out, zin)?;
                    if more && *flush_each && !scratch.is_empty() {
                        e.flush(out).map_err(StreamError::Encode)?;
                    }
                    !more
                }
                _ => true,
            };
            if eof {
                *done = true;
                if let Some(mut e) = enc.take() {
                    if let Some(r) = sub {
                        let mut held = Vec::new();
                        r.finish(&mut held);
                        *zin += held.len() as u64;
                        e.write(&held, out).map_err(StreamError::Encode)?;
                    }
                    e.finish(out).map_err(StreamError::Encode)?;
                }
                *scratch = Vec::new();
                *zout += (out.len() - before) as u64;
                return Ok(false);
            }
            if out.len() > before {
                *zout += (out.len() - before) as u64;
                return Ok(true);
            }
        }
    }

    /// Runs a client write while the origin inside is read ahead (see
    /// `proxy::ahead`); other bodies just wait for the write.
    pub async fn while_writing<F: Future>(&mut self, w: &WorkerCtx, ctx: &ReqCtx<'_, '_>, write: F) -> F::Output {
        match &mut self.inner {
            Body::Upstream(up) => crate::http::proxy::ahead::while_writing(w, ctx, up, write).await,
            _ => write.await,
        }
    }
}

/// nginx's `$gzip_ratio`: in / out with two decimals, the third rounding
/// half up (2.125 is 2.13).
pub fn push_ratio(zin: u64, zout: u64, out: &mut Vec<u8>) {
    let (mut int, mut frac) = (zin / zout, zin * 100 / zout % 100);
    if zin * 1000 / zout % 10 > 4 {
        frac += 1;
        if frac > 99 {
            int += 1;
            frac = 0;
        }
    }
    out.extend_from_slice(format!("{int}.{frac:02}").as_bytes());
}

/// A piece through the sub filter (if any), then the encoder; `zin`
/// counts what the encoder took.
fn put(
    e: &mut Encoder,
    sub: &mut Option<Box<Replacer>>,
    input: &[u8],
    out: &mut Vec<u8>,
    zin: &mut u64,
) -> Result<(), StreamError> {
    match sub {
        Some(r) => {
            let mut replaced = Vec::with_capacity(input.len());
            r.feed(input, &mut replaced);
            *zin += replaced.len() as u64;
            e.write(&replaced, out)
        }
        None => {
            *zin += input.len() as u64;
            e.write(input, out)
        }
    }
    .map_err(StreamError::Encode)
}

/// One piece of an in-memory body; true at its end.
fn feed_slice(
    e: &mut Encoder,
    sub: &mut Option<Box<Replacer>>,
    b: &[u8],
    pos: &mut u64,
    max: usize,
    out: &mut Vec<u8>,
    zin: &mut u64,
) -> Result<bool, StreamError> {
    let start = (*pos as usize).min(b.len());
    let end = start + (b.len() - start).min(max);
    put(e, sub, &b[start..end], out, zin)?;
    *pos = end as u64;
    Ok(end == b.len())
}

/// nginx's error-log line for a compressed body that failed on its way.
pub fn log_error(ctx: &ReqCtx<'_, '_>, e: &StreamError) {
    match e {
        StreamError::Upstream(e) => crate::http::proxy::log_body_error(ctx, e),
        StreamError::Read(e) => log_to!(
            ctx.conf.error_log,
            Level::Crit,
            "*{} pread() failed ({})",
            ctx.conn.id,
            crate::process::signal::os_error(e)
        ),
        StreamError::Encode(e) => {
            log_to!(
                ctx.conf.error_log,
                Level::Alert,
                "*{} compression failed ({}) while sending to client",
                ctx.conn.id,
                e
            )
        }
    }
}

#[cfg(test)]
mod ratio_tests {
    #[test]
    fn ratio_rounds_the_third_decimal_half_up() {
        let r = |a, b| {
            let mut v = Vec::new();
            super::push_ratio(a, b, &mut v);
            String::from_utf8(v).unwrap()
        };
        assert_eq!(r(2125, 1000), "2.13");
        assert_eq!(r(2124, 1000), "2.12");
        assert_eq!(r(1999, 1000), "2.00");
        assert_eq!(r(1000, 3000), "0.33");
    }
}
