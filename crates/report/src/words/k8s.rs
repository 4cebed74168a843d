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

pub(super) fn said(code: &str, f: &Facts) -> Option<String> {
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
