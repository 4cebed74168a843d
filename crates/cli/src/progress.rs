//! Progress that predicts, for the long commands (the lab, io run, sweep, durability): a bar
//! weighted by planned time, not by counting steps; the time left, corrected by how the steps
//! so far kept to their plan; the live figure of the disks under test (I/O per second and MB/s,
//! read each second); 100% at the end. When stderr is not a terminal (a pipe, a CI log), the
//! same as a plain line every ten seconds and at each step.

use indicatif::{ProgressBar, ProgressStyle};
use plumb_sys::Root;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a plain progress line is printed when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

struct State {
    name: String,
    step: String,
    /// Planned time of the steps before this one, and of this one.
    done: Duration,
    planned: Duration,
    total: Duration,
    step_started: Instant,
    /// Finished steps: their planned and actual time (how the plan holds up).
    finished_planned: Duration,
    finished_actual: Duration,
    live: String,
    /// The step's own figure (pgbench's tps), shown instead of the disks' while it is fresh.
    own: Option<(String, Instant)>,
}

impl State {
    /// Where the bar is: the steps done, and this one's time so far up to (nearly) its plan.
    fn position(&self) -> Duration {
        let into = self.step_started.elapsed().min(self.planned.mul_f64(0.98));
        (self.done + into).min(self.total)
    }

    /// The time left: what the plan has left, scaled by how the finished steps kept to it.
    fn eta(&self) -> Duration {
        let left = self.total.saturating_sub(self.position());
        let factor = if self.finished_planned >= Duration::from_secs(3) {
            (self.finished_actual.as_secs_f64() / self.finished_planned.as_secs_f64())
                .clamp(0.5, 3.0)
        } else {
            1.0
        };
        left.mul_f64(factor)
    }

    fn pct(&self) -> u64 {
        if self.total.is_zero() {
            return 0;
        }
        (self.position().as_secs_f64() / self.total.as_secs_f64() * 100.0).floor() as u64
    }

    fn message(&self) -> String {
        let mut m = format!("{} · about {} left", self.step, clock(self.eta()));
        let own = self
            .own
            .as_ref()
            .filter(|(_, at)| at.elapsed() < Duration::from_secs(3))
            .map(|(s, _)| s.as_str());
        if let Some(l) = own.or((!self.live.is_empty()).then_some(self.live.as_str())) {
            m.push_str(" · ");
            m.push_str(l);
        }
        m
    }
}

/// m:ss or h:mm:ss.
fn clock(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// The disks under test, read once a second: I/O per second and MB/s since the last reading.
struct LiveDisks {
    root: Root,
    /// Device names as /proc/diskstats has them (vda, nvme0n1).
    devs: Vec<String>,
    last: Option<(Instant, u64, u64)>,
}

impl LiveDisks {
    fn read(&mut self) -> Option<String> {
        if self.devs.is_empty() {
            return None;
        }
        let stats = plumb_sys::block::read_diskstats(&self.root).ok()?;
        let (mut ios, mut bytes) = (0u64, 0u64);
        for d in stats.iter().filter(|d| self.devs.contains(&d.name)) {
            ios += d.reads + d.writes;
            bytes += d.read_bytes + d.write_bytes;
        }
        let now = Instant::now();
        let out = self.last.map(|(t, i, b)| {
            let s = now.duration_since(t).as_secs_f64().max(1e-3);
            format!(
                "disk {} I/O/s, {:.1} MB/s",
                plumb_report::fmt::count((ios.saturating_sub(i) as f64 / s).round()),
                bytes.saturating_sub(b) as f64 / s / 1e6
            )
        });
        self.last = Some((now, ios, bytes));
        out
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
            finished_planned: Duration::ZERO,
            finished_actual: Duration::ZERO,
            live: String::new(),
            own: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = {
            let (pb, state, stop) = (pb.clone(), state.clone(), stop.clone());
            let mut disks = LiveDisks {
                root: Root::host(),
                devs,
                last: None,
            };
            std::thread::Builder::new()
                .name("plumb-progress".into())
                .spawn(move || {
                    let mut last_disk = Instant::now() - Duration::from_secs(2);
                    let mut last_plain = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        if last_disk.elapsed() >= Duration::from_secs(1) {
                            last_disk = Instant::now();
                            if let Some(l) = disks.read() {
                                state.lock().unwrap().live = l;
                            }
                        }
                        {
                            let s = state.lock().unwrap();
                            pb.set_position(s.position().as_millis() as u64);
                            pb.set_message(s.message());
                            if plain && last_plain.elapsed() >= PLAIN_EVERY {
                                last_plain = Instant::now();
                                eprintln!("{} {:>3}% · {}", s.name, s.pct(), s.message());
                            }
                        }
                        std::thread::sleep(Duration::from_millis(250));
                    }
                })
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
        let mut guard = self.state.lock().unwrap();
        let s = &mut *guard;
        if !s.planned.is_zero() {
            s.finished_planned += s.planned;
            s.finished_actual += s.step_started.elapsed();
        }
        s.step = what.to_string();
        // A figure belongs to its step.
        s.own = None;
        s.done = done;
        s.planned = planned;
        s.total = total.max(done + planned);
        s.step_started = Instant::now();
        self.pb.set_length(s.total.as_millis().max(1) as u64);
        if self.plain {
            eprintln!("{} {:>3}% · {}", s.name, s.pct(), s.message());
        }
    }

    /// The step's own live figure (a workload's transactions per second), shown for the next
    /// few seconds in place of the disks'.
    pub fn live(&self, figure: String) {
        self.state.lock().unwrap().own = Some((figure, Instant::now()));
    }

    /// Every step is done: the bar shows 100% (and a plain line says how long it took).
    pub fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        let s = self.state.lock().unwrap();
        self.pb.set_length(s.total.as_millis().max(1) as u64);
        self.pb.set_position(s.total.as_millis().max(1) as u64);
        if self.plain {
            eprintln!(
                "{} 100% · done in {}",
                s.name,
                clock(self.started.elapsed())
            );
        }
        self.pb.finish_and_clear();
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

#[cfg(test)]
mod tests {
    use super::*;

    fn state(done: u64, planned: u64, total: u64) -> State {
        State {
            name: "t".into(),
            step: "s".into(),
            done: Duration::from_secs(done),
            planned: Duration::from_secs(planned),
            total: Duration::from_secs(total),
            step_started: Instant::now(),
            finished_planned: Duration::ZERO,
            finished_actual: Duration::ZERO,
            live: String::new(),
            own: None,
        }
    }

    #[test]
    fn weighted_by_planned_time() {
        // Two steps of a 100 s plan behind (40 s of it): 40%, not "2 of 7".
        let s = state(40, 30, 100);
        assert_eq!(s.pct(), 40);
        assert_eq!(clock(s.eta()), "1:00");
    }

    #[test]
    fn the_eta_learns_from_the_finished_steps() {
        let mut s = state(40, 30, 100);
        // The first 40 s of plan took 80 s: the rest will likely take twice as long too.
        s.finished_planned = Duration::from_secs(40);
        s.finished_actual = Duration::from_secs(80);
        assert_eq!(clock(s.eta()), "2:00");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }
}
