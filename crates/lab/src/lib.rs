//! plumb's lab: one run that looks at the host, probes the storage where the data lives, runs
//! database workloads on a private PostgreSQL (or reads an existing server) while recording,
//! and returns the results as data ([`LabReport`]); rendering is `plumb_report`'s.
//!
//! ```text
//! Lab::new(config)          checks the config, fits the plan to free space
//!   .run(events, cancel)    resources (guards) → server → host → recorder →
//!                           experiments (one trait, in order) → windows → findings
//! ```
//!
//! Every resource the lab creates (work directory, instance, scratch database, cgroup,
//! pressure child) is a guard in [`resources::Resources`]: leaving `run` by any path, an error
//! or a stop included, removes them in order. An experiment is a type implementing
//! [`Experiment`] in `exp/`, registered in [`exp::registered`].

pub mod compare;
pub mod delta;
pub mod durability_probe;
pub mod error;
pub mod exp;

mod host;
pub mod load;
pub mod pgbench;
pub mod plan;
pub mod repl;
pub mod resources;
pub mod script;
pub mod server;
pub mod server_db;
pub mod sweep;

pub use error::{Error, Interrupted, Result};
pub use exp::replica::ReplicaMode;
pub use exp::{Context, Experiment, Outcome, Section};
pub use plan::{parse_rates, LabWorkload, Plan, PressureSize, Rate};
pub use plumb_analyze::lab::LabReport;
pub use plumb_record::{Phase, PhaseKind};

use crate::error::Context as _;
use plumb_engine::private;
use resources::{Instance, Resources, WorkDir};
use server::Server;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What a lab is asked to do; the values are checked by [`Lab::new`].
pub struct Config {
    /// An existing server instead of plumb's private instance (password already attached).
    pub target: Option<plumb_engine::Target>,
    /// With a PostgreSQL target: run the workloads in a scratch database.
    pub allow_writes: bool,
    /// The filesystem to assess: the lab works in a new directory under it.
    pub dir: PathBuf,
    /// Where the report goes (the recording is written there as the lab runs).
    pub out_dir: PathBuf,
    pub quick: bool,
    /// pgbench's duration, when given.
    pub pgbench: Option<Duration>,
    pub pressure: Option<PressureSize>,
    pub throttle_writes: Option<Vec<Rate>>,
    /// A standby beside the private instance (--replica): commits and pgbench without it,
    /// beside it, and with its writes throttled.
    pub replica: Option<ReplicaMode>,
    /// As typed (passwords masked), for the report and the recording.
    pub command_line: String,
    /// Trace the server over the insert/CHECKPOINT loops (root, the server on this host):
    /// syscalls and bios per commit.
    pub trace: bool,
    /// The PostgreSQL server build for the private instance (the directory of its programs);
    /// None: the default ([`private::default_build`]).
    pub bin_dir: Option<PathBuf>,
    /// The private instance's engine (without --engine): PostgreSQL, or Debian's MariaDB.
    pub kind: plumb_engine::Kind,
    /// `--workload`: None runs the engine's default (pgbench on PostgreSQL, pgbench's
    /// transaction on plumb's driver on MariaDB).
    pub workload: Option<LabWorkload>,
    /// `--clients`: the workload's clients (default two a CPU, at most 32).
    pub clients: Option<u32>,
    /// `--rate`: transactions a second in all, on plumb's driver (an open loop).
    pub rate: Option<f64>,
    /// `--accept-neighbour`: processes whose work in a phase is noted, not held against it.
    pub accept: Vec<plumb_analyze::interference::Accept>,
    /// `--skip`: parts of the lab not to run this time (their sections say so).
    pub skip: Vec<Part>,
    /// `--explain`: take plumb's driver's transactions apart (`plumb load --explain`).
    pub explain: bool,
}

/// A part of the lab a run may leave out (`--skip`): measured once, a storage's figures do not
/// change when the workload does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The durability probe, the queue-depth sweep and the sequential read.
    Storage,
    /// The insert/CHECKPOINT (or insert/commit) loops.
    Loops,
}

impl Part {
    pub fn parse(s: &str) -> std::result::Result<Part, String> {
        match s {
            "storage" => Ok(Part::Storage),
            "loops" => Ok(Part::Loops),
            _ => Err(format!(
                "{s:?} is not a part of the lab plumb can leave out (storage, loops)"
            )),
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Part::Storage => "storage",
            Part::Loops => "loops",
        }
    }
}

impl Config {
    /// The recording's file, in the report directory.
    pub fn recording(&self) -> PathBuf {
        self.out_dir.join("recording.plumb")
    }
}

/// The host's findings and every experiment's, critical first (within a severity, in the
/// order the rules ran).
pub(crate) fn all_findings(
    r: &LabReport,
    experiments: &[Box<dyn Experiment>],
) -> Vec<plumb_analyze::lab::Finding> {
    let mut findings = host::findings(r);
    for e in experiments {
        findings.extend(e.findings(r));
    }
    for f in &mut findings {
        downgrade_if_disturbed(f, &r.windows);
    }
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    findings
}

/// A warning drawn from a phase that something else disturbed is not the server's problem until
/// a clean run shows it: lowered to info, with the phase's evidence.
pub(crate) fn downgrade_if_disturbed(
    f: &mut plumb_analyze::lab::Finding,
    windows: &[plumb_analyze::lab::Window],
) {
    let disturbed: Vec<&plumb_analyze::lab::Window> = windows
        .iter()
        .filter(|w| f.phases.contains(&w.phase) && w.disturbed())
        .collect();
    if disturbed.is_empty() {
        return;
    }
    let neighbour = disturbed
        .iter()
        .filter_map(|w| w.interference.as_ref())
        .find_map(|i| i.neighbours.first())
        .map(|n| (n.pid, n.comm.clone()));
    let lowered = f.severity > plumb_analyze::lab::Severity::Info;
    if lowered {
        f.severity = plumb_analyze::lab::Severity::Info;
    }
    f.disturbed = Some(plumb_analyze::lab::Disturbed {
        phases: disturbed.iter().map(|w| w.phase.clone()).collect(),
        neighbour,
        lowered,
    });
}

/// `--workload`, `--clients` and `--rate`, before anything is made.
fn check_workload(c: &Config) -> Result<()> {
    if let Some(n) = c.clients {
        if n == 0 || n > 1000 {
            crate::refuse!("--clients {n}: from 1 to 1000");
        }
    }
    if let Some(r) = c.rate {
        if !(r.is_finite() && r > 0.0) {
            crate::refuse!("--rate {r}: a number of transactions a second above 0");
        }
    }
    let postgres = match &c.target {
        Some(t) => matches!(t.kind(), Ok(plumb_engine::Kind::Postgres)),
        None => c.kind == plumb_engine::Kind::Postgres,
    };
    let driver = !postgres || matches!(c.workload, Some(LabWorkload::Named(_)));
    if c.rate.is_some() && !driver {
        crate::refuse!("--rate: pgbench runs here closed-loop; name the workload (--workload tpcb) to run it on plumb's driver at a rate");
    }
    if c.explain && !driver {
        crate::refuse!("--explain takes plumb's driver's transactions apart; PostgreSQL's lab runs pgbench: name the workload (--workload tpcb) to run it on plumb's driver");
    }
    // SAFETY: geteuid cannot fail.
    if c.explain && unsafe { libc::geteuid() } != 0 {
        crate::refuse!("--explain: needs root (plumb times the server's threads with eBPF programs: CAP_BPF and CAP_PERFMON); run plumb as root, or leave out --explain");
    }
    if c.replica.is_some() && matches!(c.workload, Some(LabWorkload::Named(_))) {
        crate::refuse!("--replica repeats pgbench; with a named --workload it is not built yet: leave one out, or give a pgbench script (--workload FILE)");
    }
    Ok(())
}

/// The files a lab writes into its report directory.
pub const LAB_FILES: [&str; 4] = [
    "index.html",
    "report.json",
    "summary.txt",
    "recording.plumb",
];

/// Every long command's events: the lab's steps, live figures and notes.
pub use plumb_record::events::{Event, Events};

/// Step counting for the events, each step weighted by the time it is planned to take.
pub struct Progress<'e> {
    n: u32,
    of: u32,
    /// Planned time of each step.
    planned: Vec<Duration>,
    events: &'e mut dyn Events,
}

impl<'e> Progress<'e> {
    pub fn new(planned: Vec<Duration>, events: &'e mut dyn Events) -> Progress<'e> {
        Progress {
            n: 0,
            of: planned.len() as u32,
            planned,
            events,
        }
    }

    /// The next step begins.
    pub fn step(&mut self, what: &str) {
        self.n = (self.n + 1).min(self.of);
        let i = (self.n as usize).saturating_sub(1);
        self.events.event(Event::Step {
            n: self.n,
            of: self.of,
            what,
            done: self.planned[..i].iter().sum(),
            planned: self.planned.get(i).copied().unwrap_or_default(),
            total: self.planned.iter().sum(),
        });
    }

    /// Something the user should know now.
    pub fn note(&mut self, what: &str) {
        self.events.event(Event::Note(what));
    }

    /// The running step's live figure (pgbench's).
    pub fn live(&mut self, tps: f64, mean_ms: Option<f64>) {
        self.live_as("pgbench", tps, mean_ms.map(|l| ("mean", l)));
    }

    /// The running step's live figure, of the workload `what`.
    pub(crate) fn live_as(&mut self, what: &str, tps: f64, latency: Option<(&'static str, f64)>) {
        self.events.event(Event::Live { what, tps, latency });
    }

    /// Steps that will not run (a skipped experiment's): out of the plan.
    pub fn skip(&mut self, k: u32) {
        let from = self.n as usize;
        for p in self.planned.iter_mut().skip(from).take(k as usize) {
            *p = Duration::ZERO;
        }
        self.n = (self.n + k).min(self.of);
    }
}

pub struct Lab {
    config: Config,
    plan: Plan,
    /// PostgreSQL's lab runs pgbench; MariaDB's runs plumb's own driver.
    pgbench_bin: Option<PathBuf>,
}

impl Lab {
    /// Check what can be checked before anything is created.
    pub fn new(config: Config) -> Result<Lab> {
        let mut plan = if config.quick {
            Plan::quick()
        } else {
            Plan::full()
        };
        if let Some(d) = config.pgbench {
            plan = plan.with_duration(d)?;
        }
        let experiments = config.pressure.is_some() || config.throttle_writes.is_some();
        if config.target.is_some() && experiments {
            crate::refuse!("--pressure and --throttle-writes run only on plumb's private instance (they would move a server of yours into plumb's cgroup); leave out --engine");
        }
        if let Some(t) = &config.target {
            t.kind()
                .map_err(|e| crate::Error::quoting(format!("--engine {e}"), e))?;
        }
        if config.replica.is_some() && config.target.is_some() {
            crate::refuse!("--replica makes a standby of plumb's private instance; leave out --engine (plumb repl watch and timeline observe a pair of yours)");
        }
        if config.replica.is_some() && !plumb_sys::os::is_root() {
            crate::refuse!("--replica needs root: the standby runs in a cgroup of its own so that its writes can be throttled");
        }
        if experiments && !plumb_sys::os::is_root() {
            crate::refuse!(
                "--pressure and --throttle-writes need root: they create a cgroup for the server{}",
                if config.pressure.is_some() {
                    " and a zram swap device"
                } else {
                    ""
                }
            );
        }
        let meta = std::fs::metadata(&config.dir)
            .with_context(|| format!("--dir {}", config.dir.display()))?;
        if !meta.is_dir() {
            crate::refuse!("--dir {}: not a directory", config.dir.display());
        }
        let free = plumb_sys::os::free_bytes(&config.dir).unwrap_or(u64::MAX);
        let plan = plan.fit(free).map_err(|need| crate::Error::NoRoom {
            dir: config.dir.clone(),
            free,
            need,
        })?;
        check_workload(&config)?;
        if config.kind == plumb_engine::Kind::Mariadb {
            return Lab::new_mariadb(config, plan);
        }
        if config.kind != plumb_engine::Kind::Postgres {
            crate::refuse!(
                "--kind sqlserver: plumb's private instance runs PostgreSQL or MariaDB; for SQL Server use --engine mssql://…"
            );
        }
        if config.bin_dir.is_some() && config.target.is_some() {
            crate::refuse!(
                "--bin-dir chooses the build of plumb's private instance; leave out --engine"
            );
        }
        let build = match &config.bin_dir {
            Some(d) => {
                private::build(d).map_err(|e| crate::Error::quoting(format!("--bin-dir {e}"), e))?
            }
            None => private::default_build()?,
        };
        if config.replica.is_some() {
            build
                .basebackup()
                .map_err(|e| crate::Error::quoting(format!("--replica: {e}"), e))?;
        }
        let Some(pgbench_bin) = build
            .client_program("pgbench")
            .map_err(|e| crate::Error::quoting(format!("pgbench: {e}"), e))?
        else {
            crate::refuse!(
                "pgbench: not beside the server build in {} nor under /usr/lib/postgresql (apt-get install postgresql-contrib)",
                build.bin.display()
            );
        };
        let mut config = config;
        // The experiments' other instances run the same build.
        config.bin_dir = Some(build.bin);
        Ok(Lab {
            config,
            plan,
            pgbench_bin: Some(pgbench_bin),
        })
    }

    /// The lab on a private MariaDB: what it cannot do yet is refused before anything is made.
    fn new_mariadb(config: Config, plan: Plan) -> Result<Lab> {
        if config.target.is_some() {
            crate::refuse!("--kind mariadb starts plumb's private MariaDB; with --engine the URL says which engine it is (mysql://…), leave out --kind");
        }
        if config.bin_dir.is_some() {
            crate::refuse!(
                "--bin-dir chooses a PostgreSQL build; the private MariaDB runs Debian's mariadbd"
            );
        }
        if config.replica.is_some() {
            crate::refuse!(
                "--replica makes a PostgreSQL standby; it does not run with --kind mariadb"
            );
        }
        let experiments = config.pressure.is_some() || config.throttle_writes.is_some();
        if experiments && matches!(config.workload, Some(LabWorkload::File(_))) {
            crate::refuse!("--pressure and --throttle-writes run the workload again; with a file of SQL they are not built yet: name a workload (--workload tpcb) or leave the experiment out");
        }
        Ok(Lab {
            config,
            plan,
            pgbench_bin: None,
        })
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The engine the lab runs on: "PostgreSQL" or "MariaDB" (a server of the user's: as its
    /// URL says).
    pub fn engine_name(&self) -> &'static str {
        match self.config.target.as_ref().and_then(|t| t.kind().ok()) {
            Some(k) => k.name(),
            None => self.config.kind.name(),
        }
    }

    /// Run the lab. Everything it created is removed before this returns, whatever the
    /// outcome; the report directory keeps the recording.
    pub fn run(
        self,
        events: &mut dyn Events,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Result<LabReport> {
        let mut res = Resources::default();
        let r = self.run_with(&mut res, events, cancel);
        if let (Err(e), Some(i)) = (&r, &res.instance) {
            // A server that died explains the error better than the error does.
            if !e.is_interrupted() && i.died() {
                return Err(Error::quoting(
                    format!("the lab's {} stopped unexpectedly (killed, or out of memory or disk); the lab cannot go on, and what it created was removed", self.engine_name()),
                    Error::Refused(e.chain_text()),
                ));
            }
        }
        // The guards go now, before the caller prints anything.
        drop(res);
        r
    }

    /// The experiments' cgroup when an experiment needs one, then the server: plumb's private
    /// instance (started in `work`, its guard in `res`) or the server of --engine.
    fn start_server(
        &self,
        res: &mut Resources,
        work: &std::path::Path,
        progress: &mut Progress<'_>,
    ) -> Result<Server> {
        let (config, plan) = (&self.config, &self.plan);
        if config.pressure.is_some() || config.throttle_writes.is_some() {
            let cg = plumb_io::labcg::LabCgroup::create(
                &format!("plumb-lab-{}", std::process::id()),
                config.pressure.is_some(),
                config.throttle_writes.is_some(),
            )
            .context("setting up the experiments' cgroup")?;
            res.cgroup = Some(cg);
        }
        let server = match &config.target {
            None if config.kind == plumb_engine::Kind::Mariadb => {
                progress.step("starting a private MariaDB");
                let dir = work.join("mariadb");
                res.instance = Some(Instance::new(dir.clone()));
                let (running, _) = plumb_engine::private_maria::start_or_find(
                    &dir,
                    &plumb_engine::private_maria::MariaOptions {
                        buffer_pool: Some(server::mariadb_buffer_pool(plan.shared_buffers)),
                        settings: Vec::new(),
                    },
                )
                .with_context(|| format!("starting the lab's MariaDB in {}", dir.display()))?;
                Server::private_maria(running)?
            }
            None => {
                progress.step("starting a private PostgreSQL");
                let pg_dir = work.join("pg");
                res.instance = Some(Instance::new(pg_dir.clone()));
                let running = private::start(
                    &pg_dir,
                    &private::StartOptions {
                        settings: server::private_settings(plan.shared_buffers),
                        port: None,
                        bin: config.bin_dir.clone(),
                        ..Default::default()
                    },
                )
                .with_context(|| {
                    format!("starting the lab's PostgreSQL in {}", pg_dir.display())
                })?;
                Server::private(running)?
            }
            Some(t) => {
                progress.step("connecting to the target (read-only)");
                Server::target(t.clone())?
            }
        };
        Ok(server)
    }

    fn run_with(
        &self,
        res: &mut Resources,
        events: &mut dyn Events,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Result<LabReport> {
        let (config, plan) = (&self.config, &self.plan);
        let started = Instant::now();
        let started_unix_ms = plumb_record::now_unix_ms();
        resources::remove_dead_labs(&config.dir);
        let work_dir = WorkDir::create(&config.dir)?;
        let work = work_dir.path.clone();
        res.work = Some(work_dir);
        let mut experiments = exp::registered(config);
        // Starting the server, each experiment's steps, writing the report.
        let mut planned = vec![Duration::from_secs(2)];
        for e in &experiments {
            planned.extend(e.expected(&plan));
        }
        planned.push(Duration::from_secs(1));
        let of = planned.len() as u32;
        let mut progress = Progress::new(planned, events);

        // The server (plumb's private instance, or the server of --engine), and the host it runs on.
        let server = self.start_server(res, &work, &mut progress)?;
        if cancel() {
            return Err(Interrupted.into());
        }
        let mut cx = exp::Context::new(exp::Setup {
            config,
            plan: plan.clone(),
            server,
            work,
            pgbench_bin: self.pgbench_bin.clone(),
            cancel,
            progress,
            resources: res,
        })?;
        cx.recorder
            .mark("lab started", Some(cx.server.shown.clone()));
        cx.recorder
            .set_engine(cx.observer(&cx.server.target.clone()));

        let mut phases: Vec<Phase> = Vec::new();
        for e in experiments.iter_mut() {
            if cancel() {
                return Err(Interrupted.into());
            }
            let skipped = e.part().filter(|p| config.skip.contains(p));
            let why = skipped
                .map(|p| format!("{}: not run (--skip {})", e.name(), p.word()))
                .or_else(|| e.precondition(&cx));
            if let Some(why) = why {
                if !cx.skipped.contains(&why) {
                    cx.skipped.push(why);
                }
                cx.progress.skip(e.steps());
                continue;
            }
            let out = e.run(&mut cx)?;
            phases.extend(out.phases);
            cx.results.apply(out.section);
        }

        cx.progress.step("writing the report");
        cx.recorder.mark("lab finished", None);
        cx.recorder.stop().context("the recording")?;
        let rec = plumb_store::read(cx.recorder.path())?;
        let windows: Vec<_> = phases
            .iter()
            .map(|p| plumb_analyze::lab::Window {
                interference: p.interference.clone(),
                ..plumb_analyze::lab::window(
                    &rec,
                    &p.name,
                    p.kind == PhaseKind::Workload,
                    p.start_s,
                    p.end_s,
                    cx.disk.as_deref(),
                    cx.server.local_pid,
                )
            })
            .collect();
        let results = std::mem::take(&mut cx.results);
        let mut lab_experiments = results.experiments;
        for e in &mut lab_experiments {
            e.window = windows.iter().find(|w| w.phase == e.phase).cloned();
        }
        let mut report = LabReport {
            report_schema: plumb_analyze::lab::REPORT_SCHEMA,
            command_line: config.command_line.clone(),
            started_unix_ms,
            elapsed_s: started.elapsed().as_secs_f64(),
            quick: config.quick,
            target: cx.server.shown.clone(),
            engine_version: cx.server.version.clone(),
            data_dir: cx.data_dir.clone(),
            out_dir: config.out_dir.clone(),
            host: cx.host.clone(),
            memory: cx.memory.clone(),
            durability: results.durability,
            sweep: results.sweep,
            seq_read: results.seq_read,
            pgbench: results.pgbench,
            workloads: results.workloads,
            mariadb_durability: results.mariadb_durability,
            loops: results.loops,
            experiments: lab_experiments,
            windows,
            findings: Vec::new(),
            skipped: std::mem::take(&mut cx.skipped),
            recording: Some(config.recording()),
        };
        if let Some(d) = report.mariadb_durability.as_mut() {
            exp::maria_durability::withhold_disturbed(d, &report.windows);
        }
        report.findings = all_findings(&report, &experiments);
        cx.progress.events.event(Event::Finished { of });
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(dir: &std::path::Path) -> Config {
        Config {
            target: None,
            allow_writes: false,
            dir: dir.to_path_buf(),
            out_dir: dir.join("out"),
            quick: true,
            pgbench: None,
            pressure: None,
            throttle_writes: None,
            replica: None,
            command_line: "plumb lab".into(),
            trace: true,
            bin_dir: None,
            kind: plumb_engine::Kind::Postgres,
            workload: None,
            clients: None,
            rate: None,
            accept: vec![],
            skip: vec![],
            explain: false,
        }
    }

    fn refused(c: Config) -> String {
        match Lab::new(c) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.chain_text(),
        }
    }

    #[test]
    fn what_can_be_checked_is_checked_before_anything_is_made() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(refused(config(&file)).contains("not a directory"));
        assert!(refused(config(&d.path().join("missing"))).contains("--dir"));
        let mut c = config(d.path());
        c.pgbench = Some(Duration::from_secs(1));
        assert!(refused(c).contains("2s or more"));
        let mut c = config(d.path());
        c.target = Some(plumb_engine::Target::new("postgres://u@h/db"));
        c.pressure = Some(PressureSize::Bytes(64 << 20));
        assert!(refused(c).contains("private instance"));
        let mut c = config(d.path());
        c.target = Some(plumb_engine::Target::new("oracle://u@h/db"));
        assert!(refused(c).contains("--engine"));
        // PostgreSQL's default lab runs pgbench, not plumb's driver: nothing to take apart.
        let mut c = config(d.path());
        c.explain = true;
        assert!(refused(c).contains("--workload tpcb"));
        // Nothing was made by the refusals.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn progress_counts_to_the_end_and_skipped_steps_advance_it() {
        let mut seen = Vec::new();
        let mut ev = |e: Event| {
            if let Event::Step {
                n,
                of,
                done,
                planned,
                total,
                ..
            } = e
            {
                seen.push((n, of, done, planned, total));
            }
        };
        let s = Duration::from_secs;
        let mut p = Progress::new(vec![s(10), s(20), s(30), s(40)], &mut ev);
        p.step("a");
        p.skip(2);
        p.step("b");
        p.step("past the end stays at the end");
        // Planned time: the skipped steps leave the total.
        assert_eq!(
            seen,
            vec![
                (1, 4, s(0), s(10), s(100)),
                (4, 4, s(10), s(40), s(50)),
                (4, 4, s(10), s(40), s(50))
            ]
        );
    }
}
