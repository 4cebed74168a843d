//! Recordings as charts: the self-contained HTML report, single SVG plots, and CSV / JSON Lines
//! export. Rates come from `plumb_analyze::series`, the one metric list.

use crate::explore::{self, PageChart, RunTimes};
use crate::fmt::{bytes, MISSING};
use crate::svg::{self, Draw, Fmt, TimeChart, TimeMark, TimeSeries, PALETTE};
use plumb_analyze::series::{self, MetricInfo};
use plumb_store::Recording;
use std::io::{self, Write};

/// One recording with its derived-metric catalog and a label for overlays.
pub struct Run<'a> {
    pub label: String,
    /// The run's place on the page (its series and marks refer to it).
    pub index: usize,
    pub rec: &'a Recording,
    pub catalog: Vec<MetricInfo>,
    pub t: Vec<f64>,
}

impl<'a> Run<'a> {
    pub fn new(rec: &'a Recording, label: String) -> Run<'a> {
        Run {
            label,
            index: 0,
            catalog: series::catalog(rec),
            t: series::times_s(rec),
            rec,
        }
    }

    /// When the last sample was taken (the start when there is none).
    pub fn end_unix_ms(&self) -> u64 {
        self.rec.header.started_unix_ms + self.rec.times_ms.last().copied().unwrap_or(0)
    }

    pub fn values(&self, name: &str) -> Option<Vec<f64>> {
        series::find(&self.catalog, name).map(|m| series::compute(self.rec, m))
    }

    fn points(&self, name: &str) -> Option<Vec<(f64, f64)>> {
        let m = series::find(&self.catalog, name)?;
        let v = series::compute(self.rec, m);
        // A slow metric (read about once a second in a faster recording) is drawn through the
        // samples that read it, not broken between them.
        let slow = series::is_slow(self.rec, m);
        let pts: Vec<(f64, f64)> = self
            .t
            .iter()
            .cloned()
            .zip(v)
            .filter(|(_, v)| !slow || v.is_finite())
            .collect();
        Some(pts)
    }

    fn objects(&self, family: &str, suffix: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .catalog
            .iter()
            .filter_map(|m| {
                let rest = m.name.strip_prefix(&format!("{family}."))?;
                let (obj, field) = rest.split_once('.')?;
                (field == suffix).then(|| obj.to_string())
            })
            .collect();
        v.dedup();
        v
    }

    fn marks(&self, prefix: bool) -> Vec<TimeMark> {
        self.rec
            .marks
            .iter()
            .map(|m| TimeMark {
                t_s: m.t_ms as f64 / 1000.0,
                run: self.index,
                label: if prefix {
                    format!("{}: {}", self.label, m.name)
                } else {
                    m.name.clone()
                },
            })
            .collect()
    }
}

/// A stacked area on the left axis.
fn area(r: &Run, name: &str, color: &'static str, points: Vec<(f64, f64)>) -> TimeSeries {
    TimeSeries {
        name: name.into(),
        color,
        dashed: false,
        draw: Draw::Area,
        right: false,
        run: r.index,
        points,
    }
}

/// A log axis when a chart's values span more than three decades.
fn wants_log(series: &[TimeSeries]) -> bool {
    let v: Vec<f64> = series
        .iter()
        .filter(|s| !s.right)
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    if v.len() < 2 {
        return false;
    }
    let (lo, hi) = (
        v.iter().cloned().fold(f64::INFINITY, f64::min),
        v.iter().cloned().fold(0.0, f64::max),
    );
    hi / lo > 1000.0
}

fn cpu_chart(r: &Run) -> Option<TimeChart> {
    let parts = [
        ("user", PALETTE[0]),
        ("system", PALETTE[1]),
        ("irq", PALETTE[4]),
        ("iowait", PALETTE[3]),
        ("steal", "#7f7f7f"),
    ];
    let mut series = Vec::new();
    for (n, c) in parts {
        if let Some(p) = r.points(&format!("cpu.all.{n}_pct")) {
            series.push(area(r, n, c, p));
        }
    }
    if series.is_empty() {
        return None;
    }
    if let Some(p) = r.points("sched.runnable_count") {
        series.push(TimeSeries {
            name: "runnable tasks".into(),
            color: "#000000",
            dashed: false,
            draw: Draw::Line,
            right: true,
            points: p,
            run: r.index,
        });
    }
    Some(TimeChart {
        title: format!("CPU by state — {}", r.label),
        subtitle: format!("all {} CPUs, % of CPU time; runnable tasks (running or waiting for a CPU) on the right", r.rec.header.cpus.map(|c| c.to_string()).unwrap_or_else(|| "?".into())),
        y_label: "% of CPU time".into(),
        y2_label: Some("runnable tasks".into()),
        y_log: false,
        series,
        marks: r.marks(false),
        y_fmt: Fmt::Pct,
        y2_fmt: Fmt::Count,
    })
}

fn mem_chart(r: &Run) -> Option<TimeChart> {
    let parts = [
        ("anon", "mem.anon_bytes", PALETTE[1]),
        ("cache", "mem.cache_bytes", PALETTE[0]),
        ("free", "mem.free_bytes", "#c7e9c0"),
        ("swap used", "mem.swap_used_bytes", PALETTE[3]),
    ];
    let mut series = Vec::new();
    for (n, m, c) in parts {
        if let Some(p) = r.points(m) {
            series.push(area(r, n, c, p));
        }
    }
    if series.is_empty() {
        return None;
    }
    if let Some(p) = r.points("mem.swap_in_bytes_per_s") {
        if p.iter().any(|x| x.1 > 0.0) {
            series.push(TimeSeries {
                name: "swap-in".into(),
                color: "#000000",
                dashed: true,
                draw: Draw::Line,
                right: true,
                points: p,
                run: r.index,
            });
        }
    }
    Some(TimeChart {
        title: format!("Memory — {}", r.label),
        subtitle: "anon + cache + free ≈ RAM; swap used stacked on top".into(),
        y_label: "bytes".into(),
        y2_label: Some("swap-in per second".into()),
        y_log: false,
        series,
        marks: r.marks(false),
        y_fmt: Fmt::Bytes,
        y2_fmt: Fmt::ByteRate,
    })
}

fn overlay_marks(runs: &[Run]) -> Vec<TimeMark> {
    let prefix = runs.len() > 1;
    runs.iter().flat_map(|r| r.marks(prefix)).collect()
}

fn disk_chart(runs: &[Run], dev: &str) -> Option<TimeChart> {
    let mut series = Vec::new();
    for (k, r) in runs.iter().enumerate() {
        let dashed = k % 2 == 1;
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for (m, n, c, right) in [
            ("read_bytes_per_s", "read", PALETTE[0], false),
            ("write_bytes_per_s", "write", PALETTE[1], false),
            ("read_await_ms", "read await", PALETTE[2], true),
            ("write_await_ms", "write await", PALETTE[4], true),
        ] {
            if let Some(p) = r.points(&format!("disk.{dev}.{m}")) {
                series.push(TimeSeries {
                    name: format!("{n}{tag}"),
                    color: c,
                    dashed,
                    draw: Draw::Line,
                    right,
                    points: p,
                    run: r.index,
                });
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    let log = wants_log(&series);
    Some(TimeChart {
        title: format!("Disk {dev}: throughput and latency"),
        subtitle: "bytes per second (left); mean time per I/O, queued and in service (right)"
            .into(),
        y_label: "bytes per second".into(),
        y2_label: Some("await (ms)".into()),
        y_log: log,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::ByteRate,
        y2_fmt: Fmt::Ms,
    })
}

fn iops_vs_latency(runs: &[Run], dev: &str) -> Option<String> {
    let mut series = Vec::new();
    for (k, r) in runs.iter().enumerate() {
        let (Some(ri), Some(wi)) = (
            r.values(&format!("disk.{dev}.read_iops")),
            r.values(&format!("disk.{dev}.write_iops")),
        ) else {
            continue;
        };
        let ra = r
            .values(&format!("disk.{dev}.read_await_ms"))
            .unwrap_or_default();
        let wa = r
            .values(&format!("disk.{dev}.write_await_ms"))
            .unwrap_or_default();
        let mut pts = Vec::new();
        for i in 0..ri.len() {
            let (a, b) = (ri[i], wi[i]);
            let iops = a.max(0.0) + b.max(0.0);
            if iops.is_nan() || iops <= 0.0 {
                continue;
            }
            // Mean service time over both directions, weighted by their I/Os.
            let ra_i = ra.get(i).copied().filter(|v| v.is_finite()).unwrap_or(0.0);
            let wa_i = wa.get(i).copied().filter(|v| v.is_finite()).unwrap_or(0.0);
            let lat = (ra_i * a.max(0.0) + wa_i * b.max(0.0)) / iops;
            pts.push(svg::Point {
                x: iops,
                y: lat,
                y_lo: None,
                y_hi: None,
                label: None,
            });
        }
        if pts.len() > 4000 {
            let step = pts.len() / 4000 + 1;
            pts = pts.into_iter().step_by(step).collect();
        }
        if !pts.is_empty() {
            series.push(svg::Series {
                name: r.label.clone(),
                color: PALETTE[k % PALETTE.len()],
                dashed: false,
                line: false,
                points: pts,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(svg::render(&svg::Chart {
        title: format!("Disk {dev}: IOPS against service time"),
        subtitle: "one point per second; service time rising with IOPS shows the device queueing"
            .into(),
        x_label: "I/O per second (reads + writes)".into(),
        y_label: "mean time per I/O (ms)".into(),
        x_log: false,
        y_log: false,
        series,
        marks: vec![],
        x_fmt: |v| Fmt::Count.apply(v),
        y_fmt: |v| {
            if v == 0.0 || v >= 1.0 {
                format!("{v:.1}")
            } else if v >= 0.1 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        },
    }))
}

fn psi_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    for (k, r) in runs.iter().enumerate() {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for (i, res) in ["cpu", "memory", "io"].iter().enumerate() {
            for (kind, dashed) in [("some", false), ("full", true)] {
                if let Some(p) = r.points(&format!("psi.{res}.{kind}_pct")) {
                    series.push(TimeSeries {
                        name: format!("{res} {kind}{tag}"),
                        color: PALETTE[(i + 3 * k) % PALETTE.len()],
                        dashed,
                        draw: Draw::Line,
                        right: false,
                        points: p,
                        run: r.index,
                    });
                }
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Pressure stall information".into(),
        subtitle: "% of time some task (solid) or all tasks (dashed) stalled on the resource"
            .into(),
        y_label: "% of time stalled".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Pct,
        y2_fmt: Fmt::Pct,
    })
}

/// The engine's throughput over time: rates on the left (commits, statements, block reads,
/// WAL syncs), WAL bytes per second on the right.
fn engine_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let left = [
        ("db", "commits_per_s", "commits/s"),
        (
            "db",
            "blocks_read_per_s",
            "blocks read/s (not in shared_buffers)",
        ),
        ("wal", "syncs_per_s", "WAL syncs/s"),
        ("status", "questions_per_s", "statements/s"),
        ("innodb", "buffer_pool_reads_per_s", "buffer pool reads/s"),
        ("innodb", "data_fsyncs_per_s", "InnoDB fsyncs/s"),
    ];
    for (k, r) in runs.iter().enumerate() {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for (i, (obj, field, name)) in left.iter().enumerate() {
            if let Some(p) = r.points(&format!("engine.{obj}.{field}")) {
                if p.iter().any(|(_, v)| v.is_finite()) {
                    series.push(TimeSeries {
                        name: format!("{name}{tag}"),
                        color: PALETTE[(i + 3 * k) % PALETTE.len()],
                        dashed: false,
                        draw: Draw::Line,
                        right: false,
                        points: p,
                        run: r.index,
                    });
                }
            }
        }
        if let Some(p) = r.points("engine.wal.bytes_per_s") {
            series.push(TimeSeries {
                name: format!("WAL bytes/s{tag}"),
                color: PALETTE[(6 + 3 * k) % PALETTE.len()],
                dashed: true,
                draw: Draw::Line,
                right: true,
                points: p,
                run: r.index,
            });
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Database: throughput".into(),
        subtitle: "from the engine's own counters, read with every sample (plumb's reading adds a few commits per second)".into(),
        y_label: "per second".into(),
        y2_label: Some("WAL bytes per second".into()),
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::PerS,
        y2_fmt: Fmt::ByteRate,
    })
}

/// Replication as the primary saw it (`plumb repl watch --out`): how far each standby's
/// flushed and replayed positions were behind (bytes, left) and the commits waiting for a
/// synchronous standby (right).
fn replication_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for s in r.objects("repl", "flushed_behind_bytes") {
            for (field, what, dashed) in [
                ("flushed_behind_bytes", "not yet flushed", false),
                ("replayed_behind_bytes", "not yet replayed", true),
            ] {
                if let Some(p) = r.points(&format!("repl.{s}.{field}")) {
                    series.push(TimeSeries {
                        name: format!("{s}: {what}{tag}"),
                        color: PALETTE[color % PALETTE.len()],
                        dashed,
                        draw: Draw::Line,
                        right: false,
                        points: p,
                        run: r.index,
                    });
                }
            }
            color += 1;
        }
        if let Some(p) = r.points("replication.commits_waiting_count") {
            series.push(TimeSeries {
                name: format!("commits waiting for a synchronous standby{tag}"),
                color: PALETTE[color % PALETTE.len()],
                dashed: false,
                draw: Draw::Line,
                right: true,
                points: p,
                run: r.index,
            });
            color += 1;
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Replication: how far each standby is behind".into(),
        subtitle: "WAL the primary has written that the standby has not reported flushed (what a synchronous commit waits for) or replayed; commits waiting for a synchronous standby on the right".into(),
        y_label: "bytes behind".into(),
        y2_label: Some("commits waiting".into()),
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Bytes,
        y2_fmt: Fmt::Count,
    })
}

/// The standbys' lags as PostgreSQL measures them (write, flush, replay) and the WAL shipped.
fn replication_lag_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for s in r.objects("repl", "flushed_behind_bytes") {
            for (field, what, dashed) in [
                ("flush_lag_ms", "flush lag", false),
                ("replay_lag_ms", "replay lag", true),
                ("silent_ms", "silent while owing a reply", true),
            ] {
                if let Some(p) = r.points(&format!("repl.{s}.{field}")) {
                    if p.iter().any(|(_, v)| v.is_finite() && *v > 0.0) {
                        series.push(TimeSeries {
                            name: format!("{s}: {what}{tag}"),
                            color: PALETTE[color % PALETTE.len()],
                            dashed,
                            draw: Draw::Line,
                            right: false,
                            points: p,
                            run: r.index,
                        });
                    }
                }
            }
            if let Some(p) = r.points(&format!("repl.{s}.sent_bytes_per_s")) {
                series.push(TimeSeries {
                    name: format!("{s}: WAL sent/s{tag}"),
                    color: PALETTE[(color + 4) % PALETTE.len()],
                    dashed: true,
                    draw: Draw::Line,
                    right: true,
                    points: p,
                    run: r.index,
                });
            }
            color += 1;
        }
        if let Some(p) = r.points("replication.longest_commit_wait_ms") {
            if p.iter().any(|(_, v)| v.is_finite() && *v > 0.0) {
                series.push(TimeSeries {
                    name: format!("longest commit wait{tag}"),
                    color: PALETTE[color % PALETTE.len()],
                    dashed: false,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
                color += 1;
            }
        }
    }
    if series.iter().all(|s| s.right) {
        return None;
    }
    Some(TimeChart {
        title: "Replication: lag".into(),
        subtitle: "time from a commit's local flush to the standby's report (PostgreSQL's flush_lag and replay_lag, which do not move while a standby is silent; a gap while it is idle and caught up), how long a standby owing a reply has been silent, and how long the longest-waiting commit has run; WAL sent per second on the right".into(),
        y_label: "ms".into(),
        y2_label: Some("WAL bytes per second".into()),
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Ms,
        y2_fmt: Fmt::ByteRate,
    })
}

/// Processes drawn apart in the trace chart; the rest are in "all traced".
const TRACE_CHART_PROCESSES: usize = 5;

fn sum_series(a: Option<Vec<f64>>, b: Option<Vec<f64>>) -> Option<Vec<f64>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(
            a.iter()
                .zip(&b)
                .map(|(x, y)| match (x.is_finite(), y.is_finite()) {
                    (true, true) => x + y,
                    (true, false) => *x,
                    (false, true) => *y,
                    _ => f64::NAN,
                })
                .collect(),
        ),
        (a, b) => a.or(b),
    }
}

fn total(v: &[f64]) -> f64 {
    v.iter().filter(|x| x.is_finite()).sum()
}

/// PostgreSQL's auxiliary processes, as their titles begin (`postgres: walwriter`).
const PG_AUXILIARY: &[&str] = &[
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication launcher",
    "logical replication worker",
    "archiver",
    "stats collector",
    "walsender",
    "walreceiver",
    "walsummarizer",
    "startup",
    "parallel worker",
    "io worker",
];

/// A process title made short for a legend: PostgreSQL's auxiliary processes by their role,
/// its backends as `backend USER@DB` (the state in the title is only what it was doing when
/// first seen), other commands by program name and arguments, cut at 36 characters.
pub fn short_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    if let Some(rest) = title.trim().strip_prefix("postgres: ") {
        // A cluster name may come first ("postgres: main: walwriter").
        let role = rest.rsplit_once(": ").map_or(rest, |(_, r)| r);
        if let Some(a) = PG_AUXILIARY.iter().find(|a| role.starts_with(*a)) {
            return format!("postgres: {a}");
        }
        let w: Vec<&str> = role.split_whitespace().collect();
        if w.len() >= 2 {
            return format!("postgres: backend {}@{}", w[0], w[1]);
        }
    }
    let mut out = match words.split_first() {
        Some((prog, args)) => {
            let base = prog.rsplit('/').next().unwrap_or(prog);
            std::iter::once(base)
                .chain(args.iter().copied())
                .collect::<Vec<_>>()
                .join(" ")
        }
        None => String::new(),
    };
    if out.chars().count() > 36 {
        out = out.chars().take(35).collect::<String>() + "…";
    }
    out
}

/// A process's name in a legend: its PID and, when recorded, its title made short.
fn process_name(r: &Run, pid: &str) -> String {
    let label = r
        .rec
        .object_label(&format!("trace.{pid}"))
        .or_else(|| r.rec.object_label(&format!("proc.{pid}")));
    match label {
        Some(l) => format!("PID {pid} {}", short_title(l)),
        None if pid == "other" => "other processes".into(),
        None => format!("PID {pid}"),
    }
}

/// Durable writes by process (`plumb record --trace`): fsync and fdatasync calls per second
/// (solid) and the FLUSH and FUA requests their writes sent to the devices (dashed), for the
/// processes that made most of them and for all traced processes together.
fn trace_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let mut lost = 0.0f64;
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        let syncs = |obj: &str| {
            sum_series(
                r.values(&format!("trace.{obj}.fsyncs_per_s")),
                r.values(&format!("trace.{obj}.fdatasyncs_per_s")),
            )
        };
        let flushes = |obj: &str| {
            sum_series(
                r.values(&format!("trace.{obj}.flushes_per_s")),
                r.values(&format!("trace.{obj}.fua_writes_per_s")),
            )
        };
        let mut objs: Vec<(String, f64)> = r
            .objects("trace", "syscalls_per_s")
            .into_iter()
            .filter(|o| o != "all")
            .map(|o| {
                let w =
                    syncs(&o).map_or(0.0, |v| total(&v)) + flushes(&o).map_or(0.0, |v| total(&v));
                (o, w)
            })
            .filter(|(_, w)| *w > 0.0)
            .collect();
        objs.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let shown = objs.len().min(TRACE_CHART_PROCESSES);
        let mut lines: Vec<(String, String)> = objs[..shown]
            .iter()
            .map(|(o, _)| (o.clone(), process_name(r, o)))
            .collect();
        if objs.len() != 1 {
            lines.push(("all".into(), "all traced".into()));
        }
        for (obj, name) in lines {
            let c = PALETTE[color % PALETTE.len()];
            color += 1;
            let pts = |v: Vec<f64>| r.t.iter().cloned().zip(v).collect::<Vec<_>>();
            if let Some(v) = syncs(&obj).filter(|v| total(v) > 0.0) {
                series.push(TimeSeries {
                    name: format!("{name}: fsync+fdatasync/s{tag}"),
                    color: c,
                    dashed: false,
                    draw: Draw::Line,
                    right: false,
                    points: pts(v),
                    run: r.index,
                });
            }
            if let Some(v) = flushes(&obj).filter(|v| total(v) > 0.0) {
                series.push(TimeSeries {
                    name: format!("{name}: FLUSH+FUA/s{tag}"),
                    color: c,
                    dashed: true,
                    draw: Draw::Line,
                    right: false,
                    points: pts(v),
                    run: r.index,
                });
            }
        }
        if let Some(v) = r.values("trace.all.lost_count") {
            lost = lost.max(
                v.iter()
                    .cloned()
                    .filter(|x| x.is_finite())
                    .fold(0.0, f64::max),
            );
        }
    }
    if series.is_empty() {
        return None;
    }
    let mut subtitle = "fsync and fdatasync calls (solid) and the cache FLUSH and FUA requests their I/O sent to the device (dashed), counted in the kernel".to_string();
    if lost > 0.0 {
        subtitle.push_str(&format!("; {lost:.0} events lost: rates are lower bounds"));
    }
    Some(TimeChart {
        title: "Kernel: durable writes by process".into(),
        subtitle,
        y_label: "per second".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::PerS,
        y2_fmt: Fmt::PerS,
    })
}

/// The engine's memory as the engine sees it, stacked (PostgreSQL's shared buffers from
/// pg_buffercache, MariaDB's buffer pool, SQL Server's Memory Manager counters), with the
/// kernel's view of the server's process tree beside it (its PSS, dashed).
fn engine_memory_chart(runs: &[Run]) -> Option<TimeChart> {
    let stack: &[(&str, &str)] = &[
        (
            "engine.buffercache.clean_bytes",
            "shared buffers: clean pages",
        ),
        (
            "engine.buffercache.dirty_bytes",
            "shared buffers: dirty pages",
        ),
        ("engine.buffercache.unused_bytes", "shared buffers: unused"),
        ("engine.innodb.buffer_pool_data_bytes", "buffer pool: data"),
        (
            "engine.innodb.buffer_pool_dirty_bytes",
            "buffer pool: of which dirty",
        ),
        ("engine.perf.database_cache_bytes", "database cache"),
        ("engine.perf.free_memory_bytes", "free"),
        ("engine.perf.stolen_memory_bytes", "stolen"),
    ];
    let lines: &[(&str, &str)] = &[
        (
            "engine.perf.plan_cache_bytes",
            "plan cache (part of stolen)",
        ),
        (
            "engine.perf.target_server_memory_bytes",
            "target server memory",
        ),
    ];
    let area = runs.len() == 1;
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        let mut any = false;
        for (name, what) in stack.iter().chain(lines) {
            let Some(p) = r.points(name) else { continue };
            if !p.iter().any(|(_, v)| v.is_finite()) {
                continue;
            }
            // MariaDB's dirty bytes are part of its data bytes: a line, not a layer.
            let layer = area
                && stack.iter().any(|(n, _)| n == name)
                && !name.ends_with("buffer_pool_dirty_bytes");
            series.push(TimeSeries {
                name: format!("{what}{tag}"),
                color: PALETTE[color % PALETTE.len()],
                dashed: false,
                draw: if layer { Draw::Area } else { Draw::Line },
                right: false,
                points: p,
                run: r.index,
            });
            color += 1;
            any = true;
        }
        if !any {
            continue;
        }
        // The kernel's view: the server's tree (the one with PostgreSQL roles, else the first).
        let trees = r.objects("tree", "pss_bytes");
        let server = trees
            .iter()
            .find(|t| {
                r.objects("role", "cpu_pct")
                    .iter()
                    .any(|o| o.starts_with(&format!("{t}-")))
            })
            .or(trees.first());
        if let Some(t) = server {
            if let Some(p) = r.points(&format!("tree.{t}.pss_bytes")) {
                series.push(TimeSeries {
                    name: format!("kernel: PSS of PID {t} and its children{tag}"),
                    color: PALETTE[color % PALETTE.len()],
                    dashed: true,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
                color += 1;
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Database: memory as the engine sees it".into(),
        subtitle: "the engine's own account of its cache (stacked where one run), and the kernel's PSS of the server's processes (dashed, with --pid)".into(),
        y_label: "bytes".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Bytes,
        y2_fmt: Fmt::Bytes,
    })
}

/// Sessions and what they wait on, now, at every sample: PostgreSQL's active sessions by wait
/// event type (stacked), MariaDB's running threads and row lock waits, SQL Server's memory
/// grants.
fn engine_waits_chart(runs: &[Run]) -> Option<TimeChart> {
    const PG_WAITS: &[(&str, &str)] = &[
        ("lwlock", "LWLock"),
        ("lock", "Lock"),
        ("bufferpin", "BufferPin"),
        ("io", "IO"),
        ("ipc", "IPC"),
        ("client", "Client"),
        ("timeout", "Timeout"),
        ("activity", "Activity"),
        ("extension", "Extension"),
        ("injectionpoint", "InjectionPoint"),
    ];
    let lines: &[(&str, &str, bool)] = &[
        (
            "engine.activity.sessions_active_count",
            "active sessions",
            false,
        ),
        (
            "engine.activity.sessions_idle_in_transaction_count",
            "idle in transaction",
            true,
        ),
        (
            "engine.status.threads_running_count",
            "threads running",
            false,
        ),
        (
            "engine.innodb.row_lock_waiting_count",
            "row lock waits now",
            true,
        ),
        (
            "engine.perf.memory_grants_outstanding_count",
            "memory grants outstanding",
            false,
        ),
        (
            "engine.perf.memory_grants_pending_count",
            "memory grants pending",
            true,
        ),
    ];
    let area = runs.len() == 1;
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for (field, what) in PG_WAITS {
            let Some(v) = r.values(&format!("engine.activity.waiting_{field}_count")) else {
                continue;
            };
            if total(&v) <= 0.0 {
                continue;
            }
            if let Some(p) = r.points(&format!("engine.activity.waiting_{field}_count")) {
                series.push(TimeSeries {
                    name: format!("waiting on {what}{tag}"),
                    color: PALETTE[color % PALETTE.len()],
                    dashed: false,
                    draw: if area { Draw::Area } else { Draw::Line },
                    right: false,
                    points: p,
                    run: r.index,
                });
                color += 1;
            }
        }
        for (name, what, dashed) in lines {
            if let Some(p) = r.points(name) {
                series.push(TimeSeries {
                    name: format!("{what}{tag}"),
                    color: PALETTE[color % PALETTE.len()],
                    dashed: *dashed,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
                color += 1;
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Database: sessions and waits".into(),
        subtitle: "at each sample: active sessions and those waiting, by wait type (stacked); MariaDB threads and row lock waits; SQL Server grants".into(),
        y_label: "sessions".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Count,
        y2_fmt: Fmt::Count,
    })
}

/// A PostgreSQL role's code (`role.PID-CODE.*`, from `plumb_sys::proctree::pg_role`) in words.
fn role_name(code: &str) -> String {
    match code {
        "backend" => "backends".into(),
        "checkpointer" => "checkpointer".into(),
        "background_writer" => "background writer".into(),
        "walwriter" => "WAL writer".into(),
        "autovacuum_launcher" => "autovacuum launcher".into(),
        "autovacuum_worker" => "autovacuum workers".into(),
        "logical_replication_launcher" => "logical replication launcher".into(),
        "logical_replication_worker" => "logical replication workers".into(),
        "walsender" => "WAL senders".into(),
        "walreceiver" => "WAL receiver".into(),
        "parallel_worker" => "parallel workers".into(),
        "io_worker" => "I/O workers".into(),
        other => other.replace('_', " "),
    }
}

/// Lines shown per tree in the CPU-by-role chart (the busiest roles).
const TREE_CHART_ROLES: usize = 6;

/// Process trees (`plumb record --pid`, children followed): the tree's CPU and each PostgreSQL
/// role's (busiest first), with the number of processes in the tree on the right axis.
fn tree_cpu_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for root in r.objects("tree", "cpu_pct") {
            let name = process_name(r, &root);
            let c = PALETTE[color % PALETTE.len()];
            color += 1;
            if let Some(p) = r.points(&format!("tree.{root}.cpu_pct")) {
                series.push(TimeSeries {
                    name: format!("{name} and everything below it{tag}"),
                    color: c,
                    dashed: false,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
            }
            if let Some(p) = r.points(&format!("tree.{root}.processes_count")) {
                series.push(TimeSeries {
                    name: format!("PID {root}: processes in the tree{tag}"),
                    color: c,
                    dashed: true,
                    draw: Draw::Line,
                    right: true,
                    points: p,
                    run: r.index,
                });
            }
            let mut roles: Vec<(String, f64)> = r
                .objects("role", "cpu_pct")
                .into_iter()
                .filter_map(|o| {
                    let code = o.strip_prefix(&format!("{root}-"))?.to_string();
                    let v = r.values(&format!("role.{o}.cpu_pct"))?;
                    Some((code, total(&v)))
                })
                .filter(|(_, w)| *w > 0.0)
                .collect();
            roles.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (code, _) in roles.iter().take(TREE_CHART_ROLES) {
                if let Some(p) = r.points(&format!("role.{root}-{code}.cpu_pct")) {
                    series.push(TimeSeries {
                        name: format!("{}{tag}", role_name(code)),
                        color: PALETTE[color % PALETTE.len()],
                        dashed: false,
                        draw: Draw::Line,
                        right: false,
                        points: p,
                        run: r.index,
                    });
                    color += 1;
                }
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Process trees: CPU by role".into(),
        subtitle: "each tree's CPU (short-lived backends included) and its busiest PostgreSQL roles; processes in the tree dashed, right".into(),
        y_label: "% of one CPU".into(),
        y2_label: Some("processes".into()),
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Pct,
        y2_fmt: Fmt::Count,
    })
}

/// Process trees' memory: PSS (each shared page counted once across the tree), the shared
/// memory part of it, and swapped memory (SwapPss, shared memory included).
fn tree_memory_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        for root in r.objects("tree", "pss_bytes") {
            let name = process_name(r, &root);
            let c = PALETTE[color % PALETTE.len()];
            let c2 = PALETTE[(color + 1) % PALETTE.len()];
            color += 2;
            for (field, what, col, dashed) in [
                ("pss_bytes", "PSS", c, false),
                ("pss_shmem_bytes", "shared memory (PSS)", c2, false),
                ("swap_pss_bytes", "swapped (SwapPss)", c, true),
            ] {
                if let Some(p) = r.points(&format!("tree.{root}.{field}")) {
                    series.push(TimeSeries {
                        name: format!("{name} tree: {what}{tag}"),
                        color: col,
                        dashed,
                        draw: Draw::Line,
                        right: false,
                        points: p,
                        run: r.index,
                    });
                }
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Process trees: memory".into(),
        subtitle: "PSS over the tree (a shared page counted once; shared memory only where a live member maps it) and SwapPss, dashed".into(),
        y_label: "bytes".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Bytes,
        y2_fmt: Fmt::Bytes,
    })
}

fn proc_chart(runs: &[Run]) -> Option<TimeChart> {
    let mut series = Vec::new();
    for r in runs.iter() {
        let tag = if runs.len() > 1 {
            format!(" {}", r.label)
        } else {
            String::new()
        };
        // With trees recorded, their roots (the members are in the tree charts).
        let roots = r.objects("tree", "cpu_pct");
        let pids: Vec<String> = r
            .objects("proc", "rss_bytes")
            .into_iter()
            .filter(|p| roots.is_empty() || roots.contains(p))
            .collect();
        for (j, pid) in pids.iter().enumerate() {
            let name = process_name(r, pid);
            if let Some(p) = r.points(&format!("proc.{pid}.rss_bytes")) {
                series.push(TimeSeries {
                    name: format!("{name} RSS{tag}"),
                    color: PALETTE[(2 * j) % PALETTE.len()],
                    dashed: false,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
            }
            if let Some(p) = r.points(&format!("proc.{pid}.swap_bytes")) {
                series.push(TimeSeries {
                    name: format!("{name} swap{tag}"),
                    color: PALETTE[(2 * j + 1) % PALETTE.len()],
                    dashed: true,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
            }
        }
    }
    if series.is_empty() {
        return None;
    }
    Some(TimeChart {
        title: "Processes: resident vs swapped".into(),
        subtitle:
            "VmRSS (solid) and smaps_rollup Swap, which counts swapped shared memory (dashed)"
                .into(),
        y_label: "bytes".into(),
        y2_label: None,
        y_log: false,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Bytes,
        y2_fmt: Fmt::Bytes,
    })
}

pub use crate::html::escape as esc;
use crate::html::Html;

fn mean(v: &[f64]) -> Option<f64> {
    let f: Vec<f64> = v.iter().cloned().filter(|x| x.is_finite()).collect();
    (!f.is_empty()).then(|| f.iter().sum::<f64>() / f.len() as f64)
}

fn max(v: &[f64]) -> Option<f64> {
    v.iter().cloned().filter(|x| x.is_finite()).reduce(f64::max)
}

/// The run's row of the summary table (and a row saying where a damaged file stopped).
fn summary(h: &mut Html, r: &Run) {
    let dur = r.t.last().copied().unwrap_or(0.0);
    let busy = r
        .values("cpu.all.idle_pct")
        .and_then(|v| mean(&v))
        .map(|i| format!("{:.1}%", 100.0 - i))
        .unwrap_or_else(|| MISSING.into());
    let steal = r
        .values("cpu.all.steal_pct")
        .and_then(|v| mean(&v))
        .map(|v| format!("{v:.1}%"))
        .unwrap_or_else(|| MISSING.into());
    let rq = r
        .values("sched.runnable_count")
        .and_then(|v| max(&v))
        .map(|v| format!("{v:.0}"))
        .unwrap_or_else(|| MISSING.into());
    let swap = r
        .values("mem.swap_used_bytes")
        .and_then(|v| max(&v))
        .map(|v| bytes(v as u64))
        .unwrap_or_else(|| MISSING.into());
    h.with("tr", &[], |h| {
        for c in [
            r.label.clone(),
            r.rec.header.hostname.clone().unwrap_or_else(|| "?".into()),
            wall_utc(r.rec.header.started_unix_ms),
            wall_utc(r.end_unix_ms()),
            svg::fmt_clock(dur),
            r.t.len().to_string(),
            bytes(r.rec.file_bytes),
            r.rec.marks.len().to_string(),
            busy,
            steal,
            rq,
            swap,
        ] {
            h.el("td", &[], &c);
        }
    });
    if let Some(d) = &r.rec.damage {
        h.with("tr", &[], |h| {
            h.el(
                "td",
                &[("colspan", "12"), ("class", "warn")],
                &format!(
                    "{}: read up to offset {}: {}",
                    r.rec.path.display(),
                    d.offset,
                    d.reason
                ),
            );
        });
    }
}

/// A recording's name as a run: its `run` label, else its file's name; `run N` of `n` when
/// it has neither.
pub fn run_label(r: &Recording, path: &std::path::Path, i: usize, n: usize) -> String {
    let base = r.header.labels.get("run").cloned().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    if n > 1 && base.is_empty() {
        format!("run {}", i + 1)
    } else {
        base
    }
}

/// Recordings as runs, each under its own label: two lab runs (both called "lab") become
/// "lab (r1)" and "lab (r2)" after their files, or "lab #1" and "lab #2" when those match too.
pub fn runs_of<'a>(recs: &'a [Recording], files: &[std::path::PathBuf]) -> Vec<Run<'a>> {
    let mut labels: Vec<String> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| run_label(r, &files[i], i, recs.len()))
        .collect();
    let dup = |l: &[String], i: usize| l.iter().filter(|x| **x == l[i]).count() > 1;
    let by_file: Vec<String> = (0..labels.len())
        .map(|i| {
            if !dup(&labels, i) {
                return labels[i].clone();
            }
            let stem = files[i]
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if stem.is_empty() || stem == labels[i] {
                labels[i].clone()
            } else {
                format!("{} ({stem})", labels[i])
            }
        })
        .collect();
    labels = (0..by_file.len())
        .map(|i| {
            if dup(&by_file, i) {
                format!("{} #{}", by_file[i], i + 1)
            } else {
                by_file[i].clone()
            }
        })
        .collect();
    recs.iter()
        .zip(labels)
        .enumerate()
        .map(|(i, (r, l))| {
            let mut run = Run::new(r, l);
            run.index = i;
            run
        })
        .collect()
}

/// A wall-clock time to the second, in UTC, for headers and summaries.
pub fn wall_utc(unix_ms: u64) -> String {
    let iso = iso_utc(unix_ms);
    format!("{} {} UTC", &iso[..10], &iso[11..19])
}

/// ", from … to … UTC" over all runs, for a page's header.
pub fn span_utc(runs: &[Run]) -> String {
    let start = runs.iter().map(|r| r.rec.header.started_unix_ms).min();
    let end = runs.iter().map(|r| r.end_unix_ms()).max();
    match (start, end) {
        (Some(a), Some(b)) => format!(", from {} to {}", wall_utc(a), wall_utc(b)),
        _ => String::new(),
    }
}

/// The whole report: one self-contained page.
pub fn html(runs: &[Run]) -> String {
    let mut h = Html::new();
    h.el("h1", &[], "plumb report").el(
        "p",
        &[("class", "sub")],
        &format!(
            "{} recording(s){}; everything the page needs, the chart library included, is in \
             this file (it opens offline).",
            runs.len(),
            span_utc(runs)
        ),
    );
    h.with("table", &[], |h| {
        h.with("tr", &[], |h| {
            for c in [
                "run",
                "host",
                "start (UTC)",
                "end (UTC)",
                "length",
                "samples",
                "file",
                "marks",
                "CPU busy (mean)",
                "steal (mean)",
                "runnable (max)",
                "swap used (max)",
            ] {
                h.el("th", &[], c);
            }
        });
        for r in runs {
            summary(h, r);
        }
    });
    h.raw(&charts_html(runs));
    page("plumb report", &h.finish())
}

/// The recording's charts (CPU, memory, each busy disk, PSI, processes) and its marks.
pub fn charts_html(runs: &[Run]) -> String {
    let mut charts: Vec<(String, PageChart)> = Vec::new();
    for r in runs {
        if let Some(c) = cpu_chart(r) {
            charts.push(("cpu".into(), PageChart::Time(c)));
        }
        if let Some(c) = mem_chart(r) {
            charts.push(("memory".into(), PageChart::Time(c)));
        }
    }
    let mut devs: Vec<String> = runs
        .iter()
        .flat_map(|r| r.objects("disk", "read_iops"))
        .collect();
    devs.sort();
    devs.dedup();
    // Devices that did nothing add nothing.
    devs.retain(|d| {
        runs.iter().any(|r| {
            r.values(&format!("disk.{d}.write_iops"))
                .into_iter()
                .chain(r.values(&format!("disk.{d}.read_iops")))
                .any(|v| max(&v).unwrap_or(0.0) > 0.0)
        })
    });
    for d in &devs {
        if let Some(c) = disk_chart(runs, d) {
            charts.push((format!("disk-{d}"), PageChart::Time(c)));
        }
        if let Some(c) = iops_vs_latency(runs, d) {
            charts.push((format!("iops-{d}"), PageChart::Svg(c)));
        }
    }
    if let Some(c) = psi_chart(runs) {
        charts.push(("psi".into(), PageChart::Time(c)));
    }
    if let Some(c) = tree_cpu_chart(runs) {
        charts.push(("trees".into(), PageChart::Time(c)));
    }
    if let Some(c) = tree_memory_chart(runs) {
        charts.push(("tree-memory".into(), PageChart::Time(c)));
    }
    if let Some(c) = proc_chart(runs) {
        charts.push(("processes".into(), PageChart::Time(c)));
    }
    // Next to the CPU chart: what the database did, what it asked of the kernel, then what
    // the host did for it.
    let mut at = charts.len().min(1);
    if let Some(c) = engine_chart(runs) {
        charts.insert(at, ("engine".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = engine_waits_chart(runs) {
        charts.insert(at, ("engine-waits".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = engine_memory_chart(runs) {
        charts.insert(at, ("engine-memory".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = replication_chart(runs) {
        charts.insert(at, ("replication".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = replication_lag_chart(runs) {
        charts.insert(at, ("replication-lag".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = trace_chart(runs) {
        charts.insert(at, ("trace".into(), PageChart::Time(c)));
    }
    let times: Vec<RunTimes> = runs
        .iter()
        .map(|r| RunTimes {
            label: &r.label,
            started_unix_ms: r.rec.header.started_unix_ms,
            times_ms: &r.rec.times_ms,
        })
        .collect();
    let mut h = Html::new();
    h.raw(&explore::charts_block(&times, &charts));
    let marks: Vec<String> = runs
        .iter()
        .flat_map(|r| {
            r.rec.marks.iter().map(move |m| {
                format!(
                    "{} {} — {}{}",
                    r.label,
                    svg::fmt_clock(m.t_ms as f64 / 1000.0),
                    m.name,
                    m.detail
                        .as_ref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    if !marks.is_empty() {
        h.el("h2", &[], "Marks").list(&marks);
    }
    h.finish()
}

/// A self-contained page around a body.
pub fn page(title: &str, body: &str) -> String {
    const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:880px}h1{margin:0}.sub{color:#555}\
table{border-collapse:collapse;margin:16px 0;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}\
.warn{background:#fff3cd}.crit{background:#f8d7da}.chart{margin:18px 0}td.n{text-align:right}";
    let charts = body.contains(&format!("id=\"{}\"", explore::DATA_ID));
    let mut h = Html::new();
    h.raw("<!DOCTYPE html>");
    h.with("html", &[("lang", "en")], |h| {
        h.with("head", &[], |h| {
            h.raw("<meta charset=\"utf-8\">")
                .el("title", &[], title)
                .with("style", &[], |h| {
                    h.raw(STYLE);
                });
            if charts {
                h.raw(&explore::head_style());
            }
        })
        .with("body", &[], |h| {
            h.raw(body);
            if charts {
                h.raw(&explore::scripts());
            }
        });
    });
    let mut s = h.finish();
    s.push('\n');
    s
}

/// One chart of chosen metrics over time, runs overlaid.
pub fn plot(runs: &[Run], metrics: &[String]) -> String {
    let mut series = Vec::new();
    for (k, r) in runs.iter().enumerate() {
        for (j, m) in metrics.iter().enumerate() {
            if let Some(p) = r.points(m) {
                series.push(TimeSeries {
                    name: if runs.len() > 1 {
                        format!("{m} {}", r.label)
                    } else {
                        m.clone()
                    },
                    color: PALETTE[j % PALETTE.len()],
                    dashed: k % 2 == 1,
                    draw: Draw::Line,
                    right: false,
                    points: p,
                    run: r.index,
                });
            }
        }
    }
    let log = wants_log(&series);
    svg::render_time(&TimeChart {
        title: metrics.join(", "),
        subtitle: runs
            .iter()
            .map(|r| r.label.clone())
            .collect::<Vec<_>>()
            .join(" vs "),
        y_label: metrics.first().cloned().unwrap_or_default(),
        y2_label: None,
        y_log: log,
        series,
        marks: overlay_marks(runs),
        y_fmt: Fmt::Count,
        y2_fmt: Fmt::Count,
    })
}

/// Wide CSV: one row per sample, one column per derived metric (the metric list's names).
/// The metrics with a value in at least one sample (a column empty in every row types as text
/// in DuckDB and pandas), and the ones left out.
pub fn with_values<'a>(
    r: &Run,
    metrics: &'a [MetricInfo],
) -> (Vec<(&'a MetricInfo, Vec<f64>)>, Vec<&'a str>) {
    let mut kept = Vec::new();
    let mut empty = Vec::new();
    for m in metrics {
        let c = series::compute(r.rec, m);
        if c.iter().any(|v| v.is_finite()) {
            kept.push((m, c));
        } else {
            empty.push(m.name.as_str());
        }
    }
    (kept, empty)
}

/// The marks that fall in each sample's interval (after the previous sample, up to this one;
/// the first sample takes the earlier ones, the last the later ones), joined by "; ".
fn marks_by_row(r: &Run) -> Vec<String> {
    let n = r.rec.times_ms.len();
    let mut rows = vec![String::new(); n];
    if n == 0 {
        return rows;
    }
    for m in &r.rec.marks {
        let i = r.rec.times_ms.partition_point(|t| *t < m.t_ms).min(n - 1);
        if !rows[i].is_empty() {
            rows[i].push_str("; ");
        }
        rows[i].push_str(&m.name);
    }
    rows
}

/// The wide CSV: a row per sample (`t_s`, `unix_ms`, a column per metric), and a `marks`
/// column when the recording has marks. Metrics without a value in any sample are left out
/// (see [`with_values`]).
pub fn export_csv(r: &Run, metrics: &[MetricInfo], out: &mut dyn Write) -> io::Result<()> {
    let (cols, _) = with_values(r, metrics);
    let marks = (!r.rec.marks.is_empty()).then(|| marks_by_row(r));
    write!(out, "t_s,unix_ms,time")?;
    for (m, _) in &cols {
        write!(out, ",{}", crate::csv_field(&m.name))?;
    }
    if marks.is_some() {
        write!(out, ",marks")?;
    }
    writeln!(out)?;
    for i in 0..r.t.len() {
        let ms = r.rec.header.started_unix_ms + r.rec.times_ms[i];
        write!(out, "{:.3},{ms},{}", r.t[i], iso_utc(ms))?;
        for (_, c) in &cols {
            if c[i].is_finite() {
                write!(out, ",{}", trim(c[i]))?;
            } else {
                write!(out, ",")?;
            }
        }
        if let Some(m) = &marks {
            write!(out, ",{}", crate::csv_field(&m[i]))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Milliseconds since the epoch as ISO 8601 in UTC: `2026-11-23T20:31:05.123Z`.
pub fn iso_utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (y, mo, d) = plumb_analyze::units::civil((secs / 86400) as i64);
    let t = secs % 86400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        t / 3600,
        t / 60 % 60,
        t % 60,
        unix_ms % 1000
    )
}

/// The long CSV: a row per value (`unix_ms`, `time` in ISO 8601 UTC, `metric`, `unit`, `object`
/// (the device, CPU, PID… the name carries, empty for host-wide metrics), `value`), then a row
/// per mark with `metric` `mark`, its name as `object` and no value.
pub fn export_long_csv(r: &Run, metrics: &[MetricInfo], out: &mut dyn Write) -> io::Result<()> {
    let (cols, _) = with_values(r, metrics);
    writeln!(out, "unix_ms,time,metric,unit,object,value")?;
    for i in 0..r.t.len() {
        let ms = r.rec.header.started_unix_ms + r.rec.times_ms[i];
        let time = iso_utc(ms);
        for (m, c) in &cols {
            if !c[i].is_finite() {
                continue;
            }
            let parts: Vec<&str> = m.name.split('.').collect();
            let object = if parts.len() >= 3 { parts[1] } else { "" };
            writeln!(
                out,
                "{ms},{time},{},{},{},{}",
                crate::csv_field(&m.name),
                crate::csv_field(m.unit),
                crate::csv_field(object),
                trim(c[i])
            )?;
        }
    }
    for m in &r.rec.marks {
        let ms = r.rec.header.started_unix_ms + m.t_ms;
        writeln!(
            out,
            "{ms},{},mark,,{},",
            iso_utc(ms),
            crate::csv_field(&m.name)
        )?;
    }
    Ok(())
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// JSON Lines: a sample per line (and a line per mark), each with the JSON envelope.
pub fn export_jsonl(
    r: &Run,
    metrics: &[MetricInfo],
    out: &mut dyn Write,
) -> Result<(), crate::Error> {
    let cols: Vec<Vec<f64>> = metrics.iter().map(|m| series::compute(r.rec, m)).collect();
    #[derive(serde::Serialize)]
    struct Sample<'a> {
        t_s: f64,
        unix_ms: u64,
        values: std::collections::BTreeMap<&'a str, f64>,
    }
    for i in 0..r.t.len() {
        let values = metrics
            .iter()
            .zip(cols.iter())
            .filter(|(_, c)| c[i].is_finite())
            .map(|(m, c)| (m.name.as_str(), c[i]))
            .collect();
        crate::write_json_line(
            &Sample {
                t_s: r.t[i],
                unix_ms: r.rec.header.started_unix_ms + r.rec.times_ms[i],
                values,
            },
            "sample",
            out,
        )?;
    }
    // Marks carry the samples' time fields.
    #[derive(serde::Serialize)]
    struct MarkLine<'a> {
        t_s: f64,
        unix_ms: u64,
        name: &'a str,
        detail: Option<&'a str>,
    }
    for m in &r.rec.marks {
        crate::write_json_line(
            &MarkLine {
                t_s: m.t_ms as f64 / 1000.0,
                unix_ms: r.rec.header.started_unix_ms + m.t_ms,
                name: &m.name,
                detail: m.detail.as_deref(),
            },
            "mark",
            out,
        )?;
    }
    Ok(())
}

impl crate::Render for plumb_analyze::sched::CpuReport {
    const KIND: &'static str = "cpu";

    fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "Over {:.1} s: {} runnable now on {} CPUs, {} blocked on I/O · PSI cpu some {}",
            self.interval_s,
            self.runnable_now
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into()),
            self.online_cpus,
            self.blocked_now
                .map(|v| v.to_string())
                .unwrap_or_else(|| "?".into()),
            self.psi_cpu_some_pct
                .map(|v| format!("{v:.1}%"))
                .unwrap_or_else(|| MISSING.into())
        )?;
        writeln!(
            out,
            "\n  CPU |  busy |  user | system | steal | iowait | run-queue delay"
        )?;
        for c in &self.cpus {
            writeln!(
                out,
                "{:>5} | {:>4.0}% | {:>4.0}% | {:>5.0}% | {:>4.0}% | {:>5.0}% | {}",
                c.cpu.map(|x| x.to_string()).unwrap_or_else(|| "all".into()),
                c.busy_pct,
                c.user_pct,
                c.system_pct,
                c.steal_pct,
                c.iowait_pct,
                c.run_delay_pct
                    .map(|v| format!("{v:.1}% of the time"))
                    .unwrap_or_else(|| MISSING.into())
            )?;
        }
        if let Some(p) = self.pid {
            writeln!(
                out,
                "\nThreads of PID {p} (most time waiting for a CPU first)"
            )?;
            writeln!(
                out,
                "{:>8}  {:<16} {:>7} {:>16}",
                "TID", "name", "CPU", "waiting for CPU"
            )?;
            for t in self.threads.iter().take(20) {
                writeln!(
                    out,
                    "{:>8}  {:<16} {:>6.1}% {:>16}",
                    t.tid,
                    t.comm,
                    t.cpu_pct,
                    t.runnable_waiting_pct
                        .map(|v| format!("{v:.1}%"))
                        .unwrap_or_else(|| MISSING.into())
                )?;
            }
            if self.threads.len() > 20 {
                writeln!(
                    out,
                    "  ... {} more (all in --json)",
                    self.threads.len() - 20
                )?;
            }
        }
        if !self.notes.is_empty() {
            writeln!(out)?;
            for n in &self.notes {
                writeln!(
                    out,
                    "{} {}",
                    if n.level == plumb_analyze::Level::Warn {
                        "!"
                    } else {
                        "-"
                    },
                    crate::words::note(n)
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::short_title;

    #[test]
    fn process_titles_are_made_short_by_role() {
        assert_eq!(short_title("postgres: walwriter "), "postgres: walwriter");
        assert_eq!(
            short_title("postgres: main: checkpointer"),
            "postgres: checkpointer"
        );
        assert_eq!(
            short_title("postgres: plumb postgres [local] COMMIT"),
            "postgres: backend plumb@postgres"
        );
        assert_eq!(
            short_title("postgres: app shop 10.0.0.7(51234) idle in transaction"),
            "postgres: backend app@shop"
        );
        assert_eq!(
            short_title("/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main"),
            "postgres -D /var/lib/postgresql/15/…"
        );
        assert_eq!(short_title("pgbench -c 4"), "pgbench -c 4");
        assert_eq!(short_title(""), "");
    }
}
