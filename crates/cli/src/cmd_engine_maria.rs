//! `plumb engine start|stop|status --kind mariadb`: plumb's private MariaDB.

use crate::GlobalArgs;
use anyhow::Result;
use plumb_engine::instance::MariaState;
use plumb_engine::private::{self, Removed};
use plumb_engine::private_maria::{self, MariaOptions};
use std::path::{Path, PathBuf};

/// An instance error named after the flag, as the PostgreSQL commands say it.
fn dir_err(d: &Path, e: plumb_engine::Error) -> anyhow::Error {
    plumb_lab::delta::dir_error(d, e).into()
}

/// Whether `d` holds plumb's private MariaDB (its manifest says so), or holds nothing yet and
/// `kind` asks for one.
pub(crate) fn holds_mariadb(d: &Path, kind: &str) -> Result<bool> {
    Ok(match private::kind_of(d).map_err(|e| dir_err(d, e))? {
        Some(k) => k == plumb_engine::Kind::Mariadb,
        None => kind == "mariadb",
    })
}

pub fn start(g: &GlobalArgs, d: PathBuf, set: &[String]) -> Result<i32> {
    let mut settings = Vec::new();
    for s in set {
        let Some((k, v)) = s.split_once('=') else {
            anyhow::bail!("--set {s}: give NAME=VALUE");
        };
        settings.push((k.trim().to_string(), v.trim().to_string()));
    }
    let opts = MariaOptions {
        buffer_pool: None,
        settings,
    };
    let (r, was) = private_maria::start_or_find(&d, &opts).map_err(|e| dir_err(&d, e))?;
    if was && !set.is_empty() {
        eprintln!("plumb: already running; settings given now are not applied (stop it first)");
    }
    let what = if was { "already running:" } else { "started" };
    crate::emit(g, &MariaState::new(what, d, Some(r)))?;
    Ok(0)
}

pub fn stop(g: &GlobalArgs, d: PathBuf, remove: bool) -> Result<i32> {
    let err = |e| dir_err(&d, e);
    let r = private_maria::status(&d).map_err(err)?;
    let what = if remove {
        match private_maria::remove(&d).map_err(err)? {
            Removed::Nothing => "nothing to remove",
            Removed::Stopped => "removed",
            Removed::Running => "stopped and removed",
        }
    } else if private_maria::stop(&d).map_err(err)? {
        "stopped"
    } else {
        "not running"
    };
    crate::emit(g, &MariaState::new(what, d, r))?;
    Ok(0)
}

/// Exit 1 when it is not running.
pub fn status(g: &GlobalArgs, d: PathBuf) -> Result<i32> {
    let r = private_maria::status(&d).map_err(|e| dir_err(&d, e))?;
    let running = r.is_some();
    let what = if running { "running:" } else { "stopped" };
    crate::emit(g, &MariaState::new(what, d, r))?;
    Ok(if running { 0 } else { 1 })
}
