//! `plumb lab`: the results of one end-to-end run, the figures drawn from its recording for each
//! phase, and the findings: plain statements with their evidence and severity.

use crate::durability::DurabilityReport;
use crate::mem::Assumption;
use crate::os::OsReport;
use crate::sweep::SweepReport;
use plumb_store::Recording;
use serde::Serialize;
use std::path::PathBuf;

/// Version of report.json's shape; docs/lab-report.schema.json pins it.
pub const REPORT_SCHEMA: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    Critical,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub severity: Severity,
    /// A short rule name, stable across versions (for scripts).
    pub rule: String,
    pub statement: String,
    /// The numbers behind the statement.
    pub evidence: Vec<String>,
}

/// Latencies (or durations) summarised; percentiles only where the count supports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    /// p95 needs 20 values, p99 100: fewer, and the figure would be the maximum in disguise.
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: f64,
}

impl Latency {
    /// From durations in microseconds; `None` when there are none.
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
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pgbench {
    pub scale: u32,
    pub clients: u32,
    pub threads: u32,
    pub duration_s: f64,
    pub init_s: f64,
    pub database_bytes: Option<u64>,
    pub transactions: u64,
    pub failed: u64,
    pub tps: f64,
    /// Per transaction, from pgbench's transaction log.
    pub latency: Option<Latency>,
    pub wal_sync_method: String,
}

/// One of seed 003's loops under one wal_sync_method.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopResult {
    /// `bulk`: 10,000 inserts in one transaction, then CHECKPOINT; `single`: 100 single-row
    /// transactions, then CHECKPOINT.
    pub scenario: String,
    pub wal_sync_method: String,
    pub iterations: u32,
    pub rows_per_iteration: u32,
    pub commits_per_iteration: u32,
    /// Per iteration: the inserts with their commit(s) ("INS" in the seed).
    pub insert_ms: Option<Latency>,
    /// Per iteration: the CHECKPOINT ("CHKPT" in the seed).
    pub checkpoint_ms: Option<Latency>,
    /// Per commit, timed at the client (the single-row scenario).
    pub commit: Option<Latency>,
    pub wal_bytes: Option<f64>,
    /// pg_stat_wal: WAL syncs and their time (track_wal_io_timing).
    pub wal_syncs: Option<f64>,
    pub wal_sync_ms: Option<f64>,
    /// /proc/diskstats on the data device: writes and cache FLUSH requests completed.
    pub disk_writes: Option<u64>,
    pub disk_flushes: Option<u64>,
    pub flushes_per_commit: Option<f64>,
}

/// Sequential read throughput where the data lives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeqRead {
    pub block_size: u32,
    pub queue_depth: u32,
    pub bytes_per_s: f64,
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
    pub runnable_max: Option<f64>,
    pub disk: Option<String>,
    /// Mean requests in flight on the data disk (aqu-sz).
    pub disk_queue_mean: Option<f64>,
    pub disk_write_await_ms: Option<f64>,
    pub disk_util_pct: Option<f64>,
    pub swap_in_bytes_per_s_max: Option<f64>,
    /// The server's smaps swap (shared memory included), largest seen.
    pub engine_swap_bytes_max: Option<f64>,
}

/// An optional experiment (--pressure, --throttle-writes): the workload again, changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Experiment {
    pub name: String,
    pub setting: String,
    /// The phase of the recording it ran in (its window).
    pub phase: String,
    pub baseline: Option<Pgbench>,
    pub changed: Option<Pgbench>,
    pub window: Option<Window>,
    pub notes: Vec<String>,
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
    }
}

/// Commit latency p99 above this is a finding (ms); ten times it is critical.
pub const COMMIT_P99_WARN_MS: f64 = 2.0;
/// Steal above this share of CPU time is a finding (%).
pub const STEAL_WARN_PCT: f64 = 10.0;

fn gib(b: f64) -> String {
    crate::units::bytes(b as u64)
}

/// The rules: numbers in, plain statements out, most severe first.
pub fn findings(r: &LabReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |severity, rule: &str, statement: String, evidence: Vec<String>| {
        out.push(Finding {
            severity,
            rule: rule.to_string(),
            statement,
            evidence,
        })
    };
    // Containers: no memory limit, a cache larger than the limit. The server's process when
    // there is one (plumb's own otherwise): one finding, not one per process.
    let who = r
        .host
        .processes
        .iter()
        .find(|p| p.role != "plumb")
        .or_else(|| r.host.processes.first());
    if let Some(p) = who {
        if !p.container_evidence.is_empty() && p.memory_limit_bytes.is_none() {
            add(
                Severity::Warn,
                "container-without-memory-limit",
                format!(
                    "the server (PID {}) runs in a container with no memory limit: the engine sizes its caches from the host's memory, and the host's other tenants compete for it",
                    p.pid
                ),
                p.container_evidence
                    .iter()
                    .map(|e| format!("{}: {} {}", e.points_to, e.source, e.detail))
                    .collect(),
            );
        }
    }
    if let Some(a) = &r.memory {
        if let (Some(cache), Some(limit)) = (a.cache_bytes, a.cgroup_limit_bytes) {
            if cache > limit {
                add(
                    Severity::Critical,
                    "cache-above-limit",
                    format!(
                        "{} ({}) is larger than the memory limit ({}): the cache will be pushed to swap or the server killed",
                        a.cache_name,
                        gib(cache as f64),
                        gib(limit as f64)
                    ),
                    a.statements.iter().map(|s| s.text.clone()).collect(),
                );
            }
        }
    }
    // Engine memory in swap.
    let swapped = r
        .windows
        .iter()
        .filter_map(|w| w.engine_swap_bytes_max.map(|s| (s, &w.phase)))
        .fold(None, |acc: Option<(f64, &String)>, (s, p)| match acc {
            Some((a, _)) if a >= s => acc,
            _ => Some((s, p)),
        });
    if let Some((s, phase)) = swapped {
        if s >= 1048576.0 {
            add(
                Severity::Critical,
                "engine-memory-in-swap",
                format!(
                    "{} of the server's memory was in swap during {phase}: every access to it is a disk read (VmSwap does not show swapped shared memory; smaps does)",
                    gib(s)
                ),
                vec![format!("largest smaps_rollup Swap of the postmaster: {}", gib(s))],
            );
        }
    }
    // Commit latency and its cause.
    for l in &r.loops {
        let Some(c) = &l.commit else { continue };
        let Some(p99) = c.p99_ms.or(c.p95_ms) else {
            continue;
        };
        if p99 < COMMIT_P99_WARN_MS {
            continue;
        }
        let mut ev = vec![format!(
            "{} single-row commits with wal_sync_method={}: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            c.count, l.wal_sync_method, c.p50_ms, p99, c.max_ms
        )];
        let cause = match l.flushes_per_commit {
            Some(f) if f >= 0.8 => {
                ev.push(format!(
                    "{:.2} cache FLUSH requests per commit on {}",
                    f,
                    r.windows
                        .iter()
                        .find_map(|w| w.disk.clone())
                        .unwrap_or_default()
                ));
                "each commit waited for a cache FLUSH (the device has a volatile write cache and no FUA path was used)".to_string()
            }
            Some(_) => {
                "commits did not each flush the device cache: the time is the WAL write itself"
                    .to_string()
            }
            None => "the device's FLUSH count was not available".to_string(),
        };
        add(
            if p99 >= COMMIT_P99_WARN_MS * 10.0 {
                Severity::Critical
            } else {
                Severity::Warn
            },
            "commit-latency",
            format!(
                "commit latency p99 is {p99:.2} ms with wal_sync_method={} (above {COMMIT_P99_WARN_MS} ms): {cause}",
                l.wal_sync_method
            ),
            ev,
        );
    }
    // Device past its knee during the workload.
    if let Some(k) = r.sweep.as_ref().and_then(|s| s.knee.as_ref()) {
        let knee_qd: f64 = k.level.parse().unwrap_or(f64::INFINITY);
        let busiest = r
            .windows
            .iter()
            .filter(|w| w.workload)
            .filter_map(|w| w.disk_queue_mean.map(|q| (q, &w.phase)))
            .fold(None, |acc: Option<(f64, &String)>, (q, p)| match acc {
                Some((a, _)) if a >= q => acc,
                _ => Some((q, p)),
            });
        match busiest {
            Some((q, phase)) if q > knee_qd => add(
                Severity::Warn,
                "device-past-knee",
                format!(
                    "the data device ran past its knee during {phase}: {q:.1} requests in flight on average, where the sweep found latency outgrowing throughput beyond queue depth {}",
                    k.level
                ),
                vec![format!(
                    "sweep: QD {} → {}: throughput {:+.0}%, latency {:+.0}%",
                    k.level, k.next, k.throughput_change_pct, k.latency_change_pct
                )],
            ),
            _ => add(
                Severity::Info,
                "device-knee",
                format!(
                    "the data device's knee is at queue depth {}: beyond it latency grows faster than throughput; the workloads stayed below it",
                    k.level
                ),
                vec![format!(
                    "sweep: QD {} → {}: throughput {:+.0}%, latency {:+.0}%",
                    k.level, k.next, k.throughput_change_pct, k.latency_change_pct
                )],
            ),
        }
    }
    // CPU: run queue (the worst workload phase) and steal (any phase).
    let cpus = r.host.cpu.online_cpus.unwrap_or(0) as f64;
    let worst = r
        .windows
        .iter()
        .filter(|w| w.workload)
        .filter_map(|w| w.runnable_mean.map(|m| (m, w)))
        .fold(None, |acc: Option<(f64, &Window)>, (m, w)| match acc {
            Some((a, _)) if a >= m => acc,
            _ => Some((m, w)),
        });
    if let Some((m, w)) = worst {
        if cpus > 0.0 && m > cpus {
            add(
                Severity::Warn,
                "run-queue-above-cpus",
                format!(
                    "during {} {:.1} tasks were runnable on average for {} CPUs: work waited for a CPU, so that phase's throughput is a CPU ceiling, not a storage one",
                    w.phase, m, cpus
                ),
                r.windows
                    .iter()
                    .filter(|w| w.workload && w.runnable_mean.is_some_and(|m| m > cpus))
                    .filter_map(|w| {
                        Some(format!(
                            "{}: runnable mean {:.1}, max {:.0}; CPU busy {:.0}%",
                            w.phase,
                            w.runnable_mean?,
                            w.runnable_max?,
                            w.cpu_busy_pct?
                        ))
                    })
                    .collect(),
            );
        }
    }
    if let Some((s, w)) = r
        .windows
        .iter()
        .filter_map(|w| w.steal_pct.map(|s| (s, w)))
        .fold(None, |acc: Option<(f64, &Window)>, (s, w)| match acc {
            Some((a, _)) if a >= s => acc,
            _ => Some((s, w)),
        })
    {
        if s > STEAL_WARN_PCT {
            add(
                Severity::Warn,
                "cpu-steal",
                format!(
                    "the hypervisor took {s:.0}% of CPU time (steal) during {}: the VM gets less CPU than it shows",
                    w.phase
                ),
                vec![format!("steal {s:.1}% (threshold {STEAL_WARN_PCT}%)")],
            );
        }
    }
    // Data and WAL on one device.
    if let Some(s) = r.durability.as_ref().and_then(|d| d.storage.as_ref()) {
        add(
            Severity::Info,
            "data-and-wal-on-one-device",
            format!(
                "data and WAL share {}: commits (WAL flushes) and checkpoints (data writes) queue on one device; a log on a disk of its own takes the commits out of the checkpoints' way",
                s.disks.join(", ")
            ),
            vec![format!(
                "{} is on {} ({})",
                r.data_dir.display(),
                s.source,
                s.fs_type
            )],
        );
    }
    // Which wal_sync_method did better, where more than one ran: small commits and bulk
    // loads can disagree (O_DSYNC makes every WAL write synchronous, not only the commit's).
    let compare = |scenario: &str, f: fn(&LoopResult) -> Option<f64>| -> Option<String> {
        let mut v: Vec<(f64, &str)> = r
            .loops
            .iter()
            .filter(|l| l.scenario == scenario)
            .filter_map(|l| f(l).map(|x| (x, l.wal_sync_method.as_str())))
            .collect();
        if v.len() < 2 {
            return None;
        }
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best, worst) = (v[0], v[v.len() - 1]);
        let what = if scenario == "single" {
            "single-row commits"
        } else {
            "10,000-row transactions"
        };
        Some(if best.0 > 0.0 && worst.0 / best.0 >= 1.10 {
            format!(
                "{what}: {} faster with {} ({:.2} ms against {:.2} ms with {})",
                format_args!("{:.2}x", worst.0 / best.0),
                best.1,
                best.0,
                worst.0,
                worst.1
            )
        } else {
            format!(
                "{what}: within 10% ({} {:.2} ms, {} {:.2} ms)",
                best.1, best.0, worst.1, worst.0
            )
        })
    };
    let single = compare("single", |l| l.commit.as_ref().map(|c| c.p50_ms));
    let bulk = compare("bulk", |l| l.insert_ms.as_ref().map(|c| c.p50_ms));
    if single.is_some() || bulk.is_some() {
        let ev: Vec<String> = single.into_iter().chain(bulk).collect();
        add(
            Severity::Info,
            "wal-sync-method",
            format!("wal_sync_method compared on this device: {}", ev.join("; ")),
            r.loops
                .iter()
                .map(|l| {
                    format!(
                        "{} {}: INS median {}, {} FLUSH per commit",
                        l.scenario,
                        l.wal_sync_method,
                        l.insert_ms
                            .as_ref()
                            .map(|x| format!("{:.2} ms", x.p50_ms))
                            .unwrap_or_else(|| "-".into()),
                        l.flushes_per_commit
                            .map(|f| format!("{f:.2}"))
                            .unwrap_or_else(|| "-".into())
                    )
                })
                .collect(),
        );
    }
    out.sort_by(|a, b| b.severity.cmp(&a.severity));
    out
}

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

    /// A report around the v2-systemd-lvm fixture's host; each test sets what its rule reads.
    fn report() -> LabReport {
        let root = plumb_sys::Root::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/v2-systemd-lvm"
        ));
        let sample = plumb_sys::snapshot::collect(&root, &[], None).unwrap();
        LabReport {
            report_schema: REPORT_SCHEMA,
            command_line: "plumb lab".into(),
            started_unix_ms: 0,
            elapsed_s: 1.0,
            quick: true,
            target: "t".into(),
            engine_version: None,
            data_dir: "/d".into(),
            out_dir: "/o".into(),
            host: crate::os::build(&sample, 4096),
            memory: None,
            durability: None,
            sweep: None,
            seq_read: None,
            pgbench: None,
            loops: vec![],
            experiments: vec![],
            windows: vec![],
            findings: vec![],
            skipped: vec![],
            recording: None,
        }
    }

    fn single(method: &str, commit_us: Vec<u64>, flushes: Option<f64>) -> LoopResult {
        LoopResult {
            scenario: "single".into(),
            wal_sync_method: method.into(),
            iterations: 2,
            rows_per_iteration: 100,
            commits_per_iteration: 100,
            insert_ms: Latency::from_us(&[20_000, 22_000]),
            checkpoint_ms: Latency::from_us(&[2_000, 3_000]),
            commit: Latency::from_us(&commit_us),
            wal_bytes: None,
            wal_syncs: None,
            wal_sync_ms: None,
            disk_writes: None,
            disk_flushes: None,
            flushes_per_commit: flushes,
        }
    }

    fn win(phase: &str, workload: bool) -> Window {
        Window {
            phase: phase.into(),
            workload,
            start_s: 0.0,
            end_s: 10.0,
            cpu_busy_pct: Some(50.0),
            steal_pct: Some(0.0),
            runnable_mean: Some(1.0),
            runnable_max: Some(2.0),
            disk: Some("vda".into()),
            disk_queue_mean: Some(1.0),
            disk_write_await_ms: Some(0.1),
            disk_util_pct: Some(10.0),
            swap_in_bytes_per_s_max: Some(0.0),
            engine_swap_bytes_max: Some(0.0),
        }
    }

    fn rule<'a>(f: &'a [Finding], name: &str) -> Option<&'a Finding> {
        f.iter().find(|x| x.rule == name)
    }

    #[test]
    fn slow_commits_are_named_with_their_cause() {
        let mut r = report();
        // 200 commits, three slow: the 99th percentile is the second slowest, 5 ms.
        let mut v = vec![1000u64; 197];
        v.extend([5000, 5000, 40_000]);
        r.loops = vec![single("fdatasync", v, Some(1.02))];
        let f = findings(&r);
        let c = rule(&f, "commit-latency").expect("a commit finding");
        assert_eq!(c.severity, Severity::Warn);
        assert!(c.statement.contains("cache FLUSH"), "{}", c.statement);
        // Ten times the threshold is critical; fast commits are no finding at all.
        r.loops = vec![single("fdatasync", vec![25_000; 100], Some(1.0))];
        assert_eq!(
            rule(&findings(&r), "commit-latency").unwrap().severity,
            Severity::Critical
        );
        r.loops = vec![single("fdatasync", vec![300; 100], Some(1.0))];
        assert!(rule(&findings(&r), "commit-latency").is_none());
    }

    #[test]
    fn memory_rules_cache_above_limit_and_swap() {
        let mut r = report();
        let settings = plumb_sys::engine_conf::EngineSettings {
            shared_buffers_bytes: Some(8 << 30),
            ..Default::default()
        };
        r.memory = Some(crate::mem::assume(
            plumb_sys::smaps::EngineKind::Postgres,
            16 << 30,
            Some(4 << 30),
            r.host.cgroup_mode,
            &settings,
        ));
        let mut w = win("pgbench", true);
        w.engine_swap_bytes_max = Some(300.0 * 1048576.0);
        r.windows = vec![w];
        let f = findings(&r);
        assert_eq!(
            rule(&f, "cache-above-limit").unwrap().severity,
            Severity::Critical
        );
        let s = rule(&f, "engine-memory-in-swap").unwrap();
        assert!(
            s.statement.contains("300 MiB") && s.statement.contains("pgbench"),
            "{}",
            s.statement
        );
        // Critical findings come first.
        assert_eq!(f[0].severity, Severity::Critical);
    }

    #[test]
    fn knee_and_run_queue_look_at_workload_phases_only() {
        let mut r = report();
        let mut job = plumb_load::job::preset("data-read").unwrap();
        job.targets = vec![];
        r.sweep = Some(SweepReport {
            command_line: String::new(),
            sweep_over: crate::sweep::SweepKind::QueueDepth,
            job,
            repetitions: 1,
            levels: vec![],
            knee: Some(crate::sweep::Knee {
                level: "4".into(),
                next: "16".into(),
                throughput_change_pct: 50.0,
                latency_change_pct: 170.0,
            }),
            chart: None,
        });
        // plumb's own sweep ran at QD 32: not a finding.
        let mut probe = win("storage sweep", false);
        probe.disk_queue_mean = Some(30.0);
        probe.runnable_mean = Some(50.0);
        r.windows = vec![probe, win("pgbench", true)];
        let f = findings(&r);
        assert!(rule(&f, "device-past-knee").is_none());
        assert!(rule(&f, "device-knee").is_some());
        assert!(rule(&f, "run-queue-above-cpus").is_none());
        let mut busy = win("pgbench", true);
        busy.disk_queue_mean = Some(9.5);
        busy.runnable_mean = Some(64.0);
        r.windows.push(busy);
        let f = findings(&r);
        assert!(rule(&f, "device-past-knee")
            .unwrap()
            .statement
            .contains("9.5"));
        assert!(rule(&f, "run-queue-above-cpus").is_some());
    }
}
