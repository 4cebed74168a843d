//! The transaction driver every database workload shares: N clients, each with its own
//! connection, a mix of transaction types, a ramp-up and then a timed window, closed loop (the
//! next transaction as soon as the last one ends) or open loop (`rate`: each client on a
//! Poisson schedule, latency timed from the intended start, the service time beside it).
//!
//! Clients that can (PostgreSQL's wire client) share threads, as pgbench's `-j`: by default
//! one thread a CPU, each waiting on all its clients' sockets at once (`plumb_sys::mux`), so a
//! thread whose client waits for the server serves another instead of sleeping; the others
//! keep a thread each.
//!
//! Memory does not grow with the run: per type a latency histogram (µs, resized as needed, no
//! upper cap), counts, errors by class; one row a second for the series.

use hdrhistogram::Histogram;
use plumb_sys::rng::Rng;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a transaction ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// Rolled back on purpose (new-order's 1% with an unused item number).
    RolledBack,
}

/// The kinds of failure a driver tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ErrorClass {
    Deadlock,
    Serialization,
    LockTimeout,
    /// The connection broke: the client stops (the run goes on with the others).
    LostConnection,
    Other,
}

impl ErrorClass {
    pub fn code(self) -> &'static str {
        match self {
            ErrorClass::Deadlock => "deadlock",
            ErrorClass::Serialization => "serialization",
            ErrorClass::LockTimeout => "lock-timeout",
            ErrorClass::LostConnection => "lost-connection",
            ErrorClass::Other => "other",
        }
    }

    /// Whether trying the transaction again can succeed.
    pub(crate) fn retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Deadlock | ErrorClass::Serialization | ErrorClass::LockTimeout
        )
    }
}

/// A failed transaction: its class and the engine's own code (SQLSTATE, error number).
#[derive(Debug, Clone)]
pub struct Failure {
    pub class: ErrorClass,
    pub code: String,
    pub message: String,
}

/// A transaction in flight on a shared thread.
pub type TxFuture<'a> = Pin<Box<dyn Future<Output = Result<Outcome, Failure>> + 'a>>;

/// One client's connection and what it runs.
pub trait Client: Send {
    /// Run one transaction of type `kind` (an index into the mix).
    fn run(&mut self, kind: usize, rng: &mut Rng) -> Result<Outcome, Failure>;
    /// Make the client able to share a thread: its `run_async` waits in `plumb_sys::mux`
    /// from now on. False (the default): it blocks, and keeps a thread of its own.
    fn share(&mut self) -> bool {
        false
    }
    /// `run` as a future, for a shared thread; the default runs `run` when polled.
    fn run_async<'a>(&'a mut self, kind: usize, rng: &'a mut Rng) -> TxFuture<'a> {
        Box::pin(async move { self.run(kind, rng) })
    }
    /// Something another thread can call to cancel the running transaction (a stalled
    /// server must not hold up Ctrl-C).
    fn canceller(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        None
    }
    /// Something another thread can call to close the connection, when the server answers
    /// neither the transaction nor its cancel.
    fn closer(&self) -> Option<Box<dyn Fn() + Send + Sync>> {
        None
    }
    /// The server thread (TID) serving this connection, whose time `--explain` takes apart;
    /// None where it is not known.
    fn server_thread(&self) -> Option<u32> {
        None
    }
}

/// At the window's end, how long transactions in flight get to end on their own before they
/// are cancelled, and then before their connections are closed. A server that answers nothing
/// costs a run about three of these, not for ever.
pub const END_GRACE: Duration = Duration::from_secs(1);

/// A run's shape.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Names and weights of the transaction types.
    pub mix: Vec<(&'static str, u32)>,
    pub rampup: Duration,
    pub duration: Duration,
    /// Transactions a second over all clients (open loop); None: closed loop.
    pub rate: Option<f64>,
    /// How often a transaction is tried when it fails with a retryable error (1: no retry).
    pub max_tries: u32,
    pub seed: u64,
    /// Run the types in the mix's order, each as many times in a row as its weight, round and
    /// round (the insert/CHECKPOINT loops), instead of drawing each at random by its weight.
    pub in_order: bool,
    /// Threads for the clients that can share one; None: one a CPU this process may use.
    pub threads: Option<usize>,
    /// Take each transaction's time on the server apart (`--explain`): the clocks of each
    /// connection's server thread, and which type each one runs now (for the engine's waits,
    /// sampled beside). None: not taken apart.
    pub explain: Option<super::explain::Explain>,
}

/// One transaction type's figures over the timed window.
#[derive(Debug, Clone)]
pub struct TypeStats {
    pub name: &'static str,
    pub committed: u64,
    pub rolled_back: u64,
    /// Failures after the last try, by class, with the engine codes seen.
    pub errors: BTreeMap<ErrorClass, u64>,
    pub codes: BTreeMap<String, u64>,
    pub retries: u64,
    /// From the intended start (open loop) or the actual start (closed loop), µs.
    pub latency: Histogram<u64>,
    /// From the actual start, µs (open loop only).
    pub service: Option<Histogram<u64>>,
    /// `latency` in each tenth of the timed window, by when the transaction ended: ten
    /// histograms (empty when the run was interrupted before the window ended).
    pub tenths: Vec<Histogram<u64>>,
    /// Where its transactions' time went on the server (`--explain`; None: not taken apart).
    pub explained: Option<super::explain::Explained>,
}

impl TypeStats {
    fn new(name: &'static str, paced: bool) -> TypeStats {
        TypeStats {
            name,
            committed: 0,
            rolled_back: 0,
            errors: BTreeMap::new(),
            codes: BTreeMap::new(),
            retries: 0,
            latency: hist(),
            service: paced.then(hist),
            tenths: Vec::new(),
            explained: None,
        }
    }

    fn merge(&mut self, o: &TypeStats) {
        self.committed += o.committed;
        self.rolled_back += o.rolled_back;
        for (k, v) in &o.errors {
            *self.errors.entry(*k).or_default() += v;
        }
        for (k, v) in &o.codes {
            *self.codes.entry(k.clone()).or_default() += v;
        }
        self.retries += o.retries;
        let _ = self.latency.add(&o.latency);
        if let (Some(a), Some(b)) = (&mut self.service, &o.service) {
            let _ = a.add(b);
        }
        if let Some(b) = &o.explained {
            self.explained.get_or_insert_with(Default::default).merge(b);
        }
    }
}

fn hist() -> Histogram<u64> {
    let mut h = Histogram::new(3).expect("3 significant digits is valid");
    h.auto(true);
    h
}

/// One second of the run (ramp-up included), for the recording and the live line.
#[derive(Debug, Clone, Default)]
pub struct Second {
    /// Seconds since the run started.
    pub t: u32,
    /// Per type: ended (committed or rolled back) and failed.
    pub done: Vec<u64>,
    pub failed: Vec<u64>,
    /// The 95th percentile of the second's latencies over all types (µs).
    pub p95_us: Option<u64>,
    /// Per type: the 95th percentile of its latencies in the second (µs; None: none ended).
    pub p95_by_type_us: Vec<Option<u64>>,
    /// With --explain, per type: the transactions taken apart that ended in the second and
    /// their parts' sum (ns, in [`plumb_sys::threadtime::Part::ALL`]'s order); empty without.
    pub explained: Vec<(u64, [u64; plumb_sys::threadtime::PARTS])>,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Measured {
    pub types: Vec<TypeStats>,
    /// The timed window as it ran (shorter when interrupted).
    pub window: Duration,
    pub seconds: Vec<Second>,
    /// Open loop: how late transactions started against their schedule (µs), and how many
    /// started more than a millisecond late.
    pub lag: Option<Histogram<u64>>,
    pub late: u64,
    /// Clients that stopped on a lost connection, with the last message.
    pub lost: Vec<String>,
    pub interrupted: bool,
}

/// The shared state of a run: the current second's tallies.
struct Tally {
    done: Vec<u64>,
    failed: Vec<u64>,
    /// Per type: the second's latencies.
    lat: Vec<Histogram<u64>>,
    /// Per type: the timed window's latencies in each of its tenths.
    tenths: Vec<Vec<Histogram<u64>>>,
    /// Per type, with --explain: the second's transactions taken apart, and their parts (ns).
    explained: Vec<(u64, [u64; plumb_sys::threadtime::PARTS])>,
}

/// What a run reports as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// A second ended.
    Second(&'a Second),
    /// The ramp-up is over: the timed window starts now.
    WindowStart,
    /// The timed window ends now (the clients are still connected).
    WindowEnd,
}

/// A client's thread: its clients' results once the run ends.
type ClientThread = std::thread::JoinHandle<Vec<WorkerResult>>;

/// The clients as workers on threads (`plan.threads`, or one a CPU), each with its seed and
/// its share of the open loop's rate.
fn spawn(
    plan: &Plan,
    clients: Vec<Box<dyn Client>>,
    stop: &Arc<AtomicBool>,
    tally: &Arc<Mutex<Tally>>,
    window_start: Instant,
    end: Instant,
) -> Vec<ClientThread> {
    let per_client = plan.rate.map(|r| r / clients.len().max(1) as f64);
    let workers: Vec<(Worker, Box<dyn Client>)> = clients
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let w = Worker {
                plan: plan.clone(),
                stop: stop.clone(),
                tally: tally.clone(),
                window_start,
                end,
                rate: per_client,
                rng: Rng::new(plan.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            };
            (w, c)
        })
        .collect();
    groups(workers, plan.threads.unwrap_or_else(cpus))
        .into_iter()
        .map(|group| {
            std::thread::spawn(move || {
                let tasks: Vec<Pin<Box<dyn Future<Output = WorkerResult>>>> = group
                    .into_iter()
                    .map(|(w, c)| Box::pin(w.work(c)) as Pin<Box<dyn Future<Output = _>>>)
                    .collect();
                plumb_sys::mux::run_all(tasks)
            })
        })
        .collect()
}

/// Transactions in flight end on their own (after the window: at once on a stop), else they
/// are cancelled, else their connections closed; a thread still held after that is left
/// behind. Whether connections were closed.
fn wind_down(
    threads: &[ClientThread],
    cancellers: Vec<Box<dyn Fn() + Send + Sync>>,
    closers: &[Box<dyn Fn() + Send + Sync>],
    interrupted: bool,
    grace: Duration,
) -> bool {
    let wait = |d: Duration| {
        let t0 = Instant::now();
        while !threads.iter().all(|t| t.is_finished()) && t0.elapsed() < d {
            std::thread::sleep(Duration::from_millis(5));
        }
        threads.iter().all(|t| t.is_finished())
    };
    let mut closed = false;
    if interrupted || !wait(grace) {
        // Each on a thread of its own: a cancel request to a server that says nothing waits.
        for c in cancellers {
            std::thread::spawn(c);
        }
        if !wait(grace) {
            for c in closers {
                c();
            }
            wait(grace);
            closed = true;
        }
    }
    closed
}

/// The clients' figures merged per type, with the open loop's lag, the late transactions and
/// what was lost (a client whose thread did not end is counted as lost).
#[allow(clippy::type_complexity)]
fn gather(
    plan: &Plan,
    threads: Vec<ClientThread>,
    closed: bool,
    grace: Duration,
) -> (Vec<TypeStats>, Option<Histogram<u64>>, u64, Vec<String>) {
    let mut types: Vec<TypeStats> = plan
        .mix
        .iter()
        .map(|(name, _)| TypeStats::new(name, plan.rate.is_some()))
        .collect();
    let mut lag = plan.rate.map(|_| hist());
    let (mut late, mut lost) = (0, Vec::new());
    if closed {
        lost.push(format!(
            "the server answered neither the transactions in flight at the end nor their cancel within {} s: plumb closed their connections",
            (grace * 2).as_secs_f64()
        ));
    }
    for t in threads {
        if !t.is_finished() {
            lost.push("a client's thread did not end when the run did (the server answered neither its transaction, nor the cancel, nor the closed connection); its transactions are left out".into());
            continue;
        }
        let Ok(rs) = t.join() else {
            lost.push("a client thread panicked".into());
            continue;
        };
        for r in rs {
            for (a, b) in types.iter_mut().zip(&r.types) {
                a.merge(b);
            }
            if let (Some(a), Some(b)) = (&mut lag, &r.lag) {
                let _ = a.add(b);
            }
            late += r.late;
            lost.extend(r.lost);
        }
    }
    (types, lag, late, lost)
}

/// Run `plan` over `clients` (one connection each). `events` sees each second as it ends and
/// the window's edges as they pass; `cancel` stops the run (what was measured is returned,
/// `interrupted` set, and no `WindowEnd`).
pub fn run(
    plan: &Plan,
    clients: Vec<Box<dyn Client>>,
    events: &mut dyn FnMut(Event<'_>),
    cancel: &(dyn Fn() -> bool + Sync),
) -> Measured {
    let n = plan.mix.len();
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Mutex::new(Tally {
        done: vec![0; n],
        failed: vec![0; n],
        lat: (0..n).map(|_| hist()).collect(),
        tenths: (0..n).map(|_| (0..10).map(|_| hist()).collect()).collect(),
        explained: if plan.explain.is_some() {
            vec![(0, [0; plumb_sys::threadtime::PARTS]); n]
        } else {
            Vec::new()
        },
    }));
    let start = Instant::now();
    let window_start = start + plan.rampup;
    let end = window_start + plan.duration;
    let cancellers: Vec<_> = clients.iter().filter_map(|c| c.canceller()).collect();
    let closers: Vec<_> = clients.iter().filter_map(|c| c.closer()).collect();
    let threads = spawn(plan, clients, &stop, &tally, window_start, end);
    let mut seconds = Vec::new();
    let mut interrupted = false;
    let mut next = start + Duration::from_secs(1);
    let mut in_window = false;
    if plan.rampup.is_zero() {
        events(Event::WindowStart);
        in_window = true;
    }
    loop {
        let now = Instant::now();
        if !in_window && now >= window_start {
            events(Event::WindowStart);
            in_window = true;
        }
        if now >= end {
            events(Event::WindowEnd);
            break;
        }
        if threads.iter().all(|t| t.is_finished()) {
            break;
        }
        if cancel() {
            interrupted = true;
            break;
        }
        if now >= next {
            let s = take_second(&tally, seconds.len() as u32 + 1);
            events(Event::Second(&s));
            seconds.push(s);
            next += Duration::from_secs(1);
        }
        let edge = if in_window { end } else { window_start };
        let wake = next.min(edge);
        std::thread::sleep(Duration::from_millis(20).min(wake.saturating_duration_since(now)));
    }
    stop.store(true, Ordering::Relaxed);
    let ended = Instant::now();
    let grace = if interrupted {
        END_GRACE / 2
    } else {
        END_GRACE
    };
    let closed = wind_down(&threads, cancellers, &closers, interrupted, grace);
    let (mut types, lag, late, lost) = gather(plan, threads, closed, grace);
    // Each type's tenths, where the window ran to its end (an interrupted run's last tenths
    // would be empty or short).
    if !interrupted {
        let mut g = tally.lock().unwrap_or_else(|e| e.into_inner());
        for (t, tenths) in types.iter_mut().zip(std::mem::take(&mut g.tenths)) {
            t.tenths = tenths;
        }
    }
    // The last second, however short: what ended after the last full one (the window's last
    // second among them) belongs to the series too.
    let last = take_second(&tally, seconds.len() as u32 + 1);
    if last.done.iter().chain(&last.failed).sum::<u64>() > 0 {
        events(Event::Second(&last));
        seconds.push(last);
    }
    Measured {
        types,
        window: ended.min(end).saturating_duration_since(window_start),
        seconds,
        lag,
        late,
        lost,
        interrupted,
    }
}

/// The CPUs this process may run on (its affinity), at least one.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The clients as threads' loads: those that can share spread round-robin over `threads`
/// (fewer when fewer clients); the others one a thread, blocking. A client that can share
/// waits in `plumb_sys::mux` even alone on its thread: measured against pgbench with a thread
/// a connection, that cost less client CPU a transaction than a blocking read (0.96 of
/// pgbench's against 1.22 on the TPC-B-like transaction, bench/results).
fn groups(
    workers: Vec<(Worker, Box<dyn Client>)>,
    threads: usize,
) -> Vec<Vec<(Worker, Box<dyn Client>)>> {
    let threads = threads.max(1);
    let mut out: Vec<Vec<(Worker, Box<dyn Client>)>> = Vec::new();
    let mut shared: Vec<Vec<(Worker, Box<dyn Client>)>> = Vec::new();
    for (w, mut c) in workers {
        if c.share() {
            if shared.len() < threads {
                shared.push(Vec::new());
            }
            let i = shared.iter().map(Vec::len).sum::<usize>() % threads;
            shared[i].push((w, c));
        } else {
            out.push(vec![(w, c)]);
        }
    }
    out.extend(shared);
    out
}

fn take_second(tally: &Mutex<Tally>, t: u32) -> Second {
    let mut g = tally.lock().unwrap_or_else(|e| e.into_inner());
    let n = g.done.len();
    let p95 = |h: &Histogram<u64>| (!h.is_empty()).then(|| h.value_at_quantile(0.95));
    let mut all = hist();
    for h in &g.lat {
        let _ = all.add(h);
    }
    let s = Second {
        t,
        done: std::mem::replace(&mut g.done, vec![0; n]),
        failed: std::mem::replace(&mut g.failed, vec![0; n]),
        p95_us: p95(&all),
        p95_by_type_us: g.lat.iter().map(p95).collect(),
        explained: std::mem::replace(
            &mut g.explained,
            vec![(0, [0; plumb_sys::threadtime::PARTS]); n],
        ),
    };
    for h in &mut g.lat {
        h.reset();
    }
    s
}

struct Worker {
    plan: Plan,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    window_start: Instant,
    end: Instant,
    /// Transactions a second for this client (open loop).
    rate: Option<f64>,
    rng: Rng,
}

struct WorkerResult {
    types: Vec<TypeStats>,
    lag: Option<Histogram<u64>>,
    late: u64,
    lost: Vec<String>,
}

impl Worker {
    async fn work(mut self, mut client: Box<dyn Client>) -> WorkerResult {
        let paced = self.rate.is_some();
        let mut r = WorkerResult {
            types: (self.plan.mix.iter())
                .map(|(name, _)| TypeStats::new(name, paced))
                .collect(),
            lag: paced.then(hist),
            late: 0,
            lost: Vec::new(),
        };
        let total: u64 = self
            .plan
            .mix
            .iter()
            .map(|(_, w)| *w as u64)
            .sum::<u64>()
            .max(1);
        let mut intended = Instant::now();
        let mut cycle = 0u64;
        // --explain: the connection's server thread, watched from now (it is idle, waiting for
        // this client's first transaction).
        let clocks = self.plan.explain.clone().and_then(|e| {
            let tid = client.server_thread()?;
            e.clocks.watch(tid).ok()?;
            Some((e, tid))
        });
        let read = || clocks.as_ref().and_then(|(e, tid)| e.clocks.read(*tid));
        // What the engine's sampler said of the transaction that ends.
        let running = |kind: Option<usize>| -> Vec<super::explain::Sample> {
            match &clocks {
                Some((e, tid)) => e.in_flight.set(*tid, kind),
                None => Vec::new(),
            }
        };
        while !self.stop.load(Ordering::Relaxed) {
            // No transaction starts after the window: what runs then is nobody's figure.
            if Instant::now() >= self.end {
                break;
            }
            if let Some(rate) = self.rate {
                intended += exp_gap(&mut self.rng, rate);
                if intended >= self.end {
                    break;
                }
                if !self.sleep_until(intended).await {
                    break;
                }
            } else {
                intended = Instant::now();
            }
            let kind = if self.plan.in_order {
                let k = nth(&self.plan.mix, cycle % total);
                cycle += 1;
                k
            } else {
                pick(&self.plan.mix, total, &mut self.rng)
            };
            running(Some(kind));
            let before = read();
            let started = Instant::now();
            let (result, retries) = self.try_kind(client.as_mut(), kind).await;
            let ended = Instant::now();
            let spent = read().zip(before).map(|(a, b)| a.since(&b));
            let sampled = running(None);
            let lat = micros(ended.saturating_duration_since(intended));
            let timed = started >= self.window_start && ended <= self.end;
            self.count_second(
                kind,
                &result,
                lat,
                timed.then(|| self.tenth(ended)),
                spent.as_ref(),
            );
            if timed {
                let s = &mut r.types[kind];
                s.retries += retries;
                let _ = s.latency.record(lat.max(1));
                if let Some(spent) = &spent {
                    let e = s.explained.get_or_insert_with(Default::default);
                    e.add(micros(ended - started), spent, self.tenth(ended));
                    e.matched.add(&sampled, spent);
                }
                if let Some(h) = &mut s.service {
                    let _ = h.record(micros(ended - started).max(1));
                }
                if let Some(h) = &mut r.lag {
                    let l = micros(started.saturating_duration_since(intended));
                    let _ = h.record(l.max(1));
                    r.late += (l > 1000) as u64;
                }
                match &result {
                    Ok(Outcome::Committed) => s.committed += 1,
                    Ok(Outcome::RolledBack) => s.rolled_back += 1,
                    Err(f) => {
                        *s.errors.entry(f.class).or_default() += 1;
                        *s.codes.entry(f.code.clone()).or_default() += 1;
                    }
                }
            }
            if let Err(f) = result {
                if f.class == ErrorClass::LostConnection {
                    // After the run's end, a connection plumb closed itself: the run says so
                    // once (see `run`), not per client.
                    if !self.stop.load(Ordering::Relaxed) {
                        r.lost.push(f.message);
                    }
                    break;
                }
            }
        }
        if let Some((e, tid)) = &clocks {
            e.clocks.unwatch(*tid);
        }
        r
    }

    /// Try `kind` up to max_tries times while it fails with a retryable error.
    async fn try_kind(
        &mut self,
        client: &mut dyn Client,
        kind: usize,
    ) -> (Result<Outcome, Failure>, u64) {
        let mut tries = 0;
        loop {
            tries += 1;
            let r = client.run_async(kind, &mut self.rng).await;
            match &r {
                Err(f) if f.class.retryable() && tries < self.plan.max_tries => {
                    if self.stop.load(Ordering::Relaxed) {
                        return (r, tries as u64 - 1);
                    }
                }
                _ => return (r, tries as u64 - 1),
            }
        }
    }

    /// Which tenth of the timed window `t` falls in.
    fn tenth(&self, t: Instant) -> usize {
        let window = self.end.saturating_duration_since(self.window_start);
        let into = t.saturating_duration_since(self.window_start);
        if window.is_zero() {
            return 0;
        }
        ((into.as_secs_f64() / window.as_secs_f64() * 10.0) as usize).min(9)
    }

    /// Count a transaction in the current second, and (timed, succeeded) in its tenth.
    fn count_second(
        &self,
        kind: usize,
        r: &Result<Outcome, Failure>,
        lat: u64,
        tenth: Option<usize>,
        spent: Option<&plumb_sys::threadtime::Spent>,
    ) {
        let mut g = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        match r {
            Ok(_) => g.done[kind] += 1,
            Err(_) => g.failed[kind] += 1,
        }
        if let (Some(s), Some((n, parts))) = (spent, g.explained.get_mut(kind)) {
            *n += 1;
            for (a, b) in parts.iter_mut().zip(s.parts) {
                *a += b;
            }
        }
        let _ = g.lat[kind].record(lat.max(1));
        if let Some(i) = tenth {
            let _ = g.tenths[kind][i].record(lat.max(1));
        }
    }

    /// Sleep until `t`, waking to look at `stop`; false when stopped.
    async fn sleep_until(&self, t: Instant) -> bool {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= t {
                return true;
            }
            plumb_sys::mux::sleep_until(now + (t - now).min(Duration::from_millis(50))).await;
        }
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// The time to the next arrival of a Poisson process of `rate` a second.
fn exp_gap(rng: &mut Rng, rate: f64) -> Duration {
    // Uniform in (0, 1]: never ln(0).
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let u = 1.0 - u;
    Duration::from_secs_f64((-u.ln() / rate).min(3600.0))
}

/// A transaction type by weight.
/// The type at position `i` of one round through the mix in order (each type weight times).
fn nth(mix: &[(&'static str, u32)], mut i: u64) -> usize {
    for (k, (_, w)) in mix.iter().enumerate() {
        if i < *w as u64 {
            return k;
        }
        i -= *w as u64;
    }
    mix.len().saturating_sub(1)
}

fn pick(mix: &[(&'static str, u32)], total: u64, rng: &mut Rng) -> usize {
    let mut x = rng.below(total);
    for (i, (_, w)) in mix.iter().enumerate() {
        if x < *w as u64 {
            return i;
        }
        x -= *w as u64;
    }
    mix.len() - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client that sleeps `us` per transaction and fails every `fail_every`th with `class`.
    struct Fake {
        us: u64,
        n: u64,
        fail_every: u64,
        class: ErrorClass,
    }

    impl Client for Fake {
        fn run(&mut self, _kind: usize, _rng: &mut Rng) -> Result<Outcome, Failure> {
            std::thread::sleep(Duration::from_micros(self.us));
            self.n += 1;
            if self.fail_every > 0 && self.n % self.fail_every == 0 {
                return Err(Failure {
                    class: self.class,
                    code: "40P01".into(),
                    message: "deadlock detected".into(),
                });
            }
            Ok(Outcome::Committed)
        }
    }

    fn plan(rate: Option<f64>) -> Plan {
        Plan {
            mix: vec![("a", 10), ("b", 1)],
            rampup: Duration::from_millis(200),
            duration: Duration::from_millis(1500),
            rate,
            max_tries: 1,
            seed: 7,
            in_order: false,
            explain: None,
            threads: None,
        }
    }

    /// Remembers the types it was asked to run.
    struct Order(std::sync::Arc<Mutex<Vec<usize>>>);

    impl Client for Order {
        fn run(&mut self, kind: usize, _rng: &mut Rng) -> Result<Outcome, Failure> {
            std::thread::sleep(Duration::from_micros(200));
            self.0.lock().unwrap().push(kind);
            Ok(Outcome::Committed)
        }
    }

    #[test]
    fn in_order_runs_each_type_its_weight_in_a_row_round_and_round() {
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let plan = Plan {
            mix: vec![("truncate", 1), ("insert", 2), ("checkpoint", 1)],
            rampup: Duration::ZERO,
            duration: Duration::from_millis(300),
            in_order: true,
            explain: None,
            ..plan(None)
        };
        let m = run(
            &plan,
            vec![Box::new(Order(seen.clone()))],
            &mut |_| {},
            &|| false,
        );
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() >= 8, "{seen:?}");
        for (i, k) in seen.iter().enumerate() {
            assert_eq!(*k, [0, 1, 1, 2][i % 4], "{seen:?}");
        }
        // Every type ran, the inserts twice as often.
        let n = |i: usize| m.types[i].committed;
        assert!(n(1).abs_diff(2 * n(0)) <= 2, "{:?}", seen);
    }

    fn fakes(n: usize, us: u64, fail_every: u64, class: ErrorClass) -> Vec<Box<dyn Client>> {
        (0..n)
            .map(|_| {
                Box::new(Fake {
                    us,
                    n: 0,
                    fail_every,
                    class,
                }) as Box<dyn Client>
            })
            .collect()
    }

    #[test]
    fn closed_loop_counts_the_window_and_the_mix() {
        let mut ticks = 0;
        let m = run(
            &plan(None),
            fakes(2, 500, 0, ErrorClass::Other),
            &mut |e| {
                if matches!(e, Event::Second(_)) {
                    ticks += 1
                }
            },
            &|| false,
        );
        let (a, b) = (&m.types[0], &m.types[1]);
        assert!(
            a.committed > 10 * b.committed / 2,
            "{} {}",
            a.committed,
            b.committed
        );
        assert!(b.committed > 0);
        assert!(a.latency.value_at_quantile(0.5) >= 500);
        assert!(m.lag.is_none() && a.service.is_none());
        assert_eq!(ticks, 2, "one whole second, then the last 0.7 s");
        assert!(m.window >= Duration::from_millis(1400), "{:?}", m.window);
        // The series holds every transaction that ended, the window's last second included.
        let series: u64 = m.seconds.iter().flat_map(|s| &s.done).sum();
        assert!(series >= a.committed + b.committed, "{series}");
    }

    #[test]
    fn errors_are_counted_by_class_and_retried_when_asked() {
        let mut p = plan(None);
        p.max_tries = 3;
        let m = run(
            &p,
            fakes(1, 100, 2, ErrorClass::Deadlock),
            &mut |_| {},
            &|| false,
        );
        let a = &m.types[0];
        // Every other try fails; the retry succeeds, so nothing fails for good.
        assert!(a.retries > 0 && a.errors.is_empty(), "{a:?}");
        let m = run(
            &plan(None),
            fakes(1, 100, 2, ErrorClass::Deadlock),
            &mut |_| {},
            &|| false,
        );
        let a = &m.types[0];
        assert!(a.errors[&ErrorClass::Deadlock] > 0 && a.codes["40P01"] > 0);
    }

    #[test]
    fn a_lost_connection_stops_its_client_only() {
        let mut c = fakes(1, 100, 0, ErrorClass::Other);
        c.extend(fakes(1, 100, 5, ErrorClass::LostConnection));
        let m = run(&plan(None), c, &mut |_| {}, &|| false);
        assert_eq!(m.lost.len(), 1);
        assert!(m.types[0].committed > 100);
    }

    #[test]
    fn open_loop_keeps_the_rate_and_times_from_the_schedule() {
        let m = run(
            &plan(Some(400.0)),
            fakes(4, 200, 0, ErrorClass::Other),
            &mut |_| {},
            &|| false,
        );
        let done: u64 = m.types.iter().map(|t| t.committed).sum();
        let rate = done as f64 / m.window.as_secs_f64();
        assert!((300.0..500.0).contains(&rate), "{rate}");
        assert!(m.lag.is_some() && m.types[0].service.is_some());
    }

    #[test]
    fn cancel_stops_the_run() {
        let mut p = plan(None);
        p.duration = Duration::from_secs(60);
        let t0 = Instant::now();
        let m = run(
            &p,
            fakes(2, 100, 0, ErrorClass::Other),
            &mut |_| {},
            &|| t0.elapsed() > Duration::from_millis(300),
        );
        assert!(m.interrupted && t0.elapsed() < Duration::from_secs(5));
    }

    /// A session on a Unix socket whose peer answers each byte 5 ms later; it remembers the
    /// threads its transactions ran on.
    struct Echo {
        s: std::os::unix::net::UnixStream,
        threads: std::sync::Arc<Mutex<std::collections::BTreeSet<String>>>,
    }

    impl Echo {
        fn new(threads: &std::sync::Arc<Mutex<std::collections::BTreeSet<String>>>) -> Echo {
            use std::io::{Read, Write};
            let (s, mut peer) = std::os::unix::net::UnixStream::pair().unwrap();
            std::thread::spawn(move || {
                let mut b = [0u8; 1];
                while peer.read_exact(&mut b).is_ok() {
                    std::thread::sleep(Duration::from_millis(5));
                    if peer.write_all(&b).is_err() {
                        break;
                    }
                }
            });
            Echo {
                s,
                threads: threads.clone(),
            }
        }

        fn seen(&self) {
            let me = format!("{:?}", std::thread::current().id());
            self.threads.lock().unwrap().insert(me);
        }
    }

    impl Client for Echo {
        fn run(&mut self, _kind: usize, _rng: &mut Rng) -> Result<Outcome, Failure> {
            use std::io::{Read, Write};
            self.seen();
            self.s.write_all(b"x").unwrap();
            self.s.read_exact(&mut [0u8; 1]).unwrap();
            Ok(Outcome::Committed)
        }

        fn share(&mut self) -> bool {
            self.s.set_nonblocking(true).is_ok()
        }

        fn run_async<'a>(&'a mut self, _kind: usize, _rng: &'a mut Rng) -> TxFuture<'a> {
            Box::pin(async move {
                use std::io::{Read, Write};
                use std::os::fd::AsRawFd;
                self.seen();
                self.s.write_all(b"x").unwrap();
                loop {
                    match self.s.read(&mut [0u8; 1]) {
                        Ok(1) => return Ok(Outcome::Committed),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            plumb_sys::mux::readable(self.s.as_raw_fd()).await
                        }
                        r => panic!("{r:?}"),
                    }
                }
            })
        }
    }

    #[test]
    fn clients_that_can_share_a_thread_wait_on_it_together() {
        // Four clients on one thread: all four transactions in flight at once, so four times
        // one client's rate (5 ms a transaction: about 200 a second each).
        let threads = std::sync::Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let clients: Vec<Box<dyn Client>> =
            (0..4).map(|_| Box::new(Echo::new(&threads)) as _).collect();
        let p = Plan {
            rampup: Duration::ZERO,
            duration: Duration::from_millis(1000),
            threads: Some(1),
            ..plan(None)
        };
        let m = run(&p, clients, &mut |_| {}, &|| false);
        let done: u64 = m.types.iter().map(|t| t.committed).sum();
        assert_eq!(threads.lock().unwrap().len(), 1, "{threads:?}");
        assert!(done > 4 * 120, "{done} in {:?}", m.window);
        // Two clients on two threads: a thread each.
        let threads2 = std::sync::Arc::new(Mutex::new(std::collections::BTreeSet::new()));
        let clients: Vec<Box<dyn Client>> = (0..2)
            .map(|_| Box::new(Echo::new(&threads2)) as _)
            .collect();
        let p = Plan {
            threads: Some(2),
            duration: Duration::from_millis(300),
            ..p
        };
        let m = run(&p, clients, &mut |_| {}, &|| false);
        assert_eq!(threads2.lock().unwrap().len(), 2);
        assert!(m.types.iter().map(|t| t.committed).sum::<u64>() > 2 * 30);
    }
}
