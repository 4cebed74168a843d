//! `plumb compare`: did it get better? Two sets of results, one verdict per figure.

use crate::GlobalArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The baseline's results, one or more runs: `plumb lab` report directories (or their
    /// report.json), `plumb io --json` or `plumb load --json` output files.
    #[arg(required = true, value_name = "BASELINE")]
    pub baseline: Vec<PathBuf>,
    /// After `--`: the candidate's results, one or more runs.
    #[arg(last = true, required = true, value_name = "CANDIDATE")]
    pub candidate: Vec<PathBuf>,
    /// The practical floor: a change counts only when its 95% interval lies wholly beyond
    /// this many percent either way.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub min_change: f64,
    /// Exit 1 when a figure is worse by the rule (for pipelines); 0 otherwise, 2 on bad input.
    #[arg(long, value_name = "VERDICT", value_parser = ["worse"])]
    pub fail_on: Option<String>,
}

/// A lab's report directory reads as its report.json.
fn read(files: &[PathBuf]) -> Result<Vec<(String, serde_json::Value)>> {
    files
        .iter()
        .map(|f| {
            let path = if f.is_dir() {
                f.join("report.json")
            } else {
                f.clone()
            };
            let text = std::fs::read_to_string(&path).with_context(|| {
                if f.is_dir() {
                    format!("{}: not a plumb lab report directory", f.display())
                } else {
                    f.display().to_string()
                }
            })?;
            let v = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{}: not JSON (plumb io, plumb load --json write it)",
                    path.display()
                )
            })?;
            Ok((f.display().to_string(), v))
        })
        .collect()
}

pub fn compare(g: &GlobalArgs, a: &CompareArgs) -> Result<i32> {
    if !(a.min_change.is_finite() && (0.0..100.0).contains(&a.min_change)) {
        bail!(
            "--min-change {}: a percentage from 0 to under 100",
            a.min_change
        );
    }
    let (base, cand) = (read(&a.baseline)?, read(&a.candidate)?);
    let r = plumb_analyze::compare::compare_files(&base, &cand, a.min_change)?;
    if r.figures.is_empty() {
        bail!("the two sides have no figure in common");
    }
    plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
    Ok(if a.fail_on.is_some() && r.worse() > 0 {
        1
    } else {
        0
    })
}
