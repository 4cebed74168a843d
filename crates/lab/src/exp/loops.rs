//! The insert/CHECKPOINT loops: `bulk` (10,000 inserts in one transaction, then CHECKPOINT)
//! and `single` (100 single-row transactions, then CHECKPOINT), under each wal_sync_method,
//! with the WAL's syncs and the data disk's writes and cache FLUSHes counted around them.

use super::{Context, Experiment, Outcome, Section};
use crate::{Interrupted, Plan};
use anyhow::{bail, Context as _, Result};
use plumb_analyze::lab::{Finding, LabReport, Latency, LoopResult, Severity};
use plumb_engine::{Observer, Session};
use plumb_record::PhaseKind;
use std::time::{Duration, Instant};

/// A commit p99 above this is a finding (warn; ten times it, critical).
pub const COMMIT_P99_WARN_MS: f64 = 2.0;

pub struct Loops;

impl Experiment for Loops {
    fn name(&self) -> &'static str {
        "insert/CHECKPOINT loops"
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Generous: a commit of a few ms on a slow disk, per method and scenario.
        Duration::from_millis(20) * (plan.single_iterations * 100 + plan.bulk_iterations * 100) * 2
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let target = cx.lab_database()?.target.clone();
        // The wal_sync_method comparison changes a server-wide setting: only on plumb's own.
        let methods: Vec<String> = if cx.server.is_private() {
            vec!["fdatasync".into(), "open_datasync".into()]
        } else {
            cx.skipped.push("the wal_sync_method comparison: it changes a server-wide setting, so against an existing server the loops run under its own setting only".into());
            vec![cx.server.wal_sync_method()]
        };
        cx.progress
            .step("insert/CHECKPOINT loops per wal_sync_method");
        let mut admin = plumb_engine::session(&cx.server.target)?;
        let mut obs = plumb_engine::observer(&target)?;
        let mut sess = plumb_engine::session(&target)?;
        sess.execute(
            "CREATE TABLE dummy_test (id serial, col1 varchar(2000) DEFAULT repeat('T', 2000)); \
             ALTER TABLE dummy_test ALTER col1 SET STORAGE PLAIN",
        )
        .context("creating the loops' table")?;
        let disks = cx
            .storage
            .as_ref()
            .map(|s| s.disks.clone())
            .unwrap_or_default();
        let mut results = Vec::new();
        let mut phases = Vec::new();
        for method in &methods {
            if cx.server.is_private() {
                set_wal_sync_method(admin.as_mut(), sess.as_mut(), obs.as_mut(), method)?;
            }
            for scenario in [Scenario::Bulk, Scenario::Single] {
                cx.recorder
                    .mark(&format!("loop {} {method}", scenario.name()), None);
                let iterations = match scenario {
                    Scenario::Bulk => cx.plan.bulk_iterations,
                    Scenario::Single => cx.plan.single_iterations,
                };
                let open = cx.recorder.begin_at(
                    &format!("{}, {method}", scenario.what()),
                    PhaseKind::Workload,
                    cx.recorder.now_s(),
                );
                let (r, t0, t1) = run_loop(
                    scenario,
                    method,
                    iterations,
                    sess.as_mut(),
                    obs.as_mut(),
                    &disks,
                    &|| cx.recorder.now_s(),
                    cx.cancel,
                )?
                .ok_or(Interrupted)?;
                phases.push(cx.recorder.end_at(open.started_at(t0), t1));
                results.push(r);
            }
        }
        if cx.server.is_private() {
            for sql in [
                "ALTER SYSTEM RESET wal_sync_method",
                "SELECT pg_reload_conf()",
            ] {
                admin.execute(sql)?;
            }
        }
        Ok(Outcome {
            section: Section::Loops(results),
            phases,
        })
    }

    fn findings(&self, r: &LabReport) -> Vec<Finding> {
        let mut out: Vec<Finding> = r
            .loops
            .iter()
            .filter_map(|l| commit_latency(r, l))
            .collect();
        out.extend(wal_sync_method(r));
        out
    }
}

#[derive(Clone, Copy)]
enum Scenario {
    Bulk,
    Single,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Bulk => "bulk",
            Scenario::Single => "single",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Scenario::Bulk => "10,000-row transactions",
            Scenario::Single => "single-row commits",
        }
    }
}

/// Set wal_sync_method server-wide and wait until the loops' own backend sees it.
fn set_wal_sync_method(
    admin: &mut dyn Session,
    sess: &mut dyn Session,
    obs: &mut dyn Observer,
    method: &str,
) -> Result<()> {
    for sql in [
        format!("ALTER SYSTEM SET wal_sync_method = '{method}'"),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        admin
            .execute(&sql)
            .with_context(|| format!("setting wal_sync_method = {method}"))?;
    }
    // The reload reaches every backend at its next statement; wait until ours sees it.
    let t1 = Instant::now();
    loop {
        sess.execute("SELECT 1")?;
        let now = obs.info()?;
        if now.settings.get("wal_sync_method").map(String::as_str) == Some(method) {
            return Ok(());
        }
        if t1.elapsed() > Duration::from_secs(10) {
            bail!("wal_sync_method = {method} did not take effect within 10 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes and FLUSHes completed on these disks so far.
fn disk_counts(disks: &[String]) -> (Option<u64>, Option<u64>) {
    let Ok(all) = plumb_sys::block::read_diskstats(&plumb_sys::Root::host()) else {
        return (None, None);
    };
    let mine: Vec<_> = all.iter().filter(|d| disks.contains(&d.name)).collect();
    if mine.is_empty() {
        return (None, None);
    }
    let writes = mine.iter().map(|d| d.writes).sum();
    let flushes = mine.iter().map(|d| d.flushes).sum::<Option<u64>>();
    (Some(writes), flushes)
}

/// One loop, `iterations` times; its result and its span on the recording's clock. None when
/// stopped.
#[allow(clippy::too_many_arguments)]
fn run_loop(
    scenario: Scenario,
    method: &str,
    iterations: u32,
    sess: &mut dyn Session,
    obs: &mut dyn Observer,
    disks: &[String],
    clock: &dyn Fn() -> f64,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<(LoopResult, f64, f64)>> {
    let (rows, commits) = match scenario {
        Scenario::Bulk => (10_000u32, 1u32),
        Scenario::Single => (100, 100),
    };
    let ctx = || format!("{} inserts with wal_sync_method={method}", scenario.name());
    sess.execute("TRUNCATE dummy_test").with_context(ctx)?;
    sess.execute("CHECKPOINT").with_context(ctx)?;
    sess.flush();
    let before = obs.snapshot().with_context(ctx)?;
    let work_start = clock();
    let (w0, f0) = disk_counts(disks);
    let mut ins = Vec::new();
    let mut chk = Vec::new();
    let mut commit = Vec::new();
    for _ in 0..iterations {
        if cancel() {
            return Ok(None);
        }
        let t = Instant::now();
        match scenario {
            Scenario::Bulk => {
                sess.execute(&format!(
                    "DO $$ BEGIN FOR i IN 1..{rows} LOOP INSERT INTO dummy_test DEFAULT VALUES; END LOOP; END $$"
                ))
                .with_context(ctx)?;
            }
            Scenario::Single => {
                for _ in 0..rows {
                    let c = Instant::now();
                    sess.execute("INSERT INTO dummy_test DEFAULT VALUES")
                        .with_context(ctx)?;
                    commit.push(c.elapsed().as_micros() as u64);
                }
            }
        }
        ins.push(t.elapsed().as_micros() as u64);
        let t = Instant::now();
        sess.execute("CHECKPOINT").with_context(ctx)?;
        chk.push(t.elapsed().as_micros() as u64);
    }
    let work_end = clock();
    // Backends report WAL statistics when idle, the WAL writer about once a second.
    sess.flush();
    std::thread::sleep(Duration::from_millis(1100));
    let after = obs.snapshot().with_context(ctx)?;
    let (w1, f1) = disk_counts(disks);
    let d = |k: &str| -> Option<f64> {
        Some(after.counters.get(k)? - before.counters.get(k)?).filter(|v| *v >= 0.0)
    };
    let total_commits = (commits * iterations) as f64;
    let flushes = f0.zip(f1).map(|(a, b)| b.saturating_sub(a));
    Ok(Some((
        LoopResult {
            scenario: scenario.name().to_string(),
            wal_sync_method: method.to_string(),
            iterations,
            rows_per_iteration: rows,
            commits_per_iteration: commits,
            insert_ms: Latency::from_us(&ins),
            checkpoint_ms: Latency::from_us(&chk),
            commit: Latency::from_us(&commit),
            wal_bytes: d("wal.bytes"),
            wal_syncs: d("wal.syncs"),
            wal_sync_ms: d("wal.sync_time_ms"),
            disk_writes: w0.zip(w1).map(|(a, b)| b.saturating_sub(a)),
            disk_flushes: flushes,
            flushes_per_commit: flushes.map(|f| f as f64 / total_commits),
        },
        work_start,
        work_end,
    )))
}

/// Commit latency and its cause.
fn commit_latency(r: &LabReport, l: &LoopResult) -> Option<Finding> {
    let c = l.commit.as_ref()?;
    let p99 = c.p99_ms.or(c.p95_ms)?;
    if p99 < COMMIT_P99_WARN_MS {
        return None;
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
        Some(_) => "commits did not each flush the device cache: the time is the WAL write itself"
            .to_string(),
        None => "the device's FLUSH count was not available".to_string(),
    };
    let mut f = Finding::new(
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
    )
    .number("commits", c.count as f64)
    .number("p50_ms", c.p50_ms)
    .number("p99_ms", p99)
    .number("max_ms", c.max_ms)
    .number("threshold_ms", COMMIT_P99_WARN_MS)
    .evidence(ev)
    .phases(vec![format!(
        "{}, {}",
        Scenario::Single.what(),
        l.wal_sync_method
    )]);
    if let Some(fl) = l.flushes_per_commit {
        f = f.number("flushes_per_commit", fl);
    }
    Some(f)
}

/// Which wal_sync_method did better, where more than one ran: small commits and bulk loads can
/// disagree (O_DSYNC makes every WAL write synchronous, not only the commit's).
fn wal_sync_method(r: &LabReport) -> Option<Finding> {
    let compare = |scenario: Scenario, f: fn(&LoopResult) -> Option<f64>| -> Option<String> {
        let mut v: Vec<(f64, &str)> = r
            .loops
            .iter()
            .filter(|l| l.scenario == scenario.name())
            .filter_map(|l| f(l).map(|x| (x, l.wal_sync_method.as_str())))
            .collect();
        if v.len() < 2 {
            return None;
        }
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (best, worst) = (v[0], v[v.len() - 1]);
        let what = scenario.what();
        Some(if best.0 > 0.0 && worst.0 / best.0 >= 1.10 {
            format!(
                "{what}: {:.2}x faster with {} ({:.2} ms against {:.2} ms with {})",
                worst.0 / best.0,
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
    let single = compare(Scenario::Single, |l| l.commit.as_ref().map(|c| c.p50_ms));
    let bulk = compare(Scenario::Bulk, |l| l.insert_ms.as_ref().map(|c| c.p50_ms));
    if single.is_none() && bulk.is_none() {
        return None;
    }
    let ev: Vec<String> = single.into_iter().chain(bulk).collect();
    let mut f = Finding::new(
        Severity::Info,
        "wal-sync-method",
        format!("wal_sync_method compared on this device: {}", ev.join("; ")),
    )
    .evidence(
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
    // Per scenario and method: the median the comparison used.
    for l in &r.loops {
        let v = if l.scenario == "single" {
            l.commit.as_ref().map(|c| c.p50_ms)
        } else {
            l.insert_ms.as_ref().map(|c| c.p50_ms)
        };
        if let Some(v) = v {
            f = f.number(&format!("{}.{}.p50_ms", l.scenario, l.wal_sync_method), v);
        }
    }
    let phases = r
        .loops
        .iter()
        .map(|l| {
            let s = if l.scenario == "single" {
                Scenario::Single
            } else {
                Scenario::Bulk
            };
            format!("{}, {}", s.what(), l.wal_sync_method)
        })
        .collect();
    Some(f.phases(phases))
}
