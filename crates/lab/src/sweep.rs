//! The one sweep runner: a job at several levels (queue depths or rates), each run `reps`
//! times on prepared targets, then elasticity and the knee. `plumb io sweep` and the lab's
//! storage probe both run through here.

use anyhow::Result;
use plumb_analyze::sweep::{find_knee, rep_of, set_elasticity, Level, SweepKind, SweepReport};
use plumb_load::job::Job;
use plumb_load::target::Safety;

/// One level: its label, its numeric value (for charts; None for "unthrottled") and its job.
pub type LevelJob = (String, Option<f64>, Job);

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

pub struct Sweep<'a> {
    pub kind: SweepKind,
    pub base: &'a Job,
    pub levels: &'a [LevelJob],
    pub reps: u32,
    pub safety: &'a Safety,
    pub command_line: &'a str,
}

/// Run every level `reps` times; None when stopped. `on_run(level, rep, reps)` is called
/// before each run, for progress.
pub fn run(
    s: Sweep,
    cancel: &dyn Fn() -> bool,
    on_run: &mut dyn FnMut(&str, u32, u32),
) -> Result<Option<SweepReport>> {
    let mut levels = Vec::new();
    for (label, value, j) in s.levels {
        let mut runs = Vec::new();
        for rep in 0..s.reps {
            on_run(label, rep + 1, s.reps);
            match run_once(j, s.safety, cancel)? {
                Some(r) => runs.push(rep_of(&r)),
                None => return Ok(None),
            }
        }
        levels.push(Level::new(label.clone(), *value, runs));
    }
    set_elasticity(&mut levels);
    let knee = find_knee(&levels);
    Ok(Some(SweepReport {
        command_line: s.command_line.to_string(),
        sweep_over: s.kind,
        job: s.base.clone(),
        repetitions: s.reps,
        levels,
        knee,
        chart: None,
    }))
}

/// One run of a job on prepared targets (removed again unless kept); None when stopped.
pub fn run_once(
    j: &Job,
    safety: &Safety,
    cancel: &dyn Fn() -> bool,
) -> Result<Option<plumb_load::run::RunResult>> {
    let targets = plumb_load::target::prepare(j, safety, cancel);
    match targets.and_then(|t| plumb_load::run::run(j, &t)) {
        Ok(r) => Ok(Some(r)),
        Err(plumb_load::Error::Interrupted) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
