//! `plumb io`: a run's raw counts and histograms become diskspd's four sections (parameters,
//! CPU, per-thread Total/Read/Write tables, latency percentiles) plus a per-second series.

use hdrhistogram::Histogram;
use plumb_io::job::Job;
use plumb_io::run::{DirStats, RunResult, SecondStats};
use plumb_io::target::TargetKind;
use plumb_sys::cpu::{CpuTicks, StatSample};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetInfo {
    pub path: PathBuf,
    pub size_bytes: u64,
    pub kind: TargetKind,
}

/// One CPU over the measured window, in percent of that CPU's time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuUsage {
    /// The CPU number, or `None` for the total row.
    pub cpu: Option<u32>,
    pub usage_pct: f64,
    pub user_pct: f64,
    pub kernel_pct: f64,
    pub iowait_pct: f64,
    pub steal_pct: f64,
    pub idle_pct: f64,
}

/// One row of the Total, Read or Write table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoRow {
    /// Thread number, or `None` for the total over threads.
    pub thread: Option<u32>,
    pub target: Option<usize>,
    pub bytes: u64,
    pub ios: u64,
    pub bytes_per_s: f64,
    pub iops: f64,
    pub lat_mean_s: Option<f64>,
    pub lat_stddev_s: Option<f64>,
    pub lat_p50_s: Option<f64>,
    pub lat_p99_s: Option<f64>,
    pub lat_max_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoTables {
    pub total: Vec<IoRow>,
    pub read: Vec<IoRow>,
    pub write: Vec<IoRow>,
}

/// A latency percentile row: `None` where the sample count cannot support the percentile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PercentileRow {
    pub label: String,
    /// The quantile in 0..=1 (0 for min, 1 for max).
    pub quantile: f64,
    pub read_s: Option<f64>,
    pub write_s: Option<f64>,
    pub total_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessCpu {
    pub user_s: f64,
    pub system_s: f64,
    /// plumb's CPU time per completed I/O.
    pub cpu_per_io_s: Option<f64>,
    /// Kernel entries per completed I/O (io_uring_enter, or pread/pwrite/sync calls).
    pub syscalls_per_io: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoReport {
    /// Exactly what was typed.
    pub command_line: String,
    pub job: Job,
    pub targets: Vec<TargetInfo>,
    pub engine: String,
    /// Notes on the input (diskspd flags without effect).
    pub input_notes: Vec<String>,
    pub measured_s: f64,
    /// Latency counts from intended start times (a rate or bursts paced the run).
    pub paced: bool,
    pub cpu: Vec<CpuUsage>,
    pub process_cpu: Option<ProcessCpu>,
    pub tables: IoTables,
    pub percentiles: Vec<PercentileRow>,
    /// With pacing: percentiles of service time (from actual submission), to compare.
    pub service_percentiles: Option<Vec<PercentileRow>>,
    pub fsyncs: u64,
    pub series: Vec<SecondStats>,
    /// Whether other work on the host disturbed the run (None: not watched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interference: Option<crate::interference::Interference>,
}

/// The percentiles diskspd prints, with the sample count each needs: printing a p-quantile
/// from fewer than 1/(1-p) samples would just repeat the maximum.
pub const PERCENTILES: &[(&str, f64)] = &[
    ("min", 0.0),
    ("25th", 0.25),
    ("50th", 0.50),
    ("75th", 0.75),
    ("90th", 0.90),
    ("95th", 0.95),
    ("99th", 0.99),
    ("3-nines", 0.999),
    ("4-nines", 0.9999),
    ("5-nines", 0.99999),
    ("6-nines", 0.999999),
    ("7-nines", 0.9999999),
    ("8-nines", 0.99999999),
    ("max", 1.0),
];

/// Samples needed before the q-quantile means something.
pub(crate) fn samples_needed(q: f64) -> u64 {
    if q <= 0.0 || q >= 1.0 {
        1
    } else {
        // 1/(1-q) carries float noise both ways (1000.0000000000009, 99999999.4); shave a
        // relative 1e-9 and round up.
        (1.0 / (1.0 - q) * (1.0 - 1e-9)).ceil() as u64
    }
}

/// The q-quantile of a histogram in seconds, or None without enough samples.
pub(crate) fn quantile_s(h: &Histogram<u64>, q: f64) -> Option<f64> {
    let n = h.len();
    if n == 0 || n < samples_needed(q) {
        return None;
    }
    let ns = if q <= 0.0 {
        h.min()
    } else if q >= 1.0 {
        h.max()
    } else {
        h.value_at_quantile(q)
    };
    Some(ns as f64 / 1e9)
}

fn percentile_rows(
    read: &Histogram<u64>,
    write: &Histogram<u64>,
    total: &Histogram<u64>,
) -> Vec<PercentileRow> {
    PERCENTILES
        .iter()
        .map(|(label, q)| PercentileRow {
            label: label.to_string(),
            quantile: *q,
            read_s: quantile_s(read, *q),
            write_s: quantile_s(write, *q),
            total_s: quantile_s(total, *q),
        })
        .collect()
}

fn row(thread: Option<u32>, target: Option<usize>, d: &DirStats, secs: f64) -> IoRow {
    let n = d.ios as f64;
    let mean = (d.ios > 0).then(|| d.lat_sum_ns / n);
    let stddev = mean.map(|m| ((d.lat_sum_sq_ns / n - m * m).max(0.0)).sqrt() / 1e9);
    IoRow {
        thread,
        target,
        bytes: d.bytes,
        ios: d.ios,
        bytes_per_s: if secs > 0.0 {
            d.bytes as f64 / secs
        } else {
            0.0
        },
        iops: if secs > 0.0 { n / secs } else { 0.0 },
        lat_mean_s: mean.map(|m| m / 1e9),
        lat_stddev_s: stddev,
        lat_p50_s: quantile_s(&d.lat, 0.5),
        lat_p99_s: quantile_s(&d.lat, 0.99),
        lat_max_s: quantile_s(&d.lat, 1.0),
    }
}

fn ticks_delta(a: &CpuTicks, b: &CpuTicks) -> Option<CpuUsage> {
    let d = |x: Option<u64>, y: Option<u64>| y.unwrap_or(0).saturating_sub(x.unwrap_or(0)) as f64;
    let user = d(a.user_ticks, b.user_ticks) + d(a.nice_ticks, b.nice_ticks);
    let kernel = d(a.system_ticks, b.system_ticks)
        + d(a.irq_ticks, b.irq_ticks)
        + d(a.softirq_ticks, b.softirq_ticks);
    let iowait = d(a.iowait_ticks, b.iowait_ticks);
    let steal = d(a.steal_ticks, b.steal_ticks);
    let idle = d(a.idle_ticks, b.idle_ticks);
    let total = user + kernel + iowait + steal + idle;
    if total <= 0.0 {
        return None;
    }
    let p = |v: f64| v * 100.0 / total;
    Some(CpuUsage {
        cpu: None,
        usage_pct: p(user + kernel),
        user_pct: p(user),
        kernel_pct: p(kernel),
        iowait_pct: p(iowait),
        steal_pct: p(steal),
        idle_pct: p(idle),
    })
}

pub(crate) fn cpu_usage(before: &StatSample, after: &StatSample) -> Vec<CpuUsage> {
    let mut out = Vec::new();
    for (id, b) in &before.cpus {
        if let Some((_, a)) = after.cpus.iter().find(|(i, _)| i == id) {
            if let Some(mut u) = ticks_delta(b, a) {
                u.cpu = Some(*id);
                out.push(u);
            }
        }
    }
    if let Some(t) = ticks_delta(&before.total, &after.total) {
        out.push(t);
    }
    out
}

/// Build the report. `command_line` is what the user typed; `input_notes` come from parsing it.
pub fn build(r: &RunResult, command_line: &str, input_notes: Vec<String>) -> IoReport {
    let secs = r.measured_s;
    let mut read_all = DirStats::empty(r.paced);
    let mut write_all = DirStats::empty(r.paced);
    let mut tables = IoTables {
        total: Vec::new(),
        read: Vec::new(),
        write: Vec::new(),
    };
    // diskspd reports per thread; psync workers of one thread are folded together.
    let mut threads: Vec<(u32, usize, DirStats, DirStats)> = Vec::new();
    for w in &r.workers {
        match threads.iter_mut().find(|t| t.0 == w.thread) {
            Some(t) => {
                t.2.merge(&w.read);
                t.3.merge(&w.write);
            }
            None => threads.push((w.thread, w.target, w.read.clone(), w.write.clone())),
        }
        read_all.merge(&w.read);
        write_all.merge(&w.write);
    }
    for (th, target, rd, wr) in &threads {
        let mut both = rd.clone();
        both.merge(wr);
        tables
            .total
            .push(row(Some(*th), Some(*target), &both, secs));
        tables.read.push(row(Some(*th), Some(*target), rd, secs));
        tables.write.push(row(Some(*th), Some(*target), wr, secs));
    }
    let mut all = read_all.clone();
    all.merge(&write_all);
    tables.total.push(row(None, None, &all, secs));
    tables.read.push(row(None, None, &read_all, secs));
    tables.write.push(row(None, None, &write_all, secs));

    let percentiles = percentile_rows(&read_all.lat, &write_all.lat, &all.lat);
    let service_percentiles = match (&read_all.service, &write_all.service, &all.service) {
        (Some(r), Some(w), Some(t)) => Some(percentile_rows(r, w, t)),
        _ => None,
    };
    let ios = all.ios;
    let syscalls: u64 = r.workers.iter().map(|w| w.syscalls).sum();
    let process_cpu = r.cpu.as_ref().map(|c| ProcessCpu {
        user_s: c.user_s,
        system_s: c.system_s,
        cpu_per_io_s: (ios > 0).then(|| (c.user_s + c.system_s) / ios as f64),
        // Syscalls are counted over the whole run; scale I/Os the same way is not possible, so
        // this is per measured I/O and slightly high when warm-up is long.
        syscalls_per_io: (ios > 0 && syscalls > 0).then(|| syscalls as f64 / ios as f64),
    });
    IoReport {
        command_line: command_line.to_string(),
        job: r.job.clone(),
        targets: r
            .targets
            .iter()
            .map(|(p, s, k)| TargetInfo {
                path: p.clone(),
                size_bytes: *s,
                kind: *k,
            })
            .collect(),
        engine: r.engine_setup.clone(),
        input_notes,
        measured_s: secs,
        paced: r.paced,
        cpu: r
            .cpu
            .as_ref()
            .map(|c| cpu_usage(&c.before, &c.after))
            .unwrap_or_default(),
        process_cpu,
        tables,
        percentiles,
        service_percentiles,
        fsyncs: r.workers.iter().map(|w| w.syncs).sum(),
        series: r.series.clone(),
        interference: None,
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PresetInfo {
    pub name: String,
    pub models: String,
    pub job: Job,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PresetList {
    pub presets: Vec<PresetInfo>,
}

pub fn preset_list() -> PresetList {
    PresetList {
        presets: plumb_io::job::PRESETS
            .iter()
            .map(|p| PresetInfo {
                name: p.name.to_string(),
                models: p.models.to_string(),
                job: (p.make)(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_io::run::new_hist;

    #[test]
    fn percentiles_need_enough_samples() {
        let mut h = new_hist(3);
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        // 1000 samples support the 99.9th but not the 99.99th.
        assert!(quantile_s(&h, 0.999).is_some());
        assert_eq!(quantile_s(&h, 0.9999), None);
        assert_eq!(quantile_s(&h, 0.0), Some(1e-6));
        let p50 = quantile_s(&h, 0.5).unwrap();
        assert!((p50 - 500e-6).abs() < 1e-6, "{p50}");
        assert!((quantile_s(&h, 1.0).unwrap() - 1e-3).abs() < 1e-6);
        assert_eq!(samples_needed(0.99999999), 100_000_000);
        assert_eq!(quantile_s(&new_hist(3), 0.5), None);
    }

    #[test]
    fn cpu_usage_from_ticks() {
        let p = std::path::Path::new("/proc/stat");
        let a = plumb_sys::cpu::parse_stat(
            p,
            "cpu 100 0 100 800 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0\n",
        )
        .unwrap();
        let b = plumb_sys::cpu::parse_stat(
            p,
            "cpu 130 0 120 840 0 0 0 10\ncpu0 130 0 120 840 0 0 0 10\n",
        )
        .unwrap();
        let u = cpu_usage(&a, &b);
        assert_eq!(u.len(), 2);
        assert_eq!(u[0].cpu, Some(0));
        assert!((u[0].usage_pct - 50.0).abs() < 1e-9);
        assert!((u[0].steal_pct - 10.0).abs() < 1e-9);
        assert!((u[1].idle_pct - 40.0).abs() < 1e-9);
    }
}
