//! The durability probe: what one durable write costs in each mode, like pg_test_fsync but
//! with percentiles, and (as root) what the device received for each mode.

use crate::job::{Durability, EngineKind, Job, Pattern};
use crate::run::RunResult;
use crate::target::{prepare, scratch_file, Safety};
use crate::{signal, Error, Result};
use plumb_sys::tracefs::{BlockTrace, RqCounts};
use plumb_sys::DevNum;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The modes probed, in report order: the durable ones, then two that are not, for contrast.
pub fn modes() -> Vec<Durability> {
    vec![
        Durability::Fdatasync {
            every: 1,
            direct: false,
        },
        Durability::Fsync {
            every: 1,
            direct: false,
        },
        Durability::Dsync,
        Durability::DirectDsync,
        Durability::Fdatasync {
            every: 1,
            direct: true,
        },
        Durability::None,
        Durability::Direct,
    ]
}

pub struct ProbeOptions {
    /// Where the test file goes (a directory), or the file to create.
    pub path: PathBuf,
    pub block_sizes: Vec<u32>,
    pub per_mode: Duration,
    pub warmup: Duration,
    /// Whole disks under the path, for block-layer tracing; empty disables it.
    pub trace_devs: Vec<DevNum>,
    pub keep: bool,
}

pub struct ModeRun {
    pub mode: Durability,
    pub block_size: u32,
    pub run: RunResult,
    /// What the device received during this mode's run, when tracing was possible.
    pub trace: Option<RqCounts>,
}

pub struct ProbeResult {
    pub file: PathBuf,
    pub runs: Vec<ModeRun>,
    /// Why block-layer evidence is missing, if it is.
    pub trace_unavailable: Option<String>,
}

/// The probe file. Every write goes to its first block, as pg_test_fsync does and as small
/// commits rewrite the current WAL page: one durable write, measured again and again.
const PROBE_FILE: u64 = 1 << 20;

pub fn probe_file_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(format!("plumb-durability-{}.dat", std::process::id()))
    } else {
        path.to_path_buf()
    }
}

pub fn run_probe(o: &ProbeOptions, progress: &dyn Fn(usize, usize, &str)) -> Result<ProbeResult> {
    let file = probe_file_path(&o.path);
    // Probes that were killed left their files (named by their PIDs) here: plumb's own.
    if o.path.is_dir() {
        crate::target::remove_leftovers(&o.path);
    }
    if file.exists() {
        return Err(Error::Refused(format!(
            "{} already exists; the durability probe creates its own file: name a directory or a new file",
            file.display()
        )));
    }
    let _guard = scratch_file(
        &file,
        PROBE_FILE,
        0xd0_7ab1e,
        o.keep,
        &signal::stop_requested,
    )?;
    let (mut trace, trace_unavailable) = if o.trace_devs.is_empty() {
        (
            None,
            Some("the path is not on a local block device".to_string()),
        )
    } else {
        match BlockTrace::start(&o.trace_devs) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e)),
        }
    };
    let safety = Safety {
        overwrite: vec![file.clone()],
        ..Default::default()
    };
    let total = o.block_sizes.len() * modes().len();
    let mut runs = Vec::new();
    for &bs in &o.block_sizes {
        for mode in modes() {
            if signal::stop_requested() {
                return Err(Error::Interrupted);
            }
            progress(runs.len(), total, &format!("{} KiB {mode}", bs / 1024));
            let job = Job {
                name: format!("durability {mode}"),
                targets: vec![file.clone()],
                engine: EngineKind::Psync,
                duration: o.per_mode,
                warmup: o.warmup,
                threads: 1,
                queue_depth: 1,
                block_size: bs,
                pattern: Pattern::Sequential,
                stride: Some(0),
                write_pct: 100,
                file_size: PROBE_FILE,
                durability: mode,
                ..Job::new("durability")
            };
            let targets = prepare(&job, &safety, &signal::stop_requested)?;
            // Drop what earlier modes left dirty, so one mode's writeback is not billed to the next.
            // SAFETY: valid fd.
            unsafe {
                libc::fsync(targets[0].fd());
            }
            if let Some(t) = trace.as_mut() {
                let _ = t.take();
            }
            let run = crate::run::run(&job, &targets)?;
            let counts = match trace.as_mut() {
                Some(t) => t.take().ok(),
                None => None,
            };
            runs.push(ModeRun {
                mode,
                block_size: bs,
                run,
                trace: counts,
            });
        }
    }
    progress(total, total, "done");
    Ok(ProbeResult {
        file,
        runs,
        trace_unavailable,
    })
}
