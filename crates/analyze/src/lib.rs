//! plumb analysis: raw samples in, serializable result structs out. Nothing here reads the
//! system or writes to the terminal.

use serde::Serialize;

pub mod ag;
pub mod compare;
pub mod delta;
pub mod delta_verdict;
pub mod derive;
pub mod durability_probe;
pub mod explain;
pub mod histogram;
pub mod interference;
pub mod io;
pub mod io_verdict;
pub mod k8s;
pub mod k8s_spec;
pub mod lab;
pub mod load;
pub mod load_verdict;
pub mod mem;
pub mod memfig;
pub mod openmetrics;
pub mod os;
pub mod record;
pub mod recording_verdict;
pub mod repl;
pub mod said;
pub mod sched;
pub mod series;
pub mod statements;
pub mod stats;
pub mod sweep;
pub mod trace;
pub mod units;
pub mod verdict;

pub use said::WithFacts;

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
}

/// A plain statement drawn from the numbers, for the reader to act on: a stable `code` for
/// scripts and the facts behind it (numbers with their units as types, and names). The sentence
/// is `plumb_report::words`'s; JSON carries the code, the sentence and the numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    pub level: Level,
    /// Short, stable across versions (`swap-hides-shared-memory`): scripts match on it.
    pub code: &'static str,
    pub facts: said::Facts,
}

impl Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let text = said::words(|w| w.note(self), self.code);
        let has_numbers = self.facts.numbers().next().is_some();
        said::entries(s, 3 + has_numbers as usize, |m| {
            m.serialize_entry("level", &self.level)?;
            m.serialize_entry("code", self.code)?;
            m.serialize_entry("text", &text)?;
            if has_numbers {
                m.serialize_entry("numbers", &said::Numbers(&self.facts, &[]))?;
            }
            Ok(())
        })
    }
}

/// Figures by name, whole ones written as integers (a count of 812, not 812.0), durations in
/// seconds (`p50_ms` 1.5 is written `p50_s` 0.0015: one time unit per document).
pub(crate) fn whole_numbers<K: AsRef<str> + Ord, S: serde::Serializer>(
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
    pub fn new(level: Level, code: &'static str) -> Note {
        Note {
            level,
            code,
            facts: said::Facts::new(),
        }
    }
}

impl said::WithFacts for Note {
    fn facts_mut(&mut self) -> &mut said::Facts {
        &mut self.facts
    }
}

#[cfg(test)]
mod fuzz;
