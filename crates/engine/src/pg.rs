//! PostgreSQL: connect, detect the version, and read metric sets chosen by version (pg_stat_io
//! from 16, pg_stat_checkpointer from 17, pg_stat_wal's timing columns gone in 18).

/// The major version in a PostgreSQL version string: "17.10" → 17, "18beta1" → 18, "15" → 15,
/// "PostgreSQL 17.10 on x86_64…" → 17; None for anything else.
pub fn major(v: &str) -> Option<u32> {
    let v = v.strip_prefix("PostgreSQL ").unwrap_or(v);
    let digits: String = v.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

use crate::{redact, Error, Kind, Result, ServerInfo, Snapshot, Target};
use postgres::config::Host;
use postgres::{Client, Config, NoTls};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

/// Parse a `postgres://` URL (or key=value string). The password: the target's own (from a
/// file), else the URL's, else PGPASSWORD.
pub fn parse_url(t: &Target) -> Result<Config> {
    let url = &t.url;
    let mut c = Config::from_str(url)
        .map_err(|e| Error::Url(format!("{}: not a PostgreSQL URL: {e}", redact(url))))?;
    if let Some(p) = &t.password {
        c.password(p.as_str());
    } else if c.get_password().is_none() {
        if let Ok(p) = std::env::var("PGPASSWORD") {
            c.password(p);
        }
    }
    if c.get_connect_timeout().is_none() {
        c.connect_timeout(Duration::from_secs(10));
    }
    if c.get_application_name().is_none() {
        c.application_name("plumb");
    }
    Ok(c)
}

/// Whether every host in the configuration is this machine.
pub fn is_local(c: &Config) -> bool {
    let hosts = c.get_hosts();
    !hosts.is_empty()
        && hosts.iter().all(|h| match h {
            Host::Unix(_) => true,
            Host::Tcp(name) => crate::is_local_host(name),
        })
}

pub struct Conn {
    pub client: Client,
    pub label: String,
    pub version_num: u32,
    pub backend_pid: u32,
}

pub(crate) fn qerr(what: &str, e: postgres::Error) -> Error {
    if e.is_closed()
        || e.as_db_error()
            .is_some_and(|d| d.code().code().starts_with("57P"))
    {
        Error::Gone(format!("{what}: {e}"))
    } else {
        Error::Query {
            what: what.to_string(),
            message: e
                .as_db_error()
                .map(|d| d.message().to_string())
                .unwrap_or_else(|| e.to_string()),
            source: Some(Box::new(e)),
        }
    }
}

impl Conn {
    /// Connect. `observer` sessions are read-only with a statement timeout; workload sessions run
    /// whatever the user asks.
    pub fn connect(cfg: &Config, label: &str, observer: bool) -> Result<Conn> {
        let mut client = cfg.connect(NoTls).map_err(|e| Error::Connect {
            url: label.to_string(),
            message: crate::with_hint(crate::Kind::Postgres, with_causes(&e)),
            source: Some(Box::new(e)),
        })?;
        if observer {
            client
                .batch_execute("SET default_transaction_read_only = on; SET statement_timeout = '30s'; SET lock_timeout = '5s'")
                .map_err(|e| qerr("session setup", e))?;
        }
        let row = client
            .query_one(
                "SELECT current_setting('server_version_num')::int4, pg_backend_pid()",
                &[],
            )
            .map_err(|e| qerr("version", e))?;
        Ok(Conn {
            version_num: row.get::<_, i32>(0) as u32,
            backend_pid: row.get::<_, i32>(1) as u32,
            client,
            label: label.to_string(),
        })
    }

    /// Rows of (key columns..., float values...) as text keys and f64s.
    /// At most [`crate::MAX_ROWS`] rows are read: a server that sends more (without
    /// end) is refused, never held in memory.
    fn rows(&mut self, what: &str, sql: &str, keys: usize) -> Result<Vec<(Vec<String>, Vec<f64>)>> {
        use postgres::fallible_iterator::FallibleIterator;
        let mut it = self
            .client
            .query_raw(
                sql,
                std::iter::empty::<&(dyn postgres::types::ToSql + Sync)>(),
            )
            .map_err(|e| qerr(what, e))?;
        let mut rows = Vec::new();
        while let Some(r) = it.next().map_err(|e| qerr(what, e))? {
            if rows.len() >= crate::MAX_ROWS {
                return Err(Error::Refused(format!(
                    "{what}: the server sent more than {} rows; plumb reads at most that many",
                    crate::MAX_ROWS
                )));
            }
            rows.push(r);
        }
        let mut out = Vec::new();
        for r in rows {
            let n = r.len();
            let k: Vec<String> = (0..keys)
                .map(|i| r.get::<_, Option<String>>(i).unwrap_or_default())
                .collect();
            let v: Vec<f64> = (keys..n)
                .map(|i| r.get::<_, Option<f64>>(i).unwrap_or(0.0))
                .collect();
            out.push((k, v));
        }
        Ok(out)
    }
}

/// Read every metric set the server offers.
pub fn snapshot(c: &mut Conn) -> Result<Snapshot> {
    snapshot_with(c, true)
}

/// A snapshot; without `per_object`, the per-table and per-backend-type sets
/// (pg_statio_user_tables, pg_stat_io) are left out: a recording keeps none of them, and on a
/// server with many tables they are most of the reading.
pub fn snapshot_with(c: &mut Conn, per_object: bool) -> Result<Snapshot> {
    let v = c.version_num;
    let mut s = Snapshot {
        engine: "postgresql".into(),
        version: format!("{}.{}", v / 10000, v % 10000),
        ..Default::default()
    };
    settings(c, &mut s)?;
    database_counters(c, &mut s)?;
    checkpoint_counters(c, &mut s)?;
    wal_counters(c, &mut s)?;
    io_counters(c, &mut s, per_object)?;
    table_counters(c, &mut s, per_object)?;
    buffercache(c, &mut s)?;
    activity_gauges(c, &mut s)?;
    Ok(s)
}

/// The server's start time and the settings a snapshot is read with, from a fresh view of the statistics.
fn settings(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    // A fresh view of the statistics, not one cached earlier in this session.
    c.client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .map_err(|e| qerr("pg_stat_clear_snapshot", e))?;
    let r = c
        .client
        .query_one(
            "SELECT pg_postmaster_start_time()::text, current_setting('shared_buffers'), current_setting('work_mem'), current_database()::text, current_setting('block_size'), current_setting('track_io_timing')",
            &[],
        )
        .map_err(|e| qerr("server settings", e))?;
    s.server_start = r.get(0);
    for (i, k) in [
        "shared_buffers",
        "work_mem",
        "database",
        "block_size",
        "track_io_timing",
    ]
    .iter()
    .enumerate()
    {
        s.settings.insert(k.to_string(), r.get(i + 1));
    }
    if s.settings.get("track_io_timing").map(String::as_str) != Some("on") {
        s.unavailable
            .push("read and write times (track_io_timing is off)".into());
    }
    Ok(())
}

/// pg_stat_database's counters for the current database.
fn database_counters(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    let names = [
        "blks_read",
        "blks_hit",
        "tup_returned",
        "tup_fetched",
        "tup_inserted",
        "tup_updated",
        "tup_deleted",
        "temp_files",
        "temp_bytes",
        "xact_commit",
        "xact_rollback",
        "blk_read_time_ms",
        "blk_write_time_ms",
        "deadlocks",
    ];
    let sql = format!(
        "SELECT coalesce(stats_reset::text, ''), {} FROM pg_stat_database WHERE datname = current_database()",
        names.iter().map(|n| format!("{}::float8", n.trim_end_matches("_ms"))).collect::<Vec<_>>().join(", ")
    );
    if let Some((k, vals)) = c.rows("pg_stat_database", &sql, 1)?.first() {
        s.put("db", &names, vals);
        s.resets.insert("db".into(), k[0].clone());
    }
    Ok(())
}

/// Checkpoints: pg_stat_checkpointer (17+) or pg_stat_bgwriter.
fn checkpoint_counters(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    let v = c.version_num;
    let ckpt = [
        "checkpoints_timed",
        "checkpoints_requested",
        "write_time_ms",
        "sync_time_ms",
        "buffers_written",
    ];
    if v >= 170000 {
        // 18 adds checkpoints that completed (a skipped one counts as timed or requested
        // only) and the SLRU buffers they wrote.
        let (more, more_names): (&str, &[&str]) = if v >= 180000 {
            (
                ", num_done::float8, slru_written::float8",
                &["checkpoints_done", "slru_buffers_written"],
            )
        } else {
            ("", &[])
        };
        let r = c.rows("pg_stat_checkpointer", &format!("SELECT coalesce(stats_reset::text,''), num_timed::float8, num_requested::float8, write_time::float8, sync_time::float8, buffers_written::float8, restartpoints_timed::float8, restartpoints_req::float8, restartpoints_done::float8{more} FROM pg_stat_checkpointer"), 1)?;
        if let Some((k, vals)) = r.first() {
            s.resets.insert("checkpointer".into(), k[0].clone());
            s.put("checkpointer", &ckpt, vals);
            s.put(
                "checkpointer",
                &[
                    "restartpoints_timed",
                    "restartpoints_requested",
                    "restartpoints_done",
                ],
                &vals[5..],
            );
            s.put("checkpointer", more_names, &vals[8..]);
        }
        let r = c.rows("pg_stat_bgwriter", "SELECT coalesce(stats_reset::text,''), buffers_clean::float8, maxwritten_clean::float8, buffers_alloc::float8 FROM pg_stat_bgwriter", 1)?;
        if let Some((k, vals)) = r.first() {
            s.resets.insert("bgwriter".into(), k[0].clone());
            s.put(
                "bgwriter",
                &["buffers_clean", "maxwritten_clean", "buffers_alloc"],
                vals,
            );
        }
    } else {
        s.unavailable.push(
            "pg_stat_checkpointer: arrives in PostgreSQL 17; checkpoints from pg_stat_bgwriter here".into(),
        );
        let r = c.rows("pg_stat_bgwriter", "SELECT coalesce(stats_reset::text,''), checkpoints_timed::float8, checkpoints_req::float8, checkpoint_write_time::float8, checkpoint_sync_time::float8, buffers_checkpoint::float8, buffers_clean::float8, maxwritten_clean::float8, buffers_backend::float8, buffers_backend_fsync::float8, buffers_alloc::float8 FROM pg_stat_bgwriter", 1)?;
        if let Some((k, vals)) = r.first() {
            s.resets.insert("checkpointer".into(), k[0].clone());
            s.resets.insert("bgwriter".into(), k[0].clone());
            s.put("checkpointer", &ckpt, &vals[..5]);
            s.put(
                "bgwriter",
                &[
                    "buffers_clean",
                    "maxwritten_clean",
                    "buffers_backend",
                    "buffers_backend_fsync",
                    "buffers_alloc",
                ],
                &vals[5..],
            );
        }
    }
    Ok(())
}

/// pg_stat_wal (14+).
fn wal_counters(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    let v = c.version_num;
    if v >= 140000 {
        let (cols, names): (&str, &[&str]) = if v >= 180000 {
            (
                "wal_records, wal_fpi, wal_bytes, wal_buffers_full",
                &["records", "fpi", "bytes", "buffers_full"],
            )
        } else {
            (
                "wal_records, wal_fpi, wal_bytes, wal_buffers_full, wal_write, wal_sync, wal_write_time, wal_sync_time",
                &["records", "fpi", "bytes", "buffers_full", "writes", "syncs", "write_time_ms", "sync_time_ms"],
            )
        };
        let cols: Vec<String> = cols.split(", ").map(|c| format!("{c}::float8")).collect();
        let r = c.rows(
            "pg_stat_wal",
            &format!(
                "SELECT coalesce(stats_reset::text,''), {} FROM pg_stat_wal",
                cols.join(", ")
            ),
            1,
        )?;
        if let Some((k, vals)) = r.first() {
            s.resets.insert("wal".into(), k[0].clone());
            s.put("wal", names, vals);
        }
        if v >= 180000 {
            // 18 moved WAL writes and syncs (and their times) to pg_stat_io's wal rows: the
            // same figures, summed over backend types (context normal: not segment creation).
            let r = c.rows(
                "pg_stat_io",
                "SELECT '', coalesce(sum(writes),0)::float8, coalesce(sum(fsyncs),0)::float8, coalesce(sum(write_time),0)::float8, coalesce(sum(fsync_time),0)::float8 FROM pg_stat_io WHERE object = 'wal' AND context = 'normal'",
                1,
            )?;
            if let Some((_, vals)) = r.first() {
                s.put(
                    "wal",
                    &["writes", "syncs", "write_time_ms", "sync_time_ms"],
                    vals,
                );
            }
        }
    } else {
        s.unavailable.push("pg_stat_wal (PostgreSQL 14+)".into());
    }
    Ok(())
}

/// pg_stat_io by backend type, object and context (16+), with `per_object`.
fn io_counters(c: &mut Conn, s: &mut Snapshot, per_object: bool) -> Result<()> {
    let v = c.version_num;
    if v >= 160000 && per_object {
        // Bytes: 18 counts them (read_bytes…); 16 and 17 count operations of op_bytes each.
        let bytes = if v >= 180000 {
            "coalesce(read_bytes,0)::float8, coalesce(write_bytes,0)::float8, coalesce(extend_bytes,0)::float8"
        } else {
            "coalesce(reads*op_bytes,0)::float8, coalesce(writes*op_bytes,0)::float8, coalesce(extends*op_bytes,0)::float8"
        };
        let r = c.rows(
            "pg_stat_io",
            &format!("SELECT backend_type || '/' || object || '/' || context, coalesce(reads,0)::float8, coalesce(read_time,0)::float8, coalesce(writes,0)::float8, coalesce(write_time,0)::float8, coalesce(extends,0)::float8, coalesce(extend_time,0)::float8, coalesce(hits,0)::float8, coalesce(evictions,0)::float8, coalesce(fsyncs,0)::float8, coalesce(fsync_time,0)::float8, {bytes} FROM pg_stat_io"),
            1,
        )?;
        let names = [
            "reads",
            "read_time_ms",
            "writes",
            "write_time_ms",
            "extends",
            "extend_time_ms",
            "hits",
            "evictions",
            "fsyncs",
            "fsync_time_ms",
            "read_bytes",
            "write_bytes",
            "extend_bytes",
        ];
        for (k, vals) in r {
            s.put_object("io", &k[0], &names, &vals);
        }
    } else if v >= 160000 {
        // For recordings: pg_stat_io summed by the backend types that do a server's I/O.
        let bytes = if v >= 180000 {
            "read_bytes, write_bytes, extend_bytes"
        } else {
            "reads*op_bytes, writes*op_bytes, extends*op_bytes"
        };
        let r = c.rows(
            "pg_stat_io",
            &format!(
                "SELECT CASE backend_type WHEN 'client backend' THEN 'io_client' WHEN 'checkpointer' THEN 'io_checkpointer' WHEN 'background writer' THEN 'io_bgwriter' WHEN 'autovacuum worker' THEN 'io_autovacuum' WHEN 'walwriter' THEN 'io_walwriter' ELSE 'io_other' END, {} FROM pg_stat_io GROUP BY 1",
                bytes
                    .split(", ")
                    .chain(["fsyncs"])
                    .map(|c| format!("coalesce(sum({c}),0)::float8"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            1,
        )?;
        for (k, vals) in r {
            s.put(
                &k[0],
                &["read_bytes", "write_bytes", "extend_bytes", "fsyncs"],
                &vals,
            );
        }
    } else if per_object {
        s.unavailable.push(
            "pg_stat_io: arrives in PostgreSQL 16; per-table block reads from pg_statio_user_tables here"
                .into(),
        );
    }
    Ok(())
}

/// pg_statio_user_tables, with `per_object`.
fn table_counters(c: &mut Conn, s: &mut Snapshot, per_object: bool) -> Result<()> {
    let r = if per_object {
        c.rows(
        "pg_statio_user_tables",
        "SELECT schemaname || '.' || relname || ' (' || coalesce(pg_relation_filepath(relid), '?') || ')', coalesce(heap_blks_read,0)::float8, coalesce(heap_blks_hit,0)::float8, coalesce(idx_blks_read,0)::float8, coalesce(idx_blks_hit,0)::float8, coalesce(toast_blks_read,0)::float8, coalesce(toast_blks_hit,0)::float8 FROM pg_statio_user_tables",
        1,
    )?
    } else {
        Vec::new()
    };
    let names = [
        "heap_blks_read",
        "heap_blks_hit",
        "idx_blks_read",
        "idx_blks_hit",
        "toast_blks_read",
        "toast_blks_hit",
    ];
    for (k, vals) in r {
        s.put_object("table", &k[0], &names, &vals);
    }
    Ok(())
}

/// pg_buffercache, where installed.
fn buffercache(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    // pg_buffercache, where installed: what the cache holds now.
    let has = c
        .client
        .query_opt(
            "SELECT 1 FROM pg_extension WHERE extname = 'pg_buffercache'",
            &[],
        )
        .map_err(|e| qerr("pg_extension", e))?
        .is_some();
    if has {
        let r = c.rows("pg_buffercache", "SELECT '', count(*) FILTER (WHERE relfilenode IS NOT NULL)::float8, count(*) FILTER (WHERE isdirty)::float8, count(*)::float8 FROM pg_buffercache", 1)?;
        if let Some((_, vals)) = r.first() {
            for (n, v) in [
                "buffercache.used_buffers",
                "buffercache.dirty_buffers",
                "buffercache.total_buffers",
            ]
            .iter()
            .zip(vals)
            {
                s.gauges.insert(n.to_string(), *v);
            }
            // The same in bytes, for charts beside the kernel's view of the server's memory.
            let block: f64 = s
                .settings
                .get("block_size")
                .and_then(|b| b.parse().ok())
                .unwrap_or(8192.0);
            if let [used, dirty, total] = vals[..] {
                for (n, v) in [
                    ("buffercache.clean_bytes", (used - dirty).max(0.0)),
                    ("buffercache.dirty_bytes", dirty),
                    ("buffercache.unused_bytes", (total - used).max(0.0)),
                ] {
                    s.gauges.insert(n.to_string(), v * block);
                }
            }
        }
    } else {
        s.unavailable.push(
            "pg_buffercache (CREATE EXTENSION pg_buffercache to see what the cache holds)".into(),
        );
    }
    Ok(())
}

/// Wait event types a session can report (PostgreSQL 15–18), as gauge names: every one is
/// present in a snapshot (0 when nobody waits on it), so a recording's line starts at 0.
pub const WAIT_TYPES: &[(&str, &str)] = &[
    ("LWLock", "waiting_lwlock"),
    ("Lock", "waiting_lock"),
    ("BufferPin", "waiting_bufferpin"),
    ("IO", "waiting_io"),
    ("IPC", "waiting_ipc"),
    ("Client", "waiting_client"),
    ("Timeout", "waiting_timeout"),
    ("Activity", "waiting_activity"),
    ("Extension", "waiting_extension"),
    ("InjectionPoint", "waiting_injectionpoint"),
];

/// Values of the moment from pg_stat_activity and pg_stat_replication: client sessions by
/// state, the active ones by what they wait on (plumb's own session left out), whether a
/// checkpoint is running (the checkpointer waits on anything but its idle `CheckpointerMain`),
/// and the standbys' replay lag.
pub(crate) fn activity_gauges(c: &mut Conn, s: &mut Snapshot) -> Result<()> {
    let rows = c.rows(
        "pg_stat_activity",
        "SELECT coalesce(state, ''), coalesce(wait_event_type, ''), count(*)::float8 FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1, 2",
        2,
    )?;
    let mut g: BTreeMap<&str, f64> = BTreeMap::new();
    for n in [
        "sessions_active",
        "sessions_idle",
        "sessions_idle_in_transaction",
    ] {
        g.insert(n, 0.0);
    }
    for (_, n) in WAIT_TYPES {
        g.insert(n, 0.0);
    }
    for (k, v) in rows {
        let n = v.first().copied().unwrap_or(0.0);
        let state = match k[0].as_str() {
            "active" => "sessions_active",
            "idle" => "sessions_idle",
            st if st.starts_with("idle in transaction") => "sessions_idle_in_transaction",
            _ => continue,
        };
        *g.entry(state).or_default() += n;
        if state == "sessions_active" {
            if let Some((_, w)) = WAIT_TYPES.iter().find(|(t, _)| *t == k[1]) {
                *g.entry(w).or_default() += n;
            }
        }
    }
    for (n, v) in g {
        s.gauges.insert(format!("activity.{n}"), v);
    }
    let ck = c.rows(
        "pg_stat_activity",
        "SELECT '', count(*) FILTER (WHERE wait_event IS DISTINCT FROM 'CheckpointerMain')::float8, count(*)::float8 FROM pg_stat_activity WHERE backend_type = 'checkpointer'",
        1,
    )?;
    if let Some((_, v)) = ck.first() {
        if v.get(1).copied().unwrap_or(0.0) > 0.0 {
            s.gauges.insert("checkpoint.running".into(), v[0].min(1.0));
        }
    }
    let rep = c.rows(
        "pg_stat_replication",
        "SELECT '', count(*)::float8, coalesce(max(pg_wal_lsn_diff(sent_lsn, replay_lsn)), 0)::float8, coalesce(max(extract(epoch FROM replay_lag)) * 1000, 0)::float8 FROM pg_stat_replication",
        1,
    )?;
    if let Some((_, v)) = rep.first() {
        for (n, x) in ["standbys", "replay_lag_bytes", "replay_lag_ms"]
            .iter()
            .zip(v)
        {
            s.gauges.insert(format!("replication.{n}"), *x);
        }
    }
    Ok(())
}

/// What backends are waiting on now: one backend, or every active client backend but our own.
pub(crate) fn waits_now(c: &mut Conn, pid: Option<u32>) -> Result<Vec<(String, String)>> {
    let rows = match pid {
        Some(p) => c.client.query(
            "SELECT coalesce(wait_event_type, ''), coalesce(wait_event, '') FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
            &[&(p as i32)],
        ),
        None => c.client.query(
            "SELECT coalesce(wait_event_type, ''), coalesce(wait_event, '') FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' AND backend_type = 'client backend'",
            &[],
        ),
    }
    .map_err(|e| qerr("pg_stat_activity", e))?;
    Ok(rows
        .iter()
        .map(|r| {
            let (t, e): (String, String) = (r.get(0), r.get(1));
            if t.is_empty() {
                ("CPU".to_string(), "running".to_string())
            } else {
                (t, e)
            }
        })
        .collect())
}

/// Make the workload session's statistics visible to other sessions now.
pub(crate) fn flush_stats(c: &mut Conn) {
    if c.version_num >= 150000 {
        let _ = c.client.batch_execute("SELECT pg_stat_force_next_flush()");
    }
    // The flush happens when the session goes idle after a transaction.
    let _ = c.client.batch_execute("SELECT 1");
}

pub(crate) fn server_info(c: &mut Conn) -> Result<ServerInfo> {
    let r = c
        .client
        .query_one("SELECT version()", &[])
        .map_err(|e| qerr("version()", e))?;
    let mut settings = BTreeMap::new();
    for name in [
        "shared_buffers",
        "work_mem",
        "maintenance_work_mem",
        "effective_cache_size",
        "max_connections",
        "block_size",
        "track_io_timing",
        "wal_sync_method",
        "synchronous_commit",
        "fsync",
        "full_page_writes",
        "checkpoint_timeout",
        "max_wal_size",
        "data_directory",
    ] {
        if let Ok(row) = c
            .client
            .query_one("SELECT current_setting($1, true)", &[&name])
        {
            let v: Option<String> = row.get(0);
            settings.insert(
                name.to_string(),
                v.unwrap_or_else(|| "(hidden: needs pg_read_all_settings)".into()),
            );
        }
    }
    Ok(ServerInfo {
        engine: "PostgreSQL".into(),
        version: r.get(0),
        settings,
    })
}

/// The read-only observer for PostgreSQL.
pub struct PgObserver {
    conn: Conn,
    local: bool,
    /// Normalized statement texts by queryid, read once each.
    texts: std::collections::HashMap<String, String>,
    /// pg_stat_statements does not track this session (else its role's statements are left
    /// out).
    own_untracked: bool,
    /// pg_stat_statements' view, qualified by its schema, once found.
    statements_view: Option<String>,
}

impl PgObserver {
    pub fn connect(t: &Target) -> Result<PgObserver> {
        let cfg = parse_url(t)?;
        let mut conn = Conn::connect(&cfg, &t.shown(), true)?;
        // plumb's own queries are not the server's workload: pg_stat_statements leaves this
        // session out where the role may say so (a superuser's); otherwise its statements
        // are left out by role ([`statements`]).
        let own_untracked = conn
            .client
            .batch_execute("SET pg_stat_statements.track = 'none'")
            .is_ok();
        Ok(PgObserver {
            conn,
            local: is_local(&cfg),
            texts: Default::default(),
            statements_view: None,
            own_untracked,
        })
    }
}

impl crate::Observer for PgObserver {
    fn kind(&self) -> Kind {
        Kind::Postgres
    }
    fn snapshot(&mut self) -> Result<Snapshot> {
        snapshot(&mut self.conn)
    }
    fn snapshot_for_recording(&mut self) -> Result<Snapshot> {
        snapshot_with(&mut self.conn, false)
    }
    fn info(&mut self) -> Result<ServerInfo> {
        server_info(&mut self.conn)
    }
    fn sample_waits(&mut self, id: Option<u64>) -> Result<Vec<(String, String)>> {
        waits_now(&mut self.conn, id.map(|i| i as u32))
    }
    fn samples_waits(&self) -> bool {
        true
    }
    fn local_server_pid(&self) -> Option<u32> {
        let pid = self.own_pid()?;
        let ppid = plumb_sys::process::stat(&plumb_sys::Root::host(), pid)
            .ok()?
            .ppid;
        Some(ppid)
    }
    fn own_pid(&self) -> Option<u32> {
        local_postgres(self.local, self.conn.backend_pid)
    }
    fn statements(&mut self) -> Result<crate::Statements> {
        statements(
            &mut self.conn,
            &mut self.texts,
            &mut self.statements_view,
            !self.own_untracked,
        )
    }
}

/// pg_stat_statements, where the extension is installed in the database plumb is connected
/// to (and loaded): each queryid's calls, execution time, rows and shared blocks read and hit,
/// summed over users and databases. Texts are read only for queryids not seen before.
pub fn statements(
    c: &mut Conn,
    texts: &mut std::collections::HashMap<String, String>,
    view_cache: &mut Option<String>,
    leave_out_own_role: bool,
) -> Result<crate::Statements> {
    if texts.len() > 20_000 {
        texts.clear();
    }
    use crate::statements::{merge, normalize, Statement};
    // Where the extension is: looked up until found, not at every reading.
    if view_cache.is_none() {
        let schema = c
            .client
            .query_opt(
                "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_stat_statements'",
                &[],
            )
            .map_err(|e| qerr("pg_extension", e))?;
        let Some(schema) = schema.map(|r| r.get::<_, String>(0)) else {
            return Ok(crate::Statements::Unavailable(
                "pg_stat_statements is not installed in this database (CREATE EXTENSION pg_stat_statements, with it in shared_preload_libraries)".into(),
            ));
        };
        *view_cache = Some(format!(
            "\"{}\".pg_stat_statements",
            schema.replace('"', "\"\"")
        ));
    }
    let view = view_cache.clone().unwrap_or_default();
    let numbers = c.rows(
        "pg_stat_statements",
        &format!(
            "SELECT queryid::text, calls::float8, total_exec_time::float8 * 1000, rows::float8, shared_blks_read::float8, shared_blks_hit::float8 FROM {view}(false) WHERE queryid IS NOT NULL{}",
            if leave_out_own_role { " AND userid <> (SELECT oid FROM pg_roles WHERE rolname = current_user)" } else { "" }
        ),
        1,
    );
    let numbers = match numbers {
        Ok(n) => n,
        Err(e @ Error::Gone(_)) => return Err(e),
        // Installed but not loaded, not readable by this login, or dropped since: looked up
        // again next time.
        Err(e) => {
            *view_cache = None;
            return Ok(crate::Statements::Unavailable(e.to_string()));
        }
    };
    let missing: Vec<String> = numbers
        .iter()
        .map(|(k, _)| k[0].clone())
        .filter(|id| !texts.contains_key(id))
        .collect();
    if !missing.is_empty() {
        let rows = c
            .client
            .query(
                &format!(
                    "SELECT queryid::text, query FROM {view}(true) WHERE queryid::text = ANY($1)"
                ),
                &[&missing],
            )
            .map_err(|e| qerr("pg_stat_statements texts", e))?;
        for r in rows {
            let id: String = r.get(0);
            let q: Option<String> = r.get(1);
            texts.insert(id, normalize(q.as_deref().unwrap_or("")));
        }
    }
    let rows = numbers
        .into_iter()
        .map(|(k, v)| Statement {
            text: texts.get(&k[0]).cloned().unwrap_or_default(),
            id: k[0].clone(),
            calls: v[0],
            time_us: v[1],
            rows: v[2],
            blks_read: Some(v[3]),
            blks_hit: Some(v[4]),
        })
        .collect();
    Ok(crate::Statements::Read(merge(rows)))
}

/// A workload session for PostgreSQL.
pub struct PgSession {
    conn: Conn,
    local: bool,
}

impl PgSession {
    pub fn connect(t: &Target) -> Result<PgSession> {
        let cfg = parse_url(t)?;
        let local = is_local(&cfg);
        Ok(PgSession {
            conn: Conn::connect(&cfg, &t.shown(), false)?,
            local,
        })
    }
}

impl crate::Session for PgSession {
    fn execute(&mut self, sql: &str) -> Result<u64> {
        let msgs = self
            .conn
            .client
            .simple_query(sql)
            .map_err(|e| qerr("the workload", e))?;
        Ok(msgs
            .iter()
            .filter(|m| matches!(m, postgres::SimpleQueryMessage::Row(_)))
            .count() as u64)
    }
    fn id(&self) -> u64 {
        self.conn.backend_pid as u64
    }
    fn local_pid(&self) -> Option<u32> {
        local_postgres(self.local, self.conn.backend_pid)
    }
    fn flush(&mut self) {
        flush_stats(&mut self.conn)
    }
    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        let token = self.conn.client.cancel_token();
        Some(Box::new(move || {
            let _ = token.cancel_query(NoTls);
        }))
    }
}

/// The backend's PID when the server is on this host and the PID is a postgres process here.
pub(crate) fn local_postgres(local: bool, pid: u32) -> Option<u32> {
    if !local {
        return None;
    }
    let comm = plumb_sys::process::comm(&plumb_sys::Root::host(), pid)?;
    (comm == "postgres").then_some(pid)
}

/// An error and its causes in one line ("error connecting to server: failed to lookup address").
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}
