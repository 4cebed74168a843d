//! `plumb record` as a stage of its own, shaped like the lab: a [`RecordConfig`] (what the
//! flags said) → [`Recorder::new`] (every check, nothing started) → [`Recorder::run`] (the file,
//! the endpoint, the command and its trace, the samples) → a [`RecordSummary`] of numbers.
//! The command line turns flags into the config and prints what `plumb_report` writes.

use crate::foreground::{Foreground, GRACE};
use crate::trace::{Polled, Session, TraceSampler};
use crate::{Collector, EngineSampler, Error, Result, Setup};
use plumb_analyze::record::{RecordSummary, TraceTotals};
use plumb_store::Header;
use plumb_sys::rawsample::Scope;
use plumb_sys::Root;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// What to record, as the user asked for it.
pub struct RecordConfig {
    pub root: Root,
    pub interval: Duration,
    /// Stop after this long (None: until cancelled, or until the command exits).
    pub duration: Option<Duration>,
    /// Processes to record with their trees.
    pub pids: Vec<u32>,
    /// Follow what the processes start (false: the processes alone).
    pub children: bool,
    /// Also record the database servers found running here by name.
    pub engine_servers: bool,
    /// The database whose counters to record.
    pub engine: Option<plumb_engine::Target>,
    /// Follow the engine's heaviest statements: this many join at each reading, five times as
    /// many at most (0: none).
    pub statements: usize,
    /// The file to record into (None: a new `plumb-DATE-TIME.plumb` here, or no file with
    /// `serve`).
    pub out: Option<PathBuf>,
    /// Record into a directory instead, a new file every so often, the oldest removed past
    /// the caps (a recorder left running).
    pub keep: Option<crate::keep::Keep>,
    /// Serve the live figures on this address (`PORT`, `:PORT`, `HOST:PORT`).
    pub serve: Option<String>,
    /// How the served figures are written (OpenMetrics, by `plumb_report`), from the header.
    pub serve_render: fn(&Header) -> crate::metrics_endpoint::Render,
    /// The run's name when recordings are overlaid.
    pub name: Option<String>,
    /// Count in the kernel what the recorded processes ask of it.
    pub trace: bool,
    /// A command to run and record until it exits.
    pub command: Vec<String>,
    /// The command line that made the recording (passwords masked).
    pub command_line: String,
}

pub use crate::events::{Event, Events};

/// A recording checked and ready to start.
pub struct Recorder {
    config: RecordConfig,
    pids: Vec<u32>,
    engine: EngineSampler,
    serve: Option<SocketAddr>,
    /// None: nothing is written (`serve` alone).
    file: Option<PathBuf>,
    labels: HashMap<String, String>,
}

/// A recorder's `--interval` (100 ms or more) and `--duration`, from their text.
pub fn parse_sampling(
    interval: &str,
    duration: Option<&str>,
) -> Result<(Duration, Option<Duration>)> {
    let i = plumb_sys::units::parse_duration(interval).map_err(|source| Error::Unit {
        flag: "--interval",
        source,
    })?;
    if i < Duration::from_millis(100) {
        return Err(Error::refused(
            format!("--interval {interval}"),
            "use 100ms or more",
        ));
    }
    let d = duration
        .map(plumb_sys::units::parse_duration)
        .transpose()
        .map_err(|source| Error::Unit {
            flag: "--duration",
            source,
        })?;
    Ok((i, d))
}

/// The engine's kind as recordings and Prometheus labels name it.
pub(crate) fn engine_label(k: plumb_engine::Kind) -> &'static str {
    match k {
        plumb_engine::Kind::Postgres => "postgresql",
        plumb_engine::Kind::Mariadb => "mariadb",
        plumb_engine::Kind::Sqlserver => "sqlserver",
    }
}

impl Recorder {
    /// Check everything the config names (PIDs, servers, the engine's connection, the
    /// address, the file) before anything starts: a wrong value leaves nothing behind.
    pub fn new(config: RecordConfig) -> Result<Recorder> {
        for &p in &config.pids {
            plumb_sys::process::check_pid(&config.root, p)
                .map_err(|source| Error::Pid { pid: p, source })?;
        }
        let mut pids = config.pids.clone();
        if config.engine_servers {
            let engines = plumb_sys::smaps::find_engines(&config.root);
            if engines.is_empty() {
                return Err(Error::refused(
                    "--engine-server",
                    "no database server runs here (looked for postgres, mariadbd/mysqld and sqlservr by name); give --pid",
                ));
            }
            for e in engines {
                if !pids.contains(&e.main_pid) {
                    pids.push(e.main_pid);
                }
            }
        }
        if config.trace {
            if pids.is_empty() && config.command.is_empty() {
                return Err(Error::refused(
                    "--trace",
                    "say what to trace: --pid PID (its children and threads too), --engine-server or -- CMD ARGS",
                ));
            }
            if !plumb_sys::os::is_root() {
                return Err(Error::NeedsRoot {
                    flag: "--trace",
                    why: "plumb loads eBPF programs: CAP_BPF and CAP_PERFMON",
                });
            }
        }
        // The engine first: a wrong URL must not leave an empty recording behind.
        // A session that fails later (a restart, a failover) is opened again.
        let engine = match &config.engine {
            None => EngineSampler::new(None),
            Some(t) => EngineSampler::new(Some(
                plumb_engine::observer(t).map_err(|source| Error::Engine { source })?,
            ))
            .reconnecting(t.clone())
            .with_statements(
                config.statements,
                config.statements * crate::engine::STATEMENTS_CAP_FACTOR,
            ),
        };
        let serve = config
            .serve
            .as_deref()
            .map(crate::metrics_endpoint::parse_addr)
            .transpose()
            .map_err(|source| Error::ServeAddr { source })?;
        // --serve alone keeps no file (a recorder on every node for months must not fill a
        // disk).
        if let Some(k) = &config.keep {
            if !k.dir.is_dir() {
                return Err(Error::refused(
                    format!("--out-dir {}", k.dir.display()),
                    "no such directory",
                ));
            }
        }
        let file = match (&config.out, &config.keep, serve) {
            (Some(f), _, _) => Some(f.clone()),
            (None, Some(k), _) => Some(crate::keep::next_path(&k.dir)),
            (None, None, None) => Some(PathBuf::from(format!("plumb-{}.plumb", crate::stamp()))),
            (None, None, Some(_)) => None,
        };
        if let Some(f) = file.as_ref().filter(|f| f.exists()) {
            return Err(Error::refused(
                format!("--out {}", f.display()),
                "exists; plumb never overwrites a recording",
            ));
        }
        let labels = labels(&config, file.as_deref());
        Ok(Recorder {
            config,
            pids,
            engine,
            serve,
            file,
            labels,
        })
    }

    /// The file the recording goes to (None: nothing is written).
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Record until the duration is up, the command exits or `cancel` says so; then stop the
    /// command (its signal, a grace period, SIGKILL) and finish the trace.
    pub fn run(self, events: &mut dyn Events, cancel: &dyn Fn() -> bool) -> Result<RecordSummary> {
        self.run_with(events, cancel, &|pid| {
            plumb_sys::os::signal(pid, libc::SIGTERM);
        })
    }

    /// [`Recorder::run`], passing the stop on to the command with `signal_command` (the
    /// signal plumb itself received).
    pub fn run_with(
        self,
        events: &mut dyn Events,
        cancel: &dyn Fn() -> bool,
        signal_command: &dyn Fn(u32),
    ) -> Result<RecordSummary> {
        let Recorder {
            config,
            pids,
            engine,
            serve,
            file,
            labels,
        } = self;
        let scope = Scope {
            pids: pids.clone(),
            children: config.children,
        };
        let setup = Setup {
            interval: config.interval,
            labels,
            command_line: config.command_line.clone(),
        };
        let root = config.root.clone();
        let mut rec = match &file {
            Some(f) => Collector::create(f, root, scope, engine, &setup)?,
            None => Collector::unwritten(root, scope, engine, &setup),
        };
        let kept = match config.keep.clone() {
            Some(k) => rec.keep_in(k),
            None => Ok(()),
        };
        let started = kept
            .and_then(|()| serve_on(&mut rec, serve, config.serve_render))
            .and_then(|s| Ok((s, start(&mut rec, &config, &pids)?)));
        let (serving, child) = match started {
            Ok(c) => c,
            Err(e) => {
                // Nothing recorded: no file left behind.
                drop(rec);
                if let Some(f) = &file {
                    let _ = std::fs::remove_file(f);
                }
                return Err(e);
            }
        };
        if let Some(s) = &serving {
            events.event(Event::Serving { addr: s.addr });
        }
        events.event(Event::Recording {
            file: file.as_deref(),
            every: config.keep.as_ref().map(|k| k.every),
            interval: config.interval,
            slow: crate::slow_interval(config.interval),
            duration: config.duration,
        });
        let done = crate::foreground::record(
            &mut rec,
            child,
            &Foreground {
                interval: config.interval,
                duration: config.duration,
                cancel,
                // A person's Ctrl-C is answered within a fifth of a second; fewer wake-ups are
                // most of what an idle recorder costs between samples.
                cancel_every: Duration::from_millis(200),
                signal_command,
            },
        )?;
        let trace = match rec.trace.take() {
            Some(t) => Some(TraceTotals::of(&t.finish("recording ended")?)),
            None => None,
        };
        drop(serving);
        Ok(RecordSummary {
            // The last file when the recording went on into new ones.
            file: file
                .filter(|_| rec.writes_file())
                .map(|_| rec.path().to_path_buf()),
            samples: rec.samples,
            interval_ms: config.interval.as_millis() as u64,
            files: rec.earlier_files + u64::from(rec.writes_file()),
            bytes_written: rec.bytes_written(),
            sample_bytes: rec.sample_bytes(),
            late_ticks: done.late,
            trace,
            command: config.command.first().cloned(),
            exit_code: done.exit.map(crate::trace::exit_code_of),
            killed: done.killed,
            grace_s: GRACE.as_secs(),
        })
    }
}

/// The recording's labels: `run` (its name), `engine`, `command` (passwords masked).
fn labels(config: &RecordConfig, file: Option<&Path>) -> HashMap<String, String> {
    let mut labels = HashMap::new();
    let run = config.name.clone().unwrap_or_else(|| match file {
        Some(f) => f
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        None => "live".to_string(),
    });
    labels.insert("run".to_string(), run);
    if let Some(t) = &config.engine {
        if let Ok(k) = plumb_engine::Kind::from_url(&t.url) {
            labels.insert("engine".to_string(), engine_label(k).to_string());
        }
        // Where the engine's figures come from: host and port, and the database (never the
        // login).
        if let Some((server, db)) = plumb_engine::server_and_database(&t.url) {
            labels.insert("server".to_string(), server);
            if let Some(db) = db {
                labels.insert("database".to_string(), db);
            }
        }
    }
    if !config.command.is_empty() {
        labels.insert(
            "command".to_string(),
            plumb_engine::redact(&config.command.join(" ")),
        );
    }
    labels
}

/// Serve the recorder's live figures on `addr` (OpenMetrics on /metrics).
fn serve_on(
    rec: &mut Collector,
    addr: Option<SocketAddr>,
    render: fn(&Header) -> crate::metrics_endpoint::Render,
) -> Result<Option<crate::metrics_endpoint::Serving>> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let live = std::sync::Arc::new(crate::live::Live::default());
    rec.publish_to(live.clone());
    let s = crate::metrics_endpoint::start(addr, live, render(rec.header()))
        .map_err(|source| Error::Serve { addr, source })?;
    Ok(Some(s))
}

/// Start the command (held until its trace is in place with `trace`) and the trace; the
/// command, if any.
fn start(rec: &mut Collector, config: &RecordConfig, pids: &[u32]) -> Result<Option<Child>> {
    if !config.trace {
        return crate::foreground::start_command(rec, &config.command);
    }
    let root = Root::host();
    let (mut session, child) = if config.command.is_empty() {
        let label = pids
            .iter()
            .map(|p| format!("PID {p}"))
            .collect::<Vec<_>>()
            .join(", ");
        (Session::pids(&root, pids, &label, false, true)?.0, None)
    } else {
        let (s, c) = Session::command(&root, &config.command, false, true)?;
        crate::foreground::adopt_command(rec, &c, &config.command)?;
        (s, Some(c))
    };
    if !config.command.is_empty() {
        for &p in pids {
            session.follow(p)?;
        }
    }
    let mut sampler = TraceSampler::new(Polled::start(session));
    // plumb's own connection to the engine is not the workload.
    if let Some(own) = rec.engine.own_pid() {
        sampler.unfollow(own);
    }
    rec.trace = Some(sampler);
    Ok(child)
}
