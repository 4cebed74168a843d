//! `plumb lab`: one command that looks at the host, probes the storage where the data lives,
//! runs database workloads on a private PostgreSQL while recording, and writes the report. The
//! lab itself is `plumb_lab`; this is its flags, its progress bar and its report files.

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::Args;
use plumb_lab::{Config, Lab, PressureSize, LAB_FILES};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Measure an existing server instead of plumb's private PostgreSQL (postgres://,
    /// mysql://, mariadb://, mssql://): the host, the storage under --dir and the engine are
    /// read; no DDL and no workload unless --allow-writes. (Formerly --target, still accepted.)
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE", alias = "target", value_parser = crate::typed::EngineUrl)]
    pub engine: Option<plumb_engine::Target>,
    /// Read the server's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
    /// With --engine: run the workload and the insert loops in a scratch database plumb
    /// creates and drops (pgbench on PostgreSQL, plumb's driver on MariaDB and SQL Server).
    /// The loops run CHECKPOINT (PostgreSQL: superuser or pg_checkpoint).
    #[arg(long, requires = "engine")]
    pub allow_writes: bool,
    /// The work directory, on the filesystem to assess: plumb works in a new directory under DIR (the private
    /// PostgreSQL's data and WAL, the storage probe's files) and removes it at the end.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    pub dir: PathBuf,
    /// The directory to write the report into (index.html, report.json, summary.txt,
    /// recording.plumb). Default: ./plumb-lab-DATE-TIME. Must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A shorter lab (about a minute): fewer levels, shorter runs, a smaller pgbench.
    #[arg(long)]
    pub quick: bool,
    /// How long the workload runs (pgbench or plumb's driver; default 40s, --quick 10s), and
    /// each experiment's run of it (default 20s, --quick 10s). Given with --quick, this wins for
    /// those runs and the rest stays quick.
    #[arg(long, value_name = "TIME", value_parser = crate::typed::DURATION)]
    pub duration: Option<Duration>,
    /// Memory-pressure experiment (root): the server runs in a memory cgroup of plumb's own;
    /// for a second pgbench run plumb limits it to shared_buffers + 256 MiB and `plumb mem
    /// pressure` holds SIZE (or PCT of that limit) inside it, with a zram swap device.
    #[arg(long, value_name = "SIZE|PCT")]
    pub pressure: Option<String>,
    /// Write-throttle experiment (root): pgbench again with the server's writes to the data
    /// disk throttled through the cgroup io (v2) or blkio (v1) controller, once per rate.
    #[arg(long, value_name = "RATE[,RATE...]")]
    pub throttle_writes: Option<String>,
    /// Standby experiment (root): a streaming standby of the private instance, synchronous or
    /// asynchronous; single-row commits and pgbench without it, beside it, and with the
    /// standby's writes throttled (a cgroup of its own), each commit timed with
    /// synchronous_commit local and on to split the local flush from the wait for the standby.
    #[arg(long, value_name = "sync|async", value_parser = ["sync", "async"])]
    pub replica: Option<String>,
    /// Do not trace the server over the insert/CHECKPOINT loops. As root the lab traces them
    /// (as `plumb trace` does) and reports each commit's syscalls and block requests.
    #[arg(long)]
    pub no_trace: bool,
    #[command(flatten)]
    pub accept: crate::neighbours::AcceptArg,
    /// The private instance's engine: postgres (default; pgbench and the insert/CHECKPOINT
    /// loops) or mariadb (Debian's mariadbd; plumb's own driver runs pgbench's transaction and
    /// the insert/commit loops). Not with --engine: its URL says the engine.
    #[arg(long, value_name = "KIND", default_value = "postgres", value_parser = ["postgres", "mariadb"], conflicts_with = "engine")]
    pub kind: String,
    /// The workload: order-entry (TPC-C-like), tpcb (pgbench's transaction), point-select or
    /// read-write on plumb's own driver, or FILE: a pgbench script on PostgreSQL, a file of SQL
    /// statements (one transaction) on MariaDB. Default: pgbench on PostgreSQL, tpcb on
    /// MariaDB.
    #[arg(long, value_name = "WORKLOAD|FILE")]
    pub workload: Option<String>,
    /// The workload's clients (default two a CPU, at most 32).
    #[arg(long, value_name = "N")]
    pub clients: Option<u32>,
    /// Run the workload as an open loop at this many transactions a second in all (Poisson
    /// arrivals; latency from the intended start): `500` or `500/s`. Needs plumb's driver.
    #[arg(long, value_name = "N/s", value_parser = crate::typed::RATE)]
    pub rate: Option<f64>,
    /// The private instance's PostgreSQL build (pgbench and psql come from beside it, else
    /// from Debian's packages).
    #[command(flatten)]
    pub build: crate::cmd_engine::BuildArg,
    /// Leave parts of the lab out this time: storage (the durability probe, the queue-depth
    /// sweep and the sequential read) and loops (the insert/CHECKPOINT loops). The report
    /// says what was not run; `plumb compare` against an earlier lab shows only what both ran.
    #[arg(long, value_name = "PART[,PART]", value_delimiter = ',', value_parser = crate::typed::Named(plumb_lab::Part::parse))]
    pub skip: Vec<plumb_lab::Part>,
    /// Take plumb's driver's transactions apart, as `plumb load --explain` does (a named
    /// --workload, or MariaDB's lab): each type's time on the server by part. Needs root.
    #[arg(long)]
    pub explain: bool,
}

/// A refusal of the lab's, with the sizes it carries in words.
fn refusal(e: plumb_lab::Error) -> anyhow::Error {
    match e {
        plumb_lab::Error::NoRoom { dir, free, need } => {
            anyhow::anyhow!(plumb_report::words::no_room("--dir", &dir, free, need))
        }
        e => e.into(),
    }
}

/// The lab's settings from the flags: what `Lab::new` checks, and where the report goes.
fn config(g: &GlobalArgs, a: &LabArgs) -> Result<(Config, PathBuf)> {
    if g.sysroot.is_some() {
        bail!(
            "--sysroot: the lab measures and loads the live host; it cannot run on a captured tree"
        );
    }
    if g.format() == plumb_report::Format::Csv {
        bail!("--format csv: the lab's report is not one table; use text or json (report.json is written either way)");
    }
    let target = a
        .engine
        .clone()
        .map(|t| crate::typed::with_password(t, a.password_file.as_deref()))
        .transpose()?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("plumb-lab-{}", plumb_record::stamp())));
    let config = Config {
        target,
        allow_writes: a.allow_writes,
        dir: a.dir.clone(),
        out_dir: out.clone(),
        quick: a.quick,
        pgbench: a.duration,
        pressure: a.pressure.as_deref().map(PressureSize::parse).transpose()?,
        throttle_writes: a
            .throttle_writes
            .as_deref()
            .map(plumb_lab::parse_rates)
            .transpose()?,
        replica: a
            .replica
            .as_deref()
            .map(plumb_lab::ReplicaMode::parse)
            .transpose()?,
        command_line: crate::cmd_io::command_line(),
        trace: !a.no_trace,
        bin_dir: a.build.build()?.map(|b| b.bin),
        workload: a
            .workload
            .as_deref()
            .map(plumb_lab::LabWorkload::parse)
            .transpose()?,
        clients: a.clients,
        rate: a.rate,
        accept: a.accept.accept_neighbour.clone(),
        skip: a.skip.clone(),
        explain: a.explain,
        kind: if a.kind == "mariadb" {
            plumb_engine::Kind::Mariadb
        } else {
            plumb_engine::Kind::Postgres
        },
    };
    Ok((config, out))
}

pub fn run(g: &GlobalArgs, a: &LabArgs) -> Result<i32> {
    plumb_sys::signal::install();
    let (config, out) = config(g, a)?;
    let lab = Lab::new(config).map_err(refusal)?;
    let engine = lab.engine_name();
    plumb_report::out::check_out_dir("--out", &out)?;
    // A new directory, or an empty one of the user's: unless the lab finishes, plumb removes
    // what it wrote there (and the directory, if it made it).
    let out_dir = plumb_report::out::out_dir("--out", &out)?;
    // Gone on every way out until the report is written (a panic included).
    let mut unfinished = Unfinished {
        dir: &out_dir,
        done: false,
    };
    // The live figure: the disks under the lab's work directory.
    let devs =
        plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), std::slice::from_ref(&a.dir));
    let meter = crate::progress::Meter::new("plumb lab", Duration::ZERO, devs);
    let mut drawn = crate::progress::Drawn::numbered(&meter);
    let report = lab.run(&mut drawn, &plumb_sys::signal::stop_requested);
    let finished = drawn.finished;
    meter.close(finished);
    let report = report.map_err(|e| crate::every::stopped(e, &removed_words(a, engine)))?;
    write_report(&report, &out)?;
    unfinished.done = true;
    crate::emit(g, &plumb_report::lab_render::LabOutput(&report))?;
    eprintln!("plumb: report in {}", out.join("index.html").display());
    Ok(0)
}

/// The lab's files in --out, removed when this goes unless the report was written.
struct Unfinished<'a> {
    dir: &'a plumb_report::out::OutDir,
    done: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.dir.remove(&LAB_FILES);
        }
    }
}

/// What an interrupted lab took down.
fn removed_words(a: &LabArgs, engine: &str) -> String {
    if a.engine.is_none() {
        format!("the lab's {engine} was stopped and its files removed")
    } else {
        "what the lab created was removed".into()
    }
}

/// report.json, summary.txt and index.html beside the recording.
fn write_report(r: &plumb_lab::LabReport, out: &Path) -> Result<()> {
    use plumb_report::lab_render::{html, LabOutput};
    let rec = plumb_store::read(&out.join("recording.plumb"))?;
    let w = |name: &str, body: Vec<u8>| -> Result<()> {
        plumb_report::out::write_new("--out", &out.join(name), &body)?;
        Ok(())
    };
    let mut json = Vec::new();
    plumb_report::emit(&LabOutput(r), plumb_report::Format::Json, &mut json)?;
    w("report.json", json)?;
    let mut text = Vec::new();
    plumb_report::emit(&LabOutput(r), plumb_report::Format::Text, &mut text)?;
    w("summary.txt", text)?;
    w("index.html", html(r, &rec).into_bytes())?;
    Ok(())
}
