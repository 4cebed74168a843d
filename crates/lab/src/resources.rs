//! What the lab creates, one guard each: dropping a guard removes what it holds, so a lab that
//! fails or is stopped anywhere cleans up by leaving scope. [`Resources`] holds them in the
//! order they must go: the pressure program first (it takes its swap device down), then the
//! scratch database, the server, the work directory, and last the cgroup (plumb moves out).

use crate::error::{Context as _, Result};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The file in a lab's work directory that names the lab's PID.
pub const LAB_MARKER: &str = "plumb-lab.pid";

/// Fields drop in declaration order: this is the cleanup order.
#[derive(Default)]
pub struct Resources {
    pub pressure: Option<PressureChild>,
    /// The workload's database on plumb's driver, kept for the experiments to run again.
    pub driver_db: Option<crate::server_db::ServerDb>,
    pub scratch_db: Option<crate::server_db::ServerDb>,
    /// A second private instance an experiment needs for a while (the O_DIRECT WAL loops).
    pub second_instance: Option<Instance>,
    /// A standby of the private instance (--replica), removed before it, and its cgroup (the
    /// throttle on its writes) after it.
    pub standby: Option<Instance>,
    pub standby_cgroup: Option<plumb_io::labcg::LabCgroup>,
    /// Disks whose writes the standby's cgroup throttles now.
    pub standby_throttled: Vec<plumb_sys::DevNum>,
    pub instance: Option<Instance>,
    pub work: Option<WorkDir>,
    pub cgroup: Option<plumb_io::labcg::LabCgroup>,
}

impl Drop for Resources {
    fn drop(&mut self) {
        // A limit left on the cgroup would hold the server back while it stops.
        if let Some(cg) = &self.cgroup {
            let _ = cg.set_memory_limit(None);
        }
        // Nor may a throttle hold the standby back while it stops.
        if let Some(cg) = &self.standby_cgroup {
            for dev in std::mem::take(&mut self.standby_throttled) {
                let _ = cg.set_write_iops(dev, None);
            }
        }
    }
}

/// A `plumb mem pressure` child: stopped the way Ctrl-C would stop it, so it takes its zram
/// swap device down. It is in plumb's ledger, and gets SIGTERM if the lab dies.
pub struct PressureChild(pub Child, pub plumb_sys::ledger::Entry);

impl PressureChild {
    /// SIGINT, a minute to end, then SIGKILL.
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        plumb_sys::os::signal(self.0.id(), libc::SIGINT);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for PressureChild {
    fn drop(&mut self) {
        self.stop_now();
        self.1.done();
    }
}

/// plumb's private server (PostgreSQL or MariaDB): stopped and its files removed when this goes.
pub struct Instance {
    pub dir: PathBuf,
    ledger: plumb_sys::ledger::Entry,
}

impl Instance {
    /// The instance that is about to be made in `dir`, noted in plumb's ledger first.
    pub fn new(dir: PathBuf) -> Instance {
        let ledger = plumb_sys::ledger::note(plumb_sys::ledger::Item::Engine { dir: dir.clone() });
        Instance { dir, ledger }
    }

    /// Whether the server died under the lab (its data is there, its postmaster is not).
    pub fn died(&self) -> bool {
        self.dir.join("data").exists()
            && matches!(
                plumb_engine::private_maria::running_any(&self.dir),
                Ok(false)
            )
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if !self.dir.exists() {
            self.ledger.done();
            return;
        }
        match plumb_engine::private_maria::remove_any(&self.dir) {
            Ok(_) => self.ledger.done(),
            Err(e) => {
                eprintln!(
                    "plumb: warning: stopping and removing the lab's database server: {}",
                    plumb_sys::visible::lines(&e.to_string())
                )
            }
        }
    }
}

/// The lab's work directory: removed, with everything in it, when this goes.
pub struct WorkDir {
    pub path: PathBuf,
    ledger: plumb_sys::ledger::Entry,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.path) {
            Ok(()) => self.ledger.done(),
            Err(e) => eprintln!("plumb: warning: removing {}: {e}", self.path.display()),
        }
    }
}

impl WorkDir {
    /// A new directory of plumb's own under `parent` (never one that was there: a name taken,
    /// or a link planted, makes it try another). Others may pass through it (the server's user
    /// must reach its instance inside) but not list it. Its marker names this lab's PID.
    pub fn create(parent: &Path) -> Result<WorkDir> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        // As root, only where nobody else can change the way there.
        plumb_engine::private::trusted_place(&parent.join("plumb-lab"))
            .map_err(|e| crate::Error::Refused(format!("--dir: {e}")))?;
        let pid = std::process::id();
        let mut last = None;
        for i in 0..100u64 {
            let salt =
                (plumb_record::now_unix_ms() ^ (i << 20)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44;
            let p = parent.join(format!("plumb-lab-{pid}-{salt:05x}"));
            let ledger = plumb_sys::ledger::note(plumb_sys::ledger::Item::Dir { path: p.clone() });
            match std::fs::DirBuilder::new().mode(0o711).create(&p) {
                Ok(()) => {
                    let w = WorkDir { path: p, ledger };
                    // The mode asked for, whatever the umask.
                    std::fs::set_permissions(&w.path, std::fs::Permissions::from_mode(0o711))
                        .with_context(|| format!("--dir: {}", w.path.display()))?;
                    // Says whose it is, so a later lab can clean up after this one if it is
                    // killed.
                    write_marker(&w.path.join(LAB_MARKER), pid)
                        .with_context(|| format!("--dir: {}", w.path.display()))?;
                    return Ok(w);
                }
                // Not made: someone else's, never to be removed.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    ledger.done();
                    last = Some(e)
                }
                Err(e) => {
                    ledger.done();
                    crate::refuse!("--dir: cannot create {}: {e}", p.display())
                }
            }
        }
        crate::refuse!(
            "--dir {}: cannot create a new directory there: {}",
            parent.display(),
            last.map(|e| e.to_string()).unwrap_or_default()
        )
    }
}

fn write_marker(path: &Path, pid: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    writeln!(f, "{pid}")
}

/// Labs killed outright (SIGKILL, out of memory, a power cut) leave their work directory, and
/// maybe their PostgreSQL running in it. A lab directory under `parent` whose marker names a PID
/// that is gone, owned by this user, is stopped and removed.
pub(crate) fn remove_dead_labs(parent: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    let me = plumb_sys::os::euid();
    for e in rd.flatten() {
        let dir = e.path();
        let named = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("plumb-lab-"));
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !named || !m.is_dir() || m.uid() != me {
            continue;
        }
        let marker = dir.join(LAB_MARKER);
        let pid = match std::fs::symlink_metadata(&marker) {
            Ok(mm) if mm.is_file() && mm.uid() == me && mm.len() < 32 => {
                std::fs::read_to_string(&marker)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
            }
            _ => None,
        };
        let Some(pid) = pid else { continue };
        if plumb_sys::process::alive(pid) {
            continue;
        }
        eprintln!(
            "plumb: {} was left by a lab that was killed (PID {pid}); stopping its database server and removing it",
            dir.display()
        );
        // Once more after a pause: the dead lab's server may have been starting or stopping.
        let remove = || -> Result<()> {
            for server in ["pg", "mariadb"] {
                plumb_engine::private_maria::remove_any(&dir.join(server))?;
            }
            Ok(())
        };
        let removed = remove().or_else(|_| {
            std::thread::sleep(Duration::from_secs(1));
            remove()
        });
        if let Err(err) = removed {
            eprintln!("plumb: warning: {err}; {} left alone", dir.display());
            continue;
        }
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            eprintln!("plumb: warning: removing {}: {err}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_dir_is_new_marked_and_removed_when_dropped() {
        let parent = tempfile::tempdir().unwrap();
        let w = WorkDir::create(parent.path()).unwrap();
        let p = w.path.clone();
        let marker = std::fs::read_to_string(p.join(LAB_MARKER)).unwrap();
        assert_eq!(marker.trim(), std::process::id().to_string());
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o711
        );
        std::fs::write(p.join("x"), b"y").unwrap();
        drop(w);
        assert!(!p.exists());
    }

    #[test]
    fn only_dead_labs_directories_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let live = WorkDir::create(parent.path()).unwrap();
        // A lab that died: a PID that cannot be alive.
        let dead = parent.path().join("plumb-lab-999999999-00000");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(LAB_MARKER), "4194305\n").unwrap();
        // Not a lab's: no marker.
        let other = parent.path().join("plumb-lab-mine");
        std::fs::create_dir(&other).unwrap();
        remove_dead_labs(parent.path());
        assert!(!dead.exists());
        assert!(live.path.exists() && other.exists());
    }
}

/// Take down what plumbs that were killed left behind: what their ledgers list (processes,
/// swap, cgroups, private servers, directories, mounts) and their trace instances and
/// uprobes. Every command runs this first; each item says what it was and how it went.
pub fn reclaim_killed() -> Vec<plumb_sys::ledger::Reclaimed> {
    let engine = |dir: &std::path::Path| -> Result<(), String> {
        plumb_engine::private_maria::remove_any(dir)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let mut out = plumb_sys::ledger::reclaim(&engine);
    out.extend(
        plumb_sys::tracefs::reclaim_dead()
            .into_iter()
            .map(|(pid, what)| plumb_sys::ledger::Reclaimed {
                pid,
                what,
                outcome: Ok(()),
                deferred: false,
            }),
    );
    out
}
