//! `plumb delta`: snapshot the OS and the engine before and after a workload (a statement, a
//! file of SQL, or a command), cold or warm, repeated, and report the deltas.

use crate::cmd_engine::DirArg;
use crate::GlobalArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use plumb_analyze::delta;
use plumb_engine::private;
use plumb_lab::delta::{DeltaPlan, DeltaTarget, Mode, Workload};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("workload").required(true).args(["sql", "file", "cmd"]))]
#[command(group = clap::ArgGroup::new("mode").args(["cold", "warm", "both"]))]
pub struct DeltaArgs {
    /// The database: postgres://USER@HOST:PORT/DB (or mysql://, mariadb://, mssql://). Default:
    /// plumb's private PostgreSQL in --dir (started for the run and stopped after, unless it was
    /// already running; removed after when the run created it).
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE")]
    pub engine: Option<String>,
    /// Read the password from this file (must not be readable by others) instead of the URL or
    /// PGPASSWORD.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    #[command(flatten)]
    pub dir: DirArg,
    /// The private instance's PostgreSQL build, when the run starts it.
    #[command(flatten)]
    pub build: crate::cmd_engine::BuildArg,
    /// The workload: one SQL statement (or several separated by semicolons).
    #[arg(long, value_name = "STMT")]
    pub sql: Option<String>,
    /// The workload: a file of SQL.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The workload: a command, run with PGHOST/PGPORT/PGUSER/PGDATABASE and PLUMB_ENGINE_URL
    /// set for the private instance.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
    /// Measured runs per mode; figures are the median, with the range.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Empty the caches before each run: restart the private instance (the engine's cache) and
    /// evict its own files from the OS page cache (nobody else's). Against a server plumb did
    /// not start, the engine's cache is emptied where it has a statement for it, and the host's
    /// page cache only with --drop-host-cache.
    #[arg(long)]
    pub cold: bool,
    /// With --cold or --both: also drop the whole host's page cache before each cold run
    /// (`echo 3 > /proc/sys/vm/drop_caches`: every process's cached files, a production
    /// database's beside it too; root).
    #[arg(long)]
    pub drop_host_cache: bool,
    /// Run the workload once unmeasured first, so every measured run finds the caches warm.
    #[arg(long)]
    pub warm: bool,
    /// Cold runs, then warm runs, side by side.
    #[arg(long)]
    pub both: bool,
    /// Hide waits, latches and spinlocks under this much wait time (e.g. 1ms, 250us, 2s; a
    /// bare number is milliseconds).
    #[arg(long, value_name = "TIME", default_value = "1ms", value_parser = threshold_ms)]
    pub threshold: f64,
    /// Show every figure, also zeros and waits under the threshold.
    #[arg(long)]
    pub all: bool,
    /// How often to sample during a run, in milliseconds: what the workload waits on
    /// (PostgreSQL), the run queue and memory grants (SQL Server).
    #[arg(long, value_name = "MS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(10..=1000))]
    pub sample_ms: u64,
    /// Settings for the private instance when plumb starts it, NAME=VALUE (repeat), e.g.
    /// shared_buffers=16MB.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Trace the server's processes over each run, as `plumb trace` does: the syscalls that took
    /// most time, the block requests they submitted (FLUSH, FUA), faults and context switches,
    /// as rows beside the engine's figures (root; the server must run on this host).
    #[arg(long)]
    pub trace: bool,
}

/// `--threshold`: a duration (`1ms`, `250us`), or a bare number of milliseconds; in ms.
fn threshold_ms(s: &str) -> std::result::Result<f64, String> {
    if let Ok(v) = s.trim().parse::<f64>() {
        return if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(format!("{s:?}: must be zero or more"))
        };
    }
    plumb_sys::units::parse_duration(s)
        .map(|d| d.as_secs_f64() * 1000.0)
        .map_err(|e| e.0)
}

pub fn run(g: &GlobalArgs, a: &DeltaArgs) -> Result<i32> {
    plumb_sys::signal::install();
    match run_inner(g, a) {
        // Whatever failed after Ctrl-C (a cancelled statement) is the interruption.
        Err(_) | Ok(_) if interrupted() => {
            eprintln!("plumb: interrupted; the statement was cancelled and nothing is reported");
            Ok(crate::cmd_io::interrupted_code())
        }
        other => other,
    }
}

/// The statement or command each run executes.
fn workload(a: &DeltaArgs) -> Result<Workload> {
    Ok(if let Some(s) = &a.sql {
        if s.trim().is_empty() {
            bail!("--sql: empty statement");
        }
        Workload::Sql(s.clone())
    } else if let Some(f) = &a.file {
        let text = plumb_sys::read_text_bounded(f, 64 << 20)
            .with_context(|| format!("--file {}", f.display()))?;
        if text.trim().is_empty() {
            bail!("--file {}: no SQL in it", f.display());
        }
        Workload::Sql(text)
    } else {
        Workload::Cmd(a.cmd.clone())
    })
}

/// The target: a URL, or the private instance (started now if needed; the guard stops it
/// after the runs).
fn target(a: &DeltaArgs) -> Result<(DeltaTarget, Option<private::Owned>)> {
    match &a.engine {
        Some(url) => {
            if !a.set.is_empty() {
                bail!("--set configures plumb's private instance when plumb starts it; with --engine the server is yours and keeps its settings (leave out --set)");
            }
            if a.build.bin_dir.is_some() || a.build.pg_version.is_some() {
                bail!("--bin-dir and --pg-version choose the build of plumb's private instance; with --engine the server is yours (leave them out)");
            }
            let t = crate::engine_target("--engine", url, a.password_file.as_deref())?;
            let dt = plumb_lab::delta::url_target(t, url, a.dir.dir.as_deref());
            Ok((dt, None))
        }
        None => Ok(plumb_lab::delta::private_target(
            &a.dir.dir(),
            &a.set,
            a.build.build()?,
            &mut |note| eprintln!("plumb: {}", plumb_sys::visible::lines(&note)),
        )?),
    }
}

/// The runs asked for: which cache modes, how many of each, sampled how often, traced or not.
fn plan(a: &DeltaArgs) -> DeltaPlan {
    let modes = if a.both {
        vec![Mode::Cold, Mode::Warm]
    } else if a.cold {
        vec![Mode::Cold]
    } else if a.warm {
        vec![Mode::Warm]
    } else {
        vec![Mode::AsFound]
    };
    DeltaPlan {
        modes,
        repeat: a.repeat,
        sample_every: Duration::from_millis(a.sample_ms),
        trace: a.trace,
        drop_host_cache: a.drop_host_cache,
    }
}

fn run_inner(g: &GlobalArgs, a: &DeltaArgs) -> Result<i32> {
    if a.trace && !plumb_sys::os::is_root() {
        anyhow::bail!("--trace needs root (plumb loads eBPF programs: CAP_BPF and CAP_PERFMON)");
    }
    if a.drop_host_cache && !(a.cold || a.both) {
        bail!("--drop-host-cache goes with --cold or --both (it empties the host's page cache before each cold run)");
    }
    if !(a.threshold >= 0.0) {
        bail!(
            "--threshold {}: must be zero or more milliseconds",
            a.threshold
        );
    }
    let workload = workload(a)?;
    let (wh, _stop_guard) = target(a)?;
    // The OS figures come from --sysroot's tree when one is given (a captured host: its
    // counters do not move, so only the engine's deltas are real).
    let root = g.root()?;
    let plan = plan(a);
    // Progress: each run is planned to take as long as the runs before it did on average
    // (two seconds before the first has finished).
    let meter = crate::progress::Meter::new("plumb delta", Duration::ZERO, Vec::new());
    let started = std::time::Instant::now();
    let mut starting = |what: &str, k: usize, n: usize| {
        let per = if k == 0 {
            Duration::from_secs(2)
        } else {
            started.elapsed() / k as u32
        };
        meter.step(what, per * k as u32, per, per * n as u32);
    };
    let runs = plumb_lab::delta::run(&root, &wh, &workload, &plan, &interrupted, &mut starting);
    match &runs {
        Ok(_) => meter.finish(),
        Err(_) => meter.abandon(),
    }
    let runs = runs?;
    let report = delta::summarize(
        wh.shown.clone(),
        Some(runs.info),
        workload.describe(),
        a.repeat as usize,
        runs.modes,
        runs.unavailable,
        a.threshold,
        a.all,
    );
    crate::emit(g, &plumb_report::delta_render::output(&report))?;
    Ok(0)
}

fn interrupted() -> bool {
    plumb_sys::signal::stop_requested()
}
