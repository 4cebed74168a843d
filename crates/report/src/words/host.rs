//! The host's notes: `plumb os`, `plumb mem`, `plumb cpu`.

use super::{b, int, who};
use plumb_analyze::said::Facts;

pub(super) fn note(code: &str, f: &Facts) -> Option<String> {
    os(code, f)
        .or_else(|| cpu(code, f))
        .or_else(|| mem(code, f))
}

fn os(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "cpu-steal" if f.text("window") == "since boot" => format!(
            "CPU steal is {:.1}% of all CPU time since boot: the hypervisor gives this VM's CPUs to others; latency-sensitive work will stall",
            f.num("steal_pct")
        ),
        "cpu-steal" => format!(
            "steal {:.0}%: the hypervisor took the CPUs for others",
            f.num("steal_pct")
        ),
        "runnable-above-cpus" => {
            let (r, n) = (f.num("runnable"), f.num("cpus"));
            format!(
                "{} tasks are runnable right now on {} CPUs: {} wait for a CPU (what runnable_tasks_count shows per scheduler in SQL Server)",
                int(r),
                int(n),
                int(r - n)
            )
        }
        "no-swap" => "no swap is configured: memory pressure ends in reclaim of page cache and then the OOM killer, not in swapping".into(),
        "swap-in-use" => format!(
            "{} MiB is in swap: a database cache that was swapped out is slow to read even though the engine believes it is in memory",
            int((f.num("swap_used_bytes") / (1024.0 * 1024.0)).floor())
        ),
        "cgroup-limit-above-ram" => format!(
            "{}: the cgroup memory limit ({}) is at or above host RAM, so it limits nothing",
            who(f),
            b(f.num("limit_bytes"))
        ),
        "container-without-memory-limit" => format!(
            "{} runs in a container with no memory limit below host RAM: an engine sizes its caches from host RAM, and the node can evict or OOM-kill it ({})",
            who(f),
            f.list("seen").join("; ")
        ),
        "container-marker-without-runtime" => format!(
            "{}: a container marker is present ({}) but its cgroup path names no runtime; no memory limit below host RAM applies",
            who(f),
            f.list("seen").join("; ")
        ),
        "write-barriers-off" => format!(
            "{} is mounted with write barriers off: a power loss can lose writes the database believed durable",
            f.text("mount_point")
        ),
        "pmem-dax" => format!(
            "{}: {}",
            f.text("mount_point"),
            super::measure::pmem_line(Some(f.text("dax")))
        ),
        "pmem-block" => format!("{}: {}", f.text("mount_point"), super::measure::pmem_line(None)),
        "no-local-block-device" => format!(
            "{} ({}) has no local block device: device cache and FUA facts do not apply",
            f.text("mount_point"),
            f.text("fs_type")
        ),
        _ => return None,
    })
}

fn cpu(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "cpu-pressure" => format!(
            "some task waited for a CPU {:.0}% of the time (PSI cpu)",
            f.num("psi_cpu_some_pct")
        ),
        "no-schedstat" => "per-CPU run-queue delay unknown: /proc/schedstat is missing (kernel without CONFIG_SCHEDSTATS); PSI cpu and per-thread delay still tell".into(),
        "thread-waiting-for-cpu" => format!(
            "thread {} ({}) was runnable but waiting for a CPU {:.0}% of the time",
            int(f.num("tid")),
            f.text("comm"),
            f.num("runnable_waiting_pct")
        ),
        _ => return None,
    })
}

/// "a cgroup limit of 2.00 GiB", or "no cgroup memory limit".
fn limit_words(f: &Facts) -> String {
    if f.has("cgroup_limit_bytes") {
        format!("a cgroup limit of {}", b(f.num("cgroup_limit_bytes")))
    } else {
        "no cgroup memory limit".into()
    }
}

fn mem(code: &str, f: &Facts) -> Option<String> {
    let mb = |k: &str| int(f.num(k));
    Some(match code {
        "mssql-memory-limit-set" => format!(
            "memorylimitmb / MSSQL_MEMORY_LIMIT_MB is {} MB: SQL Server uses {} MB, whatever the host or cgroup offers",
            mb("memory_limit_mb"),
            mb("used_mb")
        ),
        "mssql-memory-from-host" => format!(
            "no memorylimitmb: SQL Server takes 80% of the lesser of host RAM ({}) and the cgroup limit ({}): it will log \"Detected {} MB of RAM\"",
            b(f.num("host_memory_bytes")),
            if f.has("cgroup_limit_bytes") { b(f.num("cgroup_limit_bytes")) } else { "none".into() },
            mb("detected_mb")
        ),
        "mssql-old-build-ignores-cgroup-v2" => format!(
            "cgroup v2: builds before SQL Server 2022 CU20 (and 2017/2019) ignore the limit here and assume {} MB, then get OOM-killed; set MSSQL_MEMORY_LIMIT_MB or use 2022 CU20+ / 2025",
            mb("old_build_mb")
        ),
        "mssql-limit-no-headroom" => format!(
            "memorylimitmb {} MB leaves no headroom under {}: the OS and SQLPAL need 10-20%, so the container will be OOM-killed; use about {} MB",
            mb("memory_limit_mb"),
            limit_words(f),
            mb("advised_mb")
        ),
        "mssql-limit-above-90-pct" => format!(
            "memorylimitmb {} MB is above 90% of {}: Microsoft advises 10-20% headroom; about {} MB",
            mb("memory_limit_mb"),
            limit_words(f),
            mb("advised_mb")
        ),
        "mssql-no-container-limit" => format!(
            "{}: in a container SQL Server sizes itself from host RAM ({} MB), which the node's allocatable memory may not cover",
            limit_words(f),
            mb("detected_mb")
        ),
        "mssql-max-server-memory" => {
            "set max server memory below memorylimitmb: it caps only the buffer pool".into()
        }
        "postgres-memory-model" => format!(
            "PostgreSQL does not size itself from RAM: shared_buffers is {} (shared memory, charged to the cgroup), and each of up to {} connections may use work_mem {} per sort or hash: about {} at most, plus the page cache, which is charged to the cgroup too",
            b(f.num("shared_buffers_bytes")),
            int(f.num("max_connections")),
            b(f.num("work_mem_bytes")),
            b(f.num("peak_bytes"))
        ),
        "shared-buffers-above-memory" => format!(
            "shared_buffers {} is at or above the memory it can have ({}): it cannot stay resident",
            b(f.num("shared_buffers_bytes")),
            b(f.num("visible_bytes"))
        ),
        "shared-buffers-above-40-pct" => format!(
            "shared_buffers {} is over 40% of {} ({}): the PostgreSQL docs find little gain past 40%, and the page cache needs room under the same limit; about {}",
            b(f.num("shared_buffers_bytes")),
            if f.has("cgroup_limit_bytes") { "the cgroup limit" } else { "host RAM" },
            b(f.num("visible_bytes")),
            b(f.num("advised_bytes"))
        ),
        "postgres-peak-above-memory" => format!(
            "shared_buffers + max_connections x work_mem + maintenance_work_mem = {} exceeds {}: a busy moment can hit the OOM killer",
            b(f.num("peak_bytes")),
            b(f.num("visible_bytes"))
        ),
        "mariadb-memory-model" => format!(
            "MariaDB does not size itself from RAM: innodb_buffer_pool_size is {} (private memory); MariaDB advises 60-70% of the memory available to it ({} here: about {})",
            b(f.num("buffer_pool_bytes")),
            b(f.num("visible_bytes")),
            b(f.num("advised_bytes"))
        ),
        "buffer-pool-above-memory" => format!(
            "the buffer pool {} is at or above the memory it can have ({}): it will swap or be OOM-killed",
            b(f.num("buffer_pool_bytes")),
            b(f.num("visible_bytes"))
        ),
        "buffer-pool-above-75-pct" => format!(
            "the buffer pool {} is over 75% of {}: leave room for connections and the OS",
            b(f.num("buffer_pool_bytes")),
            b(f.num("visible_bytes"))
        ),
        "innodb-no-shrink-here" => "InnoDB shrinks its pool on memory pressure only on a pure cgroup-v2 host (and only down to innodb_buffer_pool_size_auto_min); not here".into(),
        "engine-process-not-found" => "--engine: no process of that engine was found on this host to set its figure beside (add --pid)".into(),
        "engine-no-cache-figure" if f.text("engine") == "PostgreSQL" => "--engine: the server has no pg_buffercache (CREATE EXTENSION pg_buffercache); its configured shared_buffers is shown".into(),
        "engine-no-cache-figure" => "--engine: the server gave no cache figure; its configured size is shown".into(),
        "engine-unreadable" => format!("--engine: {}", f.text("error")),
        "engine-cache-belief" => {
            let (believed, swapped) = (f.num("believed_bytes"), f.num("swapped_bytes"));
            format!(
                "{} (PID {}) believes {} are cached ({}); {} are resident; {} are in swap{}{}",
                f.text("engine"),
                int(f.num("pid")),
                b(believed),
                f.said("source")
                    .map(super::said)
                    .unwrap_or_else(|| "its settings".into()),
                b(f.num("resident_bytes")),
                b(swapped),
                if f.has("untouched_bytes") {
                    format!("; {} not yet touched", b(f.num("untouched_bytes")))
                } else {
                    String::new()
                },
                if swapped > (believed / 20.0).floor() {
                    ": reads of that cache now wait for swap-in, and the engine's wait statistics will not say why"
                } else {
                    ""
                }
            )
        }
        "engine-statement" => format!(
            "{}: {}",
            f.text("engine"),
            mem(f.text("statement"), f).unwrap_or_else(|| f.text("statement").to_string())
        ),
        "swap-hides-shared-memory" => format!(
            "{}: {} in swap by smaps_rollup, but VmSwap shows {}: the difference is swapped shared memory (a shared buffer pool), which VmSwap never counts",
            who(f),
            b(f.num("smaps_swap_bytes")),
            b(f.num("vm_swap_bytes"))
        ),
        "cgroup-oom-kills" => format!(
            "{}: its memory cgroup has had {} OOM kill(s)",
            who(f),
            int(f.num("oom_kills"))
        ),
        "cgroup-memory-pressure" => format!(
            "PID {}: its cgroup's tasks were all stalled on memory {:.0}% of the last 10 s (PSI full)",
            int(f.num("pid")),
            f.num("psi_full_avg10_pct")
        ),
        "host-swap-in" => format!(
            "the host is reading {}/s back from swap",
            b(f.num("swap_in_bytes_per_s"))
        ),
        "host-memory-pressure" => format!(
            "host memory pressure: some task stalled on memory {:.0}% of the last 10 s",
            f.num("psi_some_avg10_pct")
        ),
        _ => return None,
    })
}

/// Where an engine's belief about its cache comes from.
pub(super) fn said(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "belief-shared-segment" => format!(
            "its shared memory segment ({}, holding shared_buffers = {}){}",
            f.text("segment"),
            b(f.num("shared_buffers_bytes")),
            if f.text("resident") == "lower bound" {
                "; resident is a lower bound: counting it exactly needs root"
            } else {
                ""
            }
        ),
        "belief-configured" => format!("its configured {}", f.text("cache")),
        "belief-settings" => "its settings".into(),
        "belief-innodb-data" => {
            "the server's own Innodb_buffer_pool_bytes_data (buffer pool pages holding data)".into()
        }
        "belief-mssql-database-cache" => {
            "the server's own Memory Manager: Database Cache Memory counter".into()
        }
        "belief-pg-buffercache" => "pg_buffercache: shared buffers holding a page".into(),
        _ => return None,
    })
}
