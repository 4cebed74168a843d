//! `plumb record` (1-second recordings of the host, processes and an engine) and `plumb cpu`.

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::Args;
use plumb_sys::units::parse_duration;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Time between samples.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub interval: String,
    /// Stop after this long (default: until Ctrl-C, or until CMD exits).
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Also record this process and every process below it (a PostgreSQL postmaster and
    /// the backends it forks, new ones picked up): the tree's CPU, memory (PSS, swap), I/O and
    /// run-queue delay, the same per PostgreSQL role (backends, checkpointer, WAL writer…),
    /// and series of their own for the process and its first 16 members.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
    /// Record only the --pid processes (and CMD) themselves, not what they start. (--trace
    /// always follows children: the kernel hands a traced process's mark to what it forks.)
    #[arg(long, conflicts_with = "trace")]
    pub no_children: bool,
    /// Record the database servers running here (PostgreSQL, MariaDB/MySQL, SQL Server, found
    /// by name as `plumb mem` finds them) as with --pid, without their PIDs.
    #[arg(long)]
    pub engine_server: bool,
    /// The file to record into (default: plumb-DATE-TIME.plumb here; with --serve, none unless
    /// given). Never overwritten.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Record into this directory for as long as plumb runs (a recorder left running as a
    /// service): a new file (plumb-DATE-TIME.plumb) every --rotate, and the oldest of
    /// plumb's files there removed past --keep-size or --keep-for. Nothing else in it is
    /// touched.
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub out_dir: Option<PathBuf>,
    /// With --out-dir, start a new file this often.
    #[arg(long, value_name = "TIME", default_value = "1h", requires = "out_dir")]
    pub rotate: String,
    /// With --out-dir, remove the oldest recordings while those there take more than this
    /// (the one being written is kept).
    #[arg(long, value_name = "SIZE", default_value = "1G", requires = "out_dir")]
    pub keep_size: String,
    /// With --out-dir, remove recordings last written longer ago than this.
    #[arg(long, value_name = "TIME", default_value = "7d", requires = "out_dir")]
    pub keep_for: String,
    /// Expose the live figures on http://ADDR/metrics for Prometheus (OpenMetrics, names from
    /// `plumb export FILE --list --format openmetrics`): PORT listens on 127.0.0.1 only,
    /// :PORT on every interface, or HOST:PORT. No file is kept unless --out is given.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// With --serve, also a series for each recorded process, labelled with its PID. Off by
    /// default: a server's backends come and go, and each would be new series for good.
    #[arg(long, requires = "serve")]
    pub serve_pids: bool,
    /// A name for this run, shown when several recordings are overlaid.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Also record this database's counters and gauges (commits, block reads, WAL; sessions
    /// by state and wait, shared buffers clean and dirty, replication lag; MariaDB statements,
    /// buffer pool, row lock waits; SQL Server memory and grants): postgres://, mysql://,
    /// mssql://. Read about once a second when --interval is shorter. When the server runs
    /// here, add --engine-server (or its PID with --pid) for its processes.
    #[arg(long, value_name = "URL", value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
    /// With --engine, the statements to follow: the N heaviest by time since the last reading
    /// join those recorded, 5 × N at most, each with its calls, time, rows and blocks read and
    /// hit, and its text with every literal value left out (pg_stat_statements where installed,
    /// MariaDB's performance_schema digests where it is on, SQL Server's query stats). 0: none.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u16).range(0..=200))]
    pub statements: u16,
    /// Read the engine's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
    /// Also count in the kernel what the recorded processes ask of it, every sample: syscalls
    /// and their time, fsync and fdatasync calls, faults, and the block requests their I/O
    /// causes (reads, writes, FLUSH, FUA). Follows each --pid's children and threads, or CMD's.
    /// Needs root (eBPF).
    #[arg(long)]
    pub trace: bool,
    /// Run this command, record it with the host while it runs, and stop when it exits.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// A recorder's `--interval` (100 ms or more) and `--duration`.
pub(crate) fn sampling(
    interval: &str,
    duration: Option<&str>,
) -> Result<(Duration, Option<Duration>)> {
    Ok(plumb_record::recorder::parse_sampling(interval, duration)?)
}

pub fn record(g: &GlobalArgs, a: &RecordArgs) -> Result<i32> {
    use plumb_record::recorder::{RecordConfig, Recorder};
    use plumb_report::record_text;
    let (interval, duration) = sampling(&a.interval, a.duration.as_deref())?;
    let engine = a
        .engine
        .clone()
        .map(|t| crate::typed::with_password(t, a.password_file.as_deref()))
        .transpose()?;
    let recorder = Recorder::new(RecordConfig {
        root: g.root()?,
        interval,
        duration,
        pids: a.pids.clone(),
        children: !a.no_children,
        engine_servers: a.engine_server,
        engine,
        statements: a.statements as usize,
        out: a.out.clone(),
        keep: keep(a)?,
        serve: a.serve.clone(),
        serve_render: if a.serve_pids {
            plumb_report::openmetrics::live_render_per_pid
        } else {
            plumb_report::openmetrics::live_render
        },
        name: a.name.clone(),
        trace: a.trace,
        command: a.cmd.clone(),
        command_line: crate::cmd_io::command_line(),
    })?;
    if let Some(f) = recorder.file() {
        // The file first: a bad --out must not leave the command running.
        plumb_report::out::check_new_file("--out", f)?;
    }
    plumb_sys::signal::install();
    let summary = recorder.run_with(
        &mut say,
        &plumb_sys::signal::stop_requested,
        &plumb_sys::signal::forward_to,
    )?;
    for line in record_text::summary(&summary) {
        eprintln!("plumb: {}", plumb_sys::visible::lines(&line));
    }
    Ok(summary.exit_code.unwrap_or(0))
}

/// The recording's events as lines on stderr.
fn say(e: plumb_record::events::Event<'_>) {
    use plumb_record::events::Event;
    use plumb_report::record_text;
    match e {
        Event::Serving { addr } => eprintln!("plumb: {}", record_text::serving(addr)),
        Event::Recording {
            file,
            every,
            interval,
            slow,
            duration,
        } => eprintln!(
            "plumb: {}",
            record_text::recording(file, every, interval, slow, duration)
        ),
        Event::Note(line) => eprintln!("plumb: {}", plumb_sys::visible::lines(line)),
        // The recorder counts no steps and traces nothing of its own.
        Event::Tracing { .. }
        | Event::Step { .. }
        | Event::Live { .. }
        | Event::Finished { .. } => {}
    }
}

/// `--out-dir` with its rotation and caps, checked.
fn keep(a: &RecordArgs) -> Result<Option<plumb_record::keep::Keep>> {
    let Some(dir) = &a.out_dir else {
        return Ok(None);
    };
    let time = |flag: &str, v: &str| -> Result<Duration> {
        parse_duration(v).map_err(|e| anyhow::anyhow!("{flag} {v}: {e}"))
    };
    let every = time("--rotate", &a.rotate)?;
    let max_age = time("--keep-for", &a.keep_for)?;
    let max_bytes = plumb_sys::units::parse_size(&a.keep_size)
        .map_err(|e| anyhow::anyhow!("--keep-size {}: {e}", a.keep_size))?;
    if every < Duration::from_secs(10) {
        bail!("--rotate {}: at least 10s", a.rotate);
    }
    if max_age < every {
        bail!(
            "--keep-for {}: shorter than --rotate {}",
            a.keep_for,
            a.rotate
        );
    }
    if max_bytes < 1 << 20 {
        bail!("--keep-size {}: at least 1M", a.keep_size);
    }
    Ok(Some(plumb_record::keep::Keep {
        dir: dir.clone(),
        every,
        max_bytes,
        max_age,
    }))
}

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Also show this process's threads: CPU use and time runnable but waiting for a CPU.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// How long to watch before each report (e.g. 1s, 500ms).
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub interval: String,
    /// Keep going, one report per interval, until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

fn sched_sample(
    root: &plumb_sys::Root,
    pid: Option<u32>,
) -> Result<plumb_analyze::sched::SchedSample> {
    let threads = match pid {
        Some(p) => Some((
            p,
            plumb_sys::process::read_threads(root, p)
                .map_err(|e| crate::quoting(format!("--pid {p}: {e}"), e))?,
        )),
        None => None,
    };
    Ok(plumb_analyze::sched::SchedSample {
        stat: plumb_sys::cpu::read_stat(root)?,
        schedstat: plumb_sys::cpu::read_schedstat(root).ok().flatten(),
        psi_cpu: plumb_sys::pressure::read_host(root)
            .ok()
            .flatten()
            .and_then(|p| p.cpu),
        threads,
        at: Instant::now(),
    })
}

pub fn cpu(g: &GlobalArgs, a: &CpuArgs) -> Result<i32> {
    let root = g.root()?;
    let interval =
        parse_duration(&a.interval).map_err(|e| crate::quoting(format!("--interval: {e}"), e))?;
    if interval < Duration::from_millis(100) {
        bail!("--interval {}: use 100ms or more", a.interval);
    }
    let hz = plumb_sys::host::clock_ticks_per_s().unwrap_or(100);
    plumb_sys::signal::install();
    let mut prev = sched_sample(&root, a.pid)?;
    // The one watch loop: one report per interval, not drifting by what each one costs.
    use plumb_record::ticks::{self, First, Flow, Ticking};
    let ticking =
        Ticking::every(interval, &plumb_sys::signal::stop_requested).first(First::AfterInterval);
    let mut code = 0;
    ticks::run(&ticking, |_| -> Result<Flow> {
        let cur = match sched_sample(&root, a.pid) {
            Ok(c) => c,
            Err(e) if a.watch => {
                eprintln!("plumb: {e:#}");
                code = 2;
                return Ok(Flow::Stop);
            }
            Err(e) => return Err(e),
        };
        let rep = plumb_analyze::sched::build(&prev, &cur, hz);
        crate::emit(g, &rep)?;
        if !a.watch {
            return Ok(Flow::Stop);
        }
        println!();
        prev = cur;
        Ok(Flow::Go)
    })?;
    Ok(code)
}
