//! An engine's views as tables, for `plumb fs`: the list of views plumb shows for each engine
//! (grouped the way a DBA of that engine thinks of them), and a reader that runs one view's
//! query, or a user's own query file, and returns its rows with their column names and kinds.
//!
//! Values are kept as the server wrote them (its own text for numbers, dates and booleans); the
//! kind only says how JSON should carry them. A user's query runs in a read-only transaction
//! that is rolled back, under the statement timeout; a view's query is a plain `SELECT *`.

use crate::{Error, Kind, Result, Target};
use serde::Serialize;
use std::time::Duration;

/// One value of a result row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Val {
    Null,
    /// A number as the server wrote it (exact: no float rounding on the way).
    Num(String),
    Bool(bool),
    Text(String),
    /// JSON the server produced (PostgreSQL's json and jsonb).
    Json(String),
}

/// A result: column names in the server's order, then the rows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Val>>,
    /// The server had more rows than plumb keeps ([`MAX_ROWS`], [`MAX_BYTES`]): these are the
    /// first.
    pub cut: bool,
}

/// The most rows of one result `plumb fs` keeps; the rest are not read into memory.
pub use crate::MAX_ROWS;
/// The most bytes of values of one result `plumb fs` keeps.
pub const MAX_BYTES: usize = 64 << 20;

impl Table {
    /// Add a row unless the result is full; false once it is (the row is dropped and the
    /// result marked cut).
    fn keep(&mut self, row: Vec<Val>, bytes: &mut usize) -> bool {
        if self.cut {
            return false;
        }
        let size: usize = row
            .iter()
            .map(|v| match v {
                Val::Num(s) | Val::Text(s) | Val::Json(s) => s.len() + 8,
                _ => 8,
            })
            .sum();
        if self.rows.len() >= MAX_ROWS || *bytes + size > MAX_BYTES {
            self.cut = true;
            return false;
        }
        *bytes += size;
        self.rows.push(row);
        true
    }
}

/// One view shown as files.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct View {
    /// The directory it is listed in (`activity`, `performance_schema`, `exec`).
    pub dir: String,
    /// Its file name (`pg_stat_activity`, `dm_exec_connections`).
    pub name: String,
    pub sql: String,
    /// A column whose text is the view's content for eyes (InnoDB's status report): the
    /// `.txt` form prints it as it is instead of a table.
    pub text_column: Option<String>,
}

/// A connection that reads views.
pub trait ViewReader: Send {
    fn kind(&self) -> Kind;
    /// The server's version as it names itself.
    fn version(&self) -> String;
    /// The views this server offers, in directory order.
    fn views(&mut self) -> Result<Vec<View>>;
    /// Run one view's query.
    fn query(&mut self, sql: &str) -> Result<Table>;
    /// Run a user's query: in a read-only transaction that is rolled back (SQL Server: a
    /// transaction that is rolled back); the last result set is returned.
    fn query_user(&mut self, sql: &str) -> Result<Table>;
    /// Whether the server still answers.
    fn ping(&mut self) -> Result<()>;
}

/// Connect a view reader, with `timeout` as the statement timeout.
pub fn reader(t: &Target, timeout: Duration) -> Result<Box<dyn ViewReader>> {
    match t.kind()? {
        Kind::Postgres => Ok(Box::new(pg::PgViews::connect(t, timeout)?)),
        Kind::Mariadb => Ok(Box::new(maria::MariaViews::connect(t, timeout)?)),
        Kind::Sqlserver => Ok(Box::new(mssql::MssqlViews::connect(t)?)),
    }
}

/// The directory a PostgreSQL view belongs in.
pub fn pg_dir(name: &str) -> &'static str {
    const ACTIVITY: &[&str] = &[
        "pg_stat_activity",
        "pg_locks",
        "pg_stat_ssl",
        "pg_stat_gssapi",
        "pg_prepared_xacts",
        "pg_cursors",
        "pg_prepared_statements",
        "pg_blocking_pids",
    ];
    const REPLICATION: &[&str] = &[
        "pg_stat_replication",
        "pg_stat_wal_receiver",
        "pg_replication_slots",
        "pg_stat_replication_slots",
        "pg_stat_subscription",
        "pg_stat_subscription_stats",
        "pg_replication_origin_status",
        "pg_publication_tables",
    ];
    const CONFIG: &[&str] = &[
        "pg_settings",
        "pg_file_settings",
        "pg_hba_file_rules",
        "pg_ident_file_mappings",
        "pg_config",
    ];
    const MEMORY: &[&str] = &["pg_shmem_allocations", "pg_backend_memory_contexts"];
    if ACTIVITY.contains(&name) {
        "activity"
    } else if name.starts_with("pg_stat_progress_") {
        "progress"
    } else if REPLICATION.contains(&name) {
        "replication"
    } else if CONFIG.contains(&name) {
        "config"
    } else if MEMORY.contains(&name) {
        "memory"
    } else if name.starts_with("pg_statio_")
        || ["_tables", "_indexes", "_sequences", "_functions"]
            .iter()
            .any(|s| name.starts_with("pg_stat_") && name.ends_with(s))
        || name == "pg_stats"
        || name.starts_with("pg_stats_ext")
    {
        "tables"
    } else if name.starts_with("pg_stat") {
        "stats"
    } else {
        "catalog"
    }
}

/// The directory a SQL Server view belongs in: the DMV's family (`dm_exec_*` → `exec`).
pub(crate) fn mssql_dir(name: &str) -> &'static str {
    for (prefix, dir) in [
        ("dm_exec_", "exec"),
        ("dm_os_", "os"),
        ("dm_io_", "io"),
        ("dm_db_", "db"),
        ("dm_tran_", "tran"),
        ("dm_hadr_", "hadr"),
        ("dm_xe_", "xe"),
        ("dm_server_", "server"),
        ("dm_resource_governor_", "resource_governor"),
    ] {
        if name.starts_with(prefix) {
            return dir;
        }
    }
    if name.starts_with("dm_") {
        "other"
    } else {
        "catalog"
    }
}

/// The directory a MariaDB table belongs in, from its schema and name.
pub(crate) fn maria_dir(schema: &str, name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    match schema.to_ascii_lowercase().as_str() {
        "performance_schema" => Some("performance_schema"),
        "information_schema" if lower.starts_with("innodb_") => Some("innodb"),
        "information_schema"
            if matches!(
                lower.as_str(),
                "global_status" | "global_variables" | "processlist" | "user_statistics"
            ) =>
        {
            Some("status")
        }
        "information_schema" => Some("information_schema"),
        _ => None,
    }
}

mod pg {
    use super::*;
    use crate::pg::{parse_url, qerr, Conn};
    use postgres::types::Type;
    use postgres::SimpleQueryMessage;

    pub struct PgViews {
        conn: Conn,
        version: String,
        /// The column kinds of each query asked before (a view's do not change): the server
        /// describes a query once, not at every read.
        kinds: std::collections::HashMap<String, Option<Vec<Type>>>,
    }

    impl PgViews {
        pub fn connect(t: &Target, timeout: Duration) -> Result<PgViews> {
            let cfg = parse_url(t)?;
            let mut conn = Conn::connect(&cfg, &t.shown(), true)?;
            conn.client
                .batch_execute(&format!(
                    "SET statement_timeout = {}; SET application_name = 'plumb fs'",
                    timeout.as_millis().max(1)
                ))
                .map_err(|e| qerr("session setup", e))?;
            let version = conn
                .client
                .query_one("SELECT current_setting('server_version')", &[])
                .map_err(|e| qerr("version", e))?
                .get::<_, String>(0);
            Ok(PgViews {
                conn,
                version,
                kinds: Default::default(),
            })
        }

        /// The column kinds of a single statement, from the server's description of it;
        /// None for several statements (the server describes only one).
        fn kinds(&mut self, sql: &str) -> Option<Vec<Type>> {
            if let Some(k) = self.kinds.get(sql) {
                return k.clone();
            }
            let k = self
                .conn
                .client
                .prepare(sql)
                .ok()
                .map(|st| st.columns().iter().map(|c| c.type_().clone()).collect());
            if self.kinds.len() >= 1000 {
                self.kinds.clear();
            }
            self.kinds.insert(sql.to_string(), k.clone());
            k
        }

        /// Run one statement in a read-only transaction that is rolled back. A query a cursor
        /// can hold (a SELECT, VALUES, a view) is read through one, in batches, so no more than
        /// [`MAX_ROWS`] / [`MAX_BYTES`] ever reach plumb; any other (SHOW, EXPLAIN) is run as it
        /// is.
        fn run(&mut self, what: &str, body: &str, kinds: Option<Vec<Type>>) -> Result<Table> {
            let client = &mut self.conn.client;
            let r = (|| {
                client
                    .batch_execute("BEGIN TRANSACTION READ ONLY")
                    .map_err(|e| qerr(what, e))?;
                let declared =
                    client.batch_execute(&format!("DECLARE plumb_fs NO SCROLL CURSOR FOR {body}"));
                let batches: Box<dyn Iterator<Item = String>> = match declared {
                    Ok(()) => Box::new(std::iter::repeat(format!(
                        "FETCH FORWARD {FETCH} FROM plumb_fs"
                    ))),
                    Err(_) => {
                        client
                            .batch_execute("ROLLBACK")
                            .map_err(|e| qerr(what, e))?;
                        client
                            .batch_execute("BEGIN TRANSACTION READ ONLY")
                            .map_err(|e| qerr(what, e))?;
                        Box::new(std::iter::once(body.to_string()))
                    }
                };
                let mut t = Table::default();
                let mut bytes = 0;
                let mut sets = 0;
                for sql in batches {
                    let msgs = client.simple_query(&sql).map_err(|e| qerr(what, e))?;
                    let mut fetched = 0;
                    for m in msgs {
                        match m {
                            SimpleQueryMessage::RowDescription(cols) if sets == 0 => {
                                sets = 1;
                                t.columns = cols.iter().map(|c| c.name().to_string()).collect();
                            }
                            SimpleQueryMessage::Row(r) => {
                                fetched += 1;
                                let row = (0..r.len())
                                    .map(|i| match r.get(i) {
                                        None => Val::Null,
                                        Some(v) => typed(v, kinds.as_ref().and_then(|k| k.get(i))),
                                    })
                                    .collect();
                                t.keep(row, &mut bytes);
                            }
                            _ => {}
                        }
                    }
                    if fetched < FETCH || t.cut {
                        break;
                    }
                }
                Ok(t)
            })();
            // Leave no transaction open, whatever happened.
            let _ = client.batch_execute("ROLLBACK");
            r
        }
    }

    /// Rows per cursor read.
    const FETCH: usize = 5000;

    /// The views `plumb fs` lists on PostgreSQL: pg_catalog's, and `pg_stat*` views that are
    /// members of an extension (pg_depend's 'e' entries, which only CREATE EXTENSION makes).
    pub(crate) const SYSTEM_VIEWS: &str = "SELECT n.nspname::text, c.relname::text FROM pg_catalog.pg_class c \
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         WHERE c.relkind IN ('v', 'm') \
         AND (n.nspname = 'pg_catalog' \
              OR (c.relname LIKE 'pg\\_stat%' AND EXISTS ( \
                  SELECT 1 FROM pg_catalog.pg_depend d \
                  WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid \
                  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass AND d.deptype = 'e'))) \
         AND pg_catalog.has_schema_privilege(n.oid, 'USAGE') \
         ORDER BY c.relname, n.nspname = 'pg_catalog' DESC";

    fn typed(v: &str, kind: Option<&Type>) -> Val {
        match kind {
            Some(k)
                if [
                    Type::INT2,
                    Type::INT4,
                    Type::INT8,
                    Type::OID,
                    Type::FLOAT4,
                    Type::FLOAT8,
                    Type::NUMERIC,
                ]
                .contains(k) =>
            {
                Val::Num(v.to_string())
            }
            Some(k) if *k == Type::BOOL => Val::Bool(v == "t"),
            Some(k) if *k == Type::JSON || *k == Type::JSONB => Val::Json(v.to_string()),
            _ => Val::Text(v.to_string()),
        }
    }

    impl ViewReader for PgViews {
        fn kind(&self) -> Kind {
            Kind::Postgres
        }

        fn version(&self) -> String {
            self.version.clone()
        }

        fn views(&mut self) -> Result<Vec<View>> {
            // The system's views, and statistics views that belong to an installed extension
            // (pg_stat_statements, wherever it was installed): never a view any role could
            // have created under a pg_stat name, whose functions a `ls` would run as the
            // mounting role.
            let rows = self
                .conn
                .client
                .query(SYSTEM_VIEWS, &[])
                .map_err(|e| qerr("the list of views", e))?;
            let mut out: Vec<View> = Vec::new();
            for r in rows {
                let (schema, name): (String, String) = (r.get(0), r.get(1));
                if out.iter().any(|v| v.name == name) {
                    continue;
                }
                out.push(View {
                    dir: pg_dir(&name).to_string(),
                    sql: format!("SELECT * FROM {}.{}", ident(&schema), ident(&name)),
                    name,
                    text_column: None,
                });
            }
            Ok(out)
        }

        // Each read is a transaction of its own, so the statistics views are read fresh (they
        // are kept for the length of a transaction).
        fn query(&mut self, sql: &str) -> Result<Table> {
            let kinds = self.kinds(sql);
            self.run("the view", sql, kinds)
        }

        fn query_user(&mut self, sql: &str) -> Result<Table> {
            let body = sql.trim().trim_end_matches(';').trim_end();
            // One statement, or nothing runs: the server parses it as a prepared statement,
            // which cannot hold two, so no `COMMIT; BEGIN READ WRITE; …` in a file can end
            // the read-only transaction around it and go on.
            let kinds = match self.kinds.get(body) {
                // Parsed before: one statement (a failed parse is never kept here).
                Some(Some(k)) => Ok(k.clone()),
                _ => self.conn.client.prepare(body).map(|st| {
                    st.columns()
                        .iter()
                        .map(|c| c.type_().clone())
                        .collect::<Vec<_>>()
                }),
            };
            let kinds = match kinds {
                Ok(k) => {
                    if self.kinds.len() >= 1000 {
                        self.kinds.clear();
                    }
                    self.kinds.insert(body.to_string(), Some(k.clone()));
                    Some(k)
                }
                Err(e) => {
                    let multi = e
                        .as_db_error()
                        .is_some_and(|d| d.message().contains("multiple commands"));
                    return Err(if multi {
                        Error::Query {
                            what: "the query".into(),
                            message: "a query file holds one statement (it runs alone in a read-only transaction that is rolled back); this one holds several".into(),
                            source: None,
                        }
                    } else {
                        qerr("the query", e)
                    });
                }
            };
            self.run("the query", body, kinds)
        }

        fn ping(&mut self) -> Result<()> {
            self.conn
                .client
                .simple_query("SELECT 1")
                .map(|_| ())
                .map_err(|e| qerr("a check that the server answers", e))
        }
    }

    fn ident(s: &str) -> String {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

mod maria {
    use super::*;
    use crate::mariadb::{merr, parse_url};
    use mysql::consts::ColumnType as C;
    use mysql::prelude::Queryable;
    use mysql::Conn;

    pub struct MariaViews {
        conn: Conn,
        version: String,
    }

    impl MariaViews {
        pub fn connect(t: &Target, timeout: Duration) -> Result<MariaViews> {
            let opts = parse_url(t)?;
            let mut conn = Conn::new(opts).map_err(|e| Error::Connect {
                url: t.shown(),
                message: crate::with_hint(Kind::Mariadb, e.to_string()),
                source: Some(Box::new(e)),
            })?;
            conn.query_drop("SET SESSION TRANSACTION READ ONLY")
                .map_err(|e| merr("session setup", e))?;
            // MariaDB's statement limit in seconds (MySQL's max_execution_time is in ms and
            // only for SELECT).
            let secs = timeout.as_secs_f64().max(0.001);
            if conn
                .query_drop(format!("SET SESSION max_statement_time = {secs}"))
                .is_err()
            {
                let _ = conn.query_drop(format!(
                    "SET SESSION max_execution_time = {}",
                    timeout.as_millis().max(1)
                ));
            }
            let version: String = conn
                .query_first("SELECT VERSION()")
                .map_err(|e| merr("VERSION()", e))?
                .unwrap_or_default();
            Ok(MariaViews { conn, version })
        }

        fn run(&mut self, what: &str, sql: &str) -> Result<Table> {
            let mut result = self.conn.query_iter(sql).map_err(|e| merr(what, e))?;
            let mut t = Table::default();
            while let Some(set) = result.iter() {
                let cols = set.columns();
                let cols: &[mysql::Column] = cols.as_ref();
                if cols.is_empty() {
                    // A statement without rows (BEGIN, ROLLBACK): drain it.
                    for r in set {
                        r.map_err(|e| merr(what, e))?;
                    }
                    continue;
                }
                let kinds: Vec<C> = cols.iter().map(|c| c.column_type()).collect();
                let mut this = Table {
                    columns: cols.iter().map(|c| c.name_str().into_owned()).collect(),
                    ..Table::default()
                };
                let mut bytes = 0;
                // Past the bound the rest is read from the connection (so that it stays
                // usable) and dropped.
                for r in set {
                    let r = r.map_err(|e| merr(what, e))?;
                    if this.cut {
                        continue;
                    }
                    let vals = r.unwrap();
                    let row = vals.iter().zip(&kinds).map(|(v, k)| typed(v, *k)).collect();
                    this.keep(row, &mut bytes);
                }
                t = this;
            }
            Ok(t)
        }
    }

    fn typed(v: &mysql::Value, kind: C) -> Val {
        use mysql::Value as V;
        let text = match v {
            V::NULL => return Val::Null,
            V::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
            V::Int(i) => i.to_string(),
            V::UInt(u) => u.to_string(),
            V::Float(f) => f.to_string(),
            V::Double(d) => d.to_string(),
            other => other.as_sql(true).trim_matches('\'').to_string(),
        };
        match kind {
            C::MYSQL_TYPE_TINY
            | C::MYSQL_TYPE_SHORT
            | C::MYSQL_TYPE_LONG
            | C::MYSQL_TYPE_LONGLONG
            | C::MYSQL_TYPE_INT24
            | C::MYSQL_TYPE_YEAR
            | C::MYSQL_TYPE_DECIMAL
            | C::MYSQL_TYPE_NEWDECIMAL
            | C::MYSQL_TYPE_FLOAT
            | C::MYSQL_TYPE_DOUBLE => Val::Num(text),
            _ => Val::Text(text),
        }
    }

    impl ViewReader for MariaViews {
        fn kind(&self) -> Kind {
            Kind::Mariadb
        }

        fn version(&self) -> String {
            self.version.clone()
        }

        fn views(&mut self) -> Result<Vec<View>> {
            let rows: Vec<(String, String)> = self
                .conn
                .query(
                    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES \
                     WHERE TABLE_SCHEMA IN ('performance_schema', 'information_schema') \
                     ORDER BY TABLE_SCHEMA, TABLE_NAME",
                )
                .map_err(|e| merr("the list of tables", e))?;
            let mut out = vec![View {
                dir: "innodb".into(),
                name: "innodb_status".into(),
                sql: "SHOW ENGINE INNODB STATUS".into(),
                text_column: Some("Status".into()),
            }];
            for (schema, name) in rows {
                let Some(dir) = maria_dir(&schema, &name) else {
                    continue;
                };
                out.push(View {
                    dir: dir.to_string(),
                    name: name.to_ascii_lowercase(),
                    sql: format!("SELECT * FROM `{schema}`.`{}`", name.replace('`', "``")),
                    text_column: None,
                });
            }
            out.sort_by(|a, b| (&a.dir, &a.name).cmp(&(&b.dir, &b.name)));
            Ok(out)
        }

        fn query(&mut self, sql: &str) -> Result<Table> {
            self.run("the view", sql)
        }

        fn query_user(&mut self, sql: &str) -> Result<Table> {
            let body = sql.trim().trim_end_matches(';').trim_end();
            // One statement, or nothing runs: the server prepares it, and a prepared
            // statement cannot hold two, so no `COMMIT; SET SESSION TRANSACTION READ WRITE; …`
            // in a file can end the read-only transaction around it and go on.
            match self.conn.prep(body) {
                Ok(st) => {
                    let _ = self.conn.close(st);
                }
                Err(mysql::Error::MySqlError(m)) if m.code == 1295 => {
                    return Err(Error::Query {
                        what: "the query".into(),
                        message: format!("MariaDB cannot prepare this statement ({}), so plumb cannot check that it is one statement; a query file holds one statement that MariaDB can prepare", m.message),
                        source: None,
                    });
                }
                Err(mysql::Error::MySqlError(m)) if m.code == 1064 && body.contains(';') => {
                    return Err(Error::Query {
                        what: "the query".into(),
                        message: format!("a query file holds one statement (it runs alone in a read-only transaction that is rolled back); MariaDB's parser refused this one, which has a ';' inside: {}", m.message),
                        source: None,
                    });
                }
                Err(e) => return Err(merr("the query", e)),
            }
            let r = self.run(
                "the query",
                &format!("START TRANSACTION READ ONLY;\n{body}\n;ROLLBACK"),
            );
            if r.is_err() {
                let _ = self.conn.query_drop("ROLLBACK");
            }
            r
        }

        fn ping(&mut self) -> Result<()> {
            self.conn
                .ping()
                .map_err(|e| Error::Gone(format!("a check that the server answers: {e}")))
        }
    }
}

mod mssql {
    use super::*;
    use crate::mssql::{Cell, MssqlConn};

    pub struct MssqlViews {
        conn: MssqlConn,
        version: String,
    }

    /// Functions that take arguments and are worth a file of their own (dbfs showed views
    /// only, so these were out of reach there).
    const FUNCTIONS: &[(&str, &str)] = &[(
        "dm_io_virtual_file_stats",
        "SELECT * FROM sys.dm_io_virtual_file_stats(NULL, NULL)",
    )];

    /// Catalog views a DBA reads beside the DMVs.
    const CATALOG: &[&str] = &["configurations", "databases", "master_files"];

    impl MssqlViews {
        pub fn connect(t: &Target) -> Result<MssqlViews> {
            let mut conn = MssqlConn::connect(t)?;
            let v = conn.query(
                "version",
                "SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS v",
            )?;
            let version = v
                .rows
                .first()
                .and_then(|r| r.first())
                .map(Cell::text)
                .unwrap_or_default();
            Ok(MssqlViews { conn, version })
        }
    }

    fn table(rs: crate::mssql::ResultSet) -> Table {
        let mut t = Table {
            columns: rs.columns,
            ..Table::default()
        };
        let mut bytes = 0;
        for r in rs.rows {
            let row = r
                .into_iter()
                .map(|c| match c {
                    Cell::Null => Val::Null,
                    Cell::Int(i) => Val::Num(i.to_string()),
                    Cell::Float(f) => Val::Num(f.to_string()),
                    Cell::Text(t) => Val::Text(t),
                })
                .collect();
            if !t.keep(row, &mut bytes) {
                break;
            }
        }
        t
    }

    impl ViewReader for MssqlViews {
        fn kind(&self) -> Kind {
            Kind::Sqlserver
        }

        fn version(&self) -> String {
            self.version.clone()
        }

        fn views(&mut self) -> Result<Vec<View>> {
            // dbfs's list (the sys schema's views), narrowed to the DMVs.
            let rs = self.conn.query(
                "the list of views",
                "SELECT name FROM sys.system_views WHERE schema_id = 4 AND name LIKE 'dm[_]%' ORDER BY name",
            )?;
            let mut out: Vec<View> = Vec::new();
            for r in rs.rows {
                let name = r.first().map(Cell::text).unwrap_or_default();
                if name.is_empty()
                    || name.contains(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                {
                    continue;
                }
                out.push(View {
                    dir: mssql_dir(&name).to_string(),
                    sql: format!("SELECT * FROM sys.{name}"),
                    name,
                    text_column: None,
                });
            }
            for (name, sql) in FUNCTIONS {
                out.push(View {
                    dir: mssql_dir(name).to_string(),
                    name: name.to_string(),
                    sql: sql.to_string(),
                    text_column: None,
                });
            }
            for name in CATALOG {
                out.push(View {
                    dir: "catalog".into(),
                    name: name.to_string(),
                    sql: format!("SELECT * FROM sys.{name}"),
                    text_column: None,
                });
            }
            out.sort_by(|a, b| (&a.dir, &a.name).cmp(&(&b.dir, &b.name)));
            Ok(out)
        }

        fn query(&mut self, sql: &str) -> Result<Table> {
            Ok(table(self.conn.query("the view", sql)?))
        }

        fn query_user(&mut self, sql: &str) -> Result<Table> {
            // SQL Server neither has read-only transactions nor prepares a batch as one
            // statement (statements need no ';' between them): plumb reads the text itself and
            // runs only one SELECT with nothing in it that writes or ends a transaction, inside
            // a transaction that is rolled back whatever it did.
            if let Err(why) = tsql_one_select(sql) {
                return Err(Error::Query {
                    what: "the query".into(),
                    message: format!("a query file holds one SELECT (it runs alone in a transaction that is rolled back); {why}"),
                    source: None,
                });
            }
            let wrapped = format!(
                "SET XACT_ABORT ON; BEGIN TRANSACTION;\n{}\n;IF @@TRANCOUNT > 0 ROLLBACK",
                sql.trim().trim_end_matches(';')
            );
            Ok(table(self.conn.query("the query", &wrapped)?))
        }

        fn ping(&mut self) -> Result<()> {
            self.conn
                .query("a check that the server answers", "SELECT 1 AS one")
                .map(|_| ())
        }
    }
}

/// Words that begin or make a T-SQL statement other than a read: none can stand in one SELECT
/// (as column or table names they are reserved, so they must be written in [brackets] or
/// "quotes", which this check skips).
const TSQL_NOT_IN_A_SELECT: &[&str] = &[
    "ALTER",
    "BACKUP",
    "BEGIN",
    "BREAK",
    "BULK",
    "CHECKPOINT",
    "CLOSE",
    "COMMIT",
    "CONTINUE",
    "CREATE",
    "DBCC",
    "DEALLOCATE",
    "DECLARE",
    "DELETE",
    "DENY",
    "DISABLE",
    "DROP",
    "ENABLE",
    "END",
    "EXEC",
    "EXECUTE",
    "GOTO",
    "GRANT",
    "IF",
    "INSERT",
    "INTO",
    "KILL",
    "MERGE",
    "OPEN",
    "OPENDATASOURCE",
    "OPENQUERY",
    "OPENROWSET",
    "PRINT",
    "RAISERROR",
    "READTEXT",
    "RECONFIGURE",
    "RESTORE",
    "RETURN",
    "REVERT",
    "REVOKE",
    "ROLLBACK",
    "SAVE",
    "SEND",
    "SET",
    "SETUSER",
    "SHUTDOWN",
    "THROW",
    "TRAN",
    "TRANSACTION",
    "TRUNCATE",
    "UPDATE",
    "UPDATETEXT",
    "USE",
    "WAITFOR",
    "WHILE",
    "WRITETEXT",
];

/// Why a T-SQL query file is not one read-only SELECT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotOneSelect(pub String);

/// Whether `sql` is one T-SQL SELECT (or `WITH … SELECT`) that cannot write or end the
/// transaction it runs in; the reason when it is not. Strings ('…'), quoted names ("…", […])
/// and comments (--, /* */, nested) are skipped; every other word is looked at.
pub(crate) fn tsql_one_select(sql: &str) -> std::result::Result<(), NotOneSelect> {
    let b = sql.as_bytes();
    let mut words: Vec<String> = Vec::new();
    let mut i = 0;
    let mut semicolon_at: Option<usize> = None;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\'' | b'"' | b'[' => {
                let close = if c == b'[' { b']' } else { c };
                i += 1;
                loop {
                    match b.get(i) {
                        None => {
                            return Err(NotOneSelect(
                                "a string or a quoted name is not closed".into(),
                            ))
                        }
                        Some(&x) if x == close => {
                            // A doubled closer is the closer itself.
                            if b.get(i + 1) == Some(&close) {
                                i += 2;
                                continue;
                            }
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                words.push("\u{0}".into());
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if b[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                if depth != 0 {
                    return Err(NotOneSelect("a comment is not closed".into()));
                }
            }
            b';' => {
                semicolon_at.get_or_insert(words.len());
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'@' || c == b'#' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || matches!(b[i], b'_' | b'@' | b'#' | b'$')
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                if semicolon_at.is_some() {
                    return Err(NotOneSelect(
                        "it holds more than one statement (text after a ';')".into(),
                    ));
                }
                words.push(sql[start..i].to_ascii_uppercase());
            }
            _ => i += 1,
        }
    }
    match words.first().map(String::as_str) {
        Some("SELECT") | Some("WITH") => {}
        Some(w) => {
            return Err(NotOneSelect(format!(
                "it begins with {w}, not SELECT or WITH"
            )))
        }
        None => return Err(NotOneSelect("it is empty".into())),
    }
    if let Some(w) = words
        .iter()
        .find(|w| TSQL_NOT_IN_A_SELECT.contains(&w.as_str()))
    {
        return Err(NotOneSelect(format!(
            "{w} has no place in one SELECT (a name that is this word is written [{}])",
            w.to_ascii_lowercase()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tsql_query_file_is_one_select_that_cannot_leave_its_transaction() {
        for ok in [
            "SELECT * FROM sys.dm_exec_requests",
            "select session_id, [update], \"commit\" from sys.dm_exec_sessions;\n",
            "WITH w AS (SELECT wait_type FROM sys.dm_os_wait_stats) SELECT * FROM w -- COMMIT",
            "SELECT 'COMMIT; DROP TABLE x' AS s /* ROLLBACK /* nested */ DELETE */",
            "SELECT name FROM sys.databases ORDER BY name OFFSET 0 ROWS FETCH NEXT 5 ROWS ONLY",
            "SELECT 'it''s' AS s",
        ] {
            assert_eq!(tsql_one_select(ok), Ok(()), "{ok}");
        }
        for (bad, says) in [
            (
                "COMMIT; BEGIN TRANSACTION; DROP TABLE victim; SELECT 1",
                "more than one statement",
            ),
            (
                "COMMIT BEGIN TRANSACTION DROP TABLE victim",
                "begins with COMMIT",
            ),
            ("SELECT 1 COMMIT DROP TABLE victim", "COMMIT has no place"),
            ("SELECT 1; DROP TABLE victim", "more than one statement"),
            ("SELECT * INTO copy FROM victim", "INTO has no place"),
            (
                "SELECT * FROM OPENROWSET('SQLNCLI', 'x', 'EXEC xp_cmdshell')",
                "OPENROWSET",
            ),
            ("SELECT 1 EXEC('DROP TABLE victim')", "EXEC has no place"),
            ("SELECT 1 WAITFOR DELAY '01:00'", "WAITFOR"),
            ("SELECT 'unclosed", "not closed"),
            ("SELECT 1 /* unclosed", "comment is not closed"),
            ("-- nothing", "empty"),
            ("UPDATE victim SET x = 1", "begins with UPDATE"),
        ] {
            let e = tsql_one_select(bad).unwrap_err();
            assert!(e.0.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn postgres_views_land_where_a_dba_looks() {
        assert_eq!(pg_dir("pg_stat_activity"), "activity");
        assert_eq!(pg_dir("pg_locks"), "activity");
        assert_eq!(pg_dir("pg_stat_user_tables"), "tables");
        assert_eq!(pg_dir("pg_statio_user_indexes"), "tables");
        assert_eq!(pg_dir("pg_stat_xact_user_functions"), "tables");
        assert_eq!(pg_dir("pg_stat_io"), "stats");
        assert_eq!(pg_dir("pg_stat_bgwriter"), "stats");
        assert_eq!(pg_dir("pg_stat_statements"), "stats");
        assert_eq!(pg_dir("pg_stat_progress_vacuum"), "progress");
        assert_eq!(pg_dir("pg_stat_replication"), "replication");
        assert_eq!(pg_dir("pg_replication_slots"), "replication");
        assert_eq!(pg_dir("pg_settings"), "config");
        assert_eq!(pg_dir("pg_roles"), "catalog");
    }

    #[test]
    fn sql_server_dmvs_by_family() {
        assert_eq!(mssql_dir("dm_exec_connections"), "exec");
        assert_eq!(mssql_dir("dm_os_schedulers"), "os");
        assert_eq!(mssql_dir("dm_io_virtual_file_stats"), "io");
        assert_eq!(mssql_dir("dm_hadr_database_replica_states"), "hadr");
        assert_eq!(mssql_dir("dm_broker_queue_monitors"), "other");
        assert_eq!(mssql_dir("databases"), "catalog");
    }

    #[test]
    fn mariadb_tables_by_schema() {
        assert_eq!(
            maria_dir("performance_schema", "events_waits_current"),
            Some("performance_schema")
        );
        assert_eq!(
            maria_dir("information_schema", "INNODB_METRICS"),
            Some("innodb")
        );
        assert_eq!(
            maria_dir("information_schema", "GLOBAL_STATUS"),
            Some("status")
        );
        assert_eq!(
            maria_dir("information_schema", "TABLES"),
            Some("information_schema")
        );
        assert_eq!(maria_dir("mysql", "user"), None);
    }
}
