//! The insert/CHECKPOINT loops: `bulk` (10,000 inserts in one transaction, then CHECKPOINT)
//! and `single` (100 single-row transactions, then CHECKPOINT), under each wal_sync_method,
//! with the WAL's syncs and the data disk's writes and cache FLUSHes counted around them.

use super::{Context, Experiment, Outcome, Section};
use crate::error::{Context as _, Result};
use crate::{Interrupted, Plan};
use plumb_analyze::lab::{Evidence, Finding, LabReport, Latency, LoopResult, Severity};
use plumb_analyze::said::{Said, WithFacts};
use plumb_analyze::{Level, Note};
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

    fn part(&self) -> Option<crate::Part> {
        Some(crate::Part::Loops)
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Generous: a commit of a few ms on a slow disk, per configuration (three) and scenario.
        Duration::from_millis(20) * (plan.single_iterations * 100 + plan.bulk_iterations * 100) * 3
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Three configurations, each two loops: per loop about 1.3 s around it (TRUNCATE,
        // CHECKPOINT, the trace's start and end, the WAL statistics settling), 40 ms a
        // single-row iteration and 300 ms a bulk one; and 2 s to start the O_DIRECT instance
        // (bench/results/lab-time-*.md).
        vec![
            (Duration::from_millis(2600)
                + Duration::from_millis(40) * plan.single_iterations
                + Duration::from_millis(300) * plan.bulk_iterations)
                * 3
                + Duration::from_secs(2),
        ]
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
        let server_pid = cx.server.local_pid;
        for method in &methods {
            if cx.server.is_private() {
                set_wal_sync_method(admin.as_mut(), sess.as_mut(), obs.as_mut(), method)?;
            }
            let (r, p) =
                both_scenarios(cx, method, sess.as_mut(), obs.as_mut(), &disks, server_pid)?;
            results.extend(r);
            phases.extend(p);
        }
        if cx.server.is_private() {
            for sql in [
                "ALTER SYSTEM RESET wal_sync_method",
                "SELECT pg_reload_conf()",
            ] {
                admin.execute(sql)?;
            }
            let (r, p) = direct_wal_loops(cx, &disks)?;
            results.extend(r);
            phases.extend(p);
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

/// The label of the third configuration: open_datasync with the WAL opened O_DIRECT.
pub const DIRECT_WAL: &str = "open_datasync+O_DIRECT";

/// The loops once more on a second private instance whose WAL is opened with O_DIRECT:
/// PostgreSQL 15 adds O_DIRECT to open_datasync when no WAL is kept for replicas
/// (`wal_level = minimal`, `max_wal_senders = 0`), a setting that needs a restart, so the lab
/// gives it an instance of its own on the same file system, removed right after. On a device
/// with FUA this is the configuration whose WAL writes can go as FUA writes with no separate
/// FLUSH. PostgreSQL 16 and later open WAL with O_DIRECT only under `debug_io_direct`: the
/// variant is run on 15 only.
fn direct_wal_loops(
    cx: &mut Context,
    disks: &[String],
) -> Result<(Vec<LoopResult>, Vec<plumb_record::Phase>)> {
    let major = cx
        .server
        .version
        .as_deref()
        .and_then(|v| v.split_whitespace().nth(1))
        .and_then(|v| v.split('.').next())
        .and_then(|v| v.parse::<u32>().ok());
    if major != Some(15) {
        cx.skipped.push(format!(
            "the {DIRECT_WAL} loops: PostgreSQL opens WAL with O_DIRECT under wal_level = minimal in version 15 only (this is {})",
            cx.server.version.as_deref().unwrap_or("an unknown version")
        ));
        return Ok((Vec::new(), Vec::new()));
    }
    let dir = cx.work.join("pg-direct-wal");
    cx.resources.second_instance = Some(crate::resources::Instance::new(dir.clone()));
    let mut settings = crate::server::private_settings(cx.plan.shared_buffers);
    settings.extend(
        [
            ("wal_level", "minimal"),
            ("max_wal_senders", "0"),
            ("wal_sync_method", "open_datasync"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let running = plumb_engine::private::start(
        &dir,
        &plumb_engine::private::StartOptions {
            settings,
            port: None,
            bin: cx.config.bin_dir.clone(),
            ..Default::default()
        },
    )
    .with_context(|| {
        format!(
            "starting a PostgreSQL with O_DIRECT WAL in {}",
            dir.display()
        )
    })?;
    // Its processes are the lab's too: its I/O is no neighbour's.
    cx.recorder.also_own(running.pid);
    let target = running.target();
    let mut sess = plumb_engine::session(&target)?;
    let mut obs = plumb_engine::observer(&target)?;
    sess.execute(
        "CREATE TABLE dummy_test (id serial, col1 varchar(2000) DEFAULT repeat('T', 2000)); \
         ALTER TABLE dummy_test ALTER col1 SET STORAGE PLAIN",
    )
    .context("creating the loops' table on the O_DIRECT instance")?;
    let (results, phases) = both_scenarios(
        cx,
        DIRECT_WAL,
        sess.as_mut(),
        obs.as_mut(),
        disks,
        Some(running.pid),
    )?;
    drop((sess, obs));
    // Stopped and removed now, not at the end of the lab.
    cx.resources.second_instance = None;
    Ok((results, phases))
}

/// The bulk and the single-row loop under one configuration, each a watched phase.
fn both_scenarios(
    cx: &mut Context,
    method: &str,
    sess: &mut dyn Session,
    obs: &mut dyn Observer,
    disks: &[String],
    server_pid: Option<u32>,
) -> Result<(Vec<LoopResult>, Vec<plumb_record::Phase>)> {
    // Traced as root, when the server runs here and the lab was not told otherwise.
    let trace = server_pid.filter(|_| cx.config.trace && plumb_sys::os::is_root());
    let mut results = Vec::new();
    let mut phases = Vec::new();
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
        let (r, t0, t1, trace_error) = run_loop(
            scenario,
            method,
            iterations,
            sess,
            obs,
            disks,
            trace,
            &|| cx.recorder.now_s(),
            cx.cancel,
        )?
        .ok_or(Interrupted)?;
        if let Some(e) = trace_error {
            let msg = format!("tracing the loops' commits: {e}");
            if !cx.skipped.contains(&msg) {
                cx.skipped.push(msg);
            }
        }
        phases.push(cx.recorder.end_at(open.started_at(t0), t1));
        results.push(r);
    }
    Ok((results, phases))
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
            crate::refuse!("wal_sync_method = {method} did not take effect within 10 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Writes and FLUSHes completed on these disks so far.
pub(super) fn disk_counts(disks: &[String]) -> (Option<u64>, Option<u64>) {
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
    trace: Option<u32>,
    clock: &dyn Fn() -> f64,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<(LoopResult, f64, f64, Option<String>)>> {
    let (rows, commits) = match scenario {
        Scenario::Bulk => (10_000u32, 1u32),
        Scenario::Single => (100, 100),
    };
    let ctx = || format!("{} inserts with wal_sync_method={method}", scenario.name());
    sess.execute("TRUNCATE dummy_test").with_context(ctx)?;
    sess.execute("CHECKPOINT").with_context(ctx)?;
    sess.flush();
    let before = obs.snapshot().with_context(ctx)?;
    // The server traced over the loop, plumb's own observing connection left out.
    let backend = sess.local_pid();
    let mut trace_error = None;
    let tracing = match trace.zip(backend) {
        Some((pid, _)) => {
            match plumb_record::trace::Session::server(&plumb_sys::Root::host(), pid) {
                Ok((mut t, _)) => {
                    if let Some(own) = obs.own_pid() {
                        t.unfollow(own);
                    }
                    Some(plumb_record::trace::Polled::start(t))
                }
                Err(e) => {
                    trace_error = Some(format!("{e:#}"));
                    None
                }
            }
        }
        None => None,
    };
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
    // The counters settle from the loop's end (the trace's read-out counts toward the wait).
    let settle = Instant::now();
    let traced = match tracing.map(|t| t.finish("loop ended")) {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            trace_error = Some(format!("{e:#}"));
            None
        }
        None => None,
    };
    // The loop's backend reports its WAL statistics when idle (flush() asks it to), the WAL
    // writer after each round of its work (wal_writer_delay, 200 ms), the checkpointer after
    // each checkpoint: read until two readings 250 ms apart agree, at most 1.1 s after the loop.
    sess.flush();
    std::thread::sleep(Duration::from_millis(250).saturating_sub(settle.elapsed()));
    let mut after = obs.snapshot().with_context(ctx)?;
    while settle.elapsed() < Duration::from_millis(1100) {
        std::thread::sleep(Duration::from_millis(250));
        let next = obs.snapshot().with_context(ctx)?;
        let same = ["wal.syncs", "wal.writes", "wal.bytes"]
            .iter()
            .all(|k| after.counters.get(*k) == next.counters.get(*k));
        after = next;
        if same {
            break;
        }
    }
    let (w1, f1) = disk_counts(disks);
    let d = |k: &str| -> Option<f64> {
        Some(after.counters.get(k)? - before.counters.get(k)?).filter(|v| *v >= 0.0)
    };
    let total_commits = (commits * iterations) as f64;
    let flushes = f0.zip(f1).map(|(a, b)| b.saturating_sub(a));
    Ok(Some((
        LoopResult {
            scenario: scenario.name().to_string(),
            // The O_DIRECT configuration is open_datasync with its WAL opened O_DIRECT.
            wal_sync_method: method.trim_end_matches("+O_DIRECT").to_string(),
            wal_direct: method.ends_with("+O_DIRECT"),
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
            trace: traced.as_ref().zip(backend).map(|(t, b)| {
                plumb_analyze::lab::LoopTrace::from_trace(t, b, total_commits as u64)
            }),
        },
        work_start,
        work_end,
        trace_error,
    )))
}

/// Cache FLUSHes per commit and whose they are: the committing backend's own from plumb's block
/// trace when the loop was traced, else the whole device's from /proc/diskstats (a neighbour's
/// included).
fn commit_flushes(l: &LoopResult) -> Option<(f64, &'static str)> {
    match &l.trace {
        Some(t) => Some((t.backend_bios.flushes, "backend")),
        None => l.flushes_per_commit.map(|f| (f, "device")),
    }
}

/// Commit latency and its cause.
fn commit_latency(r: &LabReport, l: &LoopResult) -> Option<Finding> {
    let c = l.commit.as_ref()?;
    let p99 = c.p99_ms.or(c.p95_ms)?;
    if p99 < COMMIT_P99_WARN_MS {
        return None;
    }
    let mut ev = vec![Evidence::Said(
        Said::new("commit-figures")
            .count("commits", c.count as f64)
            .text("configuration", l.configuration())
            .secs("p50_s", c.p50_ms / 1000.0)
            .secs("p99_s", p99 / 1000.0)
            .secs("max_s", c.max_ms / 1000.0),
    )];
    let disk = r
        .windows
        .iter()
        .find_map(|w| w.disk.clone())
        .unwrap_or_default();
    let cause = match commit_flushes(l) {
        Some((f, whose)) if f >= 0.8 => {
            ev.push(Evidence::Said(
                Said::new("flushes-per-commit")
                    .ratio("flushes_per_commit", f)
                    .text("whose", whose)
                    .text("disk", disk),
            ));
            "flush"
        }
        Some(_) => "wal-write",
        None => "unknown",
    };
    let mut f = Finding::new(
        if p99 >= COMMIT_P99_WARN_MS * 10.0 {
            Severity::Critical
        } else {
            Severity::Warn
        },
        "commit-latency",
    )
    .text("configuration", l.configuration())
    .text("cause", cause)
    .count("commits", c.count as f64)
    .secs("p50_s", c.p50_ms / 1000.0)
    .secs("p99_s", p99 / 1000.0)
    .secs("max_s", c.max_ms / 1000.0)
    .secs("threshold_s", COMMIT_P99_WARN_MS / 1000.0)
    .evidence(ev)
    .phases(vec![format!(
        "{}, {}",
        Scenario::Single.what(),
        l.wal_sync_method
    )])
    .experiment(Said::new("loops-setting").text("configuration", l.configuration()));
    if let Some((fl, _)) = commit_flushes(l) {
        f = f.ratio("flushes_per_commit", fl);
    }
    Some(f)
}

/// What a single-row commit cost in FLUSHes under each configuration, and why they agree or
/// not: without FUA, an O_DIRECT|O_DSYNC WAL write is followed by a FLUSH just as fdatasync is.
fn flush_per_commit(r: &LabReport) -> Option<Note> {
    let single: Vec<&LoopResult> = r
        .loops
        .iter()
        .filter(|l| l.scenario == Scenario::Single.name())
        .collect();
    // The backend's own counts where every loop was traced (a neighbour's FLUSHes are not
    // in them); else the device's for all, so that they compare.
    let traced = single.iter().all(|l| l.trace.is_some());
    let whose = if traced { "backend" } else { "device" };
    let v: Vec<(f64, String)> = single
        .iter()
        .filter_map(|l| {
            let f = if traced {
                l.trace.as_ref().map(|t| t.backend_bios.flushes)
            } else {
                l.flushes_per_commit
            };
            f.map(|f| (f, l.configuration()))
        })
        .collect();
    if v.len() < 2 {
        return None;
    }
    let lo = v.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
    let hi = v.iter().map(|x| x.0).fold(0.0, f64::max);
    let fua = r
        .durability
        .as_ref()
        .and_then(|d| d.storage.as_ref())
        .and_then(|s| {
            s.disks
                .iter()
                .filter_map(|d| s.layers.iter().find(|l| &l.device.name == d))
                .find_map(|l| l.device.queue.as_ref().and_then(|q| q.fua))
        });
    let each: Vec<Note> = v
        .iter()
        .map(|(f, m)| {
            Note::new(Level::Info, "configuration-flushes")
                .text("configuration", m.clone())
                .ratio("flushes_per_commit", *f)
        })
        .collect();
    let direct = v.iter().any(|x| x.1 == DIRECT_WAL);
    Some(if hi - lo <= 0.2 {
        let why = match fua {
            Some(false) if direct => "no-fua-direct",
            Some(false) => "no-fua",
            Some(true) if direct => "fua-direct",
            _ => "",
        };
        Note::new(Level::Info, "flushes-same")
            .notes("each", each)
            .text("why", why)
            .text("whose", whose)
    } else {
        Note::new(Level::Info, "flushes-differ")
            .notes("each", each)
            .text("whose", whose)
    })
}

/// The floor a loop's change must clear: `plumb compare`'s, for latencies with one run a side.
const LOOPS_FLOOR_PCT: f64 = plumb_analyze::compare::ONE_RUN_LATENCY_FLOOR_PCT;

/// `plumb compare`'s rule over two loops' iterations (baseline: the faster configuration, so
/// the change reads as how much slower the other one is, and "worse" means the faster one is
/// faster beyond the rule). None without the iterations.
fn loops_rule(faster: &Latency, slower: &Latency) -> Option<plumb_analyze::compare::Comparison> {
    if slower.histogram_us.is_empty() || faster.histogram_us.is_empty() {
        return None;
    }
    Some(plumb_analyze::compare::compare(
        &faster.histogram_us.values(),
        &slower.histogram_us.values(),
        false,
        LOOPS_FLOOR_PCT,
    ))
}

/// Which wal_sync_method did better, where more than one ran: small commits and bulk loads can
/// disagree (O_DSYNC makes every WAL write synchronous, not only the commit's).
fn wal_sync_method(r: &LabReport) -> Option<Finding> {
    // By the iterations' INS (inserts and commits, per iteration), judged by `plumb compare`'s
    // rule for one run a side: Mann-Whitney p < 0.05 over the iterations and the change's
    // bootstrap interval wholly beyond the one-run floor for latencies (50%). Reports without
    // the iterations' histogram fall back to "every iteration faster, by 10% or more".
    let compare = |scenario: Scenario| -> Option<Note> {
        let mut v: Vec<(&Latency, String)> = r
            .loops
            .iter()
            .filter(|l| l.scenario == scenario.name())
            .filter_map(|l| l.insert_ms.as_ref().map(|x| (x, l.configuration())))
            .collect();
        if v.len() < 2 {
            return None;
        }
        v.sort_by(|a, b| a.0.p50_ms.total_cmp(&b.0.p50_ms));
        let (best, worst) = (&v[0], &v[v.len() - 1]);
        let judged = loops_rule(best.0, worst.0);
        // No comparison from loops that ran beside other work, unless the change is large
        // against the neighbour's share (the effect-size rule); the verdict says the same.
        let window = |config: &str| {
            let phase = format!("{}, {config}", scenario.what());
            r.windows
                .iter()
                .find(|w| w.phase == phase)
                .and_then(|w| w.interference.as_ref())
        };
        let effect = judged.as_ref().map_or(
            (worst.0.p50_ms / best.0.p50_ms.max(1e-9) - 1.0) * 100.0,
            |c| c.change_low_pct,
        );
        let withheld = [&best.1, &worst.1]
            .into_iter()
            .filter_map(|c| window(c))
            .find(|i| !i.effect_stands(effect));
        let code = match &judged {
            _ if withheld.is_some() => "loops-disturbed",
            Some(c) => match c.verdict {
                plumb_analyze::compare::Verdict::Worse => "loops-faster",
                plumb_analyze::compare::Verdict::TooFew => "loops-too-few",
                _ => "loops-not-distinguishable",
            },
            None if best.0.p50_ms > 0.0
                && worst.0.p50_ms / best.0.p50_ms >= 1.10
                && matches!(worst.0.min_ms, Some(m) if m > best.0.max_ms) =>
            {
                "loops-faster"
            }
            None => "loops-not-distinguishable",
        };
        let mut n = Note::new(Level::Info, code)
            .text("what", scenario.what())
            .text("best", best.1.clone())
            .secs("best_p50_s", best.0.p50_ms / 1000.0)
            .text("worst", worst.1.clone())
            .secs("worst_p50_s", worst.0.p50_ms / 1000.0)
            .count("iterations", best.0.count.min(worst.0.count) as f64);
        if let Some(i) = withheld {
            n = n.pct("share_pct", i.disturbing_share_pct().unwrap_or(f64::NAN));
            if let Some(top) = i.neighbours.first() {
                n = n
                    .count("neighbour_pid", top.pid as f64)
                    .text("neighbour", top.comm.clone());
            }
        }
        if let Some(c) = &judged {
            n = n
                .ratio("p", c.p)
                .pct("change_low_pct", c.change_low_pct)
                .pct("change_high_pct", c.change_high_pct)
                .pct("floor_pct", LOOPS_FLOOR_PCT);
        }
        Some(if code == "loops-faster" {
            n.ratio("ratio", worst.0.p50_ms / best.0.p50_ms)
        } else {
            n
        })
    };
    let single = compare(Scenario::Single);
    let bulk = compare(Scenario::Bulk);
    if single.is_none() && bulk.is_none() {
        return None;
    }
    let mut compared: Vec<Note> = single.into_iter().chain(bulk).collect();
    compared.extend(flush_per_commit(r));
    let mut f = Finding::new(Severity::Info, "wal-sync-method")
        .notes("compared", compared)
        .experiment(Said::new("loops-settings"))
        .evidence(
            r.loops
                .iter()
                .map(|l| {
                    let mut s = Said::new("loop-figures")
                        .text("scenario", l.scenario.clone())
                        .text("configuration", l.configuration());
                    if let Some(x) = &l.insert_ms {
                        s = s.secs("insert_p50_s", x.p50_ms / 1000.0);
                    }
                    if let Some((fl, whose)) = commit_flushes(l) {
                        s = s.ratio("flushes_per_commit", fl).text("whose", whose);
                    }
                    Evidence::Said(s)
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
            f = f.secs(
                format!("{}.{}.p50_s", l.scenario, l.configuration()),
                v / 1000.0,
            );
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
            format!("{}, {}", s.what(), l.configuration())
        })
        .collect();
    Some(f.phases(phases))
}
