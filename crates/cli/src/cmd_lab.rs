//! `plumb lab`: one command that looks at the host, probes the storage where the data lives,
//! runs database workloads on a private PostgreSQL while recording, and writes the report.
//! Everything it creates is removed at the end (and on Ctrl-C and errors) except the report.

use crate::cmd_io::{interrupted_code, progress_bar, run_levels, storage_under};
use crate::cmd_record::{new_header, now_unix_ms};
use crate::GlobalArgs;
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use plumb_analyze::lab::{self, LabReport, Latency, LoopResult, Pgbench, SeqRead, Window};
use plumb_engine::{private, Observer, Session};
use plumb_load::signal::stop_requested;
use plumb_load::units::parse_duration;
use plumb_store::{Kind, Mark, Writer};
use plumb_sys::rawsample::{RawKind, Sampler, Scope};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub struct LabArgs {
    /// Measure an existing server instead (postgres://, mysql://, mariadb://, mssql://): the
    /// host, the storage under --dir and the engine are read; no DDL and no workload unless
    /// --allow-writes.
    #[arg(long, value_name = "URL", env = "PLUMB_ENGINE")]
    pub target: Option<String>,
    /// Read the target's password from this file (not readable by others).
    #[arg(long, value_name = "FILE", requires = "target")]
    pub password_file: Option<PathBuf>,
    /// With --target (PostgreSQL): run pgbench and the loops in a scratch database plumb creates
    /// and drops. The loops run CHECKPOINT (superuser or pg_checkpoint).
    #[arg(long, requires = "target")]
    pub allow_writes: bool,
    /// The filesystem to assess: plumb works in a new directory under DIR (the private
    /// PostgreSQL's data and WAL, the storage probe's files) and removes it at the end.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    pub dir: PathBuf,
    /// Where to write the report (index.html, report.json, summary.txt, recording.plumb).
    /// Default: ./plumb-lab-DATE-TIME. Must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// A shorter lab (about half a minute): fewer levels, shorter runs, a smaller pgbench.
    #[arg(long)]
    pub quick: bool,
    /// How long pgbench runs (default 40s; --quick 10s). Given with --quick, this wins for
    /// pgbench and the rest stays quick.
    #[arg(long, value_name = "TIME")]
    pub duration: Option<String>,
    /// Memory-pressure experiment (root): the server runs in a memory cgroup of plumb's own;
    /// for a second pgbench run plumb limits it to shared_buffers + 256 MiB and `plumb mem
    /// pressure` holds SIZE (or PCT of that limit) inside it, with a zram swap device.
    #[arg(long, value_name = "SIZE|PCT")]
    pub pressure: Option<String>,
    /// Write-throttle experiment (root): pgbench again with the server's writes to the data
    /// disk throttled through the cgroup io (v2) or blkio (v1) controller, once per rate.
    #[arg(long, value_name = "RATE[,RATE...]")]
    pub throttle_writes: Option<String>,
}

/// How much the pressure program holds.
#[derive(Debug, Clone, Copy)]
enum PressureSize {
    Bytes(u64),
    PctOfLimit(f64),
}

fn parse_pressure(s: &str) -> Result<PressureSize> {
    if let Some(p) = s.trim().strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| anyhow!("--pressure {s}: not a percentage"))?;
        if !(1.0..=200.0).contains(&v) {
            bail!("--pressure {s}: use 1% to 200% of the limit");
        }
        return Ok(PressureSize::PctOfLimit(v));
    }
    let b = plumb_load::units::parse_size(s).map_err(|e| anyhow!("--pressure {s}: {e}"))?;
    if b < (16 << 20) {
        bail!("--pressure {s}: use 16M or more");
    }
    Ok(PressureSize::Bytes(b))
}

/// Rates as typed (for the report) and in bytes per second.
fn parse_rates(s: &str) -> Result<Vec<(String, f64)>> {
    let mut v = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        match plumb_load::units::parse_rate(item) {
            Ok(plumb_load::units::Rate::BytesPerS(b)) if b >= 65536.0 => {
                let label = if item.to_ascii_lowercase().ends_with("/s") {
                    item.to_string()
                } else {
                    format!("{item}/s")
                };
                v.push((label, b))
            }
            Ok(plumb_load::units::Rate::BytesPerS(_)) => {
                bail!("--throttle-writes {item}: use 64KB/s or more")
            }
            Ok(plumb_load::units::Rate::Iops(_)) => {
                bail!("--throttle-writes {item}: give bytes per second, e.g. 5MB/s")
            }
            Err(e) => bail!("--throttle-writes: {e}"),
        }
    }
    if v.is_empty() {
        bail!("--throttle-writes: no rate given (e.g. 5MB/s or 20MB/s,5MB/s)");
    }
    Ok(v)
}

/// How big and how long each step is.
struct Plan {
    shared_buffers: &'static str,
    durability_per_mode: Duration,
    sweep_qds: Vec<u32>,
    sweep_run: Duration,
    probe_file: u64,
    seq_run: Duration,
    scale: u32,
    pgbench: Duration,
    bulk_iterations: u32,
    single_iterations: u32,
    /// pgbench runs of the experiments.
    experiment: Duration,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                shared_buffers: "128MB",
                durability_per_mode: Duration::from_millis(400),
                sweep_qds: vec![1, 4, 16, 32],
                sweep_run: Duration::from_secs(1),
                probe_file: 256 << 20,
                seq_run: Duration::from_millis(1500),
                scale: 5,
                pgbench: Duration::from_secs(10),
                bulk_iterations: 3,
                single_iterations: 40,
                experiment: Duration::from_secs(10),
            }
        } else {
            Plan {
                shared_buffers: "256MB",
                durability_per_mode: Duration::from_secs(1),
                sweep_qds: vec![1, 2, 4, 8, 16, 32, 64],
                sweep_run: Duration::from_secs(2),
                probe_file: 1 << 30,
                seq_run: Duration::from_secs(3),
                scale: 30,
                pgbench: Duration::from_secs(40),
                bulk_iterations: 10,
                single_iterations: 250,
                experiment: Duration::from_secs(20),
            }
        }
    }

    /// Disk space the lab needs at most: the probe file, pgbench's tables and indexes (about
    /// 16 MB per scale unit), the loops' table and WAL up to max_wal_size.
    fn space_needed(&self) -> u64 {
        self.probe_file + self.scale as u64 * (16 << 20) + (1 << 30)
    }
}

/// The files a lab writes into its report directory.
const LAB_FILES: [&str; 4] = [
    "index.html",
    "report.json",
    "summary.txt",
    "recording.plumb",
];

/// Removes what the lab created, on every way out.
struct Cleanup {
    work: Option<PathBuf>,
    instance: Option<PathBuf>,
    /// The report directory: what plumb wrote there is removed unless the lab finished.
    out: Option<plumb_report::out::OutDir>,
    /// The experiments' cgroup (plumb and the server inside).
    cgroup: Option<plumb_load::labcg::LabCgroup>,
    /// A running `plumb mem pressure` (it removes its zram swap when it stops).
    pressure: Option<std::process::Child>,
    /// A scratch database created on a --target server: dropped at the end.
    scratch_db: Option<(plumb_engine::Target, String)>,
}

/// Stop a pressure child the way Ctrl-C would, so it takes down its swap device.
fn stop_pressure(c: &mut std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(60) {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = c.kill();
    let _ = c.wait();
}

impl Cleanup {
    fn finish(&mut self) {
        if let Some(cg) = &self.cgroup {
            let _ = cg.set_memory_limit(None);
        }
        if let Some(mut c) = self.pressure.take() {
            stop_pressure(&mut c);
        }
        if let Some((t, db)) = self.scratch_db.take() {
            let dropped = plumb_engine::session(&t).and_then(|mut s| {
                s.execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
                    .or_else(|_| s.execute(&format!("DROP DATABASE IF EXISTS {db}")))
            });
            if let Err(e) = dropped {
                eprintln!(
                    "plumb: warning: could not drop the scratch database {db} on {}: {e}; drop it by hand",
                    t.shown()
                );
            }
        }
        if let Some(d) = self.instance.take() {
            if let Err(e) = private::remove(&d) {
                eprintln!("plumb: warning: stopping and removing the lab's PostgreSQL: {e}");
            }
        }
        if let Some(w) = self.work.take() {
            if let Err(e) = std::fs::remove_dir_all(&w) {
                eprintln!("plumb: warning: removing {}: {e}", w.display());
            }
        }
        if let Some(o) = self.out.take() {
            o.remove(&LAB_FILES);
        }
        // Last: plumb moves back out and the (now empty) cgroup goes.
        self.cgroup = None;
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A 1-second recording taken on a thread of its own while the lab runs.
struct Recorder {
    path: PathBuf,
    started_unix_ms: u64,
    /// The engine's counters, read with each sample.
    engine: Arc<std::sync::Mutex<crate::engine_rec::EngineSampler>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<Result<u64>>>,
}

impl Recorder {
    fn start(path: &Path, pids: Vec<u32>, labels: Vec<(&str, String)>) -> Result<Recorder> {
        let root = plumb_sys::Root::host();
        let interval = Duration::from_secs(1);
        let header = new_header(
            &root,
            interval,
            labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        let started = header.started_unix_ms;
        let mut w = Writer::create(path, &header).map_err(|e| anyhow!("{e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let engine = Arc::new(std::sync::Mutex::new(
            crate::engine_rec::EngineSampler::new(None),
        ));
        let eng = engine.clone();
        let handle = std::thread::spawn(move || -> Result<u64> {
            let mut sampler = Sampler::new(root, Scope { pids });
            let t0 = Instant::now();
            let mut k = 0u32;
            let mut n = 0u64;
            loop {
                let due = t0 + interval * k;
                while Instant::now() < due && !flag.load(Ordering::Relaxed) {
                    std::thread::sleep((due - Instant::now()).min(Duration::from_millis(50)));
                }
                let (vals, _) = sampler.take();
                let engine_vals = eng.lock().map(|mut e| e.take()).unwrap_or_default();
                let mut rows: Vec<(&str, Kind, u64)> = vals
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
                rows.extend(
                    engine_vals
                        .iter()
                        .map(|(n, v)| (n.as_str(), Kind::Counter, *v)),
                );
                w.sample(now_unix_ms().saturating_sub(started), &rows)?;
                n += 1;
                if flag.load(Ordering::Relaxed) {
                    return Ok(n);
                }
                k = ((t0.elapsed().as_nanos() / interval.as_nanos()) as u32 + 1).max(k + 1);
            }
        });
        Ok(Recorder {
            path: path.to_path_buf(),
            started_unix_ms: started,
            engine,
            stop,
            handle: Some(handle),
        })
    }

    /// Record this engine session's counters from the next sample on.
    fn set_engine(&self, t: &plumb_engine::Target) {
        match plumb_engine::observer(t) {
            Ok(o) => {
                if let Ok(mut e) = self.engine.lock() {
                    e.replace(o);
                }
            }
            Err(e) => {
                eprintln!("plumb: warning: the recording will not have the engine's counters: {e}")
            }
        }
    }

    /// Seconds since the recording started.
    fn now_s(&self) -> f64 {
        now_unix_ms().saturating_sub(self.started_unix_ms) as f64 / 1000.0
    }

    fn mark(&self, name: &str, detail: Option<String>) -> f64 {
        let t_ms = now_unix_ms().saturating_sub(self.started_unix_ms);
        if let Err(e) = plumb_store::append_mark(
            &self.path,
            &Mark {
                t_ms,
                name: name.to_string(),
                detail,
            },
        ) {
            eprintln!("plumb: warning: cannot mark the recording: {e}");
        }
        t_ms as f64 / 1000.0
    }

    fn stop(&mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let n = match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the recorder thread panicked"))?,
            None => Ok(0),
        };
        // Close the engine session: the server (or the scratch database) may go next.
        if let Ok(mut e) = self.engine.lock() {
            *e = crate::engine_rec::EngineSampler::new(None);
        }
        n
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Phase boundaries, for the windows drawn from the recording.
struct Phases(Vec<(String, f64, f64)>);

fn step(pb: &indicatif::ProgressBar, n: u32, of: u32, what: &str) {
    pb.set_message(format!("plumb lab [{n}/{of}] {what}"));
    if pb.is_hidden() {
        eprintln!("plumb lab [{n}/{of}] {what}");
    }
}

fn interrupted() -> Result<i32> {
    eprintln!("plumb: interrupted; the lab's PostgreSQL was stopped and its files removed");
    Ok(interrupted_code())
}

/// The file in a lab's work directory that names the lab's PID.
const LAB_MARKER: &str = "plumb-lab.pid";

/// Labs killed outright (SIGKILL, out of memory, a power cut) leave their work directory, and
/// maybe their PostgreSQL running in it. A lab directory here whose marker names a PID that is
/// gone, owned by this user, is stopped and removed.
fn remove_dead_labs(parent: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(parent) else {
        return;
    };
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    for e in rd.flatten() {
        let dir = e.path();
        let named = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("plumb-lab-"));
        let Ok(m) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !named || !m.is_dir() || m.uid() != me {
            continue;
        }
        let marker = dir.join(LAB_MARKER);
        let pid = match std::fs::symlink_metadata(&marker) {
            Ok(mm) if mm.is_file() && mm.uid() == me && mm.len() < 32 => {
                std::fs::read_to_string(&marker)
                    .ok()
                    .and_then(|t| t.trim().parse::<u32>().ok())
            }
            _ => None,
        };
        let Some(pid) = pid else { continue };
        if plumb_sys::process::alive(pid) {
            continue;
        }
        eprintln!(
            "plumb: {} was left by a lab that was killed (PID {pid}); stopping its PostgreSQL and removing it",
            dir.display()
        );
        let pg = dir.join("pg");
        // Once more after a pause: the dead lab's server may have been starting or stopping.
        let removed = private::remove(&pg).or_else(|_| {
            std::thread::sleep(Duration::from_secs(1));
            private::remove(&pg)
        });
        if let Err(err) = removed {
            eprintln!("plumb: warning: {err}; {} left alone", dir.display());
            continue;
        }
        if let Err(err) = std::fs::remove_dir_all(&dir) {
            eprintln!("plumb: warning: removing {}: {err}", dir.display());
        }
    }
}

/// A new directory of plumb's own under `parent` (never one that was there: a name taken, or
/// a link planted, makes it try another). Others may pass through it (the server's user must
/// reach its instance inside) but not list it.
fn new_work_dir(parent: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let pid = std::process::id();
    let mut last = None;
    for i in 0..100u64 {
        let salt = (now_unix_ms() ^ (i << 20)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44;
        let p = parent.join(format!("plumb-lab-{pid}-{salt:05x}"));
        match std::fs::DirBuilder::new().mode(0o711).create(&p) {
            Ok(()) => {
                // The mode asked for, whatever the umask.
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o711))
                    .map_err(|e| anyhow!("--dir: {}: {e}", p.display()))?;
                // Says whose it is, so a later lab can clean up after this one if it is killed.
                plumb_report::out::write_new(
                    "--dir",
                    &p.join(LAB_MARKER),
                    format!("{pid}\n").as_bytes(),
                )?;
                return Ok(p);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => bail!("--dir: cannot create {}: {e}", p.display()),
        }
    }
    bail!(
        "--dir {}: cannot create a new directory there: {}",
        parent.display(),
        last.map(|e| e.to_string()).unwrap_or_default()
    )
}

fn default_out() -> PathBuf {
    let secs = now_unix_ms() / 1000;
    let (y, mo, d) = crate::cmd_record::civil((secs / 86400) as i64);
    let t = secs % 86400;
    PathBuf::from(format!(
        "plumb-lab-{y:04}{mo:02}{d:02}-{:02}{:02}{:02}",
        t / 3600,
        t / 60 % 60,
        t % 60
    ))
}

pub fn run(g: &GlobalArgs, a: &LabArgs) -> Result<i32> {
    plumb_load::signal::install();
    let mut cleanup = Cleanup {
        work: None,
        instance: None,
        out: None,
        cgroup: None,
        pressure: None,
        scratch_db: None,
    };
    let r = run_lab(g, a, &mut cleanup);
    if let (Err(e), Some(d)) = (&r, &cleanup.instance) {
        // A server that died explains the error better than the error does.
        if d.join("data").exists() && matches!(private::status(d), Ok(None)) {
            let e = anyhow!("{e:#}");
            return Err(e.context(
                "the lab's PostgreSQL stopped unexpectedly (killed, or out of memory or disk); the lab cannot go on, and what it created was removed",
            ));
        }
    }
    r
}

fn run_lab(g: &GlobalArgs, a: &LabArgs, cleanup: &mut Cleanup) -> Result<i32> {
    let mut plan = Plan::new(a.quick);
    if let Some(d) = &a.duration {
        let d = parse_duration(d).map_err(|e| anyhow!("--duration {d}: {e}"))?;
        if d < Duration::from_secs(2) {
            bail!("--duration: use 2s or more (pgbench needs time to settle)");
        }
        plan.pgbench = d;
    }
    if g.sysroot.is_some() {
        bail!(
            "--sysroot: the lab measures and loads the live host; it cannot run on a captured tree"
        );
    }
    if g.format() == plumb_report::Format::Csv {
        bail!("--format csv: the lab's report is not one table; use text or json (report.json is written either way)");
    }
    let pressure = a.pressure.as_deref().map(parse_pressure).transpose()?;
    let rates = a.throttle_writes.as_deref().map(parse_rates).transpose()?;
    // SAFETY: geteuid cannot fail.
    let root_user = unsafe { libc::geteuid() } == 0;
    if a.target.is_some() && (pressure.is_some() || rates.is_some()) {
        bail!("--pressure and --throttle-writes run only on plumb's private instance (they would move a server of yours into plumb's cgroup); leave out --target");
    }
    if let Some(url) = &a.target {
        plumb_engine::Kind::from_url(url).map_err(|e| anyhow!("--target {e}"))?;
    }
    if (pressure.is_some() || rates.is_some()) && !root_user {
        bail!(
            "--pressure and --throttle-writes need root: they create a cgroup for the server{}",
            if pressure.is_some() {
                " and a zram swap device"
            } else {
                ""
            }
        );
    }
    let meta = std::fs::metadata(&a.dir).map_err(|e| anyhow!("--dir {}: {e}", a.dir.display()))?;
    if !meta.is_dir() {
        bail!("--dir {}: not a directory", a.dir.display());
    }
    let out = a.out.clone().unwrap_or_else(default_out);
    plumb_report::out::check_out_dir("--out", &out)?;
    let free = plumb_load::target::free_bytes(&a.dir).unwrap_or(u64::MAX);
    // Shrink pgbench to the space there is, down to scale 1; below that, say so.
    let base = plan.space_needed() - plan.scale as u64 * (16 << 20);
    if free < plan.space_needed() {
        let fit = free.saturating_sub(base) / (16 << 20) / 2;
        if fit < 1 {
            bail!(
                "--dir {}: only {} free; the lab needs about {} there",
                a.dir.display(),
                plumb_report::fmt::bytes(free),
                plumb_report::fmt::bytes(base + (32 << 20))
            );
        }
        plan.scale = plan.scale.min(fit as u32);
    }
    let bin = private::find_bin().map_err(|e| anyhow!("{e}"))?;
    let pgbench_bin = bin.join("pgbench");
    if !pgbench_bin.exists() {
        bail!(
            "{}: not found (apt-get install postgresql)",
            pgbench_bin.display()
        );
    }

    let started = Instant::now();
    let started_unix_ms = now_unix_ms();
    remove_dead_labs(&a.dir);
    let work = new_work_dir(&a.dir)?;
    cleanup.work = Some(work.clone());
    // A new directory, or an empty one of the user's: on failure plumb removes what it wrote
    // there (and the directory, if it made it).
    cleanup.out = Some(plumb_report::out::out_dir("--out", &out)?);
    let mut skipped = Vec::new();
    let total = 7 + pressure.is_some() as u32 + rates.is_some() as u32;
    let pb = progress_bar(total as u64, "plumb lab");
    pb.enable_steady_tick(Duration::from_millis(200));

    // 1. The server (plumb's private instance, or the --target), and the host it runs on.
    if pressure.is_some() || rates.is_some() {
        let cg = plumb_load::labcg::LabCgroup::create(
            &format!("plumb-lab-{}", std::process::id()),
            pressure.is_some(),
            rates.is_some(),
        )
        .map_err(|e| anyhow!("setting up the experiments' cgroup: {e}"))?;
        cleanup.cgroup = Some(cg);
    }
    let server = match &a.target {
        None => {
            step(&pb, 1, total, "starting a private PostgreSQL");
            let pg_dir = work.join("pg");
            cleanup.instance = Some(pg_dir.clone());
            let settings: Vec<(String, String)> = [
                ("shared_buffers", plan.shared_buffers),
                ("max_wal_size", "2GB"),
                // Checkpoints come when the loops ask for them (SQL Server's trace flag 3505 does this).
                ("checkpoint_timeout", "30min"),
                ("track_wal_io_timing", "on"),
                ("max_connections", "40"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            let running = private::start(
                &pg_dir,
                &private::StartOptions {
                    settings,
                    port: None,
                },
            )
            .map_err(|e| anyhow!("starting the lab's PostgreSQL in {}: {e}", pg_dir.display()))?;
            Server::private(running)?
        }
        Some(url) => {
            step(&pb, 1, total, "connecting to the target (read-only)");
            Server::target(url, a.password_file.as_deref())?
        }
    };
    pb.inc(1);
    if stop_requested() {
        return interrupted();
    }
    let engine_version = server.version.clone();
    let root = plumb_sys::Root::host();
    let pids: Vec<u32> = server.local_pid.into_iter().collect();
    // Where the data is when this host can see it; else where plumb probes.
    let data_dir = server
        .data_dir
        .clone()
        .filter(|d| d.exists())
        .unwrap_or_else(|| work.clone());
    let sample =
        plumb_sys::snapshot::collect(&root, &pids, Some(&data_dir)).context("reading the host")?;
    let host =
        plumb_analyze::os::build(&sample, plumb_sys::host::page_size_bytes().unwrap_or(4096));
    let memory = {
        let kind = server.mem_kind();
        let settings = plumb_sys::engine_conf::read(&root, kind, server.local_pid);
        let total = host.memory.total_bytes.unwrap_or(0);
        let limit = host
            .processes
            .iter()
            .find(|p| p.role != "plumb")
            .or(host.processes.first())
            .and_then(|p| p.memory_limit_bytes);
        (total > 0)
            .then(|| plumb_analyze::mem::assume(kind, total, limit, host.cgroup_mode, &settings))
    };
    let (storage, trace_devs) = storage_under(&data_dir);
    let trace_devs_for_throttle = trace_devs.clone();
    let disk = storage.as_ref().and_then(|s| s.disks.first().cloned());
    if server.private.is_none() {
        let (probe_storage, _) = storage_under(&work);
        let here = probe_storage.as_ref().map(|s| s.disks.clone());
        let there = storage.as_ref().map(|s| s.disks.clone());
        if server.data_dir.as_ref().is_some_and(|d| d.exists()) && here != there {
            skipped.push(format!(
                "the storage probes ran in {} (disks {}), not on the server's data disks ({}): pass --dir on the data's filesystem to probe those",
                work.display(),
                here.unwrap_or_default().join(", "),
                there.unwrap_or_default().join(", ")
            ));
        } else if !server.data_dir.as_ref().is_some_and(|d| d.exists()) {
            skipped.push(format!(
                "the server's data directory is not on this host (or not readable): the storage probes ran in {} instead",
                work.display()
            ));
        }
    }
    let mut recorder = Recorder::start(
        &out.join("recording.plumb"),
        pids.clone(),
        vec![
            ("run", "lab".to_string()),
            ("engine", engine_version.clone().unwrap_or_default()),
        ],
    )
    .context("starting the recording")?;
    recorder.mark("lab started", Some(server.shown.clone()));
    recorder.set_engine(&server.target);
    let mut phases = Phases(Vec::new());

    // 2. Storage where the data and WAL live.
    step(&pb, 2, total, "durability: what one durable write costs");
    let t = recorder.mark("durability probe", None);
    let probe = plumb_load::durability::run_probe(
        &plumb_load::durability::ProbeOptions {
            // The work directory: on the data's filesystem for the private instance.
            path: work.clone(),
            block_sizes: vec![8192],
            per_mode: plan.durability_per_mode,
            warmup: Duration::from_millis(200),
            trace_devs,
            keep: false,
        },
        &|_, _, _| {},
    );
    let durability = match probe {
        Ok(p) => Some(plumb_analyze::durability::build(
            &p,
            if server.private.is_some() {
                data_dir.join("pg_wal")
            } else {
                work.clone()
            },
            storage.clone(),
            plan.durability_per_mode.as_secs_f64(),
        )),
        Err(plumb_load::Error::Interrupted) => return interrupted(),
        Err(e) => return Err(anyhow!("durability probe in {}: {e}", work.display())),
    };
    phases
        .0
        .push(("durability probe".into(), t, recorder.now_s()));
    pb.inc(1);

    step(
        &pb,
        3,
        total,
        "random-read queue-depth sweep and sequential read",
    );
    let t = recorder.mark("queue-depth sweep", None);
    let probe_file = work.join("plumb-lab-probe.dat");
    let (sweep, seq_read) = match sweep_and_seq(&plan, &probe_file)? {
        Some(v) => v,
        None => return interrupted(),
    };
    phases.0.push(("storage sweep".into(), t, recorder.now_s()));
    pb.inc(1);

    // 3. Database workloads: on the private instance; on a target only with --allow-writes,
    // in a scratch database plumb creates and drops.
    let cpus = host.cpu.online_cpus.unwrap_or(1).max(1);
    let clients = (cpus * 2).min(32);
    let mut pgbench = None;
    let mut loops = Vec::new();
    let workloads = if server.private.is_some() {
        true
    } else if server.kind != plumb_engine::Kind::Postgres {
        skipped.push(format!(
            "workloads: pgbench and the insert/CHECKPOINT loops are PostgreSQL's; {} was only read",
            server.kind.name()
        ));
        false
    } else if !a.allow_writes {
        skipped.push("workloads: pgbench and the insert/CHECKPOINT loops create tables; against an existing server they run only with --allow-writes (in a scratch database plumb creates and drops)".into());
        false
    } else {
        true
    };
    let lab_db = if server.private.is_some() {
        "plumb_lab".to_string()
    } else {
        format!("plumb_lab_{}", std::process::id())
    };
    let (no_password, password) = split_password(&server.target.url);
    let conn_url = with_database(&no_password, &lab_db);
    // A password file wins over the URL's, as in every connection plumb makes.
    let password = server.target.password.clone().or(password);
    let mut env: Vec<(&str, String)> = Vec::new();
    if let Some(p) = &password {
        env.push(("PGPASSWORD", p.clone()));
    }
    let pg_env = PgbenchRun {
        bin: &pgbench_bin,
        env: &env,
        conn: &conn_url,
        work: &work,
        clients,
        threads: cpus,
    };
    if workloads {
        let mut admin = plumb_engine::session(&server.target).map_err(|e| anyhow!("{e}"))?;
        admin
            .execute(&format!("CREATE DATABASE {lab_db}"))
            .map_err(|e| anyhow!("creating the lab database {lab_db}: {e}"))?;
        if server.private.is_none() {
            cleanup.scratch_db = Some((server.target.clone(), lab_db.clone()));
        }
        let mut lab_target = plumb_engine::Target::new(&conn_url);
        lab_target.password = password.clone();
        // The database's own counters (commits, block reads) from now on.
        recorder.set_engine(&lab_target);
        step(
            &pb,
            4,
            total,
            &format!("pgbench: initialising scale {}", plan.scale),
        );
        let t = recorder.mark("pgbench init", Some(format!("scale {}", plan.scale)));
        let t0 = Instant::now();
        match run_child(
            Command::new(&pgbench_bin)
                .args(["-i", "-q", "-s", &plan.scale.to_string()])
                .arg(&conn_url)
                .envs(env.iter().cloned())
                .current_dir(&work),
        )? {
            Child::Done(o) => {
                if !o.status.success() {
                    bail!(
                        "pgbench -i failed: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    );
                }
            }
            Child::Interrupted => return interrupted(),
        }
        let init_s = t0.elapsed().as_secs_f64();
        phases.0.push(("pgbench init".into(), t, recorder.now_s()));
        step(
            &pb,
            5,
            total,
            &format!(
                "pgbench: {clients} clients for {}",
                plumb_report::fmt::duration(plan.pgbench.as_secs_f64())
            ),
        );
        let t = recorder.mark(
            "pgbench run",
            Some(format!("{clients} clients, scale {}", plan.scale)),
        );
        let mut p = match run_pgbench(&pg_env, plan.pgbench)? {
            Some(p) => p,
            None => return interrupted(),
        };
        p.scale = plan.scale;
        p.init_s = init_s;
        p.wal_sync_method = server
            .settings
            .get("wal_sync_method")
            .cloned()
            .unwrap_or_else(|| "fdatasync".into());
        p.database_bytes = server
            .private
            .is_some()
            .then(|| dir_bytes(&data_dir.join("base")));
        phases.0.push(("pgbench".into(), t, recorder.now_s()));
        pgbench = Some(p);
        pb.inc(1);

        // The wal_sync_method comparison changes a server-wide setting: only on plumb's own.
        let methods: Vec<String> = if server.private.is_some() {
            vec!["fdatasync".into(), "open_datasync".into()]
        } else {
            skipped.push("the wal_sync_method comparison: it changes a server-wide setting, so against an existing server the loops run under its own setting only".into());
            vec![server
                .settings
                .get("wal_sync_method")
                .cloned()
                .unwrap_or_else(|| "fdatasync".into())]
        };
        step(&pb, 6, total, "insert/CHECKPOINT loops per wal_sync_method");
        let mut obs = plumb_engine::observer(&lab_target).map_err(|e| anyhow!("{e}"))?;
        let mut sess = plumb_engine::session(&lab_target).map_err(|e| anyhow!("{e}"))?;
        sess.execute(
            "CREATE TABLE dummy_test (id serial, col1 varchar(2000) DEFAULT repeat('T', 2000)); \
             ALTER TABLE dummy_test ALTER col1 SET STORAGE PLAIN",
        )
        .map_err(|e| anyhow!("creating the loops' table: {e}"))?;
        for method in &methods {
            let method = method.as_str();
            if server.private.is_some() {
                for sql in [
                    format!("ALTER SYSTEM SET wal_sync_method = '{method}'"),
                    "SELECT pg_reload_conf()".to_string(),
                ] {
                    admin
                        .execute(&sql)
                        .map_err(|e| anyhow!("setting wal_sync_method = {method}: {e}"))?;
                }
                // The reload reaches every backend at its next statement; wait until ours sees it.
                let t1 = Instant::now();
                loop {
                    sess.execute("SELECT 1").map_err(|e| anyhow!("{e}"))?;
                    let now = obs.info().map_err(|e| anyhow!("{e}"))?;
                    if now.settings.get("wal_sync_method").map(String::as_str) == Some(method) {
                        break;
                    }
                    if t1.elapsed() > Duration::from_secs(10) {
                        bail!("wal_sync_method = {method} did not take effect within 10 s");
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            for scenario in ["bulk", "single"] {
                recorder.mark(&format!("loop {scenario} {method}"), None);
                let r = run_loop(
                    scenario,
                    method,
                    if scenario == "bulk" {
                        plan.bulk_iterations
                    } else {
                        plan.single_iterations
                    },
                    sess.as_mut(),
                    obs.as_mut(),
                    storage
                        .as_ref()
                        .map(|s| s.disks.clone())
                        .unwrap_or_default(),
                    &|| recorder.now_s(),
                )?;
                let Some((r, t0, t1)) = r else {
                    return interrupted();
                };
                let what = if scenario == "bulk" {
                    "10,000-row transactions"
                } else {
                    "single-row commits"
                };
                phases.0.push((format!("{what}, {method}"), t0, t1));
                loops.push(r);
            }
        }
        if server.private.is_some() {
            for sql in [
                "ALTER SYSTEM RESET wal_sync_method",
                "SELECT pg_reload_conf()",
            ] {
                admin.execute(sql).map_err(|e| anyhow!("{e}"))?;
            }
        }
        drop(sess);
        drop(obs);
        pb.inc(1);
    } else {
        pb.inc(3);
    }

    // Optional experiments: pgbench again, changed.
    let mut experiments = Vec::new();
    let mut n = 7;
    // Experiments run only on the private instance (checked before anything started).
    let base_run = pgbench.clone().unwrap_or_else(|| Pgbench {
        scale: plan.scale,
        ..parse_pgbench("number of transactions actually processed: 0\ntps = 0\n").expect("parses")
    });
    if let Some(size) = pressure {
        step(&pb, n, total, "experiment: pgbench under memory pressure");
        n += 1;
        let sb = plumb_load::units::parse_size(plan.shared_buffers).unwrap_or(128 << 20);
        let limit = sb + (256 << 20);
        let hold = match size {
            PressureSize::Bytes(b) => b,
            PressureSize::PctOfLimit(p) => (limit as f64 * p / 100.0) as u64,
        };
        let Some(mut e) = pressure_experiment(
            cleanup,
            &recorder,
            &pg_env,
            plan.experiment,
            limit,
            hold,
            server.local_pid.unwrap_or(0),
            sb,
        )?
        else {
            return interrupted();
        };
        e.0.baseline = Some(base_run.clone());
        if let Some(c) = e.0.changed.as_mut() {
            c.scale = plan.scale;
            e.0.notes.insert(0, compare_runs(&base_run, c));
        }
        phases.0.push(e.1);
        experiments.push(e.0);
        pb.inc(1);
    }
    if let Some(rates) = &rates {
        step(
            &pb,
            n,
            total,
            "experiment: pgbench with the server's writes throttled",
        );
        let dev = trace_devs_for_throttle.first().copied().ok_or_else(|| {
            anyhow!(
                "--throttle-writes: no disk found under {}",
                data_dir.display()
            )
        })?;
        let cg = cleanup
            .cgroup
            .as_ref()
            .ok_or_else(|| anyhow!("no cgroup for the throttle"))?;
        for (label, bps) in rates {
            let bps = *bps;
            // Start clean: no dirty data left from the loops for the throttled writeback to
            // drag behind the WAL (ext4's ordered mode makes a commit wait for it).
            plumb_engine::session(&server.target)
                .and_then(|mut s| s.execute("CHECKPOINT"))
                .map_err(|e| anyhow!("CHECKPOINT before the write throttle: {e}"))?;
            // SAFETY: sync has no failure mode worth reporting.
            unsafe { libc::sync() };
            cg.set_write_bps(dev, Some(bps as u64))
                .map_err(|e| anyhow!("--throttle-writes {label}: {e}"))?;
            let t = recorder.mark("write throttle", Some(format!("{label} on {dev}")));
            let r = run_pgbench(&pg_env, plan.experiment);
            let t1 = recorder.mark("write throttle lifted", None);
            cg.set_write_bps(dev, None)
                .map_err(|e| anyhow!("lifting the write throttle: {e}"))?;
            let Some(mut p) = r? else {
                return interrupted();
            };
            p.scale = plan.scale;
            let phase = format!("pgbench, writes throttled to {label}");
            phases.0.push((phase.clone(), t, t1));

            experiments.push(plumb_analyze::lab::Experiment {
                name: "write throttle".into(),
                phase: phase.clone(),
                setting: format!(
                    "the server's writes to {} ({dev}) limited to {label} (cgroup io/blkio throttle)",
                    disk.clone().unwrap_or_default()
                ),
                notes: vec![compare_runs(&base_run, &p)],
                baseline: Some(base_run.clone()),
                changed: Some(p),
                window: None,
            });
        }
        pb.inc(1);
    }

    // 4. The report.
    step(&pb, total, total, "writing the report");
    recorder.mark("lab finished", None);
    recorder.stop().context("the recording")?;
    let rec = plumb_store::read(&recorder.path).map_err(|e| anyhow!("{e}"))?;
    let windows: Vec<Window> = phases
        .0
        .iter()
        .map(|(name, s, e)| {
            let workload = !name.starts_with("durability") && !name.starts_with("storage");
            lab::window(
                &rec,
                name,
                workload,
                *s,
                *e,
                disk.as_deref(),
                server.local_pid,
            )
        })
        .collect();
    for e in &mut experiments {
        e.window = windows.iter().find(|w| w.phase == e.phase).cloned();
    }
    let mut report = LabReport {
        report_schema: lab::REPORT_SCHEMA,
        command_line: crate::cmd_io::command_line(),
        started_unix_ms,
        elapsed_s: started.elapsed().as_secs_f64(),
        quick: a.quick,
        target: server.shown.clone(),
        engine_version,
        data_dir: data_dir.clone(),
        out_dir: out.clone(),
        host,
        memory,
        durability,
        sweep,
        seq_read,
        pgbench,
        loops,
        experiments,
        windows,
        findings: Vec::new(),
        skipped: std::mem::take(&mut skipped),
        recording: Some(out.join("recording.plumb")),
    };
    report.findings = lab::findings(&report);
    pb.finish_and_clear();
    write_report(&report, &rec, &out)?;
    // The instance and the work directory go; the report stays.
    cleanup.out = None;
    cleanup.finish();
    crate::emit(g, &plumb_report::lab_render::LabOutput(&report))?;
    eprintln!("plumb: report in {}", out.join("index.html").display());
    Ok(0)
}

/// The database the lab measures: plumb's private instance, or an existing server.
struct Server {
    /// Where plumb connects (as the private instance's superuser, or as the URL says).
    target: plumb_engine::Target,
    /// How the report names it (no password).
    shown: String,
    kind: plumb_engine::Kind,
    local_pid: Option<u32>,
    data_dir: Option<PathBuf>,
    private: Option<private::Running>,
    settings: std::collections::BTreeMap<String, String>,
    version: Option<String>,
}

fn short_version(v: &str) -> String {
    // "PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, ..." → up to " on ".
    v.split(" on ").next().unwrap_or(v).to_string()
}

impl Server {
    fn private(r: private::Running) -> Result<Server> {
        let target = r.target();
        let mut obs = plumb_engine::observer(&target).map_err(|e| anyhow!("{e}"))?;
        let info = obs.info().map_err(|e| anyhow!("{e}"))?;
        let version = short_version(&info.version);
        Ok(Server {
            shown: format!("plumb's private {version} (removed after the lab)"),
            target,
            kind: plumb_engine::Kind::Postgres,
            local_pid: Some(r.pid),
            data_dir: Some(r.dir.join("data")),
            settings: info.settings,
            version: Some(version),
            private: Some(r),
        })
    }

    /// Connect read-only and find what this host can see of the server.
    fn target(url: &str, password_file: Option<&Path>) -> Result<Server> {
        let target = crate::engine_target("--target", url, password_file)?;
        let kind = target.kind().map_err(|e| anyhow!("--target {e}"))?;
        let mut obs = plumb_engine::observer(&target).map_err(|e| anyhow!("--target {e}"))?;
        let info = obs.info().map_err(|e| anyhow!("--target {e}"))?;
        // The data directory, where this host can see it (PostgreSQL's data_directory; MariaDB's
        // datadir).
        let data_dir = ["data_directory", "datadir"]
            .iter()
            .find_map(|k| info.settings.get(*k))
            .map(PathBuf::from);
        Ok(Server {
            shown: target.shown(),
            local_pid: obs.local_server_pid(),
            kind,
            data_dir,
            version: Some(short_version(&info.version)),
            settings: info.settings,
            private: None,
            target,
        })
    }

    fn mem_kind(&self) -> plumb_sys::smaps::EngineKind {
        match self.kind {
            plumb_engine::Kind::Postgres => plumb_sys::smaps::EngineKind::Postgres,
            plumb_engine::Kind::Mariadb => plumb_sys::smaps::EngineKind::Mariadb,
            plumb_engine::Kind::Sqlserver => plumb_sys::smaps::EngineKind::Mssql,
        }
    }
}

/// The same connection URL (without its password: see [`split_password`]) with another
/// database.
fn with_database(url: &str, db: &str) -> String {
    if !url.contains("://") {
        // key=value conninfo, quoted values kept whole
        if let Some(mut params) = plumb_engine::secret::parse_conninfo(url) {
            params.retain(|p| p.key != "dbname");
            params.push(plumb_engine::secret::Param {
                key: "dbname".into(),
                value: db.into(),
            });
            return plumb_engine::secret::render_conninfo(&params);
        }
        return format!("{url} dbname={db}");
    }
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let (scheme, rest) = base.split_once("://").expect("checked");
    let authority = rest.split('/').next().unwrap_or("");
    let q = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{authority}/{db}{q}")
}

use plumb_engine::secret::split_password;

/// How pgbench is run for this lab.
struct PgbenchRun<'a> {
    bin: &'a Path,
    env: &'a [(&'a str, String)],
    /// The database, as a URL (no password in it: that goes in PGPASSWORD).
    conn: &'a str,
    work: &'a Path,
    clients: u32,
    threads: u32,
}

/// tps and tail latency, without against with.
fn compare_runs(base: &Pgbench, with: &Pgbench) -> String {
    let p99 = |p: &Pgbench| p.latency.as_ref().and_then(|l| l.p99_ms.or(l.p95_ms));
    let change = if base.tps > 0.0 {
        format!(" ({:+.0}%)", (with.tps / base.tps - 1.0) * 100.0)
    } else {
        String::new()
    };
    match (p99(base), p99(with)) {
        (Some(a), Some(b)) => format!(
            "tps {:.0} → {:.0}{change}; p99 latency {a:.2} ms → {b:.2} ms",
            base.tps, with.tps
        ),
        _ => format!("tps {:.0} → {:.0}{change}", base.tps, with.tps),
    }
}

/// pgbench while `plumb mem pressure` holds memory in the server's cgroup, limited. The
/// experiment and its phase; None on Ctrl-C.
#[allow(clippy::too_many_arguments)]
fn pressure_experiment(
    cleanup: &mut Cleanup,
    recorder: &Recorder,
    pg: &PgbenchRun,
    duration: Duration,
    limit: u64,
    hold: u64,
    server_pid: u32,
    shared_buffers: u64,
) -> Result<Option<(plumb_analyze::lab::Experiment, (String, f64, f64))>> {
    use std::io::BufRead;
    let cg = cleanup
        .cgroup
        .as_ref()
        .ok_or_else(|| anyhow!("no cgroup for the pressure"))?;
    let dir = cg
        .memory_dir()
        .ok_or_else(|| anyhow!("no memory cgroup for the pressure"))?
        .to_path_buf();
    let zram = limit + hold;
    cg.set_memory_limit(Some(limit))
        .map_err(|e| anyhow!("--pressure: limiting the server's cgroup: {e}"))?;
    let exe = std::env::current_exe().context("finding plumb's own binary")?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(exe)
            .args(["--json", "mem", "pressure"])
            .arg(hold.to_string())
            .arg("--cgroup")
            .arg(&dir)
            .arg("--swap")
            .arg(format!("zram:{zram}"))
            .arg("--force")
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| anyhow!("--pressure: cannot start plumb mem pressure: {e}"))?
    };
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    cleanup.pressure = Some(child);
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(|l| l.ok())
        {
            if let Ok(v) = serde_json::from_str(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            }
        }
    });
    let err_text = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut std::io::BufReader::new(stderr), &mut s);
        s
    });
    // Wait until the pressure holds all of its memory.
    let t0 = Instant::now();
    let mut zram_dev = None;
    loop {
        if stop_requested() {
            return Ok(None);
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(v) => {
                if v["kind"] == "mem_pressure_setup" {
                    zram_dev = v["zram_device"].as_str().map(str::to_string);
                }
                if v["kind"] == "mem_pressure_tick"
                    && v["touched_bytes"].as_u64().unwrap_or(0) >= hold
                {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let c = cleanup.pressure.as_mut().expect("started");
                let st = c.wait().ok();
                cleanup.pressure = None;
                bail!(
                    "--pressure: plumb mem pressure stopped ({}): {}",
                    st.map(|s| s.to_string()).unwrap_or_default(),
                    err_text.join().unwrap_or_default().trim()
                );
            }
            Err(_) => {}
        }
        if t0.elapsed() > Duration::from_secs(120) {
            bail!("--pressure: the pressure program did not fill its memory within 120 s");
        }
    }
    let t = recorder.mark(
        "memory pressure on",
        Some(format!(
            "limit {}, pressure holds {}",
            plumb_report::fmt::bytes(limit),
            plumb_report::fmt::bytes(hold)
        )),
    );
    let r = run_pgbench(pg, duration);
    // What the kernel says about the server's memory now, before the pressure goes.
    let ps = plumb_sys::process::read(&plumb_sys::Root::host(), server_pid).ok();
    let t1 = recorder.mark("memory pressure off", None);
    if let Some(cg) = &cleanup.cgroup {
        let _ = cg.set_memory_limit(None);
    }
    if let Some(mut c) = cleanup.pressure.take() {
        stop_pressure(&mut c);
    }
    let Some(p) = r? else {
        return Ok(None);
    };
    let mut notes = Vec::new();
    let smaps_swap = ps
        .as_ref()
        .and_then(|s| s.smaps_rollup.as_ref())
        .and_then(|r| r.swap_bytes);
    let vm_swap = ps
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.vm_swap_bytes);
    notes.push(format!(
        "PostgreSQL believes shared_buffers = {} is its cache; at the end of the run {} of the server's memory was in swap (smaps_rollup of the postmaster, which maps all of shared memory), while VmSwap said {} (it counts private memory only)",
        plumb_report::fmt::bytes(shared_buffers),
        plumb_report::fmt::opt_bytes(smaps_swap),
        plumb_report::fmt::opt_bytes(vm_swap)
    ));
    Ok(Some((
        plumb_analyze::lab::Experiment {
            name: "memory pressure".into(),
            phase: "pgbench under memory pressure".into(),
            setting: format!(
                "server's memory cgroup limited to {}; plumb mem pressure holds {} in it; swap on {} ({})",
                plumb_report::fmt::bytes(limit),
                plumb_report::fmt::bytes(hold),
                zram_dev.unwrap_or_else(|| "zram".into()),
                plumb_report::fmt::bytes(zram)
            ),
            baseline: None,
            changed: Some(p),
            window: None,
            notes,
        },
        ("pgbench under memory pressure".to_string(), t, t1),
    )))
}

fn write_report(r: &LabReport, rec: &plumb_store::Recording, out: &Path) -> Result<()> {
    use plumb_report::lab_render::{html, LabOutput};
    let w = |name: &str, body: Vec<u8>| -> Result<()> {
        plumb_report::out::write_new("--out", &out.join(name), &body)?;
        Ok(())
    };
    let mut json = Vec::new();
    plumb_report::emit(&LabOutput(r), plumb_report::Format::Json, &mut json)?;
    w("report.json", json)?;
    let mut text = Vec::new();
    plumb_report::emit(&LabOutput(r), plumb_report::Format::Text, &mut text)?;
    w("summary.txt", text)?;
    w("index.html", html(r, rec).into_bytes())?;
    Ok(())
}

enum Child {
    Done(std::process::Output),
    Interrupted,
}

/// Run a child in its own process group (the terminal's Ctrl-C reaches plumb, which stops it).
fn run_child(cmd: &mut Command) -> Result<Child> {
    use std::os::unix::process::CommandExt;
    let prog = cmd.get_program().to_string_lossy().into_owned();
    let mut c = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow!("cannot run {prog}: {e}"))?;
    // Drain the pipes on threads so a chatty child never blocks.
    let mut so = c.stdout.take().expect("piped");
    let mut se = c.stderr.take().expect("piped");
    let ho = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut so, &mut v);
        v
    });
    let he = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut se, &mut v);
        v
    });
    loop {
        if let Some(status) = c.try_wait()? {
            return Ok(Child::Done(std::process::Output {
                status,
                stdout: ho.join().unwrap_or_default(),
                stderr: he.join().unwrap_or_default(),
            }));
        }
        if stop_requested() {
            let _ = c.kill();
            let _ = c.wait();
            return Ok(Child::Interrupted);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn run_pgbench(pg: &PgbenchRun, d: Duration) -> Result<Option<Pgbench>> {
    let (clients, threads, work) = (pg.clients, pg.threads, pg.work);
    let prefix = work.join("pgbench_log");
    let o = match run_child(
        Command::new(pg.bin)
            .args([
                "-n",
                "-c",
                &clients.to_string(),
                "-j",
                &threads.min(clients).to_string(),
                "-T",
                &d.as_secs().max(1).to_string(),
                "-l",
                "--log-prefix",
            ])
            .arg(&prefix)
            .arg(pg.conn)
            .envs(pg.env.iter().cloned())
            .current_dir(work),
    )? {
        Child::Done(o) => o,
        Child::Interrupted => return Ok(None),
    };
    let stdout = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        bail!(
            "pgbench failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .filter(|l| !l.trim().is_empty())
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        );
    }
    let mut p =
        parse_pgbench(&stdout).ok_or_else(|| anyhow!("cannot read pgbench's summary: {stdout}"))?;
    p.clients = clients;
    p.threads = threads.min(clients);
    p.duration_s = d.as_secs() as f64;
    // Per-transaction latencies from the transaction logs (the third field, µs).
    let mut lat = Vec::new();
    for e in std::fs::read_dir(work)?.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("pgbench_log") {
            let text = std::fs::read_to_string(e.path())?;
            lat.extend(
                text.lines()
                    .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok()),
            );
            let _ = std::fs::remove_file(e.path());
        }
    }
    p.latency = Latency::from_us(&lat);
    Ok(Some(p))
}

/// pgbench's summary lines: transactions processed, failed, tps.
pub fn parse_pgbench(s: &str) -> Option<Pgbench> {
    let after = |key: &str| -> Option<&str> {
        s.lines()
            .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
    };
    let num = |t: &str| -> Option<f64> { t.split_whitespace().next()?.parse().ok() };
    let transactions = after("number of transactions actually processed:")
        .and_then(|t| t.split('/').next())
        .and_then(num)? as u64;
    let failed = after("number of failed transactions:")
        .and_then(num)
        .unwrap_or(0.0) as u64;
    let tps = s
        .lines()
        .filter_map(|l| l.trim().strip_prefix("tps = "))
        .find(|l| !l.contains("including connections establishing"))
        .and_then(num)?;
    Some(Pgbench {
        scale: 0,
        clients: 0,
        threads: 0,
        duration_s: 0.0,
        init_s: 0.0,
        database_bytes: None,
        transactions,
        failed,
        tps,
        latency: None,
        wal_sync_method: "fdatasync".into(),
    })
}

/// Bytes of the files under a directory (the database's size on disk).
fn dir_bytes(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_bytes(&e.path()),
                    _ => e.metadata().map(|m| m.len()).unwrap_or(0),
                })
                .sum()
        })
        .unwrap_or(0)
}

fn disk_counts(disks: &[String]) -> (Option<u64>, Option<u64>) {
    let Ok(all) = plumb_sys::block::read_diskstats(&plumb_sys::Root::host()) else {
        return (None, None);
    };
    let mine: Vec<_> = all.iter().filter(|d| disks.contains(&d.name)).collect();
    if mine.is_empty() {
        return (None, None);
    }
    let writes = mine.iter().map(|d| d.writes).sum();
    let flushes = mine.iter().map(|d| d.flushes).sum::<Option<u64>>();
    (Some(writes), flushes)
}

/// One of seed 003's loops: `bulk` (10,000 inserts in one transaction, then CHECKPOINT) or
/// `single` (100 single-row transactions, then CHECKPOINT), `iterations` times. None: Ctrl-C.
fn run_loop(
    scenario: &str,
    method: &str,
    iterations: u32,
    sess: &mut dyn Session,
    obs: &mut dyn Observer,
    disks: Vec<String>,
    clock: &dyn Fn() -> f64,
) -> Result<Option<(LoopResult, f64, f64)>> {
    let (rows, commits) = if scenario == "bulk" {
        (10_000u32, 1u32)
    } else {
        (100, 100)
    };
    let db =
        |e: plumb_engine::Error| anyhow!("{scenario} inserts with wal_sync_method={method}: {e}");
    sess.execute("TRUNCATE dummy_test").map_err(db)?;
    sess.execute("CHECKPOINT").map_err(db)?;
    sess.flush();
    let before = obs.snapshot().map_err(db)?;
    let work_start = clock();
    let (w0, f0) = disk_counts(&disks);
    let mut ins = Vec::new();
    let mut chk = Vec::new();
    let mut commit = Vec::new();
    for _ in 0..iterations {
        if stop_requested() {
            return Ok(None);
        }
        let t = Instant::now();
        if scenario == "bulk" {
            sess.execute(&format!(
                "DO $$ BEGIN FOR i IN 1..{rows} LOOP INSERT INTO dummy_test DEFAULT VALUES; END LOOP; END $$"
            ))
            .map_err(db)?;
        } else {
            for _ in 0..rows {
                let c = Instant::now();
                sess.execute("INSERT INTO dummy_test DEFAULT VALUES")
                    .map_err(db)?;
                commit.push(c.elapsed().as_micros() as u64);
            }
        }
        ins.push(t.elapsed().as_micros() as u64);
        let t = Instant::now();
        sess.execute("CHECKPOINT").map_err(db)?;
        chk.push(t.elapsed().as_micros() as u64);
    }
    let work_end = clock();
    // Backends report WAL statistics when idle, the WAL writer about once a second.
    sess.flush();
    std::thread::sleep(Duration::from_millis(1100));
    let after = obs.snapshot().map_err(db)?;
    let (w1, f1) = disk_counts(&disks);
    let d = |k: &str| -> Option<f64> {
        Some(after.counters.get(k)? - before.counters.get(k)?).filter(|v| *v >= 0.0)
    };
    let total_commits = (commits * iterations) as f64;
    let flushes = f0.zip(f1).map(|(a, b)| b.saturating_sub(a));
    Ok(Some((
        LoopResult {
            scenario: scenario.to_string(),
            wal_sync_method: method.to_string(),
            iterations,
            rows_per_iteration: rows,
            commits_per_iteration: commits,
            insert_ms: Latency::from_us(&ins),
            checkpoint_ms: Latency::from_us(&chk),
            commit: Latency::from_us(&commit),
            wal_bytes: d("wal.bytes"),
            wal_syncs: d("wal.syncs"),
            wal_sync_ms: d("wal.sync_time_ms"),
            disk_writes: w0.zip(w1).map(|(a, b)| b.saturating_sub(a)),
            disk_flushes: flushes,
            flushes_per_commit: flushes.map(|f| f as f64 / total_commits),
        },
        work_start,
        work_end,
    )))
}

/// The random-read sweep over queue depths and one sequential read, on a file of random data
/// that is removed afterwards. None: Ctrl-C.
fn sweep_and_seq(
    plan: &Plan,
    file: &Path,
) -> Result<Option<(Option<plumb_analyze::sweep::SweepReport>, Option<SeqRead>)>> {
    use plumb_analyze::sweep::{find_knee, set_elasticity, SweepKind, SweepReport};
    use plumb_load::job::preset;
    let mut base = preset("data-read").ok_or_else(|| anyhow!("no data-read preset"))?;
    base.targets = vec![file.to_path_buf()];
    base.file_size = plan.probe_file;
    base.duration = plan.sweep_run;
    base.warmup = Duration::from_millis(500);
    let scratch = match plumb_load::target::scratch_file(
        file,
        base.file_size,
        base.seed,
        false,
        &stop_requested,
    ) {
        Ok(s) => s,
        Err(plumb_load::Error::Interrupted) => return Ok(None),
        Err(e) => return Err(anyhow!("creating {}: {e}", file.display())),
    };
    let safety = plumb_load::target::Safety {
        overwrite: vec![file.to_path_buf()],
        ..Default::default()
    };
    let levels: Vec<(String, Option<f64>, plumb_load::job::Job)> = plan
        .sweep_qds
        .iter()
        .map(|&q| {
            let mut j = base.clone();
            j.queue_depth = q;
            j.batch_complete = j.batch_complete.min(q);
            j.batch_submit = j.batch_submit.map(|b| b.min(q));
            (q.to_string(), Some(q as f64), j)
        })
        .collect();
    let hidden = indicatif::ProgressBar::hidden();
    let Some(mut out_levels) = run_levels(&levels, 1, &safety, &hidden, "sweep")? else {
        return Ok(None);
    };
    set_elasticity(&mut out_levels);
    let knee = find_knee(&out_levels);
    let sweep = SweepReport {
        command_line: "plumb lab (random 8 KiB reads, O_DIRECT, one run per queue depth)".into(),
        sweep_over: SweepKind::QueueDepth,
        job: base.clone(),
        repetitions: 1,
        levels: out_levels,
        knee,
        chart: None,
    };
    let mut seq = preset("backup-read").ok_or_else(|| anyhow!("no backup-read preset"))?;
    seq.targets = vec![file.to_path_buf()];
    seq.file_size = plan.probe_file;
    seq.duration = plan.seq_run;
    seq.warmup = Duration::from_millis(300);
    let targets = match plumb_load::target::prepare(&seq, &safety, &stop_requested) {
        Ok(t) => t,
        Err(plumb_load::Error::Interrupted) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let r = match plumb_load::run::run(&seq, &targets) {
        Ok(r) => r,
        Err(plumb_load::Error::Interrupted) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    drop(targets);
    drop(scratch);
    let rep = plumb_analyze::sweep::rep_of(&r);
    Ok(Some((
        Some(sweep),
        Some(SeqRead {
            block_size: seq.block_size,
            queue_depth: seq.queue_depth * seq.threads,
            bytes_per_s: rep.bytes_per_s,
            lat_mean_ms: rep.lat_mean_s.map(|s| s * 1000.0),
        }),
    )))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pgbench_summary_is_read() {
        let out = "pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 5
query mode: simple
number of clients: 4
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 34210
number of failed transactions: 3 (0.009%)
latency average = 1.168 ms
initial connection time = 6.123 ms
tps = 3421.005816 (without initial connection time)
";
        let p = super::parse_pgbench(out).unwrap();
        assert_eq!((p.transactions, p.failed), (34210, 3));
        assert!((p.tps - 3421.005816).abs() < 1e-9);
        // PostgreSQL 13 and older print two tps lines; the one without connections counts.
        let old = "number of transactions actually processed: 100/100
tps = 90.1 (including connections establishing)
tps = 95.5 (excluding connections establishing)
";
        let p = super::parse_pgbench(old).unwrap();
        assert_eq!(p.transactions, 100);
        assert_eq!(p.tps, 95.5);
        assert!(super::parse_pgbench("pgbench: error: connection refused").is_none());
    }

    #[test]
    fn scratch_database_urls_keep_everything_but_the_database() {
        use super::{split_password, with_database};
        assert_eq!(
            with_database(
                "postgresql:///postgres?host=/tmp/x&port=5433&user=plumb",
                "lab"
            ),
            "postgresql:///lab?host=/tmp/x&port=5433&user=plumb"
        );
        assert_eq!(
            with_database("postgres://app@db:5432/shop?sslmode=require", "lab"),
            "postgres://app@db:5432/lab?sslmode=require"
        );
        assert_eq!(
            with_database("postgres://app@db", "lab"),
            "postgres://app@db/lab"
        );
        assert_eq!(
            with_database("host=db dbname=shop user=app", "lab"),
            "host=db user=app dbname=lab"
        );
        assert_eq!(
            with_database("host=db application_name='a b' dbname=shop", "lab"),
            "host=db application_name='a b' dbname=lab"
        );
        assert_eq!(
            split_password("postgres://app:s3cret@db/lab"),
            (
                "postgres://app@db/lab".to_string(),
                Some("s3cret".to_string())
            )
        );
        assert_eq!(
            split_password("host=db password=s3cret dbname=lab"),
            ("host=db dbname=lab".to_string(), Some("s3cret".to_string()))
        );
        assert_eq!(split_password("postgres://app@db/lab").1, None);
    }
}
