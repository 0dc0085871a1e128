//! `sticky learn`'s session table: a session value (what `create=` gave
//! for a response) mapped to the sticky id of the peer that served it,
//! forgotten `timeout` after it was last used.
//!
//! nginx Plus keeps it in a shared memory zone; workers are threads here,
//! so the zone is a [`Table`] in an `Arc` that every worker's `Upstream`
//! holds, under a mutex (a lookup and an update per request, each a hash
//! probe). Tables are kept by zone name for the whole process, so a
//! reload that keeps the `zone=` name keeps the sessions (as nginx keeps a
//! zone whose name and size did not change). The zone's size bounds the
//! number of sessions (about 128 bytes each, nginx's rbtree node with a
//! short key); when full, expired sessions go first, then the least
//! recently used.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Bytes of zone one session is counted for.
const PER_SESSION: u64 = 128;

#[derive(Debug)]
struct Session {
    id: Arc<str>,
    /// Last use, `clock::unix_ms`.
    used: u64,
}

/// One `zone=NAME:SIZE` of `sticky learn`.
#[derive(Debug)]
pub struct Table {
    pub name: String,
    pub size: u64,
    /// Milliseconds (the configuration's; a reload may change it).
    timeout: AtomicU64,
    cap: usize,
    map: Mutex<HashMap<Box<[u8]>, Session>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn tables() -> &'static Mutex<HashMap<String, Weak<Table>>> {
    static T: std::sync::OnceLock<Mutex<HashMap<String, Weak<Table>>>> = std::sync::OnceLock::new();
    T.get_or_init(Default::default)
}

/// The table named `name` (the one a previous configuration used, when
/// it still lives and has the same size; else a new one).
pub fn table(name: &str, size: u64, timeout_ms: u64) -> Arc<Table> {
    let mut all = lock(tables());
    all.retain(|_, w| w.strong_count() > 0);
    if let Some(t) = all.get(name).and_then(Weak::upgrade).filter(|t| t.size == size) {
        t.timeout.store(timeout_ms, Ordering::Relaxed);
        return t;
    }
    let t = Arc::new(Table::new(name, size, timeout_ms));
    all.insert(name.to_string(), Arc::downgrade(&t));
    t
}

impl Table {
    pub fn new(name: &str, size: u64, timeout_ms: u64) -> Table {
        Table {
            name: name.to_string(),
            size,
            timeout: AtomicU64::new(timeout_ms),
            cap: (size / PER_SESSION).max(1) as usize,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn timeout(&self) -> u64 {
        self.timeout.load(Ordering::Relaxed)
    }

    /// The peer id of a live session (None: unknown or expired).
    pub fn lookup(&self, key: &[u8], now_ms: u64) -> Option<Arc<str>> {
        if key.is_empty() {
            return None;
        }
        let timeout = self.timeout();
        let mut map = lock(&self.map);
        let s = map.get(key)?;
        if now_ms.saturating_sub(s.used) >= timeout {
            map.remove(key);
            return None;
        }
        Some(s.id.clone())
    }

    /// A response served by peer `id` gave session value `created` (empty:
    /// none) for a request that looked up `looked_up`. A new or moved
    /// session is stored and its clock starts; a request that created
    /// nothing, or the same session, keeps its looked-up session alive (if
    /// it has not expired meanwhile); one whose response named another
    /// session leaves the old one to expire (nginx 1.29.6).
    pub fn learn(&self, created: &[u8], looked_up: &[u8], id: &Arc<str>, now_ms: u64) {
        let timeout = self.timeout();
        let mut map = lock(&self.map);
        if created.is_empty() {
            if let Some(s) = map.get_mut(looked_up)
                && now_ms.saturating_sub(s.used) < timeout
                && s.id == *id
            {
                s.used = now_ms;
            }
            return;
        }
        if let Some(s) = map.get_mut(created) {
            if now_ms.saturating_sub(s.used) < timeout || created != looked_up {
                s.id = id.clone();
                s.used = now_ms;
                return;
            }
            // Expired while the response was on its way: it stays gone.
            map.remove(created);
            return;
        }
        if map.len() >= self.cap {
            map.retain(|_, s| now_ms.saturating_sub(s.used) < timeout);
            if map.len() >= self.cap
                && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(created.into(), Session { id: id.clone(), used: now_ms });
    }

    /// Sessions held now (expired ones included until they are touched).
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A session a response made, to be recorded when the request is done.
#[derive(Debug)]
pub struct Pending {
    pub table: Arc<Table>,
    /// The `create=` value (empty: none).
    pub created: Vec<u8>,
    /// The `lookup=` value the request came with.
    pub looked_up: Vec<u8>,
    /// The peer that answered.
    pub id: Arc<str>,
}

impl Pending {
    pub fn commit(&self) {
        self.table.learn(&self.created, &self.looked_up, &self.id, crate::clock::unix_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[test]
    fn sessions_expire_unless_used() {
        let t = Table::new("z", 1 << 20, 2000);
        let a = id("a");
        t.learn(b"s1", b"", &a, 1000);
        assert_eq!(t.lookup(b"s1", 2999).as_deref(), Some("a"));
        // A request that created nothing keeps it alive.
        t.learn(b"", b"s1", &a, 2999);
        assert_eq!(t.lookup(b"s1", 4998).as_deref(), Some("a"));
        assert_eq!(t.lookup(b"s1", 4999), None);
        assert_eq!(t.lookup(b"", 0), None);
    }

    #[test]
    fn a_different_session_lets_the_old_one_expire() {
        let t = Table::new("z", 1 << 20, 2000);
        let (a, b) = (id("a"), id("b"));
        t.learn(b"s2", b"", &b, 0);
        t.learn(b"s1", b"s2", &b, 1500);
        assert_eq!(t.lookup(b"s1", 3000).as_deref(), Some("b"));
        assert_eq!(t.lookup(b"s2", 2000), None);
        // The same session from another peer moves it.
        t.learn(b"s1", b"s1", &a, 3000);
        assert_eq!(t.lookup(b"s1", 3001).as_deref(), Some("a"));
        // Expired while its response was slow: not revived.
        t.learn(b"s1", b"s1", &a, 6000);
        assert_eq!(t.lookup(b"s1", 6001), None);
    }

    #[test]
    fn a_full_zone_drops_expired_then_oldest() {
        let t = Table::new("z", 3 * PER_SESSION, 10_000);
        let a = id("a");
        for (k, now) in [(&b"k1"[..], 1), (b"k2", 2), (b"k3", 3), (b"k4", 4)] {
            t.learn(k, b"", &a, now);
        }
        assert_eq!(t.len(), 3);
        assert_eq!(t.lookup(b"k1", 5), None);
        assert!(t.lookup(b"k4", 5).is_some());
    }

    #[test]
    fn tables_are_shared_by_name_and_size() {
        let one = table("sticky-learn-test", 1 << 20, 1000);
        let same = table("sticky-learn-test", 1 << 20, 5000);
        assert!(Arc::ptr_eq(&one, &same));
        assert_eq!(one.timeout(), 5000);
        let other = table("sticky-learn-test", 2 << 20, 1000);
        assert!(!Arc::ptr_eq(&one, &other));
    }
}
