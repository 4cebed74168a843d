//! Targets and the rules that keep plumb from destroying data.
//!
//! - A file that does not exist is created, filled with random data (so compression and dedupe
//!   cannot flatter the device), marked as plumb's with an extended attribute, and removed when
//!   the run ends (also on Ctrl-C) unless `keep` is set.
//! - An existing file plumb did not create may be read; writing to it needs `--overwrite PATH`.
//! - A block device may be read; writing to it needs `--destroy-data-on DEVICE` naming it
//!   exactly, and a mounted device is refused outright. The refusal says which partition table
//!   or filesystem signature was found.

use crate::job::Job;
use crate::{io_err, Error, Result};
use plumb_sys::rng::Rng;
use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

const MARK_NAME: &str = "user.plumb";
/// A file plumb created, filled completely, and kept (`--keep`): a later run may reuse it.
const MARK_VALUE: &[u8] = b"created-by-plumb";
/// A file plumb created for one run (`plumb-in-use:PID`), removed when that run ends; a later
/// run that finds it with its PID gone removes it.
const MARK_IN_USE: &str = "plumb-in-use:";
/// A file plumb created and is still filling (or was killed while filling).
const MARK_FILLING: &[u8] = b"plumb-prefill";
/// Space left free on the filesystem after creating test files.
const HEADROOM_BYTES: u64 = 256 << 20;

#[derive(Debug, Clone, Default)]
pub struct Safety {
    /// Existing files the user allows plumb to write to.
    pub overwrite: Vec<PathBuf>,
    /// Block devices the user allows plumb to destroy.
    pub destroy_data_on: Vec<PathBuf>,
    /// Leave created files in place.
    pub keep: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    /// A file plumb created for this run.
    Created,
    /// A file plumb created earlier (marked) and the user kept.
    Kept,
    /// A file plumb did not create.
    Existing,
    BlockDevice,
}

/// An opened target. Dropping it removes a file created for this run unless kept.
#[derive(Debug)]
pub struct Target {
    pub path: PathBuf,
    pub file: File,
    pub size: u64,
    pub kind: TargetKind,
    remove_on_drop: bool,
}

impl Target {
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.file.as_raw_fd()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        if self.remove_on_drop {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A file being created: removed on drop unless `finish` hands it on.
struct Creating {
    path: PathBuf,
    armed: bool,
}

impl Drop for Creating {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn same_path(a: &Path, b: &Path) -> bool {
    let ca = std::fs::canonicalize(a).unwrap_or_else(|_| a.to_path_buf());
    let cb = std::fs::canonicalize(b).unwrap_or_else(|_| b.to_path_buf());
    ca == cb
}

/// What plumb's mark on a file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    None,
    /// Created and filled by plumb.
    Complete,
    /// Created by plumb, prefill not finished (running now, or killed).
    Filling,
    /// Created by plumb for the run of this PID, to be removed when it ends.
    InUse(u32),
}

fn has_mark(path: &Path) -> bool {
    mark_of(path) == Mark::Complete
}

fn mark_of(path: &Path) -> Mark {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return Mark::None;
    };
    let name = CString::new(MARK_NAME).expect("no NUL");
    let mut buf = [0u8; 32];
    // SAFETY: valid C strings and a buffer of the given length.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n <= 0 {
        return Mark::None;
    }
    match &buf[..n as usize] {
        v if v == MARK_VALUE => Mark::Complete,
        v if v == MARK_FILLING => Mark::Filling,
        v => std::str::from_utf8(v)
            .ok()
            .and_then(|v| v.strip_prefix(MARK_IN_USE))
            .and_then(|p| p.parse().ok())
            .map_or(Mark::None, Mark::InUse),
    }
}

/// A file plumb left half-filled: nobody holds its lock, so the plumb that made it is gone,
/// and the file (plumb's own) is removed. A prefill running in another plumb is refused.
fn clear_orphan(path: &Path) -> Result<bool> {
    match mark_of(path) {
        Mark::Filling => {}
        Mark::InUse(pid) if pid == std::process::id() => return Ok(false),
        Mark::InUse(pid) if plumb_sys::process::alive(pid) => {
            return Err(Error::Refused(format!(
                "{}: in use by another plumb run (PID {pid}); name another file",
                path.display()
            )))
        }
        Mark::InUse(pid) => {
            eprintln!(
                "plumb: {}: left by a plumb run that ended without cleaning up (PID {pid}); removing it",
                path.display()
            );
            std::fs::remove_file(path).map_err(|e| io_err(path, e))?;
            return Ok(true);
        }
        _ => return Ok(false),
    }
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    // SAFETY: flock on an fd we own; non-blocking.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(Error::Refused(format!(
            "{}: another plumb is creating this file right now (its prefill is running); name another file",
            path.display()
        )));
    }
    eprintln!(
        "plumb: {}: left half-filled by a plumb that was stopped; removing it and starting again",
        path.display()
    );
    std::fs::remove_file(path).map_err(|e| io_err(path, e))?;
    Ok(true)
}

/// Remove the files plumb runs left in `dir` when they died without cleaning up: half-filled
/// ones nobody fills, and run files whose run is gone. Only names starting with `plumb-` are
/// looked at, and only files carrying plumb's mark are touched. Returns what was removed.
pub(crate) fn remove_leftovers(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        let named = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("plumb-"));
        if !named || !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if matches!(clear_orphan(&p), Ok(true)) {
            out.push(p);
        }
    }
    out
}

fn set_mark(f: &File, value: &[u8]) {
    let name = CString::new(MARK_NAME).expect("no NUL");
    // Best effort: filesystems without user xattrs just lose the "kept file is plumb's" memory.
    // SAFETY: valid fd, C string and buffer.
    unsafe {
        libc::fsetxattr(
            f.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        );
    }
}

/// Known signatures at the start of a device: (offset, magic, what it means).
const SIGNATURES: &[(u64, &[u8], &str)] = &[
    (512, b"EFI PART", "a GPT partition table"),
    (510, &[0x55, 0xAA], "an MBR partition table or boot sector"),
    (1080, &[0x53, 0xEF], "an ext2/3/4 filesystem"),
    (0, b"XFSB", "an XFS filesystem"),
    (0x10040, b"_BHRfS_M", "a btrfs filesystem"),
    (4086, b"SWAPSPACE2", "a swap area"),
    (4086, b"SWAP-SPACE", "a swap area"),
    (512, b"LABELONE", "an LVM physical volume"),
    (24, b"LABELONE", "an LVM physical volume"),
    (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
    (4096, &[0xfc, 0x4e, 0x2b, 0xa9], "a Linux md RAID member"),
    (3, b"NTFS    ", "an NTFS filesystem"),
    (0x36, b"FAT", "a FAT filesystem"),
    (0x52, b"FAT32", "a FAT32 filesystem"),
];

/// What the first 72 KiB of a device say it holds.
pub(crate) fn detect_signature(head: &[u8]) -> Option<&'static str> {
    SIGNATURES.iter().find_map(|(off, magic, what)| {
        let o = *off as usize;
        (head.len() >= o + magic.len() && &head[o..o + magic.len()] == *magic).then_some(*what)
    })
}

fn device_size(f: &File) -> std::io::Result<u64> {
    const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64 through the pointer.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size as *mut u64) };
    if r == 0 {
        Ok(size)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Where a block device is mounted, if anywhere (by device number, through /proc/self/mountinfo).
fn mounted_at(rdev: u64) -> Option<String> {
    let want = plumb_sys::DevNum::from_dev_t(rdev);
    let mounts = plumb_sys::mount::read_mountinfo(&plumb_sys::Root::host(), None).ok()?;
    mounts
        .iter()
        .find(|m| m.dev == want)
        .map(|m| m.mount_point.clone())
}

/// Bytes free for an unprivileged writer on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    plumb_sys::os::free_bytes(dir)
}

fn open_flags(job: &Job) -> i32 {
    let mut flags = 0;
    if job.durability.direct() {
        flags |= libc::O_DIRECT;
    }
    if job.durability.dsync() {
        flags |= libc::O_DSYNC;
    }
    flags
}

fn explain_open_error(path: &Path, e: std::io::Error, job: &Job) -> Error {
    if e.raw_os_error() == Some(libc::EINVAL) && job.durability.direct() {
        return Error::Refused(format!(
            "{}: this filesystem does not support O_DIRECT (durability {}); use --durability none, dsync or fdatasync",
            path.display(),
            job.durability
        ));
    }
    io_err(path, e)
}

/// Create and prefill a file of `size` bytes with random data, checking free space first.
/// `stop` is polled so Ctrl-C during a long prefill removes the partial file.
/// `keep`: the file stays after the run (and a later run may reuse it); else it is marked as
/// this run's, so that it is removed by a later run if this one dies before removing it.
pub(crate) fn create_file(
    path: &Path,
    size: u64,
    seed: u64,
    keep: bool,
    stop: &dyn Fn() -> bool,
) -> Result<()> {
    check_create(path, size)?;
    let mut guard = Creating {
        path: path.to_path_buf(),
        armed: false,
    };
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    guard.armed = true;
    fill_file(path, &f, size, seed, keep, stop)?;
    guard.armed = false;
    Ok(())
}

/// Whether preparing `path` will make a new file of `size` bytes there (nothing is there now,
/// and one can be made): what to announce before a run.
pub fn will_create(path: &Path, size: u64) -> bool {
    path.symlink_metadata().is_err() && check_create(path, size).is_ok()
}

/// Whether a new file of `size` bytes can be made at `path` (its directory exists, nothing is
/// there, the filesystem has the room), checked before anything is written or announced.
pub(crate) fn check_create(path: &Path, size: u64) -> Result<()> {
    if path.symlink_metadata().is_ok() {
        return Err(Error::Refused(format!(
            "{}: something is already there",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(Error::Refused(format!(
            "{}: the directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    if let Some(free) = free_bytes(&dir) {
        if free < size + HEADROOM_BYTES {
            return Err(Error::Refused(format!(
                "{}: not enough free space: the file needs {} bytes plus {} headroom, {} has {} free",
                path.display(),
                size,
                HEADROOM_BYTES,
                dir.display(),
                free
            )));
        }
    }
    Ok(())
}

fn fill_file(
    path: &Path,
    f: &File,
    size: u64,
    seed: u64,
    keep: bool,
    stop: &dyn Fn() -> bool,
) -> Result<()> {
    // Held while filling: another plumb sees a prefill in progress, not a file to reuse.
    // SAFETY: flock on an fd we own.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    set_mark(f, MARK_FILLING);
    let mut rng = Rng::new(seed ^ 0x5eed_f11e);
    let chunk = 1 << 20;
    let mut buf = vec![0u8; chunk];
    let mut off = 0u64;
    use std::os::unix::fs::FileExt;
    while off < size {
        if stop() {
            return Err(Error::Interrupted);
        }
        let n = (size - off).min(chunk as u64) as usize;
        rng.fill(&mut buf[..n]);
        f.write_all_at(&buf[..n], off)
            .map_err(|e| io_err(path, e))?;
        off += n as u64;
    }
    f.sync_data().map_err(|e| io_err(path, e))?;
    // Only a complete, kept file is marked as one plumb may reuse.
    if keep {
        set_mark(f, MARK_VALUE);
    } else {
        set_mark(f, format!("{MARK_IN_USE}{}", std::process::id()).as_bytes());
    }
    // Drop the file from the page cache so buffered reads start cold.
    // SAFETY: valid fd.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
    Ok(())
}

/// A file created for a series of runs (a sweep, the durability probe): removed on drop,
/// Ctrl-C and errors included, unless kept.
#[derive(Debug)]
pub struct Scratch {
    pub path: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Create `path` for a series of runs if it does not exist. Returns the guard that removes it,
/// or None when the file was already there (and so is not plumb's to remove).
pub fn scratch_file(
    path: &Path,
    size: u64,
    seed: u64,
    keep: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Scratch>> {
    clear_orphan(path)?;
    if path.symlink_metadata().is_ok() {
        return Ok(None);
    }
    create_file(path, size, seed, keep, stop)?;
    Ok(Some(Scratch {
        path: path.to_path_buf(),
        keep,
    }))
}

/// Open every target of a job under the safety rules. `stop` is polled during prefill.
pub fn prepare(job: &Job, safety: &Safety, stop: &dyn Fn() -> bool) -> Result<Vec<Target>> {
    let writes = job.write_pct > 0;
    let mut out: Vec<Target> = Vec::new();
    for (i, path) in job.targets.iter().enumerate() {
        if job.targets[..i].iter().any(|p| same_path(p, path)) {
            return Err(Error::Job(format!("{} is named twice", path.display())));
        }
        clear_orphan(path)?;
        let meta = std::fs::metadata(path);
        let kind = match &meta {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                create_file(
                    path,
                    job.file_size,
                    job.seed.wrapping_add(i as u64),
                    safety.keep,
                    stop,
                )?;
                TargetKind::Created
            }
            Err(e) => return Err(io_err(path, std::io::Error::new(e.kind(), e.to_string()))),
            Ok(m) if m.is_dir() => {
                return Err(Error::Refused(format!(
                    "{} is a directory: name a file inside it (plumb creates it and removes it afterwards)",
                    path.display()
                )))
            }
            Ok(m) if m.file_type().is_block_device() => {
                if writes && !safety.destroy_data_on.iter().any(|d| d == path) {
                    let mut head = vec![0u8; 72 << 10];
                    let found = File::open(path).ok().and_then(|f| {
                        use std::os::unix::fs::FileExt;
                        let n = f.read_at(&mut head, 0).ok()?;
                        detect_signature(&head[..n])
                    });
                    return Err(Error::Refused(format!(
                        "{} is a block device{}: plumb writes to a device only with --destroy-data-on {} (its exact path), which destroys what is on it",
                        path.display(),
                        found.map(|w| format!(" holding {w}")).unwrap_or_default(),
                        path.display()
                    )));
                }
                if writes {
                    use std::os::unix::fs::MetadataExt;
                    if let Some(mp) = mounted_at(m.rdev()) {
                        return Err(Error::Refused(format!(
                            "{} is mounted at {mp}: plumb never writes to a mounted device",
                            path.display()
                        )));
                    }
                }
                TargetKind::BlockDevice
            }
            Ok(m) if m.is_file() => {
                if has_mark(path) || mark_of(path) == Mark::InUse(std::process::id()) {
                    TargetKind::Kept
                } else {
                    if writes && !safety.overwrite.iter().any(|o| same_path(o, path)) {
                        return Err(Error::Refused(format!(
                            "{} exists and plumb did not create it: a write test would overwrite it. Name a new file, or pass --overwrite {} to allow it",
                            path.display(),
                            path.display()
                        )));
                    }
                    TargetKind::Existing
                }
            }
            Ok(_) => {
                return Err(Error::Refused(format!(
                    "{} is neither a regular file nor a block device",
                    path.display()
                )))
            }
        };
        let opened = OpenOptions::new()
            .read(true)
            .write(writes)
            .custom_flags(open_flags(job))
            .open(path);
        // Register the target before any further check so a created file is removed on error.
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                if kind == TargetKind::Created {
                    let _ = std::fs::remove_file(path);
                }
                return Err(explain_open_error(path, e, job));
            }
        };
        let size = if kind == TargetKind::BlockDevice {
            device_size(&file).map_err(|e| io_err(path, e))?
        } else {
            file.metadata().map_err(|e| io_err(path, e))?.len()
        };
        let t = Target {
            path: path.clone(),
            file,
            size,
            kind,
            remove_on_drop: kind == TargetKind::Created && !safety.keep,
        };
        if size < job.block_size as u64 {
            return Err(Error::Job(format!(
                "{} holds {} bytes, less than one block of {}",
                path.display(),
                size,
                job.block_size
            )));
        }
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(targets: Vec<PathBuf>, write_pct: u8) -> Job {
        Job {
            targets,
            write_pct,
            file_size: 1 << 20,
            durability: crate::job::Durability::None,
            ..Job::new("t")
        }
    }

    #[test]
    fn created_files_are_random_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.dat");
        let j = job(vec![p.clone()], 50);
        let t = prepare(&j, &Safety::default(), &|| false).unwrap();
        assert_eq!(t[0].kind, TargetKind::Created);
        assert_eq!(t[0].size, 1 << 20);
        let data = std::fs::read(&p).unwrap();
        // Random data: no long runs of zeros a compressing device could skip.
        assert!(data.chunks(4096).all(|c| c.iter().any(|b| *b != 0)));
        drop(t);
        assert!(!p.exists(), "created file must be removed");
    }

    #[test]
    fn keep_leaves_the_file_and_it_is_recognised_later() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k.dat");
        let j = job(vec![p.clone()], 100);
        let keep = Safety {
            keep: true,
            ..Default::default()
        };
        drop(prepare(&j, &keep, &|| false).unwrap());
        assert!(p.exists());
        // If the filesystem kept our mark, a second write run may reuse it without --overwrite.
        if has_mark(&p) {
            let t = prepare(&j, &Safety::default(), &|| false).unwrap();
            assert_eq!(t[0].kind, TargetKind::Kept);
            drop(t);
            assert!(p.exists(), "a kept file is not removed by a later run");
        }
    }

    /// A file with plumb's "filling" mark, as a plumb killed during prefill leaves it; None
    /// where the filesystem keeps no user xattrs.
    fn half_filled(p: &Path) -> Option<File> {
        let f = OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .open(p)
            .unwrap();
        f.set_len(1 << 20).unwrap();
        set_mark(&f, MARK_FILLING);
        (mark_of(p) == Mark::Filling).then_some(f)
    }

    #[test]
    fn issue_11_a_killed_prefill_is_not_trusted_as_a_kept_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("half.dat");
        let Some(f) = half_filled(&p) else {
            eprintln!("skipped: no user xattrs on {}", d.path().display());
            return;
        };
        drop(f);
        // Nobody fills it: plumb's own leftover, recreated for this run and removed after.
        let j = job(vec![p.clone()], 100);
        let t = prepare(&j, &Safety::default(), &|| false).unwrap();
        assert_eq!(t[0].kind, TargetKind::Created);
        assert_eq!(mark_of(&p), Mark::InUse(std::process::id()));
        drop(t);
        assert!(!p.exists(), "the leftover stayed behind");
        // The same through scratch_file (sweeps, the durability probe).
        drop(half_filled(&p).unwrap());
        let s = scratch_file(&p, 1 << 20, 1, false, &|| false).unwrap();
        assert!(s.is_some(), "the leftover was taken for a user's file");
        drop(s);
        assert!(!p.exists());
    }

    #[test]
    fn issue_11_files_of_dead_runs_are_removed_and_live_ones_left() {
        let d = tempfile::tempdir().unwrap();
        let dead = d.path().join("plumb-durability-1.dat");
        let live = d.path().join("plumb-durability-2.dat");
        let users = d.path().join("plumb-notes.txt");
        std::fs::write(&users, "mine").unwrap();
        for (p, pid) in [(&dead, u32::MAX - 1), (&live, 1)] {
            let f = File::create(p).unwrap();
            set_mark(&f, format!("{MARK_IN_USE}{pid}").as_bytes());
            if mark_of(p) != Mark::InUse(pid) {
                eprintln!("skipped: no user xattrs on {}", d.path().display());
                return;
            }
        }
        // PID u32::MAX - 1 does not exist; PID 1 (init) lives.
        assert_eq!(remove_leftovers(d.path()), vec![dead.clone()]);
        assert!(live.exists() && users.exists());
        let j = job(vec![live.clone()], 0);
        let e = prepare(&j, &Safety::default(), &|| false).unwrap_err();
        assert!(e.to_string().contains("PID 1"), "{e}");
    }

    #[test]
    fn issue_11_a_prefill_running_in_another_plumb_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("busy.dat");
        let Some(f) = half_filled(&p) else {
            eprintln!("skipped: no user xattrs on {}", d.path().display());
            return;
        };
        // SAFETY: flock on an fd we own: the other plumb's prefill holds this lock.
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        let j = job(vec![p.clone()], 0);
        let e = prepare(&j, &Safety::default(), &|| false).unwrap_err();
        assert!(e.to_string().contains("another plumb"), "{e}");
        assert!(scratch_file(&p, 1 << 20, 1, false, &|| false).is_err());
        assert!(p.exists(), "another plumb's file was removed");
        drop(f);
    }

    #[test]
    fn existing_unrelated_file_is_readable_but_not_writable() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("precious.db");
        std::fs::write(&p, vec![7u8; 1 << 16]).unwrap();
        let e = prepare(&job(vec![p.clone()], 30), &Safety::default(), &|| false).unwrap_err();
        assert!(e.to_string().contains("--overwrite"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), vec![7u8; 1 << 16]);
        let t = prepare(&job(vec![p.clone()], 0), &Safety::default(), &|| false).unwrap();
        assert_eq!(t[0].kind, TargetKind::Existing);
        drop(t);
        assert!(p.exists(), "never remove a file plumb did not create");
        let ok = Safety {
            overwrite: vec![p.clone()],
            ..Default::default()
        };
        assert!(prepare(&job(vec![p.clone()], 30), &ok, &|| false).is_ok());
        assert!(p.exists());
    }

    #[test]
    fn interrupted_prefill_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.dat");
        let e = create_file(&p, 8 << 20, 1, false, &|| true).unwrap_err();
        assert!(matches!(e, Error::Interrupted));
        assert!(!p.exists());
    }

    #[test]
    fn not_enough_space_is_refused_before_writing() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("huge.dat");
        let e = create_file(&p, u64::MAX / 4, 1, false, &|| false).unwrap_err();
        assert!(e.to_string().contains("not enough free space"), "{e}");
        assert!(!p.exists());
    }

    #[test]
    fn signatures() {
        let mut gpt = vec![0u8; 4096];
        gpt[512..520].copy_from_slice(b"EFI PART");
        assert_eq!(detect_signature(&gpt), Some("a GPT partition table"));
        let mut ext = vec![0u8; 4096];
        ext[1080] = 0x53;
        ext[1081] = 0xEF;
        assert_eq!(detect_signature(&ext), Some("an ext2/3/4 filesystem"));
        assert_eq!(detect_signature(&vec![0u8; 72 << 10]), None);
    }

    #[test]
    fn directory_and_duplicates_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = prepare(
            &job(vec![d.path().to_path_buf()], 0),
            &Safety::default(),
            &|| false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("is a directory"));
        let p = d.path().join("a.dat");
        let e = prepare(
            &job(vec![p.clone(), p.clone()], 0),
            &Safety::default(),
            &|| false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("named twice"));
    }
}
