//! `plumb io`: storage load tests shaped like database work.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_load::job::{self, Burst, Durability, EngineKind, Job, Pattern};
use plumb_load::target::{self, Safety};
use plumb_load::units::{parse_duration, parse_rate, parse_size};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct IoArgs {
    #[command(subcommand)]
    pub cmd: IoCmd,
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

fn flag<T>(name: &str, r: std::result::Result<T, String>) -> Result<T> {
    r.map_err(|e| anyhow!("{name}: {e}"))
}

/// Apply flags over a base job (a preset or the defaults).
pub fn build_job(f: &JobFlags, targets: Vec<PathBuf>) -> Result<Job> {
    let mut j = match &f.preset {
        Some(p) => job::preset(p).ok_or_else(|| {
            anyhow!(
                "--preset {p}: no such preset (one of: {})",
                job::PRESETS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?,
        None => Job::new("custom"),
    };
    j.targets = targets;
    if let Some(v) = &f.duration {
        j.duration = flag("--duration", parse_duration(v))?;
    }
    if let Some(v) = &f.warmup {
        j.warmup = flag("--warmup", parse_duration(v))?;
    }
    if let Some(v) = &f.cooldown {
        j.cooldown = flag("--cooldown", parse_duration(v))?;
    }
    if let Some(v) = f.threads {
        j.threads = v;
    }
    if let Some(v) = f.qd {
        j.queue_depth = v;
    }
    if let Some(v) = &f.bs {
        let b = flag("--bs", parse_size(v))?;
        j.block_size = u32::try_from(b).map_err(|_| anyhow!("--bs {v}: too large"))?;
    }
    if let Some(v) = &f.pattern {
        j.pattern = match v.as_str() {
            "random" | "rand" => Pattern::Random,
            "sequential" | "seq" => Pattern::Sequential,
            _ => bail!("--pattern {v}: use random or sequential"),
        };
    }
    if let Some(v) = &f.stride {
        j.stride = Some(flag("--stride", parse_size(v))?);
    }
    if let Some(v) = &f.align {
        j.align = Some(flag("--align", parse_size(v))?);
    }
    if let Some(v) = f.write_pct {
        j.write_pct = v;
    }
    if let Some(v) = &f.size {
        j.file_size = flag("--size", parse_size(v))?;
    }
    if let Some(v) = &f.durability {
        j.durability = flag("--durability", Durability::parse(v))?;
    }
    if let Some(v) = &f.rate {
        j.rate = Some(flag("--rate", parse_rate(v))?);
    }
    if f.rate_per_thread {
        if j.rate.is_none() {
            bail!("--rate-per-thread needs --rate");
        }
        j.rate_per_thread = true;
    }
    match (f.burst, &f.think) {
        (Some(ios), Some(t)) => {
            if ios == 0 {
                bail!("--burst 0: a burst needs at least one I/O");
            }
            j.burst = Some(Burst {
                ios,
                think: flag("--think", parse_duration(t))?,
            })
        }
        (None, None) => {}
        _ => bail!("--burst and --think go together"),
    }
    if let Some(v) = f.seed {
        j.seed = v;
    }
    if let Some(v) = &f.ioengine {
        j.engine = flag("--ioengine", EngineKind::parse(v))?;
    }
    if let Some(v) = f.batch_complete {
        j.batch_complete = v;
    }
    if let Some(v) = f.batch_submit {
        j.batch_submit = Some(v);
    }
    j.validate().map_err(|e| anyhow!(e))?;
    Ok(j)
}

/// The command line as typed, quoted where a shell would need it, passwords masked (it goes
/// into reports and recordings).
pub fn command_line() -> String {
    crate::command_args()
        .into_iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Exit code for an interrupted run, after cleanup: 128 + the signal (130 for Ctrl-C, 143 for
/// SIGTERM, 129 for SIGHUP), as a shell reports it.
pub fn interrupted_code() -> i32 {
    plumb_load::signal::exit_code_for(
        plumb_load::signal::received().unwrap_or(plumb_load::signal::SIGINT),
    )
}

/// Say which targets plumb is about to create, with their size and fate.
fn say_created(targets: &[PathBuf], size: u64, kept: bool) {
    for t in targets.iter().filter(|t| target::will_create(t, size)) {
        eprintln!(
            "plumb: creating {} ({} of random data; {})",
            t.display(),
            plumb_report::fmt::bytes(size),
            if kept {
                "kept afterwards (--keep)"
            } else {
                "removed afterwards"
            }
        );
    }
}

/// Prepare the targets, run the job watched for neighbours, and report it; created files are
/// removed when this returns (unless kept), including on error and Ctrl-C.
fn report_run(g: &GlobalArgs, j: &Job, safety: &Safety, notes: Vec<String>) -> Result<i32> {
    plumb_load::signal::install();
    say_created(&j.targets, j.file_size, safety.keep);
    let total = j.warmup + j.duration + j.cooldown;
    let root = plumb_sys::Root::host();
    let devs = plumb_lab::sweep::devices_under(&root, &j.targets);
    let meter = crate::progress::Meter::new(&format!("plumb io {}", j.name), total, devs.clone());
    let scope = plumb_record::watch::Scope::new(root, devs);
    let r = plumb_lab::sweep::watched_run(
        j,
        safety,
        &plumb_load::signal::stop_requested,
        &scope,
        &mut || meter.step(&j.name, std::time::Duration::ZERO, total, total),
    );
    match &r {
        Ok(Some(_)) => meter.finish(),
        _ => meter.abandon(),
    }
    match r? {
        Some((r, watched)) => {
            let mut rep = plumb_analyze::io::build(&r, &command_line(), notes);
            rep.interference = Some(watched);
            crate::emit(g, &rep)?;
            Ok(0)
        }
        None => {
            eprintln!("plumb: interrupted; in-flight I/O drained and files plumb created removed");
            Ok(interrupted_code())
        }
    }
}

/// A note when I/O through the page cache (diskspd without -Su/-Sh) covers less than the
/// memory available: the figures are then the cache's, not the device's.
fn fits_in_page_cache(j: &Job) -> Option<String> {
    if j.durability != plumb_load::job::Durability::None {
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

pub fn run(g: &GlobalArgs, a: &IoArgs) -> Result<i32> {
    match &a.cmd {
        IoCmd::Run(r) => {
            let j = build_job(&r.job, r.targets.clone())?;
            report_run(g, &j, &r.safety.safety(), Vec::new())
        }
        IoCmd::Diskspd(d) => {
            let p = plumb_load::diskspd::parse(&d.args).map_err(|e| anyhow!(e))?;
            let mut j = p.job;
            if let Some(e) = &d.ioengine {
                j.engine = flag("--ioengine", EngineKind::parse(e))?;
            }
            j.validate().map_err(|e| anyhow!(e))?;
            let mut notes = p.notes;
            notes.extend(fits_in_page_cache(&j));
            report_run(g, &j, &d.safety.safety(), notes)
        }
        IoCmd::Durability(d) => durability(g, d),
        IoCmd::Sweep(a) => sweep(g, a),
        IoCmd::Presets => {
            crate::emit(g, &plumb_analyze::io::preset_list())?;
            Ok(0)
        }
    }
}

fn durability(g: &GlobalArgs, a: &DurabilityArgs) -> Result<i32> {
    use plumb_lab::durability::{DurabilityPlan, DurabilityResult};
    plumb_load::signal::install();
    let per_mode = if a.quick {
        std::time::Duration::from_millis(500)
    } else {
        flag(
            "--duration",
            parse_duration(a.duration.as_deref().unwrap_or("1s")),
        )?
    };
    let mut sizes = Vec::new();
    for b in a.bs.split(',') {
        sizes.push(flag("--bs", parse_size(b))?);
    }
    let plan = DurabilityPlan::new(&a.paths, per_mode, &sizes, a.reps, a.keep)?;
    let per = plan.per_run();
    let planned = per * plan.runs().max(1);
    let devs = plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), &a.paths);
    let meter = crate::progress::Meter::new("plumb io durability", planned, devs);
    let r = plan.run(&mut |label, i, n| meter.step(label, per * i as u32, per, per * n as u32));
    if r.is_ok() {
        meter.finish();
    } else {
        meter.abandon();
    }
    match r {
        Ok(DurabilityResult::One(rep)) => crate::emit(g, &rep)?,
        Ok(DurabilityResult::Many(c)) => crate::emit(g, &c)?,
        Err(plumb_load::Error::Interrupted) => {
            eprintln!("plumb: interrupted; the probe files were removed");
            return Ok(interrupted_code());
        }
        Err(e) => return Err(e.into()),
    }
    Ok(0)
}

fn sweep(g: &GlobalArgs, a: &SweepArgs) -> Result<i32> {
    plumb_load::signal::install();
    if a.reps == 0 || a.reps > 100 {
        bail!("--reps {}: use 1 to 100", a.reps);
    }
    let mut flags = a.job.clone();
    // Sweeps run many jobs: shorter runs than a single test unless the user says otherwise.
    flags.duration.get_or_insert_with(|| "5s".into());
    flags.warmup.get_or_insert_with(|| "1s".into());
    let base = build_job(&flags, a.targets.clone())?;
    let (kind, levels) =
        plumb_lab::sweep::plan_levels(&base, a.rates.as_deref(), a.qd_levels.as_deref())?;
    // The chart's file is made now: a bad path fails before the sweep, not after it. It is
    // removed again if the sweep does not finish.
    let chart = if a.no_chart {
        None
    } else {
        let path = match &a.chart {
            Some(p) => p.clone(),
            None => PathBuf::from(format!(
                "plumb-sweep-{}.svg",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0)
            )),
        };
        Some(plumb_report::out::Reserved::new("--chart", &path)?)
    };
    // Missing files are made once for the whole sweep; the runs then reuse them.
    let mut safety = a.safety.safety();
    say_created(&base.targets, base.file_size, a.safety.keep);
    let stop = plumb_load::signal::stop_requested;
    let Some(scratch) = plumb_lab::sweep::scratch_files(&base, a.safety.keep, &mut safety, &stop)?
    else {
        eprintln!("plumb: interrupted; files plumb created were removed");
        return Ok(interrupted_code());
    };
    // Each run: its warm-up, its measured time and its cool-down, and about half a second
    // between runs. Runs repeated because they were disturbed extend the plan.
    let per = base.warmup + base.duration + base.cooldown + std::time::Duration::from_millis(500);
    let planned_runs = levels.len() as u32 * a.reps;
    let meter = crate::progress::Meter::new(
        "plumb io sweep",
        per * planned_runs,
        plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), &base.targets),
    );
    let command_line = command_line();
    let mut done = 0u32;
    let swept = plumb_lab::sweep::run(
        plumb_lab::sweep::Sweep {
            kind,
            base: &base,
            levels: &levels,
            reps: a.reps,
            max_runs: plumb_lab::sweep::max_attempts(a.reps),
            safety: &safety,
            command_line: &command_line,
        },
        &plumb_load::signal::stop_requested,
        &mut |label, rep, reps| {
            let what = if rep > reps {
                format!("level {label}, extra run {rep} (the runs so far disagree)")
            } else {
                format!("level {label}, run {rep}/{reps}")
            };
            meter.step(&what, per * done, per, per * planned_runs.max(done + 1));
            done += 1;
        },
    );
    if matches!(swept, Ok(Some(_))) {
        meter.finish();
    } else {
        meter.abandon();
    }
    let Some(mut rep) = swept? else {
        eprintln!("plumb: interrupted; files plumb created were removed");
        return Ok(interrupted_code());
    };
    drop(scratch);
    if let Some(chart) = chart {
        let svg = plumb_report::io_render::sweep_chart(&rep);
        rep.chart = Some(chart.fill(svg.as_bytes())?);
    }
    crate::emit(g, &rep)?;
    Ok(0)
}
