//! `plumb delta`: snapshot the OS and the engine before and after a workload (a statement, a
//! file of SQL, or a command), cold or warm, repeated, and report the deltas.

use crate::cmd_engine::DirArg;
use crate::GlobalArgs;
use anyhow::Result;
use clap::Args;
use plumb_lab::delta::{Delta, DeltaConfig, DeltaPlan, Mode, WorkloadSpec};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("workload").required(true).args(["sql", "file", "cmd"]))]
#[command(group = clap::ArgGroup::new("mode").args(["cold", "warm", "both"]))]
pub struct DeltaArgs {
    /// The database: postgres://USER@HOST:PORT/DB (or mysql://, mariadb://, mssql://). Default:
    /// plumb's private PostgreSQL in --dir (started for the run and stopped after, unless it was
    /// already running; removed after when the run created it).
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE", value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
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
    let delta = Delta::new(config(g, a)?)?;
    let meter = crate::progress::Meter::new("plumb delta", Duration::ZERO, Vec::new());
    let mut drawn = crate::progress::Drawn::plain(&meter);
    let report = delta.run(&mut drawn, &plumb_sys::signal::stop_requested);
    let finished = drawn.finished;
    meter.close(finished);
    let report = report.map_err(|e| {
        crate::every::stopped(e, "the statement was cancelled and nothing is reported")
    })?;
    crate::emit(g, &plumb_report::delta_render::output(&report))?;
    Ok(0)
}

/// The flags as `Delta::new` takes them (it checks them).
fn config(g: &GlobalArgs, a: &DeltaArgs) -> Result<DeltaConfig> {
    let engine = match &a.engine {
        Some(t) => Some((
            crate::typed::with_password(t.clone(), a.password_file.as_deref())?,
            t.url.clone(),
        )),
        None => None,
    };
    let workload = match (&a.sql, &a.file) {
        (Some(s), _) => WorkloadSpec::Sql(s.clone()),
        (None, Some(f)) => WorkloadSpec::File(f.clone()),
        (None, None) => WorkloadSpec::Cmd(a.cmd.clone()),
    };
    let modes = if a.both {
        vec![Mode::Cold, Mode::Warm]
    } else if a.cold {
        vec![Mode::Cold]
    } else if a.warm {
        vec![Mode::Warm]
    } else {
        vec![Mode::AsFound]
    };
    Ok(DeltaConfig {
        engine,
        dir: a.dir.dir.clone(),
        set: a.set.clone(),
        build: a.build.build()?,
        workload,
        plan: DeltaPlan {
            modes,
            repeat: a.repeat,
            sample_every: Duration::from_millis(a.sample_ms),
            trace: a.trace,
            drop_host_cache: a.drop_host_cache,
        },
        threshold_ms: a.threshold,
        all: a.all,
        // The OS figures come from --sysroot's tree when one is given (a captured host: its
        // counters do not move, so only the engine's deltas are real).
        root: g.root()?,
    })
}
