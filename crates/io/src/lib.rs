//! `plumb io`: the storage load generator (engines, jobs, the runner, the durability probe's
//! runs) and its safety rules; and the lab's other actuators, memory pressure and its cgroups.
//!
//! The runner produces raw results (counts, bytes, latency histograms, a per-second series);
//! turning them into tables and percentiles is the analysis crate's job.

use std::path::PathBuf;

pub mod diskspd;
pub mod durability_probe;
pub mod engine;
pub mod job;
pub mod job_spec;
pub mod labcg;
pub mod pressure;
pub mod run;
pub mod target;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Refused(String),
    /// The kernel refused a setup (swap on zram, a cgroup), with the OS error under it.
    #[error(transparent)]
    Kernel(#[from] plumb_sys::KernelError),
    /// What the host says (memory, swap) could not be read.
    #[error(transparent)]
    Host(#[from] plumb_sys::Error),
    #[error("invalid job: {0}")]
    Job(String),
    #[error("{engine} engine: {message}")]
    Engine {
        engine: &'static str,
        message: String,
    },
    #[error("I/O failed on {} at offset {offset} ({len} bytes): {source}", path.display())]
    IoFailed {
        path: PathBuf,
        offset: u64,
        len: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("interrupted")]
    Interrupted,
}

pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn io_err(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
    Error::Io {
        path: path.into(),
        source,
    }
}

#[cfg(test)]
mod fuzz;
