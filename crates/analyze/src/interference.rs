//! Was a measured window disturbed? Two readings of the host's activity
//! (`plumb_sys::activity`) around the window are compared with what plumb's own processes did
//! in it: the device under the test did more I/O than plumb, and another process did that I/O;
//! other processes kept the CPUs busy; the hypervisor took CPU time (steal). Every result
//! measured on a window carries the verdict, with the evidence.

use crate::{Level, Note, WithFacts};
use plumb_sys::activity::{Activity, ProcActivity};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// I/O below this (in a window) is never a neighbour's disturbance.
pub const IO_FLOOR_BYTES: u64 = 1 << 20;
/// Reads the device did beyond plumb's, as a share of plumb's, that count as foreign.
pub const READ_TOLERANCE: f64 = 0.10;
/// Writes beyond plumb's: larger, because the file system adds its journal and metadata.
pub const WRITE_TOLERANCE: f64 = 0.25;
/// Neighbours' bytes on the device at or above this share of the device's bytes in the window
/// disturb it; below, they are noted beside the figure (a neighbour's 33 MiB read beside
/// plumb's 8 GiB written changes nothing plumb measured).
pub const DISTURBED_SHARE: f64 = 0.10;
/// Other processes using this many CPUs on a host with less than IDLE_BELOW_PCT idle.
pub const CPU_NEIGHBOUR_CPUS: f64 = 0.5;
pub const IDLE_BELOW_PCT: f64 = 25.0;
/// Steal at or above this share of CPU time is said beside the figure…
pub const STEAL_NOTE_PCT: f64 = 5.0;
/// …and at or above this disturbs the window. Virtual disks are served by the hypervisor, so
/// a VM doing fast I/O shows some steal of its own making (10% under an 8-deep random read on
/// a 2-vCPU cloud VM, 0% idle or CPU-bound): below this, steal is the platform, not a neighbour.
pub const STEAL_PCT: f64 = 25.0;
/// plumb's own workers stalled: at least this many tenths of the measured window without a
/// completed I/O (see [`own_stall`]).
pub const STALL_TENTHS: usize = 2;
/// The busy tenths' I/Os, on average, from which an empty tenth is a stall and not chance.
pub const STALL_BUSY_TENTH_IOS: f64 = 10.0;

/// plumb's side of a window: these processes and every descendant of them (pgbench, the
/// server's backends) are plumb's own.
#[derive(Debug, Clone, Default)]
pub struct Own {
    pub roots: Vec<u32>,
    /// Processes the DBA accepted as neighbours (`--accept-neighbour`) and their descendants:
    /// their work is noted in the window, never held against its figures.
    pub accepted: BTreeSet<u32>,
}

/// A neighbour the DBA accepts (`--accept-neighbour NAME|PID|cgroup`): a backup agent, a
/// monitoring agent, another database that is part of the host's normal life.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Accept {
    /// A process name as /proc shows it (`comm`, at most 15 characters: a longer name is
    /// matched on its first 15).
    Name(String),
    Pid(u32),
    /// A cgroup (v2) path, `/system.slice/backup.service`: every process in it or below it.
    Cgroup(String),
}

impl Accept {
    /// A PID (digits), a cgroup path (starting with `/`), or a process name.
    pub fn parse(s: &str) -> Result<Accept, String> {
        let s = s.trim();
        if s.is_empty() {
            return Err("an empty name: give a process name, a PID or a cgroup path".into());
        }
        if s.chars().all(|c| c.is_ascii_digit()) {
            return match s.parse::<u32>() {
                Ok(p) if p > 0 => Ok(Accept::Pid(p)),
                _ => Err(format!("{s}: not a PID")),
            };
        }
        if s.starts_with('/') {
            let path = s.trim_end_matches('/');
            return Ok(Accept::Cgroup(if path.is_empty() {
                "/".into()
            } else {
                path.into()
            }));
        }
        if s.contains('/') || s.chars().any(char::is_control) {
            return Err(format!(
                "{s}: a process name has no '/' (a cgroup path starts with one)"
            ));
        }
        Ok(Accept::Name(s.chars().take(15).collect()))
    }

    /// As the DBA wrote it.
    pub fn label(&self) -> String {
        match self {
            Accept::Name(n) => n.clone(),
            Accept::Pid(p) => format!("PID {p}"),
            Accept::Cgroup(c) => format!("cgroup {c}"),
        }
    }

    fn matches(&self, p: &ProcActivity, cgroup: &dyn Fn(u32) -> Option<String>) -> bool {
        match self {
            Accept::Name(n) => p.comm == *n,
            Accept::Pid(pid) => p.pid == *pid,
            Accept::Cgroup(c) => cgroup(p.pid).is_some_and(|g| {
                c == "/"
                    || g == *c
                    || g.strip_prefix(c.as_str())
                        .is_some_and(|r| r.starts_with('/'))
            }),
        }
    }
}

/// The processes `accept` names in either reading, and their descendants. `cgroup` gives a
/// process's cgroup v2 path (asked only when a cgroup is accepted).
pub fn accepted_set(
    before: &Activity,
    after: &Activity,
    accept: &[Accept],
    cgroup: &dyn Fn(u32) -> Option<String>,
) -> BTreeSet<u32> {
    if accept.is_empty() {
        return BTreeSet::new();
    }
    let roots: Vec<u32> = before
        .procs
        .iter()
        .chain(&after.procs)
        .filter(|p| !p.kernel_thread && accept.iter().any(|a| a.matches(p, cgroup)))
        .map(|p| p.pid)
        .collect();
    own_set(
        before,
        after,
        &Own {
            roots,
            accepted: BTreeSet::new(),
        },
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Clean,
    Disturbed,
}

/// Another process that did I/O or used CPU in the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Neighbour {
    pub pid: u32,
    pub comm: String,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cpu_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interference {
    pub verdict: Verdict,
    pub window_s: f64,
    /// The devices compared (the one under the test's files).
    pub devices: Vec<String>,
    pub device_read_bytes: u64,
    pub device_write_bytes: u64,
    pub device_flushes: u64,
    /// plumb's processes (and their descendants), from their own I/O accounting.
    pub own_read_bytes: u64,
    pub own_write_bytes: u64,
    pub own_cpu_s: f64,
    /// Every other (non-kernel) process's CPU, summed.
    pub others_cpu_s: f64,
    /// The busiest other processes (at most five).
    pub neighbours: Vec<Neighbour>,
    pub steal_pct: Option<f64>,
    pub idle_pct: Option<f64>,
    /// Accepted neighbours (`--accept-neighbour`) that did I/O or used CPU in the window: noted,
    /// their bytes not counted as a disturbance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted: Vec<Neighbour>,
    /// The neighbours' bytes on the device as a share of the device's bytes (0 to 1; None when
    /// the device moved nothing): the graded measure of an I/O neighbour.
    pub io_share: Option<f64>,
    /// Other processes' CPU time as a share of all the CPU time in the window (0 to 1).
    pub cpu_share: Option<f64>,
    /// Why the window is disturbed (warn), and what could not be seen (info).
    pub notes: Vec<Note>,
}

/// A claim drawn from a disturbed window stands when its effect (a change, in percent) is at
/// least this many times the neighbour's share of the window (in percent): a 76% drop is not
/// hidden by a 12% share of the device's bytes; a 90% one from a window where a neighbour took
/// 83% of the bytes is withheld.
pub const EFFECT_OVER_SHARE: f64 = 4.0;

impl Interference {
    pub fn is_clean(&self) -> bool {
        self.verdict == Verdict::Clean
    }

    /// The largest share another party took of the window, in percent: of the device's bytes,
    /// of the CPU time, or the hypervisor's steal. None when the disturbance has no share to
    /// weigh (I/O no process accounts for).
    pub fn disturbing_share_pct(&self) -> Option<f64> {
        if self.notes.iter().any(|n| n.code == "unexplained-io") {
            return None;
        }
        [
            self.io_share.map(|s| s * 100.0),
            self.cpu_share.map(|s| s * 100.0),
            self.steal_pct,
            self.own_share().map(|s| s * 100.0),
        ]
        .into_iter()
        .flatten()
        .reduce(f64::max)
    }

    /// Whether a claimed change of `effect_pct` (its bound nearest zero, as a magnitude) stands
    /// beside this window's disturbance: clean windows always; disturbed ones by
    /// [`EFFECT_OVER_SHARE`].
    pub fn effect_stands(&self, effect_pct: f64) -> bool {
        self.is_clean()
            || self
                .disturbing_share_pct()
                .is_some_and(|s| effect_pct.abs() >= EFFECT_OVER_SHARE * s)
    }

    /// The share of the window (0 to 1) in which plumb itself was held off: its cgroup's CPU
    /// quota throttled it, or its workers stalled (warnings only). None when neither.
    pub fn own_share(&self) -> Option<f64> {
        self.notes
            .iter()
            .filter(|n| n.level == Level::Warn)
            .filter_map(|n| match n.code {
                "own-stall" => Some(n.facts.num("idle_pct")),
                "own-throttled" => Some(n.facts.num("share_pct")),
                _ => None,
            })
            .filter(|p| p.is_finite())
            .map(|p| p / 100.0)
            .reduce(f64::max)
    }

    /// Add what the run itself shows (a stall of plumb's own workers): a warning makes the
    /// window disturbed.
    pub fn add(&mut self, note: Note) {
        if note.level == Level::Warn {
            self.verdict = Verdict::Disturbed;
        }
        self.notes.push(note);
    }

    /// The notes that make the window disturbed: its evidence (`plumb_report::words::
    /// interference` puts them in a line).
    pub fn warnings(&self) -> Vec<Note> {
        self.notes
            .iter()
            .filter(|n| n.level == Level::Warn)
            .cloned()
            .collect()
    }
}

/// Tenths of a run's measured window in which plumb's own workers completed no I/O although
/// the device answered every I/O in less than half a tenth and the busy tenths held
/// [`STALL_BUSY_TENTH_IOS`] or more each: nothing was being asked of the device then (the
/// workers were descheduled, throttled by a CPU quota, frozen or stalled in reclaim), so the
/// run's rate counts time it did not measure. A warning from [`STALL_TENTHS`] such tenths.
/// `tenth_ios` are the window's tenths of `duration_s`; only those that end within
/// `measured_s` (a run stopped early) count.
pub(crate) fn own_stall(
    tenth_ios: &[u64; 10],
    max_lat_s: f64,
    duration_s: f64,
    measured_s: f64,
) -> Option<Note> {
    let tenth_s = duration_s / 10.0;
    if tenth_s.is_nan() || tenth_s <= 0.0 || max_lat_s >= tenth_s / 2.0 {
        return None;
    }
    let whole = tenth_ios
        .iter()
        .enumerate()
        .filter(|(i, _)| (*i as f64 + 1.0) * tenth_s <= measured_s * 1.01)
        .map(|(_, n)| *n);
    let (mut idle, mut busy, mut ios) = (0usize, 0usize, 0u64);
    for n in whole {
        if n == 0 {
            idle += 1;
        } else {
            busy += 1;
            ios += n;
        }
    }
    if idle < STALL_TENTHS || busy == 0 || (ios as f64 / busy as f64) < STALL_BUSY_TENTH_IOS {
        return None;
    }
    Some(
        Note::new(Level::Warn, "own-stall")
            .count("idle_tenths", idle as f64)
            .secs("idle_s", idle as f64 * tenth_s)
            .pct("idle_pct", idle as f64 * 10.0)
            .secs("max_latency_s", max_lat_s)
            .ratio("busy_tenth_ios", ios as f64 / busy as f64),
    )
}

/// Throttled time from which a CPU quota disturbs a window, as a share of it: a throttled
/// thread waits out the rest of the quota's period (tens of milliseconds), and any I/O it was
/// timing counts that wait as latency.
pub const THROTTLED_SHARE: f64 = 0.001;

/// plumb's cgroup (or a parent's) CPU quota held it off the CPUs for `throttled_s` in
/// `periods` periods of a window of `window_s`: a warning from [`THROTTLED_SHARE`] of the window,
/// said below it; None when it was never throttled.
pub fn own_throttled(periods: u64, throttled_s: f64, window_s: f64) -> Option<Note> {
    if periods == 0 && throttled_s <= 0.0 {
        return None;
    }
    let share = if window_s > 0.0 {
        (throttled_s / window_s).min(1.0)
    } else {
        1.0
    };
    let level = if share >= THROTTLED_SHARE {
        Level::Warn
    } else {
        Level::Info
    };
    Some(
        Note::new(level, "own-throttled")
            .count("periods", periods as f64)
            .secs("throttled_s", throttled_s)
            .pct("share_pct", share * 100.0),
    )
}

/// [`own_stall`] of an I/O run: all its workers' reads and writes together.
pub fn run_stall(r: &plumb_io::run::RunResult) -> Option<Note> {
    let mut all = plumb_io::run::DirStats::empty(false);
    for w in &r.workers {
        all.merge(&w.read);
        all.merge(&w.write);
    }
    if all.ios == 0 {
        return None;
    }
    own_stall(
        &all.tenth_ios,
        all.lat.max() as f64 / 1e9,
        r.job.duration.as_secs_f64(),
        r.measured_s,
    )
}

type Key = (u32, u64);

fn key(p: &ProcActivity) -> Key {
    (p.pid, p.start_time_ticks)
}

/// The processes that are plumb's: the roots and their descendants in either reading.
fn own_set(before: &Activity, after: &Activity, own: &Own) -> BTreeSet<u32> {
    let mut parent: BTreeMap<u32, u32> = BTreeMap::new();
    for p in before.procs.iter().chain(&after.procs) {
        parent.insert(p.pid, p.ppid);
    }
    let roots: BTreeSet<u32> = own.roots.iter().copied().collect();
    parent
        .keys()
        .copied()
        .filter(|&pid| {
            let mut p = pid;
            // Bounded: a PID loop in a torn read must not hang.
            for _ in 0..64 {
                if roots.contains(&p) {
                    return true;
                }
                match parent.get(&p) {
                    Some(&pp) if pp != p && pp != 0 => p = pp,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// The busiest first: by bytes, then by CPU.
fn busiest_first(v: &mut [Neighbour]) {
    v.sort_by(|a, b| {
        (b.read_bytes + b.write_bytes)
            .cmp(&(a.read_bytes + a.write_bytes))
            .then(b.cpu_s.total_cmp(&a.cpu_s))
    });
}

/// A neighbour named in a note: PID, name, bytes.
fn neighbour_note(n: &Neighbour) -> Note {
    Note::new(Level::Info, "neighbour")
        .count("pid", n.pid as f64)
        .text("comm", n.comm.clone())
        .bytes("read_bytes", n.read_bytes as f64)
        .bytes("write_bytes", n.write_bytes as f64)
}

/// The bytes read and written and the flushes of `devices` between two readings.
fn device_bytes(before: &Activity, after: &Activity, devices: &[String]) -> (u64, u64, u64) {
    let dev = |a: &Activity| {
        a.disks
            .iter()
            .filter(|d| devices.contains(&d.name))
            .fold((0u64, 0u64, 0u64), |acc, d| {
                (
                    acc.0 + d.read_bytes,
                    acc.1 + d.write_bytes,
                    acc.2 + d.flushes.unwrap_or(0),
                )
            })
    };
    let (r0, w0, f0) = dev(before);
    let (r1, w1, f1) = dev(after);
    let (dr, dw, df) = (
        r1.saturating_sub(r0),
        w1.saturating_sub(w0),
        f1.saturating_sub(f0),
    );
    (dr, dw, df)
}

/// What the processes did between two readings: plumb's own, the accepted neighbours' and
/// the others'.
#[derive(Default)]
struct Procs {
    own_r: u64,
    own_w: u64,
    own_cpu: u64,
    acc_r: u64,
    acc_w: u64,
    accepted: Vec<Neighbour>,
    others_cpu: u64,
    /// Processes whose I/O counters plumb may not read.
    unreadable: usize,
    neighbours: Vec<Neighbour>,
}

/// Deltas of the same process (PID and start time); one that started in the window counts
/// from zero.
fn processes(before: &Activity, after: &Activity, own: &Own, hz: f64, window_s: f64) -> Procs {
    let mine = own_set(before, after, own);
    let prev: BTreeMap<Key, &ProcActivity> = before.procs.iter().map(|p| (key(p), p)).collect();
    let mut t = Procs::default();
    for p in &after.procs {
        let b = prev.get(&key(p));
        let d = |now: Option<u64>, was: Option<Option<u64>>| match (now, was) {
            (Some(n), Some(Some(w))) => Some(n.saturating_sub(w)),
            (Some(n), None) => Some(n),
            _ => None,
        };
        let rd = d(p.read_bytes, b.map(|b| b.read_bytes));
        let wr = d(p.write_bytes, b.map(|b| b.write_bytes));
        let cpu = p.cpu_ticks.saturating_sub(b.map_or(0, |b| b.cpu_ticks));
        if mine.contains(&p.pid) {
            t.own_r += rd.unwrap_or(0);
            t.own_w += wr.unwrap_or(0);
            t.own_cpu += cpu;
            continue;
        }
        if p.kernel_thread {
            continue;
        }
        let is_accepted = own.accepted.contains(&p.pid);
        if !is_accepted {
            t.others_cpu += cpu;
            if p.read_bytes.is_none() {
                t.unreadable += 1;
            }
        }
        let (rd, wr) = (rd.unwrap_or(0), wr.unwrap_or(0));
        if is_accepted {
            t.acc_r += rd;
            t.acc_w += wr;
        }
        let cpu_s = cpu as f64 / hz;
        if rd + wr >= IO_FLOOR_BYTES || cpu_s >= 0.1 * window_s {
            let n = Neighbour {
                pid: p.pid,
                comm: p.comm.clone(),
                read_bytes: rd,
                write_bytes: wr,
                cpu_s,
            };
            if is_accepted {
                t.accepted.push(n);
            } else {
                t.neighbours.push(n);
            }
        }
    }
    t
}

/// The host's CPU between two readings: all ticks, the steal and the idle (with I/O wait)
/// percentages.
fn host_cpu(before: &Activity, after: &Activity) -> (Option<f64>, Option<f64>, Option<f64>) {
    let mut all_ticks = None;
    let (steal_pct, idle_pct) = match (&before.cpu, &after.cpu) {
        (Some(a), Some(b)) => {
            let total = b.total_ticks().saturating_sub(a.total_ticks()) as f64;
            let part = |f: fn(&plumb_sys::cpu::CpuTicks) -> Option<u64>| {
                f(b).unwrap_or(0).saturating_sub(f(a).unwrap_or(0)) as f64
            };
            if total > 0.0 {
                all_ticks = Some(total);
                (
                    Some(part(|c| c.steal_ticks) / total * 100.0),
                    Some((part(|c| c.idle_ticks) + part(|c| c.iowait_ticks)) / total * 100.0),
                )
            } else {
                (None, None)
            }
        }
        _ => (None, None),
    };
    (all_ticks, steal_pct, idle_pct)
}

/// Others kept the CPUs busy: how many CPUs' worth, and the busiest three.
fn cpu_note(
    neighbours: &[Neighbour],
    others_cpus: f64,
    idle_pct: Option<f64>,
    window_s: f64,
) -> Note {
    let mut by_cpu: Vec<&Neighbour> = neighbours.iter().collect();
    by_cpu.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s));
    let who: Vec<Note> = by_cpu
        .iter()
        .take(3)
        .map(|n| {
            Note::new(Level::Info, "neighbour-cpu-use")
                .count("pid", n.pid as f64)
                .text("comm", n.comm.clone())
                .ratio("cpus", n.cpu_s / window_s)
        })
        .collect();
    Note::new(Level::Warn, "neighbour-cpu")
        .ratio("others_cpus", others_cpus)
        .pct("idle_pct", idle_pct.unwrap_or(0.0))
        .notes("neighbours", who)
}

/// Judge the window between two readings.
pub fn judge(before: &Activity, after: &Activity, own: &Own, devices: &[String]) -> Interference {
    let window_s = after
        .at
        .saturating_duration_since(before.at)
        .as_secs_f64()
        .max(1e-3);
    let hz = after.ticks_per_s.max(1) as f64;
    let (dr, dw, df) = device_bytes(before, after, devices);
    let Procs {
        own_r,
        own_w,
        own_cpu,
        acc_r,
        acc_w,
        mut accepted,
        others_cpu,
        unreadable,
        mut neighbours,
    } = processes(before, after, own, hz, window_s);
    busiest_first(&mut neighbours);
    let others_r: u64 = neighbours.iter().map(|n| n.read_bytes).sum();
    let others_w: u64 = neighbours.iter().map(|n| n.write_bytes).sum();
    let (all_ticks, steal_pct, idle_pct) = host_cpu(before, after);

    let mut notes = Vec::new();
    let tol = |own: u64, share: f64, floor: u64| ((own as f64 * share) as u64).max(floor);
    let (tol_r, tol_w) = (
        tol(own_r, READ_TOLERANCE, IO_FLOOR_BYTES),
        tol(own_w, WRITE_TOLERANCE, 4 * IO_FLOOR_BYTES),
    );
    // The device's bytes beyond plumb's and the accepted neighbours'.
    let (ex_r, ex_w) = (
        dr.saturating_sub(own_r + acc_r),
        dw.saturating_sub(own_w + acc_w),
    );
    let foreign_reads = ex_r > tol_r && others_r > tol_r;
    let foreign_writes = ex_w > tol_w && others_w > tol_w;
    // The device's bytes beyond plumb's that visible neighbours account for.
    let foreign = ex_r.min(others_r) + ex_w.min(others_w);
    let io_share = (dr + dw > 0).then(|| (foreign as f64 / (dr + dw) as f64).min(1.0));
    if foreign_reads || foreign_writes {
        let share = io_share.unwrap_or(0.0);
        let who: Vec<Note> = neighbours
            .iter()
            .filter(|n| n.read_bytes + n.write_bytes >= IO_FLOOR_BYTES)
            .take(3)
            .map(neighbour_note)
            .collect();
        let level = if share >= DISTURBED_SHARE {
            Level::Warn
        } else {
            Level::Info
        };
        let mut n = Note::new(level, "neighbour-io")
            .pct("share_pct", share * 100.0)
            .pct("disturbing_share_pct", DISTURBED_SHARE * 100.0)
            .list("devices", devices.to_vec())
            .bytes("device_read_bytes", dr as f64)
            .bytes("device_write_bytes", dw as f64)
            .bytes("own_read_bytes", own_r as f64)
            .bytes("own_write_bytes", own_w as f64)
            .notes("neighbours", who);
        if let Some(top) = neighbours.first() {
            n = n.count("neighbour_pid", top.pid as f64);
        }
        notes.push(n);
    } else if ex_r > tol(own_r, 0.25, 8 * IO_FLOOR_BYTES) && !devices.is_empty() {
        notes.push(
            Note::new(Level::Warn, "unexplained-io")
                .list("devices", devices.to_vec())
                .bytes("device_read_bytes", dr as f64)
                .bytes("own_read_bytes", own_r as f64),
        );
    }
    let others_cpus = others_cpu as f64 / hz / window_s;
    if others_cpus >= CPU_NEIGHBOUR_CPUS && idle_pct.is_some_and(|i| i < IDLE_BELOW_PCT) {
        notes.push(cpu_note(&neighbours, others_cpus, idle_pct, window_s));
    }
    if let Some(s) = steal_pct.filter(|s| *s >= STEAL_NOTE_PCT) {
        let disturbing = s >= STEAL_PCT;
        notes.push(
            Note::new(if disturbing { Level::Warn } else { Level::Info }, "steal")
                .pct("steal_pct", s)
                .pct("disturbing_steal_pct", STEAL_PCT),
        );
    }
    if unreadable > 0 {
        notes.push(
            Note::new(Level::Info, "neighbour-io-unreadable").count("processes", unreadable as f64),
        );
    }
    if !accepted.is_empty() {
        busiest_first(&mut accepted);
        accepted.truncate(5);
        let who: Vec<Note> = accepted.iter().take(3).map(neighbour_note).collect();
        notes.push(
            Note::new(Level::Info, "neighbour-accepted")
                .bytes("read_bytes", acc_r as f64)
                .bytes("write_bytes", acc_w as f64)
                .notes("neighbours", who),
        );
    }
    let verdict = if notes.iter().any(|n| n.level == Level::Warn) {
        Verdict::Disturbed
    } else {
        Verdict::Clean
    };
    neighbours.truncate(5);
    Interference {
        verdict,
        window_s,
        devices: devices.to_vec(),
        device_read_bytes: dr,
        device_write_bytes: dw,
        device_flushes: df,
        own_read_bytes: own_r,
        own_write_bytes: own_w,
        own_cpu_s: own_cpu as f64 / hz,
        others_cpu_s: others_cpu as f64 / hz,
        neighbours,
        steal_pct,
        idle_pct,
        io_share,
        cpu_share: all_ticks.map(|t| (others_cpu as f64 / t).min(1.0)),
        accepted,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plumb_sys::block::DiskStats;
    use plumb_sys::cpu::CpuTicks;
    use std::time::{Duration, Instant};

    const MIB: u64 = 1 << 20;

    fn proc(pid: u32, ppid: u32, comm: &str, r: u64, w: u64, cpu: u64) -> ProcActivity {
        ProcActivity {
            pid,
            ppid,
            comm: comm.into(),
            kernel_thread: ppid == 2,
            read_bytes: Some(r),
            write_bytes: Some(w),
            cpu_ticks: cpu,
            start_time_ticks: 1000 + pid as u64,
        }
    }

    /// A reading at `at`: the disk's counters, the processes, and CPU ticks (idle, steal).
    fn reading(
        at: Instant,
        disk: (u64, u64),
        procs: Vec<ProcActivity>,
        cpu: (u64, u64, u64),
    ) -> Activity {
        Activity {
            at,
            procs,
            disks: vec![DiskStats {
                name: "loop0".into(),
                read_bytes: disk.0,
                write_bytes: disk.1,
                flushes: Some(0),
                ..Default::default()
            }],
            cpu: Some(CpuTicks {
                user_ticks: Some(cpu.0),
                idle_ticks: Some(cpu.1),
                steal_ticks: Some(cpu.2),
                ..Default::default()
            }),
            procs_running: Some(1),
            ticks_per_s: 100,
        }
    }

    fn window(
        before: Vec<ProcActivity>,
        after: Vec<ProcActivity>,
        disk: (u64, u64),
        cpu: (u64, u64, u64),
    ) -> Interference {
        let t = Instant::now();
        let a = reading(t, (0, 0), before, (0, 0, 0));
        let b = reading(t + Duration::from_secs(1), disk, after, cpu);
        judge(
            &a,
            &b,
            &Own {
                roots: vec![100],
                accepted: Default::default(),
            },
            &["loop0".to_string()],
        )
    }

    /// `--accept-neighbour`: by name, PID or cgroup, with descendants. An accepted backup
    /// agent's 500 MiB beside plumb's 100 is noted, not a disturbance; not accepted, it is.
    #[test]
    fn an_accepted_neighbour_is_noted_not_held_against_the_window() {
        assert_eq!(Accept::parse("4242"), Ok(Accept::Pid(4242)));
        assert_eq!(
            Accept::parse("/system.slice/backup.service/"),
            Ok(Accept::Cgroup("/system.slice/backup.service".into()))
        );
        assert_eq!(
            Accept::parse("a-very-long-backup-agent-name"),
            Ok(Accept::Name("a-very-long-bac".into()))
        );
        assert!(Accept::parse("").is_err() && Accept::parse("0").is_err());
        assert!(Accept::parse("bin/agent").is_err());
        let t = Instant::now();
        let before = vec![
            proc(100, 1, "plumb", 0, 0, 0),
            proc(300, 1, "backup-agent", 0, 0, 0),
        ];
        let after = vec![
            proc(100, 1, "plumb", 100 * MIB, 0, 50),
            proc(300, 1, "backup-agent", 0, 0, 5),
            // Its child did the writing: a descendant of an accepted process is accepted.
            proc(301, 300, "gzip", 0, 500 * MIB, 40),
        ];
        let a = reading(t, (0, 0), before, (0, 0, 0));
        let b = reading(
            t + Duration::from_secs(1),
            (100 * MIB, 500 * MIB),
            after,
            (90, 110, 0),
        );
        let devs = ["loop0".to_string()];
        let own = |accepted| Own {
            roots: vec![100],
            accepted,
        };
        let no_cgroup = |_: u32| None;
        let plain = judge(&a, &b, &own(Default::default()), &devs);
        assert_eq!(plain.verdict, Verdict::Disturbed);
        for accept in [
            Accept::Name("backup-agent".into()),
            Accept::Pid(300),
            Accept::Cgroup("/system.slice/backup.service".into()),
        ] {
            let cgroup = |pid: u32| {
                (pid == 300 || pid == 301).then(|| "/system.slice/backup.service".to_string())
            };
            let set = accepted_set(&a, &b, std::slice::from_ref(&accept), &cgroup);
            assert!(
                set.contains(&300) && set.contains(&301),
                "{accept:?}: {set:?}"
            );
            let w = judge(&a, &b, &own(set), &devs);
            assert_eq!(w.verdict, Verdict::Clean, "{accept:?}: {:?}", w.notes);
            assert!(w
                .accepted
                .iter()
                .any(|n| n.pid == 301 && n.write_bytes == 500 * MIB));
            assert!(w.neighbours.iter().all(|n| n.pid != 301));
            assert_eq!(
                crate::verdict::grade(Some(&w)),
                crate::verdict::Trust::Noted
            );
            assert!(w.notes.iter().any(|n| n.code == "neighbour-accepted"));
        }
        // A cgroup that is only a prefix of another's name is not it.
        let set = accepted_set(
            &a,
            &b,
            &[Accept::Cgroup("/system.slice/backup".into())],
            &|_| Some("/system.slice/backup.service".to_string()),
        );
        assert!(set.is_empty(), "{set:?}");
        assert!(accepted_set(&a, &b, &[Accept::Pid(9)], &no_cgroup).is_empty());
    }

    #[test]
    fn plumb_alone_is_clean_and_its_children_are_its_own() {
        // plumb (100) and its child pgbench (101) did all the device's I/O; the journal adds a
        // little to the writes.
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(101, 100, "pgbench", 0, 0, 0),
            ],
            vec![
                proc(100, 1, "plumb", 80 * MIB, 0, 50),
                proc(101, 100, "pgbench", 0, 40 * MIB, 30),
                proc(50, 2, "jbd2/loop0-8", 0, 0, 5),
            ],
            (80 * MIB, 45 * MIB),
            (80, 120, 0),
        );
        assert_eq!(w.verdict, Verdict::Clean, "{:?}", w.notes);
        assert_eq!((w.own_read_bytes, w.own_write_bytes), (80 * MIB, 40 * MIB));
        assert_eq!(w.own_cpu_s, 0.8);
        assert!(
            w.neighbours.is_empty(),
            "kernel threads are nobody's neighbour"
        );
    }

    #[test]
    fn a_neighbour_on_the_device_disturbs_the_window_and_is_named() {
        let w = window(
            vec![proc(100, 1, "plumb", 0, 0, 0), proc(1234, 1, "dd", 0, 0, 0)],
            vec![
                proc(100, 1, "plumb", 40 * MIB, 0, 20),
                proc(1234, 1, "dd", 0, 300 * MIB, 30),
            ],
            (41 * MIB, 300 * MIB),
            (50, 150, 0),
        );
        assert_eq!(w.verdict, Verdict::Disturbed);
        let n = &w.notes[0];
        assert_eq!(n.code, "neighbour-io");
        assert_eq!(n.facts.num("neighbour_pid"), 1234.0);
        let dd = &n.facts.notes("neighbours")[0].facts;
        assert_eq!((dd.num("pid"), dd.text("comm")), (1234.0, "dd"));
        assert_eq!(dd.num("write_bytes"), (300 * MIB) as f64);
    }

    #[test]
    fn a_small_neighbour_beside_a_large_test_is_noted_not_a_verdict() {
        // plumb wrote 8 GiB; a neighbour read 33 MiB: 0.4% of the device's bytes.
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(55, 1, "backup", 0, 0, 0),
            ],
            vec![
                proc(100, 1, "plumb", 0, 8192 * MIB, 20),
                proc(55, 1, "backup", 33 * MIB, 0, 1),
            ],
            (33 * MIB, 8192 * MIB),
            (50, 150, 0),
        );
        assert!(w.is_clean(), "{:?}", w.notes);
        let n = w.notes.iter().find(|n| n.code == "neighbour-io").unwrap();
        assert_eq!(n.level, Level::Info);
        assert!((n.facts.num("share_pct") - 33.0 / 8225.0 * 100.0).abs() < 1e-6);
        assert!((w.io_share.unwrap() - 33.0 / 8225.0).abs() < 1e-9);
        // The same neighbour beside a test of 100 MiB is a quarter of the device's bytes.
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(55, 1, "backup", 0, 0, 0),
            ],
            vec![
                proc(100, 1, "plumb", 0, 100 * MIB, 20),
                proc(55, 1, "backup", 33 * MIB, 0, 1),
            ],
            (33 * MIB, 100 * MIB),
            (50, 150, 0),
        );
        assert!(!w.is_clean());
        assert!((w.io_share.unwrap() - 33.0 / 133.0).abs() < 1e-9);
    }

    #[test]
    fn io_on_another_device_with_nothing_extra_on_ours_is_clean() {
        // A backup writes elsewhere: our device did only plumb's I/O.
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(77, 1, "backup", 0, 0, 0),
            ],
            vec![
                proc(100, 1, "plumb", 40 * MIB, 0, 20),
                proc(77, 1, "backup", 500 * MIB, 0, 10),
            ],
            (40 * MIB, 0),
            (50, 150, 0),
        );
        assert_eq!(w.verdict, Verdict::Clean, "{:?}", w.notes);
        assert_eq!(w.neighbours[0].pid, 77, "still listed as the busiest other");
    }

    #[test]
    fn a_busy_cpu_neighbour_and_steal_disturb() {
        // One core of two burnt by a neighbour, the host 10% idle.
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(9, 1, "stress", 0, 0, 0),
            ],
            vec![
                proc(100, 1, "plumb", 0, 0, 80),
                proc(9, 1, "stress", 0, 0, 100),
            ],
            (0, 0),
            (180, 20, 0),
        );
        assert_eq!(w.notes[0].code, "neighbour-cpu", "{:?}", w.notes);
        let stress = &w.notes[0].facts.notes("neighbours")[0].facts;
        assert_eq!((stress.num("pid"), stress.num("cpus")), (9.0, 1.0));
        // The same load on an idle host is not contention.
        let idle = window(
            vec![proc(9, 1, "stress", 0, 0, 0)],
            vec![proc(9, 1, "stress", 0, 0, 100)],
            (0, 0),
            (100, 700, 0),
        );
        assert!(idle.is_clean(), "{:?}", idle.notes);
        let stolen = window(vec![], vec![], (0, 0), (60, 80, 60));
        assert_eq!(stolen.notes[0].code, "steal");
        assert_eq!(stolen.steal_pct, Some(30.0));
        assert!(!stolen.is_clean());
        // A VM's own I/O shows some steal: said, not disturbing.
        let some = window(vec![], vec![], (0, 0), (80, 100, 20));
        assert_eq!(some.notes[0].code, "steal");
        assert!(some.is_clean());
    }

    #[test]
    fn a_reused_pid_is_another_process_and_unreadable_io_is_said() {
        let mut reborn = proc(300, 1, "psql", 5 * MIB, 0, 1);
        reborn.start_time_ticks += 500;
        let mut hidden = proc(301, 1, "other", 0, 0, 0);
        hidden.read_bytes = None;
        hidden.write_bytes = None;
        let w = window(
            vec![
                proc(100, 1, "plumb", 0, 0, 0),
                proc(300, 1, "psql", 4 * MIB, 0, 0),
            ],
            vec![proc(100, 1, "plumb", 0, 0, 0), reborn, hidden],
            (0, 0),
            (10, 190, 0),
        );
        // The new psql's 5 MiB count in full, not 5 - 4.
        assert_eq!(w.neighbours[0].read_bytes, 5 * MIB);
        assert!(w.notes.iter().any(|n| n.code == "neighbour-io-unreadable"));
        assert!(w.is_clean());
    }

    #[test]
    fn a_run_whose_own_workers_stopped_issuing_is_disturbed_and_a_slow_device_is_not() {
        // 0.3 s run, 113 µs writes: seven tenths empty (the CI run that found this).
        let stalled = [190, 0, 0, 0, 0, 0, 0, 0, 180, 190];
        let n = own_stall(&stalled, 335e-6, 0.3, 0.3).expect("a stall");
        assert_eq!((n.code, n.level), ("own-stall", Level::Warn));
        assert_eq!(n.facts.num("idle_tenths"), 7.0);
        assert!((n.facts.num("idle_s") - 0.21).abs() < 1e-9);
        let mut w = window(vec![], vec![], (0, 0), (10, 190, 0));
        assert!(w.is_clean());
        w.add(n);
        assert!(!w.is_clean());
        assert_eq!(w.disturbing_share_pct(), Some(70.0));
        assert_eq!(w.own_share(), Some(0.7));
        // One empty tenth is chance enough to let pass.
        let once = [190, 0, 190, 190, 190, 190, 190, 190, 180, 190];
        assert!(own_stall(&once, 335e-6, 0.3, 0.3).is_none());
        // A device that takes 40 ms an I/O empties tenths of 30 ms by itself.
        assert!(own_stall(&[1, 0, 0, 1, 0, 1, 0, 0, 1, 0], 0.04, 0.3, 0.3).is_none());
        // A paced run of a few I/Os a tenth leaves tenths empty by its schedule.
        assert!(own_stall(&[3, 0, 2, 0, 3, 0, 2, 0, 3, 0], 1e-4, 1.0, 1.0).is_none());
        // A run stopped after half its window: the tenths after the stop are not a stall.
        let half = [190, 190, 190, 190, 190, 0, 0, 0, 0, 0];
        assert!(own_stall(&half, 335e-6, 1.0, 0.5).is_none());
    }
}
