//! `plumb engine start|stop|status`: a private instance's state, in words.

use crate::Render;
use plumb_engine::instance::{InstanceState, MariaState, Replication};
use std::io::{self, Write};

fn secs(s: Option<f64>) -> String {
    s.map(|s| plumb_sys::units::format_duration(std::time::Duration::from_secs_f64(s.max(0.0))))
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
            .map(crate::fmt::bytes)
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
                let live = self.is_live();
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
                                    .map(crate::fmt::bytes)
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

impl Render for MariaState {
    const KIND: &'static str = "engine_instance";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        match &self.instance {
            Some(r) => {
                writeln!(
                    out,
                    "{} MariaDB {} in {} (PID {}, socket only, running as {})",
                    self.state,
                    r.version,
                    self.dir.display(),
                    r.pid,
                    r.user
                )?;
                if !r.settings.is_empty() {
                    let s: Vec<String> =
                        r.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    writeln!(out, "settings    {}", s.join(" "))?;
                }
                if self.is_live() {
                    if let Some(u) = &self.url {
                        writeln!(out, "url         {u}")?;
                    }
                    writeln!(
                        out,
                        "client      mariadb --socket={} -u{}",
                        r.socket.display(),
                        r.login
                    )?;
                }
                if !self.state.contains("removed") {
                    writeln!(out, "log         {}", self.log.display())?;
                }
                Ok(())
            }
            None => writeln!(
                out,
                "{} (no private MariaDB running in {})",
                self.state,
                self.dir.display()
            ),
        }
    }
}
