//! The origin's response body on its way to the client. The connection
//! layer pulls it piece by piece with [`UpstreamBody::next`]; with
//! `proxy_buffering` it also reads ahead while the client is slow
//! (`super::ahead`). Either way the origin connection is handed back the
//! moment the origin has sent the whole body, not when the client has it,
//! as nginx finalizes the upstream then.

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::ahead::Store;
use super::response_head::Framing;
use super::upstream_tls::UpStream;
use crate::worker::WorkerCtx;

/// The origin's response body as it streams through to the client.
pub struct UpstreamBody {
    pub stream: Option<UpStream>,
    /// Bytes read past the head, not yet decoded from their framing.
    pub buf: Vec<u8>,
    pub framing: Framing,
    pub read_timeout: Duration,
    /// The origin has sent the whole body (what is left is in `buf` no
    /// more, but may still be in `ahead`).
    pub done: bool,
    /// Where the connection goes afterwards (see `proxy::release`).
    pub release: Option<super::Release>,
    /// Read ahead of the client (`proxy_buffering`, or the origin's
    /// `X-Accel-Buffering`).
    pub buffering: bool,
    /// What was read ahead and not yet passed on; allocated only once a
    /// body outlasts the first client write.
    pub ahead: Option<Box<Store>>,
    /// The origin was read after its head: the body ended later than the
    /// head did, so its end needs a clock reading of its own.
    pub(super) read_since_head: bool,
    /// `$upstream_response_time` as of the origin connection's release.
    pub response_ms: Option<u64>,
    /// The cache entry this body fills as it passes (`proxy_cache`).
    pub cache: Option<Box<crate::http::cache::store::Writer>>,
    /// The file this body is stored to as it passes (`proxy_store`).
    pub store: Option<Box<super::store::StoreFile>>,
    /// A byte range of the body that alone goes to the client (a `Range`
    /// answered from a response being cached): (first byte, length). The
    /// whole body still passes through to the cache.
    pub window: Option<(u64, u64)>,
    /// Body bytes passed on so far, for the window.
    passed: u64,
    /// The release gave a `queue` slot to a waiting request: yield once
    /// before going on (see [`UpstreamBody::next_raw`]).
    pub(super) handed_off: bool,
    /// Bytes read from the origin after its head, framing included, as
    /// nginx counts them: `$upstream_response_length`, and with the head
    /// `$upstream_bytes_received`.
    pub raw_len: u64,
    /// `proxy_limit_rate` (buffered responses only): bytes per second, and
    /// when reading the body began.
    pub limit_rate: Option<(u64, std::time::Instant)>,
    /// The origin's trailers (an HTTP/2 origin's, gRPC's `grpc-status`),
    /// known once the body ended; sent on after it.
    pub trailers: Option<crate::http::fields::Fields>,
}

#[derive(Debug)]
pub enum BodyError {
    Timeout,
    /// The origin closed before the framing said the body ends.
    Truncated,
    Invalid,
    /// A protocol error with its own message (FastCGI records).
    Protocol(String),
    Io(std::io::Error),
    /// The temporary file failed (nginx's `[crit]` line, without context).
    TempFile(String),
}

/// A body dropped by a panicking request still holds its peer's count:
/// it goes to `finish::settle_orphans`. Otherwise dropping changes nothing
/// (the normal paths release explicitly, saying whether the peer failed).
impl Drop for UpstreamBody {
    fn drop(&mut self) {
        if crate::worker::unwind::abandoned()
            && let Some(r) = self.release.take()
        {
            super::finish::orphan(r);
        }
    }
}

impl UpstreamBody {
    pub fn new(stream: UpStream, buf: Vec<u8>, framing: Framing, read_timeout: Duration) -> UpstreamBody {
        let done = matches!(framing, Framing::None(_));
        let raw_len = buf.len() as u64;
        UpstreamBody {
            stream: Some(stream),
            buf,
            framing,
            read_timeout,
            done,
            release: None,
            buffering: false,
            ahead: None,
            read_since_head: false,
            response_ms: None,
            cache: None,
            store: None,
            window: None,
            passed: 0,
            handed_off: false,
            raw_len,
            limit_rate: None,
            trailers: None,
        }
    }

    /// Whether the whole response ends with its head: no body and no
    /// trailers (a gRPC trailers-only answer, whose HEADERS then carry
    /// END_STREAM to an HTTP/2 client, as nginx sends it).
    pub fn ends_with_head(&self) -> bool {
        self.done
            && self.buf.is_empty()
            && self.trailers.is_none()
            && self.window.is_none()
            && matches!(self.framing, Framing::None(_))
    }

    /// The length, when the origin said it.
    pub fn known_len(&self) -> Option<u64> {
        if let Some((_, len)) = self.window {
            return Some(len);
        }
        match &self.framing {
            Framing::None(declared) => Some(declared.unwrap_or(0)),
            Framing::Length(n) => Some(*n),
            Framing::FastCgi(b) => b.declared_len(),
            Framing::Memcached(v) => Some(v.len),
            _ => None,
        }
    }

    /// Appends the next piece of body to `out` (up to about `max` bytes);
    /// Ok(false) once the body is complete (or, with a window, once the
    /// window has gone out: [`UpstreamBody::next_raw`] reads the rest).
    pub async fn next(&mut self, w: &WorkerCtx, out: &mut Vec<u8>, max: usize) -> Result<bool, BodyError> {
        let Some((start, len)) = self.window else { return self.next_raw(w, out, max).await };
        loop {
            if self.passed >= start + len {
                return Ok(false);
            }
            let before = out.len();
            let more = self.next_raw(w, out, max).await?;
            let got = (out.len() - before) as u64;
            let (from, to) = (self.passed, self.passed + got);
            self.passed = to;
            // Keep only the part of [from, to) inside [start, start + len).
            let keep_from = start.max(from).min(to) - from;
            let keep_to = (start + len).min(to).max(from) - from;
            out.truncate(before + keep_to as usize);
            out.drain(before..before + keep_from as usize);
            if out.len() > before || !more {
                return Ok(more && self.passed < start + len);
            }
        }
    }

    /// [`UpstreamBody::next`] without the window: every body byte.
    pub async fn next_raw(&mut self, w: &WorkerCtx, out: &mut Vec<u8>, max: usize) -> Result<bool, BodyError> {
        if let Some(a) = self.ahead.as_mut() {
            if !a.is_empty() {
                a.take(out, max).map_err(|e| BodyError::TempFile(format!("pread() failed ({})", os_error(&e))))?;
                return Ok(true);
            }
            if let Some(e) = a.failed.take() {
                return Err(e);
            }
        }
        loop {
            if self.done {
                super::release(w, self);
                self.yield_to_next().await;
                return Ok(false);
            }
            let before = out.len();
            self.decode(max, &mut |data| out.extend_from_slice(data))?;
            if out.len() > before {
                if self.done {
                    super::release(w, self);
                    self.yield_to_next().await;
                }
                return Ok(true);
            }
            if self.done {
                continue;
            }
            // Need more bytes from the origin.
            if !self.read_more(w, max.clamp(4096, 64 * 1024)).await? {
                return Ok(false);
            }
        }
    }

    /// After a release that handed the `queue` slot to a waiting request,
    /// lets that request run before this one goes on to compress and write
    /// its last piece: the waiter's connect and request then reach the
    /// origin at once. Without it the origin (php-fpm's child, say) sat
    /// idle for as long as this task kept the worker busy, which with
    /// brotli on a 27 KB page kept php-fpm about 25 % idle; nginx, having
    /// no queue, never leaves that gap because its next connection already
    /// waits in the origin's listen backlog.
    async fn yield_to_next(&mut self) {
        if std::mem::take(&mut self.handed_off) {
            tokio::task::yield_now().await;
        }
    }

    /// Moves body bytes out of the raw buffer into `sink` (at most `max`
    /// for a known length), by the framing; sets `done` at the body's end.
    pub(super) fn decode(&mut self, max: usize, sink: &mut dyn FnMut(&[u8])) -> Result<(), BodyError> {
        // Every body byte passes here exactly once (whether it goes to the
        // client now or to the read-ahead store): the cache entry is fed
        // from the same place.
        let (cache, store) = (&mut self.cache, &mut self.store);
        let mut tee = |data: &[u8]| {
            if let Some(c) = cache.as_mut() {
                c.push(data);
            }
            if let Some(s) = store.as_mut() {
                s.push(data);
            }
            sink(data)
        };
        let sink = &mut tee;
        match &mut self.framing {
            Framing::None(_) => self.done = true,
            Framing::Length(left) => {
                let n = (*left).min(self.buf.len() as u64).min(max as u64) as usize;
                if n > 0 {
                    sink(&self.buf[..n]);
                    self.buf.drain(..n);
                    *left -= n as u64;
                }
                self.done = *left == 0;
            }
            Framing::Chunked(d) => {
                if !self.buf.is_empty() {
                    let used = d.feed(&self.buf, |data| sink(data)).map_err(|_| BodyError::Invalid)?;
                    self.buf.drain(..used);
                    self.done = d.is_done();
                }
            }
            Framing::Close | Framing::Stream => {
                if !self.buf.is_empty() {
                    sink(&self.buf);
                    self.buf.clear();
                }
            }
            Framing::FastCgi(b) => {
                let used = b.decode(&self.buf, sink)?;
                self.buf.drain(..used);
                self.done = b.is_done();
            }
            Framing::Memcached(v) => {
                let used = v.decode(&self.buf, max, sink);
                self.buf.drain(..used);
                self.done = v.is_done();
            }
        }
        Ok(())
    }

    /// One read of at most `want` bytes from the origin into the raw
    /// buffer; Ok(false) when the origin closed where that ends the body
    /// (its connection is then released).
    pub(super) async fn read_more(&mut self, w: &WorkerCtx, mut want: usize) -> Result<bool, BodyError> {
        use bytes::BufMut;
        if let Some((rate, start)) = self.limit_rate {
            want = want.min(self.rate_allows(rate, start).await);
        }
        let Some(s) = self.stream.as_mut() else { return Err(BodyError::Truncated) };
        self.read_since_head = true;
        self.buf.reserve(want);
        let mut room = (&mut self.buf).limit(want);
        match crate::clock::timeout(self.read_timeout, s.read_buf(&mut room)).await {
            Err(_) => Err(BodyError::Timeout),
            // A gRPC origin's broken stream is nginx's own line, not a
            // failed recv().
            Ok(Err(e)) if matches!(self.stream, Some(UpStream::H2(_))) => Err(match e.kind() {
                std::io::ErrorKind::InvalidData => BodyError::Protocol(e.to_string()),
                std::io::ErrorKind::UnexpectedEof => BodyError::Truncated,
                _ => BodyError::Io(e),
            }),
            Ok(Err(e)) => Err(BodyError::Io(e)),
            Ok(Ok(0)) => {
                if matches!(self.framing, Framing::Stream) {
                    // The HTTP/2 stream ended: its trailers go on after the
                    // body, and the connection may carry another request.
                    if let Some(UpStream::H2(c)) = self.stream.as_mut() {
                        self.trailers = c.take_trailers();
                    }
                    self.done = true;
                    super::release(w, self);
                    return Ok(false);
                }
                if matches!(self.framing, Framing::Close) {
                    self.done = true;
                    self.stream = None;
                    super::release(w, self);
                    return Ok(false);
                }
                Err(BodyError::Truncated)
            }
            Ok(Ok(n)) => {
                self.raw_len += n as u64;
                Ok(true)
            }
        }
    }

    /// nginx's pipe limit: by the end of second S of the body, `rate` ×
    /// (S + 1) bytes may have been read; over that, wait until the budget
    /// allows more. Returns how much may be read now.
    async fn rate_allows(&self, rate: u64, start: std::time::Instant) -> usize {
        loop {
            let secs = crate::clock::mono().saturating_duration_since(start).as_secs();
            let allowed = i128::from(rate) * i128::from(secs + 1) - i128::from(self.raw_len);
            if allowed > 0 {
                return usize::try_from(allowed).unwrap_or(usize::MAX);
            }
            let ms = u64::try_from(-allowed * 1000 / i128::from(rate)).unwrap_or(u64::MAX / 2) + 1;
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }
}

fn os_error(e: &std::io::Error) -> String {
    crate::process::signal::os_error(e)
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody").field("framing", &self.framing).field("done", &self.done).finish()
    }
}
