//! What every long command tells its caller as it goes, one event type for all: the steps of
//! a run with what is left of the plan, the live figure and notes (the lab, `plumb load`,
//! `plumb delta`, the I/O commands), and where sampling or tracing started (`plumb record`,
//! `plumb trace`). Here, in the lowest crate that says any of them, so every command above can.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// What happens as a command runs, for the caller to show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// Step `n` of `of` begins (1-based); steps before it are done. `done` of the planned time
    /// is behind it, `planned` is its own, out of `total` (skipped steps are taken out of it).
    Step {
        n: u32,
        of: u32,
        what: &'a str,
        done: Duration,
        planned: Duration,
        total: Duration,
    },
    /// The running step's live figure: which workload, its transactions per second and a
    /// latency, named (pgbench's mean each second, plumb's driver's p95), in milliseconds.
    Live {
        what: &'a str,
        tps: f64,
        latency: Option<(&'static str, f64)>,
    },
    /// Something the user should know now (a killed run's database dropped).
    Note(&'a str),
    /// Every step is done.
    Finished { of: u32 },
    /// The live figures are served here.
    Serving { addr: SocketAddr },
    /// Sampling started.
    Recording {
        file: Option<&'a Path>,
        /// A new file this often (`--out-dir`).
        every: Option<Duration>,
        interval: Duration,
        /// The slow metrics' interval, when longer than `interval`.
        slow: Option<Duration>,
        duration: Option<Duration>,
    },
    /// `plumb trace`'s tracing is in place: what is followed, for how long (None: until the
    /// command exits, the processes end or the caller cancels), and whether it is a command
    /// plumb started.
    Tracing {
        what: &'a str,
        duration: Option<Duration>,
        command: bool,
    },
}

impl<'a> Event<'a> {
    /// Run `k` (0-based) of `of` begins, every run planned to take `per`: the step of a
    /// command made of equal runs (delta's, a sweep's, the durability probe's, one I/O run).
    pub fn run_begins(k: u32, of: u32, what: &'a str, per: Duration) -> Event<'a> {
        Event::Step {
            n: k + 1,
            of,
            what,
            done: per * k,
            planned: per,
            total: per * of,
        }
    }
}

/// Receives a command's events (a closure does).
pub trait Events {
    fn event(&mut self, e: Event);
}

impl<F: FnMut(Event)> Events for F {
    fn event(&mut self, e: Event) {
        self(e)
    }
}
