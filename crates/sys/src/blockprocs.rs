//! Block requests by the process that caused them, and their latency, from the block layer's
//! trace: `block_bio_queue` fires in the submitting task (its thread group recorded), so the
//! bios a process asked for are its own; `block_rq_issue` and `block_rq_complete` give every
//! request each device received and how long it took. A request is charged to the process
//! whose bio started it (same device and first sector); requests nobody followed started
//! (another process's, the journal's, the cache flushes the block layer makes for a device
//! without FUA) stay in the device's totals only.
//!
//! The trace is read as it is written (`trace_pipe`, without blocking), so a long window does
//! not overflow the buffer; what the kernel dropped anyway is counted.

use crate::proctrace::LogHist;
use crate::tracefs::{self, TraceLock};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What one process's threads submitted, as bios.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProcBios {
    pub reads: u64,
    pub read_bytes: u64,
    /// Bios carrying data to write.
    pub writes: u64,
    pub write_bytes: u64,
    /// Writes asking to be durable on arrival (FUA).
    pub fua_writes: u64,
    /// Bios asking for a cache FLUSH first (an empty flush, or a write with a preflush).
    pub flushes: u64,
    pub discards: u64,
    pub discard_bytes: u64,
    /// Bios by their rwbs flags as blktrace prints them: `WS`, `FWS`, `WFS`…
    pub patterns: BTreeMap<String, u64>,
}

/// What one device received, as requests.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct DeviceRequests {
    pub counts: tracefs::RqCounts,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub discards: u64,
    /// Requests by rwbs flags.
    pub patterns: BTreeMap<String, u64>,
    /// Issue-to-completion time by kind (`read`, `write`, `flush`, `discard`), nanoseconds.
    #[serde(skip)]
    pub latency: BTreeMap<&'static str, LogHist>,
}

/// The kind of a request or bio from its rwbs flags (an optional preflush `F`, then the op).
pub(crate) fn op_of(rwbs: &str) -> &'static str {
    let b = rwbs.as_bytes();
    let op = match b {
        [b'F', op, ..] if b"WRDFN".contains(op) => *op,
        [op, ..] => *op,
        [] => b'N',
    };
    match op {
        b'R' => "read",
        b'W' => "write",
        b'D' => "discard",
        b'F' => "flush",
        _ => "other",
    }
}

/// Everything read from the trace so far.
#[derive(Debug, Default)]
pub struct BlockAgg {
    /// By thread group (process): its bios.
    pub procs: BTreeMap<u32, ProcBios>,
    /// By process and kind: the time of requests its bios started.
    pub proc_latency: BTreeMap<(u32, &'static str), LogHist>,
    /// By device (`MAJ:MIN`).
    pub devices: BTreeMap<String, DeviceRequests>,
    /// Lines that could not be read (a format this parser does not know).
    pub unreadable: u64,
    /// A bio's process, until a request starting at its sector is issued.
    owner: HashMap<(String, u64), u32>,
    /// Issued requests awaiting completion: (issue time, kind, process).
    inflight: HashMap<(String, u64), (f64, &'static str, Option<u32>)>,
    /// Issued flushes awaiting completion, by device (they carry no sector).
    flushes: HashMap<String, VecDeque<f64>>,
}

/// Fields of a block event's body: device, rwbs, first sector and length in sectors.
/// `block_bio_queue: 7,0 WS 266240 + 8 [dd]`; `block_rq_issue: 7,0 WS 4096 () 266240 + 8 be,0,4
/// [dd]`; `block_rq_complete: 7,0 WS () 266240 + 8 be,0,4 [0]`.
fn fields(body: &str) -> Option<(String, &str, u64, u64)> {
    let f: Vec<&str> = body.split_whitespace().collect();
    let dev = f.first()?.replace(',', ":");
    let rwbs = *f.get(1)?;
    let plus = f.iter().position(|t| *t == "+")?;
    let sector = f.get(plus.checked_sub(1)?)?.parse().ok()?;
    let n = f.get(plus + 1)?.parse().ok()?;
    Some((dev, rwbs, sector, n))
}

/// `map[key] += 1`, allocating the key only the first time.
fn bump(map: &mut BTreeMap<String, u64>, key: &str) {
    match map.get_mut(key) {
        Some(n) => *n += 1,
        None => {
            map.insert(key.to_string(), 1);
        }
    }
}

/// The three events read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    BioQueue,
    RqIssue,
    RqComplete,
}

impl Kind {
    const ALL: [(Kind, &'static str); 3] = [
        (Kind::BioQueue, "block_bio_queue"),
        (Kind::RqIssue, "block_rq_issue"),
        (Kind::RqComplete, "block_rq_complete"),
    ];
    fn of(event: &str) -> Option<Kind> {
        Kind::ALL.iter().find(|(_, n)| *n == event).map(|(k, _)| *k)
    }
}

/// One block event, from a line of text or a binary record.
pub(crate) struct Event<'a> {
    pub kind: Kind,
    /// Seconds, on the trace clock.
    pub ts: f64,
    /// The submitter's process (bios only).
    pub tgid: Option<u32>,
    /// `MAJ:MIN`.
    pub dev: String,
    pub rwbs: &'a str,
    pub sector: u64,
    /// Sectors.
    pub n: u64,
}

impl BlockAgg {
    /// Read trace lines (whole lines only).
    pub fn feed(&mut self, text: &str) {
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let Some(l) = tracefs::parse_line(line) else {
                self.unreadable += 1;
                continue;
            };
            let Some(kind) = Kind::of(l.event) else {
                continue;
            };
            let Some((dev, rwbs, sector, n)) = fields(l.body) else {
                self.unreadable += 1;
                continue;
            };
            self.add(Event {
                kind,
                ts: l.ts,
                tgid: l.tgid,
                dev,
                rwbs,
                sector,
                n,
            });
        }
    }

    /// Count one event.
    pub(crate) fn add(&mut self, e: Event) {
        let Event {
            kind,
            ts,
            tgid,
            dev,
            rwbs,
            sector,
            n,
        } = e;
        let op = op_of(rwbs);
        match kind {
            Kind::BioQueue => {
                let Some(tgid) = tgid else { return };
                let p = self.procs.entry(tgid).or_default();
                bump(&mut p.patterns, rwbs);
                let b = rwbs.as_bytes();
                let preflush = b.len() > 1 && b[0] == b'F' && b"WRDFN".contains(&b[1]);
                let rest = &rwbs[if preflush { 2 } else { 1.min(b.len()) }..];
                if preflush || op == "flush" {
                    p.flushes += 1;
                }
                match op {
                    "write" if n > 0 => {
                        p.writes += 1;
                        p.write_bytes += n * 512;
                        if rest.starts_with('F') {
                            p.fua_writes += 1;
                        }
                    }
                    "read" => {
                        p.reads += 1;
                        p.read_bytes += n * 512;
                    }
                    "discard" => {
                        p.discards += 1;
                        p.discard_bytes += n * 512;
                    }
                    _ => {}
                }
                if n > 0 {
                    if self.owner.len() > 200_000 {
                        self.owner.clear();
                    }
                    self.owner.insert((dev, sector), tgid);
                }
            }
            Kind::RqIssue => {
                let d = self.devices.entry(dev.clone()).or_default();
                tracefs::classify(rwbs, &mut d.counts);
                bump(&mut d.patterns, rwbs);
                match op {
                    "read" => d.read_bytes += n * 512,
                    "write" => d.write_bytes += n * 512,
                    "discard" => d.discards += 1,
                    _ => {}
                }
                if op == "flush" {
                    self.flushes.entry(dev).or_default().push_back(ts);
                } else {
                    let owner = self.owner.remove(&(dev.clone(), sector));
                    if self.inflight.len() > 200_000 {
                        self.inflight.clear();
                    }
                    self.inflight.insert((dev, sector), (ts, op, owner));
                }
            }
            Kind::RqComplete => {
                let (started, kind, owner) = if op == "flush" {
                    match self.flushes.get_mut(&dev).and_then(|q| q.pop_front()) {
                        Some(t) => (t, "flush", None),
                        None => return,
                    }
                } else {
                    match self.inflight.remove(&(dev.clone(), sector)) {
                        Some(x) => x,
                        None => return,
                    }
                };
                let ns = ((ts - started).max(0.0) * 1e9) as u64;
                self.devices
                    .entry(dev)
                    .or_default()
                    .latency
                    .entry(kind)
                    .or_default()
                    .add(ns);
                if let Some(t) = owner {
                    self.proc_latency.entry((t, kind)).or_default().add(ns);
                }
            }
        }
    }
}

/// A tracing session on every block device, read as it goes. Dropping it removes the instance
/// (and unmounts tracefs when plumb mounted it and no other plumb traces).
pub struct BlockProcTrace {
    instance: PathBuf,
    tracefs: PathBuf,
    /// Open while tracing; closed first when done (an instance with an open pipe cannot be
    /// removed).
    pipes: Option<RawPipes>,
    /// Instances of plumb runs that died without cleaning up, removed when this one started.
    pub removed: Vec<PathBuf>,
}

fn write(p: &Path, v: &str) -> Result<(), crate::KernelError> {
    fs::write(p, v).map_err(|e| crate::KernelError::io(format!("cannot write {}", p.display()), e))
}

impl BlockProcTrace {
    /// Start tracing bios (with their submitter) and requests on every block device. Needs
    /// root.
    pub fn start() -> Result<BlockProcTrace, crate::KernelError> {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("block-layer tracing needs root".into());
        }
        let _lock = TraceLock::take()?;
        let dir = tracefs::tracefs_dir()?;
        let removed = tracefs::remove_dead_instances(&dir);
        let instance = dir.join("instances").join(tracefs::instance_name());
        fs::create_dir(&instance).map_err(|e| {
            crate::KernelError::io(format!("cannot create {}", instance.display()), e)
        })?;
        let setup = || -> Result<RawPipes, crate::KernelError> {
            let block = instance.join("events/block");
            for ev in ["block_bio_queue", "block_rq_issue", "block_rq_complete"] {
                if !block.join(ev).is_dir() {
                    return Err(format!("this kernel has no block:{ev} tracepoint").into());
                }
            }
            if !instance.join("options/record-tgid").exists() {
                return Err("this kernel's tracefs cannot record who submitted a bio (no options/record-tgid)".into());
            }
            write(&instance.join("options/record-tgid"), "1")?;
            // CLOCK_MONOTONIC: the same on every CPU, and readable here to know which
            // events every CPU has surely written by now.
            write(&instance.join("trace_clock"), "mono")?;
            let _ = write(
                &instance.join("buffer_size_kb"),
                &tracefs::buffer_kb().to_string(),
            );
            for ev in ["block_bio_queue", "block_rq_issue", "block_rq_complete"] {
                write(&block.join(ev).join("enable"), "1")?;
            }
            RawPipes::open(&instance)
        };
        match setup() {
            Ok(pipes) => Ok(BlockProcTrace {
                instance,
                tracefs: dir,
                pipes: Some(pipes),
                removed,
            }),
            Err(e) => {
                tracefs::remove_instance(&instance);
                tracefs::unmount_if_last(&dir);
                Err(e)
            }
        }
    }

    /// The instance's directory (to check it is gone afterwards).
    pub fn instance(&self) -> &Path {
        &self.instance
    }

    /// Read what the trace holds now into `agg`, without waiting. The last few milliseconds
    /// wait for the next call, so that a request's completion recorded on one CPU is never
    /// read before its issue recorded on another.
    pub fn drain(&mut self, agg: &mut BlockAgg) -> Result<(), crate::KernelError> {
        match self.pipes.as_mut() {
            Some(p) => p.drain(agg, false),
            None => Ok(()),
        }
    }

    /// Read everything the trace holds now (at the end of a window).
    pub fn drain_all(&mut self, agg: &mut BlockAgg) -> Result<(), crate::KernelError> {
        match self.pipes.as_mut() {
            Some(p) => p.drain(agg, true),
            None => Ok(()),
        }
    }

    /// Events the kernel dropped because the buffer was full before plumb read it.
    pub fn lost(&self) -> u64 {
        tracefs::instance_overruns(&self.instance)
    }
}

impl Drop for BlockProcTrace {
    fn drop(&mut self) {
        self.pipes = None;
        let lock = TraceLock::take();
        tracefs::remove_instance(&self.instance);
        if lock.is_ok() {
            tracefs::remove_dead_instances(&self.tracefs);
            tracefs::unmount_if_last(&self.tracefs);
        }
    }
}

/// Where an event's fields are in its record (from its format file).
#[derive(Debug, Clone, Copy)]
struct Layout {
    id: u16,
    kind: Kind,
    dev: usize,
    sector: usize,
    nr_sector: usize,
    rwbs: (usize, usize),
}

impl Layout {
    fn read(instance: &Path, kind: Kind, name: &str) -> Result<Layout, crate::KernelError> {
        let p = instance.join("events/block").join(name).join("format");
        let f = fs::read_to_string(&p)
            .map_err(|e| crate::KernelError::io(format!("cannot read {}", p.display()), e))?;
        let bad =
            || crate::KernelError::from(format!("{}: a format plumb cannot read", p.display()));
        let at = |field: &str, size: usize| {
            crate::tracepage::field(&f, field)
                .filter(|(_, s)| *s == size)
                .map(|(o, _)| o)
                .ok_or_else(bad)
        };
        Ok(Layout {
            id: crate::tracepage::format_id(&f).ok_or_else(bad)?,
            kind,
            dev: at("dev", 4)?,
            sector: at("sector", 8)?,
            nr_sector: at("nr_sector", 4)?,
            rwbs: crate::tracepage::field(&f, "rwbs").ok_or_else(bad)?,
        })
    }
}

/// An event read from a page, kept until every CPU has surely written what came before it.
struct Pending {
    ts: u64,
    kind: Kind,
    tid: u32,
    dev: u32,
    sector: u64,
    n: u64,
    rwbs: String,
}

/// Events younger than this are left for the next read.
const HOLD_NS: u64 = 20_000_000;

/// Every CPU's buffer of the instance, read as binary pages.
struct RawPipes {
    cpus: Vec<fs::File>,
    page: usize,
    layouts: Vec<Layout>,
    pending: Vec<Pending>,
    /// Thread to process, for the bios' submitters; forgotten every second (TIDs are reused).
    tgids: HashMap<u32, Option<u32>>,
    tgids_since: std::time::Instant,
    saved_tgids: PathBuf,
}

impl RawPipes {
    fn open(instance: &Path) -> Result<RawPipes, crate::KernelError> {
        use std::os::unix::fs::OpenOptionsExt;
        let layouts = Kind::ALL
            .iter()
            .map(|(k, n)| Layout::read(instance, *k, n))
            .collect::<Result<Vec<_>, _>>()?;
        let dir = instance.join("per_cpu");
        let rd = fs::read_dir(&dir)
            .map_err(|e| crate::KernelError::io(format!("cannot read {}", dir.display()), e))?;
        let mut cpus = Vec::new();
        for e in rd.flatten() {
            let p = e.path().join("trace_pipe_raw");
            let f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&p)
                .map_err(|e| crate::KernelError::io(format!("cannot open {}", p.display()), e))?;
            cpus.push(f);
        }
        // A page of the ring buffer: the system's page, or the sub-buffer size where the
        // kernel lets it be set (6.8).
        // SAFETY: sysconf has no preconditions.
        let sys_page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let page = fs::read_to_string(instance.join("buffer_subbuf_size_kb"))
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or(sys_page, |kb| (kb * 1024).max(sys_page));
        let tracefs = instance
            .parent()
            .and_then(Path::parent)
            .unwrap_or(instance)
            .to_path_buf();
        Ok(RawPipes {
            cpus,
            page,
            layouts,
            pending: Vec::new(),
            tgids: HashMap::new(),
            tgids_since: std::time::Instant::now(),
            saved_tgids: tracefs.join("saved_tgids"),
        })
    }

    fn drain(&mut self, agg: &mut BlockAgg, all: bool) -> Result<(), crate::KernelError> {
        let now = crate::eventtrace::mono_ns();
        let mut buf = vec![0u8; self.page];
        for f in &mut self.cpus {
            loop {
                match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        for r in crate::tracepage::records(&buf[..n]) {
                            let Some(l) = r
                                .id()
                                .and_then(|id| self.layouts.iter().find(|l| l.id == id))
                            else {
                                continue;
                            };
                            let (Some(tid), Some(dev), Some(sector), Some(n), Some(rwbs)) = (
                                r.pid(),
                                r.u32_at(l.dev),
                                r.u64_at(l.sector),
                                r.u32_at(l.nr_sector),
                                r.str_at(l.rwbs.0, l.rwbs.1),
                            ) else {
                                agg.unreadable += 1;
                                continue;
                            };
                            self.pending.push(Pending {
                                ts: r.ts,
                                kind: l.kind,
                                tid,
                                dev,
                                sector,
                                n: n as u64,
                                rwbs: rwbs.to_string(),
                            });
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(crate::KernelError::io("cannot read the block trace", e)),
                }
            }
        }
        self.pending.sort_by_key(|p| p.ts);
        let cut = if all {
            u64::MAX
        } else {
            now.saturating_sub(HOLD_NS)
        };
        let ready = self.pending.partition_point(|p| p.ts < cut);
        if self.tgids_since.elapsed() >= std::time::Duration::from_secs(1) {
            self.tgids.clear();
            self.tgids_since = std::time::Instant::now();
        }
        let events: Vec<Pending> = self.pending.drain(..ready).collect();
        for p in &events {
            let tgid = match p.kind {
                Kind::BioQueue => self.tgid_of(p.tid),
                _ => None,
            };
            agg.add(Event {
                kind: p.kind,
                ts: p.ts as f64 / 1e9,
                tgid,
                dev: format!("{}:{}", p.dev >> 20, p.dev & 0xf_ffff),
                rwbs: &p.rwbs,
                sector: p.sector,
                n: p.n,
            });
        }
        Ok(())
    }

    /// A thread's process: from /proc while it lives, else from what the kernel saved when
    /// it recorded the event (record-tgid).
    fn tgid_of(&mut self, tid: u32) -> Option<u32> {
        if tid == 0 {
            return None;
        }
        if let Some(t) = self.tgids.get(&tid) {
            return *t;
        }
        let live = fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            });
        let t = live.or_else(|| {
            fs::read_to_string(&self.saved_tgids).ok().and_then(|s| {
                s.lines().find_map(|l| {
                    let (p, g) = l.split_once(' ')?;
                    (p.trim().parse::<u32>().ok()? == tid).then(|| g.trim().parse().ok())?
                })
            })
        });
        self.tgids.insert(tid, t);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bios_are_charged_to_their_process_and_requests_timed() {
        let t = "# tracer: nop\n\
            postgres-500 (  500) [001] ..... 10.000000: block_bio_queue: 254,0 WS 1000 + 16 [postgres]\n\
            postgres-500 (  500) [001] ..... 10.000010: block_rq_issue: 254,0 WS 8192 () 1000 + 16 none,0,0 [postgres]\n\
            postgres-500 (  500) [001] ..... 10.000020: block_bio_queue: 254,0 FWS 0 + 0 [postgres]\n\
            kworker/1:1H-9 (    9) [001] ..... 10.000030: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]\n\
            <idle>-0 (-------) [001] ..... 10.000510: block_rq_complete: 254,0 WS () 1000 + 16 none,0,0 [0]\n\
            <idle>-0 (-------) [001] ..... 10.002030: block_rq_complete: 254,0 FF () 0 + 0 none,0,0 [0]\n\
            dd-600 (  600) [000] ..... 10.003000: block_bio_queue: 254,0 WFS 2000 + 8 [dd]\n\
            dd-600 (  600) [000] ..... 10.003000: block_bio_queue: 254,0 R 3000 + 8 [dd]\n\
            dd-600 (  600) [000] ..... 10.003000: block_bio_queue: 254,0 DS 4000 + 2048 [dd]\n";
        let mut a = BlockAgg::default();
        a.feed(t);
        let pg = &a.procs[&500];
        assert_eq!(
            (pg.writes, pg.write_bytes, pg.flushes, pg.fua_writes),
            (1, 8192, 1, 0)
        );
        assert_eq!(pg.patterns["WS"], 1);
        assert_eq!(pg.patterns["FWS"], 1);
        let dd = &a.procs[&600];
        assert_eq!(
            (dd.writes, dd.fua_writes, dd.reads, dd.discards),
            (1, 1, 1, 1)
        );
        assert_eq!(dd.discard_bytes, 2048 * 512);
        let d = &a.devices["254:0"];
        assert_eq!((d.counts.writes, d.counts.flushes), (1, 1));
        let w = a.proc_latency[&(500, "write")].quantile(0.5).unwrap();
        assert!((w as f64 / 500_000.0 - 1.0).abs() < 0.13, "{w}");
        let f = d.latency["flush"].quantile(0.5).unwrap();
        assert!((f as f64 / 2_000_000.0 - 1.0).abs() < 0.13, "{f}");
        assert!(
            !a.proc_latency.contains_key(&(500, "flush")),
            "the flush request was the block layer's"
        );
        assert_eq!(a.unreadable, 0);
        assert_eq!(op_of("FWFSM"), "write");
        assert_eq!(op_of("FF"), "flush");
    }

    #[test]
    fn the_captured_durability_trace_reads_the_same_way() {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/trace/durability-ext4-loop.txt"
        );
        let mut a = BlockAgg::default();
        a.feed(&fs::read_to_string(p).unwrap());
        // As `tracefs::attribute` counts the probe's own bios.
        let probe = &a.procs[&27272];
        assert_eq!((probe.writes, probe.flushes, probe.fua_writes), (7, 6, 0));
        assert_eq!(a.procs[&27271].writes, 6);
        assert_eq!(a.unreadable, 0);
    }
}
