//! `plumb mem` as a stage: the memory of the host, the engines and the processes asked for,
//! with each engine's belief about its cache beside it (the server's own figure with an
//! engine connection), from two samples an interval apart, once or on the one watch loop.

use crate::ticks::{self, First, Flow, Ticking};
use crate::{Error, Result};
use plumb_analyze::mem::MemReport;
use plumb_sys::memsnap::MemSample;
use plumb_sys::Root;
use std::time::Duration;

/// What to look at, as the user asked for it.
pub struct MemConfig {
    pub root: Root,
    /// Processes named by `--pid`.
    pub pids: Vec<u32>,
    /// Find postgres, mariadbd/mysqld and sqlservr by name.
    pub find_engines: bool,
    /// Ask this server what its cache holds instead of taking its configured size.
    pub engine: Option<plumb_engine::Target>,
    pub interval: Duration,
}

/// The first sample taken and the engine connected.
pub struct MemWatch {
    cfg: MemConfig,
    live: Option<Box<dyn plumb_engine::Observer>>,
    prev: MemSample,
}

impl MemWatch {
    /// Connect the engine (when asked) and take the first sample: a `--pid` that is not a
    /// process is an error naming it.
    pub fn new(cfg: MemConfig) -> Result<MemWatch> {
        let live = match &cfg.engine {
            Some(t) => Some(plumb_engine::observer(t).map_err(|source| Error::Engine { source })?),
            None => None,
        };
        let prev = collect(&cfg)?;
        Ok(MemWatch { cfg, live, prev })
    }

    /// The report over one interval from now.
    pub fn once(mut self) -> Result<MemReport> {
        std::thread::sleep(self.cfg.interval);
        let cur = collect(&self.cfg)?;
        Ok(self.report(cur))
    }

    /// A report per interval to `each` until `cancel`, or until a sample fails (a process
    /// that went away): that error is returned as how the watch ended, not raised.
    pub fn run(
        mut self,
        cancel: &dyn Fn() -> bool,
        mut each: impl FnMut(&MemReport) -> std::io::Result<()>,
    ) -> Result<Option<Error>> {
        let ticking = Ticking::every(self.cfg.interval, cancel).first(First::AfterInterval);
        let mut ended = None;
        ticks::run(&ticking, |_| -> Result<Flow> {
            match collect(&self.cfg) {
                Ok(cur) => {
                    let rep = self.report(cur);
                    each(&rep)?;
                    Ok(Flow::Go)
                }
                Err(e) => {
                    ended = Some(e);
                    Ok(Flow::Stop)
                }
            }
        })?;
        Ok(ended)
    }

    /// What changed since the last sample, with the server's own figure for its cache.
    fn report(&mut self, cur: MemSample) -> MemReport {
        let mut rep = plumb_analyze::mem::build(&cur, Some(&self.prev));
        if let Some(obs) = self.live.as_mut() {
            let block = obs
                .info()
                .ok()
                .and_then(|i| i.settings.get("block_size").and_then(|b| b.parse().ok()))
                .unwrap_or(8192);
            let snap = obs.snapshot().map_err(|e| e.to_string());
            plumb_analyze::mem::apply_engine(
                &mut rep,
                obs.kind(),
                block,
                snap.as_ref().map_err(|e| e.clone()),
            );
        }
        self.prev = cur;
        rep
    }
}

fn collect(cfg: &MemConfig) -> Result<MemSample> {
    plumb_sys::memsnap::collect(&cfg.root, &cfg.pids, cfg.find_engines).map_err(|e| match e {
        plumb_sys::Error::NoSuchProcess { pid, .. } => Error::Pid { pid, source: e },
        e => Error::Host(e),
    })
}
