//! /proc/PID/smaps per mapping, and finding database processes by name.
//!
//! smaps is the only per-process source that counts swapped *shared* memory (a PostgreSQL
//! shared_buffers segment): VmSwap leaves it out and pagemap shows no swap entry for it.

use crate::{parse_err, parse_kb_bytes, Result, Root};
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// `rw-s`: the fourth character says shared (`s`) or private (`p`).
    pub perms: String,
    /// The file, `[heap]`, `/dev/zero (deleted)`, `/SYSV00000000 (deleted)`, or empty (anonymous).
    pub name: String,
    pub size_bytes: u64,
    pub rss_bytes: u64,
    pub pss_bytes: u64,
    pub swap_bytes: u64,
    pub swap_pss_bytes: u64,
    pub anonymous_bytes: u64,
    pub locked_bytes: u64,
}

impl Mapping {
    pub fn shared(&self) -> bool {
        self.perms.as_bytes().get(3) == Some(&b's')
    }

    /// Shared memory not backed by a regular file: System V or POSIX shm, `/dev/zero`, memfd.
    pub(crate) fn shared_anonymous(&self) -> bool {
        self.shared()
            && (self.name.starts_with("/SYSV")
                || self.name.starts_with("/dev/zero")
                || self.name.starts_with("/dev/shm/")
                || self.name.starts_with("/memfd:")
                || self.name.is_empty())
    }
}

fn is_header(line: &str) -> bool {
    // `start-end perms offset dev inode [name]`: the first field has a dash between hex numbers.
    line.split_whitespace()
        .next()
        .and_then(|f| f.split_once('-'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_hexdigit())
        })
}

pub(crate) fn parse_smaps(path: &Path, text: &str) -> Result<Vec<Mapping>> {
    let mut out: Vec<Mapping> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if is_header(line) {
            let f: Vec<&str> = line
                .splitn(6, char::is_whitespace)
                .filter(|s| !s.is_empty())
                .collect();
            let (range, perms) = (f[0], f.get(1).copied().unwrap_or(""));
            let (a, b) = range.split_once('-').expect("checked by is_header");
            let hex = |s: &str| {
                u64::from_str_radix(s, 16)
                    .map_err(|_| parse_err(path, i + 1, "a hex address range", line))
            };
            // The name is what follows the inode field, with its spaces kept.
            let name = line
                .split_whitespace()
                .skip(5)
                .collect::<Vec<_>>()
                .join(" ");
            out.push(Mapping {
                start: hex(a)?,
                end: hex(b)?,
                perms: perms.to_string(),
                name,
                ..Default::default()
            });
            continue;
        }
        let Some(m) = out.last_mut() else {
            return Err(parse_err(
                path,
                i + 1,
                "a mapping header before its fields",
                line,
            ));
        };
        let Some((k, v)) = line.split_once(':') else {
            return Err(parse_err(path, i + 1, "a `Key: N kB` line", line));
        };
        let slot = match k.trim() {
            "Size" => &mut m.size_bytes,
            "Rss" => &mut m.rss_bytes,
            "Pss" => &mut m.pss_bytes,
            "Swap" => &mut m.swap_bytes,
            "SwapPss" => &mut m.swap_pss_bytes,
            "Anonymous" => &mut m.anonymous_bytes,
            "Locked" => &mut m.locked_bytes,
            _ => continue,
        };
        *slot = parse_kb_bytes(path, i + 1, v.trim())?;
    }
    Ok(out)
}

pub(crate) fn read_smaps(root: &Root, pid: u32) -> Result<Vec<Mapping>> {
    let abs = format!("/proc/{pid}/smaps");
    let text = root.read(&abs)?;
    parse_smaps(&root.path(&abs), &text)
}

/// Resident pages of another process's shared mapping, counted exactly: open the mapping through
/// /proc/PID/map_files (root), map it read-only here and ask mincore(2). No page is touched, so
/// nothing is swapped back in. Swapped and never-touched pages count as not resident.
pub(crate) fn shared_resident_bytes(pid: u32, m: &Mapping) -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end);
    let f = std::fs::File::open(&path)?;
    let len = (m.end - m.start) as usize;
    // SAFETY: a read-only shared mapping of a file we opened; unmapped below.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let page = crate::host::page_size_bytes().unwrap_or(4096) as usize;
    let mut vec = vec![0u8; len.div_ceil(page)];
    // SAFETY: addr/len is our mapping; vec has one byte per page.
    let r = unsafe { libc::mincore(addr, len, vec.as_mut_ptr()) };
    let err = std::io::Error::last_os_error();
    // SAFETY: unmapping what we mapped.
    unsafe {
        libc::munmap(addr, len);
    }
    if r != 0 {
        return Err(err);
    }
    Ok(vec.iter().filter(|b| **b & 1 == 1).count() as u64 * page as u64)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    Postgres,
    Mariadb,
    Mssql,
}

impl EngineKind {
    pub fn parse(s: &str) -> Option<EngineKind> {
        match s {
            "postgres" | "postgresql" | "pg" => Some(EngineKind::Postgres),
            "mariadb" | "mysql" => Some(EngineKind::Mariadb),
            "mssql" | "sqlserver" | "sql-server" => Some(EngineKind::Mssql),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Postgres => "PostgreSQL",
            EngineKind::Mariadb => "MariaDB",
            EngineKind::Mssql => "SQL Server",
        }
    }

    fn by_comm(comm: &str) -> Option<EngineKind> {
        match comm {
            "postgres" | "postmaster" => Some(EngineKind::Postgres),
            "mariadbd" | "mysqld" => Some(EngineKind::Mariadb),
            "sqlservr" => Some(EngineKind::Mssql),
            _ => None,
        }
    }
}

/// A running engine: its main process and the processes that belong to it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineProcs {
    pub kind: EngineKind,
    pub main_pid: u32,
    /// The main process and its children of the same engine (PostgreSQL backends).
    pub pids: Vec<u32>,
}

/// Find engines by process name. A process whose parent is the same engine belongs to that
/// parent (PostgreSQL's backends belong to the postmaster).
pub fn find_engines(root: &Root) -> Vec<EngineProcs> {
    let Ok(rd) = std::fs::read_dir(root.path("/proc")) else {
        return Vec::new();
    };
    let mut procs: Vec<(u32, u32, EngineKind)> = Vec::new();
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Ok(s) = crate::process::parse_stat(&e.path().join("stat"), &stat) else {
            continue;
        };
        if let Some(k) = EngineKind::by_comm(&s.comm) {
            procs.push((pid, s.ppid, k));
        }
    }
    procs.sort_unstable();
    let mut out: Vec<EngineProcs> = Vec::new();
    for &(pid, ppid, kind) in &procs {
        if procs.iter().any(|&(p, _, k)| p == ppid && k == kind) {
            continue; // a child; added below
        }
        let pids: Vec<u32> = std::iter::once(pid)
            .chain(
                procs
                    .iter()
                    .filter(|&&(_, pp, k)| pp == pid && k == kind)
                    .map(|&(p, _, _)| p),
            )
            .collect();
        out.push(EngineProcs {
            kind,
            main_pid: pid,
            pids,
        });
    }
    out
}

/// The engine processes under a main PID (itself and same-engine children).
pub(crate) fn engine_of(root: &Root, pid: u32) -> Option<EngineProcs> {
    find_engines(root)
        .into_iter()
        .find(|e| e.pids.contains(&pid))
        .map(|mut e| {
            if e.main_pid != pid && !e.pids.contains(&pid) {
                e.pids.push(pid);
            }
            e
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::put;

    const SMAPS: &str =
        "55bcba5ac000-55bcba5ae000 r--p 00000000 fe:00 247282                     /usr/bin/postgres
Size:                  8 kB
Rss:                   8 kB
Pss:                   8 kB
Swap:                  0 kB
SwapPss:               0 kB
VmFlags: rd mr mw me
7f0000000000-7f0009600000 rw-s 00000000 00:01 1026                       /dev/zero (deleted)
Size:             153600 kB
Rss:               56036 kB
Pss:               20000 kB
Anonymous:             0 kB
Swap:              97564 kB
SwapPss:           32521 kB
VmFlags: rd wr sh mr mw me ms sd
7f1000000000-7f1000100000 rw-p 00000000 00:00 0 
Size:               1024 kB
Rss:                1024 kB
Anonymous:          1024 kB
Swap:                  0 kB
";

    #[test]
    fn per_mapping_swap_of_shared_memory() {
        let m = parse_smaps(Path::new("/proc/9/smaps"), SMAPS).unwrap();
        assert_eq!(m.len(), 3);
        let shm = &m[1];
        assert!(shm.shared() && shm.shared_anonymous());
        assert_eq!(shm.name, "/dev/zero (deleted)");
        assert_eq!(shm.size_bytes, 153600 * 1024);
        assert_eq!(shm.swap_bytes, 97564 * 1024);
        assert_eq!(shm.swap_pss_bytes, 32521 * 1024);
        assert!(!m[2].shared() && m[2].name.is_empty());
        assert_eq!(m[2].anonymous_bytes, 1 << 20);
    }

    #[test]
    fn mincore_counts_our_own_shared_pages() {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: /proc/PID/map_files needs root");
            return;
        }
        let len = 64 << 12;
        // SAFETY: anonymous shared mapping, touched in part, then unmapped.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let page = crate::host::page_size_bytes().unwrap() as usize;
        for i in 0..16 {
            unsafe { *(p as *mut u8).add(i * page) = 1 };
        }
        let maps = read_smaps(&Root::host(), std::process::id()).unwrap();
        let m = maps.iter().find(|m| m.start == p as u64).unwrap();
        let r = shared_resident_bytes(std::process::id(), m).unwrap();
        unsafe { libc::munmap(p, len) };
        assert_eq!(r, 16 * page as u64);
    }

    #[test]
    fn malformed_smaps_names_the_line() {
        let e = parse_smaps(Path::new("/proc/9/smaps"), "Size: 8 kB\n").unwrap_err();
        assert!(e.to_string().contains(":1:"), "{e}");
        let e = parse_smaps(
            Path::new("/proc/9/smaps"),
            "7f00-7f01 rw-p 0 0:0 0\nRss: lots\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
    }

    #[test]
    fn engines_are_grouped_by_parent() {
        let d = tempfile::tempdir().unwrap();
        let stat = |pid: u32, comm: &str, ppid: u32| {
            format!("{pid} ({comm}) S {ppid} 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 100 1000 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
        };
        put(d.path(), "proc/100/stat", &stat(100, "postgres", 1));
        put(d.path(), "proc/101/stat", &stat(101, "postgres", 100));
        put(d.path(), "proc/102/stat", &stat(102, "postgres", 100));
        put(d.path(), "proc/200/stat", &stat(200, "sqlservr", 1));
        put(d.path(), "proc/201/stat", &stat(201, "sqlservr", 200));
        put(d.path(), "proc/300/stat", &stat(300, "bash", 1));
        let e = find_engines(&Root::new(d.path()));
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].kind, EngineKind::Postgres);
        assert_eq!(e[0].pids, vec![100, 101, 102]);
        assert_eq!(e[1].pids, vec![200, 201]);
        assert_eq!(engine_of(&Root::new(d.path()), 101).unwrap().main_pid, 100);
    }
}
