//! A limit zone's shared state: nginx keeps `limit_req_zone` and
//! `limit_conn_zone` states in shared memory so every worker process sees
//! the same counts; sluice's workers are threads, so a zone is an `Arc`
//! that every worker (and the next configuration, after a reload) holds.
//!
//! The map of keys is split into [`SHARDS`] mutex-guarded shards by a hash
//! of the key, so workers contend only when they touch the same shard at
//! the same instant (nginx takes one lock per zone); a lookup of a known
//! key allocates nothing.
//!
//! Size: nginx's slab allocator gives each state a power-of-two chunk (one
//! `$binary_remote_addr` state takes 64 bytes on 64-bit systems: "one
//! megabyte zone can keep about 16 thousand 64-byte states"). sluice counts
//! a state as 48 bytes plus its key, rounded up to a power of two (64 at
//! least), and gives each shard an equal share of SIZE; a shard that is
//! full drops the states it may (see [`Shard::make_room`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Shards per zone: enough that two workers rarely meet on one lock.
pub const SHARDS: usize = 32;

/// What a zone keeps per key, with the rule for dropping it when room is
/// needed.
pub trait State {
    /// Whether the state may be dropped to make room at `now` (ms):
    /// `force` asks for any state that nothing depends on.
    fn droppable(&self, now: u64, force: bool) -> bool;
    /// Its age for eviction order (ms of its last use).
    fn last_used(&self) -> u64;
}

pub struct Shard<S> {
    pub map: HashMap<Box<[u8]>, S>,
    /// Bytes accounted to the states held, against `budget`.
    used: usize,
    budget: usize,
}

/// The bytes a state of a `len`-byte key takes (see the module comment).
pub fn cost(len: usize) -> usize {
    (48 + len).next_power_of_two().max(64)
}

impl<S: State> Shard<S> {
    /// Room for one more state of a `len`-byte key: nginx first drops
    /// states that have been idle for a minute and decayed to nothing, then
    /// (only when the zone is full) the least recently used one nothing
    /// holds. False when nothing can go (every state is in use).
    fn make_room(&mut self, len: usize, now: u64) -> bool {
        let need = cost(len);
        if self.used + need <= self.budget {
            return true;
        }
        let before = self.map.len();
        self.map.retain(|_, s| !s.droppable(now, false));
        if self.map.len() == before {
            let oldest = self
                .map
                .iter()
                .filter(|(_, s)| s.droppable(now, true))
                .min_by_key(|(_, s)| s.last_used())
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.map.remove(&k);
            }
        }
        self.used = self.map.keys().map(|k| cost(k.len())).sum();
        self.used + need <= self.budget
    }

    /// The state of `key`, inserted by `new` when absent; None when the
    /// shard is full of states in use (nginx's "could not allocate node").
    pub fn get_or_insert(&mut self, key: &[u8], now: u64, new: impl FnOnce() -> S) -> Option<&mut S> {
        if !self.map.contains_key(key) {
            if !self.make_room(key.len(), now) {
                return None;
            }
            self.used += cost(key.len());
            self.map.insert(key.into(), new());
        }
        self.map.get_mut(key)
    }

    /// Drops `key`'s state (a connection count that fell to zero).
    pub fn remove(&mut self, key: &[u8]) {
        if self.map.remove(key).is_some() {
            self.used = self.used.saturating_sub(cost(key.len()));
        }
    }
}

/// The sharded map of one zone.
pub struct Table<S> {
    shards: Vec<Mutex<Shard<S>>>,
}

impl<S: State> Table<S> {
    pub fn new(size: u64) -> Table<S> {
        let budget = (size as usize / SHARDS).max(64);
        let shards =
            (0..SHARDS).map(|_| Mutex::new(Shard { map: HashMap::new(), used: 0, budget })).collect::<Vec<_>>();
        Table { shards }
    }

    /// The shard `key` lives in, locked. A poisoned lock is recovered: the
    /// counts are advisory and a panic elsewhere must not stop every
    /// request of the zone.
    pub fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard<S>> {
        let i = shard_of(key);
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// FNV-1a: a handful of multiplications for a 4- or 16-byte address.
fn shard_of(key: &[u8]) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 32)) as usize % SHARDS
}

/// Milliseconds on the monotonic clock since the process started (as of
/// the current task poll, `clock::mono`), nginx's `ngx_current_msec`.
pub fn now_ms() -> u64 {
    static BASE: OnceLock<std::time::Instant> = OnceLock::new();
    let base = *BASE.get_or_init(std::time::Instant::now);
    // Offset so that 0 stays "never" (a state that was never used).
    crate::clock::mono().saturating_duration_since(base).as_millis() as u64 + 1
}

/// What identifies a zone's state across reloads: nginx keeps a shared
/// memory zone whose name, size and owning module are unchanged.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Id {
    name: String,
    size: u64,
    module: &'static str,
}

/// A zone's state and the key it was made for.
struct Kept {
    key: String,
    state: Arc<dyn std::any::Any + Send + Sync>,
}

type Registry = Mutex<HashMap<Id, Kept>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The state for a zone of `module` ("limit_req" or "limit_conn"): the one
/// an earlier configuration made with the same name and size (so counts
/// survive `-s reload`), else a new one. A kept zone whose key changed is
/// nginx's reload error.
pub fn shared<T: Send + Sync + 'static>(
    module: &'static str,
    name: &str,
    size: u64,
    key: &str,
    new: impl FnOnce() -> T,
) -> Result<Arc<T>, String> {
    let id = Id { name: name.to_string(), size, module };
    let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(k) = reg.get(&id)
        && let Ok(state) = k.state.clone().downcast::<T>()
    {
        if k.key != key {
            let what = if module == "limit_req" { "limit_req" } else { "limit_conn_zone" };
            return Err(format!(
                "{what} \"{name}\" uses the \"{key}\" key while previously it used the \"{}\" key",
                k.key
            ));
        }
        return Ok(state);
    }
    // A zone of that name with another size is a new zone (nginx maps a
    // new shared memory segment); the old one goes when its workers do.
    reg.retain(|i, _| !(i.name == name && i.module == module));
    let state = Arc::new(new());
    reg.insert(id, Kept { key: key.to_string(), state: state.clone() });
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S(u64, bool);
    impl State for S {
        fn droppable(&self, _now: u64, force: bool) -> bool {
            self.1 || force
        }
        fn last_used(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn a_full_shard_drops_the_oldest() {
        let t: Table<S> = Table::new((SHARDS * 128) as u64);
        // Two 64-byte states per shard; find three keys of one shard.
        let keys: Vec<[u8; 4]> =
            (0u32..10_000).map(|i| i.to_be_bytes()).filter(|k| shard_of(k) == shard_of(&[0, 0, 0, 0])).collect();
        let mut sh = t.shard(&keys[0]);
        assert!(sh.get_or_insert(&keys[0], 1, || S(1, false)).is_some());
        assert!(sh.get_or_insert(&keys[1], 2, || S(2, false)).is_some());
        assert!(sh.get_or_insert(&keys[2], 3, || S(3, false)).is_some());
        assert!(!sh.map.contains_key(&keys[0][..]), "the oldest went");
        assert!(sh.map.contains_key(&keys[1][..]));
        assert_eq!(cost(4), 64);
        assert_eq!(cost(16), 64);
        assert_eq!(cost(17), 128);
    }

    #[test]
    fn kept_across_reloads_unless_resized_or_rekeyed() {
        let a = shared("limit_req", "t-zone", 1 << 20, "$a", || 1u32).unwrap();
        let b = shared("limit_req", "t-zone", 1 << 20, "$a", || 2u32).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let e = shared("limit_req", "t-zone", 1 << 20, "$b", || 3u32).err().unwrap();
        assert!(e.contains("uses the \"$b\" key while previously it used the \"$a\" key"), "{e}");
        let c = shared("limit_req", "t-zone", 2 << 20, "$b", || 4u32).unwrap();
        assert_eq!(*c, 4);
    }
}
