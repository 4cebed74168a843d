//! `plumb trace`: what a database process asks of the kernel — syscalls, block requests,
//! faults and scheduling — per process, counted in the kernel.

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::Args;
use plumb_record::trace::{Options, Target};
use plumb_sys::units::parse_duration;

#[derive(Debug, Args)]
pub struct TraceArgs {
    /// Follow this running process, its threads, and every process it has started or starts
    /// (a PostgreSQL postmaster and all its backends). Repeatable.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
    /// Follow the database server running here, found by name as `plumb mem` finds it
    /// (postgres, mariadbd/mysqld, sqlservr), with all its processes.
    #[arg(long, conflicts_with = "pids")]
    pub engine_server: bool,
    /// End the window after this long (e.g. 30s, 2m). Without it: until the command exits, the
    /// processes end, or Ctrl-C.
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Also show each thread's syscalls and scheduling.
    #[arg(long)]
    pub threads: bool,
    /// Time every syscall. By default a syscall is timed at every call while it is rare (up to
    /// 2 calls a jiffy on each CPU) and one call in 8 beyond, which costs the traced server
    /// less; counts are exact either way.
    #[arg(long)]
    pub time_every_call: bool,
    /// Do not trace block requests (syscalls, faults and scheduling only).
    #[arg(long)]
    pub no_block: bool,
    /// Run this command and follow it from its first instruction, with everything it starts.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

/// What to follow: exactly one of --pid, --engine-server and a command.
fn target(root: &plumb_sys::Root, a: &TraceArgs) -> Result<Target> {
    if [!a.pids.is_empty(), a.engine_server, !a.cmd.is_empty()]
        .iter()
        .filter(|x| **x)
        .count()
        != 1
    {
        bail!(
            "say what to trace: --pid PID, --engine-server, or -- CMD ARGS (exactly one of them)"
        );
    }
    Ok(if !a.cmd.is_empty() {
        Target::Command(a.cmd.clone())
    } else if a.engine_server {
        Target::engine_servers(root)?
    } else {
        Target::pids(&a.pids)
    })
}

pub fn run(g: &GlobalArgs, a: &TraceArgs) -> Result<i32> {
    let root = g.root()?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_duration(d).map_err(|e| crate::quoting(format!("--duration {e}"), e)))
        .transpose()?;
    if duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration must be more than 0");
    }
    let target = target(&root, a)?;
    plumb_sys::signal::install();
    // A fixed window (--duration without a command): progress over it, so a piped trace is not
    // silent until its report.
    let meter: std::cell::RefCell<Option<crate::progress::Meter>> = Default::default();
    let report = plumb_record::trace::run(
        &root,
        &target,
        &Options {
            duration,
            threads: a.threads,
            timing: if a.time_every_call {
                plumb_sys::proctrace::Timing::EVERY_CALL
            } else {
                plumb_sys::proctrace::Timing::DEFAULT
            },
            block: !a.no_block,
            cancel: &plumb_sys::signal::stop_requested,
            signal_command: &plumb_sys::signal::forward_to,
            started: &|what| {
                let ends = duration.is_none() && a.cmd.is_empty();
                eprintln!(
                    "plumb: tracing {what}{}",
                    ["", "; Ctrl-C ends the window"][ends as usize]
                );
                if let (Some(d), true) = (duration, a.cmd.is_empty()) {
                    let m = crate::progress::Meter::new("plumb trace", d, Vec::new());
                    m.step(&format!("tracing {what}"), std::time::Duration::ZERO, d, d);
                    *meter.borrow_mut() = Some(m);
                }
            },
        },
    );
    if let Some(m) = meter.borrow_mut().take() {
        if report.is_ok() {
            m.finish();
        } else {
            m.abandon();
        }
    }
    let report = report?;
    let mut out = std::io::stdout().lock();
    plumb_report::emit(&report, g.format(), &mut out)?;
    Ok(report.exit_code.unwrap_or(0))
}
