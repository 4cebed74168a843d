//! Block-layer evidence from tracefs: which requests a device really received (plain writes,
//! cache FLUSHes, FUA writes), from the `block:block_rq_issue` tracepoint's rwbs flags.
//!
//! plumb traces in its own tracefs instance (`instances/plumb-PID`), so it never touches the
//! global trace buffer or other tools' settings; it removes the instance when done, and unmounts
//! tracefs if it had to mount it.

use crate::DevNum;
use serde::Serialize;
use std::fs;
use std::path::{Path, PathBuf};

/// Requests counted by kind. One request can be both a write and FUA, or a write with a
/// preflush; `flushes` counts stand-alone FLUSH requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RqCounts {
    pub reads: u64,
    pub writes: u64,
    /// Writes carrying FUA: durable on arrival, no cache flush needed.
    pub fua_writes: u64,
    /// Writes carrying a preflush (the cache is flushed before the write).
    pub preflush_writes: u64,
    /// Stand-alone cache FLUSH requests.
    pub flushes: u64,
    /// Writes flagged as filesystem metadata (journal commits and the like).
    pub meta_writes: u64,
    pub other: u64,
    /// Events the trace buffer dropped: the counts above are then lower bounds.
    pub lost_events: u64,
}

/// Classify one rwbs string as the kernel's blk_fill_rwbs writes it: an optional `F`
/// (preflush), the op (`W` `R` `D` `F` lush, `N` other), then `F` (FUA), `A`, `S`, `M`.
pub fn classify(rwbs: &str, c: &mut RqCounts) {
    let b = rwbs.as_bytes();
    if b.is_empty() {
        c.other += 1;
        return;
    }
    let (preflush, op, rest) = if b.len() >= 2 && b[0] == b'F' && b"WRDFN".contains(&b[1]) {
        (true, b[1], &b[2..])
    } else {
        (false, b[0], &b[1..])
    };
    let fua = rest.first() == Some(&b'F');
    let meta = rest.contains(&b'M');
    match op {
        b'W' => {
            c.writes += 1;
            if fua {
                c.fua_writes += 1;
            }
            if preflush {
                c.preflush_writes += 1;
            }
            if meta {
                c.meta_writes += 1;
            }
        }
        b'R' => c.reads += 1,
        b'F' => c.flushes += 1,
        _ => c.other += 1,
    }
}

/// Count the block_rq_issue lines of a trace buffer dump.
pub fn count_trace(text: &str) -> RqCounts {
    let mut c = RqCounts::default();
    for line in text.lines() {
        let Some(i) = line.find("block_rq_issue: ") else {
            continue;
        };
        let mut f = line[i + "block_rq_issue: ".len()..].split_whitespace();
        let (_dev, Some(rwbs)) = (f.next(), f.next()) else {
            continue;
        };
        classify(rwbs, &mut c);
    }
    c
}

/// A tracing session on some devices. Dropping it removes the instance (and unmounts tracefs
/// if plumb mounted it).
pub struct BlockTrace {
    instance: PathBuf,
    mounted: Option<PathBuf>,
}

fn write(p: &Path, v: &str) -> Result<(), String> {
    fs::write(p, v).map_err(|e| format!("cannot write {}: {e}", p.display()))
}

fn tracefs_dir() -> Result<(PathBuf, Option<PathBuf>), String> {
    for d in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if Path::new(d).join("instances").is_dir() {
            return Ok((PathBuf::from(d), None));
        }
    }
    // Not mounted: mount it (root only) and remember to unmount.
    let d = PathBuf::from("/sys/kernel/tracing");
    if !d.is_dir() {
        return Err("tracefs is not available (/sys/kernel/tracing does not exist)".into());
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let (src, target, fstype) = (c("nodev"), c("/sys/kernel/tracing"), c("tracefs"));
    // SAFETY: valid C strings; no data argument.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "tracefs is not mounted and mounting it failed ({e}); run as root, or mount it: mount -t tracefs nodev /sys/kernel/tracing"
        ));
    }
    Ok((d.clone(), Some(d)))
}

impl BlockTrace {
    /// Start counting requests issued to `devs` (whole disks). Needs root.
    pub fn start(devs: &[DevNum]) -> Result<BlockTrace, String> {
        if devs.is_empty() {
            return Err("no block device to trace (the path is not on a local disk)".into());
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("block-layer tracing needs root".into());
        }
        let (dir, mounted) = tracefs_dir()?;
        let instance = dir
            .join("instances")
            .join(format!("plumb-{}", std::process::id()));
        let mut t = BlockTrace {
            instance: PathBuf::new(),
            mounted,
        };
        fs::create_dir(&instance)
            .map_err(|e| format!("cannot create {}: {e}", instance.display()))?;
        t.instance = instance.clone();
        let ev = instance.join("events/block/block_rq_issue");
        if !ev.is_dir() {
            return Err("this kernel has no block:block_rq_issue tracepoint".into());
        }
        // The kernel's trace dev_t is major << 20 | minor.
        let filter = devs
            .iter()
            .map(|d| format!("dev == {}", ((d.major as u64) << 20) | d.minor as u64))
            .collect::<Vec<_>>()
            .join(" || ");
        write(&ev.join("filter"), &filter)?;
        let _ = write(&instance.join("buffer_size_kb"), "8192");
        write(&ev.join("enable"), "1")?;
        Ok(t)
    }

    /// Counts since the last call, then empty the buffer.
    pub fn take(&mut self) -> Result<RqCounts, String> {
        let p = self.instance.join("trace");
        let text =
            fs::read_to_string(&p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let mut c = count_trace(&text);
        c.lost_events = self.overruns();
        write(&p, "")?;
        Ok(c)
    }

    fn overruns(&self) -> u64 {
        let Ok(rd) = fs::read_dir(self.instance.join("per_cpu")) else {
            return 0;
        };
        rd.flatten()
            .filter_map(|e| fs::read_to_string(e.path().join("stats")).ok())
            .flat_map(|t| {
                t.lines()
                    .filter_map(|l| {
                        l.strip_prefix("overrun: ")
                            .and_then(|v| v.trim().parse::<u64>().ok())
                    })
                    .collect::<Vec<_>>()
            })
            .sum()
    }
}

impl Drop for BlockTrace {
    fn drop(&mut self) {
        if !self.instance.as_os_str().is_empty() {
            let _ = fs::write(
                self.instance.join("events/block/block_rq_issue/enable"),
                "0",
            );
            let _ = fs::remove_dir(&self.instance);
        }
        if let Some(m) = &self.mounted {
            if let Ok(c) = std::ffi::CString::new(m.as_os_str().as_encoded_bytes()) {
                // SAFETY: valid C string.
                unsafe {
                    libc::umount2(c.as_ptr(), libc::MNT_DETACH);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_classes_follow_blk_fill_rwbs() {
        let mut c = RqCounts::default();
        for r in ["WS", "FF", "WSM", "WFS", "FWS", "R", "RA", "F", "N", "D"] {
            classify(r, &mut c);
        }
        assert_eq!(c.writes, 4);
        assert_eq!(c.fua_writes, 1);
        assert_eq!(c.preflush_writes, 1);
        assert_eq!(c.meta_writes, 1);
        assert_eq!(c.flushes, 2, "FF (flush with preflush) and a bare F");
        assert_eq!(c.reads, 2);
        assert_eq!(c.other, 2);
    }

    #[test]
    fn counts_trace_lines() {
        let t = "# tracer: nop\n\
            kworker/1:1H-123 [001] ..... 100.1: block_rq_issue: 254,0 FF 0 () 0 + 0 none,0,0 [kworker/1:1H]\n\
            plumb-io-0-77 [000] ..... 100.2: block_rq_issue: 254,0 WS 8192 () 2048 + 16 none,0,0 [plumb-io-0]\n\
            plumb-io-0-77 [000] ..... 100.3: block_rq_issue: 254,0 WFS 8192 () 2064 + 16 none,0,0 [plumb-io-0]\n";
        let c = count_trace(t);
        assert_eq!((c.flushes, c.writes, c.fua_writes), (1, 2, 1));
    }
}
