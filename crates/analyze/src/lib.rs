//! plumb analysis: raw samples in, serializable result structs out. Nothing here reads the
//! system or writes to the terminal.

use serde::Serialize;

pub mod ag;
pub mod delta;
pub mod durability;
pub mod interference;
pub mod io;
pub mod k8s;
pub mod k8s_spec;
pub mod lab;
pub mod mem;
pub mod memfig;
pub mod openmetrics;
pub mod os;
pub mod record;
pub mod repl;
pub mod sched;
pub mod series;
pub mod sweep;
pub mod trace;
pub mod units;

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
}

/// A plain statement drawn from the numbers, for the reader to act on: a stable `code` for
/// scripts, the figures behind it in `numbers` (unit in the name), and the sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub level: Level,
    /// Short, stable across versions (`swap-hides-shared-memory`): scripts match on it.
    pub code: &'static str,
    pub text: String,
    #[serde(
        skip_serializing_if = "std::collections::BTreeMap::is_empty",
        serialize_with = "whole_numbers"
    )]
    pub numbers: std::collections::BTreeMap<&'static str, f64>,
}

/// Figures by name, whole ones written as integers (a count of 812, not 812.0), durations in
/// seconds (`p50_ms` 1.5 is written `p50_s` 0.0015: one time unit per document).
pub fn whole_numbers<K: AsRef<str> + Ord, S: serde::Serializer>(
    m: &std::collections::BTreeMap<K, f64>,
    s: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = s.serialize_map(Some(m.len()))?;
    for (k, v) in m {
        let (k, v) = plumb_sys::json::in_seconds(k.as_ref(), *v);
        if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
            map.serialize_entry(&k, &(v as i64))?;
        } else {
            map.serialize_entry(&k, &v)?;
        }
    }
    map.end()
}

impl Note {
    pub fn new(level: Level, code: &'static str, text: impl Into<String>) -> Note {
        Note {
            level,
            code,
            text: text.into(),
            numbers: Default::default(),
        }
    }

    /// A figure behind the note (left out when not finite: JSON has no NaN).
    pub fn with(mut self, name: &'static str, v: f64) -> Note {
        if v.is_finite() {
            self.numbers.insert(name, v);
        }
        self
    }
}

#[cfg(test)]
mod fuzz;
