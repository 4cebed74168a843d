//! `plumb mem`: memory truth next to the engine's belief, what an engine will assume, and
//! pressure to test both.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_load::units::{parse_duration, parse_size};
use plumb_sys::smaps::EngineKind;
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
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
    /// Read the engine's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
}

/// The server's own figure for its cache, read through a read-only session.
struct LiveBelief {
    obs: Box<dyn plumb_engine::Observer>,
}

impl LiveBelief {
    fn open(a: &ReportArgs) -> Result<Option<LiveBelief>> {
        let Some(url) = &a.engine else {
            return Ok(None);
        };
        let t = crate::engine_target("--engine", url, a.password_file.as_deref())?;
        let obs = plumb_engine::observer(&t).map_err(|e| anyhow!("--engine {e}"))?;
        Ok(Some(LiveBelief { obs }))
    }

    /// Put the server's figure in the report; a note when it has none.
    fn apply(&mut self, rep: &mut plumb_analyze::mem::MemReport) {
        let block = self
            .obs
            .info()
            .ok()
            .and_then(|i| i.settings.get("block_size").and_then(|b| b.parse().ok()))
            .unwrap_or(8192);
        let snap = self.obs.snapshot().map_err(|e| e.to_string());
        plumb_analyze::mem::apply_engine(
            rep,
            self.obs.kind(),
            block,
            snap.as_ref().map_err(|e| e.clone()),
        );
    }
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
    parse_size(v).map_err(|e| anyhow!("{name}: {e}"))
}

pub fn run(g: &GlobalArgs, a: &MemArgs) -> Result<i32> {
    match &a.cmd {
        None => report(g, &a.report),
        Some(MemCmd::Assume(x)) => assume(g, x),
        Some(MemCmd::Pressure(x)) => pressure(g, x),
    }
}

fn report(g: &GlobalArgs, a: &ReportArgs) -> Result<i32> {
    let root = g.root()?;
    let interval = parse_duration(&a.interval).map_err(|e| anyhow!("--interval: {e}"))?;
    if interval.is_zero() {
        bail!("--interval must be more than 0");
    }
    let collect = || {
        plumb_sys::memsnap::collect(&root, &a.pids, !a.no_engines).map_err(|e| match &e {
            plumb_sys::Error::NoSuchProcess { pid, .. } => anyhow!("--pid {pid}: {e}"),
            _ => anyhow::Error::new(e),
        })
    };
    let mut live = LiveBelief::open(a)?;
    let mut prev = collect()?;
    if !a.watch {
        std::thread::sleep(interval);
        let cur = collect()?;
        let mut rep = plumb_analyze::mem::build(&cur, Some(&prev));
        if let Some(l) = live.as_mut() {
            l.apply(&mut rep);
        }
        crate::emit(g, &rep)?;
        return Ok(0);
    }
    plumb_load::signal::install();
    let json = g.format() == plumb_report::Format::Json;
    let mut first = true;
    // The one watch loop: one line per interval, not drifting by what each costs.
    use plumb_record::ticks::{self, First, Flow, Ticking};
    let ticking =
        Ticking::every(interval, &plumb_load::signal::stop_requested).first(First::AfterInterval);
    let mut code = 0;
    ticks::run(&ticking, |_| -> Result<Flow> {
        let cur = match collect() {
            Ok(c) => c,
            Err(e) => {
                // A process that goes away ends the watch with a clear message.
                eprintln!("plumb: {e:#}");
                code = 2;
                return Ok(Flow::Stop);
            }
        };
        let mut rep = plumb_analyze::mem::build(&cur, Some(&prev));
        if let Some(l) = live.as_mut() {
            l.apply(&mut rep);
        }
        let mut out = std::io::stdout().lock();
        if json {
            plumb_report::write_json_line(&rep, "mem", &mut out)?;
        } else {
            plumb_report::mem_render::watch_line(&rep, first, &mut out)?;
        }
        first = false;
        prev = cur;
        Ok(Flow::Go)
    })?;
    Ok(code)
}

fn assume(g: &GlobalArgs, a: &AssumeArgs) -> Result<i32> {
    let kind = EngineKind::parse(&a.kind)
        .ok_or_else(|| anyhow!("--kind {}: use mssql, postgres or mariadb", a.kind))?;
    // Settings of another engine would be ignored without a word: refused instead.
    let given: [(&str, bool, EngineKind); 5] = [
        (
            "--memory-limit-mb",
            a.memory_limit_mb.is_some(),
            EngineKind::Mssql,
        ),
        (
            "--shared-buffers",
            a.shared_buffers.is_some(),
            EngineKind::Postgres,
        ),
        ("--work-mem", a.work_mem.is_some(), EngineKind::Postgres),
        (
            "--max-connections",
            a.max_connections.is_some(),
            EngineKind::Postgres,
        ),
        (
            "--innodb-buffer-pool-size",
            a.innodb_buffer_pool_size.is_some(),
            EngineKind::Mariadb,
        ),
    ];
    for (flag, set, of) in given {
        if set && of != kind {
            bail!(
                "{flag} is a {} setting; --kind {} does not use it",
                of.name(),
                a.kind
            );
        }
    }
    let root = g.root()?;
    if let Some(p) = a.pid {
        plumb_sys::process::check_pid(&root, p).map_err(|e| anyhow!("--pid {p}: {e}"))?;
    }
    let mem_total = plumb_sys::mem::read_meminfo(&root)?
        .mem_total_bytes
        .unwrap_or(0);
    let host = match &a.host_memory {
        Some(v) => size_flag("--host-memory", v)?,
        None => mem_total,
    };
    if host == 0 {
        bail!("--host-memory must be more than 0");
    }
    let mounts = plumb_sys::mount::read_mountinfo(&root, None)?;
    let cgm = plumb_sys::cgroup::CgroupMounts::from_mounts(&mounts);
    let limit = match &a.limit {
        Some(v) => {
            let l = size_flag("--limit", v)?;
            if l == 0 {
                bail!("--limit must be more than 0");
            }
            Some(l)
        }
        None => {
            let pid = match a.pid {
                Some(p) => p,
                None => plumb_sys::snapshot::self_pid(&root)?,
            };
            let s = plumb_sys::process::read(&root, pid)?;
            let pc = plumb_sys::cgroup::read_for_process(&root, &cgm, &s.cgroups);
            plumb_analyze::os::applied_memory_limit(&pc, Some(host))
        }
    };
    let mut settings = plumb_sys::engine_conf::read(&root, kind, a.pid);
    if let Some(v) = a.memory_limit_mb {
        settings.memory_limit_mb = Some(v);
        settings.sources.push("--memory-limit-mb".into());
    }
    if let Some(v) = &a.shared_buffers {
        settings.shared_buffers_bytes = Some(size_flag("--shared-buffers", v)?);
        settings.sources.push("--shared-buffers".into());
    }
    if let Some(v) = &a.work_mem {
        settings.work_mem_bytes = Some(size_flag("--work-mem", v)?);
    }
    if let Some(v) = a.max_connections {
        settings.max_connections = Some(v);
    }
    if let Some(v) = &a.innodb_buffer_pool_size {
        settings.innodb_buffer_pool_size_bytes = Some(size_flag("--innodb-buffer-pool-size", v)?);
    }
    let assumption = plumb_analyze::mem::assume(kind, host, limit, cgm.mode, &settings);
    let warn = assumption
        .statements
        .iter()
        .any(|s| s.level == plumb_analyze::Level::Warn);
    crate::emit(g, &plumb_report::mem_render::AssumeReport { assumption })?;
    // A cache sized above what the engine can have is a failed check.
    Ok(if warn { 1 } else { 0 })
}

fn pressure(g: &GlobalArgs, a: &PressureArgs) -> Result<i32> {
    use plumb_load::pressure::{check_size, run, CgroupChoice, PressureOptions};
    let size = size_flag("SIZE", &a.size)?;
    if size == 0 {
        bail!("SIZE must be more than 0");
    }
    let hold = a
        .hold
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| anyhow!("--hold: {e}"))?;
    let every = parse_duration(&a.every).map_err(|e| anyhow!("--every: {e}"))?;
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
    let root = plumb_sys::Root::host();
    let mi = plumb_sys::mem::read_meminfo(&root)?;
    let disk_swap_free: u64 = plumb_sys::mem::read_swaps(&root)?
        .iter()
        .filter(|s| !s.filename.starts_with("/dev/zram"))
        .map(|s| s.size_bytes.saturating_sub(s.used_bytes))
        .sum();
    if !a.force {
        check_size(size, mi.mem_available_bytes.unwrap_or(0), disk_swap_free)
            .map_err(|e| anyhow!("SIZE {}: {e}", a.size))?;
    }
    let opts = PressureOptions {
        size,
        shared: a.shared,
        idle: a.idle,
        hold,
        cgroup,
        zram_swap: zram,
        every,
        seed: std::process::id() as u64,
    };
    let json = g.format() == plumb_report::Format::Json;
    let mut on_setup = |s: &plumb_load::pressure::Setup| {
        let mut out = std::io::stdout().lock();
        if json {
            let _ = plumb_report::write_json_line(s, "mem_pressure_setup", &mut out);
        } else {
            let _ = plumb_report::mem_render::pressure_setup(s, &mut out);
        }
    };
    let mut on_tick = |t: &plumb_load::pressure::Tick| {
        let mut out = std::io::stdout().lock();
        if json {
            let _ = plumb_report::write_json_line(t, "mem_pressure_tick", &mut out);
        } else {
            let _ = plumb_report::mem_render::pressure_tick(t, &mut out);
        }
    };
    match run(&opts, &mut on_setup, &mut on_tick) {
        Ok(()) => {
            if plumb_load::signal::stop_requested() {
                eprintln!(
                    "plumb: stopped; memory released{}",
                    if a.swap.is_some() || a.cgroup_limit.is_some() {
                        ", swap and cgroup taken down"
                    } else {
                        ""
                    }
                );
            }
            Ok(0)
        }
        Err(e) => Err(e.into()),
    }
}
