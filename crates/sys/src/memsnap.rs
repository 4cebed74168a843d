//! One raw sample of everything `plumb mem` looks at: host memory, swap traffic, PSI, and for
//! each process its status, smaps_rollup, largest mappings and memory cgroup.

use crate::cgroup::{self, CgroupMounts, ProcessCgroups};
use crate::engine_conf::{self, EngineSettings};
use crate::mem::{self, Meminfo, Vmstat};
use crate::mount;
use crate::pressure::{self, HostPressure};
use crate::process::{self, Missing, ProcessSample};
use crate::smaps::{self, EngineProcs, Mapping};
use crate::{Result, Root};
use serde::Serialize;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct ProcMemSample {
    pub sample: ProcessSample,
    pub cgroups: ProcessCgroups,
    /// The largest mappings (main engine processes and named PIDs only), biggest first.
    pub largest: Vec<Mapping>,
}

/// A shared memory segment (PostgreSQL's shared_buffers and friends) across an engine's
/// processes.
#[derive(Debug, Clone, Serialize)]
pub struct SharedSegment {
    pub name: String,
    pub size_bytes: u64,
    /// Pages of the segment in swap (smaps counts these for the whole shared object).
    pub swap_bytes: u64,
    /// Resident pages of the segment.
    pub resident_bytes: u64,
    /// True when counted exactly (mincore through map_files, root); false when it is the sum
    /// of the live processes' Pss, which misses pages no live process has mapped.
    pub resident_exact: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct EngineSample {
    pub procs: EngineProcs,
    pub settings: EngineSettings,
    /// Private (anonymous) memory of all the engine's processes: RssAnon and VmSwap summed.
    /// Shared memory is in `shared_segment`.
    pub private_resident_bytes: u64,
    pub private_swap_bytes: u64,
    pub processes_read: usize,
    pub shared_segment: Option<SharedSegment>,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemSample {
    #[serde(skip)]
    pub taken: Option<Instant>,
    pub meminfo: Meminfo,
    pub vmstat: Option<Vmstat>,
    pub pressure: Option<HostPressure>,
    pub cgroup_mode: cgroup::CgroupMode,
    pub processes: Vec<ProcMemSample>,
    pub engines: Vec<EngineSample>,
    /// plumb's own memory cgroup, for what applies when no process is named.
    pub own_cgroups: Option<ProcessCgroups>,
    pub missing: Vec<Missing>,
}

const LARGEST: usize = 5;

fn largest(root: &Root, pid: u32, missing: &mut Vec<Missing>) -> Vec<Mapping> {
    match smaps::read_smaps(root, pid) {
        Ok(mut m) => {
            m.sort_by_key(|x| std::cmp::Reverse(x.size_bytes));
            m.truncate(LARGEST);
            m
        }
        Err(e) => {
            missing.push(Missing::from_error(root, &e));
            Vec::new()
        }
    }
}

/// Sample the host, the named PIDs, and the engines (found by name when `find_engines`).
pub fn collect(root: &Root, pids: &[u32], find_engines: bool) -> Result<MemSample> {
    for &p in pids {
        process::check_pid(root, p)?;
    }
    let mut missing = Vec::new();
    let meminfo = mem::read_meminfo(root)?;
    let vmstat = mem::read_vmstat(root)
        .map_err(|e| missing.push(Missing::from_error(root, &e)))
        .ok();
    let pressure = pressure::read_host(root)
        .map_err(|e| missing.push(Missing::from_error(root, &e)))
        .ok()
        .flatten();
    let mounts = mount::read_mountinfo(root, None)?;
    let cg = CgroupMounts::from_mounts(&mounts);

    let mut engines_found: Vec<EngineProcs> = if find_engines {
        smaps::find_engines(root)
    } else {
        Vec::new()
    };
    // A named PID that belongs to an engine brings its engine along.
    for &p in pids {
        if !engines_found.iter().any(|e| e.pids.contains(&p)) {
            if let Some(e) = smaps::engine_of(root, p) {
                engines_found.push(e);
            }
        }
    }
    let mut proc_pids: Vec<u32> = pids.to_vec();
    for e in &engines_found {
        if !proc_pids.contains(&e.main_pid) {
            proc_pids.push(e.main_pid);
        }
    }
    let mut processes = Vec::new();
    for &p in &proc_pids {
        let sample = match process::read(root, p) {
            Ok(s) => s,
            // An engine process found by name may exit between listing and reading.
            Err(e) if !pids.contains(&p) => {
                missing.push(Missing::from_error(root, &e));
                continue;
            }
            Err(e) => return Err(e),
        };
        let cgroups = cgroup::read_for_process(root, &cg, &sample.cgroups);
        let largest = largest(root, p, &mut missing);
        processes.push(ProcMemSample {
            sample,
            cgroups,
            largest,
        });
    }
    let mut engines = Vec::new();
    for e in engines_found {
        let mut anon = 0;
        let mut vm_swap = 0;
        let mut n = 0;
        for &p in &e.pids {
            let f = root.path(format!("/proc/{p}/status"));
            if let Ok(t) = std::fs::read_to_string(&f) {
                if let Ok(st) = process::parse_status(&f, &t) {
                    anon += st.rss_anon_bytes.unwrap_or(0);
                    vm_swap += st.vm_swap_bytes.unwrap_or(0);
                    n += 1;
                }
            }
        }
        let settings = engine_conf::read(root, e.kind, Some(e.main_pid));
        let segment = processes
            .iter()
            .find(|p| p.sample.pid == e.main_pid)
            .and_then(|p| p.largest.iter().find(|m| m.shared_anonymous()).cloned())
            .map(|seg| {
                let exact = if root.is_host() {
                    smaps::shared_resident_bytes(e.main_pid, &seg).ok()
                } else {
                    None
                };
                let resident = exact.unwrap_or_else(|| {
                    let mut r = 0;
                    for &p in &e.pids {
                        if let Ok(maps) = smaps::read_smaps(root, p) {
                            r += maps
                                .iter()
                                .filter(|m| m.start == seg.start && m.name == seg.name)
                                .map(|m| m.pss_bytes)
                                .sum::<u64>();
                        }
                    }
                    r
                });
                SharedSegment {
                    name: seg.name.clone(),
                    size_bytes: seg.size_bytes,
                    swap_bytes: seg.swap_bytes,
                    resident_bytes: resident,
                    resident_exact: exact.is_some(),
                }
            });
        engines.push(EngineSample {
            shared_segment: segment,
            procs: e,
            settings,
            private_resident_bytes: anon,
            private_swap_bytes: vm_swap,
            processes_read: n,
        });
    }
    let own_cgroups = crate::snapshot::self_pid(root)
        .ok()
        .and_then(|me| process::read(root, me).ok())
        .map(|s| cgroup::read_for_process(root, &cg, &s.cgroups));
    Ok(MemSample {
        taken: Some(Instant::now()),
        meminfo,
        vmstat,
        pressure,
        cgroup_mode: cg.mode,
        processes,
        engines,
        own_cgroups,
        missing,
    })
}

/// What `plumb mem assume` reads of the host for an engine: RAM, the cgroup mode, the memory
/// cgroup of the engine's process (plumb's own without one) and the engine's settings.
#[derive(Debug, Clone)]
pub struct AssumeHost {
    pub mem_total_bytes: u64,
    pub cgroup_mode: cgroup::CgroupMode,
    pub cgroups: ProcessCgroups,
    pub settings: EngineSettings,
}

/// Read what an engine of `kind` (the process `pid`, when given) will size itself from. A `pid`
/// that is not a live process is an error naming it.
pub fn assume_host(root: &Root, kind: smaps::EngineKind, pid: Option<u32>) -> Result<AssumeHost> {
    if let Some(p) = pid {
        process::check_pid(root, p)?;
    }
    let mem_total_bytes = mem::read_meminfo(root)?.mem_total_bytes.unwrap_or(0);
    let mounts = mount::read_mountinfo(root, None)?;
    let cgm = CgroupMounts::from_mounts(&mounts);
    let who = match pid {
        Some(p) => p,
        None => crate::snapshot::self_pid(root)?,
    };
    let s = process::read(root, who)?;
    Ok(AssumeHost {
        mem_total_bytes,
        cgroup_mode: cgm.mode,
        cgroups: cgroup::read_for_process(root, &cgm, &s.cgroups),
        settings: engine_conf::read(root, kind, pid),
    })
}
