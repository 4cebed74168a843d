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

/// The primary's WAL senders (one per standby), in application_name order.
pub fn senders(c: &mut postgres::Client) -> Result<Vec<Sender>> {
    let rows = c
        .query(
            "SELECT pid, coalesce(application_name, ''), coalesce(state, ''), coalesce(sync_state, ''), \
             sent_lsn::text, write_lsn::text, flush_lsn::text, replay_lsn::text, \
             CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_lsn()::text END, \
             extract(epoch FROM write_lag)::float8, extract(epoch FROM flush_lag)::float8, \
             extract(epoch FROM replay_lag)::float8 \
             FROM pg_stat_replication ORDER BY application_name, pid",
            &[],
        )
        .map_err(|e| query_err("pg_stat_replication", e))?;
    Ok(rows
        .iter()
        .map(|r| Sender {
            pid: r.get::<_, i32>(0).max(0) as u32,
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
        })
        .collect())
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
