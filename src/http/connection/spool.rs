//! A request body being buffered before it goes to the origin: in memory up
//! to `client_body_buffer_size`, then in an unlinked temporary file under
//! `client_body_temp_path`, as nginx buffers bodies. An upload of any size
//! costs a file, not its size in memory, and stays whole for a retry on the
//! next peer.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Spool<'a> {
    mem: Vec<u8>,
    file: Option<File>,
    name: Option<TempName>,
    len: u64,
    limit: usize,
    dir: &'a Path,
    naming: Naming,
}

/// How a body's temporary file is made: anonymous (nothing can see it),
/// or named as nginx names it (`client_body_temp_path/0000000001`) for
/// `$request_body_file` and `client_body_in_file_only`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    Anonymous,
    /// A named file unlinked as soon as it is open (nginx's non-persistent
    /// temp file: `$request_body_file` names a file already gone).
    Unlinked,
    /// `client_body_in_file_only on`: the file stays after the request.
    Kept,
    /// `client_body_in_file_only clean`: removed when the request ends.
    Clean,
}

/// How the request bodies of a location are spooled: nginx names the file
/// when `client_body_in_file_only` asks, or (here) when some template reads
/// `$request_body_file`.
pub fn naming(conf: &crate::config::model::LocConf) -> Naming {
    match conf.client_body_in_file_only {
        Naming::Anonymous if crate::variables::request_body_file_used() => Naming::Unlinked,
        n => n,
    }
}

/// A proxied request body read whole by HTTP/2 or HTTP/3: named as
/// [`naming`] says, unless nginx would have passed it on unbuffered
/// (`proxy_request_buffering off`), which leaves no file to name.
pub fn proxied_naming(conf: &crate::config::model::LocConf) -> Naming {
    if crate::http::proxy::up_conf(conf).request_buffering { naming(conf) } else { Naming::Anonymous }
}

/// The name of a body's temporary file; a `Clean` one is removed when the
/// body is dropped, at the end of its request.
#[derive(Debug)]
pub struct TempName {
    pub path: PathBuf,
    remove: bool,
}

impl Drop for TempName {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A complete buffered body.
#[derive(Debug)]
pub enum Spooled {
    Memory(Vec<u8>),
    File { file: File, len: u64, name: Option<TempName> },
}

impl Spooled {
    /// The file's name, for `$request_body_file`.
    pub fn file_name(&self) -> Option<&Path> {
        match self {
            Spooled::File { name: Some(n), .. } => Some(&n.path),
            _ => None,
        }
    }

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
        Spool { mem: Vec::new(), file: None, name: None, len: 0, limit, dir, naming: Naming::Anonymous }
    }

    /// A spool whose file is named; `Kept` and `Clean` put every byte in
    /// the file (`client_body_in_file_only`).
    pub fn named(limit: usize, dir: &'a Path, naming: Naming) -> Spool<'a> {
        let limit = if matches!(naming, Naming::Kept | Naming::Clean) { 0 } else { limit };
        Spool { naming, ..Spool::new(limit, dir) }
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
            let mut f = if self.naming == Naming::Anonymous {
                temp_file(self.dir)?
            } else {
                let (f, name) = named_temp_file(self.dir, self.naming)?;
                self.name = Some(name);
                f
            };
            f.write_all(&self.mem).map_err(|e| write_failed(self.dir, &e))?;
            self.mem = Vec::new();
            self.file = Some(f);
        }
        match &mut self.file {
            Some(f) => f.write_all(data).map_err(|e| write_failed(self.dir, &e)),
            None => Ok(()),
        }
    }

    pub fn finish(mut self) -> Spooled {
        if self.file.is_none() && matches!(self.naming, Naming::Kept | Naming::Clean) {
            // `client_body_in_file_only` with an empty body: nginx still
            // makes the (empty) file.
            if let Ok((f, name)) = named_temp_file(self.dir, self.naming) {
                self.file = Some(f);
                self.name = Some(name);
            }
        }
        match self.file {
            Some(file) => Spooled::File { file, len: self.len, name: self.name },
            None => Spooled::Memory(self.mem),
        }
    }
}

/// A named temporary file in `dir` that is removed when its name is
/// dropped unless it was renamed away first: a WebDAV PUT's body, written
/// there and renamed into place (`http::dav::put`).
pub(crate) fn rename_source(dir: &Path) -> Result<(File, TempName), String> {
    named_temp_file(dir, Naming::Clean)
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

/// The number in the next temporary file's name; starts from the process
/// id so that two servers sharing a directory rarely collide, and a name
/// taken is skipped (`O_EXCL`), as nginx's `ngx_create_temp_file`.
static NEXT: AtomicU32 = AtomicU32::new(0);

fn named_temp_file(dir: &Path, naming: Naming) -> Result<(File, TempName), String> {
    let fail = |e: io::Error, p: &Path| {
        format!("open() \"{}\" failed ({})", p.display(), crate::process::signal::os_error(&e))
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|e| fail(e, dir))?;
    }
    let _ = NEXT.compare_exchange(0, std::process::id().wrapping_mul(1000) | 1, Ordering::Relaxed, Ordering::Relaxed);
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{n:010}"));
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path) {
            Ok(f) => {
                if naming == Naming::Unlinked {
                    let _ = std::fs::remove_file(&path);
                }
                return Ok((f, TempName { path, remove: naming == Naming::Clean }));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(fail(e, &path)),
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
        Spooled::File { file, len, .. } => {
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

    #[test]
    fn named_files_as_nginx_keeps_them() {
        let dir = std::env::temp_dir().join(format!("sluice-spool-named-{}", std::process::id()));
        // Unlinked: the name is known, the file already gone.
        let mut s = Spool::named(4, &dir, Naming::Unlinked);
        s.push(b"ab").expect("push");
        assert!(matches!(s.finish(), Spooled::Memory(_)));
        let mut s = Spool::named(4, &dir, Naming::Unlinked);
        s.push(b"abcdefgh").expect("push");
        let body = s.finish();
        let name = body.file_name().expect("named").to_path_buf();
        assert!(!name.exists());
        // Kept: even a small body is in the file, which outlives the body.
        let mut s = Spool::named(4, &dir, Naming::Kept);
        s.push(b"ab").expect("push");
        let body = s.finish();
        let kept = body.file_name().expect("named").to_path_buf();
        drop(body);
        assert_eq!(std::fs::read(&kept).expect("kept"), b"ab");
        // Clean: gone with the body.
        let mut s = Spool::named(4, &dir, Naming::Clean);
        s.push(b"ab").expect("push");
        let body = s.finish();
        let clean = body.file_name().expect("named").to_path_buf();
        assert_eq!(std::fs::read(&clean).expect("clean"), b"ab");
        drop(body);
        assert!(!clean.exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
