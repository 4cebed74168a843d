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

pub struct Driven;

/// How long each insert loop runs: a third of the workload's time, at least 3 s.
fn loop_time(plan: &Plan) -> Duration {
    (plan.pgbench / 3).max(Duration::from_secs(3))
}

impl Experiment for Driven {
    fn name(&self) -> &'static str {
        "workload and insert/commit loops (plumb's driver)"
    }

    fn steps(&self) -> u32 {
        3
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        plan.pgbench + Duration::from_secs(plan.scale as u64) + loop_time(plan) * 2 * 2
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Loading about 0.3 s a scale unit on MariaDB (a quiet host, scale 5: 1.5 s); each
        // loop its time and a second around it (creating and dropping its database).
        vec![
            Duration::from_millis(1000 + 300 * plan.scale as u64),
            plan.pgbench + Duration::from_millis(500),
            (loop_time(plan) + Duration::from_secs(1)) * 2,
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let cpus = cx.host.cpu.online_cpus.unwrap_or(1).max(1);
        let scale = cx.plan.scale;
        let clients = (cpus * 2).min(32);
        let base = LoadConfig {
            target: Some(cx.server.target.clone()),
            allow_writes: true,
            dir: cx.work.clone(),
            set: Vec::new(),
            build: None,
            database: if cx.server.is_private() {
                "plumb_lab".into()
            } else {
                format!("plumb_lab_{}", std::process::id())
            },
            workload: Workload::TpcB,
            scale,
            clients,
            rampup: Duration::ZERO,
            duration: cx.plan.pgbench,
            rate: None,
            max_tries: 1,
            keep: false,
            check: true,
            seed: 1,
            record: None,
            command_line: cx.config.command_line.clone(),
        };
        cx.progress
            .step(&format!("tpcb (plumb's driver): loading scale {scale}"));
        let mut phases = Vec::new();
        let tpcb = drive(
            cx,
            &base,
            "tpcb load",
            "tpcb",
            &format!("{clients} clients for {}", fmt(cx.plan.pgbench)),
            &mut phases,
        )?;
        let mut reports = vec![tpcb];
        cx.progress.step("insert/commit loops (plumb's driver)");
        for w in [Workload::InsertSingle, Workload::InsertBulk] {
            cx.stopped()?;
            let c = LoadConfig {
                workload: w,
                scale: 1,
                clients: 1,
                duration: loop_time(&cx.plan),
                check: false,
                ..base.clone()
            };
            reports.push(drive(cx, &c, "", w.name(), "", &mut phases)?);
        }
        Ok(Outcome {
            section: Section::Workloads(reports),
            phases,
        })
    }
}

fn fmt(d: Duration) -> String {
    plumb_load::units::format_duration(d)
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
    let r = crate::load::run(
        c,
        &mut |e| match e {
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
                progress.live_as(name, done as f64, None);
            }
            _ => {}
        },
        cx.cancel,
    );
    match r {
        Ok(r) => Ok(r),
        Err(e) if e.is_interrupted() => Err(Interrupted.into()),
        Err(e) => Err(e),
    }
}
