//! `plumb repl`: replication between a primary and a standby, stage by stage.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_engine::private;
use plumb_engine::Target;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct ReplArgs {
    #[command(subcommand)]
    pub cmd: ReplCmd,
}

#[derive(Debug, Subcommand)]
pub enum ReplCmd {
    /// The timeline of one replicated commit: run a statement on the primary while tracing the
    /// processes its commit passes through (the backend, the WAL sender, the standby's WAL
    /// receiver and startup process), and print each stage with its time: WAL flushed, sent,
    /// received, written and flushed on the standby, reported back, released, replayed. Both
    /// servers must run on this host. Needs root.
    Timeline(TimelineArgs),
}

#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The primary (postgres://… over a Unix socket or localhost).
    #[arg(long, value_name = "URL", requires = "standby")]
    pub primary: Option<String>,
    /// The standby streaming from it (postgres://… over a Unix socket or localhost).
    #[arg(long, value_name = "URL", requires = "primary")]
    pub standby: Option<String>,
    /// A standby plumb made (`plumb engine start --dir DIR --standby-of PRIMARY_DIR`): both
    /// URLs are taken from it and its primary.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["primary", "standby"])]
    pub standby_dir: Option<PathBuf>,
    /// The statement to run on the primary (one that commits a change, e.g. an INSERT).
    #[arg(long, value_name = "SQL")]
    pub sql: String,
    /// Commits to trace; with more than one, each stage's median and range.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: usize,
    /// Syscalls only: no probes on the server binary's functions (a probe makes every process
    /// running that binary, other servers too, take a trap at those functions while plumb
    /// traces).
    #[arg(long)]
    pub no_probes: bool,
    /// Also draw the timeline as a swimlane SVG into this new file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The URLs of a standby plumb made and of its primary.
fn private_pair(dir: &std::path::Path) -> Result<(Target, Target)> {
    let shown = dir.display();
    let s = private::status(dir)
        .map_err(|e| crate::cmd_engine::dir_err(dir, e))?
        .ok_or_else(|| anyhow!("--standby-dir {shown}: no instance running there"))?;
    let sb = s.standby_of.clone().ok_or_else(|| {
        anyhow!("--standby-dir {shown}: not a standby (plumb engine start --dir {shown} --standby-of PRIMARY_DIR)")
    })?;
    let p = private::status(&sb.primary)
        .map_err(|e| crate::cmd_engine::dir_err(&sb.primary, e))?
        .ok_or_else(|| {
            anyhow!(
                "--standby-dir {shown}: its primary in {} is not running",
                sb.primary.display()
            )
        })?;
    Ok((p.target(), s.target()))
}

pub fn run(g: &GlobalArgs, a: &ReplArgs) -> Result<i32> {
    match &a.cmd {
        ReplCmd::Timeline(t) => timeline(g, t),
    }
}

fn timeline(g: &GlobalArgs, a: &TimelineArgs) -> Result<i32> {
    let (primary, standby) = match (&a.standby_dir, &a.primary, &a.standby) {
        (Some(d), _, _) => private_pair(d)?,
        (None, Some(p), Some(s)) => (Target::new(p), Target::new(s)),
        _ => bail!("give --primary URL and --standby URL, or --standby-dir DIR"),
    };
    if let Some(p) = &a.svg {
        plumb_report::out::check_new_file("--svg", p)?;
    }
    if !plumb_sys::os::is_root() {
        bail!("plumb repl timeline traces the servers' processes in the kernel: run it as root");
    }
    plumb_load::signal::install();
    let interactive = a.repeat > 1 && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let each = |i: usize, n: usize| {
        if interactive {
            eprint!("\rplumb: {i} of {n} commits traced");
            if i == n {
                eprintln!();
            }
        }
    };
    let report = plumb_lab::repl::timeline(
        &primary,
        &standby,
        &plumb_lab::repl::TimelineOptions {
            sql: a.sql.clone(),
            repeat: a.repeat,
            probes: !a.no_probes,
            max_behind: Duration::from_secs(60),
        },
        &each,
        plumb_load::signal::stop_requested,
    )?;
    if let Some(p) = &a.svg {
        plumb_report::out::write_new(
            "--svg",
            p,
            plumb_report::repl_render::swimlane_svg(&report).as_bytes(),
        )?;
    }
    crate::emit(g, &report)?;
    Ok(if plumb_load::signal::stop_requested() {
        130
    } else {
        0
    })
}
