//! What a storage test does: the job, its durability mode, and the named database presets.

use plumb_sys::units::Rate;
use serde::{Serialize, Serializer};
use std::path::PathBuf;
use std::time::Duration;

/// A job setting refused, naming the flag it came from and what it takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

impl From<String> for JobError {
    fn from(s: String) -> JobError {
        JobError(s)
    }
}

impl From<plumb_sys::units::UnitError> for JobError {
    fn from(e: plumb_sys::units::UnitError) -> JobError {
        JobError(e.0)
    }
}

impl From<&str> for JobError {
    fn from(s: &str) -> JobError {
        JobError(s.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// io_uring with registered buffers and files, batched submission.
    IoUring,
    /// Blocking pread/pwrite, one thread per outstanding I/O.
    Psync,
    /// No I/O at all: completes every request at once. Tests the tool itself.
    Null,
}

impl EngineKind {
    pub fn parse(s: &str) -> Result<EngineKind, JobError> {
        match s {
            "io_uring" | "uring" | "io-uring" => Ok(EngineKind::IoUring),
            "psync" | "sync" => Ok(EngineKind::Psync),
            "null" => Ok(EngineKind::Null),
            _ => Err(format!("{s:?} is not an engine (io_uring, psync or null)").into()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::IoUring => "io_uring",
            EngineKind::Psync => "psync",
            EngineKind::Null => "null",
        }
    }
}

/// How each write is made durable, and whether the page cache is bypassed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Buffered I/O through the page cache; nothing is durable.
    None,
    /// O_DIRECT: bypasses the page cache; durable only if the device has no volatile cache.
    Direct,
    /// O_DSYNC through the page cache: each write returns once durable.
    Dsync,
    /// O_DIRECT|O_DSYNC: the FUA path on devices that support FUA.
    DirectDsync,
    /// fdatasync() after every `every` writes (a cache FLUSH).
    Fdatasync { every: u32, direct: bool },
    /// fsync() after every `every` writes.
    Fsync { every: u32, direct: bool },
}

impl Durability {
    pub fn parse(s: &str) -> Result<Durability, JobError> {
        let (base, every) = match s.split_once(':') {
            Some((b, n)) => (
                b,
                n.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("{s:?}: the number after `:` must be a count of writes, 1 or more")
                })?,
            ),
            None => (s, 1),
        };
        let d = match base {
            "none" | "buffered" => Durability::None,
            "direct" => Durability::Direct,
            "dsync" => Durability::Dsync,
            "direct-dsync" => Durability::DirectDsync,
            "fdatasync" => Durability::Fdatasync { every, direct: false },
            "direct-fdatasync" => Durability::Fdatasync { every, direct: true },
            "fsync" => Durability::Fsync { every, direct: false },
            "direct-fsync" => Durability::Fsync { every, direct: true },
            _ => {
                return Err(format!(
                    "{s:?} is not a durability mode (none, direct, dsync, direct-dsync, fdatasync[:N], direct-fdatasync[:N], fsync[:N], direct-fsync[:N])"
                ).into())
            }
        };
        if every != 1 && !matches!(d, Durability::Fdatasync { .. } | Durability::Fsync { .. }) {
            return Err(format!("{s:?}: only fdatasync and fsync take a count").into());
        }
        Ok(d)
    }

    pub fn direct(self) -> bool {
        matches!(
            self,
            Durability::Direct
                | Durability::DirectDsync
                | Durability::Fdatasync { direct: true, .. }
                | Durability::Fsync { direct: true, .. }
        )
    }

    pub fn dsync(self) -> bool {
        matches!(self, Durability::Dsync | Durability::DirectDsync)
    }

    /// The sync call after writes, and how often.
    pub fn sync_every(self) -> Option<(SyncCall, u32)> {
        match self {
            Durability::Fdatasync { every, .. } => Some((SyncCall::Fdatasync, every)),
            Durability::Fsync { every, .. } => Some((SyncCall::Fsync, every)),
            _ => None,
        }
    }

    /// Whether a completed write is on stable storage (given an honest device).
    pub fn durable(self) -> bool {
        !matches!(self, Durability::None | Durability::Direct)
            && !matches!(self, Durability::Fdatasync { every, .. } | Durability::Fsync { every, .. } if every > 1)
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (name, every) = match *self {
            Durability::None => ("none", 1),
            Durability::Direct => ("direct", 1),
            Durability::Dsync => ("dsync", 1),
            Durability::DirectDsync => ("direct-dsync", 1),
            Durability::Fdatasync { every, direct } => (
                if direct {
                    "direct-fdatasync"
                } else {
                    "fdatasync"
                },
                every,
            ),
            Durability::Fsync { every, direct } => {
                (if direct { "direct-fsync" } else { "fsync" }, every)
            }
        };
        if every > 1 {
            write!(f, "{name}:{every}")
        } else {
            write!(f, "{name}")
        }
    }
}

impl Serialize for Durability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncCall {
    Fdatasync,
    Fsync,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    Random,
    Sequential,
}

/// Bursts: `ios` I/Os per thread, then `think` idle (diskspd -i/-j, fio thinktime).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Burst {
    pub ios: u32,
    #[serde(serialize_with = "ser_secs")]
    pub think: Duration,
}

pub(crate) fn ser_secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Job {
    /// The preset it came from, or `custom`.
    pub name: String,
    pub targets: Vec<PathBuf>,
    pub engine: EngineKind,
    #[serde(rename = "duration_s", serialize_with = "ser_secs")]
    pub duration: Duration,
    #[serde(rename = "warmup_s", serialize_with = "ser_secs")]
    pub warmup: Duration,
    #[serde(rename = "cooldown_s", serialize_with = "ser_secs")]
    pub cooldown: Duration,
    /// Threads per target.
    pub threads: u32,
    /// Outstanding I/Os per thread (queue depth).
    pub queue_depth: u32,
    pub block_size: u32,
    pub pattern: Pattern,
    /// Sequential step between I/Os of one thread (default: the block size; 0 rewrites the
    /// same block, as small commits rewrite the current WAL page).
    pub stride: Option<u64>,
    /// Random offsets are multiples of this (default: the block size).
    pub align: Option<u64>,
    /// Percent of I/Os that are writes.
    pub write_pct: u8,
    /// Size of files plumb creates; existing targets keep their size.
    pub file_size: u64,
    pub durability: Durability,
    pub rate: Option<Rate>,
    /// The rate applies to each thread rather than to the whole job.
    pub rate_per_thread: bool,
    pub burst: Option<Burst>,
    pub seed: u64,
    /// Completions to wait for per io_uring_enter (1: each I/O timed as it completes).
    pub batch_complete: u32,
    /// Requests handed to the kernel together (fio's iodepth_batch_submit); None: a quarter of
    /// the queue depth, at least 1.
    pub batch_submit: Option<u32>,
}

impl Job {
    pub fn new(name: &str) -> Job {
        Job {
            name: name.to_string(),
            targets: Vec::new(),
            engine: EngineKind::IoUring,
            duration: Duration::from_secs(15),
            warmup: Duration::from_secs(2),
            cooldown: Duration::ZERO,
            threads: 1,
            queue_depth: 1,
            block_size: 8192,
            pattern: Pattern::Random,
            stride: None,
            align: None,
            write_pct: 0,
            file_size: 1 << 30,
            durability: Durability::Direct,
            rate: None,
            rate_per_thread: false,
            burst: None,
            seed: 0x706c756d62,
            batch_complete: 1,
            batch_submit: None,
        }
    }

    pub(crate) fn submit_batch(&self) -> u32 {
        self.batch_submit
            .unwrap_or(self.queue_depth / 4)
            .clamp(1, self.queue_depth.max(1))
    }

    /// Check the job is internally consistent; the message names the offending setting.
    pub fn validate(&self) -> Result<(), JobError> {
        if self.targets.is_empty() {
            return Err("no target file or device given".into());
        }
        if self.threads == 0 || self.threads > 1024 {
            return Err(format!("--threads {} must be 1 to 1024", self.threads).into());
        }
        if self.queue_depth == 0 || self.queue_depth > 4096 {
            return Err(format!("--qd {} must be 1 to 4096", self.queue_depth).into());
        }
        if self.block_size == 0 || self.block_size > 64 << 20 {
            return Err(format!("--bs {} must be 1 byte to 64 MiB", self.block_size).into());
        }
        if self.durability.direct() && !self.block_size.is_multiple_of(512) {
            return Err(format!(
                "--bs {} is not a multiple of 512: O_DIRECT ({}) needs sector-aligned sizes",
                self.block_size, self.durability
            )
            .into());
        }
        if self.write_pct > 100 {
            return Err(format!("--write-pct {} must be 0 to 100", self.write_pct).into());
        }
        if self.duration.is_zero() {
            return Err("--duration must be more than 0".into());
        }
        // The run clock counts nanoseconds in 64 bits; nothing plumb runs lasts a year.
        let total = self.warmup.as_secs_f64()
            + self.duration.as_secs_f64()
            + self.cooldown.as_secs_f64()
            + self.burst.map_or(0.0, |b| b.think.as_secs_f64());
        if total > plumb_sys::units::MAX_DURATION_S {
            return Err(format!(
                "warm-up, duration and cool-down add up to {total:.0} s: longer than plumb runs anything (365 days at most)"
            ).into());
        }
        if (self.block_size as u64) > self.file_size {
            return Err(format!(
                "--bs {} is larger than --size {}",
                self.block_size, self.file_size
            )
            .into());
        }
        if self.stride == Some(0) && self.pattern != Pattern::Sequential {
            return Err(
                "--stride 0 (the same block again and again) needs --pattern sequential".into(),
            );
        }
        if let Some(a) = self.align {
            if a == 0 {
                return Err("--align must be more than 0".into());
            }
        }
        if let Some(b) = self.batch_submit {
            if b == 0 || b > self.queue_depth {
                return Err(format!(
                    "--batch-submit {b} must be 1 to the queue depth {}",
                    self.queue_depth
                )
                .into());
            }
        }
        if self.batch_complete == 0 || self.batch_complete > self.queue_depth {
            return Err(format!(
                "--batch-complete {} must be 1 to the queue depth {}",
                self.batch_complete, self.queue_depth
            )
            .into());
        }
        Ok(())
    }
}

/// A named database workload: what it models, and the job it runs.
pub struct Preset {
    pub name: &'static str,
    pub models: &'static str,
    pub make: fn() -> Job,
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "log-write",
        models: "transaction log / WAL writes: 1 thread, 1 outstanding, 60K sequential, O_DIRECT|O_DSYNC (the FUA path)",
        make: || Job {
            threads: 1,
            queue_depth: 1,
            block_size: 60 << 10,
            pattern: Pattern::Sequential,
            write_pct: 100,
            durability: Durability::DirectDsync,
            ..Job::new("log-write")
        },
    },
    Preset {
        name: "data-read",
        models: "buffer pool misses: 8K random reads, 32 outstanding, O_DIRECT",
        make: || Job {
            threads: 1,
            queue_depth: 32,
            block_size: 8 << 10,
            pattern: Pattern::Random,
            write_pct: 0,
            ..Job::new("data-read")
        },
    },
    Preset {
        name: "oltp-mix",
        models: "OLTP data files: 8K random, 70% reads / 30% writes, 2 threads x 8 outstanding, O_DIRECT",
        make: || Job {
            threads: 2,
            queue_depth: 8,
            block_size: 8 << 10,
            pattern: Pattern::Random,
            write_pct: 30,
            ..Job::new("oltp-mix")
        },
    },
    Preset {
        name: "backup-read",
        models: "a full backup reading data files: 512K sequential reads, 4 threads x 32 outstanding, O_DIRECT",
        make: || Job {
            threads: 4,
            queue_depth: 32,
            block_size: 512 << 10,
            pattern: Pattern::Sequential,
            write_pct: 0,
            ..Job::new("backup-read")
        },
    },
    Preset {
        name: "checkpoint-burst",
        models: "a checkpoint flushing dirty pages: 8K random writes in bursts of 2048 per thread, then 1 s idle; 2 threads x 16 outstanding, O_DIRECT",
        make: || Job {
            threads: 2,
            queue_depth: 16,
            block_size: 8 << 10,
            pattern: Pattern::Random,
            write_pct: 100,
            burst: Some(Burst {
                ios: 2048,
                think: Duration::from_secs(1),
            }),
            ..Job::new("checkpoint-burst")
        },
    },
    Preset {
        name: "spill-flood",
        models: "a sort or hash spill to temp files: 512K sequential writes, 4 threads x 4 outstanding, O_DIRECT",
        make: || Job {
            threads: 4,
            queue_depth: 4,
            block_size: 512 << 10,
            pattern: Pattern::Sequential,
            write_pct: 100,
            ..Job::new("spill-flood")
        },
    },
];

pub fn preset(name: &str) -> Option<Job> {
    PRESETS.iter().find(|p| p.name == name).map(|p| (p.make)())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durability_round_trips() {
        for s in [
            "none",
            "direct",
            "dsync",
            "direct-dsync",
            "fdatasync",
            "fdatasync:8",
            "direct-fdatasync",
            "fsync:2",
            "direct-fsync",
        ] {
            assert_eq!(Durability::parse(s).unwrap().to_string(), s);
        }
        assert!(Durability::parse("dsync:2").is_err());
        assert!(Durability::parse("fdatasync:0").is_err());
        assert!(Durability::parse("fua").is_err());
        assert!(Durability::parse("direct-dsync").unwrap().direct());
        assert!(Durability::parse("direct-dsync").unwrap().dsync());
        assert!(!Durability::parse("fdatasync:4").unwrap().durable());
        assert!(Durability::parse("fdatasync").unwrap().durable());
        assert!(!Durability::parse("direct").unwrap().durable());
    }

    #[test]
    fn presets_are_valid_and_named_for_their_job() {
        for p in PRESETS {
            let mut j = (p.make)();
            j.targets.push("x".into());
            j.validate().unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(j.name, p.name);
        }
        let lw = preset("log-write").unwrap();
        assert_eq!((lw.threads, lw.queue_depth, lw.block_size), (1, 1, 61440));
        assert_eq!(lw.durability, Durability::DirectDsync);
        assert!(preset("nope").is_none());
    }

    #[test]
    fn validation_names_the_setting() {
        let mut j = Job::new("custom");
        assert!(j.validate().unwrap_err().0.contains("no target"));
        j.targets.push("f".into());
        j.block_size = 1000;
        assert!(j.validate().unwrap_err().0.contains("--bs 1000"));
        j.block_size = 4096;
        j.queue_depth = 0;
        assert!(j.validate().unwrap_err().0.contains("--qd 0"));
    }
}
