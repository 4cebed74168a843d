//! `plumb mem`: memory truth next to the engine's belief, what an engine will assume, and
//! pressure to test both.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_sys::smaps::EngineKind;
use plumb_sys::units::{parse_duration, parse_size};
use std::path::PathBuf;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MemArgs {
    #[command(subcommand)]
    pub cmd: Option<MemCmd>,
    #[command(flatten)]
    pub report: ReportArgs,
}

#[derive(Debug, Args, Default)]
pub struct ReportArgs {
    /// Report this process (repeatable). Without --pid, plumb finds postgres, mariadbd/mysqld
    /// and sqlservr by name.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
    /// Time between the two samples that give swap-in/out rates.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub interval: String,
    /// Keep sampling: one line per interval until Ctrl-C (JSON Lines with --json).
    #[arg(long)]
    pub watch: bool,
    /// Do not look for database processes by name.
    #[arg(long)]
    pub no_engines: bool,
    /// Ask the server what its cache holds (InnoDB's buffer pool data, SQL Server's database
    /// cache counter, PostgreSQL's pg_buffercache) instead of taking its configured size.
    #[arg(long, value_name = "URL", value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
    /// Read the engine's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum MemCmd {
    /// What an engine will take as its memory here, from host RAM, the cgroup limit and its
    /// settings (read from a running instance, or given as flags).
    Assume(AssumeArgs),
    /// Allocate SIZE of memory and keep writing to it, as a memory-pressure test program
    /// does: random data, every page hot (or --idle), optionally in its own memory cgroup and with
    /// zram swap set up for the run. Everything is released on exit and Ctrl-C.
    Pressure(PressureArgs),
}

#[derive(Debug, Args)]
pub struct AssumeArgs {
    /// The kind of engine: mssql, postgres or mariadb.
    #[arg(long, value_name = "KIND")]
    pub kind: String,
    /// The engine's process: its cgroup limit and settings are read from it.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// Host RAM as the engine sees it (default: this host's MemTotal), e.g. 7113152Ki.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub host_memory: Option<String>,
    /// The container or cgroup memory limit (default: the one on --pid, else on plumb), e.g. 3Gi.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub limit: Option<String>,
    /// SQL Server memorylimitmb / MSSQL_MEMORY_LIMIT_MB.
    #[arg(long, value_name = "MB")]
    pub memory_limit_mb: Option<u64>,
    /// PostgreSQL shared_buffers.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub shared_buffers: Option<String>,
    /// PostgreSQL work_mem.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub work_mem: Option<String>,
    /// PostgreSQL max_connections.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<u64>,
    /// MariaDB innodb_buffer_pool_size.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub innodb_buffer_pool_size: Option<String>,
}

#[derive(Debug, Args)]
pub struct PressureArgs {
    /// How much memory to take (512M, 4G, 3Gi).
    #[arg(value_name = "SIZE", allow_hyphen_values = true)]
    pub size: String,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_name = "TIME")]
    pub hold: Option<String>,
    /// Shared memory (MAP_SHARED), like PostgreSQL's shared_buffers, instead of private.
    #[arg(long)]
    pub shared: bool,
    /// Write every page once, then leave it alone: a cache nobody reads.
    #[arg(long)]
    pub idle: bool,
    /// Run inside a memory cgroup of plumb's own with this limit (root), removed afterwards.
    #[arg(
        long,
        value_name = "SIZE",
        conflicts_with = "cgroup",
        allow_hyphen_values = true
    )]
    pub cgroup_limit: Option<String>,
    /// Run inside this existing cgroup directory (left in place afterwards).
    #[arg(long, value_name = "DIR")]
    pub cgroup: Option<PathBuf>,
    /// Set up swap for the run: zram:SIZE (root); swapped off and reset afterwards.
    #[arg(long, value_name = "zram:SIZE")]
    pub swap: Option<String>,
    /// Go ahead even if SIZE exceeds what the host can give.
    #[arg(long)]
    pub force: bool,
    /// Report every this long.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub every: String,
}

fn size_flag(name: &str, v: &str) -> Result<u64> {
    parse_size(v).map_err(|e| crate::quoting(format!("{name}: {e}"), e))
}

pub fn run(g: &GlobalArgs, a: &MemArgs) -> Result<i32> {
    match &a.cmd {
        None => report(g, &a.report),
        Some(MemCmd::Assume(x)) => assume(g, x),
        Some(MemCmd::Pressure(x)) => pressure(g, x),
    }
}

fn report(g: &GlobalArgs, a: &ReportArgs) -> Result<i32> {
    let interval =
        parse_duration(&a.interval).map_err(|e| crate::quoting(format!("--interval: {e}"), e))?;
    if interval.is_zero() {
        bail!("--interval must be more than 0");
    }
    let engine = a
        .engine
        .clone()
        .map(|t| crate::typed::with_password(t, a.password_file.as_deref()))
        .transpose()?;
    let watch = plumb_record::mem_watch::MemWatch::new(plumb_record::mem_watch::MemConfig {
        root: g.root()?,
        pids: a.pids.clone(),
        find_engines: !a.no_engines,
        engine,
        interval,
    })?;
    if !a.watch {
        crate::emit(g, &watch.once()?)?;
        return Ok(0);
    }
    plumb_sys::signal::install();
    let json = g.format() == plumb_report::Format::Json;
    let mut first = true;
    let ended = watch.run(&plumb_sys::signal::stop_requested, |rep| {
        let mut out = std::io::stdout().lock();
        if json {
            plumb_report::write_json_line(rep, "mem", &mut out).map_err(std::io::Error::other)?;
        } else {
            plumb_report::mem_render::watch_line(rep, first, &mut out)?;
        }
        first = false;
        Ok(())
    })?;
    // A process that goes away ends the watch with a clear message.
    Ok(match ended {
        Some(e) => {
            crate::every::say(&format!("{:#}", anyhow::Error::from(e)));
            2
        }
        None => 0,
    })
}

fn assume(g: &GlobalArgs, a: &AssumeArgs) -> Result<i32> {
    let kind = EngineKind::parse(&a.kind)
        .ok_or_else(|| anyhow!("--kind {}: use mssql, postgres or mariadb", a.kind))?;
    let size =
        |flag: &str, v: &Option<String>| v.as_deref().map(|v| size_flag(flag, v)).transpose();
    let inputs = plumb_analyze::mem::AssumeInputs {
        host_memory_bytes: size("--host-memory", &a.host_memory)?,
        cgroup_limit_bytes: size("--limit", &a.limit)?,
        memory_limit_mb: a.memory_limit_mb,
        shared_buffers_bytes: size("--shared-buffers", &a.shared_buffers)?,
        work_mem_bytes: size("--work-mem", &a.work_mem)?,
        max_connections: a.max_connections,
        innodb_buffer_pool_size_bytes: size(
            "--innodb-buffer-pool-size",
            &a.innodb_buffer_pool_size,
        )?,
    };
    for (flag, v) in [
        ("--host-memory", inputs.host_memory_bytes),
        ("--limit", inputs.cgroup_limit_bytes),
    ] {
        if v == Some(0) {
            bail!("{flag} must be more than 0");
        }
    }
    // Settings of another engine would be ignored without a word: refused instead.
    if let Some(f) = inputs.foreign(kind) {
        let flag = f.setting.replace('_', "-");
        bail!(
            "--{flag} is a {} setting; --kind {} does not use it",
            f.of.name(),
            a.kind
        );
    }
    let here =
        plumb_sys::memsnap::assume_host(&g.root()?, kind, a.pid).map_err(|e| match a.pid {
            Some(p) if matches!(e, plumb_sys::Error::NoSuchProcess { .. }) => {
                crate::quoting(format!("--pid {p}: {e}"), e)
            }
            _ => e.into(),
        })?;
    if inputs.host_memory_bytes.is_none() && here.mem_total_bytes == 0 {
        bail!("this host's MemTotal reads 0: give --host-memory");
    }
    let assumption = plumb_analyze::mem::assume_here(kind, &here, &inputs);
    let warn = assumption
        .statements
        .iter()
        .any(|s| s.level == plumb_analyze::Level::Warn);
    crate::emit(g, &plumb_report::mem_render::AssumeReport { assumption })?;
    // A cache sized above what the engine can have is a failed check.
    Ok(if warn { 1 } else { 0 })
}

/// The pressure's settings from the flags, checked (the size against the host without
/// --force).
fn pressure_options(a: &PressureArgs) -> Result<plumb_io::pressure::PressureOptions> {
    use plumb_io::pressure::{check_fits, CgroupChoice, PressureOptions};
    let size = size_flag("SIZE", &a.size)?;
    if size == 0 {
        bail!("SIZE must be more than 0");
    }
    let hold = a
        .hold
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| crate::quoting(format!("--hold: {e}"), e))?;
    let every = parse_duration(&a.every).map_err(|e| crate::quoting(format!("--every: {e}"), e))?;
    if every.is_zero() {
        bail!("--every must be more than 0");
    }
    let zram = match &a.swap {
        None => None,
        Some(s) => match s.strip_prefix("zram:") {
            Some(v) => Some(size_flag("--swap zram:SIZE", v)?),
            None => bail!("--swap {s}: use zram:SIZE, e.g. zram:2G"),
        },
    };
    let cgroup = match (&a.cgroup_limit, &a.cgroup) {
        (Some(l), _) => CgroupChoice::Create {
            limit: size_flag("--cgroup-limit", l)?,
        },
        (None, Some(d)) => CgroupChoice::Join(d.clone()),
        _ => CgroupChoice::None,
    };
    if !a.force {
        check_fits(size).map_err(|e| crate::quoting(format!("SIZE {}: {e}", a.size), e))?;
    }
    Ok(PressureOptions {
        size,
        shared: a.shared,
        idle: a.idle,
        hold,
        cgroup,
        zram_swap: zram,
        every,
        seed: std::process::id() as u64,
    })
}

fn pressure(g: &GlobalArgs, a: &PressureArgs) -> Result<i32> {
    let opts = pressure_options(a)?;
    let print = plumb_report::mem_render::PressurePrinter {
        json: g.format() == plumb_report::Format::Json,
    };
    let mut on_setup = |s: &plumb_io::pressure::Setup| print.setup(s);
    let mut on_tick = |t: &plumb_io::pressure::Tick| print.tick(t);
    plumb_io::pressure::run(&opts, &mut on_setup, &mut on_tick)?;
    if plumb_sys::signal::stop_requested() {
        let taken = if a.swap.is_some() || a.cgroup_limit.is_some() {
            ", swap and cgroup taken down"
        } else {
            ""
        };
        eprintln!("plumb: stopped; memory released{taken}");
    }
    Ok(0)
}
