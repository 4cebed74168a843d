//! `plumb export`: a recording's series as CSV, JSON Lines or OpenMetrics.

use crate::cmd_recording::load;
use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::Args;
use plumb_report::record_render::{self, Run};
use std::path::PathBuf;

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
