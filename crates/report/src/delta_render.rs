//! Text and table forms of `plumb delta`: figures grouped by where they come from, one column
//! per mode (cold, warm), the median with the range over repeated runs.

use crate::fmt::{bytes, count, pct, MISSING};
use crate::verdict_render::{trust_lines, Block, Line, Mark};
use crate::{Render, Table};
use plumb_analyze::delta::{DeltaReport, Row, Stat};
use plumb_analyze::delta_verdict::DeltaVerdict;
use plumb_analyze::verdict::Headline;
use plumb_analyze::Level;
use std::io::{self, Write};

/// Display order and titles of the groups; unknown groups follow in name order.
const GROUPS: &[(&str, &str)] = &[
    ("run", "run"),
    ("command", "command (the workload process and its children)"),
    ("backend", "backend (the workload session's server process)"),
    (
        "server",
        "server processes (all of the instance's processes on this host)",
    ),
    (
        "syscall",
        "syscalls of the server's processes (--trace: the 12 that took most time, blocking included)",
    ),
    (
        "bios",
        "block requests the server's processes submitted (--trace)",
    ),
    (
        "kernel",
        "faults and scheduling of the server's processes (--trace)",
    ),
    ("host_cpu", "host CPU (/proc/stat)"),
    (
        "disk",
        "disk (/proc/diskstats, the device under the data directory)",
    ),
    ("db", "database (pg_stat_database)"),
    ("io", "I/O by backend type, object and context (pg_stat_io)"),
    (
        "table",
        "tables (pg_statio_user_tables; the file under the data directory)",
    ),
    ("file", "file I/O per file"),
    ("wal", "WAL (pg_stat_wal)"),
    ("checkpointer", "checkpoints"),
    ("bgwriter", "background writer (pg_stat_bgwriter)"),
    ("buffercache", "buffer cache (pg_buffercache)"),
    ("waits", "waits (sampled from pg_stat_activity)"),
    (
        "session",
        "the workload's session (sys.dm_exec_sessions)",
    ),
    (
        "session_wait",
        "waits of the workload's session, its parallel workers included (sys.dm_exec_session_wait_stats; server_wide_wait_ms: the same wait over the whole server)",
    ),
    (
        "session_wait_ignorable",
        "benign waits of the workload's session",
    ),
    ("wait", "waits"),
    (
        "wait_ignorable",
        "benign waits (idle queues and background sleeps)",
    ),
    (
        "waiting_tasks",
        "waiting tasks now (sys.dm_os_waiting_tasks)",
    ),
    ("latch", "latches"),
    ("spinlock", "spinlocks"),
    ("memory", "memory"),
    ("scheduler", "schedulers (sys.dm_os_schedulers)"),
    (
        "sampled",
        "sampled during the run: run queue (sys.dm_os_schedulers) and memory grants (sys.dm_exec_query_memory_grants), mean and peak",
    ),
    (
        "perf",
        "performance counters (sys.dm_os_performance_counters)",
    ),
    ("perf_avg", "average counters (delta value / delta base)"),
    ("tempdb", "tempdb space"),
    ("busy", "@@CPU_BUSY and @@IO_BUSY"),
    ("innodb", "InnoDB"),
    ("status", "server status counters"),
];

/// The major version in a PostgreSQL version string ("PostgreSQL 17.10 on x86_64…" → 17).
pub fn pg_major(version: &str) -> Option<u32> {
    version
        .strip_prefix("PostgreSQL ")
        .and_then(plumb_engine::pg::major)
}

/// The group's title, naming the source the engine's figures come from (PostgreSQL's moved
/// between versions: `version` is the server's).
fn title(g: &str, engine: &str, version: &str) -> String {
    let pg = pg_major(version).unwrap_or(0);
    let source = match (g, engine) {
        ("checkpointer", "PostgreSQL") if pg >= 17 => Some("pg_stat_checkpointer"),
        ("checkpointer", "PostgreSQL") => Some("pg_stat_bgwriter"),
        ("wal", "PostgreSQL") if pg >= 18 => {
            Some("writes, syncs and their times from pg_stat_io's wal rows, where PostgreSQL 18 moved them")
        }
        ("wait", "SQL Server") => Some("sys.dm_os_wait_stats, ignorable waits left out"),
        ("wait", "MariaDB") => Some("performance_schema.events_waits_summary_global_by_event_name"),
        ("latch", "SQL Server") => Some("sys.dm_os_latch_stats"),
        ("spinlock", "SQL Server") => Some("sys.dm_os_spinlock_stats"),
        ("latch", "MariaDB") => Some("mutex, rwlock and sx-lock waits from performance_schema"),
        ("wait_ignorable", "MariaDB") => Some("idle sessions and condition-variable sleeps"),
        ("file", "SQL Server") => Some("sys.dm_io_virtual_file_stats"),
        ("file", "MariaDB") => Some("performance_schema.file_summary_by_instance"),
        _ => None,
    };
    let base = title_of(g);
    match source {
        // "WAL (pg_stat_wal)" + s → "WAL (pg_stat_wal; s)"
        Some(s) if base.ends_with(')') => format!("{}; {s})", &base[..base.len() - 1]),
        Some(s) => format!("{base} ({s})"),
        None => base,
    }
}

fn title_of(g: &str) -> String {
    GROUPS
        .iter()
        .find(|(k, _)| *k == g)
        .map(|(_, t)| t.to_string())
        .unwrap_or_else(|| g.to_string())
}

fn order(g: &str) -> usize {
    GROUPS
        .iter()
        .position(|(k, _)| *k == g)
        .unwrap_or(GROUPS.len())
}

pub fn value(unit: &str, v: f64) -> String {
    match unit {
        "bytes" => bytes(v.max(0.0) as u64),
        "ms" => {
            if v >= 10_000.0 {
                format!("{:.1} s", v / 1000.0)
            } else if v > 0.0 && v < 0.01 {
                format!("{:.2} µs", v * 1000.0)
            } else if v >= 10.0 {
                format!("{v:.0} ms")
            } else {
                format!("{v:.2} ms")
            }
        }
        "s" => {
            if v < 1.0 {
                format!("{:.1} ms", v * 1000.0)
            } else {
                format!("{v:.2} s")
            }
        }
        "%" => pct(v),
        _ => count(v),
    }
}

fn cell(r: &Row, s: &Option<Stat>) -> String {
    match s {
        None => MISSING.into(),
        Some(s) if s.values.len() > 1 && value(&r.unit, s.min) != value(&r.unit, s.max) => {
            format!(
                "{} [{}..{}]",
                value(&r.unit, s.median),
                value(&r.unit, s.min),
                value(&r.unit, s.max)
            )
        }
        Some(s) => value(&r.unit, s.median),
    }
}

const LABEL: usize = 34;

/// The delta's verdict block: the runs' trust, what the workload cost per mode, what differs
/// between the modes by `plumb compare`'s rule, and the notes that need action.
pub fn block(v: &DeltaVerdict, r: &DeltaReport) -> Block {
    let plain = |text: String| Line {
        text,
        mark: Mark::Plain,
    };
    let mut rows = vec![("trust", trust_lines(&v.run, "runs"))];
    let mut figures = Vec::new();
    for m in &r.modes {
        let mut parts = Vec::new();
        let range = |h: &Headline, unit: &str| match (h.low, h.high) {
            (Some(l), Some(hi)) if value(unit, l) != value(unit, hi) => {
                format!(" ({}–{})", value(unit, l), value(unit, hi))
            }
            _ => String::new(),
        };
        for h in v.run.headline.iter().filter(|h| h.of == m.mode) {
            match h.code {
                "elapsed" => {
                    parts.push(format!("{} elapsed{}", value("s", h.value), range(h, "s")))
                }
                "storage_read" => parts.push(format!(
                    "{} read from storage by the server{}",
                    value("bytes", h.value),
                    range(h, "bytes")
                )),
                _ => {}
            }
        }
        if !parts.is_empty() {
            let runs = if r.repeat > 1 {
                format!(" (median of {} runs, lowest–highest)", r.repeat)
            } else {
                String::new()
            };
            figures.push(plain(format!("{}: {}{runs}", m.mode, parts.join(", "))));
        }
    }
    if !figures.is_empty() {
        rows.push(("figures", figures));
    }
    if r.modes.len() > 1 {
        let mut changed: Vec<Line> = v
            .changes
            .iter()
            .map(|c| {
                let name = [c.group.as_str(), c.object.as_str(), c.metric.as_str()]
                    .iter()
                    .filter(|x| !x.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" ");
                let pct = if c.change_pct.is_finite() {
                    format!(
                        "{:+.0}%, 95% interval {:+.0}%..{:+.0}%",
                        c.change_pct, c.change_low_pct, c.change_high_pct
                    )
                } else {
                    "up from 0".to_string()
                };
                plain(format!(
                    "{} vs {}: {name} {} → {} ({pct}, p={:.3})",
                    c.to,
                    c.from,
                    value(&c.unit, c.from_median),
                    value(&c.unit, c.to_median),
                    c.p
                ))
            })
            .collect();
        if v.changes_total > v.changes.len() {
            changed.push(plain(format!(
                "and {} more figures, in the table below",
                v.changes_total - v.changes.len()
            )));
        }
        if changed.is_empty() {
            changed.push(plain(if v.compared > 0 && v.too_few == v.compared {
                format!(
                    "too few runs to tell the modes apart: {} a side, and the test needs 4 (--repeat 4)",
                    r.repeat
                )
            } else {
                format!(
                    "nothing differs between the modes beyond the measured spread ({} figures compared, by plumb compare's rule)",
                    v.compared
                )
            }));
        }
        rows.push(("differs", changed));
    }
    let actions: Vec<Line> = r
        .notes
        .iter()
        .filter(|n| n.level == Level::Warn)
        .map(|n| Line {
            text: format!("[warn] {}", crate::words::note(n)),
            mark: Mark::Warn,
        })
        .collect();
    rows.push((
        "needs action",
        if actions.is_empty() {
            vec![plain("none: no note needs action".into())]
        } else {
            actions
        },
    ));
    Block { rows }
}

/// `plumb delta`'s result with its verdict (text opens on the block; JSON's top-level
/// `verdict`).
pub fn output(r: &DeltaReport) -> crate::verdict_render::Verdicted<'_, DeltaReport, DeltaVerdict> {
    let verdict = plumb_analyze::delta_verdict::delta(r);
    let block = block(&verdict, r);
    crate::verdict_render::Verdicted {
        report: r,
        verdict,
        block,
    }
}

impl Render for DeltaReport {
    const KIND: &'static str = "delta";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        let engine = self
            .engine
            .as_ref()
            .map(|e| {
                format!(
                    "{} · ",
                    e.version.split(" on ").next().unwrap_or(&e.version)
                )
            })
            .unwrap_or_default();
        writeln!(out, "plumb delta · {engine}{}", self.target)?;
        writeln!(out, "workload    {}", self.workload)?;
        let runs = if self.repeat == 1 {
            "1 run".to_string()
        } else {
            format!("{} runs, median [min..max]", self.repeat)
        };
        writeln!(out, "runs        {runs} per mode")?;
        for m in &self.modes {
            if !m.preparation.is_empty() {
                writeln!(
                    out,
                    "{:<12}{}",
                    m.mode,
                    m.preparation
                        .iter()
                        .map(crate::words::said)
                        .collect::<Vec<_>>()
                        .join("; ")
                )?;
            }
        }
        writeln!(out)?;
        // Column widths from the cells.
        let cells: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.stats.iter().map(|s| cell(r, s)).collect())
            .collect();
        let widths: Vec<usize> = (0..self.modes.len())
            .map(|i| {
                cells
                    .iter()
                    .map(|c| c[i].chars().count())
                    .chain([self.modes[i].mode.len()])
                    .max()
                    .unwrap_or(8)
                    .max(10)
            })
            .collect();
        let mut header = format!("{:<LABEL$}", "");
        for (m, w) in self.modes.iter().zip(&widths) {
            header.push_str(&format!("  {:>w$}", m.mode, w = w));
        }
        writeln!(out, "{}", header.trim_end())?;
        let mut idx: Vec<usize> = (0..self.rows.len()).collect();
        idx.sort_by(|a, b| {
            let (ra, rb) = (&self.rows[*a], &self.rows[*b]);
            (order(&ra.group), &ra.group, &ra.object).cmp(&(
                order(&rb.group),
                &rb.group,
                &rb.object,
            ))
        });
        let (mut group, mut object) = (None::<&str>, None::<&str>);
        for i in idx {
            let r = &self.rows[i];
            if group != Some(r.group.as_str()) {
                writeln!(
                    out,
                    "{}",
                    title(
                        &r.group,
                        self.engine
                            .as_ref()
                            .map(|e| e.engine.as_str())
                            .unwrap_or(""),
                        self.engine
                            .as_ref()
                            .map(|e| e.version.as_str())
                            .unwrap_or("")
                    )
                )?;
                group = Some(&r.group);
                object = None;
            }
            let indent = if r.object.is_empty() {
                "  "
            } else {
                if object != Some(r.object.as_str()) {
                    writeln!(out, "  {}", r.object)?;
                    object = Some(&r.object);
                }
                "    "
            };
            let mut line = format!("{indent}{}", r.metric);
            let pad = LABEL.saturating_sub(line.chars().count());
            line.push_str(&" ".repeat(pad));
            for (c, w) in cells[i].iter().zip(&widths) {
                line.push_str(&format!("  {:>w$}", c, w = w));
            }
            writeln!(out, "{}", line.trim_end())?;
        }
        if self.hidden_rows > 0 {
            writeln!(
                out,
                "({} figures hidden: zero in every run, or waits under {} ms; --all shows them)",
                self.hidden_rows, self.threshold_ms
            )?;
        }
        if !self.notes.is_empty() {
            writeln!(out, "\nnotes")?;
            for n in &self.notes {
                writeln!(
                    out,
                    "  {} {}",
                    if n.level == Level::Warn { "!" } else { "-" },
                    crate::words::note(n)
                )?;
            }
        }
        if !self.unavailable.is_empty() {
            writeln!(out, "\nnot measured")?;
            for u in &self.unavailable {
                writeln!(out, "  - {u}")?;
            }
        }
        Ok(())
    }

    /// One row per figure and mode (group, object, metric, unit, mode, median, min, max,
    /// runs): a mode's name ("as found") stays a value, never part of a column name, and the
    /// numbers are written as short as they read.
    fn table(&self) -> Option<Table> {
        let headers: Vec<String> = [
            "group", "object", "metric", "unit", "mode", "median", "min", "max", "runs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut rows = Vec::new();
        for r in &self.rows {
            for (m, st) in self.modes.iter().zip(&r.stats) {
                let Some(st) = st else { continue };
                rows.push(vec![
                    r.group.clone(),
                    r.object.clone(),
                    r.metric.clone(),
                    r.unit.clone(),
                    m.mode.clone(),
                    csv_number(st.median),
                    csv_number(st.min),
                    csv_number(st.max),
                    st.values.len().to_string(),
                ]);
            }
        }
        Some(Table { headers, rows })
    }
}

/// A number for CSV: whole numbers without a fraction, others to nine significant digits
/// (0.015493116999999997 is written 0.015493117).
fn csv_number(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v == v.trunc() && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let mag = v.abs().log10().floor() as i32;
    let dec = (8 - mag).clamp(0, 17) as usize;
    let s = format!("{v:.dec$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_numbers_are_short() {
        assert_eq!(csv_number(0.015493116999999997), "0.015493117");
        assert_eq!(csv_number(41.0), "41");
        assert_eq!(csv_number(1234.5678), "1234.5678");
        assert_eq!(csv_number(f64::NAN), "");
    }

    #[test]
    fn values_read_as_people_read_them() {
        assert_eq!(count(1234567.0), "1,234,567");
        assert_eq!(count(12.5), "12.50");
        assert_eq!(value("bytes", 41.0 * 1048576.0), "41.0 MiB");
        assert_eq!(value("ms", 3.456), "3.46 ms");
        assert_eq!(value("ms", 0.00015), "0.15 µs");
        assert_eq!(value("ms", 12500.0), "12.5 s");
        assert_eq!(value("s", 0.25), "250.0 ms");
        assert_eq!(value("%", 97.25), "97.2%");
    }

    #[test]
    fn checkpoint_figures_name_the_view_of_the_servers_version() {
        let v17 = "PostgreSQL 17.10 on x86_64-pc-linux-gnu, compiled by gcc";
        assert_eq!(pg_major(v17), Some(17));
        assert_eq!(pg_major("PostgreSQL 18beta1 on x86_64"), Some(18));
        assert_eq!(pg_major("MariaDB 10.11.6"), None);
        assert!(title("checkpointer", "PostgreSQL", v17).contains("pg_stat_checkpointer"));
        assert!(
            title("checkpointer", "PostgreSQL", "PostgreSQL 15.18 (Debian)")
                .contains("pg_stat_bgwriter")
        );
        assert!(title("wal", "PostgreSQL", "PostgreSQL 18.4 on x").contains("pg_stat_io"));
        assert_eq!(title("wal", "PostgreSQL", v17), "WAL (pg_stat_wal)");
    }
}
