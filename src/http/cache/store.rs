//! Entry files: reading one back (checked, so a bad file is removed and
//! missed, never served) and writing one as the origin's body streams by
//! (into a temporary file renamed into place at the end, so a crash never
//! leaves a half entry under an entry's name).
//!
//! The writes are plain `write(2)`s into the page cache from the worker,
//! each at most one origin read (64 KB), as nginx writes its temp files;
//! the reads are one `open` and one `pread` of the header per disk hit,
//! then `sendfile` of the body on plain connections.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::Arc;

use super::entry::{self, EntryError, Meta};
use super::memory::MemEntry;
use super::zone::{Flight, Hash, Node, Zone};

/// An entry found on disk.
pub struct Found {
    pub meta: Meta,
    pub file: File,
    pub body_at: u64,
    pub file_len: u64,
}

impl Found {
    /// A second handle on the same entry (the file descriptor duplicated):
    /// a background refresh keeps one to revalidate while the other is
    /// sent to the client.
    pub fn try_clone(&self) -> std::io::Result<Found> {
        Ok(Found {
            meta: self.meta.clone(),
            file: self.file.try_clone()?,
            body_at: self.body_at,
            file_len: self.file_len,
        })
    }
}

/// Reads the entry for `h`; Ok(None) when there is none. A file that is
/// not a whole entry for `key` is removed and reported as Err.
pub fn read(zone: &Zone, h: &Hash, key: &[u8]) -> Result<Option<Found>, String> {
    let path = zone.path_of(h);
    let file = match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("open() \"{}\" failed ({})", path.display(), e)),
    };
    match check(&file, key) {
        Ok((meta, body_at, file_len)) => Ok(Some(Found { meta, file, body_at, file_len })),
        Err(why) => {
            let _ = std::fs::remove_file(&path);
            Err(format!("cache file \"{}\" is invalid ({}), removed", path.display(), why))
        }
    }
}

/// The header of an open entry file, checked against the file's size and
/// (when given) the key it must hold.
pub fn check(file: &File, key: &[u8]) -> Result<(Meta, u64, u64), &'static str> {
    let len = file.metadata().map_err(|_| "fstat failed")?.len();
    let mut buf = vec![0u8; len.min(4096) as usize];
    let n = file.read_at(&mut buf, 0).map_err(|_| "read failed")?;
    buf.truncate(n);
    let (meta, hl) = match entry::decode(&buf) {
        Err(EntryError::Short(need)) if (need as u64) <= len && need <= entry::MAX_HEADER => {
            let mut full = vec![0u8; need];
            file.read_exact_at(&mut full, 0).map_err(|_| "short header")?;
            entry::decode(&full).map_err(|_| "bad header")?
        }
        Err(EntryError::Short(_)) => return Err("truncated header"),
        Err(EntryError::Bad(why)) => return Err(why),
        Ok(x) => x,
    };
    if hl as u64 + meta.body_len != len {
        return Err("size does not match the header (truncated)");
    }
    if !key.is_empty() && meta.key != key {
        return Err("holds another key");
    }
    Ok((meta, hl as u64, len))
}

/// The body bytes of a found entry (for the memory tier).
pub fn body(found: &Found) -> Option<Vec<u8>> {
    let mut v = vec![0u8; found.meta.body_len as usize];
    found.file.read_exact_at(&mut v, found.body_at).ok()?;
    Some(v)
}

/// An entry being written as the body streams through.
pub struct Writer {
    zone: Arc<Zone>,
    hash: Hash,
    /// The key's own hash when this is one variant of it (its node then
    /// records the Vary value).
    main: Option<Hash>,
    temp: PathBuf,
    file: Option<File>,
    header: Vec<u8>,
    meta: Meta,
    written: u64,
    /// A copy of the body while it is small enough for the memory tier.
    mem: Option<Vec<u8>>,
    flight: Option<Arc<Flight>>,
    committed: bool,
    pub error: Option<String>,
}

impl Writer {
    /// Starts an entry; Err with the reason (for the error log) when its
    /// file cannot be created.
    pub fn start(
        zone: Arc<Zone>,
        hash: Hash,
        main: Option<Hash>,
        meta: Meta,
        flight: Option<Arc<Flight>>,
    ) -> Result<Writer, String> {
        let temp = zone.temp_path(&hash);
        if let Some(dir) = temp.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("mkdir() \"{}\" failed ({})", dir.display(), e))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)
            .map_err(|e| format!("open() \"{}\" failed ({})", temp.display(), e))?;
        let header = entry::encode(&meta);
        file.write_all(&header).map_err(|e| format!("write() \"{}\" failed ({})", temp.display(), e))?;
        let max_mem = super::zone::lock(&zone.mem).max_object();
        let mem = (max_mem > 0).then(Vec::new);
        let mut w = Writer {
            zone,
            hash,
            main,
            temp,
            file: Some(file),
            header,
            meta,
            written: 0,
            mem,
            flight,
            committed: false,
            error: None,
        };
        w.trim_mem(max_mem);
        Ok(w)
    }

    fn trim_mem(&mut self, max: u64) {
        if self.mem.as_ref().is_some_and(|m| m.len() as u64 > max) {
            self.mem = None;
        }
    }

    /// Appends body bytes; a failure abandons the entry (the response goes
    /// on to the client regardless).
    pub fn push(&mut self, data: &[u8]) {
        let Some(f) = self.file.as_mut() else { return };
        if let Err(e) = f.write_all(data) {
            self.error = Some(format!("write() \"{}\" failed ({})", self.temp.display(), e));
            self.abandon();
            return;
        }
        self.written += data.len() as u64;
        if let Some(m) = self.mem.as_mut() {
            m.extend_from_slice(data);
        }
        let max = (self.zone.conf.memory / 8).min(4 << 20);
        self.trim_mem(max);
        if let Some(max) = self.zone.conf.max_size
            && self.written > max
        {
            self.abandon();
        }
    }

    fn abandon(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.temp);
    }

    /// The whole body arrived: the entry goes into place and into the index.
    pub fn commit(mut self) {
        let now = super::zone::stamp();
        let Some(f) = self.file.take() else { return };
        self.meta.body_len = self.written;
        entry::set_body_len(&mut self.header, self.written);
        if let Err(e) = f.write_all_at(&self.header, 0) {
            self.error = Some(format!("pwrite() \"{}\" failed ({})", self.temp.display(), e));
            let _ = std::fs::remove_file(&self.temp);
            return;
        }
        drop(f);
        let path = self.zone.path_of(&self.hash);
        if std::fs::rename(&self.temp, &path).is_err() {
            let _ = std::fs::remove_file(&self.temp);
            return;
        }
        self.committed = true;
        let file_len = self.header.len() as u64 + self.written;
        let node = Node::entry(&self.meta, file_len, now);
        if let Some(main) = self.main {
            let linked = link_main(&self.zone, &main, &path);
            let vary: Arc<[u8]> = self.meta.vary.clone().into();
            self.zone.varies(&main, vary, self.meta.stored, true, linked);
        }
        self.zone.stored(&self.hash, node);
        if let Some(body) = self.mem.take() {
            let e = Arc::new(MemEntry { meta: self.meta.clone(), body: body.into() });
            super::zone::lock(&self.zone.mem).offer(self.hash, e);
        } else {
            super::zone::lock(&self.zone.mem).remove(&self.hash);
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.committed {
            self.abandon();
        }
        if let Some(f) = self.flight.take() {
            self.zone.land(&self.hash_for_flight(), &f);
        }
    }
}

impl Writer {
    /// Fills are keyed by the key's own hash (a variant's waiters wait on
    /// the key, as they cannot know the variant before the response).
    fn hash_for_flight(&self) -> Hash {
        self.main.unwrap_or(self.hash)
    }
}

/// Makes the file at a key's own hash a hard link to the entry of its
/// newest variant, `variant` (in place already). nginx keeps a file under
/// the main key of a varying response, so a lookup before the loader has
/// indexed the directory (just after a start) still finds the key: here
/// the link's header names the Vary, and the request's variant follows
/// from it. A link shares the variant's inode: its bytes count once, with
/// the variant's entry, whose removal takes the link along (`drop_link`).
/// False when no link could be made (the key then misses until loaded).
pub fn link_main(zone: &Zone, main: &Hash, variant: &std::path::Path) -> bool {
    let temp = zone.temp_path(main);
    if let Some(dir) = temp.parent()
        && std::fs::create_dir_all(dir).is_err()
    {
        return false;
    }
    if std::fs::hard_link(variant, &temp).is_err() {
        return false;
    }
    let placed = std::fs::rename(&temp, zone.path_of(main)).is_ok();
    // rename() of a second name of the file already there leaves both.
    let _ = std::fs::remove_file(&temp);
    placed
}

/// The (device, inode) of the file at `path`.
pub fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// A variant's entry file `id` is gone: the key's link to it goes too
/// (not a link to a newer variant, nor an entry of the key's own).
pub fn drop_link(zone: &Zone, main: &Hash, id: (u64, u64)) {
    let path = zone.path_of(main);
    if file_id(&path) == Some(id) {
        let _ = std::fs::remove_file(&path);
    }
}

/// Whether the file at `path` is one variant's entry (at a key's own hash:
/// the link to its newest variant).
pub fn holds_variant(path: &std::path::Path) -> bool {
    std::fs::File::open(path).is_ok_and(|f| check(&f, &[]).is_ok_and(|(m, _, _)| !m.vary.is_empty()))
}

/// A revalidated entry: its header (same length: only the times change)
/// is rewritten in place, and the index and memory tier follow.
pub fn revalidated(zone: &Zone, h: &Hash, found: &Found, now: i64) -> Result<(), String> {
    let path = zone.path_of(h);
    let header = entry::encode(&found.meta);
    if header.len() as u64 != found.body_at {
        return Err(format!("cache file \"{}\" header changed size", path.display()));
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| format!("open() \"{}\" failed ({})", path.display(), e))?;
    f.write_all_at(&header, 0).map_err(|e| format!("pwrite() \"{}\" failed ({})", path.display(), e))?;
    let node = Node::entry(&found.meta, found.file_len, now);
    zone.stored(h, node);
    super::zone::lock(&zone.mem).remove(h);
    Ok(())
}
