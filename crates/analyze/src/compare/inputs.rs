//! What `plumb compare` reads: plumb's results (`plumb lab` report directories, `plumb io` and
//! `plumb load` JSON), each turned into a run: its figures (with the samples inside it where
//! it has them), the context it ran in (versions, kernel, device), and how disturbed each of
//! its measured windows was.

use super::{compare, Centre, Comparison, Verdict, ALPHA};
use crate::histogram::{bootstrap_percentile, LatencyHistogram};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// One figure of a run: its name, which way is better, its value, and the samples inside the
/// run (a value a second, or a value a repetition) for one run a side.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: String,
    pub higher_is_better: bool,
    pub value: f64,
    /// The figure inside the run (second by second, or repetition by repetition).
    pub per_second: Vec<f64>,
    /// `per_second` is a time series, a value a second (drawn on the comparison's page).
    pub timed: bool,
    /// The phase of the run it was measured in (a lab window), whose disturbance it carries.
    pub phase: Option<String>,
    /// A latency percentile: the run's histogram and the quantile, bootstrapped for one run
    /// a side.
    pub histogram: Option<(LatencyHistogram, f64)>,
    /// The percentile in each tenth of the run, in the order measured (µs): the samples the
    /// significance test takes for one run a side.
    pub tenths: Vec<f64>,
}

impl Figure {
    pub(super) fn new(name: impl Into<String>, higher_is_better: bool, value: f64) -> Figure {
        Figure {
            name: name.into(),
            higher_is_better,
            value,
            per_second: Vec::new(),
            timed: false,
            phase: None,
            histogram: None,
            tenths: Vec::new(),
        }
    }
    fn inside(mut self, v: Vec<f64>) -> Figure {
        self.per_second = v;
        self
    }
    /// Samples a second apart.
    fn each_second(mut self, v: Vec<f64>) -> Figure {
        self.per_second = v;
        self.timed = true;
        self
    }
    fn in_phase(mut self, p: &str) -> Figure {
        self.phase = Some(p.to_string());
        self
    }
}

/// A measured window of a run and how much others disturbed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunWindow {
    pub phase: String,
    /// Disturbed by the rule the lab's phases are judged by (neighbours' bytes at 10% of the
    /// device's or more, CPU taken by others on a busy host, steal).
    pub disturbed: bool,
    /// Neighbours' bytes as a share of the device's (0 to 1).
    pub io_share: Option<f64>,
    /// The busiest neighbour: `comm (PID n)`.
    pub neighbour: Option<String>,
    /// The largest share another party took of the window, in percent (of the device's bytes,
    /// the CPU time, or steal): what the effect-size rule weighs. None: no share to weigh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_pct: Option<f64>,
}

impl RunWindow {
    /// Whether a change of `effect_pct` (the interval's bound nearest zero) stands beside this
    /// window's disturbance ([`crate::interference::EFFECT_OVER_SHARE`]).
    pub fn effect_stands(&self, effect_pct: f64) -> bool {
        !self.disturbed
            || self
                .share_pct
                .is_some_and(|s| effect_pct.abs() >= crate::interference::EFFECT_OVER_SHARE * s)
    }
}

/// One result read for comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub file: String,
    /// What it is (`plumb load tpcb`, `plumb lab`, `plumb io oltp-mix`): only runs of one
    /// kind are compared.
    pub what: String,
    pub figures: Vec<Figure>,
    /// Where it ran: versions, kernel, CPUs, memory, the device and its mount.
    pub context: BTreeMap<String, String>,
    pub windows: Vec<RunWindow>,
}

/// Why a set of results cannot be compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InputError {
    #[error("{file}: not a plumb result ({why})")]
    NotAResult { file: String, why: String },
    #[error("{file}: a {kind} result; plumb compare reads plumb lab report directories, plumb io, plumb load and plumb delta results (--json) and recording windows (FILE@FROM-TO)")]
    Kind { file: String, kind: String },
    #[error("--history: the results are of {groups}: a history is of one kind (give each kind a directory of its own)")]
    Mixed { groups: String },
    #[error("{file}: {got}, where {first} is {want}: compare runs of one kind")]
    Workload {
        file: String,
        got: String,
        first: String,
        want: String,
    },
}

fn not(file: &str, why: &str) -> InputError {
    InputError::NotAResult {
        file: file.to_string(),
        why: why.to_string(),
    }
}

/// The kinds of result `plumb compare` reads (besides windows of recordings).
pub const KINDS: [&str; 4] = ["lab", "io", "load", "delta"];

/// Read one result, by its `kind`.
pub fn read_run(file: &str, v: &Value) -> Result<Run, InputError> {
    let kind = v["kind"].as_str().ok_or_else(|| not(file, "no kind"))?;
    let mut run = match kind {
        "load" => load_run(file, v)?,
        "lab" => lab_run(file, v)?,
        "io" => io_run(file, v)?,
        "delta" => delta_run(file, v)?,
        _ => {
            return Err(InputError::Kind {
                file: file.to_string(),
                kind: kind.to_string(),
            })
        }
    };
    if let Some(p) = v["plumb_version"].as_str() {
        run.context.insert("plumb".into(), p.to_string());
    }
    Ok(run)
}

fn ms(v: &Value) -> Option<f64> {
    v.as_f64().map(|s| s * 1000.0)
}

/// p50, p99 (and p99.9 with `deep`) of one latency record, as figures named by `name(label)`,
/// each with the record's histogram where it has one.
fn latencies(lat: &Value, deep: bool, name: impl Fn(&str) -> String) -> Vec<Figure> {
    let hist: Option<LatencyHistogram> = serde_json::from_value(lat["histogram_us"].clone())
        .ok()
        .filter(|h: &LatencyHistogram| !h.is_empty());
    let mut levels = vec![("p50_s", "p50", 0.5), ("p99_s", "p99", 0.99)];
    if deep {
        levels.push(("p99_9_s", "p99.9", 0.999));
    }
    let tenths = |i: usize| -> Vec<f64> {
        let t: Vec<Option<f64>> = lat["tenths_us"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| x[i].as_f64())
            .collect();
        // All ten or none.
        t.iter()
            .all(Option::is_some)
            .then(|| t.into_iter().flatten().collect())
            .unwrap_or_default()
    };
    levels
        .into_iter()
        .filter_map(|(key, label, q)| {
            let mut f = Figure::new(name(label), false, ms(&lat[key])?);
            f.histogram = hist.clone().map(|h| (h, q));
            f.tenths = match label {
                "p50" => tenths(0),
                "p99" => tenths(1),
                _ => Vec::new(),
            };
            Some(f)
        })
        .collect()
}

/// A `plumb load --json` result's figures: transactions a second (a value a second from its
/// series), and each type's latency percentiles (p50, p99, p99.9; lower is better).
pub(crate) fn load_figures(file: &str, v: &Value) -> Result<(String, Vec<Figure>), InputError> {
    let workload = v["workload"]
        .as_str()
        .ok_or_else(|| not(file, "no workload"))?
        .to_string();
    let window = v["window_s"]
        .as_f64()
        .filter(|w| *w > 0.0)
        .ok_or_else(|| not(file, "no timed window"))?;
    let types = v["types"]
        .as_array()
        .ok_or_else(|| not(file, "no transaction types"))?;
    let done: f64 = types
        .iter()
        .map(|t| t["committed"].as_f64().unwrap_or(0.0) + t["rolled_back"].as_f64().unwrap_or(0.0))
        .sum();
    // Whole seconds only: the window's first and last may be cut.
    let secs: Vec<f64> = v["seconds"]
        .as_array()
        .map(|s| s.iter().filter_map(|r| r["done"].as_f64()).collect())
        .unwrap_or_default();
    let per_second = if secs.len() > 2 {
        secs[1..secs.len() - 1].to_vec()
    } else {
        Vec::new()
    };
    let mut out = vec![Figure::new("tps", true, done / window).each_second(per_second)];
    for t in types {
        let name = t["name"].as_str().unwrap_or("?");
        out.extend(latencies(&t["latency"], true, |l| {
            format!("{name} latency {l} (ms)")
        }));
        out.extend(server_parts(name, &t["explained"]));
    }
    Ok((workload, out))
}

/// With `--explain`: a type's server time and each of its parts, ms per transaction (lower is
/// better; a part with no time on either side is left out by the comparison), each with its
/// tenths of the window as the samples inside the run (so that one run a side can be tested:
/// which part grew).
fn server_parts(name: &str, e: &Value) -> Vec<Figure> {
    let Some(parts) = e["mean"]["parts"].as_array() else {
        return Vec::new();
    };
    let tenths = |key: &str| -> Vec<f64> {
        e["tenths_ms"][key]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    if let Some(ms) = e["mean"]["server_ms"].as_f64() {
        let mut f = Figure::new(
            format!("{name} server time (ms per transaction)"),
            false,
            ms,
        );
        f.per_second = tenths("server");
        out.push(f);
    }
    for p in parts {
        // The server's parts (the client's has no share of it); every one, small ones too:
        // the part that grew may be small on the other side.
        let (Some(key), Some(ms), false) =
            (p["part"].as_str(), p["ms"].as_f64(), p["share"].is_null())
        else {
            continue;
        };
        let mut f = Figure::new(
            format!("{name} server {key} (ms per transaction)"),
            false,
            ms,
        );
        f.per_second = tenths(key);
        out.push(f);
    }
    out
}

fn load_run(file: &str, v: &Value) -> Result<Run, InputError> {
    let (workload, mut figures) = load_figures(file, v)?;
    // Its timed window, where it was watched: a disturbed load is withheld as a lab's phase is.
    let windows: Vec<RunWindow> = run_window(TIMED_WINDOW, &v["interference"])
        .into_iter()
        .collect();
    if !windows.is_empty() {
        figures = figures
            .into_iter()
            .map(|f| f.in_phase(TIMED_WINDOW))
            .collect();
    }
    let mut context = BTreeMap::new();
    for key in [
        "engine",
        "version",
        "target",
        "scale",
        "clients",
        "rate_per_s",
    ] {
        if let Some(x) = text(&v[key]) {
            context.insert(key.to_string(), x);
        }
    }
    Ok(Run {
        file: file.to_string(),
        what: format!("plumb load {workload}"),
        figures,
        context,
        windows,
    })
}

/// The one window a `plumb load` result is watched over.
const TIMED_WINDOW: &str = "timed window";

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// How disturbed a window was, from its interference record.
fn run_window(phase: &str, i: &Value) -> Option<RunWindow> {
    if !i.is_object() {
        return None;
    }
    let io_share = i["io_share"].as_f64().or_else(|| {
        // Reports from before the share was recorded: the device's bytes beyond plumb's.
        let dev = i["device_read_bytes"].as_f64()? + i["device_write_bytes"].as_f64()?;
        let own = i["own_read_bytes"].as_f64()? + i["own_write_bytes"].as_f64()?;
        (dev > 0.0).then(|| ((dev - own) / dev).clamp(0.0, 1.0))
    });
    let neighbour = i["neighbours"].get(0).map(|n| {
        format!(
            "{} (PID {})",
            n["comm"].as_str().unwrap_or("?"),
            n["pid"].as_u64().unwrap_or(0)
        )
    });
    // As `Interference::disturbing_share_pct`: I/O nobody accounts for has no share to weigh.
    let unexplained = i["notes"]
        .as_array()
        .is_some_and(|n| n.iter().any(|n| n["code"] == "unexplained-io"));
    let share_pct = [
        io_share.map(|s| s * 100.0),
        i["cpu_share"].as_f64().map(|s| s * 100.0),
        i["steal_pct"].as_f64(),
    ]
    .into_iter()
    .flatten()
    .reduce(f64::max)
    .filter(|_| !unexplained);
    Some(RunWindow {
        phase: phase.to_string(),
        disturbed: i["verdict"].as_str() == Some("disturbed"),
        io_share,
        neighbour,
        share_pct,
    })
}

/// Where a lab or storage test ran: the host's and the device's facts that can explain a
/// change.
fn storage_context(out: &mut BTreeMap<String, String>, s: &Value) {
    for (key, field) in [("file system", "fs_type"), ("device", "device")] {
        if let Some(x) = text(&s[field]) {
            out.insert(key.into(), x);
        }
    }
    if let Some(o) = s["options"].as_array() {
        let o: Vec<&str> = o.iter().filter_map(Value::as_str).collect();
        out.insert("mount options".into(), o.join(","));
    }
    if let Some(q) = s["layers"].get(0).map(|l| &l["queue"]) {
        for (key, field) in [
            ("write cache", "write_cache"),
            ("FUA", "fua"),
            ("scheduler", "scheduler"),
        ] {
            if let Some(x) = text(&q[field]) {
                out.insert(key.into(), x);
            }
        }
    }
}

/// The lab's command line without where it wrote: two runs differ by their flags, not by
/// their output directories.
fn flags(cmd: &str) -> String {
    let mut out = Vec::new();
    let mut words = cmd.split_whitespace().skip(1);
    while let Some(w) = words.next() {
        if w == "--out" {
            words.next();
        } else if !w.starts_with("--out=") {
            out.push(w);
        }
    }
    out.join(" ")
}

/// A `plumb lab` report's figures: pgbench's tps (its seconds inside one run) and latency,
/// the durable write's latency per mode, each queue depth's IOPS, sequential reads, the insert
/// loops' commit latency per configuration, MariaDB's configurations and workloads, and each
/// experiment's tps.
fn lab_run(file: &str, v: &Value) -> Result<Run, InputError> {
    if !v["windows"].is_array() {
        return Err(not(file, "a lab report without windows"));
    }
    let mut figs = pgbench_figures(v);
    figs.extend(storage_figures(v));
    figs.extend(commit_figures(file, v));
    // Each experiment's workload under its condition: `pgbench tps [write throttle]`.
    let (more, experiments) = experiment_figures(v);
    figs.extend(more);
    let windows = v["windows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| run_window(w["phase"].as_str()?, &w["interference"]))
        .collect();
    let mut context = BTreeMap::new();
    if let Some(c) = v["command_line"].as_str() {
        context.insert("command line".into(), flags(c));
    }
    if let Some(e) = text(&v["engine_version"]) {
        context.insert("engine".into(), e);
    }
    context.insert("experiments".into(), experiments.join(", "));
    let host = &v["host"];
    for (key, x) in [
        ("kernel", &host["host"]["kernel_release"]),
        ("OS", &host["host"]["os"]),
        ("CPU", &host["cpu"]["model"]),
        ("CPUs online", &host["cpu"]["online_cpus"]),
        ("memory bytes", &host["memory"]["total_bytes"]),
    ] {
        if let Some(x) = text(x) {
            context.insert(key.into(), x);
        }
    }
    let storage = if v["durability"]["storage"].is_object() {
        &v["durability"]["storage"]
    } else {
        &host["storage"]
    };
    storage_context(&mut context, storage);
    Ok(Run {
        file: file.to_string(),
        what: "plumb lab".into(),
        figures: figs,
        context,
        windows,
    })
}

/// pgbench's figures: tps (a value a second) and its latency percentiles.
fn pgbench_figures(v: &Value) -> Vec<Figure> {
    let mut figs = Vec::new();
    let pg = &v["pgbench"];
    if let Some(tps) = pg["tps"].as_f64() {
        let secs: Vec<f64> = pg["tps_seconds"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        figs.push(
            Figure::new("pgbench tps", true, tps)
                .each_second(secs)
                .in_phase("pgbench"),
        );
        figs.extend(
            latencies(&pg["latency"], false, |l| {
                format!("pgbench latency {l} (ms)")
            })
            .into_iter()
            .map(|f| f.in_phase("pgbench")),
        );
    }
    figs
}

/// The storage probes' figures: each durable write mode's percentiles, each sweep level's
/// IOPS, the sequential read.
fn storage_figures(v: &Value) -> Vec<Figure> {
    let mut figs = Vec::new();
    for row in v["durability"]["rows"].as_array().into_iter().flatten() {
        let mode = format!(
            "{} {}K",
            row["mode"].as_str().unwrap_or("?"),
            row["block_size"].as_u64().unwrap_or(0) / 1024
        );
        for (key, label) in [("p50_s", "p50"), ("p99_s", "p99")] {
            if let Some(x) = ms(&row[key]) {
                let reps: Vec<f64> = row["reps"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|r| ms(&r[key])).collect())
                    .unwrap_or_default();
                figs.push(
                    Figure::new(format!("durable write {mode} {label} (ms)"), false, x)
                        .inside(reps)
                        .in_phase("durability probe"),
                );
            }
        }
    }
    for level in v["sweep"]["levels"].as_array().into_iter().flatten() {
        let reps: Vec<f64> = level["reps"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["iops"].as_f64()).collect())
            .unwrap_or_default();
        if !reps.is_empty() {
            figs.push(
                Figure::new(
                    format!(
                        "sweep {} {} IOPS",
                        v["sweep"]["sweep_over"].as_str().unwrap_or("level"),
                        level["label"].as_str().unwrap_or("?")
                    ),
                    true,
                    super::median(&reps),
                )
                .inside(reps)
                .in_phase("storage sweep"),
            );
        }
    }
    if let Some(b) = v["seq_read"]["bytes_per_s"].as_f64() {
        figs.push(Figure::new("sequential read (MB/s)", true, b / 1e6));
    }
    figs
}

/// The commits' figures: the insert/CHECKPOINT loops', MariaDB's durability configurations'
/// and each workload of plumb's driver.
fn commit_figures(file: &str, v: &Value) -> Vec<Figure> {
    let mut figs = Vec::new();
    for l in v["loops"].as_array().into_iter().flatten() {
        let config = format!(
            "{}{}",
            l["wal_sync_method"].as_str().unwrap_or("?"),
            if l["wal_direct"].as_bool() == Some(true) {
                "+O_DIRECT"
            } else {
                ""
            }
        );
        let (phase, lat) = if l["scenario"] == "single" {
            (format!("single-row commits, {config}"), &l["commit"])
        } else {
            (format!("10,000-row transactions, {config}"), &l["insert"])
        };
        figs.extend(
            latencies(lat, false, |l| format!("{phase}: {l} (ms)"))
                .into_iter()
                .map(|f| f.in_phase(&phase)),
        );
    }
    for c in v["mariadb_durability"]["configs"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = c["name"].as_str().unwrap_or("?");
        figs.extend(latencies(&c["single"], false, |l| {
            format!("{name}: single-row commit {l} (ms)")
        }));
    }
    for w in v["workloads"].as_array().into_iter().flatten() {
        if let Ok((name, f)) = load_figures(file, w) {
            figs.extend(f.into_iter().map(|mut f| {
                f.name = format!("{name} {}", f.name);
                f
            }));
        }
    }
    figs
}

/// Each experiment's workload under its condition, and the experiments' names.
fn experiment_figures(v: &Value) -> (Vec<Figure>, Vec<String>) {
    let mut figs = Vec::new();
    let mut experiments = Vec::new();
    for e in v["experiments"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap_or("experiment");
        let ch = &e["changed"];
        let Some(tps) = ch["tps"].as_f64() else {
            continue;
        };
        experiments.push(name.to_string());
        let secs: Vec<f64> = ch["tps_seconds"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let phase = e["phase"].as_str().unwrap_or(name);
        figs.push(
            Figure::new(format!("pgbench tps [{name}]"), true, tps)
                .each_second(secs)
                .in_phase(phase),
        );
        figs.extend(
            latencies(&ch["latency"], false, |l| {
                format!("pgbench latency {l} (ms) [{name}]")
            })
            .into_iter()
            .map(|f| f.in_phase(phase)),
        );
    }
    (figs, experiments)
}

/// A `plumb io --json` result's figures: total, read and write I/O a second (a value a
/// second from its series), MB/s, and the latency percentiles (p50, p99, p99.9).
fn io_run(file: &str, v: &Value) -> Result<Run, InputError> {
    let job = v["job"]["name"]
        .as_str()
        .ok_or_else(|| not(file, "no job"))?;
    let total = &v["tables"]["total"];
    // The table's all-threads row (no thread), else its rows summed.
    let sum = |t: &Value, f: &str| -> Option<f64> {
        let a = t.as_array()?;
        if let Some(all) = a.iter().find(|r| r["thread"].is_null()) {
            return all[f].as_f64();
        }
        (!a.is_empty()).then(|| a.iter().filter_map(|r| r[f].as_f64()).sum())
    };
    let measured = v["measured_s"].as_f64().unwrap_or(0.0);
    let iops = sum(total, "iops").ok_or_else(|| not(file, "no totals"))?;
    let secs: Vec<f64> = v["series"]
        .as_array()
        .map(|a| {
            // Whole seconds of the measured window only.
            a.iter()
                .filter(|s| {
                    s["second"]
                        .as_f64()
                        .is_some_and(|x| x + 1.0 <= measured + 1e-3)
                })
                .map(|s| {
                    s["read_ios"].as_f64().unwrap_or(0.0) + s["write_ios"].as_f64().unwrap_or(0.0)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut figs = vec![Figure::new("IOPS", true, iops).each_second(secs)];
    for (t, label) in [("read", "read IOPS"), ("write", "write IOPS")] {
        if let Some(x) = sum(&v["tables"][t], "iops").filter(|x| *x > 0.0) {
            figs.push(Figure::new(label, true, x));
        }
    }
    if let Some(b) = sum(total, "bytes_per_s") {
        figs.push(Figure::new("MB/s", true, b / 1e6));
    }
    for p in v["percentiles"].as_array().into_iter().flatten() {
        let label = match p["label"].as_str() {
            Some("50th") => "p50",
            Some("99th") => "p99",
            Some("3-nines") => "p99.9",
            _ => continue,
        };
        for side in ["read", "write"] {
            if let Some(x) = ms(&p[format!("{side}_s")]) {
                figs.push(Figure::new(
                    format!("{side} latency {label} (ms)"),
                    false,
                    x,
                ));
            }
        }
    }
    let mut context = BTreeMap::new();
    if let Some(c) = v["command_line"].as_str() {
        context.insert("command line".into(), flags(c));
    }
    if let Some(e) = v["engine"].as_str() {
        context.insert("I/O engine".into(), e.to_string());
    }
    let windows = run_window("the test", &v["interference"])
        .into_iter()
        .collect();
    Ok(Run {
        file: file.to_string(),
        what: format!("plumb io {job}"),
        figures: figs.into_iter().map(|f| f.in_phase("the test")).collect(),
        context,
        windows,
    })
}

/// Which way a delta's figure is better: a cost (time, reads, bytes, waits, syscalls) is
/// better lower, a cache's hit share higher; what is no cost of the workload (the host's idle
/// time and steal, sessions by state, commits counted, a wait's share of the samples) has no
/// direction and is left out.
pub(crate) fn delta_direction(group: &str, metric: &str) -> Option<bool> {
    match (group, metric) {
        (_, "") | ("activity", _) => None,
        (_, "idle_s" | "steal_s" | "share_pct" | "xact_commit" | "xact_rollback") => None,
        (_, m) if m.ends_with("hit_pct") => Some(true),
        _ => Some(false),
    }
}

/// A `plumb delta` result: every figure it reported, per mode (`cold`, `warm`), the median of
/// its repetitions, with the repetitions as the samples inside the run. A delta is what the
/// workload cost (reads, time, waits, bytes, syscalls): lower is better. The workload and the
/// engine's settings are context, so comparing a statement with its rewrite, or one setting
/// with another, says what differed.
fn delta_run(file: &str, v: &Value) -> Result<Run, InputError> {
    let modes: Vec<String> = v["modes"]
        .as_array()
        .ok_or_else(|| not(file, "no modes"))?
        .iter()
        .map(|m| m["mode"].as_str().unwrap_or("run").to_string())
        .collect();
    let rows = v["rows"].as_array().ok_or_else(|| not(file, "no rows"))?;
    let mut figures = Vec::new();
    for row in rows {
        let text = |k: &str| row[k].as_str().unwrap_or("").to_string();
        let (group, object, metric, unit) =
            (text("group"), text("object"), text("metric"), text("unit"));
        let Some(higher_is_better) = delta_direction(&group, &metric) else {
            continue;
        };
        let stats = row["stats"].as_array().into_iter().flatten();
        for (mode, st) in modes.iter().zip(stats) {
            let Some(median) = st["median"].as_f64().filter(|x| x.is_finite()) else {
                continue;
            };
            let values: Vec<f64> = st["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_f64)
                .filter(|x| x.is_finite())
                .collect();
            let mut name = format!("{mode}: {group}");
            for part in [&object, &metric] {
                if !part.is_empty() {
                    name.push(' ');
                    name.push_str(part);
                }
            }
            if !unit.is_empty() {
                name.push_str(&format!(" ({unit})"));
            }
            let f = Figure::new(name, higher_is_better, median).in_phase(mode);
            figures.push(if values.len() > 1 {
                f.inside(values)
            } else {
                f
            });
        }
    }
    if figures.is_empty() {
        return Err(not(file, "no figures"));
    }
    let mut context = BTreeMap::new();
    if let Some(w) = v["workload"].as_str() {
        context.insert("workload".into(), w.to_string());
    }
    let e = &v["engine"];
    if let (Some(name), Some(version)) = (e["engine"].as_str(), e["version"].as_str()) {
        context.insert("engine".into(), format!("{name} {version}"));
    }
    for (k, val) in e["settings"].as_object().into_iter().flatten() {
        if let Some(val) = val.as_str() {
            context.insert(format!("setting {k}"), val.to_string());
        }
    }
    if let Some(n) = v["repeat"].as_u64() {
        context.insert("repetitions".into(), n.to_string());
    }
    Ok(Run {
        file: file.to_string(),
        what: "plumb delta".into(),
        figures,
        context,
        windows: Vec::new(),
    })
}

/// One figure second by second in every run of either side.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub figure: String,
    pub baseline: Vec<(String, Vec<f64>)>,
    pub candidate: Vec<(String, Vec<f64>)>,
}

fn timelines(a: &[Run], b: &[Run], names: &[String]) -> Vec<Timeline> {
    let side = |runs: &[Run], n: &str| -> Vec<(String, Vec<f64>)> {
        runs.iter()
            .filter_map(|r| {
                let f = r.figures.iter().find(|f| f.name == n && f.timed)?;
                Some((r.file.clone(), f.per_second.clone()))
            })
            .collect()
    };
    names
        .iter()
        .map(|n| Timeline {
            figure: n.clone(),
            baseline: side(a, n),
            candidate: side(b, n),
        })
        .filter(|t| !t.baseline.is_empty() && !t.candidate.is_empty())
        .collect()
}

/// A fact of the context whose values differ between the sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Differed {
    pub what: String,
    pub baseline: Vec<String>,
    pub candidate: Vec<String>,
}

/// A window of a run that disturbed a figure's comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Disturbed {
    pub file: String,
    #[serde(flatten)]
    pub window: RunWindow,
}

/// `plumb compare`'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareReport {
    /// What was compared (`plumb load tpcb`).
    pub what: String,
    pub baseline: Vec<String>,
    pub candidate: Vec<String>,
    pub min_change_pct: f64,
    pub alpha: f64,
    /// Whether the figures were compared over the samples inside one run a side.
    pub per_second: bool,
    /// Whether figures with seconds were compared over the seconds inside a few runs a side
    /// (fewer than 4), whole runs drawn for the interval.
    pub within_runs: bool,
    /// One run a side: how many figures were tested together (Holm's correction: the smallest
    /// p must be below 0.05/m, the next below 0.05/(m−1)…); 0 with several runs a side.
    pub tested_together: usize,
    /// The floors with one run a side (throughput, latency), in percent.
    pub one_run_floor_pct: f64,
    pub one_run_latency_floor_pct: f64,
    pub one_run_tail_floor_pct: f64,
    /// What differed between the sides' runs: versions, kernel, device, flags.
    pub differed: Vec<Differed>,
    /// Each figure's values second by second, run by run (baseline's, candidate's): the
    /// page's charts on relative time.
    #[serde(skip)]
    pub timelines: Vec<Timeline>,
    pub figures: Vec<FigureComparison>,
    /// The comparison in one word, with the figures behind it.
    pub verdict: CompareVerdict,
}

/// What a comparison says as a whole: `worse` when a figure is worse by the rule and none
/// better, `better` the other way, `mixed` when both, `not_distinguishable` when figures were
/// judged and none moved, `withheld` when every figure that could be judged was withheld, and
/// `too_few` when none could be.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompareVerdict {
    pub outcome: &'static str,
    pub worse: Vec<String>,
    pub better: Vec<String>,
    pub not_distinguishable: usize,
    pub too_few: usize,
    pub withheld: Vec<String>,
    /// Figures not comparable between the sides (throughput of different loops or rates).
    pub not_comparable: Vec<String>,
}

impl CompareVerdict {
    pub fn of(figures: &[FigureComparison]) -> CompareVerdict {
        let names = |v: Verdict| -> Vec<String> {
            figures
                .iter()
                .filter(|f| f.comparison.verdict == v)
                .map(|f| f.name.clone())
                .collect()
        };
        let count = |v: Verdict| figures.iter().filter(|f| f.comparison.verdict == v).count();
        let (worse, better, withheld, not_comparable) = (
            names(Verdict::Worse),
            names(Verdict::Better),
            names(Verdict::Withheld),
            names(Verdict::NotComparable),
        );
        let same = count(Verdict::Same);
        let outcome = match (worse.is_empty(), better.is_empty()) {
            (false, true) => "worse",
            (true, false) => "better",
            (false, false) => "mixed",
            (true, true) if same > 0 => "not_distinguishable",
            (true, true) if !withheld.is_empty() => "withheld",
            (true, true) if !not_comparable.is_empty() => "not_comparable",
            (true, true) => "too_few",
        };
        CompareVerdict {
            outcome,
            worse,
            better,
            not_distinguishable: same,
            too_few: count(Verdict::TooFew),
            withheld,
            not_comparable,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureComparison {
    pub name: String,
    pub higher_is_better: bool,
    #[serde(flatten)]
    pub comparison: Comparison,
    /// The disturbed windows that withheld the verdict.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub disturbed: Vec<Disturbed>,
}

impl CompareReport {
    pub fn worse(&self) -> usize {
        self.figures
            .iter()
            .filter(|f| f.comparison.verdict == Verdict::Worse)
            .count()
    }
}

/// A latency percentile of one run a side: the centres and the change's interval bootstrapped
/// from the runs' histograms; the significance from the Mann-Whitney U test over the
/// percentile in each tenth of either run (a tail that came from one burst is not the run's;
/// transactions of one run are not independent of each other, tenths nearly are). Without
/// tenths on both sides (p99.9, results of plumb load) there is no test: too few.
fn percentile_comparison(
    a: &LatencyHistogram,
    b: &LatencyHistogram,
    q: f64,
    tenths: (&[f64], &[f64]),
    min_change_pct: f64,
) -> Option<Comparison> {
    let boot = bootstrap_percentile(a, b, q, super::RESAMPLES)?;
    let ms = |x: f64| x / 1000.0;
    let centre = |v: (f64, f64, f64), n: u64| Centre {
        median: ms(v.0),
        low: ms(v.1),
        high: ms(v.2),
        n: n as usize,
    };
    let (lo, hi) = (boot.change_low_pct, boot.change_high_pct);
    let p = super::mann_whitney(tenths.0, tenths.1).p;
    let verdict = if crate::io::samples_needed(q) > a.count().min(b.count())
        || super::smallest_p(tenths.0.len(), tenths.1.len()) >= ALPHA
    {
        Verdict::TooFew
    } else if p < ALPHA && lo > min_change_pct {
        Verdict::Worse
    } else if p < ALPHA && hi < -min_change_pct {
        Verdict::Better
    } else {
        Verdict::Same
    };
    Some(Comparison {
        baseline: centre(boot.baseline, a.count()),
        candidate: centre(boot.candidate, b.count()),
        change_pct: boot.change_pct,
        change_low_pct: lo,
        change_high_pct: hi,
        p,
        verdict,
        floor_pct: min_change_pct,
    })
}

/// Runs whose figure has its seconds (at least [`WITHIN_RUN_SECONDS`] each): compared over
/// the seconds inside the runs, the runs kept as the unit of resampling.
fn within_runs(side: &[&Figure]) -> bool {
    side.len() < SEVERAL_RUNS
        && side
            .iter()
            .all(|f| f.per_second.len() >= WITHIN_RUN_SECONDS)
}

/// Seconds a run needs to be compared by what is inside it.
pub const WITHIN_RUN_SECONDS: usize = 2;
/// From this many runs a side the runs' own values are enough for the test (4 a side can reach
/// p < 0.05).
pub const SEVERAL_RUNS: usize = 4;

/// Each figure both sides have, compared: over the runs where a side has several; over the
/// samples inside the runs where each side has one and the figure has them.
pub fn compare_runs(
    baseline: &[Vec<Figure>],
    candidate: &[Vec<Figure>],
    min_change_pct: f64,
) -> Vec<(String, Comparison)> {
    let names: Vec<(String, bool)> = baseline
        .first()
        .map(|f| {
            f.iter()
                .map(|x| (x.name.clone(), x.higher_is_better))
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, higher) in names {
        fn pick<'a>(runs: &'a [Vec<Figure>], name: &str) -> Vec<&'a Figure> {
            runs.iter()
                .filter_map(|r| r.iter().find(|f| f.name == name))
                .collect()
        }
        let (a, b) = (pick(baseline, &name), pick(candidate, &name));
        if a.len() != baseline.len() || b.len() != candidate.len() || b.is_empty() {
            continue;
        }
        let one_each = a.len() == 1 && b.len() == 1;
        // Nothing on either side (no swapping before or after): nothing to compare.
        let zero = |side: &[&Figure]| {
            side.iter()
                .all(|f| f.value == 0.0 && f.per_second.iter().all(|x| *x == 0.0))
        };
        if zero(&a) && zero(&b) {
            continue;
        }
        let floor = super::floor_pct(min_change_pct, one_each, higher);
        if one_each {
            if let (Some((ha, q)), Some((hb, _))) = (&a[0].histogram, &b[0].histogram) {
                let floor = super::floor_for(min_change_pct, true, higher, *q >= 0.99);
                if let Some(c) =
                    percentile_comparison(ha, hb, *q, (&a[0].tenths, &b[0].tenths), floor)
                {
                    out.push((name, c));
                    continue;
                }
            }
        }
        let samples = |side: &[&Figure]| -> Vec<f64> {
            if one_each && !side[0].per_second.is_empty() {
                side[0].per_second.clone()
            } else {
                side.iter().map(|f| f.value).collect()
            }
        };
        // A few runs a side, each with its seconds: the test over the seconds, the interval
        // from drawing whole runs (then their seconds), so three short runs a side can say
        // "worse" when it is plain, and runs that disagree widen the interval.
        if !one_each && within_runs(&a) && within_runs(&b) {
            let runs = |side: &[&Figure]| -> Vec<Vec<f64>> {
                side.iter().map(|f| f.per_second.clone()).collect()
            };
            let (ra, rb) = (runs(&a), runs(&b));
            // One run on a side cannot show its run-to-run spread: that side's floor.
            let floor = if a.len() == 1 || b.len() == 1 {
                super::floor_pct(min_change_pct, true, higher)
            } else {
                floor
            };
            out.push((
                name,
                super::compare_samples(
                    super::Samples::Runs(&ra),
                    super::Samples::Runs(&rb),
                    higher,
                    floor,
                ),
            ));
            continue;
        }
        out.push((name, compare(&samples(&a), &samples(&b), higher, floor)));
    }
    out
}

/// The context facts whose values differ between the sides.
fn differed(a: &[Run], b: &[Run]) -> Vec<Differed> {
    let keys: BTreeSet<&String> = a.iter().chain(b).flat_map(|r| r.context.keys()).collect();
    let values = |runs: &[Run], k: &String| -> Vec<String> {
        let set: BTreeSet<String> = runs
            .iter()
            .map(|r| match r.context.get(k) {
                Some(v) if !v.is_empty() => v.clone(),
                _ => "none".into(),
            })
            .collect();
        set.into_iter().collect()
    };
    keys.into_iter()
        .filter_map(|k| {
            let (x, y) = (values(a, k), values(b, k));
            (x != y).then(|| Differed {
                what: k.clone(),
                baseline: x,
                candidate: y,
            })
        })
        .collect()
}

/// The condition of a figure measured under an experiment: `write throttle` of
/// `pgbench tps [write throttle]`.
fn condition(name: &str) -> Option<(&str, &str)> {
    let (base, rest) = name.rsplit_once(" [")?;
    Some((base, rest.strip_suffix(']')?))
}

/// Where only the other side ran an experiment, this side's plain workload is what it is
/// compared against: a lab with `--throttle-writes` against one without compares the
/// throttled workload with the unthrottled one (and says the experiments differed).
fn stand_in(side: &mut [Run], other: &[Run]) {
    let wanted: BTreeSet<(String, String)> = other
        .iter()
        .flat_map(|r| &r.figures)
        .filter_map(|f| condition(&f.name).map(|(b, c)| (b.to_string(), c.to_string())))
        .collect();
    for run in side.iter_mut() {
        let mut extra = Vec::new();
        for (base, cond) in &wanted {
            let full = format!("{base} [{cond}]");
            if run.figures.iter().any(|f| f.name == full) {
                continue;
            }
            if let Some(f) = run.figures.iter().find(|f| f.name == *base) {
                let mut f = f.clone();
                f.name = full;
                extra.push(f);
            }
        }
        run.figures.extend(extra);
    }
}

/// One run a side compares dozens of figures on samples inside the same two runs: at 0.05 each,
/// one identical figure in twenty would be called changed. Holm's step-down correction keeps
/// the chance of any false verdict at 0.05: the figures tested (not too few, not withheld) in
/// order of p, the k-th smallest judged at 0.05/(m−k+1), and none after the first that fails.
/// A verdict that does not survive becomes `~`. Returns m.
fn holm(figures: &mut [FigureComparison]) -> usize {
    let mut order: Vec<usize> = (0..figures.len())
        .filter(|&i| {
            matches!(
                figures[i].comparison.verdict,
                Verdict::Better | Verdict::Worse | Verdict::Same
            )
        })
        .collect();
    order.sort_by(|&x, &y| figures[x].comparison.p.total_cmp(&figures[y].comparison.p));
    let m = order.len();
    let mut passed = true;
    for (k, &i) in order.iter().enumerate() {
        passed = passed && figures[i].comparison.p < ALPHA / (m - k) as f64;
        let c = &mut figures[i].comparison;
        if !passed && matches!(c.verdict, Verdict::Better | Verdict::Worse) {
            c.verdict = Verdict::Same;
        }
    }
    m
}

#[cfg(test)] // only the tests call it
/// Compare two sets of results (file name, parsed JSON): all of one kind, with figures in
/// common.
pub(crate) fn compare_files(
    baseline: &[(String, Value)],
    candidate: &[(String, Value)],
    min_change_pct: f64,
) -> Result<CompareReport, InputError> {
    let read = |runs: &[(String, Value)]| -> Result<Vec<Run>, InputError> {
        runs.iter().map(|(f, v)| read_run(f, v)).collect()
    };
    compare_read(read(baseline)?, read(candidate)?, min_change_pct)
}

/// Compare two sets of runs already read (results, recording windows): all of one kind.
pub fn compare_read(
    mut a: Vec<Run>,
    mut b: Vec<Run>,
    min_change_pct: f64,
) -> Result<CompareReport, InputError> {
    if let Some(first) = a.first().or(b.first()) {
        if let Some(r) = a.iter().chain(&b).find(|r| r.what != first.what) {
            return Err(InputError::Workload {
                file: r.file.clone(),
                got: r.what.clone(),
                first: first.file.clone(),
                want: first.what.clone(),
            });
        }
    }
    let what = a.first().map(|r| r.what.clone()).unwrap_or_default();
    let (baseline, candidate): (Vec<String>, Vec<String>) = (
        a.iter().map(|r| r.file.clone()).collect(),
        b.iter().map(|r| r.file.clone()).collect(),
    );
    stand_in(&mut a, &b);
    stand_in(&mut b, &a);
    let figs =
        |runs: &[Run]| -> Vec<Vec<Figure>> { runs.iter().map(|r| r.figures.clone()).collect() };
    let per_second = a.len() == 1 && b.len() == 1;
    let rate = |r: &Run| r.context.get("rate_per_s").cloned();
    let rate_differs = {
        let ra: BTreeSet<Option<String>> = a.iter().map(rate).collect();
        let rb: BTreeSet<Option<String>> = b.iter().map(rate).collect();
        ra != rb
    };
    let within_runs = !per_second
        && a.len() < SEVERAL_RUNS
        && b.len() < SEVERAL_RUNS
        && a.iter().chain(&b).all(|r| {
            r.figures
                .iter()
                .any(|f| f.per_second.len() >= WITHIN_RUN_SECONDS)
        });
    let by_name: BTreeMap<String, &Figure> = a
        .first()
        .map(|r| r.figures.iter().map(|f| (f.name.clone(), f)).collect())
        .unwrap_or_default();
    let mut figures: Vec<FigureComparison> = compare_runs(&figs(&a), &figs(&b), min_change_pct)
        .into_iter()
        .map(|(name, mut comparison)| {
            let f = by_name.get(&name);
            // Each run's own window for the figure (an experiment's phase on one side, the
            // plain workload's on the other).
            let disturbed: Vec<Disturbed> = a
                .iter()
                .chain(&b)
                .flat_map(|r| {
                    let phase = r
                        .figures
                        .iter()
                        .find(|f| f.name == name)
                        .and_then(|f| f.phase.clone());
                    r.windows
                        .iter()
                        .filter(move |w| phase.as_deref() == Some(w.phase.as_str()) && w.disturbed)
                        .map(|w| Disturbed {
                            file: r.file.clone(),
                            window: w.clone(),
                        })
                })
                .collect();
            // Withheld, unless the change is large against every disturbing share (a 76% drop
            // is not hidden by a 12% share of the device's bytes).
            let effect = if comparison.change_low_pct > 0.0 {
                comparison.change_low_pct
            } else if comparison.change_high_pct < 0.0 {
                -comparison.change_high_pct
            } else {
                0.0
            };
            let judged = matches!(comparison.verdict, Verdict::Better | Verdict::Worse);
            if !disturbed.is_empty()
                && !(judged && disturbed.iter().all(|d| d.window.effect_stands(effect)))
            {
                comparison.verdict = Verdict::Withheld;
            }
            // Throughput of runs whose loop or rate differ is not comparable.
            let loop_differs = rate_differs
                && f.is_some_and(|f| f.higher_is_better)
                && !matches!(comparison.verdict, Verdict::Withheld);
            if loop_differs {
                comparison.verdict = Verdict::NotComparable;
            }
            FigureComparison {
                higher_is_better: f.map(|f| f.higher_is_better).unwrap_or(true),
                name,
                comparison,
                disturbed,
            }
        })
        .collect();
    let tested = if per_second { holm(&mut figures) } else { 0 };
    Ok(CompareReport {
        what,
        tested_together: tested,
        baseline,
        candidate,
        min_change_pct,
        alpha: ALPHA,
        per_second,
        within_runs,
        one_run_floor_pct: super::floor_pct(min_change_pct, true, true),
        one_run_latency_floor_pct: super::floor_pct(min_change_pct, true, false),
        one_run_tail_floor_pct: super::floor_for(min_change_pct, true, false, true),
        differed: differed(&a, &b),
        timelines: timelines(
            &a,
            &b,
            &figures.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
        ),
        verdict: CompareVerdict::of(&figures),
        figures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_verdict_is_one_word_with_the_figures_behind_it() {
        let fig = |name: &str, v: Verdict| {
            let mut comparison = crate::compare::compare(&[1.0; 5], &[1.0; 5], true, 5.0);
            comparison.verdict = v;
            FigureComparison {
                name: name.into(),
                higher_is_better: true,
                comparison,
                disturbed: vec![],
            }
        };
        let v = CompareVerdict::of(&[
            fig("tps", Verdict::Worse),
            fig("p50", Verdict::Same),
            fig("p99.9", Verdict::TooFew),
        ]);
        assert_eq!(v.outcome, "worse");
        assert_eq!(v.worse, ["tps"]);
        assert_eq!((v.not_distinguishable, v.too_few), (1, 1));
        let v = CompareVerdict::of(&[fig("tps", Verdict::Worse), fig("p99", Verdict::Better)]);
        assert_eq!(v.outcome, "mixed");
        assert_eq!(
            CompareVerdict::of(&[fig("tps", Verdict::Same)]).outcome,
            "not_distinguishable"
        );
        let v = CompareVerdict::of(&[fig("tps", Verdict::Withheld), fig("p99", Verdict::TooFew)]);
        assert_eq!((v.outcome, v.withheld.len()), ("withheld", 1));
        assert_eq!(
            CompareVerdict::of(&[fig("tps", Verdict::TooFew)]).outcome,
            "too_few"
        );
    }

    /// A lab report with pgbench's seconds, a kernel, and its pgbench window's neighbour.
    fn lab(
        kernel: &str,
        tps: &[f64],
        neighbour_share: Option<f64>,
        throttled: Option<&[f64]>,
    ) -> Value {
        let mean = tps.iter().sum::<f64>() / tps.len() as f64;
        let interference = match neighbour_share {
            Some(s) => json!({"verdict": if s >= 0.10 {"disturbed"} else {"clean"}, "io_share": s,
                "neighbours": [{"pid": 4242, "comm": "fio"}]}),
            None => json!({"verdict": "clean", "io_share": 0.0, "neighbours": []}),
        };
        let mut experiments = vec![];
        if let Some(t) = throttled {
            experiments.push(json!({"name": "write throttle", "phase": "write throttle",
                "changed": {"tps": t.iter().sum::<f64>() / t.len() as f64, "tps_seconds": t,
                            "latency": {"p50_s": 0.002, "p99_s": 0.1}}}));
        }
        json!({
            "kind": "lab", "plumb_version": "0.1.0", "command_line": "plumb lab --quick --out x",
            "engine_version": "PostgreSQL 15.18",
            "host": {"host": {"kernel_release": kernel}, "cpu": {"online_cpus": 2}},
            "pgbench": {"tps": mean, "tps_seconds": tps, "latency": {"p50_s": 0.0013, "p99_s": 0.0035}},
            "windows": [{"phase": "pgbench", "interference": interference},
                        {"phase": "write throttle", "interference": {"verdict": "clean"}}],
            "experiments": experiments,
        })
    }

    fn steady(level: f64) -> Vec<f64> {
        (0..8).map(|i| level + (i % 3) as f64).collect()
    }

    #[test]
    fn two_labs_compare_pgbench_seconds_and_say_what_differed() {
        let a = vec![("a".to_string(), lab("6.1", &steady(2800.0), None, None))];
        let b = vec![("b".to_string(), lab("6.18", &steady(1800.0), None, None))];
        let r = compare_files(&a, &b, 5.0).unwrap();
        assert_eq!(r.what, "plumb lab");
        assert!(r.per_second);
        let tps = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Worse);
        assert_eq!(tps.comparison.baseline.n, 8);
        let k = r.differed.iter().find(|d| d.what == "kernel").unwrap();
        assert_eq!(
            (k.baseline.clone(), k.candidate.clone()),
            (vec!["6.1".to_string()], vec!["6.18".to_string()])
        );
        assert!(
            r.differed.iter().all(|d| d.what != "command line"),
            "the output directory is not a difference"
        );
    }

    #[test]
    fn a_disturbed_window_withholds_its_figures_and_names_the_neighbour() {
        let a = vec![("a".to_string(), lab("6.1", &steady(2800.0), None, None))];
        let b = vec![(
            "b".to_string(),
            lab("6.1", &steady(1800.0), Some(0.4), None),
        )];
        let r = compare_files(&a, &b, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Withheld);
        assert_eq!(r.worse(), 0);
        let d = &tps.disturbed[0];
        assert_eq!((d.file.as_str(), d.window.phase.as_str()), ("b", "pgbench"));
        assert_eq!(d.window.neighbour.as_deref(), Some("fio (PID 4242)"));
        // A neighbour below the share is noted in its window, not a reason to withhold.
        let c = vec![(
            "c".to_string(),
            lab("6.1", &steady(1800.0), Some(0.004), None),
        )];
        let r = compare_files(&a, &c, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Worse);
    }

    /// The effect-size rule: a neighbour's 12% of the device's bytes does not hide a 75% drop;
    /// its 40% does.
    #[test]
    fn a_large_change_stands_beside_a_small_share_and_not_beside_a_large_one() {
        let a = vec![("a".to_string(), lab("6.1", &steady(2800.0), None, None))];
        let small = vec![(
            "b".to_string(),
            lab("6.1", &steady(700.0), Some(0.12), None),
        )];
        let r = compare_files(&a, &small, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Worse, "{tps:?}");
        assert_eq!(tps.disturbed.len(), 1, "the disturbance is still said");
        let large = vec![("b".to_string(), lab("6.1", &steady(700.0), Some(0.4), None))];
        let r = compare_files(&a, &large, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Withheld);
    }

    fn load(rate: Option<f64>, tps: f64, seconds: usize) -> Value {
        let secs: Vec<Value> = (0..seconds)
            .map(|i| json!({"done": tps + (i % 3) as f64}))
            .collect();
        json!({
            "kind": "load", "workload": "tpcb", "engine": "postgres", "clients": 4,
            "rate_per_s": rate, "window_s": seconds as f64,
            "types": [{"name": "tpcb", "committed": tps * seconds as f64, "rolled_back": 0,
                       "latency": {"p50_s": 0.002, "p99_s": 0.01}}],
            "seconds": secs,
        })
    }

    /// A closed loop against an open loop at a rate: throughput is not comparable (it was
    /// called "WORSE: tps -48.7%"); two closed loops are.
    #[test]
    fn throughput_of_different_loops_is_not_comparable() {
        let closed = vec![("closed".to_string(), load(None, 2000.0, 30))];
        let open = vec![("open".to_string(), load(Some(1000.0), 1000.0, 30))];
        let r = compare_files(&closed, &open, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::NotComparable);
        assert_eq!(r.verdict.outcome, "not_comparable", "{:?}", r.verdict);
        assert_eq!(r.verdict.not_comparable, ["tps"]);
        let slower = vec![("slower".to_string(), load(None, 1000.0, 30))];
        let r = compare_files(&closed, &slower, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Worse);
    }

    /// Three short runs a side whose seconds do not overlap: worse, by the seconds inside the
    /// runs (over the three runs' values alone p can never fall below 0.05).
    #[test]
    fn three_short_runs_a_side_are_compared_over_their_seconds() {
        let side = |tps: f64, name: &str| -> Vec<(String, Value)> {
            (0..3)
                .map(|i| (format!("{name}{i}"), load(None, tps + i as f64 * 10.0, 4)))
                .collect()
        };
        let r = compare_files(&side(16000.0, "qd16-"), &side(4000.0, "qd1-"), 5.0).unwrap();
        assert!(r.within_runs && !r.per_second);
        let tps = r.figures.iter().find(|f| f.name == "tps").unwrap();
        assert_eq!(tps.comparison.verdict, Verdict::Worse, "{tps:?}");
        assert_eq!(
            tps.comparison.baseline.n, 6,
            "two whole seconds a run: {tps:?}"
        );
        // Runs that disagree among themselves as much as the sides do: not a verdict.
        let mixed: Vec<(String, Value)> = [4000.0, 16000.0, 9000.0]
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("m{i}"), load(None, *t, 4)))
            .collect();
        let r = compare_files(&side(9000.0, "a"), &mixed, 5.0).unwrap();
        let tps = r.figures.iter().find(|f| f.name == "tps").unwrap();
        assert_ne!(tps.comparison.verdict, Verdict::Worse, "{tps:?}");
        assert_ne!(tps.comparison.verdict, Verdict::Better, "{tps:?}");
    }

    #[test]
    fn an_experiment_on_one_side_is_compared_with_the_other_sides_plain_workload() {
        let a = vec![("a".to_string(), lab("6.1", &steady(2800.0), None, None))];
        let b = vec![(
            "b".to_string(),
            lab("6.1", &steady(2800.0), None, Some(&steady(120.0))),
        )];
        let r = compare_files(&a, &b, 5.0).unwrap();
        let plain = r.figures.iter().find(|f| f.name == "pgbench tps").unwrap();
        assert_eq!(plain.comparison.verdict, Verdict::Same);
        let t = r
            .figures
            .iter()
            .find(|f| f.name == "pgbench tps [write throttle]")
            .unwrap();
        assert_eq!(t.comparison.verdict, Verdict::Worse);
        let e = r.differed.iter().find(|d| d.what == "experiments").unwrap();
        assert_eq!(
            (e.baseline[0].as_str(), e.candidate[0].as_str()),
            ("none", "write throttle")
        );
    }

    fn comparison(p: f64, verdict: Verdict) -> FigureComparison {
        let mut c = compare(&[1.0; 5], &[1.0; 5], true, 5.0);
        c.p = p;
        c.verdict = verdict;
        FigureComparison {
            name: format!("p{p}"),
            higher_is_better: true,
            comparison: c,
            disturbed: Vec::new(),
        }
    }

    #[test]
    fn holm_keeps_a_clear_change_and_drops_one_that_many_tests_would_find_by_chance() {
        let mut f = vec![
            comparison(0.0001, Verdict::Worse),
            comparison(0.04, Verdict::Worse),
            comparison(0.5, Verdict::Same),
            comparison(0.9, Verdict::Same),
            comparison(0.01, Verdict::TooFew),
        ];
        assert_eq!(holm(&mut f), 4, "too few is not tested");
        assert_eq!(f[0].comparison.verdict, Verdict::Worse, "0.0001 < 0.05/4");
        assert_eq!(f[1].comparison.verdict, Verdict::Same, "0.04 ≥ 0.05/3");
        assert_eq!(f[4].comparison.verdict, Verdict::TooFew);
    }

    #[test]
    fn a_percentile_of_one_run_a_side_is_tested_over_its_tenths() {
        // The same histogram, but the candidate's tenths all slower: the tail is the run's.
        let h = LatencyHistogram::from_us(&(0..2000).map(|i| 1000 + i).collect::<Vec<_>>());
        let slow = LatencyHistogram::from_us(&(0..2000).map(|i| 5000 + 4 * i).collect::<Vec<_>>());
        let t_a: Vec<f64> = (0..10).map(|i| 1900.0 + i as f64).collect();
        let t_b: Vec<f64> = (0..10).map(|i| 12000.0 + i as f64).collect();
        let c = percentile_comparison(&h, &slow, 0.99, (&t_a, &t_b), 300.0).unwrap();
        assert_eq!(c.verdict, Verdict::Worse, "{c:?}");
        // The same change where one tenth carries the whole tail: not the run's.
        let mut burst = t_a.clone();
        burst[3] = 12000.0;
        let c = percentile_comparison(&h, &slow, 0.99, (&t_a, &burst), 300.0).unwrap();
        assert_eq!(c.verdict, Verdict::Same, "{c:?}");
        // No tenths: no test.
        let c = percentile_comparison(&h, &slow, 0.99, (&[], &[]), 300.0).unwrap();
        assert_eq!(c.verdict, Verdict::TooFew);
        // Beyond the test but inside the floor: not a verdict.
        let c = percentile_comparison(&h, &slow, 0.99, (&t_a, &t_b), 1000.0).unwrap();
        assert_eq!(c.verdict, Verdict::Same);
    }

    #[test]
    fn results_of_different_kinds_are_refused() {
        let a = vec![("a".to_string(), lab("6.1", &steady(2800.0), None, None))];
        let io = vec![(
            "io.json".to_string(),
            json!({"kind": "io", "job": {"name": "log-write"},
            "tables": {"total": [{"thread": null, "iops": 100.0, "bytes_per_s": 1e6}]}}),
        )];
        let e = compare_files(&a, &io, 5.0).unwrap_err();
        assert!(matches!(e, InputError::Workload { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("io.json: plumb io log-write, where a is plumb lab"),
            "{e}"
        );
        let odd = vec![("m.json".to_string(), json!({"kind": "mem"}))];
        let e = compare_files(&a, &odd, 5.0).unwrap_err();
        assert!(e.to_string().starts_with("m.json: a mem result"), "{e}");
        let empty = vec![("d.json".to_string(), json!({"kind": "delta"}))];
        let e = compare_files(&a, &empty, 5.0).unwrap_err();
        assert_eq!(e.to_string(), "d.json: not a plumb result (no modes)");
        let none = vec![("n.json".to_string(), json!({"x": 1}))];
        assert!(compare_files(&none, &a, 5.0).is_err());
    }

    /// A `plumb delta` result as it prints it (`--json`): modes, rows of stats per mode.
    fn delta(work_mem: &str, reads: &[f64], time_ms: &[f64]) -> Value {
        let stat = |v: &[f64]| {
            let mut s = v.to_vec();
            s.sort_by(f64::total_cmp);
            json!({"median": s[s.len() / 2], "min": s[0], "max": s[s.len() - 1], "values": v})
        };
        json!({"kind": "delta", "schema_version": 1, "plumb_version": "0.1.0",
        "target": "plumb's private PostgreSQL",
        "engine": {"engine": "PostgreSQL", "version": "15.18",
                   "settings": {"work_mem": work_mem, "shared_buffers": "128MB"}},
        "workload": "SELECT id FROM orders ORDER BY note",
        "repeat": reads.len(),
        "modes": [{"mode": "warm", "preparation": [], "runs": []}],
        "rows": [
            {"group": "statement", "object": "", "metric": "time", "unit": "ms",
             "stats": [stat(time_ms)]},
            {"group": "io", "object": "orders", "metric": "heap_blks_read", "unit": "blocks",
             "stats": [stat(reads)]},
            {"group": "waits", "object": "IO:DataFileRead", "metric": "count", "unit": "",
             "stats": [null]}
        ]})
    }

    #[test]
    fn delta_results_compare_figure_by_figure_and_say_which_setting_differed() {
        let a = vec![(
            "a.json".to_string(),
            delta(
                "4MB",
                &[100.0, 101.0, 99.0, 100.0, 102.0],
                &[40.0, 41.0, 39.0, 40.5, 40.2],
            ),
        )];
        // A quarter of the memory: the sort spills, three times the time; reads the same.
        let b = vec![(
            "b.json".to_string(),
            delta(
                "1MB",
                &[100.0, 99.0, 101.0, 100.0, 100.0],
                &[120.0, 123.0, 119.0, 121.0, 125.0],
            ),
        )];
        let r = compare_files(&a, &b, 5.0).unwrap();
        assert_eq!(r.what, "plumb delta");
        let fig = |n: &str| {
            r.figures
                .iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n} in {:?}", r.figures))
        };
        assert_eq!(
            fig("warm: statement time (ms)").comparison.verdict,
            Verdict::Worse
        );
        assert_eq!(
            fig("warm: io orders heap_blks_read (blocks)")
                .comparison
                .verdict,
            Verdict::Same
        );
        // A mode with no figure is not a figure.
        assert!(!r.figures.iter().any(|f| f.name.contains("DataFileRead")));
        let d: Vec<&str> = r.differed.iter().map(|d| d.what.as_str()).collect();
        assert_eq!(d, ["setting work_mem"], "{:?}", r.differed);
    }
}
