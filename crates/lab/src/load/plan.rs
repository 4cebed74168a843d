//! What a load run is asked to do ([`LoadConfig`]) and what it reports as it goes
//! ([`LoadEvent`]): below the run (`load`) and its recording (`load::rec`), which both use them.

use plumb_engine::oltp::driver;
use plumb_engine::oltp::Workload;
use plumb_engine::{private, Target};
use std::path::PathBuf;
use std::time::Duration;

/// What a load run is asked to do.
#[derive(Clone)]
pub struct LoadConfig {
    /// A server of the user's (password attached); None: plumb's private instance in `dir`.
    pub target: Option<Target>,
    pub allow_writes: bool,
    pub dir: PathBuf,
    pub set: Vec<String>,
    pub build: Option<private::Build>,
    pub database: String,
    pub workload: Workload,
    /// Warehouses (order-entry) or pgbench's scale (100,000 accounts a unit).
    pub scale: u32,
    pub clients: u32,
    pub rampup: Duration,
    pub duration: Duration,
    pub rate: Option<f64>,
    pub max_tries: u32,
    /// Threads for the clients that can share one (PostgreSQL's); None: one a CPU.
    pub threads: Option<usize>,
    pub keep: bool,
    /// Drop a kept database after the run (it is reused first, after the same checks).
    pub drop_kept: bool,
    pub check: bool,
    pub seed: u64,
    /// Record the host, the server and the workload's figures every second into this file
    /// (a new one), for `plumb report`.
    pub record: Option<PathBuf>,
    /// As the user typed it, for the recording's header.
    pub command_line: String,
    /// Neighbours the user accepts (`--accept-neighbour`): noted in the watched window.
    pub accept: Vec<plumb_analyze::interference::Accept>,
    /// Take each transaction type's time on the server apart (`--explain`): the kernel's clocks
    /// of each connection's server thread (root, eBPF, a server on this host).
    pub explain: bool,
}

/// What the run reports as it goes.
pub enum LoadEvent<'a> {
    /// Something the user should know (a start, a reuse).
    Note(String),
    /// Loading: jobs done of total (the items and each warehouse), since the load began.
    Loading {
        done: u32,
        total: u32,
        elapsed: Duration,
    },
    /// Building the keys and procedures.
    Building,
    /// The clients are connected; the ramp-up starts.
    Driving,
    Second(&'a driver::Second),
    WindowStart,
    WindowEnd,
}
