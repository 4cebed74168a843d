//! A private instance's state as `plumb engine start|stop|status` report it: what runs in the
//! directory, how to reach it, and its replication as the running servers see it. Data only;
//! `plumb_report::engine_render` writes it.

use crate::private::{status, Client, Running};
use serde::Serialize;
use std::path::PathBuf;

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
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Serialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum Replication {
    /// This instance has standbys: each as its WAL sender sees it.
    Primary { standbys: Vec<crate::repl::Sender> },
    /// This instance follows a primary.
    Standby {
        primary: PathBuf,
        sync: bool,
        receiver: Option<crate::repl::Receiver>,
        /// This standby as the primary sees it (None: the primary is not running, or has no
        /// WAL sender for it now).
        at_primary: Option<crate::repl::Sender>,
    },
}

/// What `plumb engine start|stop|status` says about a private MariaDB.
#[derive(Debug, Serialize)]
pub struct MariaState {
    pub state: &'static str,
    pub dir: PathBuf,
    /// "mariadb" (PostgreSQL's state has no such field).
    pub engine: &'static str,
    pub instance: Option<crate::private_maria::MariaRunning>,
    pub url: Option<String>,
    pub log: PathBuf,
}

impl MariaState {
    pub fn new(
        state: &'static str,
        dir: PathBuf,
        r: Option<crate::private_maria::MariaRunning>,
    ) -> MariaState {
        MariaState {
            state,
            log: dir.join("mariadb.log"),
            url: r.as_ref().map(|r| r.url()),
            engine: "mariadb",
            instance: r,
            dir,
        }
    }

    pub fn is_live(&self) -> bool {
        !(self.state.starts_with("stopped")
            || self.state.contains("removed")
            || self.state == "not running"
            || self.state == "nothing to remove")
    }
}

impl InstanceState {
    /// `state` ("started", "running:", "stopped"...) of the instance in `dir`.
    pub fn new(state: &'static str, dir: PathBuf, r: Option<Running>) -> InstanceState {
        InstanceState {
            state,
            log: dir.join("postgresql.log"),
            url: r.as_ref().map(|r| r.url()),
            instance: r,
            dir,
            replication: None,
        }
    }

    /// Whether the server runs (a URL and the psql line are shown only then).
    pub fn is_live(&self) -> bool {
        !(self.state.starts_with("stopped")
            || self.state.contains("removed")
            || self.state == "not running")
    }
}

fn client(r: &Running) -> Option<Client> {
    r.client().ok()
}

/// Replication as the running servers report it; None for an instance without any.
pub fn replication(r: &Running) -> crate::Result<Option<Replication>> {
    if let Some(sb) = &r.standby_of {
        let receiver = client(r).and_then(|mut c| crate::repl::receiver(&mut c).ok());
        let at_primary = status(&sb.primary)
            .ok()
            .flatten()
            .and_then(|p| client(&p))
            .and_then(|mut c| crate::repl::senders(&mut c).ok())
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
    let standbys = crate::repl::senders(&mut c)?;
    if standbys.is_empty() && r.standbys.is_empty() {
        return Ok(None);
    }
    Ok(Some(Replication::Primary { standbys }))
}
