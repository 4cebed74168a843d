//! Latency histograms kept in results so a later `plumb compare` can bootstrap a percentile of
//! one run: microseconds in buckets 2% wide (a percentile read from them is within 1% of the
//! exact one), stored sparse as `[microseconds, count]` pairs, a few hundred at most.

use serde::{Deserialize, Serialize};

/// Bucket width: each bucket's upper edge is this times its lower.
const GROWTH: f64 = 1.02;

/// A latency histogram: `[µs, count]` pairs, ascending, no empty buckets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LatencyHistogram(pub Vec<[u64; 2]>);

fn bucket(us: u64) -> i64 {
    ((us.max(1) as f64).ln() / GROWTH.ln()).floor() as i64
}

/// The value a bucket stands for: its geometric middle, in whole µs (at least 1).
fn middle(b: i64) -> u64 {
    (GROWTH.powf(b as f64 + 0.5)).round().max(1.0) as u64
}

impl LatencyHistogram {
    /// From (µs, count) pairs in any order.
    pub(crate) fn from_counts(values: impl IntoIterator<Item = (u64, u64)>) -> LatencyHistogram {
        let mut m = std::collections::BTreeMap::<i64, u64>::new();
        for (us, n) in values {
            if n > 0 {
                *m.entry(bucket(us)).or_insert(0) += n;
            }
        }
        // Two buckets may share a middle at the smallest values: merge them.
        let mut out: Vec<[u64; 2]> = Vec::with_capacity(m.len());
        for (b, n) in m {
            let v = middle(b);
            match out.last_mut() {
                Some(last) if last[0] == v => last[1] += n,
                _ => out.push([v, n]),
            }
        }
        LatencyHistogram(out)
    }

    /// From single durations in µs.
    pub fn from_us(v: &[u64]) -> LatencyHistogram {
        Self::from_counts(v.iter().map(|&x| (x, 1)))
    }

    /// From an HDR histogram of microseconds.
    pub(crate) fn from_hdr_us(h: &hdrhistogram::Histogram<u64>) -> LatencyHistogram {
        Self::from_counts(h.iter_recorded().map(|v| {
            (
                h.median_equivalent(v.value_iterated_to()),
                v.count_at_value(),
            )
        }))
    }

    /// Every value the histogram holds, as its bucket's middle (µs), ascending.
    pub fn values(&self) -> Vec<f64> {
        self.0
            .iter()
            .flat_map(|b| std::iter::repeat_n(b[0] as f64, b[1].min(1 << 20) as usize))
            .collect()
    }

    pub fn count(&self) -> u64 {
        self.0.iter().map(|b| b[1]).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value at quantile `q` (nearest rank), in µs.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let w: Vec<f64> = self.0.iter().map(|b| b[1] as f64).collect();
        weighted_quantile(&self.0, &w, q)
    }
}

/// The value at quantile `q` of buckets weighted by `w` (nearest rank).
fn weighted_quantile(b: &[[u64; 2]], w: &[f64], q: f64) -> Option<f64> {
    let total: f64 = w.iter().sum();
    if total <= 0.0 {
        return None;
    }
    let rank = (q * total).ceil().max(1.0);
    let mut seen = 0.0;
    for (x, n) in b.iter().zip(w) {
        seen += n;
        if seen >= rank {
            return Some(x[0] as f64);
        }
    }
    b.last().map(|x| x[0] as f64)
}

/// A small deterministic generator (splitmix64): the same histograms give the same intervals.
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    /// A Poisson draw with mean `m`: exact (Knuth) below 30, else the normal approximation.
    fn poisson(&mut self, m: f64) -> f64 {
        if m < 30.0 {
            let l = (-m).exp();
            let (mut k, mut p) = (0.0, 1.0);
            loop {
                p *= self.unit();
                if p <= l {
                    return k;
                }
                k += 1.0;
            }
        }
        let z = (-2.0 * self.unit().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.unit()).cos();
        (m + z * m.sqrt()).round().max(0.0)
    }
}

/// One percentile of two runs' histograms: each side's value with its 95% bootstrap interval
/// and the change's (Poisson bootstrap: every transaction weighted by a Poisson(1) draw, so a
/// bucket's count is redrawn as Poisson(count)), and the two-sided bootstrap p-value of "no
/// change" (twice the share of resampled changes on the far side of zero).
#[derive(Debug, Clone, PartialEq)]
pub struct PercentileBoot {
    pub baseline: (f64, f64, f64),
    pub candidate: (f64, f64, f64),
    pub change_pct: f64,
    pub change_low_pct: f64,
    pub change_high_pct: f64,
    pub p: f64,
}

pub(crate) fn bootstrap_percentile(
    a: &LatencyHistogram,
    b: &LatencyHistogram,
    q: f64,
    resamples: usize,
) -> Option<PercentileBoot> {
    let (qa, qb) = (a.quantile(q)?, b.quantile(q)?);
    let mut rng = Mix(0x5EED ^ a.count() << 20 ^ b.count());
    let draw = |h: &LatencyHistogram, rng: &mut Mix| -> Option<f64> {
        let w: Vec<f64> = h.0.iter().map(|x| rng.poisson(x[1] as f64)).collect();
        weighted_quantile(&h.0, &w, q)
    };
    let (mut va, mut vb, mut ch) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..resamples {
        let (Some(x), Some(y)) = (draw(a, &mut rng), draw(b, &mut rng)) else {
            continue;
        };
        va.push(x);
        vb.push(y);
        if x > 0.0 {
            ch.push(100.0 * (y - x) / x);
        }
    }
    if ch.is_empty() {
        return None;
    }
    for v in [&mut va, &mut vb, &mut ch] {
        v.sort_by(f64::total_cmp);
    }
    let pick = |v: &[f64], p: f64| v[(((v.len() - 1) as f64) * p).round() as usize];
    let below = ch.iter().filter(|c| **c <= 0.0).count() as f64 / ch.len() as f64;
    let above = ch.iter().filter(|c| **c >= 0.0).count() as f64 / ch.len() as f64;
    Some(PercentileBoot {
        baseline: (qa, pick(&va, 0.025), pick(&va, 0.975)),
        candidate: (qb, pick(&vb, 0.025), pick(&vb, 0.975)),
        change_pct: if qa > 0.0 {
            100.0 * (qb - qa) / qa
        } else {
            f64::NAN
        },
        change_low_pct: pick(&ch, 0.025),
        change_high_pct: pick(&ch, 0.975),
        p: (2.0 * below.min(above)).min(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_keep_percentiles_within_one_percent() {
        let v: Vec<u64> = (1..=10_000).map(|i| 200 + i * 3).collect();
        let h = LatencyHistogram::from_us(&v);
        assert_eq!(h.count(), 10_000);
        assert!(h.0.len() <= 260, "{} buckets", h.0.len());
        for (q, exact) in [(0.5, 200.0 + 5000.0 * 3.0), (0.99, 200.0 + 9900.0 * 3.0)] {
            let got = h.quantile(q).unwrap();
            assert!((got - exact).abs() / exact < 0.01, "q{q}: {got} vs {exact}");
        }
        assert_eq!(LatencyHistogram::from_us(&[]).quantile(0.5), None);
        // JSON: pairs.
        let j = serde_json::to_string(&LatencyHistogram::from_us(&[1000, 1000, 5000])).unwrap();
        assert_eq!(j, "[[993,2],[5039,1]]");
    }

    /// Latencies drawn from a log-normal around `median` µs.
    fn lognormal(seed: u64, n: usize, median: f64) -> Vec<u64> {
        let mut r = Mix(seed);
        (0..n)
            .map(|_| {
                let z =
                    (-2.0 * r.unit().ln()).sqrt() * (2.0 * std::f64::consts::PI * r.unit()).cos();
                (median * (0.5 * z).exp()) as u64
            })
            .collect()
    }

    #[test]
    fn one_distribution_keeps_its_p99_and_a_slower_one_is_found() {
        let a = LatencyHistogram::from_us(&lognormal(1, 20_000, 1000.0));
        let same = LatencyHistogram::from_us(&lognormal(2, 20_000, 1000.0));
        let slow = LatencyHistogram::from_us(&lognormal(3, 20_000, 1300.0));
        let s = bootstrap_percentile(&a, &same, 0.99, 400).unwrap();
        assert!(s.change_low_pct < 5.0 && s.change_high_pct > -5.0, "{s:?}");
        let w = bootstrap_percentile(&a, &slow, 0.99, 400).unwrap();
        assert!(w.change_low_pct > 5.0 && w.p < 0.05, "{w:?}");
        assert!(w.baseline.1 <= w.baseline.0 && w.baseline.0 <= w.baseline.2);
    }
}
