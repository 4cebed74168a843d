//! The one sweep runner: a job at several levels (queue depths or rates), each run `reps`
//! times on prepared targets, then elasticity and the knee. `plumb io sweep` and the lab's
//! storage probe both run through here.

use crate::Result;
use plumb_analyze::interference::Interference;
use plumb_analyze::sweep::{
    judge_levels, rep_of, set_elasticity, Level, Rep, SweepKind, SweepReport,
};
use plumb_io::job::Job;
use plumb_io::target::Safety;
use plumb_record::watch::{Scope, Watch};

/// One level: its label, its numeric value (for charts; None for "unthrottled") and its job.
pub type LevelJob = (String, Option<f64>, Job);

use plumb_io::job::JobError;

/// Queue depths from a comma-separated list ("1,2,4"): sorted, each once, 1 to 4096. The
/// error names the item.
pub(crate) fn parse_qd_levels(list: &str) -> std::result::Result<Vec<u32>, JobError> {
    let mut qds = Vec::new();
    for item in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let q: u32 = item
            .parse()
            .map_err(|_| format!("{item:?} is not a queue depth"))?;
        if q == 0 || q > 4096 {
            return Err(format!("{q} must be 1 to 4096").into());
        }
        qds.push(q);
    }
    qds.sort_unstable();
    qds.dedup();
    Ok(qds)
}

/// The base job at each rate of a comma-separated list ("50MB/s,2000iops,unthrottled"), in
/// order of increasing load (an IOPS rate counts as IOPS × block size; unthrottled last). The
/// error names the item.
pub(crate) fn rate_levels(base: &Job, list: &str) -> std::result::Result<Vec<LevelJob>, JobError> {
    use plumb_sys::units::{parse_rate, Rate};
    let mut v = Vec::new();
    for item in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let mut j = base.clone();
        if matches!(item, "unthrottled" | "max" | "none") {
            j.rate = None;
            v.push(("unthrottled".to_string(), None, j));
            continue;
        }
        let r = parse_rate(item)?;
        let bps = match r {
            Rate::BytesPerS(b) => b,
            Rate::Iops(i) => i * base.block_size as f64,
        };
        j.rate = Some(r);
        j.rate_per_thread = false;
        v.push((item.to_string(), Some(bps), j));
    }
    // Unthrottled (None) sorts after every rate.
    v.sort_by(|x, y| match (x.1, y.1) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (a, b) => b.is_some().cmp(&a.is_some()),
    });
    Ok(v)
}

/// The base job at each queue depth (batches no larger than the depth).
pub fn qd_levels(base: &Job, qds: &[u32]) -> Vec<LevelJob> {
    qds.iter()
        .map(|&q| {
            let mut j = base.clone();
            j.queue_depth = q;
            j.batch_complete = j.batch_complete.min(q);
            j.batch_submit = j.batch_submit.map(|b| b.min(q));
            (q.to_string(), Some(q as f64), j)
        })
        .collect()
}

/// A sweep's levels, in order of increasing load: the request rates of `rates`
/// (`--rates 1000,2000`), else the queue depths of `qd_levels` (default 1 to 64), each a
/// checked copy of `base`.
fn plan_levels(
    base: &Job,
    rates: Option<&str>,
    qd_levels: Option<&str>,
) -> crate::Result<(plumb_analyze::sweep::SweepKind, Vec<LevelJob>)> {
    use plumb_analyze::sweep::SweepKind;
    let (kind, levels) = match rates {
        Some(list) => (
            SweepKind::Rate,
            rate_levels(base, list)
                .map_err(|e| crate::Error::quoting(format!("--rates: {e}"), e))?,
        ),
        None => {
            let list = qd_levels.unwrap_or("1,2,4,8,16,32,64");
            let qds = parse_qd_levels(list)
                .map_err(|e| crate::Error::quoting(format!("--qd-levels: {e}"), e))?;
            (SweepKind::QueueDepth, self::qd_levels(base, &qds))
        }
    };
    if levels.len() < 2 {
        crate::refuse!("a sweep needs at least two levels");
    }
    for (_, _, j) in &levels {
        j.validate()
            .map_err(|e| crate::Error::quoting(e.to_string(), e))?;
    }
    Ok((kind, levels))
}

/// Make the sweep's missing target files once (the runs then reuse them) and let the runs
/// overwrite them; None when stopped while making them (what was made is removed).
fn scratch_files(
    base: &Job,
    keep: bool,
    safety: &mut Safety,
    cancel: &dyn Fn() -> bool,
) -> plumb_io::Result<Option<Vec<plumb_io::target::Scratch>>> {
    let mut scratch = Vec::new();
    for t in &base.targets {
        match plumb_io::target::scratch_file(t, base.file_size, base.seed, keep, cancel) {
            Ok(Some(s)) => {
                safety.overwrite.push(t.clone());
                scratch.push(s);
            }
            Ok(None) => {}
            Err(plumb_io::Error::Interrupted) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(Some(scratch))
}

pub struct Sweep<'a> {
    pub kind: SweepKind,
    pub base: &'a Job,
    pub levels: &'a [LevelJob],
    pub reps: u32,
    /// Runs a level may take in all ([`max_attempts`] of `reps` for `plumb io sweep`; the lab's
    /// plan may allow fewer).
    pub max_runs: u32,
    pub safety: &'a Safety,
    pub command_line: &'a str,
    /// Neighbours accepted (`--accept-neighbour`): noted in each run's window.
    pub accept: &'a [plumb_analyze::interference::Accept],
}

/// Levels whose IOPS spread (max − min over median) is above this get more rounds.
pub const STABLE_SPREAD: f64 = 0.10;

/// How many runs a level may take in all: its clean `reps`, retries of disturbed runs, and
/// rounds added while its spread is above [`STABLE_SPREAD`].
pub(crate) fn max_attempts(reps: u32) -> u32 {
    reps.saturating_mul(2).max(reps + 2)
}

/// Run the levels in interleaved rounds (A B C, A B C … so that a slow drift or a neighbour
/// touches every level, not one) until each has `reps` clean runs and, with two or more, an
/// IOPS spread within [`STABLE_SPREAD`] — or `max_runs` runs. Each run is watched for
/// interference; a disturbed one is kept as evidence and run again. None when stopped.
/// `on_run(level, attempt, reps)` is called before each run, for progress.
pub fn run(
    s: Sweep,
    cancel: &dyn Fn() -> bool,
    on_run: &mut dyn FnMut(&str, u32, u32),
) -> Result<Option<SweepReport>> {
    let root = plumb_sys::Root::host();
    let mut scope = Scope::new(root.clone(), devices_under(&root, &s.base.targets));
    scope.accept = s.accept.to_vec();
    let mut runs: Vec<Vec<Rep>> = vec![Vec::new(); s.levels.len()];
    let limit = s.max_runs.max(s.reps);
    loop {
        let mut ran = false;
        for ((label, _, j), done) in s.levels.iter().zip(runs.iter_mut()) {
            if settled(done, s.reps) || done.len() as u32 >= limit {
                continue;
            }
            on_run(label, done.len() as u32 + 1, s.reps);
            match watched_run(j, s.safety, cancel, &scope, &mut || {})? {
                Some((r, w)) => {
                    let mut rep = rep_of(&r);
                    rep.interference = Some(w);
                    done.push(rep);
                }
                None => return Ok(None),
            }
            ran = true;
        }
        if !ran {
            break;
        }
    }
    let mut levels: Vec<Level> = s
        .levels
        .iter()
        .zip(runs)
        .map(|((label, value, _), reps)| Level::new(label.clone(), *value, reps))
        .collect();
    set_elasticity(&mut levels);
    let (knee, verdict, notes) = judge_levels(&levels);
    Ok(Some(SweepReport {
        command_line: s.command_line.to_string(),
        sweep_over: s.kind,
        job: s.base.clone(),
        repetitions: s.reps,
        levels,
        knee,
        verdict,
        notes,
        chart: None,
    }))
}

/// Enough clean runs, and (with two or more) a spread inside the tolerance.
fn settled(done: &[Rep], reps: u32) -> bool {
    let clean: Vec<f64> = done
        .iter()
        .filter(|r| r.is_clean())
        .map(|r| r.iops)
        .collect();
    if (clean.len() as u32) < reps {
        return false;
    }
    clean.len() < 2
        || plumb_analyze::sweep::spread(&clean).is_none_or(|s| s.relative() <= STABLE_SPREAD)
}

/// The block devices under the targets (where their files live), for the windows.
pub fn devices_under(root: &plumb_sys::Root, targets: &[std::path::PathBuf]) -> Vec<String> {
    let mut v: Vec<String> = targets
        .iter()
        .filter_map(|t| {
            plumb_sys::block::device_under(root, t).or_else(|| {
                t.parent()
                    .and_then(|p| plumb_sys::block::device_under(root, p))
            })
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

/// One run on prepared targets, watched.
pub(crate) fn watched_run(
    j: &Job,
    safety: &Safety,
    cancel: &dyn Fn() -> bool,
    scope: &Scope,
    ready: &mut dyn FnMut(),
) -> Result<Option<(plumb_io::run::RunResult, Interference)>> {
    let targets = match plumb_io::target::prepare(j, safety, cancel) {
        Ok(t) => t,
        Err(plumb_io::Error::Interrupted) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    ready();
    let watch = Watch::start(scope);
    let r = plumb_io::run::run(j, &targets, cancel);
    let mut watched = watch.finish();
    match r {
        Ok(r) => {
            if let Some(n) = plumb_analyze::interference::run_stall(&r) {
                watched.add(n);
            }
            Ok(Some((r, watched)))
        }
        Err(plumb_io::Error::Interrupted) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// One run of a job on prepared targets (removed again unless kept); None when stopped.
pub(crate) fn run_once(
    j: &Job,
    safety: &Safety,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<plumb_io::run::RunResult>> {
    let targets = plumb_io::target::prepare(j, safety, cancel);
    match targets.and_then(|t| plumb_io::run::run(j, &t, cancel)) {
        Ok(r) => Ok(Some(r)),
        Err(plumb_io::Error::Interrupted) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `plumb io sweep` as the flags say it.
pub struct SweepConfig {
    /// The job every level is a copy of (its targets, pattern and run length).
    pub base: Job,
    /// `--rates`: a sweep over request rates; else `qd_levels` (default 1 to 64).
    pub rates: Option<String>,
    pub qd_levels: Option<String>,
    /// Clean runs per level (1 to 100).
    pub reps: u32,
    pub safety: Safety,
    /// Keep the target files plumb makes (`--keep`).
    pub keep: bool,
    pub command_line: String,
    pub accept: Vec<plumb_analyze::interference::Accept>,
}

/// A checked `plumb io sweep`: its levels planned, nothing made yet.
pub struct IoSweep {
    config: SweepConfig,
    kind: SweepKind,
    levels: Vec<LevelJob>,
}

impl IoSweep {
    /// Every check before a file is made: the repetitions, and each level's job.
    pub fn new(config: SweepConfig) -> Result<IoSweep> {
        if config.reps == 0 || config.reps > 100 {
            crate::refuse!("--reps {}: use 1 to 100", config.reps);
        }
        let (kind, levels) = plan_levels(
            &config.base,
            config.rates.as_deref(),
            config.qd_levels.as_deref(),
        )?;
        Ok(IoSweep {
            config,
            kind,
            levels,
        })
    }

    /// Make the missing target files once, run the levels in rounds, and judge them;
    /// [`Interrupted`](crate::Error::Interrupted) when `cancel` (or a signal) stopped it,
    /// what plumb made removed. `events` hears each run
    /// begin (`Event::Step`: a run planned as its warm-up, measured time, cool-down and half a
    /// second; runs added because the runs so far disagree extend the plan) and the end.
    pub fn run(
        self,
        events: &mut dyn crate::Events,
        cancel: &dyn Fn() -> bool,
    ) -> Result<SweepReport> {
        let c = &self.config;
        let mut safety = c.safety.clone();
        let Some(scratch) = scratch_files(&c.base, c.keep, &mut safety, cancel)? else {
            return Err(crate::Interrupted.into());
        };
        let per = c.base.warmup
            + c.base.duration
            + c.base.cooldown
            + std::time::Duration::from_millis(500);
        let planned = self.levels.len() as u32 * c.reps;
        let mut done = 0u32;
        let mut step = |label: &str, rep: u32, reps: u32| {
            let what = if rep > reps {
                format!("level {label}, extra run {rep} (the runs so far disagree)")
            } else {
                format!("level {label}, run {rep}/{reps}")
            };
            let of = planned.max(done + 1);
            events.event(crate::Event::run_begins(done, of, &what, per));
            done += 1;
        };
        let swept = run(
            Sweep {
                kind: self.kind,
                base: &c.base,
                levels: &self.levels,
                reps: c.reps,
                max_runs: max_attempts(c.reps),
                safety: &safety,
                command_line: &c.command_line,
                accept: &c.accept,
            },
            cancel,
            &mut step,
        )?;
        drop(scratch);
        let swept = swept.ok_or(crate::Interrupted)?;
        events.event(crate::Event::Finished { of: done });
        Ok(swept)
    }
}

/// `plumb io run` (and `plumb io diskspd`) as the flags say it: one job on its targets.
pub struct IoRunConfig {
    pub job: Job,
    pub safety: Safety,
    /// Said with the report (a diskspd flag plumb reads its own way, a file the page cache
    /// holds).
    pub notes: Vec<String>,
    pub command_line: String,
    pub accept: Vec<plumb_analyze::interference::Accept>,
}

/// A checked `plumb io run`.
pub struct IoRun {
    config: IoRunConfig,
}

impl IoRun {
    /// The job checked before a file is made.
    pub fn new(config: IoRunConfig) -> Result<IoRun> {
        config
            .job
            .validate()
            .map_err(|e| crate::Error::quoting(e.to_string(), e))?;
        Ok(IoRun { config })
    }

    /// Prepare the targets, run the job watched for neighbours, and report it;
    /// [`Interrupted`](crate::Error::Interrupted) when `cancel` (or a signal) stopped it. Created files are removed when this returns (unless
    /// kept), on an error too. `events` hears the run begin once its files are ready
    /// (`Event::Step`, planned as its warm-up, measured time and cool-down) and its end.
    pub fn run(
        self,
        events: &mut dyn crate::Events,
        cancel: &dyn Fn() -> bool,
    ) -> Result<plumb_analyze::io::IoReport> {
        let c = self.config;
        let j = &c.job;
        let total = j.warmup + j.duration + j.cooldown;
        let root = plumb_sys::Root::host();
        let mut scope = Scope::new(root.clone(), devices_under(&root, &j.targets));
        scope.accept = c.accept.clone();
        let mut ready = || events.event(crate::Event::run_begins(0, 1, &j.name, total));
        let Some((r, watched)) = watched_run(j, &c.safety, cancel, &scope, &mut ready)? else {
            return Err(crate::Interrupted.into());
        };
        events.event(crate::Event::Finished { of: 1 });
        let mut rep = plumb_analyze::io::build(&r, &c.command_line, c.notes);
        rep.interference = Some(watched);
        Ok(rep)
    }
}

#[cfg(test)]
mod level_tests {
    use super::*;

    #[test]
    fn queue_depths_are_sorted_once_and_bad_items_are_named() {
        assert_eq!(parse_qd_levels("8, 1,2,8,,4").unwrap(), [1, 2, 4, 8]);
        assert!(parse_qd_levels("1,x").unwrap_err().0.contains("\"x\""));
        assert!(parse_qd_levels("0").unwrap_err().0.contains("1 to 4096"));
        assert!(parse_qd_levels("5000").is_err());
    }

    #[test]
    fn rates_run_in_order_of_load_with_unthrottled_last() {
        let mut base = Job::new("t");
        base.block_size = 8192;
        base.rate_per_thread = true;
        // 1000 IOPS of 8 KiB = 8.192 MB/s: between 5MB/s and 10MB/s.
        let v = rate_levels(&base, "unthrottled,10MB/s,1000iops,5MB/s").unwrap();
        let labels: Vec<&str> = v.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(labels, ["5MB/s", "1000iops", "10MB/s", "unthrottled"]);
        assert!(v[3].2.rate.is_none() && v[3].1.is_none());
        assert!(v[..3]
            .iter()
            .all(|l| l.2.rate.is_some() && !l.2.rate_per_thread));
        assert!(rate_levels(&base, "5MB/s,fast")
            .unwrap_err()
            .0
            .contains("fast"));
    }
}
