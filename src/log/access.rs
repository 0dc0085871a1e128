//! Per-worker buffered access logs. Lines accumulate in a worker-local
//! buffer and reach the file in one `write` when the buffer fills, when the
//! oldest line is `flush` old, and at shutdown or reopen, so logging costs
//! no syscall per request. Buffers only ever hold whole lines, and files are
//! opened with O_APPEND, so workers sharing a file never interleave lines.

use std::fs::File;
use std::io::Write;

use crate::config::model::{AccessLogFile, AccessLogRef};
use crate::variables::VarSource;

struct Writer {
    file: File,
    buf: Vec<u8>,
    cap: usize,
    flush_secs: u64,
    /// When the oldest unflushed line was written.
    since: Option<u64>,
}

impl Writer {
    fn flush(&mut self) {
        if !self.buf.is_empty() {
            if let Err(e) = self.file.write_all(&self.buf) {
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
    scratch: Vec<u8>,
}

impl AccessLogs {
    pub fn new(files: Vec<File>, conf: &[AccessLogFile]) -> AccessLogs {
        let writers = files
            .into_iter()
            .zip(conf)
            .map(|(file, c)| Writer {
                file,
                buf: Vec::new(),
                cap: c.buffer.max(1),
                flush_secs: c.flush.as_secs().max(1),
                since: None,
            })
            .collect();
        AccessLogs { writers, scratch: Vec::new() }
    }

    pub fn log(&mut self, refs: &[AccessLogRef], vars: &dyn VarSource) {
        for r in refs {
            let Some(w) = self.writers.get_mut(r.file) else { continue };
            if w.buf.capacity() == 0 {
                w.buf.reserve(w.cap.min(64 * 1024));
            }
            let before = w.buf.len();
            r.format.render(vars, &mut self.scratch, &mut w.buf);
            if w.since.is_none() {
                w.since = Some(crate::clock::now_secs());
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
