//! The worker's spare buffers for SSI pages: a page's commands, its
//! included answers and the room its output is put together in come back
//! here when the page is done with them, so the next page reuses them
//! instead of asking the allocator for each (a page of three includes
//! needed a dozen allocations for them). Per thread: the workers share
//! nothing. Bounded: at most `KEEP` buffers of each kind, none larger
//! than `MAX_CAP`, stay (1 MiB of bytes per worker at the very most).

use std::cell::RefCell;

/// How many spare buffers of a kind a worker keeps.
const KEEP: usize = 16;
/// The largest buffer kept (an included page read whole is at most
/// 64 KiB: `ssi::READ_WHOLE_MAX`).
const MAX_CAP: usize = 64 * 1024;

thread_local! {
    static BYTES: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    static PAIRS: RefCell<Vec<Vec<(u32, u32)>>> = const { RefCell::new(Vec::new()) };
}

/// An empty byte buffer with room for `min` bytes at least.
pub fn bytes(min: usize) -> Vec<u8> {
    let mut b = BYTES.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    b.reserve(min);
    b
}

/// Gives a byte buffer back (emptied).
pub fn give(mut b: Vec<u8>) {
    if b.capacity() == 0 || b.capacity() > MAX_CAP {
        return;
    }
    b.clear();
    BYTES.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEEP {
            s.push(b);
        }
    });
}

/// An empty list of offset pairs (a command's parameter ends) with room
/// for `min`.
pub fn pairs(min: usize) -> Vec<(u32, u32)> {
    let mut b = PAIRS.with(|s| s.borrow_mut().pop()).unwrap_or_default();
    b.reserve(min);
    b
}

/// Gives a list of pairs back (emptied).
pub fn give_pairs(mut b: Vec<(u32, u32)>) {
    if b.capacity() == 0 || b.capacity() > MAX_CAP {
        return;
    }
    b.clear();
    PAIRS.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < KEEP {
            s.push(b);
        }
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn buffers_come_back_empty_with_their_room() {
        let mut b = super::bytes(100);
        b.extend_from_slice(b"abc");
        let cap = b.capacity();
        super::give(b);
        let b = super::bytes(10);
        assert!(b.is_empty());
        assert_eq!(b.capacity(), cap);
        super::give(b);
        super::give(Vec::with_capacity(super::MAX_CAP + 1));
        assert_eq!(super::bytes(0).capacity(), cap);
    }
}
