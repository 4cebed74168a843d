//! The durability probe: what one durable write costs in each mode, like pg_test_fsync but
//! with percentiles, and (as root) what the device received for each mode.

use crate::job::{Durability, EngineKind, Job, Pattern};
use crate::run::RunResult;
use crate::target::{prepare, scratch_file, Safety};
use crate::{Error, Result};
use plumb_sys::signal;
use plumb_sys::tracefs::{BlockTrace, Follow, Traced};
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
    pub per_mode: Duration,
    pub warmup: Duration,
    /// Whole disks under the path, for block-layer tracing; empty disables it.
    pub trace_devs: Vec<DevNum>,
    pub keep: bool,
}

/// One run of one mode.
pub struct ModeRun {
    pub mode: Durability,
    pub block_size: u32,
    pub run: RunResult,
    /// What the device received during the run (warm-up included) and what of it the probe
    /// asked for, when tracing was possible.
    pub trace: Option<Traced>,
}

/// The probe file. Every write goes to its first block, as pg_test_fsync does and as small
/// commits rewrite the current WAL page: one durable write, measured again and again.
const PROBE_FILE: u64 = 1 << 20;

pub(crate) fn probe_file_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(format!("plumb-durability-{}.dat", std::process::id()))
    } else {
        path.to_path_buf()
    }
}

/// A probe set up: its file created, the block trace running (when it can). Runs of any mode
/// and block size, in any order; dropping it removes the file and the trace.
pub struct Probe {
    file: PathBuf,
    per_mode: Duration,
    warmup: Duration,
    safety: Safety,
    trace: Option<BlockTrace>,
    trace_unavailable: Option<String>,
    // Last: the trace stops before the file goes.
    _scratch: Option<crate::target::Scratch>,
}

impl Probe {
    pub fn open(o: &ProbeOptions) -> Result<Probe> {
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
        let scratch = scratch_file(
            &file,
            PROBE_FILE,
            0xd0_7ab1e,
            o.keep,
            &signal::stop_requested,
        )?;
        let (trace, trace_unavailable) = if o.trace_devs.is_empty() {
            (
                None,
                Some("the path is not on a local block device".to_string()),
            )
        } else {
            use std::os::unix::fs::MetadataExt;
            // The probe's own requests, and the journal commits its syncs on this file wait for.
            let follow = std::fs::metadata(&file).ok().map(|m| Follow {
                tgid: std::process::id(),
                file: Some((
                    DevNum {
                        major: libc::major(m.dev()),
                        minor: libc::minor(m.dev()),
                    },
                    m.ino(),
                )),
            });
            match BlockTrace::start(&o.trace_devs, follow) {
                Ok(t) => (Some(t), None),
                Err(e) => (None, Some(e.to_string())),
            }
        };
        Ok(Probe {
            safety: Safety {
                overwrite: vec![file.clone()],
                ..Default::default()
            },
            file,
            per_mode: o.per_mode,
            warmup: o.warmup,
            trace,
            trace_unavailable,
            _scratch: scratch,
        })
    }

    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Why there is no block-layer evidence, when there is none.
    pub fn trace_unavailable(&self) -> Option<&str> {
        self.trace_unavailable.as_deref()
    }

    /// Whether the journal commits the probe's syncs wait for are followed (ext4).
    pub fn journal_followed(&self) -> bool {
        self.trace.as_ref().is_some_and(|t| t.journal_followed())
    }

    /// One run of `mode` with `block_size` writes; `Error::Interrupted` on a signal or when
    /// `cancel` says so.
    pub fn run_mode(
        &mut self,
        mode: Durability,
        block_size: u32,
        cancel: &dyn Fn() -> bool,
    ) -> Result<ModeRun> {
        if signal::stop_requested() || cancel() {
            return Err(Error::Interrupted);
        }
        let job = Job {
            name: format!("durability {mode}"),
            targets: vec![self.file.clone()],
            engine: EngineKind::Psync,
            duration: self.per_mode,
            warmup: self.warmup,
            threads: 1,
            queue_depth: 1,
            block_size,
            pattern: Pattern::Sequential,
            stride: Some(0),
            write_pct: 100,
            file_size: PROBE_FILE,
            durability: mode,
            ..Job::new("durability")
        };
        let stop = || signal::stop_requested() || cancel();
        let targets = prepare(&job, &self.safety, &stop)?;
        // Drop what earlier modes left dirty, so one mode's writeback is not billed to the next.
        // SAFETY: valid fd.
        unsafe {
            libc::fsync(targets[0].fd());
        }
        if let Some(t) = self.trace.as_mut() {
            let _ = t.take();
        }
        let run = crate::run::run(&job, &targets, cancel)?;
        let trace = match self.trace.as_mut() {
            Some(t) => t.take().ok(),
            None => None,
        };
        Ok(ModeRun {
            mode,
            block_size,
            run,
            trace,
        })
    }
}
