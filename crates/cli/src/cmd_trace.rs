//! `plumb trace`: what a database process asks of the kernel — syscalls, block requests,
//! faults and scheduling — per process, counted in the kernel.

use crate::GlobalArgs;
use anyhow::Result;
use clap::Args;
use plumb_record::events::Event;
use plumb_record::trace::{Trace, TraceConfig};
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
    #[arg(long, value_name = "TIME", value_parser = time)]
    pub duration: Option<std::time::Duration>,
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

/// A duration flag's value (`30s`, `2m`, `500ms`).
fn time(s: &str) -> std::result::Result<std::time::Duration, String> {
    parse_duration(s).map_err(|e| e.0)
}

pub fn run(g: &GlobalArgs, a: &TraceArgs) -> Result<i32> {
    let trace = Trace::new(TraceConfig {
        root: g.root()?,
        pids: a.pids.clone(),
        engine_server: a.engine_server,
        command: a.cmd.clone(),
        duration: a.duration,
        threads: a.threads,
        timing: if a.time_every_call {
            plumb_sys::proctrace::Timing::EVERY_CALL
        } else {
            plumb_sys::proctrace::Timing::DEFAULT
        },
        block: !a.no_block,
    })?;
    plumb_sys::signal::install();
    // A fixed window (--duration without a command): progress over it, so a piped trace is not
    // silent until its report.
    let mut meter: Option<crate::progress::Meter> = None;
    let mut events = |e: Event| {
        if let Event::Tracing {
            what,
            duration,
            command,
        } = e
        {
            let ends = duration.is_none() && !command;
            eprintln!(
                "plumb: tracing {what}{}",
                ["", "; Ctrl-C ends the window"][ends as usize]
            );
            if let (Some(d), false) = (duration, command) {
                let m = crate::progress::Meter::new("plumb trace", d, Vec::new());
                m.step(&format!("tracing {what}"), std::time::Duration::ZERO, d, d);
                meter = Some(m);
            }
        }
    };
    let report = trace.run(
        &mut events,
        &plumb_sys::signal::stop_requested,
        &plumb_sys::signal::forward_to,
    );
    if let Some(m) = meter {
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
