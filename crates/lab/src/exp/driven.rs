//! The lab's workloads on plumb's own driver (`plumb load` as a library), for the engines
//! pgbench does not speak: pgbench's TPC-B-like transaction at the plan's scale with two
//! clients a CPU, then the insert/commit loops (single-row commits and 10,000-row
//! transactions, each round ended by the engine's nearest thing to a checkpoint). Each runs in
//! a database the load creates and drops.

use super::{Context, Experiment, Outcome, Section};
use crate::load::{LoadConfig, LoadEvent};
use crate::{Interrupted, Plan, Result};
use plumb_analyze::load::LoadReport;
use plumb_engine::oltp::Workload;
use plumb_record::{OpenPhase, Phase, PhaseKind};
use std::time::Duration;

/// The workload (for a script: pgbench's tables it runs on), the user's script if any, and
/// whether the insert loops follow (MariaDB's lab; PostgreSQL's has its own loops).
pub struct Driven {
    pub workload: Workload,
    pub script: Option<std::path::PathBuf>,
    pub loops: bool,
}

impl Driven {
    /// What runs, for the progress line and the phases.
    fn label(&self) -> &'static str {
        if self.script.is_some() {
            "script"
        } else {
            self.workload.name()
        }
    }

    fn scale(&self, plan: &Plan) -> u32 {
        crate::LabWorkload::scale(self.workload, plan.scale)
    }
}

/// How long each insert loop runs: a third of the workload's time, at least 3 s.
fn loop_time(plan: &Plan) -> Duration {
    (plan.pgbench / 3).max(Duration::from_secs(3))
}

impl Experiment for Driven {
    fn name(&self) -> &'static str {
        "workload and insert/commit loops (plumb's driver)"
    }

    fn steps(&self) -> u32 {
        if self.loops {
            3
        } else {
            2
        }
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        self.expected(plan).iter().sum::<Duration>() * 2
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Loading about 0.3 s a scale unit of pgbench's tables on MariaDB (a quiet host,
        // scale 5: 1.5 s), about 5 s a warehouse; each loop its time and a second around it
        // (creating and dropping its database).
        let scale = self.scale(plan) as u64;
        let load = match self.workload {
            Workload::OrderEntry => Duration::from_secs(2 + 5 * scale),
            _ => Duration::from_millis(1000 + 300 * scale),
        };
        let mut v = vec![load, plan.pgbench + Duration::from_millis(500)];
        if self.loops {
            v.push((loop_time(plan) + Duration::from_secs(1)) * 2);
        }
        v
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let cpus = cx.host.cpu.online_cpus.unwrap_or(1).max(1);
        let scale = self.scale(&cx.plan);
        let clients = cx.config.clients.unwrap_or((cpus * 2).min(32));
        let label = self.label();
        let base = LoadConfig {
            target: Some(cx.server.target.clone()),
            allow_writes: true,
            dir: cx.work.clone(),
            set: Vec::new(),
            build: None,
            // Not the name pgbench's database takes (PostgreSQL's loops use that one).
            database: if cx.server.is_private() {
                "plumb_lab_load".into()
            } else {
                format!("plumb_lab_load_{}", std::process::id())
            },
            workload: self.workload,
            scale,
            clients,
            rampup: Duration::ZERO,
            duration: cx.plan.pgbench,
            rate: cx.config.rate,
            max_tries: 1,
            threads: None,
            keep: false,
            drop_kept: false,
            check: true,
            seed: 1,
            record: None,
            command_line: cx.config.command_line.clone(),
            accept: cx.config.accept.clone(),
            explain: cx.config.explain,
        };
        cx.progress
            .step(&format!("{label} (plumb's driver): loading scale {scale}"));
        let mut phases = Vec::new();
        let run_step = format!("{clients} clients for {}", fmt(cx.plan.pgbench));
        // The experiments (pressure, throttle) run the workload again: its database is kept
        // until the lab ends.
        let again = self.script.is_none()
            && (cx.config.pressure.is_some() || cx.config.throttle_writes.is_some());
        let first = match &self.script {
            None if again => {
                let keep = LoadConfig {
                    keep: true,
                    ..base.clone()
                };
                let load = format!("{label} load");
                // The database this run creates is the lab's to drop, when the lab ends.
                let mut made = None;
                let r = drive(
                    cx,
                    &keep,
                    &load,
                    label,
                    &run_step,
                    &mut phases,
                    Some(&mut made),
                );
                if made.is_some() {
                    cx.resources.driver_db = made;
                }
                let r = r?;
                cx.driver_rerun = Some(LoadConfig {
                    check: false,
                    ..keep
                });
                r
            }
            None => drive(
                cx,
                &base,
                &format!("{label} load"),
                label,
                &run_step,
                &mut phases,
                None,
            )?,
            Some(path) => run_script(cx, &base, path, &run_step, &mut phases)?,
        };
        let mut reports = vec![first];
        if self.loops {
            cx.progress.step("insert/commit loops (plumb's driver)");
            for w in [Workload::InsertSingle, Workload::InsertBulk] {
                cx.stopped()?;
                let c = LoadConfig {
                    workload: w,
                    // Not the workload's, which the experiments may keep.
                    database: format!("{}_loops", base.database),
                    scale: 1,
                    clients: 1,
                    rate: None,
                    duration: loop_time(&cx.plan),
                    check: false,
                    ..base.clone()
                };
                reports.push(drive(cx, &c, "", w.name(), "", &mut phases, None)?);
            }
        }
        Ok(Outcome {
            section: Section::Workloads(reports),
            phases,
        })
    }
}

/// The user's file of statements on pgbench's tables, loaded at the lab's scale first.
fn run_script(
    cx: &mut Context,
    base: &LoadConfig,
    path: &std::path::Path,
    run_step: &str,
    phases: &mut Vec<Phase>,
) -> Result<LoadReport> {
    let statements = crate::script::read(path, base.scale)?;
    let loading = cx.recorder.begin(
        "script load",
        PhaseKind::Workload,
        Some(format!("pgbench's tables, scale {}", base.scale)),
    );
    let loaded = crate::load::load_only(base, &mut |_| {}, cx.cancel)?;
    phases.push(cx.recorder.end(loading));
    cx.progress
        .step(&format!("script (plumb's driver): {run_step}"));
    let (no_password, password) = plumb_engine::secret::split_password(&loaded.target().url);
    let mut target =
        plumb_engine::Target::new(&crate::server::with_database(&no_password, loaded.name()));
    target.password = loaded.target().password.clone().or(password);
    let window = cx.recorder.begin(
        "script",
        PhaseKind::Workload,
        Some(format!("{} client(s), plumb's driver", base.clients)),
    );
    // The engine's own count of transactions over the run, as plumb load reads it.
    let mut admin = plumb_engine::oltp::server::Admin::connect(loaded.target())?;
    let x0 = admin.transactions(loaded.name())?;
    let progress = &mut cx.progress;
    let mut r = crate::script::run(
        crate::script::ScriptRun {
            target: &target,
            statements,
            clients: base.clients,
            duration: base.duration,
            rate: base.rate,
        },
        &mut |s| {
            let done: u64 = s.done.iter().sum();
            progress.live_as("script", done as f64, None);
        },
        cx.cancel,
    )?;
    phases.push(cx.recorder.end(window));
    let x1 = admin.transactions(loaded.name())?;
    r.tpm = plumb_analyze::load::per_minute(x1 - x0, r.window_s);
    r.tpm_source = admin.tpm_source().into();
    r.engine = loaded.engine.into();
    r.version = loaded.version.clone();
    r.target = cx.server.target.shown();
    r.database = loaded.name().to_string();
    r.scale = base.scale;
    r.load_s = Some(loaded.load_s);
    r.workload = format!("script {}", path.display());
    Ok(r)
}

fn fmt(d: Duration) -> String {
    plumb_sys::units::format_duration(d)
}

/// One `plumb load` run: its loading (if `load_phase` is named) and its timed window as the
/// lab's phases, its seconds as the live figure.
fn drive(
    cx: &mut Context,
    c: &LoadConfig,
    load_phase: &str,
    run_phase: &str,
    run_step: &str,
    phases: &mut Vec<Phase>,
    hand: Option<&mut Option<crate::server_db::ServerDb>>,
) -> Result<LoadReport> {
    let recorder = &cx.recorder;
    let progress = &mut cx.progress;
    let mut loading: Option<OpenPhase> = (!load_phase.is_empty()).then(|| {
        recorder.begin(
            load_phase,
            PhaseKind::Workload,
            Some(format!("scale {}", c.scale)),
        )
    });
    let mut window: Option<OpenPhase> = None;
    let name = c.workload.name();
    let mut on = |e: LoadEvent<'_>| match e {
        LoadEvent::Driving => {
            if let Some(p) = loading.take() {
                phases.push(recorder.end(p));
                progress.step(&format!("{name} (plumb's driver): {run_step}"));
            }
        }
        LoadEvent::WindowStart => {
            window = Some(recorder.begin(
                run_phase,
                PhaseKind::Workload,
                Some(format!("{} client(s), plumb's driver", c.clients)),
            ))
        }
        LoadEvent::WindowEnd => {
            if let Some(p) = window.take() {
                phases.push(recorder.end(p));
            }
        }
        LoadEvent::Second(s) => {
            let done: u64 = s.done.iter().sum();
            progress.live_as(
                name,
                done as f64,
                s.p95_us.map(|u| ("p95", u as f64 / 1000.0)),
            );
        }
        _ => {}
    };
    let r = match hand {
        Some(slot) => crate::load::run_handing(c, &mut on, cx.cancel, slot),
        None => crate::load::run(c, &mut on, cx.cancel),
    };
    match r {
        Ok(r) => Ok(r),
        Err(e) if e.is_interrupted() => Err(Interrupted.into()),
        Err(e) => Err(e),
    }
}
