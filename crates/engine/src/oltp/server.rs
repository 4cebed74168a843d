//! The engines behind one face for `plumb load`: the server (its version, the load's database,
//! the transaction counter), a connection to the load's database (schema, load jobs, checks),
//! and a client that runs transactions. Each engine's code stays in `pg`, `maria` and `mssql`
//! (SQL Server's written from the documentation, not run against a live server).

pub use super::holdings::{Found, Holdings};
use super::{maria, mssql, pg, Tx, TxError, Workload};
use crate::{Kind, Result, Target};

/// A canceller: cancels a connection's running statement from another thread.
pub type Canceller = Box<dyn Fn() + Send + Sync>;

/// A session on the server, outside the load's database.
pub enum Admin {
    Pg(pg::Client),
    Maria(Box<maria::Client>),
    Mssql(Box<mssql::Client>),
}

impl Admin {
    pub fn connect(t: &Target) -> Result<Admin> {
        match t.kind()? {
            Kind::Postgres => Ok(Admin::Pg(pg::connect_admin(t)?)),
            Kind::Mariadb => Ok(Admin::Maria(Box::new(maria::connect_admin(t)?))),
            Kind::Sqlserver => Ok(Admin::Mssql(Box::new(mssql::connect_admin(t)?))),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Admin::Pg(_) => Kind::Postgres,
            Admin::Maria(_) => Kind::Mariadb,
            Admin::Mssql(_) => Kind::Sqlserver,
        }
    }

    pub fn version(&mut self) -> Result<String> {
        match self {
            Admin::Pg(c) => pg::server_version(c),
            Admin::Maria(c) => maria::server_version(c),
            Admin::Mssql(c) => mssql::server_version(c),
        }
    }

    pub fn find(&mut self, db: &str) -> Result<Found> {
        match self {
            Admin::Pg(c) => pg::find(c, db),
            Admin::Maria(c) => maria::find(c, db),
            Admin::Mssql(c) => mssql::find(c, db),
        }
    }

    /// Create `db` (a checked name) and mark it at once with run `run`'s token
    /// ([`super::loading_mark`]): in the same statement on MariaDB, the next on the others.
    pub fn create_database(&mut self, db: &str, run: &str) -> Result<()> {
        match self {
            Admin::Pg(c) => pg::create_database(c, db, run),
            Admin::Maria(c) => maria::create_database(c, db, run),
            Admin::Mssql(c) => mssql::create_database(c, db, run),
        }
    }

    /// Mark `db` as loaded whole by run `run` (MariaDB: plumb's mark table in it).
    pub fn mark_database(
        &mut self,
        t: &Target,
        db: &str,
        w: Workload,
        scale: u32,
        run: &str,
    ) -> Result<()> {
        let mark = super::final_mark(&w.mark(scale), run);
        match self {
            Admin::Pg(c) => pg::mark_database(c, db, &mark),
            Admin::Maria(c) => maria::mark_database(c, t, db, &mark),
            Admin::Mssql(c) => mssql::mark_database(c, db, &mark),
        }
    }

    /// Who owns `db` and what it holds beyond `allowed` (the names plumb gives its objects).
    pub fn holdings(&mut self, t: &Target, db: &str, allowed: &[String]) -> Result<Holdings> {
        match self {
            Admin::Pg(c) => pg::holdings(c, t, db, allowed),
            Admin::Maria(c) => maria::holdings(c, db, allowed),
            Admin::Mssql(c) => mssql::holdings(c, db, allowed),
        }
    }

    /// Before dropping what dead plumb `pid` left in `db`: cancel that plumb's statements
    /// still running there (PostgreSQL: its sessions carry its PID in their name) and wait up
    /// to `wait` for the sessions in `db` to end. Whether they did.
    pub fn end_sessions_of(&mut self, db: &str, pid: u32, wait: std::time::Duration) -> bool {
        match self {
            Admin::Pg(c) => pg::end_sessions_of(c, db, pid, wait),
            Admin::Maria(c) => maria::end_sessions_of(c, db, wait),
            Admin::Mssql(_) => true,
        }
    }

    /// Drop `db`, never from under another session: PostgreSQL waits up to 5 s for the
    /// sessions in it to leave and refuses if any stay (no `WITH (FORCE)`), MariaDB and SQL
    /// Server the same by a look at who is in it first. The error names the sessions.
    pub fn drop_database(&mut self, db: &str) -> Result<()> {
        match self {
            Admin::Pg(c) => pg::drop_database(c, db),
            Admin::Maria(c) => maria::drop_database(c, db),
            Admin::Mssql(c) => mssql::drop_database(c, db),
        }
    }

    /// The transactions the engine has counted (TPM's source).
    pub fn transactions(&mut self, db: &str) -> Result<i64> {
        match self {
            Admin::Pg(c) => pg::transactions(c, db),
            Admin::Maria(c) => maria::transactions(c),
            Admin::Mssql(c) => mssql::transactions(c),
        }
    }

    /// Where TPM comes from, in words.
    pub fn tpm_source(&self) -> &'static str {
        match self {
            Admin::Pg(_) => "pg_stat_database: xact_commit + xact_rollback of the load's database",
            Admin::Maria(_) => {
                "Com_commit + Com_rollback: the whole server's explicit commits and rollbacks"
            }
            Admin::Mssql(_) => {
                "Batch Requests/sec: the whole instance's batches, as HammerDB counts them"
            }
        }
    }
}

/// A connection to the load's database.
pub enum DbConn {
    Pg(pg::Client),
    Maria(Box<maria::Client>),
    Mssql(Box<mssql::Client>),
}

impl DbConn {
    pub fn connect(t: &Target, db: &str) -> Result<DbConn> {
        match t.kind()? {
            Kind::Postgres => Ok(DbConn::Pg(pg::connect_to(t, db, &t.shown())?)),
            Kind::Mariadb => Ok(DbConn::Maria(Box::new(maria::connect_to(
                t,
                db,
                &t.shown(),
            )?))),
            Kind::Sqlserver => Ok(DbConn::Mssql(Box::new(mssql::connect_to(t, db)?))),
        }
    }

    pub fn canceller(&self, t: &Target) -> Canceller {
        match self {
            DbConn::Pg(c) => pg::canceller(c),
            DbConn::Maria(c) => maria::canceller(t, c),
            // plumb's SQL Server client process stops waiting on plumb's own stop signal.
            DbConn::Mssql(_) => Box::new(|| {}),
        }
    }

    pub fn create_schema(&mut self, w: Workload) -> Result<()> {
        match self {
            DbConn::Pg(c) => pg::create_schema(c, w),
            DbConn::Maria(c) => maria::create_schema(c, w),
            DbConn::Mssql(c) => mssql::create_schema(c, w),
        }
    }

    pub fn load_job(&mut self, w: Workload, j: u32, scale: u32) -> Result<()> {
        match self {
            DbConn::Pg(c) => pg::load_job(c, w, j, scale),
            DbConn::Maria(c) => maria::load_job(c, w, j, scale),
            DbConn::Mssql(c) => mssql::load_job(c, w, j, scale),
        }
    }

    /// Keys, procedures, statistics: what comes after the rows.
    pub fn finish(&mut self, w: Workload) -> Result<()> {
        match (self, w) {
            (DbConn::Pg(_), w) if w.is_loop() => Ok(()),
            (DbConn::Pg(c), Workload::OrderEntry) => pg::finish(c),
            (DbConn::Pg(c), Workload::ReadWrite) => pg::finish_rw(c),
            (DbConn::Pg(c), _) => pg::finish_pgbench(c),
            (DbConn::Maria(c), w) => maria::finish(c, w),
            (DbConn::Mssql(c), w) => mssql::finish(c, w),
        }
    }

    /// A number from a one-value query.
    pub fn number(&mut self, sql: &str) -> Result<i64> {
        match self {
            DbConn::Pg(c) => pg::number(c, sql),
            DbConn::Maria(c) => maria::number(c, sql),
            DbConn::Mssql(c) => mssql::number(c, sql),
        }
    }
}

/// One client's connection with its workload's statements prepared.
pub enum OltpClient {
    Pg(Box<pg::PgOltp>),
    Maria(Box<maria::MariaOltp>),
    Mssql(Box<mssql::MssqlOltp>),
}

impl OltpClient {
    pub fn connect(t: &Target, db: &str, w: Workload) -> Result<OltpClient> {
        match t.kind()? {
            Kind::Postgres => Ok(OltpClient::Pg(Box::new(pg::PgOltp::connect(t, db, w)?))),
            Kind::Mariadb => Ok(OltpClient::Maria(Box::new(maria::MariaOltp::connect(
                t, db, w,
            )?))),
            Kind::Sqlserver => Ok(OltpClient::Mssql(Box::new(mssql::MssqlOltp::connect(
                t, db,
            )?))),
        }
    }

    /// Ok(true) committed, Ok(false) rolled back on purpose.
    pub fn exec(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        match self {
            OltpClient::Pg(c) => c.exec(tx),
            OltpClient::Maria(c) => c.exec(tx),
            OltpClient::Mssql(c) => c.exec(tx),
        }
    }

    /// Let the session share a thread with others (`exec_async` then waits in
    /// `plumb_sys::mux`): true on PostgreSQL's wire client; the other engines' clients block,
    /// so each keeps a thread of its own.
    pub fn share(&mut self) -> bool {
        match self {
            OltpClient::Pg(c) => c.share(),
            OltpClient::Maria(_) | OltpClient::Mssql(_) => false,
        }
    }

    /// `exec`, on a thread shared with other sessions once `share` said yes.
    pub async fn exec_async(&mut self, tx: &Tx) -> std::result::Result<bool, TxError> {
        match self {
            OltpClient::Pg(c) => c.exec_async(tx).await,
            OltpClient::Maria(c) => c.exec(tx),
            OltpClient::Mssql(c) => c.exec(tx),
        }
    }

    /// The server thread serving this session (PostgreSQL: its backend's PID, from the
    /// startup's key data); None where plumb does not know it.
    pub fn server_thread(&self) -> Option<u32> {
        match self {
            OltpClient::Pg(c) => c.backend_pid(),
            OltpClient::Maria(c) => c.server_thread(),
            OltpClient::Mssql(_) => None,
        }
    }

    pub fn canceller(&self) -> Canceller {
        match self {
            OltpClient::Pg(c) => c.canceller(),
            OltpClient::Maria(c) => c.canceller(),
            OltpClient::Mssql(_) => Box::new(|| {}),
        }
    }

    /// Close the session from another thread (a server that answers neither the statement
    /// nor its cancel); SQL Server's client process ends on plumb's own stop.
    pub fn closer(&self) -> Canceller {
        match self {
            OltpClient::Pg(c) => c.closer(),
            OltpClient::Maria(c) => c.closer(),
            OltpClient::Mssql(_) => Box::new(|| {}),
        }
    }
}
