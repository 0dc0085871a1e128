//! The memory tier: whole small entries (head and body) kept in memory, so
//! a hot hit costs no system call but the client's write. Bounded by the
//! zone's `memory=` size. Eviction is CLOCK (second chance, close to LRU);
//! admission is TinyLFU: a count-min sketch estimates how often each key
//! was asked for recently, and a new entry only displaces entries asked
//! for less often than it, so a burst of one-hit wonders cannot flush the
//! hot set.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use super::entry::Meta;
use super::zone::Hash;

/// An entry held in memory.
pub struct MemEntry {
    pub meta: Meta,
    pub body: Bytes,
}

impl MemEntry {
    fn cost(&self) -> u64 {
        self.body.len() as u64
            + 256
            + self.meta.headers.iter().map(|(n, v)| (n.len() + v.len() + 32) as u64).sum::<u64>()
    }
}

struct Slot {
    entry: Arc<MemEntry>,
    referenced: bool,
}

pub struct Tier {
    capacity: u64,
    used: u64,
    map: super::zone::KeyMap<Slot>,
    clock: VecDeque<Hash>,
    sketch: Sketch,
}

impl Tier {
    pub fn new(capacity: u64) -> Tier {
        // Counters for about as many keys as fit at 1 KB each.
        let width = (capacity / 1024).clamp(1024, 1 << 20) as usize;
        Tier { capacity, used: 0, map: Default::default(), clock: VecDeque::new(), sketch: Sketch::new(width) }
    }

    /// The largest body worth keeping here.
    pub fn max_object(&self) -> u64 {
        (self.capacity / 8).min(4 << 20)
    }

    /// Counts a request for `h` (hit or miss) and returns the entry if held.
    pub fn get(&mut self, h: &Hash) -> Option<Arc<MemEntry>> {
        if self.capacity == 0 {
            return None;
        }
        self.sketch.touch(h);
        let s = self.map.get_mut(h)?;
        s.referenced = true;
        Some(s.entry.clone())
    }

    /// Offers an entry; it is admitted only if it is asked for more often
    /// than each entry it would evict. Returns whether it was admitted.
    pub fn offer(&mut self, h: Hash, entry: Arc<MemEntry>) -> bool {
        let cost = entry.cost();
        if self.capacity == 0 || entry.body.len() as u64 > self.max_object() || cost > self.capacity {
            return false;
        }
        self.remove(&h);
        let freq = self.sketch.estimate(&h);
        // Choose victims first; give up (keeping them) if any is hotter.
        let mut victims = Vec::new();
        let mut freed = 0u64;
        let mut turns = self.clock.len() * 2;
        while self.used - freed + cost > self.capacity {
            let Some(v) = self.clock.pop_front() else { break };
            turns = turns.saturating_sub(1);
            let Some(slot) = self.map.get_mut(&v) else { continue };
            if slot.referenced && turns > 0 {
                slot.referenced = false;
                self.clock.push_back(v);
                continue;
            }
            if self.sketch.estimate(&v) > freq {
                // The candidate loses: put the victims back where they were.
                self.clock.push_front(v);
                for v in victims.into_iter().rev() {
                    self.clock.push_front(v);
                }
                return false;
            }
            freed += slot.entry.cost();
            victims.push(v);
        }
        for v in victims {
            if let Some(s) = self.map.remove(&v) {
                self.used -= s.entry.cost();
            }
        }
        self.used += cost;
        self.map.insert(h, Slot { entry, referenced: false });
        self.clock.push_back(h);
        true
    }

    pub fn remove(&mut self, h: &Hash) {
        if let Some(s) = self.map.remove(h) {
            self.used -= s.entry.cost();
            // Its clock position is dropped lazily (skipped when reached).
        }
        if self.clock.len() > self.map.len() * 2 + 64 {
            let map = &self.map;
            self.clock.retain(|k| map.contains_key(k));
        }
    }

    pub fn used(&self) -> u64 {
        self.used
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// A count-min sketch of 4-bit-like saturating counters (u8, capped at
/// 15), halved every `10 × width` increments so old popularity fades.
struct Sketch {
    rows: [Vec<u8>; 4],
    width: usize,
    adds: usize,
}

impl Sketch {
    fn new(width: usize) -> Sketch {
        Sketch { rows: std::array::from_fn(|_| vec![0; width]), width, adds: 0 }
    }

    fn index(&self, h: &Hash, row: usize) -> usize {
        let w = u32::from_le_bytes([h[row * 4], h[row * 4 + 1], h[row * 4 + 2], h[row * 4 + 3]]);
        w as usize % self.width
    }

    fn touch(&mut self, h: &Hash) {
        for r in 0..4 {
            let i = self.index(h, r);
            let c = &mut self.rows[r][i];
            if *c < 15 {
                *c += 1;
            }
        }
        self.adds += 1;
        if self.adds >= self.width * 10 {
            self.adds = 0;
            for row in &mut self.rows {
                for c in row.iter_mut() {
                    *c >>= 1;
                }
            }
        }
    }

    fn estimate(&self, h: &Hash) -> u8 {
        (0..4).map(|r| self.rows[r][self.index(h, r)]).min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> Arc<MemEntry> {
        Arc::new(MemEntry { meta: Meta::default(), body: Bytes::from(vec![0u8; n]) })
    }

    fn key(i: u32) -> Hash {
        super::super::zone::hash(&i.to_le_bytes())
    }

    #[test]
    fn bounded_by_capacity() {
        let mut t = Tier::new(64 * 1024);
        for i in 0..1000 {
            t.get(&key(i));
            t.get(&key(i));
            t.offer(key(i), entry(1000));
            assert!(t.used() <= 64 * 1024);
        }
        assert!(t.len() > 10);
    }

    #[test]
    fn one_hit_wonders_do_not_evict_the_hot_set() {
        let mut t = Tier::new(64 * 1024);
        // 40 hot keys of ~1.3 KB, each asked for many times.
        for round in 0..10 {
            for i in 0..40 {
                if t.get(&key(i)).is_none() && round > 0 {
                    t.offer(key(i), entry(1000));
                }
            }
        }
        assert_eq!((0..40).filter(|i| t.map.contains_key(&key(*i))).count(), 40);
        // A scan of 5,000 keys asked for once each.
        for i in 1000..6000 {
            t.get(&key(i));
            t.offer(key(i), entry(1000));
        }
        let kept = (0..40).filter(|i| t.map.contains_key(&key(*i))).count();
        assert!(kept >= 36, "hot keys kept: {kept}");
    }
}
