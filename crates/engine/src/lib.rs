//! Database readers behind one interface, and plumb's private PostgreSQL instance.
//!
//! A reader connects from a URL (`postgres://`, `mysql://`/`mariadb://`, `mssql://`), opens a
//! read-only observer session with connect and statement timeouts, and reads the metric sets the
//! server offers into one engine-neutral [`Snapshot`]: cumulative counters, point-in-time gauges
//! and per-object tables (per file, per wait type, per latch class). Analysis turns two snapshots
//! into deltas. Passwords come from the URL, the environment or a password file and are never
//! printed: [`redact`] masks them in anything shown.

use serde::Serialize;
use std::collections::BTreeMap;

pub mod instance;
pub mod mariadb;
pub mod mssql;
mod mssql_client;
mod mssql_direct;
mod mssql_result;
pub mod mssql_xe;
pub mod oltp;
pub mod pg;
pub mod private;
pub mod private_maria;
pub mod repl;
pub mod secret;
pub mod statements;
pub mod views;

pub use secret::{read_password_file, redact};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Setup(String),
    /// `message` is the driver's error in words (its causes joined); the driver's error itself is
    /// kept as the source, for callers that look at it.
    #[error("{url}: {message}")]
    Connect {
        url: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("{what}: {message}")]
    Query {
        what: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("the database went away: {0}")]
    Gone(String),
    /// The server sent what plumb will not hold or parse (a value or a result beyond every
    /// bound, a message the driver could not read); the connection is closed.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Url(String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// The most rows plumb keeps of one result a server sends (`plumb fs`'s views, the observers'
/// reads): more is a server that will not stop, never held in memory.
pub const MAX_ROWS: usize = 100_000;

static INTERRUPT: std::sync::OnceLock<fn() -> bool> = std::sync::OnceLock::new();

/// `stop()` says whether plumb was asked to stop (Ctrl-C, SIGTERM, SIGHUP): every wait of the
/// engine's on a server or a child process asks it, and ends when it says so.
pub fn on_interrupt(stop: fn() -> bool) {
    let _ = INTERRUPT.set(stop);
}

/// Whether plumb was asked to stop.
pub fn interrupted() -> bool {
    INTERRUPT.get().is_some_and(|f| f())
}

/// A connection error's message with what to check, for the errors whose words alone do not
/// say it ("Connection refused" names neither the server nor the port).
pub(crate) fn with_hint(kind: Kind, message: String) -> String {
    let m = message.to_ascii_lowercase();
    let (name, port, socket) = match kind {
        Kind::Postgres => (
            "PostgreSQL",
            "5432",
            Some("/var/run/postgresql (?host=DIR names another)"),
        ),
        Kind::Mariadb => (
            "MariaDB",
            "3306",
            Some("/run/mysqld/mysqld.sock (?socket=PATH names another)"),
        ),
        Kind::Sqlserver => ("SQL Server", "1433", None),
    };
    let hint = if m.contains("connection refused") {
        format!(
            "Nothing listens there: is the server running, on that host and port? {name}'s default port is {port}; `ss -ltnp` lists what listens here"
        )
    } else if m.contains("no such file or directory") {
        match socket {
            Some(s) => format!(
                "No server socket there: is the server running, and is its socket where the URL says? Debian's {name} puts it in {s}"
            ),
            None => return message,
        }
    } else if m.contains("timed out") || m.contains("no route to host") {
        format!("No answer: is the host reachable, and its port ({name}'s default is {port}) open in the firewall?")
    } else if m.contains("password authentication failed")
        || m.contains("access denied")
        || m.contains("login failed")
    {
        "The server refused the login: check the user in the URL and the password (--password-file, PGPASSWORD, MYSQL_PWD, MSSQL_PASSWORD)".into()
    } else if m.contains("permission denied") && socket.is_some() {
        "plumb may not open the server's socket: run as a user the socket's directory lets in"
            .into()
    } else {
        return message;
    };
    format!("{}. {hint}", message.trim_end_matches('.'))
}

/// Which engine a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Postgres,
    Mariadb,
    Sqlserver,
}

impl Kind {
    pub fn from_url(url: &str) -> Result<Kind> {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("postgres") | Some("postgresql") => Ok(Kind::Postgres),
            Some("mysql") | Some("mariadb") => Ok(Kind::Mariadb),
            Some("mssql") | Some("sqlserver") => Ok(Kind::Sqlserver),
            // libpq's key=value form
            None if url.contains('=') => Ok(Kind::Postgres),
            _ => Err(Error::Url(format!(
                "{}: not a database URL plumb knows (postgres://, mysql://, mariadb://, mssql://)",
                redact(url)
            ))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Postgres => "PostgreSQL",
            Kind::Mariadb => "MariaDB",
            Kind::Sqlserver => "SQL Server",
        }
    }
}

/// Counters of one moment, the same shape for every engine.
///
/// Names are `set.metric` (`db.blks_read`, `wal.bytes`); the unit follows from the suffix
/// (`_bytes`, `_ms`, `_s`, `_pct`; none is a count). Per-object tables are
/// `set` → object → metric: `file` → `base/5/16384` → `reads`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    pub engine: String,
    pub version: String,
    /// Changes when the server restarts: every counter starts again from zero.
    pub server_start: String,
    /// Reset time of each statistics view read: a change means someone reset it in between.
    pub resets: BTreeMap<String, String>,
    /// Cumulative counters (deltas are meaningful).
    pub counters: BTreeMap<String, f64>,
    /// Values of the moment (shown before and after, never subtracted).
    pub gauges: BTreeMap<String, f64>,
    /// Cumulative per-object counters.
    pub objects: BTreeMap<String, BTreeMap<String, BTreeMap<String, f64>>>,
    pub settings: BTreeMap<String, String>,
    /// Sets this server version, configuration or the observer's privileges do not offer.
    pub unavailable: Vec<String>,
}

impl Snapshot {
    pub fn put(&mut self, prefix: &str, names: &[&str], vals: &[f64]) {
        for (n, v) in names.iter().zip(vals) {
            self.counters.insert(format!("{prefix}.{n}"), *v);
        }
    }

    pub fn put_object(&mut self, set: &str, object: &str, names: &[&str], vals: &[f64]) {
        let row = self
            .objects
            .entry(set.to_string())
            .or_default()
            .entry(object.to_string())
            .or_default();
        for (n, v) in names.iter().zip(vals) {
            *row.entry(n.to_string()).or_insert(0.0) += *v;
        }
    }
}

/// A read-only session that reads metric sets.
pub trait Observer: Send {
    fn kind(&self) -> Kind;
    /// Read every metric set the server offers.
    fn snapshot(&mut self) -> Result<Snapshot>;
    /// What a recording reads every second: the server-wide sets, without what only a
    /// before/after delta uses (per-table statistics). The full snapshot unless an engine has
    /// a lighter one.
    fn snapshot_for_recording(&mut self) -> Result<Snapshot> {
        self.snapshot()
    }
    /// Version string and settings a report should show.
    fn info(&mut self) -> Result<ServerInfo>;
    /// What sessions are waiting on right now, for engines whose waits are sampled rather than
    /// cumulative: the session `id`, or every other client session when `None`. Each entry is
    /// (type, event); ("CPU", "running") is an active session not waiting.
    fn sample_waits(&mut self, _id: Option<u64>) -> Result<Vec<(String, String)>> {
        Ok(Vec::new())
    }
    /// Whether waits must be sampled (PostgreSQL) rather than read as cumulative counters.
    fn samples_waits(&self) -> bool {
        false
    }
    /// The session the workload runs in: snapshots then also read that session's own figures
    /// where the engine keeps them (SQL Server's per-session waits and CPU).
    fn set_workload_session(&mut self, _id: Option<u64>) {}
    /// Whether [`Observer::sample_gauges`] has curves to sample during a run.
    fn samples_gauges(&self) -> bool {
        false
    }
    /// Values of the moment sampled during a run (SQL Server's run queue and memory grants),
    /// by name with a unit suffix. A curve the login may not read is left out, not an error.
    fn sample_gauges(&mut self) -> Result<Vec<(String, f64)>> {
        Ok(Vec::new())
    }
    /// The server's main process when it runs on this host (its children are the server).
    fn local_server_pid(&self) -> Option<u32> {
        None
    }
    /// The OS process of this observer session, left out of server totals.
    fn own_pid(&self) -> Option<u32> {
        None
    }
    /// Per-statement cumulative figures (pg_stat_statements, performance_schema's statement
    /// digests, SQL Server's query stats), texts normalized. `Ok(None)`: the server keeps none
    /// here (the extension is not installed, performance_schema is off), with why.
    fn statements(&mut self) -> Result<Statements> {
        Ok(Statements::Unavailable("not read from this engine".into()))
    }
}

/// What [`Observer::statements`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Statements {
    Read(Vec<statements::Statement>),
    /// Why there are none (said once in the recording).
    Unavailable(String),
}

/// A session that runs the workload.
pub trait Session: Send {
    /// Run SQL (one or more statements); rows are read and dropped. Returns rows seen.
    fn execute(&mut self, sql: &str) -> Result<u64>;
    /// The server's id for this session (backend PID, connection id, session_id).
    fn id(&self) -> u64;
    /// The OS process serving this session when the server runs on this host.
    fn local_pid(&self) -> Option<u32> {
        None
    }
    /// Push this session's statistics where other sessions can see them.
    fn flush(&mut self) {}
    /// Empty the engine's data cache from SQL where the engine allows it (SQL Server's DBCC
    /// DROPCLEANBUFFERS). None: the engine has no such statement; Err: it was refused.
    fn empty_cache(&mut self) -> Option<std::result::Result<String, String>> {
        None
    }
    /// Something another thread can call to cancel the running statement (Ctrl-C).
    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        None
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerInfo {
    pub engine: String,
    pub version: String,
    pub settings: BTreeMap<String, String>,
}

/// Where to connect: a URL and, apart from it, a password (from a file or the environment).
#[derive(Clone, Default)]
pub struct Target {
    pub url: String,
    pub password: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Target({})", redact(&self.url))
    }
}

impl Target {
    pub fn new(url: &str) -> Target {
        secret::remember_in(url);
        Target {
            url: url.to_string(),
            password: None,
        }
    }

    pub fn kind(&self) -> Result<Kind> {
        Kind::from_url(&self.url)
    }

    /// The URL as it may be shown.
    pub fn shown(&self) -> String {
        redact(&self.url)
    }
}

/// Which server and database a URL names, for labels (`server="db1:5432"`,
/// `database="app"`): the host (or the socket's directory or path) and port, never the user or
/// the password. The port is the engine's default when the URL gives none.
pub fn server_and_database(url: &str) -> Option<(String, Option<String>)> {
    let kind = Kind::from_url(url).ok()?;
    let rest = url.split_once("://")?.1;
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = main.split_once('/').unwrap_or((main, ""));
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let param = |k: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(key, _)| key.eq_ignore_ascii_case(k))
            .map(|(_, v)| v.to_string())
    };
    let default_port = match kind {
        Kind::Postgres => "5432",
        Kind::Mariadb => "3306",
        Kind::Sqlserver => "1433",
    };
    // [v6]:port, host:port, host.
    let (mut host, mut port) = match hostport.find(']') {
        Some(end) if hostport.starts_with('[') => (
            hostport[..=end].to_string(),
            hostport[end + 1..].strip_prefix(':').map(String::from),
        ),
        _ => match hostport.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (hostport.to_string(), None),
        },
    };
    if host.is_empty() {
        host = param("host")
            .or_else(|| param("socket"))
            .unwrap_or_else(|| "localhost".into());
    }
    if port.is_none() {
        port = param("port");
    }
    let port = port.unwrap_or_else(|| default_port.to_string());
    let db = Some(path.to_string())
        .filter(|p| !p.is_empty())
        .or_else(|| param("database").or_else(|| param("dbname")));
    Some((format!("{host}:{port}"), db))
}

/// Open an observer session.
pub fn observer(t: &Target) -> Result<Box<dyn Observer>> {
    let url = &t.url;
    match Kind::from_url(url)? {
        Kind::Postgres => Ok(Box::new(pg::PgObserver::connect(t)?)),
        Kind::Mariadb => Ok(Box::new(mariadb::MariaObserver::connect(t)?)),
        Kind::Sqlserver => Ok(Box::new(mssql::MssqlObserver::connect(t)?)),
    }
}

/// Open a workload session.
pub fn session(t: &Target) -> Result<Box<dyn Session>> {
    let url = &t.url;
    match Kind::from_url(url)? {
        Kind::Postgres => Ok(Box::new(pg::PgSession::connect(t)?)),
        Kind::Mariadb => Ok(Box::new(mariadb::MariaSession::connect(t)?)),
        Kind::Sqlserver => Ok(Box::new(mssql::MssqlSession::connect(t)?)),
    }
}

/// Whether a host named in a URL is this machine (so /proc can see the server's processes).
pub(crate) fn is_local_host(host: &str) -> bool {
    host.is_empty()
        || host.starts_with('/')
        || matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

#[cfg(test)]
mod tests {
    #[test]
    fn server_and_database_labels_leave_the_login_out() {
        use super::server_and_database as sd;
        let s = |u: &str| sd(u).map(|(a, b)| (a, b.unwrap_or_default()));
        assert_eq!(
            s("postgres://app:s3cret@db1.example:6432/sales"),
            Some(("db1.example:6432".into(), "sales".into()))
        );
        assert_eq!(
            s("postgresql:///postgres?host=/var/run/postgresql"),
            Some(("/var/run/postgresql:5432".into(), "postgres".into()))
        );
        assert_eq!(
            s("postgresql:///postgres?host=/tmp/x/sock&port=39807&user=plumb"),
            Some(("/tmp/x/sock:39807".into(), "postgres".into()))
        );
        assert_eq!(
            s("mysql://root@localhost/app?socket=/run/mysqld/mysqld.sock"),
            Some(("localhost:3306".into(), "app".into()))
        );
        assert_eq!(
            s("mssql://sa:pw@[::1]:1533/master"),
            Some(("[::1]:1533".into(), "master".into()))
        );
        assert_eq!(
            s("mssql://sa@sql1"),
            Some(("sql1:1433".into(), String::new()))
        );
        assert_eq!(s("http://x"), None);
        for u in ["postgres://app:s3cret@db1/sales", "mysql://u:hunter2@h/d"] {
            let (a, b) = sd(u).unwrap();
            assert!(
                !a.contains("s3cret") && !a.contains("hunter2") && !a.contains('@'),
                "{a}"
            );
            assert!(!b.unwrap_or_default().contains('@'));
        }
    }

    use super::*;

    #[test]
    fn connection_errors_say_what_to_check() {
        let h = with_hint(
            Kind::Postgres,
            "error connecting to server: Connection refused (os error 111)".into(),
        );
        assert!(
            h.contains("is the server running") && h.contains("5432"),
            "{h}"
        );
        let h = with_hint(
            Kind::Mariadb,
            "Could not connect: Connection refused".into(),
        );
        assert!(h.contains("3306"), "{h}");
        let h = with_hint(
            Kind::Postgres,
            "error connecting to server: No such file or directory (os error 2)".into(),
        );
        assert!(h.contains("/var/run/postgresql"), "{h}");
        let h = with_hint(
            Kind::Postgres,
            "password authentication failed for user \"x\"".into(),
        );
        assert!(h.contains("--password-file"), "{h}");
        assert_eq!(
            with_hint(Kind::Sqlserver, "something else".into()),
            "something else"
        );
    }
}
