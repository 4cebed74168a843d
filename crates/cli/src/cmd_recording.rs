//! `plumb mark`, `report`, `plot`, `export`: what is done with a recording once made.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use plumb_report::record_render::{self, Run};
use plumb_store::Mark;
use std::path::PathBuf;

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
    /// Print the statements the recording followed (`plumb record --engine`), heaviest by
    /// execution time, with what each did between --from and --to, instead of writing the page.
    #[arg(long)]
    pub statements: bool,
    /// With --statements: from this far into the recording (default: its start).
    #[arg(long, value_name = "TIME", requires = "statements")]
    pub from: Option<String>,
    /// With --statements: up to this far into the recording (default: its end).
    #[arg(long, value_name = "TIME", requires = "statements")]
    pub to: Option<String>,
    /// With --statements: how many to show.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "statements")]
    pub top: usize,
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

pub fn report(g: &GlobalArgs, a: &ReportArgs) -> Result<i32> {
    let recs = load(&a.files)?;
    if a.statements {
        return crate::cmd_statements::statements(g, &a.from, &a.to, a.top, &recs);
    }
    let runs = record_render::runs_of(&recs, &a.files);
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
    let runs = record_render::runs_of(&recs, &a.files);
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
    let f = std::fs::File::create(&tmp)
        .map_err(|e| crate::quoting(format!("--out {}: {e}", path.display()), e))?;
    let mut out = std::io::BufWriter::new(f);
    let done = export_to(g, a, &recs[0], &mut out).and_then(|code| {
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(code)
    });
    let done = done.and_then(|code| {
        std::fs::rename(&tmp, path)
            .map_err(|e| crate::quoting(format!("--out {}: {e}", path.display()), e))?;
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
    let run = Run::new(&recs[0], record_render::run_label(&recs[0], &a.file, 0, 1));
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
