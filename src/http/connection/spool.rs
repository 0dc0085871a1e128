//! A request body being buffered before it goes to the origin: in memory up
//! to `client_body_buffer_size`, then in an unlinked temporary file under
//! `client_body_temp_path`, as nginx buffers bodies. An upload of any size
//! costs a file, not its size in memory, and stays whole for a retry on the
//! next peer.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

pub struct Spool<'a> {
    mem: Vec<u8>,
    file: Option<File>,
    len: u64,
    limit: usize,
    dir: &'a Path,
}

/// A complete buffered body.
#[derive(Debug)]
pub enum Spooled {
    Memory(Vec<u8>),
    File { file: File, len: u64 },
}

impl Spooled {
    pub fn len(&self) -> u64 {
        match self {
            Spooled::Memory(m) => m.len() as u64,
            Spooled::File { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> Spool<'a> {
    pub fn new(limit: usize, dir: &'a Path) -> Spool<'a> {
        Spool { mem: Vec::new(), file: None, len: 0, limit, dir }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends body bytes; the error names the file operation that failed,
    /// for nginx's `[crit]` line (the request then gets a 500).
    pub fn push(&mut self, data: &[u8]) -> Result<(), String> {
        self.len += data.len() as u64;
        if self.file.is_none() && self.mem.len() + data.len() <= self.limit {
            self.mem.extend_from_slice(data);
            return Ok(());
        }
        if self.file.is_none() {
            let mut f = temp_file(self.dir)?;
            f.write_all(&self.mem).map_err(|e| write_failed(self.dir, &e))?;
            self.mem = Vec::new();
            self.file = Some(f);
        }
        match &mut self.file {
            Some(f) => f.write_all(data).map_err(|e| write_failed(self.dir, &e)),
            None => Ok(()),
        }
    }

    pub fn finish(self) -> Spooled {
        match self.file {
            Some(file) => Spooled::File { file, len: self.len },
            None => Spooled::Memory(self.mem),
        }
    }
}

fn write_failed(dir: &Path, e: &io::Error) -> String {
    format!("write() to a temporary file in \"{}\" failed ({})", dir.display(), crate::process::signal::os_error(e))
}

/// An anonymous file in `dir` (O_TMPFILE), created with the directory if
/// needed; where the file system has no O_TMPFILE, a named file unlinked
/// at once. Also holds responses read ahead by the proxy.
pub(crate) fn temp_file(dir: &Path) -> Result<File, String> {
    let fail = |e: io::Error| {
        format!("open() a temporary file in \"{}\" failed ({})", dir.display(), crate::process::signal::os_error(&e))
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::open(dir, OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC, Mode::from_raw_mode(0o600)) {
        Ok(fd) => Ok(File::from(fd)),
        Err(_) => {
            let name = dir.join(format!(
                "{:010}.{}",
                std::process::id(),
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
            ));
            let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&name).map_err(fail)?;
            let _ = std::fs::remove_file(&name);
            Ok(f)
        }
    }
}

/// Reads `buf.len()` bytes (or what is left) of a spooled body at `offset`.
pub fn read_at(body: &Spooled, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    match body {
        Spooled::Memory(m) => {
            let start = (offset as usize).min(m.len());
            let n = buf.len().min(m.len() - start);
            buf[..n].copy_from_slice(&m[start..start + n]);
            Ok(n)
        }
        Spooled::File { file, len } => {
            let want = (buf.len() as u64).min(len.saturating_sub(offset)) as usize;
            file.read_exact_at(&mut buf[..want], offset)?;
            Ok(want)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bodies_stay_in_memory_large_ones_go_to_a_file() {
        let dir = std::env::temp_dir().join(format!("sluice-spool-{}", std::process::id()));
        let mut s = Spool::new(8, &dir);
        s.push(b"abcd").expect("push");
        s.push(b"efgh").expect("push");
        assert!(matches!(s.finish(), Spooled::Memory(ref m) if m == b"abcdefgh"));
        let mut s = Spool::new(8, &dir);
        s.push(b"abcdef").expect("push");
        s.push(b"ghijkl").expect("push");
        let body = s.finish();
        assert!(matches!(body, Spooled::File { len: 12, .. }));
        let mut buf = [0u8; 5];
        assert_eq!(read_at(&body, 9, &mut buf).expect("read"), 3);
        assert_eq!(&buf[..3], b"jkl");
        assert_eq!(read_at(&body, 0, &mut buf).expect("read"), 5);
        assert_eq!(&buf, b"abcde");
        // Nothing is left behind in the directory.
        assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 0);
        let _ = std::fs::remove_dir(&dir);
    }
}
