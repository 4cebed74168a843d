//! `plumb io durability`: per mode, what one durable write costs and what it asked of the
//! device, from repeated runs judged for interference, ending in statements for PostgreSQL and
//! SQL Server that call one mode faster than another only by plumb compare's rule.

use crate::compare::{Comparison as Judged, Samples, Verdict as CompareVerdict};
use crate::interference::{Interference, Verdict};
use crate::io::quantile_s;
use crate::os::StorageSection;
use crate::sweep::{spread, Spread};
use crate::{Level, Note, WithFacts};
use plumb_io::durability_probe::ModeRun;
use plumb_io::job::Durability;
use plumb_io::run::DirStats;
use plumb_sys::tracefs::{Attributed, RqCounts};
use serde::Serialize;
use std::path::PathBuf;

/// One run of one mode.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeRep {
    pub writes: u64,
    pub writes_per_s: f64,
    pub mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub max_s: Option<f64>,
    /// fdatasync/fsync calls made after the measured writes.
    pub sync_calls: u64,
    /// Requests the device received from everybody during the run (warm-up included).
    pub device: Option<RqCounts>,
    /// What the probe asked for in the same window: its own bios, and the journal commits its
    /// syncs waited for.
    pub probe: Option<Attributed>,
    /// Whether the run's window was disturbed, with the evidence (None: not observed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<Interference>,
    /// The mean write latency in each tenth of the measured window, in time order: the run's
    /// samples for plumb compare's rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenths_s: Vec<f64>,
}

impl ModeRep {
    pub fn of(m: &ModeRun, interference: Option<Interference>) -> ModeRep {
        let mut w = DirStats::empty(false);
        for x in &m.run.workers {
            w.merge(&x.write);
        }
        let secs = m.run.measured_s;
        ModeRep {
            writes: w.ios,
            writes_per_s: if secs > 0.0 { w.ios as f64 / secs } else { 0.0 },
            mean_s: (w.ios > 0).then(|| w.lat_sum_ns / w.ios as f64 / 1e9),
            p50_s: quantile_s(&w.lat, 0.5),
            p99_s: quantile_s(&w.lat, 0.99),
            max_s: quantile_s(&w.lat, 1.0),
            sync_calls: m.run.workers.iter().map(|x| x.syncs).sum(),
            device: m.trace.as_ref().map(|t| t.device.clone()),
            probe: m.trace.as_ref().and_then(|t| t.attributed.clone()),
            interference,
            tenths_s: w.tenths_mean_s(),
        }
    }

    pub fn is_clean(&self) -> bool {
        self.interference.as_ref().is_none_or(|i| i.is_clean())
    }
}

/// How a mode's durable writes reached stable storage, from the requests the probe asked for
/// per durable write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePath {
    /// Each write went as a FUA write and no FLUSH was asked for.
    Fua,
    /// Each write cost a cache FLUSH.
    Flush,
    /// Neither FLUSH nor FUA: the write is not durable past a volatile cache.
    Neither,
    /// Some writes one way, some another (a journal commit now and then, say).
    Mixed,
}

/// Requests per durable write further than this from 0 or 1 make the path "mixed": a stray
/// journal commit or a neighbour's flush must not turn a FUA path into a FLUSH path.
pub const PER_WRITE_TOLERANCE: f64 = 0.10;

/// The probe's requests per durable write in a mode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PerWrite {
    /// Durable writes in the traced windows (the probe's data written, over the block size).
    pub durable_writes: u64,
    pub flushes: f64,
    pub fua_writes: f64,
    /// Journal blocks written per durable write (the file system's share).
    pub journal_writes: f64,
    pub path: CachePath,
}

impl PerWrite {
    pub fn of(a: &Attributed, block_size: u32) -> Option<PerWrite> {
        let n = a.own.write_bytes / block_size.max(1) as u64;
        if n == 0 {
            return None;
        }
        let t = a.total();
        let per = |x: u64| x as f64 / n as f64;
        let (flushes, fua_writes) = (per(t.flushes), per(t.fua_writes));
        let near = |x: f64, v: f64| (x - v).abs() <= PER_WRITE_TOLERANCE;
        let path = if near(fua_writes, 1.0) && near(flushes, 0.0) {
            CachePath::Fua
        } else if flushes >= 1.0 - PER_WRITE_TOLERANCE {
            CachePath::Flush
        } else if near(flushes, 0.0) && near(fua_writes, 0.0) {
            CachePath::Neither
        } else {
            CachePath::Mixed
        };
        Some(PerWrite {
            durable_writes: n,
            flushes,
            fua_writes,
            journal_writes: per(a.journal.writes),
            path,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeRow {
    pub mode: Durability,
    pub block_size: u32,
    /// A completed write is on stable storage, given a device that honours FLUSH and FUA.
    pub durable: bool,
    /// Runs made, and how many of them were clean (the figures are theirs; when none was,
    /// every run's, and `verdict` says disturbed).
    pub runs: u32,
    pub clean_runs: u32,
    pub verdict: Verdict,
    /// Medians over the counted runs.
    pub writes_per_s: f64,
    pub mean_s: Option<f64>,
    pub p50_s: Option<f64>,
    pub p99_s: Option<f64>,
    pub max_s: Option<f64>,
    /// The mean latency over the counted runs: median, lowest, highest.
    pub mean_spread: Option<Spread>,
    /// Totals over the counted runs.
    pub writes: u64,
    pub sync_calls: u64,
    pub device: Option<RqCounts>,
    pub probe: Option<Attributed>,
    pub per_write: Option<PerWrite>,
    /// Every run, disturbed ones included (kept as evidence).
    pub reps: Vec<ModeRep>,
}

fn median(v: impl Iterator<Item = f64>) -> Option<f64> {
    spread(&v.collect::<Vec<_>>()).map(|s| s.median)
}

fn add_rq(a: &mut RqCounts, b: &RqCounts) {
    a.reads += b.reads;
    a.writes += b.writes;
    a.fua_writes += b.fua_writes;
    a.preflush_writes += b.preflush_writes;
    a.flushes += b.flushes;
    a.meta_writes += b.meta_writes;
    a.other += b.other;
    a.lost_events += b.lost_events;
}

fn add_attr(a: &mut Attributed, b: &Attributed) {
    for (x, y) in [(&mut a.own, &b.own), (&mut a.journal, &b.journal)] {
        x.writes += y.writes;
        x.write_bytes += y.write_bytes;
        x.fua_writes += y.fua_writes;
        x.flushes += y.flushes;
        x.reads += y.reads;
    }
    a.syncs += b.syncs;
    a.journal_followed |= b.journal_followed;
}

impl ModeRow {
    pub fn new(mode: Durability, block_size: u32, reps: Vec<ModeRep>) -> ModeRow {
        // A run in which no write completed within its window measured nothing (one write that
        // outlasted the window, the writer held off throughout): while another run wrote, its
        // figures (no latency, a FLUSH the device still received) are left out.
        let wrote: Vec<&ModeRep> = reps.iter().filter(|r| r.writes > 0).collect();
        let pool: Vec<&ModeRep> = if wrote.is_empty() {
            reps.iter().collect()
        } else {
            wrote
        };
        let clean: Vec<&ModeRep> = pool.iter().copied().filter(|r| r.is_clean()).collect();
        let counted: Vec<&ModeRep> = if clean.is_empty() {
            pool
        } else {
            clean.clone()
        };
        let med = |f: fn(&ModeRep) -> Option<f64>| median(counted.iter().filter_map(|r| f(r)));
        let device = counted.iter().filter_map(|r| r.device.as_ref()).fold(
            None,
            |acc: Option<RqCounts>, d| {
                let mut a = acc.unwrap_or_default();
                add_rq(&mut a, d);
                Some(a)
            },
        );
        let probe = counted.iter().filter_map(|r| r.probe.as_ref()).fold(
            None,
            |acc: Option<Attributed>, d| {
                let mut a = acc.unwrap_or_default();
                add_attr(&mut a, d);
                Some(a)
            },
        );
        ModeRow {
            mode,
            block_size,
            durable: mode.durable(),
            runs: reps.len() as u32,
            clean_runs: clean.len() as u32,
            verdict: if clean.is_empty() && !reps.is_empty() {
                Verdict::Disturbed
            } else {
                Verdict::Clean
            },
            writes_per_s: med(|r| Some(r.writes_per_s)).unwrap_or(0.0),
            mean_s: med(|r| r.mean_s),
            p50_s: med(|r| r.p50_s),
            p99_s: med(|r| r.p99_s),
            max_s: counted
                .iter()
                .filter_map(|r| r.max_s)
                .max_by(|a, b| a.total_cmp(b)),
            mean_spread: spread(&counted.iter().filter_map(|r| r.mean_s).collect::<Vec<_>>()),
            writes: counted.iter().map(|r| r.writes).sum(),
            sync_calls: counted.iter().map(|r| r.sync_calls).sum(),
            per_write: probe.as_ref().and_then(|p| PerWrite::of(p, block_size)),
            device,
            probe,
            reps,
        }
    }

    /// The tenths of the runs the row's figures are from (the clean ones; every run when none
    /// was clean).
    pub(crate) fn counted_tenths(&self) -> Vec<Vec<f64>> {
        let clean = self.clean_runs > 0;
        self.reps
            .iter()
            .filter(|r| !clean || r.is_clean())
            .map(|r| r.tenths_s.clone())
            .collect()
    }

    /// The mean latency's spread as ± a share of the median (half the range), when two or
    /// more clean runs measured it.
    pub fn plus_minus(&self) -> Option<f64> {
        (self.clean_runs >= 2)
            .then_some(self.mean_spread?)
            .map(|s| s.relative() / 2.0)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DurabilityReport {
    pub path: PathBuf,
    pub file: PathBuf,
    pub storage: Option<StorageSection>,
    /// Measured time of each run.
    pub per_mode_s: f64,
    /// Clean runs wanted per mode.
    pub repetitions: u32,
    /// Disturbed when a mode had no clean run.
    /// In JSON `disturbance`: the top-level `verdict` of `plumb io sweep` and `plumb io
    /// durability` is the object their output adds (`plumb_analyze::verdict`).
    #[serde(rename = "disturbance")]
    pub verdict: Verdict,
    pub rows: Vec<ModeRow>,
    /// Why there is no block-layer evidence, when there is none.
    pub trace_unavailable: Option<String>,
    /// Whether the journal commits the probe's syncs waited for were followed (ext4).
    pub journal_followed: bool,
    pub conclusions: Vec<Note>,
}

/// What the probe's rounds produced: every mode's runs, in report order.
pub struct Probed {
    pub file: PathBuf,
    pub repetitions: u32,
    pub modes: Vec<(Durability, u32, Vec<ModeRep>)>,
    pub trace_unavailable: Option<String>,
    pub journal_followed: bool,
}

/// The floor a change between two modes must clear when each has two or more clean runs: a
/// durable write 5% faster changes no setting (plumb compare's default `--min-change`).
pub const MIN_DIFFERENCE: f64 = 0.05;

/// The practical floor for two modes, in percent: plumb compare's default with two or more clean
/// runs each (the interval then carries how far the runs differ); with one run on either side,
/// its floor for latencies with one run a side (that run's luck cannot be seen).
pub fn floor_pct(a: &ModeRow, b: &ModeRow) -> f64 {
    crate::compare::floor_for(
        MIN_DIFFERENCE * 100.0,
        a.clean_runs < 2 || b.clean_runs < 2,
        false,
        false,
    )
}

/// plumb compare's rule between two modes: the Mann-Whitney U test over the mean write latency
/// of each tenth of each counted run, p < 0.05, and the change's bootstrap interval (whole runs
/// drawn, then their tenths) wholly beyond [`floor_pct`]. The faster of the two by mean is the
/// baseline, so the change reads as how much slower the other is and the floor means the same
/// whichever mode is faster.
pub struct Judgement<'r> {
    pub faster: &'r ModeRow,
    pub slower: &'r ModeRow,
    pub judged: Judged,
    pub floor_pct: f64,
}

impl Judgement<'_> {
    /// The faster mode beats the slower one by the rule.
    pub fn apart(&self) -> bool {
        self.judged.verdict == CompareVerdict::Worse
    }

    /// Whether `row` is the faster one by the rule.
    pub(crate) fn is_faster(&self, row: &ModeRow) -> bool {
        self.apart() && std::ptr::eq(self.faster, row)
    }

    /// A statement with the rule's figures: the slower mode, the p, the change's interval and
    /// the floor.
    fn on(&self, n: Note) -> Note {
        n.text("slower", self.slower.mode.to_string())
            .ratio("p", self.judged.p)
            .pct("change_low_pct", self.judged.change_low_pct)
            .pct("change_high_pct", self.judged.change_high_pct)
            .pct("floor_pct", self.floor_pct)
    }
}

pub fn judge<'r>(a: &'r ModeRow, b: &'r ModeRow) -> Judgement<'r> {
    let (faster, slower) = if b.mean_s.unwrap_or(f64::INFINITY) < a.mean_s.unwrap_or(f64::INFINITY)
    {
        (b, a)
    } else {
        (a, b)
    };
    let floor = floor_pct(a, b);
    Judgement {
        faster,
        slower,
        judged: crate::compare::compare_samples(
            Samples::Runs(&faster.counted_tenths()),
            Samples::Runs(&slower.counted_tenths()),
            false,
            floor,
        ),
        floor_pct: floor,
    }
}

/// Whether two modes differ by plumb compare's rule ([`judge`]).
pub fn distinguishable(a: &ModeRow, b: &ModeRow) -> bool {
    judge(a, b).apart()
}

fn row_of(rows: &[ModeRow], mode: Durability, bs: u32) -> Option<&ModeRow> {
    rows.iter().find(|r| r.mode == mode && r.block_size == bs)
}

/// tmpfs and ramfs keep files in memory only.
pub(crate) fn is_memory(s: &StorageSection) -> bool {
    matches!(s.fs_type.as_str(), "tmpfs" | "ramfs")
}

pub fn build(
    p: &Probed,
    path: PathBuf,
    storage: Option<StorageSection>,
    per_mode_s: f64,
) -> DurabilityReport {
    let memory = storage.as_ref().is_some_and(is_memory);
    let rows: Vec<ModeRow> = p
        .modes
        .iter()
        .map(|(mode, bs, reps)| ModeRow {
            durable: mode.durable() && !memory,
            ..ModeRow::new(*mode, *bs, reps.clone())
        })
        .collect();
    let conclusions = conclude(&rows, storage.as_ref(), p.trace_unavailable.as_deref());
    DurabilityReport {
        path,
        file: p.file.clone(),
        storage,
        per_mode_s,
        repetitions: p.repetitions,
        verdict: if rows.iter().any(|r| r.verdict == Verdict::Disturbed) {
            Verdict::Disturbed
        } else {
            Verdict::Clean
        },
        rows,
        trace_unavailable: p.trace_unavailable.clone(),
        journal_followed: p.journal_followed,
        conclusions,
    }
}

/// The plain statements that end the report.
pub(crate) fn conclude(
    rows: &[ModeRow],
    storage: Option<&StorageSection>,
    trace_unavailable: Option<&str>,
) -> Vec<Note> {
    let mut c = Vec::new();
    let queue = storage.and_then(|s| {
        s.disks
            .iter()
            .filter_map(|d| s.layers.iter().find(|l| &l.device.name == d))
            .find_map(|l| l.device.queue.clone().map(|q| (l.device.name.clone(), q)))
    });
    let volatile = queue
        .as_ref()
        .map(|(_, q)| q.write_cache.as_deref() != Some("write through"));
    let fua = queue.as_ref().and_then(|(_, q)| q.fua);
    if let Some((name, q)) = &queue {
        let mut n = Note::new(Level::Info, "device-cache").text("device", name.clone());
        if let Some(wc) = &q.write_cache {
            n = n.text("write_cache", wc.clone());
        }
        if let Some(fua) = q.fua {
            n = n.text("fua", if fua { "supported" } else { "not supported" });
        }
        c.push(n);
    }
    // A file system in memory: nothing is durable, and there is nothing to compare.
    if let Some(st) = storage.filter(|s| is_memory(s)) {
        c.push(
            Note::new(Level::Warn, "memory-file-system")
                .text("mount_point", st.mount_point.clone())
                .text("fs_type", st.fs_type.clone()),
        );
        return c;
    }
    if let Some(st) = storage.filter(|s| s.pmem) {
        let mut n = Note::new(Level::Info, "pmem").text("mount_point", st.mount_point.clone());
        if let Some(d) = &st.dax {
            n = n.text("dax", d.clone());
        }
        c.push(n);
    }
    durable_modes(&mut c, volatile, fua);
    disturbed(&mut c, rows);
    block_evidence(&mut c, rows, trace_unavailable);
    let bs = commit_block_size(rows);
    let durable_rows = fastest_durable(&mut c, rows, bs);
    wal_sync_method(&mut c, rows, bs);
    mssql_log_writes(&mut c, rows, bs, fua);
    durability_cost(&mut c, rows, bs, durable_rows.first().copied());
    c
}

/// Which modes are durable on this device.
fn durable_modes(c: &mut Vec<Note>, volatile: Option<bool>, fua: Option<bool>) {
    // Which modes are durable here.
    let durable: Vec<String> = plumb_io::durability_probe::modes()
        .into_iter()
        .filter(|m| m.durable() || (matches!(m, Durability::Direct) && volatile == Some(false)))
        .map(|m| m.to_string())
        .collect();
    let mut n = Note::new(Level::Info, "durable-modes").list("durable", durable);
    if fua == Some(true) {
        n = n.text("fua", "supported");
    }
    if volatile == Some(false) {
        n = n.text("write_cache", "write through");
    }
    c.push(n);
}

/// Disturbed runs: said before any figure is read.
fn disturbed(c: &mut Vec<Note>, rows: &[ModeRow]) {
    let retried: u32 = rows.iter().map(|r| r.runs - r.clean_runs).sum();
    let none_clean: Vec<Note> = rows
        .iter()
        .filter(|r| r.verdict == Verdict::Disturbed)
        .map(|r| {
            Note::new(Level::Info, "mode-at-size")
                .text("mode", r.mode.to_string())
                .bytes("block_size_bytes", r.block_size as f64)
        })
        .collect();
    if !none_clean.is_empty() {
        // Modes whose every run was held off by plumb itself (its cgroup's CPU quota, a stall
        // of its own): their evidence names no neighbour.
        let held_off = rows
            .iter()
            .filter(|r| r.verdict == Verdict::Disturbed)
            .filter(|r| {
                r.reps.iter().all(|x| {
                    x.interference
                        .as_ref()
                        .is_some_and(|i| i.own_share().is_some())
                })
            })
            .count();
        c.push(
            Note::new(Level::Warn, "modes-disturbed")
                .count("modes", none_clean.len() as f64)
                .count("held_off_modes", held_off as f64)
                .notes("which", none_clean),
        );
    } else if retried > 0 {
        c.push(Note::new(Level::Info, "runs-retried").count("disturbed_runs", retried as f64));
    }
}

/// Block-layer evidence for the FUA path and the flush path, per durable write.
fn block_evidence(c: &mut Vec<Note>, rows: &[ModeRow], trace_unavailable: Option<&str>) {
    match trace_unavailable {
        Some(why) => c.push(Note::new(Level::Info, "no-block-evidence").text("why", why)),
        None => {
            for (mode, label) in [
                (Durability::DirectDsync, "O_DIRECT|O_DSYNC"),
                (
                    Durability::Fdatasync {
                        every: 1,
                        direct: false,
                    },
                    "write + fdatasync()",
                ),
            ] {
                let Some(r) = rows.iter().find(|r| r.mode == mode) else {
                    continue;
                };
                let Some(pw) = r.per_write else { continue };
                let path = match pw.path {
                    CachePath::Fua => "fua",
                    CachePath::Flush => "flush",
                    CachePath::Neither => "neither",
                    CachePath::Mixed => "mixed",
                };
                let mut n = Note::new(Level::Info, "cache-path")
                    .text("label", label)
                    .text("path", path)
                    .ratio("flushes_per_write", pw.flushes)
                    .ratio("fua_per_write", pw.fua_writes)
                    .count("durable_writes", pw.durable_writes as f64);
                if let Some(d) = &r.device {
                    n = n
                        .count("device_flushes", (d.flushes + d.preflush_writes) as f64)
                        .count("device_fua_writes", d.fua_writes as f64);
                }
                c.push(n);
            }
        }
    }
}

/// The block size a commit is judged at: 8K where the probe ran it, else its first.
fn commit_block_size(rows: &[ModeRow]) -> u32 {
    if rows.iter().any(|r| r.block_size == 8192) {
        8192
    } else {
        rows.first().map_or(8192, |r| r.block_size)
    }
}

/// Fastest durable mode for a commit of `bs` bytes, and the modes that cannot be told from it;
/// the clean durable modes, fastest first.
fn fastest_durable<'a>(c: &mut Vec<Note>, rows: &'a [ModeRow], bs: u32) -> Vec<&'a ModeRow> {
    let mut durable_rows: Vec<&ModeRow> = rows
        .iter()
        .filter(|r| {
            r.block_size == bs && r.durable && r.mean_s.is_some() && r.verdict == Verdict::Clean
        })
        .collect();
    durable_rows.sort_by(|a, b| {
        a.mean_s
            .partial_cmp(&b.mean_s)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    // Durable modes with no clean run are not compared with those that have one (like for
    // like): named in the statement instead.
    let not_compared: Vec<String> = rows
        .iter()
        .filter(|r| r.block_size == bs && r.durable && r.verdict != Verdict::Clean)
        .map(|r| r.mode.to_string())
        .collect();
    if let Some(best) = durable_rows.first() {
        // The leading modes that cannot be told from the fastest; the rest in order after them.
        let lead = durable_rows[1..]
            .iter()
            .take_while(|r| !distinguishable(best, r))
            .count();
        let (tied, rest): (Vec<&&ModeRow>, Vec<&&ModeRow>) = (
            durable_rows[1..=lead].iter().collect(),
            durable_rows[lead + 1..].iter().collect(),
        );
        // A mode and its mean, with its spread where asked.
        let figure = |r: &ModeRow, spread: bool| {
            let n = Note::new(Level::Info, "mode-mean")
                .text("mode", r.mode.to_string())
                .secs("mean_s", r.mean_s.unwrap_or(0.0));
            match r.plus_minus().filter(|_| spread) {
                Some(pm) => n.pct("spread_pct", pm * 100.0),
                None => n,
            }
        };
        let then: Vec<Note> = rest.iter().map(|r| figure(r, false)).collect();
        if tied.is_empty() {
            let mut n = Note::new(Level::Info, "fastest-durable")
                .bytes("block_size_bytes", bs as f64)
                .text("mode", best.mode.to_string())
                .secs("mean_s", best.mean_s.unwrap_or(0.0))
                .count("clean_runs", best.clean_runs as f64)
                .per_s("writes_per_s", best.writes_per_s)
                .notes("then", then)
                .list("not_compared", not_compared.clone());
            if let Some(pm) = best.plus_minus() {
                n = n.pct("spread_pct", pm * 100.0);
            }
            if let Some(p99) = best.p99_s {
                n = n.secs("p99_s", p99);
            }
            // How it stands to the runner-up, by the rule.
            if let Some(next) = rest.first() {
                n = judge(best, next).on(n);
            }
            c.push(n);
        } else {
            let pm = std::iter::once(*best)
                .chain(tied.iter().map(|r| **r))
                .filter_map(|r| r.plus_minus())
                .fold(0.0f64, f64::max);
            let group: Vec<Note> = std::iter::once(*best)
                .chain(tied.iter().map(|r| **r))
                .map(|r| figure(r, true))
                .collect();
            let floor = tied
                .iter()
                .map(|r| floor_pct(best, r))
                .fold(0.0f64, f64::max);
            c.push(
                Note::new(Level::Info, "fastest-not-distinguishable")
                    .bytes("block_size_bytes", bs as f64)
                    .pct("spread_pct", pm * 100.0)
                    .pct("floor_pct", floor)
                    .count("modes", tied.len() as f64 + 1.0)
                    .notes("group", group)
                    .notes("then", then)
                    .list("not_compared", not_compared.clone()),
            );
        }
    }
    durable_rows
}

/// A row's figures where its runs were clean.
fn clean(r: Option<&ModeRow>) -> Option<&ModeRow> {
    r.filter(|r| r.verdict == Verdict::Clean && r.mean_s.is_some())
}

/// PostgreSQL wal_sync_method: fdatasync (default on Linux) vs open_datasync.
fn wal_sync_method(c: &mut Vec<Note>, rows: &[ModeRow], bs: u32) {
    let fds = clean(row_of(
        rows,
        Durability::Fdatasync {
            every: 1,
            direct: false,
        },
        bs,
    ));
    let ods = clean(row_of(rows, Durability::Dsync, bs));
    let odds = clean(row_of(rows, Durability::DirectDsync, bs)).and_then(|r| r.mean_s);
    if let (Some(a), Some(b)) = (fds, ods) {
        let (ma, mb) = (a.mean_s.unwrap_or(0.0), b.mean_s.unwrap_or(0.0));
        let judged = judge(a, b);
        let code = if judged.is_faster(b) {
            "wal-sync-open-datasync-faster"
        } else if judged.is_faster(a) {
            "wal-sync-fdatasync-faster"
        } else {
            "wal-sync-not-distinguishable"
        };
        let mut n = Note::new(Level::Info, code)
            .bytes("block_size_bytes", bs as f64)
            .secs("fdatasync_mean_s", ma)
            .secs("open_datasync_mean_s", mb);
        if let Some(d) = odds {
            n = n.secs("open_datasync_direct_mean_s", d);
        }
        c.push(judged.on(n));
    }
}

/// SQL Server: forced flush (O_DIRECT + fdatasync) vs the FUA path (O_DIRECT|O_DSYNC).
fn mssql_log_writes(c: &mut Vec<Note>, rows: &[ModeRow], bs: u32, fua: Option<bool>) {
    let lbs = if rows.iter().any(|r| r.block_size == 61440) {
        61440
    } else {
        bs
    };
    let ff = clean(row_of(
        rows,
        Durability::Fdatasync {
            every: 1,
            direct: true,
        },
        lbs,
    ));
    let fu = clean(row_of(rows, Durability::DirectDsync, lbs));
    if let (Some(a), Some(b)) = (ff, fu) {
        let (ma, mb) = (a.mean_s.unwrap_or(0.0), b.mean_s.unwrap_or(0.0));
        let judged = judge(a, b);
        let fua_word = match fua {
            Some(false) => "none",
            Some(true) if judged.is_faster(b) => "faster",
            Some(true) => "not-faster",
            None => "unknown",
        };
        let n = Note::new(Level::Info, "mssql-log-writes")
            .bytes("block_size_bytes", lbs as f64)
            .secs("forced_flush_mean_s", ma)
            .secs("fua_mean_s", mb)
            .text("fua", fua_word);
        c.push(if fua == Some(true) { judged.on(n) } else { n });
    }
}

/// What durability costs over a plain direct write.
fn durability_cost(c: &mut Vec<Note>, rows: &[ModeRow], bs: u32, best: Option<&ModeRow>) {
    if let (Some(d), Some(best)) = (clean(row_of(rows, Durability::Direct, bs)), best) {
        let (md, mb) = (d.mean_s.unwrap_or(0.0), best.mean_s.unwrap_or(0.0));
        let judged = judge(d, best);
        if judged.is_faster(d) {
            let n = Note::new(Level::Info, "durability-cost")
                .ratio("ratio", mb / md)
                .bytes("block_size_bytes", bs as f64)
                .secs("direct_mean_s", md)
                .secs("durable_mean_s", mb);
            c.push(judged.on(n));
        }
    }
}

/// Several directories (candidate log devices) probed side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub probes: Vec<DurabilityReport>,
    /// One statement per block size and mode compared, then what makes a candidate unfit.
    pub comparison: Vec<Note>,
}

/// The modes a log device is chosen by: PostgreSQL's default, and SQL Server's two log paths.
const COMPARED: [(&str, &str); 3] = [
    ("fdatasync", "write + fdatasync (PostgreSQL's default)"),
    (
        "direct-fdatasync",
        "O_DIRECT + fdatasync (SQL Server's forced flush)",
    ),
    ("direct-dsync", "O_DIRECT|O_DSYNC (the FUA path)"),
];

fn path_of(r: &DurabilityReport) -> String {
    r.path.display().to_string()
}

/// Compare the candidates mode by mode: fastest first, each next one either slower by plumb
/// compare's rule ([`judge`]) or not distinguishable from the one before it.
pub fn compare(reports: &[DurabilityReport]) -> Vec<Note> {
    let mut out = Vec::new();
    let mut sizes: Vec<u32> = reports
        .iter()
        .flat_map(|r| r.rows.iter().map(|x| x.block_size))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    for bs in sizes {
        for (name, label) in COMPARED {
            let Ok(mode) = Durability::parse(name) else {
                continue;
            };
            let mut v: Vec<(&DurabilityReport, &ModeRow)> = reports
                .iter()
                .filter_map(|r| {
                    row_of(&r.rows, mode, bs)
                        .filter(|x| x.verdict == Verdict::Clean && x.mean_s.is_some())
                        .map(|x| (r, x))
                })
                .collect();
            if v.len() < 2 {
                continue;
            }
            v.sort_by(|a, b| {
                a.1.mean_s
                    .partial_cmp(&b.1.mean_s)
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
            // Each candidate with its mean and spread, and how it stands to the one before.
            let cell = |(r, x): &(&DurabilityReport, &ModeRow)| {
                let n = Note::new(Level::Info, "candidate")
                    .text("path", path_of(r))
                    .secs("mean_s", x.mean_s.unwrap_or(0.0));
                match x.plus_minus() {
                    Some(pm) => n.pct("spread_pct", pm * 100.0),
                    None => n,
                }
            };
            let mut chain = vec![cell(&v[0])];
            let mut apart = 0;
            for w in v.windows(2) {
                chain.push(if distinguishable(w[0].1, w[1].1) {
                    apart += 1;
                    cell(&w[1]).ratio(
                        "slower_than_previous",
                        w[1].1.mean_s.unwrap_or(0.0) / w[0].1.mean_s.unwrap_or(1.0),
                    )
                } else {
                    cell(&w[1]).text("previous", "not distinguishable")
                });
            }
            let (fast, slow) = (
                v[0].1.mean_s.unwrap_or(0.0),
                v[v.len() - 1].1.mean_s.unwrap_or(0.0),
            );
            out.push(
                Note::new(
                    Level::Info,
                    if apart > 0 {
                        "candidates-compared"
                    } else {
                        "candidates-not-distinguishable"
                    },
                )
                .text("label", label)
                .count("block_size", bs as f64)
                .secs("fastest_mean_s", fast)
                .secs("slowest_mean_s", slow)
                .notes("candidates", chain),
            );
        }
    }
    for r in reports {
        let Some(st) = &r.storage else { continue };
        if is_memory(st) {
            out.push(
                Note::new(Level::Warn, "candidate-not-durable")
                    .text("path", path_of(r))
                    .text("fs_type", st.fs_type.clone()),
            );
        }
        if st.pmem {
            let mut n = Note::new(Level::Info, "candidate-pmem").text("path", path_of(r));
            if let Some(d) = &st.dax {
                n = n.text("dax", d.clone());
            }
            out.push(n);
        }
        if r.verdict == Verdict::Disturbed {
            out.push(Note::new(Level::Warn, "candidate-disturbed").text("path", path_of(r)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interference::Interference;
    use plumb_sys::tracefs::BioCounts;

    fn rep(mean_us: f64, probe: Option<Attributed>, disturbed: bool) -> ModeRep {
        ModeRep {
            writes: 1000,
            writes_per_s: 1e6 / mean_us,
            mean_s: Some(mean_us / 1e6),
            p50_s: Some(mean_us / 1e6),
            p99_s: Some(mean_us * 3.0 / 1e6),
            max_s: None,
            sync_calls: 0,
            device: None,
            probe,
            interference: disturbed.then(|| Interference {
                accepted: vec![],
                verdict: Verdict::Disturbed,
                window_s: 1.0,
                devices: vec!["loop0".into()],
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
            }),
            tenths_s: tenths(mean_us),
        }
    }

    /// Ten tenths around a mean, ±2% in a fixed order.
    fn tenths(mean_us: f64) -> Vec<f64> {
        (0..10)
            .map(|i| mean_us / 1e6 * (1.0 + 0.02 * ((i * 7 % 10) as f64 - 4.5) / 4.5))
            .collect()
    }

    fn row(mode: &str, bs: u32, means_us: &[f64], probe: Option<Attributed>) -> ModeRow {
        let reps = means_us
            .iter()
            .map(|m| rep(*m, probe.clone(), false))
            .collect();
        ModeRow::new(Durability::parse(mode).unwrap(), bs, reps)
    }

    /// `n` durable 8 KiB writes with the given requests, own and journal.
    fn asked(n: u64, flushes: u64, fua: u64, journal_flushes: u64, journal_fua: u64) -> Attributed {
        Attributed {
            own: BioCounts {
                writes: n,
                write_bytes: n * 8192,
                fua_writes: fua,
                flushes,
                reads: 0,
            },
            journal: BioCounts {
                writes: journal_fua,
                write_bytes: journal_fua * 4096,
                fua_writes: journal_fua,
                flushes: journal_flushes,
                reads: 0,
            },
            syncs: n,
            journal_followed: true,
        }
    }

    fn codes(c: &[Note]) -> Vec<&'static str> {
        c.iter().map(|n| n.code).collect()
    }

    /// A run in which no write completed (one write outlasted its window) counts as run, but
    /// none of its figures: the rate, the means and the FLUSH per write are the runs' that wrote.
    #[test]
    fn a_run_that_completed_no_write_lends_the_row_no_figure() {
        let flushy = asked(1000, 1000, 0, 0, 0);
        let mut empty = rep(100.0, Some(asked(0, 1, 0, 0, 0)), false);
        empty.writes = 0;
        empty.writes_per_s = 0.0;
        empty.mean_s = None;
        empty.p50_s = None;
        empty.p99_s = None;
        empty.tenths_s = vec![];
        let reps = vec![
            empty,
            rep(100.0, Some(flushy.clone()), false),
            rep(104.0, Some(flushy), false),
        ];
        let r = ModeRow::new(Durability::parse("fdatasync").unwrap(), 8192, reps);
        assert_eq!((r.runs, r.clean_runs), (3, 2));
        assert_eq!(r.writes, 2000);
        assert!(
            (r.writes_per_s - (1e4 + 1e6 / 104.0) / 2.0).abs() < 1e-6,
            "{}",
            r.writes_per_s
        );
        assert_eq!(r.per_write.as_ref().map(|p| p.flushes), Some(1.0));
        assert_eq!(r.verdict, Verdict::Clean);
    }

    #[test]
    fn statements_follow_the_numbers_beyond_the_spread() {
        let flushy = asked(1000, 1000, 0, 0, 0);
        let rows = vec![
            row("fdatasync", 8192, &[118.0, 120.0], Some(flushy.clone())),
            row("dsync", 8192, &[151.0, 149.0], None),
            row("direct-dsync", 8192, &[140.0, 141.0], Some(flushy.clone())),
            row("direct", 8192, &[39.0, 40.0], None),
            row("direct-fdatasync", 61440, &[200.0, 199.0], None),
            row("direct-dsync", 61440, &[196.0, 197.0], None),
        ];
        let c = conclude(&rows, None, None);
        let of = |code: &str| c.iter().find(|n| n.code == code).map(|n| &n.facts);
        let fastest = of("fastest-durable").expect("fastest-durable");
        assert_eq!(fastest.text("mode"), "fdatasync");
        assert!((fastest.num("mean_s") - 119e-6).abs() < 1e-9, "{fastest:?}");
        assert_eq!(fastest.num("spread_pct").round(), 1.0);
        assert_eq!(fastest.num("clean_runs"), 2.0);
        assert_eq!(fastest.num("block_size_bytes"), 8192.0);
        // Ahead of the runner-up by the rule, with its figures.
        assert_eq!(fastest.text("slower"), "direct-dsync");
        assert!(fastest.num("p") < 0.05 && fastest.num("change_low_pct") > 5.0);
        let wal = of("wal-sync-fdatasync-faster").expect("fdatasync faster by the rule");
        assert_eq!(wal.num("floor_pct"), 5.0);
        assert!(wal.num("change_low_pct") > 20.0, "{wal:?}");
        let path = c
            .iter()
            .find(|n| n.code == "cache-path" && n.facts.text("label") == "write + fdatasync()")
            .expect("fdatasync's cache path");
        assert_eq!(path.facts.text("path"), "flush");
        assert_eq!(
            (
                path.facts.num("flushes_per_write"),
                path.facts.num("fua_per_write")
            ),
            (1.0, 0.0)
        );
        assert_eq!(of("durability-cost").unwrap().num("ratio").round(), 3.0);
        assert_eq!(
            of("mssql-log-writes").unwrap().num("block_size_bytes"),
            61440.0
        );
        let c = conclude(&rows, None, Some("block-layer tracing needs root"));
        assert!(c.iter().any(|l| l.code == "no-block-evidence"
            && l.facts.text("why") == "block-layer tracing needs root"));
    }

    /// fsync's one clean run at 71 µs beside modes of 300-435 µs with no clean run: not "the
    /// fastest" of anything; the others are named as not compared, in the statement and in the
    /// verdict's figures.
    #[test]
    fn a_clean_mode_is_never_compared_with_modes_that_had_no_clean_run() {
        let unclean = |mode: &str, us: f64| {
            let reps = (0..3).map(|_| rep(us, None, true)).collect();
            ModeRow::new(Durability::parse(mode).unwrap(), 8192, reps)
        };
        let rows = vec![
            row("fsync", 8192, &[71.0], None),
            unclean("fdatasync", 300.0),
            unclean("dsync", 435.0),
        ];
        let c = conclude(&rows, None, None);
        let f = &c
            .iter()
            .find(|n| n.code == "fastest-durable")
            .expect("fastest-durable")
            .facts;
        assert_eq!(f.text("mode"), "fsync");
        assert_eq!(f.list("not_compared"), ["fdatasync", "dsync"]);
        assert!(f.notes("then").is_empty() && !f.has("slower"), "{f:?}");
        let mut d = report("/d", &[]);
        d.rows = rows;
        let h = crate::verdict::durable_writes(&d);
        let codes: Vec<(&str, &str)> = h.iter().map(|h| (h.code, h.of.as_str())).collect();
        assert_eq!(
            codes,
            [
                ("durable_write_mean", "fsync 8K"),
                ("durable_write_unclean", "fdatasync 8K"),
                ("durable_write_unclean", "dsync 8K")
            ]
        );
    }

    #[test]
    fn overlapping_runs_are_not_called_a_winner() {
        // fdatasync 106 and 117 µs, direct-dsync 108 and 112 µs: the ranges overlap.
        let rows = vec![
            row("fdatasync", 8192, &[106.0, 117.0], None),
            row("direct-dsync", 8192, &[108.0, 112.0], None),
            row("dsync", 8192, &[109.0, 113.0], None),
            row("fsync", 8192, &[300.0, 310.0], None),
        ];
        let c = conclude(&rows, None, None);
        let codes = codes(&c);
        assert!(codes.contains(&"fastest-not-distinguishable"), "{codes:?}");
        assert!(!codes.contains(&"fastest-durable"));
        assert!(codes.contains(&"wal-sync-not-distinguishable"));
        let n = c
            .iter()
            .find(|n| n.code == "fastest-not-distinguishable")
            .unwrap();
        let then = n.facts.notes("then");
        assert_eq!(then[0].facts.text("mode"), "fsync");
        assert!((then[0].facts.num("mean_s") - 305e-6).abs() < 1e-9);
        let fd = n
            .facts
            .notes("group")
            .iter()
            .find(|g| g.facts.text("mode") == "fdatasync");
        let fd = &fd.expect("fdatasync in the group").facts;
        assert!((fd.num("mean_s") - 111.5e-6).abs() < 1e-9, "{fd:?}");
        assert_eq!(fd.num("spread_pct").round(), 5.0);

        // Two runs each that happen to agree closely, 4% apart: tight ranges that do not
        // overlap, but a difference too small to call.
        let a = row("fsync", 8192, &[110.0, 110.2], None);
        let b = row("dsync", 8192, &[114.0, 114.5], None);
        assert!(!distinguishable(&a, &b));
        let b = row("dsync", 8192, &[130.0, 131.0], None);
        assert!(distinguishable(&a, &b));
        // One run each: only a difference past plumb compare's floor for one run a side (50%)
        // counts, however clear the test.
        let (a, b) = (
            row("fsync", 8192, &[100.0], None),
            row("dsync", 8192, &[130.0], None),
        );
        let j = judge(&a, &b).judged;
        assert!(j.p < 0.001, "{j:?}");
        assert!(!distinguishable(&a, &b));
        assert_eq!(floor_pct(&a, &b), 50.0);
        let b = row("dsync", 8192, &[200.0], None);
        assert!(distinguishable(&a, &b));
        // Runs that disagree with each other: each run's tenths are tight and the test over
        // all tenths is sure, but drawing whole runs shows the change may be small or none.
        let a = row("fsync", 8192, &[100.0, 140.0], None);
        let b = row("dsync", 8192, &[120.0, 125.0], None);
        let j = judge(&a, &b).judged;
        assert!(j.change_low_pct < 5.0, "{j:?}");
        assert!(!distinguishable(&a, &b));
    }

    #[test]
    fn a_disturbed_run_is_left_out_and_a_mode_without_clean_runs_compares_nothing() {
        let mode = Durability::parse("fdatasync").unwrap();
        let r = ModeRow::new(
            mode,
            8192,
            vec![
                rep(100.0, None, false),
                rep(900.0, None, true),
                rep(102.0, None, false),
            ],
        );
        assert_eq!((r.runs, r.clean_runs, r.verdict), (3, 2, Verdict::Clean));
        assert!((r.mean_s.unwrap() - 101e-6).abs() < 1e-9, "{:?}", r.mean_s);
        let d = ModeRow::new(
            Durability::parse("dsync").unwrap(),
            8192,
            vec![rep(50.0, None, true), rep(60.0, None, true)],
        );
        assert_eq!(d.verdict, Verdict::Disturbed);
        let c = conclude(&[r, d], None, None);
        assert!(codes(&c).contains(&"modes-disturbed"), "{:?}", codes(&c));
        // dsync measured 50 µs while disturbed: it is not called faster.
        assert!(!c.iter().any(|n| n.code.starts_with("wal-sync")));
        let f = &c
            .iter()
            .find(|n| n.code == "fastest-durable")
            .unwrap()
            .facts;
        assert_eq!(f.text("mode"), "fdatasync");
        assert!((f.num("mean_s") - 101e-6).abs() < 1e-9, "{f:?}");
    }

    #[test]
    fn the_fua_verdict_is_a_ratio_that_stray_flushes_do_not_flip() {
        // A FUA device: 1,000 FUA writes, and 12 flushes from journal commits that happened
        // while the probe synced (1.2%): still the FUA path.
        let pw = PerWrite::of(&asked(1000, 0, 1000, 12, 0), 8192).unwrap();
        assert_eq!(pw.path, CachePath::Fua, "{pw:?}");
        // The flush path with a few extra journal commits: still one FLUSH per write.
        let pw = PerWrite::of(&asked(1000, 1000, 0, 40, 40), 8192).unwrap();
        assert_eq!(pw.path, CachePath::Flush);
        assert!((pw.flushes - 1.04).abs() < 1e-9);
        // No sync: neither, even with a stray journal flush.
        let pw = PerWrite::of(&asked(4000, 0, 0, 3, 3), 8192).unwrap();
        assert_eq!(pw.path, CachePath::Neither);
        // Half the writes flushed: mixed, never rounded to either side.
        let pw = PerWrite::of(&asked(1000, 500, 0, 0, 0), 8192).unwrap();
        assert_eq!(pw.path, CachePath::Mixed);
        // No data written: no ratio at all.
        assert!(PerWrite::of(&asked(0, 0, 0, 0, 0), 8192).is_none());

        // In the statements: the FUA path named, with the device's total beside it.
        let mut r = row(
            "direct-dsync",
            8192,
            &[90.0, 91.0],
            Some(asked(500, 0, 500, 5, 0)),
        );
        r.device = Some(RqCounts {
            writes: 9000,
            fua_writes: 500,
            flushes: 3600,
            ..Default::default()
        });
        let c = conclude(&[r], None, None);
        let p = &c.iter().find(|n| n.code == "cache-path").unwrap().facts;
        assert_eq!(p.text("path"), "fua");
        assert_eq!(
            (p.num("fua_per_write"), p.num("durable_writes")),
            (1.0, 1000.0)
        );
        assert!((p.num("flushes_per_write") - 0.01).abs() < 1e-9, "{p:?}");
        assert_eq!(p.num("device_flushes"), 3600.0);
    }

    fn report(path: &str, means: &[(&str, &[f64])]) -> DurabilityReport {
        let rows = means
            .iter()
            .map(|(m, v)| row(m, 8192, v, None))
            .collect::<Vec<_>>();
        DurabilityReport {
            path: path.into(),
            file: format!("{path}/f").into(),
            storage: None,
            per_mode_s: 1.0,
            repetitions: 2,
            verdict: Verdict::Clean,
            rows,
            trace_unavailable: None,
            journal_followed: false,
            conclusions: vec![],
        }
    }

    /// A disturbed run replaced by a clean one of its mode is listed but does not make the
    /// verdict disturbed; a mode with no clean run does.
    #[test]
    fn the_verdict_grades_the_runs_the_figures_come_from() {
        let mut d = report("/d", &[]);
        d.rows = vec![ModeRow::new(
            Durability::parse("fdatasync").unwrap(),
            8192,
            vec![rep(300.0, None, true), rep(100.0, None, false)],
        )];
        let v = crate::verdict::durability(&d);
        assert_eq!(v.windows.len(), 2);
        assert_eq!(v.disturbed_windows, 0);
        assert_ne!(v.trust, crate::verdict::Trust::Disturbed, "{v:?}");
        assert!(v.windows.iter().any(|w| w.phase.contains("not used")));
        d.rows.push(ModeRow::new(
            Durability::parse("dsync").unwrap(),
            8192,
            vec![rep(50.0, None, true)],
        ));
        let v = crate::verdict::durability(&d);
        assert_eq!(
            (v.trust, v.disturbed_windows),
            (crate::verdict::Trust::Disturbed, 1)
        );
    }

    #[test]
    fn candidates_are_ranked_only_beyond_their_spread() {
        let a = report(
            "/wal-a",
            &[
                ("fdatasync", &[110.0, 112.0]),
                ("direct-dsync", &[100.0, 104.0]),
            ],
        );
        let b = report(
            "/wal-b",
            &[
                ("fdatasync", &[450.0, 460.0]),
                ("direct-dsync", &[101.0, 103.0]),
            ],
        );
        let c = compare(&[b, a]);
        let fd = c
            .iter()
            .find(|n| n.facts.text("label").starts_with("write + fdatasync"))
            .unwrap();
        assert_eq!(fd.code, "candidates-compared");
        let v = fd.facts.notes("candidates");
        assert_eq!(
            (v[0].facts.text("path"), v[1].facts.text("path")),
            ("/wal-a", "/wal-b")
        );
        assert_eq!(
            (v[1].facts.num("slower_than_previous") * 10.0).round(),
            41.0
        );
        let fua = c
            .iter()
            .find(|n| n.facts.text("label").contains("FUA path"))
            .unwrap();
        assert_eq!(fua.code, "candidates-not-distinguishable", "{fua:?}");
        assert!(fua.facts.notes("candidates")[1].facts.has("previous"));
    }
}
