//! Findings about the host and the server's place on it, from the snapshot and the phases'
//! windows: containers without a memory limit, a cache larger than the limit, engine memory in
//! swap, a run queue longer than the CPUs, steal.

use crate::exp::largest;
use plumb_analyze::lab::{Evidence, Finding, LabReport, Severity, Window};
use plumb_analyze::said::{Said, WithFacts};

/// Steal above this share of CPU time in any phase is a finding.
pub const STEAL_WARN_PCT: f64 = 10.0;

pub fn findings(r: &LabReport) -> Vec<Finding> {
    let mut out = Vec::new();
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
            out.push(
                Finding::new(Severity::Warn, "container-without-memory-limit")
                    .count("pid", p.pid as f64)
                    .evidence(
                        p.container_evidence
                            .iter()
                            .map(|e| {
                                Evidence::Said(
                                    Said::new("container-evidence")
                                        .text("points_to", e.points_to.clone())
                                        .text("source", e.source.clone())
                                        .text("detail", e.detail.clone()),
                                )
                            })
                            .collect(),
                    ),
            );
        }
    }
    if let Some(a) = &r.memory {
        if let (Some(cache), Some(limit)) = (a.cache_bytes, a.cgroup_limit_bytes) {
            if cache > limit {
                out.push(
                    Finding::new(Severity::Critical, "cache-above-limit")
                        .text("cache_name", a.cache_name.clone())
                        .bytes("cache_bytes", cache as f64)
                        .bytes("limit_bytes", limit as f64)
                        .evidence(a.statements.iter().cloned().map(Evidence::Note).collect()),
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
            // Swapped memory is a fact whoever pushed it out: not lowered when disturbed.
            out.push(
                Finding::new(Severity::Critical, "engine-memory-in-swap")
                    .bytes("swap_bytes", s)
                    .text("phase", phase.clone())
                    .evidence(vec![Evidence::Said(
                        Said::new("postmaster-smaps-swap").bytes("swap_bytes", s),
                    )]),
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
            let over: Vec<&Window> = r
                .windows
                .iter()
                .filter(|w| w.workload && w.runnable_mean.is_some_and(|m| m > cpus))
                .collect();
            out.push(
                Finding::new(Severity::Warn, "run-queue-above-cpus")
                    .text("phase", w.phase.clone())
                    .count("runnable_mean", m)
                    .count("cpus", cpus)
                    .evidence(
                        over.iter()
                            .filter_map(|w| {
                                Some(Evidence::Said(
                                    Said::new("phase-run-queue")
                                        .text("phase", w.phase.clone())
                                        .count("runnable_mean", w.runnable_mean?)
                                        .count("runnable_max", w.runnable_max?)
                                        .pct("cpu_busy_pct", w.cpu_busy_pct?),
                                ))
                            })
                            .collect(),
                    )
                    // Another process's runnable tasks count too: lowered when a phase was
                    // disturbed.
                    .phases(over.iter().map(|w| w.phase.clone()).collect()),
            );
        }
    }
    let steal: Option<(f64, &Window)> =
        largest(r.windows.iter().filter_map(|w| w.steal_pct.map(|s| (s, w))));
    if let Some((s, w)) = steal {
        if s > STEAL_WARN_PCT {
            // Steal is the host's own condition: it is what disturbs, not what is disturbed.
            out.push(
                Finding::new(Severity::Warn, "cpu-steal")
                    .text("phase", w.phase.clone())
                    .pct("steal_pct", s)
                    .pct("threshold_pct", STEAL_WARN_PCT)
                    .evidence(vec![Evidence::Said(
                        Said::new("steal-threshold")
                            .pct("steal_pct", s)
                            .pct("threshold_pct", STEAL_WARN_PCT),
                    )]),
            );
        }
    }
    out
}
