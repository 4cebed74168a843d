//! The progress of a long command (the lab, io run, sweep, durability) as its line shows it: a
//! bar weighted by planned time, not by counting steps, and the time left, which counts down
//! with the clock and never grows while the plan stands (a step that overruns its plan holds it
//! still rather than scaling every later step by the overrun). The CLI's meter draws it.

use std::time::{Duration, Instant};

/// Where a long command is in its plan, and what its progress line says.
pub struct State {
    pub name: String,
    pub step: String,
    /// Planned time of the steps before this one, and of this one.
    pub done: Duration,
    pub planned: Duration,
    pub total: Duration,
    pub step_started: Instant,
    pub live: String,
    /// The step's own figure (pgbench's tps), shown instead of the disks' while it is fresh.
    pub own: Option<(String, Instant)>,
}

impl State {
    /// Where the bar is at `now`: the steps done, and this one's time so far up to (nearly)
    /// its plan.
    pub fn position(&self, now: Instant) -> Duration {
        let into = now
            .saturating_duration_since(self.step_started)
            .min(self.planned.mul_f64(0.98));
        (self.done + into).min(self.total)
    }

    /// The time left at `now`: the rest of this step's plan (nothing once it overruns) and the
    /// later steps' plans. A step that ends early brings the end nearer; one that overruns
    /// moves it later by the overrun only, never by a factor over the steps still to come.
    pub(crate) fn eta(&self, now: Instant) -> Duration {
        let into = now.saturating_duration_since(self.step_started);
        let later = self.total.saturating_sub(self.done + self.planned);
        self.planned.saturating_sub(into) + later
    }

    pub fn pct(&self, now: Instant) -> u64 {
        if self.total.is_zero() {
            return 0;
        }
        (self.position(now).as_secs_f64() / self.total.as_secs_f64() * 100.0).floor() as u64
    }

    pub fn message(&self, now: Instant) -> String {
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
pub fn clock(d: Duration) -> String {
    crate::fmt::clock(d.as_secs_f64().round() as u64)
}

/// The disks under test as the progress line shows them: `disk 1,234 I/O/s, 56.7 MB/s`.
pub fn disk_line(iops: f64, bytes_per_s: f64) -> String {
    format!(
        "disk {} I/O/s, {:.1} MB/s",
        crate::fmt::count(iops.round()),
        bytes_per_s / 1e6
    )
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
