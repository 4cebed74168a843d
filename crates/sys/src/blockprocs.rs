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
pub fn op_of(rwbs: &str) -> &'static str {
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
            if !l.event.starts_with("block_") {
                continue;
            }
            let Some((dev, rwbs, sector, n)) = fields(l.body) else {
                self.unreadable += 1;
                continue;
            };
            let op = op_of(rwbs);
            match l.event {
                "block_bio_queue" => {
                    let Some(tgid) = l.tgid else { continue };
                    let p = self.procs.entry(tgid).or_default();
                    *p.patterns.entry(rwbs.to_string()).or_default() += 1;
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
                "block_rq_issue" => {
                    let d = self.devices.entry(dev.clone()).or_default();
                    tracefs::classify(rwbs, &mut d.counts);
                    *d.patterns.entry(rwbs.to_string()).or_default() += 1;
                    match op {
                        "read" => d.read_bytes += n * 512,
                        "write" => d.write_bytes += n * 512,
                        "discard" => d.discards += 1,
                        _ => {}
                    }
                    if op == "flush" {
                        self.flushes.entry(dev).or_default().push_back(l.ts);
                    } else {
                        let owner = self.owner.remove(&(dev.clone(), sector));
                        if self.inflight.len() > 200_000 {
                            self.inflight.clear();
                        }
                        self.inflight.insert((dev, sector), (l.ts, op, owner));
                    }
                }
                "block_rq_complete" => {
                    let (started, kind, owner) = if op == "flush" {
                        match self.flushes.get_mut(&dev).and_then(|q| q.pop_front()) {
                            Some(t) => (t, "flush", None),
                            None => continue,
                        }
                    } else {
                        match self.inflight.remove(&(dev.clone(), sector)) {
                            Some(x) => x,
                            None => continue,
                        }
                    };
                    let ns = ((l.ts - started).max(0.0) * 1e9) as u64;
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
                _ => {}
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
    pipe: Option<fs::File>,
    partial: Vec<u8>,
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
        let setup = || -> Result<fs::File, crate::KernelError> {
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
            let _ = write(
                &instance.join("buffer_size_kb"),
                &tracefs::buffer_kb().to_string(),
            );
            for ev in ["block_bio_queue", "block_rq_issue", "block_rq_complete"] {
                write(&block.join(ev).join("enable"), "1")?;
            }
            use std::os::unix::fs::OpenOptionsExt;
            let p = instance.join("trace_pipe");
            fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&p)
                .map_err(|e| crate::KernelError::io(format!("cannot open {}", p.display()), e))
        };
        match setup() {
            Ok(pipe) => Ok(BlockProcTrace {
                instance,
                tracefs: dir,
                pipe: Some(pipe),
                partial: Vec::new(),
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

    /// Read what the trace holds now into `agg`, without waiting.
    pub fn drain(&mut self, agg: &mut BlockAgg) -> Result<(), crate::KernelError> {
        let mut buf = vec![0u8; 1 << 16];
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    self.partial.extend_from_slice(&buf[..n]);
                    if let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') {
                        let text = String::from_utf8_lossy(&self.partial[..=end]).into_owned();
                        agg.feed(&text);
                        self.partial.drain(..=end);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(crate::KernelError::io(
                        format!("cannot read {}", self.instance.join("trace_pipe").display()),
                        e,
                    ))
                }
            }
        }
        Ok(())
    }

    /// Events the kernel dropped because the buffer was full before plumb read it.
    pub fn lost(&self) -> u64 {
        tracefs::instance_overruns(&self.instance)
    }
}

impl Drop for BlockProcTrace {
    fn drop(&mut self) {
        self.pipe = None;
        let lock = TraceLock::take();
        tracefs::remove_instance(&self.instance);
        if lock.is_ok() {
            tracefs::remove_dead_instances(&self.tracefs);
            tracefs::unmount_if_last(&self.tracefs);
        }
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
