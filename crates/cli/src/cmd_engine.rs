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
    /// Whether it runs, its PID, port, version and URL. Exit code 1 when it is not running.
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
                if !r.settings.is_empty() {
                    let s: Vec<String> =
                        r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    writeln!(out, "settings    {}", s.join(" "))?;
                }
                if let Some(u) = &self.url {
                    writeln!(out, "url         {u}")?;
                }
                writeln!(out, "log         {}", self.log.display())?;
                writeln!(
                    out,
                    "psql        plumb engine psql --dir {}",
                    self.dir.display()
                )
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
    }
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
        } => {
            let d = dir.dir();
            let opts = StartOptions {
                settings: settings(shared_buffers, set)?,
                port: None,
            };
            // Under the directory's lock: a second start on the same directory waits for the
            // first and then finds its server.
            let s = private::start_or_find(&d, &opts).map_err(|e| dir_err(&d, e))?;
            if s.was_running {
                if !set.is_empty() || shared_buffers != "128MB" {
                    eprintln!("plumb: already running; settings given now are not applied (stop it first)");
                }
                crate::emit(g, &state("already running:", d, Some(s.running)))?;
                return Ok(0);
            }
            crate::emit(g, &state("started", d, Some(s.running)))?;
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
            crate::emit(
                g,
                &state(if running { "running:" } else { "stopped" }, d, r),
            )?;
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
            let bin = private::find_bin()?;
            let psql = [bin.join("psql"), PathBuf::from("/usr/bin/psql")]
                .into_iter()
                .find(|p| p.exists());
            let Some(psql) = psql else {
                bail!("psql not found next to the server binaries or in /usr/bin")
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
