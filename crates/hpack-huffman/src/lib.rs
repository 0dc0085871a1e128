//! HPACK's Huffman code (RFC 7541 Appendix B), which QPACK uses too
//! (RFC 9204 4.1.2): a crate of its own so that sluice's HPACK module and
//! the vendored `h3`'s QPACK decoder share it.
//!
//! The code is canonical (codes of one length are consecutive, in symbol
//! order, and each length continues where the shorter one stopped), so the
//! whole table is its 257 code lengths; the codes, the decoding tree and
//! its nibble transitions are derived from them once per process.
//!
//! Decoding walks four bits at a time through a table of 256 states (the
//! tree's inner nodes) × 16 nibbles. The shortest code has five bits, so a
//! nibble completes at most one symbol: each step is one load and one
//! store into room made beforehand (the output advances by the step's
//! emit bit), with no per-bit branching and no capacity check per symbol.

use std::sync::OnceLock;

/// Code length of each symbol 0..=255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, //
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, //
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, //
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, //
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, //
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, //
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, //
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, //
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, //
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, //
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, //
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, //
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, //
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, //
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, //
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, //
    30,
];

const EOS: usize = 256;
/// The step completes a symbol.
const EMIT: u8 = 1;
/// The step decodes EOS or leaves the tree: the string is invalid.
const FAIL: u8 = 2;

#[derive(Clone, Copy, Default)]
struct Step {
    next: u8,
    sym: u8,
    flags: u8,
}

struct Tables {
    codes: [u32; 257],
    /// Indexed by a `u8` state, so the lookup needs no bounds check.
    steps: Box<[[Step; 16]; 256]>,
    /// A string may end in this state: the bits since the last symbol are
    /// at most seven 1s, a prefix of EOS (RFC 7541 section 5.2).
    accept: [bool; 256],
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(build)
}

fn build() -> Tables {
    let mut order: Vec<usize> = (0..257).collect();
    order.sort_by_key(|&s| (LENGTHS[s], s));
    let mut codes = [0u32; 257];
    let (mut code, mut prev) = (0u32, LENGTHS[order[0]]);
    for (i, &s) in order.iter().enumerate() {
        if i > 0 {
            code = (code + 1) << (LENGTHS[s] - prev);
        }
        prev = LENGTHS[s];
        codes[s] = code;
    }
    // The tree: inner nodes with two children each; a child is an inner
    // node's index or a leaf (LEAF | symbol). Node 0 is the root.
    const LEAF: u16 = 0x8000;
    const NONE: u16 = 0xffff;
    let mut nodes: Vec<[u16; 2]> = vec![[NONE, NONE]];
    for s in 0..257 {
        let len = LENGTHS[s] as u32;
        let mut node = 0usize;
        for i in (0..len).rev() {
            let bit = ((codes[s] >> i) & 1) as usize;
            if i == 0 {
                nodes[node][bit] = LEAF | s as u16;
            } else {
                if nodes[node][bit] == NONE {
                    nodes.push([NONE, NONE]);
                    nodes[node][bit] = (nodes.len() - 1) as u16;
                }
                node = nodes[node][bit] as usize;
            }
        }
    }
    // 257 leaves of a full binary tree: 256 inner nodes, so a state is a u8.
    debug_assert_eq!(nodes.len(), 256);
    let mut steps = Box::new([[Step::default(); 16]; 256]);
    for (state, row) in steps.iter_mut().enumerate() {
        for (nibble, step) in row.iter_mut().enumerate() {
            let mut node = state;
            for i in (0..4).rev() {
                let child = nodes[node][(nibble >> i) & 1];
                if child == NONE {
                    step.flags |= FAIL;
                    break;
                }
                if child & LEAF != 0 {
                    let sym = (child & !LEAF) as usize;
                    if sym == EOS {
                        step.flags |= FAIL;
                        break;
                    }
                    step.flags |= EMIT;
                    step.sym = sym as u8;
                    node = 0;
                } else {
                    node = child as usize;
                }
            }
            step.next = node as u8;
        }
    }
    let mut accept = [false; 256];
    let mut node = 0usize;
    accept[0] = true;
    for _ in 0..7 {
        node = nodes[node][1] as usize;
        accept[node] = true;
    }
    Tables { codes, steps, accept }
}

/// The string's Huffman decoding could not be valid (RFC 7541 5.2: EOS
/// inside it, or padding that is not a short prefix of EOS).
#[derive(Debug, PartialEq, Eq)]
pub struct Invalid;

/// Appends the decoding of `src` to `dst` (on error, what was decoded
/// before the invalid bits).
pub fn decode(src: &[u8], dst: &mut Vec<u8>) -> Result<(), Invalid> {
    let t = tables();
    let start = dst.len();
    // Every symbol takes five bits or more, so this many fit the room.
    dst.resize(start + src.len() * 8 / 5 + 1, 0);
    let out = &mut dst[start..];
    let mut n = 0usize;
    let mut state = 0u8;
    let mut ok = true;
    'bytes: for &b in src {
        for nibble in [b >> 4, b & 0xf] {
            let step = t.steps[state as usize][nibble as usize];
            if step.flags & FAIL != 0 {
                ok = false;
                break 'bytes;
            }
            // Stored either way; kept only when the step completes a symbol.
            out[n] = step.sym;
            n += (step.flags & EMIT) as usize;
            state = step.next;
        }
    }
    dst.truncate(start + n);
    if ok && t.accept[state as usize] { Ok(()) } else { Err(Invalid) }
}

/// As [`decode`], but a whole byte of padding (eight 1 bits) after a
/// string that ends on a byte boundary is taken too: some encoders write
/// it, and nginx's grpc module accepts it from an origin.
pub fn decode_lenient(src: &[u8], dst: &mut Vec<u8>) -> Result<(), Invalid> {
    let start = dst.len();
    match decode(src, dst) {
        Ok(()) => Ok(()),
        Err(Invalid) => match src.split_last() {
            Some((0xff, rest)) => {
                dst.truncate(start);
                decode(rest, dst)
            }
            _ => Err(Invalid),
        },
    }
}

/// Bytes `src` takes Huffman-encoded.
pub fn encoded_len(src: &[u8]) -> usize {
    let bits: usize = src.iter().map(|&b| LENGTHS[b as usize] as usize).sum();
    bits.div_ceil(8)
}

/// Appends the Huffman encoding of `src` to `dst`, padded with 1s.
pub fn encode(src: &[u8], dst: &mut Vec<u8>) {
    let t = tables();
    let mut acc: u64 = 0;
    let mut n: u32 = 0;
    // Four bytes go at a time: fewer pushes than a byte per step. `n`
    // stays below 32 between symbols, and a code has at most 30 bits, so
    // the pending bits fit the accumulator (bits above them are dropped
    // by the casts).
    for &b in src {
        let len = LENGTHS[b as usize] as u32;
        acc = (acc << len) | t.codes[b as usize] as u64;
        n += len;
        if n >= 32 {
            n -= 32;
            dst.extend_from_slice(&((acc >> n) as u32).to_be_bytes());
        }
    }
    while n >= 8 {
        n -= 8;
        dst.push((acc >> n) as u8);
    }
    if n > 0 {
        dst.push(((acc << (8 - n)) as u8) | (0xff >> n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "application/grpc" takes 88 bits: a whole byte of padding after it
    /// is refused, but taken by the lenient decoding (nginx's test origin
    /// writes it).
    #[test]
    fn lenient_takes_a_whole_padding_byte() {
        let mut enc = Vec::new();
        encode(b"application/grpc", &mut enc);
        assert_eq!(enc.len(), 11);
        enc.push(0xff);
        let mut out = Vec::new();
        assert_eq!(decode(&enc, &mut out), Err(Invalid));
        out.clear();
        assert_eq!(decode_lenient(&enc, &mut out), Ok(()));
        assert_eq!(out, b"application/grpc");
        out.clear();
        enc.push(0xff);
        assert_eq!(decode_lenient(&enc, &mut out), Err(Invalid));
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn codes_match_the_rfc_table() {
        let t = tables();
        assert_eq!(t.codes[b'0' as usize], 0x0);
        assert_eq!(t.codes[b' ' as usize], 0x14);
        assert_eq!(t.codes[b'a' as usize], 0x3);
        assert_eq!(t.codes[0], 0x1ff8);
        assert_eq!(t.codes[255], 0x3ffffee);
        assert_eq!(t.codes[EOS], 0x3fffffff);
    }

    /// RFC 7541 Appendix C.4 and C.6 strings.
    #[test]
    fn rfc_examples_round_trip() {
        for (text, enc) in [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            ("Mon, 21 Oct 2013 20:13:21 GMT", "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff"),
            ("https://www.example.com", "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3"),
        ] {
            let mut out = Vec::new();
            encode(text.as_bytes(), &mut out);
            assert_eq!(out, hex(enc), "{text}");
            assert_eq!(encoded_len(text.as_bytes()), out.len());
            let mut back = Vec::new();
            decode(&out, &mut back).unwrap();
            assert_eq!(back, text.as_bytes());
        }
    }

    #[test]
    fn every_byte_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        let mut out = Vec::new();
        encode(&all, &mut out);
        let mut back = Vec::new();
        decode(&out, &mut back).unwrap();
        assert_eq!(back, all);
    }

    #[test]
    fn bad_padding_and_eos_are_refused() {
        let mut v = Vec::new();
        // 'a' (00011) then three 0 bits of padding.
        assert_eq!(decode(&[0x18], &mut v), Err(Invalid));
        // A whole byte of 1s as padding: more than seven bits.
        assert_eq!(decode(&[0x1f, 0xff], &mut v), Err(Invalid));
        // EOS itself.
        assert_eq!(decode(&[0xff, 0xff, 0xff, 0xfc], &mut v), Err(Invalid));
        v.clear();
        assert_eq!(decode(&[0x1f], &mut v), Ok(()));
        assert_eq!(v, b"a");
    }
}
