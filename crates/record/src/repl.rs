//! Replication in a recording (`plumb repl watch --out`): the primary's view of each standby,
//! read with every sample (not only with the slow metrics), so that a recording at 100 ms shows
//! a standby falling behind and catching up.
//!
//! Per standby (`repl.STANDBY.…`): WAL sent (a counter: its rate is the WAL shipped per
//! second), how far sent, written, flushed and replayed positions are behind the primary's
//! current position (bytes), and the write, flush and replay lags PostgreSQL measures (µs,
//! charted as ms; missing while a standby is idle and caught up). For the primary (`replication.…`): WAL
//! written (a counter) and the commits waiting for a synchronous standby.
//!
//! A MariaDB primary with semi-synchronous replication gives `semisync.…` (whether commits
//! wait for an acknowledgement now, the replicas that acknowledge, commits acknowledged and
//! not, and their wait) and the same `replication.commits_waiting`.

use plumb_engine::mariadb::{SemiSync, SemiSyncWatcher};
use plumb_engine::mssql::{HadrReplica, HadrWatcher};
use plumb_engine::repl::{Pipeline, Watcher};

/// What is watched: a PostgreSQL primary's WAL senders, or a MariaDB primary's semi-sync.
pub enum Source {
    Postgres(Watcher),
    Mariadb(SemiSyncWatcher),
    Sqlserver(HadrWatcher),
}

/// One reading of either.
#[derive(Debug, Clone)]
pub enum Reading {
    Postgres(Pipeline),
    Mariadb(SemiSync),
    Sqlserver(Vec<HadrReplica>),
}

use plumb_analyze::repl::SILENT_AFTER_S;

pub struct ReplSampler {
    source: Source,
    /// The last reading, for a live view.
    pub last: Option<Reading>,
    /// Why the last reading failed, once (the primary went away).
    pub failed: Option<String>,
}

/// A standby's name as the object of a metric: letters, digits, `_` and `-` (a dot would split
/// the name).
pub fn object_name(application_name: &str) -> String {
    let s: String = application_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "unnamed".into()
    } else {
        s
    }
}

/// The rows of one reading: (name, gauge, value).
pub fn rows(p: &Pipeline) -> Vec<(String, bool, u64)> {
    let mut out = Vec::new();
    if let Some(c) = &p.current {
        out.push(("replication.wal_bytes".to_string(), false, c.bytes));
    }
    out.push((
        "replication.commits_waiting".to_string(),
        true,
        p.commits_waiting,
    ));
    out.push((
        "replication.longest_wait_us".to_string(),
        true,
        p.longest_wait_s
            .filter(|w| w.is_finite() && *w >= 0.0)
            .map(|w| (w * 1e6).round() as u64)
            .unwrap_or(0),
    ));
    let cur = p.current.as_ref().map(|c| c.bytes);
    for s in &p.senders {
        let o = object_name(&s.application_name);
        if let Some(sent) = &s.sent {
            out.push((format!("repl.{o}.sent_bytes"), false, sent.bytes));
        }
        for (name, pos) in [
            ("sent_behind_bytes", &s.sent),
            ("written_behind_bytes", &s.written),
            ("flushed_behind_bytes", &s.flushed),
            ("replayed_behind_bytes", &s.replayed),
        ] {
            if let (Some(c), Some(p)) = (cur, pos) {
                out.push((format!("repl.{o}.{name}"), true, c.saturating_sub(p.bytes)));
            }
        }
        // How long a standby that owes a reply (WAL written to it and not reported flushed) has
        // been silent: PostgreSQL's lags do not move while it is. Lags in microseconds: on one
        // host they are often under a millisecond.
        let owes = matches!((cur, &s.flushed), (Some(c), Some(f)) if c > f.bytes);
        let silent = s
            .reply_age_s
            .filter(|a| owes && a.is_finite() && *a >= SILENT_AFTER_S)
            .unwrap_or(0.0);
        out.push((
            format!("repl.{o}.silent_us"),
            true,
            (silent * 1e6).round() as u64,
        ));
        for (name, lag) in [
            ("write_lag_us", s.write_lag_s),
            ("flush_lag_us", s.flush_lag_s),
            ("replay_lag_us", s.replay_lag_s),
        ] {
            if let Some(l) = lag.filter(|l| l.is_finite() && *l >= 0.0) {
                out.push((format!("repl.{o}.{name}"), true, (l * 1e6).round() as u64));
            }
        }
    }
    out
}

/// The rows of a MariaDB semi-sync reading.
pub(crate) fn semisync_rows(m: &SemiSync) -> Vec<(String, bool, u64)> {
    vec![
        ("replication.commits_waiting".to_string(), true, m.waiting),
        ("semisync.active".to_string(), true, m.active as u64),
        ("semisync.clients".to_string(), true, m.clients),
        ("semisync.yes_tx".to_string(), false, m.yes_tx),
        ("semisync.no_tx".to_string(), false, m.no_tx),
        ("semisync.tx_wait_us".to_string(), false, m.tx_wait_us),
        ("semisync.tx_waits".to_string(), false, m.tx_waits),
    ]
}

/// The rows of an Availability Group reading: per secondary database (`hadr.SERVER_DB.…`),
/// its queues, rates, lag and whether it is synchronized.
pub(crate) fn hadr_rows(h: &[HadrReplica]) -> Vec<(String, bool, u64)> {
    let mut out = Vec::new();
    for r in h.iter().filter(|r| !r.is_primary) {
        let o = object_name(&format!("{}_{}", r.server, r.database));
        let n = |v: Option<f64>| {
            v.filter(|v| v.is_finite() && *v >= 0.0)
                .map(|v| v.round() as u64)
        };
        for (field, v) in [
            ("send_queue_bytes", n(r.send_queue_bytes)),
            ("send_rate_bytes", n(r.send_rate_bytes_per_s)),
            ("redo_queue_bytes", n(r.redo_queue_bytes)),
            ("redo_rate_bytes", n(r.redo_rate_bytes_per_s)),
            ("lag_ms", n(r.secondary_lag_s.map(|s| s * 1000.0))),
            ("synchronized", Some((r.state == "SYNCHRONIZED") as u64)),
        ] {
            if let Some(v) = v {
                out.push((format!("hadr.{o}.{field}"), true, v));
            }
        }
    }
    out
}

impl ReplSampler {
    pub fn new(source: Source) -> ReplSampler {
        ReplSampler {
            source,
            last: None,
            failed: None,
        }
    }

    /// The primary's server process serving plumb's session (PostgreSQL's: a MariaDB
    /// connection is a thread).
    pub fn own_pid(&self) -> Option<u32> {
        match &self.source {
            Source::Postgres(w) => Some(w.backend_pid()),
            Source::Mariadb(_) | Source::Sqlserver(_) => None,
        }
    }

    /// Read the pipeline now: its rows, or none when the primary cannot be read (`failed`
    /// says why).
    pub fn take(&mut self) -> Vec<(String, bool, u64)> {
        let reading = match &mut self.source {
            Source::Postgres(w) => w.read().map(Reading::Postgres),
            Source::Mariadb(w) => w.read().map(Reading::Mariadb),
            Source::Sqlserver(w) => w.read().map(Reading::Sqlserver),
        };
        match reading {
            Ok(p) => {
                self.failed = None;
                let r = match &p {
                    Reading::Postgres(p) => rows(p),
                    Reading::Mariadb(m) => semisync_rows(m),
                    Reading::Sqlserver(h) => hadr_rows(h),
                };
                self.last = Some(p);
                r
            }
            Err(e) => {
                self.failed = Some(e.to_string());
                self.last = None;
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_engine::repl::{Lsn, Sender};

    #[test]
    fn a_reading_becomes_rows_per_standby() {
        let lsn = |b: u64| {
            Some(Lsn {
                bytes: b,
                text: String::new(),
            })
        };
        let p = Pipeline {
            current: lsn(10_000),
            commits_waiting: 3,
            longest_wait_s: Some(2.5),
            senders: vec![Sender {
                pid: 1,
                application_name: "node 2.example".into(),
                state: "streaming".into(),
                sync_state: "sync".into(),
                sent: lsn(9_000),
                written: lsn(8_000),
                flushed: lsn(7_000),
                replayed: lsn(6_000),
                current: lsn(10_000),
                write_lag_s: Some(0.0015),
                flush_lag_s: Some(0.002),
                replay_lag_s: None,
                reply_age_s: Some(0.5),
            }],
        };
        let r = rows(&p);
        let get = |n: &str| r.iter().find(|x| x.0 == n).map(|x| (x.1, x.2));
        assert_eq!(get("replication.wal_bytes"), Some((false, 10_000)));
        assert_eq!(get("replication.commits_waiting"), Some((true, 3)));
        assert_eq!(get("replication.longest_wait_us"), Some((true, 2_500_000)));
        // Owing 3,000 bytes and silent for half a second: not yet silent.
        assert_eq!(get("repl.node_2_example.silent_us"), Some((true, 0)));
        assert_eq!(get("repl.node_2_example.sent_bytes"), Some((false, 9_000)));
        assert_eq!(
            get("repl.node_2_example.flushed_behind_bytes"),
            Some((true, 3_000))
        );
        assert_eq!(
            get("repl.node_2_example.replayed_behind_bytes"),
            Some((true, 4_000))
        );
        assert_eq!(get("repl.node_2_example.write_lag_us"), Some((true, 1_500)));
        // Not measured (idle and caught up) is a gap, not a zero.
        assert_eq!(get("repl.node_2_example.replay_lag_us"), None);
    }
}
