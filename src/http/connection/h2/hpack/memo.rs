//! A per-thread memo of Huffman codings of short strings that repeat.
//!
//! Why: a proxied gRPC call decodes about nine Huffman-coded strings from
//! its origin (nginx, for one, sends every response field as a literal,
//! never indexed: `server`, `content-type`, `etag`, the trailers...) and
//! encodes about ten for it (`:path`, `content-type`, `te`, ...), nearly
//! all the same from call to call. Each coding walks the string bit by bit
//! (about 500 instructions for a 20-byte value, callgrind, 2026-12); a
//! lookup here is a hash of two words and a comparison. Entries live in
//! the worker thread, not the connection, so a new origin connection (one
//! every few calls when `keepalive` keeps fewer than the calls in flight)
//! finds them too.
//!
//! Direct-mapped: a string takes the one slot its hash names, replacing
//! what was there (a changing `date` costs a slot, never a search). Only
//! successful codings are kept, so an invalid string always goes through
//! the real decoder and fails there.

use std::cell::RefCell;

/// Slots, for the three kinds together: room for a few dozen strings
/// without many of them taking each other's slot.
const SLOTS: usize = 128;
/// The longest key kept: longer strings are rarely constant headers.
const KEY: usize = 40;
/// Room for a value: a decoding is at most 8/5 of its Huffman form (the
/// shortest code has 5 bits); an encoding (length prefix and string) at
/// most one byte more than its raw form.
const VALUE: usize = KEY * 8 / 5;

#[derive(Clone, Copy)]
struct Slot {
    /// The key's length, the kind and the value's length in one word,
    /// so that a lookup compares them at once; 0 for an empty slot.
    tag: u32,
    key: [u8; KEY],
    value: [u8; VALUE],
}

const EMPTY: Slot = Slot { tag: 0, key: [0; KEY], value: [0; VALUE] };

/// The coding an entry holds, so the three never answer for each other.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Decode = 1,
    DecodeLenient = 2,
    Encode = 3,
}

struct Memo {
    slots: [Slot; SLOTS],
}

thread_local! {
    static MEMO: RefCell<Memo> = const { RefCell::new(Memo { slots: [EMPTY; SLOTS] }) };
}

/// The slot of `key`: its length and its first and last eight bytes,
/// mixed by one multiplication (a collision only costs a miss).
fn slot_of(key: &[u8], kind: Kind) -> usize {
    let (a, b) = match (key.first_chunk::<8>(), key.last_chunk::<8>()) {
        (Some(a), Some(b)) => (u64::from_le_bytes(*a), u64::from_le_bytes(*b)),
        _ => (key.iter().fold(0u64, |h, &c| (h << 8) | u64::from(c)), 0),
    };
    let h = (a ^ b.rotate_left(29) ^ ((key.len() as u64) << 56) ^ kind as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

/// The tag a slot holding `key` as `kind` has, whatever its value.
fn key_tag(key: &[u8], kind: Kind) -> u32 {
    (key.len() as u32 + 1) | (kind as u32) << 8
}

/// Appends the memo's value for `key` to `dst`: whether it had one.
pub fn get(kind: Kind, key: &[u8], dst: &mut Vec<u8>) -> bool {
    if key.len() > KEY {
        return false;
    }
    let tag = key_tag(key, kind);
    MEMO.with(|m| {
        let Ok(m) = m.try_borrow() else { return false };
        let s = &m.slots[slot_of(key, kind)];
        if s.tag & 0xffff != tag || s.key.get(..key.len()) != Some(key) {
            return false;
        }
        let len = (s.tag >> 16) as usize;
        dst.extend_from_slice(s.value.get(..len).unwrap_or_default());
        true
    })
}

/// Keeps `value` as the coding of `key`, when both fit a slot.
pub fn put(kind: Kind, key: &[u8], value: &[u8]) {
    if key.len() > KEY || value.len() > VALUE {
        return;
    }
    MEMO.with(|m| {
        let Ok(mut m) = m.try_borrow_mut() else { return };
        let s = &mut m.slots[slot_of(key, kind)];
        s.tag = key_tag(key, kind) | (value.len() as u32) << 16;
        s.key[..key.len()].copy_from_slice(key);
        s.value[..value.len()].copy_from_slice(value);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_lengths_are_kept_apart() {
        let mut out = Vec::new();
        assert!(!get(Kind::Decode, b"abc", &mut out));
        put(Kind::Decode, b"abc", b"decoded");
        assert!(get(Kind::Decode, b"abc", &mut out));
        assert_eq!(out, b"decoded");
        out.clear();
        assert!(!get(Kind::DecodeLenient, b"abc", &mut out));
        assert!(!get(Kind::Decode, b"ab", &mut out));
        assert!(!get(Kind::Decode, b"abd", &mut out));
        // The empty string is a key like any other.
        put(Kind::Encode, b"", b"\x00");
        assert!(get(Kind::Encode, b"", &mut out));
        assert_eq!(out, b"\x00");
        // Too long to keep.
        let long = [b'x'; KEY + 1];
        put(Kind::Encode, &long, b"v");
        assert!(!get(Kind::Encode, &long, &mut out));
    }
}
