//! nginx's `open_file_cache`: per-worker cache of open descriptors and their
//! metadata, so a hot file costs no `open`/`fstat`/`close` per request. One
//! cache per worker thread, touched only by that thread: no locks.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::rc::Rc;

use super::symlinks::Policy;
use crate::config::model::LocConf;
use crate::http::handler::ctx::{ReqCtx, Vars};

/// An open file (or a directory's metadata) as served to one or many requests.
#[derive(Debug)]
pub struct OpenFile {
    /// None for directories: they are never read, only listed.
    pub file: Option<File>,
    pub size: u64,
    pub mtime: u64,
    pub is_dir: bool,
    ino: u64,
    dev: u64,
    /// Held by the open-file cache (so worth keeping the bytes of).
    in_cache: std::cell::Cell<bool>,
    /// The contents of a small cached file, read once: such a response is
    /// then one write, with no read or sendfile per request.
    memo: std::cell::OnceCell<Vec<u8>>,
}

impl OpenFile {
    /// An already open regular file of `size` bytes (a cache entry), not
    /// held by the open-file cache (which alone compares inode and device,
    /// so they are not asked for: one `fstat` less per disk hit).
    pub fn from_file(file: File, size: u64, mtime: u64) -> OpenFile {
        OpenFile {
            file: Some(file),
            size,
            mtime,
            is_dir: false,
            ino: 0,
            dev: 0,
            in_cache: Default::default(),
            memo: Default::default(),
        }
    }
}

/// Files up to this size have their bytes kept by the open-file cache.
pub const MEMO_MAX: u64 = 16 * 1024;

impl OpenFile {
    /// The bytes `offset..offset+len`, from memory, when this is a small
    /// file held by the cache (read on first use); None otherwise.
    pub fn cached_bytes(&self, offset: u64, len: u64) -> Option<&[u8]> {
        if !self.in_cache.get() || self.size > MEMO_MAX {
            return None;
        }
        if self.memo.get().is_none() {
            let mut v = Vec::with_capacity(self.size as usize);
            crate::http::connection::io::pread_into(self.file.as_ref()?, 0, self.size, &mut v).ok()?;
            let _ = self.memo.set(v);
        }
        self.memo.get()?.get(offset as usize..(offset + len) as usize)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    NotFound,
    Forbidden,
    /// ENOTDIR and the like: treated as not found, as nginx does.
    NotDir,
    Other(i32),
}

impl OpenError {
    fn from_io(e: &io::Error) -> OpenError {
        match e.raw_os_error() {
            Some(2) => OpenError::NotFound,
            // EMLINK: `disable_symlinks if_not_owner` refused a link.
            Some(13) | Some(31) => OpenError::Forbidden,
            Some(20) | Some(36) => OpenError::NotDir,
            // ELOOP: a link loop, or a link `disable_symlinks on` refused (nginx: 403).
            Some(40) => OpenError::Forbidden,
            Some(n) => OpenError::Other(n),
            None => OpenError::Other(0),
        }
    }

    pub fn errno(self) -> i32 {
        match self {
            OpenError::NotFound => 2,
            OpenError::Forbidden => 13,
            OpenError::NotDir => 20,
            OpenError::Other(n) => n,
        }
    }

    pub fn status(self) -> u16 {
        match self {
            OpenError::NotFound | OpenError::NotDir => 404,
            OpenError::Forbidden => 403,
            OpenError::Other(_) => 500,
        }
    }
}

pub type Lookup = Result<Rc<OpenFile>, OpenError>;

/// open + fstat, as nginx does: one lookup of the path, not two. Opened
/// non-blocking so a FIFO in the tree cannot stall the worker; anything but
/// a regular file or a directory is not served.
fn open_uncached(path: &Path, symlinks: Symlinks) -> Lookup {
    use std::os::unix::fs::OpenOptionsExt;
    let file = match symlinks {
        (Policy::Off, _) => std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path),
        (policy, from) => super::symlinks::open(path.as_os_str().as_bytes(), from, policy),
    }
    .map_err(|e| OpenError::from_io(&e))?;
    // fstat, as nginx: the standard library's statx on the descriptor
    // costs the kernel an empty-path lookup besides.
    let meta = rustix::fs::fstat(&file).map_err(|e| OpenError::from_io(&e.into()))?;
    let kind = rustix::fs::FileType::from_raw_mode(meta.st_mode);
    let is_dir = kind == rustix::fs::FileType::Directory;
    if !is_dir && kind != rustix::fs::FileType::RegularFile {
        return Err(OpenError::NotFound);
    }
    Ok(Rc::new(OpenFile {
        size: meta.st_size.max(0) as u64,
        mtime: meta.st_mtime.max(0) as u64,
        is_dir,
        ino: meta.st_ino,
        dev: meta.st_dev,
        // Directories are only listed, never read through this descriptor.
        file: if is_dir { None } else { Some(file) },
        in_cache: Default::default(),
        memo: Default::default(),
    }))
}

struct Entry {
    result: Lookup,
    validated: u64,
    used: u64,
    uses: u32,
}

#[derive(Default)]
struct Cache {
    /// Keyed by the path's bytes: hashing a `Path` walks its components,
    /// which cost more than the rest of a cached lookup.
    map: HashMap<Box<[u8]>, Entry>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// `disable_symlinks` as the request's location sets it: the policy and
/// how much of the path (`from=`) is not checked.
type Symlinks = (Policy, usize);

/// Opens `path` for serving the request, through the worker's cache when
/// the location has `open_file_cache` on, with its `disable_symlinks`.
pub fn open_for(ctx: &ReqCtx<'_, '_>, path: &Path) -> Lookup {
    let sc = &ctx.conf.symlinks;
    let from = match (&sc.policy, &sc.from) {
        (Policy::Off, _) | (_, None) => 0,
        (_, Some(t)) => {
            let prefix = t.render_to_vec(&Vars::request(ctx));
            if path.as_os_str().as_bytes().starts_with(&prefix) { prefix.len() } else { 0 }
        }
    };
    open_with(path, ctx.conf, (sc.policy, from))
}

fn open_with(path: &Path, conf: &LocConf, symlinks: Symlinks) -> Lookup {
    let Some(ofc) = conf.open_file_cache else {
        return open_uncached(path, symlinks);
    };
    let now = crate::clock::now_secs();
    // A checked open is cached apart from a plain one of the same path
    // (a NUL never occurs in a path).
    let checked;
    let key = match symlinks {
        (Policy::Off, _) => path.as_os_str().as_bytes(),
        (policy, from) => {
            let mut k = path.as_os_str().as_bytes().to_vec();
            k.push(0);
            k.push(policy as u8);
            k.extend_from_slice(&from.to_le_bytes());
            checked = k;
            &checked[..]
        }
    };
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let mut uses = 1;
        if let Some(e) = c.map.get_mut(key)
            && now.saturating_sub(e.used) <= ofc.inactive.as_secs()
        {
            uses = e.uses.saturating_add(1);
            e.used = now;
            e.uses = uses;
            if now.saturating_sub(e.validated) < conf.open_file_cache_valid.as_secs().max(1) {
                return e.result.clone();
            }
            // Revalidate: keep the descriptor if the file is the same.
            let fresh = std::fs::metadata(path);
            let same = match (&e.result, &fresh) {
                (Ok(f), Ok(m)) => {
                    f.ino == m.ino() && f.dev == m.dev() && f.size == m.len() && f.mtime == m.mtime().max(0) as u64
                }
                _ => false,
            };
            if same {
                e.validated = now;
                return e.result.clone();
            }
        }
        let result = open_uncached(path, symlinks);
        let cacheable = match &result {
            Ok(_) => true,
            Err(_) => conf.open_file_cache_errors,
        };
        if cacheable && uses >= conf.open_file_cache_min_uses {
            if c.map.len() >= ofc.max && !c.map.contains_key(key) {
                evict(&mut c.map, now, ofc.inactive.as_secs());
            }
            if let Ok(f) = &result {
                f.in_cache.set(true);
            }
            c.map.insert(key.into(), Entry { result: result.clone(), validated: now, used: now, uses });
        } else if cacheable {
            // Track uses before min_uses is reached, without keeping the fd.
            c.map.insert(key.into(), Entry { result: Err(OpenError::Other(-1)), validated: 0, used: now, uses });
        }
        result
    })
}

/// Drops inactive entries, or the least recently used one when all are active.
fn evict(map: &mut HashMap<Box<[u8]>, Entry>, now: u64, inactive: u64) {
    let before = map.len();
    map.retain(|_, e| now.saturating_sub(e.used) <= inactive);
    if map.len() == before
        && let Some(k) = map.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone())
    {
        map.remove(&k);
    }
}
