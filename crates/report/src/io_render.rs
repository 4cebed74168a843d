//! Text and CSV forms of `plumb io` results, in diskspd's four sections.

use crate::fmt::{bytes, count, MISSING, UNKNOWN};
use crate::{Render, Table};
use plumb_analyze::io::{IoReport, IoRow, PercentileRow, PresetList};
use plumb_io::job::{Durability, Pattern};
use plumb_io::target::TargetKind;
use plumb_sys::units::Rate;
use std::io::{self, Write};

/// `plumb io run`'s (and diskspd's) result with its verdict (text opens on the block; JSON's
/// top-level `verdict`).
pub fn output(r: &IoReport) -> crate::verdict_render::Verdicted<'_, IoReport> {
    crate::verdict_render::Verdicted {
        report: r,
        verdict: plumb_analyze::io_verdict::io(r),
        block: run_block(r),
    }
}

/// The run's verdict block: trust, the totals with their spread, what needs action.
pub(crate) fn run_block(r: &IoReport) -> crate::verdict_render::Block {
    use crate::verdict_render::{trust_lines, Line, Mark};
    use plumb_analyze::verdict::Trust;
    let v = plumb_analyze::io_verdict::io(r);
    let plain = |text: String| Line {
        text,
        mark: Mark::Plain,
    };
    let trust = match v.trust {
        Trust::Clean => vec![plain(
            "clean: no other process used the device or the CPUs in a way that could move a figure"
                .into(),
        )],
        Trust::Unwatched => vec![plain(
            "not watched: other work on the host was not measured".into(),
        )],
        Trust::Disturbed => vec![Line {
            text: format!(
                "DISTURBED: {}",
                r.interference
                    .as_ref()
                    .map(crate::words::interference)
                    .unwrap_or_default()
            ),
            mark: Mark::Warn,
        }],
        Trust::Noted => trust_lines(&v, "runs"),
    };
    let find = |code: &str, of: &str| v.headline.iter().find(|h| h.code == code && h.of == of);
    let mut parts = Vec::new();
    if let Some(h) = find("iops", "total") {
        let spread = match (h.low, h.high) {
            (Some(l), Some(hi)) if hi > l => {
                format!(
                    " ({}–{} p10–p90 of its seconds)",
                    count(l.round()),
                    count(hi.round())
                )
            }
            _ => String::new(),
        };
        parts.push(format!("{} IOPS{spread}", count(h.value.round())));
    }
    if let Some(h) = find("throughput", "total") {
        parts.push(format!("{:.1} MiB/s", h.value / MIB));
    }
    let p99: Vec<String> = ["read", "write"]
        .iter()
        .filter_map(|d| find("latency_p99", d).map(|h| format!("{d} {}", crate::fmt::ms(h.value))))
        .collect();
    if !p99.is_empty() {
        parts.push(format!("p99 {}", p99.join(", ")));
    }
    let figures = if parts.is_empty() {
        vec![plain("no I/O completed".into())]
    } else {
        vec![plain(format!("total: {}", parts.join(" · ")))]
    };
    let actions = if v.actions.is_empty() {
        vec![plain("none".into())]
    } else {
        vec![Line {
            text: "[warn] the run was disturbed: read its figures with the evidence at the end"
                .into(),
            mark: Mark::Warn,
        }]
    };
    crate::verdict_render::Block {
        rows: vec![
            ("trust", trust),
            ("figures", figures),
            ("needs action", actions),
        ],
    }
}

impl Render for IoReport {
    const KIND: &'static str = "io";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        write_text(self, out)?;
        if let Some(w) = &self.interference {
            writeln!(out)?;
            writeln!(out, "{}", verdict_line(w))?;
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        Some(csv_table(self))
    }
}

const MIB: f64 = 1048576.0;

/// A latency column in milliseconds without its unit (the header carries it), as diskspd
/// prints it: `N/A` where there is no figure.
fn ms_column(v: Option<f64>) -> String {
    v.map(|s| format!("{:.3}", s * 1e3))
        .unwrap_or_else(|| "N/A".into())
}

pub(crate) fn durability_words(d: Durability) -> &'static str {
    match d {
        Durability::None => "through the page cache; not durable",
        Durability::Direct => "O_DIRECT; durable only without a volatile device cache",
        Durability::Dsync => "O_DSYNC through the page cache",
        Durability::DirectDsync => "O_DIRECT|O_DSYNC: FUA writes where the device supports FUA",
        Durability::Fdatasync { direct: false, .. } => "buffered writes, then fdatasync()",
        Durability::Fdatasync { direct: true, .. } => {
            "O_DIRECT writes, then fdatasync() (forced flush)"
        }
        Durability::Fsync { direct: false, .. } => "buffered writes, then fsync()",
        Durability::Fsync { direct: true, .. } => "O_DIRECT writes, then fsync()",
    }
}

pub(crate) fn rate_words(r: Rate) -> String {
    match r {
        // Typed in MB/s (or MiB/s); the tables below count MiB/s, so both are said.
        Rate::BytesPerS(b) => format!(
            "{:.1} MB/s ({:.1} MiB/s, the unit of the tables below)",
            b / 1e6,
            b / 1048576.0
        ),
        Rate::Iops(v) => format!("{v:.0} IOPS"),
    }
}

fn write_text(r: &IoReport, out: &mut dyn Write) -> io::Result<()> {
    write_inputs(r, out)?;
    write_cpu(r, out)?;
    write_results(r, out)
}

/// The command line and the input parameters, diskspd's first block.
fn write_inputs(r: &IoReport, out: &mut dyn Write) -> io::Result<()> {
    let j = &r.job;
    writeln!(out, "Command line: {}", r.command_line)?;
    writeln!(out)?;
    writeln!(out, "Input parameters:")?;
    writeln!(out, "  job {} · engine {}", j.name, r.engine)?;
    writeln!(
        out,
        "  duration {} · warm-up {} · cool-down {} · measured {:.2} s",
        plumb_sys::units::format_duration(j.duration),
        plumb_sys::units::format_duration(j.warmup),
        plumb_sys::units::format_duration(j.cooldown),
        r.measured_s
    )?;
    for t in &r.targets {
        let kind = match t.kind {
            TargetKind::Created => "created by plumb with random data",
            TargetKind::Kept => "created by plumb earlier and kept",
            TargetKind::Existing => "an existing file",
            TargetKind::BlockDevice => "a block device",
        };
        writeln!(
            out,
            "  target {} · {} · {kind}",
            t.path.display(),
            bytes(t.size_bytes)
        )?;
    }
    let pattern = match j.pattern {
        Pattern::Random => format!(
            "random (aligned to {})",
            bytes(j.align.unwrap_or(j.block_size as u64))
        ),
        Pattern::Sequential => match j.stride {
            Some(s) if s != j.block_size as u64 => format!("sequential (stride {})", bytes(s)),
            _ => "sequential".to_string(),
        },
    };
    writeln!(
        out,
        "  {} thread(s) per target x {} outstanding · {} {} · {}% writes",
        j.threads,
        j.queue_depth,
        bytes(j.block_size as u64),
        pattern,
        j.write_pct
    )?;
    writeln!(
        out,
        "  durability {} ({})",
        j.durability,
        durability_words(j.durability)
    )?;
    match (j.rate, j.burst) {
        (None, None) => writeln!(out, "  rate: unlimited")?,
        (rate, burst) => {
            let mut parts = Vec::new();
            if let Some(rt) = rate {
                parts.push(format!(
                    "{} {}",
                    rate_words(rt),
                    if j.rate_per_thread {
                        "per thread"
                    } else {
                        "in total"
                    }
                ));
            }
            if let Some(b) = burst {
                parts.push(format!(
                    "bursts of {} I/Os per thread, {} ms apart",
                    b.ios,
                    b.think.as_millis()
                ));
            }
            writeln!(
                out,
                "  pacing: {} · latency counts from each I/O's intended start",
                parts.join(" · ")
            )?;
        }
    }
    writeln!(out, "  seed {}", j.seed)?;
    for n in &r.input_notes {
        writeln!(out, "  note: {n}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// CPU: each CPU's busy share over the run, their average, and plumb's own.
fn write_cpu(r: &IoReport, out: &mut dyn Write) -> io::Result<()> {
    let line = "-".repeat(58);
    writeln!(
        out,
        "CPU  |  Usage |   User | Kernel | IOWait |  Steal |   Idle"
    )?;
    writeln!(out, "{line}")?;
    let pct = |v: f64| format!("{v:>5.1}%");
    for c in r.cpu.iter().filter(|c| c.cpu.is_some()) {
        writeln!(
            out,
            "{:>4} | {} | {} | {} | {} | {} | {}",
            c.cpu.unwrap_or(0),
            pct(c.usage_pct),
            pct(c.user_pct),
            pct(c.kernel_pct),
            pct(c.iowait_pct),
            pct(c.steal_pct),
            pct(c.idle_pct)
        )?;
    }
    writeln!(out, "{line}")?;
    if let Some(c) = r.cpu.iter().find(|c| c.cpu.is_none()) {
        writeln!(
            out,
            "avg. | {} | {} | {} | {} | {} | {}",
            pct(c.usage_pct),
            pct(c.user_pct),
            pct(c.kernel_pct),
            pct(c.iowait_pct),
            pct(c.steal_pct),
            pct(c.idle_pct)
        )?;
    } else {
        writeln!(out, "CPU usage: {UNKNOWN} (/proc/stat was not readable)")?;
    }
    if let Some(p) = &r.process_cpu {
        writeln!(
            out,
            "plumb itself: user {:.2} s · system {:.2} s · {} CPU per I/O · {} syscalls per I/O",
            p.user_s,
            p.system_s,
            p.cpu_per_io_s
                .map(|s| format!("{:.2} µs", s * 1e6))
                .unwrap_or_else(|| UNKNOWN.into()),
            p.syscalls_per_io
                .map(|s| format!("{s:.2}"))
                .unwrap_or_else(|| UNKNOWN.into())
        )?;
    }
    writeln!(out)?;
    Ok(())
}

/// The I/O tables, the percentiles and the per-second spread.
fn write_results(r: &IoReport, out: &mut dyn Write) -> io::Result<()> {
    let j = &r.job;
    for (title, rows, show) in [
        ("Total IO", &r.tables.total, true),
        ("Read IO", &r.tables.read, j.write_pct < 100),
        ("Write IO", &r.tables.write, j.write_pct > 0),
    ] {
        if !show {
            continue;
        }
        write_table(out, title, rows, r.targets.len() > 1)?;
        writeln!(out)?;
    }
    if j.durability.sync_every().is_some() {
        writeln!(out, "sync calls completed after writes: {}", r.fsyncs)?;
        writeln!(out)?;
    }

    write_percentiles(
        out,
        &r.percentiles,
        if r.paced {
            " (from intended start)"
        } else {
            ""
        },
    )?;
    if let Some(s) = &r.service_percentiles {
        writeln!(out)?;
        write_percentiles(out, s, " (service time, from actual submission)")?;
    }
    let ios: Vec<u64> = r.series.iter().map(|s| s.read_ios + s.write_ios).collect();
    if ios.len() > 1 {
        let mut sorted = ios.clone();
        sorted.sort_unstable();
        writeln!(
            out,
            "\nper second: I/Os min {} · median {} · max {} over {} s (the full series is in --json)",
            sorted[0],
            sorted[sorted.len() / 2],
            sorted[sorted.len() - 1],
            sorted.len()
        )?;
    }
    Ok(())
}

fn write_table(
    out: &mut dyn Write,
    title: &str,
    rows: &[IoRow],
    show_target: bool,
) -> io::Result<()> {
    writeln!(out, "{title}")?;
    let header = format!(
        "thread |          bytes |        I/Os |     MiB/s |  I/O per s | AvgLat(ms) | LatStdDev(ms){}",
        if show_target { " | target" } else { "" }
    );
    let line = "-".repeat(header.chars().count());
    writeln!(out, "{header}")?;
    writeln!(out, "{line}")?;
    let fmt_row = |r: &IoRow, label: String| {
        format!(
            "{label:>6} | {:>14} | {:>11} | {:>9.2} | {:>10.2} | {:>10} | {:>13}{}",
            r.bytes,
            r.ios,
            r.bytes_per_s / MIB,
            r.iops,
            ms_column(r.lat_mean_s),
            ms_column(r.lat_stddev_s),
            match (show_target, r.target) {
                (true, Some(t)) => format!(" | {t}"),
                _ => String::new(),
            }
        )
    };
    for r in rows.iter().filter(|r| r.thread.is_some()) {
        writeln!(out, "{}", fmt_row(r, r.thread.unwrap_or(0).to_string()))?;
    }
    writeln!(out, "{line}")?;
    if let Some(t) = rows.iter().find(|r| r.thread.is_none()) {
        writeln!(out, "{}", fmt_row(t, "total:".into()))?;
    }
    Ok(())
}

fn write_percentiles(out: &mut dyn Write, rows: &[PercentileRow], what: &str) -> io::Result<()> {
    writeln!(out, "Latency{what}")?;
    writeln!(out, "  %-ile |  Read (ms) | Write (ms) | Total (ms)")?;
    writeln!(out, "{}", "-".repeat(45))?;
    for p in rows {
        writeln!(
            out,
            "{:>7} | {:>10} | {:>10} | {:>10}",
            p.label,
            ms_column(p.read_s),
            ms_column(p.write_s),
            ms_column(p.total_s)
        )?;
    }
    writeln!(out, "(N/A: no I/Os of that kind, or too few to support the percentile: the 99.9th needs 1,000, 8-nines 100,000,000)")?;
    Ok(())
}

fn csv_table(r: &IoReport) -> Table {
    let headers = [
        "direction",
        "thread",
        "target",
        "bytes",
        "ios",
        "bytes_per_s",
        "iops",
        "lat_mean_s",
        "lat_stddev_s",
        "lat_p50_s",
        "lat_p99_s",
        "lat_max_s",
    ]
    .map(String::from)
    .to_vec();
    let f = |v: Option<f64>| v.map(|x| format!("{x:.9}")).unwrap_or_default();
    let mut rows = Vec::new();
    for (dir, table) in [
        ("total", &r.tables.total),
        ("read", &r.tables.read),
        ("write", &r.tables.write),
    ] {
        for x in table {
            rows.push(vec![
                dir.to_string(),
                x.thread
                    .map(|t| t.to_string())
                    .unwrap_or_else(|| "all".into()),
                x.target
                    .map(|t| r.targets[t].path.display().to_string())
                    .unwrap_or_else(|| "all".into()),
                x.bytes.to_string(),
                x.ios.to_string(),
                format!("{:.1}", x.bytes_per_s),
                format!("{:.2}", x.iops),
                f(x.lat_mean_s),
                f(x.lat_stddev_s),
                f(x.lat_p50_s),
                f(x.lat_p99_s),
                f(x.lat_max_s),
            ]);
        }
    }
    Table { headers, rows }
}

impl Render for PresetList {
    const KIND: &'static str = "io_presets";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for p in &self.presets {
            writeln!(out, "{:<17} {}", p.name, p.models)?;
        }
        writeln!(out, "\nRun one with: plumb io run --preset NAME FILE (any flag overrides the preset's setting)")
    }

    fn table(&self) -> Option<Table> {
        Some(Table {
            headers: [
                "name",
                "threads",
                "queue_depth",
                "block_size",
                "pattern",
                "write_pct",
                "durability",
                "models",
            ]
            .map(String::from)
            .to_vec(),
            rows: self
                .presets
                .iter()
                .map(|p| {
                    vec![
                        p.name.clone(),
                        p.job.threads.to_string(),
                        p.job.queue_depth.to_string(),
                        p.job.block_size.to_string(),
                        match p.job.pattern {
                            Pattern::Random => "random".into(),
                            Pattern::Sequential => "sequential".into(),
                        },
                        p.job.write_pct.to_string(),
                        p.job.durability.to_string(),
                        p.models.clone(),
                    ]
                })
                .collect(),
        })
    }
}

impl Render for plumb_analyze::durability_probe::DurabilityReport {
    const KIND: &'static str = "io_durability";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let where_ = match &self.storage {
            Some(s) => format!(
                "{} on {}{}",
                s.fs_type,
                s.mount_point,
                s.device
                    .as_ref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            ),
            None => "unknown filesystem".into(),
        };
        writeln!(
            out,
            "Durability probe in {} · {where_}",
            self.path.display()
        )?;
        writeln!(
            out,
            "test file {} (removed afterwards) · {:.1} s per mode · 1 thread, 1 write at a time, each rewriting the same block (as pg_test_fsync does)",
            self.file.display(),
            self.per_mode_s
        )?;
        let us = |v: Option<f64>| {
            v.map(|s| format!("{:.0} µs", s * 1e6))
                .unwrap_or_else(|| "N/A".into())
        };
        writeln!(
            out,
            "Modes ran in rounds until each had {} clean run(s) agreeing within 10%; figures are medians over the clean runs.",
            self.repetitions
        )?;
        let mut sizes: Vec<u32> = self.rows.iter().map(|r| r.block_size).collect();
        sizes.dedup();
        for bs in sizes {
            writeln!(out)?;
            let head = format!(
                "{:<18} | durable | clean | {:>9} | {:>13} | {:>9} | {:>9} | {:<31} | device received (everybody's)",
                format!("{} KiB writes", bs / 1024),
                "writes/s",
                "mean",
                "p50",
                "p99",
                "asked per write",
            );
            writeln!(out, "{head}")?;
            writeln!(out, "{}", "-".repeat(head.chars().count()))?;
            for r in self.rows.iter().filter(|r| r.block_size == bs) {
                let dev = match &r.device {
                    Some(d) => {
                        let mut s = format!("{} W", d.writes);
                        if d.fua_writes > 0 {
                            s.push_str(&format!(" ({} FUA)", d.fua_writes));
                        }
                        s.push_str(&format!(", {} FLUSH", d.flushes + d.preflush_writes));
                        if d.meta_writes > 0 {
                            s.push_str(&format!(", {} meta", d.meta_writes));
                        }
                        if d.lost_events > 0 {
                            s.push_str(&format!(" (≥; {} events lost)", d.lost_events));
                        }
                        s
                    }
                    None => MISSING.into(),
                };
                let asked = match r.per_write {
                    Some(p) => {
                        let mut s = format!("{:.2} FLUSH, {:.2} FUA", p.flushes, p.fua_writes);
                        if p.journal_writes >= 0.05 {
                            s.push_str(&format!(", {:.1} jnl W", p.journal_writes));
                        }
                        s
                    }
                    None => MISSING.into(),
                };
                let mean = match (r.mean_s, r.plus_minus()) {
                    (Some(m), Some(pm)) => format!("{} ±{:.0}%", us(Some(m)), pm * 100.0),
                    (m, _) => us(m),
                };
                writeln!(
                    out,
                    "{:<18} | {:^7} | {:>5} | {:>9.0} | {:>13} | {:>9} | {:>9} | {:<31} | {dev}",
                    r.mode.to_string(),
                    if r.durable { "yes" } else { "no" },
                    format!("{}/{}", r.clean_runs, r.runs),
                    r.writes_per_s,
                    mean,
                    us(r.p50_s),
                    us(r.p99_s),
                    asked,
                )?;
            }
        }
        writeln!(out)?;
        writeln!(
            out,
            "clean: runs no other process disturbed, of all runs; ±: half the range of the clean runs' means."
        )?;
        match &self.trace_unavailable {
            Some(w) => writeln!(out, "asked per write, device received: not traced ({w})")?,
            None => writeln!(
                out,
                "asked per write: FLUSH and FUA requests the probe's own writes and syncs submitted{}, per durable write. device received: every request the disk got in the same windows, other processes' included.",
                if self.journal_followed {
                    ", with the journal commits its syncs waited for"
                } else {
                    " (the file system's journal is not followed on this file system)"
                }
            )?,
        }
        writeln!(
            out,
            "Verdict: {}",
            if self.verdict == plumb_analyze::interference::Verdict::Disturbed {
                "DISTURBED — a mode had no clean run; read its figures with the evidence below"
            } else {
                "clean"
            }
        )?;
        disturbed_runs(
            out,
            self.rows.iter().flat_map(|r| {
                r.reps.iter().enumerate().filter_map(move |(i, x)| {
                    let w = x.interference.as_ref().filter(|w| !w.is_clean())?;
                    Some((
                        format!("{} KiB {}", r.block_size / 1024, r.mode),
                        i + 1,
                        crate::words::interference(w),
                    ))
                })
            }),
        )?;
        writeln!(out)?;
        writeln!(out, "What it means")?;
        for c in &self.conclusions {
            writeln!(out, "  - {}", crate::words::note(c))?;
        }
        Ok(())
    }

    /// One row per run, disturbed ones included (`verdict` says which).
    fn table(&self) -> Option<Table> {
        use plumb_sys::tracefs::{BioCounts, RqCounts};
        let f = |v: Option<f64>| v.map(|x| format!("{x:.9}")).unwrap_or_default();
        let mut rows = Vec::new();
        for r in &self.rows {
            for (i, x) in r.reps.iter().enumerate() {
                let d = |g: fn(&RqCounts) -> u64| {
                    x.device
                        .as_ref()
                        .map(|c| g(c).to_string())
                        .unwrap_or_default()
                };
                let p = |own: bool, g: fn(&BioCounts) -> u64| {
                    x.probe
                        .as_ref()
                        .map(|a| g(if own { &a.own } else { &a.journal }).to_string())
                        .unwrap_or_default()
                };
                rows.push(vec![
                    r.block_size.to_string(),
                    r.mode.to_string(),
                    r.durable.to_string(),
                    (i + 1).to_string(),
                    if x.is_clean() { "clean" } else { "disturbed" }.to_string(),
                    x.writes.to_string(),
                    format!("{:.2}", x.writes_per_s),
                    f(x.mean_s),
                    f(x.p50_s),
                    f(x.p99_s),
                    f(x.max_s),
                    x.sync_calls.to_string(),
                    p(true, |c| c.writes),
                    p(true, |c| c.flushes),
                    p(true, |c| c.fua_writes),
                    p(false, |c| c.writes),
                    p(false, |c| c.flushes),
                    p(false, |c| c.fua_writes),
                    d(|c| c.writes),
                    d(|c| c.fua_writes),
                    d(|c| c.flushes),
                    d(|c| c.preflush_writes),
                    d(|c| c.meta_writes),
                ]);
            }
        }
        Some(Table {
            headers: [
                "block_size",
                "mode",
                "durable",
                "run",
                "verdict",
                "writes",
                "writes_per_s",
                "mean_s",
                "p50_s",
                "p99_s",
                "max_s",
                "sync_calls",
                "probe_writes",
                "probe_flushes",
                "probe_fua_writes",
                "journal_writes",
                "journal_flushes",
                "journal_fua_writes",
                "dev_writes",
                "dev_fua_writes",
                "dev_flushes",
                "dev_preflush_writes",
                "dev_meta_writes",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        })
    }
}

impl Render for plumb_analyze::durability_probe::Comparison {
    const KIND: &'static str = "io_durability_comparison";

    /// Each candidate's report, then the comparison.
    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        for p in &self.probes {
            p.text(out)?;
            writeln!(out)?;
        }
        writeln!(
            out,
            "Side by side (modes ran interleaved across the directories; compared only beyond the clean runs' spread)"
        )?;
        for n in &self.comparison {
            writeln!(out, "  - {}", crate::words::note(n))?;
        }
        Ok(())
    }

    /// Every candidate's runs, with its path first.
    fn table(&self) -> Option<Table> {
        let mut headers = vec!["path".to_string()];
        let mut rows = Vec::new();
        for p in &self.probes {
            let t = p.table()?;
            if headers.len() == 1 {
                headers.extend(t.headers);
            }
            rows.extend(t.rows.into_iter().map(|r| {
                std::iter::once(p.path.display().to_string())
                    .chain(r)
                    .collect()
            }));
        }
        Some(Table { headers, rows })
    }
}

fn spread_ms(s: Option<plumb_analyze::sweep::Spread>) -> String {
    s.map(|s| {
        format!(
            "{:.3} ({:.3}–{:.3})",
            s.median * 1e3,
            s.min * 1e3,
            s.max * 1e3
        )
    })
    .unwrap_or_else(|| "N/A".into())
}

/// lat/thr from the level above: the elasticity, or which way each went when their signs
/// differ (a negative ratio says nothing by itself).
fn elasticity_cell(
    prev: Option<&plumb_analyze::sweep::Level>,
    l: &plumb_analyze::sweep::Level,
) -> String {
    match l.latency_elasticity {
        Some(e) if e < 0.0 => {
            let up = match (prev.and_then(|p| p.iops), l.iops) {
                (Some(a), Some(b)) => b.median > a.median,
                _ => false,
            };
            if up { "lat fell" } else { "thr fell" }.to_string()
        }
        Some(e) => format!("{e:.2}"),
        None => MISSING.into(),
    }
}

/// One watched window's verdict for the text output: `Verdict: clean`, or DISTURBED with the
/// evidence.
pub(crate) fn verdict_line(w: &plumb_analyze::interference::Interference) -> String {
    if w.is_clean() {
        "Verdict: clean (no other process disturbed the device or the CPUs during the run)".into()
    } else {
        format!("Verdict: DISTURBED — {}", crate::words::interference(w))
    }
}

/// The evidence of the first five disturbed runs (`what`, run number, evidence), and how many
/// more the JSON holds.
fn disturbed_runs(
    out: &mut dyn Write,
    runs: impl Iterator<Item = (String, usize, String)>,
) -> io::Result<()> {
    let runs: Vec<(String, usize, String)> = runs.collect();
    for (what, run, evidence) in runs.iter().take(5) {
        writeln!(out, "  {what}, run {run}: disturbed — {evidence}")?;
    }
    if runs.len() > 5 {
        writeln!(
            out,
            "  … {} more disturbed run(s): their evidence is in the JSON",
            runs.len() - 5
        )?;
    }
    Ok(())
}

fn level_word(l: plumb_analyze::Level) -> &'static str {
    match l {
        plumb_analyze::Level::Warn => "warn",
        plumb_analyze::Level::Info => "info",
    }
}

fn spread_n(s: Option<plumb_analyze::sweep::Spread>, div: f64, dp: usize) -> String {
    s.map(|s| {
        format!(
            "{:.dp$} ({:.dp$}–{:.dp$})",
            s.median / div,
            s.min / div,
            s.max / div
        )
    })
    .unwrap_or_else(|| "N/A".into())
}

impl Render for plumb_analyze::sweep::SweepReport {
    const KIND: &'static str = "io_sweep";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let j = &self.job;
        writeln!(out, "Command line: {}", self.command_line)?;
        writeln!(
            out,
            "Sweep over {} · {} repetition(s) per level · {} each after {} warm-up",
            match self.sweep_over {
                plumb_analyze::sweep::SweepKind::QueueDepth =>
                    "queue depth (outstanding I/Os per thread)",
                plumb_analyze::sweep::SweepKind::Rate => "rate limit (latency from intended start)",
            },
            self.repetitions,
            plumb_sys::units::format_duration(j.duration),
            plumb_sys::units::format_duration(j.warmup)
        )?;
        writeln!(
            out,
            "job {} · {} thread(s) · {} {} · {}% writes · durability {} · engine {}",
            j.name,
            j.threads,
            bytes(j.block_size as u64),
            match j.pattern {
                Pattern::Random => "random",
                Pattern::Sequential => "sequential",
            },
            j.write_pct,
            j.durability,
            j.engine.name()
        )?;
        writeln!(out, "Values are median (min–max) over repetitions.")?;
        writeln!(out)?;
        let head = format!(
            "{:>12} | {:>28} | {:>26} | {:>26} | {:>26} | {:>10} | {:>9}",
            "level", "IOPS", "MiB/s", "mean latency (ms)", "p99 latency (ms)", "lat/thr", "clean"
        );
        writeln!(out, "{head}")?;
        writeln!(out, "{}", "-".repeat(head.chars().count()))?;
        let mut prev: Option<&plumb_analyze::sweep::Level> = None;
        for l in &self.levels {
            writeln!(
                out,
                "{:>12} | {:>28} | {:>26} | {:>26} | {:>26} | {:>10} | {:>9}",
                l.label,
                spread_n(l.iops, 1.0, 0),
                spread_n(l.bytes_per_s, MIB, 1),
                spread_ms(l.lat_mean_s),
                spread_ms(l.lat_p99_s),
                elasticity_cell(prev, l),
                format!("{}/{}", l.clean_reps, l.reps.len())
            )?;
            prev = Some(l);
        }
        writeln!(out)?;
        writeln!(
            out,
            "lat/thr: relative latency growth per relative throughput growth from the level above (log ratio); under 1 the device scales, over 1 it queues."
        )?;
        writeln!(
            out,
            "clean: runs whose window no other process disturbed, of all runs at the level; the figures are the clean runs'."
        )?;
        let disturbed = self.verdict == plumb_analyze::interference::Verdict::Disturbed;
        // A disturbed sweep states neither a knee nor its absence (its verdict says the same).
        match self.knee.as_ref().filter(|_| !disturbed) {
            Some(k) => writeln!(
                out,
                "Knee: {} — going to {} adds {:+.0}% throughput but {:+.0}% mean latency (more than twice as fast, relatively, and beyond the spread of the repetitions): past it the device queues instead of working faster.",
                k.level, k.next, k.throughput_change_pct, k.latency_change_pct
            )
            .and_then(|_| {
                if k.from == k.to {
                    Ok(())
                } else {
                    writeln!(
                        out,
                        "Within the repetitions' spread (read as at least ±{:.0}%) the knee may be anywhere from {} to {}: state it as that range.",
                        plumb_analyze::sweep::KNEE_SPREAD_FLOOR * 100.0,
                        k.from,
                        k.to
                    )
                }
            })?,
            None if disturbed => writeln!(out, "No knee is stated: the sweep was disturbed (below).")?,
            None => writeln!(out, "No knee within these levels: latency never grew more than twice as fast as throughput beyond the spread of the repetitions.")?,
        }
        writeln!(
            out,
            "Verdict: {}",
            if disturbed {
                "DISTURBED — read the figures with the evidence below"
            } else {
                "clean"
            }
        )?;
        for n in &self.notes {
            writeln!(
                out,
                "  {} [{}] {}",
                level_word(n.level),
                n.code,
                crate::words::note(n)
            )?;
        }
        disturbed_runs(
            out,
            self.levels.iter().flat_map(|l| {
                l.reps.iter().enumerate().filter_map(move |(i, r)| {
                    let w = r.interference.as_ref().filter(|w| !w.is_clean())?;
                    Some((
                        format!("level {}", l.label),
                        i + 1,
                        crate::words::interference(w),
                    ))
                })
            }),
        )?;
        if let Some(c) = &self.chart {
            writeln!(out, "Chart: {}", c.display())?;
        }
        Ok(())
    }

    fn table(&self) -> Option<Table> {
        let mut rows = Vec::new();
        for l in &self.levels {
            for (i, r) in l.reps.iter().enumerate() {
                let f = |v: Option<f64>| v.map(|x| format!("{x:.9}")).unwrap_or_default();
                rows.push(vec![
                    l.label.clone(),
                    (i + 1).to_string(),
                    r.ios.to_string(),
                    format!("{:.2}", r.iops),
                    format!("{:.1}", r.bytes_per_s),
                    f(r.lat_mean_s),
                    f(r.lat_p99_s),
                    match &r.interference {
                        Some(w) if w.is_clean() => "clean".into(),
                        Some(_) => "disturbed".into(),
                        None => String::new(),
                    },
                ]);
            }
        }
        Some(Table {
            headers: [
                "level",
                "repetition",
                "ios",
                "iops",
                "bytes_per_s",
                "lat_mean_s",
                "lat_p99_s",
                "verdict",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        })
    }
}

/// The latency-vs-throughput curve of a sweep, with whiskers for the spread of repetitions and
/// the knee marked.
pub fn sweep_chart(r: &plumb_analyze::sweep::SweepReport) -> String {
    use crate::svg::{render, Chart, Mark, Point, Series, PALETTE};
    let pts = |f: fn(&plumb_analyze::sweep::Level) -> Option<plumb_analyze::sweep::Spread>| -> Vec<Point> {
        r.levels
            .iter()
            .filter_map(|l| {
                let t = l.iops?;
                let y = f(l)?;
                Some(Point {
                    x: t.median,
                    y: y.median * 1e3,
                    y_lo: Some(y.min * 1e3),
                    y_hi: Some(y.max * 1e3),
                    label: Some(l.label.clone()),
                })
            })
            .collect()
    };
    let mean = pts(|l| l.lat_mean_s);
    let p99 = pts(|l| l.lat_p99_s);
    let marks = r
        .knee
        .as_ref()
        .filter(|_| r.verdict != plumb_analyze::interference::Verdict::Disturbed)
        .and_then(|k| {
            let l = r.levels.iter().find(|l| l.label == k.level)?;
            Some(Mark {
                x: l.iops?.median,
                y: l.lat_mean_s?.median * 1e3,
                label: {
                    // The range where the repetitions allow more than one reading.
                    let at = if k.from == k.to {
                        k.level.clone()
                    } else {
                        format!("{} to {}", k.from, k.to)
                    };
                    match r.sweep_over {
                        plumb_analyze::sweep::SweepKind::QueueDepth => format!("knee: QD {at}"),
                        plumb_analyze::sweep::SweepKind::Rate => format!("knee: {at}"),
                    }
                },
            })
        })
        .into_iter()
        .collect();
    let span = |v: &[Point]| {
        let lo = v
            .iter()
            .map(|p| p.y_lo.unwrap_or(p.y))
            .fold(f64::INFINITY, f64::min);
        let hi = v.iter().map(|p| p.y_hi.unwrap_or(p.y)).fold(0.0, f64::max);
        (lo, hi)
    };
    let (lo, hi) = span(&[mean.clone(), p99.clone()].concat());
    let j = &r.job;
    render(&Chart {
        title: format!(
            "Latency vs throughput: {} sweep",
            match r.sweep_over {
                plumb_analyze::sweep::SweepKind::QueueDepth => "queue depth",
                plumb_analyze::sweep::SweepKind::Rate => "rate limit",
            }
        ),
        subtitle: format!(
            "{} · {} {} · {}% writes · {} · {} thread(s) · median of {} run(s), whiskers min–max",
            j.name,
            bytes(j.block_size as u64),
            match j.pattern {
                Pattern::Random => "random",
                Pattern::Sequential => "sequential",
            },
            j.write_pct,
            j.durability,
            j.threads,
            r.repetitions
        ),
        x_label: "I/O per second".into(),
        y_label: "latency (ms)".into(),
        x_log: false,
        // Latency spans decades between QD 1 and saturation: a log axis keeps both readable.
        y_log: lo > 0.0 && hi / lo > 20.0,
        series: vec![
            Series {
                name: "mean latency".into(),
                color: PALETTE[0],
                dashed: false,
                line: true,
                points: mean,
            },
            Series {
                name: "p99 latency".into(),
                color: PALETTE[1],
                dashed: true,
                line: true,
                points: p99,
            },
        ],
        marks,
        x_fmt: |v| {
            if v >= 1e6 {
                format!("{:.1}M", v / 1e6)
            } else if v >= 1e3 {
                format!("{:.0}k", v / 1e3)
            } else {
                format!("{v:.0}")
            }
        },
        y_fmt: |v| {
            if v >= 10.0 {
                format!("{v:.0}")
            } else if v >= 1.0 {
                format!("{v:.1}")
            } else {
                format!("{v:.2}")
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_typed_in_mb_per_s_is_said_in_both_units() {
        let r = plumb_sys::units::parse_rate("1200MB/s").unwrap();
        assert_eq!(
            rate_words(r),
            "1200.0 MB/s (1144.4 MiB/s, the unit of the tables below)"
        );
        let r = plumb_sys::units::parse_rate("100MiB/s").unwrap();
        assert_eq!(
            rate_words(r),
            "104.9 MB/s (100.0 MiB/s, the unit of the tables below)"
        );
    }
}
