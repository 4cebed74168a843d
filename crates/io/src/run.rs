//! The runner: one loop per worker thread drives an engine, paces it (rate limits and bursts,
//! with latency timed from the intended start), and records every completion in bounded-memory
//! histograms plus a per-second series.

use crate::engine::{self, Done, Engine, Op, Req, Submit};
use crate::job::{EngineKind, Job, Pattern};
use crate::target::Target;
use crate::{Error, Result};
use hdrhistogram::Histogram;
use plumb_sys::cpu::StatSample;
use plumb_sys::rng::Rng;
use plumb_sys::signal;
use plumb_sys::units::Rate;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latencies are recorded in nanoseconds, 3 significant digits (0.1% error), up to one hour.
const HIST_MAX_NS: u64 = 3_600_000_000_000;

pub fn new_hist(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, sigfig).expect("valid histogram bounds")
}

/// One direction (reads or writes) of one worker.
#[derive(Debug, Clone)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// From the intended start (which is the submission time when unthrottled).
    pub lat: Histogram<u64>,
    pub lat_sum_ns: f64,
    pub lat_sum_sq_ns: f64,
    /// From the actual submission; kept apart only when pacing can delay submissions.
    pub service: Option<Histogram<u64>>,
    /// Latency summed and counted per tenth of the measured window, in time order: a run's
    /// samples for a test of whether two runs differ (its I/Os share the run's luck; its
    /// tenths nearly do not).
    pub tenth_sum_ns: [f64; 10],
    pub tenth_ios: [u64; 10],
}

impl DirStats {
    fn new(paced: bool) -> DirStats {
        DirStats {
            ios: 0,
            bytes: 0,
            lat: new_hist(3),
            lat_sum_ns: 0.0,
            lat_sum_sq_ns: 0.0,
            service: paced.then(|| new_hist(3)),
            tenth_sum_ns: [0.0; 10],
            tenth_ios: [0; 10],
        }
    }

    #[inline]
    fn record(&mut self, bytes: u64, lat_ns: u64, service_ns: u64, tenth: usize) {
        let tenth = tenth.min(9);
        self.tenth_sum_ns[tenth] += lat_ns as f64;
        self.tenth_ios[tenth] += 1;
        self.ios += 1;
        self.bytes += bytes;
        self.lat.saturating_record(lat_ns.max(1));
        let l = lat_ns as f64;
        self.lat_sum_ns += l;
        self.lat_sum_sq_ns += l * l;
        if let Some(s) = &mut self.service {
            s.saturating_record(service_ns.max(1));
        }
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        let _ = self.lat.add(&o.lat);
        self.lat_sum_ns += o.lat_sum_ns;
        self.lat_sum_sq_ns += o.lat_sum_sq_ns;
        for i in 0..10 {
            self.tenth_sum_ns[i] += o.tenth_sum_ns[i];
            self.tenth_ios[i] += o.tenth_ios[i];
        }
        match (&mut self.service, &o.service) {
            (Some(a), Some(b)) => {
                let _ = a.add(b);
            }
            (None, Some(b)) => self.service = Some(b.clone()),
            _ => {}
        }
    }

    pub fn empty(paced: bool) -> DirStats {
        DirStats::new(paced)
    }

    /// The mean latency in each tenth of the measured window that had an I/O, in seconds,
    /// in time order.
    pub fn tenths_mean_s(&self) -> Vec<f64> {
        self.tenth_sum_ns
            .iter()
            .zip(self.tenth_ios)
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| s / n as f64 / 1e9)
            .collect()
    }
}

/// Everything one worker thread did in the measured window.
#[derive(Debug, Clone)]
pub struct WorkerStats {
    /// Logical thread number (diskspd's thread), and the psync worker within it.
    pub thread: u32,
    pub worker: u32,
    pub target: usize,
    pub read: DirStats,
    pub write: DirStats,
    /// fdatasync/fsync calls that completed after writes.
    pub syncs: u64,
    /// Syscalls the engine made over the whole run (warm-up included).
    pub syscalls: u64,
}

/// One second of the measured window, all workers together.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SecondStats {
    pub second: u64,
    pub read_ios: u64,
    pub write_ios: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub lat_mean_s: Option<f64>,
    pub lat_p99_s: Option<f64>,
    pub lat_max_s: Option<f64>,
}

#[derive(Debug, Clone)]
struct SecondAcc {
    read_ios: u64,
    write_ios: u64,
    read_bytes: u64,
    write_bytes: u64,
    lat_sum_ns: f64,
    hist: Histogram<u64>,
    contributors: u32,
}

impl SecondAcc {
    fn new() -> SecondAcc {
        SecondAcc {
            read_ios: 0,
            write_ios: 0,
            read_bytes: 0,
            write_bytes: 0,
            lat_sum_ns: 0.0,
            hist: new_hist(2),
            contributors: 0,
        }
    }

    fn reset(&mut self) {
        self.read_ios = 0;
        self.write_ios = 0;
        self.read_bytes = 0;
        self.write_bytes = 0;
        self.lat_sum_ns = 0.0;
        self.hist.reset();
    }

    fn finish(&self, second: u64) -> SecondStats {
        let n = self.read_ios + self.write_ios;
        let s = |ns: u64| ns as f64 / 1e9;
        SecondStats {
            second,
            read_ios: self.read_ios,
            write_ios: self.write_ios,
            read_bytes: self.read_bytes,
            write_bytes: self.write_bytes,
            lat_mean_s: (n > 0).then(|| self.lat_sum_ns / n as f64 / 1e9),
            lat_p99_s: (n > 0).then(|| s(self.hist.value_at_quantile(0.99))),
            lat_max_s: (n > 0).then(|| s(self.hist.max())),
        }
    }
}

/// Per-second accumulators shared by the workers: a second is finished (and its histogram
/// dropped) once every worker has moved past it, so memory stays bounded on long runs.
struct Series {
    workers: u32,
    open: BTreeMap<u64, SecondAcc>,
    done: Vec<SecondStats>,
}

impl Series {
    fn contribute(&mut self, second: u64, acc: &SecondAcc) {
        let e = self.open.entry(second).or_insert_with(SecondAcc::new);
        e.read_ios += acc.read_ios;
        e.write_ios += acc.write_ios;
        e.read_bytes += acc.read_bytes;
        e.write_bytes += acc.write_bytes;
        e.lat_sum_ns += acc.lat_sum_ns;
        let _ = e.hist.add(&acc.hist);
        e.contributors += 1;
        if e.contributors >= self.workers {
            let e = self.open.remove(&second).expect("present");
            self.done.push(e.finish(second));
        }
    }

    fn finish(mut self) -> Vec<SecondStats> {
        let rest: Vec<(u64, SecondAcc)> = std::mem::take(&mut self.open).into_iter().collect();
        for (s, a) in rest {
            self.done.push(a.finish(s));
        }
        self.done.sort_by_key(|s| s.second);
        self.done
    }
}

/// CPU use over the measured window.
#[derive(Debug, Clone)]
pub struct CpuWindow {
    pub before: StatSample,
    pub after: StatSample,
    /// plumb's own user and system CPU seconds (all threads).
    pub user_s: f64,
    pub system_s: f64,
}

/// The raw outcome of a run; analysis turns it into tables.
#[derive(Debug, Clone)]
pub struct RunResult {
    pub job: Job,
    pub targets: Vec<(PathBuf, u64, crate::target::TargetKind)>,
    pub engine_setup: String,
    /// Measured window length actually achieved.
    pub measured_s: f64,
    pub workers: Vec<WorkerStats>,
    pub series: Vec<SecondStats>,
    pub cpu: Option<CpuWindow>,
    /// Pacing (a rate or bursts) was on: latency counts from intended start times.
    pub paced: bool,
}

fn rusage_s() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

struct WorkerPlan {
    thread: u32,
    worker: u32,
    target: usize,
    fd: std::os::fd::RawFd,
    path: PathBuf,
    qd: u32,
    region: (u64, u64),
    /// Nanoseconds between intended starts, when rate-limited.
    interval_ns: Option<f64>,
    seed: u64,
}

struct Clock {
    start: Instant,
}

impl Clock {
    #[inline]
    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

#[derive(Clone, Copy, Default)]
struct SlotState {
    intended: u64,
    issued: u64,
    op_write: bool,
    offset: u64,
}

struct Window {
    warm: u64,
    end: u64,
    stop_issuing: u64,
}

/// Run a job on prepared targets. A signal (Ctrl-C, SIGTERM, SIGHUP) or the caller's `cancel`
/// (asked about every 100 ms) stops the issuing; in-flight I/O is drained and the run returns
/// `Error::Interrupted`.
pub fn run(job: &Job, targets: &[Target], cancel: &dyn Fn() -> bool) -> Result<RunResult> {
    job.validate().map_err(|e| Error::Job(e.0))?;
    let plans = worker_plans(job, targets);
    let clock = Arc::new(Clock {
        start: Instant::now(),
    });
    let warm = job.warmup.as_nanos() as u64;
    let end = warm + job.duration.as_nanos() as u64;
    let window = Arc::new(Window {
        warm,
        end,
        stop_issuing: end + job.cooldown.as_nanos() as u64,
    });
    let abort = Arc::new(AtomicBool::new(false));
    let series = Arc::new(Mutex::new(Series {
        workers: plans.len() as u32,
        open: BTreeMap::new(),
        done: Vec::new(),
    }));

    let mut handles = Vec::new();
    for plan in plans {
        let (clock, window, stop, series, wjob) = (
            clock.clone(),
            window.clone(),
            abort.clone(),
            series.clone(),
            job.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name(format!("plumb-io-{}", plan.thread))
            .spawn(move || {
                let r = worker(&wjob, &plan, &clock, &window, &stop, &series);
                if r.is_err() {
                    stop.store(true, Ordering::SeqCst);
                }
                r
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                // The workers already started stop and drain before the error is returned.
                abort.store(true, Ordering::SeqCst);
                let _ = join_workers(job, handles);
                return Err(Error::Engine {
                    engine: job.engine.name(),
                    message: format!("cannot start a thread: {e}"),
                });
            }
        }
    }

    // The main thread samples CPU at the window's edges and asks the caller whether to stop.
    let root = plumb_sys::Root::host();
    let mut cancelled = false;
    let mut cpu_before = None;
    let mut cpu_after = None;
    loop {
        let now = clock.now();
        if cpu_before.is_none() && now >= warm {
            cpu_before = Some((plumb_sys::cpu::read_stat(&root).ok(), rusage_s(), now));
        }
        if cpu_after.is_none() && now >= end {
            cpu_after = Some((plumb_sys::cpu::read_stat(&root).ok(), rusage_s(), now));
        }
        if !cancelled && cancel() {
            cancelled = true;
            abort.store(true, Ordering::SeqCst);
        }
        if handles.iter().all(|h| h.is_finished()) {
            break;
        }
        let next_edge = [warm, end].into_iter().filter(|e| *e > now).min();
        let nap = next_edge.map_or(100_000_000, |e| (e - now).min(100_000_000));
        std::thread::sleep(Duration::from_nanos(nap.max(200_000)));
    }
    let (mut workers, engine_setup) = join_workers(job, handles)?;
    if cancelled || signal::stop_requested() {
        return Err(Error::Interrupted);
    }
    let series = Arc::try_unwrap(series)
        .map_err(|_| ())
        .expect("workers joined")
        .into_inner()
        .expect("not poisoned")
        .finish();
    let (cpu, measured_s) = match (cpu_before, cpu_after) {
        (Some((Some(b), (u0, s0), t0)), Some((Some(a), (u1, s1), t1))) => (
            Some(CpuWindow {
                before: b,
                after: a,
                user_s: u1 - u0,
                system_s: s1 - s0,
            }),
            (t1 - t0) as f64 / 1e9,
        ),
        _ => (None, job.duration.as_secs_f64()),
    };
    workers.sort_by_key(|w| (w.thread, w.worker));
    Ok(RunResult {
        job: job.clone(),
        targets: targets
            .iter()
            .map(|t| (t.path.clone(), t.size, t.kind))
            .collect(),
        engine_setup,
        measured_s,
        workers,
        series,
        cpu,
        paced: job.rate.is_some() || job.burst.is_some(),
    })
}

/// Each worker's share of the job: its target, its region of it (sequential jobs split a
/// target between workers), its queue depth and its pace. psync has one worker per queue slot.
fn worker_plans(job: &Job, targets: &[Target]) -> Vec<WorkerPlan> {
    let psync = job.engine == EngineKind::Psync;
    let per_thread_workers = if psync { job.queue_depth } else { 1 };
    let engine_qd = if psync { 1 } else { job.queue_depth };
    let total_workers = job.threads * per_thread_workers * targets.len() as u32;
    let ios_per_s = |r: Rate| match r {
        Rate::Iops(v) => v,
        Rate::BytesPerS(b) => b / job.block_size as f64,
    };
    let interval_ns = job.rate.map(|r| {
        let per_worker = if job.rate_per_thread {
            ios_per_s(r) / per_thread_workers as f64
        } else {
            ios_per_s(r) / total_workers as f64
        };
        1e9 / per_worker
    });
    let mut plans = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let workers_here = job.threads * per_thread_workers;
        let align = job.align.unwrap_or(job.block_size as u64).max(1);
        let span = (t.size / workers_here as u64) / align * align;
        for th in 0..job.threads {
            for w in 0..per_thread_workers {
                let idx = th * per_thread_workers + w;
                let (lo, hi) =
                    if job.pattern == Pattern::Sequential && span >= job.block_size as u64 {
                        (idx as u64 * span, idx as u64 * span + span)
                    } else {
                        (0, t.size)
                    };
                plans.push(WorkerPlan {
                    thread: ti as u32 * job.threads + th,
                    worker: w,
                    target: ti,
                    fd: t.fd(),
                    path: t.path.clone(),
                    qd: engine_qd,
                    region: (lo, hi),
                    interval_ns,
                    seed: job.seed.wrapping_add(0x9e37 * (plans.len() as u64 + 1)),
                });
            }
        }
    }
    plans
}

type WorkerHandle = std::thread::JoinHandle<Result<(WorkerStats, String)>>;

/// Wait for every worker; their figures and the engine's setup line, or the first error (a
/// worker that panicked is one).
fn join_workers(job: &Job, handles: Vec<WorkerHandle>) -> Result<(Vec<WorkerStats>, String)> {
    let mut workers = Vec::new();
    let mut first_err = None;
    let mut engine_setup = String::new();
    for h in handles {
        let r = h.join().unwrap_or_else(|_| {
            Err(Error::Engine {
                engine: job.engine.name(),
                message: "a worker thread panicked".into(),
            })
        });
        match r {
            Ok((w, setup)) => {
                engine_setup = setup;
                workers.push(w)
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok((workers, engine_setup)),
    }
}

struct OffsetGen {
    pattern: Pattern,
    lo: u64,
    hi: u64,
    next: u64,
    stride: u64,
    align: u64,
    block: u64,
    slots: u64,
}

impl OffsetGen {
    /// Offsets in `region` (`lo`, `hi`) by the job's pattern, block, alignment and stride.
    fn new(job: &Job, (lo, hi): (u64, u64)) -> OffsetGen {
        let block = job.block_size as u64;
        let align = job.align.unwrap_or(block).max(1);
        let span = hi.saturating_sub(lo);
        OffsetGen {
            pattern: job.pattern,
            lo,
            hi,
            next: lo,
            stride: job.stride.unwrap_or(block),
            align,
            block,
            slots: if span >= block {
                (span - block) / align + 1
            } else {
                1
            },
        }
    }

    #[inline]
    fn next(&mut self, rng: &mut Rng) -> u64 {
        match self.pattern {
            Pattern::Random => self.lo + rng.below(self.slots) * self.align,
            Pattern::Sequential => {
                if self.next + self.block > self.hi {
                    self.next = self.lo;
                }
                let o = self.next;
                self.next += self.stride;
                o
            }
        }
    }
}

impl WorkerStats {
    /// A worker's figures before its first I/O (`paced`: a rate or bursts schedule its I/O).
    fn new(plan: &WorkerPlan, paced: bool) -> WorkerStats {
        WorkerStats {
            thread: plan.thread,
            worker: plan.worker,
            target: plan.target,
            read: DirStats::new(paced),
            write: DirStats::new(paced),
            syncs: 0,
            syscalls: 0,
        }
    }
}

/// The worker's engine on its target, each slot's buffer filled with random data (so
/// compression and dedupe cannot flatter the device).
fn filled_engine(job: &Job, plan: &WorkerPlan, rng: &mut Rng) -> Result<Box<dyn Engine>> {
    let mut eng: Box<dyn Engine> = engine::make(
        job.engine,
        plan.fd,
        plan.qd,
        job.block_size,
        job.submit_batch(),
    )
    .map_err(|e| Error::Engine {
        engine: job.engine.name(),
        message: e.to_string(),
    })?;
    for s in 0..plan.qd {
        rng.fill(eng.buf(s));
    }
    Ok(eng)
}

/// The sync call a write carries: every `every`th write under fdatasync or fsync durability.
#[inline]
fn sync_due(
    is_write: bool,
    sync: Option<(crate::job::SyncCall, u32)>,
    since: &mut u32,
) -> Option<crate::job::SyncCall> {
    match (is_write, sync) {
        (true, Some((call, every))) => {
            *since += 1;
            if *since >= every {
                *since = 0;
                Some(call)
            } else {
                None
            }
        }
        _ => None,
    }
}

fn worker(
    job: &Job,
    plan: &WorkerPlan,
    clock: &Clock,
    w: &Window,
    abort: &AtomicBool,
    series: &Mutex<Series>,
) -> Result<(WorkerStats, String)> {
    let mut rng = Rng::new(plan.seed);
    let mut eng = filled_engine(job, plan, &mut rng)?;
    let setup = eng.describe();
    let block = job.block_size as u64;
    let mut offs = OffsetGen::new(job, plan.region);
    let mut stats = WorkerStats::new(plan, job.rate.is_some() || job.burst.is_some());
    let sync = job.durability.sync_every();
    let mut writes_since_sync = 0u32;
    let mut slots = vec![SlotState::default(); plan.qd as usize];
    let mut free: Vec<u32> = (0..plan.qd).rev().collect();
    let mut inflight = 0u32;
    let mut done: Vec<Done> = Vec::with_capacity(plan.qd as usize * 2);
    let mut pacer = Pacer {
        next_intended: None,
        burst_left: job.burst.map(|b| b.ios).unwrap_or(u32::MAX),
        burst: job.burst,
        interval_ns: plan.interval_ns,
    };
    let batch = job.batch_complete.min(plan.qd).max(1);
    let mut sec = SecondAcc::new();
    let mut cur_sec: u64 = 0;
    let mut stamp: u64 = plan.seed;

    let done_with = Completer {
        path: &plan.path,
        block,
        w,
        series,
    };
    let mut now = clock.now();
    loop {
        let stopping =
            now >= w.stop_issuing || signal::stop_requested() || abort.load(Ordering::Relaxed);
        // Pacing gate: when may the next I/O start?
        let mut gate: Option<u64> = None;
        if !stopping {
            while inflight < plan.qd {
                let intended = match pacer.next(now) {
                    Ok(t) => t,
                    Err(g) => {
                        gate = Some(g);
                        break;
                    }
                };
                let slot = free.pop().expect("a free slot when inflight < qd");
                let is_write = job.write_pct > 0
                    && (job.write_pct >= 100 || rng.below(100) < job.write_pct as u64);
                let offset = offs.next(&mut rng);
                if is_write {
                    restamp(eng.buf(slot), &mut stamp);
                }
                let do_sync = sync_due(is_write, sync, &mut writes_since_sync);
                slots[slot as usize] = SlotState {
                    intended,
                    issued: now,
                    op_write: is_write,
                    offset,
                };
                let req = Req {
                    slot,
                    op: if is_write { Op::Write } else { Op::Read },
                    offset,
                    len: block as u32,
                    sync: do_sync,
                };
                match eng.submit(req).map_err(|e| Error::Engine {
                    engine: job.engine.name(),
                    message: e.to_string(),
                })? {
                    Submit::Queued => inflight += 1,
                    Submit::Done(d) => {
                        now = clock.now();
                        done_with.io(d, now, &slots, &mut stats, &mut sec, &mut cur_sec)?;
                        free.push(d.slot);
                        // Synchronous engines never leave this loop through `inflight`.
                        if now >= w.stop_issuing
                            || signal::stop_requested()
                            || abort.load(Ordering::Relaxed)
                        {
                            break;
                        }
                    }
                    Submit::Busy => {
                        free.push(slot);
                        break;
                    }
                }
            }
        }
        if inflight == 0 {
            if stopping {
                break;
            }
            if let Some(g) = gate {
                now = clock.now();
                if g > now {
                    // Never past the window: a rate so slow that the next I/O falls after
                    // the end ends the run on time.
                    sleep_until(clock, g.min(w.stop_issuing), abort);
                }
            }
            now = clock.now();
            continue;
        }
        // A long pacing gap (a burst's think time, a slow rate) is waited out in short steps,
        // so a stop is seen at once.
        let timeout = match gate {
            Some(g) if !stopping && g > now => {
                Some(Duration::from_nanos(g - now).min(signal::WAKE_EVERY))
            }
            _ => None,
        };
        let want = if timeout.is_some() {
            1
        } else {
            batch.min(inflight)
        };
        eng.wait(want, timeout).map_err(|e| Error::Engine {
            engine: job.engine.name(),
            message: e.to_string(),
        })?;
        eng.reap(&mut done);
        now = clock.now();
        for d in done.drain(..) {
            done_with.io(d, now, &slots, &mut stats, &mut sec, &mut cur_sec)?;
            free.push(d.slot);
            inflight -= 1;
        }
    }
    // Close the series: every second of the window that was measured is contributed, even if
    // idle at the end. A stopped run ends where it stopped, not where it was planned to (a run
    // planned for hours and stopped after seconds holds seconds, not hours, of figures).
    let measured_end = clock.now().min(w.end).saturating_sub(w.warm);
    let last = measured_end.div_ceil(1_000_000_000).max(1);
    done_with.flush_seconds(last, &mut cur_sec, &mut sec);
    stats.syscalls = eng.syscalls();
    Ok((stats, setup))
}

/// When each I/O may start: as soon as a slot is free, or on the rate's schedule, with a pause
/// after each burst.
struct Pacer {
    /// When the next I/O is due (None: as soon as a slot is free).
    next_intended: Option<f64>,
    burst_left: u32,
    burst: Option<crate::job::Burst>,
    interval_ns: Option<f64>,
}

impl Pacer {
    /// The next I/O's intended start (now or earlier: it is due), or the time before which it
    /// may not start.
    #[inline]
    fn next(&mut self, now: u64) -> std::result::Result<u64, u64> {
        if self.burst_left == 0 {
            // A pause after each burst, from when the burst's last I/O was due.
            let think = self.burst.map(|b| b.think.as_nanos() as f64).unwrap_or(0.0);
            let base = self.next_intended.map_or(now as f64, |n| n.max(now as f64));
            self.next_intended = Some(base + think);
            self.burst_left = self.burst.map(|b| b.ios).unwrap_or(u32::MAX);
        }
        let intended = match self.next_intended {
            Some(n) if (n as u64) > now => return Err(n as u64),
            Some(n) => n as u64,
            None => now,
        };
        self.next_intended = self
            .interval_ns
            .map(|iv| self.next_intended.unwrap_or(now as f64) + iv);
        if self.burst.is_some() {
            self.burst_left -= 1;
        }
        Ok(intended)
    }
}

/// Change each 4 KiB of a write's buffer, so no two writes carry the same data.
#[inline]
fn restamp(b: &mut [u8], stamp: &mut u64) {
    for chunk in b.chunks_mut(4096) {
        *stamp = stamp
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = chunk.len().min(8);
        chunk[..n].copy_from_slice(&stamp.to_le_bytes()[..n]);
    }
}

/// What a finished I/O does to a worker's figures: a failed or short one is the run's error;
/// inside the window its latency (from when it was due) and service time are recorded, and
/// its second's figures handed on as the seconds pass.
struct Completer<'a> {
    path: &'a std::path::Path,
    block: u64,
    w: &'a Window,
    series: &'a Mutex<Series>,
}

impl Completer<'_> {
    /// Hand every finished second before `upto` (empty ones too) to the shared series.
    fn flush_seconds(&self, upto: u64, cur: &mut u64, acc: &mut SecondAcc) {
        let mut g = self.series.lock().expect("series lock");
        while *cur < upto {
            g.contribute(*cur, acc);
            acc.reset();
            *cur += 1;
        }
    }

    #[inline]
    fn io(
        &self,
        d: Done,
        t: u64,
        slots: &[SlotState],
        stats: &mut WorkerStats,
        sec: &mut SecondAcc,
        cur_sec: &mut u64,
    ) -> Result<()> {
        let (block, w) = (self.block, self.w);
        let s = slots[d.slot as usize];
        if d.res < 0 || (d.res as u64) < block {
            let source = if d.res < 0 {
                std::io::Error::from_raw_os_error((-d.res) as i32)
            } else {
                std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("short transfer: {} of {block} bytes", d.res),
                )
            };
            return Err(Error::IoFailed {
                path: self.path.to_path_buf(),
                offset: s.offset,
                len: block as u32,
                source,
            });
        }
        if t < w.warm || t >= w.end {
            return Ok(());
        }
        let lat = t.saturating_sub(s.intended);
        let service = t.saturating_sub(s.issued);
        let tenth = ((t - w.warm) * 10 / (w.end - w.warm).max(1)) as usize;
        if s.op_write {
            stats.write.record(block, lat, service, tenth);
            if d.synced {
                stats.syncs += 1;
            }
        } else {
            stats.read.record(block, lat, service, tenth);
        }
        let second = (t - w.warm) / 1_000_000_000;
        if second > *cur_sec {
            self.flush_seconds(second, cur_sec, sec);
        }
        if s.op_write {
            sec.write_ios += 1;
            sec.write_bytes += block;
        } else {
            sec.read_ios += 1;
            sec.read_bytes += block;
        }
        sec.lat_sum_ns += lat as f64;
        sec.hist.saturating_record(lat.max(1));
        Ok(())
    }
}

/// Sleep until `t` on the run clock: coarse sleep, then a short spin for the last stretch so
/// paced I/O starts on time. A stop (a signal, another worker's error) ends it early.
fn sleep_until(clock: &Clock, t: u64, abort: &AtomicBool) {
    loop {
        let now = clock.now();
        if now >= t || signal::stop_requested() || abort.load(Ordering::Relaxed) {
            return;
        }
        let left = t - now;
        if left > 200_000 {
            std::thread::sleep(Duration::from_nanos(left - 100_000).min(signal::WAKE_EVERY));
        } else if left > 20_000 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Durability;
    use crate::target::{prepare, Safety};

    fn null_job(dir: &std::path::Path) -> Job {
        Job {
            targets: vec![dir.join("null.dat")],
            engine: EngineKind::Null,
            file_size: 1 << 20,
            block_size: 4096,
            durability: Durability::None,
            warmup: Duration::from_millis(200),
            duration: Duration::from_secs(1),
            ..Job::new("test")
        }
    }

    fn total_ios(r: &RunResult) -> u64 {
        r.workers.iter().map(|w| w.read.ios + w.write.ios).sum()
    }

    #[test]
    fn rate_limit_is_exact_with_the_null_engine() {
        let d = tempfile::tempdir().unwrap();
        let job = Job {
            threads: 2,
            queue_depth: 4,
            rate: Some(Rate::Iops(2000.0)),
            ..null_job(d.path())
        };
        let t = prepare(&job, &Safety::default(), &|| false).unwrap();
        let r = run(&job, &t, &|| false).unwrap();
        let n = total_ios(&r);
        // 2000 IOPS over 1 s: the limiter must land within 2%.
        assert!((1960..=2040).contains(&n), "{n} I/Os");
        // Latency counts from the intended start, so the series sums to the same count.
        let s: u64 = r.series.iter().map(|s| s.read_ios + s.write_ios).sum();
        assert_eq!(s, n);
        assert_eq!(r.series.len(), 1);
        assert!(r.paced);
    }

    #[test]
    fn write_mix_and_sync_counts_are_exact() {
        let d = tempfile::tempdir().unwrap();
        let job = Job {
            write_pct: 100,
            durability: Durability::Fdatasync {
                every: 4,
                direct: false,
            },
            rate: Some(Rate::Iops(400.0)),
            ..null_job(d.path())
        };
        let t = prepare(&job, &Safety::default(), &|| false).unwrap();
        let r = run(&job, &t, &|| false).unwrap();
        let w = &r.workers[0];
        assert_eq!(w.read.ios, 0);
        assert!((392..=408).contains(&w.write.ios), "{}", w.write.ios);
        // Every fourth write carries an fdatasync.
        assert!(
            (w.write.ios / 4).abs_diff(w.syncs) <= 1,
            "{} writes, {} syncs",
            w.write.ios,
            w.syncs
        );
        assert_eq!(w.write.bytes, w.write.ios * 4096);
    }

    #[test]
    fn bursts_pause_between_groups() {
        let d = tempfile::tempdir().unwrap();
        let job = Job {
            queue_depth: 1,
            burst: Some(crate::job::Burst {
                ios: 100,
                think: Duration::from_millis(250),
            }),
            warmup: Duration::ZERO,
            ..null_job(d.path())
        };
        let t = prepare(&job, &Safety::default(), &|| false).unwrap();
        let r = run(&job, &t, &|| false).unwrap();
        // In 1 s: bursts start at 0, 250, 500 and 750 ms: 400 I/Os (the null engine is instant).
        assert_eq!(total_ios(&r), 400);
    }

    #[test]
    fn the_callers_cancel_ends_a_run_early_and_says_so() {
        let d = tempfile::tempdir().unwrap();
        // An hour's run at QD 4 on two threads, cancelled by its caller after 300 ms.
        let job = Job {
            threads: 2,
            queue_depth: 4,
            rate: Some(Rate::Iops(20_000.0)),
            warmup: Duration::ZERO,
            duration: Duration::from_secs(3600),
            ..null_job(d.path())
        };
        let t = prepare(&job, &Safety::default(), &|| false).unwrap();
        let started = Instant::now();
        let asked = std::cell::Cell::new(0u32);
        let cancel = || {
            asked.set(asked.get() + 1);
            started.elapsed() >= Duration::from_millis(300)
        };
        let r = run(&job, &t, &cancel);
        assert!(
            matches!(r, Err(Error::Interrupted)),
            "{:?}",
            r.map(|r| total_ios(&r))
        );
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "stopped after {took:?}");
        assert!(asked.get() >= 2, "asked {} times", asked.get());
    }

    #[test]
    fn sequential_offsets_stay_in_the_worker_region() {
        let mut g = OffsetGen {
            pattern: Pattern::Sequential,
            lo: 8192,
            hi: 8192 * 3,
            next: 8192,
            stride: 8192,
            align: 8192,
            block: 8192,
            slots: 2,
        };
        let mut r = Rng::new(1);
        let v: Vec<u64> = (0..5).map(|_| g.next(&mut r)).collect();
        assert_eq!(v, vec![8192, 16384, 8192, 16384, 8192]);
        let mut g = OffsetGen {
            pattern: Pattern::Random,
            lo: 0,
            hi: 1 << 20,
            next: 0,
            stride: 4096,
            align: 4096,
            block: 4096,
            slots: 256,
        };
        for _ in 0..10_000 {
            let o = g.next(&mut r);
            assert!(o.is_multiple_of(4096) && o + 4096 <= 1 << 20);
        }
    }

    fn real_job(
        dir: &std::path::Path,
        engine: EngineKind,
        durability: Durability,
        write_pct: u8,
    ) -> Job {
        Job {
            targets: vec![dir.join("real.dat")],
            engine,
            file_size: 16 << 20,
            block_size: 4096,
            queue_depth: 8,
            write_pct,
            durability,
            warmup: Duration::from_millis(100),
            duration: Duration::from_millis(500),
            ..Job::new("test")
        }
    }

    /// Real I/O on a real file: needs a filesystem with O_DIRECT (not tmpfs).
    fn try_real(job: &Job) -> Option<RunResult> {
        let t = match prepare(job, &Safety::default(), &|| false) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        match run(job, &t, &|| false) {
            Ok(r) => Some(r),
            Err(Error::Engine { message, .. })
                if message.contains("not permitted")
                    || message.contains("Function not implemented") =>
            {
                eprintln!("skipped: io_uring is not available here: {message}");
                None
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn io_uring_reads_direct_with_bounded_syscalls() {
        let d = tempfile::tempdir_in(
            std::env::var("CARGO_TARGET_TMPDIR").unwrap_or_else(|_| ".".into()),
        )
        .unwrap();
        let Some(r) = try_real(&real_job(
            d.path(),
            EngineKind::IoUring,
            Durability::Direct,
            0,
        )) else {
            return;
        };
        let w = &r.workers[0];
        assert!(w.read.ios > 100, "{} reads", w.read.ios);
        assert_eq!(w.write.ios, 0);
        // At most a submit and a wait per I/O, plus the warm-up's share.
        assert!(
            w.syscalls > 0 && w.syscalls < 2 * w.read.ios + 400,
            "{} enters for {} reads",
            w.syscalls,
            w.read.ios
        );
        assert!(r.engine_setup.starts_with("io_uring"), "{}", r.engine_setup);
    }

    #[test]
    fn io_uring_and_psync_durable_writes_complete_with_their_syncs() {
        let d = tempfile::tempdir_in(
            std::env::var("CARGO_TARGET_TMPDIR").unwrap_or_else(|_| ".".into()),
        )
        .unwrap();
        for engine in [EngineKind::IoUring, EngineKind::Psync] {
            let mut job = real_job(
                d.path(),
                engine,
                Durability::Fdatasync {
                    every: 1,
                    direct: true,
                },
                100,
            );
            job.queue_depth = 2;
            let Some(r) = try_real(&job) else { return };
            let writes: u64 = r.workers.iter().map(|w| w.write.ios).sum();
            let syncs: u64 = r.workers.iter().map(|w| w.syncs).sum();
            // How many fit in the window depends on the device (CI's disk managed two
            // fdatasyncs in half a second once); that each write had its sync does not.
            assert!(writes > 0, "{engine:?}: no write completed");
            assert_eq!(
                writes, syncs,
                "{engine:?}: every write was followed by its fdatasync"
            );
            if engine == EngineKind::Psync {
                assert_eq!(
                    r.workers.len(),
                    2,
                    "psync runs one thread per outstanding I/O"
                );
            }
        }
    }
}
