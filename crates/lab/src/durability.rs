//! The durability probe in rounds: every mode and block size once per round (A B C, A B C …,
//! so that a neighbour or a slow drift touches every mode, not one), each run watched for
//! interference, until each has the clean runs asked for and their mean latencies agree within
//! [`STABLE_SPREAD`](crate::sweep::STABLE_SPREAD), or `max_runs` runs (`plumb io durability`:
//! [`max_attempts`](crate::sweep::max_attempts) of the repetitions). `plumb io durability` (one directory or several side by side) and the lab's
//! durability step both run through here.

use crate::sweep::{devices_under, STABLE_SPREAD};
use plumb_analyze::durability::{ModeRep, Probed};
use plumb_load::durability::{modes, Probe, ProbeOptions};
use plumb_load::job::Durability;
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
/// is called before each run, for progress (the plan grows when a run must be repeated).
pub fn run(
    o: &ProbeOptions,
    block_sizes: &[u32],
    reps: u32,
    max_runs: u32,
    on_run: &mut dyn FnMut(&str, usize, usize),
) -> plumb_load::Result<Probed> {
    let mut v = run_many(std::slice::from_ref(o), block_sizes, reps, max_runs, on_run)?;
    Ok(v.remove(0))
}

/// Probe several directories (candidate log devices) side by side: the same modes and block
/// sizes, interleaved across the directories within each round, so that whatever else happens
/// on the host touches every candidate alike. One result per directory, in order.
pub fn run_many(
    opts: &[ProbeOptions],
    block_sizes: &[u32],
    reps: u32,
    max_runs: u32,
    on_run: &mut dyn FnMut(&str, usize, usize),
) -> plumb_load::Result<Vec<Probed>> {
    let root = plumb_sys::Root::host();
    let mut probes = Vec::new();
    for o in opts {
        let p = Probe::open(o)?;
        let scope = Scope::new(
            root.clone(),
            devices_under(&root, &[p.file().to_path_buf()]),
        );
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
            let m = probe.run_mode(mode, bs)?;
            let w = watch.finish();
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
