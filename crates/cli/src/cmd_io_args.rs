//! `plumb io`'s flags, and the job they describe.

use anyhow::Result;
use clap::{Args, Subcommand};
use plumb_io::job::Job;
use plumb_io::target::Safety;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct IoArgs {
    #[command(subcommand)]
    pub cmd: IoCmd,
    #[command(flatten)]
    pub accept: crate::neighbours::AcceptArg,
}

#[derive(Debug, Subcommand)]
pub enum IoCmd {
    /// Run a storage test: a preset (--preset log-write) or your own job, on files plumb creates
    /// (and removes afterwards) or on targets you name.
    Run(Box<RunArgs>),
    /// Run a diskspd command line as written: plumb io diskspd -- -d15 -o32 -t2 -b64K -h -r -L -w0 FILE
    Diskspd(DiskspdArgs),
    /// What one durable write costs in each mode (fdatasync, fsync, O_DSYNC, O_DIRECT|O_DSYNC,
    /// forced flush), for 8K and 60K writes, with what the device received (as root), and what
    /// it means for PostgreSQL's wal_sync_method and SQL Server's FUA setting.
    Durability(DurabilityArgs),
    /// Run one job at several queue depths or rate limits, N times each: median/min/max per
    /// level, the knee where latency starts to grow faster than throughput, and an SVG chart.
    Sweep(Box<SweepArgs>),
    /// List the database-shaped presets.
    Presets,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub job: JobFlags,
    #[command(flatten)]
    pub safety: SafetyFlags,
    /// Queue depths to sweep (default 1,2,4,8,16,32,64).
    #[arg(long = "qd-levels", value_name = "LIST", conflicts_with = "rates")]
    pub qd_levels: Option<String>,
    /// Rate limits to sweep instead, e.g. unthrottled,1200MB/s,800MB/s,400MB/s,200MB/s.
    #[arg(long, value_name = "LIST")]
    pub rates: Option<String>,
    /// Repetitions per level.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub reps: u32,
    /// Where to write the latency-vs-throughput chart (default: plumb-sweep-TIME.svg here).
    #[arg(long, value_name = "FILE.svg")]
    pub chart: Option<PathBuf>,
    /// Do not write a chart.
    #[arg(long, conflicts_with = "chart")]
    pub no_chart: bool,
    /// Files (created if missing, once for the whole sweep) or block devices to test.
    #[arg(value_name = "TARGET", required = true)]
    pub targets: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DurabilityArgs {
    /// Directory to probe (a test file is created there and removed), e.g. the WAL directory.
    /// Name several to compare candidate log devices side by side: their runs are interleaved
    /// and compared only beyond their spread.
    #[arg(value_name = "PATH", default_value = ".")]
    pub paths: Vec<PathBuf>,
    /// Measured time of each run [default: 1s].
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Shorter: 0.5 s per run.
    #[arg(long, conflicts_with = "duration")]
    pub quick: bool,
    /// Clean runs per mode and block size. Modes run in rounds, and more rounds are added
    /// (up to twice this many runs) while a mode's runs disagree by more than 10% or a run was
    /// disturbed by other activity on the host.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub reps: u32,
    /// Block sizes to probe, comma-separated.
    #[arg(long, value_name = "SIZES", default_value = "8K,60K")]
    pub bs: String,
    /// Leave the test file in place.
    #[arg(long)]
    pub keep: bool,
}

/// Settings for a job; each one overrides the preset's.
#[derive(Debug, Args, Default, Clone)]
pub struct JobFlags {
    /// Start from a named database workload (see `plumb io presets`).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// Measured time (15s, 2m).
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Time running before measuring starts.
    #[arg(long, value_name = "TIME")]
    pub warmup: Option<String>,
    /// Time running after measuring stops (keeps the device busy while other threads finish).
    #[arg(long, value_name = "TIME")]
    pub cooldown: Option<String>,
    /// Threads per target.
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Outstanding I/Os per thread (queue depth).
    #[arg(long, value_name = "N")]
    pub qd: Option<u32>,
    /// Block size (8K, 60K, 512K).
    #[arg(long, value_name = "SIZE")]
    pub bs: Option<String>,
    /// Offsets: random or sequential.
    #[arg(long, value_name = "random|sequential")]
    pub pattern: Option<String>,
    /// Sequential step between one thread's I/Os (default: the block size; 0 rewrites the same block).
    #[arg(long, value_name = "SIZE")]
    pub stride: Option<String>,
    /// Random offsets are multiples of this (default: the block size).
    #[arg(long, value_name = "SIZE")]
    pub align: Option<String>,
    /// Percent of I/Os that are writes (0-100).
    #[arg(long, value_name = "PCT")]
    pub write_pct: Option<u8>,
    /// Size of files plumb creates.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// none, direct, dsync, direct-dsync, fdatasync[:N], direct-fdatasync[:N], fsync[:N], direct-fsync[:N].
    #[arg(long, value_name = "MODE")]
    pub durability: Option<String>,
    /// Throughput limit for the whole job (200MB/s, 5000iops); latency then counts from each
    /// I/O's intended start, so a backlog shows up in latency (no coordinated omission).
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Apply --rate to each thread instead of to the whole job.
    #[arg(long)]
    pub rate_per_thread: bool,
    /// I/Os per thread in each burst; needs --think.
    #[arg(long, value_name = "N")]
    pub burst: Option<u32>,
    /// Idle time between bursts.
    #[arg(long, value_name = "TIME")]
    pub think: Option<String>,
    /// Seed for offsets and data.
    #[arg(long)]
    pub seed: Option<u64>,
    /// The I/O engine, as fio's --ioengine: io_uring (default), psync (a thread per
    /// outstanding I/O) or null (no I/O: tests plumb).
    #[arg(long, value_name = "ENGINE")]
    pub ioengine: Option<String>,
    /// Completions to wait for per kernel entry (io_uring); above 1 saves CPU but times
    /// early completions late.
    #[arg(long, value_name = "N")]
    pub batch_complete: Option<u32>,
    /// Requests handed to the kernel together (io_uring; default a quarter of the queue depth).
    #[arg(long, value_name = "N")]
    pub batch_submit: Option<u32>,
}

#[derive(Debug, Args, Default, Clone)]
pub struct SafetyFlags {
    /// Leave the files plumb created in place (a later run recognises and reuses them).
    #[arg(long)]
    pub keep: bool,
    /// Allow writes to this existing file, which plumb did not create. Repeat for several.
    #[arg(long, value_name = "FILE")]
    pub overwrite: Vec<PathBuf>,
    /// Allow writes to this block device, destroying what is on it. Give its exact path.
    #[arg(long, value_name = "DEVICE")]
    pub destroy_data_on: Vec<PathBuf>,
}

impl SafetyFlags {
    pub fn safety(&self) -> Safety {
        Safety {
            overwrite: self.overwrite.clone(),
            destroy_data_on: self.destroy_data_on.clone(),
            keep: self.keep,
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub job: JobFlags,
    #[command(flatten)]
    pub safety: SafetyFlags,
    /// Files (created if missing) or block devices to test.
    #[arg(value_name = "TARGET", required = true)]
    pub targets: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DiskspdArgs {
    #[command(flatten)]
    pub safety: SafetyFlags,
    /// Use this I/O engine instead of io_uring: psync or null.
    #[arg(long, value_name = "ENGINE")]
    pub ioengine: Option<String>,
    /// diskspd's flags and target, after `--`.
    #[arg(
        value_name = "DISKSPD_ARGS",
        required = true,
        allow_hyphen_values = true,
        trailing_var_arg = true
    )]
    pub args: Vec<String>,
}

/// Apply flags over a base job (a preset or the defaults).
pub(crate) fn build_job(f: &JobFlags, targets: Vec<PathBuf>) -> Result<Job> {
    let spec = plumb_io::job_spec::JobSpec {
        preset: f.preset.clone(),
        duration: f.duration.clone(),
        warmup: f.warmup.clone(),
        cooldown: f.cooldown.clone(),
        threads: f.threads,
        qd: f.qd,
        bs: f.bs.clone(),
        pattern: f.pattern.clone(),
        stride: f.stride.clone(),
        align: f.align.clone(),
        write_pct: f.write_pct,
        size: f.size.clone(),
        durability: f.durability.clone(),
        rate: f.rate.clone(),
        rate_per_thread: f.rate_per_thread,
        burst: f.burst,
        think: f.think.clone(),
        seed: f.seed,
        ioengine: f.ioengine.clone(),
        batch_complete: f.batch_complete,
        batch_submit: f.batch_submit,
    };
    Ok(spec.job(targets)?)
}

/// A note when I/O through the page cache (diskspd without -Su/-Sh) covers less than the
/// memory available: the figures are then the cache's, not the device's.
pub(crate) fn fits_in_page_cache(j: &Job) -> Option<String> {
    if j.durability != plumb_io::job::Durability::None {
        return None;
    }
    let total: u64 = j
        .targets
        .iter()
        .map(|t| match std::fs::metadata(t) {
            Ok(m) if m.is_file() => m.len(),
            Ok(_) => u64::MAX / 4,
            Err(_) => j.file_size,
        })
        .sum();
    let avail = plumb_sys::mem::read_meminfo(&plumb_sys::Root::host())
        .ok()?
        .mem_available_bytes?;
    (total <= avail).then(|| {
        format!(
            "the target{} ({} MiB) fit{} in the page cache ({} MiB available) and this run goes through it (no -Su or -Sh): reads after the first pass and writes until writeback are memory's speed, not the device's; use -Sh, or -c larger than memory",
            if j.targets.len() > 1 { "s" } else { "" },
            total >> 20,
            if j.targets.len() > 1 { "" } else { "s" },
            avail >> 20
        )
    })
}
