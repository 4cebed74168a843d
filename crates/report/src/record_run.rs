//! One recording as the charts and exports read it: its derived series (from
//! `plumb_analyze::series`, the one metric list), its objects, its marks, and the names its
//! processes go by in a legend.

use crate::svg::TimeMark;
use plumb_analyze::series::{self, MetricInfo};
use plumb_store::Recording;

/// One recording with its derived-metric catalog and a label for overlays.
pub struct Run<'a> {
    pub label: String,
    /// The run's place on the page (its series and marks refer to it).
    pub index: usize,
    pub rec: &'a Recording,
    pub catalog: Vec<MetricInfo>,
    pub t: Vec<f64>,
}

impl<'a> Run<'a> {
    pub fn new(rec: &'a Recording, label: String) -> Run<'a> {
        Run {
            label,
            index: 0,
            catalog: series::catalog(rec),
            t: series::times_s(rec),
            rec,
        }
    }

    /// When the last sample was taken (the start when there is none).
    pub fn end_unix_ms(&self) -> u64 {
        self.rec.header.started_unix_ms + self.rec.times_ms.last().copied().unwrap_or(0)
    }

    pub fn values(&self, name: &str) -> Option<Vec<f64>> {
        series::find(&self.catalog, name).map(|m| series::compute(self.rec, m))
    }

    pub(crate) fn points(&self, name: &str) -> Option<Vec<(f64, f64)>> {
        let m = series::find(&self.catalog, name)?;
        let v = series::compute(self.rec, m);
        // A slow metric (read about once a second in a faster recording) is drawn through the
        // samples that read it, not broken between them.
        let slow = series::is_slow(self.rec, m);
        let pts: Vec<(f64, f64)> = self
            .t
            .iter()
            .cloned()
            .zip(v)
            .filter(|(_, v)| !slow || v.is_finite())
            .collect();
        Some(pts)
    }

    pub(crate) fn objects(&self, family: &str, suffix: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .catalog
            .iter()
            .filter_map(|m| {
                let rest = m.name.strip_prefix(&format!("{family}."))?;
                let (obj, field) = rest.split_once('.')?;
                (field == suffix).then(|| obj.to_string())
            })
            .collect();
        v.dedup();
        v
    }

    pub(crate) fn marks(&self, prefix: bool) -> Vec<TimeMark> {
        self.rec
            .marks
            .iter()
            .map(|m| TimeMark {
                t_s: m.t_ms as f64 / 1000.0,
                run: self.index,
                label: if prefix {
                    format!("{}: {}", self.label, m.name)
                } else {
                    m.name.clone()
                },
            })
            .collect()
    }
}

/// PostgreSQL's auxiliary processes, as their titles begin (`postgres: walwriter`).
const PG_AUXILIARY: &[&str] = &[
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "autovacuum worker",
    "logical replication launcher",
    "logical replication worker",
    "archiver",
    "stats collector",
    "walsender",
    "walreceiver",
    "walsummarizer",
    "startup",
    "parallel worker",
    "io worker",
];

/// A process title made short for a legend: PostgreSQL's auxiliary processes by their role,
/// its backends as `backend USER@DB` (the state in the title is only what it was doing when
/// first seen), other commands by program name and arguments, cut at 36 characters.
pub fn short_title(title: &str) -> String {
    let words: Vec<&str> = title.split_whitespace().collect();
    if let Some(rest) = title.trim().strip_prefix("postgres: ") {
        // A cluster name may come first ("postgres: main: walwriter").
        let role = rest.rsplit_once(": ").map_or(rest, |(_, r)| r);
        if let Some(a) = PG_AUXILIARY.iter().find(|a| role.starts_with(*a)) {
            return format!("postgres: {a}");
        }
        let w: Vec<&str> = role.split_whitespace().collect();
        if w.len() >= 2 {
            return format!("postgres: backend {}@{}", w[0], w[1]);
        }
    }
    let mut out = match words.split_first() {
        Some((prog, args)) => {
            let base = prog.rsplit('/').next().unwrap_or(prog);
            std::iter::once(base)
                .chain(args.iter().copied())
                .collect::<Vec<_>>()
                .join(" ")
        }
        None => String::new(),
    };
    if out.chars().count() > 36 {
        out = out.chars().take(35).collect::<String>() + "…";
    }
    out
}

/// A process's name in a legend: its PID and, when recorded, its title made short.
pub(crate) fn process_name(r: &Run, pid: &str) -> String {
    let label = r
        .rec
        .object_label(&format!("trace.{pid}"))
        .or_else(|| r.rec.object_label(&format!("proc.{pid}")));
    match label {
        Some(l) => format!("PID {pid} {}", short_title(l)),
        None if pid == "other" => "other processes".into(),
        None => format!("PID {pid}"),
    }
}
