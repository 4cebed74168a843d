//! A recording taken on a thread of its own while a long job (the lab) runs in the foreground,
//! and the job's phases marked on it.

use crate::{Collector, EngineSampler};
use crate::{Error, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What ran in a phase: plumb's own probe of the storage, or a database workload (the findings
/// about the server look at these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    Probe,
    Workload,
}

/// A span of the recording, in seconds since it started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Phase {
    pub name: String,
    pub kind: PhaseKind,
    pub start_s: f64,
    pub end_s: f64,
    /// Whether something else used the device or the CPUs during the phase, with the evidence
    /// (None: the phases are not watched).
    pub interference: Option<plumb_analyze::interference::Interference>,
}

/// A phase that has begun; [`Background::end`] closes it.
#[must_use = "a phase is closed with Background::end"]
pub struct OpenPhase {
    name: String,
    kind: PhaseKind,
    start_s: f64,
    watch: Option<crate::watch::Watch>,
}

impl OpenPhase {
    /// The same start under another name (the loops learn their name as they go).
    pub fn renamed(self, name: String) -> OpenPhase {
        OpenPhase { name, ..self }
    }

    /// The same phase (and watch) with the start the job measured itself.
    pub fn started_at(self, start_s: f64) -> OpenPhase {
        OpenPhase { start_s, ..self }
    }
}

pub struct Background {
    path: PathBuf,
    started_unix_ms: u64,
    engine: Arc<Mutex<EngineSampler>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<u64>>>,
    /// What each phase is watched for (see [`Background::watch_phases`]).
    scope: Option<crate::watch::Scope>,
    feed: crate::Feed,
}

impl Background {
    /// Start sampling now, every `schedule` tick, until [`Background::stop`] (or drop).
    pub fn start(mut collector: Collector, interval: Duration) -> Background {
        let path = collector.path().to_path_buf();
        let started_unix_ms = collector.started_unix_ms();
        let feed = collector.feed();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // The engine sampler is shared: the job points it at another database as it goes.
        let engine = Arc::new(Mutex::new(std::mem::replace(
            &mut collector.engine,
            EngineSampler::new(None),
        )));
        let eng = engine.clone();
        let handle = std::thread::spawn(move || -> Result<u64> {
            // One last sample when stopped, so the recording reaches the end of the job.
            let stopped = || flag.load(Ordering::Relaxed);
            let ticking = crate::ticks::Ticking::every(interval, &stopped).last_tick_on_cancel();
            crate::ticks::run(&ticking, |_| -> Result<crate::ticks::Flow> {
                // The shared sampler is lent to the collector for the sample, under the lock.
                match eng.lock() {
                    Ok(mut e) => {
                        std::mem::swap(&mut collector.engine, &mut e);
                        let r = collector.tick();
                        std::mem::swap(&mut collector.engine, &mut e);
                        r
                    }
                    Err(_) => collector.tick(),
                }?;
                Ok(crate::ticks::Flow::Go)
            })?;
            Ok(collector.samples)
        });
        Background {
            path,
            started_unix_ms,
            engine,
            stop,
            handle: Some(handle),
            scope: None,
            feed,
        }
    }

    /// Count this process's tree as the job's own in the phases watched from now on (a
    /// server the job started, which is not its child).
    pub fn also_own(&mut self, pid: u32) {
        if let Some(s) = self.scope.as_mut() {
            s.also_own.push(pid);
        }
    }

    /// Watch every phase begun from now on for interference: other processes' I/O on the
    /// scope's devices and their CPU, steal (see `plumb_analyze::interference`).
    pub fn watch_phases(&mut self, scope: crate::watch::Scope) {
        self.scope = Some(scope);
    }

    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Where the job sets its own values for the samples (a workload's transactions).
    pub fn feed(&self) -> crate::Feed {
        self.feed.clone()
    }

    /// Record this engine session's counters from the next sample on (None: no engine).
    pub fn set_engine(&self, obs: Option<Box<dyn plumb_engine::Observer>>) {
        if let Ok(mut e) = self.engine.lock() {
            match obs {
                Some(o) => e.replace(o),
                None => *e = EngineSampler::new(None),
            }
        }
    }

    fn now_ms(&self) -> u64 {
        crate::now_unix_ms().saturating_sub(self.started_unix_ms)
    }

    /// Seconds since the recording started.
    pub fn now_s(&self) -> f64 {
        self.now_ms() as f64 / 1000.0
    }

    /// Mark the recording now; returns the mark's time in seconds. A mark that cannot be
    /// written is reported, not fatal: the job goes on.
    pub fn mark(&self, name: &str, detail: Option<String>) -> f64 {
        let t_ms = self.now_ms();
        if let Err(e) = crate::append_mark(&self.path, t_ms, name, detail) {
            eprintln!("plumb: warning: cannot mark the recording: {e:#}");
        }
        t_ms as f64 / 1000.0
    }

    /// A phase begins now, marked with its name (and `detail`).
    pub fn begin(&self, name: &str, kind: PhaseKind, detail: Option<String>) -> OpenPhase {
        let start_s = self.mark(name, detail);
        OpenPhase {
            name: name.to_string(),
            kind,
            start_s,
            watch: self.scope.as_ref().map(crate::watch::Watch::start),
        }
    }

    /// A phase that began at a time of the caller's (no mark); its watch starts now.
    pub fn begin_at(&self, name: &str, kind: PhaseKind, start_s: f64) -> OpenPhase {
        OpenPhase {
            name: name.to_string(),
            kind,
            start_s,
            watch: self.scope.as_ref().map(crate::watch::Watch::start),
        }
    }

    /// The phase ends now.
    pub fn end(&self, p: OpenPhase) -> Phase {
        self.end_at(p, self.now_s())
    }

    /// The phase ended at `end_s`.
    pub fn end_at(&self, p: OpenPhase, end_s: f64) -> Phase {
        Phase {
            name: p.name,
            kind: p.kind,
            start_s: p.start_s,
            end_s,
            interference: p.watch.map(crate::watch::Watch::finish),
        }
    }

    /// Take the last sample and stop; the number of samples taken.
    pub fn stop(&mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let n = match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| Error::Panicked("the recorder thread"))?,
            None => Ok(0),
        };
        // Close the engine session: the server (or the scratch database) may go next.
        self.set_engine(None);
        n
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_background_recording_has_its_samples_marks_and_phases() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("r.plumb");
        let setup = crate::Setup {
            interval: Duration::from_millis(100),
            labels: [("run".to_string(), "t".to_string())].into_iter().collect(),
            command_line: "test".into(),
        };
        let c = crate::Collector::create(
            &path,
            plumb_sys::Root::host(),
            plumb_sys::rawsample::Scope {
                pids: vec![std::process::id()],
                children: false,
            },
            crate::EngineSampler::new(None),
            &setup,
        )
        .unwrap();
        // A recording is never made over a file.
        assert!(crate::Collector::create(
            &path,
            plumb_sys::Root::host(),
            plumb_sys::rawsample::Scope {
                pids: vec![],
                children: false
            },
            crate::EngineSampler::new(None),
            &setup
        )
        .is_err());
        let mut bg = Background::start(c, Duration::from_millis(100));
        let open = bg.begin("probe", PhaseKind::Probe, Some("detail".into()));
        std::thread::sleep(Duration::from_millis(450));
        let p = bg.end(open);
        let n = bg.stop().unwrap();
        assert_eq!((p.name.as_str(), p.kind), ("probe", PhaseKind::Probe));
        assert!(p.end_s - p.start_s >= 0.4, "{p:?}");
        let rec = plumb_store::read(&path).unwrap();
        assert_eq!(rec.times_ms.len() as u64, n);
        assert!(n >= 4, "{n} samples in 450 ms at 100 ms");
        assert_eq!(rec.marks[0].name, "probe");
        assert_eq!(rec.marks[0].detail.as_deref(), Some("detail"));
        assert_eq!(rec.header.labels["run"], "t");
        // The process's own figures are there.
        let me = format!("proc.{}.", std::process::id());
        assert!(rec.metrics.iter().any(|m| m.name.starts_with(&me)));
    }
}
