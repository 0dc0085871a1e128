//! RFC 7540's stream priorities, as far as nginx honours them: when the
//! connection window opens, streams waiting on it are served parents
//! before their dependants, and among siblings the heavier first. RFC 9113
//! deprecates the scheme, but clients still send PRIORITY frames and
//! nginx's order is what its users see.
//!
//! The tree is a map from a stream to its parent and weight, kept for
//! streams that are open or were named by a PRIORITY frame (idle ones
//! included, which is how clients build their groups), and bounded: past
//! `MAX_NODES` new entries are ignored, so a peer cannot grow it without
//! limit.

use std::collections::HashMap;

use super::super::frame::Priority;

const MAX_NODES: usize = 512;
/// How far up a chain is followed (cycles cannot form, see `set`, but
/// the bound keeps a long chain from costing much).
const MAX_DEPTH: usize = 64;
pub const DEFAULT_WEIGHT: u8 = 15;

#[derive(Default)]
pub struct Tree {
    nodes: HashMap<u32, (u32, u8)>,
}

impl Tree {
    /// PRIORITY, or a HEADERS frame's priority fields, for `id`.
    pub fn set(&mut self, id: u32, p: &Priority) {
        if !self.nodes.contains_key(&id) && self.nodes.len() >= MAX_NODES {
            return;
        }
        let mut dep = p.depends_on;
        // A stream made to depend on one of its own dependants: that one
        // first moves to the stream's former parent (RFC 7540 5.3.3).
        if self.is_ancestor(id, dep) {
            let former = self.parent(id);
            if let Some(n) = self.nodes.get_mut(&dep) {
                n.0 = former;
            }
        }
        if dep == id {
            dep = 0;
        }
        if p.exclusive {
            for (k, n) in self.nodes.iter_mut() {
                if n.0 == dep && *k != id {
                    n.0 = id;
                }
            }
        }
        self.nodes.insert(id, (dep, p.weight));
    }

    /// A closed stream leaves the tree; its dependants move up to its
    /// parent (RFC 7540 5.3.4).
    pub fn forget(&mut self, id: u32) {
        let Some((parent, _)) = self.nodes.remove(&id) else { return };
        for n in self.nodes.values_mut() {
            if n.0 == id {
                n.0 = parent;
            }
        }
    }

    fn parent(&self, id: u32) -> u32 {
        self.nodes.get(&id).map_or(0, |n| n.0)
    }

    /// Whether `anc` is `id` or above it.
    fn is_ancestor(&self, anc: u32, mut id: u32) -> bool {
        for _ in 0..MAX_DEPTH {
            if id == 0 {
                return false;
            }
            if id == anc {
                return true;
            }
            id = self.parent(id);
        }
        false
    }

    fn depth(&self, mut id: u32) -> usize {
        let mut d = 0;
        while d < MAX_DEPTH {
            id = self.parent(id);
            if id == 0 {
                break;
            }
            d += 1;
        }
        d
    }

    /// Orders streams for a turn of the window: shallower first, then the
    /// heavier, then the older.
    pub fn order(&self, ids: &mut [u32]) {
        if self.nodes.is_empty() {
            ids.sort_unstable();
            return;
        }
        ids.sort_by_key(|&id| {
            let w = self.nodes.get(&id).map_or(DEFAULT_WEIGHT, |n| n.1);
            (self.depth(id), std::cmp::Reverse(w), id)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(dep: u32, weight: u8, exclusive: bool) -> Priority {
        Priority { depends_on: dep, exclusive, weight }
    }

    #[test]
    fn parents_then_weights() {
        let mut t = Tree::default();
        t.set(5, &p(0, 15, false));
        t.set(1, &p(5, 255, false));
        t.set(3, &p(5, 0, false));
        let mut ids = vec![1, 3, 5];
        t.order(&mut ids);
        assert_eq!(ids, [5, 1, 3]);
        // Reprioritized under its own dependant: that one moves up first.
        t.set(5, &p(1, 15, false));
        assert_eq!(t.parent(1), 0);
        assert_eq!(t.parent(5), 1);
        // Exclusive: the siblings become its children.
        t.set(7, &p(0, 15, true));
        assert_eq!(t.parent(1), 7);
        t.forget(7);
        assert_eq!(t.parent(1), 0);
    }
}
