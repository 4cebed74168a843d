//! A database plumb creates on a server (`plumb load`'s, the lab's pgbench database): noted in
//! root's ledger before it is made, marked with this run's token the moment it is, and dropped
//! when its guard goes, only if this run made it (or the user asked, `--drop-kept`), only if it
//! still holds nothing but plumb's objects and is owned by the role plumb connects as, and
//! never from under another session (no `WITH (FORCE)`).
//!
//! A run that is killed leaves its database and its ledger; the next `plumb load` or `plumb
//! lab` that connects to that server drops it ([`reclaim_on`]) once the token in the
//! database's mark matches the dead run's and the same checks pass, and says so.

use crate::error::Result;
use plumb_engine::oltp::server::{Admin, Found};
use plumb_engine::Target;
use plumb_sys::ledger::{self, Entry, Item};

/// How the ledger and the pending list name a server: the engine and its address (host and
/// port, or socket), never a user or a password.
pub(crate) fn server_key(t: &Target) -> (String, String) {
    let engine = t.kind().map(|k| k.name().to_string()).unwrap_or_default();
    let server = plumb_engine::server_and_database(&t.url)
        .map(|(s, _)| s)
        .unwrap_or_else(|| t.shown());
    (engine, server)
}

/// A database on a server that plumb may drop when this goes.
pub struct ServerDb {
    pub target: Target,
    pub name: String,
    /// The token of the run that created it ("" for a kept one this run adopted).
    pub run: String,
    /// The names plumb gives its objects in it.
    objects: Vec<String>,
    /// Drop it when this goes.
    drop: bool,
    /// This run created it.
    made: bool,
    ledger: Entry,
}

impl ServerDb {
    /// Create `name` on `admin`'s server as this run's: in the ledger first, then created and
    /// marked with a new run token. Dropped when this goes unless [`ServerDb::keep`].
    pub fn create(
        admin: &mut Admin,
        target: &Target,
        name: &str,
        objects: Vec<String>,
    ) -> Result<ServerDb> {
        let run = plumb_sys::os::random_token();
        let (engine, server) = server_key(target);
        let ledger = ledger::note(Item::Database {
            engine,
            server,
            name: name.to_string(),
            run: run.clone(),
            objects: objects.clone(),
        });
        if let Err(e) = admin.create_database(name, &run) {
            ledger.done();
            return Err(crate::Error::quoting(
                format!("creating the database {name}: {e}"),
                e,
            ));
        }
        Ok(ServerDb {
            target: target.clone(),
            name: name.to_string(),
            run,
            objects,
            drop: true,
            made: true,
            ledger,
        })
    }

    /// A kept database this run did not create and found plumb's alone: left as it is when
    /// this goes, unless `drop` (the user's `--drop-kept`), and then only after the checks
    /// pass again.
    pub(crate) fn adopt(target: &Target, name: &str, objects: Vec<String>, drop: bool) -> ServerDb {
        ServerDb {
            target: target.clone(),
            name: name.to_string(),
            run: String::new(),
            objects,
            drop,
            made: false,
            ledger: Entry::NONE,
        }
    }

    /// Whether this run created it.
    pub(crate) fn made_here(&self) -> bool {
        self.made
    }

    /// Whether it will be dropped when this goes.
    pub(crate) fn dropped_after(&self) -> bool {
        self.drop
    }

    /// Keep it after the run (`--keep`): crossed off the ledger, never dropped by this guard.
    pub fn keep(&mut self) {
        self.drop = false;
        std::mem::replace(&mut self.ledger, Entry::NONE).done();
    }
}

impl Drop for ServerDb {
    fn drop(&mut self) {
        if !self.drop {
            return;
        }
        // A server that says nothing costs DROP_WAIT, not for ever (the ledger keeps the
        // database for the next run, as root).
        let (t, name, objects) = (self.target.clone(), self.name.clone(), self.objects.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(drop_checked(&t, &name, &objects));
        });
        let r = rx.recv_timeout(DROP_WAIT).unwrap_or_else(|_| {
            Err(format!(
                "the server did not answer within {} s",
                DROP_WAIT.as_secs()
            ))
        });
        match r {
            Ok(()) => std::mem::replace(&mut self.ledger, Entry::NONE).done(),
            Err(why) => eprintln!(
                "plumb: warning: left the database {} on {}: {}; drop it by hand when it is yours (DROP DATABASE {0})",
                self.name,
                self.target.shown(),
                plumb_sys::visible::lines(&why)
            ),
        }
    }
}

/// How long plumb waits for a server to drop a database (a large one takes seconds).
const DROP_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Drop `name` if it is still plumb's alone (owned by the connecting role, holding only
/// `objects`) and nobody else is in it; why not otherwise.
fn drop_checked(t: &Target, name: &str, objects: &[String]) -> std::result::Result<(), String> {
    let mut a = Admin::connect(t).map_err(|e| e.to_string())?;
    // (A database already gone has no owner and holds nothing; its drop is IF EXISTS.)
    let h = a.holdings(t, name, objects).map_err(|e| e.to_string())?;
    if let Some(why) = h.not_ours() {
        return Err(why);
    }
    a.drop_database(name).map_err(|e| e.to_string())
}

/// Drop the databases that killed plumbs left on `admin`'s server (root's pending list), each
/// only when its mark still carries the dead run's token and it is plumb's alone; `note` says
/// what was dropped and what was left, and why. Without a ledger (not root) there is nothing
/// to do.
pub(crate) fn reclaim_on(admin: &mut Admin, t: &Target, note: &mut dyn FnMut(String)) {
    let (engine, server) = server_key(t);
    for p in ledger::pending_databases(&engine, &server) {
        let Item::Database {
            name, run, objects, ..
        } = &p.item
        else {
            continue;
        };
        let same_run = match admin.find(name) {
            Ok(Found::Plumbs { run: Some(r), .. }) | Ok(Found::Unfinished { run: r }) => &r == run,
            Ok(_) => false,
            // The server would not say: try again another time.
            Err(_) => continue,
        };
        if !same_run {
            // Gone, or another database under that name now: not the dead run's to drop.
            ledger::settle_database(run);
            continue;
        }
        // The dead run's statements may still be running in it (a server notices a client
        // gone only when it next writes to it).
        admin.end_sessions_of(name, p.pid, std::time::Duration::from_secs(30));
        match drop_checked(t, name, objects) {
            Ok(()) => {
                ledger::settle_database(run);
                note(format!(
                    "dropped the database {name}, which a plumb that was killed (PID {}) left on this server",
                    p.pid
                ));
            }
            Err(why) => note(format!(
                "a plumb that was killed (PID {}) left the database {name} on this server; left in place: {why}",
                p.pid
            )),
        }
    }
}

/// Why a database marked as being loaded by `run` is not used: a run that is loading it now,
/// or a killed run's leftover, with how to drop it.
pub fn unfinished(name: &str, run: &str) -> String {
    match ledger::live_database_run(run) {
        Some(pid) => format!(
            "--database {name}: a plumb run (PID {pid}) is loading it now; name another (--database NAME)"
        ),
        None if plumb_sys::os::is_root() => format!(
            "--database {name}: left by a plumb run that was killed while loading it (its mark names run {run}) and not dropped here: plumb drops a killed run's database only when that run's ledger names it and the role plumb connects as owns it; drop it by hand: DROP DATABASE {name}"
        ),
        None => format!(
            "--database {name}: left by a plumb run that did not finish loading it (one that was killed, or one loading it now as another user; its mark names run {run}); plumb drops a killed run's database itself only as root; if no run is loading it, drop it by hand: DROP DATABASE {name}"
        ),
    }
}
