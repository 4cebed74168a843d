//! plumb's flags: the global options, the subcommands, and which global options each
//! subcommand hides.

use crate::{
    cmd_compare, cmd_delta, cmd_engine, cmd_fs, cmd_io, cmd_k8s, cmd_lab, cmd_load, cmd_mem, cmd_os,
};
use crate::{cmd_export, cmd_record, cmd_recording, cmd_repl, cmd_trace};
use anyhow::Result;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use plumb_report::Format;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "plumb",
    version,
    about = "A performance lab for databases on Linux",
    long_about = "plumb measures, stresses and explains what happens under a database server \
(memory, storage, CPU, durability) and inside it, and writes reports a DBA can act on.\n\n\
Exit codes: 0 ok, 1 a check failed, 2 error (bad input, unreadable required source).",
    propagate_version = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Output format [default: text]. CSV only where the result is a table; openmetrics only
    /// for `plumb export`.
    #[arg(long, global = true, value_enum)]
    pub format: Option<FormatArg>,
    /// Shorthand for --format json.
    #[arg(long, global = true)]
    pub json: bool,
    /// Read /proc and /sys from a captured tree under DIR instead of the live host (a support
    /// bundle, or a test fixture).
    #[arg(long, global = true, value_name = "DIR", env = "PLUMB_SYSROOT")]
    pub sysroot: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
    Csv,
    /// OpenMetrics text with timestamps (`plumb export`, for promtool's backfill).
    Openmetrics,
}

impl GlobalArgs {
    pub fn format(&self) -> Format {
        if self.json {
            return Format::Json;
        }
        match self.format {
            None | Some(FormatArg::Text) | Some(FormatArg::Openmetrics) => Format::Text,
            Some(FormatArg::Json) => Format::Json,
            Some(FormatArg::Csv) => Format::Csv,
        }
    }

    /// `--format openmetrics` (only `plumb export` takes it).
    pub fn openmetrics(&self) -> bool {
        self.format == Some(FormatArg::Openmetrics)
    }

    pub fn root(&self) -> Result<plumb_sys::Root> {
        match &self.sysroot {
            None => Ok(plumb_sys::Root::host()),
            Some(d) => {
                if !d.is_dir() {
                    anyhow::bail!("--sysroot {}: not a directory", d.display());
                }
                Ok(plumb_sys::Root::new(d))
            }
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole lab in one command: the host, the storage under the data (durability, a
    /// queue-depth sweep, sequential reads), a workload and the insert/CHECKPOINT loops per
    /// durability setting on a private PostgreSQL or MariaDB (or your server with --engine)
    /// while recording, findings, and an HTML report.
    Lab(Box<cmd_lab::LabArgs>),
    /// Snapshot of the host a database runs on: kernel, CPUs, steal, memory, swap, PSI, run
    /// queue, the cgroup and container limits on plumb and on given PIDs, and the filesystem
    /// and block device under a path.
    Os(cmd_os::OsArgs),
    /// Storage tests shaped like database work: presets (log-write, data-read, oltp-mix,
    /// backup-read, checkpoint-burst, spill-flood), diskspd command lines, and custom jobs, with
    /// diskspd's four result sections.
    Io(Box<cmd_io::IoArgs>),
    /// Memory truth: each database process's resident and swapped memory (smaps counts swapped
    /// shared memory, VmSwap does not) next to what the engine believes it caches; what an
    /// engine will assume here (`assume`); and built-in memory pressure (`pressure`).
    Mem(Box<cmd_mem::MemArgs>),
    /// Kubernetes memory for databases: node allocatable and the pod that fits (`advise`),
    /// manifest checks (`lint`), and a manifest that passes them (`manifest`).
    K8s(Box<cmd_k8s::K8sArgs>),
    /// Record OS (and process) counters at a steady interval into an append-only file; with
    /// `-- CMD`, while the command runs.
    Record(Box<cmd_record::RecordArgs>),
    /// Add a named mark (a phase start or end) to a recording, also while it is recorded.
    Mark(cmd_recording::MarkArgs),
    /// Turn recordings into one self-contained HTML page of charts to explore: wall-clock axes,
    /// hover values, zoom to full resolution, legend toggles (several recordings overlay).
    Report(cmd_recording::ReportArgs),
    /// Draw chosen metrics of recordings into one SVG chart.
    Plot(cmd_recording::PlotArgs),
    /// Did it get better? Compare two sets of plumb results (A1 A2 … -- B1 B2 …): lab report
    /// directories, `plumb io`, `load` or `delta` results, windows of recordings; each figure's
    /// median with its interval, the change, and better, worse or ~ by a stated rule
    /// (Mann-Whitney U and a practical floor).
    Compare(cmd_compare::CompareArgs),
    /// Write a recording's derived metrics as CSV (or JSON Lines with --json), or its raw
    /// counters and gauges as OpenMetrics for Prometheus (--format openmetrics).
    Export(cmd_export::ExportArgs),
    /// Scheduling pressure now: per-CPU run-queue delay, runnable tasks against CPUs, PSI cpu,
    /// steal, and the threads of a process that wait for a CPU.
    Cpu(cmd_record::CpuArgs),
    /// plumb's private PostgreSQL or MariaDB (--kind): start, stop, status, psql. The embedded
    /// default engine for `delta`, `load`, the lab and the tests.
    Engine(cmd_engine::EngineArgs),
    /// Before/after deltas around a workload (SQL, a file of SQL, or a command): engine
    /// counters, waits, file I/O, temp spill, and the OS's CPU and disk figures; cold, warm or
    /// both, repeated, median and range.
    Delta(Box<cmd_delta::DeltaArgs>),
    /// A database workload: the order-entry transactions (TPC-C-like: new-order, payment,
    /// delivery, stock-level, order-status in HammerDB's mix) on a database plumb creates, loads
    /// and drops; NOPM from the schema beside the engine's TPM, latency percentiles per
    /// transaction, failures by class; closed loop, or open loop with --rate.
    Load(Box<cmd_load::LoadArgs>),
    /// What processes ask of the kernel, counted in the kernel at low cost: syscalls as
    /// `strace -c -f` counts them (with time percentiles), the block requests they cause
    /// (FLUSH, FUA) beside each device's total, faults and scheduling; around a command, a
    /// PID and its children, or the database server.
    Trace(Box<cmd_trace::TraceArgs>),
    /// Replication between a primary and its standby, stage by stage: the timeline of one
    /// replicated commit (WAL flushed, sent, received, written and flushed on the standby,
    /// reported back, released, replayed) from the kernel's events on both servers.
    Repl(cmd_repl::ReplArgs),
    /// A server's views as read-only files, for cat, grep, awk, column and jq: one directory
    /// per group of views, each view as NAME (tab-separated with a header), NAME.json (JSON
    /// Lines) and NAME.txt (aligned), and your own *.sql files as files of their results
    /// (--queries). PostgreSQL, MariaDB, SQL Server (from its documentation). Needs FUSE.
    Fs(Box<cmd_fs::FsArgs>),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per subcommand into --out DIR.
    Man {
        /// The directory to write plumb.1 and a page per subcommand into (plumb-io-run.1…);
        /// without it, plumb.1 goes to standard output. (Formerly --dir, still accepted.)
        #[arg(long, value_name = "DIR", alias = "dir")]
        out: Option<PathBuf>,
    },
}

/// Where the options every command could take do not apply, they are hidden from that
/// command's help, its man page and its completions (still accepted: the lab, for one, refuses
/// `--sysroot` with a reason).
const NO_SYSROOT: &[&str] = &[
    "lab",
    "fs",
    "io",
    "k8s",
    "mark",
    "report",
    "plot",
    "export",
    "engine",
    "completions",
    "man",
];
const NO_FORMAT: &[&str] = &["mark", "report", "plot", "completions", "man", "fs"];

/// plumb's command line: the derived definition with the global options scoped.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    let global = |id: &str| -> clap::Arg {
        Cli::command()
            .get_arguments()
            .find(|a| a.get_id() == id)
            .cloned()
            .expect("a global option")
    };
    for (ids, subs) in [
        (&["sysroot"][..], NO_SYSROOT),
        (&["format", "json"][..], NO_FORMAT),
    ] {
        for sub in subs {
            for id in ids {
                // A hidden copy in the subcommand: clap does not propagate the visible one
                // over it, and passes it on to the subcommand's own subcommands.
                let hidden = global(id).hide(true);
                cmd = cmd.mut_subcommand(*sub, |c| c.arg(hidden));
            }
        }
    }
    cmd
}
