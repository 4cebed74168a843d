//! Block-layer evidence from tracefs: which requests a device really received (plain writes,
//! cache FLUSHes, FUA writes), from the `block:block_rq_issue` tracepoint's rwbs flags.
//!
//! plumb traces in its own tracefs instance (`instances/plumb-PID`), so it never touches the
//! global trace buffer or other tools' settings. The instances are also the register of who
//! traces: under a lock (`/run/plumb/tracefs.lock`) each session removes the instances of plumb
//! runs that died without cleaning up, and tracefs is unmounted only when plumb mounted it and
//! the last plumb instance is gone.

use crate::DevNum;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Requests counted by kind. One request can be both a write and FUA, or a write with a
/// preflush; `flushes` counts stand-alone FLUSH requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RqCounts {
    pub reads: u64,
    pub writes: u64,
    /// Writes carrying FUA: durable on arrival, no cache flush needed.
    pub fua_writes: u64,
    /// Writes carrying a preflush (the cache is flushed before the write).
    pub preflush_writes: u64,
    /// Stand-alone cache FLUSH requests.
    pub flushes: u64,
    /// Writes flagged as filesystem metadata (journal commits and the like).
    pub meta_writes: u64,
    pub other: u64,
    /// Events the trace buffer dropped: the counts above are then lower bounds.
    pub lost_events: u64,
}

/// Classify one rwbs string as the kernel's blk_fill_rwbs writes it: an optional `F`
/// (preflush), the op (`W` `R` `D` `F` lush, `N` other), then `F` (FUA), `A`, `S`, `M`.
pub fn classify(rwbs: &str, c: &mut RqCounts) {
    let b = rwbs.as_bytes();
    if b.is_empty() {
        c.other += 1;
        return;
    }
    let (preflush, op, rest) = if b.len() >= 2 && b[0] == b'F' && b"WRDFN".contains(&b[1]) {
        (true, b[1], &b[2..])
    } else {
        (false, b[0], &b[1..])
    };
    let fua = rest.first() == Some(&b'F');
    let meta = rest.contains(&b'M');
    match op {
        b'W' => {
            c.writes += 1;
            if fua {
                c.fua_writes += 1;
            }
            if preflush {
                c.preflush_writes += 1;
            }
            if meta {
                c.meta_writes += 1;
            }
        }
        b'R' => c.reads += 1,
        b'F' => c.flushes += 1,
        _ => c.other += 1,
    }
}

/// Count the block_rq_issue lines of a trace buffer dump.
pub fn count_trace(text: &str) -> RqCounts {
    let mut c = RqCounts::default();
    for line in text.lines() {
        let Some(i) = line.find("block_rq_issue: ") else {
            continue;
        };
        let mut f = line[i + "block_rq_issue: ".len()..].split_whitespace();
        let (_dev, Some(rwbs)) = (f.next(), f.next()) else {
            continue;
        };
        classify(rwbs, &mut c);
    }
    c
}

/// A tracing session on some devices. Dropping it removes the instance, and unmounts tracefs
/// when plumb mounted it and no other plumb traces any more.
pub struct BlockTrace {
    instance: PathBuf,
    tracefs: PathBuf,
}

/// Where plumb keeps what its runs share on this host (root only): the lock that orders
/// tracing sessions, and the note that plumb mounted tracefs.
const RUN_DIR: &str = "/run/plumb";
const MOUNTED_NOTE: &str = "tracefs-mounted-by-plumb";
const INSTANCE_PREFIX: &str = "plumb-";

fn write(p: &Path, v: &str) -> Result<(), String> {
    fs::write(p, v).map_err(|e| format!("cannot write {}: {e}", p.display()))
}

/// Serialises plumb's tracing sessions on this host (mount, instances, unmount).
struct TraceLock(#[allow(dead_code)] fs::File);

impl TraceLock {
    fn take() -> Result<TraceLock, String> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
        let dir = Path::new(RUN_DIR);
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {RUN_DIR}: {e}")),
        }
        let m = fs::symlink_metadata(dir).map_err(|e| format!("{RUN_DIR}: {e}"))?;
        if !m.is_dir() || m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(format!(
                "{RUN_DIR}: not a directory only root can write (mode {:o}, owner {}); plumb will not trust it",
                m.mode() & 0o7777,
                m.uid()
            ));
        }
        let p = dir.join("tracefs.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&p)
            .map_err(|e| format!("cannot open {}: {e}", p.display()))?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on an fd we own; blocks while another plumb sets up or tears down.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "cannot lock {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(TraceLock(f))
    }
}

/// plumb's instances under `tracefs`: (PID, path).
fn plumb_instances(tracefs: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(rd) = fs::read_dir(tracefs.join("instances")) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let n = e.file_name();
            let pid = n
                .to_str()?
                .strip_prefix(INSTANCE_PREFIX)?
                .parse::<u32>()
                .ok()?;
            Some((pid, e.path()))
        })
        .collect()
}

fn remove_instance(instance: &Path) {
    let _ = fs::write(instance.join("events/block/block_rq_issue/enable"), "0");
    let _ = fs::write(instance.join("tracing_on"), "0");
    let _ = fs::remove_dir(instance);
}

/// Remove the instances of plumb runs that died without cleaning up (killed, or the machine
/// lost power). Returns their paths.
pub fn remove_dead_instances(tracefs: &Path) -> Vec<PathBuf> {
    let me = std::process::id();
    let mut out = Vec::new();
    for (pid, p) in plumb_instances(tracefs) {
        if pid != me && !crate::process::alive(pid) {
            remove_instance(&p);
            out.push(p);
        }
    }
    out
}

fn mounted_tracefs() -> Option<PathBuf> {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .into_iter()
        .find(|d| Path::new(d).join("instances").is_dir())
        .map(PathBuf::from)
}

/// tracefs, mounted by plumb when it was not (root only); the mount is noted so that the last
/// plumb to trace unmounts it.
fn tracefs_dir() -> Result<PathBuf, String> {
    if let Some(d) = mounted_tracefs() {
        return Ok(d);
    }
    let d = PathBuf::from("/sys/kernel/tracing");
    if !d.is_dir() {
        return Err("tracefs is not available (/sys/kernel/tracing does not exist)".into());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, target, fstype) = (c("nodev"), c("/sys/kernel/tracing"), c("tracefs"));
    // SAFETY: valid C strings; no data argument.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "tracefs is not mounted and mounting it failed ({e}); run as root, or mount it: mount -t tracefs nodev /sys/kernel/tracing"
        ));
    }
    let _ = fs::write(
        Path::new(RUN_DIR).join(MOUNTED_NOTE),
        d.display().to_string(),
    );
    Ok(d)
}

/// Unmount tracefs when plumb mounted it and no plumb instance is left in it.
fn unmount_if_last(tracefs: &Path) {
    let note = Path::new(RUN_DIR).join(MOUNTED_NOTE);
    if !note.exists() || !plumb_instances(tracefs).is_empty() {
        return;
    }
    if let Ok(c) = std::ffi::CString::new(tracefs.as_os_str().as_encoded_bytes()) {
        // SAFETY: valid C string.
        unsafe {
            libc::umount2(c.as_ptr(), libc::MNT_DETACH);
        }
    }
    let _ = fs::remove_file(note);
}

impl BlockTrace {
    /// Start counting requests issued to `devs` (whole disks). Needs root.
    pub fn start(devs: &[DevNum]) -> Result<BlockTrace, String> {
        if devs.is_empty() {
            return Err("no block device to trace (the path is not on a local disk)".into());
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("block-layer tracing needs root".into());
        }
        let _lock = TraceLock::take()?;
        let dir = tracefs_dir()?;
        remove_dead_instances(&dir);
        let instance = dir
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{}", std::process::id()));
        fs::create_dir(&instance)
            .map_err(|e| format!("cannot create {}: {e}", instance.display()))?;
        let t = BlockTrace {
            instance: instance.clone(),
            tracefs: dir,
        };
        let ev = instance.join("events/block/block_rq_issue");
        if !ev.is_dir() {
            return Err("this kernel has no block:block_rq_issue tracepoint".into());
        }
        // The kernel's trace dev_t is major << 20 | minor.
        let filter = devs
            .iter()
            .map(|d| format!("dev == {}", ((d.major as u64) << 20) | d.minor as u64))
            .collect::<Vec<_>>()
            .join(" || ");
        write(&ev.join("filter"), &filter)?;
        let _ = write(&instance.join("buffer_size_kb"), "8192");
        write(&ev.join("enable"), "1")?;
        Ok(t)
    }

    /// The instance's directory (to check it is gone after the run).
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Counts since the last call, then empty the buffer.
    pub fn take(&mut self) -> Result<RqCounts, String> {
        let p = self.instance.join("trace");
        let text =
            fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let mut c = count_trace(&text);
        c.lost_events = self.overruns();
        write(&p, "")?;
        Ok(c)
    }

    fn overruns(&self) -> u64 {
        let Ok(rd) = fs::read_dir(self.instance.join("per_cpu")) else {
            return 0;
        };
        rd.flatten()
            .filter_map(|e| fs::read_to_string(e.path().join("stats")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| {
                        l.strip_prefix("overrun: ")
                            .and_then(|v| v.trim().parse::<u64>().ok())
                    })
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for BlockTrace {
    fn drop(&mut self) {
        let lock = TraceLock::take();
        remove_instance(&self.instance);
        if lock.is_ok() {
            remove_dead_instances(&self.tracefs);
            unmount_if_last(&self.tracefs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_classes_follow_blk_fill_rwbs() {
        let mut c = RqCounts::default();
        for r in ["WS", "FF", "WSM", "WFS", "FWS", "R", "RA", "F", "N", "D"] {
            classify(r, &mut c);
        }
        assert_eq!(c.writes, 4);
        assert_eq!(c.fua_writes, 1);
        assert_eq!(c.preflush_writes, 1);
        assert_eq!(c.meta_writes, 1);
        assert_eq!(c.flushes, 2, "FF (flush with preflush) and a bare F");
        assert_eq!(c.reads, 2);
        assert_eq!(c.other, 2);
    }

    #[test]
    fn counts_trace_lines() {
        let t = "# tracer: nop\n\
            kworker/1:1H-123 [001] ..... 100.1: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]\n\
            plumb-io-0-77 [000] ..... 100.2: block_rq_issue: 254,0 WS 8192 () 2048 + 16 none,0,0 [plumb-io-0]\n\
            plumb-io-0-77 [000] ..... 100.3: block_rq_issue: 254,0 WFS 8192 () 2064 + 16 none,0,0 [plumb-io-0]\n";
        let c = count_trace(t);
        assert_eq!((c.flushes, c.writes, c.fua_writes), (1, 2, 1));
    }
}
