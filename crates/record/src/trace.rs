//! A `plumb trace` session: follow a command plumb starts, or running processes and everything
//! they start, for a window (until the command exits, a duration passes, the processes end, or
//! plumb is asked to stop), counting their syscalls, faults and scheduling in the kernel and
//! reading the block layer's trace as it goes; then the result.

use crate::{Error, Result};
use plumb_analyze::trace::{Context, ProcCounters, TraceReport};
use plumb_sys::blockprocs::{BlockAgg, BlockProcTrace};
use plumb_sys::proctrace::{Capacity, ProcTracer, Timing};
use plumb_sys::Root;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to follow.
#[derive(Debug, Clone)]
pub enum Target {
    /// A command plumb starts (traced from its first instruction).
    Command(Vec<String>),
    /// Running processes, with every process they started before and start during the
    /// window; `label` says how they were found.
    Pids { pids: Vec<u32>, label: String },
}

impl Target {
    /// The processes named, with every process they start.
    pub fn pids(pids: &[u32]) -> Target {
        Target::Pids {
            pids: pids.to_vec(),
            label: pids
                .iter()
                .map(|p| format!("PID {p}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The database servers running here, found by name (postgres, mariadbd/mysqld, sqlservr);
    /// refused when there is none.
    pub fn engine_servers(root: &plumb_sys::Root) -> crate::Result<Target> {
        let engines = plumb_sys::smaps::find_engines(root);
        if engines.is_empty() {
            return Err(crate::Error::refused(
                "--engine-server",
                "no database server runs here (looked for postgres, mariadbd/mysqld and sqlservr by name); give --pid",
            ));
        }
        let label = engines
            .iter()
            .map(|e| format!("{} (PID {})", e.kind.name(), e.main_pid))
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Target::Pids {
            pids: engines.iter().map(|e| e.main_pid).collect(),
            label,
        })
    }
}

/// `plumb trace` as the flags say it: what to follow (exactly one of `pids`, `engine_server`
/// and `command`), for how long, and how closely.
pub struct TraceConfig {
    pub root: Root,
    /// Running processes, with what they start.
    pub pids: Vec<u32>,
    /// The database servers running here, found by name.
    pub engine_server: bool,
    /// A command plumb starts.
    pub command: Vec<String>,
    /// The window's length; None: until the command exits, the processes end or `cancel`.
    pub duration: Option<Duration>,
    /// Per thread, not only per process.
    pub threads: bool,
    /// Which syscalls are timed (every call, or [`Timing::DEFAULT`]'s sample).
    pub timing: Timing,
    /// Trace block requests too (tracefs).
    pub block: bool,
}

/// A checked trace, ready to run.
pub struct Trace {
    config: TraceConfig,
    target: Target,
}

impl Trace {
    /// Every check before anything is traced: exactly one thing to follow, a window longer
    /// than zero, and (`engine_server`) a database server that runs here.
    pub fn new(config: TraceConfig) -> Result<Trace> {
        let c = &config;
        let asked = [!c.pids.is_empty(), c.engine_server, !c.command.is_empty()];
        if asked.iter().filter(|x| **x).count() != 1 {
            return Err(Error::refused(
                "plumb trace",
                "say what to trace: --pid PID, --engine-server, or -- CMD ARGS (exactly one of them)",
            ));
        }
        if c.duration.is_some_and(|d| d.is_zero()) {
            return Err(Error::refused("--duration", "must be more than 0"));
        }
        let target = if !c.command.is_empty() {
            Target::Command(c.command.clone())
        } else if c.engine_server {
            Target::engine_servers(&c.root)?
        } else {
            Target::pids(&c.pids)
        };
        Ok(Trace { config, target })
    }

    /// Trace for the window and return what was gathered. `events` hears
    /// [`Event::Tracing`](crate::events::Event::Tracing) once the tracing is in place;
    /// `cancel` ends the window; `signal_command` passes the stop on to the command.
    pub fn run(
        self,
        events: &mut dyn crate::events::Events,
        cancel: &dyn Fn() -> bool,
        signal_command: &dyn Fn(u32),
    ) -> Result<TraceReport> {
        let c = &self.config;
        let events = std::cell::RefCell::new(events);
        let started = |what: &str| {
            events.borrow_mut().event(crate::events::Event::Tracing {
                what,
                duration: c.duration,
                command: !c.command.is_empty(),
            })
        };
        run(
            &c.root,
            &self.target,
            &Options {
                duration: c.duration,
                threads: c.threads,
                timing: c.timing,
                block: c.block,
                cancel,
                signal_command,
                started: &started,
            },
        )
    }
}

struct Options<'a> {
    duration: Option<Duration>,
    threads: bool,
    timing: Timing,
    block: bool,
    /// Polled: true ends the window.
    cancel: &'a dyn Fn() -> bool,
    /// Passes the stop on to the command (the signal plumb received).
    signal_command: &'a dyn Fn(u32),
    /// Told once the tracing is in place (what is followed).
    started: &'a dyn Fn(&str),
}

const TICK: Duration = Duration::from_millis(100);

/// Names and titles of the threads and processes seen, read while they live.
#[derive(Default)]
struct Names {
    seen: BTreeSet<u32>,
}

impl Names {
    fn look(&mut self, root: &Root, tracer: &ProcTracer, cx: &mut Context) {
        for (tid, tgid) in tracer.tasks() {
            for id in [tid, tgid] {
                if id == 0 || !self.seen.insert(id) {
                    continue;
                }
                if let Some(c) = plumb_sys::process::comm(root, id) {
                    cx.names.insert(id, c);
                }
                if id == tgid {
                    if let Some(t) = plumb_sys::process::cmdline(root, id) {
                        cx.titles.insert(id, plumb_engine::redact(&t));
                    }
                }
            }
        }
    }
}

/// A command on hold: forked, waiting before exec until tracing is in place.
struct Held {
    pid: u32,
    go: std::fs::File,
    spawning: std::thread::JoinHandle<std::io::Result<std::process::Child>>,
}

fn pipe() -> Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills two descriptors, which are then owned by the Files.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::Io(std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and nothing else owns them.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// A program name as the shell finds it: a path as given, else the first executable file of
/// that name in PATH (unresolved names are left for spawn to report).
fn resolve(prog: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if prog.contains('/') {
        return prog.into();
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(prog))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| prog.into())
}

/// Fork `command` and hold it before exec, so that tracing can start first. The child tells
/// its PID through one pipe and waits for a byte on another; `Command::spawn` returns only
/// once the child has exec'd, so it runs on a thread of its own.
fn spawn_held(command: &[String]) -> Result<Held> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (prog, args) = command
        .split_first()
        .ok_or_else(|| Error::refused("--", "no command to trace"))?;
    let (pid_r, pid_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    let (pw, gr, gw) = (pid_w.as_raw_fd(), go_r.as_raw_fd(), go_w.as_raw_fd());
    // Resolved here, so that the command's one execve is all the trace shows of the search.
    let mut cmd = std::process::Command::new(resolve(prog));
    cmd.args(args);
    // SAFETY: between fork and exec the child calls only getpid, write, close and read, which
    // are async-signal-safe; the descriptors are open in the child (O_CLOEXEC closes them at
    // exec).
    unsafe {
        cmd.pre_exec(move || {
            libc::close(gw);
            let pid = libc::getpid().to_ne_bytes();
            libc::write(pw, pid.as_ptr().cast(), pid.len());
            let mut b = 0u8;
            // Wait for plumb's go (or EOF: plumb gave up or died).
            while libc::read(gr, (&mut b as *mut u8).cast(), 1) < 0 {
                if *libc::__errno_location() != libc::EINTR {
                    break;
                }
            }
            Ok(())
        });
    }
    let spawning = std::thread::spawn(move || {
        let r = cmd.spawn();
        // The parent's copies: EOF for the reader below when the fork never happened.
        drop(pid_w);
        drop(go_r);
        r
    });
    let mut b = [0u8; 4];
    let mut pid_r = pid_r;
    if pid_r.read_exact(&mut b).is_err() {
        return Err(Error::Command {
            program: prog.clone(),
            source: match spawning.join() {
                Ok(Err(e)) => Some(e),
                _ => None,
            },
        });
    }
    Ok(Held {
        pid: i32::from_ne_bytes(b) as u32,
        go: go_w,
        spawning,
    })
}

impl Held {
    /// Kill the command before it ever runs.
    fn abandon(self) {
        // SAFETY: kill on the PID of our own child, not yet reaped (so not reused).
        unsafe {
            libc::kill(self.pid as i32, libc::SIGKILL);
        }
        drop(self.go);
        if let Ok(Ok(mut c)) = self.spawning.join() {
            let _ = c.wait();
        }
    }

    /// Let the command exec; its Child, or why it could not run.
    fn release(self, prog: &str) -> Result<std::process::Child> {
        use std::io::Write;
        let mut go = self.go;
        let _ = go.write_all(b"x");
        drop(go);
        match self.spawning.join() {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(e)) => Err(Error::Command {
                program: prog.to_string(),
                source: Some(e),
            }),
            Err(_) => Err(Error::Command {
                program: prog.to_string(),
                source: None,
            }),
        }
    }
}

/// A command's exit status as a shell reports it: its code, or 128 + the signal that ended it.
pub(crate) fn exit_code_of(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code()
        .or_else(|| st.signal().map(|s| 128 + s))
        .unwrap_or(2)
}

/// Device names by `MAJ:MIN` (from /sys/dev/block/MAJ:MIN/uevent).
fn device_names(root: &Root, devs: impl Iterator<Item = String>) -> Vec<(String, String)> {
    devs.filter_map(|d| {
        let name = plumb_sys::block::name_of_devnum(root, &d)?;
        Some((d, name))
    })
    .collect()
}

/// A window being traced: start it ([`Session::pids`], or [`run`] for a command), call
/// [`Session::poll`] now and then while it lasts (every 100 ms or so: it reads the block trace
/// as it is written), and [`Session::finish`] it.
pub struct Session {
    root: Root,
    cx: Context,
    tracer: ProcTracer,
    block: Option<BlockProcTrace>,
    agg: BlockAgg,
    names: Names,
    t0: Instant,
    last_names: Instant,
    /// Task names the kernel kept (for processes gone before plumb read their title).
    comms: BTreeMap<u32, String>,
}

/// What every session sets up before the tracer: the syscall table, and the block trace
/// (which also clears tracing that dead plumb runs left).
fn prepare(root: &Root, threads: bool, block: bool) -> (Context, Option<BlockProcTrace>) {
    let mut cx = Context {
        threads,
        ..Default::default()
    };
    cx.table = plumb_sys::syscalls::table(root).unwrap_or_default();
    let mut b = None;
    if block {
        match BlockProcTrace::start() {
            Ok(t) => {
                cx.removed_stale = t.removed.iter().map(|p| p.display().to_string()).collect();
                b = Some(t);
            }
            Err(e) => cx.block_unavailable = Some(e.to_string()),
        }
    }
    (cx, b)
}

impl Session {
    fn new(root: &Root, cx: Context, tracer: ProcTracer, block: Option<BlockProcTrace>) -> Session {
        Session {
            root: root.clone(),
            cx,
            tracer,
            block,
            agg: BlockAgg::default(),
            names: Names::default(),
            t0: Instant::now(),
            last_names: Instant::now() - Duration::from_secs(1),
            comms: BTreeMap::new(),
        }
    }

    /// Follow running processes, their threads, the processes they started and what they
    /// start from now on. Returns the session and how many processes it follows now.
    pub fn pids(
        root: &Root,
        pids: &[u32],
        label: &str,
        threads: bool,
        block: bool,
    ) -> Result<(Session, usize)> {
        Self::pids_timed(root, pids, label, threads, block, Timing::DEFAULT)
    }

    /// One database server (its processes and what they start), the block trace with it,
    /// over a window in which it runs plumb's own bounded workload (the insert/CHECKPOINT loops,
    /// one configuration's commits): its maps are sized for the threads it has now
    /// ([`Capacity::for_threads`]), so the tracer starts in a fraction of the time a host-wide
    /// one takes. What would not fit is counted as lost, as ever.
    pub fn server(root: &Root, pid: u32) -> Result<(Session, usize)> {
        // A PID that is not there counts no threads; pids_sized refuses it.
        let threads: u64 = std::iter::once(pid)
            .chain(plumb_sys::process::descendants(root, pid))
            .filter_map(|p| plumb_sys::process::stat(root, p).ok())
            .map(|s| s.num_threads)
            .sum();
        Self::pids_sized(
            root,
            &[pid],
            "the server",
            false,
            true,
            Timing::DEFAULT,
            Capacity::for_threads(threads),
        )
    }

    /// [`Session::pids`], timing the syscalls as `timing` says.
    pub(crate) fn pids_timed(
        root: &Root,
        pids: &[u32],
        label: &str,
        threads: bool,
        block: bool,
        timing: Timing,
    ) -> Result<(Session, usize)> {
        Self::pids_sized(root, pids, label, threads, block, timing, Capacity::HOST)
    }

    fn pids_sized(
        root: &Root,
        pids: &[u32],
        label: &str,
        threads: bool,
        block: bool,
        timing: Timing,
        cap: Capacity,
    ) -> Result<(Session, usize)> {
        for &p in pids {
            plumb_sys::process::check_pid(root, p)
                .map_err(|source| Error::Pid { pid: p, source })?;
        }
        let (mut cx, block) = prepare(root, threads, block);
        let tracer = ProcTracer::start_sized(pids, timing, cap)?;
        let mut all = pids.to_vec();
        for &p in pids {
            for d in plumb_sys::process::descendants(root, p) {
                tracer.follow(d)?;
                all.push(d);
            }
        }
        all.sort_unstable();
        all.dedup();
        cx.target = label.to_string();
        Ok((Session::new(root, cx, tracer, block), all.len()))
    }

    /// Start `command` traced from its first instruction: it is held before exec until the
    /// tracing is in place. Returns the session and the running command.
    pub fn command(
        root: &Root,
        command: &[String],
        threads: bool,
        block: bool,
    ) -> Result<(Session, std::process::Child)> {
        Self::command_timed(root, command, threads, block, Timing::DEFAULT)
    }

    /// [`Session::command`], timing the syscalls as `timing` says.
    pub(crate) fn command_timed(
        root: &Root,
        command: &[String],
        threads: bool,
        block: bool,
        timing: Timing,
    ) -> Result<(Session, std::process::Child)> {
        let (mut cx, block) = prepare(root, threads, block);
        let held = spawn_held(command)?;
        let tracer = match ProcTracer::start_timed(&[held.pid], timing) {
            Ok(t) => t,
            Err(e) => {
                held.abandon();
                return Err(e.into());
            }
        };
        let child = held.release(&command[0])?;
        cx.target = command.join(" ");
        Ok((Session::new(root, cx, tracer, block), child))
    }

    /// Every followed process's counts so far (the block trace read first), and how many
    /// updates and events were lost so far.
    pub fn counters(&mut self) -> Result<(Vec<ProcCounters>, u64)> {
        if let Some(b) = self.block.as_mut() {
            b.drain(&mut self.agg)?;
        }
        let mut snap = self.tracer.counts();
        self.comms = std::mem::take(&mut snap.comms);
        let l = &snap.lost;
        let lost = l.calls + l.sched + l.processes + self.block.as_ref().map_or(0, |b| b.lost());
        let c = plumb_analyze::trace::counters(
            &snap,
            self.block.is_some().then_some(&self.agg),
            &self.cx.table,
        );
        Ok((c, lost))
    }

    /// What to call a process: its title (command line, passwords masked) or its name, read
    /// now if the session has not seen it yet.
    pub fn label(&mut self, pid: u32) -> Option<String> {
        // Read afresh: a title seen at fork may still be the parent's. A child that still
        // carries its parent's title (a server's backend between fork and the title it sets
        // after the login) is given up to 100 ms to set its own.
        let parent_title = plumb_sys::process::stat(&self.root, pid)
            .ok()
            .and_then(|st| plumb_sys::process::cmdline(&self.root, st.ppid));
        let t0 = Instant::now();
        let mut title = plumb_sys::process::cmdline(&self.root, pid);
        while title.is_some() && title == parent_title && t0.elapsed() < Duration::from_millis(100)
        {
            std::thread::sleep(Duration::from_millis(5));
            title = plumb_sys::process::cmdline(&self.root, pid);
        }
        if let Some(t) = title.filter(|t| !t.is_empty()) {
            self.cx.titles.insert(pid, plumb_engine::redact(&t));
        }
        self.cx
            .titles
            .get(&pid)
            .filter(|t| !t.is_empty())
            .or_else(|| self.cx.names.get(&pid))
            .or_else(|| self.comms.get(&pid))
            .cloned()
    }

    /// Follow one more running process, its threads and the processes it started.
    pub fn follow(&mut self, pid: u32) -> Result<()> {
        self.tracer.follow(pid)?;
        for d in plumb_sys::process::descendants(&self.root, pid) {
            self.tracer.follow(d)?;
        }
        Ok(())
    }

    /// Leave one process out from now on (plumb's own connection to the server it traces).
    pub fn unfollow(&mut self, pid: u32) {
        self.tracer.unfollow(pid);
    }

    /// Read what the block trace holds, and the names of new tasks.
    pub fn poll(&mut self) -> Result<()> {
        if let Some(b) = self.block.as_mut() {
            b.drain(&mut self.agg)?;
        }
        if self.last_names.elapsed() >= Duration::from_millis(500) {
            self.names.look(&self.root, &self.tracer, &mut self.cx);
            self.last_names = Instant::now();
        }
        Ok(())
    }

    /// Seconds since the tracing started.
    pub fn elapsed(&self) -> Duration {
        self.t0.elapsed()
    }

    /// End the window (`ended` says why) and build the result; everything is detached and
    /// removed.
    pub fn finish(mut self, ended: &str, exit_code: Option<i32>) -> Result<TraceReport> {
        let mut cx = std::mem::take(&mut self.cx);
        cx.window_s = self.t0.elapsed().as_secs_f64();
        cx.ended = ended.to_string();
        cx.exit_code = exit_code;
        self.names.look(&self.root, &self.tracer, &mut cx);
        let snap = self.tracer.snapshot();
        cx.syscalls_via = format!("eBPF on {}", self.tracer.syscalls_via());
        cx.maps_bytes = self.tracer.kernel_bytes();
        drop(self.tracer);
        let mut block = self.block.take();
        if let Some(b) = block.as_mut() {
            b.drain_all(&mut self.agg)?;
            cx.block_lost = b.lost();
        }
        cx.alive = snap
            .followed
            .iter()
            .copied()
            .filter(|&p| plumb_sys::process::alive(p))
            .collect();
        cx.device_names = device_names(&self.root, self.agg.devices.keys().cloned())
            .into_iter()
            .collect();
        let traced_block = block.is_some();
        drop(block);
        Ok(plumb_analyze::trace::build(
            &snap,
            traced_block.then_some(&self.agg),
            &cx,
        ))
    }
}

/// Trace `target` for a window and return what was gathered.
fn run(root: &Root, target: &Target, o: &Options) -> Result<TraceReport> {
    let (mut s, mut child, roots) = match target {
        Target::Command(cmd) => {
            let (s, child) = Session::command_timed(root, cmd, o.threads, o.block, o.timing)?;
            let pid = child.id();
            (o.started)(&format!("PID {pid}: {}", s.cx.target));
            (s, Some(child), vec![pid])
        }
        Target::Pids { pids, label } => {
            let (s, n) = Session::pids_timed(root, pids, label, o.threads, o.block, o.timing)?;
            (o.started)(&format!(
                "{label}: {n} process{} and what {} start{}",
                if n == 1 { "" } else { "es" },
                if n == 1 { "it" } else { "they" },
                if n == 1 { "s" } else { "" }
            ));
            (s, None, pids.clone())
        }
    };
    let mut exit_code = None;
    let ended;
    loop {
        s.poll()?;
        if let Some(c) = child.as_mut() {
            if let Some(st) = c.try_wait()? {
                exit_code = Some(exit_code_of(st));
                ended = "command exited";
                break;
            }
        } else if roots.iter().all(|&p| !plumb_sys::process::alive(p)) {
            ended = "processes ended";
            break;
        }
        if (o.cancel)() {
            ended = "interrupted";
            break;
        }
        if o.duration.is_some_and(|d| s.elapsed() >= d) {
            ended = "duration";
            break;
        }
        std::thread::sleep(TICK.min(o.duration.map_or(TICK, |d| d.saturating_sub(s.elapsed()))));
    }
    if let Some(c) = child.as_mut() {
        if exit_code.is_none() {
            let (st, _killed) = crate::foreground::stop(c, o.signal_command)?;
            exit_code = Some(exit_code_of(st));
        }
    }
    s.finish(ended, exit_code)
}

/// A session polled on a thread of its own while the caller works (a statement runs, a lab
/// phase goes on, a recording samples).
pub struct Polled {
    session: Arc<Mutex<Session>>,
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<()>>,
}

impl Polled {
    pub fn start(s: Session) -> Polled {
        let session = Arc::new(Mutex::new(s));
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, flag) = (session.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                shared.lock().unwrap_or_else(|e| e.into_inner()).poll()?;
                std::thread::sleep(TICK);
            }
            Ok(())
        });
        Polled {
            session,
            stop,
            handle,
        }
    }

    /// Work with the session between polls.
    pub fn with<R>(&self, f: impl FnOnce(&mut Session) -> R) -> R {
        f(&mut self.session.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// End the window and build the result.
    pub fn finish(self, ended: &str) -> Result<TraceReport> {
        self.stop.store(true, Ordering::Relaxed);
        let polled = self
            .handle
            .join()
            .map_err(|_| Error::Panicked("the trace's polling thread"))?;
        polled?;
        let s = Arc::into_inner(self.session)
            .ok_or(Error::Panicked("the trace session (still shared)"))?
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        s.finish(ended, None)
    }
}

/// Objects a recording keeps apart; processes seen after these are summed as `trace.other`.
pub const MAX_TRACED_OBJECTS: usize = 16;

/// A trace's counts as recording samples: `trace.PID.FIELD` for the first
/// [`MAX_TRACED_OBJECTS`] processes seen, `trace.other.FIELD` for the rest together,
/// `trace.all.FIELD` for every process, and `trace.all.lost` for what the kernel or the trace
/// buffer had no room for.
pub struct TraceSampler {
    polled: Polled,
    /// Processes with an object of their own.
    own: BTreeSet<u32>,
    /// Processes summed as `other`.
    other: BTreeSet<u32>,
    /// Processes left out (counted before they were unfollowed).
    ignored: BTreeSet<u32>,
}

/// One sample's trace values, and labels for objects seen for the first time.
#[derive(Debug, Default)]
pub struct TraceSample {
    pub values: Vec<(String, u64)>,
    pub labels: Vec<(String, String)>,
}

fn fields(p: &ProcCounters) -> Vec<(&'static str, u64)> {
    let mut v = vec![
        ("syscalls", p.syscalls),
        ("syscall_ns", p.syscall_ns),
        ("fsyncs", p.fsyncs),
        ("fdatasyncs", p.fdatasyncs),
        ("write_calls", p.write_calls),
        ("minor_faults", p.minor_faults),
        ("major_faults", p.major_faults),
        ("involuntary_switches", p.involuntary_switches),
    ];
    if let Some(b) = &p.bios {
        v.extend([
            ("read_bios", b.reads),
            ("write_bios", b.writes),
            ("flush_bios", b.flushes),
            ("fua_bios", b.fua_writes),
        ]);
    }
    v
}

impl TraceSampler {
    pub fn new(polled: Polled) -> TraceSampler {
        TraceSampler {
            polled,
            own: BTreeSet::new(),
            other: BTreeSet::new(),
            ignored: BTreeSet::new(),
        }
    }

    /// Follow one more running process and its children (a restarted engine's server).
    pub fn follow(&mut self, pid: u32) -> Result<()> {
        self.polled.with(|s| s.follow(pid))
    }

    /// Leave one process out from now on (plumb's own connection to the engine).
    pub fn unfollow(&mut self, pid: u32) {
        self.polled.with(|s| s.unfollow(pid));
        self.ignored.insert(pid);
    }

    /// The counts now, as samples.
    pub fn take(&mut self) -> Result<TraceSample> {
        let (procs, lost) = self.polled.with(|s| s.counters())?;
        let mut out = TraceSample::default();
        let mut sums: BTreeMap<&'static str, BTreeMap<&'static str, u64>> = BTreeMap::new();
        for p in procs.iter().filter(|p| !self.ignored.contains(&p.pid)) {
            if !self.own.contains(&p.pid) && !self.other.contains(&p.pid) {
                if self.own.len() < MAX_TRACED_OBJECTS {
                    self.own.insert(p.pid);
                    if let Some(l) = self.polled.with(|s| s.label(p.pid)) {
                        out.labels.push((format!("trace.{}", p.pid), l));
                    }
                } else {
                    self.other.insert(p.pid);
                }
            }
            let f = fields(p);
            for (k, v) in &f {
                *sums.entry("all").or_default().entry(k).or_default() += v;
            }
            if self.own.contains(&p.pid) {
                out.values
                    .extend(f.iter().map(|(k, v)| (format!("trace.{}.{k}", p.pid), *v)));
            } else {
                for (k, v) in &f {
                    *sums.entry("other").or_default().entry(k).or_default() += v;
                }
            }
        }
        for (obj, m) in sums {
            out.values
                .extend(m.into_iter().map(|(k, v)| (format!("trace.{obj}.{k}"), v)));
        }
        out.values.push(("trace.all.lost".into(), lost));
        Ok(out)
    }

    /// End the trace and build its summary.
    pub fn finish(self, ended: &str) -> Result<TraceReport> {
        self.polled.finish(ended)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TraceConfig {
        TraceConfig {
            root: Root::host(),
            pids: Vec::new(),
            engine_server: false,
            command: Vec::new(),
            duration: None,
            threads: false,
            timing: Timing::DEFAULT,
            block: true,
        }
    }

    fn refused(c: TraceConfig) -> String {
        match Trace::new(c) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn new_takes_exactly_one_thing_to_follow_and_a_window_longer_than_zero() {
        assert!(refused(config()).contains("say what to trace"));
        let both = TraceConfig {
            pids: vec![1],
            command: vec!["true".into()],
            ..config()
        };
        assert!(refused(both).contains("exactly one"));
        let zero = TraceConfig {
            pids: vec![1],
            duration: Some(Duration::ZERO),
            ..config()
        };
        assert!(refused(zero).starts_with("--duration: "));
        let pids = Trace::new(TraceConfig {
            pids: vec![1, 2],
            duration: Some(Duration::from_secs(1)),
            ..config()
        })
        .unwrap();
        assert!(matches!(&pids.target, Target::Pids { label, .. } if label == "PID 1, PID 2"));
        // Nothing was started by new: a command is only run by `run`.
        let cmd = Trace::new(TraceConfig {
            command: vec!["/nonexistent/cmd".into()],
            ..config()
        })
        .unwrap();
        assert!(matches!(&cmd.target, Target::Command(c) if c[0] == "/nonexistent/cmd"));
    }
}
