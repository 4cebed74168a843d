//! `plumb io`: storage load tests shaped like database work.

pub use crate::cmd_io_args::*;
use crate::GlobalArgs;
use anyhow::Result;
use plumb_io::job::{EngineKind, Job};
use plumb_io::target::{self, Safety};
use plumb_report::verdict_render as vr;
use plumb_sys::units::{parse_duration, parse_size};
use std::path::PathBuf;
use std::time::Duration;

fn flag<T, E: std::error::Error + Send + Sync + 'static>(
    name: &str,
    r: std::result::Result<T, E>,
) -> Result<T> {
    r.map_err(|e| crate::quoting(format!("{name}: {e}"), e))
}

/// The command line as typed, quoted where a shell would need it, passwords masked (it goes
/// into reports and recordings).
pub fn command_line() -> String {
    crate::command_args()
        .into_iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Say which targets plumb is about to create, with their size and fate.
fn say_created(targets: &[PathBuf], size: u64, kept: bool) {
    for t in targets.iter().filter(|t| target::will_create(t, size)) {
        eprintln!(
            "plumb: creating {} ({} of random data; {})",
            t.display(),
            plumb_report::fmt::bytes(size),
            if kept {
                "kept afterwards (--keep)"
            } else {
                "removed afterwards"
            }
        );
    }
}

/// Prepare the targets, run the job watched for neighbours, and report it; created files are
/// removed when this returns (unless kept), including on error and Ctrl-C.
fn report_run(
    g: &GlobalArgs,
    j: Job,
    safety: &Safety,
    notes: Vec<String>,
    accept: &[plumb_analyze::interference::Accept],
) -> Result<i32> {
    plumb_sys::signal::install();
    let total = j.warmup + j.duration + j.cooldown;
    let devs = plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), &j.targets);
    let meter = crate::progress::Meter::new(&format!("plumb io {}", j.name), total, devs);
    let (targets, size) = (j.targets.clone(), j.file_size);
    let io = plumb_lab::sweep::IoRun::new(plumb_lab::sweep::IoRunConfig {
        job: j,
        safety: safety.clone(),
        notes,
        command_line: command_line(),
        accept: accept.to_vec(),
    })?;
    say_created(&targets, size, safety.keep);
    let r = io.run(
        &mut crate::progress::Drawn::plain(&meter),
        &plumb_sys::signal::stop_requested,
    );
    meter.close(r.is_ok());
    let rep = r.map_err(|e| {
        crate::every::stopped(e, "in-flight I/O drained and files plumb created removed")
    })?;
    crate::emit(g, &plumb_report::io_render::output(&rep))?;
    Ok(0)
}

pub fn run(g: &GlobalArgs, a: &IoArgs) -> Result<i32> {
    let accept = &a.accept.accept_neighbour;
    match &a.cmd {
        IoCmd::Run(r) => {
            let j = build_job(&r.job, r.targets.clone())?;
            report_run(g, j, &r.safety.safety(), Vec::new(), accept)
        }
        IoCmd::Diskspd(d) => {
            let p =
                plumb_io::diskspd::parse(&d.args).map_err(|e| crate::quoting(e.to_string(), e))?;
            let mut j = p.job;
            if let Some(e) = &d.ioengine {
                j.engine = flag("--ioengine", EngineKind::parse(e))?;
            }
            let mut notes = p.notes;
            notes.extend(fits_in_page_cache(&j));
            report_run(g, j, &d.safety.safety(), notes, accept)
        }
        IoCmd::Durability(d) => durability(g, d, accept),
        IoCmd::Sweep(a) => sweep(g, a, accept),
        IoCmd::Presets => {
            crate::emit(g, &plumb_analyze::io::preset_list())?;
            Ok(0)
        }
    }
}

fn durability(
    g: &GlobalArgs,
    a: &DurabilityArgs,
    accept: &[plumb_analyze::interference::Accept],
) -> Result<i32> {
    use plumb_lab::durability_probe::{DurabilityPlan, DurabilityResult};
    plumb_sys::signal::install();
    let per_mode = if a.quick {
        std::time::Duration::from_millis(500)
    } else {
        flag(
            "--duration",
            parse_duration(a.duration.as_deref().unwrap_or("1s")),
        )?
    };
    let mut sizes = Vec::new();
    for b in a.bs.split(',') {
        sizes.push(flag("--bs", parse_size(b))?);
    }
    let mut plan = DurabilityPlan::new(&a.paths, per_mode, &sizes, a.reps, a.keep)?;
    plan.accept = accept.to_vec();
    let planned = plan.per_run() * plan.runs().max(1);
    let devs = plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), &a.paths);
    let meter = crate::progress::Meter::new("plumb io durability", planned, devs);
    let r = plan.run(
        &mut crate::progress::Drawn::plain(&meter),
        &plumb_sys::signal::stop_requested,
    );
    meter.close(r.is_ok());
    match r.map_err(|e| crate::every::stopped(e, "the probe files were removed"))? {
        DurabilityResult::One(rep) => crate::emit(g, &vr::durability_output(&rep))?,
        DurabilityResult::Many(c) => crate::emit(g, &vr::comparison_output(&c))?,
    }
    Ok(0)
}

/// The chart's file, made now: a bad path fails before the sweep, not after it (and it is
/// removed again if the sweep does not finish). None with --no-chart.
fn reserve_chart(a: &SweepArgs) -> Result<Option<plumb_report::out::Reserved>> {
    if a.no_chart {
        return Ok(None);
    }
    let path = match &a.chart {
        Some(p) => p.clone(),
        None => PathBuf::from(format!("plumb-sweep-{}.svg", plumb_record::stamp())),
    };
    Ok(Some(plumb_report::out::Reserved::new("--chart", &path)?))
}

fn sweep(
    g: &GlobalArgs,
    a: &SweepArgs,
    accept: &[plumb_analyze::interference::Accept],
) -> Result<i32> {
    plumb_sys::signal::install();
    // Shorter runs than a single test unless the user says otherwise.
    let mut flags = a.job.clone();
    flags.duration.get_or_insert_with(|| "5s".into());
    flags.warmup.get_or_insert_with(|| "1s".into());
    let base = build_job(&flags, a.targets.clone())?;
    let devs = plumb_lab::sweep::devices_under(&plumb_sys::Root::host(), &base.targets);
    let (targets, size) = (base.targets.clone(), base.file_size);
    let sweep = plumb_lab::sweep::IoSweep::new(plumb_lab::sweep::SweepConfig {
        base,
        rates: a.rates.clone(),
        qd_levels: a.qd_levels.clone(),
        reps: a.reps,
        safety: a.safety.safety(),
        keep: a.safety.keep,
        command_line: command_line(),
        accept: accept.to_vec(),
    })?;
    let chart = reserve_chart(a)?;
    say_created(&targets, size, a.safety.keep);
    let meter = crate::progress::Meter::new("plumb io sweep", Duration::ZERO, devs);
    let swept = sweep.run(
        &mut crate::progress::Drawn::plain(&meter),
        &plumb_sys::signal::stop_requested,
    );
    meter.close(swept.is_ok());
    let mut rep =
        swept.map_err(|e| crate::every::stopped(e, "files plumb created were removed"))?;
    if let Some(chart) = chart {
        let svg = plumb_report::io_render::sweep_chart(&rep);
        rep.chart = Some(chart.fill(svg.as_bytes())?);
    }
    crate::emit(g, &vr::sweep_output(&rep))?;
    Ok(0)
}
