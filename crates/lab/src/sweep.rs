//! The one sweep runner: a job at several levels (queue depths or rates), each run `reps`
//! times on prepared targets, then elasticity and the knee. `plumb io sweep` and the lab's
//! storage probe both run through here.

use anyhow::Result;
use plumb_analyze::sweep::{find_knee, rep_of, set_elasticity, Level, SweepKind, SweepReport};
use plumb_load::job::Job;
use plumb_load::target::Safety;

/// One level: its label, its numeric value (for charts; None for "unthrottled") and its job.
pub type LevelJob = (String, Option<f64>, Job);

/// Queue depths from a comma-separated list ("1,2,4"): sorted, each once, 1 to 4096. The
/// error names the item.
pub fn parse_qd_levels(list: &str) -> std::result::Result<Vec<u32>, String> {
    let mut qds = Vec::new();
    for item in list.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let q: u32 = item
            .parse()
            .map_err(|_| format!("{item:?} is not a queue depth"))?;
        if q == 0 || q > 4096 {
            return Err(format!("{q} must be 1 to 4096"));
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
pub fn rate_levels(base: &Job, list: &str) -> std::result::Result<Vec<LevelJob>, String> {
    use plumb_load::units::{parse_rate, Rate};
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

#[cfg(test)]
mod level_tests {
    use super::*;

    #[test]
    fn queue_depths_are_sorted_once_and_bad_items_are_named() {
        assert_eq!(parse_qd_levels("8, 1,2,8,,4").unwrap(), [1, 2, 4, 8]);
        assert!(parse_qd_levels("1,x").unwrap_err().contains("\"x\""));
        assert!(parse_qd_levels("0").unwrap_err().contains("1 to 4096"));
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
            .contains("fast"));
    }
}
