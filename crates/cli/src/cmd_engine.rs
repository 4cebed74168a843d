//! `plumb engine start|stop|status|psql|url`: plumb's private PostgreSQL instance.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_engine::private::{self, Running, StartOptions};
use plumb_report::Render;
use serde::Serialize;
use std::io::{self, Write};
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
    /// /var/tmp/plumb-pg-USER.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

impl DirArg {
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(private::default_dir)
    }
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
                .map_err(|e| anyhow!("--bin-dir {e}"));
        }
        if let Some(v) = self.pg_version {
            return private::build_for_version(v)
                .map(Some)
                .map_err(|e| anyhow!("--pg-version {e}"));
        }
        Ok(None)
    }
}

#[derive(Debug, Subcommand)]
pub enum EngineCmd {
    /// Start the private PostgreSQL (initdb on first use). A running one is reported as it is.
    Start {
        #[command(flatten)]
        dir: DirArg,
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
        /// Delete the instance too: only what plumb's manifest in the directory says it created.
        #[arg(long)]
        remove: bool,
    },
    /// Whether it runs, its PID, port, version and URL, and its standbys or its primary with
    /// their positions and lag. Exit code 1 when it is not running.
    Status {
        #[command(flatten)]
        dir: DirArg,
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
#[derive(Debug, Serialize)]
pub struct InstanceState {
    pub state: &'static str,
    pub dir: PathBuf,
    pub instance: Option<Running>,
    pub url: Option<String>,
    pub log: PathBuf,
    /// Replication, as the servers report it (a primary with standbys, or a standby).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication: Option<Replication>,
}

/// What `plumb engine status` reads about replication.
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum Replication {
    /// This instance has standbys: each as its WAL sender sees it.
    Primary {
        standbys: Vec<plumb_engine::repl::Sender>,
    },
    /// This instance follows a primary.
    Standby {
        primary: PathBuf,
        sync: bool,
        receiver: Option<plumb_engine::repl::Receiver>,
        /// This standby as the primary sees it (None: the primary is not running, or has no
        /// WAL sender for it now).
        at_primary: Option<plumb_engine::repl::Sender>,
    },
}

fn secs(s: Option<f64>) -> String {
    s.map(|s| plumb_load::units::format_duration(std::time::Duration::from_secs_f64(s.max(0.0))))
        .unwrap_or_else(|| "-".into())
}

fn lsn(l: &Option<plumb_engine::repl::Lsn>) -> &str {
    l.as_ref().map(|l| l.text.as_str()).unwrap_or("-")
}

fn sender_line(out: &mut dyn Write, s: &plumb_engine::repl::Sender) -> io::Result<()> {
    writeln!(
        out,
        "  {} ({}, {}): sent {} written {} flushed {} replayed {}; lag write {} flush {} replay {}; {} not replayed",
        s.application_name,
        s.state,
        s.sync_state,
        lsn(&s.sent),
        lsn(&s.written),
        lsn(&s.flushed),
        lsn(&s.replayed),
        secs(s.write_lag_s),
        secs(s.flush_lag_s),
        secs(s.replay_lag_s),
        s.replay_behind_bytes()
            .map(plumb_analyze::units::bytes)
            .unwrap_or_else(|| "?".into())
    )
}

impl Render for InstanceState {
    const KIND: &'static str = "engine_instance";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match &self.instance {
            Some(r) => {
                writeln!(
                    out,
                    "{} PostgreSQL {} in {} (PID {}, port {}, running as {})",
                    self.state,
                    r.version,
                    self.dir.display(),
                    r.pid,
                    r.port,
                    if r.user.is_empty() { "?" } else { &r.user }
                )?;
                if let Some(b) = &r.bin {
                    writeln!(out, "programs    {}", b.display())?;
                }
                if !r.settings.is_empty() {
                    let s: Vec<String> =
                        r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    writeln!(out, "settings    {}", s.join(" "))?;
                }
                // How to reach it, only while it runs (a stopped or removed one has no use
                // for a URL, and a removed one no log).
                let live = !(self.state.starts_with("stopped")
                    || self.state.contains("removed")
                    || self.state == "not running");
                if live {
                    if let Some(u) = &self.url {
                        writeln!(out, "url         {u}")?;
                    }
                }
                if !self.state.contains("removed") {
                    writeln!(out, "log         {}", self.log.display())?;
                }
                if live {
                    writeln!(
                        out,
                        "psql        plumb engine psql --dir {}",
                        self.dir.display()
                    )?;
                }
                match &self.replication {
                    None => Ok(()),
                    Some(Replication::Primary { standbys }) => {
                        writeln!(
                            out,
                            "standbys    {} streaming from this primary",
                            standbys.len()
                        )?;
                        for s in standbys {
                            sender_line(out, s)?;
                        }
                        for d in &r.standbys {
                            writeln!(out, "  standby plumb made: {}", d.display())?;
                        }
                        Ok(())
                    }
                    Some(Replication::Standby {
                        primary,
                        sync,
                        receiver,
                        at_primary,
                    }) => {
                        // What the primary says (pg_stat_replication's sync_state), not only
                        // what the standby was started as.
                        let how = match (at_primary.as_ref().map(|s| s.sync_state.as_str()), *sync) {
                            (Some("sync"), _) => "synchronous: its primary waits for it at every commit".to_string(),
                            (Some("quorum"), _) => "synchronous (quorum): its primary waits for it or others at every commit".to_string(),
                            (Some("potential"), _) => "a potential synchronous standby: its primary waits for another one first".to_string(),
                            (Some(s), true) => format!("started as synchronous, but its primary has it as {s}: commits do not wait for it"),
                            (Some(_), false) => "asynchronous".to_string(),
                            (None, true) => "synchronous when its primary sees it streaming (it does not now)".to_string(),
                            (None, false) => "asynchronous".to_string(),
                        };
                        writeln!(out, "standby of  {} ({how})", primary.display())?;
                        if let Some(rc) = receiver {
                            writeln!(
                                out,
                                "  receiver {}: received {} replayed {}; {} received and not replayed; {}",
                                rc.status.as_deref().unwrap_or("not running"),
                                lsn(&rc.received),
                                lsn(&rc.replayed),
                                rc.replay_behind_bytes()
                                    .map(plumb_analyze::units::bytes)
                                    .unwrap_or_else(|| "?".into()),
                                match rc.last_replayed_commit_age_s {
                                    Some(s) => format!("last replayed commit {} ago", secs(Some(s))),
                                    None => "no commit replayed yet".into(),
                                }
                            )?;
                        }
                        match at_primary {
                            Some(s) => sender_line(out, s),
                            None => writeln!(out, "  the primary has no WAL sender for it now"),
                        }
                    }
                }
            }
            None => writeln!(
                out,
                "{}: no instance running in {}",
                self.state,
                self.dir.display()
            ),
        }
    }
}

/// An instance error named after the flag: `--dir PATH: ...`, the path said once.
pub(crate) fn dir_err(d: &std::path::Path, e: plumb_engine::Error) -> anyhow::Error {
    let e = e.to_string();
    let shown = d.display().to_string();
    match e.strip_prefix(&shown) {
        Some(rest) if rest.starts_with(':') => anyhow!("--dir {shown}{rest}"),
        _ => anyhow!("--dir {shown}: {e}"),
    }
}

fn state(state: &'static str, dir: PathBuf, r: Option<Running>) -> InstanceState {
    InstanceState {
        state,
        log: dir.join("postgresql.log"),
        url: r.as_ref().map(|r| r.url()),
        instance: r,
        dir,
        replication: None,
    }
}

fn client(r: &Running) -> Option<plumb_engine::private::Client> {
    r.client().ok()
}

/// Replication as the running servers report it; None for an instance without any.
fn replication(r: &Running) -> Result<Option<Replication>> {
    if let Some(sb) = &r.standby_of {
        let receiver = client(r).and_then(|mut c| plumb_engine::repl::receiver(&mut c).ok());
        let at_primary = private::status(&sb.primary)
            .ok()
            .flatten()
            .and_then(|p| client(&p))
            .and_then(|mut c| plumb_engine::repl::senders(&mut c).ok())
            .and_then(|v| v.into_iter().find(|s| s.application_name == sb.slot));
        return Ok(Some(Replication::Standby {
            primary: sb.primary.clone(),
            sync: sb.sync,
            receiver,
            at_primary,
        }));
    }
    let Some(mut c) = client(r) else {
        return Ok(None);
    };
    let standbys = plumb_engine::repl::senders(&mut c)?;
    if standbys.is_empty() && r.standbys.is_empty() {
        return Ok(None);
    }
    Ok(Some(Replication::Primary { standbys }))
}

/// Parse NAME=VALUE settings.
pub fn settings(shared_buffers: &str, set: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = vec![
        ("shared_buffers".to_string(), shared_buffers.to_string()),
        // Read and write times in pg_stat_database and pg_stat_io: plumb's deltas want them.
        ("track_io_timing".to_string(), "on".to_string()),
    ];
    for s in set {
        let (k, v) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {s}: expected NAME=VALUE"))?;
        out.retain(|(n, _)| n != k);
        out.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(out)
}

pub fn run(g: &GlobalArgs, a: &EngineArgs) -> Result<i32> {
    match &a.cmd {
        EngineCmd::Start {
            dir,
            shared_buffers,
            set,
            standby_of,
            sync,
            build,
        } => {
            let d = dir.dir();
            let opts = StartOptions {
                settings: settings(shared_buffers, set)?,
                port: None,
                standby_of: standby_of.clone(),
                sync: *sync,
                bin: build.build()?.map(|b| b.bin),
            };
            // Under the directory's lock: a second start on the same directory waits for the
            // first and then finds its server.
            let s = private::start_or_find(&d, &opts).map_err(|e| dir_err(&d, e))?;
            if s.was_running {
                if !set.is_empty() || shared_buffers != "128MB" {
                    eprintln!("plumb: already running; settings given now are not applied (stop it first)");
                }
                if opts.bin.is_some() && opts.bin != s.running.bin {
                    eprintln!("plumb: already running with another build of PostgreSQL {}; stop it first to change builds", s.running.version);
                }
                crate::emit(g, &state("already running:", d, Some(s.running)))?;
                return Ok(0);
            }
            let mut st = state("started", d, Some(s.running));
            st.replication = st
                .instance
                .as_ref()
                .and_then(|r| replication(r).ok().flatten());
            crate::emit(g, &st)?;
            Ok(0)
        }
        EngineCmd::Stop { dir, remove } => {
            let d = dir.dir();
            let r = private::status(&d).map_err(|e| dir_err(&d, e))?;
            let what = if *remove {
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
            crate::emit(g, &state(what, d, r))?;
            Ok(0)
        }
        EngineCmd::Status { dir } => {
            let d = dir.dir();
            let r = private::status(&d).map_err(|e| dir_err(&d, e))?;
            let running = r.is_some();
            let mut st = state(if running { "running:" } else { "stopped" }, d, r);
            if let Some(r) = &st.instance {
                st.replication = replication(r).map_err(|e| anyhow!("{e}"))?;
            }
            crate::emit(g, &st)?;
            Ok(if running { 0 } else { 1 })
        }
        EngineCmd::Psql { dir, args } => {
            let d = dir.dir();
            let Some(r) = private::status(&d).map_err(|e| dir_err(&d, e))? else {
                bail!(
                    "--dir {}: no instance running (plumb engine start --dir {0})",
                    d.display()
                );
            };
            let psql = match r.client_program("psql").map_err(|e| anyhow!("psql: {e}"))? {
                Some(p) => Some(p),
                None => Some(PathBuf::from("/usr/bin/psql"))
                    .filter(|p| p.exists())
                    .map(|p| private::trusted_path(&p))
                    .transpose()
                    .map_err(|e| anyhow!("psql: {e}"))?,
            };
            let Some(psql) = psql else {
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
                .map_err(|e| anyhow!("{}: {e}", psql.display()))?;
            Ok(st.code().unwrap_or(2))
        }
    }
}
