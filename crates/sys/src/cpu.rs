//! CPU time, run queue and scheduler delay: /proc/stat, /proc/loadavg, /proc/schedstat,
//! /proc/cpuinfo.

use crate::{parse_err, Result, Root};
use serde::Serialize;
use std::path::Path;

/// One `cpu` or `cpuN` line of /proc/stat, in USER_HZ clock ticks since boot.
/// Fields the kernel does not print (old kernels stop after `irq`/`softirq`) are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuTicks {
    pub user_ticks: Option<u64>,
    pub nice_ticks: Option<u64>,
    pub system_ticks: Option<u64>,
    pub idle_ticks: Option<u64>,
    pub iowait_ticks: Option<u64>,
    pub irq_ticks: Option<u64>,
    pub softirq_ticks: Option<u64>,
    pub steal_ticks: Option<u64>,
    pub guest_ticks: Option<u64>,
    pub guest_nice_ticks: Option<u64>,
}

impl CpuTicks {
    /// Total time, counted once: guest time is already inside user/nice.
    pub fn total_ticks(&self) -> u64 {
        [
            self.user_ticks,
            self.nice_ticks,
            self.system_ticks,
            self.idle_ticks,
            self.iowait_ticks,
            self.irq_ticks,
            self.softirq_ticks,
            self.steal_ticks,
        ]
        .iter()
        .map(|v| v.unwrap_or(0))
        .sum()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StatSample {
    pub total: CpuTicks,
    /// Per online CPU, keyed by the kernel's CPU number.
    pub cpus: Vec<(u32, CpuTicks)>,
    pub context_switches: Option<u64>,
    pub boot_time_unix_s: Option<u64>,
    pub processes_forked: Option<u64>,
    pub procs_running: Option<u64>,
    pub procs_blocked: Option<u64>,
}

pub fn read_stat(root: &Root) -> Result<StatSample> {
    let text = root.read("/proc/stat")?;
    parse_stat(&root.path("/proc/stat"), &text)
}

pub fn parse_stat(path: &Path, text: &str) -> Result<StatSample> {
    let mut s = StatSample::default();
    let mut saw_total = false;
    for (i, line) in text.lines().enumerate() {
        let mut it = line.split_whitespace();
        let Some(key) = it.next() else { continue };
        let rest: Vec<&str> = it.collect();
        if let Some(n) = key.strip_prefix("cpu") {
            if rest.len() < 4 {
                return Err(parse_err(
                    path,
                    i + 1,
                    "at least 4 tick counters after `cpu`",
                    line,
                ));
            }
            let mut vals = [None; 10];
            for (slot, v) in vals.iter_mut().zip(rest.iter()) {
                *slot = Some(
                    v.parse::<u64>()
                        .map_err(|_| parse_err(path, i + 1, "tick counters", line))?,
                );
            }
            let t = CpuTicks {
                user_ticks: vals[0],
                nice_ticks: vals[1],
                system_ticks: vals[2],
                idle_ticks: vals[3],
                iowait_ticks: vals[4],
                irq_ticks: vals[5],
                softirq_ticks: vals[6],
                steal_ticks: vals[7],
                guest_ticks: vals[8],
                guest_nice_ticks: vals[9],
            };
            if n.is_empty() {
                s.total = t;
                saw_total = true;
            } else {
                let id = n
                    .parse()
                    .map_err(|_| parse_err(path, i + 1, "`cpuN` with a number", line))?;
                s.cpus.push((id, t));
            }
            continue;
        }
        let first = || -> Result<u64> {
            rest.first()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| parse_err(path, i + 1, "a number after the key", line))
        };
        match key {
            "ctxt" => s.context_switches = Some(first()?),
            "btime" => s.boot_time_unix_s = Some(first()?),
            "processes" => s.processes_forked = Some(first()?),
            "procs_running" => s.procs_running = Some(first()?),
            "procs_blocked" => s.procs_blocked = Some(first()?),
            _ => {}
        }
    }
    if !saw_total {
        return Err(parse_err(
            path,
            1,
            "a `cpu` summary line",
            text.lines().next().unwrap_or(""),
        ));
    }
    Ok(s)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadAvg {
    pub load1: f64,
    pub load5: f64,
    pub load15: f64,
    /// Runnable (running or waiting for a CPU) scheduling entities right now.
    pub runnable: u64,
    pub threads: u64,
}

pub(crate) fn read_loadavg(root: &Root) -> Result<LoadAvg> {
    let text = root.read("/proc/loadavg")?;
    parse_loadavg(&root.path("/proc/loadavg"), &text)
}

pub(crate) fn parse_loadavg(path: &Path, text: &str) -> Result<LoadAvg> {
    let line = text.lines().next().unwrap_or("");
    let f: Vec<&str> = line.split_whitespace().collect();
    let bad = || parse_err(path, 1, "`l1 l5 l15 runnable/threads lastpid`", line);
    if f.len() < 4 {
        return Err(bad());
    }
    let (r, t) = f[3].split_once('/').ok_or_else(bad)?;
    Ok(LoadAvg {
        load1: f[0].parse().map_err(|_| bad())?,
        load5: f[1].parse().map_err(|_| bad())?,
        load15: f[2].parse().map_err(|_| bad())?,
        runnable: r.parse().map_err(|_| bad())?,
        threads: t.parse().map_err(|_| bad())?,
    })
}

/// Per-CPU scheduler statistics from /proc/schedstat (version 15 and later layout).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSchedstat {
    pub cpu: u32,
    /// Time tasks spent running on this CPU since boot.
    pub running_ns: u64,
    /// Time runnable tasks spent waiting in this CPU's run queue since boot.
    pub run_delay_ns: u64,
    pub timeslices: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schedstat {
    pub version: u32,
    pub cpus: Vec<CpuSchedstat>,
}

/// `Ok(None)` when the kernel has no /proc/schedstat (built without CONFIG_SCHEDSTATS).
pub fn read_schedstat(root: &Root) -> Result<Option<Schedstat>> {
    let Some(text) = root.read_optional("/proc/schedstat")? else {
        return Ok(None);
    };
    parse_schedstat(&root.path("/proc/schedstat"), &text).map(Some)
}

pub(crate) fn parse_schedstat(path: &Path, text: &str) -> Result<Schedstat> {
    let mut version = None;
    let mut cpus = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.first() {
            Some(&"version") => {
                version = Some(
                    f.get(1)
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| parse_err(path, i + 1, "`version N`", line))?,
                )
            }
            Some(k) if k.starts_with("cpu") => {
                // cpuN + 9 counters; fields 7..9 are running ns, waiting ns, timeslices.
                if f.len() < 10 {
                    return Err(parse_err(
                        path,
                        i + 1,
                        "`cpuN` followed by 9 counters",
                        line,
                    ));
                }
                let n = |j: usize| -> Result<u64> {
                    f[j].parse()
                        .map_err(|_| parse_err(path, i + 1, "numeric schedstat counters", line))
                };
                cpus.push(CpuSchedstat {
                    cpu: k[3..]
                        .parse()
                        .map_err(|_| parse_err(path, i + 1, "`cpuN` with a number", line))?,
                    running_ns: n(7)?,
                    run_delay_ns: n(8)?,
                    timeslices: n(9)?,
                });
            }
            _ => {}
        }
    }
    let version = version.ok_or_else(|| {
        parse_err(
            path,
            1,
            "a `version` line",
            text.lines().next().unwrap_or(""),
        )
    })?;
    if version < 15 {
        return Err(crate::Error::Invalid {
            path: path.to_path_buf(),
            message: format!("schedstat version {version} is older than the supported 15"),
        });
    }
    Ok(Schedstat { version, cpus })
}

/// What /proc/cpuinfo says about the processor, summarised.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuInfo {
    pub model_name: Option<String>,
    pub logical_cpus: u32,
    /// The `hypervisor` CPU flag: the kernel runs under a hypervisor (a VM).
    pub hypervisor_flag: bool,
}

pub(crate) fn read_cpuinfo(root: &Root) -> Result<Option<CpuInfo>> {
    let Some(text) = root.read_optional("/proc/cpuinfo")? else {
        return Ok(None);
    };
    let mut c = CpuInfo::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "processor" => c.logical_cpus += 1,
            "model name" if c.model_name.is_none() => c.model_name = Some(v.trim().to_string()),
            "flags" if v.split_whitespace().any(|f| f == "hypervisor") => c.hypervisor_flag = true,
            _ => {}
        }
    }
    Ok(Some(c))
}

/// Parse a kernel CPU list (`0-3,8,10-11`) into its count.
pub(crate) fn cpu_list_count(s: &str) -> Option<u32> {
    let s = s.trim();
    if s.is_empty() {
        return Some(0);
    }
    let mut n = 0u32;
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                n += b - a + 1;
            }
            None => {
                part.parse::<u32>().ok()?;
                n += 1;
            }
        }
    }
    Some(n)
}

/// Number of online CPUs from /sys/devices/system/cpu/online.
pub fn read_online_cpus(root: &Root) -> Result<Option<u32>> {
    let p = "/sys/devices/system/cpu/online";
    let Some(text) = root.read_optional(p)? else {
        return Ok(None);
    };
    cpu_list_count(&text)
        .map(Some)
        .ok_or_else(|| parse_err(&root.path(p), 1, "a CPU list like `0-3,8`", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  3100 0 1668 21082 204 0 34 410 0 0
cpu0 1423 0 783 10807 28 0 8 198 0 0
cpu1 1677 0 885 10274 176 0 26 212 0 0
intr 1 2 3
ctxt 177653
btime 1795309773
processes 2628
procs_running 3
procs_blocked 1
softirq 38927 0 5508 4 765 6078 0 33 13236 0 13303
";

    #[test]
    fn stat_reads_per_cpu_steal_and_run_queue() {
        let s = parse_stat(Path::new("/proc/stat"), STAT).unwrap();
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.total.steal_ticks, Some(410));
        assert_eq!(s.cpus[1].1.iowait_ticks, Some(176));
        assert_eq!(s.procs_running, Some(3));
        assert_eq!(s.procs_blocked, Some(1));
        assert_eq!(s.context_switches, Some(177653));
        assert_eq!(s.total.total_ticks(), 3100 + 1668 + 21082 + 204 + 34 + 410);
    }

    #[test]
    fn old_kernel_stat_without_steal_gives_none_not_zero() {
        let s = parse_stat(
            Path::new("/proc/stat"),
            "cpu 1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n",
        )
        .unwrap();
        assert_eq!(s.total.steal_ticks, None);
        assert_eq!(s.total.softirq_ticks, Some(7));
        assert_eq!(s.procs_running, None);
    }

    #[test]
    fn truncated_stat_line_names_file_and_line() {
        let e = parse_stat(Path::new("/proc/stat"), "cpu  1 2 3 4\ncpu0 1 2\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/stat:2:"), "{e}");
        let e = parse_stat(Path::new("/proc/stat"), "cpu 1 2 3 x\n").unwrap_err();
        assert!(e.to_string().starts_with("/proc/stat:1:"), "{e}");
        let e = parse_stat(Path::new("/proc/stat"), "").unwrap_err();
        assert!(e.to_string().contains("`cpu` summary"), "{e}");
    }

    #[test]
    fn loadavg_parses_and_rejects_garbage() {
        let l = parse_loadavg(Path::new("/proc/loadavg"), "0.71 0.27 0.10 3/79 2630\n").unwrap();
        assert_eq!(l.runnable, 3);
        assert_eq!(l.threads, 79);
        assert!((l.load1 - 0.71).abs() < 1e-9);
        assert!(parse_loadavg(Path::new("/proc/loadavg"), "0.71 0.27\n").is_err());
        assert!(parse_loadavg(Path::new("/proc/loadavg"), "a b c 1/2 3\n").is_err());
    }

    #[test]
    fn schedstat_v15_gives_run_delay() {
        let t = "version 15\ntimestamp 4295\ncpu0 0 0 0 0 0 0 1000 250 12\ndomain0 3 1 2 3\ncpu1 0 0 0 0 0 0 2000 750 30\n";
        let s = parse_schedstat(Path::new("/proc/schedstat"), t).unwrap();
        assert_eq!(s.cpus.len(), 2);
        assert_eq!(s.cpus[1].run_delay_ns, 750);
        assert_eq!(s.cpus[0].running_ns, 1000);
        let e =
            parse_schedstat(Path::new("/proc/schedstat"), "version 15\ncpu0 1 2\n").unwrap_err();
        assert!(e.to_string().contains(":2:"), "{e}");
        assert!(parse_schedstat(Path::new("/proc/schedstat"), "version 10\n").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_count("0-1"), Some(2));
        assert_eq!(cpu_list_count("0-3,8,10-11\n"), Some(7));
        assert_eq!(cpu_list_count("3-1"), None);
        assert_eq!(cpu_list_count("x"), None);
    }
}
