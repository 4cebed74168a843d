//! Block-layer evidence from tracefs: which requests a device really received (plain writes,
//! cache FLUSHes, FUA writes), from the `block:block_rq_issue` tracepoint's rwbs flags, and
//! which of them one process asked for.
//!
//! A device's requests are everybody's: a neighbour's fsync puts FLUSHes on the same disk. To
//! attribute them, plumb also traces `block:block_bio_queue`, which fires in the context of the
//! task that submits the bio (with its thread group recorded, `options/record-tgid`), and
//! `ext4:ext4_sync_file_enter/exit` on the probe's own file: a journal commit (the `jbd2/…`
//! thread's bios) issued while the probe waits in a sync on its file is the cost of that sync.
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

/// Requests one submitter asked for, as bios (before the block layer splits, merges or turns a
/// FUA write into write + FLUSH on a device without FUA).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BioCounts {
    /// Bios carrying data to write.
    pub writes: u64,
    pub write_bytes: u64,
    /// Writes asking to be durable on arrival (FUA).
    pub fua_writes: u64,
    /// Bios asking for a cache FLUSH first (an empty flush, or a write with a preflush).
    pub flushes: u64,
    pub reads: u64,
}

/// Add one bio (rwbs flags and length in 512-byte sectors) to the counts.
pub(crate) fn classify_bio(rwbs: &str, sectors: u64, c: &mut BioCounts) {
    let b = rwbs.as_bytes();
    let (preflush, op, rest) = match b {
        [b'F', op, rest @ ..] if b"WRDFN".contains(op) => (true, *op, rest),
        [op, rest @ ..] => (false, *op, rest),
        [] => return,
    };
    if preflush {
        c.flushes += 1;
    }
    match op {
        b'W' if sectors > 0 => {
            c.writes += 1;
            c.write_bytes += sectors * 512;
            if rest.first() == Some(&b'F') {
                c.fua_writes += 1;
            }
        }
        b'R' => c.reads += 1,
        _ => {}
    }
}

/// Whose requests to single out: a process (all its threads) and, optionally, the file it
/// syncs, so that the journal commits those syncs wait for are counted as its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follow {
    pub tgid: u32,
    /// The file's device (as `stat` gives it) and inode.
    pub file: Option<(DevNum, u64)>,
}

/// What the followed process asked of the traced devices in a window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Attributed {
    /// Bios its threads submitted.
    pub own: BioCounts,
    /// Bios the file system's journal thread submitted while the process waited in a sync on
    /// its file (ext4 only: other file systems' journals are not followed).
    pub journal: BioCounts,
    /// Syncs on the file seen (fsync, fdatasync, or an O_DSYNC write's implicit one).
    pub syncs: u64,
    /// Whether syncs on the file could be traced, so the journal was followed.
    pub journal_followed: bool,
}

impl Attributed {
    /// Both parts together: the process's whole cost at the block layer.
    pub fn total(&self) -> BioCounts {
        let (a, b) = (&self.own, &self.journal);
        BioCounts {
            writes: a.writes + b.writes,
            write_bytes: a.write_bytes + b.write_bytes,
            fua_writes: a.fua_writes + b.fua_writes,
            flushes: a.flushes + b.flushes,
            reads: a.reads + b.reads,
        }
    }
}

/// One line of a trace dump: `COMM-TID (TGID) [CPU] FLAGS SECONDS: EVENT: BODY`.
pub(crate) struct Line<'a> {
    pub comm: &'a str,
    /// Seconds, on the trace clock.
    pub ts: f64,
    pub tid: u32,
    pub tgid: Option<u32>,
    pub event: &'a str,
    pub body: &'a str,
}

pub(crate) fn parse_line(line: &str) -> Option<Line<'_>> {
    // The event's name follows the timestamp's ": "; the body follows the name's ": ".
    let cpu = line
        .find(") [")
        .map(|i| i + 1)
        .or_else(|| line.find(" ["))?;
    let head = &line[..cpu];
    let rest = line[cpu..].trim_start();
    let (task, tgid) = match head.rfind(" (") {
        Some(i) if head.trim_end().ends_with(')') => (
            head[..i].trim(),
            head[i + 2..]
                .trim_end()
                .trim_end_matches(')')
                .trim()
                .parse()
                .ok(),
        ),
        _ => (head.trim(), None),
    };
    let dash = task.rfind('-')?;
    let (comm, tid) = (&task[..dash], task[dash + 1..].parse().ok()?);
    let mut f = rest.splitn(3, ' ');
    let (_cpu, _flags) = (f.next()?, f.next()?);
    let after = f.next()?.trim_start();
    let colon = after.find(": ")?;
    let ts = after[..colon].trim().parse::<f64>().ok()?;
    let ev = &after[colon + 2..];
    let colon = ev.find(": ").unwrap_or(ev.len());
    Some(Line {
        comm,
        ts,
        tid,
        tgid,
        event: &ev[..colon],
        body: ev.get(colon + 2..).unwrap_or(""),
    })
}

/// rwbs and sectors of a block_bio_queue body: `MAJ,MIN RWBS SECTOR + N [COMM]`.
fn bio_of(body: &str) -> Option<(&str, u64)> {
    let mut f = body.split_whitespace();
    let (_dev, rwbs, _sector, plus, n) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    (plus == "+").then_some(())?;
    Some((rwbs, n.parse().ok()?))
}

/// Attribute the bios of a trace dump to the followed process: its own, and the journal's
/// during its syncs on the followed file (the dump holds only that file's sync events: the
/// tracepoints are filtered on its device and inode).
pub fn attribute(text: &str, tgid: u32, journal_followed: bool) -> Attributed {
    let mut a = Attributed {
        journal_followed,
        ..Default::default()
    };
    // Open syncs by thread, and how many are open at once.
    let mut open: std::collections::BTreeMap<u32, u32> = Default::default();
    let mut waiting = 0u32;
    for line in text.lines() {
        let Some(l) = parse_line(line) else {
            continue;
        };
        match l.event {
            "ext4_sync_file_enter" => {
                *open.entry(l.tid).or_default() += 1;
                waiting += 1;
                a.syncs += 1;
            }
            "ext4_sync_file_exit" => {
                // An exit whose enter fell before the window closes nothing.
                if let Some(n) = open.get_mut(&l.tid).filter(|n| **n > 0) {
                    *n -= 1;
                    waiting -= 1;
                }
            }
            "block_bio_queue" => {
                let Some((rwbs, sectors)) = bio_of(l.body) else {
                    continue;
                };
                if l.tgid == Some(tgid) {
                    classify_bio(rwbs, sectors, &mut a.own);
                } else if journal_followed && waiting > 0 && l.comm.starts_with("jbd2/") {
                    classify_bio(rwbs, sectors, &mut a.journal);
                }
            }
            _ => {}
        }
    }
    a
}

/// Count the block_rq_issue lines of a trace buffer dump.
pub(crate) fn count_trace(text: &str) -> RqCounts {
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
    follow: Option<Follow>,
    journal_followed: bool,
    /// Overruns counted by earlier windows (the kernel's count only grows).
    overruns_before: u64,
}

/// One window's evidence: what the devices received, and what the followed process asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Traced {
    pub device: RqCounts,
    pub attributed: Option<Attributed>,
}

/// The kernel's trace dev_t: major << 20 | minor.
fn trace_dev(d: DevNum) -> u64 {
    ((d.major as u64) << 20) | d.minor as u64
}

/// Per-CPU buffer: 8 MiB, less on hosts with many CPUs (the kernel allocates it on every one).
pub(crate) fn buffer_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u64;
    (256 * 1024 / cpus).clamp(1024, 8192)
}

/// Where plumb keeps what its runs share on this host (root only): the lock that orders
/// tracing sessions, and the note that plumb mounted tracefs.
const RUN_DIR: &str = "/run/plumb";
const MOUNTED_NOTE: &str = "tracefs-mounted-by-plumb";
const INSTANCE_PREFIX: &str = "plumb-";

fn write(p: &Path, v: &str) -> Result<(), crate::KernelError> {
    fs::write(p, v).map_err(|e| crate::KernelError::io(format!("cannot write {}", p.display()), e))
}

/// Serialises plumb's tracing sessions on this host (mount, instances, unmount).
pub(crate) struct TraceLock(#[allow(dead_code)] fs::File);

impl TraceLock {
    pub(crate) fn take() -> Result<TraceLock, crate::KernelError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
        let dir = Path::new(RUN_DIR);
        match fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {RUN_DIR}: {e}").into()),
        }
        let m = fs::symlink_metadata(dir).map_err(|e| crate::KernelError::io(RUN_DIR, e))?;
        if !m.is_dir() || m.uid() != 0 || m.mode() & 0o022 != 0 {
            return Err(format!(
                "{RUN_DIR}: not a directory only root can write (mode {:o}, owner {}); plumb will not trust it",
                m.mode() & 0o7777,
                m.uid()
            ).into());
        }
        let p = dir.join("tracefs.lock");
        let f = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&p)
            .map_err(|e| crate::KernelError::io(format!("cannot open {}", p.display()), e))?;
        use std::os::unix::io::AsRawFd;
        // SAFETY: flock on an fd we own; blocks while another plumb sets up or tears down.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(format!(
                "cannot lock {}: {}",
                p.display(),
                std::io::Error::last_os_error()
            )
            .into());
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
            // `plumb-PID`, or `plumb-PID-N` for a process's further sessions.
            let rest = n.to_str()?.strip_prefix(INSTANCE_PREFIX)?;
            let pid = rest.split('-').next()?.parse::<u32>().ok()?;
            Some((pid, e.path()))
        })
        .collect()
}

/// A new instance name for this process: `plumb-PID`, then `plumb-PID-N` (one process may
/// trace several devices at once, probes of several directories).
pub(crate) fn instance_name() -> String {
    static SESSIONS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match n {
        0 => format!("{INSTANCE_PREFIX}{}", std::process::id()),
        n => format!("{INSTANCE_PREFIX}{}-{n}", std::process::id()),
    }
}

pub(crate) fn remove_instance(instance: &Path) {
    let _ = fs::write(instance.join("events/enable"), "0");
    let _ = fs::write(instance.join("tracing_on"), "0");
    let _ = fs::remove_dir(instance);
}

/// Remove the instances of plumb runs that died without cleaning up (killed, or the machine
/// lost power). Returns their paths.
pub(crate) fn remove_dead_instances(tracefs: &Path) -> Vec<PathBuf> {
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

/// The trace instances and uprobes of plumb runs that died, removed (root, and only where
/// tracefs is mounted); what was removed, in words.
pub fn reclaim_dead() -> Vec<(u32, String)> {
    if !crate::os::is_root() {
        return Vec::new();
    }
    let Some(dir) = mounted_tracefs() else {
        return Vec::new();
    };
    if plumb_instances(&dir).is_empty()
        && !fs::read_to_string(dir.join("uprobe_events"))
            .unwrap_or_default()
            .contains(":plumb_")
    {
        return Vec::new();
    }
    let Ok(_lock) = TraceLock::take() else {
        return Vec::new();
    };
    let pid_of = |name: &str| -> u32 {
        name.trim_start_matches(INSTANCE_PREFIX)
            .trim_start_matches("plumb_")
            .split(['-', '/'])
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    };
    let mut out: Vec<(u32, String)> = remove_dead_instances(&dir)
        .into_iter()
        .map(|p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (
                pid_of(&name),
                format!("the trace instance {} (its events off)", p.display()),
            )
        })
        .collect();
    out.extend(
        remove_dead_probes(&dir)
            .into_iter()
            .map(|p| (pid_of(&p), format!("the uprobe {p}"))),
    );
    // tracefs itself, if a dead plumb mounted it and nobody traces now.
    unmount_if_last(&dir);
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
pub(crate) fn tracefs_dir() -> Result<PathBuf, crate::KernelError> {
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
        ).into());
    }
    let _ = fs::write(
        Path::new(RUN_DIR).join(MOUNTED_NOTE),
        d.display().to_string(),
    );
    Ok(d)
}

/// Unmount tracefs when plumb mounted it and no plumb instance is left in it.
pub(crate) fn unmount_if_last(tracefs: &Path) {
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

/// Tracepoints' ids and `format` files (for BPF programs, which read their records by field
/// offset): `("raw_syscalls", "sys_enter")` → `(id, format)`. tracefs is mounted for the read when
/// it is not, and unmounted again unless another plumb traces. Needs root.
pub(crate) fn tracepoint_formats(
    events: &[(&str, &str)],
) -> Result<Vec<(u64, String)>, crate::KernelError> {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err("reading the kernel's tracepoints needs root".into());
    }
    let _lock = TraceLock::take()?;
    let dir = tracefs_dir()?;
    let out = events
        .iter()
        .map(|(sub, ev)| {
            let d = dir.join("events").join(sub).join(ev);
            let id = fs::read_to_string(d.join("id"))
                .map_err(|e| format!("this kernel has no {sub}:{ev} tracepoint ({e})"))?;
            let id = id
                .trim()
                .parse()
                .map_err(|_| format!("{}: not a number", d.join("id").display()))?;
            let format = fs::read_to_string(d.join("format"))
                .map_err(|e| format!("{}: {e}", d.join("format").display()))?;
            Ok((id, format))
        })
        .collect();
    unmount_if_last(&dir);
    out
}

impl BlockTrace {
    /// Start counting requests issued to `devs` (whole disks), and with `follow`, the bios the
    /// followed process submits and the journal commits its syncs on the file wait for. Needs
    /// root.
    pub fn start(
        devs: &[DevNum],
        follow: Option<Follow>,
    ) -> Result<BlockTrace, crate::KernelError> {
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
        let instance = dir.join("instances").join(instance_name());
        fs::create_dir(&instance).map_err(|e| {
            crate::KernelError::io(format!("cannot create {}", instance.display()), e)
        })?;
        let mut t = BlockTrace {
            instance: instance.clone(),
            tracefs: dir,
            follow,
            journal_followed: false,
            overruns_before: 0,
        };
        let ev = instance.join("events/block/block_rq_issue");
        if !ev.is_dir() {
            return Err("this kernel has no block:block_rq_issue tracepoint".into());
        }
        let filter = devs
            .iter()
            .map(|d| format!("dev == {}", trace_dev(*d)))
            .collect::<Vec<_>>()
            .join(" || ");
        write(&ev.join("filter"), &filter)?;
        let _ = write(&instance.join("buffer_size_kb"), &buffer_kb().to_string());
        if let Some(f) = follow {
            let bio = instance.join("events/block/block_bio_queue");
            if !bio.is_dir() || !instance.join("options/record-tgid").exists() {
                return Err(
                    "this kernel cannot say who submitted a request (no block:block_bio_queue tracepoint or record-tgid option)"
                        .into(),
                );
            }
            write(&instance.join("options/record-tgid"), "1")?;
            write(&bio.join("filter"), &filter)?;
            write(&bio.join("enable"), "1")?;
            // Syncs on the file, to follow the journal commits they wait for (ext4 only).
            if let Some((dev, ino)) = f.file {
                let file_filter = format!("dev == {} && ino == {ino}", trace_dev(dev));
                let evs = ["ext4_sync_file_enter", "ext4_sync_file_exit"]
                    .map(|e| instance.join("events/ext4").join(e));
                if evs.iter().all(|e| e.is_dir()) {
                    for e in &evs {
                        write(&e.join("filter"), &file_filter)?;
                        write(&e.join("enable"), "1")?;
                    }
                    t.journal_followed = true;
                }
            }
        }
        write(&ev.join("enable"), "1")?;
        Ok(t)
    }

    /// The instance's directory (to check it is gone after the run).
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Whether syncs on the followed file are traced (the journal is followed).
    pub fn journal_followed(&self) -> bool {
        self.journal_followed
    }

    /// Counts since the last call, then empty the buffer.
    pub fn take(&mut self) -> Result<Traced, crate::KernelError> {
        let p = self.instance.join("trace");
        let text = fs::read_to_string(&p)
            .map_err(|e| crate::KernelError::io(format!("cannot read {}", p.display()), e))?;
        let mut device = count_trace(&text);
        let overruns = self.overruns();
        device.lost_events = overruns.saturating_sub(self.overruns_before);
        self.overruns_before = overruns;
        let attributed = self
            .follow
            .map(|f| attribute(&text, f.tgid, self.journal_followed));
        write(&p, "")?;
        Ok(Traced { device, attributed })
    }

    fn overruns(&self) -> u64 {
        instance_overruns(&self.instance)
    }
}

/// Events an instance's buffers dropped (overwritten before they were read), all CPUs.
pub(crate) fn instance_overruns(instance: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(instance.join("per_cpu")) else {
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

    fn capture() -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/trace/durability-ext4-loop.txt"
        );
        fs::read_to_string(p).unwrap()
    }

    #[test]
    fn bios_are_classified_as_submitted() {
        let mut c = BioCounts::default();
        for (r, n) in [("WS", 16), ("FWS", 0), ("FWFSM", 8), ("WFS", 16), ("R", 8)] {
            classify_bio(r, n, &mut c);
        }
        assert_eq!(c.writes, 3, "the empty preflush carries no data");
        assert_eq!(c.write_bytes, 40 * 512);
        assert_eq!((c.flushes, c.fua_writes, c.reads), (2, 2, 1));
    }

    #[test]
    fn the_probe_is_charged_for_its_bios_and_the_journal_commits_it_waited_for() {
        let t = capture();
        let a = attribute(&t, 27272, true);
        // Seven 8 KiB writes (three fdatasync, two O_DIRECT|O_DSYNC, two fsync), each followed
        // by an empty preflush, except the fsync that waited for a journal commit: that
        // commit's last block carries the preflush (and FUA).
        assert_eq!(a.own.writes, 7, "{a:?}");
        assert_eq!(a.own.write_bytes, 7 * 8192);
        assert_eq!(a.own.flushes, 6);
        assert_eq!(a.own.fua_writes, 0);
        assert_eq!(a.syncs, 7);
        assert_eq!(
            a.journal.writes, 3,
            "two journal blocks and the commit block"
        );
        assert_eq!((a.journal.flushes, a.journal.fua_writes), (1, 1));
        let all = a.total();
        assert_eq!((all.writes, all.flushes, all.fua_writes), (10, 7, 1));
        // The neighbour's six dsync appends and their six journal commits: on the device,
        // never the probe's.
        let d = count_trace(&t);
        assert!(d.flushes >= 12 + 7, "{d:?}");
        let n = attribute(&t, 27271, false);
        assert_eq!(n.own.writes, 6);
        assert_eq!(n.journal, BioCounts::default(), "journal not followed");
    }

    #[test]
    fn lines_parse_with_and_without_the_tgid_column() {
        let l = parse_line("    jbd2/loop0-8-27105   (  27105) [000] ..... 18457.003264: block_bio_queue: 7,0 WSM 524384 + 8 [jbd2/loop0-8]").unwrap();
        assert_eq!(
            (l.comm, l.tid, l.tgid, l.event),
            ("jbd2/loop0-8", 27105, Some(27105), "block_bio_queue")
        );
        assert_eq!(bio_of(l.body), Some(("WSM", 8)));
        let l = parse_line("plumb-io-0-77 [000] ..... 100.2: block_rq_issue: 254,0 WS 8192 () 2048 + 16 none,0,0 [plumb-io-0]").unwrap();
        assert_eq!((l.comm, l.tid, l.tgid), ("plumb-io-0", 77, None));
        assert!(parse_line("# tracer: nop").is_none());
        assert!(parse_line("garbage-x (1) [0] . notatime: ev: x").is_none());
    }
}

/// Append a line to uprobe_events (it must not be truncated: other tools' probes are there).
pub(crate) fn uprobe_line(tracefs: &Path, line: &str) -> Result<(), crate::KernelError> {
    use std::io::Write;
    let p = tracefs.join("uprobe_events");
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(&p)
        .map_err(|e| crate::KernelError::io(format!("cannot open {}", p.display()), e))?;
    f.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| crate::KernelError::io(format!("cannot write {line:?} to {}", p.display()), e))
}

/// Remove the uprobes of plumb runs that died without cleaning up. Returns their names.
pub(crate) fn remove_dead_probes(tracefs: &Path) -> Vec<String> {
    let me = std::process::id();
    let Ok(text) = fs::read_to_string(tracefs.join("uprobe_events")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in text.lines() {
        // "p:plumb_123/name /path:0x..." or "r:..."
        let Some(ev) = l.split_whitespace().next().and_then(|s| s.get(2..)) else {
            continue;
        };
        let Some(pid) = ev
            .strip_prefix("plumb_")
            .and_then(|r| r.split('/').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != me
            && !crate::process::alive(pid)
            && uprobe_line(tracefs, &format!("-:{ev}")).is_ok()
        {
            out.push(ev.to_string());
        }
    }
    out
}
