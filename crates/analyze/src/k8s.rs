//! Kubernetes memory for databases: node allocatable and a pod size that fits (advise), a linter
//! for manifests, and the plan for a manifest that passes it.

use crate::said::{Said, WithFacts};
use crate::{Level, Note};
use marked_yaml::{Node, Span};
use plumb_sys::smaps::EngineKind;
use serde::Serialize;

const KI: u64 = 1024;
const MI: u64 = 1024 * 1024;
const GI: u64 = 1024 * 1024 * 1024;

/// A Kubernetes quantity plumb cannot read, quoting it and saying what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuantityError(pub String);

/// A Kubernetes quantity in bytes: `4667840Ki`, `3Gi`, `500Mi`, `1G` (decimal), `128974848`,
/// `129e6`. Fractions of a byte round up, as the API server does.
pub fn parse_quantity(s: &str) -> Result<u64, QuantityError> {
    let t = s.trim().trim_matches('"').trim_matches('\'');
    let bad = || {
        QuantityError(format!(
            "{s:?} is not a Kubernetes memory quantity (e.g. 3Gi, 500Mi, 4667840Ki, 2G)"
        ))
    };
    if t.is_empty() || t.starts_with('-') {
        return Err(bad());
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(end);
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "m" => 1e-3,
        x if x.starts_with('e') || x.starts_with('E') => {
            10f64.powi(x[1..].parse::<i32>().map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    };
    let b = (v * mult).ceil();
    // 2^64 bytes and more (16Ei) do not fit: an error, not a silent saturation.
    if !b.is_finite() || b < 0.0 || b >= 18_446_744_073_709_551_616.0 {
        return Err(QuantityError(format!(
            "{s:?} is larger than any memory (16Ei and more)"
        )));
    }
    Ok(b as u64)
}

/// A Kubernetes CPU quantity (`2`, `0.5`, `1500m`) in millicores.
pub(crate) fn parse_cpu(s: &str) -> Result<u64, QuantityError> {
    let t = s.trim().trim_matches('"').trim_matches('\'');
    let bad = || {
        QuantityError(format!(
            "{s:?} is not a Kubernetes CPU quantity (e.g. 2, 0.5, 500m)"
        ))
    };
    let (num, milli) = match t.strip_suffix('m') {
        Some(n) => (n, true),
        None => (t, false),
    };
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let m = if milli { v } else { v * 1000.0 };
    if !m.is_finite() || m <= 0.0 || m > 1e9 || (milli && num.contains('.')) {
        return Err(bad());
    }
    Ok(m.ceil() as u64)
}

/// The smallest memory quantity a container can run with; below it a unit was left out
/// (`memory: 12` is 12 bytes).
pub const MIN_CONTAINER_MEMORY: u64 = 4 << 20;

/// Bytes as a Kubernetes quantity: exact Gi or Mi when whole, else Ki.
pub fn quantity(b: u64) -> String {
    if b == 0 {
        "0".to_string()
    } else if b.is_multiple_of(GI) {
        format!("{}Gi", b / GI)
    } else if b.is_multiple_of(MI) {
        format!("{}Mi", b / MI)
    } else {
        format!("{}Ki", b / KI)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// kubeadm / upstream kubelet defaults: no reservations, eviction-hard 100Mi.
    Kubeadm,
    /// AKS 1.29+: kube-reserved min(20 MiB x max pods + 50 MiB, 25% of memory), eviction 100Mi.
    Aks,
    /// AKS before 1.29: the regressive table, eviction 750Mi.
    AksPre129,
    /// GKE: the regressive table, eviction 100Mi.
    Gke,
    /// EKS AMIs: kube-reserved 255 MiB + 11 MiB x max pods, eviction 100Mi.
    Eks,
}

impl Preset {
    pub fn parse(s: &str) -> Option<Preset> {
        match s {
            "kubeadm" | "default" | "upstream" => Some(Preset::Kubeadm),
            "aks" => Some(Preset::Aks),
            "aks-pre-1.29" | "aks-1.28" | "aks-old" => Some(Preset::AksPre129),
            "gke" => Some(Preset::Gke),
            "eks" => Some(Preset::Eks),
            _ => None,
        }
    }
}

/// 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% above:
/// the reservation, and each band's part of it (`band` 0 to 4, what it reserved of what it
/// took).
pub fn regressive(mem: u64) -> (u64, Vec<Note>) {
    let bands: [(u64, f64); 5] = [
        (4 * GI, 0.25),
        (4 * GI, 0.20),
        (8 * GI, 0.10),
        (112 * GI, 0.06),
        (u64::MAX, 0.02),
    ];
    let mut left = mem;
    let mut total = 0f64;
    let mut parts = Vec::new();
    for (i, (size, pct)) in bands.into_iter().enumerate() {
        if left == 0 {
            break;
        }
        let take = left.min(size);
        total += take as f64 * pct;
        parts.push(
            Note::new(Level::Info, "reserve-band")
                .count("band", i as f64)
                .bytes("reserved_bytes", ((take as f64 * pct) as u64) as f64)
                .bytes("take_bytes", take as f64),
        );
        left -= take;
    }
    // The kubelet takes whole MiB.
    ((total as u64) / MI * MI, parts)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reservations {
    pub kube_reserved_bytes: u64,
    pub system_reserved_bytes: u64,
    pub eviction_hard_bytes: u64,
    /// How each figure was reached.
    #[serde(serialize_with = "crate::said::words_list")]
    pub explain: Vec<Said>,
}

pub fn reservations(preset: Preset, node_memory: u64, max_pods: u32) -> Reservations {
    let mut e = Vec::new();
    let (kube, evict) = match preset {
        Preset::Kubeadm => {
            e.push(Said::new("reserve-kubeadm"));
            (0, 100 * MI)
        }
        Preset::Aks => {
            let per_pods = 20 * MI * max_pods as u64 + 50 * MI;
            let quarter = node_memory / 4 / MI * MI;
            let k = per_pods.min(quarter);
            e.push(
                Said::new("reserve-aks")
                    .count("pods", max_pods as f64)
                    .bytes("per_pods_bytes", per_pods as f64)
                    .bytes("node_bytes", node_memory as f64)
                    .bytes("quarter_bytes", quarter as f64)
                    .bytes("kube_reserved_bytes", k as f64),
            );
            (k, 100 * MI)
        }
        Preset::AksPre129 | Preset::Gke => {
            let (k, how) = regressive(node_memory);
            let ev = if preset == Preset::AksPre129 {
                750 * MI
            } else {
                100 * MI
            };
            e.push(
                Said::new("reserve-regressive")
                    .text(
                        "provider",
                        if preset == Preset::Gke {
                            "GKE"
                        } else {
                            "AKS before 1.29"
                        },
                    )
                    .notes("bands", how)
                    .bytes("kube_reserved_bytes", k as f64)
                    .bytes("eviction_hard_bytes", ev as f64),
            );
            (k, ev)
        }
        Preset::Eks => {
            let k = 255 * MI + 11 * MI * max_pods as u64;
            e.push(
                Said::new("reserve-eks")
                    .count("pods", max_pods as f64)
                    .bytes("kube_reserved_bytes", k as f64),
            );
            (k, 100 * MI)
        }
    };
    Reservations {
        kube_reserved_bytes: kube,
        system_reserved_bytes: 0,
        eviction_hard_bytes: evict,
        explain: e,
    }
}

/// (setting, value, why) with the why in words, as JSON has always had it.
fn settings_words<S: serde::Serializer>(
    v: &[(String, String, Said)],
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for (k, val, why) in v {
        let w = crate::said::words(|sp| sp.said(why), &why.code);
        seq.serialize_element(&(k, val, w))?;
    }
    seq.end()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineSettingsAdvice {
    pub engine: EngineKind,
    /// (setting, value, why) in the engine's own syntax.
    #[serde(serialize_with = "settings_words")]
    pub settings: Vec<(String, String, Said)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    pub capacity_bytes: u64,
    pub reservations: Reservations,
    pub allocatable_bytes: u64,
    pub other_requests_bytes: u64,
    /// What is left for the database pod on this node.
    pub available_bytes: u64,
    /// The Guaranteed pod's memory request = limit.
    pub pod_limit_bytes: u64,
    #[serde(serialize_with = "crate::said::words_list")]
    pub arithmetic: Vec<Said>,
    pub engine: Option<EngineSettingsAdvice>,
    /// What happens without a limit.
    #[serde(serialize_with = "crate::said::words_list")]
    pub without_limit: Vec<Said>,
    #[serde(serialize_with = "crate::said::words_list")]
    pub warnings: Vec<Said>,
}

#[derive(Debug)]
pub struct AdviseInputs {
    pub capacity: u64,
    pub node_memory: u64,
    pub reservations: Reservations,
    pub other_requests: u64,
    pub limit: Option<u64>,
    pub engine: Option<EngineKind>,
    pub max_connections: u64,
}

fn mssql_settings(limit: u64) -> EngineSettingsAdvice {
    // Headroom for the OS and non-SQL processes: 15%, at least 512 MiB, at most 16 GiB.
    let headroom = (limit as f64 * 0.15).clamp(512.0 * MI as f64, 16.0 * GI as f64) as u64;
    let mlm = limit.saturating_sub(headroom) / MI;
    let msm = mlm * 9 / 10;
    let default = ((limit as f64 / MI as f64) * 0.8).round() as u64;
    EngineSettingsAdvice {
        engine: EngineKind::Mssql,
        settings: vec![
            (
                "(unset: 80% of the limit)".into(),
                default.to_string(),
                Said::new("why-mssql-unset").count("detected_mb", default as f64),
            ),
            (
                "MSSQL_MEMORY_LIMIT_MB".into(),
                mlm.to_string(),
                Said::new("why-mssql-limit-mb")
                    .bytes("limit_bytes", limit as f64)
                    .bytes("headroom_bytes", headroom as f64)
                    .count("detected_mb", mlm as f64),
            ),
            (
                "max server memory (MB)".into(),
                msm.to_string(),
                Said::new("why-max-server-memory"),
            ),
        ],
    }
}

fn postgres_settings(limit: u64, conns: u64) -> EngineSettingsAdvice {
    let sb = limit / 4 / MI * MI;
    // In a container the page cache is charged to the same limit, so do not count the whole
    // host's RAM as cache as pgtune's 75% does.
    let ecs = limit / 2 / MI * MI;
    let wm = ((limit - sb) / (conns.max(1) * 3) / MI * MI).max(4 * MI);
    let mwm = (limit / 16 / MI * MI).min(2 * GI);
    let mb = |b: u64| format!("{}MB", b / MI);
    EngineSettingsAdvice {
        engine: EngineKind::Postgres,
        settings: vec![
            (
                "shared_buffers".into(),
                mb(sb),
                Said::new("why-shared-buffers"),
            ),
            (
                "effective_cache_size".into(),
                mb(ecs),
                Said::new("why-effective-cache-size"),
            ),
            (
                "work_mem".into(),
                mb(wm),
                Said::new("why-work-mem").count("connections", conns as f64),
            ),
            (
                "maintenance_work_mem".into(),
                mb(mwm),
                Said::new("why-maintenance-work-mem"),
            ),
            (
                "max_connections".into(),
                conns.to_string(),
                Said::new("why-max-connections"),
            ),
        ],
    }
}

fn mariadb_settings(limit: u64) -> EngineSettingsAdvice {
    let pool = (limit as f64 * 0.65) as u64 / (128 * MI) * (128 * MI);
    EngineSettingsAdvice {
        engine: EngineKind::Mariadb,
        settings: vec![(
            "innodb_buffer_pool_size".into(),
            format!("{}M", pool / MI),
            Said::new("why-buffer-pool"),
        )],
    }
}

pub(crate) fn engine_settings(engine: EngineKind, limit: u64, conns: u64) -> EngineSettingsAdvice {
    match engine {
        EngineKind::Mssql => mssql_settings(limit),
        EngineKind::Postgres => postgres_settings(limit, conns),
        EngineKind::Mariadb => mariadb_settings(limit),
    }
}

pub fn advise(i: &AdviseInputs) -> Advice {
    let r = &i.reservations;
    let reserved = r.kube_reserved_bytes + r.system_reserved_bytes + r.eviction_hard_bytes;
    let allocatable = i.capacity.saturating_sub(reserved);
    let available = allocatable.saturating_sub(i.other_requests);
    let mut arith = vec![Said::new("arith-allocatable")
        .bytes("capacity_bytes", i.capacity as f64)
        .bytes("kube_reserved_bytes", r.kube_reserved_bytes as f64)
        .bytes("system_reserved_bytes", r.system_reserved_bytes as f64)
        .bytes("eviction_hard_bytes", r.eviction_hard_bytes as f64)
        .bytes("allocatable_bytes", allocatable as f64)];
    if i.other_requests > 0 {
        arith.push(
            Said::new("arith-left")
                .bytes("allocatable_bytes", allocatable as f64)
                .bytes("other_requests_bytes", i.other_requests as f64)
                .bytes("available_bytes", available as f64),
        );
    }
    let mut warnings = Vec::new();
    // The pod gets whole MiB, and never more than is left on the node.
    let pod = match i.limit {
        Some(l) => {
            if l > available {
                warnings.push(
                    Said::new("warn-limit-above-left")
                        .bytes("limit_bytes", l as f64)
                        .bytes("available_bytes", available as f64),
                );
            }
            l
        }
        None => available / MI * MI,
    };
    arith.push(Said::new("arith-pod").bytes("pod_bytes", pod as f64));
    let engine = i.engine.map(|e| engine_settings(e, pod, i.max_connections));
    let mut without = Vec::new();
    if let Some(e) = i.engine {
        let assumes = match e {
            EngineKind::Mssql => {
                let d = ((i.capacity as f64 / MI as f64) * 0.8).round() as u64;
                without.push(
                    Said::new("without-mssql")
                        .bytes("capacity_bytes", i.capacity as f64)
                        .count("detected_mb", d as f64),
                );
                d * MI
            }
            EngineKind::Postgres | EngineKind::Mariadb => {
                without.push(Said::new("without-engine").text("engine", e.name()));
                0
            }
        };
        if assumes > allocatable {
            without.push(
                Said::new("without-eviction-loop").bytes("allocatable_bytes", allocatable as f64),
            );
        }
    }
    Advice {
        capacity_bytes: i.capacity,
        reservations: r.clone(),
        allocatable_bytes: allocatable,
        other_requests_bytes: i.other_requests,
        available_bytes: available,
        pod_limit_bytes: pod,
        arithmetic: arith,
        engine,
        without_limit: without,
        warnings,
    }
}

// ---------------------------------------------------------------------------------------------
// Lint

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Warning,
    Error,
}

/// What the manifest lint found: where, how bad, its rule, and what it says (a statement with
/// its facts; `plumb_report::words` words it, and JSON carries the words as `message`).
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub file: String,
    pub line: usize,
    pub severity: Severity,
    pub rule: &'static str,
    pub object: String,
    pub said: Said,
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let message = crate::said::words(|w| w.said(&self.said), &self.said.code);
        let mut m = s.serialize_map(Some(6))?;
        m.serialize_entry("file", &self.file)?;
        m.serialize_entry("line", &self.line)?;
        m.serialize_entry("severity", &self.severity)?;
        m.serialize_entry("rule", self.rule)?;
        m.serialize_entry("object", &self.object)?;
        m.serialize_entry("message", &message)?;
        m.end()
    }
}

#[derive(Debug, Clone, Default)]
pub struct LintOptions {
    /// Node allocatable memory: limits above it can never schedule.
    pub allocatable: Option<u64>,
}

/// A manifest that could not be read, with file and line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YamlError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl std::error::Error for YamlError {}

impl std::fmt::Display for YamlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

fn line_of(span: &Span, offset: usize) -> usize {
    span.start().map(|m| m.line()).unwrap_or(1) + offset
}

/// Split a multi-document stream on `---` lines; each document with the line it starts on.
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = Vec::new();
    let mut cur = String::new();
    let mut start = 0usize;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_end();
        if t == "---" || t.starts_with("--- ") || t == "..." {
            if cur
                .lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            {
                docs.push((start, std::mem::take(&mut cur)));
            } else {
                cur.clear();
            }
            start = i + 1;
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
    }
    if cur
        .lines()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    {
        docs.push((start, cur));
    }
    docs
}

fn load_error(file: &str, offset: usize, e: &marked_yaml::LoadError) -> YamlError {
    use marked_yaml::LoadError::*;
    let m = match e {
        TopLevelMustBeMapping(m)
        | TopLevelMustBeSequence(m)
        | UnexpectedAnchor(m)
        | MappingKeyMustBeScalar(m)
        | UnexpectedTag(m)
        | ScanError(m, _) => Some(m.line()),
        DuplicateKey(d) => d.key.span().start().map(|m| m.line()),
    };
    let msg = match e {
        TopLevelMustBeMapping(_) => "a Kubernetes object must be a mapping".to_string(),
        DuplicateKey(d) => format!(
            "`{}` appears twice in one mapping (first at line {}): two objects without `---` between them, or a key repeated; kubectl rejects this file, and plumb would see only the second",
            d.key.as_str(),
            d.prev_key.span().start().map(|m| m.line() + offset).unwrap_or(0)
        ),
        ScanError(_, s) => format!("not valid YAML: {s}"),
        other => other.to_string(),
    };
    YamlError {
        file: file.to_string(),
        line: m.unwrap_or(1) + offset,
        message: msg,
    }
}

fn get<'a>(n: &'a Node, path: &[&str]) -> Option<&'a Node> {
    let mut cur = n;
    for k in path {
        cur = cur.as_mapping()?.get_node(k)?;
    }
    Some(cur)
}

fn scalar<'a>(n: &'a Node, path: &[&str]) -> Option<&'a str> {
    get(n, path)?.as_scalar().map(|s| s.as_str())
}

fn seq<'a>(n: &'a Node, path: &[&str]) -> Vec<&'a Node> {
    get(n, path)
        .and_then(|s| s.as_sequence())
        .map(|s| s.iter().collect())
        .unwrap_or_default()
}

/// Which engine an image runs, if a database.
pub(crate) fn engine_of_image(image: &str) -> Option<EngineKind> {
    let i = image.to_ascii_lowercase();
    let name = i.rsplit('/').next().unwrap_or(&i);
    if i.contains("mssql") || i.contains("sqlserver") || i.contains("sql-server") {
        Some(EngineKind::Mssql)
    } else if name.starts_with("postgres")
        || name.starts_with("postgis")
        || i.contains("timescale")
        || i.contains("cloudnative-pg")
        || i.contains("bitnami/postgresql")
    {
        Some(EngineKind::Postgres)
    } else if name.starts_with("mariadb")
        || name.starts_with("mysql")
        || i.contains("bitnami/mariadb")
    {
        Some(EngineKind::Mariadb)
    } else {
        None
    }
}

struct Ctx<'a> {
    file: &'a str,
    offset: usize,
    object: String,
    out: Vec<Finding>,
}

impl Ctx<'_> {
    fn add(&mut self, node: &Node, severity: Severity, rule: &'static str, said: Said) {
        self.out.push(Finding {
            file: self.file.to_string(),
            line: line_of(node.span(), self.offset),
            severity,
            rule,
            object: self.object.clone(),
            said,
        });
    }
}

const SECRETISH: [&str; 5] = ["PASSWORD", "PASSWD", "SECRET", "_PWD", "TOKEN"];

/// Lint one file's text. Returns findings, or the first YAML error.
pub fn lint(file: &str, text: &str, opts: &LintOptions) -> Result<Vec<Finding>, YamlError> {
    let mut docs = Vec::new();
    for (offset, d) in documents(text) {
        let options = marked_yaml::LoaderOptions::default().error_on_duplicate_keys(true);
        let n = marked_yaml::parse_yaml_with_options(0, &d, options)
            .map_err(|e| load_error(file, offset, &e))?;
        docs.push((offset, n));
    }
    let rwo = rwo_claims(&docs);
    let mut findings = Vec::new();
    for (offset, d) in &docs {
        let kind = scalar(d, &["kind"]).unwrap_or("").to_string();
        let Some(ps) = pod_spec(d, &kind) else {
            continue;
        };
        let name = scalar(d, &["metadata", "name"]).unwrap_or("(unnamed)");
        let mut cx = Ctx {
            file,
            offset: *offset,
            object: format!("{kind}/{name}"),
            out: Vec::new(),
        };
        let pod = Pod {
            host_paths: host_paths(ps),
            opts,
        };
        let mut is_db = false;
        for node in seq(ps, &["containers"]) {
            let c = Container::of(node);
            is_db |= c.engine.is_some();
            for rule in CONTAINER_RULES {
                rule(&mut cx, &c, &pod);
            }
        }
        if kind == "Deployment" && is_db {
            rwo_rules(&mut cx, d, ps, &rwo);
        }
        findings.extend(cx.out);
    }
    findings.sort_by_key(|f| f.line);
    Ok(findings)
}

/// The file's PersistentVolumeClaims that one node at a time may mount (ReadWriteOnce,
/// ReadWriteOncePod), by name.
fn rwo_claims(docs: &[(usize, Node)]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, d) in docs {
        if scalar(d, &["kind"]) == Some("PersistentVolumeClaim") {
            let modes: Vec<&str> = seq(d, &["spec", "accessModes"])
                .iter()
                .filter_map(|m| m.as_scalar().map(|s| s.as_str()))
                .collect();
            if modes.contains(&"ReadWriteOnce") || modes.contains(&"ReadWriteOncePod") {
                if let Some(name) = scalar(d, &["metadata", "name"]) {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

/// An object's pod spec, for the kinds that run pods.
fn pod_spec<'a>(d: &'a Node, kind: &str) -> Option<&'a Node> {
    match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "Job" => {
            get(d, &["spec", "template", "spec"])
        }
        "CronJob" => get(d, &["spec", "jobTemplate", "spec", "template", "spec"]),
        "Pod" => get(d, &["spec"]),
        _ => None,
    }
}

/// A pod spec's hostPath volumes: name -> the node's path.
fn host_paths(ps: &Node) -> Vec<(String, String)> {
    seq(ps, &["volumes"])
        .iter()
        .filter_map(|v| {
            Some((
                scalar(v, &["name"]).unwrap_or("").to_string(),
                scalar(v, &["hostPath", "path"])?.to_string(),
            ))
        })
        .collect()
}

/// What the container rules know of the pod around a container.
struct Pod<'a> {
    host_paths: Vec<(String, String)>,
    opts: &'a LintOptions,
}

/// One container of a pod spec, as the container rules read it.
struct Container<'a> {
    node: &'a Node,
    name: &'a str,
    engine: Option<EngineKind>,
    /// The memory request and limit as written.
    req: Option<&'a str>,
    lim: Option<&'a str>,
    /// The same in bytes, where they parse (a request defaults to the limit).
    req_b: Option<u64>,
    lim_b: Option<u64>,
}

impl<'a> Container<'a> {
    fn of(node: &'a Node) -> Self {
        let req = scalar(node, &["resources", "requests", "memory"]);
        let lim = scalar(node, &["resources", "limits", "memory"]);
        let lim_b = lim.and_then(|v| parse_quantity(v).ok());
        Container {
            node,
            name: scalar(node, &["name"]).unwrap_or("?"),
            engine: engine_of_image(scalar(node, &["image"]).unwrap_or("")),
            req,
            lim,
            req_b: req.and_then(|v| parse_quantity(v).ok()).or(lim_b),
            lim_b,
        }
    }

    /// The node at `p` below the container, or the container where there is none.
    fn at(&self, p: &[&str]) -> &'a Node {
        get(self.node, p).unwrap_or(self.node)
    }

    /// A statement about this container.
    fn said(&self, code: &'static str) -> Said {
        Said::new(code).text("container", self.name)
    }

    /// An environment variable's entry.
    fn env(&self, k: &str) -> Option<&'a Node> {
        seq(self.node, &["env"])
            .into_iter()
            .find(|e| scalar(e, &["name"]) == Some(k))
    }

    /// Its args, then its command, as words.
    fn args(&self) -> Vec<String> {
        seq(self.node, &["args"])
            .iter()
            .chain(seq(self.node, &["command"]).iter())
            .filter_map(|a| a.as_scalar().map(|s| s.to_string()))
            .collect()
    }

    /// The severity of a missing memory limit: an error for a database, else a warning.
    fn limit_severity(&self) -> Severity {
        if self.engine.is_some() {
            Severity::Error
        } else {
            Severity::Warning
        }
    }
}

type ContainerRule = fn(&mut Ctx, &Container, &Pod);

/// The rules every container of a pod spec is checked against, in this order.
const CONTAINER_RULES: [ContainerRule; 7] = [
    quantities,
    memory_limits,
    privileges,
    host_paths_writable,
    plaintext_secrets,
    engine_memory,
    mssql_volumes,
];

/// Memory and CPU quantities that do not parse, and memory too small to be meant (`512`
/// bytes where `512Mi` was meant).
fn quantities(cx: &mut Ctx, c: &Container, _: &Pod) {
    for (v, p) in [
        (c.req, &["resources", "requests", "memory"][..]),
        (c.lim, &["resources", "limits", "memory"][..]),
    ] {
        let Some(v) = v else { continue };
        match parse_quantity(v) {
            Err(e) => cx.add(
                c.at(p),
                Severity::Error,
                "bad-quantity",
                c.said("lint-bad-quantity").text("error", e.to_string()),
            ),
            Ok(b) if b < MIN_CONTAINER_MEMORY => cx.add(
                c.at(p),
                Severity::Error,
                "memory-unit",
                c.said("lint-memory-unit")
                    .text("value", v)
                    .bytes("bytes", b as f64),
            ),
            Ok(_) => {}
        }
    }
    for p in [
        &["resources", "requests", "cpu"][..],
        &["resources", "limits", "cpu"][..],
    ] {
        if let Some(Err(e)) = scalar(c.node, p).map(parse_cpu) {
            cx.add(
                c.at(p),
                Severity::Error,
                "bad-quantity",
                c.said("lint-bad-quantity").text("error", e.to_string()),
            );
        }
    }
}

/// A memory limit, equal to the request for a database, and within what the node can give.
fn memory_limits(cx: &mut Ctx, c: &Container, pod: &Pod) {
    match (c.req, c.lim) {
        (None, None) => cx.add(
            c.node,
            c.limit_severity(),
            "memory-limits",
            match c.engine {
                Some(e) => c.said("lint-no-memory-limits").text("engine", e.name()),
                None => c.said("lint-no-memory-limits"),
            },
        ),
        (Some(_), None) => cx.add(
            c.at(&["resources"]),
            c.limit_severity(),
            "memory-limits",
            c.said("lint-request-without-limit"),
        ),
        _ => {}
    }
    if let (Some(e), Some(r), Some(l)) = (c.engine, c.req_b, c.lim_b) {
        if r != l {
            cx.add(
                c.at(&["resources", "requests", "memory"]),
                Severity::Warning,
                "request-equals-limit",
                c.said("lint-request-not-limit")
                    .text("engine", e.name())
                    .bytes("request_bytes", r as f64)
                    .bytes("limit_bytes", l as f64),
            );
        }
    }
    if let (Some(l), Some(alloc)) = (c.lim_b, pod.opts.allocatable) {
        if l > alloc {
            cx.add(
                c.at(&["resources", "limits", "memory"]),
                Severity::Error,
                "limit-above-allocatable",
                c.said("lint-limit-above-allocatable")
                    .bytes("limit_bytes", l as f64)
                    .bytes("allocatable_bytes", alloc as f64),
            );
        }
    }
}

/// Privileges: a container that can do anything on the node.
fn privileges(cx: &mut Ctx, c: &Container, _: &Pod) {
    if scalar(c.node, &["securityContext", "privileged"]) == Some("true") {
        cx.add(
            c.at(&["securityContext", "privileged"]),
            Severity::Warning,
            "privileged",
            c.said("lint-privileged"),
        );
    }
    for cap in seq(c.node, &["securityContext", "capabilities", "add"]) {
        if let Some(v) = cap.as_scalar().map(|s| s.as_str()) {
            if matches!(v, "ALL" | "SYS_ADMIN" | "CAP_SYS_ADMIN") {
                cx.add(
                    cap,
                    Severity::Warning,
                    "privileged",
                    c.said("lint-adds-capability").text("capability", v),
                );
            }
        }
    }
}

/// A node's directory mounted writable.
fn host_paths_writable(cx: &mut Ctx, c: &Container, pod: &Pod) {
    for m in seq(c.node, &["volumeMounts"]) {
        let vname = scalar(m, &["name"]).unwrap_or("");
        if let Some((_, path)) = pod.host_paths.iter().find(|(n, _)| n == vname) {
            if scalar(m, &["readOnly"]) != Some("true") {
                cx.add(
                    m,
                    Severity::Warning,
                    "host-path-writable",
                    c.said("lint-host-path-writable").text("path", path.clone()),
                );
            }
        }
    }
}

/// A password or token written into the manifest.
fn plaintext_secrets(cx: &mut Ctx, c: &Container, _: &Pod) {
    for e in seq(c.node, &["env"]) {
        let n = scalar(e, &["name"]).unwrap_or("");
        let upper = n.to_ascii_uppercase();
        if let Some(value) = get(e, &["value"]) {
            if SECRETISH.iter().any(|s| upper.contains(s)) {
                cx.add(
                    value,
                    Severity::Error,
                    "plaintext-secret",
                    c.said("lint-plaintext-secret").text("variable", n),
                );
            }
        }
    }
}

/// The engine's own memory setting against the container's limit.
fn engine_memory(cx: &mut Ctx, c: &Container, _: &Pod) {
    match c.engine {
        Some(EngineKind::Mssql) => mssql_memory(cx, c),
        Some(EngineKind::Postgres) => {
            let args = c.args();
            let sb = args
                .iter()
                .find_map(|a| a.strip_prefix("shared_buffers="))
                .or_else(|| {
                    args.iter()
                        .find_map(|a| a.strip_prefix("-cshared_buffers="))
                });
            let size = |v: &str| plumb_sys::engine_conf::pg_memory(v, 8192);
            let codes = ("lint-no-shared-buffers", "lint-shared-buffers-above-40-pct");
            setting_share(cx, c, sb, size, 0.4, codes);
        }
        Some(EngineKind::Mariadb) => {
            let args = c.args();
            let pool = args.iter().find_map(|a| {
                a.strip_prefix("--innodb-buffer-pool-size=")
                    .or_else(|| a.strip_prefix("--innodb_buffer_pool_size="))
            });
            setting_share(
                cx,
                c,
                pool,
                plumb_sys::engine_conf::my_size,
                0.75,
                ("lint-no-buffer-pool-size", "lint-buffer-pool-above-75-pct"),
            );
        }
        None => {}
    }
}

/// A cache setting (`value`) that is missing, or above `share` of the container's limit: the
/// statements `(missing, above)` say which.
fn setting_share(
    cx: &mut Ctx,
    c: &Container,
    value: Option<&str>,
    size: impl Fn(&str) -> Option<u64>,
    share: f64,
    (missing, above): (&'static str, &'static str),
) {
    let Some(v) = value else {
        cx.add(c.node, Severity::Warning, "engine-memory", c.said(missing));
        return;
    };
    if let (Some(b), Some(l)) = (size(v), c.lim_b) {
        if b as f64 > l as f64 * share {
            cx.add(
                c.node,
                Severity::Warning,
                "engine-memory",
                c.said(above)
                    .text("value", v)
                    .bytes("limit_bytes", l as f64),
            );
        }
    }
}

/// SQL Server's MSSQL_MEMORY_LIMIT_MB: set, and below the container's limit with headroom.
fn mssql_memory(cx: &mut Ctx, c: &Container) {
    let Some(ev) = c.env("MSSQL_MEMORY_LIMIT_MB") else {
        let said = match c.lim_b {
            Some(l) => c
                .said("lint-mssql-no-limit-mb")
                .bytes("limit_bytes", l as f64),
            None => c.said("lint-mssql-no-limit-mb"),
        };
        cx.add(c.node, Severity::Warning, "engine-memory", said);
        return;
    };
    let v = scalar(ev, &["value"]).and_then(|v| v.trim().parse::<u64>().ok());
    let (Some(mb), Some(l)) = (v, c.lim_b) else {
        return;
    };
    let (severity, code) = if mb * MI >= l {
        (Severity::Error, "lint-mssql-limit-mb-no-headroom")
    } else if mb as f64 * MI as f64 > l as f64 * 0.9 {
        (Severity::Warning, "lint-mssql-limit-mb-above-90-pct")
    } else {
        return;
    };
    cx.add(
        ev,
        severity,
        "engine-memory",
        c.said(code)
            .count("memory_limit_mb", mb as f64)
            .bytes("limit_bytes", l as f64),
    );
}

/// Storage layout for SQL Server: system, data and log on separate volumes.
fn mssql_volumes(cx: &mut Ctx, c: &Container, _: &Pod) {
    if c.engine != Some(EngineKind::Mssql) {
        return;
    }
    let mounts: Vec<(String, String)> = seq(c.node, &["volumeMounts"])
        .iter()
        .map(|m| {
            (
                scalar(m, &["name"]).unwrap_or("").to_string(),
                scalar(m, &["mountPath"]).unwrap_or("").to_string(),
            )
        })
        .collect();
    let vol_for = |path: &str| {
        mounts
            .iter()
            .filter(|(_, mp)| {
                path == mp || path.starts_with(&format!("{}/", mp.trim_end_matches('/')))
            })
            .max_by_key(|(_, mp)| mp.len())
            .map(|(n, _)| n.clone())
    };
    let path_of = |k: &str, default: &str| {
        c.env(k)
            .and_then(|e| scalar(e, &["value"]))
            .unwrap_or(default)
            .to_string()
    };
    let sys = vol_for("/var/opt/mssql");
    let data = vol_for(&path_of("MSSQL_DATA_DIR", "/var/opt/mssql/data"));
    let log = vol_for(&path_of("MSSQL_LOG_DIR", "/var/opt/mssql/data"));
    if sys.is_some() && (sys == data || data == log) {
        cx.add(
            c.at(&["volumeMounts"]),
            Severity::Warning,
            "separate-volumes",
            c.said("lint-mssql-one-volume"),
        );
    }
}

/// A database Deployment on a ReadWriteOnce claim: a rolling update, or more than one replica,
/// starts a pod that cannot mount its volume.
fn rwo_rules(cx: &mut Ctx, d: &Node, ps: &Node, rwo_claims: &[String]) {
    let strategy = scalar(d, &["spec", "strategy", "type"]).unwrap_or("RollingUpdate");
    let replicas = scalar(d, &["spec", "replicas"])
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or(1);
    let rwo: Vec<&str> = seq(ps, &["volumes"])
        .iter()
        .filter_map(|v| scalar(v, &["persistentVolumeClaim", "claimName"]))
        .filter(|c| rwo_claims.iter().any(|r| r == c))
        .collect();
    if strategy == "RollingUpdate" && !rwo.is_empty() {
        cx.add(
            get(d, &["spec", "strategy"]).unwrap_or(d),
            Severity::Error,
            "rwo-rolling-update",
            Said::new("lint-rwo-rolling-update")
                .text("strategy", strategy)
                .list("claims", rwo.iter().map(|s| s.to_string()).collect()),
        );
    }
    if replicas > 1 && !rwo.is_empty() {
        cx.add(
            d,
            Severity::Error,
            "rwo-replicas",
            Said::new("lint-rwo-replicas").count("replicas", replicas as f64),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Manifest plan

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestPlan {
    pub engine: EngineKind,
    pub kind: WorkloadKind,
    pub name: String,
    pub image: String,
    pub memory_limit_bytes: u64,
    pub cpu: Option<String>,
    pub storage_class: Option<String>,
    pub system_size: String,
    pub data_size: String,
    pub log_size: String,
    pub secret_name: String,
    pub max_connections: u64,
    pub settings: EngineSettingsAdvice,
}

/// plumb itself on every node: a DaemonSet that records the node and serves `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlumbPlan {
    pub name: String,
    pub image: String,
    pub port: u16,
    pub memory_limit_bytes: u64,
    /// `plumb record --interval`.
    pub interval: String,
    /// Also record the database servers' process trees (`--engine-server`).
    pub engine_server: bool,
}

pub(crate) fn default_image(e: EngineKind) -> &'static str {
    match e {
        EngineKind::Mssql => "mcr.microsoft.com/mssql/server:2022-latest",
        EngineKind::Postgres => "postgres:16",
        EngineKind::Mariadb => "mariadb:11",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_objects_without_a_separator_are_an_error_naming_the_line() {
        // A Deployment with no memory limit and a plaintext password, then a claim pasted
        // under it without `---`: the claim's keys would silently replace the Deployment's.
        let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: mssql\nspec:\n  template:\n    spec:\n      containers:\n      - name: mssql\n        image: mcr.microsoft.com/mssql/server:2019-latest\n        env:\n        - name: SA_PASSWORD\n          value: 'S0methingS@Str0ng!'\n\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: pvc-sql-data\nspec:\n  accessModes: [ReadWriteOnce]\n";
        let e = lint("pasted.yaml", text, &LintOptions::default()).unwrap_err();
        assert_eq!(e.line, 15, "{e:?}");
        assert!(e.message.contains("`apiVersion` appears twice"), "{e:?}");
        assert!(e.message.contains("first at line 1"), "{e:?}");
        // In the second document of a file, the line counts from the file's start.
        let two = format!("kind: ConfigMap\napiVersion: v1\n---\n{text}");
        let e = lint("pasted.yaml", &two, &LintOptions::default()).unwrap_err();
        assert_eq!(e.line, 18, "{e:?}");
        assert!(e.message.contains("first at line 4"), "{e:?}");
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("4667840Ki"), Ok(4667840 * KI));
        assert_eq!(parse_quantity("3Gi"), Ok(3 * GI));
        assert_eq!(parse_quantity("500Mi"), Ok(500 * MI));
        assert_eq!(parse_quantity("1G"), Ok(1_000_000_000));
        assert_eq!(parse_quantity("128974848"), Ok(128974848));
        assert_eq!(parse_quantity("129e6"), Ok(129_000_000));
        assert!(parse_quantity("12XB").is_err());
        assert!(parse_quantity("-1Gi").is_err());
        assert_eq!(quantity(3 * GI), "3Gi");
        assert_eq!(quantity(4667840 * KI), "4667840Ki");
        assert_eq!(quantity(1638 * MI), "1638Mi");
    }

    #[test]
    fn seed_node_allocatable() {
        // A Standard_DS2_v2 (7 GiB) on AKS before 1.29; the kubelet reported capacity 7113152Ki.
        let r = reservations(Preset::AksPre129, 7 * GI, 110);
        assert_eq!(r.kube_reserved_bytes, 1638 * MI);
        assert_eq!(r.eviction_hard_bytes, 750 * MI);
        let a = advise(&AdviseInputs {
            capacity: 7113152 * KI,
            node_memory: 7 * GI,
            reservations: r,
            other_requests: 0,
            limit: Some(3 * GI),
            engine: Some(EngineKind::Mssql),
            max_connections: 100,
        });
        assert_eq!(a.allocatable_bytes, 4667840 * KI);
        assert!(
            a.without_limit
                .iter()
                .any(|l| l.code == "without-mssql" && l.facts.num("detected_mb") == 5557.0),
            "{:?}",
            a.without_limit
        );
        assert!(a
            .without_limit
            .iter()
            .any(|l| l.code == "without-eviction-loop"));
    }

    #[test]
    fn kubernetes_docs_example() {
        let r = Reservations {
            kube_reserved_bytes: 2 * GI,
            system_reserved_bytes: GI,
            eviction_hard_bytes: 500 * MI,
            explain: vec![],
        };
        let a = advise(&AdviseInputs {
            capacity: 32 * GI,
            node_memory: 32 * GI,
            reservations: r,
            other_requests: 0,
            limit: None,
            engine: None,
            max_connections: 100,
        });
        // 32Gi - 2Gi - 1Gi - 500Mi = 29196Mi, which the documentation rounds to 28.5Gi.
        assert_eq!(a.allocatable_bytes, 29196 * MI);
    }

    #[test]
    fn aks_129_example() {
        // 8 GB, 30 pods: 20 MiB x 30 + 50 MiB = 650 MiB, less than 25%.
        let r = reservations(Preset::Aks, 8 * GI, 30);
        assert_eq!(r.kube_reserved_bytes, 650 * MI);
        let r = reservations(Preset::Aks, 2 * GI, 110);
        assert_eq!(r.kube_reserved_bytes, 512 * MI, "capped at 25%");
    }

    const SEED_NO_LIMITS: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: mssql-deployment-2017
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
        app: mssql-2017
  template:
    metadata:
      labels:
        app: mssql-2017
    spec:
      containers:
      - name: mssql
        image: 'mcr.microsoft.com/mssql/server:2017-CU16-ubuntu'
        env:
        - name: SA_PASSWORD
          valueFrom:
            secretKeyRef:
              name: mssql
              key: SA_PASSWORD
        volumeMounts:
        - name: mssqldb
          mountPath: /var/opt/mssql
      volumes:
      - name: mssqldb
        persistentVolumeClaim:
          claimName: pvc-sql-2017
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: pvc-sql-2017
spec:
  accessModes:
  - ReadWriteOnce
";

    #[test]
    fn lint_flags_the_seed_manifest_with_lines() {
        let f = lint("seed.yaml", SEED_NO_LIMITS, &LintOptions::default()).unwrap();
        let limits = f.iter().find(|x| x.rule == "memory-limits").unwrap();
        assert_eq!(limits.severity, Severity::Error);
        assert_eq!(limits.line, 18, "{limits:?}");
        assert!(f.iter().any(|x| x.rule == "separate-volumes"));
        assert!(f.iter().any(|x| x.rule == "engine-memory"));
        assert!(!f.iter().any(|x| x.rule == "plaintext-secret"));
        assert!(
            !f.iter().any(|x| x.rule == "rwo-rolling-update"),
            "Recreate is fine"
        );
        let rolling = SEED_NO_LIMITS.replace("    type: Recreate\n", "    type: RollingUpdate\n");
        let f = lint("seed.yaml", &rolling, &LintOptions::default()).unwrap();
        assert!(f
            .iter()
            .any(|x| x.rule == "rwo-rolling-update" && x.severity == Severity::Error));
    }

    #[test]
    fn plaintext_password_and_bad_yaml() {
        let t = "kind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: db\n    image: postgres:16\n    env:\n    - name: POSTGRES_PASSWORD\n      value: hunter2\n";
        let f = lint("p.yaml", t, &LintOptions::default()).unwrap();
        let s = f.iter().find(|x| x.rule == "plaintext-secret").unwrap();
        assert_eq!(s.line, 10);
        let e = lint(
            "bad.yaml",
            "---\nkind: Pod\nspec: [unclosed\n",
            &LintOptions::default(),
        )
        .unwrap_err();
        assert_eq!(e.file, "bad.yaml");
        assert!(e.line >= 2, "{e}");
        let e = lint("list.yaml", "- a\n- b\n", &LintOptions::default()).unwrap_err();
        assert!(e.message.contains("mapping"), "{e}");
    }

    #[test]
    fn images() {
        assert_eq!(
            engine_of_image("mcr.microsoft.com/mssql/server:2022-latest"),
            Some(EngineKind::Mssql)
        );
        assert_eq!(engine_of_image("postgres:16"), Some(EngineKind::Postgres));
        assert_eq!(
            engine_of_image("docker.io/bitnami/mariadb:11"),
            Some(EngineKind::Mariadb)
        );
        assert_eq!(engine_of_image("nginx:1.25"), None);
    }
}
