//! `plumb lab`: the results of one end-to-end run, the figures drawn from its recording for each
//! phase, and the findings: plain statements with their evidence and severity.

use crate::durability_probe::DurabilityReport;
use crate::mem::Assumption;
use crate::os::OsReport;
use crate::sweep::SweepReport;
use plumb_store::Recording;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Version of report.json's shape; docs/lab-report.schema.json pins it.
pub const REPORT_SCHEMA: u32 = 2;

pub use crate::said::{Disturbed, Evidence, Finding, Severity};

/// Latencies (or durations) summarised; percentiles only where the count supports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
/// In milliseconds here, in seconds in JSON (`mean_s`…).
pub struct Latency {
    pub count: u64,
    #[serde(rename = "mean_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub mean_ms: f64,
    #[serde(rename = "p50_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub p50_ms: f64,
    /// p95 needs 20 values, p99 100: fewer, and the figure would be the maximum in disguise.
    #[serde(rename = "p95_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub p95_ms: Option<f64>,
    #[serde(rename = "p99_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub p99_ms: Option<f64>,
    #[serde(rename = "max_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub max_ms: f64,
    /// The smallest value (None in reports written before it was kept).
    #[serde(rename = "min_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub min_ms: Option<f64>,
    /// Every value, in 2%-wide buckets (`[µs, count]`), for `plumb compare`'s bootstrap.
    #[serde(skip_serializing_if = "crate::histogram::LatencyHistogram::is_empty")]
    pub histogram_us: crate::histogram::LatencyHistogram,
    /// The values in the order measured, cut in ten: each tenth's p50 and p99 (µs; p99 where
    /// the tenth has 100 values): `plumb compare`'s samples inside one run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenths_us: Vec<(u64, Option<u64>)>,
}

/// Ten consecutive parts of `v` (in its order): each part's p50 and p99 (nearest rank; p99
/// only with 100 values in the part). Empty under 20 values.
fn tenths(v: &[u64]) -> Vec<(u64, Option<u64>)> {
    if v.len() < 20 {
        return Vec::new();
    }
    (0..10)
        .map(|k| {
            let mut part = v[k * v.len() / 10..(k + 1) * v.len() / 10].to_vec();
            part.sort_unstable();
            let n = part.len();
            let q = |p: f64| part[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
            (q(0.5), (n >= 100).then(|| q(0.99)))
        })
        .collect()
}

impl Latency {
    /// From durations in microseconds, in the order measured; `None` when there are none.
    pub fn from_us(v: &[u64]) -> Option<Latency> {
        if v.is_empty() {
            return None;
        }
        let mut s = v.to_vec();
        s.sort_unstable();
        let n = s.len();
        // Nearest rank.
        let q = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1] as f64 / 1000.0;
        Some(Latency {
            count: n as u64,
            mean_ms: s.iter().map(|&x| x as f64).sum::<f64>() / n as f64 / 1000.0,
            p50_ms: q(0.50),
            p95_ms: (n >= 20).then(|| q(0.95)),
            p99_ms: (n >= 100).then(|| q(0.99)),
            max_ms: s[n - 1] as f64 / 1000.0,
            min_ms: Some(s[0] as f64 / 1000.0),
            histogram_us: crate::histogram::LatencyHistogram::from_us(&s),
            tenths_us: tenths(v),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pgbench {
    /// `--workload FILE`: the user's pgbench script that ran instead of the TPC-B-like
    /// transaction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
    pub scale: u32,
    pub clients: u32,
    pub threads: u32,
    pub duration_s: f64,
    pub init_s: f64,
    pub database_bytes: Option<u64>,
    pub transactions: u64,
    pub failed: u64,
    pub tps: f64,
    /// Transactions per second over the run's whole seconds, 10th and 90th percentiles (from
    /// the transaction log): the run's own spread, against which a change is judged.
    pub tps_p10: Option<f64>,
    pub tps_p90: Option<f64>,
    /// Transactions in each whole second of the run, in order (the first and last seconds,
    /// which the run may cut, left out): `plumb compare`'s samples for one run a side.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tps_seconds: Vec<f64>,
    /// Per transaction, from pgbench's transaction log.
    pub latency: Option<Latency>,
    pub wal_sync_method: String,
    /// What the server counted of its own I/O over the run (PostgreSQL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_io: Option<ServerIo>,
}

impl Pgbench {
    /// A run of plumb's driver in pgbench's shape, for the experiments' comparisons: its
    /// transactions and tps, the first type's latency, and the spread of its seconds.
    pub fn from_load(r: &crate::load::LoadReport, wal_sync_method: String) -> Pgbench {
        let done: u64 = r.types.iter().map(|t| t.committed + t.rolled_back).sum();
        let failed: u64 = r.types.iter().map(|t| t.failures()).sum();
        let latency = r.types.first().and_then(|t| {
            let p = &t.latency;
            Some(Latency {
                count: p.count,
                mean_ms: p.mean_s? * 1000.0,
                p50_ms: p.p50_s? * 1000.0,
                p95_ms: p.p95_s.map(|v| v * 1000.0),
                p99_ms: p.p99_s.map(|v| v * 1000.0),
                max_ms: p.max_s? * 1000.0,
                min_ms: p.min_s.map(|v| v * 1000.0),
                histogram_us: p.histogram_us.clone(),
                tenths_us: Vec::new(),
            })
        });
        // The whole seconds inside the window.
        let in_order: Vec<f64> = r.seconds.iter().map(|s| s.done as f64).collect();
        let mut per_s = in_order.clone();
        per_s.sort_by(f64::total_cmp);
        let q = |p: f64| {
            (!per_s.is_empty()).then(|| per_s[((per_s.len() - 1) as f64 * p).round() as usize])
        };
        Pgbench {
            script: None,
            scale: r.scale,
            clients: r.clients,
            threads: r.clients,
            duration_s: r.window_s,
            init_s: r.load_s.unwrap_or(0.0),
            database_bytes: None,
            transactions: done,
            failed,
            tps: r.tps().unwrap_or(0.0),
            tps_p10: q(0.1),
            tps_p90: q(0.9),
            tps_seconds: if in_order.len() > 2 {
                in_order[1..in_order.len() - 1].to_vec()
            } else {
                Vec::new()
            },
            latency,
            wal_sync_method,
            server_io: None,
        }
    }
}

/// What PostgreSQL counted of its own I/O over a workload: pg_stat_io (16+) by backend type,
/// object and context, and the checkpoints (pg_stat_checkpointer from 17, pg_stat_bgwriter
/// before).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerIo {
    /// The server's major version: which views it has.
    pub pg_major: u32,
    /// pg_stat_io rows with any I/O over the workload, the most I/O first (none before 16).
    pub io: Vec<IoRow>,
    /// track_io_timing was on: relation I/O times were measured (else they read zero).
    pub io_timing: bool,
    pub checkpoints: Option<CheckpointFigures>,
}

/// One pg_stat_io row's change over a workload. Times need track_io_timing (relation I/O)
/// or track_wal_io_timing (18's WAL rows); bytes are 18's own counts, or operations times
/// op_bytes before.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IoRow {
    pub backend_type: String,
    pub object: String,
    pub context: String,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub reads: f64,
    #[serde(rename = "read_time_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub read_time_ms: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub read_bytes: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub writes: f64,
    #[serde(rename = "write_time_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub write_time_ms: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub write_bytes: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub extends: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub extend_bytes: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub fsyncs: f64,
    #[serde(rename = "fsync_time_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub fsync_time_ms: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub hits: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub evictions: f64,
}

impl IoRow {
    /// Operations that reached the kernel: reads, writes, extends and fsyncs.
    pub fn operations(&self) -> f64 {
        self.reads + self.writes + self.extends + self.fsyncs
    }
}

/// Checkpoints over a workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CheckpointFigures {
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub timed: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub requested: f64,
    #[serde(serialize_with = "plumb_sys::json::whole")]
    pub buffers_written: f64,
    #[serde(rename = "write_time_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub write_time_ms: f64,
    #[serde(rename = "sync_time_s", serialize_with = "plumb_sys::json::ms_as_s")]
    pub sync_time_ms: f64,
}

/// The change of an engine snapshot's pg_stat_io rows and checkpoint counters between
/// `before` and `after` (counters that went backwards, a reset or a restart, count as none).
pub fn server_io(
    pg_major: u32,
    before: &plumb_engine::Snapshot,
    after: &plumb_engine::Snapshot,
) -> ServerIo {
    let none = Default::default();
    let (io_before, io_after) = (
        before.objects.get("io").unwrap_or(&none),
        after.objects.get("io").unwrap_or(&none),
    );
    let d = |a: Option<&f64>, b: Option<&f64>| match (a, b) {
        (Some(a), Some(b)) if b >= a => b - a,
        (None, Some(b)) => *b,
        _ => 0.0,
    };
    let mut io = Vec::new();
    for (key, now) in io_after {
        let was = io_before.get(key);
        let f = |n: &str| d(was.and_then(|w| w.get(n)), now.get(n));
        let mut parts = key.splitn(3, '/');
        let row = IoRow {
            backend_type: parts.next().unwrap_or_default().to_string(),
            object: parts.next().unwrap_or_default().to_string(),
            context: parts.next().unwrap_or_default().to_string(),
            reads: f("reads"),
            read_time_ms: f("read_time_ms"),
            read_bytes: f("read_bytes"),
            writes: f("writes"),
            write_time_ms: f("write_time_ms"),
            write_bytes: f("write_bytes"),
            extends: f("extends"),
            extend_bytes: f("extend_bytes"),
            fsyncs: f("fsyncs"),
            fsync_time_ms: f("fsync_time_ms"),
            hits: f("hits"),
            evictions: f("evictions"),
        };
        if row.operations() + row.hits + row.evictions > 0.0 {
            io.push(row);
        }
    }
    io.sort_by(|a, b| {
        (
            b.read_bytes + b.write_bytes + b.extend_bytes,
            b.operations(),
        )
            .partial_cmp(&(
                a.read_bytes + a.write_bytes + a.extend_bytes,
                a.operations(),
            ))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let c = |n: &str| {
        let k = format!("checkpointer.{n}");
        d(before.counters.get(&k), after.counters.get(&k))
    };
    let checkpoints = after
        .counters
        .contains_key("checkpointer.checkpoints_timed")
        .then(|| CheckpointFigures {
            timed: c("checkpoints_timed"),
            requested: c("checkpoints_requested"),
            buffers_written: c("buffers_written"),
            write_time_ms: c("write_time_ms"),
            sync_time_ms: c("sync_time_ms"),
        });
    ServerIo {
        pg_major,
        io,
        io_timing: after.settings.get("track_io_timing").map(String::as_str) == Some("on"),
        checkpoints,
    }
}

/// One of seed 003's loops under one wal_sync_method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopResult {
    /// `bulk`: 10,000 inserts in one transaction, then CHECKPOINT; `single`: 100 single-row
    /// transactions, then CHECKPOINT.
    pub scenario: String,
    pub wal_sync_method: String,
    /// PostgreSQL opened its WAL with O_DIRECT (open_datasync under wal_level = minimal, on a
    /// second instance of plumb's): the configuration whose WAL writes can go as FUA writes.
    pub wal_direct: bool,
    pub iterations: u32,
    pub rows_per_iteration: u32,
    pub commits_per_iteration: u32,
    /// Per iteration: the inserts with their commit(s) (the first timed part of each loop).
    #[serde(rename = "insert")]
    pub insert_ms: Option<Latency>,
    /// Per iteration: the CHECKPOINT (the second timed part).
    #[serde(rename = "checkpoint")]
    pub checkpoint_ms: Option<Latency>,
    /// Per commit, timed at the client (the single-row scenario).
    pub commit: Option<Latency>,
    #[serde(serialize_with = "plumb_sys::json::opt_whole")]
    pub wal_bytes: Option<f64>,
    /// pg_stat_wal: WAL syncs and their time (track_wal_io_timing).
    #[serde(serialize_with = "plumb_sys::json::opt_whole")]
    pub wal_syncs: Option<f64>,
    #[serde(rename = "wal_sync_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub wal_sync_ms: Option<f64>,
    /// /proc/diskstats on the data device: writes and cache FLUSH requests completed.
    pub disk_writes: Option<u64>,
    pub disk_flushes: Option<u64>,
    pub flushes_per_commit: Option<f64>,
    /// What each commit asked of the kernel, from tracing the server over the loop (as root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<LoopTrace>,
}

/// A loop's commits as the kernel saw them: the committing backend's syscalls and bios per
/// commit, and every server process's bios per commit (the WAL writer's and the checkpointer's
/// too: the loop's CHECKPOINTs are in the window).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoopTrace {
    /// The backend's syscalls per commit, the most frequent first (at most 8).
    pub syscalls_per_commit: Vec<PerCommit>,
    /// fsync, fdatasync and sync_file_range calls per commit (the backend's).
    pub sync_calls_per_commit: f64,
    /// write, pwrite64, pwritev… calls per commit (the backend's).
    pub write_calls_per_commit: f64,
    /// Bios per commit: the backend's own.
    pub backend_bios: BiosPerCommit,
    /// Bios per commit: every server process's.
    pub server_bios: BiosPerCommit,
    /// The backend's bios by blktrace's flags (`WS`, `FWS`, `WFS`…), counts over the loop.
    pub patterns: BTreeMap<String, u64>,
    /// Events or updates were lost: the figures are lower bounds.
    pub lost: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerCommit {
    pub name: String,
    pub per_commit: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BiosPerCommit {
    pub writes: f64,
    pub flushes: f64,
    pub fua_writes: f64,
}

impl LoopTrace {
    /// Per-commit figures from a trace of the server over a loop of `commits` commits made by
    /// the backend `backend`.
    pub fn from_trace(t: &crate::trace::TraceReport, backend: u32, commits: u64) -> LoopTrace {
        let n = commits.max(1) as f64;
        let b = t.processes.iter().find(|p| p.pid == backend);
        let rows: &[crate::trace::SyscallRow] = b.map_or(&[], |p| &p.syscalls);
        let mut by_calls: Vec<&crate::trace::SyscallRow> = rows.iter().collect();
        by_calls.sort_by(|x, y| y.calls.cmp(&x.calls).then(x.name.cmp(&y.name)));
        let per = |bios: &plumb_sys::blockprocs::ProcBios| BiosPerCommit {
            writes: bios.writes as f64 / n,
            flushes: bios.flushes as f64 / n,
            fua_writes: bios.fua_writes as f64 / n,
        };
        let mut server = plumb_sys::blockprocs::ProcBios::default();
        for p in t.processes.iter().filter_map(|p| p.block.as_ref()) {
            server.writes += p.bios.writes;
            server.flushes += p.bios.flushes;
            server.fua_writes += p.bios.fua_writes;
        }
        let own = b.and_then(|p| p.block.as_ref()).map(|x| &x.bios);
        let l = &t.lost;
        LoopTrace {
            syscalls_per_commit: by_calls
                .iter()
                .take(8)
                .map(|r| PerCommit {
                    name: r.name.clone(),
                    per_commit: r.calls as f64 / n,
                })
                .collect(),
            sync_calls_per_commit: crate::trace::sync_calls(rows) as f64 / n,
            write_calls_per_commit: crate::trace::write_calls(rows) as f64 / n,
            backend_bios: own.map(per).unwrap_or_default(),
            server_bios: per(&server),
            patterns: own.map(|x| x.patterns.clone()).unwrap_or_default(),
            lost: l.syscall_updates + l.sched_updates + l.processes + l.block_events > 0,
        }
    }
}

impl LoopResult {
    /// The configuration in words: the method, and `+O_DIRECT` when the WAL was opened so.
    pub fn configuration(&self) -> String {
        if self.wal_direct {
            format!("{}+O_DIRECT", self.wal_sync_method)
        } else {
            self.wal_sync_method.clone()
        }
    }
}

/// MariaDB's durability paths on plumb's private MariaDB (`plumb lab --kind mariadb`): each
/// configuration set at the server's start, read back, and measured with single-row commits
/// and 10,000-row transactions; FLUSH and FUA requests charged to the server from plumb's own
/// block trace where it could trace (root), else the whole device's from /proc/diskstats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MariaDurability {
    pub configs: Vec<MariaConfig>,
    /// The FLUSH and FUA counts per commit are the server's own (plumb's block trace); false:
    /// the whole device's, neighbours included.
    pub traced: bool,
    /// Why the server was not traced, when it was not.
    pub untraced_because: Option<String>,
    /// The data device's FUA support and write cache (None: unknown).
    pub device_fua: Option<bool>,
    pub device_write_back: Option<bool>,
    /// The durable configuration with the fastest single-row commits (median), and how it
    /// compares with each other durable one: beyond chance and a 10% floor (rank-sum test over
    /// the commits), or not distinguishable.
    pub fastest_durable: Option<String>,
    pub faster_than: Vec<String>,
    pub not_distinguishable_from: Vec<String>,
    /// Durable configurations not compared with the fastest: one of the two ran beside other
    /// work that took a share too large against their difference (the effect-size rule).
    #[serde(default)]
    pub not_compared: Vec<String>,
}

/// One configuration of MariaDB's durability settings, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MariaConfig {
    /// Short name: `trx_commit=1 fsync`, `binlog sync_binlog=1`…
    pub name: String,
    /// The server options plumb started it with.
    pub asked: BTreeMap<String, String>,
    /// The same settings as the server reported them after its start.
    pub read_back: BTreeMap<String, String>,
    /// Settings whose value read back otherwise (MariaDB may ignore or map one).
    pub ignored: Vec<String>,
    /// Durable by its settings: every commit waits for the redo log's flush (and the binary
    /// log's, when there is one).
    pub durable_by_settings: bool,
    /// Single-row commits (autocommit INSERTs), each timed.
    pub single: Option<Latency>,
    /// The COMMIT of each 10,000-row transaction, and the whole transaction.
    pub bulk_commit: Option<Latency>,
    pub bulk_transaction: Option<Latency>,
    /// The server's syscalls per single-row commit (all its threads), the most frequent first.
    pub syscalls_per_commit: Vec<PerCommit>,
    pub sync_calls_per_commit: Option<f64>,
    pub write_calls_per_commit: Option<f64>,
    /// Block requests per single-row commit charged to the server (its threads, and the
    /// journal commits its syncs waited for).
    pub server_bios_per_commit: Option<BiosPerCommit>,
    /// Cache FLUSHes per single-row commit the device completed from everybody
    /// (/proc/diskstats).
    pub device_flushes_per_commit: Option<f64>,
    /// Cache FLUSHes per 10,000-row transaction, the whole device's.
    pub device_flushes_per_bulk: Option<f64>,
    /// Binary log on: change in Binlog_commits over change in Binlog_group_commits over the
    /// single-row commits (1.0: every commit its own group).
    pub group_commit_ratio: Option<f64>,
    /// The trace lost events: its counts are lower bounds.
    pub trace_lost: bool,
}

impl MariaConfig {
    /// FLUSH + FUA requests per single-row commit: the server's own where traced, else the
    /// device's FLUSHes.
    pub fn durable_requests_per_commit(&self) -> Option<f64> {
        self.server_bios_per_commit
            .as_ref()
            .map(|b| b.flushes + b.fua_writes)
            .or(self.device_flushes_per_commit)
    }
}

/// Durable on this device: its settings make every commit wait for the log's flush, and the
/// commits did ask the device for a FLUSH or FUA write each (where the device's cache is
/// volatile; with a write-through cache a completed write is durable without one).
pub fn maria_durable(c: &MariaConfig, write_back: Option<bool>) -> bool {
    if !c.durable_by_settings {
        return false;
    }
    match (write_back, c.durable_requests_per_commit()) {
        (Some(false), _) => true,
        (_, Some(r)) => r >= 0.9,
        (_, None) => true,
    }
}

/// Sequential read throughput where the data lives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeqRead {
    pub block_size: u32,
    pub queue_depth: u32,
    pub bytes_per_s: f64,
    #[serde(rename = "lat_mean_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub lat_mean_ms: Option<f64>,
}

/// What the recording saw during one phase of the lab.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub phase: String,
    /// A database workload (not plumb's own storage probes): the findings look at these.
    pub workload: bool,
    pub start_s: f64,
    pub end_s: f64,
    pub cpu_busy_pct: Option<f64>,
    pub steal_pct: Option<f64>,
    pub runnable_mean: Option<f64>,
    #[serde(serialize_with = "plumb_sys::json::opt_whole")]
    pub runnable_max: Option<f64>,
    pub disk: Option<String>,
    /// Mean requests in flight on the data disk (aqu-sz).
    pub disk_queue_mean: Option<f64>,
    #[serde(
        rename = "disk_write_await_s",
        serialize_with = "plumb_sys::json::opt_ms_as_s"
    )]
    pub disk_write_await_ms: Option<f64>,
    pub disk_util_pct: Option<f64>,
    pub swap_in_bytes_per_s_max: Option<f64>,
    /// The server's smaps swap (shared memory included), largest seen.
    #[serde(serialize_with = "plumb_sys::json::opt_whole")]
    pub engine_swap_bytes_max: Option<f64>,
    /// Whether something else used the device or the CPUs during the phase, with the evidence
    /// (None: not watched).
    pub interference: Option<crate::interference::Interference>,
}

impl Window {
    /// Known to be disturbed.
    pub fn disturbed(&self) -> bool {
        self.interference.as_ref().is_some_and(|i| !i.is_clean())
    }
}

/// An optional experiment (--pressure, --throttle-writes): the workload again, changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    pub name: String,
    /// What the experiment set up (`experiment-*`), worded by report.
    #[serde(serialize_with = "crate::said::as_words")]
    pub setting: crate::said::Said,
    /// The phase of the recording it ran in (its window).
    pub phase: String,
    pub baseline: Option<Pgbench>,
    pub changed: Option<Pgbench>,
    pub window: Option<Window>,
    /// What changed, with its figures (`pgbench-compared` or `pgbench-not-distinguishable`,
    /// `swap-hides-shared-memory`, `standby-commit-*`).
    pub notes: Vec<crate::Note>,
    /// Single-row commits timed in the experiment (--replica), each run as it was configured.
    pub commits: Vec<CommitRun>,
    /// With `--explain` on plumb's driver: the changed run whole, its transactions taken apart
    /// (`plumb load --explain`'s parts), beside the baseline's in `workloads`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<crate::load::LoadReport>,
}

/// Single-row commits in one session, timed by the client, under one condition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitRun {
    /// What was around the commits: "without a standby", "beside the standby", ….
    pub condition: String,
    /// The session's synchronous_commit: `on` waits for a synchronous standby's flush,
    /// `local` for the local WAL flush alone (both alternate in one loop, commit by commit).
    pub synchronous_commit: String,
    pub latency: Option<Latency>,
    /// The 10th and 90th percentiles (ms): a change is stated only beyond them.
    #[serde(rename = "p10_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub p10_ms: Option<f64>,
    #[serde(rename = "p90_s", serialize_with = "plumb_sys::json::opt_ms_as_s")]
    pub p90_ms: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LabReport {
    pub report_schema: u32,
    pub command_line: String,
    pub started_unix_ms: u64,
    pub elapsed_s: f64,
    pub quick: bool,
    /// What was measured: plumb's private instance, or the URL (password removed).
    pub target: String,
    pub engine_version: Option<String>,
    /// Where the data (and WAL) lived.
    pub data_dir: PathBuf,
    pub out_dir: PathBuf,
    pub host: OsReport,
    pub memory: Option<Assumption>,
    pub durability: Option<DurabilityReport>,
    pub sweep: Option<SweepReport>,
    pub seq_read: Option<SeqRead>,
    pub pgbench: Option<Pgbench>,
    /// Runs of plumb's own driver (`plumb load`'s result each): the workload and the insert
    /// loops of a lab whose engine pgbench does not speak (MariaDB).
    pub workloads: Vec<crate::load::LoadReport>,
    /// MariaDB's durability settings compared (a MariaDB lab).
    pub mariadb_durability: Option<MariaDurability>,
    pub loops: Vec<LoopResult>,
    pub experiments: Vec<Experiment>,
    pub windows: Vec<Window>,
    pub findings: Vec<Finding>,
    /// Steps not run, and why.
    pub skipped: Vec<String>,
    pub recording: Option<PathBuf>,
}

fn mean(v: &[f64]) -> Option<f64> {
    let f: Vec<f64> = v.iter().cloned().filter(|x| x.is_finite()).collect();
    (!f.is_empty()).then(|| f.iter().sum::<f64>() / f.len() as f64)
}

fn maxf(v: &[f64]) -> Option<f64> {
    v.iter().cloned().filter(|x| x.is_finite()).reduce(f64::max)
}

/// The recording's figures between two times (seconds from its start).
pub fn window(
    rec: &Recording,
    phase: &str,
    workload: bool,
    start_s: f64,
    end_s: f64,
    disk: Option<&str>,
    engine_pid: Option<u32>,
) -> Window {
    let cat = crate::series::catalog(rec);
    let t = crate::series::times_s(rec);
    // A rate at sample i covers (t[i-1], t[i]]: keep the samples whose whole interval lies in
    // the phase (0.1 s of slack at each end). A phase shorter than about one interval has no
    // figures rather than its neighbours'.
    let inside: Vec<bool> = (0..t.len())
        .map(|i| i > 0 && t[i - 1] >= start_s - 0.1 && t[i] <= end_s + 0.1)
        .collect();
    let pick = |name: &str| -> Vec<f64> {
        match crate::series::find(&cat, name) {
            Some(m) => crate::series::compute(rec, m)
                .into_iter()
                .zip(&inside)
                .filter(|(_, &ok)| ok)
                .map(|(v, _)| v)
                .collect(),
            None => Vec::new(),
        }
    };
    let idle = pick("cpu.all.idle_pct");
    let busy: Vec<f64> = idle.iter().map(|i| 100.0 - i).collect();
    let runnable = pick("sched.runnable_count");
    let d = |f: &str| {
        disk.map(|d| pick(&format!("disk.{d}.{f}")))
            .unwrap_or_default()
    };
    let swap = engine_pid
        .map(|p| pick(&format!("proc.{p}.swap_bytes")))
        .unwrap_or_default();
    Window {
        phase: phase.to_string(),
        workload,
        start_s,
        end_s,
        cpu_busy_pct: mean(&busy),
        steal_pct: mean(&pick("cpu.all.steal_pct")),
        runnable_mean: mean(&runnable),
        runnable_max: maxf(&runnable),
        disk: disk.map(str::to_string),
        disk_queue_mean: mean(&d("queue_requests")),
        disk_write_await_ms: mean(&d("write_await_ms")),
        disk_util_pct: mean(&d("util_pct")),
        swap_in_bytes_per_s_max: maxf(&pick("mem.swap_in_bytes_per_s")),
        engine_swap_bytes_max: maxf(&swap),
        interference: None,
    }
}

/// Commit latency p99 above this is a finding (ms); ten times it is critical.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_only_with_enough_values() {
        let few = Latency::from_us(&[1000, 3000, 2000]).unwrap();
        assert_eq!(few.p50_ms, 2.0);
        assert_eq!(few.max_ms, 3.0);
        assert!(few.p95_ms.is_none() && few.p99_ms.is_none());
        let many: Vec<u64> = (1..=200).map(|i| i * 1000).collect();
        let l = Latency::from_us(&many).unwrap();
        assert_eq!(l.p99_ms, Some(198.0));
        assert_eq!(l.p95_ms, Some(190.0));
        assert!((l.mean_ms - 100.5).abs() < 1e-9);
        assert!(Latency::from_us(&[]).is_none());
    }
}
