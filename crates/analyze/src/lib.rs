//! plumb analysis: raw samples in, serializable result structs out. Nothing here reads the
//! system or writes to the terminal.

use serde::Serialize;

pub mod delta;
pub mod durability;
pub mod io;
pub mod k8s;
pub mod lab;
pub mod mem;
pub mod os;
pub mod sched;
pub mod series;
pub mod sweep;
pub mod units;

/// How much a note matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
}

/// A plain statement drawn from the numbers, for the reader to act on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub level: Level,
    pub text: String,
}

impl Note {
    pub fn new(level: Level, text: impl Into<String>) -> Note {
        Note {
            level,
            text: text.into(),
        }
    }
}

#[cfg(test)]
mod fuzz;
