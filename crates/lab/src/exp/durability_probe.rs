//! What one durable write costs where the data and WAL live: the durability probe, and whether
//! data and WAL share a device.

use super::{Context, Experiment, Outcome, Section};
use crate::Result;
use crate::{Interrupted, Plan};
use plumb_analyze::lab::{Evidence, Finding, LabReport, Severity};
use plumb_analyze::said::{Said, WithFacts};
use plumb_record::PhaseKind;
use std::time::Duration;

/// Clean runs per mode.
const REPS: u32 = 2;

/// One watched run of one mode: its warm-up, its measured time and the watch's readings.
fn run_time(plan: &Plan) -> Duration {
    plan.durability_warmup + plan.durability_per_mode + Duration::from_millis(120)
}

#[derive(Default)]
pub struct Durability {
    /// The data's disks, filesystem source and type, when the WAL is on the same disks.
    shared: Option<(Vec<String>, String, String)>,
}

impl Experiment for Durability {
    fn name(&self) -> &'static str {
        "durability"
    }

    fn part(&self) -> Option<crate::Part> {
        Some(crate::Part::Storage)
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Every mode up to max_runs times, a warm-up and the watch's readings (about 0.12 s,
        // measured) each.
        run_time(plan)
            * (plumb_io::durability_probe::modes().len() as u32 * plan.max_runs.max(REPS))
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Two runs of every mode and a third of about half of them (bench/results/lab-time-*.md),
        // and half a second for opening the probe's file.
        let modes = plumb_io::durability_probe::modes().len() as u32;
        vec![
            run_time(plan) * (modes * REPS)
                + run_time(plan) * modes / 2
                + Duration::from_millis(500),
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        cx.progress.step("durability: what one durable write costs");
        let phase = cx
            .recorder
            .begin("durability probe", PhaseKind::Probe, None);
        let probe = crate::durability_probe::run(
            &plumb_io::durability_probe::ProbeOptions {
                // The work directory: on the data's filesystem for the private instance.
                path: cx.work.clone(),
                per_mode: cx.plan.durability_per_mode,
                warmup: cx.plan.durability_warmup,
                trace_devs: cx.trace_devs.clone(),
                keep: false,
            },
            &[8192],
            REPS,
            cx.plan.max_runs,
            &cx.config.accept,
            &mut |_, _, _| {},
            cx.cancel,
        );
        let wal = cx.data_dir.join("pg_wal");
        let report = match probe {
            Ok(p) => plumb_analyze::durability_probe::build(
                &p,
                if cx.server.is_private() {
                    wal.clone()
                } else {
                    cx.work.clone()
                },
                cx.storage.clone(),
                cx.plan.durability_per_mode.as_secs_f64(),
            ),
            Err(plumb_io::Error::Interrupted) => return Err(Interrupted.into()),
            Err(e) => {
                return Err(crate::Error::quoting(
                    format!("durability probe in {}", cx.work.display()),
                    e,
                ))
            }
        };
        // Where pg_wal really is (a link to another disk is the usual way to split them).
        let data_visible = cx.server.data_dir.as_ref().is_some_and(|d| d.exists());
        if data_visible && wal.exists() {
            let (wal_storage, _) = plumb_analyze::os::storage_under(&plumb_sys::Root::host(), &wal);
            if let (Some(d), Some(w)) = (&cx.storage, &wal_storage) {
                if !d.disks.is_empty() && d.disks == w.disks {
                    self.shared = Some((d.disks.clone(), d.source.clone(), d.fs_type.clone()));
                }
            }
        }
        Ok(Outcome {
            section: Section::Durability(report),
            phases: vec![cx.recorder.end(phase)],
        })
    }

    fn findings(&self, r: &LabReport) -> Vec<Finding> {
        let Some((disks, source, fs)) = &self.shared else {
            return Vec::new();
        };
        vec![Finding::new(Severity::Info, "data-and-wal-on-one-device")
            .count("disks", disks.len() as f64)
            .list("devices", disks.clone())
            .evidence(vec![Evidence::Said(
                Said::new("data-dir-on")
                    .text("dir", r.data_dir.display().to_string())
                    .text("source", source.clone())
                    .text("fs_type", fs.clone()),
            )])]
    }
}
