//! pgbench (TPC-B-like) on the lab's database: initialised at the plan's scale, then run with
//! two clients per CPU.

use super::{Context, Experiment, Outcome, Section};
use crate::Result;
use crate::{Interrupted, Plan};
use plumb_record::PhaseKind;
use std::time::{Duration, Instant};

pub struct Pgbench;

impl Experiment for Pgbench {
    fn name(&self) -> &'static str {
        "pgbench"
    }

    fn steps(&self) -> u32 {
        2
    }

    fn precondition(&self, cx: &Context) -> Option<String> {
        cx.workload_precondition()
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Initialising takes about a second per scale unit on a slow disk.
        plan.pgbench + Duration::from_secs(plan.scale as u64)
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Measured on the development VM: about 0.15 s per scale unit to initialise.
        vec![
            Duration::from_millis(500 + 150 * plan.scale as u64),
            plan.pgbench + Duration::from_millis(200),
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let scale = cx.plan.scale;
        let run = cx.lab_database()?.pgbench.clone();
        cx.progress
            .step(&format!("pgbench: initialising scale {scale}"));
        let init = cx.recorder.begin(
            "pgbench init",
            PhaseKind::Workload,
            Some(format!("scale {scale}")),
        );
        let t0 = Instant::now();
        run.init(scale, cx.cancel)?.ok_or(Interrupted)?;
        let init_s = t0.elapsed().as_secs_f64();
        let init = cx.recorder.end(init);
        cx.progress.step(&format!(
            "pgbench: {} clients for {}",
            run.clients,
            plumb_sys::units::format_duration(cx.plan.pgbench)
        ));
        let phase = cx
            .recorder
            .begin(
                "pgbench run",
                PhaseKind::Workload,
                Some(format!("{} clients, scale {scale}", run.clients)),
            )
            .renamed("pgbench".into());
        // PostgreSQL's own count of its I/O over the run (pg_stat_io from 16): a view the
        // server lacks, or a failed read, leaves the rest of the run's figures as they are.
        let mut obs = match cx.server.kind {
            plumb_engine::Kind::Postgres => plumb_engine::observer(&cx.server.target).ok(),
            _ => None,
        };
        let before = obs.as_mut().and_then(|o| o.snapshot().ok());
        let progress = &mut cx.progress;
        let mut p = run
            .run(cx.plan.pgbench, cx.cancel, &mut |t, l| progress.live(t, l))?
            .ok_or(Interrupted)?;
        if let (Some(o), Some(before)) = (obs.as_mut(), before) {
            // Backends report their I/O to pg_stat_io (16+) when idle, at most once a second.
            // Before 16 only the checkpointer's counts are read, which it reports as each
            // checkpoint ends: no wait.
            let major = plumb_engine::pg::major(&before.version).unwrap_or(0);
            if major >= 16 {
                std::thread::sleep(Duration::from_millis(1100));
            }
            if let Ok(after) = o.snapshot() {
                p.server_io = Some(plumb_analyze::lab::server_io(major, &before, &after));
            }
        }
        p.scale = scale;
        p.init_s = init_s;
        p.script = run.script.as_ref().map(|s| s.display().to_string());
        p.wal_sync_method = cx.server.wal_sync_method();
        p.database_bytes = cx
            .server
            .is_private()
            .then(|| crate::pgbench::dir_bytes(&cx.data_dir.join("base")));
        Ok(Outcome {
            section: Section::Pgbench(p),
            phases: vec![init, cx.recorder.end(phase)],
        })
    }
}
