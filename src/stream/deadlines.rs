//! The deadlines of the sessions a loop of the worker's runs inline
//! (`udp_inline`, `tcp_inline`): one min-heap and one timer for all of
//! them, instead of a timer per session.
//!
//! An entry names a session by its table slot and the slot's era, so an
//! entry left by a session that ended (or whose deadline moved) finds no
//! session, or one whose own deadline differs, and is dropped when it
//! comes up. Such entries would pile up when sessions end long before
//! their deadline (a 10-minute `proxy_timeout`, thousands of sessions a
//! second), so the heap is rebuilt from the live entries whenever it holds
//! more than twice as many entries as there are sessions: amortized, a
//! constant cost per ended session.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// Entries beyond the live sessions' that are kept without a rebuild.
const SLACK: usize = 256;

#[derive(Default)]
pub struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u32, u32)>>,
}

impl Deadlines {
    pub fn push(&mut self, at: Instant, slot: u32, era: u32) {
        self.heap.push(Reverse((at, slot, era)));
    }

    /// The earliest deadline (perhaps a stale entry's).
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The earliest entry due by `now`, taken out of the heap.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, u32, u32)> {
        match self.heap.peek() {
            Some(Reverse(e)) if e.0 <= now => self.heap.pop().map(|Reverse(e)| e),
            _ => None,
        }
    }

    /// Drops the entries `live` says are stale once they outnumber the
    /// `sessions` there are (see the module's text).
    pub fn compact(&mut self, sessions: usize, live: impl Fn(Instant, u32, u32) -> bool) {
        if self.heap.len() > 2 * sessions + SLACK {
            self.heap.retain(|Reverse((t, slot, era))| live(*t, *slot, *era));
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn due_entries_come_out_in_order_and_stale_ones_are_dropped() {
        let t0 = Instant::now();
        let mut d = Deadlines::default();
        for i in 0..1000u32 {
            d.push(t0 + Duration::from_millis(u64::from(1000 - i)), i, 1);
        }
        assert_eq!(d.next(), Some(t0 + Duration::from_millis(1)));
        assert_eq!(d.pop_due(t0), None);
        assert_eq!(d.pop_due(t0 + Duration::from_millis(2)).map(|e| e.1), Some(999));
        assert_eq!(d.pop_due(t0 + Duration::from_millis(2)).map(|e| e.1), Some(998));
        assert_eq!(d.pop_due(t0 + Duration::from_millis(2)), None);
        // Ten sessions live: the 988 others' entries go.
        d.compact(10, |_, slot, _| slot < 10);
        assert_eq!(d.len(), 10);
        // Few stale entries stay until they come up.
        d.compact(1, |_, slot, _| slot < 5);
        assert_eq!(d.len(), 10);
    }
}
