//! `plumb delta`: snapshot the OS and the engine before and after a workload (a statement, a
//! file of SQL, or a command), cold or warm, repeated, and report the deltas.

use crate::cmd_engine::DirArg;
use crate::GlobalArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use plumb_analyze::delta::{self, ModeRuns, RunDelta, WaitSamples};
use plumb_engine::{private, Observer, Session, Snapshot, Target};
use plumb_sys::Root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("workload").required(true).args(["sql", "file", "cmd"]))]
#[command(group = clap::ArgGroup::new("mode").args(["cold", "warm", "both"]))]
pub struct DeltaArgs {
    /// The database: postgres://USER@HOST:PORT/DB (or mysql://, mariadb://, mssql://). Default:
    /// plumb's private PostgreSQL in --dir (started for the run and stopped after, unless it was
    /// already running; removed after when the run created it).
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE")]
    pub engine: Option<String>,
    /// Read the password from this file (must not be readable by others) instead of the URL or
    /// PGPASSWORD.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
    #[command(flatten)]
    pub dir: DirArg,
    /// The workload: one SQL statement (or several separated by semicolons).
    #[arg(long, value_name = "STMT")]
    pub sql: Option<String>,
    /// The workload: a file of SQL.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The workload: a command, run with PGHOST/PGPORT/PGUSER/PGDATABASE and PLUMB_ENGINE_URL
    /// set for the private instance.
    #[arg(last = true, value_name = "CMD")]
    pub cmd: Vec<String>,
    /// Measured runs per mode; figures are the median, with the range.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Empty the caches before each run: restart the private instance (the engine's cache) and
    /// drop the OS page cache (root).
    #[arg(long)]
    pub cold: bool,
    /// Run the workload once unmeasured first, so every measured run finds the caches warm.
    #[arg(long)]
    pub warm: bool,
    /// Cold runs, then warm runs, side by side.
    #[arg(long)]
    pub both: bool,
    /// Hide waits, latches and spinlocks under this many milliseconds of wait time.
    #[arg(long, value_name = "MS", default_value_t = 1.0)]
    pub threshold: f64,
    /// Show every figure, also zeros and waits under the threshold.
    #[arg(long)]
    pub all: bool,
    /// How often to sample what the workload waits on (PostgreSQL), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20, value_parser = clap::value_parser!(u64).range(10..=1000))]
    pub sample_ms: u64,
    /// Settings for the private instance when plumb starts it, NAME=VALUE (repeat), e.g.
    /// shared_buffers=16MB.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
}

enum Workload {
    Sql(String),
    Cmd(Vec<String>),
}

impl Workload {
    fn describe(&self) -> String {
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

/// What the run is pointed at.
struct Where {
    target: Target,
    shown: String,
    /// The private instance's directory, when it is the target.
    private_dir: Option<PathBuf>,
}

pub fn run(g: &GlobalArgs, a: &DeltaArgs) -> Result<i32> {
    plumb_load::signal::install();
    match run_inner(g, a) {
        // Whatever failed after Ctrl-C (a cancelled statement) is the interruption.
        Err(_) | Ok(_) if interrupted() => {
            eprintln!("plumb: interrupted; the statement was cancelled and nothing is reported");
            Ok(crate::cmd_io::interrupted_code())
        }
        other => other,
    }
}

fn run_inner(g: &GlobalArgs, a: &DeltaArgs) -> Result<i32> {
    if !(a.threshold >= 0.0) {
        bail!(
            "--threshold {}: must be zero or more milliseconds",
            a.threshold
        );
    }
    let workload = if let Some(s) = &a.sql {
        if s.trim().is_empty() {
            bail!("--sql: empty statement");
        }
        Workload::Sql(s.clone())
    } else if let Some(f) = &a.file {
        let text = plumb_sys::read_text_bounded(f, 64 << 20)
            .with_context(|| format!("--file {}", f.display()))?;
        if text.trim().is_empty() {
            bail!("--file {}: no SQL in it", f.display());
        }
        Workload::Sql(text)
    } else {
        Workload::Cmd(a.cmd.clone())
    };
    // The target: a URL, or the private instance (started now if needed, stopped after).
    let mut _stop_guard = None;
    let wh = match &a.engine {
        Some(url) => {
            if !a.set.is_empty() {
                bail!("--set configures plumb's private instance when plumb starts it; with --engine the server is yours and keeps its settings (leave out --set)");
            }
            let t = crate::engine_target("--engine", url, a.password_file.as_deref())?;
            // The private instance named by URL still gets restarts for --cold.
            let private_dir = a.dir.dir.clone().filter(|d| {
                private::status(d)
                    .ok()
                    .flatten()
                    .is_some_and(|r| url.contains(&r.dir.display().to_string()))
            });
            Where {
                shown: t.shown(),
                target: t,
                private_dir,
            }
        }
        None => {
            let d = a.dir.dir();
            let r = match private::status(&d).map_err(|e| crate::cmd_engine::dir_err(&d, e))? {
                Some(r) => {
                    if !a.set.is_empty() {
                        eprintln!("plumb: the private instance in {} is already running; --set is not applied (plumb engine stop first)", d.display());
                    }
                    r
                }
                None => {
                    let mut settings = crate::cmd_engine::settings("128MB", &[])?;
                    settings.extend(
                        crate::cmd_engine::settings("128MB", &a.set)?
                            .into_iter()
                            .skip(2),
                    );
                    for s in &a.set {
                        if let Some(v) = s.strip_prefix("shared_buffers=") {
                            settings.retain(|(k, _)| k != "shared_buffers");
                            settings.push(("shared_buffers".into(), v.into()));
                        }
                    }
                    eprintln!("plumb: starting the private PostgreSQL in {}", d.display());
                    let s = private::start_or_find(
                        &d,
                        &private::StartOptions {
                            settings,
                            port: None,
                        },
                    )
                    .map_err(|e| crate::cmd_engine::dir_err(&d, e))?;
                    // Stopped after the run; removed too when this run made it.
                    if !s.was_running {
                        _stop_guard = Some(private::Owned {
                            dir: d.clone(),
                            remove: s.fresh,
                        });
                    }
                    s.running
                }
            };
            Where {
                target: r.target(),
                shown: format!("plumb's private PostgreSQL in {}", d.display()),
                private_dir: Some(d),
            }
        }
    };

    let modes: Vec<&str> = if a.both {
        vec!["cold", "warm"]
    } else if a.cold {
        vec!["cold"]
    } else if a.warm {
        vec!["warm"]
    } else {
        vec!["as found"]
    };
    // The OS figures come from --sysroot's tree when one is given (a captured host: its
    // counters do not move, so only the engine's deltas are real).
    let root = g.root()?;
    let is_root = plumb_sys::os::is_root();

    let mut observer = plumb_engine::observer(&wh.target).map_err(|e| anyhow!("--engine {e}"))?;
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
    for mode in &modes {
        let mut prep = Vec::new();
        let mut runs = Vec::new();
        if *mode == "warm" {
            prep.push("one unmeasured warm-up run first".to_string());
            if interrupted() {
                break;
            }
            run_workload(&wh, &workload, &mut *observer, None)?;
        }
        for i in 0..a.repeat {
            if interrupted() {
                break;
            }
            if *mode == "cold" {
                let done = make_cold(&wh, is_root)?;
                if i == 0 {
                    prep = done;
                }
                // The old observer's server may be gone (restart): connect again.
                observer = plumb_engine::observer(&wh.target)?;
            }
            let ctx = OsContext::find(&root, &*observer, wh.private_dir.as_deref());
            if i == 0 && ctx.server_pid.is_none() {
                push_once(&mut unavailable, "OS figures for the server's processes (the server is not on this host, or not visible)");
            }
            let r = measured_run(
                &root,
                &wh,
                &workload,
                &mut *observer,
                &ctx,
                a.sample_ms,
                &own,
            )
            .with_context(|| {
                format!("{mode} run {} of {} against {}", i + 1, a.repeat, wh.shown)
            })?;
            runs.push(r);
        }
        results.push(ModeRuns {
            mode: mode.to_string(),
            preparation: prep,
            runs,
        });
    }
    if interrupted() {
        return Ok(crate::cmd_io::interrupted_code());
    }
    let report = delta::summarize(
        wh.shown.clone(),
        Some(info),
        workload.describe(),
        a.repeat as usize,
        results,
        unavailable,
        a.threshold,
        a.all,
    );
    crate::emit(g, &report)?;
    Ok(0)
}

fn interrupted() -> bool {
    plumb_load::signal::stop_requested()
}

fn push_once(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_string());
    }
}

/// Empty the caches plumb can empty; say what was done and what could not be.
fn make_cold(wh: &Where, is_root: bool) -> Result<Vec<String>> {
    let mut done = Vec::new();
    match &wh.private_dir {
        Some(d) => {
            private::restart(d)
                .map_err(|e| anyhow!("restarting the private instance for a cold run: {e}"))?;
            done.push("restarted the private instance (empty shared_buffers)".to_string());
        }
        None => {
            // The engine's own way, where it has one (SQL Server: DBCC DROPCLEANBUFFERS).
            let mut sess = plumb_engine::session(&wh.target)?;
            match sess.empty_cache() {
                Some(Ok(what)) => done.push(what),
                Some(Err(why)) => done.push(format!("the engine's cache was NOT emptied: {why}")),
                None => done.push("the engine's own cache was NOT emptied (it has no statement for it; only plumb's private instance is restarted)".to_string()),
            }
        }
    }
    if is_root {
        plumb_sys::os::drop_page_cache()
            .context("dropping the page cache (/proc/sys/vm/drop_caches)")?;
        done.push("dropped the OS page cache (echo 3 > /proc/sys/vm/drop_caches)".to_string());
    } else {
        done.push("the OS page cache was NOT dropped (needs root)".to_string());
    }
    Ok(done)
}

/// The environment a command workload gets for the private instance.
fn command_env(wh: &Where) -> Vec<(String, String)> {
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
            .and_then(|d| device_under(root, &d))
            .map(|d| vec![d])
            .unwrap_or_else(|| plumb_sys::block::whole_disks(root));
        OsContext {
            server_pid,
            observer_pid: obs.own_pid(),
            disks,
        }
    }
}

fn device_under(root: &Root, path: &Path) -> Option<String> {
    let mounts = plumb_sys::mount::read_mountinfo(root, None).ok()?;
    let canon = std::fs::canonicalize(path).ok()?;
    let m = plumb_sys::mount::mount_for_path(&mounts, &canon)?;
    plumb_sys::block::device_for_mount(root, m).ok().flatten()
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
    wh: &Where,
    w: &Workload,
    obs: &mut dyn Observer,
    ctx: &OsContext,
    sample_ms: u64,
    own: &RunDelta,
) -> Result<RunDelta> {
    let mut session = match w {
        Workload::Sql(_) => Some(plumb_engine::session(&wh.target)?),
        Workload::Cmd(_) => None,
    };
    let backend = session.as_ref().and_then(|s| s.local_pid());
    let os_before = os_snapshot(root, ctx, backend);
    let eng_before = obs.snapshot()?;
    let children_before = children_cpu();
    let sample = obs.samples_waits();
    let sampler = Sampler {
        obs,
        session: session.as_ref().map(|s| s.id()),
        every: Duration::from_millis(sample_ms),
    };
    let (elapsed, waits, sampler) = execute(wh, w, session.as_deref_mut(), sampler, sample)?;
    let obs = sampler.obs;
    if let Some(s) = session.as_mut() {
        s.flush();
    }
    // The statistics collector reports after the session goes idle.
    std::thread::sleep(Duration::from_millis(50));
    let eng_after = obs.snapshot()?;
    let os_after = os_snapshot(root, ctx, backend);
    let mut run = RunDelta {
        elapsed_s: elapsed.as_secs_f64(),
        ..Default::default()
    };
    delta::subtract(&os_before, &os_after, &mut run);
    delta::subtract(&eng_before, &eng_after, &mut run);
    delta::discount(&mut run, own);
    fold_server(&os_before, &mut run);
    if let Workload::Cmd(_) = w {
        let after = children_cpu();
        run.values.insert(
            ("command".into(), String::new(), "cpu_s".into()),
            (after - children_before).max(0.0),
        );
    }
    delta::derive(&mut run, waits.as_ref());
    Ok(run)
}

/// CPU seconds of this process's reaped children.
fn children_cpu() -> f64 {
    plumb_sys::os::children_cpu_s()
}

/// An unmeasured run (warm-up).
fn run_workload(
    wh: &Where,
    w: &Workload,
    obs: &mut dyn Observer,
    _ctx: Option<&OsContext>,
) -> Result<()> {
    let mut session = match w {
        Workload::Sql(_) => Some(plumb_engine::session(&wh.target)?),
        Workload::Cmd(_) => None,
    };
    let sampler = Sampler {
        obs,
        session: None,
        every: Duration::from_millis(100),
    };
    execute(wh, w, session.as_deref_mut(), sampler, false)?;
    Ok(())
}

/// Run the workload while a second thread samples waits; Ctrl-C cancels the statement or
/// stops the command.
fn execute<'a>(
    wh: &Where,
    w: &Workload,
    session: Option<&mut (dyn Session + 'static)>,
    sampler: Sampler<'a>,
    sample: bool,
) -> Result<(Duration, Option<WaitSamples>, Sampler<'a>)> {
    let done = AtomicBool::new(false);
    let cancel = session.as_ref().and_then(|s| s.canceller());
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
            let mut cancelled = false;
            // The recorder's schedule: samples on time, not drifting by what each one costs.
            let mut schedule = plumb_record::Schedule::new(sampler.every);
            loop {
                let due =
                    schedule.wait(&|| done.load(Ordering::SeqCst) || (!cancelled && interrupted()));
                if done.load(Ordering::SeqCst) {
                    break;
                }
                if interrupted() && !cancelled {
                    if let Some(c) = &cancel {
                        c();
                    }
                    cancelled = true;
                }
                if !due {
                    continue;
                }
                if sample && err.is_none() {
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
                schedule.advance();
            }
            (sampler, if sample { Some((ws, err)) } else { None })
        });
        let res = run_body(wh, w, session);
        done.store(true, Ordering::SeqCst);
        let out = h.join().expect("the wait sampler does not panic");
        (res, out)
    });
    let elapsed = t0.elapsed();
    if interrupted() {
        return Err(anyhow!("interrupted")).map_err(|e| e.context("Ctrl-C"));
    }
    res?;
    let waits = match waits {
        Some((ws, None)) => Some(ws),
        Some((_, Some(e))) => return Err(e.into()),
        None => None,
    };
    Ok((elapsed, waits, sampler))
}

fn run_body(wh: &Where, w: &Workload, session: Option<&mut (dyn Session + 'static)>) -> Result<()> {
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
                .map_err(|e| anyhow!("cannot run {}: {e}", cmd[0]))?;
            loop {
                if let Some(st) = child.try_wait()? {
                    if !st.success() {
                        bail!(
                            "the workload command {} failed ({st}): its deltas are not reported",
                            cmd.join(" ")
                        );
                    }
                    return Ok(());
                }
                if interrupted() {
                    // The signal plumb received (Ctrl-C, SIGTERM, SIGHUP) goes on to the command.
                    plumb_load::signal::forward_to(child.id());
                    let _ = child.wait();
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        (Workload::Sql(_), None) => unreachable!("an SQL workload always has a session"),
    }
}
