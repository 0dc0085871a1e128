//! A body compressed on its way out (`Body::Compressed`): the inner body
//! (a file, bytes in memory, or an origin's body as it streams) is read a
//! piece at a time and each piece goes through the encoder, so memory stays
//! bounded for any size. The HTTP/1 writer sends the output chunked, the
//! HTTP/2 writer as DATA frames, pulling it with [`Compressed::next`].

use std::future::Future;

use super::encoder::Encoder;
use super::negotiate::Coding;
use crate::http::addition::Addition;
use crate::http::charset::recode::Recoder;
use crate::http::filter::sub::Replacer;
use crate::http::handler::ctx::ReqCtx;
use crate::http::proxy::body::{BodyError, UpstreamBody};
use crate::http::response::Body;
use crate::http::slice::filter::Slicer;
use crate::http::ssi::run::Ssi;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::WorkerCtx;

pub struct Compressed {
    /// None: not encoded, only the sub filter's replacements.
    pub coding: Option<Coding>,
    /// The gunzip module's decompression, first of the stages.
    gunzip: Option<Box<crate::http::gunzip::Gunzip>>,
    /// The sub filter, ahead of the encoder.
    sub: Option<Box<crate::http::filter::sub::Replacer>>,
    /// The charset module's recoding, after the sub filter.
    charset: Option<Box<Recoder>>,
    /// The SSI module, after the charset filter (nginx's body-filter order).
    ssi: Option<Box<Ssi>>,
    /// The addition module's bodies, around what the stages above make.
    addition: Option<Box<Addition>>,
    /// What is being compressed (never `Compressed` or `Proxy`; a
    /// `Multipart` one only for the charset filter, which recodes its part
    /// headers too, as nginx's filter sees the range filter's output).
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
    /// The origin's body failed after the piece last returned.
    failed: Option<BodyError>,
    /// The slice module's later pieces, read after `inner` ends.
    slice: Option<Box<Slicer>>,
    /// The length when the stages keep it (a sliced body not otherwise
    /// filtered): sent as Content-Length. Any stage added clears it.
    pub declared_len: Option<u64>,
}

#[derive(Debug)]
pub enum StreamError {
    /// The origin's body failed (logged as nginx's "while reading upstream").
    Upstream(BodyError),
    /// Reading the file failed.
    Read(std::io::Error),
    /// The encoder failed.
    Encode(std::io::Error),
    /// The gunzip stage found no valid gzip data.
    Decode(std::io::Error),
    /// A later piece of a sliced response was refused (logged).
    Slice,
    /// A filter ended the request (SSI's too big subrequest; logged).
    Aborted,
}

impl Compressed {
    pub fn new(coding: Coding, inner: Body, level: i32, window: u32) -> Compressed {
        let flush_each = matches!(&inner, Body::Upstream(u) if !u.buffering);
        Compressed {
            coding: Some(coding),
            gunzip: None,
            sub: None,
            charset: None,
            ssi: None,
            addition: None,
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
            failed: None,
            slice: None,
            declared_len: None,
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

    /// A gzip body that is decompressed (the gunzip module).
    pub fn gunzipping(inner: Body) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, inner, 0, 0);
        c.coding = None;
        c.gunzip = Some(Box::default());
        c
    }

    /// A body that only goes through the charset filter's recoding.
    pub fn recoding(inner: Body, rec: Box<Recoder>) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, inner, 0, 0);
        c.coding = None;
        c.charset = Some(rec);
        c
    }

    /// Adds the charset filter's recoding (after gunzip and slices).
    pub fn add_charset(&mut self, rec: Box<Recoder>) {
        self.charset = Some(rec);
    }

    /// Adds the sub filter after the gunzip stage.
    pub fn add_sub(&mut self, sub: crate::http::filter::sub::Replacer) {
        self.sub = Some(Box::new(sub));
    }

    /// The sub filter is in already.
    pub fn has_sub(&self) -> bool {
        self.sub.is_some()
    }

    /// A body that only goes through the SSI module.
    pub fn ssi(inner: Body, ssi: Box<Ssi>) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, inner, 0, 0);
        c.coding = None;
        c.ssi = Some(ssi);
        c.scratch = crate::http::ssi::bufs::bytes(0);
        c
    }

    /// A body that only gets the addition module's bodies around it.
    pub fn addition(inner: Body, add: Box<Addition>) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, inner, 0, 0);
        c.coding = None;
        c.addition = Some(add);
        c
    }

    /// A sliced body: `first` piece, then the ones the slicer fetches.
    pub fn slice(first: Body, slicer: Box<Slicer>) -> Compressed {
        let mut c = Compressed::new(Coding::Gzip, first, 0, 0);
        c.coding = None;
        c.flush_each = false;
        c.slice = Some(slicer);
        c
    }

    /// Adds the addition module's bodies.
    pub fn add_addition(&mut self, add: Box<Addition>) {
        self.addition = Some(add);
        self.declared_len = None;
    }

    /// Adds the SSI stage after the sub filter.
    pub fn add_ssi(&mut self, ssi: Box<Ssi>) {
        self.ssi = Some(ssi);
        if self.scratch.capacity() == 0 {
            self.scratch = crate::http::ssi::bufs::bytes(0);
        }
        self.declared_len = None;
    }

    /// Compresses too what the sub filter puts out.
    pub fn encode_too(&mut self, coding: Coding, level: i32, window: u32) {
        (self.coding, self.level, self.window) = (Some(coding), level, window);
        self.declared_len = None;
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
    /// `ctx` is the request the body answers (the SSI stage runs its
    /// commands and subrequests for it).
    pub async fn next(
        &mut self,
        w: &WorkerCtx,
        ctx: &ReqCtx<'_, '_>,
        out: &mut Vec<u8>,
        max: usize,
    ) -> Result<bool, StreamError> {
        let Compressed {
            coding,
            gunzip,
            sub,
            charset,
            ssi,
            addition,
            inner,
            pos,
            enc,
            done,
            level,
            window,
            flush_each,
            scratch,
            zin,
            zout,
            failed,
            slice,
            declared_len: _,
        } = self;
        if let Some(err) = failed.take() {
            return Err(StreamError::Upstream(err));
        }
        // An SSI page's piece buffer comes from the SSI pages' spares and
        // goes back there at the end (one allocation less a page).
        let pooled = ssi.is_some();
        let mut st = Stages { gunzip, sub, charset, ssi, w, ctx };
        loop {
            if *done {
                return Ok(false);
            }
            let before = out.len();
            let e = match enc {
                Some(e) => e,
                None => {
                    let e = enc.insert(match coding {
                        Some(c) => Encoder::new(*c, *level, *window, inner.known_len()).map_err(StreamError::Encode)?,
                        None => Encoder::Identity,
                    });
                    // `add_before_body`'s answer comes first.
                    if let Some(a) = addition {
                        let added = a.before(w, ctx).await;
                        *zin += added.len() as u64;
                        e.write(&added, out).map_err(StreamError::Encode)?;
                    }
                    e
                }
            };
            let eof = match inner {
                Body::Static(b) => feed_slice(e, &mut st, b, pos, max, out, zin).await?,
                Body::Owned(b) => feed_slice(e, &mut st, b, pos, max, out, zin).await?,
                Body::Shared(b) => feed_slice(e, &mut st, b, pos, max, out, zin).await?,
                Body::File { file, offset, len } => {
                    let n = (*len - *pos).min(max as u64);
                    if n > 0 {
                        let at = *offset + *pos;
                        put_file(e, &mut st, file, at, n, scratch, out, zin).await?;
                        *pos += n;
                    }
                    *pos == *len
                }
                Body::Multipart { file, parts, trailer } => {
                    match multipart_piece(parts, trailer, *pos) {
                        Some(Piece::Mem(b)) => {
                            let n = b.len().min(max);
                            put(e, &mut st, &b[..n], out, zin).await?;
                            *pos += n as u64;
                        }
                        Some(Piece::File(at, n)) => {
                            let n = n.min(max as u64);
                            put_file(e, &mut st, file, at, n, scratch, out, zin).await?;
                            *pos += n;
                        }
                        None => {}
                    }
                    multipart_piece(parts, trailer, *pos).is_none()
                }
                Body::Upstream(up) => {
                    scratch.clear();
                    let more = match up.next(w, scratch, max).await {
                        Ok(more) => more,
                        // What came before the failure still goes out
                        // (as nginx sends what it read).
                        Err(err) if !scratch.is_empty() => {
                            put(e, &mut st, scratch, out, zin).await?;
                            e.flush(out).map_err(StreamError::Encode)?;
                            *failed = Some(err);
                            return Ok(true);
                        }
                        Err(err) => return Err(StreamError::Upstream(err)),
                    };
                    put(e, &mut st, scratch, out, zin).await?;
                    if more && *flush_each && !scratch.is_empty() {
                        e.flush(out).map_err(StreamError::Encode)?;
                    }
                    !more
                }
                _ => true,
            };
            // A sliced body goes on with its next piece.
            if eof && let Some(s) = slice.as_mut() {
                match s.next_body(w, ctx, inner).await {
                    Ok(Some(b)) => {
                        *inner = b;
                        *pos = 0;
                        if out.len() > before && !s.holds(out.len() - before) {
                            *zout += (out.len() - before) as u64;
                            return Ok(true);
                        }
                        continue;
                    }
                    Ok(None) => {
                        *inner = Body::Empty;
                        *slice = None;
                    }
                    Err(()) => {
                        *inner = Body::Empty;
                        *slice = None;
                        return Err(StreamError::Slice);
                    }
                }
            }
            if eof {
                *done = true;
                if let Some(mut e) = enc.take() {
                    // The gunzip stage's last bytes go through the rest.
                    if let Some(mut g) = st.gunzip.take() {
                        let mut rest = Vec::new();
                        g.finish(&mut rest).map_err(StreamError::Decode)?;
                        put(&mut e, &mut st, &rest, out, zin).await?;
                    }
                    let mut held = Vec::new();
                    if let Some(r) = st.sub {
                        r.finish(&mut held);
                    }
                    if let Some(r) = st.charset {
                        let mut recoded = Vec::with_capacity(held.len());
                        r.feed(&held, &mut recoded);
                        r.finish();
                        held = recoded;
                    }
                    if let Some(s) = st.ssi {
                        let mut processed = Vec::new();
                        s.feed(w, ctx, &held, &mut processed).await;
                        s.finish(w, ctx, &mut processed).await;
                        if s.aborted {
                            return Err(StreamError::Aborted);
                        }
                        held = processed;
                    }
                    // `add_after_body`'s answer comes last.
                    if let Some(a) = addition {
                        held.extend_from_slice(&a.after(w, ctx).await);
                    }
                    *zin += held.len() as u64;
                    e.write(&held, out).map_err(StreamError::Encode)?;
                    e.finish(out).map_err(StreamError::Encode)?;
                }
                let spent = std::mem::take(scratch);
                if pooled {
                    crate::http::ssi::bufs::give(spent);
                }
                *zout += (out.len() - before) as u64;
                return Ok(false);
            }
            if out.len() > before && !slice.as_mut().is_some_and(|s| s.holds(out.len() - before)) {
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

/// The stages ahead of the encoder, and what the SSI stage needs.
struct Stages<'s, 'r, 'c, 'a> {
    gunzip: &'s mut Option<Box<crate::http::gunzip::Gunzip>>,
    sub: &'s mut Option<Box<Replacer>>,
    charset: &'s mut Option<Box<Recoder>>,
    ssi: &'s mut Option<Box<Ssi>>,
    w: &'r WorkerCtx,
    ctx: &'r ReqCtx<'c, 'a>,
}

/// A piece through the sub filter and the SSI module (if any), then the
/// encoder; `zin` counts what the encoder took.
async fn put(
    e: &mut Encoder,
    st: &mut Stages<'_, '_, '_, '_>,
    input: &[u8],
    out: &mut Vec<u8>,
    zin: &mut u64,
) -> Result<(), StreamError> {
    let inflated;
    let mut piece = input;
    if let Some(g) = st.gunzip {
        let mut v = Vec::with_capacity(input.len() * 4);
        g.feed(input, &mut v).map_err(StreamError::Decode)?;
        inflated = v;
        piece = &inflated;
    }
    let replaced;
    if let Some(r) = st.sub {
        let mut v = Vec::with_capacity(piece.len());
        r.feed(piece, &mut v);
        replaced = v;
        piece = &replaced;
    }
    let recoded;
    if let Some(r) = st.charset {
        let mut v = Vec::with_capacity(piece.len());
        r.feed(piece, &mut v);
        recoded = v;
        piece = &recoded;
    }
    let processed;
    if let Some(s) = st.ssi {
        if matches!(e, Encoder::Identity) {
            // Nothing encodes after it: the page goes straight out.
            let before = out.len();
            s.feed(st.w, st.ctx, piece, out).await;
            if s.aborted {
                out.truncate(before);
                return Err(StreamError::Aborted);
            }
            *zin += (out.len() - before) as u64;
            return Ok(());
        }
        let mut v = Vec::with_capacity(piece.len());
        s.feed(st.w, st.ctx, piece, &mut v).await;
        if s.aborted {
            return Err(StreamError::Aborted);
        }
        processed = v;
        piece = &processed;
    }
    *zin += piece.len() as u64;
    e.write(piece, out).map_err(StreamError::Encode)
}

/// Where a multipart/byteranges body goes on at `pos`: part headers and
/// trailer in memory, ranges in the file (None at the end).
enum Piece<'b> {
    Mem(&'b [u8]),
    File(u64, u64),
}

/// Feeds `n` bytes of `file` from `at`: from the open-file cache's memory
/// when it holds them, else read into `scratch`.
#[allow(clippy::too_many_arguments)]
async fn put_file(
    e: &mut Encoder,
    st: &mut Stages<'_, '_, '_, '_>,
    file: &crate::http::handler::open_cache::OpenFile,
    at: u64,
    n: u64,
    scratch: &mut Vec<u8>,
    out: &mut Vec<u8>,
    zin: &mut u64,
) -> Result<(), StreamError> {
    if let Some(b) = file.cached_bytes(at, n) {
        return put(e, st, b, out, zin).await;
    }
    let Some(f) = file.file.as_ref() else {
        return Err(StreamError::Read(std::io::ErrorKind::NotFound.into()));
    };
    scratch.clear();
    crate::http::connection::io::pread_into(f, at, n, scratch).map_err(StreamError::Read)?;
    put(e, st, scratch, out, zin).await
}

fn multipart_piece<'b>(
    parts: &'b [(Vec<u8>, crate::http::range::ByteRange)],
    trailer: &'b [u8],
    pos: u64,
) -> Option<Piece<'b>> {
    let mut off = pos;
    for (h, r) in parts {
        let hl = h.len() as u64;
        if off < hl {
            return Some(Piece::Mem(&h[off as usize..]));
        }
        off -= hl;
        let rl = r.end - r.start + 1;
        if off < rl {
            return Some(Piece::File(r.start + off, rl - off));
        }
        off -= rl;
    }
    trailer.get(off as usize..).filter(|t| !t.is_empty()).map(Piece::Mem)
}

/// One piece of an in-memory body; true at its end.
async fn feed_slice(
    e: &mut Encoder,
    st: &mut Stages<'_, '_, '_, '_>,
    b: &[u8],
    pos: &mut u64,
    max: usize,
    out: &mut Vec<u8>,
    zin: &mut u64,
) -> Result<bool, StreamError> {
    let start = (*pos as usize).min(b.len());
    let end = start + (b.len() - start).min(max);
    put(e, st, &b[start..end], out, zin).await?;
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
        StreamError::Decode(e) => log_to!(
            ctx.conf.error_log,
            Level::Error,
            "*{} inflate() failed: {} while sending to client",
            ctx.conn.id,
            e
        ),
        // Logged where the piece was refused, or the subrequest failed.
        StreamError::Slice | StreamError::Aborted => {}
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
