//! Findings about the host and the server's place on it, from the snapshot and the phases'
//! windows: containers without a memory limit, a cache larger than the limit, engine memory in
//! swap, a run queue longer than the CPUs, steal.

use crate::exp::{gib, largest};
use plumb_analyze::lab::{Finding, LabReport, Severity, Window};

/// Steal above this share of CPU time in any phase is a finding.
pub const STEAL_WARN_PCT: f64 = 10.0;

pub fn findings(r: &LabReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |severity,
                   rule: &str,
                   statement: String,
                   evidence: Vec<String>,
                   numbers: &[(&str, f64)],
                   phases: Vec<String>| {
        let mut f = Finding::new(severity, rule, statement)
            .evidence(evidence)
            .phases(phases);
        for (k, v) in numbers {
            f = f.number(k, *v);
        }
        out.push(f)
    };
    // Containers: no memory limit. The server's process when there is one (plumb's own
    // otherwise): one finding, not one per process.
    let who = r
        .host
        .processes
        .iter()
        .find(|p| p.role != "plumb")
        .or_else(|| r.host.processes.first());
    if let Some(p) = who {
        if !p.container_evidence.is_empty() && p.memory_limit_bytes.is_none() {
            add(
                Severity::Warn,
                "container-without-memory-limit",
                format!(
                    "the server (PID {}) runs in a container with no memory limit: the engine sizes its caches from the host's memory, and the host's other tenants compete for it",
                    p.pid
                ),
                p.container_evidence
                    .iter()
                    .map(|e| format!("{}: {} {}", e.points_to, e.source, e.detail))
                    .collect(),
                &[("pid", p.pid as f64)],
                vec![],
            );
        }
    }
    if let Some(a) = &r.memory {
        if let (Some(cache), Some(limit)) = (a.cache_bytes, a.cgroup_limit_bytes) {
            if cache > limit {
                add(
                    Severity::Critical,
                    "cache-above-limit",
                    format!(
                        "{} ({}) is larger than the memory limit ({}): the cache will be pushed to swap or the server killed",
                        a.cache_name,
                        gib(cache as f64),
                        gib(limit as f64)
                    ),
                    a.statements.iter().map(|s| s.text.clone()).collect(),
                    &[("cache_bytes", cache as f64), ("limit_bytes", limit as f64)],
                    vec![],
                );
            }
        }
    }
    // Engine memory in swap.
    let swapped = largest(
        r.windows
            .iter()
            .filter_map(|w| w.engine_swap_bytes_max.map(|s| (s, &w.phase))),
    );
    if let Some((s, phase)) = swapped {
        if s >= 1048576.0 {
            add(
                Severity::Critical,
                "engine-memory-in-swap",
                format!(
                    "{} of the server's memory was in swap during {phase}: every access to it is a disk read (VmSwap does not show swapped shared memory; smaps does)",
                    gib(s)
                ),
                vec![format!("largest smaps_rollup Swap of the postmaster: {}", gib(s))],
                &[("swap_bytes", s)],
                // Swapped memory is a fact whoever pushed it out: not lowered when disturbed.
                vec![],
            );
        }
    }
    // CPU: run queue (the worst workload phase) and steal (any phase).
    let cpus = r.host.cpu.online_cpus.unwrap_or(0) as f64;
    let worst = largest(
        r.windows
            .iter()
            .filter(|w| w.workload)
            .filter_map(|w| w.runnable_mean.map(|m| (m, w))),
    );
    if let Some((m, w)) = worst {
        if cpus > 0.0 && m > cpus {
            add(
                Severity::Warn,
                "run-queue-above-cpus",
                format!(
                    "during {} {:.1} tasks were runnable on average for {} CPUs: work waited for a CPU, so that phase's throughput is a CPU ceiling, not a storage one",
                    w.phase, m, cpus
                ),
                r.windows
                    .iter()
                    .filter(|w| w.workload && w.runnable_mean.is_some_and(|m| m > cpus))
                    .filter_map(|w| {
                        Some(format!(
                            "{}: runnable mean {:.1}, max {:.0}; CPU busy {:.0}%",
                            w.phase,
                            w.runnable_mean?,
                            w.runnable_max?,
                            w.cpu_busy_pct?
                        ))
                    })
                    .collect(),
                &[("runnable_mean", m), ("cpus", cpus)],
                // Another process's runnable tasks count too: lowered when a phase was disturbed.
                r.windows
                    .iter()
                    .filter(|w| w.workload && w.runnable_mean.is_some_and(|m| m > cpus))
                    .map(|w| w.phase.clone())
                    .collect(),
            );
        }
    }
    let steal: Option<(f64, &Window)> =
        largest(r.windows.iter().filter_map(|w| w.steal_pct.map(|s| (s, w))));
    if let Some((s, w)) = steal {
        if s > STEAL_WARN_PCT {
            add(
                Severity::Warn,
                "cpu-steal",
                format!(
                    "the hypervisor took {s:.0}% of CPU time (steal) during {}: the VM gets less CPU than it shows",
                    w.phase
                ),
                vec![format!("steal {s:.1}% (threshold {STEAL_WARN_PCT}%)")],
                &[("steal_pct", s), ("threshold_pct", STEAL_WARN_PCT)],
                // Steal is the host's own condition: it is what disturbs, not what is disturbed.
                vec![],
            );
        }
    }
    out
}
