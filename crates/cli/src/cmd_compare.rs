//! `plumb compare`: did it get better? Two sets of results, one verdict per figure.

use crate::GlobalArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};

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

/// The largest result file plumb compare reads (a lab's report.json is a few MB).
const MAX_RESULT_BYTES: u64 = 64 << 20;

/// The result files a plumb report directory holds: `plumb lab --out`'s and `plumb load --out`'s.
const RESULT_FILES: [&str; 2] = ["report.json", "load.json"];

/// A directory reads as the result it holds (a lab's report.json, a load's load.json). Each
/// file is read up to [`MAX_RESULT_BYTES`], a regular file or a pipe (never a device).
fn read(files: &[PathBuf]) -> Result<Vec<(String, serde_json::Value)>> {
    let mut meter = Counter::new("reading results", files.len(), files.len() >= 200);
    files
        .iter()
        .map(|f| {
            meter.tick();
            let path = if f.is_dir() {
                match RESULT_FILES.iter().map(|n| f.join(n)).find(|p| p.exists()) {
                    Some(p) => p,
                    None => bail!(
                        "{}: a directory with no plumb result in it (looked for {}: plumb lab --out and plumb load --out write them)",
                        f.display(),
                        RESULT_FILES.join(" and ")
                    ),
                }
            } else {
                f.clone()
            };
            let text = plumb_sys::read_text_bounded(&path, MAX_RESULT_BYTES)
                .with_context(|| path.display().to_string())?;
            let v = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{}: not JSON (plumb io, plumb load and plumb delta --json write it)",
                    path.display()
                )
            })?;
            Ok((f.display().to_string(), v))
        })
        .collect()
}

/// A count on stderr for long work (a history of hundreds of results), when it is a terminal:
/// at most ten times a second, and at the end.
struct Counter {
    what: &'static str,
    of: usize,
    done: usize,
    on: bool,
    last: std::time::Instant,
}

impl Counter {
    fn new(what: &'static str, of: usize, long: bool) -> Counter {
        use std::io::IsTerminal;
        let on = long && std::io::stderr().is_terminal();
        let last = std::time::Instant::now();
        Counter {
            what,
            of,
            done: 0,
            on,
            last,
        }
    }

    fn tick(&mut self) {
        self.done += 1;
        let end = self.done == self.of;
        if self.on && (end || self.last.elapsed().as_millis() >= 100) {
            self.last = std::time::Instant::now();
            eprint!(
                "\rplumb compare: {} {} of {}",
                self.what, self.done, self.of
            );
            if end {
                eprintln!();
            }
        }
    }
}

/// The results in a history directory (not hidden entries), ordered by the lab's start time
/// where every one has it, else by name.
fn read_history(dir: &Path) -> Result<Vec<(String, serde_json::Value)>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("--history {}", dir.display()))?
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut runs = read(&entries)?;
    if runs.iter().all(|r| r.1["started_unix_ms"].is_u64()) {
        runs.sort_by_key(|r| r.1["started_unix_ms"].as_u64());
    }
    Ok(runs)
}

fn history(g: &GlobalArgs, a: &CompareArgs, dir: &Path) -> Result<i32> {
    let runs = read_history(dir)?;
    let read: Vec<plumb_analyze::compare::Run> = runs
        .iter()
        .map(|(f, v)| plumb_analyze::compare::read_run(f, v))
        .collect::<Result<_, _>>()?;
    if read.len() < 4 {
        bail!(
            "--history {}: {} result(s); a change point needs at least 2 runs either side",
            dir.display(),
            read.len()
        );
    }
    let mut meter: Option<Counter> = None;
    let r = plumb_analyze::compare::history_with(&read, a.min_change, &mut |_, of| {
        meter
            .get_or_insert_with(|| Counter::new("figures searched", of, read.len() >= 200))
            .tick()
    })?;
    plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
    let worse = r.changes.iter().any(|c| !c.better);
    Ok(if a.fail_on.is_some() && worse { 1 } else { 0 })
}

/// A point of a recording, from its start: a duration (`10m`, `90s`) or the clock the report's
/// charts show (`M:SS`, `H:MM:SS`).
fn offset(arg: &str, v: &str) -> Result<f64> {
    if v.contains(':') {
        let parts: Vec<&str> = v.split(':').collect();
        let nums: Option<Vec<u64>> = parts.iter().map(|p| p.parse().ok()).collect();
        return match nums.as_deref() {
            Some([m, s]) if *s < 60 => Ok((m * 60 + s) as f64),
            Some([h, m, s]) if *m < 60 && *s < 60 => Ok((h * 3600 + m * 60 + s) as f64),
            _ => bail!("{arg}: {v} is not M:SS or H:MM:SS"),
        };
    }
    plumb_sys::units::parse_duration(v)
        .map(|d| d.as_secs_f64())
        .map_err(|e| anyhow::anyhow!("{arg}: {e}"))
}

/// `FILE@FROM-TO`: a window of a recording, as a run.
fn window(arg: &str) -> Result<plumb_analyze::compare::Run> {
    let (file, span) = arg.rsplit_once('@').unwrap_or((arg, ""));
    let Some((from, to)) = span.split_once('-') else {
        bail!("{arg}: a recording's window is FILE@FROM-TO (rec.plumb@10m-15m)");
    };
    let (from_s, to_s) = (offset(arg, from)?, offset(arg, to)?);
    if from_s >= to_s {
        bail!("{arg}: the window's start is not before its end");
    }
    let rec = plumb_store::read(Path::new(file)).with_context(|| arg.to_string())?;
    let end_s = rec.times_ms.last().copied().unwrap_or(0) as f64 / 1000.0;
    if from_s >= end_s {
        bail!("{arg}: the recording ends at {end_s:.0} s");
    }
    Ok(plumb_analyze::compare::recording_run(
        arg, &rec, from_s, to_s,
    ))
}

/// The runs named: windows of recordings, or results.
fn runs(files: &[PathBuf]) -> Result<Vec<plumb_analyze::compare::Run>> {
    files
        .iter()
        .map(|f| {
            let s = f.to_string_lossy();
            if !f.exists() && s.contains('@') {
                return window(&s);
            }
            let (name, v) = read(std::slice::from_ref(f))?.remove(0);
            Ok(plumb_analyze::compare::read_run(&name, &v)?)
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
    if let Some(dir) = &a.history {
        return history(g, a, dir);
    }
    // Everything after `--` is a candidate's run: an option there is a mistake, said as one
    // (it read as a file: "--html: No such file or directory").
    if let Some(o) = a.candidate.iter().find(|c| {
        let s = c.to_string_lossy();
        s.starts_with('-') && !c.exists()
    }) {
        bail!(
            "{}: after -- come only the candidate's runs; options go before --",
            o.display()
        );
    }
    let either = |list: &[PathBuf], opt: &[PathBuf]| -> Vec<PathBuf> {
        if opt.is_empty() { list } else { opt }.to_vec()
    };
    let r = plumb_analyze::compare::compare_read(
        runs(&either(&a.baseline, &a.baseline_runs))?,
        runs(&either(&a.candidate, &a.candidate_runs))?,
        a.min_change,
    )?;
    if r.figures.is_empty() {
        bail!("the two sides have no figure in common");
    }
    if let Some(f) = &a.html {
        std::fs::write(f, plumb_report::compare_render::page(&r))
            .with_context(|| format!("--html {}", f.display()))?;
    }
    plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
    Ok(if a.fail_on.is_some() && r.worse() > 0 {
        1
    } else {
        0
    })
}
