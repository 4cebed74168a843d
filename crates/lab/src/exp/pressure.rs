//! pgbench again while `plumb mem pressure` holds memory inside the server's cgroup, limited to
//! shared_buffers + 256 MiB, with a zram swap device: what the server's memory does when the
//! host wants it back.

use super::{Context, Experiment, Outcome, Section};
use crate::error::{Context as _, Result};
use crate::resources::PressureChild;
use crate::{Interrupted, Plan, PressureSize};
use plumb_analyze::said::Said;
use plumb_analyze::WithFacts;
use plumb_record::PhaseKind;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The server's memory limit under pressure: shared_buffers and 256 MiB.
fn limit(plan: &Plan) -> u64 {
    plan.shared_buffers_bytes() + (256 << 20)
}

pub struct Pressure {
    pub size: PressureSize,
}

impl Experiment for Pressure {
    fn name(&self) -> &'static str {
        "memory pressure"
    }

    fn budget(&self, plan: &Plan) -> Duration {
        // Filling the pressure's memory is given up after two minutes.
        plan.experiment + Duration::from_secs(120)
    }

    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        // Filling it takes about a second per 250 MB here (269 MB in 1.4 s, with the zram
        // device's set-up: bench/results/lab-time-*.md).
        let hold = self.size.bytes(limit(plan));
        vec![
            plan.experiment + Duration::from_secs(1) + Duration::from_secs_f64(hold as f64 / 250e6),
        ]
    }

    fn run(&mut self, cx: &mut Context) -> Result<Outcome> {
        let phase_name = format!("{} under memory pressure", cx.workload_name());
        cx.progress.step(&format!("experiment: {phase_name}"));
        let shared_buffers = cx.plan.shared_buffers_bytes();
        let limit = limit(&cx.plan);
        let hold = self.size.bytes(limit);
        let zram = limit + hold;
        let cg = cx
            .resources
            .cgroup
            .as_ref()
            .ok_or_else(|| crate::Error::Refused(format!("no cgroup for the pressure")))?;
        let dir = cg
            .memory_dir()
            .ok_or_else(|| crate::Error::Refused(format!("no memory cgroup for the pressure")))?
            .to_path_buf();
        cg.set_memory_limit(Some(limit))
            .context("--pressure: limiting the server's cgroup")?;
        let (rx, err_text) = start_pressure(cx, hold, &dir, zram)?;
        // Wait until the pressure holds all of its memory.
        let t0 = Instant::now();
        let mut zram_dev = None;
        loop {
            cx.stopped()?;
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(v) => {
                    if v["kind"] == "mem_pressure_setup" {
                        zram_dev = v["zram_device"].as_str().map(str::to_string);
                    }
                    if v["kind"] == "mem_pressure_tick"
                        && v["touched_bytes"].as_u64().unwrap_or(0) >= hold
                    {
                        break;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let st = cx
                        .resources
                        .pressure
                        .take()
                        .and_then(|mut c| c.0.wait().ok());
                    crate::refuse!(
                        "--pressure: plumb mem pressure stopped ({}): {}",
                        st.map(|s| s.to_string()).unwrap_or_default(),
                        err_text.join().unwrap_or_default().trim()
                    );
                }
                Err(_) => {}
            }
            if t0.elapsed() > Duration::from_secs(120) {
                crate::refuse!(
                    "--pressure: the pressure program did not fill its memory within 120 s"
                );
            }
        }
        let phase = cx
            .recorder
            .begin(
                "memory pressure on",
                PhaseKind::Workload,
                Some(format!(
                    "limit {} MiB, pressure holds {} MiB",
                    limit >> 20,
                    hold >> 20
                )),
            )
            .renamed(phase_name.clone());
        let r = cx.rerun(cx.plan.experiment);
        // What the kernel says about the server's memory now, before the pressure goes.
        let ps = cx
            .server
            .local_pid
            .and_then(|pid| plumb_sys::process::read(&plumb_sys::Root::host(), pid).ok());
        let end = cx.recorder.mark("memory pressure off", None);
        if let Some(cg) = &cx.resources.cgroup {
            let _ = cg.set_memory_limit(None);
        }
        if let Some(c) = cx.resources.pressure.take() {
            c.stop();
        }
        let (mut p, explained) = r?.ok_or(Interrupted)?;
        p.scale = cx.plan.scale;
        let base = super::baseline(cx);
        let swap = swap_note(cx.server.kind, ps.as_ref(), shared_buffers);
        let notes = vec![super::compare_runs(&base, &p), swap];
        Ok(Outcome {
            section: Section::Experiments(vec![plumb_analyze::lab::Experiment {
                name: "memory pressure".into(),
                phase: phase_name,
                setting: Said::new("experiment-pressure")
                    .bytes("limit_bytes", limit as f64)
                    .bytes("held_bytes", hold as f64)
                    .text("swap_device", zram_dev.unwrap_or_else(|| "zram".into()))
                    .bytes("swap_bytes", zram as f64),
                baseline: Some(base),
                changed: Some(p),
                window: None,
                commits: Vec::new(),
                explained,
                notes,
            }]),
            phases: vec![cx.recorder.end_at(phase, end)],
        })
    }
}

/// `plumb mem pressure` started in the server's memory cgroup `dir`, holding `hold` bytes with
/// a zram swap of `zram` (its guard in the lab's resources): its JSON lines, and its stderr once
/// it ends.
fn start_pressure(
    cx: &mut Context,
    hold: u64,
    dir: &std::path::Path,
    zram: u64,
) -> Result<(
    std::sync::mpsc::Receiver<serde_json::Value>,
    std::thread::JoinHandle<String>,
)> {
    let exe = std::env::current_exe().context("finding plumb's own binary")?;
    let parent = std::process::id() as libc::pid_t;
    let mut child = {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(exe);
        // SIGTERM (its own clean stop: swap off, cgroup left) if the lab dies.
        // SAFETY: die_with_parent makes only async-signal-safe calls.
        unsafe {
            c.pre_exec(move || plumb_sys::ledger::die_with_parent(parent, libc::SIGTERM));
        }
        c.args(["--json", "mem", "pressure"])
            .arg(hold.to_string())
            .arg("--cgroup")
            .arg(&dir)
            .arg("--swap")
            .arg(format!("zram:{zram}"))
            .arg("--force")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("--pressure: cannot start plumb mem pressure")?
    };
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| crate::Error::Refused(format!("no stdout")))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| crate::Error::Refused(format!("no stderr")))?;
    let noted = plumb_sys::ledger::note_child(child.id(), "the memory pressure program");
    cx.resources.pressure = Some(PressureChild(child, noted));
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
        {
            if let Ok(v) = serde_json::from_str(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let err_text = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut s);
        s
    });
    Ok((rx, err_text))
}

/// What the kernel said about the server's swap under the pressure: PostgreSQL's
/// shared_buffers is shared memory, which VmSwap never counts; MariaDB's buffer pool is the
/// server's private memory, which it does.
fn swap_note(
    kind: plumb_engine::Kind,
    ps: Option<&plumb_sys::process::ProcessSample>,
    shared_buffers: u64,
) -> plumb_analyze::Note {
    let smaps_swap = ps
        .as_ref()
        .and_then(|s| s.smaps_rollup.as_ref())
        .and_then(|r| r.swap_bytes);
    let vm_swap = ps
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.vm_swap_bytes);
    let mut swap = if kind == plumb_engine::Kind::Postgres {
        plumb_analyze::Note::new(plumb_analyze::Level::Warn, "swap-hides-shared-memory")
            .bytes("shared_buffers_bytes", shared_buffers as f64)
    } else {
        plumb_analyze::Note::new(plumb_analyze::Level::Info, "server-swap")
    };
    if let Some(b) = smaps_swap {
        swap = swap.bytes("smaps_swap_bytes", b as f64);
    }
    if let Some(b) = vm_swap {
        swap = swap.bytes("vm_swap_bytes", b as f64);
    }
    swap
}
