//! A standby beside the private instance (--replica sync|async): single-row commits and pgbench
//! without it, beside it, and with its writes throttled. Each commit loop alternates
//! `synchronous_commit = local` (the local WAL flush alone) and `on` (with a synchronous
//! standby: its flush too), commit by commit, so the two are measured under the same
//! conditions and their difference is the wait for the standby.
//!
//! The standby runs in a cgroup of its own (plumb moves in, starts it, moves back): throttling
//! that cgroup's writes slows the standby's disk and nothing else, which is the question a
//! synchronous replica asks of its primary: does a commit wait for the slower disk of the two?

use super::{Context, Experiment, Outcome, Section};
use crate::error::{Context as _, Result};
use crate::resources::Instance;
use crate::{Interrupted, Plan};
use plumb_analyze::lab::{CommitRun, Finding, LabReport, Latency, Severity};
use plumb_analyze::said::{Said, WithFacts};
use plumb_analyze::{Level, Note};
use plumb_engine::private;
use plumb_record::PhaseKind;
use std::time::{Duration, Instant};

/// The standby's writes are limited to this many requests per second in the throttled part:
/// each write waits for its turn (about 20 ms), as on a slow disk. A limit in bytes per second
/// would not do: single-row commits write a few KiB each and stay under any sensible one, so
/// their latency would not change.
pub const STANDBY_WRITE_IOPS: u64 = 50;

/// A commit still waiting this long after a loop's time is up is cancelled (PostgreSQL then
/// stops waiting for the standby; the commit stays committed locally) and the loop ends.
const OVERTIME: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaMode {
    Sync,
    Async,
}

impl ReplicaMode {
    pub fn parse(s: &str) -> Result<ReplicaMode> {
        match s {
            "sync" => Ok(ReplicaMode::Sync),
            "async" => Ok(ReplicaMode::Async),
            _ => crate::refuse!("--replica {s}: give sync or async"),
        }
    }

    /// "a synchronous", "an asynchronous".
    pub fn a(self) -> &'static str {
        match self {
            ReplicaMode::Sync => "a synchronous",
            ReplicaMode::Async => "an asynchronous",
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            ReplicaMode::Sync => "synchronous",
            ReplicaMode::Async => "asynchronous",
        }
    }
}

pub struct Replica {
    pub mode: ReplicaMode,
}

/// How many commit pairs (local, on) a loop makes, and for how long at most.
fn loop_size(plan: &Plan) -> (usize, Duration) {
    if plan.experiment <= Duration::from_secs(10) {
        (300, Duration::from_secs(6))
    } else {
        (1500, Duration::from_secs(20))
    }
}

impl Experiment for Replica {
    fn name(&self) -> &'static str {
        "standby"
    }

    fn steps(&self) -> u32 {
        4
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        if !cx.server.is_private() {
            return Some("--replica: the standby is made of plumb's private instance".into());
        }
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        let (_, l) = loop_size(plan);
        l * 3 + plan.experiment * 2 + Duration::from_secs(30)
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        let (_, l) = loop_size(plan);
        vec![
            l / 2 + Duration::from_secs(1),
            Duration::from_secs(5) + Duration::from_millis(300) * plan.scale,
            l / 2 + plan.experiment,
            l + plan.experiment,
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let mode = self.mode;
        let db = cx.lab_database()?;
        let (target, pgbench) = (db.target.clone(), db.pgbench.clone());
        let primary_dir = cx
            .server
            .private
            .as_ref()
            .map(|r| r.dir.clone())
            .ok_or_else(|| {
                crate::Error::Refused(format!("--replica needs plumb's private instance"))
            })?;
        let dev = cx.trace_devs.first().copied();
        let (pairs, limit) = loop_size(&cx.plan);
        let mut sess = plumb_engine::session(&target)?;
        sess.execute("CREATE TABLE replica_commits (id bigserial, at timestamptz DEFAULT now())")
            .context("creating the standby experiment's table")?;
        let mut commits = Vec::new();
        let mut phases = Vec::new();

        // 1. Without a standby: the local flush is all a commit waits for.
        cx.progress
            .step("standby: single-row commits without a standby");
        let open = cx
            .recorder
            .begin("commits without a standby", PhaseKind::Workload, None);
        let (on, _, _) = commit_loop(sess.as_mut(), pairs, limit, false, cx.cancel)?;
        phases.push(cx.recorder.end(open));
        commits.push(run_of("without a standby", "on", &on));

        // 2. The standby, born in its own cgroup.
        let standby = make_standby(cx, mode, primary_dir)?;

        // 3. Beside the standby: commits (local and on, alternating), then pgbench.
        let beside = format!("beside the {} standby", mode.word());
        cx.progress
            .step(&format!("standby: commits and pgbench {beside}"));
        let base = super::baseline(cx);
        let open = cx
            .recorder
            .begin(&format!("commits {beside}"), PhaseKind::Workload, None);
        let (on_beside, local_beside, _) =
            commit_loop(sess.as_mut(), pairs, limit, true, cx.cancel)?;
        phases.push(cx.recorder.end(open));
        commits.push(run_of(&beside, "local", &local_beside));
        commits.push(run_of(&beside, "on", &on_beside));
        let name = format!("pgbench {beside}");
        let open = cx
            .recorder
            .begin("pgbench", PhaseKind::Workload, Some(beside.clone()))
            .renamed(name.clone());
        let progress = &mut cx.progress;
        let r = pgbench.run(cx.plan.experiment, cx.cancel, &mut |t, l| {
            progress.live(t, l)
        });
        phases.push(cx.recorder.end(open));
        let mut with_standby = r?.ok_or(Interrupted)?;
        with_standby.scale = cx.plan.scale;
        let mut first_notes = vec![super::compare_runs(&base, &with_standby)];
        first_notes.extend(standby_wait_note(mode, &local_beside, &on_beside));
        let first = plumb_analyze::lab::Experiment {
            name: "standby".into(),
            setting: Said::new("experiment-standby")
                .text("standby", mode.word())
                .text("disk", cx.disk.clone().unwrap_or_default()),
            phase: name,
            baseline: Some(base),
            changed: Some(with_standby.clone()),
            window: None,
            notes: first_notes,
            commits: commits.clone(),
            explained: None,
        };

        // 4. The standby's writes throttled: commits and pgbench again.
        let Some(dev) = dev.filter(|_| cx.resources.standby_cgroup.is_some()) else {
            cx.skipped.push(
                "--replica: the standby's writes were not throttled (it needs root, and a disk found under the work directory)".into(),
            );
            remove_standby(cx)?;
            return Ok(Outcome {
                section: Section::Experiments(vec![first]),
                phases,
            });
        };
        let rate = format!("{STANDBY_WRITE_IOPS} writes/s");
        let throttled = format!("the standby's writes throttled to {rate}");
        cx.progress.step(&format!("standby: commits, {throttled}"));
        settle(cx, &target, &standby)?;
        let cg = cx.resources.standby_cgroup.as_ref().expect("checked above");
        cg.set_write_iops(dev, Some(STANDBY_WRITE_IOPS))
            .with_context(|| format!("throttling the standby's writes to {dev}"))?;
        cx.resources.standby_throttled.push(dev);
        let name = format!("commits, {throttled}");
        let open = cx
            .recorder
            .begin(&name, PhaseKind::Workload, Some(format!("{rate} on {dev}")));
        let looped = commit_loop(sess.as_mut(), pairs, limit, true, cx.cancel);
        phases.push(cx.recorder.end(open));
        let cg = cx.resources.standby_cgroup.as_ref().expect("checked above");
        cg.set_write_iops(dev, None)
            .context("lifting the standby's throttle")?;
        cx.resources.standby_throttled.clear();
        cx.recorder.mark("standby throttle lifted", None);
        let (on_slow, local_slow, cancelled) = looped?;
        let slow_runs = vec![
            run_of(&throttled, "local", &local_slow),
            run_of(&throttled, "on", &on_slow),
        ];
        let mut notes = vec![followed_note(mode, &on_beside, &on_slow, &rate)];
        notes.extend(standby_wait_note(mode, &local_slow, &on_slow));
        if cancelled > 0 {
            notes.push(
                Note::new(Level::Warn, "standby-commit-cancelled")
                    .count("cancelled", cancelled as f64)
                    .secs("overtime_s", OVERTIME.as_secs_f64()),
            );
        }
        let second = plumb_analyze::lab::Experiment {
            name: "standby's writes throttled".into(),
            setting: Said::new("experiment-standby-throttled")
                .text("standby", mode.word())
                .text("disk", cx.disk.clone().unwrap_or_default())
                .text("device", dev.to_string())
                .text("rate", rate.clone()),
            phase: name,
            baseline: None,
            changed: None,
            window: None,
            notes,
            commits: slow_runs,
            explained: None,
        };
        remove_standby(cx)?;
        Ok(Outcome {
            section: Section::Experiments(vec![first, second]),
            phases,
        })
    }

    fn findings(&self, r: &LabReport) -> Vec<Finding> {
        let Some(e) = r
            .experiments
            .iter()
            .find(|e| e.name == "standby's writes throttled")
        else {
            return Vec::new();
        };
        let Some(n) = e
            .notes
            .iter()
            .find(|n| n.code == "standby-commit-follows-standby")
        else {
            return Vec::new();
        };
        vec![Finding::new(Severity::Warn, "synchronous-standby-disk")
            .experiment(e.setting.clone())
            .phases(vec![e.phase.clone()])
            .secs("before_p50_s", n.facts.num("before_p50_s"))
            .secs("after_p50_s", n.facts.num("after_p50_s"))
            .notes("followed", vec![n.clone()])]
    }
}

/// The standby stopped, its slot dropped and its files removed, then its cgroup.
fn remove_standby(cx: &mut Context) -> Result<()> {
    // Its guard, dropped after, finds nothing left to remove.
    if let Some(s) = cx.resources.standby.take() {
        private::remove(&s.dir).context("removing the standby")?;
    }
    cx.resources.standby_cgroup = None;
    cx.recorder.mark("standby removed", None);
    Ok(())
}

/// Single-row commits in `sess`, timed by the client (µs): with `alternate`, pairs of
/// `synchronous_commit = local` and `on`, commit by commit; else `on` alone. Up to `pairs`
/// pairs or `limit` of time; a commit still waiting [`OVERTIME`] after that is cancelled and
/// ends the loop. Returns (on, local, commits cancelled).
fn commit_loop(
    sess: &mut dyn plumb_engine::Session,
    pairs: usize,
    limit: Duration,
    alternate: bool,
    cancel: &dyn Fn() -> bool,
) -> Result<(Vec<u64>, Vec<u64>, u64)> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let (mut on, mut local) = (Vec::new(), Vec::new());
    let canceller = sess.canceller();
    let (done, cancelled) = (AtomicBool::new(false), AtomicU64::new(0));
    let t0 = Instant::now();
    let insert = "INSERT INTO replica_commits DEFAULT VALUES";
    let r = std::thread::scope(|sc| {
        // The watchdog: past the loop's time and the grace, cancel what waits (again and
        // again: a cancel that arrives between statements is lost).
        sc.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if t0.elapsed() > limit + OVERTIME {
                    if let Some(c) = &canceller {
                        c();
                        cancelled.fetch_add(1, Ordering::SeqCst);
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = (|| -> Result<()> {
            for _ in 0..pairs {
                if cancel() {
                    return Err(Interrupted.into());
                }
                if t0.elapsed() >= limit {
                    break;
                }
                for (setting, out) in [("local", &mut local), ("on", &mut on)] {
                    if !alternate && setting == "local" {
                        continue;
                    }
                    if alternate {
                        sess.execute(&format!("SET synchronous_commit = {setting}"))
                            .context("setting synchronous_commit")?;
                    }
                    let t = Instant::now();
                    sess.execute(insert).with_context(|| {
                        format!("a single-row commit (synchronous_commit = {setting})")
                    })?;
                    out.push(t.elapsed().as_micros() as u64);
                }
            }
            if alternate {
                sess.execute("SET synchronous_commit = on")
                    .context("setting synchronous_commit")?;
            }
            Ok(())
        })();
        done.store(true, Ordering::SeqCst);
        r
    });
    let n = cancelled.load(Ordering::SeqCst);
    match r {
        Ok(()) => Ok((on, local, n)),
        // A statement cancelled by the watchdog (not by the user) ends the loop.
        Err(_) if n > 0 && !cancel() => Ok((on, local, n)),
        Err(e) => Err(e),
    }
}

/// Wait until every standby has replayed what the primary has written (or `limit`).
fn wait_caught_up(
    primary: &plumb_engine::Target,
    limit: Duration,
    cancel: &dyn Fn() -> bool,
) -> Result<()> {
    let mut w = plumb_engine::repl::Watcher::connect(primary)?;
    let t0 = Instant::now();
    loop {
        let p = w.read()?;
        let cur = p.current.as_ref().map(|c| c.bytes).unwrap_or(0);
        if p.senders
            .iter()
            .all(|s| s.replayed.as_ref().is_some_and(|r| r.bytes >= cur))
        {
            return Ok(());
        }
        if cancel() {
            return Err(Interrupted.into());
        }
        if t0.elapsed() > limit {
            crate::refuse!(
                "--replica: the standby did not catch up with the primary within {} s",
                limit.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value below which `q` of the sorted values lie (ms).
fn quantile_ms(us: &[u64], q: f64) -> Option<f64> {
    if us.is_empty() {
        return None;
    }
    let mut v = us.to_vec();
    v.sort_unstable();
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    Some(v[i] as f64 / 1000.0)
}

fn run_of(condition: &str, setting: &str, us: &[u64]) -> CommitRun {
    CommitRun {
        condition: condition.to_string(),
        synchronous_commit: setting.to_string(),
        latency: Latency::from_us(us),
        p10_ms: quantile_ms(us, 0.1),
        p90_ms: quantile_ms(us, 0.9),
    }
}

/// The smallest change in median commit time stated as a wait for the standby (20%).
pub const WAIT_FLOOR: f64 = 0.2;
/// The smallest change stated as commits following the standby's throttled disk: twice as
/// slow. A throttle that the commits wait for multiplies their time (50 writes a second is
/// 20 ms a write); the same disk shared with a throttled standby moves them by a fraction.
pub const FOLLOW_FLOOR: f64 = 1.0;

/// Whether `b`'s commits are slower than `a`'s beyond chance and beyond a practical floor: the
/// rank-sum test over the two loops' commit times (one-sided p < 0.01) and `b`'s median at
/// least `1 + floor` times `a`'s. `None` when a loop has too few commits to test.
pub(crate) fn slower_beyond_spread(a: &[u64], b: &[u64], floor: f64) -> Option<bool> {
    let f = |v: &[u64]| v.iter().map(|&u| u as f64).collect::<Vec<_>>();
    plumb_analyze::stats::larger_beyond_noise(&f(a), &f(b), floor)
}

/// What the commit waited for beyond the local flush (median of `on` − median of `local`),
/// said only when it is beyond the loops' spread.
fn standby_wait_note(mode: ReplicaMode, local: &[u64], on: &[u64]) -> Option<Note> {
    let (l50, o50) = (quantile_ms(local, 0.5)?, quantile_ms(on, 0.5)?);
    let wait = (o50 - l50).max(0.0);
    let apart = slower_beyond_spread(local, on, WAIT_FLOOR)?;
    let code = if apart {
        "standby-commit-wait"
    } else {
        "standby-commit-no-wait"
    };
    Some(
        Note::new(Level::Info, code)
            .text("standby", mode.word())
            .secs("local_p50_s", l50 / 1000.0)
            .secs("commit_p50_s", o50 / 1000.0)
            .secs("standby_wait_s", wait / 1000.0),
    )
}

/// Whether commits followed the standby's throttled disk: the `on` commits with the throttle
/// against those beside the unthrottled standby.
fn followed_note(mode: ReplicaMode, before: &[u64], after: &[u64], rate: &str) -> Note {
    let (b50, a50) = (
        quantile_ms(before, 0.5).unwrap_or(f64::NAN),
        quantile_ms(after, 0.5).unwrap_or(f64::NAN),
    );
    let code = match slower_beyond_spread(before, after, FOLLOW_FLOOR) {
        Some(true) => "standby-commit-follows-standby",
        Some(false) => "standby-commit-unaffected",
        None => "standby-commit-not-measured",
    };
    Note::new(Level::Info, code)
        .text("standby", mode.word())
        .text("rate", rate)
        .secs("before_p50_s", b50 / 1000.0)
        .secs("after_p50_s", a50 / 1000.0)
}

/// The standby made from the primary in `primary_dir` in a cgroup of its own (when plumb may
/// make one), noted before it exists so that it is removed before the primary, also on Ctrl-C;
/// its work the lab's own.
fn make_standby(
    cx: &mut Context,
    mode: ReplicaMode,
    primary_dir: std::path::PathBuf,
) -> Result<private::Running> {
    cx.progress.step(&format!(
        "standby: making {} standby (base backup)",
        mode.a()
    ));
    let standby_dir = cx.work.join("standby");
    let cg = if plumb_sys::os::is_root() {
        Some(
            plumb_io::labcg::LabCgroup::create(
                &format!("plumb-lab-{}-standby", std::process::id()),
                false,
                true,
            )
            .context("--replica: the standby's cgroup")?,
        )
    } else {
        None
    };
    // Noted before it is made; removed (and its slot dropped) before the primary, also on
    // Ctrl-C; its cgroup after.
    cx.resources.standby = Some(Instance::new(standby_dir.clone()));
    let started = private::start(
        &standby_dir,
        &private::StartOptions {
            // New WAL segments are not zero-filled: a 16 MiB write at a throttled rate
            // would hold one commit for as long.
            settings: vec![
                ("shared_buffers".into(), "32MB".into()),
                ("wal_init_zero".into(), "off".into()),
            ],
            port: None,
            standby_of: Some(primary_dir),
            sync: mode == ReplicaMode::Sync,
            bin: cx.config.bin_dir.clone(),
        },
    );
    if let Some(cg) = &cg {
        cg.leave().context("leaving the standby's cgroup")?;
    }
    let standby = started.context("--replica: starting the standby")?;
    cx.resources.standby_cgroup = cg;
    cx.recorder.mark(
        "standby started",
        Some(format!("{} standby, PID {}", mode.word(), standby.pid)),
    );
    // Its work is the lab's own, not a neighbour's.
    cx.recorder.also_own(standby.pid);
    cx.stopped()?;
    Ok(standby)
}

/// Start clean before the throttle: the standby caught up with pgbench's WAL, both servers
/// checkpointed and the page cache written, so that the throttle meets the commits' WAL and
/// nothing else.
fn settle(cx: &Context, target: &plumb_engine::Target, standby: &private::Running) -> Result<()> {
    wait_caught_up(&cx.server.target, Duration::from_secs(120), cx.cancel)?;
    plumb_engine::session(target)
        .and_then(|mut s| s.execute("CHECKPOINT"))
        .context("CHECKPOINT before the standby's throttle")?;
    wait_caught_up(&cx.server.target, Duration::from_secs(60), cx.cancel)?;
    plumb_engine::session(&standby.target())
        .and_then(|mut s| s.execute("CHECKPOINT"))
        .context("a restartpoint on the standby before its throttle")?;
    plumb_sys::os::sync_all();
    Ok(())
}
