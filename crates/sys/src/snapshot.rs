//! One raw snapshot of the host, as `plumb os` needs it: every reader run once.
//! Required sources (/proc/stat, /proc/meminfo, mountinfo) fail the snapshot; optional ones are
//! recorded in `missing` and the snapshot goes on.

use crate::block::{self, DeviceStack, DiskStats};
use crate::cgroup::{self, CgroupMounts, ProcessCgroups};
use crate::container::{self, Evidence};
use crate::cpu::{self, CpuInfo, LoadAvg, Schedstat, StatSample};
use crate::host::{self, HostInfo};
use crate::mem::{self, Meminfo, SwapDevice, Vmstat};
use crate::mount::{self, MountEntry};
use crate::pressure::{self, HostPressure};
use crate::process::{self, Missing, ProcessSample};
use crate::{Error, Result, Root};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSnapshot {
    /// `plumb` for plumb itself, `pid` for a PID the user named.
    pub role: String,
    pub sample: ProcessSample,
    pub cgroups: ProcessCgroups,
    pub container_evidence: Vec<Evidence>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathSnapshot {
    pub requested: PathBuf,
    pub canonical: PathBuf,
    pub mount: MountEntry,
    /// The block device under the mount, if it has one (not tmpfs, overlay, NFS...).
    pub device: Option<String>,
    pub stack: Option<DeviceStack>,
    pub fs_size_bytes: Option<u64>,
    pub fs_available_bytes: Option<u64>,
    /// /proc/diskstats lines of the devices in `stack`, since boot.
    pub diskstats: Vec<DiskStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OsSample {
    pub host: HostInfo,
    pub clock_ticks_per_s: Option<u64>,
    pub cpuinfo: Option<CpuInfo>,
    pub online_cpus: Option<u32>,
    pub stat: StatSample,
    pub loadavg: Option<LoadAvg>,
    pub schedstat: Option<Schedstat>,
    pub pressure: Option<HostPressure>,
    pub meminfo: Meminfo,
    pub vmstat: Option<Vmstat>,
    pub swaps: Vec<SwapDevice>,
    pub cgroup_mounts: CgroupMounts,
    pub processes: Vec<ProcessSnapshot>,
    pub path: Option<PathSnapshot>,
    pub missing: Vec<Missing>,
}

/// plumb's own PID as the tree under `root` sees it (the /proc/self link).
pub(crate) fn self_pid(root: &Root) -> Result<u32> {
    let p = root.path("/proc/self");
    let target = std::fs::read_link(&p).map_err(|e| crate::io_err(&p, e))?;
    target.to_string_lossy().parse().map_err(|_| {
        crate::parse_err(
            &p,
            1,
            "a PID as the /proc/self link target",
            &target.to_string_lossy(),
        )
    })
}

fn keep<T>(root: &Root, missing: &mut Vec<Missing>, r: Result<T>) -> Option<T> {
    r.map_err(|e| missing.push(Missing::from_error(root, &e)))
        .ok()
}

fn process_snapshot(
    root: &Root,
    pid: u32,
    role: &str,
    mounts: &[MountEntry],
    cg_mounts: &CgroupMounts,
) -> Result<ProcessSnapshot> {
    let sample = process::read(root, pid)?;
    let cgroups = cgroup::read_for_process(root, cg_mounts, &sample.cgroups);
    let env = root
        .read_optional(format!("/proc/{pid}/environ"))
        .ok()
        .flatten()
        .map(|t| container::parse_environ(&t));
    let container_evidence = container::evidence(root, &sample.cgroups, mounts, env.as_deref());
    Ok(ProcessSnapshot {
        role: role.to_string(),
        sample,
        cgroups,
        container_evidence,
    })
}

fn statvfs(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and s a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let frsize = s.f_frsize as u64;
    Some((s.f_blocks as u64 * frsize, s.f_bavail as u64 * frsize))
}

/// Resolve a path to its mount and device stack. The mount table and sysfs come from `root`.
pub fn path_snapshot(root: &Root, mounts: &[MountEntry], requested: &Path) -> Result<PathSnapshot> {
    // On the live host the path is resolved through symlinks; in a captured tree it names a
    // path of the captured host, which need not exist here.
    let canonical = if root.is_host() {
        std::fs::canonicalize(requested).map_err(|e| crate::io_err(requested, e))?
    } else if requested.is_absolute() {
        mount::normalize(requested)
    } else {
        return Err(Error::Invalid {
            path: requested.to_path_buf(),
            message: "with --sysroot the path must be absolute (a path on the captured host)"
                .into(),
        });
    };
    let mount = mount::mount_for_path(mounts, &canonical)
        .ok_or_else(|| Error::Invalid {
            path: canonical.clone(),
            message: "no mount in /proc/self/mountinfo contains this path".into(),
        })?
        .clone();
    let device = block::device_for_mount(root, &mount)?;
    let stack = match &device {
        Some(d) => Some(block::resolve_stack(root, d)?),
        None => None,
    };
    let (fs_size_bytes, fs_available_bytes) =
        match root.is_host().then(|| statvfs(&canonical)).flatten() {
            Some((a, b)) => (Some(a), Some(b)),
            None => (None, None),
        };
    let diskstats = match &stack {
        Some(st) => block::read_diskstats(root)?
            .into_iter()
            .filter(|d| st.layer(&d.name).is_some())
            .collect(),
        None => Vec::new(),
    };
    Ok(PathSnapshot {
        diskstats,
        requested: requested.to_path_buf(),
        canonical,
        mount,
        device,
        stack,
        fs_size_bytes,
        fs_available_bytes,
    })
}

/// Take the snapshot. `pids` are checked first so a wrong PID fails before any work.
pub fn collect(root: &Root, pids: &[u32], path: Option<&Path>) -> Result<OsSample> {
    for &pid in pids {
        process::check_pid(root, pid)?;
    }
    let mut missing = Vec::new();
    let mounts = mount::read_mountinfo(root, None)?;
    let cgroup_mounts = CgroupMounts::from_mounts(&mounts);
    // Resolve the path early: a wrong path is the user's error and should fail fast.
    let path = match path {
        Some(p) => Some(path_snapshot(root, &mounts, p)?),
        None => None,
    };
    let stat = cpu::read_stat(root)?;
    let meminfo = mem::read_meminfo(root)?;
    let host = host::read(root)?;
    let cpuinfo = keep(root, &mut missing, cpu::read_cpuinfo(root)).flatten();
    let online_cpus = keep(root, &mut missing, cpu::read_online_cpus(root)).flatten();
    let loadavg = keep(root, &mut missing, cpu::read_loadavg(root));
    let schedstat = keep(root, &mut missing, cpu::read_schedstat(root)).flatten();
    if schedstat.is_none() && !root.exists("/proc/schedstat") {
        missing.push(Missing {
            source: "/proc/schedstat".into(),
            reason: "not present: the kernel was built without CONFIG_SCHEDSTATS, so per-CPU run-queue delay since boot is unknown".into(),
        });
    }
    let pressure = keep(root, &mut missing, pressure::read_host(root)).flatten();
    if pressure.is_none() && !root.exists("/proc/pressure") {
        missing.push(Missing {
            source: "/proc/pressure".into(),
            reason: "not present: the kernel has no PSI (needs 4.20+ with CONFIG_PSI, and psi=1 where it defaults off)".into(),
        });
    }
    let vmstat = keep(root, &mut missing, mem::read_vmstat(root));
    let swaps = keep(root, &mut missing, mem::read_swaps(root)).unwrap_or_default();

    let mut processes = Vec::new();
    match self_pid(root) {
        Ok(me) => match process_snapshot(root, me, "plumb", &mounts, &cgroup_mounts) {
            Ok(p) => processes.push(p),
            Err(e) => missing.push(Missing::from_error(root, &e)),
        },
        Err(e) => missing.push(Missing::from_error(root, &e)),
    }
    for &pid in pids {
        let shown = processes
            .iter()
            .any(|p: &ProcessSnapshot| p.sample.pid == pid);
        if !shown {
            processes.push(process_snapshot(root, pid, "pid", &mounts, &cgroup_mounts)?);
        }
    }
    Ok(OsSample {
        host,
        clock_ticks_per_s: if root.is_host() {
            host::clock_ticks_per_s()
        } else {
            None
        },
        cpuinfo,
        online_cpus,
        stat,
        loadavg,
        schedstat,
        pressure,
        meminfo,
        vmstat,
        swaps,
        cgroup_mounts,
        processes,
        path,
        missing,
    })
}
