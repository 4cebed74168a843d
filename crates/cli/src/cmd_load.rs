//! `plumb load`: the order-entry workload (TPC-C-like) on a database plumb creates, loads,
//! drives and drops. The work is `plumb_lab::load`; this is its flags, its progress and its
//! output.

use crate::GlobalArgs;
use anyhow::Result;
use clap::Args;
use plumb_engine::oltp::Workload;
use plumb_lab::load::{Load, LoadConfig};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// A server of yours (postgres://USER@HOST/DB, mysql://USER@HOST/DB or
    /// mariadb://…?socket=PATH) instead of plumb's private PostgreSQL in --dir. plumb creates its
    /// own database there, and runs only with --allow-writes.
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE", value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
    /// Read the server's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
    /// With --engine: create, fill, write to and drop a database on that server.
    #[arg(long, requires = "engine")]
    pub allow_writes: bool,
    #[command(flatten)]
    pub dir: crate::cmd_engine::DirArg,
    /// Settings for the private instance when plumb starts it, NAME=VALUE (repeat).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub build: crate::cmd_engine::BuildArg,
    #[command(flatten)]
    pub accept: crate::neighbours::AcceptArg,
    /// What runs: order-entry (TPC-C-like, five transactions in HammerDB's mix), tpcb
    /// (pgbench's TPC-B-like transaction, statement by statement), point-select (pgbench -S's
    /// select by key), read-write (sysbench's oltp_read_write: 18 statements a transaction on
    /// a table shaped as sysbench's), insert-single and insert-bulk (the insert/CHECKPOINT loops: 100
    /// single-row commits, or 10,000 inserts in one transaction, then a checkpoint, round and
    /// round on one client).
    #[arg(long, value_name = "NAME", default_value = "order-entry", value_parser = workload_name)]
    pub workload: String,
    /// order-entry's scale: warehouses to load (each about 100 MB: 10 districts, 30,000
    /// customers, 100,000 stock rows). Default 1.
    #[arg(long, value_name = "N")]
    pub warehouses: Option<u32>,
    /// tpcb's and point-select's scale, as pgbench's: 100,000 accounts, 10 tellers and a
    /// branch a unit (about 15 MB); read-write's: 100,000 rows a unit (about 24 MB). Default 1.
    #[arg(long, value_name = "N", conflicts_with = "warehouses")]
    pub scale: Option<u32>,
    /// Clients, one connection each (client i's home warehouse: i mod N + 1); default 4.
    #[arg(long, value_name = "N")]
    pub clients: Option<u32>,
    /// Run this long before the timed window (not counted).
    #[arg(long, value_name = "TIME", default_value = "30s", value_parser = crate::typed::DURATION)]
    pub rampup: Duration,
    /// The timed window.
    #[arg(long, value_name = "TIME", default_value = "2m", value_parser = crate::typed::DURATION)]
    pub duration: Duration,
    /// Open loop: this many transactions a second over all clients, each client on a
    /// Poisson schedule; latency is timed from the intended start, the service time beside
    /// it. Default: closed loop (each client starts its next transaction when the last ends).
    #[arg(long, value_name = "N[/s]", value_parser = crate::typed::RATE)]
    pub rate: Option<f64>,
    /// Try a transaction that failed on a deadlock, serialization failure or lock timeout up
    /// to N times in all (1: no retry). Every failure and retry is counted.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub max_tries: u32,
    /// Threads for the clients, as pgbench's -j: on PostgreSQL a thread serves several
    /// clients, waiting on all their sockets at once; MariaDB's and SQL Server's clients keep
    /// a thread each. Default: one a CPU plumb may use.
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// The database plumb creates (and drops at the end unless --keep).
    #[arg(long, value_name = "NAME", default_value = "plumb_load")]
    pub database: String,
    /// Keep the database: the next run of this workload and scale reuses it, if it is yours.
    #[arg(long)]
    pub keep: bool,
    /// Drop a kept database after reusing it (checked again first).
    #[arg(long, conflicts_with = "keep")]
    pub drop_kept: bool,
    /// Check TPC-C's consistency conditions 1-4 after the run.
    #[arg(long)]
    pub check: bool,
    /// The seed of the transactions' inputs.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Record the host, the server's processes, the engine's counters and the workload's
    /// transactions, failures and p95 per type every second into FILE (a new file), with marks
    /// for the load, the ramp-up and the timed window: `plumb report FILE` charts them.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Write a report directory (new, or empty): index.html (the figures, each type's table
    /// and the recording's charts), load.json, summary.txt and recording.plumb (the recording
    /// goes to --record's file instead when both are given).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Take each transaction type's time on the server apart: on a CPU, waiting for one,
    /// reading from storage, making writes durable (with the cache flushes per transaction),
    /// waiting on locks and latches, and the client's time between statements; per transaction
    /// and over the slowest 1%. The kernel times each connection's server thread (eBPF: needs
    /// root, and the server on this host; PostgreSQL or MariaDB).
    #[arg(long)]
    pub explain: bool,
}

/// The files `--out` writes into its directory.
const LOAD_FILES: [&str; 4] = ["index.html", "load.json", "summary.txt", "recording.plumb"];

fn config(a: &LoadArgs) -> Result<LoadConfig> {
    let target = a
        .engine
        .clone()
        .map(|t| crate::typed::with_password(t, a.password_file.as_deref()))
        .transpose()?;
    if target.is_some() && (a.build.bin_dir.is_some() || a.build.pg_version.is_some()) {
        anyhow::bail!("--bin-dir and --pg-version choose the build of plumb's private instance; with --engine the server is yours (leave them out)");
    }
    let workload = Workload::parse(&a.workload).unwrap_or(Workload::OrderEntry);
    let scale = workload
        .scale_of(a.warehouses, a.scale)
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok(LoadConfig {
        target,
        allow_writes: a.allow_writes,
        dir: a.dir.dir(),
        set: a.set.clone(),
        build: a.build.build()?,
        database: a.database.clone(),
        workload,
        scale,
        clients: a.clients.unwrap_or(if workload.is_loop() { 1 } else { 4 }),
        rampup: a.rampup,
        duration: a.duration,
        rate: a.rate,
        max_tries: a.max_tries,
        threads: a.threads.map(|t| t as usize),
        keep: a.keep,
        drop_kept: a.drop_kept,
        check: a.check,
        seed: a.seed,
        record: a.record.clone(),
        command_line: crate::cmd_io::command_line(),
        accept: a.accept.accept_neighbour.clone(),
        explain: a.explain,
    })
}

pub fn run(g: &GlobalArgs, a: &LoadArgs) -> Result<i32> {
    plumb_sys::signal::install();
    // A server of the user's may answer nothing: Ctrl-C still ends plumb within 2 s.
    if a.engine.is_some() {
        plumb_sys::signal::quit_after_stop(Duration::from_millis(1500));
    }
    let mut load = Load::new(config(a)?)?;
    let out_dir = match &a.out {
        Some(out) => {
            plumb_report::out::check_out_dir("--out", out)?;
            let d = plumb_report::out::out_dir("--out", out)?;
            load.record_into(out.join("recording.plumb"));
            Some(d)
        }
        None => None,
    };
    let r = run_in(g, &load, a.out.as_deref());
    // A run that ended (1: not a result, and its report says why) keeps its report.
    match (&r, &out_dir) {
        (Ok(0 | 1), Some(d)) => {
            eprintln!("plumb: report in {}", d.path.join("index.html").display())
        }
        (_, Some(d)) => d.remove(&LOAD_FILES),
        _ => {}
    }
    // A recording of the user's own file keeps what it saw, as `plumb record` does.
    if let Some(f) = load
        .config()
        .record
        .as_ref()
        .filter(|f| !matches!(r, Ok(0 | 1)) && f.exists())
    {
        eprintln!(
            "plumb: the recording up to here is in {} (plumb report {0})",
            f.display()
        );
    }
    r
}

fn run_in(g: &GlobalArgs, load: &Load, out: Option<&std::path::Path>) -> Result<i32> {
    let meter = crate::progress::Meter::new("plumb load", Duration::ZERO, Vec::new());
    let mut drawn = crate::progress::Drawn::numbered(&meter);
    let r = load.run(&mut drawn, &plumb_sys::signal::stop_requested);
    let finished = drawn.finished;
    meter.close(finished);
    let r = r.map_err(|e| {
        crate::every::stopped(
            e,
            "the database this run created was dropped (a kept one stays)",
        )
    })?;
    if let Some(out) = out {
        let rec = load
            .config()
            .record
            .as_deref()
            .map(plumb_store::read)
            .transpose()?;
        plumb_report::load_render::write_dir(&r, out, rec.as_ref())
            .map_err(|e| anyhow::anyhow!(e))?;
    }
    crate::emit(g, &plumb_report::load_render::output(&r))?;
    // Not a result (nothing committed, a condition broken): a failed check.
    let v = plumb_analyze::load_verdict::load(&r);
    Ok(i32::from(plumb_analyze::load_verdict::failed_check(&v)))
}

/// `--workload`: one of plumb's workloads, or an error suggesting the one another tool's name
/// means.
fn workload_name(s: &str) -> Result<String, String> {
    Workload::parse_arg(s).map(|w| w.name().to_string())
}
