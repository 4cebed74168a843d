//! The notes of measurements: `plumb delta`, the interference of a window, `plumb io`'s sweep and
//! durability probe, `plumb trace`.

use super::{b, int, joined_notes, who};
use plumb_analyze::said::Facts;
use plumb_analyze::Note;

pub(super) fn note(code: &str, f: &Facts) -> Option<String> {
    let mut s = delta(code, f)
        .or_else(|| window(code, f))
        .or_else(|| sweep(code, f))
        .or_else(|| trace(code, f))
        .or_else(|| durability(code, f))?;
    if f.has("lowered_by_disturbed_runs") {
        s.push_str(" (lowered to info: a run was disturbed by other work on the host, and the medians include it)");
    }
    Some(s)
}

/// What disturbed a window, in one line: its warnings, or "clean".
pub fn disturbance(warnings: &[Note]) -> String {
    if warnings.is_empty() {
        "clean".into()
    } else {
        joined_notes(warnings, "; ")
    }
}

/// A time as microseconds: `812 µs`.
fn us(s: f64) -> String {
    if s.is_finite() {
        format!("{:.0} µs", s * 1e6)
    } else {
        "unknown".into()
    }
}

fn kib(f: &Facts, k: &str) -> String {
    int((f.num(k) / 1024.0).floor())
}

fn delta(code: &str, f: &Facts) -> Option<String> {
    let label = if f.has("mode") {
        format!("{}: ", f.text("mode"))
    } else {
        String::new()
    };
    Some(match code {
        "delta-run-note" => f.text("note").to_string(),
        "run-disturbed" => format!(
            "{} run {}: measured while other work used the host — {}",
            f.text("mode"),
            int(f.num("run")),
            disturbance(f.notes("evidence"))
        ),
        "temp-file-spill" => format!(
            "{label}the workload spilled {} to temporary files (a sort or hash larger than work_mem)",
            b(f.num("temp_bytes"))
        ),
        "page-cache-served-reads" => format!(
            "{label}the engine read {} blocks ({}) but the disk delivered only {}: the OS page cache served the rest, so the engine's \"reads\" were not disk reads",
            int(f.num("blocks_read")),
            b(f.num("engine_read_bytes")),
            b(f.num("disk_read_bytes"))
        ),
        "warm-run-still-read-disk" => format!(
            "warm: still read {} from disk (cold: {}): the data did not stay cached between runs. The working set is larger than the engine's cache, and the OS page cache did not hold it either (or the engine bypasses it with O_DIRECT)",
            b(f.num("warm_read_bytes")),
            b(f.num("cold_read_bytes"))
        ),
        "runs-differ" => format!(
            "{} took {:.2}x as long as {} (median elapsed)",
            f.text("slow"),
            f.num("ratio"),
            f.text("fast")
        ),
        "runs-not-distinguishable" => format!(
            "{} and {} took about as long: {:.3} s and {:.3} s (median elapsed), not distinguishable on this host (their runs' ranges overlap, or one run each within 10%)",
            f.text("slow"),
            f.text("fast"),
            f.num("slow_elapsed_s"),
            f.num("fast_elapsed_s")
        ),
        _ => return None,
    })
}

fn window(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "neighbour-io" => format!(
            "{} read {} and wrote {} in the window; plumb read {} and wrote {}; {}: {} of the device's bytes ({} from {:.0}%)",
            f.list("devices").join(", "),
            b(f.num("device_read_bytes")),
            b(f.num("device_write_bytes")),
            b(f.num("own_read_bytes")),
            b(f.num("own_write_bytes")),
            joined_notes(f.notes("neighbours"), ", "),
            share(f.num("share_pct")),
            if f.num("share_pct") >= f.num("disturbing_share_pct") {
                "disturbing"
            } else {
                "noted, disturbing"
            },
            f.num("disturbing_share_pct")
        ),
        "neighbour" => format!(
            "{} ({}) read {} and wrote {}",
            who(f),
            f.text("comm"),
            b(f.num("read_bytes")),
            b(f.num("write_bytes"))
        ),
        "unexplained-io" => format!(
            "{} read {} in the window, plumb {}; no process visible here accounts for the rest (another container, or processes plumb cannot read without root)",
            f.list("devices").join(", "),
            b(f.num("device_read_bytes")),
            b(f.num("own_read_bytes"))
        ),
        "own-stall" => format!(
            "plumb's own workers completed no I/O in {} tenths of the window ({}), though no I/O took more than {} and the other tenths held {:.0} each: nothing was asked of the device then (plumb was descheduled, throttled by a CPU quota, frozen or stalled in memory reclaim), so the run's rate counts time it did not measure",
            int(f.num("idle_tenths")),
            crate::fmt::ms(f.num("idle_s")),
            crate::fmt::ms(f.num("max_latency_s")),
            f.num("busy_tenth_ios")
        ),
        "own-throttled" => format!(
            "plumb's cgroup CPU quota (its own or a parent's) held it off the CPUs {} times for {} in all ({:.1}% of the window): a throttled thread waits out the quota's period, and an I/O it was timing counts the wait as latency",
            int(f.num("periods")),
            crate::fmt::ms(f.num("throttled_s")),
            f.num("share_pct")
        ),
        "neighbour-cpu" => format!(
            "other processes used {:.1} CPUs while the host was {:.0}% idle: {}",
            f.num("others_cpus"),
            f.num("idle_pct"),
            joined_notes(f.notes("neighbours"), ", ")
        ),
        "neighbour-cpu-use" => format!(
            "{} ({}) {:.1} CPU",
            who(f),
            f.text("comm"),
            f.num("cpus")
        ),
        "steal" if f.num("steal_pct") >= f.num("disturbing_steal_pct") => format!(
            "the hypervisor took {:.0}% of the CPU time (steal): this VM waited for its host's CPUs",
            f.num("steal_pct")
        ),
        "steal" => format!(
            "steal was {:.0}% of the CPU time (a VM's I/O is partly the hypervisor's work; under {:.0}% it does not disturb the window)",
            f.num("steal_pct"),
            f.num("disturbing_steal_pct")
        ),
        "neighbour-accepted" => format!(
            "accepted neighbours (--accept-neighbour) read {} and wrote {} in the window: noted, not held against its figures ({})",
            b(f.num("read_bytes")),
            b(f.num("write_bytes")),
            joined_notes(f.notes("neighbours"), ", ")
        ),
        "neighbour-io-unreadable" => format!(
            "the I/O of {} other process(es) could not be read (without root, or kept from plumb by the kernel): a neighbour's I/O may go unnamed",
            int(f.num("processes"))
        ),
        _ => return None,
    })
}

fn sweep(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "throughput-fell" => format!(
            "throughput fell from {} to {} ({:+.0}%) as the load rose: a device at its limit levels off, it does not fall; something else used the device (the runs' evidence says what, where it was seen)",
            f.text("from"),
            f.text("to"),
            f.num("throughput_change_pct")
        ),
        "knee-not-distinguishable" => format!(
            "latency rose from {} to {}, but not beyond the spread of the repetitions (±{:.0}%): no knee is distinguishable on this host",
            f.text("from"),
            f.text("to"),
            f.num("spread_pct") / 2.0
        ),
        "levels-disturbed" => format!(
            "no clean run at level(s) {}: their figures were measured while something else used the host",
            f.list("labels").join(", ")
        ),
        "runs-retried" if f.has("disturbed_runs") => format!(
            "{} run(s) were disturbed by other activity on the host and run again; the figures are from clean runs only",
            int(f.num("disturbed_runs"))
        ),
        "runs-retried" => format!(
            "{} disturbed run(s) were repeated and left out of the figures (their evidence is in the JSON)",
            int(f.num("runs"))
        ),
        _ => return None,
    })
}

fn trace(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "trace-lost-updates" => format!(
            "the kernel-side tables ran out of room: {} syscall, {} scheduling and {} process updates were dropped, so the counts are lower bounds",
            int(f.num("lost_syscall_updates")),
            int(f.num("lost_sched_updates")),
            int(f.num("lost_processes"))
        ),
        "trace-lost-block-events" => format!(
            "{} block trace events were dropped before plumb read them: block figures are lower bounds",
            int(f.num("lost_block_events"))
        ),
        "trace-no-block" => format!("block requests were not traced: {}", f.text("why")),
        "trace-removed-stale" => format!(
            "removed {}, left by a plumb run that ended without cleaning up",
            f.text("what")
        ),
        "trace-no-syscalls" => "no syscall of the followed processes was seen in the window".into(),
        _ => return None,
    })
}

/// How a device takes durable writes, from its write cache mode and FUA.
pub(crate) fn cache_line(write_cache: Option<&str>, fua: Option<bool>) -> Option<String> {
    Some(match (write_cache?, fua) {
        ("write through", _) => "no volatile write cache reported: durable writes need no cache flush (trust this only for battery- or capacitor-backed caches)".into(),
        ("write back", Some(true)) => "volatile write cache with FUA: O_DIRECT|O_DSYNC writes go as FUA writes; fdatasync() sends a cache FLUSH".into(),
        ("write back", _) => "volatile write cache without FUA: every durable write (fdatasync() or O_DSYNC) costs a full cache FLUSH".into(),
        (other, _) => format!("write cache mode {other:?}"),
    })
}

/// How a durable write reaches persistent memory, in one line.
pub(crate) fn pmem_line(dax: Option<&str>) -> String {
    match dax {
        Some(d) => format!(
            "persistent memory mounted with {d}: file data is mapped from the memory itself, bypassing the page cache, and a write is durable once the CPU's caches are written back (fsync/fdatasync flush CPU cache lines, not a device cache); no FLUSH or FUA is involved"
        ),
        None => "persistent memory used as a block device (no DAX): writes go through the pmem driver, which makes each one durable as it copies it; there is no volatile device cache to FLUSH".into(),
    }
}

fn pmem(f: &Facts) -> String {
    pmem_line(f.has("dax").then(|| f.text("dax")))
}

/// FUA as a statement's facts say it.
fn fua_of(f: &Facts) -> Option<bool> {
    match f.text("fua") {
        "supported" => Some(true),
        "not supported" => Some(false),
        _ => None,
    }
}

/// The durability statements a storage section carries.
pub(super) fn said(code: &str, f: &Facts) -> Option<String> {
    match code {
        "durable-path" => cache_line(Some(f.text("write_cache")), fua_of(f)),
        "durable-pmem" => Some(pmem(f)),
        _ => prep(code, f),
    }
}

/// What plumb delta did before a mode's runs.
fn prep(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "prep-warm-up" => "one unmeasured warm-up run first".into(),
        "prep-restarted" => "restarted the private instance (empty shared_buffers)".into(),
        "prep-engine-emptied" => f.text("what").to_string(),
        "prep-engine-not-emptied" => format!("the engine's cache was NOT emptied: {}", f.text("why")),
        "prep-engine-no-statement" => "the engine's own cache was NOT emptied (it has no statement for it; only plumb's private instance is restarted)".into(),
        "prep-evicted" => format!(
            "evicted the private instance's own files ({} files, {} on disk) from the OS page cache; every other process's cache left as it was",
            int(f.num("files")),
            b(f.num("bytes"))
        ),
        "prep-host-cache-kept" => "the OS page cache was NOT dropped: it is the whole host's, the server's neighbours' too (add --drop-host-cache to drop it)".into(),
        "prep-host-cache-dropped" => "dropped the OS page cache (echo 3 > /proc/sys/vm/drop_caches)".into(),
        "prep-host-cache-needs-root" => "the OS page cache was NOT dropped (needs root)".into(),
        _ => return None,
    })
}

/// A mode (or candidate) and its mean, with its spread when there is one.
fn figure(f: &Facts, name: &str) -> String {
    let mut s = format!("{} {}", f.text(name), us(f.num("mean_s")));
    if f.has("spread_pct") {
        s.push_str(&format!(" ±{:.0}%", f.num("spread_pct")));
    }
    s
}

fn durability(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "device-cache" => device_cache(f),
        "memory-file-system" => format!(
            "{} is {}: memory. Nothing written there survives a reboot or a power loss, whatever the mode; these figures are the cost of the system calls alone, a floor for any real device.",
            f.text("mount_point"),
            f.text("fs_type")
        ),
        "pmem" => format!("{}: {}.", f.text("mount_point"), pmem(f)),
        "durable-modes" => format!(
            "Durable on this device (if it honours FLUSH{}): {}. Not durable: none (page cache){}.",
            if f.text("fua") == "supported" { " and FUA" } else { "" },
            f.list("durable").join(", "),
            if f.text("write_cache") == "write through" {
                ""
            } else {
                ", direct (the volatile cache holds it)"
            }
        ),
        "mode-at-size" => format!("{} ({} KiB)", f.text("mode"), kib(f, "block_size_bytes")),
        "modes-disturbed" => format!(
            "No clean run for {}: {}, and no comparison is drawn from them",
            joined_notes(f.notes("which"), ", "),
            if f.num("held_off_modes") >= f.num("modes") {
                "plumb itself was held off the CPUs in their runs (a CPU quota on its cgroup, or its own workers stalled), so their latencies include that wait"
            } else if f.num("held_off_modes") > 0.0 {
                "their figures were measured while something else used the device or the CPUs, or while plumb itself was held off the CPUs (a CPU quota on its cgroup, or its own workers stalled)"
            } else {
                "their figures were measured while something else used the device or the CPUs"
            }
        ),
        "no-block-evidence" => format!("No block-layer evidence: {}.", f.text("why")),
        "cache-path" => cache_path(f),
        "mode-mean" => figure(f, "mode"),
        "fastest-durable" => fastest_durable(f),
        "fastest-not-distinguishable" => format!(
            "Fastest durable {} KiB writes, not distinguishable on this host by plumb compare's rule (none differs from the fastest beyond {:.0}% at p < 0.05 over the runs' tenths): {}{}{}.",
            kib(f, "block_size_bytes"),
            f.num("floor_pct"),
            joined_notes(f.notes("group"), ", "),
            then(f),
            match f.list("not_compared") {
                [] => String::new(),
                nc => format!("; not compared (no clean run): {}", nc.join(", ")),
            }
        ),
        "wal-sync-not-distinguishable" | "wal-sync-open-datasync-faster" | "wal-sync-fdatasync-faster" => wal_sync(code, f),
        "mssql-log-writes" => mssql_log_writes(f),
        "durability-cost" => format!(
            "Durability costs {:.1}x here: a plain O_DIRECT {} KiB write takes {}, the fastest durable one {}{}.",
            f.num("ratio"),
            kib(f, "block_size_bytes"),
            us(f.num("direct_mean_s")),
            us(f.num("durable_mean_s")),
            if f.has("p") {
                format!(" ({})", rule(f, "the durable one"))
            } else {
                String::new()
            }
        ),
        "candidate" => {
            let mut s = figure(f, "path");
            if f.has("slower_than_previous") {
                s = format!("< {s} ({:.1}x)", f.num("slower_than_previous"));
            } else if f.has("previous") {
                s = format!("≈ {s} (not distinguishable)");
            }
            s
        }
        "candidates-compared" | "candidates-not-distinguishable" => format!(
            "{} KiB {}: {}.",
            int((f.num("block_size") / 1024.0).floor()),
            f.text("label"),
            joined_notes(f.notes("candidates"), " ")
        ),
        "candidate-not-durable" => format!(
            "{} is on {}: memory, so nothing written there survives a reboot or a power loss; its figures are a floor, not a log device",
            f.text("path"),
            f.text("fs_type")
        ),
        "candidate-pmem" => format!("{}: {}", f.text("path"), pmem(f)),
        "candidate-disturbed" => format!(
            "{}: a mode had no clean run, so it is left out of the comparison for that mode",
            f.text("path")
        ),
        _ => return None,
    })
}

/// A device's write cache and FUA, and what they mean for a durable write.
fn device_cache(f: &Facts) -> String {
    let fua = fua_of(f);
    let wc = f.has("write_cache").then(|| f.text("write_cache"));
    let line = cache_line(wc, fua)
        .map(|l| {
            let mut c = l.chars();
            c.next()
                .map(|x| x.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    format!(
        "Device {}: write cache {}, FUA {}. {line}",
        f.text("device"),
        wc.unwrap_or("unknown"),
        if f.has("fua") {
            f.text("fua")
        } else {
            "unknown"
        }
    )
}

/// The block requests per durable write, and the path they show.
fn cache_path(f: &Facts) -> String {
    let verdict = match f.text("path") {
        "fua" => "the FUA path: durable on arrival, no cache FLUSH",
        "flush" => "each durable write cost a cache FLUSH",
        "neither" => "neither FLUSH nor FUA: not durable past a volatile cache",
        _ => "some writes cost a FLUSH and some did not: a journal commit now and then, or a path that changes with the write",
    };
    let dev = if f.has("device_flushes") {
        format!(
            "; the device received {} FLUSH and {} FUA writes from everybody in the same windows",
            int(f.num("device_flushes")),
            int(f.num("device_fua_writes"))
        )
    } else {
        String::new()
    };
    format!(
        "{}: {:.2} FLUSH and {:.2} FUA writes per durable write over {} durable writes (the probe's own requests and the journal commits its syncs waited for{dev}) — {verdict}.",
        f.text("label"),
        f.num("flushes_per_write"),
        f.num("fua_per_write"),
        int(f.num("durable_writes"))
    )
}

/// The fastest durable mode, with the modes that cannot be told from it.
fn fastest_durable(f: &Facts) -> String {
    let spread = if f.has("spread_pct") {
        format!(
            "±{:.0}% over {} clean runs",
            f.num("spread_pct"),
            int(f.num("clean_runs"))
        )
    } else if f.num("clean_runs") == 1.0 {
        "one clean run".into()
    } else {
        "no clean run".into()
    };
    let ahead = if f.has("slower") {
        format!(
            " ({} slower by plumb compare's rule: {})",
            f.text("slower"),
            rule(f, "")
        )
    } else {
        String::new()
    };
    // With modes left out for want of a clean run, "fastest" is said only of those
    // compared; alone, it is not the fastest of anything.
    let (head, apart) = match (
        f.list("not_compared"),
        f.has("slower") || !f.notes("then").is_empty(),
    ) {
        ([], _) => ("Fastest durable".to_string(), String::new()),
        (nc, true) => (
            "Fastest durable".to_string(),
            format!("; not compared (no clean run): {}", nc.join(", ")),
        ),
        (nc, false) => (
            "The only durable".to_string(),
            format!(
                " with a clean run; no comparison is drawn with {} (no clean run)",
                nc.join(", ")
            ),
        ),
    };
    format!(
        "{head} {} KiB write: {} at {} mean ({spread}), {} p99 ({:.0} per second){}{ahead}{apart}.",
        kib(f, "block_size_bytes"),
        f.text("mode"),
        us(f.num("mean_s")),
        us(f.num("p99_s")),
        f.num("writes_per_s"),
        then(f)
    )
}

/// PostgreSQL's wal_sync_method, fdatasync against open_datasync.
fn wal_sync(code: &str, f: &Facts) -> String {
    let how = rule(
        f,
        if f.text("slower") == "dsync" {
            "open_datasync"
        } else {
            "fdatasync"
        },
    );
    let advice = match code {
        "wal-sync-not-distinguishable" => format!(
            "not distinguishable on this host by plumb compare's rule ({how}); keep the default fdatasync"
        ),
        "wal-sync-open-datasync-faster" => format!("open_datasync is faster here by plumb compare's rule ({how}); confirm with a longer probe and your workload before switching"),
        _ => format!("fdatasync is faster by plumb compare's rule ({how}); keep the default"),
    };
    let direct = if f.has("open_datasync_direct_mean_s") {
        format!(
            "; with O_DIRECT, which PostgreSQL adds to open_datasync only under wal_level = minimal, {}",
            us(f.num("open_datasync_direct_mean_s"))
        )
    } else {
        String::new()
    };
    format!(
        "PostgreSQL wal_sync_method: fdatasync (the Linux default) costs {} per {} KiB commit, open_datasync {}{direct}: {advice}.",
        us(f.num("fdatasync_mean_s")),
        kib(f, "block_size_bytes"),
        us(f.num("open_datasync_mean_s"))
    )
}

/// SQL Server's log writes: the forced flush against the FUA path.
fn mssql_log_writes(f: &Facts) -> String {
    let slower = if f.text("slower") == "direct-dsync" {
        "the FUA path"
    } else {
        "the forced flush"
    };
    let tail = match f.text("fua") {
        "none" => " This device has no FUA, so O_DSYNC still ends in a cache flush: the FUA setting cannot help here.".to_string(),
        "faster" => format!(" With FUA the log write skips the separate flush: trace flag 3979 with control.alternatewritethrough = 0 pays off here ({}).", rule(f, slower)),
        "not-faster" => format!(" The FUA path is not faster here by plumb compare's rule ({}).", rule(f, slower)),
        _ => String::new(),
    };
    format!(
        "SQL Server {} KiB log writes: forced flush (O_DIRECT then fdatasync, the default) {}; O_DIRECT|O_DSYNC (trace flag 3979, control.alternatewritethrough = 0) {}.{tail}",
        kib(f, "block_size_bytes"),
        us(f.num("forced_flush_mean_s")),
        us(f.num("fua_mean_s"))
    )
}

/// How plumb compare's rule judged two modes, the slower one's change from the faster:
/// "Mann-Whitney p < 0.001 over the runs' tenths, open_datasync +12% to +30% (95%), counted
/// beyond 5%".
fn rule(f: &Facts, candidate: &str) -> String {
    let p = f.num("p");
    let candidate = if candidate.is_empty() {
        String::new()
    } else {
        format!("{candidate} ")
    };
    format!(
        "Mann-Whitney p {} over the runs' tenths, {candidate}{:+.0}% to {:+.0}% (95%), counted beyond {:.0}%",
        if p < 0.001 {
            "< 0.001".to_string()
        } else {
            format!("{p:.3}")
        },
        f.num("change_low_pct"),
        f.num("change_high_pct"),
        f.num("floor_pct")
    )
}

/// "; then fdatasync 812 µs, dsync 901 µs", or nothing.
fn then(f: &Facts) -> String {
    let v = f.notes("then");
    if v.is_empty() {
        String::new()
    } else {
        format!("; then {}", joined_notes(v, ", "))
    }
}

/// A share in percent: one decimal below 10%, whole above.
fn share(pct: f64) -> String {
    if pct < 10.0 {
        format!("{pct:.1}%")
    } else {
        format!("{pct:.0}%")
    }
}
