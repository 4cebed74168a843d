//! Derived metrics: rates, shares and latencies computed on read from a recording's raw counters.
//!
//! This is the one metric list (`RULES`): every name `plumb export`, `plumb plot` and `plumb
//! report` use comes from it. Names are dotted snake_case and end in their unit. A counter that
//! goes backwards (a reset, a restarted process) gives a gap, never a negative rate.

use plumb_store::{Recording, MISSING};

/// How a derived metric comes from raw ones of the same object (`disk.vda.`, `cpu.cpu0.`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum How {
    /// A gauge as recorded, times a factor.
    Gauge(f64),
    /// Δraw / Δt, times a factor.
    Rate(f64),
    /// Δraw / Δt as a percentage of time, with raw in this many units per second.
    PctOfTime(f64),
    /// Δraw as a share of Δ(sum of the CPU tick fields), in percent.
    PctOfTicks,
    /// Δfirst / Δsecond (milliseconds per I/O).
    PerOp(&'static str),
    /// As PerOp, times a factor (µs per op recorded, ms per op shown).
    PerOpScaled(&'static str, f64),
    /// Δticks / USER_HZ / Δt, in percent of one CPU.
    TicksPct,
    /// Δpages × page size / Δt.
    PagesPerS,
}

pub struct Rule {
    /// Family prefix: `cpu`, `disk`, `proc`, ... (the object is the next dotted part, if any).
    pub family: &'static str,
    /// Whether the family has an object part (`disk.vda.reads`) or not (`mem.free_bytes`).
    pub per_object: bool,
    pub raw: &'static str,
    pub derived: &'static str,
    pub how: How,
    pub unit: &'static str,
    pub help: &'static str,
}

const CPU_FIELDS: [&str; 6] = [
    "user_ticks",
    "system_ticks",
    "irq_ticks",
    "iowait_ticks",
    "steal_ticks",
    "idle_ticks",
];

macro_rules! r {
    ($f:expr, $o:expr, $raw:expr, $d:expr, $how:expr, $u:expr, $h:expr) => {
        Rule {
            family: $f,
            per_object: $o,
            raw: $raw,
            derived: $d,
            how: $how,
            unit: $u,
            help: $h,
        }
    };
}

pub const RULES: &[Rule] = &[
    r!(
        "cpu",
        true,
        "user_ticks",
        "user_pct",
        How::PctOfTicks,
        "%",
        "time in user mode (with nice)"
    ),
    r!(
        "cpu",
        true,
        "system_ticks",
        "system_pct",
        How::PctOfTicks,
        "%",
        "time in the kernel"
    ),
    r!(
        "cpu",
        true,
        "irq_ticks",
        "irq_pct",
        How::PctOfTicks,
        "%",
        "time in hard and soft interrupts"
    ),
    r!(
        "cpu",
        true,
        "iowait_ticks",
        "iowait_pct",
        How::PctOfTicks,
        "%",
        "idle with I/O outstanding"
    ),
    r!(
        "cpu",
        true,
        "steal_ticks",
        "steal_pct",
        How::PctOfTicks,
        "%",
        "time the hypervisor ran something else"
    ),
    r!(
        "cpu",
        true,
        "idle_ticks",
        "idle_pct",
        How::PctOfTicks,
        "%",
        "idle"
    ),
    r!(
        "sched",
        false,
        "procs_running",
        "runnable_count",
        How::Gauge(1.0),
        "tasks",
        "tasks running or waiting for a CPU"
    ),
    r!(
        "sched",
        false,
        "procs_blocked",
        "blocked_count",
        How::Gauge(1.0),
        "tasks",
        "tasks in uninterruptible sleep (I/O)"
    ),
    r!(
        "sched",
        false,
        "context_switches",
        "context_switches_per_s",
        How::Rate(1.0),
        "/s",
        "context switches"
    ),
    r!(
        "sched",
        false,
        "load1_centi",
        "load1_tasks",
        How::Gauge(0.01),
        "tasks",
        "1-minute load average"
    ),
    r!(
        "sched",
        true,
        "run_delay_ns",
        "run_delay_pct",
        How::PctOfTime(1e9),
        "%",
        "task time spent waiting for this CPU, per wall time (over 100 when several wait)"
    ),
    r!(
        "psi",
        true,
        "some_us",
        "some_pct",
        How::PctOfTime(1e6),
        "%",
        "time some task stalled (PSI)"
    ),
    r!(
        "psi",
        true,
        "full_us",
        "full_pct",
        How::PctOfTime(1e6),
        "%",
        "time all non-idle tasks stalled (PSI)"
    ),
    r!(
        "mem",
        false,
        "total_bytes",
        "total_bytes",
        How::Gauge(1.0),
        "B",
        "MemTotal"
    ),
    r!(
        "mem",
        false,
        "free_bytes",
        "free_bytes",
        How::Gauge(1.0),
        "B",
        "MemFree"
    ),
    r!(
        "mem",
        false,
        "available_bytes",
        "available_bytes",
        How::Gauge(1.0),
        "B",
        "MemAvailable"
    ),
    r!(
        "mem",
        false,
        "cache_bytes",
        "cache_bytes",
        How::Gauge(1.0),
        "B",
        "Buffers + Cached + SReclaimable"
    ),
    r!(
        "mem",
        false,
        "anon_bytes",
        "anon_bytes",
        How::Gauge(1.0),
        "B",
        "AnonPages"
    ),
    r!(
        "mem",
        false,
        "shmem_bytes",
        "shmem_bytes",
        How::Gauge(1.0),
        "B",
        "Shmem"
    ),
    r!(
        "mem",
        false,
        "dirty_bytes",
        "dirty_bytes",
        How::Gauge(1.0),
        "B",
        "Dirty"
    ),
    r!(
        "mem",
        false,
        "swap_used_bytes",
        "swap_used_bytes",
        How::Gauge(1.0),
        "B",
        "swap in use"
    ),
    r!(
        "mem",
        false,
        "swap_in_pages",
        "swap_in_bytes_per_s",
        How::PagesPerS,
        "B/s",
        "read back from swap"
    ),
    r!(
        "mem",
        false,
        "swap_out_pages",
        "swap_out_bytes_per_s",
        How::PagesPerS,
        "B/s",
        "written to swap"
    ),
    r!(
        "mem",
        false,
        "major_faults",
        "major_faults_per_s",
        How::Rate(1.0),
        "/s",
        "page faults that needed I/O"
    ),
    r!(
        "disk",
        true,
        "reads",
        "read_iops",
        How::Rate(1.0),
        "IOPS",
        "reads completed"
    ),
    r!(
        "disk",
        true,
        "writes",
        "write_iops",
        How::Rate(1.0),
        "IOPS",
        "writes completed"
    ),
    r!(
        "disk",
        true,
        "read_bytes",
        "read_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes read"
    ),
    r!(
        "disk",
        true,
        "write_bytes",
        "write_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes written"
    ),
    r!(
        "disk",
        true,
        "read_time_ms",
        "read_await_ms",
        How::PerOp("reads"),
        "ms",
        "mean time per read, queued and in service"
    ),
    r!(
        "disk",
        true,
        "write_time_ms",
        "write_await_ms",
        How::PerOp("writes"),
        "ms",
        "mean time per write, queued and in service"
    ),
    r!(
        "disk",
        true,
        "weighted_time_ms",
        "queue_requests",
        How::Rate(1e-3),
        "requests",
        "mean requests in flight (aqu-sz)"
    ),
    r!(
        "disk",
        true,
        "busy_time_ms",
        "util_pct",
        How::PctOfTime(1e3),
        "%",
        "time with at least one request in flight"
    ),
    r!(
        "disk",
        true,
        "flushes",
        "flushes_per_s",
        How::Rate(1.0),
        "/s",
        "cache FLUSH requests completed"
    ),
    r!(
        "disk",
        true,
        "flush_time_ms",
        "flush_await_ms",
        How::PerOp("flushes"),
        "ms",
        "mean time a cache FLUSH took (what every commit's fdatasync waits for)"
    ),
    r!(
        "proc",
        true,
        "cpu_ticks",
        "cpu_pct",
        How::TicksPct,
        "%",
        "CPU time, in percent of one CPU"
    ),
    r!(
        "proc",
        true,
        "major_faults",
        "major_faults_per_s",
        How::Rate(1.0),
        "/s",
        "page faults that needed I/O"
    ),
    r!(
        "proc",
        true,
        "rss_bytes",
        "rss_bytes",
        How::Gauge(1.0),
        "B",
        "VmRSS"
    ),
    r!(
        "proc",
        true,
        "rss_anon_bytes",
        "rss_anon_bytes",
        How::Gauge(1.0),
        "B",
        "RssAnon"
    ),
    r!(
        "proc",
        true,
        "rss_shmem_bytes",
        "rss_shmem_bytes",
        How::Gauge(1.0),
        "B",
        "RssShmem"
    ),
    r!(
        "proc",
        true,
        "swap_bytes",
        "swap_bytes",
        How::Gauge(1.0),
        "B",
        "smaps_rollup Swap (shared memory included)"
    ),
    r!(
        "proc",
        true,
        "threads",
        "threads_count",
        How::Gauge(1.0),
        "threads",
        "threads"
    ),
    r!(
        "proc",
        true,
        "read_bytes",
        "read_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes read from storage"
    ),
    r!(
        "proc",
        true,
        "write_bytes",
        "write_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes written to storage"
    ),
    r!(
        "proc",
        true,
        "run_delay_ns",
        "run_delay_pct",
        How::PctOfTime(1e9),
        "%",
        "time waiting for a CPU"
    ),
    r!(
        "proc",
        true,
        "cgroup_usage_bytes",
        "cgroup_usage_bytes",
        How::Gauge(1.0),
        "B",
        "its memory cgroup's usage"
    ),
    r!(
        "proc",
        true,
        "cgroup_swap_bytes",
        "cgroup_swap_bytes",
        How::Gauge(1.0),
        "B",
        "its memory cgroup's swap"
    ),
    r!(
        "proc",
        true,
        "cgroup_limit_bytes",
        "cgroup_limit_bytes",
        How::Gauge(1.0),
        "B",
        "its memory cgroup's effective limit"
    ),
    r!(
        "engine",
        false,
        "up",
        "up_count",
        How::Gauge(1.0),
        "",
        "1 while plumb's session to the engine answers, 0 while it does not (plumb reconnects)"
    ),
    r!(
        "engine",
        true,
        "xact_commit",
        "commits_per_s",
        How::Rate(1.0),
        "/s",
        "transactions committed (PostgreSQL, this database)"
    ),
    r!(
        "engine",
        true,
        "xact_rollback",
        "rollbacks_per_s",
        How::Rate(1.0),
        "/s",
        "transactions rolled back (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "blks_read",
        "blocks_read_per_s",
        How::Rate(1.0),
        "/s",
        "blocks not in shared_buffers, read through the OS (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "blks_hit",
        "blocks_hit_per_s",
        How::Rate(1.0),
        "/s",
        "blocks found in shared_buffers (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "temp_bytes",
        "temp_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes spilled to temporary files (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "bytes",
        "bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "WAL bytes generated (PostgreSQL pg_stat_wal)"
    ),
    r!(
        "engine",
        true,
        "syncs",
        "syncs_per_s",
        How::Rate(1.0),
        "/s",
        "WAL syncs issued (PostgreSQL pg_stat_wal; from 18, pg_stat_io's wal rows)"
    ),
    r!(
        "engine",
        true,
        "read_bytes",
        "read_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes the server read through the OS, by backend type (PostgreSQL 16+ pg_stat_io)"
    ),
    r!(
        "engine",
        true,
        "write_bytes",
        "write_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes the server wrote, by backend type (PostgreSQL 16+ pg_stat_io)"
    ),
    r!(
        "engine",
        true,
        "extend_bytes",
        "extend_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes by which the server grew its files, by backend type (PostgreSQL 16+ pg_stat_io)"
    ),
    r!(
        "engine",
        true,
        "fsyncs",
        "fsyncs_per_s",
        How::Rate(1.0),
        "/s",
        "fsync calls, by backend type (PostgreSQL 16+ pg_stat_io)"
    ),
    r!(
        "engine",
        true,
        "buffers_written",
        "buffers_written_per_s",
        How::Rate(1.0),
        "/s",
        "buffers written by checkpoints (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "questions",
        "questions_per_s",
        How::Rate(1.0),
        "/s",
        "statements from clients (MariaDB Questions)"
    ),
    r!(
        "engine",
        true,
        "buffer_pool_reads",
        "buffer_pool_reads_per_s",
        How::Rate(1.0),
        "/s",
        "InnoDB buffer pool misses read from disk (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "data_fsyncs",
        "data_fsyncs_per_s",
        How::Rate(1.0),
        "/s",
        "InnoDB fsync() calls (MariaDB)"
    ),
    r!(
        "tree",
        true,
        "processes",
        "processes_count",
        How::Gauge(1.0),
        "processes",
        "processes in the tree (the process and everything below it)"
    ),
    r!(
        "tree",
        true,
        "threads",
        "threads_count",
        How::Gauge(1.0),
        "threads",
        "threads of the tree's processes"
    ),
    r!(
        "tree",
        true,
        "cpu_ticks",
        "cpu_pct",
        How::TicksPct,
        "%",
        "CPU time of the tree, exited members and reaped children included, in percent of one CPU"
    ),
    r!(
        "tree",
        true,
        "major_faults",
        "major_faults_per_s",
        How::Rate(1.0),
        "/s",
        "page faults that needed I/O, in the whole tree"
    ),
    r!(
        "tree",
        true,
        "read_bytes",
        "read_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes the tree read from storage"
    ),
    r!(
        "tree",
        true,
        "write_bytes",
        "write_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "bytes the tree wrote to storage"
    ),
    r!(
        "tree",
        true,
        "run_delay_ns",
        "run_delay_pct",
        How::PctOfTime(1e9),
        "%",
        "time the tree's threads waited for a CPU, summed (100% is one thread waiting all the time)"
    ),
    r!(
        "tree",
        true,
        "rss_anon_bytes",
        "rss_anon_bytes",
        How::Gauge(1.0),
        "B",
        "RssAnon summed over the tree"
    ),
    r!(
        "tree",
        true,
        "pss_bytes",
        "pss_bytes",
        How::Gauge(1.0),
        "B",
        "PSS summed over the tree: its memory, shared pages counted once"
    ),
    r!(
        "tree",
        true,
        "pss_shmem_bytes",
        "pss_shmem_bytes",
        How::Gauge(1.0),
        "B",
        "PSS of shared memory summed over the tree (the part of the shared segment it has touched)"
    ),
    r!(
        "tree",
        true,
        "swap_pss_bytes",
        "swap_pss_bytes",
        How::Gauge(1.0),
        "B",
        "swapped memory of the tree, shared memory included and counted once (SwapPss)"
    ),
    r!(
        "tree",
        true,
        "started",
        "started_per_s",
        How::Rate(1.0),
        "/s",
        "processes that joined the tree (forks seen)"
    ),
    r!(
        "tree",
        true,
        "exited",
        "exited_per_s",
        How::Rate(1.0),
        "/s",
        "processes that left the tree"
    ),
    r!(
        "role",
        true,
        "processes",
        "processes_count",
        How::Gauge(1.0),
        "processes",
        "processes of this PostgreSQL role in the tree"
    ),
    r!(
        "role",
        true,
        "cpu_ticks",
        "cpu_pct",
        How::TicksPct,
        "%",
        "CPU time of this role's processes, in percent of one CPU"
    ),
    r!(
        "role",
        true,
        "run_delay_ns",
        "run_delay_pct",
        How::PctOfTime(1e9),
        "%",
        "time this role's processes waited for a CPU, summed"
    ),
    r!(
        "role",
        true,
        "rss_anon_bytes",
        "rss_anon_bytes",
        How::Gauge(1.0),
        "B",
        "RssAnon of this role's processes"
    ),
    r!(
        "role",
        true,
        "pss_bytes",
        "pss_bytes",
        How::Gauge(1.0),
        "B",
        "PSS of this role's processes"
    ),
    r!(
        "engine",
        true,
        "sessions_active",
        "sessions_active_count",
        How::Gauge(1.0),
        "sessions",
        "client sessions running a statement (PostgreSQL; plumb's own left out)"
    ),
    r!(
        "engine",
        true,
        "sessions_idle",
        "sessions_idle_count",
        How::Gauge(1.0),
        "sessions",
        "client sessions idle (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "sessions_idle_in_transaction",
        "sessions_idle_in_transaction_count",
        How::Gauge(1.0),
        "sessions",
        "client sessions idle inside an open transaction (PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "waiting_lwlock",
        "waiting_lwlock_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on LWLock (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_lock",
        "waiting_lock_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on Lock (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_bufferpin",
        "waiting_bufferpin_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on BufferPin (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_io",
        "waiting_io_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on IO (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_ipc",
        "waiting_ipc_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on IPC (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_client",
        "waiting_client_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on Client (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_timeout",
        "waiting_timeout_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on Timeout (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_activity",
        "waiting_activity_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on Activity (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_extension",
        "waiting_extension_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on Extension (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "waiting_injectionpoint",
        "waiting_injectionpoint_count",
        How::Gauge(1.0),
        "sessions",
        "active sessions waiting on InjectionPoint (PostgreSQL wait event type)"
    ),
    r!(
        "engine",
        true,
        "clean_bytes",
        "clean_bytes",
        How::Gauge(1.0),
        "B",
        "shared buffers holding a page not changed since read (pg_buffercache)"
    ),
    r!(
        "engine",
        true,
        "dirty_bytes",
        "dirty_bytes",
        How::Gauge(1.0),
        "B",
        "shared buffers holding a changed page not yet written (pg_buffercache)"
    ),
    r!(
        "engine",
        true,
        "unused_bytes",
        "unused_bytes",
        How::Gauge(1.0),
        "B",
        "shared buffers holding no page (pg_buffercache)"
    ),
    r!(
        "engine",
        true,
        "running",
        "running_count",
        How::Gauge(1.0),
        "checkpoints",
        "1 while a checkpoint runs (the checkpointer is not waiting idle; PostgreSQL)"
    ),
    r!(
        "engine",
        true,
        "standbys",
        "standbys_count",
        How::Gauge(1.0),
        "standbys",
        "standbys streaming from this server (pg_stat_replication)"
    ),
    r!(
        "engine",
        true,
        "replay_lag_bytes",
        "replay_lag_bytes",
        How::Gauge(1.0),
        "B",
        "WAL sent but not yet replayed by the furthest standby"
    ),
    r!(
        "engine",
        true,
        "replay_lag_ms",
        "replay_lag_ms",
        How::Gauge(1.0),
        "ms",
        "replay lag of the furthest standby, as the server measured it"
    ),
    r!(
        "engine",
        true,
        "buffer_pool_data_bytes",
        "buffer_pool_data_bytes",
        How::Gauge(1.0),
        "B",
        "InnoDB buffer pool bytes holding data (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "buffer_pool_dirty_bytes",
        "buffer_pool_dirty_bytes",
        How::Gauge(1.0),
        "B",
        "InnoDB buffer pool bytes changed and not yet written (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "buffer_pool_pages_free",
        "buffer_pool_free_pages_count",
        How::Gauge(1.0),
        "pages",
        "InnoDB buffer pool pages free (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "buffer_pool_pages_total",
        "buffer_pool_total_pages_count",
        How::Gauge(1.0),
        "pages",
        "InnoDB buffer pool pages in all (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "threads_running",
        "threads_running_count",
        How::Gauge(1.0),
        "threads",
        "threads running a statement (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "threads_connected",
        "threads_connected_count",
        How::Gauge(1.0),
        "threads",
        "client connections (MariaDB)"
    ),
    r!(
        "engine",
        true,
        "row_lock_current_waits",
        "row_lock_waiting_count",
        How::Gauge(1.0),
        "waits",
        "row lock waits in progress (MariaDB InnoDB)"
    ),
    r!(
        "engine",
        true,
        "row_lock_waits",
        "row_lock_waits_per_s",
        How::Rate(1.0),
        "/s",
        "row lock waits begun (MariaDB InnoDB)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.database_cache_memory_bytes",
        "database_cache_bytes",
        How::Gauge(1.0),
        "B",
        "memory for the buffer pool's database pages (SQL Server Memory Manager)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.free_memory_bytes",
        "free_memory_bytes",
        How::Gauge(1.0),
        "B",
        "memory the server has committed and not used (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.stolen_server_memory_bytes",
        "stolen_memory_bytes",
        How::Gauge(1.0),
        "B",
        "memory taken from the buffer pool for other uses: plans, grants, locks (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.total_server_memory_bytes",
        "total_server_memory_bytes",
        How::Gauge(1.0),
        "B",
        "memory the server has committed (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.target_server_memory_bytes",
        "target_server_memory_bytes",
        How::Gauge(1.0),
        "B",
        "memory the server would like to have (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.memory_grants_outstanding",
        "memory_grants_outstanding_count",
        How::Gauge(1.0),
        "grants",
        "queries holding a workspace memory grant (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "memory_manager.memory_grants_pending",
        "memory_grants_pending_count",
        How::Gauge(1.0),
        "grants",
        "queries waiting for a workspace memory grant (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "plan_cache.cache_pages",
        "plan_cache_bytes",
        How::Gauge(8192.0),
        "B",
        "plan cache size, 8 KiB pages (SQL Server Plan Cache, all instances)"
    ),
    r!(
        "engine",
        true,
        "user_objects_bytes",
        "user_objects_bytes",
        How::Gauge(1.0),
        "B",
        "tempdb space of user objects: temp tables, table variables (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "internal_objects_bytes",
        "internal_objects_bytes",
        How::Gauge(1.0),
        "B",
        "tempdb space of internal objects: sorts, hashes, spools (SQL Server)"
    ),
    r!(
        "engine",
        true,
        "version_store_bytes",
        "version_store_bytes",
        How::Gauge(1.0),
        "B",
        "tempdb version store (SQL Server)"
    ),
    r!(
        "trace",
        true,
        "syscalls",
        "syscalls_per_s",
        How::Rate(1.0),
        "/s",
        "syscalls made (recorded with --trace)"
    ),
    r!(
        "trace",
        true,
        "syscall_ns",
        "syscall_time_pct",
        How::PctOfTime(1e9),
        "%",
        "time inside syscalls, blocking included; 100% is one thread's whole time (--trace)"
    ),
    r!(
        "trace",
        true,
        "fsyncs",
        "fsyncs_per_s",
        How::Rate(1.0),
        "/s",
        "fsync calls (--trace)"
    ),
    r!(
        "trace",
        true,
        "fdatasyncs",
        "fdatasyncs_per_s",
        How::Rate(1.0),
        "/s",
        "fdatasync calls (--trace)"
    ),
    r!(
        "trace",
        true,
        "write_calls",
        "write_calls_per_s",
        How::Rate(1.0),
        "/s",
        "write, pwrite64, writev, pwritev calls (--trace)"
    ),
    r!(
        "trace",
        true,
        "minor_faults",
        "minor_faults_per_s",
        How::Rate(1.0),
        "/s",
        "page faults served from memory (--trace)"
    ),
    r!(
        "trace",
        true,
        "major_faults",
        "major_faults_per_s",
        How::Rate(1.0),
        "/s",
        "page faults that read from storage or swap (--trace)"
    ),
    r!(
        "trace",
        true,
        "involuntary_switches",
        "involuntary_switches_per_s",
        How::Rate(1.0),
        "/s",
        "times taken off a CPU while it could still run (--trace)"
    ),
    r!(
        "trace",
        true,
        "read_bios",
        "read_bios_per_s",
        How::Rate(1.0),
        "/s",
        "block reads its I/O started (--trace)"
    ),
    r!(
        "trace",
        true,
        "write_bios",
        "write_bios_per_s",
        How::Rate(1.0),
        "/s",
        "block writes its I/O started (--trace)"
    ),
    r!(
        "trace",
        true,
        "flush_bios",
        "flushes_per_s",
        How::Rate(1.0),
        "/s",
        "cache FLUSH requests its I/O asked of the device (--trace)"
    ),
    r!(
        "trace",
        true,
        "fua_bios",
        "fua_writes_per_s",
        How::Rate(1.0),
        "/s",
        "writes with FUA (durable without a separate FLUSH) (--trace)"
    ),
    r!(
        "trace",
        true,
        "lost",
        "lost_count",
        How::Gauge(1.0),
        "events",
        "updates and events the trace had no room for, so far: rates are lower bounds when it grows (--trace)"
    ),
    // Replication as the primary sees it (`plumb repl watch --out`), read with every sample.
    r!(
        "replication",
        false,
        "wal_bytes",
        "wal_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "WAL the primary wrote per second (its current WAL position's rate)"
    ),
    r!(
        "replication",
        false,
        "commits_waiting",
        "commits_waiting_count",
        How::Gauge(1.0),
        "commits",
        "commits flushed on the primary and waiting for a synchronous standby (SyncRep)"
    ),
    r!(
        "replication",
        false,
        "longest_wait_us",
        "longest_commit_wait_ms",
        How::Gauge(0.001),
        "ms",
        "how long the longest-waiting of those commits has run its statement"
    ),
    r!(
        "hadr",
        true,
        "send_queue_bytes",
        "send_queue_bytes",
        How::Gauge(1.0),
        "B",
        "log not yet sent to this secondary database (SQL Server log_send_queue_size)"
    ),
    r!(
        "hadr",
        true,
        "send_rate_bytes",
        "send_rate_bytes_per_s",
        How::Gauge(1.0),
        "B/s",
        "the rate log is sent to it, as SQL Server averages it (log_send_rate)"
    ),
    r!(
        "hadr",
        true,
        "redo_queue_bytes",
        "redo_queue_bytes",
        How::Gauge(1.0),
        "B",
        "log received and not yet redone on it (redo_queue_size)"
    ),
    r!(
        "hadr",
        true,
        "redo_rate_bytes",
        "redo_rate_bytes_per_s",
        How::Gauge(1.0),
        "B/s",
        "its redo rate, as SQL Server averages it (redo_rate)"
    ),
    r!(
        "hadr",
        true,
        "lag_ms",
        "secondary_lag_ms",
        How::Gauge(1.0),
        "ms",
        "how far it is behind the primary (secondary_lag_seconds, SQL Server 2016 and later)"
    ),
    r!(
        "hadr",
        true,
        "synchronized",
        "synchronized_count",
        How::Gauge(1.0),
        "",
        "1 while it is SYNCHRONIZED"
    ),
    r!(
        "semisync",
        false,
        "active",
        "active_count",
        How::Gauge(1.0),
        "",
        "1 while commits wait for a replica's acknowledgement (MariaDB Rpl_semi_sync_master_status; it switches off after a commit waited rpl_semi_sync_master_timeout)"
    ),
    r!(
        "semisync",
        false,
        "clients",
        "clients_count",
        How::Gauge(1.0),
        "replicas",
        "replicas connected as semi-synchronous"
    ),
    r!(
        "semisync",
        false,
        "yes_tx",
        "acknowledged_per_s",
        How::Rate(1.0),
        "commits/s",
        "commits a replica acknowledged, per second"
    ),
    r!(
        "semisync",
        false,
        "no_tx",
        "unacknowledged_per_s",
        How::Rate(1.0),
        "commits/s",
        "commits no replica acknowledged (timed out, or semi-sync off), per second"
    ),
    r!(
        "semisync",
        false,
        "tx_wait_us",
        "commit_wait_ms",
        How::PerOpScaled("tx_waits", 0.001),
        "ms",
        "mean time a commit waited for an acknowledgement"
    ),
    r!(
        "repl",
        true,
        "silent_us",
        "silent_ms",
        How::Gauge(0.001),
        "ms",
        "how long this standby, owing a report of WAL sent to it, has not replied (its lags do not move meanwhile); 0 when it answers"
    ),
    r!(
        "repl",
        true,
        "sent_bytes",
        "sent_bytes_per_s",
        How::Rate(1.0),
        "B/s",
        "WAL the primary sent to this standby per second"
    ),
    r!(
        "repl",
        true,
        "sent_behind_bytes",
        "sent_behind_bytes",
        How::Gauge(1.0),
        "B",
        "WAL the primary has written and not yet sent to this standby"
    ),
    r!(
        "repl",
        true,
        "written_behind_bytes",
        "written_behind_bytes",
        How::Gauge(1.0),
        "B",
        "WAL this standby has not yet reported written"
    ),
    r!(
        "repl",
        true,
        "flushed_behind_bytes",
        "flushed_behind_bytes",
        How::Gauge(1.0),
        "B",
        "WAL this standby has not yet reported flushed to its disk (what a synchronous commit waits for)"
    ),
    r!(
        "repl",
        true,
        "replayed_behind_bytes",
        "replayed_behind_bytes",
        How::Gauge(1.0),
        "B",
        "WAL this standby has not yet replayed (what a read on the standby does not see yet)"
    ),
    r!(
        "repl",
        true,
        "write_lag_us",
        "write_lag_ms",
        How::Gauge(0.001),
        "ms",
        "time from a local flush to this standby's report of having written it (PostgreSQL's write_lag)"
    ),
    r!(
        "repl",
        true,
        "flush_lag_us",
        "flush_lag_ms",
        How::Gauge(0.001),
        "ms",
        "time from a local flush to this standby's report of having flushed it (flush_lag)"
    ),
    r!(
        "repl",
        true,
        "replay_lag_us",
        "replay_lag_ms",
        How::Gauge(0.001),
        "ms",
        "time from a local flush to this standby's report of having replayed it (replay_lag)"
    ),
    r!(
        "load",
        true,
        "transactions",
        "transactions_per_s",
        How::Rate(1.0),
        "/s",
        "plumb load's transactions of this type that ended (committed, or rolled back as planned)"
    ),
    r!(
        "load",
        true,
        "failures",
        "failures_per_s",
        How::Rate(1.0),
        "/s",
        "plumb load's transactions of this type that failed (every error class)"
    ),
    r!(
        "load",
        true,
        "p95_us",
        "p95_ms",
        How::Gauge(0.001),
        "ms",
        "the 95th percentile of this type's latencies in the second (plumb load)"
    ),
    r!(
        "load",
        true,
        "server_us",
        "server_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, the server's time (the wall time less the client's part)"
    ),
    r!(
        "load",
        true,
        "cpu_user_us",
        "cpu_user_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, on a CPU in the server's code"
    ),
    r!(
        "load",
        true,
        "cpu_system_us",
        "cpu_system_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, on a CPU in the kernel"
    ),
    r!(
        "load",
        true,
        "run_queue_us",
        "run_queue_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, waiting for a CPU"
    ),
    r!(
        "load",
        true,
        "storage_read_us",
        "storage_read_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, reading from storage"
    ),
    r!(
        "load",
        true,
        "durable_write_us",
        "durable_write_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, waiting for its own durable writes"
    ),
    r!(
        "load",
        true,
        "others_durable_us",
        "others_durable_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, waiting for another server process's durable write"
    ),
    r!(
        "load",
        true,
        "file_write_us",
        "file_write_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, writing files"
    ),
    r!(
        "load",
        true,
        "futex_us",
        "futex_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, asleep on a futex (locks, latches)"
    ),
    r!(
        "load",
        true,
        "latch_us",
        "latch_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, asleep on a latch (epoll/poll)"
    ),
    r!(
        "load",
        true,
        "client_us",
        "client_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, the client's turn, between statements"
    ),
    r!(
        "load",
        true,
        "sleep_us",
        "sleep_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, sleeping"
    ),
    r!(
        "load",
        true,
        "other_us",
        "other_ms",
        How::Gauge(0.001),
        "ms",
        "plumb load --explain: per transaction of this type ending in the second, asleep in other calls"
    ),
    r!(
        "recorder",
        true,
        "marks",
        "marks_per_s",
        How::Rate(1.0),
        "/s",
        "the recorder's marks of this kind (engine, process, command, trace, recording, phase)"
    ),
    r!(
        "stmt",
        true,
        "calls",
        "calls_per_s",
        How::Rate(1.0),
        "/s",
        "executions of this statement that ended (pg_stat_statements, performance_schema digests, query stats)"
    ),
    r!(
        "stmt",
        true,
        "time_us",
        "busy_pct",
        How::PctOfTime(1e6),
        "%",
        "time spent executing this statement, per wall time (over 100 when several sessions run it)"
    ),
    r!(
        "stmt",
        true,
        "time_us",
        "mean_ms",
        How::PerOpScaled("calls", 0.001),
        "ms",
        "mean execution time of this statement's calls in the interval"
    ),
    r!(
        "stmt",
        true,
        "rows",
        "rows_per_s",
        How::Rate(1.0),
        "/s",
        "rows this statement returned or changed"
    ),
    r!(
        "stmt",
        true,
        "blks_read",
        "blocks_read_per_s",
        How::Rate(1.0),
        "/s",
        "blocks (pages) this statement read from outside the engine's cache"
    ),
    r!(
        "stmt",
        true,
        "blks_hit",
        "blocks_hit_per_s",
        How::Rate(1.0),
        "/s",
        "blocks (pages) this statement found in the engine's cache"
    ),
];

/// The engine counters a recording keeps (`engine.SET.FIELD`, from an engine snapshot's
/// `SET.FIELD` counters): the raw fields of the `engine` rules.
pub fn engine_fields() -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.family == "engine" && r.per_object)
        .map(|r| r.raw)
        .collect()
}

/// A derived metric available in a recording.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MetricInfo {
    pub name: String,
    pub unit: &'static str,
    pub help: &'static str,
    #[serde(skip)]
    rule: usize,
    #[serde(skip)]
    prefix: String,
}

/// Split a raw name into (family, object, field).
fn split(raw: &str) -> Option<(&str, Option<&str>, &str)> {
    let mut it = raw.splitn(3, '.');
    let fam = it.next()?;
    let second = it.next()?;
    match it.next() {
        Some(field) => Some((fam, Some(second), field)),
        None => Some((fam, None, second)),
    }
}

/// Every derived metric the recording can give, in rule order per object.
pub fn catalog(rec: &Recording) -> Vec<MetricInfo> {
    let mut out: Vec<MetricInfo> = Vec::new();
    for m in &rec.metrics {
        let Some((fam, obj, field)) = split(&m.name) else {
            continue;
        };
        for (i, r) in RULES.iter().enumerate() {
            if r.family == fam && r.raw == field && r.per_object == obj.is_some() {
                let prefix = match obj {
                    Some(o) => format!("{fam}.{o}."),
                    None => format!("{fam}."),
                };
                out.push(MetricInfo {
                    name: format!("{prefix}{}", r.derived),
                    unit: r.unit,
                    help: r.help,
                    rule: i,
                    prefix,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out.dedup_by(|a, b| a.name == b.name);
    out
}

fn col<'a>(rec: &'a Recording, name: &str) -> Option<&'a [u64]> {
    rec.column(name)
}

fn get(c: &[u64], i: usize) -> Option<f64> {
    (c[i] != MISSING).then(|| c[i] as f64)
}

/// Δ of a counter from row j to row i; None when missing or it went backwards.
fn delta(c: &[u64], j: usize, i: usize) -> Option<f64> {
    if j >= i || c[i] == MISSING || c[j] == MISSING || c[i] < c[j] {
        return None;
    }
    Some((c[i] - c[j]) as f64)
}

/// Sample times in seconds from the start.
pub fn times_s(rec: &Recording) -> Vec<f64> {
    rec.times_ms.iter().map(|t| *t as f64 / 1000.0).collect()
}

/// Compute one derived metric; NaN where it cannot be known.
#[allow(clippy::needless_range_loop)] // rows index several columns at once
pub fn compute(rec: &Recording, info: &MetricInfo) -> Vec<f64> {
    let r = &RULES[info.rule];
    let n = rec.times_ms.len();
    let mut out = vec![f64::NAN; n];
    let raw_name = format!("{}{}", info.prefix, r.raw);
    let Some(raw) = col(rec, &raw_name) else {
        return out;
    };
    // A slow metric (read every few samples) has values only in the samples that read it, and
    // its rates run from one of those to the next.
    let mask = rec
        .metric(&raw_name)
        .filter(|m| m.slow)
        .and_then(|_| rec.slow_rows());
    let rows: Vec<usize> = match &mask {
        Some(m) => (0..n).filter(|&i| m[i]).collect(),
        None => (0..n).collect(),
    };
    let pairs = || rows.windows(2).map(|w| (w[0], w[1]));
    let dt = |j: usize, i: usize| -> Option<f64> {
        (rec.times_ms[i] > rec.times_ms[j])
            .then(|| (rec.times_ms[i] - rec.times_ms[j]) as f64 / 1000.0)
    };
    let hz = rec.header.clock_ticks_per_s.unwrap_or(100) as f64;
    let page = rec.header.page_size_bytes.unwrap_or(4096) as f64;
    match r.how {
        How::Gauge(f) => {
            for &i in &rows {
                if let Some(v) = get(raw, i) {
                    out[i] = v * f;
                }
            }
        }
        How::Rate(_) | How::PctOfTime(_) | How::PagesPerS | How::TicksPct => {
            for (j, i) in pairs() {
                if let (Some(d), Some(t)) = (delta(raw, j, i), dt(j, i)) {
                    out[i] = match r.how {
                        How::Rate(f) => d / t * f,
                        How::PctOfTime(f) => d / f / t * 100.0,
                        How::PagesPerS => d * page / t,
                        How::TicksPct => d / hz / t * 100.0,
                        _ => unreachable!(),
                    };
                }
            }
        }
        How::PctOfTicks => {
            let fields: Vec<&[u64]> = CPU_FIELDS
                .iter()
                .filter_map(|f| col(rec, &format!("{}{f}", info.prefix)))
                .collect();
            for (j, i) in pairs() {
                let total: Option<f64> = fields.iter().map(|c| delta(c, j, i)).sum();
                if let (Some(d), Some(t)) = (delta(raw, j, i), total) {
                    if t > 0.0 {
                        out[i] = d / t * 100.0;
                    }
                }
            }
        }
        How::PerOp(ops) | How::PerOpScaled(ops, _) => {
            let f = match r.how {
                How::PerOpScaled(_, f) => f,
                _ => 1.0,
            };
            if let Some(o) = col(rec, &format!("{}{ops}", info.prefix)) {
                for (j, i) in pairs() {
                    if let (Some(d), Some(k)) = (delta(raw, j, i), delta(o, j, i)) {
                        if k > 0.0 {
                            out[i] = d / k * f;
                        }
                    }
                }
            }
        }
    }
    out
}

/// The total of a rate over the recording (Σ rate × the time it covers): how many commits,
/// bytes, syscalls in all. A slow metric's rate covers the time since the previous sample that
/// read it.
pub fn total_over_time(rec: &Recording, info: &MetricInfo) -> f64 {
    let v = compute(rec, info);
    let t = times_s(rec);
    let slow = if is_slow(rec, info) {
        rec.slow_rows()
    } else {
        None
    };
    let mut sum = 0.0;
    let mut prev: Option<usize> = None;
    for i in 0..v.len() {
        if slow.as_ref().is_some_and(|m| !m[i]) {
            continue;
        }
        if let (Some(j), true) = (prev, v[i].is_finite()) {
            sum += v[i] * (t[i] - t[j]);
        }
        prev = Some(i);
    }
    sum
}

/// Whether a derived metric is slow: it has values only in the samples that read it (a
/// recording at 100 ms reads the engine and smaps every second).
pub fn is_slow(rec: &Recording, info: &MetricInfo) -> bool {
    let r = &RULES[info.rule];
    rec.slow_rows().is_some()
        && rec
            .metric(&format!("{}{}", info.prefix, r.raw))
            .is_some_and(|m| m.slow)
}

pub fn find<'a>(cat: &'a [MetricInfo], name: &str) -> Option<&'a MetricInfo> {
    cat.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_store::{Header, Kind, Writer};

    fn rec(samples: &[(u64, Vec<(&str, Kind, u64)>)]) -> Recording {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.plumb");
        let h = Header {
            format_version: 1,
            plumb_version: "t".into(),
            started_unix_ms: 0,
            interval_ms: 1000,
            slow_interval_ms: None,
            hostname: None,
            kernel: None,
            cpus: Some(1),
            clock_ticks_per_s: Some(100),
            page_size_bytes: Some(4096),
            command_line: String::new(),
            labels: Default::default(),
        };
        let mut w = Writer::create(&p, &h).unwrap();
        for (t, v) in samples {
            w.sample(*t, v).unwrap();
        }
        plumb_store::read(&p).unwrap()
    }

    #[test]
    fn names_follow_the_rule_and_are_unique() {
        let units = [
            "_pct",
            "_bytes",
            "_bytes_per_s",
            "_per_s",
            "_iops",
            "_ms",
            "_count",
            "_tasks",
            "_requests",
        ];
        let mut seen = std::collections::HashSet::new();
        for r in RULES {
            assert!(
                units.iter().any(|u| r.derived.ends_with(u)),
                "{} has no unit suffix",
                r.derived
            );
            assert!(
                r.derived
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                r.derived
            );
            assert!(
                seen.insert((r.family, r.derived)),
                "{}.{} twice",
                r.family,
                r.derived
            );
        }
    }

    #[test]
    fn a_slow_counters_rate_spans_the_samples_that_read_it() {
        use Kind::*;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.plumb");
        let h = Header {
            format_version: 1,
            plumb_version: "t".into(),
            started_unix_ms: 0,
            interval_ms: 100,
            slow_interval_ms: Some(1000),
            hostname: None,
            kernel: None,
            cpus: Some(1),
            clock_ticks_per_s: Some(100),
            page_size_bytes: Some(4096),
            command_line: String::new(),
            labels: Default::default(),
        };
        let mut w = Writer::create(&p, &h).unwrap();
        w.set_slow(|n| n.starts_with("engine."));
        for t in 0..=20u64 {
            let reads = vec![("disk.vda.reads", Counter, t * 10)];
            if t % 10 == 0 {
                let mut all = reads.clone();
                all.push((plumb_store::SLOW_SAMPLES, Counter, t / 10 + 1));
                // 100 commits in the first second, 200 in the second.
                all.push((
                    "engine.db.xact_commit",
                    Counter,
                    [0, 100, 300][t as usize / 10],
                ));
                w.sample(t * 100, &all).unwrap();
            } else {
                w.sample_fast(t * 100, &reads).unwrap();
            }
        }
        drop(w);
        let r = plumb_store::read(&p).unwrap();
        let cat = catalog(&r);
        let commits = find(&cat, "engine.db.commits_per_s").unwrap();
        let v = compute(&r, commits);
        assert!(is_slow(&r, commits));
        assert_eq!(v[10], 100.0);
        assert_eq!(v[20], 200.0);
        assert!(v[5].is_nan() && v[15].is_nan(), "{v:?}");
        assert!((total_over_time(&r, commits) - 300.0).abs() < 1e-9);
        // A fast metric is as it always was: 10 reads per 100 ms.
        let reads = find(&cat, "disk.vda.read_iops").unwrap();
        assert!(!is_slow(&r, reads));
        assert_eq!(compute(&r, reads)[5], 100.0);
        assert!((total_over_time(&r, reads) - 200.0).abs() < 1e-9);
    }

    #[test]
    fn rates_shares_and_resets() {
        use Kind::*;
        let r = rec(&[
            (
                0,
                vec![
                    ("disk.vda.reads", Counter, 100),
                    ("disk.vda.read_time_ms", Counter, 1000),
                    ("cpu.all.user_ticks", Counter, 0),
                    ("cpu.all.idle_ticks", Counter, 0),
                    ("mem.swap_in_pages", Counter, 10),
                ],
            ),
            (
                1000,
                vec![
                    ("disk.vda.reads", Counter, 300),
                    ("disk.vda.read_time_ms", Counter, 1400),
                    ("cpu.all.user_ticks", Counter, 25),
                    ("cpu.all.idle_ticks", Counter, 75),
                    ("mem.swap_in_pages", Counter, 12),
                ],
            ),
            // The counter resets (a device re-added): no negative rate.
            (
                2000,
                vec![
                    ("disk.vda.reads", Counter, 5),
                    ("disk.vda.read_time_ms", Counter, 5),
                    ("cpu.all.user_ticks", Counter, 50),
                    ("cpu.all.idle_ticks", Counter, 150),
                    ("mem.swap_in_pages", Counter, 12),
                ],
            ),
            (
                4000,
                vec![
                    ("disk.vda.reads", Counter, 45),
                    ("disk.vda.read_time_ms", Counter, 85),
                    ("cpu.all.user_ticks", Counter, 50),
                    ("cpu.all.idle_ticks", Counter, 150),
                    ("mem.swap_in_pages", Counter, 12),
                ],
            ),
        ]);
        let cat = catalog(&r);
        let v = |n: &str| {
            compute(
                &r,
                find(&cat, n).unwrap_or_else(|| {
                    panic!(
                        "{n} not in {:?}",
                        cat.iter().map(|m| &m.name).collect::<Vec<_>>()
                    )
                }),
            )
        };
        let iops = v("disk.vda.read_iops");
        assert!(iops[0].is_nan());
        assert_eq!(iops[1], 200.0);
        assert!(iops[2].is_nan(), "a reset is a gap");
        assert_eq!(iops[3], 20.0, "40 reads over 2 s");
        let aw = v("disk.vda.read_await_ms");
        assert_eq!(aw[1], 2.0);
        assert_eq!(aw[3], 2.0);
        assert_eq!(v("cpu.all.user_pct")[1], 25.0);
        assert_eq!(v("mem.swap_in_bytes_per_s")[1], 8192.0);
        assert!(
            cat.iter().all(|m| !m.name.contains("_ticks")),
            "raw names stay raw"
        );
    }
}
