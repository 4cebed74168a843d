//! The first thing every report says: how far the run can be trusted (each watched window's
//! disturbance as a measured share, graded as `plumb compare` grades it, with the neighbours
//! named), the headline figures with their spread, the findings that need action, and what
//! plumb's own experiments changed. Codes and numbers only: `plumb_report` words and lays it out,
//! and JSON carries it as the result's top-level `verdict`.

use crate::interference::{Interference, STEAL_NOTE_PCT};
use crate::lab::{LabReport, Severity};
use serde::Serialize;

/// How far a window (or a whole run) can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Nobody else used the device or the CPUs in a way that could be measured.
    Clean,
    /// Something else ran, below the share that disturbs a figure: said beside it, not a reason
    /// to doubt it (a neighbour's 33 MiB read beside plumb's 8 GiB written).
    Noted,
    /// Nothing watched this window.
    Unwatched,
    /// A neighbour took the disturbing share of the device or the CPUs (or the hypervisor did).
    Disturbed,
}

/// Another process's CPU time, as a share of the window's, below which it is not even noted.
pub const CPU_NOTE_SHARE: f64 = 0.05;

/// A neighbour named in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Named {
    pub pid: u32,
    pub comm: String,
}

/// One watched window (a lab phase, a run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowTrust {
    pub phase: String,
    pub trust: Trust,
    /// Neighbours' bytes as a share of the device's in the window (0 to 1).
    pub io_share: Option<f64>,
    /// Other processes' CPU time as a share of the window's (0 to 1).
    pub cpu_share: Option<f64>,
    pub steal_pct: Option<f64>,
    /// The share of the window in which plumb itself was held off (its cgroup's CPU quota, or
    /// a stall of its own workers), 0 to 1: absent when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_share: Option<f64>,
    /// The busiest neighbours (at most three).
    pub neighbours: Vec<Named>,
    /// Accepted neighbours (`--accept-neighbour`) that worked in the window (at most three).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<Named>,
}

/// The grade of one window from its interference evidence.
pub fn grade(i: Option<&Interference>) -> Trust {
    let Some(i) = i else {
        return Trust::Unwatched;
    };
    if !i.is_clean() {
        Trust::Disturbed
    } else if !i.accepted.is_empty()
        || i.io_share.is_some_and(|s| s > 0.0)
        || i.cpu_share.is_some_and(|s| s >= CPU_NOTE_SHARE)
        || i.steal_pct.is_some_and(|s| s >= STEAL_NOTE_PCT)
    {
        Trust::Noted
    } else {
        Trust::Clean
    }
}

pub(crate) fn window_trust(phase: &str, i: Option<&Interference>) -> WindowTrust {
    WindowTrust {
        phase: phase.to_string(),
        trust: grade(i),
        io_share: i.and_then(|i| i.io_share),
        cpu_share: i.and_then(|i| i.cpu_share),
        steal_pct: i.and_then(|i| i.steal_pct),
        own_share: i.and_then(|i| i.own_share()),
        neighbours: i.map(|i| named(&i.neighbours)).unwrap_or_default(),
        accepted: i.map(|i| named(&i.accepted)).unwrap_or_default(),
    }
}

/// The busiest three, named.
fn named(v: &[crate::interference::Neighbour]) -> Vec<Named> {
    v.iter()
        .take(3)
        .map(|n| Named {
            pid: n.pid,
            comm: n.comm.clone(),
        })
        .collect()
}

/// The unit of a headline figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    PerS,
    S,
    Bytes,
    BytesPerS,
    QueueDepth,
    PerMin,
}

/// A figure a reader came for, with its spread where the run measured one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// What the figure is: `tps`, `latency_p99`, `durable_write_mean` (`durable_write_unclean`:
    /// a mode with no clean run, not compared), `knee` (`no_knee`: none up to the deepest queue
    /// swept, the value; `knee_withheld`: the sweep was disturbed, neither is stated), `server_swap`, `seq_read`, `commit_p50` and
    /// `commit_p99` (MariaDB's single-row commits per durability configuration); `iops`,
    /// `throughput`, `elapsed`, `storage_read`, `nopm` in the other results' verdicts.
    pub code: &'static str,
    /// Of what: the workload, the durability mode and block size, the device.
    pub of: String,
    pub value: f64,
    /// The spread: the 10th and 90th percentile of the seconds, the runs' lowest and highest,
    /// the knee's range.
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub unit: Unit,
}

/// A finding that needs action (warn or critical).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub rule: String,
    pub severity: Severity,
    /// About plumb's own experiment, not the server's configuration.
    pub experiment: bool,
    /// Which of the report's findings it is (its index in `findings`): several findings share
    /// a rule (one per workload, per setting), and each is said in its own words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<usize>,
}

/// What one of plumb's own experiments changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExperimentChange {
    pub name: String,
    /// The lab phase it ran in (it tells two runs of one experiment apart: the throttle at
    /// 20MB/s and at 5MB/s).
    pub phase: String,
    /// What plumb set up (the code of its statement: `experiment-pressure`, …).
    pub setting: String,
    /// The statement that compares it with the plain run (`pgbench-compared`,
    /// `pgbench-not-distinguishable`, …).
    pub outcome: Option<String>,
    pub tps_before: Option<f64>,
    pub tps_after: Option<f64>,
    pub p99_before_s: Option<f64>,
    pub p99_after_s: Option<f64>,
    /// The server's memory in swap at most, during the experiment.
    pub server_swap_bytes: Option<f64>,
}

/// The verdict of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVerdict {
    /// The worst of the windows' grades (clean when none was watched and none disturbed).
    pub trust: Trust,
    pub disturbed_windows: usize,
    pub noted_windows: usize,
    pub windows: Vec<WindowTrust>,
    pub headline: Vec<Headline>,
    pub actions: Vec<Action>,
    pub experiments: Vec<ExperimentChange>,
}

impl RunVerdict {
    pub fn of_windows(windows: Vec<WindowTrust>) -> RunVerdict {
        let count = |t: Trust| windows.iter().filter(|w| w.trust == t).count();
        RunVerdict {
            trust: windows
                .iter()
                .map(|w| w.trust)
                .filter(|t| *t != Trust::Unwatched)
                .max()
                .unwrap_or(Trust::Unwatched),
            disturbed_windows: count(Trust::Disturbed),
            noted_windows: count(Trust::Noted),
            windows,
            headline: Vec::new(),
            actions: Vec::new(),
            experiments: Vec::new(),
        }
    }
}

/// The lab's verdict.
pub fn lab(r: &LabReport) -> RunVerdict {
    let mut v = RunVerdict::of_windows(
        r.windows
            .iter()
            .map(|w| window_trust(&w.phase, w.interference.as_ref()))
            .collect(),
    );
    let h = &mut v.headline;
    h.extend(workload_headlines(r));
    if let Some(d) = &r.durability {
        h.extend(durable_writes(d));
    }
    h.extend(maria_commit_headlines(r));
    let disks = r
        .durability
        .as_ref()
        .and_then(|d| d.storage.as_ref())
        .map(|s| s.disks.join(", "))
        .unwrap_or_default();
    if let Some(s) = &r.sweep {
        h.extend(knee(s, disks));
    }
    if let Some(s) = &r.seq_read {
        h.push(Headline {
            code: "seq_read",
            of: format!("{}K", s.block_size / 1024),
            value: s.bytes_per_s,
            low: None,
            high: None,
            unit: Unit::BytesPerS,
        });
    }
    // The server's memory in swap outside plumb's experiments (inside them, it is theirs).
    let in_experiment = |phase: &str| r.experiments.iter().any(|e| e.phase == phase);
    let swap = r
        .windows
        .iter()
        .filter(|w| !in_experiment(&w.phase))
        .filter_map(|w| w.engine_swap_bytes_max)
        .fold(None, |a: Option<f64>, s| Some(a.map_or(s, |a| a.max(s))));
    if let Some(s) = swap {
        h.push(Headline {
            code: "server_swap",
            of: r.target.clone(),
            value: s,
            low: None,
            high: None,
            unit: Unit::Bytes,
        });
    }
    v.actions = r
        .findings
        .iter()
        .enumerate()
        .filter(|(_, f)| f.severity >= Severity::Warn)
        .map(|(i, f)| Action {
            rule: f.rule.clone(),
            severity: f.severity,
            experiment: f.experiment.is_some(),
            finding: Some(i),
        })
        .collect();
    v.experiments = r
        .experiments
        .iter()
        .map(|e| ExperimentChange {
            name: e.name.clone(),
            phase: e.phase.clone(),
            setting: e.setting.code.to_string(),
            outcome: e
                .notes
                .iter()
                .find(|n| n.code.starts_with("pgbench-") || n.code.starts_with("standby-"))
                .map(|n| n.code.to_string()),
            tps_before: e.baseline.as_ref().map(|p| p.tps),
            tps_after: e.changed.as_ref().map(|p| p.tps),
            p99_before_s: e
                .baseline
                .as_ref()
                .and_then(|p| p.latency.as_ref()?.p99_ms)
                .map(|m| m / 1000.0),
            p99_after_s: e
                .changed
                .as_ref()
                .and_then(|p| p.latency.as_ref()?.p99_ms)
                .map(|m| m / 1000.0),
            server_swap_bytes: e.window.as_ref().and_then(|w| w.engine_swap_bytes_max),
        })
        .collect();
    v
}

/// The workloads' headline figures: pgbench's tps and p99, and for each workload plumb's own
/// driver ran, its tps and its slowest type's p99.
fn workload_headlines(r: &LabReport) -> Vec<Headline> {
    let mut h = Vec::new();
    if let Some(p) = &r.pgbench {
        let of = p
            .script
            .clone()
            .unwrap_or_else(|| "pgbench TPC-B-like".to_string());
        h.push(Headline {
            code: "tps",
            of: of.clone(),
            value: p.tps,
            low: p.tps_p10,
            high: p.tps_p90,
            unit: Unit::PerS,
        });
        if let Some(p99) = p.latency.as_ref().and_then(|l| l.p99_ms) {
            h.push(Headline {
                code: "latency_p99",
                of,
                value: p99 / 1000.0,
                low: None,
                high: None,
                unit: Unit::S,
            });
        }
    }
    // The workloads plumb's own driver ran; the insert loops (MariaDB's) are compared in their
    // own section, per durability setting, and a loop's rate is not a figure to read alone.
    for w in r
        .workloads
        .iter()
        .filter(|w| !w.workload.starts_with("insert-"))
    {
        if let Some(tps) = w.tps() {
            h.push(Headline {
                code: "tps",
                of: w.workload.clone(),
                value: tps,
                low: None,
                high: None,
                unit: Unit::PerS,
            });
        }
        // The slowest type's p99: what the workload's worst transaction waits.
        if let Some(p99) = w
            .types
            .iter()
            .filter_map(|t| t.latency.p99_s)
            .max_by(f64::total_cmp)
        {
            h.push(Headline {
                code: "latency_p99",
                of: w.workload.clone(),
                value: p99,
                low: None,
                high: None,
                unit: Unit::S,
            });
        }
    }
    h
}

/// MariaDB's durability paths: what a single-row commit waits for in each configuration (those
/// that are not durable on this device said so in their name).
fn maria_commit_headlines(r: &LabReport) -> Vec<Headline> {
    let mut h = Vec::new();
    if let Some(m) = &r.mariadb_durability {
        for c in &m.configs {
            let Some(single) = &c.single else { continue };
            let durable = crate::lab::maria_durable(c, m.device_write_back);
            // Like for like: one measured beside other work says so, as the section does.
            let phase = format!("durability {}", c.name);
            let disturbed = r.windows.iter().any(|w| w.phase == phase && w.disturbed());
            let of = format!(
                "{}{}{}",
                c.name,
                if durable { "" } else { " (not durable)" },
                if disturbed { " (disturbed)" } else { "" }
            );
            h.push(Headline {
                code: "commit_p50",
                of: of.clone(),
                value: single.p50_ms / 1000.0,
                low: None,
                high: None,
                unit: Unit::S,
            });
            if let Some(p99) = single.p99_ms {
                h.push(Headline {
                    code: "commit_p99",
                    of,
                    value: p99 / 1000.0,
                    low: None,
                    high: None,
                    unit: Unit::S,
                });
            }
        }
    }
    h
}

/// What one durable write costs per durable mode, at 8K (or the probe's first block size):
/// the mean with the lowest and highest run's.
pub fn durable_writes(d: &crate::durability_probe::DurabilityReport) -> Vec<Headline> {
    let bs = d
        .rows
        .iter()
        .map(|x| x.block_size)
        .find(|b| *b == 8192)
        .or_else(|| d.rows.first().map(|x| x.block_size));
    // Like for like: a mode with no clean run is not set beside one that has one (its figure
    // is the neighbour's as much as the device's); the durability section says the same.
    d.rows
        .iter()
        .filter(|x| Some(x.block_size) == bs && x.durable)
        .filter_map(|row| {
            Some(Headline {
                code: if row.verdict == crate::interference::Verdict::Clean {
                    "durable_write_mean"
                } else {
                    "durable_write_unclean"
                },
                of: format!("{} {}K", row.mode, row.block_size / 1024),
                value: row.mean_s?,
                low: row.mean_spread.map(|s| s.min),
                high: row.mean_spread.map(|s| s.max),
                unit: Unit::S,
            })
        })
        .collect()
}

/// The knee of a queue-depth sweep as a range, or none up to the deepest level swept; neither
/// from a disturbed sweep (`knee_withheld`, the deepest level), as its section says.
pub fn knee(s: &crate::sweep::SweepReport, disks: String) -> Vec<Headline> {
    let n = |x: &str| x.parse::<f64>().ok();
    let deepest = || s.levels.iter().filter_map(|l| n(&l.label)).reduce(f64::max);
    if s.verdict == crate::interference::Verdict::Disturbed {
        return vec![Headline {
            code: "knee_withheld",
            of: disks,
            value: deepest().unwrap_or(0.0),
            low: None,
            high: None,
            unit: Unit::QueueDepth,
        }];
    }
    match &s.knee {
        Some(k) => match (n(&k.level), n(&k.from), n(&k.to)) {
            (Some(at), Some(from), Some(to)) => vec![Headline {
                code: "knee",
                of: disks,
                value: at,
                low: Some(from),
                high: Some(to),
                unit: Unit::QueueDepth,
            }],
            _ => vec![],
        },
        // No knee: latency grew no faster than throughput up to the deepest level swept.
        None => s
            .levels
            .iter()
            .filter_map(|l| n(&l.label))
            .reduce(f64::max)
            .map(|deepest| Headline {
                code: "no_knee",
                of: disks,
                value: deepest,
                low: None,
                high: None,
                unit: Unit::QueueDepth,
            })
            .into_iter()
            .collect(),
    }
}

/// The warn-level notes of a result as what needs action.
fn warn_notes(notes: &[crate::Note]) -> Vec<Action> {
    notes
        .iter()
        .filter(|n| n.level == crate::Level::Warn)
        .map(|n| Action {
            rule: n.code.to_string(),
            severity: Severity::Warn,
            experiment: false,
            finding: None,
        })
        .collect()
}

/// `plumb io sweep`'s verdict: each run graded, the knee (queue depths), the best level's
/// IOPS with its runs' range, the warn-level notes.
pub fn sweep(s: &crate::sweep::SweepReport) -> RunVerdict {
    let mut v = RunVerdict::of_windows(
        s.levels
            .iter()
            .flat_map(|l| {
                l.reps.iter().enumerate().map(move |(i, r)| {
                    window_trust(
                        &format!("level {} run {}", l.label, i + 1),
                        r.interference.as_ref(),
                    )
                })
            })
            .collect(),
    );
    if s.levels.iter().all(|l| l.label.parse::<f64>().is_ok()) {
        v.headline.extend(knee(s, String::new()));
    }
    if let Some((l, sp)) = s
        .levels
        .iter()
        .filter_map(|l| Some((l, l.iops.as_ref()?)))
        .max_by(|a, b| a.1.median.total_cmp(&b.1.median))
    {
        v.headline.push(Headline {
            code: "iops",
            of: l.label.clone(),
            value: sp.median,
            low: Some(sp.min),
            high: Some(sp.max),
            unit: Unit::PerS,
        });
    }
    v.actions = warn_notes(&s.notes);
    v
}

/// `plumb io durability`'s verdict: each run graded, what one durable write costs per mode,
/// the warn-level conclusions.
pub fn durability(d: &crate::durability_probe::DurabilityReport) -> RunVerdict {
    // A disturbed run beside a clean one of its mode was not used (the figures are the clean
    // runs'): listed, named so, and not graded.
    let (mut used, mut unused) = (Vec::new(), Vec::new());
    for row in &d.rows {
        let any_clean = row.reps.iter().any(|r| r.is_clean());
        for (i, r) in row.reps.iter().enumerate() {
            let phase = format!("{} {}K run {}", row.mode, row.block_size / 1024, i + 1);
            if any_clean && !r.is_clean() {
                let phase = format!("{phase} (disturbed, not used: a clean run stands for it)");
                unused.push(window_trust(&phase, r.interference.as_ref()));
            } else {
                used.push(window_trust(&phase, r.interference.as_ref()));
            }
        }
    }
    let mut v = RunVerdict::of_windows(used);
    v.windows.extend(unused);
    v.headline = durable_writes(d);
    v.actions = warn_notes(&d.conclusions);
    v
}

/// `plumb io durability DIR DIR…`'s verdict: every probe's runs graded, what one durable write
/// costs per mode in each directory, the warn-level statements of the comparison and probes.
pub fn durability_comparison(c: &crate::durability_probe::Comparison) -> RunVerdict {
    let mut windows = Vec::new();
    let mut headline = Vec::new();
    let mut actions = warn_notes(&c.comparison);
    for p in &c.probes {
        let path = p.path.display().to_string();
        let one = durability(p);
        windows.extend(one.windows.into_iter().map(|mut w| {
            w.phase = format!("{path}: {}", w.phase);
            w
        }));
        headline.extend(one.headline.into_iter().map(|mut h| {
            h.of = format!("{path} {}", h.of);
            h
        }));
        actions.extend(one.actions);
    }
    let mut v = RunVerdict::of_windows(windows);
    v.headline = headline;
    v.actions = actions;
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interference::{Neighbour, Verdict};

    fn watched(verdict: Verdict, io_share: Option<f64>, cpu_share: Option<f64>) -> Interference {
        Interference {
            accepted: vec![],
            verdict,
            window_s: 10.0,
            devices: vec!["vda".into()],
            device_read_bytes: 0,
            device_write_bytes: 0,
            device_flushes: 0,
            own_read_bytes: 0,
            own_write_bytes: 0,
            own_cpu_s: 0.0,
            others_cpu_s: 0.0,
            neighbours: vec![Neighbour {
                pid: 4321,
                comm: "fio".into(),
                read_bytes: 33 << 20,
                write_bytes: 0,
                cpu_s: 0.1,
            }],
            steal_pct: Some(0.5),
            idle_pct: Some(60.0),
            io_share,
            cpu_share,
            notes: vec![],
        }
    }

    #[test]
    fn windows_are_graded_by_their_measured_shares() {
        assert_eq!(grade(None), Trust::Unwatched);
        // Nothing else moved: clean.
        assert_eq!(
            grade(Some(&watched(Verdict::Clean, Some(0.0), Some(0.01)))),
            Trust::Clean
        );
        // A neighbour's 33 MiB beside plumb's gigabytes: noted, not disturbed.
        let noted = watched(Verdict::Clean, Some(0.004), Some(0.01));
        assert_eq!(grade(Some(&noted)), Trust::Noted);
        // Others took 8% of the CPU time: noted too.
        assert_eq!(
            grade(Some(&watched(Verdict::Clean, None, Some(0.08)))),
            Trust::Noted
        );
        let disturbed = watched(Verdict::Disturbed, Some(0.6), Some(0.01));
        assert_eq!(grade(Some(&disturbed)), Trust::Disturbed);
        // The run is as trustworthy as its worst watched window; unwatched ones do not count.
        let v = RunVerdict::of_windows(vec![
            window_trust("a", Some(&noted)),
            window_trust("b", None),
        ]);
        assert_eq!(
            (v.trust, v.noted_windows, v.disturbed_windows),
            (Trust::Noted, 1, 0)
        );
        assert_eq!(v.windows[0].neighbours[0].comm, "fio");
        let v = RunVerdict::of_windows(vec![
            window_trust("a", Some(&noted)),
            window_trust("b", Some(&disturbed)),
        ]);
        assert_eq!((v.trust, v.disturbed_windows), (Trust::Disturbed, 1));
        assert_eq!(RunVerdict::of_windows(vec![]).trust, Trust::Unwatched);
    }
}
