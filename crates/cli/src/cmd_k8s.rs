//! `plumb k8s`: node allocatable and database pod sizing, manifest lint, manifest generation.

use crate::GlobalArgs;
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use plumb_analyze::k8s::{self, parse_quantity, Preset, Severity, WorkloadKind};
use plumb_sys::smaps::EngineKind;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct K8sArgs {
    #[command(subcommand)]
    pub cmd: K8sCmd,
}

#[derive(Debug, Subcommand)]
pub enum K8sCmd {
    /// Node allocatable memory from capacity, reservations and eviction threshold (or a
    /// provider preset), the Guaranteed pod size that fits, and the engine settings inside it.
    Advise(AdviseArgs),
    /// Check Kubernetes YAML for database memory and storage mistakes. Exit 1 on errors.
    Lint(LintArgs),
    /// Generate a Deployment or StatefulSet with limits, engine memory settings, a Service, a
    /// Secret reference and volumes for data and log (and system files for SQL Server); or,
    /// with --plumb, a DaemonSet that runs `plumb record --serve` on every node.
    Manifest(ManifestArgs),
}

#[derive(Debug, Args)]
pub struct AdviseArgs {
    /// The node's memory as sold (the VM size); reservation formulas use it. e.g. 7Gi.
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub node_memory: Option<String>,
    /// Memory capacity as the kubelet reports it (kubectl describe node), e.g. 7113152Ki;
    /// default: --node-memory.
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub capacity: Option<String>,
    /// Reservation formulas: kubeadm, aks (1.29+), aks-pre-1.29, gke, eks.
    #[arg(long, value_name = "PRESET")]
    pub preset: Option<String>,
    /// Pods per node (AKS 1.29+ and EKS formulas).
    #[arg(long, value_name = "N", default_value_t = 110)]
    pub max_pods: u32,
    /// kube-reserved memory (overrides the preset).
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub kube_reserved: Option<String>,
    /// system-reserved memory (overrides the preset).
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub system_reserved: Option<String>,
    /// The memory.available hard eviction threshold (overrides the preset), e.g. 500Mi.
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub eviction_hard: Option<String>,
    /// Memory requested by the other pods on the node.
    #[arg(
        long,
        value_name = "QUANTITY",
        default_value = "0",
        allow_hyphen_values = true
    )]
    pub other_requests: String,
    /// The pod limit you have in mind (default: all that is left on the node).
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub limit: Option<String>,
    /// The kind of engine (mssql, postgres or mariadb): settings that fit inside the pod.
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// PostgreSQL max_connections, for work_mem.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_connections: u64,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// YAML files (several documents each is fine).
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Node allocatable memory: flag limits above it.
    #[arg(long, value_name = "QUANTITY", allow_hyphen_values = true)]
    pub allocatable: Option<String>,
}

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// The kind of engine: mssql, postgres or mariadb.
    #[arg(long, value_name = "KIND", required_unless_present = "plumb")]
    pub kind: Option<String>,
    /// The pod's memory request = limit, e.g. 4Gi (with --plumb: default 128Mi).
    #[arg(
        long,
        value_name = "QUANTITY",
        allow_hyphen_values = true,
        required_unless_present = "plumb"
    )]
    pub memory: Option<String>,
    /// A DaemonSet that runs plumb on every node (`plumb record --serve` on the node's IP, for
    /// Prometheus) with only the privileges it needs, instead of a database.
    #[arg(long, conflicts_with_all = ["kind", "workload", "cpu", "storage_class", "secret", "max_connections"])]
    pub plumb: bool,
    /// With --plumb: the port /metrics is served on [default: 9187].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
    /// With --plumb: how often plumb samples the node [default: 5s].
    #[arg(long, value_name = "TIME")]
    pub interval: Option<String>,
    /// With --plumb: also record the database servers' process trees (--engine-server; only
    /// for nodes that run one, e.g. with a nodeSelector).
    #[arg(long)]
    pub engine_server: bool,
    /// CPU request = limit, e.g. 2 or 1500m (omit for no CPU limit).
    #[arg(long, value_name = "CPU", allow_hyphen_values = true)]
    pub cpu: Option<String>,
    /// The kind of workload: deployment or statefulset.
    #[arg(long, value_name = "WORKLOAD", default_value = "deployment")]
    pub workload: String,
    /// Name of the workload, Service and volumes (default: the engine's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Container image (default: a current official image of the engine).
    #[arg(long)]
    pub image: Option<String>,
    /// StorageClass for the volumes (default: the cluster's default class).
    #[arg(long, value_name = "CLASS")]
    pub storage_class: Option<String>,
    /// Size of SQL Server's system volume (/var/opt/mssql).
    #[arg(long, value_name = "QUANTITY", default_value = "10Gi")]
    pub system_size: String,
    /// Size of the data volume.
    #[arg(long, value_name = "QUANTITY", default_value = "50Gi")]
    pub data_size: String,
    /// Size of the log volume (WAL, binlog, transaction log).
    #[arg(long, value_name = "QUANTITY", default_value = "20Gi")]
    pub log_size: String,
    /// The Secret holding the password.
    #[arg(long, value_name = "NAME")]
    pub secret: Option<String>,
    /// PostgreSQL max_connections.
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub max_connections: u64,
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

fn q(flag: &str, v: &str) -> Result<u64> {
    parse_quantity(v).map_err(|e| anyhow!("{flag}: {e}"))
}

fn engine(flag: &str, v: &str) -> Result<EngineKind> {
    EngineKind::parse(v).ok_or_else(|| anyhow!("{flag} {v}: use mssql, postgres or mariadb"))
}

pub fn run(g: &GlobalArgs, a: &K8sArgs) -> Result<i32> {
    match &a.cmd {
        K8sCmd::Advise(x) => advise(g, x),
        K8sCmd::Lint(x) => lint(g, x),
        K8sCmd::Manifest(x) => manifest(x),
    }
}

fn advise(g: &GlobalArgs, a: &AdviseArgs) -> Result<i32> {
    let node = a
        .node_memory
        .as_deref()
        .map(|v| q("--node-memory", v))
        .transpose()?;
    let cap = a
        .capacity
        .as_deref()
        .map(|v| q("--capacity", v))
        .transpose()?;
    let (node, cap) = match (node, cap) {
        (Some(n), Some(c)) => (n, c),
        (Some(n), None) => (n, n),
        (None, Some(c)) => (c, c),
        (None, None) => {
            bail!("give the node's memory: --node-memory 7Gi and/or --capacity 7113152Ki")
        }
    };
    if cap == 0 || node == 0 {
        bail!("node memory must be more than 0");
    }
    let preset = match &a.preset {
        Some(p) => Preset::parse(p)
            .ok_or_else(|| anyhow!("--preset {p}: use kubeadm, aks, aks-pre-1.29, gke or eks"))?,
        None => Preset::Kubeadm,
    };
    let mut r = k8s::reservations(preset, node, a.max_pods);
    let given =
        a.kube_reserved.is_some() || a.system_reserved.is_some() || a.eviction_hard.is_some();
    if given && a.preset.is_none() {
        // Only what the user gave, with the kubelet's defaults for the rest.
        r.explain.clear();
    }
    if let Some(v) = &a.kube_reserved {
        r.kube_reserved_bytes = q("--kube-reserved", v)?;
        r.explain.push(format!("kube-reserved {v} (given)"));
    }
    if let Some(v) = &a.system_reserved {
        r.system_reserved_bytes = q("--system-reserved", v)?;
        r.explain.push(format!("system-reserved {v} (given)"));
    }
    if let Some(v) = &a.eviction_hard {
        r.eviction_hard_bytes = q("--eviction-hard", v)?;
        r.explain
            .push(format!("eviction-hard memory.available<{v} (given)"));
    } else if given && a.preset.is_none() {
        r.explain
            .push("eviction-hard memory.available<100Mi (the kubelet's default)".into());
    }
    let reserved = r.kube_reserved_bytes + r.system_reserved_bytes + r.eviction_hard_bytes;
    if reserved >= cap {
        bail!(
            "reservations ({} bytes) leave nothing of the capacity ({} bytes)",
            reserved,
            cap
        );
    }
    let other = q("--other-requests", &a.other_requests)?;
    let allocatable = cap - reserved;
    if other.saturating_add(1 << 20) > allocatable {
        bail!(
            "--other-requests {}: the other pods' requests take all of the node's allocatable memory ({}): no database pod fits on this node",
            a.other_requests,
            k8s::quantity(allocatable)
        );
    }
    let limit = a.limit.as_deref().map(|v| q("--limit", v)).transpose()?;
    if limit == Some(0) {
        bail!("--limit must be more than 0");
    }
    let eng = a.kind.as_deref().map(|e| engine("--kind", e)).transpose()?;
    let adv = k8s::advise(&k8s::AdviseInputs {
        capacity: cap,
        node_memory: node,
        reservations: r,
        other_requests: other,
        limit,
        engine: eng,
        max_connections: a.max_connections.max(1),
    });
    crate::emit(g, &adv)?;
    Ok(if adv.warnings.is_empty() { 0 } else { 1 })
}

fn lint(g: &GlobalArgs, a: &LintArgs) -> Result<i32> {
    let opts = k8s::LintOptions {
        allocatable: a
            .allocatable
            .as_deref()
            .map(|v| q("--allocatable", v))
            .transpose()?,
    };
    let mut findings = Vec::new();
    let mut files = Vec::new();
    for f in &a.files {
        // Manifests are small; a pipe (<(kubectl get ... -o yaml)) works, /dev/zero does not.
        let text = plumb_sys::read_text_bounded(f, 16 << 20)
            .map_err(|e| anyhow!("{}: {e}", f.display()))?;
        let name = f.display().to_string();
        let mut got = k8s::lint(&name, &text, &opts).map_err(|e| anyhow!("{e}"))?;
        findings.append(&mut got);
        files.push(name);
    }
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings.len() - errors;
    crate::emit(
        g,
        &plumb_report::k8s_render::LintReport {
            files,
            findings,
            errors,
            warnings,
        },
    )?;
    Ok(if errors > 0 { 1 } else { 0 })
}

fn check_image(i: &str) -> Result<()> {
    let ok = !i.is_empty()
        && i.len() <= 512
        && i.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
    if !ok {
        bail!("--image {i:?}: not an image reference (registry/name:tag or name@sha256:digest)");
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
        bail!("--name {name}: use lower-case letters, digits and '-' (at most 52 characters)");
    }
    Ok(())
}

/// `plumb k8s manifest --plumb`: plumb's own DaemonSet.
fn plumb_manifest(a: &ManifestArgs) -> Result<i32> {
    let mem = q("--memory", a.memory.as_deref().unwrap_or("128Mi"))?;
    if mem < 32 << 20 {
        bail!(
            "--memory {}: plumb needs at least 32Mi",
            a.memory.as_deref().unwrap_or_default()
        );
    }
    let port = a.port.unwrap_or(9187);
    if port == 0 {
        bail!("--port 0: give the port Prometheus scrapes, e.g. 9187");
    }
    let interval = a.interval.clone().unwrap_or_else(|| "5s".into());
    let d = plumb_load::units::parse_duration(&interval).map_err(|e| anyhow!("--interval: {e}"))?;
    if d < std::time::Duration::from_millis(100) {
        bail!("--interval {interval}: use 100ms or more");
    }
    let image = a
        .image
        .clone()
        .unwrap_or_else(|| format!("plumb:{}", env!("CARGO_PKG_VERSION")));
    check_image(&image)?;
    let name = a.name.clone().unwrap_or_else(|| "plumb".into());
    check_name(&name)?;
    let plan = k8s::PlumbPlan {
        name,
        image,
        port,
        memory_limit_bytes: mem,
        interval,
        engine_server: a.engine_server,
    };
    let yaml =
        plumb_report::k8s_render::plumb_daemonset_yaml(&plan, &crate::cmd_io::command_line());
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(yaml.as_bytes())?;
    out.flush()?;
    Ok(0)
}

fn manifest(a: &ManifestArgs) -> Result<i32> {
    if a.plumb {
        return plumb_manifest(a);
    }
    for (flag, given) in [
        ("--port", a.port.is_some()),
        ("--interval", a.interval.is_some()),
        ("--engine-server", a.engine_server),
    ] {
        if given {
            bail!("{flag} is for plumb's own DaemonSet: add --plumb (or leave {flag} out)");
        }
    }
    // clap requires both without --plumb.
    let (Some(engine_arg), Some(memory)) = (a.kind.as_deref(), a.memory.as_deref()) else {
        bail!("give --kind and --memory (or --plumb)");
    };
    let e = engine("--kind", engine_arg)?;
    let mem = q("--memory", memory)?;
    if mem < 512 << 20 {
        bail!("--memory {memory}: a database pod needs at least 512Mi");
    }
    if e == EngineKind::Mssql && mem < 2 << 30 {
        bail!(
            "--memory {memory}: SQL Server refuses to start with less than 2000 MB; give it at least 2Gi"
        );
    }
    if let Some(c) = &a.cpu {
        k8s::parse_cpu(c).map_err(|e| anyhow!("--cpu: {e}"))?;
    }
    if let Some(i) = &a.image {
        check_image(i)?;
    }
    for (flag, v) in [
        ("--secret", &a.secret),
        ("--storage-class", &a.storage_class),
    ] {
        if let Some(v) = v {
            if !dns_name(v) {
                bail!("--{} {v:?}: a Kubernetes name is lower-case letters, digits, '-' and '.', starting and ending with a letter or digit (at most 253)", &flag[2..]);
            }
        }
    }
    let kind = match a.workload.as_str() {
        "deployment" | "Deployment" => WorkloadKind::Deployment,
        "statefulset" | "StatefulSet" | "sts" => WorkloadKind::StatefulSet,
        k => bail!("--workload {k}: use deployment or statefulset"),
    };
    for (f, v) in [
        ("--system-size", &a.system_size),
        ("--data-size", &a.data_size),
        ("--log-size", &a.log_size),
    ] {
        q(f, v)?;
    }
    let name = a.name.clone().unwrap_or_else(|| match e {
        EngineKind::Mssql => "mssql".into(),
        EngineKind::Postgres => "postgres".into(),
        EngineKind::Mariadb => "mariadb".into(),
    });
    check_name(&name)?;
    let plan = k8s::ManifestPlan {
        engine: e,
        kind,
        image: a
            .image
            .clone()
            .unwrap_or_else(|| k8s::default_image(e).to_string()),
        memory_limit_bytes: mem,
        cpu: a.cpu.clone(),
        storage_class: a.storage_class.clone(),
        system_size: a.system_size.clone(),
        data_size: a.data_size.clone(),
        log_size: a.log_size.clone(),
        secret_name: a.secret.clone().unwrap_or_else(|| format!("{name}-secret")),
        max_connections: a.max_connections.max(1),
        settings: k8s::engine_settings(e, mem, a.max_connections.max(1)),
        name,
    };
    let yaml = plumb_report::k8s_render::manifest_yaml(&plan, &crate::cmd_io::command_line());
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(yaml.as_bytes())?;
    out.flush()?;
    Ok(0)
}
