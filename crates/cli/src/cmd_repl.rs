//! `plumb repl`: replication between a primary and a standby, stage by stage.

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
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
    /// Watch a primary's replication live: on PostgreSQL, for each standby how much WAL is not
    /// yet sent, flushed and replayed, the flush and replay lags, the WAL written per second and
    /// the commits waiting for a synchronous standby; on MariaDB, semi-synchronous replication
    /// (on or off, commits acknowledged and not, their wait); on SQL Server, each secondary
    /// database's queues, rates and lag. Read up to 10 times a second, printed once a second,
    /// and with --out kept in a recording that `plumb report` charts (with the host's CPU,
    /// disks and the servers' processes). Read-only. Ctrl-C stops.
    Watch(WatchArgs),
    /// Print the Extended Events session that follows one commit through a synchronous SQL
    /// Server Availability Group (the log block's way to the secondary's harden and back), to
    /// run on the primary and on the secondary. Written from the documentation; not tested
    /// against a live Availability Group.
    XeSession(XeSessionArgs),
    /// Merge the two replicas' events of that session into the timeline of one commit, from
    /// the servers (read back with sys.fn_xe_file_target_read_file) or from files; where the
    /// two clocks disagree, the secondary's events are shifted to keep cause before effect,
    /// and the report says by how much. Not tested against a live Availability Group.
    XeTimeline(XeTimelineArgs),
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The primary (postgres://…, mysql:// or mariadb://…, mssql://…): its standbys, replicas or
    /// secondaries are those it replicates to.
    #[arg(long, value_name = "URL", required_unless_present = "standby_dir", value_parser = crate::typed::EngineUrl)]
    pub primary: Option<Target>,
    /// A standby plumb made (`plumb engine start --dir DIR --standby-of PRIMARY_DIR`): its
    /// primary is watched, and the recording follows both servers' processes.
    #[arg(long, value_name = "DIR", conflicts_with = "primary")]
    pub standby_dir: Option<PathBuf>,
    /// How often to read the primary: 100ms (10 times a second) or more.
    #[arg(long, value_name = "TIME", default_value = "100ms")]
    pub interval: String,
    /// Stop after this long (default: at Ctrl-C).
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Also keep every reading in a new recording file (with the host's and the servers'
    /// figures) for `plumb report`, `plot` and `export`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct TimelineArgs {
    /// The primary (postgres://… over a Unix socket or localhost).
    #[arg(long, value_name = "URL", requires = "standby", value_parser = crate::typed::EngineUrl)]
    pub primary: Option<Target>,
    /// The standby streaming from it (postgres://… over a Unix socket or localhost).
    #[arg(long, value_name = "URL", requires = "primary", value_parser = crate::typed::EngineUrl)]
    pub standby: Option<Target>,
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

pub fn run(g: &GlobalArgs, a: &ReplArgs) -> Result<i32> {
    match &a.cmd {
        ReplCmd::Timeline(t) => timeline(g, t),
        ReplCmd::Watch(w) => watch(g, w),
        ReplCmd::XeSession(x) => xe_session(x),
        ReplCmd::XeTimeline(x) => xe_timeline(g, x),
    }
}

/// The primary to watch, and the servers' processes when plumb made them (the recording
/// follows both).
fn watched(a: &WatchArgs) -> Result<(plumb_engine::Target, Vec<u32>)> {
    Ok(match (&a.standby_dir, &a.primary) {
        (Some(d), _) => {
            let pair = plumb_lab::repl::private_pair(d)?;
            (pair.primary, pair.pids.to_vec())
        }
        (None, Some(t)) => (t.clone(), Vec::new()),
        (None, None) => bail!("give --primary URL or --standby-dir DIR"),
    })
}

fn watch(g: &GlobalArgs, a: &WatchArgs) -> Result<i32> {
    let (interval, duration) = crate::cmd_record::sampling(&a.interval, a.duration.as_deref())?;
    let json = g.format() == plumb_report::Format::Json;
    if g.format() == plumb_report::Format::Csv {
        bail!("--format csv: plumb repl watch prints text or JSON Lines (--json); its recording (--out) exports to CSV with plumb export");
    }
    let (primary, pids) = watched(a)?;
    if let Some(p) = &a.out {
        plumb_report::out::check_new_file("--out", p)?;
    }
    let watch =
        plumb_record::repl_watch::ReplWatch::new(plumb_record::repl_watch::ReplWatchConfig {
            root: g.root()?,
            primary: primary.clone(),
            pids,
            out: a.out.clone(),
            interval,
            duration,
            command_line: crate::cmd_io::command_line(),
        })?;
    plumb_sys::signal::install();
    eprintln!(
        "plumb: {}",
        plumb_report::repl_render::watching(&primary.shown(), interval, a.out.as_deref(), duration)
    );
    let mut printer = plumb_report::repl_render::WatchPrinter::new(json);
    let mut failed = None;
    // A failed print (plumb's output closed) ends the watch; its error is kept to report.
    let mut each = |line: &plumb_record::repl_watch::WatchLine| {
        let r = printer.print(line, &mut std::io::stdout().lock());
        r.map_err(|e| std::io::Error::other(failed.insert(e).to_string()))
    };
    let summary = watch.run(&mut each, &plumb_sys::signal::stop_requested);
    if let Some(e) = failed {
        return Err(e.into());
    }
    let summary = summary?;
    let shown = primary.shown();
    if let Some(e) = &summary.gone {
        crate::every::say(&format!("error: the primary {shown} went away: {e}"));
    }
    if let Some((path, samples, bytes)) = &summary.recording {
        eprintln!(
            "plumb: {samples} samples in {} ({bytes} bytes)",
            path.display()
        );
    }
    Ok(if summary.gone.is_some() { 2 } else { 0 })
}

fn timeline(g: &GlobalArgs, a: &TimelineArgs) -> Result<i32> {
    let (primary, standby) = match (&a.standby_dir, &a.primary, &a.standby) {
        (Some(d), _, _) => {
            let pair = plumb_lab::repl::private_pair(d)?;
            (pair.primary, pair.standby)
        }
        (None, Some(p), Some(s)) => (p.clone(), s.clone()),
        _ => bail!("give --primary URL and --standby URL, or --standby-dir DIR"),
    };
    if let Some(p) = &a.svg {
        plumb_report::out::check_new_file("--svg", p)?;
    }
    if !plumb_sys::os::is_root() {
        bail!("plumb repl timeline traces the servers' processes in the kernel: run it as root");
    }
    plumb_sys::signal::install();
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
        plumb_sys::signal::stop_requested,
    )?;
    if let Some(p) = &a.svg {
        plumb_report::out::write_new(
            "--svg",
            p,
            plumb_report::repl_render::swimlane_svg(&report).as_bytes(),
        )?;
    }
    crate::emit(g, &report)?;
    Ok(if plumb_sys::signal::stop_requested() {
        130
    } else {
        0
    })
}

#[derive(Debug, Args)]
pub struct XeSessionArgs {
    /// The session's name (letters, digits and _), also its event files' name.
    #[arg(long, value_name = "NAME", default_value = "plumb_ag_commit")]
    pub name: String,
}

#[derive(Debug, Args)]
pub struct XeTimelineArgs {
    /// The primary replica (mssql://…): its events are read back with
    /// sys.fn_xe_file_target_read_file.
    #[arg(long, value_name = "URL", requires = "standby", conflicts_with_all = ["primary_events", "standby_events"], value_parser = crate::typed::EngineUrl)]
    pub primary: Option<Target>,
    /// The synchronous secondary replica (mssql://…).
    #[arg(long, value_name = "URL", requires = "primary", value_parser = crate::typed::EngineUrl)]
    pub standby: Option<Target>,
    /// Or the primary's events from a file: event_data XML, one event after another (as
    /// sqlcmd prints the read-back query's rows).
    #[arg(long, value_name = "FILE", requires = "standby_events")]
    pub primary_events: Option<PathBuf>,
    /// The secondary's events from a file, as --primary-events.
    #[arg(long, value_name = "FILE", requires = "primary_events")]
    pub standby_events: Option<PathBuf>,
    /// The session whose event files are read (with --primary and --standby).
    #[arg(long, value_name = "NAME", default_value = "plumb_ag_commit")]
    pub session: String,
    /// Read the logins' password from this file (not readable by others); else the URL's or
    /// MSSQL_PASSWORD.
    #[arg(long, value_name = "FILE", requires = "primary")]
    pub password_file: Option<PathBuf>,
    /// Also draw the commit as an SVG chart: the two replicas' events on one time axis, with
    /// the log block's way out and the hardened LSN's way back (a new file).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// A session name that can go into the script and the query as it is.
fn session_name(flag: &str, n: &str) -> Result<()> {
    if n.is_empty() || n.len() > 100 || !n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("{flag} {n}: use letters, digits and _ (it names the session and its files)");
    }
    Ok(())
}

fn xe_session(a: &XeSessionArgs) -> Result<i32> {
    session_name("--name", &a.name)?;
    print!("{}", plumb_engine::mssql_xe::session_script(&a.name));
    Ok(0)
}

fn xe_timeline(g: &GlobalArgs, a: &XeTimelineArgs) -> Result<i32> {
    use plumb_engine::mssql_xe::XeEvent;
    session_name("--session", &a.session)?;
    if let Some(p) = &a.svg {
        plumb_report::out::check_new_file("--svg", p)?;
    }
    let from_file = |flag: &str, p: &std::path::Path| -> Result<Vec<XeEvent>> {
        crate::flagged(flag, plumb_engine::mssql_xe::read_events_file(p))
    };
    let from_server = |flag: &str, t: &Target| -> Result<Vec<XeEvent>> {
        let t = crate::typed::with_password(t.clone(), a.password_file.as_deref())?;
        crate::flagged(flag, plumb_engine::mssql_xe::read_events(&t, &a.session))
    };
    let (p, s) = match (&a.primary_events, &a.standby_events, &a.primary, &a.standby) {
        (Some(pf), Some(sf), _, _) => (
            from_file("--primary-events", pf)?,
            from_file("--standby-events", sf)?,
        ),
        (_, _, Some(pu), Some(su)) => (from_server("--primary", pu)?, from_server("--standby", su)?),
        _ => bail!("give --primary URL and --standby URL, or --primary-events FILE and --standby-events FILE"),
    };
    let t = plumb_analyze::ag::ag_timeline(&p, &s);
    if let Some(path) = &a.svg {
        plumb_report::out::write_new(
            "--svg",
            path,
            plumb_report::repl_render::ag_svg(&t).as_bytes(),
        )?;
    }
    crate::emit(g, &t)?;
    Ok(0)
}
