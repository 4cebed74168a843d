//! `plumb trace`'s result: what the followed processes asked of the kernel over a window —
//! syscalls like `strace -c` (per process, per thread on request), the block requests they
//! caused beside each device's total, faults and scheduling — built from what
//! [`plumb_sys::proctrace`] counted in the kernel and [`plumb_sys::blockprocs`] read from the
//! block layer's trace.

use crate::{Level, Note, WithFacts};
use plumb_sys::blockprocs::{BlockAgg, ProcBios};
use plumb_sys::proctrace::{LogHist, Snapshot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Calls needed before a median is shown, and before a 99th percentile is.
pub const MIN_FOR_P50: u64 = 10;
pub const MIN_FOR_P99: u64 = 100;

/// One syscall's row, as `strace -c` prints it, with percentiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SyscallRow {
    pub name: String,
    pub calls: u64,
    pub errors: u64,
    /// Calls timed: all of them when `calls` equals it; else the time, mean and percentiles
    /// are estimates from these, each weighted by the calls it stands for (plumb times every
    /// call of a syscall while it is rare, one in eight beyond).
    pub timed: u64,
    /// Time from entry to exit (wall clock, blocking included), summed.
    pub total_s: f64,
    pub mean_s: f64,
    /// From a log-linear histogram: within an eighth of the true value; absent when the calls
    /// are too few ([`MIN_FOR_P50`], [`MIN_FOR_P99`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_s: Option<f64>,
    pub max_s: f64,
    /// Share of the summed time of all syscalls in this table (0..1).
    pub share: f64,
}

/// Faults and scheduling over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SchedRow {
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Time runnable but waiting for a CPU, summed, and how many such waits.
    pub run_delay_s: f64,
    pub run_delays: u64,
}

/// Block requests one process caused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockRow {
    pub bios: ProcBios,
    /// Issue-to-completion time of the requests its bios started, by kind.
    pub latency: BTreeMap<String, Latency>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub requests: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_s: Option<f64>,
}

/// A thread (with `--threads`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadTrace {
    pub tid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub syscalls: Vec<SyscallRow>,
    pub sched: SchedRow,
}

/// One process followed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcTrace {
    pub pid: u32,
    /// Its name (`comm`), and its title (command line; PostgreSQL writes the backend's role
    /// there), when plumb saw it alive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Ended before the window closed.
    pub exited: bool,
    pub syscalls: Vec<SyscallRow>,
    pub syscall_time_s: f64,
    pub calls: u64,
    pub sched: SchedRow,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockRow>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<ThreadTrace>,
}

/// What a device received from everybody over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRow {
    /// `vda`, or `MAJ:MIN` when the name is unknown.
    pub device: String,
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    pub flushes: u64,
    pub fua_writes: u64,
    pub preflush_writes: u64,
    pub discards: u64,
    pub patterns: BTreeMap<String, u64>,
    pub latency: BTreeMap<String, Latency>,
}

/// What was lost on the way: the figures are then lower bounds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Losses {
    /// Syscalls, scheduling events or processes the kernel-side maps had no room for.
    pub syscall_updates: u64,
    pub sched_updates: u64,
    pub processes: u64,
    /// Block trace events dropped because the buffer was full before plumb read it.
    pub block_events: u64,
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceReport {
    /// What was traced, as given: a command line, PIDs, or the engine server found.
    pub target: String,
    pub window_s: f64,
    /// Why the window ended: `command exited`, `duration`, `interrupted`, `processes ended`.
    pub ended: String,
    /// The command's exit status, when plumb ran one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Every followed process together, like `strace -c -f`.
    pub syscalls: Vec<SyscallRow>,
    pub sched: SchedRow,
    /// Processes, most syscall time first.
    pub processes: Vec<ProcTrace>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<DeviceRow>>,
    pub lost: Losses,
    /// How the syscalls were caught (eBPF on `raw tracepoints`, or on `tracepoints`).
    pub syscalls_via: String,
    /// The kernel memory plumb's maps held at the end, where the kernel says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maps_bytes: Option<u64>,
    pub notes: Vec<Note>,
}

/// What the session knew besides the kernel's counts.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub target: String,
    pub window_s: f64,
    pub ended: String,
    pub exit_code: Option<i32>,
    /// Syscall numbers to names (this system's table).
    pub table: BTreeMap<u32, String>,
    /// Names and titles seen, by PID or TID.
    pub names: BTreeMap<u32, String>,
    pub titles: BTreeMap<u32, String>,
    /// Processes still alive when the window closed.
    pub alive: BTreeSet<u32>,
    /// Device names by `MAJ:MIN`.
    pub device_names: BTreeMap<String, String>,
    pub threads: bool,
    pub block_lost: u64,
    /// Tracing left behind by plumb runs that died, removed at the start.
    pub removed_stale: Vec<String>,
    /// Why block requests were not traced, when they were not.
    pub block_unavailable: Option<String>,
    pub syscalls_via: String,
    pub maps_bytes: Option<u64>,
}

/// Calls, errors, total ns and max ns, by syscall number.
/// nr → calls, errors, total ns, max ns, calls timed.
type ByNr = BTreeMap<u32, (u64, u64, u64, u64, u64)>;

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn latency(h: &LogHist) -> Latency {
    let n = h.count();
    Latency {
        requests: n,
        p50_s: (n >= MIN_FOR_P50)
            .then(|| h.quantile(0.5).map(secs))
            .flatten(),
        p99_s: (n >= MIN_FOR_P99)
            .then(|| h.quantile(0.99).map(secs))
            .flatten(),
    }
}

/// Rows of (nr → calls, errors, total, max, histogram), most time first, shares of this table.
fn rows(
    by_nr: &ByNr,
    hist: &BTreeMap<u32, LogHist>,
    table: &BTreeMap<u32, String>,
) -> Vec<SyscallRow> {
    let total: u64 = by_nr.values().map(|v| v.2).sum();
    let mut out: Vec<SyscallRow> = by_nr
        .iter()
        .map(|(nr, &(calls, errors, t, max, timed))| {
            let h = hist.get(nr);
            // Enough calls timed, not only made (see plumb_sys::proctrace::Timing).
            let q = |min: u64, q: f64| {
                h.filter(|_| timed >= min)
                    .and_then(|h| h.quantile(q))
                    .map(secs)
            };
            SyscallRow {
                name: plumb_sys::syscalls::name(table, *nr),
                calls,
                errors,
                timed,
                total_s: secs(t),
                mean_s: secs(t) / calls.max(1) as f64,
                p50_s: (calls >= MIN_FOR_P50)
                    .then(|| q(MIN_FOR_P50, 0.5))
                    .flatten(),
                p99_s: (calls >= MIN_FOR_P99)
                    .then(|| q(MIN_FOR_P99, 0.99))
                    .flatten(),
                max_s: secs(max),
                share: if total > 0 {
                    t as f64 / total as f64
                } else {
                    0.0
                },
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.total_s
            .total_cmp(&a.total_s)
            .then(b.calls.cmp(&a.calls))
            .then(a.name.cmp(&b.name))
    });
    out
}

fn add_call(m: &mut ByNr, c: &plumb_sys::proctrace::CallStat) {
    let e = m.entry(c.nr).or_default();
    e.0 += c.calls;
    e.1 += c.errors;
    e.2 += c.total_ns;
    e.3 = e.3.max(c.max_ns);
    e.4 += c.timed;
}

fn add_sched(r: &mut SchedRow, s: &plumb_sys::proctrace::SchedStat) {
    r.minor_faults += s.minor_faults;
    r.major_faults += s.major_faults;
    r.voluntary_switches += s.voluntary;
    r.involuntary_switches += s.involuntary;
    r.run_delay_s += secs(s.run_delay_ns);
    r.run_delays += s.delays;
}

/// Build the report from the kernel's counts, the block trace (None when not traced) and what
/// the session knew.
pub fn build(snap: &Snapshot, block: Option<&BlockAgg>, cx: &Context) -> TraceReport {
    // Names read from /proc while the task lived, else the kernel's record of them.
    let name_of = |id: u32| cx.names.get(&id).or_else(|| snap.comms.get(&id)).cloned();
    // Processes: every thread group that made a syscall or was scheduled.
    let followed: BTreeSet<u32> = snap.followed.iter().copied().collect();
    let tgid_of = |tid: u32, tgid: u32| if tgid != 0 { tgid } else { tid };
    let mut procs: BTreeMap<u32, (ByNr, SchedRow)> = BTreeMap::new();
    let mut threads: BTreeMap<(u32, u32), (ByNr, SchedRow)> = BTreeMap::new();
    let mut all: ByNr = BTreeMap::new();
    for c in &snap.calls {
        let pid = tgid_of(c.tid, c.tgid);
        add_call(&mut procs.entry(pid).or_default().0, c);
        add_call(&mut all, c);
        if cx.threads {
            add_call(&mut threads.entry((pid, c.tid)).or_default().0, c);
        }
    }
    let mut sched_all = SchedRow::default();
    for s in &snap.sched {
        let pid = tgid_of(s.tid, s.tgid);
        // A thread seen only by the scheduler, never in a syscall, of a process not followed
        // (a task that shared a PID number): not ours.
        if s.tgid == 0 && !followed.contains(&s.tid) {
            continue;
        }
        add_sched(&mut procs.entry(pid).or_default().1, s);
        add_sched(&mut sched_all, s);
        if cx.threads {
            add_sched(&mut threads.entry((pid, s.tid)).or_default().1, s);
        }
    }
    let mut hist_all: BTreeMap<u32, LogHist> = BTreeMap::new();
    for ((_, nr), h) in &snap.hist {
        hist_all.entry(*nr).or_default().merge(h);
    }
    let hist_of = |pid: u32| -> BTreeMap<u32, LogHist> {
        snap.hist
            .range((pid, 0)..=(pid, u32::MAX))
            .map(|((_, nr), h)| (*nr, h.clone()))
            .collect()
    };
    let block_row = |pid: u32| -> Option<BlockRow> {
        let b = block?;
        let bios = b.procs.get(&pid)?.clone();
        let latency = b
            .proc_latency
            .range((pid, "")..=(pid, "~"))
            .map(|((_, k), h)| (k.to_string(), latency(h)))
            .collect();
        Some(BlockRow { bios, latency })
    };
    let mut processes: Vec<ProcTrace> = procs
        .iter()
        .map(|(&pid, (calls, sched))| {
            let syscalls = rows(calls, &hist_of(pid), &cx.table);
            let mut th: Vec<ThreadTrace> = threads
                .range((pid, 0)..=(pid, u32::MAX))
                .map(|(&(_, tid), (c, s))| ThreadTrace {
                    tid,
                    name: name_of(tid),
                    // Percentiles are kept per process only.
                    syscalls: rows(c, &BTreeMap::new(), &cx.table),
                    sched: s.clone(),
                })
                .collect();
            th.sort_by(|a, b| {
                let t = |x: &ThreadTrace| x.syscalls.iter().map(|r| r.total_s).sum::<f64>();
                t(b).total_cmp(&t(a)).then(a.tid.cmp(&b.tid))
            });
            ProcTrace {
                pid,
                name: name_of(pid),
                title: cx.titles.get(&pid).cloned(),
                exited: !cx.alive.contains(&pid),
                syscall_time_s: syscalls.iter().map(|r| r.total_s).sum(),
                calls: syscalls.iter().map(|r| r.calls).sum(),
                syscalls,
                sched: sched.clone(),
                block: block_row(pid),
                threads: th,
            }
        })
        .collect();
    processes.sort_by(|a, b| {
        b.syscall_time_s
            .total_cmp(&a.syscall_time_s)
            .then(a.pid.cmp(&b.pid))
    });
    let devices = block.map(|b| {
        b.devices
            .iter()
            .map(|(dev, d)| DeviceRow {
                device: cx.device_names.get(dev).cloned().unwrap_or(dev.clone()),
                reads: d.counts.reads,
                read_bytes: d.read_bytes,
                writes: d.counts.writes,
                write_bytes: d.write_bytes,
                flushes: d.counts.flushes,
                fua_writes: d.counts.fua_writes,
                preflush_writes: d.counts.preflush_writes,
                discards: d.discards,
                patterns: d.patterns.clone(),
                latency: d
                    .latency
                    .iter()
                    .map(|(k, h)| (k.to_string(), latency(h)))
                    .collect(),
            })
            .collect()
    });
    let lost = Losses {
        syscall_updates: snap.lost.calls,
        sched_updates: snap.lost.sched,
        processes: snap.lost.processes,
        block_events: cx.block_lost,
    };
    let mut report = TraceReport {
        target: cx.target.clone(),
        window_s: cx.window_s,
        ended: cx.ended.clone(),
        exit_code: cx.exit_code,
        syscalls: rows(&all, &hist_all, &cx.table),
        sched: sched_all,
        processes,
        devices,
        lost,
        syscalls_via: cx.syscalls_via.clone(),
        maps_bytes: cx.maps_bytes,
        notes: Vec::new(),
    };
    report.notes = notes(&report, cx);
    report
}

/// One followed process's counts since its trace began, for recordings (`plumb record
/// --trace`): each sample keeps them as they grow, and a rate is the difference between two.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ProcCounters {
    pub pid: u32,
    pub syscalls: u64,
    /// Time from entry to exit of those calls, summed.
    pub syscall_ns: u64,
    pub fsyncs: u64,
    pub fdatasyncs: u64,
    /// write, pwrite64, writev, pwritev, pwritev2.
    pub write_calls: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub involuntary_switches: u64,
    /// The block requests its bios made, when block requests are traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bios: Option<ProcBios>,
}

/// Every followed process's counts so far, by PID.
pub fn counters(
    snap: &Snapshot,
    block: Option<&BlockAgg>,
    table: &BTreeMap<u32, String>,
) -> Vec<ProcCounters> {
    let followed: BTreeSet<u32> = snap.followed.iter().copied().collect();
    let tgid_of = |tid: u32, tgid: u32| if tgid != 0 { tgid } else { tid };
    let mut by: BTreeMap<u32, ProcCounters> = BTreeMap::new();
    fn get(by: &mut BTreeMap<u32, ProcCounters>, pid: u32) -> &mut ProcCounters {
        by.entry(pid).or_insert_with(|| ProcCounters {
            pid,
            ..Default::default()
        })
    }
    for c in &snap.calls {
        let p = get(&mut by, tgid_of(c.tid, c.tgid));
        p.syscalls += c.calls;
        p.syscall_ns += c.total_ns;
        match table.get(&c.nr).map(String::as_str) {
            Some("fsync") => p.fsyncs += c.calls,
            Some("fdatasync") => p.fdatasyncs += c.calls,
            Some("write" | "pwrite64" | "writev" | "pwritev" | "pwritev2") => {
                p.write_calls += c.calls
            }
            _ => {}
        }
    }
    for s in &snap.sched {
        // As in `build`: a task seen only by the scheduler, not followed, is not ours.
        if s.tgid == 0 && !followed.contains(&s.tid) {
            continue;
        }
        let p = get(&mut by, tgid_of(s.tid, s.tgid));
        p.minor_faults += s.minor_faults;
        p.major_faults += s.major_faults;
        p.involuntary_switches += s.involuntary;
    }
    if let Some(b) = block {
        for (pid, bios) in &b.procs {
            if by.contains_key(pid) || followed.contains(pid) {
                get(&mut by, *pid).bios = Some(bios.clone());
            }
        }
        for p in by.values_mut() {
            p.bios.get_or_insert_with(ProcBios::default);
        }
    }
    by.into_values().collect()
}

/// Write syscalls of a row set (write, pwrite64, writev, pwritev, pwritev2): the durable
/// writes when the file is opened O_DSYNC (PostgreSQL's open_datasync).
pub fn write_calls(rows: &[SyscallRow]) -> u64 {
    rows.iter()
        .filter(|r| {
            matches!(
                r.name.as_str(),
                "write" | "pwrite64" | "pwritev" | "pwritev2" | "writev"
            )
        })
        .map(|r| r.calls)
        .sum()
}

/// Durable-write syscalls of a row set: fsync, fdatasync and sync_file_range calls.
pub fn sync_calls(rows: &[SyscallRow]) -> u64 {
    rows.iter()
        .filter(|r| matches!(r.name.as_str(), "fsync" | "fdatasync" | "sync_file_range"))
        .map(|r| r.calls)
        .sum()
}

/// The figures a delta run shows from its trace, as (group, object, metric) and value: the
/// syscalls that took most time (at most `top`), the block requests and the faults and
/// switches of every followed process together.
pub fn delta_values(r: &TraceReport, top: usize) -> Vec<((String, String, String), f64)> {
    let mut out = Vec::new();
    let key = |g: &str, o: &str, m: &str| (g.to_string(), o.to_string(), m.to_string());
    for row in r.syscalls.iter().take(top) {
        out.push((key("syscall", &row.name, "calls"), row.calls as f64));
        out.push((key("syscall", &row.name, "time_s"), row.total_s));
    }
    let s = &r.sched;
    for (m, v) in [
        ("minor_faults", s.minor_faults as f64),
        ("major_faults", s.major_faults as f64),
        ("voluntary_switches", s.voluntary_switches as f64),
        ("involuntary_switches", s.involuntary_switches as f64),
        ("run_delay_s", s.run_delay_s),
    ] {
        out.push((key("kernel", "", m), v));
    }
    if r.devices.is_some() {
        let mut b = ProcBios::default();
        for p in r.processes.iter().filter_map(|p| p.block.as_ref()) {
            let x = &p.bios;
            b.reads += x.reads;
            b.read_bytes += x.read_bytes;
            b.writes += x.writes;
            b.write_bytes += x.write_bytes;
            b.flushes += x.flushes;
            b.fua_writes += x.fua_writes;
        }
        for (m, v) in [
            ("read_bios", b.reads),
            ("read_bytes", b.read_bytes),
            ("write_bios", b.writes),
            ("write_bytes", b.write_bytes),
            ("flush_bios", b.flushes),
            ("fua_writes", b.fua_writes),
        ] {
            out.push((key("bios", "", m), v as f64));
        }
    }
    out
}

fn notes(r: &TraceReport, cx: &Context) -> Vec<Note> {
    let mut out = Vec::new();
    let l = &r.lost;
    if l.syscall_updates + l.sched_updates + l.processes > 0 {
        out.push(
            Note::new(Level::Warn, "trace-lost-updates")
                .count("lost_syscall_updates", l.syscall_updates as f64)
                .count("lost_sched_updates", l.sched_updates as f64)
                .count("lost_processes", l.processes as f64),
        );
    }
    if l.block_events > 0 {
        out.push(
            Note::new(Level::Warn, "trace-lost-block-events")
                .count("lost_block_events", l.block_events as f64),
        );
    }
    if let Some(why) = &cx.block_unavailable {
        out.push(Note::new(Level::Info, "trace-no-block").text("why", why.clone()));
    }
    for p in &cx.removed_stale {
        out.push(Note::new(Level::Info, "trace-removed-stale").text("what", p.clone()));
    }
    if r.processes.iter().all(|p| p.calls == 0) {
        out.push(Note::new(Level::Info, "trace-no-syscalls"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::proctrace::{CallStat, SchedStat};

    fn snap() -> Snapshot {
        let mut s = Snapshot::default();
        let call = |tid, tgid, nr, calls, errors, total_ns, max_ns| CallStat {
            tid,
            tgid,
            nr,
            calls,
            errors,
            total_ns,
            max_ns,
            timed: calls,
        };
        // The postmaster (100) and a backend (101) with two threads (101, 102).
        s.calls = vec![
            call(100, 100, 7, 50, 0, 5_000_000, 200_000),
            call(101, 101, 75, 200, 0, 400_000_000, 9_000_000),
            call(101, 101, 18, 200, 0, 20_000_000, 300_000),
            call(102, 101, 18, 100, 0, 10_000_000, 200_000),
            call(101, 101, 3, 10, 10, 10_000, 2_000),
        ];
        let mut h = LogHist::default();
        for i in 0..200u64 {
            h.add(1_000_000 + i * 10_000);
        }
        s.hist.insert((101, 75), h);
        s.sched = vec![SchedStat {
            tid: 101,
            tgid: 101,
            voluntary: 210,
            involuntary: 3,
            run_delay_ns: 2_000_000,
            delays: 213,
            minor_faults: 40,
            major_faults: 1,
        }];
        s.followed = vec![100, 101];
        s
    }

    fn cx() -> Context {
        let mut table = BTreeMap::new();
        for (n, s) in [
            (7, "poll"),
            (75, "fdatasync"),
            (18, "pwrite64"),
            (3, "close"),
        ] {
            table.insert(n, s.to_string());
        }
        Context {
            target: "--pid 100".into(),
            window_s: 2.0,
            ended: "duration".into(),
            table,
            alive: [100].into(),
            threads: true,
            ..Default::default()
        }
    }

    #[test]
    fn rows_are_sorted_by_time_with_shares_and_percentiles_where_counts_allow() {
        let r = build(&snap(), None, &cx());
        assert_eq!(r.syscalls[0].name, "fdatasync");
        assert_eq!(r.syscalls[0].calls, 200);
        let share_sum: f64 = r.syscalls.iter().map(|x| x.share).sum();
        assert!((share_sum - 1.0).abs() < 1e-9);
        assert_eq!(r.syscalls[1].name, "pwrite64");
        assert_eq!(r.syscalls[1].calls, 300, "both threads of the backend");
        let f = &r.syscalls[0];
        assert!((f.mean_s - 0.002).abs() < 1e-9);
        let p50 = f.p50_s.unwrap();
        assert!((p50 / 0.002 - 1.0).abs() < 0.13, "{p50}");
        assert!(f.p99_s.is_some());
        // Ten calls: a median but no 99th percentile; and no histogram here at all: none.
        let close = r.syscalls.iter().find(|x| x.name == "close").unwrap();
        assert_eq!((close.errors, close.p99_s), (10, None));
        // Processes, most time first; the backend has exited, the postmaster has not.
        assert_eq!(r.processes[0].pid, 101);
        assert!(r.processes[0].exited);
        assert!(!r.processes[1].exited);
        assert_eq!(r.processes[0].threads.len(), 2);
        assert_eq!(r.processes[0].sched.voluntary_switches, 210);
        assert_eq!(sync_calls(&r.processes[0].syscalls), 200);
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn a_delta_run_gets_the_top_syscalls_and_the_kernel_figures() {
        let r = build(&snap(), Some(&BlockAgg::default()), &cx());
        let v = delta_values(&r, 2);
        let get = |g: &str, o: &str, m: &str| {
            v.iter()
                .find(|(k, _)| k.0 == g && k.1 == o && k.2 == m)
                .map(|x| x.1)
        };
        assert_eq!(get("syscall", "fdatasync", "calls"), Some(200.0));
        assert_eq!(get("syscall", "pwrite64", "calls"), Some(300.0));
        assert_eq!(get("syscall", "poll", "calls"), None, "only the top 2");
        assert_eq!(get("kernel", "", "voluntary_switches"), Some(210.0));
        assert_eq!(get("bios", "", "flush_bios"), Some(0.0));
    }

    #[test]
    fn counters_per_process_sum_threads_and_pick_the_sync_and_write_calls() {
        let mut agg = BlockAgg::default();
        agg.procs.insert(
            101,
            ProcBios {
                writes: 200,
                flushes: 200,
                ..Default::default()
            },
        );
        // A process the trace does not follow: its bios are not counted.
        agg.procs.insert(
            555,
            ProcBios {
                writes: 9,
                ..Default::default()
            },
        );
        let c = counters(&snap(), Some(&agg), &cx().table);
        assert_eq!(c.iter().map(|p| p.pid).collect::<Vec<_>>(), [100, 101]);
        let b = &c[1];
        assert_eq!((b.syscalls, b.fdatasyncs, b.fsyncs), (510, 200, 0));
        assert_eq!(b.write_calls, 300, "both threads' pwrite64");
        assert_eq!(b.syscall_ns, 430_010_000);
        assert_eq!((b.major_faults, b.involuntary_switches), (1, 3));
        assert_eq!(b.bios.as_ref().map(|x| x.flushes), Some(200));
        // Traced without bios: zero, not absent, for a followed process.
        assert_eq!(c[0].bios.as_ref().map(|x| x.writes), Some(0));
        assert!(counters(&snap(), None, &cx().table)[1].bios.is_none());
    }

    #[test]
    fn losses_are_said() {
        let mut s = snap();
        s.lost.calls = 5;
        let mut c = cx();
        c.block_lost = 7;
        c.removed_stale = vec!["/sys/kernel/tracing/instances/plumb-4242".into()];
        let r = build(&s, Some(&BlockAgg::default()), &c);
        let codes: Vec<&str> = r.notes.iter().map(|n| n.code).collect();
        assert!(codes.contains(&"trace-lost-updates"), "{codes:?}");
        assert!(codes.contains(&"trace-lost-block-events"), "{codes:?}");
        assert!(codes.contains(&"trace-removed-stale"), "{codes:?}");
        assert_eq!(r.devices.as_deref(), Some(&[][..]));
    }
}
