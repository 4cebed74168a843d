//! plumb's one recorder. A recording runs on the one watch loop ([`ticks`]: a drift-free
//! schedule, cancellation, the duration); at every
//! tick the host sampler (`plumb_sys::rawsample`) and the engine's counters ([`EngineSampler`])
//! are written as one sample ([`Collector`]), and what happened between ticks becomes a mark
//! (a PID that exited, the engine going away). `plumb record` drives a [`Collector`] in the
//! foreground ([`foreground::record`]); the lab and other long jobs run one on a thread of its own ([`Background`]) and
//! mark their phases on it ([`Background::begin`] → [`Phase`]).

mod background;
pub mod engine;
mod error;
pub mod events;
pub mod foreground;
pub mod keep;
pub mod live;
pub mod mem_watch;
pub mod metrics_endpoint;
pub mod recorder;
pub mod repl;
pub mod repl_watch;
mod schedule;
pub mod ticks;
pub mod trace;
pub mod watch;

pub use background::{Background, OpenPhase, Phase, PhaseKind};
pub use engine::EngineSampler;
pub use error::{Error, Result};

use plumb_store::{Header, Kind, Mark, Writer};
use plumb_sys::rawsample::{RawKind, Sampler, Scope};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// plumb's version, as recorded in every header.
pub const PLUMB_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub use plumb_analyze::units::civil;

/// Now in UTC as `YYYYMMDD-HHMMSS`, for default file names.
pub fn stamp() -> String {
    let secs = now_unix_ms() / 1000;
    let (y, mo, d) = civil((secs / 86400) as i64);
    let t = secs % 86400;
    format!(
        "{y:04}{mo:02}{d:02}-{:02}{:02}{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// What a recording says about itself.
pub struct Setup {
    pub interval: Duration,
    /// `run` (its name when overlaid), `engine`, `command`...
    pub labels: HashMap<String, String>,
    /// The command line that made it (passwords already masked).
    pub command_line: String,
}

/// How often a recording at `interval` reads the slow metrics (engine queries, process trees,
/// smaps, cgroups: [`plumb_sys::rawsample::is_slow`]), when less often than every sample:
/// about once a second.
pub(crate) fn slow_interval(interval: Duration) -> Option<Duration> {
    (interval < SLOW_EVERY).then_some(SLOW_EVERY)
}

/// The slow metrics' interval in a faster recording.
pub const SLOW_EVERY: Duration = Duration::from_secs(1);

/// A recording's header for a recording that starts now.
pub(crate) fn new_header(root: &plumb_sys::Root, setup: &Setup) -> Header {
    let host = plumb_sys::host::read(root).ok();
    Header {
        format_version: plumb_store::FORMAT_VERSION,
        plumb_version: PLUMB_VERSION.to_string(),
        started_unix_ms: now_unix_ms(),
        interval_ms: setup.interval.as_millis() as u64,
        slow_interval_ms: slow_interval(setup.interval).map(|d| d.as_millis() as u64),
        hostname: host.as_ref().and_then(|h| h.hostname.clone()),
        kernel: host.as_ref().and_then(|h| h.kernel_release.clone()),
        cpus: plumb_sys::cpu::read_online_cpus(root).ok().flatten(),
        clock_ticks_per_s: plumb_sys::host::clock_ticks_per_s(),
        page_size_bytes: plumb_sys::host::page_size_bytes(),
        command_line: setup.command_line.clone(),
        labels: setup.labels.clone(),
    }
}

/// One recording being written: the file, its samplers, and the marks that samples bring.
/// Values a job hands the recorder to write with every sample (a workload's transactions and
/// latencies): the latest value of each name, written until the job sets it again.
#[derive(Clone, Default)]
pub struct Feed(std::sync::Arc<std::sync::Mutex<Vec<(String, Kind, u64)>>>);

impl Feed {
    /// Set `name` (a counter or a gauge) to `value` from the next sample on.
    pub fn set(&self, name: &str, kind: Kind, value: u64) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match v.iter_mut().find(|(n, _, _)| n == name) {
            Some(slot) => *slot = (name.to_string(), kind, value),
            None => v.push((name.to_string(), kind, value)),
        }
    }

    /// Leave `name` out of the samples until it is set again (a gauge with nothing to say).
    pub fn remove(&self, name: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(n, _, _)| n != name);
    }

    fn values(&self) -> Vec<(String, Kind, u64)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub struct Collector {
    path: PathBuf,
    /// What the job itself measures, written with every sample.
    feed: Feed,
    header: Header,
    /// None: nothing written (`plumb record --serve` without a file); marks go to stderr.
    writer: Option<Writer>,
    /// The latest values, for `/metrics` (`plumb record --serve`).
    live: Option<std::sync::Arc<live::Live>>,
    sampler: Sampler,
    pub engine: EngineSampler,
    engine_gone: bool,
    /// The engine's main process when the recording follows its tree: after a restart the
    /// new server's tree is followed too.
    engine_server: Option<u32>,
    /// The recorded processes' syscalls, faults and block requests, counted in the kernel
    /// (`plumb record --trace`).
    pub trace: Option<trace::TraceSampler>,
    /// A primary's replication, read with every sample (`plumb repl watch --out`).
    pub repl: Option<repl::ReplSampler>,
    repl_gone: bool,
    /// The command plumb runs: its end is marked with its status ("command exited"), not as
    /// a PID gone.
    command_pid: Option<u32>,
    pub samples: u64,
    /// Reading the slow metrics less often than every sample: (interval, sample interval).
    slow: Option<(u64, u64)>,
    /// When the slow metrics were last read, and how many times.
    last_slow_ms: Option<u64>,
    slow_samples: u64,
    /// A new file every so often, the oldest removed (`plumb record --out-dir`).
    keep: Option<keep::Keep>,
    /// Bytes written to the files before this one (all, and of samples alone).
    earlier_bytes: (u64, u64),
    /// Files written before this one.
    pub earlier_files: u64,
    /// Marks so far by kind (`recorder.KIND.marks`): the marks' text stays in the file, their
    /// counts go out with the samples (a Grafana annotation from `/metrics`).
    marks: std::cell::RefCell<std::collections::BTreeMap<&'static str, u64>>,
}

impl Collector {
    /// Create the recording (a new file: never over one) and its samplers.
    pub fn create(
        path: &Path,
        root: plumb_sys::Root,
        scope: Scope,
        engine: EngineSampler,
        setup: &Setup,
    ) -> Result<Collector> {
        let header = new_header(&root, setup);
        let mut writer = Writer::create(path, &header).map_err(|source| Error::File {
            doing: "creating the recording",
            path: path.to_path_buf(),
            source,
        })?;
        if header.slow_interval_ms.is_some() {
            writer.set_slow(plumb_sys::rawsample::is_slow);
        }
        Ok(Collector::with(
            path.to_path_buf(),
            Some(writer),
            header,
            root,
            scope,
            engine,
        ))
    }

    /// A collector that keeps no file: its figures are only live ([`Collector::publish_to`]), and
    /// what would be marked is said on stderr.
    pub(crate) fn unwritten(
        root: plumb_sys::Root,
        scope: Scope,
        engine: EngineSampler,
        setup: &Setup,
    ) -> Collector {
        let header = new_header(&root, setup);
        Collector::with(PathBuf::new(), None, header, root, scope, engine)
    }

    fn with(
        path: PathBuf,
        writer: Option<Writer>,
        header: Header,
        root: plumb_sys::Root,
        scope: Scope,
        engine: EngineSampler,
    ) -> Collector {
        Collector {
            path,
            feed: Feed::default(),
            writer,
            live: None,
            sampler: Sampler::new(root, scope),
            engine,
            engine_gone: false,
            engine_server: None,
            trace: None,
            repl: None,
            repl_gone: false,
            command_pid: None,
            samples: 0,
            slow: header.slow_interval_ms.map(|s| (s, header.interval_ms)),
            last_slow_ms: None,
            slow_samples: 0,
            keep: None,
            earlier_bytes: (0, 0),
            earlier_files: 0,
            marks: Default::default(),
            header,
        }
    }

    /// A handle to set the job's own values with (see [`Feed`]).
    pub fn feed(&self) -> Feed {
        self.feed.clone()
    }

    /// The recording's file (empty for an unwritten collector).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    pub fn started_unix_ms(&self) -> u64 {
        self.header.started_unix_ms
    }

    /// Keep `live` up to date with every sample from now on (for `/metrics`).
    pub(crate) fn publish_to(&mut self, live: std::sync::Arc<live::Live>) {
        self.live = Some(live);
    }

    /// Whether samples are written to a file.
    pub(crate) fn writes_file(&self) -> bool {
        self.writer.is_some()
    }

    /// Milliseconds since the recording started.
    pub(crate) fn now_ms(&self) -> u64 {
        now_unix_ms().saturating_sub(self.header.started_unix_ms)
    }

    /// Bytes written, to every file of the recording.
    pub fn bytes_written(&self) -> u64 {
        self.earlier_bytes.0 + self.writer.as_ref().map_or(0, |w| w.bytes_written)
    }

    /// Bytes of samples alone (without the header and the metrics' definitions, which are
    /// written once): what a longer recording grows by.
    pub fn sample_bytes(&self) -> u64 {
        self.earlier_bytes.1
            + self
                .writer
                .as_ref()
                .map_or(0, |w| w.bytes_written - w.definition_bytes)
    }

    /// Go on into a new file in `keep.dir` every `keep.every`, removing the oldest there past
    /// the caps (now, and with every new file).
    pub(crate) fn keep_in(&mut self, keep: keep::Keep) -> Result<()> {
        self.keep = Some(keep);
        self.prune(0)
    }

    /// Remove what is past the caps, each removal marked in the file being written.
    fn prune(&self, t_ms: u64) -> Result<()> {
        let Some(k) = &self.keep else { return Ok(()) };
        let removed =
            keep::prune(k, &self.path, std::time::SystemTime::now()).map_err(|source| {
                Error::File {
                    doing: "removing old recordings from",
                    path: k.dir.clone(),
                    source: plumb_store::Error::Io {
                        path: k.dir.clone(),
                        source,
                    },
                }
            })?;
        for r in removed {
            let why = match r.cap {
                keep::Cap::Size => format!(
                    "the recordings here passed --keep-size ({} bytes)",
                    k.max_bytes
                ),
                keep::Cap::Age => format!(
                    "last written longer ago than --keep-for ({} s)",
                    k.max_age.as_secs()
                ),
            };
            self.mark_at(
                t_ms,
                "old recording removed",
                Some(format!("{} ({} bytes): {why}", r.path.display(), r.bytes)),
            )?;
        }
        Ok(())
    }

    /// Start the next file when this one is `keep.every` old.
    fn roll_if_due(&mut self) -> Result<()> {
        let (Some(k), Some(w)) = (&self.keep, &self.writer) else {
            return Ok(());
        };
        let now = now_unix_ms();
        if now < self.header.started_unix_ms + k.every.as_millis() as u64 {
            return Ok(());
        }
        let path = keep::next_path(&k.dir);
        let mut header = self.header.clone();
        header.started_unix_ms = now;
        let next = w.successor(&path, &header).map_err(|source| Error::File {
            doing: "creating the next file of the recording",
            path: path.clone(),
            source,
        })?;
        if let Some(old) = self.writer.replace(next) {
            self.earlier_bytes.0 += old.bytes_written;
            self.earlier_bytes.1 += old.bytes_written - old.definition_bytes;
            self.earlier_files += 1;
        }
        self.path = path;
        self.header = header;
        // The new file's first sample reads everything.
        self.last_slow_ms = None;
        self.prune(0)
    }

    /// Record one more process from the next sample on.
    pub fn add_pid(&mut self, pid: u32) {
        self.sampler.add_pid(pid);
    }

    /// Record the command plumb runs from the next sample on.
    pub(crate) fn add_command(&mut self, pid: u32) {
        self.sampler.add_pid(pid);
        self.command_pid = Some(pid);
    }

    /// Read the slow metrics in the next sample, whenever they were last read (the last
    /// sample of a recording).
    pub(crate) fn slow_next(&mut self) {
        self.last_slow_ms = None;
    }

    /// Take and write one sample; what changed since the last one (a PID gone, the engine
    /// unreachable or back) is marked at the sample's time. Returns the sample's time.
    pub fn tick(&mut self) -> Result<u64> {
        self.roll_if_due()?;
        let t_ms = self.now_ms();
        // The slow metrics: every sample, or about once a slow interval (the first sample
        // always; a tick is close enough within half a sample interval).
        let slow = match (self.slow, self.last_slow_ms) {
            (None, _) | (_, None) => true,
            (Some((every, interval)), Some(last)) => t_ms + interval / 2 >= last + every,
        };
        if slow {
            self.last_slow_ms = Some(t_ms);
        }
        // plumb's own connections to the engine are not the workload.
        self.sampler.leave_out(
            self.engine
                .own_pid()
                .into_iter()
                .chain(self.repl.as_ref().and_then(|r| r.own_pid()))
                .collect(),
        );
        let taken = self.sampler.take_some(slow);
        if let Some(w) = self.writer.as_mut() {
            for (object, label) in &taken.labels {
                w.label_object(object, label);
            }
        }
        let gone = taken.gone;
        let mut engine_vals = if slow { self.engine.take() } else { Vec::new() };
        if let Some(w) = self.writer.as_mut() {
            for (object, label) in self.engine.take_labels() {
                w.label_object(&object, &label);
            }
        }
        if let Some(up) = self.engine.up().filter(|_| slow) {
            engine_vals.push(("engine.up".to_string(), true, up as u64));
        }
        if let Some(r) = self.repl.as_mut() {
            engine_vals.extend(r.take());
        }
        let mut rows: Vec<(&str, Kind, u64)> = taken
            .values
            .iter()
            .map(|v| {
                let kind = if v.kind == RawKind::Counter {
                    Kind::Counter
                } else {
                    Kind::Gauge
                };
                (v.name.as_str(), kind, v.value)
            })
            .collect();
        rows.extend(engine_vals.iter().map(|(n, gauge, v)| {
            let kind = if *gauge { Kind::Gauge } else { Kind::Counter };
            (n.as_str(), kind, *v)
        }));
        let mut trace_failed = None;
        let traced = match self.trace.as_mut().map(|t| t.take()) {
            Some(Ok(t)) => t,
            Some(Err(e)) => {
                trace_failed = Some(format!("{e:#}"));
                Default::default()
            }
            None => Default::default(),
        };
        if let Some(w) = self.writer.as_mut() {
            for (object, label) in &traced.labels {
                w.label_object(object, label);
            }
        }
        rows.extend(
            traced
                .values
                .iter()
                .map(|(n, v)| (n.as_str(), Kind::Counter, *v)),
        );
        let fed = self.feed.values();
        rows.extend(fed.iter().map(|(n, k, v)| (n.as_str(), *k, *v)));
        let marks: Vec<(String, u64)> = self
            .marks
            .borrow()
            .iter()
            .map(|(k, n)| (format!("recorder.{k}.marks"), *n))
            .collect();
        rows.extend(marks.iter().map(|(n, v)| (n.as_str(), Kind::Counter, *v)));
        if self.slow.is_some() && slow {
            self.slow_samples += 1;
            rows.push((plumb_store::SLOW_SAMPLES, Kind::Counter, self.slow_samples));
        }
        if let Some(w) = self.writer.as_mut() {
            let written = if self.slow.is_none() || slow {
                w.sample(t_ms, &rows)
            } else {
                w.sample_fast(t_ms, &rows)
            };
            written.map_err(|source| Error::File {
                doing: "writing to",
                path: self.path.clone(),
                source,
            })?;
        }
        if let Some(live) = &self.live {
            live.update(&rows, slow);
        }
        self.samples += 1;
        // The engine going away (or coming back) is a mark, not an error: the host recording
        // goes on.
        if self.engine.failed.is_some() != self.engine_gone {
            self.engine_gone = self.engine.failed.is_some();
            let name = if self.engine_gone {
                "engine unreachable"
            } else {
                "engine back"
            };
            self.mark_at(t_ms, name, self.engine.failed.clone())?;
            if !self.engine_gone {
                self.follow_restarted_server(t_ms)?;
            }
        }
        if let Some(why) = self.engine.statements_unavailable.take() {
            self.mark_at(t_ms, "statements not recorded", Some(why))?;
        }
        if self.engine_server.is_none() && !self.engine_gone {
            self.engine_server = self
                .engine
                .local_server_pid()
                .filter(|p| self.sampler.follows(*p));
        }
        let repl_failed = self.repl.as_ref().and_then(|r| r.failed.clone());
        if repl_failed.is_some() != self.repl_gone {
            self.repl_gone = repl_failed.is_some();
            let name = if self.repl_gone {
                "primary unreachable"
            } else {
                "primary back"
            };
            self.mark_at(t_ms, name, repl_failed)?;
        }
        for p in gone.into_iter().filter(|p| Some(*p) != self.command_pid) {
            self.mark_at(t_ms, &format!("PID {p} exited"), None)?;
        }
        if let Some(why) = trace_failed {
            // The trace is given up, the recording goes on.
            if let Some(t) = self.trace.take() {
                let _ = t.finish("failed");
            }
            self.mark_at(t_ms, "trace stopped", Some(why))?;
        }
        Ok(t_ms)
    }

    /// Mark the recording now; returns the mark's time in milliseconds.
    pub fn mark(&self, name: &str, detail: Option<String>) -> Result<u64> {
        let t_ms = self.now_ms();
        self.mark_at(t_ms, name, detail)?;
        Ok(t_ms)
    }

    /// The engine is back: if the recording followed its server's processes and the server
    /// is a new process (a restart), follow the new one's tree too (and trace it), marked.
    fn follow_restarted_server(&mut self, t_ms: u64) -> Result<()> {
        let (Some(old), Some(new)) = (self.engine_server, self.engine.local_server_pid()) else {
            return Ok(());
        };
        if new == old {
            return Ok(());
        }
        self.sampler.add_pid(new);
        self.engine_server = Some(new);
        let traced = match self.trace.as_mut().map(|t| t.follow(new)) {
            Some(Err(e)) => format!("; not traced: {e:#}"),
            _ => String::new(),
        };
        self.mark_at(
            t_ms,
            &format!("engine server now PID {new}"),
            Some(format!(
                "was PID {old}: its processes are followed from now on{traced}"
            )),
        )
    }

    pub(crate) fn mark_at(&self, t_ms: u64, name: &str, detail: Option<String>) -> Result<()> {
        *self
            .marks
            .borrow_mut()
            .entry(plumb_analyze::record::mark_kind(name))
            .or_default() += 1;
        if self.writer.is_none() {
            eprintln!(
                "plumb: {name}{}",
                detail.map(|d| format!(": {d}")).unwrap_or_default()
            );
            return Ok(());
        }
        append_mark(&self.path, t_ms, name, detail)
    }
}

/// Append a mark to a recording (in progress or finished).
pub fn append_mark(path: &Path, t_ms: u64, name: &str, detail: Option<String>) -> Result<()> {
    plumb_store::append_mark(
        path,
        &Mark {
            t_ms,
            name: name.to_string(),
            detail,
        },
    )
    .map_err(|source| Error::File {
        doing: "marking",
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_dates() {
        assert_eq!(super::civil(0), (1970, 1, 1));
        assert_eq!(super::civil(20779), (2026, 11, 22));
        assert_eq!(super::civil(-1), (1969, 12, 31));
        // 2000 was a leap year (divisible by 400), 2100 will not be.
        assert_eq!(super::civil(11016), (2000, 2, 29));
        assert_eq!(super::civil(47541), (2100, 3, 1));
    }
}
