//! One process: /proc/PID/{status,smaps_rollup,stat,io,schedstat,cgroup,cmdline}.

use crate::{for_each_colon_line, parse_err, parse_kb_bytes, parse_u64, Error, Result, Root};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Memory and identity from /proc/PID/status, in bytes. Kernel threads have no `Vm*` lines,
/// so those fields are `None` for them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Status {
    pub name: Option<String>,
    pub state: Option<String>,
    pub ppid: Option<u32>,
    pub uid: Option<u32>,
    pub vm_peak_bytes: Option<u64>,
    pub vm_size_bytes: Option<u64>,
    pub vm_hwm_bytes: Option<u64>,
    pub vm_rss_bytes: Option<u64>,
    pub rss_anon_bytes: Option<u64>,
    pub rss_file_bytes: Option<u64>,
    pub rss_shmem_bytes: Option<u64>,
    pub vm_data_bytes: Option<u64>,
    /// Swapped private memory only: the kernel leaves swapped shared memory out of VmSwap
    /// (proc(5)), so use smaps_rollup `Swap` for shared buffer pools.
    pub vm_swap_bytes: Option<u64>,
    pub vm_locked_bytes: Option<u64>,
    pub threads: Option<u64>,
    pub cpus_allowed_list: Option<String>,
    pub voluntary_ctxt_switches: Option<u64>,
    pub nonvoluntary_ctxt_switches: Option<u64>,
}

pub(crate) fn parse_status(path: &Path, text: &str) -> Result<Status> {
    let mut s = Status::default();
    for_each_colon_line(path, text, |k, v, line| {
        let bytes = |slot: &mut Option<u64>| -> Result<()> {
            *slot = Some(parse_kb_bytes(path, line, v)?);
            Ok(())
        };
        match k {
            "Name" => s.name = Some(v.to_string()),
            "State" => s.state = Some(v.to_string()),
            "PPid" => s.ppid = Some(parse_u64(path, line, "a PID", v)? as u32),
            "Uid" => {
                let first = v.split_whitespace().next().unwrap_or("");
                s.uid = Some(parse_u64(path, line, "a numeric UID", first)? as u32)
            }
            "VmPeak" => bytes(&mut s.vm_peak_bytes)?,
            "VmSize" => bytes(&mut s.vm_size_bytes)?,
            "VmHWM" => bytes(&mut s.vm_hwm_bytes)?,
            "VmRSS" => bytes(&mut s.vm_rss_bytes)?,
            "RssAnon" => bytes(&mut s.rss_anon_bytes)?,
            "RssFile" => bytes(&mut s.rss_file_bytes)?,
            "RssShmem" => bytes(&mut s.rss_shmem_bytes)?,
            "VmData" => bytes(&mut s.vm_data_bytes)?,
            "VmSwap" => bytes(&mut s.vm_swap_bytes)?,
            "VmLck" => bytes(&mut s.vm_locked_bytes)?,
            "Threads" => s.threads = Some(parse_u64(path, line, "a thread count", v)?),
            "Cpus_allowed_list" => s.cpus_allowed_list = Some(v.to_string()),
            "voluntary_ctxt_switches" => {
                s.voluntary_ctxt_switches = Some(parse_u64(path, line, "a count", v)?)
            }
            "nonvoluntary_ctxt_switches" => {
                s.nonvoluntary_ctxt_switches = Some(parse_u64(path, line, "a count", v)?)
            }
            _ => {}
        }
        Ok(())
    })?;
    Ok(s)
}

/// /proc/PID/smaps_rollup (kernel 4.14+), in bytes. `swap_bytes` includes swapped shared memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SmapsRollup {
    pub rss_bytes: Option<u64>,
    pub pss_bytes: Option<u64>,
    pub pss_anon_bytes: Option<u64>,
    pub pss_file_bytes: Option<u64>,
    pub pss_shmem_bytes: Option<u64>,
    pub shared_clean_bytes: Option<u64>,
    pub shared_dirty_bytes: Option<u64>,
    pub private_clean_bytes: Option<u64>,
    pub private_dirty_bytes: Option<u64>,
    pub anonymous_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub swap_pss_bytes: Option<u64>,
    pub locked_bytes: Option<u64>,
}

pub(crate) fn parse_smaps_rollup(path: &Path, text: &str) -> Result<SmapsRollup> {
    let mut s = SmapsRollup::default();
    for (i, line) in text.lines().enumerate() {
        // The first line is the `start-end perms ... [rollup]` header.
        if i == 0 && line.contains("[rollup]") {
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err(parse_err(path, i + 1, "a `Key: N kB` line", line));
        };
        let slot = match k.trim() {
            "Rss" => &mut s.rss_bytes,
            "Pss" => &mut s.pss_bytes,
            "Pss_Anon" => &mut s.pss_anon_bytes,
            "Pss_File" => &mut s.pss_file_bytes,
            "Pss_Shmem" => &mut s.pss_shmem_bytes,
            "Shared_Clean" => &mut s.shared_clean_bytes,
            "Shared_Dirty" => &mut s.shared_dirty_bytes,
            "Private_Clean" => &mut s.private_clean_bytes,
            "Private_Dirty" => &mut s.private_dirty_bytes,
            "Anonymous" => &mut s.anonymous_bytes,
            "Swap" => &mut s.swap_bytes,
            "SwapPss" => &mut s.swap_pss_bytes,
            "Locked" => &mut s.locked_bytes,
            _ => continue,
        };
        *slot = Some(parse_kb_bytes(path, i + 1, v.trim())?);
    }
    Ok(s)
}

/// Fields of /proc/PID/stat. CPU times are in USER_HZ clock ticks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcStat {
    pub comm: String,
    pub state: char,
    pub ppid: u32,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Major faults of children that have exited and been waited for.
    pub cmajor_faults: Option<u64>,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    /// CPU of children that have exited and been waited for (parallel workers, helpers).
    pub cutime_ticks: Option<u64>,
    pub cstime_ticks: Option<u64>,
    pub num_threads: u64,
    pub start_time_ticks: u64,
    pub vsize_bytes: u64,
    /// Block I/O delay (delayacct); 0 unless delay accounting is on.
    pub blkio_delay_ticks: Option<u64>,
}

pub fn parse_stat(path: &Path, text: &str) -> Result<ProcStat> {
    let line = text.lines().next().unwrap_or("");
    // comm may hold spaces and parentheses: it ends at the last ')'.
    let (open, close) = match (line.find('('), line.rfind(')')) {
        (Some(o), Some(c)) if c > o => (o, c),
        _ => return Err(parse_err(path, 1, "`pid (comm) state ...`", line)),
    };
    let comm = line[open + 1..close].to_string();
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    // rest[0] is field 3 (state) in proc(5) numbering.
    let field = |n: usize| -> Result<u64> {
        rest.get(n - 3)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| parse_err(path, 1, "numeric /proc/PID/stat fields", line))
    };
    Ok(ProcStat {
        comm,
        state: rest
            .first()
            .and_then(|s| s.chars().next())
            .ok_or_else(|| parse_err(path, 1, "a process state", line))?,
        ppid: field(4)? as u32,
        minor_faults: field(10)?,
        major_faults: field(12)?,
        cmajor_faults: field(13).ok(),
        utime_ticks: field(14)?,
        stime_ticks: field(15)?,
        cutime_ticks: field(16).ok(),
        cstime_ticks: field(17).ok(),
        num_threads: field(20)?,
        start_time_ticks: field(22)?,
        vsize_bytes: field(23)?,
        blkio_delay_ticks: field(42).ok(),
    })
}

/// /proc/PID/io: bytes the process asked for and bytes that reached storage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcIo {
    pub rchar_bytes: Option<u64>,
    pub wchar_bytes: Option<u64>,
    pub read_syscalls: Option<u64>,
    pub write_syscalls: Option<u64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub cancelled_write_bytes: Option<u64>,
}

pub(crate) fn parse_io(path: &Path, text: &str) -> Result<ProcIo> {
    let mut io = ProcIo::default();
    for_each_colon_line(path, text, |k, v, line| {
        let slot = match k {
            "rchar" => &mut io.rchar_bytes,
            "wchar" => &mut io.wchar_bytes,
            "syscr" => &mut io.read_syscalls,
            "syscw" => &mut io.write_syscalls,
            "read_bytes" => &mut io.read_bytes,
            "write_bytes" => &mut io.write_bytes,
            "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => return Ok(()),
        };
        *slot = Some(parse_u64(path, line, "a byte or call count", v)?);
        Ok(())
    })?;
    Ok(io)
}

/// /proc/PID/schedstat: time on CPU and time waiting for one, summed over the thread group
/// leader only (per-thread values live under task/).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSchedstat {
    pub running_ns: u64,
    pub run_delay_ns: u64,
    pub timeslices: u64,
}

pub(crate) fn parse_schedstat(path: &Path, text: &str) -> Result<TaskSchedstat> {
    let line = text.lines().next().unwrap_or("");
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|v| v.parse())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| parse_err(path, 1, "three numbers", line))?;
    if f.len() != 3 {
        return Err(parse_err(path, 1, "three numbers", line));
    }
    Ok(TaskSchedstat {
        running_ns: f[0],
        run_delay_ns: f[1],
        timeslices: f[2],
    })
}

/// One line of /proc/PID/cgroup: `hierarchy-id:controllers:path`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupLine {
    pub hierarchy_id: u32,
    /// Empty for the cgroup v2 line (`0::/path`); `name=systemd` style names are kept.
    pub controllers: Vec<String>,
    pub path: String,
}

pub(crate) fn parse_cgroup_file(path: &Path, text: &str) -> Result<Vec<CgroupLine>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut it = line.splitn(3, ':');
        let (Some(id), Some(ctl), Some(p)) = (it.next(), it.next(), it.next()) else {
            return Err(parse_err(path, i + 1, "`id:controllers:path`", line));
        };
        if !p.starts_with('/') {
            return Err(parse_err(path, i + 1, "an absolute cgroup path", line));
        }
        out.push(CgroupLine {
            hierarchy_id: id
                .parse()
                .map_err(|_| parse_err(path, i + 1, "a numeric hierarchy id", line))?,
            controllers: ctl
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            path: p.to_string(),
        });
    }
    Ok(out)
}

/// A source that could not be read, and why, so reports can say "missing" rather than 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub source: String,
    pub reason: String,
}

impl Missing {
    pub(crate) fn from_error(root: &Root, e: &Error) -> Missing {
        let (source, reason) = match e {
            Error::Io { path, source } => {
                let reason = match source.kind() {
                    std::io::ErrorKind::NotFound => "not present on this kernel".to_string(),
                    std::io::ErrorKind::PermissionDenied => permission_hint(),
                    _ => source.to_string(),
                };
                (root.display_path(path).display().to_string(), reason)
            }
            Error::Parse { path, .. }
            | Error::Invalid { path, .. }
            | Error::NoSuchProcess { path, .. } => {
                (root.display_path(path).display().to_string(), e.to_string())
            }
        };
        Missing { source, reason }
    }
}

fn permission_hint() -> String {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        "permission denied even as root: reading it needs ptrace access, and the process holds capabilities plumb lacks (or a security module forbids it)".into()
    } else {
        "permission denied: run plumb as root or as the process's owner".into()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSample {
    pub pid: u32,
    pub cmdline: Option<Vec<String>>,
    pub stat: Option<ProcStat>,
    pub status: Option<Status>,
    pub smaps_rollup: Option<SmapsRollup>,
    pub io: Option<ProcIo>,
    pub schedstat: Option<TaskSchedstat>,
    pub cgroups: Vec<CgroupLine>,
    /// Sources that could not be read (permission, kernel without the file).
    pub missing: Vec<Missing>,
}

/// Check that a PID names a live process under this root.
pub fn check_pid(root: &Root, pid: u32) -> Result<()> {
    let dir = root.path(format!("/proc/{pid}"));
    if pid == 0 || !dir.join("stat").exists() {
        return Err(Error::NoSuchProcess {
            pid,
            path: root.display_path(&dir),
        });
    }
    Ok(())
}

/// Read everything plumb needs about one process. Fails only if the process does not exist
/// (or vanished while being read); unreadable parts are listed in `missing`.
pub fn read(root: &Root, pid: u32) -> Result<ProcessSample> {
    read_with(root, pid, true)
}

/// As [`read`]; without `heavy`, smaps_rollup (a walk of the page tables) and the cgroup file
/// are left out (None / empty), for samples taken many times a second.
pub(crate) fn read_with(root: &Root, pid: u32, heavy: bool) -> Result<ProcessSample> {
    check_pid(root, pid)?;
    read_parts(root, pid, heavy, true, None)
}

/// As [`read_with`] without the command line, for a process read every sample: stat, status,
/// io and schedstat come from files `held` keeps open.
pub(crate) fn read_held(
    root: &Root,
    pid: u32,
    heavy: bool,
    held: &mut crate::held::Held,
) -> Result<ProcessSample> {
    read_existing(root, pid, heavy, false, held)
}

/// A member of a followed tree, read every sample: stat, status, io and schedstat, and the
/// command line only when asked (a title does not change what a member is). No separate
/// existence check: a member that has exited has no stat.
pub(crate) fn read_member(
    root: &Root,
    pid: u32,
    with_cmdline: bool,
    held: &mut crate::held::Held,
) -> Result<ProcessSample> {
    read_existing(root, pid, false, with_cmdline, held)
}

/// The parts from held files; a process without a stat has exited.
fn read_existing(
    root: &Root,
    pid: u32,
    heavy: bool,
    with_cmdline: bool,
    held: &mut crate::held::Held,
) -> Result<ProcessSample> {
    let s = read_parts(root, pid, heavy, with_cmdline, Some(held))?;
    if s.stat.is_none() {
        return Err(Error::NoSuchProcess {
            pid,
            path: root.display_path(&root.path(format!("/proc/{pid}"))),
        });
    }
    Ok(s)
}

fn read_parts(
    root: &Root,
    pid: u32,
    heavy: bool,
    with_cmdline: bool,
    mut held: Option<&mut crate::held::Held>,
) -> Result<ProcessSample> {
    let mut missing = Vec::new();
    let base = format!("/proc/{pid}");
    // The files read every sample come from `held`; the others are opened each time.
    let mut read = |name: &str, every: bool| -> Option<(std::path::PathBuf, String)> {
        let abs = format!("{base}/{name}");
        let r = match held.as_deref_mut().filter(|_| every) {
            Some(h) => h.read(root, &abs),
            None => root.read(&abs),
        };
        match r {
            Ok(t) => Some((root.path(&abs), t)),
            Err(e) => {
                missing.push(Missing::from_error(root, &e));
                None
            }
        }
    };
    let stat_text = read("stat", true);
    let status_text = read("status", true);
    let smaps_text = if heavy {
        read("smaps_rollup", false)
    } else {
        None
    };
    let io_text = read("io", true);
    let sched_text = read("schedstat", true);
    let cgroup_text = if heavy { read("cgroup", false) } else { None };
    let cmdline_text = if with_cmdline {
        read("cmdline", false)
    } else {
        None
    };

    // A process that exits between check_pid and here loses its stat file.
    if stat_text.is_none() && !root.path(&base).exists() {
        return Err(Error::NoSuchProcess {
            pid,
            path: root.display_path(&root.path(&base)),
        });
    }
    fn keep<T>(root: &Root, missing: &mut Vec<Missing>, r: Result<T>) -> Option<T> {
        r.map_err(|e| missing.push(Missing::from_error(root, &e)))
            .ok()
    }
    let m = &mut missing;
    let stat = stat_text.and_then(|(p, t)| keep(root, m, parse_stat(&p, &t)));
    let status = status_text.and_then(|(p, t)| keep(root, m, parse_status(&p, &t)));
    let smaps_rollup = smaps_text.and_then(|(p, t)| keep(root, m, parse_smaps_rollup(&p, &t)));
    let io = io_text.and_then(|(p, t)| keep(root, m, parse_io(&p, &t)));
    let schedstat = sched_text.and_then(|(p, t)| keep(root, m, parse_schedstat(&p, &t)));
    let cgroups = cgroup_text
        .and_then(|(p, t)| keep(root, m, parse_cgroup_file(&p, &t)))
        .unwrap_or_default();
    let cmdline = cmdline_text.map(|(_, t)| {
        t.split('\0')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    });
    Ok(ProcessSample {
        pid,
        cmdline,
        stat,
        status,
        smaps_rollup,
        io,
        schedstat,
        cgroups,
        missing,
    })
}

/// /proc/PID/stat of one process.
pub fn stat(root: &Root, pid: u32) -> Result<ProcStat> {
    let path = format!("/proc/{pid}/stat");
    parse_stat(&root.path(&path), &root.read(&path)?)
}

/// /proc/PID/io of one process (root or the process's owner).
pub fn io(root: &Root, pid: u32) -> Result<ProcIo> {
    let path = format!("/proc/{pid}/io");
    parse_io(&root.path(&path), &root.read(&path)?)
}

/// The process's name (comm), as the kernel keeps it (15 characters at most).
/// A process's command line (its title: PostgreSQL writes a backend's role there), arguments
/// joined by spaces; None when gone or empty.
pub fn cmdline(root: &Root, pid: u32) -> Option<String> {
    let t = root.read(format!("/proc/{pid}/cmdline")).ok()?;
    let t = t.replace('\0', " ").trim().to_string();
    (!t.is_empty()).then_some(t)
}

pub fn comm(root: &Root, pid: u32) -> Option<String> {
    root.read(format!("/proc/{pid}/comm"))
        .ok()
        .map(|t| t.trim_end_matches('\n').to_string())
}

/// The file the process runs (root or its owner), as `/proc/PID/exe` names it.
pub fn exe(root: &Root, pid: u32) -> Option<PathBuf> {
    std::fs::read_link(root.path(format!("/proc/{pid}/exe"))).ok()
}

/// The process's working directory (root or its owner).
pub fn cwd(root: &Root, pid: u32) -> Option<PathBuf> {
    std::fs::read_link(root.path(format!("/proc/{pid}/cwd"))).ok()
}

/// /proc/PID/smaps_rollup: PSS, swap (a walk of the process's page tables: about a
/// millisecond per 128 MiB mapped).
pub fn smaps_rollup(root: &Root, pid: u32) -> Option<SmapsRollup> {
    let path = format!("/proc/{pid}/smaps_rollup");
    parse_smaps_rollup(&root.path(&path), &root.read(&path).ok()?).ok()
}

/// /proc/PID/cgroup: the process's cgroups (empty when unreadable).
pub fn cgroups(root: &Root, pid: u32) -> Vec<CgroupLine> {
    let path = format!("/proc/{pid}/cgroup");
    root.read(&path)
        .ok()
        .and_then(|t| parse_cgroup_file(&root.path(&path), &t).ok())
        .unwrap_or_default()
}

/// /proc/PID/status and smaps_rollup, whichever can be read.
pub fn read_memory(root: &Root, pid: u32) -> (Option<Status>, Option<SmapsRollup>) {
    let status = root
        .read(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|t| parse_status(Path::new("status"), &t).ok());
    let smaps = root
        .read(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| parse_smaps_rollup(Path::new("smaps_rollup"), &t).ok());
    (status, smaps)
}

/// The PIDs of the processes that have `arg` among their arguments, word for word.
pub fn with_arg(root: &Root, arg: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(root.path("/proc")) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(root.path(format!("/proc/{p}/cmdline")))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
        })
        .collect();
    out.sort_unstable();
    out
}

/// The PIDs of the processes whose parent is `pid` (one level).
pub fn children(root: &Root, pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(root.path("/proc")) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if stat(root, p).is_ok_and(|st| st.ppid == pid) {
            out.push(p);
        }
    }
    out.sort_unstable();
    out
}

/// Every process below `pid` (children, their children…), from one pass over /proc.
pub fn descendants(root: &Root, pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(root.path("/proc")) else {
        return Vec::new();
    };
    let mut parent: Vec<(u32, u32)> = rd
        .flatten()
        .filter_map(|e| {
            let p = e.file_name().to_str()?.parse::<u32>().ok()?;
            Some((p, stat(root, p).ok()?.ppid))
        })
        .collect();
    parent.sort_unstable();
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &(c, pp) in &parent {
            if pp == p && c != pid && !out.contains(&c) {
                out.push(c);
                todo.push(c);
            }
        }
    }
    out.sort_unstable();
    out
}

/// Scheduler statistics of each of the process's threads (time on CPU, time waiting for one).
pub fn thread_schedstats(root: &Root, pid: u32) -> Vec<TaskSchedstat> {
    let dir = format!("/proc/{pid}/task");
    let Ok(rd) = std::fs::read_dir(root.path(&dir)) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse::<u32>().ok()?;
            let path = format!("{dir}/{tid}/schedstat");
            parse_schedstat(&root.path(&path), &root.read(&path).ok()?).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::put;

    const STATUS: &str = "Name:\tpostgres\nUmask:\t0077\nState:\tS (sleeping)\nPPid:\t1\nUid:\t105\t105\t105\t105\nGroups:\t \nVmPeak:\t  226188 kB\nVmSize:\t  226160 kB\nVmRSS:\t   30008 kB\nRssAnon:\t    4048 kB\nRssFile:\t   12356 kB\nRssShmem:\t   13604 kB\nVmData:\t    1920 kB\nVmSwap:\t      64 kB\nThreads:\t1\nCpus_allowed_list:\t0-1\n";

    #[test]
    fn status_memory_fields_in_bytes() {
        let s = parse_status(Path::new("/proc/1/status"), STATUS).unwrap();
        assert_eq!(s.name.as_deref(), Some("postgres"));
        assert_eq!(s.uid, Some(105));
        assert_eq!(s.vm_rss_bytes, Some(30008 * 1024));
        assert_eq!(s.rss_shmem_bytes, Some(13604 * 1024));
        assert_eq!(s.vm_swap_bytes, Some(64 * 1024));
        assert_eq!(s.threads, Some(1));
        assert_eq!(s.vm_hwm_bytes, None);
    }

    #[test]
    fn kernel_thread_status_has_no_vm_fields() {
        let s = parse_status(
            Path::new("/proc/2/status"),
            "Name:\tkthreadd\nState:\tS (sleeping)\nThreads:\t1\n",
        )
        .unwrap();
        assert_eq!(s.vm_rss_bytes, None);
        assert_eq!(s.vm_swap_bytes, None);
    }

    #[test]
    fn smaps_rollup_swap_includes_shared_memory() {
        let t = "55d0-7ffc ---p 00000000 00:00 0                          [rollup]\nRss:               56036 kB\nPss:               40000 kB\nSwap:              97628 kB\nSwapPss:           97628 kB\n";
        let s = parse_smaps_rollup(Path::new("/proc/9/smaps_rollup"), t).unwrap();
        assert_eq!(s.swap_bytes, Some(97628 * 1024));
        assert_eq!(s.rss_bytes, Some(56036 * 1024));
        let e = parse_smaps_rollup(
            Path::new("/proc/9/smaps_rollup"),
            "hdr [rollup]\nRss:  12 kB\nSwap 3 kB\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("/proc/9/smaps_rollup:3:"), "{e}");
    }

    #[test]
    fn stat_with_spaces_and_parens_in_comm() {
        let t = "42 (my (odd) proc) S 1 42 42 0 -1 4194560 100 0 7 0 250 50 0 0 20 0 4 0 17275 3133440 376 18446744073709551615 1 2 3 4 5 0 0 0 0 0 0 0 17 1 0 0 9 0 0\n";
        let s = parse_stat(Path::new("/proc/42/stat"), t).unwrap();
        assert_eq!(s.comm, "my (odd) proc");
        assert_eq!(s.state, 'S');
        assert_eq!(s.ppid, 1);
        assert_eq!(s.major_faults, 7);
        assert_eq!(s.utime_ticks, 250);
        assert_eq!(s.num_threads, 4);
        assert_eq!(s.vsize_bytes, 3133440);
        assert_eq!(s.blkio_delay_ticks, Some(9));
        assert!(parse_stat(Path::new("/proc/42/stat"), "42 (x) S 1 2\n").is_err());
        assert!(parse_stat(Path::new("/proc/42/stat"), "garbage").is_err());
    }

    #[test]
    fn cgroup_lines_v1_and_v2() {
        let t = "12:memory:/kubepods/burstable/pod1/abc\n1:name=systemd:/x\n0::/system.slice/postgresql.service\n";
        let l = parse_cgroup_file(Path::new("/proc/1/cgroup"), t).unwrap();
        assert_eq!(l[0].controllers, vec!["memory"]);
        assert_eq!(l[2].controllers, Vec::<String>::new());
        assert_eq!(l[2].path, "/system.slice/postgresql.service");
        let e = parse_cgroup_file(Path::new("/proc/1/cgroup"), "4:memory\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/1/cgroup:1:"), "{e}");
    }

    #[test]
    fn read_whole_process_from_fake_tree_and_missing_pid() {
        let d = tempfile::tempdir().unwrap();
        let root = Root::new(d.path());
        put(d.path(), "proc/77/stat", "77 (pg) S 1 77 77 0 -1 0 0 0 3 0 10 5 0 0 20 0 2 0 100 1000 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n");
        put(d.path(), "proc/77/status", STATUS);
        put(d.path(), "proc/77/io", "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n");
        put(d.path(), "proc/77/schedstat", "1000 20 3\n");
        put(d.path(), "proc/77/cgroup", "0::/\n");
        put(d.path(), "proc/77/cmdline", "postgres\0-D\0/data\0");
        let p = read(&root, 77).unwrap();
        assert_eq!(p.io.unwrap().write_bytes, Some(8192));
        assert_eq!(p.schedstat.unwrap().run_delay_ns, 20);
        assert_eq!(p.cmdline.unwrap(), vec!["postgres", "-D", "/data"]);
        // smaps_rollup is absent: reported missing, not zero.
        assert!(p.smaps_rollup.is_none());
        assert!(
            p.missing
                .iter()
                .any(|m| m.source == "/proc/77/smaps_rollup"),
            "{:?}",
            p.missing
        );

        let e = read(&root, 999_999_999).unwrap_err();
        assert!(matches!(
            e,
            Error::NoSuchProcess {
                pid: 999_999_999,
                ..
            }
        ));
        assert!(e.to_string().contains("/proc/999999999"), "{e}");
    }
}

/// One thread of a process, for scheduling views.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadSample {
    pub tid: u32,
    pub comm: String,
    /// utime + stime, in USER_HZ ticks.
    pub cpu_ticks: u64,
    /// Time spent runnable but waiting for a CPU (None without schedstats).
    pub run_delay_ns: Option<u64>,
}

/// The threads of a process (from /proc/PID/task). Threads that exit while being read are
/// skipped.
pub fn read_threads(root: &Root, pid: u32) -> Result<Vec<ThreadSample>> {
    check_pid(root, pid)?;
    let dir = root.path(format!("/proc/{pid}/task"));
    let rd = std::fs::read_dir(&dir).map_err(|e| crate::io_err(&dir, e))?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let sp = e.path().join("stat");
        let Ok(st) = std::fs::read_to_string(&sp) else {
            continue;
        };
        let Ok(st) = parse_stat(&sp, &st) else {
            continue;
        };
        let sch = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|t| parse_schedstat(&e.path().join("schedstat"), &t).ok());
        out.push(ThreadSample {
            tid,
            comm: st.comm,
            cpu_ticks: st.utime_ticks + st.stime_ticks,
            run_delay_ns: sch.map(|s| s.run_delay_ns),
        });
    }
    out.sort_by_key(|t| t.tid);
    Ok(out)
}

/// Overwrite parts of this process's own command line in memory (what `ps` and
/// /proc/PID/cmdline show), keeping its length: `mask` gets each argument and returns it with
/// the secret characters replaced, the same length in bytes. Returns whether anything was
/// rewritten. Best effort: where /proc/self/mem cannot be written, nothing changes.
pub fn mask_own_cmdline(mask: impl Fn(&str) -> String) -> bool {
    use std::io::{Seek, SeekFrom, Write};
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // Fields after the command name: state is field 3; arg_start and arg_end are 48 and 49.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let (Some(start), Some(end)) = (
        f.get(48 - 3).and_then(|v| v.parse::<u64>().ok()),
        f.get(49 - 3).and_then(|v| v.parse::<u64>().ok()),
    ) else {
        return false;
    };
    let Ok(cmdline) = std::fs::read("/proc/self/cmdline") else {
        return false;
    };
    if end <= start || cmdline.len() as u64 > end - start {
        return false;
    }
    let mut changed = false;
    let mut out = Vec::with_capacity(cmdline.len());
    for (i, arg) in cmdline.split(|b| *b == 0).enumerate() {
        if i > 0 {
            out.push(0);
        }
        match std::str::from_utf8(arg) {
            Ok(a) => {
                let m = mask(a);
                if m.len() == a.len() && m != a {
                    changed = true;
                    out.extend_from_slice(m.as_bytes());
                } else {
                    out.extend_from_slice(arg);
                }
            }
            Err(_) => out.extend_from_slice(arg),
        }
    }
    out.truncate(cmdline.len());
    if !changed {
        return false;
    }
    let Ok(mut mem) = std::fs::OpenOptions::new()
        .write(true)
        .open("/proc/self/mem")
    else {
        return false;
    };
    mem.seek(SeekFrom::Start(start)).is_ok() && mem.write_all(&out).is_ok()
}

/// Whether a process lives on this host (a zombie does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|st| {
            st.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next().map(|s| s != "Z"))
        })
        .unwrap_or(false)
}
