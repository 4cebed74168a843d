//! pgbench again with the server's writes to the data disk throttled through the cgroup io
//! (v2) or blkio (v1) controller, once per rate.

use super::{Context, Experiment, Outcome, Section};
use crate::error::{Context as _, Result};
use crate::{Interrupted, Plan, Rate};
use plumb_analyze::said::{Said, WithFacts};
use plumb_record::PhaseKind;
use std::time::Duration;

pub struct Throttle {
    pub rates: Vec<Rate>,
}

impl Experiment for Throttle {
    fn name(&self) -> &'static str {
        "write throttle"
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // pgbench at each rate, and about a second and a half to set the limit and settle
        // (10.6 s for a 10 s run: bench/results/lab-time-*.md).
        (plan.experiment + Duration::from_millis(1500)) * self.rates.len() as u32
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let step = format!(
            "experiment: {} with the server's writes throttled",
            cx.workload_name()
        );
        cx.progress.step(&step);
        let dev = cx.trace_devs.first().copied().ok_or_else(|| {
            crate::Error::Refused(format!(
                "--throttle-writes: no disk found under {}",
                cx.data_dir.display()
            ))
        })?;
        let base = super::baseline(cx);
        let mut experiments = Vec::new();
        let mut phases = Vec::new();
        for Rate { label, bytes_per_s } in &self.rates {
            // Start clean: no dirty data left from the loops for the throttled writeback to
            // drag behind the WAL (ext4's ordered mode makes a commit wait for it).
            let checkpoint = match cx.server.kind {
                plumb_engine::Kind::Mariadb => plumb_engine::oltp::maria::CHECKPOINT,
                _ => "CHECKPOINT",
            };
            plumb_engine::session(&cx.server.target)
                .and_then(|mut s| s.execute(checkpoint))
                .context("a checkpoint before the write throttle")?;
            plumb_sys::os::sync_all();
            cx.resources
                .cgroup
                .as_ref()
                .ok_or_else(|| crate::Error::Refused(format!("no cgroup for the throttle")))?
                .set_write_bps(dev, Some(*bytes_per_s as u64))
                .with_context(|| format!("--throttle-writes {label}"))?;
            let name = format!("{}, writes throttled to {label}", cx.workload_name());
            let open = cx
                .recorder
                .begin(
                    "write throttle",
                    PhaseKind::Workload,
                    Some(format!("{label} on {dev}")),
                )
                .renamed(name.clone());
            let r = cx.rerun(cx.plan.experiment);
            let end = cx.recorder.mark("write throttle lifted", None);
            if let Some(cg) = cx.resources.cgroup.as_ref() {
                cg.set_write_bps(dev, None)
                    .context("lifting the write throttle")?;
            }
            let (mut p, explained) = r?.ok_or(Interrupted)?;
            p.scale = cx.plan.scale;
            phases.push(cx.recorder.end_at(open, end));
            experiments.push(plumb_analyze::lab::Experiment {
                name: "write throttle".into(),
                phase: name,
                setting: Said::new("experiment-throttle")
                    .text("disk", cx.disk.clone().unwrap_or_default())
                    .text("device", dev.to_string())
                    .text("rate", label.clone()),
                notes: vec![super::compare_runs(&base, &p)],
                baseline: Some(base.clone()),
                changed: Some(p),
                window: None,
                commits: Vec::new(),
                explained,
            });
        }
        Ok(Outcome {
            section: Section::Experiments(experiments),
            phases,
        })
    }
}
