//! `plumb compare --history DIR`: where in a series of dated runs did each figure move? Change
//! points by E-divisive means (Matteson & James, 2014; as Apache Otava/hunter find them in
//! benchmark histories): the split of a series that maximises the energy distance between its
//! two sides, kept when a permutation test says such a split is not chance (p < 0.05) and the
//! medians either side differ beyond the practical floor; then each side is searched again.

use super::{median, InputError, Run, ALPHA};
use serde::Serialize;

/// Permutations per test: p can go down to 1/200.
const PERMUTATIONS: usize = 199;
/// The fewest runs either side of a change point.
pub const MIN_SIDE: usize = 2;

/// The best split of `z`: X = z[..τ] against Y = z[τ..κ] over every τ and κ (the end of Y
/// need not be the end of the segment: a level that returns, as a regression that was fixed,
/// is found too), maximising Q = mk/(m+k) · Ê(X, Y), the energy distance scaled by the sizes;
/// O(n²) from prefix sums of the distances.
fn best(z: &[f64]) -> Option<(usize, f64)> {
    let n = z.len();
    if n < 2 * MIN_SIDE {
        return None;
    }
    // p[j][t] = Σ_{i<t} |z_i − z_j|.
    let p: Vec<Vec<f64>> = (0..n)
        .map(|j| {
            let mut row = vec![0.0; n + 1];
            for t in 0..n {
                row[t + 1] = row[t] + (z[t] - z[j]).abs();
            }
            row
        })
        .collect();
    // within[t] = Σ_{i<k<t} |z_i − z_k|.
    let mut within = vec![0.0; n + 1];
    for t in 1..=n {
        within[t] = within[t - 1] + p[t - 1][t - 1];
    }
    let mut top: Option<(usize, f64)> = None;
    for tau in MIN_SIDE..=n - MIN_SIDE {
        let m = tau as f64;
        let wx = within[tau] / (m * (m - 1.0) / 2.0);
        let (mut cross, mut wy) = (0.0, 0.0);
        for kappa in tau..n {
            // Add z[kappa] to Y.
            cross += p[kappa][tau];
            wy += p[kappa][kappa] - p[kappa][tau];
            let k = (kappa + 1 - tau) as f64;
            if k < MIN_SIDE as f64 {
                continue;
            }
            let e = 2.0 * cross / (m * k) - wx - wy / (k * (k - 1.0) / 2.0);
            let q = m * k / (m + k) * e;
            if top.is_none_or(|t| q > t.1) {
                top = Some((tau, q));
            }
        }
    }
    top
}

/// A deterministic shuffle (xorshift): the same history gives the same p-values.
fn shuffle(v: &mut [f64], state: &mut u64) {
    for i in (1..v.len()).rev() {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let j = (*state % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// Histories longer than this are searched in windows of this many runs, half a window apart
/// (as Otava's analysis windows its series): the work grows with the number of runs, not with
/// its square, and a change is seen whole from at least one window.
pub const WINDOW: usize = 100;

/// The change points of `z` (indices where the new level starts) with their p-values, in
/// order; a split is kept when its permutation p < 0.05 and the medians either side differ by
/// more than `min_change_pct`. A long history is searched window by window ([`WINDOW`]); a
/// change two windows see is kept once, with the smaller p, as are two closer than
/// [`MIN_SIDE`] runs.
pub(crate) fn e_divisive(z: &[f64], min_change_pct: f64) -> Vec<(usize, f64)> {
    if z.len() <= WINDOW {
        return e_divisive_whole(z, min_change_pct);
    }
    let mut found = Vec::new();
    let mut lo = 0;
    loop {
        let hi = (lo + WINDOW).min(z.len());
        found.extend(
            e_divisive_whole(&z[lo..hi], min_change_pct)
                .into_iter()
                .map(|(at, p)| (lo + at, p)),
        );
        if hi == z.len() {
            break;
        }
        lo += WINDOW / 2;
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut out: Vec<(usize, f64)> = Vec::new();
    for (at, p) in found {
        match out.last_mut() {
            Some(last) if at - last.0 < MIN_SIDE => {
                if p < last.1 {
                    *last = (at, p);
                }
            }
            _ => out.push((at, p)),
        }
    }
    out
}

fn e_divisive_whole(z: &[f64], min_change_pct: f64) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    let mut segments = vec![(0usize, z.len())];
    let mut state = 0x2545_F491_4F6C_DD1D ^ z.len() as u64;
    while let Some((lo, hi)) = segments.pop() {
        let seg = &z[lo..hi];
        let Some((t, q)) = best(seg) else {
            continue;
        };
        let mut perm = seg.to_vec();
        let mut at_least = 0usize;
        for _ in 0..PERMUTATIONS {
            shuffle(&mut perm, &mut state);
            if best(&perm).is_some_and(|(_, qp)| qp >= q) {
                at_least += 1;
            }
        }
        let p = (at_least + 1) as f64 / (PERMUTATIONS + 1) as f64;
        let (before, after) = (median(&seg[..t]), median(&seg[t..]));
        let change = if before != 0.0 {
            100.0 * (after - before) / before.abs()
        } else {
            f64::INFINITY
        };
        if p < ALPHA && change.abs() > min_change_pct {
            out.push((lo + t, p));
            segments.push((lo, lo + t));
            segments.push((lo + t, hi));
        }
    }
    out.sort_by_key(|c| c.0);
    out
}

/// Where one figure moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePoint {
    pub figure: String,
    pub higher_is_better: bool,
    /// The first run at the new level.
    pub run: String,
    /// The runs from the previous change point (or the first) up to this one, and from this
    /// one to the next (or the last): their medians.
    pub before: f64,
    pub after: f64,
    pub change_pct: f64,
    pub p: f64,
    /// better or worse, by the figure's direction.
    pub better: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryReport {
    pub what: String,
    /// The runs, in the order judged.
    pub runs: Vec<String>,
    pub min_change_pct: f64,
    pub alpha: f64,
    pub permutations: usize,
    /// Figures with enough runs to look for a change (at least 4).
    pub figures_checked: usize,
    pub changes: Vec<ChangePoint>,
}

/// Every figure's change points over `runs` (already in date order, all of one kind).
/// What kind of run it is, for a history: the command (with `--quick`) and the engine.
fn kind_of(r: &Run) -> String {
    let quick = r
        .context
        .get("command line")
        .is_some_and(|c| c.split_whitespace().any(|w| w == "--quick"));
    let engine = r.context.get("engine").map(|e| {
        if e.contains("MariaDB") {
            "MariaDB"
        } else if e.contains("PostgreSQL") {
            "PostgreSQL"
        } else if e.contains("SQL Server") {
            "SQL Server"
        } else {
            e.as_str()
        }
    });
    format!(
        "{}{}{}",
        r.what,
        if quick { " --quick" } else { "" },
        engine.map(|e| format!(" on {e}")).unwrap_or_default()
    )
}

pub fn history(runs: &[Run], min_change_pct: f64) -> Result<HistoryReport, InputError> {
    history_with(runs, min_change_pct, &mut |_, _| {})
}

/// [`history`], saying before each figure which one of how many it is (`at`, `of`).
pub fn history_with(
    runs: &[Run],
    min_change_pct: f64,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<HistoryReport, InputError> {
    let Some(first) = runs.first() else {
        return Err(InputError::NotAResult {
            file: "--history".into(),
            why: "no results in the directory".into(),
        });
    };
    // One kind: the same command, on the same engine, quick or full (a quick lab's figures
    // are not a full one's, nor MariaDB's PostgreSQL's): a mix is refused with its groups.
    let mut groups: Vec<(String, usize)> = Vec::new();
    for r in runs {
        let k = kind_of(r);
        match groups.iter_mut().find(|g| g.0 == k) {
            Some(g) => g.1 += 1,
            None => groups.push((k, 1)),
        }
    }
    if groups.len() > 1 {
        let named: Vec<String> = groups.iter().map(|(k, n)| format!("{n} × {k}")).collect();
        return Err(InputError::Mixed {
            groups: named.join(", "),
        });
    }
    let mut checked = 0;
    let mut changes = Vec::new();
    for (i, f) in first.figures.iter().enumerate() {
        progress(i, first.figures.len());
        // The runs that have the figure, in order.
        let series: Vec<(&str, f64)> = runs
            .iter()
            .filter_map(|r| {
                r.figures
                    .iter()
                    .find(|g| g.name == f.name)
                    .filter(|g| g.value.is_finite())
                    .map(|g| (r.file.as_str(), g.value))
            })
            .collect();
        if series.len() < 2 * MIN_SIDE {
            continue;
        }
        checked += 1;
        let z: Vec<f64> = series.iter().map(|s| s.1).collect();
        let cps = e_divisive(&z, min_change_pct);
        let mut bounds = vec![0];
        bounds.extend(cps.iter().map(|c| c.0));
        bounds.push(z.len());
        for (k, (at, p)) in cps.iter().enumerate() {
            let (before, after) = (median(&z[bounds[k]..*at]), median(&z[*at..bounds[k + 2]]));
            let change_pct = 100.0 * (after - before) / before.abs();
            changes.push(ChangePoint {
                figure: f.name.clone(),
                higher_is_better: f.higher_is_better,
                run: series[*at].0.to_string(),
                before,
                after,
                change_pct,
                p: *p,
                better: (after > before) == f.higher_is_better,
            });
        }
    }
    Ok(HistoryReport {
        what: first.what.clone(),
        runs: runs.iter().map(|r| r.file.clone()).collect(),
        min_change_pct,
        alpha: ALPHA,
        permutations: PERMUTATIONS,
        figures_checked: checked,
        changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(level: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                level * (1.0 + ((s % 1000) as f64 / 1000.0 - 0.5) * 0.06)
            })
            .collect()
    }

    #[test]
    fn a_step_is_found_where_it_happened_and_a_flat_series_has_none() {
        let mut z = noisy(1000.0, 12, 1);
        z.extend(noisy(800.0, 10, 2));
        let cps = e_divisive(&z, 5.0);
        assert_eq!(cps.len(), 1, "{cps:?}");
        assert_eq!(cps[0].0, 12);
        assert!(cps[0].1 < 0.05);
        assert!(e_divisive(&noisy(1000.0, 22, 3), 5.0).is_empty());
        // Two steps: both.
        let mut z = noisy(1000.0, 8, 4);
        z.extend(noisy(700.0, 8, 5));
        z.extend(noisy(1000.0, 8, 6));
        let cps: Vec<usize> = e_divisive(&z, 5.0).iter().map(|c| c.0).collect();
        assert_eq!(cps, vec![8, 16]);
        // A step inside the floor is not a change.
        let mut z = noisy(1000.0, 12, 7);
        z.extend(noisy(1030.0, 12, 8));
        assert!(e_divisive(&z, 5.0).is_empty());
    }

    /// A long history is searched in windows: each step is found once, where it happened,
    /// including one at a window's edge, and a flat stretch has none.
    #[test]
    fn a_long_history_finds_each_step_once() {
        let mut z = noisy(1000.0, 130, 11);
        z.extend(noisy(700.0, 150, 12));
        z.extend(noisy(1000.0, 120, 13));
        let cps: Vec<usize> = e_divisive(&z, 5.0).iter().map(|c| c.0).collect();
        assert_eq!(cps, vec![130, 280]);
        // A step right at a window's end (100) is seen whole from the next window.
        let mut z = noisy(1000.0, 100, 14);
        z.extend(noisy(800.0, 100, 15));
        let cps: Vec<usize> = e_divisive(&z, 5.0).iter().map(|c| c.0).collect();
        assert_eq!(cps, vec![100]);
        assert!(e_divisive(&noisy(1000.0, 400, 16), 5.0).is_empty());
    }

    /// A MariaDB lab among PostgreSQL labs, and quick labs among full ones, are refused with
    /// the mix named (they were searched as one series).
    #[test]
    fn a_history_of_mixed_kinds_is_refused_with_the_mix_named() {
        let lab = |engine: &str, cmd: &str| Run {
            file: "r".into(),
            what: "plumb lab".into(),
            figures: vec![super::super::Figure::new("pgbench tps", true, 1000.0)],
            context: [
                ("engine".to_string(), engine.to_string()),
                ("command line".to_string(), cmd.to_string()),
            ]
            .into_iter()
            .collect(),
            windows: vec![],
        };
        let pg = "PostgreSQL 15.18 (Debian 15.18-0+deb12u1)";
        let mut runs: Vec<Run> = (0..5).map(|_| lab(pg, "")).collect();
        assert!(history(&runs, 5.0).is_ok());
        runs.push(lab("10.11.6-MariaDB-0+deb12u1", "--kind mariadb"));
        runs.push(lab(pg, "--quick"));
        runs.push(lab(pg, "--quick"));
        let e = history(&runs, 5.0).unwrap_err().to_string();
        assert!(
            e.contains("5 × plumb lab on PostgreSQL, 1 × plumb lab on MariaDB, 2 × plumb lab --quick on PostgreSQL"),
            "{e}"
        );
    }

    #[test]
    fn q_matches_the_definition() {
        // τ = 2: cross mean 9, within means 1 and 1: E = 18 − 1 − 1 = 16; Q = 4/4 × 16.
        assert_eq!(best(&[1.0, 2.0, 10.0, 11.0]), Some((2, 16.0)));
    }
}
