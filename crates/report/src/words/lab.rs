//! The lab's findings, their evidence, and the notes of its experiments.

use super::{b, int, joined_notes, who};
use plumb_analyze::said::Facts;

/// A time in milliseconds with two decimals: `1.25 ms`.
fn ms2(s: f64) -> String {
    format!("{:.2} ms", s * 1000.0)
}

pub(super) fn finding(rule: &str, f: &Facts) -> Option<String> {
    Some(match rule {
        "container-without-memory-limit" => format!(
            "the server ({}) runs in a container with no memory limit: the engine sizes its caches from the host's memory, and the host's other tenants compete for it",
            who(f)
        ),
        "cache-above-limit" => format!(
            "{} ({}) is larger than the memory limit ({}): the cache will be pushed to swap or the server killed",
            f.text("cache_name"),
            b(f.num("cache_bytes")),
            b(f.num("limit_bytes"))
        ),
        "engine-memory-in-swap" => format!(
            "{} of the server's memory was in swap during {}: every access to it is a disk read (VmSwap does not show swapped shared memory; smaps does)",
            b(f.num("swap_bytes")),
            f.text("phase")
        ),
        "run-queue-above-cpus" => format!(
            "during {} {:.1} tasks were runnable on average for {} CPUs: work waited for a CPU, so that phase's throughput is a CPU ceiling, not a storage one",
            f.text("phase"),
            f.num("runnable_mean"),
            int(f.num("cpus"))
        ),
        "cpu-steal" => format!(
            "the hypervisor took {:.0}% of CPU time (steal) during {}: the VM gets less CPU than it shows",
            f.num("steal_pct"),
            f.text("phase")
        ),
        "device-past-knee" => format!(
            "the data device ran past its knee during {}: {:.1} requests in flight on average, where the sweep found latency outgrowing throughput beyond queue depth {}",
            f.text("phase"),
            f.num("queue_mean"),
            knee_range(f)
        ),
        "device-knee" => format!(
            "the data device's knee is {}: beyond it latency grows faster than throughput; the workloads stayed below it",
            knee_at(f)
        ),
        "synchronous-standby-disk" => format!(
            "commits on the primary follow the synchronous standby's disk: {}; a synchronous standby needs storage as fast as the primary's (or sessions that may lose their last commits on a failover can use synchronous_commit = local)",
            joined_notes(f.notes("followed"), "; ")
        ),
        "data-and-wal-on-one-device" => format!(
            "data and WAL share {}: commits (WAL flushes) and checkpoints (data writes) queue on one device; a log on a disk of its own takes the commits out of the checkpoints' way",
            f.list("devices").join(", ")
        ),
        "commit-latency" => {
            let cause = match f.text("cause") {
                "flush" => "each commit waited for a cache FLUSH (the device has a volatile write cache and no FUA path was used)",
                "wal-write" => "commits did not each flush the device cache: the time is the WAL write itself",
                _ => "the device's FLUSH count was not available",
            };
            format!(
                "commit latency p99 is {} with wal_sync_method={} (above {} ms): {cause}",
                ms2(f.num("p99_s")),
                f.text("configuration"),
                super::num((f.num("threshold_s") * 1e6).round() / 1e3)
            )
        }
        "mariadb-durability" => {
            let list = |k: &str| {
                if f.text(k).is_empty() {
                    "none".to_string()
                } else {
                    f.text(k).to_string()
                }
            };
            let mut s = format!(
                "MariaDB's durability settings on this device: durable with {}; not durable: {}",
                list("durable"),
                if f.notes("not_durable").is_empty() {
                    "none".to_string()
                } else {
                    joined_notes(f.notes("not_durable"), ", ")
                }
            );
            if f.has("fastest") {
                s.push_str(&format!(
                    "; the fastest durable one is {} (single-row commits p50 {})",
                    f.text("fastest"),
                    ms2(f.num("fastest_p50_s"))
                ));
                if !f.text("faster_than").is_empty() {
                    s.push_str(&format!(
                        ", faster beyond chance and by 10% or more than {}",
                        f.text("faster_than")
                    ));
                }
                if !f.text("not_distinguishable").is_empty() {
                    s.push_str(&format!(
                        ", not distinguishable on this host from {}",
                        f.text("not_distinguishable")
                    ));
                }
            }
            if !f.text("not_compared").is_empty() {
                s.push_str(&format!(
                    "; not compared (measured beside other work that took too large a share for their difference to be the settings'): {}",
                    f.text("not_compared")
                ));
            }
            s.push_str(match f.text("fua") {
                "no" => ". The device has no FUA: O_DSYNC or O_DIRECT log writes still end in a cache FLUSH, so FUA cannot help here",
                "yes" => ". The device accepts FUA: a log opened O_DSYNC can make a commit durable with one FUA write instead of a write and a FLUSH",
                _ => ". Whether the device accepts FUA is unknown",
            });
            if f.text("whose") == "device" {
                s.push_str(" (the FLUSH counts are the whole device's: the server was not traced)");
            }
            s
        }
        "wal-sync-method" => format!(
            "wal_sync_method compared on this device: {}",
            joined_notes(f.notes("compared"), "; ")
        ),
        _ => return None,
    })
}

/// Evidence, and what an experiment set up.
pub(super) fn said(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "container-evidence" => format!(
            "{}: {} {}",
            f.text("points_to"),
            f.text("source"),
            f.text("detail")
        ),
        "postmaster-smaps-swap" => format!(
            "largest smaps_rollup Swap of the postmaster: {}",
            b(f.num("swap_bytes"))
        ),
        "phase-run-queue" => format!(
            "{}: runnable mean {:.1}, max {:.0}; CPU busy {:.0}%",
            f.text("phase"),
            f.num("runnable_mean"),
            f.num("runnable_max"),
            f.num("cpu_busy_pct")
        ),
        "steal-threshold" => format!(
            "steal {:.1}% (threshold {}%)",
            f.num("steal_pct"),
            f.num("threshold_pct")
        ),
        "sweep-knee" => format!(
            "sweep: QD {} → {}: throughput {:+.0}%, latency {:+.0}% (medians){}",
            f.text("level"),
            f.text("next"),
            f.num("throughput_change_pct"),
            f.num("latency_change_pct"),
            if f.text("from").is_empty() || f.text("from") == knee_range(f) {
                String::new()
            } else {
                format!(
                    "; within the repetitions' spread the knee may be anywhere from QD {} to {}",
                    f.text("from"),
                    f.text("to")
                )
            }
        ),
        "data-dir-on" => format!(
            "{} is on {} ({})",
            f.text("dir"),
            f.text("source"),
            f.text("fs_type")
        ),
        "commit-figures" => format!(
            "{} single-row commits with wal_sync_method={}: p50 {}, p99 {}, max {}",
            int(f.num("commits")),
            f.text("configuration"),
            ms2(f.num("p50_s")),
            ms2(f.num("p99_s")),
            ms2(f.num("max_s"))
        ),
        "flushes-per-commit" => format!(
            "{:.2} cache FLUSH requests per commit on {}{}",
            f.num("flushes_per_commit"),
            f.text("disk"),
            whose_flushes(f)
        ),
        "loop-figures" => format!(
            "{} {}: inserts median {}, {} FLUSH per commit{}",
            f.text("scenario"),
            f.text("configuration"),
            if f.has("insert_p50_s") { ms2(f.num("insert_p50_s")) } else { "-".into() },
            if f.has("flushes_per_commit") {
                format!("{:.2}", f.num("flushes_per_commit"))
            } else {
                "-".into()
            },
            whose_flushes(f)
        ),
        "loops-setting" => format!(
            "wal_sync_method={}, set by plumb on its private instance for the insert/CHECKPOINT loops",
            f.text("configuration")
        ),
        "mariadb-durability-settings" => "each configuration set by plumb at a restart of its private MariaDB, and read back".into(),
        "maria-config-figures" => {
            let mut s = format!("{}: single-row commits p50 {}", f.text("configuration"), if f.has("p50_s") { ms2(f.num("p50_s")) } else { "-".into() });
            if f.has("flushes_per_commit") {
                s.push_str(&format!(
                    ", {:.2} FLUSH and {:.2} FUA a commit (the server's own)",
                    f.num("flushes_per_commit"),
                    f.num("fua_per_commit")
                ));
            } else if f.has("device_flushes_per_commit") {
                s.push_str(&format!(
                    ", {:.2} FLUSH a commit (the whole device's)",
                    f.num("device_flushes_per_commit")
                ));
            }
            if f.has("syncs_per_commit") {
                s.push_str(&format!(", {:.2} fsync/fdatasync calls a commit", f.num("syncs_per_commit")));
            }
            s
        }
        "loops-settings" => "each wal_sync_method set by plumb on its private instance for the insert/CHECKPOINT loops".into(),
        "experiment-standby" => format!(
            "{} {} streaming standby of the instance, on the same disk ({}); pgbench and single-row commits without it, then beside it",
            if f.text("standby").starts_with('a') { "an" } else { "a" },
            f.text("standby"),
            or_lab_disk(f.text("disk"))
        ),
        "experiment-standby-throttled" => format!(
            "the {} standby's writes to {} ({}) limited to {} (a cgroup of its own), the primary's not; single-row commits only (beside a synchronous standby, pgbench would wait for the throttled standby to write its whole backlog)",
            f.text("standby"),
            f.text("disk"),
            f.text("device"),
            f.text("rate")
        ),
        "experiment-pressure" => format!(
            "server's memory cgroup limited to {}; plumb mem pressure holds {} in it; swap on {} ({})",
            b(f.num("limit_bytes")),
            b(f.num("held_bytes")),
            f.text("swap_device"),
            b(f.num("swap_bytes"))
        ),
        "experiment-throttle" => format!(
            "the server's writes to {} ({}) limited to {} (cgroup io/blkio throttle)",
            f.text("disk"),
            f.text("device"),
            f.text("rate")
        ),
        _ => return None,
    })
}

/// The notes of the lab's experiments and loops.
pub(super) fn note(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "standby-commit-cancelled" => format!(
            "{} commit(s) still waited for the standby {} s after the loop's time was up and were cancelled (committed on the primary, not confirmed by the standby); their times are lower bounds",
            int(f.num("cancelled")),
            int(f.num("overtime_s"))
        ),
        "standby-commit-wait" => format!(
            "a commit took {} (median) where the local flush alone took {}: {} of each commit was the wait for the {} standby",
            ms2(f.num("commit_p50_s")),
            ms2(f.num("local_p50_s")),
            ms2(f.num("standby_wait_s")),
            f.text("standby")
        ),
        "standby-commit-no-wait" => format!(
            "a commit took {} (median) and the local flush alone {}: no wait for the {} standby beyond the loops' spread",
            ms2(f.num("commit_p50_s")),
            ms2(f.num("local_p50_s")),
            f.text("standby")
        ),
        "standby-commit-follows-standby" => format!(
            "with the {} standby's writes throttled to {}, a commit on the primary took {} (median) instead of {}: the primary's commits follow the standby's disk",
            f.text("standby"),
            f.text("rate"),
            ms2(f.num("after_p50_s")),
            ms2(f.num("before_p50_s"))
        ),
        "standby-commit-unaffected" => format!(
            "with the {} standby's writes throttled to {}, a commit on the primary took {} (median), {} before: not slower beyond the loops' spread",
            f.text("standby"),
            f.text("rate"),
            ms2(f.num("after_p50_s")),
            ms2(f.num("before_p50_s"))
        ),
        "standby-commit-not-measured" => "too few commits to compare".into(),
        "pgbench-compared" | "pgbench-not-distinguishable" => {
            let change = if f.has("tps_change_pct") {
                format!(" ({:+.0}%)", f.num("tps_change_pct"))
            } else {
                String::new()
            };
            let mut s = format!(
                "tps {:.0} → {:.0}{change}",
                f.num("baseline_tps"),
                f.num("tps")
            );
            if f.has("p99_s") {
                s.push_str(&format!(
                    "; p99 latency {} → {}",
                    ms2(f.num("baseline_p99_s")),
                    ms2(f.num("p99_s"))
                ));
            }
            if code == "pgbench-not-distinguishable" {
                s.push_str(": not distinguishable on this host (the runs' per-second tps overlap between their 10th and 90th percentiles)");
            }
            s
        }
        "swap-hides-shared-memory" if f.has("shared_buffers_bytes") => format!(
            "PostgreSQL believes shared_buffers = {} is its cache; at the end of the run {} of the server's memory was in swap (smaps_rollup of the postmaster, which maps all of shared memory), while VmSwap said {} (it counts private memory only)",
            b(f.num("shared_buffers_bytes")),
            b(f.num("smaps_swap_bytes")),
            b(f.num("vm_swap_bytes"))
        ),
        "server-swap" => format!(
            "the server had {} in swap by smaps_rollup and {} by VmSwap (its buffer pool is private memory, which both count)",
            if f.has("smaps_swap_bytes") { b(f.num("smaps_swap_bytes")) } else { "-".into() },
            if f.has("vm_swap_bytes") { b(f.num("vm_swap_bytes")) } else { "-".into() }
        ),
        "maria-not-durable" => {
            let why = match f.text("why") {
                "redo-not-flushed" => "the redo log is written at commit and flushed about once a second",
                "binlog-not-flushed" => "the binary log is not flushed at commit: a crash can lose what replicas and point-in-time recovery need",
                _ => "its commits did not each ask for a FLUSH or FUA write",
            };
            if f.has("requests_per_commit") {
                format!(
                    "{} ({why}; {:.2} FLUSH or FUA a commit)",
                    f.text("configuration"),
                    f.num("requests_per_commit")
                )
            } else {
                format!("{} ({why})", f.text("configuration"))
            }
        }
        "loops-faster" => format!(
            "{}: {:.2}x faster with {} ({} per iteration against {} with {}; {})",
            f.text("what"),
            f.num("ratio"),
            f.text("best"),
            ms2(f.num("best_p50_s")),
            ms2(f.num("worst_p50_s")),
            f.text("worst"),
            loops_rule(f)
        ),
        "loops-not-distinguishable" => format!(
            "{}: not distinguishable on this host ({} {}, {} {} per iteration; {})",
            f.text("what"),
            f.text("best"),
            ms2(f.num("best_p50_s")),
            f.text("worst"),
            ms2(f.num("worst_p50_s")),
            loops_rule(f)
        ),
        "loops-disturbed" => format!(
            "{}: not compared: the loops ran beside other work ({}{}), a share too large against the difference ({} {}, {} {} per iteration) for either to be the configuration's",
            f.text("what"),
            if f.has("neighbour_pid") {
                format!("{} (PID {})", f.text("neighbour"), int(f.num("neighbour_pid")))
            } else {
                "I/O no process accounts for".to_string()
            },
            if f.has("share_pct") {
                format!(", {:.0}% of the window", f.num("share_pct"))
            } else {
                String::new()
            },
            f.text("best"),
            ms2(f.num("best_p50_s")),
            f.text("worst"),
            ms2(f.num("worst_p50_s"))
        ),
        "loops-too-few" => format!(
            "{}: {} iterations a side are too few for the test ever to reach p < 0.05 ({} {}, {} {} per iteration): run the full lab",
            f.text("what"),
            int(f.num("iterations")),
            f.text("best"),
            ms2(f.num("best_p50_s")),
            f.text("worst"),
            ms2(f.num("worst_p50_s"))
        ),
        "configuration-flushes" => format!(
            "{} {:.2}",
            f.text("configuration"),
            f.num("flushes_per_commit")
        ),
        "flushes-same" => {
            let why = match f.text("why") {
                "no-fua-direct" => ": the device has no FUA, so even the O_DIRECT WAL writes of open_datasync under wal_level = minimal are followed by a cache FLUSH, as fdatasync's are; only a device with FUA lets them go as FUA writes without one",
                "no-fua" => ": the device has no FUA, so every durable WAL write ends in a cache FLUSH",
                "fua-direct" => ": the device has FUA, yet the O_DIRECT WAL writes still cost a FLUSH each (the kernel or the file system chose a FLUSH; look at plumb io durability's direct-dsync row)",
                _ => "",
            };
            format!(
                "single-row commits cost the same cache FLUSHes per commit under every configuration ({}{}){why}",
                joined_notes(f.notes("each"), ", "),
                whose_flushes(f)
            )
        }
        "flushes-differ" => format!(
            "cache FLUSHes per single-row commit differ by configuration ({}{}): the fewer, the closer that configuration comes to the FUA path",
            joined_notes(f.notes("each"), ", "),
            whose_flushes(f)
        ),
        _ => return None,
    })
}

/// Whose FLUSHes a count is: the committing backend's own (plumb's block trace), or the whole
/// device's (/proc/diskstats); nothing when the facts do not say.
fn whose_flushes(f: &Facts) -> &'static str {
    match f.text("whose") {
        "backend" => "; the committing backend's own, from plumb's block trace",
        "device" => "; the whole device's, from /proc/diskstats: a neighbour's FLUSHes count too (as root the lab traces the backend's own)",
        _ => "",
    }
}

/// The lab's disk by name, or "the lab's disk" when it was not found.
fn or_lab_disk(d: &str) -> &str {
    if d.is_empty() {
        "the lab's disk"
    } else {
        d
    }
}

/// The knee's upper end: where latency outgrows throughput in every reading the repetitions
/// allow (the knee itself in reports written before the range was kept).
fn knee_range(f: &Facts) -> &str {
    match f.text("to") {
        "" => f.text("level"),
        to => to,
    }
}

/// "at queue depth 16", or "between queue depth 4 and 16" where the repetitions allow both.
fn knee_at(f: &Facts) -> String {
    match (f.text("from"), knee_range(f)) {
        (from, to) if from.is_empty() || from == to => format!("at queue depth {to}"),
        (from, to) => format!("between queue depth {from} and {to}"),
    }
}

/// How a loops comparison was judged: `plumb compare`'s rule with its p and the change's
/// interval, or (reports without the iterations) the ranges of the iterations.
fn loops_rule(f: &Facts) -> String {
    if f.has("p") {
        format!(
            "by plumb compare's rule: Mann-Whitney p {} over the iterations, the slower one {:+.0}% to {:+.0}% (95%), counted beyond {:.0}%, the floor for one run a side",
            if f.num("p") < 0.001 {
                "< 0.001".to_string()
            } else {
                format!("{:.3}", f.num("p"))
            },
            f.num("change_low_pct"),
            f.num("change_high_pct"),
            f.num("floor_pct")
        )
    } else {
        "every iteration faster and by 10% or more".into()
    }
}
