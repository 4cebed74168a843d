//! Random 8 KiB reads over queue depths (where latency outgrows throughput: the knee) and one
//! sequential read, on a file of random data in the work directory.

use super::{Context, Experiment, Outcome, Section};
use crate::error::Result;
use crate::{Interrupted, Plan};
use plumb_analyze::lab::{Evidence, Finding, LabReport, SeqRead, Severity};
use plumb_analyze::said::{Said, WithFacts};
use plumb_analyze::sweep::SweepKind;
use plumb_io::job::preset;
use plumb_record::PhaseKind;
use std::time::Duration;

pub struct Storage;

/// Clean runs per queue depth.
const REPS: u32 = 2;

/// One watched run: its warm-up, its measured time, opening the file and the watch's readings.
fn run_time(plan: &Plan) -> Duration {
    plan.sweep_warmup + plan.sweep_run + Duration::from_millis(60)
}

fn seq_time(plan: &Plan) -> Duration {
    plan.seq_run + Duration::from_millis(300)
}

/// Writing the probe file's random data: about 1 GB/s here.
fn file_time(plan: &Plan) -> Duration {
    Duration::from_secs_f64(plan.probe_file as f64 / 1e9)
}

impl Experiment for Storage {
    fn name(&self) -> &'static str {
        "queue-depth sweep"
    }

    fn part(&self) -> Option<crate::Part> {
        Some(crate::Part::Storage)
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Every queue depth up to max_runs times, the sequential read, the probe file.
        run_time(plan) * plan.sweep_qds.len() as u32 * plan.max_runs.max(REPS)
            + seq_time(plan)
            + file_time(plan)
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Two runs per queue depth and a third for about half of them (bench/results/lab-time-*.md).
        let levels = plan.sweep_qds.len() as u32;
        vec![
            run_time(plan) * levels * REPS
                + run_time(plan) * levels / 2
                + seq_time(plan)
                + file_time(plan),
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        cx.progress
            .step("random-read queue-depth sweep and sequential read");
        let phase = cx
            .recorder
            .begin("queue-depth sweep", PhaseKind::Probe, None)
            .renamed("storage sweep".into());
        let file = cx.work.join("plumb-lab-probe.dat");
        let mut base = preset("data-read")
            .ok_or_else(|| crate::Error::Refused(format!("no data-read preset")))?;
        base.targets = vec![file.clone()];
        base.file_size = cx.plan.probe_file;
        base.duration = cx.plan.sweep_run;
        base.warmup = cx.plan.sweep_warmup;
        let scratch = match plumb_io::target::scratch_file(
            &file,
            base.file_size,
            base.seed,
            false,
            cx.cancel,
        ) {
            Ok(s) => s,
            Err(plumb_io::Error::Interrupted) => return Err(Interrupted.into()),
            Err(e) => {
                return Err(crate::Error::quoting(
                    format!("creating {}", file.display()),
                    e,
                ))
            }
        };
        let safety = plumb_io::target::Safety {
            overwrite: vec![file.clone()],
            ..Default::default()
        };
        let levels = crate::sweep::qd_levels(&base, &cx.plan.sweep_qds);
        let sweep = crate::sweep::run(
            crate::sweep::Sweep {
                kind: SweepKind::QueueDepth,
                base: &base,
                levels: &levels,
                reps: REPS,
                max_runs: cx.plan.max_runs,
                safety: &safety,
                command_line:
                    "plumb lab (random 8 KiB reads, O_DIRECT, two clean runs per queue depth)",
                accept: &cx.config.accept,
            },
            cx.cancel,
            &mut |_, _, _| {},
        )?
        .ok_or(Interrupted)?;
        let mut seq = preset("backup-read")
            .ok_or_else(|| crate::Error::Refused(format!("no backup-read preset")))?;
        seq.targets = vec![file.clone()];
        seq.file_size = cx.plan.probe_file;
        seq.duration = cx.plan.seq_run;
        seq.warmup = Duration::from_millis(300);
        let r = crate::sweep::run_once(&seq, &safety, cx.cancel)?.ok_or(Interrupted)?;
        drop(scratch);
        let rep = plumb_analyze::sweep::rep_of(&r);
        Ok(Outcome {
            section: Section::Storage {
                sweep,
                seq_read: SeqRead {
                    block_size: seq.block_size,
                    queue_depth: seq.queue_depth * seq.threads,
                    bytes_per_s: rep.bytes_per_s,
                    lat_mean_ms: rep.lat_mean_s.map(|s| s * 1000.0),
                },
            },
            phases: vec![cx.recorder.end(phase)],
        })
    }

    /// The device past its knee during a workload (not during plumb's own probes).
    fn findings(&self, r: &LabReport) -> Vec<Finding> {
        // A disturbed sweep states no knee (its section and the verdict say so): nothing is
        // drawn from one.
        let Some(k) = r
            .sweep
            .as_ref()
            .filter(|s| s.verdict != plumb_analyze::interference::Verdict::Disturbed)
            .and_then(|s| s.knee.as_ref())
        else {
            return Vec::new();
        };
        // Past the knee means past every reading of it: beyond the range's upper end.
        let knee_qd: f64 = k.to.parse().unwrap_or(f64::INFINITY);
        let busiest = super::largest(
            r.windows
                .iter()
                .filter(|w| w.workload)
                .filter_map(|w| w.disk_queue_mean.map(|q| (q, &w.phase))),
        );
        let evidence = vec![Evidence::Said(
            Said::new("sweep-knee")
                .text("level", k.level.clone())
                .text("next", k.next.clone())
                .text("from", k.from.clone())
                .text("to", k.to.clone())
                .pct("throughput_change_pct", k.throughput_change_pct)
                .pct("latency_change_pct", k.latency_change_pct),
        )];
        let knee = |f: Finding| {
            f.count("knee_qd", knee_qd)
                .text("level", k.level.clone())
                .text("from", k.from.clone())
                .text("to", k.to.clone())
                .pct("throughput_change_pct", k.throughput_change_pct)
                .pct("latency_change_pct", k.latency_change_pct)
                .evidence(evidence.clone())
        };
        vec![match busiest {
            Some((q, phase)) if q > knee_qd => {
                knee(Finding::new(Severity::Warn, "device-past-knee"))
                    .count("queue_mean", q)
                    .text("phase", phase.clone())
                    .phases(vec![phase.clone()])
            }
            _ => knee(Finding::new(Severity::Info, "device-knee")),
        }]
    }
}
