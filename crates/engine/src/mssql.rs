//! SQL Server: the DMV queries plumb runs, and the parsers that turn their result sets into a
//! [`Snapshot`].
//!
//! **Not tested against a live server**: no SQL Server can run on plumb's test machines. The
//! queries are written from Microsoft's documentation of each DMV for SQL Server 2016 and later;
//! the parsers are tested on result sets shaped as the documentation describes
//! (tests/fixtures/mssql), and the connection (TDS via tiberius) on a small stand-in server that
//! answers in TDS as the protocol documentation describes (tests/tds.rs): login,
//! result sets with and without rows, server errors, a routing redirect.
//!
//! Every metric set is optional: a set the login may not read, or whose shape differs from the
//! documentation, is listed in [`Snapshot::unavailable`] with the server's own words, and the
//! other sets are still read.

pub use crate::mssql_client::{
    client_main, on_interrupt, use_client_program, MssqlConn, CLIENT_ARG, MEMORY_BOUND,
};
pub use crate::mssql_direct::{parse_url, MAX_RESULT_BYTES, MAX_ROWS};
pub use crate::mssql_result::{Cell, ResultSet};
use crate::{Error, Kind, Result, ServerInfo, Snapshot, Target};
use std::collections::BTreeMap;

/// The metric sets and their queries. `{cpu}` in the scheduler query becomes the
/// total_cpu_usage_ms column where the server has it (probed, as sp_BlitzFirst does).
pub mod queries {
    /// Readable by any login (SERVERPROPERTY and @@VERSION need no permission).
    pub const SERVER: &str =
        "SELECT CAST(SERVERPROPERTY('ProductMajorVersion') AS int) AS major_version, \
CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS product_version, @@VERSION AS version, \
CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition";

    /// Start time, CPUs, memory, and the uptime @@CPU_BUSY is checked against.
    pub const SYS_INFO: &str =
        "SELECT CONVERT(varchar(33), sqlserver_start_time, 126) AS start_time, \
cpu_count, physical_memory_kb, committed_target_kb, \
ms_ticks - sqlserver_start_time_ms_ticks AS uptime_ms FROM sys.dm_os_sys_info";

    pub const WAITS: &str =
        "SELECT wait_type, waiting_tasks_count, wait_time_ms, max_wait_time_ms, \
signal_wait_time_ms FROM sys.dm_os_wait_stats WHERE waiting_tasks_count > 0 OR wait_time_ms > 0";

    pub const WAITING_TASKS: &str = "SELECT wt.session_id, wt.wait_type, wt.wait_duration_ms, \
wt.blocking_session_id FROM sys.dm_os_waiting_tasks AS wt WHERE wt.session_id > 50";

    /// A LEFT JOIN: sys.master_files shows a file only to a login that may see its metadata
    /// (VIEW ANY DEFINITION, CREATE DATABASE or ALTER ANY DATABASE), while the file statistics
    /// need only the server-state permission; a file without a name is kept by its ids.
    pub const FILES: &str =
        "SELECT vfs.database_id, vfs.file_id, DB_NAME(vfs.database_id) AS database_name, \
mf.name AS logical_name, mf.physical_name, mf.type_desc, vfs.num_of_reads, vfs.num_of_bytes_read, \
vfs.io_stall_read_ms, vfs.num_of_writes, vfs.num_of_bytes_written, vfs.io_stall_write_ms, \
vfs.io_stall_queued_read_ms, vfs.io_stall_queued_write_ms, vfs.size_on_disk_bytes \
FROM sys.dm_io_virtual_file_stats(NULL, NULL) AS vfs \
LEFT JOIN sys.master_files AS mf ON mf.database_id = vfs.database_id AND mf.file_id = vfs.file_id";

    pub const LATCHES: &str =
        "SELECT latch_class, waiting_requests_count, wait_time_ms, max_wait_time_ms \
FROM sys.dm_os_latch_stats WHERE waiting_requests_count > 0";

    pub const SPINLOCKS: &str =
        "SELECT name, collisions, spins, spins_per_collision, sleep_time, backoffs \
FROM sys.dm_os_spinlock_stats WHERE collisions > 0";

    pub const HAS_SCHEDULER_CPU: &str = "SELECT COUNT(*) AS n FROM sys.all_columns \
WHERE object_id = OBJECT_ID('sys.dm_os_schedulers') AND name = 'total_cpu_usage_ms'";

    pub const SCHEDULERS: &str = "SELECT scheduler_id, current_tasks_count, runnable_tasks_count, \
work_queue_count, pending_disk_io_count{cpu} FROM sys.dm_os_schedulers WHERE scheduler_id < 1048576 AND status = 'VISIBLE ONLINE'";

    pub const CLERKS: &str =
        "SELECT type, SUM(pages_kb) AS pages_kb FROM sys.dm_os_memory_clerks GROUP BY type";

    pub const PROCESS_MEMORY: &str = "SELECT physical_memory_in_use_kb, locked_page_allocations_kb, \
memory_utilization_percentage, page_fault_count, process_physical_memory_low, process_virtual_memory_low \
FROM sys.dm_os_process_memory";

    pub const PERF: &str =
        "SELECT RTRIM(object_name) AS object_name, RTRIM(counter_name) AS counter_name, \
RTRIM(instance_name) AS instance_name, cntr_value, cntr_type FROM sys.dm_os_performance_counters \
WHERE (object_name LIKE '%Memory Manager%' OR object_name LIKE '%Buffer Manager%' \
OR object_name LIKE '%SQL Statistics%' OR object_name LIKE '%General Statistics%' \
OR object_name LIKE '%Access Methods%' OR object_name LIKE '%Latches%' \
OR object_name LIKE '%Transactions%' \
OR (object_name LIKE '%:Databases%' AND instance_name = '_Total') \
OR (object_name LIKE '%:Locks%' AND instance_name = '_Total') \
OR (object_name LIKE '%Plan Cache%' AND instance_name = '_Total'))";

    pub const TEMPDB: &str = "SELECT SUM(user_object_reserved_page_count) * 8 AS user_objects_kb, \
SUM(internal_object_reserved_page_count) * 8 AS internal_objects_kb, \
SUM(version_store_reserved_page_count) * 8 AS version_store_kb, \
SUM(unallocated_extent_page_count) * 8 AS free_kb FROM tempdb.sys.dm_db_file_space_usage";

    /// @@IO_BUSY as DBAs read it: ticks of @@TIMETICKS microseconds each.
    pub const BUSY: &str = "SELECT @@CPU_BUSY AS cpu_busy, @@IO_BUSY AS io_busy, @@IDLE AS idle, @@TIMETICKS AS timeticks";

    /// The workload session's own waits, its parallel workers' included (they run under its
    /// session_id). `{id}` is the session.
    pub const SESSION_WAITS: &str = "SELECT wait_type, waiting_tasks_count, wait_time_ms, \
max_wait_time_ms, signal_wait_time_ms FROM sys.dm_exec_session_wait_stats WHERE session_id = {id}";

    /// The workload session's CPU and I/O.
    pub const SESSION: &str = "SELECT cpu_time, total_scheduled_time, total_elapsed_time, reads, \
writes, logical_reads, row_count FROM sys.dm_exec_sessions WHERE session_id = {id}";

    /// What is sampled during a run: the run queue (tasks waiting for a CPU) and the memory
    /// grants (workspace memory granted and used, queries waiting for a grant).
    pub const CURVES: &str = "SELECT \
(SELECT SUM(runnable_tasks_count) FROM sys.dm_os_schedulers WHERE scheduler_id < 1048576 AND status = 'VISIBLE ONLINE') AS runnable_tasks, \
(SELECT SUM(current_tasks_count) FROM sys.dm_os_schedulers WHERE scheduler_id < 1048576 AND status = 'VISIBLE ONLINE') AS current_tasks, \
(SELECT COUNT(*) FROM sys.dm_exec_query_memory_grants WHERE grant_time IS NULL) AS grants_waiting, \
(SELECT COALESCE(SUM(granted_memory_kb), 0) FROM sys.dm_exec_query_memory_grants) AS granted_kb, \
(SELECT COALESCE(SUM(used_memory_kb), 0) FROM sys.dm_exec_query_memory_grants) AS grant_used_kb";

    /// Per-statement figures from the plan cache (sys.dm_exec_query_stats, which needs VIEW
    /// SERVER STATE), summed per query_hash (the statement with its literals left out): the
    /// 500 with the most elapsed time (microseconds), the statement's text as cached (with its
    /// literals: plumb normalizes it before keeping it).
    pub const QUERY_STATS: &str = "SELECT TOP (500) CONVERT(varchar(18), qs.query_hash, 1) AS query_hash, \
SUM(qs.execution_count) AS calls, SUM(qs.total_elapsed_time) AS time_us, SUM(qs.total_rows) AS rows_total, \
SUM(qs.total_physical_reads) AS physical_reads, SUM(qs.total_logical_reads) AS logical_reads, \
MIN(LEFT(SUBSTRING(st.text, qs.statement_start_offset / 2 + 1, \
(CASE qs.statement_end_offset WHEN -1 THEN DATALENGTH(st.text) ELSE qs.statement_end_offset END - qs.statement_start_offset) / 2 + 1), 2000)) AS statement_text \
FROM sys.dm_exec_query_stats AS qs CROSS APPLY sys.dm_exec_sql_text(qs.sql_handle) AS st \
GROUP BY qs.query_hash ORDER BY SUM(qs.total_elapsed_time) DESC";
}

/// [`queries::QUERY_STATS`]'s rows as statements: pages read from disk and found in the buffer
/// pool (logical reads less physical), the text normalized.
pub fn parse_query_stats(rs: &ResultSet) -> Result<Vec<crate::statements::Statement>> {
    use crate::statements::{merge, normalize, Statement};
    let c = |n: &str| rs.col(n);
    let (id, calls, time, rows, phys, logical, text) = (
        c("query_hash")?,
        c("calls")?,
        c("time_us")?,
        c("rows_total")?,
        c("physical_reads")?,
        c("logical_reads")?,
        c("statement_text")?,
    );
    let f = |r: &[Cell], i: usize| {
        r.get(i)
            .and_then(Cell::f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let out = rs
        .rows
        .iter()
        .filter_map(|r| {
            let id = r.get(id).map(Cell::text).filter(|t| !t.is_empty())?;
            let read = f(r, phys);
            Some(Statement {
                id,
                calls: f(r, calls).unwrap_or(0.0),
                time_us: f(r, time).unwrap_or(0.0),
                rows: f(r, rows).unwrap_or(0.0),
                blks_read: read,
                blks_hit: f(r, logical).map(|l| (l - read.unwrap_or(0.0)).max(0.0)),
                text: normalize(&r.get(text).map(Cell::text).unwrap_or_default()),
            })
        })
        .collect();
    Ok(merge(out))
}

/// Where each set comes from, for messages.
pub(crate) fn source_of(set: &str) -> &'static str {
    match set {
        "server" => "SERVERPROPERTY",
        "sys_info" => "sys.dm_os_sys_info",
        "waits" => "sys.dm_os_wait_stats",
        "waiting_tasks" => "sys.dm_os_waiting_tasks",
        "files" => "sys.dm_io_virtual_file_stats",
        "latches" => "sys.dm_os_latch_stats",
        "spinlocks" => "sys.dm_os_spinlock_stats",
        "schedulers" => "sys.dm_os_schedulers",
        "clerks" => "sys.dm_os_memory_clerks",
        "process_memory" => "sys.dm_os_process_memory",
        "perf" => "sys.dm_os_performance_counters",
        "tempdb" => "tempdb.sys.dm_db_file_space_usage",
        "busy" => "@@CPU_BUSY, @@IO_BUSY",
        "session_waits" => "sys.dm_exec_session_wait_stats",
        "session" => "sys.dm_exec_sessions",
        "curves" => "sys.dm_os_schedulers, sys.dm_exec_query_memory_grants",
        _ => "",
    }
}

/// The permission that reads the server's performance views on this major version.
pub(crate) fn state_permission(major: u32) -> &'static str {
    if major >= 16 {
        "VIEW SERVER PERFORMANCE STATE (SQL Server 2022 and later; VIEW SERVER STATE includes it)"
    } else {
        "VIEW SERVER STATE"
    }
}

/// The oldest SQL Server plumb's queries are written for: 2016 (13.x).
pub const OLDEST_MAJOR: u32 = 13;

/// Waits that mean nothing for a workload (idle queues, background sleeps): left out of the
/// wait figures by default, the way Paul Randal's and sp_BlitzFirst's lists do. Maintained by
/// hand; `--all` shows them under `wait_ignorable`.
pub const IGNORABLE_WAITS: &[&str] = &[
    "BROKER_EVENTHANDLER",
    "BROKER_RECEIVE_WAITFOR",
    "BROKER_TASK_STOP",
    "BROKER_TO_FLUSH",
    "BROKER_TRANSMITTER",
    "CHECKPOINT_QUEUE",
    "CHKPT",
    "CLR_AUTO_EVENT",
    "CLR_MANUAL_EVENT",
    "CLR_SEMAPHORE",
    "DBMIRROR_DBM_EVENT",
    "DBMIRROR_DBM_MUTEX",
    "DBMIRROR_EVENTS_QUEUE",
    "DBMIRROR_WORKER_QUEUE",
    "DBMIRRORING_CMD",
    "DIRTY_PAGE_POLL",
    "DISPATCHER_QUEUE_SEMAPHORE",
    "EXECSYNC",
    "FSAGENT",
    "FT_IFTS_SCHEDULER_IDLE_WAIT",
    "FT_IFTSHC_MUTEX",
    "FT_IFTSISM_MUTEX",
    "HADR_CLUSAPI_CALL",
    "HADR_FABRIC_CALLBACK",
    "HADR_FILESTREAM_IOMGR_IOCOMPLETION",
    "HADR_LOGCAPTURE_WAIT",
    "HADR_NOTIFICATION_DEQUEUE",
    "HADR_TIMER_TASK",
    "HADR_WORK_QUEUE",
    "KSOURCE_WAKEUP",
    "LAZYWRITER_SLEEP",
    "LOGMGR_QUEUE",
    "MEMORY_ALLOCATION_EXT",
    "ONDEMAND_TASK_QUEUE",
    "PARALLEL_REDO_DRAIN_WORKER",
    "PARALLEL_REDO_LOG_CACHE",
    "PARALLEL_REDO_TRAN_LIST",
    "PARALLEL_REDO_TRAN_TURN",
    "PARALLEL_REDO_WORKER_SYNC",
    "PARALLEL_REDO_WORKER_WAIT_WORK",
    "POPULATE_LOCK_ORDINALS",
    "PREEMPTIVE_HADR_LEASE_MECHANISM",
    "PREEMPTIVE_SP_SERVER_DIAGNOSTICS",
    "PREEMPTIVE_XE_DISPATCHER",
    "PREEMPTIVE_XE_GETTARGETSTATE",
    "PVS_PREALLOCATE",
    "PWAIT_ALL_COMPONENTS_INITIALIZED",
    "PWAIT_DIRECTLOGCONSUMER_GETNEXT",
    "PWAIT_EXTENSIBILITY_CLEANUP_TASK",
    "QDS_PERSIST_TASK_MAIN_LOOP_SLEEP",
    "QDS_ASYNC_QUEUE",
    "QDS_CLEANUP_STALE_QUERIES_TASK_MAIN_LOOP_SLEEP",
    "QDS_SHUTDOWN_QUEUE",
    "REDO_THREAD_PENDING_WORK",
    "REQUEST_FOR_DEADLOCK_SEARCH",
    "RESOURCE_QUEUE",
    "SERVER_IDLE_CHECK",
    "SLEEP_BPOOL_FLUSH",
    "SLEEP_DBSTARTUP",
    "SLEEP_DCOMSTARTUP",
    "SLEEP_MASTERDBREADY",
    "SLEEP_MASTERMDREADY",
    "SLEEP_MASTERUPGRADED",
    "SLEEP_MSDBSTARTUP",
    "SLEEP_SYSTEMTASK",
    "SLEEP_TASK",
    "SLEEP_TEMPDBSTARTUP",
    "SNI_HTTP_ACCEPT",
    "SOS_WORK_DISPATCHER",
    "SP_SERVER_DIAGNOSTICS_SLEEP",
    "SQLTRACE_BUFFER_FLUSH",
    "SQLTRACE_INCREMENTAL_FLUSH_SLEEP",
    "SQLTRACE_WAIT_ENTRIES",
    "UCS_SESSION_REGISTRATION",
    "VDI_CLIENT_OTHER",
    "WAIT_FOR_RESULTS",
    "WAITFOR",
    "WAITFOR_TASKSHUTDOWN",
    "WAIT_XTP_RECOVERY",
    "WAIT_XTP_HOST_WAIT",
    "WAIT_XTP_OFFLINE_CKPT_NEW_LOG",
    "WAIT_XTP_CKPT_CLOSE",
    "XE_DISPATCHER_JOIN",
    "XE_DISPATCHER_WAIT",
    "XE_TIMER_EVENT",
    "XE_LIVE_TARGET_TVF",
];

pub fn is_ignorable(wait: &str) -> bool {
    IGNORABLE_WAITS.contains(&wait)
}

pub(crate) fn parse_waits(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    put_waits(rs, s, "wait", "wait_ignorable")
}

/// The workload session's waits (sys.dm_exec_session_wait_stats), its parallel workers'
/// included, beside the server-wide ones.
pub(crate) fn parse_session_waits(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    put_waits(rs, s, "session_wait", "session_wait_ignorable")
}

fn put_waits(rs: &ResultSet, s: &mut Snapshot, set: &str, ignorable: &str) -> Result<()> {
    for (w, v) in rs.pick(
        "wait_type",
        &["waiting_tasks_count", "wait_time_ms", "signal_wait_time_ms"],
    )? {
        let set = if is_ignorable(&w) { ignorable } else { set };
        // Resource wait = total − signal (the time before the task was signalled).
        s.put_object(
            set,
            &w,
            &["count", "wait_ms", "signal_ms", "resource_ms"],
            &[v[0], v[1], v[2], (v[1] - v[2]).max(0.0)],
        );
    }
    Ok(())
}

/// Tasks waiting now. A task is blocked only by another session: a parallel query's
/// exchange waits (CXPACKET, CXCONSUMER) name the query's own session as the blocker, and
/// blocking_session_id is NULL when nobody blocks and negative when the blocker is unknown
/// (-2 orphaned distributed transaction, -3 deferred recovery, -4 latch owner not known).
pub(crate) fn parse_waiting_tasks(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let rows = rs.pick(
        "wait_type",
        &["wait_duration_ms", "blocking_session_id", "session_id"],
    )?;
    s.gauges
        .insert("waiting_tasks.tasks".into(), rows.len() as f64);
    // NULL reads as 0: not blocked.
    s.gauges.insert(
        "waiting_tasks.blocked".into(),
        rows.iter()
            .filter(|r| r.1[1] > 0.0 && r.1[1] != r.1[2])
            .count() as f64,
    );
    s.gauges.insert(
        "waiting_tasks.longest_ms".into(),
        rows.iter().map(|r| r.1[0]).fold(0.0, f64::max),
    );
    Ok(())
}

/// Per file: `sales/sales_data ROWS (/var/opt/mssql/data/sales.mdf)`; a file whose
/// sys.master_files row the login may not see is `sales/file 3 (name not visible)`, and the
/// snapshot says how many are so.
pub(crate) fn parse_files(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let (db, ln, pn, ty) = (
        rs.col("database_name")?,
        rs.col("logical_name")?,
        rs.col("physical_name")?,
        rs.col("type_desc")?,
    );
    let (db_id, file_id) = (rs.col("database_id")?, rs.col("file_id")?);
    let mut hidden = 0;
    let names = [
        "num_of_reads",
        "num_of_bytes_read",
        "io_stall_read_ms",
        "num_of_writes",
        "num_of_bytes_written",
        "io_stall_write_ms",
        "io_stall_queued_read_ms",
        "io_stall_queued_write_ms",
    ];
    let idx: Vec<usize> = names.iter().map(|n| rs.col(n)).collect::<Result<_>>()?;
    let size = rs.col("size_on_disk_bytes")?;
    for r in &rs.rows {
        let t = |i: usize| r.get(i).map(Cell::text).unwrap_or_default();
        let database = match t(db) {
            d if d.is_empty() => format!("database {}", t(db_id)),
            d => d,
        };
        let key = if t(ln).is_empty() {
            hidden += 1;
            format!("{database}/file {} (name not visible)", t(file_id))
        } else {
            format!("{database}/{} {} ({})", t(ln), t(ty), t(pn))
        };
        let v: Vec<f64> = idx
            .iter()
            .map(|i| r.get(*i).and_then(Cell::f64).unwrap_or(0.0))
            .collect();
        s.put_object(
            "file",
            &key,
            &[
                "reads",
                "read_bytes",
                "read_stall_ms",
                "writes",
                "write_bytes",
                "write_stall_ms",
                "queued_read_stall_ms",
                "queued_write_stall_ms",
            ],
            &v,
        );
        if let Some(b) = r.get(size).and_then(Cell::f64) {
            *s.gauges
                .entry("file.size_on_disk_bytes".into())
                .or_insert(0.0) += b;
        }
    }
    if hidden > 0 {
        s.unavailable.push(format!(
            "SQL Server file names and paths for {hidden} of {} files (sys.master_files shows a file only to a login with VIEW ANY DEFINITION, CREATE DATABASE or ALTER ANY DATABASE; their figures are listed by database and file id)",
            rs.rows.len()
        ));
    }
    Ok(())
}

pub(crate) fn parse_latches(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    for (c, v) in rs.pick("latch_class", &["waiting_requests_count", "wait_time_ms"])? {
        s.put_object("latch", &c, &["count", "wait_ms"], &v);
    }
    Ok(())
}

pub(crate) fn parse_spinlocks(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    for (n, v) in rs.pick("name", &["collisions", "spins", "sleep_time", "backoffs"])? {
        s.put_object(
            "spinlock",
            &n,
            &["collisions", "spins", "sleep_time_ms", "backoffs"],
            &v,
        );
    }
    Ok(())
}

pub(crate) fn parse_schedulers(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let rows = rs.pick(
        "scheduler_id",
        &[
            "current_tasks_count",
            "runnable_tasks_count",
            "work_queue_count",
            "pending_disk_io_count",
        ],
    )?;
    for (i, n) in [
        "current_tasks",
        "runnable_tasks",
        "work_queue",
        "pending_disk_io",
    ]
    .iter()
    .enumerate()
    {
        s.gauges
            .insert(format!("scheduler.{n}"), rows.iter().map(|r| r.1[i]).sum());
    }
    s.gauges
        .insert("scheduler.schedulers".into(), rows.len() as f64);
    if rs.col("total_cpu_usage_ms").is_ok() {
        let cpu: f64 = rs
            .pick("scheduler_id", &["total_cpu_usage_ms"])?
            .iter()
            .map(|r| r.1[0])
            .sum();
        s.counters.insert("scheduler.cpu_ms".into(), cpu);
    }
    Ok(())
}

pub(crate) fn parse_clerks(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let mut rows = rs.pick("type", &["pages_kb"])?;
    rows.sort_by(|a, b| b.1[0].total_cmp(&a.1[0]));
    let total: f64 = rows.iter().map(|r| r.1[0] * 1024.0).sum();
    s.gauges.insert("memory.clerks_total_bytes".into(), total);
    // The ten largest clerks; the rest are small change.
    for (t, v) in rows.iter().take(10) {
        s.gauges.insert(
            format!("memory.{}_bytes", t.to_ascii_lowercase()),
            v[0] * 1024.0,
        );
    }
    Ok(())
}

pub(crate) fn parse_process_memory(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    if let Some(v) = rs.first_f64("physical_memory_in_use_kb")? {
        s.gauges
            .insert("memory.process_in_use_bytes".into(), v * 1024.0);
    }
    if let Some(v) = rs.first_f64("locked_page_allocations_kb")? {
        s.gauges
            .insert("memory.locked_pages_bytes".into(), v * 1024.0);
    }
    if let Some(v) = rs.first_f64("memory_utilization_percentage")? {
        s.gauges.insert("memory.utilization_pct".into(), v);
    }
    if let Some(v) = rs.first_f64("page_fault_count")? {
        s.counters.insert("memory.page_faults".into(), v);
    }
    if rs.first_f64("process_physical_memory_low")? == Some(1.0) {
        s.gauges.insert("memory.physical_memory_low".into(), 1.0);
    }
    Ok(())
}

/// `cntr_type` values of sys.dm_os_performance_counters (the Windows perf counter types).
pub mod cntr_type {
    /// PERF_COUNTER_LARGE_RAWCOUNT: a value of the moment.
    pub const RAW: i64 = 65792;
    /// PERF_COUNTER_RAWCOUNT (32-bit): a value of the moment.
    pub const RAW_32: i64 = 65536;
    /// PERF_COUNTER_BULK_COUNT: cumulative; per second = delta / seconds.
    pub const PER_SECOND: i64 = 272696576;
    /// PERF_COUNTER_COUNTER (32-bit): cumulative; per second = delta / seconds.
    pub const PER_SECOND_32: i64 = 272696320;
    /// PERF_LARGE_RAW_FRACTION: value / base of the moment (a ratio).
    pub const RATIO: i64 = 537003264;
    /// PERF_AVERAGE_BULK: cumulative; average = delta value / delta base.
    pub const AVERAGE: i64 = 1073874176;
    /// PERF_LARGE_RAW_BASE: the base of a ratio or an average.
    pub const BASE: i64 = 1073939712;
}

/// A counter name as a metric name: `Page life expectancy` → `page_life_expectancy`;
/// `(KB)` becomes a `_bytes` suffix (the value is multiplied), `(ms)` a `_ms` suffix.
pub(crate) fn slug(name: &str) -> (String, f64) {
    let mut n = name.trim().to_ascii_lowercase();
    let mut scale = 1.0;
    let mut suffix = "";
    if let Some(x) = n.strip_suffix("(kb)") {
        n = x.to_string();
        scale = 1024.0;
        suffix = "_bytes";
    } else if let Some(x) = n.strip_suffix("(ms)") {
        n = x.to_string();
        suffix = "_ms";
    }
    n = n.replace("/sec", "");
    let mut out = String::new();
    for c in n.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    (format!("{}{suffix}", out.trim_matches('_')), scale)
}

/// What a ratio or average counter and its base have in common: "Buffer cache hit ratio" and
/// "Buffer cache hit ratio base", "Worktables From Cache Ratio" and "Worktables From Cache
/// Base", "Average Wait Time (ms)" and "Average Wait Time Base", "Avg. Length of Batched
/// Writes" and "Avg. Length of Batched Writes BS" all meet on the words before the suffix.
pub fn base_key(name: &str) -> String {
    let mut l = name.trim().to_ascii_lowercase().replace("(ms)", "");
    for suffix in [" base", " bs", " ratio"] {
        l = l.trim().to_string();
        if let Some(x) = l.strip_suffix(suffix) {
            l = x.to_string();
        }
    }
    l.trim().to_string()
}

/// Performance counters with the arithmetic their cntr_type asks for (as SQLWATCH does):
/// raw values are gauges; per-second counters are cumulative counters (analysis divides the
/// delta by the seconds); ratios are value/base now; averages keep value and base as
/// cumulative counters so the delta's average is Δvalue/Δbase.
pub fn parse_perf(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let (o, c, i, v, t) = (
        rs.col("object_name")?,
        rs.col("counter_name")?,
        rs.col("instance_name")?,
        rs.col("cntr_value")?,
        rs.col("cntr_type")?,
    );
    // Bases by (object, instance, partner name).
    let mut bases: BTreeMap<(String, String, String), f64> = BTreeMap::new();
    for r in &rs.rows {
        if r.get(t).and_then(Cell::f64) == Some(cntr_type::BASE as f64) {
            let cell = |k: usize| r.get(k).map(Cell::text).unwrap_or_default();
            let key = (obj_short(&cell(o)), cell(i), base_key(&cell(c)));
            bases.insert(key, r.get(v).and_then(Cell::f64).unwrap_or(0.0));
        }
    }
    let mut unpaired = Vec::new();
    for r in &rs.rows {
        let cell = |k: usize| r.get(k).map(Cell::text).unwrap_or_default();
        let (obj, name, inst) = (obj_short(&cell(o)), cell(c), cell(i));
        let Some(value) = r.get(v).and_then(Cell::f64) else {
            continue;
        };
        let Some(ty) = r.get(t).and_then(Cell::f64).map(|x| x as i64) else {
            continue;
        };
        let (slug, scale) = slug(&name);
        let obj_slug = slug_plain(&obj);
        let inst_part = if inst.is_empty() || inst == "_Total" {
            String::new()
        } else {
            format!(".{}", slug_plain(&inst))
        };
        let key = format!("perf.{obj_slug}.{slug}{inst_part}");
        match ty {
            cntr_type::RAW | cntr_type::RAW_32 => {
                s.gauges.insert(key, value * scale);
            }
            cntr_type::PER_SECOND | cntr_type::PER_SECOND_32 => {
                s.counters.insert(key, value * scale);
            }
            cntr_type::RATIO | cntr_type::AVERAGE => {
                let Some(b) = bases.get(&(obj.clone(), inst.clone(), base_key(&name))) else {
                    unpaired.push(format!("{obj}: {name}"));
                    continue;
                };
                if ty == cntr_type::AVERAGE {
                    let object = format!("{obj_slug}.{slug}{inst_part}");
                    s.put_object("perf_avg", &object, &["total", "count"], &[value, *b]);
                } else if *b > 0.0 {
                    s.gauges.insert(format!("{key}_pct"), 100.0 * value / b);
                }
            }
            _ => {}
        }
    }
    unpaired.sort();
    unpaired.dedup();
    if !unpaired.is_empty() {
        s.unavailable.push(format!(
            "SQL Server counters without a base counter plumb could pair them with: {}",
            unpaired.join("; ")
        ));
    }
    Ok(())
}

/// `SQLServer:Buffer Manager` or `MSSQL$INST:Buffer Manager` → `Buffer Manager`.
fn obj_short(o: &str) -> String {
    o.rsplit_once(':')
        .map(|(_, r)| r)
        .unwrap_or(o)
        .trim()
        .to_string()
}

fn slug_plain(s: &str) -> String {
    slug(s).0
}

pub(crate) fn parse_tempdb(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    for (col, name) in [
        ("user_objects_kb", "user_objects_bytes"),
        ("internal_objects_kb", "internal_objects_bytes"),
        ("version_store_kb", "version_store_bytes"),
        ("free_kb", "free_bytes"),
    ] {
        if let Some(v) = rs.first_f64(col)? {
            s.gauges.insert(format!("tempdb.{name}"), v * 1024.0);
        }
    }
    Ok(())
}

/// @@CPU_BUSY and @@IO_BUSY in milliseconds (ticks × @@TIMETICKS µs; a tick is 31,250 µs
/// unless the server says otherwise). Their documentation: after about 49 days of CPU time
/// summed over all CPUs they are no longer accurate (not a clean wrap), which on a large
/// server is days of uptime: [`check_busy`] drops them then.
pub fn parse_busy(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    let tick_us = rs.first_f64("timeticks")?.unwrap_or(31_250.0);
    for (col, name) in [
        ("cpu_busy", "cpu_ms"),
        ("io_busy", "io_ms"),
        ("idle", "idle_ms"),
    ] {
        if let Some(v) = rs.first_f64(col)? {
            s.counters
                .insert(format!("busy.{name}"), v * tick_us / 1000.0);
        }
    }
    Ok(())
}

/// CPU time summed over all CPUs after which @@CPU_BUSY and @@IO_BUSY are no longer
/// accurate: "approximately 49 days" in their documentation, 2^32 ms.
pub const BUSY_ACCURATE_MS: f64 = 4_294_967_296.0;

/// @@CPU_BUSY against what the server could have used (uptime × CPUs, from
/// sys.dm_os_sys_info): past 49 days of CPU time, or busier than possible, the busy counters
/// are dropped and the snapshot says why (CPU time then comes from the schedulers'
/// total_cpu_usage_ms).
pub(crate) fn check_busy(s: &mut Snapshot) {
    let setting = |k: &str| s.settings.get(k).and_then(|v| v.parse::<f64>().ok());
    let (Some(cpu_ms), Some(up_ms), Some(cpus)) = (
        s.counters.get("busy.cpu_ms").copied(),
        setting("uptime_ms"),
        setting("cpu_count"),
    ) else {
        return;
    };
    let capacity = up_ms * cpus;
    let why = if capacity > BUSY_ACCURATE_MS {
        format!(
            "{:.0} days of CPU time over all CPUs since the server started, past the about 49 days after which they are no longer accurate",
            capacity / 86_400_000.0
        )
    } else if cpu_ms > capacity * 1.01 + 1000.0 {
        format!(
            "@@CPU_BUSY says {:.0} s of CPU, more than uptime × CPUs ({:.0} s)",
            cpu_ms / 1000.0,
            capacity / 1000.0
        )
    } else {
        return;
    };
    s.counters.retain(|k, _| !k.starts_with("busy."));
    s.unavailable.push(format!(
        "SQL Server @@CPU_BUSY and @@IO_BUSY: {why}; CPU time is the schedulers' total_cpu_usage_ms"
    ));
}

/// The server row: version (SERVERPROPERTY, readable by any login).
pub(crate) fn parse_server(rs: &ResultSet, s: &mut Snapshot) -> Result<u32> {
    let major = rs.first_f64("major_version")?.unwrap_or(0.0) as u32;
    s.version = rs.first_text("product_version")?.unwrap_or_default();
    Ok(major)
}

/// sys.dm_os_sys_info: start time, CPUs, memory target and uptime.
pub(crate) fn parse_sys_info(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    s.server_start = rs.first_text("start_time")?.unwrap_or_default();
    for k in ["uptime_ms", "cpu_count"] {
        if let Some(v) = rs.first_f64(k)? {
            s.settings.insert(k.into(), v.to_string());
        }
    }
    if let Some(kb) = rs.first_f64("committed_target_kb")? {
        s.gauges.insert("memory.target_bytes".into(), kb * 1024.0);
    }
    if let Some(kb) = rs.first_f64("physical_memory_kb")? {
        s.settings
            .insert("physical_memory_bytes".into(), format!("{}", kb * 1024.0));
    }
    Ok(())
}

/// sys.dm_exec_sessions for the workload's session: its CPU and I/O so far.
pub(crate) fn parse_session(rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    for (col, name) in [
        ("cpu_time", "cpu_ms"),
        ("total_scheduled_time", "scheduled_ms"),
        ("total_elapsed_time", "elapsed_ms"),
        ("reads", "reads"),
        ("writes", "writes"),
        ("logical_reads", "logical_reads"),
        ("row_count", "rows"),
    ] {
        if let Some(v) = rs.first_f64(col)? {
            s.counters.insert(format!("session.{name}"), v);
        }
    }
    Ok(())
}

/// One sample of the curves read during a run: the run queue and memory grants.
pub(crate) fn parse_curves(rs: &ResultSet) -> Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for (col, name, scale) in [
        ("runnable_tasks", "runnable_tasks", 1.0),
        ("current_tasks", "current_tasks", 1.0),
        ("grants_waiting", "grants_waiting", 1.0),
        ("granted_kb", "granted_workspace_bytes", 1024.0),
        ("grant_used_kb", "used_workspace_bytes", 1024.0),
    ] {
        if let Some(v) = rs.first_f64(col)? {
            out.push((name.to_string(), v * scale));
        }
    }
    Ok(out)
}

/// Every metric set, by name, in the order they are read.
pub const SETS: &[&str] = &[
    "server",
    "sys_info",
    "waits",
    "waiting_tasks",
    "files",
    "latches",
    "spinlocks",
    "schedulers",
    "clerks",
    "process_memory",
    "perf",
    "tempdb",
    "busy",
];

/// Sets read only when the observer knows the workload's session (`plumb delta`).
pub const SESSION_SETS: &[&str] = &["session_waits", "session"];

fn parse_set(name: &str, rs: &ResultSet, s: &mut Snapshot) -> Result<()> {
    match name {
        "server" => parse_server(rs, s).map(|_| ()),
        "sys_info" => parse_sys_info(rs, s),
        "waits" => parse_waits(rs, s),
        "waiting_tasks" => parse_waiting_tasks(rs, s),
        "files" => parse_files(rs, s),
        "latches" => parse_latches(rs, s),
        "spinlocks" => parse_spinlocks(rs, s),
        "schedulers" => parse_schedulers(rs, s),
        "clerks" => parse_clerks(rs, s),
        "process_memory" => parse_process_memory(rs, s),
        "perf" => parse_perf(rs, s),
        "tempdb" => parse_tempdb(rs, s),
        "busy" => parse_busy(rs, s),
        "session_waits" => parse_session_waits(rs, s),
        "session" => parse_session(rs, s),
        _ => Ok(()),
    }
}

/// Build a snapshot from result sets by set name (live, or recorded). Every set is optional:
/// one that is missing, or whose shape differs from the documentation (a column missing), is
/// listed as unavailable with the reason, and the others are read.
pub fn snapshot_from(sets: &BTreeMap<String, ResultSet>) -> Snapshot {
    snapshot_with(sets, &BTreeMap::new())
}

/// As [`snapshot_from`], with the server's error for each set that could not be read.
pub fn snapshot_with(
    sets: &BTreeMap<String, ResultSet>,
    failed: &BTreeMap<String, String>,
) -> Snapshot {
    let mut s = Snapshot {
        engine: "sqlserver".into(),
        ..Default::default()
    };
    let major = sets
        .get("server")
        .and_then(|rs| rs.first_f64("major_version").ok().flatten())
        .unwrap_or(0.0) as u32;
    for name in SETS.iter().chain(SESSION_SETS) {
        let source = source_of(name);
        let Some(rs) = sets.get(*name) else {
            if let Some(err) = failed.get(*name) {
                s.unavailable.push(unreadable(name, err, major));
            } else if !SESSION_SETS.contains(name) {
                s.unavailable
                    .push(format!("SQL Server {name} ({source}): not read"));
            }
            continue;
        };
        // Parsed apart and kept only whole: a set that fails halfway leaves nothing behind.
        let mut part = Snapshot::default();
        match parse_set(name, rs, &mut part) {
            Ok(()) => merge(&mut s, part),
            Err(e) => s.unavailable.push(format!(
                "SQL Server {name} ({source}): the result differs from the documented shape: {}",
                message_of(&e)
            )),
        }
    }
    check_busy(&mut s);
    s
}

fn message_of(e: &Error) -> String {
    match e {
        Error::Query { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// A set the server refused, in its own words, with the permission that reads it when the
/// refusal is about permissions.
fn unreadable(name: &str, err: &str, major: u32) -> String {
    let source = source_of(name);
    let hint = if err.to_ascii_lowercase().contains("permission") {
        let grant = match name {
            "files" => format!(
                "{} (and VIEW ANY DEFINITION for file names)",
                state_permission(major)
            ),
            _ => state_permission(major).to_string(),
        };
        format!("; the login needs {grant}")
    } else {
        String::new()
    };
    format!("SQL Server {name} ({source}): {err}{hint}")
}

fn merge(into: &mut Snapshot, part: Snapshot) {
    if !part.version.is_empty() {
        into.version = part.version;
    }
    if !part.server_start.is_empty() {
        into.server_start = part.server_start;
    }
    into.resets.extend(part.resets);
    into.counters.extend(part.counters);
    into.gauges.extend(part.gauges);
    for (set, objects) in part.objects {
        into.objects.entry(set).or_default().extend(objects);
    }
    into.settings.extend(part.settings);
    into.unavailable.extend(part.unavailable);
}

/// The query for a set (with the scheduler CPU column or not, for the workload's session).
pub fn query_for(set: &str, scheduler_cpu: bool, session: Option<u64>) -> String {
    let id = session.unwrap_or(0).to_string();
    match set {
        "server" => queries::SERVER.into(),
        "sys_info" => queries::SYS_INFO.into(),
        "waits" => queries::WAITS.into(),
        "waiting_tasks" => queries::WAITING_TASKS.into(),
        "files" => queries::FILES.into(),
        "latches" => queries::LATCHES.into(),
        "spinlocks" => queries::SPINLOCKS.into(),
        "schedulers" => queries::SCHEDULERS.replace(
            "{cpu}",
            if scheduler_cpu {
                ", total_cpu_usage_ms"
            } else {
                ""
            },
        ),
        "clerks" => queries::CLERKS.into(),
        "process_memory" => queries::PROCESS_MEMORY.into(),
        "perf" => queries::PERF.into(),
        "tempdb" => queries::TEMPDB.into(),
        "busy" => queries::BUSY.into(),
        "session_waits" => queries::SESSION_WAITS.replace("{id}", &id),
        "session" => queries::SESSION.replace("{id}", &id),
        "curves" => queries::CURVES.into(),
        _ => String::new(),
    }
}

pub struct MssqlObserver {
    conn: MssqlConn,
    scheduler_cpu: bool,
    /// The workload's session, whose own waits and CPU each snapshot also reads.
    session: Option<u64>,
    /// Why the curves are not sampled (the first refusal), once they failed.
    curves_failed: Option<String>,
}

/// Whether plumb's queries are written for this server: SQL Server 2016 (13.x) or later.
/// Azure SQL Database and Managed Instance (EngineEdition 5 and 8) report 12 as their major
/// version and are always current.
pub fn check_version(server: &ResultSet) -> Result<u32> {
    let major = server.first_f64("major_version")?.unwrap_or(0.0) as u32;
    let edition = server
        .col("engine_edition")
        .ok()
        .and_then(|_| server.first_f64("engine_edition").ok().flatten())
        .unwrap_or(0.0) as u32;
    if matches!(edition, 5 | 8) {
        return Ok(major.max(OLDEST_MAJOR));
    }
    if major < OLDEST_MAJOR {
        let version = server.first_text("product_version")?.unwrap_or_default();
        return Err(Error::Query {
            what: "SQL Server version".into(),
            message: format!(
                "the server is version {version}; plumb reads SQL Server 2016 (13.x) and later"
            ),
            source: None,
        });
    }
    Ok(major)
}

impl MssqlObserver {
    pub fn connect(t: &Target) -> Result<MssqlObserver> {
        let mut conn = MssqlConn::connect(t)?;
        // Observe without blocking anyone: read uncommitted, short lock timeout.
        conn.execute("SET TRANSACTION ISOLATION LEVEL READ UNCOMMITTED; SET LOCK_TIMEOUT 5000")?;
        // SERVERPROPERTY needs no permission: the version is always known.
        let server = conn.query("server", queries::SERVER)?;
        check_version(&server)?;
        let scheduler_cpu = conn
            .query("scheduler probe", queries::HAS_SCHEDULER_CPU)
            .ok()
            .and_then(|r| r.first_f64("n").ok().flatten())
            .is_some_and(|n| n > 0.0);
        Ok(MssqlObserver {
            conn,
            scheduler_cpu,
            session: None,
            curves_failed: None,
        })
    }
}

impl crate::Observer for MssqlObserver {
    fn kind(&self) -> Kind {
        Kind::Sqlserver
    }

    fn snapshot(&mut self) -> Result<Snapshot> {
        let mut sets = BTreeMap::new();
        let mut failed = BTreeMap::new();
        let session_sets = if self.session.is_some() {
            SESSION_SETS
        } else {
            &[]
        };
        for set in SETS.iter().chain(session_sets) {
            let q = query_for(set, self.scheduler_cpu, self.session);
            match self.conn.query(set, &q) {
                Ok(rs) => {
                    sets.insert(set.to_string(), rs);
                }
                Err(e @ (Error::Gone(_) | Error::Refused(_))) => return Err(e),
                // Refused (a permission, a column): listed as unavailable in the server's words.
                Err(e) => {
                    failed.insert(set.to_string(), message_of(&e));
                }
            }
        }
        let mut s = snapshot_with(&sets, &failed);
        s.unavailable.extend(self.curves_failed.clone());
        Ok(s)
    }

    fn set_workload_session(&mut self, id: Option<u64>) {
        self.session = id;
    }

    fn samples_gauges(&self) -> bool {
        true
    }

    fn sample_gauges(&mut self) -> Result<Vec<(String, f64)>> {
        if self.curves_failed.is_some() {
            return Ok(Vec::new());
        }
        match self.conn.query("curves", queries::CURVES) {
            Ok(rs) => parse_curves(&rs),
            Err(e @ (Error::Gone(_) | Error::Refused(_))) => Err(e),
            Err(e) => {
                self.curves_failed = Some(unreadable("curves", &message_of(&e), 0));
                Ok(Vec::new())
            }
        }
    }

    fn info(&mut self) -> Result<ServerInfo> {
        let rs = self.conn.query("server", queries::SERVER)?;
        let mut settings = BTreeMap::new();
        if let Ok(cfg) = self.conn.query(
            "sys.configurations",
            "SELECT name, CAST(value_in_use AS nvarchar(64)) AS value FROM sys.configurations WHERE name IN ('max server memory (MB)', 'min server memory (MB)', 'max degree of parallelism', 'cost threshold for parallelism')",
        ) {
            for r in &cfg.rows {
                settings.insert(r[0].text(), r.get(1).map(Cell::text).unwrap_or_default());
            }
        }
        Ok(ServerInfo {
            engine: "SQL Server".into(),
            version: rs
                .first_text("version")?
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            settings,
        })
    }

    fn own_pid(&self) -> Option<u32> {
        None
    }

    fn statements(&mut self) -> Result<crate::Statements> {
        match self.conn.query("query stats", queries::QUERY_STATS) {
            Ok(rs) => Ok(crate::Statements::Read(parse_query_stats(&rs)?)),
            Err(e @ (Error::Gone(_) | Error::Refused(_))) => Err(e),
            Err(e) => Ok(crate::Statements::Unavailable(message_of(&e))),
        }
    }
}

pub struct MssqlSession {
    conn: MssqlConn,
}

impl MssqlSession {
    pub fn connect(t: &Target) -> Result<MssqlSession> {
        Ok(MssqlSession {
            conn: MssqlConn::connect(t)?,
        })
    }
}

impl crate::Session for MssqlSession {
    fn execute(&mut self, sql: &str) -> Result<u64> {
        self.conn.execute(sql)
    }
    fn id(&self) -> u64 {
        self.conn.session_id
    }
    fn empty_cache(&mut self) -> Option<std::result::Result<String, String>> {
        Some(
            self.conn
                .execute("CHECKPOINT; DBCC DROPCLEANBUFFERS WITH NO_INFOMSGS;")
                .map(|_| {
                    "CHECKPOINT; DBCC DROPCLEANBUFFERS (the buffer pool's clean pages)".to_string()
                })
                .map_err(|e| format!("DBCC DROPCLEANBUFFERS was refused ({e}); it needs sysadmin")),
        )
    }
}

// ---- Availability Groups: the live view ----

/// Each database of each replica of the server's Availability Groups (documented columns of
/// sys.dm_hadr_database_replica_states; secondary_lag_seconds is 2016's). Queues in KB, rates
/// in KB/s as SQL Server gives them. Needs VIEW SERVER STATE (2022: VIEW SERVER PERFORMANCE
/// STATE).
pub const HADR_REPLICAS: &str = "SELECT DB_NAME(drs.database_id) AS database_name, \
ar.replica_server_name, ar.availability_mode_desc, drs.is_local, drs.is_primary_replica, \
drs.synchronization_state_desc, drs.synchronization_health_desc, drs.log_send_queue_size, \
drs.log_send_rate, drs.redo_queue_size, drs.redo_rate, drs.secondary_lag_seconds \
FROM sys.dm_hadr_database_replica_states AS drs \
JOIN sys.availability_replicas AS ar ON ar.replica_id = drs.replica_id";

/// One database on one replica, as the primary sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HadrReplica {
    pub database: String,
    pub server: String,
    /// SYNCHRONOUS_COMMIT, ASYNCHRONOUS_COMMIT, CONFIGURATION_ONLY.
    pub mode: String,
    pub is_local: bool,
    pub is_primary: bool,
    /// SYNCHRONIZED, SYNCHRONIZING, NOT SYNCHRONIZING, …
    pub state: String,
    pub health: String,
    /// Log not yet sent to this secondary, and the rate it is sent at.
    pub send_queue_bytes: Option<f64>,
    pub send_rate_bytes_per_s: Option<f64>,
    /// Log received and not yet redone, and the redo rate.
    pub redo_queue_bytes: Option<f64>,
    pub redo_rate_bytes_per_s: Option<f64>,
    pub secondary_lag_s: Option<f64>,
}

/// The replica rows of [`HADR_REPLICAS`]; a column missing is an error naming it.
pub(crate) fn parse_hadr(rs: &ResultSet) -> Result<Vec<HadrReplica>> {
    let c = |n: &str| rs.col(n);
    let (db, srv, mode, local, primary, state, health) = (
        c("database_name")?,
        c("replica_server_name")?,
        c("availability_mode_desc")?,
        c("is_local")?,
        c("is_primary_replica")?,
        c("synchronization_state_desc")?,
        c("synchronization_health_desc")?,
    );
    let (sq, sr, rq, rr, lag) = (
        c("log_send_queue_size")?,
        c("log_send_rate")?,
        c("redo_queue_size")?,
        c("redo_rate")?,
        c("secondary_lag_seconds")?,
    );
    Ok(rs
        .rows
        .iter()
        .map(|r| {
            let t = |i: usize| r.get(i).map(Cell::text).unwrap_or_default();
            let f = |i: usize| r.get(i).and_then(Cell::f64);
            let kb = |i: usize| f(i).map(|v| v * 1024.0);
            HadrReplica {
                database: t(db),
                server: t(srv),
                mode: t(mode),
                is_local: f(local) == Some(1.0),
                is_primary: f(primary) == Some(1.0),
                state: t(state),
                health: t(health),
                send_queue_bytes: kb(sq),
                send_rate_bytes_per_s: kb(sr),
                redo_queue_bytes: kb(rq),
                redo_rate_bytes_per_s: kb(rr),
                secondary_lag_s: f(lag),
            }
        })
        .collect())
}

/// A read-only session on an Availability Group's primary for its live view.
pub struct HadrWatcher {
    conn: MssqlConn,
    major: u32,
}

impl HadrWatcher {
    pub fn connect(t: &Target) -> Result<HadrWatcher> {
        let mut conn = MssqlConn::connect(t)?;
        let server = conn.query("server", queries::SERVER)?;
        let major = check_version(&server)?;
        let mut w = HadrWatcher { conn, major };
        if w.read()?.is_empty() {
            return Err(Error::Url(format!(
                "--primary {}: this server has no Availability Group databases (sys.dm_hadr_database_replica_states is empty)",
                t.shown()
            )));
        }
        Ok(w)
    }

    pub fn read(&mut self) -> Result<Vec<HadrReplica>> {
        match self
            .conn
            .query("sys.dm_hadr_database_replica_states", HADR_REPLICAS)
        {
            Ok(rs) => parse_hadr(&rs),
            Err(Error::Query { what, message, .. })
                if message.to_ascii_lowercase().contains("permission") =>
            {
                Err(Error::Query {
                    what,
                    message: format!(
                        "{message}; the login needs {}",
                        state_permission(self.major)
                    ),
                    source: None,
                })
            }
            Err(e) => Err(e),
        }
    }
}
