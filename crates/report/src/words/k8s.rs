//! What the Kubernetes manifest lint says, per statement.

use super::int;
use plumb_analyze::k8s::quantity;
use plumb_analyze::said::Facts;

/// A Kubernetes quantity (`2Gi`, `1536Mi`) from a number of bytes.
fn q(f: &Facts, k: &str) -> String {
    let v = f.num(k);
    if v.is_finite() && v >= 0.0 {
        quantity(v as u64)
    } else {
        "unknown".into()
    }
}

/// IEC bytes (`28.5 GiB`) from a number of bytes.
fn iec(f: &Facts, k: &str) -> String {
    super::b(f.num(k))
}

/// What `k8s advise` worked out: the node's reservations, its arithmetic, the engine's settings
/// and what happens without a limit.
fn advice(code: &str, f: &Facts) -> Option<String> {
    Some(match code {
        "reserve-kubeadm" => "kubeadm / kubelet defaults: no kube-reserved or system-reserved, eviction-hard memory.available<100Mi".into(),
        "reserve-aks" => format!(
            "AKS 1.29+: kube-reserved = min(20 MiB x {} pods + 50 MiB = {}, 25% of {} = {}) = {}; eviction-hard 100Mi",
            int(f.num("pods")),
            iec(f, "per_pods_bytes"),
            iec(f, "node_bytes"),
            iec(f, "quarter_bytes"),
            iec(f, "kube_reserved_bytes")
        ),
        "reserve-band" => {
            const LABELS: [&str; 5] = [
                "25% of the first 4 GiB",
                "20% of the next 4 GiB",
                "10% of the next 8 GiB",
                "6% of the next 112 GiB",
                "2% above 128 GiB",
            ];
            let i = f.num("band");
            let label = if i.is_finite() { LABELS.get(i as usize).copied().unwrap_or("") } else { "" };
            format!("{label} ({} of {})", iec(f, "reserved_bytes"), iec(f, "take_bytes"))
        }
        "reserve-regressive" => format!(
            "{}: kube-reserved = {} = {} (whole MiB); eviction-hard {}",
            f.text("provider"),
            super::joined_notes(f.notes("bands"), " + "),
            q(f, "kube_reserved_bytes"),
            q(f, "eviction_hard_bytes")
        ),
        "reserve-eks" => format!(
            "EKS AMI: kube-reserved = 255 MiB + 11 MiB x {} pods = {}; eviction-hard 100Mi",
            int(f.num("pods")),
            q(f, "kube_reserved_bytes")
        ),
        "reserve-given" if f.text("what") == "eviction-hard" => format!(
            "eviction-hard memory.available<{} (given)",
            f.text("value")
        ),
        "reserve-given" => format!("{} {} (given)", f.text("what"), f.text("value")),
        "reserve-eviction-default" => {
            "eviction-hard memory.available<100Mi (the kubelet's default)".into()
        }
        "arith-allocatable" => format!(
            "allocatable = capacity {} - kube-reserved {} - system-reserved {} - eviction-hard {} = {} ({})",
            q(f, "capacity_bytes"),
            q(f, "kube_reserved_bytes"),
            q(f, "system_reserved_bytes"),
            q(f, "eviction_hard_bytes"),
            q(f, "allocatable_bytes"),
            iec(f, "allocatable_bytes")
        ),
        "arith-left" => format!(
            "left for the database = allocatable {} - other pods' requests {} = {}",
            q(f, "allocatable_bytes"),
            q(f, "other_requests_bytes"),
            q(f, "available_bytes")
        ),
        "arith-pod" => format!(
            "pod memory request = limit = {} (Guaranteed QoS: evicted last, oom_score_adj -997, no swap under LimitedSwap)",
            q(f, "pod_bytes")
        ),
        "warn-limit-above-left" => format!(
            "the requested limit {} is more than the {} left on this node: the pod will not schedule there (request = limit)",
            q(f, "limit_bytes"),
            q(f, "available_bytes")
        ),
        "without-mssql" => format!(
            "Without a limit SQL Server sees the node: 80% of {} = \"Detected {} MB of RAM\"",
            q(f, "capacity_bytes"),
            int(f.num("detected_mb"))
        ),
        "without-engine" => format!(
            "Without a limit {} keeps its configured caches, but nothing stops its page cache and connections from growing past the node's allocatable memory",
            f.text("engine")
        ),
        "without-eviction-loop" => format!(
            "That is more than the node's allocatable {} ({}): as the engine fills its cache the node crosses eviction-hard, the kubelet reports MemoryPressure and evicts the pod first (BestEffort: usage above its request of 0); the Deployment starts a new pod, the scheduler puts it back on the same node, and the loop repeats (a Deployment piles up Evicted pods: 12 of 13 in one reported case)",
            q(f, "allocatable_bytes"),
            iec(f, "allocatable_bytes")
        ),
        "why-mssql-unset" => format!(
            "what SQL Server takes when MSSQL_MEMORY_LIMIT_MB is not set: it logs \"Detected {} MB of RAM\"",
            int(f.num("detected_mb"))
        ),
        "why-mssql-limit-mb" => format!(
            "the limit {} less {} headroom for the OS and SQLPAL (15%, at least 512 MiB): SQL Server will log \"Detected {} MB of RAM\"",
            q(f, "limit_bytes"),
            iec(f, "headroom_bytes"),
            int(f.num("detected_mb"))
        ),
        "why-max-server-memory" => "90% of memorylimitmb: it caps only the buffer pool, which must leave room for the rest of SQL Server".into(),
        "why-shared-buffers" => "25% of the limit (shared memory, charged to the pod)".into(),
        "why-effective-cache-size" => "50% of the limit: the page cache lives under the same limit".into(),
        "why-work-mem" => format!(
            "(limit - shared_buffers) / ({} connections x 3), at least 4MB",
            int(f.num("connections"))
        ),
        "why-maintenance-work-mem" => "1/16 of the limit, at most 2GB".into(),
        "why-max-connections" => "as given (--max-connections)".into(),
        "why-buffer-pool" => "65% of the limit, in 128 MiB steps (MariaDB advises 60-70% of the memory available)".into(),
        _ => return None,
    })
}

pub(super) fn said(code: &str, f: &Facts) -> Option<String> {
    if let Some(s) = advice(code, f) {
        return Some(s);
    }
    let c = f.text("container");
    Some(match code {
        "lint-bad-quantity" => format!("container {c}: {}", f.text("error")),
        "lint-memory-unit" => {
            let v = f.text("value");
            format!(
                "container {c}: memory {v} is {} bytes, too little for any container: a unit is missing ({v}Gi? {v}Mi?)",
                int(f.num("bytes"))
            )
        }
        "lint-no-memory-limits" => format!(
            "container {c} has no memory request or limit: the pod is BestEffort, evicted first under MemoryPressure{}",
            match f.text("engine") {
                "" => "",
                "SQL Server" => ", and SQL Server sizes itself from the node's RAM (the eviction loop)",
                _ => ", and the database's caches are bounded by nothing but the node",
            }
        ),
        "lint-request-without-limit" => format!(
            "container {c} has a memory request but no limit: it can grow past the request until the node evicts it"
        ),
        "lint-request-not-limit" => format!(
            "container {c} ({}): memory request {} differs from limit {}: Burstable, so it is evicted before Guaranteed pods and may swap under LimitedSwap; set request = limit",
            f.text("engine"),
            q(f, "request_bytes"),
            q(f, "limit_bytes")
        ),
        "lint-limit-above-allocatable" => format!(
            "container {c}: memory limit {} is above the node's allocatable {}",
            q(f, "limit_bytes"),
            q(f, "allocatable_bytes")
        ),
        "lint-privileged" => format!(
            "container {c} is privileged: every capability and every device of the node; add only the capabilities it needs (securityContext.capabilities.add)"
        ),
        "lint-adds-capability" => format!(
            "container {c} adds {}: nearly everything root can do on the node; add only the capabilities it needs",
            f.text("capability")
        ),
        "lint-host-path-writable" => format!(
            "container {c} mounts the node's {} writable; add readOnly: true unless it must write there",
            f.text("path")
        ),
        "lint-plaintext-secret" => format!(
            "container {c}: {} is given as a plain value; use valueFrom.secretKeyRef",
            f.text("variable")
        ),
        "lint-mssql-no-limit-mb" => format!(
            "container {c}: no MSSQL_MEMORY_LIMIT_MB: SQL Server takes 80% of {}; set it below the limit explicitly",
            if f.has("limit_bytes") {
                q(f, "limit_bytes")
            } else {
                "the node's RAM".into()
            }
        ),
        "lint-mssql-limit-mb-no-headroom" => format!(
            "container {c}: MSSQL_MEMORY_LIMIT_MB {} is not below the memory limit {}: no headroom, OOM kills",
            int(f.num("memory_limit_mb")),
            q(f, "limit_bytes")
        ),
        "lint-mssql-limit-mb-above-90-pct" => format!(
            "container {c}: MSSQL_MEMORY_LIMIT_MB {} leaves under 10% of the limit {} for the OS and SQLPAL; Microsoft advises 10-20%",
            int(f.num("memory_limit_mb")),
            q(f, "limit_bytes")
        ),
        "lint-no-shared-buffers" => format!(
            "container {c}: shared_buffers is not set in args (-c shared_buffers=...); the default 128MB ignores the pod's memory"
        ),
        "lint-shared-buffers-above-40-pct" => format!(
            "container {c}: shared_buffers {} is over 40% of the limit {}; the page cache is charged to the same limit",
            f.text("value"),
            q(f, "limit_bytes")
        ),
        "lint-no-buffer-pool-size" => format!(
            "container {c}: innodb_buffer_pool_size is not set in args; the default 128M ignores the pod's memory"
        ),
        "lint-buffer-pool-above-75-pct" => format!(
            "container {c}: innodb_buffer_pool_size {} is over 75% of the limit {}",
            f.text("value"),
            q(f, "limit_bytes")
        ),
        "lint-mssql-one-volume" => format!(
            "container {c}: system, data and log files share one volume; give data and log their own volumes with MSSQL_DATA_DIR and MSSQL_LOG_DIR"
        ),
        "lint-rwo-rolling-update" => format!(
            "strategy {} (the default) with ReadWriteOnce claim {}: the new pod cannot mount the volume while the old one runs, or two database instances share it; use strategy Recreate or a StatefulSet",
            f.text("strategy"),
            f.list("claims").join(", ")
        ),
        "lint-rwo-replicas" => format!(
            "{} replicas share ReadWriteOnce claims: one database, one replica (use a StatefulSet for replicas)",
            int(f.num("replicas"))
        ),
        _ => return None,
    })
}
