//! `plumb mark`, `report`, `plot`, `export`: what is done with a recording once made.

use crate::GlobalArgs;
use anyhow::{bail, Result};
use clap::Args;
use plumb_report::record_render;
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
    /// Series computed from recorded ones, charted first on the page.
    #[command(flatten)]
    pub derived: SeriesArgs,
}

/// Series computed from recorded ones, for `plumb plot` and `plumb report`.
#[derive(Debug, Args)]
pub struct SeriesArgs {
    /// A series computed from recorded ones: 'NAME = EXPRESSION' with + - * /, parentheses,
    /// numbers, recorded series' names (or earlier --series) and rate(…), the change per second;
    /// e.g. 'used_bytes = mem.total_bytes - mem.free_bytes'. Repeat for several; quote a name
    /// with '-' in it ("disk.dm-0.read_iops").
    #[arg(long = "series", value_name = "'NAME = EXPR'")]
    pub series: Vec<String>,
    /// Stack the series on the left axis as areas (one recording's).
    #[arg(long)]
    pub stack: bool,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Recordings; several are drawn as runs on the same axes.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Series to draw (see `plumb export FILE --list`, or a --series NAME); repeat for several.
    /// A second unit goes on the right-hand axis.
    #[arg(
        long = "metric",
        value_name = "NAME",
        required_unless_present = "series"
    )]
    pub metrics: Vec<String>,
    #[command(flatten)]
    pub derived: SeriesArgs,
    /// The SVG file to write.
    #[arg(long, value_name = "FILE.svg")]
    pub out: PathBuf,
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

pub(crate) fn load(files: &[PathBuf]) -> Result<Vec<plumb_store::Recording>> {
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
    let mut runs = record_render::runs_of(&recs, &a.files);
    record_render::derive_all(&mut runs, &a.derived.series)?;
    let dir = plumb_report::out::out_dir("--out", &a.out)?;
    let index = a.out.join("index.html");
    let verdicts = record_render::verdicts(&runs);
    let html = record_render::html_with(&runs, a.derived.stack, &verdicts);
    if let Err(e) = plumb_report::out::write_new("--out", &index, html.as_bytes()) {
        dir.remove(&["index.html"]);
        return Err(e.into());
    }
    let r = plumb_report::verdict_render::RecordReport {
        index,
        verdict: plumb_report::verdict_render::RecordVerdicts { runs: verdicts },
    };
    plumb_report::emit(&r, g.format(), &mut std::io::stdout().lock())?;
    Ok(0)
}

pub fn plot(a: &PlotArgs) -> Result<i32> {
    let recs = load(&a.files)?;
    let mut runs = record_render::runs_of(&recs, &a.files);
    record_render::derive_all(&mut runs, &a.derived.series)?;
    let mut names = a.metrics.clone();
    names.extend(a.derived.series.iter().filter_map(|s| {
        Some(s.split_once('=')?.0.trim().to_string()).filter(|n| !names_has(&a.metrics, n))
    }));
    for m in &a.metrics {
        if !runs.iter().any(|r| r.has(m)) {
            bail!(
                "--metric {m}: not in the recording (list them with: plumb export {} --list)",
                a.files[0].display()
            );
        }
    }
    let units = record_render::units_of(&runs, &names);
    if units.len() > 2 {
        bail!(
            "the series are in {} units ({}): a chart has two axes; plot them in two charts",
            units.len(),
            units.join(", ")
        );
    }
    if a.derived.stack && runs.len() > 1 {
        bail!("--stack stacks one recording's series; plot the recordings one at a time");
    }
    plumb_report::out::write_new(
        "--out",
        &a.out,
        record_render::plot(&runs, &names, a.derived.stack).as_bytes(),
    )?;
    println!("{}", a.out.display());
    Ok(0)
}

fn names_has(v: &[String], n: &str) -> bool {
    v.iter().any(|x| x == n)
}
