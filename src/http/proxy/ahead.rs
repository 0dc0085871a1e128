//! nginx's `proxy_buffering on`: while the client is being written to, the
//! origin is read ahead of it into memory (`proxy_buffers`) and, beyond
//! that, into an anonymous temporary file under `proxy_temp_path` (up to
//! `proxy_max_temp_file_size`). A fast origin is thus done with a slow
//! client's request as soon as it has sent it, and its connection (and its
//! `max_conns`/`queue` slot) goes back for the next request instead of
//! waiting for the client. When memory and file are full, reading stops
//! until the client catches up.
//!
//! Everything runs in the request's own task: the connection layer wraps
//! each client write in [`while_writing`], which reads the origin whenever
//! the write waits. No task, lock or allocation is added for a response
//! that arrives whole with its head (the usual small one).

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::os::unix::fs::FileExt;

use super::body::{BodyError, UpstreamBody};
use crate::config::proxy::UpstreamConf;
use crate::http::handler::ctx::ReqCtx;
use crate::worker::WorkerCtx;

/// Runs a client write while reading the origin ahead, when the response
/// is buffered and its body still coming; returns the write's result.
pub async fn while_writing<F: Future>(
    w: &WorkerCtx,
    ctx: &ReqCtx<'_, '_>,
    up: &mut UpstreamBody,
    write: F,
) -> F::Output {
    let mut write = std::pin::pin!(write);
    let conf = super::up_conf(ctx.conf);
    loop {
        if !up.reads_ahead() {
            return write.await;
        }
        tokio::select! {
            biased;
            out = &mut write => return out,
            r = up.read_ahead(w, conf) => {
                if let Err(e) = r {
                    // Not the peer's fault when the disk failed.
                    let failed = !matches!(e, BodyError::TempFile(_));
                    up.ahead.get_or_insert_with(Box::default).failed = Some(e);
                    super::release_as(w, up, failed);
                }
            }
        }
    }
}

impl UpstreamBody {
    fn reads_ahead(&self) -> bool {
        // A failed read released the connection: `stream` is gone then.
        self.buffering && !self.done && self.stream.is_some()
    }

    /// One read from the origin into the store (after what the raw buffer
    /// already holds); never resolves while the store is full, so the client
    /// write is then the only thing that can make progress.
    async fn read_ahead(&mut self, w: &WorkerCtx, conf: &UpstreamConf) -> Result<(), BodyError> {
        let limits = Limits::of(conf);
        self.stash(w, &limits)?;
        if self.done {
            return Ok(());
        }
        let store = self.ahead.get_or_insert_with(Box::default);
        let want = store.next_read(&limits);
        if want == 0 {
            return std::future::pending().await;
        }
        if self.read_more(w, want).await? {
            self.stash(w, &limits)?;
        }
        Ok(())
    }

    /// Decodes what the raw buffer holds into the store; releases the
    /// origin connection when that was the body's end.
    fn stash(&mut self, w: &WorkerCtx, limits: &Limits<'_>) -> Result<(), BodyError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let mut store = self.ahead.take().unwrap_or_default();
        let mut err = None;
        let r = self.decode(usize::MAX, &mut |data| {
            if err.is_none()
                && let Err(e) = store.push(data, limits)
            {
                err = Some(e);
            }
        });
        self.ahead = Some(store);
        r?;
        if let Some(e) = err {
            return Err(BodyError::TempFile(e));
        }
        if self.done {
            super::release(w, self);
        }
        Ok(())
    }
}

/// The limits of one response's store, from its location's configuration.
struct Limits<'a> {
    memory: usize,
    file: u64,
    /// How much to read (and so write to the file) at once once memory is
    /// full: `proxy_temp_file_write_size`.
    write: usize,
    dir: &'a std::path::Path,
}

impl<'a> Limits<'a> {
    fn of(conf: &'a UpstreamConf) -> Limits<'a> {
        let b = &conf.buffers;
        Limits { memory: b.memory(), file: b.max_temp_file, write: b.temp_write(conf.buffer_size), dir: &b.temp_path }
    }
}

/// A read-ahead body in arrival order: pieces in memory and ranges of the
/// temporary file, interleaved as they were stored.
#[derive(Default)]
pub struct Store {
    segs: VecDeque<Seg>,
    /// Bytes held in memory.
    memory: usize,
    file: Option<File>,
    /// The file's unread data is `read..written`; both go back to 0 when
    /// the client has caught up, so the file never grows past the limit.
    read: u64,
    written: u64,
    /// An error met while reading ahead: reported once everything stored
    /// before it has gone to the client.
    pub failed: Option<BodyError>,
}

enum Seg {
    Memory(Vec<u8>),
    File(u64),
}

/// The largest single read ahead (the origin socket's usual batch).
const MAX_READ: usize = 64 * 1024;

impl Store {
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// How much the next read from the origin may bring: what memory has
    /// left, else one temporary-file write; 0 when both are full.
    fn next_read(&self, l: &Limits<'_>) -> usize {
        let memory = l.memory.saturating_sub(self.memory);
        let file = if l.file == 0 { 0 } else { l.file.saturating_sub(self.written).min(MAX_READ as u64) as usize };
        if memory > 0 { memory.min(MAX_READ) } else { file.min(l.write.max(1)) }
    }

    /// Stores body bytes: in memory while it has room, then in the file.
    /// A piece larger than both (bytes that came with the head) stays in
    /// memory beyond the limit, by at most one read.
    fn push(&mut self, mut data: &[u8], l: &Limits<'_>) -> Result<(), String> {
        let memory = l.memory.saturating_sub(self.memory);
        if data.len() > memory && l.file > self.written {
            let (now, rest) = data.split_at(memory);
            self.push_memory(now);
            let n = rest.len().min((l.file - self.written).min(usize::MAX as u64) as usize);
            self.push_file(&rest[..n], l.dir)?;
            data = &rest[n..];
        }
        self.push_memory(data);
        Ok(())
    }

    fn push_memory(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        self.memory += data.len();
        match self.segs.back_mut() {
            Some(Seg::Memory(v)) => v.extend_from_slice(data),
            _ => self.segs.push_back(Seg::Memory(data.to_vec())),
        }
    }

    fn push_file(&mut self, data: &[u8], dir: &std::path::Path) -> Result<(), String> {
        if data.is_empty() {
            return Ok(());
        }
        let file = match &mut self.file {
            Some(f) => f,
            None => self.file.insert(crate::http::connection::spool::temp_file(dir)?),
        };
        file.write_all_at(data, self.written)
            .map_err(|e| format!("pwrite() \"{}\" failed ({})", dir.display(), crate::process::signal::os_error(&e)))?;
        self.written += data.len() as u64;
        match self.segs.back_mut() {
            Some(Seg::File(n)) => *n += data.len() as u64,
            _ => self.segs.push_back(Seg::File(data.len() as u64)),
        }
        Ok(())
    }

    /// Appends the oldest stored bytes (at most `max`) to `out`.
    pub fn take(&mut self, out: &mut Vec<u8>, max: usize) -> std::io::Result<()> {
        let Some(front) = self.segs.front_mut() else { return Ok(()) };
        let emptied = match front {
            Seg::Memory(v) => {
                let n = v.len().min(max);
                out.extend_from_slice(&v[..n]);
                v.drain(..n);
                self.memory -= n;
                v.is_empty()
            }
            Seg::File(len) => {
                let n = (*len).min(max as u64);
                let Some(f) = &self.file else { return Err(std::io::ErrorKind::NotFound.into()) };
                crate::http::connection::io::pread_into(f, self.read, n, out)?;
                self.read += n;
                *len -= n;
                if self.read == self.written {
                    self.read = 0;
                    self.written = 0;
                }
                *len == 0
            }
        };
        if emptied {
            self.segs.pop_front();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(dir: &std::path::Path, memory: usize, file: u64) -> Limits<'_> {
        Limits { memory, file, write: 8, dir }
    }

    fn drain(s: &mut Store, max: usize) -> Vec<u8> {
        let mut out = Vec::new();
        while !s.is_empty() {
            s.take(&mut out, max).expect("take");
        }
        out
    }

    #[test]
    fn bytes_come_back_in_order_across_memory_and_file() {
        let dir = std::env::temp_dir().join(format!("sluice-ahead-{}", std::process::id()));
        let l = limits(&dir, 10, 1000);
        let mut s = Store::default();
        let data: Vec<u8> = (0..=255u8).cycle().take(700).collect();
        let mut want = Vec::new();
        let mut got = Vec::new();
        for (i, piece) in data.chunks(37).enumerate() {
            assert!(s.next_read(&l) > 0);
            s.push(piece, &l).expect("push");
            want.extend_from_slice(piece);
            assert!(s.memory <= 10 + 37);
            // The client takes a little now and then, so new bytes land in
            // memory again behind bytes still in the file.
            if i % 3 == 0 {
                s.take(&mut got, 25).expect("take");
            }
        }
        assert!(s.file.is_some(), "spilled to the file");
        got.extend(drain(&mut s, 13));
        assert_eq!(got, want);
        assert_eq!((s.read, s.written, s.memory), (0, 0, 0), "rewound once caught up");
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn full_memory_and_file_stop_reading() {
        let dir = std::env::temp_dir().join(format!("sluice-ahead-full-{}", std::process::id()));
        let mut s = Store::default();
        let no_file = limits(&dir, 16, 0);
        assert_eq!(s.next_read(&no_file), 16);
        s.push(&[1; 16], &no_file).expect("push");
        assert_eq!(s.next_read(&no_file), 0, "memory full and no file: stop");
        let with_file = limits(&dir, 16, 20);
        assert_eq!(s.next_read(&with_file), 8, "one temp_file_write_size");
        s.push(&[2; 20], &with_file).expect("push");
        assert_eq!(s.next_read(&with_file), 0, "file at its limit");
        assert_eq!(drain(&mut s, 7).len(), 36);
        assert_eq!(s.next_read(&with_file), 16);
        let _ = std::fs::remove_dir(&dir);
    }
}
