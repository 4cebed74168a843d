//! `plumb load` as a library: a workload (order-entry, TPC-C-like; pgbench's TPC-B-like
//! transaction; a point select) on a database plumb creates, loads, drives and drops.
//!
//! ```text
//! run(config, events, cancel)
//!   target      the URL's server (--allow-writes), or plumb's private instance in --dir
//!   database    created and marked as plumb's, or a kept one of the same scale, checked
//!   load        items and warehouses (or branches) in parallel, then keys, procedures, ANALYZE
//!   drive       clients on load::oltp's driver; NOPM and TPM read at the window's edges
//!   check       TPC-C's consistency conditions 1-4 (--check)
//!   drop        the database it created (unless --keep; a kept one only with --drop-kept),
//!               also on errors and Ctrl-C; never one that holds what plumb did not make
//! ```

mod plan;
mod rec;
mod steps;

use crate::error::{Error, Result};
use crate::server_db::ServerDb;
use crate::Interrupted;
use plumb_analyze::load::{self as figures, Check, LoadReport};
use plumb_engine::oltp::driver::{
    self as driver, ErrorClass, Event as DriverEvent, Failure, Outcome,
};
use plumb_engine::oltp::server::{Admin, DbConn, Found, OltpClient};
use plumb_engine::oltp::{self, Failed, Workload};
use plumb_engine::Target;
use plumb_sys::rng::Rng;
use rec::LoadRecording;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use plan::LoadConfig;
pub(crate) use plan::LoadEvent;

/// `plumb load`: a configuration checked whole before anything is created, then run with the
/// lab's progress events.
pub struct Load {
    c: LoadConfig,
}

impl Load {
    /// Check what can be checked before anything is created.
    pub fn new(c: LoadConfig) -> Result<Load> {
        check(&c)?;
        Ok(Load { c })
    }

    pub fn config(&self) -> &LoadConfig {
        &self.c
    }

    /// Record into `path` when the caller asked for no recording of its own (the report
    /// directory's `recording.plumb`, made after the checks).
    pub fn record_into(&mut self, path: PathBuf) {
        self.c.record.get_or_insert(path);
    }

    /// Run the load: its phases as the lab's steps (loading, keys and procedures, ramp-up, the
    /// timed window), each second's figure as its live one. Everything it creates (the
    /// database unless --keep, the private instance it started) is gone when it returns,
    /// however it returns; stopped by `cancel`, it says [`Interrupted`].
    pub fn run(
        &self,
        events: &mut dyn crate::Events,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Result<LoadReport> {
        let mut steps = steps::Steps::new(&self.c);
        let r = run(&self.c, &mut |e| steps.event(&e, events), cancel)?;
        steps.finished(events);
        Ok(r)
    }
}

/// Check the flags' values before anything starts.
fn check(c: &LoadConfig) -> Result<()> {
    if c.scale == 0 || c.scale > oltp::MAX_WAREHOUSES {
        crate::refuse!(
            "{} {}: from 1 to {} (each unit is about 100 MB for order-entry, 15 MB for pgbench's tables)",
            c.workload.scale_flag(),
            c.scale,
            oltp::MAX_WAREHOUSES
        );
    }
    if c.clients == 0 || c.clients > 1000 {
        crate::refuse!("--clients {}: from 1 to 1000", c.clients);
    }
    if c.workload.is_loop() && c.clients > 1 {
        crate::refuse!(
            "--clients {}: the insert/CHECKPOINT loops run one client, as the script they reproduce (a checkpoint is the whole server's, and each round empties the table)",
            c.clients
        );
    }
    if c.duration.is_zero() {
        crate::refuse!("--duration: the timed window must be longer than 0 s");
    }
    if let Some(r) = c.rate {
        if !(r.is_finite() && r > 0.0) {
            crate::refuse!("--rate {r}: a number of transactions a second above 0");
        }
    }
    if c.keep && c.drop_kept {
        crate::refuse!("--keep and --drop-kept: one keeps the database after the run, the other drops a kept one; choose one");
    }
    if c.threads == Some(0) {
        crate::refuse!("--threads 0: at least one thread");
    }
    // SAFETY: geteuid cannot fail.
    if c.explain && unsafe { libc::geteuid() } != 0 {
        crate::refuse!("--explain: needs root (plumb times the server's threads with eBPF programs: CAP_BPF and CAP_PERFMON); run plumb as root, or leave out --explain");
    }
    if c.max_tries == 0 {
        crate::refuse!("--max-tries 0: at least 1 (1 tries each transaction once)");
    }
    if !oltp::valid_database_name(&c.database) {
        crate::refuse!(
            "--database {}: lower-case letters, digits and _, starting with a letter, at most 63",
            c.database
        );
    }
    if let Some(p) = &c.record {
        if p.symlink_metadata().is_ok() {
            crate::refuse!(
                "--record {}: exists; plumb writes a new recording, never over a file",
                p.display()
            );
        }
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() {
            crate::refuse!(
                "--record {}: there is no directory {}",
                p.display(),
                parent.display()
            );
        }
    }
    match &c.target {
        Some(t) => {
            if !c.allow_writes {
                crate::refuse!("--engine {}: the load creates a database, fills it and writes to it; on a server plumb did not start it runs only with --allow-writes", t.shown());
            }
            // Settings plumb would not apply are refused, never taken silently.
            if let Some(s) = c.set.first() {
                crate::refuse!("--set {s}: --set configures plumb's private instance when plumb starts it; with --engine the server is yours and keeps its settings (leave out --set)");
            }
            if c.build.is_some() {
                crate::refuse!("--bin-dir and --pg-version choose the build of plumb's private instance; with --engine the server is yours (leave them out)");
            }
            t.kind()?;
        }
        None => {
            if c.allow_writes {
                crate::refuse!("--allow-writes is for --engine (a server of yours); plumb's private instance is written to anyway");
            }
        }
    }
    Ok(())
}

/// Run the load, its phases as they come. Everything it creates (the database unless --keep,
/// the private instance it started) is gone when it returns, however it returns.
pub(crate) fn run(
    c: &LoadConfig,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<LoadReport> {
    run_with(c, events, cancel, None)
}

/// Run the load for a caller that runs the workload again later (the lab's experiments): a
/// database this run creates is not dropped at the end, its guard goes to `created` (dropped
/// when the caller lets it go), on success and on failure alike.
pub(crate) fn run_handing(
    c: &LoadConfig,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
    created: &mut Option<ServerDb>,
) -> Result<LoadReport> {
    run_with(c, events, cancel, Some(created))
}

fn run_with(
    c: &LoadConfig,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
    hand: Option<&mut Option<ServerDb>>,
) -> Result<LoadReport> {
    check(c)?;
    // Declared first, dropped last: the private instance outlives the database's drop.
    let (target, shown, _owned) = match &c.target {
        Some(t) => (t.clone(), t.shown(), None),
        None => {
            let (dt, owned) =
                crate::delta::private_target(&c.dir, &c.set, c.build.clone(), &mut |n| {
                    events(LoadEvent::Note(n))
                })?;
            (dt.target, dt.shown, owned)
        }
    };
    let keep = c.keep && hand.is_none();
    let mut db: Option<ServerDb> = None;
    let r = load_and_drive(c, &target, shown, keep, &mut db, events, cancel);
    if let (Some(slot), Some(d)) = (hand, db.take()) {
        if d.made_here() {
            *slot = Some(d);
        }
    }
    r
}

/// The run on `target`: the database (`db`, dropped by the caller when this returns), the
/// load, the clients, the checks.
fn load_and_drive(
    c: &LoadConfig,
    target: &Target,
    shown: String,
    keep: bool,
    db: &mut Option<ServerDb>,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<LoadReport> {
    let mut admin = Admin::connect(target)?;
    let version = admin.version()?;
    // Declared after the database: stopped, its last sample written, before the drop.
    let mut rec = match &c.record {
        Some(path) => Some(LoadRecording::start(path, target, c, &version)?),
        None => None,
    };
    let mut each = |e: LoadEvent<'_>| {
        if let Some(r) = rec.as_mut() {
            r.event(&e, c);
        }
        events(e)
    };
    let clocks = if c.explain {
        Some(explain_clocks(target, &admin)?)
    } else {
        None
    };
    let loaded = prepare(c, target, &mut admin, db, keep, &mut each, cancel)?;
    let load_s = loaded.map(|d| d.as_secs_f64());
    let mut r = drive(c, target, &mut admin, clocks, &mut each, cancel)?;
    if let Some(rec) = rec.take() {
        rec.stop()?;
        r.recording = c.record.as_ref().map(|p| p.display().to_string());
    }
    if r.interrupted {
        return Err(Interrupted.into());
    }
    if c.check {
        r.checks = consistency(target, &c.database, c.workload)?;
    }
    r.engine = admin.kind().name().into();
    r.version = version;
    r.target = shown;
    r.loaded = loaded.is_some();
    r.load_s = load_s;
    r.kept = db.as_ref().is_some_and(|d| !d.dropped_after());
    Ok(r)
}

/// A database a load made on a server of the caller's (`c.target`), loaded and checked, for
/// another driver to run against; dropped when this goes.
pub struct Loaded {
    db: ServerDb,
    /// The server's version, as `plumb load` reports it.
    pub version: String,
    pub engine: &'static str,
    /// How long the load took.
    pub load_s: f64,
}

impl Loaded {
    pub fn target(&self) -> &Target {
        &self.db.target
    }

    pub fn name(&self) -> &str {
        &self.db.name
    }
}

/// Create and load `c.workload`'s database on `c.target` (a new one: a kept one is refused),
/// as `run` does before it drives.
pub(crate) fn load_only(
    c: &LoadConfig,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<Loaded> {
    check(c)?;
    let Some(target) = c.target.clone() else {
        crate::refuse!("loading without driving needs a server's URL");
    };
    let mut admin = Admin::connect(&target)?;
    let version = admin.version()?;
    crate::server_db::reclaim_on(&mut admin, &target, &mut |n| events(LoadEvent::Note(n)));
    if !matches!(admin.find(&c.database)?, Found::Nothing) {
        crate::refuse!(
            "--database {}: exists already; plumb loads a new one",
            c.database
        );
    }
    let t0 = Instant::now();
    let mut db = None;
    prepare(c, &target, &mut admin, &mut db, false, events, cancel)?;
    let Some(db) = db else {
        crate::refuse!("--database {}: not created", c.database);
    };
    Ok(Loaded {
        db,
        version,
        engine: admin.kind().name(),
        load_s: t0.elapsed().as_secs_f64(),
    })
}

/// Create and load the database, or reuse a kept one after checking it. Returns how long the
/// load took (None: reused). A database this run creates is in `db` from the moment it
/// exists (dropped by its guard on any failure, `keep` or not: a half-loaded schema is
/// nobody's); a kept one is reused only when it is plumb's alone (owned by the connecting
/// role, holding nothing but plumb's objects) and consistent, and stays after the run unless
/// `--drop-kept`.
fn prepare(
    c: &LoadConfig,
    target: &Target,
    admin: &mut Admin,
    db: &mut Option<ServerDb>,
    keep: bool,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<Option<Duration>> {
    crate::server_db::reclaim_on(admin, target, &mut |n| events(LoadEvent::Note(n)));
    let objects = c.workload.objects();
    match admin.find(&c.database)? {
        Found::Other => crate::refuse!(
            "--database {}: a database of that name exists and is not one plumb load made; name another (--database NAME)",
            c.database
        ),
        Found::Unfinished { run } => crate::refuse!("{}", crate::server_db::unfinished(&c.database, &run)),
        Found::Plumbs { mark, .. } => {
            if let Some(why) = admin.holdings(target, &c.database, &objects)?.not_ours() {
                crate::refuse!(
                    "--database {}: marked as plumb load's, but {why}; plumb reuses and drops only a database that is its own alone: name another (--database NAME)",
                    c.database
                );
            }
            if mark != c.workload.mark(c.scale) {
                crate::refuse!(
                    "--database {}: a kept database of plumb load's with other tables or another scale ({}); run with its workload and scale, or drop it (--drop-kept with that workload and scale, or DROP DATABASE {0})",
                    c.database,
                    mark.trim_start_matches("plumb load: ")
                );
            }
            check_sizes(target, c)?;
            let broken: Vec<Check> = consistency(target, &c.database, c.workload)?
                .into_iter()
                .filter(|k| k.violations != 0)
                .collect();
            if let Some(k) = broken.first() {
                crate::refuse!(
                    "--database {}: the kept schema breaks \"{}\" ({} rows); drop it (DROP DATABASE {0}) and load again",
                    c.database,
                    k.condition,
                    k.violations
                );
            }
            *db = Some(ServerDb::adopt(target, &c.database, objects, c.drop_kept));
            events(LoadEvent::Note(format!(
                "reusing the kept database {} ({}), consistent; {}",
                c.database,
                mark.trim_start_matches("plumb load: "),
                if c.drop_kept {
                    "dropped after the run (--drop-kept)"
                } else {
                    "it stays after the run (--drop-kept drops it)"
                }
            )));
            Ok(None)
        }
        Found::Nothing => {
            let made = db.insert(ServerDb::create(admin, target, &c.database, objects)?);
            let run = made.run.clone();
            let t0 = Instant::now();
            load(c, target, events, cancel)?;
            admin.mark_database(target, &c.database, c.workload, c.scale, &run)?;
            if keep {
                made.keep();
            }
            Ok(Some(t0.elapsed()))
        }
    }
}

/// The schema, the rows (items and warehouses on parallel connections), then keys and
/// procedures. Ctrl-C cancels the running statements.
fn load(
    c: &LoadConfig,
    t: &Target,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    let mut main = DbConn::connect(t, &c.database)?;
    main.create_schema(c.workload)?;
    let total = c.workload.jobs(c.scale);
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get()) as u32;
    let workers = total.min(cpus.max(2));
    let (next, done, stop) = (AtomicU32::new(0), AtomicU32::new(0), AtomicBool::new(false));
    let failed: Mutex<Option<Error>> = Mutex::new(None);
    let cancellers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>> = Mutex::new(Vec::new());
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let r = (|| -> Result<()> {
                        let mut conn = DbConn::connect(t, &c.database)?;
                        cancellers.lock().unwrap().push(conn.canceller(t));
                        loop {
                            let j = next.fetch_add(1, Ordering::Relaxed);
                            if j >= total || stop.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            conn.load_job(c.workload, j, c.scale)?;
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                    })();
                    if let Err(e) = r {
                        stop.store(true, Ordering::Relaxed);
                        failed.lock().unwrap().get_or_insert(e);
                    }
                })
            })
            .collect();
        while total > 0 && !handles.iter().all(|h| h.is_finished()) {
            if cancel() && !stop.swap(true, Ordering::Relaxed) {
                for f in cancellers.lock().unwrap().iter() {
                    f();
                }
            }
            events(LoadEvent::Loading {
                done: done.load(Ordering::Relaxed),
                total,
                elapsed: t0.elapsed(),
            });
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    if cancel() {
        return Err(Interrupted.into());
    }
    if let Some(e) = failed.into_inner().unwrap() {
        return Err(e);
    }
    if total > 0 {
        events(LoadEvent::Loading {
            done: total,
            total,
            elapsed: t0.elapsed(),
        });
    }
    events(LoadEvent::Building);
    cancellable(&mut main, t, cancel, c.workload)
}

/// The keys, procedures and statistics on `conn`, on a thread of their own, cancelling the
/// statement on Ctrl-C.
fn cancellable(
    conn: &mut DbConn,
    t: &Target,
    cancel: &(dyn Fn() -> bool + Sync),
    w: Workload,
) -> Result<()> {
    let stop = conn.canceller(t);
    let r = std::thread::scope(|s| {
        let h = s.spawn(|| conn.finish(w));
        let mut cancelled = false;
        while !h.is_finished() {
            if !cancelled && cancel() {
                stop();
                cancelled = true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        h.join()
    });
    if cancel() {
        return Err(Interrupted.into());
    }
    match r {
        Ok(r) => Ok(r?),
        Err(_) => crate::refuse!("the load's last step panicked"),
    }
}

/// One client: its connection, its workload, the scale and its home warehouse.
struct LoadClient {
    conn: OltpClient,
    workload: Workload,
    scale: i32,
    home: i32,
}

impl LoadClient {
    fn next_tx(&self, kind: usize, rng: &mut Rng) -> oltp::Tx {
        let mut u = |lo: i64, hi: i64| lo + rng.below((hi - lo + 1).max(1) as u64) as i64;
        oltp::generate_for(self.workload, kind, self.scale, self.home, &mut u)
    }
}

impl driver::Client for LoadClient {
    fn run(&mut self, kind: usize, rng: &mut Rng) -> std::result::Result<Outcome, Failure> {
        let tx = self.next_tx(kind, rng);
        counted(self.conn.exec(&tx))
    }

    fn share(&mut self) -> bool {
        self.conn.share()
    }

    fn run_async<'a>(&'a mut self, kind: usize, rng: &'a mut Rng) -> driver::TxFuture<'a> {
        let tx = self.next_tx(kind, rng);
        Box::pin(async move { counted(self.conn.exec_async(&tx).await) })
    }

    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        Some(self.conn.canceller())
    }

    fn closer(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        Some(self.conn.closer())
    }

    fn server_thread(&self) -> Option<u32> {
        self.conn.server_thread()
    }
}

/// A transaction's end as the driver counts it.
fn counted(r: std::result::Result<bool, oltp::TxError>) -> std::result::Result<Outcome, Failure> {
    match r {
        Ok(true) => Ok(Outcome::Committed),
        Ok(false) => Ok(Outcome::RolledBack),
        Err(e) => Err(Failure {
            class: match e.failed {
                Failed::Deadlock => ErrorClass::Deadlock,
                Failed::Serialization => ErrorClass::Serialization,
                Failed::LockTimeout => ErrorClass::LockTimeout,
                Failed::Lost => ErrorClass::LostConnection,
                Failed::Other => ErrorClass::Other,
            },
            code: e.code,
            message: e.message,
        }),
    }
}

/// Connect the clients and run the driver; NOPM and TPM from counters read at the window's
/// edges.
/// What the timed window is watched on: this host, the disks under the server's data
/// directory, the server's processes as the load's own. None when the server is not on this
/// host (nothing here would tell what disturbed it).
fn watch_scope(
    t: &Target,
    accept: &[plumb_analyze::interference::Accept],
) -> Option<plumb_record::watch::Scope> {
    let server = crate::server::Server::target(t.clone()).ok()?;
    let pid = server.local_pid?;
    let root = plumb_sys::Root::host();
    let devices = server
        .data_dir
        .filter(|d| d.exists())
        .map(|d| crate::sweep::devices_under(&root, &[d]))
        .unwrap_or_default();
    Some(plumb_record::watch::Scope {
        root,
        devices,
        also_own: vec![pid],
        accept: accept.to_vec(),
    })
}

/// `--explain`'s clocks: the kernel's programs loaded, for a PostgreSQL or MariaDB server on
/// this host (its backends, or connection threads, are the threads timed), before anything is
/// created.
fn explain_clocks(t: &Target, admin: &Admin) -> Result<plumb_engine::oltp::explain::Explain> {
    if admin.kind() == plumb_engine::Kind::Sqlserver {
        crate::refuse!(
            "--explain: takes PostgreSQL's and MariaDB's time apart (each connection's server thread is one plumb can name); SQL Server's threads are not reachable from here: leave out --explain"
        );
    }
    let local = crate::server::Server::target(t.clone())
        .ok()
        .and_then(|s| s.local_pid);
    if local.is_none() {
        crate::refuse!(
            "--explain: the server at {} is not one plumb finds on this host (its backends must be processes here to be timed); run plumb on the server's host, or leave out --explain",
            t.shown()
        );
    }
    let clocks = plumb_sys::threadtime::ThreadTimes::start()
        .map_err(|e| crate::Error::Refused(format!("--explain: {e}")))?;
    // The server's own processes too, before the load's connections exist: a wait that one of
    // them ends by making a write durable (the WAL writer's flush) is told from a lock wait.
    if let Some(pid) = local {
        clocks.watch_server(pid);
    }
    Ok(plumb_engine::oltp::explain::Explain {
        clocks: std::sync::Arc::new(clocks),
        in_flight: Default::default(),
    })
}

fn drive(
    c: &LoadConfig,
    t: &Target,
    admin: &mut Admin,
    explain: Option<plumb_engine::oltp::explain::Explain>,
    events: &mut dyn FnMut(LoadEvent<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<LoadReport> {
    let mut clients: Vec<Box<dyn driver::Client>> = Vec::new();
    for i in 0..c.clients {
        if cancel() {
            return Err(Interrupted.into());
        }
        clients.push(Box::new(LoadClient {
            conn: OltpClient::connect(t, &c.database, c.workload)?,
            workload: c.workload,
            scale: c.scale as i32,
            home: (i % c.scale) as i32 + 1,
        }));
    }
    let edges_reader = Edges::start(t, &c.database, c.workload == Workload::OrderEntry)?;
    let tpm_source = admin.tpm_source();
    // The timed window is watched for other work, as the lab's phases are, where the server
    // runs on this host (its processes are the load's own).
    let scope = watch_scope(t, &c.accept);
    let mut watch: Option<plumb_record::watch::Watch> = None;
    let mut watched: Option<plumb_analyze::interference::Interference> = None;
    let plan = driver::Plan {
        mix: c.workload.mix(),
        rampup: c.rampup,
        duration: c.duration,
        rate: c.rate,
        max_tries: c.max_tries,
        seed: c.seed,
        in_order: c.workload.in_order(),
        threads: c.threads,
        explain,
    };
    // --explain on PostgreSQL: the engine's wait events sampled beside the kernel's clocks.
    let sampler = match &plan.explain {
        Some(e) => plumb_engine::oltp::waits::Sampler::start(
            t,
            &c.database,
            e.in_flight.clone(),
            plan.mix.len(),
        )?,
        None => None,
    };
    events(LoadEvent::Driving);
    let mut edges: Vec<plumb_engine::Result<(i64, i64)>> = Vec::new();
    let order_entry = c.workload == Workload::OrderEntry;
    let m = driver::run(
        &plan,
        clients,
        &mut |e| match e {
            DriverEvent::WindowStart => {
                // The schema's edge first, at the window's start (NOPM counts from it); the
                // watch's first reading of /proc after it.
                edges.push(edges_reader.read());
                watch = scope.as_ref().map(plumb_record::watch::Watch::start);
                events(LoadEvent::WindowStart);
            }
            DriverEvent::WindowEnd => {
                edges.push(edges_reader.read());
                watched = watch.take().map(plumb_record::watch::Watch::finish);
                events(LoadEvent::WindowEnd);
            }
            DriverEvent::Second(s) => events(LoadEvent::Second(s)),
        },
        cancel,
    );
    let window_s = m.window.as_secs_f64();
    let (mut types, seconds, lag) = figures::figures(&m);
    if plan.explain.is_some() {
        let waits = sampler.map(|s| s.stop());
        plumb_analyze::explain::add_engine_view(
            types.iter_mut().map(|t| &mut t.explained),
            waits.as_ref(),
            admin.kind().name(),
        );
    }
    let mut r = LoadReport {
        workload: c.workload.name().into(),
        engine: String::new(),
        version: String::new(),
        target: String::new(),
        database: c.database.clone(),
        loaded: true,
        kept: c.keep,
        load_s: None,
        scale: c.scale,
        scale_unit: if order_entry {
            "warehouses"
        } else if c.workload.is_loop() {
            "no scale"
        } else if c.workload == Workload::ReadWrite {
            "rows"
        } else {
            "pgbench scale"
        }
        .into(),
        clients: c.clients,
        rampup_s: c.rampup.as_secs_f64(),
        duration_s: c.duration.as_secs_f64(),
        window_s,
        rate_per_s: c.rate,
        max_tries: c.max_tries,
        nopm: None,
        new_orders: None,
        tpm: None,
        tpm_source: tpm_source.into(),
        types,
        lag,
        late: m.late,
        lost_clients: m.lost.clone(),
        checks: Vec::new(),
        seconds,
        interrupted: m.interrupted,
        recording: None,
        interference: watched.take(),
    };
    if m.interrupted {
        return Ok(r);
    }
    if m.lost.len() == c.clients as usize {
        crate::refuse!(
            "every client lost its connection ({}); the server went away",
            m.lost.last().map(String::as_str).unwrap_or("")
        );
    }
    if let [Ok((o0, x0)), Ok((o1, x1))] = edges.as_slice() {
        if order_entry {
            r.new_orders = Some(o1 - o0);
            r.nopm = figures::per_minute(o1 - o0, window_s);
        }
        r.tpm = figures::per_minute(x1 - x0, window_s);
    } else if let Some(Err(e)) = edges.into_iter().find(|e| e.is_err()) {
        return Err(Error::quoting(
            format!("reading the new-order and transaction counters: {e}"),
            e,
        ));
    }
    Ok(r)
}

/// A kept schema still holds the rows its scale says, table by table.
fn check_sizes(t: &Target, c: &LoadConfig) -> Result<()> {
    let mut conn = DbConn::connect(t, &c.database)?;
    for (table, want) in c.workload.sizes(c.scale) {
        let have = conn.number(&format!("SELECT count(*) FROM {table}"))?;
        if have != want {
            crate::refuse!(
                "--database {}: the kept schema's {table} holds {have} rows, not the {want} its scale gives; drop it (DROP DATABASE {0}) and load again",
                c.database
            );
        }
    }
    Ok(())
}

/// The counters read at the window's edges (the schema's new orders, the engine's
/// transactions), on a thread of their own with sessions of their own: a server that does not
/// answer within [`EDGE_WAIT`] leaves the figure out instead of holding the run past its end.
struct Edges {
    ask: std::sync::mpsc::Sender<()>,
    answer: std::sync::mpsc::Receiver<plumb_engine::Result<(i64, i64)>>,
    /// A read went unanswered: a late answer must not stand for the next one.
    stale: std::cell::Cell<bool>,
}

/// How long the counters at a window's edge may take.
const EDGE_WAIT: Duration = Duration::from_secs(5);

impl Edges {
    fn start(t: &Target, db: &str, order_entry: bool) -> Result<Edges> {
        let mut admin = Admin::connect(t)?;
        let mut counter = DbConn::connect(t, db)?;
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, answer) = std::sync::mpsc::channel();
        let db = db.to_string();
        std::thread::Builder::new()
            .name("plumb-io-counters".into())
            .spawn(move || {
                for () in asked {
                    let r = (|| {
                        let orders = if order_entry {
                            counter.number(oltp::NEW_ORDERS_SQL)?
                        } else {
                            0
                        };
                        Ok((orders, admin.transactions(&db)?))
                    })();
                    if tell.send(r).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::quoting(format!("starting the counters' thread: {e}"), e))?;
        Ok(Edges {
            ask,
            answer,
            stale: std::cell::Cell::new(false),
        })
    }

    fn read(&self) -> plumb_engine::Result<(i64, i64)> {
        let gone = || {
            plumb_engine::Error::Gone(format!(
                "the server did not answer the counters' query within {} s",
                EDGE_WAIT.as_secs()
            ))
        };
        if self.stale.get() || self.ask.send(()).is_err() {
            return Err(gone());
        }
        self.answer.recv_timeout(EDGE_WAIT).unwrap_or_else(|_| {
            self.stale.set(true);
            Err(gone())
        })
    }
}

/// The workload's consistency conditions on `db` (TPC-C's 1-4, or pgbench's balances).
fn consistency(t: &Target, db: &str, w: Workload) -> Result<Vec<Check>> {
    let mut conn = DbConn::connect(t, db)?;
    w.checks()
        .iter()
        .map(|(condition, sql)| {
            Ok(Check {
                condition: condition.to_string(),
                violations: conn.number(sql)?,
            })
        })
        .collect()
}
