//! What analysis says, as data: a stable code and the facts behind it, each number with its unit
//! as a type. The words are `crates/report`'s (`plumb_report::words`): it writes them in text,
//! HTML and JSON, where the code and the numbers stay machine-readable.
//!
//! JSON is written by `crates/report` alone. A note's or finding's `text`/`statement` is filled
//! in while it serializes, by the [`Speaker`] report puts in place for the length of the write
//! ([`speaking`]); serialized without one, the sentence is the code itself.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::borrow::Cow;
use std::cell::Cell;

/// A number with its unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Quantity {
    /// Things counted (tasks, CPUs, transactions, a PID).
    Count(f64),
    Bytes(f64),
    Seconds(f64),
    /// Percent (0-100).
    Percent(f64),
    /// Events per second.
    PerSecond(f64),
    BytesPerSecond(f64),
    /// A plain ratio or factor (`2.5` times).
    Ratio(f64),
}

impl Quantity {
    /// The number, in the unit the kind names (seconds, bytes, percent…).
    pub fn value(&self) -> f64 {
        match *self {
            Quantity::Count(v)
            | Quantity::Bytes(v)
            | Quantity::Seconds(v)
            | Quantity::Percent(v)
            | Quantity::PerSecond(v)
            | Quantity::BytesPerSecond(v)
            | Quantity::Ratio(v) => v,
        }
    }
}

/// One fact behind a statement: a number with its unit, a name (a process, a setting, a mount
/// point) or a list of names.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    Number(Quantity),
    Text(String),
    List(Vec<String>),
    /// Statements of their own inside this one (a disturbed run's evidence, the processes
    /// behind a window's I/O).
    Notes(Vec<crate::Note>),
    /// A statement of its own (where a belief comes from).
    Said(Said),
}

/// The facts behind a statement, by name, in the order they were given. A number's name is its
/// key in JSON's `numbers` (the unit in the name: `p99_s`, `swap_used_bytes`, `steal_pct`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts(Vec<(Cow<'static, str>, Fact)>);

impl Facts {
    pub fn new() -> Facts {
        Facts::default()
    }

    /// Set a fact (a later value under the same name replaces the earlier one). A number that is
    /// not finite is left out: JSON has no NaN, and the words say "unknown" where one is missing.
    pub fn set(&mut self, name: impl Into<Cow<'static, str>>, f: Fact) {
        if let Fact::Number(q) = &f {
            if !q.value().is_finite() {
                return;
            }
        }
        let name = name.into();
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = f,
            None => self.0.push((name, f)),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Fact> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, f)| f)
    }

    /// A number's value in its own unit; NaN when absent (the words then say "unknown").
    pub fn num(&self, name: &str) -> f64 {
        match self.get(name) {
            Some(Fact::Number(q)) => q.value(),
            _ => f64::NAN,
        }
    }

    pub fn quantity(&self, name: &str) -> Option<Quantity> {
        match self.get(name) {
            Some(Fact::Number(q)) => Some(*q),
            _ => None,
        }
    }

    /// A name; empty when absent.
    pub fn text(&self, name: &str) -> &str {
        match self.get(name) {
            Some(Fact::Text(s)) => s,
            _ => "",
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn list(&self, name: &str) -> &[String] {
        match self.get(name) {
            Some(Fact::List(v)) => v,
            _ => &[],
        }
    }

    pub fn notes(&self, name: &str) -> &[crate::Note] {
        match self.get(name) {
            Some(Fact::Notes(v)) => v,
            _ => &[],
        }
    }

    pub fn said(&self, name: &str) -> Option<&Said> {
        match self.get(name) {
            Some(Fact::Said(s)) => Some(s),
            _ => None,
        }
    }

    /// The numbers, by name: what JSON's `numbers` holds.
    pub fn numbers(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().filter_map(|(k, f)| match f {
            Fact::Number(q) => Some((k.as_ref(), q.value())),
            _ => None,
        })
    }

    /// Every fact, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Fact)> {
        self.0.iter().map(|(k, f)| (k.as_ref(), f))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Builders shared by everything that carries facts.
pub trait WithFacts: Sized {
    fn facts_mut(&mut self) -> &mut Facts;

    fn fact(mut self, name: impl Into<Cow<'static, str>>, f: Fact) -> Self {
        self.facts_mut().set(name, f);
        self
    }
    fn count(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::Count(v)))
    }
    fn bytes(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::Bytes(v)))
    }
    fn secs(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::Seconds(v)))
    }
    fn pct(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::Percent(v)))
    }
    fn per_s(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::PerSecond(v)))
    }
    fn bytes_per_s(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::BytesPerSecond(v)))
    }
    fn ratio(self, name: impl Into<Cow<'static, str>>, v: f64) -> Self {
        self.fact(name, Fact::Number(Quantity::Ratio(v)))
    }
    fn text(self, name: impl Into<Cow<'static, str>>, s: impl Into<String>) -> Self {
        self.fact(name, Fact::Text(s.into()))
    }
    fn list(self, name: impl Into<Cow<'static, str>>, v: Vec<String>) -> Self {
        self.fact(name, Fact::List(v))
    }
    fn notes(self, name: impl Into<Cow<'static, str>>, v: Vec<crate::Note>) -> Self {
        self.fact(name, Fact::Notes(v))
    }
}

/// A statement without a severity of its own: a line of a finding's evidence. Its code names its
/// sentence in `plumb_report::words`.
#[derive(Debug, Clone, PartialEq)]
pub struct Said {
    pub code: Cow<'static, str>,
    pub facts: Facts,
}

impl Said {
    pub fn new(code: impl Into<Cow<'static, str>>) -> Said {
        Said {
            code: code.into(),
            facts: Facts::new(),
        }
    }
}

impl WithFacts for Said {
    fn facts_mut(&mut self) -> &mut Facts {
        &mut self.facts
    }
}

/// Puts statements into words while they serialize. `plumb_report::words` is the one there is.
pub trait Speaker {
    fn note(&self, n: &crate::Note) -> String;
    /// A finding's statement.
    fn finding(&self, f: &Finding) -> String;
    /// A finding's evidence, a line each (with the line saying which phases were disturbed).
    fn evidence(&self, f: &Finding) -> Vec<String>;
    /// A line of evidence, what an experiment set up, and the like.
    fn said(&self, s: &Said) -> String;
}

thread_local! {
    static SPEAKER: Cell<Option<&'static dyn Speaker>> = const { Cell::new(None) };
}

/// Run `f` (a serialization) with `s` wording the notes and findings it meets.
pub fn speaking<R>(s: &'static dyn Speaker, f: impl FnOnce() -> R) -> R {
    let before = SPEAKER.with(|c| c.replace(Some(s)));
    struct Restore(Option<&'static dyn Speaker>);
    impl Drop for Restore {
        fn drop(&mut self) {
            SPEAKER.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(before);
    f()
}

pub(crate) fn speaker() -> Option<&'static dyn Speaker> {
    SPEAKER.with(|c| c.get())
}

/// The words for `x` from the speaker in place, or `fallback` (the code) without one.
pub(crate) fn words(x: impl FnOnce(&dyn Speaker) -> String, fallback: &str) -> String {
    match SPEAKER.with(|c| c.get()) {
        Some(s) => x(s),
        None => fallback.to_string(),
    }
}

/// Statements as their lines, where a struct carries a list of them (`serialize_with`).
pub(crate) fn words_list<S: Serializer>(v: &[Said], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for x in v {
        seq.serialize_element(&words(|w| w.said(x), &x.code))?;
    }
    seq.end()
}

/// A statement as its line (`serialize_with`).
pub(crate) fn as_words<S: Serializer>(v: &Said, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&words(|w| w.said(v), &v.code))
}

/// A statement as its line, where a struct carries one (`serialize_with`).
pub(crate) fn opt_words<S: Serializer>(v: &Option<Said>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_some(&words(|w| w.said(x), &x.code)),
        None => s.serialize_none(),
    }
}

/// A map of the numbers among `facts`, as JSON's `numbers` holds them (whole numbers as
/// integers, milliseconds as seconds).
pub(crate) struct Numbers<'a>(pub &'a Facts, pub &'a [(&'a str, f64)]);

impl Serialize for Numbers<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = std::collections::BTreeMap::new();
        for (k, v) in self.0.numbers().chain(self.1.iter().copied()) {
            m.insert(k, v);
        }
        crate::whole_numbers(&m, s)
    }
}

/// Serialize a map of entries (used by Note's and Finding's hand-written Serialize).
pub(crate) fn entries<S: Serializer>(
    s: S,
    n: usize,
    each: impl FnOnce(&mut S::SerializeMap) -> Result<(), S::Error>,
) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(n))?;
    each(&mut m)?;
    m.end()
}

// ---------------------------------------------------------------------------------------------
// Findings (the lab's)

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warn,
    Critical,
}

/// A finding: its rule (code), severity and the facts behind it (numbers with their units as
/// types, names), the evidence as statements of their own, and where it came from. The sentences
/// are `plumb_report::words`'s; JSON carries them beside the rule and the numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    /// The rule's code: short, stable across versions (for scripts).
    pub rule: String,
    /// The figures behind the statement (JSON's `numbers`, the unit in the name: `p99_s`,
    /// `queue_mean`, `bytes`) and the names it mentions.
    pub facts: Facts,
    /// The evidence: statements of their own.
    pub evidence: Vec<Evidence>,
    /// The lab phases whose figures it is drawn from: a finding drawn from a disturbed phase
    /// is lowered to info and says why.
    pub phases: Vec<String>,
    /// What plumb set up to get it, when the finding is about one of its own experiments (a
    /// setting of its private instance) rather than about the server or the host: it must not
    /// be read as a fact about the server's configuration.
    pub experiment: Option<Said>,
    /// Set when phases it is drawn from were disturbed by other work on the host.
    pub disturbed: Option<Disturbed>,
}

/// A line of a finding's evidence: a note of an analysis, or a statement of its own.
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    Note(crate::Note),
    Said(Said),
}

/// The phases of a finding that other work on the host disturbed.
#[derive(Debug, Clone, PartialEq)]
pub struct Disturbed {
    pub phases: Vec<String>,
    /// The busiest other process in them: PID and command.
    pub neighbour: Option<(u32, String)>,
    /// The finding was a warning or worse and was lowered to info for it.
    pub lowered: bool,
}

impl Serialize for Finding {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let statement = crate::said::words(|w| w.finding(self), &self.rule);
        let evidence = match crate::said::speaker() {
            Some(w) => w.evidence(self),
            None => self
                .evidence
                .iter()
                .map(|e| match e {
                    Evidence::Note(n) => n.code.to_string(),
                    Evidence::Said(x) => x.code.to_string(),
                })
                .collect(),
        };
        let extra: Vec<(&str, f64)> = self
            .disturbed
            .iter()
            .map(|d| ("disturbed_phases", d.phases.len() as f64))
            .collect();
        let experiment = self
            .experiment
            .as_ref()
            .map(|x| crate::said::words(|w| w.said(x), &x.code));
        let n = 5 + !self.phases.is_empty() as usize + experiment.is_some() as usize;
        crate::said::entries(s, n, |m| {
            m.serialize_entry("severity", &self.severity)?;
            m.serialize_entry("rule", &self.rule)?;
            m.serialize_entry("statement", &statement)?;
            m.serialize_entry("numbers", &crate::said::Numbers(&self.facts, &extra))?;
            m.serialize_entry("evidence", &evidence)?;
            if !self.phases.is_empty() {
                m.serialize_entry("phases", &self.phases)?;
            }
            if let Some(x) = &experiment {
                m.serialize_entry("experiment", x)?;
            }
            Ok(())
        })
    }
}

impl Finding {
    pub fn new(severity: Severity, rule: &str) -> Finding {
        Finding {
            severity,
            rule: rule.to_string(),
            facts: Facts::new(),
            evidence: Vec::new(),
            phases: Vec::new(),
            experiment: None,
            disturbed: None,
        }
    }

    /// The finding is about plumb's own experiment: what plumb set up for it.
    pub fn experiment(mut self, what: Said) -> Finding {
        self.experiment = Some(what);
        self
    }

    /// The phases it is drawn from.
    pub fn phases(mut self, p: Vec<String>) -> Finding {
        self.phases = p;
        self
    }

    pub fn evidence(mut self, e: Vec<Evidence>) -> Finding {
        self.evidence = e;
        self
    }
}

impl WithFacts for Finding {
    fn facts_mut(&mut self) -> &mut Facts {
        &mut self.facts
    }
}
