//! Text form of `plumb os`: a short report, one block per subject.

use crate::fmt::{bytes, duration, ms, opt, opt_bytes, opt_pct, pct, yes_no, MISSING, UNKNOWN};
use crate::Render;
use plumb_analyze::os::{CpuSection, MemorySection, OsReport, ProcessSection, StorageSection};
use plumb_analyze::Level;
use plumb_sys::cgroup::{CgroupMode, Limit};
use plumb_sys::pressure::Psi;
use std::io::{self, Write};

impl Render for OsReport {
    const KIND: &'static str = "os";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        write_report(self, out)
    }
}

const W: usize = 10;

fn head(out: &mut dyn Write, label: &str, text: &str) -> io::Result<()> {
    writeln!(out, "{}", format!("{label:<W$}{text}").trim_end())
}

fn more(out: &mut dyn Write, text: &str) -> io::Result<()> {
    writeln!(out, "{:<W$}{text}", "")
}

fn limit(l: Option<Limit>) -> String {
    match l {
        None => UNKNOWN.into(),
        Some(Limit::Max) => "none".into(),
        Some(Limit::Value(v)) => bytes(v),
    }
}

fn psi_line(p: &Psi) -> String {
    let one = |name: &str, l: &Option<plumb_sys::pressure::PsiLine>| match l {
        Some(l) => format!(
            "{name} {:>6} {:>6} {:>6}",
            format!("{:.2}", l.avg10_pct),
            format!("{:.2}", l.avg60_pct),
            format!("{:.2}", l.avg300_pct)
        ),
        None => format!("{name} {:>20}", MISSING),
    };
    format!("{}   {}", one("some", &p.some), one("full", &p.full))
}

fn write_report(r: &OsReport, out: &mut dyn Write) -> io::Result<()> {
    write_host(r, out)?;
    write_cpu(&r.cpu, out)?;
    write_memory(&r.memory, out)?;
    write_pressure_and_after(r, out)
}

/// The host: its name, kernel and machine.
fn write_host(r: &OsReport, out: &mut dyn Write) -> io::Result<()> {
    let h = &r.host;
    writeln!(
        out,
        "{} · {} · kernel {}",
        h.hostname.as_deref().unwrap_or("host"),
        h.os.as_deref().unwrap_or("unknown distribution"),
        h.kernel_release.as_deref().unwrap_or(UNKNOWN)
    )?;
    let mut line = format!(
        "up {}",
        h.uptime_s.map(duration).unwrap_or_else(|| UNKNOWN.into())
    );
    if h.virtualization_evidence.is_empty() {
        line.push_str(" · no sign of a hypervisor");
    } else {
        line.push_str(&format!(
            " · virtual machine ({})",
            h.virtualization_evidence.join("; ")
        ));
    }
    writeln!(out, "{line}\n")?;
    Ok(())
}

/// CPU: since boot, per CPU, and the run queue's delay.
fn write_cpu(c: &CpuSection, out: &mut dyn Write) -> io::Result<()> {
    // CPU
    head(
        out,
        "CPU",
        &format!(
            "{} online{}",
            opt(c.online_cpus),
            c.model
                .as_ref()
                .map(|m| format!(" · {m}"))
                .unwrap_or_default()
        ),
    )?;
    let s = &c.since_boot;
    more(
        out,
        &format!(
            "since boot: user {}  system {}  iowait {}  irq {}  steal {}  idle {}",
            opt_pct(s.user_pct),
            opt_pct(s.system_pct),
            opt_pct(s.iowait_pct),
            opt_pct(s.irq_pct),
            opt_pct(s.steal_pct),
            opt_pct(s.idle_pct)
        ),
    )?;
    if c.per_cpu.len() > 1 && c.per_cpu.len() <= 16 {
        for p in &c.per_cpu {
            let delay = p
                .run_delay_s
                .map(|d| format!("  waited {}", duration(d)))
                .unwrap_or_default();
            more(
                out,
                &format!(
                    "  cpu{:<3} user {:>6}  system {:>6}  iowait {:>6}  steal {:>6}  idle {:>6}{delay}",
                    p.cpu,
                    opt_pct(p.since_boot.user_pct),
                    opt_pct(p.since_boot.system_pct),
                    opt_pct(p.since_boot.iowait_pct),
                    opt_pct(p.since_boot.steal_pct),
                    opt_pct(p.since_boot.idle_pct)
                ),
            )?;
        }
    }
    more(
        out,
        &format!(
            "now: {} runnable, {} blocked on I/O · load {} {} {}",
            opt(c.procs_running),
            opt(c.procs_blocked),
            c.load1
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| UNKNOWN.into()),
            c.load5
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| UNKNOWN.into()),
            c.load15
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| UNKNOWN.into()),
        ),
    )?;
    match (c.run_delay_s, c.run_delay_per_running_pct) {
        (Some(d), p) => more(
            out,
            &format!(
                "run-queue delay since boot: {} waiting for a CPU{}",
                duration(d),
                p.map(|p| format!(" ({} of time running)", pct(p)))
                    .unwrap_or_default()
            ),
        )?,
        _ => more(
            out,
            "run-queue delay since boot: unknown (no /proc/schedstat)",
        )?,
    }
    writeln!(out)?;
    Ok(())
}

/// Memory, huge pages and swap.
fn write_memory(m: &MemorySection, out: &mut dyn Write) -> io::Result<()> {
    // Memory
    head(
        out,
        "Memory",
        &format!(
            "total {} · available {} · free {} · buff/cache {}",
            opt_bytes(m.total_bytes),
            opt_bytes(m.available_bytes),
            opt_bytes(m.free_bytes),
            opt_bytes(m.buff_cache_bytes)
        ),
    )?;
    more(
        out,
        &format!(
            "anon {} · shmem {} · dirty {} · committed {} of limit {}",
            opt_bytes(m.anon_bytes),
            opt_bytes(m.shmem_bytes),
            opt_bytes(m.dirty_bytes),
            opt_bytes(m.committed_bytes),
            opt_bytes(m.commit_limit_bytes)
        ),
    )?;
    if let (Some(t), Some(sz)) = (m.huge_pages_total, m.hugepage_size_bytes) {
        if t > 0 {
            more(
                out,
                &format!(
                    "huge pages: {t} of {} ({} free)",
                    bytes(sz),
                    opt(m.huge_pages_free)
                ),
            )?;
        }
    }
    let swap = match m.swap_total_bytes {
        Some(0) => "none configured".to_string(),
        Some(t) => format!(
            "{} used of {} on {} device(s)",
            opt_bytes(m.swap_used_bytes),
            bytes(t),
            m.swap_devices.len()
        ),
        None => UNKNOWN.to_string(),
    };
    head(out, "Swap", &swap)?;
    for d in &m.swap_devices {
        more(
            out,
            &format!(
                "  {} ({}) {} used of {}, priority {}",
                d.filename,
                d.kind,
                bytes(d.used_bytes),
                bytes(d.size_bytes),
                d.priority
            ),
        )?;
    }
    more(
        out,
        &format!(
            "since boot: swapped in {} · out {} · major faults {} · OOM kills {}",
            opt_bytes(m.swap_in_since_boot_bytes),
            opt_bytes(m.swap_out_since_boot_bytes),
            opt(m.major_faults_since_boot),
            opt(m.oom_kills_since_boot)
        ),
    )?;
    writeln!(out)?;
    Ok(())
}

/// Pressure, cgroups, the processes asked about, the storage, the notes and what could not be read.
fn write_pressure_and_after(r: &OsReport, out: &mut dyn Write) -> io::Result<()> {
    // Pressure
    match &r.pressure {
        Some(p) => {
            head(out, "Pressure", "% of time stalled, avg10 avg60 avg300")?;
            for (name, v) in [("cpu", &p.cpu), ("memory", &p.memory), ("io", &p.io)] {
                match v {
                    Some(v) => more(out, &format!("  {name:<7}{}", psi_line(v)))?,
                    None => more(out, &format!("  {name:<7}not available"))?,
                }
            }
        }
        None => head(out, "Pressure", "not available (kernel without PSI)")?,
    }
    writeln!(out)?;

    head(
        out,
        "cgroups",
        match r.cgroup_mode {
            CgroupMode::V1 => "v1 (a hierarchy per controller)",
            CgroupMode::V2 => "v2 (unified)",
            CgroupMode::Hybrid => "hybrid (v1 controllers, plus a v2 hierarchy)",
            CgroupMode::None => "none mounted",
        },
    )?;
    writeln!(out)?;

    for p in &r.processes {
        write_process(p, out)?;
        writeln!(out)?;
    }

    if let Some(s) = &r.storage {
        write_storage(s, out)?;
        writeln!(out)?;
    }

    if !r.notes.is_empty() {
        writeln!(out, "Notes")?;
        for n in &r.notes {
            let mark = match n.level {
                Level::Warn => "!",
                Level::Info => "-",
            };
            writeln!(out, "  {mark} {}", crate::words::note(n))?;
        }
        writeln!(out)?;
    }
    let missing: Vec<_> = r
        .missing
        .iter()
        .chain(
            r.processes
                .iter()
                .flat_map(|p| p.missing.iter().chain(p.cgroups.missing.iter())),
        )
        .collect();
    if !missing.is_empty() {
        head(
            out,
            "Missing",
            "sources plumb could not read (shown as unknown above)",
        )?;
        for m in missing {
            writeln!(out, "  {}: {}", m.source, m.reason)?;
        }
    }
    Ok(())
}

fn write_process(p: &ProcessSection, out: &mut dyn Write) -> io::Result<()> {
    let title = if p.role == "plumb" {
        format!("plumb itself (PID {})", p.pid)
    } else {
        format!(
            "PID {} · {}{}",
            p.pid,
            p.name.as_deref().unwrap_or(UNKNOWN),
            p.cmdline
                .as_ref()
                .filter(|c| !c.is_empty())
                .map(|c| {
                    let mut s = c.join(" ");
                    if s.len() > 60 {
                        let mut cut = 60;
                        while !s.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        s.truncate(cut);
                        s.push('…');
                    }
                    format!(" · {s}")
                })
                .unwrap_or_default()
        )
    };
    head(out, "Process", &title)?;
    let mm = &p.memory;
    more(
        out,
        &format!(
            "memory: RSS {} (anon {} · file {} · shmem {}) · VmSize {} · VmData {}",
            opt_bytes(mm.figures.vm_rss_bytes),
            opt_bytes(mm.figures.rss_anon_bytes),
            opt_bytes(mm.figures.rss_file_bytes),
            opt_bytes(mm.figures.rss_shmem_bytes),
            opt_bytes(mm.figures.vm_size_bytes),
            opt_bytes(mm.figures.vm_data_bytes)
        ),
    )?;
    more(
        out,
        &format!(
            "swap: {} in all (smaps_rollup) · VmSwap {} (private memory only)",
            opt_bytes(mm.figures.smaps_swap_bytes),
            opt_bytes(mm.figures.vm_swap_bytes)
        ),
    )?;
    more(
        out,
        &format!(
            "threads {} · CPUs allowed {} · CPU time {} · waited for CPU {} · storage read {} written {}",
            opt(p.threads),
            p.cpus_allowed.as_deref().unwrap_or(UNKNOWN),
            p.cpu_time_s.map(duration).unwrap_or_else(|| UNKNOWN.into()),
            p.run_delay_s.map(duration).unwrap_or_else(|| UNKNOWN.into()),
            opt_bytes(p.read_bytes),
            opt_bytes(p.write_bytes)
        ),
    )?;
    write_cgroups(p, out)
}

/// A process's cgroups: memory, CPU, cpuset, I/O throttles and pressure, and whether it runs
/// in a container.
fn write_cgroups(p: &ProcessSection, out: &mut dyn Write) -> io::Result<()> {
    let cg = &p.cgroups;
    match &cg.memory {
        Some(m) => {
            let eff = match (m.effective_limit, &m.effective_limit_set_at) {
                (Some(Limit::Value(v)), Some(at)) if Some(Limit::Value(v)) != m.limit => {
                    format!(" (effective {} set at {})", bytes(v), at.display())
                }
                _ => String::new(),
            };
            more(
                out,
                &format!("memory cgroup v{} {}", m.at.version, m.at.cgroup_path),
            )?;
            more(
                out,
                &format!(
                    "  limit {}{eff} · usage {} (peak {}) · anon {} · file {} · swap {}",
                    limit(m.limit),
                    opt_bytes(m.usage_bytes),
                    opt_bytes(m.peak_usage_bytes),
                    opt_bytes(m.anon_bytes),
                    opt_bytes(m.file_bytes),
                    opt_bytes(m.swap_bytes)
                ),
            )?;
            let mut ev = Vec::new();
            if m.at.version == 1 {
                ev.push(format!("failcnt {}", opt(m.failcnt)));
                ev.push(format!("memory+swap limit {}", limit(m.memsw_limit)));
                ev.push(format!("swappiness {}", opt(m.swappiness)));
            } else {
                ev.push(format!("high {}", limit(m.high)));
                ev.push(format!("swap limit {}", limit(m.swap_limit)));
                ev.push(format!("hit max {} times", opt(m.max_events)));
                ev.push(format!("OOM {}", opt(m.oom_events)));
            }
            ev.push(format!("OOM kills {}", opt(m.oom_kill_events)));
            more(out, &format!("  {}", ev.join(" · ")))?;
        }
        None => more(out, "memory cgroup: not found")?,
    }
    let mut other = Vec::new();
    match &cg.cpu {
        Some(c) => other.push(match c.effective_cpus {
            Some(n) => format!(
                "CPU quota {n:.2} CPUs (throttled {} times)",
                opt(c.nr_throttled)
            ),
            None => "no CPU quota".to_string(),
        }),
        None => other.push("cpu cgroup not found".to_string()),
    }
    if let Some(cs) = &cg.cpuset_cpus {
        other.push(format!("cpuset {cs}"));
    }
    if p.io_throttles.is_empty() {
        other.push(if cg.io.is_some() {
            "no I/O throttles".into()
        } else {
            "io cgroup not found".into()
        });
    }
    more(out, &other.join(" · "))?;
    for t in &p.io_throttles {
        let f = |v: Option<u64>, per: &str| {
            v.map(|v| format!("{v}{per}"))
                .unwrap_or_else(|| "max".into())
        };
        more(
            out,
            &format!(
                "  I/O throttle on {}: read {} · write {} · read {} · write {}",
                t.dev,
                t.read_bytes_per_s
                    .map(|v| format!("{}/s", bytes(v)))
                    .unwrap_or_else(|| "max".into()),
                t.write_bytes_per_s
                    .map(|v| format!("{}/s", bytes(v)))
                    .unwrap_or_else(|| "max".into()),
                f(t.read_iops, " IOPS"),
                f(t.write_iops, " IOPS")
            ),
        )?;
    }
    if let Some(pr) = &cg.pressure {
        more(out, &format!("cgroup pressure ({})", pr.dir.display()))?;
        for (name, v) in [("cpu", &pr.cpu), ("memory", &pr.memory), ("io", &pr.io)] {
            if let Some(v) = v {
                more(out, &format!("  {name:<7}{}", psi_line(v)))?;
            }
        }
    }
    if p.container_evidence.is_empty() {
        more(out, "container: no evidence of one")?;
    } else {
        more(out, "container evidence:")?;
        for e in &p.container_evidence {
            more(
                out,
                &format!("  {}: {} ({})", e.points_to, e.detail, e.source),
            )?;
        }
    }
    Ok(())
}

fn write_storage(s: &StorageSection, out: &mut dyn Write) -> io::Result<()> {
    let shown = if s.path == s.canonical_path {
        s.path.display().to_string()
    } else {
        format!("{} ({})", s.path.display(), s.canonical_path.display())
    };
    head(
        out,
        "Storage",
        &format!(
            "{shown} is on {} · {} from {}",
            s.mount_point, s.fs_type, s.source
        ),
    )?;
    more(out, &format!("options {}", s.options.join(",")))?;
    if let (Some(t), Some(a)) = (s.fs_size_bytes, s.fs_available_bytes) {
        more(out, &format!("size {} · available {}", bytes(t), bytes(a)))?;
    }
    if s.layers.is_empty() {
        more(out, "block device: none (not a local block filesystem)")?;
    }
    for layer in &s.layers {
        let l = &layer.device;
        let kind = match l.kind {
            plumb_sys::block::DeviceKind::Disk => "disk",
            plumb_sys::block::DeviceKind::Partition => "partition",
            plumb_sys::block::DeviceKind::DeviceMapper => "device-mapper",
            plumb_sys::block::DeviceKind::Md => "md raid",
            plumb_sys::block::DeviceKind::Loop => "loop",
            plumb_sys::block::DeviceKind::Pmem => "persistent memory",
            plumb_sys::block::DeviceKind::Other => "block device",
        };
        let mut d = format!("{} · {kind}", l.name);
        if let Some(x) = &l.detail {
            d.push_str(&format!(" {x}"));
        }
        if let Some(sz) = l.size_bytes {
            d.push_str(&format!(" · {}", bytes(sz)));
        }
        if let Some(m) = &l.model {
            d.push_str(&format!(" · {m}"));
        }
        if !l.lower.is_empty() {
            d.push_str(&format!(" · on {}", l.lower.join(", ")));
        }
        more(out, &d)?;
        if let Some(q) = &l.queue {
            more(
                out,
                &format!(
                    "  write cache {} · FUA {} · rotational {} · scheduler {}",
                    q.write_cache.as_deref().unwrap_or(UNKNOWN),
                    yes_no(q.fua),
                    yes_no(q.rotational),
                    q.scheduler.as_deref().unwrap_or(UNKNOWN)
                ),
            )?;
            more(
                out,
                &format!(
                    "  logical/physical block {}/{} · nr_requests {} · read-ahead {}",
                    opt_bytes(q.logical_block_size_bytes),
                    opt_bytes(q.physical_block_size_bytes),
                    opt(q.nr_requests),
                    opt_bytes(q.read_ahead_bytes)
                ),
            )?;
        }
        if let Some(io) = &layer.io_since_boot {
            let mean = |m: Option<f64>| m.map(|s| format!(", {} mean", ms(s))).unwrap_or_default();
            more(
                out,
                &format!(
                    "  since boot: {} reads ({}{}) · {} writes ({}{}) · {} flushes · busy {}",
                    io.reads,
                    bytes(io.read_bytes),
                    mean(io.read_mean_s),
                    io.writes,
                    bytes(io.write_bytes),
                    mean(io.write_mean_s),
                    opt(io.flushes),
                    opt_pct(io.busy_pct)
                ),
            )?;
        }
    }
    if let Some(d) = &s.durability {
        more(out, &format!("durability: {}", crate::words::said(d)))?;
    }
    Ok(())
}
