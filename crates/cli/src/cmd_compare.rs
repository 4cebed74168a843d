//! `plumb compare`: did it get better? Two sets of results, one verdict per figure.

use crate::GlobalArgs;
use anyhow::{Context, Result};
use clap::Args;
use plumb_lab::compare::{Compare, CompareConfig, Compared, Sides};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline's results, one or more runs: `plumb lab` report directories (or their
    /// report.json), `plumb io`, `plumb load` or `plumb delta` output files (--json), or windows of
    /// recordings (`rec.plumb@10m-15m`, `rec.plumb@1:00:00-1:05:00`, from the start).
    #[arg(required_unless_present_any = ["history", "baseline_runs"], value_name = "BASELINE")]
    pub baseline: Vec<PathBuf>,
    /// After `--`: the candidate's results, one or more runs.
    #[arg(
        last = true,
        required_unless_present_any = ["history", "candidate_runs"],
        value_name = "CANDIDATE"
    )]
    pub candidate: Vec<PathBuf>,
    /// The baseline's runs as an option, for scripts (instead of the first list).
    #[arg(long = "baseline", value_name = "RUN", num_args = 1.., conflicts_with = "baseline", requires = "candidate_runs")]
    pub baseline_runs: Vec<PathBuf>,
    /// The candidate's runs as an option (instead of the list after `--`).
    #[arg(long = "candidate", value_name = "RUN", num_args = 1.., conflicts_with = "candidate", requires = "baseline_runs")]
    pub candidate_runs: Vec<PathBuf>,
    /// A directory of dated results of one kind: where did each figure move? Change points by
    /// E-divisive means, runs in order of the lab's start time, else of their names.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["baseline", "candidate", "baseline_runs", "candidate_runs"])]
    pub history: Option<PathBuf>,
    /// The practical floor: a change counts only when its 95% interval lies wholly beyond
    /// this many percent either way.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub min_change: f64,
    /// Also write the comparison as an HTML page: the table, what differed, and each timed
    /// figure's runs overlaid second by second.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Exit 1 when a figure is worse by the rule (for pipelines); 0 otherwise, 2 on bad input.
    #[arg(long, value_name = "VERDICT", value_parser = ["worse"])]
    pub fail_on: Option<String>,
}

/// A count on stderr for long work (a history of hundreds of results), when it is a terminal:
/// at most ten times a second, and at the end.
struct Counter {
    last: Option<std::time::Instant>,
    on: bool,
}

impl Counter {
    fn new() -> Counter {
        use std::io::IsTerminal;
        Counter {
            last: None,
            on: std::io::stderr().is_terminal(),
        }
    }
}

impl plumb_lab::Events for Counter {
    fn event(&mut self, e: plumb_lab::Event<'_>) {
        let plumb_lab::Event::Step { n, of, what, .. } = e else {
            return;
        };
        let end = n == of;
        let due = self.last.is_none_or(|t| t.elapsed().as_millis() >= 100);
        if self.on && of >= 200 && (end || due) {
            self.last = Some(std::time::Instant::now());
            eprint!("\rplumb compare: {what} {n} of {of}");
            if end {
                eprintln!();
            }
        }
    }
}

pub fn compare(g: &GlobalArgs, a: &CompareArgs) -> Result<i32> {
    let either = |list: &[PathBuf], opt: &[PathBuf]| -> Vec<PathBuf> {
        if opt.is_empty() { list } else { opt }.to_vec()
    };
    let sides = match &a.history {
        Some(dir) => Sides::History(dir.clone()),
        None => Sides::Two {
            baseline: either(&a.baseline, &a.baseline_runs),
            candidate: either(&a.candidate, &a.candidate_runs),
        },
    };
    let compare = Compare::new(CompareConfig {
        sides,
        min_change: a.min_change,
    })?;
    let worse = match compare.run(&mut Counter::new(), &plumb_sys::signal::stop_requested)? {
        Compared::History(r) => {
            plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
            r.changes.iter().any(|c| !c.better)
        }
        Compared::Two(r) => {
            if let Some(f) = &a.html {
                std::fs::write(f, plumb_report::compare_render::page(&r))
                    .with_context(|| format!("--html {}", f.display()))?;
            }
            plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
            r.worse() > 0
        }
    };
    Ok(i32::from(a.fail_on.is_some() && worse))
}
