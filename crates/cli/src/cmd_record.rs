//! `plumb record`, `mark`, `report`, `plot`, `export`: 1-second recordings and their charts.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use plumb_load::units::parse_duration;
use plumb_report::record_render::{self, Run};
use plumb_store::Mark;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Time between samples.
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub interval: String,
    /// Stop after this long (default: until Ctrl-C, or until CMD exits).
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Also record this process and every process below it (a PostgreSQL postmaster and
    /// the backends it forks, new ones picked up): the tree's CPU, memory (PSS, swap), I/O and
    /// run-queue delay, the same per PostgreSQL role (backends, checkpointer, WAL writer…),
    /// and series of their own for the process and its first 16 members.
    #[arg(long = "pid", value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pids: Vec<u32>,
    /// Record only the --pid processes (and CMD) themselves, not what they start. (--trace
    /// always follows children: the kernel hands a traced process's mark to what it forks.)
    #[arg(long, conflicts_with = "trace")]
    pub no_children: bool,
    /// Record the database servers running here (PostgreSQL, MariaDB/MySQL, SQL Server, found
    /// by name as `plumb mem` finds them) as with --pid, without their PIDs.
    #[arg(long)]
    pub engine_server: bool,
    /// The file to record into (default: plumb-DATE-TIME.plumb here; with --serve, none unless
    /// given). Never overwritten.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Expose the live figures on http://ADDR/metrics for Prometheus (OpenMetrics, names from
    /// `plumb export FILE --list --format openmetrics`): PORT listens on 127.0.0.1 only,
    /// :PORT on every interface, or HOST:PORT. No file is kept unless --out is given.
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// A name for this run, shown when several recordings are overlaid.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Also record this database's counters and gauges (commits, block reads, WAL; sessions
    /// by state and wait, shared buffers clean and dirty, replication lag; MariaDB statements,
    /// buffer pool, row lock waits; SQL Server memory and grants): postgres://, mysql://,
    /// mssql://. Read about once a second when --interval is shorter. When the server runs
    /// here, add --engine-server (or its PID with --pid) for its processes.
    #[arg(long, value_name = "URL")]
    pub engine: Option<String>,
    /// Read the engine's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "engine")]
    pub password_file: Option<PathBuf>,
    /// Also count in the kernel what the recorded processes ask of it, every sample: syscalls
    /// and their time, fsync and fdatasync calls, faults, and the block requests their I/O
    /// causes (reads, writes, FLUSH, FUA). Follows each --pid's children and threads, or CMD's.
    /// Needs root (eBPF).
    #[arg(long)]
    pub trace: bool,
    /// Run this command, record it with the host while it runs, and stop when it exits.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The recording (in progress or finished).
    pub file: PathBuf,
    /// The mark's name, e.g. "checkpoint start".
    pub name: String,
    /// More about it, shown with the mark (e.g. "manual, after the index rebuild").
    #[arg(long)]
    pub detail: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Recordings; several are overlaid as runs.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The directory to write index.html into (created; an existing index.html there is not
    /// overwritten).
    #[arg(long, value_name = "DIR", default_value = "plumb-report")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Recordings; several are drawn as runs on the same axes.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Metric names (see `plumb export FILE --list`); repeat for several.
    #[arg(long = "metric", value_name = "NAME", required = true)]
    pub metrics: Vec<String>,
    /// The SVG file to write.
    #[arg(long, value_name = "FILE.svg")]
    pub out: PathBuf,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The recording.
    pub file: PathBuf,
    /// Only metrics whose name starts with one of these (e.g. disk.vda. or mem.).
    #[arg(long = "metric", value_name = "PREFIX")]
    pub metrics: Vec<String>,
    /// List the metric names with units instead of exporting (with --format openmetrics:
    /// the Prometheus names, types and units).
    #[arg(long)]
    pub list: bool,
    /// CSV in long form: a row per value (unix_ms, time in ISO 8601 UTC, metric, unit, object,
    /// value) and a row per mark, instead of a column per metric.
    #[arg(long, conflicts_with = "list")]
    pub long: bool,
    /// Write to FILE instead of standard output (whole or not at all: a failed export leaves
    /// no file, and an existing FILE is replaced only by a complete one).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// A recorder's `--interval` (100 ms or more) and `--duration`.
pub(crate) fn sampling(
    interval: &str,
    duration: Option<&str>,
) -> Result<(Duration, Option<Duration>)> {
    Ok(plumb_record::recorder::parse_sampling(interval, duration)?)
}

pub fn record(g: &GlobalArgs, a: &RecordArgs) -> Result<i32> {
    use plumb_record::recorder::{Event, RecordConfig, Recorder};
    use plumb_report::record_text;
    let (interval, duration) = sampling(&a.interval, a.duration.as_deref())?;
    let engine = a
        .engine
        .as_deref()
        .map(|url| crate::engine_target("--engine", url, a.password_file.as_deref()))
        .transpose()?;
    let recorder = Recorder::new(RecordConfig {
        root: g.root()?,
        interval,
        duration,
        pids: a.pids.clone(),
        children: !a.no_children,
        engine_servers: a.engine_server,
        engine,
        out: a.out.clone(),
        serve: a.serve.clone(),
        serve_render: plumb_report::openmetrics::live_render,
        name: a.name.clone(),
        trace: a.trace,
        command: a.cmd.clone(),
        command_line: crate::cmd_io::command_line(),
    })?;
    if let Some(f) = recorder.file() {
        // The file first: a bad --out must not leave the command running.
        plumb_report::out::check_new_file("--out", f)?;
    }
    plumb_load::signal::install();
    let mut events = |e: Event| match e {
        Event::Serving { addr } => eprintln!("plumb: {}", record_text::serving(addr)),
        Event::Recording {
            file,
            interval,
            slow,
            duration,
        } => eprintln!(
            "plumb: {}",
            record_text::recording(file, interval, slow, duration)
        ),
    };
    let summary = recorder.run_with(
        &mut events,
        &plumb_load::signal::stop_requested,
        &plumb_load::signal::forward_to,
    )?;
    for line in record_text::summary(&summary) {
        eprintln!("plumb: {line}");
    }
    Ok(summary.exit_code.unwrap_or(0))
}

pub fn mark(a: &MarkArgs) -> Result<i32> {
    let rec = plumb_store::read(&a.file)?;
    let t_ms = plumb_record::now_unix_ms().saturating_sub(rec.header.started_unix_ms);
    plumb_store::append_mark(
        &a.file,
        &Mark {
            t_ms,
            name: a.name.clone(),
            detail: a.detail.clone(),
        },
    )?;
    Ok(0)
}

fn load(files: &[PathBuf]) -> Result<Vec<plumb_store::Recording>> {
    let mut v = Vec::new();
    for f in files {
        let r = plumb_store::read(f)?;
        if let Some(d) = &r.damage {
            eprintln!(
                "plumb: {}: read up to offset {}: {} ({} samples kept)",
                f.display(),
                d.offset,
                d.reason,
                r.times_ms.len()
            );
        }
        v.push(r);
    }
    Ok(v)
}

fn label(r: &plumb_store::Recording, path: &Path, i: usize, n: usize) -> String {
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
fn runs_of<'a>(recs: &'a [plumb_store::Recording], files: &[PathBuf]) -> Vec<Run<'a>> {
    let mut labels: Vec<String> = recs
        .iter()
        .enumerate()
        .map(|(i, r)| label(r, &files[i], i, recs.len()))
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

pub fn report(a: &ReportArgs) -> Result<i32> {
    let recs = load(&a.files)?;
    let runs = runs_of(&recs, &a.files);
    let dir = plumb_report::out::out_dir("--out", &a.out)?;
    let index = a.out.join("index.html");
    let html = record_render::html(&runs);
    if let Err(e) = plumb_report::out::write_new("--out", &index, html.as_bytes()) {
        dir.remove(&["index.html"]);
        return Err(e.into());
    }
    println!("{}", index.display());
    Ok(0)
}

pub fn plot(a: &PlotArgs) -> Result<i32> {
    let recs = load(&a.files)?;
    let runs = runs_of(&recs, &a.files);
    for m in &a.metrics {
        if !runs
            .iter()
            .any(|r| plumb_analyze::series::find(&r.catalog, m).is_some())
        {
            bail!(
                "--metric {m}: not in the recording (list them with: plumb export {} --list)",
                a.files[0].display()
            );
        }
    }
    plumb_report::out::write_new(
        "--out",
        &a.out,
        record_render::plot(&runs, &a.metrics).as_bytes(),
    )?;
    println!("{}", a.out.display());
    Ok(0)
}

pub fn export(g: &GlobalArgs, a: &ExportArgs) -> Result<i32> {
    use std::io::Write;
    let recs = load(std::slice::from_ref(&a.file))?;
    let Some(path) = &a.out else {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::new(stdout.lock());
        let code = export_to(g, a, &recs[0], &mut out)?;
        out.flush()?;
        return Ok(code);
    };
    // Written beside FILE under a hidden name, then renamed over it when complete.
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("--out {}: not a file name", path.display()))?;
    let tmp = path.with_file_name(format!(
        ".{}.plumb-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let f = std::fs::File::create(&tmp).map_err(|e| anyhow!("--out {}: {e}", path.display()))?;
    let mut out = std::io::BufWriter::new(f);
    let done = export_to(g, a, &recs[0], &mut out).and_then(|code| {
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(code)
    });
    let done = done.and_then(|code| {
        std::fs::rename(&tmp, path).map_err(|e| anyhow!("--out {}: {e}", path.display()))?;
        Ok(code)
    });
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

fn export_to(
    g: &GlobalArgs,
    a: &ExportArgs,
    rec: &plumb_store::Recording,
    out: &mut dyn std::io::Write,
) -> Result<i32> {
    let recs = std::slice::from_ref(rec);
    if g.openmetrics() {
        return export_openmetrics(&recs[0], a, out);
    }
    let run = Run::new(&recs[0], label(&recs[0], &a.file, 0, 1));
    let metrics: Vec<_> = run
        .catalog
        .iter()
        .filter(|m| {
            a.metrics.is_empty() || a.metrics.iter().any(|p| m.name.starts_with(p.as_str()))
        })
        .cloned()
        .collect();
    if metrics.is_empty() && a.metrics.is_empty() {
        bail!(
            "{}: no metric plumb knows is in this recording: nothing to export",
            a.file.display()
        );
    }
    if metrics.is_empty() {
        bail!(
            "--metric {}: no metric in the recording starts with that",
            a.metrics.join(", ")
        );
    }
    if a.list {
        for m in &metrics {
            writeln!(out, "{:<40} {:<9} {}", m.name, m.unit, m.help)?;
        }
    } else if g.format() == plumb_report::Format::Json {
        if a.long {
            bail!("--long is a CSV form; JSON Lines already has a line per sample and per mark");
        }
        record_render::export_jsonl(&run, &metrics, out)?;
    } else {
        let (_, empty) = record_render::with_values(&run, &metrics);
        if a.long {
            record_render::export_long_csv(&run, &metrics, out)?;
        } else {
            record_render::export_csv(&run, &metrics, out)?;
        }
        if !empty.is_empty() {
            eprintln!(
                "plumb: {} metric(s) with no value in any sample left out: {}",
                empty.len(),
                empty.join(", ")
            );
        }
    }
    out.flush()?;
    Ok(0)
}

/// `plumb export --format openmetrics`: the recording's raw counters and gauges, in base units
/// with timestamps, for `promtool tsdb create-blocks-from openmetrics`.
fn export_openmetrics(
    rec: &plumb_store::Recording,
    a: &ExportArgs,
    out: &mut dyn std::io::Write,
) -> Result<i32> {
    use plumb_report::openmetrics as om;
    let cx = om::context_of(rec);
    let keep = om::starting_with(&a.metrics);
    if a.list {
        if om::write_list(out, rec, &cx, &keep)? == 0 {
            bail!("{}: no metric to export", a.file.display());
        }
        out.flush()?;
        return Ok(0);
    }
    let w = om::write_recording(&mut &mut *out, rec, &cx, &keep)?;
    out.flush()?;
    if w.series == 0 {
        bail!(
            "{}: no metric {}to export",
            a.file.display(),
            if a.metrics.is_empty() {
                String::new()
            } else {
                format!("starting with {} ", a.metrics.join(", "))
            }
        );
    }
    eprintln!(
        "plumb: {} series, {} samples as OpenMetrics (load them with: promtool tsdb create-blocks-from openmetrics FILE DIR)",
        w.series, w.samples
    );
    Ok(0)
}

#[derive(Debug, Args)]
pub struct CpuArgs {
    /// Also show this process's threads: CPU use and time runnable but waiting for a CPU.
    #[arg(long, value_name = "PID", value_parser = clap::value_parser!(u32).range(1..))]
    pub pid: Option<u32>,
    /// How long to watch before each report (e.g. 1s, 500ms).
    #[arg(long, value_name = "TIME", default_value = "1s")]
    pub interval: String,
    /// Keep going, one report per interval, until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

fn sched_sample(
    root: &plumb_sys::Root,
    pid: Option<u32>,
) -> Result<plumb_analyze::sched::SchedSample> {
    let threads = match pid {
        Some(p) => Some((
            p,
            plumb_sys::process::read_threads(root, p).map_err(|e| anyhow!("--pid {p}: {e}"))?,
        )),
        None => None,
    };
    Ok(plumb_analyze::sched::SchedSample {
        stat: plumb_sys::cpu::read_stat(root)?,
        schedstat: plumb_sys::cpu::read_schedstat(root).ok().flatten(),
        psi_cpu: plumb_sys::pressure::read_host(root)
            .ok()
            .flatten()
            .and_then(|p| p.cpu),
        threads,
        at: Instant::now(),
    })
}

pub fn cpu(g: &GlobalArgs, a: &CpuArgs) -> Result<i32> {
    let root = g.root()?;
    let interval = parse_duration(&a.interval).map_err(|e| anyhow!("--interval: {e}"))?;
    if interval < Duration::from_millis(100) {
        bail!("--interval {}: use 100ms or more", a.interval);
    }
    let hz = plumb_sys::host::clock_ticks_per_s().unwrap_or(100);
    plumb_load::signal::install();
    let mut prev = sched_sample(&root, a.pid)?;
    // The one watch loop: one report per interval, not drifting by what each one costs.
    use plumb_record::ticks::{self, First, Flow, Ticking};
    let ticking =
        Ticking::every(interval, &plumb_load::signal::stop_requested).first(First::AfterInterval);
    let mut code = 0;
    ticks::run(&ticking, |_| -> Result<Flow> {
        let cur = match sched_sample(&root, a.pid) {
            Ok(c) => c,
            Err(e) if a.watch => {
                eprintln!("plumb: {e:#}");
                code = 2;
                return Ok(Flow::Stop);
            }
            Err(e) => return Err(e),
        };
        let rep = plumb_analyze::sched::build(&prev, &cur, hz);
        crate::emit(g, &rep)?;
        if !a.watch {
            return Ok(Flow::Stop);
        }
        println!();
        prev = cur;
        Ok(Flow::Go)
    })?;
    Ok(code)
}
