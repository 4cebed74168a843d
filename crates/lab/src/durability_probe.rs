//! The durability probe in rounds: every mode and block size once per round (A B C, A B C …,
//! so that a neighbour or a slow drift touches every mode, not one), each run watched for
//! interference, until each has the clean runs asked for and their mean latencies agree within
//! [`STABLE_SPREAD`](crate::sweep::STABLE_SPREAD), or `max_runs` runs (`plumb io durability`:
//! [`max_attempts`](crate::sweep::max_attempts) of the repetitions). `plumb io durability` (one directory or several side by side) and the lab's
//! durability step both run through here.

use crate::sweep::{devices_under, STABLE_SPREAD};
use plumb_analyze::durability_probe::{ModeRep, Probed};
use plumb_io::durability_probe::{modes, Probe, ProbeOptions};
use plumb_io::job::Durability;
use plumb_record::watch::{Scope, Watch};

/// Enough clean runs, and (with two or more) their mean latencies within the tolerance.
fn settled(done: &[ModeRep], reps: u32) -> bool {
    let clean: Vec<f64> = done
        .iter()
        .filter(|r| r.is_clean())
        .filter_map(|r| r.mean_s)
        .collect();
    if (clean.len() as u32) < reps {
        return false;
    }
    clean.len() < 2
        || plumb_analyze::sweep::spread(&clean).is_none_or(|s| s.relative() <= STABLE_SPREAD)
}

/// Run every mode at every block size in rounds. `on_run(label, runs so far, runs planned)`
/// is called before each run, for progress (the plan grows when a run must be repeated);
/// `cancel` stops it (`Interrupted`), as a signal does.
pub fn run(
    o: &ProbeOptions,
    block_sizes: &[u32],
    reps: u32,
    max_runs: u32,
    accept: &[plumb_analyze::interference::Accept],
    on_run: &mut dyn FnMut(&str, usize, usize),
    cancel: &dyn Fn() -> bool,
) -> plumb_io::Result<Probed> {
    let mut v = run_many(
        std::slice::from_ref(o),
        block_sizes,
        reps,
        max_runs,
        accept,
        on_run,
        cancel,
    )?;
    Ok(v.remove(0))
}

/// Probe several directories (candidate log devices) side by side: the same modes and block
/// sizes, interleaved across the directories within each round, so that whatever else happens
/// on the host touches every candidate alike. One result per directory, in order.
pub(crate) fn run_many(
    opts: &[ProbeOptions],
    block_sizes: &[u32],
    reps: u32,
    max_runs: u32,
    accept: &[plumb_analyze::interference::Accept],
    on_run: &mut dyn FnMut(&str, usize, usize),
    cancel: &dyn Fn() -> bool,
) -> plumb_io::Result<Vec<Probed>> {
    let root = plumb_sys::Root::host();
    let mut probes = Vec::new();
    for o in opts {
        let p = Probe::open(o)?;
        let mut scope = Scope::new(
            root.clone(),
            devices_under(&root, &[p.file().to_path_buf()]),
        );
        scope.accept = accept.to_vec();
        probes.push((p, scope, o.path.display().to_string()));
    }
    // (probe, mode, block size, runs), in report order within each probe.
    let mut cells: Vec<(usize, Durability, u32, Vec<ModeRep>)> = block_sizes
        .iter()
        .flat_map(|&bs| {
            modes()
                .into_iter()
                .flat_map(move |m| (0..opts.len()).map(move |i| (i, m, bs, Vec::new())))
        })
        .collect();
    let reps = reps.max(1);
    let limit = max_runs.max(reps);
    let mut made = 0usize;
    loop {
        let mut ran = false;
        for i in 0..cells.len() {
            let (p, mode, bs) = (cells[i].0, cells[i].1, cells[i].2);
            if settled(&cells[i].3, reps) || cells[i].3.len() as u32 >= limit {
                continue;
            }
            // Runs still wanted: each cell's missing clean runs.
            let planned = made
                + cells
                    .iter()
                    .map(|c| {
                        let clean = c.3.iter().filter(|r| r.is_clean()).count() as u32;
                        if settled(&c.3, reps) {
                            0
                        } else {
                            reps.saturating_sub(clean).max(1) as usize
                        }
                    })
                    .sum::<usize>();
            let label = if probes.len() > 1 {
                format!("{} · {} KiB {mode}", probes[p].2, bs / 1024)
            } else {
                format!("{} KiB {mode}", bs / 1024)
            };
            on_run(&label, made, planned);
            let (probe, scope, _) = &mut probes[p];
            let watch = Watch::start(scope);
            let m = probe.run_mode(mode, bs, cancel)?;
            let mut w = watch.finish();
            if let Some(n) = plumb_analyze::interference::run_stall(&m.run) {
                w.add(n);
            }
            cells[i].3.push(ModeRep::of(&m, Some(w)));
            made += 1;
            ran = true;
        }
        if !ran {
            break;
        }
    }
    on_run("done", made, made);
    Ok(probes
        .iter()
        .enumerate()
        .map(|(i, (probe, _, _))| Probed {
            file: probe.file().to_path_buf(),
            repetitions: reps,
            modes: cells
                .iter()
                .filter(|c| c.0 == i)
                .map(|c| (c.1, c.2, c.3.clone()))
                .collect(),
            trace_unavailable: probe.trace_unavailable().map(str::to_string),
            journal_followed: probe.journal_followed(),
        })
        .collect())
}

/// `plumb io durability`'s plan: the directories to probe (each checked, none twice), the time
/// per mode, the block sizes and the repetitions.
pub struct DurabilityPlan {
    pub paths: Vec<std::path::PathBuf>,
    pub per_mode: std::time::Duration,
    pub block_sizes: Vec<u32>,
    pub reps: u32,
    pub keep: bool,
    /// Neighbours accepted (`--accept-neighbour`): noted in each run's window.
    pub accept: Vec<plumb_analyze::interference::Accept>,
}

/// What `plumb io durability` found: one directory's report, or several compared.
pub enum DurabilityResult {
    One(Box<plumb_analyze::durability_probe::DurabilityReport>),
    Many(plumb_analyze::durability_probe::Comparison),
}

/// The warm-up before each mode's measured time.
const MODE_WARMUP: std::time::Duration = std::time::Duration::from_millis(300);

impl DurabilityPlan {
    /// Check the flags' values: directories that exist (named once), 1 to 20 repetitions,
    /// block sizes in 512-byte multiples up to 16M.
    pub fn new(
        paths: &[std::path::PathBuf],
        per_mode: std::time::Duration,
        block_sizes: &[u64],
        reps: u32,
        keep: bool,
    ) -> crate::Result<DurabilityPlan> {
        let mut seen = Vec::new();
        for p in paths {
            let meta = std::fs::metadata(p)
                .map_err(|e| crate::Error::quoting(format!("{}: {e}", p.display()), e))?;
            if !meta.is_dir() {
                crate::refuse!(
                    "{}: not a directory; name the directory to probe (plumb creates its test file there)",
                    p.display()
                );
            }
            let canonical = std::fs::canonicalize(p)
                .map_err(|e| crate::Error::quoting(format!("{}: {e}", p.display()), e))?;
            if seen.contains(&canonical) {
                crate::refuse!("{}: named twice", p.display());
            }
            seen.push(canonical);
        }
        if reps == 0 || reps > 20 {
            crate::refuse!("--reps {reps}: use 1 to 20");
        }
        let mut sizes = Vec::new();
        for &v in block_sizes {
            if v == 0 || v % 512 != 0 || v > 16 << 20 {
                crate::refuse!("--bs {v}: use multiples of 512 bytes up to 16M (O_DIRECT needs sector-aligned sizes)");
            }
            sizes.push(v as u32);
        }
        Ok(DurabilityPlan {
            paths: paths.to_vec(),
            per_mode,
            block_sizes: sizes,
            reps,
            keep,
            accept: Vec::new(),
        })
    }

    /// One mode's run: its warm-up and its measured time.
    pub fn per_run(&self) -> std::time::Duration {
        self.per_mode + MODE_WARMUP
    }

    /// How many runs are planned (more when runs disagree).
    pub fn runs(&self) -> u32 {
        (self.block_sizes.len() * modes().len() * self.paths.len()) as u32 * self.reps
    }

    /// Probe every directory. `events` hears each run begin (`Event::Step`, a run planned as
    /// [`per_run`](Self::per_run); runs repeated because they disagree extend the plan) and
    /// the end (`Event::Finished`). [`Interrupted`](crate::Error::Interrupted) when stopped (a
    /// signal or `cancel`), the probe files removed.
    pub fn run(
        &self,
        events: &mut dyn crate::Events,
        cancel: &dyn Fn() -> bool,
    ) -> crate::Result<DurabilityResult> {
        let per = self.per_run();
        let mut on_run = |label: &str, made: usize, planned: usize| {
            let (made, planned) = (made as u32, planned.max(1) as u32);
            if label == "done" {
                events.event(crate::Event::Finished { of: made });
            } else {
                events.event(crate::Event::run_begins(made, planned, label, per));
            }
        };
        let on_run = &mut on_run;
        let root = plumb_sys::Root::host();
        let mut storage = Vec::new();
        let mut opts = Vec::new();
        for p in &self.paths {
            let (st, devs) = plumb_analyze::os::storage_under(&root, p);
            storage.push(st);
            opts.push(ProbeOptions {
                path: p.clone(),
                per_mode: self.per_mode,
                warmup: MODE_WARMUP,
                trace_devs: devs,
                keep: self.keep,
            });
        }
        let probed = run_many(
            &opts,
            &self.block_sizes,
            self.reps,
            crate::sweep::max_attempts(self.reps),
            &self.accept,
            on_run,
            cancel,
        )?;
        let mut reports: Vec<_> = probed
            .iter()
            .zip(self.paths.iter().zip(storage))
            .map(|(p, (path, st))| {
                plumb_analyze::durability_probe::build(
                    p,
                    path.clone(),
                    st,
                    self.per_mode.as_secs_f64(),
                )
            })
            .collect();
        if reports.len() == 1 {
            return Ok(DurabilityResult::One(Box::new(reports.remove(0))));
        }
        let comparison = plumb_analyze::durability_probe::compare(&reports);
        Ok(DurabilityResult::Many(
            plumb_analyze::durability_probe::Comparison {
                probes: reports,
                comparison,
            },
        ))
    }
}
