//! What plumb makes that can outlive it (a child process, a zram swap device, a cgroup, a
//! private database server, a scratch directory) is written to a ledger before it is made, and
//! crossed off when plumb takes it down. A plumb that is killed (kill -9, the out-of-memory
//! killer, a lost terminal in the wrong place) leaves its ledger behind; the next plumb command,
//! whatever it is, takes down what that ledger still lists and says what it removed
//! ([`reclaim`]).
//!
//! The ledgers are files in `/run/plumb/ledger` (root only: what needs root to make is what
//! outlives plumb), one per plumb process, each held with an exclusive `flock` for as long as its
//! process lives. A ledger nobody holds is a dead plumb's: the lock, not a PID, says so, so a
//! reused PID cannot fool it. Lines are JSON, appended: `{"id":N,"item":{…}}` when something is
//! about to be made, `{"gone":N}` when it was taken down.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Something plumb makes that can outlive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Item {
    /// A child process (its start time in clock ticks tells it from a later process with the
    /// same PID): asked to stop with SIGTERM, killed after 5 s.
    Process { pid: u32, start: u64, what: String },
    /// A zram device plumb made swap: swapped off, reset, and removed if plumb added it.
    Zram {
        name: String,
        hot_added: Option<u32>,
    },
    /// A cgroup directory plumb made: its limits lifted, what still runs in it moved to
    /// `back_to`, the directory removed.
    Cgroup { dir: PathBuf, back_to: PathBuf },
    /// A private database server's directory: stopped and removed (by the engine crate's
    /// undo, given to [`reclaim`]).
    Engine { dir: PathBuf },
    /// A scratch directory: removed with what is in it.
    Dir { path: PathBuf },
    /// A `plumb fs` mount (FUSE, source `plumb:…`): detached, only if it is still plumb's.
    Mount { path: PathBuf },
    /// A database plumb created on a server: `engine` (PostgreSQL, MariaDB, SQL Server),
    /// `server` (host and port, or socket: never a user or a password), its `name`, the `run`
    /// token plumb marked it with, and the names of the `objects` plumb makes in it. plumb
    /// keeps no password, so a dead plumb's database waits in the pending list
    /// ([`pending_databases`]) for the next plumb that connects to that server.
    Database {
        engine: String,
        server: String,
        name: String,
        run: String,
        objects: Vec<String>,
    },
}

impl Item {
    fn describe(&self) -> String {
        match self {
            Item::Process { pid, what, .. } => format!("{what} (PID {pid})"),
            Item::Zram { name, .. } => format!("the zram swap /dev/{name}"),
            Item::Cgroup { dir, .. } => format!("the cgroup {}", dir.display()),
            Item::Engine { dir } => format!("the private database server in {}", dir.display()),
            Item::Dir { path } => format!("the scratch directory {}", path.display()),
            Item::Mount { path } => format!("the plumb fs mount on {}", path.display()),
            Item::Database {
                engine,
                server,
                name,
                ..
            } => format!("the database {name} on {engine} at {server}"),
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Made { id: u64, item: Item },
    Gone { gone: u64 },
}

/// Where the ledgers are (root only).
pub const DIR: &str = "/run/plumb/ledger";

struct Own {
    file: File,
    next: u64,
}

static OWN: Mutex<Option<Own>> = Mutex::new(None);

/// A handle on one entry: [`Entry::done`] crosses it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry(Option<u64>);

impl Entry {
    /// Nothing was noted (no ledger here: not root).
    pub const NONE: Entry = Entry(None);

    /// The thing was taken down: cross it off.
    pub fn done(self) {
        let Some(id) = self.0 else { return };
        let mut g = OWN.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(own) = g.as_mut() {
            let _ = writeln!(own.file, "{}", serde_json::json!({ "gone": id }));
        }
    }
}

fn lock(f: &File, wait: bool) -> bool {
    let op = libc::LOCK_EX | if wait { 0 } else { libc::LOCK_NB };
    // SAFETY: flock on a descriptor this File owns.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

/// The ledger directory, made if missing; None when it cannot be trusted (not root's, not a
/// directory, open to others) or plumb is not root.
fn ledger_dir() -> Option<PathBuf> {
    if !crate::os::is_root() {
        return None;
    }
    let dir = PathBuf::from(DIR);
    for d in [Path::new("/run/plumb"), dir.as_path()] {
        match std::fs::symlink_metadata(d) {
            Err(_) => {
                std::fs::create_dir(d).ok()?;
                std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o700))
                    .ok()?;
            }
            Ok(m) if m.is_dir() && m.uid() == 0 && m.mode() & 0o022 == 0 => {}
            Ok(_) => return None,
        }
    }
    Some(dir)
}

fn ledger_of(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.ledger"))
}

/// Note `item` in this process's ledger before making it. Without a ledger (not root) nothing
/// is written and the entry is [`Entry::NONE`].
pub fn note(item: Item) -> Entry {
    let mut g = OWN.lock().unwrap_or_else(|e| e.into_inner());
    if g.is_none() {
        let Some(dir) = ledger_dir() else {
            return Entry::NONE;
        };
        let path = ledger_of(&dir, std::process::id());
        // A ledger with this PID is a dead plumb's (the PID is ours now): its things first.
        if path.exists() {
            drop(g);
            reclaim_file(&path, &|_| Err("not here".into()));
            g = OWN.lock().unwrap_or_else(|e| e.into_inner());
        }
        // Made under another name, locked, then renamed: another plumb's reclaim never sees
        // it unlocked.
        let new = path.with_extension("new");
        let _ = std::fs::remove_file(&new);
        let Ok(file) = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&new)
        else {
            return Entry::NONE;
        };
        if !lock(&file, false) || std::fs::rename(&new, &path).is_err() {
            let _ = std::fs::remove_file(&new);
            return Entry::NONE;
        }
        *g = Some(Own { file, next: 0 });
    }
    let own = g.as_mut().expect("opened above");
    own.next += 1;
    let id = own.next;
    let line = serde_json::to_string(&Line::Made { id, item }).unwrap_or_default();
    if writeln!(own.file, "{line}").is_err() {
        return Entry::NONE;
    }
    Entry(Some(id))
}

/// A process's start time (clock ticks after boot), from /proc/PID/stat.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Note a child process just started (so a killed plumb's children are ended by the next).
pub fn note_child(pid: u32, what: &str) -> Entry {
    match start_time(pid) {
        Some(start) => note(Item::Process {
            pid,
            start,
            what: what.to_string(),
        }),
        None => Entry::NONE,
    }
}

/// What a killed plumb left and the next one removed: one line each.
#[derive(Debug, Clone, PartialEq)]
pub struct Reclaimed {
    /// The dead plumb's PID.
    pub pid: u32,
    /// What it was, and what was done ("removed", or why it could not be).
    pub what: String,
    pub outcome: Result<(), String>,
    /// Not taken down now, by design: the error says what takes it down later (a database on
    /// a server, which only a plumb that connects there can drop).
    pub deferred: bool,
}

/// Take down what dead plumbs' ledgers still list, newest first; `engine` stops and removes a
/// private database server's directory. Returns what was found.
pub fn reclaim(engine: &dyn Fn(&Path) -> Result<(), String>) -> Vec<Reclaimed> {
    let Some(dir) = ledger_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Twice: ending a dead plumb's child (itself a plumb) unlocks the child's own ledger.
    for _ in 0..2 {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return out;
        };
        let mut files: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "ledger"))
            .collect();
        files.sort();
        let mut any = false;
        for f in files {
            if f == ledger_of(&dir, std::process::id()) {
                continue;
            }
            let r = reclaim_file(&f, engine);
            any |= !r.is_empty();
            out.extend(r);
        }
        if !any {
            break;
        }
    }
    out
}

/// Reclaim one ledger if its plumb is dead (nobody holds it); the file is removed after.
fn reclaim_file(path: &Path, engine: &dyn Fn(&Path) -> Result<(), String>) -> Vec<Reclaimed> {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return Vec::new();
    };
    if !m.is_file() || m.uid() != 0 {
        return Vec::new();
    }
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    else {
        return Vec::new();
    };
    if !lock(&file, false) {
        // Its plumb is alive.
        return Vec::new();
    }
    let pid: u32 = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut made: Vec<(u64, Item)> = Vec::new();
    for line in BufReader::new(&file).lines().map_while(Result::ok) {
        match serde_json::from_str::<Line>(&line) {
            Ok(Line::Made { id, item }) => made.push((id, item)),
            Ok(Line::Gone { gone }) => made.retain(|(id, _)| *id != gone),
            Err(_) => {}
        }
    }
    // The same thing noted twice (a standby the lab and the engine both noted) is undone once,
    // where it was first noted.
    let mut seen: Vec<Item> = Vec::new();
    made.retain(|(_, item)| {
        let new = !seen.contains(item);
        seen.push(item.clone());
        new
    });
    // Limits first: a server held back by a cgroup's write throttle or memory limit would take
    // long to stop.
    for (_, item) in &made {
        if let Item::Cgroup { dir, .. } = item {
            lift_limits(dir);
        }
    }
    let mut out = Vec::new();
    // A server that could not be stopped keeps the directory it lives in.
    let mut kept: Vec<PathBuf> = Vec::new();
    for (_, item) in made.into_iter().rev() {
        if let Item::Database { engine, server, .. } = &item {
            let (outcome, deferred) = match carry(pid, &item) {
                Ok(()) => (Err(format!(
                    "plumb keeps no password for {engine} at {server}, so the next plumb load or plumb lab that connects there drops it (if it is still plumb's alone)"
                )), true),
                Err(e) => (Err(format!("noting it for later: {e}; drop it by hand")), false),
            };
            out.push(Reclaimed {
                pid,
                what: item.describe(),
                outcome,
                deferred,
            });
            continue;
        }
        let outcome = match &item {
            Item::Dir { path } if kept.iter().any(|k| k.starts_with(path)) => Err(format!(
                "it holds {}, which is still there",
                kept.iter()
                    .map(|k| k.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => undo(&item, engine),
        };
        if let (Item::Engine { dir }, Err(_)) = (&item, &outcome) {
            kept.push(dir.clone());
        }
        out.push(Reclaimed {
            pid,
            what: item.describe(),
            outcome,
            deferred: false,
        });
    }
    let _ = std::fs::remove_file(path);
    out
}

/// Lift a cgroup's memory limit and its I/O throttles (v2 `io.max`, v1 `blkio.throttle.*`).
fn lift_limits(dir: &Path) {
    if !dir.starts_with("/sys/fs/cgroup") || !dir.is_dir() {
        return;
    }
    for (f, v) in [
        ("memory.max", "max"),
        ("memory.limit_in_bytes", "-1"),
        ("memory.swap.max", "max"),
    ] {
        let _ = std::fs::write(dir.join(f), v);
    }
    // Each throttled device's line: "MAJ:MIN ..." (v2) or "MAJ:MIN VALUE" (v1).
    let devices = |f: &str| -> Vec<String> {
        std::fs::read_to_string(dir.join(f))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .filter(|d| d.contains(':'))
            .collect()
    };
    for d in devices("io.max") {
        let _ = std::fs::write(
            dir.join("io.max"),
            format!("{d} rbps=max wbps=max riops=max wiops=max"),
        );
    }
    for f in [
        "blkio.throttle.write_iops_device",
        "blkio.throttle.write_bps_device",
        "blkio.throttle.read_iops_device",
        "blkio.throttle.read_bps_device",
    ] {
        for d in devices(f) {
            let _ = std::fs::write(dir.join(f), format!("{d} 0"));
        }
    }
}

fn undo(item: &Item, engine: &dyn Fn(&Path) -> Result<(), String>) -> Result<(), String> {
    match item {
        Item::Process { pid, start, .. } => {
            if start_time(*pid) != Some(*start) {
                return Ok(());
            }
            crate::os::signal(*pid, libc::SIGTERM);
            let t0 = Instant::now();
            while start_time(*pid) == Some(*start) && !zombie(*pid) {
                if t0.elapsed() > Duration::from_secs(5) {
                    crate::os::signal(*pid, libc::SIGKILL);
                    std::thread::sleep(Duration::from_millis(200));
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(())
        }
        Item::Zram { name, hot_added } => {
            if !name.starts_with("zram") || name.contains('/') {
                return Err("not a zram device name".into());
            }
            let dev = format!("/dev/{name}");
            let swaps = std::fs::read_to_string("/proc/swaps").unwrap_or_default();
            if swaps
                .lines()
                .any(|l| l.split_whitespace().next() == Some(&dev))
            {
                let c = std::ffi::CString::new(dev.clone()).map_err(|e| e.to_string())?;
                // SAFETY: a valid path.
                if unsafe { libc::swapoff(c.as_ptr()) } != 0 {
                    return Err(format!(
                        "swapoff {dev}: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            let _ = std::fs::write(format!("/sys/block/{name}/reset"), "1");
            if let Some(id) = hot_added {
                let _ = std::fs::write("/sys/class/zram-control/hot_remove", id.to_string());
            }
            Ok(())
        }
        Item::Cgroup { dir, back_to } => {
            if !dir.starts_with("/sys/fs/cgroup") || !dir.is_dir() {
                return Ok(());
            }
            lift_limits(dir);
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for p in procs.split_whitespace() {
                let _ = std::fs::write(back_to.join("cgroup.procs"), p);
            }
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            std::fs::remove_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))
        }
        Item::Engine { dir } => {
            if !dir.exists() {
                return Ok(());
            }
            engine(dir)
        }
        // Carried to the pending list before undo is reached (see reclaim_file).
        Item::Database { .. } => {
            Err("a database on a server is dropped by a plumb that connects there".into())
        }
        Item::Mount { path } => {
            let mounts = crate::mount::read_mountinfo(&crate::Root::host(), None)
                .map_err(|e| e.to_string())?;
            let ours = mounts.iter().any(|m| {
                Path::new(&m.mount_point) == path
                    && (m.fs_type == "fuse" || m.fs_type.starts_with("fuse."))
                    && m.source.starts_with("plumb:")
            });
            if !ours {
                return Ok(());
            }
            crate::os::unmount(path, true).map_err(|e| format!("{}: {e}", path.display()))
        }
        Item::Dir { path } => match std::fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                std::fs::remove_dir_all(path).map_err(|e| format!("{}: {e}", path.display()))
            }
            _ => Ok(()),
        },
    }
}

/// The databases dead plumbs left on servers, one JSON line each (`{"pid":N,"item":{…}}`),
/// in the ledger directory.
const PENDING: &str = "databases.pending";

/// A database a dead plumb created on a server and did not drop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingDb {
    /// The dead plumb's PID.
    pub pid: u32,
    pub item: Item,
}

/// Run `f` on the pending list's lines, holding its lock; what `f` returns is written back.
fn with_pending<T>(f: impl FnOnce(&mut Vec<PendingDb>) -> T) -> std::io::Result<T> {
    let Some(dir) = ledger_dir() else {
        return Err(std::io::Error::other("no ledger here (not root)"));
    };
    let path = dir.join(PENDING);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    if !lock(&file, true) {
        return Err(std::io::Error::last_os_error());
    }
    let mut list: Vec<PendingDb> = BufReader::new(&file)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect();
    let before = list.clone();
    let out = f(&mut list);
    if list != before {
        use std::io::{Seek, SeekFrom};
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        for p in &list {
            writeln!(file, "{}", serde_json::to_string(p).unwrap_or_default())?;
        }
    }
    Ok(out)
}

/// Put a dead plumb's database on the pending list.
fn carry(pid: u32, item: &Item) -> std::io::Result<()> {
    with_pending(|list| {
        let p = PendingDb {
            pid,
            item: item.clone(),
        };
        if !list.contains(&p) {
            list.push(p);
        }
    })
}

/// The databases dead plumbs left on `engine` at `server` (as [`Item::Database`] names
/// them), oldest first. Empty when plumb is not root (no ledger).
pub fn pending_databases(engine: &str, server: &str) -> Vec<PendingDb> {
    with_pending(|list| {
        list.iter()
            .filter(|p| {
                matches!(&p.item, Item::Database { engine: e, server: s, .. } if e == engine && s == server)
            })
            .cloned()
            .collect()
    })
    .unwrap_or_default()
}

/// Take run `run`'s database off the pending list (dropped, or gone).
pub fn settle_database(run: &str) {
    let _ = with_pending(|list| {
        list.retain(|p| !matches!(&p.item, Item::Database { run: r, .. } if r == run))
    });
}

/// Whether a live plumb's ledger lists a database with run token `run` (a load that is still
/// going): its PID.
pub fn live_database_run(run: &str) -> Option<u32> {
    let dir = ledger_dir()?;
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "ledger") {
            continue;
        }
        let Ok(file) = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        else {
            continue;
        };
        let listed = BufReader::new(&file).lines().map_while(Result::ok).any(|l| {
            matches!(serde_json::from_str::<Line>(&l), Ok(Line::Made { item: Item::Database { run: r, .. }, .. }) if r == run)
        });
        if !listed {
            continue;
        }
        // Held by its process: alive (ours included). Not held: dead, its reclaim to come.
        if !lock(&file, false) {
            return path.file_stem()?.to_str()?.parse().ok();
        }
    }
    None
}

fn zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

/// Make a child end when the thread that started it ends (the parent-death signal), and
/// refuse to run if plumb is already gone. For `Command::pre_exec`; async-signal-safe.
///
/// # Safety
/// Call only between fork and exec (as `pre_exec` does).
pub unsafe fn die_with_parent(parent: libc::pid_t, sig: libc::c_int) -> std::io::Result<()> {
    if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if libc::getppid() != parent {
        libc::_exit(1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let l = Line::Made {
            id: 3,
            item: Item::Zram {
                name: "zram1".into(),
                hot_added: Some(1),
            },
        };
        let s = serde_json::to_string(&l).unwrap();
        assert_eq!(
            s,
            r#"{"id":3,"item":{"kind":"zram","name":"zram1","hot_added":1}}"#
        );
        assert!(matches!(
            serde_json::from_str::<Line>(r#"{"gone":3}"#).unwrap(),
            Line::Gone { gone: 3 }
        ));
        assert!(start_time(std::process::id()).is_some());
    }
}
