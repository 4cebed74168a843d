//! A job as the user gave it (`plumb io run` and `sweep`'s flags, as text): a preset or the
//! defaults, each setting given laid over it, checked. A refusal names the flag.

use crate::job::{self, Burst, Durability, EngineKind, Job, Pattern};
use plumb_sys::units::{parse_duration, parse_rate, parse_size};
use std::path::PathBuf;

/// A value refused, naming its flag and what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The job's settings; each one given overrides the preset's.
#[derive(Debug, Default, Clone)]
pub struct JobSpec {
    pub preset: Option<String>,
    pub duration: Option<String>,
    pub warmup: Option<String>,
    pub cooldown: Option<String>,
    pub threads: Option<u32>,
    pub qd: Option<u32>,
    pub bs: Option<String>,
    pub pattern: Option<String>,
    pub stride: Option<String>,
    pub align: Option<String>,
    pub write_pct: Option<u8>,
    pub size: Option<String>,
    pub durability: Option<String>,
    pub rate: Option<String>,
    pub rate_per_thread: bool,
    pub burst: Option<u32>,
    pub think: Option<String>,
    pub seed: Option<u64>,
    pub ioengine: Option<String>,
    pub batch_complete: Option<u32>,
    pub batch_submit: Option<u32>,
}

fn flag<T, E: std::fmt::Display>(name: &str, r: Result<T, E>) -> Result<T, Refused> {
    r.map_err(|e| Refused(format!("{name}: {e}")))
}

impl JobSpec {
    /// The job on `targets`: the preset (or the defaults) with every setting given, checked.
    pub fn job(&self, targets: Vec<PathBuf>) -> Result<Job, Refused> {
        let f = self;
        let mut j = match &f.preset {
            Some(p) => job::preset(p).ok_or_else(|| {
                Refused(format!(
                    "--preset {p}: no such preset (one of: {})",
                    job::PRESETS
                        .iter()
                        .map(|p| p.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
            None => Job::new("custom"),
        };
        j.targets = targets;
        if let Some(v) = &f.duration {
            j.duration = flag("--duration", parse_duration(v))?;
        }
        if let Some(v) = &f.warmup {
            j.warmup = flag("--warmup", parse_duration(v))?;
        }
        if let Some(v) = &f.cooldown {
            j.cooldown = flag("--cooldown", parse_duration(v))?;
        }
        if let Some(v) = f.threads {
            j.threads = v;
        }
        if let Some(v) = f.qd {
            j.queue_depth = v;
        }
        if let Some(v) = &f.bs {
            let b = flag("--bs", parse_size(v))?;
            j.block_size = u32::try_from(b).map_err(|_| Refused(format!("--bs {v}: too large")))?;
        }
        if let Some(v) = &f.pattern {
            j.pattern = match v.as_str() {
                "random" | "rand" => Pattern::Random,
                "sequential" | "seq" => Pattern::Sequential,
                _ => return Err(Refused(format!("--pattern {v}: use random or sequential"))),
            };
        }
        if let Some(v) = &f.stride {
            j.stride = Some(flag("--stride", parse_size(v))?);
        }
        if let Some(v) = &f.align {
            j.align = Some(flag("--align", parse_size(v))?);
        }
        if let Some(v) = f.write_pct {
            j.write_pct = v;
        }
        if let Some(v) = &f.size {
            j.file_size = flag("--size", parse_size(v))?;
        }
        if let Some(v) = &f.durability {
            j.durability = flag("--durability", Durability::parse(v))?;
        }
        if let Some(v) = &f.rate {
            j.rate = Some(flag("--rate", parse_rate(v))?);
        }
        if f.rate_per_thread {
            if j.rate.is_none() {
                return Err(Refused("--rate-per-thread needs --rate".into()));
            }
            j.rate_per_thread = true;
        }
        match (f.burst, &f.think) {
            (Some(ios), Some(t)) => {
                if ios == 0 {
                    return Err(Refused("--burst 0: a burst needs at least one I/O".into()));
                }
                j.burst = Some(Burst {
                    ios,
                    think: flag("--think", parse_duration(t))?,
                })
            }
            (None, None) => {}
            _ => return Err(Refused("--burst and --think go together".into())),
        }
        if let Some(v) = f.seed {
            j.seed = v;
        }
        if let Some(v) = &f.ioengine {
            j.engine = flag("--ioengine", EngineKind::parse(v))?;
        }
        if let Some(v) = f.batch_complete {
            j.batch_complete = v;
        }
        if let Some(v) = f.batch_submit {
            j.batch_submit = Some(v);
        }
        j.validate().map_err(|e| Refused(e.0))?;
        Ok(j)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_lay_over_the_preset_and_refusals_name_the_flag() {
        let j = JobSpec {
            bs: Some("64K".into()),
            qd: Some(8),
            ..Default::default()
        }
        .job(vec!["/tmp/x".into()])
        .unwrap();
        assert_eq!((j.block_size, j.queue_depth), (65536, 8));
        let e = JobSpec {
            burst: Some(4),
            ..Default::default()
        }
        .job(vec![])
        .unwrap_err();
        assert_eq!(e.0, "--burst and --think go together");
        let e = JobSpec {
            preset: Some("nope".into()),
            ..Default::default()
        }
        .job(vec![])
        .unwrap_err();
        assert!(e.0.starts_with("--preset nope: no such preset"), "{e}");
    }
}
