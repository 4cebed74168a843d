//! `plumb repl timeline`: run one statement on a primary while tracing the processes its commit
//! passes through on both servers, and turn their events into stages (see
//! [`plumb_analyze::repl`]). Both servers must run on this host: the events come from the
//! kernel's tracepoints, on one clock.

use crate::error::Result;
use plumb_analyze::repl::{self as tl, Roles, TimelineReport};
use plumb_engine::repl::Pair;
use plumb_engine::Target;
use plumb_sys::eventtrace::{symbol_offset, EventTrace, Uprobe};
use std::time::Duration;

pub struct TimelineOptions {
    pub sql: String,
    /// Commits to trace.
    pub repeat: usize,
    /// Use function probes where the server binary exports the functions.
    pub probes: bool,
    /// A standby further behind than this is refused (its stages would be a backlog's).
    pub max_behind: Duration,
}

/// How long a commit may take to be replayed on the standby before the run is given up.
const REPLAY_WAIT: Duration = Duration::from_secs(10);

/// Probes on the primary's binary (the commit's side) and the standby's (replay).
fn probes(
    primary_bin: &std::path::Path,
    standby_bin: &std::path::Path,
) -> (Vec<Uprobe>, Vec<String>, Vec<String>) {
    let (mut out, mut probed, mut not) = (Vec::new(), Vec::new(), Vec::new());
    for (name, func, ret) in tl::PG_PROBES {
        let bin = if name == "replayed" {
            standby_bin
        } else {
            primary_bin
        };
        match symbol_offset(bin, func) {
            Ok(offset) => {
                out.push(Uprobe {
                    name: name.to_string(),
                    binary: bin.to_path_buf(),
                    offset,
                    ret,
                });
                if !probed.iter().any(|p| p == func) {
                    probed.push(func.to_string());
                }
            }
            Err(_) => {
                if !not.iter().any(|p| p == func) {
                    not.push(func.to_string());
                }
            }
        }
    }
    (out, probed, not)
}

/// Trace `o.repeat` commits of `o.sql` on `primary`, replicated to `standby`. `each` is told
/// when each commit is done (for progress); `stop` ends the run early (a statement that runs
/// then is cancelled), with the commits traced so far.
pub fn timeline(
    primary: &Target,
    standby: &Target,
    o: &TimelineOptions,
    each: &dyn Fn(usize, usize),
    stop: fn() -> bool,
) -> Result<TimelineReport> {
    if o.repeat == 0 {
        crate::refuse!("--repeat 0: trace at least one commit");
    }
    if o.sql.trim().is_empty() {
        crate::refuse!("--sql: give the statement to run on the primary");
    }
    let mut pair = Pair::connect(primary, standby)?;
    let procs = pair.processes()?;
    let (behind_bytes, lag) = pair.behind()?;
    if lag.is_some_and(|l| l > o.max_behind.as_secs_f64()) {
        crate::refuse!(
            "--standby {}: it replays {:.0} s behind the primary ({} bytes not replayed); a timeline of one commit needs a standby that keeps up",
            standby.shown(),
            lag.unwrap_or(0.0),
            behind_bytes
        );
    }
    // plumb's own threads are the client: the statement's send and the result's read.
    let client = plumb_sys::proctree::threads(&plumb_sys::Root::host(), std::process::id());
    if let Some(d) = pair.apply_delay_s()? {
        crate::refuse!(
            "--standby {}: it replays every commit {d:.0} s late (recovery_min_apply_delay); a timeline needs a standby that replays as WAL arrives",
            standby.shown()
        );
    }
    let roles = Roles {
        client: client.clone(),
        backend: procs.backend,
        wal_writer: procs.wal_writer,
        wal_sender: procs.wal_sender,
        wal_receiver: procs.wal_receiver,
        startup: procs.startup,
    };
    let (uprobes, probed, not_probed) = if o.probes {
        match (
            Pair::binary(procs.backend),
            Pair::binary(procs.startup.unwrap_or(procs.wal_receiver)),
        ) {
            (Some(p), Some(s)) => probes(&p, &s),
            _ => (
                Vec::new(),
                Vec::new(),
                tl::PG_PROBES.iter().map(|p| p.1.to_string()).collect(),
            ),
        }
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    let pids: Vec<u32> = [
        Some(roles.backend),
        roles.wal_writer,
        Some(roles.wal_sender),
        Some(roles.wal_receiver),
        roles.startup,
    ]
    .into_iter()
    .flatten()
    .chain(client)
    .collect();
    let mut trace = EventTrace::start(&pids, &tl::SYSCALLS, &uprobes)
        .map_err(|e| crate::Error::quoting(e.to_string(), e))?;
    let synchronous = matches!(procs.sync_state.as_str(), "sync" | "quorum");
    let mut runs = Vec::new();
    for i in 0..o.repeat {
        if stop() {
            break;
        }
        // A quiet moment, and the buffer emptied, before each commit.
        std::thread::sleep(Duration::from_millis(20));
        trace
            .take()
            .map_err(|e| crate::Error::quoting(e.to_string(), e))?;
        let client = match pair.run(&o.sql, &[roles.wal_sender, roles.wal_receiver], stop) {
            // Asked to stop: the statement was cancelled; the commits traced so far stand.
            _ if stop() => break,
            r => r?,
        };
        let lsn = pair.primary_lsn()?;
        if !pair.wait_replayed(lsn, REPLAY_WAIT)? {
            crate::refuse!(
                "--standby {}: it did not replay the commit within {} s (it stopped, or fell behind)",
                standby.shown(),
                REPLAY_WAIT.as_secs()
            );
        }
        // Replay is seen by the observer a moment after the startup process's probe fires.
        std::thread::sleep(Duration::from_millis(2));
        let (events, lost) = trace
            .take()
            .map_err(|e| crate::Error::quoting(e.to_string(), e))?;
        runs.push(tl::timeline(&events, &roles, client, synchronous, lost));
        each(i + 1, o.repeat);
    }
    drop(trace);
    Ok(TimelineReport::new(TimelineReport {
        sql: o.sql.clone(),
        processes: roles,
        application_name: procs.application_name,
        sync_state: procs.sync_state,
        primary_version: procs.primary_version,
        standby_version: procs.standby_version,
        probed,
        not_probed,
        runs,
        summary: Vec::new(),
        client_latency_ns: None,
        unexplained: None,
    }))
}

/// A standby plumb made and its primary, both running: their URLs, and their servers' PIDs
/// (standby, then primary).
pub struct PrivatePair {
    pub primary: Target,
    pub standby: Target,
    pub pids: [u32; 2],
}

/// The standby plumb made in `dir` (`--standby-dir`) and its primary.
pub fn private_pair(dir: &std::path::Path) -> Result<PrivatePair> {
    use plumb_engine::private;
    let shown = dir.display();
    let s = private::status(dir)
        .map_err(|e| crate::delta::dir_error(dir, e))?
        .ok_or_else(|| {
            crate::Error::Refused(format!("--standby-dir {shown}: no instance running there"))
        })?;
    let sb = s.standby_of.clone().ok_or_else(|| {
        crate::Error::Refused(format!("--standby-dir {shown}: not a standby (plumb engine start --dir {shown} --standby-of PRIMARY_DIR)"))
    })?;
    let p = private::status(&sb.primary)
        .map_err(|e| crate::delta::dir_error(&sb.primary, e))?
        .ok_or_else(|| {
            crate::Error::Refused(format!(
                "--standby-dir {shown}: its primary in {} is not running",
                sb.primary.display()
            ))
        })?;
    Ok(PrivatePair {
        primary: p.target(),
        standby: s.target(),
        pids: [s.pid, p.pid],
    })
}
