//! What the record crate's commands tell their caller as they go (`plumb record`'s recording
//! starting, `plumb trace`'s tracing in place), below the recorder and the trace so both can
//! say it.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// What happens as a recording starts, for the caller to show.
#[derive(Debug)]
pub enum Event<'a> {
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

/// Receives a recording's events (a closure does).
pub trait Events {
    fn event(&mut self, e: Event);
}

impl<F: FnMut(Event)> Events for F {
    fn event(&mut self, e: Event) {
        self(e)
    }
}
