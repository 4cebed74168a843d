//! plumb's metrics in Prometheus's terms, derived from the one metric list (`series::RULES`):
//! every raw metric a recording holds gets a family name, a type, a base unit and the factor that
//! turns its raw value into that unit.
//!
//! Prometheus computes rates itself, so counters are exposed as counters, in base units:
//! `disk.vda.reads` (the raw count behind `disk.vda.read_iops`) is `plumb_disk_reads_total
//! {device="vda"}`; CPU ticks are seconds (`plumb_cpu_seconds_total{cpu="cpu0",mode="user"}`, as
//! node_exporter's, with no `cpu="all"` series beside the CPUs), pages are bytes,
//! milliseconds and nanoseconds are seconds. Gauges keep the derived name with the unit as a
//! base-unit suffix (`plumb_mem_free_bytes`, `plumb_engine_replication_replay_lag_seconds`;
//! percentages become ratios, a `_count` suffix is dropped because OpenMetrics reserves it).
//! The object a name carries becomes a label (`cpu`, `device`, `pid`, `tree`, `role`,
//! `resource`, `process`); an engine's statistics set is part of the name
//! (`plumb_engine_db_commits_total`).

use crate::series::{How, RULES};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromType {
    Counter,
    Gauge,
}

impl PromType {
    pub fn as_str(self) -> &'static str {
        match self {
            PromType::Counter => "counter",
            PromType::Gauge => "gauge",
        }
    }
}

/// A metric family: what `# TYPE`, `# UNIT` and `# HELP` say.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name (a counter's samples add `_total`).
    pub name: String,
    pub kind: PromType,
    /// `seconds`, `bytes`, `ratio`, or empty.
    pub unit: &'static str,
    pub help: &'static str,
}

impl Family {
    /// The name of the family's samples.
    pub fn sample_name(&self) -> String {
        match self.kind {
            PromType::Counter => format!("{}_total", self.name),
            PromType::Gauge => self.name.clone(),
        }
    }
}

/// One raw metric as a Prometheus series.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub family: Family,
    /// The plumb name of the rule's derived metric (`disk.vda.read_iops`).
    pub plumb_name: String,
    /// The object's labels (`device="vda"`), in this order.
    pub labels: Vec<(&'static str, String)>,
    /// The raw value times this is the value in the family's unit.
    pub factor: f64,
}

impl Series {
    /// A raw value in the family's unit. Dividing by a whole divisor (100 ticks a second,
    /// 1000 ms) keeps the figure as written (8704.88 s, not 8704.880000000001).
    pub fn apply(&self, raw: u64) -> f64 {
        let v = raw as f64;
        if self.factor < 1.0 {
            let inv = 1.0 / self.factor;
            if (inv - inv.round()).abs() < 1e-6 {
                return v / inv.round();
            }
        }
        v * self.factor
    }
}

/// What turns ticks and pages into seconds and bytes on the recorded host.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub clock_ticks_per_s: f64,
    pub page_size_bytes: f64,
}

impl Default for Scale {
    fn default() -> Self {
        Scale {
            clock_ticks_per_s: 100.0,
            page_size_bytes: 4096.0,
        }
    }
}

/// The help of `plumb_cpu_seconds`, whose members are several rules.
const CPU_HELP: &str = "time the CPU spent in each mode, from /proc/stat (user includes nice, irq includes softirq; guest time is in user)";

/// A rule's help as its Prometheus family's: a percentage plumb derives is a counter of
/// seconds here, so what the help says of percent is said of the counter instead.
fn prom_help(rule: &crate::series::Rule) -> &'static str {
    match (rule.family, rule.raw) {
        ("proc", "cpu_ticks") => "CPU time of the process (user and system)",
        ("tree", "cpu_ticks") => {
            "CPU time of the tree, exited members and reaped children included"
        }
        ("role", "cpu_ticks") => "CPU time of this role's processes",
        ("sched", "run_delay_ns") => "task time spent waiting for this CPU, summed over the tasks",
        ("tree", "run_delay_ns") => "time the tree's threads waited for a CPU, summed over them",
        ("trace", "syscall_ns") => {
            "time inside syscalls, blocking included, summed over the threads (--trace)"
        }
        _ => rule.help,
    }
}

/// Prefix of every family plumb exposes.
pub const PREFIX: &str = "plumb_";

/// `[a-zA-Z0-9_]` only: anything else becomes `_`.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A raw counter's name in base units, and the factor to get there.
fn counter_from_raw(raw: &str, scale: &Scale) -> (String, f64, &'static str) {
    let conv: [(&str, &str, f64, &str); 7] = [
        ("_ns", "_seconds", 1e-9, "seconds"),
        ("_us", "_seconds", 1e-6, "seconds"),
        ("_ms", "_seconds", 1e-3, "seconds"),
        (
            "_ticks",
            "_seconds",
            1.0 / scale.clock_ticks_per_s,
            "seconds",
        ),
        ("_pages", "_bytes", scale.page_size_bytes, "bytes"),
        ("_bytes", "_bytes", 1.0, "bytes"),
        ("_seconds", "_seconds", 1.0, "seconds"),
    ];
    for (suffix, to, f, unit) in conv {
        if let Some(stem) = raw.strip_suffix(suffix) {
            return (format!("{stem}{to}"), f, unit);
        }
    }
    (raw.to_string(), 1.0, "")
}

/// The family base name (without prefix and family), the factor and the unit of a rule.
fn base(rule: &crate::series::Rule, field: &str, scale: &Scale) -> (String, f64, &'static str) {
    let d = rule.derived;
    match rule.how {
        How::Gauge(f) => {
            if let Some(s) = d.strip_suffix("_ms") {
                (format!("{s}_seconds"), f / 1000.0, "seconds")
            } else if let Some(s) = d.strip_suffix("_pct") {
                (format!("{s}_ratio"), f / 100.0, "ratio")
            } else if d.ends_with("_bytes") {
                (d.to_string(), f, "bytes")
            } else if let Some(s) = d.strip_suffix("_count") {
                (s.to_string(), f, "")
            } else if let Some(s) = d.strip_suffix("_bytes_per_s") {
                // A rate the server averages itself, kept as a gauge (as a link's speed is):
                // `send_rate_bytes`.
                (format!("{s}_bytes"), f, "bytes")
            } else {
                (d.to_string(), f, "")
            }
        }
        How::Rate(f) => {
            if let Some(s) = d.strip_suffix("_bytes_per_s") {
                (format!("{s}_bytes"), f, "bytes")
            } else if let Some(s) = d.strip_suffix("_per_s") {
                (s.to_string(), f, "")
            } else if let Some(s) = d.strip_suffix("_iops") {
                (format!("{s}s"), f, "")
            } else {
                // A rate that is not "per second" (a queue length from time-weighted ms):
                // the counter as it is kept.
                counter_from_raw(field, scale)
            }
        }
        How::PagesPerS => {
            let s = d.strip_suffix("_per_s").unwrap_or(d);
            (s.to_string(), scale.page_size_bytes, "bytes")
        }
        How::PctOfTime(_)
        | How::PctOfTicks
        | How::TicksPct
        | How::PerOp(_)
        | How::PerOpScaled(..) => counter_from_raw(field, scale),
    }
}

/// The labels of a family's object, or None when the object is part of the name.
fn object_labels(family: &str, object: &str) -> Vec<(&'static str, String)> {
    let one = |k: &'static str| vec![(k, object.to_string())];
    match family {
        "cpu" | "sched" => one("cpu"),
        "disk" => one("device"),
        "psi" => one("resource"),
        "proc" => one("pid"),
        "tree" => one("tree"),
        "trace" => one("process"),
        "stmt" => one("statement"),
        "recorder" => one("kind"),
        "role" => match object.split_once('-') {
            Some((tree, role)) => vec![("tree", tree.to_string()), ("role", role.to_string())],
            None => one("role"),
        },
        _ => one("object"),
    }
}

/// A raw metric (`disk.vda.read_time_ms`) as a Prometheus series, if plumb's metric list
/// knows it.
pub fn series_of(raw: &str, scale: &Scale) -> Option<Series> {
    let mut it = raw.splitn(3, '.');
    let fam = it.next()?;
    let second = it.next()?;
    let (obj, field) = match it.next() {
        Some(f) => (Some(second), f),
        None => (None, second),
    };
    let rule = RULES
        .iter()
        .find(|r| r.family == fam && r.raw == field && r.per_object == obj.is_some())?;
    let (b, factor, unit) = base(rule, field, scale);
    let kind = match rule.how {
        How::Gauge(_) => PromType::Gauge,
        _ => PromType::Counter,
    };
    let mut help = prom_help(rule);
    let (name, labels) = match (fam, obj) {
        // No aggregate beside its parts: Prometheus sums the CPUs itself.
        ("cpu", Some("all")) => return None,
        // node_exporter's shape: one family, the mode a label.
        ("cpu", Some(o)) if field.ends_with("_ticks") => {
            help = CPU_HELP;
            (
                format!("{PREFIX}cpu_seconds"),
                vec![
                    ("cpu", o.to_string()),
                    ("mode", field.trim_end_matches("_ticks").to_string()),
                ],
            )
        }
        // A backend type, a session state, a wait class: labels, as postgres_exporter's.
        ("engine", Some(set)) if set.starts_with("io_") => (
            format!("{PREFIX}engine_io_{b}"),
            vec![("backend_type", set["io_".len()..].to_string())],
        ),
        ("engine", Some("activity")) if field.starts_with("waiting_") => {
            help = "active sessions waiting, by wait event type (PostgreSQL's pg_stat_activity)";
            (
                format!("{PREFIX}engine_activity_waiting"),
                vec![("wait_class", field["waiting_".len()..].to_string())],
            )
        }
        ("engine", Some("activity")) if field.starts_with("sessions_") => {
            help = "client sessions by state (PostgreSQL's pg_stat_activity; plumb's own left out)";
            (
                format!("{PREFIX}engine_activity_sessions"),
                vec![("state", field["sessions_".len()..].to_string())],
            )
        }
        ("engine", Some(set)) => (format!("{PREFIX}engine_{}_{b}", sanitize(set)), vec![]),
        (_, Some(o)) => (format!("{PREFIX}{fam}_{b}"), object_labels(fam, o)),
        (_, None) => (format!("{PREFIX}{fam}_{b}"), vec![]),
    };
    let plumb_name = match obj {
        Some(o) => format!("{fam}.{o}.{}", rule.derived),
        None => format!("{fam}.{}", rule.derived),
    };
    Some(Series {
        plumb_name,
        family: Family {
            name: sanitize(&name),
            kind,
            unit,
            help,
        },
        labels,
        factor,
    })
}

/// Escape a label value: backslash, double quote and newline.
pub fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A raw name for every rule, with an object where the rule has one.
    fn raw_of(r: &crate::series::Rule) -> String {
        let obj = match r.family {
            "disk" => "vda",
            "cpu" | "sched" => "cpu0",
            "role" => "4242-backend",
            "engine" => "db",
            _ => "4242",
        };
        if r.per_object {
            format!("{}.{obj}.{}", r.family, r.raw)
        } else {
            format!("{}.{}", r.family, r.raw)
        }
    }

    #[test]
    fn every_rule_has_a_valid_unique_name_in_base_units() {
        let s = Scale::default();
        let mut seen = HashSet::new();
        let reserved = ["_total", "_count", "_sum", "_bucket", "_created", "_info"];
        let mut raws = HashSet::new();
        for r in RULES {
            let raw = raw_of(r);
            // A raw counter is one series however many figures are derived from it
            // (a statement's time: its share of the time and its mean per call).
            if !raws.insert(raw.clone()) {
                continue;
            }
            let m = series_of(&raw, &s).unwrap_or_else(|| panic!("{raw} has no series"));
            let n = &m.family.name;
            assert!(n.starts_with(PREFIX), "{n}");
            assert!(
                n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{n}"
            );
            assert!(
                !reserved.iter().any(|x| n.ends_with(x)),
                "{n} ends in a suffix OpenMetrics reserves"
            );
            assert!(
                m.family.unit.is_empty() || n.ends_with(&format!("_{}", m.family.unit)),
                "{n}: OpenMetrics wants the unit {} as the name's suffix",
                m.family.unit
            );
            assert!(
                !n.ends_with("_ms") && !n.ends_with("_pct") && !n.contains("_per_s"),
                "{n} is not in base units"
            );
            assert!(m.factor.is_finite() && m.factor > 0.0, "{n}");
            // Two rules of one family (same object) never share a name.
            let key = (n.clone(), m.labels.clone());
            assert!(seen.insert(key), "{n} twice ({raw})");
        }
    }

    #[test]
    fn a_counters_help_says_nothing_of_percent() {
        let s = Scale::default();
        for r in RULES {
            let m = series_of(&raw_of(r), &s).unwrap();
            if m.family.kind == PromType::Counter {
                let h = m.family.help;
                assert!(
                    !h.contains('%') && !h.contains("percent"),
                    "{}: {h}",
                    m.family.name
                );
            }
        }
    }

    #[test]
    fn names_units_and_factors() {
        let s = Scale {
            clock_ticks_per_s: 100.0,
            page_size_bytes: 4096.0,
        };
        let m = series_of("disk.vda.reads", &s).unwrap();
        assert_eq!(m.family.sample_name(), "plumb_disk_reads_total");
        assert_eq!(m.plumb_name, "disk.vda.read_iops");
        assert_eq!(m.labels, vec![("device", "vda".to_string())]);
        let m = series_of("disk.vda.read_time_ms", &s).unwrap();
        assert_eq!(m.family.name, "plumb_disk_read_time_seconds");
        assert_eq!((m.family.unit, m.factor), ("seconds", 1e-3));
        // One family, the mode a label; no all-CPUs series beside the CPUs.
        assert!(series_of("cpu.all.user_ticks", &s).is_none());
        let m = series_of("cpu.cpu1.user_ticks", &s).unwrap();
        assert_eq!(m.family.sample_name(), "plumb_cpu_seconds_total");
        assert_eq!(
            m.labels,
            vec![("cpu", "cpu1".to_string()), ("mode", "user".to_string())]
        );
        assert_eq!(m.factor, 0.01);
        assert_eq!(format!("{}", m.apply(870488)), "8704.88");
        let m = series_of("mem.swap_in_pages", &s).unwrap();
        assert_eq!(m.family.sample_name(), "plumb_mem_swap_in_bytes_total");
        assert_eq!(m.factor, 4096.0);
        let m = series_of("mem.free_bytes", &s).unwrap();
        assert_eq!(
            (m.family.sample_name().as_str(), m.family.kind),
            ("plumb_mem_free_bytes", PromType::Gauge)
        );
        let m = series_of("psi.memory.full_us", &s).unwrap();
        assert_eq!(m.family.name, "plumb_psi_full_seconds");
        assert_eq!(m.labels, vec![("resource", "memory".to_string())]);
        let m = series_of("engine.db.xact_commit", &s).unwrap();
        assert_eq!(m.family.sample_name(), "plumb_engine_db_commits_total");
        assert!(m.labels.is_empty());
        let m = series_of("engine.replication.replay_lag_ms", &s).unwrap();
        assert_eq!(m.family.name, "plumb_engine_replication_replay_lag_seconds");
        let m = series_of("engine.activity.sessions_active", &s).unwrap();
        assert_eq!(m.family.name, "plumb_engine_activity_sessions");
        assert_eq!(m.labels, vec![("state", "active".to_string())]);
        let m = series_of("engine.activity.waiting_lwlock", &s).unwrap();
        assert_eq!(m.family.name, "plumb_engine_activity_waiting");
        assert_eq!(m.labels, vec![("wait_class", "lwlock".to_string())]);
        let m = series_of("engine.io_client.write_bytes", &s).unwrap();
        assert_eq!(m.family.sample_name(), "plumb_engine_io_write_bytes_total");
        assert_eq!(m.labels, vec![("backend_type", "client".to_string())]);
        let m = series_of("role.77-checkpointer.cpu_ticks", &s).unwrap();
        assert_eq!(m.family.name, "plumb_role_cpu_seconds");
        assert_eq!(
            m.labels,
            vec![
                ("tree", "77".to_string()),
                ("role", "checkpointer".to_string())
            ]
        );
        assert!(series_of("slow.samples", &s).is_none());
        assert!(series_of("disk.vda.no_such_field", &s).is_none());
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
