//! `plumb os`: turn one host snapshot into the report a DBA reads.

use crate::said::Said;
use crate::{Level, Note, WithFacts};
use plumb_sys::block::{BlockDevice, DiskStats, QueueInfo};
use plumb_sys::cgroup::{CgroupMode, IoThrottle, Limit, ProcessCgroups};
use plumb_sys::container::Evidence;
use plumb_sys::cpu::CpuTicks;
use plumb_sys::mem::SwapDevice;
use plumb_sys::pressure::HostPressure;
use plumb_sys::process::Missing;
use plumb_sys::snapshot::{OsSample, PathSnapshot, ProcessSnapshot};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OsReport {
    pub host: HostSection,
    pub cpu: CpuSection,
    pub memory: MemorySection,
    /// Host pressure stall information; `None` when the kernel has none.
    pub pressure: Option<HostPressure>,
    pub cgroup_mode: CgroupMode,
    pub processes: Vec<ProcessSection>,
    pub storage: Option<StorageSection>,
    pub notes: Vec<Note>,
    pub missing: Vec<Missing>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostSection {
    pub hostname: Option<String>,
    pub os: Option<String>,
    pub kernel_release: Option<String>,
    pub kernel_version: Option<String>,
    pub uptime_s: Option<f64>,
    /// What says this is a virtual machine (CPU flag, DMI, hypervisor type); empty on bare metal.
    pub virtualization_evidence: Vec<String>,
}

/// Shares of CPU time since boot, in percent of all CPU time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuShares {
    pub user_pct: Option<f64>,
    pub system_pct: Option<f64>,
    pub iowait_pct: Option<f64>,
    pub irq_pct: Option<f64>,
    pub steal_pct: Option<f64>,
    pub idle_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerCpu {
    pub cpu: u32,
    #[serde(flatten)]
    pub since_boot: CpuShares,
    /// Time runnable tasks waited for this CPU since boot (/proc/schedstat).
    pub run_delay_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSection {
    pub model: Option<String>,
    pub online_cpus: Option<u32>,
    pub since_boot: CpuShares,
    pub per_cpu: Vec<PerCpu>,
    pub load1: Option<f64>,
    pub load5: Option<f64>,
    pub load15: Option<f64>,
    /// Tasks running or waiting for a CPU right now.
    pub procs_running: Option<u64>,
    /// Tasks in uninterruptible sleep (usually I/O) right now.
    pub procs_blocked: Option<u64>,
    pub context_switches: Option<u64>,
    /// All tasks' time waiting for a CPU since boot, and as a share of their time running.
    pub run_delay_s: Option<f64>,
    pub run_delay_per_running_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemorySection {
    pub total_bytes: Option<u64>,
    pub available_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// Buffers + Cached + SReclaimable, as `free` counts buff/cache.
    pub buff_cache_bytes: Option<u64>,
    pub shmem_bytes: Option<u64>,
    pub anon_bytes: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub committed_bytes: Option<u64>,
    pub commit_limit_bytes: Option<u64>,
    pub huge_pages_total: Option<u64>,
    pub huge_pages_free: Option<u64>,
    pub hugepage_size_bytes: Option<u64>,
    pub swap_total_bytes: Option<u64>,
    pub swap_used_bytes: Option<u64>,
    pub swap_devices: Vec<SwapDevice>,
    pub swap_in_since_boot_bytes: Option<u64>,
    pub swap_out_since_boot_bytes: Option<u64>,
    pub major_faults_since_boot: Option<u64>,
    pub oom_kills_since_boot: Option<u64>,
}

/// A process's memory as `plumb os` shows it: the figures `plumb mem` shows too, and its PSS.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessMemory {
    #[serde(flatten)]
    pub figures: crate::memfig::MemFigures,
    pub pss_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessSection {
    pub role: String,
    pub pid: u32,
    pub name: Option<String>,
    pub cmdline: Option<Vec<String>>,
    pub threads: Option<u64>,
    pub cpus_allowed: Option<String>,
    pub memory: ProcessMemory,
    pub cpu_time_s: Option<f64>,
    pub run_delay_s: Option<f64>,
    pub read_bytes: Option<u64>,
    pub write_bytes: Option<u64>,
    pub cgroups: ProcessCgroups,
    /// The memory limit that really applies: the tightest cgroup limit, if below host RAM.
    pub memory_limit_bytes: Option<u64>,
    pub io_throttles: Vec<IoThrottle>,
    pub container_evidence: Vec<Evidence>,
    pub missing: Vec<Missing>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceLayer {
    #[serde(flatten)]
    pub device: BlockDevice,
    /// Completed I/O since boot (/proc/diskstats).
    pub io_since_boot: Option<DiskIo>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskIo {
    pub reads: u64,
    pub read_bytes: u64,
    /// Mean time a read spent queued and in service.
    pub read_mean_s: Option<f64>,
    pub writes: u64,
    pub write_bytes: u64,
    pub write_mean_s: Option<f64>,
    /// Cache FLUSH requests the device completed (kernel 5.5+).
    pub flushes: Option<u64>,
    pub in_flight: u64,
    /// Share of time since boot with at least one request in flight.
    pub busy_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageSection {
    pub path: PathBuf,
    pub canonical_path: PathBuf,
    pub mount_point: String,
    pub fs_type: String,
    pub source: String,
    pub options: Vec<String>,
    pub fs_size_bytes: Option<u64>,
    pub fs_available_bytes: Option<u64>,
    pub device: Option<String>,
    pub layers: Vec<DeviceLayer>,
    /// Whole disks at the bottom of the stack.
    pub disks: Vec<String>,
    /// How a durable write reaches the device (a statement: `plumb_report::words` says it in
    /// one line, and JSON carries that line).
    #[serde(serialize_with = "crate::said::opt_words")]
    pub durability: Option<Said>,
    /// A layer of the stack is persistent memory (`pmemN`).
    pub pmem: bool,
    /// The mount's DAX option (`dax`, `dax=always`, `dax=inode`), when set: file data is
    /// mapped from persistent memory, bypassing the page cache.
    pub dax: Option<String>,
}

fn pct(part: Option<u64>, total: u64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    part.map(|p| p as f64 * 100.0 / total as f64)
}

fn shares(t: &CpuTicks) -> CpuShares {
    let total = t.total_ticks();
    let irq = match (t.irq_ticks, t.softirq_ticks) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    let user = match (t.user_ticks, t.nice_ticks) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    CpuShares {
        user_pct: pct(user, total),
        system_pct: pct(t.system_ticks, total),
        iowait_pct: pct(t.iowait_ticks, total),
        irq_pct: pct(irq, total),
        steal_pct: pct(t.steal_ticks, total),
        idle_pct: pct(t.idle_ticks, total),
    }
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

fn ns_to_s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn cpu_section(s: &OsSample) -> CpuSection {
    let delay_of = |cpu: u32| {
        s.schedstat
            .as_ref()
            .and_then(|ss| ss.cpus.iter().find(|c| c.cpu == cpu))
            .map(|c| ns_to_s(c.run_delay_ns))
    };
    let (run_delay_s, run_delay_per_running_pct) = match &s.schedstat {
        Some(ss) if !ss.cpus.is_empty() => {
            let wait: u64 = ss.cpus.iter().map(|c| c.run_delay_ns).sum();
            let run: u64 = ss.cpus.iter().map(|c| c.running_ns).sum();
            (
                Some(ns_to_s(wait)),
                (run > 0).then(|| wait as f64 * 100.0 / run as f64),
            )
        }
        _ => (None, None),
    };
    CpuSection {
        model: s.cpuinfo.as_ref().and_then(|c| c.model_name.clone()),
        online_cpus: s
            .online_cpus
            .or(Some(s.stat.cpus.len() as u32).filter(|n| *n > 0)),
        since_boot: shares(&s.stat.total),
        per_cpu: s
            .stat
            .cpus
            .iter()
            .map(|(id, t)| PerCpu {
                cpu: *id,
                since_boot: shares(t),
                run_delay_s: delay_of(*id),
            })
            .collect(),
        load1: s.loadavg.as_ref().map(|l| l.load1),
        load5: s.loadavg.as_ref().map(|l| l.load5),
        load15: s.loadavg.as_ref().map(|l| l.load15),
        procs_running: s.stat.procs_running,
        procs_blocked: s.stat.procs_blocked,
        context_switches: s.stat.context_switches,
        run_delay_s,
        run_delay_per_running_pct,
    }
}

fn memory_section(s: &OsSample, page_size: u64) -> MemorySection {
    let m = &s.meminfo;
    let pages = |p: Option<u64>| p.map(|v| v * page_size);
    MemorySection {
        total_bytes: m.mem_total_bytes,
        available_bytes: m.mem_available_bytes,
        free_bytes: m.mem_free_bytes,
        buff_cache_bytes: add(add(m.buffers_bytes, m.cached_bytes), m.s_reclaimable_bytes),
        shmem_bytes: m.shmem_bytes,
        anon_bytes: m.anon_pages_bytes,
        dirty_bytes: m.dirty_bytes,
        committed_bytes: m.committed_as_bytes,
        commit_limit_bytes: m.commit_limit_bytes,
        huge_pages_total: m.huge_pages_total,
        huge_pages_free: m.huge_pages_free,
        hugepage_size_bytes: m.hugepage_size_bytes,
        swap_total_bytes: m.swap_total_bytes,
        swap_used_bytes: match (m.swap_total_bytes, m.swap_free_bytes) {
            (Some(t), Some(f)) => Some(t.saturating_sub(f)),
            _ => None,
        },
        swap_devices: s.swaps.clone(),
        swap_in_since_boot_bytes: pages(s.vmstat.as_ref().and_then(|v| v.pswpin_pages)),
        swap_out_since_boot_bytes: pages(s.vmstat.as_ref().and_then(|v| v.pswpout_pages)),
        major_faults_since_boot: s.vmstat.as_ref().and_then(|v| v.pgmajfault),
        oom_kills_since_boot: s.vmstat.as_ref().and_then(|v| v.oom_kill),
    }
}

/// The memory limit that applies to a cgroup, or None when unlimited or above host RAM
/// (a limit the host can never reach limits nothing).
pub(crate) fn applied_memory_limit(cg: &ProcessCgroups, mem_total: Option<u64>) -> Option<u64> {
    let lim = cg.memory.as_ref()?.effective_limit?.value()?;
    match mem_total {
        Some(t) if lim >= t => None,
        _ => Some(lim),
    }
}

fn process_section(p: &ProcessSnapshot, mem_total: Option<u64>, hz: Option<u64>) -> ProcessSection {
    let st = p.sample.status.as_ref();
    let sm = p.sample.smaps_rollup.as_ref();
    let g = |f: fn(&plumb_sys::process::Status) -> Option<u64>| st.and_then(f);
    ProcessSection {
        role: p.role.clone(),
        pid: p.sample.pid,
        name: st
            .and_then(|s| s.name.clone())
            .or_else(|| p.sample.stat.as_ref().map(|s| s.comm.clone())),
        cmdline: p.sample.cmdline.clone(),
        threads: g(|s| s.threads).or(p.sample.stat.as_ref().map(|s| s.num_threads)),
        cpus_allowed: st.and_then(|s| s.cpus_allowed_list.clone()),
        memory: ProcessMemory {
            figures: crate::memfig::MemFigures::of(st, sm),
            pss_bytes: sm.and_then(|s| s.pss_bytes),
        },
        cpu_time_s: match (p.sample.stat.as_ref(), hz) {
            (Some(s), Some(hz)) if hz > 0 => {
                Some((s.utime_ticks + s.stime_ticks) as f64 / hz as f64)
            }
            _ => None,
        },
        run_delay_s: p.sample.schedstat.as_ref().map(|s| ns_to_s(s.run_delay_ns)),
        read_bytes: p.sample.io.as_ref().and_then(|i| i.read_bytes),
        write_bytes: p.sample.io.as_ref().and_then(|i| i.write_bytes),
        memory_limit_bytes: applied_memory_limit(&p.cgroups, mem_total),
        io_throttles: p
            .cgroups
            .io
            .as_ref()
            .map(|i| i.throttles.clone())
            .unwrap_or_default(),
        cgroups: p.cgroups.clone(),
        container_evidence: p.container_evidence.clone(),
        missing: p.sample.missing.clone(),
    }
}

/// How a durable write reaches this device, from its write cache and FUA (None: no write cache
/// mode reported).
pub(crate) fn durability_of(q: &QueueInfo) -> Option<Said> {
    let wc = q.write_cache.as_deref()?;
    let s = Said::new("durable-path").text("write_cache", wc);
    Some(match q.fua {
        Some(f) => s.text("fua", if f { "supported" } else { "not supported" }),
        None => s,
    })
}

fn disk_io(d: &DiskStats, uptime_s: Option<f64>) -> DiskIo {
    let mean = |ms: u64, n: u64| (n > 0).then(|| ms as f64 / 1000.0 / n as f64);
    DiskIo {
        reads: d.reads,
        read_bytes: d.read_bytes,
        read_mean_s: mean(d.read_time_ms, d.reads),
        writes: d.writes,
        write_bytes: d.write_bytes,
        write_mean_s: mean(d.write_time_ms, d.writes),
        flushes: d.flushes,
        in_flight: d.in_flight,
        busy_pct: uptime_s
            .filter(|u| *u > 0.0)
            .map(|u| (d.busy_time_ms as f64 / 1000.0 / u * 100.0).min(100.0)),
    }
}

pub(crate) fn storage_section(p: &PathSnapshot, uptime_s: Option<f64>) -> StorageSection {
    let layers: Vec<DeviceLayer> = p
        .stack
        .as_ref()
        .map(|s| {
            s.layers
                .iter()
                .map(|l| DeviceLayer {
                    device: l.clone(),
                    io_since_boot: p
                        .diskstats
                        .iter()
                        .find(|d| d.name == l.name)
                        .map(|d| disk_io(d, uptime_s)),
                })
                .collect()
        })
        .unwrap_or_default();
    let disks = p
        .stack
        .as_ref()
        .map(|s| s.disks.clone())
        .unwrap_or_default();
    // What the bottom disks say decides durability; a dm device only mirrors them.
    let pmem = layers
        .iter()
        .any(|l| l.device.kind == plumb_sys::block::DeviceKind::Pmem);
    let options = p.mount.all_options();
    let dax = options
        .iter()
        .find(|o| *o == "dax" || o.starts_with("dax="))
        .filter(|o| *o != "dax=never")
        .cloned();
    let durability = if pmem {
        Some(pmem_durability(dax.as_deref()))
    } else {
        disks
            .iter()
            .filter_map(|d| layers.iter().find(|l| &l.device.name == d))
            .filter_map(|l| l.device.queue.as_ref().and_then(durability_of))
            .next()
    };
    StorageSection {
        path: p.requested.clone(),
        canonical_path: p.canonical.clone(),
        mount_point: p.mount.mount_point.clone(),
        fs_type: p.mount.fs_type.clone(),
        source: p.mount.source.clone(),
        options,
        fs_size_bytes: p.fs_size_bytes,
        fs_available_bytes: p.fs_available_bytes,
        device: p.device.clone(),
        layers,
        disks,
        durability,
        pmem,
        dax,
    }
}

/// How a durable write reaches persistent memory (mounted with DAX, or as a block device).
pub(crate) fn pmem_durability(dax: Option<&str>) -> Said {
    match dax {
        Some(d) => Said::new("durable-pmem").text("dax", d),
        None => Said::new("durable-pmem"),
    }
}

fn notes(r: &OsReport) -> Vec<Note> {
    let mut n = Vec::new();
    if let Some(steal) = r.cpu.since_boot.steal_pct {
        if steal >= 10.0 {
            n.push(
                Note::new(Level::Warn, "cpu-steal")
                    .pct("steal_pct", steal)
                    .text("window", "since boot"),
            );
        }
    }
    if let (Some(running), Some(cpus)) = (r.cpu.procs_running, r.cpu.online_cpus) {
        if running > cpus as u64 {
            n.push(
                Note::new(Level::Info, "runnable-above-cpus")
                    .count("runnable", running as f64)
                    .count("cpus", cpus as f64),
            );
        }
    }
    if r.memory.swap_total_bytes == Some(0) {
        n.push(Note::new(Level::Info, "no-swap"));
    } else if let (Some(u), Some(t)) = (r.memory.swap_used_bytes, r.memory.total_bytes) {
        if u > t / 20 {
            n.push(Note::new(Level::Warn, "swap-in-use").bytes("swap_used_bytes", u as f64));
        }
    }
    for p in &r.processes {
        let who = |note: Note| {
            if p.role == "plumb" {
                note.text("who", "plumb")
            } else {
                note.count("pid", p.pid as f64)
            }
        };
        if let Some(m) = &p.cgroups.memory {
            if let (Some(Limit::Value(l)), Some(t)) = (m.effective_limit, r.memory.total_bytes) {
                if l >= t {
                    n.push(who(Note::new(Level::Info, "cgroup-limit-above-ram")
                        .bytes("limit_bytes", l as f64)));
                }
            }
            if m.oom_kill_events.unwrap_or(0) > 0 {
                n.push(who(Note::new(Level::Warn, "cgroup-oom-kills")
                    .count("oom_kills", m.oom_kill_events.unwrap_or(0) as f64)));
            }
        }
        if !p.container_evidence.is_empty() && p.memory_limit_bytes.is_none() {
            // A cgroup path a runtime made, or Kubernetes, says more than a marker file in `/`.
            let strong = p
                .container_evidence
                .iter()
                .any(|e| e.source.contains("cgroup") || e.points_to == "kubernetes");
            let seen: Vec<String> = p
                .container_evidence
                .iter()
                .map(|e| format!("{} {}", e.source, e.detail))
                .collect();
            let code = if strong {
                "container-without-memory-limit"
            } else {
                "container-marker-without-runtime"
            };
            let level = if strong { Level::Warn } else { Level::Info };
            n.push(who(Note::new(level, code).list("seen", seen)));
        }
        if let (Some(vs), Some(ss)) = (
            p.memory.figures.vm_swap_bytes,
            p.memory.figures.smaps_swap_bytes,
        ) {
            if ss > vs + 1024 * 1024 {
                n.push(
                    who(Note::new(Level::Warn, "swap-hides-shared-memory"))
                        .count("pid", p.pid as f64)
                        .bytes("smaps_swap_bytes", ss as f64)
                        .bytes("vm_swap_bytes", vs as f64),
                );
            }
        }
    }
    if let Some(s) = &r.storage {
        let at = |note: Note| note.text("mount_point", s.mount_point.clone());
        let opts = &s.options;
        if opts.iter().any(|o| o == "nobarrier" || o == "barrier=0") {
            n.push(at(Note::new(Level::Warn, "write-barriers-off")));
        }
        if s.pmem {
            n.push(match &s.dax {
                Some(d) => at(Note::new(Level::Info, "pmem-dax")).text("dax", d.clone()),
                None => at(Note::new(Level::Info, "pmem-block")),
            });
        }
        if s.device.is_none() {
            n.push(
                at(Note::new(Level::Info, "no-local-block-device"))
                    .text("fs_type", s.fs_type.clone()),
            );
        }
    }
    n
}

/// Build the report from one snapshot. `page_size` converts vmstat page counts to bytes.
/// The storage section for a path (filesystem, device stack, write cache, FUA) and the device
/// numbers of its whole disks, for block-layer tracing.
pub fn storage_under(
    root: &plumb_sys::Root,
    path: &std::path::Path,
) -> (Option<StorageSection>, Vec<plumb_sys::DevNum>) {
    let storage = plumb_sys::mount::read_mountinfo(root, None)
        .ok()
        .and_then(|m| plumb_sys::snapshot::path_snapshot(root, &m, path).ok());
    let devs: Vec<plumb_sys::DevNum> = storage
        .as_ref()
        .and_then(|p| p.stack.as_ref())
        .map(|st| {
            st.disks
                .iter()
                .filter_map(|d| st.layer(d).and_then(|l| l.dev))
                .collect()
        })
        .unwrap_or_default();
    let uptime = plumb_sys::host::read(root).ok().and_then(|h| h.uptime_s);
    let storage = storage.map(|p| storage_section(&p, uptime));
    (storage, devs)
}

pub fn build(s: &OsSample, page_size: u64) -> OsReport {
    let mut virt = Vec::new();
    if s.cpuinfo.as_ref().is_some_and(|c| c.hypervisor_flag) {
        virt.push("CPU flag `hypervisor` in /proc/cpuinfo".to_string());
    }
    if let Some(t) = &s.host.hypervisor_type {
        virt.push(format!("hypervisor type {t} (/sys/hypervisor/type)"));
    }
    if let (Some(v), p) = (&s.host.dmi_vendor, &s.host.dmi_product) {
        let known = [
            "QEMU",
            "Amazon EC2",
            "Microsoft Corporation",
            "VMware, Inc.",
            "Xen",
            "Google",
            "innotek GmbH",
            "DigitalOcean",
            "OpenStack Foundation",
        ];
        if known.iter().any(|k| v.contains(k)) {
            virt.push(format!(
                "DMI vendor {v}{}",
                p.as_ref()
                    .map(|p| format!(", product {p}"))
                    .unwrap_or_default()
            ));
        }
    }
    let mem_total = s.meminfo.mem_total_bytes;
    let mut r = OsReport {
        host: HostSection {
            hostname: s.host.hostname.clone(),
            os: s.host.os_pretty_name.clone(),
            kernel_release: s.host.kernel_release.clone(),
            kernel_version: s.host.kernel_version.clone(),
            uptime_s: s.host.uptime_s,
            virtualization_evidence: virt,
        },
        cpu: cpu_section(s),
        memory: memory_section(s, page_size),
        pressure: s.pressure.clone(),
        cgroup_mode: s.cgroup_mounts.mode,
        processes: s
            .processes
            .iter()
            .map(|p| process_section(p, mem_total, s.clock_ticks_per_s))
            .collect(),
        storage: s.path.as_ref().map(|p| storage_section(p, s.host.uptime_s)),
        notes: Vec::new(),
        missing: s.missing.clone(),
    };
    r.notes = notes(&r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::cpu::parse_stat;
    use std::path::Path;

    #[test]
    fn shares_add_up_and_steal_is_reported() {
        let s = parse_stat(
            Path::new("/proc/stat"),
            "cpu 100 0 100 600 50 0 50 100 0 0\n",
        )
        .unwrap();
        let sh = shares(&s.total);
        assert_eq!(sh.steal_pct, Some(10.0));
        assert_eq!(sh.idle_pct, Some(60.0));
        let sum = sh.user_pct.unwrap()
            + sh.system_pct.unwrap()
            + sh.iowait_pct.unwrap()
            + sh.irq_pct.unwrap()
            + sh.steal_pct.unwrap()
            + sh.idle_pct.unwrap();
        assert!((sum - 100.0).abs() < 1e-9);
        let old = parse_stat(Path::new("/proc/stat"), "cpu 1 0 1 8\n").unwrap();
        assert_eq!(shares(&old.total).steal_pct, None);
    }

    #[test]
    fn persistent_memory_and_dax_mounts_are_recognised() {
        use plumb_sys::block::{BlockDevice, DeviceKind, DeviceStack};
        let pmem = BlockDevice {
            name: "pmem0".into(),
            dev: None,
            kind: DeviceKind::Pmem,
            detail: Some("DAX-capable".into()),
            size_bytes: Some(16 << 30),
            model: None,
            lower: vec![],
            queue: Some(QueueInfo {
                write_cache: Some("write back".into()),
                fua: Some(false),
                dax: Some(true),
                ..Default::default()
            }),
        };
        let snap = |opts: &[&str]| plumb_sys::snapshot::PathSnapshot {
            requested: "/pmem/wal".into(),
            canonical: "/pmem/wal".into(),
            mount: plumb_sys::mount::MountEntry {
                mount_id: 1,
                parent_id: 0,
                dev: plumb_sys::DevNum {
                    major: 259,
                    minor: 4,
                },
                root: "/".into(),
                mount_point: "/pmem".into(),
                mount_options: vec!["rw".into()],
                fs_type: "xfs".into(),
                source: "/dev/pmem0".into(),
                super_options: opts.iter().map(|o| o.to_string()).collect(),
            },
            device: Some("pmem0".into()),
            stack: Some(DeviceStack {
                top: "pmem0".into(),
                layers: vec![pmem.clone()],
                disks: vec!["pmem0".into()],
            }),
            fs_size_bytes: None,
            fs_available_bytes: None,
            diskstats: vec![],
        };
        let s = storage_section(&snap(&["dax=always"]), None);
        assert!(s.pmem);
        assert_eq!(s.dax.as_deref(), Some("dax=always"));
        // Not the volatile-cache line the queue's "write back" would give a disk.
        let d = s.durability.unwrap();
        assert_eq!(
            (d.code.as_ref(), d.facts.text("dax")),
            ("durable-pmem", "dax=always")
        );
        let s = storage_section(&snap(&["dax=never"]), None);
        assert!(s.pmem && s.dax.is_none());
        let d = s.durability.unwrap();
        assert_eq!(d.code, "durable-pmem");
        assert!(!d.facts.has("dax"), "dax=never is a block device");
    }

    #[test]
    fn durability_statements() {
        let q = |wc: &str, fua| QueueInfo {
            write_cache: Some(wc.into()),
            fua,
            ..Default::default()
        };
        let d = durability_of(&q("write back", Some(false))).unwrap();
        assert_eq!(d.code, "durable-path");
        assert_eq!(
            (d.facts.text("write_cache"), d.facts.text("fua")),
            ("write back", "not supported")
        );
        assert!(!durability_of(&q("write through", None))
            .unwrap()
            .facts
            .has("fua"));
        assert_eq!(durability_of(&QueueInfo::default()), None);
    }
}
