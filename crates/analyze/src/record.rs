//! What a recording did, as numbers: `plumb record`'s summary at its end. `plumb_report`
//! writes the sentences.

use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordSummary {
    /// The recording's file (None: the figures were only served).
    pub file: Option<PathBuf>,
    pub samples: u64,
    pub interval_ms: u64,
    /// How many files the recording went into (`plumb record --out-dir`: a new one every so
    /// often); `file` is the last.
    pub files: u64,
    /// The files' size.
    pub bytes_written: u64,
    /// Bytes of samples alone, without the header and the metrics' definitions (written once):
    /// what a longer recording grows by.
    pub sample_bytes: u64,
    /// Ticks skipped because plumb fell behind.
    pub late_ticks: u64,
    /// What the kernel counted for the recorded processes (`--trace`).
    pub trace: Option<TraceTotals>,
    /// The command plumb ran and recorded, its program name.
    pub command: Option<String>,
    /// Its exit status as a shell reports it (128 + signal).
    pub exit_code: Option<i32>,
    /// It did not end within the grace period after the stop signal and was killed.
    pub killed: bool,
    /// Seconds the command had to end after the stop signal.
    pub grace_s: u64,
}

/// A recording's trace, summed over the processes it followed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceTotals {
    pub processes: u64,
    pub syscalls: u64,
    /// fsync, fdatasync and sync_file_range calls.
    pub sync_calls: u64,
    /// Cache FLUSH requests their I/O caused.
    pub flushes: u64,
    /// Updates and events the kernel could not hand over (the rates are lower bounds then).
    pub lost: u64,
}

impl RecordSummary {
    /// What one sample took in the file, on average.
    pub fn bytes_per_sample(&self) -> u64 {
        self.sample_bytes / self.samples.max(1)
    }

    /// What a day of samples at this interval takes.
    pub fn bytes_per_day(&self) -> f64 {
        self.bytes_per_sample() as f64 * 86_400_000.0 / self.interval_ms.max(1) as f64
    }
}

impl TraceTotals {
    pub fn of(r: &crate::trace::TraceReport) -> TraceTotals {
        let l = &r.lost;
        TraceTotals {
            processes: r.processes.len() as u64,
            syscalls: r.processes.iter().map(|p| p.calls).sum(),
            sync_calls: r
                .processes
                .iter()
                .map(|p| crate::trace::sync_calls(&p.syscalls))
                .sum(),
            flushes: r
                .processes
                .iter()
                .filter_map(|p| p.block.as_ref())
                .map(|b| b.bios.flushes)
                .sum(),
            lost: l.syscall_updates + l.sched_updates + l.processes + l.block_events,
        }
    }
}

/// The kind of a recorder's mark, for counting them where the text cannot go (a Prometheus
/// series a kind: `plumb_recorder_marks_total{kind=…}`): `engine` (unreachable, back, a new
/// server, statements), `replication`, `process` (a PID exited), `command`, `trace`,
/// `recording` (an old file removed), else `phase` (a job's own marks: lab phases).
pub fn mark_kind(name: &str) -> &'static str {
    if name.starts_with("engine ") || name.starts_with("statements ") {
        "engine"
    } else if name.starts_with("primary ") {
        "replication"
    } else if name.starts_with("PID ") {
        "process"
    } else if name.starts_with("command ") {
        "command"
    } else if name.starts_with("trace ") {
        "trace"
    } else if name == "old recording removed" {
        "recording"
    } else {
        "phase"
    }
}
