//! Per-worker buffered access logs. Lines accumulate in a worker-local
//! buffer and reach the file in one `write` when the buffer fills, when the
//! oldest line is `flush` old, and at shutdown or reopen, so logging costs
//! no syscall per request. Buffers only ever hold whole lines, and files are
//! opened with O_APPEND, so workers sharing a file never interleave lines.
//! With `gzip`, each buffer goes out as one gzip member (what nginx
//! writes; `zcat` reads the concatenation). Syslog targets get each line
//! as a datagram at once (`syslog`), through the worker's own socket.

use std::fs::File;
use std::io::Write;

use crate::config::model::{AccessLogFile, AccessLogRef, LogDest};
use crate::log::syslog::{AccessSender, Peer};

struct Writer {
    file: File,
    buf: Vec<u8>,
    cap: usize,
    flush_secs: u64,
    /// When the oldest unflushed line was written.
    since: Option<u64>,
    gzip: Option<u32>,
    /// Written right after the current turn of the event loop (no
    /// `buffer=`: see `AccessLogFile::eager`).
    eager: bool,
}

impl Writer {
    fn flush(&mut self) {
        if !self.buf.is_empty() {
            let written = match self.gzip {
                None => self.file.write_all(&self.buf),
                Some(level) => {
                    let mut z = flate2::write::GzEncoder::new(
                        Vec::with_capacity(self.buf.len() / 4 + 64),
                        flate2::Compression::new(level),
                    );
                    z.write_all(&self.buf).and_then(|_| z.finish()).and_then(|member| self.file.write_all(&member))
                }
            };
            if let Err(e) = written {
                crate::log_error!(crate::log::error::Level::Alert, "write() to access log failed ({})", e);
            }
            self.buf.clear();
        }
        self.since = None;
    }
}

#[derive(Default)]
pub struct AccessLogs {
    writers: Vec<Writer>,
    syslog: Vec<AccessSender>,
    scratch: Vec<u8>,
    /// Wakes the worker's task that writes the eager files' lines once the
    /// turn that logged them is over (`flush_eager`); `pending` while it is
    /// due, so a burst of requests in one turn costs one wake-up and one
    /// `write` per file.
    soon: std::rc::Rc<tokio::sync::Notify>,
    pending: bool,
}

impl AccessLogs {
    pub fn new(files: Vec<File>, conf: &[AccessLogFile], syslog: &[std::sync::Arc<Peer>]) -> AccessLogs {
        let writers = files
            .into_iter()
            .zip(conf)
            .map(|(file, c)| Writer {
                file,
                buf: Vec::new(),
                cap: c.buffer.max(1),
                flush_secs: c.flush.as_secs().max(1),
                since: None,
                gzip: c.gzip,
                eager: c.eager,
            })
            .collect();
        let syslog = syslog.iter().map(|p| AccessSender::new(p.clone())).collect();
        AccessLogs { writers, syslog, scratch: Vec::new(), soon: Default::default(), pending: false }
    }

    pub fn log(&mut self, refs: &[AccessLogRef], vars: &crate::http::handler::ctx::Vars<'_, '_, '_>) {
        self.log_with(refs, vars, |d, line| d.write(vars, line));
    }

    /// One line per target for a session of any family; `dynamic` writes
    /// a line to a path with variables (the family's checks and messages).
    pub fn log_with<V: crate::variables::VarSource>(
        &mut self,
        refs: &[AccessLogRef],
        vars: &V,
        dynamic: impl Fn(&crate::log::access_path::DynamicPath, &[u8]),
    ) {
        for r in refs {
            if let Some(cond) = &r.cond {
                // nginx's `if=`: skipped when the value is empty or "0".
                self.scratch.clear();
                cond.render(vars, &mut self.scratch);
                if self.scratch.is_empty() || self.scratch == b"0" {
                    continue;
                }
            }
            let i = match &r.dest {
                LogDest::File(i) => *i,
                LogDest::Dynamic(d) => {
                    let mut line = Vec::new();
                    r.format.render(vars, &mut self.scratch, &mut line);
                    dynamic(d, &line);
                    continue;
                }
                LogDest::Syslog(i) => {
                    if let Some(s) = self.syslog.get_mut(*i) {
                        s.begin();
                        r.format.render(vars, &mut self.scratch, &mut s.buf);
                        s.finish();
                    }
                    continue;
                }
            };
            let Some(w) = self.writers.get_mut(i) else { continue };
            if w.buf.capacity() == 0 {
                w.buf.reserve(w.cap.min(64 * 1024));
            }
            let before = w.buf.len();
            r.format.render(vars, &mut self.scratch, &mut w.buf);
            if w.since.is_none() {
                w.since = Some(crate::clock::now_secs());
            }
            if w.eager && !self.pending {
                self.pending = true;
                self.soon.notify_one();
            }
            if w.buf.len() >= w.cap {
                if before > 0 && w.buf.len() > w.cap {
                    // Keep the line that overflowed for the next buffer.
                    let line = w.buf.split_off(before);
                    w.flush();
                    w.buf = line;
                    w.since = Some(crate::clock::now_secs());
                    if w.buf.len() >= w.cap {
                        w.flush();
                    }
                } else {
                    w.flush();
                }
            }
        }
    }

    /// Flushes buffers whose oldest line has waited `flush` seconds.
    pub fn tick(&mut self) {
        let now = crate::clock::now_secs();
        for w in &mut self.writers {
            if let Some(s) = w.since
                && now.saturating_sub(s) >= w.flush_secs
            {
                w.flush();
            }
        }
        for s in &mut self.syslog {
            s.report();
        }
    }

    /// What the eager-flush task waits on (see `soon`).
    pub fn soon(&self) -> std::rc::Rc<tokio::sync::Notify> {
        self.soon.clone()
    }

    /// Writes the eager files' lines now if some wait: a connection about
    /// to close calls it, so a client that reads the log once the server
    /// closed (as nginx's tests do) finds its line there.
    pub fn flush_pending(&mut self) {
        if self.pending {
            self.flush_eager();
        }
    }

    /// Writes the eager files' buffered lines.
    pub fn flush_eager(&mut self) {
        self.pending = false;
        for w in self.writers.iter_mut().filter(|w| w.eager) {
            w.flush();
        }
    }

    pub fn flush_all(&mut self) {
        for w in &mut self.writers {
            w.flush();
        }
    }

    /// `-s reopen`: write what is buffered to the old files, then switch.
    pub fn reopen(&mut self, files: Vec<File>) {
        for (w, f) in self.writers.iter_mut().zip(files) {
            w.flush();
            w.file = f;
        }
    }
}
