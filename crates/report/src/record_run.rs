//! One recording as the charts and exports read it: its derived series (from
//! `plumb_analyze::series`, the one metric list), its objects, its marks, and the names its
//! processes go by in a legend.

use crate::svg::TimeMark;
use plumb_analyze::derive::{Definition, DeriveError};
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
    /// Series computed from the recorded ones (`--series`), in the order defined.
    pub derived: Vec<DerivedSeries>,
}

/// A series computed from the recording's (`plumb_analyze::derive`).
pub struct DerivedSeries {
    pub name: String,
    /// Its expression as given.
    pub text: String,
    /// Its unit from its operands' (empty: a ratio or a plain number).
    pub unit: String,
    pub values: Vec<f64>,
    /// Read from a slow series (drawn through the samples with a value, not broken between).
    pub slow: bool,
}

impl<'a> Run<'a> {
    pub fn new(rec: &'a Recording, label: String) -> Run<'a> {
        Run {
            label,
            index: 0,
            catalog: series::catalog(rec),
            t: series::times_s(rec),
            rec,
            derived: Vec::new(),
        }
    }

    fn derived(&self, name: &str) -> Option<&DerivedSeries> {
        self.derived.iter().find(|d| d.name == name)
    }

    /// Whether the run has the series, recorded or derived.
    pub fn has(&self, name: &str) -> bool {
        series::find(&self.catalog, name).is_some() || self.derived(name).is_some()
    }

    /// A series' unit (`B`, `%`, `/s`, …), recorded or derived.
    pub fn unit(&self, name: &str) -> Option<String> {
        match series::find(&self.catalog, name) {
            Some(m) => Some(m.unit.to_string()),
            None => self.derived(name).map(|d| d.unit.clone()),
        }
    }

    fn slow(&self, name: &str) -> bool {
        match series::find(&self.catalog, name) {
            Some(m) => series::is_slow(self.rec, m),
            None => self.derived(name).is_some_and(|d| d.slow),
        }
    }

    /// Compute a definition over this run and keep it as a series. None: a series it reads is
    /// not in this run (the caller says so when no run has it).
    pub fn derive(&mut self, d: &Definition) -> Result<Option<()>, DeriveError> {
        if self.has(&d.name) {
            return Err(DeriveError(format!(
                "{}: the name is taken by a series already there; give the new one another",
                d.name
            )));
        }
        let names = d.expr.names();
        if names.iter().any(|n| !self.has(n)) {
            return Ok(None);
        }
        let unit = d
            .expr
            .unit(&|n| self.unit(n).unwrap_or_default())?
            .unwrap_or_default();
        // A ratio named for its unit (`used_pct = used / total * 100`) is in that unit.
        let unit = match unit.as_str() {
            "" if d.name.ends_with("_pct") => "%".to_string(),
            _ => unit,
        };
        let values = d.expr.eval(&|n| self.values(n), &self.t)?;
        let slow = names.iter().any(|n| self.slow(n));
        self.derived.push(DerivedSeries {
            name: d.name.clone(),
            text: d.text.clone(),
            unit,
            values,
            slow,
        });
        Ok(Some(()))
    }

    /// When the last sample was taken (the start when there is none).
    pub(crate) fn end_unix_ms(&self) -> u64 {
        self.rec.header.started_unix_ms + self.rec.times_ms.last().copied().unwrap_or(0)
    }

    pub fn values(&self, name: &str) -> Option<Vec<f64>> {
        match series::find(&self.catalog, name) {
            Some(m) => Some(series::compute(self.rec, m)),
            None => self.derived(name).map(|d| d.values.clone()),
        }
    }

    pub(crate) fn points(&self, name: &str) -> Option<Vec<(f64, f64)>> {
        let v = self.values(name)?;
        // A slow metric (read about once a second in a faster recording) is drawn through the
        // samples that read it, not broken between them.
        let slow = self.slow(name);
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

/// Define `NAME = EXPRESSION` series on every run, in order (a later one may use an earlier
/// one). A definition is computed on each run that has what it reads; one that no run can
/// compute is an error naming the series missing.
pub fn derive_all(runs: &mut [Run], specs: &[String]) -> Result<(), DeriveError> {
    for spec in specs {
        let at = |e: DeriveError| DeriveError(format!("--series '{spec}': {e}"));
        let d = plumb_analyze::derive::parse(spec).map_err(at)?;
        let mut done = 0;
        for r in runs.iter_mut() {
            if r.derive(&d).map_err(at)?.is_some() {
                done += 1;
            }
        }
        if done == 0 {
            let missing: Vec<&str> = d
                .expr
                .names()
                .into_iter()
                .filter(|n| !runs.iter().any(|r| r.has(n)))
                .collect();
            let what = if missing.is_empty() {
                "the series it reads are not all in one recording".to_string()
            } else {
                format!(
                    "{}: not in the recording{} (list its series with: plumb export {} --list)",
                    missing.join(", "),
                    if runs.len() > 1 { "s" } else { "" },
                    runs.first()
                        .map_or("FILE".into(), |r| r.rec.path.display().to_string())
                )
            };
            return Err(at(DeriveError(what)));
        }
    }
    Ok(())
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
pub(crate) fn short_title(title: &str) -> String {
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
