//! A cgroup of plumb's own for the lab's experiments: the memory controller (a limit) and the
//! io (v2) or blkio (v1) controller (a write throttle). plumb moves itself in before it starts
//! the server, so the server and every backend it forks are born inside and their memory is
//! charged there. On drop plumb moves back and removes the directories; whatever else was
//! inside (the server) must have stopped first.

use crate::{Error, Result};
use plumb_sys::DevNum;
use std::path::{Path, PathBuf};

struct Dir {
    dir: PathBuf,
    version: u8,
    /// Where plumb was before, to go back to.
    back_to: PathBuf,
}

pub struct LabCgroup {
    memory: Option<Dir>,
    io: Option<Dir>,
    ledger: Vec<plumb_sys::ledger::Entry>,
}

fn write(path: &Path, v: &str) -> Result<()> {
    std::fs::write(path, v).map_err(|e| Error::Refused(format!("{}: {e}", path.display())))
}

use plumb_sys::cgroup::own_path;

impl LabCgroup {
    /// Create `name` under the hierarchies that have the controllers asked for, and move this
    /// process in. Needs root.
    pub fn create(name: &str, memory: bool, io: bool) -> Result<LabCgroup> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err(Error::Refused(
                "creating cgroups for the experiments needs root".into(),
            ));
        }
        let root = plumb_sys::Root::host();
        let mounts = plumb_sys::mount::read_mountinfo(&root, None)
            .map_err(|e| Error::Refused(e.to_string()))?;
        let cg = plumb_sys::cgroup::CgroupMounts::from_mounts(&mounts);
        let mut out = LabCgroup {
            memory: None,
            io: None,
            ledger: Vec::new(),
        };
        let find = |v1: &str, v2: &str| -> Result<(PathBuf, u8, PathBuf)> {
            if let Some((_, m)) = cg.v1.iter().find(|(c, _)| c.iter().any(|x| x == v1)) {
                let own = own_path(Some(v1)).unwrap_or_else(|| "/".into());
                let mp = PathBuf::from(&m.mount_point);
                let back = mp.join(own.trim_start_matches('/'));
                return Ok((mp, 1, back));
            }
            if let Some(m) = &cg.v2 {
                let mp = PathBuf::from(&m.mount_point);
                let ctl =
                    std::fs::read_to_string(mp.join("cgroup.subtree_control")).unwrap_or_default();
                if ctl.split_whitespace().any(|c| c == v2) {
                    let own = own_path(None).unwrap_or_else(|| "/".into());
                    return Ok((mp.clone(), 2, mp.join(own.trim_start_matches('/'))));
                }
            }
            Err(Error::Refused(format!(
                "no {v1} cgroup controller here (neither a v1 hierarchy nor enabled in v2's root cgroup.subtree_control); plumb does not change that"
            )))
        };
        let mut made: Vec<PathBuf> = Vec::new();
        for (want, v1, v2) in [(memory, "memory", "memory"), (io, "blkio", "io")] {
            if !want {
                continue;
            }
            let (mp, version, back_to) = find(v1, v2)?;
            let dir = mp.join(name);
            if !made.contains(&dir) {
                out.ledger
                    .push(plumb_sys::ledger::note(plumb_sys::ledger::Item::Cgroup {
                        dir: dir.clone(),
                        back_to: back_to.clone(),
                    }));
                std::fs::create_dir(&dir).map_err(|e| {
                    Error::Refused(format!("cannot create the cgroup {}: {e}", dir.display()))
                })?;
                made.push(dir.clone());
            }
            let d = Dir {
                dir,
                version,
                back_to,
            };
            if v1 == "memory" {
                out.memory = Some(d);
            } else {
                out.io = Some(d);
            }
        }
        // Move in (one write per distinct directory).
        let pid = std::process::id().to_string();
        for d in &made {
            write(&d.join("cgroup.procs"), &pid)?;
        }
        Ok(out)
    }

    /// The memory cgroup's directory.
    pub fn memory_dir(&self) -> Option<&Path> {
        self.memory.as_ref().map(|d| d.dir.as_path())
    }

    /// Set (Some) or lift (None) the memory limit.
    pub fn set_memory_limit(&self, bytes: Option<u64>) -> Result<()> {
        let d = self
            .memory
            .as_ref()
            .ok_or_else(|| Error::Refused("no memory cgroup".into()))?;
        let (file, v) = match (d.version, bytes) {
            (1, Some(b)) => ("memory.limit_in_bytes", b.to_string()),
            (1, None) => ("memory.limit_in_bytes", "-1".to_string()),
            (_, Some(b)) => ("memory.max", b.to_string()),
            (_, None) => ("memory.max", "max".to_string()),
        };
        write(&d.dir.join(file), &v)
    }

    /// Move plumb back to where it was, leaving what it started meanwhile inside (a server
    /// born in the cgroup stays there; what plumb starts next is not).
    pub fn leave(&self) -> Result<()> {
        let pid = std::process::id().to_string();
        for d in self.memory.iter().chain(self.io.iter()) {
            write(&d.back_to.join("cgroup.procs"), &pid)?;
        }
        Ok(())
    }

    /// Throttle (Some) or release (None) writes to a whole disk, in write requests per second:
    /// every write then waits for its turn, which is what a slow disk's latency looks like.
    pub fn set_write_iops(&self, dev: DevNum, iops: Option<u64>) -> Result<()> {
        self.set_write_limit(dev, "blkio.throttle.write_iops_device", "wiops", iops)
    }

    /// Throttle (Some) or release (None) writes to a whole disk, in bytes per second.
    pub fn set_write_bps(&self, dev: DevNum, bps: Option<u64>) -> Result<()> {
        self.set_write_limit(dev, "blkio.throttle.write_bps_device", "wbps", bps)
    }

    /// One write limit: v1's blkio file (0 lifts it), or v2's io.max key (max lifts it).
    fn set_write_limit(
        &self,
        dev: DevNum,
        v1_file: &str,
        v2_key: &str,
        v: Option<u64>,
    ) -> Result<()> {
        let d = self
            .io
            .as_ref()
            .ok_or_else(|| Error::Refused("no io cgroup".into()))?;
        if d.version == 1 {
            write(&d.dir.join(v1_file), &format!("{dev} {}", v.unwrap_or(0)))
        } else {
            write(
                &d.dir.join("io.max"),
                &format!(
                    "{dev} {v2_key}={}",
                    v.map(|b| b.to_string()).unwrap_or_else(|| "max".into())
                ),
            )
        }
    }
}

impl Drop for LabCgroup {
    fn drop(&mut self) {
        let pid = std::process::id().to_string();
        let dirs: Vec<&Dir> = self.memory.iter().chain(self.io.iter()).collect();
        for d in &dirs {
            let _ = std::fs::write(d.back_to.join("cgroup.procs"), &pid);
        }
        for d in &dirs {
            if d.dir.exists() {
                // Exited processes leave a moment later; try for a few seconds.
                for _ in 0..50 {
                    if std::fs::remove_dir(&d.dir).is_ok() || !d.dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            }
        }
        for e in self.ledger.drain(..) {
            e.done();
        }
    }
}
