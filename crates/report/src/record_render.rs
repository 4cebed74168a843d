//! Recordings as charts: the self-contained HTML report, single SVG plots, and CSV / JSON Lines
//! export. Rates come from `plumb_analyze::series`, the one metric list.

use crate::explore::{self, PageChart, RunTimes};
use crate::fmt::{bytes, MISSING};
use crate::record_charts as charts;
pub use crate::record_run::{derive_all, Run};
use crate::svg::{self, Fmt, PALETTE};
use plumb_analyze::series::{self, MetricInfo};
use plumb_store::Recording;
use std::io::{self, Write};

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
pub(crate) fn wall_utc(unix_ms: u64) -> String {
    let iso = iso_utc(unix_ms);
    format!("{} {} UTC", &iso[..10], &iso[11..19])
}

/// ", from … to … UTC" over all runs, for a page's header.
pub(crate) fn span_utc(runs: &[Run]) -> String {
    let start = runs.iter().map(|r| r.rec.header.started_unix_ms).min();
    let end = runs.iter().map(|r| r.end_unix_ms()).max();
    match (start, end) {
        (Some(a), Some(b)) => format!(", from {} to {}", wall_utc(a), wall_utc(b)),
        _ => String::new(),
    }
}

/// The whole report: one self-contained page.
pub fn html(runs: &[Run]) -> String {
    html_with(runs, false, &verdicts(runs))
}

/// The report opening on the runs' verdicts (computed once by the caller, who also prints
/// them), with their derived series first among the charts, their left axes stacked where
/// `stack`.
pub fn html_with(
    runs: &[Run],
    stack: bool,
    verdicts: &[plumb_analyze::recording_verdict::RecordingVerdict],
) -> String {
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
    crate::verdict_render::html(&crate::verdict_render::recording_block(verdicts), &mut h);
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
    for r in runs {
        let t = plumb_analyze::statements::table(r.rec, None, None, 10);
        h.raw(&crate::statements_render::html(&r.label, &t));
    }
    h.raw(&charts_with(runs, stack));
    page("plumb report", &h.finish())
}

/// Each run's verdict: what happened in its window.
pub fn verdicts(runs: &[Run]) -> Vec<plumb_analyze::recording_verdict::RecordingVerdict> {
    runs.iter()
        .map(|r| plumb_analyze::recording_verdict::recording(r.rec, &r.label))
        .collect()
}

/// The recording's charts (CPU, memory, each busy disk, PSI, processes) and its marks.
pub(crate) fn charts_html(runs: &[Run]) -> String {
    charts_with(runs, false)
}

/// The derived series' names in the order defined, in groups of at most two units (a chart's
/// two axes).
fn derived_groups(runs: &[Run]) -> Vec<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        for d in &r.derived {
            if !names.contains(&d.name) {
                names.push(d.name.clone());
            }
        }
    }
    let mut groups: Vec<Vec<String>> = Vec::new();
    for n in names {
        let fits = groups.last().is_some_and(|g| {
            let mut with = g.clone();
            with.push(n.clone());
            charts::units_of(runs, &with).len() <= 2
        });
        match groups.last_mut() {
            Some(g) if fits => g.push(n),
            _ => groups.push(vec![n]),
        }
    }
    groups
}

fn charts_with(runs: &[Run], stack: bool) -> String {
    let mut charts: Vec<(String, PageChart)> = Vec::new();
    // The series the reader defined come first: they are what the page was made for.
    for g in derived_groups(runs) {
        let mut c = charts::plot(runs, &g, stack);
        let defs: Vec<String> = g
            .iter()
            .filter_map(|n| {
                runs.iter()
                    .find_map(|r| r.derived.iter().find(|d| &d.name == n))
                    .map(|d| format!("{} = {}", d.name, d.text))
            })
            .collect();
        c.title = format!("Derived: {}", g.join(", "));
        c.subtitle = format!(
            "{}{}",
            defs.join("; "),
            if stack { " (stacked)" } else { "" }
        );
        charts.push(("derived".into(), PageChart::Time(c)));
    }
    for r in runs {
        if let Some(c) = charts::cpu(r) {
            charts.push(("cpu".into(), PageChart::Time(c)));
        }
        if let Some(c) = charts::memory(r) {
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
        if let Some(c) = charts::disk(runs, d) {
            charts.push((format!("disk-{d}"), PageChart::Time(c)));
        }
        if let Some(c) = iops_vs_latency(runs, d) {
            charts.push((format!("iops-{d}"), PageChart::Svg(c)));
        }
    }
    if let Some(c) = charts::psi(runs) {
        charts.push(("psi".into(), PageChart::Time(c)));
    }
    if let Some(c) = charts::tree_cpu(runs) {
        charts.push(("trees".into(), PageChart::Time(c)));
    }
    if let Some(c) = charts::tree_memory(runs) {
        charts.push(("tree-memory".into(), PageChart::Time(c)));
    }
    if let Some(c) = charts::processes(runs) {
        charts.push(("processes".into(), PageChart::Time(c)));
    }
    // Next to the CPU chart: what the database did, what it asked of the kernel, then what
    // the host did for it.
    let mut at = charts.len().min(1 + derived_groups(runs).len());
    if let Some(c) = charts::workload(runs) {
        charts.insert(at, ("workload".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::engine(runs) {
        charts.insert(at, ("engine".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::engine_waits(runs) {
        charts.insert(at, ("engine-waits".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::engine_memory(runs) {
        charts.insert(at, ("engine-memory".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::replication(runs) {
        charts.insert(at, ("replication".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::replication_lag(runs) {
        charts.insert(at, ("replication-lag".into(), PageChart::Time(c)));
        at += 1;
    }
    if let Some(c) = charts::trace(runs) {
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
table{border-collapse:collapse;margin:16px 0;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}td.stmt{font-family:monospace;font-size:12px;max-width:60em;word-break:break-word}\
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
                    if body.contains("class=\"verdict\"") {
                        h.raw(crate::verdict_render::STYLE);
                    }
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

/// One chart of chosen series (recorded or derived) over time, runs overlaid; `stack` stacks
/// the left axis's series.
pub fn plot(runs: &[Run], names: &[String], stack: bool) -> String {
    svg::render_time(&charts::plot(runs, names, stack))
}

/// The units of chosen series, in order of first use.
pub fn units_of(runs: &[Run], names: &[String]) -> Vec<String> {
    charts::units_of(runs, names)
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
pub(crate) fn iso_utc(unix_ms: u64) -> String {
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
    use crate::record_run::short_title;

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
