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
    // Engine memory in swap: the server's problem where plumb's experiments were not running;
    // where one was (--pressure pushes the server into swap on purpose), plumb's own doing,
    // tagged with the experiment and said as info.
    let experiment_of = |phase: &str| r.experiments.iter().find(|e| e.phase == phase);
    let swapped = largest(
        r.windows
            .iter()
            .filter(|w| experiment_of(&w.phase).is_none())
            .filter_map(|w| w.engine_swap_bytes_max.map(|s| (s, &w.phase))),
    );
    // The first experiment whose window found the server in swap is the one that put it
    // there (swap stays until the memory is touched again, into later experiments' windows).
    let ours = r.windows.iter().find_map(|w| {
        let e = experiment_of(&w.phase)?;
        w.engine_swap_bytes_max
            .filter(|s| *s >= 1048576.0)
            .map(|s| (s, e))
    });
    let swap_finding = |severity: Severity, s: f64, phase: &str| {
        Finding::new(severity, "engine-memory-in-swap")
            .bytes("swap_bytes", s)
            .text("phase", phase.to_string())
            .evidence(vec![Evidence::Said(
                Said::new("postmaster-smaps-swap").bytes("swap_bytes", s),
            )])
    };
    if let Some((s, phase)) = swapped.filter(|(s, _)| *s >= 1048576.0) {
        // Swapped memory is a fact whoever pushed it out: not lowered when disturbed.
        out.push(swap_finding(Severity::Critical, s, phase));
    } else if let Some((s, e)) = ours {
        out.push(swap_finding(Severity::Info, s, &e.phase).experiment(e.setting.clone()));
    }
    // CPU: run queue (the worst workload phase) and steal (any phase). A queue in plumb's own experiments' phases (--pressure keeps a program touching memory
    // beside the server) is theirs: said as info and tagged, unless the server's own phases
    // queued too.
    let cpus = r.host.cpu.online_cpus.unwrap_or(0) as f64;
    let worst_of = |in_experiment: bool| {
        largest(
            r.windows
                .iter()
                .filter(|w| w.workload && experiment_of(&w.phase).is_some() == in_experiment)
                .filter_map(|w| w.runnable_mean.map(|m| (m, w))),
        )
        .filter(|(m, _)| cpus > 0.0 && *m > cpus)
    };
    let queued = match (worst_of(false), worst_of(true)) {
        (Some((m, w)), _) => Some((m, w, Severity::Warn, None)),
        (None, Some((m, w))) => {
            let e = experiment_of(&w.phase).map(|e| e.setting.clone());
            Some((m, w, Severity::Info, e))
        }
        (None, None) => None,
    };
    if let Some((m, w, severity, experiment)) = queued {
        let over: Vec<&Window> = r
            .windows
            .iter()
            .filter(|w| w.workload && w.runnable_mean.is_some_and(|m| m > cpus))
            .collect();
        let mut f = Finding::new(severity, "run-queue-above-cpus");
        if let Some(x) = experiment {
            f = f.experiment(x);
        }
        out.push(
            f.text("phase", w.phase.clone())
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
