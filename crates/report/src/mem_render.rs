//! Text forms of `plumb mem` and `plumb mem assume`.

use crate::fmt::{bytes, opt, opt_bytes, MISSING, UNKNOWN};
use crate::{Render, Table};
use plumb_analyze::mem::{Assumption, EngineMem, MemReport, ProcMem};
use plumb_analyze::{Level, Note};
use std::io::{self, Write};

const W: usize = 12;

fn head(out: &mut dyn Write, label: &str, text: &str) -> io::Result<()> {
    writeln!(out, "{}", format!("{label:<W$}{text}").trim_end())
}

fn more(out: &mut dyn Write, text: &str) -> io::Result<()> {
    writeln!(out, "{:<W$}{text}", "")
}

fn per_s(v: Option<f64>) -> String {
    v.map(|r| format!("{}/s", bytes(r as u64)))
        .unwrap_or_else(|| UNKNOWN.into())
}

fn psi(p: &plumb_sys::pressure::Psi) -> String {
    let l = |x: &Option<plumb_sys::pressure::PsiLine>| {
        x.as_ref()
            .map(|l| format!("{:.2} {:.2} {:.2}", l.avg10_pct, l.avg60_pct, l.avg300_pct))
            .unwrap_or_else(|| MISSING.into())
    };
    format!(
        "some {} · full {} (% stalled, avg10 avg60 avg300)",
        l(&p.some),
        l(&p.full)
    )
}

fn notes(out: &mut dyn Write, title: &str, n: &[Note]) -> io::Result<()> {
    if n.is_empty() {
        return Ok(());
    }
    writeln!(out, "{title}")?;
    for x in n {
        writeln!(
            out,
            "  {} {}",
            if x.level == Level::Warn { "!" } else { "-" },
            crate::words::note(x)
        )?;
    }
    Ok(())
}

pub(crate) fn write_assumption(out: &mut dyn Write, a: &Assumption) -> io::Result<()> {
    more(
        out,
        &format!(
            "sees host RAM {} · cgroup limit {} ({})",
            bytes(a.host_memory_bytes),
            a.cgroup_limit_bytes
                .map(bytes)
                .unwrap_or_else(|| "none".into()),
            match a.cgroup_mode {
                plumb_sys::cgroup::CgroupMode::V1 => "cgroup v1",
                plumb_sys::cgroup::CgroupMode::V2 => "cgroup v2",
                plumb_sys::cgroup::CgroupMode::Hybrid => "cgroup hybrid",
                plumb_sys::cgroup::CgroupMode::None => "no cgroups",
            }
        ),
    )?;
    if let Some(d) = a.mssql_detected_mb {
        more(out, &format!("SQL Server will log: Detected {d} MB of RAM"))?;
    }
    if let (Some(c), false) = (a.cache_bytes, a.cache_name.is_empty()) {
        more(out, &format!("{}: {}", a.cache_name, bytes(c)))?;
    }
    for s in &a.statements {
        more(
            out,
            &format!(
                "{} {}",
                if s.level == Level::Warn { "!" } else { "-" },
                crate::words::note(s)
            ),
        )?;
    }
    Ok(())
}

fn write_engine(out: &mut dyn Write, e: &EngineMem) -> io::Result<()> {
    head(
        out,
        e.engine.name(),
        &format!(
            "PID {} · {} process(es) · private memory {} resident, {} in swap",
            e.main_pid,
            e.processes,
            bytes(e.private_resident_bytes),
            bytes(e.private_swapped_bytes)
        ),
    )?;
    if let Some(b) = e.believed_cache_bytes {
        more(
            out,
            &format!(
                "believes {} cached, from {}: {} resident, {} in swap",
                bytes(b),
                e.belief_source
                    .as_ref()
                    .map(crate::words::said)
                    .unwrap_or_else(|| "its settings".into()),
                opt_bytes(e.cache_resident_bytes),
                opt_bytes(e.cache_swapped_bytes)
            ),
        )?;
    }
    let s = &e.settings;
    let mut parts = Vec::new();
    if let Some(v) = s.shared_buffers_bytes {
        parts.push(format!("shared_buffers {}", bytes(v)));
    }
    if let Some(v) = s.work_mem_bytes {
        parts.push(format!("work_mem {}", bytes(v)));
    }
    if let Some(v) = s.max_connections {
        parts.push(format!("max_connections {v}"));
    }
    if let Some(v) = s.memory_limit_mb {
        parts.push(format!("memorylimitmb {v}"));
    }
    if let Some(v) = s.innodb_buffer_pool_size_bytes {
        parts.push(format!("innodb_buffer_pool_size {}", bytes(v)));
    }
    if !parts.is_empty() {
        more(out, &format!("settings: {}", parts.join(" · ")))?;
    }
    if !s.sources.is_empty() {
        more(out, &format!("  read from {}", s.sources.join(", ")))?;
    }
    for u in &s.unreadable {
        more(out, &format!("  could not read: {u}"))?;
    }
    write_assumption(out, &e.assumption)
}

fn write_proc(out: &mut dyn Write, p: &ProcMem) -> io::Result<()> {
    head(
        out,
        "Process",
        &format!("PID {} · {}", p.pid, p.name.as_deref().unwrap_or(UNKNOWN)),
    )?;
    more(
        out,
        &format!(
            "VmSize {} · VmRSS {} (RssAnon {} · RssFile {} · RssShmem {}) · VmData {}",
            opt_bytes(p.memory.vm_size_bytes),
            opt_bytes(p.memory.vm_rss_bytes),
            opt_bytes(p.memory.rss_anon_bytes),
            opt_bytes(p.memory.rss_file_bytes),
            opt_bytes(p.memory.rss_shmem_bytes),
            opt_bytes(p.memory.vm_data_bytes)
        ),
    )?;
    more(
        out,
        &format!(
            "swap: VmSwap {} (private only) · smaps_rollup Swap {} (shared too) · SwapPss {}",
            opt_bytes(p.memory.vm_swap_bytes),
            opt_bytes(p.memory.smaps_swap_bytes),
            opt_bytes(p.memory.smaps_swap_pss_bytes)
        ),
    )?;
    for m in p
        .largest_mappings
        .iter()
        .filter(|m| m.size_bytes >= 1 << 20)
        .take(3)
    {
        more(
            out,
            &format!(
                "  {} {} {}: {} resident, {} in swap",
                if m.shared() { "shared" } else { "private" },
                if m.name.is_empty() {
                    "[anonymous]"
                } else {
                    m.name.as_str()
                },
                bytes(m.size_bytes),
                bytes(m.rss_bytes),
                bytes(m.swap_bytes)
            ),
        )?;
    }
    match &p.cgroup {
        Some(c) => {
            more(
                out,
                &format!(
                    "memory cgroup v{} {}: limit {} · usage {} · anon {} · file {} · shmem {} · swap {}",
                    c.version,
                    c.path,
                    c.limit_bytes.map(bytes).unwrap_or_else(|| "none".into()),
                    opt_bytes(c.usage_bytes),
                    opt_bytes(c.anon_bytes),
                    opt_bytes(c.file_bytes),
                    opt_bytes(c.shmem_bytes),
                    opt_bytes(c.swap_bytes)
                ),
            )?;
            more(
                out,
                &format!(
                    "  failcnt {} · OOM kills {}",
                    opt(c.failcnt),
                    opt(c.oom_kills)
                ),
            )?;
            if let Some(ps) = &c.pressure {
                more(out, &format!("  cgroup memory pressure: {}", psi(ps)))?;
            }
        }
        None => more(out, "memory cgroup: not found")?,
    }
    Ok(())
}

impl Render for MemReport {
    const KIND: &'static str = "mem";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let h = &self.host;
        head(
            out,
            "Host",
            &format!(
                "total {} · available {} · swap {} used of {}",
                opt_bytes(h.total_bytes),
                opt_bytes(h.available_bytes),
                opt_bytes(h.swap_used_bytes),
                opt_bytes(h.swap_total_bytes)
            ),
        )?;
        if let Some(i) = self.interval_s {
            more(
                out,
                &format!(
                    "over {i:.1} s: swap-in {} · swap-out {} · major faults {}",
                    per_s(h.swap_in_bytes_per_s),
                    per_s(h.swap_out_bytes_per_s),
                    h.major_faults_per_s
                        .map(|v| format!("{v:.0}/s"))
                        .unwrap_or_else(|| UNKNOWN.into())
                ),
            )?;
        }
        if let Some(p) = &h.pressure {
            more(out, &format!("memory pressure: {}", psi(p)))?;
        }
        writeln!(out)?;
        for e in &self.engines {
            write_engine(out, e)?;
            writeln!(out)?;
        }
        for p in &self.processes {
            write_proc(out, p)?;
            writeln!(out)?;
        }
        if self.engines.is_empty() && self.processes.is_empty() {
            writeln!(out, "No database process found (postgres, mariadbd/mysqld, sqlservr); name one with --pid.\n")?;
        }
        notes(out, "Findings", &self.findings)?;
        if !self.missing.is_empty() {
            writeln!(out, "Missing")?;
            for m in &self.missing {
                writeln!(out, "  {}: {}", m.source, m.reason)?;
            }
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        let o = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        Some(Table {
            headers: [
                "pid",
                "name",
                "vm_size_bytes",
                "vm_rss_bytes",
                "rss_anon_bytes",
                "rss_file_bytes",
                "rss_shmem_bytes",
                "vm_data_bytes",
                "vm_swap_bytes",
                "smaps_swap_bytes",
                "smaps_swap_pss_bytes",
                "cgroup_limit_bytes",
                "cgroup_usage_bytes",
                "cgroup_swap_bytes",
            ]
            .map(String::from)
            .to_vec(),
            rows: self
                .processes
                .iter()
                .map(|p| {
                    vec![
                        p.pid.to_string(),
                        p.name.clone().unwrap_or_default(),
                        o(p.memory.vm_size_bytes),
                        o(p.memory.vm_rss_bytes),
                        o(p.memory.rss_anon_bytes),
                        o(p.memory.rss_file_bytes),
                        o(p.memory.rss_shmem_bytes),
                        o(p.memory.vm_data_bytes),
                        o(p.memory.vm_swap_bytes),
                        o(p.memory.smaps_swap_bytes),
                        o(p.memory.smaps_swap_pss_bytes),
                        o(p.cgroup.as_ref().and_then(|c| c.limit_bytes)),
                        o(p.cgroup.as_ref().and_then(|c| c.usage_bytes)),
                        o(p.cgroup.as_ref().and_then(|c| c.swap_bytes)),
                    ]
                })
                .collect(),
        })
    }
}

/// `plumb mem assume` output.
#[derive(Debug, serde::Serialize)]
pub struct AssumeReport {
    pub assumption: Assumption,
}

impl Render for AssumeReport {
    const KIND: &'static str = "mem_assume";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        head(
            out,
            self.assumption.engine.name(),
            "what it will assume here",
        )?;
        write_assumption(out, &self.assumption)
    }
}

/// One line of `plumb mem --watch`.
pub fn watch_line(r: &MemReport, header: bool, out: &mut dyn Write) -> io::Result<()> {
    if header {
        writeln!(
            out,
            "{:>8} {:>10} {:>10} {:>11} {:>11} {:>7}  engines: cache resident / cache in swap / private in swap",
            "time", "available", "swap used", "swap-in/s", "swap-out/s", "psi10"
        )?;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() % 86400)
        .unwrap_or(0);
    let h = &r.host;
    let eng: Vec<String> = r
        .engines
        .iter()
        .map(|e| {
            format!(
                "{} {}: {} / {} / {}",
                e.engine.name(),
                e.main_pid,
                opt_bytes(e.cache_resident_bytes),
                opt_bytes(e.cache_swapped_bytes),
                bytes(e.private_swapped_bytes)
            )
        })
        .collect();
    writeln!(
        out,
        "{:02}:{:02}:{:02} {:>10} {:>10} {:>11} {:>11} {:>7}  {}",
        now / 3600,
        (now / 60) % 60,
        now % 60,
        opt_bytes(h.available_bytes),
        opt_bytes(h.swap_used_bytes),
        per_s(h.swap_in_bytes_per_s),
        per_s(h.swap_out_bytes_per_s),
        h.pressure
            .as_ref()
            .and_then(|p| p.some.as_ref())
            .map(|s| format!("{:.1}%", s.avg10_pct))
            .unwrap_or_else(|| MISSING.into()),
        eng.join(" · ")
    )?;
    out.flush()
}

/// What `plumb mem pressure` prints as it goes: its setup, then a line per tick (JSON Lines
/// with `json`).
pub struct PressurePrinter {
    pub json: bool,
}

impl PressurePrinter {
    pub fn setup(&self, s: &plumb_io::pressure::Setup) {
        let mut out = std::io::stdout().lock();
        let _ = if self.json {
            crate::write_json_line(s, "mem_pressure_setup", &mut out).map_err(|_| ())
        } else {
            pressure_setup(s, &mut out).map_err(|_| ())
        };
    }

    pub fn tick(&self, t: &plumb_io::pressure::Tick) {
        let mut out = std::io::stdout().lock();
        let _ = if self.json {
            crate::write_json_line(t, "mem_pressure_tick", &mut out).map_err(|_| ())
        } else {
            pressure_tick(t, &mut out).map_err(|_| ())
        };
    }
}

pub(crate) fn pressure_setup(s: &plumb_io::pressure::Setup, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "plumb mem pressure: PID {} · {} {} memory{}{}{}",
        s.pid,
        bytes(s.size_bytes),
        if s.shared { "shared" } else { "private" },
        if s.idle {
            ", written once then idle"
        } else {
            ", every page kept hot"
        },
        s.cgroup
            .as_ref()
            .map(|c| format!(
                " · in cgroup {}{}",
                c.display(),
                s.cgroup_limit_bytes
                    .map(|l| format!(" (limit {})", bytes(l)))
                    .unwrap_or_default()
            ))
            .unwrap_or_default(),
        s.zram_device
            .as_ref()
            .map(|z| format!(" · swap on {z}"))
            .unwrap_or_default()
    )?;
    writeln!(
        out,
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "time", "written", "VmRSS", "RssAnon", "RssShmem", "VmSwap", "smaps Swap", "pages/s"
    )?;
    out.flush()
}

pub(crate) fn pressure_tick(t: &plumb_io::pressure::Tick, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:>7.1}s {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>12.0}",
        t.elapsed_s,
        bytes(t.touched_bytes),
        opt_bytes(t.vm_rss_bytes),
        opt_bytes(t.rss_anon_bytes),
        opt_bytes(t.rss_shmem_bytes),
        opt_bytes(t.vm_swap_bytes),
        opt_bytes(t.smaps_swap_bytes),
        t.pages_per_s
    )?;
    out.flush()
}
