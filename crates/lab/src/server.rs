//! The database the lab measures: plumb's private instance, or an existing server (--engine).

use crate::error::Result;
use plumb_engine::private;
use std::collections::BTreeMap;
use std::path::PathBuf;

pub struct Server {
    /// Where plumb connects (as the private instance's superuser, or as the URL says).
    pub target: plumb_engine::Target,
    /// How the report names it (no password).
    pub shown: String,
    pub kind: plumb_engine::Kind,
    pub local_pid: Option<u32>,
    pub data_dir: Option<PathBuf>,
    pub private: Option<private::Running>,
    /// plumb's private MariaDB (`plumb lab --kind mariadb`).
    pub private_maria: Option<private::MariaRunning>,
    pub settings: BTreeMap<String, String>,
    pub version: Option<String>,
}

/// "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, ..." → up to " on ".
fn short_version(v: &str) -> String {
    v.split(" on ").next().unwrap_or(v).to_string()
}

/// Settings of plumb's private instance for the lab.
pub(crate) fn private_settings(shared_buffers: &str) -> Vec<(String, String)> {
    [
        ("shared_buffers", shared_buffers),
        ("max_wal_size", "2GB"),
        // Checkpoints come when the loops ask for them (SQL Server's trace flag 3505 does this).
        ("checkpoint_timeout", "30min"),
        ("track_wal_io_timing", "on"),
        // Read and write times in pg_stat_io (16+) and pg_stat_database.
        ("track_io_timing", "on"),
        ("max_connections", "40"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `p` from the caller's directory (pgbench runs in the lab's work directory).
pub fn absolute(p: &std::path::Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// The private MariaDB's buffer pool for the lab: the size PostgreSQL's lab gives
/// shared_buffers ("128MB" → "128M", MariaDB's spelling).
pub(crate) fn mariadb_buffer_pool(shared_buffers: &str) -> String {
    shared_buffers.trim_end_matches('B').to_string()
}

impl Server {
    pub fn private(r: private::Running) -> Result<Server> {
        let target = r.target();
        let mut obs = plumb_engine::observer(&target)?;
        let info = obs.info()?;
        let version = short_version(&info.version);
        Ok(Server {
            shown: format!("plumb's private {version} (removed after the lab)"),
            target,
            kind: plumb_engine::Kind::Postgres,
            local_pid: Some(r.pid),
            data_dir: Some(r.dir.join("data")),
            settings: info.settings,
            version: Some(version),
            private: Some(r),
            private_maria: None,
        })
    }

    /// plumb's private MariaDB, logged in as the caller over its socket.
    pub fn private_maria(r: private::MariaRunning) -> Result<Server> {
        let target = plumb_engine::Target::new(&r.url());
        let mut obs = plumb_engine::observer(&target)?;
        let info = obs.info()?;
        let version = short_version(&info.version);
        Ok(Server {
            shown: if version.starts_with("MariaDB") {
                format!("plumb's private {version} (removed after the lab)")
            } else {
                format!("plumb's private MariaDB {version} (removed after the lab)")
            },
            target,
            kind: plumb_engine::Kind::Mariadb,
            local_pid: Some(r.pid),
            data_dir: Some(r.data.clone()),
            settings: info.settings,
            version: Some(version),
            private: None,
            private_maria: Some(r),
        })
    }

    /// Connect read-only and find what this host can see of the server.
    pub fn target(target: plumb_engine::Target) -> Result<Server> {
        // The engine's errors name the URL (password masked): "--engine URL: why".
        let flag = |e: plumb_engine::Error| crate::Error::Refused(format!("--engine {e}"));
        let kind = target.kind().map_err(flag)?;
        let mut obs = plumb_engine::observer(&target).map_err(flag)?;
        let info = obs.info().map_err(flag)?;
        // The data directory, where this host can see it (PostgreSQL's data_directory;
        // MariaDB's datadir).
        let data_dir = ["data_directory", "datadir"]
            .iter()
            .find_map(|k| info.settings.get(*k))
            .map(PathBuf::from);
        Ok(Server {
            shown: target.shown(),
            local_pid: obs.local_server_pid(),
            kind,
            data_dir,
            version: Some(short_version(&info.version)),
            settings: info.settings,
            private: None,
            private_maria: None,
            target,
        })
    }

    pub(crate) fn is_private(&self) -> bool {
        self.private.is_some() || self.private_maria.is_some()
    }

    /// The server's wal_sync_method (PostgreSQL's default when it does not say).
    pub fn wal_sync_method(&self) -> String {
        self.settings
            .get("wal_sync_method")
            .cloned()
            .unwrap_or_else(|| "fdatasync".into())
    }

    pub(crate) fn mem_kind(&self) -> plumb_sys::smaps::EngineKind {
        match self.kind {
            plumb_engine::Kind::Postgres => plumb_sys::smaps::EngineKind::Postgres,
            plumb_engine::Kind::Mariadb => plumb_sys::smaps::EngineKind::Mariadb,
            plumb_engine::Kind::Sqlserver => plumb_sys::smaps::EngineKind::Mssql,
        }
    }
}

/// The same connection URL (without its password: see
/// [`plumb_engine::secret::split_password`]) with another database.
pub(crate) fn with_database(url: &str, db: &str) -> String {
    if !url.contains("://") {
        // key=value conninfo, quoted values kept whole
        if let Some(mut params) = plumb_engine::secret::parse_conninfo(url) {
            params.retain(|p| p.key != "dbname");
            params.push(plumb_engine::secret::Param {
                key: "dbname".into(),
                value: db.into(),
            });
            return plumb_engine::secret::render_conninfo(&params);
        }
        return format!("{url} dbname={db}");
    }
    // A URL: the url crate's parser, the path replaced, everything else kept as written.
    match url::Url::parse(url) {
        Ok(mut u) => {
            u.set_path(&format!("/{db}"));
            u.into()
        }
        Err(_) => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;
    use plumb_engine::secret::split_password;

    #[test]
    fn scratch_database_urls_keep_everything_but_the_database() {
        assert_eq!(
            with_database(
                "postgresql:///postgres?host=/tmp/x&port=5433&user=plumb",
                "lab"
            ),
            "postgresql:///lab?host=/tmp/x&port=5433&user=plumb"
        );
        assert_eq!(
            with_database("postgres://app@db:5432/shop?sslmode=require", "lab"),
            "postgres://app@db:5432/lab?sslmode=require"
        );
        assert_eq!(
            with_database("postgres://app@db", "lab"),
            "postgres://app@db/lab"
        );
        // IPv6 hosts and encoded user names survive as written.
        assert_eq!(
            with_database("postgres://a%40b@[::1]:5432/shop#x", "lab"),
            "postgres://a%40b@[::1]:5432/lab#x"
        );
        assert_eq!(
            with_database("host=db dbname=shop user=app", "lab"),
            "host=db user=app dbname=lab"
        );
        assert_eq!(
            with_database("host=db application_name='a b' dbname=shop", "lab"),
            "host=db application_name='a b' dbname=lab"
        );
        assert_eq!(
            split_password("postgres://app:s3cret@db/lab"),
            (
                "postgres://app@db/lab".to_string(),
                Some("s3cret".to_string())
            )
        );
        assert_eq!(
            split_password("host=db password=s3cret dbname=lab"),
            ("host=db dbname=lab".to_string(), Some("s3cret".to_string()))
        );
        assert_eq!(split_password("postgres://app@db/lab").1, None);
    }
}
