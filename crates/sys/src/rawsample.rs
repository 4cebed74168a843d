//! One recording tick: every raw counter and gauge the recorder keeps, as (name, kind, value).
//! Names follow the metric naming rule (dotted, unit in the name); rates are derived on read.

use crate::{block, cgroup, cpu, mem, mount, pressure, process, Root};

pub use crate::raw::{RawKind, RawValue};

/// What to sample besides the host.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    pub pids: Vec<u32>,
    /// Follow each PID's descendants too (`tree.PID.*`, `role.PID-ROLE.*`, and series of their
    /// own for the first [`crate::proctree::DETAILED_MEMBERS`] of them).
    pub children: bool,
}

/// Metrics too costly to read many times a second (process trees, smaps, cgroups; the
/// recorder adds the engine's): a recording faster than 1 s reads them about once a second.
pub fn is_slow(name: &str) -> bool {
    name.starts_with("tree.")
        || name.starts_with("role.")
        || name.starts_with("engine.")
        || name.starts_with("stmt.")
        || (name.starts_with("proc.")
            && (name.ends_with(".swap_bytes") || name.contains(".cgroup_")))
}

/// One sample's values and what changed with it.
#[derive(Debug, Default)]
pub struct Taken {
    pub values: Vec<RawValue>,
    /// Processes with series of their own that have exited (dropped from the scope).
    pub gone: Vec<u32>,
    /// (object, title) for processes given series of their own since the last sample.
    pub labels: Vec<(String, String)>,
}

/// Devices worth recording: whole disks and dm/md devices, but not idle loop or ram devices.
/// `whole` keeps which names are whole devices (not partitions) from one sample to the next.
fn device_wanted(
    root: &Root,
    whole: &mut std::collections::HashMap<String, bool>,
    d: &block::DiskStats,
) -> bool {
    let is_whole = *whole
        .entry(d.name.clone())
        .or_insert_with(|| root.exists(format!("/sys/block/{}", d.name)));
    if !is_whole {
        return false; // a partition
    }
    if d.name.starts_with("loop") || d.name.starts_with("ram") {
        return d.reads + d.writes > 0;
    }
    true
}

pub struct Sampler {
    root: Root,
    scope: Scope,
    cg_mounts: Option<cgroup::CgroupMounts>,
    trees: Vec<crate::proctree::Tree>,
    left_out: Vec<u32>,
    /// The trees' processes with series of their own, as of the last slow sample.
    tree_detailed: Vec<u32>,
    /// Block device names seen, and whether each is a whole device.
    whole_devices: std::collections::HashMap<String, bool>,
    /// The recorded processes' files, held open between samples.
    held: crate::held::Held,
}

impl Sampler {
    pub fn new(root: Root, scope: Scope) -> Sampler {
        let cg_mounts = mount::read_mountinfo(&root, None)
            .ok()
            .map(|m| cgroup::CgroupMounts::from_mounts(&m));
        let trees = if scope.children {
            scope
                .pids
                .iter()
                .map(|p| crate::proctree::Tree::new(*p))
                .collect()
        } else {
            Vec::new()
        };
        Sampler {
            root,
            scope,
            cg_mounts,
            trees,
            left_out: Vec::new(),
            tree_detailed: Vec::new(),
            whole_devices: std::collections::HashMap::new(),
            held: crate::held::Held::new(),
        }
    }

    /// Everything, slow metrics included ([`is_slow`]).
    pub fn take(&mut self) -> Taken {
        self.take_some(true)
    }

    /// The host's figures: CPU, scheduler, pressure, memory, swap, disks.
    fn host_values(&mut self, out: &mut Vec<RawValue>) {
        let mut push = |name: String, kind: RawKind, value: Option<u64>| {
            if let Some(v) = value {
                out.push(RawValue {
                    name,
                    kind,
                    value: v,
                });
            }
        };
        use RawKind::{Counter as C, Gauge as G};
        let r = &self.root;
        if let Ok(st) = cpu::read_stat(r) {
            let mut ticks = |prefix: &str, t: &cpu::CpuTicks| {
                push(
                    format!("{prefix}.user_ticks"),
                    C,
                    t.user_ticks.map(|u| u + t.nice_ticks.unwrap_or(0)),
                );
                push(format!("{prefix}.system_ticks"), C, t.system_ticks);
                push(
                    format!("{prefix}.irq_ticks"),
                    C,
                    t.irq_ticks.map(|i| i + t.softirq_ticks.unwrap_or(0)),
                );
                push(format!("{prefix}.iowait_ticks"), C, t.iowait_ticks);
                push(format!("{prefix}.steal_ticks"), C, t.steal_ticks);
                push(format!("{prefix}.idle_ticks"), C, t.idle_ticks);
            };
            ticks("cpu.all", &st.total);
            for (id, t) in &st.cpus {
                ticks(&format!("cpu.cpu{id}"), t);
            }
            push("sched.context_switches".into(), C, st.context_switches);
            push("sched.procs_running".into(), G, st.procs_running);
            push("sched.procs_blocked".into(), G, st.procs_blocked);
        }
        if let Ok(l) = cpu::read_loadavg(r) {
            push(
                "sched.load1_centi".into(),
                G,
                Some((l.load1 * 100.0).round() as u64),
            );
        }
        if let Ok(Some(s)) = cpu::read_schedstat(r) {
            for c in &s.cpus {
                push(
                    format!("sched.cpu{}.run_delay_ns", c.cpu),
                    C,
                    Some(c.run_delay_ns),
                );
                push(
                    format!("sched.cpu{}.running_ns", c.cpu),
                    C,
                    Some(c.running_ns),
                );
            }
        }
        if let Ok(Some(p)) = pressure::read_host(r) {
            for (n, v) in [("cpu", &p.cpu), ("memory", &p.memory), ("io", &p.io)] {
                if let Some(v) = v {
                    push(
                        format!("psi.{n}.some_us"),
                        C,
                        v.some.as_ref().map(|l| l.total_us),
                    );
                    push(
                        format!("psi.{n}.full_us"),
                        C,
                        v.full.as_ref().map(|l| l.total_us),
                    );
                }
            }
        }
        if let Ok(m) = mem::read_meminfo(r) {
            push("mem.total_bytes".into(), G, m.mem_total_bytes);
            push("mem.free_bytes".into(), G, m.mem_free_bytes);
            push("mem.available_bytes".into(), G, m.mem_available_bytes);
            let cache = match (m.cached_bytes, m.buffers_bytes, m.s_reclaimable_bytes) {
                (None, None, None) => None,
                (a, b, c) => Some(a.unwrap_or(0) + b.unwrap_or(0) + c.unwrap_or(0)),
            };
            push("mem.cache_bytes".into(), G, cache);
            push("mem.anon_bytes".into(), G, m.anon_pages_bytes);
            push("mem.shmem_bytes".into(), G, m.shmem_bytes);
            push("mem.dirty_bytes".into(), G, m.dirty_bytes);
            push("mem.swap_total_bytes".into(), G, m.swap_total_bytes);
            push(
                "mem.swap_used_bytes".into(),
                G,
                match (m.swap_total_bytes, m.swap_free_bytes) {
                    (Some(t), Some(f)) => Some(t.saturating_sub(f)),
                    _ => None,
                },
            );
        }
        if let Ok(v) = mem::read_vmstat(r) {
            push("mem.swap_in_pages".into(), C, v.pswpin_pages);
            push("mem.swap_out_pages".into(), C, v.pswpout_pages);
            push("mem.major_faults".into(), C, v.pgmajfault);
        }
        if let Ok(disks) = block::read_diskstats(r) {
            let whole = &mut self.whole_devices;
            for d in disks.iter().filter(|d| device_wanted(r, whole, d)) {
                let n = &d.name;
                push(format!("disk.{n}.reads"), C, Some(d.reads));
                push(format!("disk.{n}.writes"), C, Some(d.writes));
                push(format!("disk.{n}.read_bytes"), C, Some(d.read_bytes));
                push(format!("disk.{n}.write_bytes"), C, Some(d.write_bytes));
                push(format!("disk.{n}.read_time_ms"), C, Some(d.read_time_ms));
                push(format!("disk.{n}.write_time_ms"), C, Some(d.write_time_ms));
                push(format!("disk.{n}.busy_time_ms"), C, Some(d.busy_time_ms));
                push(
                    format!("disk.{n}.weighted_time_ms"),
                    C,
                    Some(d.weighted_time_ms),
                );
                push(format!("disk.{n}.flushes"), C, d.flushes);
                push(format!("disk.{n}.flush_time_ms"), C, d.flush_time_ms);
                push(format!("disk.{n}.in_flight"), G, Some(d.in_flight));
            }
        }
    }

    /// One sample; the slow metrics only when `slow`. Processes that have exited are dropped
    /// from the scope (and reported).
    pub fn take_some(&mut self, slow: bool) -> Taken {
        let mut out = Vec::with_capacity(160);
        self.host_values(&mut out);
        let r = &self.root;
        let mut taken = Taken::default();
        // The processes with series of their own: the scope's, or each tree's root and its
        // first members.
        let mut detailed = Vec::new();
        // What the trees read already (on a slow sample): not read twice.
        let mut read: Vec<process::ProcessSample> = Vec::new();
        if self.trees.is_empty() {
            detailed.clone_from(&self.scope.pids);
        } else if !slow {
            detailed.clone_from(&self.tree_detailed);
        } else {
            let mut ended = Vec::new();
            for t in &mut self.trees {
                let tt = t.take(r, &self.left_out);
                out.extend(tt.values);
                taken.labels.extend(tt.labels);
                taken.gone.extend(tt.gone);
                if tt.root_gone {
                    ended.push(t.root);
                } else {
                    detailed.extend(tt.detailed);
                    read.extend(tt.samples);
                }
            }
            self.trees.retain(|t| !ended.contains(&t.root));
            self.scope.pids.retain(|p| !ended.contains(p));
            taken.gone.extend(ended);
            detailed.sort_unstable();
            detailed.dedup();
            self.tree_detailed.clone_from(&detailed);
        }
        let mut cgroups_read: std::collections::HashMap<String, cgroup::ProcessCgroups> =
            std::collections::HashMap::new();
        let keep = detailed.clone();
        self.held.retain_pids(|p| keep.contains(&p));
        for pid in detailed {
            let p = match read.iter().position(|s| s.pid == pid) {
                Some(i) => read.swap_remove(i),
                None => match process::read_held(r, pid, slow, &mut self.held) {
                    Ok(p) => p,
                    Err(_) => {
                        // A tree member is reported gone by its tree, on the next slow sample.
                        if self.trees.is_empty() {
                            taken.gone.push(pid);
                        }
                        continue;
                    }
                },
            };
            // Processes in one cgroup (a server's) read its files once.
            let cg = self.cg_mounts.as_ref().filter(|_| slow).map(|cm| {
                let key: Vec<&str> = p.cgroups.iter().map(|l| l.path.as_str()).collect();
                &*cgroups_read
                    .entry(key.join("\n"))
                    .or_insert_with(|| cgroup::read_for_process(r, cm, &p.cgroups))
            });
            process_values(&mut out, &p, cg);
        }
        if self.trees.is_empty() {
            let gone = &taken.gone;
            self.scope.pids.retain(|p| !gone.contains(p));
        }
        taken.gone.sort_unstable();
        taken.gone.dedup();
        taken.values = out;
        taken
    }

    /// Processes left out of the trees (plumb's own connection to the engine), from now on.
    pub fn leave_out(&mut self, pids: Vec<u32>) {
        self.left_out = pids;
    }

    /// Whether `pid` is one of the processes (or trees) this sampler was asked to follow.
    pub fn follows(&self, pid: u32) -> bool {
        self.scope.pids.contains(&pid)
    }

    pub fn add_pid(&mut self, pid: u32) {
        if !self.scope.pids.contains(&pid) {
            self.scope.pids.push(pid);
            if self.scope.children {
                self.trees.push(crate::proctree::Tree::new(pid));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_sample_has_the_os_set_with_units_in_names() {
        let mut s = Sampler::new(
            Root::host(),
            Scope {
                pids: vec![std::process::id()],
                children: false,
            },
        );
        let t = s.take();
        let (v, gone) = (t.values, t.gone);
        assert!(gone.is_empty());
        let has = |n: &str| v.iter().any(|x| x.name == n);
        assert!(
            has("cpu.all.user_ticks") && has("mem.available_bytes") && has("sched.procs_running")
        );
        assert!(has(&format!("proc.{}.rss_bytes", std::process::id())));
        for x in &v {
            assert!(
                x.name.chars().all(|c| c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || c == '.'
                    || c == '_'
                    || c == '-'),
                "{}",
                x.name
            );
        }
    }
}

/// One process's figures (its memory cgroup's too, on a slow sample).
fn process_values(
    out: &mut Vec<RawValue>,
    p: &process::ProcessSample,
    cg: Option<&cgroup::ProcessCgroups>,
) {
    use RawKind::{Counter as C, Gauge as G};
    let mut push = |name: String, kind: RawKind, value: Option<u64>| {
        if let Some(v) = value {
            out.push(RawValue {
                name,
                kind,
                value: v,
            });
        }
    };
    let pre = format!("proc.{}", p.pid);
    if let Some(s) = &p.stat {
        push(
            format!("{pre}.cpu_ticks"),
            C,
            Some(s.utime_ticks + s.stime_ticks),
        );
        push(format!("{pre}.major_faults"), C, Some(s.major_faults));
    }
    if let Some(s) = &p.status {
        push(format!("{pre}.rss_bytes"), G, s.vm_rss_bytes);
        push(format!("{pre}.rss_anon_bytes"), G, s.rss_anon_bytes);
        push(format!("{pre}.rss_shmem_bytes"), G, s.rss_shmem_bytes);
        push(format!("{pre}.threads"), G, s.threads);
    }
    if let Some(s) = &p.smaps_rollup {
        push(format!("{pre}.swap_bytes"), G, s.swap_bytes);
    }
    if let Some(io) = &p.io {
        push(format!("{pre}.read_bytes"), C, io.read_bytes);
        push(format!("{pre}.write_bytes"), C, io.write_bytes);
    }
    if let Some(s) = &p.schedstat {
        push(format!("{pre}.run_delay_ns"), C, Some(s.run_delay_ns));
    }
    if let Some(m) = cg.and_then(|c| c.memory.as_ref()) {
        push(format!("{pre}.cgroup_usage_bytes"), G, m.usage_bytes);
        push(format!("{pre}.cgroup_swap_bytes"), G, m.swap_bytes);
        push(
            format!("{pre}.cgroup_limit_bytes"),
            G,
            m.effective_limit.and_then(|l| l.value()),
        );
    }
}
