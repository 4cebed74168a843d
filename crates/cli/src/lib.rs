//! The plumb command line: flag definitions and one module per subcommand. Glue only: the work
//! happens in the reader, analysis and renderer crates.
#![forbid(unsafe_code)]

use anyhow::Result;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use plumb_report::Format;
use std::io::{self, Write};
use std::path::PathBuf;

mod cmd_delta;
mod cmd_engine;
mod cmd_fs;
mod cmd_io;
mod cmd_k8s;
mod cmd_lab;
mod cmd_mem;
mod cmd_os;
mod cmd_record;
mod cmd_repl;
mod cmd_trace;
mod docs;
mod progress;

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
    /// queue-depth sweep, sequential reads), pgbench and the insert/CHECKPOINT loops
    /// per wal_sync_method on a private PostgreSQL while recording, findings, and an HTML report.
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
    Mark(cmd_record::MarkArgs),
    /// Turn recordings into one self-contained HTML page of charts to explore: wall-clock axes,
    /// hover values, zoom to full resolution, legend toggles (several recordings overlay).
    Report(cmd_record::ReportArgs),
    /// Draw chosen metrics of recordings into one SVG chart.
    Plot(cmd_record::PlotArgs),
    /// Write a recording's derived metrics as CSV (or JSON Lines with --json), or its raw
    /// counters and gauges as OpenMetrics for Prometheus (--format openmetrics).
    Export(cmd_record::ExportArgs),
    /// Scheduling pressure now: per-CPU run-queue delay, runnable tasks against CPUs, PSI cpu,
    /// steal, and the threads of a process that wait for a CPU.
    Cpu(cmd_record::CpuArgs),
    /// plumb's private PostgreSQL: start, stop, status, psql. The embedded default engine for
    /// `delta`, the lab and the tests.
    Engine(cmd_engine::EngineArgs),
    /// Before/after deltas around a workload (SQL, a file of SQL, or a command): engine
    /// counters, waits, file I/O, temp spill, and the OS's CPU and disk figures; cold, warm or
    /// both, repeated, median and range.
    Delta(Box<cmd_delta::DeltaArgs>),
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

/// The command line as given, passwords masked (for reports and recordings).
static COMMAND_LINE: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// The command line as typed, each argument's passwords masked.
pub(crate) fn command_args() -> Vec<String> {
    COMMAND_LINE
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::args().map(|a| plumb_engine::redact(&a)).collect())
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

/// Run and return the exit code. Errors print as `plumb: error: ...` with their causes.
/// Every command first takes down what a killed plumb left (its ledger, its trace instances
/// and uprobes) and says so.
fn reclaim_what_killed_plumbs_left() {
    let engine = |dir: &std::path::Path| -> Result<(), String> {
        plumb_engine::private::remove(dir)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for r in plumb_sys::ledger::reclaim(&engine) {
        match r.outcome {
            Ok(()) => eprintln!(
                "plumb: removed what a plumb that was killed (PID {}) left: {}",
                r.pid, r.what
            ),
            Err(why) => eprintln!(
                "plumb: warning: a plumb that was killed (PID {}) left {}, which could not be removed: {why}",
                r.pid, r.what
            ),
        }
    }
    for (pid, what) in plumb_sys::tracefs::reclaim_dead() {
        eprintln!("plumb: removed what a plumb that was killed (PID {pid}) left: {what}");
    }
}

pub fn main() -> i32 {
    // Parsed from a copy taken first: masking rewrites the memory std::env::args reads.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // plumb's own SQL Server client process (see plumb_engine::mssql::MssqlConn).
    if args.len() == 2 && args[1] == plumb_engine::mssql::CLIENT_ARG {
        return plumb_engine::mssql::client_main();
    }
    plumb_engine::mssql::on_interrupt(plumb_load::signal::stop_requested);
    COMMAND_LINE.get_or_init(|| {
        args.iter()
            .map(|a| plumb_engine::redact(&a.to_string_lossy()))
            .collect()
    });
    hide_passwords_in_argv(&args);
    let parsed = command()
        .try_get_matches_from(&args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            // Help and version go to stdout and exit 0; usage errors exit 2. A usage error may
            // quote the value given: passwords masked.
            let text = plumb_engine::redact(&e.render().to_string());
            if e.use_stderr() {
                eprint!("{text}");
            } else {
                print!("{text}");
                let _ = io::stdout().flush();
            }
            return e.exit_code();
        }
    };
    reclaim_what_killed_plumbs_left();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if is_broken_pipe(&e) {
                return 0;
            }
            let mut msg = format!("plumb: error: {e}");
            let mut last = e.to_string();
            for cause in e.chain().skip(1) {
                // Errors that already quote their cause ("path: No such file") are not
                // followed by it again.
                let c = cause.to_string();
                if !last.contains(&c) {
                    msg.push_str(&format!("\n  caused by: {c}"));
                }
                last = c;
            }
            eprintln!("{}", plumb_engine::redact(&msg));
            2
        }
    }
}

/// A password typed on the command line (a URL's, or password=) is remembered so that no
/// output shows it, and masked in plumb's own process title, which every local user can read;
/// plumb says so, since it was visible until now.
fn hide_passwords_in_argv(args: &[std::ffi::OsString]) {
    let mut any = false;
    for a in args.iter().map(|a| a.to_string_lossy()) {
        let a = a.as_ref();
        if plumb_engine::secret::mask_same_length(a) != a {
            plumb_engine::secret::remember_in(a);
            any = true;
        }
    }
    if any {
        plumb_sys::process::mask_own_cmdline(plumb_engine::secret::mask_same_length);
        eprintln!("plumb: warning: a password on the command line is visible to other local users in the process list (plumb masks its own copy now); use --password-file, or PGPASSWORD / MYSQL_PWD, instead");
    }
}

/// plumb's own output was closed (`plumb os | head`): not an error. A broken pipe under a
/// database error is the database's connection (a server that went away), which is one.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .take_while(|c| c.downcast_ref::<plumb_engine::Error>().is_none())
        .any(|c| {
            c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<plumb_report::Error>().is_some_and(|r| {
                matches!(r, plumb_report::Error::Io(io) if io.kind() == io::ErrorKind::BrokenPipe)
            })
        })
}

pub fn run(cli: Cli) -> Result<i32> {
    if cli.global.json
        && matches!(
            cli.global.format,
            Some(FormatArg::Text | FormatArg::Csv | FormatArg::Openmetrics)
        )
    {
        anyhow::bail!(
            "--json is --format json: it cannot go with --format {}; give one of them",
            match cli.global.format {
                Some(FormatArg::Csv) => "csv",
                Some(FormatArg::Openmetrics) => "openmetrics",
                _ => "text",
            }
        );
    }
    if cli.global.openmetrics() && !matches!(cli.command, Command::Export(_)) {
        anyhow::bail!(
            "--format openmetrics: only plumb export writes OpenMetrics (plumb record --serve ADDR exposes the live figures)"
        );
    }
    match &cli.command {
        Command::Lab(a) => cmd_lab::run(&cli.global, a),
        Command::Os(a) => cmd_os::run(&cli.global, a),
        Command::Io(a) => cmd_io::run(&cli.global, a),
        Command::Mem(a) => cmd_mem::run(&cli.global, a),
        Command::K8s(a) => cmd_k8s::run(&cli.global, a),
        Command::Record(a) => cmd_record::record(&cli.global, a),
        Command::Mark(a) => cmd_record::mark(a),
        Command::Report(a) => cmd_record::report(a),
        Command::Plot(a) => cmd_record::plot(a),
        Command::Export(a) => cmd_record::export(&cli.global, a),
        Command::Cpu(a) => cmd_record::cpu(&cli.global, a),
        Command::Engine(a) => cmd_engine::run(&cli.global, a),
        Command::Trace(a) => cmd_trace::run(&cli.global, a),
        Command::Repl(a) => cmd_repl::run(&cli.global, a),
        Command::Fs(a) => cmd_fs::run(&cli.global, a),
        Command::Delta(a) => cmd_delta::run(&cli.global, a),
        Command::Completions { shell } => {
            // Rendered in memory first: clap_complete panics on a write error, and a reader
            // that closes the pipe early (`| head`) is not an error.
            let mut cmd = command();
            let mut buf = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "plumb", &mut buf);
            let mut out = io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
            Ok(0)
        }
        Command::Man { out } => docs::man(out.as_deref()),
    }
}

/// A database target from a URL flag (`--engine`) and an optional password file,
/// both checked: a URL plumb cannot read, or a password file others can read, names its flag.
pub(crate) fn engine_target(
    flag: &str,
    url: &str,
    password_file: Option<&std::path::Path>,
) -> Result<plumb_engine::Target> {
    let mut t = plumb_engine::Target::new(url);
    t.kind().map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
    if let Some(f) = password_file {
        t.password = Some(
            plumb_engine::read_password_file(f)
                .map_err(|e| anyhow::anyhow!("--password-file {e}"))?,
        );
    }
    Ok(t)
}

/// Write a result to stdout in the format the user chose.
pub(crate) fn emit<R: plumb_report::Render>(global: &GlobalArgs, r: &R) -> Result<()> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    plumb_report::emit(r, global.format(), &mut out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
        command().debug_assert();
    }

    #[test]
    fn json_flag_is_format_json_and_conflicts_with_another_format() {
        let c = Cli::try_parse_from(["plumb", "os", "--json"]).unwrap();
        assert_eq!(c.global.format(), Format::Json);
        let c = Cli::try_parse_from(["plumb", "--format", "csv", "os"]).unwrap();
        assert_eq!(c.global.format(), Format::Csv);
        let c = Cli::try_parse_from(["plumb", "--format", "csv", "os", "--json"]).unwrap();
        let e = run(c).unwrap_err().to_string();
        assert!(e.contains("--json") && e.contains("csv"), "{e}");
        let c = Cli::try_parse_from(["plumb", "--format", "json", "os", "--json"]).unwrap();
        assert_eq!(c.global.format(), Format::Json);
    }

    #[test]
    fn only_plumbs_own_output_closing_is_a_quiet_broken_pipe() {
        let pipe = || io::Error::new(io::ErrorKind::BrokenPipe, "Broken pipe");
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        assert!(is_broken_pipe(&anyhow::Error::new(
            plumb_report::Error::Io(pipe())
        )));
        // A database connection that broke is an error, not a closed stdout.
        let gone = plumb_engine::Error::Query {
            what: "pg_stat_wal_receiver".into(),
            message: "Broken pipe".into(),
            source: Some(Box::new(pipe())),
        };
        assert!(!is_broken_pipe(&anyhow::Error::new(gone)));
    }

    #[test]
    fn bad_pid_is_a_usage_error() {
        let e = Cli::try_parse_from(["plumb", "os", "--pid", "abc"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = Cli::try_parse_from(["plumb", "os", "--pid", "0"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}

#[cfg(test)]
mod vocabulary {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" || a.is_hide_set() {
                continue;
            }
            if a.get_help().is_none() && a.get_long_help().is_none() {
                out.push(format!("{path} {id}"));
            }
        }
        for s in cmd.get_subcommands() {
            walk(s, &format!("{path} {}", s.get_name()), out);
        }
    }

    #[test]
    fn every_argument_has_help() {
        let mut missing = Vec::new();
        walk(&crate::command(), "plumb", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }

    /// Every visible option of every subcommand, with its command's path.
    fn options(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Arg)>) {
        for a in cmd.get_arguments() {
            if a.get_long().is_some() && !a.is_hide_set() {
                out.push((path.to_string(), a.clone()));
            }
        }
        for s in cmd.get_subcommands() {
            options(s, &format!("{path} {}", s.get_name()), out);
        }
    }

    fn help(a: &clap::Arg) -> String {
        a.get_long_help()
            .or(a.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
    }

    fn value_name(a: &clap::Arg) -> String {
        a.get_value_names()
            .and_then(|v| v.first().map(|n| n.to_string()))
            .unwrap_or_default()
    }

    /// One meaning per flag name across all subcommands: --engine is a database URL (a
    /// primary and its standby are --primary and --standby), an I/O
    /// engine is --ioengine (as fio), an engine kind is --kind, --out is where the result goes
    /// (a file or a directory, said in the help), --dir a work directory, and the lab's old
    /// --target is only a hidden alias.
    #[test]
    fn one_vocabulary() {
        let mut all = Vec::new();
        let mut root = crate::command();
        root.build();
        options(&root, "plumb", &mut all);
        let mut wrong = Vec::new();
        for (path, a) in &all {
            let long = a.get_long().unwrap();
            let (vn, h) = (value_name(a), help(a));
            let bad = match long {
                "engine" => vn != "URL",
                "ioengine" => vn != "ENGINE",
                "kind" => vn != "KIND" || !h.contains("mssql, postgres or mariadb"),
                "out" => !(h.starts_with("The directory") || h.contains(" file")),
                "dir" => vn != "DIR" || !h.contains("work directory"),
                "target" => true,
                // A pair of servers: each a URL, named for its part.
                "primary" | "standby" => vn != "URL" || !path.starts_with("plumb repl"),
                _ => vn == "ENGINE" || vn == "URL" && long != "password-file",
            };
            if bad {
                wrong.push(format!("{path} --{long} <{vn}>: {h}"));
            }
        }
        assert!(wrong.is_empty(), "flags off the vocabulary: {wrong:#?}");
        // The renamed flags, to be sure the test sees them.
        let longs: Vec<&str> = all.iter().filter_map(|(_, a)| a.get_long()).collect();
        for want in ["engine", "ioengine", "kind", "out", "dir", "workload"] {
            assert!(longs.contains(&want), "--{want} missing");
        }
        // --target still works for the lab, unseen.
        let lab = root.find_subcommand("lab").unwrap();
        let engine = lab
            .get_arguments()
            .find(|a| a.get_long() == Some("engine"))
            .unwrap();
        assert!(engine
            .get_all_aliases()
            .unwrap_or_default()
            .contains(&"target"));
    }

    /// A man page for every subcommand at every depth, each with EXIT STATUS, ENVIRONMENT
    /// and EXAMPLES.
    #[test]
    fn man_pages_for_every_subcommand() {
        let pages = crate::docs::pages().unwrap();
        let names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
        for want in [
            "plumb",
            "plumb-io-run",
            "plumb-io-sweep",
            "plumb-engine-start",
            "plumb-k8s-manifest",
            "plumb-mem-assume",
        ] {
            assert!(names.contains(&want), "{want} missing: {names:?}");
        }
        for (name, page) in &pages {
            let t = String::from_utf8_lossy(page);
            for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH EXAMPLES"] {
                assert!(t.contains(section), "{name}: no {section}");
            }
            assert!(t.contains(&format!(".TH {name} 1")), "{name}: title");
        }
        let run = &pages.iter().find(|(n, _)| n == "plumb-io-run").unwrap().1;
        let run = String::from_utf8_lossy(run);
        assert!(
            run.contains("plumb io run"),
            "synopsis names the command as typed"
        );
        assert!(
            run.contains("\\fBplumb\\-io\\fR(1)"),
            "see also the parent page"
        );
    }
}
