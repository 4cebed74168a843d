//! `plumb io sweep`: the same job at several queue depths or rate limits, repeated, summarised
//! as median/min/max per level, and the knee — the level after which latency grows faster than
//! throughput.

use crate::interference::{Interference, Verdict};
use crate::io::quantile_s;
use crate::{Level as NoteLevel, Note, WithFacts};
use plumb_io::job::Job;
use plumb_io::run::{DirStats, RunResult};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepKind {
    QueueDepth,
    Rate,
}

/// One repetition at one level.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rep {
    pub ios: u64,
    pub iops: f64,
    pub bytes_per_s: f64,
    pub lat_mean_s: Option<f64>,
    pub lat_p99_s: Option<f64>,
    /// Whether the run's window was disturbed, with the evidence (None: not observed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
}

impl Rep {
    /// Not known to be disturbed.
    pub fn is_clean(&self) -> bool {
        self.interference.as_ref().is_none_or(|i| i.is_clean())
    }
}

pub fn rep_of(r: &RunResult) -> Rep {
    let mut all = DirStats::empty(false);
    for w in &r.workers {
        all.merge(&w.read);
        all.merge(&w.write);
    }
    let secs = r.measured_s.max(1e-9);
    Rep {
        ios: all.ios,
        iops: all.ios as f64 / secs,
        bytes_per_s: all.bytes as f64 / secs,
        lat_mean_s: (all.ios > 0).then(|| all.lat_sum_ns / all.ios as f64 / 1e9),
        lat_p99_s: quantile_s(&all.lat, 0.99),
        interference: None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// (max − min) / median: 0 for one value.
    pub fn relative(&self) -> f64 {
        if self.median.abs() > 0.0 {
            (self.max - self.min) / self.median.abs()
        } else {
            0.0
        }
    }
}

pub fn spread(v: &[f64]) -> Option<Spread> {
    let mut s: Vec<f64> = v.iter().cloned().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Some(Spread {
        median,
        min: s[0],
        max: s[n - 1],
    })
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Level {
    pub label: String,
    /// The queue depth, or the rate in bytes/s (None: unthrottled).
    pub value: Option<f64>,
    /// Every run at this level, disturbed ones included (they are kept as evidence).
    pub reps: Vec<Rep>,
    /// Runs whose window was clean: the figures below are theirs.
    pub clean_reps: usize,
    /// Clean when at least one run was; otherwise the figures are the disturbed runs'.
    pub verdict: Verdict,
    pub iops: Option<Spread>,
    pub bytes_per_s: Option<Spread>,
    pub lat_mean_s: Option<Spread>,
    pub lat_p99_s: Option<Spread>,
    /// Relative latency growth over relative throughput growth from the previous level,
    /// ln(L2/L1) / ln(T2/T1) on medians: below 1 the device scales, above 1 it queues.
    pub latency_elasticity: Option<f64>,
}

impl Level {
    /// Figures from the clean runs (all runs when none was clean).
    pub fn new(label: String, value: Option<f64>, reps: Vec<Rep>) -> Level {
        let clean: Vec<&Rep> = reps.iter().filter(|r| r.is_clean()).collect();
        let used: Vec<&Rep> = if clean.is_empty() {
            reps.iter().collect()
        } else {
            clean.clone()
        };
        let col = |f: fn(&Rep) -> Option<f64>| {
            spread(&used.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
        };
        Level {
            iops: col(|r| Some(r.iops)),
            bytes_per_s: col(|r| Some(r.bytes_per_s)),
            lat_mean_s: col(|r| r.lat_mean_s),
            lat_p99_s: col(|r| r.lat_p99_s),
            clean_reps: clean.len(),
            verdict: if clean.is_empty() && !reps.is_empty() {
                Verdict::Disturbed
            } else {
                Verdict::Clean
            },
            label,
            value,
            reps,
            latency_elasticity: None,
        }
    }
}

/// Fill in each level's latency elasticity from the one before it.
pub fn set_elasticity(levels: &mut [Level]) {
    for i in 1..levels.len() {
        let (a, b) = (&levels[i - 1], &levels[i]);
        levels[i].latency_elasticity = match (a.iops, b.iops, a.lat_mean_s, b.lat_mean_s) {
            (Some(ta), Some(tb), Some(la), Some(lb))
                if ta.median > 0.0 && tb.median > 0.0 && la.median > 0.0 && lb.median > 0.0 =>
            {
                let dt = (tb.median / ta.median).ln();
                let dl = (lb.median / la.median).ln();
                if dt.abs() < 1e-9 {
                    None
                } else {
                    Some(dl / dt)
                }
            }
            _ => None,
        };
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// The last level before latency outgrows throughput (read on the levels' medians).
    pub level: String,
    pub next: String,
    pub throughput_change_pct: f64,
    pub latency_change_pct: f64,
    /// The range the repetitions allow: `from` is the first level where, within the levels'
    /// spreads (at least ±[`KNEE_SPREAD_FLOOR`]), latency may outgrow throughput; `to` the level
    /// where it does in every reading (or, where none is certain, the last where it may). Equal
    /// to `level` when the repetitions agree.
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    pub command_line: String,
    pub sweep_over: SweepKind,
    pub job: Job,
    pub repetitions: u32,
    pub levels: Vec<Level>,
    pub knee: Option<Knee>,
    /// Clean when every level had a clean run and throughput never fell as the load rose.
    /// In JSON `disturbance`: the top-level `verdict` of `plumb io sweep` and `plumb io
    /// durability` is the object their output adds (`plumb_analyze::verdict`).
    #[serde(rename = "disturbance")]
    pub verdict: Verdict,
    /// Why it is not clean, and conclusions the spread did not allow.
    pub notes: Vec<Note>,
    pub chart: Option<PathBuf>,
}

/// Latency growth below this is noise, whatever throughput does.
const KNEE_MIN_LATENCY_GROWTH: f64 = 0.05;

/// Past the knee, each step buys latency at more than this many times the relative gain in
/// throughput. At 1 latency merely keeps pace (a virtual disk can sit there over a wide range
/// of queue depths); at 2 and beyond the device is queueing, not working faster.
pub const KNEE_ELASTICITY: f64 = 2.0;

/// The least spread a level's figures are read with when stating the knee's range: the
/// tolerance the sweep settles on ([`STABLE_SPREAD`](../../plumb_lab/sweep/constant.STABLE_SPREAD.html)
/// is 10%), and about the spread of one level's median between identical labs on a quiet host
/// (bench/results/lab-stability-2026-11-23.md). Two or three repetitions inside one lab
/// often agree more closely than labs do: without a floor the range would move from lab to lab.
pub const KNEE_SPREAD_FLOOR: f64 = 0.10;

/// Throughput falling by more than this from one level to the next (beyond the spread) is not
/// a device at its limit: something else took the device.
pub const FALL_PCT: f64 = 10.0;

/// What the levels say, read only as far as their spread allows.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub knee: Option<Knee>,
    pub notes: Vec<Note>,
}

#[cfg(test)] // only the tests call it
/// The knee over levels in order of increasing load: the last level before the first step whose
/// relative latency growth exceeds KNEE_ELASTICITY times its relative throughput growth (or where
/// throughput stops growing while latency rises). A step counts only when its latency ranges
/// do not overlap (the growth is beyond the spread of the repetitions); a step where
/// throughput fell beyond its spread is a disturbance, never a knee.
pub(crate) fn find_knee(levels: &[Level]) -> Option<Knee> {
    read_levels(levels).knee
}

/// Each step from one level to the next that can be read: both levels' IOPS and mean latency
/// known and above zero (the level before, the level after, and their spreads: IOPS before and
/// after, latency before and after).
fn steps(levels: &[Level]) -> impl Iterator<Item = (&Level, &Level, [Spread; 4])> {
    levels.windows(2).filter_map(|w| {
        let (a, b) = (&w[0], &w[1]);
        let (ta, tb, la, lb) = (a.iops?, b.iops?, a.lat_mean_s?, b.lat_mean_s?);
        (ta.median > 0.0 && la.median > 0.0 && tb.median > 0.0).then_some((a, b, [ta, tb, la, lb]))
    })
}

pub(crate) fn read_levels(levels: &[Level]) -> Reading {
    let mut notes = Vec::new();
    let mut knee = None;
    let mut blurred: Option<(String, String, f64)> = None;
    for (a, b, [ta, tb, la, lb]) in steps(levels) {
        let gt = tb.median / ta.median - 1.0;
        let gl = lb.median / la.median - 1.0;
        if gt * 100.0 < -FALL_PCT && tb.max < ta.min {
            notes.push(
                Note::new(NoteLevel::Warn, "throughput-fell")
                    .text("from", a.label.clone())
                    .text("to", b.label.clone())
                    .pct("throughput_change_pct", gt * 100.0),
            );
            continue;
        }
        if knee.is_some() || gl <= KNEE_MIN_LATENCY_GROWTH {
            continue;
        }
        let queueing = gt <= 0.0 || (1.0 + gl).ln() > KNEE_ELASTICITY * (1.0 + gt).ln();
        if !queueing {
            continue;
        }
        if lb.min <= la.max {
            // Latency grew, but not beyond the repetitions' spread.
            let noise = la.relative().max(lb.relative()) * 100.0;
            blurred.get_or_insert((a.label.clone(), b.label.clone(), noise));
            continue;
        }
        knee = Some(Knee {
            level: a.label.clone(),
            next: b.label.clone(),
            throughput_change_pct: gt * 100.0,
            latency_change_pct: gl * 100.0,
            from: a.label.clone(),
            to: a.label.clone(),
        });
    }
    if let Some(k) = knee.as_mut() {
        let (from, to) = knee_range(levels, &k.level);
        k.from = from;
        k.to = to;
    }
    if knee.is_none() {
        if let Some((a, b, noise)) = blurred {
            notes.push(
                Note::new(NoteLevel::Info, "knee-not-distinguishable")
                    .text("from", a.to_string())
                    .text("to", b.to_string())
                    .pct("spread_pct", noise),
            );
        }
    }
    Reading { knee, notes }
}

/// A level's figure widened to at least ±KNEE_SPREAD_FLOOR around its median.
fn widened(s: Spread) -> (f64, f64) {
    (
        s.min.min(s.median * (1.0 - KNEE_SPREAD_FLOOR)),
        s.max.max(s.median * (1.0 + KNEE_SPREAD_FLOOR)),
    )
}

/// Whether the step queues with this throughput and latency growth (ratios, not percent).
fn queues(throughput_ratio: f64, latency_ratio: f64) -> bool {
    latency_ratio - 1.0 > KNEE_MIN_LATENCY_GROWTH
        && (throughput_ratio <= 1.0 || latency_ratio.ln() > KNEE_ELASTICITY * throughput_ratio.ln())
}

/// The first level where a step may queue and the first where it must, within the levels'
/// (widened) spreads, around the knee read on medians. A step whose throughput fell beyond its
/// spread is skipped, as in `read_levels`.
fn knee_range(levels: &[Level], knee: &str) -> (String, String) {
    let mut from: Option<&str> = None;
    let mut to: Option<&str> = None;
    let mut last_possible: Option<&str> = None;
    let mut past_knee = false;
    for (a, _, [ta, tb, la, lb]) in steps(levels) {
        if tb.median / ta.median - 1.0 < -FALL_PCT / 100.0 && tb.max < ta.min {
            continue;
        }
        let ((ta_lo, ta_hi), (tb_lo, tb_hi)) = (widened(ta), widened(tb));
        let ((la_lo, la_hi), (lb_lo, lb_hi)) = (widened(la), widened(lb));
        let possible = queues(tb_lo / ta_hi, lb_hi / la_lo.max(1e-15));
        let certain = queues(tb_hi / ta_lo.max(1e-15), lb_lo / la_hi);
        past_knee |= a.label == knee;
        if possible {
            from.get_or_insert(&a.label);
            last_possible = Some(&a.label);
        }
        if past_knee && (certain || !possible) {
            // The first step that must queue ends the range; one that cannot, ends it before.
            if certain {
                to = Some(&a.label);
            }
            break;
        }
    }
    let from = from.unwrap_or(knee).to_string();
    let to = to.or(last_possible).unwrap_or(knee).to_string();
    (from, to)
}

/// The sweep's verdict and notes: disturbed levels named, then what `read_levels` found.
pub fn judge_levels(levels: &[Level]) -> (Option<Knee>, Verdict, Vec<Note>) {
    let r = read_levels(levels);
    let mut notes = Vec::new();
    let disturbed: Vec<&str> = levels
        .iter()
        .filter(|l| l.verdict == Verdict::Disturbed)
        .map(|l| l.label.as_str())
        .collect();
    if !disturbed.is_empty() {
        notes.push(
            Note::new(NoteLevel::Warn, "levels-disturbed")
                .count("levels", disturbed.len() as f64)
                .list("labels", disturbed.iter().map(|l| l.to_string()).collect()),
        );
    }
    let retried: usize = levels.iter().map(|l| l.reps.len() - l.clean_reps).sum();
    if retried > 0 && disturbed.is_empty() {
        notes.push(Note::new(NoteLevel::Info, "runs-retried").count("runs", retried as f64));
    }
    notes.extend(r.notes);
    let verdict = if notes.iter().any(|n| n.level == NoteLevel::Warn) {
        Verdict::Disturbed
    } else {
        Verdict::Clean
    };
    (r.knee, verdict, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lvl(label: &str, iops: f64, lat_ms: f64) -> Level {
        Level::new(
            label.into(),
            None,
            vec![Rep {
                ios: 1,
                iops,
                bytes_per_s: iops * 4096.0,
                lat_mean_s: Some(lat_ms / 1e3),
                lat_p99_s: Some(lat_ms * 3.0 / 1e3),
                interference: None,
            }],
        )
    }

    #[test]
    fn knee_is_where_latency_outgrows_throughput() {
        // Little's law until the device saturates at 50K IOPS near QD 16.
        let levels = vec![
            lvl("1", 5000.0, 0.2),
            lvl("2", 9800.0, 0.204),
            lvl("4", 19000.0, 0.21),
            lvl("8", 36000.0, 0.22),
            lvl("16", 48000.0, 0.33),
            lvl("32", 50000.0, 0.64),
            lvl("64", 50500.0, 1.27),
        ];
        let k = find_knee(&levels).unwrap();
        assert_eq!(k.level, "16");
        assert_eq!(k.next, "32");
        assert!(k.latency_change_pct > k.throughput_change_pct);
        // A device that scales to the end has no knee.
        let flat: Vec<Level> = (0..5)
            .map(|i| lvl(&i.to_string(), 1000.0 * 2f64.powi(i), 0.1))
            .collect();
        assert!(find_knee(&flat).is_none());
        // A virtual disk whose latency keeps pace with throughput (elasticity ~1.3) until it
        // saturates: the knee is where it saturates, not the first step above 1.
        let virt = vec![
            lvl("1", 12774.0, 0.078),
            lvl("2", 18968.0, 0.105),
            lvl("4", 25673.0, 0.156),
            lvl("8", 34903.0, 0.232),
            lvl("16", 46219.0, 0.346),
            lvl("32", 51083.0, 0.626),
            lvl("64", 56859.0, 1.126),
        ];
        assert_eq!(find_knee(&virt).unwrap().level, "16");
        let mut v = virt.clone();
        set_elasticity(&mut v);
        assert!(v[0].latency_elasticity.is_none());
        let e = v[2].latency_elasticity.unwrap();
        assert!((1.2..1.5).contains(&e), "{e}");
    }

    fn reps(label: &str, runs: &[(f64, f64)]) -> Level {
        let r = runs.iter().map(|&(i, l)| rep(i, l, true)).collect();
        Level::new(label.into(), None, r)
    }

    #[test]
    fn the_knee_is_a_range_where_the_repetitions_allow_more_than_one_reading() {
        // Two labs on one quiet host, two repetitions a level (their figures as measured): the
        // step from QD 4 to 16 sits on the rule's edge, so one lab's medians put the knee at 4
        // and the other's at 16. Both state the same range.
        let a = vec![
            reps("1", &[(14818.0, 0.068), (15100.0, 0.066)]),
            reps("4", &[(33121.0, 0.121), (33500.0, 0.119)]),
            reps("16", &[(52305.0, 0.306), (52000.0, 0.309)]),
            reps("32", &[(60570.0, 0.530), (61000.0, 0.526)]),
        ];
        let b = vec![
            reps("1", &[(13747.0, 0.073), (14100.0, 0.071)]),
            reps("4", &[(30000.0, 0.133), (30500.0, 0.131)]),
            reps("16", &[(52000.0, 0.308), (52400.0, 0.306)]),
            reps("32", &[(57675.0, 0.555), (58200.0, 0.551)]),
        ];
        let (ka, kb) = (find_knee(&a).unwrap(), find_knee(&b).unwrap());
        assert_eq!(ka.level, "4");
        assert_eq!(kb.level, "16");
        for k in [&ka, &kb] {
            assert_eq!((k.from.as_str(), k.to.as_str()), ("4", "16"), "{k:?}");
        }
        // A clear knee (latency doubling for 4% more throughput) is one level.
        let clear = vec![
            reps("1", &[(5000.0, 0.2), (5050.0, 0.2)]),
            reps("4", &[(19000.0, 0.21), (19100.0, 0.21)]),
            reps("16", &[(48000.0, 0.33), (48200.0, 0.33)]),
            reps("32", &[(50000.0, 0.64), (50100.0, 0.64)]),
        ];
        let k = find_knee(&clear).unwrap();
        assert_eq!(
            (k.level.as_str(), k.from.as_str(), k.to.as_str()),
            ("16", "16", "16")
        );
    }

    fn rep(iops: f64, lat_ms: f64, clean: bool) -> Rep {
        let mut r = lvl("x", iops, lat_ms).reps.remove(0);
        if !clean {
            r.interference = Some(crate::interference::Interference {
                accepted: vec![],
                verdict: Verdict::Disturbed,
                window_s: 1.0,
                devices: vec![],
                device_read_bytes: 0,
                device_write_bytes: 0,
                device_flushes: 0,
                own_read_bytes: 0,
                own_write_bytes: 0,
                own_cpu_s: 0.0,
                others_cpu_s: 0.0,
                neighbours: vec![],
                steal_pct: None,
                idle_pct: None,
                io_share: None,
                cpu_share: None,
                notes: vec![],
            });
        }
        r
    }

    #[test]
    fn the_sweep_the_user_saw_is_disturbed_not_a_knee_at_qd_1() {
        // IOPS 8,691 / 3,490 / 477 / 938 / 7,669 / 27,745 / 31,968 for QD 1…64, latency rising
        // where throughput fell: a neighbour, not the device's limit.
        let iops = [8691.0, 3490.0, 477.0, 938.0, 7669.0, 27745.0, 31968.0];
        let levels: Vec<Level> = [1, 2, 4, 8, 16, 32, 64]
            .iter()
            .zip(iops)
            .map(|(q, t)| lvl(&q.to_string(), t, *q as f64 / t * 1000.0))
            .collect();
        let (knee, verdict, notes) = judge_levels(&levels);
        assert_eq!(verdict, Verdict::Disturbed);
        assert!(
            knee.as_ref()
                .is_none_or(|k| k.level != "1" && k.level != "2"),
            "no knee where throughput fell: {knee:?}"
        );
        let fell: Vec<&Note> = notes
            .iter()
            .filter(|n| n.code == "throughput-fell")
            .collect();
        assert_eq!(fell.len(), 2, "{notes:?}");
        assert_eq!(
            (fell[0].facts.text("from"), fell[0].facts.text("to")),
            ("1", "2")
        );
    }

    #[test]
    fn latency_growth_inside_the_spread_is_not_a_knee() {
        // QD 16 → 32: mean latency 0.33 → 0.40 ms, but the repetitions range 0.25–0.45 and
        // 0.30–0.50.
        let mk = |label: &str, v: [(f64, f64); 3]| {
            Level::new(
                label.into(),
                None,
                v.iter().map(|(t, l)| rep(*t, *l, true)).collect(),
            )
        };
        let levels = vec![
            mk("16", [(48000.0, 0.25), (48000.0, 0.33), (48000.0, 0.45)]),
            mk("32", [(48500.0, 0.30), (48500.0, 0.40), (48500.0, 0.50)]),
        ];
        let (knee, verdict, notes) = judge_levels(&levels);
        assert!(knee.is_none());
        assert_eq!(verdict, Verdict::Clean);
        assert_eq!(notes[0].code, "knee-not-distinguishable", "{notes:?}");
    }

    #[test]
    fn disturbed_runs_are_kept_but_left_out_of_the_figures() {
        let l = Level::new(
            "4".into(),
            Some(4.0),
            vec![
                rep(10000.0, 0.4, true),
                rep(300.0, 9.0, false),
                rep(10200.0, 0.39, true),
            ],
        );
        assert_eq!((l.reps.len(), l.clean_reps), (3, 2));
        assert_eq!(l.verdict, Verdict::Clean);
        assert_eq!(l.iops.unwrap().min, 10000.0);
        let all_bad = Level::new("8".into(), None, vec![rep(300.0, 9.0, false)]);
        assert_eq!(all_bad.verdict, Verdict::Disturbed);
        assert_eq!(all_bad.iops.unwrap().median, 300.0);
        let (_, verdict, notes) = judge_levels(&[l, all_bad]);
        assert_eq!(verdict, Verdict::Disturbed);
        assert_eq!(notes[0].code, "levels-disturbed");
        assert_eq!(notes[0].facts.list("labels"), ["8"]);
    }

    #[test]
    fn spread_takes_the_median() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[1.0, 2.0, 4.0, 8.0]).unwrap().median, 3.0);
        assert!(spread(&[]).is_none());
    }
}
