//! `plumb k8s advise` and `plumb k8s manifest` as the user asked for them (the flags' text),
//! checked and turned into the inputs and plans [`crate::k8s`] works with. A refusal names the
//! flag and says what it takes.

use crate::k8s::{
    self, parse_quantity, AdviseInputs, ManifestPlan, PlumbPlan, Preset, WorkloadKind,
};
use plumb_sys::smaps::EngineKind;

/// A value refused, with the flag it came from and what would be taken instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

type Result<T> = std::result::Result<T, Refused>;

macro_rules! refuse {
    ($($t:tt)*) => { return Err(Refused(format!($($t)*))) };
}

fn q(flag: &str, v: &str) -> Result<u64> {
    parse_quantity(v).map_err(|e| Refused(format!("{flag}: {e}")))
}

fn engine(flag: &str, v: &str) -> Result<EngineKind> {
    EngineKind::parse(v)
        .ok_or_else(|| Refused(format!("{flag} {v}: use mssql, postgres or mariadb")))
}

/// A DNS-1123 subdomain, which Secret and StorageClass names are.
fn dns_name(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 253
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn check_image(i: &str) -> Result<()> {
    let ok = !i.is_empty()
        && i.len() <= 512
        && i.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
    if !ok {
        refuse!("--image {i:?}: not an image reference (registry/name:tag or name@sha256:digest)");
    }
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        || name.len() > 52
    {
        refuse!("--name {name}: use lower-case letters, digits and '-' (at most 52 characters)");
    }
    Ok(())
}

/// `plumb k8s advise`'s flags.
#[derive(Debug, Default)]
pub struct AdviseSpec<'a> {
    pub node_memory: Option<&'a str>,
    pub capacity: Option<&'a str>,
    pub preset: Option<&'a str>,
    pub max_pods: u32,
    pub kube_reserved: Option<&'a str>,
    pub system_reserved: Option<&'a str>,
    pub eviction_hard: Option<&'a str>,
    pub other_requests: &'a str,
    pub limit: Option<&'a str>,
    pub kind: Option<&'a str>,
    pub max_connections: u64,
}

/// The node's capacity, its reservations (a preset's, or the ones given with the kubelet's
/// defaults for the rest), the other pods' requests, the limit and the engine.
pub fn advise_inputs(a: &AdviseSpec) -> Result<AdviseInputs> {
    let node = a.node_memory.map(|v| q("--node-memory", v)).transpose()?;
    let cap = a.capacity.map(|v| q("--capacity", v)).transpose()?;
    let (node, cap) = match (node, cap) {
        (Some(n), Some(c)) => (n, c),
        (Some(n), None) => (n, n),
        (None, Some(c)) => (c, c),
        (None, None) => {
            refuse!("give the node's memory: --node-memory 7Gi and/or --capacity 7113152Ki")
        }
    };
    if cap == 0 || node == 0 {
        refuse!("node memory must be more than 0");
    }
    let preset = match a.preset {
        Some(p) => Preset::parse(p).ok_or_else(|| {
            Refused(format!(
                "--preset {p}: use kubeadm, aks, aks-pre-1.29, gke or eks"
            ))
        })?,
        None => Preset::Kubeadm,
    };
    let mut r = k8s::reservations(preset, node, a.max_pods);
    let given =
        a.kube_reserved.is_some() || a.system_reserved.is_some() || a.eviction_hard.is_some();
    if given && a.preset.is_none() {
        // Only what the user gave, with the kubelet's defaults for the rest.
        r.explain.clear();
    }
    if let Some(v) = a.kube_reserved {
        r.kube_reserved_bytes = q("--kube-reserved", v)?;
        r.explain.push(given_reservation("kube-reserved", v));
    }
    if let Some(v) = a.system_reserved {
        r.system_reserved_bytes = q("--system-reserved", v)?;
        r.explain.push(given_reservation("system-reserved", v));
    }
    if let Some(v) = a.eviction_hard {
        r.eviction_hard_bytes = q("--eviction-hard", v)?;
        r.explain.push(given_reservation("eviction-hard", v));
    } else if given && a.preset.is_none() {
        r.explain
            .push(crate::said::Said::new("reserve-eviction-default"));
    }
    let reserved = r.kube_reserved_bytes + r.system_reserved_bytes + r.eviction_hard_bytes;
    if reserved >= cap {
        refuse!(
            "reservations ({} bytes) leave nothing of the capacity ({} bytes)",
            reserved,
            cap
        );
    }
    let other = q("--other-requests", a.other_requests)?;
    let allocatable = cap - reserved;
    if other.saturating_add(1 << 20) > allocatable {
        refuse!(
            "--other-requests {}: the other pods' requests take all of the node's allocatable memory ({}): no database pod fits on this node",
            a.other_requests,
            k8s::quantity(allocatable)
        );
    }
    let limit = a.limit.map(|v| q("--limit", v)).transpose()?;
    if limit == Some(0) {
        refuse!("--limit must be more than 0");
    }
    let eng = a.kind.map(|e| engine("--kind", e)).transpose()?;
    Ok(AdviseInputs {
        capacity: cap,
        node_memory: node,
        reservations: r,
        other_requests: other,
        limit,
        engine: eng,
        max_connections: a.max_connections.max(1),
    })
}

/// `plumb k8s manifest`'s flags.
#[derive(Debug, Default)]
pub struct ManifestSpec<'a> {
    pub kind: Option<&'a str>,
    pub memory: Option<&'a str>,
    pub plumb: bool,
    pub port: Option<u16>,
    pub interval: Option<&'a str>,
    pub engine_server: bool,
    pub cpu: Option<&'a str>,
    pub workload: &'a str,
    pub name: Option<&'a str>,
    pub image: Option<&'a str>,
    pub storage_class: Option<&'a str>,
    pub system_size: &'a str,
    pub data_size: &'a str,
    pub log_size: &'a str,
    pub secret: Option<&'a str>,
    pub max_connections: u64,
}

/// A database's workload, checked (`--plumb` is [`plumb_plan`]'s).
pub fn manifest_plan(a: &ManifestSpec) -> Result<ManifestPlan> {
    for (flag, given) in [
        ("--port", a.port.is_some()),
        ("--interval", a.interval.is_some()),
        ("--engine-server", a.engine_server),
    ] {
        if given {
            refuse!("{flag} is for plumb's own DaemonSet: add --plumb (or leave {flag} out)");
        }
    }
    let (Some(engine_arg), Some(memory)) = (a.kind, a.memory) else {
        refuse!("give --kind and --memory (or --plumb)");
    };
    let e = engine("--kind", engine_arg)?;
    let mem = q("--memory", memory)?;
    if mem < 512 << 20 {
        refuse!("--memory {memory}: a database pod needs at least 512Mi");
    }
    if e == EngineKind::Mssql && mem < 2 << 30 {
        refuse!(
            "--memory {memory}: SQL Server refuses to start with less than 2000 MB; give it at least 2Gi"
        );
    }
    if let Some(c) = a.cpu {
        k8s::parse_cpu(c).map_err(|e| Refused(format!("--cpu: {e}")))?;
    }
    if let Some(i) = a.image {
        check_image(i)?;
    }
    for (flag, v) in [("--secret", a.secret), ("--storage-class", a.storage_class)] {
        if let Some(v) = v {
            if !dns_name(v) {
                refuse!("--{} {v:?}: a Kubernetes name is lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (at most 253)", &flag[2..]);
            }
        }
    }
    let kind = match a.workload {
        "deployment" | "Deployment" => WorkloadKind::Deployment,
        "statefulset" | "StatefulSet" | "sts" => WorkloadKind::StatefulSet,
        k => refuse!("--workload {k}: use deployment or statefulset"),
    };
    for (f, v) in [
        ("--system-size", a.system_size),
        ("--data-size", a.data_size),
        ("--log-size", a.log_size),
    ] {
        q(f, v)?;
    }
    let name = a.name.map(str::to_string).unwrap_or_else(|| match e {
        EngineKind::Mssql => "mssql".into(),
        EngineKind::Postgres => "postgres".into(),
        EngineKind::Mariadb => "mariadb".into(),
    });
    check_name(&name)?;
    Ok(ManifestPlan {
        engine: e,
        kind,
        image: a
            .image
            .map(str::to_string)
            .unwrap_or_else(|| k8s::default_image(e).to_string()),
        memory_limit_bytes: mem,
        cpu: a.cpu.map(str::to_string),
        storage_class: a.storage_class.map(str::to_string),
        system_size: a.system_size.to_string(),
        data_size: a.data_size.to_string(),
        log_size: a.log_size.to_string(),
        secret_name: a
            .secret
            .map(str::to_string)
            .unwrap_or_else(|| format!("{name}-secret")),
        max_connections: a.max_connections.max(1),
        settings: k8s::engine_settings(e, mem, a.max_connections.max(1)),
        name,
    })
}

/// plumb's own DaemonSet (`--plumb`), checked; `version` names the default image.
pub fn plumb_plan(a: &ManifestSpec, version: &str) -> Result<PlumbPlan> {
    let mem = q("--memory", a.memory.unwrap_or("128Mi"))?;
    if mem < 32 << 20 {
        refuse!(
            "--memory {}: plumb needs at least 32Mi",
            a.memory.unwrap_or_default()
        );
    }
    let port = a.port.unwrap_or(9494);
    if port == 0 {
        refuse!("--port 0: give the port Prometheus scrapes, e.g. 9494");
    }
    let interval = a.interval.unwrap_or("5s").to_string();
    let d = plumb_sys::units::parse_duration(&interval)
        .map_err(|e| Refused(format!("--interval: {e}")))?;
    if d < std::time::Duration::from_millis(100) {
        refuse!("--interval {interval}: use 100ms or more");
    }
    let image = a
        .image
        .map(str::to_string)
        .unwrap_or_else(|| format!("plumb:{version}"));
    check_image(&image)?;
    let name = a.name.unwrap_or("plumb").to_string();
    check_name(&name)?;
    Ok(PlumbPlan {
        name,
        image,
        port,
        memory_limit_bytes: mem,
        interval,
        engine_server: a.engine_server,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_flag() {
        let base = ManifestSpec {
            kind: Some("postgres"),
            memory: Some("4Gi"),
            workload: "deployment",
            system_size: "10Gi",
            data_size: "50Gi",
            log_size: "20Gi",
            max_connections: 100,
            ..Default::default()
        };
        assert_eq!(manifest_plan(&base).unwrap().name, "postgres");
        let e = manifest_plan(&ManifestSpec {
            memory: Some("100Mi"),
            ..base
        })
        .unwrap_err();
        assert!(e.0.starts_with("--memory 100Mi:"), "{e}");
        let e = plumb_plan(
            &ManifestSpec {
                interval: Some("10ms"),
                ..Default::default()
            },
            "1",
        )
        .unwrap_err();
        assert_eq!(e.0, "--interval 10ms: use 100ms or more");
        let e = advise_inputs(&AdviseSpec {
            other_requests: "0",
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.0.contains("--node-memory"), "{e}");
    }
}

/// A reservation the user gave (`--kube-reserved 1Gi`), as the explanation says it.
fn given_reservation(what: &'static str, value: &str) -> crate::said::Said {
    use crate::said::WithFacts;
    crate::said::Said::new("reserve-given")
        .text("what", what)
        .text("value", value)
}
