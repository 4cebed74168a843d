//! The one loop every watcher runs: `plumb record`, the lab's recorder thread, `repl watch`,
//! `mem --watch`, `cpu --watch` and the delta's wait sampler. It owns the ticking (a drift-free
//! [`Schedule`]: late ticks skipped and counted, never bunched), the duration, cancellation
//! (looked at while waiting, so Ctrl-C is answered between ticks) and, when asked, the watch
//! of the window for neighbours that disturbed it ([`crate::watch`]). What happens at a tick is
//! the caller's: it returns [`Flow::Stop`] to end the loop.

use crate::schedule::{Schedule, WAKE_EVERY};
use plumb_analyze::interference::Interference;
use std::time::Duration;

/// When the first tick comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum First {
    /// At once (a recording's first sample).
    Now,
    /// After one interval (a watcher that reports what changed over an interval, and read
    /// its starting point itself).
    AfterInterval,
}

/// How a loop of ticks runs.
pub struct Ticking<'a> {
    pub interval: Duration,
    /// Stop after this long (None: until cancelled or the caller stops).
    pub duration: Option<Duration>,
    /// Looked at while waiting: true ends the loop.
    pub cancel: &'a dyn Fn() -> bool,
    /// How often `cancel` is looked at while waiting.
    pub cancel_every: Duration,
    pub first: First,
    /// Take one last tick when cancelled (a recording that reaches the end of the job).
    pub last_tick_on_cancel: bool,
    /// Judge the whole loop's window for disturbance by other processes.
    pub watch: Option<&'a crate::watch::Scope>,
}

impl<'a> Ticking<'a> {
    /// Every `interval` until `cancel`: first tick now, no last one, no watch.
    pub fn every(interval: Duration, cancel: &'a dyn Fn() -> bool) -> Ticking<'a> {
        Ticking {
            interval,
            duration: None,
            cancel,
            cancel_every: WAKE_EVERY,
            first: First::Now,
            last_tick_on_cancel: false,
            watch: None,
        }
    }

    pub(crate) fn for_(mut self, duration: Option<Duration>) -> Ticking<'a> {
        self.duration = duration;
        self
    }

    pub fn first(mut self, first: First) -> Ticking<'a> {
        self.first = first;
        self
    }

    pub(crate) fn cancel_every(mut self, every: Duration) -> Ticking<'a> {
        self.cancel_every = every;
        self
    }

    pub(crate) fn last_tick_on_cancel(mut self) -> Ticking<'a> {
        self.last_tick_on_cancel = true;
        self
    }

    pub fn watching(mut self, scope: &'a crate::watch::Scope) -> Ticking<'a> {
        self.watch = Some(scope);
        self
    }
}

/// One tick, as the caller sees it.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// 0 for the first.
    pub n: u64,
    /// Since the loop started.
    pub elapsed: Duration,
    /// The loop ends after this tick (the duration is up, or it was cancelled with
    /// `last_tick_on_cancel`).
    pub last: bool,
}

/// What the caller's tick says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Go,
    Stop,
}

/// How a loop ended.
#[derive(Debug)]
pub struct Ticked {
    pub ticks: u64,
    /// Ticks skipped because a tick came too late.
    pub late: u64,
    /// It ended because `cancel` said so.
    pub cancelled: bool,
    pub elapsed: Duration,
    /// The window's disturbance, when watched.
    pub interference: Option<Interference>,
}

/// Run `each` on every tick until it says stop, the duration is up or `cancel`.
pub fn run<E>(t: &Ticking, mut each: impl FnMut(Tick) -> Result<Flow, E>) -> Result<Ticked, E> {
    let watch = t.watch.map(crate::watch::Watch::start);
    let mut schedule = Schedule::new(t.interval).checking_every(t.cancel_every);
    if t.first == First::AfterInterval {
        schedule.advance();
    }
    let mut ticks = 0;
    let mut cancelled = false;
    loop {
        if !schedule.wait(t.cancel) {
            cancelled = true;
            if !t.last_tick_on_cancel {
                break;
            }
        }
        let elapsed = schedule.elapsed();
        let last = cancelled || t.duration.is_some_and(|d| elapsed >= d);
        let flow = each(Tick {
            n: ticks,
            elapsed,
            last,
        })?;
        ticks += 1;
        if flow == Flow::Stop || last {
            break;
        }
        schedule.advance();
    }
    Ok(Ticked {
        ticks,
        late: schedule.late,
        cancelled,
        elapsed: schedule.elapsed(),
        interference: watch.map(crate::watch::Watch::finish),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::time::Instant;

    #[test]
    fn the_duration_ends_the_loop_after_its_tick() {
        let t = Ticking::every(Duration::from_millis(20), &|| false)
            .for_(Some(Duration::from_millis(100)));
        let mut seen = Vec::new();
        let r = run::<()>(&t, |k| {
            seen.push(k.last);
            Ok(Flow::Go)
        })
        .unwrap();
        assert!((5..=7).contains(&r.ticks), "{} ticks", r.ticks);
        assert_eq!(seen.iter().filter(|l| **l).count(), 1);
        assert!(*seen.last().unwrap());
        assert!(!r.cancelled);
    }

    #[test]
    fn cancel_ends_the_wait_and_may_take_a_last_tick() {
        let start = Instant::now();
        let cancel = || start.elapsed() > Duration::from_millis(150);
        let t = Ticking::every(Duration::from_secs(3600), &cancel).first(First::AfterInterval);
        let r = run::<()>(&t, |_| Ok(Flow::Go)).unwrap();
        assert_eq!(r.ticks, 0);
        assert!(r.cancelled);
        assert!(start.elapsed() < Duration::from_secs(2));
        let last = Cell::new(false);
        let t = Ticking::every(Duration::from_secs(3600), &|| true).last_tick_on_cancel();
        let r = run::<()>(&t, |k| {
            last.set(k.last);
            Ok(Flow::Go)
        })
        .unwrap();
        assert_eq!(r.ticks, 1);
        assert!(last.get());
    }

    #[test]
    fn the_callers_stop_and_error_end_the_loop() {
        let t = Ticking::every(Duration::from_millis(1), &|| false);
        let r = run::<()>(&t, |k| Ok(if k.n == 2 { Flow::Stop } else { Flow::Go })).unwrap();
        assert_eq!(r.ticks, 3);
        let e = run(&t, |k| if k.n == 1 { Err("gone") } else { Ok(Flow::Go) }).unwrap_err();
        assert_eq!(e, "gone");
    }
}
