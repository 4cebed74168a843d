//! Before/after deltas of one workload (`plumb delta`): snapshot the OS and the engine, run a
//! statement, a file of SQL or a command — as found, cold or warm, repeated — and return each
//! run's deltas as data; `plumb_analyze::delta::summarize` makes the report.
//!
//! ```text
//! run(root, target, workload, plan, cancel)
//!   own cost of a snapshot (measured once, taken out of every run)
//!   per mode: preparation (warm-up run, or restart + page cache drop), then per run:
//!     OS + engine snapshot → workload (waits sampled on a second thread) → snapshots → delta
//! ```

use crate::error::{Context as _, Result};
use crate::Interrupted;
use plumb_analyze::delta::{self, ModeRuns, RunDelta, WaitSamples};
use plumb_analyze::said::{Said, WithFacts};
use plumb_engine::{private, Observer, ServerInfo, Session, Snapshot, Target};
use plumb_sys::Root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What is run and measured.
pub enum Workload {
    /// One or more SQL statements, run in one session.
    Sql(String),
    /// A command, run with the target's connection in its environment.
    Cmd(Vec<String>),
}

impl Workload {
    /// One line for the report: the statement with its white space folded (cut at 100
    /// characters), or the command.
    pub fn describe(&self) -> String {
        match self {
            Workload::Sql(s) => {
                let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
                if one.chars().count() > 100 {
                    format!("{}...", one.chars().take(97).collect::<String>())
                } else {
                    one
                }
            }
            Workload::Cmd(c) => format!("command: {}", c.join(" ")),
        }
    }
}

/// What the runs are pointed at.
pub struct DeltaTarget {
    pub target: Target,
    /// How the report names it (no password).
    pub shown: String,
    /// The private instance's directory, when it is the target (cold runs restart it).
    pub private_dir: Option<PathBuf>,
}

/// `plumb delta`'s target when a URL is given: the server is the user's, except that a URL
/// that names the private instance in `dir` (running) still gets its restarts for cold runs.
pub(crate) fn url_target(target: Target, url: &str, dir: Option<&Path>) -> DeltaTarget {
    let private_dir = dir
        .filter(|d| {
            private::status(d)
                .ok()
                .flatten()
                .is_some_and(|r| url.contains(&r.dir.display().to_string()))
        })
        .map(Path::to_path_buf);
    DeltaTarget {
        shown: target.shown(),
        target,
        private_dir,
    }
}

/// `plumb delta`'s target when no URL is given: plumb's private PostgreSQL in `dir`, started
/// now with `set` (NAME=VALUE) and `build` when it does not run (then stopped after the runs,
/// and removed too when this run made it: the guard returned does that). `note` hears what the
/// user should know (settings not applied to a running instance, the start).
pub(crate) fn private_target(
    dir: &Path,
    set: &[String],
    build: Option<private::Build>,
    note: &mut dyn FnMut(String),
) -> Result<(DeltaTarget, Option<private::Owned>)> {
    let d = dir.to_path_buf();
    let mut owned = None;
    let r = match private::status(&d).map_err(|e| dir_error(&d, e))? {
        Some(r) => {
            if !set.is_empty() {
                note(format!("the private instance in {} is already running; --set is not applied (plumb engine stop first)", d.display()));
            }
            if let Some(b) = &build {
                if r.bin.as_ref() != Some(&b.bin) {
                    crate::refuse!("--dir {}: the private instance there already runs PostgreSQL {}; stop it first (plumb engine stop --dir {0}) to run the workload on {}", d.display(), r.version, b.version);
                }
            }
            r
        }
        None => {
            let mut settings = private::settings("128MB", &[])?;
            settings.extend(private::settings("128MB", set)?.into_iter().skip(2));
            for s in set {
                if let Some(v) = s.strip_prefix("shared_buffers=") {
                    settings.retain(|(k, _)| k != "shared_buffers");
                    settings.push(("shared_buffers".into(), v.into()));
                }
            }
            note(format!(
                "starting the private PostgreSQL in {}",
                d.display()
            ));
            let s = private::start_or_find(
                &d,
                &private::StartOptions {
                    settings,
                    port: None,
                    bin: build.map(|b| b.bin),
                    ..Default::default()
                },
            )
            .map_err(|e| dir_error(&d, e))?;
            // Stopped after the run; removed too when this run made it.
            if !s.was_running {
                owned = Some(private::Owned {
                    dir: d.clone(),
                    remove: s.fresh,
                });
            }
            s.running
        }
    };
    Ok((
        DeltaTarget {
            target: r.target(),
            shown: format!("plumb's private PostgreSQL in {}", d.display()),
            private_dir: Some(d),
        },
        owned,
    ))
}

/// An instance error named after the flag: `--dir PATH: ...`, the path said once.
pub fn dir_error(d: &Path, e: plumb_engine::Error) -> crate::Error {
    let text = e.to_string();
    let shown = d.display().to_string();
    let message = match text.strip_prefix(&shown) {
        Some(rest) if rest.starts_with(':') => format!("--dir {shown}{rest}"),
        _ => format!("--dir {shown}: {text}"),
    };
    crate::Error::quoting(message, e)
}

/// How the caches are prepared before the measured runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing done: the caches as the previous run left them.
    AsFound,
    /// Before each run: the private instance restarted (or the engine's own statement), the OS
    /// page cache dropped (root).
    Cold,
    /// One unmeasured run first.
    Warm,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::AsFound => "as found",
            Mode::Cold => "cold",
            Mode::Warm => "warm",
        }
    }
}

pub struct DeltaPlan {
    pub modes: Vec<Mode>,
    /// Measured runs per mode.
    pub repeat: u32,
    /// How often the workload's waits are sampled (engines whose waits are sampled).
    pub sample_every: Duration,
    /// Trace the server's processes over each run (syscalls, block requests, faults).
    pub trace: bool,
    /// Drop the host's page cache before cold runs against a server plumb did not start (it
    /// always does for its private instance).
    pub drop_host_cache: bool,
}

/// Every run's deltas, by mode, with what could not be measured.
pub struct DeltaRuns {
    pub info: ServerInfo,
    pub modes: Vec<ModeRuns>,
    pub unavailable: Vec<String>,
}

/// Measure the workload as `plan` says. `cancel` is polled while the workload runs: when it
/// turns true the statement is cancelled (the command gets the signal plumb received) and the
/// result is [`Interrupted`]. `starting(mode, k, n)` is called as run `k` (0-based, warm-ups
/// included) of `n` begins, for progress.
pub fn run(
    root: &Root,
    wh: &DeltaTarget,
    workload: &Workload,
    plan: &DeltaPlan,
    cancel: &(dyn Fn() -> bool + Sync),
    starting: &mut dyn FnMut(&str, usize, usize),
) -> Result<DeltaRuns> {
    let warmups = plan.modes.iter().filter(|m| **m == Mode::Warm).count();
    let n_runs = plan.modes.len() * plan.repeat as usize + warmups;
    let mut k_run = 0usize;
    let is_root = plumb_sys::os::is_root();
    let mut observer = plumb_engine::observer(&wh.target)
        .map_err(|e| crate::Error::quoting(format!("--engine {e}"), e))?;
    let info = observer.info()?;
    let first = observer.snapshot()?;
    let mut unavailable = first.unavailable.clone();
    // What plumb's own snapshot queries add to the global counters, measured with nothing
    // else of ours running; taken out of every run.
    let own = {
        observer.snapshot()?;
        let a = observer.snapshot()?;
        std::thread::sleep(Duration::from_millis(100));
        let b = observer.snapshot()?;
        let mut d = RunDelta::default();
        delta::subtract(&a, &b, &mut d);
        d
    };
    let mut results = Vec::new();
    for mode in &plan.modes {
        let mut prep = Vec::new();
        let mut runs = Vec::new();
        if *mode == Mode::Warm {
            prep.push(Said::new("prep-warm-up"));
            if cancel() {
                return Err(Interrupted.into());
            }
            let sampler = Sampler {
                obs: &mut *observer,
                session: None,
                every: Duration::from_millis(100),
            };
            starting("warm: the warm-up run", k_run, n_runs);
            k_run += 1;
            let mut session = session_for(wh, workload)?;
            execute(wh, workload, session.as_deref_mut(), sampler, false, cancel)?;
        }
        for i in 0..plan.repeat {
            if cancel() {
                return Err(Interrupted.into());
            }
            starting(
                &format!("{}: run {} of {}", mode.name(), i + 1, plan.repeat),
                k_run,
                n_runs,
            );
            k_run += 1;
            if *mode == Mode::Cold {
                let done = make_cold(wh, is_root, plan.drop_host_cache)?;
                if i == 0 {
                    prep = done;
                }
                // The old observer's server may be gone (restart): connect again.
                observer = plumb_engine::observer(&wh.target)?;
            }
            let ctx = OsContext::find(root, &*observer, wh.private_dir.as_deref());
            if i == 0 && ctx.server_pid.is_none() {
                push_once(&mut unavailable, "OS figures for the server's processes (the server is not on this host, or not visible)");
                if plan.trace {
                    push_once(&mut unavailable, "--trace: the server's processes are not on this host (or not visible), so they cannot be traced");
                }
            }
            let (r, more) =
                measured_run(root, wh, workload, &mut *observer, &ctx, plan, &own, cancel)
                    .with_context(|| {
                        format!(
                            "{} run {} of {} against {}",
                            mode.name(),
                            i + 1,
                            plan.repeat,
                            wh.shown
                        )
                    })?;
            for u in more {
                push_once(&mut unavailable, &u);
            }
            runs.push(r);
        }
        results.push(ModeRuns {
            mode: mode.name().to_string(),
            preparation: prep,
            runs,
        });
    }
    if cancel() {
        return Err(Interrupted.into());
    }
    Ok(DeltaRuns {
        info,
        modes: results,
        unavailable,
    })
}

fn session_for(wh: &DeltaTarget, w: &Workload) -> Result<Option<Box<dyn Session>>> {
    Ok(match w {
        Workload::Sql(_) => Some(plumb_engine::session(&wh.target)?),
        Workload::Cmd(_) => None,
    })
}

fn push_once(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

/// Empty the caches plumb can empty; say what was done and what could not be.
fn make_cold(wh: &DeltaTarget, is_root: bool, drop_host_cache: bool) -> Result<Vec<Said>> {
    let mut done = Vec::new();
    match &wh.private_dir {
        Some(d) => {
            private::restart(d).map_err(|e| {
                crate::Error::quoting(
                    format!("restarting the private instance for a cold run: {e}"),
                    e,
                )
            })?;
            done.push(Said::new("prep-restarted"));
        }
        None => {
            // The engine's own way, where it has one (SQL Server: DBCC DROPCLEANBUFFERS).
            let mut sess = plumb_engine::session(&wh.target)?;
            match sess.empty_cache() {
                Some(Ok(what)) => done.push(Said::new("prep-engine-emptied").text("what", what)),
                Some(Err(why)) => done.push(Said::new("prep-engine-not-emptied").text("why", why)),
                None => done.push(Said::new("prep-engine-no-statement")),
            }
        }
    }
    // The page cache is the whole host's: plumb's private instance has its own files evicted,
    // and nobody else's; the whole host's cache is dropped only when asked.
    if let Some(d) = &wh.private_dir {
        let data = d.join("data");
        let (files, bytes) = plumb_sys::os::evict_files_under(&data)
            .with_context(|| format!("evicting {} from the page cache", data.display()))?;
        done.push(
            Said::new("prep-evicted")
                .count("files", files as f64)
                .bytes("bytes", bytes as f64),
        );
    }
    if !drop_host_cache {
        if wh.private_dir.is_none() {
            done.push(Said::new("prep-host-cache-kept"));
        }
    } else if is_root {
        plumb_sys::os::drop_page_cache()
            .context("dropping the page cache (/proc/sys/vm/drop_caches)")?;
        done.push(Said::new("prep-host-cache-dropped"));
    } else {
        done.push(Said::new("prep-host-cache-needs-root"));
    }
    Ok(done)
}

/// The environment a command workload gets for the private instance.
fn command_env(wh: &DeltaTarget) -> Vec<(String, String)> {
    let mut env = vec![("PLUMB_ENGINE_URL".to_string(), wh.target.url.clone())];
    if let Some(d) = &wh.private_dir {
        if let Ok(Some(r)) = private::status(d) {
            env.extend([
                ("PGHOST".to_string(), r.socket_dir().display().to_string()),
                ("PGPORT".to_string(), r.port.to_string()),
                ("PGUSER".to_string(), private::SUPERUSER.to_string()),
                ("PGDATABASE".to_string(), "postgres".to_string()),
            ]);
        }
    }
    env
}

/// Where the OS figures come from for this run.
struct OsContext {
    server_pid: Option<u32>,
    observer_pid: Option<u32>,
    /// Block devices to count (the one under the data directory, else every disk).
    disks: Vec<String>,
}

impl OsContext {
    fn find(root: &Root, obs: &dyn Observer, private_dir: Option<&Path>) -> OsContext {
        let server_pid = obs.local_server_pid();
        // The data directory: the private one, else the server's working directory.
        let data_dir = private_dir
            .map(|d| d.join("data"))
            .or_else(|| server_pid.and_then(|p| plumb_sys::process::cwd(root, p)));
        let disks = data_dir
            .and_then(|d| plumb_sys::block::device_under(root, &d))
            .map(|d| vec![d])
            .unwrap_or_else(|| plumb_sys::block::whole_disks(root));
        OsContext {
            server_pid,
            observer_pid: obs.own_pid(),
            disks,
        }
    }
}

fn ticks_s() -> f64 {
    plumb_sys::host::clock_ticks_per_s().unwrap_or(100) as f64
}

/// CPU, I/O and delays of one process, as counters; None when it is gone or unreadable.
fn proc_counters(root: &Root, pid: u32) -> Option<BTreeMap<String, f64>> {
    let st = plumb_sys::process::stat(root, pid).ok()?;
    let hz = ticks_s();
    let mut m = BTreeMap::new();
    m.insert(
        "cpu_s".to_string(),
        (st.utime_ticks + st.stime_ticks) as f64 / hz,
    );
    m.insert("user_s".to_string(), st.utime_ticks as f64 / hz);
    m.insert("system_s".to_string(), st.stime_ticks as f64 / hz);
    m.insert("major_faults".to_string(), st.major_faults as f64);
    // cutime and cstime: CPU of children that have exited and been reaped (parallel workers).
    if let (Some(cu), Some(cs)) = (st.cutime_ticks, st.cstime_ticks) {
        m.insert("exited_children_cpu_s".to_string(), (cu + cs) as f64 / hz);
    }
    if let Ok(io) = plumb_sys::process::io(root, pid) {
        for (k, v) in [
            ("storage_read_bytes", io.read_bytes),
            ("storage_write_bytes", io.write_bytes),
            ("read_call_bytes", io.rchar_bytes),
            ("write_call_bytes", io.wchar_bytes),
        ] {
            if let Some(v) = v {
                m.insert(k.to_string(), v as f64);
            }
        }
    }
    // Time on CPU and waiting for one, summed over the threads (MariaDB and SQL Server run one
    // process of many threads); nanoseconds, finer than the 10 ms ticks of utime + stime.
    let threads = plumb_sys::process::thread_schedstats(root, pid);
    let any = !threads.is_empty();
    let run_ns: u64 = threads.iter().map(|s| s.running_ns).sum();
    let delay_ns: u64 = threads.iter().map(|s| s.run_delay_ns).sum();
    if any {
        m.insert("cpu_wait_ms".to_string(), delay_ns as f64 / 1e6);
        // Threads that ended during the run take their time with them; the ticks do not lose it.
        if st.num_threads <= 1 {
            m.insert("cpu_s".to_string(), run_ns as f64 / 1e9);
        }
    }
    Some(m)
}

/// The OS side of a snapshot: host CPU, the disks, the server's processes, the backend.
fn os_snapshot(root: &Root, ctx: &OsContext, backend: Option<u32>) -> Snapshot {
    let mut s = Snapshot {
        engine: "os".into(),
        ..Default::default()
    };
    if let Ok(st) = plumb_sys::cpu::read_stat(root) {
        let hz = ticks_s();
        let t = &st.total;
        for (k, v) in [
            (
                "user_s",
                t.user_ticks.map(|u| u + t.nice_ticks.unwrap_or(0)),
            ),
            (
                "system_s",
                t.system_ticks
                    .map(|x| x + t.irq_ticks.unwrap_or(0) + t.softirq_ticks.unwrap_or(0)),
            ),
            ("iowait_s", t.iowait_ticks),
            ("steal_s", t.steal_ticks),
            ("idle_s", t.idle_ticks),
        ] {
            if let Some(v) = v {
                s.counters.insert(format!("host_cpu.{k}"), v as f64 / hz);
            }
        }
    }
    if let Ok(ds) = plumb_sys::block::read_diskstats(root) {
        for d in ds.iter().filter(|d| ctx.disks.contains(&d.name)) {
            s.put_object(
                "disk",
                &d.name,
                &[
                    "reads",
                    "read_bytes",
                    "read_time_ms",
                    "writes",
                    "write_bytes",
                    "write_time_ms",
                    "flushes",
                ],
                &[
                    d.reads as f64,
                    d.read_bytes as f64,
                    d.read_time_ms as f64,
                    d.writes as f64,
                    d.write_bytes as f64,
                    d.write_time_ms as f64,
                    d.flushes.unwrap_or(0) as f64,
                ],
            );
        }
    }
    if let Some(pm) = ctx.server_pid {
        let mut pids = vec![pm];
        pids.extend(plumb_sys::process::children(root, pm));
        for p in pids {
            if Some(p) == ctx.observer_pid {
                continue;
            }
            if let Some(m) = proc_counters(root, p) {
                let row = s
                    .objects
                    .entry("server_proc".into())
                    .or_default()
                    .entry(p.to_string())
                    .or_default();
                row.extend(m);
            }
        }
    }
    if let Some(b) = backend {
        if let Some(m) = proc_counters(root, b) {
            for (k, v) in m {
                if k != "exited_children_cpu_s" {
                    s.counters.insert(format!("backend.{k}"), v);
                }
            }
        }
    }
    s
}

/// Fold the per-process rows into server totals; say how many processes came and went.
fn fold_server(before: &Snapshot, run: &mut RunDelta) {
    let mut totals: BTreeMap<String, f64> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    run.values.retain(|(g, o, m), v| {
        if g == "server_proc" {
            *totals.entry(m.clone()).or_insert(0.0) += *v;
            seen.insert(o.clone());
            false
        } else {
            true
        }
    });
    if seen.is_empty() {
        return;
    }
    for (m, v) in totals {
        // Reaped children's CPU (parallel workers that came and went) is in the postmaster's
        // cutime/cstime: shown apart, it also holds their time before the run.
        let m = if m == "exited_children_cpu_s" {
            "ended_processes_cpu_s".to_string()
        } else {
            m
        };
        run.values.insert(("server".into(), String::new(), m), v);
    }
    if let Some(procs) = before.objects.get("server_proc") {
        let gone = procs.keys().filter(|p| !seen.contains(*p)).count();
        if gone > 0 {
            run.notes.push(format!(
                "{gone} server process(es) ended during a run: their CPU and I/O after the last look are not in the server totals"
            ));
        }
    }
}

struct Sampler<'a> {
    obs: &'a mut dyn Observer,
    session: Option<u64>,
    every: Duration,
}

/// Run the workload once and measure it.
#[allow(clippy::too_many_arguments)]
fn measured_run(
    root: &Root,
    wh: &DeltaTarget,
    w: &Workload,
    obs: &mut dyn Observer,
    ctx: &OsContext,
    plan: &DeltaPlan,
    own: &RunDelta,
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<(RunDelta, Vec<String>)> {
    let mut session = session_for(wh, w)?;
    let backend = session.as_ref().and_then(|s| s.local_pid());
    // The run is watched: the server's processes and plumb's (a command's too) are its own.
    let watch = plumb_record::watch::Watch::start(&plumb_record::watch::Scope {
        root: root.clone(),
        devices: ctx.disks.clone(),
        also_own: ctx.server_pid.into_iter().collect(),
        accept: Vec::new(),
    });
    // The server traced over the run, plumb's own connection to it left out.
    let tracing = match (plan.trace, ctx.server_pid) {
        (true, Some(pid)) => {
            let (mut t, _) =
                plumb_record::trace::Session::pids(root, &[pid], "the server", false, true)?;
            if let Some(own) = ctx.observer_pid {
                t.unfollow(own);
            }
            Some(plumb_record::trace::Polled::start(t))
        }
        _ => None,
    };
    let os_before = os_snapshot(root, ctx, backend);
    // The workload's own session is read too where the engine keeps its figures.
    obs.set_workload_session(session.as_ref().map(|s| s.id()));
    let eng_before = obs.snapshot()?;
    let children_before = plumb_sys::os::children_cpu_s();
    let sample = obs.samples_waits() || obs.samples_gauges();
    let sampler = Sampler {
        obs,
        session: session.as_ref().map(|s| s.id()),
        every: plan.sample_every,
    };
    let (elapsed, waits, sampler) =
        execute(wh, w, session.as_deref_mut(), sampler, sample, cancel)?;
    let obs = sampler.obs;
    if let Some(s) = session.as_mut() {
        s.flush();
    }
    // The statistics collector reports after the session goes idle.
    std::thread::sleep(Duration::from_millis(50));
    let trace = tracing.map(|t| t.finish("run ended")).transpose()?;
    let eng_after = obs.snapshot();
    obs.set_workload_session(None);
    let eng_after = eng_after?;
    let os_after = os_snapshot(root, ctx, backend);
    let mut run = RunDelta {
        elapsed_s: elapsed.as_secs_f64(),
        interference: Some(watch.finish()),
        ..Default::default()
    };
    delta::subtract(&os_before, &os_after, &mut run);
    delta::subtract(&eng_before, &eng_after, &mut run);
    delta::discount(&mut run, own);
    fold_server(&os_before, &mut run);
    if let Workload::Cmd(_) = w {
        let after = plumb_sys::os::children_cpu_s();
        run.values.insert(
            ("command".into(), String::new(), "cpu_s".into()),
            (after - children_before).max(0.0),
        );
    }
    delta::derive(&mut run, waits.as_ref());
    if let Some(t) = trace {
        for (k, v) in plumb_analyze::trace::delta_values(&t, 12) {
            run.values.insert(k, v);
        }
        run.trace = Some(t);
    }
    // What only a run reads (the workload session's own figures, the curves) and was refused.
    Ok((run, eng_after.unavailable))
}

/// Run the workload while a second thread samples waits; Ctrl-C cancels the statement or
/// stops the command.
fn execute<'a>(
    wh: &DeltaTarget,
    w: &Workload,
    session: Option<&mut (dyn Session + 'static)>,
    sampler: Sampler<'a>,
    sample: bool,
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<(Duration, Option<WaitSamples>, Sampler<'a>)> {
    let done = AtomicBool::new(false);
    let cancel_statement = session.as_ref().and_then(|s| s.canceller());
    let t0 = Instant::now();
    let (res, (sampler, waits)) = std::thread::scope(|sc| {
        let done = &done;
        let h = sc.spawn(move || {
            let sampler = sampler;
            let mut ws = WaitSamples {
                interval_ms: sampler.every.as_secs_f64() * 1000.0,
                ..Default::default()
            };
            let mut err = None;
            let mut sample_once = || {
                if !sample || err.is_some() {
                    return;
                }
                if sampler.obs.samples_waits() {
                    match sampler.obs.sample_waits(sampler.session) {
                        Ok(v) => {
                            ws.taken += 1;
                            for (t, e) in v {
                                *ws.seen.entry(format!("{t}:{e}")).or_insert(0) += 1;
                            }
                        }
                        Err(e) => err = Some(e),
                    }
                }
                if sampler.obs.samples_gauges() {
                    match sampler.obs.sample_gauges() {
                        Ok(v) => {
                            for (name, x) in v {
                                ws.curves.entry(name).or_default().push(x);
                            }
                        }
                        Err(e) => err = Some(e),
                    }
                }
            };
            // The one watch loop: samples on time, not drifting by what each one costs, until
            // the workload ends, or until a stop, which cancels the statement; the samples go on
            // until the workload has ended.
            use plumb_record::ticks::{self, Flow, Ticking};
            let tick = |_| Ok::<_, std::convert::Infallible>(Flow::Go);
            let finished = || done.load(Ordering::SeqCst);
            let stopped = || finished() || cancel();
            let _ = ticks::run(&Ticking::every(sampler.every, &stopped), |t| {
                sample_once();
                tick(t)
            });
            if !finished() {
                if let Some(c) = &cancel_statement {
                    c();
                }
                let _ = ticks::run(&Ticking::every(sampler.every, &finished), |t| {
                    sample_once();
                    tick(t)
                });
            }
            (sampler, if sample { Some((ws, err)) } else { None })
        });
        let res = run_body(wh, w, session, cancel);
        done.store(true, Ordering::SeqCst);
        let out = h.join().expect("the wait sampler does not panic");
        (res, out)
    });
    let elapsed = t0.elapsed();
    if cancel() {
        return Err(Interrupted.into());
    }
    res?;
    let waits = match waits {
        Some((ws, None)) => Some(ws),
        Some((_, Some(e))) => return Err(e.into()),
        None => None,
    };
    Ok((elapsed, waits, sampler))
}

fn run_body(
    wh: &DeltaTarget,
    w: &Workload,
    session: Option<&mut (dyn Session + 'static)>,
    cancel: &(dyn Fn() -> bool + Sync),
) -> Result<()> {
    match (w, session) {
        (Workload::Sql(sql), Some(s)) => {
            s.execute(sql)?;
            Ok(())
        }
        (Workload::Cmd(cmd), _) => {
            let mut c = std::process::Command::new(&cmd[0]);
            c.args(&cmd[1..]);
            for (k, v) in command_env(wh) {
                c.env(k, v);
            }
            let mut child = c
                .spawn()
                .map_err(|e| crate::Error::quoting(format!("cannot run {}: {e}", cmd[0]), e))?;
            loop {
                if let Some(st) = child.try_wait()? {
                    if !st.success() {
                        crate::refuse!(
                            "the workload command {} failed ({st}): its deltas are not reported",
                            cmd.join(" ")
                        );
                    }
                    return Ok(());
                }
                if cancel() {
                    // The signal plumb received (Ctrl-C, SIGTERM, SIGHUP) goes on to the command.
                    plumb_sys::signal::forward_to(child.id());
                    let _ = child.wait();
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        (Workload::Sql(_), None) => unreachable!("an SQL workload always has a session"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Root {
        Root::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/v2-systemd-lvm"
        ))
    }

    #[test]
    fn a_long_statement_is_folded_and_cut_for_the_report() {
        let w = Workload::Sql("SELECT\n   1,\t2".into());
        assert_eq!(w.describe(), "SELECT 1, 2");
        let long = Workload::Sql(format!("SELECT {}", "x, ".repeat(60)));
        let d = long.describe();
        assert_eq!(d.chars().count(), 100);
        assert!(d.ends_with("..."));
        let c = Workload::Cmd(vec!["pgbench".into(), "-T".into(), "5".into()]);
        assert_eq!(c.describe(), "command: pgbench -T 5");
    }

    #[test]
    fn the_os_side_reads_a_captured_host_through_its_root() {
        // PostgreSQL is PID 812 in the fixture; only the named disk is counted.
        let ctx = OsContext {
            server_pid: Some(812),
            observer_pid: None,
            disks: vec!["nvme1n1".into()],
        };
        let s = os_snapshot(&fixture(), &ctx, Some(900));
        let disk = &s.objects["disk"];
        assert_eq!(disk.keys().collect::<Vec<_>>(), ["nvme1n1"]);
        assert_eq!(disk["nvme1n1"]["writes"], 8_912_345.0);
        assert!(s.objects["server_proc"].contains_key("812"));
        assert!(s.counters.contains_key("host_cpu.user_s"));
        assert!(s.counters.contains_key("backend.cpu_s"));
    }

    #[test]
    fn server_processes_fold_into_totals_and_ended_ones_are_noted() {
        let mut before = Snapshot::default();
        for p in ["1", "2", "3"] {
            before.put_object("server_proc", p, &["cpu_s"], &[1.0]);
        }
        let mut run = RunDelta::default();
        for (p, v) in [("1", 0.5), ("2", 0.25)] {
            run.values
                .insert(("server_proc".into(), p.into(), "cpu_s".into()), v);
        }
        run.values.insert(
            (
                "server_proc".into(),
                "1".into(),
                "exited_children_cpu_s".into(),
            ),
            2.0,
        );
        fold_server(&before, &mut run);
        let total = |m: &str| {
            run.values
                .get(&("server".into(), String::new(), m.into()))
                .copied()
        };
        assert_eq!(total("cpu_s"), Some(0.75));
        assert_eq!(total("ended_processes_cpu_s"), Some(2.0));
        assert!(!run.values.keys().any(|(g, _, _)| g == "server_proc"));
        assert_eq!(run.notes.len(), 1, "{:?}", run.notes);
        assert!(run.notes[0].starts_with("1 server process"));
    }
}
