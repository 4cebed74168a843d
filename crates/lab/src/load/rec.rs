//! `plumb load --record FILE`: the host, the server's processes and the engine's counters
//! sampled every second while the load runs, with the workload's own figures beside them (per
//! transaction type: transactions and failures as counters, the second's 95th percentile as a
//! gauge; `load.TYPE.…`) and marks where the load, the ramp-up and the timed window begin and
//! end, so `plumb report FILE` charts the workload beside the OS and the engine.

use super::plan::{LoadConfig, LoadEvent};
use crate::error::Result;
use plumb_engine::Target;
use plumb_record::{Background, Collector, EngineSampler, Feed, Setup};
use plumb_store::Kind;
use std::path::Path;
use std::time::Duration;

pub(crate) struct LoadRecording {
    bg: Background,
    feed: Feed,
    /// The mix's type names, in the driver's order.
    names: Vec<String>,
    /// Per type: transactions ended and failed so far (the counters' values).
    done: Vec<u64>,
    failed: Vec<u64>,
    loading_marked: bool,
    /// The server, for the engine's counters of the load's database once it exists.
    target: Target,
}

impl LoadRecording {
    /// Start recording into `path` (a new file), the server's processes followed when it runs
    /// on this host.
    pub(crate) fn start(
        path: &Path,
        target: &Target,
        c: &LoadConfig,
        version: &str,
    ) -> Result<LoadRecording> {
        let server_pid = plumb_engine::observer(target)
            .ok()
            .and_then(|o| o.local_server_pid());
        let collector = Collector::create(
            path,
            plumb_sys::Root::host(),
            plumb_sys::rawsample::Scope {
                pids: server_pid.into_iter().collect(),
                children: false,
            },
            EngineSampler::new(None),
            &Setup {
                interval: Duration::from_secs(1),
                labels: [
                    ("run".to_string(), "load".to_string()),
                    ("workload".to_string(), c.workload.name().to_string()),
                    ("engine".to_string(), version.to_string()),
                ]
                .into_iter()
                .collect(),
                command_line: c.command_line.clone(),
            },
        )?;
        let bg = Background::start(collector, Duration::from_secs(1));
        let names: Vec<String> = c
            .workload
            .mix()
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        let n = names.len();
        Ok(LoadRecording {
            feed: bg.feed(),
            bg,
            names,
            done: vec![0; n],
            failed: vec![0; n],
            loading_marked: false,
            target: target.clone(),
        })
    }

    /// From now on, the engine's counters of the load's own database.
    fn watch_database(&self, db: &str) {
        let target = &self.target;
        let (no_password, password) = plumb_engine::secret::split_password(&target.url);
        let mut t = Target::new(&crate::server::with_database(&no_password, db));
        t.password = target.password.clone().or(password);
        match plumb_engine::observer(&t) {
            Ok(o) => self.bg.set_engine(Some(o)),
            Err(e) => {
                eprintln!(
                    "plumb: warning: the recording will not have the engine's counters: {}",
                    plumb_sys::visible::lines(&e.to_string())
                )
            }
        }
    }

    /// Mark or feed what the run reports.
    pub(crate) fn event(&mut self, e: &LoadEvent<'_>, c: &LoadConfig) {
        match e {
            LoadEvent::Loading { .. } if !self.loading_marked => {
                self.loading_marked = true;
                self.bg.mark(
                    "load: loading",
                    Some(format!(
                        "{} {}",
                        c.workload.scale_flag().trim_start_matches("--"),
                        c.scale
                    )),
                );
            }
            LoadEvent::Building => {
                self.bg.mark("load: keys and procedures", None);
            }
            LoadEvent::Driving => {
                self.watch_database(&c.database);
                self.bg.mark(
                    "load: ramp-up",
                    Some(format!("{} clients, {}", c.clients, c.workload.name())),
                );
            }
            LoadEvent::WindowStart => {
                self.bg.mark("load: timed window", None);
            }
            LoadEvent::WindowEnd => {
                self.bg.mark("load: window ended", None);
            }
            LoadEvent::Second(s) => {
                for (i, name) in self.names.iter().enumerate() {
                    self.done[i] += s.done.get(i).copied().unwrap_or(0);
                    self.failed[i] += s.failed.get(i).copied().unwrap_or(0);
                    self.feed.set(
                        &format!("load.{name}.transactions"),
                        Kind::Counter,
                        self.done[i],
                    );
                    self.feed.set(
                        &format!("load.{name}.failures"),
                        Kind::Counter,
                        self.failed[i],
                    );
                    let p95 = format!("load.{name}.p95_us");
                    match s.p95_by_type_us.get(i).copied().flatten() {
                        Some(p) => self.feed.set(&p95, Kind::Gauge, p),
                        None => self.feed.remove(&p95),
                    }
                    // --explain: the second's server time and each part, per transaction.
                    if let Some((n, parts)) = s.explained.get(i) {
                        explained(&self.feed, name, *n, parts);
                    }
                }
            }
            _ => {}
        }
    }

    /// Stop sampling (one last sample is written); the samples written.
    pub(crate) fn stop(mut self) -> Result<u64> {
        Ok(self.bg.stop()?)
    }
}

/// A type's transactions taken apart in one second: `load.TYPE.server_us` and
/// `load.TYPE.PART_us`, per transaction (left out of a second in which none ended).
fn explained(
    feed: &plumb_record::Feed,
    name: &str,
    n: u64,
    parts: &[u64; plumb_sys::threadtime::PARTS],
) {
    use plumb_sys::threadtime::Part;
    let mut server = 0;
    for (p, ns) in Part::ALL.iter().zip(parts) {
        let key = format!("load.{name}.{}_us", p.key());
        if n == 0 {
            feed.remove(&key);
            continue;
        }
        if *p != Part::Client {
            server += ns;
        }
        feed.set(&key, Kind::Gauge, ns / n / 1000);
    }
    let key = format!("load.{name}.server_us");
    match n {
        0 => feed.remove(&key),
        _ => feed.set(&key, Kind::Gauge, server / n / 1000),
    }
}
