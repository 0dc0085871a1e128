//! A small MaxMind DB writer (the MaxMind DB File Format Specification,
//! version 2.0), so the geoip2 tests build their own `.mmdb` files: a
//! binary search tree over address bits with 24-, 28- or 32-bit records,
//! 16 zero bytes, the data section, then the metadata marker and map.
//!
//! An IPv6 database holds IPv4 networks at `::a.b.c.d/(96+len)`, where
//! readers (libmaxminddb, the maxminddb crate) look IPv4 addresses up.

use std::net::IpAddr;

/// A data-section value.
#[derive(Clone, Debug)]
pub enum V {
    Str(String),
    F64(f64),
    F32(f32),
    Bytes(Vec<u8>),
    U16(u16),
    U32(u32),
    U64(u64),
    U128(u128),
    I32(i32),
    Bool(bool),
    Map(Vec<(String, V)>),
    Arr(Vec<V>),
}

pub fn s(v: &str) -> V {
    V::Str(v.to_string())
}

pub fn map(pairs: &[(&str, V)]) -> V {
    V::Map(pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}

/// A control byte (and extended type and size bytes) for `ty` and `size`.
fn ctrl(out: &mut Vec<u8>, ty: u8, size: usize) {
    let (first, ext) = if ty <= 7 { (ty << 5, None) } else { (0, Some(ty - 7)) };
    let (bits, extra): (u8, Vec<u8>) = if size < 29 {
        (size as u8, vec![])
    } else if size < 285 {
        (29, vec![(size - 29) as u8])
    } else if size < 65_821 {
        (30, ((size - 285) as u16).to_be_bytes().to_vec())
    } else {
        (31, ((size - 65_821) as u32).to_be_bytes()[1..].to_vec())
    };
    out.push(first | bits);
    if let Some(e) = ext {
        out.push(e);
    }
    out.extend(extra);
}

/// An unsigned number in the fewest big-endian bytes.
fn uint(out: &mut Vec<u8>, ty: u8, v: u128, width: usize) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|b| **b == 0).count().max(16 - width);
    ctrl(out, ty, 16 - skip);
    out.extend_from_slice(&bytes[skip..]);
}

pub fn encode(v: &V, out: &mut Vec<u8>) {
    match v {
        V::Str(t) => {
            ctrl(out, 2, t.len());
            out.extend_from_slice(t.as_bytes());
        }
        V::F64(f) => {
            ctrl(out, 3, 8);
            out.extend_from_slice(&f.to_be_bytes());
        }
        V::Bytes(b) => {
            ctrl(out, 4, b.len());
            out.extend_from_slice(b);
        }
        V::U16(n) => uint(out, 5, u128::from(*n), 2),
        V::U32(n) => uint(out, 6, u128::from(*n), 4),
        V::Map(pairs) => {
            ctrl(out, 7, pairs.len());
            for (k, v) in pairs {
                encode(&V::Str(k.clone()), out);
                encode(v, out);
            }
        }
        V::I32(n) => {
            ctrl(out, 8, 4);
            out.extend_from_slice(&n.to_be_bytes());
        }
        V::U64(n) => uint(out, 9, u128::from(*n), 8),
        V::U128(n) => uint(out, 10, *n, 16),
        V::Arr(items) => {
            ctrl(out, 11, items.len());
            for i in items {
                encode(i, out);
            }
        }
        V::Bool(b) => ctrl(out, 14, usize::from(*b)),
        V::F32(f) => {
            ctrl(out, 15, 4);
            out.extend_from_slice(&f.to_be_bytes());
        }
    }
}

#[derive(Clone, Copy)]
enum Child {
    Node(usize),
    Data(usize),
    Empty,
}

/// A database being built.
pub struct Writer {
    v6: bool,
    record_size: u32,
    nodes: Vec<[Child; 2]>,
    records: Vec<V>,
    pub build_epoch: u64,
    pub database_type: String,
}

fn bits_of(v6_tree: bool, net: &str) -> (u128, u32) {
    let (a, len) = net.split_once('/').unwrap_or((net, ""));
    let ip: IpAddr = a.parse().expect("a network address");
    match ip {
        IpAddr::V4(v4) => {
            let len = len.parse().unwrap_or(32);
            if v6_tree { (u128::from(u32::from(v4)), 96 + len) } else { (u128::from(u32::from(v4)) << 96, len) }
        }
        IpAddr::V6(v6) => {
            assert!(v6_tree, "an IPv6 network in an IPv4 database");
            (u128::from(v6), len.parse().unwrap_or(128))
        }
    }
}

impl Writer {
    /// `record_size`: 24, 28 or 32.
    pub fn new(v6: bool, record_size: u32) -> Writer {
        Writer {
            v6,
            record_size,
            nodes: vec![[Child::Empty; 2]],
            records: Vec::new(),
            build_epoch: 1_700_000_000,
            database_type: "Sluice-Test-City".into(),
        }
    }

    /// Maps `net` ("a.b.c.d/len", "x::/len") to `data`; a longer prefix
    /// inserted after a shorter one splits it.
    pub fn insert(&mut self, net: &str, data: V) -> &mut Self {
        self.records.push(data);
        let leaf = Child::Data(self.records.len() - 1);
        let (addr, len) = bits_of(self.v6, net);
        let mut n = 0;
        for i in 0..len {
            let bit = ((addr >> (127 - i)) & 1) as usize;
            if i + 1 == len {
                self.nodes[n][bit] = leaf;
                break;
            }
            n = match self.nodes[n][bit] {
                Child::Node(m) => m,
                old => {
                    self.nodes.push([old; 2]);
                    let m = self.nodes.len() - 1;
                    self.nodes[n][bit] = Child::Node(m);
                    m
                }
            };
        }
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut data = Vec::new();
        let offsets: Vec<usize> = self
            .records
            .iter()
            .map(|r| {
                let at = data.len();
                encode(r, &mut data);
                at
            })
            .collect();
        let count = self.nodes.len();
        let mut out = Vec::new();
        for n in &self.nodes {
            let [l, r] = n.map(|c| match c {
                Child::Node(m) => m as u64,
                Child::Data(i) => (count + 16 + offsets[i]) as u64,
                Child::Empty => count as u64,
            });
            match self.record_size {
                24 => {
                    out.extend_from_slice(&l.to_be_bytes()[5..]);
                    out.extend_from_slice(&r.to_be_bytes()[5..]);
                }
                28 => {
                    out.extend_from_slice(&l.to_be_bytes()[5..]);
                    out.push((((l >> 24) & 0x0f) << 4 | ((r >> 24) & 0x0f)) as u8);
                    out.extend_from_slice(&r.to_be_bytes()[5..]);
                }
                _ => {
                    out.extend_from_slice(&(l as u32).to_be_bytes());
                    out.extend_from_slice(&(r as u32).to_be_bytes());
                }
            }
        }
        out.extend([0u8; 16]);
        out.extend(data);
        out.extend_from_slice(b"\xab\xcd\xefMaxMind.com");
        let meta = map(&[
            ("node_count", V::U32(count as u32)),
            ("record_size", V::U16(self.record_size as u16)),
            ("ip_version", V::U16(if self.v6 { 6 } else { 4 })),
            ("database_type", s(&self.database_type)),
            ("languages", V::Arr(vec![s("en")])),
            ("binary_format_major_version", V::U16(2)),
            ("binary_format_minor_version", V::U16(0)),
            ("build_epoch", V::U64(self.build_epoch)),
            ("description", map(&[("en", s("sluice test database"))])),
        ]);
        encode(&meta, &mut out);
        out
    }
}
