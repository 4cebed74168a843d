//! `plumb k8s`: node allocatable and database pod sizing, manifest lint, manifest generation.

use crate::GlobalArgs;
use anyhow::Result;
use clap::{Args, Subcommand};
use plumb_analyze::k8s::{self, parse_quantity, Severity};
use plumb_analyze::k8s_spec;
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
    /// With --plumb: the port /metrics is served on [default: 9494].
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

fn q(flag: &str, v: &str) -> Result<u64> {
    parse_quantity(v).map_err(|e| crate::quoting(format!("{flag}: {e}"), e))
}

pub fn run(g: &GlobalArgs, a: &K8sArgs) -> Result<i32> {
    match &a.cmd {
        K8sCmd::Advise(x) => advise(g, x),
        K8sCmd::Lint(x) => lint(g, x),
        K8sCmd::Manifest(x) => manifest(x),
    }
}

fn advise(g: &GlobalArgs, a: &AdviseArgs) -> Result<i32> {
    let inputs = k8s_spec::advise_inputs(&k8s_spec::AdviseSpec {
        node_memory: a.node_memory.as_deref(),
        capacity: a.capacity.as_deref(),
        preset: a.preset.as_deref(),
        max_pods: a.max_pods,
        kube_reserved: a.kube_reserved.as_deref(),
        system_reserved: a.system_reserved.as_deref(),
        eviction_hard: a.eviction_hard.as_deref(),
        other_requests: &a.other_requests,
        limit: a.limit.as_deref(),
        kind: a.kind.as_deref(),
        max_connections: a.max_connections,
    })?;
    let adv = k8s::advise(&inputs);
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
            .map_err(|e| crate::quoting(format!("{}: {e}", f.display()), e))?;
        let name = f.display().to_string();
        let mut got =
            k8s::lint(&name, &text, &opts).map_err(|e| crate::quoting(e.to_string(), e))?;
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

fn manifest(a: &ManifestArgs) -> Result<i32> {
    let spec = k8s_spec::ManifestSpec {
        kind: a.kind.as_deref(),
        memory: a.memory.as_deref(),
        plumb: a.plumb,
        port: a.port,
        interval: a.interval.as_deref(),
        engine_server: a.engine_server,
        cpu: a.cpu.as_deref(),
        workload: &a.workload,
        name: a.name.as_deref(),
        image: a.image.as_deref(),
        storage_class: a.storage_class.as_deref(),
        system_size: &a.system_size,
        data_size: &a.data_size,
        log_size: &a.log_size,
        secret: a.secret.as_deref(),
        max_connections: a.max_connections,
    };
    let command_line = crate::cmd_io::command_line();
    let yaml = if a.plumb {
        let plan = k8s_spec::plumb_plan(&spec, env!("CARGO_PKG_VERSION"))?;
        plumb_report::k8s_render::plumb_daemonset_yaml(&plan, &command_line)
    } else {
        let plan = k8s_spec::manifest_plan(&spec)?;
        plumb_report::k8s_render::manifest_yaml(&plan, &command_line)
    };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(yaml.as_bytes())?;
    out.flush()?;
    Ok(0)
}
