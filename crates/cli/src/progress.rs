//! The progress meter of the long commands (the lab, io run, sweep, durability): the bar and
//! time left of `plumb_report::progress`, the live figure of the disks under test (I/O per
//! second and MB/s, read each second), 100% at the end. When stderr is not a terminal (a pipe,
//! a CI log), the same as a plain line every ten seconds and at each step.

use indicatif::{ProgressBar, ProgressStyle};
use plumb_report::progress::{clock, disk_line, State};
use plumb_sys::Root;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A plain line on stderr; never a panic (a closed stderr stops plumb through SIGPIPE instead,
/// see plumb_sys::signal).
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let line = line.to_string();
    let _ = writeln!(std::io::stderr(), "{}", plumb_sys::visible::lines(&line));
}

/// How often a plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// The meter's thread: the bar and its line four times a second, the disks' figure once a
/// second, a plain line every ten seconds when stderr is not a terminal; until `stop`.
fn tick(
    pb: &ProgressBar,
    state: &Mutex<State>,
    stop: &AtomicBool,
    mut disks: plumb_sys::block::DiskRate,
    plain: bool,
) {
    let mut last_disk = Instant::now() - Duration::from_secs(2);
    let mut last_plain = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if last_disk.elapsed() >= Duration::from_secs(1) {
            last_disk = Instant::now();
            if let Some((iops, bps)) = disks.next() {
                state.lock().unwrap_or_else(|e| e.into_inner()).live = disk_line(iops, bps);
            }
        }
        {
            let s = state.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            pb.set_position(s.position(now).as_millis() as u64);
            pb.set_message(plumb_sys::visible::lines(&s.message(now)).into_owned());
            if plain && last_plain.elapsed() >= PLAIN_EVERY {
                last_plain = Instant::now();
                say(format_args!(
                    "{} {:>3}% · {}",
                    s.name,
                    s.pct(now),
                    s.message(now)
                ));
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub struct Meter {
    pb: ProgressBar,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
    plain: bool,
    started: Instant,
}

impl Meter {
    /// A meter for `name` (e.g. "plumb lab") over `total` planned time, watching `devs`.
    pub fn new(name: &str, total: Duration, devs: Vec<String>) -> Meter {
        let plain = !std::io::stderr().is_terminal();
        let pb = if plain {
            ProgressBar::hidden()
        } else {
            let pb = ProgressBar::new(total.as_millis().max(1) as u64);
            pb.set_style(
                ProgressStyle::with_template("{prefix} [{bar:30}] {percent:>3}% {wide_msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            pb.set_prefix(name.to_string());
            pb
        };
        let state = Arc::new(Mutex::new(State {
            name: name.to_string(),
            step: "starting".into(),
            done: Duration::ZERO,
            planned: Duration::ZERO,
            total,
            step_started: Instant::now(),
            live: String::new(),
            own: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (pb, state, stop) = (pb.clone(), state.clone(), stop.clone());
            let disks = plumb_sys::block::DiskRate::new(Root::host(), devs);
            std::thread::Builder::new()
                .name("plumb-progress".into())
                .spawn(move || tick(&pb, &state, &stop, disks, plain))
                .ok()
        };
        Meter {
            pb,
            state,
            stop,
            ticker,
            plain,
            started: Instant::now(),
        }
    }

    /// A step begins: `done` of the plan is behind it, `planned` is its own, out of `total`
    /// (which may have changed: a skipped experiment, a run repeated).
    pub fn step(&self, what: &str, done: Duration, planned: Duration, total: Duration) {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut *guard;
        s.step = what.to_string();
        // A figure belongs to its step.
        s.own = None;
        s.done = done;
        s.planned = planned;
        s.total = total.max(done + planned);
        s.step_started = Instant::now();
        self.pb.set_length(s.total.as_millis().max(1) as u64);
        if self.plain {
            let now = Instant::now();
            say(format_args!(
                "{} {:>3}% · {}",
                s.name,
                s.pct(now),
                s.message(now)
            ));
        }
    }

    /// A line the user should read, above the bar (or as a plain line).
    pub fn note(&self, line: &str) {
        if self.plain {
            say(format_args!("plumb: {line}"));
        } else {
            self.pb
                .println(format!("plumb: {}", plumb_sys::visible::lines(line)));
        }
    }

    /// The step's own live figure (a workload's transactions per second), shown for the next
    /// few seconds in place of the disks'.
    pub fn live(&self, figure: String) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).own = Some((figure, Instant::now()));
    }

    /// Every step is done: the bar shows 100% (and a plain line says how long it took).
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.pb.set_length(s.total.as_millis().max(1) as u64);
        self.pb.set_position(s.total.as_millis().max(1) as u64);
        if self.plain {
            say(format_args!(
                "{} 100% · done in {}",
                s.name,
                clock(self.started.elapsed())
            ));
        }
        self.pb.finish_and_clear();
    }

    /// 100% when every step is done, cleared without claiming completion otherwise.
    pub fn close(self, finished: bool) {
        if finished {
            self.finish()
        } else {
            self.abandon()
        }
    }

    /// Stop without claiming completion (an error or an interruption).
    pub fn abandon(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.pb.finish_and_clear();
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

/// Every long command's progress events (the lab's, delta's, plumb load's, the I/O runs') drawn
/// on a meter: a step with what is left of the plan ("[n/of] what" where the command counts
/// its steps, its own words where it counts its runs itself), the live figure, notes above the
/// bar; `finished` once every step is done.
pub struct Drawn<'m> {
    meter: &'m Meter,
    numbered: bool,
    pub finished: bool,
}

impl<'m> Drawn<'m> {
    /// Steps shown as "[n/of] what" (the lab's, plumb load's phases).
    pub fn numbered(meter: &'m Meter) -> Drawn<'m> {
        Drawn {
            meter,
            numbered: true,
            finished: false,
        }
    }

    /// Steps shown in their own words ("level 4, run 2/3").
    pub fn plain(meter: &'m Meter) -> Drawn<'m> {
        Drawn {
            meter,
            numbered: false,
            finished: false,
        }
    }
}

impl plumb_lab::Events for Drawn<'_> {
    fn event(&mut self, e: plumb_lab::Event<'_>) {
        use plumb_lab::Event;
        match e {
            Event::Step {
                n,
                of,
                what,
                done,
                planned,
                total,
            } => {
                let what = if self.numbered {
                    format!("[{n}/{of}] {what}")
                } else {
                    what.to_string()
                };
                self.meter.step(&what, done, planned, total)
            }
            Event::Live { what, tps, latency } => self.meter.live(live_line(what, tps, latency)),
            Event::Note(line) => self.meter.note(line),
            Event::Finished { .. } => self.finished = true,
            // Where sampling or tracing started: `plumb record` and `plumb trace` say it in
            // their own lines.
            Event::Serving { .. } | Event::Recording { .. } | Event::Tracing { .. } => {}
        }
    }
}

/// A workload's live figure: "tpcb 1,234 tps, p95 2.5 ms".
fn live_line(what: &str, tps: f64, latency: Option<(&str, f64)>) -> String {
    format!(
        "{what} {} tps{}",
        plumb_report::fmt::count(tps.round()),
        latency
            .map(|(stat, ms)| format!(", {stat} {}", plumb_report::fmt::ms(ms / 1000.0)))
            .unwrap_or_default()
    )
}
