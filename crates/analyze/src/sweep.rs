//! `plumb io sweep`: the same job at several queue depths or rate limits, repeated, summarised
//! as median/min/max per level, and the knee — the level after which latency grows faster than
//! throughput.

use crate::io::quantile_s;
use plumb_load::job::Job;
use plumb_load::run::{DirStats, RunResult};
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
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
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
    pub reps: Vec<Rep>,
    pub iops: Option<Spread>,
    pub bytes_per_s: Option<Spread>,
    pub lat_mean_s: Option<Spread>,
    pub lat_p99_s: Option<Spread>,
    /// Relative latency growth over relative throughput growth from the previous level,
    /// ln(L2/L1) / ln(T2/T1) on medians: below 1 the device scales, above 1 it queues.
    pub latency_elasticity: Option<f64>,
}

impl Level {
    pub fn new(label: String, value: Option<f64>, reps: Vec<Rep>) -> Level {
        let col =
            |f: fn(&Rep) -> Option<f64>| spread(&reps.iter().filter_map(f).collect::<Vec<_>>());
        Level {
            iops: col(|r| Some(r.iops)),
            bytes_per_s: col(|r| Some(r.bytes_per_s)),
            lat_mean_s: col(|r| r.lat_mean_s),
            lat_p99_s: col(|r| r.lat_p99_s),
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
    /// The last level before latency outgrows throughput.
    pub level: String,
    pub next: String,
    pub throughput_change_pct: f64,
    pub latency_change_pct: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepReport {
    pub command_line: String,
    pub sweep_over: SweepKind,
    pub job: Job,
    pub repetitions: u32,
    pub levels: Vec<Level>,
    pub knee: Option<Knee>,
    pub chart: Option<PathBuf>,
}

/// Latency growth below this is noise, whatever throughput does.
const KNEE_MIN_LATENCY_GROWTH: f64 = 0.05;

/// Past the knee, each step buys latency at more than this many times the relative gain in
/// throughput. At 1 latency merely keeps pace (a virtual disk can sit there over a wide range
/// of queue depths); at 2 and beyond the device is queueing, not working faster.
pub const KNEE_ELASTICITY: f64 = 2.0;

/// The knee over levels in order of increasing load: the last level before the first step whose
/// relative latency growth exceeds KNEE_ELASTICITY times its relative throughput growth (or where
/// throughput stops growing while latency rises).
pub fn find_knee(levels: &[Level]) -> Option<Knee> {
    for w in levels.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (Some(ta), Some(tb), Some(la), Some(lb)) = (a.iops, b.iops, a.lat_mean_s, b.lat_mean_s)
        else {
            continue;
        };
        if ta.median <= 0.0 || la.median <= 0.0 || tb.median <= 0.0 {
            continue;
        }
        let gt = tb.median / ta.median - 1.0;
        let gl = lb.median / la.median - 1.0;
        if gl <= KNEE_MIN_LATENCY_GROWTH {
            continue;
        }
        let queueing = gt <= 0.0 || (1.0 + gl).ln() > KNEE_ELASTICITY * (1.0 + gt).ln();
        if queueing {
            return Some(Knee {
                level: a.label.clone(),
                next: b.label.clone(),
                throughput_change_pct: gt * 100.0,
                latency_change_pct: gl * 100.0,
            });
        }
    }
    None
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

    #[test]
    fn spread_takes_the_median() {
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[1.0, 2.0, 4.0, 8.0]).unwrap().median, 3.0);
        assert!(spread(&[]).is_none());
    }
}
