//! Progress that predicts, for the long commands (the lab, io run, sweep, durability): a bar
//! weighted by planned time, not by counting steps; the time left, which counts down with the
//! clock and never grows while the plan stands (a step that overruns its plan holds it still
//! rather than scaling every later step by the overrun); the live figure of the disks under test (I/O per second and MB/s,
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
    live: String,
    /// The step's own figure (pgbench's tps), shown instead of the disks' while it is fresh.
    own: Option<(String, Instant)>,
}

impl State {
    /// Where the bar is at `now`: the steps done, and this one's time so far up to (nearly)
    /// its plan.
    fn position(&self, now: Instant) -> Duration {
        let into = now
            .saturating_duration_since(self.step_started)
            .min(self.planned.mul_f64(0.98));
        (self.done + into).min(self.total)
    }

    /// The time left at `now`: the rest of this step's plan (nothing once it overruns) and the
    /// later steps' plans. A step that ends early brings the end nearer; one that overruns
    /// moves it later by the overrun only, never by a factor over the steps still to come.
    fn eta(&self, now: Instant) -> Duration {
        let into = now.saturating_duration_since(self.step_started);
        let later = self.total.saturating_sub(self.done + self.planned);
        self.planned.saturating_sub(into) + later
    }

    fn pct(&self, now: Instant) -> u64 {
        if self.total.is_zero() {
            return 0;
        }
        (self.position(now).as_secs_f64() / self.total.as_secs_f64() * 100.0).floor() as u64
    }

    fn message(&self, now: Instant) -> String {
        let mut m = format!("{} · about {} left", self.step, clock(self.eta(now)));
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

/// m:ss or h:mm:ss, to the nearest second.
fn clock(d: Duration) -> String {
    plumb_report::fmt::clock(d.as_secs_f64().round() as u64)
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
                            let now = Instant::now();
                            pb.set_position(s.position(now).as_millis() as u64);
                            pb.set_message(s.message(now));
                            if plain && last_plain.elapsed() >= PLAIN_EVERY {
                                last_plain = Instant::now();
                                eprintln!("{} {:>3}% · {}", s.name, s.pct(now), s.message(now));
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
            eprintln!("{} {:>3}% · {}", s.name, s.pct(now), s.message(now));
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

    fn state(done: u64, planned: u64, total: u64, started: Instant) -> State {
        State {
            name: "t".into(),
            step: "s".into(),
            done: Duration::from_secs(done),
            planned: Duration::from_secs(planned),
            total: Duration::from_secs(total),
            step_started: started,
            live: String::new(),
            own: None,
        }
    }

    #[test]
    fn weighted_by_planned_time() {
        // Two steps of a 100 s plan behind (40 s of it): 40%, not "2 of 7".
        let t = Instant::now();
        let s = state(40, 30, 100, t);
        assert_eq!(s.pct(t), 40);
        assert_eq!(clock(s.eta(t)), "1:00");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
    }

    /// A lab-like run whose steps take from a third to three times their plan: the time left,
    /// read every quarter second, never grows, and the predicted end (now + left) moves later
    /// only by the time a step spent beyond its plan.
    #[test]
    fn the_time_left_never_grows_and_an_overrun_moves_the_end_by_itself_only() {
        let s = Duration::from_secs;
        let planned = [s(2), s(10), s(14), s(1), s(10), s(20), s(1)];
        let actual = [s(6), s(4), s(30), s(3), s(10), s(21), s(1)];
        let total: Duration = planned.iter().sum();
        let t0 = Instant::now();
        let (mut now, mut done) = (t0, Duration::ZERO);
        let mut last: Option<(Duration, Instant)> = None;
        for (p, a) in planned.iter().zip(actual) {
            let st = State {
                done,
                planned: *p,
                step_started: now,
                ..state(0, 0, total.as_secs(), now)
            };
            let end = now + a;
            while now < end {
                let left = st.eta(now);
                if let Some((prev_left, prev_now)) = last {
                    assert!(
                        left <= prev_left,
                        "the time left grew: {prev_left:?} → {left:?}"
                    );
                    // The predicted end moved later by no more than the time that passed.
                    let moved = (now + left).saturating_duration_since(prev_now + prev_left);
                    assert!(
                        moved <= now - prev_now,
                        "moved by {moved:?} in {:?}",
                        now - prev_now
                    );
                }
                last = Some((left, now));
                now += Duration::from_millis(250);
            }
            now = end;
            done += *p;
            if done == total {
                // The last step ended on its plan: nothing left.
                assert_eq!(st.eta(now), Duration::ZERO);
            }
        }
        assert!(last.is_some());
    }
}
