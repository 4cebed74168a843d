//! When samples are due: drift-free (the k-th at start + k × interval, whatever each sample
//! cost), and ticks slept through (a suspended VM, an overloaded host) skipped and counted
//! rather than bunched up.

use std::time::{Duration, Instant};

/// How long a wait sleeps at most before it looks at the stop condition again, by default
/// ([`Schedule::checking_every`]).
pub const WAKE_EVERY: Duration = Duration::from_millis(50);

pub struct Schedule {
    t0: Instant,
    interval: Duration,
    k: u64,
    /// Ticks skipped because a sample came too late.
    pub late: u64,
    check_every: Duration,
}

impl Schedule {
    /// The first tick is due now.
    pub fn new(interval: Duration) -> Schedule {
        Schedule {
            t0: Instant::now(),
            interval: interval.max(Duration::from_millis(1)),
            k: 0,
            late: 0,
            check_every: WAKE_EVERY,
        }
    }

    /// Look at the stop condition this often while waiting (each look wakes the process: a
    /// recording that is stopped only by a person waits longer between looks).
    pub(crate) fn checking_every(mut self, d: Duration) -> Schedule {
        self.check_every = d.max(Duration::from_millis(1));
        self
    }

    /// Time since the schedule started.
    pub fn elapsed(&self) -> Duration {
        self.t0.elapsed()
    }

    /// Sleep until the next tick is due; false when `stop` said so first.
    pub fn wait(&self, stop: &dyn Fn() -> bool) -> bool {
        let due = self.t0 + self.interval * self.k as u32;
        loop {
            if stop() {
                return false;
            }
            let now = Instant::now();
            if now >= due {
                return true;
            }
            std::thread::sleep((due - now).min(self.check_every));
        }
    }

    /// After a sample: the next tick is the first one still ahead.
    pub(crate) fn advance(&mut self) {
        let passed = (self.t0.elapsed().as_nanos() / self.interval.as_nanos()) as u64;
        let next = (passed + 1).max(self.k + 1);
        self.late += next - self.k - 1;
        self.k = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_slept_through_are_skipped_and_counted() {
        let mut s = Schedule::new(Duration::from_millis(20));
        assert!(s.wait(&|| false));
        // A sample that took three and a half intervals.
        std::thread::sleep(Duration::from_millis(70));
        s.advance();
        assert!(s.late >= 2, "late {}", s.late);
        assert!(s.k >= 4);
        // A stop request ends a wait at once.
        let t = Instant::now();
        let mut far = Schedule::new(Duration::from_secs(3600));
        far.advance();
        assert!(!far.wait(&|| true));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
