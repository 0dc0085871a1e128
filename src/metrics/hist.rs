//! Time histograms (request time, upstream response time) with buckets
//! fine enough that a percentile read from them is within 10 % of the
//! true value from 10 µs to 60 s, wherever it is read: the JSON page's
//! `p50`/`p90`/`p99` ([`Hist::quantile`]), the dashboard (the same
//! interpolation in JavaScript) and Prometheus' `histogram_quantile` over
//! the exposed `le` set (the same interpolation again).
//!
//! Why these buckets: all three estimate a quantile by linear
//! interpolation inside the bucket that holds it, so the estimate and the
//! true value lie in the same bucket `(lo, le]` and the error is below
//! `le / lo - 1` (reached when every observation of the bucket sits just
//! above `lo` and the rank lands on its last one). Geometric bounds with 26
//! per decade make that ratio 10^(1/26) = 1.0926; rounded to four
//! significant digits the largest is 1.093, so an estimate is off by 9.3 %
//! at most, which leaves room for a display rounded to three digits
//! (0.5 %). 25 per decade would leave 9.7 %, 24 exceed 10 %.
//!
//! The bounds are fixed by this file (never data-dependent): 9.152 µs, one
//! step below 10 µs so that 10 µs is not in the first bucket (which spans
//! `[0, 9.152 µs]` and is interpolated from 0), then 10 µs × 10^(k/26) to
//! 64.22 s, then +Inf: 179 bounds, 180 buckets. docs/configuration.md lists
//! them (a test compares).
//!
//! Recording is a few instructions (see [`bucket`]): two range checks, a
//! leading-zero count, a table load and one comparison, then two relaxed
//! load/store pairs. One histogram is 180 counters and a sum, 1448 bytes;
//! a worker holds one for all its requests, one per `status_zone` and one
//! per upstream it proxies to.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::add;

/// Bounds per decade.
pub const PER_DECADE: usize = 26;

/// 10^(k/26) for k = 0..25 to four significant digits, in thousandths.
pub const MANTISSAS: [u64; PER_DECADE] = [
    1000, 1093, 1194, 1304, 1425, 1557, 1701, 1859, 2031, 2219, 2424, 2649, 2894, 3162, 3455, 3775, 4125, 4507, 4924,
    5380, 5878, 6422, 7017, 7667, 8377, 9152,
];

/// Finite bucket bounds.
pub const NBOUNDS: usize = 179;
/// Buckets: one per bound, then +Inf.
pub const NBUCKETS: usize = NBOUNDS + 1;

/// The upper bound of each finite bucket in nanoseconds (inclusive, as
/// Prometheus' `le`): 9152, 10000, 10930, ..., 64_220_000_000.
pub const BOUNDS_NS: [u64; NBOUNDS] = bounds();

const fn bounds() -> [u64; NBOUNDS] {
    let mut b = [0u64; NBOUNDS];
    let mut k = 0;
    while k < NBOUNDS {
        // Step k is 10^((k - 1) / 26) × 10 µs: mantissa (k + 25) mod 26,
        // scale 10^((k + 25) div 26) ns.
        let i = k + PER_DECADE - 1;
        b[k] = MANTISSAS[i % PER_DECADE] * 10u64.pow((i / PER_DECADE) as u32);
        k += 1;
    }
    b
}

/// Octaves of the cell table: 2^13 ns (8.2 µs, below the first bound)
/// through 2^35 (the last bound, 64.22 s, is below 2^36).
const FIRST_OCTAVE: u32 = 13;
const OCTAVES: usize = 23;
/// Cells per octave: 16, each at most 1/16 of an octave wide (a ratio of
/// 1.0625, below the bounds' smallest, 1.092), so a cell holds at most one
/// bound.
const SUB_BITS: u32 = 4;
const CELLS_LEN: usize = OCTAVES << SUB_BITS;

/// For each cell (octave, top four bits after the leading one), the first
/// bucket whose bound is at or above the cell's lowest value.
const CELLS: [u8; CELLS_LEN] = cells();

const fn cells() -> [u8; CELLS_LEN] {
    let mut t = [0u8; CELLS_LEN];
    let mut c = 0;
    while c < CELLS_LEN {
        let e = FIRST_OCTAVE + (c >> SUB_BITS) as u32;
        let lo = ((1u64 << SUB_BITS) + (c as u64 & ((1 << SUB_BITS) - 1))) << (e - SUB_BITS);
        let mut k = 0;
        while k < NBOUNDS && BOUNDS_NS[k] < lo {
            k += 1;
        }
        t[c] = k as u8;
        c += 1;
    }
    t
}

/// The bucket of a duration of `ns` nanoseconds: the first whose bound is
/// at or above it (+Inf, [`NBOUNDS`], past the last). Computed, not
/// searched: the cell of `ns` gives the first bound at or above the cell's
/// start, and the one bound a cell can hold is passed or not.
#[inline]
pub fn bucket(ns: u64) -> usize {
    if ns <= BOUNDS_NS[0] {
        return 0;
    }
    if ns > BOUNDS_NS[NBOUNDS - 1] {
        return NBOUNDS;
    }
    // 2^13 <= ns < 2^36 here, so the octave is 13..=35 and the cell is in
    // the table; the first bound at or above its start is at or below
    // ns's own, so `t` is a bound's index (tests check every cell).
    let e = 63 - ns.leading_zeros();
    let cell = (((e - FIRST_OCTAVE) << SUB_BITS) as usize) | ((ns >> (e - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1));
    let t = CELLS[cell] as usize;
    t + usize::from(ns > BOUNDS_NS[t])
}

/// Nanoseconds of a duration (saturating: 584 years).
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A time histogram as one thread counts it.
pub struct HistCounters {
    /// Observations per bucket (not cumulative: the scrape adds them up).
    buckets: [AtomicU64; NBUCKETS],
    /// Microseconds (each observation rounded to the nearest): a mean
    /// right for sub-millisecond requests, and 58 years of summed time
    /// per counter before it wraps (nanoseconds would wrap after 21 days
    /// at 10,000 requests in progress all the time).
    sum_us: AtomicU64,
}

impl Default for HistCounters {
    fn default() -> HistCounters {
        HistCounters { buckets: std::array::from_fn(|_| AtomicU64::new(0)), sum_us: AtomicU64::new(0) }
    }
}

impl HistCounters {
    #[inline]
    pub fn record(&self, d: Duration) {
        let ns = nanos(d);
        add(&self.buckets[bucket(ns)], 1);
        add(&self.sum_us, ns.saturating_add(500) / 1000);
    }

    /// Adds `other`'s counts into this histogram; only for a set nobody
    /// else writes (a retired one, under the registry's lock).
    pub(super) fn absorb(&self, other: &HistCounters) {
        for (a, b) in self.buckets.iter().zip(&other.buckets) {
            add(a, b.load(Relaxed));
        }
        add(&self.sum_us, other.sum_us.load(Relaxed));
    }

    pub(super) fn sum_into(&self, h: &mut Hist) {
        for (a, b) in h.buckets.iter_mut().zip(&self.buckets) {
            *a = a.wrapping_add(b.load(Relaxed));
        }
        h.sum_us = h.sum_us.wrapping_add(self.sum_us.load(Relaxed));
    }

    /// This thread's counts alone.
    #[cfg(test)]
    pub(super) fn read(&self) -> Hist {
        let mut h = Hist::default();
        self.sum_into(&mut h);
        h
    }
}

/// A time histogram summed over threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hist {
    /// Observations per bucket (not cumulative).
    pub buckets: [u64; NBUCKETS],
    /// Microseconds.
    pub sum_us: u64,
}

impl Default for Hist {
    fn default() -> Hist {
        Hist { buckets: [0; NBUCKETS], sum_us: 0 }
    }
}

impl Hist {
    /// (bucket index, cumulative count), as Prometheus and the JSON page
    /// write them; the last is the total count.
    pub fn cumulative(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.buckets.iter().enumerate().scan(0u64, |cum, (j, n)| {
            *cum = cum.wrapping_add(*n);
            Some((j, *cum))
        })
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().fold(0u64, |a, n| a.wrapping_add(*n))
    }

    pub fn add(&mut self, other: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a = a.wrapping_add(*b);
        }
        self.sum_us = self.sum_us.wrapping_add(other.sum_us);
    }

    /// The `p`-quantile (0..=1) in seconds, interpolated linearly inside
    /// the bucket that holds rank `p × count` (the first whose cumulative
    /// count reaches it), from the bucket below's bound (0 for the first):
    /// Prometheus' `histogram_quantile` and the dashboard's `quantile`
    /// compute the same. None without observations; infinity when the
    /// rank is in the +Inf bucket.
    pub fn quantile(&self, p: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let target = p * total as f64;
        let (mut lo, mut below) = (0.0, 0u64);
        for (j, cum) in self.cumulative() {
            if cum as f64 >= target && cum > below {
                let Some(&le) = BOUNDS_NS.get(j) else { return Some(f64::INFINITY) };
                let le = le as f64 / 1e9;
                return Some(lo + (le - lo) * (target - below as f64) / (cum - below) as f64);
            }
            lo = BOUNDS_NS.get(j).map_or(lo, |&b| b as f64 / 1e9);
            below = cum;
        }
        None
    }
}

/// `ns` nanoseconds as seconds in decimal, exactly and without trailing
/// zeros: `0.000009152`, `1`, `64.22`.
pub fn ns_secs(ns: u64) -> String {
    let (s, f) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if f == 0 {
        return s.to_string();
    }
    let frac = format!("{f:09}");
    format!("{s}.{}", frac.trim_end_matches('0'))
}

/// The upper bound of bucket `j` in seconds: the `le` label and the JSON
/// page's bucket key (`+Inf` for the last).
pub fn le(j: usize) -> String {
    BOUNDS_NS.get(j).map_or_else(|| "+Inf".to_string(), |&ns| ns_secs(ns))
}

/// Microseconds as seconds with six decimals.
pub fn us_secs(us: u64) -> String {
    format!("{}.{:06}", us / 1_000_000, us % 1_000_000)
}

#[cfg(test)]
#[path = "hist_tests.rs"]
mod tests;
