//! One raw value of a sample: a name, whether it counts up or is a level, and the number.
//! Shared by the sampler (`rawsample`) and the process trees it reads (`proctree`).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawKind {
    Counter,
    Gauge,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RawValue {
    pub name: String,
    pub kind: RawKind,
    pub value: u64,
}
