//! Before/after deltas around a workload (`plumb delta`): two snapshots of the OS and of the
//! engine become one run's figures; repeated runs become a median and a spread per figure; cold
//! and warm runs sit side by side.
//!
//! Counters that went backwards, views reset in between and a server that restarted are found
//! and said, and never shown as negative deltas: the figure then counts only since the reset,
//! which is a lower bound.

use crate::{Level, Note, WithFacts};
use plumb_engine::{ServerInfo, Snapshot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// (group, object, metric). The object is empty for server-wide figures.
pub type Key = (String, String, String);

/// What one run measured, before the medians.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunDelta {
    pub elapsed_s: f64,
    #[serde(serialize_with = "ser_values")]
    pub values: BTreeMap<Key, f64>,
    pub notes: Vec<String>,
    /// Whether other work used the host's disks or CPUs during the run, with the evidence
    /// (None: not watched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<crate::interference::Interference>,
    /// What the server's processes asked of the kernel during the run (`--trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<crate::trace::TraceReport>,
}

fn ser_values<S: serde::Serializer>(v: &BTreeMap<Key, f64>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(v.len()))?;
    for ((g, o, n), x) in v {
        let k = if o.is_empty() {
            format!("{g}.{n}")
        } else {
            format!("{g}[{o}].{n}")
        };
        m.serialize_entry(&k, x)?;
    }
    m.end()
}

/// What a second session sampled during a run: wait events of the workload's session
/// (PostgreSQL), count per `type:event`, and curves of the moment (SQL Server).
#[derive(Debug, Clone, Default)]
pub struct WaitSamples {
    pub interval_ms: f64,
    pub taken: u64,
    pub seen: BTreeMap<String, u64>,
    /// Values of the moment sampled during the run (SQL Server's run queue and memory
    /// grants), each sample in order, by name with a unit suffix.
    pub curves: BTreeMap<String, Vec<f64>>,
}

/// Subtract one snapshot from another, set by set, guarding against resets.
pub fn subtract(before: &Snapshot, after: &Snapshot, out: &mut RunDelta) {
    // Start times given as Unix seconds (MariaDB's, from Uptime) may move by a second.
    let restarted = !before.server_start.is_empty()
        && !after.server_start.is_empty()
        && match (
            before.server_start.parse::<f64>(),
            after.server_start.parse::<f64>(),
        ) {
            (Ok(b), Ok(a)) => (a - b).abs() > 2.0,
            _ => before.server_start != after.server_start,
        };
    if restarted {
        out.notes.push(format!(
            "{} restarted during the run (started {} before, {} after): its figures count only since the restart",
            engine_name(&after.engine),
            before.server_start,
            after.server_start
        ));
    }
    let mut reset_sets = BTreeSet::new();
    for (set, r) in &after.resets {
        if let Some(b) = before.resets.get(set) {
            if b != r && !restarted {
                out.notes.push(format!(
                    "{set} statistics were reset during the run (at {r}): its figures count only since then"
                ));
                reset_sets.insert(set.clone());
            }
        }
    }
    let mut backwards = Vec::new();
    let mut diff = |set: &str, name: &str, b: Option<f64>, a: f64| -> f64 {
        if restarted || reset_sets.contains(set) {
            return a.max(0.0);
        }
        match b {
            None => a.max(0.0),
            Some(b) if a >= b => a - b,
            Some(_) => {
                backwards.push(name.to_string());
                a.max(0.0)
            }
        }
    };
    for (k, a) in &after.counters {
        let (set, metric) = k.split_once('.').unwrap_or(("", k));
        let d = diff(set, k, before.counters.get(k).copied(), *a);
        out.values
            .insert((set.to_string(), String::new(), metric.to_string()), d);
    }
    for (set, objs) in &after.objects {
        for (obj, row) in objs {
            let brow = before.objects.get(set).and_then(|o| o.get(obj));
            for (metric, a) in row {
                let d = diff(
                    set,
                    &format!("{set}[{obj}].{metric}"),
                    brow.and_then(|r| r.get(metric)).copied(),
                    *a,
                );
                out.values
                    .insert((set.clone(), obj.clone(), metric.clone()), d);
            }
        }
    }
    for (k, a) in &after.gauges {
        let (set, metric) = k.split_once('.').unwrap_or(("", k));
        if let Some(b) = before.gauges.get(k) {
            out.values.insert(
                (set.to_string(), String::new(), format!("{metric} before")),
                *b,
            );
        }
        out.values.insert(
            (set.to_string(), String::new(), format!("{metric} after")),
            *a,
        );
    }
    if !backwards.is_empty() {
        let shown: Vec<&str> = backwards.iter().take(5).map(String::as_str).collect();
        out.notes.push(format!(
            "{} counter(s) went backwards without a reset on record ({}{}): shown as counted since zero, a lower bound",
            backwards.len(),
            shown.join(", "),
            if backwards.len() > 5 { ", ..." } else { "" }
        ));
    }
}

fn engine_name(e: &str) -> &str {
    match e {
        "postgresql" => "PostgreSQL",
        "mariadb" => "MariaDB",
        "sqlserver" => "SQL Server",
        "os" => "the host",
        other => other,
    }
}

/// Take plumb's own footprint out of a run: `own` is the delta between two snapshots taken back
/// to back with nothing else running (the observer's queries count in global counters:
/// MariaDB's Questions and Created_tmp_tables, PostgreSQL's xact_commit). Never below zero.
pub fn discount(run: &mut RunDelta, own: &RunDelta) {
    for (k, o) in &own.values {
        if *o > 0.0 && !k.2.ends_with(" before") && !k.2.ends_with(" after") {
            if let Some(v) = run.values.get_mut(k) {
                *v = (*v - o).max(0.0);
            }
        }
    }
}

/// Figures computed from others in the same run: hit ratio, latency per read and write,
/// estimated wait time from samples.
pub fn derive(run: &mut RunDelta, waits: Option<&WaitSamples>) {
    let v = &mut run.values;
    let get = |v: &BTreeMap<Key, f64>, g: &str, o: &str, m: &str| {
        v.get(&(g.to_string(), o.to_string(), m.to_string()))
            .copied()
    };
    if let (Some(hit), Some(read)) = (get(v, "db", "", "blks_hit"), get(v, "db", "", "blks_read")) {
        if hit + read > 0.0 {
            v.insert(
                ("db".into(), String::new(), "hit_pct".into()),
                100.0 * hit / (hit + read),
            );
        }
    }
    // Per-object latency wherever an object has counts and stall times.
    let objs: BTreeSet<(String, String)> = v
        .keys()
        .filter(|k| !k.1.is_empty())
        .map(|k| (k.0.clone(), k.1.clone()))
        .collect();
    for (g, o) in objs {
        for (n, t, out) in [
            ("reads", "read_stall_ms", "avg_read_ms"),
            ("writes", "write_stall_ms", "avg_write_ms"),
            ("reads", "read_time_ms", "avg_read_ms"),
            ("writes", "write_time_ms", "avg_write_ms"),
            ("count", "wait_ms", "avg_wait_ms"),
            // SQL Server PERF_AVERAGE_BULK counters: Δvalue / Δbase.
            ("count", "total", "average"),
        ] {
            if let (Some(n), Some(t)) = (get(v, &g, &o, n), get(v, &g, &o, t)) {
                if n > 0.0 {
                    v.insert((g.clone(), o.clone(), out.into()), t / n);
                }
            }
        }
    }
    // The workload session's waits beside the same waits server-wide.
    let session_waits: Vec<(String, f64)> = v
        .keys()
        .filter(|k| k.0 == "session_wait" && k.2 == "wait_ms")
        .filter_map(|k| {
            ["wait", "wait_ignorable"]
                .iter()
                .find_map(|g| get(v, g, &k.1, "wait_ms"))
                .map(|all| (k.1.clone(), all))
        })
        .collect();
    for (o, all) in session_waits {
        v.insert(
            ("session_wait".into(), o, "server_wide_wait_ms".into()),
            all,
        );
    }
    if let Some(w) = waits {
        // Curves sampled during the run: their mean and their peak.
        for (name, xs) in &w.curves {
            if xs.is_empty() {
                continue;
            }
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let peak = xs.iter().copied().fold(f64::MIN, f64::max);
            v.insert(
                ("sampled".into(), String::new(), format!("{name} mean")),
                mean,
            );
            v.insert(
                ("sampled".into(), String::new(), format!("{name} peak")),
                peak,
            );
        }
        for (ev, n) in &w.seen {
            v.insert(("waits".into(), ev.clone(), "samples".into()), *n as f64);
            v.insert(
                ("waits".into(), ev.clone(), "est_ms".into()),
                *n as f64 * w.interval_ms,
            );
            if w.taken > 0 {
                v.insert(
                    ("waits".into(), ev.clone(), "share_pct".into()),
                    100.0 * *n as f64 / w.taken as f64,
                );
            }
        }
    }
    // Per-second rates of cumulative performance counters (SQL Server's /sec counters).
    if run.elapsed_s > 0.0 {
        let rates: Vec<(Key, f64)> = v
            .iter()
            .filter(|(k, _)| {
                k.0 == "perf"
                    && k.1.is_empty()
                    && !k.2.ends_with(" before")
                    && !k.2.ends_with(" after")
            })
            .map(|(k, x)| {
                (
                    (k.0.clone(), String::new(), format!("{}_per_s", k.2)),
                    x / run.elapsed_s,
                )
            })
            .collect();
        v.extend(rates);
    }
    v.insert(
        ("run".into(), String::new(), "elapsed_s".into()),
        run.elapsed_s,
    );
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub values: Vec<f64>,
}

impl Stat {
    pub fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() {
            return None;
        }
        let mut s = values.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: s[0],
            max: s[n - 1],
            values: values.to_vec(),
        })
    }

    /// Spread as a share of the median (max − min over median).
    pub fn spread_pct(&self) -> Option<f64> {
        (self.median.abs() > 0.0 && self.values.len() > 1)
            .then(|| 100.0 * (self.max - self.min) / self.median.abs())
    }
}

/// One mode's runs: cold, warm, or as found.
#[derive(Debug, Clone, Serialize)]
pub struct ModeRuns {
    pub mode: String,
    /// What was done before each run to get this mode (restart, drop_caches, a warm-up run):
    /// statements (`prep-*`), worded by report.
    #[serde(serialize_with = "crate::said::words_list")]
    pub preparation: Vec<crate::said::Said>,
    pub runs: Vec<RunDelta>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub group: String,
    pub object: String,
    pub metric: String,
    pub unit: String,
    /// One per mode, in the order of `modes`.
    pub stats: Vec<Option<Stat>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DeltaReport {
    pub target: String,
    pub engine: Option<ServerInfo>,
    pub workload: String,
    pub repeat: usize,
    pub modes: Vec<ModeRuns>,
    pub rows: Vec<Row>,
    /// Rows left out: zero in every mode, or waits/latches under the threshold.
    pub hidden_rows: usize,
    pub threshold_ms: f64,
    pub unavailable: Vec<String>,
    pub notes: Vec<Note>,
}

/// The unit a metric name implies.
pub(crate) fn unit_of(metric: &str) -> &'static str {
    let m = metric
        .trim_end_matches(" before")
        .trim_end_matches(" after")
        .trim_end_matches(" mean")
        .trim_end_matches(" peak");
    if m.ends_with("_bytes") || m == "bytes" {
        "bytes"
    } else if m.ends_with("_ms") {
        "ms"
    } else if m.ends_with("_s") {
        "s"
    } else if m.ends_with("_pct") {
        "%"
    } else {
        "count"
    }
}

/// Groups whose rows are waits (weighed by wait time against the threshold).
const WAIT_GROUPS: &[(&str, &str)] = &[
    ("waits", "est_ms"),
    ("wait", "wait_ms"),
    ("session_wait", "wait_ms"),
    ("latch", "wait_ms"),
    ("spinlock", "sleep_time_ms"),
];

/// Medians and spreads per figure over every mode's runs; rows that are zero everywhere, and
/// wait-like objects whose wait time stays under `threshold_ms` in every mode, are hidden
/// unless `all`.
pub fn summarize(
    target: String,
    engine: Option<ServerInfo>,
    workload: String,
    repeat: usize,
    modes: Vec<ModeRuns>,
    unavailable: Vec<String>,
    threshold_ms: f64,
    all: bool,
) -> DeltaReport {
    let mut keys: BTreeSet<Key> = BTreeSet::new();
    for m in &modes {
        for r in &m.runs {
            keys.extend(r.values.keys().cloned());
        }
    }
    let below = below_threshold(&keys, &modes, threshold_ms);
    let unchanged = unchanged_gauges(&keys, &modes);
    let mut rows = Vec::new();
    let mut hidden = 0;
    for k in keys {
        if unchanged.contains(&k) {
            continue;
        }
        let before_key =
            k.2.strip_suffix(" after")
                .map(|m| (k.0.clone(), k.1.clone(), format!("{m} before")));
        let shown_metric = match &before_key {
            Some(b) if unchanged.contains(b) => k.2.trim_end_matches(" after").to_string(),
            _ => k.2.clone(),
        };
        let stats: Vec<Option<Stat>> = modes
            .iter()
            .map(|m| {
                Stat::of(
                    &m.runs
                        .iter()
                        .map(|r| r.values.get(&k).copied().unwrap_or(0.0))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let zero = stats.iter().flatten().all(|s| s.max == 0.0 && s.min == 0.0);
        let is_gauge = k.2.ends_with(" before") || k.2.ends_with(" after");
        let ignorable = k.0.ends_with("_ignorable");
        if !all
            && ((zero && !is_gauge && k.0 != "run")
                || ignorable
                || below.contains(&(k.0.clone(), k.1.clone())))
        {
            hidden += 1;
            continue;
        }
        rows.push(Row {
            unit: unit_of(&k.2).to_string(),
            group: k.0,
            object: k.1,
            metric: shown_metric,
            stats,
        });
    }
    // PostgreSQL's block size, for turning block counts into bytes.
    let block = engine
        .as_ref()
        .and_then(|e| e.settings.get("block_size"))
        .and_then(|b| b.parse::<f64>().ok())
        .unwrap_or(8192.0);
    let (mut notes, disturbed) = run_notes(&modes);
    let mut read = findings(&modes, &rows, block);
    if disturbed > 0 {
        for n in &mut read {
            if n.level == Level::Warn {
                n.level = Level::Info;
                n.facts.set(
                    "lowered_by_disturbed_runs",
                    crate::said::Fact::Number(crate::said::Quantity::Count(disturbed as f64)),
                );
            }
        }
    }
    notes.extend(read);
    DeltaReport {
        target,
        engine,
        workload,
        repeat,
        modes,
        rows,
        hidden_rows: hidden,
        threshold_ms,
        unavailable,
        notes,
    }
}

/// Wait-like objects (group, object) under the threshold in every mode.
fn below_threshold(
    keys: &BTreeSet<Key>,
    modes: &[ModeRuns],
    threshold_ms: f64,
) -> BTreeSet<(String, String)> {
    let mut below: BTreeSet<(String, String)> = BTreeSet::new();
    for (g, weight) in WAIT_GROUPS {
        let objs: BTreeSet<String> = keys
            .iter()
            .filter(|k| k.0 == *g && !k.1.is_empty())
            .map(|k| k.1.clone())
            .collect();
        for o in objs {
            let key = (g.to_string(), o.clone(), weight.to_string());
            let max_median = modes
                .iter()
                .filter_map(|m| {
                    Stat::of(
                        &m.runs
                            .iter()
                            .map(|r| r.values.get(&key).copied().unwrap_or(0.0))
                            .collect::<Vec<_>>(),
                    )
                })
                .map(|s| s.median)
                .fold(0.0, f64::max);
            if max_median < threshold_ms {
                below.insert((g.to_string(), o));
            }
        }
    }
    below
}

/// Gauges that did not move in any run: one row with the value, not a before and an after.
fn unchanged_gauges(keys: &BTreeSet<Key>, modes: &[ModeRuns]) -> BTreeSet<Key> {
    keys.iter()
        .filter_map(|k| k.2.strip_suffix(" before").map(|m| (k, m)))
        .filter(|(k, m)| {
            let after = (k.0.clone(), k.1.clone(), format!("{m} after"));
            modes.iter().all(|md| {
                md.runs
                    .iter()
                    .all(|r| r.values.get(k) == r.values.get(&after))
            })
        })
        .map(|(k, _)| k.clone())
        .collect()
}

/// The runs' own notes (each once), and the runs other work disturbed, named with the
/// evidence; how many were disturbed.
fn run_notes(modes: &[ModeRuns]) -> (Vec<Note>, usize) {
    let mut notes = Vec::new();
    let mut seen = BTreeSet::new();
    for m in modes {
        for r in &m.runs {
            for n in &r.notes {
                if seen.insert(n.clone()) {
                    notes.push(Note::new(Level::Warn, "delta-run-note").text("note", n.clone()));
                }
            }
        }
    }
    // Runs that other work disturbed: named with the evidence, and what is read from the
    // figures is lowered to info (the medians include those runs).
    let mut disturbed = 0;
    for m in modes {
        for (i, r) in m.runs.iter().enumerate() {
            if let Some(w) = r.interference.as_ref().filter(|w| !w.is_clean()) {
                disturbed += 1;
                notes.push(
                    Note::new(Level::Warn, "run-disturbed")
                        .text("mode", m.mode.clone())
                        .count("run", (i + 1) as f64)
                        .notes("evidence", w.warnings()),
                );
            }
        }
    }
    (notes, disturbed)
}

fn median_of(rows: &[Row], g: &str, o: &str, m: &str, mode: usize) -> Option<f64> {
    rows.iter()
        .find(|r| r.group == g && r.object == o && r.metric == m)
        .and_then(|r| r.stats.get(mode).cloned().flatten())
        .map(|s| s.median)
}

/// Plain statements a DBA can act on, drawn from the medians.
fn findings(modes: &[ModeRuns], rows: &[Row], block: f64) -> Vec<Note> {
    let mut out = Vec::new();
    for (i, m) in modes.iter().enumerate() {
        // Which mode, where there are several.
        let label = |n: Note| {
            if modes.len() > 1 {
                n.text("mode", m.mode.clone())
            } else {
                n
            }
        };
        if let Some(t) = median_of(rows, "db", "", "temp_bytes", i) {
            if t > 0.0 {
                out.push(label(Note::new(Level::Warn, "temp-file-spill")).bytes("temp_bytes", t));
            }
        }
        let disk_read: f64 = rows
            .iter()
            .filter(|r| r.group == "disk" && r.metric == "read_bytes")
            .filter_map(|r| r.stats.get(i).cloned().flatten())
            .map(|s| s.median)
            .sum();
        let blks = median_of(rows, "db", "", "blks_read", i).unwrap_or(0.0);
        if blks > 0.0 && disk_read < blks * block * 0.1 {
            out.push(
                label(Note::new(Level::Info, "page-cache-served-reads"))
                    .count("blocks_read", blks.floor())
                    .bytes("engine_read_bytes", blks * block)
                    .bytes("disk_read_bytes", disk_read),
            );
        }
    }
    // A warm run that reads as much from disk as a cold one kept nothing cached.
    let disk_reads = |i: usize| -> f64 {
        rows.iter()
            .filter(|r| r.group == "disk" && r.metric == "read_bytes")
            .filter_map(|r| r.stats.get(i).cloned().flatten())
            .map(|s| s.median)
            .sum()
    };
    if let (Some(c), Some(w)) = (
        modes.iter().position(|m| m.mode == "cold"),
        modes.iter().position(|m| m.mode == "warm"),
    ) {
        let (cold, warm) = (disk_reads(c), disk_reads(w));
        if cold >= 1048576.0 && warm >= cold * 0.5 {
            out.push(
                Note::new(Level::Warn, "warm-run-still-read-disk")
                    .bytes("warm_read_bytes", warm)
                    .bytes("cold_read_bytes", cold),
            );
        }
    }
    if modes.len() == 2 {
        let stat = |i: usize| {
            rows.iter()
                .find(|r| r.group == "run" && r.object.is_empty() && r.metric == "elapsed_s")
                .and_then(|r| r.stats.get(i).cloned().flatten())
        };
        if let (Some(a), Some(b)) = (stat(0), stat(1)) {
            if a.median > 0.0 && b.median > 0.0 {
                let (slow, fast) = if a.median >= b.median { (0, 1) } else { (1, 0) };
                let (s, f) = if slow == 0 { (&a, &b) } else { (&b, &a) };
                let r = s.median / f.median;
                // Said only beyond the runs' spread: every run of one mode slower than every
                // run of the other (with one run each, by more than 10%).
                let apart = if s.values.len() >= 2 && f.values.len() >= 2 {
                    s.min > f.max
                } else {
                    r > 1.10
                };
                let code = if apart {
                    "runs-differ"
                } else {
                    "runs-not-distinguishable"
                };
                out.push(
                    Note::new(Level::Info, code)
                        .text("slow", modes[slow].mode.clone())
                        .text("fast", modes[fast].mode.clone())
                        .secs("slow_elapsed_s", s.median)
                        .secs("fast_elapsed_s", f.median)
                        .ratio("ratio", r),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(start: &str, reset: &str, reads: f64) -> Snapshot {
        let mut s = Snapshot {
            engine: "postgresql".into(),
            server_start: start.into(),
            ..Default::default()
        };
        s.resets.insert("db".into(), reset.into());
        s.counters.insert("db.blks_read".into(), reads);
        s.counters.insert("db.blks_hit".into(), 300.0);
        s.put_object(
            "file",
            "base/1",
            &["reads", "read_stall_ms"],
            &[reads / 10.0, reads],
        );
        s
    }

    fn run(b: &Snapshot, a: &Snapshot) -> RunDelta {
        let mut r = RunDelta {
            elapsed_s: 1.0,
            ..Default::default()
        };
        subtract(b, a, &mut r);
        derive(&mut r, None);
        r
    }

    fn val(r: &RunDelta, g: &str, o: &str, m: &str) -> f64 {
        r.values[&(g.to_string(), o.to_string(), m.to_string())]
    }

    #[test]
    fn plain_delta_and_derived_figures() {
        let r = run(&snap("t0", "r0", 100.0), &snap("t0", "r0", 400.0));
        assert_eq!(val(&r, "db", "", "blks_read"), 300.0);
        assert_eq!(val(&r, "db", "", "blks_hit"), 0.0);
        assert_eq!(val(&r, "db", "", "hit_pct"), 0.0);
        assert_eq!(val(&r, "file", "base/1", "reads"), 30.0);
        assert_eq!(val(&r, "file", "base/1", "avg_read_ms"), 10.0);
        assert!(r.notes.is_empty());
    }

    #[test]
    fn restart_is_said_and_never_negative() {
        let r = run(&snap("t0", "r0", 1000.0), &snap("t1", "r0", 50.0));
        assert_eq!(val(&r, "db", "", "blks_read"), 50.0);
        assert_eq!(val(&r, "db", "", "blks_hit"), 300.0);
        assert!(r.notes[0].contains("restarted"), "{:?}", r.notes);
    }

    #[test]
    fn stats_reset_is_said() {
        let r = run(&snap("t0", "r0", 1000.0), &snap("t0", "r1", 70.0));
        assert_eq!(val(&r, "db", "", "blks_read"), 70.0);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("db statistics were reset")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn counter_backwards_without_reset_is_a_lower_bound() {
        let r = run(&snap("t0", "r0", 1000.0), &snap("t0", "r0", 10.0));
        assert_eq!(val(&r, "db", "", "blks_read"), 10.0);
        assert!(r.values.values().all(|v| *v >= 0.0));
        assert!(
            r.notes.iter().any(|n| n.contains("went backwards")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn own_footprint_is_taken_out_never_below_zero() {
        let mut r = RunDelta::default();
        r.values
            .insert(("status".into(), String::new(), "questions".into()), 9.0);
        r.values.insert(
            ("status".into(), String::new(), "created_tmp_tables".into()),
            1.0,
        );
        let mut own = RunDelta::default();
        own.values
            .insert(("status".into(), String::new(), "questions".into()), 6.0);
        own.values.insert(
            ("status".into(), String::new(), "created_tmp_tables".into()),
            2.0,
        );
        discount(&mut r, &own);
        assert_eq!(
            r.values[&("status".into(), String::new(), "questions".into())],
            3.0
        );
        assert_eq!(
            r.values[&("status".into(), String::new(), "created_tmp_tables".into())],
            0.0
        );
    }

    #[test]
    fn medians_spread_threshold_and_side_by_side() {
        let mk = |reads: f64, wait: f64| {
            let mut r = RunDelta {
                elapsed_s: reads / 100.0,
                ..Default::default()
            };
            r.values
                .insert(("db".into(), String::new(), "blks_read".into()), reads);
            r.values
                .insert(("db".into(), String::new(), "temp_bytes".into()), 0.0);
            r.values
                .insert(("latch".into(), "BUFFER".into(), "wait_ms".into()), wait);
            r.values.insert(
                ("latch".into(), "ACCESS_METHODS".into(), "wait_ms".into()),
                0.2,
            );
            derive(&mut r, None);
            r
        };
        let cold = ModeRuns {
            mode: "cold".into(),
            preparation: vec![],
            runs: vec![mk(500.0, 9.0), mk(700.0, 11.0), mk(600.0, 10.0)],
        };
        let warm = ModeRuns {
            mode: "warm".into(),
            preparation: vec![],
            runs: vec![mk(100.0, 0.0), mk(100.0, 0.0), mk(100.0, 0.0)],
        };
        let rep = summarize(
            "t".into(),
            None,
            "w".into(),
            3,
            vec![cold, warm],
            vec![],
            1.0,
            false,
        );
        let row = rep.rows.iter().find(|r| r.metric == "blks_read").unwrap();
        let c = row.stats[0].as_ref().unwrap();
        assert_eq!((c.median, c.min, c.max), (600.0, 500.0, 700.0));
        assert!((c.spread_pct().unwrap() - 33.33).abs() < 0.1);
        assert_eq!(row.stats[1].as_ref().unwrap().median, 100.0);
        // Zero everywhere and waits under the threshold are hidden; the rest stays.
        assert!(!rep.rows.iter().any(|r| r.metric == "temp_bytes"));
        assert!(!rep.rows.iter().any(|r| r.object == "ACCESS_METHODS"));
        assert!(rep.rows.iter().any(|r| r.object == "BUFFER"));
        assert_eq!(rep.hidden_rows, 2);
        assert!(
            rep.notes.iter().any(|n| n.code == "runs-differ"
                && n.facts.text("slow") == "cold"
                && n.facts.text("fast") == "warm"
                && (n.facts.num("ratio") - 6.0).abs() < 0.005),
            "{:?}",
            rep.notes
        );
        let all = summarize(
            "t".into(),
            None,
            "w".into(),
            3,
            rep.modes.clone(),
            vec![],
            1.0,
            true,
        );
        assert_eq!(all.hidden_rows, 0);
    }

    #[test]
    fn warm_reading_as_much_disk_as_cold_is_noted() {
        let mk = |disk: f64| {
            let mut r = RunDelta {
                elapsed_s: 0.3,
                ..Default::default()
            };
            r.values
                .insert(("disk".into(), "vda".into(), "read_bytes".into()), disk);
            r
        };
        let modes = |warm_disk: f64| {
            vec![
                ModeRuns {
                    mode: "cold".into(),
                    preparation: vec![],
                    runs: vec![mk(100.0 * 1048576.0)],
                },
                ModeRuns {
                    mode: "warm".into(),
                    preparation: vec![],
                    runs: vec![mk(warm_disk)],
                },
            ]
        };
        let sum = |m| summarize("t".into(), None, "w".into(), 1, m, vec![], 1.0, false);
        let big = sum(modes(96.0 * 1048576.0));
        assert!(
            big.notes
                .iter()
                .any(|n| n.code == "warm-run-still-read-disk"),
            "{:?}",
            big.notes
        );
        let cached = sum(modes(0.0));
        assert!(!cached
            .notes
            .iter()
            .any(|n| n.code == "warm-run-still-read-disk"));

        // Elapsed times whose runs overlap are not called different.
        let timed = |mode: &str, secs: &[f64]| ModeRuns {
            mode: mode.into(),
            preparation: vec![],
            runs: secs
                .iter()
                .map(|s| {
                    let mut r = RunDelta {
                        elapsed_s: *s,
                        ..Default::default()
                    };
                    derive(&mut r, None);
                    r
                })
                .collect(),
        };
        let close = summarize(
            "t".into(),
            None,
            "w".into(),
            3,
            vec![
                timed("cold", &[1.0, 1.3, 1.1]),
                timed("warm", &[0.95, 1.05, 1.2]),
            ],
            vec![],
            1.0,
            false,
        );
        assert!(
            close
                .notes
                .iter()
                .any(|n| n.code == "runs-not-distinguishable"),
            "{:?}",
            close.notes
        );
        assert!(!close.notes.iter().any(|n| n.code == "runs-differ"));

        // The same, with the warm run disturbed by a neighbour: named, and the reading lowered.
        let mut m = modes(96.0 * 1048576.0);
        m[1].runs[0].interference = Some(crate::interference::Interference {
            accepted: vec![],
            verdict: crate::interference::Verdict::Disturbed,
            window_s: 0.3,
            devices: vec!["vda".into()],
            device_read_bytes: 400 << 20,
            device_write_bytes: 0,
            device_flushes: 0,
            own_read_bytes: 96 << 20,
            own_write_bytes: 0,
            own_cpu_s: 0.1,
            others_cpu_s: 0.2,
            neighbours: vec![],
            steal_pct: None,
            idle_pct: None,
            io_share: None,
            cpu_share: None,
            notes: vec![Note::new(Level::Warn, "neighbour-io")
                .pct("share_pct", 76.0)
                .pct("disturbing_share_pct", 10.0)
                .list("devices", vec!["vda".into()])
                .bytes("device_read_bytes", 400.0 * 1048576.0)
                .bytes("own_read_bytes", 96.0 * 1048576.0)
                .notes(
                    "neighbours",
                    vec![Note::new(Level::Info, "neighbour")
                        .count("pid", 77.0)
                        .text("comm", "fio")
                        .bytes("read_bytes", 304.0 * 1048576.0)],
                )],
        });
        let d = sum(m);
        let named = d.notes.iter().find(|n| n.code == "run-disturbed").unwrap();
        assert_eq!(named.facts.text("mode"), "warm");
        assert_eq!(named.facts.num("run"), 1.0);
        let why = named.facts.notes("evidence");
        assert_eq!(why[0].facts.notes("neighbours")[0].facts.num("pid"), 77.0);
        assert!(d
            .notes
            .iter()
            .filter(|n| n.code != "run-disturbed" && n.code != "delta-run-note")
            .all(|n| n.level == Level::Info));
    }
}
