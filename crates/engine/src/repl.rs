//! Streaming replication as a PostgreSQL primary and standby see it: the WAL senders' positions
//! and lags (`pg_stat_replication`) and a standby's receive and replay positions
//! (`pg_stat_wal_receiver`, `pg_last_wal_receive_lsn`, `pg_last_wal_replay_lsn`). Positions are
//! byte offsets in the WAL (`pg_wal_lsn_diff(lsn, '0/0')`) besides their usual `X/Y` text.

use crate::{Error, Result};
use serde::Serialize;

/// A WAL position: the byte offset, and the `X/Y` text PostgreSQL prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lsn {
    pub bytes: u64,
    pub text: String,
}

impl Lsn {
    pub fn parse(text: &str) -> Option<Lsn> {
        let (hi, lo) = text.split_once('/')?;
        let hi = u64::from_str_radix(hi, 16).ok()?;
        let lo = u64::from_str_radix(lo, 16).ok()?;
        if hi > u32::MAX as u64 || lo > u32::MAX as u64 {
            return None;
        }
        Some(Lsn {
            bytes: (hi << 32) | lo,
            text: text.to_string(),
        })
    }
}

/// One standby as its primary's WAL sender sees it.
#[derive(Debug, Clone, Serialize)]
pub struct Sender {
    /// The WAL sender's process.
    pub pid: u32,
    pub application_name: String,
    /// startup, catchup, streaming, backup, stopping.
    pub state: String,
    /// async, potential, sync, quorum.
    pub sync_state: String,
    pub sent: Option<Lsn>,
    pub written: Option<Lsn>,
    pub flushed: Option<Lsn>,
    pub replayed: Option<Lsn>,
    /// The primary's current WAL position when this was read.
    pub current: Option<Lsn>,
    /// Time from a local flush to the standby's report of having written, flushed, replayed it
    /// (PostgreSQL's `write_lag`, `flush_lag`, `replay_lag`; None when the standby is caught up
    /// and idle).
    pub write_lag_s: Option<f64>,
    pub flush_lag_s: Option<f64>,
    pub replay_lag_s: Option<f64>,
    /// Seconds since the standby's last reply. PostgreSQL updates the lags only when a reply
    /// comes: a standby that stopped answering keeps its last (small) lags while WAL piles up,
    /// and this is how long it has been silent.
    pub reply_age_s: Option<f64>,
}

impl Sender {
    /// Bytes of WAL the standby has not replayed yet.
    pub fn replay_behind_bytes(&self) -> Option<u64> {
        Some(
            self.current
                .as_ref()?
                .bytes
                .saturating_sub(self.replayed.as_ref()?.bytes),
        )
    }
}

/// A standby's own view.
#[derive(Debug, Clone, Serialize)]
pub struct Receiver {
    /// The server is in recovery (a standby).
    pub in_recovery: bool,
    /// The WAL receiver's status (streaming, waiting, …); None when it runs no receiver.
    pub status: Option<String>,
    /// The WAL receiver's process.
    pub pid: Option<u32>,
    pub received: Option<Lsn>,
    pub replayed: Option<Lsn>,
    /// Seconds since the last replayed transaction committed on the primary (on a quiet
    /// primary this grows without any lag).
    pub last_replayed_commit_age_s: Option<f64>,
}

impl Receiver {
    /// Bytes received and not yet replayed.
    pub fn replay_behind_bytes(&self) -> Option<u64> {
        Some(
            self.received
                .as_ref()?
                .bytes
                .saturating_sub(self.replayed.as_ref()?.bytes),
        )
    }
}

fn query_err(what: &str, e: postgres::Error) -> Error {
    if e.is_closed() {
        return Error::Gone(crate::pg::with_causes(&e));
    }
    Error::Query {
        what: what.to_string(),
        message: crate::pg::with_causes(&e),
        source: Some(Box::new(e)),
    }
}

fn lsn(row: &postgres::Row, i: usize) -> Option<Lsn> {
    row.get::<_, Option<String>>(i)
        .as_deref()
        .and_then(Lsn::parse)
}

/// A WAL sender from a row of pid, application_name, state, sync_state, the four positions,
/// the current position and the three lags (columns 0–11), the reply's age in `reply_age`.
fn sender_of(r: &postgres::Row, reply_age: usize) -> Sender {
    Sender {
        pid: r.get::<_, Option<i32>>(0).unwrap_or(0).max(0) as u32,
        application_name: r.get(1),
        state: r.get(2),
        sync_state: r.get(3),
        sent: lsn(r, 4),
        written: lsn(r, 5),
        flushed: lsn(r, 6),
        replayed: lsn(r, 7),
        current: lsn(r, 8),
        write_lag_s: r.get(9),
        flush_lag_s: r.get(10),
        replay_lag_s: r.get(11),
        reply_age_s: r.get(reply_age),
    }
}

/// The primary's WAL senders (one per standby), in application_name order.
pub fn senders(c: &mut postgres::Client) -> Result<Vec<Sender>> {
    let rows = c
        .query(
            "SELECT pid, coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, ''), \
             sent_lsn::text, write_lsn::text, flush_lsn::text, replay_lsn::text, \
             CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, \
             extract(epoch FROM write_lag)::float8, extract(epoch FROM flush_lag)::float8, \
             extract(epoch FROM replay_lag)::float8, \
             extract(epoch FROM clock_timestamp() - reply_time)::float8 \
             FROM pg_stat_replication ORDER BY application_name, pid",
            &[],
        )
        .map_err(|e| query_err("pg_stat_replication", e))?;
    Ok(rows.iter().map(|r| sender_of(r, 12)).collect())
}

/// The replication pipeline at one moment, as the primary sees it: its WAL position, each
/// standby's positions and lags, and the commits waiting for a synchronous standby.
#[derive(Debug, Clone, Serialize)]
pub struct Pipeline {
    /// The primary's current WAL write position.
    pub current: Option<Lsn>,
    /// Sessions waiting in SyncRep: commits flushed locally, waiting for a synchronous standby.
    pub commits_waiting: u64,
    /// How long the longest-waiting of them has been running its statement (its commit's
    /// wait and, before it, the statement's own work).
    pub longest_wait_s: Option<f64>,
    pub senders: Vec<Sender>,
}

/// Read the pipeline from a primary in one statement (one moment for every figure).
pub fn pipeline(c: &mut postgres::Client) -> Result<Pipeline> {
    let rows = c
        .query(
            "SELECT r.pid, coalesce(r.application_name, ''), coalesce(r.state, ''), \
             coalesce(r.sync_state, ''), r.sent_lsn::text, r.write_lsn::text, r.flush_lsn::text, \
             r.replay_lsn::text, x.current::text, \
             extract(epoch FROM r.write_lag)::float8, extract(epoch FROM r.flush_lag)::float8, \
             extract(epoch FROM r.replay_lag)::float8, x.waiting, \
             extract(epoch FROM clock_timestamp() - r.reply_time)::float8, x.longest \
             FROM (SELECT pg_current_wal_lsn() AS current, w.waiting, w.longest \
                   FROM (SELECT count(*) AS waiting, \
                         extract(epoch FROM max(clock_timestamp() - query_start))::float8 AS longest \
                         FROM pg_stat_activity WHERE wait_event = 'SyncRep') w) x \
             LEFT JOIN pg_stat_replication r ON true \
             ORDER BY r.application_name, r.pid",
            &[],
        )
        .map_err(|e| query_err("pg_stat_replication", e))?;
    let first = rows.first();
    Ok(Pipeline {
        current: first.and_then(|r| lsn(r, 8)),
        commits_waiting: first
            .map(|r| r.get::<_, i64>(12).max(0) as u64)
            .unwrap_or(0),
        longest_wait_s: first.and_then(|r| r.get(14)),
        senders: rows
            .iter()
            .filter(|r| r.get::<_, Option<i32>>(0).is_some())
            .map(|r| sender_of(r, 13))
            .collect(),
    })
}

/// A read-only session on a primary for watching its replication.
pub struct Watcher {
    conn: crate::pg::Conn,
    label: String,
}

impl Watcher {
    /// Connect and check the server is a primary (a standby has no WAL senders to watch).
    pub fn connect(primary: &crate::Target) -> Result<Watcher> {
        let cfg = crate::pg::parse_url(primary)?;
        let label = primary.shown();
        let mut conn = crate::pg::Conn::connect(&cfg, &label, true)?;
        let recovering: bool = conn
            .client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .map(|r| r.get(0))
            .map_err(|e| crate::pg::qerr("pg_is_in_recovery()", e))?;
        if recovering {
            return Err(bad_input(
                &format!("--primary {label}"),
                "this server is a standby (in recovery), not a primary: give the server the standbys stream from".into(),
            ));
        }
        Ok(Watcher { conn, label })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The server process serving this session (left out of what a recording shows).
    pub fn backend_pid(&self) -> u32 {
        self.conn.backend_pid
    }

    pub fn read(&mut self) -> Result<Pipeline> {
        pipeline(&mut self.conn.client)
    }
}

/// The server's view as a standby (on a primary: `in_recovery` false and nothing else).
pub fn receiver(c: &mut postgres::Client) -> Result<Receiver> {
    let r = c
        .query_one(
            "SELECT pg_is_in_recovery(), \
             (SELECT status FROM pg_stat_wal_receiver LIMIT 1), \
             (SELECT pid FROM pg_stat_wal_receiver LIMIT 1), \
             pg_last_wal_receive_lsn()::text, pg_last_wal_replay_lsn()::text, \
             extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8",
            &[],
        )
        .map_err(|e| query_err("pg_stat_wal_receiver", e))?;
    Ok(Receiver {
        in_recovery: r.get(0),
        status: r.get(1),
        pid: r.get::<_, Option<i32>>(2).map(|p| p.max(0) as u32),
        received: lsn(&r, 3),
        replayed: lsn(&r, 4),
        last_replayed_commit_age_s: r.get(5),
    })
}

/// The processes one replicated commit passes through, on this host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairProcesses {
    /// The workload session's backend on the primary.
    pub backend: u32,
    pub wal_writer: Option<u32>,
    /// The primary's WAL sender for this standby.
    pub wal_sender: u32,
    /// The standby's WAL receiver.
    pub wal_receiver: u32,
    /// The standby's startup process (replay).
    pub startup: Option<u32>,
    /// The standby's name on the primary.
    pub application_name: String,
    /// async, sync, potential, quorum.
    pub sync_state: String,
    /// The servers' major versions.
    pub primary_version: u32,
    pub standby_version: u32,
}

/// A primary and its standby: a workload session on the primary, observers on both.
pub struct Pair {
    session: crate::pg::Conn,
    primary: crate::pg::Conn,
    standby: crate::pg::Conn,
    primary_label: String,
    standby_label: String,
    local: bool,
}

fn bad_input(what: &str, msg: String) -> Error {
    Error::Url(format!("{what}: {msg}"))
}

impl Pair {
    /// Connect to both and check that they are what they are said to be: a primary (not in
    /// recovery) and a standby streaming from it.
    pub fn connect(primary: &crate::Target, standby: &crate::Target) -> Result<Pair> {
        let pcfg = crate::pg::parse_url(primary)?;
        let scfg = crate::pg::parse_url(standby)?;
        let local = crate::pg::is_local(&pcfg) && crate::pg::is_local(&scfg);
        let (pl, sl) = (primary.shown(), standby.shown());
        let mut session = crate::pg::Conn::connect(&pcfg, &pl, false)?;
        // A statement that runs too long is cancelled (a wait for a synchronous standby is not
        // covered: PostgreSQL turns the timeout off before the commit; see `run`).
        session
            .client
            .batch_execute("SET statement_timeout = '60s'")
            .map_err(|e| crate::pg::qerr("session setup", e))?;
        let mut p = crate::pg::Conn::connect(&pcfg, &pl, true)?;
        let mut s = crate::pg::Conn::connect(&scfg, &sl, true)?;
        let recovering = |c: &mut crate::pg::Conn| -> Result<bool> {
            c.client
                .query_one("SELECT pg_is_in_recovery()", &[])
                .map(|r| r.get(0))
                .map_err(|e| crate::pg::qerr("pg_is_in_recovery()", e))
        };
        if recovering(&mut p)? {
            return Err(bad_input(
                &format!("--primary {pl}"),
                "this server is a standby (in recovery), not a primary".into(),
            ));
        }
        if !recovering(&mut s)? {
            return Err(bad_input(
                &format!("--standby {sl}"),
                "this server is not a standby (it is not in recovery)".into(),
            ));
        }
        Ok(Pair {
            session,
            primary: p,
            standby: s,
            primary_label: pl,
            standby_label: sl,
            local,
        })
    }

    /// The processes of the commit's path, checked to be PostgreSQL processes on this host.
    pub fn processes(&mut self) -> Result<PairProcesses> {
        if !self.local {
            return Err(bad_input(
                "--primary/--standby",
                "a timeline needs both servers on this host (a Unix socket or localhost in both URLs): plumb traces their processes".into(),
            ));
        }
        let rc = receiver(&mut self.standby.client)?;
        let wal_receiver = rc.pid.ok_or_else(|| {
            bad_input(
                &format!("--standby {}", self.standby_label),
                format!(
                    "runs no WAL receiver (status {}): it is not streaming from a primary",
                    rc.status.as_deref().unwrap_or("none")
                ),
            )
        })?;
        let row = self
            .standby
            .client
            .query_one(
                "SELECT coalesce((SELECT conninfo FROM pg_stat_wal_receiver LIMIT 1), ''), \
                 (SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup' LIMIT 1), \
                 current_setting('server_version_num')::int, current_setting('cluster_name')",
                &[],
            )
            .map_err(|e| crate::pg::qerr("pg_stat_wal_receiver", e))?;
        let conninfo: String = row.get(0);
        let startup = row.get::<_, Option<i32>>(1).map(|p| p.max(0) as u32);
        let standby_version = row.get::<_, i32>(2).max(0) as u32 / 10000;
        let cluster_name: String = row.get(3);
        let app = conninfo
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("application_name="))
            .map(str::to_string)
            .or_else(|| (!cluster_name.is_empty()).then_some(cluster_name))
            .unwrap_or_else(|| "walreceiver".into());
        let senders = senders(&mut self.primary.client)?;
        let sender = match senders.iter().filter(|s| s.application_name == app).count() {
            1 => senders.iter().find(|s| s.application_name == app),
            _ if senders.len() == 1 => senders.first(),
            _ => None,
        }
        .ok_or_else(|| {
            bad_input(
                &format!("--standby {}", self.standby_label),
                format!(
                    "the primary {} has no WAL sender for it ({} WAL senders; none named {app})",
                    self.primary_label,
                    senders.len()
                ),
            )
        })?;
        let row = self
            .primary
            .client
            .query_one(
                "SELECT (SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter' LIMIT 1), \
                 current_setting('server_version_num')::int",
                &[],
            )
            .map_err(|e| crate::pg::qerr("pg_stat_activity", e))?;
        let wal_writer = row.get::<_, Option<i32>>(0).map(|p| p.max(0) as u32);
        let primary_version = row.get::<_, i32>(1).max(0) as u32 / 10000;
        let procs = PairProcesses {
            backend: self.session.backend_pid,
            wal_writer,
            wal_sender: sender.pid,
            wal_receiver,
            startup,
            application_name: sender.application_name.clone(),
            sync_state: sender.sync_state.clone(),
            primary_version,
            standby_version,
        };
        for (what, pid) in [
            ("the workload's backend", Some(procs.backend)),
            ("the WAL sender", Some(procs.wal_sender)),
            ("the WAL receiver", Some(procs.wal_receiver)),
        ] {
            let pid = pid.unwrap_or(0);
            if crate::pg::local_postgres(true, pid).is_none() {
                return Err(bad_input(
                    "--primary/--standby",
                    format!("{what} (PID {pid}) is not a postgres process on this host: a timeline needs both servers here, in this PID namespace"),
                ));
            }
        }
        Ok(procs)
    }

    /// The server binary of a process (for its probes), as /proc/PID/exe names it.
    pub fn binary(pid: u32) -> Option<std::path::PathBuf> {
        plumb_sys::process::exe(&plumb_sys::Root::host(), pid)
    }

    /// Run `sql` on the primary's workload session; (sent, received) on CLOCK_MONOTONIC.
    ///
    /// While it runs, the standby's processes (`watch`: the WAL sender and receiver) are looked
    /// at every 100 ms: when one is gone the statement is cancelled, since a commit waiting for
    /// a synchronous standby that died would wait until the statement timeout. The commit stays
    /// committed on the primary (PostgreSQL warns that the standby did not confirm it).
    ///
    /// `stop` (plumb was asked to stop: Ctrl-C, SIGTERM) cancels it too.
    pub fn run(&mut self, sql: &str, watch: &[u32], stop: fn() -> bool) -> Result<(u64, u64)> {
        let token = self.session.client.cancel_token();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gone = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let watcher = {
            let (done, gone) = (done.clone(), gone.clone());
            let watch = watch.to_vec();
            std::thread::spawn(move || {
                use std::sync::atomic::Ordering::SeqCst;
                while !done.load(SeqCst) {
                    if gone.load(SeqCst) == 0 {
                        if let Some(p) = watch.iter().find(|p| !plumb_sys::process::alive(**p)) {
                            gone.store(*p, SeqCst);
                        }
                    }
                    // Again and again until the statement ends: a cancel that arrives before
                    // the backend has read the statement is ignored, and the statement timeout
                    // does not end a wait for a synchronous standby (it is off by then).
                    if gone.load(SeqCst) != 0 || stop() {
                        let _ = token.cancel_query(postgres::NoTls);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            })
        };
        let sent = plumb_sys::eventtrace::mono_ns();
        let r = self.session.client.simple_query(sql);
        let received = plumb_sys::eventtrace::mono_ns();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = watcher.join();
        let gone = gone.load(std::sync::atomic::Ordering::SeqCst);
        if gone != 0 {
            return Err(Error::Gone(format!(
                "--standby {}: the standby went away during the commit (PID {gone} exited); plumb cancelled the statement (a commit that had been made stays on the primary, never confirmed by the standby)",
                self.standby_label
            )));
        }
        r.map_err(|e| crate::pg::qerr("--sql", e))?;
        Ok((sent, received))
    }

    /// The standby's `recovery_min_apply_delay`, in seconds, when it is set: such a standby
    /// replays every commit that much later.
    pub fn apply_delay_s(&mut self) -> Result<Option<f64>> {
        let r = self
            .standby
            .client
            .query_one(
                "SELECT setting::float8 / 1000 FROM pg_settings WHERE name = 'recovery_min_apply_delay'",
                &[],
            )
            .map_err(|e| crate::pg::qerr("pg_settings", e))?;
        Ok(Some(r.get::<_, f64>(0)).filter(|d| *d > 0.0))
    }

    /// The primary's WAL position now.
    pub fn primary_lsn(&mut self) -> Result<u64> {
        let r = self
            .primary
            .client
            .query_one("SELECT pg_current_wal_lsn()::text", &[])
            .map_err(|e| crate::pg::qerr("pg_current_wal_lsn()", e))?;
        Ok(Lsn::parse(&r.get::<_, String>(0))
            .map(|l| l.bytes)
            .unwrap_or(0))
    }

    /// Wait until the standby has replayed up to `lsn`; false after `timeout`.
    pub fn wait_replayed(&mut self, lsn: u64, timeout: std::time::Duration) -> Result<bool> {
        let t = std::time::Instant::now();
        loop {
            let rc = receiver(&mut self.standby.client).map_err(|e| {
                Error::Gone(format!(
                    "--standby {}: the standby went away while plumb waited for it to replay the commit ({e})",
                    self.standby_label
                ))
            })?;
            if rc.replayed.as_ref().is_some_and(|r| r.bytes >= lsn) {
                return Ok(true);
            }
            if t.elapsed() >= timeout {
                return Ok(false);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// How far the standby is behind now: bytes not replayed, and PostgreSQL's replay lag.
    pub fn behind(&mut self) -> Result<(u64, Option<f64>)> {
        let app = self.processes()?.application_name;
        let s = senders(&mut self.primary.client)?
            .into_iter()
            .find(|s| s.application_name == app);
        Ok(match s {
            Some(s) => (s.replay_behind_bytes().unwrap_or(0), s.replay_lag_s),
            None => (0, None),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_parse_as_postgresql_prints_them() {
        let l = Lsn::parse("16/B374D848").unwrap();
        assert_eq!(l.bytes, (0x16u64 << 32) | 0xB374_D848);
        assert_eq!(Lsn::parse("0/0").unwrap().bytes, 0);
        assert!(Lsn::parse("nonsense").is_none());
        assert!(Lsn::parse("1/G").is_none());
        assert!(Lsn::parse("100000000/0").is_none());
    }
}
