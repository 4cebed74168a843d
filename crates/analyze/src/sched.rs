//! `plumb cpu`: scheduling pressure between two samples — how long work waits for a CPU.
//! The Linux counterpart of `sys.dm_os_schedulers.runnable_tasks_count`.

use crate::{Level, Note, WithFacts};
use plumb_sys::cpu::{CpuTicks, Schedstat, StatSample};
use plumb_sys::pressure::Psi;
use plumb_sys::process::ThreadSample;
use serde::Serialize;

#[derive(Debug, Clone)]
pub struct SchedSample {
    pub stat: StatSample,
    pub schedstat: Option<Schedstat>,
    pub psi_cpu: Option<Psi>,
    pub threads: Option<(u32, Vec<ThreadSample>)>,
    pub at: std::time::Instant,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuRow {
    /// None for the total over CPUs.
    pub cpu: Option<u32>,
    pub busy_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub steal_pct: f64,
    pub iowait_pct: f64,
    /// Task time spent waiting for this CPU per wall time (over 100 when several tasks wait).
    pub run_delay_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadRow {
    pub tid: u32,
    pub comm: String,
    pub cpu_pct: f64,
    /// Share of the interval the thread was runnable but not running.
    pub runnable_waiting_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuReport {
    pub interval_s: f64,
    pub cpus: Vec<CpuRow>,
    pub online_cpus: usize,
    pub runnable_now: Option<u64>,
    pub blocked_now: Option<u64>,
    pub psi_cpu_some_pct: Option<f64>,
    pub pid: Option<u32>,
    pub threads: Vec<ThreadRow>,
    pub notes: Vec<Note>,
}

fn d(a: Option<u64>, b: Option<u64>) -> f64 {
    b.unwrap_or(0).saturating_sub(a.unwrap_or(0)) as f64
}

fn row(cpu: Option<u32>, a: &CpuTicks, b: &CpuTicks, delay: Option<f64>) -> CpuRow {
    let user = d(a.user_ticks, b.user_ticks) + d(a.nice_ticks, b.nice_ticks);
    let sys = d(a.system_ticks, b.system_ticks)
        + d(a.irq_ticks, b.irq_ticks)
        + d(a.softirq_ticks, b.softirq_ticks);
    let steal = d(a.steal_ticks, b.steal_ticks);
    let iow = d(a.iowait_ticks, b.iowait_ticks);
    let idle = d(a.idle_ticks, b.idle_ticks);
    let tot = (user + sys + steal + iow + idle).max(1e-9);
    CpuRow {
        cpu,
        busy_pct: (user + sys) / tot * 100.0,
        user_pct: user / tot * 100.0,
        system_pct: sys / tot * 100.0,
        steal_pct: steal / tot * 100.0,
        iowait_pct: iow / tot * 100.0,
        run_delay_pct: delay,
    }
}

pub fn build(a: &SchedSample, b: &SchedSample, clock_ticks_per_s: u64) -> CpuReport {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    let delay = |cpu: u32| -> Option<f64> {
        let x = a.schedstat.as_ref()?.cpus.iter().find(|c| c.cpu == cpu)?;
        let y = b.schedstat.as_ref()?.cpus.iter().find(|c| c.cpu == cpu)?;
        Some(y.run_delay_ns.checked_sub(x.run_delay_ns)? as f64 / 1e9 / secs * 100.0)
    };
    let mut cpus: Vec<CpuRow> = a
        .stat
        .cpus
        .iter()
        .filter_map(|(id, ta)| {
            b.stat
                .cpus
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, tb)| row(Some(*id), ta, tb, delay(*id)))
        })
        .collect();
    let total_delay = {
        let v: Vec<f64> = cpus.iter().filter_map(|c| c.run_delay_pct).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    };
    cpus.push(row(None, &a.stat.total, &b.stat.total, total_delay));
    let psi = match (
        a.psi_cpu.as_ref().and_then(|p| p.some.as_ref()),
        b.psi_cpu.as_ref().and_then(|p| p.some.as_ref()),
    ) {
        (Some(x), Some(y)) if y.total_us >= x.total_us => {
            Some((y.total_us - x.total_us) as f64 / 1e6 / secs * 100.0)
        }
        _ => None,
    };
    let mut threads = Vec::new();
    if let (Some((pa, ta)), Some((pb, tb))) = (&a.threads, &b.threads) {
        if pa == pb {
            for t in tb {
                let Some(o) = ta.iter().find(|x| x.tid == t.tid) else {
                    continue;
                };
                let cpu = t.cpu_ticks.saturating_sub(o.cpu_ticks) as f64
                    / clock_ticks_per_s.max(1) as f64
                    / secs
                    * 100.0;
                let wait = match (o.run_delay_ns, t.run_delay_ns) {
                    (Some(x), Some(y)) if y >= x => Some((y - x) as f64 / 1e9 / secs * 100.0),
                    _ => None,
                };
                threads.push(ThreadRow {
                    tid: t.tid,
                    comm: t.comm.clone(),
                    cpu_pct: cpu,
                    runnable_waiting_pct: wait,
                });
            }
            threads.sort_by(|x, y| {
                y.runnable_waiting_pct
                    .unwrap_or(0.0)
                    .partial_cmp(&x.runnable_waiting_pct.unwrap_or(0.0))
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(
                        y.cpu_pct
                            .partial_cmp(&x.cpu_pct)
                            .unwrap_or(std::cmp::Ordering::Equal),
                    )
            });
        }
    }
    let n = a.stat.cpus.len();
    let mut notes = Vec::new();
    if let Some(r) = b.stat.procs_running {
        if r as usize > n {
            notes.push(
                Note::new(Level::Warn, "runnable-above-cpus")
                    .count("runnable", r as f64)
                    .count("cpus", n as f64),
            );
        }
    }
    if let Some(t) = cpus.last() {
        if t.steal_pct >= 10.0 {
            notes.push(Note::new(Level::Warn, "cpu-steal").pct("steal_pct", t.steal_pct));
        }
    }
    if let Some(p) = psi {
        if p >= 10.0 {
            notes.push(Note::new(Level::Warn, "cpu-pressure").pct("psi_cpu_some_pct", p));
        }
    }
    if a.schedstat.is_none() {
        notes.push(Note::new(Level::Info, "no-schedstat"));
    }
    if let Some(t) = threads
        .iter()
        .find(|t| t.runnable_waiting_pct.unwrap_or(0.0) >= 10.0)
    {
        notes.push(
            Note::new(Level::Warn, "thread-waiting-for-cpu")
                .count("tid", t.tid as f64)
                .text("comm", t.comm.clone())
                .pct(
                    "runnable_waiting_pct",
                    t.runnable_waiting_pct.unwrap_or(0.0),
                ),
        );
    }
    CpuReport {
        interval_s: secs,
        cpus,
        online_cpus: n,
        runnable_now: b.stat.procs_running,
        blocked_now: b.stat.procs_blocked,
        psi_cpu_some_pct: psi,
        pid: b.threads.as_ref().map(|t| t.0),
        threads,
        notes,
    }
}
