//! The few system calls plumb makes outside /proc and /sys, wrapped once so that the crates
//! above have no `unsafe`: who plumb runs as, users by name or uid (re-entrant: the recorder's
//! thread may run beside), free space, sync, children's CPU time, signals to a child.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The effective user id plumb runs as.
pub fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

pub fn is_root() -> bool {
    euid() == 0
}

/// 16 hex digits from the kernel's random source: a token only the run that drew it knows.
pub fn random_token() -> String {
    let mut b = [0u8; 8];
    // SAFETY: writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != b.len() as isize {
        // No random source: the time and the PID, still unique to this run.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b = (t ^ (u64::from(std::process::id()) << 40)).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An OS user, from the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// `getpwnam_r`/`getpwuid_r` with a buffer that grows on ERANGE.
fn lookup(
    call: &dyn Fn(&mut libc::passwd, &mut [u8], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<User> {
    let mut size = 1024usize;
    loop {
        let mut buf = vec![0u8; size];
        // SAFETY: passwd is plain data; zeroed is a valid (empty) value that the call fills.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = call(&mut pw, &mut buf, &mut res);
        if rc == libc::ERANGE && size < (1 << 20) {
            size *= 4;
            continue;
        }
        if rc != 0 || res.is_null() || pw.pw_name.is_null() {
            return None;
        }
        // SAFETY: on success pw_name points to a NUL-terminated string inside `buf`, alive here.
        let name = unsafe { CStr::from_ptr(pw.pw_name) }
            .to_string_lossy()
            .into_owned();
        return Some(User {
            name,
            uid: pw.pw_uid,
            gid: pw.pw_gid,
        });
    }
}

pub fn user_by_name(name: &str) -> Option<User> {
    let c = CString::new(name).ok()?;
    lookup(&|pw, buf, res| {
        // SAFETY: all pointers are valid for the call; buf's length is passed with it.
        unsafe { libc::getpwnam_r(c.as_ptr(), pw, buf.as_mut_ptr().cast(), buf.len(), res) }
    })
}

pub fn user_by_uid(uid: u32) -> Option<User> {
    lookup(&|pw, buf, res| {
        // SAFETY: as above.
        unsafe { libc::getpwuid_r(uid, pw, buf.as_mut_ptr().cast(), buf.len(), res) }
    })
}

/// Bytes free for an unprivileged user on the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let c = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain data, filled by the call.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid NUL-terminated path and output struct.
    (unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0)
        .then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

/// Write every dirty page in the system out (sync(2)).
pub fn sync_all() {
    // SAFETY: sync takes no arguments and cannot fail.
    unsafe { libc::sync() }
}

/// Write dirty pages out, then drop the clean page cache, dentries and inodes (root):
/// `sync; echo 3 > /proc/sys/vm/drop_caches`.
pub fn drop_page_cache() -> std::io::Result<()> {
    sync_all();
    std::fs::write("/proc/sys/vm/drop_caches", "3")
}

/// Evict the files under `dir` (not following symbolic links) from the page cache, and only
/// them: each regular file's dirty pages are written (fdatasync), then its cached pages are
/// dropped (posix_fadvise DONTNEED). Every other process's cache stays. Returns the files and
/// the bytes they held. A file that vanishes meanwhile is passed over.
pub fn evict_files_under(dir: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(e),
        };
        for e in rd.flatten() {
            let Ok(t) = e.file_type() else { continue };
            let p = e.path();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_file() {
                let Ok(f) = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NOATIME)
                    .open(&p)
                    .or_else(|_| {
                        // O_NOATIME is for the owner (or root) only.
                        std::fs::OpenOptions::new()
                            .read(true)
                            .custom_flags(libc::O_NOFOLLOW)
                            .open(&p)
                    })
                else {
                    continue;
                };
                let fd = f.as_raw_fd();
                // SAFETY: a file descriptor open for the whole call.
                unsafe {
                    libc::fdatasync(fd);
                    libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
                }
                files += 1;
                bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
    }
    Ok((files, bytes))
}

/// CPU seconds (user + system) of plumb's children that have ended and been waited for.
pub fn children_cpu_s() -> f64 {
    // SAFETY: rusage is plain data, filled by the call.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid output struct.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// Send `sig` to a process of plumb's own (a child it started); false when it is gone.
pub fn signal(pid: u32, sig: i32) -> bool {
    let Ok(p) = i32::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill touches no memory; a positive pid names one process.
    unsafe { libc::kill(p, sig) == 0 }
}

/// The real user and group ids plumb runs as (the owner of what it mounts).
pub fn uid_gid() -> (u32, u32) {
    // SAFETY: getuid and getgid cannot fail and touch no memory of ours.
    unsafe { (libc::getuid(), libc::getgid()) }
}

/// Start a session of plumb's own (a background plumb leaves its terminal's session, so that
/// closing the terminal does not stop it). False when plumb already leads one.
pub fn new_session() -> bool {
    // SAFETY: setsid touches no memory.
    unsafe { libc::setsid() != -1 }
}

/// Remove the mount at `path` (one plumb made): `lazy` detaches it even while files in it are
/// open. As root with umount2(2); otherwise through fusermount3 (or fusermount), which lets a
/// user remove a FUSE mount of their own.
pub fn unmount(path: &Path, lazy: bool) -> std::io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))?;
    let flags = if lazy { libc::MNT_DETACH } else { 0 };
    // SAFETY: a NUL-terminated path that lives across the call.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::EPERM) {
        return Err(err);
    }
    let mut last = err;
    for bin in ["fusermount3", "fusermount"] {
        let mut cmd = std::process::Command::new(bin);
        cmd.arg("-u");
        if lazy {
            cmd.arg("-z");
        }
        match cmd.arg("--").arg(path).output() {
            Ok(o) if o.status.success() => return Ok(()),
            Ok(o) => {
                let said = String::from_utf8_lossy(&o.stderr).trim().to_string();
                return Err(std::io::Error::other(if said.is_empty() {
                    format!("{bin} -u failed ({})", o.status)
                } else if said.starts_with(bin) {
                    said
                } else {
                    format!("{bin}: {said}")
                }));
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// This very program, for running itself again (a helper process): the running executable, even
/// if its file was replaced since it started.
pub fn own_exe() -> std::path::PathBuf {
    std::path::PathBuf::from("/proc/self/exe")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_resolve_both_ways() {
        let root = user_by_uid(0).expect("uid 0 exists");
        assert_eq!(root.name, "root");
        assert_eq!(user_by_name("root").unwrap().uid, 0);
        assert!(user_by_name("no-such-user-plumb").is_none());
        assert!(free_bytes(Path::new("/")).is_some());
        assert!(free_bytes(Path::new("/no/such/dir")).is_none());
        assert!(!signal(0, 0));
    }
}
