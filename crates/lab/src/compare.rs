//! `plumb compare` as a library: the runs read (result files, report directories, windows of
//! recordings, or a history directory), checked, and compared by `analyze::compare`.
//!
//! ```text
//! CompareConfig -> Compare::new (the floor, the sides) -> run(events, cancel) -> Compared
//! ```

use crate::error::{Context, Error, Result};
use crate::{Event, Events, Interrupted};
use plumb_analyze::compare::{CompareReport, HistoryReport, Run};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest result file plumb compare reads (a lab's report.json is a few MB).
const MAX_RESULT_BYTES: u64 = 64 << 20;

/// The result files a plumb report directory holds: `plumb lab --out`'s and `plumb load --out`'s.
const RESULT_FILES: [&str; 2] = ["report.json", "load.json"];

/// What is compared.
pub enum Sides {
    /// The baseline's runs against the candidate's: result files, report directories, or
    /// windows of recordings (`rec.plumb@10m-15m`).
    Two {
        baseline: Vec<PathBuf>,
        candidate: Vec<PathBuf>,
    },
    /// A directory of dated results of one kind: where did each figure move?
    History(PathBuf),
}

pub struct CompareConfig {
    pub sides: Sides,
    /// The practical floor, in percent: a change counts only when its 95% interval lies
    /// wholly beyond it.
    pub min_change: f64,
}

/// What the comparison found.
pub enum Compared {
    Two(CompareReport),
    History(HistoryReport),
}

/// A checked comparison.
pub struct Compare {
    config: CompareConfig,
}

impl Compare {
    /// The floor and the sides checked before a file is read.
    pub fn new(config: CompareConfig) -> Result<Compare> {
        let m = config.min_change;
        if !(m.is_finite() && (0.0..100.0).contains(&m)) {
            crate::refuse!("--min-change {m}: a percentage from 0 to under 100");
        }
        if let Sides::Two { candidate, .. } = &config.sides {
            // Everything after `--` is a candidate's run: an option there is a mistake, said
            // as one (it read as a file: "--html: No such file or directory").
            if let Some(o) = candidate
                .iter()
                .find(|c| c.to_string_lossy().starts_with('-') && !c.exists())
            {
                crate::refuse!(
                    "{}: after -- come only the candidate's runs; options go before --",
                    o.display()
                );
            }
        }
        Ok(Compare { config })
    }

    /// Read every run and compare them. `events` hears each result read and each figure
    /// searched (`Event::Step`, counted; a history of hundreds takes a while) and the end;
    /// `cancel` stops it between files ([`Interrupted`]).
    pub fn run(self, events: &mut dyn Events, cancel: &dyn Fn() -> bool) -> Result<Compared> {
        let min = self.config.min_change;
        match &self.config.sides {
            Sides::Two {
                baseline,
                candidate,
            } => {
                let of = (baseline.len() + candidate.len()) as u32;
                let mut read = Reader {
                    events,
                    cancel,
                    done: 0,
                    of,
                };
                let a = read.runs(baseline)?;
                let b = read.runs(candidate)?;
                let r = plumb_analyze::compare::compare_read(a, b, min)?;
                if r.figures.is_empty() {
                    crate::refuse!("the two sides have no figure in common");
                }
                events.event(Event::Finished { of });
                Ok(Compared::Two(r))
            }
            Sides::History(dir) => {
                let runs = history_runs(dir, events, cancel)?;
                if runs.len() < 4 {
                    crate::refuse!(
                        "--history {}: {} result(s); a change point needs at least 2 runs either side",
                        dir.display(),
                        runs.len()
                    );
                }
                let r = plumb_analyze::compare::history_with(&runs, min, &mut |k, of| {
                    let (k, of) = (k as u32, of as u32);
                    events.event(Event::run_begins(k, of, "figures searched", Duration::ZERO))
                })?;
                events.event(Event::Finished {
                    of: runs.len() as u32,
                });
                Ok(Compared::History(r))
            }
        }
    }
}

/// Reads the runs, one step each.
struct Reader<'a> {
    events: &'a mut dyn Events,
    cancel: &'a dyn Fn() -> bool,
    done: u32,
    of: u32,
}

impl Reader<'_> {
    /// The runs named: windows of recordings, or results.
    fn runs(&mut self, files: &[PathBuf]) -> Result<Vec<Run>> {
        files.iter().map(|f| self.run(f)).collect()
    }

    /// The next file's step: counted, or stopped by the cancel.
    fn next(&mut self) -> Result<()> {
        if (self.cancel)() {
            return Err(Interrupted.into());
        }
        let what = "reading results";
        let step = Event::run_begins(self.done, self.of, what, Duration::ZERO);
        self.events.event(step);
        self.done += 1;
        Ok(())
    }

    fn run(&mut self, f: &Path) -> Result<Run> {
        self.next()?;
        let s = f.to_string_lossy();
        if !f.exists() && s.contains('@') {
            return window(&s);
        }
        let v = read_result(f)?;
        Ok(plumb_analyze::compare::read_run(&s, &v)?)
    }
}

/// A result file, or the result a report directory holds (a lab's report.json, a load's
/// load.json), read up to [`MAX_RESULT_BYTES`]: a regular file or a pipe, never a device.
fn read_result(f: &Path) -> Result<serde_json::Value> {
    let path = if f.is_dir() {
        match RESULT_FILES.iter().map(|n| f.join(n)).find(|p| p.exists()) {
            Some(p) => p,
            None => crate::refuse!(
                "{}: a directory with no plumb result in it (looked for {}: plumb lab --out and plumb load --out write them)",
                f.display(),
                RESULT_FILES.join(" and ")
            ),
        }
    } else {
        f.to_path_buf()
    };
    let text = plumb_sys::read_text_bounded(&path, MAX_RESULT_BYTES)
        .with_context(|| path.display().to_string())?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not JSON (plumb io, plumb load and plumb delta --json write it)",
            path.display()
        )
    })
}

/// The results in a history directory (not hidden entries), ordered by the lab's start time
/// where every one has it, else by name.
fn history_runs(
    dir: &Path,
    events: &mut dyn Events,
    cancel: &dyn Fn() -> bool,
) -> Result<Vec<Run>> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("--history {}", dir.display()))?
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    entries.sort();
    let of = entries.len() as u32;
    let mut read = Reader {
        events,
        cancel,
        done: 0,
        of,
    };
    let mut runs = Vec::new();
    for f in &entries {
        read.next()?;
        let v = read_result(f)?;
        let started = v["started_unix_ms"].as_u64();
        runs.push((
            started,
            plumb_analyze::compare::read_run(&f.display().to_string(), &v)?,
        ));
    }
    if runs.iter().all(|r| r.0.is_some()) {
        runs.sort_by_key(|r| r.0);
    }
    Ok(runs.into_iter().map(|r| r.1).collect())
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
            _ => crate::refuse!("{arg}: {v} is not M:SS or H:MM:SS"),
        };
    }
    plumb_sys::units::parse_duration(v)
        .map(|d| d.as_secs_f64())
        .map_err(|e| Error::Refused(format!("{arg}: {e}")))
}

/// `FILE@FROM-TO`: a window of a recording, as a run.
fn window(arg: &str) -> Result<Run> {
    let (file, span) = arg.rsplit_once('@').unwrap_or((arg, ""));
    let Some((from, to)) = span.split_once('-') else {
        crate::refuse!("{arg}: a recording's window is FILE@FROM-TO (rec.plumb@10m-15m)");
    };
    let (from_s, to_s) = (offset(arg, from)?, offset(arg, to)?);
    if from_s >= to_s {
        crate::refuse!("{arg}: the window's start is not before its end");
    }
    let rec = plumb_store::read(Path::new(file)).with_context(|| arg.to_string())?;
    let end_s = rec.times_ms.last().copied().unwrap_or(0) as f64 / 1000.0;
    if from_s >= end_s {
        crate::refuse!("{arg}: the recording ends at {end_s:.0} s");
    }
    Ok(plumb_analyze::compare::recording_run(
        arg, &rec, from_s, to_s,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two(candidate: &[&str]) -> CompareConfig {
        CompareConfig {
            sides: Sides::Two {
                baseline: vec!["a.json".into()],
                candidate: candidate.iter().map(PathBuf::from).collect(),
            },
            min_change: 5.0,
        }
    }

    #[test]
    fn a_floor_out_of_range_and_an_option_after_the_dashes_are_refused_before_reading() {
        for m in [-1.0, 100.0, f64::NAN] {
            let e = Compare::new(CompareConfig {
                min_change: m,
                ..two(&["b.json"])
            })
            .err()
            .unwrap();
            assert!(e.to_string().contains("--min-change"), "{e}");
        }
        let e = Compare::new(two(&["--html"])).err().unwrap();
        assert!(e.to_string().contains("--html: after --"), "{e}");
    }

    #[test]
    fn windows_are_read_as_a_duration_or_a_clock_and_a_bad_one_is_named() {
        assert_eq!(offset("r@1:30-2:00", "1:30").unwrap(), 90.0);
        assert_eq!(offset("r", "1:00:05").unwrap(), 3605.0);
        assert_eq!(offset("r", "10m").unwrap(), 600.0);
        assert!(offset("r", "1:75")
            .unwrap_err()
            .to_string()
            .contains("not M:SS"));
        let e = window("rec.plumb@5m-1m").unwrap_err().to_string();
        assert!(e.contains("start is not before its end"), "{e}");
        let e = window("rec.plumb@5m").unwrap_err().to_string();
        assert!(e.contains("FILE@FROM-TO"), "{e}");
    }

    #[test]
    fn the_callers_cancel_stops_the_reading_and_says_so() {
        let c = Compare::new(two(&["b.json"])).unwrap();
        let e = c.run(&mut |_: Event<'_>| {}, &|| true).err().unwrap();
        assert!(e.is_interrupted(), "{e}");
    }
}
