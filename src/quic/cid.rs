//! Connection IDs that carry the endpoint slot (`route`) owning the
//! connection, so that whichever worker reads a datagram can tell whose it
//! is from its destination connection ID alone.
//!
//! Layout (8 bytes): 4 random bytes, the slot (2 bytes) masked with a
//! keyed mix of the random bytes, and a 2-byte check over both. The mask
//! keeps the IDs of one connection (and of one worker) from sharing a
//! visible prefix, so an observer cannot link them by it (RFC 9000 5.1);
//! the check tells our IDs from a client's own random Initial IDs (a
//! false match, 1 in 65,536, sends that handshake to another live
//! endpoint, which serves it as well). The mix is not a cipher: it hides
//! the slot from a casual observer, nothing more.

use std::sync::OnceLock;
use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};

/// Length of every connection ID sluice issues.
pub const LEN: usize = 8;

fn key() -> u64 {
    static KEY: OnceLock<u64> = OnceLock::new();
    *KEY.get_or_init(|| {
        let mut b = [0u8; 8];
        let _ = aws_lc_rs::rand::fill(&mut b);
        u64::from_le_bytes(b)
    })
}

/// SplitMix64's finalizer: a cheap, well-spread 64-bit mix.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn mask(rand: u32) -> u16 {
    mix(key() ^ u64::from(rand)) as u16
}

fn check(rand: u32, slot: u16) -> u16 {
    (mix(key().rotate_left(17) ^ (u64::from(rand) << 16) ^ u64::from(slot)) >> 48) as u16
}

/// The ID bytes for `slot` with random bytes `rand`.
pub fn encode(slot: u16, rand: u32) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    out[..4].copy_from_slice(&rand.to_be_bytes());
    out[4..6].copy_from_slice(&(slot ^ mask(rand)).to_be_bytes());
    out[6..].copy_from_slice(&check(rand, slot).to_be_bytes());
    out
}

/// The slot an ID of ours names; None for an ID we did not issue.
pub fn decode(id: &[u8]) -> Option<u16> {
    let id: &[u8; LEN] = id.try_into().ok()?;
    let rand = u32::from_be_bytes([id[0], id[1], id[2], id[3]]);
    let slot = u16::from_be_bytes([id[4], id[5]]) ^ mask(rand);
    (u16::from_be_bytes([id[6], id[7]]) == check(rand, slot)).then_some(slot)
}

/// The destination connection ID of a QUIC datagram's first packet, read
/// from its header (RFC 9000 17.2, 17.3); None when the bytes are too
/// short to hold one. Short headers carry no length: ours is `LEN`.
pub fn destination(datagram: &[u8]) -> Option<&[u8]> {
    let first = *datagram.first()?;
    if first & 0x80 != 0 {
        let len = usize::from(*datagram.get(5)?);
        datagram.get(6..6 + len)
    } else {
        datagram.get(1..1 + LEN)
    }
}

/// The slot of the endpoint a datagram belongs to, if it names one.
pub fn owner(datagram: &[u8]) -> Option<u16> {
    decode(destination(datagram)?)
}

/// quinn's generator for one endpoint's IDs.
pub struct Generator {
    pub slot: u16,
}

impl ConnectionIdGenerator for Generator {
    fn generate_cid(&mut self) -> ConnectionId {
        let mut r = [0u8; 4];
        let _ = aws_lc_rs::rand::fill(&mut r);
        ConnectionId::new(&encode(self.slot, u32::from_be_bytes(r)))
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        decode(cid).map(|_| ()).ok_or(InvalidCid)
    }

    fn cid_len(&self) -> usize {
        LEN
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_their_slot_and_strangers_are_told_apart() {
        for slot in [0u16, 1, 7, 300, u16::MAX] {
            for rand in [0u32, 1, 0xdead_beef, u32::MAX] {
                assert_eq!(decode(&encode(slot, rand)), Some(slot));
            }
        }
        // Two IDs of one slot share no visible slot bytes.
        assert_ne!(encode(5, 1)[4..6], encode(5, 2)[4..6]);
        // Random IDs almost never pass the check.
        let mut passed = 0;
        for i in 0u64..100_000 {
            let b = mix(i).to_be_bytes();
            passed += usize::from(decode(&b).is_some());
        }
        assert!(passed < 10, "{passed}");
        assert_eq!(decode(&[1, 2, 3]), None);
    }

    #[test]
    fn destination_of_long_and_short_headers() {
        let id = encode(9, 42);
        let mut long = vec![0xc0, 0, 0, 0, 1, LEN as u8];
        long.extend_from_slice(&id);
        long.extend_from_slice(&[0, 0]);
        assert_eq!(owner(&long), Some(9));
        let mut short = vec![0x40];
        short.extend_from_slice(&id);
        short.push(0);
        assert_eq!(owner(&short), Some(9));
        assert_eq!(destination(&[0xc0, 0, 0, 0, 1, 20, 1]), None);
        assert_eq!(destination(&[]), None);
        assert_eq!(destination(&[0x40, 1]), None);
    }
}
