//! `plumb engine start|stop|status|psql|url`: plumb's private PostgreSQL instance, or with
//! `--kind mariadb` its private MariaDB (`cmd_engine_maria`).

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use plumb_engine::instance::{self, InstanceState};
use plumb_engine::private::{self, StartOptions};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct EngineArgs {
    #[command(subcommand)]
    pub cmd: EngineCmd,
}

#[derive(Debug, Args, Clone)]
pub struct DirArg {
    /// The instance's work directory (data, socket, log): a new one (plumb makes it; its parent must
    /// exist) or an empty one you own; never a symbolic link. Default: $PLUMB_PG_DIR, else
    /// /var/tmp/plumb-pg-USER (`plumb engine --kind mariadb`: /var/tmp/plumb-mariadb-USER).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl DirArg {
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(private::default_dir)
    }

    /// The directory given, else the default one of `kind`'s.
    pub(crate) fn dir_for(&self, kind: &str) -> PathBuf {
        match (&self.dir, kind) {
            (Some(d), _) => d.clone(),
            (None, "mariadb") => plumb_engine::private_maria::default_dir(),
            (None, _) => private::default_dir(),
        }
    }
}

/// Which engine: chooses the server `start` makes and the default directory (an existing
/// instance directory's own manifest says what it holds).
#[derive(Debug, Args, Clone)]
pub struct KindArg {
    /// The kind of engine: postgres (default) or mariadb (Debian's mariadbd; default directory
    /// /var/tmp/plumb-mariadb-USER).
    #[arg(long, value_name = "KIND", default_value = "postgres", value_parser = ["postgres", "mariadb"])]
    pub kind: String,
}

/// Which PostgreSQL server build runs the private instance.
#[derive(Debug, Args, Clone, Default)]
pub struct BuildArg {
    /// The PostgreSQL server build to run: the directory of its programs (initdb, pg_ctl,
    /// postgres), e.g. /usr/lib/postgresql/17/bin. Default: the build the instance was last
    /// started with, else $PLUMB_PG_BIN, else the newest under /usr/lib/postgresql.
    #[arg(long, value_name = "DIR", conflicts_with = "pg_version")]
    pub bin_dir: Option<PathBuf>,
    /// The PostgreSQL major version to run, from the builds installed: Debian's
    /// (/usr/lib/postgresql/N/bin) or those `scripts/setup --test` puts in
    /// /var/cache/plumb/postgresql/N/bin ($PLUMB_PG_VERSIONS).
    #[arg(long, value_name = "N")]
    pub pg_version: Option<u32>,
}

impl BuildArg {
    /// The build asked for (checked), or None for the default.
    pub fn build(&self) -> Result<Option<private::Build>> {
        if let Some(d) = &self.bin_dir {
            return private::build(d)
                .map(Some)
                .map_err(|e| crate::quoting(format!("--bin-dir {e}"), e));
        }
        if let Some(v) = self.pg_version {
            return private::build_for_version(v)
                .map(Some)
                .map_err(|e| crate::quoting(format!("--pg-version {e}"), e));
        }
        Ok(None)
    }
}

#[derive(Debug, Subcommand)]
pub enum EngineCmd {
    /// Start the private PostgreSQL (initdb on first use), or with --kind mariadb a private
    /// MariaDB (mariadb-install-db on first use). A running one is reported as it is.
    Start {
        #[command(flatten)]
        dir: DirArg,
        #[command(flatten)]
        kind: KindArg,
        /// shared_buffers for the instance, e.g. 128MB.
        #[arg(long, value_name = "SIZE", default_value = "128MB")]
        shared_buffers: String,
        /// Any other setting, as NAME=VALUE (repeat).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Make this a streaming standby of the running instance in PRIMARY_DIR: a replication
        /// slot there, a base backup of it into --dir, then the server following it. Stop and
        /// status know both; `stop --remove` on the standby also drops its slot.
        #[arg(long, value_name = "PRIMARY_DIR")]
        standby_of: Option<PathBuf>,
        /// With --standby-of: the primary waits for this standby at every commit
        /// (synchronous_standby_names names it until the standby stops).
        #[arg(long, requires = "standby_of")]
        sync: bool,
        #[command(flatten)]
        build: BuildArg,
    },
    /// Stop it (fast shutdown); with --remove also delete what plumb created for it (and the
    /// directory, when plumb made it).
    Stop {
        #[command(flatten)]
        dir: DirArg,
        #[command(flatten)]
        kind: KindArg,
        /// Delete the instance too: only what plumb's manifest in the directory says it created.
        #[arg(long)]
        remove: bool,
    },
    /// Whether it runs, its PID, port, version and URL, and its standbys or its primary with
    /// their positions and lag. Exit code 1 when it is not running.
    Status {
        #[command(flatten)]
        dir: DirArg,
        #[command(flatten)]
        kind: KindArg,
    },
    /// Open psql on it; arguments after -- go to psql (e.g. -- -c 'select 1').
    Psql {
        #[command(flatten)]
        dir: DirArg,
        /// Arguments for psql after `--` (e.g. -- -c "SELECT 1").
        #[arg(last = true, value_name = "PSQL_ARGS")]
        args: Vec<String>,
    },
}

/// What `start`, `stop` and `status` print.
/// An instance error named after the flag: `--dir PATH: ...`, the path said once.
pub(crate) fn dir_err(d: &std::path::Path, e: plumb_engine::Error) -> anyhow::Error {
    plumb_lab::delta::dir_error(d, e).into()
}

pub fn run(g: &GlobalArgs, a: &EngineArgs) -> Result<i32> {
    match &a.cmd {
        EngineCmd::Start {
            dir,
            kind,
            shared_buffers,
            set,
            standby_of,
            sync,
            build,
        } => {
            if kind.kind == "mariadb" {
                if standby_of.is_some() || build.bin_dir.is_some() || build.pg_version.is_some() {
                    bail!("--standby-of, --bin-dir and --pg-version are PostgreSQL's; the private MariaDB runs Debian's mariadbd");
                }
                if shared_buffers != "128MB" {
                    bail!("--shared-buffers is PostgreSQL's; for MariaDB give --set innodb_buffer_pool_size=SIZE");
                }
                return crate::cmd_engine_maria::start(g, dir.dir_for("mariadb"), set);
            }
            let opts = StartOptions {
                settings: private::settings(shared_buffers, set)?,
                port: None,
                standby_of: standby_of.clone(),
                sync: *sync,
                bin: build.build()?.map(|b| b.bin),
            };
            let given = !set.is_empty() || shared_buffers != "128MB";
            start(g, dir.dir(), &opts, given)
        }
        EngineCmd::Stop { dir, kind, remove } => {
            let d = dir.dir_for(&kind.kind);
            if crate::cmd_engine_maria::holds_mariadb(&d, &kind.kind)? {
                return crate::cmd_engine_maria::stop(g, d, *remove);
            }
            stop(g, d, *remove)
        }
        EngineCmd::Status { dir, kind } => {
            let d = dir.dir_for(&kind.kind);
            if crate::cmd_engine_maria::holds_mariadb(&d, &kind.kind)? {
                return crate::cmd_engine_maria::status(g, d);
            }
            status(g, d)
        }
        EngineCmd::Psql { dir, args } => psql(&dir.dir(), args),
    }
}

/// Start the instance, or find it running (`settings_given`: say that they were not applied).
fn start(g: &GlobalArgs, d: PathBuf, opts: &StartOptions, settings_given: bool) -> Result<i32> {
    // Under the directory's lock: a second start on the same directory waits for the first and
    // then finds its server.
    let s = private::start_or_find(&d, opts).map_err(|e| dir_err(&d, e))?;
    if s.was_running {
        if settings_given {
            eprintln!("plumb: already running; settings given now are not applied (stop it first)");
        }
        if opts.bin.is_some() && opts.bin != s.running.bin {
            eprintln!("plumb: already running with another build of PostgreSQL {}; stop it first to change builds", s.running.version);
        }
        crate::emit(
            g,
            &InstanceState::new("already running:", d, Some(s.running)),
        )?;
        return Ok(0);
    }
    let mut st = InstanceState::new("started", d, Some(s.running));
    st.replication = st
        .instance
        .as_ref()
        .and_then(|r| instance::replication(r).ok().flatten());
    crate::emit(g, &st)?;
    Ok(0)
}

fn stop(g: &GlobalArgs, d: PathBuf, remove: bool) -> Result<i32> {
    let r = private::status(&d).map_err(|e| dir_err(&d, e))?;
    let what = if remove {
        match private::remove(&d).map_err(|e| dir_err(&d, e))? {
            private::Removed::Nothing => "nothing to remove",
            private::Removed::Stopped => "removed",
            private::Removed::Running => "stopped and removed",
        }
    } else if private::stop(&d).map_err(|e| dir_err(&d, e))? {
        "stopped"
    } else {
        "not running"
    };
    crate::emit(g, &InstanceState::new(what, d, r))?;
    Ok(0)
}

/// The instance's state (exit 1 when it is not running).
fn status(g: &GlobalArgs, d: PathBuf) -> Result<i32> {
    let r = private::status(&d).map_err(|e| dir_err(&d, e))?;
    let running = r.is_some();
    let mut st = InstanceState::new(if running { "running:" } else { "stopped" }, d, r);
    if let Some(r) = &st.instance {
        st.replication = instance::replication(r)?;
    }
    crate::emit(g, &st)?;
    Ok(if running { 0 } else { 1 })
}

/// psql on the instance, as its superuser, with the caller's arguments; psql's exit code.
fn psql(d: &std::path::Path, args: &[String]) -> Result<i32> {
    let Some(r) = private::status(d).map_err(|e| dir_err(d, e))? else {
        bail!(
            "--dir {}: no instance running (plumb engine start --dir {0})",
            d.display()
        );
    };
    let Some(psql) = crate::flagged("psql:", r.psql())? else {
        bail!("psql not found next to the server's programs, under /usr/lib/postgresql or in /usr/bin (apt-get install postgresql-client)")
    };
    let st = std::process::Command::new(&psql)
        .arg("-h")
        .arg(r.socket_dir())
        .arg("-p")
        .arg(r.port.to_string())
        .args(["-U", private::SUPERUSER, "-d", "postgres"])
        .args(args)
        .status()
        .map_err(|e| crate::quoting(format!("{}: {e}", psql.display()), e))?;
    Ok(st.code().unwrap_or(2))
}
