//! `plumb repl watch` as a stage: a primary's replication read on the one watch loop
//! ([`crate::ticks`]), a line per second or per interval ([`WatchLine`]) for the caller to
//! print, and, with a file, a recording of the host, the engine and the replication with the
//! standbys' comings and goings marked.

use crate::repl::{Reading, ReplSampler, Source as Watched};
use crate::ticks::{self, Flow, Ticking};
use crate::{Collector, EngineSampler, Error, Result, Setup};
pub use plumb_analyze::repl::ReplLine as WatchLine;
use plumb_engine::Target;
use plumb_sys::Root;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What to watch, as the user asked for it.
pub struct ReplWatchConfig {
    pub root: Root,
    pub primary: Target,
    /// The servers' processes, when plumb made them (recorded with `out`).
    pub pids: Vec<u32>,
    /// Record the host, the engine and the replication into this new file.
    pub out: Option<PathBuf>,
    pub interval: Duration,
    pub duration: Option<Duration>,
    /// The command line that made the recording (passwords masked).
    pub command_line: String,
}

/// How a watch ended.
#[derive(Debug)]
pub struct ReplWatchSummary {
    /// Why the primary could not be read any more, when it went away.
    pub gone: Option<String>,
    /// The recording: its file, samples and size.
    pub recording: Option<(PathBuf, u64, u64)>,
}

/// Where readings come from: the primary alone, or a recording that reads it with the host.
enum Source {
    Bare(Box<ReplSampler>),
    Recording(Box<Collector>),
}

impl Source {
    /// One reading now (a recording takes its sample with it); the inner error is the
    /// primary's, which ends the watch.
    fn read(&mut self) -> Result<std::result::Result<Reading, String>> {
        let s = match self {
            Source::Bare(s) => {
                s.take();
                s
            }
            Source::Recording(r) => {
                r.tick()?;
                match r.repl.as_mut() {
                    Some(s) => s,
                    None => return Ok(Err("no reading".into())),
                }
            }
        };
        Ok(match (&s.failed, &s.last) {
            (Some(e), _) => Err(e.clone()),
            (None, Some(p)) => Ok(p.clone()),
            (None, None) => Err("no reading".into()),
        })
    }

    fn mark(&self, t_ms: u64, name: &str) -> Result<()> {
        match self {
            Source::Recording(r) => r.mark_at(t_ms, name, None),
            Source::Bare(_) => Ok(()),
        }
    }
}

/// A watch connected, its first reading taken, its recording created.
pub struct ReplWatch {
    source: Source,
    interval: Duration,
    duration: Option<Duration>,
}

impl ReplWatch {
    /// Connect to the primary and read it once before anything is created: a server that
    /// cannot be read leaves nothing behind.
    pub fn new(c: ReplWatchConfig) -> Result<ReplWatch> {
        let watched = match c.primary.kind()? {
            plumb_engine::Kind::Mariadb => {
                Watched::Mariadb(plumb_engine::mariadb::SemiSyncWatcher::connect(&c.primary)?)
            }
            plumb_engine::Kind::Sqlserver => {
                Watched::Sqlserver(plumb_engine::mssql::HadrWatcher::connect(&c.primary)?)
            }
            plumb_engine::Kind::Postgres => {
                Watched::Postgres(plumb_engine::repl::Watcher::connect(&c.primary)?)
            }
        };
        let mut sampler = ReplSampler::new(watched);
        sampler.take();
        if let Some(e) = sampler.failed.take() {
            return Err(Error::refused(
                format!("--primary {}", c.primary.shown()),
                e,
            ));
        }
        let source = match &c.out {
            None => Source::Bare(Box::new(sampler)),
            Some(out) => {
                let obs = plumb_engine::observer(&c.primary)?;
                let mut pids = c.pids.clone();
                if pids.is_empty() {
                    pids.extend(obs.local_server_pid());
                }
                let mut labels = std::collections::HashMap::new();
                labels.insert(
                    "run".to_string(),
                    out.file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                );
                if let Ok(k) = c.primary.kind() {
                    labels.insert(
                        "engine".to_string(),
                        crate::recorder::engine_label(k).to_string(),
                    );
                }
                let setup = Setup {
                    interval: c.interval,
                    labels,
                    command_line: c.command_line.clone(),
                };
                let mut rec = Collector::create(
                    out,
                    c.root.clone(),
                    plumb_sys::rawsample::Scope {
                        pids,
                        children: true,
                    },
                    EngineSampler::new(Some(obs)),
                    &setup,
                )?;
                rec.repl = Some(sampler);
                Source::Recording(Box::new(rec))
            }
        };
        Ok(ReplWatch {
            source,
            interval: c.interval,
            duration: c.duration,
        })
    }

    /// Read the primary every interval until the duration is up, `cancel`, or the primary
    /// goes away; `each` gets a line at most once a second (the readings between are summed
    /// into it) and once at the end.
    pub fn run(
        mut self,
        each: &mut dyn FnMut(&WatchLine) -> std::io::Result<()>,
        cancel: &dyn Fn() -> bool,
    ) -> Result<ReplWatchSummary> {
        let print_every = self.interval.max(Duration::from_secs(1));
        let started = Instant::now();
        let mut lines = Lines {
            prev: None,
            readings: Vec::new(),
        };
        let mut next_print = print_every;
        let mut gone = None;
        let ticking = Ticking::every(self.interval, cancel).for_(self.duration);
        let source = &mut self.source;
        ticks::run(&ticking, |tick| -> Result<Flow> {
            let t_ms = started.elapsed().as_millis() as u64;
            match source.read()? {
                Ok(p) => lines.readings.push((t_ms, p)),
                Err(e) => {
                    gone = Some(e);
                    return Ok(Flow::Stop);
                }
            }
            let at = started.elapsed();
            if at >= next_print || tick.last {
                lines.emit(source, each)?;
                while next_print <= at {
                    next_print += print_every;
                }
            }
            Ok(Flow::Go)
        })?;
        // What was read since the last line, when the watch was stopped or the primary went.
        lines.emit(&self.source, each)?;
        Ok(ReplWatchSummary {
            gone,
            recording: match &self.source {
                Source::Recording(r) => {
                    Some((r.path().to_path_buf(), r.samples, r.bytes_written()))
                }
                Source::Bare(_) => None,
            },
        })
    }
}

/// The readings since the last line, and the last one's.
struct Lines {
    prev: Option<(u64, Reading)>,
    readings: Vec<(u64, Reading)>,
}

impl Lines {
    /// Turn the readings into a line (marking what changed in the recording) and hand it on.
    fn emit(
        &mut self,
        source: &Source,
        each: &mut dyn FnMut(&WatchLine) -> std::io::Result<()>,
    ) -> Result<()> {
        let Some(first) = self.readings.first() else {
            return Ok(());
        };
        let line = match &first.1 {
            Reading::Postgres(_) => {
                let pg = |r: &(u64, Reading)| match &r.1 {
                    Reading::Postgres(p) => Some((r.0, p.clone())),
                    _ => None,
                };
                let before = self.prev.as_ref().and_then(pg);
                let now: Vec<_> = self.readings.iter().filter_map(pg).collect();
                plumb_analyze::repl::watch_line(before.as_ref(), &now).map(|l| {
                    let names = l.new.iter().map(|n| format!("standby {n} streaming"));
                    let gone = l.gone.iter().map(|n| format!("standby {n} gone"));
                    (l.t_ms, names.chain(gone).collect(), WatchLine::Pipeline(l))
                })
            }
            Reading::Mariadb(_) => {
                let my = |r: &(u64, Reading)| match &r.1 {
                    Reading::Mariadb(m) => Some((r.0, m.clone())),
                    _ => None,
                };
                let before = self.prev.as_ref().and_then(my);
                let now: Vec<_> = self.readings.iter().filter_map(my).collect();
                plumb_analyze::repl::semisync_line(before.as_ref(), &now).map(|l| {
                    let mut marks = Vec::new();
                    if l.switched_off {
                        marks.push("semi-sync switched off".to_string());
                    }
                    if l.switched_on {
                        marks.push("semi-sync back on".to_string());
                    }
                    (l.t_ms, marks, WatchLine::SemiSync(l))
                })
            }
            Reading::Sqlserver(_) => {
                let ms = |r: &(u64, Reading)| match &r.1 {
                    Reading::Sqlserver(h) => Some((r.0, h.clone())),
                    _ => None,
                };
                let before = self.prev.as_ref().and_then(ms);
                let now: Vec<_> = self.readings.iter().filter_map(ms).collect();
                plumb_analyze::repl::hadr_line(before.as_ref(), &now)
                    .map(|l| (l.t_ms, l.changes.clone(), WatchLine::Hadr(l)))
            }
        };
        if let Some((t_ms, marks, line)) = line {
            for m in &marks {
                source.mark(t_ms, m)?;
            }
            each(&line)?;
        }
        self.prev = self.readings.pop();
        self.readings.clear();
        Ok(())
    }
}
