//! What `plumb delta` opens on: how far its runs can be trusted (each run's window graded as
//! `plumb compare` grades it), what the workload cost in each mode (its elapsed time and the
//! bytes it read from storage, median and range of the repetitions), the notes that need
//! action, and, with two modes, what differs between them beyond the measured spread by
//! `plumb compare`'s rule. Codes and numbers: `plumb_report` words it.

use crate::compare::{compare_samples, delta_direction, Samples, Verdict};
use crate::delta::{DeltaReport, Stat};
use crate::lab::Severity;
use crate::verdict::{window_trust, Action, Headline, RunVerdict, Unit};
use crate::Level;
use serde::Serialize;

/// A figure that differs between two modes by the rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeChange {
    pub group: String,
    pub object: String,
    pub metric: String,
    pub unit: String,
    /// The first mode (`cold`) and the one compared with it (`warm`).
    pub from: String,
    pub to: String,
    pub from_median: f64,
    pub to_median: f64,
    /// The change from `from` to `to` in percent, with its 95% interval, and the test's p.
    pub change_pct: f64,
    pub change_low_pct: f64,
    pub change_high_pct: f64,
    pub p: f64,
}

/// The delta's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeltaVerdict {
    #[serde(flatten)]
    pub run: RunVerdict,
    /// Figures that differ between the first mode and each other beyond the rule, the largest
    /// changes first (at most [`CHANGES_SHOWN`]).
    pub changes: Vec<ModeChange>,
    /// How many figures differ in all.
    pub changes_total: usize,
    /// Figures compared, and of them how many had too few runs a side for the test ever to
    /// reach p < 0.05 (four a side are needed).
    pub compared: usize,
    pub too_few: usize,
}

/// How many changes the verdict lists.
pub const CHANGES_SHOWN: usize = 5;
/// The smallest change the verdict calls a change, in percent (as `plumb compare`'s default).
pub const MIN_CHANGE_PCT: f64 = 5.0;

fn stat<'a>(r: &'a DeltaReport, group: &str, metric: &str, mode: usize) -> Option<&'a Stat> {
    r.rows
        .iter()
        .find(|x| x.group == group && x.object.is_empty() && x.metric == metric)
        .and_then(|x| x.stats.get(mode)?.as_ref())
}

pub fn delta(r: &DeltaReport) -> DeltaVerdict {
    let windows = r
        .modes
        .iter()
        .flat_map(|m| {
            m.runs.iter().enumerate().map(move |(i, x)| {
                window_trust(
                    &format!("{} run {}", m.mode, i + 1),
                    x.interference.as_ref(),
                )
            })
        })
        .collect();
    let mut v = RunVerdict::of_windows(windows);
    for (k, m) in r.modes.iter().enumerate() {
        let elapsed: Vec<f64> = m.runs.iter().map(|x| x.elapsed_s).collect();
        if let Some(s) = Stat::of(&elapsed) {
            v.headline.push(Headline {
                code: "elapsed",
                of: m.mode.clone(),
                value: s.median,
                low: Some(s.min),
                high: Some(s.max),
                unit: Unit::S,
            });
        }
        if let Some(s) = stat(r, "server", "storage_read_bytes", k) {
            v.headline.push(Headline {
                code: "storage_read",
                of: m.mode.clone(),
                value: s.median,
                low: Some(s.min),
                high: Some(s.max),
                unit: Unit::Bytes,
            });
        }
    }
    v.actions = r
        .notes
        .iter()
        .filter(|n| n.level == Level::Warn)
        .map(|n| Action {
            rule: n.code.to_string(),
            severity: Severity::Warn,
            experiment: false,
            finding: None,
        })
        .collect();
    let mut changes = Vec::new();
    let (mut compared, mut too_few) = (0, 0);
    for row in &r.rows {
        let Some(higher_is_better) = delta_direction(&row.group, &row.metric) else {
            continue;
        };
        let Some(Some(first)) = row.stats.first() else {
            continue;
        };
        for (k, other) in row.stats.iter().enumerate().skip(1) {
            let Some(other) = other else { continue };
            compared += 1;
            let c = compare_samples(
                Samples::Flat(&first.values),
                Samples::Flat(&other.values),
                higher_is_better,
                MIN_CHANGE_PCT,
            );
            match c.verdict {
                Verdict::TooFew => too_few += 1,
                Verdict::Better | Verdict::Worse => changes.push(ModeChange {
                    group: row.group.clone(),
                    object: row.object.clone(),
                    metric: row.metric.clone(),
                    unit: row.unit.clone(),
                    from: r.modes[0].mode.clone(),
                    to: r.modes[k].mode.clone(),
                    from_median: first.median,
                    to_median: other.median,
                    change_pct: c.change_pct,
                    change_low_pct: c.change_low_pct,
                    change_high_pct: c.change_high_pct,
                    p: c.p,
                }),
                _ => {}
            }
        }
    }
    // The largest first: a cost gone to nothing (-100%) or come from nothing (+inf) leads.
    changes.sort_by(|a, b| b.change_pct.abs().total_cmp(&a.change_pct.abs()));
    let changes_total = changes.len();
    changes.truncate(CHANGES_SHOWN);
    DeltaVerdict {
        run: v,
        changes,
        changes_total,
        compared,
        too_few,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::{summarize, ModeRuns, RunDelta};

    fn runs(mode: &str, reads: &[f64], hits: &[f64]) -> ModeRuns {
        ModeRuns {
            mode: mode.into(),
            preparation: vec![],
            runs: reads
                .iter()
                .zip(hits)
                .map(|(r, h)| {
                    let mut d = RunDelta {
                        elapsed_s: 0.01 + r / 1e5,
                        ..Default::default()
                    };
                    for (k, v) in [("blks_read", *r), ("blks_hit", *h)] {
                        d.values.insert(("db".into(), String::new(), k.into()), v);
                    }
                    d
                })
                .collect(),
        }
    }

    #[test]
    fn modes_differ_only_beyond_the_rule() {
        // Five runs a side: reads fall from ~600 to ~100 (beyond any spread), hits the same.
        let cold = runs(
            "cold",
            &[500.0, 700.0, 600.0, 650.0, 550.0],
            &[10.0, 12.0, 11.0, 9.0, 10.0],
        );
        let warm = runs(
            "warm",
            &[100.0, 110.0, 90.0, 105.0, 95.0],
            &[11.0, 9.0, 10.0, 12.0, 10.0],
        );
        let r = summarize(
            "t".into(),
            None,
            "w".into(),
            5,
            vec![cold, warm],
            vec![],
            1.0,
            false,
        );
        let v = delta(&r);
        assert_eq!(v.changes_total, 1, "{:?}", v.changes);
        let c = &v.changes[0];
        assert_eq!(
            (c.metric.as_str(), c.from.as_str(), c.to.as_str()),
            ("blks_read", "cold", "warm")
        );
        assert!(
            c.change_pct < -80.0 && c.change_high_pct < 0.0 && c.p < 0.05,
            "{c:?}"
        );
        assert_eq!(v.too_few, 0);
        // The runs were not watched: unwatched, not clean.
        assert_eq!(v.run.trust, crate::verdict::Trust::Unwatched);
        let e: Vec<&str> = v.run.headline.iter().map(|h| h.of.as_str()).collect();
        assert_eq!(e, ["cold", "warm"]);
        // Two runs a side: the test can never reach p < 0.05, so nothing is called changed.
        let cold = runs("cold", &[500.0, 700.0], &[1.0, 1.0]);
        let warm = runs("warm", &[100.0, 110.0], &[1.0, 1.0]);
        let r = summarize(
            "t".into(),
            None,
            "w".into(),
            2,
            vec![cold, warm],
            vec![],
            1.0,
            false,
        );
        let v = delta(&r);
        assert!(v.changes.is_empty());
        assert!(v.compared > 0 && v.too_few == v.compared, "{v:?}");
    }
}
