//! A zone's runtime state, shared by every worker (workers are threads of
//! one process, so nginx's shared-memory zone is an `Arc` here): the index
//! of keys (sharded mutexes: a lookup locks one shard for a hash probe),
//! the memory tier, the in-flight fills that concurrent misses wait on, and
//! the bytes on disk. Zones are kept by name and path across reloads, so a
//! reload keeps the cache; the first use of a zone starts its loader and
//! manager thread (`super::manager`), so `-t` never touches the directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::conf::ZoneConf;
use super::memory::Tier;

/// The MD5 of a cache key (nginx names files by it too).
pub type Hash = [u8; 16];

/// A map keyed by entry hash. foldhash instead of the standard SipHash:
/// the keys are MD5 digests already, so a fast keyed mix (seeded at random
/// per process and map, so nobody can aim keys at one bucket) is enough,
/// and a hit does three such lookups.
pub type KeyMap<V> = HashMap<Hash, V, foldhash::fast::RandomState>;

const SHARDS: usize = 16;

/// What the index knows of one key.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Requests for the key so far (for `proxy_cache_min_uses`).
    pub uses: u32,
    /// An entry file exists (else the node only counts uses).
    pub on_disk: bool,
    pub valid_until: i64,
    pub stale_updating: u32,
    pub stale_error: u32,
    /// The entry file's size, counted against max_size.
    pub file_len: u64,
    /// The [`stamp`] of the last hit or store (unix microseconds), for
    /// `inactive` and least-recently-used eviction: seconds would leave
    /// the order of a second's requests to chance.
    pub last_access: i64,
    /// For a key whose responses vary: the `Vary` value; its variants are
    /// keyed by the key and the request's values of those headers.
    pub vary: Option<Arc<[u8]>>,
    /// The `stored` stamp of the variant that gave `vary`: the loader
    /// keeps the newest variant's Vary, as nginx's main-key file holds the
    /// last response's.
    pub vary_stored: i64,
    /// For one variant's entry: the key's own hash, where a hard link to
    /// the newest variant lets a lookup before the loader has run find the
    /// key's Vary (see `store::link_main`); removing this entry removes
    /// that link when it is this entry's.
    pub main: Option<Hash>,
    /// An error the origin answered and `proxy_intercept_errors` turned
    /// into an error page, remembered while `error_until` (unix seconds)
    /// is not past, as nginx's node `error`: requests get the error page
    /// without asking the origin. Storing an entry for the key clears it.
    pub error: u16,
    pub error_until: i64,
    /// The entry's `stored` stamp: which file the node speaks of (a worker
    /// keeps entry files open while this matches).
    pub stored: i64,
}

impl Node {
    /// The node of an entry file holding `meta`, `file_len` bytes long,
    /// last used at `accessed` (a [`stamp`]).
    pub fn entry(meta: &super::entry::Meta, file_len: u64, accessed: i64) -> Node {
        Node {
            uses: 1,
            on_disk: true,
            valid_until: meta.valid_until,
            stale_updating: meta.stale_updating,
            stale_error: meta.stale_error,
            file_len,
            last_access: accessed,
            vary: None,
            vary_stored: 0,
            main: (!meta.vary.is_empty()).then(|| hash(&meta.key)),
            error: 0,
            error_until: 0,
            stored: meta.stored,
        }
    }
}

/// A fill in progress: concurrent misses for the key wait for it
/// (`proxy_cache_lock`) and are woken the moment it ends.
pub struct Flight {
    pub done: AtomicBool,
    pub notify: tokio::sync::Notify,
    pub started: std::time::Instant,
}

pub struct Zone {
    pub conf: Arc<ZoneConf>,
    shards: Vec<Mutex<KeyMap<Node>>>,
    pub mem: Mutex<Tier>,
    flights: Mutex<KeyMap<Arc<Flight>>>,
    /// Bytes of entry files on disk.
    pub disk_bytes: AtomicU64,
    /// Entry files on disk (kept with `disk_bytes`, for `sluice_status`).
    files: AtomicU64,
    /// The loader has indexed what was on disk at start.
    pub loaded: AtomicBool,
    started: AtomicBool,
    temp_seq: AtomicU64,
    /// Purges by key prefix not yet carried out on disk (see `purge`).
    purges: Mutex<Vec<PurgeMark>>,
    purge_pending: AtomicBool,
}

/// A purge of every key starting with `key` (or equal to it), stored up to
/// `at` (a [`stamp`]).
#[derive(Clone, Debug)]
pub struct PurgeMark {
    pub key: Vec<u8>,
    pub exact: bool,
    pub at: i64,
}

/// Poisoned locks are recovered: a panic elsewhere must not take the cache
/// (and every worker using it) down; the index is only an accelerator.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Zones by (name, path), for the life of the process.
type Registry = Mutex<HashMap<(String, PathBuf), Arc<Zone>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The zone for a configuration, created on first use and kept across
/// reloads (same name and path). A reload that changes its sizes gets a
/// zone with the new settings and the same entries on disk.
pub fn get(conf: &Arc<ZoneConf>) -> Arc<Zone> {
    if let Some(z) = conf.resolved.get().and_then(std::sync::Weak::upgrade) {
        return z;
    }
    let z = registered(conf);
    let _ = conf.resolved.set(Arc::downgrade(&z));
    z
}

fn registered(conf: &Arc<ZoneConf>) -> Arc<Zone> {
    let id = (conf.name.clone(), conf.path.clone());
    let mut reg = lock(registry());
    if let Some(z) = reg.get(&id)
        && (Arc::ptr_eq(&z.conf, conf) || same_limits(&z.conf, conf))
    {
        return z.clone();
    }
    let z = Arc::new(Zone {
        conf: conf.clone(),
        shards: (0..SHARDS).map(|_| Mutex::new(KeyMap::default())).collect(),
        mem: Mutex::new(Tier::new(conf.memory)),
        flights: Mutex::new(KeyMap::default()),
        disk_bytes: AtomicU64::new(0),
        files: AtomicU64::new(0),
        loaded: AtomicBool::new(false),
        started: AtomicBool::new(false),
        temp_seq: AtomicU64::new(0),
        purges: Mutex::new(Vec::new()),
        purge_pending: AtomicBool::new(false),
    });
    reg.insert(id, z.clone());
    drop(reg);
    if !z.started.swap(true, Ordering::AcqRel) {
        super::manager::start(z.clone());
    }
    z
}

/// Whether `z` is still the zone its name and path resolve to: a reload
/// that changed the limits replaced it, and its manager then stops (the
/// new zone's manager looks after the same directory).
pub fn is_current(z: &Arc<Zone>) -> bool {
    let id = (z.conf.name.clone(), z.conf.path.clone());
    lock(registry()).get(&id).is_some_and(|c| Arc::ptr_eq(c, z))
}

fn same_limits(a: &ZoneConf, b: &ZoneConf) -> bool {
    a.levels == b.levels
        && a.keys_size == b.keys_size
        && a.inactive == b.inactive
        && a.max_size == b.max_size
        && a.min_free == b.min_free
        && a.memory == b.memory
}

/// A point in time for ordering stores against purges: unix microseconds,
/// strictly increasing within the process (a refill a few microseconds
/// after a purge must not look as old as it).
pub fn stamp() -> i64 {
    static LAST: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(last, next, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

pub fn hash(key: &[u8]) -> Hash {
    use md5::Digest;
    md5::Md5::digest(key).into()
}

/// The key's hash followed by the request's values of the Vary headers.
pub fn variant_hash(key: &[u8], variant: &Hash) -> Hash {
    use md5::Digest;
    let mut h = md5::Md5::new();
    h.update(key);
    h.update(b"\0vary\0");
    h.update(variant);
    h.finalize().into()
}

pub fn hex(h: &Hash) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(32);
    for b in h {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

impl Zone {
    fn shard(&self, h: &Hash) -> MutexGuard<'_, KeyMap<Node>> {
        lock(&self.shards[h[0] as usize % SHARDS])
    }

    /// A copy of the key's node, after `f` has updated it (inserting a
    /// default node first when `create`). The index holds at most
    /// keys_zone's worth of keys: a new key beyond that is not counted.
    pub fn with_node<R>(&self, h: &Hash, create: bool, f: impl FnOnce(&mut Node) -> R) -> Option<R> {
        let mut s = self.shard(h);
        if !s.contains_key(h) {
            if !create || s.len() * SHARDS >= self.conf.max_keys() {
                return None;
            }
            s.insert(*h, Node::default());
        }
        s.get_mut(h).map(f)
    }

    pub fn node(&self, h: &Hash) -> Option<Node> {
        self.shard(h).get(h).cloned()
    }

    /// Records a stored entry (replacing what the key had).
    pub fn stored(&self, h: &Hash, mut n: Node) {
        let mut s = self.shard(h);
        let old = s.get(h).map(|o| (o.uses, if o.on_disk { o.file_len } else { 0 }, o.on_disk));
        let mut had_file = false;
        if let Some((uses, len, on_disk)) = old {
            n.uses = n.uses.max(uses);
            had_file = on_disk;
            self.disk_bytes.fetch_sub(len.min(self.disk_bytes.load(Ordering::Relaxed)), Ordering::Relaxed);
        }
        self.disk_bytes.fetch_add(n.file_len, Ordering::Relaxed);
        if n.on_disk && !had_file {
            self.files.fetch_add(1, Ordering::Relaxed);
        } else if !n.on_disk && had_file {
            self.files.fetch_sub(1, Ordering::Relaxed);
        }
        s.insert(*h, n);
    }

    /// Records that the responses of the key hashed `main` vary by `vary`
    /// (learnt from an entry stored at `stored`): lookups then go to the
    /// request's variant. A new variant's store (`commit`) always sets it
    /// and clears a remembered error; when its link replaced an entry file
    /// of the key's own (`replaced`), that file's bytes no longer count.
    /// Otherwise (the loader, a lookup through the link) an older Vary
    /// does not replace a newer one, nor a newer entry of the key's own.
    pub fn varies(&self, main: &Hash, vary: Arc<[u8]>, stored: i64, commit: bool, replaced: bool) {
        let mut s = self.shard(main);
        if !s.contains_key(main) {
            if s.len() * SHARDS >= self.conf.max_keys() {
                return;
            }
            s.insert(*main, Node::default());
        }
        let Some(n) = s.get_mut(main) else { return };
        if !commit && (n.on_disk && n.stored > stored || n.vary.is_some() && stored < n.vary_stored) {
            return;
        }
        if replaced && n.on_disk {
            let cur = self.disk_bytes.load(Ordering::Relaxed);
            self.disk_bytes.fetch_sub(n.file_len.min(cur), Ordering::Relaxed);
            self.files.fetch_sub(1, Ordering::Relaxed);
            n.on_disk = false;
            n.file_len = 0;
        }
        n.vary = Some(vary);
        n.vary_stored = stored;
        if commit {
            n.error = 0;
        }
        drop(s);
        if replaced {
            lock(&self.mem).remove(main);
        }
    }

    /// Forgets a key (its file is removed by the caller); returns the node.
    pub fn forget(&self, h: &Hash) -> Option<Node> {
        let n = self.shard(h).remove(h)?;
        if n.on_disk {
            let cur = self.disk_bytes.load(Ordering::Relaxed);
            self.disk_bytes.fetch_sub(n.file_len.min(cur), Ordering::Relaxed);
            self.files.fetch_sub(1, Ordering::Relaxed);
        }
        lock(&self.mem).remove(h);
        Some(n)
    }

    /// Every node, for the manager (one shard locked at a time).
    pub fn snapshot(&self) -> Vec<(Hash, Node)> {
        let mut all = Vec::new();
        for s in &self.shards {
            all.extend(lock(s).iter().map(|(h, n)| (*h, n.clone())));
        }
        all
    }

    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (bytes of entry files on disk, entry files, bytes of the memory
    /// tier) now, for `sluice_status`.
    pub fn usage(&self) -> (u64, u64, u64) {
        let mem = lock(&self.mem).used();
        (self.disk_bytes.load(Ordering::Relaxed), self.files.load(Ordering::Relaxed), mem)
    }

    /// The entry file's path: `levels` directories named by the hash's
    /// last hex digits, as nginx lays them out (`c/29/b7f5...029c`).
    pub fn path_of(&self, h: &Hash) -> PathBuf {
        let name = hex(h);
        let mut p = self.conf.path.clone();
        let mut end = name.len();
        for l in &self.conf.levels {
            p.push(&name[end - l..end]);
            end -= l;
        }
        p.push(&name);
        p
    }

    /// A temporary file's name next to where the entry goes (the rename
    /// into place then never crosses file systems).
    pub fn temp_path(&self, h: &Hash) -> PathBuf {
        let n = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let mut p = self.path_of(h);
        let name = format!("{}.tmp{}.{}", hex(h), std::process::id(), n);
        p.set_file_name(name);
        p
    }

    /// Purges every key starting with `prefix`: such entries stop being
    /// served now; the manager removes their files.
    pub fn purge_prefix(&self, prefix: &[u8]) -> bool {
        self.mark(prefix, false);
        true
    }

    /// Purges every variant of `key`.
    pub fn purge_exact(&self, key: &[u8]) -> bool {
        self.mark(key, true);
        true
    }

    fn mark(&self, key: &[u8], exact: bool) {
        let at = stamp();
        lock(&self.purges).push(PurgeMark { key: key.to_vec(), exact, at });
        self.purge_pending.store(true, Ordering::Release);
    }

    /// Whether an entry for `key` stored at `stored` was purged since.
    pub fn purged(&self, key: &[u8], stored: i64) -> bool {
        if !self.purge_pending.load(Ordering::Acquire) {
            return false;
        }
        lock(&self.purges)
            .iter()
            .any(|m| stored <= m.at && if m.exact { key == m.key } else { key.starts_with(&m.key) })
    }

    /// The purges waiting for the manager.
    pub fn pending_purges(&self) -> Vec<PurgeMark> {
        if !self.purge_pending.load(Ordering::Acquire) {
            return Vec::new();
        }
        lock(&self.purges).clone()
    }

    /// The manager carried out these purges.
    pub fn purges_done(&self, done: usize) {
        let mut p = lock(&self.purges);
        let n = done.min(p.len());
        p.drain(..n);
        self.purge_pending.store(!p.is_empty(), Ordering::Release);
    }

    /// Joins the fill in flight for `h`, or starts one (Ok: this request
    /// fills, and must call [`Zone::land`] when done).
    pub fn flight(&self, h: &Hash) -> Result<Arc<Flight>, Arc<Flight>> {
        let mut f = lock(&self.flights);
        if let Some(existing) = f.get(h)
            && !existing.done.load(Ordering::Acquire)
        {
            return Err(existing.clone());
        }
        let new = Arc::new(Flight {
            done: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            started: std::time::Instant::now(),
        });
        f.insert(*h, new.clone());
        Ok(new)
    }

    /// Replaces a fill that is taking too long (`proxy_cache_lock_age`) with
    /// a new one for the caller; None if another request already did.
    pub fn take_over(&self, h: &Hash, old: &Arc<Flight>) -> Option<Arc<Flight>> {
        let mut f = lock(&self.flights);
        if !f.get(h).is_some_and(|x| Arc::ptr_eq(x, old)) {
            return None;
        }
        let new = Arc::new(Flight {
            done: AtomicBool::new(false),
            notify: tokio::sync::Notify::new(),
            started: std::time::Instant::now(),
        });
        f.insert(*h, new.clone());
        Some(new)
    }

    /// Ends a fill: every waiter wakes at once.
    pub fn land(&self, h: &Hash, flight: &Arc<Flight>) {
        let mut f = lock(&self.flights);
        if f.get(h).is_some_and(|x| Arc::ptr_eq(x, flight)) {
            f.remove(h);
        }
        drop(f);
        flight.done.store(true, Ordering::Release);
        flight.notify.notify_waiters();
    }
}
