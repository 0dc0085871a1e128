//! sluice's server-side HTTP/2 connection loop, on its own frame codec
//! (`h2/frame`) and HPACK (`h2/hpack`). (The `h2` crate serves only the
//! client side: gRPC and HTTP/2 origins.)
//!
//! One loop per connection: each turn reads what the socket has, handles
//! every complete frame (a finished request header block starts its
//! stream's handler at once and polls it inline, so a response that is
//! ready, such as a file from the open-file cache, a cache hit or a
//! `return`, is encoded into the output buffer before the next frame is
//! read), then writes everything the streams appended in one write. A
//! stream whose handler must wait (an origin, a window) continues as a
//! task and wakes the loop when it appends frames.
//!
//! * `state`: the state the loop and the handles share: streams, windows,
//!   queues, the HPACK encoder and the output buffer.
//! * `handles`: a stream's head and body senders and its request body.
//! * `headers`: a header block as a request, with RFC 9113's rules.
//! * `recv`: what each frame does.
//!
//! The abuse bounds are today's: the header block is bounded as it arrives
//! by the header list limit (CONTINUATION floods, HPACK bombs), rapid
//! resets cut the connection as in `h2/mod`, a peer provoking too many
//! stream errors gets ENHANCE_YOUR_CALM, reading stops while the peer does
//! not read our answers (SETTINGS and PING floods), and `send_timeout`
//! closes a connection whose peer stopped reading.

pub mod handles;
pub mod headers;
mod priority;
mod recv;
pub mod state;

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

use super::frame::{self, Code};
use super::hpack::Decoder;
use super::{RESET_FLOOR, Shared};
use crate::http::handler::ctx::ConnInfo;
use crate::log::error::Level;
use crate::log_to;
use crate::worker::{ConnGuard, WorkerCtx};

/// Reads stop while this much output waits for a peer that does not read.
const OUT_HIGH: usize = 256 * 1024;
/// One read: a whole frame of the protocol's default size, and its head
/// (larger DATA frames are taken piecewise).
const READ_BUF: usize = frame::MIN_MAX_FRAME as usize + frame::HEAD_LEN;
/// Stream errors a peer may provoke before the connection is cut (the h2
/// crate's `max_local_error_reset_streams`).
const LOCAL_RESETS: u64 = 256;

pub struct Loop {
    st: Rc<RefCell<state::Conn>>,
    dec: Decoder,
    cont: Option<recv::Continuing>,
    /// The rest of a large frame still arriving, passed on piecewise.
    rest: Option<recv::Rest>,
    /// How far an incomplete HEADERS frame's block has been looked at.
    partial_scan: usize,
    preface_left: usize,
    frame_seen: bool,
    last_id: u32,
    goaway_sent: bool,
    peer_goaway: bool,
    /// Stop reading; close once the output is written.
    exiting: bool,
    max_streams: usize,
    header_limit: usize,
    /// The HTTP/1 header rules a request's fields keep
    /// (`ignore_invalid_headers`, `max_headers`).
    limits: crate::http::connection::h1::codec::Limits,
    /// Pseudo-header and cookie values while a header block is decoded.
    scratch: Vec<u8>,
    /// Our SETTINGS_MAX_FRAME_SIZE.
    frame_limit: u32,
    w: Rc<WorkerCtx>,
    group: usize,
    info: ConnInfo,
    shared: Rc<Shared>,
    requests: u64,
    keepalive_requests: u64,
    keepalive_time: Duration,
}

enum Exit {
    /// Everything written; the connection is done.
    Done,
    /// The peer closed or the socket failed.
    Eof,
    /// The peer reset the connection (nginx logs its failed recv()).
    Reset,
    Broken,
}

pub async fn serve<T>(mut io: T, info: ConnInfo, group: usize, guard: ConnGuard)
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let w = guard.0.clone();
    let g = &w.cfg.http.listens[group];
    let conf = &g.default_server.conf;
    let (n, size) = conf.large_client_header_buffers;
    let header_limit = n * size;
    let stream_target = conf.http2.body_preread_size.clamp(0, (1 << 31) - 1) as u32;
    let conn_target = conf.http2.recv_buffer_size.clamp(65535, (1 << 31) - 1) as u32;
    // nginx announces frames of any size (2^24-1) and reads them
    // piecewise. Here the protocol's default (16 KiB) is announced and
    // enforced with the default buffers, as RFC 9113 wants a receiver's
    // limit enforced (h2spec 4.2/2 and 4.2/3 send 16,385 bytes whatever
    // was announced); buffers raised past nginx's defaults raise it to the
    // most a header block or a stream's window may hold, so a client may
    // send either in one frame, as to nginx. Frames past the default size
    // are read piecewise (`recv::Rest`), never held whole.
    let raised = header_limit > 4 * 8192 || stream_target > 64 * 1024;
    let frame_limit = if raised {
        (header_limit.min(u32::MAX as usize) as u32)
            .max(stream_target)
            .clamp(frame::MIN_MAX_FRAME, frame::MAX_MAX_FRAME)
    } else {
        frame::MIN_MAX_FRAME
    };
    let st = Rc::new(RefCell::new(state::Conn::new(stream_target, conn_target)));
    {
        let mut s = st.borrow_mut();
        let mut params = vec![
            (frame::MAX_CONCURRENT_STREAMS, conf.http2.max_concurrent_streams),
            (frame::INITIAL_WINDOW_SIZE, stream_target),
            (frame::MAX_HEADER_LIST_SIZE, header_limit.min(u32::MAX as usize) as u32),
            (frame::ENABLE_CONNECT_PROTOCOL, 1),
        ];
        if frame_limit > frame::MIN_MAX_FRAME {
            params.push((frame::MAX_FRAME_SIZE, frame_limit));
        }
        frame::write_settings(&mut s.out, &params);
        if conn_target > 65535 {
            frame::write_window_update(&mut s.out, 0, conn_target - 65535);
        }
    }
    let shared = Rc::new(Shared::default());
    shared.last_active.set(Some(Instant::now()));
    let mut lp = Loop {
        st: st.clone(),
        dec: Decoder::new(super::hpack::encode::MAX_TABLE).with_field_limit(size),
        cont: None,
        rest: None,
        partial_scan: 0,
        preface_left: recv::PREFACE.len(),
        frame_seen: false,
        last_id: 0,
        goaway_sent: false,
        peer_goaway: false,
        exiting: false,
        max_streams: conf.http2.max_concurrent_streams as usize,
        header_limit,
        limits: crate::http::connection::h1::conn::limits(g),
        scratch: Vec::new(),
        frame_limit,
        w: w.clone(),
        group,
        info,
        shared: shared.clone(),
        requests: 0,
        keepalive_requests: conf.keepalive_requests,
        keepalive_time: conf.keepalive_time,
    };
    let started = Instant::now();
    let mut rbuf: Vec<u8> = Vec::new();
    let mut filled = 0usize;
    let mut written = 0usize;
    // A flush that returned Pending (see the write step below).
    let mut unflushed = false;
    let mut stall: Option<Instant> = None;
    // Since when the buffer has held the start of a frame, and what is
    // still to be skipped of a header frame given up on (`header_timeout`).
    let mut partial_since: Option<Instant> = None;
    let mut skip = 0usize;
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut counted = false;
    let exit = std::future::poll_fn(|cx| {
        loop {
            // Write all that the streams gathered, in one go.
            let mut progress = false;
            {
                let mut s = st.borrow_mut();
                if !s.loop_waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    s.loop_waker = Some(cx.waker().clone());
                }
                while written < s.out.len() {
                    match Pin::new(&mut io).poll_write(cx, &s.out[written..]) {
                        Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(Exit::Broken),
                        Poll::Ready(Ok(n)) => {
                            written += n;
                            stall = None;
                        }
                        Poll::Pending => {
                            stall.get_or_insert_with(Instant::now);
                            break;
                        }
                    }
                }
                // Flushed again on every turn until it completes: a TLS
                // stream takes the last bytes into its own buffer and only
                // a flush writes them, so a flush left pending with nothing
                // new to write would hold a response's end back for good.
                if written == s.out.len() && (written > 0 || unflushed) {
                    s.out.clear();
                    written = 0;
                    match Pin::new(&mut io).poll_flush(cx) {
                        Poll::Ready(Err(_)) => return Poll::Ready(Exit::Broken),
                        Poll::Ready(Ok(())) => {
                            unflushed = false;
                            stall = None;
                        }
                        Poll::Pending => {
                            unflushed = true;
                            stall.get_or_insert_with(Instant::now);
                        }
                    }
                }
                let pending = s.out.len() - written;
                if lp.exiting && pending == 0 {
                    return Poll::Ready(Exit::Done);
                }
                if (lp.goaway_sent || lp.peer_goaway) && s.open == 0 && lp.shared.active.get() == 0 && pending == 0 {
                    return Poll::Ready(Exit::Done);
                }
                if pending > OUT_HIGH || lp.exiting {
                    break;
                }
            }
            // Read and handle every complete frame.
            // Room for the rest of a frame larger than one read.
            if rbuf.len() < filled + READ_BUF {
                rbuf.resize(filled + READ_BUF, 0);
            }
            let mut rb = ReadBuf::new(&mut rbuf[filled..]);
            match Pin::new(&mut io).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let mut n = rb.filled().len();
                    if n == 0 {
                        return Poll::Ready(Exit::Eof);
                    }
                    if skip > 0 {
                        let k = skip.min(n);
                        rbuf.copy_within(filled + k..filled + n, filled);
                        n -= k;
                        skip -= k;
                    }
                    filled += n;
                    progress = n > 0;
                    if !progress {
                        continue;
                    }
                }
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                    return Poll::Ready(Exit::Reset);
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Exit::Eof),
                Poll::Pending => {}
            }
            if progress {
                match lp.on_bytes(&rbuf[..filled]) {
                    Ok(used) => {
                        rbuf.copy_within(used..filled, 0);
                        filled -= used;
                        if used > 0 || filled == 0 {
                            partial_since = (filled > 0).then(Instant::now);
                        } else {
                            partial_since.get_or_insert_with(Instant::now);
                        }
                    }
                    Err((code, why)) => lp.connection_error(code, why),
                }
                if !counted && lp.frame_seen {
                    counted = true;
                    lp.w.metrics.h2_connection();
                }
                lp.after_frames();
                continue;
            }
            break;
        }
        // Timers.
        while ticker.poll_tick(cx).is_ready() {
            if partial_since.is_some_and(|t| t.elapsed() >= lp.header_timeout_after())
                && let Some(left) = lp.header_timeout(&rbuf[..filled])
            {
                skip = left;
                filled = 0;
                partial_since = None;
            }
            if let Some(exit) = lp.tick(stall, started, filled == 0) {
                if filled == 0 && written == 0 && st.borrow().out.is_empty() {
                    rbuf = Vec::new();
                }
                return Poll::Ready(exit);
            }
            if filled == 0 && lp.shared.active.get() == 0 && st.borrow().out.is_empty() {
                // Idle: the buffers go back until the next frame.
                rbuf = Vec::new();
                st.borrow_mut().out = Vec::new();
                written = 0;
            }
        }
        Poll::Pending
    })
    .await;
    if matches!(exit, Exit::Reset) {
        log_to!(
            conf.error_log,
            Level::Info,
            "*{} recv() failed ({}) while processing HTTP/2 connection, client: {}, server: {}",
            lp.info.id,
            crate::process::signal::os_error(&std::io::Error::from_raw_os_error(libc::ECONNRESET)),
            lp.info.peer.ip(),
            g.addr
        );
    } else if matches!(exit, Exit::Eof) && lp.shared.active.get() > 0 {
        log_to!(
            conf.error_log,
            Level::Info,
            "*{} client prematurely closed connection while processing HTTP/2 connection, client: {}, server: {}",
            lp.info.id,
            lp.info.peer.ip(),
            g.addr
        );
    }
    st.borrow_mut().kill();
    if matches!(exit, Exit::Done) {
        let _ = tokio::time::timeout(Duration::from_secs(1), io.shutdown()).await;
    }
    drop(lp);
    drop(guard);
}

impl Loop {
    fn connection_error(&mut self, code: Code, why: &str) {
        let conf = &self.w.cfg.http.listens[self.group].default_server.conf;
        log_to!(
            conf.error_log,
            Level::Info,
            "*{} HTTP/2 connection error ({}: {:?}), client: {}",
            self.info.id,
            why,
            code,
            self.info.peer.ip()
        );
        self.goaway(code);
        self.exiting = true;
    }

    fn goaway(&mut self, code: Code) {
        if !self.goaway_sent || code != Code::NoError {
            frame::write_goaway(&mut self.st.borrow_mut().out, self.last_id, code, b"");
        }
        self.goaway_sent = true;
        self.st.borrow_mut().wake_loop();
    }

    /// The limits checked after each batch of frames.
    fn after_frames(&mut self) {
        let s = &self.shared;
        let calm = s.resets.get() > RESET_FLOOR && s.resets.get() > s.completed.get();
        if (calm || self.st.borrow().local_resets > LOCAL_RESETS) && !self.exiting {
            let conf = &self.w.cfg.http.listens[self.group].default_server.conf;
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client reset {} streams (rapid reset), closing connection, client: {}",
                self.info.id,
                s.resets.get() + self.st.borrow().local_resets,
                self.info.peer.ip()
            );
            self.goaway(Code::EnhanceYourCalm);
            self.exiting = true;
        }
    }

    /// The half-second timer: the preface's and the peer's read timeouts,
    /// keep-alive and graceful shutdown.
    fn tick(&mut self, stall: Option<Instant>, started: Instant, between_frames: bool) -> Option<Exit> {
        let w = self.w.clone();
        let conf = &w.cfg.http.listens[self.group].default_server.conf;
        if w.aborting.get() {
            // `worker_shutdown_timeout` is up: closed, its streams' requests
            // ending as the client's abort (499), as nginx's do.
            return Some(Exit::Broken);
        }
        if !self.frame_seen && started.elapsed() >= conf.client_header_timeout {
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client timed out (110: Connection timed out) while waiting for the HTTP/2 preface, client: {}",
                self.info.id,
                self.info.peer.ip()
            );
            return Some(Exit::Broken);
        }
        if stall.is_some_and(|t| t.elapsed() >= conf.send_timeout) {
            log_to!(
                conf.error_log,
                Level::Info,
                "*{} client timed out (110: Connection timed out) while sending to client, client: {}",
                self.info.id,
                self.info.peer.ip()
            );
            return Some(Exit::Broken);
        }
        let idle = self.shared.active.get() == 0 && self.st.borrow().open == 0 && between_frames;
        let idle_for = self.shared.last_active.get().map(|t| t.elapsed()).unwrap_or_default();
        // Until its first request a connection may wait as long as for a
        // request's head, or keepalive_timeout if longer; after it,
        // keepalive_timeout (0: none).
        let limit = if self.requests == 0 {
            conf.keepalive_timeout.max(conf.client_header_timeout)
        } else {
            conf.keepalive_timeout
        };
        if !self.goaway_sent && (self.w.draining.get() || (idle && idle_for >= limit)) {
            self.goaway(Code::NoError);
        }
        if self.goaway_sent && idle && idle_for >= conf.keepalive_timeout + Duration::from_secs(5) {
            return Some(Exit::Broken);
        }
        None
    }

    fn header_timeout_after(&self) -> Duration {
        self.w.cfg.http.listens[self.group].default_server.conf.client_header_timeout
    }

    /// A header frame that stopped arriving for `client_header_timeout`:
    /// its stream is reset with PROTOCOL_ERROR and the rest of the frame
    /// will be skipped as it comes (returned: how much), as nginx does;
    /// the connection goes on. None for the start of any other frame.
    fn header_timeout(&mut self, partial: &[u8]) -> Option<usize> {
        let head = frame::Head::parse(partial.get(..frame::HEAD_LEN)?.try_into().ok()?);
        if head.kind != frame::HEADERS && head.kind != frame::CONTINUATION {
            return None;
        }
        let conf = &self.w.cfg.http.listens[self.group].default_server.conf;
        log_to!(
            conf.error_log,
            Level::Info,
            "*{} client timed out (110: Connection timed out) while reading client request headers, client: {}",
            self.info.id,
            self.info.peer.ip()
        );
        if head.kind == frame::HEADERS && head.stream > self.last_id && head.stream % 2 == 1 {
            self.last_id = head.stream;
        }
        self.cont = None;
        // The next frame's block is walked from its start.
        self.partial_scan = 0;
        let mut st = self.st.borrow_mut();
        st.local_resets += 1;
        frame::write_rst_stream(&mut st.out, head.stream, Code::Protocol);
        st.wake_loop();
        Some(frame::HEAD_LEN + head.len as usize - partial.len())
    }

    /// Starts a stream's handler and polls it once, here.
    fn dispatch(&mut self, id: u32, inc: headers::Incoming) {
        self.requests += 1;
        self.w.metrics.h2_stream();
        self.shared.active.set(self.shared.active.get() + 1);
        self.shared.last_active.set(Some(Instant::now()));
        let (respond, rx) = handles::new(&self.st, id);
        let info = &self.info;
        let sinfo = ConnInfo {
            requests: self.requests,
            tls: info.tls.clone(),
            http2: true,
            proxy_protocol: info.proxy_protocol.clone(),
            started: info.started,
            fd: info.fd,
            unix: info.unix.clone(),
            debug: info.debug,
            ..ConnInfo::new(info.peer, info.local, info.id)
        };
        super::start_stream(self.w.clone(), self.group, sinfo, inc, rx, respond, self.shared.clone());
        if !self.goaway_sent
            && (self.requests >= self.keepalive_requests || self.info.past_keepalive_time(self.keepalive_time))
        {
            self.goaway(Code::NoError);
        }
    }
}
