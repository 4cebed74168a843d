//! Experiments: units of the lab behind one trait. Each says whether it can run here (and why
//! not), how many progress steps it takes, runs into a typed [`Section`] with its [`Phase`]s,
//! and owns the finding rules about what it measured. A new experiment is a file here and one
//! line in [`registered`].

mod driven;
mod durability_probe;
mod loops;
pub(crate) mod maria_durability;
mod pgbench;
mod pressure;
pub mod replica;
mod storage;
mod throttle;

#[cfg(test)]
mod tests;

use crate::error::{Context as _, Result};
use crate::pgbench::PgbenchRun;
use crate::resources::Resources;
use crate::server_db::ServerDb;

/// What the lab makes in its database: pgbench's tables, the insert/CHECKPOINT loops' table
/// and the standby experiment's.
const LAB_DB_OBJECTS: [&str; 6] = [
    "pgbench_branches",
    "pgbench_tellers",
    "pgbench_accounts",
    "pgbench_history",
    "dummy_test",
    "replica_commits",
];
use crate::server::Server;
use crate::{Config, Interrupted, Plan, Progress};
use plumb_analyze::durability_probe::DurabilityReport;
use plumb_analyze::lab::{Finding, LabReport, LoopResult, Pgbench, SeqRead};
use plumb_analyze::mem::Assumption;
use plumb_analyze::os::{OsReport, StorageSection};
use plumb_analyze::sweep::SweepReport;
use plumb_analyze::WithFacts;
use plumb_record::{Background, Phase};
use std::path::PathBuf;
use std::time::Duration;

pub trait Experiment {
    /// What it is, in a few words.
    fn name(&self) -> &'static str;
    /// Progress steps it reports when it runs.
    fn steps(&self) -> u32 {
        1
    }
    /// The part of the lab it belongs to, for `--skip` (None: it cannot be left out).
    fn part(&self) -> Option<crate::Part> {
        None
    }
    /// Why it cannot run here (for the report's "not run" list), or None.
    fn precondition(&self, _cx: &Context) -> Option<String> {
        None
    }
    /// How long it takes with this plan, at most (for estimates).
    fn budget(&self, plan: &Plan) -> Duration;
    /// How long each of its steps is expected to take (for the progress bar and its time
    /// left): by default the budget, shared evenly.
    fn expected(&self, plan: &Plan) -> Vec<Duration> {
        let n = self.steps().max(1);
        vec![self.budget(plan) / n; n as usize]
    }
    fn run(&mut self, cx: &mut Context) -> Result<Outcome>;
    /// Its findings, from the finished report (windows included).
    fn findings(&self, _r: &LabReport) -> Vec<Finding> {
        Vec::new()
    }
}

/// The lab's experiments for this config, in the order they run.
pub fn registered(config: &Config) -> Vec<Box<dyn Experiment>> {
    let mut v: Vec<Box<dyn Experiment>> = vec![
        Box::new(durability_probe::Durability::default()),
        Box::new(storage::Storage),
    ];
    let named = match &config.workload {
        Some(crate::LabWorkload::Named(w)) => Some(*w),
        _ => None,
    };
    let file = match &config.workload {
        Some(crate::LabWorkload::File(p)) => Some(p.clone()),
        _ => None,
    };
    let kind = match &config.target {
        Some(t) => t.kind().unwrap_or(plumb_engine::Kind::Postgres),
        None => config.kind,
    };
    if kind != plumb_engine::Kind::Postgres {
        // pgbench is PostgreSQL's: plumb's own driver runs the workload and the loops.
        v.push(Box::new(driven::Driven {
            workload: named.unwrap_or(plumb_engine::oltp::Workload::TpcB),
            script: file,
            loops: !config.skip.contains(&crate::Part::Loops),
        }));
        if kind == plumb_engine::Kind::Mariadb {
            // Last: it restarts the server with each configuration in turn (plumb's own only).
            v.push(Box::new(maria_durability::MariaDurabilityExp));
        }
    } else if let Some(w) = named {
        // The workload asked for, on plumb's driver, in pgbench's place.
        v.push(Box::new(driven::Driven {
            workload: w,
            script: None,
            loops: false,
        }));
        v.push(Box::new(loops::Loops));
    } else {
        v.push(Box::new(pgbench::Pgbench));
        v.push(Box::new(loops::Loops));
    }
    if let Some(size) = config.pressure {
        v.push(Box::new(pressure::Pressure { size }));
    }
    if let Some(rates) = &config.throttle_writes {
        v.push(Box::new(throttle::Throttle {
            rates: rates.clone(),
        }));
    }
    // Last: while the standby exists, every commit of the instance may wait for it.
    if let Some(mode) = config.replica {
        v.push(Box::new(replica::Replica { mode }));
    }
    v
}

/// What an experiment found.
pub enum Section {
    Durability(DurabilityReport),
    Storage {
        sweep: SweepReport,
        seq_read: SeqRead,
    },
    Pgbench(Pgbench),
    /// Runs of plumb's own driver (the workload and the insert loops where pgbench cannot run).
    Workloads(Vec<plumb_analyze::load::LoadReport>),
    MariaDurability(plumb_analyze::lab::MariaDurability),
    Loops(Vec<LoopResult>),
    /// Runs of the workload under a changed condition (pressure, throttle).
    Experiments(Vec<plumb_analyze::lab::Experiment>),
}

pub struct Outcome {
    pub section: Section,
    pub phases: Vec<Phase>,
}

/// The sections so far (later experiments compare against earlier ones).
#[derive(Default)]
pub struct Results {
    pub durability: Option<DurabilityReport>,
    pub sweep: Option<SweepReport>,
    pub seq_read: Option<SeqRead>,
    pub pgbench: Option<Pgbench>,
    pub workloads: Vec<plumb_analyze::load::LoadReport>,
    pub mariadb_durability: Option<plumb_analyze::lab::MariaDurability>,
    pub loops: Vec<LoopResult>,
    pub experiments: Vec<plumb_analyze::lab::Experiment>,
}

impl Results {
    pub fn apply(&mut self, s: Section) {
        match s {
            Section::Durability(d) => self.durability = Some(d),
            Section::Storage { sweep, seq_read } => {
                self.sweep = Some(sweep);
                self.seq_read = Some(seq_read);
            }
            Section::Pgbench(p) => self.pgbench = Some(p),
            Section::Workloads(w) => self.workloads.extend(w),
            Section::MariaDurability(d) => self.mariadb_durability = Some(d),
            Section::Loops(l) => self.loops.extend(l),
            Section::Experiments(e) => self.experiments.extend(e),
        }
    }
}

/// The lab's database for the workloads, once created.
pub struct LabDatabase {
    pub target: plumb_engine::Target,
    pub pgbench: PgbenchRun,
}

/// What the experiments share: the plan, the server, where things are, the recorder, the
/// resources, and the results so far.
pub struct Context<'a> {
    pub config: &'a Config,
    pub plan: Plan,
    pub server: Server,
    pub work: PathBuf,
    /// Where the data is when this host can see it; else where plumb probes.
    pub data_dir: PathBuf,
    pub host: OsReport,
    pub memory: Option<Assumption>,
    /// The data's filesystem and device stack, and its whole disks for block tracing.
    pub storage: Option<StorageSection>,
    pub trace_devs: Vec<plumb_sys::DevNum>,
    /// The data's (first) whole disk.
    pub disk: Option<String>,
    pub recorder: Background,
    pub resources: &'a mut Resources,
    pub results: Results,
    /// Steps not run, and why.
    pub skipped: Vec<String>,
    pub cancel: &'a (dyn Fn() -> bool + Sync),
    pub progress: Progress<'a>,
    pgbench_bin: Option<PathBuf>,
    lab_db: Option<LabDatabase>,
    /// The workload on plumb's driver, kept loaded for the experiments to run again.
    pub(crate) driver_rerun: Option<crate::load::LoadConfig>,
}

pub(crate) struct Setup<'a> {
    pub config: &'a Config,
    pub plan: Plan,
    pub server: Server,
    pub work: PathBuf,
    pub pgbench_bin: Option<PathBuf>,
    pub cancel: &'a (dyn Fn() -> bool + Sync),
    pub progress: Progress<'a>,
    pub resources: &'a mut Resources,
}

impl<'a> Context<'a> {
    /// Read the host and the storage under the data, and start the recording.
    pub(crate) fn new(s: Setup<'a>) -> Result<Context<'a>> {
        let root = plumb_sys::Root::host();
        let pids: Vec<u32> = s.server.local_pid.into_iter().collect();
        let data_dir = s
            .server
            .data_dir
            .clone()
            .filter(|d| d.exists())
            .unwrap_or_else(|| s.work.clone());
        let HostView {
            host,
            memory,
            storage,
            trace_devs,
        } = read_host(&root, s.server.mem_kind(), s.server.local_pid, &data_dir)?;
        let disk = storage.as_ref().and_then(|st| st.disks.first().cloned());
        let mut skipped = Vec::new();
        if !s.server.is_private() {
            let (probe_storage, _) = plumb_analyze::os::storage_under(&root, &s.work);
            let here = probe_storage.as_ref().map(|st| st.disks.clone());
            let there = storage.as_ref().map(|st| st.disks.clone());
            let visible = s.server.data_dir.as_ref().is_some_and(|d| d.exists());
            if visible && here != there {
                skipped.push(format!(
                    "the storage probes ran in {} (disks {}), not on the server's data disks ({}): pass --dir on the data's filesystem to probe those",
                    s.work.display(),
                    here.unwrap_or_default().join(", "),
                    there.unwrap_or_default().join(", ")
                ));
            } else if !visible {
                skipped.push(format!(
                    "the server's data directory is not on this host (or not readable): the storage probes ran in {} instead",
                    s.work.display()
                ));
            }
        }
        let collector = plumb_record::Collector::create(
            &s.config.recording(),
            root.clone(),
            plumb_sys::rawsample::Scope {
                pids,
                children: false,
            },
            plumb_record::EngineSampler::new(None),
            &plumb_record::Setup {
                interval: Duration::from_secs(1),
                labels: [
                    ("run".to_string(), "lab".to_string()),
                    (
                        "engine".to_string(),
                        s.server.version.clone().unwrap_or_default(),
                    ),
                ]
                .into_iter()
                .collect(),
                command_line: s.config.command_line.clone(),
            },
        )
        .context("starting the recording")?;
        let mut recorder = Background::start(collector, Duration::from_secs(1));
        // Every phase is watched on the disks under the data and the work directory; the
        // server's processes are the lab's own (it loads them), as are plumb's.
        let mut devices = crate::sweep::devices_under(&root, std::slice::from_ref(&s.work));
        devices.extend(storage.iter().flat_map(|st| st.disks.iter().cloned()));
        devices.sort();
        devices.dedup();
        recorder.watch_phases(plumb_record::watch::Scope {
            root: root.clone(),
            devices,
            also_own: s.server.local_pid.into_iter().collect(),
            accept: s.config.accept.clone(),
        });
        Ok(Context {
            config: s.config,
            plan: s.plan,
            server: s.server,
            work: s.work,
            data_dir,
            host,
            memory,
            storage,
            trace_devs,
            disk,
            recorder,
            resources: s.resources,
            results: Results::default(),
            skipped,
            cancel: s.cancel,
            progress: s.progress,
            pgbench_bin: s.pgbench_bin,
            lab_db: None,
            driver_rerun: None,
        })
    }

    /// What the lab's workload is called in its phases: pgbench, or the driver's workload.
    pub fn workload_name(&self) -> &'static str {
        match &self.driver_rerun {
            Some(c) => c.workload.name(),
            None => "pgbench",
        }
    }

    /// The lab's workload once more for `d` (an experiment's run): pgbench, or the workload on
    /// plumb's driver where that is what the lab ran; its figures in pgbench's shape, and with
    /// `--explain` the driver's run whole (its transactions taken apart). None: stopped.
    pub fn rerun(
        &mut self,
        d: std::time::Duration,
    ) -> Result<Option<(Pgbench, Option<plumb_analyze::load::LoadReport>)>> {
        if let Some(c) = self.driver_rerun.clone() {
            let c = crate::load::LoadConfig { duration: d, ..c };
            let progress = &mut self.progress;
            let name = c.workload.name();
            let r = crate::load::run(
                &c,
                &mut |e| {
                    if let crate::load::LoadEvent::Second(s) = e {
                        let done: u64 = s.done.iter().sum();
                        progress.live_as(
                            name,
                            done as f64,
                            s.p95_us.map(|u| ("p95", u as f64 / 1000.0)),
                        );
                    }
                },
                self.cancel,
            );
            return match r {
                Ok(r) => {
                    let p = Pgbench::from_load(&r, self.server.wal_sync_method());
                    let explained = r.types.iter().any(|t| t.explained.is_some());
                    Ok(Some((p, explained.then_some(r))))
                }
                Err(e) if e.is_interrupted() => Ok(None),
                Err(e) => Err(e),
            };
        }
        let run = self.lab_database()?.pgbench.clone();
        let progress = &mut self.progress;
        Ok(run
            .run(d, self.cancel, &mut |t, l| progress.live(t, l))?
            .map(|p| (p, None)))
    }

    /// An observer for the recording's engine counters (None, with a warning, if it fails).
    pub fn observer(&self, t: &plumb_engine::Target) -> Option<Box<dyn plumb_engine::Observer>> {
        match plumb_engine::observer(t) {
            Ok(o) => Some(o),
            Err(e) => {
                eprintln!(
                    "plumb: warning: the recording will not have the engine's counters: {}",
                    plumb_sys::visible::lines(&e.to_string())
                );
                None
            }
        }
    }

    /// Stopped (Ctrl-C, a signal, the caller's cancel)?
    pub fn stopped(&self) -> Result<()> {
        if (self.cancel)() {
            Err(Interrupted.into())
        } else {
            Ok(())
        }
    }

    /// Why the database workloads cannot run here, or None: they run on the private instance,
    /// and on a server of the user's only with --allow-writes (in a scratch database).
    pub(crate) fn workload_precondition(&self) -> Option<String> {
        if self.server.is_private() || self.config.allow_writes {
            None
        } else {
            Some(format!(
                "workloads: the workload and the insert loops create tables; against an existing server they run only with --allow-writes (in a scratch database plumb creates and drops); {} was only read",
                self.server.kind.name()
            ))
        }
    }

    /// The lab's database, created on first use (`plumb_lab` on the private instance; a
    /// scratch database on a target, dropped at the end); the recording reads its counters
    /// from then on.
    pub(crate) fn lab_database(&mut self) -> Result<&LabDatabase> {
        if self.lab_db.is_none() {
            let Some(bin) = self.pgbench_bin.clone() else {
                crate::refuse!("the lab's database for pgbench is PostgreSQL's");
            };
            let private = self.server.is_private();
            let name = if private {
                "plumb_lab".to_string()
            } else {
                format!("plumb_lab_{}", std::process::id())
            };
            let (no_password, password) =
                plumb_engine::secret::split_password(&self.server.target.url);
            let conn = crate::server::with_database(&no_password, &name);
            // A password file wins over the URL's, as in every connection plumb makes.
            let password = self.server.target.password.clone().or(password);
            let mut admin = plumb_engine::oltp::server::Admin::connect(&self.server.target)?;
            let progress = &mut self.progress;
            crate::server_db::reclaim_on(&mut admin, &self.server.target, &mut |n| {
                progress.note(&n)
            });
            let mut db = ServerDb::create(
                &mut admin,
                &self.server.target,
                &name,
                LAB_DB_OBJECTS.iter().map(|s| s.to_string()).collect(),
            )
            .with_context(|| format!("creating the lab database {name}"))?;
            if private {
                // Goes with plumb's instance.
                db.keep();
            } else {
                self.resources.scratch_db = Some(db);
            }
            let mut target = plumb_engine::Target::new(&conn);
            target.password = password.clone();
            // The database's own counters (commits, block reads) from now on.
            self.recorder.set_engine(self.observer(&target));
            let cpus = self.host.cpu.online_cpus.unwrap_or(1).max(1);
            let pgbench = PgbenchRun {
                bin,
                env: password.map(|p| ("PGPASSWORD", p)).into_iter().collect(),
                conn,
                work: self.work.clone(),
                clients: self.config.clients.unwrap_or((cpus * 2).min(32)),
                threads: cpus,
                script: match &self.config.workload {
                    Some(crate::LabWorkload::File(p)) => Some(crate::server::absolute(p)),
                    _ => None,
                },
            };
            self.lab_db = Some(LabDatabase { target, pgbench });
        }
        Ok(self.lab_db.as_ref().expect("just made"))
    }
}

/// What the lab reads of the host before it loads it: the OS report around the server's
/// processes, the engine's memory assumption, the storage under the data and its disks.
pub struct HostView {
    pub host: OsReport,
    pub memory: Option<Assumption>,
    pub storage: Option<StorageSection>,
    pub trace_devs: Vec<plumb_sys::DevNum>,
}

/// Read the host through `root` (the live host, or a captured tree in the tests).
pub fn read_host(
    root: &plumb_sys::Root,
    kind: plumb_sys::smaps::EngineKind,
    server_pid: Option<u32>,
    data_dir: &std::path::Path,
) -> Result<HostView> {
    let pids: Vec<u32> = server_pid.into_iter().collect();
    let sample =
        plumb_sys::snapshot::collect(root, &pids, Some(data_dir)).context("reading the host")?;
    let host =
        plumb_analyze::os::build(&sample, plumb_sys::host::page_size_bytes().unwrap_or(4096));
    let settings = plumb_sys::engine_conf::read(root, kind, server_pid);
    let total = host.memory.total_bytes.unwrap_or(0);
    let limit = host
        .processes
        .iter()
        .find(|p| p.role != "plumb")
        .or(host.processes.first())
        .and_then(|p| p.memory_limit_bytes);
    let memory = (total > 0)
        .then(|| plumb_analyze::mem::assume(kind, total, limit, host.cgroup_mode, &settings));
    let (storage, trace_devs) = plumb_analyze::os::storage_under(root, data_dir);
    Ok(HostView {
        host,
        memory,
        storage,
        trace_devs,
    })
}

/// tps and tail latency, without against with.
pub fn compare_runs(base: &Pgbench, with: &Pgbench) -> plumb_analyze::Note {
    let p99 = |p: &Pgbench| p.latency.as_ref().and_then(|l| l.p99_ms.or(l.p95_ms));
    let change = (base.tps > 0.0).then(|| (with.tps / base.tps - 1.0) * 100.0);
    // A change is stated only beyond the runs' own per-second spread: every second of the
    // busier 80% of one run faster than the other's (p10 above the other's p90).
    let apart = match (base.tps_p10, base.tps_p90, with.tps_p10, with.tps_p90) {
        (Some(b10), Some(b90), Some(w10), Some(w90)) => w90 < b10 || w10 > b90,
        _ => change.is_some_and(|c| c.abs() > 10.0),
    };
    let code = if apart {
        "pgbench-compared"
    } else {
        "pgbench-not-distinguishable"
    };
    let mut n = plumb_analyze::Note::new(plumb_analyze::Level::Info, code)
        .per_s("baseline_tps", base.tps)
        .per_s("tps", with.tps);
    if let Some(c) = change {
        n = n.pct("tps_change_pct", c);
    }
    if let (Some(a), Some(b)) = (p99(base), p99(with)) {
        n = n
            .secs("baseline_p99_s", a / 1000.0)
            .secs("p99_s", b / 1000.0);
    }
    n
}

/// The baseline the experiments compare with: the lab's pgbench run.
pub fn baseline(cx: &Context) -> Pgbench {
    cx.results
        .pgbench
        .clone()
        .or_else(|| {
            cx.results
                .workloads
                .first()
                .map(|w| Pgbench::from_load(w, cx.server.wal_sync_method()))
        })
        .unwrap_or_else(|| Pgbench {
            scale: cx.plan.scale,
            ..crate::pgbench::empty(cx.plan.scale)
        })
}

/// The largest value and where it was, over some windows.
pub(crate) fn largest<'w, T>(items: impl Iterator<Item = (f64, &'w T)>) -> Option<(f64, &'w T)> {
    items.fold(None, |acc, (v, w)| match acc {
        Some((a, _)) if a >= v => acc,
        _ => Some((v, w)),
    })
}
