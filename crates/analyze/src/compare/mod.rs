//! Did it get better? The rule `plumb compare` judges one figure by, over the runs (or the
//! per-second samples) of two sides: a change counts when the Mann-Whitney U test says the sides
//! differ (p < 0.05, as benchstat) **and** the change's bootstrap interval lies wholly outside a
//! practical floor (±`min_change`, as Criterion's noise threshold). Otherwise the figure is
//! not distinguishable (`~`); where the samples are too few for the test ever to reach p < 0.05,
//! it says so instead.

use serde::Serialize;

/// The significance level.
pub const ALPHA: f64 = 0.05;
/// One run a side cannot show how far a figure moves from run to run: the samples inside a
/// run (its seconds, its transactions) share the run's luck. Five identical `plumb lab --quick`
/// runs on one quiet host moved tps by 20% and a durable write's p99 by up to 49% (max − min
/// over the median; bench/results/lab-stability-2026-11-23.md). With one run a side the floor
/// is raised to these (or `--min-change`, when larger): throughput and rates…
pub const ONE_RUN_FLOOR_PCT: f64 = 25.0;
/// …and latencies (lower is better)…
pub const ONE_RUN_LATENCY_FLOOR_PCT: f64 = 50.0;
/// …and tails (p99 and beyond): identical `plumb lab --quick` runs back to back on one quiet
/// host differed in their p99s by up to 3.6 times (+255%: pgbench's, and every insert loop's
/// commits, the whole run long), as the host's storage had its good and bad minutes. One run
/// a side can only call a tail changed beyond that.
pub const ONE_RUN_TAIL_FLOOR_PCT: f64 = 300.0;

/// The floor a change must clear: `--min-change`, raised with one run a side.
pub fn floor_pct(min_change_pct: f64, one_run_a_side: bool, higher_is_better: bool) -> f64 {
    floor_for(min_change_pct, one_run_a_side, higher_is_better, false)
}

/// The floor, knowing whether the figure is a latency's tail (p99 or beyond).
pub(crate) fn floor_for(
    min_change_pct: f64,
    one_run_a_side: bool,
    higher: bool,
    tail: bool,
) -> f64 {
    match (one_run_a_side, higher, tail) {
        (false, _, _) => min_change_pct,
        (true, true, _) => min_change_pct.max(ONE_RUN_FLOOR_PCT),
        (true, false, false) => min_change_pct.max(ONE_RUN_LATENCY_FLOOR_PCT),
        (true, false, true) => min_change_pct.max(ONE_RUN_TAIL_FLOOR_PCT),
    }
}
/// Bootstrap resamples for the intervals.
pub(crate) const RESAMPLES: usize = 2000;

/// A two-sided Mann-Whitney U test: U of the first sample and the p-value (exact without ties
/// and up to 30 values a side, else the normal approximation with the tie and continuity
/// corrections).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MannWhitney {
    pub u: f64,
    pub p: f64,
}

/// Ranks (1-based, ties averaged) of `a` then `b` pooled; and the tie groups' sizes.
fn ranks(a: &[f64], b: &[f64]) -> (f64, Vec<usize>) {
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut r1 = 0.0;
    let mut ties = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for x in &all[i..=j] {
            if x.1 {
                r1 += rank;
            }
        }
        if j > i {
            ties.push(j - i + 1);
        }
        i = j + 1;
    }
    (r1, ties)
}

/// How many ways `m` of `n1 + n2` ranks without ties sum to give each U, from 0 to n1·n2.
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    // f[i][j][u]: arrangements of i values of one side and j of the other with U = u.
    let max = n1 * n2;
    let mut prev: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
    for row in prev.iter_mut() {
        row[0] = 1.0;
    }
    for i in 1..=n1 {
        let mut cur: Vec<Vec<f64>> = vec![vec![0.0; max + 1]; n2 + 1];
        cur[0][0] = 1.0;
        for j in 1..=n2 {
            for u in 0..=i * j {
                // The largest value is the first side's (adds j to U) or the second's.
                let a = if u >= j { prev[j][u - j] } else { 0.0 };
                let b = cur[j - 1][u];
                cur[j][u] = a + b;
            }
        }
        prev = cur;
    }
    prev[n2].clone()
}

fn exact_p(u: f64, n1: usize, n2: usize) -> f64 {
    let counts = u_counts(n1, n2);
    let total: f64 = counts.iter().sum();
    let mean = (n1 * n2) as f64 / 2.0;
    let d = (u - mean).abs();
    let extreme: f64 = counts
        .iter()
        .enumerate()
        .filter(|(k, _)| (*k as f64 - mean).abs() >= d - 1e-9)
        .map(|(_, c)| c)
        .sum();
    (extreme / total).min(1.0)
}

/// The smallest p-value samples of these sizes can give: below [`ALPHA`] or the test can never
/// find a change (benchstat refuses under 4 a side for the same reason).
pub(crate) fn smallest_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    // Two of the C(n1+n2, n1) orderings are the most extreme.
    let mut c = 1.0f64;
    for k in 0..n1.min(n2) {
        c = c * (n1 + n2 - k) as f64 / (k + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// Φ(x), the standard normal distribution function (erfc after W. J. Cody's rational
/// approximation as in Numerical Recipes' erfcc: relative error under 1.2e-7).
pub(crate) fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let erfc = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

pub(crate) fn mann_whitney(a: &[f64], b: &[f64]) -> MannWhitney {
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return MannWhitney { u: 0.0, p: 1.0 };
    }
    let (r1, ties) = ranks(a, b);
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    if ties.is_empty() && n1 <= 30 && n2 <= 30 {
        return MannWhitney {
            u,
            p: exact_p(u, n1, n2),
        };
    }
    let n = (n1 + n2) as f64;
    let mean = (n1 * n2) as f64 / 2.0;
    let tie: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let var = (n1 * n2) as f64 / 12.0 * ((n + 1.0) - tie / (n * (n - 1.0)));
    if var <= 0.0 {
        // Every value the same.
        return MannWhitney { u, p: 1.0 };
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / var.sqrt();
    MannWhitney {
        u,
        p: (2.0 * (1.0 - normal_cdf(z))).min(1.0),
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// A small deterministic generator (xorshift64*): the same inputs give the same intervals.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn resample(v: &[f64], rng: &mut Rng, out: &mut Vec<f64>) {
    out.clear();
    out.extend((0..v.len()).map(|_| v[rng.below(v.len())]));
}

fn percentile_of_sorted(s: &[f64], q: f64) -> f64 {
    let i = ((s.len() - 1) as f64 * q).round() as usize;
    s[i.min(s.len() - 1)]
}

/// One side's centre: the median and its 95% bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Centre {
    pub median: f64,
    pub low: f64,
    pub high: f64,
    pub n: usize,
}

/// What the rule says of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Better,
    Worse,
    /// Not distinguishable by the rule.
    Same,
    /// Too few samples for the test ever to reach p < 0.05.
    TooFew,
    /// Not judged: a run's window for this figure was disturbed by a neighbour.
    Withheld,
    /// Not judged: the sides' runs are not alike for this figure (throughput of a closed loop
    /// against an open loop at a rate, or two rates).
    NotComparable,
}

/// One figure compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: Centre,
    pub candidate: Centre,
    /// The candidate's median against the baseline's, in percent, with its 95% interval.
    pub change_pct: f64,
    pub change_low_pct: f64,
    pub change_high_pct: f64,
    pub p: f64,
    pub verdict: Verdict,
    /// The practical floor the change's interval had to clear, in percent.
    pub floor_pct: f64,
}

/// The change from `a` to `b` in percent; from 0, infinite the way it went (a sort that
/// spills where it did not, swapping where there was none: beyond any floor), 0 to 0 none.
fn change_from(a: f64, b: f64) -> f64 {
    if a != 0.0 {
        100.0 * (b - a) / a.abs()
    } else if b > 0.0 {
        f64::INFINITY
    } else if b < 0.0 {
        f64::NEG_INFINITY
    } else {
        0.0
    }
}

/// One side's samples: plain values (runs, or the seconds of one run), or runs each with its
/// samples inside (a probe's repetitions, each with its tenths).
#[derive(Debug, Clone, Copy)]
pub enum Samples<'a> {
    Flat(&'a [f64]),
    Runs(&'a [Vec<f64>]),
}

impl Samples<'_> {
    fn pooled(&self) -> Vec<f64> {
        match self {
            Samples::Flat(v) => v.to_vec(),
            Samples::Runs(r) => r.iter().flatten().copied().collect(),
        }
    }

    /// A bootstrap draw. Runs are drawn as clusters: the runs with replacement, then each
    /// drawn run's samples with replacement, so the interval carries how far runs differ from
    /// each other, not only how far a run's samples do.
    fn resample(&self, rng: &mut Rng, out: &mut Vec<f64>) {
        match self {
            Samples::Flat(v) => resample(v, rng, out),
            Samples::Runs(r) => {
                out.clear();
                let runs: Vec<&Vec<f64>> = r.iter().filter(|x| !x.is_empty()).collect();
                for _ in 0..runs.len() {
                    let run = runs[rng.below(runs.len())];
                    out.extend((0..run.len()).map(|_| run[rng.below(run.len())]));
                }
            }
        }
    }
}

/// Compare one figure's samples. `higher_is_better`: throughput (true) or latency (false).
/// `min_change_pct`: the practical floor the change's interval must clear.
pub fn compare(
    baseline: &[f64],
    candidate: &[f64],
    higher_is_better: bool,
    min_change_pct: f64,
) -> Comparison {
    compare_samples(
        Samples::Flat(baseline),
        Samples::Flat(candidate),
        higher_is_better,
        min_change_pct,
    )
}

/// Compare one figure's samples, plain or as runs with samples inside: the test over all the
/// samples, the intervals from drawing whole runs (see [`Samples::resample`]).
pub(crate) fn compare_samples(
    baseline: Samples,
    candidate: Samples,
    higher_is_better: bool,
    min_change_pct: f64,
) -> Comparison {
    let (pa, pb) = (baseline.pooled(), candidate.pooled());
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (pa.len() as u64) << 32 ^ pb.len() as u64);
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    let mut meds_a = Vec::with_capacity(RESAMPLES);
    let mut meds_b = Vec::with_capacity(RESAMPLES);
    let mut changes = Vec::with_capacity(RESAMPLES);
    let (ma, mb) = (median(&pa), median(&pb));
    if !pa.is_empty() && !pb.is_empty() {
        for _ in 0..RESAMPLES {
            baseline.resample(&mut rng, &mut ra);
            candidate.resample(&mut rng, &mut rb);
            let (a, b) = (median(&ra), median(&rb));
            meds_a.push(a);
            meds_b.push(b);
            changes.push(change_from(a, b));
        }
    }
    for v in [&mut meds_a, &mut meds_b, &mut changes] {
        v.sort_by(f64::total_cmp);
    }
    let centre = |m: f64, boot: &[f64], n: usize| Centre {
        median: m,
        low: if boot.is_empty() {
            m
        } else {
            percentile_of_sorted(boot, 0.025)
        },
        high: if boot.is_empty() {
            m
        } else {
            percentile_of_sorted(boot, 0.975)
        },
        n,
    };
    let change_pct = change_from(ma, mb);
    let (lo, hi) = if changes.is_empty() {
        (f64::NAN, f64::NAN)
    } else {
        (
            percentile_of_sorted(&changes, 0.025),
            percentile_of_sorted(&changes, 0.975),
        )
    };
    let mw = mann_whitney(&pa, &pb);
    let verdict = if smallest_p(pa.len(), pb.len()) >= ALPHA {
        Verdict::TooFew
    } else if mw.p < ALPHA && (lo > min_change_pct || hi < -min_change_pct) {
        let up = lo > 0.0;
        if up == higher_is_better {
            Verdict::Better
        } else {
            Verdict::Worse
        }
    } else {
        Verdict::Same
    };
    Comparison {
        baseline: centre(ma, &meds_a, pa.len()),
        candidate: centre(mb, &meds_b, pb.len()),
        change_pct,
        change_low_pct: lo,
        change_high_pct: hi,
        p: mw.p,
        verdict,
        floor_pct: min_change_pct,
    }
}

mod history;
mod inputs;
mod recording;
pub use history::{history, history_with, ChangePoint, HistoryReport};
pub use inputs::*;
pub use recording::recording_run;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mann_whitney_agrees_with_known_values() {
        // Fully separated, 5 a side: U = 0, exact p = 2 / C(10, 5) = 2/252.
        let m = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert_eq!(m.u, 0.0);
        assert!((m.p - 2.0 / 252.0).abs() < 1e-12, "{m:?}");
        // Interleaved: U = 10; of the 252 orderings, 174 are as far from the middle (12.5)
        // or farther (counted by enumerating them): p = 174/252.
        let m = mann_whitney(&[1.0, 3.0, 5.0, 7.0, 9.0], &[2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(m.u, 10.0);
        assert!((m.p - 174.0 / 252.0).abs() < 1e-9, "{m:?}");
        // With ties (three 2s, ranks 2-4 averaged to 3): U = 2; the normal approximation with
        // the tie correction (variance 16/12 × (9 − 24/56) = 11.43) and the continuity
        // correction: z = 5.5 / 3.381 = 1.627, p = 0.1038.
        let m = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 4.0, 5.0, 6.0]);
        assert_eq!(m.u, 2.0);
        assert!((m.p - 0.10375).abs() < 0.0005, "{m:?}");
        // All equal: nothing to tell.
        assert_eq!(mann_whitney(&[1.0; 4], &[1.0; 4]).p, 1.0);
        assert!((normal_cdf(1.959964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(-1.0) - 0.158655).abs() < 1e-6);
    }

    #[test]
    fn runs_drawn_whole_carry_how_far_runs_differ() {
        // Two runs a side, each run's ten samples tight (±1%), but the baseline's runs 100
        // and 140 apart while the candidate's sit at 120: every sample pooled, the test is
        // sure and a flat bootstrap puts the change in a narrow band; drawing whole runs
        // shows it may be -14% or +20%.
        let run = |m: f64| -> Vec<f64> {
            (0..10)
                .map(|i| m * (1.0 + 0.01 * (i as f64 - 4.5) / 4.5))
                .collect()
        };
        let a = vec![run(100.0), run(140.0)];
        let b = vec![run(119.0), run(121.0)];
        let pooled = |v: &[Vec<f64>]| v.concat();
        let flat = compare(&pooled(&a), &pooled(&b), false, 5.0);
        let whole = compare_samples(Samples::Runs(&a), Samples::Runs(&b), false, 5.0);
        assert_eq!(flat.p, whole.p);
        assert!(
            whole.change_high_pct - whole.change_low_pct
                > flat.change_high_pct - flat.change_low_pct,
            "{flat:?} {whole:?}"
        );
        assert!(
            whole.change_low_pct < -10.0 && whole.change_high_pct > 15.0,
            "{whole:?}"
        );
        assert_eq!(whole.verdict, Verdict::Same);
        // Runs that agree, 30% apart: found.
        let b = vec![run(160.0), run(165.0)];
        let a = vec![run(120.0), run(124.0)];
        let c = compare_samples(Samples::Runs(&a), Samples::Runs(&b), false, 5.0);
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
    }

    #[test]
    fn three_a_side_can_never_be_significant() {
        assert!(smallest_p(3, 3) >= ALPHA); // 0.1
        assert!(smallest_p(4, 4) < ALPHA); // 0.029
        let c = compare(&[1.0, 1.1, 1.2], &[5.0, 5.1, 5.2], true, 5.0);
        assert_eq!(c.verdict, Verdict::TooFew);
    }

    /// Normal draws (Box-Muller on the test's own generator).
    fn draws(rng: &mut Rng, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let u1 = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                let u2 = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                mean + sd
                    * (-2.0 * u1.max(1e-300).ln()).sqrt()
                    * (2.0 * std::f64::consts::PI * u2).cos()
            })
            .collect()
    }

    #[test]
    fn one_distribution_gives_no_verdict_in_95_percent_of_200_trials() {
        let mut rng = Rng(42);
        let mut alarms = 0;
        let mut significant = 0;
        for _ in 0..200 {
            let (a, b) = (
                draws(&mut rng, 10, 100.0, 10.0),
                draws(&mut rng, 10, 100.0, 10.0),
            );
            let c = compare(&a, &b, true, 5.0);
            if c.verdict != Verdict::Same {
                alarms += 1;
            }
            // The test alone, without the floor, keeps to its level too.
            if c.p < ALPHA {
                significant += 1;
            }
        }
        assert!(alarms <= 10, "{alarms} false alarms in 200");
        assert!(significant <= 20, "{significant} significant in 200");
    }

    #[test]
    fn a_ten_percent_shift_with_ten_a_side_is_found() {
        let mut rng = Rng(7);
        let mut found = 0;
        for _ in 0..50 {
            let a = draws(&mut rng, 10, 1000.0, 20.0);
            let b = draws(&mut rng, 10, 1100.0, 20.0);
            let c = compare(&a, &b, true, 5.0);
            if c.verdict == Verdict::Better {
                found += 1;
            }
            // The same shift in a latency is worse.
            assert_ne!(compare(&a, &b, false, 5.0).verdict, Verdict::Better);
        }
        assert!(found >= 48, "found {found} of 50");
        let c = compare(
            &draws(&mut rng, 10, 1000.0, 20.0),
            &draws(&mut rng, 10, 1100.0, 20.0),
            false,
            5.0,
        );
        assert_eq!(c.verdict, Verdict::Worse);
        assert!(
            c.change_low_pct < c.change_pct && c.change_pct < c.change_high_pct,
            "{c:?}"
        );
        assert!(c.baseline.low <= c.baseline.median && c.baseline.median <= c.baseline.high);
    }

    #[test]
    fn a_significant_change_inside_the_floor_is_not_a_verdict() {
        // 2% apart with almost no spread: the test is sure, the floor is not cleared.
        let a: Vec<f64> = (0..10).map(|i| 100.0 + i as f64 * 0.01).collect();
        let b: Vec<f64> = (0..10).map(|i| 102.0 + i as f64 * 0.01).collect();
        let c = compare(&a, &b, true, 5.0);
        assert!(c.p < ALPHA);
        assert_eq!(c.verdict, Verdict::Same);
        assert_eq!(compare(&a, &b, true, 1.0).verdict, Verdict::Better);
    }

    #[test]
    fn a_cost_that_appears_where_there_was_none_is_worse() {
        // A sort that spills every time where it never did: from 0, beyond any floor.
        let none = [0.0; 8];
        let spills: Vec<f64> = (0..8).map(|i| 14.0e6 + i as f64 * 1e4).collect();
        let c = compare(&none, &spills, false, 5.0);
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        assert!(c.change_pct.is_infinite() && c.change_low_pct.is_infinite());
        assert_eq!(compare(&spills, &none, false, 5.0).verdict, Verdict::Better);
        // Nothing on both sides changes nothing.
        let c = compare(&none, &none, false, 5.0);
        assert_eq!((c.verdict, c.change_pct), (Verdict::Same, 0.0));
    }
}
