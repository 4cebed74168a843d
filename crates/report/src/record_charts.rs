//! The recording's time charts. Each is a frame (title, axes, units) and its lines; the lines of
//! the charts drawn from fixed metrics are tables ([`Line`]), the rest (one line per standby,
//! per process, per PostgreSQL role) are found in the recording and drawn with the same styles.

use crate::record_run::{process_name, Run};
use crate::svg::{Draw, Fmt, TimeChart, TimeMark, TimeSeries, PALETTE};

/// How a series is drawn.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    pub draw: Draw,
    pub dashed: bool,
    pub right: bool,
}

pub(crate) const LINE: Style = Style {
    draw: Draw::Line,
    dashed: false,
    right: false,
};
pub(crate) const DASHED: Style = Style {
    dashed: true,
    ..LINE
};
const AREA: Style = Style {
    draw: Draw::Area,
    ..LINE
};
const RIGHT: Style = Style {
    right: true,
    ..LINE
};
const RIGHT_DASHED: Style = Style {
    right: true,
    dashed: true,
    ..LINE
};

/// One series of a run.
pub(crate) fn series(
    r: &Run,
    name: String,
    color: &'static str,
    style: Style,
    points: Vec<(f64, f64)>,
) -> TimeSeries {
    TimeSeries {
        name,
        color,
        dashed: style.dashed,
        draw: style.draw,
        right: style.right,
        run: r.index,
        points,
    }
}

/// The palette's `i`th colour, round the end.
fn palette(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// The run's label after a series name, where several runs share a chart.
fn tag(runs: &[Run], r: &Run) -> String {
    if runs.len() > 1 {
        format!(" {}", r.label)
    } else {
        String::new()
    }
}

/// A log axis when a chart's values span more than three decades.
pub(crate) fn wants_log(series: &[TimeSeries]) -> bool {
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

pub(crate) fn overlay_marks(runs: &[Run]) -> Vec<TimeMark> {
    let prefix = runs.len() > 1;
    runs.iter().flat_map(|r| r.marks(prefix)).collect()
}

/// A chart's frame: everything but its series.
struct Frame {
    title: String,
    subtitle: String,
    y_label: &'static str,
    y2_label: Option<&'static str>,
    y_fmt: Fmt,
    y2_fmt: Fmt,
    /// A log axis when the values span more than three decades.
    log: bool,
    /// Drawn only when a series is on the left axis (the right one alone says too little).
    needs_left: bool,
}

impl Frame {
    fn new(title: impl Into<String>, subtitle: impl Into<String>, y_label: &'static str) -> Frame {
        Frame {
            title: title.into(),
            subtitle: subtitle.into(),
            y_label,
            y2_label: None,
            y_fmt: Fmt::Count,
            y2_fmt: Fmt::Count,
            log: false,
            needs_left: false,
        }
    }

    /// Both axes' units (the right one's label, where it has series).
    fn units(mut self, y: Fmt, y2: Fmt, y2_label: Option<&'static str>) -> Frame {
        self.y_fmt = y;
        self.y2_fmt = y2;
        self.y2_label = y2_label;
        self
    }

    fn chart(self, series: Vec<TimeSeries>, marks: Vec<TimeMark>) -> Option<TimeChart> {
        if series.is_empty() || (self.needs_left && series.iter().all(|s| s.right)) {
            return None;
        }
        Some(TimeChart {
            y_log: self.log && wants_log(&series),
            title: self.title,
            subtitle: self.subtitle,
            y_label: self.y_label.into(),
            y2_label: self.y2_label.map(Into::into),
            series,
            marks,
            y_fmt: self.y_fmt,
            y2_fmt: self.y2_fmt,
        })
    }
}

/// Which colour a line takes.
#[derive(Clone, Copy)]
enum Color {
    Fixed(&'static str),
    /// The palette's `i`th, moved on by three for each later run.
    Palette(usize),
}

/// Which recorded series are worth a line.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    Always,
    AnyFinite,
    AnyAboveZero,
}

/// One line of a chart drawn from a recorded metric (`{}` in the metric: the object, a device).
#[derive(Clone, Copy)]
struct Line {
    metric: &'static str,
    name: &'static str,
    color: Color,
    style: Style,
    keep: Keep,
}

const fn line(metric: &'static str, name: &'static str, color: Color, style: Style) -> Line {
    Line {
        metric,
        name,
        color,
        style,
        keep: Keep::Always,
    }
}

/// The lines of `table` for each run (the run's label after the name where there are several;
/// later runs dashed where `dash_later_runs`).
fn lines_of(runs: &[Run], table: &[Line], object: &str, dash_later_runs: bool) -> Vec<TimeSeries> {
    let mut out = Vec::new();
    for (k, r) in runs.iter().enumerate() {
        for l in table {
            let Some(p) = r.points(&l.metric.replace("{}", object)) else {
                continue;
            };
            let keep = match l.keep {
                Keep::Always => true,
                Keep::AnyFinite => p.iter().any(|(_, v)| v.is_finite()),
                Keep::AnyAboveZero => p.iter().any(|(_, v)| *v > 0.0),
            };
            if !keep {
                continue;
            }
            let color = match l.color {
                Color::Fixed(c) => c,
                Color::Palette(i) => palette(i + 3 * k),
            };
            let mut style = l.style;
            if dash_later_runs {
                style.dashed = k % 2 == 1;
            }
            out.push(series(
                r,
                format!("{}{}", l.name, tag(runs, r)),
                color,
                style,
                p,
            ));
        }
    }
    out
}

const CPU: &[Line] = &[
    line("cpu.all.user_pct", "user", Color::Fixed(PALETTE[0]), AREA),
    line(
        "cpu.all.system_pct",
        "system",
        Color::Fixed(PALETTE[1]),
        AREA,
    ),
    line("cpu.all.irq_pct", "irq", Color::Fixed(PALETTE[4]), AREA),
    line(
        "cpu.all.iowait_pct",
        "iowait",
        Color::Fixed(PALETTE[3]),
        AREA,
    ),
    line("cpu.all.steal_pct", "steal", Color::Fixed("#7f7f7f"), AREA),
    line(
        "sched.runnable_count",
        "runnable tasks",
        Color::Fixed("#000000"),
        RIGHT,
    ),
];

pub(crate) fn cpu(r: &Run) -> Option<TimeChart> {
    let cpus = r
        .rec
        .header
        .cpus
        .map(|c| c.to_string())
        .unwrap_or_else(|| "?".into());
    let mut f = Frame::new(
        format!("CPU by state — {}", r.label),
        format!("all {cpus} CPUs, % of CPU time; runnable tasks (running or waiting for a CPU) on the right"),
        "% of CPU time",
    )
    .units(Fmt::Pct, Fmt::Count, Some("runnable tasks"));
    f.needs_left = true;
    f.chart(
        lines_of(std::slice::from_ref(r), CPU, "", false),
        r.marks(false),
    )
}

const MEMORY: &[Line] = &[
    line("mem.anon_bytes", "anon", Color::Fixed(PALETTE[1]), AREA),
    line("mem.cache_bytes", "cache", Color::Fixed(PALETTE[0]), AREA),
    line("mem.free_bytes", "free", Color::Fixed("#c7e9c0"), AREA),
    line(
        "mem.swap_used_bytes",
        "swap used",
        Color::Fixed(PALETTE[3]),
        AREA,
    ),
    Line {
        keep: Keep::AnyAboveZero,
        ..line(
            "mem.swap_in_bytes_per_s",
            "swap-in",
            Color::Fixed("#000000"),
            RIGHT_DASHED,
        )
    },
];

pub(crate) fn memory(r: &Run) -> Option<TimeChart> {
    let mut f = Frame::new(
        format!("Memory — {}", r.label),
        "anon + cache + free ≈ RAM; swap used stacked on top",
        "bytes",
    )
    .units(Fmt::Bytes, Fmt::ByteRate, Some("swap-in per second"));
    f.needs_left = true;
    f.chart(
        lines_of(std::slice::from_ref(r), MEMORY, "", false),
        r.marks(false),
    )
}

const DISK: &[Line] = &[
    line(
        "disk.{}.read_bytes_per_s",
        "read",
        Color::Fixed(PALETTE[0]),
        LINE,
    ),
    line(
        "disk.{}.write_bytes_per_s",
        "write",
        Color::Fixed(PALETTE[1]),
        LINE,
    ),
    line(
        "disk.{}.read_await_ms",
        "read await",
        Color::Fixed(PALETTE[2]),
        RIGHT,
    ),
    line(
        "disk.{}.write_await_ms",
        "write await",
        Color::Fixed(PALETTE[4]),
        RIGHT,
    ),
];

pub(crate) fn disk(runs: &[Run], dev: &str) -> Option<TimeChart> {
    let mut f = Frame::new(
        format!("Disk {dev}: throughput and latency"),
        "bytes per second (left); mean time per I/O, queued and in service (right)",
        "bytes per second",
    )
    .units(Fmt::ByteRate, Fmt::Ms, Some("await (ms)"));
    f.log = true;
    f.chart(lines_of(runs, DISK, dev, true), overlay_marks(runs))
}

const PSI: &[Line] = &[
    line("psi.cpu.some_pct", "cpu some", Color::Palette(0), LINE),
    line("psi.cpu.full_pct", "cpu full", Color::Palette(0), DASHED),
    line(
        "psi.memory.some_pct",
        "memory some",
        Color::Palette(1),
        LINE,
    ),
    line(
        "psi.memory.full_pct",
        "memory full",
        Color::Palette(1),
        DASHED,
    ),
    line("psi.io.some_pct", "io some", Color::Palette(2), LINE),
    line("psi.io.full_pct", "io full", Color::Palette(2), DASHED),
];

pub(crate) fn psi(runs: &[Run]) -> Option<TimeChart> {
    Frame::new(
        "Pressure stall information",
        "% of time some task (solid) or all tasks (dashed) stalled on the resource",
        "% of time stalled",
    )
    .units(Fmt::Pct, Fmt::Pct, None)
    .chart(lines_of(runs, PSI, "", false), overlay_marks(runs))
}

const fn rate(metric: &'static str, name: &'static str, i: usize) -> Line {
    Line {
        keep: Keep::AnyFinite,
        ..line(metric, name, Color::Palette(i), LINE)
    }
}

const ENGINE: &[Line] = &[
    rate("engine.db.commits_per_s", "commits/s", 0),
    rate(
        "engine.db.blocks_read_per_s",
        "blocks read/s (not in shared_buffers)",
        1,
    ),
    rate("engine.wal.syncs_per_s", "WAL syncs/s", 2),
    rate("engine.status.questions_per_s", "statements/s", 3),
    rate(
        "engine.innodb.buffer_pool_reads_per_s",
        "buffer pool reads/s",
        4,
    ),
    rate("engine.innodb.data_fsyncs_per_s", "InnoDB fsyncs/s", 5),
    line(
        "engine.wal.bytes_per_s",
        "WAL bytes/s",
        Color::Palette(6),
        RIGHT_DASHED,
    ),
];

/// The engine's throughput over time: rates on the left (commits, statements, block reads,
/// WAL syncs), WAL bytes per second on the right.
pub(crate) fn engine(runs: &[Run]) -> Option<TimeChart> {
    Frame::new(
        "Database: throughput",
        "from the engine's own counters, read with every sample (plumb's reading adds a few commits per second)",
        "per second",
    )
    .units(Fmt::PerS, Fmt::ByteRate, Some("WAL bytes per second"))
    .chart(lines_of(runs, ENGINE, "", false), overlay_marks(runs))
}

/// `plumb load --record`: each transaction type's rate (left) and the second's p95 (right,
/// dashed), failures where there were any.
pub(crate) fn workload(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for ty in r.objects("load", "transactions_per_s") {
            if let Some(p) = r.points(&format!("load.{ty}.transactions_per_s")) {
                out.push(series(r, format!("{ty}/s{tag}"), palette(color), LINE, p));
            }
            if let Some(p) = r
                .points(&format!("load.{ty}.failures_per_s"))
                .filter(|p| any_above_zero(p))
            {
                let name = format!("{ty} failed/s{tag}");
                out.push(series(r, name, palette(color), DASHED, p));
            }
            if let Some(p) = r.points(&format!("load.{ty}.p95_ms")) {
                let name = format!("{ty} p95{tag}");
                out.push(series(r, name, palette(color), RIGHT_DASHED, p));
            }
            color += 1;
        }
    }
    Frame::new(
        "Workload: transactions per second and p95 latency",
        "plumb load's own figures per transaction type, counted as each transaction ended (committed, or rolled back as the workload plans); the 95th percentile of the second's latencies on the right",
        "per second",
    )
    .units(Fmt::PerS, Fmt::Ms, Some("p95 latency"))
    .chart(out, overlay_marks(runs))
}

/// Replication as the primary saw it (`plumb repl watch --out`): how far each standby's
/// flushed and replayed positions were behind (bytes, left) and the commits waiting for a
/// synchronous standby (right).
pub(crate) fn replication(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for s in r.objects("repl", "flushed_behind_bytes") {
            for (field, what, style) in [
                ("flushed_behind_bytes", "not yet flushed", LINE),
                ("replayed_behind_bytes", "not yet replayed", DASHED),
            ] {
                if let Some(p) = r.points(&format!("repl.{s}.{field}")) {
                    out.push(series(
                        r,
                        format!("{s}: {what}{tag}"),
                        palette(color),
                        style,
                        p,
                    ));
                }
            }
            color += 1;
        }
        if let Some(p) = r.points("replication.commits_waiting_count") {
            let name = format!("commits waiting for a synchronous standby{tag}");
            out.push(series(r, name, palette(color), RIGHT, p));
            color += 1;
        }
    }
    Frame::new(
        "Replication: how far each standby is behind",
        "WAL the primary has written that the standby has not reported flushed (what a synchronous commit waits for) or replayed; commits waiting for a synchronous standby on the right",
        "bytes behind",
    )
    .units(Fmt::Bytes, Fmt::Count, Some("commits waiting"))
    .chart(out, overlay_marks(runs))
}

/// Some value above zero: a lag that never moved off zero is not drawn.
fn any_above_zero(p: &[(f64, f64)]) -> bool {
    p.iter().any(|(_, v)| v.is_finite() && *v > 0.0)
}

/// The standbys' lags as PostgreSQL measures them (write, flush, replay) and the WAL shipped.
pub(crate) fn replication_lag(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for s in r.objects("repl", "flushed_behind_bytes") {
            for (field, what, style) in [
                ("flush_lag_ms", "flush lag", LINE),
                ("replay_lag_ms", "replay lag", DASHED),
                ("silent_ms", "silent while owing a reply", DASHED),
            ] {
                if let Some(p) = r
                    .points(&format!("repl.{s}.{field}"))
                    .filter(|p| any_above_zero(p))
                {
                    out.push(series(
                        r,
                        format!("{s}: {what}{tag}"),
                        palette(color),
                        style,
                        p,
                    ));
                }
            }
            if let Some(p) = r.points(&format!("repl.{s}.sent_bytes_per_s")) {
                let name = format!("{s}: WAL sent/s{tag}");
                out.push(series(r, name, palette(color + 4), RIGHT_DASHED, p));
            }
            color += 1;
        }
        if let Some(p) = r
            .points("replication.longest_commit_wait_ms")
            .filter(|p| any_above_zero(p))
        {
            out.push(series(
                r,
                format!("longest commit wait{tag}"),
                palette(color),
                LINE,
                p,
            ));
            color += 1;
        }
    }
    let mut f = Frame::new(
        "Replication: lag",
        "time from a commit's local flush to the standby's report (PostgreSQL's flush_lag and replay_lag, which do not move while a standby is silent; a gap while it is idle and caught up), how long a standby owing a reply has been silent, and how long the longest-waiting commit has run; WAL sent per second on the right",
        "ms",
    )
    .units(Fmt::Ms, Fmt::ByteRate, Some("WAL bytes per second"));
    f.needs_left = true;
    f.chart(out, overlay_marks(runs))
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

pub(crate) fn total(v: &[f64]) -> f64 {
    v.iter().filter(|x| x.is_finite()).sum()
}

/// Durable writes by process (`plumb record --trace`): fsync and fdatasync calls per second
/// (solid) and the FLUSH and FUA requests their writes sent to the devices (dashed), for the
/// processes that made most of them and for all traced processes together.
pub(crate) fn trace(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut lost = 0.0f64;
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
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
            let c = palette(color);
            color += 1;
            let pts = |v: Vec<f64>| r.t.iter().cloned().zip(v).collect::<Vec<_>>();
            if let Some(v) = syncs(&obj).filter(|v| total(v) > 0.0) {
                let n = format!("{name}: fsync+fdatasync/s{tag}");
                out.push(series(r, n, c, LINE, pts(v)));
            }
            if let Some(v) = flushes(&obj).filter(|v| total(v) > 0.0) {
                let n = format!("{name}: FLUSH+FUA/s{tag}");
                out.push(series(r, n, c, DASHED, pts(v)));
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
    let mut subtitle = "fsync and fdatasync calls (solid) and the cache FLUSH and FUA requests their I/O sent to the device (dashed), counted in the kernel".to_string();
    if lost > 0.0 {
        subtitle.push_str(&format!("; {lost:.0} events lost: rates are lower bounds"));
    }
    Frame::new("Kernel: durable writes by process", subtitle, "per second")
        .units(Fmt::PerS, Fmt::PerS, None)
        .chart(out, overlay_marks(runs))
}

/// The engine's own account of its cache, stacked where one run is drawn (lines after: parts of
/// the stack or targets, not layers).
const ENGINE_MEMORY_STACK: &[(&str, &str)] = &[
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
    // MariaDB's dirty bytes are part of its data bytes: a line, not a layer.
    (
        "engine.innodb.buffer_pool_dirty_bytes",
        "buffer pool: of which dirty",
    ),
    ("engine.perf.database_cache_bytes", "database cache"),
    ("engine.perf.free_memory_bytes", "free"),
    ("engine.perf.stolen_memory_bytes", "stolen"),
];
const ENGINE_MEMORY_LINES: &[(&str, &str)] = &[
    (
        "engine.perf.plan_cache_bytes",
        "plan cache (part of stolen)",
    ),
    (
        "engine.perf.target_server_memory_bytes",
        "target server memory",
    ),
];

/// The engine's memory as the engine sees it, stacked (PostgreSQL's shared buffers from
/// pg_buffercache, MariaDB's buffer pool, SQL Server's Memory Manager counters), with the
/// kernel's view of the server's process tree beside it (its PSS, dashed).
pub(crate) fn engine_memory(runs: &[Run]) -> Option<TimeChart> {
    let stacked = runs.len() == 1;
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        let mut any = false;
        for (name, what) in ENGINE_MEMORY_STACK.iter().chain(ENGINE_MEMORY_LINES) {
            let Some(p) = r.points(name) else { continue };
            if !p.iter().any(|(_, v)| v.is_finite()) {
                continue;
            }
            let layer = stacked
                && ENGINE_MEMORY_STACK.iter().any(|(n, _)| n == name)
                && !name.ends_with("buffer_pool_dirty_bytes");
            let style = if layer { AREA } else { LINE };
            out.push(series(r, format!("{what}{tag}"), palette(color), style, p));
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
                let name = format!("kernel: PSS of PID {t} and its children{tag}");
                out.push(series(r, name, palette(color), DASHED, p));
                color += 1;
            }
        }
    }
    Frame::new(
        "Database: memory as the engine sees it",
        "the engine's own account of its cache (stacked where one run), and the kernel's PSS of the server's processes (dashed, with --pid)",
        "bytes",
    )
    .units(Fmt::Bytes, Fmt::Bytes, None)
    .chart(out, overlay_marks(runs))
}

/// PostgreSQL's wait event types, as `engine.activity.waiting_TYPE_count` names them.
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

/// Sessions and threads by state, each engine's own (dashed: the ones that are waiting).
const SESSIONS: &[(&str, &str, bool)] = &[
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

/// Sessions and what they wait on, now, at every sample: PostgreSQL's active sessions by wait
/// event type (stacked), MariaDB's running threads and row lock waits, SQL Server's memory
/// grants.
pub(crate) fn engine_waits(runs: &[Run]) -> Option<TimeChart> {
    let stacked = runs.len() == 1;
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for (field, what) in PG_WAITS {
            let metric = format!("engine.activity.waiting_{field}_count");
            if r.values(&metric).is_none_or(|v| total(&v) <= 0.0) {
                continue;
            }
            if let Some(p) = r.points(&metric) {
                let style = if stacked { AREA } else { LINE };
                out.push(series(
                    r,
                    format!("waiting on {what}{tag}"),
                    palette(color),
                    style,
                    p,
                ));
                color += 1;
            }
        }
        for (name, what, dashed) in SESSIONS {
            if let Some(p) = r.points(name) {
                let style = if *dashed { DASHED } else { LINE };
                out.push(series(r, format!("{what}{tag}"), palette(color), style, p));
                color += 1;
            }
        }
    }
    Frame::new(
        "Database: sessions and waits",
        "at each sample: active sessions and those waiting, by wait type (stacked); MariaDB threads and row lock waits; SQL Server grants",
        "sessions",
    )
    .chart(out, overlay_marks(runs))
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
pub(crate) fn tree_cpu(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for root in r.objects("tree", "cpu_pct") {
            let name = process_name(r, &root);
            let c = palette(color);
            color += 1;
            if let Some(p) = r.points(&format!("tree.{root}.cpu_pct")) {
                let n = format!("{name} and everything below it{tag}");
                out.push(series(r, n, c, LINE, p));
            }
            if let Some(p) = r.points(&format!("tree.{root}.processes_count")) {
                let n = format!("PID {root}: processes in the tree{tag}");
                out.push(series(r, n, c, RIGHT_DASHED, p));
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
                    let n = format!("{}{tag}", role_name(code));
                    out.push(series(r, n, palette(color), LINE, p));
                    color += 1;
                }
            }
        }
    }
    Frame::new(
        "Process trees: CPU by role",
        "each tree's CPU (short-lived backends included) and its busiest PostgreSQL roles; processes in the tree dashed, right",
        "% of one CPU",
    )
    .units(Fmt::Pct, Fmt::Count, Some("processes"))
    .chart(out, overlay_marks(runs))
}

/// Process trees' memory: PSS (each shared page counted once across the tree), the shared
/// memory part of it, and swapped memory (SwapPss, shared memory included).
pub(crate) fn tree_memory(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    let mut color = 0;
    for r in runs {
        let tag = tag(runs, r);
        for root in r.objects("tree", "pss_bytes") {
            let name = process_name(r, &root);
            let (c, c2) = (palette(color), palette(color + 1));
            color += 2;
            for (field, what, col, style) in [
                ("pss_bytes", "PSS", c, LINE),
                ("pss_shmem_bytes", "shared memory (PSS)", c2, LINE),
                ("swap_pss_bytes", "swapped (SwapPss)", c, DASHED),
            ] {
                if let Some(p) = r.points(&format!("tree.{root}.{field}")) {
                    out.push(series(
                        r,
                        format!("{name} tree: {what}{tag}"),
                        col,
                        style,
                        p,
                    ));
                }
            }
        }
    }
    Frame::new(
        "Process trees: memory",
        "PSS over the tree (a shared page counted once; shared memory only where a live member maps it) and SwapPss, dashed",
        "bytes",
    )
    .units(Fmt::Bytes, Fmt::Bytes, None)
    .chart(out, overlay_marks(runs))
}

/// Each process followed (a tree's root where trees were recorded): resident and swapped.
pub(crate) fn processes(runs: &[Run]) -> Option<TimeChart> {
    let mut out = Vec::new();
    for r in runs.iter() {
        let tag = tag(runs, r);
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
                out.push(series(
                    r,
                    format!("{name} RSS{tag}"),
                    palette(2 * j),
                    LINE,
                    p,
                ));
            }
            if let Some(p) = r.points(&format!("proc.{pid}.swap_bytes")) {
                let n = format!("{name} swap{tag}");
                out.push(series(r, n, palette(2 * j + 1), DASHED, p));
            }
        }
    }
    Frame::new(
        "Processes: resident vs swapped",
        "VmRSS (solid) and smaps_rollup Swap, which counts swapped shared memory (dashed)",
        "bytes",
    )
    .units(Fmt::Bytes, Fmt::Bytes, None)
    .chart(out, overlay_marks(runs))
}

/// How values of a unit are written on an axis (a unit that can go below zero, a rate of a
/// gauge, as plain numbers).
fn fmt_of(unit: &str, negative: bool) -> Fmt {
    match unit {
        "%" => Fmt::Pct,
        "B" if !negative => Fmt::Bytes,
        "B/s" if !negative => Fmt::ByteRate,
        "/s" => Fmt::PerS,
        "ms" => Fmt::Ms,
        _ => Fmt::Count,
    }
}

fn unit_label(unit: &str) -> String {
    match unit {
        "" => "ratio".into(),
        "B" => "bytes".into(),
        "B/s" => "bytes/s".into(),
        "/s" => "per second".into(),
        u => u.into(),
    }
}

/// The units of chosen series in order of first use (a series no run has is left out).
pub(crate) fn units_of(runs: &[Run], names: &[String]) -> Vec<String> {
    let mut units: Vec<String> = Vec::new();
    for n in names {
        if let Some(u) = runs.iter().find_map(|r| r.unit(n)) {
            if !units.contains(&u) {
                units.push(u);
            }
        }
    }
    units
}

/// Chosen series (recorded or derived) over time, runs overlaid (later runs dashed): `plumb
/// plot`, and `plumb report`'s chart of derived series. The first unit is on the left axis, a
/// second on the right (the caller keeps to two); `stack` draws the left axis's series as areas
/// stacked on each other (one run's).
pub(crate) fn plot(runs: &[Run], names: &[String], stack: bool) -> TimeChart {
    let units = units_of(runs, names);
    let left = units.first().cloned().unwrap_or_default();
    let mut out = Vec::new();
    let mut negative = [false, false];
    for (k, r) in runs.iter().enumerate() {
        for (j, m) in names.iter().enumerate() {
            let Some(p) = r.points(m) else { continue };
            let name = if runs.len() > 1 {
                format!("{m} {}", r.label)
            } else {
                m.clone()
            };
            let right = r.unit(m).is_some_and(|u| u != left);
            negative[right as usize] |= p.iter().any(|(_, v)| *v < 0.0);
            let style = Style {
                draw: if stack && !right {
                    Draw::Area
                } else {
                    Draw::Line
                },
                dashed: k % 2 == 1,
                right,
            };
            out.push(series(r, name, palette(j), style, p));
        }
    }
    let y_log = !stack && !negative[0] && wants_log(&out);
    TimeChart {
        title: names.join(", "),
        subtitle: runs
            .iter()
            .map(|r| r.label.clone())
            .collect::<Vec<_>>()
            .join(" vs "),
        y_label: if units.len() > 1 || names.len() > 1 {
            unit_label(&left)
        } else {
            names.first().cloned().unwrap_or_default()
        },
        y2_label: units.get(1).map(|u| unit_label(u)),
        y_log,
        series: out,
        marks: overlay_marks(runs),
        y_fmt: fmt_of(&left, negative[0]),
        y2_fmt: units.get(1).map_or(Fmt::Count, |u| fmt_of(u, negative[1])),
    }
}
