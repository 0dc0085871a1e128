//! The buckets' scheme, the computed bucket against a search of the
//! bounds, and the precision of the percentiles read from them: in Rust
//! ([`Hist::quantile`], the JSON page's) and in the dashboard's own
//! JavaScript, run by node on the JSON the page would receive.

use super::*;

const PERCENTILES: [f64; 3] = [0.5, 0.9, 0.99];

/// The largest error an estimate can have: the largest ratio of two
/// consecutive bounds, less one.
const WORST: f64 = 0.0931;

/// The bucket by a search of the bounds: what [`bucket`] computes.
fn searched(ns: u64) -> usize {
    BOUNDS_NS.iter().position(|&le| ns <= le).unwrap_or(NBOUNDS)
}

/// A deterministic generator (64-bit LCG, high bits).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 11
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.next() as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi] ns.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + (self.unit() * (hi - lo) as f64) as u64
    }
}

#[test]
fn mantissas_are_26th_roots_of_ten() {
    for (k, &m) in MANTISSAS.iter().enumerate() {
        assert_eq!(m, (10f64.powf(k as f64 / 26.0) * 1000.0).round() as u64, "k={k}");
    }
}

#[test]
fn bounds_reach_from_below_10us_past_60s_in_small_steps() {
    assert_eq!((BOUNDS_NS[0], BOUNDS_NS[1], BOUNDS_NS[NBOUNDS - 1]), (9152, 10_000, 64_220_000_000));
    assert!(BOUNDS_NS[NBOUNDS - 2] < 60_000_000_000);
    let ratios: Vec<f64> = BOUNDS_NS.windows(2).map(|w| w[1] as f64 / w[0] as f64).collect();
    let (min, max) = ratios.iter().fold((f64::MAX, 0f64), |(a, b), &r| (a.min(r), b.max(r)));
    assert!(min > 1.092 && max < 1.0 + WORST, "{min} {max}");
    // One decade is 26 steps, the same mantissas in each.
    for k in PER_DECADE..NBOUNDS {
        assert_eq!(BOUNDS_NS[k], BOUNDS_NS[k - PER_DECADE] * 10);
    }
}

#[test]
fn each_cell_holds_at_most_one_bound() {
    for (c, &first) in CELLS.iter().enumerate() {
        let e = FIRST_OCTAVE + (c >> SUB_BITS) as u32;
        let lo = (16 + (c as u64 & 15)) << (e - SUB_BITS);
        let hi = lo + (1 << (e - SUB_BITS));
        assert!(BOUNDS_NS.iter().filter(|&&b| lo <= b && b < hi).count() <= 1, "cell {c}: [{lo}, {hi})");
        assert_eq!(first as usize, searched(lo), "cell {c}");
    }
}

#[test]
fn bucket_is_the_first_bound_at_or_above() {
    let mut values = vec![0, 1, 8191, 8192, 1 << 35, (1 << 36) - 1, 1 << 36, u64::MAX];
    for &b in &BOUNDS_NS {
        values.extend([b - 1, b, b + 1]);
    }
    // Every cell's first and last value, over every octave a u64 has.
    for e in SUB_BITS..64 {
        for sub in 0..16u64 {
            let lo = (16 + sub) << (e - SUB_BITS);
            values.extend([lo, lo.saturating_add((1 << (e - SUB_BITS)) - 1)]);
        }
    }
    let mut r = Lcg(7);
    for _ in 0..200_000 {
        // Log-uniform from 1 ns to 2^40 ns (18 minutes).
        values.push((2f64.powf(r.unit() * 40.0)) as u64);
    }
    for v in values {
        assert_eq!(bucket(v), searched(v), "{v} ns");
    }
}

#[test]
fn sums_are_microseconds_rounded() {
    let h = HistCounters::default();
    for _ in 0..1000 {
        h.record(Duration::from_micros(50));
    }
    h.record(Duration::from_nanos(1499));
    h.record(Duration::from_nanos(1500));
    h.record(Duration::MAX);
    let h = h.read();
    assert_eq!((h.count(), h.sum_us), (1003, (50_000u64 + 1 + 2).wrapping_add(u64::MAX / 1000)));
    assert_eq!((h.buckets[0], h.buckets[searched(50_000)], h.buckets[NBOUNDS]), (2, 1000, 1));
}

#[test]
fn quantiles_interpolate_and_report_the_overflow() {
    assert_eq!(Hist::default().quantile(0.5), None);
    let mut h = Hist::default();
    // Four in (10, 10.93] µs: p50 halfway, p100 at the bound.
    h.buckets[2] = 4;
    let q = |h: &Hist, p| h.quantile(p).unwrap();
    assert!((q(&h, 0.5) - 10.465e-6).abs() < 1e-15, "{}", q(&h, 0.5));
    assert!((q(&h, 1.0) - 10.93e-6).abs() < 1e-15);
    h.buckets[NBOUNDS] = 1;
    assert_eq!(q(&h, 0.99), f64::INFINITY);
    assert!((q(&h, 0.8) - 10.93e-6).abs() < 1e-15);
}

fn hist_of(ns: &[u64]) -> Hist {
    let h = HistCounters::default();
    ns.iter().for_each(|&v| h.record(Duration::from_nanos(v)));
    h.read()
}

/// The nearest-rank quantile of `sorted` for the rank the histogram
/// reads (`p × n`, rounded up): the value a percentile should show.
fn true_quantile(sorted: &[u64], p: f64) -> f64 {
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank - 1] as f64 / 1e9
}

fn rel(estimate: f64, truth: f64) -> f64 {
    (estimate - truth).abs() / truth
}

/// The distributions of the tests, in nanoseconds.
fn distributions() -> Vec<(&'static str, Vec<u64>)> {
    let mut r = Lcg(42);
    let uniform: Vec<u64> = (0..10_000).map(|i| 10_000 + i * 990_000 / 9_999).collect();
    let mut mix: Vec<u64> = (0..7000).map(|_| r.between(40_000, 60_000)).collect();
    mix.extend((0..2500).map(|_| r.between(1_000_000, 5_000_000)));
    mix.extend((0..500).map(|_| r.between(500_000_000, 2_000_000_000)));
    let log_uniform: Vec<u64> = (0..20_000).map(|_| (1e4 * 6e6f64.powf(r.unit())) as u64).collect();
    vec![
        ("all 50 µs", vec![50_000; 1000]),
        ("uniform 10 µs to 1 ms", uniform),
        ("all 1 s", vec![1_000_000_000; 1000]),
        ("all 45 s", vec![45_000_000_000; 1000]),
        ("mix: 70 % 40-60 µs, 25 % 1-5 ms, 5 % 0.5-2 s", mix),
        ("log-uniform 10 µs to 60 s", log_uniform),
        ("all 10 µs", vec![10_000; 100]),
        ("all 60 s", vec![60_000_000_000; 100]),
    ]
}

#[test]
fn percentiles_of_known_distributions_are_within_10_percent() {
    let mut worst = 0f64;
    for (name, mut ns) in distributions() {
        let h = hist_of(&ns);
        ns.sort_unstable();
        for p in PERCENTILES {
            let (est, truth) = (h.quantile(p).unwrap(), true_quantile(&ns, p));
            println!("{name}: p{}: {est:.9} s, true {truth:.9} s, off {:.2} %", p * 100.0, rel(est, truth) * 100.0);
            assert!(rel(est, truth) < WORST, "{name} p{p}: {est} for {truth}");
            worst = worst.max(rel(est, truth));
        }
        let mean = h.sum_us as f64 / 1e6 / h.count() as f64;
        let truth = ns.iter().sum::<u64>() as f64 / 1e9 / ns.len() as f64;
        assert!(rel(mean, truth) < 0.001, "{name}: mean {mean} for {truth}");
    }
    println!("largest error: {:.2} %", worst * 100.0);
}

/// Every duration from 10 µs to 60 s in steps of 0.5 %, and each bound
/// and the nanosecond past it (the worst place: the whole bucket above
/// its true value), as a point mass and as the top of a spread.
#[test]
fn point_masses_across_the_range_are_within_10_percent() {
    let mut values: Vec<u64> = std::iter::successors(Some(10_000f64), |v| Some(v * 1.005))
        .take_while(|&v| v <= 60e9)
        .map(|v| v as u64)
        .collect();
    values.extend(BOUNDS_NS.iter().filter(|&&b| (10_000..=60_000_000_000).contains(&b)).flat_map(|&b| [b, b + 1]));
    let mut worst = (0f64, 0u64);
    for v in values {
        // A point mass, and 99 values ten times smaller under one of v
        // (p99's rank is the last of the 99: the estimate is their
        // bucket's bound, the farthest it can be).
        let mut spread = vec![v / 10; 99];
        spread.push(v);
        for ns in [vec![v; 100], spread] {
            let h = hist_of(&ns);
            for p in PERCENTILES {
                let (est, truth) = (h.quantile(p).unwrap(), true_quantile(&ns, p));
                if truth < 10e-6 {
                    continue;
                }
                assert!(rel(est, truth) < WORST, "{v} ns, p{p}: {est} for {truth}");
                if rel(est, truth) > worst.0 {
                    worst = (rel(est, truth), v);
                }
            }
        }
    }
    println!("largest error over point masses: {:.3} % (at {} ns)", worst.0 * 100.0, worst.1);
}

/// The dashboard's histogram code (`buckets`, `mergeBuckets`,
/// `minusBuckets`, `quantile`, `fmtQuantile`, `mean`, `fmtSecs`) run by
/// node on the JSON this server writes: the same percentiles as
/// [`Hist::quantile`], and what it shows within 10 % of the true value.
/// Node is required (scripts/test-all installs it).
#[test]
fn the_dashboards_javascript_reads_the_same_percentiles() {
    let page = super::super::dashboard::HTML;
    let start = page.find("  // ---- small helpers").expect("helpers in the page");
    let end = page.find("  // ---- the chart").expect("chart in the page");
    let harness = r#"
const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = cases.map((c) => {
  const h = c.merge ? mergeBuckets(c.merge.map(buckets)) : c.minus ? minusBuckets(buckets(c.minus[0]), buckets(c.minus[1])) : buckets(c.h);
  return { q: [0.5, 0.9, 0.99].map((p) => quantile(h, p)), shown: [0.5, 0.9, 0.99].map((p) => fmtQuantile(h, p)),
           mean: mean(h), shownMean: fmtSecs(mean(h)) };
});
process.stdout.write(JSON.stringify(out));
"#;
    let script = format!("'use strict';\n{}\n{harness}", &page[start..end]);
    let json = |h: &Hist| {
        let mut o = String::new();
        super::super::json::hist(&mut o, h);
        o
    };
    // (case for node, the histogram it should amount to, sorted samples).
    let mut cases: Vec<(String, Hist, Vec<u64>)> = Vec::new();
    let dists = distributions();
    for (_, ns) in &dists {
        let h = hist_of(ns);
        let mut sorted = ns.clone();
        sorted.sort_unstable();
        cases.push((format!("{{\"h\":{}}}", json(&h)), h, sorted));
    }
    // Two zones merged, and "the last minute": everything less what came
    // before it.
    let (a, b) = (&dists[0].1, &dists[3].1);
    let mut both = a.clone();
    both.extend(b);
    both.sort_unstable();
    let (ha, hb, hab) = (hist_of(a), hist_of(b), hist_of(&both));
    cases.push((format!("{{\"merge\":[{},{}]}}", json(&ha), json(&hb)), hab, both));
    let mut later = b.clone();
    later.sort_unstable();
    cases.push((format!("{{\"minus\":[{},{}]}}", json(&hab), json(&ha)), hb, later));
    let input = format!("[{}]", cases.iter().map(|c| c.0.as_str()).collect::<Vec<_>>().join(","));

    let path = std::env::temp_dir().join(format!("sluice-dashboard-hist-{}.js", std::process::id()));
    std::fs::write(&path, script).unwrap();
    let child = std::process::Command::new("node")
        .arg(&path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = child.expect("node (Debian's nodejs) runs the dashboard's JavaScript");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(out.status.success(), "node: {}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    // "51.2 µs", "2.50 ms", "45.0 s" in seconds.
    let shown = |s: &str| -> f64 {
        let (v, unit) = s.split_once(' ').unwrap_or_else(|| panic!("{s}"));
        let scale = match unit {
            "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            _ => panic!("{s}"),
        };
        v.parse::<f64>().unwrap() * scale
    };
    for (i, (_, h, sorted)) in cases.iter().enumerate() {
        let g = &got[i];
        for (k, p) in PERCENTILES.into_iter().enumerate() {
            let rust = h.quantile(p).unwrap();
            let js = g["q"][k].as_f64().unwrap();
            assert!(rel(js, rust) < 1e-12, "case {i} p{p}: js {js}, rust {rust}");
            let truth = true_quantile(sorted, p);
            let s = g["shown"][k].as_str().unwrap();
            assert!(rel(shown(s), truth) < 0.10, "case {i} p{p}: shown {s} for {truth}");
            println!("case {i} p{}: shown {s}, true {truth:.9} s", p * 100.0);
        }
        let truth = sorted.iter().sum::<u64>() as f64 / 1e9 / sorted.len() as f64;
        let m = g["mean"].as_f64().unwrap();
        assert!(rel(m, truth) < 0.001, "case {i}: mean {m} for {truth}");
        let s = g["shownMean"].as_str().unwrap();
        assert!(rel(shown(s), truth) < 0.006, "case {i}: mean shown {s} for {truth}");
    }
}
