//! `plumb delta` in the lab's shape: [`DeltaConfig`] → [`Delta::new`] (every check, before
//! anything starts) → [`Delta::run`]`(events, cancel)` → `DeltaReport` (numbers, from
//! `plumb_analyze::delta::summarize`; `plumb_report::delta_render` words it). The runs
//! themselves are [`runs`]'s.

mod runs;

pub use runs::{dir_error, DeltaPlan, Mode};
pub(crate) use runs::{private_target, Workload};

use crate::{Event, Events, Result};
use plumb_analyze::delta::DeltaReport;
use plumb_engine::{private, Target};
use plumb_sys::Root;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The workload as given: a statement (or several), a file of SQL, or a command.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadSpec {
    Sql(String),
    File(PathBuf),
    Cmd(Vec<String>),
}

/// What `plumb delta` measures, as the flags say it.
pub struct DeltaConfig {
    /// A server given by URL (its target, and the URL as typed); None: plumb's private
    /// PostgreSQL in `dir`.
    pub engine: Option<(Target, String)>,
    /// `--dir` as given. The private instance's directory (default: `private::default_dir`);
    /// with a URL that names the private instance running there, cold runs restart it.
    pub dir: Option<PathBuf>,
    /// Settings for the private instance when plumb starts it (NAME=VALUE).
    pub set: Vec<String>,
    /// The private instance's build, when plumb starts it.
    pub build: Option<private::Build>,
    pub workload: WorkloadSpec,
    pub plan: DeltaPlan,
    /// Waits under this many milliseconds are left out of the report (unless `all`).
    pub threshold_ms: f64,
    /// Every figure, zeros and small waits too.
    pub all: bool,
    /// Where the OS figures are read (a captured tree's do not move).
    pub root: Root,
}

/// A checked `plumb delta`, ready to run.
pub struct Delta {
    config: DeltaConfig,
    workload: Workload,
}

/// The largest file of SQL read (`--file`).
const MAX_SQL_FILE: u64 = 64 << 20;

impl Delta {
    /// Every check before anything starts: the flags that go together, the threshold, the
    /// workload (a statement that is not empty, a file of SQL that reads).
    pub fn new(config: DeltaConfig) -> Result<Delta> {
        let plan = &config.plan;
        if plan.trace && !plumb_sys::os::is_root() {
            crate::refuse!(
                "--trace needs root (plumb loads eBPF programs: CAP_BPF and CAP_PERFMON)"
            );
        }
        if plan.drop_host_cache && !plan.modes.contains(&Mode::Cold) {
            crate::refuse!("--drop-host-cache goes with --cold or --both (it empties the host's page cache before each cold run)");
        }
        if !(config.threshold_ms >= 0.0) {
            crate::refuse!(
                "--threshold {}: must be zero or more milliseconds",
                config.threshold_ms
            );
        }
        if config.engine.is_some() && !config.set.is_empty() {
            crate::refuse!("--set configures plumb's private instance when plumb starts it; with --engine the server is yours and keeps its settings (leave out --set)");
        }
        if config.engine.is_some() && config.build.is_some() {
            crate::refuse!("--bin-dir and --pg-version choose the build of plumb's private instance; with --engine the server is yours (leave them out)");
        }
        let workload = match &config.workload {
            WorkloadSpec::Sql(s) if s.trim().is_empty() => crate::refuse!("--sql: empty statement"),
            WorkloadSpec::Sql(s) => Workload::Sql(s.clone()),
            WorkloadSpec::File(f) => {
                let text = plumb_sys::read_text_bounded(f, MAX_SQL_FILE).map_err(|e| {
                    crate::Error::quoting(format!("--file {}: {e}", f.display()), e)
                })?;
                if text.trim().is_empty() {
                    crate::refuse!("--file {}: no SQL in it", f.display());
                }
                Workload::Sql(text)
            }
            WorkloadSpec::Cmd(c) if c.is_empty() => {
                crate::refuse!("no workload: give --sql, --file or a command after --")
            }
            WorkloadSpec::Cmd(c) => Workload::Cmd(c.clone()),
        };
        Ok(Delta { config, workload })
    }

    /// The target (the private instance started now if it does not run, and stopped after,
    /// removed too when this run made it), the runs, and the report. `events` hears each run
    /// begin (`Event::Step`, its planned time the mean of the runs before it, two seconds
    /// before the first ends), what the user should know (`Event::Note`) and the end
    /// (`Event::Finished`); `cancel` cancels the running statement (or signals the command)
    /// and ends it with `Interrupted`.
    pub fn run(
        self,
        events: &mut dyn Events,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Result<DeltaReport> {
        let c = &self.config;
        let (target, _stop_after) = match &c.engine {
            Some((target, url)) => (
                runs::url_target(target.clone(), url, c.dir.as_deref()),
                None,
            ),
            None => private_target(
                &c.dir.clone().unwrap_or_else(private::default_dir),
                &c.set,
                c.build.clone(),
                &mut |note| events.event(Event::Note(&note)),
            )?,
        };
        let started = Instant::now();
        let mut starting = |what: &str, k: usize, n: usize| {
            let per = if k == 0 {
                Duration::from_secs(2)
            } else {
                started.elapsed() / k as u32
            };
            events.event(Event::run_begins(k as u32, n as u32, what, per));
        };
        // Whatever failed after the cancel (a cancelled statement, a signalled command) is the
        // interruption.
        let runs = runs::run(
            &c.root,
            &target,
            &self.workload,
            &c.plan,
            cancel,
            &mut starting,
        )
        .map_err(|e| {
            if cancel() {
                crate::Interrupted.into()
            } else {
                e
            }
        })?;
        let n = c.plan.modes.len() as u32 * c.plan.repeat;
        events.event(Event::Finished { of: n });
        Ok(plumb_analyze::delta::summarize(
            target.shown.clone(),
            Some(runs.info),
            self.workload.describe(),
            c.plan.repeat as usize,
            runs.modes,
            runs.unavailable,
            c.threshold_ms,
            c.all,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workload: WorkloadSpec) -> DeltaConfig {
        DeltaConfig {
            engine: None,
            dir: None,
            set: Vec::new(),
            build: None,
            workload,
            plan: DeltaPlan {
                modes: vec![Mode::AsFound],
                repeat: 1,
                sample_every: Duration::from_millis(20),
                trace: false,
                drop_host_cache: false,
            },
            threshold_ms: 1.0,
            all: false,
            root: Root::host(),
        }
    }

    fn refused(c: DeltaConfig) -> String {
        match Delta::new(c) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn new_refuses_what_cannot_run_before_anything_starts() {
        let sql = || WorkloadSpec::Sql("SELECT 1".into());
        assert!(Delta::new(config(sql())).is_ok());
        // The workload: an empty statement, a file that is not there (named), no command.
        assert!(refused(config(WorkloadSpec::Sql("  ".into()))).contains("--sql: empty"));
        let missing = refused(config(WorkloadSpec::File("/nonexistent/q.sql".into())));
        assert!(
            missing.starts_with("--file /nonexistent/q.sql: "),
            "{missing}"
        );
        let d = tempfile::tempdir().unwrap();
        let blank = d.path().join("blank.sql");
        std::fs::write(&blank, "\n  \n").unwrap();
        assert!(refused(config(WorkloadSpec::File(blank))).contains("no SQL in it"));
        assert!(refused(config(WorkloadSpec::Cmd(vec![]))).contains("no workload"));
        // Flags that do not go together.
        let mut c = config(sql());
        c.plan.drop_host_cache = true;
        assert!(refused(c).contains("--drop-host-cache goes with --cold"));
        let mut c = config(sql());
        c.plan.drop_host_cache = true;
        c.plan.modes = vec![Mode::Cold, Mode::Warm];
        assert!(Delta::new(c).is_ok());
        let mut c = config(sql());
        c.threshold_ms = f64::NAN;
        assert!(refused(c).contains("--threshold"));
        let url = "postgres://app@127.0.0.1:1/db";
        let mut c = config(sql());
        c.engine = Some((Target::new(url), url.into()));
        c.set = vec!["shared_buffers=16MB".into()];
        assert!(refused(c).contains("leave out --set"));
        // Root's to trace; anyone else is told so.
        let mut c = config(sql());
        c.plan.trace = true;
        match Delta::new(c) {
            Ok(_) => assert!(plumb_sys::os::is_root()),
            Err(e) => assert!(e.to_string().contains("--trace needs root")),
        }
    }
}
