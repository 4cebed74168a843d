//! MariaDB (and MySQL): global status counters, the InnoDB buffer pool, and performance_schema's
//! wait and file summaries. performance_schema is off by default in MariaDB: without it the
//! wait, latch and file sets are listed as unavailable, with how to turn it on.

use crate::{redact, Error, Kind, Result, ServerInfo, Snapshot, Target};
use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// performance_schema timers count picoseconds.
const PS_PER_MS: f64 = 1e9;

/// Global status counters read as cumulative counters: (status name, plumb name).
const STATUS: &[(&str, &str)] = &[
    (
        "Innodb_buffer_pool_read_requests",
        "innodb.buffer_pool_read_requests",
    ),
    ("Innodb_buffer_pool_reads", "innodb.buffer_pool_reads"),
    (
        "Innodb_buffer_pool_read_ahead",
        "innodb.buffer_pool_read_ahead",
    ),
    (
        "Innodb_buffer_pool_write_requests",
        "innodb.buffer_pool_write_requests",
    ),
    (
        "Innodb_buffer_pool_pages_flushed",
        "innodb.buffer_pool_pages_flushed",
    ),
    (
        "Innodb_buffer_pool_wait_free",
        "innodb.buffer_pool_wait_free",
    ),
    ("Innodb_data_reads", "innodb.data_reads"),
    ("Innodb_data_read", "innodb.data_read_bytes"),
    ("Innodb_data_writes", "innodb.data_writes"),
    ("Innodb_data_written", "innodb.data_written_bytes"),
    ("Innodb_data_fsyncs", "innodb.data_fsyncs"),
    ("Innodb_os_log_written", "innodb.log_written_bytes"),
    ("Innodb_log_writes", "innodb.log_writes"),
    ("Innodb_log_waits", "innodb.log_waits"),
    ("Innodb_rows_read", "innodb.rows_read"),
    ("Innodb_rows_inserted", "innodb.rows_inserted"),
    ("Innodb_rows_updated", "innodb.rows_updated"),
    ("Innodb_rows_deleted", "innodb.rows_deleted"),
    ("Innodb_row_lock_waits", "innodb.row_lock_waits"),
    ("Innodb_row_lock_time", "innodb.row_lock_time_ms"),
    ("Created_tmp_tables", "status.created_tmp_tables"),
    ("Created_tmp_disk_tables", "status.created_tmp_disk_tables"),
    ("Created_tmp_files", "status.created_tmp_files"),
    ("Sort_merge_passes", "status.sort_merge_passes"),
    ("Sort_rows", "status.sort_rows"),
    ("Sort_scan", "status.sort_scan"),
    ("Handler_read_rnd_next", "status.handler_read_rnd_next"),
    ("Handler_read_next", "status.handler_read_next"),
    ("Handler_read_key", "status.handler_read_key"),
    ("Select_scan", "status.select_scan"),
    ("Select_full_join", "status.select_full_join"),
    ("Questions", "status.questions"),
    ("Com_select", "status.com_select"),
    ("Bytes_sent", "status.sent_bytes"),
    ("Bytes_received", "status.received_bytes"),
    ("Slow_queries", "status.slow_queries"),
];

/// Values of the moment.
const STATUS_GAUGES: &[(&str, &str)] = &[
    (
        "Innodb_buffer_pool_pages_total",
        "innodb.buffer_pool_pages_total",
    ),
    (
        "Innodb_buffer_pool_pages_data",
        "innodb.buffer_pool_pages_data",
    ),
    (
        "Innodb_buffer_pool_pages_dirty",
        "innodb.buffer_pool_pages_dirty",
    ),
    (
        "Innodb_buffer_pool_pages_free",
        "innodb.buffer_pool_pages_free",
    ),
    (
        "Innodb_buffer_pool_bytes_data",
        "innodb.buffer_pool_data_bytes",
    ),
    (
        "Innodb_buffer_pool_bytes_dirty",
        "innodb.buffer_pool_dirty_bytes",
    ),
    ("Threads_running", "status.threads_running"),
    ("Threads_connected", "status.threads_connected"),
    (
        "Innodb_row_lock_current_waits",
        "innodb.row_lock_current_waits",
    ),
];

pub const WAITS: &str = "SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT FROM performance_schema.events_waits_summary_global_by_event_name WHERE COUNT_STAR > 0";
pub const FILES: &str = "SELECT FILE_NAME, COUNT_READ, SUM_NUMBER_OF_BYTES_READ, SUM_TIMER_READ, COUNT_WRITE, SUM_NUMBER_OF_BYTES_WRITE, SUM_TIMER_WRITE, COUNT_MISC, SUM_TIMER_MISC FROM performance_schema.file_summary_by_instance WHERE COUNT_STAR > 0";

fn num(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::UInt(u) => *u as f64,
        Value::Float(f) => *f as f64,
        Value::Double(d) => *d,
        Value::Bytes(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0.0),
        _ => 0.0,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::NULL => String::new(),
        other => format!("{}", num(other)),
    }
}

/// Parse `mysql://` or `mariadb://USER:PASS@HOST:PORT/DB` (`?socket=PATH` for a Unix socket).
/// The password: the target's own (from a file), else the URL's, else MYSQL_PWD.
pub fn parse_url(t: &Target) -> Result<Opts> {
    let url = match t.url.split_once("://") {
        Some((_, rest)) => format!("mysql://{rest}"),
        None => t.url.clone(),
    };
    let opts = Opts::from_url(&url)
        .map_err(|e| Error::Url(format!("{}: not a MariaDB/MySQL URL: {e}", redact(&t.url))))?;
    let mut b = OptsBuilder::from_opts(opts.clone())
        .tcp_connect_timeout(Some(Duration::from_secs(10)))
        .read_timeout(Some(Duration::from_secs(60)))
        .write_timeout(Some(Duration::from_secs(60)));
    if let Some(p) = &t.password {
        b = b.pass(Some(p.clone()));
    } else if opts.get_pass().is_none() {
        if let Ok(p) = std::env::var("MYSQL_PWD") {
            b = b.pass(Some(p));
        }
    }
    Ok(Opts::from(b))
}

fn is_local(o: &Opts) -> bool {
    o.get_socket().is_some() || crate::is_local_host(&o.get_ip_or_hostname())
}

pub(crate) fn merr(what: &str, e: mysql::Error) -> Error {
    match e {
        mysql::Error::IoError(_)
        | mysql::Error::DriverError(mysql::DriverError::ConnectTimeout) => {
            Error::Gone(format!("{what}: {e}"))
        }
        mysql::Error::MySqlError(ref m)
            if m.code == 2006 || m.code == 2013 || m.code == 1927 || m.code == 1053 =>
        {
            Error::Gone(format!("{what}: {e}"))
        }
        other => Error::Query {
            what: what.to_string(),
            message: other.to_string(),
            source: Some(Box::new(other)),
        },
    }
}

fn connect(t: &Target) -> Result<(Conn, Opts)> {
    let opts = parse_url(t)?;
    let c = login(&opts, &t.shown())?;
    Ok((c, opts))
}

/// How long a login may take, connection and handshake: a server that accepts and then says
/// nothing is named after this, not after the 60 s read timeout of a running statement.
pub const LOGIN_WAIT: Duration = Duration::from_secs(15);

/// Connect and log in within [`LOGIN_WAIT`]; errors name `label` and say what happened.
pub(crate) fn login(opts: &Opts, label: &str) -> Result<Conn> {
    let (tx, rx) = std::sync::mpsc::channel();
    let o = opts.clone();
    std::thread::Builder::new()
        .name("plumb-mysql-login".into())
        .spawn(move || {
            let _ = tx.send(Conn::new(o));
        })
        .map_err(|e| Error::Setup(format!("{label}: {e}")))?;
    match rx.recv_timeout(LOGIN_WAIT) {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(Error::Connect {
            url: label.to_string(),
            message: connect_words(&e, opts),
            source: Some(Box::new(e)),
        }),
        Err(_) => Err(Error::Connect {
            url: label.to_string(),
            message: format!(
                "timed out logging in: no answer within {} s (the connection and the handshake; the server accepted and said nothing, or never accepted)",
                LOGIN_WAIT.as_secs()
            ),
            source: None,
        }),
    }
}

/// A failed MySQL/MariaDB login in words: a server that accepted the connection and then said
/// nothing is named as that, with how long plumb waited and at which step (the driver says
/// `CodecError { … os error 11 }`); other errors with what to check.
pub(crate) fn connect_words(e: &mysql::Error, opts: &Opts) -> String {
    use mysql_common::proto::codec::error::PacketCodecError;
    let io = match e {
        mysql::Error::IoError(io) | mysql::Error::CodecError(PacketCodecError::Io(io)) => {
            Some(io.kind())
        }
        _ => None,
    };
    if matches!(
        io,
        Some(std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    ) {
        let waited = opts.get_read_timeout().map(|d| d.as_secs()).unwrap_or(0);
        return format!(
            "timed out logging in: the server accepted the connection and then sent nothing for {waited} s (plumb's read timeout), at the handshake"
        );
    }
    crate::with_hint(Kind::Mariadb, e.to_string())
}

pub struct MariaObserver {
    conn: Conn,
    server_pid: Option<u32>,
    /// `@@performance_schema`, read once (it changes only with a restart, after which the
    /// sampler opens a new session).
    performance_schema: Option<bool>,
}

impl MariaObserver {
    pub fn connect(t: &Target) -> Result<MariaObserver> {
        let (mut conn, opts) = connect(t)?;
        // plumb's own queries are not the server's workload: performance_schema stops
        // instrumenting this session where the login may say so.
        let _ = conn.query_drop(
            "UPDATE performance_schema.threads SET INSTRUMENTED = 'NO' WHERE PROCESSLIST_ID = CONNECTION_ID()",
        );
        // Read-only, and a statement limit (MariaDB's max_statement_time; MySQL has another).
        conn.query_drop("SET SESSION TRANSACTION READ ONLY")
            .map_err(|e| merr("session setup", e))?;
        let _ = conn.query_drop("SET SESSION max_statement_time = 30");
        // On this host, the pid file names the server's process.
        let server_pid = if is_local(&opts) {
            conn.query_first::<String, _>("SELECT @@pid_file")
                .ok()
                .flatten()
                .and_then(|pf| std::fs::read_to_string(pf).ok())
                .and_then(|p| p.trim().parse::<u32>().ok())
                .filter(|pid| {
                    plumb_sys::process::comm(&plumb_sys::Root::host(), *pid)
                        .is_some_and(|c| matches!(c.as_str(), "mariadbd" | "mysqld"))
                })
        } else {
            None
        };
        Ok(MariaObserver {
            conn,
            server_pid,
            performance_schema: None,
        })
    }

    /// At most [`crate::MAX_ROWS`] rows are kept: a server that sends more (without
    /// end) is refused, never held in memory.
    fn rows(&mut self, what: &str, sql: &str) -> Result<Vec<Vec<Value>>> {
        let mut result = self.conn.query_iter(sql).map_err(|e| merr(what, e))?;
        let mut out = Vec::new();
        while let Some(set) = result.iter() {
            for r in set {
                if out.len() >= crate::MAX_ROWS {
                    return Err(Error::Refused(format!(
                        "{what}: the server sent more than {} rows; plumb reads at most that many",
                        crate::MAX_ROWS
                    )));
                }
                out.push(r.map_err(|e| merr(what, e))?.unwrap());
            }
        }
        Ok(out)
    }
}

/// Turn the status rows and performance_schema rows into a snapshot (separate from the
/// connection so tests can feed it rows).
pub fn snapshot_from(
    status: &BTreeMap<String, f64>,
    waits: Option<&[Vec<Value>]>,
    files: Option<&[Vec<Value>]>,
    version: &str,
    now_unix_s: f64,
) -> Snapshot {
    let mut s = Snapshot {
        engine: "mariadb".into(),
        version: version.to_string(),
        ..Default::default()
    };
    let get = |k: &str| status.get(&k.to_ascii_lowercase()).copied();
    for (k, n) in STATUS {
        if let Some(v) = get(k) {
            s.counters.insert(n.to_string(), v);
        }
    }
    for (k, n) in STATUS_GAUGES {
        if let Some(v) = get(k) {
            s.gauges.insert(n.to_string(), v);
        }
    }
    // The start time from Uptime, in whole seconds (±1 s: analysis allows for it).
    if let Some(up) = get("Uptime") {
        s.server_start = format!("{:.0}", now_unix_s - up);
    }
    match waits {
        Some(rows) => {
            for r in rows {
                let (name, count, ps) = (text(&r[0]), num(&r[1]), num(&r[2]));
                // Mutexes, rwlocks and sx-locks are MariaDB's latches. Condition
                // variables are threads asleep until signalled (timers, the thread
                // cache, idle background threads): benign like idle, shown with --all.
                let set = if name.starts_with("wait/synch/cond/") {
                    "wait_ignorable"
                } else if name.starts_with("wait/synch/") {
                    "latch"
                } else if name == "idle" {
                    // Sessions waiting for the client's next statement.
                    "wait_ignorable"
                } else {
                    "wait"
                };
                let short = name.trim_start_matches("wait/");
                s.put_object(set, short, &["count", "wait_ms"], &[count, ps / PS_PER_MS]);
            }
        }
        None => s.unavailable.push("waits and latches (performance_schema is OFF: set performance_schema=ON in my.cnf and restart)".into()),
    }
    match files {
        Some(rows) => {
            for r in rows {
                let v: Vec<f64> = r[1..].iter().map(num).collect();
                s.put_object(
                    "file",
                    &text(&r[0]),
                    &[
                        "reads",
                        "read_bytes",
                        "read_stall_ms",
                        "writes",
                        "write_bytes",
                        "write_stall_ms",
                        "misc",
                        "misc_ms",
                    ],
                    &[
                        v[0],
                        v[1],
                        v[2] / PS_PER_MS,
                        v[3],
                        v[4],
                        v[5] / PS_PER_MS,
                        v[6],
                        v[7] / PS_PER_MS,
                    ],
                );
            }
        }
        None => s
            .unavailable
            .push("file I/O per file (performance_schema is OFF)".into()),
    }
    s
}

impl MariaObserver {
    /// A snapshot; without `per_object`, the waits by event and I/O by file (a delta's, not
    /// a recording's) are left out.
    fn snapshot_with(&mut self, per_object: bool) -> Result<Snapshot> {
        let version: Option<String> = self
            .conn
            .query_first("SELECT VERSION()")
            .map_err(|e| merr("VERSION()", e))?;
        let rows = self.rows("SHOW GLOBAL STATUS", "SHOW GLOBAL STATUS")?;
        let status: BTreeMap<String, f64> = rows
            .iter()
            .filter(|r| r.len() >= 2)
            .map(|r| (text(&r[0]).to_ascii_lowercase(), num(&r[1])))
            .collect();
        let ps: Option<i64> = if per_object {
            self.conn
                .query_first("SELECT @@performance_schema")
                .map_err(|e| merr("@@performance_schema", e))?
        } else {
            None
        };
        let (waits, files) = if ps == Some(1) {
            (
                Some(self.rows("events_waits_summary_global_by_event_name", WAITS)?),
                Some(self.rows("file_summary_by_instance", FILES)?),
            )
        } else {
            (None, None)
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let mut s = snapshot_from(
            &status,
            waits.as_deref(),
            files.as_deref(),
            &version.unwrap_or_default(),
            now,
        );
        for (k, v) in self.settings()? {
            s.settings.insert(k, v);
        }
        Ok(s)
    }
}

impl crate::Observer for MariaObserver {
    fn kind(&self) -> Kind {
        Kind::Mariadb
    }

    fn snapshot(&mut self) -> Result<Snapshot> {
        self.snapshot_with(true)
    }

    fn snapshot_for_recording(&mut self) -> Result<Snapshot> {
        self.snapshot_with(false)
    }

    fn info(&mut self) -> Result<ServerInfo> {
        let version: Option<String> = self
            .conn
            .query_first("SELECT CONCAT(@@version, ' ', @@version_comment)")
            .map_err(|e| merr("version", e))?;
        Ok(ServerInfo {
            engine: "MariaDB".into(),
            version: format!("MariaDB {}", version.unwrap_or_default()),
            settings: self.settings()?,
        })
    }

    fn local_server_pid(&self) -> Option<u32> {
        self.server_pid
    }

    fn statements(&mut self) -> Result<crate::Statements> {
        let on = match self.performance_schema {
            Some(on) => on,
            None => {
                let on = self
                    .conn
                    .query_first::<i64, _>("SELECT @@performance_schema")
                    .map_err(|e| merr("@@performance_schema", e))?
                    == Some(1);
                self.performance_schema = Some(on);
                on
            }
        };
        if !on {
            return Ok(crate::Statements::Unavailable(
                "performance_schema is off (performance_schema=ON in the server's configuration, then a restart)".into(),
            ));
        }
        match self.rows("statement digests", STATEMENT_DIGESTS) {
            Ok(rows) => Ok(crate::Statements::Read(statements_from(&rows))),
            Err(e @ Error::Gone(_)) => Err(e),
            Err(e) => Ok(crate::Statements::Unavailable(e.to_string())),
        }
    }
}

/// performance_schema's statement digests (already normalized by the server: `?` for values),
/// one row per digest and schema.
pub const STATEMENT_DIGESTS: &str = "SELECT DIGEST, COUNT_STAR, SUM_TIMER_WAIT, SUM_ROWS_SENT + SUM_ROWS_AFFECTED, DIGEST_TEXT FROM performance_schema.events_statements_summary_by_digest WHERE DIGEST IS NOT NULL";

/// Statement digest rows as statements (timer picoseconds to microseconds), one per digest.
pub(crate) fn statements_from(rows: &[Vec<Value>]) -> Vec<crate::statements::Statement> {
    use crate::statements::{merge, normalize, Statement};
    let out = rows
        .iter()
        .filter(|r| r.len() >= 5)
        .map(|r| Statement {
            id: text(&r[0]),
            calls: num(&r[1]),
            time_us: num(&r[2]) / 1e6,
            rows: num(&r[3]),
            blks_read: None,
            blks_hit: None,
            text: normalize(&text(&r[4])),
        })
        .filter(|s| !s.id.is_empty())
        .collect();
    merge(out)
}

impl MariaObserver {
    fn settings(&mut self) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        let rows = self.rows(
            "server variables",
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN ('INNODB_BUFFER_POOL_SIZE','INNODB_PAGE_SIZE','TMP_TABLE_SIZE','MAX_HEAP_TABLE_SIZE','SORT_BUFFER_SIZE','INNODB_FLUSH_LOG_AT_TRX_COMMIT','INNODB_FLUSH_METHOD','PERFORMANCE_SCHEMA','DATADIR')",
        )?;
        for r in rows {
            out.insert(text(&r[0]).to_ascii_lowercase(), text(&r[1]));
        }
        Ok(out)
    }
}

pub struct MariaSession {
    conn: Conn,
    opts: Opts,
    local: bool,
}

impl MariaSession {
    pub fn connect(t: &Target) -> Result<MariaSession> {
        let (conn, opts) = connect(t)?;
        Ok(MariaSession {
            local: is_local(&opts),
            conn,
            opts,
        })
    }
}

impl MariaSession {
    /// The server's global variables of these names (lower case; those it lacks left out).
    pub fn variables(&mut self, names: &[&str]) -> Result<BTreeMap<String, String>> {
        let list: Vec<String> = names
            .iter()
            .filter(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .map(|n| format!("'{}'", n.to_ascii_uppercase()))
            .collect();
        let rows: Vec<(String, String)> = self
            .conn
            .query(format!(
                "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES WHERE VARIABLE_NAME IN ({})",
                list.join(",")
            ))
            .map_err(|e| merr("server variables", e))?;
        Ok(rows
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect())
    }

    /// The server's global status counters of these names (lower case; those it lacks left
    /// out).
    pub fn status(&mut self, names: &[&str]) -> Result<BTreeMap<String, f64>> {
        let rows: Vec<mysql::Row> = self
            .conn
            .query("SHOW GLOBAL STATUS")
            .map_err(|e| merr("SHOW GLOBAL STATUS", e))?;
        Ok(rows
            .into_iter()
            .map(|r| r.unwrap())
            .filter(|r| r.len() >= 2)
            .map(|r| (text(&r[0]).to_ascii_lowercase(), num(&r[1])))
            .filter(|(k, _)| names.iter().any(|n| n.eq_ignore_ascii_case(k)))
            .collect())
    }
}

impl crate::Session for MariaSession {
    fn execute(&mut self, sql: &str) -> Result<u64> {
        let mut n = 0u64;
        let mut res = self
            .conn
            .query_iter(sql)
            .map_err(|e| merr("the workload", e))?;
        while let Some(set) = res.iter() {
            for row in set {
                row.map_err(|e| merr("the workload", e))?;
                n += 1;
            }
        }
        Ok(n)
    }
    fn id(&self) -> u64 {
        self.conn.connection_id() as u64
    }
    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        let (opts, id) = (self.opts.clone(), self.conn.connection_id());
        Some(Box::new(move || {
            if let Ok(mut c) = Conn::new(opts.clone()) {
                let _ = c.query_drop(format!("KILL QUERY {id}"));
            }
        }))
    }
    fn local_pid(&self) -> Option<u32> {
        // Sessions are threads of one process: no per-session process to read.
        let _ = self.local;
        None
    }
}

/// Semi-synchronous replication as a MariaDB (or MySQL) primary sees it, from its status
/// variables (`Rpl_semi_sync_master_*`) and settings (`rpl_semi_sync_master_*`): whether
/// commits wait for a replica's acknowledgement now, how many replicas acknowledge, the
/// commits waiting, and the counters of acknowledged and unacknowledged commits and their wait.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SemiSync {
    /// rpl_semi_sync_master_enabled: semi-sync is configured.
    pub enabled: bool,
    /// Rpl_semi_sync_master_status: commits wait for an acknowledgement now (it switches off
    /// after a commit waited rpl_semi_sync_master_timeout without one).
    pub active: bool,
    /// Replicas connected as semi-synchronous.
    pub clients: u64,
    /// Sessions waiting for an acknowledgement now.
    pub waiting: u64,
    /// Commits acknowledged by a replica, and those that were not (timed out, or semi-sync off).
    pub yes_tx: u64,
    pub no_tx: u64,
    /// Time commits waited for acknowledgements (µs), and how many waits.
    pub tx_wait_us: u64,
    pub tx_waits: u64,
    pub timeout_ms: Option<u64>,
    /// AFTER_SYNC (the binlog synced, then the wait, then the engine commit) or AFTER_COMMIT.
    pub wait_point: Option<String>,
    /// The binary log's position (file sequence × 2^32 + offset), for its rate.
    pub binlog_position: Option<u64>,
}

/// The binlog file's sequence number and offset as one growing number.
fn binlog_position(file: &str, pos: u64) -> Option<u64> {
    let seq: u64 = file.rsplit('.').next()?.parse().ok()?;
    Some((seq << 32) | (pos & 0xffff_ffff))
}

/// The status and variable rows (name, value) as a [`SemiSync`]; None when the server has no
/// semi-sync at all (neither variables nor status).
pub(crate) fn semisync_from(
    status: &BTreeMap<String, String>,
    variables: &BTreeMap<String, String>,
    binlog: Option<(String, u64)>,
) -> Option<SemiSync> {
    if !variables.contains_key("rpl_semi_sync_master_enabled")
        && !status.contains_key("rpl_semi_sync_master_status")
    {
        return None;
    }
    let on = |v: Option<&String>| v.is_some_and(|v| v.eq_ignore_ascii_case("ON") || v == "1");
    let n = |k: &str| {
        status
            .get(k)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v.max(0.0) as u64)
            .unwrap_or(0)
    };
    Some(SemiSync {
        enabled: on(variables.get("rpl_semi_sync_master_enabled")),
        active: on(status.get("rpl_semi_sync_master_status")),
        clients: n("rpl_semi_sync_master_clients"),
        waiting: n("rpl_semi_sync_master_wait_sessions"),
        yes_tx: n("rpl_semi_sync_master_yes_tx"),
        no_tx: n("rpl_semi_sync_master_no_tx"),
        tx_wait_us: n("rpl_semi_sync_master_tx_wait_time"),
        tx_waits: n("rpl_semi_sync_master_tx_waits"),
        timeout_ms: variables
            .get("rpl_semi_sync_master_timeout")
            .and_then(|v| v.parse().ok()),
        wait_point: variables.get("rpl_semi_sync_master_wait_point").cloned(),
        binlog_position: binlog.and_then(|(f, p)| binlog_position(&f, p)),
    })
}

/// A read-only session on a MariaDB primary for watching its semi-synchronous replication.
pub struct SemiSyncWatcher {
    conn: Conn,
    label: String,
}

impl SemiSyncWatcher {
    /// Connect and check the server replicates semi-synchronously (or is configured to).
    pub fn connect(t: &Target) -> Result<SemiSyncWatcher> {
        let obs = MariaObserver::connect(t)?;
        let mut w = SemiSyncWatcher {
            conn: obs.conn,
            label: t.shown(),
        };
        match w.read_opt()? {
            None => Err(Error::Url(format!(
                "--primary {}: this server has no semi-synchronous replication (no rpl_semi_sync_master_* variables; MariaDB has it built in from 10.3, MySQL needs its plugin)",
                w.label
            ))),
            Some(s) if !s.enabled => Err(Error::Url(format!(
                "--primary {}: semi-synchronous replication is off here (rpl_semi_sync_master_enabled = OFF): its commits wait for no replica, so there is nothing to watch",
                w.label
            ))),
            Some(_) => Ok(w),
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// The server's own connection thread is not a process: nothing to leave out.
    pub fn read(&mut self) -> Result<SemiSync> {
        self.read_opt()?
            .ok_or_else(|| Error::Gone(format!("{}: semi-sync status vanished", self.label)))
    }

    fn read_opt(&mut self) -> Result<Option<SemiSync>> {
        let pairs = |rows: Vec<(String, String)>| -> BTreeMap<String, String> {
            rows.into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect()
        };
        let status = pairs(
            self.conn
                .query("SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master_%'")
                .map_err(|e| merr("Rpl_semi_sync_master status", e))?,
        );
        let variables = pairs(
            self.conn
                .query("SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_master_%'")
                .map_err(|e| merr("rpl_semi_sync_master variables", e))?,
        );
        // SHOW MASTER STATUS needs a privilege (REPLICATION CLIENT / BINLOG MONITOR): the
        // binlog's rate is left out without it.
        let binlog: Option<(String, u64)> = self
            .conn
            .query_first::<mysql::Row, _>("SHOW MASTER STATUS")
            .ok()
            .flatten()
            .and_then(|r| {
                let v = r.unwrap();
                Some((text(v.first()?), num(v.get(1)?) as u64))
            });
        Ok(semisync_from(&status, &variables, binlog))
    }
}
